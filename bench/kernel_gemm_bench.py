"""The kernel-language GEMM on the CPU backend next to numpy's matmul, on one core.

    .venv/bin/python bench/kernel_gemm_bench.py [--sizes 512 1024 2048] [--core N] [--autotune]

The GEMM is written below with @tessera.kernel (shared tiles, cp_async,
tile.mma; `tile.range(..., prefetch=2)` pipelined into double buffering by
the tile-pipeline pass), in fp32, launched on one thread. numpy's matmul
(OpenBLAS) runs in the same process on the same core, alternating with it.
Each figure is the median of several timed runs after a warm-up; GFLOP/s
counts 2*M*N*K. Every result is checked against float64 with the fp32
accumulation bound before it is reported.

Then the compile time of a kernel: the first call with an empty compile
cache (fresh TESSERA_CACHE_DIR: lower, Tile IR passes, emit C++, host
compiler, load, run), the first call of a new kernel object on the now warm
disk cache (what a new process pays), and a later call of the same object.
"""

import one_core  # first: pins the process and fixes thread counts before numpy loads

import argparse  # noqa: E402
import os  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import tessera  # noqa: E402

# The fastest of the space at 1024 and 2048 on the development machine: a
# 128 x 128 block of C per group reads each element of A and B half as often
# as 64 x 64, and BK = 64 keeps the two double-buffered blocks (128 KiB) in L2.
BM, BN, BK = 128, 128, 64


@tessera.kernel.autotune(space=dict(BM=[128, 64], BN=[128, 64], BK=[64, 32]), tile=(128,), shared=128 * 1024)
def gemm(A: tessera.f32["M", "K"], B: tessera.f32["K", "N"], C: tessera.mut(tessera.f32["M", "N"])):
    tiles_n = (N + BN - 1) // BN
    bm = (group_linear_id() // tiles_n) * BM
    bn = (group_linear_id() % tiles_n) * BN
    a = tshared.alloc[f32]((BM, BK))
    b = tshared.alloc[f32]((BK, BN))
    acc = tile.zeros((BM, BN), f32)
    for k in tile.range(K, step=BK, prefetch=2):
        cp_async.shared.global_(a, A[bm:bm + BM, k:k + BK])
        cp_async.shared.global_(b, B[k:k + BK, bn:bn + BN])
        tbarrier()
        acc = tile.mma(tile.load(a), tile.load(b), acc=acc)
        tbarrier()
    tile.store(C, rows=(bm, BM), cols=(bn, BN), value=acc)


def cdiv(a, b):
    return -(-a // b)




def check(a, b, c):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    bound = (a.shape[1] + 2) * 2.0**-24 * (np.abs(a64) @ np.abs(b64))
    err = np.abs(c - a64 @ b64)
    if not np.all(err <= bound):
        raise SystemExit(f"GEMM result outside the fp32 bound: max error/bound {np.max(err / bound):.3g}")


def gemm_rows(sizes, autotune):
    rng = np.random.default_rng(0)
    rows = []
    for n in sizes:
        a = rng.standard_normal((n, n)).astype(np.float32)
        b = rng.standard_normal((n, n)).astype(np.float32)
        c = np.zeros((n, n), np.float32)
        if autotune:
            consts = gemm.autotune(a, b, c, grid=lambda k: cdiv(n, k["BM"]) * cdiv(n, k["BN"]))
            kern = gemm.jit(**consts)
        else:
            kern = gemm.jit(BM=BM, BN=BN, BK=BK)
        grid = cdiv(n, kern.constants["BM"]) * cdiv(n, kern.constants["BN"])
        runs = 7 if n <= 512 else 5 if n <= 1024 else 3
        t_tessera = one_core.median_seconds(lambda: kern[grid](a, b, c), runs)
        check(a, b, c)
        t_numpy = one_core.median_seconds(lambda: np.matmul(a, b), runs)
        flops = 2.0 * n**3
        k = kern.constants
        rows.append((n, flops / t_tessera / 1e9, flops / t_numpy / 1e9, f"{k['BM']}x{k['BN']}x{k['BK']}"))
    return rows


def compile_times():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((48, 40)).astype(np.float32)
    b = rng.standard_normal((40, 24)).astype(np.float32)
    c = np.zeros((48, 24), np.float32)
    grid = cdiv(48, BM) * cdiv(24, BN)
    old = os.environ.get("TESSERA_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="tessera-bench-cache-") as cache:
        os.environ["TESSERA_CACHE_DIR"] = cache
        try:
            fresh = tessera.kernel(gemm.__wrapped__).jit(BM=BM, BN=BN, BK=BK)
            start = time.perf_counter()
            fresh[grid](a, b, c)
            cold = time.perf_counter() - start
            again = tessera.kernel(gemm.__wrapped__).jit(BM=BM, BN=BN, BK=BK)
            start = time.perf_counter()
            again[grid](a, b, c)
            disk = time.perf_counter() - start
            hot = one_core.median_seconds(lambda: again[grid](a, b, c), 20)
        finally:
            if old is None:
                os.environ.pop("TESSERA_CACHE_DIR", None)
            else:
                os.environ["TESSERA_CACHE_DIR"] = old
    check(a, b, c)
    return cold, disk, hot


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[512, 1024, 2048])
    parser.add_argument("--core", type=int, default=None, help="the core to pin to (default: the highest allowed)")
    parser.add_argument("--autotune", action="store_true", help="autotune BM/BN/BK per size instead of 128x128x64")
    args = parser.parse_args()

    print(f"kernel-language GEMM (fp32, tile.mma, cp_async double buffering) vs numpy.matmul, "
          f"one thread on core {one_core.CORE}, numpy {np.__version__}")
    print(f"{'size':>6} {'tile BMxBNxBK':>14} {'tessera GFLOP/s':>16} {'numpy GFLOP/s':>14} {'tessera/numpy':>14}")
    for n, ours, theirs, tiles in gemm_rows(args.sizes, args.autotune):
        print(f"{n:>6} {tiles:>14} {ours:>16.1f} {theirs:>14.1f} {ours / theirs:>14.2f}")
    cold, disk, hot = compile_times()
    print("\ncompile time of the GEMM kernel (48x40 @ 40x24 launch):")
    print(f"  first call, empty compile cache (lower + passes + C++ compile + load + run) {cold * 1e3:10.1f} ms")
    print(f"  first call of a new kernel object, disk cache hit                           {disk * 1e3:10.1f} ms")
    print(f"  later call of the same object (launch only)                                 {hot * 1e3:10.3f} ms")


if __name__ == "__main__":
    main()
