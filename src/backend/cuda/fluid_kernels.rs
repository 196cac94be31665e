//! The fluid's kernel table: every kernel of `kernels/*.cu` (but the MD engine's and the rules'
//! beside SRD, which `rule_kernels` lists) with its parameters, grouped by the kernels file that defines it. `launch::kernel_table!` turns it
//! into `FluidKernels` (loaded once per device by `device`), one typed launcher per kernel,
//! and the list `tests` compare with the sources' signatures.

use super::launch::kernel_table;
use super::params::{KernelParams, MigrationArgs};

// Every fluid kernel with its parameters (`launch::kernel_table!`: the typed launchers, and the
// list `tests` compare with the sources), grouped by the kernels file that defines it; each
// file's kernels are launched by the module of the same name (`stream.cu` by `stream.rs`,
// `migrate.cu` by `multi/migrate.rs`, ...).
kernel_table! {
    /// Every fluid kernel of one device, loaded once when the device opens.
    pub(super) struct FluidKernels;

    "stream.cu" {
        stream_bin_atomic: "mpc_stream_bin_atomic"(
            p: Val<KernelParams>, px: Out<f32>, py: Out<f32>, pz: Out<f32>, vx: Out<f64>,
            vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>, cells: Out<f64>, report: Out<f64>,
            m: Val<MigrationArgs>,
        ),
        stream_bin_warp: "mpc_stream_bin_warp"(
            p: Val<KernelParams>, px: Out<f32>, py: Out<f32>, pz: Out<f32>, vx: Out<f64>,
            vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>, cells: Out<f64>, report: Out<f64>,
            m: Val<MigrationArgs>,
        ),
        stream_bin_shared: "mpc_stream_bin_shared"(
            p: Val<KernelParams>, px: Out<f32>, py: Out<f32>, pz: Out<f32>, vx: Out<f64>,
            vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>, cells: Out<f64>, report: Out<f64>,
            m: Val<MigrationArgs>,
        ),
        collide_stream_bin: "mpc_collide_stream_bin"(
            pc: Val<KernelParams>, p: Val<KernelParams>, px: Out<f32>, py: Out<f32>, pz: Out<f32>,
            vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>, cells_prev: In<f64>,
            cells_next: Out<f64>, report: Out<f64>, m: Val<MigrationArgs>,
        ),
        collide_stream_bin_shared: "mpc_collide_stream_bin_shared"(
            pc: Val<KernelParams>, p: Val<KernelParams>, px: Out<f32>, py: Out<f32>, pz: Out<f32>,
            vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>, cells_prev: In<f64>,
            cells_next: Out<f64>, report: Out<f64>, m: Val<MigrationArgs>,
        ),
        fill_u32: "mpc_fill_u32"(dst: Out<u32>, value: Val<u32>, n: Val<u32>),
        stream_bin_list: "mpc_stream_bin_list"(
            p: Val<KernelParams>, px: Out<f32>, py: Out<f32>, pz: Out<f32>, vx: Out<f64>,
            vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>, head: Out<u32>, next: Out<u32>,
            report: Out<f64>,
        ),
        list_sums: "mpc_list_sums"(
            p: Val<KernelParams>, head: In<u32>, next: In<u32>, vx: In<f64>, vy: In<f64>,
            vz: In<f64>, cellw: In<u32>, cells: Out<f64>,
        ),
    }
    "solutes.cu" {
        solute_bin: "mpc_solute_bin"(
            p: Val<KernelParams>, spos: In<f64>, svel: In<f64>, smass: In<f64>, scell: Out<u32>,
            simage: Out<i32>, cells: Out<f64>, subset: In<u32>, first_bad: Out<u32>,
            limit: Val<f64>,
        ),
        solute_collide: "mpc_solute_collide"(
            p: Val<KernelParams>, scell: In<u32>, simage: In<i32>, cells: In<f64>, svel: Out<f64>,
            spos: In<f64>, smass: In<f64>, report: Out<f64>,
        ),
        solute_collide_owned: "mpc_solute_collide_owned"(
            p: Val<KernelParams>, scell: In<u32>, simage: In<i32>, cells: In<f64>, svel: Out<f64>,
            spos: In<f64>, smass: In<f64>, report: Out<f64>, subset: In<u32>,
        ),
    }
    "device_solutes.cu" {
        check_solutes: "mpc_check_solutes"(
            spos: In<f64>, svel: In<f64>, smass: In<f64>, n: Val<u32>, limit: Val<f64>,
            mass_cap: Val<f64>, first_bad: Out<u32>, subset: In<u32>,
        ),
    }
    "solute_routes.cu" {
        route_count: "mpc_route_count"(
            p: Val<KernelParams>, spos: In<f64>, svel: In<f64>, smass: In<f64>, n: Val<u32>,
            limit: Val<f64>, bounds: In<u32>, g: Val<u32>, counts: Out<u32>, first_bad: Out<u32>,
        ),
        route_pack: "mpc_route_pack"(
            p: Val<KernelParams>, spos: In<f64>, svel: In<f64>, smass: In<f64>, n: Val<u32>,
            limit: Val<f64>, bounds: In<u32>, g: Val<u32>, counts: In<u32>, cursor: Out<u32>,
            rpos: Out<f64>, rvel: Out<f64>, rmass: Out<f64>, rindex: Out<u32>, rslot: Out<u32>,
        ),
        route_scatter: "mpc_route_scatter"(
            rvel: In<f64>, rindex: In<u32>, total: Val<u32>, svel: Out<f64>,
        ),
        route_gather: "mpc_route_gather"(
            rvel: In<f64>, rslot: In<u32>, n: Val<u32>, svel: Out<f64>,
        ),
    }
    "cells.cu" {
        cell_params: "mpc_cell_params"(
            p: Val<KernelParams>, cells: Out<f64>, report: Out<f64>, listed: In<u32>,
        ),
        cut_cell_params: "mpc_cut_cell_params"(
            p: Val<KernelParams>, cells: Out<f64>, list: In<u32>, count: Val<u32>,
        ),
    }
    "collide.cu" {
        collide: "mpc_collide"(
            p: Val<KernelParams>, px: In<f32>, py: In<f32>, pz: In<f32>, vx: Out<f64>,
            vy: Out<f64>, vz: Out<f64>, cellw: In<u32>, cells: In<f64>, report: Out<f64>,
        ),
    }
    "migrate.cu" {
        immigrate: "mpc_immigrate"(
            p: Val<KernelParams>, recv: In<u64>, count: Val<u32>, first: Val<u32>, fill: Val<u32>,
            hole_top: Val<u32>, n_old: Val<u32>, px: Out<f32>, py: Out<f32>, pz: Out<f32>,
            vx: Out<f64>, vy: Out<f64>, vz: Out<f64>, cellw: Out<u32>, ids: Out<u32>,
            holes: In<u32>, cells: Out<f64>, counters: Out<u32>, rule: Val<u32>, ext: Out<f64>,
        ),
    }
    "observe.cu" {
        moments: "mpc_moments"(
            p: Val<KernelParams>, py: In<f32>, pz: In<f32>, vx: In<f64>, vy: In<f64>, vz: In<f64>,
            cellw: In<u32>, out_: Out<f64>, prof_sum: Out<f64>, prof_cnt: Out<u64>,
            use_shared: Val<u32>, per_block: Val<u32>,
        ),
        accumulate_fields: "mpc_accumulate_fields"(
            p: Val<KernelParams>, px: In<f32>, py: In<f32>, pz: In<f32>, vx: In<f64>, vy: In<f64>,
            vz: In<f64>, cellw: In<u32>, fields: Out<f64>, first: Val<u32>, layers: Val<u32>,
            halo: Val<u32>,
        ),
    }
    "reorder.cu" {
        count_cells: "mpc_count_cells"(
            cellw: In<u32>, counts: Out<u32>, n: Val<u32>, ncells: Val<u32>,
        ),
        scan_chunk_sums: "mpc_scan_chunk_sums"(
            in_: In<u32>, partial: Out<u32>, n: Val<u32>, chunk: Val<u32>, nchunks: Val<u32>,
        ),
        scan_partials: "mpc_scan_partials"(partial: Out<u32>, nchunks: Val<u32>),
        scan_apply: "mpc_scan_apply"(
            inout: Out<u32>, partial: In<u32>, n: Val<u32>, chunk: Val<u32>, nchunks: Val<u32>,
        ),
        scatter: "mpc_scatter"(
            cellw: In<u32>, cursor: Out<u32>, perm: Out<u32>, n: Val<u32>, ncells: Val<u32>,
        ),
        sort_segments: "mpc_sort_segments"(ends: In<u32>, perm: Out<u32>, ncells: Val<u32>),
        gather_f32: "mpc_gather_f32"(perm: In<u32>, src: In<f32>, dst: Out<f32>, n: Val<u32>),
        gather_f64: "mpc_gather_f64"(perm: In<u32>, src: In<f64>, dst: Out<f64>, n: Val<u32>),
    }
    "debug.cu" {
        debug_cell_draws: "mpc_debug_cell_draws"(
            seed: Val<u64>, step: Val<u64>, cells: In<u32>, counts: In<u32>, kt: Val<f64>,
            axes: Out<f64>, energies: Out<f64>, n: Val<u32>,
        ),
        debug_det_ln: "mpc_debug_det_ln"(x: In<f64>, y: Out<f64>, n: Val<u32>),
        debug_at_draws: "mpc_debug_at_draws"(
            seed: Val<u64>, step: Val<u64>, cells: In<u32>, keys: In<u64>, masses: In<f64>,
            kt: Val<f64>, draws: Out<f64>, n: Val<u32>,
        ),
        debug_initial_particle: "mpc_debug_initial_particle"(
            seed: Val<u64>, lx: Val<f64>, ly: Val<f64>, lz: Val<f64>, sigma: Val<f64>,
            pos: Out<f32>, vel: Out<f64>, n: Val<u32>,
        ),
    }
    "init.cu" {
        init_particles: "mpc_init_particles"(
            seed: Val<u64>, lx: Val<f64>, ly: Val<f64>, lz: Val<f64>, sigma: Val<f64>,
            px: Out<f32>, py: Out<f32>, pz: Out<f32>, vx: Out<f64>, vy: Out<f64>, vz: Out<f64>,
            n: Val<u32>,
        ),
        chunk_sums: "mpc_chunk_sums"(
            vx: In<f64>, vy: In<f64>, vz: In<f64>, partial: Out<f64>, n: Val<u32>, chunk: Val<u32>,
            nchunks: Val<u32>,
        ),
        shift_scale: "mpc_shift_scale"(
            v: Out<f64>, sub: Val<f64>, mul: Val<f64>, op: Val<u32>, n: Val<u32>,
        ),
        add_flow: "mpc_add_flow"(p: Val<KernelParams>, py: In<f32>, vx: Out<f64>),
        init_count: "mpc_init_count"(
            seed: Val<u64>, lx: Val<f64>, ly: Val<f64>, lz: Val<f64>, n: Val<u64>,
            y_lo: Val<u32>, y_hi: Val<u32>, ly_cells: Val<u32>, counts: Out<u32>,
        ),
        init_chunk_sums: "mpc_init_chunk_sums"(
            seed: Val<u64>, lx: Val<f64>, ly: Val<f64>, lz: Val<f64>, sigma: Val<f64>,
            n: Val<u64>, chunk: Val<u32>, first_chunk: Val<u64>, nchunks: Val<u32>,
            m0: Val<f64>, m1: Val<f64>, m2: Val<f64>, partial: Out<f64>,
        ),
        init_slab: "mpc_init_slab"(
            seed: Val<u64>, lx: Val<f64>, ly: Val<f64>, lz: Val<f64>, sigma: Val<f64>,
            n: Val<u64>, y_lo: Val<u32>, y_hi: Val<u32>, ly_cells: Val<u32>, offsets: In<u64>,
            settle: Val<u32>, m0: Val<f64>, m1: Val<f64>, m2: Val<f64>, scale: Val<f64>,
            shear: Val<f64>, px: Out<f32>, py: Out<f32>, pz: Out<f32>, vx: Out<f64>,
            vy: Out<f64>, vz: Out<f64>, ids: Out<u32>,
        ),
    }
}

/// Every kernel of both tables (the fluid's and the rules'): file, entry point, parameters.
#[cfg(test)]
fn all_signatures() -> Vec<(&'static str, &'static str, Vec<String>)> {
    let mut all = FluidKernels::signatures();
    all.extend(super::rule_kernels::RuleKernels::signatures());
    all
}

/// Every kernel entry point the backend loads (checked against the sources in tests).
#[cfg(test)]
pub(super) fn kernel_names() -> Vec<&'static str> {
    all_signatures().into_iter().map(|(_, n, _)| n).collect()
}

/// Each kernels file with the entry points the table lists for it.
#[cfg(test)]
pub(super) fn kernels_by_file() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out: Vec<(&str, Vec<&str>)> = Vec::new();
    for (file, name, _) in all_signatures() {
        match out.iter_mut().find(|(f, _)| *f == file) {
            Some((_, names)) => names.push(name),
            None => out.push((file, vec![name])),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every fluid kernel's parameters in the tables (what its typed launcher takes) are those
    /// its CUDA source declares, type for type.
    #[test]
    fn the_kernel_table_matches_the_kernels_signatures() {
        let sources = super::super::launch::cuda_signatures(&super::super::kernels::full_source());
        let problems = super::super::launch::check_table(&all_signatures(), &sources);
        assert!(
            problems.is_empty(),
            "the kernel tables (fluid_kernels.rs, rule_kernels.rs) and kernels/ disagree:\n{}\nfix: declare the \
             kernel's parameters in the table as the source does",
            problems.join("\n")
        );
    }
}
