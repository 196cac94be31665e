//! Debug entry points for the tests (`kernels/debug.cu`): the GPU's per-cell draws, MPC-AT's
//! per-particle draws, `det_ln` and initial particles, compared bit for bit with `src/rng.rs`,
//! `src/physics/rules.rs` and `src/state.rs`.

use super::device::{drv, grid, CudaDevice};
use crate::error::Result;

impl CudaDevice {
    /// Debug entry point: rotation axes and MBS thermostat energies of `cells[i]` holding
    /// `counts[i]` particles (energy 0 for fewer than two), computed on the GPU.
    pub fn cell_draws(
        &self,
        seed: u64,
        step: u64,
        cells: &[u32],
        counts: &[u32],
        kt: f64,
    ) -> Result<(Vec<[f64; 3]>, Vec<f64>)> {
        assert_eq!(cells.len(), counts.len());
        let n = cells.len();
        let s = &self.stream;
        let d_cells = s.clone_htod(cells).map_err(drv("copy"))?;
        let d_counts = s.clone_htod(counts).map_err(drv("copy"))?;
        let mut axes = s.alloc_zeros::<f64>(3 * n.max(1)).map_err(drv("alloc"))?;
        let mut energies = s.alloc_zeros::<f64>(n.max(1)).map_err(drv("alloc"))?;
        let nn = n as u32;
        // SAFETY: cells and counts hold n values, axes 3n and energies n doubles; one thread per
        // cell, threads past n return. Everything runs on this stream, read back below.
        unsafe {
            self.k
                .debug_cell_draws(
                    s,
                    grid(n),
                    &seed,
                    &step,
                    &d_cells,
                    &d_counts,
                    &kt,
                    &mut axes,
                    &mut energies,
                    &nn,
                )
                .map_err(drv("launch"))?;
        }
        let a = s.clone_dtoh(&axes).map_err(drv("copy"))?;
        let e = s.clone_dtoh(&energies).map_err(drv("copy"))?;
        Ok((
            (0..n)
                .map(|i| [a[3 * i], a[3 * i + 1], a[3 * i + 2]])
                .collect(),
            e[..n].to_vec(),
        ))
    }

    /// Debug entry point: MPC-AT's draws (`Physics::rule_draw`) on the GPU for particles with
    /// keys `keys[i]` and masses `masses[i]` in global cells `cells[i]`.
    pub fn at_draws(
        &self,
        seed: u64,
        step: u64,
        cells: &[u32],
        keys: &[u64],
        masses: &[f64],
        kt: f64,
    ) -> Result<Vec<[f64; 3]>> {
        assert!(cells.len() == keys.len() && keys.len() == masses.len());
        let n = cells.len();
        let s = &self.stream;
        let d_cells = s.clone_htod(cells).map_err(drv("copy"))?;
        let d_keys = s.clone_htod(keys).map_err(drv("copy"))?;
        let d_masses = s.clone_htod(masses).map_err(drv("copy"))?;
        let mut draws = s.alloc_zeros::<f64>(3 * n.max(1)).map_err(drv("alloc"))?;
        let nn = n as u32;
        // SAFETY: cells, keys and masses hold n values, draws 3n doubles; one thread per particle,
        // threads past n return; read back on the same stream.
        unsafe {
            self.k
                .debug_at_draws(
                    s,
                    grid(n),
                    &seed,
                    &step,
                    &d_cells,
                    &d_keys,
                    &d_masses,
                    &kt,
                    &mut draws,
                    &nn,
                )
                .map_err(drv("launch"))?;
        }
        let d = s.clone_dtoh(&draws).map_err(drv("copy"))?;
        Ok((0..n)
            .map(|i| [d[3 * i], d[3 * i + 1], d[3 * i + 2]])
            .collect())
    }

    /// Debug entry point: `det_ln` on the GPU.
    pub fn det_ln(&self, xs: &[f64]) -> Result<Vec<f64>> {
        let n = xs.len();
        let s = &self.stream;
        let dx = s.clone_htod(xs).map_err(drv("copy"))?;
        let mut dy = s.alloc_zeros::<f64>(n.max(1)).map_err(drv("alloc"))?;
        let nn = n as u32;
        // SAFETY: x and y hold at least n doubles; threads past n return; read back on the same
        // stream.
        unsafe {
            self.k
                .debug_det_ln(s, grid(n), &dx, &mut dy, &nn)
                .map_err(drv("launch"))?;
        }
        let y = s.clone_dtoh(&dy).map_err(drv("copy"))?;
        Ok(y[..n].to_vec())
    }

    /// Debug entry point: `state::initial_particle` for particles 0..n on the GPU.
    pub fn initial_particles(
        &self,
        seed: u64,
        len: [f64; 3],
        sigma: f64,
        n: usize,
    ) -> Result<Vec<([f32; 3], [f64; 3])>> {
        let s = &self.stream;
        let mut pos = s.alloc_zeros::<f32>(3 * n.max(1)).map_err(drv("alloc"))?;
        let mut vel = s.alloc_zeros::<f64>(3 * n.max(1)).map_err(drv("alloc"))?;
        let nn = n as u32;
        // SAFETY: pos and vel hold 3n values each; threads past n return; read back on the same
        // stream.
        unsafe {
            self.k
                .debug_initial_particle(
                    s,
                    grid(n),
                    &seed,
                    &len[0],
                    &len[1],
                    &len[2],
                    &sigma,
                    &mut pos,
                    &mut vel,
                    &nn,
                )
                .map_err(drv("launch"))?;
        }
        let p = s.clone_dtoh(&pos).map_err(drv("copy"))?;
        let v = s.clone_dtoh(&vel).map_err(drv("copy"))?;
        Ok((0..n)
            .map(|i| {
                (
                    [p[3 * i], p[3 * i + 1], p[3 * i + 2]],
                    [v[3 * i], v[3 * i + 1], v[3 * i + 2]],
                )
            })
            .collect())
    }
}
