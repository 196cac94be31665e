//! What a memory footprint is ([`Footprint`]), how much host memory is free, and how bytes are
//! written for people. Each backend computes its own footprint (`backend::cpu::footprint`,
//! `backend::cuda::footprint`); this leaf module imports none of them.

/// Bytes a backend needs for a config.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Footprint {
    pub bytes_per_particle: u64,
    pub bytes_per_cell: u64,
    pub total_bytes: u64,
}

impl Footprint {
    /// A footprint of `particles` fluid particles in `cells` cells.
    pub fn new(
        particles: u64,
        cells: u64,
        bytes_per_particle: u64,
        bytes_per_cell: u64,
    ) -> Footprint {
        let total = particles * bytes_per_particle + cells * bytes_per_cell;
        Footprint {
            bytes_per_particle,
            bytes_per_cell,
            total_bytes: total,
        }
    }
}

/// Host memory the kernel says a new allocation can get without swapping (`MemAvailable`), or
/// None where /proc/meminfo is not readable.
pub fn host_available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

pub fn human_bytes(b: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.2} {}", units[u])
}
