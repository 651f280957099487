"""MX (OCP v1.0) and NVFP4 against small independent references written here
from the formats' rules, with ml_dtypes doing the element rounding."""

import ml_dtypes
import numpy as np
import pytest

import tessera
from tessera import numerics

ELEMENTS = {  # name -> (ml_dtypes type, emax, max)
    "fp8_e4m3": (ml_dtypes.float8_e4m3fn, 8, 448.0),
    "fp8_e5m2": (ml_dtypes.float8_e5m2, 15, 57344.0),
    "fp6_e2m3": (ml_dtypes.float6_e2m3fn, 2, 7.5),
    "fp6_e3m2": (ml_dtypes.float6_e3m2fn, 4, 28.0),
    "fp4_e2m1": (ml_dtypes.float4_e2m1fn, 2, 6.0),
}


def mx_reference(x, elem, block):
    """OCP MX v1.0: X = 2^(floor(log2(amax)) - emax_elem), elements = x / X rounded to
    nearest even, saturating. Blocks holding NaN/Inf get the NaN scale. Returns the
    dequantized values and the scale exponents."""
    ml_type, emax, top = ELEMENTS[elem]
    rows = x.reshape(-1, x.shape[-1]).astype(np.float64)
    out = np.empty_like(rows)
    exps = []
    for r, row in enumerate(rows):
        row_exps = []
        for start in range(0, row.size, block):
            chunk = row[start:start + block]
            if not np.all(np.isfinite(chunk)):
                out[r, start:start + block] = np.nan
                row_exps.append(None)
                continue
            amax = np.max(np.abs(chunk))
            e = -127 if amax == 0 else int(np.floor(np.log2(amax))) - emax
            e = min(max(e, -127), 127)
            scaled = np.clip(chunk / 2.0 ** e, -top, top)
            out[r, start:start + block] = scaled.astype(ml_type).astype(np.float64) * 2.0 ** e
            row_exps.append(e)
        exps.append(row_exps)
    return out.reshape(x.shape), exps


@pytest.mark.parametrize("elem", list(ELEMENTS))
@pytest.mark.parametrize("shape,block", [((4, 64), 32), ((3, 50), 32), ((2, 3, 16), 8), ((100,), 32)])
def test_mx_matches_reference(elem, shape, block, rng):
    # Varied magnitudes across blocks, and some subnormal-sized values.
    x = rng.standard_normal(shape) * np.exp(rng.uniform(-20, 20, size=shape[:-1] + (1,)))
    x = x.astype(np.float32)
    codes, scales = numerics.quantize_mx(x, elem=elem, block=block)
    assert codes.shape == x.shape and codes.dtype == np.uint8
    assert scales.shape == shape[:-1] + (-(-shape[-1] // block),)
    expected, exps = mx_reference(x, elem, block)
    got = numerics.dequantize_mx(codes, scales, elem=elem, block=block)
    assert np.array_equal(got.astype(np.float64), expected.astype(np.float32).astype(np.float64))
    flat_exps = [e for row in exps for e in row]
    assert list(scales.reshape(-1).astype(int) - 127) == flat_exps


@pytest.mark.parametrize("elem", list(ELEMENTS))
def test_mx_special_blocks(elem):
    top = ELEMENTS[elem][2]
    x = np.zeros((4, 32), dtype=np.float32)
    x[1, 3] = np.nan
    x[2, 0] = -np.inf
    x[3, :] = top  # at the element maximum: scale 2^0, every code the max
    codes, scales = numerics.quantize_mx(x, elem=elem)
    assert scales[0, 0] == 0 and not codes[0].any()          # all-zero block: smallest scale
    assert scales[1, 0] == 255 and scales[2, 0] == 255         # NaN / Inf -> NaN scale
    out = numerics.dequantize_mx(codes, scales, elem=elem)
    assert not out[0].any()
    assert np.isnan(out[1]).all() and np.isnan(out[2]).all()
    assert scales[3, 0] == 127 and np.array_equal(out[3], x[3])


@pytest.mark.parametrize("elem", list(ELEMENTS))
def test_mx_round_trip_error_bound(elem, rng):
    """amax / X lies in [2^emax, 2^(emax+1)); below the element max an element errs by at
    most half an ulp of that top binade, above it saturation costs up to 2^(emax+1) - max.
    So |x - q| <= max(2^(emax - mbits - 1), 2^(emax+1) - max) * X."""
    mbits = {"fp8_e4m3": 3, "fp8_e5m2": 2, "fp6_e2m3": 3, "fp6_e3m2": 2, "fp4_e2m1": 1}[elem]
    _, emax, top = ELEMENTS[elem]
    x = rng.standard_normal((64, 32)).astype(np.float32)
    codes, scales = numerics.quantize_mx(x, elem=elem)
    q = numerics.dequantize_mx(codes, scales, elem=elem)
    X = 2.0 ** (scales.astype(np.int64) - 127)
    bound = max(2.0 ** (emax - mbits - 1), 2.0 ** (emax + 1) - top) * X
    assert np.all(np.abs(x - q) <= bound)
    rel = np.sqrt(np.mean((x - q) ** 2) / np.mean(x ** 2))
    print(f"MX {elem}: relative RMS round-trip error {rel:.4f}")


def nvfp4_reference(x):
    """NVFP4: tensor scale amax/(6*448); per 16 values an e4m3 scale amax_b/6/tensor_scale
    (nearest even, saturating); fp4 elements of x/(scale*tensor_scale), saturating."""
    x64 = x.astype(np.float64)
    finite = x64[np.isfinite(x64)]
    amax = np.max(np.abs(finite)) if finite.size else 0.0
    ts = np.float32(1.0) if amax == 0 else np.float32(amax / (6.0 * 448.0))
    rows = x64.reshape(-1, x.shape[-1])
    out = np.empty_like(rows)
    for r, row in enumerate(rows):
        for start in range(0, row.size, 16):
            chunk = row[start:start + 16]
            if not np.all(np.isfinite(chunk)):
                out[r, start:start + 16] = np.nan
                continue
            want = np.max(np.abs(chunk)) / 6.0 / float(ts)
            s = float(np.float32(min(want, 448.0)).astype(ml_dtypes.float8_e4m3fn))
            bs = s * float(ts)
            el = np.zeros_like(chunk) if bs == 0 else np.clip(chunk / bs, -6, 6)
            out[r, start:start + 16] = el.astype(ml_dtypes.float4_e2m1fn).astype(np.float64) * bs
    return out.reshape(x.shape), ts


@pytest.mark.parametrize("shape", [(8, 64), (5, 40), (256,)])
def test_nvfp4_matches_reference(shape, rng):
    x = (rng.standard_normal(shape) * np.exp(rng.uniform(-6, 6, size=shape[:-1] + (1,)))).astype(np.float32)
    codes, scales, ts = numerics.quantize_nvfp4(x)
    assert scales.shape == shape[:-1] + (-(-shape[-1] // 16),)
    expected, expected_ts = nvfp4_reference(x)
    assert ts == expected_ts
    got = numerics.dequantize_nvfp4(codes, scales, ts)
    assert np.array_equal(got, expected.astype(np.float32))
    rel = np.sqrt(np.mean((x - got) ** 2) / np.mean(x ** 2))
    print(f"NVFP4 {shape}: relative RMS round-trip error {rel:.4f}")


def test_nvfp4_special_values():
    x = np.zeros((3, 16), dtype=np.float32)
    x[1, 5] = np.nan
    x[2] = np.linspace(-6, 6, 16)
    codes, scales, ts = numerics.quantize_nvfp4(x)
    out = numerics.dequantize_nvfp4(codes, scales, ts)
    assert not out[0].any() and np.isnan(out[1]).all()
    assert np.isfinite(ts) and ts > 0
    zero_codes, zero_scales, zero_ts = numerics.quantize_nvfp4(np.zeros(32, dtype=np.float32))
    assert zero_ts == 1.0 and not zero_codes.any() and not zero_scales.any()


def test_block_scaled_bad_input():
    with pytest.raises(tessera.DtypeError, match="MX element type"):
        numerics.quantize_mx(np.ones(32, dtype=np.float32), elem="bf16")
    with pytest.raises(tessera.ShapeError, match="at least one dimension"):
        numerics.quantize_mx(np.float32(1.0))
    codes, scales = numerics.quantize_mx(np.ones((2, 64), dtype=np.float32))
    with pytest.raises(tessera.ShapeError, match=r"scales of shape \(2, 2\)"):
        numerics.dequantize_mx(codes, scales[:, :1])
    with pytest.raises(tessera.DtypeError, match="uint8"):
        numerics.dequantize_mx(codes.astype(np.float32), scales)
    with pytest.raises(tessera.DtypeError, match="real numbers"):
        numerics.quantize_nvfp4(np.array(["x"] * 16))
    with pytest.raises(tessera.ShapeError, match="block must be positive"):
        numerics.quantize_mx(np.ones(4, dtype=np.float32), block=0)
