//! Walls over MPI ranks beyond the slit of `mpi_ranks.rs`: every shape, a porous mask and a
//! rule beside SRD, each on 1 and 3 ranks (`mpirun -np N mpcbox run`, the `mpi` feature).

use std::path::Path;

use super::mpi_ranks::{assert_rows_close, mpi_mpcbox, run_config, write_config};
use crate::common;

/// Every wall shape beside the slit, and walls under MPC-AT+a, over MPI ranks: a planar pore, a
/// cosine channel, a lattice of spherical obstacles and a porous medium given as a voxel mask
/// (`examples/sphere_bed.npy`), each on 1 and 3 ranks (slabs cut by each layer's work, 3 of them
/// uneven): every observable row (the walls' momentum in the report included) and the final
/// fluid agree to rounding, as on one process with slabs.
#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs OpenMPI and libclang (apt-get install openmpi-bin libopenmpi-dev libclang-dev); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn every_wall_shape_is_the_same_over_ranks() {
    let bin = mpi_mpcbox();
    let mask = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/sphere_bed.npy");
    let cases = [
        (
            "pore",
            "(12, 16, 6)",
            "PlanarPore(height: 6.0, length: 6.0)",
            "Srd(angle_deg: 130.0)",
        ),
        (
            "cosine channel",
            "(16, 16, 6)",
            "CosineChannel(height: 8.0, amplitude: 1.5)",
            "Srd(angle_deg: 130.0)",
        ),
        (
            "spheres",
            "(12, 12, 12)",
            "SphereObstacle(radius: 3.0)",
            "Srd(angle_deg: 130.0)",
        ),
        (
            "pore, MPC-AT+a",
            "(12, 16, 6)",
            "PlanarPore(height: 6.0, length: 6.0)",
            "MpcAt(angular_momentum: true)",
        ),
        (
            "porous mask",
            "(16, 16, 16)",
            "DistanceField(file: MASK, spacing: 1.0, kind: Mask)",
            "Srd(angle_deg: 130.0)",
        ),
    ];
    for (name, cells, walls, rule) in cases {
        let dir = tempfile::tempdir().unwrap();
        // the file by its absolute path: the test reads the checkpoints (whose config names
        // it) from its own working directory, the ranks from the run's
        let walls = walls.replace("MASK", &format!("{:?}", mask.display().to_string()));
        // MPC-AT is its own thermostat (MBS is refused with it)
        let thermostat = if rule.starts_with("MpcAt") {
            "None"
        } else {
            "Mbs"
        };
        let body = format!(
            "(cells: {cells}, particles_per_cell: 5, time_step: 0.1, collision: {rule}, \
             thermostat: {thermostat}, seed: 13, steps: 30, body_force: (0.002, 0.0, 0.0), \
             walls: {walls}, device: Cpu, tuning: (reorder_interval: Some(0)), \
             output: (observable_interval: 1, sample_interval: 1, equilibration_steps: 10, \
             directory: \"out\"))"
        );
        write_config(dir.path(), "c.ron", &body);
        let (r1, ck1) = run_config(bin, 1, dir.path(), "c.ron", "r1");
        let (r3, ck3) = run_config(bin, 3, dir.path(), "c.ron", "r3");
        let what = format!("{name}: 3 ranks against 1");
        assert_rows_close(&r1, &r3, 1e-9, &what);
        common::compare_states(&ck1.fluid, &ck3.fluid, 1e-9, &what);
    }
}
