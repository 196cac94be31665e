//! Reading a format-4 file's fluid into a process's parts a window at a time, for a backend
//! that puts each piece straight into its (device) memory: a resume never holds more than a
//! few pieces on the host, whatever the box. A block lists its particles section by section,
//! so a particle's part (by its y) is known only from the y section: each section is read in
//! step with the y values of the same particles (the y sections are small and stay in the
//! page cache), and the kept values go to their parts in file order.

use rayon::prelude::*;

use super::encode::StreamSum;
use super::read::{PartedFile, Reread};
use super::{Block, PARTICLE_BYTES};
use crate::error::Result;

/// Values of one section of the particles a part keeps, in file order.
pub enum Values<'a> {
    Ids(&'a [u64]),
    F32(&'a [f32]),
    F64(&'a [f64]),
}

/// Bytes of each value of section `s` (0: ids, 1-3: x, y, z, 4-6: vx, vy, vz).
const WIDTH: [u64; 7] = [8, 4, 4, 4, 8, 8, 8];

/// Where section `s` of block `b` starts.
fn section_start(b: &Block, s: usize) -> u64 {
    b.offset + WIDTH[..s].iter().sum::<u64>() * b.count
}

/// A request for bytes of the file, read ahead by a thread of their own: offset, length and
/// whether they are read again.
type Request = (u64, u64, Reread);

impl PartedFile {
    /// The blocks whose y range meets `y_range`.
    fn blocks_meeting(&self, y_range: [f32; 2]) -> Vec<Block> {
        self.block_table()
            .iter()
            .filter(|b| b.count > 0 && b.y_range[1] >= y_range[0] && b.y_range[0] <= y_range[1])
            .copied()
            .collect()
    }

    /// `requests` read in order by a thread while `each` handles the bytes read before: at
    /// most three pieces are on the host at once.
    fn read_ahead(
        &self,
        requests: Vec<Request>,
        each: &mut dyn FnMut(usize, &[u8]) -> Result<()>,
    ) -> Result<()> {
        std::thread::scope(|scope| {
            let (tx, rx) = crossbeam::channel::bounded::<Result<Vec<u8>>>(1);
            // the buffers handled come back to be read into again (three exist at most)
            let (give_back, free) = crossbeam::channel::bounded::<Vec<u8>>(2);
            scope.spawn(move || {
                for (at, len, again) in requests {
                    let mut buf = free.try_recv().unwrap_or_default();
                    let r = self.read_bytes_into(at, len, again, &mut buf).map(|()| buf);
                    let failed = r.is_err();
                    if tx.send(r).is_err() || failed {
                        break;
                    }
                }
            });
            for (k, r) in rx.iter().enumerate() {
                let buf = r?;
                each(k, &buf)?;
                let _ = give_back.try_send(buf);
            }
            Ok(())
        })
    }

    /// Pieces of `values` values over `[0, count)`.
    fn pieces(count: u64, values: u64) -> impl Iterator<Item = (u64, u64)> {
        let step = values.max(1);
        (0..count.div_ceil(step)).map(move |i| (i * step, (i * step + step).min(count)))
    }

    /// Particles of each of `parts` parts, particle i going to `part_of(its y)` (None, or an
    /// index past `parts`: kept by none), from the y sections of the blocks meeting `y_range`.
    pub fn count_parts(
        &self,
        parts: usize,
        y_range: [f32; 2],
        part_of: impl Fn(f32) -> Option<usize> + Sync,
        window: u64,
    ) -> Result<Vec<u64>> {
        let values = crate::checkpoint::piece_bytes(window) as u64 / 8;
        let mut requests = Vec::new();
        for b in self.blocks_meeting(y_range) {
            for (lo, hi) in Self::pieces(b.count, values) {
                // the y values: read again beside every other section
                requests.push((section_start(&b, 2) + 4 * lo, 4 * (hi - lo), Reread::Yes));
            }
        }
        let mut counts = vec![0u64; parts];
        self.read_ahead(requests, &mut |_, bytes| {
            for c in bytes.chunks_exact(4) {
                if let Some(k) = part_of(f32::from_le_bytes(c.try_into().unwrap())) {
                    if k < parts {
                        counts[k] += 1;
                    }
                }
            }
            Ok(())
        })?;
        Ok(counts)
    }

    /// The values of the particles that `parts` parts keep (as [`PartedFile::count_parts`]
    /// assigns them), section by section, each part's in file order: `sink(part, section,
    /// first, values)` gets the values of a piece, `first` the place within the part of its
    /// first particle. At most a few pieces of `window` are on the host at once. Every value
    /// is checked (ids below the run's count, positions inside the box, velocities finite) and
    /// every block read against its checksum once its last section is in. Returns the
    /// particles of each part.
    pub fn stream_parts(
        &self,
        parts: usize,
        y_range: [f32; 2],
        part_of: impl Fn(f32) -> Option<usize> + Sync,
        window: u64,
        sink: &mut dyn FnMut(usize, usize, u64, Values<'_>) -> Result<()>,
    ) -> Result<Vec<u64>> {
        let blocks = self.blocks_meeting(y_range);
        let values = crate::checkpoint::piece_bytes(window) as u64 / 8;
        let length = crate::physics::Physics::from_config(&self.head.config).length;
        let mut sums: Vec<StreamSum> = blocks
            .iter()
            .map(|b| StreamSum::new(b.count * PARTICLE_BYTES))
            .collect();
        let mut counts = vec![0u64; parts];
        // each part's values of the last piece, their memory reused piece after piece
        let mut ids: Vec<Vec<u64>> = Vec::new();
        let mut f32s: Vec<Vec<f32>> = Vec::new();
        let mut f64s: Vec<Vec<f64>> = Vec::new();
        let mut owners: Vec<u32> = Vec::new();
        for s in 0..7 {
            // each piece of section s, preceded by the y values of its particles (section 2
            // itself: once)
            let mut requests = Vec::new();
            let mut plan = Vec::new();
            for (j, b) in blocks.iter().enumerate() {
                for (lo, hi) in Self::pieces(b.count, values) {
                    let y = (section_start(b, 2) + 4 * lo, 4 * (hi - lo), Reread::Yes);
                    if s != 2 {
                        requests.push(y);
                    }
                    let w = WIDTH[s];
                    let again = if s == 2 { Reread::Yes } else { Reread::No };
                    requests.push((section_start(b, s) + w * lo, w * (hi - lo), again));
                    plan.push(j);
                }
            }
            let mut next = counts.iter().map(|_| 0u64).collect::<Vec<_>>();
            let mut piece = 0;
            self.read_ahead(requests, &mut |k, bytes| {
                let is_y = s == 2 || k % 2 == 0;
                if is_y {
                    owners.clear();
                    owners.par_extend(bytes.par_chunks_exact(4).map(|c| {
                        let y = f32::from_le_bytes(c.try_into().unwrap());
                        part_of(y)
                            .filter(|&p| p < parts)
                            .map_or(u32::MAX, |p| p as u32)
                    }));
                    if s != 2 {
                        return Ok(());
                    }
                }
                let j = plan[piece];
                piece += 1;
                sums[j].update(bytes);
                match s {
                    0 => {
                        let n = self.len() as u64;
                        let each = split_into(
                            bytes,
                            &owners,
                            parts,
                            |c: &[u8; 8]| {
                                let id = u64::from_le_bytes(*c);
                                (id < n).then_some(id).ok_or_else(|| {
                                    format!("fluid particle id {id} of a run of {n} (corrupted)")
                                })
                            },
                            &mut ids,
                        );
                        each.map_err(|e| self.bad(e))?;
                        for (part, v) in ids.iter().enumerate() {
                            let first = next[part];
                            next[part] += v.len() as u64;
                            if !v.is_empty() {
                                sink(part, s, first, Values::Ids(v))?;
                            }
                        }
                    }
                    1..=3 => {
                        let l = length[s - 1];
                        let each = split_into(
                            bytes,
                            &owners,
                            parts,
                            |c: &[u8; 4]| {
                                let x = f32::from_le_bytes(*c);
                                (x >= 0.0 && f64::from(x) < l).then_some(x).ok_or_else(|| {
                                    format!(
                                        "position component {} = {x} outside the box (corrupted)",
                                        s - 1
                                    )
                                })
                            },
                            &mut f32s,
                        );
                        each.map_err(|e| self.bad(e))?;
                        for (part, v) in f32s.iter().enumerate() {
                            let first = next[part];
                            next[part] += v.len() as u64;
                            if !v.is_empty() {
                                sink(part, s, first, Values::F32(v))?;
                            }
                        }
                    }
                    _ => {
                        let each = split_into(
                            bytes,
                            &owners,
                            parts,
                            |c: &[u8; 8]| {
                                let v = f64::from_le_bytes(*c);
                                v.is_finite().then_some(v).ok_or_else(|| {
                                    format!(
                                        "velocity component {} is not finite (corrupted)",
                                        s - 4
                                    )
                                })
                            },
                            &mut f64s,
                        );
                        each.map_err(|e| self.bad(e))?;
                        for (part, v) in f64s.iter().enumerate() {
                            let first = next[part];
                            next[part] += v.len() as u64;
                            if !v.is_empty() {
                                sink(part, s, first, Values::F64(v))?;
                            }
                        }
                    }
                }
                Ok(())
            })?;
            counts = next;
        }
        for (b, sum) in blocks.iter().zip(sums) {
            if sum.finish() != b.checksum {
                return Err(self.bad(format!(
                    "checksum mismatch in the block at byte {}: the file is truncated or \
                     corrupted",
                    b.offset
                )));
            }
        }
        Ok(counts)
    }
}

/// The values of `bytes` (`W` bytes each, decoded and checked by `decode`) split by their
/// owners (`owners[i]`: the part of value i; past `parts`: none) into `each`, each part's in
/// order. In parallel runs: counted first, then each run decodes into its own places of the
/// parts, so nothing is moved twice; `each`'s memory is reused from piece to piece (growing
/// vectors and fresh ones per piece cost more than the decoding: page faults and copies).
fn split_into<T: Send + Copy + Default, const W: usize>(
    bytes: &[u8],
    owners: &[u32],
    parts: usize,
    decode: impl Fn(&[u8; W]) -> std::result::Result<T, String> + Sync,
    each: &mut Vec<Vec<T>>,
) -> std::result::Result<(), String> {
    const RUN: usize = 1 << 16;
    let n = (bytes.len() / W).min(owners.len());
    let (bytes, owners) = (&bytes[..n * W], &owners[..n]);
    let counts: Vec<Vec<usize>> = owners
        .par_chunks(RUN)
        .map(|o| {
            let mut c = vec![0usize; parts];
            for &w in o {
                if let Some(n) = c.get_mut(w as usize) {
                    *n += 1;
                }
            }
            c
        })
        .collect();
    each.resize_with(parts, Vec::new);
    for (part, out) in each.iter_mut().enumerate() {
        out.clear();
        out.resize(counts.iter().map(|c| c[part]).sum(), T::default());
    }
    // each run's places in every part: consecutive, in run order
    let mut places: Vec<Vec<&mut [T]>> = counts.iter().map(|_| Vec::new()).collect();
    for (part, out) in each.iter_mut().enumerate() {
        let mut rest = out.as_mut_slice();
        for (run, c) in counts.iter().enumerate() {
            let (mine, after) = rest.split_at_mut(c[part]);
            places[run].push(mine);
            rest = after;
        }
    }
    bytes
        .par_chunks(RUN * W)
        .zip(owners.par_chunks(RUN))
        .zip(places.into_par_iter())
        .try_for_each(|((b, o), mut places)| {
            let mut at = vec![0usize; parts];
            for (c, &w) in b.chunks_exact(W).zip(o) {
                let w = w as usize;
                if w < parts {
                    places[w][at[w]] = decode(c.try_into().expect("W bytes"))?;
                    at[w] += 1;
                }
            }
            Ok(())
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::parted::{to_bytes, FluidView};
    use crate::checkpoint::CheckpointHead;
    use crate::config::Config;
    use crate::fluid_parts::FluidSource;
    use crate::state::FluidState;

    /// Streamed in small pieces into two parts (and one kept by none), the values put at
    /// their places rebuild each part in file order; sorted by id they are the parts that
    /// `fluid_parts` reads; the counts agree; a damaged block is caught.
    #[test]
    fn streamed_parts_hold_the_parts_read_whole() {
        let config = Config::from_ron_str(
            "(cells: (6, 12, 5), particles_per_cell: 7, time_step: 0.1, seed: 21, steps: 9, \
              collision: Srd(angle_deg: 130.0))",
        )
        .unwrap();
        let fluid = FluidState::initial(&config);
        let phys = crate::physics::Physics::from_config(&config);
        let head = CheckpointHead {
            config,
            step: 1,
            stats: crate::stats::RunStats::new(phys.profile_bins()),
            md: None,
            run_id: Some("streamed".into()),
        };
        let all = [f32::NEG_INFINITY, f32::INFINITY];
        let part_of = |y: f32| match y.floor() as u32 {
            0..=3 => None,
            4..=7 => Some(0),
            _ => Some(1),
        };
        // two writers, the second's particles in reverse order
        let mut ids: Vec<u64> = (0..fluid.len() as u64).collect();
        let (a, b) = ids.split_at_mut(fluid.len() / 2);
        b.reverse();
        let cut = |ids: &[u64]| {
            let mut st = FluidState::default();
            for k in 0..3 {
                st.pos[k] = ids.iter().map(|&i| fluid.pos[k][i as usize]).collect();
                st.vel[k] = ids.iter().map(|&i| fluid.vel[k][i as usize]).collect();
            }
            vec![(st, ids.to_vec())]
        };
        let (pa, pb) = (cut(a), cut(b));
        let n = fluid.len() as u64;
        let bytes = to_bytes(&head, n, &[FluidView::Parts(&pa), FluidView::Parts(&pb)]).unwrap();
        let file = PartedFile::from_bytes(bytes.clone(), "streamed").unwrap();
        let expected = FluidSource::State(&fluid).parts(2, all, part_of).unwrap();
        let counts = file.count_parts(2, all, part_of, 1 << 20).unwrap();
        let mut got: Vec<(FluidState, Vec<u64>)> = counts
            .iter()
            .map(|&c| {
                let c = c as usize;
                let z = FluidState {
                    pos: [vec![0.0; c], vec![0.0; c], vec![0.0; c]],
                    vel: [vec![0.0; c], vec![0.0; c], vec![0.0; c]],
                };
                (z, vec![0; c])
            })
            .collect();
        // a window of 64 KiB: pieces of 8 Ki values, several per block
        let streamed = file
            .stream_parts(2, all, part_of, 64 << 10, &mut |p, s, first, v| {
                let f = first as usize;
                let (st, ids) = &mut got[p];
                match v {
                    Values::Ids(x) => ids[f..f + x.len()].copy_from_slice(x),
                    Values::F32(x) => st.pos[s - 1][f..f + x.len()].copy_from_slice(x),
                    Values::F64(x) => st.vel[s - 4][f..f + x.len()].copy_from_slice(x),
                }
                Ok(())
            })
            .unwrap();
        assert_eq!(streamed, counts);
        for (k, (st, ids)) in got.iter().enumerate() {
            assert_eq!(ids.len(), expected[k].1.len());
            let mut order: Vec<usize> = (0..ids.len()).collect();
            order.sort_by_key(|&i| ids[i]);
            let sorted: Vec<u64> = order.iter().map(|&i| ids[i]).collect();
            assert_eq!(sorted, expected[k].1);
            for c in 0..3 {
                let p: Vec<f32> = order.iter().map(|&i| st.pos[c][i]).collect();
                let v: Vec<f64> = order.iter().map(|&i| st.vel[c][i]).collect();
                assert_eq!(
                    (p, v),
                    (expected[k].0.pos[c].clone(), expected[k].0.vel[c].clone())
                );
            }
        }
        // the lowest byte of the first particle's x: still inside the box
        let mut damaged = bytes;
        damaged[super::super::PAGE as usize + 8 * a.len()] ^= 1;
        let file = PartedFile::from_bytes(damaged, "damaged").unwrap();
        let err = file
            .stream_parts(2, all, part_of, 64 << 10, &mut |_, _, _, _| Ok(()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("checksum mismatch"), "{err}");
    }
}
