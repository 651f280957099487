"""Matrix products: ``gemm`` (with transposes) and ``matmul``.

Operands have rank >= 2; leading dims are batch dims that broadcast like
numpy, the last two are the matrix. ``a`` is [..., M, K] and ``b`` is
[..., K, N] (after the transposes); the K dims must match. Floats give the
operands' policy when they agree, else the promoted one (``bf16`` with
``fp16`` gives ``fp32``). Integer products are exact and stored in the
accumulation type (int32, or int64 for int64), raising ArgumentError when a
result does not fit.

Fixed order: each output element accumulates k = 0..K-1 in order, each step
``acc + a*b`` rounded once to the accumulation type (a fused multiply-add in
that type).
"""

from __future__ import annotations

from tessera.ops._dispatch import dispatch

__all__ = ["gemm", "matmul"]


def gemm(a, b, transpose_a=False, transpose_b=False):
    """``op(a) @ op(b)`` where ``op`` swaps the last two dims when its flag is set."""
    return dispatch("graph.gemm", [a, b], {"transpose_a": bool(transpose_a), "transpose_b": bool(transpose_b)})


def matmul(a, b):
    """``a @ b`` over the last two dims with broadcast batch dims."""
    return dispatch("graph.matmul", [a, b], {})
