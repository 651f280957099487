"""tessera.ops reductions (sum, mean, max, min, argmax) against numpy float64 on fresh random inputs.

Tolerances: max/min/argmax are exact. sum/mean are checked two ways: bit-exactly against a Python
emulation of the documented order (row-major over the reduced axes, the running sum rounded to the
accumulation type after every add, then encoded to storage), and against numpy's float64 sum within
one storage ulp plus the standard sequential-summation bound (n - 1) * u_accum * sum|x| (u_accum the
accumulation type's unit roundoff: 2^-24 for fp32, 2^-11 for fp16)."""

import ml_dtypes
import numpy as np
import pytest

import tessera
from tessera import ops

from policy_tolerances import POLICIES, UNIT, decoded, parts, ulp

NP_TYPES = {"fp64": np.float64, "fp32": np.float32, "fp16": np.float16, "bf16": ml_dtypes.bfloat16,
            "fp8_e4m3": ml_dtypes.float8_e4m3fn}


def to_storage(v, store):
    """float64 -> storage, one rounding (numpy rounds float64 to fp32/fp16 directly; the accumulated
    fp32 values handed to bf16/fp8 here are float32 already)."""
    v = np.asarray(v, dtype=np.float64)
    if store in ("fp64", "fp32", "fp16"):
        return v.astype(NP_TYPES[store]).astype(np.float64)
    return v.astype(np.float32).astype(NP_TYPES[store]).astype(np.float64)


def emulate_sum(rows, accum):
    """rows: [outer, inner] float64 in the documented order, summed in the canonical order: blocks of 256;
    in a block element p goes to strand p % 16, each strand summed left to right, the 16 strands combined
    pairwise ((s0+s1)+(s2+s3))+...; block sums left to right within superblocks of 256 blocks; superblock sums
    left to right. Every add is rounded to accum: adding two values of the accumulation type (or narrower) in
    float64 then rounding once more is a correct rounding (53 >= 2*24 + 2)."""
    acc_t = {"fp32": np.float32, "fp16": np.float16, "fp64": np.float64}[accum]

    def add(a, b):
        return float(acc_t(a + b))

    out = np.zeros(rows.shape[0])
    for o in range(rows.shape[0]):
        row, n, total = rows[o], rows.shape[1], 0.0
        for sup in range(0, n, 256 * 256):
            sup_sum = 0.0
            for lo in range(sup, min(n, sup + 256 * 256), 256):
                strands = [0.0] * 16
                for i in range(lo, min(n, lo + 256)):
                    strands[(i - lo) % 16] = add(strands[(i - lo) % 16], row[i])
                while len(strands) > 1:
                    strands = [add(strands[2 * k], strands[2 * k + 1]) for k in range(len(strands) // 2)]
                sup_sum = add(sup_sum, strands[0])
            total = add(total, sup_sum)
        out[o] = total
    return out


def as_rows(x, axes):
    """Kept axes first (row-major), reduced axes last (row-major): one row per output element."""
    axes = sorted(a % x.ndim for a in axes)
    kept = [d for d in range(x.ndim) if d not in axes]
    return np.transpose(x, kept + axes).reshape(int(np.prod([x.shape[d] for d in kept])), -1)


def sample(rng, shape, policy):
    store, _ = parts(policy)
    scale = 8.0 if store == "fp8_e4m3" else 100.0
    return tessera.tensor(rng.standard_normal(shape) * scale, dtype=policy)


AXES = [None, 0, -1, (0, 2), (2, 0, 1)]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("keepdims", [False, True])
def test_sum_and_mean(rng, policy, axis, keepdims):
    store, accum = parts(policy)
    t = sample(rng, (3, 4, 5), policy)
    x = decoded(t)
    axes = list(range(3)) if axis is None else ([axis] if isinstance(axis, int) else list(axis))
    s = ops.sum(t, axis=axis, keepdims=keepdims)
    m = ops.mean(t, axis=axis, keepdims=keepdims)
    ref = np.sum(x, axis=axis, keepdims=keepdims)
    assert s.shape == ref.shape and m.shape == ref.shape
    assert str(s.policy) == str(t.policy) and str(m.policy) == str(t.policy)
    n = x.size // ref.size
    # Bit-exact against the documented order.
    acc = emulate_sum(as_rows(x, axes), accum)
    np.testing.assert_array_equal(decoded(s).reshape(-1), to_storage(acc, store))
    mean_acc = {"fp32": np.float32, "fp16": np.float16, "fp64": np.float64}[accum](acc / n).astype(np.float64)
    np.testing.assert_array_equal(decoded(m).reshape(-1), to_storage(mean_acc, store))
    # Against numpy float64 with the stated bound.
    bound = (n - 1) * UNIT[accum] * np.sum(np.abs(x), axis=axis, keepdims=keepdims)
    err = np.abs(decoded(s) - ref)
    assert np.all(err <= ulp(ref, store) + bound), (err, bound)
    merr = np.abs(decoded(m) - ref / n)
    assert np.all(merr <= ulp(ref / n, store) + bound / n + UNIT[accum] * np.abs(ref / n))


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("axis", AXES)
def test_max_min_argmax_exact(rng, policy, axis):
    t = sample(rng, (3, 4, 5), policy)
    x = decoded(t)
    np.testing.assert_array_equal(decoded(ops.max(t, axis=axis)), np.max(x, axis=axis))
    np.testing.assert_array_equal(decoded(ops.min(t, axis=axis, keepdims=True)), np.min(x, axis=axis, keepdims=True))
    ax = -1 if axis is None else (axis if isinstance(axis, int) else axis[0])
    a = ops.argmax(t, axis=ax)
    assert str(a.dtype) == "int64"
    np.testing.assert_array_equal(a.numpy(), np.argmax(x, axis=ax))
    np.testing.assert_array_equal(ops.argmax(t, axis=ax, keepdims=True).numpy(),
                                  np.expand_dims(np.argmax(x, axis=ax), ax))


def test_fp16_accumulation_order_is_visible():
    # 2048 then sixteen 1s, accumulated in fp16 (spacing 2 at 2048): left to right every 2048 + 1 would tie
    # back to 2048. In the canonical order strand 0 holds 2048 + 1 (-> 2048) and strands 1..15 hold a 1 each;
    # the pairwise tree gives [2048, 2 x7] -> [2050, 4, 4, 4] -> [2054, 8] -> 2062.
    t = tessera.tensor(np.array([2048.0] + [1.0] * 16), dtype="fp16 @accum(fp16)")
    assert decoded(ops.sum(t)) == 2062.0
    assert decoded(ops.sum(tessera.tensor(np.array([2048.0] + [1.0] * 16), dtype="fp16 @accum(fp32)"))) == 2064.0


def test_long_fp16_accumulated_sum_within_bound(rng):
    # 4096 positive values: fp16 accumulation loses a lot, but never more than (n-1) * 2^-11 * sum|x|.
    t = tessera.tensor(rng.uniform(0, 1, 4096), dtype="fp16 @accum(fp16)")
    x = decoded(t)
    s = decoded(ops.sum(t))
    assert abs(s - x.sum()) <= 4095 * 2.0**-11 * x.sum()
    np.testing.assert_array_equal(s, to_storage(emulate_sum(x[None, :], "fp16"), "fp16")[0])


def test_nan_and_inf(rng):
    x = rng.standard_normal((3, 4))
    x[0, 1] = np.nan
    x[1, 2] = np.inf
    x[2, 0] = np.inf
    x[2, 3] = -np.inf
    t = tessera.tensor(x)
    for op, ref in [(ops.sum, np.sum), (ops.mean, np.mean), (ops.max, np.max), (ops.min, np.min)]:
        got = decoded(op(t, axis=1))
        with np.errstate(invalid="ignore"):
            want = ref(x, axis=1)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_array_equal(got[~np.isnan(want)], want[~np.isnan(want)])
    y = np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 5.0, 5.0, 1.0]])
    np.testing.assert_array_equal(ops.argmax(tessera.tensor(y)).numpy(), np.argmax(y, axis=1))  # [1, 1]


def test_extreme_magnitudes():
    x = np.array([60000.0, 60000.0, -60000.0])
    t16 = tessera.tensor(x, dtype="fp16 @accum(fp16)")
    assert decoded(ops.sum(t16)) == np.inf  # 120000 overflows the fp16 accumulator: documented, not hidden
    assert decoded(ops.sum(tessera.tensor(x, dtype="fp16 @accum(fp32)"))) == 60000.0
    assert decoded(ops.max(t16)) == 60000.0
    big = tessera.tensor(np.array([1e308, 1e308, -1e308]))
    assert decoded(ops.sum(big)) == np.inf and decoded(ops.max(big)) == 1e308


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "uint8", "bool"])
def test_integer_sums_are_exact_and_wide(rng, dtype):
    np_t = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "uint8": np.uint8, "bool": np.bool_}[dtype]
    info = np.iinfo(np_t) if dtype != "bool" else None
    lo, hi = (0, 1) if info is None else (max(int(info.min), -10**7), min(int(info.max), 10**7))
    x = rng.integers(lo, hi + 1, (6, 50))  # int32 sums of 50 such values fit int32
    t = tessera.tensor(x.astype(np_t))
    s = ops.sum(t, axis=1)
    assert str(s.dtype) == "int32"
    np.testing.assert_array_equal(s.numpy(), x.astype(np.int64).sum(axis=1))
    np.testing.assert_array_equal(ops.max(t, axis=0).numpy(), x.astype(np_t).max(axis=0))
    assert str(ops.max(t).dtype) == dtype
    with pytest.raises(tessera.DtypeError, match="cast"):
        ops.mean(t)


def test_integer_overflow_is_an_error():
    with pytest.raises(tessera.ArgumentError, match="int64"):
        ops.sum(tessera.tensor(np.array([2**31 - 1, 1], dtype=np.int32)))
    s = ops.sum(tessera.tensor(np.array([2**31 - 1, 1], dtype=np.int64)))
    assert str(s.dtype) == "int64" and s.numpy() == 2**31
    with pytest.raises(tessera.ArgumentError, match="2\\^53"):
        ops.sum(tessera.tensor(np.array([2**53, 2**53], dtype=np.int64)))


def test_empty_reductions():
    e = tessera.tensor(np.zeros((2, 0, 3)), dtype="fp16")
    s = ops.sum(e, axis=1)
    assert s.shape == (2, 3)
    np.testing.assert_array_equal(decoded(s), np.zeros((2, 3)))
    assert decoded(ops.sum(e)) == 0.0
    assert ops.max(e, axis=2).shape == (2, 0)  # the reduced axis is not empty
    for op in (ops.max, ops.min, ops.mean):
        with pytest.raises(tessera.ShapeError, match="axis 1"):
            op(e, axis=(1, 2))
    with pytest.raises(tessera.ShapeError, match="argmax.*axis 1"):
        ops.argmax(e, axis=1)


def test_scalar_and_axis_errors():
    x = tessera.tensor(np.float64(2.5))
    assert decoded(ops.sum(x)) == 2.5 and ops.sum(x).shape == ()
    t = tessera.tensor(np.ones((2, 3)))
    with pytest.raises(tessera.ShapeError):
        ops.sum(t, axis=2)
    with pytest.raises(tessera.ShapeError):
        ops.max(t, axis=(0, -2))
    with pytest.raises(TypeError):
        ops.sum(t, axis=1.0)
    with pytest.raises(tessera.DtypeError):
        ops.sum(tessera.tensor(np.ones(2), dtype="e8m0"))
