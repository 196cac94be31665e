//! What a run between walls reports (`summary.json` → `walls`, `profile.csv`): the time-averaged
//! velocity profile across the channel fitted with the flows of [`crate::physics::theory`]
//! (bin averages against the bin-averaged model, `physics::walls::profile`), the viscosity
//! from the fitted curvature against the SRD theory, the slip at the walls, and the force the
//! fluid exerts on each wall against the total body force.

use crate::physics::theory;
use crate::physics::walls::profile::{bin_moments, fit_profile, ProfileFit};
use crate::physics::walls::{Shape, SlitNormal, WallShape};
use crate::report::ValueWithError;
use crate::solvent::Solvent;
use crate::walls_flow::{flow_through, obstacle_drag, FlowThrough, ObstacleDrag};
use serde::Serialize;

/// `summary.json` → `walls`.
#[derive(Clone, Debug, Serialize)]
pub struct WallsSummary {
    /// "slit" (plates normal to y), "slit normal to z", "pipe", a sphere's or cylinder's
    /// name, "planar pore", "cosine channel" or "cosine expansion".
    pub geometry: &'static str,
    /// Slit height, pipe or sphere radius, pore height or the cosine walls' mean width
    /// (cells).
    pub channel: f64,
    /// Fluid particles per unit volume of the fluid region.
    pub density: f64,
    /// Body force density n f along x.
    pub force_density: f64,
    /// The fitted profile: vx = c0 + c1 y + c2 y² (slit; a line without body force), or
    /// c0 + c2 r² (pipe).
    pub fit: Option<ProfileFit>,
    /// η from the fitted curvature (body force along x only).
    pub viscosity_from_curvature: Option<f64>,
    /// η from the wall shear stress and the fitted slope (a slit between moving plates
    /// without body force: Couette flow).
    pub viscosity_from_wall_stress: Option<f64>,
    /// The SRD theory η (`theory::srd_viscosity`).
    pub viscosity_theory: f64,
    /// Fitted velocity on the channel's centre plane or axis.
    pub centre_velocity: Option<f64>,
    /// Fitted velocity at each wall minus the wall's velocity (slit: bottom, top; pipe: one).
    pub slip_velocity: Vec<f64>,
    /// The largest |slip| over |centre velocity − wall velocity| (Poiseuille flow).
    pub slip_fraction: Option<f64>,
    /// Mean force of the fluid on each wall surface (x, y, z), with block-average errors.
    pub wall_force: Vec<[ValueWithError; 3]>,
    /// N f: the total body force on the fluid (steady state: the walls take all of it).
    pub body_force_total: [f64; 3],
    /// The time-averaged flow along x: flow rate, superficial velocity, porosity.
    pub flow: Option<FlowThrough>,
    /// Around a sphere or a cylinder across the flow: its drag against the periodic-array
    /// theory.
    pub drag: Option<ObstacleDrag>,
}

/// The shape's name and channel size.
fn describe(shape: &Shape) -> (&'static str, f64) {
    match shape {
        Shape::Slit(s) => match s.normal {
            SlitNormal::Y => ("slit", s.height()),
            SlitNormal::Z => ("slit normal to z", s.height()),
        },
        Shape::Pipe(p) => ("pipe", p.radius),
        Shape::Sphere(s) => match (s.fluid_inside, s.along_z) {
            (true, false) => ("sphere", s.radius),
            (true, true) => ("cylinder along z", s.radius),
            (false, false) => ("spherical obstacle", s.radius),
            (false, true) => ("cylinder obstacle along z", s.radius),
        },
        Shape::PlanarPore(p) => ("planar pore", 2.0 * p.half_height),
        Shape::Cosine(c) if c.expansion => ("cosine expansion", 2.0 * c.half_height),
        Shape::Cosine(c) => ("cosine channel", 2.0 * c.half_height),
        // no channel size: the grid spacing instead
        Shape::Field(f) => ("distance field", f.spacing),
    }
}

/// Velocities of the walls, per surface (x components).
fn wall_speeds(shape: &Shape) -> Vec<f64> {
    match shape {
        Shape::Slit(s) => s.velocity.to_vec(),
        Shape::Pipe(p) => vec![p.velocity],
        Shape::Sphere(_) => vec![0.0],
        Shape::PlanarPore(_) | Shape::Cosine(_) | Shape::Field(_) => vec![0.0, 0.0],
    }
}

/// Number density and force density n f_x of the fluid of `solvent`.
fn densities(solvent: &Solvent, shape: &Shape) -> (f64, f64) {
    let phys = solvent.physics();
    let n = solvent.n_fluid() as f64 / shape.fluid_volume(phys.length);
    (n, n * phys.acceleration[0] * phys.mass)
}

/// The theory viscosity of the run's collision rule (kinetic + collisional).
fn theory_viscosity(solvent: &Solvent) -> f64 {
    let (kinetic, collisional) = theory::rule_viscosity(solvent.config());
    kinetic + collisional
}

/// The summary of a run between walls (None without walls or before any sample).
pub fn summarize(solvent: &Solvent) -> Option<WallsSummary> {
    let walls = solvent.physics().walls.clone()?;
    let shape = walls.shape;
    let (geometry, channel) = describe(&shape);
    let (density, force_density) = densities(solvent, &shape);
    let stats = solvent.stats();
    let linear = force_density == 0.0 && matches!(shape, Shape::Slit(_));
    let fit = (stats.profile_samples > 0)
        .then(|| fit_profile(&shape, &stats.profile(), linear))
        .flatten();
    let speeds = wall_speeds(&shape);
    let at_walls: Vec<f64> = match &shape {
        Shape::Slit(s) => vec![s.bottom, s.top],
        Shape::Pipe(p) => vec![p.radius],
        Shape::Sphere(_) | Shape::PlanarPore(_) | Shape::Cosine(_) | Shape::Field(_) => Vec::new(),
    };
    let centre = match &shape {
        Shape::Slit(s) => 0.5 * (s.bottom + s.top),
        Shape::Pipe(_)
        | Shape::Sphere(_)
        | Shape::PlanarPore(_)
        | Shape::Cosine(_)
        | Shape::Field(_) => 0.0,
    };
    let slip_velocity: Vec<f64> = fit.map_or(Vec::new(), |f| {
        at_walls
            .iter()
            .zip(&speeds)
            .map(|(&x, u)| f.at(x) - u)
            .collect()
    });
    let centre_velocity = fit.map(|f| f.at(centre));
    let driven = force_density != 0.0;
    let slip_fraction = match (driven, centre_velocity) {
        (true, Some(vc)) => {
            let mean_wall = speeds.iter().sum::<f64>() / speeds.len() as f64;
            let worst = slip_velocity.iter().fold(0.0f64, |a, s| a.max(s.abs()));
            Some(worst / (vc - mean_wall).abs())
        }
        _ => None,
    };
    let viscosity_from_curvature = match (driven, fit, &shape) {
        (true, Some(f), Shape::Slit(_)) => {
            Some(theory::slit_viscosity_from_curvature(f.c2, force_density))
        }
        (true, Some(f), Shape::Pipe(_)) => {
            Some(theory::pipe_viscosity_from_curvature(f.c2, force_density))
        }
        (
            true,
            Some(_),
            Shape::Sphere(_) | Shape::PlanarPore(_) | Shape::Cosine(_) | Shape::Field(_),
        )
        | (false, _, _)
        | (true, None, _) => None,
    };
    let wall_force: Vec<[ValueWithError; 3]> = stats
        .wall_force
        .chunks(3)
        .take(speeds.len())
        .map(|c| {
            std::array::from_fn(|k| ValueWithError {
                value: c[k].mean().unwrap_or(0.0),
                error: c[k].std_error(),
            })
        })
        .collect();
    let viscosity_from_wall_stress = couette_viscosity(solvent, &shape, fit, &wall_force);
    let phys = solvent.physics();
    let n = solvent.n_fluid() as f64;
    let flow = (stats.profile_samples > 0)
        .then(|| flow_through(phys, &shape, &stats.profile()))
        .flatten();
    let viscosity_theory = theory_viscosity(solvent);
    let drag = match (&flow, wall_force.first()) {
        (Some(f), Some(force)) => obstacle_drag(phys, &shape, viscosity_theory, force[0].value, f),
        _ => None,
    };
    Some(WallsSummary {
        geometry,
        channel,
        density,
        force_density,
        fit,
        viscosity_from_curvature,
        viscosity_from_wall_stress,
        viscosity_theory,
        centre_velocity,
        slip_velocity,
        slip_fraction,
        wall_force,
        body_force_total: phys.acceleration.map(|a| a * phys.mass * n),
        flow,
        drag,
    })
}

/// Couette flow in a slit (moving plates, no body force): η = τ / (dv/dy) (dv/dz between
/// plates normal to z) with the wall shear stress τ = (F_bottom,x − F_top,x) / (2 A), A the
/// plate area, and the fitted slope.
fn couette_viscosity(
    solvent: &Solvent,
    shape: &Shape,
    fit: Option<ProfileFit>,
    wall_force: &[[ValueWithError; 3]],
) -> Option<f64> {
    let Shape::Slit(s) = shape else { return None };
    let phys = solvent.physics();
    let f = fit?;
    if phys.acceleration[0] != 0.0 || s.velocity[0] == s.velocity[1] || wall_force.len() < 2 {
        return None;
    }
    let area = match s.normal {
        SlitNormal::Y => phys.length[0] * phys.length[2],
        SlitNormal::Z => phys.length[0] * phys.length[1],
    };
    let tau = (wall_force[0][0].value - wall_force[1][0].value) / (2.0 * area);
    Some(tau / f.c1)
}

/// One row of `profile.csv` between walls: the mean coordinate of the bin's fluid part, the
/// measured mean vx, the theory profile.
pub type ProfileRow = (f64, f64, f64);

/// Rows of `profile.csv` between walls: the mean coordinate of each bin's fluid part (y or z
/// across a slit, r in a pipe), the measured mean vx and the theory profile with the SRD viscosity; and the
/// name of the coordinate.
pub fn profile_rows(solvent: &Solvent) -> Option<(&'static str, Vec<ProfileRow>)> {
    let shape = solvent.physics().walls.clone()?.shape;
    let (_, force_density) = densities(solvent, &shape);
    let eta = theory_viscosity(solvent);
    let prof = solvent.stats().profile();
    let rows = prof
        .iter()
        .enumerate()
        .filter_map(|(i, &v)| {
            let m = bin_moments(&shape, i)?;
            let th = match &shape {
                Shape::Slit(s) => theory::slit_velocity(
                    m.mean,
                    s.bottom,
                    s.top,
                    s.velocity[0],
                    s.velocity[1],
                    force_density,
                    eta,
                ),
                Shape::Pipe(p) => {
                    theory::pipe_velocity(m.mean, p.radius, p.velocity, force_density, eta)
                }
                Shape::Sphere(_) | Shape::PlanarPore(_) | Shape::Cosine(_) | Shape::Field(_) => {
                    return None
                }
            };
            Some((m.mean, v, th))
        })
        .collect();
    let name = match &shape {
        Shape::Slit(s) => s.normal.name(),
        Shape::Pipe(_) => "r",
        Shape::Sphere(_) | Shape::PlanarPore(_) | Shape::Cosine(_) | Shape::Field(_) => "y",
    };
    Some((name, rows))
}

/// `profile.csv` and `profile.svg` between walls (`dir` the output directory).
pub fn write_profile(
    dir: &std::path::Path,
    coordinate: &str,
    rows: &[ProfileRow],
    samples: u64,
) -> crate::error::Result<()> {
    let mut text = format!("{coordinate},vx_measured,vx_theory\n");
    for (x, v, th) in rows {
        text += &format!("{x},{v:e},{th:e}\n");
    }
    let p = dir.join(crate::report::PROFILE_CSV);
    std::fs::write(&p, text).map_err(|e| crate::error::MpcError::io(&p, e))?;
    plot_profile(
        &dir.join(crate::report::PROFILE_SVG),
        coordinate,
        rows,
        samples,
    )
}

/// `profile.svg` between walls: measured bin averages and the theory profile.
pub fn plot_profile(
    svg: &std::path::Path,
    coordinate: &str,
    rows: &[ProfileRow],
    samples: u64,
) -> crate::error::Result<()> {
    use plotters::prelude::*;
    let (lo, hi) = rows
        .iter()
        .flat_map(|r| [r.1, r.2])
        .fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
    let (lo, hi) = if lo <= hi { (lo, hi) } else { (0.0, 1.0) };
    let pad = 0.1 * (hi - lo).max(1e-3);
    let x_max = rows.iter().fold(1.0f64, |a, r| a.max(r.0 + 0.5));
    let draw = || -> std::result::Result<(), Box<dyn std::error::Error>> {
        let root = SVGBackend::new(svg, (720, 480)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("vx({coordinate}) between walls, {samples} samples"),
                ("sans-serif", 20),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..x_max, (lo - pad)..(hi + pad))?;
        chart
            .configure_mesh()
            .x_desc(format!("{coordinate} [a]"))
            .y_desc("<vx>")
            .draw()?;
        chart
            .draw_series(LineSeries::new(
                rows.iter().map(|r| (r.0, r.2)),
                RED.stroke_width(2),
            ))?
            .label("theory (SRD viscosity, no slip)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED));
        chart
            .draw_series(
                rows.iter()
                    .map(|r| Circle::new((r.0, r.1), 4, BLUE.filled())),
            )?
            .label("measured")
            .legend(|(x, y)| Circle::new((x + 10, y), 4, BLUE.filled()));
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE)
            .draw()?;
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| crate::error::MpcError::Io {
        path: svg.display().to_string(),
        source: std::io::Error::other(e.to_string()),
    })
}
