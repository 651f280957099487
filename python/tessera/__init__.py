"""Tessera: tile-first kernels, a multi-level IR, numerics as types.

The semantics live in the C++ core (``tessera._C``); this package adds the
Python spelling: dtype objects, policy sugar (``fp8_e4m3 @ accum(fp32)``),
numpy conversions and exception classes.
"""

from . import _C, numerics
from ._tensor import Tensor, from_dlpack, tensor
from . import ops
from .jit import JitFunction, constraint, jit, require
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


__all__ = ["Tensor", "tensor", "from_dlpack", "ops", "jit", "JitFunction", "require", "constraint", "DType", "Policy", "PolicyModifier", "accum", "dtype", "inf_nan", "loss_scale",
           "nearest_even", "saturate", "stochastic_round", "toward_zero", "numerics", "info",
           "TesseraError", "DtypeError", "ShapeError", "ParseError", "KernelTypeError",
           "PrivilegeError", "EffectError", "CompileError", "DeviceError", "CollectiveError",
           "OutOfMemoryError", "ArgumentError", *sorted(_DTYPES)]
