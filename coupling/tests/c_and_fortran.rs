//! The C ABI from C and Fortran: the demos in coupling/examples are compiled against the
//! generated header / Fortran module and the library this build produced, then run.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The directory holding libmpcbox_coupling.so of this build (target/<profile>).
fn lib_dir() -> PathBuf {
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

/// External tools are required in CI (MPCBOX_REQUIRE_EXTERNAL=1); elsewhere a missing one skips.
fn have(tool: &str) -> bool {
    let ok = Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("MPCBOX_REQUIRE_EXTERNAL").is_none(),
            "{tool} is required (MPCBOX_REQUIRE_EXTERNAL is set)"
        );
        eprintln!("skipped: {tool} not installed (apt-get install {tool})");
    }
    ok
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

#[test]
fn c_demo_builds_runs_and_conserves_momentum() {
    if !have("cc") {
        return;
    }
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = lib_dir();
    let tmp = tempfile::tempdir().unwrap();
    let exe = tmp.path().join("demo");
    run(Command::new("cc")
        .arg(here.join("examples/demo.c"))
        .arg("-I")
        .arg(here.join("include"))
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-lmpcbox_coupling", "-lm", "-Wall", "-Werror", "-o"])
        .arg(&exe));
    let out = run(&mut Command::new(&exe));
    assert!(
        out.contains("bad config rejected: config field `time_step`"),
        "{out}"
    );
    assert!(
        out.contains("NaN refused: solute input `velocities`"),
        "{out}"
    );
    assert!(out.contains("momentum conserved"), "{out}");
    // the header also compiles as C++
    if Command::new("c++").arg("--version").output().is_ok() {
        let cpp = tmp.path().join("t.cpp");
        std::fs::write(&cpp, "#include \"mpcbox.h\"\nint main() { return mpcbox_fluid_particles(nullptr) == 0 ? 0 : 1; }\n").unwrap();
        run(Command::new("c++")
            .arg(&cpp)
            .arg("-I")
            .arg(here.join("include"))
            .arg("-c")
            .arg("-o")
            .arg(tmp.path().join("t.o")));
    }
}

#[test]
fn fortran_demo_builds_and_runs() {
    if !have("gfortran") {
        return;
    }
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = lib_dir();
    let tmp = tempfile::tempdir().unwrap();
    let exe = tmp.path().join("demo_f");
    run(Command::new("gfortran")
        .arg(format!("-J{}", tmp.path().display()))
        .arg(here.join("include/mpcbox.f90"))
        .arg(here.join("examples/demo.f90"))
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-lmpcbox_coupling", "-o"])
        .arg(&exe));
    let out = run(&mut Command::new(&exe));
    assert!(
        out.contains("negative mass refused: solute input `masses`"),
        "{out}"
    );
    assert!(out.contains("fortran ok"), "{out}");
}
