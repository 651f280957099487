"""``@tessera.jit``: trace a Python function into Graph IR and run it.

The first call with a new input signature (shapes, policies, static
arguments) runs the Python body with tracers, recording Graph IR; Python
control flow unrolls as it runs. The recorded function is verified,
canonicalized (canonicalize, cse, dce: rewrites that keep results bitwise
identical) and cached; later calls with the same signature run the cached
graph without tracing again.

Which path runs it is ``TESSERA_BACKEND``: ``compiled`` (the default)
compiles the graph once per signature through Schedule IR and Tile IR into
CPU kernels (tessera/schedule/executable.h) and runs those; ``reference``
runs the reference executor, the scalar oracle. A graph with a kernel no
template covers (an integer sum, a packed fp4 operand, stochastic rounding)
is a CompileError naming the op and suggesting ``TESSERA_BACKEND=reference``;
nothing falls back to the reference silently.

Parameters annotated ``tessera.Tensor["B", "D", fp8_e4m3 @ accum(fp32)]``
take tensors of that policy whose dims are bound by name: the same symbol
must have the same size in every argument (ShapeError naming the argument,
the dim and both sizes otherwise). numpy arrays passed for annotated
parameters are converted to the annotated policy.
"""

from __future__ import annotations

import functools
import inspect
import threading

import numpy as np

from tessera import _C
from tessera import mapper as _mapper
from tessera.dist import _jit as _dist
from tessera.dist._launch import _ctx as _launch_ctx
from tessera._trace import TraceContext, Tracer, active, _user_frame
from tessera import privilege_scheduler as _privileges
from tessera.privileges import RegionTracer, effects_of
from tessera.region import RegionSpec
from tessera.errors import ArgumentError, CompileError, DtypeError, ShapeError

CANONICAL_PIPELINE = ("canonicalize", "cse", "dce")


def _flat_arguments(signature, bound):
    """(name, value) per argument, with the elements of *args as "name[i]" and of **kwargs as
    "name[key]": tensors passed through them are arguments like any other (traced, not baked in as
    constants), and other values in them are static."""
    for name, value in bound.arguments.items():
        kind = signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            for i, v in enumerate(value):
                yield f"{name}[{i}]", v
        elif kind is inspect.Parameter.VAR_KEYWORD:
            for k, v in value.items():
                yield f"{name}[{k}]", v
        else:
            yield name, value


def _split_key(name):
    """("args", 0) for "args[0]", ("kw", "x") for "kw[x]", (name, None) for a plain parameter."""
    if not name.endswith("]") or "[" not in name:
        return name, None
    param, index = name[:-1].split("[", 1)
    return param, int(index) if index.isdigit() else index
_LEVELS = ("graph", "schedule", "tile", "target")


def _looks_like_policy(item):
    if isinstance(item, (_C.DType, _C.Policy)):
        return True
    if isinstance(item, str):
        try:
            _C.dtype(item)
            return True
        except Exception:
            return False
    return False


class TensorSpec:
    """The annotation ``tessera.Tensor[dims..., policy]``."""

    def __init__(self, dims, policy):
        self.dims = tuple(dims)
        self.policy = policy

    @classmethod
    def from_subscript(cls, spec):
        items = spec if isinstance(spec, tuple) else (spec,)
        policy = None
        if items and _looks_like_policy(items[-1]):
            policy = _C.dtype(items[-1]) if isinstance(items[-1], str) else items[-1]
            items = items[:-1]
        for d in items:
            if not (isinstance(d, str) and d.isidentifier()) and not (isinstance(d, int) and d >= 0):
                raise ShapeError(f"tessera.Tensor[...] dims must be symbol names or sizes, got {d!r}")
        if policy is not None and isinstance(policy, _C.DType):
            policy = _C.Policy(policy)
        return cls(items, policy)

    def __repr__(self):
        parts = [repr(d) for d in self.dims] + ([f'"{self.policy}"'] if self.policy is not None else [])
        return f"tessera.Tensor[{', '.join(parts)}]"


class Divisible:
    """``tessera.constraint.Divisible("K", 64)``: dim K must be a multiple of 64."""

    def __init__(self, dim: str, divisor: int):
        if not isinstance(divisor, int) or divisor <= 0:
            raise ArgumentError(f"Divisible: divisor must be a positive int, got {divisor!r}")
        self.dim = dim
        self.divisor = divisor

    def check(self, bindings, where):
        if self.dim not in bindings:
            raise ShapeError(f"constraint {self!r} names dim '{self.dim}', which no annotated parameter binds "
                             f"(bound: {', '.join(sorted(bindings)) or 'none'})", code="TE2003", **where)
        size = bindings[self.dim]
        if size % self.divisor:
            raise ShapeError(f"constraint {self!r} does not hold: {self.dim} = {size} is not a multiple of "
                             f"{self.divisor}", code="TE2003", **where)

    def __repr__(self):
        return f"Divisible({self.dim!r}, {self.divisor})"


class constraint:  # noqa: N801 (namespace spelled as in the specification)
    Divisible = Divisible


def require(*constraints):
    """Checks shape constraints while a @jit function is traced (once per signature)."""
    ctx = active()
    file, line, _ = _user_frame()
    where = {"file": file, "line": line, "col": 1}
    if ctx is None:
        raise CompileError("tessera.require is checked while tracing: call it inside a @tessera.jit function",
                           **where)
    for c in constraints:
        if not hasattr(c, "check"):
            raise ArgumentError(f"tessera.require takes constraints (tessera.constraint.Divisible(...)), got {c!r}")
        c.check(ctx.bindings, where)


def _flatten(out):
    """Output structure -> (leaves, rebuild). ``None`` has no leaves (a function that only
    updates its Region parameters)."""
    if out is None:
        return [], lambda values: None
    if isinstance(out, (tuple, list)):
        parts = [_flatten(o) for o in out]
        leaves = [leaf for p in parts for leaf in p[0]]

        def rebuild(values, parts=parts, kind=type(out)):
            items, i = [], 0
            for p in parts:
                n = len(p[0])
                items.append(p[1](values[i:i + n]))
                i += n
            return kind(items)
        return leaves, rebuild
    if isinstance(out, dict):
        keys = list(out)
        leaves, rebuild_list = _flatten([out[k] for k in keys])
        return leaves, lambda values: dict(zip(keys, rebuild_list(values)))
    return [out], lambda values: values[0]


class _Traced:
    def __init__(self, graph, raw_text, rebuild, tensor_positions):
        self.graph = graph
        self.raw_text = raw_text
        self.rebuild = rebuild
        self.tensor_positions = tensor_positions
        self._executables = {}
        self._mapped = {}  # (device, mapper generation) -> (kernel variants, decisions)
        self._lock = threading.RLock()  # shards of an index launch call one entry from their workers
        self.device = "cpu"  # where the last call ran
        self.effects = []  # (param, "write" | "reduce", op) after the function's own results
        self.num_results = None
        self.tile_ir = False  # @jit(target="cuda_tile"): every kernel through CUDA Tile IR

    def mapping(self, device=None):
        """The Mapper's decisions for this signature on ``device``: (kernel variants, log lines).
        Asked once per device and installed mapper; the collectives' algorithms are set on the ops."""
        device = device or self.device
        key = (device, _mapper.generation())
        with self._lock:
            if key not in self._mapped:
                variants, decisions = _mapper.apply(self.graph, [self.graph.name], device)
                if self.tile_ir and device != "cpu":
                    # Kernels the mapper left to the default take the CUDA Tile IR target
                    # (a CompileError names what it cannot express; nothing falls back to PTX).
                    for name, *_ in self.graph.op_sites(self.graph.name):
                        if name.startswith("graph.") and name not in _mapper._NO_KERNEL:
                            variants.setdefault(name, "tile_ir")
                    decisions = decisions + ["target='cuda_tile': kernels through CUDA Tile IR (variant tile_ir)"]
                self._mapped[key] = (variants, decisions)
            return self._mapped[key]

    def executable(self, device=None):
        """The compiled executable of this signature on ``device`` (default: that of the last
        call), compiled on first use."""
        device = device or self.device
        key = (device, _mapper.generation())
        exe = self._executables.get(key)  # compiled already: no lock (every call of a signature asks)
        if exe is not None:
            return exe
        with self._lock:
            exe = self._executables.get(key)
            if exe is None:
                variants, _ = self.mapping(device)
                exe = self._executables[key] = _C.compile_executable(self.graph.module, self.graph.name,
                                                                     device=device, variants=variants)
            return exe

    def schedule_ir(self):
        variants, decisions = self.mapping()
        return _mapper.header(decisions) + _C.schedule_ir(self.graph.module, self.graph.name, variants=variants,
                                                          device=self.device)


class JitFunction:
    def __init__(self, fn, *, capture_graph=False, deterministic=True, target="cpu", static_argnames=()):
        if target not in ("cpu", "cuda", "cuda_tile"):
            raise ArgumentError(f"@tessera.jit target must be 'cpu', 'cuda' or 'cuda_tile', got {target!r}")
        for name, value in (("capture_graph", capture_graph), ("deterministic", deterministic)):
            if not isinstance(value, bool):
                raise ArgumentError(f"@tessera.jit {name} must be True or False, got {value!r}")
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.options = {"capture_graph": capture_graph, "deterministic": deterministic, "target": target}
        self.static_argnames = set(static_argnames)
        self.signature = inspect.signature(fn)
        hints = getattr(fn, "__annotations__", {})
        self.specs = {name: hints[name] for name in self.signature.parameters
                      if isinstance(hints.get(name), TensorSpec)}
        # Parameters annotated tessera.Region[...]: name -> privilege (tessera/privileges.py).
        self.regions = {name: hints[name].privilege for name in self.signature.parameters
                        if isinstance(hints.get(name), RegionSpec)}
        self._cache = {}
        self._last = None
        self.trace_count = 0
        # The fast call path (_plain_tensors): a function of plain positional parameters, none
        # annotated, static or a Region, called with one tensor for each.
        params = list(self.signature.parameters.values())
        self._plain_names = tuple(p.name for p in params) if (
            not self.specs and not self.regions and not self.static_argnames and
            all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and p.default is inspect.Parameter.empty
                for p in params)) else None
        # Calls of the fast path whose executable is compiled: (shape, policy, device) of each
        # argument -> (mapper generation, entry, the executable's run). Such a call goes straight
        # to the executable (its run plan, docs/design/0048) without labelling its arguments.
        self._direct = {}

    # -- call path -------------------------------------------------------
    def _classify(self, args, kwargs):
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        tensors, statics, bindings = {}, {}, {}
        for name, value in _flat_arguments(self.signature, bound):
            spec = self.specs.get(name)
            if name in self.static_argnames:
                statics[name] = value
                continue
            if spec is not None and _dist.is_dist(value):
                tensors[name] = value  # a distributed tensor: its global shape binds the dims
                self._bind_dims(name, value.shape, spec, bindings)
            elif spec is not None:
                tensors[name] = self._convert_annotated(name, value, spec, bindings)
            elif _dist.is_dist(value):
                tensors[name] = value
            elif isinstance(value, _C.Tensor):
                tensors[name] = value
            elif isinstance(value, np.ndarray):
                from tessera._tensor import tensor
                tensors[name] = tensor(value)
            else:
                statics[name] = value
        return bound, tensors, statics, bindings

    def _convert_annotated(self, name, value, spec, bindings):
        from tessera._tensor import tensor
        if isinstance(value, Tracer):
            raise CompileError("calling a @tessera.jit function on traced values is not supported yet")
        if not isinstance(value, _C.Tensor):
            value = tensor(value, dtype=spec.policy) if spec.policy is not None else tensor(value)
        elif spec.policy is not None and value.policy != spec.policy:
            raise DtypeError(f"argument '{name}' of {self.__name__}() has policy '{value.policy}', the "
                             f"annotation asks for '{spec.policy}'; convert it with tessera.ops.cast")
        self._bind_dims(name, value.shape, spec, bindings)
        return value

    def _bind_dims(self, name, shape, spec, bindings):
        if len(shape) != len(spec.dims):
            raise ShapeError(f"argument '{name}' of {self.__name__}() has rank {len(shape)} (shape {shape}), "
                             f"the annotation {spec!r} has rank {len(spec.dims)}")
        for axis, (dim, size) in enumerate(zip(spec.dims, shape)):
            if isinstance(dim, int):
                if dim != size:
                    raise ShapeError(f"argument '{name}' of {self.__name__}(): dim {axis} is {size}, the "
                                     f"annotation says {dim}")
            elif dim in bindings and bindings[dim][0] != size:
                size0, arg0 = bindings[dim]
                raise ShapeError(f"argument '{name}' of {self.__name__}(): dim '{dim}' (axis {axis}) is {size}, "
                                 f"but argument '{arg0}' bound '{dim}' to {size0}", code="TE2002")
            else:
                bindings.setdefault(dim, (size, name))

    @staticmethod
    def _static_key(value):
        try:
            hash(value)
            return (type(value).__name__, value)
        except TypeError:
            raise ArgumentError(f"static argument {value!r} is not hashable; jit caches per static value")

    def _plain_tensors(self, args, kwargs):
        """{name: tensor} when the call takes the fast path: plain parameters (see __init__), each
        given a host or device tensor positionally; None otherwise. It skips binding the signature
        (inspect), which cost about as much as running a small compiled function."""
        if self._plain_names is None or kwargs or len(args) != len(self._plain_names):
            return None
        for a in args:
            if type(a) is not _C.Tensor:
                return None
        return dict(zip(self._plain_names, args))

    def _direct_key(self, args):
        """The _direct key of a fast-path call (each argument a tessera tensor), else None."""
        if self._plain_names is None or len(args) != len(self._plain_names):
            return None
        for a in args:
            if type(a) is not _C.Tensor:
                return None
        return tuple([(a.shape, str(a.policy), a.device) for a in args])

    def __call__(self, *args, **kwargs):
        if active() is not None:
            # Called while another trace records (a transform such as tessera.grad traces its
            # function, or an enclosing function is traced): the body records into that trace.
            return self.fn(*args, **kwargs)
        if not kwargs and self._direct:
            key = self._direct_key(args)
            hit = self._direct.get(key) if key is not None else None
            if hit is not None and hit[0] == _mapper.generation() and _C.default_backend() == "compiled":
                _, entry, run = hit
                _privileges.wait_for(args)
                self._last = entry
                return entry.rebuild(run(list(args)))
        tensors = self._plain_tensors(args, kwargs)
        if tensors is not None:
            # The key _classify's path would compute (no statics), looked up first; a new
            # signature is traced by the path below.
            entry = self._cache.get((tuple((n, t.shape, str(t.policy)) for n, t in tensors.items()), ()))
            if entry is not None:
                _privileges.wait_for(tensors.values())
                return self._run_entry(entry, tensors)
        bound, tensors, statics, bindings = self._classify(args, kwargs)
        if self.regions:
            self._check_region_arguments(bound, tensors)
        else:
            _privileges.wait_for(tensors.values())  # earlier asynchronous calls writing these
        if any(_dist.is_dist(t) for t in tensors.values()):
            if self.regions:
                # Traced now (privilege errors surface at the call); run by the scheduler.
                entry, dts = self._sharded_entry(bound, tensors, statics, bindings)
                capture = self.options["capture_graph"]
                return self._call_privileged(tensors, entry,
                                             lambda: _dist.run(entry, dts, rebuild=False, capture_graph=capture))
            return self._call_sharded(bound, tensors, statics, bindings)
        key = (tuple((n, t.shape, str(t.policy)) for n, t in tensors.items()),
               tuple((n, self._static_key(v)) for n, v in statics.items()))
        entry = self._cache.get(key)
        if entry is None:
            # Annotated parameters are traced with their symbolic dims, the others with their sizes.
            arg_types = {n: (self.specs[n].dims if n in self.specs else t.shape, t.policy) for n, t in tensors.items()}
            entry = self._trace(bound, arg_types, {d: s for d, (s, _) in bindings.items()})
            self._cache[key] = entry
        return self._run_entry(entry, tensors)

    def _run_entry(self, entry, tensors):
        """Runs a traced signature on ``tensors`` (name -> tensor) and rebuilds its results."""
        self._last = entry
        args = [tensors[n] for n in entry.tensor_positions]
        device = self._device_of(tensors)
        if device != "cpu":
            args = [a if a.device == device else a.to(device) for a in args]
        entry.device = device

        def run():
            if _C.default_backend() == "compiled":
                exe = entry.executable(device)
                # capture_graph: on a GPU the launches run as one CUDA graph, built on the first call
                # of these shapes and replayed with new buffer addresses after that; the CPU has no
                # graphs (its launches are function calls), so there it changes nothing.
                go = exe.run_graph if self.options["capture_graph"] and device != "cpu" else exe.run
                if (not self.regions and list(entry.tensor_positions) == list(self._plain_names or ()) and
                        all(a.device == device for a in args)):
                    key = self._direct_key(args)
                    if key is not None:
                        self._direct[key] = (_mapper.generation(), entry, go)
                return go(args)
            if device == "cpu":
                return entry.graph.execute(args)
            # The reference executor (the oracle) runs on the host.
            return [r.to(device) for r in entry.graph.execute([a.to("cpu") for a in args])]

        if self.regions:
            return self._call_privileged(tensors, entry, run)
        return entry.rebuild(run())

    # -- privileges ----------------------------------------------------------
    def _check_region_arguments(self, bound, tensors):
        for name, privilege in self.regions.items():
            value = bound.arguments.get(name)
            if privilege != "read" and not (isinstance(value, _C.Tensor) or _dist.is_dist(value)):
                raise ArgumentError(f"{self.__name__}(): parameter '{name}' is tessera.Region[{privilege!r}], so "
                                    f"the call updates it in place: pass a tessera tensor, got "
                                    f"{type(value).__name__}")
            if name not in tensors:
                raise ArgumentError(f"{self.__name__}(): parameter '{name}' is a tessera.Region and takes a "
                                    f"tensor, got {type(value).__name__}")

    def _call_privileged(self, tensors, entry, run):
        """Submits the call to the privilege scheduler (tessera/privilege_scheduler.py): it runs once
        what it reads is written, and its writes and reductions are stored in call order. Returns at
        once when the function returns nothing; otherwise waits for this call and returns its results."""
        accesses = [(name, tensors[name], privilege) for name, privilege in self.regions.items()]
        holder = {}

        def compute():
            results = run()  # flat: the function's results, then its regions' updates
            n = entry.num_results
            holder["results"] = entry.rebuild(results[:n])
            return {param: (kind, op, value) for (param, kind, op), value in zip(entry.effects, results[n:])}

        if getattr(_launch_ctx, "value", None) is not None:
            # A shard of an index launch: its collectives need this thread's shard scope, so the
            # call runs here, in order (each shard is one sequence of calls).
            for param, (kind, op, value) in compute().items():
                _privileges.apply_effect(tensors[param], kind, op, value)
            return holder["results"]
        call = _privileges.scheduler().submit(self.__name__, accesses, compute)
        if entry.num_results == 0:
            return None
        call.done.wait()
        if call.error is not None:
            call.reported = True
            raise call.error
        return holder["results"]

    def _call_sharded(self, bound, tensors, statics, bindings):
        """The global view: trace over global shapes, partition per device, run SPMD (tessera/dist/_jit.py)."""
        entry, dts = self._sharded_entry(bound, tensors, statics, bindings)
        return _dist.run(entry, dts, capture_graph=self.options["capture_graph"])

    def _sharded_entry(self, bound, tensors, statics, bindings):
        mesh = _dist.mesh_of(tensors, f"{self.__name__}()")
        dts = _dist.as_dist(tensors, mesh)
        key = ("dist", _dist.signature_key(mesh, dts), tuple((n, self._static_key(v)) for n, v in statics.items()))
        entry = self._cache.get(key)
        if entry is None:
            arg_types = {n: (t.shape, t.policy) for n, t in dts.items()}
            traced = self._trace(bound, arg_types, {d: s for d, (s, _) in bindings.items()}, mesh=mesh)
            entry = self._cache[key] = _dist.build(traced, mesh, dts)
        self._last = entry
        return entry, dts

    def _device_of(self, tensors):
        """The device a call runs on: its tensors' device (all the same), or cuda:0 for
        target="cuda" with host tensors."""
        if self.options["target"] == "cpu":
            # The common case, without labelling each argument: every tensor on one device.
            devices = {t.device for t in tensors.values()}
            if len(devices) == 1:
                return devices.pop()
        from tessera._tensor import one_device
        device = one_device(((f"argument '{n}'", t) for n, t in tensors.items()), f"{self.__name__}()")
        if self.options["target"] in ("cuda", "cuda_tile") and device == "cpu":
            return "cuda:0"
        return device

    # -- tracing -----------------------------------------------------------
    def _trace(self, bound, arg_types, bindings, mesh=None):
        """Traces with a tracer of (dims, policy) per tensor parameter in ``arg_types``; ``bindings``
        (symbol -> size of the call being traced) serve tessera.require."""
        with TraceContext(self.__name__) as ctx:
            ctx.bindings = dict(bindings)
            ctx.mesh = mesh  # tessera.dist.reshard records into traces over distributed tensors
            call_args = dict(bound.arguments)
            for name, (dims, policy) in arg_types.items():
                param, index = _split_key(name)
                if index is None:
                    call_args[name] = ctx.argument(dims, policy, name)
                    if name in self.regions:
                        call_args[name] = RegionTracer(call_args[name], self.regions[name], name, self.__name__)
                else:  # an element of *args or **kwargs
                    tracer = ctx.argument(dims, policy, f"{param}_{index}")
                    if isinstance(call_args[param], dict):
                        call_args[param] = {**call_args[param], index: tracer}
                    else:
                        elements = list(call_args[param])
                        elements[index] = tracer
                        call_args[param] = tuple(elements)
            call = inspect.BoundArguments(self.signature, call_args)
            out = self.fn(*call.args, **call.kwargs)
            leaves, rebuild = _flatten(out)
            ids = []
            for leaf in leaves:
                if isinstance(leaf, Tracer):
                    ids.append(leaf._id)
                else:
                    ids.append(ctx.record("graph.cast", [leaf], {"policy": _leaf_policy(leaf)}, None)._id)
            # After the function's own results: the new value of each written region and the
            # contribution of each reduced one, applied by the call.
            effects = effects_of([v for v in call_args.values() if isinstance(v, RegionTracer)])
            ids += [tracer._id for *_, tracer in effects]
            graph = ctx.builder.finish(ids)
        raw = graph.text()
        graph.run_passes(list(CANONICAL_PIPELINE))
        self.trace_count += 1
        traced = _Traced(graph, raw, rebuild, list(arg_types))
        traced.tile_ir = self.options["target"] == "cuda_tile"
        traced.effects = [(param, kind, op) for param, kind, op, _ in effects]
        traced.num_results = len(leaves)
        return traced

    def _trace_from_annotations(self):
        missing = [n for n in self.signature.parameters if n not in self.specs]
        if missing or any(s.policy is None for s in self.specs.values()):
            raise CompileError(f"{self.__name__} has not been traced yet and its parameters are not all "
                               f"annotated with tessera.Tensor[dims..., policy]; call it once first")
        bound = self.signature.bind_partial()
        traced = self._trace(bound, {n: (s.dims, s.policy) for n, s in self.specs.items()}, {})
        if self.options["target"] != "cpu":
            traced.device = "cuda:0"  # where a call with host tensors would run
        return traced

    # -- inspection --------------------------------------------------------
    @property
    def graph_ir(self) -> str:
        return self.inspect_ir("graph")

    def inspect_ir(self, level: str = "graph", *, optimized: bool = True, ptx: bool = False) -> str:
        """The program at one level: "graph", "schedule", "tile" or "target" (the generated C++ or CUDA
        C++ of each kernel). ``ptx=True`` with "target" gives the PTX of each kernel of a CUDA executable."""
        if level not in _LEVELS:
            raise ArgumentError(f"inspect_ir: level must be one of {', '.join(_LEVELS)}, got {level!r}")
        if ptx and level != "target":
            raise ArgumentError(f"inspect_ir: ptx=True applies to level \"target\", got {level!r}")
        entry = self._last or self._trace_from_annotations()
        self._last = entry
        sharded = isinstance(entry, _dist.ShardedEntry)
        if level == "graph":
            if sharded and optimized:
                return entry.text()  # the per-shard functions, shardings in their types
            return entry.graph.text() if optimized else entry.raw_text
        if level == "schedule":
            return entry.schedule_ir()  # with the Mapper's decisions
        # Tile IR and target code exist once every kernel is compiled.
        exe = entry.executable()
        if ptx:
            return exe.ptx()
        return exe.tile_ir() if level == "tile" else exe.target()

    def executable(self):
        """The compiled executable of the last signature called (compiling it if needed)."""
        entry = self._last or self._trace_from_annotations()
        self._last = entry
        return entry.executable()

    @property
    def cache_size(self) -> int:
        return len(self._cache)


def _leaf_policy(leaf):
    if isinstance(leaf, _C.Tensor):
        return leaf.policy
    if isinstance(leaf, bool):
        return _C.dtype("bool")
    if isinstance(leaf, int):
        return _C.dtype("int64")
    if isinstance(leaf, float):
        return _C.dtype("fp32")
    raise CompileError(f"a @tessera.jit function returned {type(leaf).__name__}; return tensors or numbers")


def jit(fn=None, **options):
    """Decorator: ``@tessera.jit`` or ``@tessera.jit(capture_graph=True, deterministic=True, target="cpu")``.

    target: "cpu", "cuda" (host arguments run on cuda:0) or "cuda_tile" (as "cuda", every
    kernel compiled through the CUDA Tile IR target, docs/design/0014-cuda-tile-target.md;
    a kernel it cannot express is a CompileError naming the construct and line).

    capture_graph: on a GPU, run the executable as one CUDA graph (built on the first call of these
    shapes, replayed with new buffers after); the CPU has no graphs, so there it changes nothing.
    deterministic: False permits kernels whose summation order may vary from run to run; every compiled
    kernel today sums in the canonical order, so results are bitwise reproducible either way."""
    if fn is None:
        return lambda f: JitFunction(f, **options)
    return JitFunction(fn, **options)
