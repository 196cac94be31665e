//! This process's place among the MPI ranks of one run.
//!
//! Built with `--features mpi` and started by `mpirun -np N mpcbox run config.ron`, every rank
//! reads the same config and holds the y slabs of the box that fall to it
//! ([`crate::backend::slabbed`]); rank 0 alone writes the output directory. Without the
//! feature, or started alone, the process is rank 0 of 1 and nothing here talks to anybody.
//!
//! MPI is initialised once ([`init`], by the program's `main`) with `MPI_THREAD_SERIALIZED`:
//! the thread that drives the run makes every MPI call, one at a time.

use crate::error::{MpcError, Result};

/// What carries packets between the processes that hold a box's slabs and sums over them.
/// Every process calls each method in the same order (they are collective).
pub trait Transport: Send {
    /// This process's rank, `0..ranks()`.
    fn rank(&self) -> usize;
    fn ranks(&self) -> usize;
    /// Send `out[r]` to rank `r` (`out[self.rank()]` is empty); returns what every rank sent
    /// here, concatenated in rank order.
    fn exchange(&self, out: &[Vec<f64>]) -> Result<Vec<f64>> {
        let counts: Vec<usize> = out.iter().map(Vec::len).collect();
        let mut recv = Vec::new();
        self.exchange_into(&out.concat(), &counts, &mut recv)?;
        Ok(recv)
    }
    /// [`Transport::exchange`] without allocating each call: `send` holds the messages to the
    /// ranks in rank order, `counts[r]` values for rank r; `recv` is refilled (keeping its
    /// capacity, so a buffer reused every step touches no fresh memory).
    fn exchange_into(&self, send: &[f64], counts: &[usize], recv: &mut Vec<f64>) -> Result<()> {
        let incoming = self.exchange_counts(counts)?;
        recv.clear();
        recv.resize(incoming.iter().sum(), 0.0);
        self.exchange_values(send, counts, recv, &incoming)
    }
    /// The first half of an exchange: every rank tells every other how many values it will
    /// send it (`counts[r]` to rank r); returns how many each rank sends here.
    fn exchange_counts(&self, counts: &[usize]) -> Result<Vec<usize>>;
    /// The second half: `send` (the messages in rank order, `counts[r]` values for rank r)
    /// goes out and `recv` receives `incoming[r]` values from each rank r, in rank order, at
    /// its start (`recv` may be longer; an error if it is shorter). `recv` may be pinned
    /// memory that the GPU copies from next.
    fn exchange_values(
        &self,
        send: &[f64],
        counts: &[usize],
        recv: &mut [f64],
        incoming: &[usize],
    ) -> Result<()>;
    /// Sum `x` element by element over the ranks; every rank gets the sums.
    fn sum(&self, x: &mut [f64]) -> Result<()>;
    /// Every rank's `mine`, concatenated in rank order, on every rank.
    fn gather(&self, mine: &[f64]) -> Result<Vec<f64>>;
}

/// How [`Transport::exchange_values`] moves the values between MPI ranks
/// (`MPCBOX_MPI_EXCHANGE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RankExchange {
    /// One `MPI_Alltoallv` (the default).
    AllToAll,
    /// Point-to-point messages with the ranks that send or receive anything (a slab's
    /// neighbours): on 2 ranks of one host OpenMPI's pairwise algorithm beat the default
    /// all-to-all in one trial, so both are kept until they are measured side by side.
    Neighbours,
}

impl RankExchange {
    pub fn from_env() -> RankExchange {
        Self::parse(crate::knobs::knobs().get("MPCBOX_MPI_EXCHANGE"))
    }

    fn parse(value: Option<&str>) -> RankExchange {
        match value {
            Some("neighbours") => RankExchange::Neighbours,
            _ => RankExchange::AllToAll,
        }
    }
}

/// The transport of a process that holds every slab itself.
pub struct Alone;

impl Transport for Alone {
    fn rank(&self) -> usize {
        0
    }
    fn ranks(&self) -> usize {
        1
    }
    fn exchange_counts(&self, counts: &[usize]) -> Result<Vec<usize>> {
        Ok(vec![0; counts.len()])
    }
    fn exchange_values(
        &self,
        _send: &[f64],
        _counts: &[usize],
        _recv: &mut [f64],
        _incoming: &[usize],
    ) -> Result<()> {
        Ok(())
    }
    fn sum(&self, _x: &mut [f64]) -> Result<()> {
        Ok(())
    }
    fn gather(&self, mine: &[f64]) -> Result<Vec<f64>> {
        Ok(mine.to_vec())
    }
}

/// Keeps MPI initialised while it lives (finalised when it drops, at the end of `main`).
pub struct Guard {
    #[cfg(feature = "mpi")]
    _universe: Option<mpi::environment::Universe>,
}

/// Start MPI if the program was built with it; a no-op otherwise. Over several ranks, each
/// rank's thread pools get its share of the host's cores ([`cores`]).
pub fn init() -> Guard {
    #[cfg(feature = "mpi")]
    {
        let universe = mpi_comm::init();
        share_cores();
        Guard {
            _universe: universe,
        }
    }
    #[cfg(not(feature = "mpi"))]
    Guard {}
}

/// The number of ranks of this run (1 without MPI).
pub fn size() -> usize {
    #[cfg(feature = "mpi")]
    if let Some(w) = mpi_comm::world() {
        return w.size();
    }
    1
}

/// This process's rank (0 without MPI).
pub fn rank() -> usize {
    #[cfg(feature = "mpi")]
    if let Some(w) = mpi_comm::world() {
        return w.rank();
    }
    0
}

/// Whether this process writes the run's files (rank 0).
pub fn is_root() -> bool {
    rank() == 0
}

/// True on every rank when it is true on any (a stop requested by a signal that reached some
/// ranks only must stop all of them at the same step).
pub fn any(flag: bool) -> bool {
    #[cfg(feature = "mpi")]
    if let Some(w) = mpi_comm::world() {
        return w.any(flag);
    }
    flag
}

/// Ranks sharing this host, learnt once MPI runs (1 without).
static RANKS_ON_HOST: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

/// Learn how many ranks share this host and size rayon's global pool to this rank's share of
/// the cores: ranks on one host each with a pool of every core thrash. Collective. Warns (rank
/// 0) when the launcher bound the ranks to fewer cores than their share: OpenMPI binds each rank
/// to one core by default at 1 and 2 ranks, and a rank then builds a large initial state on one
/// core, an order of magnitude slower.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
fn share_cores() {
    if size() <= 1 {
        // `mpirun -np 1` binds its one rank to one core as well
        let launched = ["OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"]
            .iter()
            .any(|v| std::env::var_os(v).is_some());
        if launched {
            warn_if_bound(1);
        }
        return;
    }
    let (_, on_host) = local();
    let _ = RANKS_ON_HOST.set(on_host.max(1));
    warn_if_bound(on_host);
    // fails only if the global pool was already built (then it stays as it is)
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(cores())
        .build_global();
}

/// Warn (rank 0) when the launcher bound this rank to fewer cores than its share of the host's
/// among `on_host` ranks.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
fn warn_if_bound(on_host: usize) {
    let (usable, online) = (affinity_cores(), online_cores());
    let fair = (online / on_host.max(1)).max(1);
    if usable < fair && is_root() {
        eprintln!(
            "mpcbox: warning: the launcher bound this rank to {usable} core(s) of the host's \
             {online} ({on_host} ranks on it: {fair} each would be its share), so the host work \
             of each rank runs on {usable}. Fix: `mpirun --bind-to none ...` or \
             `mpirun --map-by slot:PE={fair} ...`"
        );
    }
}

/// The cores this process may run on (its affinity mask, which a launcher's binding narrows).
fn affinity_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The host's online cores (Linux's `/sys/devices/system/cpu/online`, e.g. `0-15` or
/// `0-3,8-11`); the affinity mask's count where that cannot be read.
fn online_cores() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|list| count_cpu_list(list.trim()))
        .unwrap_or_else(affinity_cores)
}

/// The number of CPUs in a Linux CPU list (`0-15`, `0-3,8-11`, `5`); None if malformed.
fn count_cpu_list(list: &str) -> Option<usize> {
    let mut n = 0;
    for part in list.split(',') {
        n += match part.split_once('-') {
            Some((a, b)) => {
                b.parse::<usize>()
                    .ok()?
                    .checked_sub(a.parse::<usize>().ok()?)?
                    + 1
            }
            None => part.parse::<usize>().map(|_| 1).ok()?,
        };
    }
    Some(n)
}

/// This rank's share of the host's cores, the default size of every thread pool: all the
/// cores it may run on in a run of one rank; over ranks, the host's cores divided among the
/// ranks on it, or fewer if the launcher bound the rank to fewer.
pub fn cores() -> usize {
    let usable = affinity_cores();
    match RANKS_ON_HOST.get().copied() {
        Some(on_host) if on_host > 1 => usable.min((online_cores() / on_host).max(1)),
        _ => usable,
    }
}

/// This process's place among the ranks on its host, as (local rank, ranks on the host): how
/// a rank picks its host's GPUs. (0, 1) without MPI. Collective: every rank calls it.
pub fn local() -> (usize, usize) {
    #[cfg(feature = "mpi")]
    if let Some(w) = mpi_comm::world() {
        return w.local();
    }
    (0, 1)
}

/// The hardware's reference for the rank exchange: the one-way time in seconds of a message of
/// `bytes` (the largest any rank asks for) between ranks 0 and 1 (the best of `reps` round
/// trips, halved), on rank 0; None on the other ranks and without MPI. Collective.
pub fn measure_ping_pong(bytes: usize, reps: usize) -> Option<f64> {
    #[cfg(feature = "mpi")]
    if let Some(w) = mpi_comm::world() {
        return w.ping_pong(bytes, reps);
    }
    let _ = (bytes, reps);
    None
}

/// Every rank's check of its own input agreed (one collective): Ok on every rank when all
/// passed; else each rank stops at the same step, the failing ones with their own error (the
/// rank named in a solute error), the others with an error naming the ranks that failed.
pub fn agree_on_input(transport: &dyn Transport, mine: Result<()>) -> Result<()> {
    let me = transport.rank();
    let mut failed = vec![0.0; transport.ranks()];
    failed[me] = f64::from(u8::from(mine.is_err()));
    transport.sum(&mut failed)?;
    let ranks: Vec<usize> = (0..failed.len()).filter(|&r| failed[r] > 0.0).collect();
    match mine {
        Err(MpcError::Solute {
            field,
            problem,
            fix,
        }) => Err(MpcError::Solute {
            field,
            problem: format!("{problem} (on rank {me})"),
            fix,
        }),
        Err(e) => Err(e),
        Ok(()) if !ranks.is_empty() => Err(MpcError::Solute {
            field: "solutes".into(),
            problem: format!(
                "rank(s) {ranks:?} of {} were handed bad solutes; their errors name the array",
                failed.len()
            ),
            fix: "fix what those ranks pass; every rank stopped at this step and nothing changed"
                .into(),
        }),
        Ok(()) => Ok(()),
    }
}

/// The transport between this run's ranks.
pub fn transport() -> Box<dyn Transport> {
    #[cfg(feature = "mpi")]
    if let Some(w) = mpi_comm::world() {
        if w.size() > 1 {
            return Box::new(w);
        }
    }
    Box::new(Alone)
}

/// Set when this process built its first backend: its solvents hold the box over the ranks it
/// had then, so a communicator adopted later would leave them disagreeing about who holds what.
static LAYOUT_FIXED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Record that a solvent's backend was built (`backend::factory::open`): [`adopt_fortran_comm`] is
/// refused from now on.
pub fn fix_layout() {
    LAYOUT_FIXED.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Run this process's solvents over the caller's MPI communicator, for a program that started
/// MPI itself (C, Fortran, mpi4py: `mpcbox_use_mpi_comm(MPI_Comm_c2f(comm))`). The handle is the
/// communicator's Fortran form (an integer in every MPI); mpcbox works on a duplicate of it, so
/// its messages never meet the caller's. Once per process, before the first solvent is built.
///
/// # Safety
/// `fortran_handle` names a valid communicator of an MPI library that is initialised and not
/// finalised, and MPI stays initialised while any solvent lives.
pub unsafe fn adopt_fortran_comm(fortran_handle: i32) -> Result<()> {
    #[cfg(feature = "mpi")]
    {
        if LAYOUT_FIXED.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(crate::error::MpcError::Config(crate::error::ConfigError {
                field: "(MPI communicator)".into(),
                problem: "a solvent was already built in this process, running without the \
                          communicator"
                    .into(),
                fix: "call mpcbox_use_mpi_comm (Python: mpcbox.use_mpi_comm) before the first \
                      solvent is created"
                    .into(),
            }));
        }
        // SAFETY: passed on from the caller's promise above.
        unsafe { mpi_comm::adopt(fortran_handle) }?;
        share_cores();
        Ok(())
    }
    #[cfg(not(feature = "mpi"))]
    {
        let _ = fortran_handle;
        Err(crate::error::MpcError::Config(crate::error::ConfigError {
            field: "(MPI communicator)".into(),
            problem: "this mpcbox library was built without MPI".into(),
            fix: "build it with `--features mpi` (and Debian's libopenmpi-dev, libclang-dev)"
                .into(),
        }))
    }
}

/// Stop every rank of the run after an error on this one (the others may wait in a collective
/// call and would hang); returns without MPI.
pub fn abort_all(code: i32) {
    #[cfg(feature = "mpi")]
    if let Some(w) = mpi_comm::world() {
        if w.size() > 1 {
            w.abort(code);
        }
    }
    let _ = code;
}

#[cfg(feature = "mpi")]
mod mpi_comm;

#[cfg(all(test, not(feature = "mpi")))]
mod tests {
    #[test]
    fn every_rank_exchange_value_parses() {
        use super::RankExchange;
        let parsed: Vec<RankExchange> = crate::knobs::RANK_EXCHANGES
            .iter()
            .map(|v| RankExchange::parse(Some(v)))
            .collect();
        assert_eq!(
            parsed,
            [RankExchange::AllToAll, RankExchange::Neighbours],
            "each listed value names its own way"
        );
        assert_eq!(RankExchange::parse(None), RankExchange::AllToAll);
    }

    #[test]
    fn linux_cpu_lists_are_counted() {
        use super::count_cpu_list;
        assert_eq!(count_cpu_list("0-15"), Some(16));
        assert_eq!(count_cpu_list("0-3,8-11"), Some(8));
        assert_eq!(count_cpu_list("5"), Some(1));
        assert_eq!(count_cpu_list("0,2-3"), Some(3));
        assert_eq!(count_cpu_list("3-1"), None);
        assert_eq!(count_cpu_list("x"), None);
    }

    /// Without the `mpi` feature a communicator is refused naming the fix, and the process is
    /// rank 0 of 1 with every collective a no-op.
    #[test]
    fn without_mpi_a_communicator_is_refused_and_the_process_is_alone() {
        // SAFETY: without the feature the handle is never used.
        let e = unsafe { super::adopt_fortran_comm(0) }
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("without MPI") && e.contains("--features mpi"),
            "{e}"
        );
        assert_eq!((super::rank(), super::size()), (0, 1));
        assert!(super::is_root() && super::any(true) && !super::any(false));
        let t = super::transport();
        let mut x = [1.5, 2.0];
        t.sum(&mut x).unwrap();
        assert_eq!(x, [1.5, 2.0]);
        assert_eq!(t.gather(&x).unwrap(), vec![1.5, 2.0]);
        assert!(t.exchange(&[Vec::new()]).unwrap().is_empty());
    }
}
