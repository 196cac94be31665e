//! The force field on the device: the pair style's tables (LJ pairs or DPD a_ij), the DPD
//! thermostat's parameters and the bond tables (partners in CSR form, styles), uploaded once.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr};

use super::drv;
use crate::error::Result;
use crate::md::bond::BondTopology;
use crate::md::forcefield::{BondStyle, ForceField, LjPair, MdThermostat, PairStyle};
use crate::md::system::System;

/// `MdPairLj` of kernels/md.cu.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct LjPairRepr {
    lj1: f64,
    lj2: f64,
    lj3: f64,
    lj4: f64,
    rc2: f64,
    shift: f64,
}

// SAFETY: `#[repr(C)]` plain-old-data of six f64 with no padding, the exact layout of
// `struct MdPairLj { double lj1, lj2, lj3, lj4, rc2, shift; }` in kernels/md.cu; every bit
// pattern is a valid value on both sides.
unsafe impl DeviceRepr for LjPairRepr {}

impl From<&LjPair> for LjPairRepr {
    fn from(p: &LjPair) -> Self {
        LjPairRepr {
            lj1: p.lj1,
            lj2: p.lj2,
            lj3: p.lj3,
            lj4: p.lj4,
            rc2: p.rc2,
            shift: p.shift,
        }
    }
}

/// Pair style code of the kernels: 0 none, 1 LJ, 2 DPD.
pub(super) const STYLE_LJ: i32 = 1;

/// Static description of the interactions, uploaded once.
pub(super) struct Params {
    pub style: i32,
    pub ntypes: u32,
    pub lj: CudaSlice<LjPairRepr>,
    pub dpd_a: CudaSlice<f64>,
    /// DPD pair style (gamma, cutoff, exponent).
    pub dpd: (f64, f64, f64),
    /// 1 when the DPD thermostat is on.
    pub th_on: i32,
    /// DPD thermostat (gamma, cutoff, exponent).
    pub th: (f64, f64, f64),
    pub bond_off: CudaSlice<u32>,
    pub bond_j: CudaSlice<u32>,
    /// Bond type + 1 of each partner entry (index 0 of the style arrays is a dummy).
    pub bond_kind: CudaSlice<u32>,
    pub bond_style: CudaSlice<i32>,
    pub bond_k: CudaSlice<f64>,
    pub bond_r0: CudaSlice<f64>,
}

/// The pair style on the host: (style code, types, LJ table, DPD a_ij, DPD (γ, rc, s)).
type PairTables = (i32, u32, Vec<LjPairRepr>, Vec<f64>, (f64, f64, f64));

fn pair_tables(pair: &PairStyle) -> PairTables {
    match pair {
        PairStyle::None => (
            0,
            1u32,
            vec![LjPairRepr::default()],
            vec![0.0],
            (0.0, 1.0, 1.0),
        ),
        PairStyle::Lj(t) => (
            STYLE_LJ,
            t.n as u32,
            t.pairs.iter().map(LjPairRepr::from).collect(),
            vec![0.0],
            (0.0, 1.0, 1.0),
        ),
        PairStyle::Dpd(d) => (
            2,
            d.n as u32,
            vec![LjPairRepr::default()],
            d.a.clone(),
            (d.gamma, d.cutoff, d.exponent),
        ),
    }
}

/// The bond tables on the host: partner index, bond type + 1 (both with a trailing dummy so
/// that empty lists upload), and per bond type + 1: style code (0 harmonic, 1 FENE), k, r0.
struct BondTables {
    offset: Vec<u32>,
    partner: Vec<u32>,
    kind: Vec<u32>,
    style: Vec<i32>,
    k: Vec<f64>,
    r0: Vec<f64>,
}

fn bond_tables(sys: &System, styles: &[BondStyle]) -> BondTables {
    let topo = BondTopology::new(sys);
    let mut t = BondTables {
        offset: topo.offset.iter().map(|&o| o as u32).collect(),
        partner: topo.partner.iter().map(|p| p.0).chain([0]).collect(),
        // index 0 of the style arrays is a dummy so that empty style lists upload; shift kinds
        kind: topo
            .partner
            .iter()
            .map(|p| p.1)
            .chain([0])
            .map(|x| x + 1)
            .collect(),
        style: vec![0],
        k: vec![0.0],
        r0: vec![0.0],
    };
    for b in styles {
        let (st, kk, r0) = match *b {
            BondStyle::Harmonic { k, r0 } => (0, k, r0),
            BondStyle::Fene { k, r0 } => (1, k, r0),
        };
        t.style.push(st);
        t.k.push(kk);
        t.r0.push(r0);
    }
    t
}

impl Params {
    pub(super) fn upload(
        s: &Arc<CudaStream>,
        sys: &System,
        ff: &ForceField,
        thermostat: MdThermostat,
    ) -> Result<Params> {
        let (style, ntypes, lj, dpd_a, dpd) = pair_tables(&ff.pair);
        let (th_on, th) = match thermostat {
            MdThermostat::Dpd {
                gamma,
                cutoff,
                exponent,
            } => (1, (gamma, cutoff, exponent)),
            _ => (0, (0.0, 1.0, 1.0)),
        };
        let b = bond_tables(sys, &ff.bond_styles);
        Ok(Params {
            style,
            ntypes,
            lj: s.clone_htod(&lj).map_err(drv("upload"))?,
            dpd_a: s.clone_htod(&dpd_a).map_err(drv("upload"))?,
            dpd,
            th_on,
            th,
            bond_off: s.clone_htod(&b.offset).map_err(drv("upload"))?,
            bond_j: s.clone_htod(&b.partner).map_err(drv("upload"))?,
            bond_kind: s.clone_htod(&b.kind).map_err(drv("upload"))?,
            bond_style: s.clone_htod(&b.style).map_err(drv("upload"))?,
            bond_k: s.clone_htod(&b.k).map_err(drv("upload"))?,
            bond_r0: s.clone_htod(&b.r0).map_err(drv("upload"))?,
        })
    }
}

impl crate::backend::cuda::launch::CudaType for LjPairRepr {
    const NAME: &'static str = "MdPairLj";
}
