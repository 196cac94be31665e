//! A process's particles as its block's bytes, streamed in pieces: the block is never whole in
//! memory (a process holding 4 GPUs' fluid would otherwise need its size twice over), and its
//! checksum and y range are taken on the way. Where the particles come from is a
//! [`BlockSource`]: host memory, a live backend read a window at a time, or a snapshot.

use rayon::prelude::*;

use super::{fnv_words, PARTICLE_BYTES};
use crate::error::Result;
use crate::state::FluidPart;
use crate::state::FluidState;

/// The checksum's chunk: [`super::checksum`] hashes each MiB of the block.
const CHUNK: usize = 1 << 20;
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// The particles a process writes into its block: the whole fluid in index order, or its
/// slabs' parts with their global ids.
pub enum LocalFluid {
    Whole(FluidState),
    Parts(Vec<FluidPart>),
    /// Parts whose particles are listed by place (their ids: their places in the file).
    Placed(Vec<FluidState>),
}

/// [`LocalFluid`] borrowed (a checkpoint in memory writes its fluid without a copy).
#[derive(Clone, Copy)]
pub enum FluidView<'a> {
    Whole(&'a FluidState),
    Parts(&'a [FluidPart]),
    Placed(&'a [FluidState]),
}

impl LocalFluid {
    pub fn view(&self) -> FluidView<'_> {
        match self {
            LocalFluid::Whole(s) => FluidView::Whole(s),
            LocalFluid::Parts(p) => FluidView::Parts(p),
            LocalFluid::Placed(p) => FluidView::Placed(p),
        }
    }
}

/// Where a block's particles are read from. A block lists, over all parts in order, the ids,
/// then x, y, z, then vx, vy, vz; the writer asks for one section of one part at a time, so a
/// source holds at most a window of them on the host.
pub trait BlockSource {
    /// Particles of each part, in block order.
    fn counts(&self) -> Vec<u64>;
    /// Section `section` (0: ids, 1-3: x, y, z, 4-6: vx, vy, vz) of part `part`, every value in
    /// order, into `out`. `first_id`: the place in the file of the part's first particle (a
    /// source whose particles carry no ids lists them by place).
    fn section(
        &mut self,
        part: usize,
        section: usize,
        first_id: u64,
        out: &mut BlockStream<'_>,
    ) -> Result<()>;
}

impl<'a> FluidView<'a> {
    fn states(self) -> Vec<&'a FluidState> {
        match self {
            FluidView::Whole(s) => vec![s],
            FluidView::Parts(p) => p.iter().map(|(s, _)| s).collect(),
            FluidView::Placed(p) => p.iter().collect(),
        }
    }

    pub(in crate::checkpoint) fn count(self) -> u64 {
        self.states().iter().map(|s| s.len() as u64).sum()
    }
}

impl BlockSource for FluidView<'_> {
    fn counts(&self) -> Vec<u64> {
        self.states().iter().map(|s| s.len() as u64).collect()
    }

    fn section(
        &mut self,
        part: usize,
        section: usize,
        first_id: u64,
        out: &mut BlockStream<'_>,
    ) -> Result<()> {
        let st = self.states()[part];
        match (section, *self) {
            (0, FluidView::Whole(s)) => out.put_range(first_id, s.len() as u64),
            (0, FluidView::Parts(p)) => out.put(&p[part].1, u64::to_le_bytes),
            (0, FluidView::Placed(_)) => out.put_range(first_id, st.len() as u64),
            (1..=3, _) => out.put(&st.pos[section - 1], f32::to_le_bytes),
            _ => out.put(&st.vel[section - 4], f64::to_le_bytes),
        }
    }
}

impl BlockSource for LocalFluid {
    fn counts(&self) -> Vec<u64> {
        self.view().counts()
    }

    fn section(
        &mut self,
        part: usize,
        section: usize,
        first_id: u64,
        out: &mut BlockStream<'_>,
    ) -> Result<()> {
        self.view().section(part, section, first_id, out)
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

/// Where full pieces of a block go: each is handed over with its offset in the block, and an
/// empty buffer (of any capacity) comes back to fill next.
pub(super) trait PieceSink {
    fn put(&mut self, at: u64, piece: Vec<u8>) -> Result<Vec<u8>>;
}

/// A block's bytes collected in memory.
impl PieceSink for Vec<u8> {
    fn put(&mut self, _at: u64, mut piece: Vec<u8>) -> Result<Vec<u8>> {
        self.extend_from_slice(&piece);
        piece.clear();
        Ok(piece)
    }
}

/// What streaming a block found: its checksum and the lowest and highest y (+∞, −∞ when
/// empty).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct BlockDone {
    pub(crate) checksum: u64,
    pub(crate) y_range: [f32; 2],
}

/// Encodes a block's values into pieces of a fixed size and hands each full piece to the sink,
/// taking the checksum and the y range on the way.
pub struct BlockStream<'s> {
    piece: usize,
    buf: Vec<u8>,
    at: u64,
    sum: StreamSum,
    section: usize,
    y_range: [f32; 2],
    sink: &'s mut dyn PieceSink,
}

const EMPTY_RANGE: [f32; 2] = [f32::INFINITY, f32::NEG_INFINITY];

fn widen(r: [f32; 2], s: [f32; 2]) -> [f32; 2] {
    [r[0].min(s[0]), r[1].max(s[1])]
}

impl BlockStream<'_> {
    fn flush(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.sum.update(&self.buf);
        let len = self.buf.len() as u64;
        let mut next = self.sink.put(self.at, std::mem::take(&mut self.buf))?;
        next.clear();
        next.reserve(self.piece);
        self.buf = next;
        self.at += len;
        Ok(())
    }

    /// `xs` as `W`-byte little-endian values (`bytes` of one value), encoded in parallel.
    pub fn put<T: Copy + Sync, const W: usize>(
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
            if self.section == 2 {
                let r = self.buf[start..]
                    .par_chunks(4)
                    .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                    .fold(|| EMPTY_RANGE, |r, y| widen(r, [y, y]))
                    .reduce(|| EMPTY_RANGE, widen);
                self.y_range = widen(self.y_range, r);
            }
            xs = &xs[k..];
        }
        Ok(())
    }

    /// The ids `first..first + n` (particles listed by place).
    pub fn put_range(&mut self, first: u64, n: u64) -> Result<()> {
        // a piece's worth at a time: the window bounds these too
        let step = (self.piece / 8).max(1) as u64;
        let mut lo = 0;
        while lo < n {
            let hi = (lo + step).min(n);
            let ids: Vec<u64> = (first + lo..first + hi).collect();
            self.put(&ids, u64::to_le_bytes)?;
            lo = hi;
        }
        Ok(())
    }

    /// The bytes a piece holds (sources that copy through a buffer of their own size it by
    /// this).
    pub fn piece_bytes(&self) -> usize {
        self.piece
    }
}

/// The block of `source` (its parts' ids, then x, y, z, then vx, vy, vz) in pieces of `piece`
/// bytes to `sink` with their offsets in the block; `first_id`: the place in the file of its
/// first particle.
pub(super) fn stream_block(
    source: &mut dyn BlockSource,
    first_id: u64,
    piece: usize,
    sink: &mut dyn PieceSink,
) -> Result<BlockDone> {
    let counts = source.counts();
    let total = counts.iter().sum::<u64>() * PARTICLE_BYTES;
    // at least one value of every width fits a piece
    let piece = piece.max(64);
    let mut s = BlockStream {
        piece,
        buf: Vec::with_capacity(piece),
        at: 0,
        sum: StreamSum::new(total),
        section: 0,
        y_range: EMPTY_RANGE,
        sink,
    };
    for section in 0..7 {
        s.section = section;
        let mut first = first_id;
        for (part, &n) in counts.iter().enumerate() {
            let before = s.at + s.buf.len() as u64;
            source.section(part, section, first, &mut s)?;
            let width = [8, 4, 4, 4, 8, 8, 8][section];
            if s.at + s.buf.len() as u64 - before != width * n {
                return Err(crate::error::MpcError::Device(format!(
                    "a checkpoint source gave {} bytes for section {section} of part {part} of \
                     {n} particles (please report it)",
                    s.at + s.buf.len() as u64 - before
                )));
            }
            first += n;
        }
    }
    s.flush()?;
    debug_assert_eq!(s.at, total);
    Ok(BlockDone {
        checksum: s.sum.finish(),
        y_range: s.y_range,
    })
}

/// The whole block in memory and what streaming it found.
#[cfg(test)]
fn block_bytes(source: &mut dyn BlockSource) -> Result<(Vec<u8>, BlockDone)> {
    let mut out = Vec::new();
    let done = stream_block(source, 0, 32 << 20, &mut out)?;
    Ok((out, done))
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

    /// Writes each piece at its offset.
    struct AtOffsets(Vec<u8>);
    impl PieceSink for AtOffsets {
        fn put(&mut self, at: u64, mut piece: Vec<u8>) -> Result<Vec<u8>> {
            let at = at as usize;
            self.0[at..at + piece.len()].copy_from_slice(&piece);
            piece.clear();
            Ok(piece)
        }
    }

    /// In small pieces that split values (1004 bytes: not a whole number of 8-byte values),
    /// the block, its checksum and y range are those of one piece.
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
        for mut view in [FluidView::Whole(&st), FluidView::Parts(&parts)] {
            let (whole, done) = block_bytes(&mut view).unwrap();
            assert_eq!(whole.len() as u64, view.count() * PARTICLE_BYTES);
            assert_eq!(done.checksum, super::super::checksum(&whole));
            let lo = st.pos[1].iter().copied().fold(f32::INFINITY, f32::min);
            let hi = st.pos[1].iter().copied().fold(f32::NEG_INFINITY, f32::max);
            assert_eq!(done.y_range, [lo, hi]);
            let mut pieces = AtOffsets(vec![0u8; whole.len()]);
            let streamed = stream_block(&mut view, 0, 1004, &mut pieces).unwrap();
            assert_eq!((pieces.0, streamed), (whole, done));
        }
    }
}
