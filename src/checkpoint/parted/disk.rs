//! Pieces of a block to disk on a thread of their own, so that reading and encoding the next
//! piece overlaps the write of the last: the pieces cross a bounded channel, and the buffers
//! come back for reuse, so at most `buffers` pieces exist at once (the host memory a block
//! costs is bounded by them, whatever its size).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam::channel::{bounded, Receiver, Sender};

use super::encode::PieceSink;
use crate::error::{MpcError, Result};

/// Pieces in flight: one being filled, one queued, one being written.
pub(crate) const BUFFERS: usize = 3;

/// A block's pieces written at `base` + their offset in `file` by a thread.
pub(super) struct DiskPipe {
    to_disk: Option<Sender<(u64, Vec<u8>)>>,
    free: Receiver<Vec<u8>>,
    thread: Option<JoinHandle<std::io::Result<()>>>,
    path: PathBuf,
    /// Bytes handed to the thread.
    pub(super) bytes: u64,
}

impl DiskPipe {
    pub(super) fn new(file: Arc<File>, path: &Path, base: u64) -> Result<DiskPipe> {
        let (to_disk, pieces) = bounded::<(u64, Vec<u8>)>(BUFFERS);
        let (give_back, free) = bounded::<Vec<u8>>(BUFFERS);
        for _ in 0..BUFFERS - 1 {
            give_back
                .send(Vec::new())
                .expect("room for the first buffers");
        }
        let thread = std::thread::Builder::new()
            .name("mpcbox-disk".into())
            .spawn(move || -> std::io::Result<()> {
                // on an error the thread stops: the producer's next send or wait for a buffer
                // then fails, and `join` names the error
                for (at, mut piece) in pieces {
                    file.write_all_at(&piece, base + at)?;
                    piece.clear();
                    if give_back.send(piece).is_err() {
                        break;
                    }
                }
                Ok(())
            })
            .map_err(|e| MpcError::io(path, e))?;
        Ok(DiskPipe {
            to_disk: Some(to_disk),
            free,
            thread: Some(thread),
            path: path.to_path_buf(),
            bytes: 0,
        })
    }

    /// The thread's outcome once it has stopped.
    fn join(&mut self) -> Result<()> {
        self.to_disk = None;
        match self.thread.take().map(|t| t.join()) {
            None | Some(Ok(Ok(()))) => Ok(()),
            Some(Ok(Err(e))) => Err(MpcError::io(&self.path, e)),
            Some(Err(_)) => Err(MpcError::Device(format!(
                "the thread writing {} stopped on an internal error (please report it)",
                self.path.display()
            ))),
        }
    }

    /// Wait until every piece is written; the first write error, if any.
    pub(super) fn finish(mut self) -> Result<()> {
        self.join()
    }
}

impl PieceSink for DiskPipe {
    fn put(&mut self, at: u64, piece: Vec<u8>) -> Result<Vec<u8>> {
        self.bytes += piece.len() as u64;
        let sent = self
            .to_disk
            .as_ref()
            .is_some_and(|t| t.send((at, piece)).is_ok());
        // a closed channel: the thread stopped on an error, which join returns
        let next = if sent { self.free.recv().ok() } else { None };
        match next {
            Some(b) => Ok(b),
            None => {
                self.join()?;
                Err(MpcError::Device(format!(
                    "the thread writing {} stopped early (please report it)",
                    self.path.display()
                )))
            }
        }
    }
}

impl Drop for DiskPipe {
    fn drop(&mut self) {
        let _ = self.join();
    }
}
