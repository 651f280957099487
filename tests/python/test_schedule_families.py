"""Every op family through @tessera.jit on the compiled path (the default),
against the reference executor (TESSERA_BACKEND=reference) and numpy float64:
gradients of an MLP, random programs mixing families, determinism across
thread counts, eager ops on compiled kernels (TESSERA_EAGER=compiled)."""

import numpy as np
import pytest

import tessera
from tessera import ops
from tessera.errors import ArgumentError


def _on(backend, monkeypatch, fn, *args):
    monkeypatch.setenv("TESSERA_BACKEND", backend)
    out = tessera.jit(fn)(*args)
    return [np.asarray(o.numpy(), np.float64) for o in (out if isinstance(out, (tuple, list)) else [out])]


def _mlp_loss(w1, b1, w2, b2, x, y):
    h = ops.relu(ops.matmul(x, w1) + b1)
    logits = ops.matmul(h, w2) + b2
    logp = logits - ops.logsumexp(logits, axis=-1, keepdims=True)
    return ops.mean(ops.sum(-(y * logp), axis=-1))


def test_mlp_gradients_match_reference_and_numpy(monkeypatch):
    rng = np.random.default_rng(0)
    b, d, h, c = 37, 300, 70, 11  # K = 300 > 256: the blocked order differs from the reference's
    w1 = (rng.standard_normal((d, h)) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((h, c)) * 0.1).astype(np.float32)
    b1 = rng.standard_normal(h).astype(np.float32)
    b2 = rng.standard_normal(c).astype(np.float32)
    x = rng.standard_normal((b, d)).astype(np.float32)
    y = np.eye(c, dtype=np.float32)[rng.integers(0, c, b)]
    args = [tessera.tensor(a) for a in (w1, b1, w2, b2, x, y)]
    grad = tessera.grad(_mlp_loss, argnums=(0, 1, 2, 3))
    got = _on("compiled", monkeypatch, grad, *args)
    want = _on("reference", monkeypatch, grad, *args)
    # numpy float64
    z1 = x.astype(np.float64) @ w1 + b1
    hh = np.maximum(z1, 0)
    logits = hh @ w2 + b2
    e = np.exp(logits - logits.max(-1, keepdims=True))
    dl = (e / e.sum(-1, keepdims=True) - y) / b
    dh = (dl @ w2.T) * (z1 > 0)
    exact = [x.T @ dh, dh.sum(0), hh.T @ dl, dl.sum(0)]
    for g, w, e64 in zip(got, want, exact):
        scale = np.abs(e64).max()
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-5 * scale)
        np.testing.assert_allclose(g, e64, rtol=0, atol=1e-5 * scale)


_UNARY = [ops.tanh, ops.relu, ops.sigmoid, lambda v: ops.gelu(v), lambda v: v * 0.5 + 1.0]


def _random_program(rng, n_steps):
    """A chain over x [R, C] and w [C, C] mixing every family."""
    steps = [int(s) for s in rng.integers(0, 9, n_steps)]

    def f(x, w):
        v = x
        for s in steps:
            if s == 0:
                v = _UNARY[int(rng.integers(0, len(_UNARY)))](v)
            elif s == 1:
                v = v - ops.mean(v, axis=-1, keepdims=True)
            elif s == 2:
                v = v / (ops.max(ops.abs(v), axis=0, keepdims=True) + 1.0)
            elif s == 3:
                v = ops.matmul(v, w)
            elif s == 4:
                v = ops.softmax_safe(v, axis=-1)
            elif s == 5:
                v = ops.layernorm_safe(v, axis=-1)
            elif s == 6:
                v = ops.transpose(ops.transpose(v, (1, 0)) * 2.0, (1, 0))
            elif s == 7:
                v = ops.concat([ops.slice(v, (0, 0), (2 ** 62, 1)), ops.slice(v, (0, 1), (2 ** 62, 2 ** 62))], axis=1)
            else:
                v = ops.rmsnorm_safe(v, axis=-1) + ops.sum(v, axis=1, keepdims=True) * 0.01
        return v

    return f, steps


@pytest.mark.parametrize("seed", range(6))
def test_random_programs_match_reference(monkeypatch, seed):
    rng = np.random.default_rng(seed)
    r, c = int(rng.integers(1, 40)), int(rng.integers(2, 40))
    x = tessera.tensor(rng.standard_normal((r, c)).astype(np.float32))
    w = tessera.tensor((rng.standard_normal((c, c)) / np.sqrt(c)).astype(np.float32))
    f, steps = _random_program(np.random.default_rng(seed + 100), 6)
    got = _on("compiled", monkeypatch, f, x, w)[0]
    f2, _ = _random_program(np.random.default_rng(seed + 100), 6)
    want = _on("reference", monkeypatch, f2, x, w)[0]
    # Rows and contractions here are at most 40 long: the canonical order is the
    # reference's, so only elementwise ulps of different transcendental paths remain.
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"steps {steps}")


def test_results_do_not_depend_on_thread_count(monkeypatch):
    rng = np.random.default_rng(3)
    x = tessera.tensor(rng.standard_normal((300, 700)).astype(np.float32))
    w = tessera.tensor(rng.standard_normal((700, 300)).astype(np.float32))

    def f(x, w):
        return ops.softmax_safe(ops.matmul(x, w), axis=-1), ops.sum(x, axis=0)

    runs = []
    for threads in ("1", "2", "1"):
        monkeypatch.setenv("TESSERA_NUM_THREADS", threads)
        runs.append(_on("compiled", monkeypatch, f, x, w))
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            assert np.array_equal(a.view(np.uint64), b.view(np.uint64))


def test_gather_index_error_points_at_the_user_line(monkeypatch):
    monkeypatch.setenv("TESSERA_BACKEND", "compiled")

    @tessera.jit
    def f(x, i):
        return ops.gather(x, i, axis=0)

    x = tessera.tensor(np.ones((4, 3), np.float32))
    with pytest.raises(ArgumentError, match=r"gather index 7 is out of range for axis 0 of size 4"):
        f(x, tessera.tensor(np.array([1, 7], np.int64)))


def test_eager_ops_on_compiled_kernels(monkeypatch):
    monkeypatch.setenv("TESSERA_EAGER", "compiled")
    rng = np.random.default_rng(4)
    a = rng.standard_normal((50, 60)).astype(np.float32)
    b = rng.standard_normal((60, 60)).astype(np.float32)
    got = ops.matmul(tessera.tensor(a), tessera.tensor(b)).numpy()
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)
    # Another shape with the same pattern ([S0, S1] @ [S1, S1]) reuses the executable.
    after_first = tessera._C._eager_cache_size()
    ops.matmul(tessera.tensor(a[:20, :30]), tessera.tensor(b[:30, :30]))
    assert tessera._C._eager_cache_size() == after_first
    # Negative transpose axes.
    np.testing.assert_array_equal(ops.transpose(tessera.tensor(a), (-1, -2)).numpy(), a.T)
    # Bad operands get the reference's errors.
    with pytest.raises(tessera.errors.ShapeError):
        ops.add(tessera.tensor(a), tessera.tensor(b[:5]))
    # Shapes the pattern cannot express (a reshape's static target) compile for the exact shapes.
    np.testing.assert_array_equal(ops.reshape(tessera.tensor(a), (60, 50)).numpy(), a.reshape(60, 50))


# NaN codes other than the canonical one, and infinities, per format.
_ODD_CODES = {
    "fp8_e5m2": [0x7D, 0x7E, 0x7F, 0x7C, 0xFD, 0xFC, 0x01, 0x80],
    "fp8_e4m3": [0x7F, 0xFF, 0x01, 0x80, 0x7E, 0x00, 0x08, 0x88],
    "bf16": [0x7F81, 0x7FC0, 0xFFFF, 0x7F80, 0x8000, 0x0001, 0xFFC1, 0x3F80],
    "fp16": [0x7C01, 0x7E00, 0xFFFF, 0x7C00, 0x8000, 0x0001, 0xFD55, 0x3C00],
    "fp32": [0x7F800001, 0x7FC00000, 0xFFFFFFFF, 0x7F800000, 0x80000000, 1, 0xFFA00001, 0x3F800000],
    "e8m0": [0xFF, 0x00, 0x7F, 0x80, 0xFE, 0x01, 0x40, 0xC0],
}


@pytest.mark.parametrize("policy", sorted(_ODD_CODES))
def test_moving_ops_copy_codes_exactly(monkeypatch, policy):
    """concat, gather and slice_embed (the gradient of slice) move encodings,
    NaN payloads included, on the compiled path as on the reference."""
    monkeypatch.setenv("TESSERA_BACKEND", "compiled")
    codes = np.array(_ODD_CODES[policy], dtype=np.uint64).reshape(2, 4)
    x = tessera._C._tensor_from_codes(codes.ravel().tolist(), [2, 4], policy)
    idx = tessera.tensor(np.array([3, 0, 3, 1, 2]), "int32")
    cat = tessera.jit(lambda a: ops.concat([a, a], axis=1))(x)
    np.testing.assert_array_equal(cat.codes(), np.concatenate([codes, codes], axis=1))
    got = tessera.jit(lambda a, i: ops.gather(a, i, axis=1))(x, idx)
    np.testing.assert_array_equal(got.codes(), codes[:, [3, 0, 3, 1, 2]])
    sliced = tessera.jit(lambda a: ops.slice(ops.concat([a, a], axis=0), (1, 0), (4, 4), (2, 1)))(x)
    np.testing.assert_array_equal(sliced.codes(), np.concatenate([codes, codes])[1:4:2])


@pytest.mark.parametrize("policy", ["bf16 @stochastic_round", "fp16 @accum(fp32) @stochastic_round",
                                    "fp16 @accum(fp16) @stochastic_round", "fp32 @stochastic_round",
                                    "fp8_e4m3 @stochastic_round", "int8 @stochastic_round @saturate"])
def test_stochastic_rounding_draws_the_reference_bits(monkeypatch, policy):
    """Each op whose policy rounds stochastically draws Philox(seed, j) for
    element j of its own result, in fused chains and broadcasts too."""
    rng = np.random.default_rng(8)
    x = tessera.tensor(rng.standard_normal((37, 53)) * 20)
    b = tessera.tensor(rng.standard_normal(53) * 20)

    def f(x, b):
        y = ops.cast(x * 3.0, policy, seed=7)
        z = y + ops.cast(b, policy, seed=3)  # the add rounds stochastically too (seed 0)
        return z, ops.cast(b, policy, seed=3)

    got = _on("compiled", monkeypatch, f, x, b)
    want = _on("reference", monkeypatch, f, x, b)
    monkeypatch.setenv("TESSERA_BACKEND", "compiled")
    got_codes = [o.codes() for o in tessera.jit(f)(x, b)]
    monkeypatch.setenv("TESSERA_BACKEND", "reference")
    want_codes = [o.codes() for o in tessera.jit(f)(x, b)]
    for g, w in zip(got_codes, want_codes):
        np.testing.assert_array_equal(g, w)
    # A different seed draws different bits.
    monkeypatch.setenv("TESSERA_BACKEND", "compiled")
    other = tessera.jit(lambda v: ops.cast(v * 3.0, policy, seed=8))(x).codes()
    assert not np.array_equal(other, tessera.jit(lambda v: ops.cast(v * 3.0, policy, seed=7))(x).codes())


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "bool"])
def test_integer_sums_compile_exactly(monkeypatch, dtype):
    """Integer sums run compiled: exact, in the reference's order, with its
    result dtype, fused with consumers."""
    rng = np.random.default_rng(9)
    np_t = np.bool_ if dtype == "bool" else getattr(np, dtype)
    lo, hi = (0, 2) if dtype == "bool" else (max(int(np.iinfo(np_t).min), -10**6), min(int(np.iinfo(np_t).max), 10**6))
    x = tessera.tensor(rng.integers(lo, hi, (7, 300)).astype(np_t))
    fn = lambda v: (ops.sum(v, axis=1) * 3, ops.sum(v, axis=0), ops.sum(v))
    got = _on("compiled", monkeypatch, fn, x)
    want = _on("reference", monkeypatch, fn, x)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    monkeypatch.setenv("TESSERA_BACKEND", "compiled")
    assert str(tessera.jit(lambda v: ops.sum(v))(x).dtype) == ("int64" if dtype == "int64" else "int32")


def test_integer_sum_errors_match_the_reference(monkeypatch):
    monkeypatch.setenv("TESSERA_BACKEND", "compiled")
    f = tessera.jit(lambda v: ops.sum(v, axis=-1))
    with pytest.raises(tessera.ArgumentError, match="overflows its int32 result; cast the operand to int64"):
        f(tessera.tensor(np.array([[2**31 - 1, 1], [0, 0]], dtype=np.int32)))
    with pytest.raises(tessera.ArgumentError, match="overflows its int32 result"):
        f(tessera.tensor(np.array([[-2**31, -1]], dtype=np.int32)))
    # A partial sum past 2^53 (2^22 + 1 values of 2^31 - 1): inexact in the reference, an error on both paths.
    big = tessera.tensor(np.full((1, 2**22 + 1), 2**31 - 1, dtype=np.int32))
    with pytest.raises(tessera.ArgumentError, match="passed 2\\^53"):
        f(big)
    monkeypatch.setenv("TESSERA_BACKEND", "reference")
    with pytest.raises(tessera.ArgumentError, match="passed 2\\^53"):
        tessera.jit(lambda v: ops.sum(v, axis=-1))(big)


def test_int64_sums_round_elements_as_the_reference_does(monkeypatch):
    """int64 elements: the reference adds each as a double. Large elements
    keep the reference's value; an element past 2^62, or a partial sum past
    2^53, is the reference's error."""
    # 2^53 + 1 rounds to the double 2^53, so its row sums to 0 on both paths.
    rows = [[2**53, -2**53, 5], [2**53 + 1, -(2**53), 0], [-(2**53) + 1, 3, -4], [2**52 + 1, 2**52 - 1, -7]]
    x = tessera.tensor(np.array(rows, dtype=np.int64))
    fn = lambda v: ops.sum(v, axis=-1)
    got = _on("compiled", monkeypatch, fn, x)
    want = _on("reference", monkeypatch, fn, x)
    np.testing.assert_array_equal(got[0], want[0])
    for bad in ([[2**62 + 2**40, -(2**62)]], [[2**53, 2]], [[-(2**63), 2**62]]):
        for backend in ("compiled", "reference"):
            monkeypatch.setenv("TESSERA_BACKEND", backend)
            with pytest.raises(tessera.ArgumentError, match="passed 2\\^53"):
                tessera.jit(fn)(tessera.tensor(np.array(bad, dtype=np.int64)))
    # The one documented difference: a partial sum of exactly 2^53 + 1 is an
    # error compiled, where the reference's double rounds it to 2^53.
    edge = tessera.tensor(np.array([[2**53, 1]], dtype=np.int64))
    monkeypatch.setenv("TESSERA_BACKEND", "reference")
    assert tessera.jit(fn)(edge).numpy()[0] == 2**53
    monkeypatch.setenv("TESSERA_BACKEND", "compiled")
    with pytest.raises(tessera.ArgumentError, match="passed 2\\^53"):
        tessera.jit(fn)(edge)


@pytest.mark.parametrize("policy", ["bf16 @stochastic_round", "fp16 @accum(fp32) @stochastic_round",
                                    "fp16 @accum(fp16) @stochastic_round", "fp32 @stochastic_round"])
def test_stochastic_results_of_reductions_and_normalizations(monkeypatch, policy):
    """A reduction's or normalization's result that rounds stochastically
    draws Philox(0, j) for its element j, as the reference does; a consumer
    fused after the reduction draws its own."""
    rng = np.random.default_rng(10)
    x = tessera.tensor(rng.standard_normal((13, 300)) * 5, policy)
    g = tessera.tensor(rng.standard_normal(300), policy)

    def f(x, g):
        return (ops.sum(x, axis=1) * 3.0, ops.mean(x, axis=0), ops.max(x, axis=1), ops.softmax_safe(x),
                ops.logsumexp(x, axis=-1), ops.layernorm_safe(x, g, g), ops.rmsnorm_safe(x, g))

    monkeypatch.setenv("TESSERA_BACKEND", "compiled")
    got = [o.codes() for o in tessera.jit(f)(x, g)]
    monkeypatch.setenv("TESSERA_BACKEND", "reference")
    want = [o.codes() for o in tessera.jit(f)(x, g)]
    for k, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(a, b, err_msg=f"output {k}")


def _order_sensitive_rows():
    """Rows whose max/min depend on the order of the reduction: NaNs with
    different payloads (the reference returns the first), extremes that are
    zeros of both signs (the first zero), infinities, and plain rows, at
    lengths that are and are not multiples of the strand count."""
    nan_a = np.array([0x7FC00001], np.uint32).view(np.float32)[0]
    nan_b = np.array([0xFFC00123], np.uint32).view(np.float32)[0]
    rows = []
    for n in (5, 16, 37):
        base = -np.arange(1, n + 1, dtype=np.float32)
        r = base.copy(); r[n // 2] = -0.0; r[n - 1] = 0.0; rows.append(r)       # max: the first zero, -0
        r = base.copy(); r[1] = 0.0; r[n - 1] = -0.0; rows.append(r)            # max: +0
        r = -base.copy(); r[0] = 0.0; r[n - 1] = -0.0; rows.append(r)           # min: +0 first
        if n > 16:  # the first zero in a later strand than the second
            r = base.copy(); r[5] = -0.0; r[16] = 0.0; rows.append(r)
            r = -base.copy(); r[5] = 0.0; r[16] = -0.0; rows.append(r)
        r = base.copy(); r[n - 1] = nan_a; r[1] = nan_b; rows.append(r)         # the first NaN is nan_b
        r = base.copy(); r[n - 2] = np.inf; r[0] = np.inf; rows.append(r)
        r = np.full(n, -np.inf, np.float32); rows.append(r)
        r = np.full(n, np.inf, np.float32); r[2] = nan_a; rows.append(r)
        rows.append(np.random.default_rng(n).standard_normal(n).astype(np.float32))
    return rows


@pytest.mark.parametrize("op", ["max", "min", "softmax", "logsumexp"])
def test_order_sensitive_rows_match_the_reference_bitwise(monkeypatch, op):
    fn = {"max": lambda x: ops.max(x, axis=-1), "min": lambda x: ops.min(x, axis=-1),
          "softmax": lambda x: ops.softmax_safe(x, axis=-1), "logsumexp": lambda x: ops.logsumexp(x, axis=-1)}[op]
    for row in _order_sensitive_rows():
        x = tessera.tensor(np.stack([row, row[::-1].copy()]))
        monkeypatch.setenv("TESSERA_BACKEND", "compiled")
        got = tessera.jit(fn)(x).numpy()
        monkeypatch.setenv("TESSERA_BACKEND", "reference")
        want = tessera.jit(fn)(x).numpy()
        # A NaN result is NaN in both; its sign and payload are open
        # (docs/design/0005-schedule-ir.md). Every other result, zeros'
        # signs included, has the reference's bits.
        assert np.array_equal(np.isnan(got), np.isnan(want)), f"{op} of {row!r}: {got} against {want}"
        both = ~np.isnan(want)
        np.testing.assert_array_equal(got[both].view(np.uint32), want[both].view(np.uint32), err_msg=f"{op} of {row!r}")


def _bits_equal(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert np.array_equal(np.isnan(got), np.isnan(want)), what
    both = ~np.isnan(want)
    np.testing.assert_array_equal(got[both].view(np.uint32), want[both].view(np.uint32), err_msg=what)


def test_softmax_gradient_is_one_kernel_with_the_reference_bits(monkeypatch):
    """grad of a loss through softmax_safe: the softmax and its gradient
    (softmax_linear) share one kernel, which keeps exp(x - max) in the
    gradient's buffer; with value_and_grad, y is a second result of that
    kernel. Rows with +inf, -inf only and NaN take the special branch."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((37, 300)).astype(np.float32)
    t = rng.standard_normal((37, 300)).astype(np.float32)
    x[3, 5] = np.inf
    x[4, :] = -np.inf
    x[5, 7] = np.nan
    x[6, 1] = x[6, 9] = np.inf
    args = (tessera.tensor(x), tessera.tensor(t))

    def loss(x, t):
        return ops.sum(ops.softmax_safe(x, axis=-1) * t)

    def loss2(x, t):  # y is read by two consumers: the kernel writes it too
        y = ops.softmax_safe(x, axis=-1)
        return ops.sum(y * t) + ops.sum(y * y)

    monkeypatch.setenv("TESSERA_BACKEND", "compiled")
    jitted = tessera.jit(tessera.grad(loss))
    jitted(*args)
    schedule = jitted.inspect_ir("schedule")
    assert "graph.softmax_safe" in schedule and "graph.softmax_linear" in schedule
    fused = [k for k in schedule.split("schedule.kernel")[1:] if "graph.softmax_safe" in k]
    assert len(fused) == 1 and "graph.softmax_linear" in fused[0], schedule
    # value_and_grad(loss): the loss reads y, so the fused kernel writes y as
    # well; loss2's gradient reaches softmax_linear through y itself, so
    # there the two stay apart (fusing would make a cycle).
    jitted = tessera.jit(tessera.value_and_grad(loss))
    jitted(*args)
    assert ":2 = schedule.kernel" in jitted.inspect_ir("schedule")
    for fn in (tessera.grad(loss), tessera.value_and_grad(loss), tessera.value_and_grad(loss2),
               tessera.grad(loss, argnums=(0, 1))):
        got = _on("compiled", monkeypatch, fn, *args)
        want = _on("reference", monkeypatch, fn, *args)
        for g, w in zip(got, want):
            _bits_equal(g.astype(np.float32), w.astype(np.float32), str(fn))


def test_softmax_gradient_in_bf16_fuses_through_the_cast_of_y(monkeypatch):
    """autodiff reads a bf16 y through a cast to fp32: the softmax, both
    casts and the gradient share one kernel (exp(x - max) parked in the fp32
    gradient's buffer, y rounded to bf16 as stored), with the reference's
    bits."""
    rng = np.random.default_rng(4)
    x = ops.cast(tessera.tensor(rng.standard_normal((9, 70)).astype(np.float32)), "bf16")
    t = ops.cast(tessera.tensor(rng.standard_normal((9, 70)).astype(np.float32)), "bf16")
    fn = tessera.grad(lambda x, t: ops.sum(ops.softmax_safe(x, axis=-1) * t))
    monkeypatch.setenv("TESSERA_BACKEND", "compiled")
    jitted = tessera.jit(fn)
    jitted(x, t)
    schedule = jitted.inspect_ir("schedule")
    kernels = schedule.split("schedule.kernel")[1:]
    assert len(kernels) == 1 and "graph.softmax_safe" in kernels[0] and "graph.softmax_linear" in kernels[0], schedule
    got = _on("compiled", monkeypatch, fn, x, t)
    want = _on("reference", monkeypatch, fn, x, t)
    np.testing.assert_array_equal(got[0], want[0])


@pytest.mark.parametrize("m,k,n", [(2, 8, 4), (1, 3, 1), (7, 33, 17), (130, 70, 200), (64, 300, 16), (130, 300, 200)])
def test_gemm_blocks_follow_small_shapes_with_the_same_bits(monkeypatch, m, k, n):
    """The CPU GEMM block shrinks to small static sizes (schedule-tile); the
    sum over k keeps its order, so the bits are the reference's at every
    size, transposed operands and a fused epilogue included."""
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    a = tessera.tensor(rng.standard_normal((m, k)).astype(np.float32))
    b = tessera.tensor(rng.standard_normal((k, n)).astype(np.float32))
    fn = lambda x, y: (ops.relu(ops.matmul(x, y) + 0.5), ops.gemm(y, x, transpose_a=True, transpose_b=True))
    got = _on("compiled", monkeypatch, fn, a, b)
    want = _on("reference", monkeypatch, fn, a, b)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8"])
def test_integer_matmuls_compile_exactly(monkeypatch, dtype):
    """Integer products run compiled: exact, with the reference's result
    dtype, batched and transposed, fused with an epilogue."""
    rng = np.random.default_rng(11)
    lo = 0 if dtype == "uint8" else -100
    a = tessera.tensor(rng.integers(lo, 100, (2, 5, 300)).astype(dtype))
    b = tessera.tensor(rng.integers(lo, 100, (300, 3)).astype(dtype))
    bt = tessera.tensor(rng.integers(lo, 100, (4, 300)).astype(dtype))
    fn = lambda x, y, z: (ops.matmul(x, y) * 2 + 1, ops.gemm(x[0], z, transpose_b=True))
    got = _on("compiled", monkeypatch, fn, a, b, bt)
    want = _on("reference", monkeypatch, fn, a, b, bt)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(got[0], (a.numpy().astype(np.int64) @ b.numpy().astype(np.int64)) * 2 + 1)


def test_integer_matmul_errors_match_the_reference(monkeypatch):
    fn = lambda v: ops.matmul(v, v)
    cases = [(np.array([[2**16, 2**16], [2**16, 2**16]], np.int32), "overflows its int32 result"),
             (np.array([[2**31 - 1, 1], [1, 1]], np.int32), "passed 2\\^53"),
             (np.array([[2**27, 2**27], [2**27, 2**27]], np.int64), "passed 2\\^53"),
             (np.array([[2**40, 0], [0, 2**40]], np.int64), "passed 2\\^53")]
    for x, message in cases:
        for backend in ("compiled", "reference"):
            monkeypatch.setenv("TESSERA_BACKEND", backend)
            with pytest.raises(tessera.ArgumentError, match=message):
                tessera.jit(fn)(tessera.tensor(x))


@pytest.mark.parametrize("policy", ["bf16 @stochastic_round", "fp16 @accum(fp32) @stochastic_round",
                                    "fp32 @stochastic_round"])
def test_stochastic_gemm_results_draw_the_reference_bits(monkeypatch, policy):
    """A matrix product whose result rounds stochastically draws Philox(0, j)
    for its element j, alone (batched, transposed) and with an epilogue that
    rounds stochastically too; K <= 256, where the blocked order is the
    reference's sequential one."""
    rng = np.random.default_rng(12)
    a = ops.cast(tessera.tensor(rng.standard_normal((2, 9, 200)).astype(np.float32)), policy)
    b = ops.cast(tessera.tensor(rng.standard_normal((200, 13)).astype(np.float32)), policy)
    bt = ops.cast(tessera.tensor(rng.standard_normal((5, 200)).astype(np.float32)), policy)
    bias = ops.cast(tessera.tensor(rng.standard_normal(13).astype(np.float32)), policy)
    fn = lambda x, y, z, c: (ops.matmul(x, y), ops.matmul(x, y) + c, ops.gemm(x[1], z, transpose_b=True))
    codes = {}
    for backend in ("compiled", "reference"):
        monkeypatch.setenv("TESSERA_BACKEND", backend)
        codes[backend] = [o.codes() for o in tessera.jit(fn)(a, b, bt, bias)]
    for g, w in zip(codes["compiled"], codes["reference"]):
        np.testing.assert_array_equal(g, w)
