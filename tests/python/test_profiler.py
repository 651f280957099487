"""tessera.profile: the Chrome trace (loaded back as JSON), the summary table,
the roofline PNG (opened again), and its errors."""

import json

import numpy as np
import pytest

import tessera
from tessera import ops


@pytest.fixture
def compiled(monkeypatch):
    monkeypatch.delenv("TESSERA_BACKEND", raising=False)
    monkeypatch.delenv("TESSERA_EAGER", raising=False)


def _mlp(x, w):
    return ops.softmax_safe(ops.relu(ops.matmul(x, w) + 1.0))


def test_trace_summary_and_roofline(compiled, tmp_path, capsys):
    rng = np.random.default_rng(0)
    x = tessera.tensor(rng.standard_normal((96, 80)).astype(np.float32))
    w = tessera.tensor(rng.standard_normal((80, 72)).astype(np.float32))
    f = tessera.jit(_mlp)
    trace, png = tmp_path / "trace.json", tmp_path / "roofline.png"
    with tessera.profile(str(trace), roofline=str(png)) as prof:
        for _ in range(3):
            f(x, w)
        ops.add(x, x)
    data = json.loads(trace.read_text())
    events = [e for e in data["traceEvents"] if e["ph"] == "X"]
    kernels = [e for e in events if e["cat"] == "kernel"]
    compiles = [e for e in events if e["cat"] == "compile"]
    # Three calls of two kernels, and the eager add.
    assert len(kernels) == 7
    gemm = [e for e in kernels if "graph.matmul" in e["args"]["ops"]]
    assert len(gemm) == 3 and all(e["args"]["family"] == "gemm" for e in gemm)
    assert gemm[0]["args"]["flops"] == 2 * 96 * 72 * 80
    assert gemm[0]["args"]["bytes"] == 4 * (96 * 80 + 80 * 72 + 96 * 72)
    assert all(e["dur"] > 0 and e["args"]["GB/s"] > 0 and e["args"]["device"] == "cpu" for e in kernels)
    assert [e["ts"] for e in kernels] == sorted(e["ts"] for e in kernels)
    assert any("graph.add" == e["args"]["ops"] and e["args"]["function"] == "eager" for e in kernels)
    # The first call compiled (or loaded) its executable, outside the kernel row.
    assert compiles and all(e["tid"] == 1 and isinstance(e["args"]["cache_hit"], bool) for e in compiles)
    out = capsys.readouterr().out
    assert "tessera.profile: 7 kernel launches" in out and "graph.softmax_safe" in out
    rows = prof.kernels()
    assert rows[0]["total_ms"] >= rows[-1]["total_ms"] and abs(sum(r["share"] for r in rows) - 1.0) < 1e-9
    image = pytest.importorskip("matplotlib.image").imread(str(png))
    assert image.shape[0] > 100 and image.shape[1] > 100


def test_the_reference_executor_records_no_kernels(compiled, monkeypatch):
    monkeypatch.setenv("TESSERA_BACKEND", "reference")
    with tessera.profile(summary=False) as prof:
        ops.add(tessera.tensor(np.ones(3, np.float32)), 1.0)
    assert prof.records == []


def test_profiles_do_not_nest(compiled):
    with tessera.profile(summary=False):
        with pytest.raises(tessera.ArgumentError, match="already running"):
            with tessera.profile(summary=False):
                pass
