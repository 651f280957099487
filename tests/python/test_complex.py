"""Complex storage dtypes (complex64, complex128): tensors, numpy and DLPack, promotion."""

import numpy as np
import pytest

import tessera
from tessera.errors import DtypeError


@pytest.mark.parametrize("np_dtype,name,part", [(np.complex64, "complex64", "fp32"),
                                                 (np.complex128, "complex128", "fp64")])
def test_numpy_round_trip_and_policy(np_dtype, name, part):
    rng = np.random.default_rng(1)
    a = (rng.standard_normal((3, 5)) + 1j * rng.standard_normal((3, 5))).astype(np_dtype)
    t = tessera.tensor(a)
    assert t.dtype == name and t.dtype.is_complex and not t.dtype.is_float
    assert t.dtype.itemsize == np.dtype(np_dtype).itemsize
    assert t.policy.accum == part  # parts accumulate at fp32 / fp64
    out = t.numpy()
    assert out.dtype == np_dtype
    np.testing.assert_array_equal(out, a)
    assert f"[3, 5] {name} @accum({part})" in repr(t)


def test_dlpack_both_ways():
    a = (np.arange(4) + 1j * np.arange(4, 8)).astype(np.complex64)
    t = tessera.from_dlpack(a)
    assert t.dtype == "complex64"
    np.testing.assert_array_equal(np.from_dlpack(t), a)


def test_real_data_into_complex_storage_and_back():
    t = tessera.tensor(np.array([1.5, -2.0]), dtype=tessera.complex128)
    np.testing.assert_array_equal(t.numpy(), np.array([1.5 + 0j, -2.0 + 0j]))
    t = tessera.tensor(np.array([1 + 2j]), dtype="complex64")  # complex128 data rounded to complex64
    assert t.numpy().dtype == np.complex64


def test_complex_data_into_real_storage_is_an_error():
    with pytest.raises(DtypeError, match="complex data cannot be stored as fp32"):
        tessera.tensor(np.array([1 + 2j]), dtype="fp32")


def test_strided_views_keep_both_parts():
    a = (np.arange(12) + 1j * np.arange(12)).reshape(3, 4).astype(np.complex128)
    t = tessera.tensor(a)
    np.testing.assert_array_equal(t.numpy().T.copy(), a.T)
    np.testing.assert_array_equal(tessera.tensor(a[:, ::2]).numpy(), a[:, ::2])
