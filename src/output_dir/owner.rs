//! Whose files an output directory holds. Every run has an id: recorded in the directory
//! ([`RUN_FILE`]) when the run starts writing there, and carried in its checkpoints, so that a
//! resume knows its own run. A run writes into a directory that holds nothing of another run,
//! or its own files; a directory holding another run's files is refused unless overwriting was
//! asked for, naming the directory, that run and how to continue it. Every door applies this
//! one rule: `mpcbox run` (fresh and resumed), Python's `mpcbox.run` and `Solvent.run`, and the
//! C and Python checkpoint writers.
//!
//! A checkpoint written before run ids has none: it is given one derived from where it lies
//! ([`legacy_run_id`]), so the run continued in its own directory is that directory's owner,
//! while a copy of it elsewhere counts as another run.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{ConfigError, MpcError, Result};
use crate::report::{CHECKPOINT_FILE, OBSERVABLES_CSV, PROFILE_CSV, PROFILE_SVG, SUMMARY_JSON};

/// The file naming the run an output directory belongs to.
pub const RUN_FILE: &str = ".mpcbox.run";

/// A fresh run id: 16 random hex digits.
pub fn new_run_id() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// The run id of a checkpoint written before run ids, from its place on disk.
pub fn legacy_run_id(path: &Path) -> String {
    let place = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in place.as_os_str().as_encoded_bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("legacy-{h:016x}")
}

/// `secs` since the Unix epoch as "YYYY-MM-DD hh:mm:ss UTC".
pub fn utc_text(secs: u64) -> String {
    // days to the civil date (H. Hinnant's algorithm, proleptic Gregorian calendar)
    let days = (secs / 86_400) as i64 + 719_468;
    let era = days.div_euclid(146_097);
    let doe = days - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let s = secs % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// Now, as [`utc_text`].
pub fn now_text() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    utc_text(secs)
}

/// What [`RUN_FILE`] holds.
#[derive(Serialize, Deserialize)]
struct RunRecord {
    run_id: String,
    started: String,
    pid: u32,
    host: String,
}

/// The host's name, for people reading the record.
pub(super) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "unknown host".into())
}

/// Who holds the files of a directory.
#[derive(Debug, Clone, PartialEq)]
enum Owner {
    /// No run's files.
    Nobody,
    /// The run `id`; its start time where recorded, its checkpoint (path, step) where present.
    Run {
        id: String,
        started: Option<String>,
        checkpoint: Option<(PathBuf, u64)>,
    },
    /// A record or checkpoint that cannot be read (`evidence`).
    Unknown { evidence: PathBuf },
}

/// The run id and step of the checkpoint at `path`; None when it cannot be read.
fn checkpoint_identity(path: &Path) -> Option<(String, u64)> {
    let f = crate::checkpoint::CheckpointFile::open(path).ok()?;
    Some((f.head.run_id.clone()?, f.head.step))
}

fn owner_of(dir: &Path) -> Owner {
    let ck_path = dir.join(CHECKPOINT_FILE);
    let ck = ck_path
        .exists()
        .then(|| checkpoint_identity(&ck_path))
        .flatten();
    let record_path = dir.join(RUN_FILE);
    if record_path.exists() {
        let record = std::fs::read_to_string(&record_path)
            .ok()
            .and_then(|t| serde_json::from_str::<RunRecord>(&t).ok());
        return match record {
            Some(r) => Owner::Run {
                checkpoint: ck
                    .filter(|(id, _)| *id == r.run_id)
                    .map(|(_, step)| (ck_path, step)),
                id: r.run_id,
                started: Some(r.started),
            },
            None => Owner::Unknown {
                evidence: record_path,
            },
        };
    }
    if let Some((id, step)) = ck {
        return Owner::Run {
            id,
            started: None,
            checkpoint: Some((ck_path, step)),
        };
    }
    // a run's record or checkpoint is what marks its files (results alone, of a build
    // before run ids, are not told from files placed there)
    match ck_path.exists() {
        true => Owner::Unknown { evidence: ck_path },
        false => Owner::Nobody,
    }
}

/// How a run stands to a directory it may write into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// It holds no run's files.
    Free,
    /// It holds this run's files (a resume continues them).
    Own,
    /// It holds another run's files, and overwriting was asked for.
    Replace,
}

/// Who may write into `dir` (`field`: where the directory came from, for the message): the
/// run `run` (None: a run that has written nothing yet) stands [`Standing::Free`] or
/// [`Standing::Own`]; another run's directory is refused unless `overwrite`. Changes nothing.
pub fn check(dir: &Path, field: &str, run: Option<&str>, overwrite: bool) -> Result<Standing> {
    if !crate::ranks::is_root() {
        // over MPI ranks rank 0 owns (and writes) the directory
        return Ok(Standing::Own);
    }
    let owner = owner_of(dir);
    match &owner {
        Owner::Nobody => Ok(Standing::Free),
        Owner::Run { id, .. } if Some(id.as_str()) == run => Ok(Standing::Own),
        _ if overwrite => Ok(Standing::Replace),
        _ => Err(refusal(dir, field, &owner)),
    }
}

/// [`check`], then take `dir` for the run `run`: another run's files are removed (when
/// `overwrite` allowed it) and the directory records `run` as its owner. Call it holding the
/// directory's lock ([`super::OutputLock`]), after the run is set up and before it writes.
pub fn claim(dir: &Path, field: &str, run: &str, overwrite: bool) -> Result<Standing> {
    if !crate::ranks::is_root() {
        return Ok(Standing::Own);
    }
    std::fs::create_dir_all(dir).map_err(|e| MpcError::io(dir, e))?;
    let standing = check(dir, field, Some(run), overwrite)?;
    if standing == Standing::Replace {
        remove_run_files(dir)?;
        tracing::warn!(
            "{}: replaced another run's files (overwrite was asked for)",
            dir.display()
        );
    }
    if standing != Standing::Own || !dir.join(RUN_FILE).exists() {
        record(dir, run)?;
    }
    Ok(standing)
}

/// A checkpoint writer of the solvent of run `run` may write `path`: refused when its
/// directory belongs to another run, or when `path` holds another run's checkpoint (or a file
/// that is not a checkpoint), unless `overwrite`. Changes nothing.
pub fn check_checkpoint_path(path: &Path, run: &str, overwrite: bool) -> Result<()> {
    if overwrite || !crate::ranks::is_root() {
        return Ok(());
    }
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let fix = "write this checkpoint to another path, or replace it on purpose (Python: \
               checkpoint(path, overwrite=True); C: mpcbox_checkpoint_overwrite)";
    if dir.join(RUN_FILE).exists() {
        let owner = owner_of(dir);
        if !matches!(&owner, Owner::Run { id, .. } if id == run) {
            return Err(MpcError::Config(ConfigError {
                field: "path".into(),
                problem: format!(
                    "{} holds the files of another run ({})",
                    dir.display(),
                    whose(&owner)
                ),
                fix: fix.into(),
            }));
        }
    }
    if !path.exists() {
        return Ok(());
    }
    let theirs = match checkpoint_identity(path) {
        Some((id, _)) if id == run => return Ok(()),
        Some((id, step)) => format!("the checkpoint of run {id} at step {step}"),
        None => "a file that is not a readable mpcbox checkpoint".into(),
    };
    Err(MpcError::Config(ConfigError {
        field: "path".into(),
        problem: format!(
            "{} holds {theirs}, not one of this solvent's run ({run})",
            path.display()
        ),
        fix: fix.into(),
    }))
}

/// The run whose files a directory holds, for people: id, start, checkpoint and step.
fn whose(owner: &Owner) -> String {
    match owner {
        Owner::Run {
            id,
            started,
            checkpoint,
        } => {
            let mut whose = format!("run {id}");
            if let Some(s) = started {
                whose += &format!(", started {s}");
            }
            if let Some((p, step)) = checkpoint {
                whose += &format!(", checkpoint {} at step {step}", p.display());
            }
            whose
        }
        Owner::Unknown { evidence } => format!(
            "a run whose record or checkpoint cannot be read: {}",
            evidence.display()
        ),
        Owner::Nobody => "no run".into(),
    }
}

/// The refusal naming `dir`, the run whose files it holds and how to go on.
fn refusal(dir: &Path, field: &str, owner: &Owner) -> MpcError {
    let go_on = match owner {
        Owner::Run {
            checkpoint: Some((ck, _)),
            ..
        } => format!(
            "continue that run with `mpcbox run --resume {0}` (Python: mpcbox.run(resume=\"{0}\")), ",
            ck.display()
        ),
        _ => String::new(),
    };
    MpcError::Config(ConfigError {
        field: field.into(),
        problem: format!(
            "{} holds the files of another run ({})",
            dir.display(),
            whose(owner)
        ),
        fix: format!(
            "{go_on}give this run a directory of its own (--output DIR; Python: output=), or \
             replace that run's files with --overwrite (Python: overwrite=True)"
        ),
    })
}

/// Write the record of `run` into `dir` (atomically).
fn record(dir: &Path, run: &str) -> Result<()> {
    let r = RunRecord {
        run_id: run.to_string(),
        started: now_text(),
        pid: std::process::id(),
        host: host_name(),
    };
    let text = serde_json::to_string_pretty(&r).expect("the run record serialises") + "\n";
    let path = dir.join(RUN_FILE);
    let tmp = dir.join(format!("{RUN_FILE}.tmp"));
    std::fs::write(&tmp, text).map_err(|e| MpcError::io(&tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| MpcError::io(&path, e))
}

/// The files a run writes into its directory (besides the field files `fields_*.vti`).
const RUN_FILES: &[&str] = &[
    RUN_FILE,
    CHECKPOINT_FILE,
    OBSERVABLES_CSV,
    SUMMARY_JSON,
    PROFILE_CSV,
    PROFILE_SVG,
    crate::md::coupled::MD_SUMMARY_JSON,
    crate::md::coupled::MD_CSV,
    crate::md::coupled::TRAJECTORY_XYZ,
    crate::md::coupled::TRAJECTORY_GSD,
    "fields.pvd",
];

/// Remove another run's files from `dir` (overwriting was asked for): what would otherwise
/// be continued, or left beside the new run's files as if they were its own.
fn remove_run_files(dir: &Path) -> Result<()> {
    let fields = std::fs::read_dir(dir)
        .map_err(|e| MpcError::io(dir, e))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("fields_") && n.ends_with(".vti"))
        });
    for p in RUN_FILES.iter().map(|f| dir.join(f)).chain(fields) {
        match std::fs::remove_file(&p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(MpcError::io(&p, e)),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_text_gives_the_civil_date() {
        assert_eq!(utc_text(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc_text(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc_text(1_798_761_599), "2026-12-31 23:59:59 UTC");
    }

    #[test]
    fn a_directory_belongs_to_the_run_it_records() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        assert_eq!(check(d, "f", None, false).unwrap(), Standing::Free);
        assert_eq!(claim(d, "f", "aaaa", false).unwrap(), Standing::Free);
        assert_eq!(claim(d, "f", "aaaa", false).unwrap(), Standing::Own);
        std::fs::write(d.join(OBSERVABLES_CSV), "step\n1\n").unwrap();
        let e = check(d, "output.directory", Some("bbbb"), false)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("config field `output.directory`")
                && e.contains(&d.display().to_string())
                && e.contains("run aaaa, started ")
                && e.contains("--overwrite"),
            "{e}"
        );
        // a fresh run (no id yet) is refused alike
        assert!(check(d, "f", None, false).is_err());
        // overwriting removes the other run's files and records the new owner
        std::fs::write(d.join("notes.txt"), "mine").unwrap();
        assert_eq!(claim(d, "f", "bbbb", true).unwrap(), Standing::Replace);
        assert!(!d.join(OBSERVABLES_CSV).exists());
        assert!(d.join("notes.txt").exists(), "only a run's own files go");
        assert_eq!(check(d, "f", Some("bbbb"), false).unwrap(), Standing::Own);
    }

    #[test]
    fn an_unreadable_checkpoint_belongs_to_an_unknown_run() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(OBSERVABLES_CSV), "step\n").unwrap();
        assert_eq!(check(dir.path(), "f", None, false).unwrap(), Standing::Free);
        std::fs::write(dir.path().join(CHECKPOINT_FILE), "not one").unwrap();
        let e = check(dir.path(), "f", Some("aaaa"), false)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cannot be read") && e.contains(CHECKPOINT_FILE),
            "{e}"
        );
        assert_eq!(
            check(dir.path(), "f", Some("aaaa"), true).unwrap(),
            Standing::Replace
        );
    }

    /// A checkpoint of a build before run ids belongs to the run continued from it in its own
    /// directory (known by its place), not to a copy of it elsewhere.
    #[test]
    fn a_checkpoint_without_a_run_id_is_known_by_its_place() {
        let config = crate::Config::from_ron_str(
            "(cells: (4, 4, 4), particles_per_cell: 2, time_step: 0.1, steps: 1, \
              collision: Srd(angle_deg: 130.0))",
        )
        .unwrap();
        let phys = crate::physics::Physics::from_config(&config);
        let ck = crate::Checkpoint {
            fluid: crate::state::FluidState::initial(&config),
            config,
            step: 3,
            stats: crate::stats::RunStats::new(phys.profile_bins()),
            md: None,
            run_id: None,
        };
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (in_a, in_b) = (
            a.path().join(CHECKPOINT_FILE),
            b.path().join(CHECKPOINT_FILE),
        );
        ck.save(&in_a).unwrap();
        ck.save(&in_b).unwrap();
        let from_a = crate::Checkpoint::load(&in_a).unwrap().run_id.unwrap();
        assert!(from_a.starts_with("legacy-"), "{from_a}");
        assert_eq!(
            check(a.path(), "f", Some(&from_a), false).unwrap(),
            Standing::Own
        );
        let e = check(b.path(), "f", Some(&from_a), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("at step 3") && e.contains("--resume"), "{e}");
    }
}
