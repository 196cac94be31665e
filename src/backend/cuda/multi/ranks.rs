//! Packets between this process's slabs and other MPI ranks' slabs. Each step, a slab whose
//! neighbour lies on another rank copies its emigrants from the GPU straight into their place
//! in one pinned host message (`RankMessages::send`, laid out in the transport's rank order);
//! the host writes a 3-value header before each link's records, one collective exchange
//! carries all of them, and the arrivals land in pinned `RankMessages::recv`, from which each
//! slab's copy stream uploads them asynchronously. No host copy of a record and no memory
//! touched for the first time after the opening.

use std::ops::Range;

use cudarc::driver::{CudaContext, PinnedHostSlice};

use super::migrate::RECORD_WORDS;
use super::MultiCudaBackend;
use crate::backend::cuda::device::drv;
use crate::error::{MpcError, Result};

/// Values before each link's records: destination slab, its side (0 below, 1 above), count.
const HEADER: usize = 3;

/// The pinned messages of one process to and from other ranks, kept for the run, and this
/// step's layout of the outgoing one.
pub(super) struct RankMessages {
    send: PinnedHostSlice<u64>,
    recv: PinnedHostSlice<u64>,
    /// This step's links to other ranks' slabs in rank order: (rank, local slab, direction,
    /// where its header starts in `send`).
    links: Vec<(usize, usize, usize, usize)>,
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
        let words = (links * (HEADER + send_capacity * RECORD_WORDS)).max(1);
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
            .find(|l| l.1 == j && l.2 == dir)
            .map(|l| l.3 + HEADER)
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
        let mut links = Vec::new();
        for (j, counts) in sent.iter().enumerate() {
            for (dir, &count) in counts.iter().enumerate() {
                let d = self.neighbour(self.first + j, dir);
                if count > 0 && self.local(d).is_none() {
                    links.push((self.slab_rank[d], j, dir, 0));
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
            link.3 = at;
            let values = HEADER + sent[link.1][link.2] * RECORD_WORDS;
            m.counts[link.0] += values;
            at += values;
        }
        m.links = links;
    }

    /// The packets of this process's slabs for other ranks' slabs (copied into the pinned
    /// message by `send_from`) go out through the transport, and theirs come in: for each of
    /// this process's slabs, where in the received message the records from below and from
    /// above lie (empty where the neighbour is local or sent nothing). One collective
    /// exchange per step over all ranks; nothing at all in one process.
    pub(super) fn cross_ranks(&mut self, sent: &[[usize; 2]]) -> Result<Vec<[Range<usize>; 2]>> {
        let mut arrivals: Vec<[Range<usize>; 2]> =
            (0..self.slabs.len()).map(|_| [0..0, 0..0]).collect();
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
        arrivals: &mut [[Range<usize>; 2]],
    ) -> Result<()> {
        let mut clock = PhaseClock::new(self.profiling);
        for &(_, j, _, _) in &m.links {
            // the records' copies are queued on this slab's copy-out stream
            self.slab_of(j)
                .copy_out
                .synchronize()
                .map_err(drv("rank messages"))?;
        }
        clock.lap(&mut self.rank_seconds[0]);
        let send = m.send.as_mut_slice().map_err(drv("rank messages"))?;
        for &(_, j, dir, at) in &m.links {
            let d = self.neighbour(self.first + j, dir);
            let header = [d as f64, (1 - dir) as f64, sent[j][dir] as f64];
            for (w, h) in send[at..at + HEADER].iter_mut().zip(header) {
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

    /// Where each message of `got` (see `cross_ranks`) goes: its records' range per local slab
    /// and side; an error for a malformed message.
    fn parse_arrivals(&self, got: &[u64], arrivals: &mut [[Range<usize>; 2]]) -> Result<()> {
        let mut at = 0;
        while at + HEADER <= got.len() {
            let value = |i: usize| f64::from_bits(got[at + i]) as usize;
            let (d, side, count) = (value(0), value(1), value(2));
            let words = count * RECORD_WORDS;
            let j = self
                .local(d)
                .filter(|_| side < 2 && at + HEADER + words <= got.len());
            let (Some(j), true) = (j, count <= self.slab_of(0).send_capacity) else {
                return Err(MpcError::Device(format!(
                    "rank {}: a malformed particle message (slab {d}, side {side}, {count} \
                     particles; please report it)",
                    self.transport.rank()
                )));
            };
            arrivals[j][side] = at + HEADER..at + HEADER + words;
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
