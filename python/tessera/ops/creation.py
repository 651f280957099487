"""Creation ops: ``full`` (a constant filled with one value) and ``iota``.

Both record Graph IR ops inside ``@tessera.jit`` (``graph.constant`` and
``graph.iota``) and run at once outside it. Arbitrary data enters through
``tessera.tensor``; inside a traced function such tensors become constants.
"""

from __future__ import annotations

from tessera.errors import ArgumentError
from tessera.ops._args import dims_argument
from tessera.ops._dispatch import dispatch

__all__ = ["full", "zeros", "ones", "iota"]


def _shape(shape, what):
    dims = dims_argument(shape, what)
    if any(isinstance(d, str) or d < 0 for d in dims):
        raise ArgumentError(f"{what}: shape dims must be non-negative ints, got {shape!r}")
    return list(dims)


def full(shape, value, dtype="fp32"):
    """A tensor of ``shape`` with every element ``value`` (which must be exact in ``dtype``)."""
    return dispatch("graph.constant", [], {"value": [float(value)], "shape": _shape(shape, "full"), "policy": dtype})


def zeros(shape, dtype="fp32"):
    return full(shape, 0.0, dtype)


def ones(shape, dtype="fp32"):
    return full(shape, 1.0, dtype)


def iota(shape, axis=0, dtype="int32"):
    """Each element's index along ``axis`` (like numpy's ``arange`` broadcast along that axis)."""
    return dispatch("graph.iota", [], {"shape": _shape(shape, "iota"), "axis": int(axis), "policy": dtype})
