"""Custom differentiation rules for named Graph IR ops, written in Python with tessera.ops.

``register_vjp("graph.softmax_safe", rule)`` replaces the op's VJP rule for
every later transform (rules are global, like the ops themselves). The rule
runs while the transform builds the derived function: its arguments are
traced values, and the tessera.ops it calls are recorded into that function,
so rules written this way are differentiable again (higher orders).

    rule(operands, results, cotangents, attrs) -> one cotangent per operand   (VJP)
    rule(operands, results, tangents, attrs)   -> one tangent per result      (JVP)

``operands``/``results``: tuples of the op's traced values; ``cotangents``
(one per result) and ``tangents`` (one per operand) are traced values at
fp32 (fp64 for fp64 values), zeros where the transform has none; ``attrs``:
the op's attributes as a dict. Return None for a zero; returned values are
fitted to each slot's shape (broadcasting undone) and policy by the engine.
"""

from __future__ import annotations

import threading

from tessera import _C
from tessera._trace import TraceContext, Tracer, _state
from tessera.autodiff._stage import tangent_policy
from tessera.errors import ArgumentError

__all__ = ["register_vjp", "register_jvp", "has_vjp", "has_jvp"]

_lock = threading.Lock()


class _RuleTrace(TraceContext):
    """A trace recording into the function a transform is building, at the rule's insertion point."""

    def __init__(self, builder, name):
        self.parent = None
        self.builder = builder
        self._constants = {}
        self.captures = []
        self._captured = {}
        self.name = name

    def __enter__(self):
        self._previous = getattr(_state, "context", None)
        _state.context = self
        return self

    def __exit__(self, *exc):
        _state.context = self._previous
        return False

    def argument(self, shape, policy, name):
        raise ArgumentError(f"a custom rule for '{self.name}' cannot add parameters")


def _full_name(op_name):
    if not isinstance(op_name, str) or not op_name:
        raise ArgumentError(f"register_vjp/register_jvp: op_name must be a non-empty string, got {op_name!r}")
    return op_name if "." in op_name or op_name in ("call",) else "graph." + op_name


def _make_callback(op_name, fn, kind):
    def callback(builder, operands, results, seeds, attrs):
        ctx = _RuleTrace(builder, op_name)
        with ctx:
            def tracer(d):
                return None if d is None else Tracer(ctx, d[0], d[1], d[2])
            ops_t = tuple(tracer(d) for d in operands)
            res_t = tuple(tracer(d) for d in results)
            like = res_t if kind == "VJP" else ops_t
            from tessera import ops
            seeds_t = tuple(tracer(d) if d is not None else ops.zeros(v.shape, dtype=tangent_policy(v.policy))
                            for d, v in zip(seeds, like))
            out = fn(ops_t, res_t, seeds_t, dict(attrs))
            if out is None:
                return []
            if isinstance(out, Tracer):
                out = (out,)
            if not isinstance(out, (tuple, list)):
                raise ArgumentError(f"the {kind} rule for '{op_name}' must return a tuple of values (None for zero), "
                                    f"got {type(out).__name__}")
            return [None if v is None else ctx.value_id(v) for v in out]

    return callback


def register_vjp(op_name, fn=None):
    """Registers ``fn`` as the VJP rule of op ``op_name`` ("graph.softmax_safe" or "softmax_safe");
    usable as a decorator."""
    if fn is None:
        return lambda f: register_vjp(op_name, f)
    name = _full_name(op_name)
    with _lock:
        _C.register_vjp(name, _make_callback(name, fn, "VJP"))
    return fn


def register_jvp(op_name, fn=None):
    """Registers ``fn`` as the JVP rule of op ``op_name``; usable as a decorator."""
    if fn is None:
        return lambda f: register_jvp(op_name, f)
    name = _full_name(op_name)
    with _lock:
        _C.register_jvp(name, _make_callback(name, fn, "JVP"))
    return fn


def has_vjp(op_name):
    return _C.has_vjp(_full_name(op_name))


def has_jvp(op_name):
    return _C.has_jvp(_full_name(op_name))
