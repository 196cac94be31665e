"""Python jobs stopped and watched as `mpcbox run` is (run by coupling/python/tests/python.rs).

    python3 check_jobs.py run OUT [--ignore-sigint]   a long job into OUT, to be stopped by a signal
    python3 check_jobs.py progress OUT                 progress lines, then none (progress=False)

`run` exits with status 3 after printing the KeyboardInterrupt a SIGINT ends the job in and the
SIGINT handler found afterwards; a SIGTERM ends it in SystemExit (status 1, its message on
stderr). `--ignore-sigint` starts with SIGINT ignored, as nohup or `job &` in a script leave it.
"""
import signal
import sys

import mpcbox

FLUID = dict(cells=(8, 8, 8), particles_per_cell=10, time_step=0.1, collision={"Srd": {"angle_deg": 130.0}},
             thermostat="Mbs", seed=3, device="Cpu", output={"observable_interval": 5})


def run(out, ignore_sigint):
    if ignore_sigint:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        mpcbox.run(FLUID, steps=10**8, output=out, progress=False)
    except KeyboardInterrupt as e:
        print(f"KeyboardInterrupt: {e}", flush=True)
        print(f"SIGINT handler after the job: {signal.getsignal(signal.SIGINT)!r}", flush=True)
        sys.exit(3)
    raise AssertionError("the job ended by itself")


def progress(out):
    print("--- progress=0", file=sys.stderr, flush=True)
    mpcbox.run(FLUID, steps=30, output=f"{out}/lines", progress=0)
    print("--- progress=False", file=sys.stderr, flush=True)
    mpcbox.run(FLUID, steps=30, output=f"{out}/quiet", progress=False)
    print("--- done", file=sys.stderr, flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("run", "progress"):
        sys.exit(__doc__)
    if sys.argv[1] == "run":
        run(sys.argv[2], "--ignore-sigint" in sys.argv[3:])
    else:
        progress(sys.argv[2])
