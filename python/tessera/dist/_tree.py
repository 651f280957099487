"""``tessera.dist.tree_sum``: values added in the pairing of the collective
``tree`` algorithm (tessera/dist/communicator.h): neighbours pairwise, level
by level, an odd one carried up unchanged. For a power-of-two number of
values held by a power-of-two number of members, a local tree_sum of each
member's values followed by a ``tree`` allreduce over the members adds
exactly the additions of one tree_sum of all the values, so the bits do not
depend on how many members hold them (examples/dp_training.py, "bitwise
across dp sizes")."""

from __future__ import annotations

from tessera.errors import ArgumentError


def tree_sum(values):
    """``((v0 + v1) + (v2 + v3)) + ...`` for a non-empty list of tensors (or pytrees of lists
    and tuples of tensors, added leaf by leaf)."""
    level = list(values)
    if not level:
        raise ArgumentError("tessera.dist.tree_sum of no values")
    while len(level) > 1:
        nxt = [_add(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def _add(a, b):
    if isinstance(a, (list, tuple)):
        if not isinstance(b, (list, tuple)) or len(a) != len(b):
            raise ArgumentError("tessera.dist.tree_sum: values of different structure")
        return type(a)(_add(x, y) for x, y in zip(a, b))
    return a + b
