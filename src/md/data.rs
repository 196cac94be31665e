//! A reader for LAMMPS data files: header counts and box, `Masses`, `Atoms` (styles atomic,
//! bond, molecular, full), `Velocities` and `Bonds`. Other sections (coefficients, angles, ...)
//! are skipped; coefficients come from the RON config. Every rejection names the file, line,
//! section and the fix.

use std::path::Path;

use super::system::{Bond, System};
use crate::error::ConfigError;

/// Columns of the `Atoms` section.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum AtomStyle {
    /// id type x y z
    Atomic,
    /// id mol type x y z
    Bond,
    /// id mol type x y z
    Molecular,
    /// id mol type q x y z
    Full,
}

impl AtomStyle {
    fn parse(s: &str) -> Option<AtomStyle> {
        match s.trim().to_ascii_lowercase().as_str() {
            "atomic" => Some(AtomStyle::Atomic),
            "bond" => Some(AtomStyle::Bond),
            "molecular" => Some(AtomStyle::Molecular),
            "full" => Some(AtomStyle::Full),
            _ => None,
        }
    }

    /// (number of columns before the image flags, index of mol, type, x)
    fn layout(self) -> (usize, Option<usize>, usize, usize) {
        match self {
            AtomStyle::Atomic => (5, None, 1, 2),
            AtomStyle::Bond | AtomStyle::Molecular => (6, Some(1), 2, 3),
            AtomStyle::Full => (7, Some(1), 2, 4),
        }
    }
}

const SECTIONS: &[&str] = &[
    "Masses",
    "Atoms",
    "Velocities",
    "Bonds",
    "Angles",
    "Dihedrals",
    "Impropers",
    "Pair Coeffs",
    "PairIJ Coeffs",
    "Bond Coeffs",
    "Angle Coeffs",
    "Dihedral Coeffs",
    "Improper Coeffs",
    "BondBond Coeffs",
    "BondAngle Coeffs",
    "Ellipsoids",
    "Lines",
    "Triangles",
    "Bodies",
];

/// (id, type, molecule, position, image flags) of one `Atoms` line.
type AtomRow = (u32, u32, u32, [f64; 3], [i32; 3]);

struct Ctx<'a> {
    name: &'a str,
}

impl Ctx<'_> {
    fn err(&self, line: usize, section: &str, problem: String, fix: &str) -> ConfigError {
        ConfigError {
            field: if section.is_empty() {
                format!("data file {} line {line}", self.name)
            } else {
                format!("data file {} line {line} ({section})", self.name)
            },
            problem,
            fix: fix.into(),
        }
    }
}

/// Read a LAMMPS data file. `style` is used when the `Atoms` line carries no `# style` hint.
pub fn read_data_file(path: &Path, style: Option<AtomStyle>) -> Result<System, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        field: "md.system.DataFile.path".into(),
        problem: format!("cannot read {}: {e}", path.display()),
        fix: "give the path of an existing LAMMPS data file (relative to the working directory)"
            .into(),
    })?;
    parse_data(&text, &path.display().to_string(), style)
}

/// Header count lines other than atoms / bonds / atom types / bond types.
fn known_count(words: &[&str]) -> bool {
    matches!(
        words,
        ["angles"]
            | ["dihedrals"]
            | ["impropers"]
            | ["angle", "types"]
            | ["dihedral", "types"]
            | ["improper", "types"]
            | ["ellipsoids"]
            | ["lines"]
            | ["triangles"]
            | ["bodies"]
            | ["extra", _, "per", "atom"]
    )
}

fn section_of(line: &str) -> Option<(&'static str, Option<&str>)> {
    let (body, comment) = match line.find('#') {
        Some(k) => (&line[..k], Some(line[k + 1..].trim())),
        None => (line, None),
    };
    let body = body.trim();
    SECTIONS.iter().find(|s| **s == body).map(|s| (*s, comment))
}

/// Parse data-file text; `name` appears in error messages.
pub fn parse_data(text: &str, name: &str, style: Option<AtomStyle>) -> Result<System, ConfigError> {
    let ctx = Ctx { name };
    let lines: Vec<&str> = text.lines().collect();
    let mut n_atoms: Option<usize> = None;
    let mut n_bonds = 0usize;
    let mut n_types: Option<usize> = None;
    let mut n_bond_types = 0usize;
    let mut lo = [None::<f64>; 3];
    let mut hi = [0.0f64; 3];
    let mut k = 1; // the first line is a title
                   // header
    while k < lines.len() {
        let raw = lines[k];
        if section_of(raw).is_some() {
            break;
        }
        let body = raw.split('#').next().unwrap_or("").trim();
        k += 1;
        if body.is_empty() {
            continue;
        }
        let words: Vec<&str> = body.split_whitespace().collect();
        let count = |w: &str| -> Result<usize, ConfigError> {
            w.parse::<usize>().map_err(|_| {
                ctx.err(
                    k,
                    "header",
                    format!("`{w}` is not a count"),
                    "write header lines as `<count> atoms`, `<count> atom types`, ...",
                )
            })
        };
        match words.as_slice() {
            [c, "atoms"] => n_atoms = Some(count(c)?),
            [c, "bonds"] => n_bonds = count(c)?,
            [c, "atom", "types"] => n_types = Some(count(c)?),
            [c, "bond", "types"] => n_bond_types = count(c)?,
            [a, b, axis_lo, _] if axis_lo.ends_with("lo") && axis_lo.len() == 3 => {
                let axis = match &axis_lo[..1] {
                    "x" => 0,
                    "y" => 1,
                    "z" => 2,
                    _ => {
                        return Err(ctx.err(
                            k,
                            "header",
                            format!("unknown box line `{body}`"),
                            "use `xlo xhi`, `ylo yhi`, `zlo zhi`",
                        ))
                    }
                };
                let parse = |s: &str| {
                    s.parse::<f64>()
                        .ok()
                        .filter(|v| v.is_finite())
                        .ok_or_else(|| {
                            ctx.err(
                                k,
                                "header",
                                format!("`{s}` is not a finite number"),
                                "give the box bounds as finite numbers",
                            )
                        })
                };
                lo[axis] = Some(parse(a)?);
                hi[axis] = parse(b)?;
            }
            [_, _, _, "xy", "xz", "yz"] => {
                return Err(ctx.err(
                    k,
                    "header",
                    "triclinic boxes are not supported".into(),
                    "use an orthorhombic box",
                ))
            }
            // other counts LAMMPS writes (angles, dihedrals, extra/... per atom): not used
            [c, rest @ ..] if c.parse::<usize>().is_ok() && known_count(rest) => {}
            _ => {
                return Err(ctx.err(
                    k,
                    "header",
                    format!("`{body}` is neither a header line nor a section name"),
                    "use `<count> atoms`, `<count> atom types`, `<lo> <hi> xlo xhi`, ... and section names such as `Masses`, `Atoms # bond`, `Bonds`",
                ))
            }
        }
    }
    let n_atoms = n_atoms.ok_or_else(|| {
        ctx.err(
            k,
            "header",
            "no `<count> atoms` line".into(),
            "add the atom count to the header, e.g. `200 atoms`",
        )
    })?;
    let n_types = n_types.ok_or_else(|| {
        ctx.err(
            k,
            "header",
            "no `<count> atom types` line".into(),
            "add the type count to the header, e.g. `1 atom types`",
        )
    })?;
    if n_types == 0 || n_types > 1 << 16 {
        return Err(ctx.err(
            k,
            "header",
            format!("{n_types} atom types"),
            "give between 1 and 65536 atom types",
        ));
    }
    let mut box_lo = [0.0; 3];
    let mut box_len = [0.0; 3];
    for a in 0..3 {
        let l = lo[a].ok_or_else(|| {
            ctx.err(
                k,
                "header",
                format!("no `{0}lo {0}hi` line", ["x", "y", "z"][a]),
                "give the box bounds in the header",
            )
        })?;
        if hi[a] <= l {
            return Err(ctx.err(
                k,
                "header",
                format!("{}hi ≤ {}lo", ["x", "y", "z"][a], ["x", "y", "z"][a]),
                "give hi > lo",
            ));
        }
        box_lo[a] = l;
        box_len[a] = hi[a] - l;
    }
    let mut masses: Vec<Option<f64>> = vec![None; n_types];
    let mut atoms: Vec<AtomRow> = Vec::with_capacity(n_atoms.min(1 << 20));
    let mut velocities: Vec<(u32, [f64; 3], usize)> = Vec::new();
    let mut bonds: Vec<Bond> = Vec::with_capacity(n_bonds.min(1 << 20));
    // sections
    while k < lines.len() {
        let Some((section, hint)) = section_of(lines[k]) else {
            let body = lines[k].split('#').next().unwrap_or("").trim();
            if !body.is_empty() {
                return Err(ctx.err(
                    k + 1,
                    "",
                    format!("`{body}` is not a section header"),
                    "start sections with a line `Masses`, `Atoms # bond`, `Velocities` or `Bonds`",
                ));
            }
            k += 1;
            continue;
        };
        let header_line = k + 1;
        k += 1;
        // rows until the next section header
        let mut rows: Vec<(usize, Vec<&str>)> = Vec::new();
        while k < lines.len() && section_of(lines[k]).is_none() {
            let body = lines[k].split('#').next().unwrap_or("").trim();
            if !body.is_empty() {
                rows.push((k + 1, body.split_whitespace().collect()));
            }
            k += 1;
        }
        let num = |line: usize, w: &str, what: &str| -> Result<f64, ConfigError> {
            w.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| {
                    ctx.err(
                        line,
                        section,
                        format!("{what} `{w}` is not a finite number"),
                        "fix the number in this line",
                    )
                })
        };
        let int = |line: usize, w: &str, what: &str| -> Result<i64, ConfigError> {
            w.parse::<i64>().map_err(|_| {
                ctx.err(
                    line,
                    section,
                    format!("{what} `{w}` is not an integer"),
                    "fix the integer in this line",
                )
            })
        };
        let id = |line: usize, w: &str, what: &str, max: Option<usize>| {
            let v = int(line, w, what)?;
            if v < 1 || v > u32::MAX as i64 || max.is_some_and(|m| v as usize > m) {
                return Err(ctx.err(
                    line,
                    section,
                    match max {
                        Some(m) => format!("{what} {v} is outside 1..={m}"),
                        None => format!("{what} {v} must be ≥ 1"),
                    },
                    "use 1-based ids and types within the header counts",
                ));
            }
            Ok(v as u32)
        };
        match section {
            "Masses" => {
                for (line, w) in &rows {
                    if w.len() < 2 {
                        return Err(ctx.err(
                            *line,
                            section,
                            format!("{} column(s), expected `type mass`", w.len()),
                            "write each line as `type mass`",
                        ));
                    }
                    let t = id(*line, w[0], "atom type", Some(n_types))?;
                    let m = num(*line, w[1], "mass")?;
                    if m <= 0.0 {
                        return Err(ctx.err(
                            *line,
                            section,
                            format!("mass {m} of type {t} is not positive"),
                            "give masses > 0",
                        ));
                    }
                    masses[t as usize - 1] = Some(m);
                }
            }
            "Atoms" => {
                let st = hint
                    .and_then(AtomStyle::parse)
                    .or(style)
                    .ok_or_else(|| {
                        ctx.err(
                            header_line,
                            section,
                            "the atom style is unknown".into(),
                            "write `Atoms # atomic` / `# bond` / `# molecular` / `# full`, or set md.system.DataFile.atom_style",
                        )
                    })?;
                let (ncol, mol_col, type_col, x_col) = st.layout();
                for (line, w) in &rows {
                    if w.len() != ncol && w.len() != ncol + 3 {
                        return Err(ctx.err(
                            *line,
                            section,
                            format!(
                                "{} columns; atom style {:?} has {ncol} (or {} with image flags)",
                                w.len(),
                                st,
                                ncol + 3
                            ),
                            "match the columns to the atom style (`Atoms # style` comment)",
                        ));
                    }
                    let tag = id(*line, w[0], "atom id", None)?;
                    let mol = match mol_col {
                        Some(c) => {
                            let v = int(*line, w[c], "molecule id")?;
                            if v < 0 || v > u32::MAX as i64 {
                                return Err(ctx.err(
                                    *line,
                                    section,
                                    format!("molecule id {v} out of range"),
                                    "use molecule ids ≥ 0",
                                ));
                            }
                            v as u32
                        }
                        None => 0,
                    };
                    let t = id(*line, w[type_col], "atom type", Some(n_types))?;
                    let mut p = [0.0; 3];
                    for a in 0..3 {
                        p[a] = num(*line, w[x_col + a], "coordinate")? - box_lo[a];
                    }
                    let mut img = [0i32; 3];
                    if w.len() == ncol + 3 {
                        for a in 0..3 {
                            img[a] = int(*line, w[ncol + a], "image flag")? as i32;
                        }
                    }
                    atoms.push((tag, t - 1, mol, p, img));
                }
            }
            "Velocities" => {
                for (line, w) in &rows {
                    if w.len() != 4 {
                        return Err(ctx.err(
                            *line,
                            section,
                            format!("{} columns, expected `id vx vy vz`", w.len()),
                            "write each line as `id vx vy vz`",
                        ));
                    }
                    let tag = id(*line, w[0], "atom id", None)?;
                    let mut v = [0.0; 3];
                    for a in 0..3 {
                        v[a] = num(*line, w[1 + a], "velocity")?;
                    }
                    velocities.push((tag, v, *line));
                }
            }
            "Bonds" => {
                for (line, w) in &rows {
                    if w.len() != 4 {
                        return Err(ctx.err(
                            *line,
                            section,
                            format!("{} columns, expected `id type atom1 atom2`", w.len()),
                            "write each line as `id type atom1 atom2`",
                        ));
                    }
                    id(*line, w[0], "bond id", None)?;
                    let kind = id(*line, w[1], "bond type", Some(n_bond_types))?;
                    let a = id(*line, w[2], "atom id", None)?;
                    let b = id(*line, w[3], "atom id", None)?;
                    bonds.push(Bond {
                        a,
                        b,
                        kind: kind - 1,
                    });
                }
            }
            _ => {}
        }
    }
    if atoms.len() != n_atoms {
        return Err(ctx.err(
            lines.len(),
            "Atoms",
            format!(
                "the header says {n_atoms} atoms, the Atoms section has {}",
                atoms.len()
            ),
            "make the `atoms` count match the Atoms lines",
        ));
    }
    if bonds.len() != n_bonds {
        return Err(ctx.err(
            lines.len(),
            "Bonds",
            format!(
                "the header says {n_bonds} bonds, the Bonds section has {}",
                bonds.len()
            ),
            "make the `bonds` count match the Bonds lines",
        ));
    }
    let mut type_mass = Vec::with_capacity(n_types);
    for (t, m) in masses.iter().enumerate() {
        match m {
            Some(m) => type_mass.push(*m),
            None => {
                return Err(ConfigError {
                    field: format!("data file {name} (Masses)"),
                    problem: format!("atom type {} has no mass", t + 1),
                    fix: "add a Masses section with one `type mass` line per atom type".into(),
                })
            }
        }
    }
    let mut sys = System {
        box_len,
        type_mass,
        bonds,
        ..Default::default()
    };
    for (tag, t, mol, p, img) in atoms {
        sys.push(p, [0.0; 3], t, tag, mol);
        let last = sys.len() - 1;
        for (s, i) in sys.image[last].iter_mut().zip(img) {
            *s += i;
        }
    }
    if !velocities.is_empty() {
        let index: std::collections::HashMap<u32, usize> =
            sys.tag.iter().enumerate().map(|(i, &t)| (t, i)).collect();
        for (tag, v, line) in velocities {
            let i = *index.get(&tag).ok_or_else(|| {
                ctx.err(
                    line,
                    "Velocities",
                    format!("atom id {tag} is not in the Atoms section"),
                    "give velocities only for existing atoms",
                )
            })?;
            sys.vel[i] = v;
        }
    }
    sys.validate().map_err(|mut e| {
        e.field = format!("data file {name} ({})", e.field);
        e
    })?;
    Ok(sys)
}
