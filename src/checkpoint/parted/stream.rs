//! Reading a format-4 file's fluid into a process's parts a window at a time, for a backend
//! that puts each piece straight into its memory (a GPU's, or the CPU backend's own): a resume
//! never holds more than a few pieces on the host, whatever the box. A block lists its
//! particles section by section, so a particle's part (by its y) is known only from the y
//! section: the count notes each particle's part where that fits ([`PartMap`]), else each
//! section is read in step with the y values of the same particles (the y sections are small
//! and stay in the page cache), and the kept values go to their parts in file order.
//!
//! The host memory of a read, in pieces of [`read_piece`] bytes (a piece of an 8-byte
//! section; one of a 4-byte section is half that): each reader lane holds at most three
//! buffers (one read into, one queued, one handled), the two lanes of bytes read once six
//! pieces, the lane of y values read again 1.5; direct reads of pieces from 4 MiB land in
//! aligned buffers first, two pieces for both lanes; the split of a piece by part holds its
//! ids, one f32 and one f64 section, 2.5 pieces, and the parts of a piece without a map 0.5.
//! At most [`READ_PIECES`] pieces (10.5 with a map or one part), a sixteenth of the window
//! each: 0.8 of it; the map (a byte per particle read) is kept only where it fits beside
//! them. What the backend's sink adds is its own (a GPU's labels, half a piece).

use std::time::{Duration, Instant};

use rayon::prelude::*;

use super::encode::StreamSum;
use super::read::{PartedFile, Reread};
use super::split::{split_into, Owners, PartMap, Split, MOST_PARTS, NONE};
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

/// Where a read's time went: the reader thread in its reads, the handler in splitting the
/// values and handing them over.
#[derive(Default)]
struct ReadTimes {
    reading: Duration,
    handling: Duration,
    /// Of the handling: the blocks' checksums, and the values handed to the sink.
    summing: Duration,
    handing: Duration,
}

impl ReadTimes {
    /// Recorded as phases of the start-up (`crate::timing`), beside the read's own.
    fn record(&self, what: &str) {
        let parts = [
            ("reads", self.reading),
            ("values handled", self.handling),
            ("of which checksums", self.summing),
            ("of which handed over", self.handing),
        ];
        for (name, t) in parts {
            if !t.is_zero() {
                crate::timing::record(format!("{what}: {name}"), t.as_secs_f64());
            }
        }
    }
}

/// The most pieces a read holds at once (see the module's text).
const READ_PIECES: u64 = 13;

/// Bytes of a read's piece of an 8-byte section: a sixteenth of the host window, so that the
/// [`READ_PIECES`] take at most 0.8 of it, between 64 KiB and 32 MiB.
fn read_piece(window: u64) -> u64 {
    (window / 16).clamp(64 << 10, 32 << 20)
}

/// Reader threads for the bytes read once (beside the one for the bytes read again).
const DIRECT_LANES: usize = 2;

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

    /// `requests` handed in order to `each` (with their place in the list) while reader
    /// threads read the ones after: the bytes read again (the y values, from the page cache)
    /// by one, those read once by [`DIRECT_LANES`] others taking turns, so that the disk always
    /// has a read queued while the page cache, the handler and the other lane work. Each lane
    /// holds at most two pieces beside the one being handled. Adds the longest lane's time in
    /// reads and the handler's time in `each` to `times`.
    fn read_ahead(
        &self,
        requests: Vec<Request>,
        times: &mut ReadTimes,
        each: &mut dyn FnMut(usize, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let mut turn = 0;
        let lane_of: Vec<usize> = requests
            .iter()
            .map(|&(_, _, again)| match again {
                Reread::Yes => 0,
                Reread::No => {
                    turn += 1;
                    1 + turn % DIRECT_LANES
                }
            })
            .collect();
        let reading = std::thread::scope(|scope| {
            let mut lanes = Vec::with_capacity(1 + DIRECT_LANES);
            for lane in 0..=DIRECT_LANES {
                let mine: Vec<Request> = requests
                    .iter()
                    .zip(&lane_of)
                    .filter(|&(_, &l)| l == lane)
                    .map(|(&r, _)| r)
                    .collect();
                let (tx, rx) = crossbeam::channel::bounded::<Result<Vec<u8>>>(1);
                // the buffers handled come back to be read into again
                let (give_back, free) = crossbeam::channel::bounded::<Vec<u8>>(2);
                let reader = scope.spawn(move || {
                    let mut reading = Duration::ZERO;
                    for (at, len, again) in mine {
                        let mut buf = free.try_recv().unwrap_or_default();
                        let t = Instant::now();
                        let r = self.read_bytes_into(at, len, again, &mut buf).map(|()| buf);
                        reading += t.elapsed();
                        let failed = r.is_err();
                        // a closed channel: the handler stopped (on an error it returns)
                        if tx.send(r).is_err() || failed {
                            break;
                        }
                    }
                    reading
                });
                lanes.push((rx, give_back, reader));
            }
            for (k, &lane) in lane_of.iter().enumerate() {
                let (rx, give_back, _) = &lanes[lane];
                let buf = rx.recv().map_err(|_| {
                    self.bad("a reader thread stopped early (please report it)".into())
                })??;
                let t = Instant::now();
                each(k, &buf)?;
                times.handling += t.elapsed();
                let _ = give_back.try_send(buf);
            }
            let mut longest = Duration::ZERO;
            for (rx, give_back, reader) in lanes {
                drop((rx, give_back));
                longest = longest.max(reader.join().unwrap_or_default());
            }
            Ok::<_, crate::error::MpcError>(longest)
        })?;
        times.reading += reading;
        Ok(())
    }

    /// Pieces of `values` values over `[0, count)`.
    fn pieces(count: u64, values: u64) -> impl Iterator<Item = (u64, u64)> {
        let step = values.max(1);
        (0..count.div_ceil(step)).map(move |i| (i * step, (i * step + step).min(count)))
    }

    /// Particles of each of `parts` parts, particle i going to `part_of(its y)` (None, or an
    /// index past `parts`: kept by none), from the y sections of the blocks meeting `y_range`;
    /// and, where a byte per particle fits the `window` and tells the parts apart, the part of
    /// every particle, so that [`PartedFile::stream_parts`] need not read the y values again.
    /// The host memory it grew (the map included) is recorded (`timing::record_fluid_read`).
    pub fn count_parts(
        &self,
        parts: usize,
        y_range: [f32; 2],
        part_of: impl Fn(f32) -> Option<usize> + Sync,
        window: u64,
    ) -> Result<(Vec<u64>, Option<PartMap>)> {
        let (out, growth) =
            crate::timing::growth_over(|| self.count_within(parts, y_range, part_of, window));
        crate::timing::record_fluid_read(window, growth);
        out
    }

    fn count_within(
        &self,
        parts: usize,
        y_range: [f32; 2],
        part_of: impl Fn(f32) -> Option<usize> + Sync,
        window: u64,
    ) -> Result<(Vec<u64>, Option<PartMap>)> {
        let values = read_piece(window) / 8;
        let blocks = self.blocks_meeting(y_range);
        let total: u64 = blocks.iter().map(|b| b.count).sum();
        let fits = total + READ_PIECES * read_piece(window) <= window;
        let mut map = (parts < MOST_PARTS && fits)
            .then(|| PartMap::for_blocks(blocks.iter().map(|b| b.count)));
        // without a map, the y values are read again beside every other section
        let again = if map.is_some() {
            Reread::No
        } else {
            Reread::Yes
        };
        let mut requests = Vec::new();
        let mut plan = Vec::new();
        for (j, b) in blocks.iter().enumerate() {
            for (lo, hi) in Self::pieces(b.count, values) {
                requests.push((section_start(b, 2) + 4 * lo, 4 * (hi - lo), again));
                plan.push((j, lo as usize));
            }
        }
        let mut counts = vec![0u64; parts];
        let mut owners: Vec<u8> = Vec::new();
        let mut times = ReadTimes::default();
        let part_byte = |c: &[u8]| {
            part_of(f32::from_le_bytes(c.try_into().unwrap()))
                .filter(|&p| p < parts)
                .map_or(NONE, |p| p as u8)
        };
        self.read_ahead(requests, &mut times, &mut |k, bytes| {
            // runs of values counted in parallel, then added
            let count = |run: &[u8]| {
                let mut c = vec![0u64; parts];
                for v in run.chunks_exact(4) {
                    if let Some(k) = part_of(f32::from_le_bytes(v.try_into().unwrap())) {
                        if let Some(n) = c.get_mut(k) {
                            *n += 1;
                        }
                    }
                }
                c
            };
            let runs: Vec<Vec<u64>> = match map.as_mut() {
                Some(map) => {
                    // each run's part bytes and counts in one pass
                    owners.resize(bytes.len() / 4, NONE);
                    let runs = owners
                        .par_chunks_mut(1 << 16)
                        .zip(bytes.par_chunks(4 << 16))
                        .map(|(o, b)| {
                            let mut c = vec![0u64; parts];
                            for (o, v) in o.iter_mut().zip(b.chunks_exact(4)) {
                                *o = part_byte(v);
                                if let Some(n) = c.get_mut(*o as usize) {
                                    *n += 1;
                                }
                            }
                            c
                        })
                        .collect();
                    let (j, lo) = plan[k];
                    map.fill(j, lo, &owners);
                    runs
                }
                None => bytes.par_chunks(4 << 16).map(count).collect(),
            };
            for run in runs {
                for (total, n) in counts.iter_mut().zip(run) {
                    *total += n;
                }
            }
            Ok(())
        })?;
        times.record("count the checkpoint's particles");
        Ok((counts, map))
    }

    /// The values of the particles that `parts` parts keep (as [`PartedFile::count_parts`]
    /// assigns them), section by section, each part's in file order: `sink(part, section,
    /// first, values)` gets the values of a piece, `first` the place within the part of its
    /// first particle. With `map` (the count's, or [`PartMap::one`]) the y values are not read
    /// again. At most a few pieces of `window` are on the host at once. Every value
    /// is checked (ids below the run's count, positions inside the box, velocities finite) and
    /// every block read against its checksum once its last section is in. Returns the
    /// particles of each part. The host memory it grew, with the map's, is recorded
    /// (`timing::record_fluid_read`): what `sink` writes into should be resident before.
    pub fn stream_parts(
        &self,
        parts: usize,
        y_range: [f32; 2],
        part_of: impl Fn(f32) -> Option<usize> + Sync,
        window: u64,
        map: Option<&PartMap>,
        sink: &mut dyn FnMut(usize, usize, u64, Values<'_>) -> Result<()>,
    ) -> Result<Vec<u64>> {
        let (out, growth) = crate::timing::growth_over(|| {
            self.stream_within(parts, y_range, part_of, window, map, sink)
        });
        let held = map.map_or(0, PartMap::bytes);
        crate::timing::record_fluid_read(window, growth.map(|g| g + held));
        out
    }

    fn stream_within(
        &self,
        parts: usize,
        y_range: [f32; 2],
        part_of: impl Fn(f32) -> Option<usize> + Sync,
        window: u64,
        map: Option<&PartMap>,
        sink: &mut dyn FnMut(usize, usize, u64, Values<'_>) -> Result<()>,
    ) -> Result<Vec<u64>> {
        let blocks = self.blocks_meeting(y_range);
        let values = read_piece(window) / 8;
        let length = crate::physics::Physics::from_config(&self.head.config).length;
        let mut sums: Vec<StreamSum> = blocks
            .iter()
            .map(|b| StreamSum::new(b.count * PARTICLE_BYTES))
            .collect();
        let mut counts = vec![0u64; parts];
        // each part's values of the last piece, their memory reused piece after piece
        let mut ids: Split<u64> = Split::default();
        let mut f32s: Split<f32> = Split::default();
        let mut f64s: Split<f64> = Split::default();
        let mut owners: Vec<u32> = Vec::new();
        let mut times = ReadTimes::default();
        // every section's pieces in file order; without a map each (but section 2's own)
        // preceded by the y values of its particles, read again from the page cache; one
        // read-ahead for all
        let mut requests = Vec::new();
        // per request: its section, its block, whether it is the y values ahead of a piece,
        // and the piece's particles in its block
        let mut plan: Vec<(usize, usize, bool, usize, usize)> = Vec::new();
        for (s, &w) in WIDTH.iter().enumerate() {
            for (j, b) in blocks.iter().enumerate() {
                for (lo, hi) in Self::pieces(b.count, values) {
                    let piece = (lo as usize, hi as usize);
                    if s != 2 && map.is_none() {
                        requests.push((section_start(b, 2) + 4 * lo, 4 * (hi - lo), Reread::Yes));
                        plan.push((s, j, true, piece.0, piece.1));
                    }
                    let again = match (s, map) {
                        (2, None) => Reread::Yes,
                        _ => Reread::No,
                    };
                    requests.push((section_start(b, s) + w * lo, w * (hi - lo), again));
                    plan.push((s, j, false, piece.0, piece.1));
                }
            }
        }
        let mut next = vec![0u64; parts];
        let mut section = 0;
        let (mut summing, mut handing) = (Duration::ZERO, Duration::ZERO);
        self.read_ahead(requests, &mut times, &mut |k, bytes| {
            let (s, j, ahead, lo, hi) = plan[k];
            if s != section {
                // a section done: every one keeps the same particles
                counts = std::mem::replace(&mut next, vec![0u64; parts]);
                section = s;
            }
            if ahead || (s == 2 && map.is_none()) {
                owners.clear();
                owners.par_extend(bytes.par_chunks_exact(4).map(|c| {
                    let y = f32::from_le_bytes(c.try_into().unwrap());
                    part_of(y)
                        .filter(|&p| p < parts)
                        .map_or(u32::MAX, |p| p as u32)
                }));
                if ahead {
                    return Ok(());
                }
            }
            let t = Instant::now();
            sums[j].update(bytes);
            summing += t.elapsed();
            let owned = || match map {
                Some(m) => m.owners(j, lo, hi),
                None => Owners::Words(&owners),
            };
            match s {
                0 => {
                    let n = self.len() as u64;
                    let each = split_into(
                        bytes,
                        owned(),
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
                    hand_over(&ids, &mut next, s, |v| Values::Ids(v), sink, &mut handing)?;
                }
                1..=3 => {
                    let l = length[s - 1];
                    let each = split_into(
                        bytes,
                        owned(),
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
                    hand_over(&f32s, &mut next, s, |v| Values::F32(v), sink, &mut handing)?;
                }
                _ => {
                    let each = split_into(
                        bytes,
                        owned(),
                        parts,
                        |c: &[u8; 8]| {
                            let v = f64::from_le_bytes(*c);
                            v.is_finite().then_some(v).ok_or_else(|| {
                                format!("velocity component {} is not finite (corrupted)", s - 4)
                            })
                        },
                        &mut f64s,
                    );
                    each.map_err(|e| self.bad(e))?;
                    hand_over(&f64s, &mut next, s, |v| Values::F64(v), sink, &mut handing)?;
                }
            }
            Ok(())
        })?;
        counts = next;
        times.summing = summing;
        times.handing = handing;
        times.record("read the checkpoint");
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

/// Each part's values of a piece (`each`, of section `section`) handed to `sink` at their
/// places in the part (`next`: the values each part had before, advanced), the time spent in
/// `sink` added to `handing`.
fn hand_over<T>(
    each: &Split<T>,
    next: &mut [u64],
    section: usize,
    values: impl for<'a> Fn(&'a [T]) -> Values<'a>,
    sink: &mut dyn FnMut(usize, usize, u64, Values<'_>) -> Result<()>,
    handing: &mut Duration,
) -> Result<()> {
    for (part, next) in next.iter_mut().enumerate().take(each.parts()) {
        let v = each.part(part);
        let first = *next;
        *next += v.len() as u64;
        if !v.is_empty() {
            let t = Instant::now();
            sink(part, section, first, values(v))?;
            *handing += t.elapsed();
        }
    }
    Ok(())
}
