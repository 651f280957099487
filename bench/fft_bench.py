"""FFTs on the CPU next to numpy.fft, in the same run.

    .venv/bin/python bench/fft_bench.py [--cores 1|all] [--runs 5]

complex64 input (float32 for rfft; irfft reads half spectra): 1-D batched transforms ([batch, n]
along the last axis, n a power of two, a 2/3/5/7-smooth length and a prime, which takes
Bluestein's algorithm) and 2-D transforms of square images. Tessera runs the eager ops, on compiled kernels (one per length and
kind, compiled at the first call, which the warm-up takes; docs/design/0022-compiled-fft.md): the
fixed-order Stockham/Bluestein algorithm at fp32, one line at a time per thread. The reference
executor's time is shown too (TESSERA_EAGER=reference: the same algorithm, plus decoding and
encoding the whole tensor per call). Results are checked against numpy first. Each figure is the median
of --runs timed calls after a warm-up; GB/s counts one read of the input and one write of the
output. The ratio is Tessera's time over numpy's (below 1: Tessera is faster).
"""

from cores import label, median_seconds  # first: thread set-up before numpy

import argparse  # noqa: E402
import os  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402

import tessera  # noqa: E402
from tessera import ops  # noqa: E402

CASES = [  # (name, shape, tessera op, numpy op, real input)
    ("fft  [256, 1024]", (256, 1024), ops.fft, np.fft.fft, False),
    ("fft  [256, 1000]", (256, 1000), ops.fft, np.fft.fft, False),
    ("fft  [64, 997]", (64, 997), ops.fft, np.fft.fft, False),
    ("rfft [256, 1024]", (256, 1024), ops.rfft, np.fft.rfft, True),
    ("irfft [256, 1024]", (256, 513), ops.irfft, np.fft.irfft, False),  # half spectra in
    ("fft2 [512, 512]", (512, 512), ops.fft2, np.fft.fft2, False),
    ("rfft2 [512, 512]", (512, 512), ops.rfft2, np.fft.rfft2, True),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cores", default="1")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"complex64 FFTs, {label()}")
    print(f"{'case':>18} {'tessera ms':>11} {'reference ms':>13} {'numpy ms':>9} {'tessera GB/s':>13} "
          f"{'numpy GB/s':>11} {'ratio':>6}")
    for name, shape, op, ref, real in CASES:
        x = rng.standard_normal(shape).astype(np.float32)
        if not real:
            x = (x + 1j * rng.standard_normal(shape)).astype(np.complex64)
        t = tessera.tensor(x)
        got = op(t).numpy()
        want = ref(x.astype(np.complex128) if not real else x.astype(np.float64))
        err = np.linalg.norm(got - want) / np.linalg.norm(want)
        assert err < 1e-5, f"{name}: relative error {err:.3g} against numpy"
        ts_s = median_seconds(lambda: op(t), args.runs)
        os.environ["TESSERA_EAGER"] = "reference"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref_s = median_seconds(lambda: op(t), max(1, args.runs // 2))
        del os.environ["TESSERA_EAGER"]
        np_s = median_seconds(lambda: ref(x), args.runs)
        moved = x.nbytes + got.nbytes
        print(f"{name:>18} {ts_s * 1e3:11.2f} {ref_s * 1e3:13.2f} {np_s * 1e3:9.2f} {moved / ts_s / 1e9:13.2f} "
              f"{moved / np_s / 1e9:11.2f} {ts_s / np_s:6.1f}")


if __name__ == "__main__":
    main()
