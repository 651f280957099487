"""The specification's kernels (tests/conformance/*.tsr), compiled for the CPU and run.

Each expectation is derived by hand from what the kernel's code literally
computes (docs/design/0003-tile-ir.md fixes the execution model), written in
numpy here, never taken from Tessera itself.
"""

import numpy as np
import pytest

import tessera
from kernel_helpers import CONFORMANCE, cdiv, f16_round, fp32_gemm_bound, kernel_cache  # noqa: F401

pytestmark = pytest.mark.usefixtures("kernel_cache")


def load(name):
    return tessera.load(CONFORMANCE / f"{name}.tsr")


def test_every_conformance_file_loads():
    files = sorted(p.stem for p in CONFORMANCE.glob("*.tsr"))
    assert files == ["axpy_tiled", "gemm_tile", "group_sum", "scale", "tp_gemm"]
    for name in files:
        f = load(name)
        assert f.names == [name]
        assert f[name] is getattr(f, name)


# ---- Ch. 4.1 scale: y[i] = alpha * x[i] for i < n ----

@pytest.mark.parametrize("n", [1, 37, 1000])
def test_scale(rng, n):
    scale = load("scale").scale
    x = rng.standard_normal(n).astype(np.float32)
    y = np.full(n, -7.0, dtype=np.float32)
    alpha = 1.7
    scale(x, y, alpha)  # default extent: one tile per element of y
    # One multiplication of fp32 values, rounded once to fp32 (exact in float64 first).
    expected = (np.float64(np.float32(alpha)) * x.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(y, expected)


def test_scale_extra_tiles_do_nothing(rng):
    scale = load("scale").scale
    x = rng.standard_normal(10).astype(np.float32)
    y = np.zeros(10, dtype=np.float32)
    scale[25](x, y, -2.0)  # no group shape: tile.linear_id() spans the launch; i >= n skips
    np.testing.assert_array_equal(y, -2.0 * x)
    z = np.full(10, 5.0, dtype=np.float32)
    scale[4](x, z, 3.0)  # only the first 4 elements have a tile
    np.testing.assert_array_equal(z[:4], (3.0 * x[:4].astype(np.float64)).astype(np.float32))
    np.testing.assert_array_equal(z[4:], 5.0)


def test_scale_with_tessera_tensors(rng):
    scale = load("scale").scale
    xs = rng.standard_normal(64).astype(np.float32)
    x = tessera.tensor(xs)
    y = tessera.tensor(np.zeros(64, dtype=np.float32))
    scale(x, y, 0.5)
    np.testing.assert_array_equal(y.numpy(), xs * np.float32(0.5))


# ---- Ch. 4.2 group_sum: every group sums the whole x, tile 0 writes out[group] ----

def test_group_sum_exact_values(rng):
    gs = load("group_sum").group_sum
    n, groups = 1000, 3
    # Small integers: every partial sum is exact in fp32, so the order of
    # additions cannot matter and the expected total is exact.
    x = rng.integers(-8, 9, size=n).astype(np.float32)
    out = np.full(groups, np.nan, dtype=np.float32)
    gs[groups](x, out)
    np.testing.assert_array_equal(out, np.full(groups, x.astype(np.float64).sum(), dtype=np.float32))


def test_group_sum_strided_partials_and_tree(rng):
    gs = load("group_sum").group_sum
    n = 300
    x = rng.standard_normal(n).astype(np.float32)
    out = np.zeros(2, dtype=np.float32)
    gs[2](x, out)
    # Tile i sums x[i], x[i+128], ... in fp32; then one tile sums the 128
    # partials at fp32. Each of the <= 130 fp32 additions on the path to a
    # result rounds once: |error| <= 130 * 2^-24 * sum|x| (plus one).
    exact = x.astype(np.float64).sum()
    bound = 131 * 2.0**-24 * np.abs(x.astype(np.float64)).sum()
    assert out[0] == out[1]
    assert abs(float(out[0]) - exact) <= bound


def test_group_sum_small_n_leaves_empty_tiles_zero():
    gs = load("group_sum").group_sum
    x = np.array([1.5, 2.25, -0.75], dtype=np.float32)  # tiles 3..127 sum nothing (acc = 0.0)
    out = np.zeros(1, dtype=np.float32)
    gs[1](x, out)
    assert out[0] == np.float32(3.0)


def test_group_sum_needs_a_grid():
    gs = load("group_sum").group_sum
    with pytest.raises(tessera.ArgumentError, match="group shape.*explicit grid"):
        gs(np.ones(4, np.float32), np.zeros(1, np.float32))


# ---- Ch. 4.3 axpy_tiled: each iteration updates the PREVIOUS 128-chunk ----

def axpy_expected(x16, y16, alpha):
    """What axpy_tiled's body computes in one group: iteration t copies chunk
    t/128 into s1, and (for t > 0) updates Y[t-128 : t] from s0, which holds the
    previous chunk; so every chunk but the last is updated once and the last
    (the one starting at the final t) is not. Lane arithmetic is fp16 with one
    rounding per op: yv = f16(f16(alpha * x) + y)."""
    m = x16.size
    last_t = 128 * ((m - 1) // 128)
    a = np.float64(np.float16(alpha))
    out = y16.copy()
    j = np.arange(last_t)
    prod = f16_round(a * x16[j].astype(np.float64))
    out[j] = f16_round(prod.astype(np.float64) + y16[j].astype(np.float64))
    return out, last_t


@pytest.mark.parametrize("m", [128, 300, 512, 1000])
def test_axpy_tiled(rng, m):
    k = load("axpy_tiled").axpy_tiled
    x = rng.standard_normal(m).astype(np.float16)
    y = rng.standard_normal(m).astype(np.float16)
    y0 = y.copy()
    expected, last_t = axpy_expected(x, y0, 0.75)
    # One group (one tile): the whole loop runs once. (k(x, y) would launch a
    # tile per element of Y, each running the whole loop: a write race.)
    k[1](x, y, 0.75)
    np.testing.assert_array_equal(y.view(np.uint16), expected.view(np.uint16))
    np.testing.assert_array_equal(y[last_t:], y0[last_t:])  # the last chunk is never updated
    if last_t:
        assert not np.array_equal(y[:last_t], y0[:last_t])


def test_axpy_tiled_autotunes_writes_once_and_caches(rng, capfd, monkeypatch):
    monkeypatch.delenv("TESSERA_LOG", raising=False)
    m = 640
    x = rng.standard_normal(m).astype(np.float16)
    y = rng.standard_normal(m).astype(np.float16)
    expected, _ = axpy_expected(x, y.copy(), -1.25)
    k = load("axpy_tiled").axpy_tiled
    assert k.tuned_names == ["BM", "stages"]
    k[1](x, y, -1.25)
    # The candidates ran on copies: the caller's Y holds exactly one update.
    np.testing.assert_array_equal(y.view(np.uint16), expected.view(np.uint16))
    err = capfd.readouterr().err
    assert "autotune axpy_tiled: timing 4 candidates (BM, stages)" in err
    for i in range(1, 5):
        assert f"autotune axpy_tiled [{i}/4]" in err
    assert "autotune axpy_tiled: chose" in err
    # Same kernel object, same key: no search, no output.
    k[1](x, y.copy(), -1.25)
    assert "autotune" not in capfd.readouterr().err
    # A fresh load has no in-memory result: it reads the one stored on disk.
    k2 = load("axpy_tiled").axpy_tiled
    y2 = y.copy()
    k2[1](x, y2, -1.25)
    err = capfd.readouterr().err
    assert "autotune axpy_tiled: using" in err and "timing" not in err
    # A new shape is a new key: searched again, silently under TESSERA_LOG=quiet.
    monkeypatch.setenv("TESSERA_LOG", "quiet")
    k2[1](x[:256].copy(), y2[:256].copy(), -1.25)
    assert capfd.readouterr().err == ""


# ---- Ch. 4.4 tp_gemm: one shard's partial product ----

@pytest.mark.parametrize("m,k_total,n_total,tp", [(3, 8, 4, 2), (5, 12, 9, 3), (1, 4, 2, 1)])
def test_tp_gemm(rng, m, k_total, n_total, tp):
    kern = load("tp_gemm").tp_gemm.jit(K=k_total, tp=tp)
    a = rng.standard_normal((m, k_total // tp)).astype(np.float16)
    b = rng.standard_normal((k_total // tp, n_total)).astype(np.float16)
    c = np.full((m, n_total // tp), np.nan, dtype=np.float32)
    kern(a, b, c)  # one tile per element of C
    # C[m, j] = sum over k of f32(A[m,k]) * f32(B[k,j]) accumulated in fp32 in
    # increasing k; a product of two fp16 values is exact in fp32, then each
    # addition rounds once. Only the first N/tp columns of B are read.
    acc = np.zeros((m, n_total // tp), dtype=np.float32)
    for kk in range(k_total // tp):
        p = np.outer(a[:, kk].astype(np.float32), b[kk, : n_total // tp].astype(np.float32))
        acc = acc + p  # float32 + float32: one IEEE rounding
    np.testing.assert_array_equal(c, acc)


def test_tp_gemm_needs_its_compound_symbols():
    kern = load("tp_gemm").tp_gemm.jit(tp=2)
    a = np.ones((2, 3), np.float16)
    b = np.ones((3, 4), np.float16)
    c = np.zeros((2, 2), np.float32)
    with pytest.raises(tessera.TesseraError, match="'K'.*not bound.*jit\\(K=...\\)"):
        kern(a, b, c)


# ---- gemm_tile: C = A @ B with .jit(M=..., N=..., K=...) and inspect_ir (Ch. 10.2) ----

@pytest.mark.parametrize("shape", [(64, 64, 64), (70, 45, 33), (1, 1, 1), (130, 7, 50)])
def test_gemm_tile_small_integer_values_exact(rng, shape):
    m, n, k = shape
    g = load("gemm_tile").gemm_tile.jit(BM=32, BN=32, BK=16)
    a = rng.integers(-4, 5, size=(m, k)).astype(np.float32)
    b = rng.integers(-4, 5, size=(k, n)).astype(np.float32)
    c = np.full((m, n), np.nan, dtype=np.float32)
    g[cdiv(m, 32) * cdiv(n, 32)](a, b, c)
    # Integer products and sums below 2^24 are exact in fp32: order-free.
    np.testing.assert_array_equal(c, (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32))


def test_gemm_tile_jit_and_inspect_ir_as_in_the_specification(rng):
    gemm_tile = load("gemm_tile").gemm_tile
    kernel = gemm_tile.jit(M=4096, N=4096, K=4096)
    tile_ir = kernel.inspect_ir("tile")
    target = kernel.inspect_ir("target")
    assert "func @gemm_tile" in tile_ir
    assert "gmem<[4096, 4096] fp32>" in tile_ir and "gmem<[4096, 4096] fp32 mut>" in tile_ir
    for op in ("tile.cp_async", "tile.barrier", "tile.mma", "tile.smem_alloc", "tile.tile_store"):
        assert op in tile_ir, op
    assert "offset =" in tile_ir  # shared memory planned by tile-plan-shared
    assert "tessera_cpu" in target and "extern \"C\"" in target
    # The specialization is real: other shapes are refused with the sizes named.
    small = np.zeros((8, 8), np.float32)
    with pytest.raises(tessera.ShapeError, match="4096"):
        kernel[1](small, small, small.copy())
    # Small specialized shapes run and match.
    k8 = gemm_tile.jit(M=40, N=24, K=20, BM=32, BN=32, BK=16)
    a = rng.integers(-3, 4, size=(40, 20)).astype(np.float32)
    b = rng.integers(-3, 4, size=(20, 24)).astype(np.float32)
    c = np.zeros((40, 24), np.float32)
    k8[cdiv(40, 32) * cdiv(24, 32)](a, b, c)
    np.testing.assert_array_equal(c, a @ b)


def test_gemm_tile_autotuned_with_grid_function(rng, monkeypatch):
    monkeypatch.setenv("TESSERA_LOG", "quiet")
    m, n, k = 50, 40, 36
    g = load("gemm_tile").gemm_tile.jit(BK=16)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = np.zeros((m, n), np.float32)
    seen = []

    def grid(consts):
        seen.append(dict(consts))
        return cdiv(m, consts["BM"]) * cdiv(n, consts["BN"])

    g[grid](a, b, c)
    assert {(s["BM"], s["BN"]) for s in seen} == {(64, 64), (64, 32), (32, 64), (32, 32)}
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    assert np.all(np.abs(c - a64 @ b64) <= fp32_gemm_bound(a64, b64))
    choice = g.autotune(a, b, c, grid=grid)
    assert choice["BK"] == 16 and choice["BM"] in (64, 32) and choice["BN"] in (64, 32)
    assert "tile.mma" in g.inspect_ir("tile")
