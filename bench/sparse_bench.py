"""CSR spmm on the CPU next to scipy.sparse, in the same run.

    .venv/bin/python bench/sparse_bench.py [--cores 1|all] [--m 4096] [--k 4096] [--n 64] [--runs 5]

C = A @ B with A a random [M, K] CSR matrix at 1% and 10% density and B a
dense [K, N] matrix, fp32 and bf16 (scipy has no bf16: it runs the bf16 case
on the same values in fp32). Tessera runs the eager op, which is its
compiled sparse kernel (docs/design/0013-sparse.md): a lane per strip of 64
outputs of a row, each output's terms summed in the row's order with fp32
fmas. GFLOP/s counts 2 * nnz * N flops for both. Each figure is the median of --runs timed
calls after a warm-up; results are checked against scipy first. The ratio is
Tessera's time over scipy's (below 1: Tessera is faster).
"""

from cores import label, median_seconds  # first: thread set-up before numpy

import argparse  # noqa: E402

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402

import tessera  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cores", default="1")
    ap.add_argument("--m", type=int, default=4096)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"spmm [{args.m}, {args.k}] x [{args.k}, {args.n}], {label()}")
    print(f"{'density':>8} {'dtype':>6} {'nnz':>9} {'tessera ms':>11} {'scipy ms':>9} {'tessera GF/s':>13} "
          f"{'scipy GF/s':>11} {'ratio':>6}")
    for density in (0.01, 0.1):
        A = sp.random(args.m, args.k, density=density, format="csr", random_state=1, dtype=np.float32)
        A.sort_indices()
        B = rng.standard_normal((args.k, args.n)).astype(np.float32)
        for dtype in ("fp32", "bf16"):
            a = tessera.sparse.from_scipy(A, dtype=dtype)
            b = tessera.tensor(B, dtype=dtype)
            As = A.copy()
            As.data = a.values.numpy().astype(np.float32)  # scipy on the same (rounded) values
            Bs = b.numpy().astype(np.float32)
            got = tessera.ops.spmm(a, b).numpy().astype(np.float64)
            want = As @ Bs
            bound = abs(As) @ np.abs(Bs)
            tol = (2.0 ** -8 * np.abs(want) if dtype == "bf16" else 0) + 1e-5 * bound + 1e-30
            assert np.all(np.abs(got - want) <= tol), f"spmm {dtype} {density}: wrong result"
            t = median_seconds(lambda: tessera.ops.spmm(a, b), args.runs)
            s = median_seconds(lambda: As @ Bs, args.runs)
            flops = 2.0 * A.nnz * args.n
            print(f"{density:>8} {dtype:>6} {A.nnz:>9} {t * 1e3:>11.2f} {s * 1e3:>9.2f} {flops / t / 1e9:>13.2f} "
                  f"{flops / s / 1e9:>11.2f} {t / s:>6.2f}")


if __name__ == "__main__":
    main()
