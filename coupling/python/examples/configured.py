"""mpcbox configured from Python: a fluid job end to end, then a coupled one (numpy solutes).

    python coupling/python/examples/configured.py [output_dir]
"""
import sys
import numpy as np
import mpcbox

fluid = dict(cells=(12, 12, 12), particles_per_cell=10, time_step=0.1, thermostat="Mbs",
             collision={"Srd": {"angle_deg": 130.0}}, shear_rate=0.05, output={"observable_interval": 10})
out = mpcbox.run(fluid, steps=400, output=sys.argv[1] if len(sys.argv) > 1 else "out/python")
print(f"fluid: kT = {out['temperature']['value']:.4f}, slope = {out['profile_slope']['value']:.4f}, "
      f"{len(out['observables']['step'])} rows of observables")

solvent = mpcbox.Solvent(**dict(fluid, shear_rate=0.0))      # a solvent for our own MD loop
rng = np.random.default_rng(0)
pos, vel, mass = rng.uniform(0, 12, (50, 3)), np.zeros((50, 3)), np.full(50, 5.0)
kt = []
for step in range(400):
    before = solvent.observables()["momentum"] + mass @ vel
    pos += vel * solvent.time_step                           # free flight between collisions
    solvent.step(pos, vel, mass)                             # collide with the fluid: vel in place
    drift = solvent.observables()["momentum"] + mass @ vel - before
    assert np.abs(drift).max() < 1e-12 * (solvent.n_fluid + mass.sum()), drift
    kt.append(mass @ (vel ** 2).sum(axis=1) / (3 * len(mass)))
print(f"solutes: kT = {np.mean(kt[200:]):.4f} (momentum conserved by every step)")
