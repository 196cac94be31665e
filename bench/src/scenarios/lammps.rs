//! `lammps`: a real outside MD code, measured. LAMMPS (`lmp_mpcbox`: liblammps with `fix mpcbox`
//! built in, `make -C coupling/lammps driver`) integrates a Kremer-Grest polymer solution and
//! hands its beads to the fluid every collision; the fix's `timing yes` splits each collision
//! into LAMMPS's MD, the packing of the exchange arrays, `mpcbox_step` (transfers, routing, the
//! fluid's step) and the unpacking. The same input with the fix on an empty group gives the
//! fluid step alone, through the same C ABI on the same ranks, in the same invocation.
//!
//! The system is the `polymer` scenario's: chains of FENE + WCA beads (σ = 1 cell, mass 10),
//! an SRD fluid of 10 particles per cell (h = 0.1, MBS, 130°), 10 MD steps per collision.
//! Under `--np R` LAMMPS decomposes the box 1 × R × 1 (`processors`), matching mpcbox's y
//! slabs, so each rank's beads lie in its own slabs when the coupling library has MPI.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

use mpcbox::config::{Config, DeviceChoice};

use super::{cube, recorder};
use crate::Res;

#[derive(clap::Args)]
pub struct Args {
    /// The LAMMPS executable with fix mpcbox (lmp_mpcbox, or an lmp that loads the plugin
    /// through --loader).
    #[arg(long, default_value = "lmp_mpcbox")]
    lmp: String,
    /// A line the input script runs before `fix mpcbox` to make the style known (e.g.
    /// `include /path/mpcbox_plugin.lmp`); empty for lmp_mpcbox.
    #[arg(long, default_value = "")]
    loader: String,
    /// MPI ranks of LAMMPS (1: no mpirun).
    #[arg(long, default_value_t = 1)]
    np: u32,
    /// The MPI launcher and its options.
    #[arg(long, default_value = "mpirun --bind-to none")]
    mpirun: String,
    /// Box edge in cells.
    #[arg(long, default_value_t = 64)]
    cells: u32,
    #[arg(long, default_value_t = 512)]
    chains: u32,
    #[arg(long, default_value_t = 50)]
    chain_length: u32,
    /// Timed collisions.
    #[arg(long, default_value_t = 20)]
    collisions: u64,
    /// Untimed collisions first (kernel compilation, first reorders).
    #[arg(long, default_value_t = 5)]
    warmup: u64,
    /// The fix's `threads`: threads per LAMMPS rank for its exchange loops (LAMMPS's own
    /// styles stay on one). 0: `auto`, the host's cores over the ranks, at most 16.
    #[arg(long, default_value_t = 0)]
    threads: u32,
    /// The fluid's device (the config's `device`; over ranks, each rank takes its GPU).
    #[arg(long, default_value = "auto")]
    device: String,
    /// The fix's `overlap`: `yes` begins the fluid's step before LAMMPS computes the forces of
    /// each exchange step (it streams meanwhile), `no` does the whole step in the exchange.
    #[arg(long, default_value = "no", value_parser = ["yes", "no"])]
    overlap: String,
    /// Keep the generated files (data, config, input) in this directory.
    #[arg(long)]
    keep: Option<PathBuf>,
}

const STEPS_PER_COLLISION: u64 = 10;

/// One LAMMPS run's split, ms per collision (slowest rank).
#[derive(Debug, Default, Clone, Copy)]
struct Split {
    md: f64,
    pack: f64,
    step: f64,
    unpack: f64,
    observe: f64,
    exchange: f64,
    begin: f64,
    count: f64,
    exchanges: f64,
    /// the fix's exchange threads per rank, as its log line says (None: no such line)
    threads: Option<u32>,
}

pub fn run(a: Args, records: Option<&Path>) -> Res<()> {
    let device = super::device(&a.device)?;
    let beads = u64::from(a.chains) * u64::from(a.chain_length);
    if a.chain_length < 2 || f64::from(a.chain_length) * 0.97 + 1.0 > f64::from(a.cells) {
        return Err(format!(
            "--chain-length {} does not fit a straight chain (0.97 apart) in {} cells; fix: \
             a length of 2 to {}",
            a.chain_length,
            a.cells,
            ((f64::from(a.cells) - 1.0) / 0.97) as u32
        ));
    }
    let dir = match &a.keep {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("mpcbox-bench-lammps-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let write = |name: &str, text: String| {
        std::fs::write(dir.join(name), text)
            .map_err(|e| format!("{}: {e}", dir.join(name).display()))
    };
    write(
        "polymer.data",
        chains_data(a.cells, a.chains, a.chain_length)?,
    )?;
    write("solvent.ron", solvent_config(a.cells, &device)?)?;
    write("in.polymer", input_script(&a))?;
    let coupled = lammps_split(&a, &dir, "beads")?;
    let alone = lammps_split(&a, &dir, "nobody")?;
    if a.keep.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let mut rec = recorder("lammps", &device, records);
    let collision = coupled.md + coupled.exchange;
    rec.row(
        &[
            ("cells", cube(a.cells)),
            ("beads", json!(beads)),
            (
                "chains",
                json!(format!("{} × {}", a.chains, a.chain_length)),
            ),
            ("LAMMPS ranks", json!(a.np)),
            // as the fix's log says; none made: the gather path, serial on rank 0
            ("threads per rank", json!(coupled.threads.unwrap_or(1))),
            ("fluid device", json!(a.device)),
            ("fluid begun before the forces", json!(a.overlap)),
        ],
        &[
            ("collision ms", collision),
            ("LAMMPS MD ms", coupled.md),
            ("pack ms", coupled.pack),
            ("of pack: agreed and counted ms", coupled.count),
            ("mpcbox_step ms", coupled.step),
            ("unpack ms", coupled.unpack),
            ("observables ms", coupled.observe),
            ("begin ms (in MD)", coupled.begin),
            ("fluid alone ms", alone.step),
            ("empty exchange ms", alone.exchange),
            ("exchange / fluid alone", coupled.exchange / alone.step),
            ("timed collisions", coupled.exchanges),
        ],
    )?;
    Ok(())
}

/// Straight chains along x on a square grid of (y, z) rows, several chains per row, bonds
/// 0.97 apart: no overlaps (rows at least one cell apart) and every bond at rest length.
fn chains_data(cells: u32, chains: u32, length: u32) -> Res<String> {
    let l = f64::from(cells);
    let span = f64::from(length) * 0.97 + 0.5;
    let per_row = ((l / span).floor() as u32).max(1);
    let rows = chains.div_ceil(per_row);
    let side = (f64::from(rows).sqrt().ceil()) as u32;
    let pitch = l / f64::from(side);
    if pitch < 1.0 {
        return Err(format!(
            "--chains {chains} of {length} beads do not fit {cells}³ cells one σ apart; fix: \
             fewer chains or a larger box"
        ));
    }
    let n = u64::from(chains) * u64::from(length);
    let mut s = String::with_capacity((n as usize) * 48);
    let _ = write!(
        s,
        "Kremer-Grest chains for mpcbox-bench lammps\n\n{n} atoms\n{} bonds\n1 atom types\n1 bond types\n\n\
         0 {l} xlo xhi\n0 {l} ylo yhi\n0 {l} zlo zhi\n\nAtoms # bond\n\n",
        u64::from(chains) * u64::from(length - 1)
    );
    let mut id = 0u64;
    for c in 0..chains {
        let (row, slot) = (c / per_row, c % per_row);
        let y = (f64::from(row % side) + 0.5) * pitch;
        let z = (f64::from(row / side) + 0.5) * pitch;
        let x0 = f64::from(slot) * (l / f64::from(per_row)) + 0.25;
        for b in 0..length {
            id += 1;
            let _ = writeln!(
                s,
                "{id} {} 1 {:.4} {y:.4} {z:.4}",
                c + 1,
                x0 + 0.97 * f64::from(b)
            );
        }
    }
    s.push_str("\nBonds\n\n");
    let mut bond = 0u64;
    for c in 0..u64::from(chains) {
        for b in 1..u64::from(length) {
            bond += 1;
            let first = c * u64::from(length) + b;
            let _ = writeln!(s, "{bond} 1 {first} {}", first + 1);
        }
    }
    Ok(s)
}

/// The fluid's config as the project writes configs (`Config::to_ron_string`), on `device`.
fn solvent_config(cells: u32, device: &DeviceChoice) -> Res<String> {
    let mut cfg = Config::from_ron_str(&format!(
        "(cells: ({cells}, {cells}, {cells}), particles_per_cell: 10, time_step: 0.1, \
         collision: Srd(angle_deg: 130.0), thermostat: Mbs, seed: 7, steps: 0)"
    ))
    .map_err(|e| e.to_string())?;
    cfg.device = device.clone();
    Ok(cfg.to_ron_string())
}

/// The input: `-var group beads` couples the chains, `-var group nobody` an empty group (the
/// fluid alone, through the same calls). A warm-up run, then the timed run (its timing line
/// is the last one printed).
fn input_script(a: &Args) -> String {
    let dt = 0.1 / STEPS_PER_COLLISION as f64;
    format!(
        "units lj\natom_style bond\nboundary p p p\nprocessors 1 {np} 1\n\
         read_data polymer.data\nmass 1 10.0\nbond_style fene\nbond_coeff 1 30.0 1.5 1.0 1.0\n\
         special_bonds fene\npair_style lj/cut 1.122462048\npair_coeff 1 1 1.0 1.0 1.122462048\n\
         pair_modify shift yes\nneighbor 0.3 bin\nneigh_modify every 1 delay 0 check yes\n\
       group beads type 1\ngroup nobody empty\ntimestep {dt}\n\
         velocity beads create 1.0 4928 dist gaussian\n{loader}\nfix 1 beads nve\n\
         fix 2 ${{group}} mpcbox solvent.ron every {every} timing yes overlap {overlap} \
         threads {threads}\nthermo 0\n\
         run {warm}\nrun {timed}\n",
        np = a.np,
        loader = a.loader,
        every = STEPS_PER_COLLISION,
        overlap = a.overlap,
        threads = match a.threads {
            0 => "auto".to_string(),
            n => n.to_string(),
        },
        warm = a.warmup * STEPS_PER_COLLISION,
        timed = a.collisions * STEPS_PER_COLLISION,
    )
}

/// Runs the input with the fix on `group`; the split of the timed run.
fn lammps_split(a: &Args, dir: &Path, group: &str) -> Res<Split> {
    let mut words: Vec<String> = Vec::new();
    if a.np > 1 {
        words.extend(a.mpirun.split_whitespace().map(str::to_string));
        words.push("-np".to_string());
        words.push(a.np.to_string());
    }
    words.push(a.lmp.clone());
    for w in ["-in", "in.polymer", "-log", "none", "-var", "group", group] {
        words.push(w.to_string());
    }
    let out = Command::new(&words[0])
        .args(&words[1..])
        .current_dir(dir)
        .output()
        .map_err(|e| {
            format!(
                "{}: {e}; fix: --lmp / --mpirun naming executables",
                words[0]
            )
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    // the fluid's profile per rank, where MPCBOX_TIME_PHASES asked for one
    for line in String::from_utf8_lossy(&out.stderr).lines() {
        if line.starts_with("mpcbox phases") {
            eprintln!("{group}: {line}");
        }
    }
    let line = text.lines().rfind(|l| l.starts_with("fix mpcbox timing:"));
    match (out.status.success(), line) {
        (true, Some(line)) => Ok(Split {
            threads: threads_made(&text),
            ..parse_timing(line)?
        }),
        _ => Err(format!(
            "{} failed ({}): {}{}",
            words.join(" "),
            out.status,
            tail(&text, 3000),
            tail(&String::from_utf8_lossy(&out.stderr), 3000)
        )),
    }
}

fn tail(text: &str, n: usize) -> &str {
    let start = text.len().saturating_sub(n);
    let start = (start..=text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    &text[start..]
}

/// The count in the fix's line `fix mpcbox: N threads per rank for the exchange loops`.
fn threads_made(text: &str) -> Option<u32> {
    text.lines()
        .filter_map(|l| l.strip_prefix("fix mpcbox: "))
        .filter(|l| l.ends_with(" per rank for the exchange loops"))
        .find_map(|l| l.split_whitespace().next()?.parse().ok())
}

/// `fix mpcbox timing: N exchanges in T s on R ranks; per exchange (ms, slowest rank): md M
/// pack P mpcbox_step S unpack U observe O exchange E`.
fn parse_timing(line: &str) -> Res<Split> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let after = |key: &str| -> Res<f64> {
        let i = words
            .iter()
            .rposition(|w| *w == key)
            .ok_or(format!("no `{key}` in: {line}"))?;
        words
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .ok_or(format!("no number after `{key}` in: {line}"))
    };
    let exchanges = words
        .get(3)
        .and_then(|v| v.parse().ok())
        .ok_or(format!("no exchange count in: {line}"))?;
    Ok(Split {
        md: after("md")?,
        pack: after("pack")?,
        step: after("mpcbox_step")?,
        unpack: after("unpack")?,
        observe: after("observe")?,
        exchange: after("exchange")?,
        // beginning the fluid's step before the forces (`overlap yes`), part of md
        begin: after("begin").unwrap_or(0.0),
        // of pack: the Lees-Edwards check and the count of the group atoms (the key's
        // "agreed" is from when the check was a collective; kept for the records)
        count: after("count").unwrap_or(0.0),
        exchanges,
        threads: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fix_s_thread_count_is_read_from_its_log() {
        let log = "LAMMPS (2 Aug 2023)\nfix mpcbox: per-rank exchange: the fluid runs over 2 \
                   LAMMPS ranks\nfix mpcbox: 16 threads per rank for the exchange loops\n";
        assert_eq!(threads_made(log), Some(16));
        assert_eq!(
            threads_made("fix mpcbox: 1 thread per rank for the exchange loops"),
            Some(1)
        );
        assert_eq!(threads_made("fix mpcbox: gather exchange: ..."), None);
    }

    #[test]
    fn the_timing_line_the_fix_prints_is_read_back() {
        let line = "fix mpcbox timing: 20 exchanges in 3.5 s on 4 ranks; per exchange (ms, \
                    slowest rank): md 150.5 pack 1.25 mpcbox_step 4.5 unpack 0.75 observe 0.5 \
                    exchange 7";
        let s = parse_timing(line).unwrap();
        assert_eq!(s.exchanges, 20.0);
        let parts = (s.md, s.pack, s.step, s.unpack, s.observe, s.exchange);
        assert_eq!(parts, (150.5, 1.25, 4.5, 0.75, 0.5, 7.0));
        assert!(parse_timing("fix mpcbox timing: 20 exchanges md x").is_err());
    }

    #[test]
    fn generated_chains_are_bonded_at_rest_length_inside_the_box_and_apart() {
        let text = chains_data(16, 20, 10).unwrap();
        let atoms: Vec<[f64; 3]> = text
            .lines()
            .skip_while(|l| !l.starts_with("Atoms"))
            .skip(2)
            .take_while(|l| !l.is_empty())
            .map(|l| {
                let w: Vec<f64> = l.split_whitespace().map(|v| v.parse().unwrap()).collect();
                [w[3], w[4], w[5]]
            })
            .collect();
        assert_eq!(atoms.len(), 200);
        assert!(atoms.iter().flatten().all(|&c| (0.0..16.0).contains(&c)));
        for c in 0..20 {
            for b in 1..10 {
                let (p, q) = (atoms[c * 10 + b - 1], atoms[c * 10 + b]);
                let d =
                    ((p[0] - q[0]).powi(2) + (p[1] - q[1]).powi(2) + (p[2] - q[2]).powi(2)).sqrt();
                assert!((d - 0.97).abs() < 1e-3, "bond {c}/{b}: {d}");
            }
        }
        // no two beads closer than a bond (minimum image)
        for i in 0..atoms.len() {
            for j in i + 1..atoms.len() {
                let d2: f64 = (0..3)
                    .map(|k| {
                        let d = (atoms[i][k] - atoms[j][k]).abs();
                        d.min(16.0 - d).powi(2)
                    })
                    .sum();
                assert!(d2 > 0.96 * 0.96, "beads {i} and {j} {}", d2.sqrt());
            }
        }
        assert!(chains_data(4, 100, 3).is_err());
    }
}
