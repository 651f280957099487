"""tessera.ops.cast against independent conversions (numpy, ml_dtypes): one rounding straight to the
target with its overflow mode, integer rounding/saturation, stochastic rounding keyed by seed, special
values and empty tensors."""

import ml_dtypes
import numpy as np
import pytest

import tessera
from tessera import ops

POLICIES = ["fp32", "fp16 @accum(fp32)", "bf16 @accum(fp32)", "fp8_e4m3 @accum(fp32)", "fp16 @accum(fp16)", "fp64"]

# Independent float64 -> storage rounding (nearest even, IEEE overflow) for float32-exact inputs.
REF_TYPES = {"fp64": np.float64, "fp32": np.float32, "fp16": np.float16, "bf16": ml_dtypes.bfloat16,
             "fp8_e4m3": ml_dtypes.float8_e4m3fn}


def storage(policy):
    return policy.split()[0]


def decoded(t):
    return np.asarray(t.numpy(), dtype=np.float64)


def reference_cast(values64, name):
    """values64 are exactly float32 values (or fp64 going to fp64/fp32/fp16, which numpy rounds once)."""
    if name in ("fp64", "fp32", "fp16"):
        return values64.astype(REF_TYPES[name]).astype(np.float64)
    return values64.astype(np.float32).astype(REF_TYPES[name]).astype(np.float64)


def sample(rng, shape):
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-6, 7, size=shape))
    return x


@pytest.mark.parametrize("src", POLICIES)
@pytest.mark.parametrize("dst", POLICIES)
def test_cast_matches_single_rounding(rng, src, dst):
    t = tessera.tensor(sample(rng, (5, 7)), dtype=src)
    x = decoded(t)
    if storage(src) == "fp64" and storage(dst) in ("bf16", "fp8_e4m3"):
        x = x.astype(np.float32).astype(np.float64)  # keep the reference a single rounding
        t = tessera.tensor(x, dtype=src)
    y = ops.cast(t, dst)
    assert str(y.policy) == str(tessera.tensor(np.zeros(1), dtype=dst).policy)
    assert y.shape == (5, 7)
    ref = reference_cast(x, storage(dst))
    np.testing.assert_array_equal(decoded(y), ref)


def test_cast_is_one_rounding_not_two():
    # Rounding to fp16 first would land on the e4m3 midpoint 1 + 2^-4 and tie down to 1.0.
    x = tessera.tensor(np.array([1 + 2.0**-4 + 2.0**-12], dtype=np.float32))
    assert decoded(ops.cast(x, "fp8_e4m3 @accum(fp16)"))[0] == 1.125


def test_cast_special_values_and_overflow():
    x = tessera.tensor(np.array([np.nan, np.inf, -np.inf, 70000.0, -70000.0, 460.0, -0.0]))
    f16 = decoded(ops.cast(x, "fp16"))
    np.testing.assert_array_equal(f16[1:5], [np.inf, -np.inf, np.inf, -np.inf])
    assert np.isnan(f16[0]) and f16[5] == 460.0 and np.signbit(f16[6])
    sat = decoded(ops.cast(x, "fp16 @saturate"))
    np.testing.assert_array_equal(sat[3:5], [65504.0, -65504.0])
    e4 = decoded(ops.cast(x, tessera.fp8_e4m3))  # no infinity: overflow is NaN, saturate gives 448
    assert np.isnan(e4[:5]).all() and e4[5] == 448.0  # 460 is below the midpoint 464: 448
    e4s = decoded(ops.cast(x, "fp8_e4m3 @saturate"))
    np.testing.assert_array_equal(e4s[1:6], [448.0, -448.0, 448.0, -448.0, 448.0])


def test_cast_to_integers_rounds_half_even_and_saturates():
    x = tessera.tensor(np.array([0.5, 1.5, 2.5, -2.5, 126.6, 1e6, -1e6, np.nan]))
    y = ops.cast(x, "int8")
    assert str(y.dtype) == "int8"
    np.testing.assert_array_equal(y.numpy(), np.array([0, 2, 2, -2, 127, 127, -128, 0], dtype=np.int8))
    back = ops.cast(y, tessera.fp32)
    np.testing.assert_array_equal(back.numpy(), np.array([0, 2, 2, -2, 127, 127, -128, 0], dtype=np.float32))
    b = ops.cast(tessera.tensor(np.array([0.0, -0.0, 2.0, np.nan])), "bool")
    np.testing.assert_array_equal(b.numpy(), [False, False, True, True])


def test_stochastic_cast_is_keyed_by_seed_and_unbiased(rng):
    frac = rng.uniform(0.1, 0.9)
    v = 1.0 + frac * 2.0**-10  # between two fp16 neighbours
    x = tessera.tensor(np.full(20000, v))
    a = decoded(ops.cast(x, "fp16 @stochastic_round", seed=11))
    b = decoded(ops.cast(x, "fp16 @stochastic_round", seed=11))
    c = decoded(ops.cast(x, "fp16 @stochastic_round", seed=12))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert set(np.unique(a)) <= {1.0, 1.0 + 2.0**-10}
    # Unbiased: the mean is v within 5 standard deviations.
    sd = np.sqrt(frac * (1 - frac) / a.size) * 2.0**-10
    assert abs(a.mean() - v) < 5 * sd
    # Nearest-even casts ignore the seed.
    np.testing.assert_array_equal(decoded(ops.cast(x, "fp16", seed=1)), decoded(ops.cast(x, "fp16", seed=2)))


def test_cast_empty_and_scalar():
    e = ops.cast(tessera.tensor(np.zeros((0, 3))), "bf16")
    assert e.shape == (0, 3) and str(e.dtype) == "bf16"
    s = ops.cast(tessera.tensor(np.float64(3.3)), "fp16")
    assert s.shape == () and decoded(s) == np.float16(3.3)


def test_cast_errors():
    x = tessera.tensor(np.ones(3))
    with pytest.raises(tessera.DtypeError):
        ops.cast(x, "fp17")
    with pytest.raises(TypeError):
        ops.cast(x, "fp16", seed=1.5)
