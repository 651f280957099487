"""Fused elementwise chains through @tessera.jit on the compiled path,
next to numpy (unfused) and jax.jit in the same run, on one core.

    .venv/bin/python bench/schedule_elementwise_bench.py [--sizes 1048576 16777216] [--core N]

Two chains in fp32 (x, b, s: tensors of shape [n]):

    arith:  y = maximum((x + b) * s - x * b, 0 * x)   (six ops: the zero is 0 * x)
    tanh:   y = tanh((x + b) * s) * x - b

Tessera compiles each once per signature (TESSERA_BACKEND=compiled) into one
Schedule IR kernel; numpy runs the ops one after the other with temporaries; jax.jit fuses them
with XLA. GB/s counts the bytes the fused kernel must move (three inputs read,
one output written: 16 bytes per element) for every side. Each figure is the
median of timed runs after a warm-up, and the results are checked against
numpy (Tessera's elementwise results equal its reference executor bit for
bit; against numpy's float32 they agree to a few ulps, as tanh differs).
"""

import one_core  # first: pins the process and fixes thread counts before numpy loads

import argparse  # noqa: E402
import os  # noqa: E402

os.environ["TESSERA_BACKEND"] = "compiled"

import numpy as np  # noqa: E402

import tessera  # noqa: E402


CHAINS = {
    "arith": (lambda ops, x, b, s: ops.maximum((x + b) * s - x * b, 0.0 * x)),
    "tanh": (lambda ops, x, b, s: ops.tanh((x + b) * s) * x - b),
}


class _TesseraOps:
    maximum = staticmethod(tessera.ops.maximum)
    tanh = staticmethod(tessera.ops.tanh)


class _NumpyOps:
    maximum = staticmethod(np.maximum)
    tanh = staticmethod(np.tanh)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1 << 20, 1 << 24])
    ap.add_argument("--core", type=int)
    args = ap.parse_args()
    try:
        import jax
        jax.config.update("jax_platforms", "cpu")
    except ImportError:
        jax = None
    print(f"{'chain':>6} {'n':>10} {'tessera GB/s':>13} {'numpy GB/s':>11} {'jax.jit GB/s':>13} {'vs numpy':>9} "
          f"{'vs jax':>7}")
    for name, body in CHAINS.items():
        for n in args.sizes:
            run_one(name, body, n, jax)


def run_one(name, body, n, jax):
    chain = tessera.jit(lambda x, b, s: body(_TesseraOps, x, b, s))
    numpy_chain = lambda x, b, s: body(_NumpyOps, x, b, s)  # noqa: E731
    jax_chain = None
    if jax is not None:
        import jax.numpy as jnp
        jax_chain = jax.jit(lambda x, b, s: body(jnp, x, b, s))
    rng = np.random.default_rng(0)
    x, b, s = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    tx, tb, ts = tessera.tensor(x), tessera.tensor(b), tessera.tensor(s)
    got = chain(tx, tb, ts).numpy()
    np.testing.assert_allclose(got, numpy_chain(x, b, s), rtol=1e-5, atol=1e-5)
    runs = 20 if n <= 1 << 20 else 5
    t_tessera = one_core.median_seconds(lambda: chain(tx, tb, ts), runs)
    t_numpy = one_core.median_seconds(lambda: numpy_chain(x, b, s), runs)
    t_jax = None
    if jax_chain is not None:
        jx, jb, js = (jax.device_put(a) for a in (x, b, s))
        np.testing.assert_allclose(np.asarray(jax_chain(jx, jb, js)), got, rtol=1e-5, atol=1e-5)
        t_jax = one_core.median_seconds(lambda: jax_chain(jx, jb, js).block_until_ready(), runs)
    gbs = lambda t: 16 * n / t / 1e9  # noqa: E731
    jax_col = f"{gbs(t_jax):13.2f}" if t_jax else f"{'-':>13}"
    vs_jax = f"{t_jax / t_tessera:7.2f}" if t_jax else f"{'-':>7}"
    print(f"{name:>6} {n:>10} {gbs(t_tessera):13.2f} {gbs(t_numpy):11.2f} {jax_col} {t_numpy / t_tessera:9.2f} {vs_jax}")


if __name__ == "__main__":
    main()
