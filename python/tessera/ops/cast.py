"""``cast``: convert a tensor to another dtype or numerics policy.

The result holds each value rounded once from its exact decoded value to the
target, with the target policy's rounding and overflow (no rounding to an
accumulation type in between): exactly what ``tessera.tensor(values, dtype)``
would store. Integer targets round to nearest even and saturate; NaN becomes
0 in an integer and True in bool. A target with ``@stochastic_round`` draws
element i's bits from Philox(seed, i): the same seed gives the same result.
"""

from __future__ import annotations

import numbers

from tessera.ops._dispatch import dispatch

__all__ = ["cast"]


def cast(x, dtype, seed=0):
    """``x`` converted to ``dtype`` (a dtype name or object, a policy object or policy text)."""
    if not isinstance(seed, numbers.Integral) or isinstance(seed, bool):
        raise TypeError(f"cast: seed must be an int, got {seed!r}")
    return dispatch("graph.cast", [x], {"policy": dtype, "seed": int(seed)})
