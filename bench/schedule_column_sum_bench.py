"""Column sums (a bias gradient: sum over axis 0) through @tessera.jit on one CPU
core, in each column form, next to numpy in the same run.

    .venv/bin/python bench/schedule_column_sum_bench.py [--rows 4096] [--cols 4096] [--runs 5]

Forms (reduction.cpp, docs/design/0038 and 0039), set by
TESSERA_COLUMN_STRANDS, TESSERA_COLUMN_VECTOR and TESSERA_COLUMN_BLOCKS:
- a lane per column (strands 0): the CPU's default before 0038;
- a lane per strand (strands 1 or 2: blocks per pass), one, two or four
  columns a lane;
- split at the blocks (graph.block_sums and graph.block_total; CUDA's
  default), four or eight columns a lane.
Every form gives the canonical order's bits (checked against the first).
numpy's sum is pairwise in its own order, so it is the speed baseline only;
the values are checked against float64 within a bf16 rounding of the largest.
"""

import one_core  # first: one core, one thread

import argparse  # noqa: E402
import os  # noqa: E402

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

import tessera  # noqa: E402

FORMS = [("lane per column", "0", "1", "0"), ("lane per strand, 1 block", "1", "1", "0"),
         ("lane per strand, 2 blocks", "2", "1", "0"), ("lane per strand, 2 blocks, 2 columns", "2", "2", "0"),
         ("lane per strand, 2 blocks, 4 columns", "2", "4", "0"), ("block sums, 4 columns", "2", "4", "1"),
         ("block sums, 8 columns", "2", "8", "1")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--core", type=int)  # read by one_core
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    for dtype in ("fp32", "bf16 @accum(fp32)"):
        host = rng.standard_normal((args.rows, args.cols)).astype(np.float32)
        if dtype != "fp32":
            host = host.astype(ml_dtypes.bfloat16)
        x = tessera.tensor(host, dtype)
        wide = host.astype(np.float32)
        t_np = one_core.median_seconds(lambda: wide.sum(axis=0), args.runs)
        print(f"{dtype}: [{args.rows}, {args.cols}] over axis 0, numpy (fp32 input) {t_np * 1e3:.2f} ms")
        first = None
        for label, strands, columns, blocks in FORMS:
            os.environ["TESSERA_COLUMN_STRANDS"] = strands
            os.environ["TESSERA_COLUMN_VECTOR"] = columns
            os.environ["TESSERA_COLUMN_BLOCKS"] = blocks
            f = tessera.jit(lambda v: tessera.ops.sum(v, axis=0))
            got = np.asarray(f(x).numpy(), np.float32)
            first = got if first is None else first
            assert got.tobytes() == first.tobytes(), f"{label}: not the first form's bits"
            ref = wide.astype(np.float64).sum(axis=0)
            assert np.max(np.abs(got - ref)) <= 2.0 ** -7 * np.max(np.abs(ref)), label
            t = one_core.median_seconds(lambda: f(x), args.runs)
            print(f"  {label:<40} {t * 1e3:8.2f} ms  {t_np / t:5.2f}x numpy")


if __name__ == "__main__":
    main()
