//! Neighbour search: cell lists by counting sort with a prefix sum ([`cell`]), full Verlet
//! lists with a skin ([`verlet`]: each pair appears in both particles' lists, so every particle
//! sums its own force and no two threads ever write the same element), Morton (Z-curve)
//! ordering ([`morton`]), and the O(N²) all-pairs path for small systems. The GPU lists are
//! built by `md::gpu::neighbor`.

pub mod cell;
pub mod morton;
pub mod verlet;

pub use super::boundary::min_image;
pub use cell::CellList;
pub use morton::{morton_key, morton_order};
pub use verlet::{ChunkList, VerletList};

/// Particles per parallel work item. Fixed, so list contents and every reduction are the same
/// for any thread count.
pub const CHUNK: usize = 512;

/// How neighbours are found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum NeighborMode {
    /// All pairs when [`prefer_all_pairs`] says so (N below [`ALL_PAIRS_CROSSOVER`] times
    /// the list neighbours per particle) or when a box edge is under 2.5 list radii; cell lists
    /// + Verlet lists otherwise.
    #[default]
    Auto,
    /// Cell lists + Verlet lists (falls back to all pairs when a box edge is under 2.5 list radii).
    Verlet,
    /// Every pair, every step, no list.
    AllPairs,
}

/// Measured crossover (`mpcbox-bench md-crossover`, LJ liquid ρ* = 0.8442, skin 0.3, rc 1.5
/// and 2.5, 2-core development machine): with N = x · (particles within rc + skin of one
/// particle), Verlet lists were 3.6× faster at x = 5.2, 5.2× at x = 6.4 and 9× at x = 11; the
/// ratio grows about as 0.7·x, so all pairs only win below x ≈ 1.4–1.5, i.e. for boxes that
/// are barely larger than the list sphere (where lists usually cannot be built anyway).
pub const ALL_PAIRS_CROSSOVER: f64 = 1.5;

/// Whether the all-pairs path is expected to be faster for `n` particles at number density
/// `density` with list radius `r_list`.
pub fn prefer_all_pairs(n: usize, density: f64, r_list: f64) -> bool {
    let per_particle = 4.0 / 3.0 * std::f64::consts::PI * r_list.powi(3) * density;
    (n as f64) < ALL_PAIRS_CROSSOVER * per_particle.max(1.0)
}

/// Whether the CPU engine uses cell + Verlet lists (false: all pairs) for `n` particles in
/// `box_len` with pair cutoff `cutoff` and Verlet skin `skin`.
pub fn use_verlet_list(
    mode: NeighborMode,
    n: usize,
    box_len: [f64; 3],
    cutoff: f64,
    skin: f64,
) -> bool {
    if cutoff == 0.0 {
        return false;
    }
    let r_list = cutoff + skin;
    let fits = CellList::dims_for_list(box_len, r_list).is_some();
    match mode {
        NeighborMode::AllPairs => false,
        NeighborMode::Verlet => fits,
        NeighborMode::Auto => {
            let volume: f64 = box_len.iter().product();
            let rho = n as f64 / volume;
            fits && !prefer_all_pairs(n, rho, r_list)
        }
    }
}

/// Where the neighbours of a particle come from: its Verlet list, or every other particle.
#[derive(Clone, Copy)]
pub enum NeighborSource<'a> {
    List(&'a VerletList),
    All(usize),
}
