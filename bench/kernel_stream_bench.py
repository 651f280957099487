"""Streaming lane kernels (scale, axpy) on the CPU backend next to numpy, on one core.

    .venv/bin/python bench/kernel_stream_bench.py [--sizes 1048576 16777216] [--core N] [--source]

Both kernels are written with @tessera.kernel in the one-tile-per-element
style of the specification's `scale` (no group shape, launched with one tile
per element, every element load and store bounds-checked):

    scale:  y[i] = alpha * x[i]          numpy: np.multiply(x, alpha, out=y)
    axpy:   y[i] = alpha * x[i] + y[i]   numpy: y += alpha * x   (a temporary, as numpy writes it)

in fp32 on one thread pinned to one core; numpy runs in the same process on
the same core, alternating with the kernel. GB/s counts the bytes a kernel
must move (scale: read x, write y = 8 bytes per element; axpy: read x and y,
write y = 12 bytes per element), the same count for both sides. Each figure is
the median of several timed runs after a warm-up; results are checked against
numpy before they are reported. --source prints the generated C++ of scale.
"""

import one_core  # first: pins the process and fixes thread counts before numpy loads

import argparse  # noqa: E402

import numpy as np  # noqa: E402

import tessera  # noqa: E402


@tessera.kernel
def scale(x: tessera.f32["n"], y: tessera.mut(tessera.f32["n"]), alpha: tessera.f32):
    i = tile.linear_id()
    if i < n:
        y[i] = alpha * x[i]


@tessera.kernel
def axpy(x: tessera.f32["n"], y: tessera.mut(tessera.f32["n"]), alpha: tessera.f32):
    i = tile.linear_id()
    if i < n:
        y[i] = alpha * x[i] + y[i]




def rows(sizes, runs):
    rng = np.random.default_rng(0)
    alpha = np.float32(1.7)
    out = []
    for n in sizes:
        x = rng.standard_normal(n).astype(np.float32)
        y = np.zeros(n, np.float32)
        y_np = np.zeros(n, np.float32)
        # scale
        t_ours = one_core.median_seconds(lambda: scale(x, y, alpha), runs)
        if not np.array_equal(y, x * alpha):
            raise SystemExit("scale: result differs from numpy's x * alpha")
        t_np = one_core.median_seconds(lambda: np.multiply(x, alpha, out=y_np), runs)
        out.append(("scale", n, 8.0 * n / t_ours / 1e9, 8.0 * n / t_np / 1e9))
        # axpy: both sides update y in place, so the values drift run to run;
        # correctness is checked on one fresh call.
        y0 = rng.standard_normal(n).astype(np.float32)
        y[:] = y0
        axpy(x, y, alpha)
        if not np.array_equal(y, alpha * x + y0):
            raise SystemExit("axpy: result differs from numpy's alpha * x + y")
        t_ours = one_core.median_seconds(lambda: axpy(x, y, alpha), runs)

        def np_axpy():
            y_np[:] += alpha * x

        t_np = one_core.median_seconds(np_axpy, runs)
        out.append(("axpy", n, 12.0 * n / t_ours / 1e9, 12.0 * n / t_np / 1e9))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1 << 20, 1 << 24])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--core", type=int, default=None, help="the core to pin to (default: the highest allowed)")
    parser.add_argument("--source", action="store_true", help="print the generated C++ of scale")
    args = parser.parse_args()
    print(f"streaming lane kernels (fp32, one tile per element) vs numpy, one thread on core {one_core.CORE}, "
          f"numpy {np.__version__}")
    print(f"{'kernel':>7} {'n':>10} {'tessera GB/s':>13} {'numpy GB/s':>11} {'tessera/numpy':>14}")
    for name, n, ours, theirs in rows(args.sizes, args.runs):
        print(f"{name:>7} {n:>10} {ours:>13.2f} {theirs:>11.2f} {ours / theirs:>14.2f}")
    if args.source:
        print(scale.inspect_ir("target"))


if __name__ == "__main__":
    main()
