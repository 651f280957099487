"""Bit-exact encode/decode against ml_dtypes, an independent implementation.

Decode is checked for every encoding of every format of 16 bits or fewer;
encode (round to nearest even) on boundary sweeps, a strided sweep over all
float32 bit patterns and a million random patterns. Saturating and
toward-zero modes, which ml_dtypes lacks, are checked against references
derived from ml_dtypes' nearest-even results in independent ways.
"""

import ml_dtypes
import numpy as np
import pytest

from tessera import numerics

from formats import (BITS, HAS_INF, HAS_NAN, ML_DTYPES, SIGNED, all_encodings, boundary_sweep,
                     reference_decode, reference_encode, strided_float32)

FORMATS = list(ML_DTYPES)


def _same_bits_or_both_nan(ours, ref, name, x):
    ours_v = reference_decode(ours, name)
    ref_v = reference_decode(ref, name)
    both_nan = np.isnan(ours_v) & np.isnan(ref_v)
    bad = (ours != ref) & ~both_nan
    if bad.any():
        i = np.flatnonzero(bad)[:8]
        pytest.fail(f"{name}: {bad.sum()} mismatches; x={x[i]} bits(x)={x[i].view(np.uint32)} "
                    f"ours={ours[i]} ml_dtypes={ref[i]}")


def _comparable(x, name):
    """Inputs where Tessera documents a different choice than ml_dtypes.

    - fp6/fp4 have no NaN: Tessera encodes NaN as +0 (ml_dtypes gives a
      zero whose sign is the opposite of the NaN's).
    - e8m0 from float32 subnormals: ml_dtypes rounds some of them to 2^-126;
      Tessera rounds to the nearest power of two (checked separately below).
    """
    keep = np.ones(x.shape, dtype=bool)
    if name not in HAS_NAN:
        keep &= ~np.isnan(x)
    if name == "e8m0":
        keep &= ~((np.abs(x) < np.float32(2.0 ** -126)) & (x != 0))
    return x[keep]


@pytest.mark.parametrize("name", FORMATS)
def test_decode_every_encoding(name):
    codes = all_encodings(name)
    ours = numerics.decode(codes, name).astype(np.float64)
    ref = reference_decode(codes, name)
    assert np.array_equal(np.isnan(ours), np.isnan(ref)), name
    finite = ~np.isnan(ref)
    assert np.array_equal(ours[finite], ref[finite]), name
    # Signed zeros decode with their sign.
    assert np.array_equal(np.signbit(ours[finite]), np.signbit(ref[finite])), name


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("sweep", ["boundaries", "strided", "random"])
def test_encode_nearest_even_matches_ml_dtypes(name, sweep, rng):
    if sweep == "boundaries":
        x = boundary_sweep(name)
    elif sweep == "strided":
        x = strided_float32()
    else:
        x = rng.integers(0, 2 ** 32, size=1_000_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = _comparable(x, name)
    ours = numerics.encode(x, name)
    _same_bits_or_both_nan(ours, reference_encode(x, name), name, x)


@pytest.mark.parametrize("name", FORMATS)
def test_float64_input_agrees_with_float32_input(name, rng):
    """The float64 path (scalar, exact) and the float32 path (vectorized) agree."""
    x = np.concatenate([boundary_sweep(name), strided_float32(65537)])
    a = numerics.encode(x, name)
    b = numerics.encode(x.astype(np.float64), name)
    nan = np.isnan(numerics.decode(a, name))
    assert np.array_equal(a[~nan], b[~nan]), name
    assert np.array_equal(nan, np.isnan(numerics.decode(b, name)))


@pytest.mark.parametrize("name", [n for n in FORMATS if n != "e8m0"])
def test_saturate_equals_clip_then_round(name):
    """overflow='saturate' must equal clipping to +-max before rounding."""
    x = np.concatenate([boundary_sweep(name), strided_float32(40009)])
    x = x[~np.isnan(x)]
    top = np.float32(np.nanmax(reference_decode(all_encodings(name), name)[
        np.isfinite(reference_decode(all_encodings(name), name))]))
    ours = numerics.encode(x, name, overflow="saturate")
    ref = reference_encode(np.clip(x, -top, top), name)
    assert np.array_equal(ours, ref), name


@pytest.mark.parametrize("name", [n for n in FORMATS if n != "e8m0"])
def test_toward_zero_is_largest_magnitude_not_above(name):
    """Round toward zero: the representable value of largest magnitude <= |x|.
    Overflow from a finite value gives the largest finite value (IEEE 754)."""
    x = np.concatenate([boundary_sweep(name), strided_float32(40009)])
    x = x[np.isfinite(x)]
    ours = numerics.decode(numerics.encode(x, name, rounding="toward_zero"), name).astype(np.float64)
    table = reference_decode(all_encodings(name), name)
    finite = np.unique(np.abs(table[np.isfinite(table)]))
    idx = np.searchsorted(finite, np.abs(x.astype(np.float64)), side="right") - 1
    expected = np.copysign(finite[idx], x)
    assert np.array_equal(ours, expected), name
    if name in SIGNED:
        assert np.array_equal(np.signbit(ours), np.signbit(x))


@pytest.mark.parametrize("name", [n for n in FORMATS if n in HAS_INF])
def test_infinities(name):
    x = np.array([np.inf, -np.inf], dtype=np.float32)
    assert np.array_equal(numerics.decode(numerics.encode(x, name), name), x)
    sat = numerics.decode(numerics.encode(x, name, overflow="saturate"), name)
    assert np.all(np.isfinite(sat)) and sat[0] == -sat[1] > 0


def test_fp8_e4m3_overflow_is_nan_or_saturates():
    x = np.array([448.0, 464.0, 465.0, 1e6, np.inf, -np.inf], dtype=np.float32)
    inf_nan = numerics.decode(numerics.encode(x, "fp8_e4m3"), "fp8_e4m3")
    assert inf_nan[0] == 448 and inf_nan[1] == 448  # 464 is a tie: rounds to even (448)
    assert np.isnan(inf_nan[2:]).all()
    sat = numerics.decode(numerics.encode(x, "fp8_e4m3", overflow="saturate"), "fp8_e4m3")
    assert np.array_equal(sat, [448, 448, 448, 448, 448, -448])


@pytest.mark.parametrize("name", ["fp6_e2m3", "fp6_e3m2", "fp4_e2m1"])
def test_formats_without_nan_map_nan_to_positive_zero(name):
    bits = numerics.encode(np.array([np.nan, -np.nan], dtype=np.float32), name)
    assert np.array_equal(bits, [0, 0])


def test_nan_keeps_sign_where_nan_exists():
    for name in ["fp16", "bf16", "fp8_e4m3", "fp8_e5m2"]:
        out = numerics.decode(numerics.encode(np.array([np.nan, -np.nan], dtype=np.float32), name), name)
        assert np.isnan(out).all()
        assert list(np.signbit(out)) == [False, True], name


def test_e8m0_rules():
    x = np.array([0.0, -0.0, -1.0, np.nan, np.inf, 1.0, 1.5, 3.0, 0.75, 2.0 ** 127, 2.0 ** 127 * 1.5,
                  2.0 ** -127, 2.0 ** -140, 1e-45], dtype=np.float32)
    bits = numerics.encode(x, "e8m0")
    # No zero, no sign: zero, negatives, NaN and infinity are NaN (0xFF). Ties
    # between powers of two round up; values below 2^-127 clamp to 2^-127.
    assert list(bits) == [255, 255, 255, 255, 255, 127, 128, 129, 127, 254, 255, 0, 0, 0]
    sat = numerics.encode(np.array([np.inf, 1e38 * 3], dtype=np.float32), "e8m0", overflow="saturate")
    assert list(sat) == [254, 254]


def test_e8m0_float32_subnormals_round_to_nearest_power_of_two():
    x = np.arange(1, 2 ** 23, 997, dtype=np.uint32).view(np.float32)  # float32 subnormals
    ours = numerics.decode(numerics.encode(x, "e8m0"), "e8m0").astype(np.float64)
    x64 = x.astype(np.float64)
    # Candidates 2^-127 and 2^-126: pick the nearer; ties go up (as for normals).
    lo, hi = 2.0 ** -127, 2.0 ** -126
    expected = np.where(x64 - lo >= hi - x64, hi, lo)
    expected = np.where(x64 < lo, lo, expected)
    assert np.array_equal(ours, expected)


def test_fp32_and_fp64_identity_and_rounding():
    x = np.array([1.0, -2.5, np.inf, 1e-45], dtype=np.float32)
    assert np.array_equal(numerics.encode(x, "fp32"), x.view(np.uint32))
    d = np.array([1.0, 1 + 2.0 ** -24, 1 + 3 * 2.0 ** -24, 1e300, 1e-50])
    got = numerics.decode(numerics.encode(d, "fp32"), "fp32")
    assert np.array_equal(got, d.astype(np.float32))  # numpy's float64->float32 is IEEE RNE
    assert np.array_equal(numerics.decode(numerics.encode(d, "fp64"), "fp64"), d)


@pytest.mark.parametrize("name", FORMATS)
def test_empty_and_multidimensional_arrays(name):
    assert numerics.encode(np.zeros((0, 3), dtype=np.float32), name).shape == (0, 3)
    x = np.linspace(-2, 2, 24, dtype=np.float32).reshape(2, 3, 4)
    bits = numerics.encode(x, name)
    assert bits.shape == (2, 3, 4)
    flat = numerics.encode(x.reshape(-1), name)
    assert np.array_equal(bits.reshape(-1), flat)
    # A non-contiguous view converts like its copy.
    assert np.array_equal(numerics.encode(x[:, ::2, 1], name), numerics.encode(x[:, ::2, 1].copy(), name))


@pytest.mark.parametrize("name", [f for f in FORMATS if f not in ("fp16", "e8m0")])
def test_tensor_numpy_of_every_encoding_matches_ml_dtypes(name):
    """Tensor.numpy() of a format numpy lacks gives float32 values: every encoding, from a
    contiguous tensor (decoded in bulk) and from a strided view (element by element)."""
    from tessera import _C
    codes = all_encodings(name)
    t = _C._tensor_from_codes(codes.astype(np.int64).tolist(), [codes.size], name)
    ref = reference_decode(codes, name)
    for got, want in ((t.numpy(), ref), (t[1::3].numpy(), ref[1::3])):
        assert got.dtype == np.float32
        assert np.array_equal(np.isnan(got), np.isnan(want)), name
        keep = ~np.isnan(want)
        assert np.array_equal(got[keep].astype(np.float64), want[keep]), name
        assert np.array_equal(np.signbit(got[keep]), np.signbit(want[keep])), name


def _narrow_hard_doubles(name, rng):
    """float64 values where rounding to bf16 or fp16 is easy to get wrong: exact midpoints between
    neighbours and one double ulp either side, the overflow threshold, the subnormal range, values
    below float32's range, zeros, infinities, NaNs, and random values over 300 binades."""
    top_code = 0x7F80 if name == "bf16" else 0x7C00  # +inf
    codes = np.concatenate([np.arange(0, top_code, 7), np.arange(top_code - 0x80, top_code), np.arange(0, 0x100)])
    lo = numerics.decode(codes.astype(np.uint16), name).astype(np.float64)
    hi = numerics.decode((codes + 1).astype(np.uint16), name).astype(np.float64)
    mid = (lo + hi) / 2  # exact in float64 (the midpoint above the largest finite value is the overflow threshold)
    parts = [mid, np.nextafter(mid, np.inf), np.nextafter(mid, -np.inf), lo, np.nextafter(lo, 0)]
    fmax = float(np.finfo(np.float32).max)
    special = np.array([fmax, fmax * (1 + 2.0 ** -30), 2.0 ** 128, 1e300, 65504.0, 65520.0, 65536.0,
                        2.0 ** -14, 2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26, 2.0 ** -133, 2.0 ** -134,
                        3 * 2.0 ** -135, 2.0 ** -149, 2.0 ** -150, 2.0 ** -151, 2.0 ** -200, 5e-324, 0.0,
                        np.inf, np.nan, 1.0, 1 + 2.0 ** -8, 1 + 2.0 ** -11, 1 + 2.0 ** -8 + 2.0 ** -40,
                        1 + 2.0 ** -11 - 2.0 ** -40])
    random = rng.standard_normal(200_000) * np.exp2(rng.integers(-160, 140, 200_000))
    x = np.concatenate(parts + [special, random])
    return np.concatenate([x, -x])


def _rounded_once(x, name):
    """x (float64) rounded to nearest even on `name`'s grid exactly, by numpy: the quantum at x's
    binade (the subnormal one below the smallest normal) divides exactly, np.rint ties to even, and
    the product is exact. Above the largest finite value the grid goes on, so the encoder's overflow
    rule then sees a value beyond it. NaN stays NaN."""
    info = ml_dtypes.finfo(ML_DTYPES[name][0])
    with np.errstate(invalid="ignore", over="ignore"):
        _, e = np.frexp(x)  # |x| = m 2^e, m in [0.5, 1)
        exponent = np.maximum(e - 1, info.minexp)
        quantum = np.ldexp(1.0, exponent - info.nmant)
        return np.where(np.isfinite(x), np.rint(x / quantum) * quantum, x)


@pytest.mark.parametrize("name", [f for f in FORMATS if f != "e8m0"])
def test_float64_encode_rounds_once(name, rng):
    """Bulk encoding from float64 rounds each value once (through a float rounded to odd and the
    float32 encoder): the codes of the exactly rounded values, on values next to every midpoint."""
    x = _narrow_hard_doubles("bf16", rng) if BITS[name] >= 16 else np.concatenate(
        [_narrow_hard_doubles("bf16", rng)[::7], _narrow_hard_doubles("fp16", rng)[::7]])
    got = numerics.encode(x, name)
    with np.errstate(over="ignore"):
        want = numerics.encode(_rounded_once(x, name).astype(np.float32), name)
    nan = np.isnan(x)
    assert np.array_equal(got[~nan], want[~nan]), name
    assert np.array_equal(numerics.encode(x[nan], name), numerics.encode(x[nan].astype(np.float32), name))


@pytest.mark.parametrize("name", ["bf16", "fp16"])
@pytest.mark.parametrize("source", ["fp64", "fp32"])
def test_compiled_narrow_rounding_matches_the_encoder(name, source, rng, monkeypatch):
    """The CPU kernels round to bf16 and fp16 through a float rounded to odd and the scalar fp32
    encoder (rounded_to_odd, elementary::encode), not the generic encoder; the codes must be the
    generic encoder's, NaN included (the canonical quiet NaN with its sign)."""
    import tessera
    monkeypatch.setenv("TESSERA_BACKEND", "compiled")
    x = _narrow_hard_doubles(name, rng)
    if source == "fp32":
        with np.errstate(over="ignore"):
            x = x.astype(np.float32).astype(np.float64)
    f = tessera.jit(lambda v: tessera.ops.cast(v, name))
    got = np.asarray(f(tessera.tensor(x, dtype=source)).codes())
    with np.errstate(over="ignore"):
        want = numerics.encode(_rounded_once(x, name).astype(np.float32), name)
    bad = got != want
    assert not bad.any(), (f"{bad.sum()} of {x.size} differ, e.g. x={x[bad][:4]!r} "
                           f"got={got[bad][:4]} want={want[bad][:4]}")
