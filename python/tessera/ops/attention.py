"""Attention: ``flash_attn`` (docs/guide/attention.md, docs/design/0015-flash-attention.md).

``flash_attn(q, k, v)`` records Graph IR ``graph.flash_attn`` (graph/attention_ops.cpp) and runs
compiled like every op: eagerly, or inside ``@tessera.jit``. Its gradient is the separate op
``graph.flash_attn_bwd`` with fixed-order sums (deterministic, no atomics).
"""

from __future__ import annotations

import math
import numbers

from tessera.errors import ArgumentError, ShapeError
from tessera.numerics import _storage
from tessera.ops._dispatch import dispatch

__all__ = ["flash_attn"]

SUPPORTED_HEAD_DIMS = (64, 128, 256)


def _dense(x):
    from tessera._tensor_ops import TensorOps
    from tessera import _C
    if isinstance(x, (_C.Tensor, TensorOps)):
        return x
    from tessera._tensor import tensor
    return tensor(x)


def _positive(name, x):
    if not isinstance(x, numbers.Real) or isinstance(x, bool) or not (math.isfinite(x) and x > 0):
        raise ArgumentError(f"tessera.ops.flash_attn: {name} must be a positive finite float, got {x!r}")
    return float(x)


def flash_attn(q, k, v, causal: bool = False, scale=None, dropout: float = 0.0, key=None, *, descale=None,
               out_dtype=None):
    """Scaled dot-product attention, ``softmax(q k^T * scale) v`` per head.

    q is [B, Hq, Sq, D]; k and v are [B, Hkv, Sk, D] with Hq a multiple of Hkv (grouped-query
    attention: query head h reads key/value head h // (Hq // Hkv)). D is 64, 128 or 256.
    ``scale`` defaults to 1 / sqrt(D).

    ``causal``: query row i sees keys j <= i + (Sk - Sq), a mask aligned to the bottom-right corner
    of the [Sq, Sk] score matrix. With Sq == Sk that is the usual lower triangle; with Sq < Sk
    (decoding with a KV cache: the queries are the last Sq positions) the last query row sees every
    key. Sq > Sk with causal=True is an error: the first Sq - Sk rows would see no key.

    bf16/fp16 inputs accumulate in fp32 (the policy's accumulation type); the result has q's
    policy. The forward is an online softmax over the keys and never forms the [Sq, Sk] matrix.

    ``dropout`` drops each entry of the probability matrix with that probability (scaling the kept
    ones by 1 / (1 - dropout)) inside the kernels, with the mask drawn as ``tessera.ops.dropout``
    would draw it on the [B, Hq, Sq, Sk] matrix: entry n (row-major) is kept iff the Philox draw at
    counter ``key.offset + n`` is >= dropout. ``key`` is a ``tessera.ops.philox`` key and advances by
    B * Hq * Sq * Sk counters (``None``: a fresh ``philox(0)`` each call, the same mask every time).
    The backward redraws the same mask, so no mask is stored.

    fp8 (``fp8_e4m3``, ``fp8_e5m2``) inputs hold codes of per-tensor scaled values:
    ``descale=(dq, dk, dv)`` gives the factors that turn each input's codes back into values. The
    logits are ``q k^T * (scale * dq * dk)`` (the product formed in double, then rounded once to the
    accumulation type) and the result is ``(P v) * dv``, multiplied before its one rounding to
    ``out_dtype``. ``out_dtype`` (any float storage of a byte or more, or a policy) defaults to q's
    policy, or to ``bf16`` when q is fp8. A call with ``descale`` or ``out_dtype`` is forward-only:
    differentiating it raises.
    """
    if not isinstance(dropout, numbers.Real) or isinstance(dropout, bool) or not 0.0 <= dropout < 1.0:
        raise ArgumentError(f"tessera.ops.flash_attn: dropout must be a float in [0, 1), got {dropout!r}")
    q, k, v = _dense(q), _dense(k), _dense(v)
    for name, x in (("q", q), ("k", k), ("v", v)):
        if len(x.shape) != 4:
            raise ShapeError(f"tessera.ops.flash_attn: {name} must be [B, H, S, D], got {list(x.shape)}")
    d = q.shape[3]
    if isinstance(d, numbers.Integral) and d not in SUPPORTED_HEAD_DIMS:
        raise ShapeError(f"tessera.ops.flash_attn: head dim D is {d}; supported D are 64, 128 and 256")
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    if not isinstance(scale, numbers.Real) or isinstance(scale, bool) or not math.isfinite(scale):
        raise ArgumentError(f"tessera.ops.flash_attn: scale must be a finite float, got {scale!r}")
    v_scale = 1.0
    if descale is not None:
        if not isinstance(descale, (tuple, list)) or len(descale) != 3:
            raise ArgumentError(f"tessera.ops.flash_attn: descale must be (dq, dk, dv), got {descale!r}")
        dq_, dk_, v_scale = (_positive(n, x) for n, x in zip(("descale[0]", "descale[1]", "descale[2]"), descale))
        scale = float(scale) * dq_ * dk_
    if out_dtype is None and _storage(q.dtype).name.startswith("fp8"):
        out_dtype = "bf16"
    attrs = {"scale": float(scale), "causal": bool(causal)}
    if v_scale != 1.0:
        attrs["v_scale"] = v_scale
    if out_dtype is not None:
        attrs["out"] = str(out_dtype)
    if dropout == 0.0 and key is None:
        o, _lse = dispatch("graph.flash_attn", [q, k, v], attrs)
        return o
    # As tessera.ops.dropout: the key advances one counter per entry of the [B, Hq, Sq, Sk] matrix.
    from tessera.ops.random import _draw
    entries = (q.shape[0], q.shape[1], q.shape[2], k.shape[2])
    o, _lse = _draw("graph.flash_attn", [q, k, v], {**attrs, "dropout": float(dropout)}, key, entries, 1)
    return o
