"""Sparse matrices distributed by rows over a mesh axis.

``tessera.array.from_domain(SparseCSR, distribution=Block(mesh_axes=("tp",)))``
makes one with zero values; ``tessera.dist.tensor(A, layout=ShardSpec(
partition=("row",), mesh_axes=("tp",)), mesh=m)`` distributes a sparse
matrix ``A``. The rows split as dense tensors split (numpy.array_split over
the members of the axis); the mesh's other axes hold replicas. Each device
holds a CSR matrix of its rows (indptr rebased to 0, the same columns) with
its values in that device's memory; ``parts(axis)`` hands them to
``tessera.index_launch``, where a per-shard ``tessera.ops.spmm`` needs no
communication. ``to_dense()`` gathers the whole matrix to the host.

Only rows distribute: a sparse matrix's columns are what each row indexes,
and a column split would cut every row's slots at data-dependent places.
"""

from __future__ import annotations

import numpy as np

from tessera import _C
from tessera.errors import ArgumentError


class DistCSR:
    """A CSR matrix whose rows are split over mesh axis ``axis`` (None: replicated)."""

    format = "csr"

    def __init__(self, shape, mesh, axis, shards):
        self.shape = tuple(shape)
        self.mesh = mesh
        self.axis = axis
        self.shards = list(shards)  # by mesh rank

    @property
    def nnz(self) -> int:
        return sum(s.nnz for s in self._row_blocks())

    @property
    def dtype(self):
        return self.shards[0].dtype

    def _rank_at(self, axis, i):
        coords = [0] * len(self.mesh.axes)
        coords[list(self.mesh.axes).index(axis)] = i
        return self.mesh._m.rank_of(coords)

    def _row_blocks(self):
        """One shard per block of rows, in row order."""
        if self.axis is None:
            return [self.shards[0]]
        return [self.shards[self._rank_at(self.axis, i)] for i in range(self.mesh.axis_size(self.axis))]

    def parts(self, axis: str):
        """The shards along mesh axis ``axis``: part i is held by the device at coordinate i there."""
        from tessera.dist._tensor import Parts
        if axis not in self.mesh.axes:
            raise ArgumentError(f"{self!r}.parts: the mesh has no axis '{axis}' (its axes: {self.mesh.axes})")
        return Parts([self.shards[self._rank_at(axis, i)] for i in range(self.mesh.axis_size(axis))], self, axis)

    def spmm(self, b):
        """``self @ b`` for a dense ``b`` replicated on the mesh (a tessera.dist tensor; a host
        array or tensor is replicated first): a distributed tensor with self's row split, each
        device's rows computed there from its own shard (no communication)."""
        from tessera import ops
        from tessera.dist import _mpi
        from tessera.dist._spec import Replicated, ShardSpec, as_layout
        from tessera.dist._tensor import DistTensor, tensor as dist_tensor
        if _mpi.spans_processes(self.mesh):
            raise ArgumentError("tessera.ops.spmm of a DistCSR over several MPI processes is not supported yet; "
                                "run a per-shard spmm in tessera.index_launch over its parts")
        if not isinstance(b, DistTensor):
            b = dist_tensor(b, mesh=self.mesh)
        if b.mesh is not self.mesh:
            raise ArgumentError(f"tessera.ops.spmm: B lives on {b.mesh!r}, A on {self.mesh!r}")
        lay = b._t.layout
        if any(lay.splits(a) for a in self.mesh.axes) or lay.partial:
            raise ArgumentError(f"tessera.ops.spmm: B must be replicated on the mesh (it is {b!r}); "
                                f"tessera.dist.reshard(B, tessera.dist.Replicated()) first")
        shards = [ops.spmm(self.shards[r], b._t.shards[r]) for r in range(self.mesh.size)]
        spec = ShardSpec(partition=("row",), mesh_axes=(self.axis,)) if self.axis else Replicated()
        handle = _C.DistTensor.from_shards([self.shape[0], b.shape[1]], as_layout(spec, 2, self.mesh), self.mesh._m,
                                           shards[0].policy, shards)
        return DistTensor(handle, self.mesh, spec)

    def to_dense(self):
        """The whole matrix as a dense host tensor (the values' numpy type)."""
        from tessera._tensor import tensor
        return tensor(self.numpy())

    def numpy(self) -> np.ndarray:
        return np.concatenate([np.asarray(s.to("cpu").to_dense().numpy()) for s in self._row_blocks()], axis=0)

    def __repr__(self):
        split = f"rows over '{self.axis}'" if self.axis else "replicated"
        return f"<tessera.sparse.DistCSR {list(self.shape)} nnz={self.nnz}, {split} of {self.mesh!r}>"


def row_axis(layout, owner):
    """The mesh axis a layout splits rows over (None: replicated); ArgumentError for any other split."""
    from tessera.dist._spec import Cyclic, ShardSpec
    if layout is None:
        return None
    if isinstance(layout, Cyclic):
        raise ArgumentError(f"{owner}: a sparse matrix distributes by blocks of rows (Block or "
                            f"ShardSpec(partition=('row',))), not cyclically")
    if not isinstance(layout, ShardSpec):
        raise ArgumentError(f"{owner}: layout must be a Block, a ShardSpec or Replicated(), got {layout!r}")
    if getattr(layout, "partial", ()):
        raise ArgumentError(f"{owner}: a sparse matrix cannot be a pending sum (partial=)")
    pairs = [(str(p), a) for p, a in zip(layout.partition, layout.mesh_axes)]
    if not pairs:
        return None
    if len(pairs) == 1 and pairs[0][0] in ("row", "0"):
        return pairs[0][1]
    raise ArgumentError(f"{owner}: a sparse matrix distributes by rows only (one mesh axis over dim 0), got "
                        f"{layout!r}")


def _row_range(rows, parts, c):
    """Rows [lo, hi) of part c of numpy.array_split(range(rows), parts)."""
    q, r = divmod(rows, parts)
    lo = c * q + min(c, r)
    return lo, lo + q + (1 if c < r else 0)


def distribute(a, mesh, axis, owner="tessera.dist.tensor"):
    """``a`` (CSR, COO or BSR) with its rows split over ``axis`` of ``mesh`` (None: replicated)."""
    from tessera.sparse._formats import CSR
    from tessera.sparse._pattern import SparseCSR
    a = a.tocsr()
    if axis is not None and axis not in mesh.axes:
        raise ArgumentError(f"{owner}: the mesh has no axis '{axis}' (its axes: {mesh.axes})")
    m_rows = a.shape[0]
    n = mesh.axis_size(axis) if axis is not None else 1
    indptr, indices = a.pattern.indptr, a.pattern.indices
    shards = []
    for rank in range(mesh.size):
        c = mesh.coords(rank)[list(mesh.axes).index(axis)] if axis is not None else 0
        lo, hi = _row_range(m_rows, n, c)
        s, e = int(indptr[lo]), int(indptr[hi])
        pattern = SparseCSR(indptr[lo:hi + 1] - indptr[lo], indices[s:e], (hi - lo, a.shape[1]), _checked=True)
        values = a.values[s:e] if e > s else a.values[0:0]
        device = _C.memory_device(mesh.devices[rank])
        shards.append(CSR(pattern, values.to(device) if device != "cpu" else values))
    return DistCSR(a.shape, mesh, axis, shards)
