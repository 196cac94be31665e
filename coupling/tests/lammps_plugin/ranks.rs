//! `fix mpcbox` under `mpirun`: the atoms gathered to rank 0 (the library without MPI) and the
//! fluid per rank (the library built with the `mpi` feature).

use super::*;

/// With two MPI ranks the group is gathered on rank 0 (where the fluid lives) and the
/// velocities scattered back: the same conservation holds.
#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs LAMMPS, OpenMPI and libclang (apt-get install lammps liblammps-dev openmpi-bin libopenmpi-dev libclang-dev make); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn two_mpi_ranks_gather_and_scatter() {
    let loader = plugin_loader();
    let dir = example_dir();
    let (ok, out) = lammps_on(2, dir.path(), "in.polymer", 400, loader);
    assert!(ok, "mpirun -np 2 lmp failed:\n{out}");
    assert!(out.contains(" on 2 procs for 400 steps"), "{out}");
    assert!(
        out.contains("fix mpcbox: gather exchange")
            && out.contains("this libmpcbox_coupling.so is built without MPI")
            && !out.contains("config field"),
        "the gather exchange is logged as information, not as an error:\n{out}"
    );
    let rows = thermo(&out);
    assert_eq!(rows.len(), 21, "{out}");
    assert_momentum_conserved(&rows);
}

/// `b` equals `a` (rows with the same keys) to 1e-9 of each key's largest magnitude in `a` (so
/// values that pass near zero, such as momenta, are judged on their scale).
fn assert_same_to_rounding(a: &[HashMap<String, f64>], b: &[HashMap<String, f64>], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: row counts differ");
    for key in a[0].keys() {
        let scale = a
            .iter()
            .map(|r| r[key].abs())
            .fold(f64::MIN_POSITIVE, f64::max);
        for (j, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                (x[key] - y[key]).abs() <= 1e-9 * scale,
                "{what}: {key} in row {j}: {} vs {} (scale {scale})",
                x[key],
                y[key]
            );
        }
    }
}

/// The rows of a LAMMPS text dump (`ITEM: ATOMS` columns), by column name.
fn dump_rows(path: &Path) -> Vec<HashMap<String, f64>> {
    let text = std::fs::read_to_string(path).unwrap();
    let (head, atoms) = text
        .split_once("ITEM: ATOMS ")
        .expect("no ITEM: ATOMS in the dump");
    assert!(head.starts_with("ITEM: TIMESTEP"), "{text}");
    let mut lines = atoms.lines();
    let names: Vec<String> = lines
        .next()
        .unwrap()
        .split_whitespace()
        .map(String::from)
        .collect();
    lines
        .map(|l| {
            names
                .iter()
                .cloned()
                .zip(l.split_whitespace().map(|w| w.parse().unwrap()))
                .collect()
        })
        .collect()
}

/// With the library built with MPI, `mpirun -np 2 lmp` runs the fluid over both LAMMPS ranks
/// (mpcbox's y slabs; each rank hands over the beads it holds, no gather): the log says so, every
/// coupled step conserves fluid + bead momentum, and the thermo rows (fluid momentum and kT,
/// bead momentum and kT, the exchanged energy) and each bead's final position and velocity
/// equal those of `mpirun -np 1 lmp` to 1e-9 of their scale. Not bitwise: over two ranks the
/// sums inside a fluid cell run in another order (mpcbox's slabs), and so do LAMMPS's own force
/// sums (ghost atoms, reverse communication); both differ by rounding (1e-16), which the beads'
/// chaotic dynamics grow (measured: 3e-14 after 10 exchanges), far below 1e-9. The 2-rank run
/// then writes a restart (the fluid's checkpoint, one file from rank 0), a second 2-rank run
/// reads it back and continues; a config mistake stops both ranks with the config's message,
/// and a bad atom that one rank alone hands over (while the other waits inside mpcbox's step)
/// stops both through MPI_Abort: no hang.
#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs LAMMPS, OpenMPI and libclang (apt-get install lammps liblammps-dev openmpi-bin libopenmpi-dev libclang-dev make); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn mpi_library_runs_the_fluid_per_rank() {
    mpi_plugin_loader();
    let dir = example_dir();
    // on the CPU whatever the machine (device Auto would take a GPU on one rank)
    let ron = std::fs::read_to_string(dir.path().join("solvent.ron")).unwrap();
    let cpu = ron.replace("seed: 17,", "seed: 17, device: Cpu,");
    std::fs::write(dir.path().join("cpu.ron"), cpu).unwrap();
    variant(
        dir.path(),
        "in.ranks",
        &[
            (
                FIX_LINE,
                "fix 2 beads mpcbox cpu.ron every 20 checkpoint fluid.${np}.mpcbox \
                 threads ${threads}",
            ),
            (THERMO_LINE, &format!("{THERMO_LINE} f_2 ke pe")),
            (
                "run            ${steps}",
                "run ${steps}\nwrite_dump beads custom final.${np} id xu yu zu vx vy vz \
                 modify sort id format float %.17g\nwrite_restart poly.restart.${np}",
            ),
        ],
    );
    // per rank count: the thermo rows and the final beads
    type Rows = Vec<HashMap<String, f64>>;
    // the last: 2 ranks again, the fix's loops on 3 threads each
    let runs: Vec<(Rows, Rows)> = [(1, 1), (2, 1), (2, 3)]
        .into_iter()
        .map(|(ranks, threads)| {
            let np = format!("in.ranks{ranks}");
            let script = std::fs::read_to_string(dir.path().join("in.ranks")).unwrap();
            let script = script
                .replace("${np}", &ranks.to_string())
                .replace("${threads}", &threads.to_string());
            std::fs::write(dir.path().join(&np), script).unwrap();
            let (ok, out) = lammps_mpi(ranks, dir.path(), &np, 200);
            assert!(ok, "mpirun -np {ranks} lmp failed:\n{out}");
            assert!(out.contains(" for 200 steps"), "{out}");
            let counted = if threads == 1 {
                "1 thread"
            } else {
                "3 threads"
            };
            assert!(
                out.contains(&format!(
                    "fix mpcbox: {counted} per rank for the exchange loops"
                )),
                "{out}"
            );
            let path = if ranks == 1 {
                "1 LAMMPS rank "
            } else {
                "2 LAMMPS ranks "
            };
            assert!(
                out.contains(&format!(
                    "fix mpcbox: per-rank exchange: the fluid runs over {path}"
                )),
                "{out}"
            );
            let rows = thermo(&out);
            assert_eq!(rows.len(), 11, "{out}");
            assert_momentum_conserved(&rows);
            let atoms = dump_rows(&dir.path().join(format!("final.{ranks}")));
            assert_eq!(atoms.len(), 200);
            (rows, atoms)
        })
        .collect();
    assert_same_to_rounding(&runs[0].0, &runs[1].0, "thermo, 2 ranks vs 1");
    assert_same_to_rounding(&runs[0].1, &runs[1].1, "final beads, 2 ranks vs 1");
    // the exchange loops fill and sum per fixed chunk: the thread count changes no bit
    assert_eq!(runs[1], runs[2], "2 ranks on 3 threads each vs 1 thread");
    assert!(
        runs[1].0.last().unwrap()["f_2"] != 0.0,
        "no energy exchanged"
    );

    // read_restart on 2 ranks: every rank restores its slabs from the one checkpoint file
    let saved = runs[1].0.last().unwrap();
    let script = std::fs::read_to_string(dir.path().join("in.polymer")).unwrap();
    let tail = &script[script.find("include        ${mpcbox}").unwrap()..];
    let tail = tail.replace("mpcbox solvent.ron", "mpcbox cpu.ron");
    let again = format!("read_restart poly.restart.2\nneighbor 0.3 bin\n{tail}");
    std::fs::write(dir.path().join("in.again"), again).unwrap();
    let (ok, out) = lammps_mpi(2, dir.path(), "in.again", 40);
    assert!(ok, "mpirun -np 2 lmp (read_restart) failed:\n{out}");
    assert!(
        out.contains("fluid restored from fluid.2.mpcbox at MPC step 10"),
        "{out}"
    );
    let rows = thermo(&out);
    assert_eq!(rows[0]["f_2[1]"], 10.0);
    // the fluid's sums now run over the restored particle order: equal to rounding (momentum
    // on the scale of assert_momentum_conserved)
    let scale = |key: &str| {
        if key == "f_2[3]" {
            saved[key]
        } else {
            11_000.0
        }
    };
    for key in ["f_2[3]", "f_2[4]", "f_2[5]", "f_2[6]"] {
        assert!(
            (rows[0][key] - saved[key]).abs() <= 1e-12 * scale(key),
            "{key} after read_restart: {} vs {}",
            rows[0][key],
            saved[key]
        );
    }
    assert_eq!(rows.last().unwrap()["f_2[1]"], 12.0);

    // a config mistake stops every rank with the config's message, and the run ends
    std::fs::write(
        dir.path().join("bad.ron"),
        ron.replace("time_step: 0.1", "time_stp: 0.1"),
    )
    .unwrap();
    variant(
        dir.path(),
        "in.bad",
        &[(FIX_LINE, "fix 2 beads mpcbox bad.ron every 20")],
    );
    let start = std::time::Instant::now();
    let (ok, out) = lammps_mpi(2, dir.path(), "in.bad", 40);
    assert!(!ok, "the bad config ran:\n{out}");
    assert!(
        start.elapsed().as_secs() < 60,
        "a rank hung after the error:\n{out}"
    );
    assert!(
        out.contains("ERROR: fix mpcbox (fix 2): config bad.ron: config field `time_stp`"),
        "{out}"
    );

    // bead 5 keeps an infinite vx (outside fix nve, so it does not move): the rank holding it
    // fails in the collective step and stops the run alone
    variant(
        dir.path(),
        "in.inf",
        &[(
            "fix            1 beads nve",
            "group moving id 1:4 6:200\nset atom 5 vx 1e309\nfix 1 moving nve",
        )],
    );
    let start = std::time::Instant::now();
    let (ok, out) = lammps_mpi(2, dir.path(), "in.inf", 40);
    assert!(!ok, "the infinite velocity ran:\n{out}");
    assert!(
        start.elapsed().as_secs() < 60,
        "a rank hung after the error:\n{out}"
    );
    assert!(
        out.contains("fix mpcbox (fix 2): the MPC step failed: solute input `velocities`"),
        "{out}"
    );
}
