"""Per-shard collectives: ``tessera.allreduce``, ``all_gather``, ``reduce_scatter``,
``all_to_all`` and ``broadcast`` over a mesh axis, called by the shards of an
index launch (each with its own tensor; every member of the axis must call the
same collectives in the same order).

allreduce, all_gather and reduce_scatter (sums) are Graph IR ops: they trace
under ``@jit`` and run compiled, as every op does; all_to_all and broadcast
run eagerly per shard.

Deterministic by default: reductions combine in rank order, every step at the
tensor's accumulation type (``deterministic=False`` lets a backend use its
native algorithm; the in-process backend has only the rank-order one).
Uneven splits follow numpy.array_split. ``TESSERA_COLLECTIVE_TIMEOUT``
(seconds) bounds every call; a member that fails or does not arrive makes
the others raise CollectiveError.
"""

from __future__ import annotations

from tessera.dist._launch import collective, graph_collective


def allreduce(x, axis: str, op: str = "sum", deterministic: bool = True):
    """Every member's x combined with ``op`` ("sum", "mean", "max", "min"): graph.allreduce."""
    del deterministic  # the local backend has only the rank-order algorithm
    return graph_collective("allreduce", x, axis, {"op": op})


def all_gather(x, axis: str, dim: int = 0):
    """The members' x concatenated along ``dim`` in rank order: graph.all_gather."""
    return graph_collective("all_gather", x, axis, {"dim": int(dim)})


def reduce_scatter(x, axis: str, dim: int = 0, op: str = "sum"):
    """The members' x combined, split along ``dim``: member i gets part i.

    Sums trace as graph.reduce_scatter (the dim must divide evenly); other
    ops run eagerly through the communicator (numpy.array_split parts)."""
    if op == "sum":
        return graph_collective("reduce_scatter", x, axis, {"dim": int(dim)})
    return collective("reduce_scatter", x, axis, lambda c, r: c.reduce_scatter(r, x, dim, op))


def all_to_all(x, axis: str, split_dim: int = 0, concat_dim: int = 0):
    """Part j of x (split along split_dim) to member j; received parts concatenated along concat_dim."""
    return collective("all_to_all", x, axis, lambda c, r: c.all_to_all(r, x, split_dim, concat_dim))


def broadcast(x, axis: str, root: int = 0):
    """Member ``root``'s x on every member."""
    return collective("broadcast", x, axis, lambda c, r: c.broadcast(r, x, root))
