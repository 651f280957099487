"""The CUDA Tile IR target from Python (docs/design/0014-cuda-tile-target.md).

``@tessera.kernel(target="cuda_tile")`` (or ``tessera.load(path,
target="cuda_tile")``) sends launches on cuda tensors through CUDA Tile IR
and tileiras instead of CUDA C++ and NVRTC; launches on host tensors still
run on the CPU backend. ``inspect_ir("target")`` shows the CUDA Tile IR text
(no GPU or tileiras needed). Lane-level code (tile.linear_id) is vectorized
over a group's lanes; shared buffers are the tile thread's own memory. A
construct the target cannot express is a CompileError naming it and its
line, at inspection and at launch; it never runs through PTX instead.

The GPU tests compare the target's results with the CPU backend's: bit-equal
where the arithmetic is the same (lane arithmetic, Tessera's exp, copies,
rounding casts, GEMMs whose every partial sum is exact), within the fp32
accumulation bound for tensor-core GEMMs. They skip without a GPU or
without tileiras.
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


@tessera.kernel(target="cuda_tile")
def cube(x: tessera.f32["n"], y: tessera.mut(tessera.f32["n"])):
    i = tile.linear_id()
    if i < n:
        y[i] = x[i] ** 3.0


@tessera.kernel(target="cuda_tile")
def read_next(x: tessera.f32["n"], y: tessera.mut(tessera.f32["n"])):
    i = tile.linear_id()
    y[i] = x[i + 1]  # no guard: the last tile reads past x


def test_lane_code_is_vectorized_over_the_lanes():
    # No group shape: 1024 tiles per tile block, masked pointer tiles, and the fault word.
    text = scale.inspect_ir("target")
    for want in ("iota : tile<1024xi32>", "load_ptr_tko weak", "store_ptr_tko weak", "/*tiles*/: tile<i64>",
                 "/*fault*/: tile<ptr<i32>>"):
        assert want in text, want
    with pytest.raises(ArgumentError, match="no PTX"):
        gemm.inspect_ir("ptx")


def test_unported_op_is_a_compile_error_naming_op_and_line():
    line = cube.__wrapped__.__code__.co_firstlineno + 4  # y[i] = x[i] ** 3.0
    with pytest.raises(CompileError, match="cuda_tile target cannot express 'tile.pow'") as e:
        cube.inspect_ir("target")
    assert f"test_cuda_tile.py:{line}" in str(e.value)


def test_host_tensors_still_run_on_the_cpu():
    x = np.arange(8, dtype=np.float32)
    y = np.zeros(8, dtype=np.float32)
    scale(x, y, 2.0)
    np.testing.assert_array_equal(y, 2 * x)


def conformance(name, target="cuda_tile"):
    k = tessera.load(CONFORMANCE / f"{name}.tsr", target=target)[name]
    # Autotuning times PTX kernels: the tuned names are fixed here.
    fixed = {"axpy_tiled": dict(BM=128, stages=2), "gemm_tile": dict(BM=32, BN=32, BK=16), "tp_gemm": dict(K=12, tp=3)}
    return k.jit(**fixed[name]) if name in fixed else k


def test_every_conformance_kernel_lowers():
    # The five conformance kernels, lane code, shared buffers, cp_async and
    # reduce_sum included (the list in design 0014).
    for name in ("scale", "group_sum", "tp_gemm", "gemm_tile", "axpy_tiled"):
        text = conformance(name).inspect_ir("target")
        assert text.startswith("cuda_tile.module @tessera {"), (name, text[:80])
    assert "/*shared#0*/: tile<ptr<f32>>" in conformance("group_sum").inspect_ir("target")


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


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}"))


@on_gpu
@pytest.mark.parametrize("n", [1, 1000, 5000])
def test_scale_lanes_match_the_cpu_backend(rng, n):
    x = rng.standard_normal(n).astype(np.float32)
    cpu = np.full(n, -7.0, np.float32)
    scale(x, cpu, 1.7)
    out = gpu(np.full(n, -7.0, np.float32))
    scale(gpu(x), out, 1.7)
    same_bits(out.numpy(), cpu)


@on_gpu
def test_conformance_kernels_match_the_cpu_backend(rng):
    # group_sum: strided partials per lane, the shared buffer's pairwise tree.
    x = rng.standard_normal(1000).astype(np.float32)
    cpu = np.full(3, np.nan, np.float32)
    conformance("group_sum")[3](x, cpu)
    out = gpu(np.full(3, np.nan, np.float32))
    conformance("group_sum")[3](gpu(x), out)
    same_bits(out.numpy(), cpu)
    # tp_gemm: K/tp and N/tp; tp is a hidden symbol parameter.
    a = rng.standard_normal((5, 4)).astype(np.float16)
    b = rng.standard_normal((4, 9)).astype(np.float16)
    cpu = np.full((5, 3), np.nan, np.float32)
    conformance("tp_gemm")(a, b, cpu)
    out = gpu(np.full((5, 3), np.nan, np.float32))
    conformance("tp_gemm")(gpu(a, "fp16"), gpu(b, "fp16"), out)
    same_bits(out.numpy(), cpu)
    # axpy_tiled: shared buffers swapped through the loop, cp_async, fp16 lane arithmetic.
    xs = rng.standard_normal(1000).astype(np.float16)
    ys = rng.standard_normal(1000).astype(np.float16)
    cpu = ys.copy()
    conformance("axpy_tiled")[1](xs, cpu, 0.75)
    out = gpu(ys, "fp16")
    conformance("axpy_tiled")[1](gpu(xs, "fp16"), out, 0.75)
    same_bits(out.numpy(), cpu)


@on_gpu
@pytest.mark.parametrize("m,n,k", [(64, 64, 64), (70, 45, 33)])
def test_gemm_tile_through_shared_buffers(rng, m, n, k):
    g = conformance("gemm_tile")
    grid = cdiv(m, 32) * cdiv(n, 32)
    # Small integers: every partial sum exact, so any order gives the same bits.
    a = rng.integers(-4, 5, (m, k)).astype(np.float32)
    b = rng.integers(-4, 5, (k, n)).astype(np.float32)
    cpu = np.zeros((m, n), np.float32)
    g[grid](a, b, cpu)
    out = gpu(np.zeros((m, n), np.float32))
    g[grid](gpu(a), gpu(b), out)
    same_bits(out.numpy(), cpu)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    out = gpu(np.zeros((m, n), np.float32))
    g[grid](gpu(a), gpu(b), out)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    assert (np.abs(out.numpy() - a64 @ b64) <= fp32_gemm_bound(a64, b64)).all()


@tessera.kernel(tile=(128,), shared=48 * 1024, target="cuda_tile")
def gemm_prefetch(A: tessera.bf16["M", "K"], B: tessera.bf16["K", "N"], C: tessera.mut(tessera.f32["M", "N"])):
    # The PTX path's staged form: shared tiles filled by cp_async in a prefetch loop.
    tiles_n = (N + 63) // 64
    bm = (group_linear_id() // tiles_n) * 64
    bn = (group_linear_id() % tiles_n) * 64
    a = tshared.alloc[bf16]((64, 32))
    b = tshared.alloc[bf16]((32, 64))
    acc = tile.zeros((64, 64), f32)
    for k in tile.range(K, step=32, prefetch=3):
        cp_async.shared.global_(a, A[bm:bm+64, k:k+32])
        cp_async.shared.global_(b, B[k:k+32, bn:bn+64])
        cp_async.wait(0)
        tbarrier()
        acc = tile.mma(tile.load(a), tile.load(b), acc=acc)
        tbarrier()
    tile.store(C, rows=(bm, 64), cols=(bn, 64), value=acc)


def test_staged_shared_buffers_are_tile_values_with_latency_hints():
    text = gemm_prefetch.inspect_ir("target", target="cuda_tile")
    assert "shared#" not in text and "load_ptr_tko" not in text
    assert text.count("optimization_hints = <sm_90 = {latency = 3}>") == 2, text


@on_gpu
@pytest.mark.parametrize("m,n,k", [(128, 192, 96), (70, 45, 33)])
def test_staged_prefetch_gemm_matches_the_cpu_backend(rng, m, n, k):
    grid = cdiv(m, 64) * cdiv(n, 64)
    # Small integers: every partial sum exact, so any order gives the same bits.
    a = rng.integers(-4, 5, (m, k)).astype(np.float32)
    b = rng.integers(-4, 5, (k, n)).astype(np.float32)
    ta, tb = tessera.tensor(a, dtype="bf16"), tessera.tensor(b, dtype="bf16")
    cpu = np.zeros((m, n), np.float32)
    gemm_prefetch[grid](ta, tb, cpu)
    out = gpu(np.zeros((m, n), np.float32))
    gemm_prefetch[grid](ta.to("cuda:0"), tb.to("cuda:0"), out)
    same_bits(out.numpy(), cpu)
    np.testing.assert_array_equal(cpu, a @ b)


@tessera.kernel(tile=(128,), target="cuda_tile")
def copy_window(X: tessera.int8[1, "N"], Y: tessera.mut(tessera.int8[1, 64]), at: tessera.int64):
    tile.store(Y, rows=(0, 1), cols=(0, 64), value=tile.load(X, rows=(0, 1), cols=(at, 64)))


@on_gpu
def test_extents_past_32_bits_take_the_plain_form():
    # The fast form's views have 32-bit extents; a row of 2^31 + 128 bytes
    # must be read through the 64-bit plain form.
    n = 2 ** 31 + 128
    x = np.zeros((1, n), np.int8)
    x[0, -128:] = np.arange(128, dtype=np.int8)
    dx = tessera.tensor(x).to("cuda:0")
    del x
    y = gpu(np.zeros((1, 64), np.int8))
    copy_window[1](dx, y, n - 96)
    np.testing.assert_array_equal(y.numpy()[0], np.arange(32, 96, dtype=np.int8))


@on_gpu
def test_out_of_range_lane_access_is_an_error_naming_the_line():
    line = read_next.__wrapped__.__code__.co_firstlineno + 3  # y[i] = x[i + 1]
    x = gpu(np.arange(8, dtype=np.float32))
    y = gpu(np.zeros(8, np.float32))
    with pytest.raises(tessera.TesseraError, match="out of range") as e:
        read_next(x, y)
    assert f"test_cuda_tile.py:{line}" in str(e.value)


@on_gpu
def test_unported_op_on_gpu_is_a_compile_error_not_a_ptx_launch():
    x = gpu(np.ones(16, dtype=np.float32))
    y = gpu(np.full(16, 5.0, dtype=np.float32))
    with pytest.raises(CompileError, match="tile.pow"):
        cube(x, y)
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


# Graph IR ops through the Schedule IR templates, each compiled by the Mapper's
# "tile_ir" choice: the same bits as the CPU compiled path (one canonical
# order, Tessera's own exp).
GRAPH_CASES = {
    "exp": lambda x: tessera.ops.exp(x),
    "log": lambda x: tessera.ops.log(tessera.ops.abs(x)),
    "tanh": lambda x: tessera.ops.tanh(x),
    "logsumexp": lambda x: tessera.ops.logsumexp(x, axis=-1),
    "add_relu": lambda x: tessera.ops.relu(x + x * 0.5),
    "softmax": lambda x: tessera.ops.softmax_safe(x, axis=-1),
    "rmsnorm": lambda x: tessera.ops.rmsnorm_safe(x, axis=-1),
    "sum_rows": lambda x: tessera.ops.sum(x, axis=-1),
}


@on_gpu
@pytest.mark.parametrize("case", sorted(GRAPH_CASES))
def test_mapper_tile_ir_matches_the_cpu_compiled_path(rng, case):
    fn = GRAPH_CASES[case]
    x = (rng.standard_normal((37, 300)) * 3).astype(np.float32)
    if case != "rmsnorm":
        x[3, 5] = np.inf
    cpu = tessera.jit(fn)(tessera.tensor(x)).numpy()
    tessera.runtime.set_mapper(TileIRMapper())
    try:
        f = tessera.jit(fn)
        got = f(gpu(x)).numpy()
        variants = {k["variant"] for k in f.executable().kernels}
        assert "tile_ir" in variants and "tile" not in variants, variants
    finally:
        tessera.runtime.set_mapper(tessera.Mapper())
    same_bits(got, cpu)


@on_gpu
def test_default_mapper_sends_elementwise_kernels_to_tile_ir(rng, monkeypatch):
    # On Hopper with tileiras, elementwise kernels the target expresses take
    # tile_ir (faster there, the same bits); normalizations stay on PTX; so
    # does an elementwise kernel the target cannot express (gelu: erf).
    x = (rng.standard_normal((37, 300)) * 3).astype(np.float32)
    def variants(fn, exact=True):
        f = tessera.jit(fn)
        got, cpu = f(gpu(x)).numpy(), tessera.jit(fn)(tessera.tensor(x)).numpy()
        if exact:
            same_bits(got, cpu)
        else:  # erf is CUDA's on the PTX path, not Tessera's
            np.testing.assert_allclose(got, cpu, rtol=1e-6, atol=1e-6)
        return {k["family"]: k["variant"] for k in f.executable().kernels}
    assert variants(GRAPH_CASES["add_relu"]) == {"elementwise": "tile_ir"}
    assert variants(GRAPH_CASES["softmax"]).get("normalization") == "tile"
    assert variants(lambda x: tessera.ops.gelu(x) + x, exact=False) == {"elementwise": "tile"}
    monkeypatch.setenv("TESSERA_CUDA_TILE_DEFAULT", "0")
    assert variants(lambda x: tessera.ops.relu(x * 0.25 + x)) == {"elementwise": "tile"}


@on_gpu
@pytest.mark.parametrize("m,k,n", [(256, 192, 320), (200, 130, 72)])
def test_default_mapper_runs_tensor_core_gemms_through_tile_ir(rng, m, k, n):
    # bf16 products (plain, transposed A, and with a bias + relu epilogue) take
    # tile_ir: 128x128x64 tiles, one K loop; within bf16 rounding of the
    # float64 product, and the same bits run after run.
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    ta, tb = tessera.tensor(a, dtype="bf16"), tessera.tensor(b, dtype="bf16")
    tat = tessera.tensor(np.ascontiguousarray(a.T), dtype="bf16")
    tbias = tessera.tensor(bias, dtype="bf16")
    a64, b64 = ta.numpy().astype(np.float64), tb.numpy().astype(np.float64)
    mm = a64 @ b64
    biased = mm + tbias.numpy().astype(np.float64)
    # fp32 accumulation error, then half a bf16 ulp per rounding: the
    # product's, and the epilogue add's.
    acc = np.sqrt(k) * 2.0 ** -20 * (np.abs(a64) @ np.abs(b64)) + 1e-6
    cases = [
        (lambda x, y: tessera.ops.matmul(x, y), (ta, tb), mm, np.abs(mm) * 2.0 ** -8 + acc),
        (lambda x, y: tessera.ops.gemm(x, y, transpose_a=True), (tat, tb), mm, np.abs(mm) * 2.0 ** -8 + acc),
        (lambda x, y, c: tessera.ops.relu(tessera.ops.matmul(x, y) + c), (ta, tb, tbias), np.maximum(biased, 0),
         (np.abs(mm) + np.abs(biased)) * 2.0 ** -8 + acc),
    ]
    for fn, args, want, tol in cases:
        f = tessera.jit(fn)
        dev = [t.to("cuda:0") for t in args]
        first = f(*dev).numpy()
        variants = {kk["family"]: kk["variant"] for kk in f.executable().kernels}
        assert variants.get("gemm") == "tile_ir", variants
        got = first.astype(np.float64)
        assert (np.abs(got - want) <= tol).all(), np.abs(got - want).max()
        for _ in range(2):
            np.testing.assert_array_equal(f(*dev).numpy().view(np.uint16), first.view(np.uint16))


def test_jit_target_names_cuda_tile():
    with pytest.raises(ArgumentError, match="'cpu', 'cuda' or 'cuda_tile'"):
        tessera.jit(lambda x: x, target="tile_ir")


@on_gpu
def test_jit_target_cuda_tile_runs_the_templates(rng):
    x = rng.standard_normal(1000).astype(np.float32)
    f = tessera.jit(lambda x: tessera.ops.exp(x), target="cuda_tile")
    got = f(tessera.tensor(x))  # host arguments run on cuda:0, as target="cuda"
    same_bits(got.numpy(), tessera.jit(lambda x: tessera.ops.exp(x))(tessera.tensor(x)).numpy())


@on_gpu
def test_tile_ir_steps_in_a_captured_graph(rng):
    # The first call builds the CUDA graph (tile_ir nodes among them), later
    # calls replay it with the new buffers' addresses: the CPU backend's bits.
    fn = GRAPH_CASES["add_relu"]
    tessera.runtime.set_mapper(TileIRMapper())
    try:
        f = tessera.jit(capture_graph=True)(fn)
        for _ in range(3):
            x = (rng.standard_normal((37, 300)) * 3).astype(np.float32)
            same_bits(f(gpu(x)).numpy(), tessera.jit(fn)(tessera.tensor(x)).numpy())
        # A kernel with shared buffers (the softmax template's partials) cannot be a node yet.
        g = tessera.jit(capture_graph=True)(GRAPH_CASES["softmax"])
        with pytest.raises(ArgumentError, match="shared buffers.*capture_graph"):
            g(gpu(np.ones((4, 64), np.float32)))
    finally:
        tessera.runtime.set_mapper(tessera.Mapper())
