//! How a checkpoint's bytes come off the disk and go onto it: large reads cut into parts read
//! in parallel, and, for bytes read once, with direct I/O; pieces written with direct I/O from
//! an aligned copy ([`DirectWriter`]). Buffered, the kernel reads a large file ahead in
//! small requests and a single stream stays well below the disk's own rate; direct requests
//! of megabytes keep it busy (docs/reliability.md has the figures). Values read again (the y
//! section, beside every other one) stay buffered so the page cache serves them.

use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::ptr::NonNull;
use std::sync::Mutex;

use super::PAGE;

/// Reads in flight at once for a large read.
const READERS: usize = 4;
/// Reads below this size stay whole and buffered.
pub(super) const SPLIT_FROM: usize = 4 << 20;

/// `out.len()` bytes of `f` at `offset`, large reads cut into [`READERS`] parts read by
/// threads of their own, each with `read_part`.
fn in_parts(
    out: &mut [u8],
    offset: u64,
    read_part: impl Fn(&mut [u8], u64) -> std::io::Result<()> + Sync,
) -> std::io::Result<()> {
    // whole pages per part, so that no two readers share one
    let part = out.len().div_ceil(READERS).next_multiple_of(PAGE as usize);
    std::thread::scope(|scope| {
        let read_part = &read_part;
        let readers: Vec<_> = out
            .chunks_mut(part)
            .enumerate()
            .map(|(i, chunk)| {
                let at = offset + (i * part) as u64;
                scope.spawn(move || read_part(chunk, at))
            })
            .collect();
        readers.into_iter().try_for_each(|r| {
            r.join()
                .unwrap_or_else(|_| Err(std::io::Error::other("a reader thread panicked")))
        })
    })
}

/// Buffered reads of `f`, large ones in parallel parts.
pub(super) fn read_buffered(f: &File, out: &mut [u8], offset: u64) -> std::io::Result<()> {
    if out.len() < SPLIT_FROM {
        return f.read_exact_at(out, offset);
    }
    in_parts(out, offset, |chunk, at| f.read_exact_at(chunk, at))
}

/// A second handle on the file, opened for direct I/O, and the page-aligned buffers its
/// reads land in (kept for the next read).
pub(super) struct DirectReader {
    file: File,
    spare: Mutex<Vec<AlignedBuffer>>,
}

impl DirectReader {
    /// None where the file system has no direct I/O (tmpfs): reads then stay buffered.
    pub(super) fn open(path: &Path) -> Option<DirectReader> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .ok()?;
        Some(DirectReader {
            file,
            spare: Mutex::new(Vec::new()),
        })
    }

    /// `out.len()` bytes at `offset`, in parallel parts, each read directly into an aligned
    /// buffer and copied out; a part the disk refuses to read directly (an odd file system)
    /// is read through `buffered` instead.
    pub(super) fn read(&self, buffered: &File, out: &mut [u8], offset: u64) -> std::io::Result<()> {
        in_parts(out, offset, |chunk, at| {
            self.read_part(chunk, at)
                .or_else(|_| buffered.read_exact_at(chunk, at))
        })
    }

    fn read_part(&self, out: &mut [u8], offset: u64) -> std::io::Result<()> {
        let page = PAGE as usize;
        let first = offset - offset % PAGE;
        let skip = (offset - first) as usize;
        let span = (skip + out.len()).next_multiple_of(page);
        let mut buf = self.take_buffer(span)?;
        let got = buf.read_at(&self.file, first, span);
        let result = got.and_then(|n| {
            if n < skip + out.len() {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            out.copy_from_slice(&buf.filled(n)[skip..skip + out.len()]);
            Ok(())
        });
        if let Ok(mut spare) = self.spare.lock() {
            spare.push(buf);
            // one per reader at most, the largest kept: the host memory stays bounded
            if spare.len() > READERS {
                spare.sort_by_key(|b| std::cmp::Reverse(b.capacity));
                spare.truncate(READERS);
            }
        }
        result
    }

    /// A spare buffer of at least `bytes`, or a new one.
    fn take_buffer(&self, bytes: usize) -> std::io::Result<AlignedBuffer> {
        let mut spare = self
            .spare
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?;
        match spare.iter().position(|b| b.capacity >= bytes) {
            Some(i) => Ok(spare.swap_remove(i)),
            None => AlignedBuffer::new(bytes),
        }
    }
}

/// A second handle on a file being written, opened for direct I/O, and the page-aligned
/// buffer each piece is copied into: written this way, a piece goes to the disk in one request
/// of its own size, without the page cache's copy and write-back (whose requests, on some
/// disks, stay well below the disk's sequential rate).
pub(super) struct DirectWriter {
    file: File,
    buf: Option<AlignedBuffer>,
}

impl DirectWriter {
    /// None where the file system has no direct I/O (tmpfs): writes then stay buffered.
    pub(super) fn open(path: &Path) -> Option<DirectWriter> {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .ok()?;
        Some(DirectWriter { file, buf: None })
    }

    /// `bytes` at the page-aligned `offset`, the last page padded with zeros. The padding is
    /// the caller's to own: a block's pages end at the next block's (or the meta's) first page.
    pub(super) fn write(&mut self, bytes: &[u8], offset: u64) -> std::io::Result<()> {
        if !offset.is_multiple_of(PAGE) {
            // as the kernel refuses an unaligned direct write: the caller writes it buffered
            return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
        }
        let span = bytes.len().next_multiple_of(PAGE as usize);
        if self.buf.as_ref().is_none_or(|b| b.capacity < span) {
            self.buf = None;
            self.buf = Some(AlignedBuffer::new(span)?);
        }
        let buf = self
            .buf
            .as_mut()
            .ok_or_else(|| std::io::Error::other("no buffer"))?;
        buf.fill(bytes, span);
        buf.write_at(&self.file, offset, span)
    }
}

/// Page-aligned host memory for direct reads and writes (a `Vec<u8>` has no alignment to
/// give).
struct AlignedBuffer {
    ptr: NonNull<u8>,
    capacity: usize,
}

// SAFETY: the buffer owns its memory alone (no aliasing handle exists), like a Vec<u8>.
unsafe impl Send for AlignedBuffer {}

impl AlignedBuffer {
    fn layout(capacity: usize) -> std::io::Result<std::alloc::Layout> {
        std::alloc::Layout::from_size_align(capacity, PAGE as usize)
            .map_err(|e| std::io::Error::other(e.to_string()))
    }

    fn new(bytes: usize) -> std::io::Result<AlignedBuffer> {
        let capacity = bytes.max(PAGE as usize);
        // SAFETY: the layout's size is non-zero; the memory is freed in Drop with it.
        let ptr = unsafe { std::alloc::alloc(Self::layout(capacity)?) };
        let ptr = NonNull::new(ptr).ok_or_else(|| std::io::Error::other("out of host memory"))?;
        Ok(AlignedBuffer { ptr, capacity })
    }

    /// Up to `span` bytes (within the capacity, a whole number of pages) of `file` at the
    /// page-aligned `offset`, read directly; the bytes read (fewer at the end of the file).
    fn read_at(&mut self, file: &File, offset: u64, span: usize) -> std::io::Result<usize> {
        use std::os::fd::AsRawFd;
        let span = span.min(self.capacity);
        let mut done = 0;
        while done < span {
            // SAFETY: the destination lies within this buffer's `capacity` bytes (done < span
            // <= capacity), which no reference points into during the call; the kernel writes
            // at most `span - done` bytes there.
            let n = unsafe {
                libc::pread(
                    file.as_raw_fd(),
                    self.ptr.as_ptr().add(done).cast(),
                    span - done,
                    (offset + done as u64) as libc::off_t,
                )
            };
            match n {
                0 => break,
                n if n < 0 => {
                    let e = std::io::Error::last_os_error();
                    if e.kind() == std::io::ErrorKind::Interrupted {
                        continue;
                    }
                    return Err(e);
                }
                n => {
                    done += n as usize;
                    // a short read not at a page boundary is the end of the file
                    if done % PAGE as usize != 0 {
                        break;
                    }
                }
            }
        }
        Ok(done)
    }

    /// The first `n` bytes, written by [`AlignedBuffer::read_at`].
    fn filled(&self, n: usize) -> &[u8] {
        // SAFETY: the caller passes the count `read_at` returned: those bytes were written by
        // the kernel, so they are initialised; n <= capacity.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), n.min(self.capacity)) }
    }
}

impl AlignedBuffer {
    /// `bytes` copied to the start, zeros after them up to `span` (within the capacity).
    fn fill(&mut self, bytes: &[u8], span: usize) {
        let span = span.min(self.capacity);
        let n = bytes.len().min(span);
        // SAFETY: `span` bytes from the start lie within this buffer's allocation, which no
        // other reference points into while `out` lives.
        let out = unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), span) };
        out[..n].copy_from_slice(&bytes[..n]);
        out[n..].fill(0);
    }

    /// The first `span` bytes (filled by [`AlignedBuffer::fill`]) written directly into `file`
    /// at the page-aligned `offset`.
    fn write_at(&self, file: &File, offset: u64, span: usize) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        let span = span.min(self.capacity);
        let mut done = 0;
        while done < span {
            // SAFETY: the source lies within this buffer's `capacity` bytes (done < span <=
            // capacity), initialised by `fill`; the kernel reads at most `span - done` bytes.
            let n = unsafe {
                libc::pwrite(
                    file.as_raw_fd(),
                    self.ptr.as_ptr().add(done).cast(),
                    span - done,
                    (offset + done as u64) as libc::off_t,
                )
            };
            match n {
                0 => return Err(std::io::ErrorKind::WriteZero.into()),
                n if n < 0 => {
                    let e = std::io::Error::last_os_error();
                    if e.kind() != std::io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
                n => done += n as usize,
            }
        }
        Ok(())
    }
}

impl Drop for AlignedBuffer {
    fn drop(&mut self) {
        if let Ok(layout) = Self::layout(self.capacity) {
            // SAFETY: allocated in `new` with this layout; not used after.
            unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Direct reads at any offset and length give the file's bytes, up to its very end; past
    /// it, an error (the caller then reads buffered, which fails the same way).
    #[test]
    fn direct_reads_at_any_offset_give_the_files_bytes() {
        let dir = tempfile::tempdir_in(".").unwrap();
        let path = dir.path().join("f.bin");
        let bytes: Vec<u8> = (0..(9 << 20) + 1234)
            .map(|i: usize| (i * 31 % 251) as u8)
            .collect();
        std::fs::write(&path, &bytes).unwrap();
        let buffered = File::open(&path).unwrap();
        let Some(direct) = DirectReader::open(&path) else {
            eprintln!("no direct I/O under the working directory: nothing to test");
            return;
        };
        for (at, len) in [
            (0, 4096),
            (1, 5 << 20),
            (4095, (9 << 20) + 1234 - 4095),
            (777, 12),
        ] {
            let mut out = vec![0u8; len];
            direct.read(&buffered, &mut out, at as u64).unwrap();
            assert!(out == bytes[at..at + len], "{len} bytes at {at}");
        }
        let mut past = vec![0u8; 8192];
        assert!(direct.read(&buffered, &mut past, (9 << 20) as u64).is_err());
    }
}
