//! The exchange rounds of a [`SlabMd`] over its links (`exchange`): queue every pack,
//! delivery and flags' copy, then wait for the flags, send again what did not fit, check the
//! flags and cross to other ranks. And the list builds over all slabs.

use super::exchange::{zero_counts, Link, SlabSend};
use super::{SlabMd, HOST_FLAGS_WAIT};
use crate::backend::cuda::contract::MD_FUSED_SENDS;
use crate::error::Result;
use crate::md::gpu::integrate::MdSends;
use crate::md::gpu::{drv, MD_FLAG_COUNTS, MD_FLAG_REBUILD};

impl SlabMd {
    /// One exchange along the neighbour links.
    pub(super) fn exchange(&mut self, what: SlabSend) -> Result<()> {
        let mut links = std::mem::take(&mut self.links);
        let r = self.run_links(&mut links, what, false);
        self.links = links;
        r.map(|_| ())
    }

    /// Every bead to slab 0 (of every rank) from its owner.
    pub(super) fn exchange_gather(&mut self) -> Result<()> {
        let mut links = std::mem::take(&mut self.gather);
        let r = self.run_links(&mut links, SlabSend::Owned, true);
        self.gather = links;
        r.map(|_| ())
    }

    /// Hand every slab's neighbour links to its next first half, which then packs the drift's
    /// records itself (one launch fewer per link and step, off the exchange's chain); the
    /// count words are zeroed first if an exchange left them dirty. Nothing is handed (the
    /// exchange packs as before) where a slab sends to more slabs than a first half packs
    /// for. Links to other ranks always pack apart.
    pub(super) fn fuse_drift_sends(&mut self) -> Result<()> {
        if self.counts_dirty {
            for g in &mut self.slabs {
                zero_counts(g)?;
            }
            self.counts_dirty = false;
        }
        let mut sends = vec![MdSends::default(); self.slabs.len()];
        for l in &self.links {
            let s = &mut sends[l.from];
            if s.links as usize == MD_FUSED_SENDS {
                return Ok(());
            }
            l.fuse_into(&self.slabs[l.from], s);
        }
        for (g, s) in self.slabs.iter_mut().zip(sends) {
            g.fused_sends = s;
        }
        self.drift_packed = true;
        Ok(())
    }

    /// The drift's exchange; every slab's flags are checked with its counts (the step's one
    /// wait per slab); whether any slab (of any rank) asks for a list build.
    pub(super) fn exchange_after_drift(&mut self) -> Result<bool> {
        let mut links = std::mem::take(&mut self.links);
        let r = self.run_links(&mut links, SlabSend::Drifted, false);
        self.links = links;
        Ok(r?.1)
    }

    /// [`SlabMd::queue_links`] then [`SlabMd::finish_links`]: returns the flags and whether any
    /// slab (of any rank) asks for a list build. (Queueing the forces between the two, with
    /// the lists as they are, and computing them again after a build, was measured: no gain,
    /// the GPUs are the bound; see ARCHITECTURE.)
    fn run_links(
        &mut self,
        links: &mut [Link],
        what: SlabSend,
        gather: bool,
    ) -> Result<(Vec<Vec<u32>>, bool)> {
        self.queue_links(links, what, gather)?;
        self.finish_links(links, what, gather)
    }

    /// Pack and deliver along every link, and queue every slab's flags' copy, without waiting.
    fn queue_links(&mut self, links: &mut [Link], what: SlabSend, gather: bool) -> Result<()> {
        if self.counts_dirty {
            for g in &mut self.slabs {
                zero_counts(g)?;
            }
        }
        self.counts_dirty = true;
        // the step's first halves packed the drift's records themselves (fuse_drift_sends)
        let packed = what == SlabSend::Drifted && !gather && std::mem::take(&mut self.drift_packed);
        for l in links.iter_mut().filter(|_| !packed) {
            l.pack(
                &mut self.slabs[l.from],
                &self.vel_before[l.from],
                what,
                false,
            )?;
        }
        if let Some(remote) = self.remote.as_mut() {
            remote.pack(&mut self.slabs, &self.vel_before, what, gather)?;
        }
        for (g, e) in self.slabs.iter().zip(&self.packed) {
            e.record(&g.stream).map_err(drv("event"))?;
        }
        for l in links.iter_mut() {
            l.deliver(&mut self.slabs, what, &self.packed[l.from])?;
        }
        for g in &mut self.slabs {
            g.queue_flags()?;
        }
        Ok(())
    }

    /// After [`SlabMd::queue_links`]: read every slab's flags (the counts among them) and check
    /// them; a link whose count exceeded what was copied grows and is sent again, waited for.
    /// Links to other ranks (`gather`: the gathers') cross last. Returns the flags and whether
    /// any slab (of any rank) asks for a list build.
    ///
    /// The waits are for the events behind the flags' copies, so every pack, copy and unpack
    /// of this exchange has run, and with it every use of the other send buffers (the next
    /// exchange packs into them). The count words are zeroed after the flags' wait (and after a
    /// repeated pack's read), off the next exchange's path; only an exchange that failed leaves
    /// them for the next to zero first.
    fn finish_links(
        &mut self,
        links: &mut [Link],
        what: SlabSend,
        gather: bool,
    ) -> Result<(Vec<Vec<u32>>, bool)> {
        let blocked = std::time::Instant::now();
        let mut flags = self
            .slabs
            .iter()
            .map(|g| g.queued_flags())
            .collect::<Result<Vec<_>>>()?;
        self.host_seconds[HOST_FLAGS_WAIT] += blocked.elapsed().as_secs_f64();
        // behind every unpack (they have run: every stream was waited for up to its flags'
        // copy), which may have read the count words where they lie
        for g in &mut self.slabs {
            zero_counts(g)?;
        }
        for l in links.iter_mut() {
            let m = flags[l.from][MD_FLAG_COUNTS + l.slot] as usize;
            if m > l.copied(what) {
                l.grow(m, &self.slabs)?;
                l.expect(what, m);
                l.pack(
                    &mut self.slabs[l.from],
                    &self.vel_before[l.from],
                    what,
                    true,
                )?;
                let from = &self.slabs[l.from];
                self.packed[l.from]
                    .record(&from.stream)
                    .map_err(drv("event"))?;
                l.deliver(&mut self.slabs, what, &self.packed[l.from])?;
                flags[l.from] = self.slabs[l.from].read_flags()?;
                // the unpack (which may read the count word where it lies) before the zeroing
                self.slabs[l.to].synchronize()?;
                zero_counts(&mut self.slabs[l.from])?;
            }
            l.expect(what, m);
            l.turn ^= 1;
        }
        let mut rebuild = false;
        for (g, f) in self.slabs.iter().zip(&flags) {
            g.check_flags(f)?;
            rebuild |= f[MD_FLAG_REBUILD] != 0;
        }
        if let Some(remote) = self.remote.as_mut() {
            let how = (what, gather);
            rebuild = remote.cross(&mut self.slabs, &self.vel_before, how, &mut flags, rebuild)?;
        }
        self.counts_dirty = false;
        Ok((flags, rebuild))
    }

    /// Every slab's list built anew: every slab's binning, sorting and filling queued before
    /// the first wait; a slab whose cells or list overflowed builds again alone with the
    /// larger capacity.
    pub(super) fn build_all(&mut self) -> Result<()> {
        let geometry = self
            .slabs
            .iter_mut()
            .map(|g| {
                let geo = g.launch_bin()?;
                g.launch_fill(&geo)?;
                Ok(geo)
            })
            .collect::<Result<Vec<_>>>()?;
        for (g, geo) in self.slabs.iter_mut().zip(&geometry) {
            if g.build_fits(geo)? {
                g.list_built();
            } else {
                g.build_list()?;
            }
        }
        Ok(())
    }
}
