//! The machine a run measures (its kind names the records' file and the report's section), the
//! build, the date, and the hardware references measured beside the figures.

use serde::{Deserialize, Serialize};

use mpcbox::backend::cuda::CudaDevice;
use mpcbox::config::DeviceChoice;

use crate::Res;

/// Where a scenario ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// "<n> × <GPU name>" for a GPU run (the GPUs present), "CPU: <model>, <n> cores" for the
    /// CPU backend: the section of `docs/performance.md`.
    pub kind: String,
    /// GPUs present (0 without CUDA).
    pub gpus: usize,
    /// GPUs the scenario used (0: the CPU backend).
    pub gpus_used: usize,
    pub gpu_name: Option<String>,
    pub cpu: String,
    pub host_cores: usize,
}

impl Machine {
    /// This machine, for a scenario on `device` using `gpus_used` GPUs of it.
    pub fn detect(device: &DeviceChoice, gpus_used: usize) -> Machine {
        let host_cores = std::thread::available_parallelism().map_or(0, |n| n.get());
        let cpu = cpu_model();
        let gpus = mpcbox::backend::cuda::probe().unwrap_or(0);
        let gpu_name = (gpus > 0)
            .then(|| CudaDevice::open(0).ok().map(|d| gpu_name(&d.describe())))
            .flatten();
        let on_gpu = !matches!(device, DeviceChoice::Cpu) && gpus > 0 && gpus_used > 0;
        let kind = match (&gpu_name, on_gpu) {
            (Some(name), true) => format!("{gpus} × {name}"),
            _ => format!("CPU: {cpu}, {host_cores} cores"),
        };
        Machine {
            kind,
            gpus,
            gpus_used: if on_gpu { gpus_used } else { 0 },
            gpu_name,
            cpu,
            host_cores,
        }
    }

    /// The records' file name of this machine kind: its words in lower case, joined by '-'.
    pub fn file_stem(&self) -> String {
        let s: String = self
            .kind
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    ' '
                }
            })
            .collect();
        s.split_whitespace().collect::<Vec<_>>().join("-")
    }
}

/// "cuda:0 <name> (…)" → "<name>".
fn gpu_name(describe: &str) -> String {
    let rest = describe.split_once(' ').map_or(describe, |(_, r)| r);
    rest.split(" (").next().unwrap_or(rest).trim().to_string()
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.split_whitespace().collect::<Vec<_>>().join(" "))
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// The build measured: `MPCBOX_COMMIT` (the device wrapper sets it where the tree has no git),
/// else `git rev-parse --short HEAD` (with "-dirty" for local changes), else "unknown".
pub fn commit() -> String {
    if let Ok(c) = std::env::var("MPCBOX_COMMIT") {
        if !c.is_empty() {
            return c;
        }
    }
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match git(&["rev-parse", "--short", "HEAD"]) {
        Some(head) => match git(&["status", "--porcelain", "--untracked-files=no"]) {
            Some(s) if !s.is_empty() => format!("{head}-dirty"),
            _ => head,
        },
        None => "unknown".into(),
    }
}

/// Now in UTC, `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + (m <= 2) as i64, m, d)
}

/// Host memory copy bandwidth in GB/s (bytes read + written, one thread, 256 MiB buffers, best
/// of 5): the CPU scenarios' reference.
pub fn host_copy_gbps() -> Res<f64> {
    let n = 32 << 20;
    let src = vec![1.0f64; n];
    let mut dst = vec![0.0f64; n];
    let mut best = 0.0f64;
    for _ in 0..5 {
        let t = std::time::Instant::now();
        dst.copy_from_slice(&src);
        std::hint::black_box(&mut dst);
        best = best.max(2.0 * (n * 8) as f64 / t.elapsed().as_secs_f64());
    }
    Ok(best / 1e9)
}

/// Device-to-device copy bandwidth of GPU `ordinal`, GB/s (bytes read + written, 1 GiB).
pub fn device_copy_gbps(ordinal: usize) -> Res<f64> {
    let dev = CudaDevice::open(ordinal).map_err(|e| e.to_string())?;
    Ok(dev.copy_bandwidth(1 << 30, 20).map_err(|e| e.to_string())? / 1e9)
}

/// Pinned host memory to GPU `ordinal` and back, GB/s each way (256 MiB, best of 10): the
/// PCIe floor of host solutes.
pub fn pinned_copy_gbps(ordinal: usize) -> Res<(f64, f64)> {
    let dev = CudaDevice::open(ordinal).map_err(|e| e.to_string())?;
    let (up, down) = dev
        .pinned_copy_rates(256 << 20, 10)
        .map_err(|e| e.to_string())?;
    Ok((up / 1e9, down / 1e9))
}

/// Pageable memory through the pinned staging (256 MiB), GB/s: the host's copy into it alone,
/// then the whole way up and down as a coupled step does it.
pub fn staged_copy_gbps(ordinal: usize) -> Res<[f64; 3]> {
    let dev = CudaDevice::open(ordinal).map_err(|e| e.to_string())?;
    let r =
        mpcbox::backend::cuda::staged_copy_rates(&dev, 256 << 20, 5).map_err(|e| e.to_string())?;
    Ok([r.host_copy, r.up, r.down].map(|b| b / 1e9))
}

/// GPU 0 → 1 peer copy of plain allocations (the hardware's rate), GB/s (256 MiB).
pub fn peer_copy_gbps() -> Res<f64> {
    let r = mpcbox::backend::cuda::transfer::measure_transfer(0, 1, 256 << 20, 5)
        .map_err(|e| e.to_string())?;
    Ok(r.peer_plain_alloc / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_names() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_454), (2026, 1, 1));
        assert_eq!(civil_from_days(20_783), (2026, 11, 26));
        assert_eq!(gpu_name("cuda:0 NVIDIA H200"), "NVIDIA H200");
        assert_eq!(
            gpu_name("cuda:0 NVIDIA H100 80GB HBM3 (fused cell sums)"),
            "NVIDIA H100 80GB HBM3"
        );
        let m = Machine {
            kind: "2 × NVIDIA H200".into(),
            gpus: 2,
            gpus_used: 2,
            gpu_name: None,
            cpu: String::new(),
            host_cores: 16,
        };
        assert_eq!(m.file_stem(), "2-nvidia-h200");
    }
}
