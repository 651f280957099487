"""A tensor-parallel step with its collectives, plain and captured into a CUDA graph, in one run.

    python bench/captured_step_bench.py [--gpus N] [--tokens 8 256 4096] [--d 1024] [--runs 20]

The Megatron MLP block y = gelu(x W1) W2 on a mesh of N GPUs (tp = N: W1 split
by columns, W2 by rows, so y needs one allreduce per step) through the nccl
backend, as `tessera.jit` (each kernel launched, each collective meeting on the
host) and as `tessera.jit(capture_graph=True)` (one CUDA graph per GPU, the
allreduce captured in it). Reports the median time per step (each step ends
with a synchronization of every GPU) and the captured step's speedup; the two
results are checked bit for bit first.
"""

import argparse

import numpy as np

import tessera
from tessera import _C, dist
from gpu_timing import median_seconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, default=min(_C._cuda_device_count(), 4))
    ap.add_argument("--tokens", type=int, nargs="+", default=[8, 256, 4096])
    ap.add_argument("--d", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    n = args.gpus
    if n < 2:
        print(f"captured_step_bench needs 2 GPUs or more; this machine has {_C._cuda_device_count()}")
        return
    m = dist.mesh(devices=[f"cuda:{i}" for i in range(n)], axes=("tp",), shape=(n,), backend="nccl")
    col = dist.ShardSpec(partition=("col",), mesh_axes=("tp",))
    row = dist.ShardSpec(partition=("row",), mesh_axes=("tp",))

    def mlp(x, w1, w2):
        return tessera.ops.matmul(tessera.ops.gelu(tessera.ops.matmul(x, w1)), w2)

    def sync():
        for r in range(n):
            _C._cuda_synchronize(r)

    rng = np.random.default_rng(0)
    d, hidden = args.d, 4 * args.d
    w1 = (rng.standard_normal((d, hidden)) / np.sqrt(d)).astype(np.float32)
    w2 = (rng.standard_normal((hidden, d)) / np.sqrt(hidden)).astype(np.float32)
    W1, W2 = dist.tensor(w1, layout=col, mesh=m), dist.tensor(w2, layout=row, mesh=m)
    print(f"Megatron MLP, fp32, d = {d}, hidden = {hidden}, tp = {n} (nccl); ms per step")
    print(f"{'tokens':>7} {'plain':>9} {'captured':>9} {'speedup':>8}")
    for tokens in args.tokens:
        X = dist.tensor(rng.standard_normal((tokens, d)).astype(np.float32), mesh=m)
        plain, graphed = tessera.jit(mlp), tessera.jit(capture_graph=True)(mlp)
        np.testing.assert_array_equal(plain(X, W1, W2).numpy(), graphed(X, W1, W2).numpy())
        t_plain = median_seconds(lambda: plain(X, W1, W2), args.runs, sync)
        t_graph = median_seconds(lambda: graphed(X, W1, W2), args.runs, sync)
        print(f"{tokens:>7} {t_plain * 1e3:>9.3f} {t_graph * 1e3:>9.3f} {t_plain / t_graph:>7.2f}x", flush=True)


if __name__ == "__main__":
    main()
