"""The CUDA Tile IR target from Python (docs/design/0014-cuda-tile-target.md).

``@tessera.kernel(target="cuda_tile")`` (or ``tessera.load(path,
target="cuda_tile")``) sends launches on cuda tensors through CUDA Tile IR
and tileiras instead of CUDA C++ and NVRTC; launches on host tensors still
run on the CPU backend. ``inspect_ir("target")`` shows the CUDA Tile IR text
(no GPU or tileiras needed). A construct the target cannot express is a
CompileError naming it and its line, at inspection and at launch; it never
runs through PTX instead.

The GPU tests compare the target's results with the CPU backend's: bit-equal
where the arithmetic is the same (copies, rounding casts, GEMMs whose every
partial sum is exact), within the fp32 accumulation bound for tensor-core
GEMMs. They skip without a GPU or without tileiras.
"""

# Kernel bodies name the kernel language's built-ins (tile, f32, ...): Python
# only compiles them; the C++ front end reads their text.
import numpy as np
import pytest

import tessera
from tessera import _C
from tessera.errors import ArgumentError, CompileError, ParseError
from kernel_helpers import CONFORMANCE, cdiv, fp32_gemm_bound, kernel_cache  # noqa: F401

pytestmark = pytest.mark.usefixtures("kernel_cache")

TILEIRAS_OK, TILEIRAS_VERSION, TILEIRAS_WHY = _C._tileiras()
on_gpu = pytest.mark.skipif(
    not _C._cuda_available() or not TILEIRAS_OK,
    reason=("no CUDA device" if not _C._cuda_available() else f"tileiras unusable: {TILEIRAS_WHY or 'not found'}"))


@tessera.kernel(tile=(128,), target="cuda_tile")
def gemm(A: tessera.bf16["M", "K"], B: tessera.bf16["K", "N"], C: tessera.mut(tessera.f32["M", "N"])):
    tiles_n = (N + 63) // 64
    bm = (group_linear_id() // tiles_n) * 64
    bn = (group_linear_id() % tiles_n) * 64
    acc = tile.zeros((64, 64), f32)
    for k in range(0, K, 32):
        acc = tile.mma(tile.load(A, rows=(bm, 64), cols=(k, 32)), tile.load(B, rows=(k, 32), cols=(bn, 64)), acc=acc)
    tile.store(C, rows=(bm, 64), cols=(bn, 64), value=acc)


@tessera.kernel(tile=(128,), target="cuda_tile")
def round_rows(X: tessera.f32["M", "N"], Y: tessera.mut(tessera.bf16["M", "N"])):
    r = group_linear_id() * 32
    for c in range(0, N, 64):
        tile.store(Y, rows=(r, 32), cols=(c, 64), value=bf16(tile.load(X, rows=(r, 32), cols=(c, 64))))


@tessera.kernel(tile=(128,), target="cuda_tile")
def shifted_copy(X: tessera.f32["M", "N"], Y: tessera.mut(tessera.f32["M", "N"])):
    # Offsets that are not multiples of the tile: each access gets a view of its own.
    r = group_linear_id() * 32
    tile.store(Y, rows=(r, 32), cols=(0, 64), value=tile.load(X, rows=(r + 1, 32), cols=(3, 64)))


@tessera.kernel(target="cuda_tile")
def scale(x: tessera.f32["n"], y: tessera.mut(tessera.f32["n"]), alpha: tessera.f32):
    i = tile.linear_id()
    if i < n:
        y[i] = alpha * x[i]


# ---- without a GPU ----

def test_target_option_and_text():
    assert gemm.target == "cuda_tile" and gemm.jit(K=64).target == "cuda_tile"
    text = gemm.inspect_ir("target")
    assert text.startswith("cuda_tile.module @tessera {"), text[:80]
    for want in ("entry @gemm(", "tile<ptr<bf16>>", "mmaf", "tile<64x32xbf16>, tile<32x64xbf16>, tile<64x64xf32>",
                 "get_tile_block_id", "store_view_tko weak"):
        assert want in text, want
    # The PTX path's code on request, and the text for a kernel declared without the option.
    assert "__global__" in gemm.inspect_ir("target", target="cuda")
    plain = tessera.load(CONFORMANCE / "gemm_tile.tsr").gemm_tile
    assert plain.target == "cuda"
    assert "__global__" in plain.inspect_ir("target", target="cuda")


def test_unknown_target_is_an_error():
    with pytest.raises(ArgumentError, match="did you mean 'cuda_tile'"):
        tessera.kernel(target="cuda_tiles")
    with pytest.raises(ArgumentError, match="kernel target is"):
        tessera.load(CONFORMANCE / "scale.tsr", target="ptx")
    with pytest.raises(ParseError, match='target is "cuda"'):
        _C.kernels_from_source('@kernel(target="tile_ir")\ndef k(x: f32[n]):\n    pass\n', "k.tsr")


def test_lane_code_is_a_compile_error_naming_op_and_line():
    line = scale.__wrapped__.__code__.co_firstlineno + 2  # i = tile.linear_id()
    with pytest.raises(CompileError, match=rf"tile\.linear_id.*|test_cuda_tile\.py:{line}") as e:
        scale.inspect_ir("target")
    assert f"test_cuda_tile.py:{line}" in str(e.value) and "tile.linear_id" in str(e.value)
    with pytest.raises(ArgumentError, match="no PTX"):
        gemm.inspect_ir("ptx")


def test_host_tensors_still_run_on_the_cpu():
    x = np.arange(8, dtype=np.float32)
    y = np.zeros(8, dtype=np.float32)
    scale(x, y, 2.0)
    np.testing.assert_array_equal(y, 2 * x)


def test_loaded_conformance_kernels_the_target_cannot_express():
    # Each conformance kernel, and the construct that stops it (the list in design 0014).
    expected = {
        "scale": "tile.linear_id",
        "group_sum": "tile.smem_alloc",
        "tp_gemm": "tile.linear_id",
        "gemm_tile": "tile.smem_alloc",
        "axpy_tiled": "tile.smem_alloc",
    }
    for name, construct in expected.items():
        k = tessera.load(CONFORMANCE / f"{name}.tsr", target="cuda_tile")[name]
        with pytest.raises(CompileError, match="cuda_tile target cannot express") as e:
            k.inspect_ir("target")
        assert construct in str(e.value), (name, str(e.value))
        assert f"{name}.tsr:" in str(e.value)


# ---- on the GPU ----

def gpu(a, dtype=None):
    return (tessera.tensor(a, dtype=dtype) if dtype else tessera.tensor(a)).to("cuda:0")


@on_gpu
@pytest.mark.parametrize("m,n,k", [(64, 64, 32), (200, 130, 96), (1, 70, 33)])
def test_gemm_matches_the_cpu_backend(rng, m, n, k):
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    ta, tb = tessera.tensor(a, dtype="bf16"), tessera.tensor(b, dtype="bf16")
    grid = cdiv(m, 64) * cdiv(n, 64)
    cpu = np.full((m, n), np.nan, dtype=np.float32)
    gemm[grid](ta, tb, cpu)
    out = gpu(np.full((m, n), np.nan, dtype=np.float32))
    gemm[grid](ta.to("cuda:0"), tb.to("cuda:0"), out)
    got = out.numpy()
    a64, b64 = ta.numpy().astype(np.float64), tb.numpy().astype(np.float64)
    # Tensor cores add the exact products in another order: both within the fp32 bound.
    bound = fp32_gemm_bound(a64, b64)
    assert (np.abs(got - a64 @ b64) <= bound).all()
    assert (np.abs(got - cpu) <= 2 * bound).all()


@on_gpu
def test_exact_gemm_is_bit_equal(rng):
    # Small integers: every product and partial sum is exact in fp32, so any order gives the same bits.
    m, n, k = 128, 192, 96
    a = rng.integers(-4, 5, (m, k)).astype(np.float32)
    b = rng.integers(-4, 5, (k, n)).astype(np.float32)
    ta, tb = tessera.tensor(a, dtype="bf16"), tessera.tensor(b, dtype="bf16")
    grid = cdiv(m, 64) * cdiv(n, 64)
    cpu = np.zeros((m, n), dtype=np.float32)
    gemm[grid](ta, tb, cpu)
    out = gpu(np.zeros((m, n), dtype=np.float32))
    gemm[grid](ta.to("cuda:0"), tb.to("cuda:0"), out)
    np.testing.assert_array_equal(out.numpy(), cpu)


@on_gpu
def test_rounding_cast_and_partial_tiles_are_bit_equal(rng):
    m, n = 70, 100  # neither a multiple of the tile: loads pad with zeros, stores skip the rest
    x = (rng.standard_normal((m, n)) * 1000).astype(np.float32)
    cpu = tessera.tensor(np.full((m, n), 7.0, dtype=np.float32), dtype="bf16")
    round_rows[cdiv(m, 32)](x, cpu)
    out = gpu(np.full((m, n), 7.0, dtype=np.float32), dtype="bf16")
    round_rows[cdiv(m, 32)](gpu(x), out)
    np.testing.assert_array_equal(out.numpy(), cpu.numpy())


@on_gpu
def test_unaligned_offsets_are_bit_equal(rng):
    m, n = 75, 70
    x = rng.standard_normal((m, n)).astype(np.float32)
    cpu = np.full((m, n), 9.0, dtype=np.float32)
    shifted_copy[cdiv(m, 32)](x, cpu)
    # Row r + 1 of X, columns 3..66, into columns 0..63; the last row reads zeros past the bounds.
    assert (cpu[:m - 1, :64] == x[1:, 3:67]).all() and (cpu[m - 1, :64] == 0).all() and (cpu[:, 64:] == 9).all()
    out = gpu(np.full((m, n), 9.0, dtype=np.float32))
    shifted_copy[cdiv(m, 32)](gpu(x), out)
    np.testing.assert_array_equal(out.numpy(), cpu)


@on_gpu
def test_lane_kernel_on_gpu_is_a_compile_error_not_a_ptx_launch():
    x = gpu(np.ones(16, dtype=np.float32))
    y = gpu(np.full(16, 5.0, dtype=np.float32))
    with pytest.raises(CompileError, match="tile.linear_id"):
        scale(x, y, 2.0)
    np.testing.assert_array_equal(y.numpy(), 5.0)  # nothing ran


# ---- the Mapper's "tile_ir" variant for @tessera.jit ----

class TileIRMapper(tessera.Mapper):
    def choose_variant(self, op, arch):
        return "tile_ir" if not arch.is_cpu else None


def test_mapper_tile_ir_shows_in_the_schedule_ir():
    tessera.runtime.set_mapper(TileIRMapper())
    try:
        f = tessera.jit(lambda x: tessera.ops.exp(x))
        f(tessera.tensor(np.zeros(4, np.float32)))  # on the CPU: not asked for a variant
        assert {k["variant"] for k in f.executable().kernels} == {"tile"}
    finally:
        tessera.runtime.set_mapper(tessera.Mapper())


@on_gpu
def test_mapper_tile_ir_on_gpu_is_a_compile_error_naming_the_lane_code():
    # Every Schedule IR template today is lane-level code (one value per tile.linear_id),
    # which the target does not vectorize: a CompileError at the user's line, no PTX run.
    tessera.runtime.set_mapper(TileIRMapper())
    try:
        f = tessera.jit(lambda x: tessera.ops.exp(x))
        with pytest.raises(CompileError, match="cuda_tile target cannot express 'tile.linear_id'"):
            f(gpu(np.zeros(4, np.float32)))
        assert any("-> 'tile_ir' (the generated kernel through CUDA Tile IR" in line
                   for line in tessera.runtime.mapper_log())
    finally:
        tessera.runtime.set_mapper(tessera.Mapper())


def test_jit_target_names_cuda_tile():
    with pytest.raises(ArgumentError, match="'cpu', 'cuda' or 'cuda_tile'"):
        tessera.jit(lambda x: x, target="tile_ir")


@on_gpu
def test_jit_target_cuda_tile_is_a_compile_error_for_lane_templates():
    f = tessera.jit(lambda x: tessera.ops.exp(x), target="cuda_tile")
    with pytest.raises(CompileError, match="cuda_tile target cannot express 'tile.linear_id'"):
        f(tessera.tensor(np.zeros(4, np.float32)))  # host arguments run on cuda:0, as target="cuda"
