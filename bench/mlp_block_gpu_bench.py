"""@jit GEMMs and a transformer MLP block on one GPU, in bf16 @accum(fp32),
next to PyTorch (cuBLAS, eager autograd and torch.compile) in the same run.

    python bench/mlp_block_gpu_bench.py [--tokens 8192] [--d 4096] [--hidden 16384] [--runs 5] [--no-compile] [--profile]

Rows:
- matmul at M = N = K = 4096 and 8192, and matmul + bias + gelu (the GEMM
  with its epilogue fused) at [tokens, d] x [d, hidden], TFLOP/s against
  torch.matmul (cuBLAS) and torch.compile of the same function;
- the MLP block y = gelu(x W1 + b1) W2 + b2, forward and backward as one
  jit(grad) of sum(y * g) with respect to W1, b1, W2, b2 and x, at both
  gradient precisions (precision="full": fp32 gradients, autodiff's default;
  "storage": bf16 gradients, as torch keeps them), against torch
  eager autograd and torch.compile of the same block, per step and in
  TFLOP/s (6 x tokens x d x hidden x 2 for the six products), and the peak
  device memory of a step: tessera.runtime.memory_stats' peak_in_use
  against torch.cuda.max_memory_allocated, each above what its inputs held.
Tessera's results are checked against torch first. Times are per call over
back-to-back calls ending in one device synchronization.
"""

import argparse

import ml_dtypes
import numpy as np

import tessera
from gpu_timing import pace_seconds

ops = tessera.ops


def pace(fn, sync, runs):
    return pace_seconds(fn, sync, runs, rounds=2)


def close(name, got, want, tol):
    """max |got - want| <= tol * max |want| (tensors of any dtype, compared in float64)."""
    g = np.asarray(got, np.float64)
    w = np.asarray(want, np.float64)
    err = np.max(np.abs(g - w))
    assert err <= tol * np.max(np.abs(w)), f"{name}: max error {err}, max |ref| {np.max(np.abs(w))}"


def add_shape_arguments(ap):
    """The MLP block's shape and the timed runs (shared with gemm_epilogue_gpu_bench.py)."""
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--d", type=int, default=4096)
    ap.add_argument("--hidden", type=int, default=16384)
    ap.add_argument("--runs", type=int, default=5)


def main():
    ap = argparse.ArgumentParser()
    add_shape_arguments(ap)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--profile", action="store_true", help="also print the MLP step's kernels (tessera.profile)")
    args = ap.parse_args()
    import torch
    F = torch.nn.functional
    dev = "cuda:0"
    sync = torch.cuda.synchronize
    rng = np.random.default_rng(0)
    policy = "bf16 @accum(fp32)"

    def pair(shape, scale):
        h = (rng.standard_normal(shape, dtype=np.float32) * scale).astype(ml_dtypes.bfloat16)
        return tessera.tensor(h, policy).to(dev), torch.from_numpy(h.view(np.int16)).to(dev).view(torch.bfloat16)

    def host(t):
        return t.to("cpu").numpy().astype(np.float64)

    def th(t):
        return t.float().cpu().numpy().astype(np.float64)

    print(f"{'row':<34} {'tessera':>9} {'torch':>9} {'ratio':>7} {'compile':>9} {'ratio':>7}   (TFLOP/s)")
    mm = tessera.jit(lambda a, b: ops.matmul(a, b))
    for n in (4096, 8192):
        (a, ta), (b, tb) = pair((n, n), 1.0), pair((n, n), 1.0)
        close(f"matmul {n}", host(mm(a, b)), th(ta @ tb), 2.0 ** -6)
        flops = 2.0 * n ** 3
        t_ours = pace(lambda: mm(a, b), sync, args.runs)
        t_torch = pace(lambda: ta @ tb, sync, args.runs)
        print(f"{'matmul bf16 %d^3' % n:<34} {flops / t_ours / 1e12:9.1f} {flops / t_torch / 1e12:9.1f} "
              f"{t_torch / t_ours:6.2f}x", flush=True)
        del a, b, ta, tb
    # A transposed: the weight gradients' form (X^T dY).
    mm_t = tessera.jit(lambda a, b: ops.matmul(ops.transpose(a, (1, 0)), b))
    n = 8192
    (a, ta), (b, tb) = pair((n, n), 1.0), pair((n, n), 1.0)
    close("matmul A^T", host(mm_t(a, b)), th(ta.t() @ tb), 2.0 ** -6)
    t_ours = pace(lambda: mm_t(a, b), sync, args.runs)
    t_torch = pace(lambda: ta.t() @ tb, sync, args.runs)
    print(f"{'matmul bf16 %d^3 A^T' % n:<34} {2.0 * n ** 3 / t_ours / 1e12:9.1f} {2.0 * n ** 3 / t_torch / 1e12:9.1f} "
          f"{t_torch / t_ours:6.2f}x", flush=True)
    del a, b, ta, tb

    T, D, H = args.tokens, args.d, args.hidden
    (x, tx), (w1, tw1), (b1, tb1) = pair((T, D), 1.0), pair((D, H), D ** -0.5), pair((H,), 0.1)
    (w2, tw2), (b2, tb2), (g, tg) = pair((H, D), H ** -0.5), pair((D,), 0.1), pair((T, D), 1.0)

    epi = tessera.jit(lambda x, w, b: ops.gelu(ops.matmul(x, w) + b))

    def torch_epi(x, w, b):
        return F.gelu((x @ w).float() + b.float()).to(torch.bfloat16)
    close("matmul + bias + gelu", host(epi(x, w1, b1)), th(torch_epi(tx, tw1, tb1)), 2.0 ** -6)
    flops = 2.0 * T * D * H
    t_ours = pace(lambda: epi(x, w1, b1), sync, args.runs)
    t_torch = pace(lambda: torch_epi(tx, tw1, tb1), sync, args.runs)
    row = f"{'matmul+bias+gelu %dx%dx%d' % (T, D, H):<34} {flops / t_ours / 1e12:9.1f} {flops / t_torch / 1e12:9.1f} " \
          f"{t_torch / t_ours:6.2f}x"
    if not args.no_compile:
        ce = torch.compile(torch_epi)
        t_c = pace(lambda: ce(tx, tw1, tb1), sync, args.runs)
        row += f" {flops / t_c / 1e12:9.1f} {t_c / t_ours:6.2f}x"
    print(row, flush=True)

    def block(x, w1, b1, w2, b2):
        return ops.matmul(ops.gelu(ops.matmul(x, w1) + b1), w2) + b2

    def torch_block(x, w1, b1, w2, b2):
        h = F.gelu((x @ w1).float() + b1.float()).to(torch.bfloat16)
        return ((h @ w2).float() + b2.float()).to(torch.bfloat16)

    leaves = [t.clone().requires_grad_() for t in (tx, tw1, tb1, tw2, tb2)]

    def torch_step(fn):
        return torch.autograd.grad(fn(*leaves), leaves, tg)

    flops = 6.0 * 2.0 * T * D * H
    torch_step(torch_block)
    sync()
    torch.cuda.reset_peak_memory_stats()
    tbase = torch.cuda.memory_allocated()
    t_eager = pace(lambda: torch_step(torch_block), sync, args.runs)
    peak_eager = torch.cuda.max_memory_allocated() - tbase
    t_c = peak_c = float("nan")
    if not args.no_compile:
        cb = torch.compile(torch_block)
        torch_step(cb)
        sync()
        torch.cuda.reset_peak_memory_stats()
        tbase = torch.cuda.memory_allocated()
        t_c = pace(lambda: torch_step(cb), sync, args.runs)
        peak_c = torch.cuda.max_memory_allocated() - tbase
    want = torch_step(torch_block)
    rt = tessera.runtime
    steps = {}
    # precision="full": fp32 gradients (autodiff's default); "storage": bf16 gradients, as torch keeps them.
    for precision in ("full", "storage"):
        step = tessera.jit(tessera.grad(lambda x, w1, b1, w2, b2, g: ops.sum(block(x, w1, b1, w2, b2) * g),
                                        argnums=(0, 1, 2, 3, 4), precision=precision))
        steps[precision] = step
        got = step(x, w1, b1, w2, b2, g)
        for name, gv, wv in zip(("dx", "dW1", "db1", "dW2", "db2"), got, want):
            close(f"MLP {name} ({precision})", host(gv), th(wv), 2.0 ** -5)
        del got
        sync()
        rt.reset_peak_memory(dev)
        base = rt.memory_stats(dev)["bytes_in_use"]
        t_ours = pace(lambda: step(x, w1, b1, w2, b2, g), sync, args.runs)
        peak_ours = rt.memory_stats(dev)["peak_in_use"] - base
        label = f"MLP fwd+bwd {precision} T{T} d{D} h{H}"
        row = f"{label:<34} {flops / t_ours / 1e12:9.1f} {flops / t_eager / 1e12:9.1f} {t_eager / t_ours:6.2f}x"
        if not args.no_compile:
            row += f" {flops / t_c / 1e12:9.1f} {t_c / t_ours:6.2f}x"
        print(row, flush=True)
        print(f"MLP step ({precision}): tessera {t_ours * 1e3:.2f} ms, torch eager {t_eager * 1e3:.2f} ms"
              + ("" if args.no_compile else f", torch.compile {t_c * 1e3:.2f} ms"))
        print(f"MLP step ({precision}) peak memory above the inputs: tessera {peak_ours / 2**20:.0f} MiB, "
              f"torch eager {peak_eager / 2**20:.0f} MiB, torch.compile {peak_c / 2**20:.0f} MiB", flush=True)
    del want
    if args.profile:
        # One step's kernels: GPU time from CUDA events, bytes and FLOPs, the Graph IR ops of each.
        for precision, step in steps.items():
            print(f"-- MLP step ({precision})")
            with tessera.profile(None, top=20):
                step(x, w1, b1, w2, b2, g)
                sync()


if __name__ == "__main__":
    main()
