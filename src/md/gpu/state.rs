//! Checkpoints of the GPU engine (the counterpart of `md::engine::state`): the particles in
//! the engine's order, forces, the step and the positions of the last list build, from which
//! the same list (cells sorted by index, so the same neighbour order) is built again on resume.

use super::{drv, GpuMd};
use crate::error::{ConfigError, MpcError, Result};
use crate::md::engine::MdState;

fn flat(v: &[[f64; 3]]) -> Vec<f64> {
    v.iter().flat_map(|a| a.iter().copied()).collect()
}

fn triples(v: &[f64]) -> Vec<[f64; 3]> {
    v.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect()
}

impl GpuMd {
    /// Put the engine at MD step `step` (random streams, Lees-Edwards offset) without moving
    /// particles; the list is rebuilt and the forces recomputed there.
    pub fn set_step(&mut self, step: u64) -> Result<()> {
        self.step = step;
        if let Some(shear) = self.settings.shear {
            self.sys.lees_edwards = shear.lees_edwards_at(step, self.settings.dt, self.sys.box_len);
        }
        self.build_list()?;
        self.compute_forces()
    }

    /// The state for a checkpoint (downloads particles, forces and the build positions).
    pub fn state(&mut self) -> Result<MdState> {
        let system = self.system()?.clone();
        let force = self.forces()?;
        let built = self
            .stream
            .clone_dtoh(&self.parts.built_at)
            .map_err(drv("download"))?;
        Ok(MdState {
            step: self.step,
            system,
            force,
            built_at: triples(&built[..3 * self.n]),
            list_builds: self.lists.builds,
            built_offset: self.lists.built_offset,
            report: MdState::report_words(&self.report),
        })
    }

    /// Continue from `st` (an engine built from the same system, in the same order).
    pub fn restore(&mut self, st: &MdState) -> Result<()> {
        if st.system.len() != self.n || st.system.tag != self.sys.tag {
            return Err(MpcError::Config(ConfigError {
                field: "md".into(),
                problem: "the checkpoint's MD particles differ from this engine's".into(),
                fix: "resume with the config the checkpoint was written with".into(),
            }));
        }
        let s = self.stream.clone();
        // the list of the last build, from the positions (and offset) it was built at
        if !st.built_at.is_empty() {
            s.memcpy_htod(&flat(&st.built_at), &mut self.parts.pos)
                .map_err(drv("upload"))?;
            self.sys.lees_edwards.offset = st.built_offset;
            self.build_list()?;
            self.lists.builds = st.list_builds;
        }
        self.sys = st.system.clone();
        let p = &mut self.parts;
        s.memcpy_htod(&flat(&st.system.pos), &mut p.pos)
            .map_err(drv("upload"))?;
        s.memcpy_htod(&flat(&st.system.vel), &mut p.vel)
            .map_err(drv("upload"))?;
        let img: Vec<i32> = st.system.image.iter().flatten().copied().collect();
        s.memcpy_htod(&img, &mut p.image).map_err(drv("upload"))?;
        s.memcpy_htod(&flat(&st.force), &mut p.force)
            .map_err(drv("upload"))?;
        self.step = st.step;
        self.report = st.report();
        self.host_current = true;
        if st.built_at.is_empty() && self.work.is_some() {
            // no build to repeat: a slab's work list must still hold the beads near its layers
            self.build_list()?;
        }
        Ok(())
    }
}
