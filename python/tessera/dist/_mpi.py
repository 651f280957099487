"""Meshes over several processes: ``mpirun -np 4 python prog.py``.

Under Open MPI's mpirun every process runs the whole program (SPMD). A mesh
of N devices is spread over the W processes in blocks: process p drives the
mesh ranks ``[p*N/W, (p+1)*N/W)`` (N must be a multiple of W). Collectives
among devices of several processes go through the ``mpi`` backend
(tessera/dist/mpi.h); each process runs the shards of its own devices only,
and reading a distributed result (``.numpy()``, ``.gather()``) fetches the
other processes' shards, so every process must read it (a collective).

Outside mpirun this is process 0 of 1 and nothing here changes anything.
docs/design/0011-mpi-backend.md records the decisions.
"""

from __future__ import annotations

import atexit
import sys

from tessera import _C


def rank() -> int:
    """This process's rank in the mpirun job (0 outside mpirun)."""
    return _C.mpi_process_rank()


def world_size() -> int:
    """The number of processes mpirun started (1 outside mpirun)."""
    return _C.mpi_process_count()


def owners(mesh) -> list:
    """The process that drives each mesh rank (ArgumentError unless the mesh size is a multiple of world_size())."""
    w, n = world_size(), len(mesh.devices)
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
