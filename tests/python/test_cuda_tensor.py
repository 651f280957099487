"""Tensors on cuda:N from Python: .to("cuda:0"), .numpy() back, and DLPack
exchange with PyTorch and CuPy without copies. GPU tests skip without a device;
the no-GPU error path is checked where there is none."""

import numpy as np
import pytest

import tessera
from tessera import _C

HAS_GPU = _C._cuda_available()
needs_gpu = pytest.mark.skipif(not HAS_GPU, reason=f"no CUDA device: {_C._cuda_unavailable_reason()}")


def test_to_cuda_without_gpu_raises_device_error():
    if HAS_GPU:
        pytest.skip("a CUDA device is present")
    t = tessera.tensor(np.arange(4, dtype=np.float32))
    with pytest.raises(tessera.DeviceError, match="unavailable"):
        t.to("cuda:0")
    assert t.to("cpu").device == "cpu"
    with pytest.raises(tessera.ArgumentError):
        t.to("gpu7")


@needs_gpu
@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16", "fp8_e4m3", "fp4_e2m1", "int8", "int4"])
def test_round_trip_keeps_every_encoding(rng, dtype):
    values = rng.standard_normal((5, 7)) * 3
    host = tessera.tensor(values, dtype)
    dev = host.to("cuda:0")
    assert dev.device == "cuda:0"
    assert dev.shape == (5, 7)
    np.testing.assert_array_equal(dev.codes(), host.codes())
    np.testing.assert_array_equal(dev.to("cpu").numpy(), host.numpy())
    # .numpy() on a GPU tensor copies back; a transposed view keeps its layout.
    np.testing.assert_array_equal(dev.numpy(), host.numpy())
    np.testing.assert_array_equal(dev.to("cpu").codes(), host.codes())


@needs_gpu
def test_numpy_values_survive_the_device(rng):
    a = rng.standard_normal((64, 33)).astype(np.float32)
    back = tessera.tensor(a).to("cuda").numpy()
    assert back.dtype == np.float32
    np.testing.assert_array_equal(back, a)


@needs_gpu
def test_dlpack_with_pytorch_shares_memory(rng):
    torch = pytest.importorskip("torch")
    a = torch.tensor(rng.standard_normal((8, 9)), dtype=torch.float32, device="cuda:0")
    t = tessera.from_dlpack(a)
    assert t.device == "cuda:0"
    assert t.__dlpack_device__() == (2, 0)
    np.testing.assert_array_equal(t.numpy(), a.cpu().numpy())
    a.mul_(2.0)  # no copy: tessera sees the change
    torch.cuda.synchronize()
    np.testing.assert_array_equal(t.numpy(), a.cpu().numpy())
    # And back: PyTorch sees tessera's device memory.
    src = rng.standard_normal((4, 6)).astype(np.float32)
    dev = tessera.tensor(src).to("cuda:0")
    b = torch.from_dlpack(dev)
    assert b.device.type == "cuda"
    np.testing.assert_array_equal(b.cpu().numpy(), src)
    assert b.data_ptr() == torch.from_dlpack(dev).data_ptr()
    # bf16 travels as DLPack's bfloat type.
    h = torch.tensor([1.0, -2.5, 3.140625], dtype=torch.bfloat16, device="cuda:0")
    tb = tessera.from_dlpack(h)
    assert tb.dtype.name == "bf16"
    np.testing.assert_array_equal(tb.numpy().astype(np.float64), [1.0, -2.5, 3.140625])


@needs_gpu
def test_dlpack_with_cupy(rng):
    cupy = pytest.importorskip("cupy")
    a = cupy.asarray(rng.standard_normal((3, 5)))
    t = tessera.from_dlpack(a)
    assert t.device == "cuda:0"
    np.testing.assert_array_equal(t.numpy(), cupy.asnumpy(a))
    dev = tessera.tensor(np.arange(12, dtype=np.int32).reshape(3, 4)).to("cuda:0")
    c = cupy.from_dlpack(dev)
    np.testing.assert_array_equal(cupy.asnumpy(c), np.arange(12).reshape(3, 4))


def _views(t):
    """The same strided views of a tessera tensor (cpu or cuda) or of a numpy array."""
    if isinstance(t, np.ndarray):
        return [np.transpose(t, (2, 0, 1)), t[:, 1:, ::3], t[:, ::2].T]
    return [tessera.ops.transpose(t, (2, 0, 1)), t[:, 1:, ::3], t[:, ::2].T]


@needs_gpu
@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp64", "int8", "complex64", "complex128"])
def test_contiguous_gathers_a_device_view_on_the_device(rng, dtype):
    """A strided view of a GPU tensor made contiguous (1-, 2-, 4-, 8- and
    16-byte elements) holds the view's values, in row-major order, on the
    same device: numpy's view of the same values is the reference."""
    values = rng.standard_normal((6, 5, 7)) * 3
    if dtype.startswith("complex"):
        values = values + 1j * rng.standard_normal((6, 5, 7))
        values = values.astype(np.complex64 if dtype == "complex64" else np.complex128)
        dev = tessera.tensor(values).to("cuda:0")
    else:
        dev = tessera.tensor(values, dtype).to("cuda:0")
    want_all = dev.to("cpu").numpy()
    for view, want in zip(_views(dev), _views(want_all)):
        assert not view.is_contiguous()
        got = view.contiguous()
        assert got.device == "cuda:0" and got.is_contiguous() and got.shape == want.shape
        np.testing.assert_array_equal(got.to("cpu").numpy(), want)


@needs_gpu
def test_contiguous_of_a_large_device_view_covers_every_element(rng):
    # More elements than one launch's threads (65535 blocks of 256): the grid-stride loop.
    values = rng.standard_normal((5000, 4000)).astype(np.float32)
    view = tessera.tensor(values).to("cuda:0").T
    np.testing.assert_array_equal(view.contiguous().to("cpu").numpy(), values.T)
