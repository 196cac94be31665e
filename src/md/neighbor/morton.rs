//! Morton (Z-curve) ordering: particles close in space become close in memory, which keeps the
//! neighbour loops cache-friendly. The CPU engine reorders every `reorder_every` list builds.

use rayon::prelude::*;

/// Spread the low 10 bits of x to every third bit.
#[inline]
fn spread3(x: u32) -> u64 {
    let mut v = (x & 0x3ff) as u64;
    v = (v | (v << 16)) & 0x0300_00ff;
    v = (v | (v << 8)) & 0x0300_f00f;
    v = (v | (v << 4)) & 0x030c_30c3;
    v = (v | (v << 2)) & 0x0924_9249;
    v
}

/// Morton (Z-curve) key of a position on a 1024³ grid over the box.
#[inline]
pub fn morton_key(p: [f64; 3], box_len: [f64; 3]) -> u64 {
    let q = |k: usize| ((p[k] / box_len[k] * 1024.0) as i64).clamp(0, 1023) as u32;
    spread3(q(0)) | (spread3(q(1)) << 1) | (spread3(q(2)) << 2)
}

/// The permutation that sorts particles along the Z curve (ties by current index): new
/// particle k is old particle `perm[k]`.
pub fn morton_order(pos: &[[f64; 3]], box_len: [f64; 3]) -> Vec<u32> {
    let mut keyed: Vec<(u64, u32)> = pos
        .par_iter()
        .enumerate()
        .map(|(i, &p)| (morton_key(p, box_len), i as u32))
        .collect();
    keyed.par_sort_unstable();
    keyed.into_iter().map(|(_, i)| i).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn morton_interleaves_bits() {
        assert_eq!(spread3(0b1), 0b1);
        assert_eq!(spread3(0b11), 0b1001);
        assert_eq!(spread3(0x3ff).count_ones(), 10);
        let l = [1.0; 3];
        assert!(morton_key([0.9, 0.0, 0.0], l) < morton_key([0.0, 0.9, 0.0], l));
        assert!(morton_key([0.0, 0.9, 0.0], l) < morton_key([0.0, 0.0, 0.9], l));
    }
}
