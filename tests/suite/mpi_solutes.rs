//! Solutes handed over per MPI rank (`examples/ranks_solutes.rs`, the `mpi` feature): each
//! rank passes its own, wherever they are; mpcbox routes each to the rank owning its cell and
//! its velocity back, equal to one rank's run to rounding, and a bad solute on one rank stops
//! every rank with nothing changed. Built and run as `mpi_ranks.rs` says; `mpi_gpu.rs` runs
//! the routing on GPUs.

use std::path::Path;

use super::mpi_ranks::{mpi_mpcbox, run_ok_with};

/// Solutes handed over per rank (each rank passes its own, wherever they are: `examples/
/// ranks_solutes.rs`, 240 solutes dealt by index, some a period or two away in y): on 2 and 3
/// ranks every solute's velocity after 20 steps equals the 1-rank run's to rounding (1e-9), and
/// fluid + solute momentum is conserved across the ranks (SRD without thermostat).
#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs OpenMPI and libclang (apt-get install openmpi-bin libopenmpi-dev libclang-dev); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn solutes_handed_over_per_rank_are_routed_to_their_cells_and_back() {
    let bin = mpi_mpcbox();
    compare_routed_solutes(bin, &["Cpu"], &[2, 3], &[]);
    assert_few_solutes_are_routed(bin, &["Cpu"]);
}

/// A few solutes (`RANKS_SOLUTES_N`): with 1, rank 0 holds one solute of another rank's cells
/// and the others none; with 5 on 3 ranks, two ranks hold one foreign solute each (the draws
/// fixed by the example's seed). Each as `compare_routed_solutes` checks.
pub(super) fn assert_few_solutes_are_routed(bin: &Path, how: &[&str]) {
    for n in ["1", "5"] {
        compare_routed_solutes(bin, how, &[2, 3], &[("RANKS_SOLUTES_N", n)]);
    }
}

/// `examples/ranks_solutes` with `how` (the fluid's device, then `device` for device-resident
/// solutes) on 1 rank and on each of `ranks`: fluid + solute momentum conserved on each, every
/// solute's velocity as on 1 rank to 1e-9. `envs` are set for every run (`RANKS_SOLUTES_N`
/// among them: that many solutes, not 240).
pub(super) fn compare_routed_solutes(
    bin: &Path,
    how: &[&str],
    ranks: &[usize],
    envs: &[(&str, &str)],
) {
    let device = how.join(" ");
    let n = envs
        .iter()
        .find(|(k, _)| *k == "RANKS_SOLUTES_N")
        .map_or(240, |(_, v)| v.parse().unwrap());
    let example = bin.with_file_name("examples").join("ranks_solutes");
    let dir = tempfile::tempdir().unwrap();
    let read = |ranks: usize| -> Vec<[f64; 3]> {
        let out = dir.path().join(format!("s{ranks}"));
        let args = [&[out.to_str().unwrap()], how].concat();
        run_ok_with(&example, ranks, dir.path(), &args, envs);
        let mut v = vec![[f64::NAN; 3]; n];
        for r in 0..ranks {
            let text = std::fs::read_to_string(out.join(format!("solutes_{r}.txt"))).unwrap();
            for line in text.lines() {
                let w: Vec<f64> = line.split(' ').map(|x| x.parse().unwrap()).collect();
                v[w[0] as usize] = [w[1], w[2], w[3]];
            }
        }
        let p: Vec<Vec<f64>> = std::fs::read_to_string(out.join("momentum.txt"))
            .unwrap()
            .lines()
            .map(|l| l.split(' ').map(|x| x.parse().unwrap()).collect())
            .collect();
        for (k, (a, b)) in p[0].iter().zip(&p[1]).enumerate() {
            assert!(
                (a - b).abs() < 1e-9,
                "{device}, {ranks} ranks: momentum {k}: {a} -> {b}"
            );
        }
        v
    };
    let one = read(1);
    assert!(
        one.iter().all(|v| v.iter().all(|x| x.is_finite())),
        "{device}: 1 rank"
    );
    for &ranks in ranks {
        let v = read(ranks);
        for (j, (a, b)) in one.iter().zip(&v).enumerate() {
            for k in 0..3 {
                assert!(
                    (a[k] - b[k]).abs() <= 1e-9,
                    "{device}, {ranks} ranks, solute {j}: {a:?} vs {b:?}"
                );
            }
        }
    }
}

/// A NaN position handed over by rank 1 of 3 at step 5 (`RANKS_SOLUTES_BAD`), and in another run
/// a mass beyond the fixed-point sums' cap: every rank's step fails at that step, rank 1 naming
/// the array and itself, the others naming rank 1, and nothing changes: stepping again with the
/// good solutes ends the run as a clean run does, bit for bit.
#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs OpenMPI and libclang (apt-get install openmpi-bin libopenmpi-dev libclang-dev); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn a_bad_solute_on_one_rank_stops_every_rank_and_changes_nothing() {
    assert_a_bad_value_stops_every_rank(mpi_mpcbox(), &[], Bad::NanPosition, &[]);
    assert_a_bad_value_stops_every_rank(mpi_mpcbox(), &[], Bad::HeavyMass, &[]);
}

/// What rank 1 hands over at step 5 in `assert_a_bad_value_stops_every_rank`.
#[derive(Clone, Copy)]
pub(super) enum Bad {
    /// A NaN position.
    NanPosition,
    /// A mass of 10⁶, beyond the cap of the fixed-point cell sums.
    HeavyMass,
    /// One solute fewer than the step was begun for (`RANKS_SOLUTES_BEGIN=1` runs only).
    FewerThanBegun,
}

/// `examples/ranks_solutes` on 3 ranks with `how` (its arguments after the output directory),
/// once clean and once with `bad` handed over by rank 1 at step 5: every rank's step 5 fails,
/// rank 1's naming the array (positions or masses) and itself, the others' naming rank 1, and
/// the run then ends as the clean one, bit for bit. Both runs with `envs`.
pub(super) fn assert_a_bad_value_stops_every_rank(
    bin: &Path,
    how: &[&str],
    bad: Bad,
    envs: &[(&str, &str)],
) {
    let (spec, field) = match bad {
        Bad::NanPosition => ("1:5", "positions"),
        Bad::HeavyMass => ("1:5:mass", "masses"),
        Bad::FewerThanBegun => ("1:5:count", "solute count"),
    };
    let example = bin.with_file_name("examples").join("ranks_solutes");
    let dir = tempfile::tempdir().unwrap();
    let (clean, bad) = (dir.path().join("clean"), dir.path().join("bad"));
    let clean_args = [&[clean.to_str().unwrap()], how].concat();
    run_ok_with(&example, 3, dir.path(), &clean_args, envs);
    let bad_envs = [envs, &[("RANKS_SOLUTES_BAD", spec)]].concat();
    let bad_args = [&[bad.to_str().unwrap()], how].concat();
    run_ok_with(&example, 3, dir.path(), &bad_args, &bad_envs);
    for r in 0..3 {
        let err = std::fs::read_to_string(bad.join(format!("error_{r}.txt"))).unwrap();
        assert!(err.starts_with("5 "), "rank {r}: {err}");
        if r == 1 {
            assert!(err.contains(field) && err.contains("on rank 1"), "{err}");
        } else {
            assert!(err.contains("rank(s) [1] of 3"), "rank {r}: {err}");
        }
        let read = |d: &Path| std::fs::read_to_string(d.join(format!("solutes_{r}.txt"))).unwrap();
        assert_eq!(
            read(&clean),
            read(&bad),
            "rank {r}: the solutes after the refused step"
        );
    }
    let momentum = |d: &Path| std::fs::read_to_string(d.join("momentum.txt")).unwrap();
    assert_eq!(momentum(&clean), momentum(&bad));
}
