"""flash_attn on the CPU next to numpy and JAX attention, in the same run.

    .venv/bin/python bench/flash_attn_bench.py [--cores 1|all] [--b 1] [--h 4] [--s 256 512] [--d 64 128] [--runs 3]

Forward and backward (dq, dk, dv) of softmax(q k^T / sqrt(D)) v, causal and
not, fp32 and bf16 inputs, q/k/v [B, H, S, D]. Tessera runs the eager ops,
which are its compiled attention kernels: by default the blocked ones (64
query rows against 64 keys through tile.mma, the online softmax on whole
tiles; docs/design/0044), or with TESSERA_ATTENTION_BLOCKED=0 the lane ones
(one lane per query row, an online softmax over the keys with fp32
accumulation; docs/design/0015-flash-attention.md); the backward is its own
deterministic kernel either way. numpy forms the
[S, S] score matrix in float32 (np.einsum, then a softmax); JAX (jit, CPU)
does the same in float32 and differentiates it with jax.vjp. bf16 rows run
numpy/JAX on the same (rounded) values in fp32.

GFLOP/s counts 4 * B * H * S^2 * D flops forward (two matrix products; half
that when causal) and 2.5x that backward (five products, one recomputed),
the usual convention, for all three. Each figure is the median of --runs
timed calls after a warm-up; results are checked against numpy first.
"""

from cores import label, median_seconds  # first: thread set-up before numpy

import argparse  # noqa: E402
import os  # noqa: E402

import numpy as np  # noqa: E402

import tessera  # noqa: E402


def attention_np(q, k, v, causal):
    s = np.einsum("bhid,bhjd->bhij", q, k) * np.float32(q.shape[-1] ** -0.5)
    if causal:
        n = q.shape[2]
        s = np.where(np.tri(n, dtype=bool), s, np.float32(-np.inf))
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bhij,bhjd->bhid", p / p.sum(-1, keepdims=True), v)


def jax_fns(causal):
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None, None

    def f(q, k, v):
        s = jnp.einsum("bhid,bhjd->bhij", q, k) * (q.shape[-1] ** -0.5)
        if causal:
            n = q.shape[2]
            s = jnp.where(jnp.tri(n, dtype=bool), s, -jnp.inf)
        return jnp.einsum("bhij,bhjd->bhid", jax.nn.softmax(s, axis=-1), v)

    fwd = jax.jit(f)
    bwd = jax.jit(lambda q, k, v, g: jax.vjp(f, q, k, v)[1](g))
    return (lambda *a: fwd(*a).block_until_ready(),
            lambda *a: [x.block_until_ready() for x in bwd(*a)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cores", default="1")
    ap.add_argument("--b", type=int, default=1)
    ap.add_argument("--h", type=int, default=4)
    ap.add_argument("--s", type=int, nargs="+", default=[256, 512])
    ap.add_argument("--d", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--dtypes", nargs="+", default=["fp32", "bf16"])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"flash_attn, B = {args.b}, H = {args.h}, {label()}; GFLOP/s (ms)")
    # The blocked kernels are the CPU's default (docs/design/0044); TESSERA_ATTENTION_BLOCKED=0
    # times the lane kernels (the reference's recipe).
    blocked = os.environ.get("TESSERA_ATTENTION_BLOCKED") != "0"
    print(f"{'S':>5} {'D':>4} {'causal':>6} {'dtype':>5} | {'tessera fwd':>16} {'numpy fwd':>16} {'jax fwd':>16} | "
          f"{'tessera bwd':>16} {'jax bwd':>16}")
    for s in args.s:
        for d in args.d:
            for causal in (False, True):
                jfwd, jbwd = jax_fns(causal)
                for dtype in args.dtypes:
                    shape = (args.b, args.h, s, d)
                    q, k, v, g = (tessera.tensor(rng.standard_normal(shape), dtype=dtype) for _ in range(4))
                    qn, kn, vn, gn = (x.numpy().astype(np.float32) for x in (q, k, v, g))
                    got = tessera.ops.flash_attn(q, k, v, causal=causal).numpy().astype(np.float64)
                    want = attention_np(qn.astype(np.float64), kn.astype(np.float64), vn.astype(np.float64), causal)
                    tol = 1e-4 + (2.0 ** -8 * np.abs(want) if dtype == "bf16" else 0)
                    if blocked and dtype == "bf16":  # P rounded to bf16 (docs/design/0015)
                        tol = tol + 2.0 ** -7 * (np.abs(want) + np.abs(vn).max())
                    assert np.all(np.abs(got - want) <= tol), f"flash_attn {dtype} S={s} D={d}: wrong result"
                    grad = tessera.jit(tessera.grad(
                        lambda q, k, v: tessera.ops.sum(tessera.ops.flash_attn(q, k, v, causal=causal) * g),
                        argnums=(0, 1, 2)))
                    flops = 4.0 * args.b * args.h * s * s * d * (0.5 if causal else 1.0)
                    times = [median_seconds(lambda: tessera.ops.flash_attn(q, k, v, causal=causal), args.runs),
                             median_seconds(lambda: attention_np(qn, kn, vn, causal), args.runs)]
                    times.append(median_seconds(lambda: jfwd(qn, kn, vn), args.runs) if jfwd else float("nan"))
                    # Tessera's backward timed as jit(grad) minus its forward (grad runs both).
                    tb = max(median_seconds(lambda: grad(q, k, v), args.runs) - times[0], 1e-9)
                    times += [tb, median_seconds(lambda: jbwd(qn, kn, vn, gn), args.runs) if jbwd else float("nan")]
                    fl = [flops] * 3 + [2.5 * flops] * 2
                    cells = [f"{f / t / 1e9:>7.2f} ({t * 1e3:>6.1f})" for f, t in zip(fl, times)]
                    print(f"{s:>5} {d:>4} {str(causal):>6} {dtype:>5} | {cells[0]:>16} {cells[1]:>16} {cells[2]:>16} | "
                          f"{cells[3]:>16} {cells[4]:>16}")


if __name__ == "__main__":
    main()
