//! `lmp_mpcbox` (`make -C coupling/lammps driver`): LAMMPS with fix mpcbox built in, for
//! machines where neither the PLUGIN package nor LAMMPS's Python can load the plugin; and the
//! fix's `timing yes` report, which `mpcbox-bench lammps` reads.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use super::common::{crate_dir, lib_dir, output_of, profile_dir, run};
use super::{assert_momentum_conserved, example_dir, plugin_loader, thermo, variant, FIX_LINE};

/// lmp_mpcbox, built once per test process beside the plugin.
fn driver() -> &'static PathBuf {
    static DRIVER: OnceLock<PathBuf> = OnceLock::new();
    DRIVER.get_or_init(|| {
        plugin_loader();
        let build = profile_dir().join("lammps-plugin");
        run(Command::new("make")
            .arg("-C")
            .arg(crate_dir().join("lammps"))
            .arg(format!("BUILD={}", build.display()))
            .arg(format!("MPCBOX_LIB_DIR={}", lib_dir().display()))
            .arg("driver"));
        build.join("lmp_mpcbox")
    })
}

/// The numbers of the fix's timing line: exchanges, loop seconds, ranks, and per exchange
/// (ms) md, pack, mpcbox_step, unpack, observe, exchange, begin, count (of pack).
fn timing_line(out: &str) -> Vec<f64> {
    let line = out
        .lines()
        .rfind(|l| l.starts_with("fix mpcbox timing:"))
        .unwrap_or_else(|| panic!("no timing line in:\n{out}"));
    line.split_whitespace()
        .filter_map(|w| w.trim_end_matches(';').parse().ok())
        .collect()
}

/// The example through lmp_mpcbox, no loader line: the fix is there, every coupled step
/// conserves fluid + bead momentum as through the plugin, and `timing yes` reports each run's
/// exchanges (one per `every` steps) with parts that add up: md + exchange is the loop time
/// per exchange, and the slowest rank's exchange is no longer than its parts' sum. Without
/// the keyword nothing is reported. `overlap yes` gives the same thermo rows.
#[test]
#[cfg_attr(
    not(mpcbox_external),
    ignore = "needs LAMMPS and an MPI C++ compiler (apt-get install lammps liblammps-dev libopenmpi-dev make); runs with MPCBOX_REQUIRE_EXTERNAL=1"
)]
fn lmp_mpcbox_runs_the_example_with_the_fix_built_in_and_times_it() {
    let lmp = driver();
    let dir = example_dir();
    variant(
        dir.path(),
        "in.timed",
        &[
            ("include        ${mpcbox}", ""),
            (
                FIX_LINE,
                "fix 2 beads mpcbox solvent.ron every 20 timing yes",
            ),
        ],
    );
    variant(
        dir.path(),
        "in.untimed",
        &[("include        ${mpcbox}", "")],
    );
    variant(
        dir.path(),
        "in.overlap",
        &[
            ("include        ${mpcbox}", ""),
            (
                FIX_LINE,
                "fix 2 beads mpcbox solvent.ron every 20 timing yes overlap yes",
            ),
        ],
    );
    let lammps = |script: &str| {
        output_of(
            Command::new(lmp)
                .current_dir(dir.path())
                .args(["-in", script, "-log", "none", "-nocite"])
                .args(["-var", "steps", "600"]),
        )
    };
    let (ok, out) = lammps("in.timed");
    assert!(ok, "lmp_mpcbox failed:\n{out}");
    let rows = thermo(&out);
    assert_eq!(rows.len(), 31, "a thermo row per exchange:\n{out}");
    assert_momentum_conserved(&rows);
    let t = timing_line(&out);
    assert_eq!(t.len(), 11, "timing line numbers: {t:?}");
    let [exchanges, loop_s, ranks, md, pack, step, unpack, observe, exchange, begin, count] = t[..]
    else {
        unreachable!()
    };
    assert!(
        (0.0..=pack).contains(&count),
        "count is part of pack: {t:?}"
    );
    assert_eq!((exchanges, ranks), (30.0, 1.0));
    assert!(
        [md, pack, step, unpack, observe].iter().all(|&x| x >= 0.0),
        "{t:?}"
    );
    assert_eq!(begin, 0.0, "nothing begun without `overlap yes`: {t:?}");
    assert!(step > 0.0 && loop_s > 0.0, "{t:?}");
    let per_exchange_ms = loop_s * 1e3 / exchanges;
    assert!(
        (md + exchange - per_exchange_ms).abs() <= 1e-3 * per_exchange_ms,
        "md + exchange {} ms against the loop's {per_exchange_ms} ms per exchange",
        md + exchange
    );
    assert!(
        exchange <= (pack + step + unpack + observe) * (1.0 + 1e-5),
        "{t:?}"
    );
    // `overlap yes` begins each exchange's MPC step before the forces (a GPU fluid over
    // LAMMPS's ranks; here the CPU begins nothing): the same run, row for row
    let (ok, overlapped) = lammps("in.overlap");
    assert!(ok, "lmp_mpcbox failed with overlap yes:\n{overlapped}");
    assert_eq!(thermo(&overlapped), rows, "overlap yes against no");
    let (ok, out) = lammps("in.untimed");
    assert!(ok, "lmp_mpcbox failed:\n{out}");
    assert!(
        !out.contains("fix mpcbox timing"),
        "timing printed unasked:\n{out}"
    );
    assert_momentum_conserved(&thermo(&out));
}
