"""ShardSpec and the Chapel-style distributions Block, Cyclic and Replicated."""

from __future__ import annotations

from tessera import _C
from tessera.errors import ArgumentError


def _names(values, what):
    if isinstance(values, (str, int)):
        values = (values,)
    try:
        return [str(v) for v in values]
    except TypeError:
        raise ArgumentError(f"{what} takes a tuple of names, got {values!r}") from None


class ShardSpec:
    """How a tensor is split over mesh axes.

    ``partition`` names tensor dims: ``"row"`` (dim 0), ``"col"`` (the last
    dim) or integers (negative from the end); each is split over the mesh
    axis at the same position of ``mesh_axes``. ``partial`` lists mesh axes
    over which the tensor is a pending sum. Dims not named are whole on every
    device. Uneven splits follow numpy.array_split: the first n % P parts get
    one element more.
    """

    def __init__(self, partition=(), mesh_axes=(), partial=()):
        self.partition = tuple(_names(partition, "ShardSpec partition"))
        self.mesh_axes = tuple(_names(mesh_axes, "ShardSpec mesh_axes"))
        self.partial = tuple(_names(partial, "ShardSpec partial"))
        if len(self.partition) != len(self.mesh_axes):
            raise ArgumentError(f"ShardSpec: partition {self.partition} and mesh_axes {self.mesh_axes} pair up one "
                                f"to one; they have {len(self.partition)} and {len(self.mesh_axes)} entries")
        self.cyclic_block = 0

    def layout(self, rank: int, mesh) -> "_C.Layout":
        return _C.Layout.resolve(list(self.partition), list(self.mesh_axes), list(self.partial),
                                 self.cyclic_block, rank, mesh._m)

    def __repr__(self):
        extra = f", partial={self.partial}" if self.partial else ""
        return f"ShardSpec(partition={self.partition}, mesh_axes={self.mesh_axes}{extra})"


class Block(ShardSpec):
    """Chapel's Block: dim i of the domain in contiguous blocks over ``mesh_axes[i]``."""

    def __init__(self, mesh_axes):
        axes = _names(mesh_axes, "Block mesh_axes")
        super().__init__(partition=[str(i) for i in range(len(axes))], mesh_axes=axes)

    def __repr__(self):
        return f"Block(mesh_axes={self.mesh_axes})"


class Cyclic(ShardSpec):
    """Chapel's (Block)Cyclic: dim i dealt round-robin over ``mesh_axes[i]`` in blocks of ``block`` elements."""

    def __init__(self, mesh_axes, block=1):
        axes = _names(mesh_axes, "Cyclic mesh_axes")
        super().__init__(partition=[str(i) for i in range(len(axes))], mesh_axes=axes)
        if int(block) < 1:
            raise ArgumentError(f"Cyclic: block must be >= 1, got {block}")
        self.cyclic_block = int(block)

    def __repr__(self):
        return f"Cyclic(mesh_axes={self.mesh_axes}, block={self.cyclic_block})"


class Replicated(ShardSpec):
    """Chapel's Replicated: the whole domain on every device."""

    def __init__(self):
        super().__init__()

    def __repr__(self):
        return "Replicated()"


def as_layout(layout, rank, mesh):
    if layout is None:
        layout = Replicated()
    if isinstance(layout, _C.Layout):
        return layout
    if not isinstance(layout, ShardSpec):
        raise ArgumentError(f"layout= takes a tessera.dist.ShardSpec (or Block, Cyclic, Replicated), "
                            f"got {type(layout).__name__}")
    return layout.layout(rank, mesh)
