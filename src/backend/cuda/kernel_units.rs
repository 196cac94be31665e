//! The fluid kernels compiled as one program per kernel, all at once on the host's cores.
//!
//! One translation unit of every fluid kernel takes NVRTC tens of seconds on a cold start
//! (the rule kernels instantiate every rule's templates, more so with the walls' code), and
//! NVRTC compiles one program on one thread. Each unit here is the same source with every other
//! kernel turned into an unused `static __device__` function, which NVRTC parses but does not
//! generate: the kernel's code is the one the whole source gives (same instructions, other
//! labels), and the cold start takes about as long as the largest kernel. Each unit's cubin is
//! kept in the kernel cache on its own; every GPU of the process loads every unit's module.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{CudaContext, CudaFunction, CudaModule};

use super::fluid_kernels::FluidKernels;
use super::kernels;
use super::rule_kernels::RuleKernels;
use crate::error::{MpcError, Result};

/// What marks a kernel in the sources (every one is `extern "C"`, see `launch::cuda_signatures`).
const KERNEL: &str = "extern \"C\" __global__ void";

/// `source` with every kernel but those `keep` names turned into an unused `static __device__`
/// function (its `__launch_bounds__` or bounds macro dropped: only kernels may carry one).
pub fn only_kernels(source: &str, keep: impl Fn(&str) -> bool) -> String {
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    while let Some(at) = rest.find(KERNEL) {
        out.push_str(&rest[..at]);
        let after = &rest[at + KERNEL.len()..];
        let Some((name, name_at)) = kernel_name(after) else {
            // not a definition we can read: left as it is (NVRTC then compiles it)
            out.push_str(KERNEL);
            rest = after;
            continue;
        };
        if keep(name) {
            out.push_str(KERNEL);
            out.push_str(&after[..name_at]);
        } else {
            out.push_str("static __device__ void ");
        }
        rest = &after[name_at..];
    }
    out.push_str(rest);
    out
}

/// The kernel's name after the `extern "C" __global__ void` marker and where it starts: the
/// word before the parameter list, past a `__launch_bounds__(...)`.
fn kernel_name(text: &str) -> Option<(&str, usize)> {
    let mut from = 0;
    loop {
        let open = from + text[from..].find('(')?;
        let before = &text[from..open];
        let word = before.split_whitespace().last()?;
        if word == "__launch_bounds__" {
            from = open + closing(&text[open..])? + 1;
            continue;
        }
        let valid = word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        return valid.then(|| (word, open - word.len()));
    }
}

/// The index of the parenthesis closing the one `s` starts with.
fn closing(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// The compiled units of one kernel set: each unit's kernels and cubin.
pub struct CompiledUnits {
    pub units: Vec<(Vec<&'static str>, Vec<u8>)>,
}

/// How many programs NVRTC compiles at once: `MPCBOX_COMPILE_THREADS`, else the host's cores,
/// at most 16 (each program holds a few hundred MB while it compiles).
fn compile_threads(units: usize) -> usize {
    let asked = crate::knobs::knobs()
        .get("MPCBOX_COMPILE_THREADS")
        .and_then(|v| v.parse::<usize>().ok());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    asked.unwrap_or(cores.min(16)).min(units).max(1)
}

/// Compile (or read back from the kernel cache in `cache`) one unit per kernel of `source`,
/// on several threads. `label` names the set in the cache and the start-up timing.
pub fn compile_units(
    label: &str,
    source: &str,
    kernel_names: &[&'static str],
    (major, minor): (i32, i32),
    cache: Option<&std::path::Path>,
) -> std::result::Result<CompiledUnits, String> {
    let t0 = std::time::Instant::now();
    let options = kernels::compile_options(major, minor);
    let next = AtomicUsize::new(0);
    let compiled = AtomicUsize::new(0);
    type Cubin = std::result::Result<Vec<u8>, String>;
    let results: Mutex<Vec<Option<Cubin>>> = Mutex::new(vec![None; kernel_names.len()]);
    let threads = compile_threads(kernel_names.len());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&name) = kernel_names.get(i) else {
                    break;
                };
                let unit_source = only_kernels(source, |k| k == name);
                let unit_label = format!("{}-{name}", label.trim_end_matches(".cu"));
                let r = super::kernel_cache::cached_in(
                    cache,
                    &unit_label,
                    &unit_source,
                    &options,
                    || {
                        let file = std::ffi::CString::new(format!("{unit_label}.cu"))
                            .map_err(|e| e.to_string())?;
                        kernels::compile_source_cubin(unit_source.clone(), &file, major, minor)
                    },
                )
                .map(|(cubin, kept)| {
                    if !kept {
                        compiled.fetch_add(1, Ordering::Relaxed);
                    }
                    cubin
                });
                results.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(r);
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    let mut units = Vec::with_capacity(kernel_names.len());
    for (&name, r) in kernel_names.iter().zip(results) {
        let cubin = r.unwrap_or_else(|| Err(format!("kernel {name} was not compiled")))?;
        units.push((vec![name], cubin));
    }
    let seconds = t0.elapsed().as_secs_f64();
    let fresh = compiled.load(Ordering::Relaxed);
    let how = if fresh > 0 { "compiled" } else { "read back" };
    crate::timing::record(format!("kernels {label} {how}"), seconds);
    tracing::info!(
        "{how} {label} for sm_{major}{minor} in {seconds:.2} s ({} kernels, {fresh} compiled, \
         {threads} threads, {} bytes)",
        units.len(),
        units.iter().map(|(_, c)| c.len()).sum::<usize>()
    );
    Ok(CompiledUnits { units })
}

/// The two sets of kernels a device loads: the fluid's (every run) and the rules' beside SRD
/// (only a run whose rule needs them: their units are the longest to compile).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelSet {
    Fluid,
    Rules,
}

impl KernelSet {
    /// The set's kernels, the longest compilations first (the streaming kernels carry the
    /// walls' paths), so that none starts last on a busy host.
    fn kernel_names(self) -> Vec<&'static str> {
        let mut kernels = match self {
            KernelSet::Fluid => FluidKernels::signatures(),
            KernelSet::Rules => RuleKernels::signatures(),
        };
        kernels.sort_by_key(|(file, _, _)| match *file {
            "rules.cu" => 0,
            "stream.cu" => 1,
            _ => 2,
        });
        kernels.into_iter().map(|(_, name, _)| name).collect()
    }
}

/// The kernels of `set` (without the walls' code, or with that of the wall shape `walls`, its
/// kernel code) for an architecture, compiled once per process.
pub fn kernel_units(
    set: KernelSet,
    major: i32,
    minor: i32,
    walls: Option<u32>,
) -> Result<Arc<CompiledUnits>> {
    type Store = Mutex<HashMap<(KernelSet, Option<u32>, i32, i32), Arc<CompiledUnits>>>;
    static STORE: OnceLock<Store> = OnceLock::new();
    let store = STORE.get_or_init(|| Mutex::new(HashMap::new()));
    // held while compiling: a second GPU asking for the same set waits for it, not compiles it
    let mut map = store.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(u) = map.get(&(set, walls, major, minor)) {
        return Ok(u.clone());
    }
    let set_label = match set {
        KernelSet::Fluid => "mpcbox_kernels",
        KernelSet::Rules => "mpcbox_rules",
    };
    let (label, source) = match walls {
        None => (format!("{set_label}.cu"), kernels::full_source()),
        Some(shape) => (
            format!("{set_label}_walls{shape}.cu"),
            kernels::walls_source(shape),
        ),
    };
    let names = set.kernel_names();
    let cache = super::kernel_cache::directory();
    let units = compile_units(&label, &source, &names, (major, minor), cache.as_deref())
        .map_err(MpcError::Device)?;
    let units = Arc::new(units);
    map.insert((set, walls, major, minor), units.clone());
    Ok(units)
}

/// Every unit's module loaded on one GPU, and which module holds each kernel.
pub struct KernelModules {
    modules: Vec<Arc<CudaModule>>,
    by_kernel: HashMap<&'static str, usize>,
}

impl KernelModules {
    /// Load every unit of `units` into `ctx`.
    pub fn load(ctx: &Arc<CudaContext>, units: &CompiledUnits) -> Result<KernelModules> {
        let mut modules = Vec::with_capacity(units.units.len());
        let mut by_kernel = HashMap::new();
        for (names, cubin) in &units.units {
            let module = ctx
                .load_module(cudarc::nvrtc::Ptx::from_binary(cubin.clone()))
                .map_err(|source| MpcError::Driver {
                    what: "module load".into(),
                    source,
                })?;
            for &name in names {
                by_kernel.insert(name, modules.len());
            }
            modules.push(module);
        }
        Ok(KernelModules { modules, by_kernel })
    }

    /// The kernel `name`, from the module of its unit.
    pub fn function(&self, name: &str) -> Result<CudaFunction> {
        let module = self
            .by_kernel
            .get(name)
            .and_then(|&i| self.modules.get(i))
            .ok_or_else(|| MpcError::Device(format!("CUDA kernel {name}: in no compiled unit")))?;
        module
            .load_function(name)
            .map_err(|e| MpcError::Device(format!("CUDA kernel {name}: {e:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = "#define BOUNDS __launch_bounds__(256, 4)\n\
        __device__ float twice(float x) { return 2.0f * x; }\n\
        extern \"C\" __global__ void BOUNDS first(float *x) { x[0] = twice(x[0]); }\n\
        extern \"C\" __global__ void __launch_bounds__(128) second(float *x) { __shared__ float s[4]; s[0] = x[0]; x[1] = s[0]; }\n\
        extern \"C\" __global__ void third(const float *x, float *y) { y[0] = x[0]; }\n";

    /// Only the kept kernel stays a kernel, with its bounds; the others become plain device
    /// functions without theirs; everything else is untouched.
    #[test]
    fn only_the_kept_kernel_stays_a_kernel() {
        let unit = only_kernels(SOURCE, |k| k == "second");
        assert!(
            unit.contains("extern \"C\" __global__ void __launch_bounds__(128) second(float *x)")
        );
        assert!(unit.contains("static __device__ void first(float *x)"));
        assert!(unit.contains("static __device__ void third(const float *x, float *y)"));
        assert_eq!(unit.matches(KERNEL).count(), 1);
        assert!(unit.contains("__device__ float twice(float x)"));
        assert!(unit.starts_with("#define BOUNDS __launch_bounds__(256, 4)\n"));
        let all = only_kernels(SOURCE, |_| true);
        assert_eq!(all, SOURCE);
    }

    /// Every kernel of the fluid's and the rules' tables is a kernel of the sources that the rewrite finds
    /// (a kernel it could not read would stay in every unit and be compiled 60 times).
    #[test]
    fn every_fluid_kernel_is_found_by_the_rewrite() {
        let source = kernels::full_source();
        let none = only_kernels(&source, |_| false);
        assert_eq!(
            none.matches(KERNEL).count(),
            0,
            "a kernel the rewrite cannot read"
        );
        let mut tables = FluidKernels::signatures();
        tables.extend(RuleKernels::signatures());
        for (file, name, _) in tables {
            let unit = only_kernels(&source, |k| k == name);
            assert_eq!(unit.matches(KERNEL).count(), 1, "{file}: {name}");
            assert!(unit.contains(&format!("{name}(")), "{name}");
        }
    }

    /// The units compile, each to a cubin holding just its kernel, and give the kernel the
    /// same PTX as the whole source (labels, debug lines and comments aside).
    #[test]
    #[cfg_attr(
        not(mpcbox_external),
        ignore = "needs NVRTC (pip install nvidia-cuda-nvrtc, its nvidia/cu13/lib on LD_LIBRARY_PATH); runs with MPCBOX_REQUIRE_EXTERNAL=1"
    )]
    fn a_unit_gives_its_kernel_the_code_of_the_whole_source() {
        kernels::require_nvrtc_for_tests();
        let mut opts = kernels::compile_options(9, 0);
        opts[0] = "--gpu-architecture=compute_90".into();
        let ptx = |source: String| {
            cudarc::nvrtc::compile_ptx_with_opts(
                source,
                cudarc::nvrtc::CompileOptions {
                    options: opts.clone(),
                    ..Default::default()
                },
            )
            .expect("compiles to PTX")
            .to_src()
        };
        let entry = |ptx: &str, name: &str| -> Vec<String> {
            let at = ptx
                .find(&format!(".entry {name}("))
                .expect("the kernel's entry");
            let end = at + ptx[at..].find("\n}\n").expect("the entry's end");
            ptx[at..end]
                .lines()
                .map(str::trim)
                .filter(|l| {
                    !l.is_empty()
                        && !l.starts_with(".loc")
                        && !l.starts_with("//")
                        && !l.starts_with(".shared")
                })
                .map(|l| {
                    let l = l.split("//").next().unwrap_or("").trim_end();
                    // branch labels are numbered per module
                    l.split_whitespace()
                        .map(|w| if w.contains("$L__") { "L" } else { w })
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .collect()
        };
        let source = kernels::full_source();
        let whole = ptx(source.clone());
        for name in ["mpc_stream_bin_warp", "mpc_rules_solute_collide"] {
            let unit = ptx(only_kernels(&source, |k| k == name));
            assert_eq!(unit.matches(".entry ").count(), 1, "{name}: one kernel");
            assert_eq!(entry(&unit, name), entry(&whole, name), "{name}");
        }
    }

    /// `ptxas`'s report of `kernel` compiled as a run compiles its unit: (registers, bytes of
    /// spill stores).
    fn ptxas_report(source: &str, kernel: &str) -> (u64, u64) {
        use cudarc::nvrtc::result;
        let unit = std::ffi::CString::new(only_kernels(source, |k| k == kernel)).unwrap();
        let prog = result::create_program(&unit, Some(c"spills.cu")).unwrap();
        let mut options = kernels::compile_options(9, 0);
        options.push("--ptxas-options=-v".into());
        // SAFETY: `prog` was created above and is destroyed after its last use below;
        // `options` outlives the call.
        let log = unsafe {
            result::compile_program(prog, &options).expect("the unit compiles");
            let log = result::get_program_log(prog).unwrap();
            let _ = result::destroy_program(prog);
            log
        };
        let log: String = log.iter().map(|&c| c as u8 as char).collect();
        let properties = format!("Function properties for {kernel}");
        let mut lines = log.lines().skip_while(|l| !l.contains(&properties));
        // "N bytes spill stores", "Used N registers": the number `back` words before `word`
        let mut number = |word: &str, back: usize| -> u64 {
            let line = lines
                .find(|l| l.split_whitespace().any(|w| w == word))
                .unwrap_or_else(|| panic!("no `{word}` in the ptxas report of {kernel}:\n{log}"));
            let words: Vec<&str> = line.split_whitespace().collect();
            let at = words.iter().position(|&w| w == word).unwrap();
            words[at - back].parse().unwrap()
        };
        let spilled = number("spill", 2);
        let registers = number("registers,", 1);
        (registers, spilled)
    }

    fn spill_stores(source: &str, kernel: &str) -> u64 {
        ptxas_report(source, kernel).1
    }

    /// The polymer's MD step (one-type LJ and FENE bonds, no energies) takes the force kernel
    /// compiled without the DPD passes and the energy sums: it keeps at most 72 registers (7
    /// blocks of 128 per multiprocessor, with four neighbours' positions in flight) and spills
    /// nothing. The general kernel's ~120 left a quarter of the warps to hide the neighbours'
    /// loads (docs/scaling.md).
    #[test]
    #[cfg_attr(
        not(mpcbox_external),
        ignore = "needs NVRTC (pip install nvidia-cuda-nvrtc, its nvidia/cu13/lib on LD_LIBRARY_PATH); runs with MPCBOX_REQUIRE_EXTERNAL=1"
    )]
    fn the_bonded_lj_force_kernel_keeps_few_registers() {
        kernels::require_nvrtc_for_tests();
        let source = kernels::md_source();
        let (general, _) = ptxas_report(&source, "md_forces");
        let (bonded, spilled) = ptxas_report(&source, "md_forces_lj1_bonds");
        assert!(
            bonded <= 72 && spilled == 0 && bonded < general,
            "md_forces_lj1_bonds: {bonded} registers (md_forces: {general}), {spilled} bytes spilled"
        );
    }

    /// Between walls the cell pass over every cell keeps the registers it has in a periodic
    /// box, under SRD and under MPC-AT: the virtual particles' fill, whose registers would be
    /// the pass's, runs in a kernel of its own over the cells a wall may cut (`cells.rs`). With
    /// the fill in the pass it took ~100 registers against 64 and cost twice the box's.
    #[test]
    #[cfg_attr(
        not(mpcbox_external),
        ignore = "needs NVRTC (pip install nvidia-cuda-nvrtc, its nvidia/cu13/lib on LD_LIBRARY_PATH); runs with MPCBOX_REQUIRE_EXTERNAL=1"
    )]
    fn the_cell_pass_between_walls_keeps_the_box_registers() {
        use super::super::contract::{WALLS_NONE, WALL_CODES};
        kernels::require_nvrtc_for_tests();
        let passes = ["mpc_cell_params", "mpc_rules_cell_params_at"];
        let box_source = kernels::full_source();
        let in_box = passes.map(|k| ptxas_report(&box_source, k).0);
        for (name, code) in WALL_CODES {
            if code == WALLS_NONE {
                continue;
            }
            let source = kernels::walls_source(code);
            for (kernel, box_registers) in passes.iter().zip(in_box) {
                let (registers, spilled) = ptxas_report(&source, kernel);
                assert!(
                    registers <= box_registers && spilled == 0,
                    "{kernel} for {name}: {registers} registers (box: {box_registers}), \
                     {spilled} bytes spilled"
                );
            }
        }
    }

    /// Kernels compiled for one wall shape: the streaming kernels of the plates, the pipe and
    /// the spheres and cylinders spill nothing. With every shape's code in them they spilled
    /// ~200 bytes per thread and walls cost 1.3-1.5× per particle instead of 1.1× (docs/walls.md).
    #[test]
    #[cfg_attr(
        not(mpcbox_external),
        ignore = "needs NVRTC (pip install nvidia-cuda-nvrtc, its nvidia/cu13/lib on LD_LIBRARY_PATH); runs with MPCBOX_REQUIRE_EXTERNAL=1"
    )]
    fn the_streaming_kernels_of_a_shape_do_not_spill() {
        use super::super::contract::{WALLS_OBSTACLE, WALLS_PIPE, WALLS_SLIT, WALLS_SPHERE};
        kernels::require_nvrtc_for_tests();
        let pass1 = ["mpc_collide_stream_bin", "mpc_stream_bin_warp"];
        for shape in [WALLS_SLIT, WALLS_PIPE, WALLS_SPHERE, WALLS_OBSTACLE] {
            let source = kernels::walls_source(shape);
            for kernel in pass1 {
                let spilled = spill_stores(&source, kernel);
                assert_eq!(
                    spilled, 0,
                    "{kernel} for wall shape {shape}: {spilled} bytes spilled"
                );
            }
        }
        let rules = ["mpc_rules_collide_stream_bin_at", "mpc_rules_stream_bin_at"];
        let slit = kernels::walls_source(WALLS_SLIT);
        for kernel in rules {
            assert_eq!(spill_stores(&slit, kernel), 0, "{kernel} between plates");
        }
    }
}
