//! Checkpoints: config, step, fluid state and run statistics, and for coupled runs the MD
//! engine's state, written atomically (temporary file, fsync, rename) and checksummed. The
//! file (format 4, `parted`) holds the fluid in blocks, one per writing rank, so that over MPI
//! ranks each rank writes and reads only its own layers ([`Solvent::save_checkpoint`],
//! [`CheckpointFile`]); a [`Checkpoint`] is the whole of one in memory. Format 3 files (the
//! whole checkpoint encoded with postcard) are still read.
//!
//! [`Solvent::save_checkpoint`]: crate::solvent::Solvent::save_checkpoint

mod background;
mod pace;
mod parted;

use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;

pub use background::{
    copy_fits, remove_stale_temporaries, CheckpointMode, CheckpointTimes, CheckpointWriter,
    WriterSettings, Written,
};
pub use parted::PARTICLE_BYTES;
pub(crate) use parted::{read_chunked, Chunk, ChunkFetch, Fetched, Kept};
pub(crate) use parted::{write as write_parted, Recycle};
pub use parted::{BlockSource, BlockStream, FluidView, LocalFluid, PartMap, PartedFile, Values};

use crate::config::Config;
use crate::error::{MpcError, Result};
use crate::md::engine::MdState;
use crate::md::rheology::SoluteStats;
use crate::state::FluidState;
use crate::stats::RunStats;

const MAGIC: &[u8; 8] = b"MPCBOXCK";
/// 2: the collision rule gained MPC-AT and the angular-momentum flag.
/// 3: walls in the config and wall forces in the run statistics; coupled runs keep their MD
/// state; the field-file interval in the output config.
/// 4: the fluid in per-rank blocks ([`parted`]); the rest as in 3. Written now.
const WHOLE_VERSION: u32 = 3;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub config: Config,
    /// Steps completed.
    pub step: u64,
    pub fluid: FluidState,
    pub stats: RunStats,
    /// The MD engine of a coupled run (None: fluid only).
    pub md: Option<MdCheckpoint>,
    /// The run it belongs to (`crate::output_dir::owner`); stored beside the encoded head, so
    /// files of builds before run ids still decode. None: from bytes of such a build.
    #[serde(skip)]
    pub run_id: Option<String>,
}

/// The MD side of a coupled run at a checkpoint: the engine's state, the chain observer's
/// reference and the solutes' time averages.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MdCheckpoint {
    pub state: MdState,
    /// Chain centres of mass at the start of the run (for the MSD), by molecule id.
    pub chain_start: Vec<(u32, [f64; 3])>,
    pub stats: SoluteStats,
}

/// Everything of a checkpoint but the fluid: what every rank reads whole.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckpointHead {
    pub config: Config,
    /// Steps completed.
    pub step: u64,
    pub stats: RunStats,
    /// The MD engine of a coupled run (None: fluid only).
    pub md: Option<MdCheckpoint>,
    /// The run it belongs to, as in [`Checkpoint::run_id`].
    #[serde(skip)]
    pub run_id: Option<String>,
}

/// A checkpoint opened for a resume: its head read and checked, its fluid read only when a
/// backend takes it ([`CheckpointFile::fluid`], a `fluid_parts::FluidSource`: over MPI ranks,
/// each rank reads just the blocks of its layers).
pub struct CheckpointFile {
    pub head: CheckpointHead,
    fluid: StoredFluid,
}

/// A checkpoint file's fluid.
pub enum StoredFluid {
    /// A format-3 file, read whole.
    Whole(FluidState),
    Parted(Box<PartedFile>),
}

/// The format version of a file's first bytes (after checking the magic).
fn version_of(bytes: &[u8], origin: &str) -> Result<u32> {
    if bytes.len() < 12 || &bytes[..8] != MAGIC {
        return Err(MpcError::Checkpoint {
            path: origin.into(),
            problem: "not an mpcbox checkpoint (bad header)".into(),
        });
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
    if version != WHOLE_VERSION && version != parted::VERSION {
        // postcard is not self-describing: an older layout cannot be read with this one's
        return Err(MpcError::Checkpoint {
            path: origin.into(),
            problem: format!(
                "format version {version}, this build reads versions {WHOLE_VERSION} and {} \
                 only (the config and statistics stored in a checkpoint changed with walls, \
                 collision rules, coupled MD state and flow fields); fix: start the run again \
                 from its config with this build, or finish it with the build that wrote it",
                parted::VERSION
            ),
        });
    }
    Ok(version)
}

impl CheckpointFile {
    /// The checkpoint at `path`: its head, and its fluid's block table (a format-3 file is read
    /// whole).
    pub fn open(path: &Path) -> Result<CheckpointFile> {
        let mut first = [0u8; 12];
        let f = std::fs::File::open(path).map_err(|e| MpcError::io(path, e))?;
        let got = std::os::unix::fs::FileExt::read_at(&f, &mut first, 0)
            .map_err(|e| MpcError::io(path, e))?;
        let origin = path.display().to_string();
        let mut file = if version_of(&first[..got], &origin)? == WHOLE_VERSION {
            let bytes = std::fs::read(path).map_err(|e| MpcError::io(path, e))?;
            let ck = Checkpoint::from_whole_bytes(&bytes, &origin)?;
            CheckpointFile::whole(ck)
        } else {
            let parted = PartedFile::open(path)?;
            let head = parted.head.clone();
            head.validate(&origin)?;
            CheckpointFile {
                head,
                fluid: StoredFluid::Parted(Box::new(parted)),
            }
        };
        // a file of a build before run ids: its run is known by where the file lies
        if file.head.run_id.is_none() {
            file.head.run_id = Some(crate::output_dir::legacy_run_id(path));
        }
        Ok(file)
    }

    fn whole(ck: Checkpoint) -> CheckpointFile {
        let Checkpoint {
            config,
            step,
            fluid,
            stats,
            md,
            run_id,
        } = ck;
        CheckpointFile {
            head: CheckpointHead {
                config,
                step,
                stats,
                md,
                run_id,
            },
            fluid: StoredFluid::Whole(fluid),
        }
    }

    /// The blocks the fluid is stored in (the ranks that wrote it; 1 for a format-3 file).
    pub fn fluid_blocks(&self) -> usize {
        match &self.fluid {
            StoredFluid::Whole(_) => 1,
            StoredFluid::Parted(p) => p.blocks(),
        }
    }

    /// The stored fluid, where a backend takes it from (`FluidSource::from`).
    pub fn fluid(&self) -> &StoredFluid {
        &self.fluid
    }

    /// The whole checkpoint in memory.
    pub fn into_checkpoint(self) -> Result<Checkpoint> {
        let fluid = match self.fluid {
            StoredFluid::Whole(s) => s,
            StoredFluid::Parted(p) => p.whole_fluid()?,
        };
        let CheckpointHead {
            config,
            step,
            stats,
            md,
            run_id,
        } = self.head;
        Ok(Checkpoint {
            config,
            step,
            fluid,
            stats,
            md,
            run_id,
        })
    }
}

impl CheckpointHead {
    /// The MD system and the config are valid.
    fn validate(&self, origin: &str) -> Result<()> {
        if let Some(md) = &self.md {
            md.state
                .system
                .validate()
                .map_err(|e| MpcError::Checkpoint {
                    path: origin.into(),
                    problem: format!("MD system: {e}"),
                })?;
        }
        Ok(self.config.validate()?)
    }
}

/// FNV-1a, 64 bit: detects truncated or corrupted files (format 3).
fn checksum(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

impl Checkpoint {
    /// The checkpoint as a file's bytes (format 4, one block).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let whole = parted::FluidView::Whole(&self.fluid);
        parted::to_bytes(&self.head(), self.fluid.len() as u64, &[whole])
    }

    /// Everything but the fluid.
    fn head(&self) -> CheckpointHead {
        CheckpointHead {
            config: self.config.clone(),
            step: self.step,
            stats: self.stats.clone(),
            md: self.md.clone(),
            run_id: self.run_id.clone(),
        }
    }

    /// A checkpoint from a file's bytes (format 3 or 4), checked whole.
    pub fn from_bytes(bytes: &[u8], origin: &str) -> Result<Checkpoint> {
        if version_of(bytes, origin)? == parted::VERSION {
            let parted = PartedFile::from_bytes(bytes.to_vec(), origin)?;
            parted.head.validate(origin)?;
            let file = CheckpointFile {
                head: parted.head.clone(),
                fluid: StoredFluid::Parted(Box::new(parted)),
            };
            return file.into_checkpoint()?.checked(origin);
        }
        Self::from_whole_bytes(bytes, origin)
    }

    /// A format-3 file: the whole checkpoint encoded with postcard.
    fn from_whole_bytes(bytes: &[u8], origin: &str) -> Result<Checkpoint> {
        let bad = |problem: String| MpcError::Checkpoint {
            path: origin.into(),
            problem,
        };
        if bytes.len() < 20 {
            return Err(bad("not an mpcbox checkpoint (bad header)".into()));
        }
        let sum = u64::from_le_bytes(bytes[12..20].try_into().unwrap());
        let payload = &bytes[20..];
        if checksum(payload) != sum {
            return Err(bad(
                "checksum mismatch: the file is truncated or corrupted".into()
            ));
        }
        let ck: Checkpoint =
            postcard::from_bytes(payload).map_err(|e| bad(format!("cannot decode: {e}")))?;
        ck.head().validate(origin)?;
        ck.checked(origin)
    }

    /// The fluid agrees with the config.
    fn checked(self, origin: &str) -> Result<Checkpoint> {
        let bad = |problem: String| MpcError::Checkpoint {
            path: origin.into(),
            problem,
        };
        let phys = crate::physics::Physics::from_config(&self.config);
        self.fluid
            .validate(&phys)
            .map_err(|e| bad(format!("fluid state: {e}")))?;
        if self.fluid.len() as u64 != self.config.n_fluid() {
            return Err(bad(format!(
                "{} fluid particles, the config implies {}",
                self.fluid.len(),
                self.config.n_fluid()
            )));
        }
        Ok(self)
    }

    /// [`Checkpoint::save`] by rank 0 of a run over MPI ranks (every rank holds the gathered
    /// checkpoint; one file is written); the plain save without MPI.
    pub fn save_on_root(&self, path: &Path) -> Result<()> {
        if crate::ranks::is_root() {
            self.save(path)
        } else {
            Ok(())
        }
    }

    /// Write atomically: a reader sees the old file or the complete new one, never a partial one.
    pub fn save(&self, path: &Path) -> Result<()> {
        let bytes = self.to_bytes()?;
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| MpcError::io(dir, e))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)?;
            if let Ok(d) = std::fs::File::open(dir) {
                let _ = d.sync_all();
            }
            Ok(())
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            MpcError::io(path, e)
        })
    }

    /// The checkpoint at `path`, read and checked whole.
    pub fn load(path: &Path) -> Result<Checkpoint> {
        let origin = path.display().to_string();
        CheckpointFile::open(path)?
            .into_checkpoint()?
            .checked(&origin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A format-3 file (the whole checkpoint in postcard behind a byte-wise FNV checksum, as
    /// builds before format 4 wrote it) is still read, whole and as a resume's source; the
    /// format-4 bytes of the same checkpoint read back equal.
    #[test]
    fn format_3_files_are_still_read() {
        let config = Config::from_ron_str(
            "(cells: (6, 8, 5), particles_per_cell: 5, time_step: 0.1, seed: 4, steps: 9, \
              collision: Srd(angle_deg: 130.0))",
        )
        .unwrap();
        let phys = crate::physics::Physics::from_config(&config);
        let ck = Checkpoint {
            fluid: FluidState::initial(&config),
            config,
            step: 3,
            stats: RunStats::new(phys.profile_bins()),
            md: None,
            run_id: None,
        };
        let payload = postcard::to_stdvec(&ck).unwrap();
        let mut v3 = MAGIC.to_vec();
        v3.extend_from_slice(&WHOLE_VERSION.to_le_bytes());
        v3.extend_from_slice(&checksum(&payload).to_le_bytes());
        v3.extend_from_slice(&payload);
        assert_eq!(Checkpoint::from_bytes(&v3, "v3").unwrap(), ck);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v3.mpcbox");
        std::fs::write(&path, &v3).unwrap();
        let file = CheckpointFile::open(&path).unwrap();
        assert_eq!((file.fluid_blocks(), file.head.step), (1, 3));
        assert_eq!(
            *crate::fluid_parts::FluidSource::from(file.fluid())
                .whole()
                .unwrap(),
            ck.fluid
        );
        // a file without a run id is known by its place
        let legacy = crate::output_dir::legacy_run_id(&path);
        assert_eq!(file.head.run_id.as_deref(), Some(legacy.as_str()));
        let loaded = Checkpoint::load(&path).unwrap();
        assert_eq!(loaded.run_id.as_deref(), Some(legacy.as_str()));
        assert_eq!(
            loaded,
            Checkpoint {
                run_id: Some(legacy),
                ..ck.clone()
            }
        );
        let v4 = ck.to_bytes().unwrap();
        assert_eq!(&v4[8..12], &4u32.to_le_bytes());
        assert_eq!(Checkpoint::from_bytes(&v4, "v4").unwrap(), ck);
        let mut v2 = v3.clone();
        v2[8] = 2;
        let err = Checkpoint::from_bytes(&v2, "v2").unwrap_err().to_string();
        assert!(err.contains("format version 2"), "{err}");
    }
}
