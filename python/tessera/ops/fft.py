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

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn",
           "rfftn", "irfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

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


# hfft and ihfft are irfft and rfft with the normalization's direction swapped (numpy's rule).
_SWAPPED = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


def hfft(x, n=None, axis=-1, norm=None):
    """The transform of a signal with Hermitian symmetry, given by its first half: a real result of
    length n (default 2 * (bins - 1)) (numpy.fft.hfft: irfft of the conjugate, norm swapped)."""
    from tessera.ops.complex import conj
    return _one(conj(_tensor(x)), n, axis, _SWAPPED[_norm(norm, "hfft")], "c2r", True, "hfft")


def ihfft(x, n=None, axis=-1, norm=None):
    """The inverse of ``hfft``: the n // 2 + 1 bins of a real input's Hermitian spectrum
    (numpy.fft.ihfft: the conjugate of rfft, norm swapped)."""
    from tessera.ops.complex import conj
    return conj(_one(x, n, axis, _SWAPPED[_norm(norm, "ihfft")], "r2c", False, "ihfft"))


def _axes_n(x, s, axes, name, count=None):
    """numpy's rules for the N-D transforms: axes default to the last len(s) axes (all of them
    without s); s and axes, when both given, have one entry per transformed axis; an axis is
    named once. ``count``: the number of axes the transform needs (2 for the 2-D forms)."""
    x = _tensor(x)
    rank = len(x.shape)
    if s is not None:
        s = tuple(s)
    if axes is None:
        axes = tuple(range(rank - len(s), rank)) if s is not None else tuple(range(rank))
        if s is not None and len(s) > rank:
            raise ArgumentError(f"tessera.ops.{name}: s gives {len(s)} lengths for an input of rank {rank}")
    axes = tuple(axes)
    if count is not None and len(axes) != count:
        raise ArgumentError(f"tessera.ops.{name}: axes must name {count} axes, got {axes!r}")
    if not axes:
        raise ArgumentError(f"tessera.ops.{name}: no axis to transform")
    norm_axes = [_axis(a, rank, name) for a in axes]
    if len(set(norm_axes)) != len(norm_axes):
        raise ArgumentError(f"tessera.ops.{name}: axes {axes!r} name the same axis twice")
    if s is None:
        s = (None,) * len(axes)
    if len(s) != len(axes):
        raise ArgumentError(f"tessera.ops.{name}: s must give one length per axis ({len(axes)}), got {s!r}")
    return x, s, axes


def _along(x, s, axes, norm, one):
    # numpy's order: the last axis first.
    for k in reversed(range(len(axes))):
        x = one(x, s[k], axes[k], norm)
    return x


def fftn(x, s=None, axes=None, norm=None):
    """The N-D transform over ``axes`` (default: all): ``fft`` along each, the last first
    (numpy.fft.fftn)."""
    x, s, axes = _axes_n(x, s, axes, "fftn")
    return _along(x, s, axes, norm, fft)


def ifftn(x, s=None, axes=None, norm=None):
    """The inverse of ``fftn`` (numpy.fft.ifftn)."""
    x, s, axes = _axes_n(x, s, axes, "ifftn")
    return _along(x, s, axes, norm, ifft)


def rfftn(x, s=None, axes=None, norm=None):
    """``rfft`` along the last of ``axes``, then ``fft`` along the others (numpy.fft.rfftn)."""
    x, s, axes = _axes_n(x, s, axes, "rfftn")
    x = rfft(x, s[-1], axes[-1], norm)
    return _along(x, s[:-1], axes[:-1], norm, fft)


def irfftn(x, s=None, axes=None, norm=None):
    """The inverse of ``rfftn``: ``ifft`` along all but the last of ``axes``, then ``irfft`` along the
    last (numpy.fft.irfftn)."""
    x, s, axes = _axes_n(x, s, axes, "irfftn")
    x = _along(x, s[:-1], axes[:-1], norm, ifft)
    return irfft(x, s[-1], axes[-1], norm)


def fft2(x, s=None, axes=(-2, -1), norm=None):
    """The 2-D transform over ``axes``: ``fft`` along the last of them, then the first (numpy.fft.fft2)."""
    x, s, axes = _axes_n(x, s, axes, "fft2", count=2)
    return _along(x, s, axes, norm, fft)


def ifft2(x, s=None, axes=(-2, -1), norm=None):
    """The inverse of ``fft2`` (numpy.fft.ifft2)."""
    x, s, axes = _axes_n(x, s, axes, "ifft2", count=2)
    return _along(x, s, axes, norm, ifft)


def rfft2(x, s=None, axes=(-2, -1), norm=None):
    """``rfft`` along the last of ``axes``, then ``fft`` along the first (numpy.fft.rfft2)."""
    x, s, axes = _axes_n(x, s, axes, "rfft2", count=2)
    x = rfft(x, s[1], axes[1], norm)
    return fft(x, s[0], axes[0], norm)


def irfft2(x, s=None, axes=(-2, -1), norm=None):
    """The inverse of ``rfft2``: ``ifft`` along the first of ``axes``, then ``irfft`` along the last
    (numpy.fft.irfft2)."""
    x, s, axes = _axes_n(x, s, axes, "irfft2", count=2)
    x = ifft(x, s[0], axes[0], norm)
    return irfft(x, s[1], axes[1], norm)


# ---- frequencies and shifts ----

def _freq_args(n, d, name):
    n = _length(n, name)
    if isinstance(d, bool) or not isinstance(d, numbers.Real) or not d > 0 or d != d or d == float("inf"):
        raise ArgumentError(f"tessera.ops.{name}: d (the sample spacing) must be a positive finite number, got {d!r}")
    return n, float(d)


def _frequencies(values, n, d, dtype, device):
    """k * (1 / (n d)) for each integer k, computed in float64 as numpy computes it and rounded once
    to ``dtype``."""
    import numpy as np
    from tessera._tensor import tensor
    out = tensor(np.asarray(values, dtype=np.float64) * (1.0 / (n * d)), dtype)
    return out if device is None else out.to(device)


def fftfreq(n, d=1.0, *, dtype="fp32", device=None):
    """The sample frequencies of an ``fft`` of length n with sample spacing d: [0, 1, ..,
    (n - 1) // 2, -(n // 2), .., -1] / (n d) (numpy.fft.fftfreq), as a 1-D tensor of ``dtype``."""
    n, d = _freq_args(n, d, "fftfreq")
    return _frequencies(list(range(0, (n - 1) // 2 + 1)) + list(range(-(n // 2), 0)), n, d, dtype, device)


def rfftfreq(n, d=1.0, *, dtype="fp32", device=None):
    """The sample frequencies of an ``rfft`` of length n: [0, 1, .., n // 2] / (n d)
    (numpy.fft.rfftfreq)."""
    n, d = _freq_args(n, d, "rfftfreq")
    return _frequencies(list(range(0, n // 2 + 1)), n, d, dtype, device)


def _shift(x, axes, name, inverse):
    x = _tensor(x)
    rank = len(x.shape)
    if axes is None:
        axes = tuple(range(rank))
    elif isinstance(axes, numbers.Integral) and not isinstance(axes, bool):
        axes = (axes,)
    axes = tuple(_axis(a, rank, name) for a in axes)
    from tessera.ops.shape import concat, split
    for axis in axes:
        size = x.shape[axis]
        if not isinstance(size, numbers.Integral):
            raise ShapeError(f"tessera.ops.{name}: axis {axis} has the symbolic size {size}; shifts need static sizes")
        # A roll by size // 2 (fftshift) or -(size // 2) (ifftshift): the tail moves to the front.
        head = size // 2 if inverse else size - size // 2
        if head == 0 or head == size:
            continue
        first, second = split(x, [head, size - head], axis)
        x = concat([second, first], axis)
    return x


def fftshift(x, axes=None):
    """Moves the zero frequency to the centre: a roll by size // 2 along each of ``axes`` (default:
    all) (numpy.fft.fftshift)."""
    return _shift(x, axes, "fftshift", inverse=False)


def ifftshift(x, axes=None):
    """The inverse of ``fftshift``: a roll by -(size // 2) along each of ``axes`` (numpy.fft.ifftshift)."""
    return _shift(x, axes, "ifftshift", inverse=True)
