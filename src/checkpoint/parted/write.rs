//! Writing a format-4 file from every rank at once, in three stages: [`plan`] (collective:
//! every block's place; rank 0 creates the temporary file), [`write_block`] (each rank streams
//! its own block into its place: no collective call, so it may run on a thread of its own while
//! the run steps on) and [`finish`] (collective: the blocks' checksums and y ranges gathered,
//! rank 0 adds the meta and renames the file over the checkpoint once every block is on disk).
//!
//! A run's writer recycles: the checkpoint a write replaces is kept as the spare
//! (`.{name}.tmp.spare`, exchanged atomically with the new file), and the next write
//! overwrites it in place. Freeing a file of gigabytes on a file system that discards freed
//! blocks (ext4 mounted with `discard`, as cloud disks often are) slows the writes beside it by
//! a third; overwriting allocated blocks frees and allocates nothing. The writer removes the
//! spare when the run ends; a killed run's is removed with the other temporaries.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use super::disk::{DiskPipe, SumPipe};
use super::encode::{stream_block, BlockDone, BlockSource};
use super::{align, io, meta_and_header, Block, PAGE, PARTICLE_BYTES};
use crate::checkpoint::CheckpointHead;
use crate::error::{MpcError, Result};
use crate::ranks::Transport;

/// Bytes of a piece: a tenth of the host window (the `BUFFERS` pieces of a block take half
/// of it; the GPUs' staging and the values kept from it at most 35/100 more), between 64 KiB
/// and 32 MiB.
pub(crate) fn piece_bytes(window: u64) -> usize {
    // whole pages: every piece of a block starts on a page (direct writes need it)
    ((window / 10).clamp(64 << 10, 32 << 20) / PAGE * PAGE) as usize
}

/// The failures of one collective stage summed over the ranks: Ok on every rank when none
/// failed, else the local error (or one naming the stage) on every rank.
fn agree(transport: &dyn Transport, mine: Result<()>, stage: &str, path: &Path) -> Result<()> {
    let mut failed = [f64::from(u8::from(mine.is_err()))];
    transport.sum(&mut failed)?;
    match mine {
        Err(e) => Err(e),
        Ok(()) if failed[0] > 0.0 => Err(MpcError::Checkpoint {
            path: path.display().to_string(),
            problem: format!("{} rank(s) could not {stage}", failed[0]),
        }),
        Ok(()) => Ok(()),
    }
}

/// A checkpoint being written: where, and the place of every block.
pub(crate) struct WritePlan {
    path: PathBuf,
    tmp: PathBuf,
    /// Keep the replaced checkpoint as the spare (a run's writer), or free it.
    recycle: Recycle,
    /// Rank 0 took the spare as the temporary file: its padding holds an older file's bytes.
    recycled: bool,
    dir: PathBuf,
    blocks: Vec<Block>,
    /// Where the meta goes (after the last block).
    at: u64,
    rank: usize,
    /// The place in the file of this rank's first particle.
    first_id: u64,
    n_fluid: u64,
}

/// What becomes of the checkpoint a write replaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Recycle {
    /// Freed (a checkpoint written on its own, e.g. `Solvent::save_checkpoint`).
    Free,
    /// Kept as the spare that the next write overwrites in place (a run's writer, which
    /// removes it at the end: [`remove_spare`]).
    KeepSpare,
}

/// The spare of `path`: a replaced checkpoint whose blocks the next write takes over. Its name
/// carries the temporaries' prefix, so a killed run's spare goes with them.
pub(crate) fn spare_path(path: &Path) -> PathBuf {
    let dir = path.parent().unwrap_or(Path::new("."));
    dir.join(format!("{}spare", temporary_prefix(path)))
}

/// Remove `path`'s spare, if any (the run's writer is done with it).
pub(crate) fn remove_spare(path: &Path) {
    let _ = std::fs::remove_file(spare_path(path));
}

/// Stage 1 (collective): each rank's particle count gathered into the blocks' places; rank 0
/// makes the temporary file beside `path` (named by its process id on every rank): the spare
/// renamed, when recycling and there is one, else a new file.
pub(crate) fn plan(
    path: &Path,
    n_fluid: u64,
    count: u64,
    transport: &dyn Transport,
    recycle: Recycle,
) -> Result<WritePlan> {
    let mine = [count as f64, f64::from(std::process::id())];
    let all = transport.gather(&mine)?;
    let mut blocks = Vec::with_capacity(transport.ranks());
    let mut at = PAGE;
    for w in all.chunks_exact(mine.len()) {
        let count = w[0] as u64;
        blocks.push(Block {
            offset: at,
            count,
            y_range: [f32::INFINITY, f32::NEG_INFINITY],
            checksum: 0,
        });
        at = align(at + count * PARTICLE_BYTES);
    }
    let total: u64 = blocks.iter().map(|b| b.count).sum();
    if total != n_fluid {
        return Err(MpcError::Checkpoint {
            path: path.display().to_string(),
            problem: format!(
                "the ranks hold {total} fluid particles, the run has {n_fluid} (please report it)"
            ),
        });
    }
    let rank = transport.rank();
    let first_id = blocks[..rank].iter().map(|b| b.count).sum();
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let tmp = dir.join(format!(".{}.tmp.{}", file_name(path), all[1] as u64));
    let spare = spare_path(path);
    let recycled =
        rank == 0 && recycle == Recycle::KeepSpare && std::fs::rename(&spare, &tmp).is_ok();
    let created = if rank == 0 {
        // a recycled file keeps its length and blocks: every byte the reader checks is written
        // again, and `finish` cuts it to the new length
        std::fs::create_dir_all(&dir)
            .map_err(io(&dir))
            .and_then(|_| match recycled {
                true => Ok(()),
                false => File::create(&tmp).map(drop).map_err(io(&tmp)),
            })
    } else {
        Ok(())
    };
    agree(transport, created, "create the temporary checkpoint", path)?;
    Ok(WritePlan {
        path: path.to_path_buf(),
        tmp,
        recycle,
        recycled,
        dir,
        blocks,
        at,
        rank,
        first_id,
        n_fluid,
    })
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The name prefix of `path`'s temporary files (`.{name}.tmp.{pid}`).
pub(crate) fn temporary_prefix(path: &Path) -> String {
    format!(".{}.tmp.", file_name(path))
}

/// Stage 2 (this rank alone): stream `source` into this rank's block, in pieces of
/// [`piece_bytes`]`(window)` checksummed and written by a thread each, and put it on disk.
pub(crate) fn write_block(
    plan: &WritePlan,
    source: &mut dyn BlockSource,
    window: u64,
) -> Result<BlockDone> {
    let me = plan.blocks[plan.rank];
    let count: u64 = source.counts().iter().sum();
    if count != me.count {
        return Err(MpcError::Checkpoint {
            path: plan.path.display().to_string(),
            problem: format!(
                "this rank's fluid changed from {} to {count} particles while its checkpoint was \
                 written (please report it)",
                me.count
            ),
        });
    }
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&plan.tmp)
        .map_err(io(&plan.tmp))?;
    let f = Arc::new(f);
    let t = Instant::now();
    let disk = DiskPipe::new(f.clone(), &plan.tmp, me.offset)?;
    // encoding (this thread), checksum and write (a thread each) overlap
    let mut pipe = SumPipe::new(disk, me.count * PARTICLE_BYTES, &plan.tmp)?;
    let done = stream_block(source, plan.first_id, piece_bytes(window), &mut pipe)?;
    let (disk, waited, summing) = pipe.into_inner()?;
    let writing = disk.finish()?;
    let written = t.elapsed();
    f.sync_data().map_err(io(&plan.tmp))?;
    tracing::debug!(
        "{}: a block of {} bytes streamed in {:.3} s (synced after {:.3} s more); the source \
         and encoding waited {:.3} s of it for the checksum and disk threads, which summed for \
         {:.3} s and wrote for {:.3} s",
        plan.tmp.display(),
        me.count * PARTICLE_BYTES,
        written.as_secs_f64(),
        (t.elapsed() - written).as_secs_f64(),
        waited.as_secs_f64(),
        summing.as_secs_f64(),
        writing.as_secs_f64(),
    );
    Ok(done)
}

/// Stage 3 (collective): every rank's outcome, checksum and y range gathered; rank 0 writes
/// the meta and header, syncs and renames the file over the checkpoint. Every rank returns the
/// same outcome; a failure leaves the previous file as it was.
pub(crate) fn finish(
    plan: WritePlan,
    head: &CheckpointHead,
    written: Result<BlockDone>,
    transport: &dyn Transport,
) -> Result<()> {
    let WritePlan {
        path,
        tmp,
        recycle,
        recycled,
        dir,
        mut blocks,
        at,
        rank,
        n_fluid,
        ..
    } = plan;
    let done = *written.as_ref().unwrap_or(&BlockDone {
        checksum: 0,
        y_range: [0.0; 2],
    });
    let report = [
        f64::from(u8::from(written.is_err())),
        (done.checksum >> 32) as f64,
        (done.checksum & 0xffff_ffff) as f64,
        f64::from(done.y_range[0]),
        f64::from(done.y_range[1]),
    ];
    let reports = transport.gather(&report)?;
    for (b, r) in blocks.iter_mut().zip(reports.chunks_exact(report.len())) {
        b.checksum = ((r[1] as u64) << 32) | r[2] as u64;
        b.y_range = [r[3] as f32, r[4] as f32];
    }
    let failed = reports
        .chunks_exact(report.len())
        .filter(|r| r[0] > 0.0)
        .count();
    let written = match written {
        Err(e) => Err(e),
        Ok(_) if failed > 0 => Err(MpcError::Checkpoint {
            path: path.display().to_string(),
            problem: format!("{failed} rank(s) could not write their block"),
        }),
        Ok(_) => Ok(()),
    };
    let root = rank == 0;
    let finished = written.and_then(|_| {
        if !root {
            return Ok(());
        }
        // a recycled file's padding is zeroed where a new file has nothing written
        let padding = recycled.then(|| blocks.clone());
        let (meta, header) = meta_and_header(&path, head, n_fluid, blocks, at)?;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&tmp)
            .map_err(io(&tmp))?;
        use std::os::unix::fs::FileExt;
        if let Some(blocks) = &padding {
            zero_padding(&f, blocks, at).map_err(io(&tmp))?;
        }
        f.write_all_at(&meta, at)
            .and_then(|_| f.write_all_at(&header, 0))
            .and_then(|_| f.set_len(at + meta.len() as u64))
            .and_then(|_| f.sync_all())
            .map_err(io(&tmp))?;
        if recycle == Recycle::KeepSpare && exchange(&tmp, &path).is_ok() {
            // `tmp` names the replaced checkpoint now: the next write's spare
            if std::fs::rename(&tmp, spare_path(&path)).is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
            if let Ok(d) = File::open(&dir) {
                let _ = d.sync_all();
            }
            return Ok(());
        }
        // the checkpoint replaced stays open here, so that the rename only unlinks its name;
        // its blocks are freed when a thread of its own closes it (on ext4, freeing a file of
        // gigabytes takes about a second, which would hold the next checkpoint)
        let replaced = File::open(&path).ok();
        std::fs::rename(&tmp, &path).map_err(io(&path))?;
        if let Some(old) = replaced {
            let closing = std::thread::Builder::new()
                .name("mpcbox-free".into())
                .spawn(move || drop(old));
            // no thread to spare: closed here
            if let Err(e) = closing {
                tracing::debug!("the replaced checkpoint closed in place: {e}");
            }
        }
        if let Ok(d) = File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(())
    });
    if finished.is_err() && root {
        let _ = std::fs::remove_file(&tmp);
    }
    agree(transport, finished, "finish the checkpoint", &path)
}

/// Zeros where a new file has none written: the header's page past the header, and each
/// block's last page past its particles (the buffered writes leave it unwritten), so that a
/// recycled file's bytes equal a new one's.
fn zero_padding(f: &File, blocks: &[Block], at: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let zeros = [0u8; PAGE as usize];
    f.write_all_at(
        &zeros[..PAGE as usize - super::HEADER],
        super::HEADER as u64,
    )?;
    for b in blocks {
        let end = b.offset + b.count * PARTICLE_BYTES;
        let pad = (align(end) - end).min(at - end) as usize;
        f.write_all_at(&zeros[..pad], end)?;
    }
    Ok(())
}

/// Swap the names `new` and `old` atomically (`renameat2` with `RENAME_EXCHANGE`): at no
/// moment is `old`'s name missing or torn. Fails where `old` does not exist or the file
/// system cannot exchange; the caller then renames.
fn exchange(new: &Path, old: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
    };
    let (a, b) = (c(new)?, c(old)?);
    // SAFETY: two NUL-terminated paths that outlive the call, resolved against the working
    // directory (AT_FDCWD); renameat2 only reads them.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    match r {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Write the checkpoint of `head` and the fluid of `n_fluid` particles, of which this process
/// holds `source`, to `path` atomically: every rank calls this, each writes its own block into
/// a temporary file beside `path`, and rank 0 adds the meta, then renames it over `path` once
/// every block is on disk. At most `window` bytes of the block are on the host at once. Every
/// rank returns the same outcome; a failure leaves the previous file as it was.
pub(crate) fn write(
    path: &Path,
    head: &CheckpointHead,
    n_fluid: u64,
    source: &mut dyn BlockSource,
    window: u64,
    transport: &dyn Transport,
    recycle: Recycle,
) -> Result<()> {
    let count = source.counts().iter().sum();
    let plan = plan(path, n_fluid, count, transport, recycle)?;
    let written = write_block(&plan, source, window);
    finish(plan, head, written, transport)
}
