//! Neighbour search: Verlet lists (with rebuilds and Morton reordering) give the same forces
//! as the all-pairs path, and the automatic choice follows the documented crossover.

use mpcbox::md::build::{fcc_lattice, maxwell_velocities, random_gas};
use mpcbox::md::neighbor::{prefer_all_pairs, CellList};
use mpcbox::md::{
    DpdParams, ForceField, LjTable, Md, MdSettings, MdThermostat, NeighborMode, PairStyle, System,
};

fn settings(mode: NeighborMode, reorder_every: u64) -> MdSettings {
    MdSettings {
        dt: 0.005,
        kt: 1.0,
        seed: 3,
        skin: 0.4,
        neighbor: mode,
        reorder_every,
        threads: 0,
        shear: None,
    }
}

/// Two-type LJ mixture, disordered by a short hot run.
fn mixture() -> (System, ForceField) {
    let mut sys = fcc_lattice([6, 6, 6], 0.8, 1.0);
    sys.type_mass = vec![1.0, 2.0];
    for i in 0..sys.len() {
        if sys.tag[i].is_multiple_of(3) {
            sys.typ[i] = 1;
        }
    }
    maxwell_velocities(&mut sys, 1.5, 8);
    let table = LjTable::from_entries(
        2,
        &[
            (0, 0, 1.0, 1.0, 2.5),
            (0, 1, 1.5, 0.8, 2.0),
            (1, 1, 0.5, 0.88, 2.2),
        ],
        true,
    )
    .unwrap();
    let ff = ForceField {
        pair: PairStyle::Lj(table),
        bond_styles: vec![],
    };
    let mut md = Md::new(
        sys,
        ff.clone(),
        MdThermostat::None,
        settings(NeighborMode::AllPairs, 0),
    )
    .unwrap();
    md.run(300).unwrap();
    (md.sys.clone(), ff)
}

/// Forces keyed by tag.
fn by_tag(md: &Md) -> Vec<[f64; 3]> {
    let mut out = vec![[0.0; 3]; md.sys.len() + 1];
    for i in 0..md.sys.len() {
        out[md.sys.tag[i] as usize] = md.forces()[i];
    }
    out
}

fn max_rel_diff(a: &[[f64; 3]], b: &[[f64; 3]]) -> f64 {
    let scale = a
        .iter()
        .flat_map(|f| f.iter())
        .map(|c| c.abs())
        .fold(0.0, f64::max);
    a.iter()
        .zip(b)
        .flat_map(|(x, y)| (0..3).map(move |k| (x[k] - y[k]).abs()))
        .fold(0.0, f64::max)
        / scale
}

#[test]
fn verlet_list_and_all_pairs_give_the_same_forces() {
    let (sys, ff) = mixture();
    let list = Md::new(
        sys.clone(),
        ff.clone(),
        MdThermostat::None,
        settings(NeighborMode::Verlet, 1),
    )
    .unwrap();
    let all = Md::new(
        sys,
        ff,
        MdThermostat::None,
        settings(NeighborMode::AllPairs, 0),
    )
    .unwrap();
    assert!(list.uses_verlet_list() && !all.uses_verlet_list());
    let d = max_rel_diff(&by_tag(&list), &by_tag(&all));
    println!("LJ mixture: max relative force difference {d:e}");
    assert!(d < 1e-12, "forces differ by {d}");
    let (el, ea) = (list.potential_energy(), all.potential_energy());
    assert!(((el - ea) / ea).abs() < 1e-12, "energies {el} vs {ea}");
    let (wl, wa) = (list.report().virial, all.report().virial);
    assert!(((wl - wa) / wa).abs() < 1e-12, "virials {wl} vs {wa}");
}

#[test]
fn lists_stay_exact_through_rebuilds_and_reordering() {
    let (sys, ff) = mixture();
    let mut list = Md::new(
        sys,
        ff.clone(),
        MdThermostat::None,
        settings(NeighborMode::Verlet, 2),
    )
    .unwrap();
    list.run(400).unwrap();
    assert!(
        list.list_builds() > 3,
        "only {} list builds",
        list.list_builds()
    );
    // the same configuration through all pairs
    let all = Md::new(
        list.sys.clone(),
        ff,
        MdThermostat::None,
        settings(NeighborMode::AllPairs, 0),
    )
    .unwrap();
    let d = max_rel_diff(&by_tag(&list), &by_tag(&all));
    assert!(
        d < 1e-12,
        "forces after {} rebuilds differ by {d}",
        list.list_builds()
    );
    // Morton reordering happened: particles are no longer in tag order
    assert!(list.sys.tag.windows(2).any(|w| w[0] > w[1]));
}

#[test]
fn dpd_forces_agree_between_list_and_all_pairs() {
    let mut sys = random_gas(600, [6.0; 3], 1.0, 2);
    maxwell_velocities(&mut sys, 1.0, 4);
    let ff = ForceField {
        pair: PairStyle::Dpd(DpdParams::uniform(1, 25.0, 4.5, 1.0, 0.5)),
        bond_styles: vec![],
    };
    let list = Md::new(
        sys.clone(),
        ff.clone(),
        MdThermostat::None,
        settings(NeighborMode::Verlet, 1),
    )
    .unwrap();
    let all = Md::new(
        sys,
        ff,
        MdThermostat::None,
        settings(NeighborMode::AllPairs, 0),
    )
    .unwrap();
    let d = max_rel_diff(&by_tag(&list), &by_tag(&all));
    assert!(d < 1e-12, "DPD forces differ by {d}");
}

#[test]
fn cell_list_is_a_counting_sort() {
    let sys = random_gas(1000, [7.0, 8.0, 9.0], 1.0, 1);
    let dims = CellList::dims_for(sys.box_len, 1.1).unwrap();
    assert_eq!(dims, [6, 7, 8]);
    let mut cl = CellList::default();
    cl.build(&sys.pos, sys.box_len, dims);
    assert_eq!(*cl.start.last().unwrap() as usize, sys.len());
    let mut seen = vec![false; sys.len()];
    for c in 0..dims.iter().product::<usize>() {
        let members = &cl.members[cl.start[c] as usize..cl.start[c + 1] as usize];
        assert!(
            members.windows(2).all(|w| w[0] < w[1]),
            "stable order in cell {c}"
        );
        for &i in members {
            assert_eq!(cl.cell_of()[i as usize] as usize, c);
            seen[i as usize] = true;
        }
    }
    assert!(seen.iter().all(|&s| s));
    assert!(CellList::dims_for([3.0, 10.0, 10.0], 1.1).is_none());
}

#[test]
fn auto_mode_follows_the_crossover() {
    let r_list = 2.8;
    assert!(prefer_all_pairs(32, 0.8442, r_list));
    assert!(!prefer_all_pairs(100_000, 0.8442, r_list));
    let ff = ForceField {
        pair: PairStyle::Lj(LjTable::uniform(1, 1.0, 1.0, 1.2, true)),
        bond_styles: vec![],
    };
    for cells in [3, 4, 6, 10] {
        let sys = fcc_lattice([cells; 3], 0.8442, 1.0);
        let expect_list = !prefer_all_pairs(sys.len(), 0.8442, 1.2 + 0.4);
        let md = Md::new(
            sys,
            ff.clone(),
            MdThermostat::None,
            settings(NeighborMode::Auto, 0),
        )
        .unwrap();
        assert_eq!(md.uses_verlet_list(), expect_list, "{cells}³ cells");
    }
    // a box edge under 2.5 list radii never uses lists
    let tiny = fcc_lattice([2, 2, 2], 0.8442, 1.0);
    let md = Md::new(
        tiny,
        ff,
        MdThermostat::None,
        settings(NeighborMode::Verlet, 0),
    )
    .unwrap();
    assert!(!md.uses_verlet_list());
}

#[test]
fn both_stencils_find_the_same_neighbours() {
    use mpcbox::md::neighbor::VerletList;
    let sys = random_gas(3000, [9.0, 10.0, 11.0], 1.0, 9);
    let r_list = 2.2;
    let sets = |dims: [usize; 3]| {
        let mut cl = CellList::default();
        cl.build(&sys.pos, sys.box_len, dims);
        let mut vl = VerletList::default();
        vl.build(&sys.pos, sys.box_len, &cl, r_list);
        (0..sys.len())
            .map(|i| {
                let mut v = vl.neighbors(i).to_vec();
                v.sort_unstable();
                v
            })
            .collect::<Vec<_>>()
    };
    let coarse = CellList::dims_for(sys.box_len, r_list).unwrap();
    let fine = CellList::dims_for_list(sys.box_len, r_list).unwrap();
    assert_eq!(coarse, [4, 4, 5]);
    assert_eq!(fine, [8, 9, 10]);
    let (a, b) = (sets(coarse), sets(fine));
    assert_eq!(a, b);
    // against brute force for a few particles
    for i in [0usize, 17, 2999] {
        let mut want = vec![];
        for j in 0..sys.len() {
            let mut r2 = 0.0;
            for k in 0..3 {
                let l = sys.box_len[k];
                let mut d = sys.pos[i][k] - sys.pos[j][k];
                d -= l * (d / l).round();
                r2 += d * d;
            }
            if j != i && r2 < r_list * r_list {
                want.push(j as u32);
            }
        }
        assert_eq!(a[i], want, "particle {i}");
    }
}

/// Under Lees-Edwards shear the list built from cells (rows across the y boundary scanned only
/// around x ∓ δ) holds exactly the pairs within r_list that a scan of every pair finds, at
/// offsets all along x, in boxes whose y edge has few cells (whole rows scanned) and many.
#[test]
fn sheared_verlet_list_holds_every_pair_within_reach() {
    use mpcbox::md::boundary::{LeesEdwards, PeriodicBox};
    use mpcbox::md::neighbor::VerletList;
    for (l, n) in [
        ([9.0, 11.0, 7.0], 700),
        ([12.0, 4.2, 6.0], 300),
        ([30.0, 20.0, 5.0], 1500),
    ] {
        let sys = random_gas(n, l, 1.0, 17);
        let r_list = 1.4;
        let dims = CellList::dims_for_list(l, r_list).expect("cells");
        let mut cells = CellList::default();
        cells.build(&sys.pos, l, dims);
        for k in 0..13 {
            let d = 0.37 * l[0] * k as f64 + 0.011;
            let bx = PeriodicBox::sheared(l, LeesEdwards::at(d, 0.5, l[0]));
            let mut list = VerletList::default();
            list.build_in(&sys.pos, &bx, true, &cells, r_list);
            for i in 0..n {
                let mut got: Vec<u32> = list.neighbors(i).to_vec();
                got.sort_unstable();
                let want: Vec<u32> = (0..n as u32)
                    .filter(|&j| {
                        j as usize != i
                            && bx.distance2(sys.pos[i], sys.pos[j as usize]) < r_list * r_list
                    })
                    .collect();
                assert_eq!(got, want, "box {l:?}, offset {d}, particle {i}");
            }
        }
    }
}
