"""tessera.ops.fft and friends against numpy.fft (float64) and their gradients against JAX.

Tolerance (docs/design/0016-complex-and-fft.md): for a transform of length n computed with part
precision eps (fp32 for complex64, fp64 for complex128),

    ||y - y_ref||_2 <= 4 * max(1, log2 n) * eps * ||y_ref||_2,

y_ref being numpy's float64 transform of the same (already rounded) input. Measured worst cases
over the lengths below: the factor 4 is at most 0.55 for complex64 and 1.23 for complex128 (n = 41,
a Bluestein length).
"""

import math
import warnings

import numpy as np
import pytest

import tessera
from tessera import ops
from tessera import _C
from tessera.errors import ArgumentError, DtypeError, ShapeError

EPS = {np.complex64: float(np.finfo(np.float32).eps), np.complex128: float(np.finfo(np.float64).eps)}
PRIMES = [p for p in range(2, 1000) if all(p % d for d in range(2, int(p ** 0.5) + 1))]


@pytest.fixture(autouse=True)
def reference(monkeypatch):
    # The sweeps below check the algorithm (its accuracy, its fixed order) over hundreds of lengths
    # on the reference executor: a compiled kernel is specialized to its length, and compiling
    # each would take minutes. The compiled kernels compute the same arithmetic; the tests at the
    # end check them against the reference bit for bit on a set of lengths. Complex elementwise
    # ops have no compiled kernel yet, so warnings are silenced where they run.
    monkeypatch.setenv("TESSERA_EAGER", "reference")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _c(rng, shape, dtype=np.complex128):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def _check(got, want, n, dtype):
    bound = 4 * max(1.0, math.log2(n)) * EPS[dtype]
    err = np.linalg.norm(got.astype(np.complex128) - want) / max(np.linalg.norm(want), 1e-300)
    assert err <= bound, f"n={n} {dtype.__name__}: relative error {err:.3g} > {bound:.3g}"


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("lengths", ["1..64", "primes<1000", "4096"])
def test_fft_and_ifft_match_numpy(dtype, lengths):
    rng = np.random.default_rng(len(lengths))
    ns = {"1..64": range(1, 65), "primes<1000": PRIMES, "4096": [4096]}[lengths]
    for n in ns:
        x = _c(rng, (2, n), dtype)
        x64 = x.astype(np.complex128)
        y = ops.fft(tessera.tensor(x))
        assert y.dtype == np.dtype(dtype).name and y.shape == (2, n)
        _check(y.numpy(), np.fft.fft(x64), n, dtype)
        _check(ops.ifft(tessera.tensor(x)).numpy(), np.fft.ifft(x64), n, dtype)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_real_transforms_and_norms_match_numpy(dtype, norm):
    rng = np.random.default_rng(7)
    real = np.float32 if dtype == np.complex64 else np.float64
    for n in list(range(1, 33)) + [97, 210, 343, 1000, 4096]:
        x = rng.standard_normal((3, n)).astype(real)
        X = tessera.tensor(x)
        y = ops.rfft(X, norm=norm)
        assert y.dtype == np.dtype(dtype).name and y.shape == (3, n // 2 + 1)
        _check(y.numpy(), np.fft.rfft(x.astype(np.float64), norm=norm), n, dtype)
        h = y.numpy()
        back = ops.irfft(tessera.tensor(h), n=n, norm=norm)
        assert back.dtype == ("fp32" if real == np.float32 else "fp64") and back.shape == (3, n)
        _check(back.numpy(), np.fft.irfft(h.astype(np.complex128), n=n, norm=norm), n, dtype)
        # A half spectrum that is not one of a real line: the imaginary parts of bin 0 and (n even)
        # bin n/2 must not reach the result (the split form of even n drops them explicitly).
        hc = _c(rng, (3, n // 2 + 1), dtype)
        _check(ops.irfft(tessera.tensor(hc), n=n, norm=norm).numpy(),
               np.fft.irfft(hc.astype(np.complex128), n=n, norm=norm), n, dtype)
        z = _c(rng, (3, n), dtype)
        _check(ops.fft(tessera.tensor(z), norm=norm).numpy(), np.fft.fft(z.astype(np.complex128), norm=norm), n, dtype)
        _check(ops.ifft(tessera.tensor(z), norm=norm).numpy(), np.fft.ifft(z.astype(np.complex128), norm=norm), n,
               dtype)


def test_n_crops_and_pads_and_axis_like_numpy():
    rng = np.random.default_rng(3)
    x = _c(rng, (5, 6, 7))
    for axis in (0, 1, 2, -1, -3):
        for n in (1, 4, 6, 9, 13):
            np.testing.assert_allclose(ops.fft(tessera.tensor(x), n=n, axis=axis).numpy(),
                                       np.fft.fft(x, n=n, axis=axis), rtol=1e-13, atol=1e-13)
            np.testing.assert_allclose(ops.irfft(tessera.tensor(x), n=n, axis=axis).numpy(),
                                       np.fft.irfft(x, n=n, axis=axis), rtol=1e-13, atol=1e-13)
            np.testing.assert_allclose(ops.rfft(tessera.tensor(x.real), n=n, axis=axis).numpy(),
                                       np.fft.rfft(x.real, n=n, axis=axis), rtol=1e-13, atol=1e-13)
    # irfft's default n is 2 * (bins - 1)
    assert ops.irfft(tessera.tensor(x)).shape == (5, 6, 12)


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_2d_forms_match_numpy(norm):
    rng = np.random.default_rng(4)
    x = _c(rng, (3, 10, 12))
    r = x.real.copy()
    T = tessera.tensor
    cases = [
        (ops.fft2(T(x), norm=norm), np.fft.fft2(x, norm=norm)),
        (ops.ifft2(T(x), norm=norm), np.fft.ifft2(x, norm=norm)),
        (ops.fft2(T(x), s=(7, 5), axes=(0, 2), norm=norm), np.fft.fft2(x, s=(7, 5), axes=(0, 2), norm=norm)),
        (ops.rfft2(T(r), norm=norm), np.fft.rfft2(r, norm=norm)),
        (ops.rfft2(T(r), axes=(2, 0), norm=norm), np.fft.rfft2(r, axes=(2, 0), norm=norm)),
        (ops.irfft2(T(x), norm=norm), np.fft.irfft2(x, norm=norm)),
        (ops.irfft2(T(x), s=(9, 11), norm=norm), np.fft.irfft2(x, s=(9, 11), norm=norm)),
    ]
    for got, want in cases:
        assert got.shape == want.shape
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12 * np.abs(want).max())


@pytest.mark.parametrize("norm", [None, "ortho"])
def test_nd_forms_match_numpy(norm):
    rng = np.random.default_rng(7)
    x = _c(rng, (3, 6, 5, 4))
    r = x.real.copy()
    T = tessera.tensor
    cases = [
        (ops.fftn(T(x), norm=norm), np.fft.fftn(x, norm=norm)),
        (ops.ifftn(T(x), norm=norm), np.fft.ifftn(x, norm=norm)),
        (ops.fftn(T(x), s=(4, 7), norm=norm), np.fft.fftn(x, s=(4, 7), norm=norm)),
        (ops.fftn(T(x), axes=(2, 0, 3), norm=norm), np.fft.fftn(x, axes=(2, 0, 3), norm=norm)),
        (ops.rfftn(T(r), norm=norm), np.fft.rfftn(r, norm=norm)),
        (ops.rfftn(T(r), s=(5, 8, 6), axes=(1, 3, 0), norm=norm), np.fft.rfftn(r, s=(5, 8, 6), axes=(1, 3, 0), norm=norm)),
        (ops.irfftn(T(x), norm=norm), np.fft.irfftn(x, norm=norm)),
        (ops.irfftn(T(x), s=(3, 9), axes=(1, 2), norm=norm), np.fft.irfftn(x, s=(3, 9), axes=(1, 2), norm=norm)),
    ]
    for got, want in cases:
        assert got.shape == want.shape
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12 * np.abs(want).max())
    # The round trip, and the N-D forms over two axes are the 2-D ones.
    np.testing.assert_allclose(ops.irfftn(ops.rfftn(T(r)), s=r.shape).numpy(), r, atol=1e-12)
    assert np.array_equal(ops.fftn(T(x), axes=(1, 3)).numpy(), ops.fft2(T(x), axes=(1, 3)).numpy())


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_hermitian_transforms_match_numpy(norm):
    rng = np.random.default_rng(9)
    x = _c(rng, (3, 9))
    r = rng.standard_normal((3, 16))
    T = tessera.tensor
    for got, want in [(ops.hfft(T(x), norm=norm), np.fft.hfft(x, norm=norm)),
                      (ops.hfft(T(x), n=11, axis=0, norm=norm), np.fft.hfft(x, n=11, axis=0, norm=norm)),
                      (ops.ihfft(T(r), norm=norm), np.fft.ihfft(r, norm=norm)),
                      (ops.ihfft(T(r), n=13, norm=norm), np.fft.ihfft(r, n=13, norm=norm))]:
        assert got.shape == want.shape
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12 * np.abs(want).max())
    np.testing.assert_allclose(ops.hfft(ops.ihfft(T(r), norm=norm), n=16, norm=norm).numpy(), r, atol=1e-12)


def test_frequencies_and_shifts_match_numpy():
    for n in (1, 2, 7, 8, 9):
        for d in (1.0, 0.1):
            f = ops.fftfreq(n, d)
            assert f.dtype == "fp32" and f.shape == (n,)
            np.testing.assert_array_equal(f.numpy(), np.fft.fftfreq(n, d).astype(np.float32))
            np.testing.assert_array_equal(ops.rfftfreq(n, d, dtype="fp64").numpy(), np.fft.rfftfreq(n, d))
    rng = np.random.default_rng(8)
    for shape in ((7,), (4, 5), (3, 1, 6)):
        x = _c(rng, shape, np.complex64)
        r = rng.standard_normal(shape)
        for axes in (None, 0, (-1,), tuple(range(len(shape)))):
            np.testing.assert_array_equal(ops.fftshift(tessera.tensor(x), axes).numpy(), np.fft.fftshift(x, axes))
            np.testing.assert_array_equal(ops.ifftshift(tessera.tensor(r), axes).numpy(), np.fft.ifftshift(r, axes))
            back = ops.ifftshift(ops.fftshift(tessera.tensor(r), axes), axes)
            np.testing.assert_array_equal(back.numpy(), r)
    # complex128 (16-byte elements) moves part by part, eagerly and under jit.
    z = _c(rng, (5, 6), np.complex128)
    np.testing.assert_array_equal(ops.fftshift(tessera.tensor(z)).numpy(), np.fft.fftshift(z))
    np.testing.assert_array_equal(tessera.jit(lambda t: ops.ifftshift(t, 1))(tessera.tensor(z)).numpy(),
                                  np.fft.ifftshift(z, 1))


def test_policies():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 8))
    assert ops.fft(tessera.tensor(x)).dtype == "complex128"  # fp64 -> complex128
    assert ops.fft(tessera.tensor(x.astype(np.float32))).dtype == "complex64"
    assert ops.rfft(tessera.tensor(x, dtype="bf16")).dtype == "complex64"
    p = tessera.dtype("complex64 @accum(fp64)")
    y = ops.fft(tessera.tensor(x.astype(np.complex64), dtype=p))
    assert y.policy == p  # a complex operand's policy is kept
    assert ops.irfft(y).policy == tessera.dtype("fp32 @accum(fp64)")


def test_bitwise_reproducible_across_runs_batches_and_axes():
    rng = np.random.default_rng(6)
    for n in (64, 97, 360, 1000):
        x = _c(rng, (8, n), np.complex64)
        first = ops.fft(tessera.tensor(x)).numpy()
        for _ in range(10):
            assert np.array_equal(ops.fft(tessera.tensor(x)).numpy(), first)
        # one line alone, and the same lines transformed along axis 0 of the transpose
        assert np.array_equal(ops.fft(tessera.tensor(x[3:4])).numpy(), first[3:4])
        along0 = ops.fft(tessera.tensor(np.ascontiguousarray(x.T)), axis=0).numpy()
        assert np.array_equal(along0.T, first)


def test_bad_arguments_say_what_is_wrong():
    z = tessera.tensor(np.ones((2, 4), np.complex64))
    r = tessera.tensor(np.ones((2, 4), np.float32))
    with pytest.raises(ShapeError, match="axis 2 is out of range for an input of rank 2"):
        ops.fft(z, axis=2)
    with pytest.raises(ArgumentError, match="n must be >= 1"):
        ops.fft(z, n=0)
    with pytest.raises(ArgumentError, match="n must be an int"):
        ops.rfft(r, n=4.5)
    with pytest.raises(ArgumentError, match="norm must be"):
        ops.ifft(z, norm="unitary")
    with pytest.raises(DtypeError, match="takes a complex input .*got fp32"):
        ops.irfft(r)
    with pytest.raises(DtypeError, match="takes a real input, got complex64"):
        ops.rfft(z)
    with pytest.raises(DtypeError, match="needs a floating-point input"):
        ops.fft(tessera.tensor(np.ones(4, np.int32)))
    with pytest.raises(ArgumentError, match="pass n"):
        ops.irfft(tessera.tensor(np.ones((2, 1), np.complex64)))
    with pytest.raises(ShapeError, match="scalar"):
        ops.fft(tessera.tensor(np.complex64(1)))
    with pytest.raises(ArgumentError, match="the same axis twice"):
        ops.fft2(z, axes=(1, -1))
    with pytest.raises(ArgumentError, match=r"s must give one length per axis \(2\)"):
        ops.fft2(z, s=(4,))
    with pytest.raises(ArgumentError, match="axes must name 2 axes"):
        ops.fft2(z, axes=(0,))
    with pytest.raises(ArgumentError, match="s gives 3 lengths for an input of rank 2"):
        ops.fftn(z, s=(2, 2, 2))
    with pytest.raises(ArgumentError, match="d \\(the sample spacing\\) must be a positive finite number"):
        ops.fftfreq(8, d=0.0)
    with pytest.raises(ArgumentError, match="n must be >= 1"):
        ops.rfftfreq(0)


# ---- compiled kernels against the reference ------------------------------------------------

def _same_bits(got, want, what):
    g, w = np.ascontiguousarray(got), np.ascontiguousarray(want)
    assert g.dtype == w.dtype and g.shape == w.shape, what
    view = {4: np.uint32, 8: np.uint64, 16: np.uint64}[g.dtype.itemsize]
    assert np.array_equal(g.view(view), w.view(view)), f"{what}: compiled bits differ from the reference's"


def test_jit_fft_kernels_match_the_reference_bitwise():
    rng = np.random.default_rng(11)
    z64 = tessera.tensor(_c(rng, (3, 60), np.complex64))          # Stockham 5, 3, 4
    z128 = tessera.tensor(_c(rng, (2, 97, 3), np.complex128))     # Bluestein, lines along axis 1
    r32 = tessera.tensor(rng.standard_normal((4, 1000)).astype(np.float32))
    h = tessera.tensor(_c(rng, (2, 9), np.complex64))
    img = tessera.tensor(_c(rng, (6, 16), np.complex64))

    def f(a, b, c, d, e):
        return (ops.fft(a), ops.ifft(a, norm="ortho"), ops.fft(b, axis=1, norm="forward"), ops.rfft(c),
                ops.irfft(d), ops.irfft(d, n=17), ops.fft(a, n=64), ops.fft2(e), ops.rfft2(c[:, :16]))

    compiled = tessera.jit(f)
    got = compiled(z64, z128, r32, h, img)
    schedule = compiled.inspect_ir("schedule")
    assert schedule.count('family = "fft"') >= 10, schedule
    want = f(z64, z128, r32, h, img)  # eager, on the reference executor (the fixture)
    for i, (g, w) in enumerate(zip(got, want)):
        _same_bits(g.numpy(), w.numpy(), f"result {i}")
    np.testing.assert_allclose(got[0].numpy(), np.fft.fft(z64.numpy().astype(np.complex128)), rtol=1e-5, atol=1e-4)


def test_eager_ffts_run_compiled_kernels_that_serve_every_batch(monkeypatch):
    monkeypatch.delenv("TESSERA_EAGER")
    monkeypatch.delenv("TESSERA_BACKEND", raising=False)
    rng = np.random.default_rng(12)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a ReferenceExecutorWarning would fail the test
        first = ops.fft(tessera.tensor(_c(rng, (4, 48), np.complex64)))
        kernels = _C._eager_cache_size()
        for shape in [(7, 48), (2, 3, 48), (9, 48)]:
            x = _c(rng, shape, np.complex64)
            y = ops.fft(tessera.tensor(x)).numpy()
            monkeypatch.setenv("TESSERA_EAGER", "reference")
            _same_bits(y, ops.fft(tessera.tensor(x)).numpy(), f"fft of {shape}")
            monkeypatch.delenv("TESSERA_EAGER")
        assert _C._eager_cache_size() == kernels, "a new batch shape compiled a new kernel"
        along0 = ops.ifft(tessera.tensor(_c(rng, (48, 5), np.complex128)), axis=0)
    assert first.shape == (4, 48) and along0.dtype == "complex128"


# ---- gradients against JAX ------------------------------------------------------------------

def _jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax


GRAD_CASES = {
    "fft": (lambda o, a, nm: o.fft(a, norm=nm), "c", (3, 8)),
    "fft_n_pad": (lambda o, a, nm: o.fft(a, n=11, norm=nm), "c", (3, 8)),
    "fft_real_input": (lambda o, a, nm: o.fft(a, norm=nm), "r", (3, 8)),
    "ifft_axis0_crop": (lambda o, a, nm: o.ifft(a, n=2, axis=0, norm=nm), "c", (3, 8)),
    "ifft_prime": (lambda o, a, nm: o.ifft(a, norm=nm), "c", (2, 13)),
    "rfft": (lambda o, a, nm: o.rfft(a, norm=nm), "r", (3, 9)),
    "rfft_n_crop": (lambda o, a, nm: o.rfft(a, n=6, norm=nm), "r", (3, 9)),
    "irfft_even": (lambda o, a, nm: o.irfft(a, norm=nm), "c", (3, 5)),
    "irfft_odd": (lambda o, a, nm: o.irfft(a, n=9, norm=nm), "c", (3, 5)),
    "fft2": (lambda o, a, nm: o.fft2(a, norm=nm), "c", (4, 6)),
    "ifft2_s": (lambda o, a, nm: o.ifft2(a, s=(5, 3), norm=nm), "c", (4, 6)),
    "rfft2": (lambda o, a, nm: o.rfft2(a, norm=nm), "r", (4, 6)),
    "irfft2": (lambda o, a, nm: o.irfft2(a, norm=nm), "c", (4, 6)),
}


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
@pytest.mark.parametrize("case", sorted(GRAD_CASES))
def test_vjp_and_jvp_against_jax(case, norm):
    jax = _jax()
    f, kind, shape = GRAD_CASES[case]
    rng = np.random.default_rng(abs(hash((case, norm))) % 2**32)
    x = _c(rng, shape) if kind == "c" else rng.standard_normal(shape)
    t = _c(rng, shape) if kind == "c" else rng.standard_normal(shape)
    out, fn = tessera.vjp(lambda a: f(ops, a, norm), tessera.tensor(x))
    o = out.numpy()
    ct = _c(rng, o.shape) if np.iscomplexobj(o) else rng.standard_normal(o.shape)
    got, = fn(tessera.tensor(ct))
    want_o, fj = jax.vjp(lambda a: f(jax.numpy.fft, a, norm), x)
    want, = fj(ct)
    np.testing.assert_allclose(o, np.asarray(want_o), rtol=1e-12, atol=1e-12)
    assert np.iscomplexobj(got.numpy()) == np.iscomplexobj(np.asarray(want))
    np.testing.assert_allclose(got.numpy(), np.asarray(want), rtol=1e-12, atol=1e-12)
    _, got_t = tessera.jvp(lambda a: f(ops, a, norm), (tessera.tensor(x),), (tessera.tensor(t),))
    _, want_t = jax.jvp(lambda a: f(jax.numpy.fft, a, norm), (x,), (t,))
    np.testing.assert_allclose(got_t.numpy(), np.asarray(want_t), rtol=1e-12, atol=1e-12)


def test_grad_of_a_spectral_loss_matches_jax():
    jax = _jax()
    x = np.random.default_rng(8).standard_normal((4, 16))

    def loss(o, a):
        return o.sum(o.abs(o.rfft(a)) * 0.5) if o is ops else jax.numpy.sum(jax.numpy.abs(jax.numpy.fft.rfft(a)) * 0.5)

    got = tessera.grad(lambda a: loss(ops, a))(tessera.tensor(x))
    want = jax.grad(lambda a: loss(None, a))(x)
    np.testing.assert_allclose(got.numpy(), np.asarray(want), rtol=1e-12, atol=1e-12)


def test_jit_grad_through_ffts_is_compiled_and_matches_jax():
    # The gradient's transforms, resizes and real parts all compile (no complex arithmetic: each
    # transform has one consumer, so no complex cotangents are summed).
    jax = _jax()
    rng = np.random.default_rng(13)
    x, w1, w2 = (rng.standard_normal((4, 24)) for _ in range(3))

    def loss(o, a):
        if o is ops:
            return o.sum(o.real(o.fft(a)) * w1) + o.sum(o.irfft(o.rfft(a), n=24) * w2 * w2)
        jnp = jax.numpy
        return jnp.sum(jnp.real(jnp.fft.fft(a)) * w1) + jnp.sum(jnp.fft.irfft(jnp.fft.rfft(a), n=24) * w2 * w2)

    step = tessera.jit(tessera.grad(lambda a: loss(ops, a)))
    got = step(tessera.tensor(x))
    schedule = step.inspect_ir("schedule")
    assert 'family = "fft"' in schedule and 'family = "complex"' in schedule, schedule
    want = jax.grad(lambda a: loss(None, a))(x)
    np.testing.assert_allclose(got.numpy(), np.asarray(want), rtol=1e-12, atol=1e-12)
    _same_bits(got.numpy(), tessera.grad(lambda a: loss(ops, a))(tessera.tensor(x)).numpy(), "jit(grad) vs eager")


def test_jit_grad_of_a_spectral_magnitude_loss_is_compiled_and_matches_jax():
    jax = _jax()
    x = np.random.default_rng(15).standard_normal((4, 16))

    def loss(o, a):
        return o.sum(o.abs(o.rfft(a)) * 0.5) if o is ops else jax.numpy.sum(jax.numpy.abs(jax.numpy.fft.rfft(a)) * 0.5)

    step = tessera.jit(tessera.grad(lambda a: loss(ops, a)))
    got = step(tessera.tensor(x))
    want = jax.grad(lambda a: loss(None, a))(x)
    np.testing.assert_allclose(got.numpy(), np.asarray(want), rtol=1e-12, atol=1e-12)


def test_jit_grad_of_a_spectral_layer_with_complex_weights_matches_jax():
    # An FNO-style layer: rfft, a complex weight per mode, irfft. The gradient with respect to the
    # input and to the complex weights (JAX's convention) compiles whole: transforms, complex
    # products and sums of complex cotangents.
    jax = _jax()
    rng = np.random.default_rng(14)
    x = rng.standard_normal((3, 32))
    w = _c(rng, (17,), np.complex128)
    g = rng.standard_normal((3, 32))

    def loss(o, a, k):
        if o is ops:
            return o.sum(o.irfft(o.rfft(a) * k, n=32) * g)
        jnp = jax.numpy
        return jnp.sum(jnp.fft.irfft(jnp.fft.rfft(a) * k, n=32) * g)

    step = tessera.jit(tessera.grad(lambda a, k: loss(ops, a, k), argnums=(0, 1)))
    got = step(tessera.tensor(x), tessera.tensor(w))
    assert 'family = "complex"' in step.inspect_ir("schedule")
    want = jax.grad(lambda a, k: loss(None, a, k), argnums=(0, 1))(x, w)
    for gt, wt in zip(got, want):
        np.testing.assert_allclose(gt.numpy(), np.asarray(wt), rtol=1e-12, atol=1e-12)


def test_a_bad_stage_knob_is_an_error_on_every_target(monkeypatch):
    # TESSERA_FFT_STAGES is read whenever an executable compiles, on the CPU too (where lines stay
    # whole), so a mistyped value is never accepted and ignored.
    monkeypatch.setenv("TESSERA_FFT_STAGES", "2")
    with pytest.raises(ArgumentError, match="TESSERA_FFT_STAGES is '2'; expected 0 or 1"):
        tessera.jit(lambda a: ops.fft(a))(tessera.tensor(np.ones((2, 8), np.complex64)))
