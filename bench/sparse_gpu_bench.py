"""CSR spmm and sddmm on a CUDA device next to cuSPARSE (through torch.sparse), in the same run.

    python bench/sparse_gpu_bench.py [--m 16384] [--k 16384] [--n 64 256] [--density 0.001 0.01]
                                     [--dtype fp32 bf16] [--runs 10]

C = A @ B with A a random [M, K] CSR matrix and B a dense [K, N] matrix (fp32, or bf16 with fp32
accumulation), both on cuda:0. Tessera runs the eager op (its compiled sparse kernel through
the CUDA backend: a lane per run of 16 bytes of outputs, each output's terms summed in
the row's order, docs/design/0013-sparse.md); torch runs torch.sparse.mm on a
sparse_csr tensor, which calls cuSPARSE's SpMM. GFLOP/s counts 2 * nnz * N
flops for both. Each time is the median of --runs calls after a warm-up,
ended by a device synchronization; results are checked against scipy (fp64)
first. The ratio is cuSPARSE's time over Tessera's (above 1: Tessera is faster).

sddmm: S = (X @ Y) sampled at A's pattern, X [M, D] and Y [D, K] dense (D = --n values),
against torch.sparse.sampled_addmm (alpha 1, beta 0: cuSPARSE's SDDMM). Tessera runs one
lane per stored slot, its D products summed in order; GFLOP/s counts 2 * nnz * D. Results
are checked against numpy (fp64) on the stored inputs first, at up to 100000 random slots.
torch has no bf16 SDDMM: its rows then print Tessera's time alone.
"""

import argparse

import numpy as np
import scipy.sparse as sp

import tessera
from gpu_timing import median_seconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, default=16384)
    ap.add_argument("--k", type=int, default=16384)
    ap.add_argument("--n", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--density", type=float, nargs="+", default=[0.001, 0.01])
    ap.add_argument("--dtype", nargs="+", default=["fp32"], choices=["fp32", "bf16"])
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    import torch

    sync = torch.cuda.synchronize
    rng = np.random.default_rng(0)
    for dtype in args.dtype:
        run(args, dtype, torch, sync, rng)


def print_header(width):
    print(f"{'density':>8} {width:>5} {'nnz':>9} {'tessera ms':>11} {'cusparse ms':>12} {'tessera GF/s':>13} "
          f"{'cusparse GF/s':>14} {'ratio':>6}")


def time_row(density, width, nnz, ours, theirs, runs, sync):
    """Times both calls (medians of `runs`) and prints the row; 2 * nnz * width flops."""
    t = median_seconds(ours, runs, sync)
    try:
        c = median_seconds(theirs, runs, sync)
    except RuntimeError as e:  # a torch build without this dtype's sparse kernel
        print(f"{density:>8} {width:>5} {nnz:>9} {t * 1e3:>11.3f}   cuSPARSE not run: {e}", flush=True)
        return
    flops = 2.0 * nnz * width
    print(f"{density:>8} {width:>5} {nnz:>9} {t * 1e3:>11.3f} {c * 1e3:>12.3f} {flops / t / 1e9:>13.1f} "
          f"{flops / c / 1e9:>14.1f} {c / t:>6.2f}", flush=True)


def random_matrix(args, density, seed, dtype):
    """A random [m, k] scipy CSR matrix (sorted indices) and Tessera's copy of it on cuda:0."""
    A = sp.random(args.m, args.k, density=density, format="csr", random_state=seed, dtype=np.float32)
    A.sort_indices()
    return A, tessera.sparse.from_scipy(A, dtype=dtype).to("cuda:0")


def run(args, dtype, torch, sync, rng):
    tdtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
    print(f"spmm {dtype} [{args.m}, {args.k}] x [{args.k}, N] on {torch.cuda.get_device_name(0)}")
    print_header("N")
    for density in args.density:
        A, a = random_matrix(args, density, 1, dtype)
        # The values as Tessera stores them (bf16 rounds them), for the check and for torch.
        values = a.values.to("cpu").numpy().astype(np.float32)
        ta = torch.sparse_csr_tensor(torch.tensor(A.indptr, dtype=torch.int64), torch.tensor(A.indices, dtype=torch.int64),
                                     torch.tensor(values).to(tdtype), size=A.shape, device="cuda:0")
        A64 = sp.csr_matrix((values.astype(np.float64), A.indices, A.indptr), shape=A.shape)
        for n in args.n:
            b = tessera.tensor(rng.standard_normal((args.k, n)).astype(np.float32), dtype=dtype).to("cuda:0")
            B = b.to("cpu").numpy().astype(np.float32)
            tb = torch.tensor(B, device="cuda:0").to(tdtype)
            got = tessera.ops.spmm(a, b).to("cpu").numpy().astype(np.float64)
            want = A64 @ B.astype(np.float64)
            bound = abs(A64) @ np.abs(B.astype(np.float64))
            # Both accumulate in fp32 on the stored (rounded) inputs; a bf16 result rounds once more.
            out_tol = 1e-5 if dtype == "fp32" else 2.0 ** -8
            assert np.all(np.abs(got - want) <= out_tol * bound + 1e-30), f"spmm density {density} N {n}: wrong result"
            time_row(density, n, A.nnz, lambda: tessera.ops.spmm(a, b), lambda: torch.sparse.mm(ta, tb), args.runs, sync)
    run_sddmm(args, dtype, torch, sync, rng, tdtype)


def run_sddmm(args, dtype, torch, sync, rng, tdtype):
    print(f"sddmm {dtype} ([{args.m}, D] x [D, {args.k}]) at a [{args.m}, {args.k}] pattern")
    print_header("D")
    for density in args.density:
        A, a = random_matrix(args, density, 2, dtype)
        rows = np.repeat(np.arange(args.m), np.diff(A.indptr))
        pattern = torch.sparse_csr_tensor(torch.tensor(A.indptr, dtype=torch.int64),
                                          torch.tensor(A.indices, dtype=torch.int64),
                                          torch.zeros(A.nnz, dtype=tdtype), size=A.shape, device="cuda:0")
        for d in args.n:
            x = tessera.tensor(rng.standard_normal((args.m, d)).astype(np.float32), dtype=dtype).to("cuda:0")
            y = tessera.tensor(rng.standard_normal((d, args.k)).astype(np.float32), dtype=dtype).to("cuda:0")
            X = x.to("cpu").numpy().astype(np.float64)
            Y = y.to("cpu").numpy().astype(np.float64)
            got = tessera.ops.sddmm(x, y, a).values.to("cpu").numpy().astype(np.float64)
            # Checked at up to 100000 slots drawn at random (all of them took minutes in numpy).
            at = np.sort(rng.choice(A.nnz, min(A.nnz, 100000), replace=False))
            want = np.einsum("ij,ji->i", X[rows[at]], Y[:, A.indices[at]])
            bound = np.einsum("ij,ji->i", np.abs(X[rows[at]]), np.abs(Y[:, A.indices[at]]))
            out_tol = 1e-5 if dtype == "fp32" else 2.0 ** -8
            assert np.all(np.abs(got[at] - want) <= out_tol * bound + 1e-30), f"sddmm density {density} D {d}: wrong result"
            tx = torch.tensor(X.astype(np.float32), device="cuda:0").to(tdtype)
            ty = torch.tensor(Y.astype(np.float32), device="cuda:0").to(tdtype)
            time_row(density, d, A.nnz, lambda: tessera.ops.sddmm(x, y, a),
                     lambda: torch.sparse.sampled_addmm(pattern, tx, ty, beta=0.0, alpha=1.0), args.runs, sync)


if __name__ == "__main__":
    main()
