"""tessera.ops.sin and cos: Tessera's own double-precision sine and cosine
(tessera/numerics/trigonometric.h), rounded once to the result's dtype.

- fp64 results within one ulp of numpy's (the C library's) over the whole
  double range, where the argument reduction matters most;
- compiled kernels give the reference executor's bits (the same function on
  every backend), eagerly and under jit;
- derivatives against float64 formulas and JAX.
Narrow dtypes are covered by test_ops_elementwise.py's unary table.
"""

import numpy as np
import pytest

import tessera
from tessera import ops


def _ordinal(x):
    """float64 values as integers ordered like the values, one step per ulp."""
    i = np.ascontiguousarray(x, np.float64).view(np.int64)
    return np.where(i < 0, np.int64(-(2**63)) - i, i)


def _wide_range(rng, n):
    """Random doubles of every magnitude from 2^-60 to 2^1000, both signs, and multiples of pi/2."""
    x = np.ldexp(rng.uniform(1, 2, n), rng.integers(-60, 1000, n)) * rng.choice([-1.0, 1.0], n)
    k = rng.integers(1, 2**40, 64).astype(np.float64)
    return np.concatenate([x, k * (np.pi / 2), rng.uniform(-10, 10, 256)])


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_fp64_within_one_ulp_of_numpy_over_the_whole_range(name):
    rng = np.random.default_rng(3)
    x = _wide_range(rng, 4000)
    got = getattr(ops, name)(tessera.tensor(x)).numpy()
    want = getattr(np, name)(x)
    # each within 1 ulp of the true value, numpy's within about 0.5: 1 step apart at most
    assert np.abs(_ordinal(got) - _ordinal(want)).max() <= 1


@pytest.mark.parametrize("policy", ["fp64", "fp32", "bf16 @accum(fp32)"])
def test_compiled_sin_and_cos_give_the_reference_bits(policy, monkeypatch):
    rng = np.random.default_rng(4)
    x = _wide_range(rng, 500)
    if policy != "fp64":
        x = x[np.abs(x) < 1e30]
    x = np.concatenate([x, [0.0, -0.0, np.inf, -np.inf, np.nan]])
    t = tessera.tensor(x, policy)

    def f(a):
        return ops.sin(a), ops.cos(a), ops.sin(a) * ops.cos(a)

    compiled = tessera.jit(f)
    got = compiled(t)
    assert 'family = "elementwise"' in compiled.inspect_ir("schedule")
    eager = (ops.sin(t), ops.cos(t))
    monkeypatch.setenv("TESSERA_EAGER", "reference")
    want = f(t)
    for g, w in zip(list(got) + list(eager), list(want) + list(want[:2])):
        np.testing.assert_array_equal(g.codes(), w.codes())
    assert np.signbit(got[0].numpy()[-4]) and np.isnan(got[0].numpy()[-3:]).all()


def test_gradients_against_float64():
    rng = np.random.default_rng(5)
    x = rng.uniform(-20, 20, 64)
    g = tessera.jit(tessera.grad(lambda a: ops.sum(ops.sin(a) * ops.cos(a))))(tessera.tensor(x)).numpy()
    np.testing.assert_allclose(g, np.cos(2 * x), rtol=1e-13, atol=1e-14)
    # second derivative of sin is -sin
    h = tessera.grad(lambda a: ops.sum(tessera.grad(lambda b: ops.sum(ops.sin(b)))(a)))(tessera.tensor(x)).numpy()
    np.testing.assert_allclose(h, -np.sin(x), rtol=1e-13, atol=1e-14)


def test_vjp_and_jvp_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    rng = np.random.default_rng(6)
    x, t, ct = rng.standard_normal(9) * 4, rng.standard_normal(9), rng.standard_normal(9)

    def f(a):
        return ops.cos(ops.sin(a) * 3.0) * a

    def fj(a):
        return jnp.cos(jnp.sin(a) * 3.0) * a

    _, vjp = tessera.vjp(f, tessera.tensor(x))
    _, vj = jax.vjp(fj, x)
    np.testing.assert_allclose(vjp(tessera.tensor(ct))[0].numpy(), np.asarray(vj(ct)[0]), rtol=1e-12, atol=1e-12)
    _, got_t = tessera.jvp(f, (tessera.tensor(x),), (tessera.tensor(t),))
    _, want_t = jax.jvp(fj, (x,), (t,))
    np.testing.assert_allclose(got_t.numpy(), np.asarray(want_t), rtol=1e-12, atol=1e-12)


def test_integer_operands_are_an_error():
    with pytest.raises(tessera.errors.DtypeError, match="graph.sin"):
        ops.sin(tessera.tensor(np.arange(3, dtype=np.int32)))
