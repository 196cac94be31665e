//! `checkpoint`: a checkpoint's write and a resume's read against the disk's own rates. A
//! fluid of L³ × M particles on `--device` is written to `--dir` (`Solvent::save_checkpoint`:
//! the streamed writer, window by window, checksummed, synced); then, with the page cache
//! dropped where the process may (root), the file's fluid is counted and streamed into
//! `--parts` parts on the host (`PartedFile::count_parts`, `stream_parts`: the path a
//! multi-GPU resume takes, the values discarded: the host's share of a resume), and a whole resume is timed
//! (`Solvent::from_checkpoint_file` on the same device). Beside them, the disk's sequential
//! rates with direct I/O (1 GiB written and read back; absent where the file system has no
//! direct I/O, e.g. tmpfs).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::Instant;

use serde_json::json;

use mpcbox::checkpoint::{CheckpointFile, StoredFluid, Values, WriterSettings};
use mpcbox::config::Config;
use mpcbox::Solvent;

use super::{cube, err, recorder};
use crate::Res;

#[derive(clap::Args)]
pub struct Args {
    /// Edge lengths of the cubic boxes, in cells.
    #[arg(long, value_delimiter = ',', default_value = "128")]
    sizes: Vec<u32>,
    /// Particles per cell.
    #[arg(long, default_value_t = 10)]
    m: u32,
    /// auto | cpu | all | cuda:N[,M...]
    #[arg(long, default_value = "cpu")]
    device: String,
    /// The parts the read streams the fluid into (a multi-GPU resume: one per slab).
    #[arg(long, default_value_t = 4)]
    parts: usize,
    /// Where the files go (the disk measured); the checkpoint is removed at the end.
    #[arg(long, default_value = ".")]
    dir: String,
    /// MiB written and read back for the disk's direct-I/O reference.
    #[arg(long, default_value_t = 1024)]
    reference_mib: usize,
}

pub fn run(a: Args, records: Option<&Path>) -> Res<()> {
    let device = super::device(&a.device)?;
    let dir = Path::new(&a.dir).join(format!("mpcbox-bench-checkpoint-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(err)?;
    let mut rec = recorder("checkpoint", &device, records);
    let total = a.reference_mib.max(16) << 20;
    rec.reference("disk write GB/s (direct I/O)", disk_rate(&dir, total, true));
    rec.reference("disk read GB/s (direct I/O)", disk_rate(&dir, total, false));
    let measured = measure(&a, &device, &mut rec, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    measured
}

fn measure(
    a: &Args,
    device: &mpcbox::config::DeviceChoice,
    rec: &mut super::Recorder,
    dir: &Path,
) -> Res<()> {
    let path = dir.join("checkpoint.mpcbox");
    for &l in &a.sizes {
        let mut cfg = Config::from_ron_str(&format!(
            "(cells: ({l}, {l}, {l}), particles_per_cell: {}, time_step: 0.1, steps: 10, \
              collision: Srd(angle_deg: 130.0), seed: 5)",
            a.m
        ))
        .map_err(err)?;
        cfg.device = device.clone();
        cfg.validate().map_err(err)?;
        let mut solvent = Solvent::new(cfg.clone()).map_err(err)?;
        solvent.step().map_err(err)?;
        let t = Instant::now();
        solvent.save_checkpoint(&path, None).map_err(err)?;
        let write = t.elapsed().as_secs_f64();
        drop(solvent);
        let bytes = std::fs::metadata(&path).map_err(err)?.len() as f64;

        let dropped = drop_page_cache();
        let file = CheckpointFile::open(&path).map_err(err)?;
        let StoredFluid::Parted(parted) = file.fluid() else {
            return Err("checkpoint: the file was not written in blocks (please report it)".into());
        };
        let window = WriterSettings::from_knobs().window_bytes();
        let ly = l as f32;
        let parts = a.parts.max(1);
        let part_of = |y: f32| Some(((y / ly) * parts as f32) as usize);
        let all = [f32::NEG_INFINITY, f32::INFINITY];
        let _ = mpcbox::timing::take_phases();
        let t = Instant::now();
        let mut values = 0usize;
        // as a multi-GPU resume reads it: the parts' particles counted (the map of parts kept),
        // then every section streamed into them
        let (_, map) = parted
            .count_parts(parts, all, part_of, window)
            .map_err(err)?;
        parted
            .stream_parts(
                parts,
                all,
                part_of,
                window,
                map.as_ref(),
                &mut |_, _, _, v| {
                    values += match v {
                        Values::Ids(v) => v.len(),
                        Values::F32(v) => v.len(),
                        Values::F64(v) => v.len(),
                    };
                    Ok(())
                },
            )
            .map_err(err)?;
        let stream = t.elapsed().as_secs_f64();
        // where the read's time went (the reader's reads, the values' handling)
        for p in mpcbox::timing::take_phases() {
            eprintln!(
                "read into parts, {}: {:.2} s of {stream:.2} s",
                p.name, p.seconds
            );
        }
        if values != 7 * cfg.n_fluid() as usize {
            return Err(format!(
                "checkpoint: the read gave {values} values of {} (please report it)",
                7 * cfg.n_fluid()
            ));
        }
        drop(file);

        drop_page_cache();
        let t = Instant::now();
        let file = CheckpointFile::open(&path).map_err(err)?;
        let resumed = Solvent::from_checkpoint_file(&file, Some(device.clone())).map_err(err)?;
        let resume = t.elapsed().as_secs_f64();
        drop(resumed);
        let _ = std::fs::remove_file(&path);
        rec.row(
            &[
                ("cells", cube(l)),
                ("M", json!(a.m)),
                ("particles", json!(cfg.n_fluid())),
                ("parts", json!(parts)),
                ("page cache dropped", json!(dropped)),
            ],
            &[
                ("GB", bytes / 1e9),
                ("write GB/s", bytes / write / 1e9),
                ("read into parts GB/s", bytes / stream / 1e9),
                ("resume GB/s", bytes / resume / 1e9),
            ],
        )?;
    }
    Ok(())
}

/// Sync, then drop the clean pages of the page cache (root only): whether it was dropped.
pub(super) fn drop_page_cache() -> bool {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "1").is_ok()
}

/// The disk's sequential rate under `dir` with direct I/O, GB/s: `total` bytes (a multiple of
/// 16 MiB) written in 16 MiB requests (`write`) or read back.
pub(super) fn disk_rate(dir: &Path, total: usize, write: bool) -> Res<f64> {
    const CHUNK: usize = 16 << 20;
    let total = total.next_multiple_of(CHUNK);
    let path = dir.join("direct.bin");
    // direct I/O needs an aligned buffer: one page-aligned allocation
    let layout = std::alloc::Layout::from_size_align(CHUNK, 4096).map_err(err)?;
    // SAFETY: the layout has a non-zero size; the memory is freed below with the same layout.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return Err("checkpoint: no memory for the disk's reference".into());
    }
    // SAFETY: ptr holds CHUNK initialised (zeroed) bytes, owned here until the dealloc.
    let buf = unsafe { std::slice::from_raw_parts_mut(ptr, CHUNK) };
    let result = (|| -> std::io::Result<f64> {
        if write {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .custom_flags(libc::O_DIRECT)
                .open(&path)?;
            let t = Instant::now();
            for _ in 0..total / CHUNK {
                f.write_all(buf)?;
            }
            f.sync_all()?;
            Ok(total as f64 / t.elapsed().as_secs_f64() / 1e9)
        } else {
            use std::io::Read;
            let mut f = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECT)
                .open(&path)?;
            let t = Instant::now();
            for _ in 0..total / CHUNK {
                f.read_exact(buf)?;
            }
            let rate = total as f64 / t.elapsed().as_secs_f64() / 1e9;
            let _ = std::fs::remove_file(&path);
            Ok(rate)
        }
    })();
    // SAFETY: allocated above with this layout, not used after.
    unsafe { std::alloc::dealloc(ptr, layout) };
    result.map_err(|e| format!("direct I/O under {}: {e}", dir.display()))
}
