//! This process's place among the MPI ranks of one run.
//!
//! Built with `--features mpi` and started by `mpirun -np N mpcbox run config.ron`, every rank
//! reads the same config and holds the y slabs of the box that fall to it
//! ([`crate::backend::slabbed`]); rank 0 alone writes the output directory. Without the
//! feature, or started alone, the process is rank 0 of 1 and nothing here talks to anybody.
//!
//! MPI is initialised once ([`init`], by the program's `main`) with `MPI_THREAD_SERIALIZED`:
//! the thread that drives the run makes every MPI call, one at a time.

use crate::error::Result;

/// What carries packets between the processes that hold a box's slabs and sums over them.
/// Every process calls each method in the same order (they are collective).
pub trait Transport: Send {
    /// This process's rank, `0..ranks()`.
    fn rank(&self) -> usize;
    fn ranks(&self) -> usize;
    /// Send `out[r]` to rank `r` (`out[self.rank()]` is empty); returns what every rank sent
    /// here, concatenated in rank order.
    fn exchange(&self, out: &[Vec<f64>]) -> Result<Vec<f64>>;
    /// Sum `x` element by element over the ranks; every rank gets the sums.
    fn sum(&self, x: &mut [f64]) -> Result<()>;
    /// Every rank's `mine`, concatenated in rank order, on every rank.
    fn gather(&self, mine: &[f64]) -> Result<Vec<f64>>;
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
    fn exchange(&self, _out: &[Vec<f64>]) -> Result<Vec<f64>> {
        Ok(Vec::new())
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

/// Start MPI if the program was built with it; a no-op otherwise.
pub fn init() -> Guard {
    #[cfg(feature = "mpi")]
    {
        Guard {
            _universe: imp::init(),
        }
    }
    #[cfg(not(feature = "mpi"))]
    Guard {}
}

/// The number of ranks of this run (1 without MPI).
pub fn size() -> usize {
    #[cfg(feature = "mpi")]
    if let Some(w) = imp::world() {
        return w.size();
    }
    1
}

/// This process's rank (0 without MPI).
pub fn rank() -> usize {
    #[cfg(feature = "mpi")]
    if let Some(w) = imp::world() {
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
    if let Some(w) = imp::world() {
        return w.any(flag);
    }
    flag
}

/// The transport between this run's ranks.
pub fn transport() -> Box<dyn Transport> {
    #[cfg(feature = "mpi")]
    if let Some(w) = imp::world() {
        if w.size() > 1 {
            return Box::new(w);
        }
    }
    Box::new(Alone)
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
        // SAFETY: passed on from the caller's promise above.
        unsafe { imp::adopt(fortran_handle) }
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
    if let Some(w) = imp::world() {
        if w.size() > 1 {
            w.abort(code);
        }
    }
    let _ = code;
}

#[cfg(feature = "mpi")]
mod imp {
    use std::sync::OnceLock;

    use mpi::collective::SystemOperation;
    use mpi::datatype::{Partition, PartitionMut};
    use mpi::topology::SimpleCommunicator;
    use mpi::traits::*;
    use mpi::Count;

    use super::Transport;
    use crate::error::{MpcError, Result};

    /// The world communicator of the run.
    pub struct World(SimpleCommunicator);

    // SAFETY: MPI is initialised with MPI_THREAD_SERIALIZED (checked in `init`), which allows
    // calls from any thread as long as no two are made at once; mpcbox makes them only from the
    // one thread that drives the run (the backend's step, the job loop), never concurrently. An
    // adopted communicator (`adopt`) is called from the caller's thread that steps the solvent,
    // at whatever level the caller initialised MPI with for that thread.
    unsafe impl Send for World {}
    // SAFETY: as for Send: shared references are used by that one driving thread only.
    unsafe impl Sync for World {}

    static WORLD: OnceLock<World> = OnceLock::new();

    pub fn init() -> Option<mpi::environment::Universe> {
        let (universe, level) = mpi::initialize_with_threading(mpi::Threading::Serialized)?;
        if level < mpi::Threading::Serialized {
            eprintln!(
                "error: the MPI library grants thread level {level:?}, mpcbox needs Serialized; \
                 fix: use an MPI built with thread support (OpenMPI, MPICH)"
            );
            universe.world().abort(2);
        }
        let _ = WORLD.set(World(universe.world()));
        Some(universe)
    }

    pub fn world() -> Option<&'static World> {
        WORLD.get()
    }

    /// A duplicate of the caller's communicator as this process's run (`adopt_fortran_comm`).
    ///
    /// # Safety
    /// As `super::adopt_fortran_comm`.
    pub unsafe fn adopt(fortran_handle: i32) -> Result<()> {
        use mpi::raw::FromRaw;
        if WORLD.get().is_some() {
            return Err(MpcError::Config(crate::error::ConfigError {
                field: "(MPI communicator)".into(),
                problem: "this process already runs over a communicator".into(),
                fix: "call mpcbox_use_mpi_comm once, before the first solvent".into(),
            }));
        }
        // SAFETY: the caller promises a valid handle of an initialised MPI; the converted
        // communicator is only duplicated, never freed here (`forget`): it stays the caller's.
        let dup = unsafe {
            let raw = mpi::ffi::RSMPI_Comm_f2c(fortran_handle as _);
            if raw == mpi::ffi::RSMPI_COMM_WORLD {
                // rsmpi hands out the world communicator only through `world()`
                SimpleCommunicator::world().duplicate()
            } else {
                let theirs = SimpleCommunicator::from_raw(raw);
                let dup = theirs.duplicate();
                std::mem::forget(theirs);
                dup
            }
        };
        let _ = WORLD.set(World(dup));
        Ok(())
    }

    impl World {
        pub fn size(&self) -> usize {
            self.0.size() as usize
        }

        pub fn any(&self, flag: bool) -> bool {
            let mut out = 0i32;
            self.0
                .all_reduce_into(&(flag as i32), &mut out, SystemOperation::max());
            out != 0
        }

        pub fn abort(&self, code: i32) -> ! {
            self.0.abort(code)
        }
    }

    fn count(n: usize) -> Result<Count> {
        Count::try_from(n).map_err(|_| {
            MpcError::Device(format!(
                "an MPI message of {n} values exceeds MPI's count limit; fix: more ranks"
            ))
        })
    }

    /// Displacements of consecutive blocks of `counts`.
    fn displacements(counts: &[Count]) -> Vec<Count> {
        counts
            .iter()
            .scan(0, |at, &c| {
                let d = *at;
                *at += c;
                Some(d)
            })
            .collect()
    }

    impl Transport for &'static World {
        fn rank(&self) -> usize {
            self.0.rank() as usize
        }

        fn ranks(&self) -> usize {
            self.size()
        }

        fn exchange(&self, out: &[Vec<f64>]) -> Result<Vec<f64>> {
            let send_counts: Vec<Count> =
                out.iter().map(|o| count(o.len())).collect::<Result<_>>()?;
            let mut recv_counts = vec![0 as Count; out.len()];
            self.0
                .all_to_all_into(&send_counts[..], &mut recv_counts[..]);
            let send: Vec<f64> = out.concat();
            let total: usize = recv_counts.iter().map(|&c| c as usize).sum();
            let mut recv = vec![0.0; total];
            let send_displs = displacements(&send_counts);
            let recv_displs = displacements(&recv_counts);
            {
                let sp = Partition::new(&send[..], &send_counts[..], &send_displs[..]);
                let mut rp = PartitionMut::new(&mut recv[..], &recv_counts[..], &recv_displs[..]);
                self.0.all_to_all_varcount_into(&sp, &mut rp);
            }
            Ok(recv)
        }

        fn sum(&self, x: &mut [f64]) -> Result<()> {
            let mine = x.to_vec();
            self.0.all_reduce_into(&mine[..], x, SystemOperation::sum());
            Ok(())
        }

        fn gather(&self, mine: &[f64]) -> Result<Vec<f64>> {
            let n = count(mine.len())?;
            let mut counts = vec![0 as Count; self.size()];
            self.0.all_gather_into(&n, &mut counts[..]);
            let total: usize = counts.iter().map(|&c| c as usize).sum();
            let mut all = vec![0.0; total];
            let displs = displacements(&counts);
            {
                let mut rp = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
                self.0.all_gather_varcount_into(mine, &mut rp);
            }
            Ok(all)
        }
    }
}

#[cfg(all(test, not(feature = "mpi")))]
mod tests {
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
