"""``tessera.array.from_domain``: a distributed array over a domain."""

from __future__ import annotations

import numpy as np

from tessera.errors import ArgumentError


def from_domain(domain, dtype="fp32", distribution=None, mesh=None):
    """Zeros over ``domain`` (a ``tessera.domain.Rect``), partitioned by
    ``distribution`` (Block, Cyclic, Replicated; default Replicated) over
    ``mesh`` (default: the enclosing ``with mesh:`` block). A
    ``tessera.domain.SparseCSR`` domain gives a ``tessera.sparse.DistCSR``
    with zero values, its rows split over the distribution's axis."""
    from tessera.dist import DistTensor, tensor
    from tessera.dist._mesh import current_mesh
    from tessera.domain import Rect, SparseCSR
    if isinstance(domain, SparseCSR):
        # A CSR pattern: zero values on it, rows split over the distribution's axis.
        m = current_mesh("tessera.array.from_domain", mesh)
        from tessera._tensor import tensor as host_tensor
        from tessera.sparse._dist import distribute, row_axis
        from tessera.sparse._formats import CSR
        values = host_tensor(np.zeros(domain.nnz, np.float32), dtype)
        return distribute(CSR(domain, values), m, row_axis(distribution, "tessera.array.from_domain"),
                          "tessera.array.from_domain")
    if not isinstance(domain, Rect):
        raise ArgumentError(f"tessera.array.from_domain takes a tessera.domain.Rect or SparseCSR, got "
                            f"{type(domain).__name__}")
    m = current_mesh("tessera.array.from_domain", mesh)
    return tensor(shape=domain.shape, layout=distribution, mesh=m, dtype=dtype)
