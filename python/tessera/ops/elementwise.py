"""Elementwise ops: arithmetic, comparisons, math functions, activations, ``where``.

Operands broadcast like numpy and promote by Tessera's promotion rules
(``bf16`` with ``fp16`` gives ``fp32``; an integer with a float gives the
float). Each result element is computed exactly from the decoded operands,
rounded once to the policy's accumulation type, then encoded to storage.
Comparisons return ``bool`` tensors. ``div``, ``pow`` and the math functions
need floating-point operands (cast integers first). Python numbers are
accepted for any operand and take the tensor operand's policy.
"""

from __future__ import annotations

from tessera.ops._dispatch import dispatch

__all__ = ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
           "neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sin", "cos", "erf", "sigmoid", "relu", "gelu", "silu", "where"]


def add(lhs, rhs):
    """``lhs + rhs``."""
    return dispatch("graph.add", [lhs, rhs], {})


def sub(lhs, rhs):
    """``lhs - rhs``."""
    return dispatch("graph.sub", [lhs, rhs], {})


def mul(lhs, rhs):
    """``lhs * rhs``."""
    return dispatch("graph.mul", [lhs, rhs], {})


def div(lhs, rhs):
    """``lhs / rhs`` (floating point only; integer operands are a DtypeError)."""
    return dispatch("graph.div", [lhs, rhs], {})


def pow(lhs, rhs):  # noqa: A001 - the op's name
    """``lhs ** rhs`` (floating point only)."""
    return dispatch("graph.pow", [lhs, rhs], {})


def maximum(lhs, rhs):
    """Elementwise maximum; NaN when either operand is NaN."""
    return dispatch("graph.maximum", [lhs, rhs], {})


def minimum(lhs, rhs):
    """Elementwise minimum; NaN when either operand is NaN."""
    return dispatch("graph.minimum", [lhs, rhs], {})


def eq(lhs, rhs):
    """``lhs == rhs`` as bool."""
    return dispatch("graph.eq", [lhs, rhs], {})


def ne(lhs, rhs):
    """``lhs != rhs`` as bool (true where either is NaN)."""
    return dispatch("graph.ne", [lhs, rhs], {})


def lt(lhs, rhs):
    """``lhs < rhs`` as bool."""
    return dispatch("graph.lt", [lhs, rhs], {})


def le(lhs, rhs):
    """``lhs <= rhs`` as bool."""
    return dispatch("graph.le", [lhs, rhs], {})


def gt(lhs, rhs):
    """``lhs > rhs`` as bool."""
    return dispatch("graph.gt", [lhs, rhs], {})


def ge(lhs, rhs):
    """``lhs >= rhs`` as bool."""
    return dispatch("graph.ge", [lhs, rhs], {})


def neg(x):
    """``-x``."""
    return dispatch("graph.neg", [x], {})


def abs(x):  # noqa: A001 - the op's name
    """``|x|``."""
    return dispatch("graph.abs", [x], {})


def exp(x):
    """``e ** x``."""
    return dispatch("graph.exp", [x], {})


def log(x):
    """Natural logarithm."""
    return dispatch("graph.log", [x], {})


def sqrt(x):
    """Square root."""
    return dispatch("graph.sqrt", [x], {})


def rsqrt(x):
    """``1 / sqrt(x)``."""
    return dispatch("graph.rsqrt", [x], {})


def tanh(x):
    """Hyperbolic tangent."""
    return dispatch("graph.tanh", [x], {})


def sin(x):
    """Sine of ``x`` in radians: Tessera's own double-precision sine (within one ulp), rounded once to ``x``'s
    dtype, the same bits on every backend."""
    return dispatch("graph.sin", [x], {})


def cos(x):
    """Cosine of ``x`` in radians, like ``sin``."""
    return dispatch("graph.cos", [x], {})


def erf(x):
    """The error function, ``2 / sqrt(pi) * integral of e ** -t ** 2 from 0 to x``."""
    return dispatch("graph.erf", [x], {})


def sigmoid(x):
    """``1 / (1 + e ** -x)``, computed without overflow."""
    return dispatch("graph.sigmoid", [x], {})


def relu(x):
    """``max(x, 0)``; NaN stays NaN."""
    return dispatch("graph.relu", [x], {})


def gelu(x, approximate: str = "none"):
    """GELU: ``x * Phi(x)`` (``approximate="none"``) or its tanh approximation (``"tanh"``)."""
    return dispatch("graph.gelu", [x], {"approximate": approximate})


def silu(x):
    """``x * sigmoid(x)``."""
    return dispatch("graph.silu", [x], {})


def where(cond, lhs, rhs):
    """``lhs`` where the bool tensor ``cond`` is true, else ``rhs``; all three broadcast."""
    return dispatch("graph.where", [cond, lhs, rhs], {})
