//! Start-up: the initial fluid drawn on the GPUs (each slab its own layers' particles) is the
//! CPU's `FluidState::initial` bit for bit, with and without the steady shear profile; the run
//! reports its start-up phases; slabs that identify particles by place (`MPCBOX_SLAB_IDS`, the
//! path of boxes past 2³² particles) checkpoint and resume.

use std::process::Command;

use crate::common;

use common::Platform;
use mpcbox::config::InitialFlow;
use mpcbox::state::FluidState;

common::backend_tests!(
    [cpu cpu_slabs gpu multi_gpu slabs]
    the_initial_fluid_is_the_cpus_bit_for_bit,
);

common::backend_tests!([cpu gpu] the_first_step_sorts_the_fluid_by_cell,);

/// The initial fluid lies in memory in random order (each particle drawn anywhere in the box);
/// the first step sorts it by cell, as later steps keep it, so that a run's first steps are not
/// slower than the rest: after step 0 the particles lie in the order of the cells they were
/// binned in (no grid shift here, so the cell of the position held).
fn the_first_step_sorts_the_fluid_by_cell(p: Platform) {
    let mut cfg = common::small_config([8, 6, 5], 10);
    cfg.grid_shift = false;
    let Some(mut s) = p.solvent(&cfg) else {
        return;
    };
    let plan = s.physics().plan(0, false, false);
    let in_order = |s: &mut mpcbox::Solvent| {
        let f = s.fluid_state().unwrap();
        let cells: Vec<u32> = (0..f.len())
            .map(|i| {
                let r = [0, 1, 2].map(|k| f64::from(f.pos[k][i]));
                s.physics().locate(&plan, r).cell
            })
            .collect();
        let sorted = cells.windows(2).filter(|w| w[0] <= w[1]).count();
        sorted as f64 / (cells.len() - 1) as f64
    };
    let before = in_order(&mut s);
    assert!(
        before < 0.6,
        "the initial fluid is already in cell order ({before})"
    );
    s.step().unwrap();
    assert_eq!(in_order(&mut s), 1.0, "after the first step");
}

fn the_initial_fluid_is_the_cpus_bit_for_bit(p: Platform) {
    for steady in [false, true] {
        let mut cfg = common::sheared_config([10, 24, 8], 41);
        if steady {
            cfg.initial_flow = InitialFlow::Steady;
        }
        let Some(mut s) = p.solvent(&cfg) else {
            return;
        };
        let got = s.fluid_state().unwrap();
        assert!(
            got == FluidState::initial(&cfg),
            "{p}, steady {steady}: the initial fluid differs from the CPU's"
        );
    }
}

/// `summary.json` names the start-up's phases and their times.
#[test]
fn a_run_reports_its_start_up_and_where_its_time_went() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let c = crate::faults::config(dir.path(), "s.ron", &out, 6, ", checkpoint_interval: 3");
    let o = crate::faults::run(&["run", c.to_str().unwrap(), "--quiet"]);
    assert!(o.status.success(), "{}", crate::faults::stderr(&o));
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let t = &s["timing"];
    assert!(t["startup_seconds"].as_f64().unwrap() > 0.0, "{t}");
    let phases = t["startup_phases"].as_array().unwrap();
    assert!(
        phases
            .iter()
            .any(|p| p["name"] == "draw the fluid on the host"),
        "{t}"
    );
    assert!(t["stepping_seconds"].as_f64().unwrap() > 0.0, "{t}");
    assert_eq!(t["checkpoints"]["written"], 2, "{t}");
    assert!(
        t["peak_host_memory_bytes"].as_u64().unwrap() > 1 << 20,
        "{t}"
    );
}

/// Four slabs without labels (particles by place) on the GPUs: a checkpoint lists every
/// particle once, and a run with labels resumes it.
#[test]
#[ignore = "needs a CUDA GPU"]
fn slabs_without_labels_checkpoint_and_resume() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let c = dir.path().join("p.ron");
    std::fs::write(
        &c,
        format!(
            "(cells: (12, 48, 12), particles_per_cell: 10, time_step: 0.1, seed: 9, \
             collision: Srd(angle_deg: 130.0), shear_rate: 0.05, steps: 20, device: Cuda([0]), \
             tuning: (slabs: 4), output: (checkpoint_interval: 10, directory: \"{}\"))",
            out.display()
        ),
    )
    .unwrap();
    let bin = crate::common::mpcbox_bin();
    let o = Command::new(&bin)
        .args(["run", c.to_str().unwrap(), "--quiet"])
        .env("MPCBOX_SLAB_IDS", "places")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ck = out.join("checkpoint.mpcbox");
    let loaded = mpcbox::Checkpoint::load(&ck).unwrap();
    assert_eq!((loaded.step, loaded.fluid.len()), (20, 12 * 48 * 12 * 10));
    let o = Command::new(bin)
        .args([
            "run",
            "--resume",
            ck.to_str().unwrap(),
            "--steps",
            "30",
            "--quiet",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
