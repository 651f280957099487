"""Eager per-op dispatch overhead on a tiny tensor, eager add of 4096 elements
(a launch of a few groups), an spmm of a small CSR matrix (an op of ten
operands: the shape pattern an eager call looks up), and eager add and matmul
at 1024^2 (compiled kernels, the default), next to numpy (scipy for spmm) in
the same run, and the time to trace a 1,000-op @jit function from Python.

    .venv/bin/python bench/eager_dispatch_bench.py

Reports microseconds per call (median of repeats) for tessera.ops on
4-element fp32 tensors and numpy's equivalent on the same arrays, and their
ratio; then milliseconds to trace + verify a 1,000-op function (Python
tracing, C++ op creation with inference, verifier), and with the canonical
pass pipeline on top.
"""

import statistics
import time

import one_core  # first: one core, one thread for every side, before numpy loads
import numpy as np  # noqa: E402

import tessera  # noqa: E402
from tessera import ops  # noqa: E402


def per_call_us(fn, calls=20000, repeats=7):
    return one_core.per_call_us(fn, calls, repeats)


def trace_ms(n_ops=1000, repeats=5):
    def body(x, y):
        for i in range(n_ops // 2):
            x = x * y if i % 2 else x + y
            y = ops.tanh(x)
        return x, y

    arg = tessera.tensor(np.ones((8, 256), np.float32))
    plain, full = [], []
    for _ in range(repeats):
        from tessera._trace import TraceContext
        start = time.perf_counter()
        with TraceContext("bench") as ctx:
            ctx.bindings = {}
            xs = ctx.argument(arg.shape, arg.policy, "x")
            ys = ctx.argument(arg.shape, arg.policy, "y")
            out = body(xs, ys)
            graph = ctx.builder.finish([t._id for t in out])  # verifies
        plain.append((time.perf_counter() - start) * 1e3)
        assert graph.num_ops == n_ops + 1
        f = tessera.jit(body)
        start = time.perf_counter()
        f.inspect_ir  # noqa: B018
        f(arg, arg)
        full.append((time.perf_counter() - start) * 1e3)
    return statistics.median(plain), statistics.median(full)


def main():
    a_np = np.arange(4, dtype=np.float32)
    b_np = np.ones(4, dtype=np.float32)
    a, b = tessera.tensor(a_np), tessera.tensor(b_np)
    rows = [
        ("add fp32[4]", per_call_us(lambda: ops.add(a, b)), per_call_us(lambda: np.add(a_np, b_np))),
        ("exp fp32[4]", per_call_us(lambda: ops.exp(a)), per_call_us(lambda: np.exp(a_np))),
        ("sum fp32[4]", per_call_us(lambda: ops.sum(a)), per_call_us(lambda: np.sum(a_np))),
    ]
    # A few groups: the launch's helper threads are woken, the launching
    # thread usually finishes first (the thread pool's wake-up cost).
    c_np = np.arange(4096, dtype=np.float32)
    c = tessera.tensor(c_np)
    rows.append(("add fp32[4096]", per_call_us(lambda: ops.add(c, c), 5000), per_call_us(lambda: np.add(c_np, c_np), 5000)))
    import scipy.sparse as sp
    s_np = sp.random(64, 64, density=0.05, format="csr", random_state=1, dtype=np.float32)
    s_np.sort_indices()
    s = tessera.sparse.from_scipy(s_np, dtype="fp32")
    d_np = np.ones((64, 8), np.float32)
    d = tessera.tensor(d_np)
    ops.spmm(s, d)  # load (or compile) the kernel first
    rows.append(("spmm [64,64]x[64,8]", per_call_us(lambda: ops.spmm(s, d), 2000), per_call_us(lambda: s_np @ d_np, 2000)))
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((1024, 1024)).astype(np.float32)
    y_np = rng.standard_normal((1024, 1024)).astype(np.float32)
    x, y = tessera.tensor(x_np), tessera.tensor(y_np)
    ops.add(x, y), ops.matmul(x, y)  # load (or compile) the kernels first
    rows += [
        ("add fp32[1024^2]", per_call_us(lambda: ops.add(x, y), 200), per_call_us(lambda: np.add(x_np, y_np), 200)),
        ("matmul 1024^2", per_call_us(lambda: ops.matmul(x, y), 10, 3), per_call_us(lambda: x_np @ y_np, 10, 3)),
    ]
    print(f"{'op':<18}{'tessera us':>12}{'numpy us':>10}{'ratio':>8}")
    for name, t, n in rows:
        print(f"{name:<18}{t:>12.2f}{n:>10.2f}{t / n:>8.2f}")
    plain, full = trace_ms()
    print(f"trace + verify, 1,000-op function: {plain:.1f} ms ({plain:.1f} us per op)")
    print(f"@jit first call (trace, verify, canonicalize+cse+dce, run on [8, 256]): {full:.1f} ms")


if __name__ == "__main__":
    main()
