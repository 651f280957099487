"""``tessera.domain``: index spaces that distributions partition."""

from __future__ import annotations

from tessera.errors import ArgumentError
from tessera.sparse._pattern import SparseCSR  # noqa: F401 (the pattern alone; tessera/sparse/_pattern.py)


class Rect:
    """A dense rectangular domain: ``tessera.domain.Rect((B, S, D))``."""

    def __init__(self, shape):
        if isinstance(shape, int):
            shape = (shape,)
        try:
            self.shape = tuple(int(s) for s in shape)
        except (TypeError, ValueError):
            raise ArgumentError(f"tessera.domain.Rect takes a tuple of sizes, got {shape!r}") from None
        if any(s < 0 for s in self.shape):
            raise ArgumentError(f"tessera.domain.Rect: sizes must be >= 0, got {self.shape}")

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __repr__(self):
        return f"tessera.domain.Rect({self.shape})"
