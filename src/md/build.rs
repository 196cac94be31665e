//! System builders: FCC lattices, bead-spring polymer chains, Maxwell–Boltzmann velocities.

use super::forcefield::velocity_normals;
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
    let mut sys = System {
        box_len,
        type_mass: vec![bead_mass],
        ..Default::default()
    };
    let key = philox_key(splitmix64(seed ^ 0x4348_4149_4e53));
    let mut counter = 0u32;
    let mut uniform = || {
        let w = philox4x32_10([counter, 0, 0, 11], key);
        counter = counter.wrapping_add(1);
        u01_from_words(w[0], w[1])
    };
    let gdim = [0, 1, 2].map(|k| ((box_len[k] / min_distance).floor() as usize).max(1));
    let glen = [0, 1, 2].map(|k| box_len[k] / gdim[k] as f64);
    let mut grid: std::collections::HashMap<[usize; 3], Vec<[f64; 3]>> = Default::default();
    let cell = |p: [f64; 3]| {
        [0, 1, 2].map(|k| {
            let w = p[k].rem_euclid(box_len[k]);
            ((w / glen[k]) as usize).min(gdim[k] - 1)
        })
    };
    let free = |grid: &std::collections::HashMap<[usize; 3], Vec<[f64; 3]>>, p: [f64; 3]| {
        let c = cell(p);
        let md2 = min_distance * min_distance;
        for dz in [gdim[2] - 1, 0, 1] {
            for dy in [gdim[1] - 1, 0, 1] {
                for dx in [gdim[0] - 1, 0, 1] {
                    let cc = [
                        (c[0] + dx) % gdim[0],
                        (c[1] + dy) % gdim[1],
                        (c[2] + dz) % gdim[2],
                    ];
                    if let Some(list) = grid.get(&cc) {
                        for q in list {
                            let mut r2 = 0.0;
                            for k in 0..3 {
                                let mut d = (p[k] - q[k]).rem_euclid(box_len[k]);
                                if d > 0.5 * box_len[k] {
                                    d -= box_len[k];
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
        }
        true
    };
    let mut tag = 1u32;
    for c in 0..n_chains {
        let mut placed: Vec<[f64; 3]> = Vec::with_capacity(chain_length);
        let mut tries = 0usize;
        while placed.len() < chain_length {
            tries += 1;
            if tries > 200 * chain_length + 10_000 {
                return Err(ConfigError {
                    field: "md.system.Chains".into(),
                    problem: format!(
                        "could not place chain {} without overlaps ({} beads in a box of {:?})",
                        c + 1,
                        n_chains * chain_length,
                        box_len
                    ),
                    fix: "use fewer or shorter chains, or a larger box (cells)".into(),
                });
            }
            let candidate = match placed.last() {
                None => [0, 1, 2].map(|k| uniform() * box_len[k]),
                Some(prev) => {
                    let z = 2.0 * uniform() - 1.0;
                    let phi = 2.0 * std::f64::consts::PI * uniform();
                    let s = (1.0 - z * z).sqrt();
                    [
                        prev[0] + bond_length * s * phi.cos(),
                        prev[1] + bond_length * s * phi.sin(),
                        prev[2] + bond_length * z,
                    ]
                }
            };
            if free(&grid, candidate) {
                grid.entry(cell(candidate)).or_default().push(candidate);
                placed.push(candidate);
            } else if placed.len() > 1 && tries % 50 == 0 {
                // back up one bead when stuck
                let q = placed.pop().expect("non-empty");
                if let Some(v) = grid.get_mut(&cell(q)) {
                    v.retain(|x| *x != q);
                }
            }
        }
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
