"""``tessera.profile``: a trace of the compiled kernels a block of code runs.

    with tessera.profile("trace.json", roofline="roofline.png"):
        step(w, x)

While the block runs, every compiled executable (``@jit`` functions, their
gradients, eager ops) records each kernel launch: its name, the function and
Graph IR ops it came from, its device, its time (wall time on the CPU, CUDA
events on a GPU), the bytes its operands and results occupy and an estimate
of its floating-point work; compiles are recorded apart. On exit it writes a
Chrome/Perfetto trace (open it at ui.perfetto.dev or chrome://tracing),
prints a summary table of the top kernels, and, when asked, a roofline plot
(PNG, needs matplotlib). The records stay available as ``prof.records``.
See docs/guide/profiler.md for what each figure means.
"""

from __future__ import annotations

import json
import time
import sys
from collections import defaultdict

from tessera import _C


class profile:
    """Context manager; see the module docstring."""

    def __init__(self, path: str | None = None, *, roofline: str | None = None, summary: bool = True,
                 top: int = 10, file=None):
        self.path = path
        self.roofline = roofline
        self.summary = summary
        self.top = top
        self.file = file
        self.records: list[dict] = []

    def __enter__(self):
        _C._profiler_start()
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        from tessera import privilege_scheduler
        privilege_scheduler.synchronize_quietly()  # the asynchronous calls of the block finish in it
        self.records = list(_C._profiler_stop())
        self.records += self._call_records()
        for r in self.records:
            seconds = r["duration_us"] * 1e-6
            r["gbps"] = r["bytes"] / seconds / 1e9 if seconds > 0 and r["kind"] != "compile" else 0.0
            r["tflops"] = r["flops"] / seconds / 1e12 if seconds > 0 and r["kind"] != "compile" else 0.0
        if self.path is not None:
            self.write_trace(self.path)
        if self.summary:
            print(self.table(), file=self.file or sys.stdout)
        if self.roofline is not None:
            self.write_roofline(self.roofline)
        return False

    def _call_records(self):
        """The asynchronous calls (tessera.Region functions) that ran in the block, one record each,
        on a row per scheduler worker: where the overlap the privileges allow shows."""
        from tessera import privilege_scheduler
        out = []
        for seq, name, start, end, worker in privilege_scheduler.history_since(self._t0):
            out.append({"kind": "call", "name": f"{name} #{seq}", "function": name, "ops": "", "family": "call",
                        "device": "calls", "worker": worker, "start_us": (start - self._t0) * 1e6,
                        "duration_us": (end - start) * 1e6, "bytes": 0.0, "flops": 0.0, "cache_hit": False})
        return out

    # ---- outputs ----

    def trace(self) -> dict:
        """The Chrome trace-event form: one complete ("X") event per record,
        kernels and compiles on their own rows of each device."""
        events = []
        devices = sorted({r["device"] for r in self.records})
        workers = sorted({r["worker"] for r in self.records if r["kind"] == "call"})
        for pid, device in enumerate(devices):
            events.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": device}})
            rows = workers if device == "calls" else ("kernels", "compile")
            for tid, row in enumerate(rows):
                events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": row}})
        for r in self.records:
            if r["kind"] == "call":
                events.append({"name": r["name"], "cat": "call", "ph": "X", "ts": r["start_us"],
                               "dur": r["duration_us"], "pid": devices.index("calls"),
                               "tid": workers.index(r["worker"]), "args": {"function": r["function"]}})
                continue
            compile_row = r["kind"] == "compile"
            args = {"function": r["function"], "device": r["device"]}
            if compile_row:
                args["cache_hit"] = r["cache_hit"]
            else:
                args.update(ops=r["ops"], family=r["family"], bytes=r["bytes"], flops=r["flops"],
                            **{"GB/s": round(r["gbps"], 3), "TFLOP/s": round(r["tflops"], 6)})
            events.append({"name": f"compile {r['name']}" if compile_row else f"{r['function']}.{r['name']}",
                           "cat": r["kind"], "ph": "X", "ts": r["start_us"], "dur": r["duration_us"],
                           "pid": devices.index(r["device"]), "tid": 1 if compile_row else 0, "args": args})
        return {"traceEvents": events, "displayTimeUnit": "ms"}

    def write_trace(self, path: str) -> None:
        with open(path, "w") as f:
            json.dump(self.trace(), f)

    def kernels(self) -> list[dict]:
        """Launches grouped by function, kernel and device: calls, total
        time, bytes, FLOPs and the achieved rates, longest first."""
        groups = defaultdict(lambda: {"calls": 0, "us": 0.0, "bytes": 0.0, "flops": 0.0})
        for r in self.records:
            if r["kind"] in ("compile", "call"):
                continue
            key = (r["function"], r["name"], r["ops"], r["device"])
            g = groups[key]
            g["calls"] += 1
            g["us"] += r["duration_us"]
            g["bytes"] += r["bytes"]
            g["flops"] += r["flops"]
        total = sum(g["us"] for g in groups.values()) or 1.0
        rows = []
        for (function, name, ops, device), g in groups.items():
            seconds = g["us"] * 1e-6
            gbps = g["bytes"] / seconds / 1e9 if seconds > 0 else 0.0
            peak = _C._peak_bandwidth_gbs(device)
            rows.append({"function": function, "kernel": name, "ops": ops, "device": device, "calls": g["calls"],
                         "total_ms": g["us"] / 1e3, "share": g["us"] / total, "gbps": gbps,
                         "tflops": g["flops"] / seconds / 1e12 if seconds > 0 else 0.0,
                         "peak_fraction": gbps / peak if peak > 0 else None})
        return sorted(rows, key=lambda row: -row["total_ms"])

    def table(self) -> str:
        rows = self.kernels()
        compiles = [r for r in self.records if r["kind"] == "compile"]
        lines = [f"tessera.profile: {sum(r['calls'] for r in rows)} kernel launches, "
                 f"{sum(r['total_ms'] for r in rows):.3f} ms in kernels; {len(compiles)} compiles, "
                 f"{sum(r['duration_us'] for r in compiles) / 1e3:.1f} ms"]
        header = f"{'kernel':<28}{'device':<8}{'calls':>6}{'total ms':>10}{'share':>7}{'GB/s':>9}{'TFLOP/s':>9}{'of peak BW':>11}  ops"
        lines.append(header)
        for r in rows[: self.top]:
            name = f"{r['function']}.{r['kernel']}"
            peak = f"{100 * r['peak_fraction']:.0f}%" if r["peak_fraction"] is not None else "-"
            lines.append(f"{name[:27]:<28}{r['device']:<8}{r['calls']:>6}{r['total_ms']:>10.3f}"
                         f"{100 * r['share']:>6.0f}%{r['gbps']:>9.1f}{r['tflops']:>9.3f}{peak:>11}  {r['ops']}")
        return "\n".join(lines)

    def write_roofline(self, path: str) -> None:
        """Each kernel at (FLOPs per byte, achieved TFLOP/s), log-log, with
        the memory-bandwidth roof of each GPU seen."""
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError as e:
            raise ImportError("tessera.profile(roofline=...) draws with matplotlib, which is not installed; "
                              "pip install matplotlib") from e
        rows = [r for r in self.kernels() if r["total_ms"] > 0]
        fig, ax = plt.subplots(figsize=(7, 5))
        for r in rows:
            intensity = max(r["tflops"] * 1e3 / r["gbps"], 1e-3) if r["gbps"] > 0 else 1e-3
            ax.scatter(intensity, max(r["tflops"], 1e-6), s=20 + 200 * r["share"])
            ax.annotate(f"{r['function']}.{r['kernel']}", (intensity, max(r["tflops"], 1e-6)), fontsize=7)
        for device in sorted({r["device"] for r in rows}):
            peak = _C._peak_bandwidth_gbs(device)
            if peak > 0:
                xs = [1e-3, 1e4]
                ax.plot(xs, [peak * x / 1e3 for x in xs], "--", label=f"{device} memory roof {peak:.0f} GB/s")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity (FLOP/byte)")
        ax.set_ylabel("achieved TFLOP/s")
        ax.set_title("tessera.profile roofline")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
