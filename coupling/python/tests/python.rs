//! Runs the Python checks and examples against the module `mpcbox`.
//!
//! In CI (`.ci/run`) the module is the wheel maturin built, installed into a virtual
//! environment whose interpreter MPCBOX_PYTHON names; these tests then check that this installed
//! module is the one imported. Elsewhere they use the library this build made
//! (target/<profile>/libmpcbox_python.so, loaded as `mpcbox`) with a Python 3 that has numpy
//! (and the `lammps` module for the LAMMPS example); CI sets MPCBOX_REQUIRE_EXTERNAL=1 so
//! missing ones fail. The test over MPI ranks builds its own module with `--features mpi`
//! and runs it under `mpirun` (mpi4py).

use std::path::{Path, PathBuf};
use std::process::Command;

/// A Python interpreter and, when the module is not installed, a directory holding it.
struct Python {
    exe: PathBuf,
    module_dir: Option<tempfile::TempDir>,
}

impl Python {
    /// The interpreter for scripts that import `modules` (besides mpcbox), or None to skip.
    fn with(modules: &str) -> Option<Python> {
        let (exe, installed) = interpreter(modules)?;
        let py = Python {
            exe,
            module_dir: (!installed).then(built_module),
        };
        if installed {
            py.assert_installed_module();
        }
        Some(py)
    }

    /// MPCBOX_PYTHON must import mpcbox from its environment's site-packages (the wheel).
    fn assert_installed_module(&self) {
        let out = self.run(&[
            "-c",
            "import mpcbox, sys; print(mpcbox.__file__); print(sys.prefix)",
        ]);
        let mut lines = out.lines();
        let (file, prefix) = (lines.next().unwrap_or(""), lines.next().unwrap_or("-"));
        assert!(
            file.starts_with(prefix) && file.contains("site-packages"),
            "MPCBOX_PYTHON imports mpcbox from {file}, not from the wheel installed in {prefix}"
        );
    }

    /// Run the interpreter with `args` (from a scratch directory); its output, which must
    /// end in success.
    fn run(&self, args: &[&str]) -> String {
        let scratch = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(&self.exe);
        cmd.args(args).current_dir(scratch.path());
        if let Some(dir) = &self.module_dir {
            cmd.env("PYTHONPATH", dir.path());
        }
        let out = cmd.output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "python {args:?} failed:\n{text}");
        text
    }
}

/// MPCBOX_PYTHON (true: it has the wheel installed), or a python3 here that imports `modules`;
/// None to skip.
fn interpreter(modules: &str) -> Option<(PathBuf, bool)> {
    if let Some(exe) = std::env::var_os("MPCBOX_PYTHON") {
        return Some((PathBuf::from(exe), true));
    }
    let found = ["/usr/bin/python3", "python3"].into_iter().find(|exe| {
        Command::new(exe)
            .args(["-c", &format!("import {modules}")])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if found.is_none() {
        missing(
            &format!("a python3 with `{modules}`"),
            "apt-get install python3-numpy python3-lammps python3-mpi4py",
        );
    }
    Some((PathBuf::from(found?), false))
}

/// Skip with a message, or fail where MPCBOX_REQUIRE_EXTERNAL is set (CI).
fn missing(what: &str, fix: &str) {
    assert!(
        std::env::var_os("MPCBOX_REQUIRE_EXTERNAL").is_none(),
        "{what} is required; fix: {fix}"
    );
    eprintln!("skipped: no {what} ({fix})");
}

/// A directory holding the library this build made as mpcbox.so.
fn built_module() -> tempfile::TempDir {
    // `cargo test` leaves the library next to the test executable (target/<profile>/deps).
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let lib = [deps, deps.parent().unwrap()]
        .into_iter()
        .map(|d| d.join("libmpcbox_python.so"))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("libmpcbox_python.so not found near {}", deps.display()));
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(&lib, dir.path().join("mpcbox.so")).unwrap();
    dir
}

fn here(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(rel)
        .display()
        .to_string()
}

/// The number after `key` in `text`.
fn number_after(text: &str, key: &str) -> f64 {
    text.split(key)
        .nth(1)
        .and_then(|s| s.split([',', ' ', '\n']).next())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("no `{key}` in:\n{text}"))
}

#[test]
fn python_module_checks() {
    let Some(py) = Python::with("numpy") else {
        return;
    };
    let out = py.run(&[&here("tests/check_module.py")]);
    assert!(out.contains("python module ok"), "{out}");
}

#[test]
fn python_config_and_job_checks() {
    let Some(py) = Python::with("numpy") else {
        return;
    };
    let out = py.run(&[&here("tests/check_config.py"), &here("../..")]);
    assert!(out.contains("python config ok"), "{out}");
}

/// The tutorial script: a sheared fluid job end to end (kT, profile slope) and a coupled loop
/// whose solutes reach the fluid's temperature (momentum checked by the script every step).
#[test]
fn configured_example_runs() {
    let Some(py) = Python::with("numpy") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = py.run(&[
        &here("examples/configured.py"),
        dir.path().to_str().unwrap(),
    ]);
    assert!(dir.path().join("summary.json").exists(), "{out}");
    let fluid_kt = number_after(&out, "fluid: kT = ");
    assert!((fluid_kt - 1.0).abs() < 0.02, "fluid kT {fluid_kt}:\n{out}");
    let slope = number_after(&out, "slope = ");
    assert!(
        (slope - 0.05).abs() < 0.005,
        "profile slope {slope}:\n{out}"
    );
    let solute_kt = number_after(&out, "solutes: kT = ");
    assert!(
        (solute_kt - 1.0).abs() < 0.15,
        "solute kT {solute_kt}:\n{out}"
    );
}

#[test]
fn lammps_python_example_runs() {
    let Some(py) = Python::with("numpy, lammps") else {
        return;
    };
    let out = py.run(&[&here("examples/lammps_polymer.py"), "150"]);
    let kt = number_after(&out, "bead kT = ");
    assert!(
        (kt - 1.0).abs() < 0.15,
        "beads at kT = {kt}, expected 1:\n{out}"
    );
}

/// One box over MPI ranks from Python (`tests/check_ranks.py`, mpi4py): each rank hands mpcbox
/// its communicator (MPI.COMM_WORLD, a duplicate, or the Fortran handle as an int) and steps a
/// sheared fluid for 20 steps with the solutes it holds (solute j on rank j % size, some a
/// period or two beyond the box in y). On 1, 2 and 3 ranks py and pz of fluid + solutes are
/// conserved and the solutes follow the shear flow through the Lees-Edwards images; on 2 and
/// 3 every solute's velocity and px equal the 1-rank run's to 1e-9. A communicator handed over
/// after a Solvent exists is refused.
///
/// The module is the library built with `--features mpi` into `target/mpi` (the `cargo test`
/// target directory is locked while tests run; CI's wheel is built without MPI), put first
/// on PYTHONPATH as `mpcbox.so`; the script checks that it runs over the ranks.
#[test]
fn python_ranks_couple_their_own_solutes_under_mpirun() {
    let Some((exe, _)) = interpreter("numpy, mpi4py") else {
        return;
    };
    let imports = Command::new(&exe)
        .args(["-c", "import numpy, mpi4py"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !imports {
        return missing(
            &format!("mpi4py for {}", exe.display()),
            "apt-get install python3-mpi4py",
        );
    }
    if Command::new("mpirun").arg("--version").output().is_err() {
        return missing("mpirun", "apt-get install openmpi-bin libopenmpi-dev");
    }
    let Some(module) = mpi_module() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mpirun = |ranks: usize, args: &[&str]| -> String {
        let out = Command::new("timeout")
            .current_dir(dir.path())
            .env("PYTHONPATH", module.path())
            .args([
                "300",
                "mpirun",
                "--oversubscribe",
                "--allow-run-as-root",
                "-np",
            ])
            .arg(ranks.to_string())
            .arg(&exe)
            .arg(here("tests/check_ranks.py"))
            .args(args)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{ranks} ranks, {args:?}:\n{text}");
        text
    };
    let reference = dir.path().join("r1/result.npz");
    for (ranks, how) in [(1, "world"), (2, "dup"), (3, "int")] {
        let out = dir.path().join(format!("r{ranks}"));
        std::fs::create_dir_all(&out).unwrap();
        let mut args = vec![out.to_str().unwrap(), how];
        if ranks > 1 {
            args.push(reference.to_str().unwrap());
        }
        let text = mpirun(ranks, &args);
        eprintln!("{}", text.lines().next().unwrap_or(""));
        assert!(text.contains("python ranks ok"), "{text}");
        let module_file = line_after(&text, "module ");
        assert!(
            Path::new(module_file).starts_with(module.path()),
            "imported {module_file}, not the MPI build in {}",
            module.path().display()
        );
        assert!(number_after(&text, "py, pz drift ") < 1e-9, "{text}");
        if ranks > 1 {
            assert!(
                number_after(&text, "max |v - v(1 rank)| = ") <= 1e-9,
                "{text}"
            );
            assert!(
                number_after(&text, "max |px - px(1 rank)| = ") <= 1e-9,
                "{text}"
            );
        }
    }
    let text = mpirun(1, &["--solvent-first"]);
    assert!(text.contains("python solvent-first refused ok"), "{text}");
}

/// The rest of the line after `key` in `text`.
fn line_after<'a>(text: &'a str, key: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .unwrap_or_else(|| panic!("no `{key}` in:\n{text}"))
}

/// The module built with `--features mpi`, as `mpcbox.so` in a directory of its own.
fn mpi_module() -> Option<tempfile::TempDir> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = root.join("target").join("mpi");
    let out = Command::new(env!("CARGO"))
        .current_dir(&root)
        .args([
            "build",
            "--quiet",
            "-p",
            "mpcbox-python",
            "--features",
            "mpi",
        ])
        .arg("--target-dir")
        .arg(&target)
        .output()
        .expect("cargo runs");
    if !out.status.success() {
        missing(
            &format!(
                "the Python module with `--features mpi` (build failed:\n{})",
                String::from_utf8_lossy(&out.stderr)
            ),
            "apt-get install libopenmpi-dev libclang-dev",
        );
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        target.join("debug/libmpcbox_python.so"),
        dir.path().join("mpcbox.so"),
    )
    .unwrap();
    Some(dir)
}
