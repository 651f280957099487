"""The Mapper: the policy object that places shards, picks collective
algorithms and chooses kernel variants (``class M(tessera.Mapper)``,
``tessera.runtime.set_mapper(M())``).

Three questions, each asked where its answer is needed and each answer
logged (``tessera.runtime.mapper_log()``) and shown in
``inspect_ir("schedule")``:

- ``place(region, mesh)``, once per mesh axis when a mesh is built: where
  the members of the axis ``region.axis`` sit among the mesh's devices.
  ``"local_switch"`` puts them on consecutive devices (the devices that share
  the fastest links: one NVSwitch domain, one host), ``"spread"`` strides
  them as far apart as the mesh allows, ``None`` / ``"default"`` keeps the
  row-major order of ``devices=``. Every mesh axis gets a stride; the mesh's
  device of each coordinate follows (docs/guide/distribution.md).
- ``choose_collective(kind, size)``, for each collective of a compiled
  function (kind: "allreduce", "reduce_scatter", "all_gather",
  "all_to_all"; size: the number of members of its axis): the algorithm,
  "rank_order" (the default: the bitwise reference), "ring", "tree" or
  "native" (the backend's own). The order of a reduction follows it; for
  all_gather and all_to_all every algorithm moves the same data, so the
  choice is logged and the result is the same.
- ``choose_variant(op, arch)``, for each Graph IR op of a compiled function
  (op: its name without "graph.", e.g. "matmul"): "tile" (the generated
  kernel), "ptx" (the same on CUDA, where it is compiled to PTX through
  NVRTC), "tile_ir" (on CUDA, the generated kernel through the CUDA Tile IR
  target and tileiras; a kernel that target cannot express is a
  CompileError naming the construct and the line), "cpu", "reference" (the
  reference executor: the oracle, for bisecting a numerical difference), or
  None for the default. Any other answer is an ArgumentError.

An answer this machine cannot honour falls back, and the log says why:
an algorithm name containing "ring" or "tree" runs that algorithm (e.g.
"sharp_ring": SHARP in-switch reductions need NVLink multicast, which
these runs keep off with NCCL_NVLS_ENABLE=0), any other unknown one runs
rank_order; the CUDA variants ("ptx", "tile_ir") asked for the CPU, and
"cpu" asked for a GPU, run the generated kernel of the device.
"""

from __future__ import annotations

import threading
import types

from tessera.errors import ArgumentError

ALGORITHMS = ("rank_order", "ring", "tree", "native")
VARIANTS = ("tile", "ptx", "tile_ir", "cpu", "reference")
PLACEMENTS = ("default", "local_switch", "spread")
REDUCTIONS = ("allreduce", "reduce_scatter")
# Ops that never get a kernel of their own (constants are data; collectives run through the
# communicator): choose_variant is not asked about them.
_NO_KERNEL = frozenset({"graph.constant", "graph.allreduce", "graph.all_gather", "graph.reduce_scatter",
                        "graph.all_to_all", "graph.shard_slice", "graph.reshard"})


class Arch:
    """The target a kernel variant is chosen for: ``name`` ("cpu" or "sm_90"),
    ``device``, and ``is_cpu`` / ``is_hopper`` / ``is_blackwell``."""

    def __init__(self, device: str):
        self.device = device
        self.is_cpu = device == "cpu"
        major = minor = 0
        if not self.is_cpu:
            from tessera import _C
            major, minor = _C._cuda_capability(int(device.split(":")[1]))
        self.capability = (major, minor)
        self.name = "cpu" if self.is_cpu else f"sm_{major}{minor}"
        self.is_hopper = major == 9
        self.is_blackwell = major == 10 or major == 12

    def __repr__(self):
        return f"Arch({self.name!r}, device={self.device!r})"


class AxisRegion:
    """What ``place`` is asked about: the members of mesh axis ``axis``
    (``size`` of them) of a mesh over ``devices``."""

    def __init__(self, axis, size, axes, shape, devices):
        self.axis = axis
        self.size = size
        self.axes = tuple(axes)
        self.shape = tuple(shape)
        self.devices = tuple(devices)

    def __repr__(self):
        return f"AxisRegion(axis={self.axis!r}, size={self.size})"


class Mapper:
    """Subclass and override any of the three methods; ``None`` means the
    default. The default Mapper (this class) keeps the mesh order, reduces
    in rank order and runs the generated kernels."""

    def place(self, region, mesh):
        return None

    def choose_collective(self, kind, size):
        return None

    def choose_variant(self, op, arch):
        return None


# -- the current mapper and its decision log ------------------------------------

_lock = threading.Lock()
_state = {"mapper": Mapper(), "generation": 0}
_log: list = []


def set_mapper(mapper) -> None:
    if not isinstance(mapper, Mapper):
        raise ArgumentError(f"tessera.runtime.set_mapper takes a tessera.Mapper, got {type(mapper).__name__}")
    with _lock:
        _state["mapper"] = mapper
        _state["generation"] += 1  # compiled functions re-ask it


def get_mapper() -> Mapper:
    return _state["mapper"]


def generation() -> int:
    """Bumped by every set_mapper: part of the compile caches' keys."""
    return _state["generation"]


def log(line: str) -> str:
    with _lock:
        _log.append(line)
    return line


def mapper_log() -> list:
    with _lock:
        return list(_log)


def clear_mapper_log() -> None:
    with _lock:
        _log.clear()


def _mapper_name():
    return type(get_mapper()).__name__


def _call(method, *args):
    try:
        return getattr(get_mapper(), method)(*args)
    except Exception as e:  # the user's policy raised: say which question it was
        e.add_note(f"raised by {_mapper_name()}.{method}{args!r} (tessera.runtime.set_mapper)")
        raise


# -- placement --------------------------------------------------------------------

def place_mesh(devices, axes, shape):
    """The devices of a new mesh in row-major coordinate order, as the
    mapper places each axis: consecutive for "local_switch" axes
    (innermost), far apart for "spread" axes (outermost), the others as
    given. Returns (devices, decisions)."""
    mapper = get_mapper()
    if type(mapper).place is Mapper.place:
        return list(devices), []
    ranks = {"spread": 0, "default": 1, "local_switch": 2}
    # The mesh asked for (devices in the order given), for policies that look at all of it.
    request = types.SimpleNamespace(devices=tuple(devices), axes=tuple(axes), shape=tuple(shape))
    order, decisions = [], []
    for k, axis in enumerate(axes):
        region = AxisRegion(axis, shape[k], axes, shape, devices)
        asked = _call("place", region, request)
        answer = "default" if asked is None else asked
        if answer not in PLACEMENTS:
            decisions.append(log(f"place(axis {axis!r}) -> {asked!r}: not a placement this runtime knows "
                                 f"({', '.join(PLACEMENTS)}); kept the default"))
            answer = "default"
        else:
            decisions.append(log(f"place(axis {axis!r}) -> {answer!r}"))
        order.append((ranks[answer], k))
    # Axes sorted slowest-varying first; stable, so ties keep the mesh's order.
    physical = [k for _, k in sorted(order, key=lambda rk: rk[0])]
    if physical == list(range(len(axes))):
        return list(devices), decisions
    # Device index of coordinate c: row-major over the axes in physical order.
    strides, step = {}, 1
    for k in reversed(physical):
        strides[k] = step
        step *= shape[k]
    placed = []
    for flat in range(len(devices)):
        coords, rest = [], flat
        for k in reversed(range(len(axes))):
            coords.append(rest % shape[k])
            rest //= shape[k]
        coords.reverse()
        placed.append(devices[sum(coords[k] * strides[k] for k in range(len(axes)))])
    decisions.append(log("placed mesh axes " + ", ".join(f"{axes[k]} (stride {strides[k]})" for k in range(len(axes)))))
    return placed, decisions


# -- collectives ------------------------------------------------------------------

def choose_algorithm(kind, size, deterministic=True):
    """The algorithm a collective of ``kind`` over ``size`` members runs, logged."""
    if not deterministic:
        log(f"choose_collective({kind!r}, {size}): deterministic=False -> 'native'")
        return "native"
    asked = _call("choose_collective", kind, size)
    if asked is None:
        return "rank_order"
    if not isinstance(asked, str):
        raise ArgumentError(f"{_mapper_name()}.choose_collective({kind!r}, {size}) returned {asked!r}; expected "
                            f"an algorithm name ({', '.join(ALGORITHMS)}) or None")
    if asked in ALGORITHMS:
        chosen, why = asked, ""
    elif "ring" in asked or "tree" in asked:
        chosen = "ring" if "ring" in asked else "tree"
        why = f": not available here{_sharp_reason(asked)}; ran {chosen!r}"
    else:
        chosen, why = "rank_order", f": not an algorithm this runtime knows ({', '.join(ALGORITHMS)}); ran 'rank_order'"
    if kind not in REDUCTIONS and chosen != "rank_order":
        why += " (moves the same data as rank_order)"
    log(f"choose_collective({kind!r}, {size}) -> {asked!r}{why}")
    return chosen


def _sharp_reason(name):
    if "sharp" in name.lower():
        return (" (SHARP in-switch reductions need NVLink multicast, which is off: NCCL_NVLS_ENABLE=0, "
                "and the in-process backend has no switch)")
    return ""


# -- kernel variants --------------------------------------------------------------

def choose_variants(op_names, device):
    """{graph op name: variant} for the ops of a function compiled for
    ``device``, as the mapper chooses; each choice logged."""
    mapper = get_mapper()
    if type(mapper).choose_variant is Mapper.choose_variant:
        return {}
    arch = Arch(device)
    out = {}
    for name in dict.fromkeys(op_names):
        if not name.startswith("graph.") or name in _NO_KERNEL:
            continue
        short = name[len("graph."):]
        asked = _call("choose_variant", short, arch)
        if asked is None:
            continue
        variant, why = _variant_for(asked, arch)
        if variant is None:
            raise ArgumentError(f"{_mapper_name()}.choose_variant({short!r}, {arch.name}) returned {asked!r}; expected "
                                f"{', '.join(repr(v) for v in VARIANTS)} or None")
        log(f"choose_variant({short!r}, {arch.name}) -> {asked!r}{why}")
        if variant is not None:
            out[name] = variant
    return out


def _variant_for(asked, arch):
    if asked in ("tile", "reference"):
        return asked, ""
    if asked == "ptx":
        if arch.is_cpu:
            return "tile", ": PTX is a CUDA target; ran the generated CPU kernel"
        return "tile", " (the generated kernel, compiled to PTX through NVRTC)"
    if asked == "cpu":
        return "tile", "" if arch.is_cpu else ": not a CUDA variant; ran the generated kernel"
    if asked == "tile_ir":
        # The CUDA Tile IR target (docs/design/0014-cuda-tile-target.md): a kernel
        # it cannot express is a CompileError at compile time, never run as PTX.
        if arch.is_cpu:
            return "tile", ": CUDA Tile IR is a CUDA target; ran the generated CPU kernel"
        return "tile_ir", " (the generated kernel through CUDA Tile IR and tileiras)"
    return None, ""


def header(decisions):
    """The decisions as comment lines above the Schedule IR that inspect_ir shows."""
    return "".join(f"// mapper: {d}\n" for d in decisions)


def apply(graph, functions, device):
    """Applies the mapper to compiled functions ``functions`` of traced
    ``graph``: sets the algorithm of each collective, and returns the kernel
    variants ({graph op: variant}) to compile with and the decisions."""
    start = len(mapper_log())
    variants = {}
    for fn in functions:
        sites = graph.op_sites(fn)
        for index, (name, axis, size, current) in enumerate(sites):
            kind = name[len("graph."):]
            if current == "native":
                continue  # the program asked for it (deterministic=False)
            if kind in ("allreduce", "reduce_scatter", "all_gather", "all_to_all") and size > 1:
                algorithm = choose_algorithm(kind, size)
                if kind in REDUCTIONS:
                    graph.set_op_attr(fn, index, "algorithm", algorithm)
        variants.update(choose_variants([site[0] for site in sites], device))
    return variants, mapper_log()[start:]
