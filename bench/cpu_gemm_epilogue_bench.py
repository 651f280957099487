"""Fused GEMM epilogues and short column sums on the CPU, one core, next to numpy
in the same run (docs/design/0050).

    .venv/bin/python bench/cpu_gemm_epilogue_bench.py [--core N]

Rows: `x @ w`, `x @ w + b`, `tanh(x @ w + b)` and `gelu(x @ w + b)` (exact, erf)
for x [256, 512] and w [512, 1024] fp32, each one Tessera kernel (the product
with its epilogue) against numpy (OpenBLAS's product, then the elementwise
ops; gelu through scipy.special.erf); and sums over axis 0 of [64, 32] and
[256, 32] (a bias gradient's shape in a small PINN), against numpy's sum.
Milliseconds or microseconds per call (`Executable.run`, kernels included);
the last column is numpy's time over Tessera's (above 1: Tessera is faster).
Tessera's results follow the canonical order and its exact elementary
functions; numpy's do not, so the values are compared loosely (1e-4).
"""

from one_core import per_call_us  # one core, one thread for every side
import numpy as np
from scipy.special import erf

import tessera

ops = tessera.ops


def main():
    rng = np.random.default_rng(0)
    xh = rng.standard_normal((256, 512)).astype(np.float32)
    wh = (rng.standard_normal((512, 1024)) * 0.05).astype(np.float32)
    bh = rng.standard_normal(1024).astype(np.float32)
    x, w, b = (tessera.tensor(a) for a in (xh, wh, bh))
    root_half = np.float32(np.sqrt(0.5))

    def np_gelu(v):
        return np.float32(0.5) * v * (np.float32(1) + erf(v * root_half).astype(np.float32))

    rows = [
        ("x @ w", lambda x, w, b: ops.matmul(x, w), lambda: xh @ wh),
        ("x @ w + b", lambda x, w, b: ops.matmul(x, w) + b, lambda: xh @ wh + bh),
        ("tanh(x @ w + b)", lambda x, w, b: ops.tanh(ops.matmul(x, w) + b), lambda: np.tanh(xh @ wh + bh)),
        ("gelu(x @ w + b)", lambda x, w, b: ops.gelu(ops.matmul(x, w) + b), lambda: np_gelu(xh @ wh + bh)),
    ]
    print(f"{'function':<22} {'kernels':>7} {'tessera':>10} {'numpy':>10} {'numpy/tessera':>13}")
    for name, fn, reference in rows:
        f = tessera.jit(fn)
        got = f(x, w, b)
        np.testing.assert_allclose(got.numpy(), reference(), rtol=1e-4, atol=1e-4)
        exe = f.executable()
        t = per_call_us(lambda: exe.run([x, w, b]), calls=20, repeats=5) / 1e3
        n = per_call_us(reference, calls=20, repeats=5) / 1e3
        print(f"{name:<22} {len(exe.kernels):7d} {t:8.3f}ms {n:8.3f}ms {n / t:12.2f}x")
    for shape in ((64, 32), (256, 32)):
        ch = rng.standard_normal(shape).astype(np.float32)
        c = tessera.tensor(ch)
        f = tessera.jit(lambda c: ops.sum(c, axis=0))
        np.testing.assert_allclose(f(c).numpy(), ch.sum(axis=0), rtol=1e-4, atol=1e-4)
        exe = f.executable()
        t = per_call_us(lambda: exe.run([c]))
        n = per_call_us(lambda: ch.sum(axis=0))
        name = f"sum axis 0 {list(shape)}"
        print(f"{name:<22} {len(exe.kernels):7d} {t:8.2f}us {n:8.2f}us {n / t:12.2f}x")


if __name__ == "__main__":
    main()
