//! Checkpoints: config, step, fluid state and run statistics, and for coupled runs the MD
//! engine's state, encoded with postcard behind a magic header and a checksum, written
//! atomically (temporary file, fsync, rename). Version 2 files (fluid only) are still read.

use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;

use crate::config::Config;
use crate::error::{MpcError, Result};
use crate::md::engine::MdState;
use crate::md::rheology::SoluteStats;
use crate::state::FluidState;
use crate::stats::RunStats;

const MAGIC: &[u8; 8] = b"MPCBOXCK";
/// 2: the collision rule gained MPC-AT and the angular-momentum flag (issue 12).
/// 3: walls in the config and wall forces in the run statistics (issue 12); coupled runs keep
/// their MD state (issue 11); the field-file interval in the output config.
const FORMAT_VERSION: u32 = 3;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub config: Config,
    /// Steps completed.
    pub step: u64,
    pub fluid: FluidState,
    pub stats: RunStats,
    /// The MD engine of a coupled run (None: fluid only).
    pub md: Option<MdCheckpoint>,
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

/// FNV-1a, 64 bit: detects truncated or corrupted files.
fn checksum(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

impl Checkpoint {
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let payload = postcard::to_stdvec(self).map_err(|e| MpcError::Checkpoint {
            path: "(memory)".into(),
            problem: format!("cannot encode: {e}"),
        })?;
        let mut out = Vec::with_capacity(payload.len() + 20);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&checksum(&payload).to_le_bytes());
        out.extend_from_slice(&payload);
        Ok(out)
    }

    pub fn from_bytes(bytes: &[u8], origin: &str) -> Result<Checkpoint> {
        let bad = |problem: String| MpcError::Checkpoint {
            path: origin.into(),
            problem,
        };
        if bytes.len() < 20 || &bytes[..8] != MAGIC {
            return Err(bad("not an mpcbox checkpoint (bad header)".into()));
        }
        let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
        if version != FORMAT_VERSION {
            // postcard is not self-describing: an older layout cannot be read with this one's
            return Err(bad(format!(
                "format version {version}, this build reads version {FORMAT_VERSION} only (the \
                 config and statistics stored in a checkpoint changed with walls, collision \
                 rules, coupled MD state and flow fields); fix: start the run again from its \
                 config with this build, or finish it with the build that wrote it"
            )));
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
        if let Some(md) = &ck.md {
            md.state
                .system
                .validate()
                .map_err(|e| bad(format!("MD system: {e}")))?;
        }
        ck.config.validate()?;
        let phys = crate::physics::Physics::from_config(&ck.config);
        ck.fluid
            .validate(&phys)
            .map_err(|e| bad(format!("fluid state: {e}")))?;
        if ck.fluid.len() as u64 != ck.config.n_fluid() {
            return Err(bad(format!(
                "{} fluid particles, the config implies {}",
                ck.fluid.len(),
                ck.config.n_fluid()
            )));
        }
        Ok(ck)
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

    pub fn load(path: &Path) -> Result<Checkpoint> {
        let bytes = std::fs::read(path).map_err(|e| MpcError::io(path, e))?;
        Self::from_bytes(&bytes, &path.display().to_string())
    }
}
