"""``tessera.dist``: meshes, shard specs, distributions and distributed tensors.

A mesh is a grid of devices with named axes. A distributed tensor has one
real shard per mesh device, in that device's memory (host memory for virtual
devices: ``cpu:N``, and ``cuda:N`` under ``TESSERA_VIRTUAL_DEVICES``). The
semantics live in C++ (tessera/dist/*.h); docs/guide/distribution.md is the
user guide and docs/design/0006-distribution.md the design. ``estimate``
prices a step's communication on a described system without running it
(docs/design/0009-estimate.md). Under ``mpirun -np W`` a mesh spans the W
processes: ``rank()``, ``world_size()`` and ``local_devices()`` say where
this process stands (tessera.dist._mpi).
"""

from __future__ import annotations

import threading

import numpy as np

from tessera import _C
from tessera.dist._mesh import Mesh, current_mesh, mesh
from tessera.dist._spec import Block, Cyclic, Replicated, ShardSpec
from tessera.dist._tensor import DistTensor, Parts, reshard, tensor
from tessera.dist._estimate import Estimate, Link, System, estimate
from tessera.dist._tree import tree_sum
from tessera.dist._mpi import local_devices, rank, world_size
from tessera.dist import _mpi

_mpi.install_hooks()  # under mpirun: failures reach the other processes, and they exit together

__all__ = ["mesh", "Mesh", "ShardSpec", "Block", "Cyclic", "Replicated", "tensor", "DistTensor", "Parts",
           "reshard", "current_mesh", "axis_index", "axis_size", "estimate", "System", "Link", "Estimate",
           "rank", "world_size", "local_devices"]


def axis_index(axis: str) -> int:
    """Inside an index launch: this shard's coordinate along mesh axis ``axis``."""
    from tessera.dist._launch import current_context
    return current_context("tessera.dist.axis_index").index(axis)


def axis_size(axis: str) -> int:
    """Inside an index launch: the number of members of mesh axis ``axis``."""
    from tessera.dist._launch import current_context
    return current_context("tessera.dist.axis_size").size(axis)
