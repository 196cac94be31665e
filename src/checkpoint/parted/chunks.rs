//! A part's section read a chunk at a time through two staging slots (the GPUs' block sources,
//! `backend::cuda::snapshot`): the copy of chunk k + 1 is in flight into one slot while the
//! host keeps the live values of chunk k from the other and encodes them. What copies is a
//! [`ChunkFetch`]: queue a chunk's copy into a slot, wait for it, read it. A slot is queued
//! again only once the host has finished reading it: [`ChunkFetch::wait`] lends its values for
//! as long as they are read, and [`ChunkFetch::queue`] needs the fetcher back, so a copy into
//! a slot never overlaps the host's reading of it.

use rayon::prelude::*;

use super::encode::BlockStream;
use crate::error::Result;

/// The cell word of a free slot (`MPC_DEAD`): its values are not listed.
pub(crate) const FREE: u32 = u32::MAX;

/// Slots a task filters at a time.
const RUN: usize = 1 << 16;

/// The values of one chunk of a section, as a copy left them in a staging slot.
pub(crate) enum Fetched<'a> {
    /// Global ids (section 0 of a part that has them).
    Ids(&'a [u32]),
    /// x, y or z.
    F32(&'a [f32]),
    /// vx, vy or vz.
    F64(&'a [f64]),
    /// Section 0 of a part listed by place: no values; the chunk's slot count.
    Places(usize),
}

/// A chunk waited for: the cell words of its slots (None: every slot is live) and its values.
pub(crate) struct Chunk<'a> {
    pub(crate) words: Option<&'a [u32]>,
    pub(crate) values: Fetched<'a>,
}

/// Copies of a part's slots, a chunk at a time, into two staging slots.
pub(crate) trait ChunkFetch {
    /// Slots of the part (live and free).
    fn slots(&self) -> usize;
    /// Slots per chunk: what a staging slot holds.
    fn chunk(&self) -> usize;
    /// Queue the copy of slots `lo..hi` of section `section` (0: ids, 1-3: x, y, z, 4-6: vx,
    /// vy, vz), with their cell words, into staging slot `slot` (0 or 1); it may complete
    /// later.
    fn queue(&mut self, slot: usize, section: usize, lo: usize, hi: usize) -> Result<()>;
    /// The chunk queued into `slot`, once its copy is complete.
    fn wait(&mut self, slot: usize) -> Result<Chunk<'_>>;
}

/// The values kept from a chunk with free slots (host memory, reused chunk after chunk).
#[derive(Default)]
pub(crate) struct Kept {
    ids: Vec<u32>,
    f32s: Vec<f32>,
    f64s: Vec<f64>,
}

/// Section `section` of the part `fetch` copies, into `out` (see `BlockSource::section`): its
/// live slots' values in slot order, chunk k + 1 copied while chunk k is kept and encoded.
pub(crate) fn read_section(
    fetch: &mut dyn ChunkFetch,
    section: usize,
    first_id: u64,
    kept: &mut Kept,
    out: &mut BlockStream<'_>,
) -> Result<()> {
    let slots = fetch.slots();
    let chunk = fetch.chunk().max(1);
    let range = |k: usize| (k * chunk, ((k + 1) * chunk).min(slots));
    let chunks = slots.div_ceil(chunk);
    if chunks == 0 {
        return Ok(());
    }
    let (lo, hi) = range(0);
    fetch.queue(0, section, lo, hi)?;
    let mut next_id = first_id;
    for k in 0..chunks {
        if k + 1 < chunks {
            // into the slot the host finished reading at chunk k - 1
            let (lo, hi) = range(k + 1);
            fetch.queue((k + 1) % 2, section, lo, hi)?;
        }
        let Chunk { words, values } = fetch.wait(k % 2)?;
        match values {
            Fetched::Places(n) => {
                let live = words.map_or(n, count_live) as u64;
                out.put_range(next_id, live)?;
                next_id += live;
            }
            Fetched::Ids(v) => put_live(v, words, &mut kept.ids, out, |id: u32| {
                u64::from(id).to_le_bytes()
            })?,
            Fetched::F32(v) => put_live(v, words, &mut kept.f32s, out, f32::to_le_bytes)?,
            Fetched::F64(v) => put_live(v, words, &mut kept.f64s, out, f64::to_le_bytes)?,
        }
    }
    Ok(())
}

fn count_live(words: &[u32]) -> usize {
    words
        .par_chunks(RUN)
        .map(|w| w.iter().filter(|&&c| c != FREE).count())
        .sum()
}

/// The values of `vals` whose slot is live into `out` (through `kept` where some are free).
fn put_live<T: Copy + Default + Send + Sync, const W: usize>(
    vals: &[T],
    words: Option<&[u32]>,
    kept: &mut Vec<T>,
    out: &mut BlockStream<'_>,
    bytes: impl Fn(T) -> [u8; W] + Sync,
) -> Result<()> {
    match words {
        None => out.put(vals, bytes),
        Some(w) => {
            keep_live(vals, w, kept);
            out.put(kept, bytes)
        }
    }
}

/// The values of `vals` whose word is not [`FREE`], in order, into `kept`: runs of slots
/// counted in parallel, then each run's values put in its place in parallel.
fn keep_live<T: Copy + Default + Send + Sync>(vals: &[T], words: &[u32], kept: &mut Vec<T>) {
    let n = vals.len().min(words.len());
    let (vals, words) = (&vals[..n], &words[..n]);
    let counts: Vec<usize> = words
        .par_chunks(RUN)
        .map(|w| w.iter().filter(|&&c| c != FREE).count())
        .collect();
    kept.clear();
    kept.resize(counts.iter().sum(), T::default());
    let mut places = Vec::with_capacity(counts.len());
    let mut rest = kept.as_mut_slice();
    for &c in &counts {
        let (place, tail) = rest.split_at_mut(c);
        places.push(place);
        rest = tail;
    }
    places
        .into_par_iter()
        .zip(vals.par_chunks(RUN).zip(words.par_chunks(RUN)))
        .for_each(|(place, (v, w))| {
            let live = v.iter().zip(w).filter(|(_, &c)| c != FREE);
            for (p, (&v, _)) in place.iter_mut().zip(live) {
                *p = v;
            }
        });
}

#[cfg(test)]
mod tests {
    //! The double-buffered read of a part on the host: a fetcher whose copies complete only when
    //! waited for (a slot holds garbage meanwhile), so a chunk read before its wait, or a slot
    //! queued again before the host finished reading it, changes the block or fails.

    use super::*;
    use crate::checkpoint::parted::encode::{stream_block, BlockSource, LocalFluid};
    use crate::state::FluidState;

    /// A GPU's arrays on the host: every slot, free ones marked in `words`.
    struct HostPart {
        words: Option<Vec<u32>>,
        ids: Option<Vec<u32>>,
        st: FluidState,
    }

    impl HostPart {
        fn live(&self) -> Vec<usize> {
            (0..self.st.len())
                .filter(|&i| self.words.as_ref().is_none_or(|w| w[i] != FREE))
                .collect()
        }
    }

    /// One staging slot: its buffers and the copy queued into it (section, lo, hi).
    #[derive(Default)]
    struct Slot {
        words: Vec<u32>,
        ids: Vec<u32>,
        f32s: Vec<f32>,
        f64s: Vec<f64>,
        queued: Option<(usize, usize, usize)>,
    }

    /// Copies that complete when waited for.
    struct Deferred<'p> {
        part: &'p HostPart,
        chunk: usize,
        slot: [Slot; 2],
        /// The most copies queued and not yet waited for at once.
        most_in_flight: usize,
    }

    impl Deferred<'_> {
        fn in_flight(&self) -> usize {
            self.slot.iter().filter(|s| s.queued.is_some()).count()
        }
    }

    fn garbage<T: Copy>(buf: &mut Vec<T>, n: usize, g: T) {
        buf.clear();
        buf.resize(n, g);
    }

    impl ChunkFetch for Deferred<'_> {
        fn slots(&self) -> usize {
            self.part.st.len()
        }

        fn chunk(&self) -> usize {
            self.chunk
        }

        fn queue(&mut self, slot: usize, section: usize, lo: usize, hi: usize) -> Result<()> {
            let s = &mut self.slot[slot];
            assert!(
                s.queued.is_none(),
                "slot {slot} queued again before its wait"
            );
            assert!(lo < hi && hi - lo <= self.chunk, "chunk {lo}..{hi}");
            // the copy is in flight: the slot holds nothing the host may read
            let n = self.chunk;
            garbage(&mut s.words, n, 7);
            garbage(&mut s.ids, n, 0xdead);
            garbage(&mut s.f32s, n, f32::NAN);
            garbage(&mut s.f64s, n, -1e300);
            s.queued = Some((section, lo, hi));
            self.most_in_flight = self.most_in_flight.max(self.in_flight());
            Ok(())
        }

        fn wait(&mut self, slot: usize) -> Result<Chunk<'_>> {
            let part = self.part;
            let s = &mut self.slot[slot];
            let (section, lo, hi) = s.queued.take().expect("waited for a chunk never queued");
            // the copy completes now
            let n = hi - lo;
            if let Some(w) = &part.words {
                s.words[..n].copy_from_slice(&w[lo..hi]);
            }
            let values = match section {
                0 => match &part.ids {
                    Some(ids) => {
                        s.ids[..n].copy_from_slice(&ids[lo..hi]);
                        Fetched::Ids(&s.ids[..n])
                    }
                    None => Fetched::Places(n),
                },
                1..=3 => {
                    s.f32s[..n].copy_from_slice(&part.st.pos[section - 1][lo..hi]);
                    Fetched::F32(&s.f32s[..n])
                }
                _ => {
                    s.f64s[..n].copy_from_slice(&part.st.vel[section - 4][lo..hi]);
                    Fetched::F64(&s.f64s[..n])
                }
            };
            let words = part.words.as_ref().map(|_| &s.words[..n]);
            Ok(Chunk { words, values })
        }
    }

    /// GPUs' parts read through [`Deferred`] copies of `chunk` slots.
    struct Parts {
        parts: Vec<HostPart>,
        chunk: usize,
        kept: Vec<Kept>,
        most_in_flight: usize,
    }

    impl BlockSource for Parts {
        fn counts(&self) -> Vec<u64> {
            self.parts.iter().map(|p| p.live().len() as u64).collect()
        }

        fn section(
            &mut self,
            part: usize,
            section: usize,
            first_id: u64,
            out: &mut BlockStream<'_>,
        ) -> Result<()> {
            let mut f = Deferred {
                part: &self.parts[part],
                chunk: self.chunk,
                slot: Default::default(),
                most_in_flight: 0,
            };
            read_section(&mut f, section, first_id, &mut self.kept[part], out)?;
            assert_eq!(f.in_flight(), 0, "a copy left in flight");
            self.most_in_flight = self.most_in_flight.max(f.most_in_flight);
            Ok(())
        }
    }

    /// `n` slots of particles, every third from `skip` on free (where `free`), ids scrambled
    /// (where `ids`).
    fn part(n: usize, skip: usize, free: bool, ids: bool) -> HostPart {
        let cfg = crate::config::Config::from_ron_str(
            "(cells: (10, 10, 10), particles_per_cell: 5, time_step: 0.1, seed: 4, steps: 1, \
              collision: Srd(angle_deg: 130.0))",
        )
        .unwrap();
        let all = FluidState::initial(&cfg);
        let mut st = FluidState::default();
        for k in 0..3 {
            st.pos[k] = all.pos[k][skip..skip + n].to_vec();
            st.vel[k] = all.vel[k][skip..skip + n].to_vec();
        }
        HostPart {
            words: free.then(|| {
                (0..n)
                    .map(|i| {
                        if (i + skip).is_multiple_of(3) {
                            FREE
                        } else {
                            i as u32
                        }
                    })
                    .collect()
            }),
            ids: ids.then(|| (0..n as u32).map(|i| (i * 7919 + 13) % 100_003).collect()),
            st,
        }
    }

    /// The same particles as the host holds them after a download: the live ones in slot order.
    fn downloaded(parts: &[HostPart]) -> LocalFluid {
        let live = |p: &HostPart| {
            let keep = p.live();
            let mut st = FluidState::default();
            for k in 0..3 {
                st.pos[k] = keep.iter().map(|&i| p.st.pos[k][i]).collect();
                st.vel[k] = keep.iter().map(|&i| p.st.vel[k][i]).collect();
            }
            let ids = p
                .ids
                .as_ref()
                .map(|ids| keep.iter().map(|&i| u64::from(ids[i])).collect::<Vec<_>>());
            (st, ids)
        };
        let parts: Vec<_> = parts.iter().map(live).collect();
        if parts.iter().any(|(_, ids)| ids.is_none()) {
            return LocalFluid::Placed(parts.into_iter().map(|(st, _)| st).collect());
        }
        LocalFluid::Parts(
            parts
                .into_iter()
                .map(|(st, ids)| (st, ids.unwrap_or_default()))
                .collect(),
        )
    }

    /// Read chunk by chunk with the next chunk's copy in flight, a block is the block of the
    /// downloaded particles byte for byte, its checksum and y range too: slabs with free slots and
    /// ids, slabs listed by place, one GPU without free slots; chunks of one slot to more than a
    /// part, pieces that split values.
    /// A layout's name and its parts' arguments of `part`: (slots, skip, free slots, ids).
    type Layout = (&'static str, Vec<(usize, usize, bool, bool)>);

    #[test]
    fn chunks_read_double_buffered_give_the_downloads_block() {
        let layouts: [Layout; 4] = [
            (
                "slabs with ids",
                vec![(1500, 0, true, true), (977, 1500, true, true)],
            ),
            (
                "slabs by place",
                vec![(1200, 0, true, false), (1300, 2000, true, false)],
            ),
            ("one GPU", vec![(2345, 11, false, false)]),
            (
                "an empty slab",
                vec![(0, 0, true, true), (640, 3, true, true)],
            ),
        ];
        for (name, layout) in layouts {
            for chunk in [1, 7, 1000, 4096] {
                for piece in [1004, 32 << 20] {
                    let mk = || -> Vec<HostPart> {
                        layout
                            .iter()
                            .map(|&(n, s, f, i)| part(n, s, f, i))
                            .collect()
                    };
                    let mut expected = downloaded(&mk());
                    let mut want = Vec::new();
                    let want_done = stream_block(&mut expected, 5, piece, &mut want).unwrap();
                    let parts = mk();
                    let mut src = Parts {
                        kept: parts.iter().map(|_| Kept::default()).collect(),
                        parts,
                        chunk,
                        most_in_flight: 0,
                    };
                    let mut got = Vec::new();
                    let done = stream_block(&mut src, 5, piece, &mut got).unwrap();
                    let case = format!("{name}, chunks of {chunk}, pieces of {piece}");
                    assert!(got == want, "{case}: the bytes differ");
                    assert_eq!(done, want_done, "{case}");
                    // more than one chunk: the next one's copy was in flight during the read
                    let several = layout.iter().any(|&(n, ..)| n > chunk);
                    assert_eq!(src.most_in_flight == 2, several, "{case}");
                }
            }
        }
    }
}
