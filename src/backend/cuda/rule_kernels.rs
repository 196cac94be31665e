//! The kernels of the collision rules beside plain SRD (`kernels/rules.cu`): a table of their
//! own, compiled and loaded only when a run's rule needs them (`CudaDevice::rule_kernels`), so
//! that a plain SRD run never waits for the rules' long compilations (each instantiates every
//! rule's templates).

use super::launch::kernel_table;
use super::params::{KernelParams, MigrationArgs};

kernel_table! {
    /// The rule kernels of one device, loaded the first time a rule needs them.
    pub(super) struct RuleKernels;

    "rules.cu" {
        rules_stream_bin: "mpc_rules_stream_bin"(
            p: Val<KernelParams>, rule: Val<u32>, px: Out<f32>, py: Out<f32>, pz: Out<f32>,
            vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>, cells: Out<f64>,
            ext: Out<f64>, report: Out<f64>, m: Val<MigrationArgs>,
        ),
        rules_stream_bin_shared: "mpc_rules_stream_bin_shared"(
            p: Val<KernelParams>, rule: Val<u32>, px: Out<f32>, py: Out<f32>, pz: Out<f32>,
            vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>, cells: Out<f64>,
            ext: Out<f64>, report: Out<f64>, m: Val<MigrationArgs>,
        ),
        rules_collide_stream_bin: "mpc_rules_collide_stream_bin"(
            pc: Val<KernelParams>, p: Val<KernelParams>, rule: Val<u32>, px: Out<f32>,
            py: Out<f32>, pz: Out<f32>, vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>,
            cells_prev: In<f64>, ext_prev: In<f64>, cells_next: Out<f64>, ext_next: Out<f64>,
            report: Out<f64>, m: Val<MigrationArgs>,
        ),
        rules_collide_stream_bin_shared: "mpc_rules_collide_stream_bin_shared"(
            pc: Val<KernelParams>, p: Val<KernelParams>, rule: Val<u32>, px: Out<f32>,
            py: Out<f32>, pz: Out<f32>, vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>,
            cells_prev: In<f64>, ext_prev: In<f64>, cells_next: Out<f64>, ext_next: Out<f64>,
            report: Out<f64>, m: Val<MigrationArgs>,
        ),
        rules_cell_params: "mpc_rules_cell_params"(
            p: Val<KernelParams>, rule: Val<u32>, cells: Out<f64>, ext: Out<f64>, report: Out<f64>,
            listed: In<u32>,
        ),
        rules_cut_cell_params: "mpc_rules_cut_cell_params"(
            p: Val<KernelParams>, rule: Val<u32>, cells: Out<f64>, ext: Out<f64>, list: In<u32>,
            count: Val<u32>,
        ),
        rules_collide: "mpc_rules_collide"(
            p: Val<KernelParams>, rule: Val<u32>, px: In<f32>, py: In<f32>, pz: In<f32>,
            vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: In<u32>, cells: In<f64>, ext: In<f64>,
            report: Out<f64>,
        ),
        rules_solute_bin: "mpc_rules_solute_bin"(
            p: Val<KernelParams>, rule: Val<u32>, spos: In<f64>, svel: In<f64>, smass: In<f64>,
            scell: Out<u32>, simage: Out<i32>, cells: Out<f64>, ext: Out<f64>,
        ),
        rules_solute_collide: "mpc_rules_solute_collide"(
            p: Val<KernelParams>, rule: Val<u32>, spos: In<f64>, smass: In<f64>, scell: In<u32>,
            simage: In<i32>, cells: In<f64>, ext: In<f64>, svel: Out<f64>, owned_only: Val<u32>,
            report: Out<f64>,
        ),
        rules_stream_bin_srd_a: "mpc_rules_stream_bin_srd_a"(
            p: Val<KernelParams>, rule: Val<u32>, px: Out<f32>, py: Out<f32>, pz: Out<f32>,
            vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>, cells: Out<f64>,
            ext: Out<f64>, report: Out<f64>, m: Val<MigrationArgs>,
        ),
        rules_stream_bin_at: "mpc_rules_stream_bin_at"(
            p: Val<KernelParams>, rule: Val<u32>, px: Out<f32>, py: Out<f32>, pz: Out<f32>,
            vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>, cells: Out<f64>,
            ext: Out<f64>, report: Out<f64>, m: Val<MigrationArgs>,
        ),
        rules_stream_bin_at_a: "mpc_rules_stream_bin_at_a"(
            p: Val<KernelParams>, rule: Val<u32>, px: Out<f32>, py: Out<f32>, pz: Out<f32>,
            vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>, cells: Out<f64>,
            ext: Out<f64>, report: Out<f64>, m: Val<MigrationArgs>,
        ),
        rules_collide_stream_bin_srd_a: "mpc_rules_collide_stream_bin_srd_a"(
            pc: Val<KernelParams>, p: Val<KernelParams>, rule: Val<u32>, px: Out<f32>,
            py: Out<f32>, pz: Out<f32>, vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>,
            cells_prev: In<f64>, ext_prev: In<f64>, cells_next: Out<f64>, ext_next: Out<f64>,
            report: Out<f64>, m: Val<MigrationArgs>,
        ),
        rules_collide_stream_bin_at: "mpc_rules_collide_stream_bin_at"(
            pc: Val<KernelParams>, p: Val<KernelParams>, rule: Val<u32>, px: Out<f32>,
            py: Out<f32>, pz: Out<f32>, vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>,
            cells_prev: In<f64>, ext_prev: In<f64>, cells_next: Out<f64>, ext_next: Out<f64>,
            report: Out<f64>, m: Val<MigrationArgs>,
        ),
        rules_collide_stream_bin_at_a: "mpc_rules_collide_stream_bin_at_a"(
            pc: Val<KernelParams>, p: Val<KernelParams>, rule: Val<u32>, px: Out<f32>,
            py: Out<f32>, pz: Out<f32>, vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>,
            cells_prev: In<f64>, ext_prev: In<f64>, cells_next: Out<f64>, ext_next: Out<f64>,
            report: Out<f64>, m: Val<MigrationArgs>,
        ),
        rules_cell_params_srd_a: "mpc_rules_cell_params_srd_a"(
            p: Val<KernelParams>, rule: Val<u32>, cells: Out<f64>, ext: Out<f64>, report: Out<f64>,
            listed: In<u32>,
        ),
        rules_cell_params_at: "mpc_rules_cell_params_at"(
            p: Val<KernelParams>, rule: Val<u32>, cells: Out<f64>, ext: Out<f64>, report: Out<f64>,
            listed: In<u32>,
        ),
        rules_cell_params_at_a: "mpc_rules_cell_params_at_a"(
            p: Val<KernelParams>, rule: Val<u32>, cells: Out<f64>, ext: Out<f64>, report: Out<f64>,
            listed: In<u32>,
        ),
        rules_collide_srd_a: "mpc_rules_collide_srd_a"(
            p: Val<KernelParams>, rule: Val<u32>, px: In<f32>, py: In<f32>, pz: In<f32>,
            vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: In<u32>, cells: In<f64>, ext: In<f64>,
            report: Out<f64>,
        ),
        rules_collide_at: "mpc_rules_collide_at"(
            p: Val<KernelParams>, rule: Val<u32>, px: In<f32>, py: In<f32>, pz: In<f32>,
            vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: In<u32>, cells: In<f64>, ext: In<f64>,
            report: Out<f64>,
        ),
        rules_collide_at_a: "mpc_rules_collide_at_a"(
            p: Val<KernelParams>, rule: Val<u32>, px: In<f32>, py: In<f32>, pz: In<f32>,
            vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: In<u32>, cells: In<f64>, ext: In<f64>,
            report: Out<f64>,
        ),
    }
}
