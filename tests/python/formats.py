"""The formats under test and their independent counterparts in ml_dtypes."""

import ml_dtypes
import numpy as np

# tessera name -> (ml_dtypes type, numpy unsigned type holding one encoding)
ML_DTYPES = {
    "fp16": (np.float16, np.uint16),
    "bf16": (ml_dtypes.bfloat16, np.uint16),
    "fp8_e4m3": (ml_dtypes.float8_e4m3fn, np.uint8),
    "fp8_e5m2": (ml_dtypes.float8_e5m2, np.uint8),
    "fp6_e2m3": (ml_dtypes.float6_e2m3fn, np.uint8),
    "fp6_e3m2": (ml_dtypes.float6_e3m2fn, np.uint8),
    "fp4_e2m1": (ml_dtypes.float4_e2m1fn, np.uint8),
    "e8m0": (ml_dtypes.float8_e8m0fnu, np.uint8),
}
BITS = {"fp16": 16, "bf16": 16, "fp8_e4m3": 8, "fp8_e5m2": 8, "fp6_e2m3": 6, "fp6_e3m2": 6,
        "fp4_e2m1": 4, "e8m0": 8}
HAS_NAN = {"fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "e8m0"}
HAS_INF = {"fp16", "bf16", "fp8_e5m2"}
SIGNED = set(ML_DTYPES) - {"e8m0"}


def all_encodings(name):
    return np.arange(2 ** BITS[name], dtype=ML_DTYPES[name][1])


def reference_encode(x32, name):
    """ml_dtypes' round-to-nearest-even encoding of float32 values."""
    ml_type, bits_type = ML_DTYPES[name]
    return x32.astype(ml_type).view(bits_type) if BITS[name] >= 8 else x32.astype(ml_type).view(np.uint8)


def reference_decode(codes, name):
    ml_type, bits_type = ML_DTYPES[name]
    return codes.astype(bits_type).view(ml_type).astype(np.float64)


def boundary_sweep(name):
    """Every representable value, every midpoint between neighbours, and the float32
    numbers just either side of each: where rounding decisions change."""
    values = reference_decode(all_encodings(name), name)
    finite = np.unique(values[np.isfinite(values)])
    mids = (finite[:-1] + finite[1:]) / 2
    # Midpoint past the largest value: where overflow starts.
    top = finite[-1] + (finite[-1] - finite[-2]) / 2
    points = np.concatenate([finite, mids, [top, -top]]).astype(np.float32)
    up = np.nextafter(points, np.float32(np.inf))
    down = np.nextafter(points, np.float32(-np.inf))
    sweep = np.concatenate([points, up, down, -points, -up, -down,
                            np.array([0.0, -0.0, np.inf, -np.inf], dtype=np.float32)])
    return sweep.astype(np.float32)


def strided_float32(step=4099):
    """Float32 bit patterns spread evenly over all 2^32."""
    return np.arange(0, 2 ** 32, step, dtype=np.uint64).astype(np.uint32).view(np.float32)
