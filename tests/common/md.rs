//! The bundled MD engine on a platform: the CPU engine (`Md`, the reference) or the GPU one
//! (`GpuMd`), behind the calls the MD matrix tests make (tests/md_physics.rs).

use mpcbox::md::{ForceField, GpuMd, Md, MdSettings, MdThermostat, System};

use super::Platform;

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
            Platform::Gpu => {
                let gpu = GpuMd::new(sys, ff, thermostat, settings, 0).expect("GPU engine");
                MdEngine::Gpu(Box::new(gpu))
            }
            Platform::MultiGpu(_) => panic!("the MD engine runs on one GPU"),
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

    /// The system with current positions and velocities (downloaded from a GPU).
    pub fn system(&mut self) -> &System {
        match self {
            MdEngine::Cpu(md) => &md.sys,
            MdEngine::Gpu(md) => md.system().unwrap(),
        }
    }
}
