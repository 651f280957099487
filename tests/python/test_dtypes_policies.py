"""Dtype objects, aliases, policies and their text/Python forms, error classes."""

import pytest

import tessera

CANONICAL = ["fp64", "fp32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp6_e2m3", "fp6_e3m2",
             "fp4_e2m1", "e8m0", "int4", "int8", "int16", "int32", "int64", "uint8", "bool"]


@pytest.mark.parametrize("name", CANONICAL)
def test_canonical_dtypes(name):
    d = tessera.dtype(name)
    assert d.name == name and str(d) == name
    attr = "bool_" if name == "bool" else name
    assert getattr(tessera, attr) == d
    assert repr(d) == f"tessera.{name}"


@pytest.mark.parametrize("alias,target", [("f64", "fp64"), ("f32", "fp32"), ("f16", "fp16"),
                                          ("float32", "fp32"), ("float16", "fp16"), ("half", "fp16"),
                                          ("bfloat16", "bf16")])
def test_aliases(alias, target):
    assert tessera.dtype(alias) == tessera.dtype(target)
    assert getattr(tessera, alias) == getattr(tessera, target)
    assert tessera.dtype(alias).name == target


def test_format_facts():
    assert tessera.fp8_e4m3.max == 448 and not tessera.fp8_e4m3.has_inf and tessera.fp8_e4m3.has_nan
    assert tessera.fp8_e5m2.max == 57344 and tessera.fp8_e5m2.has_inf
    assert tessera.fp6_e2m3.max == 7.5 and tessera.fp6_e3m2.max == 28 and tessera.fp4_e2m1.max == 6
    assert not tessera.fp4_e2m1.has_nan and tessera.e8m0.max == 2.0 ** 127
    assert tessera.int4.bits == 4 and tessera.int4.max is None and tessera.bf16.itemsize == 2


def test_tf32_is_a_math_mode_not_a_dtype():
    with pytest.raises(tessera.DtypeError, match='math_mode="tf32"') as info:
        tessera.dtype("tf32")
    assert info.value.code == "TE1002"
    assert isinstance(info.value, TypeError)


def test_unknown_dtype_suggests():
    with pytest.raises(tessera.DtypeError, match="did you mean 'fp8_e4m3'") as info:
        tessera.dtype("fp8_e4m")
    assert info.value.code == "TE1001"
    with pytest.raises(tessera.DtypeError, match="expects a dtype name"):
        tessera.dtype(3.5)


def test_policy_python_form():
    p = tessera.fp8_e4m3 @ tessera.accum(tessera.fp32)
    assert isinstance(p, tessera.Policy)
    assert p.storage == tessera.fp8_e4m3 and p.accum == tessera.fp32 and p.rounding == "nearest_even"
    assert str(p) == "fp8_e4m3 @accum(fp32)"
    full = p @ tessera.stochastic_round @ tessera.loss_scale(2.0)
    assert str(full) == "fp8_e4m3 @accum(fp32) @stochastic_round @loss_scale(2.0)"
    assert full.loss_scale == 2.0 and full.rounding == "stochastic"
    assert tessera.dtype(str(full)) == full
    assert tessera.dtype("fp6_e3m2 @accum(fp32)") == tessera.fp6_e3m2 @ tessera.accum("fp32")
    assert tessera.Policy("bf16", loss_scale=0.5) == tessera.bf16 @ tessera.loss_scale(0.5)


@pytest.mark.parametrize("text", [
    "fp8_e4m3 @accum(fp32)",
    "fp8_e4m3 @accum(fp32) @stochastic_round @loss_scale(2.0)",
    "bf16 @accum(fp32) @toward_zero @saturate",
    "fp6_e2m3 @accum(fp16) @loss_scale(0.001)",
    "int8 @accum(int32)",
    "fp64 @accum(fp64) @loss_scale(65536.0)",
])
def test_policy_text_round_trip(text):
    p = tessera.dtype(text)
    assert str(p) == text
    assert tessera.dtype(str(p)) == p
    assert hash(tessera.dtype(text)) == hash(p)


def test_policy_canonicalizes():
    assert str(tessera.dtype("fp16@loss_scale(2)  @accum( fp32 )")) == "fp16 @accum(fp32) @loss_scale(2.0)"
    assert str(tessera.dtype("fp16 @nearest_even @inf_nan")) == "fp16 @accum(fp32)"


@pytest.mark.parametrize("text,cls,code,col,pattern", [
    ("fp8_e4m3 @acum(fp32)", tessera.ParseError, "TE3002", 11, "did you mean '@accum'"),
    ("fp8_e4m3 @accum(fp33)", tessera.DtypeError, "TE1001", 17, "unknown dtype 'fp33'"),
    ("fp8_e4m3 @accum(fp32", tessera.ParseError, "TE3001", 21, "expected '\\)'"),
    ("fp8_e4m3 @stochastic_round @toward_zero", tessera.ParseError, "TE3003", 29, "rounding given twice"),
    ("fp8_e4m3 @loss_scale(-1)", tessera.ParseError, "TE3001", 22, "positive finite"),
    ("fp8_e4m3 accum", tessera.ParseError, "TE3001", 10, "expected '@'"),
    ("tf32 @accum(fp32)", tessera.DtypeError, "TE1002", 1, "math mode"),
])
def test_policy_errors_have_locations(text, cls, code, col, pattern):
    with pytest.raises(cls, match=pattern) as info:
        tessera.dtype(text)
    err = info.value
    assert err.code == code and err.line == 1 and err.col == col
    # The message shows the text and a caret under the column.
    lines = str(err).splitlines()
    assert lines[1].strip() == text.strip()
    assert lines[2].index("^") - lines[1].index(text[0]) == col - 1


def test_bad_policy_modifiers_in_python():
    with pytest.raises(tessera.DtypeError, match="policy modifier"):
        tessera.fp8_e4m3 @ 3
    with pytest.raises(tessera.ArgumentError, match="positive finite"):
        tessera.loss_scale(0.0)
    with pytest.raises(tessera.ArgumentError, match="unknown rounding"):
        tessera.Policy("fp16", rounding="nearest")


@pytest.mark.parametrize("code,cls,builtin", [
    (1001, tessera.DtypeError, TypeError), (2001, tessera.ShapeError, ValueError),
    (3001, tessera.ParseError, ValueError), (4001, tessera.KernelTypeError, TypeError),
    (5001, tessera.PrivilegeError, tessera.TesseraError), (6001, tessera.EffectError, tessera.TesseraError),
    (7001, tessera.CompileError, RuntimeError), (8001, tessera.DeviceError, RuntimeError),
    (9001, tessera.CollectiveError, RuntimeError), (10001, tessera.OutOfMemoryError, MemoryError),
    (11001, tessera.ArgumentError, ValueError), (1, tessera.TesseraError, Exception),
])
def test_cpp_errors_become_matching_python_classes(code, cls, builtin):
    with pytest.raises(cls) as info:
        tessera._C._raise_error(code, "boom")
    assert type(info.value) is cls
    assert isinstance(info.value, builtin) and isinstance(info.value, tessera.TesseraError)
    assert info.value.code == f"TE{code:04d}" and info.value.message == "boom"
