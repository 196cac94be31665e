//! The bundled MD engine on a platform: the CPU engine (`Md`, the reference) or the GPU one
//! (`GpuMd`), behind the calls the MD matrix tests make (tests/suite/md_physics.rs).

use mpcbox::md::build::{maxwell_velocities, random_gas};
use mpcbox::md::{
    DpdParams, ForceField, GpuMd, Md, MdSettings, MdThermostat, NeighborMode, PairStyle, System,
};

use super::Platform;

/// Settings of the engine tests: Verlet lists with skin 0.3, particles reordered every 10
/// steps.
pub fn md_settings(dt: f64, kt: f64, seed: u64, threads: usize) -> MdSettings {
    MdSettings {
        dt,
        kt,
        seed,
        skin: 0.3,
        neighbor: NeighborMode::Verlet,
        reorder_every: 10,
        threads,
        shear: None,
    }
}

/// A DPD fluid of density `rho` in an `l`³ box (a = 25, γ = 4.5, kT = 1, rc = 1, w_R = 1 − r/rc,
/// Groot & Warren's), at kT = 1.
pub fn dpd_fluid_system(l: f64, rho: f64) -> (System, ForceField) {
    let n = (rho * l * l * l).round() as usize;
    let mut sys = random_gas(n, [l; 3], 1.0, 5);
    maxwell_velocities(&mut sys, 1.0, 6);
    let ff = ForceField {
        pair: PairStyle::Dpd(DpdParams::uniform(1, 25.0, 4.5, 1.0, 1.0)),
        bond_styles: vec![],
    };
    (sys, ff)
}

/// (Boxed: the engines differ in size by kilobytes.)
pub enum MdEngine {
    Cpu(Box<Md>),
    Gpu(Box<GpuMd>),
}

impl MdEngine {
    /// The engine of `p` (GPU 0 for a GPU; the MD engine runs on one GPU only).
    pub fn new(
        p: Platform,
        sys: System,
        ff: ForceField,
        thermostat: MdThermostat,
        settings: MdSettings,
    ) -> MdEngine {
        match p {
            Platform::Cpu => {
                MdEngine::Cpu(Box::new(Md::new(sys, ff, thermostat, settings).unwrap()))
            }
            Platform::Gpu | Platform::GpuVariant(_) => {
                let gpu = GpuMd::new(sys, ff, thermostat, settings, 0).expect("GPU engine");
                MdEngine::Gpu(Box::new(gpu))
            }
            Platform::MultiGpu(_) | Platform::Slabs(_) | Platform::CpuSlabs(_) => {
                panic!("this MD engine runs on one device")
            }
        }
    }

    pub fn len(&self) -> usize {
        match self {
            MdEngine::Cpu(md) => md.sys.len(),
            MdEngine::Gpu(md) => md.len(),
        }
    }

    pub fn run(&mut self, steps: u64) {
        match self {
            MdEngine::Cpu(md) => md.run(steps).unwrap(),
            MdEngine::Gpu(md) => md.run(steps).unwrap(),
        }
    }

    pub fn potential_energy(&self) -> f64 {
        match self {
            MdEngine::Cpu(md) => md.potential_energy(),
            MdEngine::Gpu(md) => md.potential_energy(),
        }
    }

    pub fn total_energy(&mut self) -> f64 {
        match self {
            MdEngine::Cpu(md) => md.total_energy(),
            MdEngine::Gpu(md) => md.total_energy().unwrap(),
        }
    }

    pub fn temperature(&mut self) -> f64 {
        match self {
            MdEngine::Cpu(md) => md.temperature(),
            MdEngine::Gpu(md) => md.temperature().unwrap(),
        }
    }

    pub fn pressure(&mut self) -> f64 {
        match self {
            MdEngine::Cpu(md) => md.pressure(),
            MdEngine::Gpu(md) => md.pressure().unwrap(),
        }
    }

    pub fn momentum(&mut self) -> [f64; 3] {
        match self {
            MdEngine::Cpu(md) => md.momentum(),
            MdEngine::Gpu(md) => md.momentum().unwrap(),
        }
    }

    /// Put the engine at MD step `step` (its Lees-Edwards offset) and recompute forces.
    pub fn set_step(&mut self, step: u64) {
        match self {
            MdEngine::Cpu(md) => md.set_step(step).unwrap(),
            MdEngine::Gpu(md) => md.set_step(step).unwrap(),
        }
    }

    /// Forces of the current configuration, by atom id (tag order).
    pub fn forces_by_tag(&mut self) -> Vec<[f64; 3]> {
        let (f, tags) = match self {
            MdEngine::Cpu(md) => (md.forces().to_vec(), md.sys.tag.clone()),
            MdEngine::Gpu(md) => (md.forces().unwrap(), md.system().unwrap().tag.clone()),
        };
        let mut order: Vec<usize> = (0..f.len()).collect();
        order.sort_unstable_by_key(|&i| tags[i]);
        order.into_iter().map(|i| f[i]).collect()
    }

    /// Verlet list builds so far.
    pub fn list_builds(&self) -> u64 {
        match self {
            MdEngine::Cpu(md) => md.list_builds(),
            MdEngine::Gpu(md) => md.list_builds(),
        }
    }

    /// The system with current positions and velocities (downloaded from a GPU).
    pub fn system(&mut self) -> &System {
        match self {
            MdEngine::Cpu(md) => &md.sys,
            MdEngine::Gpu(md) => md.system().unwrap(),
        }
    }
}
