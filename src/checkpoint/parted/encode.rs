//! A process's particles as its block's bytes, streamed in pieces: the block is never whole in
//! memory (a process holding 4 GPUs' fluid would otherwise need its size twice over), and its
//! checksum and y range are taken on the way. Where the particles come from is a
//! [`BlockSource`]: host memory, a live backend read a window at a time, or a snapshot.

use rayon::prelude::*;

use super::{fnv_fold, fnv_words, FNV_OFFSET, FNV_PRIME, PARTICLE_BYTES};
use crate::error::Result;
use crate::state::FluidPart;
use crate::state::FluidState;

/// The checksum's chunk: [`super::checksum`] hashes each MiB of the block.
const CHUNK: usize = 1 << 20;
/// Values a task encodes (or scans for the y range) at a time.
const RUN: usize = 1 << 14;

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

/// [`super::checksum`] of a byte stream given in pieces of any length: the hash of each MiB of
/// the stream is folded in as it passes (the MiB wholly inside a piece in parallel, those
/// across pieces word by word), so nothing is copied aside.
pub(super) struct StreamSum {
    /// The length and the finished MiB folded together.
    h: u64,
    /// The hash of the MiB in progress and its bytes so far.
    cur: u64,
    filled: usize,
    /// The word in progress (its first `filled % 8` bytes; the rest zeros).
    word: [u8; 8],
}

impl StreamSum {
    pub(super) fn new(total: u64) -> StreamSum {
        StreamSum {
            h: fnv_words(&total.to_le_bytes()),
            cur: FNV_OFFSET,
            filled: 0,
            word: [0; 8],
        }
    }

    fn fold(&mut self, chunk: u64) {
        self.h = (self.h ^ chunk).wrapping_mul(FNV_PRIME);
    }

    /// The MiB in progress folded in once complete.
    fn close_full(&mut self) {
        if self.filled == CHUNK {
            let h = std::mem::replace(&mut self.cur, FNV_OFFSET);
            self.fold(h);
            self.filled = 0;
        }
    }

    /// `bytes` (from a word boundary, within the MiB in progress) into its hash.
    fn stream(&mut self, bytes: &[u8]) {
        let (words, tail) = bytes.as_chunks::<8>();
        let whole = words.len() * 8;
        self.cur = fnv_fold(self.cur, &bytes[..whole]);
        self.word = [0; 8];
        self.word[..tail.len()].copy_from_slice(tail);
        self.filled += bytes.len();
        self.close_full();
    }

    pub(super) fn update(&mut self, mut bytes: &[u8]) {
        // the word in progress first
        let part = self.filled % 8;
        if part != 0 {
            let take = (8 - part).min(bytes.len());
            self.word[part..part + take].copy_from_slice(&bytes[..take]);
            self.filled += take;
            bytes = &bytes[take..];
            if !self.filled.is_multiple_of(8) {
                return;
            }
            self.cur = fnv_fold(self.cur, &self.word);
            self.word = [0; 8];
            self.close_full();
        }
        // then the rest of the MiB in progress
        if self.filled > 0 {
            let take = (CHUNK - self.filled).min(bytes.len());
            self.stream(&bytes[..take]);
            bytes = &bytes[take..];
        }
        if bytes.is_empty() {
            return;
        }
        // whole MiB in parallel, then the start of the next
        let full = bytes.len() / CHUNK * CHUNK;
        let hashes: Vec<u64> = bytes[..full].par_chunks(CHUNK).map(fnv_words).collect();
        for h in hashes {
            self.fold(h);
        }
        self.stream(&bytes[full..]);
    }

    pub(super) fn finish(mut self) -> u64 {
        if !self.filled.is_multiple_of(8) {
            self.cur = fnv_fold(self.cur, &self.word);
        }
        if self.filled > 0 {
            let h = self.cur;
            self.fold(h);
        }
        self.h
    }
}

/// Where full pieces of a block go: each is handed over with its offset in the block, and a
/// buffer (of any length and capacity; its bytes are overwritten) comes back to fill next. A
/// sink that hands back the buffers it got, their length untouched, spares the stream zeroing
/// them again.
pub(super) trait PieceSink {
    fn put(&mut self, at: u64, piece: Vec<u8>) -> Result<Vec<u8>>;

    /// Whether the sink takes the pieces' checksum itself (off the encoding thread:
    /// [`super::disk::SumPipe`]); else the stream takes it as it goes.
    fn sums(&self) -> bool {
        false
    }

    /// The checksum of every piece put, once the last is put (only where [`PieceSink::sums`]).
    fn checksum(&mut self) -> Result<u64> {
        Err(crate::error::MpcError::Device(
            "a checkpoint's pieces went unsummed (please report it)".into(),
        ))
    }
}

/// A block's bytes collected in memory.
impl PieceSink for Vec<u8> {
    fn put(&mut self, _at: u64, piece: Vec<u8>) -> Result<Vec<u8>> {
        self.extend_from_slice(&piece);
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
    /// The piece being filled: `piece` bytes long, the first `filled` of them the block's.
    buf: Vec<u8>,
    filled: usize,
    /// The place in the block of the piece being filled.
    at: u64,
    /// None: the sink sums the pieces.
    sum: Option<StreamSum>,
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
        if self.filled == 0 {
            return Ok(());
        }
        self.buf.truncate(self.filled);
        if let Some(sum) = &mut self.sum {
            sum.update(&self.buf);
        }
        let mut next = self.sink.put(self.at, std::mem::take(&mut self.buf))?;
        // only what the buffer lacks of a piece is zeroed (a buffer handed back whole: none)
        next.resize(self.piece, 0);
        self.buf = next;
        self.at += self.filled as u64;
        self.filled = 0;
        Ok(())
    }

    /// Room in the piece for up to `want` values of `W` bytes (a full piece handed on first):
    /// the bytes they take from `filled` on.
    fn room<const W: usize>(&mut self, want: usize) -> Result<&mut [u8]> {
        if self.piece - self.filled < W {
            self.flush()?;
        }
        let k = ((self.piece - self.filled) / W).min(want);
        let start = self.filled;
        self.filled += k * W;
        Ok(&mut self.buf[start..start + k * W])
    }

    /// `xs` as `W`-byte little-endian values (`bytes` of one value), encoded in parallel.
    pub fn put<T: Copy + Sync, const W: usize>(
        &mut self,
        xs: &[T],
        bytes: impl Fn(T) -> [u8; W] + Sync,
    ) -> Result<()> {
        let mut xs = xs;
        let y = self.section == 2;
        while !xs.is_empty() {
            let room = self.room::<W>(xs.len())?;
            let k = room.len() / W;
            // runs of values per task, each a plain loop (a task per value is the slower)
            room.par_chunks_mut(RUN * W)
                .zip(xs[..k].par_chunks(RUN))
                .for_each(|(b, xs)| {
                    for (b, &x) in b.as_chunks_mut::<W>().0.iter_mut().zip(xs) {
                        *b = bytes(x);
                    }
                });
            if y {
                let r = room
                    .par_chunks(RUN * 4)
                    .map(|b| {
                        b.as_chunks::<4>().0.iter().fold(EMPTY_RANGE, |r, &y| {
                            let y = f32::from_le_bytes(y);
                            widen(r, [y, y])
                        })
                    })
                    .reduce(|| EMPTY_RANGE, widen);
                self.y_range = widen(self.y_range, r);
            }
            xs = &xs[k..];
        }
        Ok(())
    }

    /// The ids `first..first + n` (particles listed by place), encoded in parallel.
    pub fn put_range(&mut self, first: u64, n: u64) -> Result<()> {
        let mut next = first;
        let end = first + n;
        while next < end {
            let want = usize::try_from(end - next).unwrap_or(usize::MAX);
            let room = self.room::<8>(want)?;
            let k = room.len() / 8;
            room.par_chunks_mut(RUN * 8).enumerate().for_each(|(r, b)| {
                let from = next + (r * RUN) as u64;
                for (b, id) in b.as_chunks_mut::<8>().0.iter_mut().zip(from..) {
                    *b = id.to_le_bytes();
                }
            });
            next += k as u64;
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
        buf: vec![0; piece],
        filled: 0,
        at: 0,
        sum: (!sink.sums()).then(|| StreamSum::new(total)),
        section: 0,
        y_range: EMPTY_RANGE,
        sink,
    };
    for section in 0..7 {
        s.section = section;
        let mut first = first_id;
        for (part, &n) in counts.iter().enumerate() {
            let before = s.at + s.filled as u64;
            source.section(part, section, first, &mut s)?;
            let width = [8, 4, 4, 4, 8, 8, 8][section];
            let gave = s.at + s.filled as u64 - before;
            if gave != width * n {
                return Err(crate::error::MpcError::Device(format!(
                    "a checkpoint source gave {gave} bytes for section {section} of part {part} \
                     of {n} particles (please report it)"
                )));
            }
            first += n;
        }
    }
    s.flush()?;
    debug_assert_eq!(s.at, total);
    let checksum = match s.sum.take() {
        Some(sum) => sum.finish(),
        None => s.sink.checksum()?,
    };
    Ok(BlockDone {
        checksum,
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
        for piece in [
            1,
            3,
            1000,
            4097,
            CHUNK - 3,
            CHUNK,
            2 * CHUNK + 5,
            bytes.len(),
        ] {
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
