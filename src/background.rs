//! Output files written by a thread of their own while the run steps on (flow-field files, GSD
//! and XYZ frames): the stepping thread reduces or copies what a file holds, hands the write
//! over a bounded channel (it waits only while [`DEPTH`] writes are queued) and steps on. The
//! writes keep their order. A failed write stops the run at the next step that looks (as a
//! failed write stopped it before, naming the file); the end of a run, and a stop on a signal,
//! wait for every write handed over.

use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam::channel::{bounded, Receiver, Sender};

use crate::error::{MpcError, Result};
use crate::report::OutputTimes;

/// Writes queued at most: the host holds at most this many files' contents beside the one
/// being written.
pub const DEPTH: usize = 2;

type Job = Box<dyn FnOnce() -> Result<()> + Send>;

/// One writer thread and what its writes cost.
pub struct OutputThread {
    name: &'static str,
    jobs: Option<Sender<Job>>,
    done: Option<Receiver<(Result<()>, f64)>>,
    thread: Option<JoinHandle<()>>,
    /// Writes handed over and not yet reported back.
    pending: usize,
    times: OutputTimes,
    failed: Option<MpcError>,
    /// Writes run on the calling thread (`MPCBOX_OUTPUT=blocking`).
    blocking: bool,
}

impl OutputThread {
    /// A writer (its thread started at the first write) named `name` in error messages.
    pub fn new(name: &'static str) -> OutputThread {
        OutputThread {
            name,
            jobs: None,
            done: None,
            thread: None,
            pending: 0,
            times: OutputTimes::default(),
            failed: None,
            blocking: crate::knobs::knobs().is("MPCBOX_OUTPUT", "blocking"),
        }
    }

    /// What the writes cost so far.
    pub fn times(&self) -> &OutputTimes {
        &self.times
    }

    fn settle(&mut self, (result, seconds): (Result<()>, f64)) {
        self.pending -= 1;
        self.times.background_seconds += seconds;
        if let Err(e) = result {
            self.failed.get_or_insert(e);
        }
    }

    /// Hand `write` to the thread; `held` is the time the caller already spent preparing it
    /// (counted as blocking). An earlier write's failure is returned first.
    pub fn submit(
        &mut self,
        held: f64,
        write: impl FnOnce() -> Result<()> + Send + 'static,
    ) -> Result<()> {
        self.check()?;
        let t = Instant::now();
        self.times.files += 1;
        if self.blocking {
            let r = write();
            self.times.blocking_seconds += held + t.elapsed().as_secs_f64();
            return r;
        }
        if self.jobs.is_none() {
            let (jobs, inbox) = bounded::<Job>(DEPTH);
            let (outbox, done) = bounded::<(Result<()>, f64)>(DEPTH + 2);
            let thread = std::thread::Builder::new()
                .name(format!("mpcbox-{}", self.name))
                .spawn(move || {
                    for job in inbox {
                        let t = Instant::now();
                        let r = job();
                        if outbox.send((r, t.elapsed().as_secs_f64())).is_err() {
                            break;
                        }
                    }
                })
                .map_err(|e| {
                    MpcError::Device(format!("cannot start the {} writer: {e}", self.name))
                })?;
            self.jobs = Some(jobs);
            self.done = Some(done);
            self.thread = Some(thread);
        }
        // the outcomes' channel never holds more than the writes in flight
        while self.pending > DEPTH {
            self.wait_one();
        }
        let sent = self
            .jobs
            .as_ref()
            .is_some_and(|j| j.send(Box::new(write)).is_ok());
        if !sent {
            return Err(self.lost());
        }
        self.pending += 1;
        self.times.blocking_seconds += held + t.elapsed().as_secs_f64();
        Ok(())
    }

    fn lost(&self) -> MpcError {
        MpcError::Device(format!(
            "the {} writer thread stopped on an internal error (please report it)",
            self.name
        ))
    }

    fn wait_one(&mut self) {
        match self.done.as_ref().map(|d| d.recv()) {
            Some(Ok(outcome)) => self.settle(outcome),
            _ => {
                self.pending = 0;
                self.failed.get_or_insert(self.lost());
            }
        }
    }

    /// The first failure of a write finished so far (none waited for).
    pub fn check(&mut self) -> Result<()> {
        while self.pending > 0 {
            match self.done.as_ref().map(|d| d.try_recv()) {
                Some(Ok(outcome)) => self.settle(outcome),
                Some(Err(crossbeam::channel::TryRecvError::Empty)) => break,
                _ => {
                    self.pending = 0;
                    self.failed.get_or_insert(self.lost());
                }
            }
        }
        match self.failed.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Wait for every write handed over; the first failure.
    pub fn finish(&mut self) -> Result<()> {
        let t = Instant::now();
        while self.pending > 0 {
            self.wait_one();
        }
        self.times.blocking_seconds += t.elapsed().as_secs_f64();
        self.check()
    }
}

impl Drop for OutputThread {
    /// Writes handed over are finished, never cut off.
    fn drop(&mut self) {
        let _ = self.finish();
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// Writes run in order, off the calling thread; a failure comes back at the next look and
    /// later writes still run; finish waits for all.
    #[test]
    fn writes_keep_their_order_and_report_failures() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut out = OutputThread::new("test");
        let caller = std::thread::current().id();
        let (mut submitted, mut failures) = (Vec::new(), 0);
        for k in 0..6 {
            let log = log.clone();
            let r = out.submit(0.0, move || {
                assert_ne!(std::thread::current().id(), caller);
                std::thread::sleep(std::time::Duration::from_millis(5));
                log.lock().unwrap().push(k);
                match k {
                    2 => Err(MpcError::Device("disk full at 2".into())),
                    _ => Ok(()),
                }
            });
            match r {
                // a failure seen before this write was handed over: it is not run
                Err(e) => {
                    assert!(e.to_string().contains("disk full at 2"), "{e}");
                    failures += 1;
                }
                Ok(()) => submitted.push(k),
            }
        }
        if let Err(e) = out.finish() {
            assert!(e.to_string().contains("disk full at 2"), "{e}");
            failures += 1;
        }
        assert_eq!(failures, 1);
        assert_eq!(*log.lock().unwrap(), submitted);
        assert!(submitted.starts_with(&[0, 1, 2]));
        assert!(out.times().background_seconds > 0.0);
    }
}
