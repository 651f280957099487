"""Integer and bool encodings, int4 packing; numpy and ml_dtypes as references."""

import ml_dtypes
import numpy as np
import pytest

import tessera
from tessera import numerics

RANGES = {"int4": (-8, 7), "int8": (-128, 127), "int16": (-2 ** 15, 2 ** 15 - 1),
          "int32": (-2 ** 31, 2 ** 31 - 1), "uint8": (0, 255)}


@pytest.mark.parametrize("name", list(RANGES))
def test_nearest_even_and_saturation(name, rng):
    lo, hi = RANGES[name]
    x = np.concatenate([rng.uniform(lo * 1.5 - 3, hi * 1.5 + 3, 20000), np.arange(lo - 3, hi + 4, max(1, (hi - lo) // 500)) + 0.5,
                        [np.nan, np.inf, -np.inf, -0.0, 2.5, -2.5, 3.5]])
    got = numerics.decode(numerics.encode(x, name), name).astype(np.float64)
    expected = np.clip(np.nan_to_num(np.rint(x), nan=0.0, posinf=hi, neginf=lo), lo, hi)  # rint: ties to even
    assert np.array_equal(got, expected)


@pytest.mark.parametrize("name", list(RANGES))
def test_toward_zero(name, rng):
    lo, hi = RANGES[name]
    x = rng.uniform(lo - 10, hi + 10, 20000)
    got = numerics.decode(numerics.encode(x, name, rounding="toward_zero"), name).astype(np.float64)
    assert np.array_equal(got, np.clip(np.trunc(x), lo, hi))


def test_int64_extremes_and_tiny_negatives():
    x = np.array([1e30, -1e30, 2.0 ** 63, -2.0 ** 63, -2.0 ** -60, -0.4, 0.5, 1.5])
    got = numerics.encode(x, "int64").view(np.int64)
    assert list(got) == [2 ** 63 - 1, -2 ** 63, 2 ** 63 - 1, -2 ** 63, 0, 0, 0, 2]


def test_int4_codes_match_ml_dtypes_and_pack_low_nibble_first():
    values = np.arange(-8, 8, dtype=np.float32)
    codes = numerics.encode(values, "int4")
    assert np.array_equal(codes, values.astype(ml_dtypes.int4).view(np.uint8) & 0x0F)
    assert np.array_equal(numerics.decode(codes, "int4"), values)
    packed = numerics.pack_int4(codes[:5])
    assert packed.tolist() == [(codes[0] | codes[1] << 4), (codes[2] | codes[3] << 4), codes[4]]
    assert np.array_equal(numerics.unpack_int4(packed, 5), codes[:5])
    with pytest.raises(tessera.ShapeError, match="not 9"):
        numerics.unpack_int4(packed, 9)


def test_bool():
    x = np.array([0.0, -0.0, 1.0, -3.0, np.nan, 1e-30])
    assert numerics.encode(x, "bool").tolist() == [0, 0, 1, 1, 1, 1]
    assert numerics.decode(np.array([0, 1, 7], dtype=np.uint8), "bool").tolist() == [0.0, 1.0, 1.0]


def test_integer_inputs_are_exact():
    x = np.array([2 ** 31 - 1, -2 ** 31, 12345], dtype=np.int64)
    assert np.array_equal(numerics.decode(numerics.encode(x, "int32"), "int32"), x.astype(np.float64))
    assert numerics.decode(numerics.encode(np.array([True, False]), "fp16"), "fp16").tolist() == [1.0, 0.0]


def test_wrong_encoding_arrays():
    with pytest.raises(tessera.DtypeError, match="uint16"):
        numerics.decode(np.zeros(4, dtype=np.uint8), "fp16")
    with pytest.raises(tessera.DtypeError, match="uint8"):
        numerics.decode(np.zeros(4, dtype=np.float32), "fp8_e4m3")
    with pytest.raises(tessera.DtypeError, match="unknown dtype"):
        numerics.encode(np.zeros(4), "fp7")
    with pytest.raises(tessera.DtypeError, match="real numbers"):
        numerics.encode(np.zeros(4, dtype=np.complex64), "fp16")
    with pytest.raises(tessera.ArgumentError, match="unknown rounding"):
        numerics.encode(np.zeros(4), "fp16", rounding="up")
    with pytest.raises(tessera.ArgumentError, match="overflow"):
        numerics.encode(np.zeros(4), "fp16", overflow="wrap")
