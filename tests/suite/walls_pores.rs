//! The planar pore (`PlanarPore`: a slit of finite length between two reservoirs) and the cosine
//! walls (`CosineChannel`, a wavy channel; `CosineExpansion`, an expansion-contraction): no
//! particle ever enters the solid under SRD and MPC-AT+a, the fluid's momentum changes by the
//! body force less what it gave the walls, plane Poiseuille flow in the pore's middle, the
//! flow rate between cosine walls against lubrication theory, the GPUs follow the CPU, and bad
//! fields are refused by name; on every platform (tests/suite/common/platform.rs).

use crate::common;

use common::shaped;
use common::Platform;
use mpcbox::config::Config;
use mpcbox::physics::walls::profile::least_squares;
use mpcbox::physics::walls::theory::{expansion_mean_inverse_cube_width, lubrication_flow_rate};
use mpcbox::physics::walls::Shape;
use mpcbox::walls_report::summarize;
use mpcbox::Solvent;

common::backend_tests!(
    [cpu gpu multi_gpu slabs cpu_slabs]
    no_particle_ever_enters_a_pore_or_a_cosine_wall,
    pores_and_cosine_walls_keep_the_momentum_balance,
);
common::backend_tests!([gpu multi_gpu slabs cpu_slabs] pores_and_cosine_walls_follow_the_cpu_trajectory);
// The statistical flow tests on one layout per device kind (the slabs follow the CPU step by
// step above).
common::backend_tests!(
    [cpu gpu multi_gpu]
    poiseuille_flow_in_the_middle_of_a_pore,
    flow_rate_between_cosine_walls_follows_lubrication_theory,
);

/// SRD with MBS and MPC-AT+a: the plain rule and the one whose virtual particles are placed in
/// the solid part of a cut cell one by one.
const RULES: [(&str, &str); 2] = [
    ("Srd(angle_deg: 130.0)", "Mbs"),
    ("MpcAt(angular_momentum: true)", "None"),
];

/// The set-ups: (what, walls, extra fields), in a 16 × 12 × 4 box.
const CASES: [(&str, &str, &str); 6] = [
    (
        "pore, no slip, oblique force",
        "PlanarPore(height: 6.0, length: 8.0)",
        ", body_force: (0.05, 0.02, 0.01)",
    ),
    (
        "pore, slip, h = 0.2",
        "PlanarPore(height: 5.0, length: 11.5, boundary: Slip)",
        ", body_force: (0.05, 0.0, 0.0), time_step: 0.2",
    ),
    (
        "wavy channel, no slip",
        "CosineChannel(height: 6.0, amplitude: 1.5)",
        ", body_force: (0.05, 0.0, 0.02)",
    ),
    (
        "wavy channel, slip, h = 0.2",
        "CosineChannel(height: 5.0, amplitude: 2.0, boundary: Slip)",
        ", body_force: (0.05, 0.0, 0.0), time_step: 0.2",
    ),
    (
        "expansion, no slip",
        "CosineExpansion(height: 6.0, amplitude: 2.0)",
        ", body_force: (0.05, 0.0, 0.0)",
    ),
    (
        "expansion, slip, kT 2",
        "CosineExpansion(height: 7.0, amplitude: 1.5, boundary: Slip)",
        ", body_force: (0.03, 0.0, 0.0), kT: 2.0",
    ),
];

/// No fluid particle is ever inside the solid (checked after every step of 600, with the grid
/// shift, under both rules) and none is lost.
fn no_particle_ever_enters_a_pore_or_a_cosine_wall(p: Platform) {
    for rule in RULES {
        for (what, walls, extra) in CASES {
            let cfg = shaped([16, 12, 4], walls, rule, &format!("{extra}, seed: 4"));
            let Some(mut s) = p.solvent(&cfg) else {
                return;
            };
            common::assert_never_in_solid(&mut s, 600, &format!("{p}, {what}, {}", rule.0));
        }
    }
}

/// Flow through a pore and between cosine walls with solutes in the collision: every step the
/// momentum of fluid and solutes changes by the body force less what they gave the walls.
fn pores_and_cosine_walls_keep_the_momentum_balance(p: Platform) {
    for rule in RULES {
        for walls in [
            "PlanarPore(height: 6.0, length: 8.0)",
            "CosineChannel(height: 6.0, amplitude: 1.5)",
            "CosineExpansion(height: 6.0, amplitude: 2.0)",
        ] {
            let cfg = shaped(
                [16, 12, 4],
                walls,
                rule,
                ", body_force: (0.03, 0.0, 0.01), seed: 5",
            );
            let Some(mut s) = p.solvent(&cfg) else {
                return;
            };
            let shape = s.physics().walls.clone().expect("walls").shape;
            let (pos, mut vel, mass) = common::solutes_in_fluid(
                &shape,
                (0..16).map(|i| [1.0 * i as f64 + 0.3, 1.1 + 0.65 * i as f64, 2.0]),
            );
            let mut given = 0.0;
            for step in 0..15 {
                let what = format!("{p}, {walls}, {}, step {step}", rule.0);
                let wall =
                    common::step_with_balanced_momentum(&mut s, &pos, &mut vel, &mass, &what);
                given += wall.iter().map(|w| w.abs()).sum::<f64>();
            }
            assert!(given > 0.0, "{p}, {walls}, {}: no wall contact", rule.0);
        }
    }
}

/// Every GPU count and slab layout follows the CPU trajectory to rounding (the same bounces,
/// virtual particles and momentum given to the walls), under SRD + MBS and MPC-AT+a: the
/// cosine is the same polynomial on both sides.
fn pores_and_cosine_walls_follow_the_cpu_trajectory(p: Platform) {
    for rule in RULES {
        for walls in [
            "PlanarPore(height: 12.0, length: 10.0)",
            "CosineChannel(height: 12.0, amplitude: 2.5)",
            "CosineExpansion(height: 12.0, amplitude: 3.0)",
        ] {
            let cfg = shaped(
                [16, 24, 8],
                walls,
                rule,
                ", body_force: (0.02, 0.0, 0.01), seed: 6",
            );
            common::assert_walls_follow_the_cpu(p, &cfg, 8, &format!("{walls}, {}", rule.0));
        }
    }
}

/// Runs `s` for `eq` steps, then `steps` more, calling `sample` with the fluid state every 5th.
fn sampled(
    s: &mut Solvent,
    eq: u64,
    steps: u64,
    mut sample: impl FnMut(&mpcbox::state::FluidState),
) {
    for _ in 0..eq {
        s.step().unwrap();
    }
    for step in 0..steps {
        s.step().unwrap();
        if step % 5 == 4 {
            sample(&s.fluid_state().unwrap());
        }
    }
}

/// The theory viscosity of a config's rule (kinetic + collisional).
fn theory_viscosity(cfg: &Config) -> f64 {
    let (kinetic, collisional) = mpcbox::physics::theory::rule_viscosity(cfg);
    kinetic + collisional
}

/// Plane Poiseuille flow in the middle of a pore 11 cells high and 20 long between reservoirs 8
/// long (28 × 16 × 4 box, SRD + MBS, body force 0.02): vx(y) over the pore's middle 8 cells (6
/// from its ends, beyond the entrance length of about 0.6 H at this Reynolds number) is
/// a parabola whose curvature gives the viscosity. The fluid there is driven by the body force
/// and by the pressure gradient the pore builds up (the reservoirs push fluid into it: the
/// pressure falls along the pore), measured from the density, p = n kT (SRD's ideal gas), so
/// η = −(n f − kT dn/dx) / (2 c2). Within 3% of the theory (the slit test's tolerance; the
/// curvature of 9 bins, each the mean of some 320 particles over 1200 samples, carries about 1%
/// statistical error here).
fn poiseuille_flow_in_the_middle_of_a_pore(p: Platform) {
    let (height, length, f) = (11.0, 20.0, 0.02);
    let mut cfg = shaped(
        [28, 16, 4],
        &format!("PlanarPore(height: {height}, length: {length})"),
        RULES[0],
        &format!(", body_force: ({f}, 0.0, 0.0), seed: 9"),
    );
    cfg.output.equilibration_steps = 1000;
    cfg.output.sample_interval = 5;
    let Some(mut s) = p.solvent(&cfg) else {
        return;
    };
    let Shape::PlanarPore(pore) = s.physics().walls.clone().expect("walls").shape else {
        unreachable!()
    };
    let (xc, yb) = (pore.xc, pore.yc - pore.half_height);
    let half = 4.0; // the middle 8 cells of the 20
    let bins = height as usize;
    let mut vsum = vec![0.0; bins];
    let mut count = vec![0.0; bins];
    let slices = (2.0 * half) as usize;
    let mut along = vec![0.0; slices];
    let mut samples = 0.0;
    sampled(&mut s, 1000, 6000, |st| {
        samples += 1.0;
        for i in 0..st.len() {
            let r = st.position(i).map(|c| c as f64);
            let dx = r[0] - xc;
            let y = r[1] - yb;
            if dx.abs() >= half || !(0.0..height).contains(&y) {
                continue;
            }
            let b = (y as usize).min(bins - 1);
            vsum[b] += st.vel[0][i];
            count[b] += 1.0;
            along[((dx + half) as usize).min(slices - 1)] += 1.0;
        }
    });
    let lz = cfg.cells[2] as f64;
    // bins of one cell from the lower plate, leaving out the layer next to each plate
    let rows: Vec<_> = (1..bins - 1)
        .map(|b| {
            let (a, c) = (yb + b as f64, yb + b as f64 + 1.0);
            let mean = 0.5 * (a + c);
            let mean_square = (a * a + a * c + c * c) / 3.0;
            ([1.0, mean, mean_square], vsum[b] / count[b], count[b])
        })
        .collect();
    let c = least_squares(&rows).expect("a parabola");
    let residual = (rows
        .iter()
        .map(|(x, v, _)| (v - (c[0] + c[1] * x[1] + c[2] * x[2])).powi(2))
        .sum::<f64>()
        / rows.len() as f64)
        .sqrt();
    // the density along the middle: its slope is the pressure gradient over kT
    let density: Vec<_> = along
        .iter()
        .enumerate()
        .map(|(k, &n)| {
            let x = -half + k as f64 + 0.5;
            ([1.0, x], n / (samples * height * lz), 1.0)
        })
        .collect();
    let d = least_squares(&density).expect("a line");
    let n_mid = along.iter().sum::<f64>() / (samples * 2.0 * half * height * lz);
    let kt = s.stats().temperature.mean().unwrap();
    let drive = n_mid * f - kt * d[1];
    let eta = -drive / (2.0 * c[2]);
    let theory = theory_viscosity(&cfg);
    let centre = -c[1] / (2.0 * c[2]);
    let vc = c[0] + c[1] * centre + c[2] * centre * centre;
    eprintln!(
        "{p}: pore Poiseuille: eta {eta:.4} (theory {theory:.4}, {:+.2}%), centre velocity {vc:.4} \
         at y {centre:.3} (pore mid-plane {:.3}), fit rms {residual:.1e}; density {n_mid:.4}, \
         dn/dx {:.5} (pressure drive {:.1}% of the body force); kT {kt:.4}",
        100.0 * (eta / theory - 1.0),
        pore.yc,
        d[1],
        100.0 * (-kt * d[1]) / (n_mid * f)
    );
    assert!(
        (eta / theory - 1.0).abs() < 0.03,
        "{p}: eta {eta} vs {theory}"
    );
    // a parabola centred in the pore
    assert!((centre - pore.yc).abs() < 0.25, "{p}: vertex at {centre}");
    assert!(residual < 0.01 * vc, "{p}: rms {residual} against {vc}");
    // the reservoirs push: the pressure falls along the pore
    assert!(d[1] < 0.0, "{p}: dn/dx {}", d[1]);
    assert!((kt - 1.0).abs() < 0.01, "{p}: kT {kt}");
    assert_walls_take_the_body_force(p, &s, "planar pore");
}

/// In steady flow the walls (both surfaces) take the whole body force N f along x: the summary's
/// mean force on them within 4 standard errors, and none across.
fn assert_walls_take_the_body_force(p: Platform, s: &Solvent, geometry: &str) {
    let w = summarize(s).expect("a walls summary");
    assert_eq!(w.geometry, geometry);
    let along: f64 = w.wall_force.iter().map(|f| f[0].value).sum();
    let across: f64 = w.wall_force.iter().map(|f| f[1].value).sum();
    let err = |k: usize| {
        w.wall_force
            .iter()
            .map(|f| f[k].error.unwrap().powi(2))
            .sum::<f64>()
            .sqrt()
    };
    let body = w.body_force_total[0];
    eprintln!(
        "{p}: {geometry}: wall force {along:.3} ± {:.3} against the body force {body:.3}, \
         across {across:.3} ± {:.3}",
        err(0),
        err(1)
    );
    assert!(
        (along - body).abs() < 4.0 * err(0) && err(0) < 0.05 * body,
        "{p}: {geometry}: wall force {along} ± {}, body force {body}",
        err(0)
    );
    assert!(
        across.abs() < 4.0 * err(1),
        "{p}: {geometry}: across {across}"
    );
}

/// The mean flow rate per unit depth, Q = H ⟨vx⟩ over the fluid (whose volume is H Lx Lz for
/// every shape here), of `walls` in a 48 × 12 × 4 box under body force `f` (SRD + MBS).
fn flow_rate(p: Platform, walls: &str, f: f64, seed: u64) -> Option<(f64, f64, Config)> {
    let mut cfg = shaped(
        [48, 12, 4],
        walls,
        RULES[0],
        &format!(", body_force: ({f}, 0.0, 0.0), seed: {seed}"),
    );
    cfg.output.equilibration_steps = 1000;
    cfg.output.sample_interval = 5;
    let mut s = p.solvent(&cfg)?;
    let height = match s.physics().walls.clone().expect("walls").shape {
        Shape::Cosine(c) => 2.0 * c.half_height,
        Shape::Slit(sl) => sl.height(),
        other => panic!("{other:?}"),
    };
    let mut means = Vec::new();
    sampled(&mut s, 1000, 4000, |st| {
        means.push(st.vel[0].iter().sum::<f64>() / st.len() as f64);
    });
    // blocks of 50 samples (250 steps, several times the slowest mode's decay time H²/(π² ν))
    let blocks: Vec<f64> = means
        .chunks(50)
        .map(|b| b.iter().sum::<f64>() / b.len() as f64)
        .collect();
    let nb = blocks.len() as f64;
    let mean = blocks.iter().sum::<f64>() / nb;
    let var = blocks.iter().map(|b| (b - mean).powi(2)).sum::<f64>() / (nb - 1.0);
    let geometry = match s.physics().walls.clone().expect("walls").shape {
        Shape::Cosine(c) if c.expansion => "cosine expansion",
        Shape::Cosine(_) => "cosine channel",
        Shape::Slit(_) => "slit",
        other => panic!("{other:?}"),
    };
    assert_walls_take_the_body_force(p, &s, geometry);
    Some((height * mean, height * (var / nb).sqrt(), cfg))
}

/// The lubrication flow rate with a Navier slip length `slip` at both walls, relative to a
/// straight slit of width `height` with the same slip: the local conductance w³ + 6 slip w²
/// (plane Poiseuille flow with slip) in place of w³, averaged as resistances over one period of
/// w(x) = height + 2 amplitude cos θ.
fn expansion_ratio_with_slip(height: f64, amplitude: f64, slip: f64) -> f64 {
    let n = 20_000;
    let resistance = (0..n)
        .map(|i| {
            let th = std::f64::consts::TAU * (i as f64 + 0.5) / n as f64;
            let w = height + 2.0 * amplitude * th.cos();
            1.0 / (w * w * w + 6.0 * slip * w * w)
        })
        .sum::<f64>()
        / n as f64;
    1.0 / (resistance * (height.powi(3) + 6.0 * slip * height * height))
}

/// Cosine walls of mean width 7 over one period of 48 cells (SRD + MBS, body force 0.04): the
/// flow rate against lubrication theory, Q = n f / (12 η ⟨w⁻³⟩). Measured as a ratio to a
/// straight slit 7 cells high in the same box, which takes out the viscosity's own error; the
/// slit's flow rate above the no-slip theory gives the walls' slip length δ (Q = Q₀ (1 + 6δ/H),
/// about 0.15 a: +13% at this width), which enters the expansion's local conductance
/// w³ + 6δw² (1% on the ratio). The wavy channel of constant vertical width flows as the slit
/// to first order in the slope (lubrication along the tilted channel gives
/// 1/⟨(1 + y′²)²⟩ = 0.983); the expansion-contraction of amplitude 0.75 (widths 5.5 to 8.5) as
/// 1/(H³⟨w⁻³⟩) = 0.869 of the slit without slip, 0.879 with it. Tolerance: 3 standard errors of
/// the ratio from block averages (about 1% each), plus 2% for the corrections to lubrication
/// theory of the aspect ratio (kH/2 = 0.46, entering as (kH/2)² times the amplitude squared).
fn flow_rate_between_cosine_walls_follows_lubrication_theory(p: Platform) {
    let (height, f) = (7.0f64, 0.04);
    let Some((q_slit, e_slit, cfg)) = flow_rate(p, &format!("Slit(height: {height})"), f, 12)
    else {
        return;
    };
    let eta = theory_viscosity(&cfg);
    let force_density = 10.0 * f;
    let q_straight = lubrication_flow_rate(height.powi(-3), force_density, eta);
    let slip = (q_slit / q_straight - 1.0) * height / 6.0;
    eprintln!(
        "{p}: slit {height}: Q {q_slit:.4} ± {e_slit:.4} (no-slip theory {q_straight:.4}, \
         {:+.1}%: slip length {slip:.3})",
        100.0 * (q_slit / q_straight - 1.0)
    );
    let k = std::f64::consts::TAU / cfg.cells[0] as f64;
    for (walls, amplitude) in [("CosineChannel", 1.0f64), ("CosineExpansion", 0.75)] {
        let spec = format!("{walls}(height: {height}, amplitude: {amplitude})");
        let (lubrication, expected) = if walls == "CosineExpansion" {
            let inverse_cube = expansion_mean_inverse_cube_width(height, amplitude);
            (
                lubrication_flow_rate(inverse_cube, force_density, eta),
                expansion_ratio_with_slip(height, amplitude, slip),
            )
        } else {
            // ⟨(1 + y′²)²⟩ with y′ = −A k sin: 1 + s² + 3 s⁴ / 8, s = A k
            let s2 = (k * amplitude).powi(2);
            (q_straight, 1.0 / (1.0 + s2 + 3.0 * s2 * s2 / 8.0))
        };
        let Some((q, e, _)) = flow_rate(p, &spec, f, 12) else {
            return;
        };
        let ratio = q / q_slit;
        let err = ratio * ((e / q).powi(2) + (e_slit / q_slit).powi(2)).sqrt();
        eprintln!(
            "{p}: {spec}: Q {q:.4} ± {e:.4}, no-slip lubrication {lubrication:.4} ({:+.1}%); \
             Q / Q_slit {ratio:.4} ± {err:.4} against {expected:.4} ({:+.2}%; without slip \
             {:.4})",
            100.0 * (q / lubrication - 1.0),
            100.0 * (ratio / expected - 1.0),
            lubrication / q_straight
        );
        assert!(
            (ratio - expected).abs() < 3.0 * err + 0.02 * expected,
            "{p}: {spec}: ratio {ratio} ± {err} against {expected}"
        );
    }
}

/// Each bad field of the new shapes is refused before anything is allocated, naming the field
/// and a fix.
#[test]
fn bad_pore_and_cosine_fields_are_refused_by_name() {
    for (walls, extra, field, problem) in [
        (
            "PlanarPore(height: 3.0, length: 8.0)",
            "",
            "walls.height",
            "thinner than 4",
        ),
        (
            "PlanarPore(height: 12.0, length: 8.0)",
            "",
            "walls.height",
            "less than a cell of solid",
        ),
        (
            "PlanarPore(height: 6.0, length: 0.0)",
            "",
            "walls.length",
            "finite and > 0",
        ),
        (
            "PlanarPore(height: 6.0, length: 15.5)",
            "",
            "walls.length",
            "less than a cell of reservoir",
        ),
        (
            "CosineChannel(height: 3.5, amplitude: 1.0)",
            "",
            "walls.height",
            "closer than 4",
        ),
        (
            "CosineChannel(height: 6.0, amplitude: -0.5)",
            "",
            "walls.amplitude",
            "≥ 0",
        ),
        (
            "CosineChannel(height: 6.0, amplitude: 2.6)",
            "",
            "walls.amplitude",
            "half a cell",
        ),
        (
            "CosineExpansion(height: 6.0, amplitude: 2.6)",
            "",
            "walls.amplitude",
            "less than a cell",
        ),
        (
            "CosineExpansion(height: 6.0, amplitude: 1.0)",
            ", body_force: (0.01, 0.001, 0.0)",
            "body_force.1",
            "across the walls",
        ),
    ] {
        let text = format!(
            "(cells: (16, 12, 4), particles_per_cell: 10, time_step: 0.1, \
             collision: Srd(angle_deg: 130.0), steps: 10, walls: {walls}{extra})"
        );
        let err = Config::from_ron_str(&text).expect_err(walls).to_string();
        assert!(err.contains(&format!("`{field}`")), "{walls}: {err}");
        assert!(err.contains(problem), "{walls}: {err}");
        assert!(err.contains("fix:"), "{walls}: {err}");
    }
    // what the box allows is accepted
    for walls in [
        "PlanarPore(height: 11.0, length: 15.0)",
        "CosineChannel(height: 6.0, amplitude: 2.5)",
        "CosineExpansion(height: 6.0, amplitude: 2.5)",
    ] {
        let text = format!(
            "(cells: (16, 12, 4), particles_per_cell: 10, time_step: 0.1, \
             collision: Srd(angle_deg: 130.0), steps: 10, walls: {walls}, \
             body_force: (0.01, 0.0, 0.01))"
        );
        Config::from_ron_str(&text).unwrap_or_else(|e| panic!("{walls}: {e}"));
    }
}
