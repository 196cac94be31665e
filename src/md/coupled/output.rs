//! The files of a coupled run: `md.csv` (one row per observed MPC step) and the trajectory,
//! extended XYZ or GSD (HOOMD schema). A resumed run appends to both; the GSD file first drops
//! the frames written after the checkpoint. Frames are written by a thread of their own
//! (`crate::background`) while the run steps on; [`CoupledOutput::flush`] waits for them.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::error::{MpcError, Result};
use crate::gsd::{GsdBonds, GsdFrame, GsdTopology, GsdWriter};
use crate::md::from_config::TrajectoryFormat;
use crate::md::observe::{write_xyz_frame, ChainSample};
use crate::md::rheology::Conformation;
use crate::md::system::System;

pub const MD_CSV: &str = "md.csv";
pub const TRAJECTORY_XYZ: &str = "trajectory.xyz";
pub const TRAJECTORY_GSD: &str = "trajectory.gsd";

const CSV_HEADER: &str = "mpc_step,time,md_kinetic_energy,md_potential_energy,md_momentum_x,md_momentum_y,md_momentum_z,rg_mean,rg2_mean,com_msd,max_bond,gyration_xx,gyration_yy,gyration_zz,gyration_xy,orientation_angle_deg,end_to_end2,stress_xy_solute";

/// One row of `md.csv`.
pub struct CsvRow {
    pub step: u64,
    pub time: f64,
    pub kinetic_energy: f64,
    pub potential_energy: f64,
    pub momentum: [f64; 3],
    pub chains: ChainSample,
    pub conformation: Conformation,
    /// P_xy of the solutes when this step measured it.
    pub stress_xy: Option<f64>,
}

/// The trajectory file, shared with the thread that writes its frames.
enum Trajectory {
    Xyz(Arc<Mutex<BufWriter<std::fs::File>>>),
    Gsd(Arc<Mutex<GsdWriter>>),
}

/// Open output files of a coupled run.
pub(super) struct CoupledOutput {
    csv: Option<(PathBuf, BufWriter<std::fs::File>)>,
    trajectory: Option<(PathBuf, Trajectory)>,
    frames: crate::background::OutputThread,
}

/// The writer behind `m` (an error if a write panicked while holding it).
fn lock<'m, T>(m: &'m Mutex<T>, p: &Path) -> Result<std::sync::MutexGuard<'m, T>> {
    m.lock().map_err(|_| {
        MpcError::Device(format!(
            "the writer of {} stopped on an internal error (please report it)",
            p.display()
        ))
    })
}

fn open_csv(dir: &Path, resume: bool) -> Result<(PathBuf, BufWriter<std::fs::File>)> {
    let p = dir.join(MD_CSV);
    let append = resume && p.exists();
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(append)
        .write(true)
        .truncate(!append)
        .open(&p)
        .map_err(|e| MpcError::io(&p, e))?;
    let mut w = BufWriter::new(f);
    if !append {
        writeln!(w, "{CSV_HEADER}").map_err(|e| MpcError::io(&p, e))?;
    }
    Ok((p, w))
}

/// The constant part of GSD frames: types "T1", "T2", … (as in the XYZ frames), masses and
/// bonds, particles in atom id order.
fn gsd_topology(sys: &System, order: &[usize]) -> GsdTopology {
    let mut rank = vec![0u32; sys.len()];
    for (k, &i) in order.iter().enumerate() {
        rank[i] = k as u32;
    }
    let index: std::collections::HashMap<u32, usize> =
        sys.tag.iter().enumerate().map(|(i, &t)| (t, i)).collect();
    let n_bond_types = sys.bonds.iter().map(|b| b.kind + 1).max().unwrap_or(0);
    GsdTopology {
        types: (1..=sys.n_types()).map(|t| format!("T{t}")).collect(),
        typeid: order.iter().map(|&i| sys.typ[i]).collect(),
        mass: order.iter().map(|&i| sys.mass(i) as f32).collect(),
        bonds: GsdBonds {
            types: (1..=n_bond_types).map(|t| format!("B{t}")).collect(),
            typeid: sys.bonds.iter().map(|b| b.kind).collect(),
            group: sys
                .bonds
                .iter()
                .map(|b| [rank[index[&b.a]], rank[index[&b.b]]])
                .collect(),
        },
    }
}

/// Particle indices in atom id order (frames line up however the engine orders particles).
fn by_tag(sys: &System) -> Vec<usize> {
    let mut order: Vec<usize> = (0..sys.len()).collect();
    order.sort_unstable_by_key(|&i| sys.tag[i]);
    order
}

impl CoupledOutput {
    /// Open the files in `dir`: fresh ones, or (`resume`: the checkpoint's step and time)
    /// continued after a checkpoint, dropping what was written past it.
    pub(super) fn open(
        dir: &Path,
        sys: &System,
        csv: bool,
        trajectory: Option<TrajectoryFormat>,
        resume: Option<(u64, f64)>,
    ) -> Result<CoupledOutput> {
        std::fs::create_dir_all(dir).map_err(|e| MpcError::io(dir, e))?;
        let resume_step = resume.map(|r| r.0);
        if let Some((step, time)) = resume {
            // what the stopped run wrote after its checkpoint is written again from there
            crate::output_dir::truncate_csv_after(&dir.join(MD_CSV), step)?;
            crate::output_dir::truncate_xyz_after(&dir.join(TRAJECTORY_XYZ), time)?;
        }
        let csv = if csv {
            Some(open_csv(dir, resume_step.is_some())?)
        } else {
            None
        };
        let trajectory = match trajectory {
            None => None,
            Some(TrajectoryFormat::Xyz) => {
                let p = dir.join(TRAJECTORY_XYZ);
                let append = resume_step.is_some() && p.exists();
                let f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(append)
                    .write(true)
                    .truncate(!append)
                    .open(&p)
                    .map_err(|e| MpcError::io(&p, e))?;
                Some((p, Trajectory::Xyz(Arc::new(Mutex::new(BufWriter::new(f))))))
            }
            Some(TrajectoryFormat::Gsd) => {
                let p = dir.join(TRAJECTORY_GSD);
                let topo = gsd_topology(sys, &by_tag(sys));
                let w = match resume_step {
                    Some(step) if p.exists() => GsdWriter::append(&p, topo, step)?,
                    _ => GsdWriter::create(&p, topo)?,
                };
                Some((p, Trajectory::Gsd(Arc::new(Mutex::new(w)))))
            }
        };
        Ok(CoupledOutput {
            csv,
            trajectory,
            frames: crate::background::OutputThread::new("frames"),
        })
    }

    pub(super) fn write_row(&mut self, r: &CsvRow) -> Result<()> {
        let Some((path, w)) = &mut self.csv else {
            return Ok(());
        };
        let (s, c, g) = (&r.chains, &r.conformation, &r.conformation.gyration);
        let stress = r.stress_xy.map_or(String::new(), |p| format!("{p:e}"));
        writeln!(
            w,
            "{},{},{:e},{:e},{:e},{:e},{:e},{:.6},{:.6},{:.6},{:.6},{:.6},{:.6},{:.6},{:.6},{:.4},{:.6},{stress}",
            r.step,
            r.time,
            r.kinetic_energy,
            r.potential_energy,
            r.momentum[0],
            r.momentum[1],
            r.momentum[2],
            s.rg_mean,
            s.rg2_mean,
            s.com_msd,
            s.max_bond,
            g[0],
            g[1],
            g[2],
            g[3],
            c.orientation_angle_deg,
            c.end_to_end2(),
        )
        .map_err(|e| MpcError::io(path, e))
    }

    /// A frame of `sys` at MPC step `step` (time `time`), handed to the writer thread.
    pub(super) fn write_frame(&mut self, sys: &System, step: u64, time: f64) -> Result<()> {
        let t = std::time::Instant::now();
        match &mut self.trajectory {
            None => Ok(()),
            Some((p, Trajectory::Xyz(w))) => {
                let mut text = Vec::new();
                write_xyz_frame(&mut text, sys, time).map_err(|e| MpcError::io(p, e))?;
                let (w, p) = (w.clone(), p.clone());
                self.frames.submit(t.elapsed().as_secs_f64(), move || {
                    lock(&w, &p)?
                        .write_all(&text)
                        .map_err(|e| MpcError::io(&p, e))
                })
            }
            Some((p, Trajectory::Gsd(w))) => {
                let order = by_tag(sys);
                let lx = sys.box_len[0];
                let total = sys.lees_edwards.total(lx);
                // the writer stores the tilt reduced to (−Lx/2, Lx/2]: the x images absorb
                // the whole periods so that x + ix Lx + iy xy Ly is mpcbox's unwrapped x
                let k = (total / lx).round() as i32;
                let pos: Vec<[f64; 3]> = order.iter().map(|&i| sys.pos[i]).collect();
                let vel: Vec<[f64; 3]> = order.iter().map(|&i| sys.vel[i]).collect();
                let img: Vec<[i32; 3]> = order
                    .iter()
                    .map(|&i| {
                        let m = sys.image[i];
                        [m[0] + k * m[1], m[1], m[2]]
                    })
                    .collect();
                let box_lengths = sys.box_len;
                let (w, p) = (w.clone(), p.clone());
                self.frames.submit(t.elapsed().as_secs_f64(), move || {
                    lock(&w, &p)?.write_frame(&GsdFrame {
                        step,
                        box_lengths,
                        shear_offset: total,
                        positions: &pos,
                        velocities: &vel,
                        images: &img,
                    })
                })
            }
        }
    }

    /// What the frames cost so far.
    pub(super) fn times(&self) -> &crate::report::OutputTimes {
        self.frames.times()
    }

    /// Wait for the frames handed to the writer thread and flush what is buffered (GSD
    /// frames are durable as they are written).
    pub(super) fn flush(&mut self) -> Result<()> {
        self.frames.finish()?;
        if let Some((p, w)) = &mut self.csv {
            w.flush().map_err(|e| MpcError::io(p, e))?;
        }
        if let Some((p, Trajectory::Xyz(w))) = &self.trajectory {
            lock(w, p)?.flush().map_err(|e| MpcError::io(p, e))?;
        }
        Ok(())
    }
}
