//! Runs the Python checks and the LAMMPS-Python example against the module this build made
//! (target/<profile>/libmpcbox_python.so, loaded as `mpcbox`). Needs a Python 3 with numpy (and the
//! `lammps` module for the example); CI sets MPCBOX_REQUIRE_EXTERNAL=1 so missing ones fail.

use std::path::{Path, PathBuf};
use std::process::Command;

fn python_with(modules: &str) -> Option<PathBuf> {
    for exe in ["/usr/bin/python3", "python3"] {
        let ok = Command::new(exe)
            .args(["-c", &format!("import {modules}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(PathBuf::from(exe));
        }
    }
    assert!(
        std::env::var_os("MPCBOX_REQUIRE_EXTERNAL").is_none(),
        "a python3 with `{modules}` is required (apt-get install python3-numpy python3-lammps)"
    );
    eprintln!("skipped: no python3 with {modules}");
    None
}

/// A directory holding the built module as mpcbox.so.
fn module_dir() -> tempfile::TempDir {
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

fn run_python(py: &Path, module: &Path, args: &[&str]) -> String {
    let out = Command::new(py)
        .args(args)
        .env("PYTHONPATH", module)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "python {args:?} failed:\n{text}");
    text
}

#[test]
fn python_module_checks() {
    let Some(py) = python_with("numpy") else {
        return;
    };
    let dir = module_dir();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/check_module.py");
    let out = run_python(&py, dir.path(), &[script.to_str().unwrap()]);
    assert!(out.contains("python module ok"), "{out}");
}

#[test]
fn lammps_python_example_runs() {
    let Some(py) = python_with("numpy, lammps") else {
        return;
    };
    let dir = module_dir();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/lammps_polymer.py");
    let out = run_python(&py, dir.path(), &[example.to_str().unwrap(), "150"]);
    let kt: f64 = out
        .split("bead kT = ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("no bead temperature in:\n{out}"));
    assert!(
        (kt - 1.0).abs() < 0.15,
        "beads at kT = {kt}, expected 1:\n{out}"
    );
}
