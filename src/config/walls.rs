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
        /// The `.npy` file (relative to the working directory; checkpoints store its absolute
        /// path, so a run resumes from any directory).
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

/// `file` as an absolute path against the working directory (itself where that fails, as for
/// an empty path, which the config's validation refuses).
pub fn absolute_file(file: &std::path::Path) -> PathBuf {
    std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf())
}

/// The fewest cells across a channel (slit height, pipe diameter).
pub const MIN_CHANNEL_CELLS: f64 = 4.0;

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

    /// The same walls with a data file named by its absolute path, resolved against the
    /// working directory as the run reads it: a checkpoint names the file so, and a resume
    /// from another directory reads the same file.
    pub fn with_absolute_file(&self) -> WallsConfig {
        let mut w = self.clone();
        if let WallsConfig::DistanceField { file, .. } = &mut w {
            *file = absolute_file(file);
        }
        w
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
