//! Reading a format-4 file: the head and block table on opening, then the blocks a process
//! asks for.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::{checksum, decode_block, Block, Meta, HEADER, PAGE, PARTICLE_BYTES};
use crate::checkpoint::CheckpointHead;
use crate::error::{MpcError, Result};
use crate::fluid_parts::FluidPart;
use crate::physics::Physics;
use crate::state::FluidState;

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
    pub(in crate::checkpoint) head: CheckpointHead,
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
    pub(in crate::checkpoint) fn open(path: &Path) -> Result<PartedFile> {
        let f = File::open(path).map_err(|e| MpcError::io(path, e))?;
        Self::read(
            Store::File(f, path.to_path_buf()),
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
