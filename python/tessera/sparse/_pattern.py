"""The sparsity pattern of a CSR matrix: ``tessera.domain.SparseCSR(indptr, indices, shape)``.

A pattern is host data, validated once when it is made, so every kernel over
it can trust it (the ops read ``indices[j]`` as a row of the dense operand).
It also builds, once and lazily, what the Graph IR ops take
(graph/sparse_ops.cpp): ``start = indptr[:-1]``, ``end = indptr[1:]``, the
columns, and the transposed pattern (CSC) with its slot permutation and the
inverse, which the gradients need to stay row-split.

Rules (each violation is an ArgumentError naming the position):
- ``indptr`` has M + 1 entries, starts at 0, never decreases and ends at nnz;
- every column index lies in [0, K);
- within a row the column indices are strictly increasing: sorted, and no
  column twice. Duplicates are an error rather than summed, because summing
  would pick an order for the user; sum them first (scipy's
  ``sum_duplicates``) or build the matrix with ``tessera.sparse.coo``, which
  reports them the same way.
"""

from __future__ import annotations

import numpy as np

from tessera.errors import ArgumentError, DtypeError, ShapeError

_INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))


def index_array(data, what, owner):
    """A 1-D int32/int64 numpy array from index data (a tessera tensor, numpy array or list)."""
    from tessera._tensor_ops import TensorOps
    from tessera._C import Tensor
    if isinstance(data, TensorOps) and not isinstance(data, Tensor):
        raise ArgumentError(f"{owner}: {what} is a traced value; sparsity patterns are host data, so build the "
                            "sparse tensor outside @jit (pass the values as a traced tensor instead)")
    a = np.asarray(data.numpy() if isinstance(data, Tensor) else data)
    if a.dtype.kind not in "iu":
        if a.size:
            raise DtypeError(f"{owner}: {what} must be integers (int32 or int64), got {a.dtype}")
        a = a.astype(np.int64)  # an empty list
    if a.ndim != 1:
        raise ShapeError(f"{owner}: {what} must be 1-D, got shape {a.shape}")
    if a.dtype not in _INDEX_DTYPES:
        a = a.astype(np.int64)
    return np.ascontiguousarray(a)


def matrix_shape(shape, owner):
    try:
        m, k = (int(s) for s in shape)
    except (TypeError, ValueError):
        raise ShapeError(f"{owner}: shape must be (rows, cols), got {shape!r}") from None
    if m < 0 or k < 0:
        raise ShapeError(f"{owner}: shape must not be negative, got {(m, k)}")
    return m, k


def check_csr(indptr, indices, shape, owner):
    """Raises ArgumentError at the first position breaking the pattern rules (module docstring)."""
    m, k = shape
    if len(indptr) != m + 1:
        raise ArgumentError(f"{owner}: indptr has length {len(indptr)}, but a matrix of {m} rows needs {m + 1}")
    if indptr[0] != 0:
        raise ArgumentError(f"{owner}: indptr[0] is {indptr[0]}; it must be 0")
    steps = np.diff(indptr.astype(np.int64))
    bad = np.flatnonzero(steps < 0)
    if bad.size:
        i = int(bad[0])
        raise ArgumentError(f"{owner}: indptr decreases at position {i + 1}: indptr[{i}] = {indptr[i]} > "
                            f"indptr[{i + 1}] = {indptr[i + 1]}")
    if indptr[-1] != len(indices):
        raise ArgumentError(f"{owner}: indptr[{m}] is {indptr[-1]} but there are {len(indices)} column indices; "
                            "the last entry of indptr must be nnz")
    if len(indices) == 0:
        return
    bad = np.flatnonzero((indices < 0) | (indices >= k))
    if bad.size:
        j = int(bad[0])
        row = int(np.searchsorted(indptr, j, side="right") - 1)
        raise ArgumentError(f"{owner}: indices[{j}] = {indices[j]} (row {row}) is outside [0, {k})")
    # Within a row, each column must exceed the one before it; the first slot of a row is exempt.
    rising = np.diff(indices.astype(np.int64)) > 0
    row_first = np.zeros(len(indices), dtype=bool)
    row_first[indptr[:-1][steps > 0]] = True
    bad = np.flatnonzero(~rising & ~row_first[1:])
    if bad.size:
        j = int(bad[0]) + 1
        row = int(np.searchsorted(indptr, j, side="right") - 1)
        what = "twice (a duplicate entry)" if indices[j] == indices[j - 1] else "out of order (unsorted)"
        raise ArgumentError(f"{owner}: row {row} has column {indices[j]} {what}: indices[{j - 1}] = "
                            f"{indices[j - 1]}, indices[{j}] = {indices[j]}")


class SparseCSR:
    """A CSR sparsity pattern (no values): ``tessera.domain.SparseCSR(indptr, indices, shape)``."""

    def __init__(self, indptr, indices, shape, *, _checked=False):
        owner = "tessera.domain.SparseCSR"
        self.shape = matrix_shape(shape, owner)
        self.indptr = indptr if _checked else index_array(indptr, "indptr", owner)
        self.indices = indices if _checked else index_array(indices, "indices", owner)
        if not _checked:
            check_csr(self.indptr, self.indices, self.shape, owner)
        # One index dtype for all operands: the wider of the two.
        self.index_dtype = np.result_type(self.indptr.dtype, self.indices.dtype)
        self._transpose = None
        self._operands = {}

    @property
    def nnz(self) -> int:
        return int(len(self.indices))

    @property
    def rank(self) -> int:
        return 2

    def rows(self):
        """The row of each slot (COO row indices), in slot order."""
        return np.repeat(np.arange(self.shape[0], dtype=self.index_dtype), np.diff(self.indptr))

    def transpose_arrays(self):
        """(t_indptr, t_indices, t_perm): the pattern of the transpose, with t_perm[s] the slot of the
        original that transposed slot s holds. A stable sort by column keeps rows increasing within
        each column, so the transposed pattern is sorted too."""
        if self._transpose is None:
            m, k = self.shape
            perm = np.argsort(self.indices, kind="stable").astype(self.index_dtype)
            counts = np.bincount(self.indices, minlength=k) if self.nnz else np.zeros(k, np.int64)
            t_indptr = np.concatenate([[0], np.cumsum(counts)]).astype(self.index_dtype)
            self._transpose = (t_indptr, self.rows()[perm], perm)
        return self._transpose

    def transpose(self):
        """The transposed pattern, as a SparseCSR of shape (K, M)."""
        t_indptr, t_indices, _ = self.transpose_arrays()
        return SparseCSR(t_indptr, t_indices, self.shape[::-1], _checked=True)

    def operands(self, device="cpu"):
        """The eight pattern operands of graph.spmm / graph.sddmm, as tensors on ``device``."""
        if device not in self._operands:
            from tessera._tensor import tensor
            dt = self.index_dtype
            t_indptr, t_indices, t_perm = self.transpose_arrays()
            inv = np.empty_like(t_perm)
            inv[t_perm] = np.arange(len(t_perm), dtype=dt)
            arrays = [self.indptr[:-1], self.indptr[1:], self.indices, t_indptr[:-1], t_indptr[1:], t_indices, t_perm,
                      inv]
            ts = [tensor(np.ascontiguousarray(a, dtype=dt)) for a in arrays]
            if device != "cpu":
                ts = [t.to(device) for t in ts]
            self._operands[device] = ts
        return self._operands[device]

    def same_as(self, other) -> bool:
        return other is self or (self.shape == other.shape and np.array_equal(self.indptr, other.indptr)
                                 and np.array_equal(self.indices, other.indices))

    def __repr__(self):
        return f"tessera.domain.SparseCSR(shape={self.shape}, nnz={self.nnz})"
