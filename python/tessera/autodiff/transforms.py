"""The function transforms: grad, value_and_grad, vjp, jvp, jacfwd, jacrev, hvp.

Calling conventions are JAX's. Each works on tensors (eager: the derived
Graph IR function runs on the reference executor), inside @tessera.jit and
inside other transforms (the derived function is spliced into the enclosing
trace), and on @jit functions (their Python body is traced).
"""

from __future__ import annotations

import functools

import numpy as np

from tessera import _C
from tessera._trace import active
from tessera.autodiff._stage import (has_derivative, normalize_argnums, run, stage, static_size, tangent_policy,
                                     zeros, fun_name, flatten_args)
from tessera.autodiff._tree import flatten
from tessera.errors import ArgumentError, CompileError, DtypeError, PrivilegeError, ShapeError
from tessera.region import parameter_name, privileges

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "jacfwd", "jacrev", "hvp"]


def _split_aux(has_aux, name, transform):
    if not has_aux:
        return None

    def output(out):
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise ArgumentError(f"{transform}(..., has_aux=True): {name}() must return a pair (output, aux), "
                                f"got {type(out).__name__}")
        return out
    return output


def _wrt(staged, arg_of, argnums):
    """Parameter indices (and their leaf positions) of the leaves of the arguments in ``argnums``."""
    return [k for k, pos in enumerate(staged.param_positions) if arg_of[pos] in argnums]


def _check_region_privileges(fun, argnums, accumulate, transform):
    regions = privileges(fun)
    name = fun_name(fun)
    for a in argnums:
        if regions.get(a) == "write":
            raise PrivilegeError(f"{transform}: parameter '{parameter_name(fun, a)}' of {name}() is "
                                 "Region['write']: its incoming value is never read, so it has no gradient")
    for key, buf in (accumulate or {}).items():
        if not isinstance(key, int) or key not in argnums:
            raise ArgumentError(f"{transform}: accumulate key {key!r} is not one of argnums {tuple(argnums)}")
        if regions.get(key) != "reduce_sum":
            raise PrivilegeError(f"{transform}: parameter '{parameter_name(fun, key)}' of {name}() is not annotated "
                                 "tessera.Region['reduce_sum']; accumulating its gradient with += needs that privilege")
        if not isinstance(buf, _C.Tensor) or buf.policy.storage.name not in ("fp32", "fp64"):
            raise DtypeError(f"{transform}: the accumulator for argument {key} must be an fp32 or fp64 tensor "
                             "(gradients are carried at fp32, or fp64 for fp64 values)")


def _accumulate(grads_per_arg, argnums, accumulate, transform):
    """Adds each gradient into its accumulator in place (+=) and returns the accumulated values."""
    if not accumulate:
        return grads_per_arg
    if active() is not None:
        raise CompileError(f"{transform}(..., accumulate=...) updates its buffers in place, which only eager calls "
                           "can do; inside @jit add the gradient to an accumulator passed as an argument")
    from tessera import ops
    out = list(grads_per_arg)
    for i, a in enumerate(argnums):
        buf = accumulate.get(a)
        if buf is None:
            continue
        g = out[i]
        if not isinstance(g, _C.Tensor) or tuple(g.shape) != tuple(buf.shape):
            raise ShapeError(f"{transform}: the accumulator for argument {a} has shape {tuple(buf.shape)}, the "
                             f"gradient {tuple(getattr(g, 'shape', ()))}")
        total = ops.add(buf, ops.cast(g, buf.policy))
        view = buf.numpy()
        view[...] = total.numpy()
        out[i] = buf
    return out


_PRECISIONS = ("full", "storage")


def _check_precision(precision, transform):
    if precision not in _PRECISIONS:
        raise ArgumentError(f"{transform}: precision must be 'full' (derivatives at fp32, fp64 for fp64 values) or "
                            f"'storage' (bf16/fp16 values keep their format), got {precision!r}")


def value_and_grad(fun, argnums=0, has_aux=False, *, accumulate=None, precision="full"):
    """``value_and_grad(f)(*args)`` -> ``(f(*args), df/dargs[argnums])`` (``((out, aux), grads)`` with
    has_aux). ``f`` returns one rank-0 float tensor. Gradients have their argument's structure and shape,
    at fp32 (fp64 for fp64 arguments). ``precision="storage"`` carries the derivatives of bf16 and fp16
    values in their own format instead (fp32 accumulation inside each op, one rounding per result; formats
    narrower than 16 bits take bf16), as mixed-precision training elsewhere does: the backward products
    of a bf16 layer are bf16 products. ``accumulate={argnum: buffer}``: for parameters annotated
    ``tessera.Region["reduce_sum"]``, each call adds the gradient into ``buffer`` in place (+=) and
    returns the buffer as that argument's gradient."""
    return _value_and_grad(fun, argnums, has_aux, accumulate, precision, want_value=True)


def _value_and_grad(fun, argnums, has_aux, accumulate, precision, want_value):
    """value_and_grad; without ``want_value`` (grad), an eager call leaves the value out: the loss and
    the forward ops only it needs are not run. (A traced call keeps it; the compiler drops it.)"""
    name = fun_name(fun)
    _check_precision(precision, "value_and_grad")

    @functools.wraps(fun)
    def value_and_grad_fun(*args, **kwargs):
        nums, single = normalize_argnums(argnums, len(args), name, "value_and_grad")
        _check_region_privileges(fun, nums, accumulate, "value_and_grad")
        leaves, _, arg_of = flatten_args(args)
        for a in nums:
            sub = flatten(args[a])[0]
            if not sub or not all(_is_tensor_like(x) for x in sub):
                raise ArgumentError(f"value_and_grad: argument {a} of {name}() is "
                                    f"{type(args[a]).__name__}; differentiated arguments must be tensors "
                                    "(or tuples/lists/dicts of tensors)")
        st = stage(fun, args, kwargs, output=_split_aux(has_aux, name, "grad"))
        main = st.out_tree.children[0] if has_aux else st.out_tree
        if main.num_leaves != 1 or main.kind != "leaf":
            raise ShapeError(f"grad: {name}() must return a single rank-0 tensor (a loss), got {main!r}")
        dims, policy = st.out_types[0]
        if len(dims) != 0:
            raise ShapeError(f"grad requires a scalar (rank-0) output: {name}() returned shape {tuple(dims)}; "
                             "use tessera.vjp or tessera.jacrev for non-scalar outputs")
        if not has_derivative(policy):
            raise DtypeError(f"grad requires a float output: {name}() returned {policy}")
        wrt = _wrt(st, arg_of, nums)
        if not has_aux:
            g = st.module.value_and_grad(st.name, wrt, st.module.new_name(st.name + "_grad"), precision)
            n_results = len(st.module.signature(g)[1])
            res = run(st.module, g, st.inputs, None if want_value else [False] + [True] * (n_results - 1))
            value, grads = res[0], res[1:]
            aux = None
        else:
            # The aux outputs ride along with zero cotangents; the loss seed is its loss scale, undone after.
            g = st.module.vjp(st.name, wrt, st.module.new_name(st.name + "_vjp"), precision)
            seed_types = st.module.signature(g)[0][len(st.inputs):]
            scale = policy.loss_scale or 1.0
            seeds = [_full((), seed_types[0][1], scale)] + [zeros(d, p) for d, p in seed_types[1:]]
            res = run(st.module, g, st.inputs + seeds)
            n_out = len(st.out_types)
            value = res[0]
            aux = st.out_tree.children[1].unflatten(res[1:n_out])
            grads = res[n_out:]
            if scale != 1.0:
                from tessera import ops
                grads = [ops.div(x, scale) for x in grads]
        st.discard(g)
        per_arg = _regroup(grads, wrt, st, arg_of, nums, args)
        per_arg = _accumulate(per_arg, nums, accumulate, "value_and_grad")
        out_grads = per_arg[0] if single else tuple(per_arg)
        return ((value, aux), out_grads) if has_aux else (value, out_grads)

    return value_and_grad_fun


def grad(fun, argnums=0, has_aux=False, *, accumulate=None, precision="full"):
    """``grad(f)(*args)`` -> df/dargs[argnums] (``(grads, aux)`` with has_aux); see value_and_grad."""
    vg = _value_and_grad(fun, argnums, has_aux, accumulate, precision, want_value=False)

    @functools.wraps(fun)
    def grad_fun(*args, **kwargs):
        out, grads = vg(*args, **kwargs)
        return (grads, out[1]) if has_aux else grads

    return grad_fun


def _is_tensor_like(x):
    from tessera._trace import Tracer
    return isinstance(x, (Tracer, _C.Tensor, np.ndarray, float))


def _full(dims, policy, value):
    from tessera import ops
    if active() is None:
        from tessera._tensor import tensor
        return tensor(np.full(tuple(dims), value), dtype=policy)
    return ops.full(tuple(dims), value, dtype=policy)


def _regroup(grads, wrt, st, arg_of, nums, args):
    """Gradients of parameters ``wrt`` -> one pytree per argument in ``nums`` (its structure)."""
    by_leaf = {st.param_positions[k]: g for k, g in zip(wrt, grads)}
    out = []
    for a in nums:
        positions = [i for i, owner in enumerate(arg_of) if owner == a]
        _, tree = flatten(args[a])
        out.append(tree.unflatten([by_leaf.get(i) for i in positions]))
    return out


def vjp(fun, *primals, has_aux=False, precision="full"):
    """``vjp(f, *primals)`` -> ``(out, vjp_fn)`` (``(out, vjp_fn, aux)`` with has_aux), where
    ``vjp_fn(cotangent)`` (cotangent: out's structure) returns one cotangent per primal; ``precision`` as
    in value_and_grad."""
    name = fun_name(fun)
    _check_precision(precision, "vjp")
    st = stage(fun, primals, output=_split_aux(has_aux, name, "vjp"))
    leaves, _, arg_of = flatten_args(primals)
    wrt = list(range(len(st.param_positions)))
    v = st.module.vjp(st.name, wrt, st.module.new_name(st.name + "_vjp"), precision)
    res = run(st.module, st.name, st.inputs)
    main = st.out_tree.children[0] if has_aux else st.out_tree
    n_main = main.num_leaves
    out = main.unflatten(res[:n_main])
    seed_types = st.module.signature(v)[0][len(st.inputs):]

    def vjp_fn(cotangent):
        ct_leaves, ct_tree = flatten(cotangent)
        if ct_tree != main:
            raise ArgumentError(f"vjp_fn: the cotangent must have the output's structure {main!r}, got {ct_tree!r}")
        for i, (c, (dims, _)) in enumerate(zip(ct_leaves, seed_types)):
            if tuple(getattr(c, "shape", ())) != tuple(dims):
                raise ShapeError(f"vjp_fn: cotangent {i} has shape {tuple(getattr(c, 'shape', ()))}, the output "
                                 f"has shape {tuple(dims)}")
        seeds = list(ct_leaves) + [zeros(d, p) for d, p in seed_types[n_main:]]
        r = run(st.module, v, st.inputs + seeds)
        grads = r[len(st.out_types):]
        return tuple(_regroup(grads, wrt, st, arg_of, range(len(primals)), primals))

    if has_aux:
        return out, vjp_fn, st.out_tree.children[1].unflatten(res[n_main:])
    return out, vjp_fn


def jvp(fun, primals, tangents):
    """``jvp(f, primals, tangents)`` -> ``(f(*primals), tangent of the output)``; primals and tangents
    are tuples (or lists) of the same structure."""
    name = fun_name(fun)
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise ArgumentError("jvp(f, primals, tangents): primals and tangents must be tuples or lists")
    if len(primals) != len(tangents):
        raise ArgumentError(f"jvp: {len(primals)} primals but {len(tangents)} tangents")
    st = stage(fun, tuple(primals))
    t_leaves = []
    for i, (p, t) in enumerate(zip(primals, tangents)):
        pl, ptree = flatten(p)
        tl, ttree = flatten(t)
        if ptree != ttree:
            raise ArgumentError(f"jvp: tangent {i} has structure {ttree!r}, its primal {ptree!r}")
        for x, tx in zip(pl, tl):
            if tuple(getattr(x, "shape", ())) != tuple(getattr(tx, "shape", ())):
                raise ShapeError(f"jvp: tangent {i} has shape {tuple(getattr(tx, 'shape', ()))}, its primal "
                                 f"{tuple(getattr(x, 'shape', ()))}")
        t_leaves.extend(tl)
    return _run_jvp(st, [t_leaves[i] for i in st.param_positions])


def _run_jvp(st, param_tangents, jname=None):
    j = jname or st.module.jvp(st.name, st.module.new_name(st.name + "_jvp"))
    types = st.module.signature(j)[0]
    cap_tangents = [zeros(d, p) for d, p in types[len(st.inputs) + len(param_tangents):]]
    res = run(st.module, j, st.inputs + list(param_tangents) + cap_tangents)
    n = len(st.out_types)
    if jname is None:
        st.discard(j)
    return st.out_tree.unflatten(res[:n]), st.out_tree.unflatten(res[n:])


def _single_tensor_args(args, nums, name, transform):
    for a in nums:
        if not _is_tensor_like(args[a]):
            raise ArgumentError(f"{transform}: argument {a} of {name}() must be a tensor, got {type(args[a]).__name__}")


def _one_hot(k, dims, policy):
    basis = np.zeros(int(np.prod(dims)))
    basis[k] = 1.0
    from tessera._tensor import tensor
    return tensor(basis.reshape(tuple(dims)), dtype=policy)


def _stack(pieces, lead_dims, tail_dims):
    """Tensors of shape tail_dims, one per element of lead_dims (row-major) -> lead_dims + tail_dims."""
    from tessera import ops
    rows = [ops.reshape(p, (1,) + tuple(tail_dims)) for p in pieces]
    whole = rows[0] if len(rows) == 1 else ops.concat(rows, axis=0)
    return ops.reshape(whole, tuple(lead_dims) + tuple(tail_dims))


def jacfwd(fun, argnums=0):
    """The Jacobian by forward mode: one JVP per input element. For an output of shape S and an input
    of shape T the result has shape S + T (a tuple over argnums when argnums is a tuple; the output's
    structure when f returns several tensors)."""
    name = fun_name(fun)

    @functools.wraps(fun)
    def jac_fun(*args):
        from tessera import ops
        nums, single = normalize_argnums(argnums, len(args), name, "jacfwd")
        _single_tensor_args(args, nums, name, "jacfwd")
        st = stage(fun, args)
        _, _, arg_of = flatten_args(args)
        j = st.module.jvp(st.name, st.module.new_name(st.name + "_jvp"))
        in_types = st.param_types
        zero_t = [zeros(d, tangent_policy(p)) for d, p in in_types[:len(st.params)]]
        out_types = st.out_types
        per_arg = []
        for a in nums:
            k = next(i for i, pos in enumerate(st.param_positions) if arg_of[pos] == a)
            dims, policy = in_types[k]
            n = static_size(dims, "jacfwd")
            cols = [[] for _ in out_types]
            for e in range(n):
                tangents = list(zero_t)
                tangents[k] = _one_hot(e, dims, tangent_policy(policy))
                _, tout = _run_jvp(st, tangents, j)
                for o, t in enumerate(flatten(tout)[0]):
                    cols[o].append(t)
            jac = []
            for o, (odims, _) in enumerate(out_types):
                stacked = _stack(cols[o], dims, odims)  # T + S
                perm = list(range(len(dims), len(dims) + len(odims))) + list(range(len(dims)))
                jac.append(ops.transpose(stacked, perm) if perm != sorted(perm) else stacked)
            per_arg.append(jac)
        st.discard(j)
        return _jac_result(st.out_tree, per_arg, single)

    return jac_fun


def _jac_result(out_tree, per_arg, single):
    n_out = out_tree.num_leaves
    leaves = []
    for o in range(n_out):
        leaves.append(per_arg[0][o] if single else tuple(pa[o] for pa in per_arg))
    return out_tree.unflatten(leaves)


def jacrev(fun, argnums=0):
    """The Jacobian by reverse mode: one VJP per output element; shapes as jacfwd."""
    name = fun_name(fun)

    @functools.wraps(fun)
    def jac_fun(*args):
        nums, single = normalize_argnums(argnums, len(args), name, "jacrev")
        _single_tensor_args(args, nums, name, "jacrev")
        st = stage(fun, args)
        _, _, arg_of = flatten_args(args)
        wrt = _wrt(st, arg_of, nums)
        params_of = [next(k for k in wrt if arg_of[st.param_positions[k]] == a) for a in nums]
        v = st.module.vjp(st.name, wrt, st.module.new_name(st.name + "_vjp"))
        seed_types = st.module.signature(v)[0][len(st.inputs):]
        in_types = st.param_types
        zero_seeds = [zeros(d, p) for d, p in seed_types]
        per_arg = [[] for _ in nums]
        for o, (odims, _) in enumerate(st.out_types):
            n = static_size(odims, "jacrev")
            rows = [[] for _ in nums]
            for e in range(n):
                seeds = list(zero_seeds)
                seeds[o] = _one_hot(e, odims, seed_types[o][1])
                r = run(st.module, v, st.inputs + seeds)
                grads = r[len(st.out_types):]
                for i, k in enumerate(params_of):
                    rows[i].append(grads[wrt.index(k)])
            for i, k in enumerate(params_of):
                per_arg[i].append(_stack(rows[i], odims, in_types[k][0]))
        st.discard(v)
        return _jac_result(st.out_tree, [[per_arg[i][o] for o in range(len(st.out_types))] for i in range(len(nums))],
                           single)

    return jac_fun


def hvp(fun, primals, tangents):
    """The Hessian of scalar ``fun`` at ``primals`` times ``tangents``: ``jvp(grad(f), primals,
    tangents)[1]`` (one tensor for one primal, else a tuple)."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise ArgumentError("hvp(f, primals, tangents): primals and tangents must be tuples or lists")
    argnums = 0 if len(primals) == 1 else tuple(range(len(primals)))
    _, t = jvp(grad(fun, argnums=argnums), tuple(primals), tuple(tangents))
    return t
