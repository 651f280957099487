"""``tessera.autodiff``: differentiation as transforms on Graph IR functions.

grad, value_and_grad, vjp, jvp, jacfwd, jacrev and hvp follow JAX's calling
conventions and compose (grad(grad(f)), jvp(grad(f)), jacfwd(jacrev(f))); they
work on tensors, inside @tessera.jit and on @jit functions. custom_vjp /
custom_jvp define a function's derivative, register_vjp / register_jvp an op's;
checkpoint recomputes a region in the backward pass; GradScaler does dynamic
loss scaling. See docs/guide/autodiff.md.
"""

from tessera.autodiff.custom import checkpoint, custom_jvp, custom_vjp, rematerialize, stop_gradient
from tessera.autodiff.rules import has_jvp, has_vjp, register_jvp, register_vjp
from tessera.autodiff.scaler import GradScaler
from tessera.autodiff.transforms import grad, hvp, jacfwd, jacrev, jvp, value_and_grad, vjp

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "jacfwd", "jacrev", "hvp", "custom_vjp", "custom_jvp",
           "checkpoint", "rematerialize", "stop_gradient", "register_vjp", "register_jvp", "has_vjp", "has_jvp",
           "GradScaler"]
