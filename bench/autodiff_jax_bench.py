"""Autodiff figures from Python, with JAX's beside them where there is an equivalent.

- backward/forward op-count ratio for an MLP with softmax cross-entropy and an attention block:
  Tessera counts the ops of the value-and-grad function against the forward function (graph.constant
  and return not counted, after the canonical pipeline canonicalize/cse/dce); JAX counts the jaxpr
  equations of jax.value_and_grad(f) against f's.
- time to build the backward graph of a 1,000-op forward function (the C++ transform alone; JAX:
  tracing jax.grad(f) to a jaxpr, which also traces the forward).
- peak live bytes of the reference executor running the gradient of a 16-layer MLP, with and without
  checkpointing each layer.

Run: PYTHONPATH=build-<dir>/pydev .venv/bin/python bench/autodiff_jax_bench.py
"""

from __future__ import annotations

import statistics
import time

import numpy as np

import tessera
from tessera import ops
from tessera.autodiff._stage import stage

CANONICAL = ["canonicalize", "cse", "dce"]
UNCOUNTED = {"graph.constant", "return"}


def count(module, name):
    return sum(1 for n in module.op_names(name) if n not in UNCOUNTED)


def tessera_ratio(fun, args, wrt):
    st = stage(fun, args)
    g = st.module.value_and_grad(st.name, wrt, "grad")
    raw = (count(st.module, st.name), count(st.module, g))
    st.module.run_passes(CANONICAL)
    opt = (count(st.module, st.name), count(st.module, g))
    return raw, opt


def jax_ratio(jfun, args, argnums):
    import jax
    fwd = len(jax.make_jaxpr(jfun)(*args).jaxpr.eqns)
    bwd = len(jax.make_jaxpr(jax.value_and_grad(jfun, argnums=argnums))(*args).jaxpr.eqns)
    return fwd, bwd


def mlp(w1, b1, w2, b2, x, y):
    h = ops.tanh(ops.matmul(x, w1) + b1)
    logits = ops.matmul(h, w2) + b2
    logp = logits - ops.logsumexp(logits, axis=-1, keepdims=True)
    return ops.mean(ops.sum(-(y * logp), axis=-1))


def attention(x, wq, wk, wv, wo):
    q, k, v = ops.matmul(x, wq), ops.matmul(x, wk), ops.matmul(x, wv)
    p = ops.softmax_safe(ops.gemm(q, k, transpose_b=True) * 0.5, axis=-1)
    return ops.sum(ops.matmul(ops.matmul(p, v), wo) ** 2.0)


def mlp_jax(w1, b1, w2, b2, x, y):
    import jax
    import jax.numpy as jnp
    h = jnp.tanh(x @ w1 + b1)
    logits = h @ w2 + b2
    logp = logits - jax.scipy.special.logsumexp(logits, axis=-1, keepdims=True)
    return jnp.mean(jnp.sum(-(y * logp), axis=-1))


def attention_jax(x, wq, wk, wv, wo):
    import jax
    import jax.numpy as jnp
    q, k, v = x @ wq, x @ wk, x @ wv
    p = jax.nn.softmax((q @ k.T) * 0.5, axis=-1)
    return jnp.sum(((p @ v) @ wo) ** 2.0)


def chain(x, n):
    """A forward function of n elementwise ops (then a sum)."""
    for i in range(n // 3):
        x = ops.tanh(x)
        x = x * 1.01
        x = x + 0.1
    return ops.sum(x)


def chain_jax(x, n):
    import jax.numpy as jnp
    for i in range(n // 3):
        x = jnp.tanh(x)
        x = x * 1.01
        x = x + 0.1
    return jnp.sum(x)


def time_backward_build(n_ops, repeats=5):
    x = tessera.tensor(np.ones(16))
    times, with_trace = [], []
    fwd_ops = bwd_ops = 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        st = stage(lambda x: chain(x, n_ops), (x,))
        t1 = time.perf_counter()
        g = st.module.value_and_grad(st.name, [0], "grad")
        t2 = time.perf_counter()
        times.append(t2 - t1)
        with_trace.append(t2 - t0)
        fwd_ops, bwd_ops = count(st.module, st.name), count(st.module, g)
    return statistics.median(times), statistics.median(with_trace), fwd_ops, bwd_ops


def time_jax_backward_build(n_ops, repeats=5):
    import jax
    x = np.ones(16)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.make_jaxpr(jax.grad(lambda x: chain_jax(x, n_ops)))(x)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def peak_bytes(layers=16, width=64, hidden=256, batch=32):
    """16 residual MLP layers h + tanh(h @ w1) @ w2 (w1: width x hidden): without checkpointing the
    backward pass keeps each layer's hidden activations; checkpointed, only the layer inputs."""
    rng = np.random.default_rng(0)
    ws = [(tessera.tensor(rng.standard_normal((width, hidden)).astype(np.float32) * 0.1),
           tessera.tensor(rng.standard_normal((hidden, width)).astype(np.float32) * 0.1)) for _ in range(layers)]
    x = tessera.tensor(rng.standard_normal((batch, width)).astype(np.float32))

    def block(h, w):
        return h + ops.matmul(ops.tanh(ops.matmul(h, w[0])), w[1])

    def loss(ws, remat):
        h = x
        layer = tessera.checkpoint(block) if remat else block
        for w in ws:
            h = layer(h, w)
        return ops.sum(h * h)

    out = {}
    for remat in (False, True):
        st = stage(lambda ws: loss(ws, remat), (ws,))
        g = st.module.value_and_grad(st.name, list(range(2 * layers)), "grad")
        _, peak, executed = st.module.execute_with_stats(g, st.inputs)
        out[remat] = (peak, executed)
    inputs = sum(a.size for pair in ws for a in pair) * 4
    return out, inputs


def main():
    rng = np.random.default_rng(0)
    t = tessera.tensor
    mlp_args = [rng.standard_normal(s) for s in [(32, 64), (64,), (64, 10), (10,), (16, 32)]]
    mlp_args.append(np.eye(10)[rng.integers(0, 10, 16)])
    att_args = [rng.standard_normal(s) for s in [(8, 16), (16, 8), (16, 8), (16, 8), (8, 16)]]

    rows = []
    for label, fun, jfun, args, wrt in (("MLP + softmax CE", mlp, mlp_jax, mlp_args, [0, 1, 2, 3]),
                                        ("attention block", attention, attention_jax, att_args, [0, 1, 2, 3, 4])):
        raw, opt = tessera_ratio(fun, [t(a) for a in args], wrt)
        try:
            jf, jb = jax_ratio(jfun, args, tuple(wrt))
            jtxt = f"{jf:>4} {jb:>5} {jb / jf:6.2f}"
        except ImportError:
            jtxt = "  (jax not installed)"
        rows.append((label, raw, opt, jtxt))

    print("backward / forward op counts (value-and-grad function vs forward function)")
    print(f"{'function':<18} {'tessera raw':>18} {'tessera optimized':>22}   {'jax fwd  bwd  ratio':>20}")
    for label, raw, opt, jtxt in rows:
        print(f"{label:<18} {raw[0]:>4} {raw[1]:>5} {raw[1] / raw[0]:6.2f}   {opt[0]:>6} {opt[1]:>5} "
              f"{opt[1] / opt[0]:6.2f}     {jtxt}")

    seconds, traced, fwd_ops, bwd_ops = time_backward_build(1000)
    try:
        jsec = f"{time_jax_backward_build(1000) * 1e3:8.1f} ms (jax.make_jaxpr(jax.grad(f)), forward tracing included)"
    except ImportError:
        jsec = "(jax not installed)"
    print()
    print(f"backward graph of a {fwd_ops}-op forward function: {seconds * 1e3:.1f} ms to build "
          f"({bwd_ops} ops), {traced * 1e3:.1f} ms with tracing the forward from Python")
    print(f"  jax: {jsec}")

    stats, params = peak_bytes()
    (p0, e0), (p1, e1) = stats[False], stats[True]
    print()
    print("16-layer residual MLP gradient (fp32, width 64, hidden 256, batch 32) on the reference executor:")
    print(f"  peak live bytes: {p0} without checkpointing, {p1} with each layer checkpointed "
          f"({100 * (p0 - p1) / p0:.0f}% less); ops executed {e0} vs {e1}")
    print(f"  above the {params} bytes of parameters: {p0 - params} vs {p1 - params} "
          f"({100 * (p0 - p1) / (p0 - params):.0f}% less)")


if __name__ == "__main__":
    main()
