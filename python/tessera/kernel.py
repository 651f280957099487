"""Kernels from Python: ``@tessera.kernel``, ``tessera.load("file.tsr")`` and launches.

A kernel's source text is read by the C++ front end in both cases: a .tsr
file in the specification's syntax, or the source of a decorated Python
function (``inspect.getsource``) in the Python spelling::

    @tessera.kernel
    def scale(x: tessera.f32["n"], y: tessera.mut(tessera.f32["n"]), alpha: tessera.f32):
        i = tile.linear_id()
        if i < n:
            y[i] = alpha * x[i]

    scale(x, y, 2.0)            # one tile per element of y (no group shape)
    group_sum[4](x, out)        # 4 groups
    gemm[lambda c: cdiv(M, c["BM"]) * cdiv(N, c["BN"])](A, B, C)   # grid from tuned sizes
    k = gemm_tile.jit(M=4096, N=4096, K=4096)
    print(k.inspect_ir("tile")); print(k.inspect_ir("target"))
    scale(x.to("cuda:0"), y_gpu, 2.0)  # tensors on cuda:N: runs on that GPU
    print(scale.inspect_ir("target", target="cuda")); print(scale.inspect_ir("ptx"))

Arguments: ``tessera.Tensor``; numpy arrays; Python numbers for scalar
parameters. A numpy array whose dtype is the parameter's own storage
(float32 for f32, float16 for f16, ...) is used in place, without a copy, so
a kernel writing a ``mut`` parameter writes the caller's array. For a ``mut``
parameter any other numpy dtype is an error (a converted copy would drop the
kernel's writes); a dtype numpy cannot hold (bf16, fp8) needs a
``tessera.Tensor``. Read-only parameters of such dtypes accept float numpy
arrays, encoded (round to nearest even) into a temporary copy.

Devices: a launch runs where its tensors live. Tensors on ``cuda:N``
(``t.to("cuda:0")``, DLPack imports) run the kernel on that GPU through the
CUDA backend; numpy arrays are host memory, so mixing them (or tensors on two
devices) with GPU tensors is an ArgumentError naming the parameters.
Autotune spaces with several candidates are searched on the CPU only: fix
them with ``jit()`` before launching on a GPU.

Autotuning prints one line per candidate to standard error; TESSERA_LOG=quiet
silences it.
"""

from __future__ import annotations

import difflib
import inspect
import numbers
import os
import sys
import textwrap

import numpy as np

from tessera import _C
from tessera._tensor import Tensor, tensor
from tessera.errors import ArgumentError, DtypeError, _raise

__all__ = ["Kernel", "KernelFile", "kernel", "autotune", "load", "mut", "BufferType"]


# ---- annotations (evaluated by Python at def time; the front end reads the text) ----

class BufferType:
    """The annotation ``tessera.f32["M", "K"]`` (and ``tessera.mut(...)`` of one)."""

    def __init__(self, dtype, dims, mutable=False):
        self.dtype = dtype
        self.dims = tuple(dims)
        self.mutable = mutable

    def __repr__(self):
        inner = f'tessera.{self.dtype.name}[{", ".join(repr(d) for d in self.dims)}]'
        return f"tessera.mut({inner})" if self.mutable else inner


def _dtype_getitem(self, dims):
    return BufferType(self, dims if isinstance(dims, tuple) else (dims,))


_C.DType.__getitem__ = _dtype_getitem


def mut(buffer_type):
    """Marks a kernel buffer parameter writable: ``y: tessera.mut(tessera.f32["n"])``."""
    if not isinstance(buffer_type, BufferType):
        raise DtypeError(f"tessera.mut takes a buffer type such as tessera.f32[\"n\"], got {buffer_type!r}")
    return BufferType(buffer_type.dtype, buffer_type.dims, mutable=True)


# ---- progress ----

def _print_progress(event):
    if os.environ.get("TESSERA_LOG", "") == "quiet":
        return
    print(event["text"], file=sys.stderr, flush=True)


# ---- arguments ----

def _convert(k, index, param, value):
    name = param["name"]
    where = f"kernel '{k.name}' parameter '{name}'"
    if isinstance(value, Tensor):
        return value
    if isinstance(value, np.ndarray) and value.ndim == 0 and not param["buffer"]:
        value = value.item()
    if isinstance(value, np.ndarray):
        if not param["buffer"]:
            _raise(ArgumentError, "TE11001", f"{where} is a scalar {param['dtype'].name}, "
                                             f"but the argument is an array of shape {value.shape}")
        dtype = param["dtype"]
        native = _C._native_numpy_dtype(dtype)
        native = np.dtype(native) if native is not None else None
        if native is not None and value.dtype == native:
            if param["mut"] and not value.flags.writeable:
                _raise(ArgumentError, "TE11001", f"{where} is mut, but the numpy array is read-only")
            if not value.flags.writeable:  # adopted arrays must be writable; inputs get a copy
                value = value.copy()
            return _C._wrap_array(value, dtype)  # no copy: the kernel reads and writes this memory
        if param["mut"]:
            fix = (f"pass a {native} array" if native is not None else
                   f"numpy has no {dtype.name} dtype: pass a tessera.Tensor "
                   f"(tessera.tensor(a, dtype=\"{dtype.name}\")) and read it back with .numpy()")
            _raise(DtypeError, "TE1003", f"{where} is mut {dtype.name}: a numpy array for it is written in place, "
                                         f"so it must have that storage dtype, but it is {value.dtype}; {fix}")
        if native is None and value.dtype.kind in "fiub":
            return tensor(value, dtype=dtype)  # encoded copy (round to nearest even)
        _raise(DtypeError, "TE1003", f"{where} is {dtype.name} but the numpy array is {value.dtype}; "
                                     f"convert it first (a.astype(np.{native}))")
    if param["buffer"]:
        _raise(ArgumentError, "TE11001", f"{where} is a buffer {param['dtype'].name}"
                                         f"[{', '.join(param['dims'])}], but the argument is "
                                         f"{type(value).__name__} {value!r:.40}")
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    _raise(ArgumentError, "TE11001", f"{where} is a scalar {param['dtype'].name}, "
                                     f"but the argument is {type(value).__name__}")


_TARGETS = ("cuda", "cuda_tile")


def _check_target(target):
    if target not in _TARGETS:
        hint = difflib.get_close_matches(str(target), _TARGETS, n=1)
        _raise(ArgumentError, "TE11001", f"kernel target is \"cuda\" (CUDA C++ to PTX) or \"cuda_tile\" "
                                         f"(CUDA Tile IR), got {target!r}" + (f"; did you mean '{hint[0]}'?" if hint else ""))
    return target


def _is_grid(grid):
    return (isinstance(grid, numbers.Integral) and not isinstance(grid, bool)) or callable(grid)


class Kernel:
    """A kernel of the kernel language, launchable from Python.

    ``k(args...)`` launches one tile per element of the first ``mut``
    parameter (kernels without a group shape); ``k[grid](args...)`` launches
    ``grid`` groups, where grid is an int or a function of the compile-time
    constants (a dict) returning one. ``k.jit(M=4096, BM=64)`` fixes
    compile-time values and returns the specialized kernel.
    """

    def __init__(self, handle, function=None, target=None):
        self._k = handle
        # None: the target the decorator (or the .tsr file's @kernel) declared.
        self._target = handle.target if target is None else _check_target(target)
        self._params = handle.params
        self.__name__ = handle.name
        self.__wrapped__ = function
        self.__doc__ = function.__doc__ if function is not None else None

    # -- description --
    @property
    def name(self) -> str:
        return self._k.name

    @property
    def params(self):
        """Each parameter: name, buffer, mut, dtype and dims."""
        return [dict(p) for p in self._params]

    @property
    def target(self) -> str:
        """The NVIDIA target launches on cuda tensors use: "cuda" (CUDA C++ to PTX) or "cuda_tile" (CUDA Tile IR)."""
        return self._target

    @property
    def constants(self) -> dict:
        """The compile-time values fixed with jit()."""
        return self._k.constants

    @property
    def autotune_space(self) -> dict:
        return self._k.autotune_space

    @property
    def tuned_names(self) -> list:
        """Autotune names not fixed with jit(): searched when the kernel is launched."""
        return self._k.tuned_names

    @property
    def group_shape(self) -> tuple:
        return tuple(self._k.group_shape)

    def __repr__(self):
        sig = ", ".join(f"{p['name']}: {'mut ' if p['mut'] else ''}{p['dtype'].name}"
                        + (f"[{', '.join(p['dims'])}]" if p["buffer"] else "") for p in self._params)
        fixed = "".join(f" {n}={v}" for n, v in self.constants.items())
        return f"<tessera.Kernel {self.name}({sig}){' jit' + fixed if fixed else ''}>"

    # -- specialization and inspection --
    def jit(self, **constants) -> "Kernel":
        """The kernel with shape symbols and autotune names fixed at compile time."""
        return Kernel(self._k.jit(constants), self.__wrapped__, self._target)

    def inspect_ir(self, level: str = "tile", target: str = None, arch: str = None) -> str:
        """The kernel's code at one level.

        "tile": the Tile IR after the tile passes; "target": the generated
        code of a backend: the CPU backend's C++, or the CUDA C++ when
        ``target="cuda"`` (or ``"cuda:N"``) or when the last launch ran on a
        GPU (``target="cpu"`` forces the CPU's); "ptx": the PTX NVRTC makes of
        the CUDA C++ for ``arch`` ("sm_90a", "sm_80"; default: the GPU's own,
        or sm_90a where there is none; NVRTC needs no GPU). For a kernel
        declared with ``target="cuda_tile"`` (or with ``target="cuda_tile"``
        here), "target" is the CUDA Tile IR text form of the module tileiras
        assembles (needs neither a GPU nor tileiras).
        """
        if target == "cuda_tile":
            return self._k.inspect_ir(level, "cuda_tile", arch or "", "cuda_tile")
        return self._k.inspect_ir(level, target or "", arch or "", self._target)

    # -- launches --
    def __getitem__(self, grid):
        if not _is_grid(grid):
            _raise(ArgumentError, "TE11001", f"kernel '{self.name}': k[grid] takes the number of groups (an int) "
                                             f"or a function of the constants returning one, got {grid!r}")
        return _Launch(self, int(grid) if isinstance(grid, numbers.Integral) else grid)

    def __call__(self, *args, **kwargs):
        return self._launch(None, args, kwargs)

    def autotune(self, *args, grid=None, **kwargs) -> dict:
        """The constants the autotuner picks for these arguments (searching if needed) without launching."""
        if grid is not None and not _is_grid(grid):
            _raise(ArgumentError, "TE11001", f"kernel '{self.name}': grid= takes the number of groups (an int) "
                                             f"or a function of the constants returning one, got {grid!r}")
        grid = int(grid) if isinstance(grid, numbers.Integral) else grid
        return self._k.autotune(grid, self._convert(args, kwargs), _print_progress)

    def _convert(self, args, kwargs):
        params = self._params
        if kwargs:
            names = [p["name"] for p in params]
            positional = len(args)
            args = list(args)
            for key in kwargs:
                if key not in names:
                    hint = difflib.get_close_matches(key, names, n=1)
                    _raise(ArgumentError, "TE11001", f"kernel '{self.name}' has no parameter '{key}'"
                                                     + (f"; did you mean '{hint[0]}'?" if hint else ""))
                if names.index(key) < positional:
                    _raise(ArgumentError, "TE11001", f"kernel '{self.name}': '{key}' is given twice")
            for p in params[positional:]:
                if p["name"] not in kwargs:
                    _raise(ArgumentError, "TE11001", f"kernel '{self.name}': missing argument '{p['name']}'")
                args.append(kwargs[p["name"]])
        if len(args) != len(params):
            sig = ", ".join(p["name"] for p in params)
            _raise(ArgumentError, "TE11001", f"kernel '{self.name}' takes {len(params)} argument(s) ({sig}), "
                                             f"got {len(args)}")
        return [_convert(self, i, p, a) for i, (p, a) in enumerate(zip(params, args))]

    def _launch(self, grid, args, kwargs):
        self._k.launch(grid, self._convert(args, kwargs), _print_progress, nvidia_target=self._target)


class _Launch:
    """``k[grid]``: call it with the kernel's arguments."""

    def __init__(self, k, grid):
        self._kernel = k
        self._grid = grid

    def __call__(self, *args, **kwargs):
        return self._kernel._launch(self._grid, args, kwargs)


class KernelFile:
    """The kernels of a .tsr file: ``f.scale`` or ``f["scale"]``."""

    def __init__(self, path, kernels):
        self.path = path
        self._kernels = {k.name: k for k in kernels}

    def __getattr__(self, name):
        kernels = self.__dict__.get("_kernels", {})
        if name in kernels:
            return kernels[name]
        hint = difflib.get_close_matches(name, list(kernels), n=1)
        raise AttributeError(f"'{self.__dict__.get('path')}' has no kernel '{name}'"
                             + (f"; did you mean '{hint[0]}'?" if hint else "")
                             + f" (it has: {', '.join(kernels)})")

    def __getitem__(self, name):
        try:
            return self._kernels[name]
        except KeyError:
            hint = difflib.get_close_matches(str(name), list(self._kernels), n=1)
            raise KeyError(f"'{self.path}' has no kernel {name!r}"
                           + (f"; did you mean '{hint[0]}'?" if hint else "")) from None

    def __contains__(self, name):
        return name in self._kernels

    def __iter__(self):
        return iter(self._kernels.values())

    def __len__(self):
        return len(self._kernels)

    def __dir__(self):
        return list(super().__dir__()) + list(self._kernels)

    @property
    def names(self):
        return list(self._kernels)

    def __repr__(self):
        return f"<tessera.KernelFile {self.path}: {', '.join(self._kernels)}>"


def load(path, *, target=None) -> KernelFile:
    """The kernels of a .tsr file, as attributes (``f.scale``) and by name (``f["scale"]``).

    ``target``: the NVIDIA target their launches on cuda tensors use ("cuda"
    or "cuda_tile"); None keeps each kernel's own (``@kernel(target=...)``).
    """
    path = os.fspath(path)
    target = None if target is None else _check_target(target)
    return KernelFile(path, [Kernel(h, target=target) for h in _C.load_kernels(path)])


# ---- @tessera.kernel ----

def _decorator_text(options):
    parts = []
    if options.get("space") is not None:
        parts.append("space=dict(" + ", ".join(f"{n}={list(v)!r}" for n, v in options["space"].items()) + ")")
    if options.get("tile") is not None:
        parts.append(f"tile={tuple(options['tile'])!r}")
    if options.get("shared") is not None:
        parts.append(f"shared={int(options['shared'])}")
    if options.get("target") is not None:
        parts.append(f"target={options['target']!r}")
    head = "@kernel.autotune" if options.get("space") is not None else "@kernel"
    return head + (f"({', '.join(parts)})" if parts else "")


def _from_function(fn, options):
    if not inspect.isfunction(fn):
        _raise(ArgumentError, "TE11001", f"@tessera.kernel decorates a function, got {fn!r}")
    try:
        lines, first_line = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        _raise(ArgumentError, "TE11001", f"@tessera.kernel needs the source of '{fn.__name__}', and Python has "
                                         "none for it (defined in an interactive prompt or exec?); put the "
                                         "kernel in a file or a .tsr file (tessera.load)")
    text = "".join(lines)
    dedented = textwrap.dedent(text)
    column_offset = len(lines[0]) - len(dedented.splitlines(True)[0])
    file = inspect.getsourcefile(fn) or fn.__code__.co_filename
    first = next((ln.strip() for ln in dedented.splitlines() if ln.strip() and not ln.strip().startswith("#")), "")
    if not first.startswith("@"):
        # Applied as a call (tessera.kernel(f)): the decorator the front end reads is built from the options.
        dedented = _decorator_text(options) + "\n" + dedented
        first_line -= 1
    handles = _C.kernels_from_source(dedented, file, first_line, "python", column_offset)
    if len(handles) != 1:
        _raise(ArgumentError, "TE11001", f"@tessera.kernel: expected one kernel in '{fn.__name__}', "
                                         f"found {len(handles)}")
    return Kernel(handles[0], fn)


def kernel(fn=None, /, *, tile=None, shared=None, target=None):
    """Declares a kernel: ``@tessera.kernel`` or ``@tessera.kernel(tile=(128,), shared=8192)``.

    The decorator's text is what the front end reads, so write its values as
    literals (``tile=(16, 8)``, ``shared=8 * 1024``). ``target`` picks the
    NVIDIA target of launches on cuda tensors: "cuda" (CUDA C++ through NVRTC
    to PTX) or "cuda_tile" (CUDA Tile IR through tileiras; a kernel it cannot
    express is a CompileError naming the construct and its line, never run
    through PTX instead). Launches on host tensors run on the CPU either way.
    """
    options = {"tile": tile, "shared": shared, "target": None if target is None else _check_target(target)}
    if fn is not None:
        return _from_function(fn, options)
    return lambda f: _from_function(f, options)


def autotune(*, space, tile=None, shared=None):
    """``@tessera.kernel.autotune(space=dict(BM=[64, 128]))``: names searched at launch, per shape and device."""
    if not isinstance(space, dict) or not space:
        _raise(ArgumentError, "TE11001", "kernel.autotune needs space=dict(NAME=[candidates, ...])")
    options = {"space": space, "tile": tile, "shared": shared}
    return lambda f: _from_function(f, options)


kernel.autotune = autotune
