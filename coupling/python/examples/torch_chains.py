"""A GPU MD loop written in PyTorch, coupled to an mpcbox fluid on the same GPU.

Harmonic bead-spring chains (velocity Verlet in torch on the GPU, 10 MD steps per collision)
hand their positions, velocities and masses to mpcbox as CUDA tensors: the fluid reads and
updates them in place, with no copy through host memory.

    python coupling/python/examples/torch_chains.py [collisions]
"""
import sys

import mpcbox
import torch

L, CHAINS, BEADS, STEPS_PER_COLLISION = 32, 512, 20, 10
H = 0.1
DT = H / STEPS_PER_COLLISION
K_BOND, R0, BEAD_MASS = 30.0, 0.9, 5.0

solvent = mpcbox.Solvent.from_ron(
    f"(cells: ({L}, {L}, {L}), particles_per_cell: 10, time_step: {H}, "
    "collision: Srd(angle_deg: 130.0), thermostat: Mbs, seed: 11, steps: 1, device: Cuda([0]))"
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


stream = torch.cuda.Stream(device=dev)
collisions = int(sys.argv[1]) if len(sys.argv) > 1 else 200
with torch.cuda.stream(stream):
    f = bond_forces(pos)
    for c in range(collisions):
        for _ in range(STEPS_PER_COLLISION):
            vel += 0.5 * DT * f / BEAD_MASS
            pos += DT * vel
            f = bond_forces(pos)
            vel += 0.5 * DT * f / BEAD_MASS
        solvent.step(pos, vel, mass)  # CUDA tensors: collided in place on the GPU
    torch.cuda.synchronize()
    kt = (mass[:, None] * vel * vel).sum().item() / (3 * CHAINS * BEADS)
bond = (pos.view(CHAINS, BEADS, 3)[:, 1:] - pos.view(CHAINS, BEADS, 3)[:, :-1]).norm(dim=-1)
print(f"{collisions} collisions on {solvent.device}")
print(f"bead kT = {kt:.3f} (fluid kT = 1), longest bond {bond.max().item():.3f}")
