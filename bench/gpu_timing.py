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


def host_seconds(fn, runs=20, sync=None):
    """The host's cost of one call: `runs` calls queued back to back without
    synchronizing, divided by `runs` (after a synchronized warm-up). Where it
    approaches median_seconds, the host, not the GPU, sets the pace."""
    fn()
    if sync:
        sync()
    t0 = time.perf_counter()
    for _ in range(runs):
        fn()
    elapsed = time.perf_counter() - t0
    if sync:
        sync()
    return elapsed / runs


def pace_seconds(fn, sync, runs, rounds=3):
    """Seconds per call at the GPU's pace: `runs` calls queued back to back and one
    synchronization, the best of `rounds` such rounds (after a synchronized warm-up)."""
    fn()
    sync()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(runs):
            fn()
        sync()
        best = min(best, (time.perf_counter() - t0) / runs)
    return best
