"""Thread set-up of the Python CPU benchmarks that report one core and all cores.

Import before numpy. `--cores 1` (the default) pins the process to one core and
sets every library's threads to 1 (one_core.py); `--cores all` leaves every
core to numpy, JAX and Tessera's kernel thread pool alike.
"""

import sys

ALL = "--cores" in sys.argv and sys.argv[sys.argv.index("--cores") + 1] == "all"
if not ALL:
    import one_core  # noqa: F401  (pins the process, fixes thread counts)

import statistics  # noqa: E402
import time  # noqa: E402


def label():
    return "all cores" if ALL else "one core"


def median_seconds(fn, runs):
    """The median wall time of `runs` calls of fn, after one warm-up call."""
    fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)
