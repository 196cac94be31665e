"""Checks of Python-configured solvents and jobs (run by coupling/python/tests/python.rs)."""
import os
import sys
import tempfile

import numpy as np
import mpcbox

BASE = dict(cells=(8, 8, 8), particles_per_cell=10, time_step=0.1, collision={"Srd": {"angle_deg": 130.0}},
            thermostat="Mbs", seed=3, device="Cpu")


def expect_config_error(field, words, **changes):
    try:
        mpcbox.Solvent(**{**BASE, **changes})
    except mpcbox.ConfigError as e:
        assert isinstance(e, ValueError) and e.field == field, (field, e.field, str(e))
        assert str(e).startswith(f"config field `{field}`: "), e
        for w in words:
            assert w in str(e), (w, str(e))
        return
    raise AssertionError(f"{changes} accepted")


def one_owner_per_directory():
    """A job into a directory holding another run's files is refused (naming it, that run and
    how to continue it) before anything there changes, unless overwrite=True; so is a checkpoint
    written over another run's. A run continues in its own directory."""
    import json
    rows = {"output": {"observable_interval": 5}}
    with tempfile.TemporaryDirectory() as d:
        first = mpcbox.run({**BASE, **rows, "seed": 1}, steps=10, output=d, progress=False)
        ck = os.path.join(d, "checkpoint.mpcbox")
        with open(ck, "rb") as f:
            before = f.read()
        for call in [lambda: mpcbox.run({**BASE, "seed": 2}, steps=10, output=d),
                     lambda: mpcbox.Solvent(**BASE).run(steps=10, output=d)]:
            try:
                call()
                raise AssertionError("a second run wrote into the first's directory")
            except mpcbox.ConfigError as e:
                assert e.field == "output", e
                for w in [d, f"run {first['run_id']}", f"mpcbox.run(resume=\"{ck}\")", "overwrite=True"]:
                    assert w in str(e), (w, str(e))
        with open(ck, "rb") as f:
            assert f.read() == before, "the refused run changed the first's checkpoint"
        # the first run continues there; replaced on purpose, the directory is the second's
        more = mpcbox.run(resume=ck, steps=20, progress=False)
        assert more["run_id"] == first["run_id"] and more["steps_this_run"] == 10, more
        second = mpcbox.run({**BASE, **rows, "seed": 2}, steps=10, output=d, overwrite=True, progress=False)
        assert second["run_id"] != first["run_id"]
        # none of the first run's rows (steps 5 to 20) left beside the second's
        assert list(second["observables"]["step"]) == [5.0, 10.0], second["observables"]["step"]
        with open(os.path.join(d, "summary.json")) as f:
            assert json.load(f)["run_id"] == second["run_id"]
        # checkpoint writers: not over another run's checkpoint, nor into its directory
        s = mpcbox.Solvent(**BASE)
        try:
            s.checkpoint(ck)
            raise AssertionError("a checkpoint replaced another run's")
        except mpcbox.ConfigError as e:
            assert e.field == "path" and d in str(e) and "overwrite=True" in str(e), e
        with tempfile.TemporaryDirectory() as e:
            mine = os.path.join(e, "mine.mpcbox")
            s.checkpoint(mine)
            s.checkpoint(mine)  # its own: replaced
            t = mpcbox.Solvent(**BASE)
            try:
                t.checkpoint(mine)
                raise AssertionError("a checkpoint replaced another solvent's")
            except mpcbox.ConfigError as err:
                assert f"run {s.run_id}" in str(err), err
            t.checkpoint(mine, overwrite=True)
            assert mpcbox.Solvent.from_checkpoint(mine).run_id == t.run_id


def main(repo):
    # keywords build the same config a RON file does; the dict form and the config round trip too
    s = mpcbox.Solvent(**BASE)
    ron = ("(cells: (8, 8, 8), particles_per_cell: 10, time_step: 0.1, collision: Srd(angle_deg: 130.0), "
           "thermostat: Mbs, seed: 3, steps: 0, device: Cpu)")
    assert s.config == mpcbox.Solvent.from_ron(ron).config
    assert mpcbox.Solvent.from_dict(s.config).config == s.config
    assert s.n_fluid == 5120 and s.time_step == 0.1 and s.config["kT"] == 1.0
    assert isinstance(s.observables()["momentum"], np.ndarray)

    # flow fields as numpy arrays indexed [ix, iy, iz], averaged over the samples taken
    f = mpcbox.Solvent(**{**BASE, "shear_rate": 0.05, "output": {"sample_interval": 2, "field_interval": 10}})
    for _ in range(20):
        f.step(np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0))
    fields = f.fields()
    assert fields["samples"] == 10, fields["samples"]
    assert fields["density"].shape == (8, 8, 8) and fields["velocity"].shape == (8, 8, 8, 3)
    assert abs(fields["density"].mean() - 10.0) < 1e-12, fields["density"].mean()
    vx = fields["velocity"][:, :, :, 0].mean(axis=(0, 2))  # the layer means of vx(y)
    assert vx[-1] > 0.1 > -0.1 > vx[0], vx  # the imposed profile, 0.05 (y + 1/2 - 4)
    assert f.fields()["samples"] == 0  # taken: a new average starts

    # the RON config's checks and messages, with the field named
    expect_config_error("time_stp", ["no such keyword", "use one of: cells, particles_per_cell"], time_stp=0.1)
    expect_config_error("time_step", ["must be finite and > 0 (got -0.1)"], time_step=-0.1)
    expect_config_error("kT", ["must be finite and > 0 (got NaN)"], kT=float("nan"))
    expect_config_error("thermostat", ["`mbs` is not a valid choice", "use one of: None, Mbs"], thermostat="mbs")
    expect_config_error("collision.angle_deg", ["strictly between 0 and 180"],
                        collision={"Srd": {"angle_deg": 190.0}})
    expect_config_error("collision.angle", ["no such keyword", "use one of: angle_deg"],
                        collision={"Srd": {"angle": 130.0}})
    expect_config_error("output.directry", ["use one of: observable_interval"], output={"directry": "x"})
    expect_config_error("cells", ["length 3"], cells=(8, 8))
    try:
        mpcbox.Solvent(cells=(8, 8, 8), time_step=0.1)
        raise AssertionError("missing fields accepted")
    except mpcbox.ConfigError as e:
        assert e.field == "particles_per_cell" and "missing" in str(e), e

    # the whole job from a RON file: the command's outputs, numpy time series and profile
    with tempfile.TemporaryDirectory() as d:
        out = mpcbox.run(os.path.join(repo, "examples/quickstart.ron"), steps=20, output=d, device="cpu")
        assert out["steps"] == 20 and out["device"].startswith("cpu"), out
        for f in ["observables.csv", "summary.json", "checkpoint.mpcbox"]:
            assert os.path.exists(os.path.join(d, f)), f
        assert out["profile"].shape == (32,) and isinstance(out["observables"]["time"], np.ndarray)
        more = mpcbox.run(resume=os.path.join(d, "checkpoint.mpcbox"), steps=30, output=d, device="cpu")
        assert more["steps"] == 30 and more["steps_this_run"] == 10, more
    one_owner_per_directory()
    try:
        mpcbox.run({**BASE, "time_step": 0.0}, steps=5)
        raise AssertionError("bad job config accepted")
    except mpcbox.ConfigError as e:
        assert e.field == "time_step", e
    # Ctrl-C during a run: KeyboardInterrupt after the step in progress, with the checkpoint
    # and the summary so far written
    import _thread, json, threading, time
    with tempfile.TemporaryDirectory() as d:
        threading.Timer(0.5, _thread.interrupt_main).start()
        t0 = time.time()
        try:
            mpcbox.run(os.path.join(repo, "examples/quickstart.ron"), steps=10**7, output=d, device="cpu")
            raise AssertionError("the run was not interrupted")
        except KeyboardInterrupt:
            pass
        assert time.time() - t0 < 30, time.time() - t0
        with open(os.path.join(d, "summary.json")) as f:
            s = json.load(f)
        assert s["interrupted"] and 0 < s["steps"] < 10**7, s
        assert os.path.exists(os.path.join(d, "checkpoint.mpcbox"))
    print("python config ok")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
