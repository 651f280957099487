"""tessera.ops.gemm / matmul against numpy float64 matmul on fresh random inputs: batch broadcasting,
transposes, policies, integers, special values, empty dims and errors.

Tolerance: |got - ref| <= 1 storage ulp of ref + K * u_accum * (|a| @ |b|) (the sequential
multiply-add bound; u_accum = 2^-24 for fp32, 2^-11 for fp16 accumulation). fp16 @accum(fp16) is also
checked bit-exactly against a Python emulation of the documented order (k ascending, acc + a*b rounded
once to fp16 each step)."""

import ml_dtypes
import numpy as np
import pytest

import tessera
from tessera import ops

from policy_tolerances import POLICIES, UNIT, decoded, parts, ulp



def sample(rng, shape, policy):
    scale = 4.0 if policy.startswith("fp8") else 10.0
    return tessera.tensor(rng.standard_normal(shape) * scale, dtype=policy)


def check_close(got, a, b, policy):
    store, accum = parts(policy)
    ref = np.matmul(a, b)
    K = a.shape[-1]
    bound = ulp(ref, store) + K * UNIT[accum] * np.matmul(np.abs(a), np.abs(b))
    err = np.abs(decoded(got) - ref)
    assert got.shape == ref.shape
    assert np.all(err <= bound), (err.max(), policy)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("shapes", [((3, 5), (5, 4)), ((2, 1, 3, 5), (4, 5, 6)), ((1, 3, 5), (2, 5, 2)),
                                    ((2, 3, 1), (2, 1, 4)), ((7, 1), (1, 1))])
def test_matmul_matches_numpy(rng, policy, shapes):
    ta, tb = sample(rng, shapes[0], policy), sample(rng, shapes[1], policy)
    c = ops.matmul(ta, tb)
    assert str(c.policy) == str(ta.policy)
    check_close(c, decoded(ta), decoded(tb), policy)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_gemm_transposes(rng, policy, transpose_a, transpose_b):
    a_shape = (2, 6, 3) if transpose_a else (2, 3, 6)
    b_shape = (4, 6) if transpose_b else (6, 4)
    ta, tb = sample(rng, a_shape, policy), sample(rng, b_shape, policy)
    c = ops.gemm(ta, tb, transpose_a=transpose_a, transpose_b=transpose_b)
    a, b = decoded(ta), decoded(tb)
    check_close(c, np.swapaxes(a, -1, -2) if transpose_a else a, np.swapaxes(b, -1, -2) if transpose_b else b, policy)


def test_fp16_accumulation_follows_documented_order(rng):
    ta = sample(rng, (2, 4, 33), "fp16 @accum(fp16)")
    tb = sample(rng, (33, 3), "fp16 @accum(fp16)")
    a, b = decoded(ta), decoded(tb)
    want = np.zeros((2, 4, 3))
    for i in np.ndindex(want.shape):
        acc = 0.0
        for k in range(33):
            acc = float(np.float16(acc + a[i[0], i[1], k] * b[k, i[2]]))
        want[i] = acc
    np.testing.assert_array_equal(decoded(ops.matmul(ta, tb)), want)


def test_mixed_policies_promote(rng):
    a = sample(rng, (3, 4), "bf16 @accum(fp32)")
    b = sample(rng, (4, 2), "fp16 @accum(fp32)")
    c = ops.matmul(a, b)
    assert str(c.dtype) == "fp32"
    check_close(c, decoded(a), decoded(b), "fp32")
    d = ops.matmul(sample(rng, (3, 4), "fp16"), sample(rng, (4, 2), "fp32"))
    assert str(d.dtype) == "fp32"


def test_integer_matmul_is_exact_and_widens(rng):
    a = rng.integers(-128, 128, (3, 20)).astype(np.int8)
    b = rng.integers(-128, 128, (20, 5)).astype(np.int8)
    c = ops.matmul(tessera.tensor(a), tessera.tensor(b))
    assert str(c.dtype) == "int32"
    np.testing.assert_array_equal(c.numpy(), a.astype(np.int64) @ b.astype(np.int64))
    big = tessera.tensor(np.full((1, 2), 2**16, dtype=np.int32))
    with pytest.raises(tessera.ArgumentError, match="overflows"):
        ops.matmul(big, tessera.tensor(np.full((2, 1), 2**15, dtype=np.int32)))
    e = ops.matmul(tessera.tensor(np.full((1, 2), 2**16, dtype=np.int64)), tessera.tensor(np.full((2, 1), 2**15)))
    assert e.numpy()[0, 0] == 2**32


def test_special_values_and_extremes():
    a = np.array([[np.inf, 1.0], [np.nan, 0.0], [1e30, 1e30]])
    b = np.array([[0.0, 1.0], [2.0, 1e10]])
    got = decoded(ops.matmul(tessera.tensor(a, dtype="fp32"), tessera.tensor(b, dtype="fp32")))
    with np.errstate(invalid="ignore", over="ignore"):
        want = (a.astype(np.float32).astype(np.float64) @ b).astype(np.float32).astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~np.isnan(want)], want[~np.isnan(want)])
    # fp16 products near the maximum overflow the fp16 accumulator but not an fp32 one.
    h = np.array([[300.0, 300.0]])
    v = np.array([[300.0], [-300.0]])
    assert decoded(ops.matmul(tessera.tensor(h, dtype="fp16 @accum(fp16)"),
                              tessera.tensor(v, dtype="fp16 @accum(fp16)")))[0, 0] == np.inf  # 90000 overflows
    assert decoded(ops.matmul(tessera.tensor(h, dtype="fp16 @accum(fp32)"),
                              tessera.tensor(v, dtype="fp16 @accum(fp32)")))[0, 0] == 0.0


def test_empty_dims():
    c = ops.matmul(tessera.tensor(np.zeros((2, 0))), tessera.tensor(np.zeros((0, 3))))
    assert c.shape == (2, 3)
    np.testing.assert_array_equal(decoded(c), np.zeros((2, 3)))
    assert ops.matmul(tessera.tensor(np.zeros((0, 4))), tessera.tensor(np.zeros((4, 3)))).shape == (0, 3)
    assert ops.matmul(tessera.tensor(np.zeros((0, 2, 4))), tessera.tensor(np.zeros((4, 3)))).shape == (0, 2, 3)


def test_errors():
    x = tessera.tensor(np.ones((2, 3)))
    with pytest.raises(tessera.ShapeError, match="dim 1 is 3.*dim 0 is 2"):
        ops.matmul(x, x)
    with pytest.raises(tessera.ShapeError, match="rank >= 2"):
        ops.matmul(tessera.tensor(np.ones(3)), tessera.tensor(np.ones((3, 1))))
    with pytest.raises(tessera.ShapeError, match="batch"):
        ops.matmul(tessera.tensor(np.ones((2, 2, 3))), tessera.tensor(np.ones((3, 3, 2))))
    with pytest.raises(tessera.DtypeError, match="bool"):
        ops.matmul(tessera.tensor(np.ones((2, 2), dtype=bool)), tessera.tensor(np.ones((2, 2), dtype=bool)))
    assert ops.gemm(x, x, transpose_b=True).shape == (2, 2)
