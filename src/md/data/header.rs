//! The header of a LAMMPS data file: counts and the box, up to the first section name.

use super::{finite, section_of, Ctx};
use crate::error::ConfigError;

/// What the header declares.
pub(super) struct Header {
    pub n_atoms: usize,
    pub n_bonds: usize,
    pub n_types: usize,
    pub n_bond_types: usize,
    /// xlo, ylo, zlo: subtracted from coordinates (the box starts at 0).
    pub box_lo: [f64; 3],
    pub box_len: [f64; 3],
}

/// The header lines as read, before the required ones are checked.
#[derive(Default)]
struct Partial {
    n_atoms: Option<usize>,
    n_bonds: usize,
    n_types: Option<usize>,
    n_bond_types: usize,
    lo: [Option<f64>; 3],
    hi: [f64; 3],
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

/// Parse the header from line index 1 (line 0 is a title); returns it and the index of the
/// first section line.
pub(super) fn parse_header(ctx: &Ctx<'_>, lines: &[&str]) -> Result<(Header, usize), ConfigError> {
    let mut h = Partial::default();
    let mut k = 1; // the first line is a title
    while k < lines.len() {
        let raw = lines[k];
        if section_of(raw).is_some() {
            break;
        }
        let body = raw.split('#').next().unwrap_or("").trim();
        k += 1;
        if !body.is_empty() {
            // k is now the 1-based number of this line
            header_line(ctx, k, body, &mut h)?;
        }
    }
    Ok((finish(ctx, k, h)?, k))
}

/// One non-empty header line (1-based `line`).
fn header_line(ctx: &Ctx<'_>, line: usize, body: &str, h: &mut Partial) -> Result<(), ConfigError> {
    let words: Vec<&str> = body.split_whitespace().collect();
    let count = |w: &str| -> Result<usize, ConfigError> {
        w.parse::<usize>().map_err(|_| {
            ctx.err(
                line,
                "header",
                format!("`{w}` is not a count"),
                "write header lines as `<count> atoms`, `<count> atom types`, ...",
            )
        })
    };
    match words.as_slice() {
        [c, "atoms"] => h.n_atoms = Some(count(c)?),
        [c, "bonds"] => h.n_bonds = count(c)?,
        [c, "atom", "types"] => h.n_types = Some(count(c)?),
        [c, "bond", "types"] => h.n_bond_types = count(c)?,
        [a, b, axis_lo, _] if axis_lo.ends_with("lo") && axis_lo.len() == 3 => {
            box_line(ctx, line, body, [*a, *b, *axis_lo], h)?
        }
        [_, _, _, "xy", "xz", "yz"] => {
            return Err(ctx.err(
                line,
                "header",
                "triclinic boxes are not supported".into(),
                "use an orthorhombic box",
            ))
        }
        // other counts LAMMPS writes (angles, dihedrals, extra/... per atom): not used
        [c, rest @ ..] if c.parse::<usize>().is_ok() && known_count(rest) => {}
        _ => {
            return Err(ctx.err(
                line,
                "header",
                format!("`{body}` is neither a header line nor a section name"),
                "use `<count> atoms`, `<count> atom types`, `<lo> <hi> xlo xhi`, ... and section names such as `Masses`, `Atoms # bond`, `Bonds`",
            ))
        }
    }
    Ok(())
}

/// `<lo> <hi> xlo xhi` (or y, z).
fn box_line(
    ctx: &Ctx<'_>,
    line: usize,
    body: &str,
    [a, b, axis_lo]: [&str; 3],
    h: &mut Partial,
) -> Result<(), ConfigError> {
    let axis = match &axis_lo[..1] {
        "x" => 0,
        "y" => 1,
        "z" => 2,
        _ => {
            return Err(ctx.err(
                line,
                "header",
                format!("unknown box line `{body}`"),
                "use `xlo xhi`, `ylo yhi`, `zlo zhi`",
            ))
        }
    };
    let parse = |s: &str| {
        finite(s).ok_or_else(|| {
            ctx.err(
                line,
                "header",
                format!("`{s}` is not a finite number"),
                "give the box bounds as finite numbers",
            )
        })
    };
    h.lo[axis] = Some(parse(a)?);
    h.hi[axis] = parse(b)?;
    Ok(())
}

/// The required counts and box bounds; errors name `line`, where the header ended.
fn finish(ctx: &Ctx<'_>, line: usize, h: Partial) -> Result<Header, ConfigError> {
    let n_atoms = h.n_atoms.ok_or_else(|| {
        ctx.err(
            line,
            "header",
            "no `<count> atoms` line".into(),
            "add the atom count to the header, e.g. `200 atoms`",
        )
    })?;
    let n_types = h.n_types.ok_or_else(|| {
        ctx.err(
            line,
            "header",
            "no `<count> atom types` line".into(),
            "add the type count to the header, e.g. `1 atom types`",
        )
    })?;
    if n_types == 0 || n_types > 1 << 16 {
        return Err(ctx.err(
            line,
            "header",
            format!("{n_types} atom types"),
            "give between 1 and 65536 atom types",
        ));
    }
    let mut box_lo = [0.0; 3];
    let mut box_len = [0.0; 3];
    for a in 0..3 {
        let l = h.lo[a].ok_or_else(|| {
            ctx.err(
                line,
                "header",
                format!("no `{0}lo {0}hi` line", ["x", "y", "z"][a]),
                "give the box bounds in the header",
            )
        })?;
        if h.hi[a] <= l {
            return Err(ctx.err(
                line,
                "header",
                format!("{}hi ≤ {}lo", ["x", "y", "z"][a], ["x", "y", "z"][a]),
                "give hi > lo",
            ));
        }
        box_lo[a] = l;
        box_len[a] = h.hi[a] - l;
    }
    Ok(Header {
        n_atoms,
        n_bonds: h.n_bonds,
        n_types,
        n_bond_types: h.n_bond_types,
        box_lo,
        box_len,
    })
}
