//! `production`: production runs of the `mpcbox` command, each a child process on
//! `examples/multi_gpu.ron` (its box, checkpoint interval and output directory set per case):
//! start-up with a cold and a warm kernel cache (one GPU, and the walls' kernels from
//! `examples/poiseuille_slit.ron`), stepping without checkpoints, with one every `--ck-every`
//! steps written in the background and written by the stepping thread
//! (`MPCBOX_CHECKPOINTS=blocking`), resumes of that checkpoint on all the GPUs and on one (the
//! page cache dropped where the process may, as root), and with `--big` the largest boxes, each
//! with its one last checkpoint; `--only polymer`: the sheared polymer solution of
//! `examples/polymer_shear_256.ron` (fluid, bundled MD engine, stress samples, frames and
//! checkpoints) on all the GPUs and on one, the run the `polymer` scenario times without its
//! output. Every figure is read from the run's summary (`timing`); the disk's sequential
//! direct-I/O rates under `--dir` are the run's references.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use mpcbox::config::{Config, DeviceChoice};

use super::checkpoint::{disk_rate, drop_page_cache};
use super::{err, gpus_of, recorder};
use crate::record::Recorder;
use crate::Res;

#[derive(Clone, Copy, PartialEq, clap::ValueEnum)]
enum Only {
    /// The checkpointed run and the resumes.
    Checkpoints,
    /// The largest boxes (`--big-edges`).
    Big,
    /// `polymer_shear_256.ron`, the coupled polymer solution, on all the GPUs and on one.
    Polymer,
}

#[derive(clap::Args)]
pub struct Args {
    /// Edge of the cubic box of `multi_gpu.ron`, in cells (the `--big` boxes aside).
    #[arg(long, default_value_t = 256)]
    cells: u32,
    /// The multi-GPU cases' device: auto | cpu | all | cuda:N[,M...]; the one-GPU cases run on
    /// its first GPU (`cpu`: every case on the CPU).
    #[arg(long, default_value = "all")]
    device: String,
    /// Steps of the runs without checkpoints and with checkpoints written by the stepping thread.
    #[arg(long, default_value_t = 3000)]
    steps: u64,
    /// Steps of the run with a checkpoint every `--ck-every` steps (a production run's steady
    /// state and its last write); the resumes run 10 steps past it.
    #[arg(long, default_value_t = 10000)]
    ck_steps: u64,
    /// Steps between the checkpoints of the checkpointed runs.
    #[arg(long, default_value_t = 1000)]
    ck_every: u64,
    /// Only these cases: `checkpoints` (the checkpointed run and the resumes) or `big`.
    #[arg(long, value_enum)]
    only: Option<Only>,
    /// Add the largest boxes (`--big-edges`), each with one checkpoint, its last (skipped
    /// where the disk lacks the room).
    #[arg(long)]
    big: bool,
    /// Edges of the largest boxes, in cells.
    #[arg(long, value_delimiter = ',', default_value = "512,768")]
    big_edges: Vec<u32>,
    /// Collisions of each run of `polymer_shear_256.ron` (`--only polymer`).
    #[arg(long, default_value_t = 1000)]
    polymer_steps: u64,
    /// Steps of each of the largest boxes.
    #[arg(long, default_value_t = 20)]
    big_steps: u64,
    /// The `mpcbox` command (default: the one beside this runner, else target/release/mpcbox).
    #[arg(long)]
    mpcbox: Option<PathBuf>,
    /// The folder holding `multi_gpu.ron` and `poiseuille_slit.ron`.
    #[arg(long, default_value = "examples")]
    examples: PathBuf,
    /// Where the runs' files go (the disk measured; default: the system's temporary folder): a
    /// folder of this run's, removed at the end.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// MiB written and read back for the disk's direct-I/O reference.
    #[arg(long, default_value_t = 8192)]
    reference_mib: usize,
}

/// What a case runs.
enum Source {
    /// `multi_gpu.ron` with a box of this edge and a checkpoint every so many steps (0: only
    /// the last).
    Box { edge: u32, every: u64 },
    /// An example as it is (`poiseuille_slit.ron`, `polymer_shear_256.ron`), its output in
    /// the case's folder.
    Example(PathBuf),
    /// A resume of this checkpoint, of a box of this edge.
    Resume(PathBuf, u32),
}

/// One run of the `mpcbox` command.
struct Case<'a> {
    name: String,
    source: Source,
    steps: u64,
    /// `--device` of the command, and the GPUs it names (0: the CPU).
    device: &'a str,
    gpus: usize,
    env: &'a [(&'a str, &'a str)],
    /// The checkpoint it leaves is kept (for the resumes).
    keep: bool,
}

/// The runs' shared set-up: the command, the configs, the scratch folder, the failures.
struct Runs {
    bin: PathBuf,
    template: String,
    walls: PathBuf,
    polymer: PathBuf,
    scratch: PathBuf,
    failed: Vec<String>,
}

pub fn run(a: Args, records: Option<&Path>) -> Res<()> {
    let device = super::device(&a.device)?;
    let gpus = gpus_of(&device).unwrap_or_default();
    if device != DeviceChoice::Cpu && gpus.is_empty() {
        return Err(format!(
            "production: --device {} names no GPU on this machine; fix: --device cpu (with a \
             small --cells) or run on a GPU machine",
            a.device
        ));
    }
    let one = match gpus.first() {
        Some(g) => format!("cuda:{g}"),
        None => "cpu".into(),
    };
    let bin = mpcbox_command(a.mpcbox.as_deref())?;
    let template_path = a.examples.join("multi_gpu.ron");
    let template = std::fs::read_to_string(&template_path)
        .map_err(|e| format!("{}: {e}; fix: --examples DIR", template_path.display()))?;
    let walls = a.examples.join("poiseuille_slit.ron");
    Config::from_file(&walls).map_err(|e| format!("{}: {e}", walls.display()))?;
    let polymer = a.examples.join("polymer_shear_256.ron");
    Config::from_file(&polymer).map_err(|e| format!("{}: {e}", polymer.display()))?;
    let base = a.dir.clone().unwrap_or_else(std::env::temp_dir);
    let scratch = base.join(format!("mpcbox-bench-production-{}", std::process::id()));
    std::fs::create_dir_all(scratch.join("cache"))
        .map_err(|e| format!("{}: {e}; fix: --dir DIR", scratch.display()))?;
    let mut rec = recorder("production", &device, records);
    println!("mpcbox: {}", bin.display());
    let total = a.reference_mib.max(16) << 20;
    rec.reference(
        "disk write GB/s (direct I/O)",
        disk_rate(&scratch, total, true),
    );
    rec.reference(
        "disk read GB/s (direct I/O)",
        disk_rate(&scratch, total, false),
    );
    let mut runs = Runs {
        bin,
        template,
        walls,
        polymer,
        scratch: scratch.clone(),
        failed: Vec::new(),
    };
    let measured = runs.all(&a, &mut rec, (&a.device, gpus.len()), &one);
    let _ = std::fs::remove_dir_all(&scratch);
    measured?;
    match runs.failed.as_slice() {
        [] => Ok(()),
        f => Err(format!("production: {} failed: {}", f.len(), f.join("; "))),
    }
}

impl Runs {
    /// The cases as `a` asks, in order: a failed one is reported at the end, the others run on.
    fn all(&mut self, a: &Args, rec: &mut Recorder, multi: (&str, usize), one: &str) -> Res<()> {
        let blocking: &[(&str, &str)] = &[("MPCBOX_CHECKPOINTS", "blocking")];
        let ones = usize::from(one != "cpu");
        let (l, every) = (a.cells, a.ck_every);
        let one_gpu = |name: &str, source, steps| Case {
            name: name.into(),
            source,
            steps,
            device: one,
            gpus: ones,
            env: &[],
            keep: false,
        };
        let all_gpus = |name: &str, source, steps, env| Case {
            name: name.into(),
            source,
            steps,
            device: multi.0,
            gpus: multi.1,
            env,
            keep: false,
        };
        if a.only == Some(Only::Polymer) {
            // the bench's `polymer` scenario times the same system without output
            let polymer = Source::Example(self.polymer.clone());
            let steps = a.polymer_steps;
            self.case(rec, all_gpus("polymer-all", polymer, steps, &[]))?;
            let polymer = Source::Example(self.polymer.clone());
            self.case(rec, one_gpu("polymer-1gpu", polymer, steps))?;
            return Ok(());
        }
        if a.only != Some(Only::Big) {
            if a.only.is_none() {
                // a cold start (kernels compiled, the cache empty), then warm ones (read back);
                // the walls' kernels are another set, compiled cold here too
                let no_ck = |edge| Source::Box { edge, every: 0 };
                self.case(rec, one_gpu("cold-1gpu", no_ck(l), 10))?;
                let walls = Source::Example(self.walls.clone());
                self.case(rec, one_gpu("cold-walls", walls, 10))?;
                self.case(rec, one_gpu("warm-1gpu", no_ck(l), 10))?;
                self.case(rec, all_gpus("warm-all", no_ck(l), 10, &[]))?;
                self.case(rec, all_gpus("ck-none", no_ck(l), a.steps, &[]))?;
            }
            let ck = format!("ck-{every}");
            let source = Source::Box { edge: l, every };
            let checkpointed = Case {
                keep: true,
                ..all_gpus(&ck, source, a.ck_steps, &[])
            };
            let kept = self.case(rec, checkpointed)?;
            if a.only.is_none() {
                let source = Source::Box { edge: l, every };
                let name = format!("{ck}-blocking");
                self.case(rec, all_gpus(&name, source, a.steps, blocking))?;
            }
            match kept {
                Some(file) => {
                    let resume = || Source::Resume(file.clone(), l);
                    let steps = a.ck_steps + 10;
                    self.case(rec, all_gpus("resume-all", resume(), steps, &[]))?;
                    self.case(rec, one_gpu("resume-1gpu", resume(), steps))?;
                }
                None => self.failed.push(format!(
                    "resume-all, resume-1gpu: no checkpoint of {ck} to resume"
                )),
            }
            let _ = std::fs::remove_dir_all(self.scratch.join(&ck));
        }
        if a.big || a.only == Some(Only::Big) {
            let m = Config::from_ron_str(&self.config(a.cells, 0, Path::new("."))?)
                .map_err(err)?
                .particles_per_cell as f64;
            for &edge in &a.big_edges {
                let name = format!("big-{edge}");
                // the checkpoint's bytes, and 8 GB more
                let bytes = mpcbox::checkpoint::PARTICLE_BYTES as f64;
                let need = (edge as f64).powi(3) * m * bytes / 1e9 + 8.0;
                let free = free_gb(&self.scratch)?;
                if free < need {
                    println!(
                        "{name}: skipped, {free:.0} GB free under {} and a checkpoint needs \
                         {need:.0} GB",
                        self.scratch.display()
                    );
                    continue;
                }
                let source = Source::Box { edge, every: 0 };
                self.case(rec, all_gpus(&name, source, a.big_steps, &[]))?;
                let _ = std::fs::remove_dir_all(self.scratch.join(&name));
            }
        }
        Ok(())
    }

    /// `multi_gpu.ron` with a box of `edge` cells, a checkpoint every `every` steps (0: only
    /// the last) and its output in `out`: those three lines of the example replaced.
    fn config(&self, edge: u32, every: u64, out: &Path) -> Res<String> {
        let dir = serde_json::to_string(&out.to_string_lossy()).map_err(err)?;
        let mut found = [false; 3];
        let mut text = String::new();
        for line in self.template.lines() {
            let body = line.trim_start();
            let indent = &line[..line.len() - body.len()];
            let replaced = [
                ("cells:", format!("cells: ({edge}, {edge}, {edge}),")),
                (
                    "checkpoint_interval:",
                    format!("checkpoint_interval: {every},"),
                ),
                ("directory:", format!("directory: {dir},")),
            ]
            .into_iter()
            .enumerate()
            .find(|(_, (key, _))| body.starts_with(key));
            match replaced {
                Some((k, (_, new))) => {
                    found[k] = true;
                    text.push_str(indent);
                    text.push_str(&new);
                }
                None => text.push_str(line),
            }
            text.push('\n');
        }
        if found != [true; 3] {
            return Err(
                "production: multi_gpu.ron lacks a `cells:`, `checkpoint_interval:` or \
                 `directory:` line (each on a line of its own); fix: --examples DIR"
                    .into(),
            );
        }
        Ok(text)
    }

    /// Run `c` and record its row; the checkpoint it leaves where `c.keep` (its output is
    /// removed otherwise). A failure is kept for the end.
    fn case(&mut self, rec: &mut Recorder, c: Case) -> Res<Option<PathBuf>> {
        match self.launch(&c) {
            Ok(row) => {
                rec.row(&row.case, &row.figures)?;
                let out = self.scratch.join(&c.name);
                let file = out.join(mpcbox::report::CHECKPOINT_FILE);
                if c.keep && file.exists() {
                    return Ok(Some(file));
                }
                let _ = std::fs::remove_dir_all(out);
                Ok(None)
            }
            Err(e) => {
                println!("{}: failed: {e}", c.name);
                self.failed.push(format!("{} ({e})", c.name));
                Ok(None)
            }
        }
    }

    /// The command run for `c`, and its row.
    fn launch(&self, c: &Case) -> Res<Row> {
        let out = self.scratch.join(&c.name);
        let _ = std::fs::remove_dir_all(&out);
        let mut cmd = Command::new(&self.bin);
        cmd.arg("run");
        let (mut dropped, mut read_bytes) = (None, None);
        let cells = match &c.source {
            Source::Box { edge, every } => {
                let ron = self.scratch.join(format!("{}.ron", c.name));
                let text = self.config(*edge, *every, &out)?;
                Config::from_ron_str(&text).map_err(|e| format!("{}: {e}", ron.display()))?;
                std::fs::write(&ron, text).map_err(|e| format!("{}: {e}", ron.display()))?;
                cmd.arg(&ron).arg("--overwrite");
                format!("{edge}³")
            }
            Source::Example(ron) => {
                let [x, y, z] = Config::from_file(ron).map_err(err)?.cells;
                cmd.arg(ron).arg("-o").arg(&out).arg("--overwrite");
                format!("{x} × {y} × {z}")
            }
            Source::Resume(file, edge) => {
                read_bytes = Some(std::fs::metadata(file).map_err(err)?.len() as f64);
                dropped = Some(drop_page_cache());
                cmd.arg("--resume").arg(file).arg("-o").arg(&out);
                format!("{edge}³")
            }
        };
        cmd.args([
            "--device",
            c.device,
            "--steps",
            &c.steps.to_string(),
            "--quiet",
        ]);
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "info");
        }
        cmd.env("XDG_CACHE_HOME", self.scratch.join("cache"));
        cmd.envs(c.env.iter().copied());
        let log = self.scratch.join(format!("{}.log", c.name));
        let stderr = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let done = cmd
            .stdout(Stdio::piped())
            .stderr(stderr)
            .output()
            .map_err(|e| format!("{}: {e}", self.bin.display()))?;
        let log_text = std::fs::read_to_string(&log).unwrap_or_default();
        if !done.status.success() {
            let tail: Vec<&str> = log_text.lines().rev().take(8).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            return Err(format!("mpcbox {}: {}", done.status, tail.join(" / ")));
        }
        // the lines that say where the start-up and the run's time went
        for line in log_text
            .lines()
            .filter(|l| l.contains("start-up took") || l.contains("time: "))
        {
            let text = line.split_once(": ").map_or(line, |(_, t)| t);
            println!("{}: {text}", c.name);
        }
        let summary: Value = serde_json::from_slice(&done.stdout)
            .or_else(|_| {
                let path = out.join(mpcbox::report::SUMMARY_JSON);
                let text = std::fs::read_to_string(&path).map_err(err)?;
                serde_json::from_str(&text).map_err(err)
            })
            .map_err(|e: String| format!("no summary of the run: {e}"))?;
        Row::of(c, cells, &summary, dropped, read_bytes)
    }
}

/// A case's row, from the run's summary.
struct Row {
    case: Vec<(&'static str, Value)>,
    figures: Vec<(&'static str, f64)>,
}

impl Row {
    fn of(
        c: &Case,
        cells: String,
        s: &Value,
        dropped: Option<bool>,
        read_bytes: Option<f64>,
    ) -> Res<Row> {
        let num = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
        let t = &s["timing"];
        let ck = &t["checkpoints"];
        let n = s["fluid_particles"]
            .as_u64()
            .ok_or("the run's summary has no fluid_particles (please report it)")?;
        let steps = s["steps_this_run"].as_u64().unwrap_or(0);
        let per = |x: f64, seconds: f64| if seconds > 0.0 { x / seconds } else { f64::NAN };
        let phases: Vec<(String, f64)> = t["startup_phases"]
            .as_array()
            .map(|p| {
                p.iter()
                    .map(|p| {
                        (
                            p["name"].as_str().unwrap_or("").to_string(),
                            num(&p["seconds"]),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        // the kernels compiled (cold) or read back from the cache (warm); none on the CPU
        let kernels = |how: &str| {
            phases
                .iter()
                .any(|(p, _)| p.starts_with("kernels ") && p.ends_with(how))
        };
        let cache = if kernels(" compiled") {
            "cold"
        } else if kernels(" read back") {
            "warm"
        } else {
            "–"
        };
        // a resume's read: the count of each slab's particles and the read proper (GPUs), or
        // the fluid read whole (the CPU)
        let read: f64 = phases
            .iter()
            .filter(|(p, _)| {
                matches!(
                    p.as_str(),
                    "read the checkpoint" | "count the checkpoint's particles" | "read the fluid"
                )
            })
            .map(|(_, s)| s)
            .sum();
        let yes_no = |b: bool| json!(if b { "yes" } else { "no" });
        Ok(Row {
            case: vec![
                ("run", json!(c.name)),
                ("cells", json!(cells)),
                ("particles", json!(n)),
                ("GPUs", json!(c.gpus)),
                ("steps", json!(steps)),
                ("kernel cache", json!(cache)),
                ("page cache dropped", dropped.map_or(json!("–"), yes_no)),
            ],
            figures: vec![
                ("start-up s", num(&t["startup_seconds"])),
                (
                    "stepping G p-s/s",
                    per((n * steps) as f64, num(&t["stepping_seconds"])) / 1e9,
                ),
                (
                    "run loop G p-s/s",
                    num(&s["particle_steps_per_second"]) / 1e9,
                ),
                (
                    "run loop ms/step",
                    per(n as f64 * 1e3, num(&s["particle_steps_per_second"])),
                ),
                ("checkpoints", num(&ck["written"])),
                ("held s, all", num(&ck["blocking_seconds"])),
                ("longest held s", num(&ck["longest_blocking_seconds"])),
                (
                    "background GB/s",
                    per(num(&ck["bytes"]), num(&ck["background_seconds"])) / 1e9,
                ),
                (
                    "resume read GB/s",
                    read_bytes.map_or(f64::NAN, |b| per(b, read) / 1e9),
                ),
                (
                    "peak host GiB",
                    num(&t["peak_host_memory_bytes"]) / f64::from(1u32 << 30),
                ),
            ],
        })
    }
}

/// The `mpcbox` command: `given`, else the one beside this runner, else the release build's.
fn mpcbox_command(given: Option<&Path>) -> Res<PathBuf> {
    if let Some(p) = given {
        return if p.is_file() {
            Ok(p.to_path_buf())
        } else {
            Err(format!(
                "production: --mpcbox {}: no such file",
                p.display()
            ))
        };
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join("mpcbox")));
    let release = PathBuf::from("target/release/mpcbox");
    beside
        .into_iter()
        .chain([release])
        .find(|p| p.is_file())
        .ok_or_else(|| {
            "production: no `mpcbox` command beside mpcbox-bench nor at target/release/mpcbox; \
             fix: cargo build --release, or --mpcbox PATH"
                .into()
        })
}

/// GB free for this user under `dir`.
fn free_gb(dir: &Path) -> Res<f64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).map_err(err)?;
    // SAFETY: an all-zero statvfs is a valid value of the plain C struct, filled in below.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: path is a NUL-terminated string and st a statvfs the call may write.
    if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
        return Err(format!(
            "{}: {}",
            dir.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(st.f_bavail as f64 * st.f_frsize as f64 / 1e9)
}
