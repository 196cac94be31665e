//! Packets between this process's slabs and other MPI ranks' slabs. Each step, a slab whose
//! neighbour lies on another rank copies its emigrants from the GPU straight into their place
//! in one pinned host message (`RankMessages::send`, laid out in the transport's rank order),
//! or, where that rank shares this machine, straight into the neighbour's GPU inbox
//! (`rank_peers`); the host writes a 4-value header before each link's records (a header
//! alone for an inbox), one collective exchange carries all of them, and the arrivals land in
//! pinned `RankMessages::recv`, from which each slab's copy stream uploads them
//! asynchronously (or copies them out of its inbox). No host copy of a record and no memory
//! touched for the first time after the opening.

use std::ops::Range;

use cudarc::driver::{CudaContext, PinnedHostSlice};

use super::MultiCudaBackend;
use crate::backend::cuda::contract::MPC_RECORD_WORDS;
use crate::backend::cuda::device::drv;
use crate::error::{MpcError, Result};

/// Values before each link's records: destination slab, its side (0 below, 1 above), count,
/// and where the records are: 0 after the header, 1 + p in the receiver's inbox of parity p.
const HEADER: usize = 4;

/// One step's packet from a local slab to another rank's slab.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct RankLink {
    rank: usize,
    /// Local slab and direction (0 down, 1 up).
    slab: usize,
    dir: usize,
    /// Where its header starts in `send`.
    at: usize,
    /// The inbox parity its records were copied into (None: they follow the header).
    inbox: Option<usize>,
}

/// What came to one side of a local slab from another rank this step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Arrival {
    /// These words of the received message (empty: nothing came).
    Message(Range<usize>),
    /// `count` records in the slab's inbox of `parity`.
    Inbox { count: usize, parity: usize },
}

impl Arrival {
    pub(super) fn none() -> Arrival {
        Arrival::Message(0..0)
    }

    /// Particles that arrived.
    pub(super) fn count(&self) -> usize {
        match self {
            Arrival::Message(r) => r.len() / MPC_RECORD_WORDS,
            Arrival::Inbox { count, .. } => *count,
        }
    }
}

/// The pinned messages of one process to and from other ranks, kept for the run, and this
/// step's layout of the outgoing one.
pub(super) struct RankMessages {
    send: PinnedHostSlice<u64>,
    recv: PinnedHostSlice<u64>,
    /// This step's links to other ranks' slabs in rank order.
    links: Vec<RankLink>,
    /// This step's values to each rank.
    counts: Vec<usize>,
    /// This step's values from each rank (the first `received` words of `recv`).
    received: usize,
}

impl RankMessages {
    /// Room for `links` links each way of up to `send_capacity` records, in portable pinned
    /// memory of `ctx` (every GPU of the process copies to and from it).
    pub(super) fn new(
        ctx: &std::sync::Arc<CudaContext>,
        links: usize,
        send_capacity: usize,
        ranks: usize,
    ) -> Result<Self> {
        let words = (links * (HEADER + send_capacity * MPC_RECORD_WORDS)).max(1);
        let flags = cudarc::driver::sys::CU_MEMHOSTALLOC_PORTABLE;
        // SAFETY: uninitialised pinned memory (this and the next): `send` is written (headers
        // by the host, records by device-to-host copies that the host waits for) before the
        // transport reads it; `recv` is written by the transport before anything reads it,
        // and only its first `received` words are ever read.
        let send = unsafe { ctx.alloc_pinned_with_flags::<u64>(words, flags) }
            .map_err(drv("pinned rank messages"))?;
        // SAFETY: as above.
        let recv = unsafe { ctx.alloc_pinned_with_flags::<u64>(words, flags) }
            .map_err(drv("pinned rank messages"))?;
        Ok(Self {
            send,
            recv,
            links: Vec::new(),
            counts: vec![0; ranks],
            received: 0,
        })
    }

    /// Where the records of local slab j's packet in direction `dir` go in `send` this step
    /// (None: that neighbour is on this process, or j sends nothing that way).
    pub(super) fn records_at(&self, j: usize, dir: usize) -> Option<usize> {
        self.links
            .iter()
            .find(|l| l.slab == j && l.dir == dir && l.inbox.is_none())
            .map(|l| l.at + HEADER)
    }

    /// `words` u64 of `send` from `at`, for a device-to-host copy.
    pub(super) fn send_slot(&mut self, at: usize, words: usize) -> Result<&mut [u64]> {
        Ok(&mut self.send.as_mut_slice().map_err(drv("rank messages"))?[at..at + words])
    }

    /// The received words of `range` (from [`MultiCudaBackend::cross_ranks`]).
    pub(super) fn arrived(&self, range: Range<usize>) -> Result<&[u64]> {
        let got = &self.recv.as_slice().map_err(drv("rank messages"))?[..self.received];
        got.get(range)
            .ok_or_else(|| MpcError::Device("an arrival outside the rank message".into()))
    }
}

impl MultiCudaBackend {
    /// Before the packets are copied out: this step's links to other ranks' slabs and where
    /// each goes in the outgoing message. Nothing in one process.
    pub(super) fn lay_out_rank_messages(&mut self, sent: &[[usize; 2]]) {
        let parity = self.rank_peers.as_mut().map(|p| p.next_step());
        let mut links = Vec::new();
        for (j, counts) in sent.iter().enumerate() {
            for (dir, &count) in counts.iter().enumerate() {
                let d = self.neighbour(self.first + j, dir);
                if count > 0 && self.local(d).is_none() {
                    let peer = self.rank_peers.as_ref().and_then(|p| p.outbox(j, dir));
                    links.push(RankLink {
                        rank: self.slab_rank[d],
                        slab: j,
                        dir,
                        at: 0,
                        inbox: peer.and(parity),
                    });
                }
            }
        }
        let Some(m) = self.rank_messages.as_mut() else {
            return;
        };
        links.sort_unstable();
        m.counts.fill(0);
        let mut at = 0;
        for link in links.iter_mut() {
            link.at = at;
            let records = match link.inbox {
                None => sent[link.slab][link.dir] * MPC_RECORD_WORDS,
                Some(_) => 0,
            };
            m.counts[link.rank] += HEADER + records;
            at += HEADER + records;
        }
        m.links = links;
    }

    /// The packets of this process's slabs for other ranks' slabs (copied into the pinned
    /// message by `send_from`) go out through the transport, and theirs come in: for each of
    /// this process's slabs, where in the received message the records from below and from
    /// above lie (empty where the neighbour is local or sent nothing). One collective
    /// exchange per step over all ranks; nothing at all in one process.
    pub(super) fn cross_ranks(&mut self, sent: &[[usize; 2]]) -> Result<Vec<[Arrival; 2]>> {
        let mut arrivals: Vec<[Arrival; 2]> = (0..self.slabs.len())
            .map(|_| [Arrival::none(), Arrival::none()])
            .collect();
        let Some(mut m) = self.rank_messages.take() else {
            return Ok(arrivals);
        };
        let crossed = self.cross_with(&mut m, sent, &mut arrivals);
        self.rank_messages = Some(m);
        crossed.map(|()| arrivals)
    }

    fn cross_with(
        &mut self,
        m: &mut RankMessages,
        sent: &[[usize; 2]],
        arrivals: &mut [[Arrival; 2]],
    ) -> Result<()> {
        let mut clock = PhaseClock::new(self.profiling);
        for l in &m.links {
            // the records' copies (to the host or a neighbour rank's GPU) are queued on this
            // slab's copy-out stream: once done, the receiver may read them
            self.slab_of(l.slab)
                .copy_out
                .synchronize()
                .map_err(drv("rank messages"))?;
        }
        clock.lap(&mut self.rank_seconds[0]);
        let send = m.send.as_mut_slice().map_err(drv("rank messages"))?;
        for l in &m.links {
            let d = self.neighbour(self.first + l.slab, l.dir);
            let count = sent[l.slab][l.dir] as f64;
            let whence = l.inbox.map_or(0.0, |p| 1.0 + p as f64);
            let header = [d as f64, (1 - l.dir) as f64, count, whence];
            for (w, h) in send[l.at..l.at + HEADER].iter_mut().zip(header) {
                *w = h.to_bits();
            }
        }
        let total: usize = m.counts.iter().sum();
        clock.lap(&mut self.rank_seconds[1]);
        // the first collective waits for the slowest rank: its time is the ranks' skew
        let incoming = self.transport.exchange_counts(&m.counts)?;
        clock.lap(&mut self.rank_seconds[2]);
        let recv = m.recv.as_mut_slice().map_err(drv("rank messages"))?;
        self.transport.exchange_values(
            as_values(&send[..total]),
            &m.counts,
            as_values_mut(recv),
            &incoming,
        )?;
        clock.lap(&mut self.rank_seconds[3]);
        m.received = incoming.iter().sum();
        self.parse_arrivals(&recv[..m.received], arrivals)?;
        clock.lap(&mut self.rank_seconds[1]);
        Ok(())
    }

    /// Where each message of `got` (see `cross_ranks`) goes: its records' range (or inbox) per
    /// local slab and side; an error for a malformed message.
    fn parse_arrivals(&self, got: &[u64], arrivals: &mut [[Arrival; 2]]) -> Result<()> {
        let mut at = 0;
        while at + HEADER <= got.len() {
            let value = |i: usize| f64::from_bits(got[at + i]) as usize;
            let (d, side, count, whence) = (value(0), value(1), value(2), value(3));
            let words = if whence == 0 {
                count * MPC_RECORD_WORDS
            } else {
                0
            };
            let inbox_known = |j: usize| {
                whence == 0
                    || self
                        .rank_peers
                        .as_ref()
                        .is_some_and(|p| p.inbox(j, side, whence - 1).is_some())
            };
            let j = self.local(d).filter(|&j| {
                side < 2 && at + HEADER + words <= got.len() && whence < 3 && inbox_known(j)
            });
            let (Some(j), true) = (j, count <= self.slab_of(0).send_capacity) else {
                return Err(MpcError::Device(format!(
                    "rank {}: a malformed particle message (slab {d}, side {side}, {count} \
                     particles; please report it)",
                    self.transport.rank()
                )));
            };
            arrivals[j][side] = match whence {
                0 => Arrival::Message(at + HEADER..at + HEADER + words),
                p => Arrival::Inbox {
                    count,
                    parity: p - 1,
                },
            };
            at += HEADER + words;
        }
        Ok(())
    }
}

/// Message words as the f64 values the transport carries, bit for bit.
fn as_values(words: &[u64]) -> &[f64] {
    // SAFETY: u64 and f64 have the same size and alignment and every bit pattern is a valid
    // f64 (the transport copies the bits, never computes with them); the slice borrows
    // `words` for its lifetime.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<f64>(), words.len()) }
}

/// As [`as_values`], for the transport to write into.
fn as_values_mut(words: &mut [u64]) -> &mut [f64] {
    // SAFETY: as in `as_values`; the mutable borrow of `words` is held for the result's
    // lifetime, so nothing else reads or writes them meanwhile.
    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<f64>(), words.len()) }
}

/// Laps of a wall clock added to phase timers, when profiling (else free).
struct PhaseClock(Option<std::time::Instant>);

impl PhaseClock {
    fn new(on: bool) -> Self {
        Self(on.then(std::time::Instant::now))
    }

    /// Add the time since the last lap to `timer` and start the next lap.
    fn lap(&mut self, timer: &mut f64) {
        if let Some(t) = self.0.as_mut() {
            let now = std::time::Instant::now();
            *timer += (now - *t).as_secs_f64();
            *t = now;
        }
    }
}
