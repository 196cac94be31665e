//! A reader for LAMMPS data files: header counts and box (`header`), `Masses`, `Atoms`
//! (styles atomic, bond, molecular, full), `Velocities` and `Bonds` (`sections`). Other
//! sections (coefficients, angles, ...) are skipped; coefficients come from the RON config.
//! Every rejection names the file, line, section and the fix.

mod header;
mod sections;

use std::path::Path;

use super::system::System;
use crate::error::ConfigError;
use header::{parse_header, Header};
use sections::{parse_section, Body, Rows, Section};

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

/// Where an error happened: the file name.
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

/// A finite number, or None.
fn finite(w: &str) -> Option<f64> {
    w.parse::<f64>().ok().filter(|v| v.is_finite())
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
    let (h, mut k) = parse_header(&ctx, &lines)?;
    let mut body = Body {
        masses: vec![None; h.n_types],
        atoms: Vec::with_capacity(h.n_atoms.min(1 << 20)),
        velocities: Vec::new(),
        bonds: Vec::with_capacity(h.n_bonds.min(1 << 20)),
    };
    while k < lines.len() {
        let Some(sec) = next_section(&ctx, &lines, &mut k)? else {
            continue;
        };
        parse_section(&ctx, &sec, style, &h, &mut body)?;
    }
    check_counts(&ctx, lines.len(), &h, &body)?;
    assemble(&ctx, h, body)
}

/// The section starting at line index `*k`, with its rows up to the next section name;
/// None (and `*k` advanced by one) for a blank or comment line between sections.
fn next_section<'t>(
    ctx: &Ctx<'_>,
    lines: &[&'t str],
    k: &mut usize,
) -> Result<Option<Section<'t>>, ConfigError> {
    let Some((name, hint)) = section_of(lines[*k]) else {
        let body = lines[*k].split('#').next().unwrap_or("").trim();
        if !body.is_empty() {
            return Err(ctx.err(
                *k + 1,
                "",
                format!("`{body}` is not a section header"),
                "start sections with a line `Masses`, `Atoms # bond`, `Velocities` or `Bonds`",
            ));
        }
        *k += 1;
        return Ok(None);
    };
    let header_line = *k + 1;
    *k += 1;
    let mut rows: Rows<'t> = Vec::new();
    while *k < lines.len() && section_of(lines[*k]).is_none() {
        let body = lines[*k].split('#').next().unwrap_or("").trim();
        if !body.is_empty() {
            rows.push((*k + 1, body.split_whitespace().collect()));
        }
        *k += 1;
    }
    Ok(Some(Section {
        name,
        header_line,
        hint,
        rows,
    }))
}

/// The Atoms and Bonds sections have as many lines as the header says.
fn check_counts(ctx: &Ctx<'_>, n_lines: usize, h: &Header, body: &Body) -> Result<(), ConfigError> {
    if body.atoms.len() != h.n_atoms {
        return Err(ctx.err(
            n_lines,
            "Atoms",
            format!(
                "the header says {} atoms, the Atoms section has {}",
                h.n_atoms,
                body.atoms.len()
            ),
            "make the `atoms` count match the Atoms lines",
        ));
    }
    if body.bonds.len() != h.n_bonds {
        return Err(ctx.err(
            n_lines,
            "Bonds",
            format!(
                "the header says {} bonds, the Bonds section has {}",
                h.n_bonds,
                body.bonds.len()
            ),
            "make the `bonds` count match the Bonds lines",
        ));
    }
    Ok(())
}

/// The system from the parsed header and sections, validated.
fn assemble(ctx: &Ctx<'_>, h: Header, body: Body) -> Result<System, ConfigError> {
    let name = ctx.name;
    let mut type_mass = Vec::with_capacity(h.n_types);
    for (t, m) in body.masses.iter().enumerate() {
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
        box_len: h.box_len,
        type_mass,
        bonds: body.bonds,
        ..Default::default()
    };
    for (tag, t, mol, p, img) in body.atoms {
        sys.push(p, [0.0; 3], t, tag, mol);
        let last = sys.len() - 1;
        for (s, i) in sys.image[last].iter_mut().zip(img) {
            *s += i;
        }
    }
    set_velocities(ctx, &mut sys, body.velocities)?;
    sys.validate().map_err(|mut e| {
        e.field = format!("data file {name} ({})", e.field);
        e
    })?;
    Ok(sys)
}

/// The Velocities rows, by atom id.
fn set_velocities(
    ctx: &Ctx<'_>,
    sys: &mut System,
    velocities: Vec<(u32, [f64; 3], usize)>,
) -> Result<(), ConfigError> {
    if velocities.is_empty() {
        return Ok(());
    }
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
    Ok(())
}
