"""THE threads the runs of a race learn on (the learners' ``n_jobs``): how many, the
groups of runs each one steps, and the pool they run in (docs/design/auto-sigma.md,
"The runs on the machine's cores").

The runs of a race (`onlinepgs._race.SigmaRace`) are independent solver states that read
the same rows and write nothing another run reads. Split into k groups, each group
stepped by its own thread through the GIL-free core (`run_lockstep`, or `PGSState.run`
for mini-batches), every state makes the steps it makes alone, in the same order, with
the same arithmetic: the results are the same bit for bit whatever k is. Only the wall
time changes (the CPU time does not fall: the same work runs on more cores).

Examples
--------
>>> from onlinepgs._jobs import groups, threads_for
>>> threads_for(1, 8), threads_for(3, 2), threads_for(4, 8)
(1, 2, 4)
>>> groups(["a", "b", "c", "d", "e"], 2)
[['a', 'b', 'c'], ['d', 'e']]
"""
import os
import threading

__all__ = ["cores", "threads_for", "reading", "groups", "run_groups", "MIN_ROWS",
           "CROSSED_BLOCK"]

# A piece of fewer rows is stepped on one thread: handing work to another thread costs
# tens of microseconds, a few rows' steps
MIN_ROWS = 64
# Crossed rows shared by the threads are made into a matrix this many rows at a time: a few
# MB with triples, held for one block (the pass on one thread makes a row at a time)
CROSSED_BLOCK = 4096


def cores():
    """The cores this process may run on (its CPU affinity; the count of the machine's
    where the system does not say)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity on this system
        return os.cpu_count() or 1


def threads_for(n_jobs, n_runs):
    """The threads for `n_runs` live runs: ``n_jobs`` None, one a run up to the cores
    but those a reader is parsing input on right now (`reading`), at least 1; a positive
    int, at most that many; a negative one, the cores plus 1 plus it (-1: every core,
    joblib's convention); never more than the runs, never fewer than 1."""
    if n_jobs is None:
        limit = max(1, cores() - _parsing)
    else:
        limit = int(n_jobs) if n_jobs > 0 else cores() + 1 + int(n_jobs)
    return max(1, min(limit, int(n_runs)))


# the readers parsing a chunk at this moment (`reading`): each holds a core
_parsing = 0
_parsing_lock = threading.Lock()


class reading:
    """``with reading():`` around a reader's parse of one chunk on a thread of its own
    (`onlinepgs.streaming.read_ahead`): while it parses, the runs of a race take a
    thread fewer (`threads_for` with n_jobs None). The reader of the command parses the
    next chunk while the runs learn; a thread a core for the runs as well left them
    waiting on each other and on the reader (on 2 cores, the whole command 1.08x
    slower over IMDB's rows five times, docs/benchmarks.md), while a reader that waits
    for room in its queue (the runs slower than the parse: news20's 20 classes) leaves
    its core to them."""

    def __enter__(self):
        global _parsing
        with _parsing_lock:
            _parsing += 1
        return self

    def __exit__(self, *exc):
        global _parsing
        with _parsing_lock:
            _parsing -= 1
        return False


def groups(runs, k):
    """`runs` in k groups of consecutive runs (their order kept), the sizes differing by
    at most one. The runs of one race share every option but sigma and eta, so a row
    costs each the same: equal counts are equal costs."""
    k = max(1, min(k, len(runs)))
    size, extra = divmod(len(runs), k)
    out, at = [], 0
    for g in range(k):
        n = size + (1 if g < extra else 0)
        out.append(list(runs[at:at + n]))
        at += n
    return out


# the threads beyond the caller's, made on first use, each taking its jobs from a queue of
# its own (threading and queue: `concurrent.futures` imports `logging`, 5 ms of the
# command's cold start); a process forked from this one (its threads are not copied) makes
# its own
_workers = []
_workers_pid = None
_workers_lock = threading.Lock()


class _Job:
    """``work(i, part)``, run on a worker; `done` set once it has ended, `error` what it
    raised."""
    __slots__ = ("work", "i", "part", "done", "error")

    def __init__(self, work, i, part):
        self.work, self.i, self.part = work, i, part
        self.done = threading.Event()
        self.error = None

    def run(self):
        try:
            self.work(self.i, self.part)
        except BaseException as exc:  # handed to the caller of run_groups
            self.error = exc
        finally:
            self.done.set()


def _worker_loop(jobs):
    while True:
        jobs.get().run()


def _workers_for(n_threads):
    """The job queues of `n_threads` idle worker threads (made if fewer exist)."""
    global _workers, _workers_pid
    import queue

    with _workers_lock:
        if _workers_pid != os.getpid():
            _workers, _workers_pid = [], os.getpid()
        while len(_workers) < n_threads:
            jobs = queue.SimpleQueue()
            # a daemon: an idle worker never holds the interpreter's exit (run_groups
            # returns only once every job it gave has ended)
            threading.Thread(target=_worker_loop, args=(jobs,), daemon=True,
                             name=f"onlinepgs-runs_{len(_workers)}").start()
            _workers.append(jobs)
        return _workers[:n_threads]


def run_groups(work, parts):
    """``work(i, part)`` for each part of `parts` at once: the first on this thread, the
    others on worker threads. Returns once every one has ended, even if one raised or this
    thread was interrupted meanwhile (a state is never left to a thread after return);
    then raises the first error in the parts' order, if any."""
    if len(parts) == 1:
        work(0, parts[0])
        return
    jobs = [_Job(work, i, part) for i, part in enumerate(parts) if i]
    # one job a worker: the caller holds _workers_lock only while taking the queues, and
    # run_groups is not re-entered on a worker (the work is one group's steps)
    for queue_, job in zip(_workers_for(len(jobs)), jobs):
        queue_.put(job)
    error = None
    try:
        work(0, parts[0])
    except BaseException as exc:  # the others still run: waited for below
        error = exc
    for job in jobs:
        while True:
            try:
                job.done.wait()
                break
            except BaseException as exc:  # e.g. KeyboardInterrupt: the threads finish first
                error = error or exc
    if error is None:
        error = next((job.error for job in jobs if job.error is not None), None)
    if error is not None:
        raise error
