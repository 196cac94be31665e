//! The solutes' state of one GPU's backend in one place: what `solutes.rs`,
//! `host_staging.rs` and `device_solutes.rs` keep between the calls of a coupled step.

use super::buffers::SoluteBuffers;
use super::device_solutes::DeviceSoluteState;
use super::host_staging::CoupledIo;
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
}
