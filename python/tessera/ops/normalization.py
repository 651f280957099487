"""Overflow-safe normalizations: ``softmax_safe``, ``logsumexp``, ``layernorm_safe``, ``rmsnorm_safe``.

They need floating-point tensors and keep the input's policy. "Safe" means
the results are finite and correct even for values near the format's maximum
with a narrow accumulation type (fp16 values around 60000 accumulated in
fp16): softmax and logsumexp subtract the row maximum first; layernorm and
rmsnorm scale each row by powers of two so no square or sum can overflow and
``eps`` is never lost. Rows are reduced in a fixed sequential order with every
intermediate rounded to the accumulation type.

Special values: a row holding NaN gives NaN. softmax: a row of only -inf
gives NaN; +inf entries share the probability equally. logsumexp: -inf for
rows of -inf (and empty rows), +inf for rows holding +inf. layernorm of a
row holding +-inf gives NaN; a constant row gives zeros, and so does an
all-zero row in rmsnorm.
"""

from __future__ import annotations

import numbers

from tessera.errors import ArgumentError
from tessera.ops._dispatch import dispatch

__all__ = ["softmax_safe", "logsumexp", "layernorm_safe", "rmsnorm_safe"]


def _axis(axis, op):
    if not isinstance(axis, numbers.Integral) or isinstance(axis, bool):
        raise TypeError(f"{op}: axis must be an int, got {axis!r}")
    return int(axis)


def _eps(eps, op):
    if not isinstance(eps, numbers.Real) or isinstance(eps, bool):
        raise TypeError(f"{op}: eps must be a number, got {eps!r}")
    return float(eps)


def softmax_safe(x, axis=-1):
    """``exp(x - max) / sum(exp(x - max))`` along ``axis``."""
    return dispatch("graph.softmax_safe", [x], {"axis": _axis(axis, "softmax_safe")})


def logsumexp(x, axis=-1, keepdims=False):
    """``log(sum(exp(x)))`` along ``axis``, computed as ``m + log(sum(exp(x - m)))``."""
    return dispatch("graph.logsumexp", [x], {"axis": _axis(axis, "logsumexp"), "keepdims": bool(keepdims)})


def layernorm_safe(x, gamma=None, beta=None, axis=-1, eps=1e-5):
    """``(x - mean) / sqrt(var + eps) * gamma + beta`` along ``axis``; gamma and beta are optional
    1-D tensors of that axis's size (beta needs gamma)."""
    if beta is not None and gamma is None:
        raise ArgumentError("layernorm_safe: beta needs gamma; pass gamma as a tensor of ones")
    params = [p for p in (gamma, beta) if p is not None]
    return dispatch("graph.layernorm_safe", [x, *params],
                    {"axis": _axis(axis, "layernorm_safe"), "eps": _eps(eps, "layernorm_safe")})


def rmsnorm_safe(x, gamma=None, axis=-1, eps=1e-6):
    """``x / sqrt(mean(x**2) + eps) * gamma`` along ``axis``; gamma is an optional 1-D tensor."""
    params = [] if gamma is None else [gamma]
    return dispatch("graph.rmsnorm_safe", [x, *params],
                    {"axis": _axis(axis, "rmsnorm_safe"), "eps": _eps(eps, "rmsnorm_safe")})
