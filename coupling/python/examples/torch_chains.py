"""A GPU MD loop written in PyTorch, coupled to an mpcbox fluid.

Harmonic bead-spring chains (velocity Verlet in torch on one GPU, 10 MD steps per collision)
hand their positions, velocities and masses to mpcbox as CUDA tensors: the fluid reads and
updates them in place, with no copy through host memory. The fluid may live on the chains'
GPU alone or be spread over several (`--device all`): the solutes then stay on cuda:0 and
mpcbox routes each to the GPU that owns its cell and back.

    python coupling/python/examples/torch_chains.py [collisions]
    python coupling/python/examples/torch_chains.py 100 --cells 256 --chains 32768 --beads 50 \\
        --device all --time      # ms per collision: fluid alone, torch MD alone, coupled
"""
import argparse
import time

import mpcbox
import torch

cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
cli.add_argument("collisions", type=int, nargs="?", default=200)
cli.add_argument("--cells", type=int, default=32, help="box edge in cells")
cli.add_argument("--chains", type=int, default=512)
cli.add_argument("--beads", type=int, default=20, help="beads per chain")
cli.add_argument("--device", default="cuda:0",
                 help="the fluid's GPUs: cuda:0, cuda:0,1,2,3 or all (the chains stay on cuda:0)")
cli.add_argument("--time", action="store_true",
                 help="also time the fluid alone and the MD alone, as many collisions each")
args = cli.parse_args()

L, CHAINS, BEADS, STEPS_PER_COLLISION = args.cells, args.chains, args.beads, 10
H = 0.1
DT = H / STEPS_PER_COLLISION
K_BOND, R0, BEAD_MASS = 30.0, 0.9, 5.0

if args.device == "all":
    device = "AllGpus"
else:
    gpus = args.device.removeprefix("cuda:").split(",")
    device = f"Cuda([{', '.join(gpus)}])"
solvent = mpcbox.Solvent.from_ron(
    f"(cells: ({L}, {L}, {L}), particles_per_cell: 10, time_step: {H}, "
    f"collision: Srd(angle_deg: 130.0), thermostat: Mbs, seed: 11, steps: 1, device: {device})"
)
dev = torch.device("cuda:0")
gen = torch.Generator(device=dev).manual_seed(3)
# straight chains along x from random starting points
start = torch.rand(CHAINS, 1, 3, device=dev, dtype=torch.float64, generator=gen) * L
offset = torch.zeros(1, BEADS, 3, device=dev, dtype=torch.float64)
offset[0, :, 0] = torch.arange(BEADS, device=dev, dtype=torch.float64) * R0
pos = (start + offset).reshape(-1, 3).contiguous()
vel = torch.zeros_like(pos)
mass = torch.full((CHAINS * BEADS,), BEAD_MASS, device=dev, dtype=torch.float64)


def bond_forces(x):
    """Harmonic bonds between consecutive beads of each chain."""
    xc = x.view(CHAINS, BEADS, 3)
    d = xc[:, 1:] - xc[:, :-1]
    r = d.norm(dim=-1, keepdim=True)
    f = -K_BOND * (r - R0) * d / r
    out = torch.zeros_like(xc)
    out[:, 1:] += f
    out[:, :-1] -= f
    return out.view(-1, 3)


def md_steps(f):
    """One collision's MD steps (velocity Verlet); returns the last forces."""
    global pos, vel
    for _ in range(STEPS_PER_COLLISION):
        vel += 0.5 * DT * f / BEAD_MASS
        pos += DT * vel
        f = bond_forces(pos)
        vel += 0.5 * DT * f / BEAD_MASS
    return f


def ms_per_collision(run, n):
    """Wall ms per collision of `run` called n times, the GPUs waited for at both ends."""
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        run()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) * 1e3 / n


stream = torch.cuda.Stream(device=dev)
collisions = args.collisions
with torch.cuda.stream(stream):
    f = bond_forces(pos)

    def coupled():
        global f
        f = md_steps(f)
        solvent.step(pos, vel, mass)  # CUDA tensors: collided in place on the GPU(s)

    if args.time:
        # warm-up of both step forms (kernels compiled on first use, first reorders), then
        # each part alone, then coupled
        for _ in range(10):
            coupled()
            solvent.step_fluid(1)
        fluid = ms_per_collision(lambda: solvent.step_fluid(1), collisions)
        saved = (pos.clone(), vel.clone(), f.clone())

        def md_alone():
            global f
            f = md_steps(f)

        md = ms_per_collision(md_alone, collisions)
        pos.copy_(saved[0])
        vel.copy_(saved[1])
        f = saved[2]
        both = ms_per_collision(coupled, collisions)
    else:
        for c in range(collisions):
            coupled()
    torch.cuda.synchronize()
    kt = (mass[:, None] * vel * vel).sum().item() / (3 * CHAINS * BEADS)
bond = (pos.view(CHAINS, BEADS, 3)[:, 1:] - pos.view(CHAINS, BEADS, 3)[:, :-1]).norm(dim=-1)
print(f"{collisions} collisions on {solvent.device}, {CHAINS * BEADS} beads on {dev}")
print(f"bead kT = {kt:.3f} (fluid kT = 1), longest bond {bond.max().item():.3f}")
if args.time:
    print(f"ms per collision: fluid alone {fluid:.3f}, torch MD alone {md:.3f}, "
          f"coupled {both:.3f} ({both / (fluid + md):.3f} x the two alone, one after the other)")
