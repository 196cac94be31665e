//! One owner per output directory, and output files that resume exactly.
//!
//! A run takes an advisory lock on `<dir>/.mpcbox.lock` (`flock` through `File::try_lock`)
//! before it writes anything and holds it to the end; the file names the holder (process id,
//! host, start time), so a second run on the same directory is refused with that name instead
//! of interleaving its rows with the first's. The lock goes with the process (also on kill -9).
//! A fresh run into a directory holding another run's checkpoint is refused unless overwriting
//! was asked for. A resumed run first drops the rows its files hold past the checkpoint's step,
//! so its files equal an uninterrupted run's.

use std::collections::HashSet;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::{ConfigError, MpcError, Result};

/// The lock file inside an output directory.
pub const LOCK_FILE: &str = ".mpcbox.lock";

/// Directories this process holds (a coupled run takes the lock before opening the MD files
/// and again in the job loop: the second take is the same owner).
static HELD: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);

/// The lock on an output directory, released when dropped (or when the process ends).
#[derive(Debug)]
pub struct OutputLock {
    /// The locked file; None for a nested take of a directory this process already holds.
    file: Option<File>,
    dir: PathBuf,
}

fn held() -> std::sync::MutexGuard<'static, Option<HashSet<PathBuf>>> {
    HELD.lock().unwrap_or_else(|e| e.into_inner())
}

impl OutputLock {
    /// Create `dir` if needed and lock it for this run; refused, naming the holder, when
    /// another run holds it.
    pub fn acquire(dir: &Path) -> Result<OutputLock> {
        if !crate::ranks::is_root() {
            // over MPI ranks rank 0 owns (and writes) the directory
            return Ok(OutputLock {
                file: None,
                dir: dir.to_path_buf(),
            });
        }
        std::fs::create_dir_all(dir).map_err(|e| MpcError::io(dir, e))?;
        let key = dir.canonicalize().map_err(|e| MpcError::io(dir, e))?;
        if held().get_or_insert_with(HashSet::new).contains(&key) {
            return Ok(OutputLock {
                file: None,
                dir: key,
            });
        }
        let path = dir.join(LOCK_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| MpcError::io(&path, e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                return Err(MpcError::Config(ConfigError {
                    field: "output.directory".into(),
                    problem: format!(
                        "{} is in use by another run ({})",
                        dir.display(),
                        holder.trim()
                    ),
                    fix: "give this run its own directory (--output DIR), or wait for that run \
                          to end"
                        .into(),
                }));
            }
            Err(TryLockError::Error(e)) => return Err(MpcError::io(&path, e)),
        }
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "unknown host".into());
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let who = format!(
            "pid {} on {host}, started at unix time {since}\n",
            std::process::id()
        );
        file.set_len(0).map_err(|e| MpcError::io(&path, e))?;
        file.rewind().map_err(|e| MpcError::io(&path, e))?;
        file.write_all(who.as_bytes())
            .map_err(|e| MpcError::io(&path, e))?;
        held().get_or_insert_with(HashSet::new).insert(key.clone());
        Ok(OutputLock {
            file: Some(file),
            dir: key,
        })
    }
}

impl Drop for OutputLock {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            if let Some(h) = held().as_mut() {
                h.remove(&self.dir);
            }
        }
    }
}

/// A fresh run may not overwrite another run's results: refused when `dir` holds a checkpoint,
/// unless `overwrite`.
pub fn check_fresh_directory(dir: &Path, checkpoint_file: &str, overwrite: bool) -> Result<()> {
    let ck = dir.join(checkpoint_file);
    if overwrite || !ck.exists() || !crate::ranks::is_root() {
        return Ok(());
    }
    Err(MpcError::Config(ConfigError {
        field: "output.directory".into(),
        problem: format!(
            "{} holds the results and checkpoint of another run ({})",
            dir.display(),
            ck.display()
        ),
        fix: format!(
            "continue that run with `mpcbox run --resume {}`, write elsewhere with --output DIR, \
             or replace it with --overwrite",
            ck.display()
        ),
    }))
}

/// Replace `path` by `text` atomically (temporary file, then rename).
fn replace_file(path: &Path, text: &[u8]) -> Result<()> {
    let tmp = path.with_extension("resume-tmp");
    std::fs::write(&tmp, text).map_err(|e| MpcError::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| MpcError::io(path, e))
}

/// Drop the rows of a CSV file (header kept) whose first column, a step, lies past `step`:
/// a resumed run then appends from the checkpoint on, without rows written twice.
pub fn truncate_csv_after(path: &Path, step: u64) -> Result<()> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(());
    };
    // a last line without its newline was torn by a run killed while writing it
    let complete = match text.ends_with('\n') {
        true => text.as_str(),
        false => text.rfind('\n').map_or("", |i| &text[..=i]),
    };
    let mut kept = String::new();
    let mut dropped = usize::from(complete.len() < text.len());
    for (k, line) in complete.lines().enumerate() {
        let row_step = line
            .split(',')
            .next()
            .and_then(|s| s.trim().parse::<u64>().ok());
        match row_step {
            Some(s) if s > step => dropped += 1,
            None if k > 0 => dropped += 1,
            _ => {
                kept.push_str(line);
                kept.push('\n');
            }
        }
    }
    if dropped > 0 {
        tracing::info!(
            "{}: dropped {dropped} rows written after step {step} (resumed from there)",
            path.display()
        );
        replace_file(path, kept.as_bytes())?;
    }
    Ok(())
}

/// Drop the frames of an extended-XYZ trajectory whose `Time=` lies past `time` (within a
/// relative 1e-9: the times are written from the same step count).
pub fn truncate_xyz_after(path: &Path, time: f64) -> Result<()> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(());
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut keep_lines = 0usize;
    let mut k = 0usize;
    while k < lines.len() {
        let Ok(n) = lines[k].trim().parse::<usize>() else {
            break;
        };
        let Some(comment) = lines.get(k + 1) else {
            break;
        };
        let t = comment
            .split_whitespace()
            .find_map(|w| w.strip_prefix("Time="))
            .and_then(|v| v.parse::<f64>().ok());
        let end = k + 2 + n;
        match t {
            Some(t) if t <= time * (1.0 + 1e-9) + 1e-12 && end <= lines.len() => keep_lines = end,
            _ => break,
        }
        k = end;
    }
    if keep_lines < lines.len() {
        let mut out = lines[..keep_lines].join("\n");
        if keep_lines > 0 {
            out.push('\n');
        }
        replace_file(path, out.as_bytes())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_rows_past_the_step_and_torn_lines_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.csv");
        std::fs::write(&p, "step,x\n10,1\n20,2\n30,3\n40,4\n5").unwrap();
        truncate_csv_after(&p, 20).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "step,x\n10,1\n20,2\n");
    }

    #[test]
    fn xyz_frames_past_the_time_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.xyz");
        let frame = |t: f64| {
            format!("2\nLattice=\"1 0 0 0 1 0 0 0 1\" Time={t} pbc=\"T T T\"\nA 0 0 0\nA 1 1 1\n")
        };
        std::fs::write(&p, frame(0.0) + &frame(1.0) + &frame(2.0) + "2\ntorn").unwrap();
        truncate_xyz_after(&p, 1.0).unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            frame(0.0) + &frame(1.0)
        );
    }

    #[test]
    fn a_directory_is_held_by_one_owner_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let a = OutputLock::acquire(dir.path()).unwrap();
        // the same process takes it again (coupled runs open MD files first)
        let nested = OutputLock::acquire(dir.path()).unwrap();
        assert!(nested.file.is_none());
        drop(nested);
        // another open file description of the lock file is refused while `a` holds it
        let f = File::open(dir.path().join(LOCK_FILE)).unwrap();
        assert!(matches!(f.try_lock(), Err(TryLockError::WouldBlock)));
        drop(a);
        assert!(f.try_lock().is_ok());
    }

    #[test]
    fn a_fresh_run_does_not_overwrite_a_checkpoint_unless_asked() {
        let dir = tempfile::tempdir().unwrap();
        check_fresh_directory(dir.path(), "ck", false).unwrap();
        std::fs::write(dir.path().join("ck"), b"x").unwrap();
        let e = check_fresh_directory(dir.path(), "ck", false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--overwrite") && e.contains("--resume"), "{e}");
        check_fresh_directory(dir.path(), "ck", true).unwrap();
    }
}
