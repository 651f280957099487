"""Which collective backend serves one group of a mesh axis.

``make_communicator(axis, devices, mesh)`` is the one place the runtime
creates communicators (``@jit`` over distributed tensors, eager ops on them
and index launches). The choice, in order:

- ``tessera.dist.mesh(..., backend=...)``, when given;
- the environment variable ``TESSERA_COLLECTIVE_BACKEND``;
- ``"auto"``: ``nccl`` when every member is a real GPU (``cuda:N`` not
  under ``TESSERA_VIRTUAL_DEVICES``) and NCCL loads, across processes too
  under ``mpirun`` (``TESSERA_NCCL_ACROSS_PROCESSES=0`` sends such groups
  to ``mpi``); else ``mpi`` when the members are driven by several
  processes (tessera.dist._mpi); else ``local``.

Backends: ``local`` (in-process threads), ``nccl`` (GPUs, of one process
or of several),
``mpi`` (members in several processes; with one process it runs its
message exchange in-process).
docs/guide/distribution.md, "Collective backends", says what each gives.
"""

from __future__ import annotations

import os

from tessera import _C
from tessera.dist import _mpi
from tessera.errors import ArgumentError

BACKENDS = ("auto", "local", "nccl", "mpi")


def requested(mesh=None) -> str:
    """The backend asked for: the mesh's, else TESSERA_COLLECTIVE_BACKEND, else "auto"."""
    asked = getattr(mesh, "backend", None) if mesh is not None else None
    where = "tessera.dist.mesh(backend=)"
    if asked is None:
        asked = os.environ.get("TESSERA_COLLECTIVE_BACKEND") or "auto"
        where = "TESSERA_COLLECTIVE_BACKEND"
    if asked not in BACKENDS:
        raise ArgumentError(f"{where} is {asked!r}; expected one of {', '.join(map(repr, BACKENDS))}")
    return asked


def _all_real_gpus(devices) -> bool:
    return all(_C.memory_device(d) != "cpu" for d in devices)


def _owners(devices, mesh):
    """The process that drives each of ``devices`` (all this one without a mesh or outside mpirun)."""
    if mesh is None or _mpi.world_size() == 1:
        return [_mpi.rank()] * len(devices)
    of = _mpi.owners(mesh)
    return [of[list(mesh.devices).index(d)] for d in devices]


def _nccl_across_processes() -> bool:
    value = os.environ.get("TESSERA_NCCL_ACROSS_PROCESSES", "1")
    if value not in ("0", "1"):
        raise ArgumentError(f"TESSERA_NCCL_ACROSS_PROCESSES is {value!r}; expected '0' or '1'")
    return value == "1"


def chosen(devices, mesh=None) -> str:
    """The backend a group of ``devices`` gets."""
    asked = requested(mesh)
    spread = len(set(_owners(devices, mesh))) > 1
    if spread and asked not in ("auto", "mpi", "nccl"):
        raise ArgumentError(f"the {asked} collective backend serves devices of one process; {list(devices)} are "
                            f"driven by several MPI processes (use backend='mpi', 'nccl' or 'auto')")
    if asked != "auto":
        return asked
    gpus = len(devices) > 1 and _all_real_gpus(devices) and _C.nccl_available()
    if spread:
        # GPUs in several processes: NCCL, its unique id sent over MPI; else MPI itself.
        return "nccl" if gpus and _nccl_across_processes() else "mpi"
    return "nccl" if gpus else "local"


def make_communicator(axis: str, devices, mesh=None):
    """A communicator over ``devices`` (by rank) for mesh axis ``axis``."""
    devices = [str(d) for d in devices]
    backend = chosen(devices, mesh)
    if backend == "local":
        return _C.local_communicator(axis, devices)
    if backend == "nccl":
        if not _all_real_gpus(devices):
            raise ArgumentError(f"the nccl collective backend serves GPUs of this process; mesh axis {axis!r} has "
                                f"members {devices}")
        owners = _owners(devices, mesh)
        if len(set(owners)) > 1:
            # The calls meet (and NCCL's unique id travels) through an mpi communicator of the same members.
            coordinator = _C.mpi_communicator(f"{axis} (nccl)", devices, owners)
            return _C.nccl_communicator(axis, devices, owners=owners, this_process=_mpi.rank(),
                                        coordinator=coordinator)
        return _C.nccl_communicator(axis, devices)
    if backend == "mpi":
        return _C.mpi_communicator(axis, devices, _owners(devices, mesh))
    raise ArgumentError(f"collective backend {backend!r} is not known")
