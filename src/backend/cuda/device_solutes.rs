//! Device-resident solutes: a coupled step whose solute arrays already live in this GPU's memory
//! (the bundled GPU MD engine, CuPy/PyTorch arrays, a C code's device buffers). The solutes are
//! checked here (driver pointer attributes, then `kernels/device_solutes.cu` over the values,
//! passes of [`SoluteCoupling`]), binned, summed into the cells and collided in place on the
//! GPU (`solutes.rs`), in the order of `step.rs`; the only host traffic is the check's four
//! indices and the step's report, as in a fluid-only step. The step is ordered with the
//! caller's stream by events, without blocking the host.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::sys;
use cudarc::driver::{CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr, PushKernelArg};

use super::device::{drv, grid, CudaDevice};
use super::solute_coupling::{DeviceSoluteState, SoluteCoupling};
use crate::backend::MAX_SOLUTE_COORDINATE;
use crate::backend::{DeviceSolutes, SlabSolutes, SoluteSubset};
use crate::error::{MpcError, Result};

fn solute_error(field: &str, problem: String, fix: &str) -> MpcError {
    MpcError::Solute {
        field: field.into(),
        problem,
        fix: fix.into(),
    }
}

/// One pointer attribute of `addr` as a plain value of type `T` (the attribute's C type).
fn pointer_attribute<T: Default>(addr: u64, attribute: sys::CUpointer_attribute) -> Option<T> {
    let mut value = T::default();
    // SAFETY: `value` is a valid, writable `T`, and the caller pairs each attribute with its C
    // type (MEMORY_TYPE: u32, DEVICE_ORDINAL: i32, RANGE_START_ADDR: CUdeviceptr = u64,
    // RANGE_SIZE: size_t = usize); the driver only reads `addr` as an integer.
    let r =
        unsafe { sys::cuPointerGetAttribute(&mut value as *mut T as *mut c_void, attribute, addr) };
    (r == sys::CUresult::CUDA_SUCCESS).then_some(value)
}

/// The GPU whose memory `addr` is (None for host memory, or an address CUDA does not know).
pub(in crate::backend::cuda) fn device_of(addr: u64) -> Option<usize> {
    use sys::CUpointer_attribute as A;
    let kind = pointer_attribute::<u32>(addr, A::CU_POINTER_ATTRIBUTE_MEMORY_TYPE)?;
    if kind != sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32 {
        return None;
    }
    let ordinal = pointer_attribute::<i32>(addr, A::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)?;
    usize::try_from(ordinal).ok()
}

/// Whether the host slice `s` is page-locked (pinned or registered with CUDA: `cudaHostAlloc`,
/// `cudaHostRegister`, PyTorch's `pin_memory`, CuPy's pinned arrays, `mpcbox`'s own), judged
/// by its first and last byte: such memory is copied to and from a GPU by DMA without staging.
/// A wrong guess costs speed only: a copy from pageable memory is staged by the driver.
pub fn page_locked<T>(s: &[T]) -> bool {
    use sys::CUpointer_attribute as A;
    let bytes = std::mem::size_of_val(s) as u64;
    if bytes == 0 {
        return false;
    }
    let first = s.as_ptr() as u64;
    [first, first + bytes - 1].iter().all(|&a| {
        pointer_attribute::<u32>(a, A::CU_POINTER_ATTRIBUTE_MEMORY_TYPE)
            == Some(sys::CUmemorytype::CU_MEMORYTYPE_HOST as u32)
    })
}

/// Refuse `addr` unless it is device memory of GPU `ordinal` with `bytes` readable from it.
fn check_device_pointer(addr: u64, bytes: usize, field: &str, ordinal: usize) -> Result<()> {
    use sys::CUpointer_attribute as A;
    let host_fix = "pass an array allocated on the fluid's GPU (cudaMalloc, cuMemAlloc, CuPy, \
                    PyTorch), or hand host arrays over with step_with_solutes / mpcbox_step";
    if addr == 0 {
        return Err(solute_error(
            field,
            "is a NULL device pointer".into(),
            host_fix,
        ));
    }
    if !addr.is_multiple_of(8) {
        return Err(solute_error(
            field,
            format!("device pointer {addr:#x} is not aligned to 8 bytes"),
            "pass float64 arrays starting at an element boundary",
        ));
    }
    let Some(kind) = pointer_attribute::<u32>(addr, A::CU_POINTER_ATTRIBUTE_MEMORY_TYPE) else {
        return Err(solute_error(
            field,
            format!("{addr:#x} is not CUDA memory (a host array?)"),
            host_fix,
        ));
    };
    if kind != sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32 {
        return Err(solute_error(
            field,
            format!("{addr:#x} is host memory, not device memory"),
            host_fix,
        ));
    }
    let owner =
        pointer_attribute::<i32>(addr, A::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL).unwrap_or(-1);
    if owner != ordinal as i32 {
        return Err(solute_error(
            field,
            format!("lives on GPU {owner}, the fluid on GPU {ordinal}"),
            &format!(
                "allocate the solutes on cuda:{ordinal}, or run the fluid on the solutes' GPU \
                 (device: Cuda([{owner}]))"
            ),
        ));
    }
    let start = pointer_attribute::<u64>(addr, A::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR);
    let size = pointer_attribute::<usize>(addr, A::CU_POINTER_ATTRIBUTE_RANGE_SIZE);
    if let (Some(start), Some(size)) = (start, size) {
        let available = (start + size as u64).saturating_sub(addr);
        if available < bytes as u64 {
            return Err(solute_error(
                field,
                format!(
                    "the allocation holds {available} bytes from {addr:#x}; {bytes} are needed"
                ),
                "pass arrays of 3n (pos, vel) and n (mass) float64 for n solutes",
            ));
        }
    }
    Ok(())
}

/// The error for the first bad solute `mpc_check_solutes` (or the multi-GPU routing) found, if
/// any, from the lowest index of each kind (u32::MAX where none): the lowest index, named by its
/// first bad kind, as the host check names it. `mass_cap` is the test's
/// (the run's [`super::params::solute_mass_cap`]).
pub(in crate::backend::cuda) fn first_bad_to_error(first: &[u32; 4], mass_cap: f64) -> Result<()> {
    let (heavy, heavy_fix);
    let (mass_problem, mass_fix) = if mass_cap.is_finite() {
        heavy = format!(
            "a mass that is not finite, > 0 and at most {mass_cap} (the most the fixed-point \
             cell sums hold: {} fluid masses, or the heaviest md bead)",
            crate::fixed_sums::SOLUTE_MASS_RATIO
        );
        heavy_fix = "pass finite masses > 0 within that cap, or sum in f64 with \
                     MPCBOX_CELL_SUMS=float (runs then agree only to rounding across thread, \
                     slab and GPU counts)";
        (heavy.as_str(), heavy_fix)
    } else {
        (
            "a mass that is not finite and > 0",
            "pass finite masses > 0",
        )
    };
    let problems = [
        (
            "positions",
            "a non-finite position",
            "pass finite positions",
        ),
        (
            "positions",
            "a coordinate over 1e9 cells from the origin",
            "pass positions in the MPC box's units (cell size a = 1); coordinates outside \
             the box are wrapped",
        ),
        (
            "velocities",
            "a non-finite velocity",
            "pass finite velocities",
        ),
        ("masses", mass_problem, mass_fix),
    ];
    // the lowest bad index, and of its kinds the first: what the host check names
    let Some(k) = (0..4)
        .filter(|&k| first[k] != u32::MAX)
        .min_by_key(|&k| (first[k], k))
    else {
        return Ok(());
    };
    let (field, what, fix) = problems[k];
    Err(solute_error(
        field,
        format!("solute {} has {what}", first[k]),
        fix,
    ))
}

/// Queue `mpc_check_solutes` on `stream` over the solutes of `s` (every one, or those `subset`
/// lists), each kind's lowest bad index into `first_bad` (four words, set to u32::MAX before).
///
/// # Safety
/// `s`'s addresses must hold 3n, 3n and n doubles of `stream`'s GPU, the subset (if any) as
/// many indices < n as it says, and nothing may write them until `stream` has passed the check.
pub(super) unsafe fn queue_value_check(
    stream: &CudaStream,
    dev: &CudaDevice,
    s: &DeviceSolutes,
    subset: Option<SoluteSubset>,
    mass_cap: f64,
    first_bad: &mut CudaSlice<u32>,
) -> Result<()> {
    let (slots, listed) = super::solutes::solute_slots(s, subset);
    let n32 = slots as u32;
    // SAFETY: mpc_check_solutes(const double*, const double*, const double*, unsigned int,
    // double, double, unsigned int*, const unsigned int*): the caller's promises on the arrays
    // and the subset (or null for all n), the slots, the limit, the mass cap and the four
    // words; one thread per slot.
    unsafe {
        stream
            .launch_builder(&dev.k.check_solutes)
            .arg(&s.pos)
            .arg(&s.vel)
            .arg(&s.mass)
            .arg(&n32)
            .arg(&MAX_SOLUTE_COORDINATE)
            .arg(&mass_cap)
            .arg(first_bad)
            .arg(&listed)
            .launch(grid(slots))
            .map_err(drv("solute check"))?;
    }
    Ok(())
}

/// The check kernel over every solute of `s` on `stream` (after what is queued there), the host
/// waiting for its verdict: true when every value is good.
///
/// # Safety
/// As [`queue_value_check`] (without a subset).
pub(super) unsafe fn values_good(
    stream: &std::sync::Arc<CudaStream>,
    dev: &CudaDevice,
    s: &DeviceSolutes,
    mass_cap: f64,
    first_bad: &mut CudaSlice<u32>,
) -> Result<bool> {
    stream
        .memcpy_htod(&[u32::MAX; 4], first_bad)
        .map_err(drv("solute check"))?;
    // SAFETY: the caller's promises, passed on.
    unsafe { queue_value_check(stream, dev, s, None, mass_cap, first_bad) }?;
    let mut first = [0u32; 4];
    stream
        .memcpy_dtoh(first_bad, &mut first)
        .map_err(drv("solute check"))?;
    Ok(first == [u32::MAX; 4])
}

/// Make `waiter` wait for everything queued on `signaller` so far (a raw `CUstream`; 0 is the
/// legacy default stream), through `event`, without blocking the host.
fn order_after(event: &CudaEvent, signaller: sys::CUstream, waiter: sys::CUstream) -> Result<()> {
    // SAFETY: `event` belongs to the backend's context, which is current (bound by the caller);
    // both streams are live streams of that context (the caller's, whose validity the public
    // API documents, and the backend's own).
    let r = unsafe { sys::cuEventRecord(event.cu_event(), signaller) };
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(MpcError::Device(format!(
            "cuEventRecord on the solutes' stream failed ({r:?}); fix: pass a live CUDA stream \
             of the fluid's GPU, or 0"
        )));
    }
    // SAFETY: as above; the event was recorded just now.
    let r = unsafe { sys::cuStreamWaitEvent(waiter, event.cu_event(), 0) };
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(MpcError::Device(format!(
            "cuStreamWaitEvent failed ({r:?})"
        )));
    }
    Ok(())
}

impl SoluteCoupling {
    /// The cells/images/check buffers for `ns` device-resident solutes, grown on demand.
    pub(super) fn device_state(
        &mut self,
        dev: &CudaDevice,
        ns: usize,
    ) -> Result<&mut DeviceSoluteState> {
        if self.device.as_ref().is_none_or(|d| d.capacity < ns) {
            let cap = ns.next_power_of_two().max(64);
            let s = &dev.stream;
            self.device = Some(DeviceSoluteState {
                capacity: cap,
                cell: s.alloc_zeros::<u32>(cap).map_err(drv("solute alloc"))?,
                image: s.alloc_zeros::<i32>(cap).map_err(drv("solute alloc"))?,
                first_bad: s.alloc_zeros::<u32>(4).map_err(drv("solute alloc"))?,
                caller_ready: dev.ctx.new_event(None).map_err(drv("event"))?,
                velocities_done: dev.ctx.new_event(None).map_err(drv("event"))?,
            });
        }
        Ok(self.device.as_mut().expect("made above"))
    }

    /// [`crate::backend::Backend::check_device_solutes`] on `dev`: pointer checks, then one
    /// kernel over the values (after the caller's queued work), whose four indices come back.
    pub(super) fn check_device(
        &mut self,
        dev: &CudaDevice,
        s: &DeviceSolutes,
        mass_cap: f64,
    ) -> Result<()> {
        self.check_pointers(dev, s)?;
        let first_bad = self.first_bad(dev, s, None, mass_cap)?;
        first_bad_to_error(&first_bad, mass_cap)
    }

    /// [`SoluteCoupling::check_device`] for one slab's copy: the pointers as there, the
    /// subset's array too, and the values of the listed solutes only (the slab bins no other).
    pub(super) fn check_slab(
        &mut self,
        dev: &CudaDevice,
        slab: &SlabSolutes,
        mass_cap: f64,
    ) -> Result<()> {
        let Some(subset) = slab.subset else {
            return self.check_device(dev, &slab.solutes, mass_cap);
        };
        let s = &slab.solutes;
        if subset.len > s.n {
            return Err(solute_error(
                "subset",
                format!("{} listed of {} solutes", subset.len, s.n),
                "list each solute at most once (please report it)",
            ));
        }
        self.check_pointers(dev, s)?;
        if subset.len > 0 {
            check_device_pointer(subset.index, 4 * subset.len, "subset", dev.ordinal)?;
        }
        let first_bad = self.first_bad(dev, s, Some(subset), mass_cap)?;
        first_bad_to_error(&first_bad, mass_cap)
    }

    /// No step in flight, a count the kernels can index, and arrays of `dev` of the sizes the
    /// count needs (`dev`'s context bound).
    pub(in crate::backend::cuda) fn check_pointers(
        &self,
        dev: &CudaDevice,
        s: &DeviceSolutes,
    ) -> Result<()> {
        if self.in_flight.is_some() {
            return Err(MpcError::Device(
                "a coupled step was begun and not finished; fix: call finish_step first".into(),
            ));
        }
        let ns = s.n;
        if ns > u32::MAX as usize / 3 {
            return Err(solute_error(
                "lengths",
                format!("{ns} solutes"),
                "pass at most 1.4e9 solutes per step",
            ));
        }
        dev.ctx.bind_to_thread().map_err(drv("bind"))?;
        let ordinal = dev.ordinal;
        check_device_pointer(s.pos, 24 * ns, "positions", ordinal)?;
        check_device_pointer(s.vel, 24 * ns, "velocities", ordinal)?;
        check_device_pointer(s.mass, 8 * ns, "masses", ordinal)
    }

    /// The first index of each kind of bad value in `s` (u32::MAX where none), from
    /// `mpc_check_solutes` on the main stream, ordered after the caller's queued work: over
    /// every solute, or over those `subset` lists.
    fn first_bad(
        &mut self,
        dev: &CudaDevice,
        s: &DeviceSolutes,
        subset: Option<SoluteSubset>,
        mass_cap: f64,
    ) -> Result<[u32; 4]> {
        let main = dev.stream.clone();
        self.arm_value_test(dev, s)?;
        let st = self.device.as_mut().expect("made by arm_value_test");
        // SAFETY: the three addresses were checked to hold 3n, 3n and n doubles on this GPU
        // (`check_pointers`), the subset to hold its indices there (the slab's MD engine lists
        // indices < n), and the caller's work on them is ordered before the main stream's
        // (`arm_value_test`, which also set the four first-bad words).
        unsafe { queue_value_check(&main, dev, s, subset, mass_cap, &mut st.first_bad) }?;
        self.read_first_bad(dev)
    }

    /// Before a test of the values (the check kernel, or a binning that tests them itself:
    /// `bin_from` with `test_values`): the main stream ordered after the caller's queued work,
    /// and the four first-bad words set to none on it.
    pub(super) fn arm_value_test(&mut self, dev: &CudaDevice, s: &DeviceSolutes) -> Result<()> {
        let main = dev.stream.clone();
        let st = self.device_state(dev, s.n)?;
        order_after(
            &st.caller_ready,
            s.stream as sys::CUstream,
            main.cu_stream(),
        )?;
        main.memcpy_htod(&[u32::MAX; 4], &mut st.first_bad)
            .map_err(drv("solute check"))
    }

    /// What the binning's test found (waits for it): an error naming the first bad value.
    pub(super) fn value_test_result(&mut self, dev: &CudaDevice, mass_cap: f64) -> Result<()> {
        first_bad_to_error(&self.read_first_bad(dev)?, mass_cap)
    }

    /// The four first-bad words (waits for the test on the main stream).
    fn read_first_bad(&self, dev: &CudaDevice) -> Result<[u32; 4]> {
        let st = self
            .device
            .as_ref()
            .ok_or_else(|| MpcError::Device("solute values read before they were tested".into()))?;
        let mut first = [0u32; 4];
        dev.stream
            .memcpy_dtoh(&st.first_bad, &mut first)
            .map_err(drv("solute check"))?;
        Ok(first)
    }

    /// After the collision of the caller's device solutes (queued on `dev`'s main stream):
    /// order the caller's stream after it, without blocking the host.
    pub(super) fn release_to_caller(&self, dev: &CudaDevice, s: &DeviceSolutes) -> Result<()> {
        let st = self.device.as_ref().ok_or_else(|| {
            MpcError::Device("device solutes released before they were binned".into())
        })?;
        order_after(
            &st.velocities_done,
            dev.stream.cu_stream(),
            s.stream as sys::CUstream,
        )
    }
}

/// Solute arrays on a GPU, owned by mpcbox: for tests, benchmarks and examples that need
/// device-resident solutes without an MD code of their own.
pub struct DeviceSoluteArrays {
    stream: Arc<CudaStream>,
    n: usize,
    pub pos: CudaSlice<f64>,
    pub vel: CudaSlice<f64>,
    pub mass: CudaSlice<f64>,
}

impl DeviceSoluteArrays {
    /// Copy host solutes to GPU `ordinal`.
    pub fn upload(
        ordinal: usize,
        pos: &[[f64; 3]],
        vel: &[[f64; 3]],
        mass: &[f64],
    ) -> Result<DeviceSoluteArrays> {
        crate::backend::check_solute_lengths(pos.len(), vel.len(), mass.len())?;
        let ctx = CudaContext::new(ordinal).map_err(drv("context"))?;
        let stream = ctx.default_stream();
        Ok(DeviceSoluteArrays {
            n: pos.len(),
            pos: stream
                .clone_htod(pos.as_flattened())
                .map_err(drv("upload"))?,
            vel: stream
                .clone_htod(vel.as_flattened())
                .map_err(drv("upload"))?,
            mass: stream.clone_htod(mass).map_err(drv("upload"))?,
            stream,
        })
    }

    /// The arrays as [`DeviceSolutes`] (ordered on the legacy default stream).
    pub fn solutes(&self) -> DeviceSolutes {
        let addr = |b: &CudaSlice<f64>| {
            let (ptr, _sync) = b.device_ptr(&self.stream);
            ptr
        };
        DeviceSolutes {
            pos: addr(&self.pos),
            vel: addr(&self.vel),
            mass: addr(&self.mass),
            n: self.n,
            stream: 0,
        }
    }

    /// Overwrite the positions (e.g. after moving the solutes on the host).
    pub fn set_positions(&mut self, pos: &[[f64; 3]]) -> Result<()> {
        self.stream
            .memcpy_htod(pos.as_flattened(), &mut self.pos)
            .map_err(drv("upload"))
    }

    /// The velocities as they are now (waits for queued work).
    pub fn velocities(&self) -> Result<Vec<[f64; 3]>> {
        let flat = self.stream.clone_dtoh(&self.vel).map_err(drv("download"))?;
        Ok(flat.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect())
    }

    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
}
