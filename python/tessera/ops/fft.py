"""Discrete Fourier transforms: ``fft``, ``ifft``, ``rfft``, ``irfft`` and their 2-D forms
(docs/guide/fft.md, docs/design/0016-complex-and-fft.md).

numpy.fft's signatures: ``n`` (1-D) or ``s`` (2-D) crops or zero-pads the input along the
transformed axes, ``axis``/``axes`` choose them, ``norm`` is ``"backward"`` (default: 1/n on the
inverse), ``"ortho"`` (1/sqrt(n) both ways) or ``"forward"`` (1/n on the forward transform).

Each 1-D transform is one Graph IR ``graph.fft`` (``kind`` c2c, r2c or c2r), after a
``graph.fft_resize`` when ``n`` differs from the input's length. Any length works: 2/3/5/7-smooth
lengths run mixed-radix Stockham passes, others Bluestein's algorithm. complex64 computes with fp32
parts and complex128 with fp64 parts, in an order fixed by the length alone, so results are
reproducible bit for bit. Real inputs give complex64 (complex128 for fp64). Gradients follow JAX.
"""

from __future__ import annotations

import numbers

from tessera.errors import ArgumentError, ShapeError
from tessera.ops._dispatch import dispatch

__all__ = ["fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "rfft2", "irfft2"]

_NORMS = ("backward", "ortho", "forward")


def _tensor(x):
    from tessera import _C
    from tessera._tensor_ops import TensorOps
    if isinstance(x, (_C.Tensor, TensorOps)):
        return x
    from tessera._tensor import tensor
    return tensor(x)


def _norm(norm, name):
    if norm is None:
        return "backward"
    if norm not in _NORMS:
        raise ArgumentError(f"tessera.ops.{name}: norm must be None, \"backward\", \"ortho\" or \"forward\", "
                            f"got {norm!r}")
    return norm


def _axis(axis, rank, name):
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
        raise ArgumentError(f"tessera.ops.{name}: axis must be an int, got {axis!r}")
    if rank == 0:
        raise ShapeError(f"tessera.ops.{name}: the input is a scalar; it needs at least one axis to transform")
    if not -rank <= axis < rank:
        raise ShapeError(f"tessera.ops.{name}: axis {axis} is out of range for an input of rank {rank}")
    return int(axis) % rank


def _length(n, name):
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise ArgumentError(f"tessera.ops.{name}: n must be an int, got {n!r}")
    if n < 1:
        raise ArgumentError(f"tessera.ops.{name}: n must be >= 1 (the number of points transformed), got {n}")
    return int(n)


def _one(x, n, axis, norm, kind, inverse, name):
    x = _tensor(x)
    axis = _axis(axis, len(x.shape), name)
    have = x.shape[axis]
    if not isinstance(have, numbers.Integral):
        raise ShapeError(f"tessera.ops.{name}: axis {axis} has the symbolic size {have}; FFT lengths must be static")
    if n is None:
        if kind == "c2r":
            if have < 2:
                raise ArgumentError(f"tessera.ops.{name}: the input has {have} bin on axis {axis}, so the default "
                                    f"n = 2 * ({have} - 1) is 0; pass n")
            n = 2 * (have - 1)
        else:
            n = have
    n = _length(n, name)
    want = n // 2 + 1 if kind == "c2r" else n
    if have != want:
        x = dispatch("graph.fft_resize", [x], {"axis": axis, "length": want})
    return dispatch("graph.fft", [x], {"axis": axis, "n": n, "inverse": inverse, "kind": kind,
                                       "norm": _norm(norm, name)})


def fft(x, n=None, axis=-1, norm=None):
    """The 1-D discrete Fourier transform along ``axis`` (numpy.fft.fft)."""
    return _one(x, n, axis, norm, "c2c", False, "fft")


def ifft(x, n=None, axis=-1, norm=None):
    """The inverse of ``fft`` (numpy.fft.ifft)."""
    return _one(x, n, axis, norm, "c2c", True, "ifft")


def rfft(x, n=None, axis=-1, norm=None):
    """The transform of a real input: its n // 2 + 1 non-negative frequencies (numpy.fft.rfft)."""
    return _one(x, n, axis, norm, "r2c", False, "rfft")


def irfft(x, n=None, axis=-1, norm=None):
    """The inverse of ``rfft``: a real result of length n (default 2 * (bins - 1)) from a complex
    half spectrum (numpy.fft.irfft)."""
    return _one(x, n, axis, norm, "c2r", True, "irfft")


def _axes2(x, s, axes, name):
    x = _tensor(x)
    axes = tuple(axes)
    if len(axes) != 2:
        raise ArgumentError(f"tessera.ops.{name}: axes must name two axes, got {axes!r}")
    rank = len(x.shape)
    norm_axes = [_axis(a, rank, name) for a in axes]
    if norm_axes[0] == norm_axes[1]:
        raise ArgumentError(f"tessera.ops.{name}: axes {axes!r} name the same axis twice")
    if s is None:
        s = (None, None)
    s = tuple(s)
    if len(s) != 2:
        raise ArgumentError(f"tessera.ops.{name}: s must give two lengths (one per axis), got {s!r}")
    return x, s, axes


def fft2(x, s=None, axes=(-2, -1), norm=None):
    """The 2-D transform over ``axes``: ``fft`` along the last of them, then the first (numpy.fft.fft2)."""
    x, s, axes = _axes2(x, s, axes, "fft2")
    x = fft(x, s[1], axes[1], norm)
    return fft(x, s[0], axes[0], norm)


def ifft2(x, s=None, axes=(-2, -1), norm=None):
    """The inverse of ``fft2`` (numpy.fft.ifft2)."""
    x, s, axes = _axes2(x, s, axes, "ifft2")
    x = ifft(x, s[1], axes[1], norm)
    return ifft(x, s[0], axes[0], norm)


def rfft2(x, s=None, axes=(-2, -1), norm=None):
    """``rfft`` along the last of ``axes``, then ``fft`` along the first (numpy.fft.rfft2)."""
    x, s, axes = _axes2(x, s, axes, "rfft2")
    x = rfft(x, s[1], axes[1], norm)
    return fft(x, s[0], axes[0], norm)


def irfft2(x, s=None, axes=(-2, -1), norm=None):
    """The inverse of ``rfft2``: ``ifft`` along the first of ``axes``, then ``irfft`` along the last
    (numpy.fft.irfft2)."""
    x, s, axes = _axes2(x, s, axes, "irfft2")
    x = ifft(x, s[0], axes[0], norm)
    return irfft(x, s[1], axes[1], norm)
