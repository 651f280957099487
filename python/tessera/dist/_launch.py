"""``tessera.index_launch``: run a kernel or function on every shard of a mesh axis at once.

Each index of the axis runs on its own worker thread (the device's worker),
with a per-shard context that the collectives (``tessera.allreduce`` and the
others) and ``tessera.dist.axis_index`` read. The members of the axis share
one communicator of the in-process ``local`` backend for the launch.
"""

from __future__ import annotations

import os
import re
import threading

from tessera import _C
from tessera.dist._mesh import current_mesh
from tessera.dist._tensor import Parts
from tessera.errors import ArgumentError, CollectiveError

_ctx = threading.local()
_COMPOUND = re.compile(r"^\s*([A-Za-z_]\w*)\s*/\s*([A-Za-z_]\w*)\s*$")


class ShardContext:
    """What one shard of an index launch knows: its mesh axis, index and communicator."""

    def __init__(self, mesh, axis, index, comm):
        self.mesh = mesh
        self.axis = axis
        self.rank = index
        self.comm_ = comm

    def _check(self, axis, what):
        if axis != self.axis:
            raise ArgumentError(f"{what}: this shard runs in an index launch over mesh axis '{self.axis}', "
                                f"not '{axis}'")

    def index(self, axis):
        self._check(axis, "tessera.dist.axis_index")
        return self.rank

    def size(self, axis):
        self._check(axis, "tessera.dist.axis_size")
        return len(self.comm_.members)

    def comm(self, axis, what):
        self._check(axis, what)
        return self.comm_


def current_context(what: str) -> ShardContext:
    ctx = getattr(_ctx, "value", None)
    if ctx is None:
        raise ArgumentError(f"{what} runs per shard, inside a function given to tessera.index_launch")
    return ctx


def _kernel_of(fn):
    from tessera.kernel import Kernel, _Launch
    if isinstance(fn, Kernel):
        return fn, None
    if isinstance(fn, _Launch):
        return fn._kernel, fn._grid
    return None, None


def _specialize(kernel, axis, n, args):
    """Shape symbols a kernel's dims name through the launch axis (``K/tp``)
    bind from the global sizes of the distributed tensors passed; the axis's
    own symbol binds to its size."""
    constants = {}
    uses_axis = False
    for p, a in zip(kernel.params, args):
        if not p["buffer"]:
            continue
        for d, text in enumerate(p["dims"]):
            m = _COMPOUND.match(str(text))
            if m and m.group(2) == axis:
                uses_axis = True
                if isinstance(a, Parts):
                    size = a.source.shape[d]
                    prior = constants.get(m.group(1))
                    if prior is not None and prior != size:
                        raise ArgumentError(f"index_launch of kernel '{kernel.name}': symbol '{m.group(1)}' is "
                                            f"{prior} from one argument and {size} from '{p['name']}'")
                    constants[m.group(1)] = size
            elif str(text).strip() == axis:
                uses_axis = True
    if uses_axis:
        constants[axis] = n
    constants = {k: v for k, v in constants.items() if k not in kernel.constants}
    return kernel.jit(**constants) if constants else kernel


def _check_writes(kernel, axis, args):
    """Written parts must be distinct shards: a tensor split over the axis, and no tensor written twice."""
    written = []
    for p, a in zip(kernel.params, args):
        if not p.get("mut") or not isinstance(a, Parts):
            continue
        if not a.source._t.layout.splits(axis):
            raise ArgumentError(f"index_launch of kernel '{kernel.name}': '{p['name']}' is written, but its parts "
                                f"along '{axis}' are replicas ({a.source!r}); write a tensor split over '{axis}'")
        for name, other in written:
            if other is a.source:
                raise ArgumentError(f"index_launch of kernel '{kernel.name}': '{name}' and '{p['name']}' write the "
                                    f"same parts of {a.source!r}")
        written.append((p["name"], a.source))


def index_launch(axis: str, *, mesh=None, grid=None):
    """``tessera.index_launch(axis="tp")(fn)(A.parts("tp"), B.parts("tp"), ...)``.

    Runs ``fn`` once per index i of mesh axis ``axis``, concurrently, with
    every ``Parts`` argument replaced by its part i (other arguments are
    passed as they are). ``fn`` is a kernel (``@tessera.kernel``; symbols in
    dims like ``K/tp`` bind to the global sizes), a ``@tessera.jit``
    function or a plain function; inside it, the collectives over ``axis``
    and ``tessera.dist.axis_index(axis)`` work per shard. Returns the list of
    per-shard results (None for kernels).
    """
    if not isinstance(axis, str):
        raise ArgumentError(f"tessera.index_launch: axis= takes a mesh axis name, got {axis!r}")

    def wrap(fn):
        if not callable(fn):
            raise ArgumentError(f"tessera.index_launch(axis={axis!r}) takes a kernel or a function, got {fn!r}")

        def launch(*args, **kwargs):
            return _run(fn, axis, mesh, grid, args, kwargs)

        launch.__name__ = getattr(fn, "__name__", "index_launch")
        return launch

    return wrap


def _run(fn, axis, mesh, grid, args, kwargs):
    parts = [a for a in list(args) + list(kwargs.values()) if isinstance(a, Parts)]
    m = parts[0].mesh if parts else current_mesh("tessera.index_launch", mesh)
    n = m.axis_size(axis)
    for p in parts:
        if p.mesh is not m:
            raise ArgumentError(f"tessera.index_launch: parts of {p.source!r} live on another mesh than {m!r}")
        if p.axis != axis:
            raise ArgumentError(f"tessera.index_launch(axis={axis!r}): an argument holds parts along '{p.axis}'")
        if len(p) != n:
            raise ArgumentError(f"tessera.index_launch(axis={axis!r}): {len(p)} parts where the axis has {n}")
    kernel, kernel_grid = _kernel_of(fn)
    if kernel is not None:
        if kwargs:
            raise ArgumentError("tessera.index_launch: pass a kernel's arguments by position")
        _check_writes(kernel, axis, args)
        kernel = _specialize(kernel, axis, n, args)
        launch_grid = grid if grid is not None else kernel_grid
        target = kernel[launch_grid] if launch_grid is not None else kernel
    else:
        if grid is not None:
            raise ArgumentError(f"tessera.index_launch: grid= applies to kernels, and {fn!r} is not one")
        target = fn
    ranks = m._m.axis_group(axis, 0)
    devices = [m.devices[r] for r in ranks]
    comm = _C.local_communicator(axis, devices)
    results = [None] * n

    # The shards share the machine: each launches its CPU kernels on its share of the cores.
    threads_each = max(1, (os.cpu_count() or 1) // n)

    def body(i):
        _ctx.value = ShardContext(m, axis, i, comm)
        try:
            # Graph IR collectives of this thread use comm; its CPU kernels threads_each threads.
            with _C.ShardScope(axis, comm, i), _C.ThreadLimit(threads_each):
                a = [x[i] if isinstance(x, Parts) else x for x in args]
                k = {key: (x[i] if isinstance(x, Parts) else x) for key, x in kwargs.items()}
                results[i] = target(*a, **k)
        finally:
            _ctx.value = None

    errors = _C.run_spmd(n, body, [comm])
    failed = [(i, e) for i, e in enumerate(errors) if e is not None]
    if failed:
        cause = next(((i, e) for i, e in failed if not isinstance(e, CollectiveError)), failed[0])
        i, e = cause
        e.add_note(f"raised on {devices[i]} (index {i} of the index launch over mesh axis '{axis}')")
        raise e
    return None if kernel is not None else results


def collective(name, x, axis, call):
    """An eager per-shard collective through the launch's communicator."""
    ctx = current_context(f"tessera.{name}")
    comm = ctx.comm(axis, f"tessera.{name}")
    from tessera import _trace
    from tessera._tensor import Tensor
    if isinstance(x, _trace.Tracer):
        raise ArgumentError(f"tessera.{name} has no Graph IR op yet: call it outside @jit (allreduce, all_gather "
                            f"and reduce_scatter trace)")
    if not isinstance(x, Tensor):
        raise ArgumentError(f"tessera.{name} takes a shard's tensor, got {type(x).__name__}")
    return call(comm, ctx.rank)


def graph_collective(name, x, axis, attrs):
    """A collective as its Graph IR op (traced under @jit, run eagerly otherwise) over `axis`."""
    ctx = current_context(f"tessera.{name}")
    size = ctx.size(axis)
    from tessera.ops._dispatch import dispatch
    return dispatch(f"graph.{name}", [x], {"axis": axis, "axis_size": size, **attrs})
