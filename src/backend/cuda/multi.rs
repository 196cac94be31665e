//! Several GPUs of one host: the box is cut along y into one slab of whole cell layers per GPU
//! (talk 003, second half), driven by one host thread.
//!
//! Each GPU runs the single-GPU kernels on its own layers ([`CudaBackend`] in slab mode: its
//! cell buffer holds only its layers, its draws are keyed by the global cell index). A particle
//! always sits on the GPU that owns its cell on the current (shifted) grid, so cell sums never
//! need to be combined across GPUs and both sides of a slab border rotate with one set of
//! numbers. The price is migration every step: the pass-1 kernel packs each particle whose new
//! cell lies outside the slab (40 B: velocity, position, global id) into a send buffer for the
//! nearer neighbour and frees its slot; the buffers go to the neighbours by copy-engine
//! transfers (peer copies, or through pinned host memory: `MPCBOX_MULTI_TRANSFER=peer|host`),
//! and `mpc_immigrate` unpacks them into free slots (or appends), bins them with the same plan
//! and adds them to the sums before the cell pass. No kernel reads another GPU's memory.
//!
//! The y boundary (Lees-Edwards under shear) needs nothing special: a particle's crossing is
//! applied by the stream kernel wherever it runs, and the wrapped particle then migrates from
//! the top slab to the bottom one like any other.
//!
//! Solutes go to every GPU; each bins and collides those in its own cells and writes zeros for
//! the others, and the host adds the GPUs' outputs (exact: one term is non-zero).
//!
//! Free slots are reused by arrivals and removed by the reorder (they sort last), which also
//! carries the ids along; a download puts every particle back at its global id.

use std::time::Instant;

use cudarc::driver::{CudaEvent, DevicePtr, PinnedHostSlice};

use super::*;
use crate::backend::DeviceSolutes;

/// Bytes of one migrating particle (`MPC_RECORD_WORDS` u64 in `kernels/migrate.cuh`).
const RECORD_WORDS: usize = 5;

/// Staged transfers move in chunks of this many u64 (2 MiB), pipelining the two PCIe legs.
const STAGING_CHUNK_WORDS: usize = 1 << 18;

/// How packed particles cross between GPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transfer {
    /// `cuMemcpyPeerAsync` on the sender's stream (peer access enabled where the GPUs allow).
    Peer,
    /// Device → pinned host on the sender's stream, host → device on the receiver's.
    Host,
}

impl Transfer {
    /// `MPCBOX_MULTI_TRANSFER=peer|host`; unset: peer copies where every pair of
    /// neighbouring GPUs has peer access (with the pools opened to the peers they run at
    /// NVLink speed), host staging otherwise.
    pub fn from_env_or(peer_possible: bool) -> Transfer {
        match std::env::var("MPCBOX_MULTI_TRANSFER").as_deref() {
            Ok("peer") => Transfer::Peer,
            Ok("host") => Transfer::Host,
            _ if peer_possible => Transfer::Peer,
            _ => Transfer::Host,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Transfer::Peer => "peer copies",
            Transfer::Host => "pinned host staging",
        }
    }
}

/// The slab-mode state of one GPU's [`CudaBackend`].
pub(super) struct Slab {
    /// Global index of this slab's first cell (its first layer × cells per layer).
    pub(super) cell_offset: u32,
    /// Particle slots allocated (live particles + free slots + room for arrivals).
    capacity: usize,
    /// Particles one send buffer holds.
    send_capacity: usize,
    /// Global id of the particle in each slot.
    pub(super) ids: CudaSlice<u32>,
    /// Stack of free slots (their cell word is `MPC_DEAD`).
    holes: CudaSlice<u32>,
    /// Packed emigrants to the lower / upper neighbour.
    send: [CudaSlice<u64>; 2],
    /// Arrivals from the lower / upper neighbour.
    recv: [CudaSlice<u64>; 2],
    /// [sent down, sent up, free-slot stack top, overflow flags] on the device...
    counters: CudaSlice<u32>,
    /// ... their copy after pass 1 (and after the step) ...
    counters_host: PinnedHostSlice<u32>,
    /// ... and their initial values, sent before pass 1.
    counters_init: PinnedHostSlice<u32>,
    /// The step's report, copied after the step.
    report_host: PinnedHostSlice<f64>,
    /// Copy-engine streams for outgoing and incoming particles, so that the GPUs' transfers
    /// run in parallel and never wait behind another GPU's kernels.
    copy_out: Arc<CudaStream>,
    copy_in: Arc<CudaStream>,
    /// Free slots below `n` (the stack height).
    pub(super) free_slots: usize,
    args: MigrationArgs,
    /// Host staging of the two send buffers (`Transfer::Host`), portable pinned memory.
    staging: Option<[PinnedHostSlice<u64>; 2]>,
}

impl CudaBackend {
    /// Before pass 1 in slab mode: reset the migration counters (the free-slot stack keeps its
    /// height). Returns the kernels' migration arguments (zero on one GPU).
    pub(super) fn begin_migration(&mut self) -> Result<MigrationArgs> {
        let Some(sl) = self.slab.as_mut() else {
            return Ok(MigrationArgs::default());
        };
        // pinned, so the copy is queued without blocking; the previous one finished (the
        // host read the last step's counters after it)
        let init = sl.counters_init.as_mut_slice().map_err(drv("pinned"))?;
        init.copy_from_slice(&[0, 0, sl.free_slots as u32, 0]);
        self.dev
            .stream
            .memcpy_htod(&sl.counters_init, &mut sl.counters)
            .map_err(drv("migration counters"))?;
        Ok(sl.args)
    }

    /// After pass 1 in slab mode: queue the counters' copy to the host.
    pub(super) fn end_migration(&mut self) -> Result<()> {
        if let Some(sl) = self.slab.as_mut() {
            self.dev
                .stream
                .memcpy_dtoh(&sl.counters, &mut sl.counters_host)
                .map_err(drv("migration counters"))?;
        }
        Ok(())
    }

    /// Live particles (slots minus free slots).
    pub(super) fn live(&self) -> usize {
        self.n - self.slab.as_ref().map_or(0, |s| s.free_slots)
    }

    fn slab(&self) -> &Slab {
        self.slab.as_ref().expect("slab mode")
    }
}

/// The multi-GPU backend: one [`CudaBackend`] in slab mode per GPU.
pub struct MultiCudaBackend {
    pub(super) slabs: Vec<CudaBackend>,
    /// Every GPU may read and write the first GPU's memory (solutes live there).
    pub(super) home_reachable: bool,
    /// First layer of each slab, then Ly.
    bounds: Vec<u32>,
    phys: Physics,
    n_total: usize,
    transfer: Transfer,
    /// Solute velocities from one GPU (host scratch).
    solute_scratch: Vec<f64>,
    profiling: bool,
    /// Seconds in [pass 1, exchange (counts, transfers, unpack), cells + collide + reorder].
    phase_seconds: [f64; 3],
    /// Particles sent between GPUs since profiling was switched on.
    migrated: u64,
}

/// The solutes of one multi-GPU step.
enum StepSolutes<'a, 'b> {
    None,
    Host(&'a mut SoluteBatch<'b>),
    Device(DeviceSolutes),
}

/// Phases timed by [`MultiCudaBackend::set_profiling`].
pub const MULTI_PHASE_NAMES: [&str; 3] = ["pass 1", "exchange", "cells+collide+reorder"];

/// The first layer of each of `g` slabs of `ly` layers (as even as possible), then `ly`.
pub fn slab_bounds(ly: u32, g: usize) -> Vec<u32> {
    (0..=g)
        .map(|k| (k as u64 * ly as u64 / g as u64) as u32)
        .collect()
}

/// The fewest layers a slab may have: a particle must never cross a whole neighbour slab in
/// one step (streaming by up to 12 thermal speeds, body force, and one cell of grid shift).
pub fn min_slab_layers(phys: &Physics) -> u32 {
    let sigma = (phys.kt / phys.mass).sqrt();
    let reach = 12.0 * sigma * phys.h + 0.5 * phys.acceleration[1].abs() * phys.h * phys.h;
    (reach.ceil() as u32 + 2).max(3)
}

/// The slab that owns global layer `iy`.
fn owner(bounds: &[u32], iy: u32) -> usize {
    bounds.partition_point(|&b| b <= iy) - 1
}

impl MultiCudaBackend {
    /// Open one slab per GPU in `ordinals` holding `state` (the config's initial state if
    /// None, generated on the host so that any GPU count starts from the same particles).
    pub fn open(
        cfg: &Config,
        phys: &Physics,
        state: Option<&FluidState>,
        ordinals: &[usize],
    ) -> Result<MultiCudaBackend> {
        let g = ordinals.len();
        if g < 2 {
            return Err(MpcError::Device(
                "the multi-GPU backend needs at least two GPUs".into(),
            ));
        }
        let ly = phys.cells[1];
        let need = min_slab_layers(phys);
        if ly / (g as u32) < need {
            return Err(MpcError::Device(format!(
                "device: {g} GPUs give slabs of {} cell layers in y, fewer than the {need} a \
                 particle may cross in one step; fix: use at most {} GPUs for cells[1] = {ly}, \
                 or a taller box",
                ly / g as u32,
                (ly / need).max(1)
            )));
        }
        let method = CellSumMethod::from_env();
        if method == CellSumMethod::List {
            return Err(MpcError::Device(
                "MPCBOX_CUDA_METHOD=list runs on one GPU only; fix: unset it or use fused".into(),
            ));
        }
        let owned;
        let state = match state {
            Some(s) => s,
            None => {
                owned = FluidState::initial(cfg);
                &owned
            }
        };
        state
            .validate(phys)
            .map_err(|e| MpcError::Device(format!("fluid state: {e}")))?;
        let bounds = slab_bounds(ly, g);
        let parts = split_by_slab(state, &bounds);
        let layer = (phys.cells[0] * phys.cells[2]) as usize;
        let density = state.len() as f64 / phys.n_cells().max(1) as f64;
        let layer_particles = (density * layer as f64).ceil() as usize;
        let devices = ordinals
            .iter()
            .map(|&ord| CudaDevice::open(ord))
            .collect::<Result<Vec<_>>>()?;
        let neighbours_peer = (0..g).all(|k| {
            let up = (k + 1) % g;
            super::transfer::can_access_peer(&devices[k], &devices[up])
                && super::transfer::can_access_peer(&devices[up], &devices[k])
        });
        let transfer = Transfer::from_env_or(neighbours_peer);
        let mut slabs = Vec::with_capacity(g);
        for (k, dev) in devices.into_iter().enumerate() {
            let (sub, ids) = &parts[k];
            let layers = (bounds[k + 1] - bounds[k]) as usize;
            let ncells = layers * layer;
            let live = sub.len();
            let capacity = live + (live / 10).max(2 * layer_particles) + 1024;
            let send_capacity = 5 * layer_particles / 2 + 1024;
            let (free, _) = dev.free_memory()?;
            let extra = 8 * capacity as u64 + 4 * (send_capacity * RECORD_WORDS * 8) as u64;
            let needed = device_bytes(capacity as u64, ncells as u64, method) + extra;
            if needed + RESERVE_BYTES > free {
                return Err(MpcError::OutOfMemory {
                    device: dev.describe(),
                    needed_bytes: needed + RESERVE_BYTES,
                    available_bytes: free,
                    fix: format!(
                        "slab {k} ({layers} layers, {live} particles) does not fit; use more \
                         GPUs, fewer cells or particles per cell"
                    ),
                });
            }
            let mut be = CudaBackend::allocate_cells(dev, phys.clone(), capacity, ncells, method)?;
            be.attach_slab(
                (bounds[k] as usize * layer) as u32,
                capacity,
                send_capacity,
                transfer,
            )?;
            be.upload_slab(sub, ids)?;
            slabs.push(be);
        }
        enable_peer_access(&slabs)?;
        let devices: Vec<&CudaDevice> = slabs.iter().map(|s| &s.dev).collect();
        let granted = super::transfer::grant_pool_access(&devices)?;
        tracing::debug!("memory pools opened to peers: {granted:?}");
        let home = &slabs[0].dev;
        let home_reachable = slabs[1..]
            .iter()
            .all(|s| super::transfer::can_access_peer(&s.dev, home));
        Ok(MultiCudaBackend {
            slabs,
            home_reachable,
            bounds,
            phys: phys.clone(),
            n_total: state.len(),
            transfer,
            solute_scratch: Vec::new(),
            profiling: false,
            phase_seconds: [0.0; 3],
            migrated: 0,
        })
    }

    /// Every buffer another GPU touches, as (device address, owning GPU, touching GPU): the
    /// receive buffers (written by the neighbours' peer copies) and the home GPU's solute
    /// buffers once made (read and written by every GPU's kernels). Each must be open to that
    /// GPU ([`super::transfer::peer_can_access`]).
    pub fn peer_touched_buffers(&self) -> Vec<(u64, usize, usize)> {
        let g = self.slabs.len();
        let mut out = Vec::new();
        for k in 0..g {
            let stream = &self.slabs[k].dev.stream;
            let owner = self.slabs[k].dev.ordinal;
            for side in 0..2 {
                let sender = self.slabs[self.neighbour(k, side)].dev.ordinal;
                if sender != owner {
                    let ptr = self.slab_of(k).recv[side].device_ptr(stream).0;
                    out.push((ptr, owner, sender));
                }
            }
        }
        if let Some(sb) = self.slabs[0].solutes.as_ref() {
            let stream = &self.slabs[0].dev.stream;
            let owner = self.slabs[0].dev.ordinal;
            for s in &self.slabs[1..] {
                for b in [&sb.pos, &sb.vel, &sb.mass] {
                    out.push((b.device_ptr(stream).0, owner, s.dev.ordinal));
                }
            }
        }
        out
    }

    pub fn gpus(&self) -> usize {
        self.slabs.len()
    }

    pub fn transfer(&self) -> Transfer {
        self.transfer
    }

    /// Layers of each slab.
    pub fn slab_layers(&self) -> Vec<u32> {
        self.bounds.windows(2).map(|w| w[1] - w[0]).collect()
    }

    /// Live particles on each GPU.
    pub fn slab_particles(&self) -> Vec<usize> {
        self.slabs.iter().map(|s| s.live()).collect()
    }

    /// Time every phase (synchronising all GPUs after each; slower) or not; resets the timers.
    pub fn set_profiling(&mut self, on: bool) {
        self.profiling = on;
        self.phase_seconds = [0.0; 3];
        self.migrated = 0;
    }

    /// Seconds per phase (see [`MULTI_PHASE_NAMES`]) and particles migrated since profiling
    /// was switched on.
    pub fn phase_seconds(&self) -> ([f64; 3], u64) {
        (self.phase_seconds, self.migrated)
    }

    fn synchronize_all(&self) -> Result<()> {
        for s in &self.slabs {
            s.synchronize()?;
        }
        Ok(())
    }

    fn mark(&mut self, phase: usize, t: &mut Instant) -> Result<()> {
        if self.profiling {
            self.synchronize_all()?;
            self.phase_seconds[phase] += t.elapsed().as_secs_f64();
            *t = Instant::now();
        }
        Ok(())
    }

    /// The slab below (dir 0) or above (dir 1) slab k, periodically.
    fn neighbour(&self, k: usize, dir: usize) -> usize {
        let g = self.slabs.len();
        if dir == 0 {
            (k + g - 1) % g
        } else {
            (k + 1) % g
        }
    }

    /// Send each slab's packed emigrants to its neighbours on the copy streams and make each
    /// main stream wait for its arrivals (and for its own outgoing copies, whose buffers the
    /// next pass 1 overwrites). All GPUs' main streams are idle here (pass 1 was waited for).
    fn send_emigrants(&mut self, sent: &[[usize; 2]]) -> Result<()> {
        let g = self.slabs.len();
        // outgoing: device → peer (Peer) or device → pinned host (Host), per sending GPU
        let mut out_events: Vec<Option<CudaEvent>> = Vec::with_capacity(g);
        // Host: one event per chunk sent down, so the receiver's upload of a chunk overlaps the
        // download of the next (PCIe is full duplex, each GPU has copy engines both ways)
        let mut chunk_events: Vec<[Vec<CudaEvent>; 2]> =
            (0..g).map(|_| [Vec::new(), Vec::new()]).collect();
        for k in 0..g {
            let src_ctx = self.slabs[k].dev.ctx.clone();
            let out = self.slab_of(k).copy_out.clone();
            let mut any = false;
            for dir in 0..2 {
                let count = sent[k][dir];
                if count == 0 {
                    continue;
                }
                any = true;
                let words = count * RECORD_WORDS;
                // raw addresses: event tracking is off, the guards do nothing
                let src_ptr = self.slab_of(k).send[dir].device_ptr(&out).0;
                match self.transfer {
                    Transfer::Peer => {
                        let d = self.neighbour(k, dir);
                        let dst_ctx = self.slabs[d].dev.ctx.clone();
                        let dst_ptr = self.slab_of(d).recv[1 - dir].device_ptr(&out).0;
                        unsafe {
                            src_ctx.bind_to_thread().map_err(drv("bind"))?;
                            cudarc::driver::result::memcpy_peer_async(
                                dst_ctx.cu_ctx(),
                                dst_ptr,
                                src_ctx.cu_ctx(),
                                src_ptr,
                                words * 8,
                                out.cu_stream(),
                            )
                            .map_err(drv("peer copy"))?;
                        }
                    }
                    Transfer::Host => {
                        let stage = self.slabs[k]
                            .slab
                            .as_mut()
                            .and_then(|s| s.staging.as_mut())
                            .ok_or_else(|| MpcError::Device("no staging buffers".into()))?;
                        let host = &mut stage[dir].as_mut_slice().map_err(drv("staging"))?[..words];
                        src_ctx.bind_to_thread().map_err(drv("bind"))?;
                        for (c, chunk) in host.chunks_mut(STAGING_CHUNK_WORDS).enumerate() {
                            let at = src_ptr + (c * STAGING_CHUNK_WORDS * 8) as u64;
                            unsafe {
                                cudarc::driver::result::memcpy_dtoh_async(
                                    chunk,
                                    at,
                                    out.cu_stream(),
                                )
                                .map_err(drv("staging copy"))?;
                            }
                            chunk_events[k][dir]
                                .push(out.record_event(None).map_err(drv("event"))?);
                        }
                    }
                }
            }
            let ev = if any {
                let ev = out.record_event(None).map_err(drv("event"))?;
                // the next pass 1 refills the send buffers
                self.slabs[k].dev.stream.wait(&ev).map_err(drv("event"))?;
                Some(ev)
            } else {
                None
            };
            out_events.push(ev);
        }
        // incoming: the receiver waits for its neighbours' outgoing copies (and, through host
        // memory, copies the staged particles up on its own copy stream)
        for d in 0..g {
            let main = self.slabs[d].dev.stream.clone();
            let inn = self.slab_of(d).copy_in.clone();
            for side in 0..2 {
                let src = self.neighbour(d, side);
                let dir = 1 - side; // the direction the sender sent in
                let count = sent[src][dir];
                if count == 0 {
                    continue;
                }
                let ev = out_events[src].as_ref().expect("recorded above");
                match self.transfer {
                    Transfer::Peer => main.wait(ev).map_err(drv("event"))?,
                    Transfer::Host => {
                        let words = count * RECORD_WORDS;
                        let dst_ptr = self.slab_of(d).recv[side].device_ptr(&inn).0;
                        let stage = self.slab_of(src).staging.as_ref().expect("host transfer");
                        let host = &stage[dir].as_slice().map_err(drv("staging"))?[..words];
                        self.slabs[d]
                            .dev
                            .ctx
                            .bind_to_thread()
                            .map_err(drv("bind"))?;
                        for (c, chunk) in host.chunks(STAGING_CHUNK_WORDS).enumerate() {
                            inn.wait(&chunk_events[src][dir][c]).map_err(drv("event"))?;
                            let at = dst_ptr + (c * STAGING_CHUNK_WORDS * 8) as u64;
                            unsafe {
                                cudarc::driver::result::memcpy_htod_async(
                                    at,
                                    chunk,
                                    inn.cu_stream(),
                                )
                                .map_err(drv("staging copy"))?;
                            }
                        }
                    }
                }
            }
            if self.transfer == Transfer::Host {
                main.join(&inn).map_err(drv("event"))?;
            }
        }
        Ok(())
    }

    fn slab_of(&self, k: usize) -> &Slab {
        self.slabs[k].slab()
    }

    /// One step of all slabs. Solutes: device-resident ones are read from the home GPU by
    /// every GPU; host ones are uploaded once to the home GPU when every GPU can reach it
    /// (`multi_solutes`), else to every GPU.
    fn run_step(&mut self, plan: &StepPlan, solutes: StepSolutes<'_, '_>) -> Result<StepReport> {
        let ns = match &solutes {
            StepSolutes::None => 0,
            StepSolutes::Host(b) => b.len(),
            StepSolutes::Device(d) => d.n,
        };
        let mut t = Instant::now();
        // 1. pass 1 everywhere (collide n if deferred, stream, bin, pack emigrants)
        for s in &mut self.slabs {
            let p = s.params(plan, ns);
            s.fluid_pass(&p)?;
        }
        // where every GPU reads the solutes from (None: each GPU has its own copy)
        let mut on_home: Option<DeviceSolutes> = None;
        match &solutes {
            StepSolutes::Device(d) => on_home = Some(*d),
            StepSolutes::Host(b) if self.home_reachable => {
                on_home = Some(self.upload_solutes_home(b.pos, &*b.vel, b.mass)?);
            }
            StepSolutes::Host(b) => {
                for s in &mut self.slabs {
                    s.upload_solutes_blocking(b.pos, &*b.vel, b.mass)?;
                }
            }
            StepSolutes::None => {}
        }
        self.synchronize_all()?;
        let mut sent = vec![[0usize; 2]; self.slabs.len()];
        let mut tops = vec![0usize; self.slabs.len()];
        for (k, s) in self.slabs.iter_mut().enumerate() {
            let sl = s.slab.as_mut().expect("slab mode");
            let c = sl.counters_host.as_slice().map_err(drv("counters"))?;
            if c[3] & 1 != 0 {
                return Err(MpcError::Device(format!(
                    "{}: more particles left the slab in one step than its send buffer holds \
                     ({}); fix: a smaller time step h or fewer GPUs",
                    s.dev.describe(),
                    sl.send_capacity
                )));
            }
            sent[k] = [c[0] as usize, c[1] as usize];
            tops[k] = c[2] as usize;
        }
        self.mark(0, &mut t)?;
        // 2. exchange: copies, then each slab unpacks what its neighbours sent
        self.send_emigrants(&sent)?;
        for k in 0..self.slabs.len() {
            let lower = self.neighbour(k, 0);
            let upper = self.neighbour(k, 1);
            let from = [sent[lower][1], sent[upper][0]];
            self.migrated += (from[0] + from[1]) as u64;
            self.slabs[k].immigrate(plan, ns, from, tops[k])?;
        }
        self.mark(1, &mut t)?;
        // 3. solutes, cell parameters, collision (or deferred), reorder
        for s in &mut self.slabs {
            let p = s.params(plan, ns);
            match &on_home {
                Some(d) if ns > 0 => s.bin_solutes_from(&p, d)?,
                _ => s.solute_bin(&p, ns)?,
            }
            s.cell_pass(&p)?;
            match &on_home {
                Some(d) if ns > 0 => s.collide_owned_solutes(&p, d)?,
                _ if ns > 0 => s.solute_collide(&p, ns)?,
                _ => {}
            }
            s.fluid_collide(plan, &p)?;
            s.reorder_if(plan)?;
        }
        let mut host_solutes = match solutes {
            StepSolutes::Host(b) => Some(b),
            _ => None,
        };
        if let (Some(b), None) = (host_solutes.as_mut(), &on_home) {
            let out = b.vel.as_flattened_mut();
            out.fill(0.0);
            for s in &mut self.slabs {
                s.download_solute_velocities(ns, &mut self.solute_scratch)?;
                // exactly one GPU owns each solute, the others wrote zeros
                for (o, v) in out.iter_mut().zip(&self.solute_scratch) {
                    *o += *v;
                }
            }
        }
        // reports and flags: queued on every GPU, then waited for (one wait per GPU)
        for s in &mut self.slabs {
            s.queue_tail_copies()?;
        }
        let mut report = StepReport::default();
        for s in &mut self.slabs {
            s.synchronize()?;
            let sl = s.slab();
            let r = sl.report_host.as_slice().map_err(drv("report"))?;
            report.relative_energy += r[0];
            report.relative_dof += r[1];
            report.kinetic_stress_sum += r[2];
            report.collisional_stress_sum += r[3];
            if sl.counters_host.as_slice().map_err(drv("counters"))?[3] & 2 != 0 {
                return Err(MpcError::Device(format!(
                    "{}: a particle arrived in a cell this GPU does not own (it crossed a whole \
                     slab in one step); fix: a smaller time step h or fewer GPUs",
                    s.dev.describe()
                )));
            }
        }
        if let (Some(b), Some(_)) = (host_solutes, &on_home) {
            // every GPU has finished (synchronised above): the home buffers hold all velocities
            self.download_solutes_home(b.vel)?;
        }
        let live: usize = self.slabs.iter().map(|s| s.live()).sum();
        if live != self.n_total {
            return Err(MpcError::Device(format!(
                "multi-GPU step {}: {live} fluid particles on the GPUs, {} expected (a \
                 migration lost or duplicated particles)",
                plan.step, self.n_total
            )));
        }
        self.mark(2, &mut t)?;
        Ok(report)
    }
}

impl CudaBackend {
    /// Slab mode: unpack the particles sent from below (`from[0]`) and above (`from[1]`) into
    /// free slots (the stack holds `top` after pass 1), then append; bin them and add them to
    /// this step's cell sums.
    fn immigrate(
        &mut self,
        plan: &StepPlan,
        ns: usize,
        from: [usize; 2],
        top: usize,
    ) -> Result<()> {
        let total = from[0] + from[1];
        let fill = total.min(top);
        let n_old = self.n;
        let n_new = n_old + total - fill;
        let sl = self.slab.as_ref().expect("slab mode");
        if n_new > sl.capacity {
            return Err(MpcError::Device(format!(
                "{}: {n_new} particle slots needed, {} allocated (the slab gained too many \
                 particles); fix: fewer GPUs or a smaller box",
                self.dev.describe(),
                sl.capacity
            )));
        }
        let p = self.params(plan, ns);
        let s = self.dev.stream.clone();
        let sl = self.slab.as_mut().expect("slab mode");
        let mut first = 0u32;
        for (side, &count) in from.iter().enumerate() {
            if count == 0 {
                continue;
            }
            let (cu, fu, tu, nu) = (count as u32, fill as u32, top as u32, n_old as u32);
            let [px, py, pz] = &mut self.pos;
            let [vx, vy, vz] = &mut self.vel;
            unsafe {
                s.launch_builder(&self.dev.k.immigrate)
                    .arg(&p)
                    .arg(&sl.recv[side])
                    .arg(&cu)
                    .arg(&first)
                    .arg(&fu)
                    .arg(&tu)
                    .arg(&nu)
                    .arg(px)
                    .arg(py)
                    .arg(pz)
                    .arg(vx)
                    .arg(vy)
                    .arg(vz)
                    .arg(&mut self.cellw)
                    .arg(&mut sl.ids)
                    .arg(&sl.holes)
                    .arg(&mut self.cells)
                    .arg(&mut sl.counters)
                    .launch(grid(count))
                    .map_err(drv("immigrate"))?;
            }
            first += count as u32;
        }
        sl.free_slots = top - fill;
        self.n = n_new;
        Ok(())
    }

    /// Queue the step's report and the migration flags to pinned host memory.
    fn queue_tail_copies(&mut self) -> Result<()> {
        let s = self.dev.stream.clone();
        let sl = self.slab.as_mut().expect("slab mode");
        s.memcpy_dtoh(&self.report, &mut sl.report_host)
            .map_err(drv("report copy"))?;
        s.memcpy_dtoh(&sl.counters, &mut sl.counters_host)
            .map_err(drv("counters"))?;
        Ok(())
    }

    /// Slab mode: copy all solutes to this GPU (it bins only those in its cells).
    pub(super) fn upload_solutes_blocking(
        &mut self,
        pos: &[[f64; 3]],
        vel: &[[f64; 3]],
        mass: &[f64],
    ) -> Result<()> {
        let ns = pos.len();
        self.ensure_solute_capacity(ns)?;
        let s = self.dev.stream.clone();
        let sb = self.solutes.as_mut().expect("made above");
        s.memcpy_htod(pos.as_flattened(), &mut sb.pos.slice_mut(..3 * ns))
            .map_err(drv("solute upload"))?;
        s.memcpy_htod(vel.as_flattened(), &mut sb.vel.slice_mut(..3 * ns))
            .map_err(drv("solute upload"))?;
        s.memcpy_htod(mass, &mut sb.mass.slice_mut(..ns))
            .map_err(drv("solute upload"))?;
        Ok(())
    }

    /// Slab mode: this GPU's solute velocities (zeros for solutes another GPU owns).
    fn download_solute_velocities(&mut self, ns: usize, out: &mut Vec<f64>) -> Result<()> {
        out.resize(3 * ns, 0.0);
        let sb = self
            .solutes
            .as_ref()
            .ok_or_else(|| MpcError::Device("solute buffers missing".into()))?;
        self.dev
            .stream
            .memcpy_dtoh(&sb.vel.slice(..3 * ns), &mut out[..])
            .map_err(drv("solute download"))?;
        Ok(())
    }

    /// Turn this backend into one slab of a multi-GPU run: global cells from `cell_offset`.
    fn attach_slab(
        &mut self,
        cell_offset: u32,
        capacity: usize,
        send_capacity: usize,
        transfer: Transfer,
    ) -> Result<()> {
        let s = self.dev.stream.clone();
        let ctx = self.dev.ctx.clone();
        let words = send_capacity * RECORD_WORDS;
        let alloc = |e| MpcError::OutOfMemory {
            device: self.dev.describe(),
            needed_bytes: (8 * capacity + 32 * words) as u64,
            available_bytes: 0,
            fix: format!("migration buffers ({e:?}); use more GPUs or a smaller box"),
        };
        let ids = s.alloc_zeros::<u32>(capacity).map_err(alloc)?;
        let holes = s.alloc_zeros::<u32>(capacity).map_err(alloc)?;
        let send = [
            s.alloc_zeros::<u64>(words).map_err(alloc)?,
            s.alloc_zeros::<u64>(words).map_err(alloc)?,
        ];
        let recv = [
            s.alloc_zeros::<u64>(words).map_err(alloc)?,
            s.alloc_zeros::<u64>(words).map_err(alloc)?,
        ];
        let counters = s.alloc_zeros::<u32>(4).map_err(alloc)?;
        let counters_host = unsafe { ctx.alloc_pinned::<u32>(4) }.map_err(drv("pinned"))?;
        let counters_init = unsafe { ctx.alloc_pinned::<u32>(4) }.map_err(drv("pinned"))?;
        let report_host = unsafe { ctx.alloc_pinned::<f64>(4) }.map_err(drv("pinned"))?;
        let copy_out = ctx.new_stream().map_err(drv("stream"))?;
        let copy_in = ctx.new_stream().map_err(drv("stream"))?;
        let staging = match transfer {
            Transfer::Peer => None,
            Transfer::Host => {
                // portable: the receiving GPU's context copies from it too
                let flags = cudarc::driver::sys::CU_MEMHOSTALLOC_PORTABLE;
                Some([
                    unsafe { ctx.alloc_pinned_with_flags::<u64>(words, flags) }
                        .map_err(drv("pinned staging"))?,
                    unsafe { ctx.alloc_pinned_with_flags::<u64>(words, flags) }
                        .map_err(drv("pinned staging"))?,
                ])
            }
        };
        let ptr = |b: &CudaSlice<u64>| b.device_ptr(&s).0;
        let args = MigrationArgs {
            send: [ptr(&send[0]), ptr(&send[1])],
            counters: counters.device_ptr(&s).0,
            holes: holes.device_ptr(&s).0,
            ids: ids.device_ptr(&s).0,
            send_capacity: send_capacity as u32,
            pad: 0,
        };
        self.slab = Some(Slab {
            cell_offset,
            capacity,
            send_capacity,
            ids,
            holes,
            send,
            recv,
            counters,
            counters_host,
            counters_init,
            report_host,
            copy_out,
            copy_in,
            free_slots: 0,
            args,
            staging,
        });
        Ok(())
    }

    /// Slab mode: replace this slab's particles (`ids` their global indices).
    fn upload_slab(&mut self, part: &FluidState, ids: &[u32]) -> Result<()> {
        let n = part.len();
        let sl = self.slab.as_mut().expect("slab mode");
        if n > sl.capacity {
            return Err(MpcError::Device(format!(
                "{}: {n} particles exceed the slab's {} slots; fix: fewer GPUs or a smaller box",
                self.dev.describe(),
                sl.capacity
            )));
        }
        self.pending = None;
        let s = self.dev.stream.clone();
        if n > 0 {
            for k in 0..3 {
                s.memcpy_htod(&part.pos[k][..], &mut self.pos[k].slice_mut(..n))
                    .map_err(drv("upload"))?;
                s.memcpy_htod(&part.vel[k][..], &mut self.vel[k].slice_mut(..n))
                    .map_err(drv("upload"))?;
            }
            s.memcpy_htod(ids, &mut sl.ids.slice_mut(..n))
                .map_err(drv("upload"))?;
            // any live word (not MPC_DEAD): pass 1 overwrites it
            s.memset_zeros(&mut self.cellw.slice_mut(..n))
                .map_err(drv("upload"))?;
        }
        sl.free_slots = 0;
        self.n = n;
        s.synchronize().map_err(drv("upload"))?;
        Ok(())
    }

    /// Slab mode: live particles with their global ids.
    fn download_slab(&mut self) -> Result<(FluidState, Vec<u32>)> {
        self.flush()?;
        let s = self.dev.stream.clone();
        let n = self.n;
        let mut all = FluidState::default();
        if n == 0 {
            return Ok((all, Vec::new()));
        }
        for k in 0..3 {
            all.pos[k] = vec![0.0; n];
            s.memcpy_dtoh(&self.pos[k].slice(..n), &mut all.pos[k][..])
                .map_err(drv("download"))?;
            all.vel[k] = vec![0.0; n];
            s.memcpy_dtoh(&self.vel[k].slice(..n), &mut all.vel[k][..])
                .map_err(drv("download"))?;
        }
        let mut words = vec![0u32; n];
        s.memcpy_dtoh(&self.cellw.slice(..n), &mut words[..])
            .map_err(drv("download"))?;
        let mut ids = vec![0u32; n];
        s.memcpy_dtoh(&self.slab().ids.slice(..n), &mut ids[..])
            .map_err(drv("download"))?;
        let keep: Vec<usize> = (0..n).filter(|&i| words[i] != u32::MAX).collect();
        let mut out = FluidState::default();
        for k in 0..3 {
            out.pos[k] = keep.iter().map(|&i| all.pos[k][i]).collect();
            out.vel[k] = keep.iter().map(|&i| all.vel[k][i]).collect();
        }
        Ok((out, keep.iter().map(|&i| ids[i]).collect()))
    }
}

/// Split a fluid by the slab owning each particle's layer; with each part its global ids.
fn split_by_slab(state: &FluidState, bounds: &[u32]) -> Vec<(FluidState, Vec<u32>)> {
    use rayon::prelude::*;
    let g = bounds.len() - 1;
    let ly = bounds[g];
    let owners: Vec<u8> = state.pos[1]
        .par_iter()
        .map(|&y| owner(bounds, (y.max(0.0) as u32).min(ly - 1)) as u8)
        .collect();
    (0..g)
        .into_par_iter()
        .map(|k| {
            let ids: Vec<u32> = (0..state.len() as u32)
                .filter(|&i| owners[i as usize] as usize == k)
                .collect();
            let mut part = FluidState::default();
            for c in 0..3 {
                part.pos[c] = ids.iter().map(|&i| state.pos[c][i as usize]).collect();
                part.vel[c] = ids.iter().map(|&i| state.vel[c][i as usize]).collect();
            }
            (part, ids)
        })
        .collect()
}

/// GPU-to-GPU copy rates (bytes/s, one direction) measured by [`measure_transfer`].
#[derive(Clone, Copy, Debug, Default)]
pub struct TransferRates {
    /// Peer copy of stream-ordered pool memory (what cudarc allocates) before the pool is
    /// opened to the peer: the driver stages it through the host.
    pub peer_pool_closed: f64,
    /// The same memory after `cuMemPoolSetAccess` (what the backend does at open).
    pub peer_pool_open: f64,
    /// Reference: peer copy of plain `cuMemAlloc` memory, the hardware's GPU-to-GPU rate.
    pub peer_plain_alloc: f64,
    /// Through pinned host memory (device → host on a's stream, host → device on b's).
    pub via_host: f64,
}

/// Best of `reps` timed runs of `copy` moving `bytes`, in bytes/s.
fn best_rate(bytes: usize, reps: usize, mut copy: impl FnMut() -> Result<()>) -> Result<f64> {
    copy()?; // warm-up
    let mut best = 0.0f64;
    for _ in 0..reps {
        let t = Instant::now();
        copy()?;
        best = best.max(bytes as f64 / t.elapsed().as_secs_f64());
    }
    Ok(best)
}

/// Copy rates of `bytes` from GPU `a` to GPU `b`, each the best of `reps`: peer copies of pool
/// memory before and after the pool is opened to the peer, of plain allocations (the
/// hardware's reference, same run), and through pinned host memory.
pub fn measure_transfer(a: usize, b: usize, bytes: usize, reps: usize) -> Result<TransferRates> {
    let da = CudaDevice::open(a)?;
    let db = CudaDevice::open(b)?;
    let words = bytes / 8;
    let bytes = words * 8;
    let src = da.stream.alloc_zeros::<u64>(words).map_err(drv("alloc"))?;
    let dst = db.stream.alloc_zeros::<u64>(words).map_err(drv("alloc"))?;
    if !super::transfer::can_access_peer(&da, &db) {
        eprintln!("peer access {a} -> {b}: the driver says it is not possible");
    }
    for (x, y) in [(&da, &db), (&db, &da)] {
        x.ctx.bind_to_thread().map_err(drv("bind"))?;
        // SAFETY: both contexts are live; enabling twice returns an error code, not UB.
        let r = unsafe { cudarc::driver::sys::cuCtxEnablePeerAccess(y.ctx.cu_ctx(), 0) };
        tracing::debug!("peer access {} -> {}: {r:?}", x.ordinal, y.ordinal);
    }
    let peer_copy = |dp: u64, sp: u64| -> Result<()> {
        da.ctx.bind_to_thread().map_err(drv("bind"))?;
        // SAFETY: `dp`/`sp` are live allocations of `bytes` bytes on b and a; the copy is
        // synchronised before the buffers can be dropped.
        unsafe {
            cudarc::driver::result::memcpy_peer_async(
                db.ctx.cu_ctx(),
                dp,
                da.ctx.cu_ctx(),
                sp,
                bytes,
                da.stream.cu_stream(),
            )
            .map_err(drv("peer copy"))?;
        }
        da.stream.synchronize().map_err(drv("sync"))
    };
    let sp = src.device_ptr(&da.stream).0;
    let dp = dst.device_ptr(&db.stream).0;
    let mut rates = TransferRates {
        peer_pool_closed: best_rate(bytes, reps, || peer_copy(dp, sp))?,
        ..Default::default()
    };
    super::transfer::grant_pool_access(&[&da, &db])?;
    rates.peer_pool_open = best_rate(bytes, reps, || peer_copy(dp, sp))?;
    // plain allocations, outside any pool
    da.ctx.bind_to_thread().map_err(drv("bind"))?;
    // SAFETY: plain device allocations of `bytes`, freed below after the copies completed.
    let plain_src = unsafe { cudarc::driver::result::malloc_sync(bytes) }.map_err(drv("alloc"))?;
    db.ctx.bind_to_thread().map_err(drv("bind"))?;
    // SAFETY: as above.
    let plain_dst = unsafe { cudarc::driver::result::malloc_sync(bytes) }.map_err(drv("alloc"))?;
    rates.peer_plain_alloc = best_rate(bytes, reps, || peer_copy(plain_dst, plain_src))?;
    for (ctx, ptr) in [(&da.ctx, plain_src), (&db.ctx, plain_dst)] {
        ctx.bind_to_thread().map_err(drv("bind"))?;
        // SAFETY: allocated above by malloc_sync in this context; every copy was synchronised.
        unsafe { cudarc::driver::result::free_sync(ptr) }.map_err(drv("free"))?;
    }
    let flags = cudarc::driver::sys::CU_MEMHOSTALLOC_PORTABLE;
    // SAFETY: pinned host allocation of `words` u64, used only by the copies below.
    let mut stage =
        unsafe { da.ctx.alloc_pinned_with_flags::<u64>(words, flags) }.map_err(drv("pinned"))?;
    rates.via_host = best_rate(bytes, reps, || {
        let h = stage.as_mut_slice().map_err(drv("pinned"))?;
        da.ctx.bind_to_thread().map_err(drv("bind"))?;
        // SAFETY: `h` is pinned memory of `bytes`; each copy is synchronised before the next
        // use of `h`.
        unsafe {
            cudarc::driver::result::memcpy_dtoh_async(&mut *h, sp, da.stream.cu_stream())
                .map_err(drv("staging"))?;
        }
        da.stream.synchronize().map_err(drv("sync"))?;
        db.ctx.bind_to_thread().map_err(drv("bind"))?;
        // SAFETY: as above.
        unsafe {
            cudarc::driver::result::memcpy_htod_async(dp, &*h, db.stream.cu_stream())
                .map_err(drv("staging"))?;
        }
        db.stream.synchronize().map_err(drv("sync"))
    })?;
    Ok(rates)
}

/// Let the GPUs of the run access each other's memory where the hardware allows (peer copies
/// of migrating particles; peer loads and stores of the solutes on the first GPU).
fn enable_peer_access(slabs: &[CudaBackend]) -> Result<()> {
    use cudarc::driver::sys;
    for a in slabs {
        for b in slabs {
            if a.dev.ordinal == b.dev.ordinal {
                continue;
            }
            let mut can = 0;
            unsafe {
                sys::cuDeviceCanAccessPeer(&mut can, a.dev.ctx.cu_device(), b.dev.ctx.cu_device());
            }
            if can == 0 {
                continue;
            }
            a.dev.ctx.bind_to_thread().map_err(drv("bind"))?;
            let r = unsafe { sys::cuCtxEnablePeerAccess(b.dev.ctx.cu_ctx(), 0) };
            match r {
                sys::CUresult::CUDA_SUCCESS
                | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {}
                e => tracing::warn!(
                    "peer access {} -> {} not enabled ({e:?}); peer copies go through the host",
                    a.dev.ordinal,
                    b.dev.ordinal
                ),
            }
        }
    }
    Ok(())
}

impl Backend for MultiCudaBackend {
    fn describe(&self) -> String {
        let ids: Vec<String> = self
            .slabs
            .iter()
            .map(|s| s.dev.ordinal.to_string())
            .collect();
        format!(
            "cuda:{} {} × {} ({} cell sums, y slabs {:?}, {})",
            ids.join(","),
            self.slabs.len(),
            self.slabs[0].dev.name,
            self.slabs[0].method.name(),
            self.slab_layers(),
            self.transfer.name()
        )
    }

    fn n_fluid(&self) -> usize {
        self.n_total
    }

    fn preferred_reorder_interval(&self) -> u64 {
        20
    }

    fn step(
        &mut self,
        plan: &StepPlan,
        solutes: Option<&mut SoluteBatch<'_>>,
    ) -> Result<StepReport> {
        match solutes.filter(|b| !b.is_empty()) {
            Some(b) => self.run_step(plan, StepSolutes::Host(b)),
            None => self.run_step(plan, StepSolutes::None),
        }
    }

    fn cuda_ordinal(&self) -> Option<usize> {
        Some(self.slabs[0].dev.ordinal)
    }

    fn check_device_solutes(&mut self, solutes: &DeviceSolutes) -> Result<()> {
        self.check_device_solutes_multi(solutes)
    }

    fn step_device_solutes(
        &mut self,
        plan: &StepPlan,
        solutes: &DeviceSolutes,
    ) -> Result<StepReport> {
        self.run_step(plan, StepSolutes::Device(*solutes))
    }

    fn moments(&mut self) -> Result<FluidMoments> {
        let mut total = FluidMoments::default();
        for s in &mut self.slabs {
            let m = s.moments()?;
            total.particles += m.particles;
            for k in 0..3 {
                total.momentum[k] += m.momentum[k];
            }
            total.kinetic_energy += m.kinetic_energy;
            if total.profile_sum.is_empty() {
                total.profile_sum = m.profile_sum;
                total.profile_count = m.profile_count;
            } else {
                for (a, b) in total.profile_sum.iter_mut().zip(&m.profile_sum) {
                    *a += b;
                }
                for (a, b) in total.profile_count.iter_mut().zip(&m.profile_count) {
                    *a += b;
                }
            }
        }
        Ok(total)
    }

    fn download(&mut self) -> Result<FluidState> {
        let n = self.n_total;
        let mut st = FluidState {
            pos: [vec![0.0; n], vec![0.0; n], vec![0.0; n]],
            vel: [vec![0.0; n], vec![0.0; n], vec![0.0; n]],
        };
        let mut seen = vec![false; n];
        for s in &mut self.slabs {
            let (part, ids) = s.download_slab()?;
            for (j, &id) in ids.iter().enumerate() {
                let i = id as usize;
                if i >= n || seen[i] {
                    return Err(MpcError::Device(format!(
                        "multi-GPU download: particle id {i} is out of range or held twice"
                    )));
                }
                seen[i] = true;
                for k in 0..3 {
                    st.pos[k][i] = part.pos[k][j];
                    st.vel[k][i] = part.vel[k][j];
                }
            }
        }
        if let Some(i) = seen.iter().position(|&x| !x) {
            return Err(MpcError::Device(format!(
                "multi-GPU download: particle id {i} is on no GPU"
            )));
        }
        Ok(st)
    }

    fn upload(&mut self, state: &FluidState) -> Result<()> {
        state
            .validate(&self.phys)
            .map_err(|e| MpcError::Device(format!("uploaded fluid state: {e}")))?;
        if state.len() != self.n_total {
            return Err(MpcError::Device(format!(
                "uploaded fluid state has {} particles, the GPUs hold {}; fix: upload a state \
                 of the same size or open a new backend",
                state.len(),
                self.n_total
            )));
        }
        let parts = split_by_slab(state, &self.bounds);
        for (s, (part, ids)) in self.slabs.iter_mut().zip(parts) {
            s.upload_slab(&part, &ids)?;
        }
        Ok(())
    }
}

/// Open the multi-GPU backend on `ordinals` (two or more).
pub fn open_backend(
    cfg: &Config,
    phys: &Physics,
    state: Option<&FluidState>,
    ordinals: &[usize],
) -> Result<Box<dyn Backend>> {
    let be = MultiCudaBackend::open(cfg, phys, state, ordinals)?;
    tracing::info!("multi-GPU backend: {}", be.describe());
    Ok(Box::new(be))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slabs_cover_the_box_evenly() {
        assert_eq!(slab_bounds(256, 4), vec![0, 64, 128, 192, 256]);
        assert_eq!(slab_bounds(16, 3), vec![0, 5, 10, 16]);
        let b = slab_bounds(17, 3);
        for iy in 0..17 {
            let k = owner(&b, iy);
            assert!(b[k] <= iy && iy < b[k + 1]);
        }
    }

    #[test]
    fn split_keeps_every_particle_once_with_its_id() {
        let cfg = crate::config::Config::from_ron_str(
            "(cells: (4, 12, 4), particles_per_cell: 5, seed: 3, time_step: 0.1, steps: 10, collision: Srd(angle_deg: 130.0))",
        )
        .unwrap();
        let st = FluidState::initial(&cfg);
        let b = slab_bounds(12, 3);
        let parts = split_by_slab(&st, &b);
        let mut seen = vec![0u8; st.len()];
        for (k, (part, ids)) in parts.iter().enumerate() {
            for (j, &id) in ids.iter().enumerate() {
                seen[id as usize] += 1;
                assert_eq!(part.pos[1][j], st.pos[1][id as usize]);
                let iy = part.pos[1][j] as u32;
                assert!(b[k] <= iy && iy < b[k + 1]);
            }
        }
        assert!(seen.iter().all(|&c| c == 1));
    }

    #[test]
    fn thin_slabs_are_refused() {
        let cfg = crate::config::Config::from_ron_str(
            "(cells: (4, 8, 4), particles_per_cell: 5, seed: 3, time_step: 0.1, steps: 10, collision: Srd(angle_deg: 130.0))",
        )
        .unwrap();
        let phys = Physics::from_config(&cfg);
        assert!(min_slab_layers(&phys) >= 3);
        match MultiCudaBackend::open(&cfg, &phys, None, &[0, 1, 2, 3]) {
            Err(MpcError::Device(m)) => assert!(m.contains("at most"), "{m}"),
            Err(e) => panic!("unexpected {e}"),
            Ok(_) => panic!("slabs of 2 layers must be refused"),
        }
    }
}
