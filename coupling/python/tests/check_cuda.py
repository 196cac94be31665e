"""GPU checks of the Python module with CUDA arrays (run on a machine with a GPU, CuPy and
PyTorch, by coupling/python/tests/python.rs's ignored test `cuda_arrays_from_cupy_and_pytorch`):
CuPy and PyTorch arrays give the numpy path's collision to rounding, fluid + solute momentum is
conserved, bad arrays (dtype, shape, Fortran-ordered, transposed) are refused naming the array
and the fix, and nothing changes; `mpcbox.host_arrays` are page-locked and give the numpy path's
collision bit for bit."""
import numpy as np

import mpcbox

CONFIG = (
    "(cells: (12, 12, 12), particles_per_cell: 10, time_step: 0.1, collision: Srd(angle_deg: 130.0), "
    "thermostat: Mbs, seed: 21, steps: 1, device: Cuda([0]))"
)
rng = np.random.default_rng(5)
N = 1500
pos0 = rng.uniform(0, 12, (N, 3))
vel0 = rng.normal(0, 0.3, (N, 3))
mass0 = np.where(np.arange(N) % 2 == 0, 1.0, 10.0)


def host_reference(steps):
    s = mpcbox.Solvent.from_ron(CONFIG)
    v = vel0.copy()
    out = []
    for _ in range(steps):
        s.step(pos0, v, mass0)
        out.append(v.copy())
    return out


def check(name, to_dev, to_host, stream_ctx=None):
    ref = host_reference(4)
    s = mpcbox.Solvent.from_ron(CONFIG)
    pos, vel, mass = to_dev(pos0), to_dev(vel0), to_dev(mass0)
    for k in range(4):
        s.step(pos, vel, mass)
        got = to_host(vel)
        err = np.abs(got - ref[k]).max() / max(1.0, np.abs(ref[k]).max())
        assert err <= 1e-12, f"{name}: step {k} differs by {err}"
    # momentum of fluid + solutes, conserved without shear (MBS conserves momentum)
    p0 = np.array(s.observables()["momentum"]) + (to_host(mass)[:, None] * to_host(vel)).sum(0)
    for _ in range(5):
        s.step(pos, vel, mass)
    p1 = np.array(s.observables()["momentum"]) + (to_host(mass)[:, None] * to_host(vel)).sum(0)
    scale = s.n_fluid + to_host(mass).sum()
    assert np.all(np.abs(p1 - p0) <= 1e-12 * scale), f"{name}: momentum {p0} -> {p1}"
    print(f"{name}: same collision as numpy (<= 1e-12), momentum conserved")
    return s, pos, vel, mass


def refused(s, args, words):
    before = s.step_count
    try:
        s.step(*args)
    except ValueError as e:
        assert all(w in str(e) for w in words), f"message {e!r} lacks {words}"
        assert s.step_count == before
        print("refused:", e)
        return
    raise AssertionError(f"accepted bad input {words}")


import cupy as cp  # noqa: E402

s, pos, vel, mass = check("cupy", cp.asarray, cp.asnumpy)
bad_mass = mass.copy()
bad_mass[7] = -1.0
v_before = cp.asnumpy(vel)
refused(s, (pos, vel, bad_mass), ["masses", "solute 7"])
assert np.array_equal(cp.asnumpy(vel), v_before), "velocities changed on refusal"
refused(s, (pos.astype(cp.float32), vel, mass), ["pos", "float64"])
refused(s, (pos[:, :2].copy(), vel, mass), ["pos", "shape"])
# rows in another order than C's: refused (they were read in raw memory order once)
refused(s, (cp.asfortranarray(pos), vel, mass), ["`pos` has strides", "ascontiguousarray"])
refused(s, (cp.ascontiguousarray(pos.T).T, vel, mass), ["`pos` has strides", "not C order"])
refused(s, (cp.ascontiguousarray(pos.T).T[:1], vel[:1], mass[:1]), ["`pos` has strides"])
refused(s, (pos, cp.asfortranarray(vel), mass), ["`vel` has strides", "updated in place"])
assert np.array_equal(cp.asnumpy(vel), v_before), "velocities changed on refusal"

import torch  # noqa: E402

dev = torch.device("cuda:0")
check(
    "torch",
    lambda a: torch.tensor(a, device=dev, dtype=torch.float64),
    lambda t: t.detach().cpu().numpy(),
)
t, tv, tm = (torch.tensor(a, device=dev) for a in (pos0, vel0, mass0))
refused(s, (t.t().contiguous().t(), tv, tm), ["`pos` has strides", "contiguous()"])
refused(s, (t, tv.t().contiguous().t(), tm), ["`vel` has strides"])
# on a side stream, with the MD's work queued on it
st = torch.cuda.Stream(device=dev)
with torch.cuda.stream(st):
    s2 = mpcbox.Solvent.from_ron(CONFIG)
    p = torch.tensor(pos0, device=dev)
    v = torch.tensor(vel0, device=dev)
    m = torch.tensor(mass0, device=dev)
    for _ in range(3):
        p += 0.01 * v  # queued on st, ordered before the collision reads p
        s2.step(p, v, m)
    torch.cuda.synchronize()
print("torch on a side stream: ok")

# mpcbox.host_arrays: page-locked numpy arrays (DMA straight from and into them, tested on the
# GPU): the numpy path's collision bit for bit, and bad values refused with nothing changed
hp, hv, hm = mpcbox.host_arrays(N)
assert cp.cuda.runtime.pointerGetAttributes(hp.ctypes.data).type == 1, "host_arrays page-locked"
hp[:], hv[:], hm[:] = pos0, vel0, mass0
ref = host_reference(4)
s3 = mpcbox.Solvent.from_ron(CONFIG)
for k in range(4):
    s3.step(hp, hv, hm)
    assert np.array_equal(hv, ref[k]), f"host_arrays: step {k} differs from numpy arrays"
keep = hv.copy()
hm[7] = -1.0
refused(s3, (hp, hv, hm), ["masses", "solute 7"])
hm[7] = 1e6
refused(s3, (hp, hv, hm), ["masses", "solute 7"])
hm[7] = mass0[7]
hp[11, 2] = np.nan
refused(s3, (hp, hv, hm), ["positions", "solute 11"])
assert np.array_equal(hv, keep), "host_arrays: velocities changed on refusal"
print("host_arrays: page-locked, numpy's collision bit for bit, bad values refused")
print("ALL OK")
