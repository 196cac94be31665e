//! Time averages with block-averaged error bars, and the run statistics built from them.

use serde::{Deserialize, Serialize};

/// A sampled quantity: mean and a standard error from block averages (robust to the short
/// correlation times of MPC observables).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Series {
    pub n: u64,
    pub sum: f64,
    block_len: u64,
    block_sum: f64,
    block_n: u64,
    blocks: Vec<f64>,
}

impl Series {
    pub fn new(block_len: u64) -> Series {
        Series {
            block_len: block_len.max(1),
            ..Default::default()
        }
    }

    pub fn push(&mut self, x: f64) {
        self.n += 1;
        self.sum += x;
        self.block_sum += x;
        self.block_n += 1;
        if self.block_n == self.block_len {
            self.blocks.push(self.block_sum / self.block_n as f64);
            self.block_sum = 0.0;
            self.block_n = 0;
        }
    }

    pub fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / self.n as f64)
    }

    /// Standard error of the mean from completed blocks (None with fewer than 4 blocks).
    pub fn std_error(&self) -> Option<f64> {
        let k = self.blocks.len();
        if k < 4 {
            return None;
        }
        let m = self.blocks.iter().sum::<f64>() / k as f64;
        let var = self.blocks.iter().map(|b| (b - m) * (b - m)).sum::<f64>() / (k - 1) as f64;
        Some((var / k as f64).sqrt())
    }
}

/// Everything averaged over a run; part of checkpoints so a resumed run reports the same.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunStats {
    /// kT measured from velocities relative to the cell velocity, before each collision.
    pub temperature: Series,
    /// −Π_xy^kin / γ̇ per sample (only under shear).
    pub viscosity_kinetic: Series,
    /// −Π_xy^coll / γ̇ per sample.
    pub viscosity_collisional: Series,
    /// Σ over samples of the mean vx per layer (`Physics::profile_bin`: y, z across plates
    /// normal to z, per unit of distance from a pipe's axis), and the number of samples.
    pub profile_sum: Vec<f64>,
    pub profile_samples: u64,
    /// Between walls: the force the fluid exerts on each wall surface (momentum given per
    /// unit time), every step after equilibration: surface s, component k at index 3 s + k.
    /// Empty without walls.
    pub wall_force: Vec<Series>,
}

impl RunStats {
    pub fn new(profile_bins: usize) -> RunStats {
        let block = 100;
        RunStats {
            temperature: Series::new(block),
            viscosity_kinetic: Series::new(block),
            viscosity_collisional: Series::new(block),
            profile_sum: vec![0.0; profile_bins],
            profile_samples: 0,
            wall_force: Vec::new(),
        }
    }

    /// Record the momentum a step gave the walls, over the step's duration `h`.
    pub fn push_wall_force(&mut self, wall_momentum: &[[f64; 3]; 2], h: f64) {
        if self.wall_force.is_empty() {
            self.wall_force = (0..6).map(|_| Series::new(100)).collect();
        }
        for (series, m) in self.wall_force.iter_mut().zip(wall_momentum.as_flattened()) {
            series.push(m / h);
        }
    }

    /// The time-averaged vx per y layer (layer centres at y = i + 1/2).
    pub fn profile(&self) -> Vec<f64> {
        let n = self.profile_samples.max(1) as f64;
        self.profile_sum.iter().map(|s| s / n).collect()
    }

    /// Least-squares slope of the averaged profile and its standard error.
    pub fn profile_slope(&self) -> Option<(f64, f64)> {
        if self.profile_samples == 0 {
            return None;
        }
        let prof = self.profile();
        linear_fit(
            &prof
                .iter()
                .enumerate()
                .map(|(i, &v)| (i as f64 + 0.5, v))
                .collect::<Vec<_>>(),
        )
        .map(|(_, slope, err)| (slope, err))
    }
}

/// Least-squares line through points: (intercept, slope, standard error of the slope).
pub fn linear_fit(points: &[(f64, f64)]) -> Option<(f64, f64, f64)> {
    let n = points.len();
    if n < 3 {
        return None;
    }
    let nf = n as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / nf;
    let my = points.iter().map(|p| p.1).sum::<f64>() / nf;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let ssr: f64 = points
        .iter()
        .map(|p| (p.1 - intercept - slope * p.0).powi(2))
        .sum();
    let err = (ssr / (nf - 2.0) / sxx).sqrt();
    Some((intercept, slope, err))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_mean_and_error() {
        let mut s = Series::new(10);
        for i in 0..1000 {
            s.push(if i % 2 == 0 { 1.0 } else { 3.0 });
        }
        assert_eq!(s.mean(), Some(2.0));
        assert!(s.std_error().unwrap() < 1e-12);
    }

    #[test]
    fn fit_recovers_a_line() {
        let pts: Vec<_> = (0..10).map(|i| (i as f64, 2.0 + 0.5 * i as f64)).collect();
        let (a, b, e) = linear_fit(&pts).unwrap();
        assert!((a - 2.0).abs() < 1e-12 && (b - 0.5).abs() < 1e-12 && e < 1e-12);
    }
}
