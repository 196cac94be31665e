//! A file's values split by the part that keeps each particle (`stream.rs`): the part of each
//! particle, found once from the y values when a resume counts its slabs' particles
//! ([`PartMap`]), and the split of a piece's values by it ([`split_into`]) into one buffer
//! ([`Split`]).

use rayon::prelude::*;

/// Which part keeps each particle of the blocks a process reads, found from their y values
/// while the particles are counted, so that the values of the other sections go to their
/// parts without the y values being read again.
pub struct PartMap {
    kind: Kind,
}

enum Kind {
    /// Every particle goes to part 0 (one part takes the whole file).
    One,
    /// Per block read (in file order), each particle's part ([`NONE`]: kept by none).
    Bytes(Vec<Vec<u8>>),
}

/// The part byte of a particle that no part keeps.
pub(super) const NONE: u8 = u8::MAX;

/// The most parts a [`PartMap`] tells apart (the part of a particle is a byte).
pub(super) const MOST_PARTS: usize = NONE as usize;

impl PartMap {
    /// Every particle to part 0: one part (a single GPU) takes the whole file.
    pub fn one() -> PartMap {
        PartMap { kind: Kind::One }
    }

    /// An empty map of `blocks` blocks of `counts` particles, filled piece by piece
    /// ([`PartMap::fill`]).
    pub(super) fn for_blocks(counts: impl Iterator<Item = u64>) -> PartMap {
        // filled on every core: the pages of a large map are touched in parallel
        let blocks = counts
            .map(|n| {
                let mut b = Vec::with_capacity(n as usize);
                b.par_extend(rayon::iter::repeat_n(NONE, n as usize));
                b
            })
            .collect();
        PartMap {
            kind: Kind::Bytes(blocks),
        }
    }

    /// The part of each of block `block`'s particles from `first` on.
    pub(super) fn fill(&mut self, block: usize, first: usize, parts: &[u8]) {
        if let Kind::Bytes(b) = &mut self.kind {
            if let Some(dst) = b.get_mut(block).and_then(|b| b.get_mut(first..)) {
                let n = parts.len().min(dst.len());
                dst[..n].copy_from_slice(&parts[..n]);
            }
        }
    }

    /// Host bytes the map holds (a byte per particle of the blocks read, or none).
    pub(super) fn bytes(&self) -> u64 {
        match &self.kind {
            Kind::One => 0,
            Kind::Bytes(b) => b.iter().map(|b| b.capacity() as u64).sum(),
        }
    }

    /// The owners of block `block`'s particles `lo..hi`.
    pub(super) fn owners(&self, block: usize, lo: usize, hi: usize) -> Owners<'_> {
        match &self.kind {
            Kind::One => Owners::AllFirst,
            Kind::Bytes(b) => {
                Owners::Bytes(b.get(block).and_then(|b| b.get(lo..hi)).unwrap_or(&[]))
            }
        }
    }
}

/// The parts of a piece's particles.
pub(super) enum Owners<'a> {
    /// Every one to part 0.
    AllFirst,
    /// Each one's part byte ([`NONE`]: none).
    Bytes(&'a [u8]),
    /// Each one's part (`u32::MAX`, or any past the parts: none).
    Words(&'a [u32]),
}

/// A particle's part in an owners' list.
trait Owner: Copy + Sync {
    /// The part (any past the parts: none).
    fn part(self) -> usize;
}

impl Owner for u8 {
    fn part(self) -> usize {
        if self == NONE {
            usize::MAX
        } else {
            self as usize
        }
    }
}

impl Owner for u32 {
    fn part(self) -> usize {
        self as usize
    }
}

/// Values per parallel task.
const RUN: usize = 1 << 16;

/// A piece's values split by part: part k's in file order, one after another in one buffer
/// (its memory reused from piece to piece), so the split holds the piece's values once
/// whatever the number of parts.
pub(super) struct Split<T> {
    values: Vec<T>,
    /// Where each part's values end.
    ends: Vec<usize>,
}

impl<T> Default for Split<T> {
    fn default() -> Self {
        Split {
            values: Vec::new(),
            ends: Vec::new(),
        }
    }
}

impl<T> Split<T> {
    /// The parts.
    pub(super) fn parts(&self) -> usize {
        self.ends.len()
    }

    /// Part `k`'s values.
    pub(super) fn part(&self, k: usize) -> &[T] {
        let lo = k.checked_sub(1).map_or(0, |j| self.ends[j]);
        &self.values[lo..self.ends[k]]
    }
}

/// The values of `bytes` (`W` bytes each, decoded and checked by `decode`) split by `owners`
/// into `out` (`parts` parts), each part's in order. In parallel runs: counted first, then
/// each run decodes into its own places of the parts, so nothing is moved twice; `out`'s
/// memory is reused from piece to piece (growing vectors and fresh ones per piece cost more
/// than the decoding: page faults and copies).
pub(super) fn split_into<T: Send + Copy + Default, const W: usize>(
    bytes: &[u8],
    owners: Owners<'_>,
    parts: usize,
    decode: impl Fn(&[u8; W]) -> std::result::Result<T, String> + Sync,
    out: &mut Split<T>,
) -> std::result::Result<(), String> {
    match owners {
        Owners::AllFirst => all_first(bytes, parts, decode, out),
        Owners::Bytes(o) => split_by(bytes, o, parts, decode, out),
        Owners::Words(o) => split_by(bytes, o, parts, decode, out),
    }
}

/// Every value of `bytes` decoded into part 0 (the others left empty).
fn all_first<T: Send + Copy + Default, const W: usize>(
    bytes: &[u8],
    parts: usize,
    decode: impl Fn(&[u8; W]) -> std::result::Result<T, String> + Sync,
    out: &mut Split<T>,
) -> std::result::Result<(), String> {
    let n = bytes.len() / W;
    out.ends.clear();
    out.ends.resize(parts.max(1), n);
    out.values.clear();
    out.values.resize(n, T::default());
    out.values
        .par_chunks_mut(RUN)
        .zip(bytes[..n * W].par_chunks(RUN * W))
        .try_for_each(|(out, b)| {
            for (o, c) in out.iter_mut().zip(b.chunks_exact(W)) {
                *o = decode(c.try_into().expect("W bytes"))?;
            }
            Ok(())
        })
}

fn split_by<T: Send + Copy + Default, const W: usize, O: Owner>(
    bytes: &[u8],
    owners: &[O],
    parts: usize,
    decode: impl Fn(&[u8; W]) -> std::result::Result<T, String> + Sync,
    out: &mut Split<T>,
) -> std::result::Result<(), String> {
    let n = (bytes.len() / W).min(owners.len());
    let (bytes, owners) = (&bytes[..n * W], &owners[..n]);
    let counts: Vec<Vec<usize>> = owners
        .par_chunks(RUN)
        .map(|o| {
            let mut c = vec![0usize; parts];
            for &w in o {
                if let Some(n) = c.get_mut(w.part()) {
                    *n += 1;
                }
            }
            c
        })
        .collect();
    let totals: Vec<usize> = (0..parts)
        .map(|part| counts.iter().map(|c| c[part]).sum())
        .collect();
    out.ends.clear();
    out.ends.extend(totals.iter().scan(0, |end, &t| {
        *end += t;
        Some(*end)
    }));
    out.values.clear();
    out.values.resize(totals.iter().sum(), T::default());
    // each run's places in every part: consecutive, in run order
    let mut places: Vec<Vec<&mut [T]>> = counts.iter().map(|_| Vec::new()).collect();
    let mut rest = out.values.as_mut_slice();
    for (part, &total) in totals.iter().enumerate() {
        let (mut mine, after) = rest.split_at_mut(total);
        rest = after;
        for (run, c) in counts.iter().enumerate() {
            let (first, others) = mine.split_at_mut(c[part]);
            places[run].push(first);
            mine = others;
        }
    }
    bytes
        .par_chunks(RUN * W)
        .zip(owners.par_chunks(RUN))
        .zip(places.into_par_iter())
        .try_for_each(|((b, o), mut places)| {
            let mut at = vec![0usize; parts];
            for (c, &w) in b.chunks_exact(W).zip(o) {
                let w = w.part();
                if w < parts {
                    places[w][at[w]] = decode(c.try_into().expect("W bytes"))?;
                    at[w] += 1;
                }
            }
            Ok(())
        })
}
