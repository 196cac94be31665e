//! Each MPI rank couples the solutes it holds, wherever they are (an MD code with its own
//! decomposition): `mpirun -np N target/.../examples/ranks_solutes OUT_DIR` (built with
//! `--features mpi`). 240 solutes (masses 1-5, some outside the box in y: periodic images) are
//! dealt to the ranks by index (rank r holds j ≡ r mod N); 20 steps of an SRD fluid without
//! thermostat; each rank writes `OUT_DIR/solutes_<rank>.txt` ("j vx vy vz" per solute) and rank 0
//! writes `OUT_DIR/momentum.txt` (fluid + solute momentum before and after). Used by
//! `tests/suite/mpi_ranks.rs`, which compares 2 and 3 ranks with 1. A second argument picks the
//! fluid's device in the config's spelling (default `Cpu`; `Cuda([0])`: every rank on GPU 0).
//! A third argument `device` hands the solutes over as device arrays on the rank's GPU (on a
//! stream of its own, `step_with_device_solutes`) instead of host arrays; `pinned`, as host
//! arrays in page-locked memory (`PinnedSoluteArrays`: they go up by DMA and are tested on
//! the GPU).
//! `RANKS_SOLUTES_SLABS=S` cuts the box into S y slabs (several per rank);
//! `RANKS_SOLUTES_N=N` hands over the first N of the 240 (a few: a rank with one solute
//! foreign to it, or none at all).
//! With `RANKS_SOLUTES_BAD=R:S`, rank R first hands over a NaN position at step S (with
//! `R:S:mass`, a mass of 10⁶ instead, beyond the fixed-point sums' cap; with `R:S:count`, one
//! solute fewer than the step was begun for): every rank writes the
//! error its step returned to `OUT_DIR/error_<rank>.txt`, then steps again with the good
//! solutes (nothing changed, so the run ends as one without the bad call).
//! `RANKS_SOLUTES_BEGIN=1` begins every step before its solutes are handed over
//! (`Solvent::begin_fluid_step`, as an MD code whose forces are computed meanwhile); a refused
//! step then stays begun and the good solutes finish it.

use std::fmt::Write as _;

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};
use mpcbox::backend::DeviceSolutes;
use mpcbox::{Config, Solvent};

/// This rank's solutes as device arrays on its GPU (the first of its slabs'), on a stream of
/// their own.
struct GpuSolutes {
    stream: Arc<CudaStream>,
    pos: CudaSlice<f64>,
    vel: CudaSlice<f64>,
    mass: CudaSlice<f64>,
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

impl GpuSolutes {
    fn new(s: &Solvent, pos: &[[f64; 3]], vel: &[[f64; 3]], mass: &[f64]) -> Res<GpuSolutes> {
        let me = mpcbox::ranks::rank();
        let ordinal = match s.slab_places() {
            Some(places) => places
                .iter()
                .find(|p| p.rank == me)
                .map_or(0, |p| p.ordinal),
            None => 0,
        };
        let stream = CudaContext::new(ordinal)?.new_stream()?;
        Ok(GpuSolutes {
            pos: stream.clone_htod(pos.as_flattened())?,
            vel: stream.clone_htod(vel.as_flattened())?,
            mass: stream.clone_htod(mass)?,
            stream,
        })
    }

    /// One step with these solutes, or with `wrong` positions and masses instead (separate
    /// arrays).
    fn step(
        &mut self,
        s: &mut Solvent,
        wrong: Option<(&[[f64; 3]], &[f64])>,
    ) -> mpcbox::Result<()> {
        let stream = &self.stream;
        let wrong = match wrong {
            Some((p, m)) => Some((
                stream.clone_htod(p.as_flattened()).map_err(device)?,
                stream.clone_htod(m).map_err(device)?,
            )),
            None => None,
        };
        let (pos, mass) = match &wrong {
            Some((p, m)) => (p, m),
            None => (&self.pos, &self.mass),
        };
        let d = DeviceSolutes {
            pos: pos.device_ptr(stream).0,
            vel: self.vel.device_ptr(stream).0,
            mass: mass.device_ptr(stream).0,
            n: mass.len(),
            stream: stream.cu_stream() as u64,
        };
        s.step_with_device_solutes(&d).map(|_| ())
    }

    fn velocities(&self) -> Res<Vec<[f64; 3]>> {
        let v = self.stream.clone_dtoh(&self.vel)?;
        Ok(v.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect())
    }
}

/// One step with host arrays in page-locked memory holding `pos`, `vel` and `mass`; `vel` then
/// holds what the step left in the page-locked velocities (unchanged if it was refused).
fn step_page_locked(
    s: &mut Solvent,
    pos: &[[f64; 3]],
    vel: &mut [[f64; 3]],
    mass: &[f64],
) -> mpcbox::Result<()> {
    let mut arrays = mpcbox::backend::cuda::PinnedSoluteArrays::new(0, pos.len())?;
    let (p, v, m) = arrays.arrays_mut()?;
    p.copy_from_slice(pos);
    v.copy_from_slice(vel);
    m.copy_from_slice(mass);
    let stepped = s.step_with_solutes(p, v, m).map(|_| ());
    vel.copy_from_slice(v);
    stepped
}

fn device(e: cudarc::driver::DriverError) -> mpcbox::MpcError {
    mpcbox::MpcError::Device(e.to_string())
}

const SOLUTES: usize = 240;

/// A fixed pseudo-random sequence in [0, 1) (xorshift64*).
fn uniform(state: &mut u64) -> f64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    (state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
}

fn main() -> Res<()> {
    let _mpi = mpcbox::ranks::init();
    let (rank, ranks) = (mpcbox::ranks::rank(), mpcbox::ranks::size());
    let out = std::path::PathBuf::from(
        std::env::args()
            .nth(1)
            .ok_or("usage: ranks_solutes OUT_DIR")?,
    );
    let device = std::env::args().nth(2).unwrap_or_else(|| "Cpu".into());
    let on_gpu = std::env::args().nth(3).as_deref() == Some("device");
    let page_locked = std::env::args().nth(3).as_deref() == Some("pinned");
    // RANKS_SOLUTES_SLABS=S: the box cut into S y slabs (several per rank, or per GPU)
    let slabs = std::env::var("RANKS_SOLUTES_SLABS").unwrap_or_else(|_| "0".into());
    let cfg = Config::from_ron_str(&format!(
        "(cells: (8, 12, 8), particles_per_cell: 5, time_step: 0.1, \
          collision: Srd(angle_deg: 130.0), thermostat: None, seed: 21, steps: 20, \
          device: {device}, tuning: (reorder_interval: Some(0), slabs: {slabs}))"
    ))?;
    let mut solvent = Solvent::new(cfg.clone())?;
    solvent.set_solutes_per_rank(true)?;
    let (mut pos, mut vel, mut mass, mut index) = (vec![], vec![], vec![], vec![]);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    // RANKS_SOLUTES_N=N: only the first N solutes (the same draws)
    let n: usize = match std::env::var("RANKS_SOLUTES_N") {
        Ok(v) => v
            .parse()
            .map_err(|_| format!("RANKS_SOLUTES_N={v}: not a count"))?,
        Err(_) => SOLUTES,
    };
    for j in 0..SOLUTES {
        let p = [
            8.0 * uniform(&mut seed),
            36.0 * uniform(&mut seed) - 12.0, // one period below to two above
            8.0 * uniform(&mut seed),
        ];
        let v = [0.0; 3].map(|_: f64| uniform(&mut seed) - 0.5);
        let m = 1.0 + 4.0 * uniform(&mut seed);
        if j < n && j % ranks == rank {
            pos.push(p);
            vel.push(v);
            mass.push(m);
            index.push(j);
        }
    }
    let momentum = |s: &mut Solvent, vel: &[[f64; 3]]| -> Res<[f64; 3]> {
        let mut p = [0.0; 3];
        for (v, m) in vel.iter().zip(&mass) {
            for k in 0..3 {
                p[k] += m * v[k];
            }
        }
        let mut p = p.to_vec();
        mpcbox::ranks::transport().sum(&mut p)?;
        let fluid = s.observables()?.momentum;
        Ok([0, 1, 2].map(|k| p[k] + fluid[k]))
    };
    // RANKS_SOLUTES_BAD=R:S[:mass|:count]: rank R passes a NaN position (a mass of 1e6, one
    // solute fewer) at step S
    let bad = std::env::var("RANKS_SOLUTES_BAD").ok().and_then(|s| {
        let mut words = s.split(':');
        let r = words.next()?.parse::<usize>().ok()?;
        let at = words.next()?.parse::<u64>().ok()?;
        Some((r, at, words.next().unwrap_or("nan").to_string()))
    });
    let before = momentum(&mut solvent, &vel)?;
    let mut gpu = match on_gpu {
        true => Some(GpuSolutes::new(&solvent, &pos, &vel, &mass)?),
        false => None,
    };
    let begin = std::env::var("RANKS_SOLUTES_BEGIN").is_ok_and(|v| v == "1");
    for step in 0..cfg.steps {
        if begin {
            solvent.begin_fluid_step(pos.len())?;
        }
        if let Some((bad_rank, at, what)) = bad.as_ref().filter(|b| b.1 == step) {
            let (mut wrong, mut wrong_mass) = (pos.clone(), mass.clone());
            if rank == *bad_rank && !wrong.is_empty() {
                match what.as_str() {
                    "mass" => wrong_mass[0] = 1e6,
                    "count" => {
                        wrong.pop();
                        wrong_mass.pop();
                    }
                    _ => wrong[0][1] = f64::NAN,
                }
            }
            let n_wrong = wrong.len();
            let refused = match &mut gpu {
                Some(g) => g.step(&mut solvent, Some((&wrong, &wrong_mass))),
                None if page_locked => {
                    step_page_locked(&mut solvent, &wrong, &mut vel[..n_wrong], &wrong_mass)
                }
                None => solvent
                    .step_with_solutes(&wrong, &mut vel[..n_wrong], &wrong_mass)
                    .map(|_| ()),
            };
            let Err(e) = refused else {
                return Err(format!(
                    "rank {rank}: the step with a bad value on rank {bad_rank} ran"
                )
                .into());
            };
            std::fs::create_dir_all(&out)?;
            std::fs::write(out.join(format!("error_{rank}.txt")), format!("{at} {e}"))?;
        }
        match &mut gpu {
            Some(g) => g.step(&mut solvent, None)?,
            None if page_locked => step_page_locked(&mut solvent, &pos, &mut vel, &mass)?,
            None => solvent
                .step_with_solutes(&pos, &mut vel, &mass)
                .map(|_| ())?,
        };
    }
    if let Some(g) = &gpu {
        vel = g.velocities()?;
    }
    let after = momentum(&mut solvent, &vel)?;
    std::fs::create_dir_all(&out)?;
    let mut text = String::new();
    for (j, v) in index.iter().zip(&vel) {
        writeln!(text, "{j} {:e} {:e} {:e}", v[0], v[1], v[2])?;
    }
    std::fs::write(out.join(format!("solutes_{rank}.txt")), text)?;
    if rank == 0 {
        std::fs::write(
            out.join("momentum.txt"),
            format!(
                "{:e} {:e} {:e}\n{:e} {:e} {:e}\n",
                before[0], before[1], before[2], after[0], after[1], after[2]
            ),
        )?;
    }
    Ok(())
}
