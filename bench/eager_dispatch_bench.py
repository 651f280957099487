"""Eager per-op dispatch overhead on a tiny tensor, next to numpy in the same run.

    .venv/bin/python bench/eager_dispatch_bench.py

Reports microseconds per call (median of repeats) for tessera.ops.add on two
4-element fp32 tensors and numpy's add on the same arrays, and their ratio.
"""

import statistics
import time

import numpy as np

import tessera
from tessera import ops


def per_call_us(fn, calls=20000, repeats=7):
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples)


def main():
    a_np = np.arange(4, dtype=np.float32)
    b_np = np.ones(4, dtype=np.float32)
    a, b = tessera.tensor(a_np), tessera.tensor(b_np)
    rows = [
        ("add fp32[4]", per_call_us(lambda: ops.add(a, b)), per_call_us(lambda: np.add(a_np, b_np))),
        ("exp fp32[4]", per_call_us(lambda: ops.exp(a)), per_call_us(lambda: np.exp(a_np))),
        ("sum fp32[4]", per_call_us(lambda: ops.sum(a)), per_call_us(lambda: np.sum(a_np))),
    ]
    print(f"{'op':<14}{'tessera us':>12}{'numpy us':>10}{'ratio':>8}")
    for name, t, n in rows:
        print(f"{name:<14}{t:>12.2f}{n:>10.2f}{t / n:>8.1f}")


if __name__ == "__main__":
    main()
