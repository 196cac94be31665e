//! `mpcbox-bench`: every benchmark of mpcbox as a scenario of one runner. Each run prints its
//! table and appends one record per measured case to `bench/records/<machine>.jsonl` (the
//! scenario, the case, the figures, the machine, the hardware references measured in the same
//! run, the commit, the date); `mpcbox-bench report` writes `docs/performance.md` from the
//! latest record of each case. `mpcbox-bench list` names the scenarios.
//!
//! Usage: mpcbox-bench [--records DIR|none] <scenario> [options] (run from the repository root;
//! `bench/device.sh` packs the runner and runs a list of scenarios on a GPU machine).

mod machine;
mod record;
mod report;
mod scenarios;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// A scenario's failure: what went wrong, naming the option or the cause.
pub type Res<T> = Result<T, String>;

#[derive(Parser)]
#[command(
    name = "mpcbox-bench",
    about = "mpcbox's benchmarks: one scenario per run, each case appended to bench/records"
)]
struct Cli {
    /// Directory the records are appended to (`<machine kind>.jsonl`); `none`: print only.
    #[arg(long, default_value = "bench/records", global = true)]
    records: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The scenarios: what each measures and where it runs.
    List,
    /// Write docs/performance.md from the records: per machine kind, the latest of each case.
    Report {
        /// The page to write (`-`: standard output).
        #[arg(long, default_value = "docs/performance.md")]
        out: String,
    },
    #[command(flatten)]
    Scenario(scenarios::Scenario),
}

fn main() {
    let cli = Cli::parse();
    let records = (cli.records != "none").then(|| PathBuf::from(&cli.records));
    let result = match cli.command {
        Command::List => {
            for (name, about, devices) in scenarios::LIST {
                println!("{name:14} {devices:12} {about}");
            }
            Ok(())
        }
        Command::Report { out } => match &records {
            Some(dir) => report::write(dir, &out),
            None => Err("report: --records none names no records; fix: give a directory".into()),
        },
        Command::Scenario(s) => {
            let _mpi = mpcbox::ranks::init();
            s.run(records.as_deref())
        }
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}
