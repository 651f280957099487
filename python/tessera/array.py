"""``tessera.array.from_domain``: a distributed array over a domain."""

from __future__ import annotations

from tessera.errors import ArgumentError


def from_domain(domain, dtype="fp32", distribution=None, mesh=None):
    """Zeros over ``domain`` (a ``tessera.domain.Rect``), partitioned by
    ``distribution`` (Block, Cyclic, Replicated; default Replicated) over
    ``mesh`` (default: the enclosing ``with mesh:`` block)."""
    from tessera.dist import DistTensor, tensor
    from tessera.dist._mesh import current_mesh
    from tessera.domain import Rect
    if not isinstance(domain, Rect):
        raise ArgumentError(f"tessera.array.from_domain takes a tessera.domain.Rect, got {type(domain).__name__}")
    m = current_mesh("tessera.array.from_domain", mesh)
    return tensor(shape=domain.shape, layout=distribution, mesh=m, dtype=dtype)
