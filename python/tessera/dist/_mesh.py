"""tessera.dist.mesh: a grid of devices with named axes, and ``with mesh:``."""

from __future__ import annotations

import threading

from tessera import _C
from tessera.errors import ArgumentError

_default = threading.local()


class Mesh:
    """A device mesh: ``devices`` in a row-major grid of ``shape`` with ``axes``.

    ``with mesh:`` makes it the default mesh of the block (for
    ``tessera.array.from_domain`` and ``tessera.dist.tensor`` without
    ``mesh=``). Bad meshes raise ArgumentError; unknown devices DeviceError.
    """

    def __init__(self, devices, axes, shape, backend=None):
        if isinstance(axes, str):
            axes = (axes,)
        if isinstance(shape, int):
            shape = (shape,)
        devices, axes, shape = [str(d) for d in devices], [str(a) for a in axes], [int(s) for s in shape]
        # The collective backend of its axis groups (None: TESSERA_COLLECTIVE_BACKEND, else "auto").
        self.backend = backend
        from tessera.dist._backend import requested
        requested(self)  # an unknown name fails here, naming it
        # Validate the mesh as asked before the Mapper places it (its errors name what was given).
        self._m = _C.Mesh(devices, axes, shape)
        from tessera.mapper import place_mesh
        placed, self.placement = place_mesh(devices, axes, shape)
        if placed != devices:
            self._m = _C.Mesh(placed, axes, shape)

    @property
    def devices(self) -> tuple:
        return tuple(self._m.devices)

    @property
    def axes(self) -> tuple:
        return tuple(self._m.axes)

    @property
    def shape(self) -> tuple:
        return tuple(self._m.shape)

    @property
    def size(self) -> int:
        return self._m.size

    def axis_size(self, axis: str) -> int:
        return self._m.axis_size(axis)

    def coords(self, rank: int) -> tuple:
        return tuple(self._m.coords(rank))

    def device_at(self, **coords) -> str:
        """The device at mesh coordinates given by axis name: ``mesh.device_at(dp=1, tp=0)``."""
        unknown = set(coords) - set(self.axes)
        if unknown or len(coords) != len(self.axes):
            raise ArgumentError(f"device_at takes one coordinate per mesh axis {self.axes}, got {sorted(coords)}")
        return self.devices[self._m.rank_of([int(coords[a]) for a in self.axes])]

    def axis_group(self, axis: str, rank: int) -> tuple:
        """The devices of the members of ``axis`` that ``rank``'s device belongs to, by coordinate."""
        return tuple(self.devices[r] for r in self._m.axis_group(axis, rank))

    def __len__(self):
        return self._m.size

    def __repr__(self):
        return f"<tessera.dist.{self._m.describe()}>"

    def __enter__(self):
        stack = getattr(_default, "stack", None)
        if stack is None:
            stack = _default.stack = []
        stack.append(self)
        return self

    def __exit__(self, *exc):
        _default.stack.pop()
        return False


def mesh(devices, axes, shape, backend=None) -> Mesh:
    """``tessera.dist.mesh(devices=[...], axes=("dp", "tp"), shape=(2, 4))``; ``backend=`` picks
    the collective backend ("auto", "local", "nccl"; tessera.dist._backend)."""
    return Mesh(devices, axes, shape, backend)


def current_mesh(what: str, given=None) -> Mesh:
    """``given``, else the mesh of the innermost ``with mesh:`` block; ArgumentError naming ``what`` when neither."""
    if given is not None:
        if not isinstance(given, Mesh):
            raise ArgumentError(f"{what}: mesh= takes a tessera.dist.mesh, got {type(given).__name__}")
        return given
    stack = getattr(_default, "stack", None)
    if stack:
        return stack[-1]
    raise ArgumentError(f"{what}: no mesh= given and no enclosing `with mesh:` block")
