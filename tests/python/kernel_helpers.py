"""Helpers shared by the kernel tests: a private compile cache and numpy references."""

import os
import pathlib

import numpy as np
import pytest

CONFORMANCE = pathlib.Path(__file__).resolve().parents[1] / "conformance"


@pytest.fixture(scope="module", autouse=False)
def kernel_cache(tmp_path_factory):
    """Points TESSERA_CACHE_DIR at a directory of this test module's own, so the
    tests neither read a stale cache nor write into the user's home."""
    old = os.environ.get("TESSERA_CACHE_DIR")
    path = tmp_path_factory.mktemp("kernel-cache")
    os.environ["TESSERA_CACHE_DIR"] = str(path)
    yield path
    if old is None:
        os.environ.pop("TESSERA_CACHE_DIR", None)
    else:
        os.environ["TESSERA_CACHE_DIR"] = old


def cdiv(a, b):
    return -(-a // b)


def f16_round(values64):
    """float64 -> nearest float16 (numpy's double->half conversion rounds once, to nearest even)."""
    return np.asarray(values64, dtype=np.float64).astype(np.float16)


def sequential_f32_dot(a64, b64):
    """sum over k of a[:, k] * b[k, :], products exact, each addition rounded to fp32, k increasing.

    A product of two values of <= 24-bit significands is exact in float64; the
    sum acc + p of an fp32 acc and such a product is exact in float64 only when
    the exponents are close, so this is used only where the test's inputs make
    every partial sum exactly representable (or with a stated bound)."""
    m, k = a64.shape
    n = b64.shape[1]
    acc = np.zeros((m, n), dtype=np.float32)
    for kk in range(k):
        acc = (acc.astype(np.float64) + np.outer(a64[:, kk], b64[kk, :])).astype(np.float32)
    return acc


def fp32_gemm_bound(a64, b64):
    """Elementwise bound on |C - A@B| for fp32 accumulation of exact products over K terms:
    each of the K additions rounds once (relative error <= 2^-24) on a partial
    sum bounded by sum |a||b|, so |error| <= K * 2^-24 * (|A| @ |B|), plus the
    final rounding; (K + 2) * 2^-24 covers both."""
    k = a64.shape[1]
    return (k + 2) * 2.0**-24 * (np.abs(a64) @ np.abs(b64)) + 1e-30

