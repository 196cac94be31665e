//! Checkpoints of a [`Solvent`]: continuing from one, taking one, writing one from every
//! rank, and restoring one.

use std::path::Path;
use std::time::Instant;

use super::Solvent;
use crate::backend;
use crate::checkpoint::{
    Checkpoint, CheckpointFile, CheckpointHead, CheckpointMode, CheckpointWriter, MdCheckpoint,
    WriterSettings, Written, PARTICLE_BYTES,
};
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
        let backend = backend::factory::open(&config, &phys, Some(&ck.fluid))?;
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
        // a begun step's fluid is mid-step: saved as of the step count, it would resume wrong
        self.refuse_begun()?;
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
    /// atomically, now. Over MPI ranks every rank calls this and writes the block of its own
    /// particles into the one file, so no rank ever holds the whole box; every rank returns
    /// the same outcome, and a failure leaves the previous file as it was. At most the window
    /// of [`WriterSettings::from_knobs`] is on the host at once.
    pub fn save_checkpoint(&mut self, path: &Path, md: Option<MdCheckpoint>) -> Result<()> {
        self.refuse_begun()?;
        let window = WriterSettings::from_knobs().window_bytes();
        let head = self.checkpoint_head(md);
        let n = self.n_fluid() as u64;
        let transport = crate::ranks::transport();
        let mut source = self.backend.fluid_source()?;
        let free = crate::checkpoint::Recycle::Free;
        crate::checkpoint::write_parted(path, &head, n, &mut *source, window, &*transport, free)
    }

    fn checkpoint_head(&self, md: Option<MdCheckpoint>) -> CheckpointHead {
        CheckpointHead {
            config: self.config.clone(),
            step: self.step,
            stats: self.stats.clone(),
            md,
            run_id: Some(self.run_id.clone()),
        }
    }

    /// Checkpoint this solvent (and `md`) to `path` through `writer`: with background writes
    /// in one process, the fluid is copied out (spare device memory, or host memory within
    /// the window) and the writer's thread writes it while the run steps on; otherwise, or
    /// without room for a copy, it is written now from the live fluid, a window at a time. A
    /// write still in flight is waited for first. Outcomes (failures included) are collected
    /// in the writer ([`CheckpointWriter::take_finished`]); an error here is one that stops
    /// the run (the device failing while copying the fluid out).
    pub fn write_checkpoint(
        &mut self,
        writer: &mut CheckpointWriter,
        path: &Path,
        md: Option<MdCheckpoint>,
    ) -> Result<()> {
        let background = writer.settings().mode == CheckpointMode::Background;
        self.checkpoint_through(writer, path, md, background)
    }

    /// [`Solvent::write_checkpoint`] written now by this thread (a run's last checkpoint:
    /// nothing steps on meanwhile), after the write in flight.
    pub fn write_checkpoint_now(
        &mut self,
        writer: &mut CheckpointWriter,
        path: &Path,
        md: Option<MdCheckpoint>,
    ) -> Result<()> {
        self.checkpoint_through(writer, path, md, false)
    }

    fn checkpoint_through(
        &mut self,
        writer: &mut CheckpointWriter,
        path: &Path,
        md: Option<MdCheckpoint>,
        background: bool,
    ) -> Result<()> {
        self.refuse_begun()?;
        let t = Instant::now();
        writer.wait();
        if background {
            writer.note_pace(self.step, t.elapsed().as_secs_f64());
        }
        // what this checkpoint adds to the resident memory: measured from here
        let (done, growth) =
            crate::timing::growth_over(|| self.checkpoint_now(writer, path, md, background));
        done?;
        writer.held(t.elapsed().as_secs_f64(), growth);
        Ok(())
    }

    /// The copy or the write of [`Solvent::checkpoint_through`], after the write in flight.
    fn checkpoint_now(
        &mut self,
        writer: &mut CheckpointWriter,
        path: &Path,
        md: Option<MdCheckpoint>,
        background: bool,
    ) -> Result<()> {
        let window = writer.settings().window_bytes();
        let background = background && crate::ranks::size() == 1;
        let snapshot = match background {
            true => self.backend.fluid_snapshot(window)?,
            false => None,
        };
        let head = self.checkpoint_head(md);
        let n = self.n_fluid() as u64;
        match snapshot {
            Some(source) => writer.submit(self.step, path, head, n, source)?,
            None => {
                let mut source = self.backend.fluid_source()?;
                let bytes = source.counts().iter().sum::<u64>() * PARTICLE_BYTES;
                let transport = crate::ranks::transport();
                let w = Instant::now();
                let result = crate::checkpoint::write_parted(
                    path,
                    &head,
                    n,
                    &mut *source,
                    window,
                    &*transport,
                    crate::checkpoint::Recycle::KeepSpare,
                );
                writer.record_blocking(Written {
                    step: self.step,
                    path: path.to_path_buf(),
                    result,
                    bytes,
                    seconds: w.elapsed().as_secs_f64(),
                    background: false,
                });
            }
        }
        Ok(())
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
