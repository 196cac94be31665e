//! Reading a format-4 file: the head and block table on opening, then the blocks a process
//! asks for.

use std::fs::File;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::encode::StreamSum;
use super::file_io::{self, DirectReader};
use super::{checksum, Block, Meta, HEADER, PAGE, PARTICLE_BYTES};

/// Bytes read at a time (a whole number of every section's values).
const READ_PIECE: u64 = 64 << 20;
use crate::checkpoint::CheckpointHead;
use crate::error::{MpcError, Result};
use crate::physics::Physics;
use crate::state::FluidPart;
use crate::state::FluidState;

/// Where a checkpoint's bytes are read from.
enum Store {
    /// The file, and a handle on it for direct reads where the file system has them.
    File(File, PathBuf, Option<DirectReader>),
    Memory(Vec<u8>),
}

impl Store {
    fn len(&self) -> Result<u64> {
        match self {
            Store::File(f, p, _) => Ok(f.metadata().map_err(|e| MpcError::io(p, e))?.len()),
            Store::Memory(b) => Ok(b.len() as u64),
        }
    }

    fn read(&self, offset: u64, len: u64) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.read_into(offset, len, Reread::No, &mut out)?;
        Ok(out)
    }

    /// `len` bytes at `offset` into `out` (its memory reused: a fresh buffer per piece costs
    /// the kernel a page fault and a zeroed page per 4 KiB); large reads of bytes not read
    /// again bypass the page cache.
    fn read_into(&self, offset: u64, len: u64, again: Reread, out: &mut Vec<u8>) -> Result<()> {
        out.resize(len as usize, 0);
        match self {
            Store::File(f, p, direct) => match direct {
                Some(d) if again == Reread::No && out.len() >= file_io::SPLIT_FROM => {
                    d.read(f, out, offset)
                }
                _ => file_io::read_buffered(f, out, offset),
            }
            .map_err(|e| MpcError::io(p, e)),
            Store::Memory(b) => {
                out.copy_from_slice(&b[offset as usize..(offset + len) as usize]);
                Ok(())
            }
        }
    }
}

/// Whether the bytes of a read are read again later (then the page cache keeps them).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Reread {
    Yes,
    No,
}

/// A format-4 checkpoint opened for reading: its head and block table read and checked, its
/// fluid read whole ([`PartedFile::whole_fluid`]) or only in the blocks a process needs
/// ([`PartedFile::fluid_parts`]).
pub struct PartedFile {
    store: Store,
    origin: String,
    pub(in crate::checkpoint) head: CheckpointHead,
    n_fluid: u64,
    blocks: Vec<Block>,
}

impl PartedFile {
    pub(crate) fn bad(&self, problem: String) -> MpcError {
        MpcError::Checkpoint {
            path: self.origin.clone(),
            problem,
        }
    }

    /// The file at `path` (its header already seen to be format 4).
    pub(in crate::checkpoint) fn open(path: &Path) -> Result<PartedFile> {
        let f = File::open(path).map_err(|e| MpcError::io(path, e))?;
        Self::read(
            Store::File(f, path.to_path_buf(), DirectReader::open(path)),
            path.display().to_string(),
        )
    }

    pub(in crate::checkpoint) fn from_bytes(bytes: Vec<u8>, origin: &str) -> Result<PartedFile> {
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
        let decode = |e: postcard::Error| bad(&format!("cannot decode: {e}"));
        let (mut meta, rest) = postcard::take_from_bytes::<Meta>(&meta_bytes).map_err(decode)?;
        // the run id follows the meta (files of builds before run ids end with the meta)
        if !rest.is_empty() {
            meta.head.run_id = postcard::from_bytes(rest).map_err(decode)?;
        }
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

    /// `len` bytes of the file from `at`.
    pub(super) fn read_bytes_into(
        &self,
        at: u64,
        len: u64,
        again: Reread,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        self.store.read_into(at, len, again, out)
    }

    pub(super) fn block_table(&self) -> &[Block] {
        &self.blocks
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

    /// Block `b` read in order in pieces of at most [`READ_PIECE`] bytes, each within one
    /// section (0: ids, 1-3: x, y, z, 4-6: vx, vy, vz) and a whole number of its values, handed
    /// to `section(s, bytes)`; its checksum is checked at the end.
    fn read_block(
        &self,
        b: &Block,
        mut section: impl FnMut(usize, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let n = b.count;
        let ends = [0, 8 * n, 12 * n, 16 * n, 20 * n, 28 * n, 36 * n, 44 * n];
        let mut sum = StreamSum::new(n * PARTICLE_BYTES);
        for s in 0..7 {
            let mut at = ends[s];
            while at < ends[s + 1] {
                let len = READ_PIECE.min(ends[s + 1] - at);
                let bytes = self.store.read(b.offset + at, len)?;
                sum.update(&bytes);
                section(s, &bytes)?;
                at += len;
            }
        }
        if sum.finish() != b.checksum {
            return Err(self.bad(format!(
                "checksum mismatch in the block at byte {}: the file is truncated or corrupted",
                b.offset
            )));
        }
        Ok(())
    }

    /// The whole fluid, every particle at its global index.
    pub fn whole_fluid(&self) -> Result<FluidState> {
        let all = [f32::NEG_INFINITY, f32::INFINITY];
        let (st, ids) = self
            .fluid_parts(1, all, |_| Some(0))?
            .pop()
            .expect("one part");
        // sorted and free of repeats (fluid_parts), so 0..n exactly when n long and ending at n - 1
        if ids.len() != self.len() || ids.last().is_some_and(|&i| i + 1 != self.n_fluid) {
            return Err(self.bad(format!(
                "{} distinct fluid particles, the run has {} (corrupted)",
                ids.len(),
                self.n_fluid
            )));
        }
        Ok(st)
    }

    /// `parts` parts of the fluid, particle i going to `part_of(its y)` (None: kept by no part
    /// here), each in ascending global index with its ids; only the blocks whose y range meets
    /// `y_range` (which holds every y that `part_of` keeps) are read. A block is read in pieces
    /// and its kept particles go straight into their parts: the memory is about the kept
    /// particles' once, not the block's several times over.
    pub fn fluid_parts(
        &self,
        parts: usize,
        y_range: [f32; 2],
        part_of: impl Fn(f32) -> Option<usize> + Sync,
    ) -> Result<Vec<FluidPart>> {
        const NONE: u32 = u32::MAX;
        let le4 = |b: &[u8]| b.try_into().map(f32::from_le_bytes).unwrap();
        let le8 = |b: &[u8]| b.try_into().map(f64::from_le_bytes).unwrap();
        let mut kept: Vec<FluidPart> = vec![FluidPart::default(); parts];
        for b in &self.blocks {
            if b.count == 0 || b.y_range[1] < y_range[0] || b.y_range[0] > y_range[1] {
                continue;
            }
            let n = b.count as usize;
            let (mut ids, mut xs) = (Vec::with_capacity(n), Vec::with_capacity(n));
            let mut owner: Vec<u32> = Vec::with_capacity(n);
            // the values of the sections after y, in order, for the particles kept
            let mut next = [0usize; 7];
            self.read_block(b, |s, bytes| {
                match s {
                    0 => ids.extend(
                        bytes
                            .chunks_exact(8)
                            .map(|c| u64::from_le_bytes(c.try_into().unwrap())),
                    ),
                    1 => xs.extend(bytes.chunks_exact(4).map(le4)),
                    2 => {
                        for c in bytes.chunks_exact(4) {
                            let j = owner.len();
                            let y = le4(c);
                            // part_of may name parts beyond this process's (kept by none here)
                            match part_of(y).filter(|&k| k < parts) {
                                Some(k) => {
                                    if ids[j] >= self.n_fluid {
                                        return Err(self.bad(format!(
                                            "fluid particle id {} of a run of {} (corrupted)",
                                            ids[j], self.n_fluid
                                        )));
                                    }
                                    let (st, pid) = &mut kept[k];
                                    pid.push(ids[j]);
                                    st.pos[0].push(xs[j]);
                                    st.pos[1].push(y);
                                    owner.push(k as u32);
                                }
                                None => owner.push(NONE),
                            }
                        }
                    }
                    _ => {
                        let w = if s == 3 { 4 } else { 8 };
                        for c in bytes.chunks_exact(w) {
                            let k = owner[next[s]];
                            next[s] += 1;
                            if k != NONE {
                                let st = &mut kept[k as usize].0;
                                match s {
                                    3 => st.pos[2].push(le4(c)),
                                    _ => st.vel[s - 4].push(le8(c)),
                                }
                            }
                        }
                    }
                }
                Ok(())
            })?;
        }
        let phys = Physics::from_config(&self.head.config);
        kept.into_iter()
            .map(|(st, ids)| self.in_index_order(st, ids, &phys))
            .collect()
    }

    /// A part's particles sorted by global index, checked for repeats and against the box.
    fn in_index_order(&self, st: FluidState, ids: Vec<u64>, phys: &Physics) -> Result<FluidPart> {
        let mut order: Vec<u32> = (0..ids.len() as u32).collect();
        order.par_sort_unstable_by_key(|&j| ids[j as usize]);
        let ids: Vec<u64> = order.par_iter().map(|&j| ids[j as usize]).collect();
        if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
            return Err(self.bad(format!("fluid particle {} stored twice (corrupted)", w[0])));
        }
        let FluidState { pos, vel } = st;
        let out = FluidState {
            pos: pos.map(|a| order.par_iter().map(|&j| a[j as usize]).collect()),
            vel: vel.map(|a| order.par_iter().map(|&j| a[j as usize]).collect()),
        };
        out.validate(phys)
            .map_err(|e| self.bad(format!("fluid state: {e}")))?;
        Ok((out, ids))
    }
}
