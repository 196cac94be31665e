//! Helpers shared by the tests that drive external programs (C, Fortran, LAMMPS).

#![allow(dead_code)] // each test binary uses its own subset

use std::path::{Path, PathBuf};
use std::process::Command;

/// The directory holding libmpcbox_coupling.so of this build (target/<profile>).
pub fn lib_dir() -> PathBuf {
    // `cargo test` leaves the library next to the test executable (target/<profile>/deps);
    // `cargo build` copies it one level up.
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let dir = [deps, deps.parent().unwrap()]
        .into_iter()
        .find(|d| d.join("libmpcbox_coupling.so").exists())
        .unwrap_or_else(|| panic!("libmpcbox_coupling.so not found near {}", deps.display()))
        .to_path_buf();
    dir
}

/// The build's profile directory (target/<profile>), for build products of the tests.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

/// A test that drives external tools runs where MPCBOX_REQUIRE_EXTERNAL is set (CI installs
/// them) and is ignored elsewhere; a missing tool then fails it with the install line.
pub fn missing(what: &str, install: &str) -> ! {
    panic!("{what} is missing; fix: {install}")
}

/// `tool --version` must run (else the test fails naming `install`).
pub fn require(tool: &str, install: &str) {
    let ok = Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        missing(tool, install)
    }
}

/// Run a command; its stdout and stderr together, and whether it succeeded.
pub fn output_of(cmd: &mut Command) -> (bool, String) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?} did not start: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Run a command that must succeed; its output.
pub fn run(cmd: &mut Command) -> String {
    let (ok, text) = output_of(cmd);
    assert!(ok, "{cmd:?} failed:\n{text}");
    text
}

/// The coupling crate's directory.
pub fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Compile and link `source` with `compiler` (cc, mpicc) against the header and the
/// libmpcbox_coupling.so in `lib` (its run path set), warnings as errors, into `exe`.
pub fn compile_c(compiler: &str, source: &Path, lib: &Path, exe: &Path) {
    run(Command::new(compiler)
        .arg(source)
        .arg("-I")
        .arg(crate_dir().join("include"))
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-lmpcbox_coupling", "-lm", "-Wall", "-Werror", "-o"])
        .arg(exe));
}
