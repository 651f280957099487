"""Compiled FFTs and complex-part kernels on cuda tensors: the CUDA executable
against the CPU executable (the same plan and order, so the same bits), over
runs, batches and eager calls. GPU tests skip without a device."""

import numpy as np
import pytest

import tessera
from tessera import _C

ops = tessera.ops
HAS_GPU = _C._cuda_available()
pytestmark = pytest.mark.skipif(not HAS_GPU, reason=f"no CUDA device: {_C._cuda_unavailable_reason()}")


def _c(rng, shape, dtype):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view({4: np.uint32, 8: np.uint64, 16: np.uint64}[a.dtype.itemsize])


def _spectral(a, b, c, d, e):
    return (ops.fft(a), ops.ifft(a, norm="ortho"), ops.fft(b, axis=1), ops.rfft(c), ops.irfft(ops.rfft(c), n=1000),
            ops.fft2(d), ops.real(ops.ifft(a)), ops.fft(a, n=5000), ops.fft(b, axis=0, norm="forward"),
            ops.fft(e, axis=1), ops.rfft(c, n=998))


def _inputs(rng):
    return (_c(rng, (8, 4096), np.complex64),       # Stockham, 4096 points per line
            _c(rng, (5, 97, 3), np.complex128),     # Bluestein (M = 196), lines along axis 1
            rng.standard_normal((16, 1000)).astype(np.float32),  # rfft splits: 500 complex points
            _c(rng, (64, 48), np.complex64),        # fft2: 4 adjacent lines per group along axis 0
            _c(rng, (4, 16, 3), np.complex64))      # groups of 4 lines straddle two outer indices


def test_ffts_on_the_gpu_give_the_cpu_bits_on_every_run():
    rng = np.random.default_rng(21)
    host = _inputs(rng)
    f = tessera.jit(_spectral)
    want = [w.numpy() for w in f(*(tessera.tensor(h) for h in host))]
    dev = [tessera.tensor(h).to("cuda:0") for h in host]
    first = None
    for _ in range(10):
        got = [g.to("cpu").numpy() for g in f(*dev)]
        if first is None:
            first = got
            for i, (g, w) in enumerate(zip(got, want)):
                assert g.dtype == w.dtype and g.shape == w.shape, i
                assert np.array_equal(_bits(g), _bits(w)), f"result {i}: GPU bits differ from the CPU's"
        for g, f0 in zip(got, first):
            assert np.array_equal(_bits(g), _bits(f0))
    np.testing.assert_allclose(want[0], np.fft.fft(host[0].astype(np.complex128)), rtol=1e-4, atol=1e-3)


def test_spectral_filtering_with_complex_arithmetic_on_the_gpu_gives_the_cpu_bits():
    # An FNO-style layer: rfft, a complex weight per mode (mul), a division, irfft; and the
    # spectrum's magnitude.
    rng = np.random.default_rng(24)
    x = rng.standard_normal((32, 256)).astype(np.float32)
    w = _c(rng, (129,), np.complex64)
    d = _c(rng, (129,), np.complex64)

    def layer(x, w, d):
        z = ops.rfft(x)
        return ops.irfft((z * w + z) / d - ops.conj(z), n=256), ops.real(z * ops.conj(z)), ops.abs(z)

    f = tessera.jit(layer)
    want = [t.numpy() for t in f(*(tessera.tensor(v) for v in (x, w, d)))]
    got = [t.to("cpu").numpy() for t in f(*(tessera.tensor(v).to("cuda:0") for v in (x, w, d)))]
    for g, wt in zip(got, want):
        assert np.array_equal(_bits(g), _bits(wt))


def test_jit_grad_through_ffts_on_the_gpu_gives_the_cpu_bits():
    rng = np.random.default_rng(22)
    x, w1, w2 = (rng.standard_normal((6, 40)) for _ in range(3))

    def loss(a, w1, w2):
        return ops.sum(ops.real(ops.fft(a)) * w1) + ops.sum(ops.irfft(ops.rfft(a), n=40) * w2)

    step = tessera.jit(tessera.grad(loss))
    want = step(*(tessera.tensor(v) for v in (x, w1, w2))).numpy()
    got = step(*(tessera.tensor(v).to("cuda:0") for v in (x, w1, w2))).to("cpu").numpy()
    assert np.array_equal(_bits(got), _bits(want))


def test_eager_ffts_on_the_gpu_run_compiled_kernels():
    rng = np.random.default_rng(23)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ReferenceExecutorWarning
        for shape in [(4, 360), (9, 360)]:
            x = _c(rng, shape, np.complex64)
            got = ops.fft(tessera.tensor(x).to("cuda:0")).to("cpu").numpy()
            want = ops.fft(tessera.tensor(x)).numpy()
            assert np.array_equal(_bits(got), _bits(want)), shape


def test_lines_longer_than_shared_memory_run_in_stages_or_global_scratch_with_the_cpu_bits(monkeypatch):
    # 32768 complex64 points need 512 KiB of shared arrays, past the 227 KiB a block may take: the
    # line runs in two stages of 256 and 128 points (docs/design/0034-fft-stages.md), or with
    # TESSERA_FFT_STAGES=0 in global scratch, as a Bluestein 10007 (M = 20160, 315 KiB) always does.
    # The CPU runs each line whole.
    rng = np.random.default_rng(25)
    for stages in ("1", "0"):
        monkeypatch.setenv("TESSERA_FFT_STAGES", stages)
        x = _c(rng, (3, 32768), np.complex64)
        y = _c(rng, (2, 2, 65536), np.complex64)
        p = _c(rng, (2, 10007), np.complex64)
        f = tessera.jit(lambda a, c, b: (ops.fft(a), ops.ifft(c, norm="ortho"), ops.ifft(b)))
        want = [t.numpy() for t in f(tessera.tensor(x), tessera.tensor(y), tessera.tensor(p))]
        got = [t.to("cpu").numpy() for t in f(tessera.tensor(x).to("cuda:0"), tessera.tensor(y).to("cuda:0"),
                                                tessera.tensor(p).to("cuda:0"))]
        for g, w in zip(got, want):
            assert np.array_equal(_bits(g), _bits(w)), f"TESSERA_FFT_STAGES={stages}"
        np.testing.assert_allclose(want[0], np.fft.fft(x.astype(np.complex128)), rtol=1e-4, atol=1e-2)
        # and inside a CUDA graph, replayed with new inputs
        g = tessera.jit(lambda a: ops.fft(a), capture_graph=True)
        for _ in range(2):
            x = _c(rng, (3, 32768), np.complex64)
            got = g(tessera.tensor(x).to("cuda:0")).to("cpu").numpy()
            assert np.array_equal(_bits(got), _bits(f(tessera.tensor(x), tessera.tensor(y), tessera.tensor(p))[0].numpy()))


def test_sin_cos_and_complex_exp_on_the_gpu_give_the_cpu_bits():
    # Tessera's own sine and cosine (tessera/numerics/trigonometric.h) on both sides: fp64 over the
    # whole range (Payne-Hanek past 2^20), fp32, and complex exp of both complex dtypes.
    rng = np.random.default_rng(27)
    x = np.ldexp(rng.uniform(1, 2, 4096), rng.integers(-30, 1000, 4096)) * rng.choice([-1.0, 1.0], 4096)
    x[:4] = [0.0, -0.0, np.inf, np.nan]
    y = (rng.standard_normal(4096) * 30).astype(np.float32)
    z64, z128 = _c(rng, (64, 64), np.complex64) * 5, _c(rng, (4096,), np.complex128) * 50
    f = tessera.jit(lambda a, b, c, d: (ops.sin(a), ops.cos(a), ops.sin(b) * ops.cos(b), ops.exp(c), ops.exp(d)))
    host = (x, y, z64, z128)
    want = [w.numpy() for w in f(*(tessera.tensor(h) for h in host))]
    got = [g.to("cpu").numpy() for g in f(*(tessera.tensor(h).to("cuda:0") for h in host))]
    for i, (g, w) in enumerate(zip(got, want)):
        assert np.array_equal(_bits(g), _bits(w)), f"result {i}: GPU bits differ from the CPU's"
    np.testing.assert_allclose(want[0][4:], np.sin(x[4:]), rtol=4e-16, atol=0)
