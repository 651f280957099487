"""Compiled FFTs on one GPU against torch.fft (cuFFT) and a device-to-device copy, in one run.

    python bench/fft_gpu_bench.py [--runs 20] [--only SUBSTRING ...]

complex64 (float32 input for rfft; irfft reads half spectra): batched 1-D transforms along the last
axis and 2-D transforms of square images. Tessera runs @jit of the op (one group per line, the line in shared memory:
docs/design/0022-compiled-fft.md); torch runs torch.fft on the same device. GB/s counts one read
of the input and one write of the output; "copy" moves the same bytes with torch's copy_. Results
are checked against torch first (relative error 1e-5). Times are per call at the GPU's pace
(back-to-back calls, one synchronization).
"""

import argparse

import numpy as np

import tessera
from gpu_timing import pace_seconds

ops = tessera.ops

CASES = [  # (name, shape, tessera fn, torch fn name, real input)
    ("fft  [16384, 1024]", (16384, 1024), lambda a: ops.fft(a), "fft", False),
    ("fft  [4096, 4096]", (4096, 4096), lambda a: ops.fft(a), "fft", False),
    ("fft  [16384, 1000]", (16384, 1000), lambda a: ops.fft(a), "fft", False),
    ("fft  [4096, 997]", (4096, 997), lambda a: ops.fft(a), "fft", False),
    ("rfft [16384, 1024]", (16384, 1024), lambda a: ops.rfft(a), "rfft", True),
    ("irfft [16384, 1024]", (16384, 513), lambda a: ops.irfft(a), "irfft", False),  # half spectra in
    ("fft2 [2048, 2048]", (2048, 2048), lambda a: ops.fft2(a), "fft2", False),
    ("fft  [512, 32768]", (512, 32768), lambda a: ops.fft(a), "fft", False),  # two stages (0034)
    ("fft  [64, 262144]", (64, 262144), lambda a: ops.fft(a), "fft", False),  # two stages of 512
    ("fft  [262144, 64]", (262144, 64), lambda a: ops.fft(a), "fft", False),  # short lines share a warp
    ("rfft2 [4096, 64, 64]", (4096, 64, 64), lambda a: ops.rfft2(a), "rfft2", True),  # an FNO layer's modes
    ("irfft2 [4096, 64, 64]", (4096, 64, 33), lambda a: ops.irfft2(a), "irfft2", False),  # and back
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--only", nargs="*", default=[], help="run the cases whose name contains one of these")
    args = ap.parse_args()
    import torch
    dev = "cuda:0"
    sync = torch.cuda.synchronize
    rng = np.random.default_rng(0)
    src = torch.empty(2 * 4096 * 4096 * 8, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    print(f"{'case':<20} {'tessera GB/s':>12} {'cuFFT GB/s':>11} {'copy GB/s':>10} {'vs cuFFT':>9} {'vs copy':>8}")
    summary = []
    for name, shape, fn, tname, real in CASES:
        if args.only and not any(o in name for o in args.only):
            continue
        x = rng.standard_normal(shape).astype(np.float32)
        if not real:
            x = (x + 1j * rng.standard_normal(shape)).astype(np.complex64)
        if name.startswith("irfft"):
            # The half spectrum of a real signal: bins 0 and n/2 are real (cuFFT's c2r reads their
            # imaginary parts, numpy's and Tessera's drop them).
            x[..., 0].imag = 0
            x[..., -1].imag = 0
        tx = tessera.tensor(x).to(dev)
        px = torch.from_numpy(x).to(dev)
        f = tessera.jit(fn)
        tf = getattr(torch.fft, tname)
        got = torch.from_numpy(f(tx).to("cpu").numpy()).to(dev)
        want = tf(px)
        err = ((got - want).abs().pow(2).sum().sqrt() / want.abs().pow(2).sum().sqrt()).item()
        assert err < 1e-5, f"{name}: relative error {err:.3g} against torch.fft"
        nbytes = x.nbytes + want.numel() * want.element_size()
        t_ours = pace_seconds(lambda: f(tx), sync, args.runs)
        t_cufft = pace_seconds(lambda: tf(px), sync, args.runs)
        n = nbytes // 2
        t_copy = pace_seconds(lambda: dst[:n].copy_(src[:n]), sync, args.runs)
        print(f"{name:<20} {nbytes / t_ours / 1e9:12.0f} {nbytes / t_cufft / 1e9:11.0f} {nbytes / t_copy / 1e9:10.0f} "
              f"{t_cufft / t_ours:8.2f}x {t_copy / t_ours:7.2f}x", flush=True)
        summary.append((name.split()[0] + " " + name.split()[1], t_cufft / t_ours, t_copy / t_ours))
    print("summary: " + ", ".join(f"{n} {a:.2f}x cuFFT / {b:.2f}x copy" for n, a, b in summary))


if __name__ == "__main__":
    main()
