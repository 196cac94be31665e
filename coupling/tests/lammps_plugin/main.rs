//! `fix mpcbox` from a LAMMPS input script: the plugin in coupling/lammps is built with its
//! Makefile against Debian's LAMMPS (liblammps-dev) and this build's libmpcbox_coupling.so,
//! loaded into Debian's `lmp`, and drives the example coupling/lammps/examples/in.polymer (the
//! bead-spring system of tests/lammps.rs) plus variants: Lees-Edwards shear with fix deform,
//! write_restart/read_restart, and input mistakes that must stop LAMMPS with a clear error.
//! The same plugin linked against the library built with the `mpi` feature runs the fluid per
//! rank under `mpirun` (`ranks.rs`).

#[path = "../common/mod.rs"]
mod common;
mod driver;
mod energy;
mod ranks;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::{crate_dir, lib_dir, missing, output_of, profile_dir, run};

/// Build the plugin once per test process; the loader include file (LAMMPS missing fails the
/// test with the install line).
fn plugin_loader() -> &'static Path {
    static LOADER: OnceLock<PathBuf> = OnceLock::new();
    LOADER.get_or_init(|| {
        let have = |cmd: &str, arg: &str| Command::new(cmd).arg(arg).output().is_ok();
        if !(have("lmp", "-h") && have("mpicxx", "--version") && have("make", "--version")) {
            missing(
                "LAMMPS with its headers and an MPI C++ compiler",
                "apt-get install lammps liblammps-dev libopenmpi-dev make",
            );
        }
        let build = profile_dir().join("lammps-plugin");
        run(Command::new("make")
            .arg("-C")
            .arg(crate_dir().join("lammps"))
            .arg(format!("BUILD={}", build.display()))
            .arg(format!("MPCBOX_LIB_DIR={}", lib_dir().display())));
        build.join("mpcbox_plugin.lmp")
    })
}

/// The plugin built against the coupling library with the `mpi` feature (built, as
/// tests/c_ranks.rs does, into target/mpi: the `cargo test` target directory is locked while the
/// tests run), once per test process: its loader include file and the library's directory.
fn mpi_plugin_loader() -> &'static (PathBuf, PathBuf) {
    static LOADER: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    LOADER.get_or_init(|| {
        plugin_loader();
        if Command::new("mpirun").arg("--version").output().is_err() {
            missing("mpirun", "apt-get install openmpi-bin");
        }
        let root = crate_dir().parent().unwrap();
        let target = root.join("target").join("mpi");
        let (ok, log) = output_of(
            Command::new(env!("CARGO"))
                .current_dir(root)
                .args(["build", "--quiet", "-p", "mpcbox-coupling"])
                .args(["--features", "mpi", "--target-dir"])
                .arg(&target),
        );
        if !ok {
            missing(
                &format!("what the coupling library with `--features mpi` builds with (build failed:\n{log})"),
                "apt-get install libopenmpi-dev libclang-dev",
            );
        }
        let lib = target.join("debug");
        let build = target.join("lammps-plugin");
        run(Command::new("make")
            .arg("-C")
            .arg(crate_dir().join("lammps"))
            .arg(format!("BUILD={}", build.display()))
            .arg(format!("MPCBOX_LIB_DIR={}", lib.display())));
        (build.join("mpcbox_plugin.lmp"), lib)
    })
}

/// A scratch directory with the example's input script, data file and solvent config.
fn example_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for f in ["in.polymer", "polymer.data", "solvent.ron"] {
        std::fs::copy(
            crate_dir().join("lammps/examples").join(f),
            dir.path().join(f),
        )
        .unwrap();
    }
    dir
}

/// The example script with `edits` (text, replacement) applied, written as `name`.
fn variant(dir: &Path, name: &str, edits: &[(&str, &str)]) {
    let mut text = std::fs::read_to_string(dir.join("in.polymer")).unwrap();
    for (from, to) in edits {
        assert!(text.contains(from), "`{from}` not in in.polymer");
        text = text.replacen(from, to, 1);
    }
    std::fs::write(dir.join(name), text).unwrap();
}

/// Run `lmp -in script` in `dir` for `steps` steps: success and the screen output.
fn lammps(dir: &Path, script: &str, steps: u64, loader: &Path) -> (bool, String) {
    lammps_on(1, dir, script, steps, loader)
}

/// [`lammps`] on `ranks` MPI ranks (mpirun, from the mpi-default-bin package LAMMPS needs).
fn lammps_on(ranks: u32, dir: &Path, script: &str, steps: u64, loader: &Path) -> (bool, String) {
    let mut cmd = if ranks > 1 {
        let mut mpirun = Command::new("mpirun");
        mpirun.args([
            "--allow-run-as-root",
            "--oversubscribe",
            "-np",
            &ranks.to_string(),
            "lmp",
        ]);
        mpirun
    } else {
        Command::new("lmp")
    };
    output_of(lmp_args(&mut cmd, dir, script, steps, loader))
}

/// `cmd` (lmp, or mpirun ... lmp) given the script and in.polymer's variables, run in `dir`.
fn lmp_args<'a>(
    cmd: &'a mut Command,
    dir: &Path,
    script: &str,
    steps: u64,
    loader: &Path,
) -> &'a mut Command {
    cmd.current_dir(dir)
        .args(["-in", script, "-log", "none", "-nocite", "-var", "mpcbox"])
        .arg(loader)
        .args(["-var", "steps", &steps.to_string()])
}

/// `mpirun -np ranks lmp` (also for one rank) with the plugin of [`mpi_plugin_loader`]; a run
/// that hangs is killed after 120 s and fails.
fn lammps_mpi(ranks: u32, dir: &Path, script: &str, steps: u64) -> (bool, String) {
    let (loader, lib) = mpi_plugin_loader();
    let mut cmd = Command::new("timeout");
    // the MPI build of the library first: `cargo test` puts its own (without MPI) on
    // LD_LIBRARY_PATH, which the loader searches before the plugin's run path
    cmd.env("LD_LIBRARY_PATH", lib)
        .args(["120", "mpirun", "--oversubscribe", "--allow-run-as-root"])
        .args(["-np", &ranks.to_string(), "lmp"]);
    output_of(lmp_args(&mut cmd, dir, script, steps, loader))
}

/// The thermo rows of every run in `out`, by column name.
fn thermo(out: &str) -> Vec<HashMap<String, f64>> {
    let mut rows = Vec::new();
    let mut header: Option<Vec<String>> = None;
    for line in out.lines() {
        if line.starts_with("Step ") {
            header = Some(line.split_whitespace().map(String::from).collect());
        } else if line.starts_with("Loop time") {
            header = None;
        } else if let Some(h) = &header {
            let values: Vec<f64> = line
                .split_whitespace()
                .map_while(|w| w.parse().ok())
                .collect();
            if values.len() == h.len() {
                rows.push(h.iter().cloned().zip(values).collect());
            }
        }
    }
    rows
}

/// Fluid (f_2[4..6]) + bead (v_p*) momentum of a thermo row.
fn total_momentum(row: &HashMap<String, f64>) -> [f64; 3] {
    let fluid = ["f_2[4]", "f_2[5]", "f_2[6]"];
    let beads = ["v_px", "v_py", "v_pz"];
    std::array::from_fn(|k| row[fluid[k]] + row[beads[k]])
}

/// Every coupled step (one thermo row every 20 MD steps) conserves fluid + bead momentum, and
/// the fluid takes one MPC step per row.
fn assert_momentum_conserved(rows: &[HashMap<String, f64>]) {
    let scale = 10_000.0 * 1.0 + 200.0 * 5.0; // total mass: momentum per unit velocity
    for (k, pair) in rows.windows(2).enumerate() {
        let (a, b) = (total_momentum(&pair[0]), total_momentum(&pair[1]));
        for d in 0..3 {
            assert!(
                (b[d] - a[d]).abs() <= 1e-12 * scale,
                "momentum {d} changed by {} in coupled step {}",
                b[d] - a[d],
                k + 1
            );
        }
        assert_eq!(
            pair[1]["f_2[1]"],
            (k + 1) as f64,
            "one MPC step per 20 MD steps"
        );
    }
}

/// The command in in.polymer's header comment (`#   lmp ...`), which docs/lammps.md and
/// docs/coupling.md must give too.
fn documented_command() -> Vec<String> {
    let script = std::fs::read_to_string(crate_dir().join("lammps/examples/in.polymer")).unwrap();
    let line = script
        .lines()
        .find_map(|l| l.strip_prefix("#   lmp "))
        .expect("in.polymer's header has no `#   lmp ...` command line");
    let command = format!("lmp {}", line.trim());
    for doc in ["../docs/lammps.md", "../docs/coupling.md"] {
        let text = std::fs::read_to_string(crate_dir().join(doc)).unwrap();
        assert!(
            text.contains(&command),
            "{doc} does not give the example's command `{command}`"
        );
    }
    command.split_whitespace().map(String::from).collect()
}

/// The files in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The example, run with the command its header documents and the defaults of its variables
/// (the loader in ../build, as `make -C coupling/lammps` puts it; 6000 steps), in a copy laid
/// out like the source tree: momentum conserved by every coupled step, the bonds hold, the
/// beads, which start at rest, reach the solvent's kT, and no file (log.lammps) is left beside
/// the script.
#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs LAMMPS and an MPI C++ compiler (apt-get install lammps liblammps-dev libopenmpi-dev make); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn input_script_couples_polymer_to_the_fluid() {
    let loader = plugin_loader();
    let command = documented_command();
    let root = example_dir();
    let dir = root.path().join("examples");
    std::fs::create_dir(&dir).unwrap();
    for f in ["in.polymer", "polymer.data", "solvent.ron"] {
        std::fs::rename(root.path().join(f), dir.join(f)).unwrap();
    }
    std::fs::create_dir(root.path().join("build")).unwrap();
    std::fs::copy(loader, root.path().join("build/mpcbox_plugin.lmp")).unwrap();
    let before = listing(&dir);
    let (ok, out) = output_of(
        Command::new(&command[0])
            .args(&command[1..])
            .current_dir(&dir),
    );
    assert!(ok, "{command:?} failed:\n{out}");
    assert_eq!(
        listing(&dir),
        before,
        "{command:?} left files beside in.polymer"
    );
    assert!(out.contains("Loading plugin: fix mpcbox"), "{out}");
    let rows = thermo(&out);
    assert_eq!(rows.len(), 301, "{out}");
    assert_momentum_conserved(&rows);
    assert!(rows.iter().all(|r| r["c_longest"] < 1.5), "a bond broke");
    let late = &rows[150..];
    let kt = late.iter().map(|r| r["c_tbeads"]).sum::<f64>() / late.len() as f64;
    assert!((kt - 1.0).abs() < 0.1, "bead temperature {kt}, expected 1");
    let fluid_kt = late.iter().map(|r| r["f_2[2]"]).sum::<f64>() / late.len() as f64;
    assert!(
        (fluid_kt - 1.0).abs() < 0.02,
        "fluid temperature {fluid_kt}"
    );
}

/// The documented command run in the source tree itself (with this build's loader and a short
/// run) writes nothing there: no log.lammps in the tree.
#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs LAMMPS and an MPI C++ compiler (apt-get install lammps liblammps-dev libopenmpi-dev make); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn documented_command_writes_no_log_into_the_tree() {
    let loader = plugin_loader();
    let command = documented_command();
    let examples = crate_dir().join("lammps/examples");
    let before = listing(&examples);
    let (ok, out) = output_of(
        Command::new(&command[0])
            .args(&command[1..])
            .args(["-var", "steps", "20", "-var", "mpcbox"])
            .arg(loader)
            .current_dir(&examples),
    );
    let after = listing(&examples);
    for new in after.iter().filter(|f| !before.contains(f)) {
        let _ = std::fs::remove_file(examples.join(new)); // keep the tree clean for the next run
    }
    assert!(ok, "{command:?} failed:\n{out}");
    assert_eq!(
        after,
        before,
        "{command:?} wrote into {}",
        examples.display()
    );
    assert_eq!(thermo(&out).len(), 2, "{out}");
}
/// Lees-Edwards: the box sheared by fix deform (remap v) at the config's shear rate runs past
/// a box flip (the tilt reaches half the box at step 2000) with the fluid's offset in step.
#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs LAMMPS and an MPI C++ compiler (apt-get install lammps liblammps-dev libopenmpi-dev make); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn lees_edwards_with_fix_deform_runs_across_a_box_flip() {
    let loader = plugin_loader();
    let dir = example_dir();
    let ron = std::fs::read_to_string(dir.path().join("solvent.ron")).unwrap();
    let sheared = ron.replace("seed: 17,", "seed: 17, shear_rate: 0.05,");
    std::fs::write(dir.path().join("sheared.ron"), sheared).unwrap();
    let deform = "change_box all triclinic\nfix 0 all deform 1 xy erate 0.05 remap v\n";
    variant(
        dir.path(),
        "in.sheared",
        &[
            (
                "fix            1 beads nve",
                &format!("{deform}fix 1 beads nve"),
            ),
            ("mpcbox solvent.ron", "mpcbox sheared.ron"),
            ("thermo         20", "thermo 400"),
        ],
    );
    let (ok, out) = lammps(dir.path(), "in.sheared", 2400, loader);
    assert!(ok, "lmp failed:\n{out}");
    let rows = thermo(&out);
    let last = rows.last().unwrap();
    assert_eq!(last["Step"], 2400.0);
    assert_eq!(last["f_2[1]"], 120.0);
    // shear along x leaves the y and z momentum alone
    let (first, last) = (total_momentum(&rows[0]), total_momentum(last));
    for d in [1, 2] {
        // to the fixed-point moments' rounding (docs/determinism.md), as in every coupled step
        let scale = 10_000.0 * 1.0 + 200.0 * 5.0;
        assert!(
            (last[d] - first[d]).abs() <= 1e-12 * scale,
            "momentum {d}: {out}"
        );
    }
}

/// write_restart puts the fluid in a checkpoint beside the restart file; read_restart + the
/// same fix command brings it back (same MPC step count, same fluid momentum) and runs on.
#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs LAMMPS and an MPI C++ compiler (apt-get install lammps liblammps-dev libopenmpi-dev make); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn write_restart_and_read_restart_keep_the_fluid() {
    let loader = plugin_loader();
    let dir = example_dir();
    variant(
        dir.path(),
        "in.first",
        &[(
            "run            ${steps}",
            "run ${steps}\nwrite_restart poly.restart",
        )],
    );
    let (ok, out) = lammps(dir.path(), "in.first", 200, loader);
    assert!(ok, "lmp failed:\n{out}");
    assert!(dir.path().join("fluid.2.200.mpcbox").exists(), "{out}");
    let saved = thermo(&out).pop().unwrap();
    let script = std::fs::read_to_string(dir.path().join("in.polymer")).unwrap();
    let tail = &script[script.find("include        ${mpcbox}").unwrap()..];
    let again = format!("read_restart poly.restart\nneighbor 0.3 bin\n{tail}");
    std::fs::write(dir.path().join("in.again"), again).unwrap();
    let (ok, out) = lammps(dir.path(), "in.again", 100, loader);
    assert!(ok, "lmp failed:\n{out}");
    assert!(
        out.contains("fluid restored from fluid.2.200.mpcbox"),
        "{out}"
    );
    let rows = thermo(&out);
    assert_eq!(rows[0]["Step"], 200.0);
    for key in ["f_2[1]", "f_2[4]", "f_2[5]", "f_2[6]", "f_2[3]"] {
        assert_eq!(rows[0][key], saved[key], "{key} after read_restart");
    }
    assert_eq!(rows.last().unwrap()["f_2[1]"], 15.0);
}

/// One input mistake: edits of the example script, and what its error must say.
struct Mistake {
    edits: &'static [(&'static str, &'static str)],
    expect: &'static [&'static str],
}

const FIX_LINE: &str = "fix            2 beads mpcbox solvent.ron every 20";
const THERMO_LINE: &str = "thermo_style   custom step c_tbeads f_2[1] f_2[2] f_2[3] f_2[4] \
                           f_2[5] f_2[6] v_px v_py v_pz c_longest";

const MISTAKES: [Mistake; 9] = [
    Mistake {
        edits: &[(FIX_LINE, "fix 2 beads mpcbox solvent.ron every 20 evry 3")],
        expect: &[
            "fix mpcbox (fix 2): unknown keyword `evry`",
            "valid keywords: every, cell, checkpoint, timing, overlap, threads",
        ],
    },
    Mistake {
        edits: &[(
            FIX_LINE,
            "fix 2 beads mpcbox solvent.ron every 20 timing maybe",
        )],
        expect: &["`timing` must be yes or no (got maybe)"],
    },
    Mistake {
        edits: &[(
            FIX_LINE,
            "fix 2 beads mpcbox solvent.ron every 20 overlap sometimes",
        )],
        expect: &["`overlap` must be yes or no (got sometimes)"],
    },
    Mistake {
        edits: &[(
            FIX_LINE,
            "fix 2 beads mpcbox solvent.ron every 20 threads 0",
        )],
        expect: &[
            "`threads` must be auto or a whole number of threads from 1 to 1024 for the \
                   exchange loops of each rank (got 0)",
        ],
    },
    Mistake {
        edits: &[(FIX_LINE, "fix 2 beads mpcbox solvent.ron")],
        expect: &["keyword `every` is required"],
    },
    Mistake {
        edits: &[("timestep       0.005", "timestep 0.004")],
        expect: &[
            "`every` 20 × timestep 0.004 = 0.08 differs from the config's time_step h = 0.1",
            "set `every` to 25",
        ],
    },
    Mistake {
        edits: &[(FIX_LINE, "fix 2 beads mpcbox solvent.ron every 20 cell 0.5")],
        expect: &[
            "is 20 x 20 x 20 cells of `cell` 0.5",
            "has 10 x 10 x 10 cells",
        ],
    },
    Mistake {
        edits: &[(FIX_LINE, "fix 2 beads mpcbox bad.ron every 20")],
        expect: &[
            "config bad.ron: config field `time_stp`",
            "use one of: cells",
        ],
    },
    Mistake {
        edits: &[(
            "fix            1",
            "change_box all triclinic\nfix 0 all deform 1 xy erate 0.04 remap v\nfix 1",
        )],
        expect: &["fix deform shears at 0.04", "the config's shear_rate is 0"],
    },
];

/// Input mistakes stop LAMMPS with an error that names the fix, the keyword or config field,
/// and the fix.
#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs LAMMPS and an MPI C++ compiler (apt-get install lammps liblammps-dev libopenmpi-dev make); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn input_mistakes_give_clear_errors() {
    let loader = plugin_loader();
    let dir = example_dir();
    let ron = std::fs::read_to_string(dir.path().join("solvent.ron")).unwrap();
    let misspelt = ron.replace("time_step: 0.1", "time_stp: 0.1");
    std::fs::write(dir.path().join("bad.ron"), misspelt).unwrap();
    for (k, case) in MISTAKES.iter().enumerate() {
        let name = format!("in.bad{k}");
        variant(dir.path(), &name, case.edits);
        let (ok, out) = lammps(dir.path(), &name, 40, loader);
        let error = out.lines().find(|l| l.starts_with("ERROR")).unwrap_or("");
        assert!(!ok, "case {k} ran:\n{out}");
        for e in case.expect {
            assert!(error.contains(e), "case {k}: `{e}` not in: {error}\n{out}");
        }
    }
}
