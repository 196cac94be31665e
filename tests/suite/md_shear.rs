//! Lees-Edwards shear in the bundled MD engine (CPU and GPU engine, tests/suite/common/platform.rs):
//! a solute crossing the sheared boundary gets the fluid's shift and velocity jump at that
//! time; pair forces across the boundary are those of the explicit image and continuous in
//! the offset; fluid + solutes conserve momentum with the Lees-Edwards code paths on; a DPD
//! fluid sheared by the MD engine alone has the imposed linear profile and the viscosity an
//! independent measurement (sinusoidal transverse forcing, no Lees-Edwards) gives.
//!
//! Sizes: the crossing and force tests use one or two particles; the momentum test an 8³
//! fluid with four chains; the DPD test four runs in an 8 × 8 × 8 box at ρ = 3 (1536 particles), large
//! enough for a resolved sine profile and a stress averaged to ~1% in a few seconds.

use crate::common;

use common::{MdEngine, Platform};
use mpcbox::config::Config;
use mpcbox::md::build::maxwell_velocities;
use mpcbox::md::{
    ForceField, LjTable, Md, MdSettings, MdThermostat, NeighborMode, PairStyle, ShearFlow, System,
};
use mpcbox::physics::Physics;

common::backend_tests!(
    [cpu gpu]
    solute_crossing_matches_fluid_particle,
    pair_forces_across_the_boundary_match_the_unsheared_image,
    dpd_fluid_under_shear_has_the_independent_viscosity,
);
common::backend_tests!(fluid_and_solutes_conserve_momentum_with_le_paths_on);
common::backend_tests!([gpu] dpd_under_shear_follows_the_cpu_step_by_step);

fn settings(dt: f64, shear: Option<ShearFlow>) -> MdSettings {
    MdSettings {
        dt,
        kt: 1.0,
        seed: 11,
        skin: 0.3,
        neighbor: NeighborMode::Verlet,
        reorder_every: 10,
        threads: 0,
        shear,
    }
}

fn lj(cut: f64) -> ForceField {
    ForceField {
        pair: PairStyle::Lj(LjTable::uniform(1, 1.0, 1.0, cut, true)),
        bond_styles: vec![],
    }
}

/// One MD particle and one fluid particle from the same place cross the top of a sheared box
/// on the same step: the same x shift (the offset at the end of that step) and vx jump.
fn solute_crossing_matches_fluid_particle(p: Platform) {
    let cfg = Config::from_ron_str(
        "(cells: (6, 5, 4), particles_per_cell: 1, time_step: 0.1, collision: Srd(angle_deg: 130.0), \
          shear_rate: 0.37, grid_shift: false, steps: 1)",
    )
    .unwrap();
    let phys = Physics::from_config(&cfg);
    let (h, steps) = (0.1, 8u64);
    let (x0, v0) = ([2.3, 5.0 - 0.75, 1.5], [0.4, 1.0, -0.2]);
    // the fluid particle, streamed by the fluid's own function
    let (mut fp, mut fv) = ([x0[0] as f32, x0[1] as f32, x0[2] as f32], v0);
    for n in 0..steps {
        (fp, fv) = phys.stream(&phys.plan(n, false, false), fp, fv);
    }
    // the MD particle: N = 1 MD step per collision of h, no forces
    let mut sys = System {
        box_len: [6.0, 5.0, 4.0],
        type_mass: vec![1.0],
        ..Default::default()
    };
    sys.push(x0, v0, 0, 1, 0);
    let shear = ShearFlow {
        rate: 0.37,
        collision_time: h,
        steps_per_collision: 1,
    };
    let ff = ForceField {
        pair: PairStyle::None,
        bond_styles: vec![],
    };
    let mut md = MdEngine::new(p, sys, ff, MdThermostat::None, settings(h, Some(shear)));
    md.run(steps);
    let s = md.system().clone();
    println!(
        "{p}: fluid {fp:?} {fv:?}, MD {:?} {:?} image {:?}",
        s.pos[0], s.vel[0], s.image[0]
    );
    assert_eq!(s.image[0][1], 1, "crossed the top once");
    for k in 0..3 {
        assert!((s.pos[0][k] - fp[k] as f64).abs() < 1e-5, "position {k}");
        assert!((s.vel[0][k] - fv[k]).abs() < 1e-12, "velocity {k}");
    }
    assert!((s.vel[0][0] - (v0[0] - 0.37 * 5.0)).abs() < 1e-12);
    // the unwrapped trajectory is continuous: straight at the unwrapped velocity
    let u = s.unwrapped(0);
    let t = steps as f64 * h;
    for k in 0..3 {
        assert!(
            (u[k] - (x0[k] + v0[k] * t)).abs() < 1e-12,
            "unwrapped {k}: {u:?}"
        );
    }
}

/// Two LJ particles on either side of the y boundary: in the sheared box at offset δ the
/// force equals that of the unsheared box with the lower particle moved by +δ along x (its
/// explicit image), for offsets swept across a whole period; at δ = 0 the sheared engine
/// gives the unsheared forces bit for bit (CPU).
fn pair_forces_across_the_boundary_match_the_unsheared_image(p: Platform) {
    // b's image comes no closer than 1.08 to a, so the force stays moderate over the sweep
    let (l, h) = ([7.0, 6.0, 6.5], 0.002);
    let (a, b) = ([3.1, 5.2, 2.0], [2.4, 0.1, 2.6]);
    let rate = 0.5;
    let shear = ShearFlow {
        rate,
        collision_time: h,
        steps_per_collision: 1,
    };
    let system = |xb: f64| {
        let mut sys = System {
            box_len: l,
            type_mass: vec![1.0],
            ..Default::default()
        };
        sys.push(a, [0.0; 3], 0, 1, 0);
        sys.push([xb, b[1], b[2]], [0.0; 3], 0, 2, 0);
        sys
    };
    let mut sheared = MdEngine::new(
        p,
        system(b[0]),
        lj(2.5),
        MdThermostat::None,
        settings(h, Some(shear)),
    );
    let mut plain = Md::new(system(b[0]), lj(2.5), MdThermostat::None, settings(h, None)).unwrap();
    let f0 = sheared.forces_by_tag();
    if p == Platform::Cpu {
        assert_eq!(f0[0], plain.forces()[0], "offset 0: the unsheared force");
    }
    let mut prev: Option<[f64; 3]> = None;
    let mut worst_jump: f64 = 0.0;
    // δ = rate Ly t, t = step h: 0.006 per step; 1200 steps sweep more than one period (7),
    // through the switch of the image offset at Lx/2 and the wrap of δ at Lx
    for step in 0..1200u64 {
        sheared.set_step(step);
        let delta = (rate * l[1] * (step as f64 * h)).rem_euclid(l[0]);
        let f = sheared.forces_by_tag();
        plain = Md::new(
            system((b[0] + delta).rem_euclid(l[0])),
            lj(2.5),
            MdThermostat::None,
            settings(h, None),
        )
        .unwrap();
        let first = plain.sys.tag.iter().position(|&t| t == 1).unwrap();
        let want = plain.forces()[first];
        for k in 0..3 {
            assert!(
                (f[0][k] - want[k]).abs() <= 1e-12 * (1.0 + want[k].abs()),
                "{p}, δ = {delta}: sheared {:?}, image {want:?}",
                f[0]
            );
            assert_eq!(f[0][k], -f[1][k], "antisymmetric");
        }
        if let Some(q) = prev {
            worst_jump = worst_jump.max((0..3).map(|k| (f[0][k] - q[k]).abs()).fold(0.0, f64::max));
        }
        prev = Some(f[0]);
    }
    println!("{p}: largest change of the force between offsets 0.006 apart: {worst_jump:.3e}");
    assert!(
        worst_jump < 0.5,
        "the force jumps as the offset moves: {worst_jump}"
    );
}

/// Coupled steps with the Lees-Edwards code of the MD engine on (shear rate 0: offset 0, yet
/// the sheared stencils, wrap and image velocities run) keep fluid + solute momentum.
fn fluid_and_solutes_conserve_momentum_with_le_paths_on(p: Platform) {
    let cfg = Config::from_ron_str(
        "(cells: (8, 8, 8), particles_per_cell: 5, time_step: 0.1, collision: Srd(angle_deg: 130.0), \
          seed: 5, steps: 10, tuning: (reorder_interval: 0), md: (steps_per_collision: 5, \
          system: Chains(n_chains: 4, chain_length: 12, bead_mass: 5.0), \
          pair: Wca(epsilon: 1.0, sigma: 1.0), bonds: [Fene(k: 30.0, r0: 1.5)], backend: Cpu))",
    )
    .unwrap();
    let Some(mut solvent) = p.solvent(&cfg) else {
        return;
    };
    let md_cfg = cfg.md.clone().unwrap();
    let base = md_cfg.build(&cfg).unwrap();
    let mut st = base.settings().clone();
    st.shear = Some(ShearFlow {
        rate: 0.0,
        collision_time: 0.1,
        steps_per_collision: 5,
    });
    let mut md = Md::new(base.sys.clone(), base.ff.clone(), base.thermostat, st).unwrap();
    let fluid = solvent.fluid_state().unwrap();
    let scale = (0..3)
        .map(|k| fluid.vel[k].iter().map(|v| v.abs()).sum::<f64>())
        .sum::<f64>()
        + (0..md.sys.len())
            .map(|i| md.sys.mass(i) * md.sys.vel[i].iter().map(|v| v.abs()).sum::<f64>())
            .sum::<f64>();
    let mass = md.sys.masses();
    for k in 0..20 {
        let before = common::fluid_and_solute_momentum(&mut solvent, &md.sys.vel, &mass);
        md.run(5).unwrap();
        let sys = &mut md.sys;
        solvent
            .step_with_solutes(&sys.pos, &mut sys.vel, &mass)
            .unwrap();
        md.velocities_changed().unwrap();
        let after = common::fluid_and_solute_momentum(&mut solvent, &md.sys.vel, &mass);
        common::assert_momentum_kept(before, after, scale, &format!("{p}, coupled step {k}"));
    }
}

/// The DPD fluid of Groot & Warren (ρ = 3, a = 25, γ = 4.5, kT = 1, rc = 1) in a box of `l`.
fn dpd_system(l: [f64; 3], seed: u64) -> (System, ForceField) {
    let n = (3.0 * l[0] * l[1] * l[2]).round() as usize;
    let (_, ff) = common::dpd_fluid_system(8.0, 3.0);
    let mut sys = mpcbox::md::build::random_gas(n, l, 1.0, seed);
    maxwell_velocities(&mut sys, 1.0, seed + 1);
    (sys, ff)
}

/// Shear viscosity of the DPD fluid by Lees-Edwards NEMD on platform p in an 8³ box:
/// (profile slope, viscosity, its block-averaged error), the stress sampled every 10 steps.
fn dpd_lees_edwards(p: Platform, rate: f64, steps: u64, seed: u64) -> (f64, f64, f64) {
    let (sys, ff) = dpd_system([8.0; 3], seed);
    let dt = 0.02;
    let st = settings(dt, Some(ShearFlow::standalone(rate, dt)));
    let mut md = MdEngine::new(p, sys, ff, MdThermostat::None, st);
    md.run(1000);
    let (mut prof, mut cnt) = (vec![0.0; 8], vec![0u64; 8]);
    let mut eta = mpcbox::stats::Series::new(50);
    for _ in 0..steps / 10 {
        md.run(10); // the virial of the last of them
        let virial = match &md {
            MdEngine::Cpu(m) => m.report().virial_tensor,
            MdEngine::Gpu(m) => m.report().virial_tensor,
        };
        let sys = md.system();
        let pxy = mpcbox::md::rheology::pressure_tensor(sys, rate, virial)[3];
        eta.push(-pxy / rate);
        for i in 0..sys.len() {
            let b = (sys.pos[i][1] as usize).min(7);
            prof[b] += sys.vel[i][0];
            cnt[b] += 1;
        }
    }
    let pts: Vec<(f64, f64)> = (0..8)
        .map(|b| (b as f64 + 0.5, prof[b] / cnt[b] as f64))
        .collect();
    let (_, slope, _) = mpcbox::stats::linear_fit(&pts).unwrap();
    (slope, eta.mean().unwrap(), eta.std_error().unwrap())
}

/// The independent measurement: no Lees-Edwards, a transverse body force F sin(k y) on every
/// particle (velocity kicks F dt/m per step) in a 5 × 16 × 5 box, whose steady flow
/// u0 sin(k y) gives η = ρ F / (k² u0). The long y edge keeps k = 2π/16 small (the viscosity
/// of a DPD fluid falls with k: at k = 2π/8 it came out 7% low); the flow starts from the
/// expected profile, so the slow mode (τ = ρ/(η k²) ≈ 23) needs no long transient.
fn dpd_sinusoidal_viscosity(steps: u64) -> (f64, f64) {
    let l = [5.0, 16.0, 5.0];
    let (sys, ff) = dpd_system(l, 32);
    let (dt, force, rho) = (0.02, 0.045, 3.0);
    let k = 2.0 * std::f64::consts::PI / l[1];
    let mut md = Md::new(sys, ff, MdThermostat::None, settings(dt, None)).unwrap();
    let u_guess = rho * force / (k * k * 0.86);
    for i in 0..md.sys.len() {
        md.sys.vel[i][0] += u_guess * (k * md.sys.pos[i][1]).sin();
    }
    md.velocities_changed().unwrap();
    let kick = |md: &mut Md| {
        for i in 0..md.sys.len() {
            md.sys.vel[i][0] += force * dt * (k * md.sys.pos[i][1]).sin();
        }
    };
    for _ in 0..1000 {
        kick(&mut md);
        md.step().unwrap();
    }
    let mut u0 = mpcbox::stats::Series::new(50);
    for s in 0..steps {
        kick(&mut md);
        md.step().unwrap();
        if s % 10 == 0 {
            let n = md.sys.len() as f64;
            let proj: f64 = (0..md.sys.len())
                .map(|i| md.sys.vel[i][0] * (k * md.sys.pos[i][1]).sin())
                .sum();
            u0.push(2.0 * proj / n);
        }
    }
    let (u, e) = (u0.mean().unwrap(), u0.std_error().unwrap());
    let eta = rho * force / (k * k * u);
    (eta, eta * e / u)
}

/// Four independent Lees-Edwards runs (seeds 31-34): one run's viscosity scatters by about 4%
/// from seed to seed (measured over 8 runs on the CPU and a GPU: 0.82 to 0.92, more than its
/// block-averaged error says), so the test compares their mean (about ±2%) with the
/// independent value, to 5%. Both engines are deterministic (no atomics in the MD forces), so
/// each instance gives the same figures every run: CPU 0.846, GPU 0.839, against 0.851.
fn dpd_fluid_under_shear_has_the_independent_viscosity(p: Platform) {
    let rate = 0.3;
    let runs: Vec<(f64, f64, f64)> = (31..35)
        .map(|seed| dpd_lees_edwards(p, rate, 12000, seed))
        .collect();
    let etas: Vec<f64> = runs.iter().map(|r| r.1).collect();
    let mean = etas.iter().sum::<f64>() / etas.len() as f64;
    let spread =
        (etas.iter().map(|e| (e - mean).powi(2)).sum::<f64>() / (etas.len() as f64 - 1.0)).sqrt();
    let (eta_sin, err_sin) = dpd_sinusoidal_viscosity(12000);
    println!(
        "{p}: DPD under shear: η = {mean:.4} ± {:.4} (runs {etas:.4?}, slopes {:.4?}, imposed \
         {rate}); sinusoidal forcing: η = {eta_sin:.4} ± {err_sin:.4}",
        spread / (etas.len() as f64).sqrt(),
        runs.iter().map(|r| r.0).collect::<Vec<_>>()
    );
    for (slope, _, _) in &runs {
        assert!((slope / rate - 1.0).abs() < 0.03, "slope {slope}");
    }
    assert!(
        (mean / eta_sin - 1.0).abs() < 0.05,
        "η {mean} (runs {etas:?}) against {eta_sin}"
    );
}

/// Velocities by tag, positions by tag.
fn by_tag(sys: &System) -> Vec<([f64; 3], [f64; 3])> {
    let mut order: Vec<usize> = (0..sys.len()).collect();
    order.sort_unstable_by_key(|&i| sys.tag[i]);
    order
        .into_iter()
        .map(|i| (sys.pos[i], sys.vel[i]))
        .collect()
}

/// The sheared DPD fluid of the viscosity test on platform p and on the CPU from the same
/// start: for 60 steps (particles cross the sheared boundary) the velocities and the virial
/// tensor each report agree to rounding (only the order of the sums differs).
fn dpd_under_shear_follows_the_cpu_step_by_step(p: Platform) {
    let (sys, ff) = dpd_system([8.0; 3], 31);
    let dt = 0.02;
    let st = settings(dt, Some(ShearFlow::standalone(0.3, dt)));
    let mut cpu = MdEngine::new(
        Platform::Cpu,
        sys.clone(),
        ff.clone(),
        MdThermostat::None,
        st.clone(),
    );
    let mut dev = MdEngine::new(p, sys, ff, MdThermostat::None, st);
    for k in 0..6 {
        cpu.run(10);
        dev.run(10);
        let tensor = |m: &MdEngine| match m {
            MdEngine::Cpu(m) => m.report().virial_tensor,
            MdEngine::Gpu(m) => m.report().virial_tensor,
        };
        let (tc, td) = (tensor(&cpu), tensor(&dev));
        let scale = tc.iter().map(|x| x.abs()).fold(0.0, f64::max);
        for c in 0..6 {
            assert!(
                (tc[c] - td[c]).abs() < 1e-9 * scale,
                "{p}, step {}: virial tensor component {c}: {} against the CPU's {}",
                10 * (k + 1),
                td[c],
                tc[c]
            );
        }
        let (a, b) = (by_tag(cpu.system()), by_tag(dev.system()));
        let dv = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (0..3).map(|c| (x.1[c] - y.1[c]).abs()).fold(0.0, f64::max))
            .fold(0.0, f64::max);
        assert!(
            dv < 1e-9,
            "{p}, step {}: velocities differ by {dv}",
            10 * (k + 1)
        );
        println!(
            "{p}, step {}: virial xy {} vs {}, max |dv| {dv:.2e}",
            10 * (k + 1),
            td[3],
            tc[3]
        );
    }
}
