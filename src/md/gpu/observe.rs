//! Observables of the GPU engine reduced on the device (the counterpart of `md::rheology`
//! and the CPU engine's energy sums): per chunk of [`CHUNK`] particles, or per chain, each
//! summed in the CPU's order by one thread (`kernels/md_observe.cu`), so only a few partial
//! sums cross PCIe (11 words per 512 beads for the energies, 6 for the kinetic tensor, 12 per
//! chain) and the host adds them in the same order: a stress sample no longer downloads the
//! beads (a sample of 1.6 M beads used to move ~140 MB to the host and reduce it there).

use cudarc::driver::{CudaSlice, DeviceRepr};

use super::{drv, grid, GpuMd};
use crate::backend::cuda::contract::MD_ENERGY_WORDS;
use crate::error::{MpcError, Result};
use crate::md::boundary::LeesEdwards;
use crate::md::engine::ForceReport;
use crate::md::neighbor::CHUNK;
use crate::md::observe::{ChainObserver, ChainSample};
use crate::md::rheology::{average_conformation, pressure_from, ChainGroups, Conformation};

/// `struct MdUnwrapFrame` of kernels/md_observe.cu: how the chain kernels unwrap a bead
/// (`System::unwrapped`): the box edges, and under shear the total Lees-Edwards offset.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct MdUnwrapFrame {
    l: [f64; 3],
    total_offset: f64,
    sheared: i32,
    pad: i32,
}

// SAFETY: plain-old-data (four f64, two i32: 40 bytes without implicit padding, checked below)
// with the C layout of `MdUnwrapFrame`, which the chain kernels take by value.
unsafe impl DeviceRepr for MdUnwrapFrame {}

impl crate::backend::cuda::launch::CudaType for MdUnwrapFrame {
    const NAME: &'static str = "MdUnwrapFrame";
}

const _: () = assert!(std::mem::size_of::<MdUnwrapFrame>() == 40);

/// The chains as index lists on the device (built on first use; the engine never reorders).
pub(super) struct DeviceChains {
    chains: usize,
    offsets: CudaSlice<u32>,
    members: CudaSlice<u32>,
    ends: CudaSlice<u32>,
    /// 12 words per chain (gyration tensor, R ⊗ R).
    terms: CudaSlice<f64>,
    host: Vec<f64>,
    /// Each chain's molecule id (increasing, as the chains are ordered).
    mols: Vec<u32>,
}

/// Device scratch of the chunked sums and its host copy, reused.
#[derive(Default)]
pub(super) struct ReductionScratch {
    device: Option<CudaSlice<f64>>,
    /// `device` holds the chunk sums of an energy report queued and not yet read.
    energy_queued: bool,
    host: Vec<f64>,
    chains: Option<DeviceChains>,
}

fn u32s(v: impl Iterator<Item = usize>) -> Vec<u32> {
    v.map(|x| x as u32).collect()
}

impl GpuMd {
    fn chunks(&self) -> usize {
        self.n.div_ceil(CHUNK).max(1)
    }

    /// A device buffer of at least `words` f64 for the chunked sums (a queued energy report
    /// read first: it is in the buffer).
    fn scratch(&mut self, words: usize) -> Result<CudaSlice<f64>> {
        self.take_energy_report()?;
        match self.reduce.device.take() {
            Some(b) if b.len() >= words => Ok(b),
            _ => self.stream.alloc_zeros::<f64>(words).map_err(drv("alloc")),
        }
    }

    /// Download the first `words` of `buf` into the reused host buffer and keep `buf`.
    fn fetch(&mut self, buf: CudaSlice<f64>, words: usize) -> Result<Vec<f64>> {
        let mut host = std::mem::take(&mut self.reduce.host);
        host.resize(words, 0.0);
        self.stream
            .memcpy_dtoh(&buf.slice(..words), &mut host[..])
            .map_err(drv("download"))?;
        self.stream.synchronize().map_err(drv("synchronize"))?;
        self.reduce.device = Some(buf);
        Ok(host)
    }

    /// The first `used` chunks' `W` words of `buf` (queued per chunk on the device), summed
    /// word by word in chunk order on the host: the CPU engine's order, so the same bits.
    fn fetch_chunk_sums<const W: usize>(
        &mut self,
        buf: CudaSlice<f64>,
        chunks: usize,
        used: usize,
    ) -> Result<[f64; W]> {
        let host = self.fetch(buf, W * chunks)?;
        let mut sums = [0.0; W];
        for c in host.chunks(W).take(used) {
            for (sum, x) in sums.iter_mut().zip(c) {
                *sum += x;
            }
        }
        self.reduce.host = host;
        Ok(sums)
    }

    /// Queue the energy report of the force evaluation just queued: per-particle terms summed
    /// per chunk on the device, read by [`GpuMd::take_energy_report`]. The slabs of a
    /// decomposed engine queue theirs before any is read, so the GPUs reduce at once.
    pub(super) fn queue_energy_report(&mut self) -> Result<()> {
        let chunks = self.chunks();
        let mut out = self.scratch(MD_ENERGY_WORDS * chunks)?;
        let (n, chunk) = (self.n as u32, CHUNK as u32);
        let s = self.stream.clone();
        let e = &self.energy;
        // SAFETY: the five scalar term arrays hold n f64 and w_tensor 6n; `out` holds at least 11
        // words per chunk of `chunk` particles, and thread c writes only chunk c's words.
        unsafe {
            self.k.chunk_energy(
                &s,
                grid(chunks),
                &n,
                &chunk,
                &e.e_pair,
                &e.e_bond,
                &e.w_pair,
                &e.w_bond,
                &e.e_wall,
                &e.w_tensor,
                &mut out,
            )
        }
        .map_err(drv("md_chunk_energy"))?;
        self.reduce.device = Some(out);
        self.reduce.energy_queued = true;
        Ok(())
    }

    /// The queued energy report, if any, becomes [`GpuMd::report`] (waits for it): the chunk
    /// sums added here in order, pairs and bonds halved (each seen from both sides), as the
    /// CPU engine sums them.
    pub(super) fn take_energy_report(&mut self) -> Result<()> {
        if !std::mem::take(&mut self.reduce.energy_queued) {
            return Ok(());
        }
        let chunks = self.chunks();
        let out = self.reduce.device.take().ok_or_else(|| {
            MpcError::Device("a queued energy report lost its buffer (please report it)".into())
        })?;
        let sums: [f64; MD_ENERGY_WORDS] = self.fetch_chunk_sums(out, chunks, chunks)?;
        let mut tensor = [0.0; 6];
        tensor.copy_from_slice(&sums[5..]);
        self.report = ForceReport {
            pair_energy: 0.5 * sums[0],
            bond_energy: 0.5 * sums[1],
            virial: 0.5 * sums[2] + 0.5 * sums[3],
            virial_tensor: tensor.map(|x| 0.5 * x),
            wall_energy: if self.walls.is_some() { sums[4] } else { 0.0 },
        };
        Ok(())
    }

    /// K = Σ m c ⊗ c with c = v − γ̇ (y − Ly/2) x̂ of the current velocities of the beads
    /// this engine owns (all of them when not decomposed: then
    /// [`crate::md::rheology::kinetic_tensor`], the same bits).
    pub fn kinetic_tensor(&mut self, shear_rate: f64) -> Result<[f64; 6]> {
        self.chunk_kinetic(shear_rate, self.role.own)
    }

    /// [`GpuMd::kinetic_tensor`] over every bead, owned or not: a decomposed engine's slab 0
    /// after a gather, when every bead is current there.
    pub(super) fn kinetic_tensor_of_all(&mut self, shear_rate: f64) -> Result<[f64; 6]> {
        self.chunk_kinetic(shear_rate, [f64::NEG_INFINITY, f64::INFINITY])
    }

    /// The kinetic tensor over the beads with y in `own` (`md_owns`).
    fn chunk_kinetic(&mut self, shear_rate: f64, own: [f64; 2]) -> Result<[f64; 6]> {
        let chunks = self.chunks();
        let mut out = self.scratch(6 * chunks)?;
        let (n, chunk) = (self.n as u32, CHUNK as u32);
        let half_ly = 0.5 * self.sys.box_len[1];
        let s = self.stream.clone();
        let d = &self.parts;
        // SAFETY: pos and vel hold 3n f64, mass n; `out` at least 6 words per chunk, thread c
        // writes chunk c's.
        unsafe {
            self.k.chunk_kinetic(
                &s,
                grid(chunks),
                &n,
                &chunk,
                &d.pos,
                &d.vel,
                &d.mass,
                &shear_rate,
                &half_ly,
                &own[0],
                &own[1],
                &mut out,
            )
        }
        .map_err(drv("md_chunk_kinetic"))?;
        self.fetch_chunk_sums(out, chunks, chunks)
    }

    /// Kinetic energy and momentum: per chunk of [`CHUNK`] particles on the device
    /// (`md_chunk_ke_momentum`, the CPU's terms), the chunks added here in order as
    /// [`Md::kinetic_energy`](crate::md::Md::kinetic_energy) and
    /// [`Md::momentum`](crate::md::Md::momentum) add them: the same bits, without the
    /// velocities crossing to the host.
    pub fn kinetic_energy_and_momentum(&mut self) -> Result<(f64, [f64; 3])> {
        let chunks = self.chunks();
        let mut out = self.scratch(4 * chunks)?;
        let (n, chunk) = (self.n as u32, CHUNK as u32);
        let s = self.stream.clone();
        // SAFETY: vel holds 3n f64, inv_mass n; `out` at least 4 words per chunk, thread c
        // writes chunk c's.
        unsafe {
            self.k.chunk_ke_momentum(
                &s,
                grid(chunks),
                &n,
                &chunk,
                &self.parts.vel,
                &self.parts.inv_mass,
                &mut out,
            )
        }
        .map_err(drv("md_chunk_ke_momentum"))?;
        let used = if self.n == 0 { 0 } else { chunks };
        let [e, px, py, pz]: [f64; 4] = self.fetch_chunk_sums(out, chunks, used)?;
        Ok((e, [px, py, pz]))
    }

    /// The solutes' (pressure tensor, its kinetic part) now, the virial from the last force
    /// evaluation with energies (`md::rheology::pressure_tensor`), reduced on the device.
    pub fn solute_pressure(&mut self, shear_rate: f64) -> Result<([f64; 6], [f64; 6])> {
        let k = self.kinetic_tensor(shear_rate)?;
        let sys = &self.sys;
        Ok((
            pressure_from(sys, k, self.report.virial_tensor),
            pressure_from(sys, k, [0.0; 6]),
        ))
    }

    fn device_chains(&mut self) -> Result<DeviceChains> {
        if let Some(c) = self.reduce.chains.take() {
            return Ok(c);
        }
        let g = ChainGroups::of(&self.sys);
        let s = &self.stream;
        let ends: Vec<u32> = g
            .ends
            .iter()
            .flat_map(|e| [e[0] as u32, e[1] as u32])
            .collect();
        let chains = g.chains();
        Ok(DeviceChains {
            chains,
            offsets: s
                .clone_htod(&u32s(g.offsets.iter().copied()))
                .map_err(drv("upload"))?,
            members: s
                .clone_htod(
                    &u32s(g.members.iter().copied())
                        .into_iter()
                        .chain([0])
                        .collect::<Vec<_>>(),
                )
                .map_err(drv("upload"))?,
            ends: s
                .clone_htod(&ends.into_iter().chain([0, 0]).collect::<Vec<_>>())
                .map_err(drv("upload"))?,
            terms: s
                .alloc_zeros::<f64>(12 * chains.max(1))
                .map_err(drv("alloc"))?,
            host: vec![0.0; 12 * chains],
            mols: g
                .offsets
                .windows(2)
                .map(|w| self.sys.mol[g.members[w[0]]])
                .collect(),
        })
    }

    /// How the chain kernels unwrap the beads now.
    fn unwrap_frame(&self) -> MdUnwrapFrame {
        let le = self.sys.lees_edwards;
        MdUnwrapFrame {
            l: self.sys.box_len,
            total_offset: le.total(self.sys.box_len[0]),
            sheared: (le != LeesEdwards::default()) as i32,
            pad: 0,
        }
    }

    /// The chains' conformation now ([`crate::md::rheology::conformation`], the same bits),
    /// reduced per chain on the device.
    pub fn conformation(&mut self) -> Result<Conformation> {
        let mut ch = self.device_chains()?;
        if ch.chains > 0 {
            let frame = self.unwrap_frame();
            let chains = ch.chains as u32;
            let s = self.stream.clone();
            let d = &self.parts;
            // SAFETY: offsets holds chains + 1 entries, members and ends index particles < n (built
            // from this engine's system), pos and image 3n, mass n; `terms` 12 words per chain,
            // thread c writes chain c's.
            unsafe {
                self.k.chain_conformation(
                    &s,
                    grid(ch.chains),
                    &chains,
                    &ch.offsets,
                    &ch.members,
                    &ch.ends,
                    &d.pos,
                    &d.image,
                    &d.mass,
                    &frame,
                    &mut ch.terms,
                )
            }
            .map_err(drv("md_chain_conformation"))?;
            s.memcpy_dtoh(&ch.terms, &mut ch.host[..])
                .map_err(drv("download"))?;
            s.synchronize().map_err(drv("synchronize"))?;
        }
        let c = average_conformation(ch.host.chunks(12));
        self.reduce.chains = Some(ch);
        Ok(c)
    }

    /// The md.csv columns of the chains now ([`ChainObserver::sample`], the same bits),
    /// reduced on the device: only each chain's centre of mass and Rg² (4 words a chain) and
    /// each block's largest bond cross to the host, not the beads (at 1.6 M beads the host's
    /// sample of a downloaded system held a coupled run for about a second).
    pub fn chain_sample(&mut self, observer: &ChainObserver) -> Result<ChainSample> {
        let ch = self.device_chains()?;
        let frame = self.unwrap_frame();
        let off = self.sys.periodic_box().image_offset();
        let l = self.sys.box_len;
        let s = self.stream.clone();
        let d = &self.parts;
        let mut geometry = Vec::new();
        if ch.chains > 0 {
            let chains = ch.chains as u32;
            let mut out = s.alloc_zeros::<f64>(4 * ch.chains).map_err(drv("alloc"))?;
            // SAFETY: offsets holds chains + 1 entries and members index particles < n (built
            // from this engine's system), pos and image 3n, mass n; `out` 4 words per chain,
            // thread c writes chain c's.
            unsafe {
                self.k.chain_geometry(
                    &s,
                    grid(ch.chains),
                    &chains,
                    &ch.offsets,
                    &ch.members,
                    &d.pos,
                    &d.image,
                    &d.mass,
                    &frame,
                    &mut out,
                )
            }
            .map_err(drv("md_chain_geometry"))?;
            geometry = s.clone_dtoh(&out).map_err(drv("download"))?;
        }
        let mut max_bond = 0.0;
        if !self.sys.bonds.is_empty() && self.n > 0 {
            let n = self.n as u32;
            let cfg = grid(self.n);
            let mut out = s
                .alloc_zeros::<f64>(cfg.grid_dim.0 as usize)
                .map_err(drv("alloc"))?;
            // SAFETY: pos holds 3n, the bond CSR n + 1 offsets and partners < n; `out` one
            // word per block of `cfg` (its block a multiple of 32 threads), block b writes out[b].
            unsafe {
                self.k.bond_max2(
                    &s,
                    cfg,
                    &n,
                    &d.pos,
                    &self.p.bond_off,
                    &self.p.bond_j,
                    &l[0],
                    &l[1],
                    &l[2],
                    &off,
                    &mut out,
                )
            }
            .map_err(drv("md_bond_max2"))?;
            let blocks = s.clone_dtoh(&out).map_err(drv("download"))?;
            // the root of the largest square is the largest root (sqrt is monotonic)
            max_bond = blocks.into_iter().fold(0.0, f64::max).sqrt();
        }
        let chains: Vec<(u32, [f64; 3], f64)> = ch
            .mols
            .iter()
            .zip(geometry.chunks(4))
            .map(|(&mol, g)| (mol, [g[0], g[1], g[2]], g[3]))
            .collect();
        self.reduce.chains = Some(ch);
        Ok(observer.sample_of(&chains, max_bond))
    }
}
