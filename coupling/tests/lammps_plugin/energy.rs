//! `fix mpcbox`'s energy books (ecouple or pe) and its global vector never NaN, also across
//! read_restart.

use super::*;

/// Energy bookkeeping over 2000 steps (100 exchanges) of the example, with `extra` after the
/// fix line: the thermo rows with KinEng, PotEng, TotEng, Ecouple, Econserve, the fix's energy
/// f_2 and the pair + bond energy c_pb (pe without fixes). Totals, not per atom (norm no): this
/// LAMMPS (29 Sep 2021) divides pe and ke by the atom count under norm yes but not ecouple,
/// which makes its econserve meaningless there, for any thermostat fix.
fn energy_rows(dir: &Path, name: &str, extra: &str, loader: &Path) -> Vec<HashMap<String, f64>> {
    variant(
        dir,
        name,
        &[
            (FIX_LINE, &format!("{FIX_LINE}\n{extra}")),
            (
                THERMO_LINE,
                "compute pb all pe pair bond\nthermo_style custom step ke pe etotal ecouple \
                 econserve f_2 c_pb c_tbeads\nthermo_modify norm no",
            ),
            ("thermo         20", "thermo 100"),
        ],
    );
    let (ok, out) = lammps(dir, name, 2000, loader);
    assert!(ok, "lmp failed:\n{out}");
    let rows = thermo(&out);
    assert_eq!(rows.len(), 21, "{out}");
    rows
}

/// How far `key` strays from its first value, and the largest exchanged energy |f_2|.
fn drift_and_exchanged(rows: &[HashMap<String, f64>], key: &str) -> (f64, f64) {
    let drift = rows
        .iter()
        .map(|r| (r[key] - rows[0][key]).abs())
        .fold(0.0, f64::max);
    let exchanged = rows.iter().map(|r| r["f_2"].abs()).fold(0.0, f64::max);
    (drift, exchanged)
}

/// The fix's energy f_2 is the kinetic energy the exchanges took from the beads: LAMMPS's
/// ecouple by default, so econserve = etotal + ecouple holds while the solvent heats the beads
/// from rest; with `fix_modify 2 energy yes` (accepted) it moves into pe instead, ecouple is 0
/// and etotal holds. The dynamics, and so f_2, are the same both ways.
#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs LAMMPS and an MPI C++ compiler (apt-get install lammps liblammps-dev libopenmpi-dev make); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn fix_modify_energy_keeps_the_energy_books() {
    let loader = plugin_loader();
    let dir = example_dir();
    let coupled = energy_rows(dir.path(), "in.ecouple", "", loader);
    let in_pe = energy_rows(dir.path(), "in.energy", "fix_modify 2 energy yes", loader);
    assert_eq!(coupled[0]["f_2"], 0.0, "nothing exchanged at step 0");
    for (a, b) in coupled.iter().zip(&in_pe) {
        assert!(
            a.values().chain(b.values()).all(|v| v.is_finite()),
            "{a:?} {b:?}"
        );
        assert_eq!(a["f_2"], b["f_2"], "fix_modify energy changed the dynamics");
        let scale = a["PotEng"].abs() + a["f_2"].abs(); // rounding of the thermo sums
        assert!(
            (a["Ecouple"] - a["f_2"]).abs() <= 1e-12 * scale,
            "ecouple is not f_2: {a:?}"
        );
        assert_eq!(
            b["Ecouple"], 0.0,
            "with energy yes, f_2 is counted in ecouple too: {b:?}"
        );
        let fix_part = b["PotEng"] - b["c_pb"];
        assert!(
            (fix_part - b["f_2"]).abs() <= 1e-12 * scale,
            "pe does not include f_2: {b:?}"
        );
    }
    // the beads warm from rest towards kT = 1: about 1.5 kT per bead from the fluid
    let (drift, exchanged) = drift_and_exchanged(&coupled, "Econserve");
    assert!(exchanged > 200.0, "only {exchanged} exchanged");
    assert!(
        drift < 0.01 * exchanged,
        "econserve drifts by {drift} ({exchanged} exchanged)"
    );
    let (drift, _) = drift_and_exchanged(&in_pe, "TotEng");
    assert!(
        drift < 0.01 * exchanged,
        "etotal drifts by {drift} ({exchanged} exchanged)"
    );
}

/// The global vector and scalar are never NaN: at step 0 kT comes from the new fluid's kinetic
/// energy (exactly the config's kT), the stresses are 0 until measured, f_2 is 0; after
/// read_restart every value is the one written with the restart file.
#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs LAMMPS and an MPI C++ compiler (apt-get install lammps liblammps-dev libopenmpi-dev make); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn thermo_is_never_nan_at_step_0_or_after_read_restart() {
    let loader = plugin_loader();
    let dir = example_dir();
    let columns = "thermo_style   custom step f_2[1] f_2[2] f_2[3] f_2[4] f_2[5] f_2[6] f_2[7] \
                   f_2[8] f_2 c_tbeads";
    let fix_columns: Vec<String> = (1..=8)
        .map(|i| format!("f_2[{i}]"))
        .chain(["f_2".into()])
        .collect();
    variant(
        dir.path(),
        "in.first",
        &[
            (THERMO_LINE, columns),
            (
                "run            ${steps}",
                "run ${steps}\nwrite_restart poly.restart",
            ),
        ],
    );
    let (ok, out) = lammps(dir.path(), "in.first", 200, loader);
    assert!(ok, "lmp failed:\n{out}");
    let rows = thermo(&out);
    assert_eq!(
        rows.len(),
        11,
        "a thermo value did not parse (nan?):\n{out}"
    );
    assert!(
        rows.iter().flat_map(|r| r.values()).all(|v| v.is_finite()),
        "{out}"
    );
    let start = &rows[0];
    assert!(
        (start["f_2[2]"] - 1.0).abs() < 1e-9,
        "kT at step 0: {start:?}"
    );
    for key in ["f_2[7]", "f_2[8]", "f_2"] {
        assert_eq!(start[key], 0.0, "{key} at step 0");
    }
    let saved = rows.last().unwrap().clone();
    let script = std::fs::read_to_string(dir.path().join("in.first")).unwrap();
    let tail = &script[script.find("include        ${mpcbox}").unwrap()..];
    let tail = tail.replace("write_restart poly.restart", "");
    std::fs::write(
        dir.path().join("in.again"),
        format!("read_restart poly.restart\nneighbor 0.3 bin\n{tail}"),
    )
    .unwrap();
    let (ok, out) = lammps(dir.path(), "in.again", 100, loader);
    assert!(ok, "lmp failed:\n{out}");
    let rows = thermo(&out);
    assert_eq!(rows.len(), 6, "a thermo value did not parse (nan?):\n{out}");
    assert!(
        rows.iter().flat_map(|r| r.values()).all(|v| v.is_finite()),
        "{out}"
    );
    for key in &fix_columns {
        assert_eq!(rows[0][key], saved[key], "{key} after read_restart");
    }
}
