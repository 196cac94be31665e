//! The CUDA kernel sources (`kernels/*.cu`, `kernels/*.cuh`, embedded at build time) and their
//! NVRTC compilation, once per process and GPU architecture.

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::sync::{Mutex, OnceLock};

use super::contract::contract_header;
use super::params::layout_checks;

/// `kernels/rng.cuh`: Philox4x32-10, det_ln and the per-cell draws (mirror of `src/rng.rs`).
pub const RNG_CUH: &str = include_str!("../../../kernels/rng.cuh");
/// `kernels/mpc.cuh`: the per-particle and per-cell step functions (mirror of `src/physics.rs`).
pub const MPC_CUH: &str = include_str!("../../../kernels/mpc.cuh");
/// `kernels/walls.cuh`: wall shapes, bounce-back and virtual particles (mirror of
/// `src/physics/walls/`).
pub const WALLS_CUH: &str = include_str!("../../../kernels/walls.cuh");
/// `kernels/wall_stream.cuh`: the bounce-back path and the virtual particles of the cut cells
/// (mirror of `Physics::stream_walled` and `Walls::fill_cell`), on the shapes of `walls.cuh`.
pub const WALL_STREAM_CUH: &str = include_str!("../../../kernels/wall_stream.cuh");
/// `kernels/wall_shapes.cuh`: the planar pore's and the cosine walls' formulas (mirror of
/// `src/physics/walls/pore.rs` and `cosine.rs`), which `walls.cuh` dispatches to.
pub const WALL_SHAPES_CUH: &str = include_str!("../../../kernels/wall_shapes.cuh");
/// `kernels/wrap.cuh`: periodic wrapping (mirror of `physics::wrap_f64`, `wrap_coordinate`),
/// first in both units.
pub const WRAP_CUH: &str = include_str!("../../../kernels/wrap.cuh");
/// `kernels/wall_field.cuh`: walls given as data, a distance field on a grid (mirror of
/// `src/physics/walls/field.rs`).
pub const WALL_FIELD_CUH: &str = include_str!("../../../kernels/wall_field.cuh");

/// The fluid kernels' sources in dependency order: the shared headers (`rng.cuh` and `mpc.cuh`
/// mirror `src/rng.rs` and `src/physics.rs`; `cell_sums.cuh` and `migrate.cuh` are the device
/// side of `cell_sums.rs` and `multi/migrate.rs`), then one `.cu` file per step of the MPC
/// algorithm, named after the module of this backend that launches its kernels (`stream.cu`
/// by `stream.rs`, `migrate.cu` by `multi/migrate.rs`, ...; each file's first line names it).
pub const FLUID_SOURCES: &[(&str, &str)] = &[
    ("wrap.cuh", WRAP_CUH),
    ("rng.cuh", RNG_CUH),
    ("wall_shapes.cuh", WALL_SHAPES_CUH),
    ("wall_field.cuh", WALL_FIELD_CUH),
    ("walls.cuh", WALLS_CUH),
    ("report.cuh", include_str!("../../../kernels/report.cuh")),
    ("wall_stream.cuh", WALL_STREAM_CUH),
    ("mpc.cuh", MPC_CUH),
    (
        "cell_sums.cuh",
        include_str!("../../../kernels/cell_sums.cuh"),
    ),
    ("migrate.cuh", include_str!("../../../kernels/migrate.cuh")),
    ("rules.cuh", include_str!("../../../kernels/rules.cuh")),
    (
        "rule_sums.cuh",
        include_str!("../../../kernels/rule_sums.cuh"),
    ),
    (
        "wall_rules.cuh",
        include_str!("../../../kernels/wall_rules.cuh"),
    ),
    ("stream.cu", include_str!("../../../kernels/stream.cu")),
    ("solutes.cu", include_str!("../../../kernels/solutes.cu")),
    (
        "device_solutes.cu",
        include_str!("../../../kernels/device_solutes.cu"),
    ),
    (
        "solute_routes.cu",
        include_str!("../../../kernels/solute_routes.cu"),
    ),
    ("cells.cu", include_str!("../../../kernels/cells.cu")),
    ("collide.cu", include_str!("../../../kernels/collide.cu")),
    ("rules.cu", include_str!("../../../kernels/rules.cu")),
    ("migrate.cu", include_str!("../../../kernels/migrate.cu")),
    ("observe.cu", include_str!("../../../kernels/observe.cu")),
    ("reorder.cu", include_str!("../../../kernels/reorder.cu")),
    ("debug.cu", include_str!("../../../kernels/debug.cu")),
    ("init.cu", include_str!("../../../kernels/init.cu")),
];

/// `kernels/md.cu`: the kernels of the GPU MD engine (`crate::md::gpu`).
pub const MD_CU: &str = include_str!("../../../kernels/md.cu");
/// `kernels/md_boundary.cuh`: the MD engine's periodic / Lees-Edwards box and random numbers.
pub const MD_BOUNDARY_CUH: &str = include_str!("../../../kernels/md_boundary.cuh");

/// One translation unit of `sources`: each file after a `#line` marker (so NVRTC's messages
/// name the file and line), `#pragma once` dropped (meaningless in one concatenated unit);
/// `MPCBOX_NVRTC` skips the `#include`s, which only serve editors and offline compilers.
pub fn translation_unit(sources: &[(&str, &str)]) -> String {
    let mut s = String::with_capacity(sources.iter().map(|(_, t)| t.len() + 32).sum());
    for (name, text) in sources {
        s.push_str(&format!("#line 1 \"{name}\"\n"));
        s.push_str(&text.replace("#pragma once", ""));
        s.push('\n');
    }
    s
}

/// `kernels/md_items.cuh`: the MD engine's slab ownership, work-list items and warp atomics.
pub const MD_ITEMS_CUH: &str = include_str!("../../../kernels/md_items.cuh");

/// `kernels/md_forces.cu`: the GPU MD engine's pair, bond and angle forces
/// (`crate::md::gpu::forces`).
pub const MD_FORCES_CU: &str = include_str!("../../../kernels/md_forces.cu");

/// `kernels/md_walls.cu`: the GPU MD engine's wall forces (`crate::md::walls`).
pub const MD_WALLS_CU: &str = include_str!("../../../kernels/md_walls.cu");

/// `kernels/md_observe.cu`: the GPU MD engine's reductions for observables
/// (`crate::md::gpu::observe`).
pub const MD_OBSERVE_CU: &str = include_str!("../../../kernels/md_observe.cu");

/// `kernels/md_slabs.cu`: the exchanges of the MD engine decomposed over y slabs
/// (`crate::md::gpu::slabs`).
pub const MD_SLABS_CU: &str = include_str!("../../../kernels/md_slabs.cu");

/// The translation unit of the MD kernels: wrap.cuh, rng.cuh, wall_shapes.cuh, wall_field.cuh and walls.cuh
/// (the wall shapes),
/// md_boundary.cuh, md_items.cuh, md.cu, md_forces.cu, md_walls.cu, md_observe.cu, then
/// md_slabs.cu.
pub fn md_source() -> String {
    let sources = translation_unit(&[
        ("wrap.cuh", WRAP_CUH),
        ("rng.cuh", RNG_CUH),
        ("wall_shapes.cuh", WALL_SHAPES_CUH),
        ("wall_field.cuh", WALL_FIELD_CUH),
        ("walls.cuh", WALLS_CUH),
        ("md_boundary.cuh", MD_BOUNDARY_CUH),
        ("md_items.cuh", MD_ITEMS_CUH),
        ("md.cu", MD_CU),
        ("md_forces.cu", MD_FORCES_CU),
        ("md_walls.cu", MD_WALLS_CU),
        ("md_observe.cu", MD_OBSERVE_CU),
        ("md_slabs.cu", MD_SLABS_CU),
    ]);
    format!("{}{sources}{}", contract_header(), layout_checks(false))
}

/// The fluid kernels' translation unit handed to NVRTC.
pub fn full_source() -> String {
    format!(
        "{}{}{}",
        contract_header(),
        translation_unit(FLUID_SOURCES),
        layout_checks(true)
    )
}

/// NVRTC options: the device's real architecture, no fused multiply-add (so the arithmetic
/// rounds exactly as the Rust code), IEEE division and square root; then the whitespace-separated
/// options in `MPCBOX_NVRTC_OPTIONS`, a tuning knob for benchmarks (e.g.
/// `-DMPC_PASS1_MIN_BLOCKS=6` or `--maxrregcount=40`): options that change arithmetic defeat the
/// agreement with the CPU.
pub fn compile_options(major: i32, minor: i32) -> Vec<String> {
    let mut options = base_compile_options(major, minor);
    if let Some(extra) = crate::knobs::knobs().get("MPCBOX_NVRTC_OPTIONS") {
        options.extend(extra.split_whitespace().map(str::to_string));
    }
    options
}

fn base_compile_options(major: i32, minor: i32) -> Vec<String> {
    vec![
        format!("--gpu-architecture=sm_{major}{minor}"),
        "--fmad=false".into(),
        "--prec-div=true".into(),
        "--prec-sqrt=true".into(),
        "--ftz=false".into(),
        "--std=c++17".into(),
        "-DMPCBOX_NVRTC".into(),
        "-lineinfo".into(),
    ]
}

fn c_chars_to_string(v: &[std::ffi::c_char]) -> String {
    let bytes: Vec<u8> = v.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Compile one translation unit `source` to a cubin with [`compile_options`].
pub fn compile_source_cubin(
    source: String,
    name: &CStr,
    major: i32,
    minor: i32,
) -> Result<Vec<u8>, String> {
    use cudarc::nvrtc::{result, sys};
    let src = CString::new(source).map_err(|e| format!("kernel source: {e}"))?;
    let prog = result::create_program(&src, Some(name))
        .map_err(|e| format!("nvrtcCreateProgram failed: {e:?}"))?;
    let opts = compile_options(major, minor);
    // SAFETY: `prog` was created just above and is destroyed only on the paths below, after
    // its last use; `opts` outlives the call.
    let compiled = unsafe { result::compile_program(prog, &opts) };
    // SAFETY: `prog` is live (as above); the log is copied into a Rust string.
    let log = unsafe { result::get_program_log(prog) }
        .map(|l| c_chars_to_string(&l))
        .unwrap_or_default();
    if let Err(e) = compiled {
        // SAFETY: `prog` is live and not used after this call.
        let _ = unsafe { result::destroy_program(prog) };
        return Err(format!(
            "NVRTC could not compile the kernels ({e:?}) with {opts:?}:\n{log}"
        ));
    }
    if !log.trim().is_empty() {
        tracing::debug!("NVRTC log: {log}");
    }
    let mut size = 0usize;
    // SAFETY: `prog` compiled successfully and is live until `destroy_program`, after which it
    // is not used; `size` is a valid out-pointer, and `buf` holds exactly the `size` bytes
    // that nvrtcGetCUBIN writes.
    let cubin = unsafe {
        let r = sys::nvrtcGetCUBINSize(prog, &mut size as *mut usize);
        if r != sys::nvrtcResult::NVRTC_SUCCESS {
            let _ = result::destroy_program(prog);
            return Err(format!("nvrtcGetCUBINSize failed: {r:?}"));
        }
        let mut buf = vec![0u8; size];
        let r = sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr() as *mut std::ffi::c_char);
        let _ = result::destroy_program(prog);
        if r != sys::nvrtcResult::NVRTC_SUCCESS {
            return Err(format!("nvrtcGetCUBIN failed: {r:?}"));
        }
        buf
    };
    Ok(cubin)
}

/// A module's cubin for an architecture, compiled on first use and kept for the process.
fn cached_cubin(
    name: &'static CStr,
    source: fn() -> String,
    major: i32,
    minor: i32,
) -> Result<Vec<u8>, String> {
    type CubinCache = Mutex<HashMap<(&'static CStr, i32, i32), Vec<u8>>>;
    static CACHE: OnceLock<CubinCache> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut map = cache.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(c) = map.get(&(name, major, minor)) {
        return Ok(c.clone());
    }
    let t0 = std::time::Instant::now();
    let src = source();
    let options = compile_options(major, minor);
    let label = name.to_string_lossy();
    let dir = super::kernel_cache::directory();
    let (c, kept) = super::kernel_cache::cached_in(dir.as_deref(), &label, &src, &options, || {
        compile_source_cubin(src.clone(), name, major, minor)
    })?;
    let seconds = t0.elapsed().as_secs_f64();
    let how = if kept { "read back" } else { "compiled" };
    crate::timing::record(format!("kernels {label} {how}"), seconds);
    tracing::info!(
        "{how} {label} for sm_{major}{minor} in {seconds:.2} s ({} bytes)",
        c.len()
    );
    map.insert((name, major, minor), c.clone());
    Ok(c)
}

/// The fluid kernels with the walls' code for one wall shape (`MPC_WALLS` set, and
/// `MPC_WALLS_SHAPE` to the shape's code, `contract::wall_kind`): the same kernels, whose
/// streaming bounces off that shape and whose cell pass adds virtual particles. Only that
/// shape's code is generated: with every shape's, the streaming kernels spilled some 200 bytes
/// of registers per thread. Runs without walls use [`full_source`], where the walls' code is
/// left out.
pub fn walls_source(shape: u32) -> String {
    format!(
        "#define MPC_WALLS 1\n#define MPC_WALLS_SHAPE {shape}u\n{}",
        full_source()
    )
}

/// The MD engine's cubin for an architecture (compiled once per process).
pub fn md_cubin_for(major: i32, minor: i32) -> Result<Vec<u8>, String> {
    cached_cubin(c"mpcbox_md.cu", md_source, major, minor)
}

/// For tests that compile the kernels without a GPU: NVRTC must be loadable. They run where
/// `MPCBOX_REQUIRE_EXTERNAL` is set (CI installs NVRTC from PyPI) and on GPU machines, and
/// are ignored elsewhere: a missing library fails them rather than hiding a broken kernel.
pub fn require_nvrtc_for_tests() {
    assert!(
        super::nvrtc_present(),
        "NVRTC is missing; fix: pip install nvidia-cuda-nvrtc and put its nvidia/cu13/lib on \
         LD_LIBRARY_PATH (see .ci/run)"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_forbid_fused_multiply_add() {
        let o = compile_options(9, 0);
        assert!(o.contains(&"--fmad=false".to_string()));
        assert!(o.contains(&"--gpu-architecture=sm_90".to_string()));
    }

    /// No `case` of a kernel's `switch` runs on into the next one (a merge once left a shape's
    /// normal falling through into the distance field's, which read a null grid): the last
    /// statement before every `case`/`default` label (or before the `}` closing its block)
    /// leaves the switch. A block that ends in a nested block is not judged.
    #[test]
    fn no_case_falls_through_in_the_kernels() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
        let leaves = |l: &str| {
            l.starts_with("return")
                || l.ends_with("break;")
                || l.ends_with("continue;")
                || l.ends_with("__trap();")
                || (l.contains(" return ") && l.ends_with(';'))
        };
        let mut files = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            files += 1;
            let lines: Vec<&str> = text
                .lines()
                .map(|l| l.split("//").next().unwrap_or("").trim())
                .collect();
            let before = |i: usize| (0..i).rev().find(|&j| !lines[j].is_empty());
            for (i, l) in lines.iter().enumerate() {
                if !(l.starts_with("case ") || l.starts_with("default:")) {
                    continue;
                }
                let Some(j) = before(i) else { continue };
                let p = lines[j];
                let ok = if p == "}" {
                    before(j).is_none_or(|k| lines[k] == "}" || leaves(lines[k]))
                } else {
                    p.ends_with(':') || p.ends_with('{') || leaves(p)
                };
                assert!(
                    ok,
                    "{}:{}: the case before runs on into `{l}` (end it with return or break)",
                    path.display(),
                    i + 1
                );
            }
        }
        assert!(files > 10, "kernels/ read");
    }

    /// Compiles the kernels (fluid, fluid with walls, MD) with NVRTC (no GPU needed).
    #[test]
    #[cfg_attr(
        not(mpcbox_external),
        ignore = "needs NVRTC (pip install nvidia-cuda-nvrtc, its nvidia/cu13/lib on LD_LIBRARY_PATH); runs with MPCBOX_REQUIRE_EXTERNAL=1"
    )]
    fn kernels_compile_with_nvrtc_when_available() {
        require_nvrtc_for_tests();
        // the fluid's and the rules' tables
        let names = super::super::fluid_kernels::kernel_names();
        // as a run compiles them: one unit per kernel (kernel_units), no cache
        let units = |source: String| {
            let compiled =
                super::super::kernel_units::compile_units("test.cu", &source, &names, (9, 0), None)
                    .expect("kernels compile");
            assert_eq!(compiled.units.len(), names.len());
            assert!(compiled.units.iter().all(|(_, c)| c.len() > 1000));
            compiled.units.iter().map(|(_, c)| c.len()).sum::<usize>()
        };
        let plain = units(full_source());
        for &(name, code) in &super::super::contract::WALL_CODES[1..] {
            let walls = units(walls_source(code));
            assert!(
                walls > plain,
                "{name}: the walls' code is in the walls' kernels"
            );
        }
        let md = compile_source_cubin(md_source(), c"md.cu", 9, 0).expect("MD kernels compile");
        assert!(md.len() > 1000);
    }

    /// A Rust/CUDA disagreement cannot build: the fluid kernels with one layout check of the
    /// generated source altered (as if `MpcParams` had gained a field Rust lacks) fail to
    /// compile, and so do the MD kernels with `MpcWalls`' check altered. (The codes and
    /// tables cannot disagree: only the generated header defines them, `contract::tests`.)
    #[test]
    #[cfg_attr(
        not(mpcbox_external),
        ignore = "needs NVRTC (pip install nvidia-cuda-nvrtc, its nvidia/cu13/lib on LD_LIBRARY_PATH); runs with MPCBOX_REQUIRE_EXTERNAL=1"
    )]
    fn a_rust_cuda_mismatch_fails_to_compile() {
        require_nvrtc_for_tests();
        let size = std::mem::size_of::<super::super::params::KernelParams>();
        let check = format!("static_assert(sizeof(MpcParams) == {size}");
        let source = full_source();
        assert!(source.contains(&check), "the layout check is generated");
        let altered = source.replace(
            &check,
            &format!("static_assert(sizeof(MpcParams) == {}", size + 8),
        );
        let err = compile_source_cubin(altered, c"altered.cu", 9, 0)
            .expect_err("a layout mismatch must not compile");
        assert!(err.contains("MpcParams"), "{err}");
        let walls = std::mem::size_of::<super::super::params::WallParams>();
        let check = format!("static_assert(sizeof(MpcWalls) == {walls}");
        let altered = md_source().replace(
            &check,
            &format!("static_assert(sizeof(MpcWalls) == {}", walls + 8),
        );
        assert!(compile_source_cubin(altered, c"altered_md.cu", 9, 0).is_err());
    }
}

#[cfg(test)]
mod ptx_tests {
    use super::*;

    /// With --fmad=false the generated code must contain no fused multiply-add in f64 or f32.
    #[test]
    #[cfg_attr(
        not(mpcbox_external),
        ignore = "needs NVRTC (pip install nvidia-cuda-nvrtc, its nvidia/cu13/lib on LD_LIBRARY_PATH); runs with MPCBOX_REQUIRE_EXTERNAL=1"
    )]
    fn ptx_has_no_fused_multiply_add_when_nvrtc_available() {
        require_nvrtc_for_tests();
        let mut opts = compile_options(9, 0);
        opts[0] = "--gpu-architecture=compute_90".into();
        let cosine = super::super::contract::WALLS_COSINE;
        let sources = [(full_source(), None), (walls_source(cosine), Some(cosine))];
        let slit = super::super::contract::WALLS_SLIT;
        for (source, walls) in sources
            .into_iter()
            .chain([(walls_source(slit), Some(slit))])
        {
            let ptx = cudarc::nvrtc::compile_ptx_with_opts(
                source,
                cudarc::nvrtc::CompileOptions {
                    options: opts.clone(),
                    ..Default::default()
                },
            )
            .expect("kernels compile to PTX")
            .to_src();
            assert!(ptx.contains("mpc_collide"));
            assert_eq!(
                ptx.contains("mpc_stream_walled"),
                walls.is_some(),
                "walls code only with MPC_WALLS"
            );
            // kernels compiled for one shape carry no other shape's code
            assert_eq!(
                ptx.contains("mpc_cosine_first_contact"),
                walls == Some(cosine),
                "the cosine walls' code only in their kernels ({walls:?})"
            );
            assert!(!ptx.contains("fma.rn.f64"), "PTX contains f64 FMA");
            assert!(!ptx.contains("fma.rn.f32"), "PTX contains f32 FMA");
        }
    }
}
