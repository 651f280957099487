"""Host tensors: ``tessera.tensor``, numpy conversion and DLPack.

``tessera.Tensor`` is the C++ host tensor (``tessera._C.Tensor``) with the
operators of TensorOps attached. numpy arrays whose dtype is the tensor's
storage are adopted without a copy (``tensor(a).numpy()`` shares a's memory);
other formats are encoded from float64 with the policy's rounding.
"""

from __future__ import annotations


import numpy as np

from tessera import _C
from tessera._tensor_ops import TensorOps
from tessera.errors import ArgumentError, DeviceError, DtypeError, ShapeError

Tensor = _C.Tensor

_DEFAULT_FROM_NUMPY = {
    np.dtype(np.float64): "fp64", np.dtype(np.float32): "fp32", np.dtype(np.float16): "fp16",
    np.dtype(np.int8): "int8", np.dtype(np.int16): "int16", np.dtype(np.int32): "int32",
    np.dtype(np.int64): "int64", np.dtype(np.uint8): "uint8", np.dtype(np.bool_): "bool",
    np.dtype(np.complex64): "complex64", np.dtype(np.complex128): "complex128",
}


def _default_dtype(array):
    name = _DEFAULT_FROM_NUMPY.get(array.dtype)
    if name is not None:
        return name
    if array.dtype.kind == "f":
        return "fp32"
    if array.dtype.kind in "iu":
        return "int64"
    if array.dtype.kind == "c":  # complex256 and the like
        return "complex128"
    raise DtypeError(f"tessera.tensor: numpy dtype {array.dtype} has no tessera equivalent; "
                     "pass dtype= explicitly")


def tensor(data, dtype=None, *, seed: int = 0):
    """A host tensor from array-like data.

    ``dtype`` is a dtype (``tessera.fp16``, ``"bf16"``) or a numerics policy
    (``tessera.fp8_e4m3 @ tessera.accum(tessera.fp32)``, ``"fp8_e4m3 @accum(fp32)"``);
    by default it follows the numpy dtype. Stochastic rounding draws from
    Philox(seed, element index).
    """
    if isinstance(data, Tensor):
        if dtype is None:
            return data
        from tessera import ops
        return ops.cast(data, dtype)
    if isinstance(data, TensorOps):  # a tracer
        raise DtypeError("tessera.tensor cannot take a traced value; use tessera.ops.cast inside @jit")
    try:
        array = np.asarray(data)
    except ValueError as e:  # ragged nested sequences
        raise ShapeError(f"tessera.tensor: data is not a rectangular array ({e})") from None
    if array.dtype == object:
        raise DtypeError("tessera.tensor: data must be numeric (got Python objects)")
    policy = _C.dtype(_default_dtype(array) if dtype is None else dtype) if isinstance(
        dtype, (str, type(None))) else dtype
    native = _C._native_numpy_dtype(policy)
    if native is not None:
        native = np.dtype(native)
        if array.dtype == native:
            return _C._wrap_array(array, policy)
        if native.kind == "c":  # real or complex data into complex storage, rounded by numpy's casts
            return _C._wrap_array(np.ascontiguousarray(array.astype(native)), policy)
        if native.kind in "iub" and array.dtype.kind in "iub":
            if array.size and native.kind != "b":
                info = np.iinfo(native)
                lo, hi = array.min(), array.max()
                if lo < info.min or hi > info.max:
                    raise ArgumentError(f"tessera.tensor: values in [{lo}, {hi}] do not fit {native}")
            return _C._wrap_array(np.ascontiguousarray(array.astype(native)), policy)
    if array.dtype.kind == "c":
        raise DtypeError(f"tessera.tensor: complex data cannot be stored as {policy}; store it as complex64 or "
                         "complex128, or pass real(x) / imag(x) / abs(x)")
    if _exact_in_float32(array.dtype):
        # float16/float32 and ml_dtypes' narrow floats hold float32 values: the vectorized encoders take them.
        return _C._tensor_from_float32(np.ascontiguousarray(array, dtype=np.float32), policy, seed)
    values = np.array(array, dtype=np.float64, order="C", copy=True)
    return _C._tensor_from_float64(values, policy, seed)


def _exact_in_float32(dtype):
    """Whether every value of a numpy dtype is a float32 value: numpy's float16 and float32, and the
    floats of 16 bits or fewer that ml_dtypes registers (bfloat16, float8_*, float6_*, float4_*)."""
    if dtype in (np.float16, np.float32):
        return True
    return dtype.kind == "V" and dtype.itemsize <= 2 and dtype.type.__module__ == "ml_dtypes" and "float" in dtype.name


def from_dlpack(obj):
    """A tensor sharing the memory of any DLPack producer (numpy, PyTorch and CuPy tensors, on CPU or GPU)."""
    device = getattr(obj, "__dlpack_device__", None)
    if device is not None and device()[0] == _KDL_CUDA:
        return _C._wrap_cuda_array(obj)
    array = np.from_dlpack(obj)
    name = _DEFAULT_FROM_NUMPY.get(array.dtype)
    if name is None:
        raise DtypeError(f"tessera.from_dlpack: dtype {array.dtype} is not supported")
    return _C._wrap_array(array, _C.dtype(name))


_KDL_CUDA = 2  # DLPack's device type for CUDA memory


def _dlpack(self, stream=None, **kwargs):
    if self.device != "cpu":  # device memory, shared without a copy (its writes are complete)
        view = _C._cuda_dlpack_view(self)
        # Older nanobind hands back the DLPack capsule itself rather than an array object.
        return view.__dlpack__(**kwargs) if hasattr(view, "__dlpack__") else view
    if _C._native_numpy_dtype(self.policy) is None:
        raise DtypeError(f"{self.dtype} has no DLPack type numpy can read; cast to fp32 first")
    return self.numpy().__dlpack__(**kwargs)


def _dlpack_device(self):
    if self.device != "cpu":
        return (_KDL_CUDA, int(self.device.split(":")[1]))
    return (1, 0)  # kDLCPU, device 0


def _repr(self):
    return f"tessera.Tensor({self._describe()})"


def _array(self, dtype=None, copy=None):
    a = self.numpy()
    return a.astype(dtype) if dtype is not None else a


def _tolist(self):
    return self.numpy().tolist()


def _item(self):
    if self.size != 1:
        raise ArgumentError(f"item() needs a tensor with one element, this one has {self.size}")
    return self.numpy().reshape(()).item()


def _len(self):
    if not self.shape:
        raise TypeError("len() of a 0-d tensor")
    return self.shape[0]


def _waiting(method):
    """``method`` after the asynchronous calls still writing the tensor (tessera/privilege_scheduler.py)."""
    from tessera.privilege_scheduler import wait_for

    def wrapper(self, *args, **kwargs):
        wait_for([self])
        return method(self, *args, **kwargs)
    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper


def _install():
    for name in ("numpy", "codes", "to", "contiguous"):
        setattr(Tensor, name, _waiting(getattr(Tensor, name)))
    for name, value in vars(TensorOps).items():
        if name.startswith("__") and name not in {
                "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
                "__rtruediv__", "__pow__", "__rpow__", "__matmul__", "__rmatmul__", "__neg__", "__abs__",
                "__lt__", "__le__", "__gt__", "__ge__", "__getitem__", "__array_priority__"}:
            continue
        setattr(Tensor, name, value)
    Tensor.__dlpack__ = _dlpack
    Tensor.__dlpack_device__ = _dlpack_device
    Tensor.__repr__ = _repr
    Tensor.__array__ = _array
    Tensor.tolist = _tolist
    Tensor.item = _item
    Tensor.__len__ = _len
    Tensor.__class_getitem__ = classmethod(lambda cls, spec: _annotation(spec))


def _annotation(spec):
    from tessera.jit import TensorSpec
    return TensorSpec.from_subscript(spec)


_install()

__all__ = ["Tensor", "tensor", "from_dlpack"]


def one_device(labelled, where):
    """The device of the tensors in ``labelled`` ((label, tensor) pairs), which must all be on one
    ("cpu" when there are none); otherwise a DeviceError from ``where`` naming two of them."""
    devices = {}
    for label, t in labelled:
        devices.setdefault(t.device, label)
    if len(devices) > 1:
        (d0, n0), (d1, n1) = list(devices.items())[:2]
        raise DeviceError(f"{where} got {n0} on {d0} and {n1} on {d1}; move them to one device with .to(...)")
    return next(iter(devices), "cpu")
