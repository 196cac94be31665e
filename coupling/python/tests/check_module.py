"""Checks of the Python module `mpcbox` (run by coupling/python/tests/python.rs)."""
import sys
import tempfile

import numpy as np
import mpcbox

RON = ("(cells: (8, 8, 8), particles_per_cell: 10, time_step: 0.1, collision: Srd(angle_deg: 130.0), "
       "thermostat: None, seed: 3, steps: 10, device: Cpu)")


def total_momentum(s, vel, mass):
    return np.array(s.observables()["momentum"]) + (mass[:, None] * vel).sum(axis=0)


def expect_refused(call, exc, words):
    try:
        call()
    except exc as e:
        assert all(w in str(e) for w in words), (words, str(e))
        return
    raise AssertionError(f"accepted: {words}")


class FakeCudaArray:
    """A CUDA array as CuPy or PyTorch describe one (never read: its layout is refused first)."""

    def __init__(self, shape, strides):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f8", "data": (0x7F0000000000, False),
                                         "strides": strides, "version": 3}


def arrays_in_another_order(s, pos, vel, mass):
    """Fortran-ordered, transposed and strided arrays hold their rows in another order than
    the (n, 3) C order read: refused naming the array and the fix, nothing changed (they were
    read in raw memory order once); a C-ordered copy of the same values gives the same step."""
    n = len(mass)
    before, v0 = s.step_count, vel.copy()
    transposed = np.ascontiguousarray(pos.T).T  # (n, 3), Fortran order
    wide_mass = np.repeat(mass, 2)[::2]  # (n,), every other value of a longer array
    for call, words in [
        (lambda: s.step(np.asfortranarray(pos), vel, mass), ["`pos` is Fortran-ordered", "np.ascontiguousarray(pos)"]),
        (lambda: s.step(transposed, vel, mass), ["`pos` is Fortran-ordered", "np.ascontiguousarray(pos)"]),
        (lambda: s.step(pos, np.asfortranarray(vel), mass),
         ["`vel` is Fortran-ordered", "vel = np.ascontiguousarray(vel)", "in place"]),
        (lambda: s.step(pos, vel, wide_mass), ["`mass` is strided", "np.ascontiguousarray(mass)"]),
        (lambda: s.begin_step(np.asfortranarray(pos), vel, mass), ["`pos` is Fortran-ordered"]),
        (lambda: s.begin_step(pos, np.asfortranarray(vel), mass), ["`vel` is Fortran-ordered"]),
        (lambda: s.finish_step(np.asfortranarray(np.empty((n, 3)))), ["`vel_out` is Fortran-ordered"]),
    ]:
        expect_refused(call, ValueError, words)
    assert s.step_count == before and np.array_equal(vel, v0), "a refused step changed something"
    # CUDA arrays (CuPy, PyTorch): the same rule read from their strides, before any use
    rows = FakeCudaArray((n, 3), None)
    for p, words in [
        (FakeCudaArray((n, 3), (8, 8 * n)), ["`pos` has strides [8, 2400]", "not C order", "ascontiguousarray"]),
        (FakeCudaArray((1, 3), (8, 8 * n)), ["`pos` has strides [8, 2400] for shape [1, 3]"]),
        (FakeCudaArray((n, 3), (48, 16)), ["`pos` has strides [48, 16]"]),
    ]:
        expect_refused(lambda: s.step(p, rows, FakeCudaArray((n,), None)), ValueError, words)
    expect_refused(lambda: s.step(rows, FakeCudaArray((n, 3), (8, 8 * n)), FakeCudaArray((n,), None)),
                   ValueError, ["`vel` has strides", "updated in place"])
    expect_refused(lambda: s.step(rows, rows, FakeCudaArray((n,), (16,))), ValueError, ["`mass` has strides [16]"])
    assert s.step_count == before
    # the same values in C order: accepted, the same step as the original arrays
    a, b = mpcbox.Solvent.from_ron(RON), mpcbox.Solvent.from_ron(RON)
    va, vb = vel.copy(), np.ascontiguousarray(np.asfortranarray(vel))
    a.step(pos, va, mass)
    b.step(np.ascontiguousarray(transposed), vb, np.ascontiguousarray(wide_mass))
    assert np.array_equal(va, vb)


def main():
    s = mpcbox.Solvent.from_ron(RON)
    assert s.n_fluid == 5120 and s.box_lengths == (8.0, 8.0, 8.0) and abs(s.time_step - 0.1) < 1e-15
    rng = np.random.default_rng(1)
    n = 300
    pos = rng.uniform(0.0, 8.0, (n, 3))
    vel = rng.normal(0.0, 0.5, (n, 3)) + np.array([1.0, 0.0, 0.0])
    mass = rng.uniform(1.0, 8.0, n)

    # momentum of fluid + solutes conserved by each step; velocities updated in place
    for _ in range(5):
        p0 = total_momentum(s, vel, mass)
        before = vel.copy()
        s.step(pos, vel, mass)
        p1 = total_momentum(s, vel, mass)
        assert np.all(np.abs(p1 - p0) <= 1e-12 * (5120 + mass.sum())), (p0, p1)
        assert not np.array_equal(before, vel), "velocities were not updated in place"
    assert s.step_count == 5

    # split form equals the one-call form
    a = mpcbox.Solvent.from_ron(RON)
    b = mpcbox.Solvent.from_ron(RON)
    va = vel.copy()
    a.step(pos, va, mass)
    b.begin_step(pos, vel, mass)
    vb = np.empty_like(vel)
    b.finish_step(vb)
    assert np.array_equal(va, vb)

    # a step begun before the solutes (the CPU begins nothing: False) is finished by step,
    # with the same result; a negative count is refused
    a = mpcbox.Solvent.from_ron(RON)
    b = mpcbox.Solvent.from_ron(RON)
    va, vb = vel.copy(), vel.copy()
    a.step(pos, va, mass)
    assert b.begin_fluid(n) is False
    b.step(pos, vb, mass)
    assert np.array_equal(va, vb) and b.step_count == 1
    expect_refused(lambda: b.begin_fluid(-1), ValueError, ["`n` is -1"])

    # mpcbox.host_arrays: numpy arrays (page-locked where a GPU is usable) that step as any
    # numpy arrays do; they stay valid while any of the three lives
    hp, hv, hm = mpcbox.host_arrays(n)
    assert (hp.shape, hv.shape, hm.shape) == ((n, 3), (n, 3), (n,))
    assert all(a.dtype == np.float64 and a.flags["C_CONTIGUOUS"] and a.flags["WRITEABLE"]
               for a in (hp, hv, hm))
    assert not hp.any() and not hv.any() and not hm.any(), "host_arrays are zeroed"
    hp[:], hv[:], hm[:] = pos, vel, mass
    a = mpcbox.Solvent.from_ron(RON)
    b = mpcbox.Solvent.from_ron(RON)
    va = vel.copy()
    for _ in range(3):
        a.step(pos, va, mass)
        b.step(hp, hv, hm)
    assert np.array_equal(va, hv), "host_arrays step as numpy arrays"
    del hp, hm
    assert np.array_equal(va, hv), "one array outlives the others"
    expect_refused(lambda: mpcbox.host_arrays(-1), ValueError, ["`n` is -1"])
    assert [x.shape for x in mpcbox.host_arrays(0)] == [(0, 3), (0, 3), (0,)]

    # bad input: clear ValueError, nothing changes
    bad = vel.copy()
    bad[7, 1] = np.nan
    keep = bad.copy()
    try:
        s.step(pos, bad, mass)
        raise AssertionError("NaN velocity accepted")
    except ValueError as e:
        assert "velocities" in str(e), e
    assert np.array_equal(bad, keep, equal_nan=True) and s.step_count == 5
    for args, word in [((pos[:, :2], vel, mass), "shape"), ((pos, vel, -mass), "masses"),
                       ((pos, vel, mass[:10]), "lengths")]:
        try:
            s.step(*args)
            raise AssertionError(f"accepted bad input ({word})")
        except ValueError as e:
            assert word in str(e), e
    try:
        mpcbox.Solvent.from_ron(RON.replace("time_step: 0.1", "time_step: -0.1"))
        raise AssertionError("bad config accepted")
    except ValueError as e:
        assert "config field `time_step`" in str(e), e

    # checkpoint and restore repeat a step exactly
    with tempfile.TemporaryDirectory() as d:
        s.checkpoint(d + "/ck.mpcbox")
        v1 = vel.copy()
        s.step(pos, v1, mass)
        s.restore(d + "/ck.mpcbox")
        v2 = vel.copy()
        s.step(pos, v2, mass)
        assert np.array_equal(v1, v2)
        t = mpcbox.Solvent.from_checkpoint(d + "/ck.mpcbox")
        assert t.step_count == 5
    # wrong input is a Python exception naming the argument and the fix, never a panic, and
    # changes nothing
    ro = vel.copy()
    ro.flags.writeable = False
    odd = np.zeros((len(mass), 6))[:, ::2]
    before = s.step_count
    for call, exc, words in [
        (lambda: s.step(pos, ro, mass), ValueError, ["`vel` is read-only", "copy()"]),
        (lambda: s.step(pos, vel.astype(np.int64), mass), TypeError, ["`vel` has dtype int64", "float64"]),
        (lambda: s.step(pos.astype(np.float32), vel, mass), TypeError, ["`pos` has dtype float32"]),
        (lambda: s.step(pos.tolist(), vel, mass), TypeError, ["`pos` must be a numpy float64 array"]),
        (lambda: s.step(pos, vel, mass[:, None]), ValueError, ["`mass` has 2 dimensions"]),
        (lambda: s.step(pos, odd, mass), ValueError, ["`vel` is strided", "not C-contiguous"]),
        (lambda: s.begin_step(pos, vel, mass.astype(np.float32)), TypeError, ["`mass` has dtype float32"]),
        (lambda: s.finish_step(ro), ValueError, ["`vel_out` is read-only"]),
        (lambda: s.step_fluid(-5), ValueError, ["`steps` is -5"]),
        (lambda: s.run(steps=-5), ValueError, ["`steps` is -5"]),
        (lambda: mpcbox.run({}, steps=-5), ValueError, ["`steps` is -5"]),
    ]:
        try:
            call()
            raise AssertionError(f"accepted: {words[0]}")
        except exc as e:
            assert all(w in str(e) for w in words), (words, str(e))
    assert s.step_count == before

    arrays_in_another_order(s, pos, vel, mass)

    # one process: rank 0 of 1; per-rank solutes change nothing; a communicator is refused
    # with the reason (this build lacks MPI, or a Solvent already exists in a build with it)
    assert (mpcbox.rank(), mpcbox.size()) == (0, 1)
    a, b = mpcbox.Solvent.from_ron(RON), mpcbox.Solvent.from_ron(RON)
    a.set_solutes_per_rank(True)
    va, vb = vel.copy(), vel.copy()
    a.step(pos, va, mass)
    b.step(pos, vb, mass)
    assert np.array_equal(va, vb)
    for call, exc, words in [
        (lambda: a.set_solutes_per_rank(1), TypeError, ["`on` must be True or False"]),
        (lambda: mpcbox.use_mpi_comm("world"), TypeError, ["`comm` must be an mpi4py", "fix:"]),
        (lambda: mpcbox.use_mpi_comm(-2**40), ValueError, ["`comm` handle", "MPI_Fint"]),
    ]:
        try:
            call()
            raise AssertionError(f"accepted: {words[0]}")
        except exc as e:
            assert all(w in str(e) for w in words), (words, str(e))
    try:
        mpcbox.use_mpi_comm(0)
        raise AssertionError("a communicator was accepted")
    except mpcbox.ConfigError as e:
        assert ("built without MPI" in str(e) and "MATURIN_PEP517_ARGS" in str(e)) \
            or "a Solvent was built" in str(e), e
        assert e.fix, e
    assert mpcbox.__doc__ and "Solvent" in mpcbox.__doc__ and mpcbox.Solvent.__doc__
    print("python module ok")


if __name__ == "__main__":
    sys.exit(main())
