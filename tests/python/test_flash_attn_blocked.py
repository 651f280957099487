"""The blocked tensor-core attention kernels (schedule/templates/attention.cpp, `attn_blocked`):
the forward (Q blocks against K/V blocks through tile.mma, the online softmax on whole tiles) and
the backward (dq per query block, dk/dv per key block, fixed-order sums). The CPU and the CUDA
Tile IR target take it by default (fp32 too on the CPU, docs/design/0044); the fixture below sets
TESSERA_ATTENTION_BLOCKED=1 all the same, so these tests check its recipe (docs/design/0015-flash-attention.md, "The blocked forward") against float64 numpy.

Tolerance: P is rounded to the inputs' dtype before the second product (relative error 2^-9 for
bf16 per probability), so |o - o_exact| <= 2^-9 max|v| from that alone, on top of the result's own
rounding (2^-9 |o|); the bound checked is twice both.
"""
import secrets

import numpy as np
import pytest

import tessera
from test_flash_attn import SEED as INPUT_SEED
from test_flash_attn import attention_np, fp8_inputs, inputs, rng, run

SEED = secrets.randbits(32)

# (B, Hq, Hkv, Sq, Sk, D): GQA, Sq < Sk (a KV cache), several blocks of each, every D.
CASES = [
    (1, 4, 2, 128, 128, 64),
    (2, 2, 1, 128, 256, 128),
    (1, 2, 2, 256, 192, 64),
    (1, 2, 1, 64, 128, 256),
]


@pytest.fixture
def blocked(monkeypatch):
    monkeypatch.setenv("TESSERA_ATTENTION_BLOCKED", "1")


def check(got, q, k, v, causal, dtype):
    want = attention_np(q, k, v, causal, q.shape[-1] ** -0.5)
    within(got, want, np.abs(v).max(), {"bf16": 2.0 ** -8, "fp16": 2.0 ** -11, "fp32": 2.0 ** -19}[dtype])


def within(got, want, vmax, eps):
    """|got - want| <= 2 eps (|want| + max|v|): the result's rounding and P's, twice each."""
    err = np.abs(got.astype(np.float64) - want)
    tol = 2 * eps * (np.abs(want) + vmax)
    assert np.all(err <= tol), f"max error {err.max():.3g}, excess {(err - tol).max():.3g} (seed {SEED})"


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("case", CASES)
def test_blocked_forward_against_float64_numpy(blocked, case, causal, dtype):
    b, hq, hkv, sq, sk, d = case
    if causal and sq > sk:
        pytest.skip("the causal rule needs Sq <= Sk")
    q, k, v = inputs(*case, dtype, salt=(SEED + hash(case)) % 1000)
    check(run(q, k, v, dtype, causal=causal).numpy(), q, k, v, causal, dtype)


def test_blocked_form_is_the_one_that_ran(blocked, monkeypatch):
    # The blocked recipe rounds P to bf16: its bits differ from the lane form's (the reference's),
    # so equal bits would mean the knob was ignored.
    q, k, v = inputs(1, 2, 2, 128, 128, 64, "bf16", salt=7)
    fast = run(q, k, v, "bf16", causal=True).numpy()
    monkeypatch.setenv("TESSERA_ATTENTION_BLOCKED", "0")
    lane = run(q, k, v, "bf16", causal=True).numpy()
    assert fast.tobytes() != lane.tobytes()
    monkeypatch.setenv("TESSERA_EAGER", "reference")
    assert run(q, k, v, "bf16", causal=True).numpy().tobytes() == lane.tobytes()


def test_blocked_forward_repeats_bit_for_bit(blocked):
    q, k, v = inputs(2, 4, 2, 128, 256, 64, "bf16", salt=8)
    first = run(q, k, v, "bf16", causal=True).numpy().tobytes()
    for _ in range(9):
        assert run(q, k, v, "bf16", causal=True).numpy().tobytes() == first


def test_jit_kernel_is_the_blocked_tile_program(blocked):
    q, k, v = inputs(1, 2, 1, 128, 128, 128, "bf16", salt=9)

    @tessera.jit
    def f(q, k, v):
        return tessera.ops.flash_attn(q, k, v, causal=True)

    args = [tessera.tensor(x, dtype="bf16") for x in (q, k, v)]
    check(f(*args).numpy(), q, k, v, True, "bf16")
    tile = f.inspect_ir("tile")
    for op in ("tile.mma", "tile.tile_reduce", "tile.tile_causal_fill", "tile.tile_unary"):
        assert op in tile, op
    assert "tile.load_elem" not in tile  # no scalar lanes


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_the_cpu_takes_the_blocked_form_by_default(monkeypatch, dtype):
    # No knob: the CPU's attention forward and backward are the blocked tile programs (fp32 too, its
    # products at fp32 there), with their own bits; TESSERA_ATTENTION_BLOCKED=0 gives the lane
    # kernels, which are the reference's bits.
    monkeypatch.delenv("TESSERA_ATTENTION_BLOCKED", raising=False)
    q, k, v = inputs(1, 2, 1, 128, 192, 64, dtype, salt=10)
    w = tessera.tensor(np.random.default_rng([SEED, 11]).standard_normal(q.shape), dtype=dtype)
    g = tessera.jit(tessera.value_and_grad(lambda q, k, v: tessera.ops.sum(tessera.ops.flash_attn(q, k, v, causal=True) * w),
                                           argnums=(0, 1, 2)))
    args = [tessera.tensor(x, dtype=dtype) for x in (q, k, v)]
    fast = [t.numpy() for t in [g(*args)[0], *g(*args)[1]]]
    attention = [fn for fn in g.inspect_ir("tile").split("func @")[1:] if "tile.mma" in fn]
    assert len(attention) == 2 and all("tile.load_elem" not in fn for fn in attention)
    monkeypatch.setenv("TESSERA_ATTENTION_BLOCKED", "0")
    lane = tessera.jit(tessera.value_and_grad(lambda q, k, v: tessera.ops.sum(tessera.ops.flash_attn(q, k, v, causal=True) * w),
                                              argnums=(0, 1, 2)))
    slow = [t.numpy() for t in [lane(*args)[0], *lane(*args)[1]]]
    assert fast[1].tobytes() != slow[1].tobytes()
    tol = 1e-5 if dtype == "fp32" else 2.0 ** -6
    # The value sums 16384 products whose attention factors (each at most max|v|) differ between
    # the forms by rounding, with random signs: the difference grows like tol max|v| ||w||_2, while
    # cancellation can make the sum itself small, so its bound scales with those, not with it.
    bounds = [tol * np.abs(v).max() * np.linalg.norm(w.numpy().astype(np.float64))]
    bounds += [tol * max(1.0, np.abs(s).max()) for s in slow[1:]]
    for f, s, bound in zip(fast, slow, bounds):
        assert np.abs(f.astype(np.float64) - s).max() <= bound, f"seeds {SEED} (w), {INPUT_SEED} (q, k, v)"


@pytest.mark.parametrize("sq, sk", [(16, 16), (40, 24), (8, 64)])
def test_short_cpu_attention_takes_fitted_blocks_with_the_full_blocks_bits(monkeypatch, sq, sk):
    """Queries (keys) that fit in one block of 64 take the smallest power of two from 16 that holds
    them, forward and backward (ragged lengths padded to it): the schedule says so, and the values
    and gradients are the bits of the 64 x 64 blocks (TESSERA_ATTENTION_TILE=64,64), whose padding
    only adds exact zeros."""
    monkeypatch.delenv("TESSERA_ATTENTION_BLOCKED", raising=False)
    q, k, v = inputs(2, 1, 1, sq, sk, 128, "fp32", salt=12)
    w = tessera.tensor(np.random.default_rng([SEED, 13]).standard_normal(q.shape).astype(np.float32))
    args = [tessera.tensor(x, dtype="fp32") for x in (q, k, v)]

    def results():
        g = tessera.jit(tessera.value_and_grad(
            lambda q, k, v: tessera.ops.sum(tessera.ops.flash_attn(q, k, v, causal=sq <= sk) * w), argnums=(0, 1, 2)))
        value, grads = g(*args)
        return [value.numpy(), *(t.numpy() for t in grads)], g.inspect_ir("tile")

    # The score tiles (rows x keys) of the forward's and the backward's blocked programs.
    fitted, tiles = results()
    fit = lambda n: max(16, 1 << (n - 1).bit_length())
    assert f"tile<[{fit(sq)}, {fit(sk)}]" in tiles and "tile<[64, 64]" not in tiles
    monkeypatch.setenv("TESSERA_ATTENTION_TILE", "64,64")
    full, tiles64 = results()
    assert "tile<[64, 64]" in tiles64
    for a, b in zip(fitted, full):
        assert a.tobytes() == b.tobytes(), f"seeds {SEED} (w), {INPUT_SEED} (q, k, v)"


@pytest.mark.parametrize("causal", [False, True])
def test_blocked_fp32_backward_against_jax(blocked, causal):
    # fp32 inputs (the CPU only): P and dS stay fp32, so the gradients are within fp32's own error.
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    from test_flash_attn import attention_jax

    case = (1, 4, 2, 128, 192, 64)
    q, k, v = inputs(*case, "fp32", salt=(SEED + 13) % 1000)
    wn = np.random.default_rng([SEED, 14]).standard_normal(q.shape)
    w = tessera.tensor(wn.astype(np.float32))

    def loss(q, k, v):
        return tessera.ops.sum(tessera.ops.flash_attn(q, k, v, causal=causal) * w)
    got = tessera.grad(loss, argnums=(0, 1, 2))(*(tessera.tensor(x, dtype="fp32") for x in (q, k, v)))
    jax.config.update("jax_enable_x64", True)
    want = jax.grad(lambda q, k, v: jnp.sum(attention_jax(jnp, q, k, v, causal, 0.125) * wn),
                    argnums=(0, 1, 2))(*(jnp.asarray(x, dtype=jnp.float64) for x in (q, k, v)))
    for name, g, r in zip(("dq", "dk", "dv"), got, want):
        r = np.asarray(r, dtype=np.float64)
        err = np.abs(g.numpy().astype(np.float64) - r)
        assert np.all(err <= 1e-5 * np.abs(r).max()), f"{name}: max error {err.max():.3g} (seed {SEED})"


def bf16_weights(shape, salt):
    return tessera.tensor(np.random.default_rng([SEED, salt]).standard_normal(shape), dtype="bf16")


def blocked_grads(q, k, v, w, causal):
    """tessera.grad of sum(flash_attn(q, k, v) * w) (w bf16, so do is o's dtype): dq, dk, dv."""
    def loss(q, k, v):
        return tessera.ops.sum(tessera.ops.flash_attn(q, k, v, causal=causal) * w)
    return tessera.grad(loss, argnums=(0, 1, 2))(*(tessera.tensor(x, dtype="bf16") for x in (q, k, v)))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("case", [(1, 2, 1, 128, 128, 64), (1, 4, 2, 128, 256, 64), (1, 2, 2, 256, 256, 128),
                                  (1, 2, 1, 64, 128, 256)])
def test_blocked_backward_against_jax(blocked, case, causal):
    # The blocked backward (P and dS rounded to bf16 before their products, do rounded to bf16 by
    # the VJP) against float32 JAX on the same bf16 inputs: within 2^-6 of each gradient's largest.
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    from test_flash_attn import attention_jax

    q, k, v = inputs(*case, "bf16", salt=(SEED + 11) % 1000)
    w = bf16_weights(q.shape, 12)
    got = blocked_grads(q, k, v, w, causal)
    wn = w.numpy().astype(np.float64)
    want = jax.grad(lambda q, k, v: jnp.sum(attention_jax(jnp, q, k, v, causal, case[-1] ** -0.5) * wn),
                    argnums=(0, 1, 2))(*(jnp.asarray(x) for x in (q, k, v)))
    for name, g, r in zip(("dq", "dk", "dv"), got, want):
        assert g.dtype == "fp32"  # the VJP writes fp32 tangents
        r = np.asarray(r, dtype=np.float64)
        err = np.abs(g.numpy().astype(np.float64) - r)
        assert np.all(err <= 2.0 ** -6 * np.abs(r).max()), f"{name}: max error {err.max():.3g} (seed {SEED})"


def test_blocked_backward_is_the_blocked_tile_program_and_repeats(blocked):
    q, k, v = inputs(1, 4, 2, 128, 128, 64, "bf16", salt=14)
    w = bf16_weights(q.shape, 15)

    def loss(q, k, v):
        return tessera.ops.sum(tessera.ops.flash_attn(q, k, v, causal=True) * w)

    g = tessera.jit(tessera.grad(loss, argnums=(0, 1, 2)))
    args = [tessera.tensor(x, dtype="bf16") for x in (q, k, v)]
    first = [t.numpy().tobytes() for t in g(*args)]
    for _ in range(9):
        assert [t.numpy().tobytes() for t in g(*args)] == first
    attention = [f for f in g.inspect_ir("tile").split("func @")[1:] if "tile.mma" in f]
    assert len(attention) == 2  # the forward and the backward, both blocked: no scalar lanes
    assert all("tile.load_elem" not in f for f in attention)
    # The forward reduces its score tiles by rows; the backward reads delta = rowsum(do * o),
    # a graph.sum before it, and reduces nothing itself.
    forward, backward = sorted(attention, key=lambda f: "tile.tile_reduce" in f, reverse=True)
    assert "tile.tile_reduce" in forward and "tile.tile_reduce" not in backward
    graph = g.inspect_ir("graph")
    assert "out = policy<fp32" in graph  # bf16 operands, fp32 gradients
    bwd = [ln for ln in graph.splitlines() if "graph.flash_attn_bwd" in ln][0]
    delta = bwd.split("graph.flash_attn_bwd ")[1].split(", ")[3]
    assert any(ln.strip().startswith(delta + " = graph.sum") for ln in graph.splitlines()), graph


def test_bf16_vjp_keeps_operands_at_their_storage():
    # Without the knob (the lane backward): the same op form, bf16 operands and fp32 gradients.
    q, k, v = inputs(1, 2, 1, 8, 8, 64, "bf16", salt=16)
    w = bf16_weights(q.shape, 17)

    def loss(q, k, v):
        return tessera.ops.sum(tessera.ops.flash_attn(q, k, v) * w)

    g = tessera.jit(tessera.grad(loss, argnums=(0, 1, 2)))
    out = g(*(tessera.tensor(x, dtype="bf16") for x in (q, k, v)))
    assert [t.dtype for t in out] == ["fp32"] * 3
    line = [ln for ln in g.inspect_ir("graph").splitlines() if "graph.flash_attn_bwd" in ln][0]
    assert "graph.flash_attn_bwd %q, %k, %v," in line and "out = policy<fp32" in line  # no casts of the primals


def test_the_knob_takes_only_0_or_1(monkeypatch):
    monkeypatch.setenv("TESSERA_ATTENTION_BLOCKED", "yes")
    q, k, v = inputs(1, 2, 2, 64, 64, 64, "bf16", salt=13)
    with pytest.raises(tessera.errors.ArgumentError, match="TESSERA_ATTENTION_BLOCKED is 'yes'; expected 0 or 1"):
        run(q, k, v, "bf16")


# ---- ragged lengths: padded to whole blocks (schedule/passes/pad_ragged_attention.cpp) -----------

# Lengths that are not multiples of the 64 x 64 blocks: both ragged, a decode-like Sq < Sk, one
# block plus a row, a length under one block, GQA and D = 128.
RAGGED = [(1, 2, 1, 100, 77, 64), (2, 4, 2, 70, 130, 128), (1, 2, 2, 65, 65, 64), (1, 2, 1, 33, 500, 64)]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("case", RAGGED)
def test_ragged_lengths_run_the_blocked_forward(blocked, case, causal):
    b, hq, hkv, sq, sk, d = case
    if causal and sq > sk:
        pytest.skip("the causal rule needs Sq <= Sk")
    q, k, v = inputs(*case, "bf16", salt=(SEED + 41) % 1000)

    @tessera.jit
    def f(q, k, v):
        return tessera.ops.flash_attn(q, k, v, causal=causal)

    args = [tessera.tensor(x, dtype="bf16") for x in (q, k, v)]
    got = f(*args).numpy()
    assert got.shape == (b, hq, sq, d)
    check(got, q, k, v, causal, "bf16")
    schedule = f.inspect_ir("schedule")
    assert "graph.slice_embed" in schedule and f"valid_queries = {sq}" in schedule and f"valid_keys = {sk}" in schedule
    attention = [fn for fn in f.inspect_ir("tile").split("func @")[1:] if "tile.mma" in fn]
    assert len(attention) == 1 and "tile.load_elem" not in attention[0]  # blocked, no scalar lanes


def test_ragged_lengths_stay_on_the_lane_kernels_without_the_blocked_form(monkeypatch):
    # The lane kernels (TESSERA_ATTENTION_BLOCKED=0, the reference's bits): nothing to pad.
    monkeypatch.setenv("TESSERA_ATTENTION_BLOCKED", "0")
    q, k, v = inputs(1, 2, 1, 100, 77, 64, "bf16", salt=42)

    @tessera.jit
    def f(q, k, v):
        return tessera.ops.flash_attn(q, k, v)

    args = [tessera.tensor(x, dtype="bf16") for x in (q, k, v)]
    lane = f(*args).numpy()
    assert "graph.slice_embed" not in f.inspect_ir("schedule")
    assert lane.tobytes() == run(q, k, v, "bf16").numpy().tobytes()


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("case", RAGGED[:3])
def test_ragged_backward_against_jax(blocked, case, causal):
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    from test_flash_attn import attention_jax

    if causal and case[3] > case[4]:
        pytest.skip("the causal rule needs Sq <= Sk")
    q, k, v = inputs(*case, "bf16", salt=(SEED + 43) % 1000)
    w = bf16_weights(q.shape, 44)

    def loss(q, k, v):
        return tessera.ops.sum(tessera.ops.flash_attn(q, k, v, causal=causal) * w)

    g = tessera.jit(tessera.grad(loss, argnums=(0, 1, 2)))
    args = [tessera.tensor(x, dtype="bf16") for x in (q, k, v)]
    got = g(*args)
    for _ in range(2):
        assert [t.numpy().tobytes() for t in g(*args)] == [t.numpy().tobytes() for t in got]
    kernels = [fn for fn in g.inspect_ir("tile").split("func @")[1:] if "tile.mma" in fn]
    assert len(kernels) == 2  # the forward and the backward, both blocked
    wn = w.numpy().astype(np.float64)
    want = jax.grad(lambda q, k, v: jnp.sum(attention_jax(jnp, q, k, v, causal, case[-1] ** -0.5) * wn),
                    argnums=(0, 1, 2))(*(jnp.asarray(x) for x in (q, k, v)))
    for name, t, r in zip(("dq", "dk", "dv"), got, want):
        r = np.asarray(r, dtype=np.float64)
        assert t.shape == r.shape
        err = np.abs(t.numpy().astype(np.float64) - r)
        assert np.all(err <= 2.0 ** -6 * np.abs(r).max()), f"{name}: max error {err.max():.3g} (seed {SEED})"


# ---- fp8 forwards: codes decoded to bf16 tiles at load (exact), the bf16 products ------------------

FP8_CASES = [(1, 4, 2, 128, 192, 64), (1, 2, 1, 100, 77, 128), (1, 2, 2, 24, 40, 64)]


def check_fp8(o, values, causal, scale=0.125):
    # P rounded to bf16 before the second product (2^-9 max|v|), the result's own rounding (2^-9 |o|
    # for bf16): twice both, as check() allows.
    want = attention_np(*values, causal, scale)
    within(o.numpy(), want, np.abs(values[2]).max(), 2.0 ** -8 if o.dtype == "bf16" else 2.0 ** -9)


@pytest.mark.parametrize("dtype", ["fp8_e4m3", "fp8_e5m2"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("case", FP8_CASES)
def test_blocked_fp8_forward_against_float64_numpy(blocked, case, causal, dtype):
    b, hq, hkv, sq, sk, d = case
    if causal and sq > sk:
        pytest.skip("the causal rule needs Sq <= Sk")
    scales = (0.5, 0.25, 2.0)
    (q, qv), (k, kv), (v, vv) = fp8_inputs(dtype, (b, hq, sq, d), (b, hkv, sk, d), scales,
                                           salt=(SEED + hash(case)) % 1000)
    scale = d ** -0.5
    o = tessera.ops.flash_attn(q, k, v, causal=causal, descale=scales)
    assert o.dtype == "bf16" and o.shape == (b, hq, sq, d)
    check_fp8(o, (qv, kv, vv), causal, scale)
    wide = tessera.ops.flash_attn(q, k, v, causal=causal, descale=scales, out_dtype="fp32")
    check_fp8(wide, (qv, kv, vv), causal, scale)


def test_blocked_fp8_forward_is_the_blocked_tile_program(blocked, monkeypatch):
    scales = (0.5, 0.25, 2.0)
    (q, _), (k, _), (v, _) = fp8_inputs("fp8_e4m3", (1, 2, 128, 64), (1, 2, 128, 64), scales, salt=43)
    f = tessera.jit(lambda q, k, v: tessera.ops.flash_attn(q, k, v, causal=True, descale=scales))
    fast = f(q, k, v).numpy()
    attention = [fn for fn in f.inspect_ir("tile").split("func @")[1:] if "tile.mma" in fn]
    assert len(attention) == 1 and "tile.load_elem" not in attention[0]  # tensor cores, no scalar lanes
    assert "fp8_e4m3" in attention[0] and "bf16" in attention[0]
    for _ in range(3):
        assert f(q, k, v).numpy().tobytes() == fast.tobytes()
    monkeypatch.setenv("TESSERA_ATTENTION_BLOCKED", "0")
    lane = tessera.ops.flash_attn(q, k, v, causal=True, descale=scales).numpy()
    assert lane.tobytes() != fast.tobytes()  # P rounded to bf16: the knob was not ignored


@pytest.mark.parametrize("sq", [128, 100, 256])
def test_blocked_fp8_forward_is_the_bf16_forward_of_the_decoded_codes(blocked, sq):
    # Short problems decode fp8 tiles in the kernel; from 256 query rows decode-fp8-attention casts
    # q, k and v to bf16 ahead. Both run the bf16 kernel's arithmetic on the same (exact) values.
    scales = (0.5, 0.25, 2.0)
    (q, _), (k, _), (v, _) = fp8_inputs("fp8_e5m2", (1, 2, sq, 64), (1, 2, 320, 64), scales, salt=44)
    f = tessera.jit(lambda q, k, v: tessera.ops.flash_attn(q, k, v, causal=True, descale=scales))
    got = f(q, k, v).numpy()
    bf16 = [tessera.ops.cast(x, "bf16") for x in (q, k, v)]
    want = tessera.ops.flash_attn(*bf16, causal=True, descale=scales, out_dtype="bf16").numpy()
    assert got.tobytes() == want.tobytes()
    ahead = "graph.cast" in f.inspect_ir("schedule")
    assert ahead == (sq >= 256)


# ---- decoding: split-decode-attention (docs/design/0045) -------------------------------------------

# (B, Hq, Hkv, Sq, Sk, D, chunks): grouped heads folded into rows with the keys in 32 chunks of 128;
# three query rows per head and a ragged chunk (Sk = 4100 in 10 chunks of 410, each padded to 448);
# no grouping, 35 chunks of 128.
DECODE = [(1, 8, 2, 1, 4096, 128, 32), (2, 4, 1, 3, 4100, 64, 10), (1, 4, 4, 1, 4480, 64, 35)]


def decode_attention(causal):
    return tessera.jit(lambda q, k, v: tessera.ops.flash_attn(q, k, v, causal=causal))


@pytest.mark.parametrize("case", DECODE)
def test_decode_attention_folds_heads_and_splits_keys(case):
    # The CPU's default (the blocked form): no fixture needed.
    b, hq, hkv, sq, sk, d, chunks = case
    q, k, v = inputs(*case[:6], "bf16", salt=(SEED + 51) % 1000)
    f = decode_attention(False)
    args = [tessera.tensor(x, dtype="bf16") for x in (q, k, v)]
    got = f(*args).numpy()
    assert got.shape == (b, hq, sq, d)
    check(got, q, k, v, False, "bf16")
    for _ in range(2):
        assert f(*args).numpy().tobytes() == got.tobytes()
    schedule = f.inspect_ir("schedule")
    # One attention op over Hkv * chunks heads of Sk / chunks keys with fp32 partials, then the combine.
    assert f"tensor<[{b}, {hkv * chunks}, {sk // chunks}, {d}] bf16 @accum(fp32)>" in schedule
    assert "out = policy<fp32" in schedule and "graph.max" in schedule


def test_decode_attention_with_one_causal_row_is_the_unmasked_one():
    # Bottom-right alignment: the one query row sees every key, so the causal mask hides nothing.
    q, k, v = inputs(1, 8, 2, 1, 4096, 128, "bf16", salt=(SEED + 52) % 1000)
    args = [tessera.tensor(x, dtype="bf16") for x in (q, k, v)]
    assert decode_attention(True)(*args).numpy().tobytes() == decode_attention(False)(*args).numpy().tobytes()


def test_decode_attention_with_a_short_cache_folds_heads_without_splitting():
    q, k, v = inputs(1, 8, 2, 1, 1024, 128, "bf16", salt=(SEED + 57) % 1000)
    f = decode_attention(False)
    check(f(*(tessera.tensor(x, dtype="bf16") for x in (q, k, v))).numpy(), q, k, v, False, "bf16")
    schedule = f.inspect_ir("schedule")
    assert "shape = shape<[1, 2, 4, 128]>" in schedule and "graph.broadcast_to" not in schedule
    # The CPU takes blocks of 16 query rows for the 4 folded rows (64 would be 60 rows of padding).
    assert "tensor<[1, 2, 16, 128]" in schedule


def test_decode_attention_off_the_decode_shapes_is_not_split(blocked):
    # Causal with several query rows (rows of one group would see different keys), and more folded
    # rows than a query block: the op stays as it was.
    for causal, case in ((True, (1, 8, 2, 3, 4096, 64)), (False, (1, 8, 1, 16, 4096, 64))):
        q, k, v = inputs(*case, "bf16", salt=53)
        f = decode_attention(causal)
        check(f(*(tessera.tensor(x, dtype="bf16") for x in (q, k, v))).numpy(), q, k, v, causal, "bf16")
        assert "graph.broadcast_to" not in f.inspect_ir("schedule")


def test_decode_attention_gradient_against_jax():
    # The backward reads the combined logsumexp: a wrong combine shows in every gradient.
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    from test_flash_attn import attention_jax

    case = DECODE[0][:6]
    q, k, v = inputs(*case, "bf16", salt=(SEED + 54) % 1000)
    w = bf16_weights(q.shape, 55)
    got = tessera.jit(tessera.grad(lambda q, k, v: tessera.ops.sum(tessera.ops.flash_attn(q, k, v) * w),
                                   argnums=(0, 1, 2)))(*(tessera.tensor(x, dtype="bf16") for x in (q, k, v)))
    wn = w.numpy().astype(np.float64)
    want = jax.grad(lambda q, k, v: jnp.sum(attention_jax(jnp, q, k, v, False, case[-1] ** -0.5) * wn),
                    argnums=(0, 1, 2))(*(jnp.asarray(x) for x in (q, k, v)))
    for name, t, r in zip(("dq", "dk", "dv"), got, want):
        r = np.asarray(r, dtype=np.float64)
        err = np.abs(t.numpy().astype(np.float64) - r)
        assert np.all(err <= 2.0 ** -6 * np.abs(r).max()), f"{name}: max error {err.max():.3g} (seed {SEED})"


# ---- GPU ------------------------------------------------------------------------------------------

from tessera import _C  # noqa: E402

TILEIRAS_OK = _C._tileiras()[0]


def gpu_forward_check(q, k, v, causal, dtype):
    args = [tessera.tensor(x, dtype=dtype).to("cuda:0") for x in (q, k, v)]

    @tessera.jit
    def f(q, k, v):
        return tessera.ops.flash_attn(q, k, v, causal=causal)

    first = f(*args).to("cpu").numpy()
    check(first, q, k, v, causal, dtype)
    for _ in range(9):
        assert f(*args).to("cpu").numpy().tobytes() == first.tobytes()
    return f


@pytest.mark.skipif(not _C._cuda_available() or not TILEIRAS_OK, reason="needs a Hopper GPU and tileiras")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("case", [(2, 4, 2, 256, 512, 128), (1, 2, 2, 384, 384, 64), (1, 4, 2, 128, 256, 256)])
def test_tile_ir_takes_the_blocked_forward_on_hopper(case, causal):
    q, k, v = inputs(*case, "bf16", salt=(SEED + 31) % 1000)
    f = gpu_forward_check(q, k, v, causal, "bf16")
    kernels = [kk for kk in f.executable().kernels if kk["family"] == "attention"]
    assert kernels and all(kk["variant"] == "tile_ir" for kk in kernels), kernels


@pytest.mark.skipif(not _C._cuda_available() or not TILEIRAS_OK, reason="needs a Hopper GPU and tileiras")
@pytest.mark.parametrize("dtype", ["fp8_e4m3", "fp8_e5m2"])
@pytest.mark.parametrize("case", [(1, 4, 2, 256, 384, 128), (1, 2, 1, 100, 77, 64)])
def test_tile_ir_takes_the_blocked_fp8_forward_on_hopper(case, dtype):
    b, hq, hkv, sq, sk, d = case
    scales = (0.5, 0.25, 2.0)
    (q, qv), (k, kv), (v, vv) = fp8_inputs(dtype, (b, hq, sq, d), (b, hkv, sk, d), scales, salt=(SEED + 33) % 1000)
    f = tessera.jit(lambda q, k, v: tessera.ops.flash_attn(q, k, v, descale=scales))
    args = [x.to("cuda:0") for x in (q, k, v)]
    first = f(*args).to("cpu")
    check_fp8(first, (qv, kv, vv), False, d ** -0.5)
    for _ in range(9):
        assert f(*args).to("cpu").numpy().tobytes() == first.numpy().tobytes()
    kernels = [kk for kk in f.executable().kernels if kk["family"] == "attention"]
    assert kernels and all(kk["variant"] == "tile_ir" for kk in kernels), kernels


@pytest.mark.skipif(not _C._cuda_available() or not TILEIRAS_OK, reason="needs a Hopper GPU and tileiras")
@pytest.mark.parametrize("case", DECODE)
def test_decode_attention_on_hopper(case):
    q, k, v = inputs(*case[:6], "bf16", salt=(SEED + 56) % 1000)
    f = gpu_forward_check(q, k, v, False, "bf16")
    kernels = [kk for kk in f.executable().kernels if kk["family"] == "attention"]
    assert len(kernels) == 1 and kernels[0]["variant"] == "tile_ir", kernels
    assert "graph.broadcast_to" in f.inspect_ir("schedule")


@pytest.mark.skipif(not _C._cuda_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("case", [(2, 4, 2, 128, 192, 64, True), (1, 2, 1, 100, 77, 128, False),
                                  (1, 2, 2, 16, 40, 64, True)])
def test_fp32_attention_on_the_gpu_gives_the_cpus_bits(monkeypatch, case):
    """With no knob, fp32 attention takes the blocked kernels on a GPU as on the CPU (the PTX
    path: exact fp32 FMAs in k order, the CPU's tile mma; docs/design/0052), with the CPU's
    blocks (16 x 64 for the short one), so the forward, the loss and the three gradients are the
    CPU's bits, a ragged (padded) problem included, and they repeat over 10 runs."""
    monkeypatch.delenv("TESSERA_ATTENTION_BLOCKED", raising=False)
    b, hq, hkv, sq, sk, d, causal = case
    q, k, v = inputs(b, hq, hkv, sq, sk, d, "fp32", salt=(SEED + 57) % 1000)
    w = rng((SEED + 58) % 1000).standard_normal((b, hq, sq, d)).astype(np.float32)

    def loss(q, k, v, w):
        return tessera.ops.sum(tessera.ops.flash_attn(q, k, v, causal=causal) * w)

    f = tessera.jit(tessera.value_and_grad(loss, argnums=(0, 1, 2)))
    forward = tessera.jit(lambda q, k, v: tessera.ops.flash_attn(q, k, v, causal=causal))

    def bits(device):
        args = [tessera.tensor(x, dtype="fp32").to(device) for x in (q, k, v, w)]
        value, grads = f(*args)
        out = [forward(*args[:3]), value, *grads]
        return [t.to("cpu").numpy().tobytes() for t in out]

    gpu = bits("cuda:0")
    assert "tile.mma" in forward.inspect_ir("tile")  # the blocked form (the lane form has no mma)
    cpu = bits("cpu")
    for name, g, c in zip(("o", "loss", "dq", "dk", "dv"), gpu, cpu):
        assert g == c, f"{name} differs from the CPU's (seed {SEED})"
    for _ in range(9):
        assert bits("cuda:0") == gpu
    check(np.frombuffer(gpu[0], np.float32).reshape(b, hq, sq, d), q, k, v, causal, "fp32")


@pytest.mark.skipif(not _C._cuda_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_ptx_path_runs_the_blocked_forward(monkeypatch, dtype):
    monkeypatch.setenv("TESSERA_CUDA_TILE_DEFAULT", "0")
    monkeypatch.setenv("TESSERA_ATTENTION_BLOCKED", "1")
    q, k, v = inputs(1, 4, 2, 128, 256, 64, dtype, salt=(SEED + 32) % 1000)
    f = gpu_forward_check(q, k, v, True, dtype)
    kernels = [kk for kk in f.executable().kernels if kk["family"] == "attention"]
    assert kernels and all(kk["variant"] == "tile" for kk in kernels), kernels


@pytest.mark.skipif(not _C._cuda_available() or not TILEIRAS_OK, reason="needs a Hopper GPU and tileiras")
@pytest.mark.parametrize("variant", ["default", "tile_ir", "ptx"])
@pytest.mark.parametrize("d", [64, 256])
def test_blocked_backward_on_the_gpu(monkeypatch, variant, d):
    # The blocked backward through CUDA Tile IR (the default mapper's choice on Hopper, or a
    # mapper asking for it) or the PTX path, against the CPU's blocked backward.
    monkeypatch.setenv("TESSERA_ATTENTION_BLOCKED", "1")
    if variant == "ptx":
        monkeypatch.setenv("TESSERA_CUDA_TILE_DEFAULT", "0")
    q, k, v = inputs(1, 4, 2, 128, 256, d, "bf16", salt=(SEED + 33) % 1000)
    w = bf16_weights(q.shape, 34)

    def loss(q, k, v):
        return tessera.ops.sum(tessera.ops.flash_attn(q, k, v, causal=True) * w.to(q.device))

    cpu = tessera.jit(tessera.grad(loss, argnums=(0, 1, 2)))(*(tessera.tensor(x, dtype="bf16") for x in (q, k, v)))
    if variant == "default":
        monkeypatch.delenv("TESSERA_ATTENTION_BLOCKED")  # no knob: the default mapper decides

    class TileIR(tessera.Mapper):
        def choose_variant(self, op, arch):
            return "tile_ir" if not arch.is_cpu and op.startswith("flash_attn") else None

    if variant == "tile_ir":
        tessera.runtime.set_mapper(TileIR())
    try:
        g = tessera.jit(tessera.grad(loss, argnums=(0, 1, 2)))
        args = [tessera.tensor(x, dtype="bf16").to("cuda:0") for x in (q, k, v)]
        first = [t.to("cpu").numpy() for t in g(*args)]
        for _ in range(4):
            assert [t.to("cpu").numpy().tobytes() for t in g(*args)] == [f.tobytes() for f in first]
        kinds = {kk["variant"] for kk in g.executable().kernels if kk["family"] == "attention"}
        assert kinds == ({"tile"} if variant == "ptx" else {"tile_ir"}), kinds
    finally:
        tessera.runtime.set_mapper(tessera.Mapper())
    for name, got, c in zip(("dq", "dk", "dv"), first, cpu):
        c = c.numpy().astype(np.float64)
        err = np.abs(got.astype(np.float64) - c)
        assert np.all(err <= 2.0 ** -7 * np.abs(c).max()), f"{name}: max error {err.max():.3g} (seed {SEED})"


@pytest.mark.skipif(not _C._cuda_available() or not TILEIRAS_OK, reason="needs a Hopper GPU and tileiras")
@pytest.mark.parametrize("causal", [False, True])
def test_ragged_lengths_on_hopper(monkeypatch, causal):
    # The default mapper pads ragged lengths for the blocked CUDA Tile IR kernels: the forward
    # against float64 numpy, bitwise over 10 runs; the gradients against the CPU's blocked ones.
    case = (1, 4, 2, 1000, 1100, 128)
    q, k, v = inputs(*case, "bf16", salt=(SEED + 45) % 1000)
    f = gpu_forward_check(q, k, v, causal, "bf16")
    kernels = [kk for kk in f.executable().kernels if kk["family"] == "attention"]
    assert kernels and all(kk["variant"] == "tile_ir" for kk in kernels), kernels
    w = bf16_weights(q.shape, 46)

    def loss(q, k, v):
        return tessera.ops.sum(tessera.ops.flash_attn(q, k, v, causal=causal) * w.to(q.device))

    args = [tessera.tensor(x, dtype="bf16").to("cuda:0") for x in (q, k, v)]
    g = tessera.jit(tessera.grad(loss, argnums=(0, 1, 2)))
    gpu = [t.to("cpu").numpy() for t in g(*args)]
    kinds = {kk["variant"] for kk in g.executable().kernels if kk["family"] == "attention"}
    assert kinds == {"tile_ir"}, kinds
    # The padding and the cut back are kernels (no strided view gathered on the host), so the
    # step captures into a CUDA graph and replays the same bits.
    captured = tessera.jit(capture_graph=True)(tessera.grad(loss, argnums=(0, 1, 2)))
    for _ in range(3):
        assert [t.to("cpu").numpy().tobytes() for t in captured(*args)] == [x.tobytes() for x in gpu]
    monkeypatch.setenv("TESSERA_ATTENTION_BLOCKED", "1")
    cpu = tessera.jit(tessera.grad(loss, argnums=(0, 1, 2)))(*(tessera.tensor(x, dtype="bf16") for x in (q, k, v)))
    for name, got, c in zip(("dq", "dk", "dv"), gpu, cpu):
        c = c.numpy().astype(np.float64)
        err = np.abs(got.astype(np.float64) - c)
        assert np.all(err <= 2.0 ** -7 * np.abs(c).max()), f"{name}: max error {err.max():.3g} (seed {SEED})"


def test_the_tile_knob_names_what_it_expects(monkeypatch):
    monkeypatch.setenv("TESSERA_ATTENTION_TILE", "128,100")
    q, k, v = inputs(1, 2, 2, 128, 128, 64, "bf16", salt=18)
    with pytest.raises(tessera.errors.ArgumentError,
                       match="TESSERA_ATTENTION_TILE is '128,100'; expected BM,BN, powers of two from 16 to 256"):
        run(q, k, v, "bf16")
