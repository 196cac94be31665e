//! The velocity profile across a channel and its fit: which part of each profile bin is
//! fluid (the bins are whole cells along a slit's normal, y or z, or of the distance from a
//! pipe's axis, and the walls
//! cut the outer ones), and least-squares fits of bin averages that are exact for the flows
//! of [`super::theory`]: the model is averaged over each bin's fluid part, not taken at its
//! centre (for a parabola the two differ by c2 w²/12 for a bin of width w).

use super::shapes::Shape;

/// Averages over the fluid part of one profile bin of the coordinate across the channel (y or
/// z in a slit, r in a pipe) and of its square, with the bin's weight (fluid width, or annulus area).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BinMoments {
    pub mean: f64,
    pub mean_square: f64,
    pub weight: f64,
}

/// The fluid part of bin `i` ([i, i + 1) along the slit's normal or in r), or None if it
/// holds no fluid.
pub fn bin_moments(shape: &Shape, i: usize) -> Option<BinMoments> {
    let (lo, hi) = (i as f64, i as f64 + 1.0);
    match shape {
        Shape::Slit(s) => {
            let (a, b) = (lo.max(s.bottom), hi.min(s.top));
            (b > a).then(|| BinMoments {
                mean: 0.5 * (a + b),
                mean_square: (b * b * b - a * a * a) / (3.0 * (b - a)),
                weight: b - a,
            })
        }
        Shape::Pipe(p) => {
            let (a, b) = (lo, hi.min(p.radius));
            (b > a).then(|| BinMoments {
                mean: 2.0 * (b * b * b - a * a * a) / (3.0 * (b * b - a * a)),
                mean_square: 0.5 * (a * a + b * b),
                weight: b * b - a * a,
            })
        }
        // the y layers about a sphere, across a pore or cosine walls have no flow model to fit
        Shape::Sphere(_) | Shape::PlanarPore(_) | Shape::Cosine(_) | Shape::Field(_) => None,
    }
}

/// Weighted linear least squares: the coefficients c minimising Σ w (y − Σ_k c_k x_k)² over
/// rows (x, y, w). None if the normal equations are singular.
pub fn least_squares<const K: usize>(rows: &[([f64; K], f64, f64)]) -> Option<[f64; K]> {
    let mut a = [[0.0; K]; K];
    let mut b = [0.0; K];
    for (x, y, w) in rows {
        for i in 0..K {
            b[i] += w * x[i] * y;
            for j in 0..K {
                a[i][j] += w * x[i] * x[j];
            }
        }
    }
    // Gaussian elimination with partial pivoting
    for col in 0..K {
        let piv = (col..K).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[piv][col].abs() < 1e-300 {
            return None;
        }
        a.swap(col, piv);
        b.swap(col, piv);
        for row in col + 1..K {
            let f = a[row][col] / a[col][col];
            let pivot_row = a[col];
            for (x, p) in a[row].iter_mut().zip(pivot_row).skip(col) {
                *x -= f * p;
            }
            b[row] -= f * b[col];
        }
    }
    let mut c = [0.0; K];
    for i in (0..K).rev() {
        let s: f64 = (i + 1..K).map(|j| a[i][j] * c[j]).sum();
        c[i] = (b[i] - s) / a[i][i];
    }
    Some(c)
}

/// A profile fitted across a channel: vx = c0 + c1 x + c2 x² with x along the normal (y or
/// z) in a slit, and
/// vx = c0 + c2 r² in a pipe (c1 = 0 by symmetry).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct ProfileFit {
    pub c0: f64,
    pub c1: f64,
    pub c2: f64,
    /// Root-mean-square deviation of the bin averages from the fitted curve.
    pub rms_residual: f64,
}

impl ProfileFit {
    pub fn at(&self, x: f64) -> f64 {
        self.c0 + self.c1 * x + self.c2 * x * x
    }
}

/// Distance from the walls within which profile bins are left out of the fit: the bin
/// averages there carry the wall's collision layer (the cells the wall cuts), about a cell
/// thick, where the mean velocity bends away from the hydrodynamic profile.
pub const WALL_LAYER: f64 = 1.0;

/// Whether bin `i` reaches within [`WALL_LAYER`] of a wall.
fn near_wall(shape: &Shape, i: usize) -> bool {
    let (lo, hi) = (i as f64, i as f64 + 1.0);
    match shape {
        Shape::Slit(s) => lo < s.bottom + WALL_LAYER || hi > s.top - WALL_LAYER,
        Shape::Pipe(p) => hi > p.radius - WALL_LAYER,
        Shape::Sphere(_) | Shape::PlanarPore(_) | Shape::Cosine(_) | Shape::Field(_) => true,
    }
}

/// Fit the bin averages `profile` (one per bin, see [`bin_moments`]) with the flow model of
/// the shape: a parabola along the normal for a slit (a line if `linear`), c0 + c2 r² for a pipe
/// (None about a sphere: no model). Bins within [`WALL_LAYER`] of a wall are left out.
pub fn fit_profile(shape: &Shape, profile: &[f64], linear: bool) -> Option<ProfileFit> {
    let bins: Vec<(BinMoments, f64)> = profile
        .iter()
        .enumerate()
        .filter(|(i, _)| !near_wall(shape, *i))
        .filter_map(|(i, &v)| bin_moments(shape, i).map(|m| (m, v)))
        .collect();
    let fit = match shape {
        Shape::Slit(_) if linear => {
            let rows: Vec<_> = bins
                .iter()
                .map(|(m, v)| ([1.0, m.mean], *v, m.weight))
                .collect();
            let c = least_squares(&rows)?;
            ProfileFit {
                c0: c[0],
                c1: c[1],
                c2: 0.0,
                rms_residual: 0.0,
            }
        }
        Shape::Slit(_) => {
            let rows: Vec<_> = bins
                .iter()
                .map(|(m, v)| ([1.0, m.mean, m.mean_square], *v, m.weight))
                .collect();
            let c = least_squares(&rows)?;
            ProfileFit {
                c0: c[0],
                c1: c[1],
                c2: c[2],
                rms_residual: 0.0,
            }
        }
        Shape::Sphere(_) | Shape::PlanarPore(_) | Shape::Cosine(_) | Shape::Field(_) => {
            return None
        }
        Shape::Pipe(_) => {
            let rows: Vec<_> = bins
                .iter()
                .map(|(m, v)| ([1.0, m.mean_square], *v, m.weight))
                .collect();
            let c = least_squares(&rows)?;
            ProfileFit {
                c0: c[0],
                c1: 0.0,
                c2: c[1],
                rms_residual: 0.0,
            }
        }
    };
    // residuals of the bin averages against the bin-averaged model
    let ss: f64 = bins
        .iter()
        .map(|(m, v)| {
            let model = fit.c0 + fit.c1 * m.mean + fit.c2 * m.mean_square;
            (v - model) * (v - model)
        })
        .sum();
    Some(ProfileFit {
        rms_residual: (ss / bins.len().max(1) as f64).sqrt(),
        ..fit
    })
}

#[cfg(test)]
mod tests {
    use super::super::shapes::{Pipe, Slit, SlitNormal};
    use super::*;

    #[test]
    fn bin_averaged_parabolas_are_fitted_exactly() {
        let slit = Shape::Slit(Slit::centred(9.0, SlitNormal::Y, 10.0, [0.0; 2]));
        // exact bin averages of v = 1 + 0.5 y − 0.1 y² over the fluid part of each bin
        let prof: Vec<f64> = (0..10)
            .map(|i| {
                let m = bin_moments(&slit, i).unwrap();
                1.0 + 0.5 * m.mean - 0.1 * m.mean_square
            })
            .collect();
        let f = fit_profile(&slit, &prof, false).unwrap();
        assert!((f.c0 - 1.0).abs() < 1e-12 && (f.c1 - 0.5).abs() < 1e-12);
        assert!((f.c2 + 0.1).abs() < 1e-12 && f.rms_residual < 1e-12);
        let pipe = Shape::Pipe(Pipe {
            centre: [5.0, 5.0],
            radius: 4.5,
            velocity: 0.0,
        });
        assert!(bin_moments(&pipe, 5).is_none());
        let m = bin_moments(&pipe, 4).unwrap();
        assert!((m.weight - (4.5f64 * 4.5 - 16.0)).abs() < 1e-12);
        let prof: Vec<f64> = (0..10)
            .map(|i| bin_moments(&pipe, i).map_or(0.0, |m| 2.0 - 0.05 * m.mean_square))
            .collect();
        let f = fit_profile(&pipe, &prof, false).unwrap();
        assert!((f.c0 - 2.0).abs() < 1e-12 && (f.c2 + 0.05).abs() < 1e-12);
    }
}
