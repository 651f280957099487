"""Random numbers: Philox keys, ``rand``, ``randn``, ``dropout``.

Every random op is counter-based: element ``n`` of a draw uses the 32-bit
Philox4x32-10 outputs at counters ``offset + n`` (``rand``, ``dropout``) or
``offset + 2n`` and ``offset + 2n + 1`` (``randn``, Box-Muller) of the stream
named by ``seed`` (src/graph/random_ops.cpp documents the exact formulas).
Results depend only on (seed, offset, element index), so they are
reproducible bit for bit.

Keys derive child streams, each a fresh seed computed with Philox itself
(so streams stay independent):

- ``key.split(num=2)``: ``num`` new keys; child ``i`` is named by the
  parent's counter ``offset + i``, and the parent advances past them, so a
  later split gives other children. Child seed: words 0 and 1 of
  ``philox4x32([c mod 2^32, c >> 32, 1, 0], seed)`` as a 64-bit value, top
  bit cleared (seeds are below 2^63).
- ``key.fold_in(data)``: one new key for the integer ``data`` (a step
  number, a rank), a pure function of (seed, data): words 0 and 1 of
  ``philox4x32([data mod 2^32, data >> 32, 2, 0], seed)``, top bit cleared.
  It does not move the parent.

The third word (1 for split, 2 for fold_in, 0 for draws) keeps the three
uses of one stream apart.

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

__all__ = ["Philox", "philox", "rand", "randn", "dropout", "bernoulli"]

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

    def split(self, num: int = 2) -> list:
        """``num`` independent child keys (see the module docstring); the parent moves past them."""
        if not isinstance(num, numbers.Integral) or isinstance(num, bool) or num < 1:
            raise ArgumentError(f"philox split: num must be a positive int, got {num!r}")
        if self.offset + num >= _COUNTER_LIMIT:
            raise ArgumentError(f"philox split: key (seed {self.seed}) has no {num} counters left after "
                                f"offset {self.offset}")
        counters = [(self.offset + i, 1) for i in range(int(num))]
        self.offset += int(num)
        return [Philox(s) for s in _child_seeds(self.seed, counters)]

    def fold_in(self, data: int) -> "Philox":
        """The child key for integer ``data`` (0 <= data < 2**64); the parent does not move."""
        if not isinstance(data, numbers.Integral) or isinstance(data, bool) or not 0 <= data < 2**64:
            raise ArgumentError(f"philox fold_in: data must be an int in [0, 2**64), got {data!r}")
        return Philox(_child_seeds(self.seed, [(int(data), 2)])[0])


def _child_seeds(seed, counters):
    """Seeds below 2^63 from words 0 and 1 of Philox at (counter, tag) under key ``seed``."""
    import numpy as np
    from tessera.numerics import philox4x32
    words = np.array([[c & 0xFFFFFFFF, c >> 32, tag, 0] for c, tag in counters], dtype=np.uint64)
    out = philox4x32(words, (seed & 0xFFFFFFFF, seed >> 32))
    return [int(((int(w1) << 32) | int(w0)) & (_COUNTER_LIMIT - 1)) for w0, w1 in out[:, :2]]


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


def bernoulli(p, shape, key=None):
    """Booleans that are True with probability ``p`` (0 <= p <= 1): element n is ``u_n < p`` with
    ``u_n`` the uniform ``rand`` draws for the same key, so it uses one counter per element."""
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 <= float(p) <= 1.0:
        raise ArgumentError(f"bernoulli: p must be a probability in [0, 1], got {p!r}")
    # fp64 uniforms: u_n = k * 2^-24 exactly, so u_n < p compares the draw itself, not a rounding of it.
    return rand(shape, key=key, dtype="fp64") < float(p)
