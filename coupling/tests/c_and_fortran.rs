//! The C ABI from C and Fortran: the demos in coupling/examples are compiled against the
//! generated header / Fortran module and the library this build produced, then run.

mod common;

use std::process::Command;

use common::{compile_c, crate_dir, lib_dir, require, run};

#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs a C and a C++ compiler (apt-get install gcc g++); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn c_demo_builds_runs_and_conserves_momentum() {
    require("cc", "apt-get install gcc");
    require("c++", "apt-get install g++");
    let here = crate_dir();
    let lib = lib_dir();
    let tmp = tempfile::tempdir().unwrap();
    let exe = tmp.path().join("demo");
    compile_c("cc", &here.join("examples/demo.c"), &lib, &exe);
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

#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs gfortran (apt-get install gfortran); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn fortran_demo_builds_and_runs() {
    require("gfortran", "apt-get install gfortran");
    let here = crate_dir();
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
