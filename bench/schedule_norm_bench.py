"""softmax_safe, layernorm_safe and rmsnorm_safe through @tessera.jit (compiled
kernels, the default), forward and backward, next to jax.jit in the same run.

    .venv/bin/python bench/schedule_norm_bench.py [--cores 1|all] [--rows 4096] [--cols 4096]

Forward: y = f(x) over the last axis of an fp32 [rows, cols] tensor.
Backward: the gradient of sum(f(x) * t) with respect to x (t fixed), which is
what a training step needs of f. Tessera's forward is one normalization
kernel; its backward is Graph IR autodiff compiled into elementwise and
reduction kernels. Results are checked against jax (fp32, 1e-4 relative).
"""

import cores  # first: thread counts before numpy loads

import argparse  # noqa: E402

import numpy as np  # noqa: E402

import tessera  # noqa: E402


def tessera_fns(name):
    op = {"softmax": lambda x: tessera.ops.softmax_safe(x, axis=-1),
          "layernorm": lambda x: tessera.ops.layernorm_safe(x, axis=-1),
          "rmsnorm": lambda x: tessera.ops.rmsnorm_safe(x, axis=-1)}[name]

    def fwd(x):
        return op(x)

    def loss(x, t):
        return tessera.ops.sum(op(x) * t)

    return tessera.jit(fwd), tessera.jit(tessera.grad(loss))


def jax_fns(name):
    import jax
    import jax.numpy as jnp

    def layernorm(x):
        m = jnp.mean(x, -1, keepdims=True)
        return (x - m) / jnp.sqrt(jnp.var(x, -1, keepdims=True) + 1e-5)

    def rmsnorm(x):
        return x / jnp.sqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6)

    op = {"softmax": lambda x: jax.nn.softmax(x, axis=-1), "layernorm": layernorm, "rmsnorm": rmsnorm}[name]
    return jax.jit(op), jax.jit(jax.grad(lambda x, t: jnp.sum(op(x) * t)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cores", default="1")
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    args = ap.parse_args()
    import jax
    jax.config.update("jax_platforms", "cpu")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((args.rows, args.cols)).astype(np.float32)
    t = rng.standard_normal((args.rows, args.cols)).astype(np.float32)
    tx, tt = tessera.tensor(x), tessera.tensor(t)
    jx, jt = jax.numpy.asarray(x), jax.numpy.asarray(t)
    print(f"{args.rows}x{args.cols} fp32, {cores.label()}")
    print(f"{'op':>10} {'pass':>8} {'tessera ms':>11} {'jax.jit ms':>11} {'vs jax':>7}")
    for name in ("softmax", "layernorm", "rmsnorm"):
        fwd, bwd = tessera_fns(name)
        jfwd, jbwd = jax_fns(name)
        np.testing.assert_allclose(fwd(tx).numpy(), np.asarray(jfwd(jx)), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(bwd(tx, tt).numpy(), np.asarray(jbwd(jx, jt)), rtol=1e-3, atol=1e-4)
        for label, ours, theirs in (("forward", lambda: fwd(tx), lambda: jfwd(jx).block_until_ready()),
                                    ("backward", lambda: bwd(tx, tt), lambda: jbwd(jx, jt).block_until_ready())):
            a = cores.median_seconds(ours, 5)
            b = cores.median_seconds(theirs, 5)
            print(f"{name:>10} {label:>8} {a * 1e3:11.2f} {b * 1e3:11.2f} {b / a:6.2f}x")


if __name__ == "__main__":
    main()
