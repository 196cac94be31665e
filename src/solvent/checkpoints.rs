//! Checkpoints of a [`Solvent`]: continuing from one, taking one, writing one from every
//! rank, and restoring one.

use std::path::Path;

use super::Solvent;
use crate::backend;
use crate::checkpoint::{Checkpoint, CheckpointFile, CheckpointHead, MdCheckpoint};
use crate::config::DeviceChoice;
use crate::error::{MpcError, Result};
use crate::fluid_parts::FluidSource;
use crate::physics::Physics;

impl Solvent {
    /// Continue from a checkpoint file, optionally on another device: over MPI ranks each rank
    /// reads only the blocks of the fluid that its layers need.
    pub fn from_checkpoint_file(
        file: &CheckpointFile,
        device: Option<DeviceChoice>,
    ) -> Result<Solvent> {
        let mut config = file.head.config.clone();
        if let Some(d) = device {
            config.device = d;
        }
        config.validate()?;
        let phys = Physics::from_config(&config);
        let source = FluidSource::from(file.fluid());
        if source.len() as u64 != config.n_fluid() {
            return Err(MpcError::Checkpoint {
                path: "(resume)".into(),
                problem: format!(
                    "{} fluid particles, the config implies {}",
                    source.len(),
                    config.n_fluid()
                ),
            });
        }
        let backend = backend::factory::open_from(&config, &phys, Some(source))?;
        let stats = file.head.stats.clone();
        Self::assemble(config, phys, backend, file.head.step, Some(stats))
    }

    /// Continue from a checkpoint, optionally on another device.
    pub fn from_checkpoint(ck: Checkpoint, device: Option<DeviceChoice>) -> Result<Solvent> {
        let mut config = ck.config;
        if let Some(d) = device {
            config.device = d;
        }
        config.validate()?;
        let phys = Physics::from_config(&config);
        let backend = backend::factory::open(&config, &phys, Some(&ck.fluid))?;
        Self::assemble(config, phys, backend, ck.step, Some(ck.stats))
    }

    pub fn checkpoint(&mut self) -> Result<Checkpoint> {
        Ok(Checkpoint {
            config: self.config.clone(),
            step: self.step,
            fluid: self.backend.download()?,
            stats: self.stats.clone(),
            md: None,
        })
    }

    /// Write the checkpoint of this solvent (and `md`, a coupled run's MD side) to `path`,
    /// atomically. Over MPI ranks every rank calls this and writes the block of its own
    /// particles into the one file, so no rank ever holds the whole box; every rank returns
    /// the same outcome, and a failure leaves the previous file as it was.
    pub fn save_checkpoint(&mut self, path: &Path, md: Option<MdCheckpoint>) -> Result<()> {
        let head = CheckpointHead {
            config: self.config.clone(),
            step: self.step,
            stats: self.stats.clone(),
            md,
        };
        let fluid = self.backend.local_fluid()?;
        let transport = crate::ranks::transport();
        crate::checkpoint::write_parted(path, &head, self.n_fluid() as u64, &fluid, &*transport)
    }

    /// Put the fluid back to a checkpoint taken from a solvent of the same config.
    pub fn restore(&mut self, ck: &Checkpoint) -> Result<()> {
        if ck.config.cells != self.config.cells
            || ck.config.particles_per_cell != self.config.particles_per_cell
        {
            return Err(MpcError::Checkpoint {
                path: "(restore)".into(),
                problem: "the checkpoint's box or particle count differs from this solvent's"
                    .into(),
            });
        }
        self.set_fluid_state(&ck.fluid)?;
        self.step = ck.step;
        self.stats = ck.stats.clone();
        Ok(())
    }
}
