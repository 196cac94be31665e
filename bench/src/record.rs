//! The records a run appends: one JSON line per measured case, with the scenario, the case
//! (sizes, variant), the figures, the machine, the hardware references measured in the same
//! run, the commit and the date. `bench/records/<machine>.jsonl` holds a machine kind's
//! history; `mpcbox-bench report` turns the latest record of each case into
//! `docs/performance.md`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::machine::Machine;
use crate::Res;

/// One measured case.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Record {
    pub scenario: String,
    /// What was measured: sizes and variant, in the scenario's column order.
    pub case: Vec<(String, Value)>,
    /// The measured figures, in the scenario's column order (not measured: NaN, `null`).
    #[serde(with = "nan_as_null")]
    pub figures: Vec<(String, f64)>,
    pub machine: Machine,
    /// Hardware references measured in the same run (GB/s: device copy, peer copy, pinned host
    /// copy, host memory copy), the yardstick the figures are read against.
    #[serde(default)]
    pub references: BTreeMap<String, f64>,
    /// The build measured (`git describe`-like; "unknown" outside a checkout).
    pub commit: String,
    /// UTC, `YYYY-MM-DDTHH:MM:SSZ` (imported records: the day of the original measurement).
    pub date: String,
    /// Imported from a results file written before the records existed: where from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imported: Option<String>,
}

/// Figures as JSON numbers, an unmeasured one (NaN) as `null`.
mod nan_as_null {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(v: &[(String, f64)], s: S) -> Result<S::Ok, S::Error> {
        let v: Vec<(&str, Option<f64>)> = v
            .iter()
            .map(|(k, f)| (k.as_str(), f.is_finite().then_some(*f)))
            .collect();
        v.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, f64)>, D::Error> {
        let v: Vec<(String, Option<f64>)> = Vec::deserialize(d)?;
        Ok(v.into_iter()
            .map(|(k, f)| (k, f.unwrap_or(f64::NAN)))
            .collect())
    }
}

/// Where a run's records go, and the run's machine and references.
pub struct Recorder {
    scenario: String,
    machine: Machine,
    references: BTreeMap<String, f64>,
    commit: String,
    date: String,
    file: Option<PathBuf>,
    /// The case and figure names of the table printed so far.
    header: Option<(Vec<String>, Vec<String>)>,
}

impl Recorder {
    /// Records of `scenario` on `machine` into `dir/<machine file>.jsonl` (None: print only).
    pub fn new(scenario: &str, machine: Machine, dir: Option<&Path>) -> Recorder {
        let file = dir.map(|d| d.join(format!("{}.jsonl", machine.file_stem())));
        println!("# mpcbox-bench {scenario} on {}", machine.kind);
        Recorder {
            scenario: scenario.into(),
            machine,
            references: BTreeMap::new(),
            commit: crate::machine::commit(),
            date: crate::machine::utc_now(),
            file,
            header: None,
        }
    }

    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    /// A hardware reference of this run (printed, and kept with every record).
    pub fn reference(&mut self, name: &str, value: Res<f64>) {
        match value {
            Ok(v) => {
                println!("reference: {name} = {v:.1}");
                self.references.insert(name.into(), v);
            }
            Err(e) => println!("reference: {name} not measured: {e}"),
        }
    }

    /// A measured case: printed as a markdown row (a new header when the columns change) and
    /// appended to the records.
    pub fn row(&mut self, case: &[(&str, Value)], figures: &[(&str, f64)]) -> Res<()> {
        let names = (
            case.iter().map(|(k, _)| k.to_string()).collect::<Vec<_>>(),
            figures
                .iter()
                .map(|(k, _)| k.to_string())
                .collect::<Vec<_>>(),
        );
        if self.header.as_ref() != Some(&names) {
            let cols: Vec<&str> = names.0.iter().chain(&names.1).map(String::as_str).collect();
            println!("\n| {} |", cols.join(" | "));
            println!("|{}", "---|".repeat(cols.len()));
            self.header = Some(names);
        }
        let cells: Vec<String> = case
            .iter()
            .map(|(_, v)| show_value(v))
            .chain(figures.iter().map(|(_, f)| show_figure(*f)))
            .collect();
        println!("| {} |", cells.join(" | "));
        let record = Record {
            scenario: self.scenario.clone(),
            case: case
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            figures: figures.iter().map(|(k, f)| (k.to_string(), *f)).collect(),
            machine: self.machine.clone(),
            references: self.references.clone(),
            commit: self.commit.clone(),
            date: self.date.clone(),
            imported: None,
        };
        self.append(&record)
    }

    fn append(&self, record: &Record) -> Res<()> {
        let Some(path) = &self.file else {
            return Ok(());
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let line = serde_json::to_string(record).map_err(|e| e.to_string())?;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        writeln!(f, "{line}").map_err(|e| format!("{}: {e}", path.display()))
    }
}

/// A case value as a table cell.
pub fn show_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Bool(b) => if *b { "yes" } else { "no" }.into(),
        other => other.to_string(),
    }
}

/// A figure with four significant digits (NaN: not measured).
pub fn show_figure(f: f64) -> String {
    if !f.is_finite() {
        return "–".into();
    }
    let a = f.abs();
    // trailing zeros dropped: an imported 0.44 is not shown as 0.4400
    let trim = |s: String| match s.split_once('e') {
        Some((m, e)) if m.contains('.') => {
            format!("{}e{e}", m.trim_end_matches('0').trim_end_matches('.'))
        }
        None if s.contains('.') => s.trim_end_matches('0').trim_end_matches('.').to_string(),
        _ => s,
    };
    if a == 0.0 {
        "0".into()
    } else if !(1e-3..1e6).contains(&a) {
        trim(format!("{f:.3e}"))
    } else {
        let decimals = (3 - a.log10().floor() as i32).max(0) as usize;
        trim(format!("{f:.decimals$}"))
    }
}

/// Every record of every `*.jsonl` under `dir`, with the file and line of a bad one named.
pub fn read_all(dir: &Path) -> Res<Vec<Record>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?;
        for (i, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            out.push(serde_json::from_str(line).map_err(|e| {
                format!(
                    "{}:{}: not a record ({e}); fix: remove the line",
                    f.display(),
                    i + 1
                )
            })?);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_keep_four_significant_digits() {
        assert_eq!(show_figure(17.163), "17.16");
        assert_eq!(show_figure(0.4512), "0.4512");
        assert_eq!(show_figure(0.44), "0.44");
        assert_eq!(show_figure(160.0), "160");
        assert_eq!(show_figure(389.64), "389.6");
        assert_eq!(show_figure(2.86e7), "2.86e7");
        assert_eq!(show_figure(1.0354e6), "1.035e6");
        assert_eq!(show_figure(f64::NAN), "–");
    }
}
