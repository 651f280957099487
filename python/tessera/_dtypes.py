"""Dtype objects (``tessera.fp8_e4m3``, ``tessera.f32``, ...) and policy sugar."""

from __future__ import annotations

from . import _C

DType = _C.DType
Policy = _C.Policy
PolicyModifier = _C.PolicyModifier
dtype = _C.dtype
accum = _C.accum
loss_scale = _C.loss_scale
stochastic_round = _C.stochastic_round
toward_zero = _C.toward_zero
nearest_even = _C.nearest_even
saturate = _C.saturate
inf_nan = _C.inf_nan

_BY_NAME = {d.name: d for d in _C.dtypes()}
_ALIASES = {"f64": "fp64", "f32": "fp32", "f16": "fp16", "float32": "fp32",
            "float16": "fp16", "half": "fp16", "bfloat16": "bf16"}

# Module attributes: canonical names (``bool`` is spelled ``bool_`` in Python)
# and aliases, each bound to the same object.
DTYPES = dict(_BY_NAME)
DTYPES["bool_"] = DTYPES.pop("bool")
for _alias, _target in _ALIASES.items():
    DTYPES[_alias] = _BY_NAME[_target]
