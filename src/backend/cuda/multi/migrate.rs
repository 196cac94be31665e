//! Particles crossing slab borders (`kernels/migrate.cu`, `kernels/migrate.cuh`). Pass 1 packs
//! each particle whose new cell lies in another slab (40 B: velocity, position, global id) into
//! the send buffer for the nearer neighbour and frees its slot; the host reads the counts, the
//! packets cross on the copy streams (`transfer.rs`), and `mpc_immigrate` unpacks the arrivals
//! into free slots (then appends), bins them and adds them to the cell sums.

use std::sync::Arc;

use cudarc::driver::{CudaEvent, CudaStream, DevicePtr};

use super::ranks::Arrival;
use super::slab::Slab;
use super::transfer::{
    peer_copy_async, stage_to_device_async, stage_to_host_async, upload_pinned_async,
};
use super::{MultiCudaBackend, Transfer};
use crate::backend::cuda::contract::MPC_RECORD_WORDS;
use crate::backend::cuda::device::{drv, grid};
use crate::backend::cuda::fluid_view::FluidView;
use crate::backend::cuda::launch::DevPtr;
use crate::backend::cuda::params::KernelParams;
use crate::backend::cuda::params::MigrationArgs;
use crate::error::{MpcError, Result};
use crate::physics::StepPlan;

impl Slab {
    /// Before pass 1: reset the migration counters (the free-slot stack keeps its height);
    /// the kernels' migration arguments.
    pub(in crate::backend::cuda) fn begin_pass_one(
        &mut self,
        stream: &Arc<CudaStream>,
    ) -> Result<MigrationArgs> {
        // pinned, so the copy is queued without blocking; the previous one finished (the
        // host read the last step's counters after it)
        let init = self.counters_init.as_mut_slice().map_err(drv("pinned"))?;
        init.copy_from_slice(&[0, 0, self.free_slots as u32, 0]);
        stream
            .memcpy_htod(&self.counters_init, &mut self.counters)
            .map_err(drv("migration counters"))?;
        Ok(self.args)
    }

    /// After pass 1: queue the counters' copy to the host.
    pub(in crate::backend::cuda) fn end_pass_one(
        &mut self,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        stream
            .memcpy_dtoh(&self.counters, &mut self.counters_host)
            .map_err(drv("migration counters"))
    }
}

impl Slab {
    /// Unpack the particles sent from below (`from[0]`) and above (`from[1]`) into free slots
    /// (the stack holds `top` after pass 1), then append; bin them and add them to this step's
    /// cell sums (and to a rule's extended sums, `rule`: its code and their address, 0 and
    /// null under SRD). Returns the particle slots in use after.
    pub(in crate::backend::cuda) fn immigrate(
        &mut self,
        fluid: FluidView<'_>,
        p: &KernelParams,
        rule: (u32, u64),
        from: [usize; 2],
        top: usize,
    ) -> Result<usize> {
        let total = from[0] + from[1];
        let fill = total.min(top);
        let n_old = fluid.n;
        let n_new = n_old + total - fill;
        let dev = fluid.dev;
        if n_new > self.capacity {
            return Err(MpcError::Device(format!(
                "{}: {n_new} particle slots needed, {} allocated (the slab gained too many \
                 particles); fix: fewer GPUs or a smaller box",
                dev.describe(),
                self.capacity
            )));
        }
        let (rule, ext) = rule;
        let s = dev.stream.clone();
        let labels = self.args.ids;
        let mut first = 0u32;
        for (side, &count) in from.iter().enumerate() {
            if count == 0 {
                continue;
            }
            let (cu, fu, tu, nu) = (count as u32, fill as u32, top as u32, n_old as u32);
            let [px, py, pz] = &mut fluid.fluid.pos;
            let [vx, vy, vz] = &mut fluid.fluid.vel;
            // SAFETY: ext holds the rule's extended sums, p.n_cells × its stride doubles, or is
            // null with rule 0, then never dereferenced; ids the slab's labels, capacity slots,
            // or null without labels, then never written; recv holds `count` records, copied
            // in before this stream waited for them; the slots written are free
            // slots from the stack (below `top`) or n_old.. n_new, within the capacity checked
            // above, which every per-particle array holds; one thread per arrival.
            unsafe {
                dev.k
                    .immigrate(
                        &s,
                        grid(count),
                        p,
                        &self.recv[side],
                        &cu,
                        &first,
                        &fu,
                        &tu,
                        &nu,
                        px,
                        py,
                        pz,
                        vx,
                        vy,
                        vz,
                        &mut fluid.fluid.cellw,
                        &mut DevPtr::<u32>::new(labels),
                        &self.holes,
                        &mut fluid.cell.sums,
                        &mut self.counters,
                        &rule,
                        &mut DevPtr::<f64>::new(ext),
                    )
                    .map_err(drv("immigrate"))?;
            }
            first += count as u32;
        }
        self.free_slots = top - fill;
        Ok(n_new)
    }
}

impl MultiCudaBackend {
    /// After pass 1 and a wait for every GPU: the particles each slab sent down and up, and
    /// its free-slot stack height; an error if a send buffer overflowed.
    pub(super) fn read_migration_counts(&mut self) -> Result<(Vec<[usize; 2]>, Vec<usize>)> {
        let mut sent = vec![[0usize; 2]; self.slabs.len()];
        let mut tops = vec![0usize; self.slabs.len()];
        for (k, s) in self.slabs.iter_mut().enumerate() {
            let sl = s.slab.as_mut().expect("slab mode");
            let c = sl.counters_host.as_slice().map_err(drv("counters"))?;
            if c[3] & 1 != 0 {
                return Err(MpcError::Device(format!(
                    "{}: more particles left the slab in one step than its send buffer holds \
                     ({}); fix: a smaller time step h or fewer GPUs",
                    s.dev.describe(),
                    sl.send_capacity
                )));
            }
            sent[k] = [c[0] as usize, c[1] as usize];
            tops[k] = c[2] as usize;
        }
        Ok((sent, tops))
    }

    /// The exchange: the packets cross (between this process's GPUs, and through the host
    /// and the transport to other ranks' slabs), then each slab unpacks what its neighbours
    /// sent. `sent` and `tops` are indexed by this process's slabs.
    pub(super) fn exchange(
        &mut self,
        plan: &StepPlan,
        ns: usize,
        sent: &[[usize; 2]],
        tops: &[usize],
    ) -> Result<()> {
        self.lay_out_rank_messages(sent);
        let out_events = self.send_emigrants(sent)?;
        let arrivals = self.cross_ranks(sent)?;
        let chunk_events = out_events.1;
        let messages = self.rank_messages.take();
        let received = (0..self.slabs.len()).try_for_each(|j| {
            let mut remote = [Incoming::Host(&[]), Incoming::Host(&[])];
            for (side, r) in remote.iter_mut().enumerate() {
                *r = match (&arrivals[j][side], &messages) {
                    (Arrival::Message(words), Some(m)) => Incoming::Host(m.arrived(words.clone())?),
                    (Arrival::Message(_), None) => Incoming::Host(&[]),
                    (Arrival::Inbox { count, parity }, _) => {
                        let inbox = self
                            .rank_peers
                            .as_ref()
                            .and_then(|p| p.inbox(j, side, *parity));
                        let ptr = inbox.ok_or_else(|| {
                            MpcError::Device("an arrival in an inbox this slab lacks".into())
                        })?;
                        Incoming::Inbox { ptr, count: *count }
                    }
                };
            }
            self.receive_into(j, sent, &out_events.0, &chunk_events, &remote)
        });
        self.rank_messages = messages;
        received?;
        for (j, &top) in tops.iter().enumerate() {
            let mut from = [0usize; 2];
            for (side, f) in from.iter_mut().enumerate() {
                *f = match self.local(self.neighbour(self.first + j, side)) {
                    Some(n) => sent[n][1 - side],
                    None => arrivals[j][side].count(),
                };
            }
            self.migrated += (from[0] + from[1]) as u64;
            let be = &mut self.slabs[j];
            let p = be.params(plan, ns);
            let (fluid, f) = be.parts();
            let slab = f.slab.expect("slab mode");
            let rule = f
                .rules
                .map_or((0, 0), |r| r.arrival_args(&fluid.dev.stream));
            be.n = slab.immigrate(fluid, &p, rule, from, top)?;
        }
        Ok(())
    }

    /// Send each slab's packed emigrants to its neighbours on the copy streams (to another
    /// rank's slab: into pinned host memory). Returns each slab's event after its outgoing
    /// copies, which its own main stream also waits for (the next pass 1 refills the send
    /// buffers), and the host staging's chunk events. All GPUs' main streams are idle here
    /// (pass 1 was waited for).
    #[allow(clippy::type_complexity)]
    fn send_emigrants(
        &mut self,
        sent: &[[usize; 2]],
    ) -> Result<(Vec<Option<CudaEvent>>, Vec<[Vec<CudaEvent>; 2]>)> {
        let g = self.slabs.len();
        // Host: one event per chunk sent down, so the receiver's upload of a chunk overlaps the
        // download of the next (PCIe is full duplex, each GPU has copy engines both ways)
        let mut chunk_events: Vec<[Vec<CudaEvent>; 2]> =
            (0..g).map(|_| [Vec::new(), Vec::new()]).collect();
        let mut out_events: Vec<Option<CudaEvent>> = Vec::with_capacity(g);
        for (j, events) in chunk_events.iter_mut().enumerate() {
            out_events.push(self.send_from(j, sent[j], events)?);
        }
        Ok((out_events, chunk_events))
    }

    /// Outgoing from this process's slab j: device → peer (Peer) or device → pinned host
    /// (Host, or a neighbour on another rank) on its copy-out stream. Returns the event after
    /// its copies (None if it sent nothing), which its own main stream also waits for: the
    /// next pass 1 refills the send buffers.
    fn send_from(
        &mut self,
        j: usize,
        sent: [usize; 2],
        chunk_events: &mut [Vec<CudaEvent>; 2],
    ) -> Result<Option<CudaEvent>> {
        let src_ctx = self.slabs[j].dev.ctx.clone();
        let out = self.slab_of(j).copy_out.clone();
        let mut any = false;
        for (dir, &count) in sent.iter().enumerate() {
            if count == 0 {
                continue;
            }
            any = true;
            let words = count * MPC_RECORD_WORDS;
            // raw addresses: event tracking is off, the guards do nothing
            let src_ptr = self.slab_of(j).send[dir].device_ptr(&out).0;
            let dst = self.local(self.neighbour(self.first + j, dir));
            match (self.transfer, dst) {
                (Transfer::Peer, Some(d)) => {
                    let dst_ctx = self.slabs[d].dev.ctx.clone();
                    let dst_ptr = self.slab_of(d).recv[1 - dir].device_ptr(&out).0;
                    // SAFETY: the send buffer holds `count` records of `words` u64 in all
                    // (count <= send_capacity, checked by the overflow flag) and so does the
                    // neighbour's receive buffer; both live as long as the backend and are
                    // next touched after the receiver waited for `out`'s event (arrivals) and
                    // this slab's main stream did (the next pass 1 refills the send buffer).
                    unsafe {
                        peer_copy_async(&src_ctx, src_ptr, &dst_ctx, dst_ptr, words * 8, &out)?
                    };
                }
                (_, None)
                    if self
                        .rank_peers
                        .as_ref()
                        .is_some_and(|p| p.outbox(j, dir).is_some()) =>
                {
                    let peers = self.rank_peers.as_ref().expect("checked");
                    let inbox = peers.outbox(j, dir).expect("checked");
                    // SAFETY: the send buffer holds `count` records (as above) and is refilled
                    // only by the next pass 1, which waits for `out`; the neighbour rank reads
                    // this inbox only after this rank waited for `out` (`cross_ranks`) and
                    // sent the header, and this inbox is filled again two steps later (the
                    // parity rule of `rank_peers`).
                    unsafe { inbox.send(src_ptr, count, &out)? };
                }
                _ => {
                    let host = match (dst, self.rank_messages.as_mut()) {
                        // another rank's slab: straight into the outgoing message
                        (None, Some(m)) => {
                            let at = m.records_at(j, dir).ok_or_else(|| {
                                MpcError::Device(
                                    "a packet with no place in the rank message".into(),
                                )
                            })?;
                            m.send_slot(at, words)?
                        }
                        _ => {
                            let stage = self.slabs[j]
                                .slab
                                .as_mut()
                                .and_then(|s| s.staging.as_mut())
                                .ok_or_else(|| MpcError::Device("no staging buffers".into()))?;
                            &mut stage[dir].as_mut_slice().map_err(drv("staging"))?[..words]
                        }
                    };
                    // SAFETY: `words` u64 of the send buffer (as above) into pinned host
                    // memory: this slab's staging, or its place in the rank message. The host
                    // reads it only after waiting for `out` (`cross_ranks`) or through the
                    // receiver's copy ordered after the chunk's event, and refills it only in
                    // the next step's exchange, after every GPU's main stream (which waits for
                    // `out`) was synchronised.
                    unsafe {
                        stage_to_host_async(&src_ctx, src_ptr, host, &out, &mut chunk_events[dir])?
                    };
                }
            }
        }
        if !any {
            return Ok(None);
        }
        let ev = out.record_event(None).map_err(drv("event"))?;
        // the next pass 1 refills the send buffers
        self.slabs[j].dev.stream.wait(&ev).map_err(drv("event"))?;
        Ok(Some(ev))
    }

    /// Incoming to this process's slab j: its main stream waits for its local neighbours'
    /// outgoing copies (and, through host memory, copies the staged particles up on its own
    /// copy stream); `remote` holds the records that came from another rank's slab below and
    /// above, copied up the same way.
    fn receive_into(
        &mut self,
        j: usize,
        sent: &[[usize; 2]],
        out_events: &[Option<CudaEvent>],
        chunk_events: &[[Vec<CudaEvent>; 2]],
        remote: &[Incoming<'_>; 2],
    ) -> Result<()> {
        let main = self.slabs[j].dev.stream.clone();
        let inn = self.slab_of(j).copy_in.clone();
        let mut staged_in = false;
        for (side, incoming) in remote.iter().enumerate() {
            let dir = 1 - side; // the direction the sender sent in
            let Some(src) = self.local(self.neighbour(self.first + j, side)) else {
                let arrived = match *incoming {
                    Incoming::Host(words) => words,
                    Incoming::Inbox { ptr, count } => {
                        staged_in |= self.copy_from_inbox(j, side, ptr, count)?;
                        continue;
                    }
                };
                if arrived.is_empty() {
                    continue;
                }
                let dst_ptr = self.slab_of(j).recv[side].device_ptr(&inn).0;
                let n = arrived.len();
                if n > self.slab_of(j).send_capacity * MPC_RECORD_WORDS {
                    return Err(MpcError::Device(
                        "arrivals beyond the receive buffer".into(),
                    ));
                }
                let dst_ctx = &self.slabs[j].dev.ctx;
                // SAFETY: n words (checked against the receive buffer's send_capacity records
                // just now) of the pinned received message, which stays alive with the backend
                // and is rewritten only by the next step's exchange, after this slab's main
                // stream (which joins `inn` below) was synchronised.
                unsafe { upload_pinned_async(dst_ctx, arrived, dst_ptr, &inn)? };
                staged_in = true;
                continue;
            };
            let count = sent[src][dir];
            if count == 0 {
                continue;
            }
            let ev = out_events[src].as_ref().expect("recorded above");
            match self.transfer {
                Transfer::Peer => main.wait(ev).map_err(drv("event"))?,
                Transfer::Host => {
                    let words = count * MPC_RECORD_WORDS;
                    let dst_ptr = self.slab_of(j).recv[side].device_ptr(&inn).0;
                    let stage = self.slab_of(src).staging.as_ref().expect("host transfer");
                    let host = &stage[dir].as_slice().map_err(drv("staging"))?[..words];
                    let dst_ctx = &self.slabs[j].dev.ctx;
                    // SAFETY: the sender's staging (pinned, alive with the backend, refilled
                    // only in the next step's exchange, after this slab's main stream, which
                    // joins `inn` below, was synchronised) into this slab's receive buffer of
                    // send_capacity records >= `count`.
                    unsafe {
                        stage_to_device_async(
                            dst_ctx,
                            host,
                            dst_ptr,
                            &inn,
                            &chunk_events[src][dir],
                        )?
                    };
                    staged_in = true;
                }
            }
        }
        if staged_in {
            main.join(&inn).map_err(drv("event"))?;
        }
        Ok(())
    }

    /// `count` records from local slab j's inbox at `ptr` into its receive buffer on `side`,
    /// on its copy-in stream; whether anything was queued.
    fn copy_from_inbox(&self, j: usize, side: usize, ptr: u64, count: usize) -> Result<bool> {
        if count == 0 {
            return Ok(false);
        }
        let sl = self.slab_of(j);
        if count > sl.send_capacity {
            return Err(MpcError::Device(
                "arrivals beyond the receive buffer".into(),
            ));
        }
        let inn = sl.copy_in.clone();
        let dst_ptr = sl.recv[side].device_ptr(&inn).0;
        self.slabs[j]
            .dev
            .ctx
            .bind_to_thread()
            .map_err(drv("bind"))?;
        // SAFETY: the inbox and the receive buffer both hold send_capacity >= count records on
        // this slab's GPU (the inbox was filled by the neighbour rank, whose copy finished
        // before it sent the header that named it); `inn` belongs to this context, which is
        // current; the main stream joins `inn` before anything reads the receive buffer.
        unsafe {
            cudarc::driver::sys::cuMemcpyDtoDAsync_v2(
                dst_ptr,
                ptr,
                count * MPC_RECORD_WORDS * 8,
                inn.cu_stream(),
            )
        }
        .result()
        .map_err(drv("inbox copy"))?;
        Ok(true)
    }
}

/// Records from another rank for one side of a slab: in the received host message, or in the
/// slab's inbox (a rank of this host copied them there).
#[derive(Clone, Copy)]
enum Incoming<'a> {
    Host(&'a [u64]),
    Inbox { ptr: u64, count: usize },
}
