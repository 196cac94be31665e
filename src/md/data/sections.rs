//! The sections of a LAMMPS data file that define the system: `Masses`, `Atoms`, `Velocities`
//! and `Bonds`. Each row becomes a typed record; every rejection names the line and section.

use super::header::Header;
use super::{finite, AtomRow, AtomStyle, Ctx};
use crate::error::ConfigError;
use crate::md::system::Bond;

/// The rows of one section: (1-based line number, whitespace-separated words).
pub(super) type Rows<'t> = Vec<(usize, Vec<&'t str>)>;

/// Everything the sections give.
#[derive(Default)]
pub(super) struct Body {
    pub masses: Vec<Option<f64>>,
    pub atoms: Vec<AtomRow>,
    /// (atom id, velocity, line)
    pub velocities: Vec<(u32, [f64; 3], usize)>,
    pub bonds: Vec<Bond>,
}

/// Number parsing with errors that name the line and the section.
struct Fields<'a> {
    ctx: &'a Ctx<'a>,
    section: &'static str,
}

impl Fields<'_> {
    fn err(&self, line: usize, problem: String, fix: &str) -> ConfigError {
        self.ctx.err(line, self.section, problem, fix)
    }

    fn num(&self, line: usize, w: &str, what: &str) -> Result<f64, ConfigError> {
        finite(w).ok_or_else(|| {
            self.err(
                line,
                format!("{what} `{w}` is not a finite number"),
                "fix the number in this line",
            )
        })
    }

    fn int(&self, line: usize, w: &str, what: &str) -> Result<i64, ConfigError> {
        w.parse::<i64>().map_err(|_| {
            self.err(
                line,
                format!("{what} `{w}` is not an integer"),
                "fix the integer in this line",
            )
        })
    }

    /// A 1-based id or type, at most `max` when given.
    fn id(&self, line: usize, w: &str, what: &str, max: Option<usize>) -> Result<u32, ConfigError> {
        let v = self.int(line, w, what)?;
        if v < 1 || v > u32::MAX as i64 || max.is_some_and(|m| v as usize > m) {
            return Err(self.err(
                line,
                match max {
                    Some(m) => format!("{what} {v} is outside 1..={m}"),
                    None => format!("{what} {v} must be ≥ 1"),
                },
                "use 1-based ids and types within the header counts",
            ));
        }
        Ok(v as u32)
    }

    /// Exactly `n` columns, else the error with `expected` (e.g. "`id vx vy vz`").
    fn columns(
        &self,
        line: usize,
        w: &[&str],
        n: usize,
        expected: &str,
    ) -> Result<(), ConfigError> {
        if w.len() != n {
            return Err(self.err(
                line,
                format!("{} columns, expected {expected}", w.len()),
                &format!("write each line as {expected}"),
            ));
        }
        Ok(())
    }
}

/// One section as read: its name, the line of its name, the comment after the name (the atom
/// style of `Atoms # bond`) and its rows.
pub(super) struct Section<'t> {
    pub name: &'static str,
    pub header_line: usize,
    pub hint: Option<&'t str>,
    pub rows: Rows<'t>,
}

/// Add one section's rows to `body`; sections other than the four are skipped.
pub(super) fn parse_section(
    ctx: &Ctx<'_>,
    sec: &Section<'_>,
    style: Option<AtomStyle>,
    h: &Header,
    body: &mut Body,
) -> Result<(), ConfigError> {
    let f = Fields {
        ctx,
        section: sec.name,
    };
    let rows = &sec.rows;
    match sec.name {
        "Masses" => masses(&f, rows, h, &mut body.masses),
        "Atoms" => {
            let st = sec.hint.and_then(AtomStyle::parse).or(style).ok_or_else(|| {
                f.err(
                    sec.header_line,
                    "the atom style is unknown".into(),
                    "write `Atoms # atomic` / `# bond` / `# molecular` / `# full`, or set md.system.DataFile.atom_style",
                )
            })?;
            for (line, w) in rows {
                body.atoms.push(atom(&f, *line, w, st, h)?);
            }
            Ok(())
        }
        "Velocities" => {
            for (line, w) in rows {
                f.columns(*line, w, 4, "`id vx vy vz`")?;
                let tag = f.id(*line, w[0], "atom id", None)?;
                let mut v = [0.0; 3];
                for a in 0..3 {
                    v[a] = f.num(*line, w[1 + a], "velocity")?;
                }
                body.velocities.push((tag, v, *line));
            }
            Ok(())
        }
        "Bonds" => {
            for (line, w) in rows {
                f.columns(*line, w, 4, "`id type atom1 atom2`")?;
                f.id(*line, w[0], "bond id", None)?;
                let kind = f.id(*line, w[1], "bond type", Some(h.n_bond_types))?;
                let a = f.id(*line, w[2], "atom id", None)?;
                let b = f.id(*line, w[3], "atom id", None)?;
                body.bonds.push(Bond {
                    a,
                    b,
                    kind: kind - 1,
                });
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// `type mass` lines.
fn masses(
    f: &Fields<'_>,
    rows: &Rows<'_>,
    h: &Header,
    masses: &mut [Option<f64>],
) -> Result<(), ConfigError> {
    for (line, w) in rows {
        if w.len() < 2 {
            return Err(f.err(
                *line,
                format!("{} column(s), expected `type mass`", w.len()),
                "write each line as `type mass`",
            ));
        }
        let t = f.id(*line, w[0], "atom type", Some(h.n_types))?;
        let m = f.num(*line, w[1], "mass")?;
        if m <= 0.0 {
            return Err(f.err(
                *line,
                format!("mass {m} of type {t} is not positive"),
                "give masses > 0",
            ));
        }
        masses[t as usize - 1] = Some(m);
    }
    Ok(())
}

/// One `Atoms` line of style `st`: (id, type, molecule, position from the box origin, image).
fn atom(
    f: &Fields<'_>,
    line: usize,
    w: &[&str],
    st: AtomStyle,
    h: &Header,
) -> Result<AtomRow, ConfigError> {
    let (ncol, mol_col, type_col, x_col) = st.layout();
    if w.len() != ncol && w.len() != ncol + 3 {
        return Err(f.err(
            line,
            format!(
                "{} columns; atom style {:?} has {ncol} (or {} with image flags)",
                w.len(),
                st,
                ncol + 3
            ),
            "match the columns to the atom style (`Atoms # style` comment)",
        ));
    }
    let tag = f.id(line, w[0], "atom id", None)?;
    let mol = match mol_col {
        Some(c) => {
            let v = f.int(line, w[c], "molecule id")?;
            if v < 0 || v > u32::MAX as i64 {
                return Err(f.err(
                    line,
                    format!("molecule id {v} out of range"),
                    "use molecule ids ≥ 0",
                ));
            }
            v as u32
        }
        None => 0,
    };
    let t = f.id(line, w[type_col], "atom type", Some(h.n_types))?;
    let mut p = [0.0; 3];
    for a in 0..3 {
        p[a] = f.num(line, w[x_col + a], "coordinate")? - h.box_lo[a];
    }
    let mut img = [0i32; 3];
    if w.len() == ncol + 3 {
        for a in 0..3 {
            img[a] = f.int(line, w[ncol + a], "image flag")? as i32;
        }
    }
    Ok((tag, t - 1, mol, p, img))
}
