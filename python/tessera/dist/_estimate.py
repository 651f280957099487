"""``tessera.dist.estimate``: a step's communication per mesh axis and its estimated time.

``estimate(fn, *args, system=)`` traces and partitions ``fn`` over its
distributed arguments exactly as a call would (the same per-shard functions
``inspect_ir("graph")`` shows) but runs nothing. It reads the collectives of a
per-shard function, and its matrix products, and prices them on a described
system.

The model (docs/design/0009-estimate.md says why):

- **Volumes are those of the ring algorithms**, per device, with S the payload
  in bytes and n the number of members of the mesh axis:

  ============== =================== =========== ===============================
  collective     bytes sent/device   ring steps  S is
  ============== =================== =========== ===============================
  allreduce      2(n-1)/n * S        2(n-1)      the tensor reduced
  all_gather     (n-1)/n * S         n-1         the gathered (full) tensor
  reduce_scatter (n-1)/n * S         n-1         the full tensor before the split
  all_to_all     (n-1)/n * S         n-1         each device's tensor
  shard_slice    0                   0           (a device keeps its own part)
  ============== =================== =========== ===============================

  Every device receives as many bytes as it sends. Bytes are elements times
  the storage format's width (fp8: 1 byte, fp4: half a byte).
- **Time is alpha-beta:** ``latency * steps + bytes sent / bandwidth`` per
  collective, with the link of the collective's axis; the step's
  communication time is the sum over its collectives (no overlap assumed).
- **Which link:** ``links[axis]`` when the system names the axis; otherwise
  the system's ``"*"`` link (the intra-node one) when every group of the axis
  lies inside one node, else its ``inter_node`` link. Device ``cuda:N`` (or
  ``cpu:N``) sits on node ``N // node_size``. Mesh devices are row-major, so
  with ``devices=[cuda:0, cuda:1, ...]`` an axis of stride s and size n spans
  ``(n-1)*s + 1`` consecutive devices and fits in a node only if they do.
- **Compute** (optional): ``2*M*N*K`` flops per graph.matmul / graph.gemm over
  the per-shard shapes, at the system's peak for the operands' dtype.
- **Which device:** shards of one shape share one per-shard function; the
  estimate is that of the slowest distinct function (collectives move equal
  parts, so only compute differs between them), and names the ranks that run it.

Presets (``system="nvl72"`` ...) carry public vendor figures; every number
and its source is in ``PRESET_SOURCES`` below and in docs/guide/distribution.md.
Latencies are approximate: vendors publish bandwidths, not per-step latency.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from tessera import _C
from tessera.dist import _jit as _dist
from tessera.errors import ArgumentError

# --- the system description ------------------------------------------------


@dataclass(frozen=True)
class Link:
    """One link of a system: ``bandwidth_gbps`` is gigabytes (10^9 bytes) per
    second in each direction, per device; ``latency_us`` the time of one step
    of a ring algorithm (one message to a neighbour), in microseconds."""

    bandwidth_gbps: float
    latency_us: float
    name: str = ""

    def __post_init__(self):
        for what, v in (("bandwidth_gbps", self.bandwidth_gbps), ("latency_us", self.latency_us)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ArgumentError(f"tessera.dist.Link: {what} must be a finite number, got {v!r}")
        if self.bandwidth_gbps <= 0:
            raise ArgumentError(f"tessera.dist.Link: bandwidth_gbps must be positive (GB/s per direction), "
                                f"got {self.bandwidth_gbps}")
        if self.latency_us < 0:
            raise ArgumentError(f"tessera.dist.Link: latency_us must be >= 0, got {self.latency_us}")

    def seconds(self, steps, nbytes):
        """The alpha-beta time of ``steps`` ring steps moving ``nbytes`` per device."""
        return steps * self.latency_us * 1e-6 + nbytes / (self.bandwidth_gbps * 1e9)

    def describe(self):
        label = f"{self.name}: " if self.name else ""
        return f"{label}{_num(self.bandwidth_gbps)} GB/s, {_num(self.latency_us)} us/step"


@dataclass(frozen=True)
class System:
    """A described system: ``links`` maps mesh axis names, or ``"*"`` for every
    other axis, to a Link; ``"*"`` is the link inside a node. ``node_size``
    devices share a node (None: every device is in one); an axis whose groups
    cross nodes uses ``inter_node``. ``peak_tflops`` maps dtype names
    ("bf16", "fp32") or families ("fp8", "fp6", "fp4") to dense peak matrix
    throughput per device, in TFLOPS; dtypes it lacks have no compute estimate."""

    name: str
    links: dict
    peak_tflops: dict = field(default_factory=dict)
    node_size: int | None = None
    inter_node: Link | None = None
    sources: tuple = ()

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ArgumentError(f"tessera.dist.System: name must be a non-empty string, got {self.name!r}")
        if not isinstance(self.links, dict) or not self.links:
            raise ArgumentError("tessera.dist.System: links must be a dict of mesh axis name (or \"*\") to "
                                "tessera.dist.Link, with at least one entry")
        for key, link in self.links.items():
            if not isinstance(key, str) or not isinstance(link, Link):
                raise ArgumentError(f"tessera.dist.System: links maps axis names (or \"*\") to tessera.dist.Link, "
                                    f"got {key!r}: {link!r}")
        if not isinstance(self.peak_tflops, dict):
            raise ArgumentError(f"tessera.dist.System: peak_tflops must be a dict of dtype name to TFLOPS, "
                                f"got {type(self.peak_tflops).__name__}")
        for key, v in self.peak_tflops.items():
            if (not isinstance(key, str) or isinstance(v, bool) or not isinstance(v, (int, float))
                    or not math.isfinite(v) or v <= 0):
                raise ArgumentError(f"tessera.dist.System: peak_tflops maps dtype names to positive TFLOPS, "
                                    f"got {key!r}: {v!r}")
        if self.node_size is not None and (isinstance(self.node_size, bool) or not isinstance(self.node_size, int)
                                           or self.node_size < 1):
            raise ArgumentError(f"tessera.dist.System: node_size must be a positive int or None, "
                                f"got {self.node_size!r}")
        if self.inter_node is not None and not isinstance(self.inter_node, Link):
            raise ArgumentError(f"tessera.dist.System: inter_node must be a tessera.dist.Link, "
                                f"got {type(self.inter_node).__name__}")
        if self.inter_node is not None and self.node_size is None:
            raise ArgumentError("tessera.dist.System: inter_node needs node_size (how many devices share a node)")

    def link_for(self, mesh, axis):
        """(link, scope) of mesh axis ``axis``: scope is "axis" (named in links),
        "intra-node" or "inter-node"."""
        if axis in self.links:
            return self.links[axis], "axis"
        if "*" not in self.links:
            raise ArgumentError(f"system '{self.name}' has no link for mesh axis '{axis}' and no \"*\" link "
                                f"(its links: {', '.join(sorted(self.links))})")
        if self.node_size is None or _axis_fits_in_nodes(mesh, axis, self.node_size):
            return self.links["*"], "intra-node"
        if self.inter_node is None:
            raise ArgumentError(f"mesh axis '{axis}' of {mesh!r} crosses nodes of {self.node_size} devices, and "
                                f"system '{self.name}' has no inter_node link")
        return self.inter_node, "inter-node"

    def peak_for(self, dtype):
        """Peak TFLOPS for matrix products of ``dtype`` (its name, then its family), or None."""
        for key in (dtype, _family(dtype)):
            if key in self.peak_tflops:
                return self.peak_tflops[key]
        return None


def _axis_fits_in_nodes(mesh, axis, node_size):
    """Whether every group of ``axis`` lies inside one node: device cuda:N (or
    cpu:N) is on node N // node_size. The device, not the rank, decides, so a
    Mapper placement that reorders the mesh's devices is priced as placed."""
    m = mesh._m
    node = [_device_number(d) // node_size for d in mesh.devices]
    for rank in range(mesh.size):
        if len({node[r] for r in m.axis_group(axis, rank)}) > 1:
            return False
    return True


def _device_number(device):
    """N of "cuda:N" / "cpu:N"."""
    return int(str(device).rsplit(":", 1)[1])


def _family(dtype):
    """fp8_e4m3 -> fp8, fp6_e2m3 -> fp6, fp4_e2m1 -> fp4, uint8 -> int8: vendors rate formats by width."""
    if dtype.startswith(("fp8", "fp6", "fp4")):
        return dtype.split("_")[0]
    if dtype == "uint8":
        return "int8"
    return dtype


# --- presets ---------------------------------------------------------------
#
# Per-device figures. Vendor datasheets quote NVLink bandwidth as the total of
# both directions and tensor-core throughput "with sparsity"; a ring moves
# data in one direction per link at a time and a dense product gets half the
# sparse rate, so both are halved here. fp32 products are priced at the
# non-tensor FP32 rate (Tessera's fp32 is IEEE fp32, not TF32). Latencies are
# approximate per-step figures (a hop through the switch plus the software
# around it); vendors publish none.

_NVLINK5 = Link(900.0, 2.0, "NVLink 5 via NVLink Switch")
_NVLINK4 = Link(450.0, 2.0, "NVLink 4 via NVSwitch")
_PCIE5 = Link(64.0, 3.0, "PCIe Gen5 x16")
_IB_NDR = Link(50.0, 5.0, "InfiniBand NDR 400 Gb/s")
_CPU_COPY = Link(10.0, 5.0, "in-process memcpy (assumed)")

# H100 SXM5 and H200 SXM share one compute rating (H200 changes memory only).
_H100_SXM_TFLOPS = {"fp64": 67.0, "fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9,
                    "int8": 1978.9}
_H100_PCIE_TFLOPS = {"fp64": 51.0, "fp32": 51.0, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0, "fp8": 1513.0,
                     "int8": 1513.0}
# GB200 NVL72 rack figures divided by 72 GPUs (and by 2 where quoted with sparsity).
_B200_NVL72_TFLOPS = {"fp64": 40.0, "fp32": 80.0, "tf32": 1250.0, "bf16": 2500.0, "fp16": 2500.0, "fp8": 5000.0,
                      "fp6": 5000.0, "fp4": 10000.0, "int8": 5000.0}

PRESET_SOURCES = {
    "nvl72": (
        "NVIDIA GB200 NVL72 product page and datasheet: 72 Blackwell GPUs in one NVLink domain, 130 TB/s NVLink "
        "(1.8 TB/s per GPU both directions, so 900 GB/s each way, NVLink 5); FP16/BF16 tensor core 360 PFLOPS, "
        "FP8/FP6 720 PFLOPS, FP4 1,440 PFLOPS, TF32 180 PFLOPS per rack with sparsity, FP32 5,760 TFLOPS, "
        "FP64 2,880 TFLOPS per rack",
        "NVIDIA ConnectX-7 datasheet: 400 Gb/s InfiniBand NDR (50 GB/s each way), one adapter per GPU assumed "
        "for the links between racks",
    ),
    "dgx-h100": (
        "NVIDIA DGX H100 datasheet: 8x H100 SXM5, 4x NVSwitch, 900 GB/s NVLink 4 per GPU both directions "
        "(450 GB/s each way), 8x ConnectX-7 400 Gb/s (one per GPU) between nodes",
        "NVIDIA H100 Tensor Core GPU datasheet (SXM5): BF16/FP16 1,979 TFLOPS, FP8 3,958 TFLOPS, TF32 989 TFLOPS "
        "with sparsity; FP32 67 TFLOPS; FP64 tensor core 67 TFLOPS",
    ),
    "dgx-h200": (
        "NVIDIA DGX H200 datasheet: 8x H200 SXM, NVLink 4 900 GB/s per GPU both directions (450 GB/s each way), "
        "8x ConnectX-7 400 Gb/s between nodes",
        "NVIDIA H200 Tensor Core GPU datasheet: the H100 SXM5 compute figures (BF16 1,979 TFLOPS with sparsity, "
        "FP32 67 TFLOPS); 141 GB HBM3e at 4.8 TB/s",
    ),
    "pcie-gen5": (
        "PCI-SIG PCIe 5.0: 32 GT/s per lane, x16 = 63 GB/s each way after 128b/130b encoding (about 64 GB/s); "
        "8 GPUs per server, ConnectX-7 400 Gb/s between servers",
        "NVIDIA H100 Tensor Core GPU datasheet (PCIe): BF16/FP16 1,513 TFLOPS, FP8 3,026 TFLOPS, TF32 756 TFLOPS "
        "with sparsity; FP32 51 TFLOPS; FP64 tensor core 51 TFLOPS",
    ),
    "cpu": (
        "An assumption, not a measurement: the virtual devices of one process exchange shards by memcpy at about "
        "10 GB/s per device, with about 5 us per step for the threads' hand-off; no compute figure (CPU "
        "throughput varies too much to assume one: give a System with peak_tflops)",
    ),
}

PRESETS = {
    "nvl72": System("nvl72", {"*": _NVLINK5}, dict(_B200_NVL72_TFLOPS), node_size=72, inter_node=_IB_NDR,
                    sources=PRESET_SOURCES["nvl72"]),
    "dgx-h100": System("dgx-h100", {"*": _NVLINK4}, dict(_H100_SXM_TFLOPS), node_size=8, inter_node=_IB_NDR,
                       sources=PRESET_SOURCES["dgx-h100"]),
    "dgx-h200": System("dgx-h200", {"*": _NVLINK4}, dict(_H100_SXM_TFLOPS), node_size=8, inter_node=_IB_NDR,
                       sources=PRESET_SOURCES["dgx-h200"]),
    "pcie-gen5": System("pcie-gen5", {"*": _PCIE5}, dict(_H100_PCIE_TFLOPS), node_size=8, inter_node=_IB_NDR,
                        sources=PRESET_SOURCES["pcie-gen5"]),
    "cpu": System("cpu", {"*": _CPU_COPY}, {}, sources=PRESET_SOURCES["cpu"]),
}


def _system_of(system):
    if isinstance(system, System):
        return system
    if isinstance(system, str) and system in PRESETS:
        return PRESETS[system]
    known = ", ".join(f'"{k}"' for k in PRESETS)
    if system is None:
        raise ArgumentError(f"tessera.dist.estimate needs system=: one of {known}, or a tessera.dist.System")
    raise ArgumentError(f"tessera.dist.estimate: unknown system {system!r}; known systems: {known} "
                        f"(or describe one with tessera.dist.System)")


# --- reading a per-shard function ------------------------------------------

COLLECTIVES = ("allreduce", "all_gather", "reduce_scatter", "all_to_all", "shard_slice")
# Ring algorithm per collective: (steps, bytes sent per device) of n members and payload S.
_RING = {
    "allreduce": (lambda n: 2 * (n - 1), lambda n, s: 2 * (n - 1) / n * s),
    "all_gather": (lambda n: n - 1, lambda n, s: (n - 1) / n * s),
    "reduce_scatter": (lambda n: n - 1, lambda n, s: (n - 1) / n * s),
    "all_to_all": (lambda n: n - 1, lambda n, s: (n - 1) / n * s),
    "shard_slice": (lambda n: 0, lambda n, s: 0.0),
}

_TYPE = re.compile(r"tensor<\[([^\]]*)\]\s+([A-Za-z0-9_]+)")
_OP = re.compile(r"^\s*%([\w.]+)(?::(\d+))?\s*=\s*(graph\.\w+)\b(.*)$")
_PARAM = re.compile(r"%([\w.]+):\s*(tensor<[^>]*>)")
_OPERAND = re.compile(r"%([\w.#]+)")


@dataclass(frozen=True)
class TensorType:
    shape: tuple
    dtype: str

    @property
    def nbytes(self):
        elements = math.prod(self.shape)
        return elements * _bits(self.dtype) / 8


_BITS = {}


def _bits(dtype):
    bits = _BITS.get(dtype)
    if bits is None:
        d = _C.dtype(dtype)
        bits = _BITS[dtype] = (d.storage if isinstance(d, _C.Policy) else d).bits
    return bits


def _parse_type(text):
    m = _TYPE.search(text)
    if m is None:
        return None
    dims = [d.strip() for d in m.group(1).split(",") if d.strip()]
    if not all(d.isdigit() for d in dims):
        return None  # symbolic dims: sizes unknown (the partitioned functions have none)
    return TensorType(tuple(int(d) for d in dims), m.group(2))


def _split_top(text, sep=","):
    """Splits at ``sep`` outside <>, [], (), {} and quotes."""
    parts, depth, quoted, start = [], 0, False, 0
    for i, ch in enumerate(text):
        if ch == '"':
            quoted = not quoted
        elif quoted:
            continue
        elif ch in "<[({":
            depth += 1
        elif ch in ">])}":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def _split_op(rest):
    """The text after an op's name -> (operands, attributes, result types)."""
    attrs, types = "", ""
    depth, quoted, brace_at, colon_at = 0, False, None, None
    for i, ch in enumerate(rest):
        if ch == '"':
            quoted = not quoted
        elif quoted:
            continue
        elif ch == "{":
            if depth == 0 and brace_at is None:
                brace_at = i
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0 and brace_at is not None and not attrs:
                attrs = rest[brace_at:i + 1]
        elif ch in "<[(":
            depth += 1
        elif ch in ">])":
            depth -= 1
        elif ch == ":" and depth == 0:
            colon_at = i
            break
    head = rest[:colon_at] if colon_at is not None else rest
    operand_text = head[:brace_at] if brace_at is not None else head
    operands = _OPERAND.findall(operand_text)
    if colon_at is not None:
        types = rest[colon_at + 1:]
    return operands, attrs, [_parse_type(t) for t in _split_top(types)] if types.strip() else []


def _attr(attrs, name):
    m = re.search(rf'(?:[{{,]\s*){name}\s*=\s*("(?:[^"\\]|\\.)*"|[^,}}]+)', attrs)
    if m is None:
        return None
    v = m.group(1).strip()
    return v[1:-1] if v.startswith('"') else v


@dataclass
class _Op:
    name: str
    result: str
    operands: list
    attrs: str
    result_types: list


def _read_function(text):
    """The ops of one function's text, with a type for every value (parameters and results)."""
    lines = text.splitlines()
    types, ops = {}, []
    header = lines[0] if lines else ""
    params = header[header.find("(") + 1:header.find(") ->") if ") ->" in header else len(header)]
    for name, t in _PARAM.findall(params):
        types[name] = _parse_type(t)
    for line in lines[1:]:
        m = _OP.match(line)
        if m is None:
            continue
        result, count, op_name, rest = m.group(1), m.group(2), m.group(3), m.group(4)
        operands, attrs, result_types = _split_op(rest)
        if count is None:
            types[result] = result_types[0] if result_types else None
        else:  # %3:2 = ... is used as %3#0, %3#1
            for k, t in enumerate(result_types):
                types[f"{result}#{k}"] = t
        ops.append(_Op(op_name, result, operands, attrs, result_types))
    return ops, types


# --- the estimate ----------------------------------------------------------


@dataclass(frozen=True)
class Collective:
    """One collective of the per-shard function: ``payload_bytes`` is S of the
    ring formula (module docstring), ``bytes_sent`` = ``bytes_received`` per device."""

    kind: str
    axis: str
    axis_size: int
    value: str
    payload_bytes: float
    bytes_sent: float
    steps: int
    time_s: float

    @property
    def bytes_received(self):
        return self.bytes_sent


@dataclass(frozen=True)
class AxisEstimate:
    """One mesh axis: ``collectives`` counts each kind; bytes are per device,
    summed over the axis's collectives; ``link`` is None for an axis of one
    member, and ``scope`` says how it was chosen ("axis": named by the
    system, "intra-node", "inter-node", "none")."""

    axis: str
    size: int
    link: Link | None
    scope: str
    collectives: dict
    bytes_sent: float
    bytes_received: float
    steps: int
    time_s: float


class Estimate:
    """What ``tessera.dist.estimate`` returns: per mesh axis (``axes``), the
    collectives by kind, bytes each device sends and receives and their time;
    ``communication_time_s``, ``flops``, ``compute_time_s`` (None when the
    system has no peak figure for a dtype used) and ``time_s`` (their sum: no
    overlap assumed). ``str()`` is a short table, ``as_dict()`` the numbers."""

    def __init__(self, system, mesh, function, ranks, axes, collectives, flops_by_dtype, compute_time_s,
                 missing_peaks):
        self.system = system
        self.mesh = mesh
        self.function = function
        self.ranks = tuple(ranks)
        self.axes = axes
        self.collectives = tuple(collectives)
        self.flops_by_dtype = dict(flops_by_dtype)
        self.flops = sum(self.flops_by_dtype.values())
        self.compute_time_s = compute_time_s
        self.missing_peaks = tuple(missing_peaks)
        self.communication_time_s = sum(a.time_s for a in axes.values())
        self.time_s = self.communication_time_s + (compute_time_s or 0.0)

    def as_dict(self):
        return {
            "system": self.system.name,
            "mesh": {"axes": list(self.mesh.axes), "shape": list(self.mesh.shape)},
            "function": self.function,
            "ranks": list(self.ranks),
            "algorithm": "ring",
            "axes": {
                name: {
                    "size": a.size,
                    "link": None if a.link is None else {
                        "name": a.link.name, "bandwidth_gbps": a.link.bandwidth_gbps,
                        "latency_us": a.link.latency_us, "scope": a.scope},
                    "collectives": dict(a.collectives),
                    "bytes_sent": a.bytes_sent,
                    "bytes_received": a.bytes_received,
                    "steps": a.steps,
                    "time_s": a.time_s,
                } for name, a in self.axes.items()
            },
            "collectives": [
                {"kind": c.kind, "axis": c.axis, "axis_size": c.axis_size, "value": c.value,
                 "payload_bytes": c.payload_bytes, "bytes_sent": c.bytes_sent, "bytes_received": c.bytes_received,
                 "steps": c.steps, "time_s": c.time_s} for c in self.collectives
            ],
            "communication_time_s": self.communication_time_s,
            "flops": self.flops,
            "flops_by_dtype": dict(self.flops_by_dtype),
            "compute_time_s": self.compute_time_s,
            "time_s": self.time_s,
        }

    def __str__(self):
        mesh_text = ", ".join(f"{a}={n}" for a, n in zip(self.mesh.axes, self.mesh.shape))
        lines = [f"estimate of {self.function} on {self.system.name} (mesh {mesh_text}; the function of "
                 f"{_ranks_text(self.ranks, self.mesh.size)}; ring algorithms, bytes per device)"]
        rows = [("axis", "size", "link", "collectives", "sent", "received", "time")]
        for a in self.axes.values():
            kinds = ", ".join(f"{k} x{c}" for k, c in a.collectives.items() if c) or "-"
            link = "-" if a.link is None else f"{a.scope} {a.link.describe()}"
            rows.append((a.axis, str(a.size), link, kinds, _bytes(a.bytes_sent),
                         _bytes(a.bytes_received), _seconds(a.time_s)))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines += ["  " + "  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
        if self.compute_time_s is not None:
            compute = _seconds(self.compute_time_s)
        elif self.missing_peaks:
            compute = f"n/a (no peak figure for {', '.join(self.missing_peaks)} on {self.system.name})"
        else:
            compute = _seconds(0.0)
        lines.append(f"  communication {_seconds(self.communication_time_s)}; compute {compute} "
                     f"({self.flops:.4g} flop); total {_seconds(self.time_s)}")
        return "\n".join(lines)

    def __repr__(self):
        return (f"<tessera.dist.Estimate {self.function} on {self.system.name}: "
                f"communication {_seconds(self.communication_time_s)}, total {_seconds(self.time_s)}>")


def _num(v):
    return f"{v:g}"


def _bytes(n):
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.4g} B"


def _seconds(s):
    for unit, scale in (("s", 1.0), ("ms", 1e-3)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s * 1e6:.3g} us"


def _ranks_text(ranks, total):
    """"all 4 ranks", "rank 3" or "56 of 72 ranks: 0-13, 18-31, ...": runs of consecutive ranks."""
    runs = []
    for r in ranks:
        if runs and r == runs[-1][1] + 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    text = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs[:8]) + (", ..." if len(runs) > 8 else "")
    if len(ranks) == total:
        return f"all {total} ranks"
    return f"{len(ranks)} of {total} ranks: {text}" if len(ranks) > 1 else f"rank {text}"


def _estimate_function(text, mesh, system):
    """(axes, collectives, flops by dtype, compute time, dtypes without a peak) of one per-shard function."""
    ops, types = _read_function(text)
    axes = {}
    for axis, size in zip(mesh.axes, mesh.shape):
        # An axis of one member moves nothing and needs no link.
        link, scope = system.link_for(mesh, axis) if size > 1 else (None, "none")
        axes[axis] = {"size": size, "link": link, "scope": scope, "counts": {k: 0 for k in COLLECTIVES[:4]},
                      "sent": 0.0, "steps": 0, "time": 0.0}
    collectives, flops = [], {}
    for op in ops:
        kind = op.name.removeprefix("graph.")
        if kind in COLLECTIVES:
            collectives.append(_collective(op, kind, types, axes, mesh))
        elif kind in ("matmul", "gemm"):
            dtype, count = _matmul_flops(op, types)
            flops[dtype] = flops.get(dtype, 0) + count
    compute, missing = 0.0, []
    for dtype, count in flops.items():
        peak = system.peak_for(dtype)
        if peak is None:
            missing.append(dtype)
        else:
            compute += count / (peak * 1e12)
    axis_estimates = {
        name: AxisEstimate(name, a["size"], a["link"], a["scope"], a["counts"], a["sent"], a["sent"], a["steps"],
                           a["time"]) for name, a in axes.items()
    }
    return axis_estimates, collectives, flops, (None if missing else compute), missing


def _collective(op, kind, types, axes, mesh):
    axis = _attr(op.attrs, "axis")
    if axis not in axes:
        raise ArgumentError(f"graph.{kind} %{op.result} names mesh axis {axis!r}, which {mesh!r} does not have")
    n = int(_attr(op.attrs, "axis_size") or axes[axis]["size"])
    operand = types.get(op.operands[0]) if op.operands else None
    result = op.result_types[0] if op.result_types else None
    # S per the ring table: the gathered tensor for all_gather (its result),
    # the tensor each device holds before the collective otherwise.
    if kind == "all_gather":
        payload = result.nbytes if result is not None else operand.nbytes * n
    elif operand is not None:
        payload = operand.nbytes
    elif kind == "reduce_scatter":
        payload = result.nbytes * n
    else:
        payload = result.nbytes
    steps_of, sent_of = _RING[kind]
    steps, sent = steps_of(n), sent_of(n, payload)
    a = axes[axis]
    time = a["link"].seconds(steps, sent) if steps else 0.0
    if kind != "shard_slice":
        a["counts"][kind] += 1
    a["sent"] += sent
    a["steps"] += steps
    a["time"] += time
    return Collective(kind, axis, n, f"%{op.result}", payload, sent, steps, time)


def _matmul_flops(op, types):
    """(dtype, 2*M*N*K * batch) of graph.matmul / graph.gemm on per-shard shapes.

    The dtype that prices it is the wider operand's: a product runs at the
    rate of its widest format."""
    a, b = (types.get(v) for v in op.operands[:2])
    result = op.result_types[0]
    if a is None or b is None or result is None:
        raise ArgumentError(f"{op.name} %{op.result}: cannot read its operand shapes from the per-shard function")
    k = a.shape[-2] if _attr(op.attrs, "transpose_a") == "true" else a.shape[-1]
    dtype = max((a.dtype, b.dtype), key=_bits)
    return dtype, 2 * math.prod(result.shape) * k


# --- the entry point -------------------------------------------------------


def _jit_function(fn):
    from tessera.jit import JitFunction
    from tessera.kernel import Kernel
    if isinstance(fn, JitFunction):
        return fn
    if isinstance(fn, Kernel):
        raise ArgumentError(f"tessera.dist.estimate takes a Python or @tessera.jit function written over global "
                            f"shapes; kernel '{fn.name}' runs per shard (tessera.index_launch) and is not "
                            f"partitioned")
    if not callable(fn):
        raise ArgumentError(f"tessera.dist.estimate: fn must be a function (plain or @tessera.jit), "
                            f"got {type(fn).__name__}")
    return JitFunction(fn)


def partition(fn, args, kwargs, who="tessera.dist.estimate"):
    """The ShardedEntry a call of ``fn(*args, **kwargs)`` would run: traced and
    partitioned through fn's own cache (a later call reuses it), not run."""
    f = _jit_function(fn)
    bound, tensors, statics, bindings = f._classify(args, kwargs)
    if not any(_dist.is_dist(t) for t in tensors.values()):
        raise ArgumentError(f"{who} needs distributed tensors (tessera.dist.tensor) among the arguments of "
                            f"{f.__name__}(): their mesh and layouts are what it partitions over")
    entry, _ = f._sharded_entry(bound, tensors, statics, bindings)
    return entry


def estimate(fn, *args, system=None, **kwargs) -> Estimate:
    """Estimates one call of ``fn(*args, **kwargs)`` on ``system`` without running it.

    ``fn`` is a plain Python function or a ``@tessera.jit`` function over global
    shapes; at least one argument is a ``tessera.dist.tensor`` (its mesh is the
    mesh estimated). ``system`` is a preset name ("nvl72", "dgx-h100",
    "dgx-h200", "pcie-gen5", "cpu") or a ``tessera.dist.System``. The model is
    in this module's docstring and docs/guide/distribution.md."""
    sys_ = _system_of(system)
    entry = partition(fn, args, kwargs)
    mesh = entry.mesh
    best = None
    for index, name in enumerate(entry.functions):
        ranks = [r for r, k in enumerate(entry.function_of_rank) if k == index]
        result = _estimate_function(entry.graph.function_text(name), mesh, sys_)
        axes, _, _, compute, _ = result
        time = sum(a.time_s for a in axes.values()) + (compute or 0.0)
        if best is None or time > best[0]:
            best = (time, name, ranks, result)
    _, name, ranks, (axes, collectives, flops, compute, missing) = best
    return Estimate(sys_, mesh, name, ranks, axes, collectives, flops, compute, missing)
