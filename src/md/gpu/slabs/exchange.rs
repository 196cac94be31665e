//! The exchanges of a [`SlabMd`]: along every [`Link`] (a slab whose layers meet another's
//! band), `md_slab_pack` collects on the sender the beads the receiver needs (what depends on
//! the moment: [`SlabSend`]) into 16-word records and counts them in a word of the sender's
//! flags; the records (as many as the link's last exchange of that kind carried, with a
//! margin) and the count are copied to the receiver (a peer copy between GPUs, a device copy
//! within one) and `md_slab_unpack` writes the records at their indices there, all queued
//! without a wait. Every delivery waits only for its sender's packs (an event recorded after
//! them), so the links' copies and unpacks run side by side. The host then reads every slab's
//! flags (the step's one wait, as on one GPU): a count above what was copied grows the buffers
//! if needed and that link is sent again.
//!
//! Where the receiver may read the sender's memory (the same GPU, or a peer whose memory pool
//! is open to it) the link *pulls* (`MPCBOX_MD_EXCHANGE=pull`, the default there): the
//! receiver's unpack reads the count and the records where the sender packed them, so a
//! delivery is one event wait and one launch instead of two copies and a launch (each host
//! call costs microseconds, and the exchange was bound by them). The sender zeroes its count words
//! only after the flags' wait, when every unpack that reads them has run.

use cudarc::driver::{CudaEvent, CudaSlice, CudaView, DevicePtr, PushKernelArg};

use super::super::integrate::MdSends;
use super::super::{drv, grid, items, push_items, GpuMd, MD_FLAG_COUNTS, MD_MAX_LINKS};
use crate::backend::cuda::contract::{
    MD_SEND_COLLIDED, MD_SEND_DRIFTED, MD_SEND_OWNED, MD_SLAB_WORDS,
};
use crate::backend::cuda::multi::transfer::grant_pool_access;
use crate::backend::cuda::CudaDevice;
use crate::error::MpcError;
use crate::error::Result;

/// What a sender sends (its code the contract's `MD_SEND_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub(super) enum SlabSend {
    /// After the drift: the beads it owned at the step's start that are, or were, in the band.
    Drifted = MD_SEND_DRIFTED,
    /// The beads it owns now that are in the band (before the collision; gathers).
    Owned = MD_SEND_OWNED,
    /// The beads in the band whose velocity its collision changed.
    Collided = MD_SEND_COLLIDED,
}

/// One direction of exchange, sender `from` to receiver `to`.
pub(super) struct Link {
    pub(super) from: usize,
    pub(super) to: usize,
    /// The receiver's band [lo, hi): its layers ± the halo (everything for a gather).
    band: [f64; 2],
    /// Two send buffers on the sender, used in turn: an exchange packs into one while the
    /// receiver of the previous exchange may still be copying out of the other (every sender's
    /// stream is waited for between two exchanges, so the one before that has finished).
    send: [CudaSlice<f64>; 2],
    send_cap: [usize; 2],
    /// Which send buffer the next exchange packs into.
    pub(super) turn: usize,
    recv: CudaSlice<f64>,
    recv_cap: usize,
    /// The sender's count word: flags[MD_FLAG_COUNTS + slot].
    pub(super) slot: usize,
    /// The count, copied beside the records.
    recv_count: CudaSlice<u32>,
    /// Records to copy for each [`SlabSend`]: the last such exchange's count with a margin
    /// (everything at first); a count above it is sent again after the flags' read.
    expect: [usize; 3],
    /// The receiver reads the records and the count in the sender's memory (no copies).
    pull: bool,
}

/// Zero a slab's outgoing record counts (one memset for all its links).
pub(super) fn zero_counts(g: &mut GpuMd) -> Result<()> {
    let words = MD_FLAG_COUNTS..MD_FLAG_COUNTS + MD_MAX_LINKS;
    g.stream
        .memset_zeros(&mut g.flags.slice_mut(words))
        .map_err(drv("memset"))
}

/// Let every link whose receiver's GPU may read the sender's memory pull (the same GPU, or a
/// peer whose pool is opened to it here), unless `MPCBOX_MD_EXCHANGE=copy`; returns whether
/// all of them pull.
pub(super) fn choose_pull(links: &mut [Link], slabs: &[GpuMd]) -> Result<bool> {
    if !pull_wanted(crate::knobs::knobs().get("MPCBOX_MD_EXCHANGE")) {
        return Ok(false);
    }
    let mut devices = Vec::new();
    for g in slabs {
        if !devices
            .iter()
            .any(|d: &&CudaDevice| d.ordinal() == g.ordinal())
        {
            devices.push(&g.dev);
        }
    }
    let granted = grant_pool_access(&devices)?;
    let mut all = true;
    for l in links {
        let (owner, reader) = (slabs[l.from].ordinal(), slabs[l.to].ordinal());
        l.pull = owner == reader || granted.contains(&(owner, reader));
        all &= l.pull;
    }
    Ok(all)
}

/// `MPCBOX_MD_EXCHANGE`: pull unless `copy`.
fn pull_wanted(value: Option<&str>) -> bool {
    value != Some("copy")
}

/// Make every link copy its records to the receiver (as `MPCBOX_MD_EXCHANGE=copy`).
pub(super) fn copy_only(links: &mut [Link]) {
    for l in links {
        l.pull = false;
    }
}

/// Whether the layers `own` meet the periodic band `band` of a box `ly` tall.
fn meets(own: [f64; 2], band: [f64; 2], ly: f64) -> bool {
    band[1] - band[0] >= ly
        || [-ly, 0.0, ly]
            .iter()
            .any(|s| own[0] + s < band[1] && own[1] + s > band[0])
}

/// The next free count word of local slab `from` (each sender's outgoing exchanges count in
/// consecutive flag words).
pub(super) fn take_slot(slots: &mut [usize], from: usize) -> Result<usize> {
    let slot = slots[from];
    if slot >= MD_MAX_LINKS {
        return Err(MpcError::Device(format!(
            "the decomposed MD engine: a slab would send to more than {MD_MAX_LINKS} slabs (slabs \
             much thinner than the halo); fix: fewer slabs (tuning.slabs)"
        )));
    }
    slots[from] += 1;
    Ok(slot)
}

/// The links of this process's slabs, from the layers every slab of the box owns.
pub(super) struct Topology {
    /// Between two slabs of this process (local indices).
    pub(super) links: Vec<Link>,
    /// Every other local slab to local slab 0.
    pub(super) gather: Vec<Link>,
    /// (local sender, global receiver, receiver's band, count word) towards other ranks.
    pub(super) outgoing: Vec<(usize, usize, [f64; 2], usize)>,
    /// (global sender, local receiver) from other ranks.
    pub(super) incoming: Vec<(usize, usize)>,
    /// Each local slab's next free count word.
    pub(super) slots: Vec<usize>,
    /// The records a neighbour link holds at first.
    pub(super) cap: usize,
}

impl Link {
    fn new(
        slabs: &[GpuMd],
        (from, to): (usize, usize),
        band: [f64; 2],
        cap: usize,
        slot: usize,
    ) -> Result<Link> {
        let (fs, ts) = (&slabs[from].stream, &slabs[to].stream);
        let words = cap * MD_SLAB_WORDS;
        Ok(Link {
            from,
            to,
            band,
            send: [
                fs.alloc_zeros::<f64>(words).map_err(drv("alloc"))?,
                fs.alloc_zeros::<f64>(words).map_err(drv("alloc"))?,
            ],
            send_cap: [cap; 2],
            turn: 0,
            recv: ts.alloc_zeros::<f64>(words).map_err(drv("alloc"))?,
            recv_cap: cap,
            slot,
            recv_count: ts.alloc_zeros::<u32>(1).map_err(drv("alloc"))?,
            expect: [usize::MAX; 3],
            pull: false,
        })
    }

    /// The links of `slabs`, this process's slabs (the box's `first..first + slabs.len()`),
    /// where `owns[k]` are the layers of the box's slab k: a link from every slab whose layers
    /// meet another slab's band (layers ± `halo`), sized for the beads within a halo of both
    /// faces at 1.5 times the mean density (a copy moves the whole capacity); between two of
    /// this process's slabs a [`Link`], else one side of a link to another rank. Then a link
    /// from every other local slab to local slab 0, for gathers (grown on first use).
    pub(super) fn all(
        slabs: &[GpuMd],
        owns: &[[f64; 2]],
        first: usize,
        halo: f64,
        ly: f64,
    ) -> Result<Topology> {
        let n = slabs[0].n;
        let cap = (n as f64 * (3.0 * halo / ly).min(1.0)) as usize + 256;
        let local = |k: usize| k.checked_sub(first).filter(|&j| j < slabs.len());
        let mut slots = vec![0usize; slabs.len()];
        let (mut links, mut outgoing, mut incoming) = (Vec::new(), Vec::new(), Vec::new());
        for (to, own) in owns.iter().enumerate() {
            let band = [own[0] - halo, own[1] + halo];
            for from in (0..owns.len()).filter(|&f| f != to) {
                if !meets(owns[from], band, ly) {
                    continue;
                }
                match (local(from), local(to)) {
                    (Some(f), Some(t)) => {
                        let slot = take_slot(&mut slots, f)?;
                        links.push(Link::new(slabs, (f, t), band, cap, slot)?);
                    }
                    (Some(f), None) => outgoing.push((f, to, band, take_slot(&mut slots, f)?)),
                    (None, Some(t)) => incoming.push((from, t)),
                    (None, None) => {}
                }
            }
        }
        let all = [f64::NEG_INFINITY, f64::INFINITY];
        let mut gather = Vec::new();
        for from in 1..slabs.len() {
            let slot = take_slot(&mut slots, from)?;
            gather.push(Link::new(slabs, (from, 0), all, 1024, slot)?);
        }
        Ok(Topology {
            links,
            gather,
            outgoing,
            incoming,
            slots,
            cap,
        })
    }

    /// The records one delivery of `what` copies (pulling: all the sender packed).
    pub(super) fn copied(&self, what: SlabSend) -> usize {
        if self.pull {
            return self.send_cap[self.turn];
        }
        self.send_cap[self.turn]
            .min(self.recv_cap)
            .min(self.expect[what as usize])
    }

    /// Expect about `m` records in the next exchange of `what` (a quarter and 256 more).
    pub(super) fn expect(&mut self, what: SlabSend, m: usize) {
        self.expect[what as usize] = m + m / 4 + 256;
    }

    /// `md_slab_pack` on the sender into this turn's buffer; its count word must be zero
    /// ([`zero_counts`], or zeroed here with `zero_count`).
    pub(super) fn pack(
        &mut self,
        g: &mut GpuMd,
        vel_before: &CudaSlice<f64>,
        what: SlabSend,
        zero_count: bool,
    ) -> Result<()> {
        let t = self.turn;
        let records = Records {
            band: self.band,
            cap: self.send_cap[t],
            slot: self.slot,
        };
        pack_records(g, vel_before, what, records, &mut self.send[t], zero_count)
    }

    /// This turn's drift records handed to the sender's first half (`g`, the sender): the
    /// receiver's band, the send buffer's room and address, the count word's address.
    pub(super) fn fuse_into(&self, g: &GpuMd, s: &mut MdSends) {
        let (t, k) = (self.turn, s.links as usize);
        let (out, _o) = self.send[t].device_ptr(&g.stream);
        let (flags, _f) = g.flags.device_ptr(&g.stream);
        s.band_lo[k] = self.band[0];
        s.band_hi[k] = self.band[1];
        s.cap[k] = self.send_cap[t] as u32;
        s.count[k] = flags + (4 * (MD_FLAG_COUNTS + self.slot)) as u64;
        s.out[k] = out;
        s.links += 1;
    }

    /// Room for `m` records in this turn's send buffer and the receive buffer (every stream has
    /// been waited for: the other buffers are idle).
    pub(super) fn grow(&mut self, m: usize, slabs: &[GpuMd]) -> Result<()> {
        let cap = m + m / 4 + 256;
        let t = self.turn;
        if self.send_cap[t] < m {
            self.send[t] = slabs[self.from]
                .stream
                .alloc_zeros::<f64>(cap * MD_SLAB_WORDS)
                .map_err(drv("alloc"))?;
            self.send_cap[t] = cap;
        }
        if self.recv_cap < m {
            // freed on the receiver's stream, after its earlier copies and unpacks
            self.recv = slabs[self.to]
                .stream
                .alloc_zeros::<f64>(cap * MD_SLAB_WORDS)
                .map_err(drv("alloc"))?;
            self.recv_cap = cap;
        }
        Ok(())
    }

    /// Copy this turn's records (as many as [`Link::copied`]) and the count to the receiver,
    /// once the sender's packs are done (`packed`, recorded on its stream after them), and
    /// unpack them there.
    pub(super) fn deliver(
        &mut self,
        slabs: &mut [GpuMd],
        what: SlabSend,
        packed: &CudaEvent,
    ) -> Result<()> {
        let t = self.turn;
        let limit = self.copied(what);
        let words = limit * MD_SLAB_WORDS;
        let word = MD_FLAG_COUNTS + self.slot;
        let from = &slabs[self.from];
        let s = slabs[self.to].stream.clone();
        s.wait(packed).map_err(drv("event"))?;
        if self.pull {
            let (sender, receiver) = sender_and_receiver(slabs, self.from, self.to);
            let count = sender.flags.slice(word..word + 1);
            let records = self.send[t].slice(..words);
            return unpack_records(receiver, &count, limit, &records);
        }
        s.memcpy_dtod(
            &self.send[t].slice(..words),
            &mut self.recv.slice_mut(..words),
        )
        .map_err(drv("slab copy"))?;
        s.memcpy_dtod(&from.flags.slice(word..word + 1), &mut self.recv_count)
            .map_err(drv("slab copy"))?;
        let (count, records) = (self.recv_count.slice(..), self.recv.slice(..words));
        unpack_records(&mut slabs[self.to], &count, limit, &records)
    }
}

/// Slab `from` to read and slab `to` to write (two different slabs).
fn sender_and_receiver(slabs: &mut [GpuMd], from: usize, to: usize) -> (&GpuMd, &mut GpuMd) {
    if from < to {
        let (a, b) = slabs.split_at_mut(to);
        (&a[from], &mut b[0])
    } else {
        let (a, b) = slabs.split_at_mut(from);
        (&b[0], &mut a[to])
    }
}

/// Where a sender's records go and how many fit: the receiver's band, the buffer's capacity
/// in records, the sender's count word (`flags[MD_FLAG_COUNTS + slot]`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Records {
    pub(super) band: [f64; 2],
    pub(super) cap: usize,
    pub(super) slot: usize,
}

/// `md_slab_pack` on `g`: the beads `what` names within `to.band` into `out` (room for
/// `to.cap` records), counted in the flag word `to.slot`, which must be zero (or is zeroed
/// here with `zero_count`).
pub(super) fn pack_records(
    g: &mut GpuMd,
    vel_before: &CudaSlice<f64>,
    what: SlabSend,
    to: Records,
    out: &mut CudaSlice<f64>,
    zero_count: bool,
) -> Result<()> {
    let s = g.stream.clone();
    let word = MD_FLAG_COUNTS + to.slot;
    if zero_count {
        s.memset_zeros(&mut g.flags.slice_mut(word..word + 1))
            .map_err(drv("memset"))?;
    }
    if out.len() < to.cap * MD_SLAB_WORDS {
        return Err(MpcError::Device(format!(
            "MD slab records: a buffer of {} values for {} records (please report it)",
            out.len(),
            to.cap
        )));
    }
    let (n, mode) = (g.n as u32, what as i32);
    let cap = to.cap as u32;
    let ly = g.sys.box_len[1];
    let own = g.role.own;
    let d = &g.parts;
    let y_prev = g.y_prev.as_ref().expect("slabs keep y_prev");
    let mut count = g.flags.slice_mut(word..word + 1);
    let mut b = s.launch_builder(&g.k.slab_pack);
    b.arg(&n)
        .arg(&mode)
        .arg(&d.pos)
        .arg(&d.vel)
        .arg(&d.image)
        .arg(&d.built_at)
        .arg(&d.force)
        .arg(y_prev)
        .arg(vel_before)
        .arg(&ly)
        .arg(&own[0])
        .arg(&own[1])
        .arg(&to.band[0])
        .arg(&to.band[1])
        .arg(&cap)
        .arg(out)
        .arg(&mut count);
    // beads the slab owns are all in its work list, those its collision may change in its
    // collider list
    let list = match what {
        SlabSend::Collided => g.colliders.as_ref(),
        _ => g.work.as_ref(),
    };
    push_items(&mut b, list, true, &n);
    let m = items(list, true, g.n);
    // SAFETY: md_slab_pack(n, mode, pos, vel, image, built_at, force, y_prev, vel_before,
    // ly, own_lo, own_hi, band_lo, band_hi, cap, out, count, m, work) in order and type;
    // the particle arrays hold 3n (pos, vel, image, built_at, force, vel_before) or n
    // (y_prev) elements of this slab's GPU, `work` m indices < n (or null for all n);
    // `out` holds at least cap records of MD_SLAB_WORDS f64 (checked above) and the kernel writes a
    // record only below cap; `count` is one u32 (a flag word, zero); the mode is a SlabSend
    // value.
    unsafe { b.launch(grid(m)) }.map_err(drv("md_slab_pack"))?;
    Ok(())
}

/// `md_slab_snapshot_velocities` on `g`'s stream: the velocities of the beads in its collider
/// list copied into `before` (at their indices), for [`SlabSend::Collided`].
pub(super) fn snapshot_collider_velocities(
    g: &mut GpuMd,
    before: &mut CudaSlice<f64>,
) -> Result<()> {
    let s = g.stream.clone();
    let n = g.n as u32;
    let mut b = s.launch_builder(&g.k.slab_snapshot);
    push_items(&mut b, g.colliders.as_ref(), true, &n);
    let m = items(g.colliders.as_ref(), true, g.n);
    b.arg(&g.parts.vel).arg(before);
    // SAFETY: md_slab_snapshot_velocities(m, work, vel, out) in order and type; `work` holds m
    // indices < n (or is null with m = n), `vel` and `before` 3n f64 on this slab's GPU.
    unsafe { b.launch(grid(m)) }.map_err(drv("md_slab_snapshot_velocities"))?;
    Ok(())
}

/// `md_slab_unpack` on `to`'s stream: the first min(count, limit) records of `recv` (queued
/// on that stream before, or in a sender's memory that `to`'s GPU may read, ordered before by
/// an event) written at their beads' indices.
pub(super) fn unpack_records(
    to: &mut GpuMd,
    recv_count: &CudaView<u32>,
    limit: usize,
    recv: &CudaView<f64>,
) -> Result<()> {
    if recv.len() < limit * MD_SLAB_WORDS || recv_count.is_empty() {
        return Err(MpcError::Device(format!(
            "MD slab records: {} values for {limit} records (please report it)",
            recv.len()
        )));
    }
    let s = to.stream.clone();
    let limit32 = limit as u32;
    let d = &mut to.parts;
    // SAFETY: in order and type; `recv` holds at least `limit` records (checked above), written
    // before on this stream or (pulling) in memory this GPU may read, behind an event this stream
    // waited for, of which the first min(count, limit) were written by md_slab_pack, each naming a
    // particle index < n; the particle arrays hold 3n elements on this GPU.
    unsafe {
        to.k.slab_unpack(
            &s,
            grid(limit),
            recv_count,
            &limit32,
            recv,
            &mut d.pos,
            &mut d.vel,
            &mut d.image,
            &mut d.built_at,
            &mut d.force,
        )
    }
    .map_err(drv("md_slab_unpack"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_md_exchange_value_parses() {
        let pull: Vec<bool> = crate::knobs::MD_EXCHANGES
            .iter()
            .map(|v| super::pull_wanted(Some(v)))
            .collect();
        assert_eq!(pull, [true, false], "pull, copy");
        assert!(super::pull_wanted(None), "pull by default");
    }
}
