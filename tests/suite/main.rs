//! The integration tests of `mpcbox`, one module per subject, in one test binary (one link of
//! the library instead of one per file: the cold `cargo test` of a fresh machine builds in
//! minutes). Physics and behaviour tests are written once and instantiated on every
//! platform (`common::platform`); GPU instances are `#[ignore]`d and run on a GPU machine with
//! `--ignored`, filtered by module (`md_slabs::`) or platform (`::gpu`). Tests that drive
//! external tools (MPI, Python readers, NVRTC) run where MPCBOX_REQUIRE_EXTERNAL is set and are
//! ignored, naming the tool, elsewhere (`external_tools`).

mod codebase;
mod common;

mod async_checkpoints;
mod begun_steps;
mod checkpoint_faults;
mod cli;
mod configs;
mod conservation;
mod coupling;
mod determinism;
mod device_solutes;
mod external_tools;
mod faults;
mod faults_disk;
mod flow_fields;
mod gpu_backend;
mod gpu_multi_solutes;
mod gsd_file;
mod host_memory;
mod md_bonds_io;
mod md_gpu;
mod md_neighbor;
mod md_overlap;
mod md_physics;
mod md_polymer;
mod md_shear;
mod md_shear_lists;
mod md_slabs;
mod md_walls;
mod mpi_gpu;
mod mpi_ranks;
mod mpi_solutes;
mod mpi_walls;
mod ownership;
mod polymer_shear;
mod reproducibility;
mod routed_solutes;
mod rules_collision;
mod rules_steps;
mod rules_viscosity;
mod shear_viscosity;
mod startup;
mod thermostat;
mod walls;
mod walls_data;
mod walls_flow;
mod walls_pores;
mod walls_rules;
mod walls_shapes;
