"""Sparse tensors: CSR, COO and BSR containers of Tessera tensors.

Each holds a host-validated pattern and its values as a Tessera tensor (a
traced one inside ``@jit`` or a transform, so gradients reach the values).
CSR is the format the ops compute in: COO and BSR convert to it, through a
gather of the values by a host-computed permutation, which is differentiable.
"""

from __future__ import annotations

import numpy as np

from tessera import _C
from tessera.errors import ArgumentError, ShapeError
from tessera.sparse._pattern import SparseCSR, check_csr, index_array, matrix_shape


def _is_tensorlike(x):
    from tessera._tensor_ops import TensorOps
    return isinstance(x, (_C.Tensor, TensorOps))


def _values(values, nnz, owner, dtype, trailing=()):
    """Values as a tensor of shape [nnz, *trailing] (array-likes convert; fp32 by default for floats)."""
    if not _is_tensorlike(values):
        from tessera._tensor import tensor
        a = np.asarray(values)
        if a.dtype.kind not in "f":
            if a.size and a.dtype.kind not in "iub":
                raise ArgumentError(f"{owner}: values must be numbers, got {a.dtype}")
            a = a.astype(np.float32)
        values = tensor(a, dtype=dtype)
    elif dtype is not None:
        from tessera import ops
        values = ops.cast(values, dtype)
    shape = tuple(values.shape)
    if shape != (nnz, *trailing):
        raise ShapeError(f"{owner}: values have shape {list(shape)} but the pattern needs {[nnz, *trailing]}")
    if not values.policy.storage.is_float:
        raise ArgumentError(f"{owner}: values must have a floating dtype, got {values.policy}")
    return values


def _gather(values, perm):
    """values[perm] along axis 0, skipped when perm is the identity."""
    if np.array_equal(perm, np.arange(len(perm))):
        return values
    from tessera import ops
    return ops.gather(values, perm.astype(np.int64), axis=0)


class CSR:
    """A CSR matrix: ``pattern`` (a tessera.domain.SparseCSR) and ``values`` ([nnz], any float dtype)."""

    format = "csr"

    def __init__(self, pattern: SparseCSR, values):
        self.pattern = pattern
        self.values = values

    shape = property(lambda self: self.pattern.shape)
    nnz = property(lambda self: self.pattern.nnz)
    dtype = property(lambda self: self.values.policy)
    indptr = property(lambda self: self.pattern.indptr)
    indices = property(lambda self: self.pattern.indices)

    @property
    def device(self):
        return getattr(self.values, "device", "cpu")

    def with_values(self, values):
        return CSR(self.pattern, values)

    def tocsr(self):
        return self

    def tocoo(self):
        return COO(self.pattern.rows(), self.pattern.indices, self.pattern, self.values)

    def tobsr(self, blocksize):
        return _csr_to_bsr(self, blocksize)

    def to(self, device):
        """The same matrix with its values (and, when used, its pattern operands) on ``device``."""
        return CSR(self.pattern, self.values.to(device))

    def to_dense(self):
        """The dense [M, K] tensor (differentiable in the values): the values scattered to row * K + col."""
        from tessera import ops
        from tessera.ops._dispatch import dispatch
        m, k = self.shape
        flat = (self.pattern.rows().astype(np.int64) * k + self.pattern.indices.astype(np.int64))
        from tessera._tensor import tensor
        idx = tensor(flat)
        if self.device != "cpu":
            idx = idx.to(self.device)
        dense = dispatch("graph.scatter_add", [self.values, idx], {"shape": [m * k], "axis": 0})
        return ops.reshape(dense, (m, k))

    def __repr__(self):
        return f"tessera.sparse.CSR(shape={self.shape}, nnz={self.nnz}, dtype={self.values.policy})"


class COO:
    """A COO matrix: row and column indices per entry and ``values`` ([nnz]), any entry order.

    Duplicates are an error naming both positions (the module docstring of
    tessera/sparse/_pattern.py says why). The CSR form (``tocsr``) orders the
    entries by (row, column) and gathers the values accordingly."""

    format = "coo"

    def __init__(self, rows, cols, pattern: SparseCSR, values, order=None):
        self.rows, self.cols, self.pattern, self.values = rows, cols, pattern, values
        self._order = order  # entry order -> CSR slot permutation (None: already in CSR order)

    shape = property(lambda self: self.pattern.shape)
    nnz = property(lambda self: self.pattern.nnz)
    dtype = property(lambda self: self.values.policy)

    @property
    def device(self):
        return getattr(self.values, "device", "cpu")

    def tocsr(self):
        return CSR(self.pattern, self.values if self._order is None else _gather(self.values, self._order))

    def tocoo(self):
        return self

    def tobsr(self, blocksize):
        return self.tocsr().tobsr(blocksize)

    def to(self, device):
        return COO(self.rows, self.cols, self.pattern, self.values.to(device), self._order)

    def to_dense(self):
        return self.tocsr().to_dense()

    def __repr__(self):
        return f"tessera.sparse.COO(shape={self.shape}, nnz={self.nnz}, dtype={self.values.policy})"


class BSR:
    """A block-sparse matrix: a CSR pattern over blocks (``block_pattern``, shape (M/R, K/C)) and
    ``blocks`` ([nnzb, R, C]). Its CSR form keeps every element of every stored block (zeros
    inside a block stay explicit entries), in row-major order."""

    format = "bsr"

    def __init__(self, block_pattern: SparseCSR, blocks, blocksize):
        self.block_pattern, self.blocks, self.blocksize = block_pattern, blocks, blocksize
        self._csr = None

    @property
    def shape(self):
        r, c = self.blocksize
        mb, kb = self.block_pattern.shape
        return (mb * r, kb * c)

    nnz = property(lambda self: self.block_pattern.nnz * self.blocksize[0] * self.blocksize[1])
    dtype = property(lambda self: self.blocks.policy)

    @property
    def device(self):
        return getattr(self.blocks, "device", "cpu")

    def _csr_layout(self):
        """(CSR pattern, perm): element slot s of the CSR form is element perm[s] of blocks.reshape(-1)."""
        if self._csr is None:
            r, c = self.blocksize
            bp = self.block_pattern
            brow = bp.rows().astype(np.int64)
            bcol = bp.indices.astype(np.int64)
            nb = bp.nnz
            # Element (b, i, jj) of block b sits at row brow*r + i, column bcol*c + jj.
            b, i, jj = np.meshgrid(np.arange(nb), np.arange(r), np.arange(c), indexing="ij")
            rows = (brow[b] * r + i).reshape(-1)
            cols = (bcol[b] * c + jj).reshape(-1)
            order = np.lexsort((cols, rows))
            m, _ = self.shape
            indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=m))]) if nb else np.zeros(m + 1)
            dt = bp.index_dtype
            pattern = SparseCSR(indptr.astype(dt), cols[order].astype(dt), self.shape, _checked=True)
            self._csr = (pattern, order)
        return self._csr

    def tocsr(self):
        from tessera import ops
        pattern, order = self._csr_layout()
        flat = ops.reshape(self.blocks, (self.nnz,))
        return CSR(pattern, _gather(flat, order))

    def tocoo(self):
        return self.tocsr().tocoo()

    def tobsr(self, blocksize=None):
        if blocksize is None or tuple(blocksize) == tuple(self.blocksize):
            return self
        return self.tocsr().tobsr(blocksize)

    def to(self, device):
        return BSR(self.block_pattern, self.blocks.to(device), self.blocksize)

    def to_dense(self):
        return self.tocsr().to_dense()

    def __repr__(self):
        return (f"tessera.sparse.BSR(shape={self.shape}, blocksize={self.blocksize}, nnz blocks="
                f"{self.block_pattern.nnz}, dtype={self.blocks.policy})")


def _csr_to_bsr(a: CSR, blocksize):
    """A CSR matrix as BSR: every block holding an entry is stored, zeros filled in (a scatter of the
    values into the blocks, differentiable)."""
    from tessera import ops
    from tessera.ops._dispatch import dispatch
    from tessera._tensor import tensor
    r, c = (int(b) for b in blocksize)
    m, k = a.shape
    if r <= 0 or c <= 0 or m % r or k % c:
        raise ShapeError(f"tobsr: blocksize {(r, c)} must divide the shape {a.shape}")
    rows = a.pattern.rows().astype(np.int64)
    cols = a.pattern.indices.astype(np.int64)
    key = (rows // r) * (k // c) + cols // c
    blocks_used = np.unique(key)
    brow, bcol = blocks_used // (k // c), blocks_used % (k // c)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(brow, minlength=m // r))])
    dt = a.pattern.index_dtype
    bp = SparseCSR(indptr.astype(dt), bcol.astype(dt), (m // r, k // c), _checked=True)
    slot = np.searchsorted(blocks_used, key)
    flat = slot * (r * c) + (rows % r) * c + cols % c
    idx = tensor(flat)
    if a.device != "cpu":
        idx = idx.to(a.device)
    blocks = dispatch("graph.scatter_add", [a.values, idx], {"shape": [len(blocks_used) * r * c], "axis": 0})
    return BSR(bp, ops.reshape(blocks, (len(blocks_used), r, c)), (r, c))


# ---- constructors (tessera.sparse.csr, coo, bsr, from_scipy) ----

def csr(indptr, indices, values, shape, *, dtype=None):
    """A CSR matrix from its index arrays (int32 or int64) and values ([nnz], any float dtype)."""
    pattern = SparseCSR(indptr, indices, shape)
    return CSR(pattern, _values(values, pattern.nnz, "tessera.sparse.csr", dtype))


def coo(rows, cols, values, shape, *, dtype=None):
    """A COO matrix from row and column indices per entry (any order, no duplicates) and values."""
    owner = "tessera.sparse.coo"
    m, k = matrix_shape(shape, owner)
    r = index_array(rows, "rows", owner)
    c = index_array(cols, "cols", owner)
    if len(r) != len(c):
        raise ShapeError(f"{owner}: rows has {len(r)} entries but cols has {len(c)}")
    for name, a, n in (("rows", r, m), ("cols", c, k)):
        bad = np.flatnonzero((a < 0) | (a >= n))
        if bad.size:
            j = int(bad[0])
            raise ArgumentError(f"{owner}: {name}[{j}] = {a[j]} is outside [0, {n})")
    order = np.lexsort((c, r))
    rs, cs = r[order], c[order]
    dup = np.flatnonzero((np.diff(rs) == 0) & (np.diff(cs) == 0)) if len(r) > 1 else np.zeros(0, int)
    if dup.size:
        i, j = sorted((int(order[dup[0]]), int(order[dup[0] + 1])))
        raise ArgumentError(f"{owner}: entries {i} and {j} are both at ({r[i]}, {c[i]}) (a duplicate entry); sum "
                            "duplicates before building the matrix")
    dt = np.result_type(r.dtype, c.dtype)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rs, minlength=m))]).astype(dt)
    pattern = SparseCSR(indptr, cs.astype(dt), (m, k), _checked=True)
    values = _values(values, len(r), owner, dtype)
    same = np.array_equal(order, np.arange(len(order)))
    return COO(r, c, pattern, values, None if same else order)


def bsr(indptr, indices, blocks, shape, *, dtype=None):
    """A BSR matrix: a CSR pattern over blocks (indptr over block rows, block column indices) and
    blocks [nnzb, R, C]; ``shape`` is the full matrix's, a multiple of (R, C)."""
    owner = "tessera.sparse.bsr"
    m, k = matrix_shape(shape, owner)
    bshape = tuple(blocks.shape) if _is_tensorlike(blocks) else np.shape(blocks)
    if len(bshape) != 3:
        raise ShapeError(f"{owner}: blocks must be [nnzb, R, C], got shape {list(bshape)}")
    _, r, c = bshape
    if r <= 0 or c <= 0 or m % r or k % c:
        raise ShapeError(f"{owner}: the block size {(r, c)} must divide the shape {(m, k)}")
    pattern = SparseCSR(indptr, indices, (m // r, k // c))
    return BSR(pattern, _values(blocks, pattern.nnz, owner, dtype, (r, c)), (r, c))


def from_scipy(mat, *, dtype=None):
    """A Tessera sparse matrix from a scipy.sparse matrix or array: CSR stays CSR, COO stays COO,
    BSR stays BSR, other formats become CSR. Unsorted column indices are sorted (scipy allows them);
    duplicate entries are rejected like any other input (call ``sum_duplicates()`` first)."""
    fmt = getattr(mat, "format", None)
    if fmt is None or not hasattr(mat, "tocsr"):
        raise ArgumentError(f"tessera.sparse.from_scipy takes a scipy.sparse matrix, got {type(mat).__name__}")
    if fmt == "coo":
        return coo(mat.row, mat.col, mat.data, mat.shape, dtype=dtype)
    if fmt == "bsr":
        if not mat.has_sorted_indices:
            mat = mat.sorted_indices()
        return bsr(mat.indptr, mat.indices, mat.data, mat.shape, dtype=dtype)
    if fmt != "csr":
        mat = mat.tocsr()
    if not mat.has_sorted_indices:
        mat = mat.sorted_indices()  # a canonical order, no choice made for the user (duplicates stay errors)
    return csr(mat.indptr, mat.indices, mat.data, mat.shape, dtype=dtype)
