//! Error types. Every error says what is wrong and how to fix it.

use thiserror::Error;

/// A configuration that cannot be run.
#[derive(Debug, Clone, PartialEq, Error)]
#[error("config field `{field}`: {problem}; fix: {fix}")]
pub struct ConfigError {
    pub field: String,
    pub problem: String,
    pub fix: String,
}

impl ConfigError {
    /// A RON parse error, naming the field where ron tells which one.
    pub fn from_ron(e: ron::error::SpannedError) -> Self {
        use ron::Error as E;
        let at = format!("line {}, column {}", e.position.line, e.position.col);
        match &e.code {
            E::MissingStructField { field, outer } => ConfigError {
                field: field.to_string(),
                problem: format!(
                    "missing in {} ({at})",
                    outer.as_deref().unwrap_or("the config")
                ),
                fix: format!("add `{field}: ...` (see examples/*.ron)"),
            },
            E::NoSuchStructField {
                expected,
                found,
                outer,
            } => ConfigError {
                field: found.to_string(),
                problem: format!(
                    "no such field in {} ({at})",
                    outer.as_deref().unwrap_or("the config")
                ),
                fix: format!("remove it or use one of: {}", expected.join(", ")),
            },
            E::NoSuchEnumVariant {
                expected,
                found,
                outer,
            } => ConfigError {
                field: outer.as_deref().unwrap_or("(enum)").to_string(),
                problem: format!("`{found}` is not a valid choice ({at})"),
                fix: format!("use one of: {}", expected.join(", ")),
            },
            _ => Self::syntax(e.to_string()),
        }
    }

    /// [`ConfigError::from_ron`] for an error in `text`: a value ron rejects without naming
    /// the field (a negative count, a number out of range) is attributed to the field written
    /// just before the error's position.
    pub fn from_ron_in(text: &str, e: ron::error::SpannedError) -> Self {
        let generic = matches!(
            &e.code,
            ron::Error::IntegerOutOfBounds
                | ron::Error::ExpectedInteger
                | ron::Error::ExpectedFloat
        );
        let pos = e.position;
        let field = field_before(text, pos.line, pos.col);
        // `particles_per_cell: 10.5`: ron reads the count 10, then finds no comma at `.5`
        let fraction = matches!(e.code, ron::Error::ExpectedComma)
            && char_at(text, pos.line, pos.col) == Some('.');
        // ron names an enum by its type (`Thermostat`): the field written before it is meant
        let variant = matches!(e.code, ron::Error::NoSuchEnumVariant { .. });
        let mut err = Self::from_ron(e);
        match field {
            Some(field) if fraction => {
                err.problem = format!(
                    "takes a whole number, not a fraction (line {}, column {})",
                    pos.line, pos.col
                );
                err.fix = format!("give `{field}` a whole number (e.g. 10)");
                err.field = field;
            }
            Some(field) if generic => {
                err.fix = format!(
                    "give `{field}` a value of its type and range (see docs/configuration.md)"
                );
                err.field = field;
            }
            Some(field) if variant => err.field = field,
            _ => {}
        }
        err
    }

    pub fn syntax(message: String) -> Self {
        ConfigError {
            field: "(syntax)".into(),
            problem: format!("the RON text does not parse: {message}"),
            fix: "compare with examples/*.ron (field names, parentheses, commas)".into(),
        }
    }
}

/// The character at (line, col) (1-based) in `text`.
fn char_at(text: &str, line: usize, col: usize) -> Option<char> {
    text.lines()
        .nth(line.checked_sub(1)?)?
        .chars()
        .nth(col.checked_sub(1)?)
}

/// The last `name:` written before (line, col) (1-based) in `text`, if any.
fn field_before(text: &str, line: usize, col: usize) -> Option<String> {
    let mut offset = 0;
    for (k, l) in text.split_inclusive('\n').enumerate() {
        if k + 1 == line {
            offset += l
                .char_indices()
                .nth(col.saturating_sub(1))
                .map_or(l.len(), |c| c.0);
            break;
        }
        offset += l.len();
    }
    let head = &text[..offset.min(text.len())];
    let colon = head.rfind(':')?;
    let name: String = head[..colon]
        .trim_end()
        .chars()
        .rev()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    (!name.is_empty()).then_some(name)
}

/// Anything that can go wrong in a run.
#[derive(Debug, Error)]
pub enum MpcError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Bad solute arrays handed to a coupled step; the solvent state is left untouched.
    #[error("solute input `{field}`: {problem}; fix: {fix}")]
    Solute {
        field: String,
        problem: String,
        fix: String,
    },
    #[error("device: {0}")]
    Device(String),
    /// A CUDA driver call failed; `what` says which (the driver's error is the source).
    #[error("device: CUDA {what}: {source}")]
    Driver {
        what: String,
        #[source]
        source: cudarc::driver::DriverError,
    },
    /// The dynamics became unstable (a non-finite energy, a bond torn apart): the input is
    /// legal, the run is not; `fix` says what usually causes it.
    #[error("the run became unstable at step {step}: {what}; fix: {fix}")]
    Unstable {
        step: u64,
        what: String,
        fix: String,
    },
    /// The system does not fit in the memory of the chosen device.
    #[error("out of memory on {device}: needs {needed_bytes} bytes, {available_bytes} available; fix: {fix}")]
    OutOfMemory {
        device: String,
        needed_bytes: u64,
        available_bytes: u64,
        fix: String,
    },
    #[error("checkpoint {path}: {problem}")]
    Checkpoint { path: String, problem: String },
    #[error("i/o on {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The run stopped on a signal (or `stop::request_stop`) after `step`, its checkpoint and
    /// summary written.
    #[error("stopped by request after step {step}, the checkpoint ({checkpoint}) and the summary written; continue with `mpcbox run --resume {checkpoint}` (Python: mpcbox.run(resume=\"{checkpoint}\"))")]
    Interrupted { step: u64, checkpoint: String },
}

impl MpcError {
    pub fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        MpcError::Io {
            path: path.display().to_string(),
            source,
        }
    }
}

pub type Result<T, E = MpcError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    /// A driver failure keeps the driver's error as its source (for callers that match on it),
    /// and I/O failures theirs. (Not displayed here: the driver's text needs the CUDA library.)
    #[test]
    fn driver_and_io_errors_keep_their_source() {
        use cudarc::driver::{sys::CUresult, DriverError};
        use std::error::Error as _;
        let e = MpcError::Driver {
            what: "launch".into(),
            source: DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY),
        };
        let src = e.source().and_then(|s| s.downcast_ref::<DriverError>());
        assert_eq!(src.map(|d| d.0), Some(CUresult::CUDA_ERROR_OUT_OF_MEMORY));
        let io = MpcError::io(
            std::path::Path::new("/x"),
            std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        );
        let kind = io
            .source()
            .and_then(|s| s.downcast_ref::<std::io::Error>())
            .map(|e| e.kind());
        assert_eq!(kind, Some(std::io::ErrorKind::PermissionDenied));
        let u = MpcError::Unstable {
            step: 7,
            what: "the fluid's kinetic energy is inf".into(),
            fix: "check body_force".into(),
        };
        assert_eq!(
            u.to_string(),
            "the run became unstable at step 7: the fluid's kinetic energy is inf; fix: check body_force"
        );
    }
}
