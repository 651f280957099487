"""Distributed tensors: ``tessera.dist.tensor``, ``.numpy()``, ``.parts(axis)``, ``reshard``."""

from __future__ import annotations

import numpy as np

from tessera import _C
from tessera.dist._mesh import Mesh, current_mesh
from tessera.dist._spec import ShardSpec, as_layout
from tessera.errors import ArgumentError


class Parts(list):
    """The shards of a distributed tensor along one mesh axis (``X.parts("tp")``).

    A list of tensors (part i is the shard of the device at coordinate i on
    the axis) that also knows where it came from, for ``tessera.index_launch``.
    """

    def __init__(self, shards, source: "DistTensor", axis: str):
        super().__init__(shards)
        self.source = source
        self.axis = axis

    @property
    def mesh(self) -> Mesh:
        return self.source.mesh


class DistTensor:
    """A tensor with one real shard per device of a mesh."""

    _is_dist_tensor = True  # what op dispatch tests, without importing this module

    def __init__(self, handle, mesh: Mesh, spec=None):
        self._t = handle
        self._mesh = mesh
        self.spec = spec

    @property
    def shape(self) -> tuple:
        return tuple(self._t.shape)

    @property
    def dtype(self):
        return self._t.policy.storage

    @property
    def policy(self):
        return self._t.policy

    @property
    def mesh(self) -> Mesh:
        return self._mesh

    @property
    def layout(self) -> str:
        """Each dim's mesh axes ("-": whole), and the partial axes."""
        return self._t.layout.describe()

    @property
    def shards(self) -> list:
        """Every device's shard, in mesh order (sharing storage with this tensor). Under
        mpirun, the shards a run computed in other processes are host zeros until
        ``gather()`` (or ``numpy()``) fetches them."""
        return list(self._t.shards)

    def parts(self, axis: str) -> Parts:
        """The shards along mesh axis ``axis``: part i is held by the device at coordinate i there."""
        return Parts(self._t.parts(axis), self, axis)

    def gather(self):
        """The global value as a host tensor (a partial tensor's terms summed in rank order)."""
        from tessera.dist import _mpi
        from tessera.privilege_scheduler import wait_for
        wait_for([self])  # asynchronous calls still writing it
        return _mpi.complete(self).gather()  # under mpirun: fetches other processes' shards (collective)

    def numpy(self) -> np.ndarray:
        return self.gather().numpy()

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __repr__(self):
        return f"<tessera.{self._t.describe()}>"


def tensor(array=None, *, shape=None, layout=None, mesh=None, dtype=None) -> DistTensor:
    """A distributed tensor with real per-device shards.

    ``tessera.dist.tensor(shape=, layout=, mesh=, dtype=)`` makes zeros;
    ``tessera.dist.tensor(array, layout=, mesh=)`` shards a host array (a
    numpy array or tessera tensor; ``dtype=`` encodes it first), or a sparse
    matrix by rows (a ``tessera.sparse.DistCSR``). ``mesh``
    defaults to the enclosing ``with mesh:`` block; ``layout`` to replicated.
    """
    m = current_mesh("tessera.dist.tensor", mesh)
    if getattr(array, "format", None) in ("csr", "coo", "bsr"):
        # A sparse matrix: its rows split over the layout's axis (tessera/sparse/_dist.py).
        from tessera.sparse._dist import distribute, row_axis
        if dtype is not None:
            raise ArgumentError("tessera.dist.tensor: dtype= does not apply to a sparse matrix (its values keep theirs)")
        return distribute(array, m, row_axis(layout, "tessera.dist.tensor"))
    from tessera._tensor import Tensor, tensor as host_tensor
    if array is None:
        if shape is None:
            raise ArgumentError("tessera.dist.tensor: give an array to shard or shape= (zeros)")
        shape = [int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,))]
        lay = as_layout(layout, len(shape), m)
        handle = _C.DistTensor.zeros(shape, lay, m._m, dtype if dtype is not None else "fp32")
        return DistTensor(handle, m, layout)
    if shape is not None and tuple(shape) != tuple(np.shape(array)):
        raise ArgumentError(f"tessera.dist.tensor: shape={tuple(shape)} but the array has shape {np.shape(array)}")
    host = array if isinstance(array, Tensor) and dtype is None else host_tensor(array, dtype)
    lay = as_layout(layout, len(host.shape), m)
    return DistTensor(_C.DistTensor.scatter(host, lay, m._m), m, layout)


def reshard(x: DistTensor, layout) -> DistTensor:
    """The same values in another layout on the same mesh (a partial tensor is summed).

    Inside a @jit function over distributed tensors it records graph.reshard,
    which the partitioner turns into the collectives that move the shards."""
    from tessera import _trace
    if isinstance(x, _trace.Tracer):
        ctx = _trace.active()
        if ctx.mesh is None:
            raise ArgumentError("tessera.dist.reshard inside @jit needs the function to be called with distributed "
                                "tensors (tessera.dist.tensor), whose mesh the layout refers to")
        lay = as_layout(layout, len(x.shape), ctx.mesh)
        from tessera.ops._dispatch import dispatch
        return dispatch("graph.reshard", [x], {"sharding": _C.layout_sharding(lay)})
    if not isinstance(x, DistTensor):
        raise ArgumentError(f"tessera.dist.reshard takes a distributed tensor, got {type(x).__name__}")
    lay = as_layout(layout, len(x.shape), x.mesh)
    from tessera.dist import _mpi
    return DistTensor(_mpi.complete(x).reshard(lay), x.mesh, layout)
