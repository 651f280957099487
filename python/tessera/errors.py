"""Tessera's exceptions.

Every error Tessera raises is a ``TesseraError``. Each carries a stable
``code`` (``"TE1001"``), the bare ``message``, and, for errors in source text,
``file``, ``line`` and ``col``. Where a Python built-in fits, the class also
derives from it, so ``except ValueError`` catches a ``ShapeError``.
"""

from __future__ import annotations


class TesseraError(Exception):
    """Base of every error Tessera raises."""

    def __init__(self, text: str, code: str | None = None, message: str | None = None,
                 file: str | None = None, line: int | None = None, col: int | None = None):
        super().__init__(text)
        self.code = code
        self.message = message if message is not None else text
        self.file = file
        self.line = line
        self.col = col


class DtypeError(TesseraError, TypeError):
    """An unknown dtype name, a math mode used as a dtype, or a wrong array dtype."""


class ShapeError(TesseraError, ValueError):
    """Shapes or sizes that do not fit together."""


class ParseError(TesseraError, ValueError):
    """Malformed source text (policies, IR, kernels), with file:line:col."""


class KernelTypeError(TesseraError, TypeError):
    """A type error in kernel source."""


class PrivilegeError(TesseraError):
    """A region privilege violated."""


class EffectError(TesseraError):
    """An effect used where it is not allowed."""


class CompileError(TesseraError, RuntimeError):
    """A backend failed to compile generated code."""


class DeviceError(TesseraError, RuntimeError):
    """A device is unavailable or failed."""


class CollectiveError(TesseraError, RuntimeError):
    """A collective operation failed."""


class OutOfMemoryError(TesseraError, MemoryError):
    """An allocation failed."""


class ArgumentError(TesseraError, ValueError):
    """An argument whose value is outside what the operation accepts."""


def _raise(cls: type, code: str, message: str) -> None:
    """Raises ``cls`` the way the C++ core does, for checks done in Python."""
    raise cls(f"error[{code}]: {message}", code=code, message=message)


class ReferenceExecutorWarning(UserWarning):
    """An eager op ran on the reference executor (the slow oracle) because no
    compiled kernel covers it yet; the message names the op and why (shown
    once per message and calling line by Python's default warning filters).
    ``TESSERA_EAGER=reference`` chooses that executor for
    every eager op and so silences it."""
