"""``tessera.Region[privilege]``: how a @jit function's parameter is accessed.

Privileges: ``"read"``, ``"write"``, ``"reduce_sum"``, ``"reduce_max"``,
``"reduce_min"`` (also importable as names: ``from tessera.region import read,
write, reduce_sum``). Inside @jit, what the function does with such a
parameter is checked while it is traced (tessera/privileges.py: ``Y[:] = v``
writes, ``Y += v`` reduces), and its calls run asynchronously, ordered by
their privileges (tessera/privilege_scheduler.py). Autodiff reads it: the gradient of a
parameter annotated ``Region["reduce_sum"]`` may be accumulated with ``+=``
into a buffer (``tessera.grad(f, accumulate={argnum: buffer})``), and a
``Region["write"]`` parameter, whose incoming value is never read, has no
gradient (asking for one is a PrivilegeError).
"""

from __future__ import annotations

import inspect

from tessera.errors import PrivilegeError

PRIVILEGES = ("read", "write", "reduce_sum", "reduce_max", "reduce_min")

# The privileges as names, so that the specification's spelling works:
#   from tessera.region import Region, read, write, reduce_sum
#   def step(W: Region[read], X: Region[read], Y: Region[reduce_sum]): ...
read, write, reduce_sum, reduce_max, reduce_min = PRIVILEGES


class RegionSpec:
    __slots__ = ("privilege",)

    def __init__(self, privilege):
        self.privilege = privilege

    def __repr__(self):
        return f"tessera.Region[{self.privilege!r}]"

    def __eq__(self, other):
        return isinstance(other, RegionSpec) and other.privilege == self.privilege

    def __hash__(self):
        return hash(("Region", self.privilege))


class _RegionMeta(type):
    def __getitem__(cls, privilege):
        if privilege not in PRIVILEGES:
            raise PrivilegeError(f"tessera.Region[{privilege!r}]: unknown privilege; expected one of "
                                 f"{', '.join(repr(p) for p in PRIVILEGES)}")
        return RegionSpec(privilege)


class Region(metaclass=_RegionMeta):
    """``tessera.Region["read" | "write" | "reduce_sum" | "reduce_max" | "reduce_min"]``."""


def privileges(fun):
    """Positional parameter index -> privilege, for the parameters of ``fun`` annotated with Region."""
    fn = getattr(fun, "fn", fun)  # a @jit function's Python body
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return {}
    hints = getattr(fn, "__annotations__", {}) or {}
    return {i: hints[p.name].privilege for i, p in enumerate(params) if isinstance(hints.get(p.name), RegionSpec)}


def parameter_name(fun, index):
    fn = getattr(fun, "fn", fun)
    try:
        return list(inspect.signature(fn).parameters)[index]
    except (TypeError, ValueError, IndexError):
        return f"#{index}"
