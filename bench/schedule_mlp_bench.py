"""jit(grad) of a 2-layer MLP on the compiled path, next to numpy and jax.jit.

    .venv/bin/python bench/schedule_mlp_bench.py [--cores 1|all] [--batch 256] [--width 1024]

The step: h = relu(x W1 + b1); logits = h W2 + b2; loss = mean(-sum(y log
softmax(logits))); the gradients of W1, b1, W2, b2. Tessera runs
jit(grad(loss)) (compiled kernels, the default backend); numpy runs the same
gradients written by hand (six matmuls through its BLAS); JAX runs
jax.jit(jax.grad(loss)) on the CPU. Also reported:

- first call: Tessera's trace + Schedule IR + one host compile with an empty
  kernel cache, and the same in a second process whose cache is warm (it
  must compile nothing);
- cached-call overhead: a jit function of one tiny elementwise op, per call;
- peak resident memory of a process that runs the step, Tessera against JAX.

Results are checked against numpy (fp32, within 1e-4 relative).
"""

import cores  # first: thread counts before numpy loads

import argparse  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402


def loss_fn(ops, w1, b1, w2, b2, x, y):
    h = ops.relu(ops.matmul(x, w1) + b1)
    logits = ops.matmul(h, w2) + b2
    logp = logits - ops.logsumexp(logits, axis=-1, keepdims=True)
    return ops.mean(ops.sum(-(y * logp), axis=-1))


def numpy_grads(w1, b1, w2, b2, x, y):
    z1 = x @ w1 + b1
    h = np.maximum(z1, 0)
    logits = h @ w2 + b2
    e = np.exp(logits - logits.max(-1, keepdims=True))
    d = (e / e.sum(-1, keepdims=True) - y) / x.shape[0]
    dh = (d @ w2.T) * (z1 > 0)
    return x.T @ dh, dh.sum(0), h.T @ d, d.sum(0)


def data(batch, width):
    rng = np.random.default_rng(0)
    w1 = (rng.standard_normal((width, width)) * 0.03).astype(np.float32)
    w2 = (rng.standard_normal((width, width)) * 0.03).astype(np.float32)
    b1 = np.zeros(width, np.float32)
    b2 = np.zeros(width, np.float32)
    x = rng.standard_normal((batch, width)).astype(np.float32)
    y = np.eye(width, dtype=np.float32)[rng.integers(0, width, batch)]
    return w1, b1, w2, b2, x, y


def tessera_step(batch, width):
    import tessera
    # Named parameters: jit traces them as arguments (tensors inside *args would be traced as constants).
    def loss(w1, b1, w2, b2, x, y):
        return loss_fn(tessera.ops, w1, b1, w2, b2, x, y)

    grad = tessera.jit(tessera.grad(loss, argnums=(0, 1, 2, 3)))
    args = [tessera.tensor(a) for a in data(batch, width)]
    return lambda: grad(*args)


def jax_step(batch, width):
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_platforms", "cpu")

    class Ops:
        relu = staticmethod(jax.nn.relu)
        matmul = staticmethod(jnp.matmul)
        sum = staticmethod(jnp.sum)
        mean = staticmethod(jnp.mean)

        @staticmethod
        def logsumexp(v, axis, keepdims):
            return jax.scipy.special.logsumexp(v, axis=axis, keepdims=keepdims)

    grad = jax.jit(jax.grad(lambda *a: loss_fn(Ops, *a), argnums=(0, 1, 2, 3)))
    args = [jnp.asarray(a) for a in data(batch, width)]
    return lambda: [g.block_until_ready() for g in grad(*args)]


def memory_child(kind, batch, width):
    """Runs three steps and prints the peak resident set in MiB (VmHWM: unlike
    ru_maxrss it starts afresh at exec, not at the parent's peak)."""
    step = tessera_step(batch, width) if kind == "tessera" else jax_step(batch, width)
    for _ in range(3):
        step()
    with open("/proc/self/status") as f:
        peak_kib = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    print(peak_kib / 1024.0)


def child(args, *extra, env=None):
    out = subprocess.run([sys.executable, __file__, "--cores", "all" if cores.ALL else "1",
                          "--batch", str(args.batch), "--width", str(args.width), *extra],
                         capture_output=True, text=True, env=env, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def first_call_child(batch, width):
    start = time.perf_counter()
    tessera_step(batch, width)()
    print(time.perf_counter() - start)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cores", default="1")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--memory")
    ap.add_argument("--first-call", action="store_true")
    args = ap.parse_args()
    if args.memory:
        return memory_child(args.memory, args.batch, args.width)
    if args.first_call:
        return first_call_child(args.batch, args.width)

    import tessera
    d = data(args.batch, args.width)
    step = tessera_step(args.batch, args.width)
    got = [g.numpy() for g in step()]
    for g, w in zip(got, numpy_grads(*d)):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)
    t_tessera = cores.median_seconds(step, 10)
    t_numpy = cores.median_seconds(lambda: numpy_grads(*d), 10)
    try:
        t_jax = cores.median_seconds(jax_step(args.batch, args.width), 10)
    except ImportError:
        t_jax = None

    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TESSERA_CACHE_DIR=cache)
        first_cold = child(args, "--first-call", env=env)
        first_warm = child(args, "--first-call", env=env)

    tiny = tessera.jit(lambda v: v + 1.0)
    v = tessera.tensor(np.zeros(1, np.float32))
    overhead = cores.median_seconds(lambda: tiny(v), 2000)

    mem_tessera = child(args, "--memory", "tessera")
    mem_jax = child(args, "--memory", "jax") if t_jax is not None else None

    print(f"jit(grad) MLP, batch {args.batch}, width {args.width}, fp32, {cores.label()}")
    print(f"  step: tessera {t_tessera * 1e3:.2f} ms, numpy {t_numpy * 1e3:.2f} ms -> {t_numpy / t_tessera:.2f}x numpy",
          end="")
    print(f"; jax.jit {t_jax * 1e3:.2f} ms -> {t_jax / t_tessera:.2f}x jax" if t_jax else "")
    print(f"  first call: {first_cold:.2f} s with an empty kernel cache, {first_warm:.2f} s in a second process")
    print(f"  cached call of a one-op jit function: {overhead * 1e6:.1f} us")
    print(f"  peak resident memory: tessera {mem_tessera:.0f} MiB" +
          (f", jax {mem_jax:.0f} MiB -> {mem_tessera / mem_jax:.2f}x jax" if mem_jax else ""))


if __name__ == "__main__":
    main()
