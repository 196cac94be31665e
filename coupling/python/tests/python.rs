//! Runs the Python checks and examples against the module `mpcbox`.
//!
//! In CI (`.ci/run`) the module is the wheel maturin built, installed into a virtual
//! environment whose interpreter MPCBOX_PYTHON names; these tests then check that this installed
//! module is the one imported. Elsewhere they use the library this build made
//! (target/<profile>/libmpcbox_python.so, loaded as `mpcbox`) with a Python 3 that has numpy
//! (and the `lammps` module for the LAMMPS example); CI sets MPCBOX_REQUIRE_EXTERNAL=1 so
//! missing ones fail.

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
        if let Some(exe) = std::env::var_os("MPCBOX_PYTHON") {
            let py = Python {
                exe: PathBuf::from(exe),
                module_dir: None,
            };
            py.assert_installed_module();
            return Some(py);
        }
        let found = ["/usr/bin/python3", "python3"].into_iter().find(|exe| {
            Command::new(exe)
                .args(["-c", &format!("import {modules}")])
                .output()
                .is_ok_and(|o| o.status.success())
        });
        let Some(exe) = found else {
            assert!(
                std::env::var_os("MPCBOX_REQUIRE_EXTERNAL").is_none(),
                "a python3 with `{modules}` is required (apt-get install python3-numpy python3-lammps)"
            );
            eprintln!("skipped: no python3 with {modules}");
            return None;
        };
        Some(Python {
            exe: PathBuf::from(exe),
            module_dir: Some(built_module()),
        })
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
        .and_then(|s| s.split([',', ' ']).next())
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
