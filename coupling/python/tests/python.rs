//! Runs the Python checks and examples against the module `mpcbox`.
//!
//! In CI (`.ci/run`) the module is the wheel maturin built, installed into a virtual
//! environment whose interpreter MPCBOX_PYTHON names; these tests then check that this installed
//! module is the one imported. Elsewhere they use the library this build made
//! (target/<profile>/libmpcbox_python.so, loaded as `mpcbox`) with a Python 3 that has numpy
//! (and the `lammps` module for the LAMMPS example). They run where MPCBOX_REQUIRE_EXTERNAL is
//! set (CI installs Python's packages; a missing one fails them with its install line) and are
//! ignored elsewhere. The test over MPI ranks builds its own module with `--features mpi` and
//! runs it under `mpirun` (mpi4py).

use std::path::{Path, PathBuf};
use std::process::Command;

/// A Python interpreter and, when the module is not installed, a directory holding it.
struct Python {
    exe: PathBuf,
    module_dir: Option<tempfile::TempDir>,
}

impl Python {
    /// The interpreter for scripts that import `modules` (besides mpcbox).
    fn with(modules: &str) -> Python {
        let (exe, installed) = interpreter(modules);
        let py = Python {
            exe,
            module_dir: (!installed).then(built_module),
        };
        if installed {
            py.assert_installed_module();
        }
        py
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

impl Python {
    /// Start the interpreter with `args` in `dir`, its output piped.
    fn spawn(&self, dir: &Path, args: &[&str]) -> std::process::Child {
        let mut cmd = Command::new(&self.exe);
        cmd.args(args)
            .current_dir(dir)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        if let Some(m) = &self.module_dir {
            cmd.env("PYTHONPATH", m.path());
        }
        cmd.spawn().unwrap()
    }
}

/// MPCBOX_PYTHON (true: it has the wheel installed), or a python3 here that imports `modules`
/// (a missing one fails the test with the install line).
fn interpreter(modules: &str) -> (PathBuf, bool) {
    if let Some(exe) = std::env::var_os("MPCBOX_PYTHON") {
        return (PathBuf::from(exe), true);
    }
    let found = ["/usr/bin/python3", "python3"].into_iter().find(|exe| {
        Command::new(exe)
            .args(["-c", &format!("import {modules}")])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    match found {
        Some(exe) => (PathBuf::from(exe), false),
        None => missing(
            &format!("a python3 with `{modules}`"),
            "apt-get install python3-numpy python3-lammps python3-mpi4py",
        ),
    }
}

/// A test that needs a tool runs where MPCBOX_REQUIRE_EXTERNAL is set and is ignored
/// elsewhere: a missing tool fails it with the install line.
fn missing(what: &str, fix: &str) -> ! {
    panic!("{what} is missing; fix: {fix}")
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
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs python3 with numpy (apt-get install python3-numpy); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn python_module_checks() {
    let py = Python::with("numpy");
    let out = py.run(&[&here("tests/check_module.py")]);
    assert!(out.contains("python module ok"), "{out}");
}

#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs python3 with numpy (apt-get install python3-numpy); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn python_config_and_job_checks() {
    let py = Python::with("numpy");
    let out = py.run(&[&here("tests/check_config.py"), &here("../..")]);
    assert!(out.contains("python config ok"), "{out}");
}

/// The tutorial script: a sheared fluid job end to end (kT, profile slope) and a coupled loop
/// whose solutes reach the fluid's temperature (momentum checked by the script every step).
#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs python3 with numpy (apt-get install python3-numpy); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn configured_example_runs() {
    let py = Python::with("numpy");
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
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs python3 with numpy and LAMMPS (apt-get install python3-numpy python3-lammps); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn lammps_python_example_runs() {
    let py = Python::with("numpy, lammps");
    let out = py.run(&[&here("examples/lammps_polymer.py"), "150"]);
    let kt = number_after(&out, "bead kT = ");
    assert!(
        (kt - 1.0).abs() < 0.15,
        "beads at kT = {kt}, expected 1:\n{out}"
    );
}

/// Wait until `file` has `lines` lines (the job is under way), at most 60 s.
fn wait_for_lines(file: &Path, lines: usize) {
    let t = std::time::Instant::now();
    while std::fs::read_to_string(file).map_or(0, |s| s.lines().count()) < lines {
        assert!(t.elapsed().as_secs() < 60, "{} never grew", file.display());
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// A job of `tests/check_jobs.py run` stopped by `signal` once it has written some rows: its
/// output, and the step its summary (marked interrupted) and checkpoint stopped at.
fn stopped_job(py: &Python, signal: &str, extra: &[&str]) -> (std::process::Output, u64) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("job");
    let mut args = vec![
        here("tests/check_jobs.py"),
        "run".into(),
        out.display().to_string(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let child = py.spawn(dir.path(), &args);
    wait_for_lines(&out.join("observables.csv"), 3);
    let sent = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let o = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&o.stderr);
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("summary.json"))
            .unwrap_or_else(|e| panic!("no summary after SIG{signal} ({e}):\n{text}")),
    )
    .unwrap();
    assert_eq!(summary["interrupted"], true, "{summary}");
    let step = summary["steps"].as_u64().unwrap();
    let ck = ::mpcbox::Checkpoint::load(&out.join("checkpoint.mpcbox")).unwrap();
    assert_eq!(ck.step, step, "the checkpoint is not the summary's step");
    assert!(step > 0, "{summary}");
    (o, step)
}

/// SIGTERM stops a Python job as it stops `mpcbox run`: after the step in progress, with its
/// checkpoint and summary written, and the interpreter then ends with the message (SystemExit:
/// status 1) instead of dying on the spot without a checkpoint.
#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs python3 with numpy (apt-get install python3-numpy); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn sigterm_stops_a_python_job_with_its_checkpoint_and_summary() {
    let py = Python::with("numpy");
    let (o, step) = stopped_job(&py, "TERM", &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("stopped by request after step {step}"))
            && err.contains("mpcbox.run(resume="),
        "{err}"
    );
}

/// A job started with SIGINT ignored (nohup, `job &` in a script) still stops on SIGINT, with
/// its checkpoint, in KeyboardInterrupt; the handler it found (ignored) is put back after.
#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs python3 with numpy (apt-get install python3-numpy); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn sigint_stops_a_python_job_that_inherited_it_ignored() {
    let py = Python::with("numpy");
    let (o, step) = stopped_job(&py, "INT", &["--ignore-sigint"]);
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{out}{err}");
    assert!(
        out.contains(&format!(
            "KeyboardInterrupt: stopped by request after step {step}"
        )) && out.contains("SIGINT handler after the job: <Handlers.SIG_IGN: 1>"),
        "{out}"
    );
}

/// `mpcbox.run` shows its progress (lines on stderr where it is no terminal; here one per
/// step, `progress=0`), and nothing with `progress=False`.
#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs python3 with numpy (apt-get install python3-numpy); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn python_jobs_show_progress_unless_asked_not_to() {
    let py = Python::with("numpy");
    let dir = tempfile::tempdir().unwrap();
    let text = py.run(&[
        &here("tests/check_jobs.py"),
        "progress",
        dir.path().to_str().unwrap(),
    ]);
    let (lines, quiet) = text
        .split_once("--- progress=False")
        .unwrap_or_else(|| panic!("{text}"));
    assert!(quiet.contains("--- done"), "{text}");
    for step in [1, 15, 30] {
        assert!(
            lines.contains(&format!("mpcbox: step {step}/30: ")),
            "{text}"
        );
    }
    assert!(!quiet.contains("mpcbox: step"), "{text}");
}

/// CuPy and PyTorch arrays on the fluid's GPU (`tests/check_cuda.py`): the same collision as
/// numpy's to rounding, momentum conserved, and bad arrays (dtype, shape, Fortran-ordered,
/// transposed) refused naming the array and the fix, nothing changed.
#[test]
#[ignore = "needs a CUDA GPU, CuPy and PyTorch (pip install cupy-cuda13x torch)"]
fn cuda_arrays_from_cupy_and_pytorch() {
    let py = Python::with("numpy, cupy, torch");
    let out = py.run(&[&here("tests/check_cuda.py")]);
    assert!(
        out.contains("ALL OK") && out.contains("refused: `pos` has strides"),
        "{out}"
    );
}

/// One box over MPI ranks from Python (`tests/check_ranks.py`, mpi4py): each rank hands mpcbox
/// its communicator (MPI.COMM_WORLD, a duplicate, or the Fortran handle as an int) and steps a
/// sheared fluid for 20 steps with the solutes it holds (solute j on rank j % size, some a
/// period or two beyond the box in y). On 1, 2 and 3 ranks py and pz of fluid + solutes are
/// conserved and the solutes follow the shear flow through the Lees-Edwards images; on 2 and
/// 3 every solute's velocity and px equal the 1-rank run's to 1e-9. A communicator handed over
/// after a Solvent exists is refused, and the script runs without arguments as the docs show.
///
/// The module is the library built with `--features mpi` into `target/mpi` (the `cargo test`
/// target directory is locked while tests run; CI's wheel is built without MPI), put first
/// on PYTHONPATH as `mpcbox.so`; the script checks that it runs over the ranks.
#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs python3 with numpy and mpi4py, OpenMPI and libclang (apt-get install python3-numpy python3-mpi4py openmpi-bin libopenmpi-dev libclang-dev); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn python_ranks_couple_their_own_solutes_under_mpirun() {
    let (exe, _) = interpreter("numpy, mpi4py");
    let imports = Command::new(&exe)
        .args(["-c", "import numpy, mpi4py"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !imports {
        missing(
            &format!("mpi4py for {}", exe.display()),
            "apt-get install python3-mpi4py",
        );
    }
    if Command::new("mpirun").arg("--version").output().is_err() {
        missing("mpirun", "apt-get install openmpi-bin libopenmpi-dev");
    }
    let module = mpi_module();
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
    // as the docs show it: no arguments, its output directory made where it runs
    let text = mpirun(1, &[]);
    assert!(text.contains("python ranks ok"), "{text}");
    assert!(dir.path().join("out/python_ranks/result.npz").exists());
}

/// The rest of the line after `key` in `text`.
fn line_after<'a>(text: &'a str, key: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .unwrap_or_else(|| panic!("no `{key}` in:\n{text}"))
}

/// The module built with `--features mpi`, as `mpcbox.so` in a directory of its own.
fn mpi_module() -> tempfile::TempDir {
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
                "what the Python module with `--features mpi` builds with (build failed:\n{})",
                String::from_utf8_lossy(&out.stderr)
            ),
            "apt-get install libopenmpi-dev libclang-dev",
        );
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        target.join("debug/libmpcbox_python.so"),
        dir.path().join("mpcbox.so"),
    )
    .unwrap();
    dir
}
