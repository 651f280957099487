"""Shared set-up of the Python CPU benchmarks: one core, one thread for every side.

Importing this module (before numpy) fixes the thread counts of OpenBLAS,
OpenMP, MKL and Tessera's kernel thread pool to 1 and pins the process to one
core (`--core N` on the command line, else the highest core it may use), so a
benchmark and its numpy baseline run alternately on the same core.
"""

import os
import statistics
import sys
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TESSERA_NUM_THREADS"):
    os.environ[_var] = "1"

CORE = int(sys.argv[sys.argv.index("--core") + 1]) if "--core" in sys.argv else max(os.sched_getaffinity(0))
os.sched_setaffinity(0, {CORE})


def median_seconds(fn, runs):
    """The median wall time of `runs` calls of fn, after one warm-up call."""
    fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def per_call_us(fn, calls=2000, repeats=5):
    """The median over `repeats` of microseconds per call in a loop of `calls` calls, after one warm-up call."""
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples)
