//! Reading a wall geometry from a `.npy` file ([`load`]): a signed distance, or a voxel mask
//! turned into one by an exact periodic Euclidean distance transform. Every check runs before
//! the data is allocated where it can (spacing, shape, element type from the header), and every
//! refusal names the file and the problem. [`LoadedField`] keeps the result with the config, so
//! that a run reads its file once.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::field::DistanceField;
use crate::error::ConfigError;
use crate::npy::NpyHeader;

/// What the file holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum FieldKind {
    /// A signed distance in cells, positive in the fluid (float32 or float64).
    #[default]
    Distance,
    /// A voxel mask: 0 fluid, 1 solid (uint8, bool, int8 or float).
    Mask,
}

impl FieldKind {
    /// Whether this is the default (left out of a config written back as RON).
    pub fn is_distance(&self) -> bool {
        *self == FieldKind::Distance
    }
}

/// The finest and the coarsest grid spacing read (cells).
pub const SPACING_RANGE: (f64, f64) = (1.0 / 16.0, 1.0);

fn refuse(file: &Path, problem: String, fix: &str) -> ConfigError {
    ConfigError {
        field: "walls.file".into(),
        problem: format!("{}: {problem}", file.display()),
        fix: fix.into(),
    }
}

/// Nodes per axis of a grid of `spacing` spanning a box of `cells`.
pub fn grid_nodes(cells: [u32; 3], spacing: f64) -> Result<[usize; 3], ConfigError> {
    let (fine, coarse) = SPACING_RANGE;
    if !(spacing.is_finite() && (fine..=coarse).contains(&spacing)) {
        return Err(ConfigError {
            field: "walls.spacing".into(),
            problem: format!("a grid spacing of {spacing} cells is not read"),
            fix: format!("give a spacing between {fine} and {coarse} cells, e.g. 0.5"),
        });
    }
    let mut nodes = [0; 3];
    for k in 0..3 {
        let n = cells[k] as f64 / spacing;
        if (n - n.round()).abs() > 1e-9 * n {
            return Err(ConfigError {
                field: "walls.spacing".into(),
                problem: format!(
                    "cells.{k} = {} is not a whole number of grid spacings of {spacing}",
                    cells[k]
                ),
                fix: "choose a spacing that divides every box edge (1, 0.5, 0.25, ...)".into(),
            });
        }
        nodes[k] = n.round() as usize;
    }
    Ok(nodes)
}

/// The field of `file` for a box of `cells` at `spacing` (see the module docs).
pub fn load(
    file: &Path,
    spacing: f64,
    kind: FieldKind,
    cells: [u32; 3],
) -> Result<DistanceField, ConfigError> {
    let nodes = grid_nodes(cells, spacing)?;
    let f = std::fs::File::open(file).map_err(|e| {
        refuse(
            file,
            format!("cannot read it: {e}"),
            "give the path of an existing .npy file (relative to the working directory)",
        )
    })?;
    let mut r = std::io::BufReader::new(f);
    let header = NpyHeader::read(&mut r).map_err(|p| {
        refuse(
            file,
            p,
            "save the array with numpy.save (C order, little-endian)",
        )
    })?;
    if header.shape != nodes {
        return Err(refuse(
            file,
            format!(
                "has shape {:?}, but a box of cells {cells:?} at spacing {spacing} needs \
                 {nodes:?} (nodes · spacing = box edge)",
                header.shape
            ),
            "sample the geometry on the box's grid, or change cells or walls.spacing",
        ));
    }
    if kind == FieldKind::Distance && !header.dtype.is_float() {
        return Err(refuse(
            file,
            format!(
                "holds {} values, but a signed distance is float32 or float64",
                header.dtype.name()
            ),
            "save the distance as floats, or set kind: Mask for a 0/1 voxel mask",
        ));
    }
    let values = header
        .read_values(&mut r)
        .map_err(|p| refuse(file, p, "save the array again with numpy.save"))?;
    if let Some(at) = values.iter().position(|v| !v.is_finite()) {
        return Err(refuse(
            file,
            format!(
                "holds a NaN or infinite value (at node {:?})",
                node_of(at, nodes)
            ),
            "give finite values at every node",
        ));
    }
    let distance = match kind {
        FieldKind::Distance => values.iter().map(|&v| v as f32).collect::<Vec<f32>>(),
        FieldKind::Mask => {
            if let Some(at) = values.iter().position(|&v| v != 0.0 && v != 1.0) {
                return Err(refuse(
                    file,
                    format!(
                        "holds {} at node {:?}: a mask holds 0 (fluid) or 1 (solid)",
                        values[at],
                        node_of(at, nodes)
                    ),
                    "give 0 for fluid and 1 for solid voxels, or leave kind unset for a \
                     signed distance",
                ));
            }
            let solid: Vec<bool> = values.iter().map(|&v| v == 1.0).collect();
            mask_distance(&solid, nodes, spacing)
        }
    };
    if !distance.iter().any(|&d| d > 0.0) {
        return Err(refuse(
            file,
            "has no fluid at all (no node with a positive distance, or a mask of ones)".into(),
            "the fluid is where the distance is positive (a mask's zeros)",
        ));
    }
    if !distance.iter().any(|&d| d < 0.0) {
        return Err(refuse(
            file,
            "is fluid everywhere (no node with a negative distance, or a mask of zeros)".into(),
            "use no walls (leave the walls section out) for a periodic box without walls",
        ));
    }
    Ok(DistanceField::new(nodes, spacing, distance))
}

fn node_of(index: usize, [_, ny, nz]: [usize; 3]) -> [usize; 3] {
    [index / (ny * nz), index / nz % ny, index % nz]
}

/// Stand-in for "no such voxel" in squared distances (finite, so that differences stay finite).
const FAR: f64 = 1e30;

/// The squared distance (in voxels) of every point of a periodic line to the nearest zero of
/// `f` (squared distances so far, FAR where none), by the lower envelope of parabolas
/// (Felzenszwalb & Huttenlocher) over three copies of the line.
fn envelope_1d(f: &[f64], out: &mut [f64]) {
    let n = f.len();
    let m = 3 * n;
    let g = |q: usize| f[q % n];
    let mut v = vec![0usize; m];
    let mut z = vec![0.0f64; m + 1];
    let mut k = 0;
    z[0] = f64::NEG_INFINITY;
    z[1] = f64::INFINITY;
    let cross = |p: usize, q: usize| {
        let (pf, qf) = (p as f64, q as f64);
        ((g(q) + qf * qf) - (g(p) + pf * pf)) / (2.0 * qf - 2.0 * pf)
    };
    for q in 1..m {
        let mut s = cross(v[k], q);
        while s <= z[k] {
            k -= 1;
            s = cross(v[k], q);
        }
        k += 1;
        v[k] = q;
        z[k] = s;
        z[k + 1] = f64::INFINITY;
    }
    k = 0;
    for q in 0..m {
        while z[k + 1] < q as f64 {
            k += 1;
        }
        if (n..2 * n).contains(&q) {
            let d = q as f64 - v[k] as f64;
            out[q - n] = (d * d + g(v[k])).min(FAR);
        }
    }
}

/// Squared distance (voxels) from every voxel to the nearest voxel where `target` holds,
/// periodic: the 1-D transform along z, then y, then x.
fn squared_distance_to(target: &[bool], [nx, ny, nz]: [usize; 3]) -> Vec<f64> {
    let mut d: Vec<f64> = target.iter().map(|&t| if t { 0.0 } else { FAR }).collect();
    let idx = |i: usize, j: usize, k: usize| (i * ny + j) * nz + k;
    let mut line = Vec::new();
    let mut out = Vec::new();
    for axis in [2, 1, 0] {
        let n = [nx, ny, nz][axis];
        line.resize(n, 0.0);
        out.resize(n, 0.0);
        let (a_len, b_len) = match axis {
            2 => (nx, ny),
            1 => (nx, nz),
            _ => (ny, nz),
        };
        for a in 0..a_len {
            for b in 0..b_len {
                let at = |c: usize| match axis {
                    2 => idx(a, b, c),
                    1 => idx(a, c, b),
                    _ => idx(c, a, b),
                };
                for c in 0..n {
                    line[c] = d[at(c)];
                }
                envelope_1d(&line, &mut out);
                for c in 0..n {
                    d[at(c)] = out[c];
                }
            }
        }
    }
    d
}

/// The signed distance of a voxel mask (`solid`): from each fluid voxel's centre to the
/// nearest solid voxel's centre less half a voxel, negated for solid voxels with the fluid's,
/// so that the zero level lies on the faces between fluid and solid voxels.
pub fn mask_distance(solid: &[bool], nodes: [usize; 3], spacing: f64) -> Vec<f32> {
    let fluid: Vec<bool> = solid.iter().map(|&s| !s).collect();
    let to_solid = squared_distance_to(solid, nodes);
    let to_fluid = squared_distance_to(&fluid, nodes);
    solid
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            let d = if s {
                -(to_fluid[i].sqrt() - 0.5)
            } else {
                to_solid[i].sqrt() - 0.5
            };
            (d * spacing) as f32
        })
        .collect()
}

/// The field read for a config, kept with it (clones share it) so that validation and every
/// later use read the file once. Not part of the config's value: always equal.
#[derive(Clone, Default)]
pub struct LoadedField(Arc<Mutex<Option<(FieldKey, DistanceField)>>>);

type FieldKey = (PathBuf, u64, FieldKind, [u32; 3]);

impl LoadedField {
    /// The field of `file` as [`load`] reads it, read at the first call for these arguments.
    pub fn get(
        &self,
        file: &Path,
        spacing: f64,
        kind: FieldKind,
        cells: [u32; 3],
    ) -> Result<DistanceField, ConfigError> {
        let key = (file.to_path_buf(), spacing.to_bits(), kind, cells);
        let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((k, field)) = slot.as_ref() {
            if *k == key {
                return Ok(field.clone());
            }
        }
        let field = load(file, spacing, kind, cells)?;
        *slot = Some((key, field.clone()));
        Ok(field)
    }
}

impl PartialEq for LoadedField {
    fn eq(&self, _other: &LoadedField) -> bool {
        true
    }
}

impl std::fmt::Debug for LoadedField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LoadedField")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The transform against brute force on a small periodic grid.
    #[test]
    fn the_distance_transform_is_exact_and_periodic() {
        let nodes = [5, 7, 6];
        let n = nodes.iter().product::<usize>();
        let solid: Vec<bool> = (0..n).map(|i| (i * 37 + 11) % 13 == 0).collect();
        let got = squared_distance_to(&solid, nodes);
        for (i, &got_i) in got.iter().enumerate().take(n) {
            let a = node_of(i, nodes);
            let mut best = FAR;
            for j in (0..n).filter(|&j| solid[j]) {
                let b = node_of(j, nodes);
                let mut d2 = 0.0;
                for k in 0..3 {
                    let d = (a[k] as i64 - b[k] as i64).unsigned_abs() as usize;
                    let d = d.min(nodes[k] - d) as f64;
                    d2 += d * d;
                }
                best = best.min(d2);
            }
            assert_eq!(got_i, best, "voxel {a:?}");
        }
    }

    #[test]
    fn a_mask_puts_the_surface_on_the_voxel_faces() {
        // solid slab j in 0..2 of an 2×8×2 grid at spacing ½: the faces at y = 0 and y = 1
        let nodes = [2, 8, 2];
        let solid: Vec<bool> = (0..32).map(|i| node_of(i, nodes)[1] < 2).collect();
        let d = mask_distance(&solid, nodes, 0.5);
        let ys: Vec<f32> = (0..8).map(|j| d[2 * j]).collect();
        assert_eq!(ys, vec![-0.25, -0.25, 0.25, 0.75, 1.25, 1.25, 0.75, 0.25]);
    }
}
