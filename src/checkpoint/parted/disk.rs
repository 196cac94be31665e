//! Pieces of a block checksummed and written on threads of their own, so that reading and
//! encoding the next piece overlaps the checksum of the last and the write of the one before
//! ([`SumPipe`] in front of [`DiskPipe`]): the pieces cross bounded channels, and the buffers
//! come back for reuse, so at most [`BUFFERS`] pieces exist at once (the host memory a block
//! costs is bounded by them, whatever its size).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam::channel::{bounded, Receiver, Sender};

use super::encode::{PieceSink, StreamSum};
use super::file_io::DirectWriter;
use crate::error::{MpcError, Result};

/// Pieces of a block at once: one being filled, one being summed, one queued for the disk, two
/// being written (the encoder holds one, [`SumPipe`] gives out one more, [`DiskPipe`] three).
pub(crate) const BUFFERS: usize = 5;
/// The empty buffers [`DiskPipe`] gives out at first.
const DISK_SPARES: usize = BUFFERS - 2;
/// Threads writing pieces with direct I/O at once: while one copies its piece into its aligned
/// buffer, the other's request keeps the disk busy.
const DIRECT_WRITERS: usize = 2;

/// How the disk thread writes a block's pieces (`MPCBOX_CHECKPOINT_WRITES`): with direct I/O,
/// each piece one request from an aligned copy (the default, where the file system has it),
/// or through the page cache with its write-back streamed ([`Writeback`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WriteMode {
    Direct,
    Buffered,
}

impl WriteMode {
    fn from_knobs() -> WriteMode {
        if crate::knobs::knobs().is("MPCBOX_CHECKPOINT_WRITES", "buffered") {
            WriteMode::Buffered
        } else {
            WriteMode::Direct
        }
    }
}

/// A block's pieces written at `base` + their offset in `file` by a thread ([`DIRECT_WRITERS`]
/// threads taking pieces in turn with direct I/O).
pub(super) struct DiskPipe {
    to_disk: Option<Sender<(u64, Vec<u8>)>>,
    free: Receiver<Vec<u8>>,
    /// The threads; each returns the time it spent writing.
    threads: Vec<JoinHandle<std::io::Result<Duration>>>,
    path: PathBuf,
    /// Bytes handed to the threads.
    pub(super) bytes: u64,
}

impl DiskPipe {
    pub(super) fn new(file: Arc<File>, path: &Path, base: u64) -> Result<DiskPipe> {
        let (to_disk, pieces) = bounded::<(u64, Vec<u8>)>(BUFFERS);
        let (give_back, free) = bounded::<Vec<u8>>(BUFFERS);
        for _ in 0..DISK_SPARES {
            give_back.send(Vec::new()).map_err(|_| {
                MpcError::Device("a disk pipe without room (please report it)".into())
            })?;
        }
        let direct = WriteMode::from_knobs() == WriteMode::Direct;
        // through the page cache one thread writes, so that each piece's write-back follows
        // the one before it ([`Writeback`])
        let writers = if direct { DIRECT_WRITERS } else { 1 };
        let mut threads = Vec::with_capacity(writers);
        for _ in 0..writers {
            let (file, pieces, give_back) = (file.clone(), pieces.clone(), give_back.clone());
            let mut direct = direct.then(|| DirectWriter::open(path)).flatten();
            let thread = std::thread::Builder::new()
                .name("mpcbox-disk".into())
                .spawn(move || -> std::io::Result<Duration> {
                    let mut writing = Duration::ZERO;
                    let mut flush = Writeback::new(&file);
                    // on an error the thread stops: the producer's next send or wait for a
                    // buffer then fails, and `join` names the error
                    for (at, piece) in pieces {
                        let t = Instant::now();
                        let wrote = direct.as_mut().map(|d| d.write(&piece, base + at));
                        match wrote {
                            Some(Ok(())) => {}
                            Some(Err(e)) if !matches!(e.raw_os_error(), Some(libc::EINVAL)) => {
                                return Err(e)
                            }
                            // not direct, or refused (an unaligned piece, an odd file system):
                            // this piece and the rest through the page cache
                            _ => {
                                direct = None;
                                file.write_all_at(&piece, base + at)?;
                                flush.written(base + at, piece.len() as u64)?;
                            }
                        }
                        writing += t.elapsed();
                        // back whole: the encoder overwrites it without zeroing it again
                        if give_back.send(piece).is_err() {
                            break;
                        }
                    }
                    Ok(writing)
                })
                .map_err(|e| MpcError::io(path, e))?;
            threads.push(thread);
        }
        Ok(DiskPipe {
            to_disk: Some(to_disk),
            free,
            threads,
            path: path.to_path_buf(),
            bytes: 0,
        })
    }

    /// The threads' outcome once they have stopped: the longest time one spent writing, or
    /// the first error.
    fn join(&mut self) -> Result<Duration> {
        self.to_disk = None;
        let mut longest = Duration::ZERO;
        let mut first_error = None;
        for t in self.threads.drain(..) {
            match t.join() {
                Ok(Ok(writing)) => longest = longest.max(writing),
                Ok(Err(e)) => {
                    first_error.get_or_insert(MpcError::io(&self.path, e));
                }
                Err(_) => {
                    first_error.get_or_insert(MpcError::Device(format!(
                        "the thread writing {} stopped on an internal error (please report it)",
                        self.path.display()
                    )));
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(longest),
        }
    }

    /// Wait until every piece is written: the time the thread spent writing, or the first
    /// write error.
    pub(super) fn finish(mut self) -> Result<Duration> {
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

/// A file's pieces put on disk as they are written: each piece's write-back is started at once
/// and the one before it waited for and dropped from the page cache. Left to the kernel, a
/// block of gigabytes piles up as dirty pages, is written back late in small requests and
/// throttles the writer to well below the disk's own rate, and the final fsync waits for the
/// rest (docs/reliability.md has the figures); streamed, at most two pieces are in flight and
/// the disk always has one queued. The final fsync still makes the file durable.
struct Writeback<'a> {
    file: &'a File,
    /// The last piece written: offset and length.
    last: Option<(u64, u64)>,
    /// Off once the file system refused the call: the kernel then writes back as it will.
    on: bool,
}

impl<'a> Writeback<'a> {
    fn new(file: &'a File) -> Writeback<'a> {
        Writeback {
            file,
            last: None,
            on: true,
        }
    }

    /// `len` bytes at `at` were just written. A failed write-back (EIO, ENOSPC) is the write's
    /// error; any other refusal only turns the streaming off (the final fsync still checks).
    fn written(&mut self, at: u64, len: u64) -> std::io::Result<()> {
        if !self.on {
            return Ok(());
        }
        let mut r = range_to_disk(self.file, at, len, false);
        if let (Ok(()), Some((at0, len0))) = (&r, self.last.replace((at, len))) {
            r = range_to_disk(self.file, at0, len0, true);
        }
        match r {
            Err(e) if !matches!(e.raw_os_error(), Some(libc::EIO | libc::ENOSPC)) => {
                tracing::debug!("write-back not streamed: {e}");
                self.on = false;
                Ok(())
            }
            r => r,
        }
    }
}

/// Start the write-back of `len` bytes of `file` at `at`; with `wait`, wait until they are on
/// disk and drop them from the page cache. File systems without write-back (tmpfs) accept and
/// ignore it; elsewhere than Linux it does nothing (the final fsync alone puts the file on disk).
#[cfg(target_os = "linux")]
fn range_to_disk(file: &File, at: u64, len: u64, wait: bool) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let flags = if wait {
        libc::SYNC_FILE_RANGE_WAIT_BEFORE
            | libc::SYNC_FILE_RANGE_WRITE
            | libc::SYNC_FILE_RANGE_WAIT_AFTER
    } else {
        libc::SYNC_FILE_RANGE_WRITE
    };
    let (fd, at, len) = (file.as_raw_fd(), at as libc::off64_t, len as libc::off64_t);
    // SAFETY: plain system calls on a file descriptor that `file` keeps open for the call;
    // no memory is passed.
    let r = unsafe { libc::sync_file_range(fd, at, len, flags) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if wait {
        // advice only: a failure costs page cache, not data
        // SAFETY: as above.
        unsafe { libc::posix_fadvise(fd, at, len, libc::POSIX_FADV_DONTNEED) };
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn range_to_disk(_: &File, _: u64, _: u64, _: bool) -> std::io::Result<()> {
    Ok(())
}

/// What the summing thread hands back: the checksum, the sink its pieces went on to and the
/// time it spent summing.
type Summed<S> = std::thread::Result<Result<(u64, S, Duration)>>;

/// A block's pieces checksummed by a thread of their own ([`StreamSum`], in order), each then
/// passed on to `S` (the disk thread) and its buffer returned, while the encoder fills the
/// next.
pub(super) struct SumPipe<S> {
    to_sum: Option<Sender<(u64, Vec<u8>)>>,
    free: Receiver<Vec<u8>>,
    thread: Option<JoinHandle<Result<(u64, S, Duration)>>>,
    /// The sink, back from the thread once every piece went on to it.
    inner: Option<S>,
    path: PathBuf,
    /// The time the encoder waited for the thread to take a piece and give a buffer back.
    waited: Duration,
    /// The time the thread spent summing (known once it ended).
    summing: Duration,
}

impl<S: PieceSink + Send + 'static> SumPipe<S> {
    /// Pieces of a block of `total` bytes to `inner`, summed on the way; `path` names the file
    /// they go to (in errors).
    pub(super) fn new(mut inner: S, total: u64, path: &Path) -> Result<SumPipe<S>> {
        let (to_sum, pieces) = bounded::<(u64, Vec<u8>)>(1);
        let (give_back, free) = bounded::<Vec<u8>>(BUFFERS);
        give_back.send(Vec::new()).map_err(|_| {
            MpcError::Device("a checksum pipe without room (please report it)".into())
        })?;
        let thread = std::thread::Builder::new()
            .name("mpcbox-checksum".into())
            .spawn(move || -> Result<(u64, S, Duration)> {
                let mut sum = StreamSum::new(total);
                let mut summing = Duration::ZERO;
                // on an error the thread stops: the encoder's next send or wait for a buffer
                // then fails, and `join` returns the error
                for (at, piece) in pieces {
                    let t = Instant::now();
                    sum.update(&piece);
                    summing += t.elapsed();
                    let empty = inner.put(at, piece)?;
                    if give_back.send(empty).is_err() {
                        break;
                    }
                }
                Ok((sum.finish(), inner, summing))
            })
            .map_err(|e| MpcError::io(path, e))?;
        Ok(SumPipe {
            to_sum: Some(to_sum),
            free,
            thread: Some(thread),
            inner: None,
            path: path.to_path_buf(),
            waited: Duration::ZERO,
            summing: Duration::ZERO,
        })
    }

    /// The thread's outcome once every piece sent is summed and passed on: the checksum.
    fn join(&mut self) -> Result<u64> {
        self.to_sum = None;
        let joined: Option<Summed<S>> = self.thread.take().map(|t| t.join());
        match joined {
            Some(Ok(Ok((sum, inner, summing)))) => {
                self.inner = Some(inner);
                self.summing = summing;
                Ok(sum)
            }
            Some(Ok(Err(e))) => Err(e),
            Some(Err(_)) => Err(MpcError::Device(format!(
                "the thread summing {} stopped on an internal error (please report it)",
                self.path.display()
            ))),
            None => Err(MpcError::Device(format!(
                "the checksum of {} was asked for twice (please report it)",
                self.path.display()
            ))),
        }
    }

    /// The sink the pieces went on to, once the checksum was taken ([`PieceSink::checksum`]),
    /// the time the encoder waited for the thread and the time the thread spent summing.
    pub(super) fn into_inner(mut self) -> Result<(S, Duration, Duration)> {
        let inner = self.inner.take().ok_or_else(|| {
            MpcError::Device(format!(
                "the pieces of {} were not all summed (please report it)",
                self.path.display()
            ))
        })?;
        Ok((inner, self.waited, self.summing))
    }
}

impl<S: PieceSink + Send + 'static> PieceSink for SumPipe<S> {
    fn put(&mut self, at: u64, piece: Vec<u8>) -> Result<Vec<u8>> {
        let t = Instant::now();
        let sent = self
            .to_sum
            .as_ref()
            .is_some_and(|t| t.send((at, piece)).is_ok());
        // a closed channel: the thread stopped on an error, which join returns
        let next = if sent { self.free.recv().ok() } else { None };
        self.waited += t.elapsed();
        match next {
            Some(b) => Ok(b),
            None => {
                self.join()?;
                Err(MpcError::Device(format!(
                    "the thread summing {} stopped early (please report it)",
                    self.path.display()
                )))
            }
        }
    }

    fn sums(&self) -> bool {
        true
    }

    fn checksum(&mut self) -> Result<u64> {
        self.join()
    }
}

impl<S> Drop for SumPipe<S> {
    /// The pieces sent are passed on before the thread ends (dropping the sender ends its loop).
    fn drop(&mut self) {
        self.to_sum = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::parted::encode::{stream_block, FluidView};
    use crate::state::FluidState;

    /// Checksummed on a thread of its own, in pieces that split values and MiB, a block holds
    /// the bytes, checksum and y range of one summed as it is encoded.
    #[test]
    fn a_block_summed_on_its_own_thread_is_the_block_summed_inline() {
        let cfg = crate::config::Config::from_ron_str(
            "(cells: (16, 20, 16), particles_per_cell: 9, time_step: 0.1, seed: 3, steps: 1, \
              collision: Srd(angle_deg: 130.0))",
        )
        .unwrap();
        let st = FluidState::initial(&cfg);
        let mut inline = Vec::new();
        let want = stream_block(&mut FluidView::Whole(&st), 0, 32 << 20, &mut inline).unwrap();
        let total = inline.len() as u64;
        for piece in [1004, 65_536, 3 << 20] {
            let mut pipe = SumPipe::new(Vec::new(), total, Path::new("(memory)")).unwrap();
            let got = stream_block(&mut FluidView::Whole(&st), 0, piece, &mut pipe).unwrap();
            let (bytes, ..) = pipe.into_inner().unwrap();
            assert!(bytes == inline, "pieces of {piece}: the bytes differ");
            assert_eq!(got, want, "pieces of {piece}");
        }
    }

    /// Pieces written through the disk thread, their write-back streamed, land at their
    /// offsets; a file the kernel cannot stream (a character device) is written all the same.
    #[test]
    fn pieces_streamed_to_disk_land_at_their_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("block");
        let file = Arc::new(File::create(&path).unwrap());
        let base = 100;
        let mut pipe = DiskPipe::new(file.clone(), &path, base).unwrap();
        let mut want = vec![0u8; base as usize];
        let mut at = 0;
        for (k, len) in [5000usize, 1 << 20, 3, 70_001].into_iter().enumerate() {
            let piece: Vec<u8> = (0..len).map(|i| (i * 7 + k) as u8).collect();
            want.extend_from_slice(&piece);
            pipe.put(at, piece).unwrap();
            at += len as u64;
        }
        pipe.finish().unwrap();
        file.sync_all().unwrap();
        assert!(std::fs::read(&path).unwrap() == want, "the file differs");

        let null = Arc::new(
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/null")
                .unwrap(),
        );
        let mut pipe = DiskPipe::new(null, Path::new("/dev/null"), 0).unwrap();
        pipe.put(0, vec![1; 4096]).unwrap();
        pipe.put(4096, vec![2; 4096]).unwrap();
        pipe.finish().unwrap();
    }

    /// Pieces of whole pages at page offsets, the last one short, written by the direct-I/O
    /// threads (the default) land at their offsets in any order of the threads; the short
    /// piece's page is padded with zeros (a file system without direct I/O writes them through
    /// the page cache, unpadded).
    #[test]
    fn pieces_written_directly_land_at_their_offsets() {
        let dir = tempfile::tempdir_in(".").unwrap();
        let path = dir.path().join("block");
        let file = Arc::new(File::create(&path).unwrap());
        let base = 2 * 4096;
        let mut pipe = DiskPipe::new(file.clone(), &path, base).unwrap();
        let mut want = vec![0u8; base as usize];
        let mut at = 0;
        for (k, len) in [8192usize, 3 * 4096, 4096, 8192, 1000]
            .into_iter()
            .enumerate()
        {
            let piece: Vec<u8> = (0..len).map(|i| (i * 13 + k + 1) as u8).collect();
            want.extend_from_slice(&piece);
            pipe.put(at, piece).unwrap();
            at += len as u64;
        }
        pipe.finish().unwrap();
        file.sync_all().unwrap();
        let got = std::fs::read(&path).unwrap();
        assert!(got[..want.len()] == want[..], "the pieces differ");
        let padded = want.len().next_multiple_of(4096);
        assert!(
            got.len() == want.len() || got.len() == padded,
            "{} bytes",
            got.len()
        );
        assert!(got[want.len()..].iter().all(|&b| b == 0));
    }

    /// A sink that fails at its second piece.
    struct Full(usize);
    impl PieceSink for Full {
        fn put(&mut self, _at: u64, mut piece: Vec<u8>) -> Result<Vec<u8>> {
            self.0 += 1;
            if self.0 == 2 {
                return Err(MpcError::io(
                    Path::new("/full/ck.mpcbox"),
                    std::io::Error::other("no space left"),
                ));
            }
            piece.clear();
            Ok(piece)
        }
    }

    /// The sink's error comes back to the encoder, naming the file.
    #[test]
    fn an_error_past_the_checksum_thread_names_the_file() {
        let cfg = crate::config::Config::from_ron_str(
            "(cells: (8, 8, 8), particles_per_cell: 9, time_step: 0.1, seed: 3, steps: 1, \
              collision: Srd(angle_deg: 130.0))",
        )
        .unwrap();
        let st = FluidState::initial(&cfg);
        let total = st.len() as u64 * super::super::PARTICLE_BYTES;
        let mut pipe = SumPipe::new(Full(0), total, Path::new("/full/ck.mpcbox")).unwrap();
        let e = stream_block(&mut FluidView::Whole(&st), 0, 4096, &mut pipe).unwrap_err();
        assert!(e.to_string().contains("/full/ck.mpcbox"), "{e}");
    }
}
