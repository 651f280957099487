"""Random numbers: Philox keys, ``rand``, ``randn``, ``dropout``.

Every random op is counter-based: element ``n`` of a draw uses the 32-bit
Philox4x32-10 outputs at counters ``offset + n`` (``rand``, ``dropout``) or
``offset + 2n`` and ``offset + 2n + 1`` (``randn``, Box-Muller) of the stream
named by ``seed`` (src/graph/random_ops.cpp documents the exact formulas).
Results depend only on (seed, offset, element index), so they are
reproducible bit for bit.

A key (``philox(seed)``) remembers the next unused counter. Each draw reserves
the counters it uses and advances the key past them, so successive draws
from one key differ, and a fresh key with the same seed repeats the sequence.
``key=None`` means a fresh ``philox(0)`` for that call: the same numbers every
time. Inside ``@tessera.jit`` the key's offset at trace time is recorded in
the op, so a traced function replays the same numbers on every call; pass a
key created per step for fresh ones.
"""

from __future__ import annotations

import numbers

from tessera.errors import ArgumentError, ShapeError
from tessera.ops._args import dims_argument
from tessera.ops._dispatch import dispatch

__all__ = ["Philox", "philox", "rand", "randn", "dropout"]

_COUNTER_LIMIT = 2**63  # seeds and offsets are non-negative 64-bit signed integers in the IR


class Philox:
    """A Philox stream position: ``seed`` names the stream, ``offset`` is the next unused counter."""

    __slots__ = ("seed", "offset")

    def __init__(self, seed: int = 0, offset: int = 0):
        for name, value in (("seed", seed), ("offset", offset)):
            if not isinstance(value, numbers.Integral) or isinstance(value, bool):
                raise TypeError(f"philox {name} must be an int, got {value!r}")
            if not 0 <= value < _COUNTER_LIMIT:
                raise ArgumentError(f"philox {name} must be in [0, 2**63), got {value}")
        self.seed = int(seed)
        self.offset = int(offset)

    def __repr__(self):
        return f"Philox(seed={self.seed}, offset={self.offset})"


def philox(seed: int = 0) -> Philox:
    """A fresh key for stream ``seed``, starting at counter 0."""
    return Philox(seed)


def _draw(op_name, inputs, attrs, key, shape, per_element):
    """Runs (or records) one draw over ``shape`` and advances ``key`` past its counters; a draw that
    raises leaves the key where it was."""
    op = op_name.split(".", 1)[1]
    if key is None:
        return dispatch(op_name, inputs, {**attrs, "seed": 0, "offset": 0})
    if not isinstance(key, Philox):
        raise TypeError(f"{op}: key must come from tessera.ops.philox(seed), got {type(key).__name__}")
    if not all(isinstance(d, int) for d in shape):
        raise ShapeError(f"{op}: a key cannot advance over symbolic shape {shape}: its element count is "
                         "unknown until call time; use a static shape or key=None")
    count = per_element
    for d in shape:
        count *= d
    if key.offset + count >= _COUNTER_LIMIT:
        raise ArgumentError(f"{op}: philox key (seed {key.seed}) has no {count} counters left after "
                            f"offset {key.offset}")
    out = dispatch(op_name, inputs, {**attrs, "seed": key.seed, "offset": key.offset})
    key.offset += count
    return out


def rand(shape, key=None, dtype="fp32"):
    """Uniform samples in [0, 1) of the given shape and dtype/policy."""
    shape = dims_argument(shape, "rand")
    return _draw("graph.rand", [], {"shape": shape, "policy": dtype}, key, shape, 1)


def randn(shape, key=None, dtype="fp32"):
    """Standard normal samples of the given shape and dtype/policy (two counters per element)."""
    shape = dims_argument(shape, "randn")
    return _draw("graph.randn", [], {"shape": shape, "policy": dtype}, key, shape, 2)


def dropout(x, p: float, key=None):
    """Zeroes each element with probability ``p`` and scales the rest by ``1 / (1 - p)``.

    ``p`` must be in [0, 1); ``p = 0`` returns ``x`` unchanged (bit for bit). The key advances
    by one counter per element in every case.
    """
    return _draw("graph.dropout", [x], {"p": float(p)}, key, tuple(x.shape), 1)
