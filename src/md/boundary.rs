//! The periodic box: the one place that knows how a separation between two particles is taken
//! (minimum image) and how a particle that left the box comes back (wrapping, image counts).
//! Pair and bond forces, neighbour lists and the integrators ask a [`PeriodicBox`] instead of
//! doing this arithmetic themselves, so that other boundaries (Lees–Edwards: an x offset on y
//! crossings) change this type and not every compute.

/// Minimum-image difference along one axis (|d| ≤ L/2 for wrapped inputs). Symmetric:
/// mi(−d) = −mi(d) exactly, so pair forces are exactly antisymmetric.
#[inline(always)]
pub fn min_image(mut d: f64, l: f64, half: f64) -> f64 {
    if d > half {
        d -= l;
    } else if d < -half {
        d += l;
    }
    d
}

/// An orthorhombic periodic box [0, L) in each direction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PeriodicBox {
    len: [f64; 3],
    half: [f64; 3],
}

impl PeriodicBox {
    pub fn new(len: [f64; 3]) -> PeriodicBox {
        PeriodicBox {
            len,
            half: [len[0] / 2.0, len[1] / 2.0, len[2] / 2.0],
        }
    }

    /// The edge lengths.
    #[inline(always)]
    pub fn lengths(&self) -> [f64; 3] {
        self.len
    }

    /// The minimum-image separation a − b of two wrapped positions.
    #[inline(always)]
    pub fn delta(&self, a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
        [
            min_image(a[0] - b[0], self.len[0], self.half[0]),
            min_image(a[1] - b[1], self.len[1], self.half[1]),
            min_image(a[2] - b[2], self.len[2], self.half[2]),
        ]
    }

    /// |a − b|² under the minimum image.
    #[inline(always)]
    pub fn distance2(&self, a: [f64; 3], b: [f64; 3]) -> f64 {
        let d = self.delta(a, b);
        d[0] * d[0] + d[1] * d[1] + d[2] * d[2]
    }

    /// Bring a position that has moved out of [0, L) back in, counting the periods crossed
    /// in `image` (the unwrapped position stays pos + image · L).
    #[inline(always)]
    pub fn wrap(&self, p: &mut [f64; 3], image: &mut [i32; 3]) {
        let l = self.len;
        for k in 0..3 {
            if p[k] >= l[k] || p[k] < 0.0 {
                let sh = (p[k] / l[k]).floor();
                p[k] -= sh * l[k];
                if p[k] >= l[k] {
                    p[k] -= l[k];
                }
                if p[k] < 0.0 {
                    p[k] = 0.0;
                }
                image[k] += sh as i32;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_image_is_antisymmetric() {
        for d in [-4.9, -2.5, -0.1, 0.0, 0.3, 2.5, 4.99] {
            assert_eq!(min_image(-d, 5.0, 2.5), -min_image(d, 5.0, 2.5));
        }
    }

    #[test]
    fn wrap_counts_images() {
        let b = PeriodicBox::new([2.0, 3.0, 4.0]);
        let mut p = [-0.5, 3.5, 9.0];
        let mut img = [0; 3];
        b.wrap(&mut p, &mut img);
        assert_eq!(p, [1.5, 0.5, 1.0]);
        assert_eq!(img, [-1, 1, 2]);
    }
}
