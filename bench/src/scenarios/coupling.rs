//! `coupling`: overhead of the coupled step (solutes handed over, embedded in the collision,
//! velocities handed back) over the plain fluid step, at several solute densities. Each step
//! the solutes stream ballistically on the host first, as an MD code would move them; only the
//! time inside the solvent's calls is counted. References: the pinned host copy rates of the
//! fluid's (first) GPU each way; host arrays cross PCIe every step, and each case gives its
//! PCIe floor (56 bytes a solute up, 24 down, at those rates) and the host-side validation;
//! for pageable arrays also the pinned staging's own rates (the host's copy into it alone, and
//! the staged way up and down), which bound them above the PCIe floor.

use std::path::Path;
use std::time::Instant;

use serde_json::json;

use mpcbox::config::{Config, DeviceChoice, Thermostat};
use mpcbox::rng::CellStream;
use mpcbox::Solvent;

use super::{cube, err, recorder};
use crate::Res;

#[derive(clap::Args)]
pub struct Args {
    /// Box edges in cells (cubic).
    #[arg(long, default_value = "32", value_delimiter = ',')]
    sizes: Vec<u32>,
    /// Solutes per cell.
    #[arg(long, default_value = "0.1,0.7", value_delimiter = ',')]
    densities: Vec<f64>,
    #[arg(long, default_value_t = 20)]
    steps: u64,
    /// auto | cpu | cuda:N
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Use the split form (begin_step / finish_step) instead of one call.
    #[arg(long)]
    split: bool,
    /// Hand the solutes over as device arrays on the fluid's GPU (no PCIe traffic); the
    /// solutes do not move between steps in this mode.
    #[arg(long)]
    device_resident: bool,
    /// Begin each step before handing the solutes over (`Solvent::begin_fluid_step`): the
    /// fluid streams while they are checked, sent up and routed, as in an MD loop whose steps
    /// run meanwhile (device arrays and host arrays alike).
    #[arg(long)]
    overlap: bool,
    /// After the timed steps, 10 more with each phase waited for and timed (the split is
    /// recorded beside the rate as "<phase> ms" figures; those steps are slower).
    #[arg(long)]
    phases: bool,
    /// Plain steps before timing (past the first reorders).
    #[arg(long, default_value_t = 45)]
    warmup: u64,
    /// The solutes' order in memory: `random` (worst case), or `cells`, sorted by collision
    /// cell as MD codes keep their particles (HOOMD-blue's space-filling-curve sort, LAMMPS's
    /// `atom_modify sort`) and as the bundled engine's chains lie.
    #[arg(long, default_value = "random", value_parser = ["random", "cells"])]
    solute_order: String,
    /// Under `mpirun` (the `mpi` build): each rank hands over its own solutes, those in its
    /// slabs' layers (an MD code decomposed as the fluid is), instead of every rank all of
    /// them; rank 0 records.
    #[arg(long)]
    per_rank: bool,
    /// y slabs of the fluid (`tuning.slabs`; 0: one per GPU): more slabs than GPUs run the
    /// several-GPU path (routing, exchange) on fewer GPUs.
    #[arg(long, default_value_t = 0)]
    slabs: u32,
    /// Host arrays in page-locked memory (`PinnedSoluteArrays`, as a caller's pinned or
    /// registered arrays): they cross PCIe by DMA straight from and into them.
    #[arg(long)]
    pinned_host: bool,
    /// Milliseconds the host sleeps between steps, outside the timed calls (an MD code's
    /// steps between collisions: the GPUs idle meanwhile, as under LAMMPS's `fix mpcbox`).
    #[arg(long, default_value_t = 0.0)]
    gap_ms: f64,
}

pub fn run(a: Args, records: Option<&Path>) -> Res<()> {
    let device = super::device(&a.device)?;
    let (rank, ranks) = (mpcbox::ranks::rank(), mpcbox::ranks::size());
    let records = records.filter(|_| rank == 0);
    let mut rec = recorder("coupling", &device, records);
    let mut rates = None;
    if let (Some(g), false) = (super::gpus_of(&device), a.device_resident) {
        let measured = crate::machine::pinned_copy_gbps(g[0]);
        rates = measured.as_ref().ok().copied();
        rec.reference("pinned host copy GB/s", measured.map(|r| r.0));
        rec.reference(
            "pinned copy to host GB/s",
            Ok(rates.map_or(f64::NAN, |r| r.1)),
        );
        if !a.pinned_host {
            // pageable arrays cross through the staging: its rates bound them as PCIe does
            let names = [
                "host copy into staging GB/s",
                "staged upload GB/s",
                "staged download GB/s",
            ];
            match crate::machine::staged_copy_gbps(g[0]) {
                Ok(rates) => names
                    .into_iter()
                    .zip(rates)
                    .for_each(|(name, r)| rec.reference(name, Ok(r))),
                Err(e) => names
                    .into_iter()
                    .for_each(|name| rec.reference(name, Err(e.clone()))),
            }
        }
    }
    if a.split && a.overlap {
        return Err(
            "--split and --overlap: a split step is begun with its solutes; fix: one of them"
                .into(),
        );
    }
    let mode = if a.device_resident && a.overlap {
        "device-resident, begun"
    } else if a.device_resident {
        "device-resident"
    } else if a.split && a.pinned_host {
        "host page-locked, split"
    } else if a.split {
        "host, split"
    } else if a.pinned_host && a.overlap {
        "host page-locked, begun"
    } else if a.pinned_host {
        "host page-locked"
    } else if a.overlap {
        "host, begun"
    } else {
        "host"
    };
    let mode = match a.gap_ms > 0.0 {
        false => mode.to_string(),
        true => format!("{mode}, {} ms between steps", a.gap_ms),
    };
    let mode = match ranks {
        1 => mode,
        r if a.per_rank => match std::env::var("MPCBOX_RANK_SOLUTE_SPLIT") {
            // the split's form is part of the case (`route-twice`, `off`)
            Ok(split) if split != "on" => {
                format!("{mode}, {r} ranks, each its slabs' solutes, split {split}")
            }
            _ => format!("{mode}, {r} ranks, each its slabs' solutes"),
        },
        r => format!("{mode}, {r} ranks, every rank all solutes"),
    };
    for &l in &a.sizes {
        let mut s = solvent(l, device.clone(), a.slabs)?;
        s.set_solutes_per_rank(a.per_rank).map_err(err)?;
        // from a fluid sorted by cell, as in a long run (the initial state is random in memory
        // and steps are slower until the first reorder)
        for _ in 0..a.warmup {
            s.step().map_err(err)?;
        }
        let plain = ms_per_step(&a, &mut s, &mut |s: &mut Solvent| {
            let t0 = Instant::now();
            s.step().map_err(err)?;
            Ok(t0.elapsed().as_secs_f64())
        })?;
        for &rho in &a.densities {
            let n = (rho * (l as f64).powi(3)) as usize;
            // `here`: the solutes this rank hands over (all of them in one process)
            let (coupled, check_ms, phases, here) = coupled_ms_per_step(&a, &mut s, l, n)?;
            if rank != 0 {
                continue;
            }
            let mut figures = vec![
                ("plain ms/step", plain),
                ("coupled ms/step", coupled),
                ("coupled / plain", coupled / plain),
            ];
            if ranks > 1 {
                figures.push(("solutes on rank 0", here as f64));
            }
            if let (Some((up, down)), Some(check_ms)) = (rates, check_ms) {
                // over ranks each rank's link carries its own solutes (rank 0's measured)
                let floor = (56.0 * here as f64 / up + 24.0 * here as f64 / down) / 1e6;
                figures.push(("PCIe floor ms", floor));
                figures.push(("extra / floor", (coupled - plain) / floor));
                figures.push(("host check ms", check_ms));
            }
            let phase_names: Vec<String> = phases.iter().map(|(k, _)| format!("{k} ms")).collect();
            for ((_, ms), name) in phases.iter().zip(&phase_names) {
                figures.push((name.as_str(), *ms));
            }
            rec.row(
                &[
                    ("cells", cube(l)),
                    ("fluid", json!(s.n_fluid())),
                    ("solutes/cell", json!(rho)),
                    ("solutes", json!(n)),
                    ("backend", json!(s.backend_description())),
                    ("path", json!(format!("{mode}, {} order", a.solute_order))),
                    ("host threads", json!(mpcbox::host_pool::host_threads())),
                ],
                &figures,
            )?;
        }
    }
    Ok(())
}

/// The MBS fluid of an `l`³ box (10 particles per cell) on `device` in `slabs` y slabs (0: one
/// per GPU), without sampling.
fn solvent(l: u32, device: DeviceChoice, slabs: u32) -> Res<Solvent> {
    let mut cfg = Config::from_ron_str(&format!(
        "(cells: ({l}, {l}, {l}), particles_per_cell: 10, time_step: 0.1, \
         collision: Srd(angle_deg: 130.0), thermostat: Mbs, steps: 1)"
    ))
    .map_err(err)?;
    cfg.thermostat = Thermostat::Mbs;
    cfg.device = device;
    cfg.tuning.slabs = slabs;
    cfg.output.observable_interval = 0;
    cfg.output.equilibration_steps = u64::MAX;
    Solvent::new(cfg).map_err(err)
}

type TimedStep<'a> = dyn FnMut(&mut Solvent) -> Res<f64> + 'a;

/// Milliseconds per step inside the solvent: `step` returns the seconds it spent in the
/// solvent's calls (host-side MD work excluded); one untimed step first, and the device work
/// still queued at the end is counted.
fn ms_per_step(a: &Args, s: &mut Solvent, step: &mut TimedStep<'_>) -> Res<f64> {
    step(s)?;
    s.moments().map_err(err)?;
    let mut inside = 0.0;
    for _ in 0..a.steps {
        if a.gap_ms > 0.0 {
            std::thread::sleep(std::time::Duration::from_secs_f64(a.gap_ms * 1e-3));
        }
        inside += step(s)?;
    }
    let t0 = Instant::now();
    s.moments().map_err(err)?;
    inside += t0.elapsed().as_secs_f64();
    Ok(inside * 1e3 / a.steps.max(1) as f64)
}

/// Milliseconds per coupled step with `n` solutes of mass 10 in the `l`³ box, handed over as
/// the arguments ask (host arrays in one call or split, or device arrays), and for host
/// arrays the milliseconds of their validation alone (part of every such step), and with
/// `--phases` the milliseconds per step of each phase.
fn coupled_ms_per_step(a: &Args, s: &mut Solvent, l: u32, n: usize) -> Res<Coupled> {
    let mut r = CellStream::for_particle(99, 0);
    let lf = l as f64;
    let mut pos: Vec<[f64; 3]> = (0..n)
        .map(|_| [r.uniform() * lf, r.uniform() * lf, r.uniform() * lf])
        .collect();
    let mut vel: Vec<[f64; 3]> = (0..n)
        .map(|_| [0.3 * r.normal(), 0.3 * r.normal(), 0.3 * r.normal()])
        .collect();
    if a.solute_order == "cells" {
        // by cell: y, then z, then x (the fluid's cell index order, `Physics::locate`)
        let cell = |p: &[f64; 3]| {
            let c = p.map(|x| (x as u64).min(l as u64 - 1));
            (c[1] * l as u64 + c[2]) * l as u64 + c[0]
        };
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| cell(&pos[i]));
        pos = order.iter().map(|&i| pos[i]).collect();
        vel = order.iter().map(|&i| vel[i]).collect();
    }
    if a.per_rank {
        // this rank's slabs' layers (y), as an MD code decomposed like the fluid holds them
        let me = mpcbox::ranks::rank();
        let places = s.slab_places().unwrap_or_default();
        let mine: Vec<[u32; 2]> = places
            .iter()
            .filter(|p| p.rank == me)
            .map(|p| p.layers)
            .collect();
        let keep: Vec<bool> = pos
            .iter()
            .map(|p| {
                let y = p[1] as u32;
                mine.is_empty() || mine.iter().any(|&[a, b]| (a..b).contains(&y))
            })
            .collect();
        let mut k = keep.iter();
        pos.retain(|_| *k.next().expect("one per solute"));
        let mut k = keep.iter();
        vel.retain(|_| *k.next().expect("one per solute"));
    }
    let n = pos.len();
    let mass = vec![10.0; n];
    if a.device_resident {
        let ordinal = s.cuda_ordinal().ok_or(
            "--device-resident: the solutes live on the fluid's GPU; fix: --device cuda:N",
        )?;
        let arrays = mpcbox::backend::cuda::DeviceSoluteArrays::upload(ordinal, &pos, &vel, &mass)
            .map_err(err)?;
        let solutes = arrays.solutes();
        let overlap = a.overlap;
        let mut step = |s: &mut Solvent| {
            let t0 = Instant::now();
            if overlap {
                s.begin_fluid_step(solutes.n).map_err(err)?;
            }
            s.step_with_device_solutes(&solutes).map_err(err)?;
            Ok(t0.elapsed().as_secs_f64())
        };
        let ms = ms_per_step(a, s, &mut step)?;
        let phases = timed_phases(a, s, &mut step)?;
        Ok((ms, None, phases, n))
    } else {
        let mut pinned = match a.pinned_host {
            true => {
                let ordinal = s
                    .cuda_ordinal()
                    .ok_or("--pinned-host: page-locked arrays need a GPU; fix: --device cuda:N")?;
                Some(mpcbox::backend::cuda::PinnedSoluteArrays::new(ordinal, n).map_err(err)?)
            }
            false => None,
        };
        let (pos, vel, mass): (&mut [[f64; 3]], &mut [[f64; 3]], &[f64]) = match &mut pinned {
            Some(p) => {
                let (pp, pv, pm) = p.arrays_mut().map_err(err)?;
                pp.copy_from_slice(&pos);
                pv.copy_from_slice(&vel);
                pm.copy_from_slice(&mass);
                (pp, pv, pm)
            }
            None => (&mut pos, &mut vel, &mass),
        };
        let t0 = Instant::now();
        for _ in 0..5 {
            s.check_solutes(pos, vel, mass).map_err(err)?;
        }
        let check_ms = t0.elapsed().as_secs_f64() * 1e3 / 5.0;
        let (split, overlap) = (a.split, a.overlap);
        let mut step = |s: &mut Solvent| {
            for (p, v) in pos.iter_mut().zip(vel.iter()) {
                for k in 0..3 {
                    p[k] += 0.1 * v[k];
                }
            }
            let t0 = Instant::now();
            if overlap {
                s.begin_fluid_step(pos.len()).map_err(err)?;
            }
            if split {
                s.begin_step(pos, vel, mass).map_err(err)?;
                s.finish_step(vel).map_err(err)?;
            } else {
                s.step_with_solutes(pos, vel, mass).map_err(err)?;
            }
            Ok(t0.elapsed().as_secs_f64())
        };
        let ms = ms_per_step(a, s, &mut step)?;
        let phases = timed_phases(a, s, &mut step)?;
        Ok((ms, Some(check_ms), phases, n))
    }
}

/// Milliseconds per coupled step, the host check's milliseconds (host arrays), the phases'
/// milliseconds per step (`--phases`), and the solutes this rank handed over.
type Coupled = (f64, Option<f64>, Vec<(&'static str, f64)>, usize);

/// With `--phases`: 10 steps with every phase waited for and timed, in milliseconds per step.
fn timed_phases(
    a: &Args,
    s: &mut Solvent,
    step: &mut TimedStep<'_>,
) -> Res<Vec<(&'static str, f64)>> {
    if !a.phases {
        return Ok(Vec::new());
    }
    const STEPS: u32 = 10;
    s.time_phases(true);
    for _ in 0..STEPS {
        step(s)?;
    }
    s.moments().map_err(err)?;
    let phases = s.timed_phases();
    s.time_phases(false);
    Ok(phases
        .into_iter()
        .map(|(k, secs)| (k, secs * 1e3 / STEPS as f64))
        .collect())
}
