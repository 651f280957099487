"""tessera.ops elementwise ops against numpy float64 references.

For each policy the reference decodes the inputs to float64, computes there,
rounds once to the accumulation type (fp32 for every policy below except
fp64) and encodes to storage with round-to-nearest-even. Tolerances, in units
in the last place of the storage format (compared on encodings):
- exact (0 ulp): add, sub, mul, div, maximum, minimum, neg, abs, sqrt, rsqrt,
  relu, where and the comparisons, whose float64 results are correctly
  rounded or exact, so both sides round the same number;
- 1 ulp: exp, log, tanh, sin, cos, sigmoid, silu, gelu, pow, whose float64 values may
  differ from numpy's in the last bit and so may round the other way.
fp64 storage: exact for the first group, relative 1e-13 plus absolute 1e-15
for the second (the absolute part covers gelu's 1 + erf cancellation near -4).
gelu inputs stay in [-4, 4]: below that 1 + erf / 1 + tanh cancels, and the
float64 reference itself loses most of its digits.
"""

import math

import numpy as np
import pytest

import tessera
from tessera import ops
from tessera.numerics import encode

POLICIES = ["fp32", "fp64", "fp16 @accum(fp32)", "bf16 @accum(fp32)", "fp8_e4m3 @accum(fp32)"]
BITS = {"fp32": 32, "fp64": 64, "fp16": 16, "bf16": 16, "fp8_e4m3": 8}

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


# name -> (float64 reference, input domain, exact?)
UNARY = {
    "neg": (lambda x: -x, "any", True),
    "abs": (np.abs, "any", True),
    "exp": (np.exp, "small", False),
    "log": (np.log, "positive", False),
    "sqrt": (np.sqrt, "positive", True),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), "positive", True),
    "tanh": (np.tanh, "any", False),
    "sin": (np.sin, "any", False),
    "cos": (np.cos, "any", False),
    "sigmoid": (_sigmoid, "any", False),
    "relu": (lambda x: np.where(np.isnan(x) | (x > 0), x, 0.0), "any", True),  # NaN stays NaN
    "silu": (lambda x: x * _sigmoid(x), "any", False),
}
BINARY = {
    "add": (np.add, True),
    "sub": (np.subtract, True),
    "mul": (np.multiply, True),
    "div": (np.divide, True),
    "maximum": (np.maximum, True),
    "minimum": (np.minimum, True),
    "pow": (np.power, False),
}
COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
           "ge": np.greater_equal}


def storage_of(policy):
    return policy.split()[0]


def inputs(rng, shape, policy, domain="any"):
    """A tensor of fresh random values and the float64 values it actually holds."""
    if domain == "positive":
        v = np.exp(rng.uniform(-3, 3, shape))
    elif domain == "small":
        v = rng.uniform(-4, 4, shape)
    else:
        v = rng.standard_normal(shape) * 3
    t = tessera.tensor(v, policy)
    return t, t.numpy().astype(np.float64)


def expected_codes(values64, policy):
    """encode(storage, round_to_accum(values64)) with nearest-even rounding."""
    st = storage_of(policy)
    if st == "fp64":
        return values64.view(np.uint64)
    return encode(values64.astype(np.float32), st)


def ordinal(codes, nbits):
    """Encodings mapped to integers that are ordered like the values (sign-magnitude formats)."""
    c = codes.astype(np.uint64)
    mag = (c & np.uint64((1 << (nbits - 1)) - 1)).astype(np.int64)
    return np.where((c >> np.uint64(nbits - 1)) & np.uint64(1), -mag, mag)


def assert_matches(result, ref64, policy, exact):
    st = storage_of(policy)
    assert str(result.policy) == str(tessera.tensor(np.zeros(0), policy).policy)
    assert result.shape == ref64.shape
    got = result.codes()
    if st == "fp64" and not exact:
        np.testing.assert_allclose(result.numpy(), ref64, rtol=1e-13, atol=1e-15, equal_nan=True)
        return
    want = expected_codes(ref64, policy)
    got_nan = np.isnan(result.numpy().astype(np.float64))
    want_nan = np.isnan(tessera.numerics.decode(want, st).astype(np.float64))
    np.testing.assert_array_equal(got_nan, want_nan)
    keep = ~got_nan
    if exact:
        np.testing.assert_array_equal(got[keep], want[keep])
    else:
        ulps = np.abs(ordinal(got[keep], BITS[st]) - ordinal(want[keep], BITS[st]))
        assert ulps.size == 0 or ulps.max() <= 1, f"max {ulps.max()} ulp of {st}"


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_against_float64(rng, name, policy):
    ref, domain, exact = UNARY[name]
    x, xv = inputs(rng, (7, 33), policy, domain)
    assert_matches(getattr(ops, name)(x), ref(xv), policy, exact)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_against_float64(rng, policy, approximate):
    x, xv = inputs(rng, (5, 40), policy, "small")
    if approximate == "none":
        want = 0.5 * xv * (1 + _erf(xv / np.sqrt(2)))
    else:
        want = 0.5 * xv * (1 + np.tanh(np.sqrt(2 / np.pi) * (xv + 0.044715 * xv**3)))
    assert_matches(ops.gelu(x, approximate=approximate), want, policy, False)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_against_float64(rng, name, policy):
    ref, exact = BINARY[name]
    if name == "pow":
        a, av = inputs(rng, (6, 1, 5), policy, "positive")
        b = tessera.tensor(rng.uniform(-2, 2, (4, 1)), policy)
        bv = b.numpy().astype(np.float64)
    else:
        a, av = inputs(rng, (6, 1, 5), policy)
        b, bv = inputs(rng, (4, 1), policy, "positive" if name == "div" else "any")
    assert_matches(getattr(ops, name)(a, b), ref(av, bv), policy, exact)


@pytest.mark.parametrize("policy", POLICIES)
def test_comparisons_give_bool(rng, policy):
    a, av = inputs(rng, (4, 9), policy)
    b, bv = inputs(rng, (9,), policy)
    # Equal elements occur: reuse some of a's values in a second operand.
    c = tessera.tensor(np.where(rng.random((4, 9)) < 0.5, av, 0.0), policy)
    cv = c.numpy().astype(np.float64)
    for name, ref in COMPARE.items():
        for other, ov in ((b, bv), (c, cv)):
            r = getattr(ops, name)(a, other)
            assert str(r.dtype) == "bool"
            assert r.numpy().dtype == np.bool_
            np.testing.assert_array_equal(r.numpy(), ref(av, ov))


@pytest.mark.parametrize("policy", POLICIES)
def test_where(rng, policy):
    cond = tessera.tensor(rng.random((3, 1, 4)) < 0.5)
    a, av = inputs(rng, (5, 4), policy)
    b, bv = inputs(rng, (1,), policy)
    assert_matches(ops.where(cond, a, b), np.where(cond.numpy(), av, bv), policy, True)
    with pytest.raises(tessera.DtypeError, match="condition must be bool"):
        ops.where(a, a, b)


def test_broadcasting_size_one_and_empty_dims(rng):
    a, av = inputs(rng, (2, 1, 3), "fp32")
    b, bv = inputs(rng, (4, 1), "fp32")
    assert_matches(ops.add(a, b), av + bv, "fp32", True)
    e, ev = inputs(rng, (0, 3), "fp32")
    r = ops.mul(e, tessera.tensor(np.ones((1, 3), dtype=np.float32)))
    assert r.shape == (0, 3)
    s = ops.sub(tessera.tensor(np.float32(2.5)), a)
    assert_matches(s, 2.5 - av, "fp32", True)
    assert ops.add(e, 1.0).shape == (0, 3)


def test_empty_broadcast_shape():
    a = tessera.tensor(np.zeros((2, 0, 1), dtype=np.float32))
    b = tessera.tensor(np.zeros((4,), dtype=np.float32))
    assert ops.add(a, b).shape == (2, 0, 4)
    assert ops.lt(a, b).shape == (2, 0, 4)


def test_nan_and_inf_propagation():
    inf, nan = np.inf, np.nan
    x = tessera.tensor(np.array([nan, inf, -inf, 0.0, -0.0, 1.0], dtype=np.float32))
    y = tessera.tensor(np.array([1.0, -inf, -inf, nan, 0.0, inf], dtype=np.float32))
    xv, yv = x.numpy().astype(np.float64), y.numpy().astype(np.float64)
    with np.errstate(all="ignore"):
        for name, (ref, _) in BINARY.items():
            np.testing.assert_array_equal(getattr(ops, name)(x, y).numpy(), ref(xv, yv).astype(np.float32),
                                          err_msg=name)
        for name in ("neg", "abs", "exp", "sqrt", "tanh", "sigmoid", "relu"):
            np.testing.assert_array_equal(getattr(ops, name)(x).numpy(), UNARY[name][0](xv).astype(np.float32),
                                          err_msg=name)
        np.testing.assert_array_equal(ops.log(x).numpy(), np.log(xv).astype(np.float32))
    assert np.isnan(ops.maximum(x, y).numpy()[3]) and np.isnan(ops.minimum(x, y).numpy()[0])
    assert np.isnan(ops.relu(x).numpy()[0])
    assert np.signbit(ops.neg(tessera.tensor(np.float32(0.0))).numpy())
    for name, ref in COMPARE.items():
        np.testing.assert_array_equal(getattr(ops, name)(x, y).numpy(), ref(xv, yv), err_msg=name)


def test_extreme_magnitudes():
    big = tessera.tensor(np.array([3.0e38, -3.0e38], dtype=np.float32))
    np.testing.assert_array_equal(ops.add(big, big).numpy(), [np.inf, -np.inf])
    h = tessera.tensor(np.array([60000.0], dtype=np.float16))
    assert ops.add(h, h).numpy()[0] == np.inf
    s = ops.sigmoid(tessera.tensor(np.array([-1000.0, 1000.0, -80.0], dtype=np.float32))).numpy()
    np.testing.assert_array_equal(s, np.array([0.0, 1.0, 1 / (1 + math.exp(80))], dtype=np.float32))
    # fp8_e4m3 has no infinity: overflow under the default inf_nan policy gives NaN.
    e = ops.exp(tessera.tensor(np.array([10.0, 1.0]), "fp8_e4m3 @accum(fp32)")).numpy()
    assert np.isnan(e[0]) and e[1] == encode_decode(math.e, "fp8_e4m3")
    tiny = tessera.tensor(np.array([1e-45, 1e-300]), "fp64")
    np.testing.assert_array_equal(ops.mul(tiny, tiny).numpy(), [1e-90, 0.0])


def encode_decode(v, dtype):
    return float(tessera.numerics.decode(encode(np.array([v], dtype=np.float32), dtype), dtype)[0])


def test_promotion():
    bf = tessera.tensor(np.array([1.5, 3.0]), "bf16")
    hf = tessera.tensor(np.array([0.25, 1.0]), "fp16")
    r = ops.add(bf, hf)
    assert str(r.dtype) == "fp32" and str(r.policy) == "fp32 @accum(fp32)"
    np.testing.assert_array_equal(r.numpy(), np.array([1.75, 4.0], dtype=np.float32))
    assert str(ops.mul(tessera.tensor(np.ones(1, np.float32)), tessera.tensor(np.ones(1))).dtype) == "fp64"
    assert str(ops.add(tessera.tensor(np.ones(1, np.int8)), tessera.tensor(np.ones(1, np.uint8))).dtype) == "int16"
    assert str(ops.add(tessera.tensor(np.ones(1, np.int32)), tessera.tensor(np.ones(1, np.float16))).dtype) == "fp16"
    e4 = tessera.tensor(np.ones(1), "fp8_e4m3")
    e5 = tessera.tensor(np.ones(1), "fp8_e5m2")
    assert str(ops.sub(e4, e5).dtype) == "fp16"
    # Python scalars take the tensor's policy.
    assert str(ops.mul(hf, 2).dtype) == "fp16"
    np.testing.assert_array_equal((hf * 2).numpy(), np.array([0.5, 2.0], dtype=np.float16))


@pytest.mark.parametrize("np_dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8])
def test_integer_ops(rng, np_dtype):
    lo, hi = (0, 15) if np_dtype == np.uint8 else (-11, 11)
    a = rng.integers(lo, hi, (5, 6)).astype(np_dtype)
    b = rng.integers(lo, hi, (6,)).astype(np_dtype)
    ta, tb = tessera.tensor(a), tessera.tensor(b)
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    for name, ref in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("maximum", np.maximum),
                      ("minimum", np.minimum)):
        r = getattr(ops, name)(ta, tb)
        assert str(r.dtype) == str(tessera.tensor(a).dtype)
        want = ref(a64, b64)
        if np_dtype == np.uint8:
            want = np.clip(want, 0, 255)  # uint8 saturates like every integer rounding in Tessera
        np.testing.assert_array_equal(r.numpy().astype(np.int64), want, err_msg=name)
    if np_dtype != np.uint8:
        np.testing.assert_array_equal(ops.neg(ta).numpy().astype(np.int64), -a64)
        np.testing.assert_array_equal(ops.abs(ta).numpy().astype(np.int64), np.abs(a64))
        np.testing.assert_array_equal(ops.relu(ta).numpy().astype(np.int64), np.maximum(a64, 0))
    np.testing.assert_array_equal(ops.lt(ta, tb).numpy(), a64 < b64)


def test_error_messages():
    i = tessera.tensor(np.arange(3, dtype=np.int32))
    with pytest.raises(tessera.DtypeError, match="graph.div needs a floating-point operand, got int32"):
        ops.div(i, i)
    with pytest.raises(tessera.DtypeError, match="floating-point"):
        ops.exp(i)
    with pytest.raises(tessera.ShapeError, match=r"cannot broadcast operands of shapes \[2, 3\] and \[4\]"):
        ops.add(tessera.tensor(np.ones((2, 3))), tessera.tensor(np.ones(4)))
    with pytest.raises(tessera.ArgumentError, match="approximate"):
        ops.gelu(tessera.tensor(np.ones(2)), approximate="fast")
