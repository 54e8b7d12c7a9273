"""The schedulers a distributed run submits its tasks to.

`LocalBackend` runs them on Dask's local threaded scheduler (the lanes share the
driver's memory: a task of the round merges into the driver's state); `DistributedBackend`
on a ``dask.distributed`` cluster through its client (the state lives on the workers,
`replicas`). Both give the driver the same calls: start a block's task, submit a call,
wait for results, read blocks' metadata, release what is no longer needed.
"""
import contextlib
import itertools
import os
import sys
import uuid

import dask
import dask.threaded
import numpy as np
import scipy.sparse as sp
from dask.callbacks import Callback
from dask.delayed import Delayed

from onlinepgs.distributed.blocks import block_meta
from onlinepgs.distributed.sources.array import Unread, unread_meta

__all__ = ["DistributedBackend", "LocalBackend", "held_value", "row_block_keys"]


WORKER_CHECK_SECONDS = 5.0  # waiting for a round, how often to check its workers are up


class _Handle:
    """A block or task result of the local scheduler: done (its value), or pending (the
    task graph that makes it, its own task included, and its key)."""

    __slots__ = ("graph", "key", "value", "done", "task")

    def __init__(self, graph, key, task=False):
        self.graph, self.key, self.value, self.done = graph, key, None, False
        self.task = task  # a lane's (or another submitted call's), not a block's


def _lanes_first(tasks):
    """A `start_state` callback of the local scheduler that runs the ready tasks among
    `tasks` before any other ready task. dask.order ranks a round's lanes and the next
    round's block reads by the graph's shape alone, and put the reads first in some
    rounds: both threads read while no lane ran, and the faster lane then idled
    until the slower one was done. The order changes no result (a lane reads only the
    round's state and its own blocks)."""
    def start_state(dsk, state):
        # the scheduler pops its ready list from the end; sort is stable
        state["ready"].sort(key=lambda key: key in tasks)
    return start_state


def row_block_keys(array):
    """The keys of a dask array's row blocks, in order (`ArraySource` keeps its rows
    whole, one block of columns)."""
    return [k for row in array.__dask_keys__() for k in (row if isinstance(row, list)
                                                          else [row])]


def _own_graph(delayed_obj):
    """A block's task graph: its own tasks only. A partition's Delayed holds the whole
    array's graph, which a cluster's every block request sent to the scheduler (with
    every row of an array made of in-memory blocks: 1 M rows took 2.5-14.8 s to fit on
    a LocalCluster, 0.8-2.3 s culled)."""
    graph = delayed_obj.__dask_graph__()
    return dict(graph.cull({delayed_obj.key}) if hasattr(graph, "cull") else graph)


def held_value(graph, key):
    """The array a key of a task graph stands for when the graph holds it (through
    aliases), or None where a task makes it."""
    for _ in range(len(graph) + 1):
        value = graph.get(key)
        kind = type(value).__name__  # dask._task_spec's nodes (dask >= 2024.12)
        if kind == "Alias":
            key = value.target
            continue
        if kind == "DataNode":
            value = value.value
        if isinstance(value, np.ndarray) or sp.issparse(value):
            return value
        try:
            if isinstance(value, (tuple, str)) and value != key and value in graph:
                key = value  # an old-style alias: a key for a value
                continue
        except TypeError:  # a task's tuple with unhashable arguments
            pass
        return None
    return None


class LocalBackend:
    """Dask's local threaded scheduler. Tasks wait until results are asked for; then
    everything pending (the round's lanes, their merge and the blocks read ahead) runs at
    once on Dask's thread pool as one plain task graph handed to `dask.threaded.get`: a
    block's graph is culled to what it needs once, when it is requested, so that no round
    pays for `dask.compute`'s handling of collections (tokenizing, optimizing, ordering:
    about 3 ms a round, measured). The lanes that can start go first (`_lanes_first`): the
    blocks read ahead then fill the time a thread would wait for the slower lane, and the
    merge."""

    shares_memory = True  # the lanes read the driver's state; a task merges into it

    def __init__(self):
        self.pending = []
        self.prefix = f"onlinepgs-{uuid.uuid4().hex}-"
        self.count = itertools.count()

    def n_threads(self):
        return int(dask.config.get("num_workers", None) or os.cpu_count() or 1)

    def near(self, worker):
        return contextlib.nullcontext()

    def partition_futures(self, collection):
        return None  # no cluster, no futures

    def check_readable(self, collection, name):
        """Threads cannot read what a cluster holds (a persisted collection's futures)."""
        distributed = sys.modules.get("distributed")  # not imported: no futures
        if distributed is not None and distributed.futures_of(collection):
            raise ValueError(f"{name} is persisted on a dask.distributed cluster (its blocks "
                             "are futures there): pass that cluster's Client as client=, "
                             "or persist it with scheduler='threads'")

    def holds_values(self, array):
        """Whether every row block of a dask array is a value its graph holds (persisted,
        or made of arrays in memory), not a task that makes it."""
        graph = dict(array.__dask_graph__())
        return all(held_value(graph, key) is not None for key in row_block_keys(array))

    def _run(self):
        todo, self.pending = [h for h in self.pending if not h.done], []
        if not todo:
            return
        graph = {}
        for h in todo:
            graph.update(h.graph)
        tasks = {h.key for h in todo if h.task}
        # callbacks as dask.local.get_async takes them: (start, start_state, pretask,
        # posttask, finish), beside the user's (a progress bar)
        values = dask.threaded.get(graph, [h.key for h in todo], callbacks=[
            *Callback.active, (None, _lanes_first(tasks), None, None, None)])
        for h, v in zip(todo, values):
            h.value, h.done, h.graph = v, True, None

    def start(self, delayed_obj):
        key = delayed_obj.key
        if not isinstance(key, str):  # pragma: no cover - our blocks are named calls
            raise TypeError(f"a block's task needs a name, got the key {key!r}")
        h = _Handle(_own_graph(delayed_obj), key)
        self.pending.append(h)
        return h

    def submit(self, func, *args, priority=0):  # one graph a round: no priorities
        graph, call = {}, []
        for a in args:
            if isinstance(a, _Handle) and not a.done:
                graph.update(a.graph)
                call.append(a.key)  # a task's argument that names a key gets its value
            else:
                call.append(_Opaque(a.value if isinstance(a, _Handle) else a))
        key = self.prefix + str(next(self.count))
        graph[key] = (_call_opaque, func, *call)
        h = _Handle(graph, key, task=True)
        self.pending.append(h)
        return h

    def results(self, handles):
        self._run()
        return [h.value for h in handles]

    def metas(self, handles):
        self._run()
        return [block_meta(h.value) for h in handles]

    def compute(self, obj):
        return dask.compute(obj, scheduler="threads")[0]

    def compute_all(self, objs):
        return list(dask.compute(*objs, scheduler="threads")) if objs else []

    def release(self, handle):
        handle.value = None

    def run_everywhere(self, func, *args):
        func(*args)

    def close(self):
        self.pending = []


class _Opaque:
    """An argument of a plain task, kept from Dask's eyes: a task graph reads tuples as
    calls and strings as keys, and would walk into lists."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def _call_opaque(func, *args):
    return func(*[a.value if isinstance(a, _Opaque) else a for a in args])


class DistributedBackend:
    """A dask.distributed cluster: blocks stay on the workers that read them (futures),
    each lane's tasks run on its worker, which keeps its copy of the global state
    (`Driver._submit_round`): only the lanes' sparse changes cross the network between
    rounds, and the driver fetches the state at the end of a pass (or every round for a
    callback)."""

    shares_memory = False  # the state and its merges live on the workers

    def __init__(self, client):
        self.client = client  # a distributed.Client (checked by RunOptions)
        self.meta_cache = {}
        self.preferred = None  # see near

    def n_threads(self):
        return max(1, sum(self.client.nthreads().values()))

    def check_readable(self, collection, name):
        pass  # the client reads its cluster's futures

    def holds_values(self, array):
        return False  # a cluster's persisted blocks are its workers' (partition_futures)

    def partition_futures(self, collection):
        """The futures of a persisted dask array's row blocks, in order; None unless
        every block is one."""
        from distributed import futures_of

        found = {f.key: f for f in futures_of(collection)}
        keys = row_block_keys(collection)
        return [found[k] for k in keys] if all(k in found for k in keys) else None

    def holders(self, X):
        """The workers holding each row block of a dask array (empty if none), once
        its persisted blocks are made: client.persist returns before, when no worker
        holds them yet."""
        from distributed import futures_of, wait

        futures = futures_of(X)
        wait(futures)
        for future in futures:
            if future.status == "error":
                future.result()  # the block's own error, not "held by no worker"
        found = self.client.who_has(X)
        return [set(found.get(key, found.get(str(key), ()))) for key in row_block_keys(X)]

    @contextlib.contextmanager
    def near(self, worker):
        """Blocks requested within go to `worker` (the lane's, which trains them) where
        it can take them: read elsewhere, a block would cross to it every round."""
        self.preferred = worker
        try:
            yield
        finally:
            self.preferred = None

    def _placement(self, worker=None):
        """Where a task may run: a lane's tasks use its copy of the state, so only on
        its worker (nor stolen); blocks preferably where their lane trains (`near`)."""
        if worker is not None:
            return dict(workers=[worker], allow_other_workers=False)
        if self.preferred is not None:
            return dict(workers=[self.preferred], allow_other_workers=True)
        return {}

    def start(self, delayed_obj):
        return self.client.compute(Delayed(delayed_obj.key, _own_graph(delayed_obj)),
                                   **self._placement())

    def lane_workers(self, n_lanes, workers=None):
        """The worker of each lane: `workers` (locality), else the workers in address
        order, dealt round-robin (a worker with several threads gets several lanes)."""
        if workers is None:
            workers = sorted(self.client.nthreads())
        return [workers[i % len(workers)] for i in range(n_lanes)]

    def submit(self, func, *args, priority=0, worker=None):
        return self.client.submit(func, *args, pure=False, priority=priority,
                                  **self._placement(worker))

    def scatter(self, value, workers):
        """`value` on each of `workers` at once (else the second waits for a copy from the
        first, 7-16 ms for a 262,145-coordinate state, bench/dask_timeline.py)."""
        return self.client.scatter(value, workers=sorted(set(workers)), broadcast=True,
                                   hash=False)

    def result(self, future, workers=()):
        self.settle(future, workers)
        return future.result()

    def settle(self, futures, workers=()):
        """Wait for tasks without fetching their results; raise the first error. A task
        bound to a worker that left the cluster would wait for it for ever: that is an
        error too (`workers`: those the tasks are bound to)."""
        from concurrent.futures import CancelledError

        from distributed import wait

        futures = futures if isinstance(futures, list) else [futures]
        while True:
            try:
                wait(futures, timeout=WORKER_CHECK_SECONDS)
                break
            except CancelledError:
                # the scheduler dropped the round's tasks: a worker restarted under them
                raise RuntimeError(
                    "the cluster cancelled a round's tasks: a worker restarted or left "
                    "during the fit, and the lanes' copies of the state it held cannot be "
                    "rebuilt. The model is left as it was; fit again.") from None
            except TimeoutError:
                gone = set(workers) - set(self.client.nthreads())
                if gone:
                    raise RuntimeError(
                        f"worker {sorted(gone)[0]} left the cluster during the fit; its "
                        "lanes train from its copy of the state, which no other worker "
                        "has. The model is left as it was; fit again.") from None
        for future in futures:
            if future.status == "error":
                future.result()

    def metas(self, futures):
        todo = [f for f in futures if f.key not in self.meta_cache]
        if todo:
            found = self._gathered([
                self.client.submit(unread_meta, f.spec, *f.inputs, f.recipe, pure=False)
                if isinstance(f, Unread) else
                self.client.submit(block_meta, f, pure=False) for f in todo])
            for f, m in zip(todo, found):
                self.meta_cache[f.key] = m
        return [self.meta_cache[f.key] for f in futures]

    def _gathered(self, futures):
        """The results of futures made for the asking, which are then released. A
        failed task's exception, kept by the client with the task's key, gets the
        frames it is raised through, and they hold the futures of that key: unreleased,
        the key, the futures and those frames stayed on the client for good."""
        try:
            return self.client.gather(futures)
        finally:
            for future in futures:
                future.release()

    def compute(self, obj):
        return self._gathered([self.client.compute(obj)])[0]

    def compute_all(self, objs):
        return self._gathered(self.client.compute(list(objs))) if objs else []

    def release(self, future):
        self.meta_cache.pop(future.key, None)
        if not isinstance(future, Unread):  # an unread block's futures are the user's
            future.release()

    def run_everywhere(self, func, *args):
        self.client.run(func, *args)

    def close(self):
        self.meta_cache.clear()
