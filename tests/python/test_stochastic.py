"""Stochastic rounding: reproducible from its seed, unbiased in the mean."""

import numpy as np
import pytest

from tessera import numerics

from formats import ML_DTYPES, all_encodings, reference_decode

FORMATS = [n for n in ML_DTYPES if n != "e8m0"]


@pytest.mark.parametrize("name", FORMATS)
def test_same_seed_same_bits_different_seed_different_bits(name, rng):
    x = rng.standard_normal(10_000).astype(np.float32)
    a = numerics.encode(x, name, rounding="stochastic", seed=1234)
    b = numerics.encode(x, name, rounding="stochastic", seed=1234)
    c = numerics.encode(x, name, rounding="stochastic", seed=1235)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("name", FORMATS)
def test_results_are_the_two_neighbours(name, rng):
    x = (rng.standard_normal(20_000) * 2).astype(np.float32)
    table = reference_decode(all_encodings(name), name)
    finite = np.unique(table[np.isfinite(table)])
    x = x[(x > finite[0]) & (x < finite[-1])]
    got = numerics.decode(numerics.encode(x, name, rounding="stochastic", seed=7), name).astype(np.float64)
    idx = np.searchsorted(finite, x.astype(np.float64), side="right") - 1
    lo, hi = finite[idx], finite[np.minimum(idx + 1, finite.size - 1)]
    assert np.all((got == lo) | (got == hi) | (got == x))


@pytest.mark.parametrize("name", FORMATS)
def test_mean_converges_to_the_value(name, rng):
    """The mean of N roundings of v is within 5 standard errors of v.

    Each rounding is lo or hi with P(hi) = (v - lo) / (hi - lo) (up to 2^-32),
    so the standard error of the mean is (hi - lo) * sqrt(p (1 - p) / N)."""
    table = reference_decode(all_encodings(name), name)
    finite = np.unique(table[np.isfinite(table) & (table > 0)])
    i = rng.integers(0, finite.size - 1)
    lo, hi = finite[i], finite[i + 1]
    v = np.float32(lo + (hi - lo) * rng.uniform(0.05, 0.95))
    n = 200_000
    got = numerics.decode(numerics.encode(np.full(n, v), name, rounding="stochastic",
                                          seed=int(rng.integers(2 ** 63))), name).astype(np.float64)
    p = (float(v) - lo) / (hi - lo)
    stderr = (hi - lo) * np.sqrt(p * (1 - p) / n)
    assert abs(got.mean() - float(v)) < 5 * stderr + 1e-12 * abs(float(v)), (lo, hi, float(v), got.mean())
