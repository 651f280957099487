"""Compiled functions over distributed tensors: the global view.

A ``@tessera.jit`` function called with ``tessera.dist.tensor`` arguments is
traced once per signature over the global shapes, as if on one device. The
partitioner (tessera/dist/sharding.h) then writes the function each device
runs on its shards: every value's type carries its sharding, and the
collectives the per-op sharding rules need (allreduce, reduce_scatter,
all_gather, all_to_all) are ops of that function, visible in
``inspect_ir("graph")``. Each device runs its function compiled, on its own
worker, with one ``local`` communicator per mesh axis group; the results
come back as distributed tensors in the layouts propagation gave them (a
pending sum stays pending until read, and ``.numpy()`` sums it).

Eager ``tessera.ops`` calls on distributed tensors run the same way, one op
at a time (each op's function is cached per signature).
"""

from __future__ import annotations

import contextlib
import os

from tessera import _C
from tessera import mapper as _mapper
from tessera.dist._backend import make_communicator
from tessera.errors import CollectiveError, DeviceError

# What the optimizer runs on the global function before partitioning:
# calls (autodiff's rule functions, checkpoints) are inlined so that every
# op has a sharding rule to consult.
GLOBAL_PIPELINE = ("inline-calls", "canonicalize", "cse", "dce")


def is_dist(value) -> bool:
    return getattr(value, "_is_dist_tensor", False)


class ShardedEntry:
    """One signature of a jit function over distributed tensors: the global
    trace, its per-shard functions and how to run them."""

    def __init__(self, traced, mesh, functions, function_of_rank, results):
        self.traced = traced
        self.graph = traced.graph
        self.raw_text = traced.raw_text
        self.rebuild = traced.rebuild
        self.tensor_positions = traced.tensor_positions
        self.effects = traced.effects  # the updates of Region parameters, after the function's results
        self.num_results = traced.num_results
        self.mesh = mesh
        self.functions = functions
        self.function_of_rank = function_of_rank
        self.results = results  # (global shape, policy, layout, sharding text) per result
        self._executables = {}
        self._mapped = {}
        self.device = "cpu"

    def mapping(self, device="cpu"):
        """The Mapper's decisions for the per-shard functions on ``device``: (kernel variants, log
        lines), asked once per device and installed mapper."""
        key = (device, _mapper.generation())
        if key not in self._mapped:
            self._mapped[key] = _mapper.apply(self.graph, self.functions, device)
        return self._mapped[key]

    def executable(self, rank=0):
        fn = self.functions[self.function_of_rank[rank]]
        device = _C.memory_device(self.mesh.devices[rank])
        key = (fn, device, _mapper.generation())
        exe = self._executables.get(key)
        if exe is None:
            variants, _ = self.mapping(device)
            exe = self._executables[key] = _C.compile_executable(self.graph.module, fn, device=device,
                                                                 variants=variants)
        return exe

    def text(self):
        """The per-shard functions (devices with the same shard shapes share one)."""
        return "\n".join(self.graph.function_text(fn) for fn in self.functions)

    def schedule_ir(self):
        device = _C.memory_device(self.mesh.devices[0])
        variants, decisions = self.mapping(device)
        return _mapper.header(decisions) + _C.schedule_ir(self.graph.module, self.functions[0], variants=variants)


def mesh_of(tensors, who):
    """The one mesh of the distributed tensors among ``tensors`` (name -> value)."""
    meshes = {}
    for name, t in tensors.items():
        if is_dist(t):
            meshes.setdefault(id(t.mesh), (t.mesh, name))
    if len(meshes) > 1:
        (m0, n0), (m1, n1) = list(meshes.values())[:2]
        raise DeviceError(f"{who}: argument '{n0}' lives on {m0!r} and argument '{n1}' on {m1!r}; "
                          f"reshard them onto one mesh")
    return next(iter(meshes.values()))[0]


def as_dist(tensors, mesh):
    """Every tensor as a distributed tensor: host tensors become replicated ones."""
    from tessera.dist._tensor import tensor as dist_tensor
    return {n: (t if is_dist(t) else dist_tensor(t, mesh=mesh)) for n, t in tensors.items()}


def signature_key(mesh, dts):
    return (tuple(mesh.devices), tuple(mesh.axes), tuple(mesh.shape),
            tuple((n, t.shape, str(t.policy), t._t.layout.describe()) for n, t in dts.items()))


def build(traced, mesh, dts):
    """Partitions a fresh global trace over ``mesh``."""
    traced.graph.run_passes(list(GLOBAL_PIPELINE))
    layouts = [dts[n]._t.layout for n in traced.tensor_positions]
    functions, function_of_rank, results = _C.partition_mesh(traced.graph.module, traced.graph.name, mesh._m,
                                                            layouts)
    return ShardedEntry(traced, mesh, functions, function_of_rank, results)


def _communicators(mesh):
    """One local communicator per group of each mesh axis of more than one
    member: {axis: {group: comm}}, and each rank's (axis, comm, index) bindings."""
    m = mesh._m
    by_axis, bindings = {}, [[] for _ in mesh.devices]
    for k, axis in enumerate(mesh.axes):
        if mesh.shape[k] == 1:
            continue
        groups = by_axis.setdefault(axis, {})
        for rank in range(len(mesh.devices)):
            group = tuple(m.axis_group(axis, rank))
            comm = groups.get(group)
            if comm is None:
                comm = groups[group] = make_communicator(axis, [mesh.devices[r] for r in group], mesh)
            bindings[rank].append((axis, comm, group.index(rank)))
    comms = [c for groups in by_axis.values() for c in groups.values()]
    return comms, bindings


def run(entry, dts, rebuild=True, capture_graph=False):
    """Runs every device's function on its shards; the results as distributed tensors (a flat
    list when ``rebuild`` is False). ``capture_graph``: a GPU device replays its launches as a
    CUDA graph, its nccl collectives included (other backends refuse, with a clear error)."""
    from tessera.dist import _mpi
    mesh = entry.mesh
    # Under mpirun the mesh's devices are spread over the processes and this
    # one runs the shards of its own (all of them outside mpirun).
    ranks = _mpi.local_ranks(mesh)
    shards = [dts[name]._t.shards for name in entry.tensor_positions]
    exes = {rank: entry.executable(rank) for rank in ranks}
    _, bindings = _communicators(mesh)
    outputs = [None] * len(mesh.devices)
    threads_each = max(1, (os.cpu_count() or 1) // len(ranks))

    def body(i):
        rank = ranks[i]
        try:
            with contextlib.ExitStack() as scopes:
                for axis, comm, index in bindings[rank]:
                    scopes.enter_context(_C.ShardScope(axis, comm, index))
                scopes.enter_context(_C.ThreadLimit(threads_each))
                args = [s[rank] for s in shards]
                on_gpu = _C.memory_device(mesh.devices[rank]) != "cpu"
                outputs[rank] = exes[rank].run_graph(args) if capture_graph and on_gpu else exes[rank].run(args)
        except BaseException as e:
            # Failed at once under this device's own index in each of its axis
            # groups (the runner knows only the mesh rank), so its peers raise
            # instead of waiting out the timeout.
            for _, comm, index in bindings[rank]:
                comm.fail(index, f"{type(e).__name__}: {e}")
            raise

    errors = _C.run_spmd(len(ranks), body, [])
    failed = [(ranks[i], e) for i, e in enumerate(errors) if e is not None]
    if failed:
        i, e = next(((i, e) for i, e in failed if not isinstance(e, CollectiveError)), failed[0])
        e.add_note(f"raised on {mesh.devices[i]} (rank {i} of {mesh!r})")
        raise e
    values = []
    for j, (shape, policy, layout, _) in enumerate(entry.results):
        values.append(_mpi.adopt(shape, layout, mesh, policy, [o[j] if o is not None else None for o in outputs]))
    return entry.rebuild(values) if rebuild else values


_EAGER = {}


def eager_op(op_name, inputs, attrs):
    """One op on distributed tensors (``tessera.ops.gemm(X, W)`` outside @jit):
    a cached jit function of that op, so it partitions and runs like one."""
    from tessera.jit import JitFunction
    from tessera.ops._dispatch import dispatch

    def freeze(v):
        return tuple(freeze(x) for x in v) if isinstance(v, (list, tuple)) else v

    positions = [i for i, x in enumerate(inputs) if is_dist(x) or isinstance(x, _C.Tensor)]
    consts = tuple((i, x) for i, x in enumerate(inputs) if i not in positions)
    key = (op_name, tuple(sorted((k, freeze(v)) for k, v in attrs.items())), tuple(positions),
           tuple((i, repr(x)) for i, x in consts))
    fn = _EAGER.get(key)
    if fn is None:
        fixed, count = dict(consts), len(inputs)

        def op(*tensors):
            it = iter(tensors)
            return dispatch(op_name, [next(it) if i in positions else fixed[i] for i in range(count)], attrs)
        op.__name__ = op_name.split(".")[-1]
        fn = _EAGER[key] = JitFunction(op)
    return fn(*[inputs[i] for i in positions])
