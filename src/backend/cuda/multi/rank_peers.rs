//! Packets between MPI ranks of one host, GPU to GPU (`MPCBOX_RANK_PEER_COPIES`, on by
//! default). A slab whose neighbour belongs to another rank on the same machine gets two
//! *inboxes* per such side, plain device allocations exported with `cuIpcGetMemHandle`; the
//! neighbour's rank opens them (`cuIpcOpenMemHandle`) and, each step, copies its emigrants
//! straight into one of them on its copy-out stream (NVLink where the GPUs have it). Only the
//! 4-word header still goes through the transport; it names the inbox, and the receiver copies
//! the records from there into its receive buffer on its own GPU. This is what a CUDA-aware
//! MPI does between ranks of one node; Debian's OpenMPI is not CUDA-aware, and its
//! shared-memory copies through the host took many times as long per step as one process's
//! peer copies.
//!
//! Why two inboxes: a sender fills inbox `step % 2`. It can fill the same inbox again only
//! two steps later, after it has passed the next step's first collective, which every rank
//! enters only after waiting for its GPUs' pass 1; the receiver's copy out of the inbox is
//! ordered before that pass 1 on its main stream, so it is done by then.
//!
//! Same machine: the same Linux boot id (`/proc/sys/kernel/random/boot_id`), so containers
//! of one host sharing a hostname or hosts sharing one by chance are told apart correctly.
//! Opening is collective and all-or-nothing: if any rank cannot open a handle, every rank
//! sends through the transport as before.

use std::sync::Arc;

use cudarc::driver::{sys, CudaContext, CudaStream};

use crate::backend::cuda::device::drv;
use crate::backend::cuda::CudaBackend;
use crate::error::{MpcError, Result};
use crate::ranks::Transport;

use crate::backend::cuda::contract::MPC_RECORD_WORDS;

/// Values per exported inbox in the setup message: receiving slab (global), its side, parity,
/// capacity in records, then the 64-byte handle as 8 words.
const HANDLE_VALUES: usize = 12;

/// Whether ranks of one host copy packets GPU to GPU (`MPCBOX_RANK_PEER_COPIES`).
pub fn peer_copies_wanted() -> bool {
    peer_copies_from(crate::knobs::knobs().get("MPCBOX_RANK_PEER_COPIES"))
}

fn peer_copies_from(value: Option<&str>) -> bool {
    value != Some("off")
}

/// A device allocation of this process exported to another rank.
struct Inbox {
    ctx: Arc<CudaContext>,
    ptr: sys::CUdeviceptr,
}

impl Drop for Inbox {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `ptr` came from cuMemAlloc in `ctx` and is freed once, here; the
            // senders copy into it only during steps, which have all ended when the backend
            // (which owns this) is dropped.
            unsafe { sys::cuMemFree_v2(self.ptr) };
        }
    }
}

/// Another rank's inbox, opened in the context of the local slab that sends into it.
pub(super) struct Outbox {
    ctx: Arc<CudaContext>,
    ptr: sys::CUdeviceptr,
    /// Records it holds.
    capacity: usize,
}

impl Drop for Outbox {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `ptr` was returned by cuIpcOpenMemHandle in `ctx` and is closed once.
            unsafe { sys::cuIpcCloseMemHandle(self.ptr) };
        }
    }
}

impl Outbox {
    /// Queue the copy of `count` records from `src` (this slab's send buffer) into the inbox
    /// on `stream` (the sender's copy-out stream, of this outbox's context).
    ///
    /// # Safety
    /// `src` must hold `count` records and stay untouched until `stream` has done the copy;
    /// the inbox must not be read by its owner meanwhile (the parity rule in the module doc).
    pub(super) unsafe fn send(&self, src: u64, count: usize, stream: &CudaStream) -> Result<()> {
        if count > self.capacity {
            return Err(MpcError::Device(format!(
                "{count} particles for a neighbour rank's inbox of {} (please report it)",
                self.capacity
            )));
        }
        self.ctx.bind_to_thread().map_err(drv("bind"))?;
        // SAFETY: both ranges hold `count` records (checked against the inbox's capacity; the
        // caller vouches for `src`); the opened pointer is valid in this context, which is
        // current, and `stream` belongs to it.
        let r = unsafe {
            sys::cuMemcpyDtoDAsync_v2(
                self.ptr,
                src,
                count * MPC_RECORD_WORDS * 8,
                stream.cu_stream(),
            )
        };
        r.result().map_err(drv("copy to a neighbour rank's GPU"))
    }
}

/// The inboxes of this process's slabs and the opened inboxes of its neighbours' ranks.
pub(super) struct RankPeers {
    /// `inbox[j][side][parity]` of local slab j.
    inbox: Vec<[[Option<Inbox>; 2]; 2]>,
    /// `outbox[j][dir][parity]`: the inbox local slab j sends into in direction `dir`.
    outbox: Vec<[[Option<Outbox>; 2]; 2]>,
    /// The inbox this step's packets go into.
    parity: usize,
}

/// An id of this machine's running kernel: ranks with equal ids share the host.
fn machine_id() -> Option<u64> {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    // FNV-1a, kept to 52 bits so the id travels exactly as an f64
    let h = boot.trim().bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    Some(h & ((1 << 52) - 1))
}

/// A device allocation of `bytes` in `ctx` and its IPC handle.
fn exported(ctx: &Arc<CudaContext>, bytes: usize) -> Result<(Inbox, sys::CUipcMemHandle)> {
    ctx.bind_to_thread().map_err(drv("bind"))?;
    let mut ptr: sys::CUdeviceptr = 0;
    // SAFETY: a valid out-pointer, `ctx` is current; the allocation is owned by the Inbox.
    unsafe { sys::cuMemAlloc_v2(&mut ptr, bytes.max(8)) }
        .result()
        .map_err(drv("rank inbox"))?;
    let inbox = Inbox {
        ctx: ctx.clone(),
        ptr,
    };
    let mut handle = sys::CUipcMemHandle { reserved: [0; 64] };
    // SAFETY: `ptr` is a live cuMemAlloc allocation of the current context.
    unsafe { sys::cuIpcGetMemHandle(&mut handle, ptr) }
        .result()
        .map_err(drv("rank inbox handle"))?;
    Ok((inbox, handle))
}

fn handle_words(h: &sys::CUipcMemHandle) -> [f64; 8] {
    let mut w = [0.0; 8];
    for (k, v) in w.iter_mut().enumerate() {
        let mut b = [0u8; 8];
        for (i, x) in b.iter_mut().enumerate() {
            *x = h.reserved[8 * k + i] as u8;
        }
        *v = f64::from_bits(u64::from_le_bytes(b));
    }
    w
}

fn handle_from(words: &[f64]) -> sys::CUipcMemHandle {
    let mut h = sys::CUipcMemHandle { reserved: [0; 64] };
    for (k, v) in words.iter().enumerate().take(8) {
        for (i, x) in v.to_bits().to_le_bytes().iter().enumerate() {
            h.reserved[8 * k + i] = *x as _;
        }
    }
    h
}

/// The box's slabs as this process sees them: its own `first..first + slabs.len()`, and the
/// rank holding each (also `MultiCudaBackend`'s neighbours and local indices).
pub(super) struct SlabRing<'a> {
    pub(super) slabs: &'a [CudaBackend],
    pub(super) first: usize,
    pub(super) slab_rank: &'a [usize],
}

impl SlabRing<'_> {
    /// The slab of the box below (dir 0) or above (dir 1) slab k, periodically.
    pub(super) fn neighbour(&self, k: usize, dir: usize) -> usize {
        let g = self.slab_rank.len();
        if dir == 0 {
            (k + g - 1) % g
        } else {
            (k + 1) % g
        }
    }

    /// Slab k of the box as an index into this process's slabs (None: another rank's).
    pub(super) fn local(&self, k: usize) -> Option<usize> {
        k.checked_sub(self.first).filter(|&j| j < self.slabs.len())
    }
}

impl RankPeers {
    /// Collective over `transport` (every rank calls it at the same point when the box is cut
    /// over several ranks): export inboxes of `send_capacity` records for the sides whose
    /// neighbour is on another rank of this machine, open the neighbours' ones. None where
    /// peer copies are switched off on any rank, no two ranks share a machine, or any rank
    /// failed to open a handle (every rank then sends through the transport).
    pub(super) fn open(
        ring: &SlabRing<'_>,
        transport: &dyn Transport,
        send_capacity: usize,
    ) -> Result<Option<RankPeers>> {
        let ranks = transport.ranks();
        let me = transport.rank();
        // every rank decides alike: a rank that opts out or cannot tell its machine vetoes
        let id = machine_id();
        let mut veto = [f64::from(u8::from(!peer_copies_wanted() || id.is_none()))];
        transport.sum(&mut veto)?;
        if veto[0] > 0.0 {
            return Ok(None);
        }
        let ids = transport.gather(&[id.map_or(-1.0, |v| v as f64)])?;
        if ids.len() != ranks {
            return Ok(None);
        }
        let same_host = |r: usize| r != me && ids[r] == ids[me];
        let bytes = send_capacity * MPC_RECORD_WORDS * 8;
        let g = ring.slabs.len();
        let mut peers = RankPeers {
            inbox: (0..g).map(|_| Default::default()).collect(),
            outbox: (0..g).map(|_| Default::default()).collect(),
            parity: 0,
        };
        let mut out: Vec<Vec<f64>> = vec![Vec::new(); ranks];
        let mut failed = 0.0;
        'export: for j in 0..g {
            let k = ring.first + j;
            for side in 0..2 {
                let from = ring.neighbour(k, side);
                let r = ring.slab_rank[from];
                if !same_host(r) {
                    continue;
                }
                for parity in 0..2 {
                    match exported(&ring.slabs[j].dev.ctx, bytes) {
                        Ok((inbox, handle)) => {
                            let head = [k as f64, side as f64, parity as f64];
                            out[r].extend(head);
                            out[r].push(send_capacity as f64);
                            out[r].extend(handle_words(&handle));
                            peers.inbox[j][side][parity] = Some(inbox);
                        }
                        Err(e) => {
                            tracing::warn!("rank {me}: no GPU-to-GPU packets: {e}");
                            failed = 1.0;
                            break 'export;
                        }
                    }
                }
            }
        }
        let got = transport.exchange(&out)?;
        if failed == 0.0 {
            failed = peers.open_all(ring, &got, me);
        }
        let mut any_failed = [failed];
        transport.sum(&mut any_failed)?;
        let links = peers.outbox.iter().flatten().flatten().flatten().count();
        let mut any_link = [links as f64];
        transport.sum(&mut any_link)?;
        if any_failed[0] > 0.0 || any_link[0] == 0.0 {
            return Ok(None);
        }
        Ok(Some(peers))
    }

    /// Open the inboxes described in `got` (from the setup exchange); 1.0 if one failed.
    fn open_all(&mut self, ring: &SlabRing<'_>, got: &[f64], me: usize) -> f64 {
        for m in got.chunks(HANDLE_VALUES) {
            if m.len() < HANDLE_VALUES {
                tracing::warn!("rank {me}: a truncated inbox message");
                return 1.0;
            }
            let (k, side, parity) = (m[0] as usize, m[1] as usize, m[2] as usize);
            let capacity = m[3] as usize;
            let from = ring.neighbour(k, side);
            let Some(j) = ring.local(from).filter(|_| side < 2 && parity < 2) else {
                tracing::warn!("rank {me}: a malformed inbox message (slab {k}, side {side})");
                return 1.0;
            };
            let ctx = ring.slabs[j].dev.ctx.clone();
            let mut ptr: sys::CUdeviceptr = 0;
            let flags = sys::CUipcMem_flags_enum::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32;
            let opened = ctx.bind_to_thread().is_ok()
                // SAFETY: a valid out-pointer; the handle was made by another process of this
                // machine for a live allocation; the mapping is owned by the Outbox.
                && unsafe { sys::cuIpcOpenMemHandle_v2(&mut ptr, handle_from(&m[4..]), flags) }
                    .result()
                    .is_ok();
            if !opened {
                tracing::warn!("rank {me}: could not open slab {k}'s inbox; packets go by MPI");
                return 1.0;
            }
            let dir = 1 - side;
            self.outbox[j][dir][parity] = Some(Outbox { ctx, ptr, capacity });
        }
        0.0
    }

    /// Move on to the next step's inboxes; returns the parity this step uses.
    pub(super) fn next_step(&mut self) -> usize {
        self.parity ^= 1;
        self.parity
    }

    /// Where local slab j's packet in direction `dir` goes this step, if by peer copy.
    pub(super) fn outbox(&self, j: usize, dir: usize) -> Option<&Outbox> {
        self.outbox[j][dir][self.parity].as_ref()
    }

    /// The device address of local slab j's inbox on `side` for `parity` (None: not a peer
    /// link, a malformed header).
    pub(super) fn inbox(&self, j: usize, side: usize, parity: usize) -> Option<u64> {
        self.inbox
            .get(j)?
            .get(side)?
            .get(parity)?
            .as_ref()
            .map(|b| b.ptr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_travel_bit_for_bit_as_values() {
        let mut h = sys::CUipcMemHandle { reserved: [0; 64] };
        for (i, x) in h.reserved.iter_mut().enumerate() {
            *x = (i as u8).wrapping_mul(37).wrapping_add(200) as _;
        }
        let back = handle_from(&handle_words(&h));
        assert_eq!(back.reserved, h.reserved);
    }

    #[test]
    fn every_peer_copies_value_parses() {
        let on: Vec<bool> = crate::knobs::RANK_PEER_COPIES
            .iter()
            .map(|v| peer_copies_from(Some(v)))
            .collect();
        assert_eq!(on, [true, false], "on, off");
        assert!(peer_copies_from(None), "on by default");
    }

    #[test]
    fn the_machine_id_is_stable_and_fits_an_f64() {
        if let Some(id) = machine_id() {
            assert_eq!(Some(id), machine_id());
            assert_eq!((id as f64) as u64, id);
        }
    }
}
