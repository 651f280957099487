"""Region privileges at trace time: what a @jit function may do with a
parameter annotated ``tessera.Region[...]``.

While the function is traced, each annotated parameter is a RegionTracer:

- ``read``: read it as any tensor; writing it (``Y[:] = v``, ``Y += v``) is
  a PrivilegeError.
- ``write``: ``Y[:] = v`` sets its new value (the whole region); reading it
  before that is a PrivilegeError (its incoming value is undefined to the
  function: a writer never waits for what it would read). After the write,
  reads see the new value.
- ``reduce_sum``: ``Y += v`` adds a contribution; ``reduce_max`` /
  ``reduce_min``: ``Y.reduce(v)`` folds one in (``Y.reduce`` works for
  reduce_sum too). Reading the region, or updating it with another op, is a
  PrivilegeError: calls reducing into one tensor run concurrently, so none
  of them may see its value.

Each error names the function, the parameter, its privilege and the user's
line. The traced function returns, after its own results, the new value of
each written region and the contribution of each reduced one; the call
applies them (tessera/privilege_scheduler.py).
"""

from __future__ import annotations

from tessera._trace import Tracer, _user_frame
from tessera.errors import ArgumentError, PrivilegeError

REDUCE_OPS = {"reduce_sum": "sum", "reduce_max": "max", "reduce_min": "min"}


def _where():
    file, line, text = _user_frame()
    if not file:
        return ""
    return f" at {file}:{line}" + (f": `{text.strip()}`" if text.strip() else "")


class RegionTracer(Tracer):
    """A parameter with a privilege, while its function is traced."""

    __slots__ = ("privilege", "param", "function", "written", "contribution")

    def __init__(self, tracer, privilege, param, function):
        super().__init__(tracer._ctx, tracer._id, tracer.shape, tracer.policy)
        self.privilege = privilege
        self.param = param
        self.function = function
        self.written = False
        self.contribution = None  # the reduced value so far (a Tracer), or None

    def _label(self):
        return f"{self.function}: parameter '{self.param}' is tessera.Region[{self.privilege!r}]"

    def check_read(self):
        """Called whenever the parameter is used as an op's input."""
        if self.privilege == "write" and not self.written:
            raise PrivilegeError(f"{self._label()}; it is read{_where()} before it is written (a write-only "
                                 f"region's incoming value is not the function's to read: write it first with "
                                 f"{self.param}[:] = ..., or annotate it Region['read'])")
        if self.privilege in REDUCE_OPS:
            raise PrivilegeError(f"{self._label()}; it is read{_where()}, but calls that reduce into one tensor "
                                 f"run concurrently, so its value is not theirs to read (annotate it "
                                 f"Region['read'] in a separate function to read it)")

    # -- updates --------------------------------------------------------------
    def __setitem__(self, key, value):
        if self.privilege == "read":
            raise PrivilegeError(f"{self._label()}; it is written{_where()} (a read region cannot be written: "
                                 f"annotate it Region['write'])")
        if self.privilege in REDUCE_OPS:
            raise PrivilegeError(f"{self._label()}; it is assigned{_where()}, which is not a "
                                 f"{REDUCE_OPS[self.privilege]} reduction ("
                                 f"{'use ' + self.param + ' += v' if self.privilege == 'reduce_sum' else 'use ' + self.param + '.reduce(v)'})")
        if not (key == slice(None) or key is Ellipsis):
            raise ArgumentError(f"{self.function}: parameter '{self.param}': only whole-region writes "
                                f"({self.param}[:] = v) are supported{_where()}")
        self._assign(self._as_region_value(value))

    def __iadd__(self, value):
        return self._update("+", value)

    def __isub__(self, value):
        return self._update("-", value)

    def __imul__(self, value):
        return self._update("*", value)

    def __itruediv__(self, value):
        return self._update("/", value)

    def reduce(self, value):
        """Folds ``value`` into a reduce_* region with the region's op."""
        if self.privilege not in REDUCE_OPS:
            raise PrivilegeError(f"{self._label()}; .reduce(){_where()} needs Region['reduce_sum'], "
                                 f"['reduce_max'] or ['reduce_min']")
        self._fold(self._as_region_value(value))
        return self

    def _update(self, symbol, value):
        if self.privilege == "read":
            raise PrivilegeError(f"{self._label()}; it is updated with {symbol}={_where()} (a read region cannot "
                                 f"be written)")
        if self.privilege == "reduce_sum" and symbol == "+":
            self._fold(self._as_region_value(value))
            return self
        if self.privilege in REDUCE_OPS:
            raise PrivilegeError(f"{self._label()}; it is updated with {symbol}={_where()}, another op than its "
                                 f"{REDUCE_OPS[self.privilege]} reduction")
        # write: `Y += v` reads Y, which needs it written first.
        self.check_read()
        current = Tracer(self._ctx, self._id, self.shape, self.policy)
        new = {"+": current.__add__, "-": current.__sub__, "*": current.__mul__, "/": current.__truediv__}[symbol](value)
        self._assign(self._as_region_value(new))
        return self

    # -- helpers --------------------------------------------------------------
    def _as_region_value(self, value):
        from tessera import ops
        if not isinstance(value, Tracer):
            value = ops.broadcast_to(ops.cast(self._ctx_constant(value), self.policy), self.shape)
        if tuple(value.shape) != tuple(self.shape):
            if len(value.shape) > len(self.shape):
                raise ArgumentError(f"{self.function}: a value of shape {tuple(value.shape)} cannot update "
                                    f"parameter '{self.param}' of shape {tuple(self.shape)}{_where()}")
            value = ops.broadcast_to(value, self.shape)
        if value.policy != self.policy:
            value = ops.cast(value, self.policy)
        return value

    def _ctx_constant(self, value):
        from tessera._tensor import tensor
        return tensor(value)

    def _assign(self, value):
        self._id = value._id
        self.written = True

    def _fold(self, value):
        from tessera import ops
        if self.contribution is None:
            self.contribution = value
        elif self.privilege == "reduce_sum":
            self.contribution = self.contribution + value
        elif self.privilege == "reduce_max":
            self.contribution = ops.maximum(self.contribution, value)
        else:
            self.contribution = ops.minimum(self.contribution, value)


def effects_of(region_tracers):
    """[(param, kind, op, tracer)] for the regions a traced function updates:
    kind "write" (the new value) or "reduce" (the contribution, op sum/max/min)."""
    out = []
    for r in region_tracers:
        if r.privilege == "write":
            if not r.written:
                raise PrivilegeError(f"{r._label()}, but the function never writes it (write it with "
                                     f"{r.param}[:] = ..., or annotate it Region['read'])")
            out.append((r.param, "write", None, Tracer(r._ctx, r._id, r.shape, r.policy)))
        elif r.privilege in REDUCE_OPS and r.contribution is not None:
            out.append((r.param, "reduce", REDUCE_OPS[r.privilege], r.contribution))
    return out
