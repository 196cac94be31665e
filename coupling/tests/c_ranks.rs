//! The C ABI over MPI ranks: `coupling/examples/demo_ranks.c` (each rank hands mpcbox
//! `MPI_COMM_WORLD` and the solutes it holds) built with `mpicc` against the library built with
//! the `mpi` feature (into `target/mpi`: the `cargo test` target directory is locked while the
//! tests run), and run under `mpirun --oversubscribe` on 1, 2 and 3 ranks: every solute's
//! velocity equals the 1-rank run's to 1e-9 and fluid + solute momentum is conserved. The
//! demo also checks that a communicator handed over once a solvent exists is refused with the
//! fix (it aborts otherwise, failing the run).

mod common;

use std::path::Path;
use std::process::Command;

use common::{compile_c, crate_dir, missing, output_of, require, run};

#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs OpenMPI and libclang (apt-get install openmpi-bin libopenmpi-dev libclang-dev); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn a_c_program_couples_its_solutes_per_rank_under_mpirun() {
    require("mpicc", "apt-get install libopenmpi-dev");
    require("mpirun", "apt-get install openmpi-bin");
    let here = crate_dir();
    let root = here.parent().unwrap();
    let target = root.join("target").join("mpi");
    let (ok, log) = output_of(
        Command::new(env!("CARGO"))
            .current_dir(root)
            .args([
                "build",
                "--quiet",
                "-p",
                "mpcbox-coupling",
                "--features",
                "mpi",
            ])
            .arg("--target-dir")
            .arg(&target),
    );
    if !ok {
        missing(
            &format!("what the coupling library with `--features mpi` builds with (build failed:\n{log})"),
            "apt-get install libopenmpi-dev libclang-dev",
        );
    }
    let lib = target.join("debug");
    let tmp = tempfile::tempdir().unwrap();
    let exe = tmp.path().join("demo_ranks");
    compile_c("mpicc", &here.join("examples/demo_ranks.c"), &lib, &exe);
    let solutes = |ranks: usize| -> Vec<[f64; 3]> {
        let out = tmp.path().join(format!("r{ranks}"));
        std::fs::create_dir_all(&out).unwrap();
        // the MPI build of the library first: `cargo test` puts its own (without MPI) on
        // LD_LIBRARY_PATH, which the loader searches before the executable's run path
        let text = run(Command::new("timeout")
            .env("LD_LIBRARY_PATH", &lib)
            .args([
                "120",
                "mpirun",
                "--oversubscribe",
                "--allow-run-as-root",
                "-np",
            ])
            .arg(ranks.to_string())
            .arg(&exe)
            .arg(&out));
        let line = text
            .lines()
            .find(|l| l.starts_with("momentum "))
            .unwrap_or_else(|| panic!("{ranks} ranks: no momentum line in\n{text}"));
        let p: Vec<f64> = line
            .split([' ', '>'])
            .filter_map(|x| x.parse().ok())
            .collect();
        for k in 0..3 {
            assert!(
                (p[k] - p[k + 3]).abs() < 1e-9,
                "{ranks} ranks: momentum not conserved: {line}"
            );
        }
        read_solutes(&out, ranks)
    };
    let one = solutes(1);
    for ranks in [2, 3] {
        for (j, (a, b)) in one.iter().zip(solutes(ranks)).enumerate() {
            for k in 0..3 {
                assert!(
                    (a[k] - b[k]).abs() <= 1e-9,
                    "{ranks} ranks, solute {j}: {a:?} vs {b:?}"
                );
            }
        }
    }
}

/// Every rank's "j vx vy vz" lines, by solute index.
fn read_solutes(dir: &Path, ranks: usize) -> Vec<[f64; 3]> {
    let mut v = vec![[f64::NAN; 3]; 120];
    for r in 0..ranks {
        let text = std::fs::read_to_string(dir.join(format!("solutes_{r}.txt"))).unwrap();
        for line in text.lines() {
            let w: Vec<f64> = line.split(' ').map(|x| x.parse().unwrap()).collect();
            v[w[0] as usize] = [w[1], w[2], w[3]];
        }
    }
    assert!(
        v.iter().all(|x| x[0].is_finite()),
        "a solute came back from no rank"
    );
    v
}
