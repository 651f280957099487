"""Dynamic loss scaling: GradScaler.

``scaler.scale(loss)`` gives the loss the policy modifier
``@loss_scale(scaler.scale_value)``; differentiating it seeds the backward
pass with that scale (small gradients in low-precision formats stay out of
the subnormal range) and divides the gradients by it at the end, so the
gradients returned are already unscaled. A backward pass that overflowed
returns inf/NaN gradients; ``scaler.step`` then skips the update and lowers
the scale (``backoff_factor``), and raises it (``growth_factor``) after
``growth_interval`` finite steps in a row.

    scaler = tessera.GradScaler()
    loss, grads = tessera.value_and_grad(lambda w: scaler.scale(loss_fn(w, x)))(w)
    w = scaler.step(lambda g: w - lr * g, grads) or w     # None when skipped
"""

from __future__ import annotations

import math

import numpy as np

from tessera import _C
from tessera.autodiff._tree import flatten
from tessera.errors import ArgumentError


class GradScaler:
    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
        if not (isinstance(init_scale, (int, float)) and math.isfinite(init_scale) and init_scale > 0):
            raise ArgumentError(f"GradScaler: init_scale must be a positive finite number, got {init_scale!r}")
        if not growth_factor > 1.0:
            raise ArgumentError(f"GradScaler: growth_factor must be > 1, got {growth_factor!r}")
        if not 0.0 < backoff_factor < 1.0:
            raise ArgumentError(f"GradScaler: backoff_factor must be in (0, 1), got {backoff_factor!r}")
        if not (isinstance(growth_interval, int) and growth_interval >= 1):
            raise ArgumentError(f"GradScaler: growth_interval must be a positive int, got {growth_interval!r}")
        self.scale_value = float(init_scale)
        self.growth_factor = float(growth_factor)
        self.backoff_factor = float(backoff_factor)
        self.growth_interval = growth_interval
        self.good_steps = 0  # finite steps since the last change of scale
        self.skipped_steps = 0

    def scale(self, loss):
        """``loss`` with the policy modifier @loss_scale(current scale) (values unchanged)."""
        from tessera import ops
        from tessera._dtypes import loss_scale
        return ops.cast(loss, loss.policy @ loss_scale(self.scale_value))

    @staticmethod
    def all_finite(grads):
        """Whether every element of every tensor in the pytree ``grads`` is finite."""
        for g in flatten(grads)[0]:
            if g is None:
                continue
            if not isinstance(g, _C.Tensor):
                raise ArgumentError("GradScaler.step takes tensors (it decides on their values, so it runs outside "
                                    f"@jit); got {type(g).__name__}")
            if not np.all(np.isfinite(np.asarray(g.numpy(), dtype=np.float64))):
                return False
        return True

    def update(self, found_inf):
        """Adjusts the scale after a step: backoff on overflow, growth after growth_interval good steps."""
        if found_inf:
            self.scale_value *= self.backoff_factor
            self.good_steps = 0
            self.skipped_steps += 1
        else:
            self.good_steps += 1
            if self.good_steps >= self.growth_interval:
                grown = self.scale_value * self.growth_factor
                if math.isfinite(grown):
                    self.scale_value = grown
                self.good_steps = 0

    def step(self, optimizer_or_grads, grads=None):
        """``step(optimizer_fn, grads)``: calls ``optimizer_fn(grads)`` and returns its result when every
        gradient is finite, else skips it and returns None; ``step(grads)`` returns grads or None. Either
        way the scale is updated."""
        if grads is None:
            fn, grads = None, optimizer_or_grads
        else:
            fn = optimizer_or_grads
            if not callable(fn):
                raise ArgumentError("GradScaler.step(optimizer_fn, grads): optimizer_fn must be callable")
        finite = self.all_finite(grads)
        self.update(not finite)
        if not finite:
            return None
        return fn(grads) if fn is not None else grads

    def __repr__(self):
        return (f"GradScaler(scale={self.scale_value}, good_steps={self.good_steps}, "
                f"skipped_steps={self.skipped_steps})")
