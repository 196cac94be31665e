//! Checkpoints of a [`Solvent`]: continuing from one, taking one, writing one from every
//! rank, and restoring one.

use std::path::Path;

use super::Solvent;
use crate::backend;
use crate::checkpoint::{Checkpoint, CheckpointFile, CheckpointHead, MdCheckpoint};
use crate::config::DeviceChoice;
use crate::error::{MpcError, Result};
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
        if file.source().len() as u64 != config.n_fluid() {
            return Err(MpcError::Checkpoint {
                path: "(resume)".into(),
                problem: format!(
                    "{} fluid particles, the config implies {}",
                    file.source().len(),
                    config.n_fluid()
                ),
            });
        }
        let backend = backend::open_from(&config, &phys, Some(file.source()))?;
        let stats = file.head.stats.clone();
        let mut s = Self::assemble(config, phys, backend, file.head.step, Some(stats))?;
        s.continue_run(file.head.run_id.as_deref());
        Ok(s)
    }

    /// Continue from a checkpoint, optionally on another device.
    pub fn from_checkpoint(ck: Checkpoint, device: Option<DeviceChoice>) -> Result<Solvent> {
        let mut config = ck.config;
        if let Some(d) = device {
            config.device = d;
        }
        config.validate()?;
        let phys = Physics::from_config(&config);
        let backend = backend::open(&config, &phys, Some(&ck.fluid))?;
        let mut s = Self::assemble(config, phys, backend, ck.step, Some(ck.stats))?;
        s.continue_run(ck.run_id.as_deref());
        Ok(s)
    }

    /// The run this fluid belongs to (a fresh one's, or its checkpoint's): recorded in the
    /// output directories it writes and in its checkpoints (`crate::output_dir::owner`).
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Give this fluid a fresh run id: what it writes from now on is a run of its own (a
    /// branch, when it continues a checkpoint away from that run's directory).
    pub fn start_new_run(&mut self) {
        self.run_id = crate::output_dir::new_run_id();
    }

    /// Continue the run `id` (a checkpoint's); None keeps the fresh id.
    fn continue_run(&mut self, id: Option<&str>) {
        if let Some(id) = id {
            self.run_id = id.to_string();
        }
    }

    pub fn checkpoint(&mut self) -> Result<Checkpoint> {
        Ok(Checkpoint {
            config: self.config.clone(),
            step: self.step,
            fluid: self.backend.download()?,
            stats: self.stats.clone(),
            md: None,
            run_id: Some(self.run_id.clone()),
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
            run_id: Some(self.run_id.clone()),
        };
        let fluid = self.backend.local_fluid()?;
        let transport = crate::ranks::transport();
        crate::checkpoint::write_parted(path, &head, self.n_fluid() as u64, &fluid, &*transport)
    }

    /// Put the fluid back to a checkpoint taken from a solvent of the same config (continuing
    /// the checkpoint's run).
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
        self.continue_run(ck.run_id.as_deref());
        Ok(())
    }
}
