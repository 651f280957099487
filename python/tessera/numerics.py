"""Bit-exact conversions between numpy arrays and Tessera's storage formats.

``encode`` returns the encodings (raw bits) of each element, one element per
slot of the narrowest unsigned integer that holds it; ``decode`` turns them
back into numbers. ``quantize_mx`` / ``quantize_nvfp4`` produce block-scaled
data with blocks along the last axis. docs/guide/numerics.md gives the rules.
"""

from __future__ import annotations

import numpy as np

from . import _C
from .errors import DtypeError, ShapeError, _raise

__all__ = ["encode", "decode", "philox4x32", "pack_int4", "unpack_int4", "quantize_mx", "dequantize_mx",
           "quantize_nvfp4", "dequantize_nvfp4", "encoding_dtype"]

_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _storage(dtype) -> "_C.DType":
    """The storage dtype named by a DType, a Policy or their text; DtypeError otherwise."""
    if isinstance(dtype, _C.DType):
        return dtype
    if isinstance(dtype, _C.Policy):
        return dtype.storage
    if isinstance(dtype, str):
        return _storage(_C.dtype(dtype))
    _raise(DtypeError, "TE1001", f"expected a tessera dtype, policy or dtype name, got {dtype!r}")


def encoding_dtype(dtype) -> np.dtype:
    """The numpy integer dtype that holds one encoding of ``dtype``."""
    return np.dtype(_UNSIGNED[_storage(dtype).itemsize])


def _real_array(x, what: str) -> np.ndarray:
    array = np.asarray(x)
    kind = array.dtype.kind
    if kind == "f":
        target = np.float32 if array.dtype.itemsize <= 4 else np.float64
        if array.dtype.itemsize > 8:
            _raise(DtypeError, "TE1003", f"{what}: {array.dtype} values cannot be converted exactly; "
                                         "pass float32 or float64")
    elif kind in "iub":
        target = np.float64
    else:
        _raise(DtypeError, "TE1003", f"{what} expects real numbers (a float, integer or bool array), "
                                     f"got an array of dtype {array.dtype}")
    return np.asarray(array, dtype=target, order="C")


def _float32_array(x, what: str) -> np.ndarray:
    array = np.asarray(x)
    if array.dtype.kind not in "fiub" or array.dtype.itemsize > 8:
        _raise(DtypeError, "TE1003", f"{what} expects real numbers, got an array of dtype {array.dtype}")
    return np.asarray(array, dtype=np.float32, order="C")


def _codes_array(x, expected: np.dtype, what: str) -> np.ndarray:
    array = np.asarray(x)
    if array.dtype.kind not in "ui" or array.dtype.itemsize != np.dtype(expected).itemsize:
        _raise(DtypeError, "TE1003", f"{what} must be an array of {np.dtype(expected).name} "
                                     f"(or same-width signed) integers, got {array.dtype}")
    return np.asarray(array, order="C").view(expected)


def encode(x, dtype, rounding: str = "nearest_even", overflow: str = "inf_nan", seed: int = 0) -> np.ndarray:
    """Encodings of ``x`` in ``dtype``, as an unsigned integer array of x's shape.

    rounding: ``nearest_even`` | ``stochastic`` | ``toward_zero``.
    overflow: ``inf_nan`` (IEEE) | ``saturate`` (to the largest finite value).
    seed: stochastic rounding's random stream; element i uses Philox(seed, i).
    """
    values = _real_array(x, "encode")
    dt = _storage(dtype)
    out = np.empty(values.shape, dtype=encoding_dtype(dt))
    _C._encode_into(values, dt, rounding, overflow, int(seed), out)
    return out


def decode(bits, dtype) -> np.ndarray:
    """Values of the encodings ``bits``: float32, except float64 for fp64, int32 and int64."""
    dt = _storage(dtype)
    codes = _codes_array(bits, encoding_dtype(dt), f"decode(..., {dt.name}): bits")
    wide = dt.name in ("fp64", "int32", "int64")
    out = np.empty(codes.shape, dtype=np.float64 if wide else np.float32)
    _C._decode_into(codes, dt, out)
    return out


def pack_int4(codes) -> np.ndarray:
    """Packs int4 codes (0..15, as ``encode(x, "int4")`` returns) two per byte, element 2i in the low nibble."""
    flat = _codes_array(codes, np.uint8, "pack_int4: codes").reshape(-1)
    packed = np.empty((flat.size + 1) // 2, dtype=np.uint8)
    _C._pack_int4(flat, packed)
    return packed


def unpack_int4(packed, count: int) -> np.ndarray:
    """The ``count`` int4 codes held in ``packed``."""
    flat = _codes_array(packed, np.uint8, "unpack_int4: packed").reshape(-1)
    if count < 0 or flat.size != (count + 1) // 2:
        _raise(ShapeError, "TE2001", f"unpack_int4: {flat.size} bytes hold {2 * flat.size - 1} or "
                                     f"{2 * flat.size} codes, not {count}")
    codes = np.empty(count, dtype=np.uint8)
    _C._unpack_int4(flat, codes)
    return codes


def _row_layout(shape: tuple, block: int, what: str) -> tuple[int, tuple]:
    if len(shape) == 0:
        _raise(ShapeError, "TE2001", f"{what} needs an array with at least one dimension "
                                     "(blocks run along the last axis), got a scalar")
    if block <= 0:
        _raise(ShapeError, "TE2001", f"{what}: block must be positive, got {block}")
    row = shape[-1]
    return row, shape[:-1] + (-(-row // block),)


def quantize_mx(x, elem="fp8_e4m3", block: int = 32, rounding: str = "nearest_even", seed: int = 0):
    """OCP MX v1.0: returns (codes uint8 of x's shape, e8m0 scales uint8 of shape[:-1] + (ceil(last/block),))."""
    values = _float32_array(x, "quantize_mx")
    row, scale_shape = _row_layout(values.shape, block, "quantize_mx")
    codes = np.empty(values.shape, dtype=np.uint8)
    scales = np.empty(scale_shape, dtype=np.uint8)
    if values.size:
        _C._quantize_mx(values, _storage(elem), block, row, rounding, int(seed), codes, scales)
    return codes, scales


def dequantize_mx(codes, scales, elem="fp8_e4m3", block: int = 32) -> np.ndarray:
    """float32 values of MX data produced by ``quantize_mx``."""
    codes = _codes_array(codes, np.uint8, "dequantize_mx: codes")
    scales = _codes_array(scales, np.uint8, "dequantize_mx: scales")
    row, scale_shape = _row_layout(codes.shape, block, "dequantize_mx")
    if scales.shape != scale_shape:
        _raise(ShapeError, "TE2001", f"dequantize_mx: codes of shape {codes.shape} with block {block} need "
                                     f"scales of shape {scale_shape}, got {scales.shape}")
    out = np.empty(codes.shape, dtype=np.float32)
    if out.size:
        _C._dequantize_mx(codes, scales, _storage(elem), block, row, out)
    return out


def quantize_nvfp4(x):
    """NVFP4: returns (fp4 codes uint8 of x's shape, fp8_e4m3 scale encodings per 16 along the last axis,
    fp32 tensor scale)."""
    values = _float32_array(x, "quantize_nvfp4")
    row, scale_shape = _row_layout(values.shape, 16, "quantize_nvfp4")
    codes = np.empty(values.shape, dtype=np.uint8)
    scales = np.empty(scale_shape, dtype=np.uint8)
    tensor_scale = 1.0
    if values.size:
        tensor_scale = _C._quantize_nvfp4(values, row, codes, scales)
    return codes, scales, np.float32(tensor_scale)


def dequantize_nvfp4(codes, scales, tensor_scale) -> np.ndarray:
    """float32 values of NVFP4 data produced by ``quantize_nvfp4``."""
    codes = _codes_array(codes, np.uint8, "dequantize_nvfp4: codes")
    scales = _codes_array(scales, np.uint8, "dequantize_nvfp4: scales")
    row, scale_shape = _row_layout(codes.shape, 16, "dequantize_nvfp4")
    if scales.shape != scale_shape:
        _raise(ShapeError, "TE2001", f"dequantize_nvfp4: codes of shape {codes.shape} need scales of shape "
                                     f"{scale_shape}, got {scales.shape}")
    out = np.empty(codes.shape, dtype=np.float32)
    if out.size:
        _C._dequantize_nvfp4(codes, scales, float(tensor_scale), row, out)
    return out


def philox4x32(counters, key) -> np.ndarray:
    """Philox4x32-10, the counter-based generator behind every random bit Tessera
    draws: ``counters`` is an array of 4 x 32-bit words per counter (shape
    ``[..., 4]``), ``key`` two 32-bit words. Returns the 4 output words per
    counter (uint32, same shape). ``philox4x32([0, 0, 0, 0], (0, 0))`` is the
    Random123 known answer ``[0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]``."""
    c = np.asarray(counters)
    if c.shape[-1:] != (4,):
        raise ShapeError(f"philox4x32: counters need 4 words each (shape [..., 4]), got shape {c.shape}")
    if c.dtype.kind not in "iu" or (c.size and (c.min() < 0 or c.max() > 0xFFFFFFFF)):
        raise DtypeError("philox4x32: counter words must be integers in [0, 2**32)")
    k = [int(w) for w in key]
    if len(k) != 2 or any(not 0 <= w <= 0xFFFFFFFF for w in k):
        raise DtypeError(f"philox4x32: key must be two 32-bit words, got {key!r}")
    flat = np.ascontiguousarray(c, dtype=np.uint32).reshape(-1)
    out = np.empty_like(flat)
    _C._philox4x32_into(flat, k[0], k[1], out)
    return out.reshape(c.shape)
