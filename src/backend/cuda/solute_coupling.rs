//! The solutes' coupling on one GPU as a feature of its own: [`SoluteCoupling`] holds what a
//! coupled step keeps between its calls, and its passes take the fluid as a [`FluidView`]:
//! binning and colliding (`solutes.rs`), the host arrays' transfers (`host_staging.rs`), the
//! checks of a caller's device arrays (`device_solutes.rs`). The order of the passes within a
//! step is `step.rs`'s.
//!
//! [`FluidView`]: super::fluid_view::FluidView

use std::sync::Arc;

use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, PinnedHostSlice};

use super::device::drv;
use super::params::KernelParams;
use crate::error::{MpcError, Result};

/// The solutes' side of one GPU's backend: mpcbox's own solute buffers and the state of a
/// coupled step in progress, host arrays (`host_staging.rs`) or the caller's device arrays
/// (`device_solutes.rs`).
#[derive(Default)]
pub(super) struct SoluteCoupling {
    /// Solutes uploaded from host arrays (or routed here from another slab), grown on demand.
    pub(super) buffers: Option<SoluteBuffers>,
    /// Streams and pinned buffers of the split host-array step (made at its first use).
    pub(super) host_io: Option<CoupledIo>,
    /// A coupled step begun (`begin_coupled_step`) and not finished: its parameters and
    /// solute count.
    pub(super) in_flight: Option<(KernelParams, usize)>,
    /// The fluid's part of a device-solute step queued (`begin_fluid_step`): its parameters.
    pub(super) fluid_begun: Option<KernelParams>,
    /// The caller's device arrays: their cells, images, check buffer and ordering events.
    pub(super) device: Option<DeviceSoluteState>,
}

/// mpcbox's own solute buffers, grown on demand.
pub(super) struct SoluteBuffers {
    pub(super) capacity: usize,
    pub(super) pos: CudaSlice<f64>,
    pub(super) vel: CudaSlice<f64>,
    pub(super) mass: CudaSlice<f64>,
    /// Cell of each solute (not packed: a solute's image may span many periods).
    pub(super) cell: CudaSlice<u32>,
    /// Lees-Edwards image of each solute (`Physics::locate_solute`).
    pub(super) image: CudaSlice<i32>,
}

/// What a device-resident coupled step keeps between steps: the solutes' cells and images (the
/// arrays themselves are the caller's), the check's result buffer and the events that order the
/// step with the caller's stream.
pub(super) struct DeviceSoluteState {
    pub(super) capacity: usize,
    pub(super) cell: CudaSlice<u32>,
    pub(super) image: CudaSlice<i32>,
    pub(super) first_bad: CudaSlice<u32>,
    pub(super) caller_ready: CudaEvent,
    pub(super) velocities_done: CudaEvent,
}

/// The split coupled step's transfer machinery: its own non-blocking streams, so the solute
/// upload overlaps the fluid streaming and the download overlaps the fluid collision, and
/// pinned host buffers of exactly the solute count (a copy from pageable memory would block).
pub(super) struct CoupledIo {
    pub(super) upload: Arc<CudaStream>,
    pub(super) download: Arc<CudaStream>,
    pub(super) n: usize,
    pub(super) pos: PinnedHostSlice<f64>,
    pub(super) vel: PinnedHostSlice<f64>,
    pub(super) mass: PinnedHostSlice<f64>,
    pub(super) out: PinnedHostSlice<f64>,
    /// One event per piece of the velocities coming down (`pieces::download`).
    pub(super) arrived: Vec<CudaEvent>,
    /// The check kernel's four first-bad indices for arrays that went up untested, straight
    /// from the caller's page-locked memory (`host_staging.rs`).
    pub(super) first_bad: CudaSlice<u32>,
}

impl SoluteCoupling {
    /// The host-array step's staging and solute buffers, both made by `begin_coupled_step`.
    pub(super) fn staged(&mut self) -> Result<(&mut CoupledIo, &mut SoluteBuffers)> {
        match (self.host_io.as_mut(), self.buffers.as_mut()) {
            (Some(io), Some(sb)) => Ok((io, sb)),
            _ => Err(MpcError::Device(
                "a host-array solute step went on without being begun (please report it)".into(),
            )),
        }
    }

    /// Own solute buffers for at least `ns` solutes (a power of two, at least 64), allocated
    /// on `stream`.
    pub(super) fn ensure_capacity(&mut self, stream: &Arc<CudaStream>, ns: usize) -> Result<()> {
        if self.buffers.as_ref().is_some_and(|b| b.capacity >= ns) {
            return Ok(());
        }
        let cap = ns.next_power_of_two().max(64);
        let s = stream;
        self.buffers = Some(SoluteBuffers {
            capacity: cap,
            pos: s.alloc_zeros::<f64>(3 * cap).map_err(drv("solute alloc"))?,
            vel: s.alloc_zeros::<f64>(3 * cap).map_err(drv("solute alloc"))?,
            mass: s.alloc_zeros::<f64>(cap).map_err(drv("solute alloc"))?,
            cell: s.alloc_zeros::<u32>(cap).map_err(drv("solute alloc"))?,
            image: s.alloc_zeros::<i32>(cap).map_err(drv("solute alloc"))?,
        });
        Ok(())
    }

    /// Refuse a new step while a coupled one is begun and not finished.
    pub(super) fn check_idle(&self) -> Result<()> {
        if self.in_flight.is_some() || self.fluid_begun.is_some() {
            return Err(MpcError::Device(
                "a step was begun and not finished; fix: finish it before beginning another".into(),
            ));
        }
        Ok(())
    }
}
