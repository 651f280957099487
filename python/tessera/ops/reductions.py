"""Reductions: ``sum``, ``mean``, ``max``, ``min`` over axes and ``argmax`` along one axis.

``axis=None`` reduces every axis; an int or a sequence of ints names the axes
(negative values count from the end). Results drop the reduced axes unless
``keepdims=True``.

Order and rounding are fixed: for each output element the reduced elements
are added sequentially in row-major order of the reduced axes and the running
sum is rounded once to the accumulation type after every add, so results are
reproducible bit for bit. ``mean`` is that sum divided by the count.

Result dtypes: floats keep their policy. Integer (and bool) sums are exact and
stored in the accumulation type (int32, or int64 for int64), raising
ArgumentError rather than wrapping or saturating when the total does not fit
(or passes 2**53); ``mean`` of integers is a DtypeError (cast first).
``argmax`` returns int64: the first index of the maximum, NaN counting as the
maximum. ``sum`` over an empty axis is 0; the other reductions over an empty
axis raise ShapeError.
"""

from __future__ import annotations

import numbers

from tessera.ops._dispatch import dispatch

__all__ = ["sum", "mean", "max", "min", "argmax"]


def _axes(axis, op):
    if axis is None:
        return []
    if isinstance(axis, numbers.Integral) and not isinstance(axis, bool):
        return [int(axis)]
    out = []
    for a in axis:
        if not isinstance(a, numbers.Integral) or isinstance(a, bool):
            raise TypeError(f"{op}: axis must be None, an int or a sequence of ints, got {axis!r}")
        out.append(int(a))
    if not out:
        raise TypeError(f"{op}: axis=() would reduce nothing; pass axis=None to reduce every axis")
    return out


def _reduce(op, x, axis, keepdims):
    return dispatch(f"graph.{op}", [x], {"axes": _axes(axis, op), "keepdims": bool(keepdims)})


def sum(x, axis=None, keepdims=False):  # noqa: A001 - the op's name
    """Sum over ``axis`` (all axes when None), accumulated in a fixed sequential order."""
    return _reduce("sum", x, axis, keepdims)


def mean(x, axis=None, keepdims=False):
    """Mean over ``axis``: the fixed-order sum divided by the count (floating point only)."""
    return _reduce("mean", x, axis, keepdims)


def max(x, axis=None, keepdims=False):  # noqa: A001 - the op's name
    """Maximum over ``axis``; NaN when any reduced element is NaN."""
    return _reduce("max", x, axis, keepdims)


def min(x, axis=None, keepdims=False):  # noqa: A001 - the op's name
    """Minimum over ``axis``; NaN when any reduced element is NaN."""
    return _reduce("min", x, axis, keepdims)


def argmax(x, axis=-1, keepdims=False):
    """int64 index of the first maximum along ``axis``; the first NaN wins."""
    if not isinstance(axis, numbers.Integral) or isinstance(axis, bool):
        raise TypeError(f"argmax: axis must be an int, got {axis!r}")
    return dispatch("graph.argmax", [x], {"axis": int(axis), "keepdims": bool(keepdims)})
