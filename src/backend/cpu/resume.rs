//! The CPU backend continued from a checkpoint file without the fluid twice in host memory:
//! its buffers are allocated first, their pages touched on every core, then the file is
//! streamed into them a window at a time (`PartedFile::stream_parts`), each particle's values
//! put at its global index. Beside the backend's own memory the read holds only its pieces
//! in flight (docs/reliability.md, "Bounded host memory").

use rayon::prelude::*;

use super::{CpuBackend, DisjointWriter};
use crate::checkpoint::{PartMap, PartedFile, Values};
use crate::error::Result;
use crate::physics::Physics;
use crate::state::FluidState;

/// `n` copies of `v`, written on every core (the pages are resident when it returns).
fn touched<T: Copy + Send + Sync>(n: usize, v: T) -> Vec<T> {
    let mut out = Vec::with_capacity(n);
    out.par_extend(rayon::iter::repeat_n(v, n));
    out
}

/// Where the values of a streamed file go: the fluid at its particles' global indices.
struct Places {
    state: FluidState,
    /// The global index of the particle at each place of the file's order (the ids section);
    /// then the backend's cell of each particle.
    index_at: Vec<u32>,
    /// Whether each particle's id was seen; then the backend's Lees-Edwards images.
    seen: Vec<i8>,
    /// Places whose id is known (every one before the values of the other sections come).
    placed: usize,
}

impl Places {
    fn new(n: usize) -> Places {
        Places {
            state: FluidState {
                pos: [touched(n, 0.0), touched(n, 0.0), touched(n, 0.0)],
                vel: [touched(n, 0.0), touched(n, 0.0), touched(n, 0.0)],
            },
            index_at: touched(n, 0),
            seen: touched(n, 0),
            placed: 0,
        }
    }

    /// A piece of section `section` (0: ids, 1-3: positions, 4-6: velocities) whose first
    /// value is the file's `first` particle (of those streamed); what is wrong with the file.
    fn put(&mut self, section: usize, first: usize, values: Values<'_>) -> Result<(), String> {
        let n = self.index_at.len();
        let (len, ids) = match values {
            Values::Ids(v) => (v.len(), Some(v)),
            Values::F32(v) => (v.len(), None),
            Values::F64(v) => (v.len(), None),
        };
        if first + len > n {
            return Err(format!(
                "values of particles {first}.. past the {n} of the run"
            ));
        }
        if let Some(ids) = ids {
            if first != self.placed {
                return Err(format!("ids of particles {first}.. out of order"));
            }
            for (place, &id) in ids.iter().enumerate() {
                // below the particle count: checked as the file was read
                let seen = &mut self.seen[id as usize];
                if *seen != 0 {
                    return Err(format!("fluid particle {id} stored twice (corrupted)"));
                }
                *seen = 1;
                self.index_at[first + place] = id as u32;
            }
            self.placed += len;
            return Ok(());
        }
        // every id came, each once: `index_at` is a permutation of 0..n, so the writes below
        // go to distinct places
        if self.placed != n {
            return Err(format!("values of section {section} before every id"));
        }
        let index = &self.index_at[first..first + len];
        match (values, section) {
            (Values::F32(v), 1..=3) => scatter(&mut self.state.pos[section - 1], index, v),
            (Values::F64(v), 4..=6) => scatter(&mut self.state.vel[section - 4], index, v),
            _ => return Err(format!("section {section} of another type")),
        }
        Ok(())
    }
}

/// `values[k]` into `out[index[k]]`, in parallel; `index` holds distinct places of `out`.
fn scatter<T: Copy + Send + Sync>(out: &mut [T], index: &[u32], values: &[T]) {
    let (len, at) = (out.len(), DisjointWriter(out.as_mut_ptr()));
    index
        .par_chunks(1 << 16)
        .zip(values.par_chunks(1 << 16))
        .for_each(|(index, values)| {
            for (&i, &v) in index.iter().zip(values) {
                assert!((i as usize) < len, "a place past the fluid");
                // SAFETY: the place lies in `out` (asserted) and the places are distinct (the
                // caller's permutation), so no two workers write one element.
                unsafe { *at.at(i as usize) = v };
            }
        });
}

impl CpuBackend {
    /// The backend with the fluid of the checkpoint `file`, read a `window` at a time straight
    /// into its buffers (every particle at its global index, as [`PartedFile::whole_fluid`]
    /// gives them).
    pub(crate) fn from_stored(
        phys: Physics,
        file: &PartedFile,
        threads: usize,
        window: u64,
    ) -> Result<CpuBackend> {
        let n = file.len();
        let mut places = Places::new(n);
        let all = [f32::NEG_INFINITY, f32::INFINITY];
        let counts = file.stream_parts(
            1,
            all,
            |_| Some(0),
            window,
            Some(&PartMap::one()),
            &mut |_, section, first, values| {
                places
                    .put(section, first as usize, values)
                    .map_err(|e| file.bad(e))
            },
        )?;
        if counts != [n as u64] || places.placed != n {
            return Err(file.bad(format!(
                "{counts:?} fluid particles read, the run has {n} (corrupted)"
            )));
        }
        let Places {
            state,
            index_at,
            seen,
            ..
        } = places;
        let mut be = CpuBackend::new(phys, state, threads)?;
        // allocated anyway at the first step: reused, not allocated again
        be.cell_of = index_at;
        be.image_of = seen;
        Ok(be)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Backend;
    use crate::checkpoint::{CheckpointFile, CheckpointHead, FluidView, StoredFluid};
    use crate::config::Config;

    /// A checkpoint of `fluid` whose one block lists the particles `ids` (in that order),
    /// streamed into the backend in a window of 1 MiB: pieces of 8 Ki values.
    fn resumed(fluid: &FluidState, ids: Vec<u64>, config: &Config) -> Result<FluidState> {
        let mut part = FluidState::default();
        for k in 0..3 {
            part.pos[k] = ids.iter().map(|&i| fluid.pos[k][i as usize]).collect();
            part.vel[k] = ids.iter().map(|&i| fluid.vel[k][i as usize]).collect();
        }
        let phys = Physics::from_config(config);
        let head = CheckpointHead {
            config: config.clone(),
            step: 3,
            stats: crate::stats::RunStats::new(phys.profile_bins()),
            md: None,
            run_id: Some("resume".into()),
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.mpcbox");
        let parts = [(part, ids)];
        let n = fluid.len() as u64;
        let mut view = FluidView::Parts(&parts);
        let transport = crate::ranks::transport();
        crate::checkpoint::write_parted(
            &path,
            &head,
            n,
            &mut view,
            1 << 20,
            &*transport,
            crate::checkpoint::Recycle::Free,
        )?;
        let file = CheckpointFile::open(&path)?;
        let StoredFluid::Parted(file) = file.fluid() else {
            panic!("a format-4 file")
        };
        CpuBackend::from_stored(phys, file, 1, 1 << 20)?.download()
    }

    /// Particles stored in any order come back at their global indices, as a whole read
    /// gives them; an id stored twice is refused.
    #[test]
    fn a_streamed_checkpoint_puts_every_particle_at_its_index() {
        let config = Config::from_ron_str(
            "(cells: (16, 16, 12), particles_per_cell: 9, time_step: 0.1, seed: 4, steps: 9, \
              collision: Srd(angle_deg: 130.0))",
        )
        .unwrap();
        let fluid = FluidState::initial(&config);
        let n = fluid.len() as u64;
        // reversed, then every 7th first: 4 pieces, each of places far apart
        let mut ids: Vec<u64> = (0..n).rev().collect();
        ids.sort_by_key(|&i| (i % 7 != 0, u64::MAX - i));
        assert_eq!(resumed(&fluid, ids.clone(), &config).unwrap(), fluid);
        ids[n as usize - 1] = ids[0];
        let e = resumed(&fluid, ids, &config).unwrap_err().to_string();
        assert!(e.contains("stored twice"), "{e}");
    }
}
