"""Argument normalisation shared by the op wrappers."""

from __future__ import annotations

import numbers


def dims_argument(shape, what):
    """A shape argument as a tuple of ints and symbol names; an int or a name alone is one dim."""
    if isinstance(shape, (numbers.Integral, str)):
        shape = (shape,)
    out = []
    for d in shape:
        if isinstance(d, str):
            out.append(d)
        elif isinstance(d, numbers.Integral) and not isinstance(d, bool):
            out.append(int(d))
        else:
            raise TypeError(f"{what}: dims must be ints or symbol names, got {d!r}")
    return tuple(out)
