//! The MPI side of [`super::Transport`] (the `mpi` feature): the run's communicator and the
//! collectives and messages over it.

use std::sync::OnceLock;

use mpi::collective::SystemOperation;
use mpi::datatype::{Partition, PartitionMut};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use mpi::Count;

use super::{RankExchange, Transport};
use crate::error::{MpcError, Result};
use mpi::request::WaitGuard;

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
    // MPI_Initialized/MPI_Finalized may be called at any time; anything else before
    // MPI_Init or after MPI_Finalize is undefined (OpenMPI aborts the process).
    if !mpi::environment::is_initialized() || mpi::environment::is_finalized() {
        return Err(MpcError::Config(crate::error::ConfigError {
            field: "(MPI communicator)".into(),
            problem: "MPI is not initialised (or already finalised)".into(),
            fix: "call MPI_Init first (mpi4py: `from mpi4py import MPI`) and finalise \
                  after the last solvent"
                .into(),
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
    /// [`Transport::exchange_values`] as point-to-point messages: a receive posted for every
    /// rank that sends this one anything, a send to every rank this one sends anything, all
    /// waited for together (what a rank sends itself is copied).
    fn exchange_with_neighbours(
        &self,
        send: &[f64],
        counts: &[usize],
        recv: &mut [f64],
        incoming: &[usize],
    ) -> Result<()> {
        let me = self.0.rank() as usize;
        if counts[me] != incoming[me] {
            return Err(MpcError::Device(format!(
                "rank {me} sends itself {} values but expects {} (please report it)",
                counts[me], incoming[me]
            )));
        }
        let mut sends = Vec::with_capacity(counts.len());
        let mut at = 0;
        for &c in counts {
            sends.push(&send[at..at + c]);
            at += c;
        }
        let mut recvs = Vec::with_capacity(incoming.len());
        let mut rest = recv;
        for &c in incoming {
            let (head, tail) = rest.split_at_mut(c);
            recvs.push(head);
            rest = tail;
        }
        recvs[me].copy_from_slice(sends[me]);
        mpi::request::scope(|scope| {
            let mut pending = Vec::new();
            for (r, buf) in recvs.iter_mut().enumerate() {
                if r != me && !buf.is_empty() {
                    let from = self.0.process_at_rank(r as i32);
                    pending.push(WaitGuard::from(
                        from.immediate_receive_into(scope, &mut **buf),
                    ));
                }
            }
            for (r, buf) in sends.iter().enumerate() {
                if r != me && !buf.is_empty() {
                    let to = self.0.process_at_rank(r as i32);
                    pending.push(WaitGuard::from(to.immediate_send(scope, *buf)));
                }
            }
            // every guard waits for its request as `pending` drops here
        });
        Ok(())
    }

    pub fn size(&self) -> usize {
        self.0.size() as usize
    }

    pub fn any(&self, flag: bool) -> bool {
        let mut out = 0i32;
        self.0
            .all_reduce_into(&(flag as i32), &mut out, SystemOperation::max());
        out != 0
    }

    pub fn ping_pong(&self, bytes: usize, reps: usize) -> Option<f64> {
        // the ranks may propose different sizes: all take the largest
        let mut size = 0u64;
        self.0
            .all_reduce_into(&(bytes as u64), &mut size, SystemOperation::max());
        let mut buf = vec![0u8; (size as usize).max(1)];
        let me = self.0.rank();
        let mut best = f64::INFINITY;
        if self.0.size() >= 2 && me < 2 {
            let other = self.0.process_at_rank(1 - me);
            for _ in 0..reps.max(1) {
                let t = std::time::Instant::now();
                if me == 0 {
                    other.send(&buf[..]);
                    other.receive_into(&mut buf[..]);
                } else {
                    other.receive_into(&mut buf[..]);
                    other.send(&buf[..]);
                }
                best = best.min(t.elapsed().as_secs_f64() / 2.0);
            }
        }
        self.0.barrier();
        (me == 0 && self.0.size() >= 2).then_some(best)
    }

    /// (rank, size) among the ranks that share this host's memory.
    pub fn local(&self) -> (usize, usize) {
        let host = self.0.split_shared(self.0.rank());
        (host.rank() as usize, host.size() as usize)
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

    fn exchange_counts(&self, counts: &[usize]) -> Result<Vec<usize>> {
        let send_counts: Vec<Count> = counts.iter().map(|&c| count(c)).collect::<Result<_>>()?;
        let mut recv_counts = vec![0 as Count; counts.len()];
        self.0
            .all_to_all_into(&send_counts[..], &mut recv_counts[..]);
        Ok(recv_counts.iter().map(|&c| c as usize).collect())
    }

    fn exchange_values(
        &self,
        send: &[f64],
        counts: &[usize],
        recv: &mut [f64],
        incoming: &[usize],
    ) -> Result<()> {
        let total: usize = incoming.iter().sum();
        if total > recv.len() {
            return Err(MpcError::Device(format!(
                "rank {}: {total} values arrive but the receive buffer holds {} \
                 (please report it)",
                self.0.rank(),
                recv.len()
            )));
        }
        let send_counts: Vec<Count> = counts.iter().map(|&c| count(c)).collect::<Result<_>>()?;
        let recv_counts: Vec<Count> = incoming.iter().map(|&c| count(c)).collect::<Result<_>>()?;
        if RankExchange::from_env() == RankExchange::Neighbours {
            return self.exchange_with_neighbours(send, counts, &mut recv[..total], incoming);
        }
        let send_displs = displacements(&send_counts);
        let recv_displs = displacements(&recv_counts);
        let sp = Partition::new(send, &send_counts[..], &send_displs[..]);
        let mut rp = PartitionMut::new(&mut recv[..total], &recv_counts[..], &recv_displs[..]);
        self.0.all_to_all_varcount_into(&sp, &mut rp);
        Ok(())
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
