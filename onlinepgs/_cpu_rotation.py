"""Lanes that fill a machine's CPUs trade CPUs every few tens of milliseconds.

A round lasts as long as its slowest lane. On virtual machines the CPUs themselves run
at unequal speeds for seconds at a time (a host's other tenants share their cores): on
the 2-vCPU machine of docs/benchmarks.md one CPU ran a lane's rows in 130-150 ms while
the other took 190-200 ms for the same rows, round after round, whichever lane it ran,
and the faster lane waited out the difference. Where the lanes on a machine are as many
as the CPUs they may use, every ``ROTATION_SECONDS`` each lane moves to the next CPU, all
at once (each process's rotation thread wakes on the same boundaries of the system's
monotonic clock), so that each lane spends the same time on every CPU and the lanes
finish together at the CPUs' mean speed. Which CPU runs a row does not change what the
row does: the models are the same bit for bit.

With fewer lanes than CPUs nothing is pinned: the operating system places them, and
would avoid a CPU that other work keeps busy.
"""
import contextlib
import os
import threading
import time

ROTATION_SECONDS = 0.04


def usable_cpus():
    """The CPUs this process may run on, in order (empty where Linux's affinity calls
    are missing)."""
    if not hasattr(os, "sched_getaffinity") or not hasattr(os, "sched_setaffinity"):
        return []
    return sorted(os.sched_getaffinity(0))


class _Rotation:
    """The process's rotation thread and the lanes it moves (thread ids by slot)."""

    def __init__(self):
        self._reset()
        if hasattr(os, "register_at_fork"):
            # a forked child has none of the parent's threads: it starts its own
            os.register_at_fork(after_in_child=self._reset)

    def _reset(self):
        self.lock = threading.Condition()
        self.lanes = {}  # native thread id -> (slot, cpus)
        self.thread = None

    def cpu(self, slot, cpus, now=None):
        phase = int((time.monotonic() if now is None else now) / ROTATION_SECONDS)
        return cpus[(slot + phase) % len(cpus)]

    def add(self, tid, slot, cpus):
        with self.lock:
            os.sched_setaffinity(tid, {self.cpu(slot, cpus)})
            self.lanes[tid] = (slot, cpus)
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, daemon=True,
                                               name="onlinepgs-cpu-rotation")
                self.thread.start()
            self.lock.notify()

    def remove(self, tid):
        with self.lock:  # after this the thread never moves it again
            self.lanes.pop(tid, None)

    def _run(self):
        while True:
            with self.lock:
                while not self.lanes:
                    self.lock.wait()
            now = time.monotonic()
            boundary = (int(now / ROTATION_SECONDS) + 1) * ROTATION_SECONDS
            time.sleep(boundary - now)
            with self.lock:
                for tid, (slot, cpus) in list(self.lanes.items()):
                    try:
                        os.sched_setaffinity(tid, {self.cpu(slot, cpus, boundary + 1e-6)})
                    except OSError:  # the thread is gone, or a CPU went offline
                        self.lanes.pop(tid, None)


_ROTATION = _Rotation()


@contextlib.contextmanager
def rotating(slot, n_slots):
    """Run the calling thread as lane `slot` of the `n_slots` lanes sharing this
    machine: pinned to one CPU at a time, moved with the others every
    ``ROTATION_SECONDS``, when the lanes are as many as this process's usable CPUs
    (else left to the operating system). Its CPU mask is restored on the way out.

    Examples
    --------
    >>> from onlinepgs._cpu_rotation import rotating
    >>> with rotating(0, 1):  # one lane: nothing to rotate
    ...     pass
    """
    cpus = usable_cpus()
    if n_slots < 2 or len(cpus) != n_slots or not 0 <= slot < n_slots:
        yield False
        return
    tid = threading.get_native_id()
    mask = os.sched_getaffinity(0)
    try:
        _ROTATION.add(tid, slot, cpus)
    except OSError:  # not allowed here: run where the system puts us
        yield False
        return
    try:
        yield True
    finally:
        _ROTATION.remove(tid)
        os.sched_setaffinity(0, mask)
