"""Lanes trading CPUs (onlinepgs._cpu_rotation): where they run, and that they come back."""
import os
import threading
import time

import pytest

from onlinepgs import _cpu_rotation
from onlinepgs._cpu_rotation import ROTATION_SECONDS, rotating, usable_cpus

CPUS = usable_cpus()
needs_cpus = pytest.mark.skipif(len(CPUS) < 2, reason="needs 2 or more CPUs and Linux's "
                                                      "affinity calls")


def _spin_recording(seconds, seen):
    """Busy for `seconds`, noting the CPU mask of this thread as it goes."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        seen.add(frozenset(os.sched_getaffinity(0)))


@needs_cpus
def test_a_lane_visits_every_cpu_one_at_a_time_and_gets_its_mask_back():
    before = os.sched_getaffinity(0)
    seen = set()
    with rotating(0, len(CPUS)) as rotated:
        assert rotated
        _spin_recording(ROTATION_SECONDS * (len(CPUS) + 2.5), seen)
    assert os.sched_getaffinity(0) == before
    assert all(len(mask) == 1 for mask in seen)
    assert set().union(*seen) == set(CPUS)


@needs_cpus
def test_lanes_never_share_a_cpu():
    n = len(CPUS)
    tids, masks, ready, done = [None] * n, [], threading.Barrier(n + 1), threading.Event()

    def lane(slot):
        with rotating(slot, n):
            tids[slot] = threading.get_native_id()
            ready.wait()
            while not done.is_set():
                time.sleep(0.001)

    threads = [threading.Thread(target=lane, args=(slot,)) for slot in range(n)]
    for t in threads:
        t.start()
    ready.wait()
    for _ in range(6):
        # look half way between two moves, when every lane has moved
        now = time.monotonic()
        time.sleep(ROTATION_SECONDS * (int(now / ROTATION_SECONDS) + 1.5) - now)
        masks.append([frozenset(os.sched_getaffinity(tid)) for tid in tids])
    done.set()
    for t in threads:
        t.join()
    for at_once in masks:
        assert all(len(m) == 1 for m in at_once)
        assert len(set(at_once)) == n  # one lane a CPU
    assert len({at_once[0] for at_once in masks}) > 1  # and they moved


@pytest.mark.parametrize("slot, n_slots", [(0, 1), (0, len(CPUS) + 1), (len(CPUS), len(CPUS))])
def test_nothing_is_pinned_unless_the_lanes_fill_the_cpus(slot, n_slots):
    before = os.sched_getaffinity(0) if CPUS else None
    with rotating(slot, n_slots) as rotated:
        assert not rotated
        if CPUS:
            assert os.sched_getaffinity(0) == before
    assert not _cpu_rotation._ROTATION.lanes


@needs_cpus
def test_an_error_inside_still_restores_the_mask():
    before = os.sched_getaffinity(0)
    with pytest.raises(RuntimeError):
        with rotating(1, len(CPUS)):
            assert len(os.sched_getaffinity(0)) == 1
            raise RuntimeError("lane failed")
    assert os.sched_getaffinity(0) == before
    assert threading.get_native_id() not in _cpu_rotation._ROTATION.lanes


def _child_visits(conn):
    seen = set()
    with rotating(0, len(CPUS)):
        _spin_recording(ROTATION_SECONDS * (len(CPUS) + 2.5), seen)
    conn.send(sorted(set().union(*seen)))


@needs_cpus
def test_a_forked_process_rotates_its_own_lanes():
    # the parent's rotation thread is not in the child: the child must start its own
    import multiprocessing as mp

    with rotating(0, len(CPUS)):  # the parent's thread is running now
        pass
    assert _cpu_rotation._ROTATION.thread is not None
    ctx = mp.get_context("fork")
    mine, theirs = ctx.Pipe()
    child = ctx.Process(target=_child_visits, args=(theirs,))
    child.start()
    assert mine.recv() == CPUS
    child.join()
