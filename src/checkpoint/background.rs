//! Checkpoints written while the run steps on. At a checkpoint step the fluid is copied out
//! (into spare device memory, or host memory within the window: a backend's
//! `fluid_snapshot`) and handed over a bounded channel to a writer thread, which streams it
//! into the file with its checksums ([`super::parted::write_block`]) and renames the file over
//! the checkpoint once it is complete and synced. The next checkpoint waits only if this one
//! is still being written; the end of a run, and a stop on a signal, wait for it too. Without
//! room for a copy (or over MPI ranks, whose collective stages belong to the stepping thread)
//! the checkpoint is written at once, streamed from the live fluid a window at a time.

use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam::channel::{bounded, Receiver, Sender};

use super::parted::{self, BlockSource};
use super::CheckpointHead;
use crate::error::{MpcError, Result};
use crate::ranks::Alone;
pub use crate::report::CheckpointTimes;

/// Whether checkpoints are written by the writer thread or by the stepping thread
/// (`MPCBOX_CHECKPOINTS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckpointMode {
    Background,
    Blocking,
}

/// How a run writes its checkpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriterSettings {
    pub mode: CheckpointMode,
    /// Host bytes a checkpoint may hold at once (None: a quarter of the host memory available
    /// when it starts).
    pub window: Option<u64>,
}

/// The least window: the pieces and room to spare.
const LEAST_WINDOW: u64 = 1 << 20;

/// Whether a copy of `bytes` fits the `window` beside the pieces its write takes.
pub fn copy_fits(bytes: u64, window: u64) -> bool {
    bytes + parted::BUFFERS as u64 * parted::piece_bytes(window) as u64 <= window
}

impl WriterSettings {
    /// From `MPCBOX_CHECKPOINTS` (default background) and `MPCBOX_CHECKPOINT_WINDOW` (MiB).
    pub fn from_knobs() -> WriterSettings {
        let k = crate::knobs::knobs();
        WriterSettings {
            mode: match k.is("MPCBOX_CHECKPOINTS", "blocking") {
                true => CheckpointMode::Blocking,
                false => CheckpointMode::Background,
            },
            window: k
                .get("MPCBOX_CHECKPOINT_WINDOW")
                .and_then(|v| v.parse::<u64>().ok())
                .map(|mib| mib << 20),
        }
    }

    /// The window now, in bytes.
    pub fn window_bytes(&self) -> u64 {
        let default = || crate::memory::host_available_bytes().map_or(1 << 30, |b| b / 4);
        self.window.unwrap_or_else(default).max(LEAST_WINDOW)
    }
}

/// One checkpoint's outcome.
#[derive(Debug)]
pub struct Written {
    /// The step it holds.
    pub step: u64,
    pub path: PathBuf,
    pub result: Result<()>,
    /// Bytes of the fluid's block written by this process.
    pub bytes: u64,
    /// Seconds from the start of its write to the rename.
    pub seconds: f64,
    /// Written by the writer thread (false: by the stepping thread).
    pub background: bool,
}

struct Job {
    step: u64,
    path: PathBuf,
    head: CheckpointHead,
    n_fluid: u64,
    source: Box<dyn BlockSource + Send>,
    window: u64,
}

/// The writer thread of a run and the checkpoints it has finished.
pub struct CheckpointWriter {
    settings: WriterSettings,
    jobs: Option<Sender<Box<Job>>>,
    done: Option<Receiver<Written>>,
    thread: Option<JoinHandle<()>>,
    /// The step of the checkpoint being written by the thread.
    in_flight: Option<u64>,
    finished: Vec<Written>,
    times: CheckpointTimes,
    /// The step of the last checkpoint known written.
    last_good: Option<u64>,
    /// Seconds the last background write took.
    last_background: Option<f64>,
    /// Whether the writes keep up with the run (`pace.rs`).
    pace: super::pace::Pace,
    /// The checkpoints written, whose spares (`parted::Recycle`) go when the writer does.
    paths: Vec<PathBuf>,
}

/// One checkpoint written in the three stages by one process.
fn write_alone(job: &mut Job) -> Written {
    let t = Instant::now();
    let count: u64 = job.source.counts().iter().sum();
    let recycle = parted::Recycle::KeepSpare;
    let result = parted::plan(&job.path, job.n_fluid, count, &Alone, recycle).and_then(|plan| {
        let written = parted::write_block(&plan, &mut *job.source, job.window);
        parted::finish(plan, &job.head, written, &Alone)
    });
    Written {
        step: job.step,
        path: job.path.clone(),
        result,
        bytes: count * parted::PARTICLE_BYTES,
        seconds: t.elapsed().as_secs_f64(),
        background: true,
    }
}

impl CheckpointWriter {
    pub fn new(settings: WriterSettings) -> CheckpointWriter {
        CheckpointWriter {
            settings,
            jobs: None,
            done: None,
            thread: None,
            in_flight: None,
            finished: Vec::new(),
            times: CheckpointTimes::default(),
            last_good: None,
            last_background: None,
            pace: Default::default(),
            paths: Vec::new(),
        }
    }

    pub fn settings(&self) -> WriterSettings {
        self.settings
    }

    /// What the checkpoints cost so far.
    pub fn times(&self) -> &CheckpointTimes {
        &self.times
    }

    /// The step of the last checkpoint known complete on disk.
    pub fn last_written_step(&self) -> Option<u64> {
        self.last_good
    }

    /// Whether a checkpoint is being written by the thread.
    pub fn in_flight(&self) -> bool {
        self.in_flight.is_some()
    }

    fn record(&mut self, w: Written) {
        self.times.written += 1;
        self.times.bytes += w.bytes;
        match &w.result {
            Ok(()) => self.last_good = Some(self.last_good.map_or(w.step, |s| s.max(w.step))),
            Err(_) => self.times.failed += 1,
        }
        if w.background {
            self.times.background_seconds += w.seconds;
            self.last_background = Some(w.seconds);
        }
        self.finished.push(w);
    }

    /// At the checkpoint of `step`, which waited `waited` seconds for the write in flight: a
    /// warning, once per run, when the writes hold the run (they are slower than its steps).
    pub(crate) fn note_pace(&mut self, step: u64, waited: f64) {
        if let Some(w) = self.pace.at_checkpoint(step, waited, self.last_background) {
            tracing::warn!("{w}");
        }
    }

    /// Count `seconds` the stepping thread was held by a checkpoint, over which the resident
    /// memory grew by `growth` bytes.
    pub(crate) fn held(&mut self, seconds: f64, growth: Option<u64>) {
        self.times.blocking_seconds += seconds;
        self.times.longest_blocking_seconds = self.times.longest_blocking_seconds.max(seconds);
        if let Some(g) = growth {
            let most = self.times.peak_host_memory_growth_bytes.unwrap_or(0).max(g);
            self.times.peak_host_memory_growth_bytes = Some(most);
        }
    }

    /// A checkpoint the stepping thread wrote itself.
    pub(crate) fn record_blocking(&mut self, w: Written) {
        self.keep_path(&w.path);
        self.record(w);
    }

    fn keep_path(&mut self, path: &Path) {
        if !self.paths.iter().any(|p| p == path) {
            self.paths.push(path.to_path_buf());
        }
    }

    /// Wait for the write in flight, if any.
    pub fn wait(&mut self) {
        if self.in_flight.take().is_none() {
            return;
        }
        let got = self.done.as_ref().and_then(|d| d.recv().ok());
        match got {
            Some(w) => self.record(w),
            None => self.thread_lost(),
        }
    }

    /// Note a write that finished meanwhile, without waiting.
    pub fn poll(&mut self) {
        if self.in_flight.is_none() {
            return;
        }
        let got = self.done.as_ref().map(|d| d.try_recv());
        match got {
            Some(Ok(w)) => {
                self.in_flight = None;
                self.record(w);
            }
            Some(Err(crossbeam::channel::TryRecvError::Empty)) => {}
            _ => {
                self.in_flight = None;
                self.thread_lost();
            }
        }
    }

    /// The thread ended without an outcome (a panic in it): the checkpoint counts as failed.
    fn thread_lost(&mut self) {
        self.jobs = None;
        self.done = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.times.failed += 1;
        tracing::warn!(
            "the checkpoint writer thread stopped on an internal error (please report it)"
        );
    }

    /// The checkpoints finished since the last call, in order.
    pub fn take_finished(&mut self) -> Vec<Written> {
        std::mem::take(&mut self.finished)
    }

    /// Hand a copy of the fluid to the thread (after the write in flight, if any, ended).
    pub(crate) fn submit(
        &mut self,
        step: u64,
        path: &Path,
        head: CheckpointHead,
        n_fluid: u64,
        source: Box<dyn BlockSource + Send>,
    ) -> Result<()> {
        self.wait();
        if self.jobs.is_none() {
            // the hand-off holds one checkpoint: the stepping thread waits for the thread to
            // take it, never for a second one
            let (jobs, inbox) = bounded::<Box<Job>>(1);
            let (outbox, done) = bounded::<Written>(1);
            let thread = std::thread::Builder::new()
                .name("mpcbox-checkpoint".into())
                .spawn(move || {
                    for mut job in inbox {
                        if outbox.send(write_alone(&mut job)).is_err() {
                            break;
                        }
                    }
                })
                .map_err(|e| MpcError::io(path, e))?;
            self.jobs = Some(jobs);
            self.done = Some(done);
            self.thread = Some(thread);
        }
        self.keep_path(path);
        let job = Box::new(Job {
            step,
            path: path.to_path_buf(),
            head,
            n_fluid,
            source,
            window: self.settings.window_bytes(),
        });
        match self.jobs.as_ref().map(|j| j.send(job)) {
            Some(Ok(())) => {
                self.in_flight = Some(step);
                Ok(())
            }
            _ => Err(MpcError::Checkpoint {
                path: path.display().to_string(),
                problem: "the checkpoint writer thread is gone (please report it)".into(),
            }),
        }
    }
}

impl Drop for CheckpointWriter {
    /// A write in flight is finished, never cut off (a run that stops on an error still leaves
    /// its last checkpoint complete); the spares go.
    fn drop(&mut self) {
        self.wait();
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // the run is done with the replaced checkpoints kept for its next writes
        for p in &self.paths {
            parted::remove_spare(p);
        }
    }
}

/// Remove the temporary files that writers of `path` killed mid-write left beside it (the
/// caller owns the output directory, so no live writer has one open).
pub fn remove_stale_temporaries(path: &Path) {
    let Some(dir) = path.parent() else {
        return;
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let prefix = parted::temporary_prefix(path);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if e.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}
