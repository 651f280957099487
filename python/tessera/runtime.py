"""``tessera.runtime``: process-wide runtime policy.

``set_mapper(M())`` installs a ``tessera.Mapper`` (tessera/mapper.py): meshes
built after it are placed by it, and functions compiled after it ask it for
collective algorithms and kernel variants. ``mapper_log()`` lists every
decision taken so far (also shown at the top of ``inspect_ir("schedule")``).
``memory_stats("cuda:0")`` reports the GPU caching allocator's counters (bytes
in use, cached, the peak since ``reset_peak_memory``). ``synchronize()`` waits
for the asynchronous calls of @jit functions with ``tessera.Region``
parameters (tessera/privilege_scheduler.py).
"""

from __future__ import annotations

from tessera.mapper import clear_mapper_log, get_mapper, mapper_log, set_mapper
from tessera.privilege_scheduler import scheduler as _scheduler


def synchronize() -> None:
    """Waits for every asynchronous call (the calls of @jit functions with tessera.Region
    parameters); raises the first error one of them raised that no wait has reported yet."""
    from tessera.privilege_scheduler import synchronize as sync
    sync()


def _gpu_ordinal(device: str, what: str) -> int:
    from tessera import _C
    from tessera.errors import DeviceError
    if not isinstance(device, str) or not device.startswith("cuda:") or not device[5:].isdigit():
        raise DeviceError(f"{what}: device must be 'cuda:N', got {device!r}")
    ordinal = int(device[5:])
    count = _C._cuda_device_count()
    if ordinal >= count:
        raise DeviceError(f"{what}: {device} does not exist ({count} CUDA device(s))")
    return ordinal


def memory_stats(device: str = "cuda:0") -> dict:
    """The caching allocator's counters of a GPU: bytes_in_use, bytes_cached, peak_in_use (the highest
    bytes_in_use since reset_peak_memory), allocations, frees, cache_hits, device_allocations."""
    from tessera import _C
    return dict(_C._cuda_memory_stats(_gpu_ordinal(device, "memory_stats")))


def reset_peak_memory(device: str = "cuda:0") -> None:
    """Restarts memory_stats(device)["peak_in_use"] from the bytes in use now."""
    from tessera import _C
    _C._cuda_reset_peak_memory(_gpu_ordinal(device, "reset_peak_memory"))


def empty_cache(device: str = "cuda:0") -> None:
    """Returns the caching allocator's unused blocks on a GPU to the driver (bytes_cached drops to 0);
    blocks in use are untouched. Later allocations start from a clean cache, so memory figures taken
    after it depend on the code measured alone, not on the blocks earlier work left behind."""
    from tessera import _C
    _C._cuda_empty_cache(_gpu_ordinal(device, "empty_cache"))


def call_history() -> list:
    """(call number, function, start, end, worker) with time.perf_counter() times, of every finished asynchronous call, in the
    order they finished: what the profiler's call rows show."""
    return list(_scheduler().history)


__all__ = ["set_mapper", "get_mapper", "mapper_log", "clear_mapper_log", "synchronize", "call_history",
           "memory_stats", "reset_peak_memory", "empty_cache"]
