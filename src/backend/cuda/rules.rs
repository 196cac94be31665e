//! The collision rules beside plain SRD on a GPU (`kernels/rules.cu`, `kernels/rules.cuh`,
//! `kernels/rule_sums.cuh`): MPC-AT, MPC-AT+a and SRD+a ([`crate::physics::rules`]). The plain
//! SRD kernels and buffers stay as they are; a rule adds a second per-cell buffer of extended
//! sums ([`Rule::sums_len`] doubles per cell padded to [`ext_stride`]: positions relative to
//! the cell centre, their second moments, Σ m r⊗v or Σ m r × (v − ξ), the draws' momentum)
//! that pass 1 fills beside the plain sums (staged per warp so that consecutive lanes add
//! consecutive doubles of a cell), and whose first six doubles the cell pass overwrites with
//! the +a rules' correction [Δω, C]. The fused method alternates two such buffers with the two
//! plain cell buffers. [`RuleBuffers`] owns them and runs the rule's passes; each step of
//! `CudaBackend` calls it when its `rules` field is set (`stream.rs`, `solutes.rs`,
//! `cells.rs`, `collide.rs`, and the arrivals of `multi/migrate.rs`), lending what the passes
//! read and write beside the extended sums ([`FluidView`]: the device, the fluid's and the
//! cells' buffers, the step's report). The hot passes run kernels compiled for the rule alone
//! ([`RuleKernels`]).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, PushKernelArg};

use cudarc::driver::CudaFunction;

use super::buffers::rule_bytes_per_cell;
use super::cell_sums::CellSumMethod;
use super::cells::CutCellArgs;
use super::device::OnAllocError;
use super::device::{drv, grid, CudaDevice};
use super::fluid_view::FluidView;
use super::launch::DevPtr;
use super::params::KernelParams;
use super::params::MigrationArgs;
use super::rule_kernels::RuleKernels;
use crate::backend::DeviceSolutes;
use crate::error::{MpcError, Result};
use crate::physics::Rule;

pub use super::contract::ext_stride;

/// Which kernels run a rule's pass 1, cell pass and collision (`MPCBOX_RULES_KERNELS`, a
/// tuning knob): each rule's own (`per-rule`, the default: compiled for that rule alone, so
/// they hold only its registers) or the first version's, which take the rule at run time
/// (`generic`). Both compute the same numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleKernelChoice {
    PerRule,
    Generic,
}

impl RuleKernelChoice {
    /// The choice of `MPCBOX_RULES_KERNELS` (`per-rule` or `generic`), else per rule.
    pub fn from_env() -> RuleKernelChoice {
        if crate::knobs::knobs().is("MPCBOX_RULES_KERNELS", "generic") {
            RuleKernelChoice::Generic
        } else {
            RuleKernelChoice::PerRule
        }
    }
}

/// The hot passes of a rule, each with its own kernel per rule.
#[derive(Clone, Copy)]
enum HotPass {
    StreamBin,
    CollideStreamBin,
    CellParams,
    Collide,
}

/// The kernel of `pass` under `rule` (not plain SRD): the rule's own, or the generic one.
fn rule_kernel(
    k: &RuleKernels,
    rule: Rule,
    pass: HotPass,
    which: RuleKernelChoice,
) -> &CudaFunction {
    use HotPass as P;
    use Rule as R;
    if which == RuleKernelChoice::Generic {
        return match pass {
            P::StreamBin => &k.rules_stream_bin,
            P::CollideStreamBin => &k.rules_collide_stream_bin,
            P::CellParams => &k.rules_cell_params,
            P::Collide => &k.rules_collide,
        };
    }
    match (pass, rule) {
        (P::StreamBin, R::SrdAngular) => &k.rules_stream_bin_srd_a,
        (P::StreamBin, R::At) => &k.rules_stream_bin_at,
        (P::StreamBin, R::AtAngular) => &k.rules_stream_bin_at_a,
        (P::CollideStreamBin, R::SrdAngular) => &k.rules_collide_stream_bin_srd_a,
        (P::CollideStreamBin, R::At) => &k.rules_collide_stream_bin_at,
        (P::CollideStreamBin, R::AtAngular) => &k.rules_collide_stream_bin_at_a,
        (P::CellParams, R::SrdAngular) => &k.rules_cell_params_srd_a,
        (P::CellParams, R::At) => &k.rules_cell_params_at,
        (P::CellParams, R::AtAngular) => &k.rules_cell_params_at_a,
        (P::Collide, R::SrdAngular) => &k.rules_collide_srd_a,
        (P::Collide, R::At) => &k.rules_collide_at,
        (P::Collide, R::AtAngular) => &k.rules_collide_at_a,
        // RuleBuffers exist only for the rules beside SRD (`RuleBuffers::alloc`).
        (_, R::Srd) => unreachable!("plain SRD has no rule kernels"),
    }
}

/// The extended cell sums of a rule other than plain SRD.
pub(super) struct RuleBuffers {
    rule: Rule,
    /// Which kernels run the hot passes.
    kernels: RuleKernelChoice,
    /// `ext_stride(rule)` doubles per cell: the sums, then (+a) [Δω, C] in place.
    pub(super) ext: CudaSlice<f64>,
    /// Fused methods: the other buffer (swapped with `ext` as `cell.alt` with `cell.sums`).
    pub(super) alt: Option<CudaSlice<f64>>,
}

impl RuleBuffers {
    /// Buffers for `ncells` cells under `rule` on `dev`, its rule kernels compiled and loaded
    /// there first (at start-up, not at the first step); None for plain SRD (nothing extra).
    pub(super) fn alloc(
        dev: &CudaDevice,
        rule: Rule,
        ncells: usize,
        method: CellSumMethod,
        oom: OnAllocError<'_>,
    ) -> Result<Option<RuleBuffers>> {
        if rule.is_plain_srd() {
            return Ok(None);
        }
        dev.rule_kernels()?;
        let s = &dev.stream;
        let len = ext_stride(rule) * ncells.max(1);
        Ok(Some(RuleBuffers {
            rule,
            kernels: RuleKernelChoice::from_env(),
            ext: s.alloc_zeros::<f64>(len).map_err(oom)?,
            alt: if method.is_fused() {
                Some(s.alloc_zeros::<f64>(len).map_err(oom)?)
            } else {
                None
            },
        }))
    }
}

/// The footprint `needed` (plain buffers) plus a rule's extended sums for `ncells` cells,
/// refused before allocation when it does not fit in `free` bytes (beside the reserve).
pub(super) fn check_rule_fits(
    device: &str,
    needed: u64,
    rule: Rule,
    ncells: u64,
    method: CellSumMethod,
    free: u64,
) -> Result<u64> {
    let total = needed + ncells * rule_bytes_per_cell(rule, method);
    if total + super::RESERVE_BYTES > free {
        return Err(MpcError::OutOfMemory {
            device: device.to_string(),
            needed_bytes: total + super::RESERVE_BYTES,
            available_bytes: free,
            fix: format!(
                "{} adds {} B per cell of extended sums; use fewer cells or particles per cell, \
                 plain SRD, or device: Cpu",
                rule.name(),
                rule_bytes_per_cell(rule, method)
            ),
        });
    }
    Ok(total)
}

/// The rule's kernels' address of a buffer (raw: event tracking is off, the guard does nothing).
fn addr(b: &CudaSlice<f64>, s: &Arc<CudaStream>) -> u64 {
    b.device_ptr(s).0
}

impl RuleBuffers {
    /// Allocate or drop the extended sums in `slot` when the rule changed to `rule`
    /// (`set_physics`).
    pub(super) fn sync(
        slot: &mut Option<RuleBuffers>,
        dev: &CudaDevice,
        rule: Rule,
        ncells: usize,
        method: CellSumMethod,
    ) -> Result<()> {
        if slot.as_ref().map(|r| r.rule).unwrap_or_default() == rule {
            return Ok(());
        }
        let oom =
            |e: cudarc::driver::DriverError| MpcError::Device(format!("CUDA rule buffers: {e:?}"));
        *slot = RuleBuffers::alloc(dev, rule, ncells, method, &oom)?;
        Ok(())
    }

    /// The rule's code and extended sums for `mpc_immigrate` (SRD, no buffers: 0 and a null
    /// address).
    pub(super) fn arrival_args(&self, s: &Arc<CudaStream>) -> (u32, u64) {
        (self.rule.code(), addr(&self.ext, s))
    }

    /// Pass 1 under the rule: the fused pass when a collision is pending, else stream, bin and
    /// sum into the zeroed plain and extended buffers. The list method sums plain SRD only.
    pub(super) fn pass1(
        &mut self,
        cx: FluidView<'_>,
        pending: Option<KernelParams>,
        p: &KernelParams,
        margs: &MigrationArgs,
    ) -> Result<()> {
        if cx.method == CellSumMethod::List {
            return Err(MpcError::Device(format!(
                "the list cell-sum method sums plain SRD only, not {}; fix: unset \
                 MPCBOX_CUDA_METHOD or set it to fused",
                self.rule.name()
            )));
        }
        match pending {
            Some(pc) if cx.method.is_fused() => self.collide_stream_bin(cx, &pc, p, margs),
            _ => self.stream_bin(cx, p, margs),
        }
    }

    /// Whether `method` aggregates each block's plain sums in shared memory (the `_shared`
    /// kernels, which take the rule at run time).
    fn block_aggregation(method: CellSumMethod) -> bool {
        matches!(method, CellSumMethod::Shared | CellSumMethod::FusedShared)
    }

    fn stream_bin(
        &mut self,
        cx: FluidView<'_>,
        p: &KernelParams,
        margs: &MigrationArgs,
    ) -> Result<()> {
        let s = cx.dev.stream.clone();
        let k = cx.dev.rule_kernels()?;
        let block = RuleBuffers::block_aggregation(cx.method);
        let f = if block {
            &k.rules_stream_bin_shared
        } else {
            rule_kernel(k, self.rule, HotPass::StreamBin, self.kernels)
        };
        let code = self.rule.code();
        s.memset_zeros(&mut cx.cell.sums).map_err(drv("memset"))?;
        s.memset_zeros(&mut self.ext).map_err(drv("memset"))?;
        let [px, py, pz] = &mut cx.fluid.pos;
        let [vx, vy, vz] = &mut cx.fluid.vel;
        // SAFETY: mpc_rules_stream_bin, its _shared twin and the per-rule mpc_rules_stream_bin_*
        // (MpcParams, u32 rule, float *px, *py, *pz, double *vx, *vy, *vz, u32 *cellw, double
        // *cells, double *ext, double *report, MpcMigration): the argument types match; the
        // particle arrays hold p.n_fluid = cx.n slots, cells p.n_cells × 8 doubles, ext
        // p.n_cells × ext_stride(rule) doubles (the stride the kernels use for `rule`), report
        // REPORT_WORDS × REPORT_COPIES (per-block copies); `margs` holds this slab's migration
        // buffers (zeros on one GPU, then never dereferenced). One thread per slot.
        unsafe {
            s.launch_builder(f)
                .arg(p)
                .arg(&code)
                .arg(px)
                .arg(py)
                .arg(pz)
                .arg(vx)
                .arg(vy)
                .arg(vz)
                .arg(&mut cx.fluid.cellw)
                .arg(&mut cx.cell.sums)
                .arg(&mut self.ext)
                .arg(&mut *cx.report)
                .arg(margs)
                .launch(grid(cx.n))
                .map_err(drv("rules stream/bin"))?;
        }
        Ok(())
    }

    /// Fused: collide step n (parameters `pc`, cell parameters in the current plain and
    /// extended buffers), then pass 1 of step n+1 into the other two, which become current.
    fn collide_stream_bin(
        &mut self,
        cx: FluidView<'_>,
        pc: &KernelParams,
        p: &KernelParams,
        margs: &MigrationArgs,
    ) -> Result<()> {
        let s = cx.dev.stream.clone();
        let k = cx.dev.rule_kernels()?;
        let block = RuleBuffers::block_aggregation(cx.method);
        let missing = || MpcError::Device("fused method without second cell buffers".into());
        let alt = cx.cell.alt.as_mut().ok_or_else(missing)?;
        let f = if block {
            &k.rules_collide_stream_bin_shared
        } else {
            rule_kernel(k, self.rule, HotPass::CollideStreamBin, self.kernels)
        };
        let code = self.rule.code();
        let ext_alt = self.alt.as_mut().ok_or_else(missing)?;
        s.memset_zeros(alt).map_err(drv("memset"))?;
        s.memset_zeros(ext_alt).map_err(drv("memset"))?;
        let [px, py, pz] = &mut cx.fluid.pos;
        let [vx, vy, vz] = &mut cx.fluid.vel;
        // SAFETY: mpc_rules_collide_stream_bin, its _shared twin and the per-rule
        // mpc_rules_collide_stream_bin_* (MpcParams pc, MpcParams p, u32 rule, float *px, *py,
        // *pz, double *vx, *vy, *vz, u32 *cellw, const double *cells_prev, const double
        // *ext_prev, double *cells_next, double *ext_next, double *report, MpcMigration m): the
        // argument types match; particle arrays of p.n_fluid = cx.n slots; the four cell
        // buffers are distinct allocations of p.n_cells × 8 (plain) and p.n_cells ×
        // ext_stride(rule) (extended) doubles; report REPORT_WORDS × REPORT_COPIES (per-block
        // copies); `margs` as in `stream_bin`.
        unsafe {
            s.launch_builder(f)
                .arg(pc)
                .arg(p)
                .arg(&code)
                .arg(px)
                .arg(py)
                .arg(pz)
                .arg(vx)
                .arg(vy)
                .arg(vz)
                .arg(&mut cx.fluid.cellw)
                .arg(&cx.cell.sums)
                .arg(&self.ext)
                .arg(&mut *alt)
                .arg(&mut *ext_alt)
                .arg(&mut *cx.report)
                .arg(margs)
                .launch(grid(cx.n))
                .map_err(drv("rules collide/stream/bin"))?;
        }
        std::mem::swap(&mut cx.cell.sums, alt);
        std::mem::swap(&mut self.ext, ext_alt);
        Ok(())
    }

    /// Pass 3 under the rule: sums to parameters in place, one thread per cell (then,
    /// between no-slip walls, one thread per cut cell: `cells.rs`).
    pub(super) fn cell_pass(
        &mut self,
        cx: FluidView<'_>,
        p: &KernelParams,
        cut: CutCellArgs,
    ) -> Result<()> {
        let s = cx.dev.stream.clone();
        let code = self.rule.code();
        let kernels = cx.dev.rule_kernels()?;
        let f = rule_kernel(kernels, self.rule, HotPass::CellParams, self.kernels);
        let listed = cut.mask.addr();
        // SAFETY: mpc_rules_cell_params and the per-rule mpc_rules_cell_params_* (MpcParams, u32
        // rule, double *cells, double *ext, double *report, const u32 *listed): the plain cell
        // buffer of p.n_cells = cx.ncells cells × 8 doubles, the extended one × ext_stride(rule)
        // doubles, report REPORT_WORDS × REPORT_COPIES (per-block copies); threads past n_cells
        // only join the block reductions. `listed` is null or a bit per cell (cells.rs), freed
        // in this stream's order.
        unsafe {
            s.launch_builder(f)
                .arg(p)
                .arg(&code)
                .arg(&mut cx.cell.sums)
                .arg(&mut self.ext)
                .arg(&mut *cx.report)
                .arg(&listed)
                .launch(grid(cx.ncells))
                .map_err(drv("rules cell params"))?;
        }
        if cut.count > 0 {
            // SAFETY: after the pass above on this stream; `count` distinct local cells < ncells
            // (cells.rs), one thread each, the same buffers.
            unsafe {
                kernels
                    .rules_cut_cell_params(
                        &s,
                        grid(cut.count as usize),
                        p,
                        &code,
                        &mut cx.cell.sums,
                        &mut self.ext,
                        &cut.list,
                        &cut.count,
                    )
                    .map_err(drv("rules cut cell params"))?;
            }
        }
        Ok(())
    }

    /// Pass 4 under the rule: the fluid collision with parameters `p`.
    pub(super) fn launch_collide(&self, cx: FluidView<'_>, p: &KernelParams) -> Result<()> {
        let s = cx.dev.stream.clone();
        let code = self.rule.code();
        let [px, py, pz] = &cx.fluid.pos;
        let [vx, vy, vz] = &mut cx.fluid.vel;
        let f = rule_kernel(
            cx.dev.rule_kernels()?,
            self.rule,
            HotPass::Collide,
            self.kernels,
        );
        // SAFETY: mpc_rules_collide and the per-rule mpc_rules_collide_* (MpcParams, u32 rule,
        // const float *px, *py, *pz, double *vx, *vy, *vz, const u32 *cellw, const double
        // *cells, const double *ext, double *report): particle arrays of p.n_fluid = cx.n
        // slots whose cell words index the parameters the cell pass wrote before on this stream
        // (p.n_cells × 8 and × ext_stride(rule) doubles).
        unsafe {
            s.launch_builder(f)
                .arg(p)
                .arg(&code)
                .arg(px)
                .arg(py)
                .arg(pz)
                .arg(vx)
                .arg(vy)
                .arg(vz)
                .arg(&cx.fluid.cellw)
                .arg(&cx.cell.sums)
                .arg(&self.ext)
                .arg(&mut *cx.report)
                .launch(grid(cx.n))
                .map_err(drv("rules collide"))?;
        }
        Ok(())
    }

    /// Solutes at device addresses `pos`, `vel`, `mass` (`n` of them; mpcbox's buffers or the
    /// caller's) binned on `dev` into the plain sums `sums` and the extended ones; cells and
    /// images into `cell`, `image` (addresses of at least `n` elements).
    pub(super) fn bin_solutes(
        &mut self,
        dev: &CudaDevice,
        sums: &mut CudaSlice<f64>,
        p: &KernelParams,
        s: &DeviceSolutes,
        cell: u64,
        image: u64,
    ) -> Result<()> {
        let main = dev.stream.clone();
        let code = self.rule.code();
        // SAFETY: `s` holds 3n, 3n and n doubles readable from this GPU (mpcbox's solute buffers,
        // or the caller's arrays checked before), `cell` and `image` at least n = p.n_solutes
        // elements of this GPU, the cell buffers as in the cell pass; one thread per solute.
        unsafe {
            dev.rule_kernels()?
                .rules_solute_bin(
                    &main,
                    grid(s.n),
                    p,
                    &code,
                    &DevPtr::new(s.pos),
                    &DevPtr::new(s.vel),
                    &DevPtr::new(s.mass),
                    &mut DevPtr::new(cell),
                    &mut DevPtr::new(image),
                    sums,
                    &mut self.ext,
                )
                .map_err(drv("rules solute bin"))?;
        }
        Ok(())
    }

    /// Collide the solutes binned by [`RuleBuffers::bin_solutes`] into `s.vel` with the cell
    /// parameters in `sums` and the extended buffer, adding into `report`; with `owned_only`
    /// the solutes of other GPUs' cells are left alone, else zeroed.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn collide_solutes(
        &self,
        dev: &CudaDevice,
        sums: &CudaSlice<f64>,
        report: &mut CudaSlice<f64>,
        p: &KernelParams,
        s: &DeviceSolutes,
        cell: u64,
        image: u64,
        owned_only: bool,
    ) -> Result<()> {
        let main = dev.stream.clone();
        let code = self.rule.code();
        let owned = owned_only as u32;
        // SAFETY: the arrays of `bin_solutes` (cells and images written by it on this stream),
        // the cell parameters, the velocities (3n doubles, each written only by the GPU that
        // owns the solute's cell), and the step's report (REPORT_WORDS × REPORT_COPIES doubles,
        // zeroed in pass 1 on this stream).
        unsafe {
            dev.rule_kernels()?
                .rules_solute_collide(
                    &main,
                    grid(s.n),
                    p,
                    &code,
                    &DevPtr::new(s.pos),
                    &DevPtr::new(s.mass),
                    &DevPtr::new(cell),
                    &DevPtr::new(image),
                    sums,
                    &self.ext,
                    &mut DevPtr::new(s.vel),
                    &owned,
                    report,
                )
                .map_err(drv("rules solute collide"))?;
        }
        Ok(())
    }
}
