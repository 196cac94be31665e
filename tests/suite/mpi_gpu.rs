//! One box over MPI ranks with the fluid on GPUs (`mpirun -np N mpcbox run`, `device:
//! Cuda([0])`: every rank takes GPU 0 here, as ranks share a host's GPUs when it has fewer
//! GPUs than ranks). Each rank's slabs live on its GPU; particles crossing to another rank's
//! slab go GPU to GPU through CUDA IPC inboxes (ranks of one host; only the headers through
//! MPI), or with `MPCBOX_RANK_PEER_COPIES=off` through pinned host memory and MPI. The same checks as `mpi_ranks.rs` does on the
//! CPU: 2 and 3 ranks follow the one-process GPU run to rounding (shear, walls, body force),
//! momentum is conserved across ranks, a checkpoint of 3 GPU ranks resumes on 2 and on 1, the
//! coupled polymer run (bundled MD on every rank's CPU, the beads routed to their cells' ranks)
//! follows one process, the bundled MD decomposed over the ranks' GPU slabs follows the
//! one-process decomposed run, and solutes handed over per rank come back to the rank that
//! passed them.

use super::mpi_ranks::{
    assert_checkpoint_resumes, assert_rows_close, assert_sheared_momentum, mpi_mpcbox, run_config,
    run_config_with, write_config, POLYMER, SHEARED, SLIT,
};
use crate::common;

/// A CPU config of `mpi_ranks.rs` with the fluid on GPU 0 (the bundled MD, if any, on the CPU).
pub(super) fn on_gpu(body: &str) -> String {
    assert!(body.contains("device: Cpu"), "{body}");
    body.replace("device: Cpu", "device: Cuda([0])")
}

/// 50 steps on 1, 2 and 3 GPU ranks (GPU slabs need 4 layers here: at most 3 slabs of the
/// slit's 12), with the packets between ranks GPU to GPU (the default on one host) and, on 2
/// ranks, also by MPI: every observable row and the final fluid agree with the one-process GPU
/// run to 1e-9 (only the order of sums in a cell differs), and the momentum of the fluid over
/// all ranks is conserved as on one process (y to rounding under shear, z gains the body
/// force's impulse).
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_gpu_fluid_over_two_and_three_ranks_follows_one_process() {
    let bin = mpi_mpcbox();
    for (name, body) in [("sheared", SHEARED), ("slit", SLIT)] {
        let dir = tempfile::tempdir().unwrap();
        write_config(dir.path(), "c.ron", &on_gpu(body));
        let (r1, ck1) = run_config(bin, 1, dir.path(), "c.ron", "r1");
        for (ranks, peers) in [(2, "on"), (2, "off"), (3, "on")] {
            let out = format!("r{ranks}-{peers}");
            let envs = [("MPCBOX_RANK_PEER_COPIES", peers)];
            let (r, ck) = run_config_with(bin, ranks, dir.path(), "c.ron", &out, &envs);
            let summary =
                std::fs::read_to_string(dir.path().join(&out).join("summary.json")).unwrap();
            assert!(
                summary.contains("cuda:0") && summary.contains(&format!("of {ranks} MPI ranks")),
                "{name}: {summary}"
            );
            let how = match peers {
                "on" => "GPU-to-GPU packets with ranks of this host",
                _ => "packets between ranks by MPI",
            };
            assert!(summary.contains(how), "{name}, peers {peers}: {summary}");
            if name == "sheared" {
                assert_sheared_momentum(&r, ck.fluid.len(), &format!("{name}, {ranks} ranks"));
            }
            let what = format!("GPU, {name}: {ranks} ranks (peers {peers}) against one process");
            assert_rows_close(&r1, &r, 1e-9, &what);
            common::compare_states(&ck1.fluid, &ck.fluid, 1e-9, &what);
        }
    }
}

/// A GPU run of 3 ranks checkpointed at step 25 continues on 2 ranks and on one process as
/// the uninterrupted one-process run does (to rounding).
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_gpu_checkpoint_of_three_ranks_resumes_on_two_and_on_one() {
    let bin = mpi_mpcbox();
    assert_checkpoint_resumes(bin, &on_gpu(SHEARED), 3, "GPU");
}

/// The sheared polymer solution with the fluid on GPU ranks (the bundled MD on every rank's
/// CPU, each bead collided by the rank owning its cell) follows the one-process GPU run: the
/// fluid's rows, the fluid and the beads' velocities to rounding.
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_coupled_polymer_on_two_gpu_ranks_follows_one_process() {
    let bin = mpi_mpcbox();
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "p.ron", &on_gpu(POLYMER));
    let (r1, ck1) = run_config(bin, 1, dir.path(), "p.ron", "p1");
    let (r2, ck2) = run_config(bin, 2, dir.path(), "p.ron", "p2");
    let what = "GPU polymer: 2 ranks against one process";
    assert_rows_close(&r1, &r2, 1e-8, what);
    common::compare_states(&ck1.fluid, &ck2.fluid, 1e-8, what);
    let (a, b) = (ck1.md.as_ref().unwrap(), ck2.md.as_ref().unwrap());
    assert_eq!(
        a.state.system.vel.len(),
        b.state.system.vel.len(),
        "{what}: beads"
    );
    for (x, y) in a.state.system.vel.iter().zip(&b.state.system.vel) {
        for k in 0..3 {
            assert!((x[k] - y[k]).abs() <= 1e-8, "{what}: bead {x:?} vs {y:?}");
        }
    }
}

/// Solutes handed over per rank as host arrays with the fluid on GPU ranks
/// (`examples/ranks_solutes.rs` with `Cuda([0])`), uploaded to each rank's GPU and split there
/// (the default) or routed on the host (`MPCBOX_RANK_SOLUTE_SPLIT=off`): on 2 and 3 ranks
/// every solute's velocity after 20 steps equals the one-process GPU run's to 1e-9, and fluid
/// + solute momentum is conserved across the ranks.
#[test]
#[ignore = "needs a CUDA GPU"]
fn solutes_per_gpu_rank_are_routed_to_their_cells_and_back() {
    let bin = mpi_mpcbox();
    for split in ["on", "off"] {
        let envs = [("MPCBOX_RANK_SOLUTE_SPLIT", split)];
        super::mpi_solutes::compare_routed_solutes(bin, &["Cuda([0])"], &[2, 3], &envs);
    }
}

/// Solutes handed over per rank as device arrays on the rank's GPU (`step_with_device_solutes`
/// on a stream of the caller's), split on each rank's GPU (its own stay there, the others
/// cross the ranks: with the solutes dealt by index most of them; a rank of one slab collides
/// them there as they lie, or with `route-twice` routes them to its slab again) and, as the
/// reference, all through the host (`MPCBOX_RANK_SOLUTE_SPLIT=off`): on 2 and 3 ranks every solute's velocity
/// after 20 steps equals the one-process run's with device solutes to 1e-9 (only the order of
/// the cell sums differs; the velocities are copied, not recomputed, on their way), fluid +
/// solute momentum is conserved across the ranks (also with 3 slabs over 2 ranks, one rank
/// routing its solutes over two slabs, and with a single solute or a few, one rank holding one
/// foreign solute and another none, as device and as host arrays), and a NaN position on rank 1 of 3 stops every rank at
/// that step, naming the array and rank 1, with nothing changed.
#[test]
#[ignore = "needs a CUDA GPU"]
fn device_solutes_per_gpu_rank_are_routed_to_their_cells_and_back() {
    let bin = mpi_mpcbox();
    let how = ["Cuda([0])", "device"];
    for split in ["on", "route-twice", "off"] {
        let envs = [("MPCBOX_RANK_SOLUTE_SPLIT", split)];
        super::mpi_solutes::compare_routed_solutes(bin, &how, &[2, 3], &envs);
    }
    // 3 slabs: 2 ranks hold 1 and 2 of them (a rank's own solutes routed over its 2 slabs),
    // against one process of 3 slabs
    let envs = [("RANKS_SOLUTES_SLABS", "3")];
    super::mpi_solutes::compare_routed_solutes(bin, &how, &[2], &envs);
    let bad = super::mpi_solutes::Bad::NanPosition;
    super::mpi_solutes::assert_a_bad_value_stops_every_rank(bin, &how, bad, &[]);
    // one foreign solute on a rank, none on others (a returned batch of one once overran the
    // buffer for the returned velocities), as device and as host arrays
    super::mpi_solutes::assert_few_solutes_are_routed(bin, &how);
    super::mpi_solutes::assert_few_solutes_are_routed(bin, &["Cuda([0])"]);
}

/// Solutes handed over per rank as host arrays in page-locked memory (`examples/ranks_solutes.rs`
/// with `pinned`): each rank's go up to its GPU by DMA and are tested there before the ranks
/// agree on the step's input, instead of being checked on the host. On 2 and 3 ranks every
/// solute's velocity after 20 steps equals the one-process run's (page-locked arrays there
/// too) to 1e-9, fluid + solute momentum is conserved across the ranks (also with 3 slabs over
/// 2 ranks, and with a single solute or a few: a rank with none, whose arrays are empty, is
/// checked on the host), and a
/// NaN position or a mass beyond the fixed-point sums' cap in rank 1's page-locked arrays stops
/// every rank at that step, naming the array and rank 1, with nothing changed (its velocities,
/// the fluid and every later step as in the clean run).
#[test]
#[ignore = "needs a CUDA GPU"]
fn page_locked_solutes_per_gpu_rank_are_tested_on_the_gpu() {
    let bin = mpi_mpcbox();
    let how = ["Cuda([0])", "pinned"];
    super::mpi_solutes::compare_routed_solutes(bin, &how, &[2, 3], &[]);
    // 3 slabs over 2 ranks: the rank of two slabs routes its taken solutes over both
    let envs = [("RANKS_SOLUTES_SLABS", "3")];
    super::mpi_solutes::compare_routed_solutes(bin, &how, &[2], &envs);
    super::mpi_solutes::assert_few_solutes_are_routed(bin, &how);
    use super::mpi_solutes::{assert_a_bad_value_stops_every_rank, Bad};
    assert_a_bad_value_stops_every_rank(bin, &how, Bad::NanPosition, &[]);
    assert_a_bad_value_stops_every_rank(bin, &how, Bad::HeavyMass, &[]);
}

/// Every step begun before its solutes are handed over (`RANKS_SOLUTES_BEGIN=1`,
/// `Solvent::begin_fluid_step`: the fluid streams while an MD code would compute its forces),
/// each rank's own solutes as pageable host arrays, page-locked ones and device arrays: on 2
/// and 3 ranks every solute's velocity after 20 steps equals the one-process run's (begun too)
/// to 1e-9, with fluid + solute momentum conserved across the ranks; and a NaN position on
/// rank 1, or one solute fewer there than the step was begun for, stops every rank with the
/// step still begun, which the good solutes then finish: the run ends as the clean one, bit
/// for bit.
#[test]
#[ignore = "needs a CUDA GPU"]
fn begun_steps_per_gpu_rank_follow_one_process() {
    let bin = mpi_mpcbox();
    let envs = [("RANKS_SOLUTES_BEGIN", "1")];
    use super::mpi_solutes::{assert_a_bad_value_stops_every_rank, Bad};
    for how in [
        &["Cuda([0])"][..],
        &["Cuda([0])", "pinned"],
        &["Cuda([0])", "device"],
    ] {
        super::mpi_solutes::compare_routed_solutes(bin, how, &[2, 3], &envs);
        assert_a_bad_value_stops_every_rank(bin, how, Bad::NanPosition, &envs);
        assert_a_bad_value_stops_every_rank(bin, how, Bad::FewerThanBegun, &envs);
    }
}

/// Solutes handed over per rank with a GPU of its own (`Cuda([0, 1])`: on 2 ranks each takes
/// one; on 3, two share one): the fluid's packets and the foreign solutes cross GPU to GPU
/// between the ranks, not within one GPU as where every rank takes GPU 0. As pageable host
/// arrays, as page-locked ones and as device arrays, every solute's velocity after 20 steps
/// equals the one-process run's on the same two GPUs to 1e-9, and fluid + solute momentum is
/// conserved across the ranks; a NaN position on rank 1 stops every rank with nothing changed.
#[test]
#[ignore = "needs two or more CUDA GPUs"]
fn solutes_per_rank_with_a_gpu_each_follow_one_process() {
    let gpus = mpcbox::backend::cuda::probe().unwrap_or(0);
    if gpus < 2 {
        eprintln!("skipped: this test needs two or more CUDA GPUs, found {gpus}");
        return;
    }
    let bin = mpi_mpcbox();
    for form in [
        &["Cuda([0, 1])"][..],
        &["Cuda([0, 1])", "pinned"],
        &["Cuda([0, 1])", "device"],
    ] {
        super::mpi_solutes::compare_routed_solutes(bin, form, &[2, 3], &[]);
    }
    use super::mpi_solutes::{assert_a_bad_value_stops_every_rank, Bad};
    for form in [["Cuda([0, 1])", "pinned"], ["Cuda([0, 1])", "device"]] {
        assert_a_bad_value_stops_every_rank(bin, &form, Bad::NanPosition, &[]);
    }
}

/// The polymer config on GPU 0 with the bundled MD on the GPU and the fluid cut into `slabs`.
fn decomposed(slabs: usize) -> String {
    on_gpu(POLYMER)
        .replace("backend: Cpu", "backend: Cuda")
        .replace(
            "tuning: (reorder_interval: Some(0))",
            &format!("tuning: (reorder_interval: Some(0), slabs: {slabs})"),
        )
}

/// The bundled MD decomposed over GPU ranks (`md.backend: Cuda`: each rank integrates the
/// beads of its own slabs, and beads, bonds and ghosts crossing a rank's faces — the sheared
/// y boundary among them — go through MPI): 2 ranks of one slab, 2 ranks holding 1 and 2 of 3
/// slabs, and 3 ranks of one slab each follow the one-process run cut into as many slabs. The
/// MD itself is the same computation bead for bead (each slab's lists, forces and kicks do not
/// depend on where its neighbours live); only the fluid's cell sums are added in another atomic
/// order, so the fluid's rows, the fluid and every bead agree to 1e-8 (the rounding of those
/// sums, grown over 20 collisions and 200 chaotic MD steps). The beads' momentum rows (md.csv)
/// agree as well, and md_summary.json names the rank's block of slabs.
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_bundled_md_decomposed_over_gpu_ranks_follows_one_process() {
    let bin = mpi_mpcbox();
    for (slabs, ranks) in [(2, 2), (3, 2), (3, 3)] {
        let dir = tempfile::tempdir().unwrap();
        write_config(dir.path(), "p.ron", &decomposed(slabs));
        let (r1, ck1) = run_config(bin, 1, dir.path(), "p.ron", "one");
        let (r, ck) = run_config(bin, ranks, dir.path(), "p.ron", "ranks");
        let what = format!("decomposed GPU MD, {slabs} slabs: {ranks} ranks against one process");
        let md_summary = |out: &str| {
            std::fs::read_to_string(dir.path().join(out).join("md_summary.json")).unwrap()
        };
        let (s1, s) = (md_summary("one"), md_summary("ranks"));
        assert!(s1.contains(&format!("{slabs} y slabs")), "{what}: {s1}");
        assert!(
            s.contains(&format!("{slabs} y slabs"))
                && s.contains(&format!("of this MPI rank of {ranks}")),
            "{what}: {s}"
        );
        assert_rows_close(&r1, &r, 1e-8, &what);
        common::compare_states(&ck1.fluid, &ck.fluid, 1e-8, &what);
        let (a, b) = (ck1.md.as_ref().unwrap(), ck.md.as_ref().unwrap());
        let (sa, sb) = (&a.state.system, &b.state.system);
        assert_eq!(sa.vel.len(), sb.vel.len(), "{what}: beads");
        for (i, (x, y)) in sa.pos.iter().zip(&sb.pos).enumerate() {
            for k in 0..3 {
                assert!(
                    (x[k] - y[k]).abs() <= 1e-8,
                    "{what}: bead {i} at {x:?} vs {y:?}"
                );
                let (u, v) = (sa.vel[i][k], sb.vel[i][k]);
                assert!(
                    (u - v).abs() <= 1e-8,
                    "{what}: bead {i} velocity {u} vs {v}"
                );
            }
        }
        let md_rows = |out: &str| super::mpi_ranks::rows(&dir.path().join(out).join("md.csv"));
        let (m1, m) = (md_rows("one"), md_rows("ranks"));
        assert!(!m1.is_empty() && m1.len() == m.len(), "{what}: md.csv rows");
        for (ra, rb) in m1.iter().zip(&m) {
            for (k, (x, y)) in ra.iter().zip(rb).enumerate() {
                // momenta near zero: absolute; energies, sizes and angles: relative
                let ok = (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-8 * x.abs().max(1.0);
                assert!(
                    ok,
                    "{what}: md.csv step {}, column {k}: {x:e} vs {y:e}",
                    ra[0]
                );
            }
        }
    }
}
