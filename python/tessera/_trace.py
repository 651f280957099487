"""Tracing: recording Graph IR while a @tessera.jit function runs in Python.

A TraceContext is active on this thread while a function is traced. Op
wrappers call ``dispatch``, which asks ``active()`` and, when tracing,
records the op through the C++ GraphBuilder and returns Tracers. Each
recorded op carries the user's file and line, found by walking the stack
past Tessera's own frames, so shape and dtype errors point at user code.
"""

from __future__ import annotations

import linecache
import numbers
import os
import sys
import threading

from tessera import _C
from tessera._tensor_ops import TensorOps
from tessera.errors import CompileError

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_state = threading.local()


def active():
    return getattr(_state, "context", None)


def _user_frame():
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not os.path.abspath(filename).startswith(_PACKAGE_DIR + os.sep):
            line = frame.f_lineno
            return filename, line, linecache.getline(filename, line).rstrip("\n")
        frame = frame.f_back
    return "", 0, ""


def leaked_tracer_error(tracer):
    return CompileError(
        "a traced value escaped its @tessera.jit function (stored in a global or closure?); "
        "traced values exist only while the function is traced")


class Tracer(TensorOps):
    """A value inside a function being traced: shape and policy, no data."""

    __slots__ = ("_ctx", "_id", "shape", "policy")

    def __init__(self, ctx, value_id, shape, policy):
        self._ctx = ctx
        self._id = value_id
        self.shape = tuple(shape)
        self.policy = policy

    @property
    def dtype(self):
        return self.policy.storage

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def device(self):
        return "cpu"

    def numpy(self):
        raise CompileError("cannot read the values of a traced tensor inside @tessera.jit: values exist "
                           "only when the compiled function runs; return it instead")

    def __bool__(self):
        raise CompileError("Python control flow on a traced tensor's value is not supported inside "
                           "@tessera.jit (control flow on shapes and static arguments is); "
                           "use tessera.ops.where to select values")

    def __repr__(self):
        dims = ", ".join(str(d) for d in self.shape)
        return f"Tracer([{dims}] {self.policy})"


class TraceContext:
    """``parent``: the enclosing trace when a transform (tessera.grad, ...) traces a function while
    another trace is active; the new function is recorded into the parent's module, and values of
    enclosing traces used here become extra parameters (``captures``) passed in when spliced."""

    def __init__(self, name, parent=None):
        self.parent = parent
        self.builder = _C.GraphBuilder(name) if parent is None else _C.GraphBuilder(parent.builder.module, name)
        self._constants = {}
        self.captures = []  # (tracer of an enclosing trace, this trace's parameter standing for it)
        self.mesh = getattr(parent, "mesh", None)  # set by @jit when tracing over distributed tensors
        self._captured = {}
        if parent is not None and hasattr(parent, "bindings"):
            self.bindings = parent.bindings

    def __enter__(self):
        if active() is not self.parent:
            raise CompileError("@tessera.jit functions cannot be traced inside another trace yet; "
                               "call the inner function's Python body directly")
        _state.context = self
        return self

    def __exit__(self, *exc):
        _state.context = self.parent
        return False

    def _encloses(self, ctx):
        p = self.parent
        while p is not None:
            if p is ctx:
                return True
            p = p.parent
        return False

    def _capture(self, tracer):
        key = (id(tracer._ctx), tracer._id)
        if key not in self._captured:
            inner = self.argument(tracer.shape, tracer.policy, f"captured{len(self.captures)}")
            self.captures.append((tracer, inner))
            self._captured[key] = inner
        return self._captured[key]._id

    def value_id(self, x, like=None):
        """The id in this trace of an op input: a tracer (of this trace, or captured from an
        enclosing one), a tensor (a constant), a Python scalar or an array-like."""
        from tessera._tensor import tensor as make_tensor
        from tessera.ops._dispatch import _scalar_policy
        if isinstance(x, Tracer):
            check_read = getattr(x, "check_read", None)
            if check_read is not None:
                check_read()  # a Region parameter: may it be read here? (tessera/privileges.py)
            if x._ctx is self:
                return x._id
            if self._encloses(x._ctx):
                return self._capture(x)
            raise leaked_tracer_error(x)
        if isinstance(x, _C.Tensor):
            return self._constant(x)._id
        if isinstance(x, (bool, numbers.Number)):
            return self._constant(make_tensor(x, dtype=_scalar_policy(x, like)))._id
        return self._constant(make_tensor(x))._id

    def _tracers(self, results):
        return [Tracer(self, i, dims, pol) for (i, dims, pol) in results]

    def splice(self, func_name, inputs):
        """Appends a copy of function ``func_name`` of this trace's module applied to ``inputs``."""
        file, line, _ = _user_frame()
        return self._tracers(self.builder.splice(func_name, [self.value_id(x) for x in inputs], file, line))

    def call(self, func_name, inputs, extra):
        """Records ``call {callee = func_name}`` with ``extra`` attributes (remat, custom rules)."""
        file, line, _ = _user_frame()
        return self._tracers(self.builder.call(func_name, [self.value_id(x) for x in inputs], extra, file, line))

    def argument(self, shape, policy, name):
        value_id, dims, pol = self.builder.add_argument(list(shape), policy, name)
        return Tracer(self, value_id, dims, pol)

    def _constant(self, tensor):
        key = id(tensor)
        if key not in self._constants:
            file, line, _ = _user_frame()
            value_id, dims, pol = self.builder.add_constant(tensor, file, line)
            # Keep the tensor alive so its id is not reused during the trace.
            self._constants[key] = (Tracer(self, value_id, dims, pol), tensor)
        return self._constants[key][0]

    def record(self, op_name, inputs, attrs, like):
        ids = [self.value_id(x, like) for x in inputs]
        file, line, text = _user_frame()
        results = self.builder.add_op(op_name, ids, attrs, file, line, text)
        tracers = [Tracer(self, i, dims, pol) for (i, dims, pol) in results]
        return tracers[0] if len(tracers) == 1 else tuple(tracers)
