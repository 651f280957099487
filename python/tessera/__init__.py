"""Tessera: tile-first kernels, a multi-level IR, numerics as types.

The semantics live in the C++ core (``tessera._C``); this package adds the
Python spelling: dtype objects, policy sugar (``fp8_e4m3 @ accum(fp32)``),
numpy conversions and exception classes.
"""

from . import _C, numerics
from ._tensor import Tensor, from_dlpack, tensor
from . import ops
from .jit import JitFunction, constraint, jit, require
from .region import Region
from .mapper import Mapper
from . import runtime
from . import dist, domain, array, sparse
from .dist._launch import index_launch
from .collectives import all_gather, all_to_all, allreduce, broadcast, recv, reduce_scatter, send
from .profiler import profile
from .kernel import Kernel, KernelFile, kernel, load, mut
from . import autodiff
from .autodiff import (GradScaler, checkpoint, custom_jvp, custom_vjp, grad, hvp, jacfwd, jacrev, jvp,
                       rematerialize, stop_gradient, value_and_grad, vjp)
from ._dtypes import (DTYPES as _DTYPES, DType, Policy, PolicyModifier, accum, dtype, inf_nan,
                      loss_scale, nearest_even, saturate, stochastic_round, toward_zero)
from .errors import (ArgumentError, CollectiveError, CompileError, DeviceError, DtypeError,
                     EffectError, KernelTypeError, OutOfMemoryError, ParseError, PrivilegeError,
                     ShapeError, TesseraError)

globals().update(_DTYPES)

__version__ = _C.version()


def info() -> str:
    """What ``tessera info`` prints: version, build, backends found, compile cache."""
    return _C.info_report()


__all__ = ["dist", "domain", "array", "sparse", "index_launch", "allreduce", "all_gather", "reduce_scatter", "all_to_all",
           "broadcast", "send", "recv", "Tensor", "tensor", "from_dlpack", "ops", "jit", "profile", "JitFunction", "require", "constraint", "Region", "Mapper", "runtime", "autodiff", "grad", "value_and_grad",
           "vjp", "jvp", "jacfwd", "jacrev", "hvp", "custom_vjp", "custom_jvp", "stop_gradient", "checkpoint",
           "rematerialize", "GradScaler", "DType", "Policy", "PolicyModifier", "accum", "dtype", "inf_nan", "loss_scale",
           "nearest_even", "saturate", "stochastic_round", "toward_zero", "numerics", "info",
           "Kernel", "KernelFile", "kernel", "load", "mut",
           "TesseraError", "DtypeError", "ShapeError", "ParseError", "KernelTypeError",
           "PrivilegeError", "EffectError", "CompileError", "DeviceError", "CollectiveError",
           "OutOfMemoryError", "ArgumentError", *sorted(_DTYPES)]
