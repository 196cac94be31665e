//! MD benchmark and precision checks of the bundled engine.
//!
//! * default: LJ liquid (ρ* = 0.8442, rc = 2.5, energy-shifted, T* = 0.72 start, NVE, skin 0.3,
//!   list check every step) in atom-steps/s for 32k and 256k atoms (`--million` adds 1M), and
//!   the same system in LAMMPS when `lmp` is on PATH, with the ratio. Markdown table.
//! * `--drift`: relative total-energy drift per 10⁶ steps of an NVE LJ liquid for dt = 0.001
//!   and 0.005 (linear fit, extrapolated from the steps run).
//! * `--crossover`: all-pairs vs Verlet-list time per step for small N (sets
//!   `neighbor::ALL_PAIRS_CROSSOVER`).

use std::process::Command;
use std::time::Instant;

use clap::Parser;
use mpcbox::md::build::{fcc_lattice, maxwell_velocities};
use mpcbox::md::{ForceField, LjTable, Md, MdSettings, MdThermostat, NeighborMode, PairStyle};

#[derive(Parser)]
#[command(about = "MD benchmark: LJ liquid atom-steps/s, LAMMPS comparison, energy drift")]
struct Args {
    /// MD steps per timed run for 32k atoms (scaled down for larger systems).
    #[arg(long, default_value_t = 400)]
    steps: u64,
    /// Also run 1M atoms (64³ FCC cells = 1,048,576).
    #[arg(long)]
    million: bool,
    /// Thread counts to time mpcbox with.
    #[arg(long, value_delimiter = ',', default_value = "2,1")]
    threads: Vec<usize>,
    /// Timed repetitions of every measurement; the best is reported (the machine is shared).
    #[arg(long, default_value_t = 2)]
    repeat: usize,
    /// Skip LAMMPS even when `lmp` is installed.
    #[arg(long)]
    no_lammps: bool,
    /// Energy drift mode.
    #[arg(long)]
    drift: bool,
    /// Steps of each drift run.
    #[arg(long, default_value_t = 100_000)]
    drift_steps: u64,
    /// FCC cells per edge of the drift system (4 n³ atoms).
    #[arg(long, default_value_t = 8)]
    drift_cells: usize,
    /// All-pairs vs Verlet crossover mode.
    #[arg(long)]
    crossover: bool,
}

fn lj_system(cells: usize, threads: usize, dt: f64, mode: NeighborMode) -> Md {
    lj_system_rc(cells, threads, dt, mode, 2.5)
}

fn lj_system_rc(cells: usize, threads: usize, dt: f64, mode: NeighborMode, rc: f64) -> Md {
    let mut sys = fcc_lattice([cells; 3], 0.8442, 1.0);
    maxwell_velocities(&mut sys, 0.72, 87287);
    let ff = ForceField {
        pair: PairStyle::Lj(LjTable::uniform(1, 1.0, 1.0, rc, true)),
        bond_styles: vec![],
    };
    let settings = MdSettings {
        dt,
        kt: 0.72,
        seed: 1,
        skin: 0.3,
        neighbor: mode,
        reorder_every: 20,
        threads,
        shear: None,
    };
    Md::new(sys, ff, MdThermostat::None, settings).expect("valid LJ system")
}

/// (atom-steps/s, atoms, steps) of mpcbox.
fn time_mpcbox(cells: usize, threads: usize, steps: u64) -> (f64, usize) {
    let mut md = lj_system(cells, threads, 0.005, NeighborMode::Verlet);
    md.run(10).expect("warm-up");
    let t0 = Instant::now();
    let builds = md.list_builds();
    md.run(steps).expect("run");
    let s = t0.elapsed().as_secs_f64();
    eprintln!(
        "  {} list builds in {steps} steps",
        md.list_builds() - builds
    );
    (md.sys.len() as f64 * steps as f64 / s, md.sys.len())
}

/// (atom-steps/s, description) of LAMMPS, serial (one process, no MPI launcher).
fn time_lammps(cells: usize, steps: u64, suffix: Option<&str>) -> Option<f64> {
    let dir = std::env::temp_dir().join(format!("mpcbox-bench-lmp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let input = format!(
        "units lj\natom_style atomic\nlattice fcc 0.8442\nregion box block 0 {cells} 0 {cells} 0 {cells}\n\
         create_box 1 box\ncreate_atoms 1 box\nmass 1 1.0\nvelocity all create 0.72 87287 loop geom\n\
         pair_style lj/cut 2.5\npair_coeff 1 1 1.0 1.0 2.5\npair_modify shift yes\n\
         neighbor 0.3 bin\nneigh_modify delay 0 every 1 check yes\nfix 1 all nve\ntimestep 0.005\n\
         thermo {steps}\nrun 10\nrun {steps}\n"
    );
    let path = dir.join("in.lj");
    std::fs::write(&path, input).ok()?;
    let mut cmd = Command::new("lmp");
    cmd.current_dir(&dir)
        .args(["-in", "in.lj", "-log", "none", "-nocite"]);
    if let Some(s) = suffix {
        cmd.args(["-sf", s]);
    }
    let out = cmd.output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let _ = std::fs::remove_dir_all(&dir);
    // "Loop time of 12.3 on 1 procs for 400 steps with 32000 atoms" (the last run)
    let line = text.lines().rfind(|l| l.starts_with("Loop time of"))?;
    let w: Vec<&str> = line.split_whitespace().collect();
    let secs: f64 = w.get(3)?.parse().ok()?;
    let nsteps: f64 = w.get(8)?.parse().ok()?;
    let atoms: f64 = w.get(11)?.parse().ok()?;
    Some(atoms * nsteps / secs)
}

fn lammps_available() -> bool {
    Command::new("lmp")
        .arg("-h")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn bench(args: &Args) {
    let mut sizes = vec![(20usize, args.steps), (40, (args.steps / 4).max(20))];
    if args.million {
        sizes.push((64, (args.steps / 16).max(10)));
    }
    let lmp = !args.no_lammps && lammps_available();
    print_bench_preamble(args, lmp);
    let mut header = String::from("| atoms | steps |");
    let mut rule = String::from("|---:|---:|");
    for t in &args.threads {
        header += &format!(" mpcbox {t} thr (atom-steps/s) |");
        rule += "---:|";
    }
    if lmp {
        header += " LAMMPS serial (atom-steps/s) | LAMMPS -sf opt (atom-steps/s) |";
        rule += "---:|---:|";
        for t in &args.threads {
            header += &format!(" mpcbox {t} thr / best LAMMPS |");
            rule += "---:|";
        }
    }
    let rows: Vec<String> = sizes
        .into_iter()
        .map(|(cells, steps)| bench_row(args, cells, steps, lmp))
        .collect();
    println!("{header}\n{rule}");
    for r in rows {
        println!("{r}");
    }
    println!();
    println!("load average at end: {}", load_average());
}

/// The system, the machine and the timing rules above the table.
fn print_bench_preamble(args: &Args, lmp: bool) {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    println!(
        "LJ liquid, rho* = 0.8442, rc = 2.5 (shifted), T* = 0.72 start, NVE, dt = 0.005, skin 0.3, list check every step"
    );
    println!(
        "CPU: {cpu}, {} logical cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    if lmp {
        println!("LAMMPS: `lmp` serial (one process, no mpirun; the Debian build has no OPENMP package, so no `-sf omp`); best of plain and `-sf opt`");
    } else {
        println!("LAMMPS: not run (`lmp` not found or --no-lammps)");
    }
    println!(
        "best of {} timed runs per entry (1 for 1M atoms); load average at start: {}",
        args.repeat.max(1),
        load_average()
    );
    println!();
}

/// One table row: mpcbox at each thread count, then LAMMPS and the ratios when it runs.
fn bench_row(args: &Args, cells: usize, steps: u64, lmp: bool) -> String {
    let mut row = String::new();
    let mut ours = vec![];
    let mut atoms = 0;
    let reps = if cells >= 64 { 1 } else { args.repeat.max(1) };
    for &t in &args.threads {
        let mut best: f64 = 0.0;
        for _ in 0..reps {
            let (rate, n) = time_mpcbox(cells, t, steps);
            atoms = n;
            best = best.max(rate);
            eprintln!("mpcbox {n} atoms, {t} threads: {rate:.4e} atom-steps/s");
        }
        ours.push(best);
    }
    row += &format!("| {atoms} | {steps} |");
    for r in &ours {
        row += &format!(" {r:.3e} |");
    }
    if lmp {
        let best_of = |suffix: Option<&str>| {
            (0..reps)
                .filter_map(|_| time_lammps(cells, steps, suffix))
                .reduce(f64::max)
        };
        let plain = best_of(None);
        let opt = best_of(Some("opt"));
        eprintln!("LAMMPS {atoms} atoms: plain {plain:?}, opt {opt:?}");
        let fmt = |v: Option<f64>| v.map_or("failed".to_string(), |v| format!("{v:.3e}"));
        row += &format!(" {} | {} |", fmt(plain), fmt(opt));
        let best = plain.unwrap_or(0.0).max(opt.unwrap_or(0.0));
        for r in &ours {
            if best > 0.0 {
                row += &format!(" {:.2} |", r / best);
            } else {
                row += " n/a |";
            }
        }
    }
    row
}

/// The 1/5/15-minute load averages (other jobs share this machine).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|t| t.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn drift(args: &Args) {
    println!(
        "NVE LJ liquid, {} atoms (FCC {}³ melted at T* = 0.72), rho* = 0.8442, rc = 2.5 energy-shifted, skin 0.3, f64",
        4 * args.drift_cells.pow(3),
        args.drift_cells
    );
    println!();
    println!("| dt | steps run | E/N at start | max abs(dE/E) | linear drift of E/abs(E0) per 10^6 steps (extrapolated) |");
    println!("|---:|---:|---:|---:|---:|");
    for dt in [0.001, 0.005] {
        let mut md = lj_system(args.drift_cells, 0, dt, NeighborMode::Verlet);
        // melt the lattice before measuring
        md.run((5.0 / dt) as u64).expect("equilibration");
        let e0 = md.total_energy();
        let steps = args.drift_steps;
        let every = (steps / 1000).max(1);
        let (mut ts, mut es) = (vec![], vec![]);
        let mut worst: f64 = 0.0;
        let mut done = 0;
        while done < steps {
            md.run(every).expect("run");
            done += every;
            let e = md.total_energy();
            worst = worst.max(((e - e0) / e0).abs());
            ts.push(done as f64);
            es.push(e);
        }
        let n = ts.len() as f64;
        let mt = ts.iter().sum::<f64>() / n;
        let me = es.iter().sum::<f64>() / n;
        let slope = ts
            .iter()
            .zip(&es)
            .map(|(t, e)| (t - mt) * (e - me))
            .sum::<f64>()
            / ts.iter().map(|t| (t - mt).powi(2)).sum::<f64>();
        let per_million = slope * 1e6 / e0.abs();
        println!(
            "| {dt} | {steps} | {:.5} | {worst:.2e} | {per_million:+.2e} |",
            e0 / md.sys.len() as f64
        );
    }
}

fn crossover() {
    println!("All pairs vs cell + Verlet lists, LJ (shifted), skin 0.3, rho* = 0.8442, T* = 0.72, all threads");
    println!();
    println!(
        "| rc | atoms | N / (list neighbours) | all-pairs us/step | Verlet us/step | faster |"
    );
    println!("|---:|---:|---:|---:|---:|---|");
    for (rc, cells_list) in [(1.5, vec![3usize, 4, 5, 6]), (2.5, vec![4, 5, 6, 7, 8])] {
        let per = 4.0 / 3.0 * std::f64::consts::PI * (rc + 0.3f64).powi(3) * 0.8442;
        for cells in cells_list {
            let mut t = [0.0; 2];
            let mut n = 0;
            for (k, mode) in [NeighborMode::AllPairs, NeighborMode::Verlet]
                .into_iter()
                .enumerate()
            {
                let mut md = lj_system_rc(cells, 0, 0.005, mode, rc);
                md.run(20).expect("warm-up");
                let steps = 400;
                let t0 = Instant::now();
                md.run(steps).expect("run");
                t[k] = t0.elapsed().as_secs_f64() / steps as f64 * 1e6;
                n = md.sys.len();
                if k == 1 && !md.uses_verlet_list() {
                    t[k] = f64::NAN;
                }
            }
            println!(
                "| {rc} | {n} | {:.1} | {:.1} | {:.1} | {} |",
                n as f64 / per,
                t[0],
                t[1],
                if t[1].is_nan() {
                    "(box too small for lists)"
                } else if t[0] < t[1] {
                    "all-pairs"
                } else {
                    "Verlet"
                }
            );
        }
    }
}

fn main() {
    let args = Args::parse();
    if args.crossover {
        crossover();
    } else if args.drift {
        drift(&args);
    } else {
        bench(&args);
    }
}
