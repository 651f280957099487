"""Staging: a Python function traced into a Graph IR function, then transformed and run.

Every transform follows the same path. ``stage`` traces the user function
into a new function of a module: a fresh module when called on tensors
(eager), or the enclosing trace's module when a trace is active (inside
@jit, or inside another transform). Tensor leaves of the arguments become
parameters; other leaves (ints, strings, ...) are static Python values. A
traced value of an enclosing trace that the function uses (a closure)
becomes an extra parameter, a capture, passed in at the call site. The C++
transform (vjp/jvp/value_and_grad) then adds the derived function to the
module, and ``run`` executes it on the reference executor (eager) or splices
a copy into the active trace. Splicing is what makes transforms compose:
grad(grad(f)) traces grad(f), whose body is the spliced gradient of f.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from tessera import _C
from tessera._trace import TraceContext, Tracer, active
from tessera.autodiff._tree import flatten
from tessera.errors import ArgumentError, CompileError


class ArgSpec:
    """A parameter known only by its dims and policy: traced functions whose arguments do not exist yet
    (a custom rule's residuals and cotangents) are staged with these."""

    __slots__ = ("shape", "policy")

    def __init__(self, dims, policy):
        self.shape = tuple(dims)
        self.policy = policy


def is_array(x):
    return isinstance(x, (Tracer, _C.Tensor, np.ndarray, ArgSpec)) or (isinstance(x, float))


def as_array(x):
    """A tensor or tracer for an array leaf (numpy arrays convert as tessera.tensor does; floats are
    rank-0 fp32 tensors)."""
    if isinstance(x, (Tracer, _C.Tensor, ArgSpec)):
        return x
    from tessera._tensor import tensor
    if isinstance(x, float):
        return tensor(x, dtype="fp32")
    return tensor(x)


def tangent_policy(policy):
    """The policy tangents and cotangents of a value of ``policy`` have: fp64 for fp64 storage,
    fp32 for every other format (the unused slot of an integer value included)."""
    return _C.Policy(_C.dtype("fp64" if policy.storage.name == "fp64" else "fp32"))


def has_derivative(policy):
    return policy.storage.is_float


def fun_name(fun):
    name = getattr(fun, "__name__", None) or type(fun).__name__
    return name if name.isidentifier() else "lambda"


class Staged:
    """A function traced into ``module`` as function ``name``.

    ``leaves``/``in_tree``: the flattened arguments; ``param_positions``: the leaves that are
    parameters, in parameter order; ``params``: their values at the call; ``captures``: values of
    enclosing traces appended as further parameters; ``out_tree``/``out_types``: the results."""

    def __init__(self, module, name, leaves, in_tree, param_positions, params, captures, out_tree, out_types):
        self.module = module
        self.name = name
        self.leaves = leaves
        self.in_tree = in_tree
        self.param_positions = param_positions
        self.params = params
        self.captures = captures
        self.out_tree = out_tree
        self.out_types = out_types

    @property
    def inputs(self):
        """What to pass for the function's parameters: the arguments' tensors, then the captures."""
        return list(self.params) + list(self.captures)

    @property
    def param_types(self):
        return self.module.signature(self.name)[0]

    def discard(self, *names):
        """Drops functions spliced into the active trace that nothing refers to any more."""
        if active() is not None:
            self.module.drop_unreferenced([self.name, *names])


def flatten_args(args):
    """-> (leaves, in_tree, arg_of_leaf): leaves of the positional arguments and, per leaf, the
    argument it belongs to."""
    leaves, arg_of = [], []
    for i, a in enumerate(args):
        sub, _ = flatten(a)
        leaves.extend(sub)
        arg_of.extend([i] * len(sub))
    _, in_tree = flatten(tuple(args))
    return leaves, in_tree, arg_of


def stage(fun, args, kwargs=None, name=None, output=None):
    """Traces ``fun(*args, **kwargs)`` into a new function. ``output`` maps the function's return
    value to the pytree of results recorded (default: as returned). Arguments may be ArgSpecs
    (functions traced before values exist)."""
    kwargs = kwargs or {}
    leaves, in_tree, _ = flatten_args(args)
    positions = [i for i, x in enumerate(leaves) if is_array(x)]
    params = [as_array(leaves[i]) for i in positions]
    parent = active()
    base = name or fun_name(fun)
    ctx = TraceContext(base) if parent is None else TraceContext(parent.builder.module.new_name(base), parent)
    with ctx:
        new_leaves = list(leaves)
        for k, (i, p) in enumerate(zip(positions, params)):
            new_leaves[i] = ctx.argument(p.shape, p.policy, f"a{k}")
        out = fun(*in_tree.unflatten(new_leaves), **kwargs)
        if output is not None:
            out = output(out)
        out_leaves, out_tree = flatten(out)
        ids = []
        for leaf in out_leaves:
            if not (is_array(leaf) or isinstance(leaf, numbers.Number)):
                raise ArgumentError(f"{base}() returned a {type(leaf).__name__} where a tensor was expected "
                                    "(transformed functions return tensors, or tuples/lists/dicts of them)")
            ids.append(ctx.value_id(as_array(leaf) if isinstance(leaf, np.ndarray) else leaf))
        ctx.builder.finish_function(ids)
    module = ctx.builder.module
    fname = ctx.builder.name
    captures = [outer for outer, _ in ctx.captures]
    out_types = module.signature(fname)[1]
    return Staged(module, fname, leaves, in_tree, positions, params, captures, out_tree, out_types)


def run(module, fname, inputs, wanted=None):
    """Runs function ``fname`` of ``module`` on ``inputs`` (tensors, tracers, numbers): executes it when
    no trace is active, else splices a copy into the active trace. Returns the list of results.
    ``wanted`` (one flag per result): an execution computes only those results and the ops they
    need, and the others come back as None (a trace keeps them all; the compiler drops what
    nothing reads)."""
    ctx = active()
    if ctx is not None:
        if ctx.builder.module.key != module.key:
            raise CompileError("a function transformed outside this trace (for example the vjp_fn returned by "
                               "tessera.vjp on tensors) cannot be called on traced values; call the transform "
                               "inside the traced function")
        return ctx.splice(fname, inputs)
    param_types = module.signature(fname)[0]
    tensors = []
    for x, (_, policy) in zip(inputs, param_types):
        if isinstance(x, Tracer):
            from tessera._trace import leaked_tracer_error
            raise leaked_tracer_error(x)
        tensors.append(_convert(x, policy))
    results = _execute(module, fname, tensors, wanted)
    if wanted is None:
        return results
    got = iter(results)
    return [next(got) if w else None for w in wanted]


def _execute(module, fname, tensors, wanted=None):
    """Runs a staged function outside any trace (eager tessera.grad, vjp, jvp, ...) as eager ops run:
    op by op on cached, shape-generic compiled kernels on the device of its tensors (all on one
    device), the way an eager framework runs autograd; @jit of the transform fuses and compiles the
    whole function instead. TESSERA_EAGER (or else TESSERA_BACKEND) = reference selects the
    reference executor, as for eager ops; a host op no template covers runs there and says so."""
    from tessera._tensor import one_device
    device = one_device(((f"input {i}", t) for i, t in enumerate(tensors)), fname)
    if device != "cpu" or _C.eager_backend() == "compiled":
        results, no_kernel = module.execute_eager(fname, tensors, list(wanted or []))
        if no_kernel:
            import warnings
            from tessera.errors import ReferenceExecutorWarning
            warnings.warn(f"{fname}: {len(no_kernel)} op(s) ran on the reference executor, no compiled kernel "
                          f"covers {no_kernel[0]} (set TESSERA_EAGER=reference to choose that executor and "
                          "silence this)", ReferenceExecutorWarning, stacklevel=4)
        return list(results)
    return list(module.execute(fname, tensors, list(wanted or [])))


def _convert(x, policy):
    from tessera import ops
    from tessera._tensor import tensor
    if isinstance(x, _C.Tensor):
        return x if x.policy == policy else ops.cast(x, policy)
    return tensor(x, dtype=policy)


def zeros(dims, policy):
    """Zeros of (dims, policy) in the active trace, or a tensor when none is."""
    if all(isinstance(d, int) for d in dims) and active() is None:
        from tessera._tensor import tensor
        return tensor(np.zeros(tuple(dims)), dtype=policy)
    from tessera import ops
    return ops.zeros(tuple(dims), dtype=policy)


def static_size(dims, what):
    if not all(isinstance(d, int) for d in dims):
        raise CompileError(f"{what} needs static sizes, but the value has shape {tuple(dims)} with symbolic dims")
    return math.prod(dims)


def normalize_argnums(argnums, nargs, name, transform):
    """-> (tuple of non-negative argnums, whether argnums was a single int)."""
    single = isinstance(argnums, int) and not isinstance(argnums, bool)
    nums = (argnums,) if single else argnums
    if not isinstance(nums, (tuple, list)) or not nums or not all(
            isinstance(a, int) and not isinstance(a, bool) for a in nums):
        raise ArgumentError(f"{transform}: argnums must be an int or a non-empty tuple of ints, got {argnums!r}")
    out = []
    for a in nums:
        if not -nargs <= a < nargs:
            raise ArgumentError(f"{transform}: argnums {a} is out of range: {name}() was called with {nargs} "
                                f"positional argument{'s' if nargs != 1 else ''}")
        a = a % nargs
        if a in out:
            raise ArgumentError(f"{transform}: argnums {tuple(nums)} names argument {a} twice")
        out.append(a)
    return tuple(out), single
