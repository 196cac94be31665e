//! Bonds against their analytic forms, LAMMPS data files, and clear errors for bad input.

use mpcbox::config::Config;
use mpcbox::md::data::{parse_data, AtomStyle};
use mpcbox::md::{Bond, BondStyle, ForceField, Md, MdSettings, MdThermostat, PairStyle, System};
use mpcbox::MpcError;

fn dimer(r: f64, style: BondStyle) -> Result<Md, MpcError> {
    let mut sys = System {
        box_len: [10.0; 3],
        type_mass: vec![1.0],
        ..Default::default()
    };
    // along a general direction, across the periodic boundary
    let dir = [0.48, -0.6, 0.64];
    let a = [9.7, 0.2, 5.0];
    sys.push(a, [0.0; 3], 0, 1, 1);
    sys.push(
        [a[0] + r * dir[0], a[1] + r * dir[1], a[2] + r * dir[2]],
        [0.0; 3],
        0,
        2,
        1,
    );
    sys.bonds.push(Bond {
        a: 1,
        b: 2,
        kind: 0,
    });
    let ff = ForceField {
        pair: PairStyle::None,
        bond_styles: vec![style],
    };
    Md::new(sys, ff, MdThermostat::None, MdSettings::default())
}

#[test]
fn fene_force_and_energy_match_the_analytic_formula() {
    let (k, r0) = (30.0, 1.5);
    for r in [0.5, 0.97, 1.2, 1.45, 1.499] {
        let md = dimer(r, BondStyle::Fene { k, r0 }).unwrap();
        let x = (r / r0) * (r / r0);
        let u = -0.5 * k * r0 * r0 * (1.0 - x).ln();
        // attractive: |F| = k r / (1 − (r/R0)²), on particle 2 towards particle 1
        let f = k * r / (1.0 - x);
        let got_u = md.potential_energy();
        assert!(((got_u - u) / u).abs() < 1e-12, "r = {r}: U {got_u} vs {u}");
        let f2 = md.forces()[md.sys.tag.iter().position(|&t| t == 2).unwrap()];
        let dir = [0.48, -0.6, 0.64];
        for c in 0..3 {
            let want = -f * dir[c];
            assert!((f2[c] - want).abs() < 1e-9 * f, "r = {r}: F {f2:?}");
        }
        let f1 = md.forces()[md.sys.tag.iter().position(|&t| t == 1).unwrap()];
        for c in 0..3 {
            assert_eq!(f1[c], -f2[c], "Newton's third law");
        }
        // virial r·F = −f r for an attractive bond
        assert!((md.report().virial - -f * r).abs() < 1e-9 * f * r);
    }
}

#[test]
fn harmonic_bond_matches_the_analytic_formula() {
    let (k, r0) = (100.0, 1.0);
    for r in [0.8, 1.0, 1.3] {
        let md = dimer(r, BondStyle::Harmonic { k, r0 }).unwrap();
        let u = 0.5 * k * (r - r0) * (r - r0);
        assert!((md.potential_energy() - u).abs() < 1e-10);
        let f2 = md.forces()[md.sys.tag.iter().position(|&t| t == 2).unwrap()];
        let want = -k * (r - r0) * 0.48;
        assert!((f2[0] - want).abs() < 1e-9, "{f2:?} vs {want}");
    }
}

fn field_of(e: MpcError) -> (String, String) {
    let text = e.to_string();
    match e {
        MpcError::Config(c) => (c.field, text),
        other => panic!("expected a config error, got {other}"),
    }
}

#[test]
fn fene_bond_beyond_r0_is_a_clear_error() {
    let e = dimer(1.6, BondStyle::Fene { k: 30.0, r0: 1.5 })
        .err()
        .expect("must fail");
    let (field, text) = field_of(e);
    assert_eq!(field, "Bonds");
    assert!(
        text.contains("1-2") && text.contains("R0") && text.contains("fix:"),
        "{text}"
    );
}

const GOOD: &str = "LAMMPS data file: two dimers

4 atoms
2 bonds
2 atom types
1 bond types

0.0 8.0 xlo xhi
0.0 8.0 ylo yhi
0.0 8.0 zlo zhi

Masses

1 1.0
2 3.0

Atoms # bond

1 1 1 1.0 1.0 1.0
2 1 2 2.0 1.0 1.0 0 0 0
3 2 1 7.5 4.0 4.0
4 2 1 8.4 4.0 4.0 -1 0 0

Velocities

1 0.1 0.0 0.0
2 -0.1 0.0 0.0
3 0.0 0.2 0.0
4 0.0 -0.2 0.0

Bonds

1 1 1 2
2 1 3 4
";

#[test]
fn data_file_is_read() {
    let sys = parse_data(GOOD, "good.data", None).unwrap();
    assert_eq!(sys.len(), 4);
    assert_eq!(sys.type_mass, vec![1.0, 3.0]);
    assert_eq!(sys.box_len, [8.0; 3]);
    assert_eq!(sys.bonds.len(), 2);
    let i4 = sys.tag.iter().position(|&t| t == 4).unwrap();
    // 8.4 wraps to 0.4 (image +1), then the file's image flag −1: unwrapped x = 0.4
    assert!((sys.pos[i4][0] - 0.4).abs() < 1e-12);
    assert!((sys.unwrapped(i4)[0] - 0.4).abs() < 1e-12);
    assert_eq!(sys.mol[i4], 2);
    assert_eq!(sys.vel[i4], [0.0, -0.2, 0.0]);
    assert_eq!(sys.typ[1], 1);
    // atomic style through the config hint
    let atomic = GOOD
        .replace("Atoms # bond", "Atoms")
        .replace("1 1 1 1.0 1.0 1.0", "1 1 1.0 1.0 1.0")
        .replace("2 1 2 2.0 1.0 1.0 0 0 0", "2 2 2.0 1.0 1.0")
        .replace("3 2 1 7.5 4.0 4.0", "3 1 7.5 4.0 4.0")
        .replace("4 2 1 8.4 4.0 4.0 -1 0 0", "4 1 7.4 4.0 4.0");
    let sys = parse_data(&atomic, "atomic.data", Some(AtomStyle::Atomic)).unwrap();
    assert_eq!(sys.len(), 4);
    assert_eq!(sys.mol, vec![0; 4]);
}

fn data_error(text: &str) -> (String, String) {
    let e = parse_data(text, "bad.data", None).expect_err("must be rejected");
    (e.field.clone(), e.to_string())
}

#[test]
fn bad_data_files_give_clear_errors() {
    let cases: Vec<(String, &str, &str)> = vec![
        (
            GOOD.replace("2 1 2 2.0 1.0 1.0 0 0 0", "2 1 2 2.0 1.0"),
            "line 20 (Atoms)",
            "columns",
        ),
        (
            GOOD.replace("3 2 1 7.5 4.0 4.0", "3 2 1 7.5 nan 4.0"),
            "line 21 (Atoms)",
            "not a finite number",
        ),
        (
            GOOD.replace("2 3.0\n", ""),
            "(Masses)",
            "type 2 has no mass",
        ),
        (
            GOOD.replace("3 2 1 7.5 4.0 4.0", "3 2 5 7.5 4.0 4.0"),
            "line 21 (Atoms)",
            "atom type 5",
        ),
        (
            GOOD.replace("4 atoms", "5 atoms"),
            "(Atoms)",
            "header says 5 atoms",
        ),
        (GOOD.replace("2 1 3 4", "2 1 3 9"), "(Bonds)", "atom 9"),
        (
            GOOD.replace("Atoms # bond", "Atoms"),
            "(Atoms)",
            "atom style",
        ),
        (GOOD.replace("0.0 8.0 ylo yhi\n", ""), "header", "ylo"),
        (
            GOOD.replace("4 0.0 -0.2 0.0", "4 0.0 -0.2"),
            "(Velocities)",
            "columns",
        ),
        (
            GOOD.replace("Masses\n", "Massez\n"),
            "line 12 (header)",
            "neither a header line nor a section name",
        ),
        (
            GOOD.replace("Bonds\n", "Bondz\n"),
            "line 31 (Velocities)",
            "columns",
        ),
    ];
    for (text, field, problem) in cases {
        let (f, msg) = data_error(&text);
        assert!(
            f.contains(field),
            "field `{f}` should contain `{field}` ({msg})"
        );
        assert!(msg.contains(problem), "`{msg}` should mention `{problem}`");
        assert!(msg.contains("fix:"), "{msg}");
    }
}

fn md_config(md: &str) -> String {
    format!(
        "(cells: (8, 8, 8), particles_per_cell: 5, time_step: 0.1, \
          collision: Srd(angle_deg: 130.0), steps: 10, device: Cpu, md: ({md}))"
    )
}

#[test]
fn bad_md_configs_name_the_field_and_the_fix() {
    let cases = [
        (
            "steps_per_collision: 0, system: Chains(n_chains: 1, chain_length: 4), pair: Wca(epsilon: 1.0, sigma: 1.0), bonds: [Fene(k: 30.0, r0: 1.5)]",
            "md.steps_per_collision",
        ),
        (
            "steps_per_collision: 5, system: Chains(n_chains: 1, chain_length: 4, bond_length: 1.6), pair: Wca(epsilon: 1.0, sigma: 1.0), bonds: [Fene(k: 30.0, r0: 1.5)]",
            "md.system.Chains.bond_length",
        ),
        (
            "steps_per_collision: 5, system: Chains(n_chains: 1, chain_length: 4), pair: Wca(epsilon: NaN, sigma: 1.0), bonds: [Fene(k: 30.0, r0: 1.5)]",
            "md.pair.Wca.epsilon",
        ),
        (
            "steps_per_collision: 5, system: Chains(n_chains: 1, chain_length: 4, bead_mass: NaN), pair: Wca(epsilon: 1.0, sigma: 1.0), bonds: [Fene(k: 30.0, r0: 1.5)]",
            "md.system.Chains.bead_mass",
        ),
        (
            "steps_per_collision: 5, system: Chains(n_chains: 1, chain_length: 4), pair: Wca(epsilon: 1.0, sigma: 1.0)",
            "md.bonds",
        ),
        (
            "steps_per_collision: 5, system: Chains(n_chains: 1, chain_length: 4), pair: Wca(epsilon: 1.0, sigma: 1.0), bonds: [Fene(k: 30.0, r0: -1.5)]",
            "md.bonds[0] (Fene)",
        ),
        (
            "steps_per_collision: 5, system: Chains(n_chains: 1, chain_length: 4), pair: Lj(coeffs: []), bonds: [Fene(k: 30.0, r0: 1.5)]",
            "md.pair.Lj.coeffs",
        ),
    ];
    for (md, field) in cases {
        let e = Config::from_ron_str(&md_config(md)).expect_err(md);
        assert_eq!(e.field, field, "{e}");
        assert!(e.to_string().contains("fix:"));
    }
    let e = Config::from_ron_str(&md_config(
        "steps_per_collision: 5, system: Chains(n_chains: 1, chain_length: 4), pair: Wca(epsilon: 1.0, sigma: 1.0), bonds: [Fene(k: 30.0, r0: 1.5)], thermostat: Langevin(damping: NaN)",
    ))
    .unwrap_err();
    assert_eq!(e.field, "md.thermostat.Langevin.damping");
    // shear with MD is accepted (Lees-Edwards in the MD engine); a bad relaxation time is not
    let chains = "steps_per_collision: 5, system: Chains(n_chains: 1, chain_length: 4), pair: Wca(epsilon: 1.0, sigma: 1.0), bonds: [Fene(k: 30.0, r0: 1.5)]";
    let text = md_config(chains).replace("steps: 10", "steps: 10, shear_rate: 0.01");
    assert!(Config::from_ron_str(&text).is_ok());
    let text = md_config(&format!("{chains}, relaxation_time: -1.0"));
    assert_eq!(
        Config::from_ron_str(&text).unwrap_err().field,
        "md.relaxation_time"
    );
}

#[test]
fn md_config_errors_at_build_time_are_clear() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    // a data file whose FENE bond is already longer than R0 (box 8 = MPC box)
    let stretched = write(
        "stretched.data",
        &GOOD.replace("2 1 2 2.0 1.0 1.0 0 0 0", "2 1 2 2.8 1.0 1.0 0 0 0"),
    );
    let missing = dir.path().join("does_not_exist.data");
    let wrong_box = write(
        "box.data",
        &GOOD.replace("0.0 8.0 zlo zhi", "0.0 9.0 zlo zhi"),
    );
    let build = |path: &std::path::Path, bonds: &str| {
        let text = md_config(&format!(
            "steps_per_collision: 5, system: DataFile(path: {:?}), pair: Wca(epsilon: 1.0, sigma: 1.0), bonds: [{bonds}]",
            path.display().to_string()
        ));
        let cfg = Config::from_ron_str(&text).unwrap();
        cfg.md
            .as_ref()
            .unwrap()
            .build(&cfg)
            .err()
            .expect("must fail")
    };
    let (f, msg) = field_of(build(&stretched, "Fene(k: 30.0, r0: 1.5)"));
    assert_eq!(f, "Bonds", "{msg}");
    assert!(msg.contains("1-2") && msg.contains("R0"), "{msg}");
    let (f, msg) = field_of(build(&missing, "Fene(k: 30.0, r0: 1.5)"));
    assert_eq!(f, "md.system.DataFile.path", "{msg}");
    let (f, msg) = field_of(build(&wrong_box, "Fene(k: 30.0, r0: 1.5)"));
    assert_eq!(f, "md.system.DataFile.path", "{msg}");
    assert!(msg.contains("MPC box"));
    let good = write("good.data", GOOD);
    let (f, msg) = field_of(build(&good, ""));
    assert_eq!(f, "Bonds", "{msg}");
    assert!(msg.contains("bond type 1"), "{msg}");
}

#[test]
fn pair_coefficients_from_the_config_cover_every_type_pair() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("two_types.data");
    std::fs::write(&path, GOOD).unwrap();
    let cfg_with = |pair: &str| {
        Config::from_ron_str(&md_config(&format!(
            "steps_per_collision: 5, system: DataFile(path: {:?}), pair: {pair}, \
             bonds: [Harmonic(k: 100.0, r0: 1.0)], thermostat: Langevin(damping: 1.0)",
            path.display().to_string()
        )))
        .unwrap()
    };
    let build = |pair: &str| {
        let cfg = cfg_with(pair);
        cfg.md.as_ref().unwrap().build(&cfg)
    };
    let mut md = build(
        "Lj(coeffs: [(1, 1, 1.0, 1.0, 2.5), (1, 2, 1.0, 0.9, 2.5), (2, 2, 0.5, 0.8, 2.0)], shift: true)",
    )
    .unwrap();
    md.run(20).unwrap();
    assert!(md.potential_energy().is_finite());
    let (f, msg) = field_of(
        build("Lj(coeffs: [(1, 1, 1.0, 1.0, 2.5), (1, 2, 1.0, 0.9, 2.5)])")
            .err()
            .unwrap(),
    );
    assert_eq!(f, "md.pair.Lj.coeffs");
    assert!(msg.contains("(2, 2)"), "{msg}");
    let mut dpd = build("Dpd(a: [(1, 1, 25.0), (1, 2, 30.0), (2, 2, 25.0)], gamma: 4.5)").unwrap();
    dpd.run(20).unwrap();
    let (f, msg) = field_of(build("Dpd(a: [(1, 1, 25.0)], gamma: 4.5)").err().unwrap());
    assert_eq!(f, "md.pair.Dpd.a");
    assert!(msg.contains("(1, 2)"), "{msg}");
    let (f, _) = field_of(build("Lj(coeffs: [(0, 1, 1.0, 1.0, 2.5)])").err().unwrap());
    assert_eq!(f, "md.pair.Lj.coeffs");
}

/// A solute that starts inside a wall's repulsive core (0.5 from the plate, sigma 1) is refused
/// at build time naming the atom, its distance and the clearance (before, the first MD step threw
/// it off and the run failed later blaming a FENE bond); 1.0 from the plate is accepted.
#[test]
fn a_solute_starting_in_a_walls_core_is_refused_naming_the_distance() {
    let dir = tempfile::tempdir().unwrap();
    let build = |data: &str| {
        let p = dir.path().join("walls.data");
        std::fs::write(&p, data).unwrap();
        let text = format!(
            "(cells: (8, 8, 8), particles_per_cell: 5, time_step: 0.1, \
              collision: Srd(angle_deg: 130.0), steps: 10, device: Cpu, walls: Slit(), \
              md: (steps_per_collision: 5, system: DataFile(path: {:?}), \
                   pair: Wca(epsilon: 1.0, sigma: 1.0), bonds: [Fene(k: 30.0, r0: 1.5)]))",
            p.display().to_string()
        );
        let cfg = Config::from_ron_str(&text).unwrap();
        cfg.md.as_ref().unwrap().build(&cfg).map(|_| ())
    };
    // atoms 1 and 2 sit at y = 1.0, 0.5 above the bottom plate (y = 0.5)
    let (f, msg) = field_of(build(GOOD).expect_err("0.5 from the plate must be refused"));
    assert_eq!(f, "md.system", "{msg}");
    assert!(
        msg.contains("atom 1") && msg.contains("0.500 from the wall") && msg.contains("0.85"),
        "{msg}"
    );
    assert!(!msg.contains("FENE"), "{msg}");
    let clear = GOOD
        .replace("1 1 1 1.0 1.0 1.0", "1 1 1 1.0 1.5 1.0")
        .replace("2 1 2 2.0 1.0 1.0 0 0 0", "2 1 2 2.0 1.5 1.0 0 0 0");
    build(&clear).expect("1.0 from the plate is a legal start");
}
