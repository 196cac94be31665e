//! Tests of `field`: interpolation, normals, the time of impact and its root search, cut cells.

use super::*;

/// d = min(y − 1, 15 − y) on a 8×16×8 box at spacing ½ (the slit of height 14).
pub(crate) fn channel() -> DistanceField {
    let nodes = [16, 32, 16];
    let mut values = Vec::new();
    for _ in 0..nodes[0] {
        for j in 0..nodes[1] {
            let y = (j as f64 + 0.5) * 0.5;
            for _ in 0..nodes[2] {
                values.push((y - 1.0).min(15.0 - y) as f32);
            }
        }
    }
    DistanceField::new(nodes, 0.5, values)
}

/// A sphere of radius 3 about the centre of a 10³ box (exact distance at the nodes).
fn ball() -> DistanceField {
    let n = 20;
    let mut values = Vec::new();
    for i in 0..n {
        for j in 0..n {
            for k in 0..n {
                let d = [i, j, k].map(|c| (c as f64 + 0.5) * 0.5 - 5.0);
                values.push(((d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt() - 3.0) as f32);
            }
        }
    }
    DistanceField::new([n; 3], 0.5, values)
}

#[test]
fn interpolation_is_exact_for_a_linear_field_and_periodic() {
    let c = channel();
    for y in [1.0, 1.3, 4.0, 7.6, 14.2] {
        let want = (y - 1.0f64).min(15.0 - y);
        let got = c.signed_distance([3.3, y, 5.1]);
        assert!((got - want).abs() < 1e-6, "y {y}: {got} vs {want}");
    }
    // x and z periodic: any image, and the wrap across the box faces
    assert_eq!(
        c.signed_distance([3.3, 4.0, 5.1]),
        c.signed_distance([3.3 + 8.0, 4.0, 5.1 - 8.0])
    );
    // y periodic too: below y = 0 is the top of the box
    assert!(
        (c.signed_distance([1.0, -0.1, 1.0]) - c.signed_distance([1.0, 15.9, 1.0])).abs() < 1e-12
    );
    assert!((c.fluid_volume([8.0, 16.0, 8.0]) - 8.0 * 14.0 * 8.0).abs() < 1e-9);
    assert!((c.slope - 1.0).abs() < 1e-6);
    assert_eq!(c.closed_axes(), [false; 3]);
}

#[test]
fn normals_point_into_the_fluid_along_the_gradient() {
    let c = channel();
    assert_eq!(c.normal([2.0, 2.3, 1.0]), [0.0, 1.0, 0.0]);
    assert_eq!(c.normal([2.0, 14.1, 1.0]), [0.0, -1.0, 0.0]);
    let b = ball();
    let r = [6.1, 7.3, 4.2];
    let n = b.normal(r);
    let d = [1.1, 2.3, -0.8];
    let len: f64 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
    let cos = (n[0] * d[0] + n[1] * d[1] + n[2] * d[2]) / len.sqrt();
    assert!(cos > 0.99, "{n:?}");
}

#[test]
fn time_of_impact_lands_on_the_zero_level() {
    let c = channel();
    // from y = 1.5 straight down at speed 1: the plate y = 1 after ½
    let t = c
        .time_of_impact([2.0, 1.5, 3.0], [0.0, -1.0, 0.0], 1.0)
        .unwrap();
    assert!((t - 0.5).abs() < 1e-12, "{t}");
    assert_eq!(
        c.time_of_impact([2.0, 1.5, 3.0], [0.0, -1.0, 0.0], 0.4),
        None
    );
    assert_eq!(
        c.time_of_impact([2.0, 1.5, 3.0], [0.0, 1.0, 0.0], 1.0),
        None
    );
    // on the surface moving out: now; moving in: never
    assert_eq!(
        c.time_of_impact([2.0, 1.0, 3.0], [0.0, -1.0, 0.0], 1.0),
        Some(0.0)
    );
    assert_eq!(
        c.time_of_impact([2.0, 1.0, 3.0], [0.1, 1.0, 0.0], 1.0),
        None
    );
    let b = ball();
    for (r, v) in [
        ([0.5, 1.2, 2.0], [1.0, 0.9, 0.8]),
        ([5.0, 5.0, 1.0], [0.1, -0.05, 0.7]),
        ([8.7, 6.2, 4.9], [-0.8, -0.1, 0.2]),
    ] {
        let t = b.time_of_impact(r, v, 10.0).unwrap();
        let hit = [r[0] + v[0] * t, r[1] + v[1] * t, r[2] + v[2] * t];
        let d = b.signed_distance(hit);
        assert!((0.0..1e-9).contains(&d), "{hit:?}: {d}");
        // near the exact sphere too (the interpolation's error, a fraction of a spacing)
        let e = [hit[0] - 5.0, hit[1] - 5.0, hit[2] - 5.0];
        let rho = (e[0] * e[0] + e[1] * e[1] + e[2] * e[2]).sqrt();
        assert!((rho - 3.0).abs() < 0.05, "{rho}");
    }
}

/// The root search ends on the fluid side of the impact, within its tolerance of the
/// impact found by bisection to the last bit, over random paths into the ball from
/// outside and from inside, with large and small steps.
#[test]
fn the_root_search_brackets_the_bisected_impact() {
    let b = ball();
    let mut s = crate::rng::CellStream::for_particle(5, 0);
    let mut hits = 0;
    for _ in 0..10_000 {
        let r = [0, 1, 2].map(|_| 1.0 + 8.0 * s.uniform());
        let v = [0, 1, 2].map(|_| 2.0 * s.uniform() - 1.0);
        let dt = if s.uniform() < 0.5 { 0.1 } else { 4.0 };
        if b.signed_distance(r) < 0.0 {
            continue;
        }
        let Some(t) = b.time_of_impact(r, v, dt) else {
            continue;
        };
        let at = |t: f64| [r[0] + v[0] * t, r[1] + v[1] * t, r[2] + v[2] * t];
        assert!(b.signed_distance(at(t)) >= 0.0, "{r:?} {v:?}: {t}");
        // bisection to the last bit from [t, the first sample in the solid past it]
        let (mut lo, mut hi) = (t, t);
        let mut k = 1.0;
        while b.signed_distance(at(hi)) >= 0.0 {
            hi = (t + k * ROOT_TOLERANCE * dt).min(dt);
            k *= 2.0;
        }
        loop {
            let mid = 0.5 * (lo + hi);
            if !(mid > lo && mid < hi) {
                break;
            }
            if b.signed_distance(at(mid)) < 0.0 {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        assert!(
            lo - t <= 2.0 * ROOT_TOLERANCE * dt,
            "{r:?} {v:?}: {t} against {lo}"
        );
        hits += 1;
    }
    assert!(hits > 500, "{hits} impacts");
}

#[test]
fn cut_cells_and_rounding() {
    let c = channel();
    assert!(c.cuts_cell([0.0, 0.6, 0.0]));
    assert!(!c.cuts_cell([0.0, 1.0, 0.0]) && !c.cuts_cell([0.0, 0.0, 0.0]));
    assert!(c.cuts_cell([3.0, 14.5, 7.5]) && !c.cuts_cell([3.0, 6.5, 2.0]));
    assert!(c.cuts_cell([-0.5, -1.4, 7.8])); // wrapped: y across the top plate's face
    let b = ball();
    assert!(b.cuts_cell([7.5, 4.5, 4.5]) && !b.cuts_cell([4.5, 4.5, 4.5]));
    assert!(!b.cuts_cell([0.0, 0.0, 0.0]));
    // a point rounded or pushed into the wall comes back into the fluid
    for p in [[1.0f32, 0.999_999, 3.0], [1.0, 0.9, 3.0], [2.0, 15.2, 7.9]] {
        let q = c.keep_inside(p);
        assert!(c.signed_distance(q.map(|x| x as f64)) >= 0.0, "{q:?}");
        assert!((q[1] - p[1]).abs() < 0.21, "{q:?}");
    }
    let q = b.keep_inside([5.0, 5.0, 7.9]);
    assert!(b.signed_distance(q.map(|x| x as f64)) >= 0.0);
    assert_eq!(b.keep_inside([1.0, 2.0, 3.0]), [1.0, 2.0, 3.0]);
}

/// Points are located by a product with 1/spacing (as on the GPU): at a spacing that is not a
/// power of two, where that product and x / spacing may round apart, the interpolant still
/// takes the node values at the nodes and is linear between them.
#[test]
fn a_spacing_that_is_not_a_power_of_two_interpolates_the_nodes() {
    let (nodes, s) = ([10, 30, 10], 0.3);
    let node_y = |j: usize| (j as f64 + 0.5) * s;
    let mut values = Vec::new();
    for _ in 0..nodes[0] {
        for j in 0..nodes[1] {
            for _ in 0..nodes[2] {
                values.push((node_y(j) - 1.0) as f32);
            }
        }
    }
    let f = DistanceField::new(nodes, s, values);
    for j in 0..nodes[1] {
        let at = f.signed_distance([0.45, node_y(j), 1.35]);
        let node = (node_y(j) - 1.0) as f32 as f64;
        assert!((at - node).abs() < 1e-12, "node {j}: {at} vs {node}");
    }
    for y in [0.2, 1.0, 3.33, 7.01, 8.8] {
        let got = f.signed_distance([1.7, y, 2.2]);
        assert!((got - (y - 1.0)).abs() < 1e-6, "y {y}: {got}");
    }
}
