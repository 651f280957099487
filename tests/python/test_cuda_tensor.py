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
