//! One owner per output directory, through every door of the command: a resume into a
//! directory holding another run is refused naming that run and how to continue it (and with
//! `--overwrite` replaces it whole); a resume without `--output` continues where its
//! checkpoint lies. CPU backend, small boxes.

use std::path::Path;

use crate::faults::{config, resume, run, stderr};

fn run_id(dir: &Path) -> String {
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    s["run_id"].as_str().unwrap().to_string()
}

/// The first column (steps) of the rows of an observables file.
fn steps_of(csv: &str) -> Vec<u64> {
    csv.lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap().parse().unwrap())
        .collect()
}

#[test]
fn a_resume_into_another_runs_directory_is_refused_unless_overwriting() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for (name, out) in [("a.ron", &a), ("b.ron", &b)] {
        let c = config(dir.path(), name, out, 40, "");
        let o = run(&["run", c.to_str().unwrap(), "--quiet"]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let (id_a, id_b) = (run_id(&a), run_id(&b));
    assert_ne!(id_a, id_b, "two runs share a run id");
    let csv_a = std::fs::read(a.join("observables.csv")).unwrap();
    let ck_a = std::fs::read(a.join("checkpoint.mpcbox")).unwrap();
    let ck_b = b.join("checkpoint.mpcbox");
    let a_arg = a.to_str().unwrap();

    let o = resume(None, &ck_b, 60, &["--output", a_arg]);
    assert!(!o.status.success(), "b resumed into a's directory");
    let e = stderr(&o);
    let a_ck = a.join("checkpoint.mpcbox").display().to_string();
    assert!(
        e.contains("config field `--output`")
            && e.contains(&format!("{a_arg} holds the files of another run"))
            && e.contains(&format!("run {id_a}"))
            && e.contains(&format!("mpcbox run --resume {a_ck}"))
            && e.contains("--overwrite"),
        "{e}"
    );
    assert_eq!(std::fs::read(a.join("observables.csv")).unwrap(), csv_a);
    assert_eq!(std::fs::read(a.join("checkpoint.mpcbox")).unwrap(), ck_a);

    // asked to overwrite: a's directory then holds b's continuation alone, none of a's rows,
    // as a branch of b (a run of its own: it can never be joined to b's directory either)
    let o = resume(None, &ck_b, 60, &["--output", a_arg, "--overwrite"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let branch = run_id(&a);
    assert!(branch != id_a && branch != id_b, "{branch}");
    let rows = steps_of(&std::fs::read_to_string(a.join("observables.csv")).unwrap());
    assert_eq!(rows, vec![45, 50, 55, 60], "rows of the resumed run only");
    let record = std::fs::read_to_string(a.join(".mpcbox.run")).unwrap();
    assert!(record.contains(&branch), "{record}");
    let ck = mpcbox::Checkpoint::load(&a.join("checkpoint.mpcbox")).unwrap();
    assert_eq!((ck.step, ck.run_id.as_deref()), (60, Some(branch.as_str())));

    // a run continues in its own directory as before
    let o = resume(None, &ck_b, 80, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = steps_of(&std::fs::read_to_string(b.join("observables.csv")).unwrap());
    assert_eq!(rows.len(), 16, "{rows:?}");
    assert_eq!(run_id(&b), id_b);
}

/// A fresh run is refused in a directory of another run, a resumed one is not refused in its
/// own: the directory's record and the checkpoint's run id agree.
#[test]
fn a_fresh_run_into_a_resumed_runs_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o");
    let c = config(dir.path(), "c.ron", &out, 20, "");
    assert!(run(&["run", c.to_str().unwrap(), "--quiet"])
        .status
        .success());
    let id = run_id(&out);
    let o = resume(None, &out.join("checkpoint.mpcbox"), 30, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&["run", c.to_str().unwrap(), "--quiet"]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("config field `output.directory`") && e.contains(&format!("run {id}")),
        "{e}"
    );
}

/// Without `--output`, a resume writes into the directory that holds its checkpoint (here a
/// run's directory moved elsewhere), not the one its config named.
#[test]
fn a_resume_without_output_continues_where_the_checkpoint_lies() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first");
    let c = config(dir.path(), "c.ron", &first, 20, "");
    assert!(run(&["run", c.to_str().unwrap(), "--quiet"])
        .status
        .success());
    let moved = dir.path().join("moved");
    std::fs::rename(&first, &moved).unwrap();
    let o = resume(None, &moved.join("checkpoint.mpcbox"), 40, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!first.exists(), "the config's directory was written");
    let rows = steps_of(&std::fs::read_to_string(moved.join("observables.csv")).unwrap());
    assert_eq!(rows, vec![5, 10, 15, 20, 25, 30, 35, 40]);
}

/// A checkpoint continued in a new directory starts a branch there (a run of its own): the
/// run it came from, resumed into that directory later, is refused, so two histories from one
/// checkpoint never meet in one file.
#[test]
fn a_branch_and_the_run_it_came_from_never_share_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let (a, c) = (dir.path().join("a"), dir.path().join("c"));
    let cfg = config(dir.path(), "a.ron", &a, 20, ", checkpoint_interval: 20");
    assert!(run(&["run", cfg.to_str().unwrap(), "--quiet"])
        .status
        .success());
    let ck_a = a.join("checkpoint.mpcbox");
    let at_20 = dir.path().join("at20.mpcbox");
    std::fs::copy(&ck_a, &at_20).unwrap();
    let c_arg = c.to_str().unwrap();
    let o = resume(None, &ck_a, 40, &["--output", c_arg]);
    assert!(o.status.success(), "{}", stderr(&o));
    let (id_a, id_c) = (run_id(&a), run_id(&c));
    assert_ne!(id_a, id_c, "the branch kept its origin's run id");
    // a continued in its own directory; then its checkpoint, resumed into the branch: refused
    assert!(resume(None, &ck_a, 30, &[]).status.success());
    let o = resume(None, &ck_a, 50, &["--output", c_arg]);
    assert!(
        !o.status.success(),
        "a's history was joined to its branch's"
    );
    let e = stderr(&o);
    assert!(e.contains(&format!("run {id_c}")), "{e}");
    // as is the copy of the checkpoint both came from
    let o = resume(None, &at_20, 50, &["--output", c_arg]);
    assert!(!o.status.success());
    let rows = steps_of(&std::fs::read_to_string(c.join("observables.csv")).unwrap());
    assert_eq!(rows, vec![25, 30, 35, 40]);
}
