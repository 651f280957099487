"""Kernels on cuda:N from Python: launches go to the CUDA backend when the tensor
arguments live on a GPU, and inspect_ir shows the CUDA C++ ("target") and the
PTX ("ptx"). The inspection tests need no GPU (NVRTC runs without one); the
launch tests skip cleanly where there is no CUDA device."""

import numpy as np
import pytest

import tessera
from tessera import _C
from kernel_helpers import CONFORMANCE, kernel_cache  # noqa: F401

pytestmark = pytest.mark.usefixtures("kernel_cache")

HAS_GPU = _C._cuda_available()
needs_gpu = pytest.mark.skipif(not HAS_GPU, reason=f"no CUDA device: {_C._cuda_unavailable_reason()}")


def nvrtc_available():
    try:
        tessera.load(CONFORMANCE / "scale.tsr").scale.inspect_ir("ptx")
        return True, ""
    except tessera.DeviceError as e:
        return False, str(e)


@tessera.kernel
def axpb(x: tessera.f32["n"], y: tessera.mut(tessera.f32["n"]), a: tessera.f32, b: tessera.f32):
    i = tile.linear_id()  # noqa: F821 (kernel-language built-ins, read by the front end)
    if i < n:  # noqa: F821
        y[i] = a * x[i] + b


@tessera.kernel(tile=(4, 8))
def ids(out: tessera.mut(tessera.int64["G", 32])):
    out[group_linear_id(), tile.linear_id()] = group_linear_id() * 1000 + tile.linear_id() * 10  # noqa: F821


# ---- inspection (no GPU needed) ----

def test_target_cuda_is_cuda_cpp_not_the_cpu_source():
    k = tessera.load(CONFORMANCE / "scale.tsr").scale
    cuda_src = k.inspect_ir("target", target="cuda")
    cpu_src = k.inspect_ir("target")
    assert "__global__" in cuda_src and 'extern "C"' in cuda_src
    assert "tessera/tile.cuh" in cuda_src
    assert "__global__" not in cpu_src
    assert k.inspect_ir("target", target="cpu") == cpu_src
    assert k.inspect_ir("target", target="cuda:0") == cuda_src


def test_ptx_for_the_default_and_a_named_architecture():
    ok, why = nvrtc_available()
    if not ok:
        pytest.skip(f"NVRTC unavailable: {why}")
    k = tessera.load(CONFORMANCE / "scale.tsr").scale
    ptx = k.inspect_ir("ptx")
    assert ".version" in ptx and ".entry" in ptx
    assert "scale" in ptx
    # The GPU's own architecture where there is one, else sm_90a.
    assert (".target sm_" in ptx) if HAS_GPU else (".target sm_90a" in ptx)
    ptx80 = k.inspect_ir("ptx", arch="sm_80")
    assert ".target sm_80" in ptx80


def test_ptx_of_a_jit_gemm_shows_the_specialized_kernel():
    ok, why = nvrtc_available()
    if not ok:
        pytest.skip(f"NVRTC unavailable: {why}")
    g = tessera.load(CONFORMANCE / "gemm_tile.tsr").gemm_tile.jit(BM=32, BN=32, BK=16)
    src = g.inspect_ir("target", target="cuda")
    assert "__global__" in src
    ptx = g.inspect_ir("ptx", arch="sm_90a")
    assert ".target sm_90a" in ptx and ".entry" in ptx


def test_inspect_errors_are_clear():
    k = tessera.load(CONFORMANCE / "scale.tsr").scale
    with pytest.raises(tessera.ArgumentError, match="target is \"cpu\", \"cuda\" or \"cuda:N\""):
        k.inspect_ir("target", target="gpu")
    with pytest.raises(tessera.ArgumentError, match="CPU backend has none"):
        k.inspect_ir("ptx", target="cpu")
    with pytest.raises(tessera.ArgumentError, match="did you mean 'ptx'"):
        k.inspect_ir("ptxx")


# ---- launches on the GPU ----

@needs_gpu
def test_scale_runs_on_the_gpu(rng):
    k = tessera.load(CONFORMANCE / "scale.tsr").scale
    for n in (1, 1000, 100003):
        x = rng.standard_normal(n).astype(np.float32)
        y = tessera.tensor(np.full(n, np.nan, dtype=np.float32)).to("cuda:0")  # poisoned
        k(tessera.tensor(x).to("cuda:0"), y, 1.7)
        assert y.device == "cuda:0"
        # IEEE fp32 product of fp32(1.7) and x, rounded once: numpy's float32 multiply.
        np.testing.assert_array_equal(y.numpy(), np.float32(1.7) * x)
    # The last launch ran on the GPU: "target" now shows the CUDA C++.
    assert "__global__" in k.inspect_ir("target")
    assert "__global__" not in k.inspect_ir("target", target="cpu")


@needs_gpu
def test_python_kernel_with_two_scalars_on_the_gpu(rng):
    n = 4097
    x = rng.standard_normal(n).astype(np.float32)
    y = tessera.tensor(np.full(n, np.nan, dtype=np.float32)).to("cuda:0")
    axpb(tessera.tensor(x).to("cuda:0"), y, 0.5, -2.0)
    # a * x is exact in fp32 for a = 0.5; one rounding for the addition.
    want = (np.float64(0.5) * x.astype(np.float64) - 2.0).astype(np.float32)
    np.testing.assert_array_equal(y.numpy(), want)


@needs_gpu
def test_group_ids_on_the_gpu():
    groups = 5
    out = tessera.tensor(np.full((groups, 32), -1, dtype=np.int64)).to("cuda:0")
    ids[groups](out)
    g, t = np.meshgrid(np.arange(groups), np.arange(32), indexing="ij")
    np.testing.assert_array_equal(out.numpy(), g * 1000 + t * 10)


@needs_gpu
def test_gemm_tile_on_the_gpu_matches_float64(rng):
    g = tessera.load(CONFORMANCE / "gemm_tile.tsr").gemm_tile.jit(BM=64, BN=64, BK=32)
    m, n, k = 100, 70, 50
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    c = tessera.tensor(np.full((m, n), np.nan, dtype=np.float32)).to("cuda:0")
    g[-(-m // 64) * -(-n // 64)](tessera.tensor(a).to("cuda:0"), tessera.tensor(b).to("cuda:0"), c)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    got = c.numpy()
    assert not np.isnan(got).any(), "elements left unwritten"
    # fp32 sums of 50 products of magnitude <= 1: well within 1e-5 of the float64 result.
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5 * np.abs(a).sum(1).max())


@needs_gpu
def test_mixing_devices_is_a_clear_error(rng):
    k = tessera.load(CONFORMANCE / "scale.tsr").scale
    x = tessera.tensor(rng.standard_normal(16).astype(np.float32)).to("cuda:0")
    y = np.zeros(16, dtype=np.float32)
    with pytest.raises(tessera.ArgumentError, match=r"different devices \('x' on cuda:0, 'y' on cpu\)"):
        k(x, y, 2.0)
    assert (y == 0).all()
    with pytest.raises(tessera.ArgumentError, match="different devices"):
        k(tessera.tensor(np.ones(16, dtype=np.float32)), tessera.tensor(np.zeros(16, dtype=np.float32)).to("cuda:0"),
          2.0)
