"""``tessera.index_launch``: run a kernel or function on every shard of a mesh axis at once.

Each index of the axis runs on its own worker thread (the device's worker),
with a per-shard context that the collectives (``tessera.allreduce`` and the
others), ``tessera.send``/``recv`` and ``tessera.dist.axis_index`` read. The
members of the axis share one communicator of the in-process ``local``
backend for the launch. A launch over several axes (``axis=("dp", "tp",
"pp")``) runs once per point of their grid, with one communicator per group
of each axis, so one function can combine data, tensor and pipeline
parallelism.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading

from tessera import _C
from tessera.dist._backend import make_communicator
from tessera.dist._mesh import current_mesh
from tessera.dist._tensor import Parts
from tessera.errors import ArgumentError, CollectiveError

_ctx = threading.local()
_COMPOUND = re.compile(r"^\s*([A-Za-z_]\w*)\s*/\s*([A-Za-z_]\w*)\s*$")


class ShardContext:
    """What one shard of an index launch knows: per launched mesh axis, its
    index along it and the communicator of its group there."""

    def __init__(self, mesh, bindings):
        self.mesh = mesh
        self.bindings = bindings  # {axis: (index, comm)}, in launch order

    def _binding(self, axis, what):
        b = self.bindings.get(axis)
        if b is None:
            names = list(self.bindings)
            where = f"mesh axis '{names[0]}'" if len(names) == 1 else f"mesh axes {tuple(names)}"
            raise ArgumentError(f"{what}: this shard runs in an index launch over {where}, not '{axis}'")
        return b

    def index(self, axis):
        return self._binding(axis, "tessera.dist.axis_index")[0]

    def size(self, axis):
        return len(self._binding(axis, "tessera.dist.axis_size")[1].members)

    def comm(self, axis, what):
        return self._binding(axis, what)[1]


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


def index_launch(axis, *, mesh=None, grid=None):
    """``tessera.index_launch(axis="tp")(fn)(A.parts("tp"), B.parts("tp"), ...)``.

    Runs ``fn`` once per index i of mesh axis ``axis``, concurrently, with
    every ``Parts`` argument replaced by its part i (other arguments are
    passed as they are). ``fn`` is a kernel (``@tessera.kernel``; symbols in
    dims like ``K/tp`` bind to the global sizes), a ``@tessera.jit``
    function or a plain function; inside it, the collectives over ``axis``
    and ``tessera.dist.axis_index(axis)`` work per shard. Returns the list of
    per-shard results (None for kernels).

    Under ``mpirun`` each process runs the indices of the devices it drives
    (tessera.dist._mpi), and the results of the others come over from their
    processes (as host tensors): every process gets the whole list.

    ``axis`` may be a tuple of mesh axes (functions only): ``fn`` then runs
    once per point of their grid, the mesh's other axes at coordinate 0; a
    ``Parts`` argument along any launched axis gives each shard the part at
    its coordinate there, and the collectives and ``send``/``recv`` work over
    every launched axis. Results come in mesh order.
    """
    axes = (axis,) if isinstance(axis, str) else axis
    if not isinstance(axes, tuple) or not axes or not all(isinstance(a, str) for a in axes):
        raise ArgumentError(f"tessera.index_launch: axis= takes a mesh axis name or a tuple of them, got {axis!r}")
    if len(set(axes)) != len(axes):
        raise ArgumentError(f"tessera.index_launch: axis={axis!r} names an axis twice")

    def wrap(fn):
        if not callable(fn):
            raise ArgumentError(f"tessera.index_launch(axis={axis!r}) takes a kernel or a function, got {fn!r}")

        def launch(*args, **kwargs):
            return _run(fn, axes, mesh, grid, args, kwargs)

        launch.__name__ = getattr(fn, "__name__", "index_launch")
        return launch

    return wrap


def _launch_ranks(m, axes):
    """The mesh ranks a launch over ``axes`` covers: every point of their
    grid, the other mesh axes at coordinate 0 (in mesh order)."""
    for a in axes:
        if a not in m.axes:
            raise ArgumentError(f"tessera.index_launch: {m!r} has no axis '{a}' (its axes: {m.axes})")
    others = [k for k, a in enumerate(m.axes) if a not in axes]
    return [r for r in range(m.size) if all(m.coords(r)[k] == 0 for k in others)]


def _run(fn, axes, mesh, grid, args, kwargs):
    parts = [a for a in list(args) + list(kwargs.values()) if isinstance(a, Parts)]
    m = parts[0].mesh if parts else current_mesh("tessera.index_launch", mesh)
    shown = f"'{axes[0]}'" if len(axes) == 1 else repr(axes)
    ranks = _launch_ranks(m, axes)
    for p in parts:
        if p.mesh is not m:
            raise ArgumentError(f"tessera.index_launch: parts of {p.source!r} live on another mesh than {m!r}")
        if p.axis not in axes:
            raise ArgumentError(f"tessera.index_launch(axis={shown}): an argument holds parts along '{p.axis}'")
        if len(p) != m.axis_size(p.axis):
            raise ArgumentError(f"tessera.index_launch(axis={shown}): {len(p)} parts where axis '{p.axis}' has "
                                f"{m.axis_size(p.axis)}")
    kernel, kernel_grid = _kernel_of(fn)
    if kernel is not None:
        if len(axes) != 1:
            raise ArgumentError(f"tessera.index_launch(axis={shown}): a kernel launches over one mesh axis; "
                                f"launch a function over several")
        if kwargs:
            raise ArgumentError("tessera.index_launch: pass a kernel's arguments by position")
        _check_writes(kernel, axes[0], args)
        kernel = _specialize(kernel, axes[0], len(ranks), args)
        launch_grid = grid if grid is not None else kernel_grid
        target = kernel[launch_grid] if launch_grid is not None else kernel
    else:
        if grid is not None:
            raise ArgumentError(f"tessera.index_launch: grid= applies to kernels, and {fn!r} is not one")
        target = fn
    n = len(ranks)
    coords = [dict(zip(m.axes, m.coords(r))) for r in ranks]
    # One communicator per group of each launched axis (the ranks that differ only there).
    comms, bindings = {}, [{} for _ in ranks]
    for a in axes:
        for i, r in enumerate(ranks):
            group = tuple(m._m.axis_group(a, r))
            comm = comms.get((a, group))
            if comm is None:
                comm = comms[(a, group)] = make_communicator(a, [m.devices[g] for g in group], m)
            bindings[i][a] = (group.index(r), comm)
    results = [None] * n

    # The shards share the machine: each launches its CPU kernels on its share of the cores.
    threads_each = max(1, (os.cpu_count() or 1) // n)

    def body(i):
        _ctx.value = ShardContext(m, bindings[i])
        try:
            # Graph IR collectives of this thread use its communicators; its CPU kernels threads_each threads.
            with contextlib.ExitStack() as scopes:
                for a, (index, comm) in bindings[i].items():
                    scopes.enter_context(_C.ShardScope(a, comm, index))
                scopes.enter_context(_C.ThreadLimit(threads_each))
                a = [x[coords[i][x.axis]] if isinstance(x, Parts) else x for x in args]
                k = {key: (x[coords[i][x.axis]] if isinstance(x, Parts) else x) for key, x in kwargs.items()}
                results[i] = target(*a, **k)
        except BaseException as e:
            # Released at once, with this shard's own index in each of its
            # groups (the runner knows only the launch index).
            for index, comm in bindings[i].values():
                comm.fail(index, f"{type(e).__name__}: {e}")
            raise
        finally:
            _ctx.value = None

    # Under mpirun this process runs the shards of its own devices; the
    # others' results come from their processes below (tessera.dist._mpi).
    from tessera.dist import _mpi
    mine = set(_mpi.local_ranks(m))
    local = [i for i, r in enumerate(ranks) if r in mine]
    errors = _C.run_spmd(len(local), lambda k: body(local[k]), [])
    failed = [(local[k], e) for k, e in enumerate(errors) if e is not None]
    if failed:
        cause = next(((i, e) for i, e in failed if not isinstance(e, CollectiveError)), failed[0])
        i, e = cause
        if len(axes) == 1:
            e.add_note(f"raised on {m.devices[ranks[i]]} (index {i} of the index launch over mesh axis '{axes[0]}')")
        else:
            at = ", ".join(f"{a}={coords[i][a]}" for a in axes)
            e.add_note(f"raised on {m.devices[ranks[i]]} ({at} in the index launch over mesh axes {axes})")
        raise e
    if kernel is not None:
        if len(local) != n:
            # The parts other processes wrote are stale here until a read fetches them.
            for p, a in zip(kernel.params, args):
                if p.get("mut") and isinstance(a, Parts):
                    a.source._remote_shards = True
        return None
    if len(local) != n:
        results = _mpi.share_results(results, set(local), f"tessera.index_launch(axis={shown})")
    return results


def collective(name, x, axis, call):
    """An eager per-shard collective through the launch's communicator."""
    ctx = current_context(f"tessera.{name}")
    comm = ctx.comm(axis, f"tessera.{name}")
    from tessera import _trace
    from tessera._tensor import Tensor
    if isinstance(x, _trace.Tracer):
        raise ArgumentError(f"tessera.{name} has no Graph IR op yet: call it outside @jit (allreduce, all_gather, "
                            f"reduce_scatter and all_to_all trace)")
    if not isinstance(x, Tensor):
        raise ArgumentError(f"tessera.{name} takes a shard's tensor, got {type(x).__name__}")
    return call(comm, ctx.index(axis))


def graph_collective(name, x, axis, attrs, deterministic=True):
    """A collective as its Graph IR op (traced under @jit, run eagerly otherwise) over `axis`;
    a reduction carries the algorithm the Mapper chose (compiled functions ask again when they
    are compiled, tessera/mapper.py)."""
    ctx = current_context(f"tessera.{name}")
    size = ctx.size(axis)
    if name in ("allreduce", "reduce_scatter") and size > 1:
        from tessera import _trace
        from tessera.mapper import choose_algorithm
        if not deterministic:
            # Kept when the function is compiled.
            attrs = {**attrs, "algorithm": choose_algorithm(name, size, deterministic=False)}
        elif not isinstance(x, _trace.Tracer):
            algorithm = choose_algorithm(name, size)  # eager: asked now; traced: when compiled
            if algorithm != "rank_order":
                attrs = {**attrs, "algorithm": algorithm}
    from tessera.ops._dispatch import dispatch
    return dispatch(f"graph.{name}", [x], {"axis": axis, "axis_size": size, **attrs})
