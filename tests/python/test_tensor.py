"""Host tensors: construction, numpy round trips without copies, packed storage, DLPack."""

import ml_dtypes
import numpy as np
import pytest

import tessera


@pytest.mark.parametrize("np_dtype,name", [(np.float64, "fp64"), (np.float32, "fp32"), (np.float16, "fp16"),
                                           (np.int8, "int8"), (np.int16, "int16"), (np.int32, "int32"),
                                           (np.int64, "int64"), (np.uint8, "uint8"), (np.bool_, "bool")])
def test_native_dtypes_share_memory_both_ways(rng, np_dtype, name):
    a = (rng.standard_normal((3, 5)) * 10).astype(np_dtype)
    t = tessera.tensor(a)
    assert str(t.dtype) == name
    assert t.shape == (3, 5)
    b = t.numpy()
    assert b.dtype == a.dtype
    np.testing.assert_array_equal(b, a)
    assert np.shares_memory(a, b), "a numpy-native tensor must not copy"


def test_strided_views_are_adopted_without_copy(rng):
    base = rng.standard_normal((6, 8)).astype(np.float32)
    view = base[::2, 1::3].T
    t = tessera.tensor(view)
    assert t.shape == view.shape
    assert not t.is_contiguous()
    np.testing.assert_array_equal(t.numpy(), view)
    assert np.shares_memory(t.numpy(), base)


def test_tensor_keeps_numpy_memory_alive():
    a = np.arange(10, dtype=np.float32)
    t = tessera.tensor(a)
    del a
    np.testing.assert_array_equal(t.numpy(), np.arange(10, dtype=np.float32))


@pytest.mark.parametrize("name,ref", [("bf16", ml_dtypes.bfloat16), ("fp8_e4m3", ml_dtypes.float8_e4m3fn),
                                      ("fp8_e5m2", ml_dtypes.float8_e5m2), ("fp6_e2m3", ml_dtypes.float6_e2m3fn),
                                      ("fp6_e3m2", ml_dtypes.float6_e3m2fn), ("fp4_e2m1", ml_dtypes.float4_e2m1fn)])
def test_low_precision_values_round_like_ml_dtypes(rng, name, ref):
    limit = float(ml_dtypes.finfo(ref).max)
    # float32-exact inputs, so the float64 encode and ml_dtypes' float32 cast see the same value.
    x = rng.uniform(-limit, limit, size=(4, 7)).astype(np.float32)
    t = tessera.tensor(x.astype(np.float64), dtype=name)
    expected = x.astype(ref).astype(np.float32)
    np.testing.assert_array_equal(t.numpy(), expected)
    assert t.numpy().dtype == np.float32


def _float32_hard_values(rng):
    """float32 values where rounding to a narrow format is easy to get wrong: every bf16 value and the
    midpoints next to it (ties, and one float32 ulp either side), random values over 200 binades,
    float32 subnormals, zeros, infinities and NaN."""
    codes = np.arange(0, 1 << 16, dtype=np.uint32)
    bf = (codes << 16).view(np.float32)
    mid = ((codes << 16) | 0x8000).view(np.float32)
    finite = mid[np.isfinite(mid)]
    near = np.concatenate([np.nextafter(finite, np.float32(np.inf)), np.nextafter(finite, np.float32(-np.inf))])
    rand = (rng.standard_normal(20000) * np.exp2(rng.integers(-100, 100, 20000))).astype(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-40], dtype=np.float32)
    return np.concatenate([bf, mid, near, rand, special])


@pytest.mark.parametrize("policy", ["bf16", "fp16 @saturate", "fp8_e4m3", "fp8_e5m2 @toward_zero", "fp6_e3m2",
                                    "fp4_e2m1", "e8m0", "bf16 @stochastic_round", "int4", "fp8_e4m3 @saturate"])
def test_float32_sources_encode_as_their_float64_values(rng, policy):
    """float32 data (and float16 and ml_dtypes' narrow floats, which widen to it exactly) takes the
    float32 encoders; each element gets the codes its float64 value gets, in every rounding and
    overflow mode, stochastic draws included."""
    x = _float32_hard_values(rng)
    if policy == "int4":
        x = np.nan_to_num(np.clip(x, -8, 7), nan=0.0).round()
    via_float64 = tessera.tensor(x.astype(np.float64), dtype=policy, seed=7).codes()
    np.testing.assert_array_equal(tessera.tensor(x, dtype=policy, seed=7).codes(), via_float64)
    for narrow in (np.float16, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn):
        if policy.startswith("fp16") and narrow is np.float16:
            continue  # adopted as it is, without encoding (test_native_dtypes_share_memory_both_ways)
        y = x.astype(narrow)
        np.testing.assert_array_equal(tessera.tensor(y, dtype=policy, seed=7).codes(),
                                      tessera.tensor(y.astype(np.float64), dtype=policy, seed=7).codes())


def test_packed_fp4_and_int4_codes(rng):
    values = np.array([0.0, 0.5, -1.0, 6.0, -6.0, 1.5, 3.0], dtype=np.float64)
    t = tessera.tensor(values, dtype="fp4_e2m1")
    codes = t.codes()
    ref = values.astype(ml_dtypes.float4_e2m1fn).view(np.uint8)
    np.testing.assert_array_equal(codes, ref)
    ints = np.array([-8, -1, 0, 7, 3], dtype=np.int64)
    ti = tessera.tensor(ints, dtype="int4")
    np.testing.assert_array_equal(ti.numpy(), ints.astype(np.int8))
    assert ti.numpy().dtype == np.int8


def test_fp6_packing_round_trips_every_code():
    # Every fp6 code through packed storage (4 codes per 3 bytes) comes back.
    codes = list(range(64)) * 3 + [5]
    for name in ("fp6_e2m3", "fp6_e3m2"):
        t = tessera._C._tensor_from_codes(codes, [len(codes)], name)
        assert t.codes().tolist() == codes


def test_policy_and_device():
    t = tessera.tensor([1.0, 2.0], dtype=tessera.bf16 @ tessera.accum(tessera.fp32))
    assert str(t.policy) == "bf16 @accum(fp32)"
    assert t.device == "cpu"
    assert t.to("cpu") is not None
    with pytest.raises(tessera.DeviceError, match="cuda:0"):
        t.to("cuda:0")


def test_integer_range_is_checked():
    with pytest.raises(tessera.ArgumentError, match="do not fit"):
        tessera.tensor(np.array([300], dtype=np.int64), dtype="int8")


def test_dlpack_both_ways(rng):
    a = rng.standard_normal((2, 3)).astype(np.float32)
    t = tessera.from_dlpack(a)
    assert np.shares_memory(t.numpy(), a)
    b = np.from_dlpack(t)
    assert np.shares_memory(b, a)
    with pytest.raises(tessera.DtypeError, match="bf16"):
        tessera.tensor([1.0], dtype="bf16").__dlpack__()


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(tessera.DtypeError):
        tessera.tensor(["a", "b"])
    with pytest.raises(tessera.ShapeError, match="rectangular"):
        tessera.tensor([[1.0, 2.0], [3.0]])
    with pytest.raises(tessera.DtypeError, match="tf32"):
        tessera.tensor([1.0], dtype="tf32")


def test_basic_indexing_matches_numpy(rng):
    a = rng.standard_normal((4, 5, 6)).astype(np.float32)
    t = tessera.tensor(a)
    for index in [1, -1, (slice(1, 3),), (Ellipsis, 2), (None, 0), (1, None, slice(None, None, 2)),
                  (Ellipsis, None), (slice(None), Ellipsis, slice(-3, None)), (2, 3, 4), (None,),
                  (0, Ellipsis, None, 1), Ellipsis]:
        got = t[index]
        want = a[index]
        assert got.shape == want.shape, index
        np.testing.assert_array_equal(got.numpy(), want)


def test_indexing_errors():
    t = tessera.tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(tessera.ArgumentError, match="at most one"):
        t[..., 0, ...]
    with pytest.raises(tessera.ShapeError, match="too many indices"):
        t[0, 0, 0]
    with pytest.raises(tessera.ArgumentError, match="out of range"):
        t[2]
    with pytest.raises(TypeError):
        t["a"]
