//! A [`SlabMd`](super::SlabMd) over MPI ranks: each rank holds the slabs of its block of the
//! box (`SlabPlace::rank`) on its own GPUs, and an exchange with a slab of another rank is
//! staged through pinned host memory. The sender packs with the same kernel as between slabs
//! of one process (`md_slab_pack`), the host reads the count with the step's flags (the one
//! wait it already has) and copies just those records from the GPU straight into their place
//! in one pinned message laid out in rank order, each link's behind a 3-value header (sender
//! slab, receiving slab or [`GATHER`], count); one collective exchange carries every rank's
//! records (its counts' half also carries each rank's list-rebuild wish, so agreeing on a
//! rebuild costs no collective of its own), and the receiver uploads them from the pinned
//! receive buffer and `md_slab_unpack` writes them at their beads' indices.
//!
//! Gathers (observables, checkpoints, GSD frames) send each slab's owned beads to the first
//! slab of *every* rank, so every rank computes the same observables from the same beads and
//! rank 0 writes them.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, PinnedHostSlice};

use super::super::{drv, GpuMd, MD_FLAG_COUNTS};
use super::exchange::{
    pack_records, take_slot, unpack_records, zero_counts, Records, SlabSend, Topology,
};
use crate::backend::cuda::contract::MD_SLAB_WORDS;
use crate::error::{MpcError, Result};
use crate::ranks::Transport;

/// Values before each link's records: sender slab (global), receiving slab (global, or
/// [`GATHER`]), record count.
const HEADER: usize = 3;

/// The receiving slab of a gather's records: the first slab of every rank.
const GATHER: f64 = -1.0;

/// One outgoing side: a local slab's records for a slab of another rank (`to`), or for every
/// other rank's first slab (a gather: `to` None).
struct Outgoing {
    from: usize,
    to: Option<usize>,
    records: Records,
    send: CudaSlice<f64>,
    /// Records packed by the last exchange.
    count: usize,
}

/// One incoming side: records from slab `from` of another rank into local slab `to`.
struct Incoming {
    from: usize,
    gather: bool,
    to: usize,
    recv: CudaSlice<f64>,
    cap: usize,
    count: CudaSlice<u32>,
}

/// The links of this process's slabs to other ranks' slabs, and the transport they cross by.
pub(super) struct RankLinks {
    transport: Box<dyn Transport>,
    /// The rank holding each slab of the box.
    slab_rank: Vec<usize>,
    /// The box's index of this process's first slab.
    first: usize,
    neighbours: Vec<Outgoing>,
    gathers: Vec<Outgoing>,
    incoming: Vec<Incoming>,
    /// The process's context (pinned memory usable by all its GPUs is allocated in it).
    ctx: Arc<CudaContext>,
    /// The outgoing message (records copied in by the GPUs) and the incoming one (uploaded
    /// from by the GPUs), grown as needed.
    send: Staging,
    recv: Staging,
    /// Values to each rank this exchange.
    counts: Vec<usize>,
}

/// A pinned host buffer, grown on demand.
struct Staging(Option<PinnedHostSlice<f64>>);

impl Staging {
    /// Room for `words` values (a larger buffer, contents dropped, when it has less).
    fn room(&mut self, ctx: &Arc<CudaContext>, words: usize) -> Result<&mut PinnedHostSlice<f64>> {
        if self.0.as_ref().is_none_or(|b| b.len() < words) {
            self.0 = None; // freed before the larger one is taken
            let len = (words + words / 4).max(4096);
            let flags = cudarc::driver::sys::CU_MEMHOSTALLOC_PORTABLE;
            // SAFETY: uninitialised pinned memory: the send buffer's values are written (headers
            // by the host, records by device-to-host copies that the host waits for) before
            // the transport reads them; the receive buffer is written by the transport before
            // anything reads it, and only the values it received are read.
            let b = unsafe { ctx.alloc_pinned_with_flags::<f64>(len, flags) }
                .map_err(drv("pinned MD messages"))?;
            self.0 = Some(b);
        }
        Ok(self.0.as_mut().expect("allocated above"))
    }
}

impl RankLinks {
    /// The cross-rank sides of `topo` (and a gather link from every local slab), or None in
    /// one process.
    pub(super) fn new(
        slabs: &[GpuMd],
        topo: &mut Topology,
        slab_rank: Vec<usize>,
        first: usize,
        transport: Box<dyn Transport>,
    ) -> Result<Option<RankLinks>> {
        if transport.ranks() == 1 {
            return Ok(None);
        }
        let alloc = |g: &GpuMd, cap: usize| {
            g.stream
                .alloc_zeros::<f64>(cap * MD_SLAB_WORDS)
                .map_err(drv("alloc"))
        };
        let mut neighbours = Vec::new();
        for &(from, to, band, slot) in &topo.outgoing {
            let records = Records {
                band,
                cap: topo.cap,
                slot,
            };
            let send = alloc(&slabs[from], topo.cap)?;
            neighbours.push(Outgoing {
                from,
                to: Some(to),
                records,
                send,
                count: 0,
            });
        }
        let mut gathers = Vec::new();
        for (from, g) in slabs.iter().enumerate() {
            let records = Records {
                band: [f64::NEG_INFINITY, f64::INFINITY],
                cap: 1024,
                slot: take_slot(&mut topo.slots, from)?,
            };
            gathers.push(Outgoing {
                from,
                to: None,
                records,
                send: alloc(g, 1024)?,
                count: 0,
            });
        }
        let mut incoming = Vec::new();
        for &(from, to) in &topo.incoming {
            incoming.push(Incoming::new(&slabs[to], from, false, to, topo.cap)?);
        }
        let ranks = transport.ranks();
        Ok(Some(RankLinks {
            transport,
            slab_rank,
            first,
            neighbours,
            gathers,
            incoming,
            ctx: slabs[0].stream.context().clone(),
            send: Staging(None),
            recv: Staging(None),
            counts: vec![0; ranks],
        }))
    }

    /// Pack the records of every outgoing side (neighbours, or gathers) on its slab's stream;
    /// their count words must be zero.
    pub(super) fn pack(
        &mut self,
        slabs: &mut [GpuMd],
        vel_before: &[CudaSlice<f64>],
        what: SlabSend,
        gather: bool,
    ) -> Result<()> {
        let outs = if gather {
            &mut self.gathers
        } else {
            &mut self.neighbours
        };
        for o in outs.iter_mut() {
            let g = &mut slabs[o.from];
            pack_records(g, &vel_before[o.from], what, o.records, &mut o.send, false)?;
        }
        Ok(())
    }

    /// After [`RankLinks::pack`] and the flags' read (`flags`, per local slab): sides whose
    /// count exceeded their buffer grow and pack again; the records go down into the pinned
    /// message, cross in one exchange, and what arrives is uploaded and unpacked on the
    /// receiving slabs' streams. Returns whether any rank passed `wish` (a list rebuild).
    pub(super) fn cross(
        &mut self,
        slabs: &mut [GpuMd],
        vel_before: &[CudaSlice<f64>],
        (what, gather): (SlabSend, bool),
        flags: &mut [Vec<u32>],
        wish: bool,
    ) -> Result<bool> {
        let outs = if gather {
            &mut self.gathers
        } else {
            &mut self.neighbours
        };
        for o in outs.iter_mut() {
            let word = MD_FLAG_COUNTS + o.records.slot;
            let mut m = flags[o.from][word] as usize;
            if m > o.records.cap {
                o.records.cap = m + m / 4 + 256;
                o.send = slabs[o.from]
                    .stream
                    .alloc_zeros::<f64>(o.records.cap * MD_SLAB_WORDS)
                    .map_err(drv("alloc"))?;
                let g = &mut slabs[o.from];
                pack_records(g, &vel_before[o.from], what, o.records, &mut o.send, true)?;
                flags[o.from] = g.read_flags()?;
                // the next exchange finds its counts zero
                zero_counts(g)?;
                m = flags[o.from][word] as usize;
            }
            o.count = m;
        }
        // the message in rank order: each link's header, then its records copied in by the GPU
        let me = self.transport.rank();
        let mut layout = Vec::new();
        self.counts.fill(0);
        let mut total = 0;
        for r in (0..self.counts.len()).filter(|&r| r != me) {
            for (k, o) in outs.iter().enumerate() {
                if o.count > 0 && o.to.is_none_or(|t| self.slab_rank[t] == r) {
                    layout.push((k, total));
                    self.counts[r] += HEADER + o.count * MD_SLAB_WORDS;
                    total += HEADER + o.count * MD_SLAB_WORDS;
                }
            }
        }
        let send = self.send.room(&self.ctx, total)?;
        let message = send.as_mut_slice().map_err(drv("pinned MD messages"))?;
        for &(k, at) in &layout {
            let o = &outs[k];
            let to = o.to.map_or(GATHER, |t| t as f64);
            let header = [(self.first + o.from) as f64, to, o.count as f64];
            message[at..at + HEADER].copy_from_slice(&header);
            let words = o.count * MD_SLAB_WORDS;
            // into pinned memory: queued, waited for below
            slabs[o.from]
                .stream
                .memcpy_dtoh(
                    &o.send.slice(..words),
                    &mut message[at + HEADER..at + HEADER + words],
                )
                .map_err(drv("MD records to the host"))?;
        }
        for g in slabs.iter() {
            g.synchronize()?;
        }
        // the counts' exchange carries every rank's wish in its lowest bit
        let tagged: Vec<usize> = self
            .counts
            .iter()
            .map(|&c| 2 * c + usize::from(wish))
            .collect();
        let got = self.transport.exchange_counts(&tagged)?;
        let any = got.iter().any(|&c| c & 1 == 1);
        let incoming: Vec<usize> = got.iter().map(|&c| c / 2).collect();
        let arriving: usize = incoming.iter().sum();
        let recv = self.recv.room(&self.ctx, arriving)?;
        let recv = recv.as_mut_slice().map_err(drv("pinned MD messages"))?;
        let send = self.send.0.as_ref().expect("sized above");
        let send = send.as_slice().map_err(drv("pinned MD messages"))?;
        self.transport
            .exchange_values(&send[..total], &self.counts, recv, &incoming)?;
        self.unpack_arrivals(slabs, arriving)?;
        Ok(any)
    }

    /// Upload and unpack every link's records of the last exchange (the first `arriving`
    /// values of the receive buffer), queued on the receivers' streams; the buffer is not
    /// written again before the next exchange has waited for every slab's stream.
    fn unpack_arrivals(&mut self, slabs: &mut [GpuMd], arriving: usize) -> Result<()> {
        let recv = self.recv.0.as_ref().expect("sized by cross");
        let got = &recv.as_slice().map_err(drv("pinned MD messages"))?[..arriving];
        let mut at = 0;
        while at < got.len() {
            let malformed = || {
                MpcError::Device(format!(
                    "rank {}: a malformed MD bead message at value {at} of {} (please report it)",
                    self.transport.rank(),
                    got.len()
                ))
            };
            let header = got.get(at..at + HEADER).ok_or_else(malformed)?;
            let (from, to, m) = (header[0] as usize, header[1], header[2] as usize);
            let gather = to == GATHER;
            let local_to = if gather {
                Some(0)
            } else {
                (to as usize)
                    .checked_sub(self.first)
                    .filter(|&j| j < slabs.len())
            };
            let records = got
                .get(at + HEADER..at + HEADER + m * MD_SLAB_WORDS)
                .ok_or_else(malformed)?;
            let local_to = local_to.ok_or_else(malformed)?;
            let k = match self
                .incoming
                .iter()
                .position(|i| i.from == from && i.gather == gather && i.to == local_to)
            {
                Some(k) => k,
                None if gather => {
                    let i = Incoming::new(&slabs[0], from, true, 0, m + m / 4 + 256)?;
                    self.incoming.push(i);
                    self.incoming.len() - 1
                }
                None => return Err(malformed()),
            };
            let inc = &mut self.incoming[k];
            let to = inc.to;
            inc.receive(&mut slabs[to], records, m)?;
            at += HEADER + m * MD_SLAB_WORDS;
        }
        Ok(())
    }

    /// `x` summed element by element over the ranks.
    pub(super) fn sum(&self, x: &mut [f64]) -> Result<()> {
        self.transport.sum(x)
    }
}

impl Incoming {
    fn new(g: &GpuMd, from: usize, gather: bool, to: usize, cap: usize) -> Result<Incoming> {
        Ok(Incoming {
            from,
            gather,
            to,
            recv: g
                .stream
                .alloc_zeros::<f64>(cap * MD_SLAB_WORDS)
                .map_err(drv("alloc"))?,
            cap,
            count: g.stream.alloc_zeros::<u32>(1).map_err(drv("alloc"))?,
        })
    }

    /// `m` records (`records`, in the pinned receive buffer) uploaded to slab `g` and unpacked
    /// there, queued on its stream (the count, from pageable memory, is taken by the driver
    /// before the call returns).
    fn receive(&mut self, g: &mut GpuMd, records: &[f64], m: usize) -> Result<()> {
        if m > self.cap {
            self.cap = m + m / 4 + 256;
            self.recv = g
                .stream
                .alloc_zeros::<f64>(self.cap * MD_SLAB_WORDS)
                .map_err(drv("alloc"))?;
        }
        let s = g.stream.clone();
        s.memcpy_htod(records, &mut self.recv.slice_mut(..m * MD_SLAB_WORDS))
            .map_err(drv("MD records to the GPU"))?;
        s.memcpy_htod(&[m as u32], &mut self.count)
            .map_err(drv("MD records to the GPU"))?;
        let (count, records) = (self.count.slice(..), self.recv.slice(..m * MD_SLAB_WORDS));
        unpack_records(g, &count, m, &records)
    }
}
