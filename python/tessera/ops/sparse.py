"""Sparse products: ``spmm``, ``spmv`` and ``sddmm`` (docs/guide/sparse.md).

``A`` is a tessera.sparse matrix (CSR; COO and BSR convert to CSR first).
They record Graph IR ``graph.spmm`` / ``graph.sddmm`` (graph/sparse_ops.cpp)
with the pattern's eight integer operands, and run compiled like every op:
eagerly on the values' device, or inside ``@tessera.jit``.

Fixed order, no atomics: each output row is one lane's (row-split); an spmm
element sums its row's nonzeros left to right, an sddmm value its
contraction index in increasing order, each step a fused multiply-add
rounded to the accumulation type (fp32 for bf16/fp16, the policy's accum
otherwise). Gradients reach the values and the dense operands.
"""

from __future__ import annotations

from tessera.errors import ArgumentError, ShapeError
from tessera.ops._dispatch import dispatch

__all__ = ["spmm", "spmv", "sddmm"]


def _csr(a, op):
    from tessera.sparse._formats import BSR, COO, CSR
    if isinstance(a, (CSR, COO, BSR)):
        return a.tocsr()
    raise ArgumentError(f"tessera.ops.{op}: A must be a tessera.sparse matrix (csr, coo or bsr), got "
                        f"{type(a).__name__}; build one with tessera.sparse.csr or from_scipy")


def _pattern(p, op):
    from tessera.sparse._formats import BSR, COO, CSR
    from tessera.sparse._pattern import SparseCSR
    if isinstance(p, SparseCSR):
        return p
    if isinstance(p, (CSR, COO, BSR)):
        return p.tocsr().pattern
    raise ArgumentError(f"tessera.ops.{op}: pattern must be a tessera.domain.SparseCSR or a sparse matrix, got "
                        f"{type(p).__name__}")


def _dense(x):
    from tessera._tensor_ops import TensorOps
    from tessera import _C
    if isinstance(x, (_C.Tensor, TensorOps)):
        return x
    from tessera._tensor import tensor
    return tensor(x)


def _device(*xs):
    for x in xs:
        d = getattr(x, "device", "cpu")
        if isinstance(d, str) and d != "cpu":
            return d
    return "cpu"


def spmm(A, B):
    """``A @ B`` for sparse A [M, K] and dense B [K, N]: a dense [M, N] tensor. For a
    ``tessera.sparse.DistCSR`` A and a replicated B, a distributed tensor with A's row split."""
    from tessera.sparse._dist import DistCSR
    if isinstance(A, DistCSR):
        return A.spmm(B)
    a = _csr(A, "spmm")
    b = _dense(B)
    m, k = a.shape
    if len(b.shape) != 2 or b.shape[0] != k:
        raise ShapeError(f"tessera.ops.spmm: A is {list(a.shape)}, so B must be [{k}, N]; got {list(b.shape)}")
    pattern = a.pattern.operands(_device(a.values, b))
    return dispatch("graph.spmm", [a.values, b, *pattern], {})


def spmv(A, x):
    """``A @ x`` for sparse A [M, K] and a dense vector x [K]: a dense [M] vector (an spmm with N = 1)."""
    from tessera.ops.shape import reshape
    a = _csr(A, "spmv")
    v = _dense(x)
    if len(v.shape) != 1 or v.shape[0] != a.shape[1]:
        raise ShapeError(f"tessera.ops.spmv: A is {list(a.shape)}, so x must be [{a.shape[1]}]; got {list(v.shape)}")
    return reshape(spmm(a, reshape(v, (a.shape[1], 1))), (a.shape[0],))


def sddmm(X, Y, pattern):
    """``(X @ Y)`` sampled at ``pattern``: X [M, D], Y [D, K] dense, pattern [M, K] (a
    tessera.domain.SparseCSR or a sparse matrix, whose values are ignored). Returns a CSR matrix
    on that pattern holding (X @ Y)[m, k] for each stored (m, k)."""
    from tessera.sparse._formats import CSR
    p = _pattern(pattern, "sddmm")
    x, y = _dense(X), _dense(Y)
    m, k = p.shape
    if len(x.shape) != 2 or len(y.shape) != 2 or x.shape[0] != m or y.shape[1] != k or x.shape[1] != y.shape[0]:
        raise ShapeError(f"tessera.ops.sddmm: the pattern is {[m, k]}, so X must be [{m}, D] and Y [D, {k}]; got X "
                         f"{list(x.shape)} and Y {list(y.shape)}")
    values = dispatch("graph.sddmm", [x, y, *p.operands(_device(x, y))], {})
    return CSR(p, values)
