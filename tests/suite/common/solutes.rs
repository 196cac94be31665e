//! Solute sets for the coupled-step tests: (positions, velocities, masses), each from its own
//! random stream so that a test sees the same solutes on every platform.

use mpcbox::rng::CellStream;

pub type Solutes = (Vec<[f64; 3]>, Vec<[f64; 3]>, Vec<f64>);

/// `n` solutes of one mass, uniform in the box, with thermal velocities (kT = 1).
pub fn thermal_solutes(n: usize, box_len: [f64; 3], mass: f64, seed: u64) -> Solutes {
    let mut r = CellStream::for_particle(seed, 0);
    let pos = (0..n)
        .map(|_| {
            [
                r.uniform() * box_len[0],
                r.uniform() * box_len[1],
                r.uniform() * box_len[2],
            ]
        })
        .collect();
    let s = (1.0 / mass).sqrt();
    let vel = (0..n)
        .map(|_| [s * r.normal(), s * r.normal(), s * r.normal()])
        .collect();
    (pos, vel, vec![mass; n])
}

/// `n` solutes of masses 1, 5 and 10 spread over an `l`-cell box, every seventh far outside
/// it in x and y (wrapped through several periods).
pub fn solutes_partly_outside(n: usize, l: [u32; 3], seed: u64) -> Solutes {
    let mut r = CellStream::for_particle(seed, 0);
    let pos = (0..n)
        .map(|i| {
            let out = if i % 7 == 0 { 3.0 } else { 1.0 };
            [
                (r.uniform() * out - 0.5 * (out - 1.0)) * l[0] as f64,
                (r.uniform() * out - 0.5 * (out - 1.0)) * l[1] as f64,
                r.uniform() * l[2] as f64,
            ]
        })
        .collect();
    let vel = (0..n)
        .map(|_| [0.3 * r.normal(), 0.3 * r.normal(), 0.3 * r.normal()])
        .collect();
    let mass = (0..n).map(|i| [1.0, 5.0, 10.0][i % 3]).collect();
    (pos, vel, mass)
}

/// `n` solutes of masses 1 and 10 over two periods in y (half of them outside the box).
pub fn solutes_over_two_y_periods(n: usize, cells: [u32; 3]) -> Solutes {
    let mut r = CellStream::for_particle(17, 0);
    let pos = (0..n)
        .map(|_| {
            [
                r.uniform() * cells[0] as f64,
                (2.0 * r.uniform() - 0.5) * cells[1] as f64,
                r.uniform() * cells[2] as f64,
            ]
        })
        .collect();
    let vel = (0..n)
        .map(|_| [0.3 * r.normal(), 0.3 * r.normal(), 0.3 * r.normal()])
        .collect();
    let mass = (0..n).map(|i| [1.0, 10.0][i % 2]).collect();
    (pos, vel, mass)
}

/// 0.7 solutes per cell of masses 2 to 4 and unit thermal velocities, in unwrapped coordinates
/// up to three periods outside the box in every direction (as an MD code may keep them).
pub fn unwrapped_solutes_three_periods(len: [f64; 3]) -> Solutes {
    unwrapped_solutes(len, |r| {
        let k = [
            (r.next_u32() % 7) as f64 - 3.0,
            (r.next_u32() % 7) as f64 - 3.0,
            (r.next_u32() % 7) as f64 - 3.0,
        ];
        [
            r.uniform() * len[0] + k[0] * len[0],
            r.uniform() * len[1] + k[1] * len[1],
            r.uniform() * len[2] + k[2] * len[2],
        ]
    })
}

/// As [`unwrapped_solutes_three_periods`], up to two periods outside (another draw order).
pub fn unwrapped_solutes_two_periods(len: [f64; 3]) -> Solutes {
    unwrapped_solutes(len, |r| {
        let mut p = [0.0; 3];
        for k in 0..3 {
            p[k] = r.uniform() * len[k] + ((r.next_u32() % 5) as f64 - 2.0) * len[k];
        }
        p
    })
}

/// 0.7 solutes per cell of a box of `len`, each placed by `place` from one random stream, then
/// given masses 2 to 4 and unit thermal velocities from the same stream.
fn unwrapped_solutes(len: [f64; 3], mut place: impl FnMut(&mut CellStream) -> [f64; 3]) -> Solutes {
    let ns = (0.7 * len[0] * len[1] * len[2]) as usize;
    let mut r = CellStream::for_particle(8, 8);
    let pos = (0..ns).map(|_| place(&mut r)).collect();
    let mass = (0..ns).map(|i| 2.0 + (i % 3) as f64).collect();
    let vel = (0..ns)
        .map(|_| [r.normal(), r.normal(), r.normal()])
        .collect();
    (pos, vel, mass)
}

/// Moves solutes ballistically for one collision step of 0.1 (unwrapped, same on every run).
pub fn stream_solutes(pos: &mut [[f64; 3]], vel: &[[f64; 3]]) {
    for (p, v) in pos.iter_mut().zip(vel) {
        for k in 0..3 {
            p[k] += 0.1 * v[k];
        }
    }
}

/// Velocities as bits: equal exactly when every value is the same (a NaN equals itself here).
pub fn velocity_bits(v: &[[f64; 3]]) -> Vec<u64> {
    v.iter().flatten().map(|x| x.to_bits()).collect()
}

/// Asserts that `result` is a refusal of the solutes naming the array `field` and solute
/// `index` (the problem says "solute {index} …"); `what` names the case when it is not.
pub fn assert_names_solute<T: std::fmt::Debug>(
    result: mpcbox::error::Result<T>,
    field: &str,
    index: usize,
    what: &str,
) {
    match result {
        Err(mpcbox::error::MpcError::Solute {
            field: f, problem, ..
        }) => {
            assert_eq!(f, field, "{what}: {problem}");
            assert!(
                problem.contains(&format!("solute {index} ")),
                "{what}: {problem}"
            );
        }
        other => panic!("{what}: expected a solute error, got {other:?}"),
    }
}
