//! Random numbers.
//!
//! Two kinds of stream:
//!
//! * **Per-cell draws** (rotation axis, thermostat factor) come from the counter-based generator
//!   Philox4x32-10, keyed by the run seed and addressed by (step, global cell index, purpose,
//!   block). Any backend and any number of GPUs therefore draws exactly the same numbers for the
//!   same cell. `kernels/rng.cuh` mirrors this file operation by operation; everything past the raw
//!   32-bit words uses only IEEE-exact operations (+, −, ×, ÷, sqrt) and [`det_ln`], our own
//!   logarithm, so that no libm difference can make the CPU and GPU disagree. The kernels are
//!   compiled with `--fmad=false` for the same reason.
//! * **Host streams** (initial positions and velocities, the per-step grid shift) use
//!   `rand_xoshiro`, seeded from (seed, step, stream id), so they are stateless across steps and a
//!   resumed run draws the same shift as an uninterrupted one.

use rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

const PHILOX_M0: u32 = 0xD251_1F53;
const PHILOX_M1: u32 = 0xCD9E_8D57;
const PHILOX_W0: u32 = 0x9E37_79B9;
const PHILOX_W1: u32 = 0xBB67_AE85;

/// Purposes of per-cell streams; part of the Philox counter so the streams never overlap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum CellStreamPurpose {
    RotationAxis = 0,
    Thermostat = 1,
    /// MPC-AT: the Maxwell-Boltzmann velocity of one particle ([`CellStream::for_particle_in_cell`]).
    AndersenVelocity = 2,
    /// Virtual particles of cells cut by a wall (`physics::walls`).
    WallFill = 8,
}

#[inline(always)]
fn mulhilo(a: u32, b: u32) -> (u32, u32) {
    let p = (a as u64) * (b as u64);
    ((p >> 32) as u32, p as u32)
}

/// Philox4x32 with 10 rounds (Salmon et al., SC'11), as in Random123.
#[inline]
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let mut c = counter;
    let mut k = key;
    for round in 0..10 {
        if round > 0 {
            k[0] = k[0].wrapping_add(PHILOX_W0);
            k[1] = k[1].wrapping_add(PHILOX_W1);
        }
        let (hi0, lo0) = mulhilo(PHILOX_M0, c[0]);
        let (hi1, lo1) = mulhilo(PHILOX_M1, c[2]);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
    }
    c
}

/// A uniform double in [0, 1) with 53 random bits, from two 32-bit words.
#[inline(always)]
pub fn u01_from_words(a: u32, b: u32) -> f64 {
    let bits = (((a >> 5) as u64) << 26) | ((b >> 6) as u64);
    bits as f64 * (1.0 / 9_007_199_254_740_992.0)
}

// ln 2 split into a high part with trailing zero bits and the remainder (fdlibm's constants,
// written as kernels/rng.cuh writes them so that both parse to the same doubles)
#[allow(clippy::excessive_precision)]
const LN2_HI: f64 = 6.931_471_803_691_238_164_90e-01;
#[allow(clippy::excessive_precision)]
const LN2_LO: f64 = 1.908_214_929_270_587_700_02e-10;
const SQRT_HALF: f64 = std::f64::consts::FRAC_1_SQRT_2;

/// Natural logarithm from IEEE-exact operations only, so that CPU and GPU agree bit for bit.
/// Accurate to about 2 ulp for positive normal inputs; returns NaN for x ≤ 0, +inf for +inf.
#[allow(clippy::neg_cmp_op_on_partial_ord)] // !(x > 0) is true for NaN too, as wanted
pub fn det_ln(x: f64) -> f64 {
    if !(x > 0.0) {
        return f64::NAN;
    }
    if x == f64::INFINITY {
        return x;
    }
    let mut x = x;
    let mut e: i64 = 0;
    if x < f64::MIN_POSITIVE {
        x *= 18_014_398_509_481_984.0; // 2^54: make subnormals normal
        e -= 54;
    }
    let bits = x.to_bits();
    e += ((bits >> 52) & 0x7ff) as i64 - 1023;
    // mantissa m in [1, 2)
    let mut m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000);
    if m > 2.0 * SQRT_HALF {
        m *= 0.5;
        e += 1;
    }
    // ln m = 2 atanh(s), s = (m-1)/(m+1), |s| <= 0.1716
    let s = (m - 1.0) / (m + 1.0);
    let z = s * s;
    let mut p = 1.0 / 23.0;
    p = p * z + 1.0 / 21.0;
    p = p * z + 1.0 / 19.0;
    p = p * z + 1.0 / 17.0;
    p = p * z + 1.0 / 15.0;
    p = p * z + 1.0 / 13.0;
    p = p * z + 1.0 / 11.0;
    p = p * z + 1.0 / 9.0;
    p = p * z + 1.0 / 7.0;
    p = p * z + 1.0 / 5.0;
    p = p * z + 1.0 / 3.0;
    let ln_m = 2.0 * s + 2.0 * s * (z * p);
    let ef = e as f64;
    ef * LN2_HI + (ef * LN2_LO + ln_m)
}

const FRAC_PI_2: f64 = std::f64::consts::FRAC_PI_2;

/// sin(2π u) and cos(2π u) for u in [0, 1) from IEEE-exact operations only, so that CPU and
/// GPU agree bit for bit (`mpc_det_sincos_turn` in `kernels/rng.cuh`). The quadrant and the
/// fraction within it (4u, its floor and the difference are exact), folded to an angle a in
/// [0, π/4], then Taylor polynomials to a¹⁷ and a¹⁸ (their remainders are below 10⁻¹⁶).
pub fn det_sincos_turn(u: f64) -> (f64, f64) {
    let x = 4.0 * u;
    let q = x.floor();
    let mut f = x - q;
    let swap = f > 0.5;
    if swap {
        f = 1.0 - f;
    }
    let a = f * FRAC_PI_2;
    let z = a * a;
    let mut ps = 1.0 / 355_687_428_096_000.0;
    ps = ps * z - 1.0 / 1_307_674_368_000.0;
    ps = ps * z + 1.0 / 6_227_020_800.0;
    ps = ps * z - 1.0 / 39_916_800.0;
    ps = ps * z + 1.0 / 362_880.0;
    ps = ps * z - 1.0 / 5_040.0;
    ps = ps * z + 1.0 / 120.0;
    ps = ps * z - 1.0 / 6.0;
    let sin_a = a + a * (z * ps);
    let mut pc = -1.0 / 6_402_373_705_728_000.0;
    pc = pc * z + 1.0 / 20_922_789_888_000.0;
    pc = pc * z - 1.0 / 87_178_291_200.0;
    pc = pc * z + 1.0 / 479_001_600.0;
    pc = pc * z - 1.0 / 3_628_800.0;
    pc = pc * z + 1.0 / 40_320.0;
    pc = pc * z - 1.0 / 720.0;
    pc = pc * z + 1.0 / 24.0;
    let cos_a = 1.0 - 0.5 * z + z * (z * pc);
    let (s, c) = if swap { (cos_a, sin_a) } else { (sin_a, cos_a) };
    match q as u32 {
        0 => (s, c),
        1 => (c, -s),
        2 => (-s, -c),
        _ => (-c, s),
    }
}

/// The Philox key of a run seed.
#[inline]
pub fn philox_key(seed: u64) -> [u32; 2] {
    [seed as u32, (seed >> 32) as u32]
}

/// A Philox word stream at one address: per cell (seed, step, global cell, purpose) or per
/// particle (seed, particle index) for the initial state.
/// Words are consumed in order; a fresh Philox block is made every four words.
#[derive(Clone, Debug)]
pub struct CellStream {
    key: [u32; 2],
    counter: [u32; 4],
    block: [u32; 4],
    used: u32,
}

impl CellStream {
    #[inline]
    pub fn new(seed: u64, step: u64, cell: u32, purpose: CellStreamPurpose) -> Self {
        let counter = [
            0,
            cell,
            step as u32,
            ((step >> 32) as u32 & 0xffff) | ((purpose as u32) << 16),
        ];
        CellStream {
            key: philox_key(seed),
            counter,
            block: [0; 4],
            used: 4,
        }
    }

    /// The stream of fluid particle `index` for the initial state. Word 3 of the counter is
    /// all ones, which no cell stream uses (their purpose field is small).
    #[inline]
    pub fn for_particle(seed: u64, index: u64) -> Self {
        let counter = [0, index as u32, (index >> 32) as u32, u32::MAX];
        CellStream {
            key: philox_key(seed),
            counter,
            block: [0; 4],
            used: 4,
        }
    }

    /// The stream of one particle at one step in one cell (MPC-AT's velocity draws): the cell
    /// stream of purpose `AndersenVelocity`, keyed by the seed XOR the particle's key
    /// ([`fluid_particle_key`], [`solute_particle_key`]). Philox is a keyed bijection of the
    /// counter, so distinct keys give independent streams; two particles of one cell at one step
    /// share a stream only when their keys collide (see [`fluid_particle_key`]).
    #[inline]
    pub fn for_particle_in_cell(seed: u64, step: u64, cell: u32, particle_key: u64) -> Self {
        let mut s = CellStream::new(seed, step, cell, CellStreamPurpose::AndersenVelocity);
        s.key = philox_key(seed ^ particle_key);
        s
    }

    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        if self.used == 4 {
            self.block = philox4x32_10(self.counter, self.key);
            self.counter[0] = self.counter[0].wrapping_add(1);
            self.used = 0;
        }
        let w = self.block[self.used as usize];
        self.used += 1;
        w
    }

    /// Uniform in [0, 1).
    #[inline]
    pub fn uniform(&mut self) -> f64 {
        let a = self.next_u32();
        let b = self.next_u32();
        u01_from_words(a, b)
    }

    /// Standard normal by Marsaglia's polar method (one value per accepted pair).
    #[inline]
    pub fn normal(&mut self) -> f64 {
        loop {
            let v1 = 2.0 * self.uniform() - 1.0;
            let v2 = 2.0 * self.uniform() - 1.0;
            let s = v1 * v1 + v2 * v2;
            if s < 1.0 && s > 0.0 {
                return v1 * (-2.0 * det_ln(s) / s).sqrt();
            }
        }
    }

    /// Two independent standard normals by Marsaglia's polar method (both values of the
    /// accepted pair).
    #[inline]
    pub fn normal_pair(&mut self) -> (f64, f64) {
        loop {
            let v1 = 2.0 * self.uniform() - 1.0;
            let v2 = 2.0 * self.uniform() - 1.0;
            let s = v1 * v1 + v2 * v2;
            if s < 1.0 && s > 0.0 {
                let f = (-2.0 * det_ln(s) / s).sqrt();
                return (v1 * f, v2 * f);
            }
        }
    }

    /// Three independent standard normals (MPC-AT's draws) by the Box-Muller transform of four
    /// uniforms, two Philox blocks: `r1 (cos θ1, sin θ1)` and `r2 cos θ2`, `r = sqrt(−2 ln(1 − u))`,
    /// `θ = 2π u'`. Unlike the polar method it rejects nothing, so the GPU's lanes never wait
    /// for each other's retries (`kernels/rng.cuh`, `mpc_normal3`, mirrors it).
    #[inline]
    pub fn normal3(&mut self) -> [f64; 3] {
        let u1 = self.uniform();
        let u2 = self.uniform();
        let u3 = self.uniform();
        let u4 = self.uniform();
        // 1 − u is exact for u on the 2⁻⁵³ grid, in (0, 1]: the logarithm is finite
        let r1 = (-2.0 * det_ln(1.0 - u1)).sqrt();
        let r2 = (-2.0 * det_ln(1.0 - u3)).sqrt();
        let (s1, c1) = det_sincos_turn(u2);
        let (_, c2) = det_sincos_turn(u4);
        [r1 * c1, r1 * s1, r2 * c2]
    }

    /// Gamma(shape, 1) for shape ≥ 1 by Marsaglia and Tsang (2000).
    #[inline]
    pub fn gamma(&mut self, shape: f64) -> f64 {
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let x = self.normal();
            let mut v = 1.0 + c * x;
            if v <= 0.0 {
                continue;
            }
            v = v * v * v;
            let u = self.uniform();
            let x2 = x * x;
            if u < 1.0 - 0.0331 * (x2 * x2) {
                return d * v;
            }
            if det_ln(u) < 0.5 * x2 + d * (1.0 - v + det_ln(v)) {
                return d * v;
            }
        }
    }

    /// A uniformly distributed unit vector (Marsaglia 1972, rejection in the unit disc).
    #[inline]
    pub fn unit_vector(&mut self) -> [f64; 3] {
        loop {
            let x1 = 2.0 * self.uniform() - 1.0;
            let x2 = 2.0 * self.uniform() - 1.0;
            let s = x1 * x1 + x2 * x2;
            if s < 1.0 {
                let r = 2.0 * (1.0 - s).sqrt();
                return [x1 * r, x2 * r, 1.0 - 2.0 * s];
            }
        }
    }
}

/// The random rotation axis of one collision cell at one step.
#[inline]
pub fn cell_rotation_axis(seed: u64, step: u64, cell: u32) -> [f64; 3] {
    CellStream::new(seed, step, cell, CellStreamPurpose::RotationAxis).unit_vector()
}

/// The Maxwell-Boltzmann-scaling target of the relative kinetic energy of a cell with
/// `n` ≥ 2 particles: kT · Gamma(3(n−1)/2, 1).
#[inline]
pub fn cell_thermostat_energy(seed: u64, step: u64, cell: u32, n: u32, kt: f64) -> f64 {
    let shape = 1.5 * (n as f64 - 1.0);
    kt * CellStream::new(seed, step, cell, CellStreamPurpose::Thermostat).gamma(shape)
}

/// The key of a fluid particle's per-particle draws: a hash of the bits of its stored f32
/// position. Positions are streamed by the same operations on every backend (the kernels
/// mirror `Physics::stream` with `--fmad=false`), so the key does not depend on where the
/// particle is stored (backends and GPU slabs order particles differently) nor on the order of
/// any sum. The 96 position bits go through two rounds of the SplitMix64 finaliser (a bijection
/// of 64 bits), so two distinct positions share a key with probability about 2⁻⁶⁴: over a run
/// of 10⁶ steps of 256³ cells with 10 particles per cell (about 50 pairs per cell and step),
/// about 4 × 10⁻⁵ collisions in all. Two particles at bit-identical positions in one cell share
/// their draws: a negligible correlation that conserves momentum all the same.
#[inline]
pub fn fluid_particle_key(pos: [f32; 3]) -> u64 {
    let xy = (pos[0].to_bits() as u64) | ((pos[1].to_bits() as u64) << 32);
    splitmix64(splitmix64(xy) ^ pos[2].to_bits() as u64)
}

/// Mixed into solute keys so that a solute never shares the key schedule of fluid particles.
const SOLUTE_KEY_TAG: u64 = 0x5017_7E5A_11CE_D00D;

/// The key of a solute's per-particle draws: a hash of the bits of the f64 position the
/// caller handed over (the same on every backend), as [`fluid_particle_key`].
#[inline]
pub fn solute_particle_key(pos: [f64; 3]) -> u64 {
    let h = splitmix64(pos[0].to_bits() ^ SOLUTE_KEY_TAG);
    splitmix64(splitmix64(h ^ pos[1].to_bits()) ^ pos[2].to_bits())
}

/// Host stream ids, mixed into the Xoshiro seed.
#[derive(Clone, Copy, Debug)]
#[repr(u64)]
pub enum HostStream {
    InitialState = 1,
    GridShift = 2,
    Solutes = 3,
}

/// SplitMix64 finaliser, used to spread (seed, step, stream) into a Xoshiro seed.
#[inline]
pub fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A host-side stream for (seed, step, stream), independent of any earlier draw.
pub fn host_rng(seed: u64, step: u64, stream: HostStream) -> Xoshiro256PlusPlus {
    let mixed = splitmix64(seed ^ splitmix64(step ^ splitmix64(stream as u64)));
    Xoshiro256PlusPlus::seed_from_u64(mixed)
}

/// The random grid shift of one step, each component in [−a/2, a/2) (a = 1).
pub fn grid_shift(seed: u64, step: u64) -> [f64; 3] {
    use rand::Rng;
    let mut rng = host_rng(seed, step, HostStream::GridShift);
    [
        rng.random::<f64>() - 0.5,
        rng.random::<f64>() - 0.5,
        rng.random::<f64>() - 0.5,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn philox_matches_random123_known_answers() {
        assert_eq!(
            philox4x32_10([0; 4], [0; 2]),
            [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]
        );
        assert_eq!(
            philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]
        );
        assert_eq!(
            philox4x32_10(
                [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344],
                [0xa4093822, 0x299f31d0]
            ),
            [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1]
        );
    }

    #[test]
    fn det_ln_agrees_with_libm() {
        let mut x = 1e-300;
        while x < 1e300 {
            for f in [1.0, 1.37, 2.5, 7.9] {
                let v = x * f;
                let err = (det_ln(v) - v.ln()).abs();
                assert!(
                    err <= 4.0 * f64::EPSILON * v.ln().abs().max(1.0),
                    "ln({v}): {err}"
                );
            }
            x *= 10.0;
        }
        assert_eq!(det_ln(1.0), 0.0);
        assert!(det_ln(0.0).is_nan() && det_ln(-1.0).is_nan());
        let sub = 4.9e-320;
        assert!((det_ln(sub) - sub.ln()).abs() < 1e-12);
    }

    #[test]
    fn det_sincos_turn_agrees_with_libm() {
        let mut s = CellStream::new(5, 6, 7, CellStreamPurpose::RotationAxis);
        let mut us = vec![0.0, 0.125, 0.25, 0.375, 0.5, 0.75, 1.0 - f64::EPSILON / 2.0];
        us.extend((0..100_000).map(|_| s.uniform()));
        for u in us {
            let (sn, cs) = det_sincos_turn(u);
            // the reference angle in [−π, π): u − 1 is exact for u ≥ 1/2
            let t = 2.0 * std::f64::consts::PI * if u < 0.5 { u } else { u - 1.0 };
            assert!(
                (sn - t.sin()).abs() < 4e-16,
                "sin(2π·{u}): {sn} vs {}",
                t.sin()
            );
            assert!(
                (cs - t.cos()).abs() < 4e-16,
                "cos(2π·{u}): {cs} vs {}",
                t.cos()
            );
        }
        assert_eq!(det_sincos_turn(0.0), (0.0, 1.0));
    }

    #[test]
    fn box_muller_normals_have_unit_variance_and_no_correlation() {
        let n = 100_000;
        let (mut m, mut v, mut c, mut tail) = ([0.0; 3], [0.0; 3], 0.0, 0usize);
        for i in 0..n {
            let g = CellStream::for_particle_in_cell(3, 4, i, 0x1234).normal3();
            for k in 0..3 {
                m[k] += g[k] / n as f64;
                v[k] += g[k] * g[k] / n as f64;
            }
            c += (g[0] * g[1] + g[1] * g[2] + g[0] * g[2]) / n as f64;
            tail += g.iter().filter(|x| x.abs() > 3.0).count();
        }
        for k in 0..3 {
            assert!(m[k].abs() < 0.015, "mean {m:?}");
            assert!((v[k] - 1.0).abs() < 0.02, "variance {v:?}");
        }
        assert!(c.abs() < 0.03, "correlation {c}");
        // P(|g| > 3) = 0.0026998
        let p = tail as f64 / (3 * n) as f64;
        assert!((p / 0.0027 - 1.0).abs() < 0.15, "tail {p}");
    }

    #[test]
    fn uniforms_have_the_right_mean_and_range() {
        let mut s = CellStream::new(7, 3, 11, CellStreamPurpose::RotationAxis);
        let n = 200_000;
        let mut sum = 0.0;
        for _ in 0..n {
            let u = s.uniform();
            assert!((0.0..1.0).contains(&u));
            sum += u;
        }
        assert!((sum / n as f64 - 0.5).abs() < 3.0 * (1.0 / 12.0f64 / n as f64).sqrt() * 2.0);
    }

    #[test]
    fn gamma_draws_have_the_right_mean_and_variance() {
        // mean = variance = shape for Gamma(shape, 1)
        for shape in [1.5, 4.5, 13.5, 40.5] {
            let n = 40_000u32;
            let (mut s1, mut s2) = (0.0, 0.0);
            for cell in 0..n {
                let g = cell_thermostat_energy(99, 5, cell, (shape / 1.5) as u32 + 1, 1.0);
                s1 += g;
                s2 += g * g;
            }
            let mean = s1 / n as f64;
            let var = s2 / n as f64 - mean * mean;
            let se = (shape / n as f64).sqrt();
            assert!(
                (mean - shape).abs() < 5.0 * se,
                "shape {shape}: mean {mean}"
            );
            assert!((var / shape - 1.0).abs() < 0.05, "shape {shape}: var {var}");
        }
    }

    #[test]
    fn rotation_axes_are_unit_and_isotropic() {
        let n = 50_000u32;
        let mut mean = [0.0; 3];
        let mut zz = 0.0;
        for cell in 0..n {
            let a = cell_rotation_axis(1, 2, cell);
            let norm = (a[0] * a[0] + a[1] * a[1] + a[2] * a[2]).sqrt();
            assert!((norm - 1.0).abs() < 1e-14);
            for k in 0..3 {
                mean[k] += a[k] / n as f64;
            }
            zz += a[2] * a[2] / n as f64;
        }
        for m in mean {
            assert!(m.abs() < 0.02, "mean component {m}");
        }
        assert!((zz - 1.0 / 3.0).abs() < 0.01, "<z^2> = {zz}");
    }

    #[test]
    fn streams_depend_on_every_address_part() {
        let base = cell_rotation_axis(1, 2, 3);
        assert_ne!(base, cell_rotation_axis(2, 2, 3));
        assert_ne!(base, cell_rotation_axis(1, 3, 3));
        assert_ne!(base, cell_rotation_axis(1, 2, 4));
        assert_eq!(base, cell_rotation_axis(1, 2, 3));
        assert_ne!(grid_shift(1, 2), grid_shift(1, 3));
        for c in grid_shift(5, 9) {
            assert!((-0.5..0.5).contains(&c));
        }
    }
}
