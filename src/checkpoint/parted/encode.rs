//! A process's particles as its block's bytes, streamed in pieces: the block is never whole in
//! memory (a process holding 4 GPUs' fluid would otherwise need its size twice over), and its
//! checksum is taken on the way.

use rayon::prelude::*;

use super::{fnv_words, PARTICLE_BYTES};
use crate::error::Result;
use crate::state::FluidPart;
use crate::state::FluidState;

/// The checksum's chunk: [`super::checksum`] hashes each MiB of the block.
const CHUNK: usize = 1 << 20;
/// Bytes encoded before each piece goes to the sink.
const PIECE: usize = 32 << 20;
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// The particles a process writes into its block: the whole fluid in index order, or its
/// slabs' parts with their global ids.
pub enum LocalFluid {
    Whole(FluidState),
    Parts(Vec<FluidPart>),
}

/// [`LocalFluid`] borrowed (a checkpoint in memory writes its fluid without a copy).
#[derive(Clone, Copy)]
pub(in crate::checkpoint) enum FluidView<'a> {
    Whole(&'a FluidState),
    Parts(&'a [FluidPart]),
}

impl LocalFluid {
    pub(in crate::checkpoint) fn view(&self) -> FluidView<'_> {
        match self {
            LocalFluid::Whole(s) => FluidView::Whole(s),
            LocalFluid::Parts(p) => FluidView::Parts(p),
        }
    }
}

impl<'a> FluidView<'a> {
    fn states(self) -> Vec<&'a FluidState> {
        match self {
            FluidView::Whole(s) => vec![s],
            FluidView::Parts(p) => p.iter().map(|(s, _)| s).collect(),
        }
    }

    pub(in crate::checkpoint) fn count(self) -> u64 {
        self.states().iter().map(|s| s.len() as u64).sum()
    }

    /// The lowest and highest y (+∞, −∞ when empty).
    pub(in crate::checkpoint) fn y_range(self) -> [f32; 2] {
        let empty = [f32::INFINITY, f32::NEG_INFINITY];
        let widen = |r: [f32; 2], s: [f32; 2]| [r[0].min(s[0]), r[1].max(s[1])];
        self.states()
            .iter()
            .map(|s| {
                s.pos[1]
                    .par_iter()
                    .fold(|| empty, |r, &y| widen(r, [y, y]))
                    .reduce(|| empty, widen)
            })
            .fold(empty, widen)
    }
}

/// [`super::checksum`] of a byte stream given in pieces of any length.
pub(super) struct StreamSum {
    h: u64,
    carry: Vec<u8>,
}

impl StreamSum {
    pub(super) fn new(total: u64) -> StreamSum {
        StreamSum {
            h: fnv_words(&total.to_le_bytes()),
            carry: Vec::with_capacity(CHUNK),
        }
    }

    fn fold(&mut self, chunk: u64) {
        self.h = (self.h ^ chunk).wrapping_mul(PRIME);
    }

    pub(super) fn update(&mut self, mut bytes: &[u8]) {
        if !self.carry.is_empty() {
            let take = (CHUNK - self.carry.len()).min(bytes.len());
            self.carry.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.carry.len() < CHUNK {
                return;
            }
            let h = fnv_words(&self.carry);
            self.fold(h);
            self.carry.clear();
        }
        let full = bytes.len() / CHUNK * CHUNK;
        let hashes: Vec<u64> = bytes[..full].par_chunks(CHUNK).map(fnv_words).collect();
        for h in hashes {
            self.fold(h);
        }
        self.carry.extend_from_slice(&bytes[full..]);
    }

    pub(super) fn finish(mut self) -> u64 {
        if !self.carry.is_empty() {
            let h = fnv_words(&self.carry);
            self.fold(h);
        }
        self.h
    }
}

/// Encodes values into pieces and hands each full piece to the sink with its offset.
struct Stream<'s> {
    piece: usize,
    buf: Vec<u8>,
    at: u64,
    sum: StreamSum,
    sink: &'s mut dyn FnMut(u64, &[u8]) -> Result<()>,
}

impl Stream<'_> {
    fn flush(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.sum.update(&self.buf);
        (self.sink)(self.at, &self.buf)?;
        self.at += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    /// `xs` as `W`-byte little-endian values (`bytes` of one value).
    fn put<T: Copy + Sync, const W: usize>(
        &mut self,
        xs: &[T],
        bytes: impl Fn(T) -> [u8; W] + Sync,
    ) -> Result<()> {
        let mut xs = xs;
        while !xs.is_empty() {
            if self.piece - self.buf.len() < W {
                self.flush()?;
            }
            let k = ((self.piece - self.buf.len()) / W).min(xs.len());
            let start = self.buf.len();
            self.buf.resize(start + k * W, 0);
            self.buf[start..]
                .par_chunks_mut(W)
                .zip(&xs[..k])
                .for_each(|(b, &x)| b.copy_from_slice(&bytes(x)));
            xs = &xs[k..];
        }
        Ok(())
    }

    /// The ids 0..n (a whole fluid), as [`Stream::put`] would write them.
    fn put_range(&mut self, n: u64) -> Result<()> {
        const STEP: u64 = 1 << 20;
        let mut lo = 0;
        while lo < n {
            let hi = (lo + STEP).min(n);
            let ids: Vec<u64> = (lo..hi).collect();
            self.put(&ids, u64::to_le_bytes)?;
            lo = hi;
        }
        Ok(())
    }
}

/// The block of `fluid` (ids, then x, y, z, then vx, vy, vz, over all its parts in order), in
/// pieces to `sink` with their offsets in the block; returns the block's checksum.
pub(super) fn stream_block(
    fluid: FluidView<'_>,
    sink: &mut dyn FnMut(u64, &[u8]) -> Result<()>,
) -> Result<u64> {
    stream_block_in(fluid, PIECE, sink)
}

/// [`stream_block`] in pieces of `piece` bytes (tests take small odd ones).
fn stream_block_in(
    fluid: FluidView<'_>,
    piece: usize,
    sink: &mut dyn FnMut(u64, &[u8]) -> Result<()>,
) -> Result<u64> {
    let total = fluid.count() * PARTICLE_BYTES;
    let mut s = Stream {
        piece,
        buf: Vec::with_capacity(piece),
        at: 0,
        sum: StreamSum::new(total),
        sink,
    };
    match fluid {
        FluidView::Whole(st) => s.put_range(st.len() as u64)?,
        FluidView::Parts(parts) => {
            for (_, ids) in parts {
                s.put(ids, u64::to_le_bytes)?;
            }
        }
    }
    let states = fluid.states();
    for k in 0..3 {
        for st in &states {
            s.put(&st.pos[k], f32::to_le_bytes)?;
        }
    }
    for k in 0..3 {
        for st in &states {
            s.put(&st.vel[k], f64::to_le_bytes)?;
        }
    }
    s.flush()?;
    debug_assert_eq!(s.at, total);
    Ok(s.sum.finish())
}

/// The whole block in memory and its checksum.
pub(super) fn block_bytes(fluid: FluidView<'_>) -> Result<(Vec<u8>, u64)> {
    let mut out = Vec::with_capacity((fluid.count() * PARTICLE_BYTES) as usize);
    let sum = stream_block(fluid, &mut |_, piece| {
        out.extend_from_slice(piece);
        Ok(())
    })?;
    Ok((out, sum))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fed in pieces of any length, the streamed checksum is the checksum of the whole.
    #[test]
    fn the_streamed_checksum_is_the_whole_ones() {
        let bytes: Vec<u8> = (0..(3 * CHUNK + CHUNK / 2 + 7) as u64)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for piece in [1, 1000, CHUNK - 3, CHUNK, 2 * CHUNK + 5, bytes.len()] {
            let mut sum = StreamSum::new(bytes.len() as u64);
            for p in bytes.chunks(piece) {
                sum.update(p);
            }
            assert_eq!(
                sum.finish(),
                super::super::checksum(&bytes),
                "pieces of {piece}"
            );
        }
    }

    /// In small pieces that split values (1004 bytes: not a whole number of 8-byte values),
    /// the block and its checksum are those of one piece.
    #[test]
    fn small_pieces_give_the_same_block() {
        let cfg = crate::config::Config::from_ron_str(
            "(cells: (4, 6, 4), particles_per_cell: 5, time_step: 0.1, seed: 2, steps: 1, \
              collision: Srd(angle_deg: 130.0))",
        )
        .unwrap();
        let st = FluidState::initial(&cfg);
        let ids: Vec<u64> = (0..st.len() as u64).rev().collect();
        let parts = [(st.clone(), ids)];
        for view in [FluidView::Whole(&st), FluidView::Parts(&parts)] {
            let (whole, sum) = block_bytes(view).unwrap();
            assert_eq!(whole.len() as u64, view.count() * PARTICLE_BYTES);
            assert_eq!(sum, super::super::checksum(&whole));
            let mut pieces = vec![0u8; whole.len()];
            let streamed = stream_block_in(view, 1004, &mut |at, piece| {
                pieces[at as usize..at as usize + piece.len()].copy_from_slice(piece);
                Ok(())
            })
            .unwrap();
            assert_eq!((pieces, streamed), (whole, sum));
        }
    }
}
