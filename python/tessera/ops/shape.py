"""Shape ops: reshape, transpose/permute, broadcast_to, slice, concat, split, split_qkv, gather.

They move elements without changing them: every encoding (NaN payloads,
-0.0, packed fp4/int4 nibbles) arrives bit for bit, and results keep the
input's numerics policy. Dims may be symbolic (strings) inside
``@tessera.jit``; an op that would need arithmetic on a symbol (slicing part
of it, concatenating or splitting along it) raises ShapeError.
"""

from __future__ import annotations

import numbers

import numpy as np

from tessera.errors import ArgumentError, DtypeError, ShapeError
from tessera.ops._args import dims_argument
from tessera.ops._dispatch import dispatch

__all__ = ["reshape", "transpose", "permute", "broadcast_to", "slice", "concat", "split", "split_qkv",
           "gather"]

# A stop this large means "to the end of the axis" (graph.slice accepts any stop >= 2**62 as that,
# even on a symbolic dim).
_TO_END = 2**63 - 1


def _ints(values, what):
    if isinstance(values, numbers.Integral):
        values = (values,)
    out = []
    for v in values:
        if not isinstance(v, numbers.Integral) or isinstance(v, bool):
            raise TypeError(f"{what}: expected ints, got {v!r}")
        out.append(int(v))
    return out


def _is_static(shape):
    return all(isinstance(d, int) for d in shape)


def reshape(x, shape):
    """``x`` with a new shape, elements in row-major order.

    One dim may be ``-1``: it is inferred from the others when ``x``'s shape is static.
    Symbolic dims must appear in both shapes (they move whole).
    """
    shape = dims_argument(shape, "reshape")
    holes = [i for i, d in enumerate(shape) if d == -1]
    if len(holes) > 1:
        raise ShapeError(f"reshape: only one dim may be -1, got {shape}")
    if holes:
        if not _is_static(x.shape):
            raise ShapeError(f"reshape: -1 needs a static input shape, got {tuple(x.shape)}; "
                             "write the dims explicitly")
        if not _is_static(shape):
            raise ShapeError(f"reshape: -1 cannot be combined with symbolic dims in {shape}")
        total = int(np.prod(x.shape, dtype=np.int64))
        known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
        if known == 0 or total % known != 0:
            raise ShapeError(f"reshape: cannot reshape {tuple(x.shape)} ({total} elements) to {shape}")
        shape = tuple(total // known if d == -1 else d for d in shape)
    return dispatch("graph.reshape", [x], {"shape": shape})


def transpose(x, perm=None):
    """Permutes axes: result dim ``i`` is ``x``'s dim ``perm[i]``; ``perm=None`` reverses them."""
    if perm is None:
        perm = list(range(len(x.shape) - 1, -1, -1))
    return dispatch("graph.transpose", [x], {"perm": _ints(perm, "transpose perm")})


def permute(x, perm):
    """Same as ``transpose(x, perm)`` with ``perm`` required."""
    return dispatch("graph.transpose", [x], {"perm": _ints(perm, "permute perm")})


def broadcast_to(x, shape):
    """``x`` broadcast numpy-style to exactly ``shape``."""
    return dispatch("graph.broadcast_to", [x], {"shape": dims_argument(shape, "broadcast_to")})


def slice(x, starts, stops, steps=None):  # noqa: A001 - the op's name
    """Numpy basic slicing, one ``start:stop:step`` per axis.

    ``None`` in ``starts``/``stops``/``steps`` means 0 / the end / 1; negative bounds count
    from the end and out-of-range bounds clamp. Steps must be > 0.
    """
    def fill(values, default, what):
        if values is None:
            return [default] * len(x.shape)
        if isinstance(values, numbers.Integral):
            values = [values]
        return _ints([default if v is None else v for v in values], what)

    return dispatch("graph.slice", [x], {"starts": fill(starts, 0, "slice starts"),
                                         "stops": fill(stops, _TO_END, "slice stops"),
                                         "steps": fill(steps, 1, "slice steps")})


def concat(tensors, axis: int = 0):
    """Joins tensors of one policy along ``axis`` (cast mixed policies first)."""
    tensors = list(tensors)
    if not tensors:
        raise ArgumentError("concat needs at least one tensor")
    return dispatch("graph.concat", tensors, {"axis": int(axis)})


def _as_tuple(result):
    return result if isinstance(result, tuple) else (result,)


def split(x, sizes_or_sections, axis: int = 0):
    """Splits ``x`` along ``axis``: an int ``n`` gives ``n`` equal parts, a list gives parts of
    those sizes (which must sum to the dim). Returns a tuple."""
    if isinstance(sizes_or_sections, numbers.Integral):
        n = int(sizes_or_sections)
        if n <= 0:
            raise ArgumentError(f"split: number of sections must be > 0, got {n}")
        rank = len(x.shape)
        if not -rank <= axis < rank:
            raise ShapeError(f"split: axis {axis} is out of range for rank {rank}")
        dim = x.shape[axis]
        if not isinstance(dim, int):
            raise ShapeError(f"split: equal sections need a static dim, axis {axis} is '{dim}'")
        if dim % n:
            raise ShapeError(f"split: axis {axis} of size {dim} does not divide into {n} equal sections")
        sizes = [dim // n] * n
    else:
        sizes = _ints(sizes_or_sections, "split sizes")
    return _as_tuple(dispatch("graph.split", [x], {"axis": int(axis), "sizes": sizes}))


def split_qkv(x, num_heads=None):
    """Splits ``x[..., 3*D]`` into ``(q, k, v)``, the contiguous thirds ``x[..., :D]``,
    ``x[..., D:2D]``, ``x[..., 2D:]``. With ``num_heads=H`` each is reshaped to
    ``[..., H, D // H]``, head ``h`` holding features ``h*D/H`` to ``(h+1)*D/H`` of its third."""
    heads = 0 if num_heads is None else int(num_heads)
    if num_heads is not None and heads <= 0:
        raise ArgumentError(f"split_qkv: num_heads must be > 0 (or None), got {num_heads}")
    return _as_tuple(dispatch("graph.split_qkv", [x], {"num_heads": heads}))


def gather(x, indices, axis: int = 0):
    """``numpy.take(x, indices, axis)``: result shape ``x.shape[:axis] + indices.shape +
    x.shape[axis+1:]``. Indices are an integer tensor (lists and ints are converted to int64);
    negative indices count from the end once; out-of-range ones raise ArgumentError."""
    from tessera._tensor import Tensor, tensor
    from tessera._tensor_ops import TensorOps
    if not isinstance(indices, (Tensor, TensorOps)):
        array = np.asarray(indices)
        if array.dtype.kind not in "iu":
            raise DtypeError(f"gather: indices must be integers, got {array.dtype}")
        indices = tensor(array.astype(np.int64))
    return dispatch("graph.gather", [x, indices], {"axis": int(axis)})
