"""tile.transpose and fp8 tile.mma operands in the kernel language, run on the CPU backend.

The fp8 operands are random finite fp8 codes decoded by ml_dtypes (so the
inputs are exact and the reference is independent of Tessera's decoder),
handed to the kernels as exactly representable values. tile.mma forms
exact products and adds them in fp32, k increasing, so against numpy's
float64 product of the decoded inputs the error is bounded by
(K + 2) * 2^-24 * (|A| @ |B|) elementwise (kernel_helpers.fp32_gemm_bound).
A transpose moves values only: it must be exact.
"""

# Kernel bodies below name the kernel language's built-ins (tile, tshared, shape
# symbols, ...): Python only compiles them; the C++ front end reads their text.
import ml_dtypes
import numpy as np
import pytest

import tessera
from kernel_helpers import cdiv, fp32_gemm_bound, kernel_cache  # noqa: F401

pytestmark = pytest.mark.usefixtures("kernel_cache")

SHAPES = [(32, 32, 32), (70, 45, 96), (33, 64, 17), (1, 65, 100)]
NUMPY_FP8 = {"fp8_e4m3": ml_dtypes.float8_e4m3fn, "fp8_e5m2": ml_dtypes.float8_e5m2}


@tessera.kernel(tile=(64,), shared=16 * 1024)
def gemm_e4m3_bt(A: tessera.fp8_e4m3["M", "K"], Bt: tessera.fp8_e4m3["N", "K"],
                 C: tessera.mut(tessera.f32["M", "N"])):
    tiles_n = (N + 31) // 32
    bm = (group_linear_id() // tiles_n) * 32
    bn = (group_linear_id() % tiles_n) * 32
    a = tshared.alloc[fp8_e4m3]((32, 32), swizzle="xor")
    b = tshared.alloc[fp8_e4m3]((32, 32), swizzle="xor")
    acc = tile.zeros((32, 32), f32)
    for k in tile.range(K, step=32, prefetch=2):
        cp_async.shared.global_(a, A[bm:bm + 32, k:k + 32])
        cp_async.shared.global_(b, Bt[bn:bn + 32, k:k + 32])
        tbarrier()
        acc = tile.mma(tile.load(a), tile.transpose(tile.load(b)), acc=acc)
        tbarrier()
    tile.store(C, rows=(bm, 32), cols=(bn, 32), value=acc)


@tessera.kernel(tile=(64,), shared=16 * 1024)
def gemm_e5m2(A: tessera.fp8_e5m2["M", "K"], B: tessera.fp8_e5m2["K", "N"], C: tessera.mut(tessera.f32["M", "N"])):
    tiles_n = (N + 31) // 32
    bm = (group_linear_id() // tiles_n) * 32
    bn = (group_linear_id() % tiles_n) * 32
    a = tshared.alloc[fp8_e5m2]((32, 32), swizzle="xor")
    b = tshared.alloc[fp8_e5m2]((32, 32), swizzle="xor")
    acc = tile.zeros((32, 32), f32)
    for k in tile.range(K, step=32):
        cp_async.shared.global_(a, A[bm:bm + 32, k:k + 32])
        cp_async.shared.global_(b, B[k:k + 32, bn:bn + 32])
        tbarrier()
        acc = tile.mma(tile.load(a), tile.load(b), acc=acc)
        tbarrier()
    tile.store(C, rows=(bm, 32), cols=(bn, 32), value=acc)


@tessera.kernel(tile=(64,), shared=16 * 1024)
def gemm_e4m3_at(At: tessera.fp8_e4m3["K", "M"], B: tessera.fp8_e4m3["K", "N"],
                 C: tessera.mut(tessera.f32["M", "N"])):
    # A transposed A (the general path: the tile is transposed, then multiplied).
    tiles_n = (N + 31) // 32
    bm = (group_linear_id() // tiles_n) * 32
    bn = (group_linear_id() % tiles_n) * 32
    a = tshared.alloc[fp8_e4m3]((32, 32))
    b = tshared.alloc[fp8_e4m3]((32, 32))
    acc = tile.zeros((32, 32), f32)
    for k in tile.range(K, step=32):
        cp_async.shared.global_(a, At[k:k + 32, bm:bm + 32])
        cp_async.shared.global_(b, B[k:k + 32, bn:bn + 32])
        tbarrier()
        acc = tile.mma(tile.transpose(tile.load(a)), tile.load(b), acc=acc)
        tbarrier()
    tile.store(C, rows=(bm, 32), cols=(bn, 32), value=acc)


@tessera.kernel(tile=(32,))
def transpose_e4m3(X: tessera.fp8_e4m3["R", "C"], Y: tessera.mut(tessera.fp8_e4m3["C", "R"])):
    t = tile.load(X, rows=(0, 24), cols=(0, 40))
    tile.store(Y, rows=(0, 40), cols=(0, 24), value=tile.transpose(t))


@tessera.kernel(tile=(32,))
def transpose_f32(X: tessera.f32["R", "C"], Y: tessera.mut(tessera.f32["C", "R"])):
    t = tile.transpose(tile.load(X, rows=(0, 16), cols=(0, 48)))
    tile.store(Y, rows=(0, 48), cols=(0, 16), value=t)


def random_fp8(rng, shape, dtype):
    """Random finite fp8 values of `dtype`, decoded exactly to float64 by ml_dtypes."""
    codes = rng.integers(0, 256, size=shape, dtype=np.uint8)
    values = codes.view(NUMPY_FP8[dtype]).astype(np.float64)
    values[~np.isfinite(values)] = 0.0
    return values


def fp8_tensor(values, dtype):
    t = tessera.tensor(values, dtype=dtype)
    assert np.array_equal(t.numpy().astype(np.float64), values), "fp8 values must be exact"
    return t


def check_gemm(c, a64, b64):
    err = np.abs(c.astype(np.float64) - a64 @ b64)
    bound = fp32_gemm_bound(a64, b64)
    assert np.all(err <= bound), f"max error/bound {np.max(err / bound):.3g}"


@pytest.mark.parametrize("shape", SHAPES)
def test_fp8_e4m3_gemm_with_transposed_b(rng, shape):
    m, n, k = shape
    a = random_fp8(rng, (m, k), "fp8_e4m3")
    bt = random_fp8(rng, (n, k), "fp8_e4m3")
    c = np.full((m, n), np.nan, np.float32)
    gemm_e4m3_bt[cdiv(m, 32) * cdiv(n, 32)](fp8_tensor(a, "fp8_e4m3"), fp8_tensor(bt, "fp8_e4m3"), c)
    check_gemm(c, a, bt.T)


@pytest.mark.parametrize("shape", SHAPES)
def test_fp8_e5m2_gemm(rng, shape):
    m, n, k = shape
    a = random_fp8(rng, (m, k), "fp8_e5m2")
    b = random_fp8(rng, (k, n), "fp8_e5m2")
    c = np.full((m, n), np.nan, np.float32)
    gemm_e5m2[cdiv(m, 32) * cdiv(n, 32)](fp8_tensor(a, "fp8_e5m2"), fp8_tensor(b, "fp8_e5m2"), c)
    check_gemm(c, a, b)


@pytest.mark.parametrize("shape", [(32, 32, 32), (50, 40, 70)])
def test_fp8_gemm_with_transposed_a(rng, shape):
    m, n, k = shape
    at = random_fp8(rng, (k, m), "fp8_e4m3")
    b = random_fp8(rng, (k, n), "fp8_e4m3")
    c = np.full((m, n), np.nan, np.float32)
    gemm_e4m3_at[cdiv(m, 32) * cdiv(n, 32)](fp8_tensor(at, "fp8_e4m3"), fp8_tensor(b, "fp8_e4m3"), c)
    check_gemm(c, at.T, b)


def test_transpose_fp8_is_exact(rng):
    x = random_fp8(rng, (24, 40), "fp8_e4m3")
    y = tessera.tensor(np.full((40, 24), 7.0), dtype="fp8_e4m3")
    transpose_e4m3[1](fp8_tensor(x, "fp8_e4m3"), y)
    assert np.array_equal(y.numpy().astype(np.float64), x.T)


def test_transpose_f32_is_exact_and_skips_out_of_bounds(rng):
    # A 20 x 30 source read as a 16 x 48 tile: columns past 30 load as zeros;
    # the [48, 16] result is stored into a 30 x 20 destination (rows past 30 skipped).
    x = rng.standard_normal((20, 30)).astype(np.float32)
    y = np.full((30, 20), np.nan, np.float32)
    transpose_f32[1](x, y)
    want = np.full((30, 20), np.nan, np.float32)
    want[:, :16] = x[:16, :].T
    np.testing.assert_array_equal(y, want)


def test_transpose_tile_ir():
    ir = gemm_e4m3_bt.inspect_ir("tile")
    assert "tile.transpose" in ir
    assert "tile<[32, 32] fp8_e4m3" in ir


def test_transpose_of_a_lane_value_is_a_located_error():
    # The front end checks a decorated kernel's body when it is defined.
    with pytest.raises(tessera.KernelTypeError, match=r"tile.transpose takes a 2-D tile, got fp32 scalar") as e:
        @tessera.kernel(tile=(32,))
        def bad(X: tessera.f32["n"]):
            t = tile.transpose(X[0])  # noqa: F841
    assert "test_kernel_fp8_transpose.py:" in str(e.value)


def test_transpose_of_a_1d_tile_is_a_located_error():
    with pytest.raises(tessera.KernelTypeError, match=r"tile.transpose takes a 2-D tile, got .*\[32\]") as e:
        @tessera.kernel(tile=(32,))
        def bad1(X: tessera.f32["n"]):
            t = tile.transpose(tile.load(X, rows=(0, 32)))  # noqa: F841
    assert "test_kernel_fp8_transpose.py:" in str(e.value)
