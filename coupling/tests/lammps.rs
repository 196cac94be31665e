//! LAMMPS drives mpcbox: a bead-spring polymer (FENE + WCA) integrated by LAMMPS through its C
//! library API, with mpcbox (through this crate's C ABI) as the solvent every 20 MD steps.
//! liblammps is loaded at run time (Debian: `apt-get install liblammps-dev`); the test runs
//! where MPCBOX_REQUIRE_EXTERNAL is set (CI) and is ignored elsewhere.

mod common;

use std::ffi::{c_char, c_int, c_void, CStr, CString};

use libloading::{Library, Symbol};
use mpcbox_coupling::*;

// SAFETY: a type only; calling it is unsafe, and each call below says why it is sound.
type Open = unsafe extern "C" fn(c_int, *mut *mut c_char, *mut *mut c_void) -> *mut c_void;
// SAFETY: a type only; calling it is unsafe, and each call below says why it is sound.
type Close = unsafe extern "C" fn(*mut c_void);
// SAFETY: a type only; calling it is unsafe, and each call below says why it is sound.
type CommandsString = unsafe extern "C" fn(*mut c_void, *const c_char);
// SAFETY: a type only; calling it is unsafe, and each call below says why it is sound.
type Gather = unsafe extern "C" fn(*mut c_void, *const c_char, c_int, c_int, *mut c_void);
// SAFETY: a type only; calling it is unsafe, and each call below says why it is sound.
type HasError = unsafe extern "C" fn(*mut c_void) -> c_int;
// SAFETY: a type only; calling it is unsafe, and each call below says why it is sound.
type LastError = unsafe extern "C" fn(*mut c_void, *mut c_char, c_int) -> c_int;

struct Lammps {
    lib: Library,
    handle: *mut c_void,
}

impl Lammps {
    fn load() -> Lammps {
        let lib = ["liblammps.so.0", "liblammps.so"]
            .iter()
            // SAFETY: liblammps's initialisers only set up its own state (and MPI on first use).
            .find_map(|n| unsafe { Library::new(*n).ok() });
        let Some(lib) = lib else {
            common::missing("liblammps", "apt-get install liblammps-dev");
        };
        let args = ["mpcbox-test", "-log", "none", "-screen", "none", "-nocite"];
        let cstrs: Vec<CString> = args.iter().map(|a| CString::new(*a).unwrap()).collect();
        let mut argv: Vec<*mut c_char> = cstrs.iter().map(|c| c.as_ptr() as *mut c_char).collect();
        // SAFETY: `Open` is the signature of lammps_open_no_mpi in library.h; argv holds
        // argv.len() NUL-terminated strings that outlive the call (LAMMPS copies them).
        let handle = unsafe {
            let open: Symbol<Open> = lib.get(b"lammps_open_no_mpi").unwrap();
            open(argv.len() as c_int, argv.as_mut_ptr(), std::ptr::null_mut())
        };
        assert!(!handle.is_null(), "lammps_open_no_mpi failed");
        Lammps { lib, handle }
    }

    fn commands(&self, text: &str) {
        let c = CString::new(text).unwrap();
        // SAFETY: the three signatures are those of library.h; `handle` is the live instance
        // from lammps_open_no_mpi, `c` a NUL-terminated string, and `buf` holds the length
        // passed with it.
        let error = unsafe {
            let f: Symbol<CommandsString> = self.lib.get(b"lammps_commands_string").unwrap();
            f(self.handle, c.as_ptr());
            let has: Symbol<HasError> = self.lib.get(b"lammps_has_error").unwrap();
            (has(self.handle) != 0).then(|| {
                let mut buf = vec![0 as c_char; 1024];
                let last: Symbol<LastError> =
                    self.lib.get(b"lammps_get_last_error_message").unwrap();
                last(self.handle, buf.as_mut_ptr(), buf.len() as c_int);
                CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned()
            })
        };
        if let Some(e) = error {
            panic!("LAMMPS error: {e}");
        }
    }

    /// Per-atom double triples (x or v) of all `n` atoms, ordered by atom ID.
    fn gather(&self, name: &str, n: usize) -> Vec<f64> {
        let mut data = vec![0.0f64; 3 * n];
        let c = CString::new(name).unwrap();
        // SAFETY: lammps_gather_atoms(handle, name, type 1 = double, count 3, data) writes
        // 3 doubles per atom; `data` holds 3n for the n atoms of the system.
        unsafe {
            let f: Symbol<Gather> = self.lib.get(b"lammps_gather_atoms").unwrap();
            f(
                self.handle,
                c.as_ptr(),
                1,
                3,
                data.as_mut_ptr() as *mut c_void,
            );
        }
        data
    }

    fn scatter(&self, name: &str, data: &mut [f64]) {
        let c = CString::new(name).unwrap();
        // SAFETY: lammps_scatter_atoms reads 3 doubles per atom from `data`, which the caller
        // sized for every atom (as returned by `gather`).
        unsafe {
            let f: Symbol<Gather> = self.lib.get(b"lammps_scatter_atoms").unwrap();
            f(
                self.handle,
                c.as_ptr(),
                1,
                3,
                data.as_mut_ptr() as *mut c_void,
            );
        }
    }
}

impl Drop for Lammps {
    fn drop(&mut self) {
        // SAFETY: `handle` came from lammps_open_no_mpi and is closed once, here.
        unsafe {
            let close: Symbol<Close> = self.lib.get(b"lammps_close").unwrap();
            close(self.handle);
        }
    }
}

/// The solvent through the C ABI.
struct Fluid(*mut MpcboxSolvent);

impl Fluid {
    fn from_ron(text: &str) -> Fluid {
        let ron = CString::new(text).unwrap();
        // SAFETY: `ron` is NUL-terminated and lives through the call.
        let s = unsafe { mpcbox_create_from_ron(ron.as_ptr()) };
        assert!(!s.is_null(), "{}", last_error());
        Fluid(s)
    }

    fn momentum(&self) -> [f64; 3] {
        let mut o = MpcboxObservables::default();
        // SAFETY: `self.0` is a live solvent and `o` a writable MpcboxObservables.
        assert_eq!(unsafe { mpcbox_observables(self.0, &mut o) }, 0);
        o.momentum
    }

    fn step(&mut self, pos: &[f64], vel: &mut [f64], mass: &[f64]) {
        assert!(pos.len() == 3 * mass.len() && vel.len() == pos.len());
        // SAFETY: a live solvent, and arrays of 3n, 3n and n doubles for n = mass.len().
        let rc = unsafe {
            mpcbox_step(
                self.0,
                mass.len(),
                pos.as_ptr(),
                vel.as_mut_ptr(),
                mass.as_ptr(),
            )
        };
        assert_eq!(rc, 0, "{}", last_error());
    }
}

impl Drop for Fluid {
    fn drop(&mut self) {
        // SAFETY: made by mpcbox_create_from_ron and freed once, here.
        unsafe { mpcbox_free(self.0) };
    }
}

fn last_error() -> String {
    // SAFETY: mpcbox_last_error returns a NUL-terminated string valid until the next failing
    // call on this thread; it is copied at once.
    unsafe { CStr::from_ptr(mpcbox_last_error()) }
        .to_string_lossy()
        .into_owned()
}

/// The bead-spring system of coupling/lammps/examples (20 chains of 10 beads, 10³ box).
const CHAINS: usize = 20;
const BEADS_PER_CHAIN: usize = 10;
const BEADS: usize = CHAINS * BEADS_PER_CHAIN;
const BEAD_MASS: f64 = 5.0;
const BOX: f64 = 10.0;

fn polymer_in_lammps() -> Lammps {
    let lmp = Lammps::load();
    let data = common::crate_dir().join("lammps/examples/polymer.data");
    lmp.commands(&format!(
        "units lj\natom_style bond\nboundary p p p\nread_data {}\nmass 1 {BEAD_MASS}\n\
         bond_style fene\nbond_coeff 1 30.0 1.5 1.0 1.0\nspecial_bonds fene\n\
         pair_style lj/cut 1.122462048\npair_coeff 1 1 1.0 1.0 1.122462048\npair_modify shift yes\n\
         neighbor 0.3 bin\nneigh_modify every 1 delay 0 check yes\n\
         fix 1 all nve\ntimestep 0.005\nthermo 0\nrun 0",
        data.display()
    ));
    lmp
}

/// `steps` MPC steps of 20 MD steps each; every coupled step must conserve fluid + bead
/// momentum. Returns the mean bead kT over the second half.
fn coupled_steps(lmp: &Lammps, fluid: &mut Fluid, steps: usize) -> f64 {
    let mass = vec![BEAD_MASS; BEADS];
    let total = |fluid: &Fluid, vel: &[f64]| -> [f64; 3] {
        let p = fluid.momentum();
        std::array::from_fn(|k| p[k] + vel.iter().skip(k).step_by(3).sum::<f64>() * BEAD_MASS)
    };
    let (mut ke_sum, mut samples) = (0.0, 0.0);
    for step in 0..steps {
        lmp.commands("run 20 pre no post no");
        let pos = lmp.gather("x", BEADS);
        let mut vel = lmp.gather("v", BEADS);
        let before = total(fluid, &vel);
        fluid.step(&pos, &mut vel, &mass);
        let after = total(fluid, &vel);
        for k in 0..3 {
            let scale = 10_000.0 + BEAD_MASS * BEADS as f64;
            assert!(
                (after[k] - before[k]).abs() / scale <= 1e-12,
                "momentum {k}"
            );
        }
        lmp.scatter("v", &mut vel);
        if step >= steps / 2 {
            ke_sum += vel.iter().map(|v| 0.5 * BEAD_MASS * v * v).sum::<f64>();
            samples += BEADS as f64;
        }
    }
    ke_sum / samples / 1.5
}

/// Every FENE bond shorter than R0 = 1.5 (minimum image).
fn assert_bonds_intact(pos: &[f64]) {
    for c in 0..CHAINS {
        for b in 0..BEADS_PER_CHAIN - 1 {
            let (i, j) = (c * BEADS_PER_CHAIN + b, c * BEADS_PER_CHAIN + b + 1);
            let d2: f64 = (0..3)
                .map(|k| {
                    let mut d = pos[3 * i + k] - pos[3 * j + k];
                    d -= BOX * (d / BOX).round();
                    d * d
                })
                .sum();
            assert!(d2.sqrt() < 1.5, "bond {i}-{j} stretched to {}", d2.sqrt());
        }
    }
}

#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs LAMMPS as a library (apt-get install liblammps-dev); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn lammps_polymer_in_mpcbox_solvent() {
    let lmp = polymer_in_lammps();
    // The solvent: MPC box = LAMMPS box (cell size = sigma), h = 20 MD steps.
    let mut fluid = Fluid::from_ron(
        "(cells: (10, 10, 10), particles_per_cell: 10, time_step: 0.1, collision: Srd(angle_deg: 130.0), \
          thermostat: Mbs, seed: 17, steps: 1000, device: Cpu)",
    );
    let kt = coupled_steps(&lmp, &mut fluid, 300);
    assert_bonds_intact(&lmp.gather("x", BEADS));
    // the beads started at rest: the solvent thermalized them to kT = 1 (3/2 kT per bead)
    assert!((kt - 1.0).abs() < 0.1, "bead temperature {kt}, expected 1");
}
