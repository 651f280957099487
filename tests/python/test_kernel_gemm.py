"""A tiled GEMM written in the kernel language, run on the CPU, checked against numpy float64.

Two kernels: gemm_tile from tests/conformance (shared tiles double-buffered
by hand with cp_async) and gemm_pipe below, written with @tessera.kernel in
the Python spelling, whose single-buffered loop `tile.range(K, step=BK,
prefetch=2)` the tile-pipeline pass turns into a double-buffered one. Inputs
are fresh random values each run (the rng fixture prints the seed); shapes
include ones that do not divide the tile sizes. tile.mma forms exact
products and adds them in fp32, k increasing, so the error against the
float64 product is bounded by (K + 2) * 2^-24 * (|A| @ |B|) elementwise
(kernel_helpers.fp32_gemm_bound says why).
"""

# Kernel bodies below name the kernel language's built-ins (tile, tshared, shape
# symbols, ...): Python only compiles them; the C++ front end reads their text.
import numpy as np
import pytest

import tessera
from kernel_helpers import CONFORMANCE, cdiv, fp32_gemm_bound, kernel_cache  # noqa: F401

pytestmark = pytest.mark.usefixtures("kernel_cache")

SHAPES = [(64, 64, 64), (96, 80, 48), (33, 47, 29), (100, 1, 70), (1, 65, 17), (128, 100, 130)]


@tessera.kernel.autotune(space=dict(BM=[32, 64], BN=[32, 64], BK=[16]), tile=(128,), shared=32 * 1024)
def gemm_pipe(A: tessera.f32["M", "K"], B: tessera.f32["K", "N"], C: tessera.mut(tessera.f32["M", "N"])):
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


@tessera.kernel(tile=(128,), shared=32 * 1024)
def gemm_bf16(A: tessera.bf16["M", "K"], B: tessera.bf16["K", "N"], C: tessera.mut(tessera.f32["M", "N"])):
    tiles_n = (N + 31) // 32
    bm = (group_linear_id() // tiles_n) * 32
    bn = (group_linear_id() % tiles_n) * 32
    a = tshared.alloc[bf16]((32, 16))
    b = tshared.alloc[bf16]((16, 32))
    acc = tile.zeros((32, 32), f32)
    for k in tile.range(K, step=16, prefetch=2):
        cp_async.shared.global_(a, A[bm:bm + 32, k:k + 16])
        cp_async.shared.global_(b, B[k:k + 16, bn:bn + 32])
        tbarrier()
        acc = tile.mma(tile.load(a), tile.load(b), acc=acc)
        tbarrier()
    tile.store(C, rows=(bm, 32), cols=(bn, 32), value=acc)


@tessera.kernel(tile=(128,), shared=32 * 1024)
def gemm_f16(A: tessera.f16["M", "K"], B: tessera.f16["K", "N"], C: tessera.mut(tessera.f32["M", "N"])):
    tiles_n = (N + 31) // 32
    bm = (group_linear_id() // tiles_n) * 32
    bn = (group_linear_id() % tiles_n) * 32
    a = tshared.alloc[f16]((32, 16))
    b = tshared.alloc[f16]((16, 32))
    acc = tile.zeros((32, 32), f32)
    for k in tile.range(K, step=16, prefetch=2):
        cp_async.shared.global_(a, A[bm:bm + 32, k:k + 16])
        cp_async.shared.global_(b, B[k:k + 16, bn:bn + 32])
        tbarrier()
        acc = tile.mma(tile.load(a), tile.load(b), acc=acc)
        tbarrier()
    tile.store(C, rows=(bm, 32), cols=(bn, 32), value=acc)


def check_fp32_gemm(a, b, c):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    err = np.abs(c.astype(np.float64) - a64 @ b64)
    bound = fp32_gemm_bound(a64, b64)
    assert np.all(err <= bound), f"max error/bound {np.max(err / bound):.3g}"


@pytest.mark.parametrize("shape", SHAPES)
def test_gemm_tile_fp32_random(rng, shape):
    m, n, k = shape
    g = tessera.load(CONFORMANCE / "gemm_tile.tsr").gemm_tile.jit(BM=32, BN=64, BK=16)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = np.full((m, n), np.nan, np.float32)
    g[cdiv(m, 32) * cdiv(n, 64)](a, b, c)
    check_fp32_gemm(a, b, c)


@pytest.mark.parametrize("shape", SHAPES)
def test_gemm_pipelined_python_kernel_fp32_random(rng, shape):
    m, n, k = shape
    g = gemm_pipe.jit(BM=64, BN=32)
    a = rng.uniform(-2, 2, (m, k)).astype(np.float32)
    b = rng.uniform(-2, 2, (k, n)).astype(np.float32)
    c = np.full((m, n), np.nan, np.float32)
    g[cdiv(m, 64) * cdiv(n, 32)](a, b, c)
    check_fp32_gemm(a, b, c)


def test_gemm_pipelined_loop_is_double_buffered():
    tile_ir = gemm_pipe.jit(BM=32, BN=32).inspect_ir("tile")
    # tile-pipeline gave each copied buffer a second stage; the buffers only
    # feed the mma, so the mma is async: each iteration waits for its own
    # copies (pending = 0: the next ones are issued after the mma), leaves its
    # mma in flight while the previous one completes (mma_wait pending = 1),
    # and then copies the next stage into the buffers that mma read.
    assert tile_ir.count("tile.smem_alloc") == 4, tile_ir
    assert "tile.cp_async_wait {pending = 0}" in tile_ir
    assert "{async = true}" in tile_ir
    assert "tile.mma_wait {pending = 1}" in tile_ir
    assert 'remark = "pipelined: 2 stages, 2 copy group(s) per iteration, 1 async mma(s)"' in tile_ir


def test_gemm_pipelined_autotuned(rng, monkeypatch):
    monkeypatch.setenv("TESSERA_LOG", "quiet")
    m, n, k = 90, 70, 40
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = np.zeros((m, n), np.float32)
    gemm_pipe[lambda cst: cdiv(m, cst["BM"]) * cdiv(n, cst["BN"])](a, b, c)
    check_fp32_gemm(a, b, c)
    # A group-shaped kernel needs a grid: said once, before any candidate runs.
    with pytest.raises(tessera.ArgumentError, match="group shape.*explicit grid"):
        gemm_pipe(a, b, c)


@pytest.mark.parametrize("shape", [(64, 64, 64), (45, 70, 33), (5, 3, 100)])
@pytest.mark.parametrize("kernel,dtype", [(gemm_bf16, "bf16"), (gemm_f16, "fp16")])
def test_gemm_low_precision_operands_fp32_accumulation(rng, shape, kernel, dtype):
    m, n, k = shape
    # Operands rounded to bf16/fp16 by tessera.tensor; the reference decodes
    # exactly those values (every bf16/fp16 value is a float32) to float64.
    a = tessera.tensor(rng.standard_normal((m, k)), dtype=dtype)
    b = tessera.tensor(rng.standard_normal((k, n)), dtype=dtype)
    c = np.full((m, n), np.nan, np.float32)
    kernel[cdiv(m, 32) * cdiv(n, 32)](a, b, c)
    a64 = a.numpy().astype(np.float64)
    b64 = b.numpy().astype(np.float64)
    assert a.dtype.name == dtype
    err = np.abs(c - a64 @ b64)
    bound = fp32_gemm_bound(a64, b64)
    assert np.all(err <= bound), f"max error/bound {np.max(err / bound):.3g}"
    # The accumulation really is fp32: a bf16/fp16 accumulator would be off by
    # far more than the bound on a typical entry.
    if k >= 33:
        assert np.median(err / (np.abs(a64) @ np.abs(b64))) < 2.0**-12
