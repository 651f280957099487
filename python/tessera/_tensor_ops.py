"""Operators shared by tensors and tracers: ``a + b``, ``a @ b``, ``x.T``, ``x[1:, ::2]``.

Each forwards to a ``tessera.ops`` function, so eager tensors run the op and
tracers record it: the same Python code works both ways.
"""

from __future__ import annotations


def _ops():
    from tessera import ops
    return ops


class TensorOps:
    __slots__ = ()
    __array_priority__ = 1000  # numpy defers to our reflected operators

    def __add__(self, other): return _ops().add(self, other)
    def __radd__(self, other): return _ops().add(other, self)
    def __sub__(self, other): return _ops().sub(self, other)
    def __rsub__(self, other): return _ops().sub(other, self)
    def __mul__(self, other): return _ops().mul(self, other)
    def __rmul__(self, other): return _ops().mul(other, self)
    def __truediv__(self, other): return _ops().div(self, other)
    def __rtruediv__(self, other): return _ops().div(other, self)
    def __pow__(self, other): return _ops().pow(self, other)
    def __rpow__(self, other): return _ops().pow(other, self)
    def __matmul__(self, other): return _ops().matmul(self, other)
    def __rmatmul__(self, other): return _ops().matmul(other, self)
    def __neg__(self): return _ops().neg(self)
    def __abs__(self): return _ops().abs(self)
    def __lt__(self, other): return _ops().lt(self, other)
    def __le__(self, other): return _ops().le(self, other)
    def __gt__(self, other): return _ops().gt(self, other)
    def __ge__(self, other): return _ops().ge(self, other)

    @property
    def T(self):
        return _ops().transpose(self)

    def reshape(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return _ops().reshape(self, shape)

    def transpose(self, *perm):
        if len(perm) == 1 and isinstance(perm[0], (tuple, list)):
            perm = tuple(perm[0])
        return _ops().transpose(self, perm or None)

    def sum(self, axis=None, keepdims=False): return _ops().sum(self, axis=axis, keepdims=keepdims)
    def mean(self, axis=None, keepdims=False): return _ops().mean(self, axis=axis, keepdims=keepdims)
    def max(self, axis=None, keepdims=False): return _ops().max(self, axis=axis, keepdims=keepdims)
    def min(self, axis=None, keepdims=False): return _ops().min(self, axis=axis, keepdims=keepdims)
    def astype(self, dtype): return _ops().cast(self, dtype)

    def __getitem__(self, index):
        """Basic indexing, as numpy: ints (drop their axis), slices (step > 0), one ``...``
        (as many full slices as needed) and ``None`` (a new axis of size 1)."""
        from tessera.errors import ArgumentError, ShapeError
        if not isinstance(index, tuple):
            index = (index,)
        ellipses = sum(1 for i in index if i is Ellipsis)
        if ellipses > 1:
            raise ArgumentError("a tensor index may hold at most one '...'")
        consumed = sum(1 for i in index if i is not None and i is not Ellipsis)
        if consumed > len(self.shape):
            raise ShapeError(f"too many indices ({consumed}) for a tensor of rank {len(self.shape)}")
        if ellipses:
            at = index.index(Ellipsis)
            index = index[:at] + (slice(None),) * (len(self.shape) - consumed) + index[at + 1:]
        else:
            index = index + (slice(None),) * (len(self.shape) - consumed)
        starts, stops, steps = [], [], []
        # Per index entry: "new" (None), "drop" (int) or "keep" (slice), to shape the result.
        kinds = []
        axis = 0
        for i in index:
            if i is None:
                kinds.append("new")
                continue
            dim = self.shape[axis]
            if isinstance(i, slice):
                starts.append(0 if i.start is None else i.start)
                stops.append(2**62 if i.stop is None else i.stop)
                steps.append(1 if i.step is None else i.step)
                kinds.append("keep")
            elif isinstance(i, int) and not isinstance(i, bool):
                if isinstance(dim, int) and not -dim <= i < dim:
                    raise ArgumentError(f"index {i} is out of range for axis {axis} of size {dim}")
                start = i + dim if (i < 0 and isinstance(dim, int)) else i
                starts.append(start)
                stops.append(start + 1)
                steps.append(1)
                kinds.append("drop")
            else:
                raise TypeError(f"tensor indices must be ints, slices, ... or None, got {type(i).__name__}")
            axis += 1
        out = _ops().slice(self, starts, stops, steps)
        if all(k == "keep" for k in kinds):
            return out
        sliced = iter(out.shape)
        shape = []
        for k in kinds:
            if k == "new":
                shape.append(1)
            elif k == "keep":
                shape.append(next(sliced))
            else:
                next(sliced)
        return _ops().reshape(out, tuple(shape))
