//! The polymer scenario's breakdowns: the coupled loop driven by hand, its MD steps and its
//! collisions timed apart (and, where the engine times them, its MD phases and host times),
//! and what a stress sample costs part by part.

use std::time::Instant;

use serde_json::json;

use mpcbox::config::Config;
use mpcbox::md::coupled::Coupling;
use mpcbox::md::Md;
use mpcbox::Solvent;

use super::cube;
use super::err;
use super::polymer::{Args, STEPS_PER_COLLISION};
use crate::record::Recorder;
use crate::Res;

/// The coupled loop's engine driven by hand, without observables: seconds in the MD steps and
/// in the collisions; the MD phases (`--profile-md`) and host times (`--host-md`) recorded.
pub fn breakdown(a: &Args, cfg: &Config, md: &Md, rec: &mut Recorder) -> Res<(f64, f64)> {
    let md_cfg = cfg.md.clone().ok_or("the config has no md section")?;
    let mut solvent = Solvent::new(cfg.clone()).map_err(err)?;
    let mut coupling = Coupling::with_md(&md_cfg, &solvent, md.clone()).map_err(err)?;
    let g = coupling.engine_mut();
    let (mut t_md, mut t_fluid) = (0.0, 0.0);
    for k in 0..a.warmup + a.collisions {
        if k == a.warmup && (a.profile_md || a.host_md) {
            // switching starts the host's timers afresh
            g.set_profiling(a.profile_md);
        }
        let t = Instant::now();
        g.advance(STEPS_PER_COLLISION, false).map_err(err)?;
        g.synchronize().map_err(err)?;
        let t1 = Instant::now();
        g.collide(&mut solvent).map_err(err)?;
        if k >= a.warmup {
            t_md += (t1 - t).as_secs_f64();
            t_fluid += t1.elapsed().as_secs_f64();
        }
    }
    if !mpcbox::ranks::is_root() {
        return Ok((t_md, t_fluid));
    }
    let steps = (a.collisions * STEPS_PER_COLLISION) as f64;
    let mut timed: Vec<(&str, Vec<(&str, f64)>)> = Vec::new();
    if a.profile_md {
        timed.push(("MD phase (each waited for)", g.phase_seconds()));
    }
    if a.host_md {
        timed.push(("MD, host's time", g.host_seconds()));
    }
    for (what, list) in timed {
        if list.is_empty() {
            println!("{what}: this engine does not time it");
        }
        for (name, sec) in list {
            rec.row(
                &[("cells", cube(a.cells)), (what, json!(name))],
                &[("s", sec), ("µs per MD step", 1e6 * sec / steps)],
            )?;
        }
    }
    Ok((t_md, t_fluid))
}

/// Milliseconds per call of each part of the coupled step on unsampled and sampled steps (the
/// loop of `Coupling::step` by hand, without the overlap, each part waited for).
pub fn sample_parts(a: &Args, cfg: &Config, md: &Md) -> Res<Vec<(&'static str, [f64; 2])>> {
    let md_cfg = cfg.md.clone().ok_or("the config has no md section")?;
    let mut solvent = Solvent::new(cfg.clone()).map_err(err)?;
    let mut coupling = Coupling::with_md(&md_cfg, &solvent, md.clone()).map_err(err)?;
    let g = coupling.engine_mut();
    const NAMES: [&str; 6] = [
        "MD steps of one collision",
        "solutes' conformation (decomposed: after a gather)",
        "solutes' pressure (decomposed: from the gathered slab)",
        "solutes' pressure alone (decomposed: per slab, no gather)",
        "collision (fluid step with the solutes)",
        "fluid moments (after the collision)",
    ];
    let mut sums = [[0.0f64; 2]; 6];
    let mut calls = [0u32; 2];
    let ms = |t: Instant| 1e3 * t.elapsed().as_secs_f64();
    for k in 0..a.warmup + a.collisions {
        let sampled = solvent.sampled_next() && solvent.stress_measured_next();
        let measure = solvent.stress_measured_next();
        let mut t = [0.0f64; 6];
        let t0 = Instant::now();
        g.advance(STEPS_PER_COLLISION, measure).map_err(err)?;
        g.synchronize().map_err(err)?;
        t[0] = ms(t0);
        if sampled {
            // as a measured step that is not sampled takes it: the pressure alone (decomposed:
            // per slab); then in `Coupling::step`'s order on a sample, the conformation and the
            // pressure
            let t3 = Instant::now();
            g.solute_pressure(a.shear_rate).map_err(err)?;
            t[3] = ms(t3);
            let t1 = Instant::now();
            g.conformation().map_err(err)?;
            t[1] = ms(t1);
            let t2 = Instant::now();
            g.solute_pressure(a.shear_rate).map_err(err)?;
            t[2] = ms(t2);
        }
        let t4 = Instant::now();
        g.collide(&mut solvent).map_err(err)?;
        g.synchronize().map_err(err)?;
        t[4] = ms(t4);
        let t5 = Instant::now();
        solvent.moments().map_err(err)?;
        t[5] = ms(t5);
        if k >= a.warmup {
            let c = sampled as usize;
            calls[c] += 1;
            for (s, x) in sums.iter_mut().zip(t) {
                s[c] += x;
            }
        }
    }
    Ok(NAMES
        .iter()
        .zip(sums)
        .map(|(&n, s)| (n, [0, 1].map(|c| s[c] / calls[c].max(1) as f64)))
        .collect())
}
