//! The out-of-reach shortcut of `Physics::stream_walled` (and of the GPU's `mpc_stream`, which
//! mirrors it) changes no bit: for every shape, particles of the initial fluid (cut cells
//! included), some made four times as fast, stream to the same position, velocity and wall
//! momentum with it as along the full path, and most bulk particles take it.

use super::{WallMomentum, WallShape, Walls};
use crate::config::Config;
use crate::physics::Physics;
use crate::state::FluidState;

/// Every shape of the walls benchmark in a 16³ box, a body force along x (and y where the
/// walls leave y open to it).
const SHAPES: [&str; 9] = [
    "Slit(bottom_velocity: -0.1, top_velocity: 0.2)",
    "Slit(normal: Z, boundary: Slip)",
    "Pipe(radius: 7.5, velocity: 0.1)",
    "SphereObstacle(radius: 4.0)",
    "CylinderObstacle(radius: 4.0)",
    "PlanarPore(height: 8.0, length: 8.0)",
    "CosineChannel(height: 8.0, amplitude: 2.0)",
    "CosineExpansion(height: 8.0, amplitude: 2.0)",
    "DistanceField(file: \"examples/sphere_bed.npy\", spacing: 1.0, kind: Mask)",
];

#[test]
fn the_out_of_reach_shortcut_changes_no_bit() {
    for walls in SHAPES {
        let cfg = Config::from_ron_str(&format!(
            "(cells: (16, 16, 16), particles_per_cell: 10, time_step: 0.1, seed: 3, steps: 1, \
              collision: Srd(angle_deg: 130.0), \
              body_force: (0.02, 0.0, 0.0), walls: {walls})"
        ))
        .unwrap_or_else(|e| panic!("{walls}: {e}"));
        let phys = Physics::from_config(&cfg);
        let w = phys.walls.as_ref().unwrap();
        let st = FluidState::initial(&cfg);
        let (mut fast, mut full): (WallMomentum, WallMomentum) = Default::default();
        let mut shortcuts = 0;
        for i in 0..st.len() {
            let pos = [st.pos[0][i], st.pos[1][i], st.pos[2][i]];
            let speed_up = if i % 5 == 0 { 4.0 } else { 1.0 };
            let vel = [0, 1, 2].map(|k| st.vel[k][i] * speed_up);
            let a = phys.stream_walled(w, pos, vel, &mut fast);
            let b = phys.stream_walled_path(w, pos, vel, &mut full);
            assert!(
                a.0.map(f32::to_bits) == b.0.map(f32::to_bits)
                    && a.1.map(f64::to_bits) == b.1.map(f64::to_bits),
                "{walls}: particle {i} at {pos:?}, {vel:?}: {a:?} against {b:?}"
            );
            let r = pos.map(|c| c as f64);
            shortcuts += w.shape.clearance(r).is_some_and(|c| c > 0.5) as usize;
        }
        assert_eq!(fast, full, "{walls}: wall momentum");
        assert!(full != WallMomentum::default(), "{walls}: no impact tested");
        assert!(
            shortcuts * 2 > st.len(),
            "{walls}: {shortcuts} of {} particles clear of the walls",
            st.len()
        );
    }
}

/// Every shape of the walls benchmark (no-slip, the slip slit made no-slip) and a sphere
/// holding the fluid, in a 16³ box.
pub(super) fn walled() -> Vec<(String, Physics, Walls)> {
    let no_slip = SHAPES.map(|s| s.replace("boundary: Slip", "boundary: NoSlip"));
    no_slip
        .iter()
        .map(String::as_str)
        .chain(["Sphere(radius: 6.2)"])
        .map(|walls| {
            let cfg = Config::from_ron_str(&format!(
                "(cells: (16, 16, 16), particles_per_cell: 10, time_step: 0.1, seed: 3, \
                  steps: 1, collision: Srd(angle_deg: 130.0), walls: {walls})"
            ))
            .unwrap_or_else(|e| panic!("{walls}: {e}"));
            let phys = Physics::from_config(&cfg);
            let w = phys.walls.clone().unwrap();
            (walls.to_string(), phys, w)
        })
        .collect()
}
