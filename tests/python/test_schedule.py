"""@tessera.jit on the compiled path (TESSERA_BACKEND=compiled): Schedule IR
kernels compiled for the CPU, checked against the reference executor (bit for
bit) and numpy float64; inspect_ir's schedule, tile and target levels; and the
errors for graphs the templates do not cover yet."""

import numpy as np
import pytest

import tessera
from tessera.errors import ArgumentError, CompileError


@pytest.fixture
def compiled(monkeypatch):
    monkeypatch.setenv("TESSERA_BACKEND", "compiled")


def _both(fn, *args):
    """fn's results on the compiled path and on the reference executor."""
    import os
    os.environ["TESSERA_BACKEND"] = "compiled"
    try:
        got = tessera.jit(fn)(*args)
    finally:
        os.environ["TESSERA_BACKEND"] = "reference"
    want = tessera.jit(fn)(*args)
    return got, want


def test_fused_chain_matches_reference_bitwise_and_numpy(monkeypatch):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((33, 70)).astype(np.float32)
    b = rng.standard_normal(70).astype(np.float32)

    def f(x, b):
        y = tessera.ops.sigmoid(x + b) * 2.0
        return tessera.ops.gelu(y - x), tessera.ops.relu(y)

    monkeypatch.setenv("TESSERA_BACKEND", "reference")
    got, want = _both(f, tessera.tensor(x), tessera.tensor(b))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy().view(np.uint32), w.numpy().view(np.uint32))
    x64, b64 = x.astype(np.float64), b.astype(np.float64)
    y64 = 2.0 / (1.0 + np.exp(-(x64 + b64)))
    np.testing.assert_allclose(got[1].numpy(), np.maximum(y64, 0), rtol=1e-6, atol=1e-7)


def test_bf16_policy_matches_reference_bitwise(monkeypatch):
    rng = np.random.default_rng(2)
    x = tessera.tensor(rng.standard_normal((5, 129)), dtype="bf16 @accum(fp32)")
    y = tessera.tensor(rng.standard_normal((5, 129)), dtype="bf16 @accum(fp32)")

    def f(x, y):
        return tessera.ops.where(x > y, tessera.ops.tanh(x) * y, tessera.ops.exp(y) / (x + 3.0))

    monkeypatch.setenv("TESSERA_BACKEND", "reference")
    got, want = _both(f, x, y)
    np.testing.assert_array_equal(np.asarray(got.codes()), np.asarray(want.codes()))


def test_jvp_under_jit_runs_compiled(compiled):
    rng = np.random.default_rng(3)
    x = tessera.tensor(rng.standard_normal(257).astype(np.float32))
    t = tessera.tensor(np.ones(257, np.float32))

    @tessera.jit
    def tangent(x, t):
        return tessera.jvp(lambda v: tessera.ops.tanh(v) * v, (x,), (t,))[1]

    got = tangent(x, t).numpy().astype(np.float64)
    v = x.numpy().astype(np.float64)
    np.testing.assert_allclose(got, (1 - np.tanh(v) ** 2) * v + np.tanh(v), rtol=1e-5, atol=1e-6)
    assert "family = \"elementwise\"" in tangent.inspect_ir("schedule")


def test_inspect_ir_levels(compiled):
    @tessera.jit
    def f(x):
        return tessera.ops.exp(x) + 1.0

    f(tessera.tensor(np.zeros((4, 4), np.float32)))
    sched = f.inspect_ir("schedule")
    assert "schedule.kernel" in sched and 'variant = "tile"' in sched and "buffers = [-1]" in sched
    tile = f.inspect_ir("tile")
    assert "kernel = true" in tile and 'fn = "exp"' in tile and "tile.store_elem" in tile
    target = f.inspect_ir("target")
    assert "run_group" in target or "tessera" in target
    kernels = f.executable().kernels
    assert [k["family"] for k in kernels] == ["elementwise"]


def test_uncovered_op_is_a_compile_error_naming_it(compiled):
    # No template normalizes with an fp8 accumulator; under @jit that is an
    # error (eager calls warn and run on the reference).
    @tessera.jit
    def f(x):
        return tessera.ops.softmax_safe(x, axis=1)

    x = tessera.tensor(np.zeros((2, 3)), "fp8_e4m3 @accum(fp8_e4m3)")
    with pytest.raises(CompileError, match=r"graph.softmax_safe, family normalization.*accumulation type fp8_e4m3.*"
                                           r"TESSERA_BACKEND=reference"):
        f(x)


def _codes_equal(got, want):
    np.testing.assert_array_equal(np.asarray(got.codes()), np.asarray(want.codes()))


@pytest.mark.parametrize("dtype", ["fp4_e2m1 @accum(fp32)", "fp6_e2m3 @accum(fp32)", "fp6_e3m2 @accum(fp32)"])
def test_packed_float_storage_runs_compiled(dtype, monkeypatch):
    """Packed sub-byte tensors run compiled (one code per byte in the
    kernels): elementwise, reduction, GEMM, normalization and view kernels give
    the reference's codes, and the elementwise ones ml_dtypes' values."""
    import ml_dtypes

    rng = np.random.default_rng(7)
    x = tessera.tensor(rng.standard_normal((9, 131)) * 2, dtype)
    w = tessera.tensor(rng.standard_normal((131, 5)), dtype)

    def f(x, w):
        y = x * x - 1.0
        return y, tessera.ops.sum(x, axis=1), tessera.ops.matmul(x, w), tessera.ops.softmax_safe(x, axis=-1), \
            tessera.ops.transpose(y, (1, 0))[3:7]

    monkeypatch.setenv("TESSERA_BACKEND", "reference")
    got, want = _both(f, x, w)
    for g, r in zip(got, want):
        _codes_equal(g, r)
    ml = {"fp4_e2m1": ml_dtypes.float4_e2m1fn, "fp6_e2m3": ml_dtypes.float6_e2m3fn,
          "fp6_e3m2": ml_dtypes.float6_e3m2fn}[dtype.split()[0]]
    xv = x.numpy().astype(np.float64)
    sq = (xv * xv).astype(ml).astype(np.float64)  # each op rounds to the storage format
    np.testing.assert_array_equal(got[0].numpy(), (sq - 1.0).astype(ml).astype(np.float32))
    exe = tessera.jit(f)
    monkeypatch.setenv("TESSERA_BACKEND", "compiled")
    exe(x, w)
    assert all(k["variant"] in ("tile", "view") for k in exe.executable().kernels)


def test_int4_storage_runs_compiled(monkeypatch):
    rng = np.random.default_rng(8)
    a = rng.integers(-8, 8, size=(6, 40))
    b = rng.integers(-8, 8, size=(40, 3))
    x, w = tessera.tensor(a, "int4"), tessera.tensor(b, "int4")

    def f(x, w):
        return tessera.ops.sum(x, axis=1), tessera.ops.matmul(x, w), tessera.ops.maximum(x, w[0:1, 0:1])

    monkeypatch.setenv("TESSERA_BACKEND", "reference")
    got, want = _both(f, x, w)
    for g, r in zip(got, want):
        _codes_equal(g, r)
    np.testing.assert_array_equal(got[2].numpy(), np.maximum(a, b[0, 0]))


def test_toward_zero_rounding_runs_compiled(monkeypatch):
    """Results of a toward_zero policy truncate in the kernels as in the
    reference: bf16 keeps the top 16 bits of the fp32 result."""
    rng = np.random.default_rng(9)
    x = tessera.tensor(rng.standard_normal((7, 300)).astype(np.float32))

    def f(x):
        y = tessera.ops.cast(x * 3.0, "bf16 @accum(fp32) @toward_zero")
        return y, tessera.ops.sum(y, axis=1), tessera.ops.softmax_safe(y, axis=1)

    monkeypatch.setenv("TESSERA_BACKEND", "reference")
    got, want = _both(f, x)
    for g, r in zip(got, want):
        _codes_equal(g, r)
    bits = (x.numpy() * np.float32(3.0)).view(np.uint32) >> 16
    np.testing.assert_array_equal(np.asarray(got[0].codes()).reshape(7, 300), bits)


def test_schedule_is_shown_on_the_reference_path_too(monkeypatch):
    monkeypatch.setenv("TESSERA_BACKEND", "reference")

    @tessera.jit
    def f(x, w):
        return tessera.ops.relu(tessera.ops.matmul(x, w) + 1.0)

    f(tessera.tensor(np.ones((2, 3), np.float32)), tessera.tensor(np.ones((3, 4), np.float32)))
    sched = f.inspect_ir("schedule")
    assert 'family = "gemm"' in sched and 'variant = "tile"' in sched
    assert "graph.relu" in sched.split('family = "gemm"')[1]


def test_bad_backend_name(monkeypatch):
    monkeypatch.setenv("TESSERA_BACKEND", "fast")

    @tessera.jit
    def f(x):
        return x + 1.0

    with pytest.raises(ArgumentError, match="TESSERA_BACKEND is 'fast'; expected 'compiled' or 'reference'"):
        f(tessera.tensor(np.zeros(3, np.float32)))


def test_long_compiles_show_progress_and_cached_ones_stay_quiet(tmp_path):
    import os
    import subprocess
    import sys
    code = ("import numpy as np, tessera\n"
            "f = tessera.jit(lambda x: tessera.ops.exp(x) * 3.0)\n"
            "f(tessera.tensor(np.ones(4, np.float32)))\n")
    base = dict(os.environ, TESSERA_CACHE_DIR=str(tmp_path / "cache"))
    run = lambda **env: subprocess.run([sys.executable, "-c", code], env=dict(base, **env), capture_output=True,
                                       text=True, timeout=300)
    # The mark moved to 0 ms: the first (uncached) compile announces itself and its end.
    first = run(TESSERA_PROGRESS_AFTER_MS="0")
    assert first.returncode == 0, first.stderr
    assert "tessera: compiling 1 kernel of <lambda> for cpu ..." in first.stderr
    assert "tessera: compiled 1 kernel of <lambda> for cpu in" in first.stderr
    # Turned off, nothing; with the default mark, a cached compile ends before it.
    assert "tessera:" not in run(TESSERA_PROGRESS="0", TESSERA_PROGRESS_AFTER_MS="0").stderr
    assert "tessera:" not in run().stderr


def test_a_result_too_large_for_memory_is_a_located_out_of_memory_error():
    # 2^50 fp32 elements (4 PiB): beyond any address space, so the allocation
    # fails whatever the machine's overcommit policy.
    f = tessera.jit(lambda x: tessera.ops.broadcast_to(x, (1 << 20, 1 << 20, 1 << 10)) * 2.0)
    with pytest.raises(tessera.OutOfMemoryError, match=r"graph\.broadcast_to.*cannot allocate its result") as info:
        f(tessera.tensor(np.ones((1, 1, 1), np.float32)))
    assert "test_schedule.py" in str(info.value)


@pytest.mark.parametrize("shape, bshape", [((4096,), (4096,)), ((1023,), (1023,)), ((3, 1025), (1025,)),
                                           ((64, 1000), (1000,)), ((2, 3, 2048), (3, 1))])
def test_full_group_loops_match_reference_bitwise(shape, bshape, monkeypatch):
    # Groups whose accesses are all in range run a loop with plain accesses
    # (and the guard's lanes alone where a row ends inside the group); ragged
    # groups keep the masked loop. Both give the reference's bits.
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(bshape).astype(np.float32)

    def f(x, b):
        return tessera.ops.relu(x + b) * x - b

    monkeypatch.setenv("TESSERA_BACKEND", "reference")
    got, want = _both(f, tessera.tensor(x), tessera.tensor(b))
    np.testing.assert_array_equal(got.numpy().view(np.uint32), want.numpy().view(np.uint32))
    np.testing.assert_allclose(got.numpy(), np.maximum(x + b, 0) * x - b, rtol=1e-6, atol=1e-6)


def test_full_group_loop_is_emitted_for_elementwise_kernels(compiled):
    g = tessera.jit(lambda a, b: a * b + a)
    x = tessera.tensor(np.arange(5000, dtype=np.float32))
    np.testing.assert_array_equal(g(x, x).numpy(), x.numpy() * x.numpy() + x.numpy())
    target = g.inspect_ir("target")
    assert "holds in every lane of a full group" in target
    assert "tsr::load_u(" in target and "tsr::load_m(" in target  # the fast loop and the masked one


@pytest.mark.parametrize("precision", ["full", "storage"])
def test_a_gelu_gradient_sunk_into_the_product_it_meets_matches_reference_bitwise(precision, monkeypatch):
    """jit(grad) of a bf16 GELU layer: GELU' of the bf16 pre-activation z is
    computed in the epilogue of the backward product that reads it (the
    forward kernel stores z, 16 bits, instead of GELU'(z), 32), with the
    reference executor's bits."""
    rng = np.random.default_rng(5)
    p = "bf16 @accum(fp32)"
    x = tessera.tensor(rng.standard_normal((48, 40)), dtype=p)
    w1 = tessera.tensor(rng.standard_normal((40, 72)) * 0.2, dtype=p)
    w2 = tessera.tensor(rng.standard_normal((72, 24)) * 0.2, dtype=p)
    g = tessera.tensor(rng.standard_normal((48, 24)), dtype=p)

    def loss(x, w1, w2):
        return tessera.ops.sum(tessera.ops.matmul(tessera.ops.gelu(tessera.ops.matmul(x, w1)), w2) * g)

    step = tessera.grad(loss, argnums=(0, 1, 2), precision=precision)
    monkeypatch.setenv("TESSERA_BACKEND", "reference")
    got, want = _both(step, x, w1, w2)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(np.asarray(a.codes()), np.asarray(b.codes()))
    monkeypatch.setenv("TESSERA_BACKEND", "compiled")
    f = tessera.jit(step)
    f(x, w1, w2)
    # GELU and GELU' are each read from a table (tabulate-functions): the
    # forward product's epilogue reads one, a later product's the other.
    kernels = [k for k in f.inspect_ir("schedule").split("schedule.kernel")[1:] if 'family = "gemm"' in k]
    lookups = [k.split("schedule.yield")[0].count("graph.lookup") for k in kernels]
    assert lookups[0] == 1 and sum(lookups[1:]) == 1, lookups


@pytest.mark.parametrize("m,n", [(700, 300), (64, 1000), (1000, 40)])
def test_gemm_tiles_in_bands_cover_every_tile_once(m, n, monkeypatch):
    """The GEMM's groups take their tiles in bands of 8 tile rows (the last
    band shorter); every output tile is computed once, with the reference's
    bits."""
    rng = np.random.default_rng(m + n)
    a = tessera.tensor(rng.standard_normal((m, 48)).astype(np.float32))
    b = tessera.tensor(rng.standard_normal((48, n)).astype(np.float32))
    monkeypatch.setenv("TESSERA_BACKEND", "reference")
    got, want = _both(lambda a, b: tessera.ops.matmul(a, b) + 1.0, a, b)
    np.testing.assert_array_equal(got.numpy().view(np.uint32), want.numpy().view(np.uint32))


def test_long_sums_to_few_outputs_split_with_the_reference_bits(monkeypatch):
    """A loss summed to one value and a few long column sums split at the
    canonical order's superblocks (docs/design/0036): the reference
    executor's bits, split or not (TESSERA_SPLIT_SUMS=0), and numpy's float64
    sums within fp32 rounding."""
    rng = np.random.default_rng(3)
    x = tessera.tensor(rng.standard_normal((3, 70001)).astype(np.float32))
    c = tessera.tensor(rng.standard_normal((70001, 3)).astype(np.float32))

    def f(x, c):
        return tessera.ops.mean(x * x), tessera.ops.sum(c, axis=0) + 1.0

    monkeypatch.setenv("TESSERA_BACKEND", "reference")
    got, want = _both(f, x, c)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy().view(np.uint32), w.numpy().view(np.uint32))
    monkeypatch.setenv("TESSERA_BACKEND", "compiled")
    split = tessera.jit(f)
    split(x, c)
    assert "graph.superblock_sums" in split.inspect_ir("schedule")
    monkeypatch.setenv("TESSERA_SPLIT_SUMS", "0")
    whole = tessera.jit(f)
    for g, w in zip(whole(x, c), want):
        np.testing.assert_array_equal(g.numpy().view(np.uint32), w.numpy().view(np.uint32))
    assert "superblock" not in whole.inspect_ir("schedule")
    xn, cn = x.numpy().astype(np.float64), c.numpy().astype(np.float64)
    np.testing.assert_allclose(got[0].numpy(), (xn * xn).mean(), rtol=1e-5)
    np.testing.assert_allclose(got[1].numpy(), cn.sum(axis=0) + 1.0, rtol=1e-4, atol=1e-3)


# fp16 takes bf16's narrow path: it runs on the two small shapes only (the
# large ones are the suite's slowest cases, the reference executor's sums).
@pytest.mark.parametrize("shape,policy", [(s, p) for s in [(300, 64), (4096, 1000), (257, 7), (1024, 96)]
                                          for p in ["fp32", "bf16 @accum(fp32)", "fp16 @accum(fp32)"]
                                          if not (p.startswith("fp16") and s[0] >= 1024)])
def test_column_sums_split_at_blocks_with_their_prologue_keep_the_reference_bits(monkeypatch, shape, policy):
    """Column sums split at their blocks (graph.block_sums, a group per block of
    rows, then graph.block_total; docs/design/0039), the elementwise ops computing
    the summed operand fused into the block sums as their prologue, which stores
    the values the function also returns: the reference executor's bits for sums,
    means and a consumer, against the unsplit column form, and numpy's float64
    sums. TESSERA_COLUMN_PROLOGUE=1 turns the prologue on (off by default)."""
    rng = np.random.default_rng(shape[0] * shape[1])
    x = tessera.tensor((rng.standard_normal(shape) * 3.0).astype(np.float32), policy)
    b = tessera.tensor(rng.standard_normal(shape[1:]).astype(np.float32), policy)

    def f(x, b):
        d = x * b + x
        return d, tessera.ops.sum(d, axis=0), tessera.ops.mean(x, axis=0, keepdims=True), tessera.ops.sum(x, axis=0) * 2.0

    monkeypatch.setenv("TESSERA_BACKEND", "reference")
    got, want = _both(f, x, b)
    for g, w in zip(got, want):
        assert g.numpy().tobytes() == w.numpy().tobytes()
    monkeypatch.setenv("TESSERA_BACKEND", "compiled")
    default = tessera.jit(f)
    default(x, b)
    assert "graph.block_sums" in default.inspect_ir("schedule")  # split by default
    monkeypatch.setenv("TESSERA_COLUMN_BLOCKS", "0")
    whole = tessera.jit(f)
    for k, (g, w) in enumerate(zip(whole(x, b), want)):
        assert g.numpy().tobytes() == w.numpy().tobytes(), f"column form, result {k}"
    assert "graph.block_sums" not in whole.inspect_ir("schedule")
    monkeypatch.delenv("TESSERA_COLUMN_BLOCKS")
    monkeypatch.setenv("TESSERA_COLUMN_PROLOGUE", "1")
    split = tessera.jit(f)
    for k, (g, w) in enumerate(zip(split(x, b), want)):
        assert g.numpy().tobytes() == w.numpy().tobytes(), f"result {k}"
    sched = split.inspect_ir("schedule")
    kernels = [line for line in sched.splitlines() if "schedule.kernel" in line]
    # Each sum is a block-sums kernel and a total; d is computed and stored in its sum's first kernel.
    assert sched.count("graph.block_sums") == 3 and sched.count("graph.block_total") == 3, sched
    assert len(kernels) == 6, "\n".join(kernels)
    assert not any('"elementwise"' in line for line in kernels), "d is computed in its block sums' kernel"
    xd = x.numpy().astype(np.float64)
    np.testing.assert_allclose(np.asarray(got[2].numpy(), np.float64)[0], xd.mean(axis=0), rtol=2e-2, atol=1e-2)


def test_column_block_knobs_reject_bad_values(monkeypatch):
    x = tessera.tensor(np.ones((300, 4), np.float32))
    for knob in ("TESSERA_COLUMN_BLOCKS", "TESSERA_COLUMN_PROLOGUE"):
        monkeypatch.setenv(knob, "2")
        with pytest.raises(tessera.ArgumentError, match=f"{knob} is '2'; expected 1"):
            tessera.jit(lambda x: tessera.ops.sum(x * 2.0, axis=0))(x)
        monkeypatch.delenv(knob)
    # A prologue needs the block sums it fuses into: asking for both off and on is an error, not ignored.
    monkeypatch.setenv("TESSERA_COLUMN_BLOCKS", "0")
    monkeypatch.setenv("TESSERA_COLUMN_PROLOGUE", "1")
    with pytest.raises(tessera.ArgumentError, match="TESSERA_COLUMN_BLOCKS=0 turns off"):
        tessera.jit(lambda x: tessera.ops.sum(x * 2.0, axis=0))(x)
