//! Verlet lists under Lees-Edwards shear: the rebuild criterion measures each
//! particle's displacement relative to the imposed flow (exact for particles that crossed the
//! sheared y boundary; `PeriodicBox::flow_displacement2`), so a sheared list never misses a
//! pair within the cutoff and is rebuilt about as often as without shear.
//!
//! System: the DPD fluid of Groot & Warren (ρ = 3, a = 25, γ = 4.5, rc = 1) in a 6 × 16 × 6
//! box (1728 particles), dt = 0.01, skin 0.4, γ̇ = 0.16: the offset moves γ̇ Ly dt = 0.0256
//! per MD step, as in the 256³ polymer benchmark (γ̇ = 0.01, h = 0.1, 10 MD steps per
//! collision), where the previous criterion (2 max|Δr| + 3 |Δδ|) rebuilt every ~4 steps.

use crate::common;

use common::{MdEngine, Platform};
use mpcbox::md::build::{maxwell_velocities, random_gas};
use mpcbox::md::{MdSettings, MdThermostat, NeighborMode, ShearFlow, System};

common::backend_tests!(
    [cpu gpu]
    sheared_list_follows_the_all_pairs_engine,
    sheared_list_holds_every_pair_within_the_cutoff_at_every_step,
    sheared_lists_rebuild_about_as_often_as_unsheared,
);

const BOX: [f64; 3] = [6.0, 16.0, 6.0];
const DT: f64 = 0.01;
const RATE: f64 = 0.16;

fn settings(neighbor: NeighborMode, rate: f64) -> MdSettings {
    MdSettings {
        dt: DT,
        kt: 1.0,
        seed: 21,
        skin: 0.4,
        neighbor,
        reorder_every: 10,
        threads: 0,
        shear: (rate != 0.0).then(|| ShearFlow::standalone(rate, DT)),
    }
}

/// An equilibrated DPD fluid carrying the linear shear profile of `rate`.
fn sheared_dpd(p: Platform, rate: f64) -> MdEngine {
    let n = (3.0 * BOX[0] * BOX[1] * BOX[2]) as usize;
    let (_, ff) = common::dpd_fluid_system(6.0, 3.0);
    let mut sys: System = random_gas(n, BOX, 1.0, 8);
    maxwell_velocities(&mut sys, 1.0, 9);
    for i in 0..n {
        sys.vel[i][0] += rate * (sys.pos[i][1] - 0.5 * BOX[1]);
    }
    let thermostat = MdThermostat::None; // the DPD pair style is its own thermostat
    let mut md = MdEngine::new(p, sys, ff, thermostat, settings(NeighborMode::Verlet, rate));
    md.run(300);
    md
}

/// Positions and velocities in tag order.
fn by_tag(sys: &System) -> Vec<([f64; 3], [f64; 3])> {
    let mut v: Vec<(u32, [f64; 3], [f64; 3])> = (0..sys.len())
        .map(|i| (sys.tag[i], sys.pos[i], sys.vel[i]))
        .collect();
    v.sort_unstable_by_key(|e| e.0);
    v.into_iter().map(|(_, p, u)| (p, u)).collect()
}

/// The sheared Verlet-list engine and an all-pairs engine (no list: every pair is examined
/// every step) started from the same state stay together over 400 steps with about 25 list
/// rebuilds and hundreds of boundary crossings: a pair missed for a single step would kick two
/// particles apart by up to a (1 − r) dt ~ 1e-2 in velocity. Tolerance 1e-5: both engines sum
/// the same forces in different orders (rounding, ~1e-15), amplified by the fluid's chaos over
/// 4 time units (to ~1e-7 measured on the CPU).
fn sheared_list_follows_the_all_pairs_engine(p: Platform) {
    let mut list = sheared_dpd(p, RATE);
    let sys = list.system().clone();
    let (_, ff) = common::dpd_fluid_system(6.0, 3.0);
    let mut all = MdEngine::new(
        p,
        sys.clone(),
        ff,
        MdThermostat::None,
        settings(NeighborMode::AllPairs, RATE),
    );
    // both at the list engine's clock (the Lees-Edwards offset of its step)
    let step0 = match &list {
        MdEngine::Cpu(m) => m.step_count(),
        MdEngine::Gpu(m) => m.step_count(),
    };
    list.set_step(step0);
    all.set_step(step0);
    let builds0 = list.list_builds();
    let crossings0: i64 = sys.image.iter().map(|im| im[1].abs() as i64).sum();
    let mut worst: f64 = 0.0;
    for _ in 0..40 {
        list.run(10);
        all.run(10);
        let (a, b) = (by_tag(list.system()), by_tag(all.system()));
        for ((pa, va), (pb, vb)) in a.iter().zip(&b) {
            for k in 0..3 {
                let mut dp = (pa[k] - pb[k]).abs();
                dp = dp.min(BOX[k] - dp); // a wrap that rounding put on the other side
                worst = worst.max(dp).max((va[k] - vb[k]).abs());
            }
        }
    }
    let builds = list.list_builds() - builds0;
    let crossings: i64 = list
        .system()
        .image
        .iter()
        .map(|im| im[1].abs() as i64)
        .sum::<i64>()
        - crossings0;
    println!(
        "{p}: 400 sheared steps, {builds} list builds, {crossings} net y crossings, \
         largest deviation from all pairs {worst:e}"
    );
    assert!(
        builds >= 5,
        "only {builds} list builds: the test exercises nothing"
    );
    assert!(
        crossings > 20,
        "only {crossings} crossings of the sheared boundary"
    );
    assert!(
        worst < 1e-5,
        "the list engine left the all-pairs one: {worst:e}"
    );
}

/// List builds per MD step with and without shear, same fluid, 2000 steps each: within 1.3×
/// (the previous criterion, which counted 3 |Δδ| against the skin, rebuilt every ~4 steps at
/// this offset speed).
fn sheared_lists_rebuild_about_as_often_as_unsheared(p: Platform) {
    let count = |rate: f64| {
        let mut md = sheared_dpd(p, rate);
        let b0 = md.list_builds();
        md.run(2000);
        (md.list_builds() - b0) as f64 / 2000.0
    };
    let (still, sheared) = (count(0.0), count(RATE));
    println!(
        "{p}: list builds per MD step {still:.4} without shear, {sheared:.4} at γ̇ = {RATE} \
         (ratio {:.3}; every {:.1} steps)",
        sheared / still,
        1.0 / sheared
    );
    assert!(still > 0.0);
    assert!(
        sheared <= 1.3 * still,
        "sheared lists rebuilt {:.2}× as often as unsheared",
        sheared / still
    );
}

/// The strongest form, where the list can be read (the CPU engine; the GPU engine follows the
/// CPU step by step in tests/suite/md_shear.rs): after every one of 400 sheared MD steps, every pair
/// within the cutoff (sheared minimum image, all pairs examined) is in the list.
fn sheared_list_holds_every_pair_within_the_cutoff_at_every_step(p: Platform) {
    let MdEngine::Cpu(mut md) = sheared_dpd(p, RATE) else {
        println!("{p}: the GPU engine's list is checked through the all-pairs comparison");
        return;
    };
    let rc2 = md.cutoff() * md.cutoff();
    let builds0 = md.list_builds();
    let mut pairs_checked = 0u64;
    for step in 0..400 {
        md.run(1).unwrap();
        let bx = md.sys.periodic_box();
        let n = md.sys.len();
        for i in 0..n {
            let listed = md.neighbors(i);
            for j in 0..n {
                if j != i && bx.distance2(md.sys.pos[i], md.sys.pos[j]) < rc2 {
                    pairs_checked += 1;
                    assert!(
                        listed.contains(&(j as u32)),
                        "step {step}: pair {i}-{j} within the cutoff is missing from the list"
                    );
                }
            }
        }
    }
    let builds = md.list_builds() - builds0;
    println!("{p}: {pairs_checked} pair-steps within the cutoff checked, {builds} list builds");
    assert!(builds >= 5 && pairs_checked > 1_000_000);
}
