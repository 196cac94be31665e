//! Time-averaged flow fields on the collision-cell grid (the unshifted one): density, velocity
//! and temperature per cell, accumulated on the backend at every sampled step and written as
//! VTK image data (`.vti`, which ParaView, VisIt and the `vtk` Python package open) with a
//! `fields.pvd` collection that ParaView reads as a time series.
//!
//! Each backend keeps five sums per cell over the samples: N, Σvx, Σvy, Σvz, Σv² (fluid
//! particles binned by their position's cell, velocities as stored: under Lees-Edwards shear
//! the primary box's frame). The temperature of a cell is m/3 · (⟨v²⟩ − ⟨v⟩²) over all its
//! samples, so it includes the fluctuations of the cell's mean velocity between samples
//! (≈ kT/N_samples·(1/ρ) higher than the particles' kT; negligible for long averages).
//!
//! Between walls the files carry the solid too: the part of each cell inside the walls
//! ([`solid_fraction`]), so a viewer can mask the solid and a script can weight the cells.

use std::io::Write;
use std::path::Path;

use rayon::prelude::*;

use crate::error::{MpcError, Result};
use crate::physics::walls::{Shape, WallShape};

/// Sample points per axis in a cell the wall surface cuts ([`solid_fraction`]).
const SOLID_SAMPLES: usize = 4;

/// The part of each cell (global order, as [`FlowFields`]) inside the walls: 0 in the fluid, 1
/// in the solid, and for a cell the surface cuts the fraction of 4³ points at the centres of
/// its sub-cells that lie inside (the midpoint rule: exact for a plane, second order in the
/// sub-cell size for a curved surface).
pub fn solid_fraction(shape: &Shape, cells: [u32; 3]) -> Vec<f64> {
    let [lx, ly, lz] = cells.map(|c| c as usize);
    let mut out = vec![0.0; lx * ly * lz];
    out.par_chunks_mut(lx * lz)
        .enumerate()
        .for_each(|(iy, layer)| {
            for iz in 0..lz {
                for ix in 0..lx {
                    let lo = [ix as f64, iy as f64, iz as f64];
                    layer[iz * lx + ix] = cell_solid_fraction(shape, lo);
                }
            }
        });
    out
}

fn cell_solid_fraction(shape: &Shape, lo: [f64; 3]) -> f64 {
    if !shape.cuts_cell(lo) {
        let centre = lo.map(|c| c + 0.5);
        return if shape.signed_distance(centre) > 0.0 {
            0.0
        } else {
            1.0
        };
    }
    let k = SOLID_SAMPLES;
    let step = 1.0 / k as f64;
    let mut inside = 0usize;
    for a in 0..k {
        for b in 0..k {
            for c in 0..k {
                let r = [
                    lo[0] + (a as f64 + 0.5) * step,
                    lo[1] + (b as f64 + 0.5) * step,
                    lo[2] + (c as f64 + 0.5) * step,
                ];
                inside += usize::from(shape.signed_distance(r) <= 0.0);
            }
        }
    }
    inside as f64 / (k * k * k) as f64
}

/// Sums per cell: particle count, Σ vx, Σ vy, Σ vz, Σ v².
pub const FIELD_SUMS: usize = 5;

/// Averages over `samples` sampled steps, cells in the global order `(iy · Lz + iz) · Lx + ix`.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowFields {
    pub cells: [u32; 3],
    pub samples: u64,
    /// Mean number of particles per cell.
    pub density: Vec<f64>,
    /// Mean velocity per cell (NaN in a cell no particle visited).
    pub velocity: Vec<[f64; 3]>,
    /// m/3 · (⟨v²⟩ − ⟨v⟩²) per cell (NaN where fewer than two particle samples).
    pub temperature: Vec<f64>,
    /// Between walls: the part of each cell inside them ([`solid_fraction`]).
    pub solid: Option<Vec<f64>>,
}

impl FlowFields {
    /// Averages from the raw sums (`FIELD_SUMS` per cell) of `samples` samples.
    pub fn from_sums(cells: [u32; 3], samples: u64, sums: &[f64], mass: f64) -> FlowFields {
        let n = sums.len() / FIELD_SUMS;
        let mut f = FlowFields {
            cells,
            samples,
            density: Vec::with_capacity(n),
            velocity: Vec::with_capacity(n),
            temperature: Vec::with_capacity(n),
            solid: None,
        };
        for s in sums.chunks_exact(FIELD_SUMS) {
            let count = s[0];
            f.density.push(if samples > 0 {
                count / samples as f64
            } else {
                0.0
            });
            let v = [s[1] / count, s[2] / count, s[3] / count];
            f.velocity.push(v);
            let v2 = v[0] * v[0] + v[1] * v[1] + v[2] * v[2];
            f.temperature.push(if count >= 2.0 {
                mass / 3.0 * (s[4] / count - v2)
            } else {
                f64::NAN
            });
        }
        f
    }

    /// Cell (ix, iy, iz) of the global order.
    pub fn index(&self, ix: u32, iy: u32, iz: u32) -> usize {
        let [lx, _, lz] = self.cells;
        ((iy * lz + iz) * lx + ix) as usize
    }

    /// Write VTK XML image data: one cell per collision cell (spacing a = 1, origin 0), cell
    /// arrays `density`, `velocity` (3 components), `temperature` and between walls `solid`,
    /// f64, appended raw.
    pub fn write_vti(&self, path: &Path) -> Result<()> {
        let [lx, ly, lz] = self.cells;
        // VTK's cell order: x fastest, then y, then z
        let mut density = Vec::with_capacity(self.density.len());
        let mut velocity = Vec::with_capacity(3 * self.density.len());
        let mut temperature = Vec::with_capacity(self.density.len());
        let mut solid = Vec::with_capacity(self.solid.as_ref().map_or(0, Vec::len));
        for iz in 0..lz {
            for iy in 0..ly {
                for ix in 0..lx {
                    let c = self.index(ix, iy, iz);
                    density.push(self.density[c]);
                    velocity.extend_from_slice(&self.velocity[c]);
                    temperature.push(self.temperature[c]);
                    if let Some(s) = &self.solid {
                        solid.push(s[c]);
                    }
                }
            }
        }
        let mut arrays: Vec<(&str, usize, &[f64])> = vec![
            ("density", 1, &density),
            ("velocity", 3, &velocity),
            ("temperature", 1, &temperature),
        ];
        if self.solid.is_some() {
            arrays.push(("solid", 1, &solid));
        }
        let mut header = format!(
            "<?xml version=\"1.0\"?>\n<VTKFile type=\"ImageData\" version=\"1.0\" \
             byte_order=\"LittleEndian\" header_type=\"UInt64\">\n  <ImageData \
             WholeExtent=\"0 {lx} 0 {ly} 0 {lz}\" Origin=\"0 0 0\" Spacing=\"1 1 1\">\n    \
             <Piece Extent=\"0 {lx} 0 {ly} 0 {lz}\">\n      <CellData Scalars=\"density\" \
             Vectors=\"velocity\">\n"
        );
        let mut offset = 0u64;
        for &(name, comps, data) in &arrays {
            header.push_str(&format!(
                "        <DataArray type=\"Float64\" Name=\"{name}\" \
                 NumberOfComponents=\"{comps}\" format=\"appended\" offset=\"{offset}\"/>\n"
            ));
            offset += 8 + 8 * data.len() as u64;
        }
        header.push_str(
            "      </CellData>\n    </Piece>\n  </ImageData>\n  <AppendedData encoding=\"raw\">\n   _",
        );
        let mut bytes = header.into_bytes();
        for &(_, _, data) in &arrays {
            bytes.extend_from_slice(&(8 * data.len() as u64).to_le_bytes());
            for x in data {
                bytes.extend_from_slice(&x.to_le_bytes());
            }
        }
        bytes.extend_from_slice(b"\n  </AppendedData>\n</VTKFile>\n");
        write_atomically(path, &bytes)
    }
}

/// Write `bytes` to `path` through a temporary file and a rename, so a reader never sees half a
/// file.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp).map_err(|e| MpcError::io(&tmp, e))?;
    f.write_all(bytes)
        .and_then(|_| f.sync_all())
        .map_err(|e| MpcError::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| MpcError::io(path, e))
}

/// The ParaView collection of the field files written so far: (time, file name) pairs.
pub fn write_pvd(path: &Path, files: &[(f64, String)]) -> Result<()> {
    let mut s = String::from(
        "<?xml version=\"1.0\"?>\n<VTKFile type=\"Collection\" version=\"1.0\" \
         byte_order=\"LittleEndian\">\n  <Collection>\n",
    );
    for (t, name) in files {
        s.push_str(&format!(
            "    <DataSet timestep=\"{t}\" part=\"0\" file=\"{name}\"/>\n"
        ));
    }
    s.push_str("  </Collection>\n</VTKFile>\n");
    write_atomically(path, s.as_bytes())
}

/// The unshifted cell of a position in the box (each coordinate clamped into its cell range,
/// for positions rounded up to the box edge).
#[inline]
pub fn field_cell(cells: [u32; 3], pos: [f32; 3]) -> [u32; 3] {
    let c = |k: usize| (pos[k].max(0.0) as u32).min(cells[k] - 1);
    [c(0), c(1), c(2)]
}

/// Writes the flow-field files of a run (`fields_<step>.vti` every `output.field_interval`
/// steps, and `fields.pvd` listing them with their times); a resumed run keeps the files of
/// steps up to its start and lists them again.
pub struct FieldWriter {
    dir: std::path::PathBuf,
    interval: u64,
    files: Vec<(f64, String)>,
    /// The files are written off the stepping thread.
    out: crate::background::OutputThread,
}

/// The name of the field file of `step`.
pub fn field_file_name(step: u64) -> String {
    format!("fields_{step:010}.vti")
}

impl FieldWriter {
    /// None when the config asks for no fields.
    pub fn new(solvent: &crate::Solvent, dir: &Path) -> Option<FieldWriter> {
        let interval = solvent.config().output.field_interval;
        if interval == 0 {
            return None;
        }
        let h = solvent.physics().h;
        let start = solvent.step_count();
        let files = (1..=start / interval)
            .map(|k| k * interval)
            .filter(|&step| dir.join(field_file_name(step)).exists())
            .map(|step| (step as f64 * h, field_file_name(step)))
            .collect();
        Some(FieldWriter {
            dir: dir.to_path_buf(),
            interval,
            files,
            out: crate::background::OutputThread::new("fields"),
        })
    }

    /// After each step: take the averages when the step count reaches a multiple of the
    /// interval (or `last`, with samples pending) and hand their files to the writer thread;
    /// a failed earlier write is the error.
    pub fn after_step(&mut self, solvent: &mut crate::Solvent, last: bool) -> Result<()> {
        let step = solvent.step_count();
        if !(step.is_multiple_of(self.interval) || (last && solvent.field_samples() > 0)) {
            return self.out.check();
        }
        let t = std::time::Instant::now();
        let fields = solvent.take_fields()?;
        if fields.samples == 0 {
            return self.out.check();
        }
        let name = field_file_name(step);
        self.files
            .push((step as f64 * solvent.physics().h, name.clone()));
        if !crate::ranks::is_root() {
            return Ok(()); // the sums are every rank's; rank 0 writes them
        }
        let (vti, pvd) = (self.dir.join(&name), self.dir.join("fields.pvd"));
        let files = self.files.clone();
        let held = t.elapsed().as_secs_f64();
        self.out.submit(held, move || {
            fields.write_vti(&vti)?;
            write_pvd(&pvd, &files)
        })
    }

    /// Wait until every file handed over is written (before a checkpoint: a resume lists the
    /// files up to its step); the first failure.
    pub fn finish(&mut self) -> Result<()> {
        self.out.finish()
    }

    /// What the files cost so far.
    pub fn times(&self) -> &crate::report::OutputTimes {
        self.out.times()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn averages_from_sums() {
        // two cells, 4 samples: cell 0 saw 8 particle samples, cell 1 none
        let sums = [
            8.0,
            8.0,
            -4.0,
            0.0,
            8.0 * 1.0 + 8.0 * 0.25 + 8.0 * 3.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
        ];
        let f = FlowFields::from_sums([2, 1, 1], 4, &sums, 1.0);
        assert_eq!(f.density, vec![2.0, 0.0]);
        assert_eq!(f.velocity[0], [1.0, -0.5, 0.0]);
        assert!((f.temperature[0] - (1.0 / 3.0) * (4.25 - 1.25)).abs() < 1e-15);
        assert!(f.velocity[1][0].is_nan() && f.temperature[1].is_nan());
    }

    use crate::config::Config;
    use crate::physics::Physics;

    fn shape(walls: &str, cells: [u32; 3]) -> Shape {
        let cfg = Config::from_ron_str(&format!(
            "(cells: ({}, {}, {}), particles_per_cell: 10, time_step: 0.1, \
              collision: Srd(angle_deg: 130.0), steps: 1, device: Cpu, walls: {walls})",
            cells[0], cells[1], cells[2]
        ))
        .unwrap();
        Physics::from_config(&cfg).walls.unwrap().shape
    }

    /// A slit of height 10 in 12 layers: the wall layers are solid, the channel fluid, and
    /// the solid volume is the box's less the channel's.
    #[test]
    fn a_slit_is_solid_in_its_wall_layers_only() {
        let cells = [6, 12, 4];
        let s = solid_fraction(&shape("Slit(height: 10.0)", cells), cells);
        let layer = |iy: usize| s[iy * 24..(iy + 1) * 24].iter().sum::<f64>() / 24.0;
        assert_eq!(layer(0), 1.0);
        assert_eq!(layer(11), 1.0);
        for iy in 1..11 {
            assert_eq!(layer(iy), 0.0, "layer {iy}");
        }
    }

    /// A spherical obstacle's solid cells add up to its volume, 4/3 π R³, within the midpoint
    /// rule's error on the cut cells (well below 1% at R = 2.7).
    #[test]
    fn a_spheres_solid_adds_up_to_its_volume() {
        let cells = [8, 16, 8];
        let s = solid_fraction(&shape("SphereObstacle(radius: 2.7)", cells), cells);
        let volume: f64 = s.iter().sum();
        let exact = 4.0 / 3.0 * std::f64::consts::PI * 2.7f64.powi(3);
        assert!(
            (volume / exact - 1.0).abs() < 0.01,
            "solid {volume} vs sphere {exact}"
        );
        assert!(s.iter().all(|&f| (0.0..=1.0).contains(&f)));
        assert!(s.iter().any(|&f| f > 0.0 && f < 1.0), "no cut cell");
    }
}
