//! Each MPI rank couples the solutes it holds, wherever they are (an MD code with its own
//! decomposition): `mpirun -np N target/.../examples/ranks_solutes OUT_DIR` (built with
//! `--features mpi`). 240 solutes (masses 1-5, some outside the box in y: periodic images) are
//! dealt to the ranks by index (rank r holds j ≡ r mod N); 20 steps of an SRD fluid without
//! thermostat; each rank writes `OUT_DIR/solutes_<rank>.txt` ("j vx vy vz" per solute) and rank 0
//! writes `OUT_DIR/momentum.txt` (fluid + solute momentum before and after). Used by
//! `tests/suite/mpi_ranks.rs`, which compares 2 and 3 ranks with 1. A second argument picks the
//! fluid's device in the config's spelling (default `Cpu`; `Cuda([0])`: every rank on GPU 0).
//! With `RANKS_SOLUTES_BAD=R:S`, rank R first hands over a NaN position at step S: every rank
//! writes the error its step returned to `OUT_DIR/error_<rank>.txt`, then steps again with the
//! good solutes (nothing changed, so the run ends as one without the bad call).

use std::fmt::Write as _;

use mpcbox::{Config, Solvent};

const SOLUTES: usize = 240;

/// A fixed pseudo-random sequence in [0, 1) (xorshift64*).
fn uniform(state: &mut u64) -> f64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    (state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let _mpi = mpcbox::ranks::init();
    let (rank, ranks) = (mpcbox::ranks::rank(), mpcbox::ranks::size());
    let out = std::path::PathBuf::from(
        std::env::args()
            .nth(1)
            .ok_or("usage: ranks_solutes OUT_DIR")?,
    );
    let device = std::env::args().nth(2).unwrap_or_else(|| "Cpu".into());
    let cfg = Config::from_ron_str(&format!(
        "(cells: (8, 12, 8), particles_per_cell: 5, time_step: 0.1, \
          collision: Srd(angle_deg: 130.0), thermostat: None, seed: 21, steps: 20, \
          device: {device}, tuning: (reorder_interval: Some(0)))"
    ))?;
    let mut solvent = Solvent::new(cfg.clone())?;
    solvent.set_solutes_per_rank(true)?;
    let (mut pos, mut vel, mut mass, mut index) = (vec![], vec![], vec![], vec![]);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for j in 0..SOLUTES {
        let p = [
            8.0 * uniform(&mut seed),
            36.0 * uniform(&mut seed) - 12.0, // one period below to two above
            8.0 * uniform(&mut seed),
        ];
        let v = [0.0; 3].map(|_: f64| uniform(&mut seed) - 0.5);
        let m = 1.0 + 4.0 * uniform(&mut seed);
        if j % ranks == rank {
            pos.push(p);
            vel.push(v);
            mass.push(m);
            index.push(j);
        }
    }
    let momentum =
        |s: &mut Solvent, vel: &[[f64; 3]]| -> Result<[f64; 3], Box<dyn std::error::Error>> {
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
    // RANKS_SOLUTES_BAD=R:S: rank R passes a NaN position at step S
    let bad = std::env::var("RANKS_SOLUTES_BAD").ok().and_then(|s| {
        let (r, at) = s.split_once(':')?;
        Some((r.parse::<usize>().ok()?, at.parse::<u64>().ok()?))
    });
    let before = momentum(&mut solvent, &vel)?;
    for step in 0..cfg.steps {
        if let Some((bad_rank, at)) = bad.filter(|b| b.1 == step) {
            let mut wrong = pos.clone();
            if rank == bad_rank && !wrong.is_empty() {
                wrong[0][1] = f64::NAN;
            }
            let Err(e) = solvent.step_with_solutes(&wrong, &mut vel, &mass) else {
                return Err(
                    format!("rank {rank}: the step with a NaN on rank {bad_rank} ran").into(),
                );
            };
            std::fs::create_dir_all(&out)?;
            std::fs::write(out.join(format!("error_{rank}.txt")), format!("{at} {e}"))?;
        }
        solvent.step_with_solutes(&pos, &mut vel, &mass)?;
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
