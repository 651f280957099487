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



def cuda_ptx_of(tmp_path, tir_text, kernels):
    """`tir_text` (a Graph IR module) through `tessera compile --emit target --target cuda`,
    each of its `kernels` generated kernels through nvcc to PTX (device code only, as NVRTC
    compiles it at run time, with the device headers from the source tree): the PTX texts.
    Needs no GPU, only nvcc. Also returns the emitted CUDA C++."""
    import shutil
    import subprocess
    from tessera import _C
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    src = tmp_path / "f.tir"
    src.write_text(tir_text)
    status, out, err = _C.run_cli(["compile", str(src), "--emit", "target", "--target", "cuda"])
    assert status == 0, err
    inc = tmp_path / "inc" / "tessera"
    inc.mkdir(parents=True)
    for name in os.listdir(os.path.join(root, "src/backends/cuda/device")):
        shutil.copy(os.path.join(root, "src/backends/cuda/device", name), inc / name)
    texts = [k for k in out.split("// ===== kernel ") if "__global__" in k]
    assert len(texts) == kernels
    ptx = []
    for i, text in enumerate(texts):
        cu = tmp_path / f"k{i}.cu"
        cu.write_text(text.split("\n", 1)[1])
        r = subprocess.run(["nvcc", "-std=c++20", "-arch=sm_90a", "-ptx", f"-I{tmp_path / 'inc'}",
                            f"-I{os.path.join(root, 'include')}", str(cu), "-o", str(tmp_path / f"k{i}.ptx")],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        ptx.append((tmp_path / f"k{i}.ptx").read_text())
    return ptx, out
