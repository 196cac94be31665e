//! The checkpoint file, format 4: the fluid in blocks, one per writer (an MPI rank, or the one
//! process), each holding its particles with their global indices. Blocks start on 4 KiB pages,
//! so every rank writes its own block into the one file with positioned writes and no two ranks
//! touch one page; a resume on any rank count reads only the blocks whose y range meets its
//! layers. The rest (config, step, statistics, the MD state, the block table) follows the last
//! block, encoded with postcard; the header names its place and checksum, and every block has
//! its own checksum.
//!
//! ```text
//! 0     "MPCBOXCK", version (u32), 0 (u32), meta offset, meta length, meta checksum (u64 each)
//! 40    zeros up to 4096
//! 4096  block 0: ids (u64), x, y, z (f32), vx, vy, vz (f64), each `count` long; then zeros
//!       to the next page; block 1 ...
//! meta  postcard of `Meta` (on a page of its own)
//! ```
//! Every number is little-endian.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::{CheckpointHead, MAGIC};
use crate::backend::slabbed::PARTICLE_WORDS;
use crate::error::{MpcError, Result};
use crate::fluid_parts::FluidPart;
use crate::physics::Physics;
use crate::ranks::Transport;
use crate::state::FluidState;

pub(super) const VERSION: u32 = 4;
/// Bytes of the header proper.
const HEADER: usize = 40;
/// Blocks and the meta start on pages of this size.
const PAGE: u64 = 4096;
/// Bytes per particle in a block.
const PARTICLE_BYTES: u64 = 44;

/// One writer's particles in the file.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
struct Block {
    offset: u64,
    count: u64,
    /// The lowest and highest y of its particles (a reader skips a block outside its layers).
    y_range: [f32; 2],
    checksum: u64,
}

#[derive(Serialize, Deserialize)]
struct Meta {
    head: CheckpointHead,
    n_fluid: u64,
    blocks: Vec<Block>,
}

/// 64-bit FNV-1a over 8-byte words (a short tail padded with zeros): any change of one word
/// changes the hash, and it runs at memory speed rather than a byte at a time.
fn fnv_words(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for c in bytes.chunks(8) {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The checksum of a block or the meta: [`fnv_words`] of each MiB (in parallel), folded
/// together with the length.
fn checksum(bytes: &[u8]) -> u64 {
    let parts: Vec<u64> = bytes.par_chunks(1 << 20).map(fnv_words).collect();
    let mut h = fnv_words(&(bytes.len() as u64).to_le_bytes());
    for p in parts {
        h = (h ^ p).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// An I/O error on `p` as the crate's error.
fn io(p: &Path) -> impl Fn(std::io::Error) -> MpcError + '_ {
    move |e| MpcError::io(p, e)
}

fn align(x: u64) -> u64 {
    x.div_ceil(PAGE) * PAGE
}

/// Particles packed as [`PARTICLE_WORDS`] (position, velocity, id bits) as a block's bytes,
/// with their count and y range.
fn encode_block(packed: &[f64]) -> (Vec<u8>, u64, [f32; 2]) {
    let n = packed.len() / PARTICLE_WORDS;
    let mut bytes = vec![0u8; n * PARTICLE_BYTES as usize];
    let (ids, rest) = bytes.split_at_mut(8 * n);
    let (pos, vel) = rest.split_at_mut(12 * n);
    let p = |i: usize| &packed[i * PARTICLE_WORDS..(i + 1) * PARTICLE_WORDS];
    ids.par_chunks_mut(8)
        .enumerate()
        .for_each(|(i, b)| b.copy_from_slice(&p(i)[6].to_bits().to_le_bytes()));
    pos.par_chunks_mut(4).enumerate().for_each(|(j, b)| {
        let (k, i) = (j / n, j % n);
        b.copy_from_slice(&(p(i)[k] as f32).to_le_bytes())
    });
    vel.par_chunks_mut(8).enumerate().for_each(|(j, b)| {
        let (k, i) = (j / n, j % n);
        b.copy_from_slice(&p(i)[3 + k].to_le_bytes())
    });
    let y_range = (0..n)
        .map(|i| p(i)[1] as f32)
        .fold([f32::INFINITY, f32::NEG_INFINITY], |r, y| {
            [r[0].min(y), r[1].max(y)]
        });
    (bytes, n as u64, y_range)
}

/// A block's particles as (state, ids), in the block's order.
fn decode_block(bytes: &[u8], n: usize) -> (FluidState, Vec<u64>) {
    let (ids, rest) = bytes.split_at(8 * n);
    let (pos, vel) = rest.split_at(12 * n);
    let ids = ids
        .par_chunks(8)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let mut st = FluidState::default();
    for k in 0..3 {
        st.pos[k] = pos[4 * k * n..4 * (k + 1) * n]
            .par_chunks(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        st.vel[k] = vel[8 * k * n..8 * (k + 1) * n]
            .par_chunks(8)
            .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
            .collect();
    }
    (st, ids)
}

/// The failures of one collective stage summed over the ranks: Ok on every rank when none
/// failed, else the local error (or one naming the stage) on every rank.
fn agree(transport: &dyn Transport, mine: Result<()>, stage: &str, path: &Path) -> Result<()> {
    let mut failed = [f64::from(u8::from(mine.is_err()))];
    transport.sum(&mut failed)?;
    match mine {
        Err(e) => Err(e),
        Ok(()) if failed[0] > 0.0 => Err(MpcError::Checkpoint {
            path: path.display().to_string(),
            problem: format!("{} rank(s) could not {stage}", failed[0]),
        }),
        Ok(()) => Ok(()),
    }
}

/// Write the checkpoint of `head` and the fluid of `n_fluid` particles, of which this process
/// holds `packed` ([`PARTICLE_WORDS`] each), to `path` atomically: every rank calls this, each
/// writes its own block into a temporary file beside `path`, and rank 0 adds the meta, then
/// renames it over `path` once every block is on disk. Every rank returns the same outcome; a
/// failure leaves the previous file as it was.
pub(crate) fn write(
    path: &Path,
    head: &CheckpointHead,
    n_fluid: u64,
    packed: &[f64],
    transport: &dyn Transport,
) -> Result<()> {
    let (bytes, count, y_range) = encode_block(packed);
    let sum = checksum(&bytes);
    let mine = [
        bytes.len() as f64,
        count as f64,
        (sum >> 32) as f64,
        (sum & 0xffff_ffff) as f64,
        f64::from(y_range[0]),
        f64::from(y_range[1]),
        f64::from(std::process::id()),
    ];
    let all = transport.gather(&mine)?;
    let mut blocks = Vec::with_capacity(transport.ranks());
    let mut at = PAGE;
    for w in all.chunks_exact(mine.len()) {
        let len = w[0] as u64;
        blocks.push(Block {
            offset: at,
            count: w[1] as u64,
            y_range: [w[4] as f32, w[5] as f32],
            checksum: ((w[2] as u64) << 32) | w[3] as u64,
        });
        at = align(at + len);
    }
    let total: u64 = blocks.iter().map(|b| b.count).sum();
    if total != n_fluid {
        return Err(MpcError::Checkpoint {
            path: path.display().to_string(),
            problem: format!(
                "the ranks hold {total} fluid particles, the run has {n_fluid} (please report it)"
            ),
        });
    }
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // rank 0's process id names the temporary file on every rank
    let tmp = dir.join(format!(".{name}.tmp.{}", all[6] as u64));
    let root = transport.rank() == 0;
    let created = if root {
        std::fs::create_dir_all(&dir)
            .map_err(io(&dir))
            .and_then(|_| File::create(&tmp).map(drop).map_err(io(&tmp)))
    } else {
        Ok(())
    };
    agree(transport, created, "create the temporary checkpoint", path)?;
    let me = blocks[transport.rank()];
    let written = std::fs::OpenOptions::new()
        .write(true)
        .open(&tmp)
        .and_then(|f| {
            f.write_all_at(&bytes, me.offset)?;
            f.sync_data()
        })
        .map_err(io(&tmp));
    drop(bytes);
    let written = agree(transport, written, "write its block", path);
    let finished = written.and_then(|_| {
        if !root {
            return Ok(());
        }
        let (meta, header) = meta_and_header(path, head, n_fluid, blocks, at)?;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&tmp)
            .map_err(io(&tmp))?;
        f.write_all_at(&meta, at)
            .and_then(|_| f.write_all_at(&header, 0))
            .and_then(|_| f.sync_all())
            .and_then(|_| std::fs::rename(&tmp, path))
            .map_err(io(path))?;
        if let Ok(d) = File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(())
    });
    if finished.is_err() && root {
        let _ = std::fs::remove_file(&tmp);
    }
    agree(transport, finished, "finish the checkpoint", path)
}

/// The encoded meta (to be written at `at`) and the header naming it.
fn meta_and_header(
    path: &Path,
    head: &CheckpointHead,
    n_fluid: u64,
    blocks: Vec<Block>,
    at: u64,
) -> Result<(Vec<u8>, Vec<u8>)> {
    let meta = Meta {
        head: head.clone(),
        n_fluid,
        blocks,
    };
    let meta = postcard::to_stdvec(&meta).map_err(|e| MpcError::Checkpoint {
        path: path.display().to_string(),
        problem: format!("cannot encode: {e}"),
    })?;
    let mut header = Vec::with_capacity(HEADER);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&VERSION.to_le_bytes());
    header.extend_from_slice(&0u32.to_le_bytes());
    header.extend_from_slice(&at.to_le_bytes());
    header.extend_from_slice(&(meta.len() as u64).to_le_bytes());
    header.extend_from_slice(&checksum(&meta).to_le_bytes());
    Ok((meta, header))
}

/// The file in memory, with a block for each of `writers` (their packed particles), as
/// that many ranks would write it.
pub(super) fn to_bytes(head: &CheckpointHead, n_fluid: u64, writers: &[&[f64]]) -> Result<Vec<u8>> {
    let mut blocks = Vec::with_capacity(writers.len());
    let mut data = Vec::with_capacity(writers.len());
    let mut at = PAGE;
    for packed in writers {
        let (bytes, count, y_range) = encode_block(packed);
        blocks.push(Block {
            offset: at,
            count,
            y_range,
            checksum: checksum(&bytes),
        });
        at = align(at + bytes.len() as u64);
        data.push(bytes);
    }
    let (meta, header) = meta_and_header(Path::new("(memory)"), head, n_fluid, blocks.clone(), at)?;
    let mut out = vec![0u8; at as usize + meta.len()];
    out[..HEADER].copy_from_slice(&header);
    for (b, bytes) in blocks.iter().zip(&data) {
        let o = b.offset as usize;
        out[o..o + bytes.len()].copy_from_slice(bytes);
    }
    out[at as usize..].copy_from_slice(&meta);
    Ok(out)
}

/// A particle read from a block: global index, position, velocity.
type Particle = (u64, [f32; 3], [f64; 3]);

/// Where a checkpoint's bytes are read from.
enum Store {
    File(File, PathBuf),
    Memory(Vec<u8>),
}

impl Store {
    fn len(&self) -> Result<u64> {
        match self {
            Store::File(f, p) => Ok(f.metadata().map_err(|e| MpcError::io(p, e))?.len()),
            Store::Memory(b) => Ok(b.len() as u64),
        }
    }

    fn read(&self, offset: u64, len: u64) -> Result<Vec<u8>> {
        match self {
            Store::File(f, p) => {
                let mut out = vec![0u8; len as usize];
                f.read_exact_at(&mut out, offset)
                    .map_err(|e| MpcError::io(p, e))?;
                Ok(out)
            }
            Store::Memory(b) => Ok(b[offset as usize..(offset + len) as usize].to_vec()),
        }
    }
}

/// A format-4 checkpoint opened for reading: its head and block table read and checked, its
/// fluid read whole ([`PartedFile::whole_fluid`]) or only in the blocks a process needs
/// ([`PartedFile::fluid_parts`]).
pub struct PartedFile {
    store: Store,
    origin: String,
    pub(super) head: CheckpointHead,
    n_fluid: u64,
    blocks: Vec<Block>,
}

impl PartedFile {
    fn bad(&self, problem: String) -> MpcError {
        MpcError::Checkpoint {
            path: self.origin.clone(),
            problem,
        }
    }

    /// The file at `path` (its header already seen to be format 4).
    pub(super) fn open(path: &Path) -> Result<PartedFile> {
        let f = File::open(path).map_err(|e| MpcError::io(path, e))?;
        Self::read(
            Store::File(f, path.to_path_buf()),
            path.display().to_string(),
        )
    }

    pub(super) fn from_bytes(bytes: Vec<u8>, origin: &str) -> Result<PartedFile> {
        Self::read(Store::Memory(bytes), origin.to_string())
    }

    fn read(store: Store, origin: String) -> Result<PartedFile> {
        let bad = |problem: &str| MpcError::Checkpoint {
            path: origin.clone(),
            problem: problem.to_string(),
        };
        let truncated = "the file is truncated or corrupted";
        let len = store.len()?;
        if len < PAGE {
            return Err(bad(truncated));
        }
        let page = store.read(0, PAGE)?;
        let word = |k: usize| u64::from_le_bytes(page[16 + 8 * k..24 + 8 * k].try_into().unwrap());
        let (at, meta_len, sum) = (word(0), word(1), word(2));
        if page[HEADER..].iter().any(|&b| b != 0)
            || at.checked_add(meta_len).is_none_or(|e| e > len)
        {
            return Err(bad(truncated));
        }
        let meta_bytes = store.read(at, meta_len)?;
        if checksum(&meta_bytes) != sum {
            return Err(bad("checksum mismatch: the file is truncated or corrupted"));
        }
        let meta: Meta =
            postcard::from_bytes(&meta_bytes).map_err(|e| bad(&format!("cannot decode: {e}")))?;
        let total: u64 = meta.blocks.iter().map(|b| b.count).sum();
        let beyond = meta
            .blocks
            .iter()
            .any(|b| b.offset + b.count * PARTICLE_BYTES > at || b.offset % PAGE != 0);
        if total != meta.n_fluid || beyond {
            return Err(bad(&format!(
                "a block table of {total} particles (the run has {}) or past the data: the file \
                 is truncated or corrupted",
                meta.n_fluid
            )));
        }
        Ok(PartedFile {
            store,
            origin,
            head: meta.head,
            n_fluid: meta.n_fluid,
            blocks: meta.blocks,
        })
    }

    /// The fluid's blocks (the ranks that wrote it).
    pub fn blocks(&self) -> usize {
        self.blocks.len()
    }

    /// Fluid particles in the file.
    pub fn len(&self) -> usize {
        self.n_fluid as usize
    }

    pub fn is_empty(&self) -> bool {
        self.n_fluid == 0
    }

    /// Block `b` read, checked against its checksum and the box, and decoded.
    fn block(&self, b: &Block, phys: &Physics) -> Result<(FluidState, Vec<u64>)> {
        let bytes = self.store.read(b.offset, b.count * PARTICLE_BYTES)?;
        if checksum(&bytes) != b.checksum {
            return Err(self.bad(format!(
                "checksum mismatch in the block at byte {}: the file is truncated or corrupted",
                b.offset
            )));
        }
        let (st, ids) = decode_block(&bytes, b.count as usize);
        st.validate(phys)
            .map_err(|e| self.bad(format!("fluid state: {e}")))?;
        if let Some(i) = ids.iter().find(|&&i| i >= self.n_fluid) {
            return Err(self.bad(format!(
                "fluid particle id {i} of a run of {} (corrupted)",
                self.n_fluid
            )));
        }
        Ok((st, ids))
    }

    /// The whole fluid, every particle at its global index.
    pub fn whole_fluid(&self) -> Result<FluidState> {
        let phys = Physics::from_config(&self.head.config);
        let n = self.len();
        let mut out = FluidState {
            pos: [vec![0.0; n], vec![0.0; n], vec![0.0; n]],
            vel: [vec![0.0; n], vec![0.0; n], vec![0.0; n]],
        };
        let mut seen = vec![false; n];
        for b in &self.blocks {
            let (st, ids) = self.block(b, &phys)?;
            for (j, &i) in ids.iter().enumerate() {
                let i = i as usize;
                if std::mem::replace(&mut seen[i], true) {
                    return Err(self.bad(format!("fluid particle {i} stored twice (corrupted)")));
                }
                for k in 0..3 {
                    out.pos[k][i] = st.pos[k][j];
                    out.vel[k][i] = st.vel[k][j];
                }
            }
        }
        // the counts add up to n (checked on opening), so none is missing when none came twice
        Ok(out)
    }

    /// `parts` parts of the fluid, particle i going to `part_of(its y)` (None: kept by no part
    /// here), each in ascending global index with its ids; only the blocks whose y range meets
    /// `y_range` (which holds every y that `part_of` keeps) are read.
    pub fn fluid_parts(
        &self,
        parts: usize,
        y_range: [f32; 2],
        part_of: impl Fn(f32) -> Option<usize> + Sync,
    ) -> Result<Vec<FluidPart>> {
        let phys = Physics::from_config(&self.head.config);
        let mut kept: Vec<Vec<Particle>> = vec![Vec::new(); parts];
        for b in &self.blocks {
            if b.count == 0 || b.y_range[1] < y_range[0] || b.y_range[0] > y_range[1] {
                continue;
            }
            let (st, ids) = self.block(b, &phys)?;
            for (j, &i) in ids.iter().enumerate() {
                // part_of may name parts beyond this process's (kept by none here)
                if let Some(k) = part_of(st.pos[1][j]).filter(|&k| k < parts) {
                    kept[k].push((i, st.position(j), st.velocity(j)));
                }
            }
        }
        kept.into_par_iter()
            .map(|mut ps| {
                ps.sort_unstable_by_key(|p| p.0);
                if let Some(w) = ps.windows(2).find(|w| w[0].0 == w[1].0) {
                    return Err(self.bad(format!(
                        "fluid particle {} stored twice (corrupted)",
                        w[0].0
                    )));
                }
                let mut st = FluidState::default();
                for k in 0..3 {
                    st.pos[k] = ps.iter().map(|p| p.1[k]).collect();
                    st.vel[k] = ps.iter().map(|p| p.2[k]).collect();
                }
                Ok((st, ps.iter().map(|p| p.0).collect()))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::slabbed::pack_particles;
    use crate::config::Config;
    use crate::fluid_parts::FluidSource;
    use crate::stats::RunStats;

    fn setup() -> (CheckpointHead, FluidState) {
        let config = Config::from_ron_str(
            "(cells: (6, 12, 5), particles_per_cell: 7, time_step: 0.1, seed: 21, steps: 9, \
              collision: Srd(angle_deg: 130.0), shear_rate: 0.05, initial_flow: Steady)",
        )
        .unwrap();
        let fluid = FluidState::initial(&config);
        let phys = Physics::from_config(&config);
        let head = CheckpointHead {
            config,
            step: 7,
            stats: RunStats::new(phys.profile_bins()),
            md: None,
        };
        (head, fluid)
    }

    /// The particles of layers [lo, hi) packed, as a rank holding those layers would write them
    /// (in a scrambled order: a block's order is the rank's, not the global one).
    fn packed_layers(fluid: &FluidState, lo: f32, hi: f32) -> Vec<f64> {
        let mut ids: Vec<u64> = (0..fluid.len() as u64)
            .filter(|&i| (lo..hi).contains(&fluid.pos[1][i as usize].floor()))
            .collect();
        ids.reverse();
        let mut out = Vec::new();
        for &i in &ids {
            let mut one = FluidState::default();
            for k in 0..3 {
                one.pos[k].push(fluid.pos[k][i as usize]);
                one.vel[k].push(fluid.vel[k][i as usize]);
            }
            pack_particles(&one, std::iter::once(i), &mut out);
        }
        out
    }

    /// Three writers' blocks (layers 0-3, 4-7, 8-11) read back whole equal the fluid bit for
    /// bit; a reader of layers 4-7 gets exactly their particles in ascending index, reading only
    /// the blocks that meet them (a corrupted first block does not stop it, and stops a whole read).
    #[test]
    fn blocks_of_three_writers_read_back_whole_and_by_layers() {
        let (head, fluid) = setup();
        let parts: Vec<Vec<f64>> = [(0.0, 4.0), (4.0, 8.0), (8.0, 12.0)]
            .iter()
            .map(|&(lo, hi)| packed_layers(&fluid, lo, hi))
            .collect();
        let writers: Vec<&[f64]> = parts.iter().map(|p| p.as_slice()).collect();
        let n = fluid.len() as u64;
        let mut bytes = to_bytes(&head, n, &writers).unwrap();
        let file = PartedFile::from_bytes(bytes.clone(), "three").unwrap();
        assert_eq!(
            (file.blocks(), file.len(), file.head.step),
            (3, fluid.len(), 7)
        );
        assert_eq!(file.whole_fluid().unwrap(), fluid);
        // layers 8-11 belong to a part of another process (an index beyond this one's parts)
        let part_of = |y: f32| match y.floor() as u32 {
            4..=7 => Some(0),
            8..=11 => Some(1),
            _ => None,
        };
        let got = file.fluid_parts(1, [4.0, 8.0], part_of).unwrap();
        let all = [f32::NEG_INFINITY, f32::INFINITY];
        let expected = FluidSource::State(&fluid).parts(1, all, part_of).unwrap();
        assert_eq!(got, expected);
        assert!(!got[0].1.is_empty());
        // one flipped byte in the first block's velocities
        let first = PAGE as usize + 40 * (parts[0].len() / PARTICLE_WORDS);
        bytes[first] ^= 0x10;
        let file = PartedFile::from_bytes(bytes, "flipped").unwrap();
        assert_eq!(file.fluid_parts(1, [4.0, 8.0], part_of).unwrap(), expected);
        let err = file.whole_fluid().unwrap_err().to_string();
        assert!(err.contains("checksum mismatch in the block"), "{err}");
    }

    /// Written through the transport of one process, the file is one block that reads back as
    /// the fluid; the header, the meta and a truncation are each caught.
    #[test]
    fn a_written_file_reads_back_and_damage_is_named() {
        let (head, fluid) = setup();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ck.mpcbox");
        let mut packed = Vec::new();
        pack_particles(&fluid, 0..fluid.len() as u64, &mut packed);
        let n = fluid.len() as u64;
        write(&path, &head, n, &packed, &crate::ranks::Alone).unwrap();
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "a temporary file was left behind");
        let file = PartedFile::open(&path).unwrap();
        assert_eq!(file.blocks(), 1);
        assert_eq!(file.whole_fluid().unwrap(), fluid);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes, to_bytes(&head, n, &[&packed]).unwrap());
        let damaged = |k: usize| {
            let mut b = bytes.clone();
            b[k] ^= 1;
            PartedFile::from_bytes(b, "damaged")
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert!(damaged(bytes.len() - 3).contains("checksum mismatch"));
        assert!(damaged(100).contains("truncated or corrupted"));
        let cut = PartedFile::from_bytes(bytes[..bytes.len() - 8].to_vec(), "cut");
        assert!(cut
            .err()
            .unwrap()
            .to_string()
            .contains("truncated or corrupted"));
        // a count that disagrees with the run
        let err = write(&path, &head, n + 1, &packed, &crate::ranks::Alone).unwrap_err();
        assert!(err.to_string().contains("the ranks hold"), "{err}");
        assert_eq!(
            PartedFile::open(&path).unwrap().whole_fluid().unwrap(),
            fluid
        );
    }
}
