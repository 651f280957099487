"""User-defined derivatives and checkpointing: custom_vjp, custom_jvp, checkpoint, stop_gradient.

A custom_vjp/custom_jvp function or a checkpointed one records, when traced,
one ``call`` op naming a function of the module traced from its Python body,
with attributes naming its rule functions (``custom_vjp_fwd`` and
``custom_vjp_bwd``, ``custom_jvp``) or ``remat = true``; the transforms read
those. Called on tensors outside any transform it simply runs its body.
"""

from __future__ import annotations

import functools

from tessera._trace import active
from tessera.autodiff._stage import ArgSpec, fun_name, is_array, stage, tangent_policy
from tessera.autodiff._tree import flatten, tree_map
from tessera.errors import ArgumentError, CompileError

__all__ = ["custom_vjp", "custom_jvp", "checkpoint", "rematerialize", "stop_gradient"]


def _no_captures(staged, owner, role):
    if staged.captures:
        raise CompileError(f"{role} of custom-derivative function {owner}() uses a traced value from an enclosing "
                           "function (a closure); pass it as an argument instead")


def _array_args(args, owner, kind):
    leaves, _ = flatten(tuple(args))
    for x in leaves:
        if not is_array(x):
            raise ArgumentError(f"{kind} function {owner}() takes tensors (or tuples/lists/dicts of them); got "
                                f"a {type(x).__name__}: bind other values with a closure or functools.partial")


def _cast_to(x, policy):
    from tessera import ops
    return x if x.policy == policy else ops.cast(x, policy)


class _CustomDerivative:
    """What custom_vjp and custom_jvp share: calling the function runs its body
    on tensors (and while its own rules are being traced), and records one
    ``call`` op with the rule attributes when traced."""

    kind = ""        # "custom_vjp" / "custom_jvp"
    define_hint = ""  # how to give the rule, for the error when it is missing

    def __init__(self, fun):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self._tracing_rules = 0  # while its rules are traced, calls of the function run its body

    rule_attr = ""  # the attribute that holds the rule once given

    def __call__(self, *args):
        name = fun_name(self.fun)
        if getattr(self, self.rule_attr) is None:
            raise ArgumentError(f"{self.kind} function {name}() has no rule: call {name}.{self.define_hint} first")
        ctx = active()
        if ctx is None or self._tracing_rules:
            return self.fun(*args)
        self._tracing_rules += 1
        try:
            return self._record(ctx, name, args)
        finally:
            self._tracing_rules -= 1


class custom_vjp(_CustomDerivative):  # noqa: N801 (spelled as the transform)
    """``@custom_vjp`` def f(...); ``f.defvjp(fwd, bwd)`` with ``fwd(*args) -> (out, residuals)`` and
    ``bwd(residuals, cotangent_of_out) -> tuple`` of one cotangent per argument (None for zero)."""

    kind = "custom_vjp"
    define_hint = "defvjp(fwd, bwd)"
    rule_attr = "fwd"

    def __init__(self, fun):
        super().__init__(fun)
        self.fwd = None
        self.bwd = None

    def defvjp(self, fwd, bwd):
        self.fwd, self.bwd = fwd, bwd
        return self

    def _record(self, ctx, name, args):
        _array_args(args, name, "custom_vjp")
        primal = stage(self.fun, args, name=name)
        _no_captures(primal, name, "the body")
        n_out = len(primal.out_types)

        def fwd_output(out):
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise ArgumentError(f"the fwd rule of {name}() must return a pair (output, residuals)")
            res_leaves, res_tree = flatten(out[1])
            fwd_output.res_tree = res_tree
            out_leaves, out_tree = flatten(out[0])
            if out_tree != primal.out_tree:
                raise ArgumentError(f"the fwd rule of {name}() returns an output of structure {out_tree!r}; "
                                    f"{name}() returns {primal.out_tree!r}")
            return tuple(out_leaves) + tuple(res_leaves)

        fwd = stage(self.fwd, args, name=name + "_fwd", output=fwd_output)
        _no_captures(fwd, name, "the fwd rule")
        res_types = fwd.out_types[n_out:]
        ct_types = [(dims, tangent_policy(p)) for dims, p in primal.out_types]
        param_types = primal.param_types
        bwd_user = self.bwd
        n_res = len(res_types)
        res_tree = fwd_output.res_tree

        def bwd_flat(*flat):
            res = res_tree.unflatten(flat[:n_res])
            ct = primal.out_tree.unflatten(flat[n_res:])
            out = bwd_user(res, ct)
            if not isinstance(out, (tuple, list)) or len(out) != len(args):
                raise ArgumentError(f"the bwd rule of {name}() must return a tuple of {len(args)} cotangent(s), "
                                    "one per argument")
            leaves = []
            for i, (a, g) in enumerate(zip(args, out)):
                a_leaves, a_tree = flatten(a)
                if g is None:
                    leaves.extend([None] * len(a_leaves))
                    continue
                g_leaves, g_tree = flatten(g)
                if g_tree != a_tree:
                    raise ArgumentError(f"the bwd rule of {name}() returned cotangent {i} of structure {g_tree!r}; "
                                        f"argument {i} has structure {a_tree!r}")
                leaves.extend(g_leaves)
            from tessera import ops
            result = []
            for g, (dims, policy) in zip(leaves, param_types):
                want = tangent_policy(policy)
                result.append(ops.zeros(tuple(dims), dtype=want) if g is None else _cast_to(g, want))
            return tuple(result)

        bwd = stage(bwd_flat, tuple(ArgSpec(d, p) for d, p in list(res_types) + ct_types), name=name + "_bwd")
        outs = ctx.call(primal.name, primal.params, {"custom_vjp_fwd": fwd.name, "custom_vjp_bwd": bwd.name})
        return primal.out_tree.unflatten(outs)


class custom_jvp(_CustomDerivative):  # noqa: N801
    """``@custom_jvp`` def f(...); ``f.defjvp(rule)`` with ``rule(primals, tangents) -> (out, tangent_out)``
    (primals and tangents: tuples of the arguments and their tangents)."""

    kind = "custom_jvp"
    define_hint = "defjvp(rule)"
    rule_attr = "rule"

    def __init__(self, fun):
        super().__init__(fun)
        self.rule = None

    def defjvp(self, rule):
        self.rule = rule
        return rule

    def _record(self, ctx, name, args):
        _array_args(args, name, "custom_jvp")
        primal = stage(self.fun, args, name=name)
        _no_captures(primal, name, "the body")
        param_types = primal.param_types
        t_types = [(dims, tangent_policy(p)) for dims, p in param_types]
        _, in_tree = flatten(tuple(args))
        rule = self.rule
        n = len(param_types)
        out_t_types = [(dims, tangent_policy(p)) for dims, p in primal.out_types]

        def jvp_flat(*flat):
            primals = in_tree.unflatten(flat[:n])
            tangents = in_tree.unflatten(flat[n:])
            out = rule(tuple(primals), tuple(tangents))
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise ArgumentError(f"the jvp rule of {name}() must return a pair (output, tangent_of_output)")
            o_leaves, o_tree = flatten(out[0])
            t_leaves, t_tree = flatten(out[1])
            if o_tree != primal.out_tree or t_tree != primal.out_tree:
                raise ArgumentError(f"the jvp rule of {name}() returns structures {o_tree!r} and {t_tree!r}; "
                                    f"{name}() returns {primal.out_tree!r}")
            return tuple(o_leaves) + tuple(_cast_to(t, p) for t, (_, p) in zip(t_leaves, out_t_types))

        jvp_fn = stage(jvp_flat, tuple(ArgSpec(d, p) for d, p in list(param_types) + t_types),
                       name=name + "_jvp_rule")
        outs = ctx.call(primal.name, primal.params, {"custom_jvp": jvp_fn.name})
        return primal.out_tree.unflatten(outs)


def checkpoint(fun):
    """``checkpoint(f)``: the same function, whose intermediates the backward pass recomputes from
    its inputs instead of keeping them (a ``call {remat = true}`` in Graph IR)."""
    name = fun_name(fun)

    @functools.wraps(fun)
    def remat_fun(*args, **kwargs):
        ctx = active()
        if ctx is None:
            return fun(*args, **kwargs)
        staged = stage(fun, args, kwargs, name=name + "_remat")
        outs = ctx.call(staged.name, staged.inputs, {"remat": True})
        return staged.out_tree.unflatten(outs)

    return remat_fun


rematerialize = checkpoint


def stop_gradient(x):
    """``x`` unchanged, with a zero derivative (every tensor leaf of a pytree)."""
    from tessera.ops._dispatch import dispatch
    return tree_map(lambda v: dispatch("graph.stop_gradient", [v], {}), x)
