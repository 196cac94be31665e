//! The test matrix: a physics or behaviour test is a function `fn name(p: Platform)`, written
//! once, and [`backend_tests!`](crate::common::backend_tests) instantiates it on every platform
//! (OpenMM style). GPU instances follow the CPU, the reference platform.

use std::fmt;

use mpcbox::backend::cuda;
use mpcbox::config::{CellSumMethod, Config, DeviceChoice, SumArithmetic};
use mpcbox::md::gpu::MdBackend;
use mpcbox::physics::Physics;
use mpcbox::state::FluidState;
use mpcbox::Solvent;

/// Where a matrix test runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Platform {
    /// The rayon CPU backend: the reference.
    Cpu,
    /// One CUDA GPU (ordinal 0).
    Gpu,
    /// This many CUDA GPUs (ordinals 0, 1, …), one y slab each.
    MultiGpu(usize),
    /// This many y slabs (`tuning.slabs`) on the GPUs present (at most as many as slabs, in
    /// contiguous blocks): the N-slab decomposition on one or two GPUs.
    Slabs(usize),
    /// This many y slabs on the CPU (`tuning.slabs`, `backend::slabbed`): the decomposition
    /// that MPI ranks extend over processes, run in one process.
    CpuSlabs(usize),
    /// One CUDA GPU with a choice other than the defaults pinned in the config: the other
    /// dimensions of the matrix ([`GpuVariant::ALL`]).
    GpuVariant(GpuVariant),
}

/// The choices beside the device that change how a GPU run is computed, not what: the cell-sum
/// method (`tuning.cuda_method`), the sums' arithmetic (`tuning.sums`) and the bundled MD
/// engine's backend (`md.backend`, where the config has an MD section).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuVariant {
    pub method: CellSumMethod,
    pub sums: SumArithmetic,
    pub md: MdBackend,
}

impl GpuVariant {
    /// Every cell-sum method with fixed-point sums, f64 sums with the default method and with
    /// the method whose atomics race most (`Atomics`), and the MD engine on the CPU beside the
    /// GPU's fluid. (The plain `Gpu` platform is the defaults: `Fused`, fixed point, MD on the
    /// GPU.)
    pub const ALL: [GpuVariant; 8] = [
        GpuVariant::fixed(CellSumMethod::Atomics),
        GpuVariant::fixed(CellSumMethod::Warp),
        GpuVariant::fixed(CellSumMethod::Shared),
        GpuVariant::fixed(CellSumMethod::List),
        GpuVariant::fixed(CellSumMethod::FusedShared),
        GpuVariant {
            sums: SumArithmetic::Float,
            ..GpuVariant::fixed(CellSumMethod::Fused)
        },
        GpuVariant {
            sums: SumArithmetic::Float,
            ..GpuVariant::fixed(CellSumMethod::Atomics)
        },
        GpuVariant {
            md: MdBackend::Cpu,
            ..GpuVariant::fixed(CellSumMethod::Fused)
        },
    ];

    const fn fixed(method: CellSumMethod) -> GpuVariant {
        GpuVariant {
            method,
            sums: SumArithmetic::Fixed,
            md: MdBackend::Cuda,
        }
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Platform::Cpu => write!(f, "CPU"),
            Platform::Gpu => write!(f, "1 GPU"),
            Platform::MultiGpu(g) => write!(f, "{g} GPUs"),
            Platform::Slabs(n) => write!(f, "{n} slabs on {} GPU(s)", Platform::gpus_for(*n)),
            Platform::CpuSlabs(n) => write!(f, "{n} slabs on the CPU"),
            Platform::GpuVariant(v) => write!(
                f,
                "1 GPU ({} cell sums, {}, MD {:?})",
                v.method.name(),
                v.sums.name(),
                v.md
            ),
        }
    }
}

impl Platform {
    /// The most GPUs a multi-GPU instance uses.
    pub const MAX_GPUS: usize = 4;

    /// Every GPU present, at most [`Platform::MAX_GPUS`]; None, with a note, where there are
    /// fewer than two (the instance then passes without running).
    pub fn multi_gpu() -> Option<Platform> {
        let n = cuda::probe().expect("multi-GPU tests need CUDA GPUs");
        if n < 2 {
            eprintln!("skipped: this test needs two or more CUDA GPUs, found {n}");
            return None;
        }
        Some(Platform::MultiGpu(n.min(Self::MAX_GPUS)))
    }

    /// The slabs a [`Platform::Slabs`] instance uses.
    pub const SLABS: usize = 4;

    /// The GPUs `slabs` slabs spread over: every GPU present, at most one per slab.
    fn gpus_for(slabs: usize) -> usize {
        cuda::probe()
            .unwrap_or(1)
            .clamp(1, slabs.min(Self::MAX_GPUS))
    }

    /// Several y slabs (on several GPUs, or several on one).
    pub fn is_multi_gpu(self) -> bool {
        matches!(
            self,
            Platform::MultiGpu(_) | Platform::Slabs(_) | Platform::CpuSlabs(_)
        )
    }

    /// The decomposition's size: GPUs (one slab each), or slabs (0 on the CPU).
    pub fn gpus(self) -> usize {
        match self {
            Platform::Cpu => 0,
            Platform::Gpu | Platform::GpuVariant(_) => 1,
            Platform::MultiGpu(g) => g,
            Platform::Slabs(n) | Platform::CpuSlabs(n) => n,
        }
    }

    pub fn device(self) -> DeviceChoice {
        match self {
            Platform::Cpu => DeviceChoice::Cpu,
            Platform::Gpu | Platform::GpuVariant(_) => DeviceChoice::Cuda(vec![0]),
            Platform::MultiGpu(g) => DeviceChoice::Cuda((0..g as u32).collect()),
            Platform::Slabs(n) => DeviceChoice::Cuda((0..Platform::gpus_for(n) as u32).collect()),
            Platform::CpuSlabs(_) => DeviceChoice::Cpu,
        }
    }

    /// The platform that can run `cfg`: itself, except that several GPUs drop to as many as
    /// the box has slabs of the minimum thickness for (a note says so); None, with a note,
    /// where not even two slabs fit (the test then skips this set-up).
    pub fn fit(self, cfg: &Config) -> Option<Platform> {
        // CPU slabs route a particle to any slab: any thickness from one layer
        let (Platform::MultiGpu(g) | Platform::Slabs(g)) = self else {
            return Some(self);
        };
        let need = cuda::multi::min_slab_layers(&Physics::from_config(cfg));
        let fits = (cfg.cells[1] / need) as usize;
        if fits < 2 {
            eprintln!(
                "skipped on {self}: {} layers in y hold fewer than two slabs of {need}",
                cfg.cells[1]
            );
            return None;
        }
        if fits < g {
            eprintln!(
                "{} layers in y hold {fits} slabs of {need}: running {fits} of {g} slabs",
                cfg.cells[1]
            );
        }
        Some(match self {
            Platform::Slabs(_) => Platform::Slabs(g.min(fits)),
            _ => Platform::MultiGpu(g.min(fits)),
        })
    }

    /// `cfg` on this platform (see [`Platform::fit`]): the device set, all else unchanged.
    pub fn config(self, cfg: &Config) -> Option<Config> {
        let p = self.fit(cfg)?;
        let mut c = cfg.clone();
        c.device = p.device();
        c.tuning.slabs = match p {
            Platform::Slabs(n) | Platform::CpuSlabs(n) => n as u32,
            _ => 0,
        };
        if let Platform::GpuVariant(v) = p {
            c.tuning.cuda_method = Some(v.method);
            c.tuning.sums = Some(v.sums);
            if let Some(md) = &mut c.md {
                md.backend = v.md;
            }
        }
        Some(c)
    }

    /// A fresh solvent of `cfg` on this platform (see [`Platform::config`]), its backend
    /// checked.
    pub fn solvent(self, cfg: &Config) -> Option<Solvent> {
        let s = Solvent::new(self.config(cfg)?).unwrap();
        self.check_backend(&s.backend_description());
        Some(s)
    }

    /// The CPU run that a run of `cfg` on this platform is compared with, particle for
    /// particle: the same config on the CPU, for several GPUs without reordering (their
    /// downloads return the particles in their initial order). `cfg` must fix the reorder
    /// interval: the CPU and the GPUs default to different ones.
    pub fn reference(self, cfg: &Config) -> Config {
        assert!(
            cfg.tuning.reorder_interval.is_some(),
            "a comparison with the CPU needs tuning.reorder_interval set"
        );
        let mut c = cfg.clone();
        c.device = DeviceChoice::Cpu;
        if let Platform::GpuVariant(v) = self {
            c.tuning.sums = Some(v.sums);
        }
        if self.is_multi_gpu() {
            c.tuning.reorder_interval = Some(0);
        }
        c
    }

    /// This platform and, for several GPUs, every smaller count down to two (the slab
    /// boundaries move with the count).
    pub fn with_fewer_gpus(self) -> Vec<Platform> {
        match self {
            Platform::MultiGpu(g) => (2..=g).map(Platform::MultiGpu).collect(),
            Platform::Slabs(n) => (2..=n).map(Platform::Slabs).collect(),
            Platform::CpuSlabs(n) => (2..=n).map(Platform::CpuSlabs).collect(),
            p => vec![p],
        }
    }

    /// Asserts that a backend description is this platform's.
    pub fn check_backend(self, description: &str) {
        let ok = match self {
            Platform::Cpu => description.starts_with("cpu") && !description.contains("slabs"),
            Platform::CpuSlabs(_) => {
                description.starts_with("cpu") && description.contains("slabs")
            }
            Platform::Gpu | Platform::GpuVariant(_) => {
                description.starts_with("cuda") && !description.contains("slabs")
            }
            Platform::MultiGpu(_) | Platform::Slabs(_) => description.contains("slabs"),
        };
        assert!(ok, "{self}: backend {description}");
    }

    /// Two runs of the same steps on this platform hold the same fluid: bit for bit on the CPU;
    /// on GPUs to rounding here, so that f64 sums (`MPCBOX_CELL_SUMS=float`, atomics in varying
    /// order) pass too (the default fixed-point sums are bit for bit: `determinism.rs`).
    pub fn assert_same_fluid(self, a: &FluidState, b: &FluidState, what: &str) {
        if self == Platform::Cpu {
            assert!(a == b, "{what}: the fluid differs");
        } else {
            crate::common::compare_states(a, b, 1e-12, &format!("{self}, {what}"));
        }
    }

    /// As [`Platform::assert_same_fluid`], for solute velocities.
    pub fn assert_same_solutes(self, a: &[[f64; 3]], b: &[[f64; 3]], what: &str) {
        if self == Platform::Cpu {
            assert_eq!(a, b, "{what}");
        } else {
            crate::common::assert_solute_velocities_close(a, b, 1e-12, &format!("{self}, {what}"));
        }
    }
}

/// Instantiates test functions `fn name(p: Platform)` as `#[test]`s `name::cpu`, `name::gpu`
/// `name::multi_gpu` and `name::slabs` (a module per test, beside the function), or on the platforms listed
/// (`cpu_slabs` too: 2-4 slabs of the CPU, in CI; `gpu_variants`: one GPU once per
/// [`GpuVariant`], the cell-sum methods, f64 sums and the MD engine on the CPU)
/// first: `backend_tests!([gpu multi_gpu] name, ...)`. GPU instances are ignored by default
/// (`cargo test -- --ignored ::gpu` or `::multi_gpu` on a machine with GPUs); a multi-GPU
/// instance passes with a note where fewer than two GPUs exist.
macro_rules! backend_tests {
    (@module [$($platform:ident)+] $name:ident) => {
        mod $name {
            $( $crate::common::backend_tests!(@instance $platform $name); )+
        }
    };
    (@instance cpu $name:ident) => {
        #[test]
        fn cpu() {
            super::$name($crate::common::Platform::Cpu)
        }
    };
    (@instance gpu $name:ident) => {
        #[test]
        #[ignore = "needs a CUDA GPU"]
        fn gpu() {
            super::$name($crate::common::Platform::Gpu)
        }
    };
    (@instance cpu_slabs $name:ident) => {
        #[test]
        fn cpu_slabs() {
            super::$name($crate::common::Platform::CpuSlabs($crate::common::Platform::SLABS))
        }
    };
    (@instance slabs $name:ident) => {
        #[test]
        #[ignore = "needs a CUDA GPU"]
        fn slabs() {
            super::$name($crate::common::Platform::Slabs($crate::common::Platform::SLABS))
        }
    };
    (@instance gpu_variants $name:ident) => {
        #[test]
        #[ignore = "needs a CUDA GPU"]
        fn gpu_variants() {
            for v in $crate::common::GpuVariant::ALL {
                super::$name($crate::common::Platform::GpuVariant(v))
            }
        }
    };
    (@instance multi_gpu $name:ident) => {
        #[test]
        #[ignore = "needs two or more CUDA GPUs"]
        fn multi_gpu() {
            if let Some(p) = $crate::common::Platform::multi_gpu() {
                super::$name(p)
            }
        }
    };
    ($($name:ident),+ $(,)?) => {
        $crate::common::backend_tests!([cpu gpu multi_gpu slabs] $($name),+);
    };
    ($platforms:tt $($name:ident),+ $(,)?) => {
        $( $crate::common::backend_tests!(@module $platforms $name); )+
    };
}
pub(crate) use backend_tests;
