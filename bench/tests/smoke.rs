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
