"""``tessera.sparse``: sparse matrices in CSR, COO and BSR (docs/guide/sparse.md).

``csr(indptr, indices, values, shape)``, ``coo(rows, cols, values, shape)``,
``bsr(indptr, indices, blocks, shape)`` and ``from_scipy(m)`` build them;
``.to_dense()``, ``.to(device)``, ``.tocsr()/.tocoo()/.tobsr(bs)`` convert.
The products are ``tessera.ops.spmm``, ``spmv`` and ``sddmm``. A
``DistCSR`` has its rows split over a mesh axis (``tessera.dist.tensor(A,
layout=...)``, ``tessera.array.from_domain(SparseCSR, distribution=...)``).
"""

from tessera.sparse._dist import DistCSR
from tessera.sparse._formats import BSR, COO, CSR, bsr, coo, csr, from_scipy
from tessera.sparse._pattern import SparseCSR

__all__ = ["csr", "coo", "bsr", "from_scipy", "CSR", "COO", "BSR", "SparseCSR", "DistCSR"]
