//! The C ABI's checkpoint writers keep to the output directories' one-owner rule: a checkpoint
//! of another run (or another file) at the path, or a directory holding another run's files,
//! is refused with the status `Config` and a message naming it and the fix, nothing written;
//! `mpcbox_checkpoint_overwrite` replaces it on purpose; a solvent continued from a checkpoint
//! replaces its own.

use std::ffi::{CStr, CString};

use mpcbox_coupling::*;

const RON: &str = "(cells: (6, 6, 6), particles_per_cell: 5, time_step: 0.1, \
                   collision: Srd(angle_deg: 130.0), seed: 3, steps: 1, device: Cpu)";

fn c(text: &str) -> CString {
    CString::new(text).unwrap()
}

fn last_error() -> String {
    // SAFETY: mpcbox_last_error returns a NUL-terminated string valid until the next failing
    // call on this thread; it is copied at once.
    unsafe { CStr::from_ptr(mpcbox_last_error()) }
        .to_string_lossy()
        .into_owned()
}

fn solvent() -> *mut MpcboxSolvent {
    // SAFETY: a NUL-terminated string that outlives the call.
    let s = unsafe { mpcbox_create_from_ron(c(RON).as_ptr()) };
    assert!(!s.is_null(), "{}", last_error());
    s
}

#[test]
fn checkpoints_of_another_run_are_not_replaced_unless_asked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fluid.mpcbox");
    let p = c(path.to_str().unwrap());
    let (a, b) = (solvent(), solvent());
    // SAFETY: every call below gets live solvents from mpcbox_create_* and NUL-terminated paths
    // that outlive it; each solvent is freed once, at the end.
    unsafe {
        assert_eq!(mpcbox_checkpoint_save(a, p.as_ptr()), 0, "{}", last_error());
        assert_eq!(mpcbox_step_fluid(a, 2), 0);
        assert_eq!(
            mpcbox_checkpoint_save(a, p.as_ptr()),
            0,
            "its own: replaced"
        );
        let written = std::fs::read(&path).unwrap();
        assert_eq!(
            mpcbox_checkpoint_save(b, p.as_ptr()),
            MpcboxStatus::Config as i32
        );
        let e = last_error();
        assert!(
            e.contains(&path.display().to_string())
                && e.contains("at step 2")
                && e.contains("mpcbox_checkpoint_overwrite"),
            "{e}"
        );
        assert_eq!(
            std::fs::read(&path).unwrap(),
            written,
            "a refused save wrote"
        );
        // a solvent continued from it is that run, and replaces it
        let again = mpcbox_create_from_checkpoint(p.as_ptr());
        assert!(!again.is_null(), "{}", last_error());
        assert_eq!(mpcbox_step_fluid(again, 1), 0);
        assert_eq!(
            mpcbox_checkpoint_save(again, p.as_ptr()),
            0,
            "{}",
            last_error()
        );
        assert_eq!(
            mpcbox_checkpoint_overwrite(b, p.as_ptr()),
            0,
            "{}",
            last_error()
        );
        assert_eq!(mpcbox::Checkpoint::load(&path).unwrap().step, 0);
        // a file that is not a checkpoint
        let notes = dir.path().join("notes.txt");
        std::fs::write(&notes, "mine").unwrap();
        let n = c(notes.to_str().unwrap());
        assert_eq!(
            mpcbox_checkpoint_save(a, n.as_ptr()),
            MpcboxStatus::Config as i32
        );
        assert!(last_error().contains("not a readable mpcbox checkpoint"));
        assert_eq!(std::fs::read_to_string(&notes).unwrap(), "mine");
        for s in [a, b, again] {
            mpcbox_free(s);
        }
    }
}
