"""One box over MPI ranks from Python (run by coupling/python/tests/python.rs under mpirun):
every rank hands mpcbox its mpi4py communicator and steps the sheared fluid with the solutes it
holds (solute j on rank j % size, anywhere in or beyond the box); mpcbox routes each to the
rank that owns its cell and returns its new velocity.

    mpirun -np N python3 check_ranks.py [OUT_DIR [world|dup|int [REFERENCE.npz]]]
    mpirun -np 1 python3 check_ranks.py --solvent-first

OUT_DIR (default out/python_ranks, created if missing) and the communicator's form (default
world: MPI.COMM_WORLD; dup: a duplicate; int: its Fortran handle). Rank 0 writes
OUT_DIR/result.npz (every solute's final velocity, fluid + solute momentum per
step). Checked here: py and pz of fluid + solutes conserved under shear, the solutes dragged
into the shear flow (vx against unwrapped y has the shear rate's slope), and with a reference
(the 1-rank run) every velocity and px equal to it to 1e-9. The second form checks that a
communicator handed over after a Solvent exists is refused.
"""
import argparse
import os

from mpi4py import MPI
import numpy as np
import mpcbox

RON = ("(cells: (8, 12, 8), particles_per_cell: 5, time_step: 0.1, "
       "collision: Srd(angle_deg: 130.0), thermostat: Mbs, shear_rate: 0.05, seed: 21, "
       "steps: 20, device: Cpu, tuning: (reorder_interval: Some(0)))")
SOLUTES = 150
STEPS = 20
SHEAR = 0.05


def expect(call, exc, *words):
    try:
        call()
    except exc as e:
        assert all(w in str(e) for w in words), (words, str(e))
        return
    raise AssertionError(f"accepted: {words}")


def solutes():
    """Every solute (the same on every rank): y from one period below to two above."""
    rng = np.random.default_rng(5)
    pos = np.column_stack([rng.uniform(0, 8, SOLUTES), rng.uniform(-12, 24, SOLUTES),
                           rng.uniform(0, 8, SOLUTES)])
    return pos, rng.uniform(-0.5, 0.5, (SOLUTES, 3)), rng.uniform(1.0, 5.0, SOLUTES)


def solvent_first():
    mpcbox.Solvent.from_ron(RON)
    expect(lambda: mpcbox.use_mpi_comm(MPI.COMM_WORLD), mpcbox.ConfigError,
           "a Solvent was built in this process before it", "call mpcbox.use_mpi_comm(comm) first")
    print("python solvent-first refused ok")


def main(out_dir, how, reference):
    world = MPI.COMM_WORLD
    # wrong arguments: an exception naming `comm` and the fix, and nothing adopted
    expect(lambda: mpcbox.use_mpi_comm("world"), TypeError, "`comm`", "got str",
           "mpcbox.use_mpi_comm(MPI.COMM_WORLD)")
    expect(lambda: mpcbox.use_mpi_comm(True), TypeError, "`comm`")
    expect(lambda: mpcbox.use_mpi_comm(2**40), ValueError, "`comm` handle", "MPI_Fint")
    expect(lambda: mpcbox.use_mpi_comm(MPI.COMM_NULL), ValueError, "COMM_NULL")
    comm = {"world": world, "dup": world.Dup(), "int": world.py2f()}[how]
    mpcbox.use_mpi_comm(comm)
    assert (mpcbox.rank(), mpcbox.size()) == (world.rank, world.size), \
        (mpcbox.__file__, mpcbox.rank(), mpcbox.size())
    expect(lambda: mpcbox.use_mpi_comm(world), mpcbox.ConfigError, "already runs",
           "once, before the first Solvent")

    s = mpcbox.Solvent.from_ron(RON)
    expect(lambda: s.set_solutes_per_rank(1), TypeError, "`on`", "True")
    s.set_solutes_per_rank(True)
    pos, vel, mass = solutes()
    mine = np.arange(SOLUTES) % world.size == world.rank
    index, pos, vel, mass = np.flatnonzero(mine), pos[mine], vel[mine], mass[mine]

    def momentum():
        # observables() is summed over the ranks (every rank calls it)
        own = (mass[:, None] * vel).sum(axis=0)
        return np.array(s.observables()["momentum"]) + world.allreduce(own)

    series = [momentum()]
    for _ in range(STEPS):
        s.step(pos, vel, mass)
        pos += vel * s.time_step  # a toy MD: free flight, unwrapped coordinates
        series.append(momentum())
    series = np.array(series)
    assert s.step_count == STEPS

    every = np.full((SOLUTES, 3), np.nan)
    y = np.full(SOLUTES, np.nan)
    for i, v, yy in world.allgather((index, vel, pos[:, 1])):
        every[i], y[i] = v, yy
    assert np.isfinite(every).all(), "a solute came back from no rank"
    drift = np.abs(series[:, 1:] - series[0, 1:]).max()
    assert drift < 1e-9, f"py, pz of fluid + solutes not conserved: {series[[0, -1]]}"
    # Lees-Edwards images: a solute at unwrapped y meets the flow vx = SHEAR * (y - y0)
    slope = np.polyfit(y, every[:, 0], 1)[0]
    assert abs(slope - SHEAR) < 0.02, f"solute vx against y: slope {slope}, shear {SHEAR}"
    report = f"ranks {world.size} ({how}): py, pz drift {drift:.1e}, vx(y) slope {slope:.4f}"
    if reference:
        ref = np.load(reference)
        dv = np.abs(every - ref["vel"]).max()
        dpx = np.abs(series[:, 0] - ref["momentum"][:, 0]).max()
        assert dv <= 1e-9, f"{world.size} ranks: velocities differ from 1 rank by {dv}"
        assert dpx <= 1e-9, f"{world.size} ranks: px differs from 1 rank by {dpx}"
        report += f", max |v - v(1 rank)| = {dv:.1e}, max |px - px(1 rank)| = {dpx:.1e}"
    if world.rank == 0:
        os.makedirs(out_dir, exist_ok=True)
        np.savez(os.path.join(out_dir, "result.npz"), vel=every, momentum=series)
        print(report)
        print(f"module {mpcbox.__file__}")
        print("python ranks ok")


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("out_dir", nargs="?", default=os.path.join("out", "python_ranks"))
    cli.add_argument("how", nargs="?", choices=["world", "dup", "int"], default="world")
    cli.add_argument("reference", nargs="?", help="result.npz of the 1-rank run to compare with")
    cli.add_argument("--solvent-first", action="store_true",
                     help="check that a communicator handed over after a Solvent is refused")
    args = cli.parse_args()
    if args.solvent_first:
        solvent_first()
    else:
        main(args.out_dir, args.how, args.reference)
