//! LAMMPS drives mpcbox: a bead-spring polymer (FENE + WCA) integrated by LAMMPS through its C
//! library API, with mpcbox (through this crate's C ABI) as the solvent every 20 MD steps.
//! liblammps is loaded at run time (Debian: `apt-get install liblammps-dev`); CI sets
//! MPCBOX_REQUIRE_EXTERNAL=1 so a missing LAMMPS fails there instead of skipping.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::io::Write;

use libloading::{Library, Symbol};
use mpcbox_coupling::*;

type Open = unsafe extern "C" fn(c_int, *mut *mut c_char, *mut *mut c_void) -> *mut c_void;
type Close = unsafe extern "C" fn(*mut c_void);
type CommandsString = unsafe extern "C" fn(*mut c_void, *const c_char);
type Gather = unsafe extern "C" fn(*mut c_void, *const c_char, c_int, c_int, *mut c_void);
type HasError = unsafe extern "C" fn(*mut c_void) -> c_int;
type LastError = unsafe extern "C" fn(*mut c_void, *mut c_char, c_int) -> c_int;

struct Lammps {
    lib: Library,
    handle: *mut c_void,
}

impl Lammps {
    fn load() -> Option<Lammps> {
        let lib = ["liblammps.so.0", "liblammps.so"]
            .iter()
            .find_map(|n| unsafe { Library::new(*n).ok() });
        let Some(lib) = lib else {
            assert!(
                std::env::var_os("MPCBOX_REQUIRE_EXTERNAL").is_none(),
                "liblammps is required (MPCBOX_REQUIRE_EXTERNAL is set): apt-get install liblammps-dev"
            );
            eprintln!("skipped: liblammps not installed (apt-get install liblammps-dev)");
            return None;
        };
        let args = ["mpcbox-test", "-log", "none", "-screen", "none", "-nocite"];
        let cstrs: Vec<CString> = args.iter().map(|a| CString::new(*a).unwrap()).collect();
        let mut argv: Vec<*mut c_char> = cstrs.iter().map(|c| c.as_ptr() as *mut c_char).collect();
        let handle = unsafe {
            let open: Symbol<Open> = lib.get(b"lammps_open_no_mpi").unwrap();
            open(argv.len() as c_int, argv.as_mut_ptr(), std::ptr::null_mut())
        };
        assert!(!handle.is_null(), "lammps_open_no_mpi failed");
        Some(Lammps { lib, handle })
    }

    fn commands(&self, text: &str) {
        let c = CString::new(text).unwrap();
        unsafe {
            let f: Symbol<CommandsString> = self.lib.get(b"lammps_commands_string").unwrap();
            f(self.handle, c.as_ptr());
            let has: Symbol<HasError> = self.lib.get(b"lammps_has_error").unwrap();
            if has(self.handle) != 0 {
                let mut buf = vec![0 as c_char; 1024];
                let last: Symbol<LastError> =
                    self.lib.get(b"lammps_get_last_error_message").unwrap();
                last(self.handle, buf.as_mut_ptr(), buf.len() as c_int);
                panic!(
                    "LAMMPS error: {}",
                    CStr::from_ptr(buf.as_ptr()).to_string_lossy()
                );
            }
        }
    }

    /// Per-atom double vector quantity (x or v), ordered by atom ID.
    fn gather(&self, name: &str, n: usize) -> Vec<f64> {
        let mut data = vec![0.0f64; 3 * n];
        let c = CString::new(name).unwrap();
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
        unsafe {
            let close: Symbol<Close> = self.lib.get(b"lammps_close").unwrap();
            close(self.handle);
        }
    }
}

/// A LAMMPS data file: `chains` straight chains of `len` beads along x, on a y-z grid.
fn polymer_data(chains_y: usize, chains_z: usize, len: usize, l: f64) -> String {
    let n = chains_y * chains_z * len;
    let nb = chains_y * chains_z * (len - 1);
    let mut s = format!(
        "bead-spring chains for mpcbox\n\n{n} atoms\n{nb} bonds\n1 atom types\n1 bond types\n\n\
         0 {l} xlo xhi\n0 {l} ylo yhi\n0 {l} zlo zhi\n\nAtoms # bond\n\n"
    );
    let mut id = 0;
    for cy in 0..chains_y {
        for cz in 0..chains_z {
            let mol = cy * chains_z + cz + 1;
            for b in 0..len {
                id += 1;
                let x = 0.2 + 0.97 * b as f64;
                let y = (cy as f64 + 0.5) * l / chains_y as f64;
                let z = (cz as f64 + 0.5) * l / chains_z as f64;
                s += &format!("{id} {mol} 1 {x} {y} {z}\n");
            }
        }
    }
    s += "\nBonds\n\n";
    let mut bid = 0;
    for c in 0..chains_y * chains_z {
        for b in 0..len - 1 {
            bid += 1;
            let a = c * len + b + 1;
            s += &format!("{bid} 1 {a} {}\n", a + 1);
        }
    }
    s
}

#[test]
fn lammps_polymer_in_mpcbox_solvent() {
    let Some(lmp) = Lammps::load() else { return };
    let l = 10.0;
    let (cy, cz, len) = (5, 4, 10);
    let n = cy * cz * len;
    let bead_mass = 5.0;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("polymer.data");
    std::fs::File::create(&data)
        .unwrap()
        .write_all(polymer_data(cy, cz, len, l).as_bytes())
        .unwrap();
    lmp.commands(&format!(
        "units lj\natom_style bond\nboundary p p p\nread_data {}\nmass 1 {bead_mass}\n\
         bond_style fene\nbond_coeff 1 30.0 1.5 1.0 1.0\nspecial_bonds fene\n\
         pair_style lj/cut 1.122462048\npair_coeff 1 1 1.0 1.0 1.122462048\npair_modify shift yes\n\
         neighbor 0.3 bin\nneigh_modify every 1 delay 0 check yes\n\
         fix 1 all nve\ntimestep 0.005\nthermo 0\nrun 0",
        data.display()
    ));

    // The solvent: MPC box = LAMMPS box (cell size = sigma), h = 20 MD steps.
    let ron = CString::new(
        "(cells: (10, 10, 10), particles_per_cell: 10, time_step: 0.1, collision: Srd(angle_deg: 130.0), \
          thermostat: Mbs, seed: 17, steps: 1000, device: Cpu)",
    )
    .unwrap();
    let solvent = unsafe { mpcbox_create_from_ron(ron.as_ptr()) };
    assert!(!solvent.is_null(), "{}", unsafe {
        CStr::from_ptr(mpcbox_last_error()).to_string_lossy()
    });
    let mass = vec![bead_mass; n];

    let total_momentum = |vel: &[f64]| -> [f64; 3] {
        let mut o = MpcboxObservables::default();
        assert_eq!(unsafe { mpcbox_observables(solvent, &mut o) }, 0);
        let mut p = o.momentum;
        for i in 0..n {
            for k in 0..3 {
                p[k] += bead_mass * vel[3 * i + k];
            }
        }
        p
    };

    let mpc_steps = 300;
    let mut ke_sum = 0.0;
    let mut ke_samples = 0.0;
    for step in 0..mpc_steps {
        lmp.commands("run 20 pre no post no");
        let pos = lmp.gather("x", n);
        let mut vel = lmp.gather("v", n);
        let before = total_momentum(&vel);
        let rc = unsafe { mpcbox_step(solvent, n, pos.as_ptr(), vel.as_mut_ptr(), mass.as_ptr()) };
        assert_eq!(rc, 0, "{}", unsafe {
            CStr::from_ptr(mpcbox_last_error()).to_string_lossy()
        });
        let after = total_momentum(&vel);
        for k in 0..3 {
            assert!(
                (after[k] - before[k]).abs() / (10_000.0 + bead_mass * n as f64) <= 1e-12,
                "momentum {k}"
            );
        }
        lmp.scatter("v", &mut vel);
        if step >= mpc_steps / 2 {
            ke_sum += vel.iter().map(|v| 0.5 * bead_mass * v * v).sum::<f64>();
            ke_samples += n as f64;
        }
    }
    // chains intact: every FENE bond shorter than R0 = 1.5 (minimum image)
    let pos = lmp.gather("x", n);
    for c in 0..cy * cz {
        for b in 0..len - 1 {
            let (i, j) = (c * len + b, c * len + b + 1);
            let d2: f64 = (0..3)
                .map(|k| {
                    let mut d = pos[3 * i + k] - pos[3 * j + k];
                    d -= l * (d / l).round();
                    d * d
                })
                .sum();
            assert!(d2.sqrt() < 1.5, "bond {i}-{j} stretched to {}", d2.sqrt());
        }
    }
    // the beads started at rest: the solvent thermalized them to kT = 1 (3/2 kT per bead)
    let kt = ke_sum / ke_samples / 1.5;
    assert!((kt - 1.0).abs() < 0.1, "bead temperature {kt}, expected 1");
    unsafe { mpcbox_free(solvent) };
}
