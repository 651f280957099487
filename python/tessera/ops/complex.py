"""Complex parts: ``real``, ``imag``, ``conj``, ``complex`` (docs/design/0016-complex-and-fft.md).

complex64 holds fp32 parts and complex128 fp64 parts. ``add``, ``sub``, ``mul``, ``div``, ``neg``,
``exp`` and ``abs`` (which returns the real magnitude) also take complex tensors; a real operand
promotes to the complex dtype of the wider part (complex64 + fp64 gives complex128). Gradients
follow JAX's convention: the VJP is the transpose of the JVP without conjugation, so
``grad`` of a real loss with respect to z is the conjugate of the Wirtinger gradient dL/dz̄ times 2.
"""

from __future__ import annotations

from tessera.ops._dispatch import dispatch

__all__ = ["real", "imag", "conj", "complex"]


def real(x):
    """The real part: fp32 for complex64, fp64 for complex128 (the identity on real tensors)."""
    return dispatch("graph.real", [x], {})


def imag(x):
    """The imaginary part: fp32 for complex64, fp64 for complex128 (zeros for real tensors)."""
    return dispatch("graph.imag", [x], {})


def conj(x):
    """The complex conjugate (the identity on real tensors)."""
    return dispatch("graph.conj", [x], {})


def complex(re, im):  # noqa: A001 - the op's name, as in the specification's API
    """``re + 1j * im`` from two real tensors (broadcast): complex128 if they promote to fp64, else complex64."""
    return dispatch("graph.complex", [re, im], {})
