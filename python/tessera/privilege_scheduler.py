"""Asynchronous calls ordered by region privileges.

A call of a @jit function with ``tessera.Region`` parameters returns at
once; its work runs on a worker of this scheduler once what it depends on
is done. For each tensor passed to a Region parameter, in call order:

- a ``read`` call waits for the tensor's last writer and for the reductions
  into it so far; calls that only read the same tensors run concurrently;
- a ``write`` call computes at once and waits, before it stores, for every
  earlier reader, writer and reduction of the tensor;
- a ``reduce_*`` call computes its contribution at once (calls reducing into
  one tensor run concurrently) and folds it in after the earlier readers
  and writers of the tensor, and after the earlier folds: folds happen in
  call order, so the result is the same bits every run.

Tensors are tracked by object identity (another view of the same memory is
not seen). Reading a tensor with pending work through ``.numpy()``,
``tolist()``, ``item()``, numpy conversion, an eager op or another @jit
call waits for it; ``tessera.runtime.synchronize()`` waits for everything.
A call that raises stores its error: the next wait on what it writes (or
``synchronize()``) raises it, and calls that depend on it fail too.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from tessera.errors import TesseraError


class _Call:
    __slots__ = ("seq", "name", "done", "error", "start", "end", "worker", "compute_deps", "commit_deps",
                 "reported")

    def __init__(self, seq, name):
        self.seq = seq
        self.name = name
        self.done = threading.Event()
        self.error = None
        self.start = self.end = None
        self.worker = None
        self.compute_deps = []
        self.commit_deps = {}  # param -> calls its store waits for
        self.reported = False

    def __repr__(self):
        return f"<call #{self.seq} {self.name}>"


class _State:
    __slots__ = ("writer", "readers", "fold")

    def __init__(self):
        self.writer = None  # the last call that wrote the tensor
        self.readers = []   # reading calls since then
        self.fold = None    # the last call that reduced into it


class Scheduler:
    def __init__(self, workers=None):
        self._lock = threading.Lock()
        self._states = {}  # id(tensor) -> (tensor, _State); dropped once every call is done
        self._seq = 0
        self._calls = []  # every call not yet synchronized, in call order
        self.history = []  # (seq, name, start, end, worker) of finished calls (time.perf_counter s)
        workers = workers or max(4, os.cpu_count() or 1)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tessera-call")

    # -- submission --------------------------------------------------------------------
    def submit(self, name, accesses, compute):
        """``accesses``: [(param, tensor, privilege)]; ``compute()`` runs the function and returns
        {param: (kind, op, value)} for the regions it updates. Returns the call."""
        with self._lock:
            if self._calls and all(c.done.is_set() for c in self._calls):
                # Nothing pending: what is known about the tensors matters no more (failed calls
                # stay listed until a wait reports them).
                self._calls = [c for c in self._calls if c.error is not None and not c.reported]
                self._states.clear()
            self._seq += 1
            call = _Call(self._seq, name)
            targets = {}
            for param, tensor, privilege in accesses:
                state = self._state(tensor)
                targets[param] = tensor
                # A call never waits for itself (one tensor passed to two of its parameters).
                if privilege == "read":
                    call.compute_deps += [c for c in (state.writer, state.fold) if c is not None and c is not call]
                    state.readers.append(call)
                elif privilege == "write":
                    call.commit_deps[param] = [c for c in [state.writer, state.fold, *state.readers]
                                               if c is not None and c is not call]
                    state.writer, state.readers, state.fold = call, [], None
                else:  # reduce_*
                    call.commit_deps[param] = [c for c in [state.writer, state.fold, *state.readers]
                                               if c is not None and c is not call]
                    state.fold = call
            self._calls.append(call)
        self._pool.submit(self._run, call, compute, targets)
        return call

    def _state(self, tensor):
        # Holding the tensor keeps its id from being reused while the entry lives.
        entry = self._states.get(id(tensor))
        if entry is None:
            entry = self._states[id(tensor)] = (tensor, _State())
        return entry[1]

    # -- running ---------------------------------------------------------------------------
    def _run(self, call, compute, targets):
        call.start = time.perf_counter()
        call.worker = threading.current_thread().name
        try:
            _wait_all(call, call.compute_deps)
            effects = compute()
            for param, (kind, op, value) in effects.items():
                _wait_all(call, call.commit_deps.get(param, []))
                apply_effect(targets[param], kind, op, value)
        except BaseException as e:  # kept for the next wait on what it writes
            call.error = e
        finally:
            call.end = time.perf_counter()
            with self._lock:
                self.history.append((call.seq, call.name, call.start, call.end, call.worker))
            call.done.set()

    # -- waiting -----------------------------------------------------------------------------
    def wait_for(self, tensors):
        """Waits for the pending writers and reductions of ``tensors``; raises the error of a call
        that failed writing them."""
        if not self._calls:
            return
        with self._lock:
            calls = []
            for t in tensors:
                entry = self._states.get(id(t))
                if entry is not None and entry[0] is t:
                    calls += [c for c in (entry[1].writer, entry[1].fold) if c is not None]
        for c in calls:
            c.done.wait()
        for c in calls:
            _raise_once(c)

    def wait_all(self):
        """Waits for every call submitted so far, raising nothing; returns them."""
        with self._lock:
            calls = list(self._calls)
        for c in calls:
            c.done.wait()
        return calls

    def synchronize(self):
        calls = self.wait_all()
        try:
            for c in calls:
                _raise_once(c)
        finally:
            with self._lock:  # failed calls stay until a wait has reported them
                self._calls = [c for c in self._calls
                               if not c.done.is_set() or (c.error is not None and not c.reported)]

    def history_since(self, t0):
        """The finished calls that started at or after perf_counter time ``t0``."""
        with self._lock:
            return [h for h in self.history if h[2] >= t0]


def _wait_all(call, deps):
    for d in deps:
        d.done.wait()
        if d.error is not None:
            raise DependencyError(f"{call.name} (call #{call.seq}) did not run: call #{d.seq} of {d.name}, which it "
                                  f"waits for, failed: {d.error}") from d.error


class DependencyError(TesseraError):
    """A call did not run because a call it depends on failed."""


def _raise_once(call):
    if call.error is not None and not call.reported:
        call.reported = True
        raise call.error


def apply_effect(target, kind, op, value):
    """Stores a written value or folds a contribution into ``target`` in place: a host or device
    tensor, or a distributed tensor (shard by shard, in the target's layout)."""
    from tessera import _C
    if getattr(target, "_is_dist_tensor", False):
        if not getattr(value, "_is_dist_tensor", False):
            from tessera.dist._tensor import tensor as dist_tensor
            value = dist_tensor(value, mesh=target.mesh)
        from tessera.dist import _mpi
        if value._t.layout.describe() != target._t.layout.describe():
            value_shards = _mpi.complete(value).reshard(target._t.layout).shards
        else:
            value_shards = value._t.shards
            if getattr(value, "_remote_shards", False):
                # Under mpirun: the shards of other processes' devices are stand-ins,
                # so the target's become stale there too until a read fetches them.
                target._remote_shards = True
        pairs = list(zip(target._t.shards, value_shards))
    else:
        if getattr(value, "_is_dist_tensor", False):
            from tessera.dist import _mpi
            value = _mpi.complete(value).gather()
        pairs = [(target, value)]
    for t, v in pairs:
        _C._copy_into(t, _combine(op, t, v) if kind == "reduce" else v)


def _combine(op, target, value):
    # Straight to the eager kernels: the op wrappers would wait for the target, whose pending
    # fold is this very call.
    from tessera import _C
    name = {"sum": "graph.add", "max": "graph.maximum", "min": "graph.minimum"}[op]
    return _C.execute_op(name, [target, value], {})


_scheduler = None
_scheduler_lock = threading.Lock()


def scheduler():
    global _scheduler
    if _scheduler is None:
        with _scheduler_lock:
            if _scheduler is None:
                _scheduler = Scheduler()
                atexit.register(_shutdown)
    return _scheduler


def _shutdown():
    """At exit: finish the pending calls and drop the tensors the scheduler holds, so that none
    outlives the interpreter's teardown of the extension."""
    if _scheduler is None:
        return
    synchronize_quietly()
    _scheduler._pool.shutdown(wait=True)
    with _scheduler._lock:
        _scheduler._states.clear()
        _scheduler._calls.clear()


def wait_for(tensors):
    """Cheap when nothing was ever submitted."""
    if _scheduler is not None:
        _scheduler.wait_for(tensors)


def synchronize():
    if _scheduler is not None:
        _scheduler.synchronize()


def history_since(t0):
    return [] if _scheduler is None else _scheduler.history_since(t0)


def synchronize_quietly():
    """Waits for every call without raising (their errors stay for the next wait)."""
    if _scheduler is not None:
        _scheduler.wait_all()
