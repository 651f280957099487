"""Kernels from Python: @tessera.kernel, tessera.load, launches, jit, inspect_ir,
argument handling, located errors and the `tessera compile` command."""

import pathlib

# Kernel bodies below name the kernel language's built-ins (tile, tshared, shape
# symbols, ...): Python only compiles them; the C++ front end reads their text.
import numpy as np
import pytest

import tessera
from tessera import _C
from kernel_helpers import CONFORMANCE, kernel_cache  # noqa: F401

pytestmark = pytest.mark.usefixtures("kernel_cache")
THIS_FILE = pathlib.Path(__file__).resolve()


@tessera.kernel
def axpb(x: tessera.f32["n"], y: tessera.mut(tessera.f32["n"]), a: tessera.f32, b: tessera.f32):
    i = tile.linear_id()
    if i < n:
        y[i] = a * x[i] + b


@tessera.kernel(tile=(4, 8))
def ids(out: tessera.mut(tessera.int64["G", 32])):
    out[group_linear_id(), tile.linear_id()] = group_linear_id() * 1000 + tile.linear_id() * 10 + group_tile_count()


def scale_plain(x: tessera.f32["n"], y: tessera.mut(tessera.f32["n"]), alpha: tessera.f32):
    i = tile.linear_id()
    if i < n:
        y[i] = alpha * x[i]


def line_of(marker):
    """(line, text) of the line of this file holding `marker`."""
    for number, text in enumerate(THIS_FILE.read_text().splitlines(), start=1):
        if marker in text and "line_of(" not in text:
            return number, text
    raise AssertionError(marker)


# ---- Python-dialect kernels ----

def test_python_kernel_runs(rng):
    x = rng.standard_normal(50).astype(np.float32)
    y = np.zeros(50, np.float32)
    axpb(x, y, 2.5, -1.0)
    # a * x rounds once to fp32, then + b rounds once more.
    prod = (np.float64(2.5) * x.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(y, (prod.astype(np.float64) - 1.0).astype(np.float32))
    assert axpb.name == "axpb" and axpb.__name__ == "axpb"
    assert [p["name"] for p in axpb.params] == ["x", "y", "a", "b"]
    assert axpb.params[1]["mut"] and not axpb.params[0]["mut"]


def test_keyword_arguments(rng):
    x = rng.standard_normal(8).astype(np.float32)
    y = np.zeros(8, np.float32)
    axpb(x, b=0.0, a=1.0, y=y)
    np.testing.assert_array_equal(y, x)
    with pytest.raises(tessera.ArgumentError, match="did you mean 'b'"):
        axpb(x, y, 1.0, bb=0.0)
    with pytest.raises(tessera.ArgumentError, match="given twice"):
        axpb(x, y, 1.0, 2.0, x=x)


def test_group_shape_2d_ids():
    out = np.zeros((3, 32), np.int64)
    ids[np.int64(3)](out)  # numpy integers are grids too
    g = np.arange(3)[:, None]
    t = np.arange(32)[None, :]
    np.testing.assert_array_equal(out, g * 1000 + t * 10 + 32)
    assert ids.group_shape == (4, 8)


def test_kernel_applied_as_a_call(rng):
    k = tessera.kernel(scale_plain)  # no decorator in the source: the front end gets one built
    x = rng.standard_normal(9).astype(np.float32)
    y = np.zeros(9, np.float32)
    k(x, y, 3.0)
    np.testing.assert_array_equal(y, (3.0 * x.astype(np.float64)).astype(np.float32))


def test_numpy_mut_argument_is_written_in_place_through_a_strided_view(rng):
    big = np.zeros(20, np.float32)
    view = big[::2]  # 10 elements, stride 2: adopted without a copy
    x = rng.standard_normal(10).astype(np.float32)
    axpb(x, view, 1.0, 0.5)
    np.testing.assert_array_equal(big[::2], (x.astype(np.float64) + 0.5).astype(np.float32))
    np.testing.assert_array_equal(big[1::2], 0.0)


def test_read_only_numpy_input_is_accepted(rng):
    x = rng.standard_normal(6).astype(np.float32)
    x.flags.writeable = False
    y = np.zeros(6, np.float32)
    axpb(x, y, 1.0, 0.0)
    np.testing.assert_array_equal(y, x)
    y.flags.writeable = False
    with pytest.raises(tessera.ArgumentError, match="read-only"):
        axpb(x, y, 1.0, 0.0)


# ---- located kernel errors ----

def test_kernel_type_error_has_file_line_col():
    with pytest.raises(tessera.KernelTypeError) as info:
        @tessera.kernel
        def bad(x: tessera.f32["n"], y: tessera.f32["n"]):
            i = tile.linear_id()
            y[i] = x[i]  # MARK-WRITE-NOT-MUT
    e = info.value
    line, text = line_of("MARK-WRITE-NOT-MUT")
    assert e.file == str(THIS_FILE)
    assert e.line == line
    # The column is in this file's own text (the kernel is indented here).
    assert e.col == text.index("y[i]") + 1
    assert "mut" in e.message and "'y'" in e.message
    assert f"{THIS_FILE}:{line}:{e.col}" in str(e)
    assert text.rstrip() in str(e)  # the caret line shows the original line


def test_unknown_builtin_suggests(rng):
    with pytest.raises(tessera.KernelTypeError) as info:
        @tessera.kernel
        def bad2(y: tessera.mut(tessera.f32["n"])):
            y[tile.linear_idd()] = 1.0  # MARK-TYPO
    line, text = line_of("MARK-TYPO")
    assert info.value.line == line
    assert "linear_id" in str(info.value)


def test_tsr_parse_error_is_located(tmp_path):
    path = tmp_path / "broken.tsr"
    path.write_text("@kernel\ndef k(x: f32[n]):\n    i = tile.linear_id(\n")
    with pytest.raises(tessera.ParseError) as info:
        tessera.load(path)
    assert info.value.file == str(path) and info.value.line in (3, 4)
    assert f"{path}:" in str(info.value)


def test_load_errors(tmp_path):
    with pytest.raises(tessera.ArgumentError, match="nope.tsr"):
        tessera.load(tmp_path / "nope.tsr")
    f = tessera.load(CONFORMANCE / "scale.tsr")
    with pytest.raises(AttributeError, match="did you mean 'scale'"):
        f.scael
    with pytest.raises(KeyError):
        f["nothing"]
    assert "scale" in f and len(f) == 1 and [k.name for k in f] == ["scale"]


# ---- launch errors ----

def test_launch_errors_are_clear(rng):
    x = np.zeros(4, np.float32)
    y = np.zeros(4, np.float32)
    with pytest.raises(tessera.ArgumentError, match=r"takes 4 argument\(s\) \(x, y, a, b\), got 3"):
        axpb(x, y, 1.0)
    with pytest.raises(tessera.ArgumentError, match="'a' is a scalar fp32.*str"):
        axpb(x, y, "two", 1.0)
    with pytest.raises(tessera.ArgumentError, match="'x' is a buffer"):
        axpb(1.0, y, 1.0, 1.0)
    with pytest.raises(tessera.ShapeError, match="'n'.*4.*5"):
        axpb(x, np.zeros(5, np.float32), 1.0, 1.0)
    with pytest.raises(tessera.DtypeError, match="'x' is fp32 but the numpy array is float64"):
        axpb(np.zeros(4), y, 1.0, 1.0)
    with pytest.raises(tessera.DtypeError, match="mut fp32.*written in place.*int32"):
        axpb(x, np.zeros(4, np.int32), 1.0, 1.0)
    with pytest.raises(tessera.ArgumentError, match="number of groups"):
        axpb["many"]
    with pytest.raises(tessera.ArgumentError, match="group shape.*explicit grid"):
        ids(np.zeros((1, 32), np.int64))


def test_out_of_bounds_store_is_reported():
    @tessera.kernel
    def shift(y: tessera.mut(tessera.f32["n"])):
        y[tile.linear_id() + 1] = 1.0

    with pytest.raises(tessera.ArgumentError, match="shift|'y'"):
        shift(np.zeros(4, np.float32))


def test_bf16_buffers():
    @tessera.kernel
    def twice(x: tessera.bf16["n"], y: tessera.mut(tessera.bf16["n"])):
        i = tile.linear_id()
        y[i] = x[i] + x[i]

    x = np.array([1.0, 0.5, 3.0], np.float32)  # a float array is encoded into bf16 for an input
    y = tessera.tensor(np.zeros(3), dtype="bf16")
    twice(x, y)
    np.testing.assert_array_equal(y.numpy(), [2.0, 1.0, 6.0])
    with pytest.raises(tessera.DtypeError, match="numpy has no bf16 dtype"):
        twice(x, np.zeros(3, np.float32))


# ---- jit and inspect_ir ----

def test_jit_specializes_and_checks():
    gemm = tessera.load(CONFORMANCE / "gemm_tile.tsr").gemm_tile
    k = gemm.jit(BM=32, BN=32)
    assert k.constants == {"BM": 32, "BN": 32}
    assert k.tuned_names == ["BK"]
    assert gemm.tuned_names == ["BM", "BN", "BK"]
    with pytest.raises(tessera.ArgumentError, match="did you mean 'BM'"):
        gemm.jit(BMM=16)
    with pytest.raises(tessera.ArgumentError, match="already has BM=32"):
        k.jit(BM=64)
    with pytest.raises(tessera.ArgumentError, match="integers"):
        gemm.jit(BM=1.5)


def test_inspect_ir_of_a_jit_kernel():
    k = tessera.load(CONFORMANCE / "gemm_tile.tsr").gemm_tile.jit(BM=32, BN=32)
    tile_ir = k.jit(BK=16).inspect_ir("tile")
    assert "gmem<[M, K] fp32>" in tile_ir  # shapes stay symbolic unless specialized
    with pytest.raises(tessera.ArgumentError, match="tile level"):
        k.inspect_ir("graph")
    with pytest.raises(tessera.ArgumentError, match="did you mean 'target'"):
        k.inspect_ir("targte")


def test_inspect_target_is_the_cpu_source():
    src = axpb.inspect_ir("target")
    assert "tessera_cpu" in src
    tile_ir = axpb.inspect_ir("tile")
    assert "func @axpb" in tile_ir and "tile.store_elem" in tile_ir


# ---- the compile command ----

def cli(*args):
    return _C.run_cli(list(args))


def test_compile_command_levels(tmp_path):
    path = str(CONFORMANCE / "axpy_tiled.tsr")
    status, out, err = cli("compile", path, "--emit", "target", "-D", "BM=256", "-D", "m=1024")
    assert status == 0, err
    assert "extern \"C\"" in out and "tessera_cpu" in out and "1024" in out
    status, out, err = cli("compile", str(CONFORMANCE / "gemm_tile.tsr"), "--emit", "tile", "-D", "M=128")
    assert status == 0, err
    assert "func @gemm_tile" in out and "gmem<[128, K] fp32>" in out
    dest = tmp_path / "g.cpp"
    status, out, err = cli("compile", path, "--emit", "target", "--target", "cpu", "-o", str(dest))
    assert status == 0 and out == "" and "extern \"C\"" in dest.read_text()
    for level in ("graph", "schedule"):
        status, out, err = cli("compile", path, "--emit", level)
        assert status == 2 and "tile-level kernels" in err and "no " + level in err
    # CUDA C++ needs no GPU to emit.
    status, out, err = cli("compile", path, "--emit", "target", "--target", "cuda")
    assert status == 0, err
    assert "__global__" in out and "tessera_kernel" in out and "axpy_tiled" in out
    status, out, err = cli("compile", path, "--emit", "target", "-D", "XYZ=3")
    assert status == 1 and "XYZ" in err
    status, out, err = cli("compile", str(tmp_path / "missing.tsr"), "--emit", "target")
    assert status == 1 and "missing.tsr" in err


# ---- autotune results on disk ----

def test_corrupt_autotune_entry_is_searched_again(kernel_cache, capfd, monkeypatch):
    monkeypatch.delenv("TESSERA_LOG", raising=False)
    x = np.ones(384, np.float16)
    y = np.zeros(384, np.float16)
    tessera.load(CONFORMANCE / "axpy_tiled.tsr").axpy_tiled[1](x, y, 1.0)
    assert "chose" in capfd.readouterr().err
    entries = list((kernel_cache / "autotune").glob("*.txt"))
    assert entries
    for e in entries:
        text = e.read_text()
        assert text.startswith("tessera-autotune 1\nkey kernel=axpy_tiled ") and text.endswith("end\n")
        e.write_text(text[: len(text) // 2])  # truncated
    tessera.load(CONFORMANCE / "axpy_tiled.tsr").axpy_tiled[1](x, y.copy(), 1.0)
    err = capfd.readouterr().err
    assert "timing 4 candidates" in err and "using" not in err
    assert all(e.read_text().endswith("end\n") for e in entries)  # rewritten whole


@tessera.kernel
def fp4_twice_plus_half(x: tessera.fp4_e2m1["n"], y: tessera.mut(tessera.fp6_e3m2["n"])):
    i = tile.linear_id()
    if i < n:
        y[i] = x[i] * 2.0 + 0.5


def test_packed_sub_byte_buffers_are_kernel_parameters():
    """Packed fp4/fp6 tensors pass straight to CPU kernels: the launcher
    unpacks them to one code per byte and packs the mut one back. Lane
    arithmetic rounds to fp4 at each step (the operand's type), as ml_dtypes
    rounds it."""
    import ml_dtypes

    v = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.5, -1, -6, 0.5, 1.5, -3, 2], np.float32)
    x = tessera.tensor(v, "fp4_e2m1")
    y = tessera.tensor(np.full(v.size, 7.0, np.float32), "fp6_e3m2")
    fp4_twice_plus_half(x, y)
    f4 = ml_dtypes.float4_e2m1fn
    want = ((v * 2).astype(f4).astype(np.float32) + 0.5).astype(f4).astype(ml_dtypes.float6_e3m2fn)
    np.testing.assert_array_equal(y.numpy(), want.astype(np.float32))
    np.testing.assert_array_equal(x.numpy(), v)  # the input is untouched
