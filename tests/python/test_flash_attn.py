"""tessera.ops.flash_attn (graph.flash_attn / graph.flash_attn_bwd): results against float64 numpy
attention on fresh random inputs, gradients and tangents against JAX, the compiled kernels against
the reference executor bit for bit, determinism over 10 runs, errors, and the CUDA kernels' source
through nvcc. These are the lane kernels' tests (the reference's recipe, bit for bit), so every
test here pins TESSERA_ATTENTION_BLOCKED=0; the blocked kernels, the CPU's default since
docs/design/0044, are tested in test_flash_attn_blocked.py.

Tolerances (against float64 attention of the same, already rounded, inputs; entries are O(1)):
- fp32: |o - ref| <= 1e-5: each score is a D-term fp32 fma chain (relative 2^-24 per step), exp
  and the online rescaling add a few ulps per key, over at most 64 keys here.
- bf16: |o - ref| <= 2^-8 |ref| + 1e-4: fp32 accumulation, then one rounding to bf16 (2^-9);
  fp16: 2^-11 |ref| + 1e-5 (one rounding to fp16, 2^-11).
- fp64 gradients: 1e-12 relative to the largest entry (fp64 accumulation throughout).
- fp32 gradients: 1e-5 relative to the largest entry; bf16 gradients 2^-6 (the saved o is bf16,
  so delta = do . o carries its 2^-9 rounding into every ds).
"""

import secrets
import shutil

import numpy as np
import pytest

import tessera
from kernel_helpers import cuda_ptx_of
from tessera import _C
from tessera.errors import ArgumentError, ShapeError, TesseraError

SEED = secrets.randbits(32)  # fresh inputs every run; the seed is in every failure message


@pytest.fixture(autouse=True)
def lane_kernels(monkeypatch):
    monkeypatch.setenv("TESSERA_ATTENTION_BLOCKED", "0")


def rng(k=0):
    return np.random.default_rng([SEED, k])


def rounded(a, dtype):
    return tessera.tensor(a, dtype=dtype).numpy().astype(np.float64)


def attention_np(q, k, v, causal, scale):
    """float64 attention with the bottom-right causal rule, materializing the score matrix."""
    g = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    s = np.einsum("bhid,bhjd->bhij", q, k) * scale
    if causal:
        sq, sk = q.shape[2], k.shape[2]
        visible = np.arange(sk)[None, :] <= np.arange(sq)[:, None] + (sk - sq)
        s = np.where(visible, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bhij,bhjd->bhid", p / p.sum(-1, keepdims=True), v)


def inputs(b, hq, hkv, sq, sk, d, dtype, salt):
    r = rng(salt)
    shapes = [(b, hq, sq, d), (b, hkv, sk, d), (b, hkv, sk, d)]
    return [rounded(r.standard_normal(s), dtype) for s in shapes]


def run(q, k, v, dtype, **kw):
    return tessera.ops.flash_attn(*(tessera.tensor(x, dtype=dtype) for x in (q, k, v)), **kw)


# ---- forward against numpy ------------------------------------------------------------------------

# (B, Hq, Hkv, Sq, Sk, D): GQA, Sq != Sk both ways, both D. Kernels are specialized on the heads, D,
# the policy and the attributes (B, Sq and Sk are run-time sizes), so the D = 64 cases share theirs.
CASES = [
    (1, 4, 2, 8, 24, 64),
    (2, 4, 2, 16, 16, 64),
    (1, 2, 1, 12, 12, 128),
    (1, 4, 2, 20, 7, 64),
]


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("case", CASES)
def test_forward_against_float64_numpy(case, causal, dtype):
    b, hq, hkv, sq, sk, d = case
    if causal and sq > sk:
        pytest.skip("covered by test_errors")
    q, k, v = inputs(*case, dtype, salt=hash(case) % 1000)
    got = run(q, k, v, dtype, causal=causal).numpy().astype(np.float64)
    want = attention_np(q, k, v, causal, d ** -0.5)
    err = np.abs(got - want)
    tol = 1e-5 if dtype == "fp32" else 2.0 ** -8 * np.abs(want) + 1e-4
    assert np.all(err <= tol), f"{case} causal={causal} {dtype}: max error {err.max():.3g} (seed {SEED})"


def test_fp16_forward_accumulates_in_fp32():
    case = (1, 4, 2, 8, 24, 64)
    q, k, v = inputs(*case, "fp16", salt=3)
    out = run(q, k, v, "fp16", causal=True)
    assert str(out.policy) == "fp16 @accum(fp32)"
    want = attention_np(q, k, v, True, 0.125)
    err = np.abs(out.numpy().astype(np.float64) - want)
    assert np.all(err <= 2.0 ** -11 * np.abs(want) + 1e-5), f"max error {err.max():.3g} (seed {SEED})"


def test_causal_mask_aligns_bottom_right():
    q, k, v = inputs(1, 2, 2, 3, 10, 64, "fp32", salt=5)
    # The last query row sees every key: a one-row causal decode equals the non-causal one.
    last = run(q[:, :, -1:], k, v, "fp32", causal=True).numpy()
    assert last.tobytes() == run(q[:, :, -1:], k, v, "fp32").numpy().tobytes()
    # Row i of 3 sees keys 0 .. i + 7: row 0 equals attention over the first 8 keys alone.
    first = run(q, k, v, "fp32", causal=True).numpy()[:, :, 0]
    alone = run(q[:, :, :1], k[:, :, :8], v[:, :, :8], "fp32").numpy()[:, :, 0]
    assert first.tobytes() == alone.tobytes()
    # A top-left mask would differ.
    top_left = attention_np(q, k[:, :, :1], v[:, :, :1], False, 0.125)[:, :, 0]
    assert not np.allclose(first, top_left)


def test_scale_argument():
    q, k, v = inputs(1, 1, 1, 5, 9, 64, "fp32", salt=6)
    got = run(q, k, v, "fp32", scale=0.3).numpy()
    assert np.abs(got - attention_np(q, k, v, False, 0.3)).max() <= 1e-5, f"seed {SEED}"


# ---- compiled == reference ---------------------------------------------------------------------

def _loss(causal, w):
    def loss(q, k, v):
        return tessera.ops.sum(tessera.ops.flash_attn(q, k, v, causal=causal) * tessera.tensor(w))
    return loss


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_compiled_kernels_equal_the_reference_executor(dtype, monkeypatch):
    q, k, v = inputs(1, 4, 2, 6, 11, 64, dtype, salt=10)
    w = rng(11).standard_normal(q.shape).astype(np.float32)
    args = [tessera.tensor(x, dtype=dtype) for x in (q, k, v)]
    grad = tessera.grad(_loss(True, w), argnums=(0, 1, 2))

    def both():
        out = [tessera.ops.flash_attn(*args, causal=True).numpy()]
        return out + [g.numpy() for g in grad(*args)]

    compiled = both()
    monkeypatch.setenv("TESSERA_EAGER", "reference")
    reference = both()
    for c, r in zip(compiled, reference):
        assert c.tobytes() == r.tobytes(), f"seed {SEED}"


def test_jit_runs_the_attention_template():
    q, k, v = inputs(1, 2, 2, 8, 8, 64, "fp32", salt=20)
    w = rng(21).standard_normal(q.shape)

    @tessera.jit
    def f(q, k, v):
        return tessera.ops.flash_attn(q, k, v, causal=True) * 2.0

    out = f(*(tessera.tensor(x, dtype="fp32") for x in (q, k, v)))
    assert np.abs(out.numpy() - 2 * attention_np(q, k, v, True, 0.125)).max() <= 2e-5
    kernels = f.executable().kernels
    assert any(k["family"] == "attention" and k["variant"] == "tile" for k in kernels), kernels
    g = tessera.jit(tessera.grad(_loss(False, w), argnums=(0, 1, 2)))
    g(*(tessera.tensor(x, dtype="fp32") for x in (q, k, v)))
    ops = [k["family"] for k in g.executable().kernels]
    assert ops.count("attention") == 2, ops  # the forward and the backward kernel


# ---- gradients ----------------------------------------------------------------------------------

def _jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax


def attention_jax(jnp, q, k, v, causal, scale):
    g = q.shape[1] // k.shape[1]
    k, v = jnp.repeat(k, g, axis=1), jnp.repeat(v, g, axis=1)
    s = jnp.einsum("bhid,bhjd->bhij", q, k) * scale
    if causal:
        sq, sk = q.shape[2], k.shape[2]
        s = jnp.where(np.arange(sk)[None, :] <= np.arange(sq)[:, None] + (sk - sq), s, -jnp.inf)
    s = s - s.max(-1, keepdims=True)
    p = jnp.exp(s)
    return jnp.einsum("bhij,bhjd->bhid", p / p.sum(-1, keepdims=True), v)


@pytest.mark.parametrize("dtype,causal,case", [
    ("fp64", True, (1, 4, 2, 6, 10, 64)),
    ("fp64", False, (2, 2, 1, 7, 5, 64)),
    ("fp32", True, (1, 2, 2, 9, 9, 128)),
    ("bf16", False, (1, 4, 2, 5, 8, 64)),
])
def test_gradients_against_jax(dtype, causal, case):
    jax = _jax()
    jnp = jax.numpy
    q, k, v = inputs(*case, dtype, salt=30)
    w = rng(31).standard_normal(q.shape)
    scale = case[-1] ** -0.5

    wt = rounded(w, dtype)  # w at the inputs' dtype (the product keeps q's policy)

    def loss_j(q, k, v):
        return jnp.sum(attention_jax(jnp, q, k, v, causal, scale) * wt)

    want = jax.grad(loss_j, argnums=(0, 1, 2))(q, k, v)
    tol = {"fp64": 1e-12, "fp32": 1e-5, "bf16": 2.0 ** -6}[dtype]
    loss_t = _loss(causal, wt.astype(np.float32) if dtype != "fp64" else wt)
    args = [tessera.tensor(x, dtype=dtype) for x in (q, k, v)]
    for fn in (tessera.grad(loss_t, argnums=(0, 1, 2)), tessera.jit(tessera.grad(loss_t, argnums=(0, 1, 2)))):
        for name, g, ww in zip("qkv", fn(*args), want):
            ww = np.asarray(ww)
            err = np.abs(g.numpy().astype(np.float64) - ww).max()
            assert err <= tol * np.abs(ww).max(), f"d{name} {dtype}: error {err:.3g} (seed {SEED})"
    if dtype == "fp64":
        value, _ = tessera.value_and_grad(loss_t)(*args)
        np.testing.assert_allclose(value.item(), float(loss_j(q, k, v)), rtol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
def test_tangents_against_jax(causal):
    jax = _jax()
    jnp = jax.numpy
    q, k, v = inputs(1, 4, 2, 5, 9, 64, "fp64", salt=40)
    t = [rng(41 + i).standard_normal(x.shape) for i, x in enumerate((q, k, v))]
    _, want = jax.jvp(lambda q, k, v: attention_jax(jnp, q, k, v, causal, 0.125), (q, k, v), tuple(t))
    _, got = tessera.jvp(lambda q, k, v: tessera.ops.flash_attn(q, k, v, causal=causal),
                         tuple(tessera.tensor(x) for x in (q, k, v)), tuple(tessera.tensor(x) for x in t))
    np.testing.assert_allclose(got.numpy(), np.asarray(want), rtol=1e-10, atol=1e-12)


# ---- dropout ------------------------------------------------------------------------------------

def _mask(shape, pd, seed):
    """The keep mask scaled by 1 / (1 - pd), as tessera.ops.dropout draws it on ones of that shape."""
    ones = tessera.tensor(np.ones(shape), dtype="fp64")
    return tessera.ops.dropout(ones, pd, key=tessera.ops.philox(seed)).numpy()


def test_dropout_masks_the_probabilities_like_ops_dropout():
    jax = _jax()
    jnp = jax.numpy
    b, hq, hkv, sq, sk, d = 1, 4, 2, 5, 9, 64
    q, k, v = inputs(b, hq, hkv, sq, sk, d, "fp64", salt=45)
    pd, seed = 0.3, int(rng(46).integers(1 << 30))
    mask = _mask((b, hq, sq, sk), pd, seed)
    assert 0 < (mask == 0).mean() < 1
    key = tessera.ops.philox(seed)
    args = [tessera.tensor(x) for x in (q, k, v)]
    out = tessera.ops.flash_attn(*args, causal=True, dropout=pd, key=key)
    assert key.offset == b * hq * sq * sk  # advanced like tessera.ops.dropout on [B, Hq, Sq, Sk]
    visible = np.arange(sk)[None, :] <= np.arange(sq)[:, None] + (sk - sq)

    def attn(q, k, v):
        s = jnp.einsum("bhid,bhjd->bhij", q, jnp.repeat(k, 2, axis=1)) * 0.125
        p = jax.nn.softmax(jnp.where(visible, s, -jnp.inf), axis=-1)
        return jnp.einsum("bhij,bhjd->bhid", p * mask, jnp.repeat(v, 2, axis=1))

    np.testing.assert_allclose(out.numpy(), np.asarray(attn(q, k, v)), rtol=1e-12, atol=1e-13)
    w = rng(47).standard_normal(q.shape)

    def loss_t(q, k, v):
        o = tessera.ops.flash_attn(q, k, v, causal=True, dropout=pd, key=tessera.ops.philox(seed))
        return tessera.ops.sum(o * tessera.tensor(w))

    want = jax.grad(lambda q, k, v: jnp.sum(attn(q, k, v) * w), argnums=(0, 1, 2))(q, k, v)
    for fn in (tessera.grad(loss_t, argnums=(0, 1, 2)), tessera.jit(tessera.grad(loss_t, argnums=(0, 1, 2)))):
        for g, ww in zip(fn(*args), want):
            np.testing.assert_allclose(g.numpy(), np.asarray(ww), rtol=1e-11, atol=1e-12)
    _, tangent = tessera.jvp(lambda q, k, v: tessera.ops.flash_attn(q, k, v, causal=True, dropout=pd,
                                                                     key=tessera.ops.philox(seed)),
                             tuple(args), tuple(args))
    _, want_t = jax.jvp(attn, (q, k, v), (q, k, v))
    np.testing.assert_allclose(tangent.numpy(), np.asarray(want_t), rtol=1e-10, atol=1e-12)


def test_dropout_compiled_equals_reference_and_repeats(monkeypatch):
    q, k, v = inputs(1, 2, 1, 6, 6, 64, "bf16", salt=48)
    w = rng(49).standard_normal(q.shape).astype(np.float32)
    args = [tessera.tensor(x, dtype="bf16") for x in (q, k, v)]

    def loss(q, k, v):
        o = tessera.ops.flash_attn(q, k, v, dropout=0.5, key=tessera.ops.philox(11))
        return tessera.ops.sum(o * tessera.tensor(w))

    def both():
        return [tessera.ops.flash_attn(*args, dropout=0.5, key=tessera.ops.philox(11)).numpy().tobytes()] + \
            [g.numpy().tobytes() for g in tessera.grad(loss, argnums=(0, 1, 2))(*args)]

    compiled = both()
    assert both() == compiled  # the same key gives the same mask
    key = tessera.ops.philox(11)
    first = tessera.ops.flash_attn(*args, dropout=0.5, key=key).numpy().tobytes()
    assert tessera.ops.flash_attn(*args, dropout=0.5, key=key).numpy().tobytes() != first  # the key moved on
    monkeypatch.setenv("TESSERA_EAGER", "reference")
    assert both() == compiled


# ---- determinism --------------------------------------------------------------------------------

def test_bitwise_determinism_over_ten_runs():
    q, k, v = inputs(1, 4, 2, 16, 16, 64, "bf16", salt=50)
    w = rng(51).standard_normal(q.shape).astype(np.float32)
    args = [tessera.tensor(x, dtype="bf16") for x in (q, k, v)]
    grad = tessera.jit(tessera.value_and_grad(_loss(True, w), argnums=(0, 1, 2)))
    runs = set()
    for _ in range(10):
        value, grads = grad(*args)
        runs.add(value.numpy().tobytes() + b"".join(g.numpy().tobytes() for g in grads))
    assert len(runs) == 1


# ---- errors -------------------------------------------------------------------------------------

def test_errors():
    def t(shape, dtype="fp32"):
        return tessera.tensor(np.zeros(shape, np.float32), dtype=dtype)

    with pytest.raises(ShapeError, match="supported D are 64, 128 and 256"):
        tessera.ops.flash_attn(t((1, 2, 4, 32)), t((1, 2, 4, 32)), t((1, 2, 4, 32)))
    with pytest.raises(TesseraError, match="Hq must be a positive multiple of Hkv"):
        tessera.ops.flash_attn(t((1, 3, 4, 64)), t((1, 2, 4, 64)), t((1, 2, 4, 64)))
    with pytest.raises(TesseraError, match="k's head dim is 128 but should be 64"):
        tessera.ops.flash_attn(t((1, 2, 4, 64)), t((1, 2, 4, 128)), t((1, 2, 4, 64)))
    with pytest.raises(TesseraError, match="v's sequence length is 5 but should be 4"):
        tessera.ops.flash_attn(t((1, 2, 4, 64)), t((1, 2, 4, 64)), t((1, 2, 5, 64)))
    with pytest.raises(TesseraError, match="causal mask aligned bottom-right cannot apply with Sq = 6 > Sk = 4"):
        tessera.ops.flash_attn(t((1, 2, 6, 64)), t((1, 2, 4, 64)), t((1, 2, 4, 64)), causal=True)
    with pytest.raises(TesseraError, match="share one policy"):
        tessera.ops.flash_attn(t((1, 2, 4, 64)), t((1, 2, 4, 64), "bf16"), t((1, 2, 4, 64)))
    with pytest.raises(ShapeError, match=r"q must be \[B, H, S, D\]"):
        tessera.ops.flash_attn(t((2, 4, 64)), t((1, 2, 4, 64)), t((1, 2, 4, 64)))
    with pytest.raises(ArgumentError, match=r"dropout must be a float in \[0, 1\)"):
        tessera.ops.flash_attn(t((1, 2, 4, 64)), t((1, 2, 4, 64)), t((1, 2, 4, 64)), dropout=1.0)
    with pytest.raises(TypeError, match="key must come from tessera.ops.philox"):
        tessera.ops.flash_attn(t((1, 2, 4, 64)), t((1, 2, 4, 64)), t((1, 2, 4, 64)), dropout=0.1, key=3)
    # Inside jit the same checks run while tracing, from the op's shape inference.
    with pytest.raises(TesseraError, match="supported D are 64, 128 and 256"):
        tessera.jit(lambda q: tessera.ops.flash_attn(q, q, q))(t((1, 1, 2, 96)))


def test_uncovered_policy_is_a_compile_error_under_jit():
    # Stochastic rounding of the results is not built in the attention template: compiled code that
    # was asked for raises, naming the reason (eager mode warns and runs the reference instead).
    p = tessera.bf16 @ tessera.stochastic_round
    x = tessera.tensor(np.zeros((1, 1, 4, 64), np.float32), dtype=p)
    with pytest.raises(tessera.errors.CompileError, match=r"graph.flash_attn, family attention\) cannot be compiled"):
        tessera.jit(lambda a: tessera.ops.flash_attn(a, a, a))(x)


# ---- fp8 forward with descales --------------------------------------------------------------------

def fp8_inputs(dtype, shape_q, shape_kv, scales, salt):
    """fp8 codes of per-tensor scaled values (value / scale, as fp8 training stores them) and the
    float64 values those codes stand for."""
    r = rng(salt)
    out = []
    for shape, sc in zip((shape_q, shape_kv, shape_kv), scales):
        codes = tessera.tensor(r.standard_normal(shape) * 2.0, dtype=dtype)
        out.append((codes, codes.numpy().astype(np.float64) * sc))
    return out


@pytest.mark.parametrize("dtype", ["fp8_e4m3", "fp8_e5m2"])
@pytest.mark.parametrize("causal", [False, True])
def test_fp8_forward_with_descales_against_float64_numpy(dtype, causal):
    scales = (0.5, 0.125, 0.75)
    (q, qv), (k, kv), (v, vv) = fp8_inputs(dtype, (1, 4, 10, 64), (1, 2, 14, 64), scales, salt=70)
    o = tessera.ops.flash_attn(q, k, v, causal=causal, descale=scales)
    assert o.dtype == "bf16" and o.shape == (1, 4, 10, 64)  # fp8 inputs give bf16 by default
    want = attention_np(qv, kv, vv, causal, 0.125)
    # fp32 accumulation, then one rounding to bf16 (8 significant bits).
    err = np.abs(o.numpy().astype(np.float64) - want)
    assert (err <= 2.0 ** -8 * np.abs(want) + 1e-5).all(), f"seed {SEED}: {err.max()}"
    o32 = tessera.ops.flash_attn(q, k, v, causal=causal, descale=scales, out_dtype="fp32")
    assert o32.dtype == "fp32"
    assert np.abs(o32.numpy() - want).max() <= 2e-5 * max(1.0, np.abs(want).max()), f"seed {SEED}"


def test_fp8_forward_compiled_equals_the_reference_executor(monkeypatch):
    scales = (0.25, 2.0, 0.5)
    (q, _), (k, _), (v, _) = fp8_inputs("fp8_e4m3", (1, 2, 9, 128), (1, 2, 9, 128), scales, salt=71)
    compiled = tessera.ops.flash_attn(q, k, v, causal=True, descale=scales).numpy()
    jitted = tessera.jit(lambda a, b, c: tessera.ops.flash_attn(a, b, c, causal=True, descale=scales))(q, k, v)
    monkeypatch.setenv("TESSERA_EAGER", "reference")
    reference = tessera.ops.flash_attn(q, k, v, causal=True, descale=scales).numpy()
    assert compiled.tobytes() == reference.tobytes(), f"seed {SEED}"
    assert jitted.numpy().tobytes() == reference.tobytes(), f"seed {SEED}"


def test_unit_descales_and_no_out_dtype_leave_bf16_attention_as_it_was():
    q, k, v = (tessera.tensor(x, dtype="bf16") for x in inputs(1, 2, 2, 8, 8, 64, "bf16", salt=72))
    plain = tessera.ops.flash_attn(q, k, v).numpy()
    assert tessera.ops.flash_attn(q, k, v, descale=(1.0, 1.0, 1.0)).numpy().tobytes() == plain.tobytes()
    wide = tessera.ops.flash_attn(q, k, v, out_dtype="fp32")
    assert wide.dtype == "fp32"
    assert np.abs(wide.numpy() - plain.astype(np.float32)).max() <= 2.0 ** -8 * np.abs(plain).max()


def test_fp8_attention_is_forward_only_and_checks_its_arguments():
    scales = (0.5, 0.5, 0.5)
    (q, _), (k, _), (v, _) = fp8_inputs("fp8_e4m3", (1, 2, 4, 64), (1, 2, 4, 64), scales, salt=73)

    def loss(q, k, v):
        return tessera.ops.sum(tessera.ops.flash_attn(q, k, v, descale=scales))
    with pytest.raises(ArgumentError, match="forward-only; its VJP rule is not built"):
        tessera.grad(loss)(q, k, v)
    with pytest.raises(ArgumentError, match=r"descale must be \(dq, dk, dv\)"):
        tessera.ops.flash_attn(q, k, v, descale=(0.5, 0.5))
    with pytest.raises(ArgumentError, match=r"descale\[2\] must be a positive finite float, got 0.0"):
        tessera.ops.flash_attn(q, k, v, descale=(0.5, 0.5, 0.0))
    with pytest.raises(TesseraError, match="the result must be a floating-point storage of a byte or more, got int8"):
        tessera.ops.flash_attn(q, k, v, out_dtype="int8")


# ---- GPU ------------------------------------------------------------------------------------------

@pytest.mark.skipif(not _C._cuda_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype,causal,dropout", [("fp32", True, 0.0), ("bf16", True, 0.0), ("bf16", False, 0.0),
                                                  ("fp32", False, 0.25)])
def test_gpu_equals_cpu_bitwise(dtype, causal, dropout, monkeypatch):
    # The attention kernels run the same recipe in the same order on both backends: the forward,
    # the backward (through tessera.grad, eagerly, with a captured CPU tensor moved to the GPU) and
    # the dropout mask drawn from Philox give the CPU's bits, over 10 GPU runs. The lane kernels:
    # with tileiras on Hopper, bf16 attention takes the blocked tensor-core form by default, whose
    # bits are its own (test_flash_attn_blocked.py).
    monkeypatch.setenv("TESSERA_ATTENTION_BLOCKED", "0")
    q, k, v = inputs(1, 4, 2, 32, 48, 64, dtype, salt=60)
    w = rng(61).standard_normal(q.shape).astype(np.float32)
    cpu_args = [tessera.tensor(x, dtype=dtype) for x in (q, k, v)]
    gpu_args = [a.to("cuda:0") for a in cpu_args]

    def loss(q, k, v):
        o = tessera.ops.flash_attn(q, k, v, causal=causal, dropout=dropout, key=tessera.ops.philox(7) if dropout else None)
        return tessera.ops.sum(o * tessera.tensor(w))

    def attn(*a):
        return tessera.ops.flash_attn(*a, causal=causal, dropout=dropout, key=tessera.ops.philox(7) if dropout else None)

    grad = tessera.grad(loss, argnums=(0, 1, 2))
    cpu = [attn(*cpu_args).numpy()] + [g.numpy() for g in grad(*cpu_args)]
    for _ in range(10):
        gpu_out = [attn(*gpu_args)] + list(grad(*gpu_args))
        assert all(g.device == "cuda:0" for g in gpu_out)
        gpu = [g.to("cpu").numpy() for g in gpu_out]
        for name, g, c in zip(("o", "dq", "dk", "dv"), gpu, cpu):
            assert g.tobytes() == c.tobytes(), f"{name} differs from the CPU path"


@pytest.mark.skipif(not _C._cuda_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", ["fp8_e4m3", "fp8_e5m2"])
def test_fp8_forward_on_the_gpu_equals_the_cpu_bitwise(dtype, monkeypatch):
    # The same template on both backends: fp8 codes decoded, descales applied, bf16 result (the
    # lane kernels; the blocked form's are in test_flash_attn_blocked.py).
    monkeypatch.setenv("TESSERA_ATTENTION_BLOCKED", "0")
    scales = (0.5, 0.25, 2.0)
    (q, _), (k, _), (v, _) = fp8_inputs(dtype, (1, 4, 24, 64), (1, 2, 40, 64), scales, salt=74)
    cpu = tessera.ops.flash_attn(q, k, v, causal=True, descale=scales).numpy()
    for _ in range(10):
        gpu = tessera.ops.flash_attn(*(x.to("cuda:0") for x in (q, k, v)), causal=True, descale=scales)
        assert gpu.device == "cuda:0" and gpu.dtype == "bf16"
        assert gpu.to("cpu").numpy().tobytes() == cpu.tobytes()


@pytest.mark.skipif(not _C._cuda_available(), reason="needs a CUDA GPU")
def test_jit_of_attention_gradients_on_the_gpu_equals_the_cpu(monkeypatch):
    monkeypatch.setenv("TESSERA_ATTENTION_BLOCKED", "0")  # the lane kernels on both backends
    q, k, v = inputs(2, 2, 1, 17, 17, 128, "bf16", salt=62)
    w = rng(63).standard_normal(q.shape).astype(np.float32)
    step = tessera.jit(tessera.value_and_grad(_loss(True, w), argnums=(0, 1, 2)))
    cpu_args = [tessera.tensor(x, dtype="bf16") for x in (q, k, v)]
    want_loss, want = step(*cpu_args)
    got_loss, got = step(*(a.to("cuda:0") for a in cpu_args))
    assert got_loss.to("cpu").numpy().tobytes() == want_loss.numpy().tobytes()
    for g, c in zip(got, want):
        assert g.to("cpu").numpy().tobytes() == c.numpy().tobytes()


CUDA_TIR = """
func @f(%q: tensor<[B, 4, S, 64] bf16>, %k: tensor<[B, 2, T, 64] bf16>, %v: tensor<[B, 2, T, 64] bf16>,
        %do: tensor<[B, 4, S, 64] bf16>, %delta: tensor<[B, 4, S] fp32>) -> (tensor<[B, 4, S, 64] bf16>, tensor<[B, 4, S, 64] bf16>,
        tensor<[B, 2, T, 64] bf16>, tensor<[B, 2, T, 64] bf16>) {
  %a:2 = graph.flash_attn %q, %k, %v {causal = true, dropout = 0.25, scale = 0.125, seed = 5} : tensor<[B, 4, S, 64] bf16>, tensor<[B, 4, S] fp32>
  %g:3 = graph.flash_attn_bwd %q, %k, %v, %delta, %a#1, %do {causal = true, dropout = 0.25, scale = 0.125, seed = 5} : tensor<[B, 4, S, 64] bf16>, tensor<[B, 2, T, 64] bf16>, tensor<[B, 2, T, 64] bf16>
  return %a#0, %g#0, %g#1, %g#2
}
"""  # with dropout: the kernels draw Philox bits


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_cuda_source_of_the_attention_kernels_compiles(tmp_path):
    # No GPU needed: the CUDA backend's emitted source goes through nvcc to PTX (device code only, as
    # NVRTC compiles it at run time), with the device headers from the source tree.
    ptx, out = cuda_ptx_of(tmp_path, CUDA_TIR, kernels=2)
    assert "random_bits32" in out  # the dropout mask is drawn in the kernels
    for text in ptx:
        assert "fma.rn.f32" in text


def test_a_batch_split_attention_runs_per_shard_with_the_same_bits():
    # The sharding rule keeps the batch split: no collective, each device
    # attends over its own batch elements, bit for bit one device's result.
    from tessera import dist
    rng = np.random.default_rng(21)
    q, k, v = (rng.standard_normal((4, 2, 8, 64)).astype(np.float32) for _ in range(3))
    m = dist.mesh(devices=["cpu:0", "cpu:1"], axes=("dp",), shape=(2,))
    batch = dist.Block(mesh_axes=("dp",))
    f = tessera.jit(lambda q, k, v: tessera.ops.flash_attn(q, k, v, causal=True))
    out = f(*(dist.tensor(a, layout=batch, mesh=m) for a in (q, k, v)))
    graph = f.inspect_ir("graph")
    assert "graph.all_gather" not in graph and "graph.allreduce" not in graph
    one = tessera.jit(lambda q, k, v: tessera.ops.flash_attn(q, k, v, causal=True))(q, k, v)
    np.testing.assert_array_equal(out.numpy(), one.numpy())
