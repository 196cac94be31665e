"""A bead-spring polymer (FENE + WCA) in LAMMPS, with mpcbox as its solvent.

LAMMPS (Python module `lammps`) integrates the chains; every 20 MD steps the bead positions and
velocities go to mpcbox, which streams the fluid, runs the collision with the beads embedded
(their masses included) and returns the new bead velocities.

    python coupling/python/examples/lammps_polymer.py [mpc_steps]
"""
import os
import sys
import tempfile

import numpy as np
from lammps import lammps
import mpcbox

L = 10            # box edge in MPC cells (= LJ sigma)
CHAINS = (5, 4)   # chains on a y-z grid
LENGTH = 10       # beads per chain
BEAD_MASS = 5.0
MD_PER_MPC = 20   # dt = 0.005, h = 0.1


def data_file(path):
    n = CHAINS[0] * CHAINS[1] * LENGTH
    lines = ["bead-spring chains", "", f"{n} atoms", f"{n - CHAINS[0] * CHAINS[1]} bonds",
             "1 atom types", "1 bond types", "", f"0 {L} xlo xhi", f"0 {L} ylo yhi", f"0 {L} zlo zhi",
             "", "Atoms # bond", ""]
    atom = 0
    for cy in range(CHAINS[0]):
        for cz in range(CHAINS[1]):
            mol = cy * CHAINS[1] + cz + 1
            for b in range(LENGTH):
                atom += 1
                lines.append(f"{atom} {mol} 1 {0.2 + 0.97 * b} {(cy + 0.5) * L / CHAINS[0]} {(cz + 0.5) * L / CHAINS[1]}")
    lines += ["", "Bonds", ""]
    bond = 0
    for c in range(CHAINS[0] * CHAINS[1]):
        for b in range(LENGTH - 1):
            bond += 1
            a = c * LENGTH + b + 1
            lines.append(f"{bond} 1 {a} {a + 1}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return n


def main(mpc_steps=200):
    lmp = lammps(cmdargs=["-log", "none", "-screen", "none", "-nocite"])
    with tempfile.TemporaryDirectory() as d:
        n = data_file(os.path.join(d, "polymer.data"))
        lmp.commands_string(f"""
units lj
atom_style bond
boundary p p p
read_data {d}/polymer.data
mass 1 {BEAD_MASS}
bond_style fene
bond_coeff 1 30.0 1.5 1.0 1.0
special_bonds fene
pair_style lj/cut 1.122462048
pair_coeff 1 1 1.0 1.0 1.122462048
pair_modify shift yes
neighbor 0.3 bin
fix 1 all nve
timestep 0.005
thermo 0
run 0
""")
    solvent = mpcbox.Solvent.from_ron(
        f"(cells: ({L}, {L}, {L}), particles_per_cell: 10, time_step: 0.1, "
        "collision: Srd(angle_deg: 130.0), thermostat: Mbs, seed: 7, steps: 1000)")
    print(f"solvent: {solvent.n_fluid} fluid particles on {solvent.device}")
    mass = np.full(n, BEAD_MASS)
    temps = []
    for step in range(mpc_steps):
        lmp.command(f"run {MD_PER_MPC} pre no post no")
        pos = np.ctypeslib.as_array(lmp.gather_atoms("x", 1, 3)).reshape(n, 3).copy()
        vel = np.ctypeslib.as_array(lmp.gather_atoms("v", 1, 3)).reshape(n, 3).copy()
        solvent.step(pos, vel, mass)
        lmp.scatter_atoms("v", 1, 3, np.ctypeslib.as_ctypes(vel.ravel()))
        temps.append((mass[:, None] * vel ** 2).sum() / (3 * n))
    kt = np.mean(temps[len(temps) // 2:])
    obs = solvent.observables()
    print(f"{mpc_steps} MPC steps ({mpc_steps * MD_PER_MPC} MD steps): bead kT = {kt:.3f}, "
          f"fluid kT = {obs['temperature']:.3f}")
    return kt


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
