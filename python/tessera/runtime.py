"""``tessera.runtime``: process-wide runtime policy.

``set_mapper(M())`` installs a ``tessera.Mapper`` (tessera/mapper.py): meshes
built after it are placed by it, and functions compiled after it ask it for
collective algorithms and kernel variants. ``mapper_log()`` lists every
decision taken so far (also shown at the top of ``inspect_ir("schedule")``).
``synchronize()`` waits for the asynchronous calls of @jit functions with
``tessera.Region`` parameters (tessera/privilege_scheduler.py).
"""

from __future__ import annotations

from tessera.mapper import clear_mapper_log, get_mapper, mapper_log, set_mapper
from tessera.privilege_scheduler import scheduler as _scheduler


def synchronize() -> None:
    """Waits for every asynchronous call (the calls of @jit functions with tessera.Region
    parameters); raises the first error one of them raised that no wait has reported yet."""
    from tessera.privilege_scheduler import synchronize as sync
    sync()


def call_history() -> list:
    """(call number, function, start, end, worker) with time.perf_counter() times, of every finished asynchronous call, in the
    order they finished: what the profiler's call rows show."""
    return list(_scheduler().history)


__all__ = ["set_mapper", "get_mapper", "mapper_log", "clear_mapper_log", "synchronize", "call_history"]
