//! What Rust and the CUDA kernels must agree on, written once here: rule codes, the rules'
//! sum lengths and buffer strides, wall-shape codes, the Philox streams' purposes, the record
//! and flag layouts of the fluid's migration and of the MD engine, and the layouts of the
//! parameter structs. [`contract_header`] turns them into the `#define`s and `constexpr`
//! functions that open every translation unit NVRTC compiles (no kernel file defines them by
//! hand: `tests`), and `params::layout_checks` into `static_assert`s that close it, so a
//! mismatch between the two sides cannot build. Each constant has the same name on both sides.

use crate::fixed_sums::{GlobalKind, SumKind, CELL_KINDS, GLOBAL_KINDS};
use crate::physics::walls::{Shape, SlitNormal};
use crate::physics::Rule;
use crate::rng::CellStreamPurpose;

/// Defines each constant for Rust and lists it, by the same name, for the generated header.
macro_rules! shared_constants {
    ($(#[$list_doc:meta])* $list:ident: $ty:ty { $($(#[$doc:meta])* $name:ident = $value:expr,)* }) => {
        $($(#[$doc])* pub const $name: $ty = $value;)*
        $(#[$list_doc])*
        pub const $list: &[(&str, $ty)] = &[$((stringify!($name), $name),)*];
    };
}

shared_constants! {
    /// The fluid's record layouts.
    FLUID_CONSTANTS: usize {
        /// Words (u64) of one particle migrating between slabs: velocity, position, global id.
        MPC_RECORD_WORDS = 5,
        /// Uniform points of a cut cell tried for one virtual particle's place in the wall
        /// (the +a rules between walls: `walls::rule_fill`, `wall_rules.cuh`).
        MPC_PLACEMENT_TRIES = crate::physics::walls::rule_fill::PLACEMENT_TRIES as usize,
        /// The fixed-point sums' kinds (`fixed_sums::SumKind`: the index of each kind's scale
        /// in `MpcParams.fix_scale`) and how many scales there are.
        MPC_FIX_MOMENTUM = SumKind::Momentum as usize,
        MPC_FIX_ENERGY = SumKind::Energy as usize,
        MPC_FIX_MASS = SumKind::Mass as usize,
        MPC_FIX_COUNT = SumKind::Count as usize,
        MPC_FIX_MOMENT = SumKind::Moment as usize,
        MPC_FIX_SECOND = SumKind::Second as usize,
        MPC_FIX_ANGULAR = SumKind::Angular as usize,
        MPC_FIX_KINDS = CELL_KINDS,
        /// The global sums' kinds (`fixed_sums::GlobalKind`, `MpcParams.global_scale`).
        MPC_GLOBAL_MOMENTUM = GlobalKind::Momentum as usize,
        MPC_GLOBAL_ENERGY = GlobalKind::Energy as usize,
        MPC_GLOBAL_VELOCITY = GlobalKind::Velocity as usize,
        MPC_GLOBAL_KINDS = GLOBAL_KINDS,
    }
}

shared_constants! {
    /// The MD engine's flag words and record layouts.
    MD_CONSTANTS: usize {
        /// Flag words the MD kernels raise, read with one copy per step: a list build is due.
        MD_FLAG_REBUILD = 0,
        /// The fullest cell of the last binning (the cell lists' capacity follows it).
        MD_FLAG_CELL_MAX = 1,
        /// The longest neighbour list of the last build.
        MD_FLAG_NEIGH_MAX = 2,
        /// A bond stretched beyond its maximum; the next two words hold its tags.
        MD_FLAG_BROKEN = 3,
        /// A bead reached a wall surface; the next word holds its tag (`md_walls.cu`).
        MD_FLAG_WALL = 6,
        /// Decomposed engine: a bond reaches further in y than the slab halo; its tags follow.
        MD_FLAG_HALO = 8,
        /// Decomposed engine: the length of the work list the last list build filled.
        MD_FLAG_WORK = 11,
        /// Decomposed engine: the length of the collider list the last list build filled.
        MD_FLAG_COLLIDERS = 12,
        /// Decomposed engine: from this word on, the record counts of a slab's outgoing
        /// exchanges (read with the other flags, one wait per step).
        MD_FLAG_COUNTS = 13,
        /// Outgoing exchanges a slab may have.
        MD_MAX_LINKS = 20,
        /// Doubles per chunk of the energy reduction (`md_observe.cu`).
        MD_ENERGY_WORDS = 11,
        /// Doubles of one exchanged bead: index, position, velocity, image (as doubles: exact),
        /// build position, force.
        MD_SLAB_WORDS = 16,
        /// The links one first half packs the drift's exchange for (`MdSends`).
        MD_FUSED_SENDS = 4,
    }
}

/// Flag words of an MD engine: the flags, then a count per outgoing link.
pub const MD_NFLAGS: usize = MD_FLAG_COUNTS + MD_MAX_LINKS;

shared_constants! {
    /// What a sender of the decomposed MD engine packs (`md_slabs.cu`, `SlabSend`).
    MD_SEND_CODES: i32 {
        /// After the drift: the beads it owned at the step's start that are, or were, in the band.
        MD_SEND_DRIFTED = 0,
        /// The beads it owns now that are in the band (before the collision; gathers).
        MD_SEND_OWNED = 1,
        /// The beads in the band whose velocity its collision changed.
        MD_SEND_COLLIDED = 2,
    }
}

/// Every Philox stream purpose with its CUDA name (`MPC_PURPOSE_*`, the counter's high bits).
pub const PURPOSES: [(&str, CellStreamPurpose); 4] = [
    ("MPC_PURPOSE_ROTATION_AXIS", CellStreamPurpose::RotationAxis),
    ("MPC_PURPOSE_THERMOSTAT", CellStreamPurpose::Thermostat),
    (
        "MPC_PURPOSE_ANDERSEN_VELOCITY",
        CellStreamPurpose::AndersenVelocity,
    ),
    ("MPC_PURPOSE_WALL_FILL", CellStreamPurpose::WallFill),
];

// Every purpose is in `PURPOSES`: a new one fails to compile here until it is listed above.
const _: () = match CellStreamPurpose::RotationAxis {
    CellStreamPurpose::RotationAxis
    | CellStreamPurpose::Thermostat
    | CellStreamPurpose::AndersenVelocity
    | CellStreamPurpose::WallFill => (),
};

/// Every rule, in code order (the generated tables list them all).
pub const RULES: [Rule; 4] = [Rule::Srd, Rule::SrdAngular, Rule::At, Rule::AtAngular];

/// The CUDA name of a rule's code (`MPC_RULE_*`).
fn rule_macro(rule: Rule) -> &'static str {
    match rule {
        Rule::Srd => "MPC_RULE_SRD",
        Rule::SrdAngular => "MPC_RULE_SRD_A",
        Rule::At => "MPC_RULE_AT",
        Rule::AtAngular => "MPC_RULE_AT_A",
    }
}

/// Doubles per cell of a rule's extended sums on a GPU: [`Rule::sums_len`] padded to whole
/// 32-byte sectors (the staged atomics then touch as few sectors as possible), 16-byte aligned
/// for double2 loads (`mpc_rule_stride` in the generated header).
pub fn ext_stride(rule: Rule) -> usize {
    match rule {
        Rule::Srd => 0,
        Rule::SrdAngular => 20,
        Rule::At => 4,
        Rule::AtAngular => 16,
    }
}

/// Wall-shape codes of `WallParams::kind` / `MpcWalls::kind` (`MPC_WALLS_*`). A slit's normal
/// is part of its code: the kernels' dispatch picks the axis with the shape.
pub const WALLS_NONE: u32 = 0;
pub const WALLS_SLIT: u32 = 1;
pub const WALLS_PIPE: u32 = 2;
pub const WALLS_SLIT_Z: u32 = 3;
/// A sphere with the fluid inside (`Sphere { fluid_inside: true }`).
pub const WALLS_SPHERE: u32 = 4;
/// A spherical obstacle: the fluid outside (`Sphere { fluid_inside: false }`).
pub const WALLS_OBSTACLE: u32 = 5;
/// A planar pore between two reservoirs (`PlanarPore`).
pub const WALLS_PORE: u32 = 6;
/// Cosine walls, a wavy channel or an expansion-contraction (`CosineWalls`).
pub const WALLS_COSINE: u32 = 7;
/// A signed distance given as data on a periodic grid (`DistanceField`); codes need only be
/// distinct, this one leaves room for more analytic shapes.
pub const WALLS_FIELD: u32 = 10;

/// Every wall-shape code with its CUDA name (the generated header defines them all).
pub const WALL_CODES: [(&str, u32); 9] = [
    ("MPC_WALLS_NONE", WALLS_NONE),
    ("MPC_WALLS_SLIT", WALLS_SLIT),
    ("MPC_WALLS_PIPE", WALLS_PIPE),
    ("MPC_WALLS_SLIT_Z", WALLS_SLIT_Z),
    ("MPC_WALLS_SPHERE", WALLS_SPHERE),
    ("MPC_WALLS_OBSTACLE", WALLS_OBSTACLE),
    ("MPC_WALLS_PORE", WALLS_PORE),
    ("MPC_WALLS_COSINE", WALLS_COSINE),
    ("MPC_WALLS_FIELD", WALLS_FIELD),
];

/// The kernels' code of a wall shape.
pub fn wall_kind(shape: &Shape) -> u32 {
    match shape {
        Shape::Slit(s) => match s.normal {
            SlitNormal::Y => WALLS_SLIT,
            SlitNormal::Z => WALLS_SLIT_Z,
        },
        Shape::Pipe(_) => WALLS_PIPE,
        Shape::Sphere(s) if s.fluid_inside => WALLS_SPHERE,
        Shape::Sphere(_) => WALLS_OBSTACLE,
        Shape::PlanarPore(_) => WALLS_PORE,
        Shape::Cosine(_) => WALLS_COSINE,
        Shape::Field(_) => WALLS_FIELD,
    }
}

/// A `constexpr` function of the rule code with one `case` per rule; an unknown code gives -1
/// (a length no loop runs and a stride no buffer has).
fn rule_table(name: &str, value: fn(Rule) -> usize) -> String {
    let mut s = format!(
        "__host__ __device__ constexpr int {name}(unsigned int rule) {{\n    switch (rule) {{\n"
    );
    for rule in RULES {
        s.push_str(&format!(
            "        case {}: return {};\n",
            rule_macro(rule),
            value(rule)
        ));
    }
    s.push_str("        default: return -1;\n    }\n}\n");
    s
}

/// `mpc_rule_sum_kind(rule, k)`: the fixed-point kind (`MPC_FIX_*`) of value k of a rule's
/// extended sums ([`Rule::sum_kind`]); past the rule's sums (a stride's padding, always zero)
/// the counts' kind, whose scale is 1, so every index names a scale.
fn rule_kind_table() -> String {
    let mut s = String::from(
        "__host__ __device__ constexpr int mpc_rule_sum_kind(unsigned int rule, int k) {\n    \
         switch (rule) {\n",
    );
    for rule in RULES {
        let kinds: Vec<String> = (0..rule.sums_len())
            .map(|k| (rule.sum_kind(k) as usize).to_string())
            .collect();
        s.push_str(&format!("        case {}: {{\n", rule_macro(rule)));
        if kinds.is_empty() {
            s.push_str(&format!(
                "            return {MPC_FIX_COUNT};\n        }}\n"
            ));
            continue;
        }
        s.push_str(&format!(
            "            constexpr int kinds[{}] = {{{}}};\n            \
             return k >= 0 && k < {} ? kinds[k] : {MPC_FIX_COUNT};\n        }}\n",
            kinds.len(),
            kinds.join(", "),
            kinds.len()
        ));
    }
    s.push_str(&format!(
        "        default: return {MPC_FIX_COUNT};\n    }}\n}}\n"
    ));
    s
}

/// The header every translation unit starts with (before `rng.cuh`).
pub fn contract_header() -> String {
    let mut s = String::from(
        "// Generated by src/backend/cuda/contract.rs: what Rust and CUDA share. Edit it there.\n",
    );
    for rule in RULES {
        s.push_str(&format!("#define {} {}u\n", rule_macro(rule), rule.code()));
    }
    s.push_str(&rule_table("mpc_rule_len", Rule::sums_len));
    s.push_str(&rule_table("mpc_rule_stride", ext_stride));
    s.push_str(&rule_kind_table());
    for (name, code) in WALL_CODES {
        s.push_str(&format!("#define {name} {code}u\n"));
    }
    for (name, purpose) in PURPOSES {
        s.push_str(&format!("#define {name} {}u\n", purpose as u32));
    }
    for (name, value) in FLUID_CONSTANTS.iter().chain(MD_CONSTANTS) {
        s.push_str(&format!("#define {name} {value}\n"));
    }
    for (name, value) in MD_SEND_CODES {
        s.push_str(&format!("#define {name} {value}\n"));
    }
    // a double: its shortest decimal form, which reads back as the same f64
    s.push_str(&format!(
        "#define MPC_WALLS_REACH_MARGIN {:?}\n",
        crate::physics::walls::geometry::REACH_MARGIN
    ));
    s.push_str(&format!(
        "#define MPC_WALLS_CLEARANCE_STEPS {:?}\n",
        crate::physics::walls::cell_clearance::CLEARANCE_STEPS
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strides_hold_the_sums_in_whole_sectors() {
        for rule in RULES {
            assert!(ext_stride(rule) >= rule.sums_len(), "{rule:?}");
            assert_eq!(ext_stride(rule) % 4, 0, "{rule:?}: 32-byte sectors");
        }
    }

    /// Every shape has its own code, and the header defines each.
    #[test]
    fn wall_codes_are_distinct_and_generated() {
        use crate::physics::walls::{CosineWalls, Pipe, PlanarPore, Slit, Sphere};
        let sphere = |fluid_inside| {
            Shape::Sphere(Sphere {
                centre: [5.0; 3],
                radius: 3.0,
                fluid_inside,
                along_z: false,
            })
        };
        let shapes = [
            sphere(true),
            sphere(false),
            Shape::Slit(Slit::centred(8.0, SlitNormal::Y, 10.0, [0.0; 2])),
            Shape::Slit(Slit::centred(8.0, SlitNormal::Z, 10.0, [0.0; 2])),
            Shape::Pipe(Pipe {
                centre: [5.0, 5.0],
                radius: 4.0,
                velocity: 0.0,
            }),
            Shape::PlanarPore(PlanarPore {
                xc: 5.0,
                yc: 5.0,
                half_length: 2.0,
                half_height: 2.0,
            }),
            Shape::Cosine(CosineWalls {
                yc: 5.0,
                half_height: 2.0,
                amplitude: 1.0,
                period: 10.0,
                expansion: true,
            }),
            Shape::Field(crate::physics::walls::field::DistanceField::new(
                [2, 2, 2],
                1.0,
                vec![1.0, -1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
            )),
        ];
        let mut codes: Vec<u32> = shapes.iter().map(wall_kind).collect();
        codes.push(WALLS_NONE);
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), WALL_CODES.len());
        let header = contract_header();
        for (name, code) in WALL_CODES {
            assert!(
                header.contains(&format!("#define {name} {code}u\n")),
                "{name}"
            );
        }
    }

    /// The constants are defined only here: no kernel source defines them by hand.
    #[test]
    fn kernel_sources_do_not_redefine_shared_constants() {
        use super::super::kernels as k;
        let md = [
            ("md_boundary.cuh", k::MD_BOUNDARY_CUH),
            ("md_items.cuh", k::MD_ITEMS_CUH),
            ("md.cu", k::MD_CU),
            ("md_forces.cu", k::MD_FORCES_CU),
            ("md_walls.cu", k::MD_WALLS_CU),
            ("md_observe.cu", k::MD_OBSERVE_CU),
            ("md_slabs.cu", k::MD_SLABS_CU),
        ];
        let mut names: Vec<&str> = vec!["MPC_RULE_SRD", "MPC_RULE_AT", "MPC_WALLS_"];
        names.extend(PURPOSES.map(|(n, _)| n));
        names.extend(FLUID_CONSTANTS.iter().chain(MD_CONSTANTS).map(|(n, _)| *n));
        names.extend(MD_SEND_CODES.iter().map(|(n, _)| *n));
        for (file, text) in k::FLUID_SOURCES.iter().chain(&md) {
            for name in &names {
                assert!(
                    !text.contains(&format!("#define {name}")),
                    "{file} defines {name}"
                );
            }
            assert!(!text.contains("int mpc_rule_len("), "{file}");
            assert!(!text.contains("int mpc_rule_stride("), "{file}");
        }
    }

    /// Each value of the rules' extended sums has its fixed-point kind in the header, and the
    /// padding the counts' scale of 1.
    #[test]
    fn rule_sum_kinds_are_generated_from_the_rules() {
        let header = contract_header();
        assert!(header.contains(
            "case MPC_RULE_AT_A: {\n            constexpr int kinds[15] = \
             {4, 4, 4, 5, 5, 5, 5, 5, 5, 6, 6, 6, 0, 0, 0};"
        ));
        assert!(header.contains("case MPC_RULE_SRD: {\n            return 3;"));
        assert_eq!(MPC_FIX_COUNT, 3);
    }

    /// The purposes keep their codes (part of every stream's counter: a change would change
    /// every draw) and the header defines every shared constant.
    #[test]
    fn purposes_and_layouts_are_generated() {
        let codes: Vec<u32> = PURPOSES.iter().map(|(_, p)| *p as u32).collect();
        assert_eq!(codes, [0, 1, 2, 8]);
        let header = contract_header();
        assert!(header.contains("#define MPC_PURPOSE_WALL_FILL 8u\n"));
        assert!(header.contains("#define MPC_RECORD_WORDS 5\n"));
        assert!(header.contains("#define MD_FLAG_COUNTS 13\n"));
        assert!(header.contains("#define MD_SEND_COLLIDED 2\n"));
        assert!(header.contains("#define MPC_WALLS_REACH_MARGIN 0.001\n"));
    }
}
