//! Writing a format-4 file from every rank at once: each rank its block, rank 0 the head.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::encode::stream_block;
use super::{align, io, meta_and_header, Block, LocalFluid, PAGE, PARTICLE_BYTES};
use crate::checkpoint::CheckpointHead;
use crate::error::{MpcError, Result};
use crate::ranks::Transport;

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

/// Write the checkpoint of `head` and the fluid of `n_fluid` particles, of which this process
/// holds `packed` ([`PARTICLE_WORDS`] each), to `path` atomically: every rank calls this, each
/// writes its own block into a temporary file beside `path`, and rank 0 adds the meta, then
/// renames it over `path` once every block is on disk. Every rank returns the same outcome; a
/// failure leaves the previous file as it was.
pub(crate) fn write(
    path: &Path,
    head: &CheckpointHead,
    n_fluid: u64,
    fluid: &LocalFluid,
    transport: &dyn Transport,
) -> Result<()> {
    let fluid = fluid.view();
    let (count, y_range) = (fluid.count(), fluid.y_range());
    let mine = [
        (count * PARTICLE_BYTES) as f64,
        count as f64,
        f64::from(y_range[0]),
        f64::from(y_range[1]),
        f64::from(std::process::id()),
    ];
    let all = transport.gather(&mine)?;
    let mut blocks = Vec::with_capacity(transport.ranks());
    let mut at = PAGE;
    for w in all.chunks_exact(mine.len()) {
        blocks.push(Block {
            offset: at,
            count: w[1] as u64,
            y_range: [w[2] as f32, w[3] as f32],
            checksum: 0,
        });
        at = align(at + w[0] as u64);
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
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // rank 0's process id names the temporary file on every rank
    let tmp = dir.join(format!(".{name}.tmp.{}", all[4] as u64));
    let root = transport.rank() == 0;
    let created = if root {
        std::fs::create_dir_all(&dir)
            .map_err(io(&dir))
            .and_then(|_| File::create(&tmp).map(drop).map_err(io(&tmp)))
    } else {
        Ok(())
    };
    agree(transport, created, "create the temporary checkpoint", path)?;
    let me = blocks[transport.rank()];
    // the block streamed into its place piece by piece, its checksum taken on the way
    let written = std::fs::OpenOptions::new()
        .write(true)
        .open(&tmp)
        .map_err(io(&tmp))
        .and_then(|f| {
            let sum = stream_block(fluid, &mut |offset, piece| {
                f.write_all_at(piece, me.offset + offset).map_err(io(&tmp))
            })?;
            f.sync_data().map_err(io(&tmp))?;
            Ok(sum)
        });
    // every rank's outcome and checksum, in one gather
    let sum = *written.as_ref().unwrap_or(&0);
    let report = [
        f64::from(u8::from(written.is_err())),
        (sum >> 32) as f64,
        (sum & 0xffff_ffff) as f64,
    ];
    let reports = transport.gather(&report)?;
    for (b, r) in blocks.iter_mut().zip(reports.chunks_exact(report.len())) {
        b.checksum = ((r[1] as u64) << 32) | r[2] as u64;
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
    let finished = written.and_then(|_| {
        if !root {
            return Ok(());
        }
        let (meta, header) = meta_and_header(path, head, n_fluid, blocks, at)?;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&tmp)
            .map_err(io(&tmp))?;
        f.write_all_at(&meta, at)
            .and_then(|_| f.write_all_at(&header, 0))
            .and_then(|_| f.sync_all())
            .and_then(|_| std::fs::rename(&tmp, path))
            .map_err(io(path))?;
        if let Ok(d) = File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(())
    });
    if finished.is_err() && root {
        let _ = std::fs::remove_file(&tmp);
    }
    agree(transport, finished, "finish the checkpoint", path)
}
