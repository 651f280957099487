"""Per-shard collectives: ``tessera.allreduce``, ``all_gather``, ``reduce_scatter``,
``all_to_all`` and ``broadcast`` over a mesh axis, called by the shards of an
index launch (each with its own tensor; every member of the axis must call the
same collectives in the same order).

allreduce, all_gather, reduce_scatter (sums) and all_to_all are Graph IR
ops: they trace under ``@jit`` and run compiled, as every op does; broadcast
runs eagerly per shard.

Deterministic by default: reductions combine in rank order, every step at the
tensor's accumulation type. The installed ``tessera.Mapper`` may choose
another algorithm (``choose_collective``: ring or tree, repeatable but
other bits); ``deterministic=False`` asks for the backend's native one (the
in-process backend's native algorithm is rank order).
Uneven splits follow numpy.array_split. ``TESSERA_COLLECTIVE_TIMEOUT``
(seconds) bounds every call; a member that fails or does not arrive makes
the others raise CollectiveError.

``send(x, axis, dst)`` and ``recv(axis, src, shape, dtype)`` move one tensor
between two members (pipeline stages): sends are buffered, FIFO per pair of
members, and a recv checks the message's shape and dtype.
"""

from __future__ import annotations

from tessera.dist._launch import collective, current_context, graph_collective
from tessera.errors import ArgumentError


def allreduce(x, axis: str, op: str = "sum", deterministic: bool = True):
    """Every member's x combined with ``op`` ("sum", "mean", "max", "min"): graph.allreduce."""
    return graph_collective("allreduce", x, axis, {"op": op}, deterministic=deterministic)


def all_gather(x, axis: str, dim: int = 0):
    """The members' x concatenated along ``dim`` in rank order: graph.all_gather."""
    return graph_collective("all_gather", x, axis, {"dim": int(dim)})


def reduce_scatter(x, axis: str, dim: int = 0, op: str = "sum", deterministic: bool = True):
    """The members' x combined, split along ``dim``: member i gets part i.

    Sums trace as graph.reduce_scatter (the dim must divide evenly); other
    ops run eagerly through the communicator (numpy.array_split parts)."""
    if op == "sum":
        return graph_collective("reduce_scatter", x, axis, {"dim": int(dim)}, deterministic=deterministic)
    return collective("reduce_scatter", x, axis,
                      lambda c, r: c.reduce_scatter(r, x, dim, op, algorithm=_algorithm("reduce_scatter", c,
                                                                                       deterministic)))


def _algorithm(kind, comm, deterministic):
    from tessera.mapper import choose_algorithm
    return choose_algorithm(kind, len(comm.members), deterministic)


def all_to_all(x, axis: str, split_dim: int = 0, concat_dim: int = 0):
    """Part j of x (split along split_dim) to member j; received parts concatenated along concat_dim.

    Under @jit it traces as graph.all_to_all (split_dim must divide evenly by the axis size);
    eagerly it runs through the communicator (numpy.array_split parts)."""
    from tessera import _trace
    if isinstance(x, _trace.Tracer):
        return graph_collective("all_to_all", x, axis, {"split_dim": int(split_dim), "concat_dim": int(concat_dim)})
    return collective("all_to_all", x, axis, lambda c, r: c.all_to_all(r, x, split_dim, concat_dim))


def broadcast(x, axis: str, root: int = 0):
    """Member ``root``'s x on every member."""
    return collective("broadcast", x, axis, lambda c, r: c.broadcast(r, x, root))


# Point to point (eager per shard; no Graph IR op): the pipeline-parallel
# primitives. Messages go between two members of one axis only.

def _peer(op, name, value, comm):
    """A member's index along the axis, checked here so the error names the argument."""
    import numbers
    size = len(comm.members)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 0 <= int(value) < size:
        raise ArgumentError(f"tessera.{op}: {name}={value!r} is not a member of mesh axis '{comm.axis}' "
                            f"(indices 0..{size - 1})")
    return int(value)


def send(x, axis: str, dst: int) -> None:
    """Sends x to member ``dst`` of mesh axis ``axis``.

    Buffered: x is copied (later changes to it are not sent) and send
    returns at once, without waiting for the matching ``recv``; the messages
    from one member to another arrive in the order they were sent."""
    collective("send", x, axis, lambda c, r: c.send(r, x, _peer("send", "dst", dst, c)))


def recv(axis: str, src: int, shape=None, dtype="fp32", *, like=None):
    """The oldest message that member ``src`` of mesh axis ``axis`` sent to this shard.

    It must have ``shape`` and ``dtype`` (a dtype name, DType or Policy), or
    ``like``'s shape and policy. Waits up to TESSERA_COLLECTIVE_TIMEOUT
    seconds; a failed member, the timeout, or a message of another shape or
    dtype is a CollectiveError naming the source and the call."""
    from tessera import _trace
    ctx = current_context("tessera.recv")
    comm = ctx.comm(axis, "tessera.recv")
    if _trace.active() is not None or isinstance(like, _trace.Tracer):
        raise ArgumentError("tessera.recv has no Graph IR op: call it outside @jit, in the shard's Python code")
    if like is not None:
        if shape is not None:
            raise ArgumentError("tessera.recv: give shape= (and dtype=) or like=, not both")
        shape, policy = tuple(like.shape), like.policy
    else:
        if shape is None:
            raise ArgumentError("tessera.recv: give the expected message's shape= (and dtype=), or like=")
        policy = dtype
    return comm.recv(ctx.index(axis), _peer("recv", "src", src, comm), [int(s) for s in shape], policy)
