"""tessera.ops softmax_safe, logsumexp, layernorm_safe, rmsnorm_safe against numpy float64 formulas on
fresh random inputs, including values near the format's maximum with fp16 accumulation.

Tolerances (u = unit roundoff of the accumulation type: 2^-24 fp32, 2^-11 fp16, 2^-53 fp64; n = row
length; ulp = one storage ulp of the reference):
- softmax: ulp + (|x - max| + n + 3) * u * ref per element (the exponent's argument is rounded, the sum
  accumulates n roundings, the division one more).
- logsumexp: ulp + (n + 3) * u + u * |ref|.
- layernorm/rmsnorm: ulp + |gamma| * u * ((n + 4) * |yhat| + 4 * (1 + |mean| / std)) + |beta| * u,
  where yhat is the normalized value before the affine step (the deviation x - mean loses u * |mean|)."""

import ml_dtypes
import numpy as np
import pytest

import tessera
from tessera import ops

from policy_tolerances import POLICIES, UNIT, decoded, parts, ulp



def softmax_ref(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True), x - m


def lse_ref(x, axis, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    r = m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))
    return r if keepdims else np.squeeze(r, axis=axis)


def layernorm_ref(x, axis, eps):
    mean = np.mean(x, axis=axis, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=axis, keepdims=True)
    return (x - mean) / np.sqrt(var + eps), mean, np.sqrt(var)


def rmsnorm_ref(x, axis, eps):
    return x / np.sqrt(np.mean(x**2, axis=axis, keepdims=True) + eps)


def param_shape(x_ndim, axis, n):
    shape = [1] * x_ndim
    shape[axis] = n
    return shape


def check_norm(got, yhat, gamma, beta, policy, n, kappa):
    store, accum = parts(policy)
    u = UNIT[accum]
    ref = yhat * gamma + beta
    tol = ulp(ref, store) + np.abs(gamma) * u * ((n + 4) * np.abs(yhat) + 4 * (1 + kappa)) + np.abs(beta) * u
    err = np.abs(decoded(got) - ref)
    assert np.all(np.isfinite(decoded(got)))
    assert np.all(err <= tol), (err.max(), (err / tol).max(), policy)


def sample(rng, shape, policy, scale=3.0):
    if policy.startswith("fp8"):
        scale = min(scale, 3.0)
    return tessera.tensor(rng.standard_normal(shape) * scale, dtype=policy)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_matches_reference(rng, policy, axis):
    store, accum = parts(policy)
    t = sample(rng, (4, 16, 3), policy)
    x = decoded(t)
    y = ops.softmax_safe(t, axis=axis)
    assert y.shape == t.shape and str(y.policy) == str(t.policy)
    ref, shifted = softmax_ref(x, axis)
    n = x.shape[axis]
    tol = ulp(ref, store) + (np.abs(shifted) + n + 3) * UNIT[accum] * ref
    assert np.all(np.abs(decoded(y) - ref) <= tol)


@pytest.mark.parametrize("policy", ["fp16 @accum(fp16)", "fp16 @accum(fp32)"])
def test_softmax_near_fp16_max_is_finite_and_correct(rng, policy):
    x = np.clip(60000 + rng.standard_normal((5, 8)) * 2000, -65504, 65504)
    x[0] = 65504.0  # a row of maxima: uniform
    x[1, :4] = -65504.0
    t = tessera.tensor(x, dtype=policy)
    xd = decoded(t)
    y = decoded(ops.softmax_safe(t))
    assert np.all(np.isfinite(y))
    ref, shifted = softmax_ref(xd, -1)
    np.testing.assert_array_equal(y[0], np.full(8, 0.125))
    tol = ulp(ref, "fp16") + (np.abs(shifted) + 11) * UNIT[parts(policy)[1]] * ref
    assert np.all(np.abs(y - ref) <= tol)


def test_softmax_near_fp32_max(rng):
    x = rng.uniform(3.0e38, 3.4e38, (3, 6))
    t = tessera.tensor(x, dtype="fp32")
    y = decoded(ops.softmax_safe(t))
    ref, shifted = softmax_ref(decoded(t), -1)
    assert np.all(np.isfinite(y))
    np.testing.assert_allclose(y, ref, rtol=0, atol=1e-6)


def test_softmax_special_values():
    x = np.array([[np.inf, 1.0, np.inf, 0.0], [-np.inf] * 4, [1.0, np.nan, 2.0, 3.0], [-np.inf, 0.0, -np.inf, 0.0]])
    y = decoded(ops.softmax_safe(tessera.tensor(x, dtype="fp16 @accum(fp16)")))
    np.testing.assert_array_equal(y[0], [0.5, 0, 0.5, 0])
    assert np.isnan(y[1]).all() and np.isnan(y[2]).all()
    np.testing.assert_array_equal(y[3], [0, 0.5, 0, 0.5])


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("keepdims", [False, True])
def test_logsumexp_matches_reference(rng, policy, keepdims):
    store, accum = parts(policy)
    t = sample(rng, (3, 12, 5), policy)
    x = decoded(t)
    for axis in (-1, 1):
        got = ops.logsumexp(t, axis=axis, keepdims=keepdims)
        ref = lse_ref(x, axis, keepdims)
        assert got.shape == ref.shape and str(got.policy) == str(t.policy)
        n = x.shape[axis]
        tol = ulp(ref, store) + (n + 3) * UNIT[accum] + UNIT[accum] * np.abs(ref)
        assert np.all(np.abs(decoded(got) - ref) <= tol)


def test_logsumexp_extremes_and_specials(rng):
    x = np.clip(60000 + rng.standard_normal((4, 6)) * 1000, -65504, 65504)
    t = tessera.tensor(x, dtype="fp16 @accum(fp16)")
    got = decoded(ops.logsumexp(t))
    ref = lse_ref(decoded(t), -1)
    assert np.all(np.isfinite(got))
    assert np.all(np.abs(got - ref) <= 2 * ulp(ref, "fp16"))
    s = np.array([[-np.inf, -np.inf], [1.0, np.inf], [np.nan, 1.0], [-np.inf, 0.0]])
    np.testing.assert_array_equal(decoded(ops.logsumexp(tessera.tensor(s))), [-np.inf, np.inf, np.nan, 0.0])
    e = ops.logsumexp(tessera.tensor(np.zeros((3, 0))))
    np.testing.assert_array_equal(decoded(e), [-np.inf] * 3)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("axis", [-1, 0])
@pytest.mark.parametrize("affine", ["none", "gamma", "gamma_beta"])
def test_layernorm_matches_reference(rng, policy, axis, affine):
    t = sample(rng, (10, 24), policy)
    x = decoded(t)
    n = x.shape[axis]
    g = b = None
    gamma = np.ones(param_shape(2, axis, n))
    beta = np.zeros(param_shape(2, axis, n))
    if affine != "none":
        g = sample(rng, (n,), policy, scale=1.5)
        gamma = decoded(g).reshape(param_shape(2, axis, n))
    if affine == "gamma_beta":
        b = sample(rng, (n,), policy, scale=1.0)
        beta = decoded(b).reshape(param_shape(2, axis, n))
    y = ops.layernorm_safe(t, gamma=g, beta=b, axis=axis, eps=1e-5)
    assert y.shape == t.shape and str(y.policy) == str(t.policy)
    yhat, mean, std = layernorm_ref(x, axis, 1e-5)
    check_norm(y, yhat, gamma, beta, policy, n, np.abs(mean) / std)


@pytest.mark.parametrize("policy", ["fp16 @accum(fp16)", "fp16 @accum(fp32)"])
def test_layernorm_near_fp16_max_with_narrow_accumulation(rng, policy):
    x = np.clip(60000 + rng.standard_normal((6, 32)) * 3000, -65504, 65504)
    x[0] = np.where(np.arange(32) % 2 == 0, 65504.0, -65504.0)
    t = tessera.tensor(x, dtype=policy)
    xd = decoded(t)
    y = ops.layernorm_safe(t)
    yhat, mean, std = layernorm_ref(xd, -1, 1e-5)
    check_norm(y, yhat, np.ones(32), np.zeros(32), policy, 32, np.abs(mean) / std)
    np.testing.assert_array_equal(decoded(y)[0], np.where(np.arange(32) % 2 == 0, 1.0, -1.0))


@pytest.mark.parametrize("policy", ["fp16 @accum(fp16)", "fp32"])
def test_layernorm_tiny_values_keep_eps(rng, policy):
    scale = 1e-4 if policy.startswith("fp16") else 1e-20
    t = tessera.tensor(rng.standard_normal((4, 16)) * scale, dtype=policy)
    x = decoded(t)
    yhat, mean, std = layernorm_ref(x, -1, 1e-5)
    got = ops.layernorm_safe(t)
    assert np.any(decoded(got) != 0)
    check_norm(got, yhat, np.ones(16), np.zeros(16), policy, 16, np.abs(mean) / np.sqrt(std**2 + 1e-5))


@pytest.mark.parametrize("policy", POLICIES)
def test_rmsnorm_matches_reference(rng, policy):
    t = sample(rng, (7, 20), policy)
    g = sample(rng, (20,), policy, scale=1.5)
    x, gamma = decoded(t), decoded(g)
    check_norm(ops.rmsnorm_safe(t), rmsnorm_ref(x, -1, 1e-6), np.ones(20), np.zeros(20), policy, 20, 0.0)
    check_norm(ops.rmsnorm_safe(t, gamma=g), rmsnorm_ref(x, -1, 1e-6), gamma, np.zeros(20), policy, 20, 0.0)
    check_norm(ops.rmsnorm_safe(t, axis=0), rmsnorm_ref(x, 0, 1e-6), np.ones((7, 1)), np.zeros((7, 1)), policy, 7,
               0.0)


def test_rmsnorm_extremes(rng):
    x = np.clip(60000 + rng.standard_normal((3, 16)) * 3000, -65504, 65504)
    x[2] = 0.0
    t = tessera.tensor(x, dtype="fp16 @accum(fp16)")
    y = decoded(ops.rmsnorm_safe(t))
    assert np.all(np.isfinite(y))
    ref = rmsnorm_ref(decoded(t)[:2], -1, 1e-6)
    check_norm(ops.rmsnorm_safe(tessera.tensor(x[:2], dtype="fp16 @accum(fp16)")), ref, np.ones(16), np.zeros(16),
               "fp16 @accum(fp16)", 16, 0.0)
    np.testing.assert_array_equal(y[2], np.zeros(16))  # all-zero row -> zeros
    np.testing.assert_array_equal(decoded(ops.rmsnorm_safe(tessera.tensor(np.zeros((2, 3))), eps=0.0)), np.zeros((2, 3)))


def test_nonfinite_rows_and_empty_dims():
    x = np.array([[1.0, np.inf, 2.0], [1.0, np.nan, 2.0], [1.0, 2.0, 3.0]])
    y = decoded(ops.layernorm_safe(tessera.tensor(x)))
    assert np.isnan(y[:2]).all() and np.isfinite(y[2]).all()
    assert np.isnan(decoded(ops.rmsnorm_safe(tessera.tensor(x)))[:2]).all()
    for op in (ops.softmax_safe, ops.layernorm_safe, ops.rmsnorm_safe):
        assert op(tessera.tensor(np.zeros((0, 5)))).shape == (0, 5)
        assert op(tessera.tensor(np.zeros((3, 0)))).shape == (3, 0)


def test_errors():
    x = tessera.tensor(np.ones((2, 4)))
    with pytest.raises(tessera.DtypeError, match="softmax_safe"):
        ops.softmax_safe(tessera.tensor(np.ones(3, dtype=np.int32)))
    with pytest.raises(tessera.DtypeError):
        ops.layernorm_safe(tessera.tensor(np.ones((2, 2), dtype=np.int8)))
    with pytest.raises(tessera.ShapeError, match="gamma"):
        ops.layernorm_safe(x, gamma=tessera.tensor(np.ones(3)))
    with pytest.raises(tessera.ShapeError, match="beta"):
        ops.layernorm_safe(x, gamma=tessera.tensor(np.ones(4)), beta=tessera.tensor(np.ones(2)))
    with pytest.raises(tessera.ArgumentError, match="beta needs gamma"):
        ops.layernorm_safe(x, beta=tessera.tensor(np.ones(4)))
    with pytest.raises(tessera.ArgumentError, match="eps"):
        ops.rmsnorm_safe(x, eps=-1.0)
    with pytest.raises(tessera.ShapeError):
        ops.logsumexp(x, axis=2)
