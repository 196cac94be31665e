//! The bundled MD engine between walls: the solutes' WCA wall potential (force −dU/dd along the
//! wall normal, nothing beyond 2^(1/6) σ), chains placed between the walls, the MD box padded
//! across the channel, beads that stay in the channel through a coupled run while the fluid
//! and the beads collide near the walls, a bead that reaches a wall refused; the GPU engine
//! against the CPU engine.

use std::collections::HashMap;

use mpcbox::config::DeviceChoice;
use mpcbox::md::coupled::Coupling;
use mpcbox::md::walls::{wall_pass, WallPotential};
use mpcbox::md::{GpuMd, MdBackend, System};
use mpcbox::physics::walls::WallShape;
use mpcbox::{Config, Solvent};

/// The slits (plates normal to y and to z), the pipe, a pore and a wavy channel the tests run
/// between.
const WALLS: [&str; 5] = [
    "Slit()",
    "Slit(normal: Z)",
    "Pipe(radius: 5.5)",
    "PlanarPore(height: 8.0, length: 6.0)",
    "CosineChannel(height: 8.0, amplitude: 1.5)",
];

/// Chains in a slit (or a pipe) of a 12 × 14 × 12 box, coupled to the fluid (CPU).
fn chains_between_walls(walls: &str, backend: &str) -> Config {
    chains_of(walls, backend, 12)
}

/// As [`chains_between_walls`] with chains of `length` beads.
fn chains_of(walls: &str, backend: &str, length: usize) -> Config {
    let mut cfg = Config::from_ron_str(&format!(
        "(cells: (12, 14, 12), particles_per_cell: 5, time_step: 0.1, thermostat: Mbs, \
          collision: Srd(angle_deg: 130.0), steps: 100, seed: 21, device: Cpu, \
          body_force: (0.05, 0.0, 0.0), walls: {walls}, \
          md: (steps_per_collision: 10, system: Chains(n_chains: 6, chain_length: {length}, \
          bead_mass: 5.0), pair: Wca(epsilon: 1.0, sigma: 1.0), bonds: [Fene(k: 30.0, r0: 1.5)], \
          backend: {backend}, observable_interval: 0))"
    ))
    .expect("test config is valid");
    cfg.output.observable_interval = 0;
    cfg
}

fn walls_of(cfg: &Config) -> WallPotential {
    WallPotential::from_config(cfg).expect("walls")
}

/// Every bead of `sys` is at least `clearance` inside the walls.
fn assert_beads_inside(sys: &System, w: &WallPotential, clearance: f64, what: &str) {
    for i in 0..sys.len() {
        let d = w.shape.signed_distance(sys.pos[i]);
        assert!(
            d >= clearance,
            "{what}: bead {} at {:?}, {d} from the wall",
            sys.tag[i],
            sys.pos[i]
        );
    }
}

#[test]
fn wall_force_is_minus_the_derivative_of_the_wca_energy() {
    for walls in [
        "Slit(solutes: (epsilon: 1.5, sigma: 0.9))",
        "Slit(normal: Z, solutes: (epsilon: 1.5, sigma: 0.9))",
        "Pipe(radius: 5.5)",
        "PlanarPore(height: 8.0, length: 6.0)",
    ] {
        let cfg = chains_between_walls(walls, "Cpu");
        let w = walls_of(&cfg);
        let energy = |p: [f64; 3]| w.force(p).unwrap().map_or(0.0, |(_, e)| e);
        // points at distances 0.3 .. 1.3 σ from the wall, near the bottom and the top
        for (y, z) in [(1.0, 5.0), (1.4, 6.3), (12.3, 6.0), (6.9, 11.2), (4.0, 1.3)] {
            let p = [2.0, y, z];
            let Ok(Some((f, e))) = w.force(p) else {
                assert!(
                    w.shape.signed_distance(p) >= w.cutoff || w.shape.signed_distance(p) <= 0.0
                );
                continue;
            };
            assert!(e > 0.0);
            for k in 0..3 {
                let dx = 1e-6;
                let (mut a, mut b) = (p, p);
                a[k] += dx;
                b[k] -= dx;
                let numeric = -(energy(a) - energy(b)) / (2.0 * dx);
                assert!(
                    (numeric - f[k]).abs() <= 1e-5 * f[k].abs().max(1.0),
                    "{walls} at {p:?}, component {k}: {} vs −dU/dx {numeric}",
                    f[k]
                );
            }
        }
        // nothing beyond the cutoff, an error on the surface
        let (centre, across) = match &w.shape {
            mpcbox::physics::walls::Shape::Slit(s) => {
                let mut c = [1.0; 3];
                c[s.axis()] = 0.5 * (s.bottom + s.top);
                (c, s.axis())
            }
            mpcbox::physics::walls::Shape::Pipe(p) => ([1.0, p.centre[0], p.centre[1]], 1),
            mpcbox::physics::walls::Shape::Sphere(s) => (s.centre, 1),
            // in the pore's middle, and at the cosine walls' crest (no slope: the scaled gap
            // is the distance along y)
            mpcbox::physics::walls::Shape::PlanarPore(p) => ([p.xc, p.yc, 1.0], 1),
            mpcbox::physics::walls::Shape::Cosine(c) => ([0.0, c.yc, 1.0], 1),
            mpcbox::physics::walls::Shape::Field(_) => unreachable!("analytic shapes only"),
        };
        assert_eq!(w.force(centre), Ok(None));
        let mut on_wall = centre;
        on_wall[across] -= w.shape.signed_distance(centre);
        assert!(w.force(on_wall).is_err());
    }
}

#[test]
fn chains_start_between_the_walls_in_a_padded_box() {
    for walls in WALLS {
        let cfg = chains_between_walls(walls, "Cpu");
        let md = cfg.md.as_ref().unwrap().build(&cfg).unwrap();
        let w = walls_of(&cfg);
        assert_beads_inside(&md.sys, &w, w.cutoff, walls);
        assert_eq!(md.walls(), Some(&w));
        // across the channel the box is longer than the fluid's by more than cutoff + skin
        for (k, closed) in w.shape.closed_axes().into_iter().enumerate() {
            let extra = md.sys.box_len[k] - cfg.cells[k] as f64;
            if closed {
                assert!(
                    extra > md.cutoff() + cfg.md.as_ref().unwrap().skin,
                    "{walls}: {extra}"
                );
            } else {
                assert_eq!(extra, 0.0);
            }
        }
        // no wall energy at the start (every bead beyond the cutoff)
        assert_eq!(md.report().wall_energy, 0.0);
    }
}

/// Chains driven along each of `WALLS` for 60 collisions (600 MD steps): no bead and
/// no fluid particle ever inside a wall, some beads met the wall potential, the solvent held
/// the temperature.
#[test]
fn coupled_chains_stay_in_the_channel() {
    for walls in WALLS {
        let cfg = chains_between_walls(walls, "Cpu");
        let mut solvent = Solvent::new(cfg.clone()).unwrap();
        let mut c = Coupling::new(cfg.md.as_ref().unwrap(), &solvent).unwrap();
        let w = walls_of(&cfg);
        let shape = solvent.physics().walls.clone().unwrap().shape;
        let mut touched = 0;
        for step in 0..60 {
            c.step(&mut solvent).unwrap();
            let sys = c.system().unwrap();
            assert_beads_inside(sys, &w, 0.0, &format!("{walls}, step {step}"));
            touched += (0..sys.len())
                .filter(|&i| w.shape.signed_distance(sys.pos[i]) < w.cutoff)
                .count();
            if step % 20 == 19 {
                let st = solvent.fluid_state().unwrap();
                for i in 0..st.len() {
                    assert!(shape.signed_distance(st.position(i).map(|x| x as f64)) >= 0.0);
                }
            }
        }
        assert!(touched > 0, "{walls}: no bead ever came near a wall");
        let kt = solvent.observables().unwrap().temperature;
        assert!((kt - 1.0).abs() < 0.05, "{walls}: kT {kt}");
    }
}

/// A bead put on the wall is an error naming the atom and the fix.
#[test]
fn a_bead_on_the_wall_is_an_error() {
    let cfg = chains_of("Slit()", "Cpu", 1);
    let md = cfg.md.as_ref().unwrap().build(&cfg).unwrap();
    let w = walls_of(&cfg);
    let mut sys = md.sys.clone();
    sys.pos[3][1] = 0.5; // the bottom plate
    let mut force = vec![[0.0; 3]; sys.len()];
    let crossing = wall_pass(&mut force, &sys, &w).unwrap_err();
    assert_eq!(crossing.index, 3);
    let mut md = md;
    md.sys.pos[3][1] = 0.4;
    let e = md.compute_forces().unwrap_err().to_string();
    assert!(e.contains("reached the wall") && e.contains("fix:"), "{e}");
}

/// max |a − b| / max |a|.
fn rel_diff(a: &[[f64; 3]], b: &[[f64; 3]]) -> f64 {
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        for k in 0..3 {
            num = num.max((x[k] - y[k]).abs());
            den = den.max(x[k].abs());
        }
    }
    num / den.max(f64::MIN_POSITIVE)
}

fn by_tag(reference: &System, sys: &System, v: &[[f64; 3]]) -> Vec<[f64; 3]> {
    let at: HashMap<u32, usize> = sys.tag.iter().enumerate().map(|(i, &t)| (t, i)).collect();
    reference.tag.iter().map(|t| v[at[t]]).collect()
}

/// The GPU engine between walls follows the CPU engine: forces (with the wall forces) and,
/// after 400 steps of chains pushed against a wall, positions, velocities and energies
/// agree to ≤ 1e-9 relative.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_walls_match_cpu() {
    for (walls, across) in [
        ("Slit(solutes: (epsilon: 2.0, sigma: 1.0))", 1),
        ("Slit(normal: Z, solutes: (epsilon: 2.0, sigma: 1.0))", 2),
        ("Pipe(radius: 5.5)", 1),
    ] {
        let cfg = chains_between_walls(walls, "Cpu");
        let mut cpu = cfg.md.as_ref().unwrap().build(&cfg).unwrap();
        // push the chains towards the bottom of the channel so that they meet the wall
        for v in cpu.sys.vel.iter_mut() {
            v[across] -= 1.0;
        }
        cpu.velocities_changed().unwrap();
        let mut gpu = GpuMd::new(
            cpu.sys.clone(),
            cpu.ff.clone(),
            cpu.thermostat,
            cpu.settings().clone(),
            0,
        )
        .unwrap();
        gpu.set_walls(cpu.walls().cloned()).unwrap();
        cpu.compute_forces().unwrap();
        let gf = gpu.forces().unwrap();
        let df = rel_diff(cpu.forces(), &by_tag(&cpu.sys, gpu.system().unwrap(), &gf));
        cpu.run(400).unwrap();
        gpu.run(400).unwrap();
        let gs = gpu.system().unwrap().clone();
        let dp = rel_diff(&cpu.sys.pos, &by_tag(&cpu.sys, &gs, &gs.pos));
        let dv = rel_diff(&cpu.sys.vel, &by_tag(&cpu.sys, &gs, &gs.vel));
        let (ec, eg) = (cpu.report().wall_energy, gpu.report().wall_energy);
        println!(
            "{walls}: forces {df:.2e}, positions {dp:.2e}, velocities {dv:.2e}, wall energy \
             {ec:.6} vs {eg:.6}"
        );
        assert!(df <= 1e-9 && dp <= 1e-9 && dv <= 1e-9, "{walls}");
        assert!(
            (ec - eg).abs() <= 1e-9 * ec.abs().max(1.0),
            "{walls}: {ec} vs {eg}"
        );
    }
}

/// A coupled run between walls with the GPU MD engine and the fluid on the GPU (beads handed
/// over on the device) keeps every bead in the channel, as the CPU run does.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_coupled_chains_stay_in_the_channel() {
    for walls in WALLS {
        let mut cfg = chains_between_walls(walls, "Cuda");
        cfg.device = DeviceChoice::Cuda(vec![0]);
        let mut solvent = Solvent::new(cfg.clone()).unwrap();
        let mut c = Coupling::new(cfg.md.as_ref().unwrap(), &solvent).unwrap();
        assert!(c.md_on_gpu());
        assert_eq!(cfg.md.as_ref().unwrap().backend, MdBackend::Cuda);
        let w = walls_of(&cfg);
        for step in 0..60 {
            c.step(&mut solvent).unwrap();
            if step % 10 == 9 {
                assert_beads_inside(c.system().unwrap(), &w, 0.0, &format!("{walls}, {step}"));
            }
        }
    }
}
