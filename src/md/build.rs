//! System builders: FCC lattices, bead-spring polymer chains, Maxwell–Boltzmann velocities.

use std::collections::HashMap;

use super::random::velocity_normals;
use super::system::{Bond, System};
use crate::error::ConfigError;
use crate::rng::{philox4x32_10, philox_key, splitmix64, u01_from_words};

/// An FCC lattice of `cells³` unit cells at number density `density` in a cubic box,
/// one type of mass `mass`, tags 1..=N, at rest.
pub fn fcc_lattice(cells: [usize; 3], density: f64, mass: f64) -> System {
    let a = (4.0 / density).cbrt();
    let mut sys = System {
        box_len: [
            a * cells[0] as f64,
            a * cells[1] as f64,
            a * cells[2] as f64,
        ],
        type_mass: vec![mass],
        ..Default::default()
    };
    let basis = [
        [0.0, 0.0, 0.0],
        [0.5, 0.5, 0.0],
        [0.5, 0.0, 0.5],
        [0.0, 0.5, 0.5],
    ];
    let mut tag = 1;
    for iz in 0..cells[2] {
        for iy in 0..cells[1] {
            for ix in 0..cells[0] {
                for b in &basis {
                    let p = [
                        (ix as f64 + b[0] + 0.25) * a,
                        (iy as f64 + b[1] + 0.25) * a,
                        (iz as f64 + b[2] + 0.25) * a,
                    ];
                    sys.push(p, [0.0; 3], 0, tag, 0);
                    tag += 1;
                }
            }
        }
    }
    sys
}

/// `n` particles of type 0 placed uniformly at random in `box_len` (a DPD fluid start).
pub fn random_gas(n: usize, box_len: [f64; 3], mass: f64, seed: u64) -> System {
    let mut sys = System {
        box_len,
        type_mass: vec![mass],
        ..Default::default()
    };
    let key = philox_key(splitmix64(seed ^ 0x4741_5300));
    for i in 0..n {
        let w = philox4x32_10([i as u32, 0, 0, 7], key);
        let w2 = philox4x32_10([i as u32, 1, 0, 7], key);
        let p = [
            u01_from_words(w[0], w[1]) * box_len[0],
            u01_from_words(w[2], w[3]) * box_len[1],
            u01_from_words(w2[0], w2[1]) * box_len[2],
        ];
        sys.push(p, [0.0; 3], 0, i as u32 + 1, 0);
    }
    sys
}

/// Maxwell–Boltzmann velocities at `kt` from per-tag Philox streams, with the centre-of-mass
/// velocity removed and the kinetic energy scaled to exactly (3N − 3)/2 kT.
pub fn maxwell_velocities(sys: &mut System, kt: f64, seed: u64) {
    let n = sys.len();
    if n == 0 {
        return;
    }
    for i in 0..n {
        let z = velocity_normals(seed, sys.tag[i]);
        let s = (kt / sys.mass(i)).sqrt();
        sys.vel[i] = [s * z[0], s * z[1], s * z[2]];
    }
    let p = sys.momentum();
    let m_tot: f64 = (0..n).map(|i| sys.mass(i)).sum();
    for v in sys.vel.iter_mut() {
        for k in 0..3 {
            v[k] -= p[k] / m_tot;
        }
    }
    let ke = sys.kinetic_energy();
    let target = 0.5 * (3 * n).saturating_sub(3).max(1) as f64 * kt;
    if ke > 0.0 {
        let f = (target / ke).sqrt();
        for v in sys.vel.iter_mut() {
            for c in v.iter_mut() {
                *c *= f;
            }
        }
    }
}

/// The uniform numbers of the chain builder: one Philox stream, drawn in order.
struct ChainRng {
    key: [u32; 2],
    counter: u32,
}

impl ChainRng {
    fn uniform(&mut self) -> f64 {
        let w = philox4x32_10([self.counter, 0, 0, 11], self.key);
        self.counter = self.counter.wrapping_add(1);
        u01_from_words(w[0], w[1])
    }
}

/// Beads placed so far on a hash grid of cells at least `min_distance` wide, for the overlap
/// check (periodic minimum image of unwrapped positions).
struct BeadGrid {
    box_len: [f64; 3],
    min_distance: f64,
    dims: [usize; 3],
    cell_len: [f64; 3],
    beads: HashMap<[usize; 3], Vec<[f64; 3]>>,
}

impl BeadGrid {
    fn new(box_len: [f64; 3], min_distance: f64) -> BeadGrid {
        let dims = [0, 1, 2].map(|k| ((box_len[k] / min_distance).floor() as usize).max(1));
        BeadGrid {
            box_len,
            min_distance,
            dims,
            cell_len: [0, 1, 2].map(|k| box_len[k] / dims[k] as f64),
            beads: HashMap::new(),
        }
    }

    fn cell(&self, p: [f64; 3]) -> [usize; 3] {
        [0, 1, 2].map(|k| {
            let w = p[k].rem_euclid(self.box_len[k]);
            ((w / self.cell_len[k]) as usize).min(self.dims[k] - 1)
        })
    }

    /// No bead closer than `min_distance` to p.
    fn is_free(&self, p: [f64; 3]) -> bool {
        let (c, g, l) = (self.cell(p), self.dims, self.box_len);
        let md2 = self.min_distance * self.min_distance;
        for dz in [g[2] - 1, 0, 1] {
            for dy in [g[1] - 1, 0, 1] {
                for dx in [g[0] - 1, 0, 1] {
                    let cc = [(c[0] + dx) % g[0], (c[1] + dy) % g[1], (c[2] + dz) % g[2]];
                    let Some(list) = self.beads.get(&cc) else {
                        continue;
                    };
                    for q in list {
                        let mut r2 = 0.0;
                        for k in 0..3 {
                            let mut d = (p[k] - q[k]).rem_euclid(l[k]);
                            if d > 0.5 * l[k] {
                                d -= l[k];
                            }
                            r2 += d * d;
                        }
                        if r2 < md2 {
                            return false;
                        }
                    }
                }
            }
        }
        true
    }

    fn insert(&mut self, p: [f64; 3]) {
        self.beads.entry(self.cell(p)).or_default().push(p);
    }

    fn remove(&mut self, q: [f64; 3]) {
        let c = self.cell(q);
        if let Some(v) = self.beads.get_mut(&c) {
            v.retain(|x| *x != q);
        }
    }
}

/// A random unit vector times `bond_length` added to `prev` (two uniform draws).
fn random_step(prev: [f64; 3], bond_length: f64, rng: &mut ChainRng) -> [f64; 3] {
    let z = 2.0 * rng.uniform() - 1.0;
    let phi = 2.0 * std::f64::consts::PI * rng.uniform();
    let s = (1.0 - z * z).sqrt();
    [
        prev[0] + bond_length * s * phi.cos(),
        prev[1] + bond_length * s * phi.sin(),
        prev[2] + bond_length * z,
    ]
}

/// One self-avoiding chain of `chain_length` beads (unwrapped positions), backing up one bead
/// every 50 rejected tries; None when it does not fit within the try budget.
fn place_chain(
    grid: &mut BeadGrid,
    rng: &mut ChainRng,
    chain_length: usize,
    bond_length: f64,
    allowed: &dyn Fn([f64; 3]) -> bool,
) -> Option<Vec<[f64; 3]>> {
    let mut placed: Vec<[f64; 3]> = Vec::with_capacity(chain_length);
    let mut tries = 0usize;
    while placed.len() < chain_length {
        tries += 1;
        if tries > 200 * chain_length + 10_000 {
            return None;
        }
        let candidate = match placed.last() {
            None => [0, 1, 2].map(|k| rng.uniform() * grid.box_len[k]),
            Some(prev) => random_step(*prev, bond_length, rng),
        };
        if allowed(candidate) && grid.is_free(candidate) {
            grid.insert(candidate);
            placed.push(candidate);
        } else if placed.len() > 1 && tries.is_multiple_of(50) {
            // back up one bead when stuck
            let q = placed.pop().expect("non-empty");
            grid.remove(q);
        }
    }
    Some(placed)
}

/// Bead-spring chains in a box: self-avoiding random walks with bond length `bond_length`,
/// no two beads closer than `min_distance` (checked on a hash grid), chain c has molecule id
/// c + 1 and beads tagged consecutively; bonds of type 0 along each chain.
pub fn polymer_chains(
    box_len: [f64; 3],
    n_chains: usize,
    chain_length: usize,
    bead_mass: f64,
    bond_length: f64,
    min_distance: f64,
    seed: u64,
) -> Result<System, ConfigError> {
    polymer_chains_in(
        box_len,
        n_chains,
        chain_length,
        bead_mass,
        bond_length,
        min_distance,
        seed,
        &|_| true,
    )
}

/// [`polymer_chains`] with every bead where `allowed` says (its unwrapped position; between
/// walls: at least a wall cutoff from each wall).
#[allow(clippy::too_many_arguments)]
pub fn polymer_chains_in(
    box_len: [f64; 3],
    n_chains: usize,
    chain_length: usize,
    bead_mass: f64,
    bond_length: f64,
    min_distance: f64,
    seed: u64,
    allowed: &dyn Fn([f64; 3]) -> bool,
) -> Result<System, ConfigError> {
    let mut sys = System {
        box_len,
        type_mass: vec![bead_mass],
        ..Default::default()
    };
    let mut rng = ChainRng {
        key: philox_key(splitmix64(seed ^ 0x4348_4149_4e53)),
        counter: 0,
    };
    let mut grid = BeadGrid::new(box_len, min_distance);
    let mut tag = 1u32;
    for c in 0..n_chains {
        let placed = place_chain(&mut grid, &mut rng, chain_length, bond_length, allowed)
            .ok_or_else(|| ConfigError {
                field: "md.system.Chains".into(),
                problem: format!(
                    "could not place chain {} without overlaps ({} beads in a box of {:?})",
                    c + 1,
                    n_chains * chain_length,
                    box_len
                ),
                fix: "use fewer or shorter chains, or a larger box (cells)".into(),
            })?;
        for (k, p) in placed.iter().enumerate() {
            sys.push(*p, [0.0; 3], 0, tag, c as u32 + 1);
            if k > 0 {
                sys.bonds.push(Bond {
                    a: tag - 1,
                    b: tag,
                    kind: 0,
                });
            }
            tag += 1;
        }
    }
    Ok(sys)
}
