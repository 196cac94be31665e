//! The GPU MD engine decomposed over the fluid's y slabs ([`SlabMd`]): one [`GpuMd`] per slab,
//! on the slab's GPU, integrating the beads whose y lies in the slab's cell layers, so each GPU
//! does its share of the MD and collides, from its own memory, the beads in its own cells.
//!
//! Every slab keeps all beads at their global index (the order of the one-slab engine), but only
//! those in its *band* (its layers ± the halo) are current there. After each drift the owners
//! send the beads that are, or were, in a neighbour's band (`exchange`), so a stale copy always
//! lies outside the band, further than the halo from anything the slab integrates. The halo
//! covers the list radius plus half a skin (lists are built only for beads within skin/2 of the
//! slab, the only ones that can become its own before the next build), half a cell (the grid
//! shift of the collision) and the longest FENE bond; a longer harmonic bond is refused with an
//! error naming it.
//!
//! Because each bead's list holds the same neighbours in the same order as in the one-slab
//! engine, forces and trajectories equal the one-slab engine's bit for bit; only the sums of
//! energies and virials over slabs round differently. Beads migrate by the same exchange; bonds
//! across slab faces, chains longer than a slab, empty slabs and the sheared y boundary need
//! nothing special (positions and image counts travel with the bead).
//!
//! Observables, checkpoints and the system gather every bead into slab 0 first (only on the
//! steps that write them), then use the one-GPU reductions there.
//!
//! Over MPI ranks each rank holds the slabs of its block of the box (the fluid's), and links
//! to other ranks' slabs cross through host memory and the run's transport (`remote`); the
//! list rebuild is agreed over the ranks, energies are summed over them, and a gather fills
//! the first slab of every rank, so the engine follows the one-process engine bead for bead.

mod drive;
mod exchange;
mod remote;

use cudarc::driver::{CudaEvent, CudaSlice};

#[cfg(doc)]
use super::MD_PHASE_NAMES;
use super::{drv, GpuMd, SlabRole};
use crate::backend::{SlabPlace, SlabSolutes};
use crate::error::{MpcError, Result};
use crate::md::bond::BondStyle;
use crate::md::engine::{ForceReport, MdSettings, MdState};
use crate::md::forcefield::{ForceField, MdThermostat};
use crate::md::observe::{ChainObserver, ChainSample};
use crate::md::rheology::{pressure_from, Conformation};
use crate::md::system::System;
use crate::md::walls::WallPotential;
use crate::solvent::Solvent;
use exchange::{Link, SlabSend};
use remote::RankLinks;

/// What [`SlabMd::host_seconds`] times, always (two clock reads each): the host's wall time
/// in the MD steps, in their drift exchanges (queueing and waiting), blocked on the flags'
/// read in every exchange (the steps' and the collisions'), and in the list builds.
pub const MD_HOST_NAMES: [&str; 4] = [
    "MD steps",
    "drift exchanges",
    "blocked on flags (all exchanges)",
    "list builds",
];
const HOST_STEPS: usize = 0;
const HOST_DRIFT_EXCHANGE: usize = 1;
const HOST_FLAGS_WAIT: usize = 2;
const HOST_BUILDS: usize = 3;

/// Rounding slack added to the halo and the list band.
const SLACK: f64 = 1e-6;

/// How far outside its layers a bead may lie in a slab's collision cells: the grid shift
/// (at most half a cell) with half a cell to spare. A slab lists the beads within this and
/// skin/2 of its layers at each list build (they move less than skin/2 in y before the
/// next): its collision and the collision's exchange run over them alone. A stale copy
/// listed is harmless: it lies outside the band, so outside the slab's cells.
const COLLISION_REACH: f64 = 1.0;

/// The MD engine cut into the fluid's y slabs, one [`GpuMd`] per slab.
pub struct SlabMd {
    /// This process's slabs (the box's `first..first + slabs.len()`).
    slabs: Vec<GpuMd>,
    /// Links to other MPI ranks' slabs (None in one process).
    remote: Option<RankLinks>,
    /// The box's index of this process's first slab, and the box's slab count.
    first: usize,
    total: usize,
    /// The links between slabs whose bands overlap another's layers.
    links: Vec<Link>,
    /// Every other slab to slab 0 (observables, checkpoints).
    gather: Vec<Link>,
    /// Each slab's velocities before the collision (to send only what its collision changed).
    vel_before: Vec<CudaSlice<f64>>,
    /// Each slab's event recorded after an exchange's packs: its deliveries wait for it alone.
    packed: Vec<CudaEvent>,
    /// An exchange failed before zeroing the record counts: the next zeroes them first.
    counts_dirty: bool,
    halo: f64,
    report: ForceReport,
    /// Slab 0 holds every bead current (gathered since the last change).
    gathered: bool,
    /// The last force evaluation skipped energies.
    energies_stale: bool,
    /// Every link's receiver reads the records where the sender packed them.
    pulls: bool,
    /// The step's first halves packed the drift's records (`fuse_drift_sends`).
    drift_packed: bool,
    /// The host's seconds ([`MD_HOST_NAMES`]) since profiling was last switched.
    host_seconds: [f64; 4],
    /// Benchmarks: seconds per phase of the MD step ([`MD_PHASE_NAMES`]), each phase waited
    /// for on every GPU (which adds the waits it measures); None when not profiling.
    phase_seconds: Option<[f64; 5]>,
}

fn add_reports(parts: impl Iterator<Item = ForceReport>) -> ForceReport {
    let mut t = ForceReport::default();
    for r in parts {
        t.pair_energy += r.pair_energy;
        t.bond_energy += r.bond_energy;
        t.virial += r.virial;
        t.wall_energy += r.wall_energy;
        for k in 0..6 {
            t.virial_tensor[k] += r.virial_tensor[k];
        }
    }
    t
}

/// The halo in y: list radius + skin/2, half a cell of grid shift, the longest FENE bond.
fn halo_of(ff: &ForceField, thermostat: MdThermostat, settings: &MdSettings) -> f64 {
    let r_list = ff.cutoff_with(thermostat) + settings.skin;
    let fene = ff
        .bond_styles
        .iter()
        .map(|b| match b {
            BondStyle::Fene { r0, .. } => *r0,
            BondStyle::Harmonic { .. } => 0.0,
        })
        .fold(0.0, f64::max);
    (r_list + 0.5 * settings.skin).max(0.5).max(fene) + SLACK
}

impl SlabMd {
    /// The engine over `places` (the fluid's slabs, [`Solvent::slab_places`]: over MPI ranks
    /// every slab of the box, of which this process opens its own) for `sys`, with `walls`;
    /// validated as [`GpuMd::new`].
    pub fn new(
        sys: System,
        ff: ForceField,
        thermostat: MdThermostat,
        settings: MdSettings,
        walls: Option<WallPotential>,
        places: &[SlabPlace],
    ) -> Result<SlabMd> {
        let ly = sys.box_len[1];
        // between walls the MD box is padded across the channel: the last slab takes the pad
        let cut_at = places.last().map_or(0, |p| p.layers[1]) as f64;
        if places.len() < 2 || cut_at > ly + 1e-9 || places[0].layers[0] != 0 {
            return Err(MpcError::Device(format!(
                "the decomposed MD engine needs the fluid's slabs (at least two) cutting the MD \
                 box's y length {ly} from 0; got {places:?}; fix: run the MD box of the fluid's \
                 size"
            )));
        }
        let transport = crate::ranks::transport();
        let me = transport.rank();
        let first = places.partition_point(|p| p.rank < me);
        let mine = places[first..].partition_point(|p| p.rank == me);
        if mine == 0 || places.iter().filter(|p| p.rank == me).count() != mine {
            return Err(MpcError::Device(format!(
                "the decomposed MD engine: rank {me} holds no contiguous block of the slabs \
                 {places:?} (please report it)"
            )));
        }
        let halo = halo_of(&ff, thermostat, &settings);
        let skin = settings.skin;
        GpuMd::validate(&sys, &ff, thermostat, &settings)?;
        let owns: Vec<[f64; 2]> = places
            .iter()
            .enumerate()
            .map(|(k, p)| {
                let last = k + 1 == places.len();
                [
                    p.layers[0] as f64,
                    if last { ly } else { p.layers[1] as f64 },
                ]
            })
            .collect();
        let mut slabs = Vec::with_capacity(mine);
        for (p, &own) in places.iter().zip(&owns).skip(first).take(mine) {
            let role = SlabRole {
                own,
                candidates: [own[0] - 0.5 * skin - SLACK, own[1] + 0.5 * skin + SLACK],
                bond_reach: halo - SLACK,
                band: [own[0] - halo, own[1] + halo],
                colliders: [
                    own[0] - COLLISION_REACH - 0.5 * skin - SLACK,
                    own[1] + COLLISION_REACH + 0.5 * skin + SLACK,
                ],
            };
            let (s, f, st) = (sys.clone(), ff.clone(), settings.clone());
            slabs.push(GpuMd::open_validated(
                s, f, thermostat, st, p.ordinal, role,
            )?);
        }
        let mut topo = Link::all(&slabs, &owns, first, halo, ly)?;
        let pulls = exchange::choose_pull(&mut topo.links, &slabs)?
            & exchange::choose_pull(&mut topo.gather, &slabs)?;
        let slab_rank = places.iter().map(|p| p.rank).collect();
        let remote = RankLinks::new(&slabs, &mut topo, slab_rank, first, transport)?;
        let (links, gather) = (topo.links, topo.gather);
        let vel_before = slabs
            .iter()
            .map(|g| super::setup::zeros_f64(&g.stream, 3 * g.n))
            .collect::<Result<Vec<_>>>()?;
        let packed = slabs
            .iter()
            .map(|g| g.stream.context().new_event(None).map_err(drv("event")))
            .collect::<Result<Vec<_>>>()?;
        let mut md = SlabMd {
            slabs,
            remote,
            first,
            total: places.len(),
            links,
            gather,
            vel_before,
            packed,
            counts_dirty: false,
            halo,
            pulls,
            drift_packed: false,
            host_seconds: [0.0; 4],
            report: ForceReport::default(),
            gathered: true,
            energies_stale: false,
            phase_seconds: None,
        };
        md.set_walls(walls)?;
        Ok(md)
    }

    /// Slabs and their GPUs, e.g. "cuda:0,0,1,1 (4 y slabs)".
    pub fn describe(&self) -> String {
        let ids: Vec<String> = self.slabs.iter().map(|g| g.ordinal().to_string()).collect();
        let mine = match self.remote {
            None => String::new(),
            Some(_) => format!(
                "slabs {}..{} of this MPI rank of {}, ",
                self.first,
                self.first + self.slabs.len(),
                crate::ranks::size()
            ),
        };
        let how = if self.pulls { "pulled" } else { "copied" };
        format!(
            "cuda:{} ({} y slabs, {mine}{}; halo {:.3}, exchange {how})",
            ids.join(","),
            self.total,
            self.slabs[0].describe(),
            self.halo
        )
    }

    /// Copy every exchange's records to the receiver before unpacking them there (as
    /// `MPCBOX_MD_EXCHANGE=copy`), where they would be pulled: both ways in one test.
    pub fn copy_exchanges(&mut self) {
        exchange::copy_only(&mut self.links);
        exchange::copy_only(&mut self.gather);
        self.pulls = false;
    }

    /// Wait for every slab's GPU work.
    pub fn synchronize(&self) -> Result<()> {
        for g in &self.slabs {
            g.synchronize()?;
        }
        Ok(())
    }

    /// The box's slabs (over MPI ranks, all ranks' together).
    pub fn slab_count(&self) -> usize {
        self.total
    }

    /// The GPU of slab 0.
    pub fn ordinal(&self) -> usize {
        self.slabs[0].ordinal()
    }

    pub fn settings(&self) -> &MdSettings {
        self.slabs[0].settings()
    }

    pub fn len(&self) -> usize {
        self.slabs[0].len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn step_count(&self) -> u64 {
        self.slabs[0].step_count()
    }

    pub fn list_builds(&self) -> u64 {
        self.slabs[0].list_builds()
    }

    pub fn uses_verlet_list(&self) -> bool {
        self.slabs[0].uses_verlet_list()
    }

    /// Energies and virials summed over the slabs (each sums the beads it owns).
    pub fn report(&self) -> ForceReport {
        self.report
    }

    /// The slabs' energies and virials summed (over the ranks too).
    fn sum_reports(&mut self) -> Result<()> {
        let mut r = add_reports(self.slabs.iter().map(|g| g.report()));
        if let Some(remote) = &self.remote {
            let mut x = MdState::report_words(&r);
            remote.sum(&mut x)?;
            r = MdState::report_from_words(&x);
        }
        self.report = r;
        Ok(())
    }

    /// Put the beads between walls (or take them away) and recompute the forces.
    pub fn set_walls(&mut self, walls: Option<WallPotential>) -> Result<()> {
        for g in &mut self.slabs {
            g.set_walls(walls.clone())?;
        }
        self.sum_reports()?;
        Ok(())
    }

    /// `n` MD steps; energies and virials at the last one when `energies`.
    pub fn advance(&mut self, n: u64, energies: bool) -> Result<()> {
        let mut run = Ok(());
        for k in 0..n {
            // within the run each step's closing kick is folded into the next one's first half
            run = self.step_all(energies && k + 1 == n, k + 1 < n);
            if run.is_err() {
                break;
            }
        }
        for g in &mut self.slabs {
            g.settle_kick()?;
        }
        run?;
        self.energies_stale = n > 0 && !energies;
        Ok(())
    }

    /// Time each phase of the step from now on (`on`), or stop; the times start from zero.
    pub fn set_profiling(&mut self, on: bool) {
        self.phase_seconds = on.then_some([0.0; 5]);
        self.host_seconds = [0.0; 4];
    }

    /// The host's seconds per [`MD_HOST_NAMES`] since profiling was last switched (on or off):
    /// where the host spends an MD step when nothing else waits.
    pub fn host_seconds(&self) -> [f64; 4] {
        self.host_seconds
    }

    /// The seconds per phase ([`MD_PHASE_NAMES`]) since profiling was switched on.
    pub fn phase_seconds(&self) -> Option<[f64; 5]> {
        self.phase_seconds
    }

    /// Profiling: wait for every GPU and add the time since `t` to `phase`.
    fn mark(&mut self, phase: usize, t: &mut std::time::Instant) -> Result<()> {
        if self.phase_seconds.is_some() {
            self.synchronize()?;
            if let Some(p) = self.phase_seconds.as_mut() {
                p[phase] += t.elapsed().as_secs_f64();
            }
            *t = std::time::Instant::now();
        }
        Ok(())
    }

    /// One step of every slab: drift, exchange, (re)build where any slab asks, forces, kick
    /// (owed to the next step's first half when `fold`).
    fn step_all(&mut self, energy: bool, fold: bool) -> Result<()> {
        let start = std::time::Instant::now();
        let r = self.step_all_timed(energy, fold);
        self.host_seconds[HOST_STEPS] += start.elapsed().as_secs_f64();
        r
    }

    fn step_all_timed(&mut self, energy: bool, fold: bool) -> Result<()> {
        self.gathered = false;
        let mut t = std::time::Instant::now();
        self.fuse_drift_sends()?;
        for g in &mut self.slabs {
            g.launch_first_half()?;
            g.host_current = false;
            g.step += 1;
        }
        self.mark(0, &mut t)?;
        let host = std::time::Instant::now();
        let rebuild = self.exchange_after_drift()?;
        self.host_seconds[HOST_DRIFT_EXCHANGE] += host.elapsed().as_secs_f64();
        self.mark(1, &mut t)?;
        if rebuild {
            let host = std::time::Instant::now();
            self.build_all()?;
            self.host_seconds[HOST_BUILDS] += host.elapsed().as_secs_f64();
            self.mark(2, &mut t)?;
        }
        for g in &mut self.slabs {
            g.queue_forces(energy)?;
        }
        self.mark(3, &mut t)?;
        for g in &mut self.slabs {
            g.close_step(fold)?;
        }
        self.mark(4, &mut t)?;
        if energy {
            // every slab's energy reduction queued before any is read
            for g in &mut self.slabs {
                g.take_energy_report()?;
            }
            self.sum_reports()?;
        }
        Ok(())
    }

    /// The MPC collision of the beads with the fluid: each slab's beads near and in its cells
    /// made current there, the fluid steps with one copy per slab, and what each collision
    /// changed goes to the slabs whose bands hold it.
    pub fn collide(&mut self, solvent: &mut Solvent) -> Result<()> {
        self.gathered = false;
        self.exchange(SlabSend::Owned)?;
        for (g, before) in self.slabs.iter_mut().zip(&mut self.vel_before) {
            exchange::snapshot_collider_velocities(g, before)?;
        }
        let solutes: Vec<SlabSolutes> = self.slabs.iter_mut().map(|g| g.slab_solutes()).collect();
        solvent.step_with_slab_solutes(&solutes)?;
        self.exchange(SlabSend::Collided)?;
        for g in &mut self.slabs {
            g.velocities_changed()?;
        }
        if self.slabs[0]
            .ff
            .velocity_dependent(self.slabs[0].thermostat)
        {
            self.sum_reports()?;
        }
        Ok(())
    }

    /// Every bead current in slab 0 (of every rank; once per change).
    fn gather(&mut self) -> Result<&mut GpuMd> {
        if !self.gathered {
            self.exchange_gather()?;
            self.slabs[0].host_current = false;
            self.gathered = true;
        }
        Ok(&mut self.slabs[0])
    }

    /// The solutes' (pressure tensor, its kinetic part): the virial summed over the slabs, the
    /// kinetic tensor in slab 0 when it holds every bead already (a sample gathered them for
    /// the conformation), else summed over the slabs (of every rank), each over the beads it
    /// owns, with no gather.
    pub fn solute_pressure(&mut self, shear_rate: f64) -> Result<([f64; 6], [f64; 6])> {
        let virial = self.report.virial_tensor;
        let mut k = [0.0; 6];
        if self.gathered {
            k = self.slabs[0].kinetic_tensor_of_all(shear_rate)?;
        } else {
            for g in &mut self.slabs {
                for (a, x) in k.iter_mut().zip(g.kinetic_tensor(shear_rate)?) {
                    *a += x;
                }
            }
            if let Some(remote) = &self.remote {
                remote.sum(&mut k)?;
            }
        }
        let sys = &self.slabs[0].sys;
        Ok((
            pressure_from(sys, k, virial),
            pressure_from(sys, k, [0.0; 6]),
        ))
    }

    /// The chains' conformation: in slab 0 after a gather (chains cross the slabs; per-slab
    /// partial sums over the owned beads were measured slower than the gather and the one
    /// reduction).
    pub fn conformation(&mut self) -> Result<Conformation> {
        self.gather()?.conformation()
    }

    /// The md.csv chain columns, reduced on slab 0 once it holds every bead.
    pub fn chain_sample(&mut self, observer: &ChainObserver) -> Result<ChainSample> {
        self.gather()?.chain_sample(observer)
    }

    pub fn system(&mut self) -> Result<&System> {
        self.gather()?.system()
    }

    pub fn kinetic_energy(&mut self) -> Result<f64> {
        self.gather()?.kinetic_energy()
    }

    pub fn momentum(&mut self) -> Result<[f64; 3]> {
        self.gather()?.momentum()
    }

    /// Both in one reduction on slab 0.
    pub fn kinetic_energy_and_momentum(&mut self) -> Result<(f64, [f64; 3])> {
        self.gather()?.kinetic_energy_and_momentum()
    }

    /// Energies and virials of the current configuration where the last steps skipped them.
    pub fn refresh_energies(&mut self) -> Result<()> {
        if self.energies_stale {
            for g in &mut self.slabs {
                g.compute_forces()?;
            }
            self.sum_reports()?;
            self.energies_stale = false;
        }
        Ok(())
    }

    /// The state for a checkpoint (gathered in slab 0), with the summed energy report.
    pub fn state(&mut self) -> Result<MdState> {
        let report = MdState::report_words(&self.report);
        let mut st = self.gather()?.state()?;
        st.report = report;
        Ok(st)
    }

    /// Continue from `st` on every slab.
    pub fn restore(&mut self, st: &MdState) -> Result<()> {
        for g in &mut self.slabs {
            g.restore(st)?;
        }
        self.report = st.report();
        self.gathered = true;
        Ok(())
    }
}
