"""What each GEMM epilogue of the bf16 MLP step costs on one GPU: the same
product [tokens, d] x [d, hidden] (bf16 @accum(fp32)) with a growing
epilogue, next to torch.matmul (cuBLAS) of the same shapes, in one run.

    python bench/gemm_epilogue_gpu_bench.py [--tokens 8192] [--d 4096] [--hidden 16384] [--runs 5]

Rows (TFLOP/s of the product's 2 T d h flops, and the time over the plain
product's, so an epilogue's cost reads directly):
- plain: x W;
- bias: x W + b;
- bias + gelu: gelu(x W + b), the MLP forward's first kernel;
- bias + gelu + z: the same, also storing z = x W + b (what the backward
  reads);
- dz: (dy W2ᵀ) * gelu'(z) for a bf16 z (the backward kernel that meets
  GELU', written as autodiff's rule writes it), with W2 of shape [hidden, d]
  read transposed and the product's K = d.
"""

import argparse
import math

import ml_dtypes
import numpy as np

import tessera
from gpu_timing import pace_seconds
from mlp_block_gpu_bench import add_shape_arguments

ops = tessera.ops


def gelu_derivative(z):
    zf = ops.cast(z, "fp32")
    cdf = 0.5 * (1.0 + ops.erf(zf * (1.0 / math.sqrt(2.0))))
    pdf = (1.0 / math.sqrt(2.0 * math.pi)) * ops.exp(-0.5 * (zf * zf))
    return cdf + zf * pdf


def main():
    ap = argparse.ArgumentParser()
    add_shape_arguments(ap)
    args = ap.parse_args()
    import torch
    sync = torch.cuda.synchronize
    rng = np.random.default_rng(0)
    p = "bf16 @accum(fp32)"
    T, D, H = args.tokens, args.d, args.hidden

    def make(shape, scale):
        h = (rng.standard_normal(shape, dtype=np.float32) * scale).astype(ml_dtypes.bfloat16)
        return tessera.tensor(h, p).to("cuda:0"), torch.from_numpy(h.view(np.int16)).to("cuda:0").view(torch.bfloat16)

    (x, tx), (w, tw), (b, _) = make((T, D), 1.0), make((D, H), D ** -0.5), make((H,), 0.1)
    (dy, tdy), (w2, tw2), (z, _) = make((T, D), 1.0), make((H, D), H ** -0.5), make((T, H), 1.0)
    rows = [
        ("plain", lambda: tessera.jit(lambda x, w: ops.matmul(x, w)), (x, w)),
        ("bias", lambda: tessera.jit(lambda x, w, b: ops.matmul(x, w) + b), (x, w, b)),
        ("bias + gelu", lambda: tessera.jit(lambda x, w, b: ops.gelu(ops.matmul(x, w) + b)), (x, w, b)),
        ("bias + gelu + z", lambda: tessera.jit(lambda x, w, b: (lambda s: (ops.gelu(s), s))(ops.matmul(x, w) + b)),
         (x, w, b)),
        ("dz = (dy W2^T) gelu'(z)",
         lambda: tessera.jit(lambda dy, w2, z: ops.cast(
             ops.matmul(dy, ops.transpose(w2, (1, 0))) * gelu_derivative(z), p)), (dy, w2, z)),
    ]
    flops = 2.0 * T * D * H
    t_torch = pace_seconds(lambda: tx @ tw, sync, args.runs, rounds=2)
    print(f"{'row':<28} {'TFLOP/s':>8} {'ms':>7} {'vs plain':>9}")
    print(f"{'torch.matmul (cuBLAS)':<28} {flops / t_torch / 1e12:8.1f} {t_torch * 1e3:7.3f}")
    plain = None
    for name, build, fargs in rows:
        f = build()
        f(*fargs)
        sync()
        t = pace_seconds(lambda: f(*fargs), sync, args.runs, rounds=2)
        plain = plain or t
        print(f"{name:<28} {flops / t / 1e12:8.1f} {t * 1e3:7.3f} {t / plain:8.2f}x", flush=True)


if __name__ == "__main__":
    main()
