//! Bead-spring chains in an MPC solvent through the public `Solvent::step_with_solutes` API.

use mpcbox::config::{Config, Thermostat};
use mpcbox::md::coupled::Coupling;
use mpcbox::md::observe::max_bond_length;
use mpcbox::Solvent;

fn config(md: &str, thermostat: &str) -> Config {
    Config::from_ron_str(&format!(
        "(cells: (8, 8, 8), particles_per_cell: 5, time_step: 0.1, \
          collision: Srd(angle_deg: 130.0), thermostat: {thermostat}, seed: 17, steps: 10, \
          device: Cpu, output: (observable_interval: 0), md: ({md}))"
    ))
    .expect("valid config")
}

const CHAINS: &str = "steps_per_collision: 5, \
    system: Chains(n_chains: 4, chain_length: 12, bead_mass: 5.0), \
    pair: Wca(epsilon: 1.0, sigma: 1.0), bonds: [Fene(k: 30.0, r0: 1.5)]";

fn norm(p: [f64; 3]) -> f64 {
    (p[0] * p[0] + p[1] * p[1] + p[2] * p[2]).sqrt()
}

/// Without thermostat or shear, N MD steps plus one collision conserve fluid + solute momentum.
#[test]
fn coupled_steps_conserve_total_momentum() {
    let cfg = config(CHAINS, "None");
    assert_eq!(cfg.thermostat, Thermostat::None);
    let md_cfg = cfg.md.clone().unwrap();
    let mut solvent = Solvent::new(cfg.clone()).unwrap();
    let mut md = md_cfg.build(&cfg).unwrap();
    let n_md = md_cfg.steps_per_collision as u64;
    assert!((md.settings().dt - 0.1 / 5.0).abs() < 1e-15);
    let total = |solvent: &mut Solvent, md: &mpcbox::md::Md| {
        let f = solvent.observables().unwrap().momentum;
        let s = md.momentum();
        [f[0] + s[0], f[1] + s[1], f[2] + s[2]]
    };
    let st = solvent.fluid_state().unwrap();
    let scale: f64 = (0..3)
        .map(|k| st.vel[k].iter().map(|v| v.abs()).sum::<f64>() * cfg.mass)
        .sum::<f64>()
        + (0..md.sys.len())
            .map(|i| md.sys.mass(i) * md.sys.vel[i].iter().map(|v| v.abs()).sum::<f64>())
            .sum::<f64>();
    let p_start_solute = md.momentum();
    let mut worst: f64 = 0.0;
    for _ in 0..30 {
        let before = total(&mut solvent, &md);
        md.run(n_md).unwrap();
        let mass = md.sys.masses();
        let sys = &mut md.sys;
        solvent
            .step_with_solutes(&sys.pos, &mut sys.vel, &mass)
            .unwrap();
        let after = total(&mut solvent, &md);
        let d = norm([
            after[0] - before[0],
            after[1] - before[1],
            after[2] - before[2],
        ]);
        worst = worst.max(d / scale);
    }
    let exchanged = norm({
        let p = md.momentum();
        [
            p[0] - p_start_solute[0],
            p[1] - p_start_solute[1],
            p[2] - p_start_solute[2],
        ]
    });
    println!("relative momentum change per coupled step: {worst:e}; solute momentum exchanged {exchanged:.3}");
    assert!(
        worst <= 1e-12,
        "total momentum changed by {worst} (relative)"
    );
    // the collision really couples: the solutes exchanged momentum with the fluid
    assert!(exchanged > 1e-3 * scale / (cfg.n_fluid() as f64).sqrt());
    assert!(max_bond_length(&md.sys) < 1.5);
}

/// A thermostatted run: chains stay intact (every FENE bond below R0), beads reach kT, the
/// chain centres of mass diffuse.
#[test]
fn chains_stay_intact_and_thermalise() {
    let cfg = config(CHAINS, "Mbs");
    let mut solvent = Solvent::new(cfg.clone()).unwrap();
    let mut c = Coupling::new(cfg.md.as_ref().unwrap(), &solvent).unwrap();
    let mut t_sum = 0.0;
    let mut max_bond: f64 = 0.0;
    for k in 0..300 {
        c.step(&mut solvent).unwrap();
        max_bond = max_bond.max(max_bond_length(c.system().unwrap()));
        if k >= 100 {
            t_sum += c.temperature().unwrap();
        }
    }
    let t = t_sum / 200.0;
    let s = c.chain_sample().unwrap();
    println!(
        "beads kT = {t:.3}, Rg = {:.3}, MSD = {:.3}, max bond {max_bond:.3}",
        s.rg_mean, s.com_msd
    );
    assert!(max_bond < 1.5, "a FENE bond reached {max_bond}");
    assert_eq!(s.chains, 4);
    assert_eq!(c.system().unwrap().bonds.len(), 4 * 11);
    assert!((t - 1.0).abs() < 0.1, "bead temperature {t}");
    assert!(s.rg_mean > 1.0 && s.rg_mean < 6.0, "Rg {}", s.rg_mean);
    assert!(s.com_msd > 0.0);
}

/// The shipped data file and example config load and run.
#[test]
fn example_files_load_and_run() {
    let cfg = Config::from_file(std::path::Path::new("examples/polymer_in_solvent.ron")).unwrap();
    let md = cfg.md.clone().unwrap();
    assert_eq!(md.steps_per_collision, 10);
    let mut cfg = cfg;
    cfg.md = Some(mpcbox::md::MdConfig {
        system: mpcbox::md::from_config::SystemSpec::DataFile {
            path: "examples/two_chains.data".into(),
            atom_style: None,
        },
        ..md
    });
    cfg.particles_per_cell = 3;
    let mut solvent = Solvent::new(cfg.clone()).unwrap();
    let mut c = Coupling::new(cfg.md.as_ref().unwrap(), &solvent).unwrap();
    assert_eq!(c.system().unwrap().len(), 24);
    for _ in 0..20 {
        c.step(&mut solvent).unwrap();
    }
    assert!(max_bond_length(c.system().unwrap()) < 1.5);
}

#[test]
fn cli_runs_polymer_example_and_writes_md_output() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(crate::common::mpcbox_bin())
        .args([
            "run",
            "examples/polymer_in_solvent.ron",
            "--steps",
            "40",
            "--quiet",
            "-o",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = std::fs::read_to_string(dir.path().join("md.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 4);
    assert!(csv.starts_with("mpc_step,time,"));
    let xyz = std::fs::read_to_string(dir.path().join("trajectory.xyz")).unwrap();
    let mut lines = xyz.lines();
    assert_eq!(lines.next(), Some("256"));
    assert!(lines
        .next()
        .unwrap()
        .contains("Properties=species:S:1:pos:R:3"));
    // frames at MPC steps 0, 20, 40
    assert_eq!(xyz.lines().count(), 3 * (256 + 2));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("md_summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["md_steps"], 400);
    assert!(summary["chains"]["max_bond"].as_f64().unwrap() < 1.5);
}

/// A coupled run from an engine built of a system placed once (`MdConfig::build_with`,
/// `Coupling::with_md`, as benchmarks of millions of beads do), and from a clone of that engine
/// (built once for several timings), is the run `Coupling::new` makes: bit for bit on the CPU
/// after 10 collisions.
#[test]
fn a_coupling_from_a_system_placed_once_is_the_same_run() {
    let cfg = config(CHAINS, "Mbs");
    let md_cfg = cfg.md.clone().unwrap();
    let sys = md_cfg.system(&cfg).unwrap();
    let run = |coupling: &dyn Fn(&Solvent) -> Coupling| {
        let mut solvent = Solvent::new(cfg.clone()).unwrap();
        let mut c = coupling(&solvent);
        for _ in 0..10 {
            c.step(&mut solvent).unwrap();
        }
        let s = c.system().unwrap();
        (s.pos.clone(), s.vel.clone(), solvent.fluid_state().unwrap())
    };
    let fresh = run(&|s| Coupling::new(&md_cfg, s).unwrap());
    let placed = run(&|s| {
        let md = md_cfg.build_with(&cfg, sys.clone()).unwrap();
        Coupling::with_md(&md_cfg, s, md).unwrap()
    });
    assert_eq!(fresh.0, placed.0, "bead positions");
    assert_eq!(fresh.1, placed.1, "bead velocities");
    assert_eq!(fresh.2, placed.2, "fluid");
    let built = md_cfg.build_with(&cfg, sys.clone()).unwrap();
    let cloned = run(&|s| Coupling::with_md(&md_cfg, s, built.clone()).unwrap());
    assert_eq!(fresh.0, cloned.0, "bead positions, cloned engine");
    assert_eq!(fresh.1, cloned.1, "bead velocities, cloned engine");
    assert_eq!(fresh.2, cloned.2, "fluid, cloned engine");
}
