"""Complex storage dtypes (complex64, complex128): tensors, numpy and DLPack, promotion."""

import numpy as np
import pytest

import tessera
from tessera.errors import DtypeError


@pytest.mark.parametrize("np_dtype,name,part", [(np.complex64, "complex64", "fp32"),
                                                 (np.complex128, "complex128", "fp64")])
def test_numpy_round_trip_and_policy(np_dtype, name, part):
    rng = np.random.default_rng(1)
    a = (rng.standard_normal((3, 5)) + 1j * rng.standard_normal((3, 5))).astype(np_dtype)
    t = tessera.tensor(a)
    assert t.dtype == name and t.dtype.is_complex and not t.dtype.is_float
    assert t.dtype.itemsize == np.dtype(np_dtype).itemsize
    assert t.policy.accum == part  # parts accumulate at fp32 / fp64
    out = t.numpy()
    assert out.dtype == np_dtype
    np.testing.assert_array_equal(out, a)
    assert f"[3, 5] {name} @accum({part})" in repr(t)


def test_dlpack_both_ways():
    a = (np.arange(4) + 1j * np.arange(4, 8)).astype(np.complex64)
    t = tessera.from_dlpack(a)
    assert t.dtype == "complex64"
    np.testing.assert_array_equal(np.from_dlpack(t), a)


def test_real_data_into_complex_storage_and_back():
    t = tessera.tensor(np.array([1.5, -2.0]), dtype=tessera.complex128)
    np.testing.assert_array_equal(t.numpy(), np.array([1.5 + 0j, -2.0 + 0j]))
    t = tessera.tensor(np.array([1 + 2j]), dtype="complex64")  # complex128 data rounded to complex64
    assert t.numpy().dtype == np.complex64


def test_complex_data_into_real_storage_is_an_error():
    with pytest.raises(DtypeError, match="complex data cannot be stored as fp32"):
        tessera.tensor(np.array([1 + 2j]), dtype="fp32")


def test_strided_views_keep_both_parts():
    a = (np.arange(12) + 1j * np.arange(12)).reshape(3, 4).astype(np.complex128)
    t = tessera.tensor(a)
    np.testing.assert_array_equal(t.numpy().T.copy(), a.T)
    np.testing.assert_array_equal(tessera.tensor(a[:, ::2]).numpy(), a[:, ::2])


# ---- elementwise ops on complex tensors ------------------------------------------------------

import warnings  # noqa: E402

from tessera import ops  # noqa: E402
from tessera.errors import ReferenceExecutorWarning  # noqa: E402


def _parts(x):
    x = np.ascontiguousarray(x)
    if not np.iscomplexobj(x):
        return x
    return x.view(np.float32 if x.dtype == np.complex64 else np.float64)


def _c(rng, shape, dtype=np.complex128):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


@pytest.fixture(autouse=False)
def quiet():
    # Gradients of complex code may still meet ops that run on the reference executor and say so
    # with a ReferenceExecutorWarning; these tests check values.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@pytest.mark.usefixtures("quiet")
@pytest.mark.parametrize("np_dtype", [np.complex64, np.complex128])
def test_arithmetic_matches_numpy(np_dtype):
    rng = np.random.default_rng(2)
    a, b = _c(rng, (4, 6), np_dtype), _c(rng, (6,), np_dtype)
    x = rng.standard_normal((4, 1)).astype(np.float32)
    A, B, X = tessera.tensor(a), tessera.tensor(b), tessera.tensor(x)
    # Each part is the exact result rounded once to the part dtype: at most half an ulp off the
    # float64 numpy result (a few ulps for exp), so compare against float64 references.
    a64, b64, x64 = a.astype(np.complex128), b.astype(np.complex128), x.astype(np.float64)
    eps = np.finfo(np.float32 if np_dtype == np.complex64 else np.float64).eps
    cases = [(ops.add(A, B), a64 + b64), (ops.sub(A, B), a64 - b64), (ops.mul(A, B), a64 * b64),
             (ops.div(A, B), a64 / b64), (ops.neg(A), -a64), (ops.exp(A), np.exp(a64)),
             (ops.mul(A, X), a64 * x64), (ops.conj(A), np.conj(a64))]
    for got, want in cases:
        assert got.dtype == np.dtype(np_dtype).name
        np.testing.assert_allclose(got.numpy(), want, rtol=4 * eps, atol=4 * eps * np.abs(want).max())
    for got, want in [(ops.abs(A), np.abs(a64)), (ops.real(A), a64.real), (ops.imag(A), a64.imag)]:
        assert got.dtype == ("fp32" if np_dtype == np.complex64 else "fp64")
        np.testing.assert_allclose(got.numpy(), want, rtol=2 * eps)


@pytest.mark.usefixtures("quiet")
def test_complex_from_parts_and_promotion():
    re, im = np.array([1.0, 2.0], np.float32), np.array([3.0, -4.0], np.float64)
    z = ops.complex(tessera.tensor(re), tessera.tensor(im))
    assert z.dtype == "complex128"
    np.testing.assert_array_equal(z.numpy(), re + 1j * im)
    z = ops.complex(tessera.tensor(re), tessera.tensor(re))
    assert z.dtype == "complex64"
    w = ops.add(tessera.tensor(np.ones(2, np.complex64)), tessera.tensor(np.ones(2, np.float64)))
    assert w.dtype == "complex128"  # complex64 + fp64: the wider part


@pytest.mark.usefixtures("quiet")
def test_ops_without_complex_support_say_so():
    z = tessera.tensor(np.ones(3, np.complex64))
    with pytest.raises(DtypeError, match="graph.maximum takes real operands, got complex64"):
        ops.maximum(z, z)
    with pytest.raises(DtypeError, match="graph.lt takes real operands"):
        ops.lt(z, z)
    with pytest.raises(DtypeError, match="graph.tanh takes real operands"):
        ops.tanh(z)
    with pytest.raises(DtypeError, match="graph.complex takes real parts"):
        ops.complex(z, z)


@pytest.mark.parametrize("np_dtype", [np.complex64, np.complex128])
def test_jit_of_complex_arithmetic_matches_the_reference_bitwise(np_dtype, monkeypatch):
    rng = np.random.default_rng(31)
    a = _c(rng, (4, 6), np_dtype)
    b = _c(rng, (6,), np_dtype)
    b[2] = 0  # a zero divisor: NaN parts, in every executor
    b[3] = complex(1e-3, 5.0)  # |im| > |re|: Smith's other branch
    r = rng.standard_normal((4, 6)).astype(np.float32)

    def f(x, y, s):
        return (x + y, x - s, x * y, x / y, -x, s * x, s / y, ops.conj(x) * x, ops.real(x * y), ops.complex(s, s) * y,
                ops.abs(x), ops.abs(x / y))

    ta, tb, tr = tessera.tensor(a), tessera.tensor(b), tessera.tensor(r)
    compiled = tessera.jit(f)
    got = compiled(ta, tb, tr)
    assert compiled.inspect_ir("schedule").count('family = "complex"') >= 9
    monkeypatch.setenv("TESSERA_EAGER", "reference")
    want = f(ta, tb, tr)
    for i, (g, w) in enumerate(zip(got, want)):
        # part by part; a NaN matches any NaN (an arithmetic NaN's sign and payload are left open)
        g, w = (_parts(t.numpy()) for t in (g, w))
        assert g.dtype == w.dtype and np.array_equal(np.isnan(g), np.isnan(w)), f"result {i}"
        bits = np.uint32 if g.dtype == np.float32 else np.uint64
        assert np.array_equal(np.where(np.isnan(g), 0, g).view(bits), np.where(np.isnan(w), 0, w).view(bits)), i
    # and against numpy where the divisor is not zero
    ok = b != 0
    np.testing.assert_allclose(got[3].numpy()[:, ok], a[:, ok] / b[ok], rtol=1e-5 if np_dtype == np.complex64 else 1e-13)
    np.testing.assert_allclose(got[2].numpy(), a * b, rtol=1e-5 if np_dtype == np.complex64 else 1e-13)
    # the magnitude within an ulp or two of numpy's hypot, bit for bit across executors (above)
    np.testing.assert_allclose(got[10].numpy(), np.abs(a), rtol=2 * np.finfo(got[10].numpy().dtype).eps)


@pytest.mark.parametrize("np_dtype", [np.complex64, np.complex128])
def test_jit_of_complex_exp_matches_the_reference_bitwise_and_numpy(np_dtype, monkeypatch):
    rng = np.random.default_rng(12)
    z = _c(rng, (5, 40), np_dtype) * 4
    z[0, :4] = [complex(2.0, 0.0), complex(-1.5, -0.0), complex(0.0, 1e6), complex(-3.0, 1e22)]
    compiled = tessera.jit(lambda a: ops.exp(a))
    got = compiled(tessera.tensor(z))
    assert 'family = "complex"' in compiled.inspect_ir("schedule")
    monkeypatch.setenv("TESSERA_EAGER", "reference")
    want = ops.exp(tessera.tensor(z))
    bits = np.uint32 if np_dtype == np.complex64 else np.uint64
    np.testing.assert_array_equal(_parts(got.numpy()).view(bits), _parts(want.numpy()).view(bits))
    # against numpy in double: each part within a few ulp of the larger part's magnitude
    ref = np.exp(z.astype(np.complex128))
    tol = 4 * np.finfo(np.float32 if np_dtype == np.complex64 else np.float64).eps
    np.testing.assert_allclose(got.numpy(), ref, rtol=tol, atol=0)
    # an imaginary part of +-0 stays exactly that, sign included
    assert np.signbit(got.numpy()[0, 1].imag) and got.numpy()[0, 0].imag == 0


def test_complex_exp_at_the_edges():
    inf = np.inf
    z = np.array([complex(inf, 0.0), complex(-inf, 1.0), complex(inf, 2.0), complex(0.0, inf), complex(np.nan, 0.0),
                  complex(800.0, 0.0), complex(-800.0, 3.0)], np.complex128)
    got = tessera.jit(lambda a: ops.exp(a))(tessera.tensor(z)).numpy()
    with np.errstate(all="ignore"):
        want = np.exp(z)
    # as numpy (C's Annex G) for these; the differences are documented in graph/complex_ops.cpp
    np.testing.assert_array_equal(got, want)


def test_complex_magnitude_at_the_edges():
    big = np.finfo(np.float64).max
    z = np.array([complex(3, 4), complex(0, 0), complex(np.inf, np.nan), complex(np.nan, -np.inf), complex(np.nan, 1),
                  complex(big, big), complex(5e-324, 5e-324), complex(-0.0, 2.0)], np.complex128)
    got = tessera.jit(lambda a: ops.abs(a))(tessera.tensor(z)).numpy()
    want = np.array([5.0, 0.0, np.inf, np.inf, np.nan, np.inf, np.hypot(5e-324, 5e-324), 2.0])
    np.testing.assert_array_equal(got, want)


# ---- gradients against JAX (docs/design/0016-complex-and-fft.md) --------------------------------

def _jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax


def _cases(jax):
    jnp = jax.numpy
    return {
        "mul": (lambda a, b: a * b, lambda a, b: a * b, ("c", "c"), "c"),
        "div": (lambda a, b: a / b, lambda a, b: a / b, ("c", "c"), "c"),
        "exp": (ops.exp, jnp.exp, ("c",), "c"),
        "sub_real": (lambda a, b: a - b, lambda a, b: a - b, ("c", "r"), "c"),
        "mul_real": (lambda a, b: a * b, lambda a, b: a * b, ("r", "c"), "c"),
        "abs": (ops.abs, jnp.abs, ("c",), "r"),
        "real": (ops.real, jnp.real, ("c",), "r"),
        "imag": (ops.imag, jnp.imag, ("c",), "r"),
        "conj": (ops.conj, jnp.conj, ("c",), "c"),
        "complex": (ops.complex, jax.lax.complex, ("r", "r"), "c"),
        "chain": (lambda a: ops.abs(ops.exp(a) * ops.conj(a)), lambda a: jnp.abs(jnp.exp(a) * jnp.conj(a)),
                  ("c",), "r"),
    }


@pytest.mark.usefixtures("quiet")
@pytest.mark.parametrize("case", ["mul", "div", "exp", "sub_real", "mul_real", "abs", "real", "imag", "conj",
                                  "complex", "chain"])
def test_vjp_and_jvp_against_jax(case):
    jax = _jax()
    f_t, f_j, kinds, out_kind = _cases(jax)[case]
    rng = np.random.default_rng(hash(case) % 2**32)
    draw = {"c": lambda: _c(rng, (7,)), "r": lambda: rng.standard_normal(7)}
    args = [draw[k]() for k in kinds]
    ct = draw[out_kind]()
    tangents = [draw[k]() for k in kinds]
    _, fn = tessera.vjp(f_t, *[tessera.tensor(a) for a in args])
    got = fn(tessera.tensor(ct))
    _, fj = jax.vjp(f_j, *args)
    want = fj(ct)
    for g, w in zip(got, want):
        assert np.iscomplexobj(g.numpy()) == np.iscomplexobj(np.asarray(w))
        np.testing.assert_allclose(g.numpy(), np.asarray(w), rtol=1e-12, atol=1e-12)
    _, got_t = tessera.jvp(f_t, tuple(tessera.tensor(a) for a in args), tuple(tessera.tensor(t) for t in tangents))
    _, want_t = jax.jvp(f_j, tuple(args), tuple(tangents))
    np.testing.assert_allclose(got_t.numpy(), np.asarray(want_t), rtol=1e-12, atol=1e-12)


@pytest.mark.usefixtures("quiet")
def test_grad_of_real_loss_is_jax_grad():
    jax = _jax()
    z = _c(np.random.default_rng(5), (6,))
    got = tessera.grad(lambda a: ops.sum(ops.abs(a * a)))(tessera.tensor(z))
    want = jax.grad(lambda a: jax.numpy.sum(jax.numpy.abs(a * a)))(z)
    np.testing.assert_allclose(got.numpy(), np.asarray(want), rtol=1e-12)


def test_sum_and_mean_of_complex_match_numpy():
    rng = np.random.default_rng(9)
    a = _c(rng, (3, 5, 4), np.complex64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = ops.sum(tessera.tensor(a), axis=1)
        m = ops.mean(tessera.tensor(a))
    assert s.dtype == "complex64" and m.dtype == "complex64"
    np.testing.assert_allclose(s.numpy(), a.astype(np.complex128).sum(axis=1), rtol=1e-6)
    np.testing.assert_allclose(m.numpy(), a.astype(np.complex128).mean(), rtol=1e-6)
    with pytest.raises(DtypeError, match="no order"):
        ops.max(tessera.tensor(a))


@pytest.mark.usefixtures("quiet")
def test_broadcast_complex_gradients_sum_back_like_jax():
    jax = _jax()
    rng = np.random.default_rng(10)
    a, b = _c(rng, (4, 3)), _c(rng, (3,))
    ct = _c(rng, (4, 3))
    _, fn = tessera.vjp(lambda x, y: x * y, tessera.tensor(a), tessera.tensor(b))
    got = fn(tessera.tensor(ct))
    _, fj = jax.vjp(lambda x, y: x * y, a, b)
    for g, w in zip(got, fj(ct)):
        np.testing.assert_allclose(g.numpy(), np.asarray(w), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("np_dtype", [np.complex64, np.complex128])
def test_jit_of_complex_sums_matches_the_reference_bitwise(np_dtype, monkeypatch):
    # Compiled as complex(sum(real), sum(imag)): the reference's part-by-part order.
    rng = np.random.default_rng(32)
    z = tessera.tensor(_c(rng, (300, 7), np_dtype))

    def f(a):
        return ops.sum(a, axis=0), ops.mean(a), ops.sum(a, axis=1, keepdims=True)

    compiled = tessera.jit(f)
    got = compiled(z)
    assert "graph.sum" in compiled.inspect_ir("schedule")
    monkeypatch.setenv("TESSERA_EAGER", "reference")
    for i, (g, w) in enumerate(zip(got, f(z))):
        assert np.array_equal(_parts(g.numpy()), _parts(w.numpy())), f"result {i}"
    np.testing.assert_allclose(got[0].numpy(), z.numpy().sum(axis=0), rtol=1e-5)


@pytest.mark.parametrize("np_dtype", [np.complex64, np.complex128])
def test_moves_of_complex_tensors_compile_and_are_exact(np_dtype, monkeypatch):
    # concat, broadcast_to and gather move each part (split-complex-parts), eagerly and under jit,
    # with no reference-executor fallback; complex128's 16-byte elements included.
    rng = np.random.default_rng(41)
    a, b = _c(rng, (2, 3), np_dtype), _c(rng, (4, 3), np_dtype)
    idx = np.array([3, 0, 3, 1], np.int64)
    ta, tb, ti = tessera.tensor(a), tessera.tensor(b), tessera.tensor(idx)

    def f(x, y, i):
        return ops.concat([x, y], axis=0), ops.broadcast_to(x, (5, 2, 3)), ops.gather(y, i, axis=0)

    want = (np.concatenate([a, b], axis=0), np.broadcast_to(a, (5, 2, 3)), b[idx])
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReferenceExecutorWarning)
        for got in (f(ta, tb, ti), tessera.jit(f)(ta, tb, ti)):
            for g, w in zip(got, want):
                assert g.dtype == np.dtype(np_dtype).name
                np.testing.assert_array_equal(_parts(g.numpy()), _parts(w))
    # The reference executor moves complex128 part by part too (as the other shape ops).
    monkeypatch.setenv("TESSERA_EAGER", "reference")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = f(ta, tb, ti) + (ops.transpose(ta, (1, 0)), ops.reshape(tb, (3, 4)), tb[1:, ::2])
    for g, w in zip(got, want + (a.T, b.reshape(3, 4), b[1:, ::2])):
        np.testing.assert_array_equal(_parts(g.numpy()), _parts(w))


@pytest.mark.usefixtures("quiet")
@pytest.mark.parametrize("np_dtype", [np.complex64, np.complex128])
def test_gradient_of_a_complex_gather_against_jax(np_dtype):
    jax = _jax()
    rng = np.random.default_rng(42)
    z = _c(rng, (4, 3), np_dtype)
    idx = np.array([2, 0, 2, 3, 2], np.int64)  # repeated rows: their cotangents add up
    ti = tessera.tensor(idx)
    got = tessera.jit(tessera.grad(lambda t: ops.sum(ops.abs(ops.gather(t, ti, axis=0)))))(tessera.tensor(z))
    want = jax.grad(lambda t: jax.numpy.sum(jax.numpy.abs(t[idx])))(z.astype(np.complex128))
    assert got.dtype == np.dtype(np_dtype).name
    tol = 1e-5 if np_dtype == np.complex64 else 1e-12
    np.testing.assert_allclose(got.numpy(), np.asarray(want), rtol=tol, atol=tol)


@pytest.mark.parametrize("np_dtype", [np.complex64, np.complex128])
def test_jit_captures_a_complex_tensor_as_a_constant(np_dtype):
    """A complex tensor a jit function closes over becomes a constant (its
    two parts, exactly) with its dtype kept, in the value and in the
    gradient of a real loss."""
    rng = np.random.default_rng(5)
    c_np = (rng.standard_normal(6) + 1j * rng.standard_normal(6)).astype(np_dtype)
    x_np = (rng.standard_normal(6) + 1j * rng.standard_normal(6)).astype(np_dtype)
    c = tessera.tensor(c_np)
    f = tessera.jit(lambda x: x * c + c)
    got = f(tessera.tensor(x_np))
    assert got.dtype == c.dtype
    # The same bits as with c passed in, and numpy's values.
    passed = tessera.jit(lambda x, k: x * k + k)(tessera.tensor(x_np), c)
    np.testing.assert_array_equal(got.numpy(), passed.numpy())
    np.testing.assert_allclose(got.numpy(), x_np * c_np + c_np, rtol=1e-6)
    loss = tessera.jit(tessera.grad(lambda x: tessera.ops.sum(tessera.ops.real(x * c))))
    # dL/dre - i dL/dim of L = Re(x c) is c (docs/design/0016's convention).
    np.testing.assert_allclose(loss(tessera.tensor(x_np)).numpy(), c_np, rtol=1e-6)


@pytest.mark.parametrize("np_dtype", [np.complex64, np.complex128])
def test_gradient_of_a_complex_slice_embeds_it_in_zeros(np_dtype, monkeypatch):
    """The gradient of a slice of a complex tensor (graph.slice_embed of the
    complex cotangent) on the reference executor and compiled: c in the
    slice's place, exact zeros around it; stop_gradient passes complex too."""
    rng = np.random.default_rng(9)
    a, c = _c(rng, (4, 3), np_dtype), _c(rng, (2, 3), np_dtype)
    ta, tc = tessera.tensor(a), tessera.tensor(c)

    def loss(x, k):
        return ops.sum(ops.real(ops.slice(x, [1, 0], [3, 3]) * k + tessera.stop_gradient(x)[1:3] * 0))

    want = np.zeros((4, 3), np_dtype)
    want[1:3] = c  # dL/dre - i dL/dim of Re(x k) is k
    compiled = tessera.jit(tessera.grad(loss))(ta, tc)
    monkeypatch.setenv("TESSERA_EAGER", "reference")
    reference = tessera.grad(loss)(ta, tc)
    for got in (compiled, reference):
        assert got.dtype == ta.dtype
        np.testing.assert_array_equal(got.numpy(), want)
