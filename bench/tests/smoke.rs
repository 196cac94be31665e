//! The runner on the CPU at small sizes: every scenario that runs there records its cases, and
//! the report turns the records into the performance page.

use std::path::Path;
use std::process::Command;

fn bench(records: &Path, args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_mpcbox-bench"))
        .arg("--records")
        .arg(records)
        .args(args)
        .output()
        .expect("mpcbox-bench runs");
    assert!(
        out.status.success(),
        "mpcbox-bench {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn cpu_scenarios_record_their_cases_and_the_report_shows_them() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("records");
    let small = ["--steps", "2", "--warmup", "1"];
    bench(
        &rec,
        &[&["fluid", "--sizes", "6", "--repeats", "1"][..], &small].concat(),
    );
    bench(
        &rec,
        &[
            &["rules", "--device", "cpu", "--sizes", "6", "--shear", "no"][..],
            &small,
        ]
        .concat(),
    );
    bench(
        &rec,
        // 16 cells: every shape fits (the obstacles of radius L/4 need 2 cells at least)
        &[&["walls", "--device", "cpu", "--sizes", "16"][..], &small].concat(),
    );
    bench(
        &rec,
        &[&["sums", "--device", "cpu", "--sizes", "6"][..], &small].concat(),
    );
    bench(
        &rec,
        &[
            &["coupling", "--sizes", "6", "--densities", "0.5"][..],
            &small,
        ]
        .concat(),
    );
    bench(
        &rec,
        &[
            "md",
            "--cells",
            "3",
            "--steps",
            "10",
            "--threads",
            "1",
            "--repeat",
            "1",
            "--no-lammps",
        ],
    );
    bench(&rec, &["md-drift", "--cells", "3", "--steps", "50"]);
    bench(
        &rec,
        &[
            "polymer",
            "--device",
            "cpu",
            "--cells",
            "6",
            "--chains",
            "2",
            "--chain-length",
            "4",
            "--collisions",
            "2",
            "--warmup",
            "1",
        ],
    );
    let scratch = dir.path().join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    bench(
        &rec,
        &[
            "checkpoint",
            "--sizes",
            "6",
            "--parts",
            "2",
            "--reference-mib",
            "16",
            "--dir",
            scratch.to_str().unwrap(),
        ],
    );
    let files: Vec<_> = std::fs::read_dir(&rec)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "one machine kind, one file: {files:?}");
    let lines = std::fs::read_to_string(&files[0]).unwrap();
    for scenario in [
        "fluid",
        "rules",
        "walls",
        "sums",
        "coupling",
        "md",
        "md-drift",
        "polymer",
        "checkpoint",
    ] {
        let tag = format!("\"scenario\":\"{scenario}\"");
        assert!(
            lines.lines().any(|l| l.contains(&tag)),
            "no {scenario} record:\n{lines}"
        );
    }
    assert!(lines
        .lines()
        .all(|l| l.contains("\"host copy GB/s\"") && l.contains("\"commit\"")));
    let page = dir.path().join("performance.md");
    bench(&rec, &["report", "--out", page.to_str().unwrap()]);
    let text = std::fs::read_to_string(&page).unwrap();
    assert!(
        text.contains("## CPU: ") && text.contains("### `rules`"),
        "{text}"
    );
    assert!(text.contains("| 6³ | 10 | MPC-AT+a | no |"), "{text}");
}

#[test]
fn a_gpu_scenario_without_a_gpu_fails_naming_the_cause() {
    if mpcbox::backend::cuda::probe().is_ok() {
        return; // a GPU machine runs it for real
    }
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mpcbox-bench"))
        .args([
            "--records",
            dir.path().to_str().unwrap(),
            "gpu",
            "--sizes",
            "8",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("needs a CUDA GPU"), "{err}");
}

/// The `mpcbox` command the `production` scenario runs: `MPCBOX_BIN` where set, else the one
/// cargo built beside mpcbox-bench (`cargo build --workspace`; another package's binary, so
/// not built by `cargo test -p mpcbox-bench` alone).
fn mpcbox_command() -> Option<std::path::PathBuf> {
    std::env::var_os("MPCBOX_BIN")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            Path::new(env!("CARGO_BIN_EXE_mpcbox-bench"))
                .parent()
                .map(|d| d.join("mpcbox"))
        })
        .filter(|p| p.is_file())
}

#[test]
fn production_runs_the_mpcbox_command_and_records_each_case() {
    let Some(mpcbox) = mpcbox_command() else {
        assert!(
            std::env::var("MPCBOX_REQUIRE_EXTERNAL").is_ok_and(|v| v.is_empty() || v == "0")
                || std::env::var_os("MPCBOX_REQUIRE_EXTERNAL").is_none(),
            "no mpcbox command beside mpcbox-bench; fix: cargo build --workspace"
        );
        eprintln!(
            "skipped: no mpcbox command beside mpcbox-bench (cargo build -p mpcbox first, or \
             set MPCBOX_BIN)"
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("records");
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    bench(
        &rec,
        &[
            "production",
            "--cells",
            "8",
            "--device",
            "cpu",
            "--steps",
            "20",
            "--ck-steps",
            "40",
            "--ck-every",
            "20",
            "--reference-mib",
            "16",
            "--dir",
            dir.path().to_str().unwrap(),
            "--examples",
            examples.to_str().unwrap(),
            "--mpcbox",
            mpcbox.to_str().unwrap(),
        ],
    );
    let file = std::fs::read_dir(&rec)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let records: Vec<serde_json::Value> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let runs: Vec<&str> = records
        .iter()
        .map(|r| {
            assert_eq!(r["scenario"], "production", "{r}");
            assert!(
                r["references"]["host copy GB/s"].as_f64().unwrap() > 0.0,
                "{r}"
            );
            r["case"][0][1].as_str().unwrap()
        })
        .collect();
    assert_eq!(
        runs,
        [
            "cold-1gpu",
            "cold-walls",
            "warm-1gpu",
            "warm-all",
            "ck-none",
            "ck-20",
            "ck-20-blocking",
            "resume-all",
            "resume-1gpu"
        ]
    );
    let field = |r: &serde_json::Value, name: &str| {
        let figures = r["figures"].as_array().unwrap();
        let f = figures.iter().find(|f| f[0] == name);
        f.unwrap_or_else(|| panic!("no {name}: {r}"))[1].as_f64()
    };
    let case = |r: &serde_json::Value, name: &str| {
        let case = r["case"].as_array().unwrap();
        case.iter().find(|c| c[0] == name).unwrap()[1].clone()
    };
    for (r, run) in records.iter().zip(&runs) {
        let particles = if *run == "cold-walls" { 120_320 } else { 5120 };
        assert_eq!(case(r, "particles"), particles, "{r}");
        assert_eq!(case(r, "GPUs"), 0, "{r}");
        for name in [
            "start-up s",
            "stepping G p-s/s",
            "run loop G p-s/s",
            "peak host GiB",
        ] {
            assert!(field(r, name).is_some_and(|v| v > 0.0), "{name}: {r}");
        }
        let written = field(r, "checkpoints").unwrap();
        assert_eq!(written, if *run == "ck-20" { 2.0 } else { 1.0 }, "{r}");
        // written in the background only by the checkpointed runs that are not blocking
        let background = field(r, "background GB/s");
        assert_eq!(background.is_some(), *run == "ck-20", "{r}");
        let resumed = run.starts_with("resume");
        assert_eq!(field(r, "resume read GB/s").is_some(), resumed, "{r}");
        let steps = match *run {
            "ck-none" | "ck-20-blocking" => 20,
            "ck-20" => 40,
            _ => 10,
        };
        assert_eq!(case(r, "steps"), steps, "{r}");
        assert_eq!(case(r, "kernel cache"), "–", "{r}");
    }
    let page = dir.path().join("performance.md");
    bench(&rec, &["report", "--out", page.to_str().unwrap()]);
    let text = std::fs::read_to_string(&page).unwrap();
    assert!(text.contains("### `production`"), "{text}");
    assert!(
        text.contains("| resume-1gpu | 8³ | 5120 | 0 | 10 |"),
        "{text}"
    );
    // the runs' files are removed
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 2, "{left:?}");
}
