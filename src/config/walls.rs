//! The `walls` section of a run config and its checks.
//!
//! ```ron
//! walls: Slit(bottom_velocity: 0.0, top_velocity: 0.1),   // plates normal to y, height Ly − 1
//! walls: Slit(height: 10.0, normal: Z),                   // plates normal to z, 10 cells apart
//! walls: Pipe(radius: 7.5),                               // a pipe along x
//! walls: Sphere(radius: 7.5),                             // the fluid in a sphere
//! walls: SphereObstacle(radius: 3.0),                     // a sphere in the flow
//! walls: CylinderObstacle(radius: 3.0),                   // a cylinder along z in the flow
//! walls: PlanarPore(height: 6.0, length: 8.0),            // a pore between two reservoirs
//! walls: CosineChannel(height: 8.0, amplitude: 1.0),      // a wavy channel
//! walls: CosineExpansion(height: 8.0, amplitude: 1.0),    // an expansion-contraction
//! walls: DistanceField(file: "pores.npy", spacing: 0.5),   // a geometry given as data
//! ```

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::Config;
use crate::error::ConfigError;
use crate::physics::walls::field_load::{FieldKind, LoadedField};
use crate::physics::walls::shapes::{
    CosineWalls, Pipe, PlanarPore, Shape, Slit, SlitNormal, Sphere,
};

/// What a fluid particle that reaches a wall does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum WallBoundary {
    /// Bounce-back (its velocity relative to the wall reversed), and virtual particles moving
    /// with the wall fill the cells the wall cuts: no slip in streaming and collision.
    #[default]
    NoSlip,
    /// Specular reflection (the normal component relative to the wall reversed); no virtual
    /// particles.
    Slip,
}

/// The wall geometry of a run: the fluid is confined along y or z (a slit), or both (the
/// pipe; x stays periodic), in a sphere, between cosine walls across y, or flows around a
/// sphere or through a pore in the periodic box. Checkpoints store it in the binary form of
/// [`super::stored`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum WallsConfig {
    /// Parallel plates normal to y (or z: `normal: Z`), centred in the box, `height` apart
    /// (default L − 1 along the normal: the shifted grid needs one cell layer more than the
    /// channel), each moving along x.
    Slit {
        #[serde(default)]
        height: Option<f64>,
        /// The axis the plates are normal to (Y unless set; left out when written back).
        #[serde(default, skip_serializing_if = "SlitNormal::is_y")]
        normal: SlitNormal,
        #[serde(default)]
        bottom_velocity: f64,
        #[serde(default)]
        top_velocity: f64,
        #[serde(default)]
        boundary: WallBoundary,
        /// The WCA wall potential the bundled MD engine's solutes feel (`md::walls`).
        #[serde(default)]
        solutes: SoluteWall,
    },
    /// A cylindrical pipe along x, its axis through the box centre (y, z) = (Ly/2, Lz/2), its
    /// wall moving along x with `velocity`.
    Pipe {
        radius: f64,
        #[serde(default)]
        velocity: f64,
        #[serde(default)]
        boundary: WallBoundary,
        /// The WCA wall potential the bundled MD engine's solutes feel (`md::walls`).
        #[serde(default)]
        solutes: SoluteWall,
    },
    /// The fluid inside a sphere at rest centred in the box (a closed container).
    Sphere {
        radius: f64,
        #[serde(default)]
        boundary: WallBoundary,
        /// The WCA wall potential the bundled MD engine's solutes feel (`md::walls`).
        #[serde(default)]
        solutes: SoluteWall,
    },
    /// A sphere at rest centred in the box, the fluid around it: with the periodic box, a
    /// lattice of spheres of the box's period (simple cubic in a cubic box).
    SphereObstacle {
        radius: f64,
        #[serde(default)]
        boundary: WallBoundary,
        /// The WCA wall potential the bundled MD engine's solutes feel (`md::walls`).
        #[serde(default)]
        solutes: SoluteWall,
    },
    /// A cylinder at rest along z through the box centre, the fluid around it (across a flow
    /// along x): with the periodic box, a square array of cylinders in a square box.
    CylinderObstacle {
        radius: f64,
        #[serde(default)]
        boundary: WallBoundary,
        /// The WCA wall potential the bundled MD engine's solutes feel (`md::walls`).
        #[serde(default)]
        solutes: SoluteWall,
    },
    /// A pore `height` high across y and `length` long along x, centred in the box, between
    /// two reservoirs: the solid is |x − Lx/2| < length/2 beyond |y − Ly/2| > height/2 (one
    /// block spanning z, joined across the periodic y boundary).
    PlanarPore {
        height: f64,
        length: f64,
        #[serde(default)]
        boundary: WallBoundary,
        /// The WCA wall potential the bundled MD engine's solutes feel (`md::walls`).
        #[serde(default)]
        solutes: SoluteWall,
    },
    /// A wavy channel across y: walls at Ly/2 ± height/2 + amplitude cos(2πx/Lx), one period
    /// over the box (constant vertical width `height`).
    CosineChannel {
        height: f64,
        amplitude: f64,
        #[serde(default)]
        boundary: WallBoundary,
        /// The WCA wall potential the bundled MD engine's solutes feel (`md::walls`).
        #[serde(default)]
        solutes: SoluteWall,
    },
    /// An expansion-contraction across y: walls at Ly/2 ± (height/2 + amplitude cos(2πx/Lx)),
    /// one period over the box (width height + 2 amplitude cos(2πx/Lx)).
    CosineExpansion {
        height: f64,
        amplitude: f64,
        #[serde(default)]
        boundary: WallBoundary,
        /// The WCA wall potential the bundled MD engine's solutes feel (`md::walls`).
        #[serde(default)]
        solutes: SoluteWall,
    },
    /// A geometry given as data: a signed distance (positive in the fluid, in cells) or, with
    /// `kind: Mask`, a voxel mask (0 fluid, 1 solid) on a periodic grid of `spacing` cells
    /// spanning the box, from a `.npy` file (`physics::walls::field_load`); the walls at rest.
    DistanceField {
        /// The `.npy` file (relative to the working directory).
        file: PathBuf,
        /// Grid spacing in cells (nodes · spacing = box edge along each axis).
        spacing: f64,
        #[serde(default, skip_serializing_if = "FieldKind::is_distance")]
        kind: FieldKind,
        #[serde(default)]
        boundary: WallBoundary,
        /// The WCA wall potential the bundled MD engine's solutes feel (`md::walls`).
        #[serde(default)]
        solutes: SoluteWall,
        /// The field as read (not part of the config: read once, shared by clones).
        #[serde(skip)]
        loaded: LoadedField,
    },
}

/// The fewest cells across a channel (slit height, pipe diameter).
pub const MIN_CHANNEL_CELLS: f64 = 4.0;

fn err(field: &str, problem: String, fix: &str) -> Result<(), ConfigError> {
    Err(ConfigError {
        field: field.into(),
        problem,
        fix: fix.into(),
    })
}

impl WallsConfig {
    pub fn boundary(&self) -> WallBoundary {
        match self {
            WallsConfig::Slit { boundary, .. }
            | WallsConfig::Pipe { boundary, .. }
            | WallsConfig::Sphere { boundary, .. }
            | WallsConfig::SphereObstacle { boundary, .. }
            | WallsConfig::CylinderObstacle { boundary, .. }
            | WallsConfig::PlanarPore { boundary, .. }
            | WallsConfig::CosineChannel { boundary, .. }
            | WallsConfig::CosineExpansion { boundary, .. }
            | WallsConfig::DistanceField { boundary, .. } => *boundary,
        }
    }

    /// The fastest a wall surface moves (spheres, cylinders, pores and cosine walls are at
    /// rest): the
    /// fixed-point sums' speed bound includes it (`config::sums`).
    pub fn fastest_speed(&self) -> f64 {
        match self {
            WallsConfig::Slit {
                bottom_velocity,
                top_velocity,
                ..
            } => bottom_velocity.abs().max(top_velocity.abs()),
            WallsConfig::Pipe { velocity, .. } => velocity.abs(),
            WallsConfig::Sphere { .. }
            | WallsConfig::SphereObstacle { .. }
            | WallsConfig::CylinderObstacle { .. }
            | WallsConfig::PlanarPore { .. }
            | WallsConfig::CosineChannel { .. }
            | WallsConfig::CosineExpansion { .. }
            | WallsConfig::DistanceField { .. } => 0.0,
        }
    }

    /// The WCA parameters of the walls for the MD engine's solutes.
    pub fn solute_wall(&self) -> SoluteWall {
        match self {
            WallsConfig::Slit { solutes, .. }
            | WallsConfig::Pipe { solutes, .. }
            | WallsConfig::Sphere { solutes, .. }
            | WallsConfig::SphereObstacle { solutes, .. }
            | WallsConfig::CylinderObstacle { solutes, .. }
            | WallsConfig::PlanarPore { solutes, .. }
            | WallsConfig::CosineChannel { solutes, .. }
            | WallsConfig::CosineExpansion { solutes, .. }
            | WallsConfig::DistanceField { solutes, .. } => *solutes,
        }
    }

    /// Fluid particles between these walls: M per unit volume of the fluid region.
    pub fn fluid_particles(&self, cfg: &Config) -> u64 {
        use crate::physics::walls::shapes::WallShape;
        let len = cfg.cells.map(|c| c as f64);
        (cfg.particles_per_cell as f64 * self.shape(cfg).fluid_volume(len)).round() as u64
    }

    /// The geometry in the box of `cfg` (assumed valid).
    pub fn shape(&self, cfg: &Config) -> Shape {
        let len = cfg.cells.map(|c| c as f64);
        let [lx, ly, lz] = len;
        if let WallsConfig::DistanceField {
            file,
            spacing,
            kind,
            loaded,
            ..
        } = self
        {
            let field = loaded.get(file, *spacing, *kind, cfg.cells);
            return Shape::Field(field.unwrap_or_else(|e| panic!("walls: {e}")));
        }
        match *self {
            WallsConfig::Slit {
                height,
                normal,
                bottom_velocity,
                top_velocity,
                ..
            } => {
                let across = len[normal.axis()];
                Shape::Slit(Slit::centred(
                    height.unwrap_or(across - 1.0),
                    normal,
                    across,
                    [bottom_velocity, top_velocity],
                ))
            }
            WallsConfig::Pipe {
                radius, velocity, ..
            } => Shape::Pipe(Pipe {
                centre: [0.5 * ly, 0.5 * lz],
                radius,
                velocity,
            }),
            WallsConfig::Sphere { radius, .. }
            | WallsConfig::SphereObstacle { radius, .. }
            | WallsConfig::CylinderObstacle { radius, .. } => Shape::Sphere(Sphere {
                centre: len.map(|l| 0.5 * l),
                radius,
                fluid_inside: matches!(self, WallsConfig::Sphere { .. }),
                along_z: matches!(self, WallsConfig::CylinderObstacle { .. }),
            }),
            WallsConfig::PlanarPore { height, length, .. } => Shape::PlanarPore(PlanarPore {
                xc: 0.5 * lx,
                yc: 0.5 * ly,
                half_length: 0.5 * length,
                half_height: 0.5 * height,
            }),
            WallsConfig::CosineChannel {
                height, amplitude, ..
            }
            | WallsConfig::CosineExpansion {
                height, amplitude, ..
            } => Shape::Cosine(CosineWalls {
                yc: 0.5 * ly,
                half_height: 0.5 * height,
                amplitude,
                period: lx,
                expansion: matches!(self, WallsConfig::CosineExpansion { .. }),
            }),
            WallsConfig::DistanceField { .. } => unreachable!("returned above"),
        }
    }

    /// Every check of the walls against the rest of the config.
    pub fn validate(&self, cfg: &Config) -> Result<(), ConfigError> {
        let z_plates = matches!(
            self,
            WallsConfig::Slit {
                normal: SlitNormal::Z,
                ..
            }
        );
        if cfg.shear_rate != 0.0 && z_plates {
            // Lees-Edwards shears along y: no-slip plates normal to z would have to move with
            // the sheared flow γ̇ (y − Ly/2), which no rigid plate does
            return err(
                "walls",
                format!(
                    "walls cannot be combined with Lees-Edwards shear (shear_rate = {}): plates \
                     normal to z would have to move with the sheared flow along y",
                    cfg.shear_rate
                ),
                "set shear_rate: 0.0 and shear the fluid with the moving plates themselves \
                 (Slit(normal: Z, bottom_velocity: ..., top_velocity: ...): vx varies along z) \
                 or drive it with body_force along x or y",
            );
        }
        if cfg.shear_rate != 0.0 {
            return err(
                "walls",
                format!(
                    "walls cannot be combined with Lees-Edwards shear (shear_rate = {})",
                    cfg.shear_rate
                ),
                "set shear_rate: 0.0 and shear the fluid with moving plates \
                 (Slit(bottom_velocity: ..., top_velocity: ...)) or drive it with body_force",
            );
        }
        match *self {
            WallsConfig::Slit {
                height,
                normal,
                bottom_velocity,
                top_velocity,
                ..
            } => {
                check_slit(cfg, height, normal)?;
                check_speed(cfg, "walls.bottom_velocity", bottom_velocity)?;
                check_speed(cfg, "walls.top_velocity", top_velocity)?;
            }
            WallsConfig::Pipe {
                radius, velocity, ..
            } => {
                check_pipe(cfg, radius)?;
                check_speed(cfg, "walls.velocity", velocity)?;
            }
            WallsConfig::Sphere { radius, .. } => check_round(cfg, radius, 3, 1.0)?,
            WallsConfig::SphereObstacle { radius, .. } => check_round(cfg, radius, 3, 2.0)?,
            WallsConfig::CylinderObstacle { radius, .. } => check_round(cfg, radius, 2, 2.0)?,
            WallsConfig::PlanarPore { height, length, .. } => check_pore(cfg, height, length)?,
            WallsConfig::CosineChannel {
                height, amplitude, ..
            } => check_cosine(cfg, height, amplitude, false)?,
            WallsConfig::CosineExpansion {
                height, amplitude, ..
            } => check_cosine(cfg, height, amplitude, true)?,
            WallsConfig::DistanceField {
                ref file,
                spacing,
                kind,
                ref loaded,
                ..
            } => {
                loaded.get(file, spacing, kind, cfg.cells)?;
            }
        }
        check_body_force(cfg, self)?;
        check_solute_wall(self.solute_wall())
    }
}

fn check_slit(cfg: &Config, height: Option<f64>, normal: SlitNormal) -> Result<(), ConfigError> {
    let a = normal.axis();
    let (axis, len) = (normal.name(), cfg.cells[a] as f64);
    let h = height.unwrap_or(len - 1.0);
    if !h.is_finite() || h < MIN_CHANNEL_CELLS {
        return err(
            "walls.height",
            format!(
                "a slit {h} cells high is thinner than {MIN_CHANNEL_CELLS} cells (cells.{a} = {len})"
            ),
            &format!(
                "make the slit at least 4 cells high: cells.{a} ≥ 5 (the default height is \
                 cells.{a} − 1)"
            ),
        );
    }
    if h > len - 1.0 {
        return err(
            "walls.height",
            format!(
                "a slit {h} cells high needs a box of at least {} cells in {axis} (cells.{a} = {len})",
                h + 1.0
            ),
            &format!(
                "leave one cell layer more than the slit height (the shifted grid reaches half a \
                 cell beyond each plate): set cells.{a} ≥ height + 1, or leave height unset \
                 (cells.{a} − 1)"
            ),
        );
    }
    Ok(())
}

fn check_pipe(cfg: &Config, radius: f64) -> Result<(), ConfigError> {
    let room = cfg.cells[1].min(cfg.cells[2]) as f64 - 1.0;
    if !radius.is_finite() || 2.0 * radius < MIN_CHANNEL_CELLS {
        return err(
            "walls.radius",
            format!("a pipe of radius {radius} is thinner than {MIN_CHANNEL_CELLS} cells across"),
            "give the pipe a radius of at least 2 cells",
        );
    }
    if 2.0 * radius > room {
        return err(
            "walls.radius",
            format!(
                "a pipe of diameter {} is wider than the box allows ({room} cells: cells.1 and \
                 cells.2 less one)",
                2.0 * radius
            ),
            "use a radius ≤ (min(cells.1, cells.2) − 1) / 2, or a larger box (the shifted grid \
             reaches half a cell beyond the wall)",
        );
    }
    Ok(())
}

/// A sphere (cylinder along z: `axes` = 2, x and y) of `radius` centred in the box: at least
/// 4 cells across, and `room` cells between it and the box faces along its first `axes` axes
/// (inside: the shifted grid's layer; an obstacle: one cell, so that no step or collision
/// cell reaches a periodic image of it).
fn check_round(cfg: &Config, radius: f64, axes: usize, room: f64) -> Result<(), ConfigError> {
    let short = cfg.cells[..axes].iter().copied().min().unwrap_or(0) as f64;
    let what = if axes == 3 { "sphere" } else { "cylinder" };
    if !radius.is_finite() || 2.0 * radius < MIN_CHANNEL_CELLS {
        return err(
            "walls.radius",
            format!("a {what} of radius {radius} is smaller than {MIN_CHANNEL_CELLS} cells across"),
            &format!("give the {what} a radius of at least 2 cells"),
        );
    }
    if 2.0 * radius > short - room {
        return err(
            "walls.radius",
            format!(
                "a {what} of diameter {} leaves less than {room} cell(s) to the box faces (the \
                 shortest edge across it is {short} cells)",
                2.0 * radius
            ),
            &format!(
                "use a radius ≤ (shortest edge − {room}) / 2 = {}, or a larger box",
                0.5 * (short - room)
            ),
        );
    }
    Ok(())
}

/// A pore at least [`MIN_CHANNEL_CELLS`] high with a plate at least a cell thick across the
/// periodic y boundary, and at least a cell of reservoir along x: a step's path or a shifted
/// collision cell then meets no other period's block than the formulas take.
fn check_pore(cfg: &Config, height: f64, length: f64) -> Result<(), ConfigError> {
    let (lx, ly) = (cfg.cells[0] as f64, cfg.cells[1] as f64);
    if !height.is_finite() || height < MIN_CHANNEL_CELLS {
        return err(
            "walls.height",
            format!("a pore {height} cells high is thinner than {MIN_CHANNEL_CELLS} cells"),
            "make the pore at least 4 cells high",
        );
    }
    if height > ly - 1.0 {
        return err(
            "walls.height",
            format!(
                "a pore {height} cells high leaves less than a cell of solid in a box {ly} \
                 cells high (cells.1)"
            ),
            &format!("use height ≤ cells.1 − 1 = {}, or a taller box", ly - 1.0),
        );
    }
    if !length.is_finite() || length <= 0.0 {
        return err(
            "walls.length",
            format!("a pore's length must be finite and > 0 (got {length})"),
            "give the pore's length along x, e.g. length: 8.0",
        );
    }
    if length > lx - 1.0 {
        return err(
            "walls.length",
            format!(
                "a pore {length} cells long leaves less than a cell of reservoir in a box {lx} \
                 cells long (cells.0)"
            ),
            &format!(
                "use length ≤ cells.0 − 1 = {} (for a pore through the whole box use Slit)",
                lx - 1.0
            ),
        );
    }
    Ok(())
}

/// Cosine walls: a mean width of at least [`MIN_CHANNEL_CELLS`], a non-negative amplitude,
/// walls at least a cell apart where an expansion is narrowest, and half a cell between the
/// walls' farthest reach and the box faces (the shifted grid's layer).
fn check_cosine(
    cfg: &Config,
    height: f64,
    amplitude: f64,
    expansion: bool,
) -> Result<(), ConfigError> {
    let ly = cfg.cells[1] as f64;
    if !height.is_finite() || height < MIN_CHANNEL_CELLS {
        return err(
            "walls.height",
            format!("cosine walls {height} cells apart are closer than {MIN_CHANNEL_CELLS} cells"),
            "make the channel at least 4 cells high",
        );
    }
    if !amplitude.is_finite() || amplitude < 0.0 {
        return err(
            "walls.amplitude",
            format!("must be finite and ≥ 0 (got {amplitude})"),
            "give the walls' amplitude in cells, e.g. amplitude: 1.0 (0: a straight slit)",
        );
    }
    if expansion && height - 2.0 * amplitude < 1.0 {
        return err(
            "walls.amplitude",
            format!(
                "walls {height} cells apart waving against each other by {amplitude} come \
                 within {} cells of each other (less than a cell)",
                height - 2.0 * amplitude
            ),
            &format!(
                "keep amplitude ≤ (height − 1) / 2 = {}",
                0.5 * (height - 1.0)
            ),
        );
    }
    if height + 2.0 * amplitude > ly - 1.0 {
        return err(
            "walls.amplitude",
            format!(
                "walls reaching {} cells across (height + 2 amplitude) leave less than half a \
                 cell to the box faces (cells.1 = {ly})",
                height + 2.0 * amplitude
            ),
            "keep height + 2 amplitude ≤ cells.1 − 1 (the shifted grid reaches half a cell \
             beyond the walls), or a taller box",
        );
    }
    Ok(())
}

fn check_speed(cfg: &Config, field: &str, u: f64) -> Result<(), ConfigError> {
    if !u.is_finite() {
        return err(
            field,
            format!("must be finite (got {u})"),
            "give a wall speed such as 0.1",
        );
    }
    if u.abs() * cfg.time_step > 0.5 {
        return err(
            field,
            format!(
                "|u|·h = {:.3} cells per step is too fast for the grid",
                u.abs() * cfg.time_step
            ),
            "keep |wall velocity| · time_step below 0.5",
        );
    }
    Ok(())
}

/// The time of impact is exact for paths that are straight across the channel: a body force
/// may only push along the walls (around a spherical obstacle in any direction; in a sphere
/// in none).
fn check_body_force(cfg: &Config, walls: &WallsConfig) -> Result<(), ConfigError> {
    let (closed, along): (&[usize], &str) = match walls {
        WallsConfig::Slit {
            normal: SlitNormal::Y,
            ..
        } => (&[1], "body_force: (fx, 0.0, fz) between plates normal to y"),
        WallsConfig::Slit {
            normal: SlitNormal::Z,
            ..
        } => (&[2], "body_force: (fx, fy, 0.0) between plates normal to z"),
        WallsConfig::Pipe { .. } => (&[1, 2], "body_force: (fx, 0.0, 0.0) in a pipe"),
        // a closed container: a body force would only build up a pressure gradient, and the
        // paths it bends would meet the curved wall away from the straight chord's time
        WallsConfig::Sphere { .. } => (&[0, 1, 2], "body_force: (0.0, 0.0, 0.0) in a sphere"),
        // around an obstacle, through a pore or a geometry from data any direction: the chord's
        // time of impact misses the bent path by at most |a| h² / 2 (kept out of the solid by
        // keep_inside); between cosine walls along them (their slope sees the same bend along x)
        WallsConfig::SphereObstacle { .. }
        | WallsConfig::CylinderObstacle { .. }
        | WallsConfig::PlanarPore { .. }
        | WallsConfig::DistanceField { .. } => (&[], ""),
        WallsConfig::CosineChannel { .. } | WallsConfig::CosineExpansion { .. } => {
            (&[1], "body_force: (fx, 0.0, fz) between cosine walls")
        }
    };
    for &k in closed {
        if cfg.body_force[k] != 0.0 {
            return err(
                &format!("body_force.{k}"),
                format!(
                    "a body force across the walls ({}) is not supported: bounce-back is exact \
                     for motion that is straight across the channel",
                    cfg.body_force[k]
                ),
                &format!("push along the walls only ({along})"),
            );
        }
    }
    Ok(())
}

fn check_solute_wall(w: SoluteWall) -> Result<(), ConfigError> {
    for (name, v) in [("epsilon", w.epsilon), ("sigma", w.sigma)] {
        if !(v.is_finite() && v > 0.0) {
            return err(
                &format!("walls.solutes.{name}"),
                format!("must be finite and > 0 (got {v})"),
                "give the solutes' WCA wall potential, e.g. solutes: (epsilon: 1.0, sigma: 1.0)",
            );
        }
    }
    Ok(())
}

/// The WCA parameters of the walls for solutes (`walls: Slit(..., solutes: (epsilon: 1.0,
/// sigma: 1.0))`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SoluteWall {
    pub epsilon: f64,
    pub sigma: f64,
}

impl Default for SoluteWall {
    fn default() -> Self {
        SoluteWall {
            epsilon: 1.0,
            sigma: 1.0,
        }
    }
}

impl SoluteWall {
    /// The cutoff 2^(1/6) σ.
    pub fn cutoff(&self) -> f64 {
        2f64.powf(1.0 / 6.0) * self.sigma
    }
}
