"""Timing for the GPU benchmarks: launches do not synchronize, so each timed
call ends with the device synchronization it is handed."""

import time


def median_seconds(fn, runs=10, sync=None):
    """The median wall time of `runs` calls of fn (each followed by sync()), after one warm-up call."""
    fn()
    if sync:
        sync()
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        if sync:
            sync()
        samples.append(time.perf_counter() - t0)
    return sorted(samples)[len(samples) // 2]
