//! The MD engine decomposed over the fluid's y slabs (`md::gpu::SlabMd`): each slab
//! integrates the beads in its layers, with current copies of those within a halo of them.
//!
//! Because every bead's neighbour list holds the same neighbours in the same order as in the
//! one-slab GPU engine, a decomposed run must equal the one-slab run *bit for bit*: any stale
//! copy, lost migration or missed list entry shows up as a difference in the last bit at
//! once, and the chaos of a polymer melt amplifies it within a few hundred steps. Energies
//! and virials are sums over slabs, so they agree to rounding (1e-12 relative).
//!
//! Cases: chains longer than a slab (bonds across faces) with and without Lees-Edwards shear;
//! two short chains in a tall box (most slabs empty); chains between slit walls (the padded MD
//! box, beads near the walls in the first and last slab). Each on 2, 3 and 4 slabs, on one GPU
//! and on two where present. Then the coupled run: fluid and MD on N slabs against the one-GPU
//! coupled run, with fluid + bead momentum kept. Faults: a bond longer than the halo, a bead
//! on a wall.

use crate::common;

use mpcbox::backend::cuda::multi::slab_bounds;
use mpcbox::backend::{slab_gpus, SlabPlace};
use mpcbox::config::DeviceChoice;
use mpcbox::md::coupled::Coupling;
use mpcbox::md::gpu::SlabMd;
use mpcbox::md::walls::WallPotential;
use mpcbox::md::{GpuMd, Md, ShearFlow, System};
use mpcbox::physics::walls::WallShape;
use mpcbox::{Config, Solvent};

/// `n_chains` chains of `length` beads in a 12 × 24 × 12 box (WCA + FENE, Langevin-free: the
/// MD conserves momentum), with `walls` (RON, or "None").
fn chains(n_chains: usize, length: usize, walls: &str, bonds: &str) -> Config {
    Config::from_ron_str(&format!(
        "(cells: (12, 24, 12), particles_per_cell: 5, time_step: 0.1, thermostat: Mbs, \
          collision: Srd(angle_deg: 130.0), steps: 10, seed: 5, device: Cpu, walls: {walls}, \
          tuning: (reorder_interval: 0), output: (observable_interval: 0), \
          md: (steps_per_collision: 10, \
          system: Chains(n_chains: {n_chains}, chain_length: {length}, bead_mass: 5.0), \
          pair: Wca(epsilon: 1.0, sigma: 1.0), bonds: [{bonds}], backend: Cuda, \
          observable_interval: 0))"
    ))
    .expect("valid test config")
}

const FENE: &str = "Fene(k: 30.0, r0: 1.5)";

fn gpu_sets() -> Vec<Vec<usize>> {
    let n = mpcbox::backend::cuda::probe().expect("needs CUDA GPUs");
    let mut sets = vec![vec![0]];
    if n >= 2 {
        sets.push(vec![0, 1]);
    } else {
        eprintln!("one GPU: the slabs run on GPU 0 only");
    }
    sets
}

/// `slabs` slabs of the fluid's `ly` layers over `gpus`, as the multi-GPU fluid cuts them.
fn places(ly: u32, slabs: usize, gpus: &[usize]) -> Vec<SlabPlace> {
    let b = slab_bounds(ly, slabs);
    let o = slab_gpus(gpus, slabs);
    (0..slabs)
        .map(|k| SlabPlace {
            ordinal: o[k],
            layers: [b[k], b[k + 1]],
            rank: 0,
        })
        .collect()
}

/// The CPU engine of `cfg` (validated, chains placed), optionally sheared.
fn cpu_engine(cfg: &Config, shear: Option<f64>) -> Md {
    let mut md = cfg.md.as_ref().unwrap().build(cfg).unwrap();
    if let Some(rate) = shear {
        let mut s = md.settings().clone();
        s.shear = Some(ShearFlow::standalone(rate, s.dt));
        md = Md::new(md.sys.clone(), md.ff.clone(), md.thermostat, s).unwrap();
    }
    md
}

fn one_slab(md: &Md) -> GpuMd {
    let mut g = GpuMd::new(
        md.sys.clone(),
        md.ff.clone(),
        md.thermostat,
        md.settings().clone(),
        0,
    )
    .unwrap();
    g.set_walls(md.walls().cloned()).unwrap();
    g
}

fn slab_engine(md: &Md, places: &[SlabPlace]) -> mpcbox::Result<SlabMd> {
    SlabMd::new(
        md.sys.clone(),
        md.ff.clone(),
        md.thermostat,
        md.settings().clone(),
        md.walls().cloned(),
        places,
    )
}

/// Positions, velocities and images equal bit for bit (in the common particle order).
fn assert_same_bits(a: &System, b: &System, what: &str) {
    assert_eq!(a.tag, b.tag, "{what}: particle order");
    for i in 0..a.len() {
        let same = (0..3).all(|k| {
            a.pos[i][k].to_bits() == b.pos[i][k].to_bits()
                && a.vel[i][k].to_bits() == b.vel[i][k].to_bits()
                && a.image[i][k] == b.image[i][k]
        });
        assert!(
            same,
            "{what}: particle {i} (tag {}) differs: {:?} {:?} {:?} vs {:?} {:?} {:?}",
            a.tag[i], a.pos[i], a.vel[i], a.image[i], b.pos[i], b.vel[i], b.image[i]
        );
    }
}

fn assert_close(a: f64, b: f64, what: &str) {
    assert!(
        (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1.0),
        "{what}: {a} vs {b}"
    );
}

/// The decomposed engine follows the one-slab engine bit for bit over 400 MD steps (positions,
/// velocities, images, list builds) and sums the same energies and virial to 1e-12, and the
/// same stress sample: the solute pressure reduced per slab to 1e-12 (the slabs' sums add in
/// another order than the one engine's chunks), the conformation and, after its gather, the
/// kinetic tensor bit for bit, for
/// every case on 2, 3 and 4 slabs on one GPU and on two, with the exchanged records pulled
/// by the receiver (2, 4 slabs) and copied to it (3 slabs).
#[test]
#[ignore = "needs a CUDA GPU"]
fn slab_engine_follows_the_one_slab_engine_bit_for_bit() {
    let slit = "Slit(solutes: (epsilon: 1.0, sigma: 1.0))";
    let cases: [(&str, Config, Option<f64>); 4] = [
        (
            "melt of 40 × 30-bead chains",
            chains(40, 30, "None", FENE),
            None,
        ),
        (
            "sheared, γ̇ = 0.05",
            chains(40, 30, "None", FENE),
            Some(0.05),
        ),
        (
            "2 chains, empty slabs",
            chains(2, 10, "None", FENE),
            Some(0.02),
        ),
        ("between slit walls", chains(30, 20, slit, FENE), None),
    ];
    for (name, cfg, shear) in &cases {
        let md = cpu_engine(cfg, *shear);
        let observer = mpcbox::md::observe::ChainObserver::new(&md.sys);
        for gpus in gpu_sets() {
            for n in 2..=4 {
                // 3 slabs copy the exchanged records to the receiver first; 2 and 4 let it read
                // them where they were packed (the default where its GPU may)
                let how = if n == 3 { "copied" } else { "pulled" };
                let what = format!("{name}, {n} slabs on GPUs {gpus:?}, exchange {how}");
                let mut one = one_slab(&md);
                let mut sl = slab_engine(&md, &places(24, n, &gpus)).unwrap();
                if n == 3 {
                    sl.copy_exchanges();
                }
                let describe = sl.describe();
                assert!(
                    describe.contains(&format!("exchange {how}")),
                    "{what}: {describe}"
                );
                let p0 = sl.momentum().unwrap();
                for round in 0..8 {
                    one.run(50).unwrap();
                    sl.advance(50, true).unwrap();
                    let w = format!("{what}, after {} steps", 50 * (round + 1));
                    // the stress sample's reductions against the one-slab engine's (the CPU's
                    // bits): the pressure per slab with no gather (asked before anything
                    // gathers; its sums add in another order: 1e-12), the conformation after
                    // a gather into slab 0 and the kinetic part from there (the same bits)
                    let rate = shear.unwrap_or(0.0);
                    let (p_sl, k_sl) = sl.solute_pressure(rate).unwrap();
                    let (p_one, k_one) = one.solute_pressure(rate).unwrap();
                    for k in 0..6 {
                        assert_close(p_sl[k], p_one[k], &format!("{w}: solute pressure {k}"));
                        assert_close(k_sl[k], k_one[k], &format!("{w}: kinetic part {k}"));
                    }
                    let c_sl = sl.conformation().unwrap();
                    assert_eq!(c_sl, one.conformation().unwrap(), "{w}: conformation");
                    let chains = sl.chain_sample(&observer).unwrap();
                    assert_eq!(chains, one.chain_sample(&observer).unwrap(), "{w}: chains");
                    let (_, k_gathered) = sl.solute_pressure(rate).unwrap();
                    assert_eq!(k_gathered, k_one, "{w}: kinetic part after the gather");
                    assert_same_bits(one.system().unwrap(), sl.system().unwrap(), &w);
                    assert_eq!(one.list_builds(), sl.list_builds(), "{w}: list builds");
                    let (a, b) = (one.report(), sl.report());
                    assert_close(a.pair_energy, b.pair_energy, &format!("{w}: pair energy"));
                    assert_close(a.bond_energy, b.bond_energy, &format!("{w}: bond energy"));
                    assert_close(a.wall_energy, b.wall_energy, &format!("{w}: wall energy"));
                    for k in 0..6 {
                        assert_close(
                            a.virial_tensor[k],
                            b.virial_tensor[k],
                            &format!("{w}: virial"),
                        );
                    }
                }
                if shear.is_none() && !name.contains("walls") {
                    // pair and bond forces are antisymmetric: momentum kept to rounding
                    let p1 = sl.momentum().unwrap();
                    let scale = md.sys.len() as f64 * 5.0;
                    common::assert_momentum_kept(p0, p1, scale, &what);
                }
                println!(
                    "{what}: equal after 400 steps, {} list builds",
                    sl.list_builds()
                );
            }
        }
    }
}

/// A harmonic bond whose rest length exceeds the halo is refused, naming the field, once the
/// chains relax to it (the builder places bonded beads ~1 apart), while the one-slab engine
/// runs the same steps.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_bond_longer_than_the_halo_is_refused() {
    let cfg = chains(20, 10, "None", "Harmonic(k: 20.0, r0: 2.6)");
    let md = cpu_engine(&cfg, None);
    let mut one = one_slab(&md);
    one.run(1000).unwrap();
    let run = slab_engine(&md, &places(24, 4, &[0])).and_then(|mut e| e.advance(1000, false));
    let e = match run {
        Ok(()) => panic!(
            "2.6-long bonds across a 1.57 halo (r_cut + 1.5 skin) were accepted for 1000 steps"
        ),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("md.bonds") && e.contains("halo"), "{e}");
}

/// A bead on a wall surface is refused by the slab that owns it with the one-slab engine's
/// message.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_bead_on_a_wall_is_refused_as_on_one_slab() {
    let cfg = chains(10, 10, "Slit(solutes: (epsilon: 1.0, sigma: 1.0))", FENE);
    let mut md = cpu_engine(&cfg, None);
    let w: WallPotential = md.walls().unwrap().clone();
    // move the first chain across y until its bead nearest a wall is just beyond it
    let dist = |p: [f64; 3]| w.shape.signed_distance(p);
    let nearest = (0..10)
        .min_by(|&a, &b| dist(md.sys.pos[a]).total_cmp(&dist(md.sys.pos[b])))
        .unwrap();
    let d = dist(md.sys.pos[nearest]) + 1e-6;
    let mut down = md.sys.pos[nearest];
    down[1] -= d;
    let shift = if dist(down) < 0.0 { -d } else { d };
    for i in 0..10 {
        md.sys.pos[i][1] += shift;
    }
    assert!(
        dist(md.sys.pos[nearest]) < 0.0,
        "bead moved beyond the wall"
    );
    let one = GpuMd::new(
        md.sys.clone(),
        md.ff.clone(),
        md.thermostat,
        md.settings().clone(),
        0,
    )
    .and_then(|mut g| g.set_walls(Some(w)));
    let sl = slab_engine(&md, &places(24, 3, &[0]));
    let (Err(a), Err(b)) = (one, sl) else {
        panic!("a bead on the wall was accepted");
    };
    assert_eq!(a.to_string(), b.to_string());
}

/// The coupled run with fluid and MD on N slabs (N = 2, 3, 4, on one GPU and on two) follows
/// the one-GPU coupled run for 20 collisions (200 MD steps): beads to 1e-9 (the fluid's cell
/// sums round in another order across slabs, amplified by the melt's chaos), fluid to 1e-9;
/// without thermostat or shear, fluid + bead momentum is kept to 1e-12 per collision.
#[test]
#[ignore = "needs a CUDA GPU"]
fn coupled_run_on_slabs_follows_one_gpu() {
    let mut cfg = chains(24, 30, "None", FENE);
    cfg.thermostat = mpcbox::config::Thermostat::None;
    let run = |cfg: Config| {
        let mut s = Solvent::new(cfg.clone()).unwrap();
        let mut c = Coupling::new(cfg.md.as_ref().unwrap(), &s).unwrap();
        let path = c.path_description();
        let mut p = common::coupled_momentum(&mut s, &mut c);
        for step in 0..20 {
            c.step(&mut s).unwrap();
            let q = common::coupled_momentum(&mut s, &mut c);
            let scale = 12.0 * 24.0 * 12.0 * 5.0 + 720.0 * 5.0;
            common::assert_momentum_kept(p, q, scale, &format!("{path}, collision {step}"));
            p = q;
        }
        (path, s.fluid_state().unwrap(), c.system().unwrap().clone())
    };
    let mut one = cfg.clone();
    one.device = DeviceChoice::Cuda(vec![0]);
    let (_, fa, ma) = run(one);
    for gpus in gpu_sets() {
        for n in 2..=4 {
            let mut c = cfg.clone();
            c.device = DeviceChoice::Cuda(gpus.iter().map(|&g| g as u32).collect());
            c.tuning.slabs = n;
            let (path, fb, mb) = run(c);
            let what = format!("{n} slabs on GPUs {gpus:?}");
            assert!(path.contains("decomposed over"), "{what}: {path}");
            common::compare_states(&fa, &fb, 1e-9, &format!("{what}: fluid"));
            common::assert_solute_velocities_close(&ma.vel, &mb.vel, 1e-9, &what);
            common::assert_solute_velocities_close(&ma.pos, &mb.pos, 1e-9, &what);
            println!("{what}: {path}: follows the one-GPU run");
        }
    }
}

/// Over a longer sheared run the decomposed engine gives the one-slab solution: the solution's
/// viscosity and the chains' extension along the flow (gyration tensor G_xx) on 4 slabs of the
/// GPUs present agree with one slab within 3 combined standard errors. Short chains (150 × 4
/// beads) relax within a block of the averages (500 collisions), so the block errors hold; with
/// long chains (16 × 20, tried first) G_xx decorrelated over the whole run and its block errors
/// were 2-3 × too small (1-slab runs on two machines differed by 1.9 σ, a 4-slab run by 4.7 σ).
/// The two runs share their start and drift apart by chaos.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_long_sheared_run_on_slabs_has_the_one_slab_viscosity_and_extension() {
    let mut cfg = chains(150, 4, "None", FENE);
    cfg.shear_rate = 0.05;
    cfg.output.sample_interval = 5;
    cfg.output.equilibration_steps = 500;
    let run = |cfg: Config| {
        let mut s = Solvent::new(cfg.clone()).unwrap();
        let mut c = Coupling::new(cfg.md.as_ref().unwrap(), &s).unwrap();
        let path = c.path_description();
        for _ in 0..6000 {
            c.step(&mut s).unwrap();
        }
        let sol = c.solution_summary(&s).unwrap();
        let ve = |x: &Option<mpcbox::run::ValueWithError>| {
            let x = x.as_ref().expect("sampled");
            (x.value, x.error.expect("enough blocks for an error"))
        };
        (path, ve(&sol.solution_viscosity), ve(&sol.gyration[0]))
    };
    let mut one = cfg.clone();
    one.device = DeviceChoice::Cuda(vec![0]);
    let (_, eta1, gxx1) = run(one);
    let mut four = cfg.clone();
    let gpus = gpu_sets().pop().unwrap();
    four.device = DeviceChoice::Cuda(gpus.iter().map(|&g| g as u32).collect());
    four.tuning.slabs = 4;
    let (path, eta4, gxx4) = run(four);
    assert!(path.contains("decomposed over 4"), "{path}");
    for (what, a, b) in [("solution viscosity", eta1, eta4), ("G_xx", gxx1, gxx4)] {
        let sigma = (a.1 * a.1 + b.1 * b.1).sqrt();
        eprintln!(
            "{what}: 1 slab {:.4} ± {:.4}, 4 slabs {:.4} ± {:.4} ({:.1} σ)",
            a.0,
            a.1,
            b.0,
            b.1,
            (a.0 - b.0).abs() / sigma
        );
        assert!(
            (a.0 - b.0).abs() <= 3.0 * sigma,
            "{what}: 1 slab {a:?}, 4 slabs {b:?} on GPUs {gpus:?}"
        );
    }
}
