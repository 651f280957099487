"""The one entry point every op wrapper calls.

Outside ``@tessera.jit`` an op runs at once on the reference executor
(eager mode). While a function is being traced, the same call records a
Graph IR op instead and returns tracers. Python scalars become 0-d tensors
of the first tensor operand's policy ("weak" scalars, so ``x * 2`` keeps x's
dtype); other array-likes (numpy arrays, lists) convert with tessera.tensor.
"""

from __future__ import annotations

import numbers

from tessera import _C
from tessera.privilege_scheduler import wait_for
from tessera import _trace


def _scalar_policy(value, like):
    if like is not None:
        storage = like.storage
        if storage.is_float:
            return like
        if isinstance(value, bool) and storage.name == "bool":
            return like
        if isinstance(value, numbers.Integral) and storage.name != "bool":
            return like
    if isinstance(value, bool):
        return _C.dtype("bool")
    if isinstance(value, numbers.Integral):
        return _C.dtype("int64")
    return _C.dtype("fp32")


def _is_scalar(value):
    return isinstance(value, (bool, numbers.Number)) and not isinstance(value, complex)


def _first_policy(inputs):
    for x in inputs:
        if isinstance(x, (_C.Tensor, _trace.Tracer)):
            return x.policy
    return None


def dispatch(op_name: str, inputs: list, attrs: dict):
    ctx = _trace.active()
    if ctx is None:
        # The common eager call: every operand a tessera tensor (none converts, none is a
        # distributed tensor), straight to the compiled op.
        for x in inputs:
            if type(x) is not _C.Tensor:
                break
        else:
            wait_for(inputs)
            return _C.execute_op(op_name, inputs, attrs)
    like = _first_policy(inputs)
    if ctx is not None:
        return ctx.record(op_name, inputs, attrs, like)
    if any(getattr(x, "_is_dist_tensor", False) for x in inputs):
        from tessera.dist._jit import eager_op
        return eager_op(op_name, inputs, attrs)
    tensors = []
    for x in inputs:
        if isinstance(x, _C.Tensor):
            tensors.append(x)
        elif _is_scalar(x):
            from tessera._tensor import tensor
            tensors.append(tensor(x, dtype=_scalar_policy(x, like)))
        elif isinstance(x, _trace.Tracer):
            raise _trace.leaked_tracer_error(x)
        else:
            from tessera._tensor import tensor
            tensors.append(tensor(x))  # array-likes convert as tessera.tensor does, as when tracing
    wait_for(tensors)  # asynchronous calls still writing an input (tessera/privilege_scheduler.py)
    return _C.execute_op(op_name, tensors, attrs)
