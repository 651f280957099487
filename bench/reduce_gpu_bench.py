"""Reductions to few outputs on one GPU (docs/design/0036): a sum of a large
bf16 @accum(fp32) tensor to one value, means of a few long rows, sums of a
few long columns, and the value and gradient of an rmsnorm loss, in one run
against a device-to-device copy and torch of the same function; and, for
comparison, sums of many rows (which do not split).

    python bench/reduce_gpu_bench.py [--rows 16384] [--cols 8192] [--runs 10]

Tessera's jit runs each function twice: split (a group per superblock of the
canonical order, then their in-order sum; the default) and whole
(TESSERA_SPLIT_SUMS=0: one group per output element, the form before the
split). Both give the same bits; the script checks that, and each result
against torch in float32. GB/s counts the bytes read (and written) at least;
"copy" moves the same number of bytes (read and write counted). Times are per
call at the GPU's pace (back-to-back calls, one synchronization).
"""

import argparse
import os

import ml_dtypes
import numpy as np

import tessera
from gpu_timing import pace_seconds

ops = tessera.ops


class Knob:
    """TESSERA_SPLIT_SUMS set while compiling and calling (it is part of the executable cache key)."""

    def __init__(self, value):
        self.value = value

    def __enter__(self):
        os.environ["TESSERA_SPLIT_SUMS"] = self.value

    def __exit__(self, *exc):
        os.environ.pop("TESSERA_SPLIT_SUMS")


def flatten(v):
    if isinstance(v, (tuple, list)):
        return [t for x in v for t in flatten(x)]
    return [v]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=16384)
    ap.add_argument("--cols", type=int, default=8192)
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    import torch
    dev = "cuda:0"
    sync = torch.cuda.synchronize
    R, C = args.rows, args.cols
    rng = np.random.default_rng(0)
    hx = rng.standard_normal((R, C), dtype=np.float32).astype(ml_dtypes.bfloat16)
    hg = rng.standard_normal((R, C), dtype=np.float32).astype(ml_dtypes.bfloat16)
    policy = "bf16 @accum(fp32)"
    tx, tg = (tessera.tensor(h, policy).to(dev) for h in (hx, hg))
    px, pg = (torch.from_numpy(h.view(np.int16)).to(dev).view(torch.bfloat16) for h in (hx, hg))
    # A few long rows: the same elements as 8 rows.
    tx8 = ops.reshape(tx, (8, R * C // 8))
    px8 = px.reshape(8, R * C // 8)
    # A few long columns: the same elements as 8 columns.
    tx8c = ops.reshape(tx, (R * C // 8, 8))
    px8c = px.reshape(R * C // 8, 8)
    elem = R * C
    src = torch.empty(elem * 3, dtype=torch.bfloat16, device=dev)
    dst = torch.empty_like(src)

    def pace(fn):
        return pace_seconds(fn, sync, args.runs, rounds=3)

    def copy_seconds(nbytes):
        n = nbytes // 2 // 2
        return pace(lambda: dst[:n].copy_(src[:n]))

    def rms_loss(x, g):
        return ops.sum(ops.rmsnorm_safe(x, axis=-1, eps=1e-6) * g)

    def torch_rms(x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + 1e-6)).to(torch.bfloat16)

    vg = tessera.value_and_grad(rms_loss)
    # (label, function, inputs, torch's, bytes, whether the sum splits)
    rows = [
        ("sum to one value", lambda x, g: ops.sum(x), (tx, tg), lambda: px.sum(dtype=torch.float32), 2 * elem, True),
        ("means of 8 rows", lambda x, g: ops.mean(x, axis=-1), (tx8, tg), lambda: px8.mean(-1, dtype=torch.float32),
         2 * elem, True),
        ("column sums, 8 columns", lambda x, g: ops.sum(x, axis=0), (tx8c, tg), lambda: px8c.sum(0, dtype=torch.float32),
         2 * elem, True),
        ("rmsnorm loss value+grad", vg, (tx, tg), None, 3 * 2 * elem, True),
        # Many outputs: no split (split and whole are the same kernel).
        (f"column sums of {C} columns", lambda x, g: ops.sum(x, axis=0), (tx, tg),
         lambda: px.sum(0, dtype=torch.float32), 2 * elem, False),
        (f"sums of {R} rows", lambda x, g: ops.sum(x, axis=-1), (tx, tg), lambda: px.sum(-1, dtype=torch.float32),
         2 * elem, False),
    ]
    print(f"{'row':<26} {'split GB/s':>10} {'whole GB/s':>10} {'split/whole':>11} {'vs copy':>8} {'torch GB/s':>10} {'vs torch':>9}")
    summary = []
    for label, fn, inputs, theirs, nbytes, splits in rows:
        results, seconds = {}, {}
        for split in ("1", "0"):
            with Knob(split):
                f = tessera.jit(fn)
                results[split] = [t.to("cpu").numpy() for t in flatten(f(*inputs))]
                assert ("graph.superblock_sums" in f.inspect_ir("schedule")) == (split == "1" and splits), label
                seconds[split] = pace(lambda: f(*inputs))
        for a, b in zip(results["1"], results["0"]):
            assert a.tobytes() == b.tobytes(), f"{label}: split and whole differ"
        if theirs is not None:
            want = theirs().cpu().numpy().astype(np.float64)
            np.testing.assert_allclose(results["1"][0].astype(np.float64), want, rtol=2e-2, atol=2.0)
        t_split, t_whole = seconds["1"], seconds["0"]
        if theirs is None:
            leaf = px.clone().requires_grad_()

            def torch_vg():
                y = (torch_rms(leaf).float() * pg.float()).sum()
                torch.autograd.grad(y, [leaf])
            t_torch = pace(torch_vg)
        else:
            t_torch = pace(theirs)
        cp = copy_seconds(nbytes)
        print(f"{label:<26} {nbytes / t_split / 1e9:10.0f} {nbytes / t_whole / 1e9:10.0f} {t_whole / t_split:10.1f}x "
              f"{cp / t_split:7.2f}x {nbytes / t_torch / 1e9:10.0f} {t_torch / t_split:8.2f}x", flush=True)
        summary.append((label, t_whole / t_split, cp / t_split, t_torch / t_split))
    print("summary: " + ", ".join(f"{lab} {a:.1f}x whole / {b:.2f}x copy / {c:.2f}x torch" for lab, a, b, c in summary))


if __name__ == "__main__":
    main()
