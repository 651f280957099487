"""Meshes over several processes: ``mpirun -np 4 python prog.py``.

Under Open MPI's mpirun every process runs the whole program (SPMD). A mesh
of N devices is spread over the W processes in blocks: process p drives the
mesh ranks ``[p*N/W, (p+1)*N/W)`` (N must be a multiple of W; a mesh of
fewer devices than processes is driven whole by every process). Collectives
among devices of several processes go through the ``mpi`` backend
(tessera/dist/mpi.h); each process runs the shards of its own devices only,
and reading a distributed result (``.numpy()``, ``.gather()``) fetches the
other processes' shards, so every process must read it (a collective).

Outside mpirun this is process 0 of 1 and nothing here changes anything.
docs/design/0011-mpi-backend.md records the decisions.
"""

from __future__ import annotations

import atexit
import pickle
import sys

from tessera import _C
from tessera.errors import ArgumentError


def rank() -> int:
    """This process's rank in the mpirun job (0 outside mpirun)."""
    return _C.mpi_process_rank()


def world_size() -> int:
    """The number of processes mpirun started (1 outside mpirun)."""
    return _C.mpi_process_count()


def owners(mesh) -> list:
    """The process that drives each mesh rank. A mesh of fewer devices than
    processes cannot be spread: every process drives all of it (each runs
    it whole, as one process would, and they compute the same values).
    Otherwise ArgumentError unless the mesh size is a multiple of world_size()."""
    w, n = world_size(), len(mesh.devices)
    if n < w:
        return [rank()] * n
    return [_C.mpi_owner(r, n, w) for r in range(n)]


def local_ranks(mesh) -> list:
    """The mesh ranks this process drives (all of them outside mpirun)."""
    if world_size() == 1:
        return list(range(len(mesh.devices)))
    me = rank()
    return [r for r, p in enumerate(owners(mesh)) if p == me]


def spans_processes(mesh) -> bool:
    return world_size() > 1 and len(set(owners(mesh))) > 1


def local_devices(mesh=None) -> list:
    """The devices of ``mesh`` (default: the enclosing ``with mesh:``) that this process drives."""
    from tessera.dist._mesh import current_mesh
    m = current_mesh("tessera.dist.local_devices", mesh)
    return [m.devices[r] for r in local_ranks(m)]


def adopt(shape, layout, mesh, policy, outputs):
    """A distributed tensor from per-rank shards, None for the ranks other processes computed."""
    from tessera.dist._tensor import DistTensor
    if all(o is not None for o in outputs):
        return DistTensor(_C.DistTensor.from_shards(list(shape), layout, mesh._m, policy, outputs), mesh)
    t = DistTensor(_C.mpi_adopt_local_shards(list(shape), layout, mesh._m, policy, outputs), mesh)
    t._remote_shards = True  # stand-ins until complete() fetches them
    return t


def complete(t):
    """``t``'s handle with every shard real (collective when some shards live in other processes)."""
    if getattr(t, "_remote_shards", False):
        t._t = _C.mpi_complete_shards(t._t, owners(t.mesh))
        t._remote_shards = False
    return t._t


def _encode(value, where):
    """A picklable form of a launch result: tensors as their codes."""
    if isinstance(value, _C.Tensor):
        return ("tessera.Tensor", _C.mpi_tensor_bytes(value), list(value.shape), str(value.policy))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_encode(v, where) for v in value])
    if isinstance(value, dict):
        return ("dict", {k: _encode(v, where) for k, v in value.items()})
    try:
        pickle.dumps(value)
    except Exception as e:
        raise ArgumentError(f"{where}: under mpirun the results of every index travel to every process, and "
                            f"{type(value).__name__} cannot ({e}); return tensors, numbers or lists of them") from e
    return ("value", value)


def _decode(form):
    kind, *rest = form
    if kind == "tessera.Tensor":
        return _C.mpi_tensor_from_bytes(*rest)
    if kind in ("list", "tuple"):
        items = [_decode(v) for v in rest[0]]
        return items if kind == "list" else tuple(items)
    if kind == "dict":
        return {k: _decode(v) for k, v in rest[0].items()}
    return rest[0]


def _all_gather_bytes(blob: bytes) -> list:
    """Every process's ``blob``, by process rank (collective)."""
    import numpy as np
    from tessera._tensor import tensor as host_tensor
    w = world_size()
    processes = [f"process:{p}" for p in range(w)]
    comm = _C.mpi_communicator("launch results", processes, list(range(w)))
    sizes = comm.all_gather(rank(), host_tensor(np.array([len(blob)], np.int64), "int64"), 0).numpy()
    data = comm.all_gather(rank(), host_tensor(np.frombuffer(blob, np.uint8).copy(), "uint8"), 0).numpy()
    data = np.asarray(data, np.uint8).tobytes()
    out, at = [], 0
    for n in sizes.tolist():
        out.append(data[at:at + int(n)])
        at += int(n)
    return out


def share_results(results, ran, where):
    """Fills ``results`` (by launch index) with those other processes computed:
    each process contributes the indices it ran (collective). Their tensors
    arrive as host tensors."""
    blob = pickle.dumps({i: _encode(results[i], where) for i in ran})
    for b in _all_gather_bytes(blob):
        for i, form in pickle.loads(b).items():
            if i not in ran:
                results[i] = _decode(form)
    return results


_hooked = False


def install_hooks():
    """Under mpirun with several processes: an uncaught exception tells the
    other processes at once (their collectives raise a CollectiveError
    naming this one instead of waiting out the timeout), and at exit the
    processes say goodbye and finalize MPI together."""
    global _hooked
    if _hooked or world_size() < 2:
        return
    _hooked = True
    try:
        _C.mpi_join()
    except Exception as e:  # MPI cannot start: collectives across processes will raise saying why
        print(f"tessera: under mpirun but MPI did not start: {e}", file=sys.stderr)
        return
    previous = sys.excepthook

    def hook(kind, value, tb):
        try:
            _C.mpi_process_failed(f"{kind.__name__}: {value}")
        finally:
            previous(kind, value, tb)

    sys.excepthook = hook
    atexit.register(_C.mpi_shutdown)
