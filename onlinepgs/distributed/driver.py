"""The driver of a distributed run: lanes, slices and rounds (`Driver`).

Each pass deals the source's partitions to the lanes; every round the driver makes
sure each lane knows a slice's worth of rows (reading blocks ahead, so that reading
overlaps training), plans each lane's slice (`SlicePlan`), submits the lanes' tasks to
the backend and merges their results: on threads a task of the round merges into the
driver's state; on a cluster every lane's worker keeps a copy of the global state and
merges on it (`replicas`), and the driver only plans and fetches the state at the end
of a pass. The callback's reports (`RoundReport`) are made here.
"""
import functools
import time
import uuid
from collections import deque

import numpy as np

from onlinepgs.distributed.replicas import (drop_fit, replica_merge, replica_round,
                                            replica_state, replica_sums)
from onlinepgs.distributed.slices import auto_slice_rows, rows_within_bytes
from onlinepgs.distributed.sources.array import Unread
from onlinepgs.distributed.tasks import SlicePlan, merge_task, train_slice
from onlinepgs.streaming import whole_batches

__all__ = ["Driver", "RoundReport"]

_ROUND_PRIORITY = 1  # a cluster's round tasks, over blocks (Dask's default 0)


class _Lane:
    """The driver's view of one lane: its partitions and the blocks requested so far.

    ``blocks`` holds entries ``[handle, n_rows, has_next, part]`` (n_rows and has_next
    None until the block is read); ``pos`` counts the rows of those blocks already
    trained on; ``open`` is the newest entry, from which the next block of its
    partition is requested (kept until then even when its rows are used up).
    """

    def __init__(self, parts):
        self.parts = deque(parts)
        self.blocks = deque()
        self.pos = 0
        self.open = None
        self.worker = None  # on a cluster, where the lane trains

    def waiting(self):
        return any(e[1] is None for e in self.blocks)

    def known_rows(self):
        total = 0
        for entry in self.blocks:
            if entry[1] is None:
                break
            total += entry[1]
        return total - self.pos

    def can_request(self):
        """Whether another block exists that was not requested (its predecessor read)."""
        if self.open is not None and self.open[2]:
            return True
        return bool(self.parts) and (self.open is None or self.open[2] is not None)


class Driver:
    """Runs the rounds: reads ahead, plans slices, trains the lanes, merges."""

    def __init__(self, state, source, backend, n_lanes, slice_rows, rng, shuffle, callback,
                 classifier, groups=None, groups_workers=None, sizing=None, grow=False,
                 race=None):
        self.state = state  # the global `Runs`
        # sigma="auto": the race (`runs.Race`), asked between rounds while `racing` (the
        # first pass of a fit); None for a fixed sigma
        self.race = race
        self.racing = race is not None
        # whether the race counts the pass's rows (the rows its runs have seen; the
        # local fit's later passes do not count them)
        self.counting = race is not None
        self.steps = []  # a cluster's race steps decided, for the next round's copies
        self.idle = True  # between passes (a cluster: the state is the driver's)
        # slice_rows="auto" on a stream of known length: (rows a pass, batch_size) until
        # the first block read bounds the slices' bytes (_size_slices)
        self.sizing = sizing
        # ... and the rounds of a pass grow from the first's slice (_grown), up to the
        # most rows within the bytes' bound (None: no bound)
        self.grow = grow
        self.first_slice = self.most_rows = None
        self.source = source
        self.backend = backend
        self.n_lanes = n_lanes
        self.slice_rows = slice_rows
        self.rng = rng
        self.shuffle = shuffle
        self.callback = callback
        self.classifier = classifier
        self.rounds = 0
        self.width_seen = 0
        self.start = time.perf_counter()
        # threads: each lane keeps its state of each run between rounds (run id ->
        # LaneSlot)
        self.slots = [{} for _ in range(n_lanes)] if backend.shares_memory else None
        self.changed = None  # coordinates the last merge changed, by run
        self.rows_read = self.blocks_read = 0  # the mean block size, for reading ahead
        self.groups = groups  # locality: each lane's partitions, by worker
        # a cluster keeps the global state on the workers (see replica_round): the
        # driver holds futures of the last round's lane results and of the state
        self.token = uuid.uuid4().hex
        self.lane_workers = (None if backend.shares_memory
                             else backend.lane_workers(n_lanes, groups_workers))
        self.pass_index = 0
        self.last = None  # the last round's (lane, future) pairs; None before a pass's first
        self.waits = {}  # lane -> a snapshot its next round must not overtake
        self.state_ref = None
        self.in_flight = deque()
        self.reports = deque()  # rounds whose callback is still to be called
        self.reporting = None  # the round whose callback runs
        self.lanes = []  # the pass's
        self.n_examples = int(state.state.n_examples)

    def _request(self, lane):
        """Ask for the lane's next block: the next of its open partition, or a new one."""
        with self.backend.near(lane.worker):
            self._request_block(lane)

    def _request_block(self, lane):
        previous = lane.open
        if previous is not None and previous[2]:
            entry = [self.source.next_block(self.backend, previous[0]), None, None,
                     previous[3]]
        else:
            part = lane.parts.popleft()
            entry = [self.source.first_block(self.backend, part), None, None, part]
            known = self.source.known_meta(part)
            if known is not None:  # no need to wait for the block to learn its size
                self._note_meta(entry, known)
        if previous is not None and previous[2] and not any(e is previous for e in lane.blocks):
            self.backend.release(previous[0])  # used up, kept only to chain from
        lane.blocks.append(entry)
        lane.open = entry

    def _size_slices(self, lanes):
        """slice_rows="auto": bound the slices' bytes by those of the first block read
        (rows a pass tell the rows a slice, not what they weigh: dense rows of 10,000
        features weigh about 180 times those of the text-like stream in docs/benchmarks.md)."""
        n_rows, batch_size, held = self.sizing
        self.sizing = None
        lane = next((lane for lane in lanes if lane.can_request()), None)
        if lane is None:
            return
        self._request(lane)
        rows, _, _, nbytes, own = self.backend.metas([lane.open[0]])[0]
        if rows:
            row_bytes = (own if held else nbytes) / rows
            rows = auto_slice_rows(n_rows, self.n_lanes, row_bytes=row_bytes)
            self.slice_rows = min(self.slice_rows, whole_batches(rows, batch_size))
            self.most_rows = whole_batches(rows_within_bytes(row_bytes), batch_size)

    def _grown(self, done):
        """slice_rows="auto": a round's slice once the pass's rounds have trained `done`
        rows: the first round's, or as many as a lane trained before it if that is more
        (so the pass's rows at most double each round), within the bytes' bound."""
        if self.first_slice is None:
            self.first_slice = self.slice_rows
        rows = max(self.first_slice,
                   whole_batches(done // self.n_lanes, int(self.state.state.batch_size)))
        return rows if self.most_rows is None else min(rows, self.most_rows)

    def _learn_meta(self, lanes):
        """Fill in the rows and continuation of requested blocks (waits for them)."""
        pending = [e for lane in lanes for e in lane.blocks if e[1] is None]
        if not pending:
            return
        for entry, meta in zip(pending, self.backend.metas([e[0] for e in pending])):
            self._note_meta(entry, meta)

    def _note_meta(self, entry, meta):
        n_rows, has_next, width = meta[:3]
        entry[1], entry[2] = n_rows, has_next
        self.width_seen = max(self.width_seen, width)
        self.rows_read += n_rows
        self.blocks_read += 1

    def _fill(self, lanes):
        """Make sure every lane knows a slice's worth of rows, or all it has left."""
        while True:
            wanting = []
            for lane in lanes:
                if lane.known_rows() >= self.slice_rows and not lane.waiting():
                    continue
                if lane.waiting():
                    wanting.append(lane)  # its rows are on their way
                elif lane.can_request():
                    self._request(lane)
                    wanting.append(lane)
            if not wanting:
                return
            self._learn_meta(wanting)

    def _read_ahead(self, lanes):
        """Request each lane's next blocks early, so that reading overlaps training: a
        slice's worth where partitions are single blocks (arrays, bags; rows counted at
        the mean block size seen), else the next block of each lane."""
        guess = self.rows_read / self.blocks_read if self.blocks_read else self.slice_rows
        for lane in lanes:
            if self.source.one_block_per_partition:
                while lane.parts and (
                        lane.known_rows() + guess * sum(e[1] is None for e in lane.blocks)
                        < self.slice_rows):
                    self._request(lane)
            elif (lane.known_rows() < self.slice_rows and not lane.waiting()
                    and lane.can_request()):
                self._request(lane)

    def _take(self, lane, rows):
        """The lane's next slice, `rows` rows or all it knows: pieces (entry, first row,
        end row) of its blocks."""
        need = rows
        pieces = []
        offset = lane.pos
        for entry in lane.blocks:
            n_rows = entry[1]
            if n_rows is None or need == 0:
                break
            if offset >= n_rows:
                offset -= n_rows
                continue
            take = min(n_rows - offset, need)
            pieces.append((entry, offset, offset + take))
            need -= take
            offset = 0
        lane.pos += rows - need
        return pieces

    def _drop_used(self, lane):
        while lane.blocks and lane.blocks[0][1] is not None and (
                lane.pos >= lane.blocks[0][1]):
            entry = lane.blocks.popleft()
            lane.pos -= entry[1]
            if entry is not lane.open or not entry[2]:
                self.backend.release(entry[0])

    def run_pass(self, pass_index):
        n_parts = self.source.n_partitions
        if self.groups is not None:
            lanes = [_Lane((self.rng.permutation(g) if self.shuffle
                            else np.asarray(g)).tolist()) for g in self.groups]
        else:
            order = self.rng.permutation(n_parts) if self.shuffle else np.arange(n_parts)
            lanes = [_Lane(order[p::self.n_lanes].tolist()) for p in range(self.n_lanes)]
        for lane, worker in zip(lanes, self.lane_workers or ()):
            lane.worker = worker
        self.lanes = lanes
        self.pass_index, self.last, self.waits = pass_index, None, {}
        self.idle = False
        if self.sizing is not None:
            self._size_slices(lanes)
        done = 0  # rows the pass's rounds trained
        while True:
            if self.grow:
                self.slice_rows = self._grown(done)
            self._fill(lanes)
            quotas = self._quotas(lanes)
            jobs = []
            for index, lane in enumerate(lanes):
                pieces = self._take(lane, self.slice_rows if quotas is None else quotas[index])
                if not pieces:
                    continue
                seed = int(self.rng.randint(0, 2**31 - 1)) if self.shuffle else None
                plan = SlicePlan([(a, b) for _, a, b in pieces], seed, self.classifier)
                if self.slots is not None:
                    plan.slot, plan.changed = self.slots[index], self.changed
                    plan.round_no = self.rounds
                jobs.append((plan, [e[0] for e, _, _ in pieces], index))
            if not jobs:
                break
            for plan, _, _ in jobs:
                plan.n_lanes = len(jobs)
            rows = sum(b - a for plan, _, _ in jobs for a, b in plan.ranges)
            done += rows
            handles = self._submit_round(jobs)
            for lane in lanes:
                self._drop_used(lane)
            self._read_ahead(lanes)
            if handles is not None:  # threads: a task of the round merges
                merged = self.backend.submit(merge_task, self.state, self.rounds + 1,
                                             *handles)
                self.changed = self.backend.results([merged])[0]
            self.rounds += 1
            self.n_examples += rows  # every row is an example (a cluster's count)
            if self.counting:
                self.race.n_rows += rows
            if self.racing and self.race.due():
                # a cluster: the round before is reported first, its state taken from a
                # copy that the decision's merge (_sums) would move past
                self._report(0)
                self.take_step(self.race.decide(*self._sums()))
            if self.callback is not None:
                ref = (None if self.backend.shares_memory else
                       _RoundRef(self.last, self.rounds, self.n_examples, list(self.steps)))
                self.reports.append(({"pass": pass_index, "round": self.rounds,
                                      "rows": rows}, ref))
                # on a cluster a round is reported once the next is on its way, so that
                # fetching its state never keeps the workers waiting for a round
                self._report(0 if self.backend.shares_memory else 1)
        if self.last is not None and not self.backend.shares_memory:
            final = self._snapshot(self.last, self.rounds)
            if self.reports and not self.reports[-1][1].steps:
                self.reports[-1][1].future = final  # the last round's: its state is this
            self._report(0)
            self.state_ref = final  # the next pass's copies start from it
            self.state = self.backend.result(final, self.lane_workers)
            self.in_flight.clear()
            self.idle = True
            self._flush_steps()
        self._report(0)
        self.idle = True
        for lane in lanes:
            for entry in lane.blocks:
                self.backend.release(entry[0])
            if lane.open is not None and not any(e is lane.open for e in lane.blocks):
                self.backend.release(lane.open[0])

    def _quotas(self, lanes):
        """Racing: each lane's rows this round where the round must end at the race's
        next decision (`Race.quotas`), else None (every lane a slice)."""
        if not self.racing:
            return None
        takes = [min(self.slice_rows, lane.known_rows()) for lane in lanes]
        return self.race.quotas(takes, int(self.state.state.batch_size))

    def _sums(self):
        """The runs' progressive sums after the round just submitted, once it is merged,
        and the runs its merges dropped as diverged: on threads the driver's (the round's
        merge is done); on a cluster a lane's copy merges it and sends back only these
        (the driver waits for the round here, at the race's decisions only)."""
        if self.backend.shares_memory:
            return self.race_sums()
        lane = self.last[0][0]
        future = self.backend.submit(
            replica_sums, (self.token, self.pass_index), lane, self.rounds,
            *[f for _, f in self.last], priority=_ROUND_PRIORITY,
            worker=self.lane_workers[lane])
        try:
            return self.backend.result(future, self.lane_workers)
        finally:
            self.backend.release(future)

    def take_step(self, step):
        """Apply a `RaceStep`: at once on threads (the lanes copy the runs from the
        driver's state); on a cluster, during a pass, with the next round by every
        lane's copy, and between passes on the driver's, whence the next pass starts."""
        if self.backend.shares_memory:
            # (a fork copies its parent, which keeps its lanes' states and what the
            # merge changed; a new run's lanes fork it whole)
            self.state.apply(step)
            for slots in self.slots:  # also where a lane has no more rows to train
                for run in step.drop:
                    slots.pop(run, None)
        else:
            self.steps.append(step)
            if self.idle:
                self._flush_steps()

    def _flush_steps(self):
        """A cluster, between passes: the race's steps since the last round on the
        driver's copy of the runs, from which the next pass's copies start (sent anew)."""
        if not self.steps:
            return
        for step in self.steps:
            self.state.apply(step)
        self.steps = []
        if self.state_ref is not None:
            self.backend.release(self.state_ref)
            self.state_ref = None

    def race_sums(self):
        """Between passes: the runs' progressive sums and the runs dropped as diverged
        (the driver's state is the pass's end on either backend)."""
        diverged, self.state.diverged = self.state.diverged, []
        return self.state.sums(), diverged

    def close(self):
        """Release the blocks and rounds still held, and free the workers' copies of the
        state (a cluster). After a failure the exception's frames hold the driver: its
        futures would stay on the client with the failed task's exception (see
        `DistributedBackend._gathered`)."""
        held = [self.state_ref] if self.state_ref is not None else []
        held += [f for round_ in self.in_flight for f in round_]
        held += [f for _, f in self.last or ()]
        held += [f for waits in self.waits.values() for f in waits]
        refs = [ref for _, ref in self.reports if ref is not None] + [self.reporting]
        for ref in refs:
            if ref is not None:
                held += [f for _, f in ref.last] + [ref.future]
        for lane in self.lanes:
            held += [entry[0] for entry in lane.blocks]
            held += [lane.open[0]] if lane.open is not None else []
        for handle in held:
            if handle is not None:
                self.backend.release(handle)
        self.in_flight.clear()
        self.reports.clear()
        self.last, self.waits, self.state_ref, self.lanes = None, {}, None, []
        if not self.backend.shares_memory:
            self.backend.run_everywhere(drop_fit, self.token)

    def _report(self, keep):
        while len(self.reports) > keep:
            info, ref = self.reports.popleft()
            report = RoundReport(info, seconds=time.perf_counter() - self.start)
            if ref is None:
                report.update(n_examples=int(self.state.state.n_examples),
                              state=self.state.state)
            else:
                report["n_examples"] = ref.n_examples
                report._fetch = functools.partial(self._fetch_state, ref)
            self.reporting = ref  # its futures, should the callback fail (close)
            try:
                self.callback(report)
            finally:
                report._fetch = None
            self.reporting = None

    def _fetch_state(self, ref):
        if ref.future is None:
            ref.future = self._snapshot(ref.last, ref.rounds, ref.steps)
        return self.backend.result(ref.future, self.lane_workers).state  # the leader's

    def _submit_round(self, jobs):
        """Submit a round's lanes. Threads read the driver's state (each lane forks it)
        and their handles come back for the driver to merge. On a cluster the round is
        tasks only (None comes back): every lane's worker keeps a copy of the global
        state, and a lane's task first adds the last round's results of every lane into
        it (the driver's merge, done alike on each copy, so the copies stay equal bit for
        bit) and then trains from it (`replica_round`). Between rounds each worker
        fetches the others' results, which are sparse, and no state moves: one hop of
        the scheduler a round, where a merge on one worker followed by the state sent
        back to the lanes took three, each lane waiting through the merge. The copies
        start at a pass's first round from the state's future. The driver plans the next
        round without waiting; at most two rounds are in flight, so that blocks are not
        read far ahead."""
        if self.backend.shares_memory:
            return [self.backend.submit(train_slice, self.state, plan, *blocks)
                    for plan, blocks, _ in jobs]
        if self.last is None:  # the pass's first round: the copies start from the state
            if self.state_ref is None:
                self.state_ref = self.backend.scatter(self.state, self.lane_workers)
            start, results = self.state_ref, []
        else:
            start, results = None, [f for _, f in self.last]
        key = (self.token, self.pass_index)
        self.last = []
        steps, self.steps = self.steps, []
        for plan, blocks, lane in jobs:
            plan.step = steps or None
            waits = self.waits.pop(lane, [])
            inputs, plan.unread = [], []
            for block, (_, end) in zip(blocks, plan.ranges):
                if isinstance(block, Unread):
                    inputs.extend(block.inputs)
                    plan.unread.append((block.recipe, end == block.n_rows))
                    plan.spec = block.spec
                else:
                    inputs.append(block)
                    plan.unread.append(None)
            future = self.backend.submit(
                replica_round, key, lane, self.rounds, start, plan, len(results),
                len(waits), *results, *waits, *inputs, priority=_ROUND_PRIORITY,
                worker=self.lane_workers[lane])
            self.last.append((lane, future))
        busy = {lane for _, _, lane in jobs}
        for lane, idle in enumerate(self.lanes):
            if lane in busy or not (idle.known_rows() or idle.waiting()
                                    or idle.can_request()):
                continue
            # a lane with rows left but none this round (the race's rounds may give a
            # lane none): its copy merges the round all the same, so that it can train
            # from the next
            waits = self.waits.pop(lane, [])
            future = self.backend.submit(
                replica_merge, key, lane, self.rounds, start, steps or None, len(results),
                *results, *waits, priority=_ROUND_PRIORITY, worker=self.lane_workers[lane])
            self.last.append((lane, future))
        self.in_flight.append([f for _, f in self.last])
        while len(self.in_flight) > 2:  # raises the round's error
            self.backend.settle(self.in_flight[0], self.lane_workers)
            self.in_flight.popleft()
        return None

    def _snapshot(self, last, rounds, steps=()):
        """A future of the global state after `rounds` rounds, whose last round's lanes
        and results are `last`: from the copy of its first lane, which must not move on
        (merge a later round) before it is taken. Called before that lane's round after
        next is submitted. `steps`: the race's steps decided after that round, which the
        state includes (as on threads, where they apply at once)."""
        lane = last[0][0]
        future = self.backend.submit(
            replica_state, (self.token, self.pass_index), lane, rounds, list(steps),
            *[f for _, f in last], priority=_ROUND_PRIORITY,
            worker=self.lane_workers[lane])
        self.waits[lane] = [future]
        return future


class _RoundRef:
    """A cluster's round, as its callback needs it."""

    __slots__ = ("last", "rounds", "n_examples", "steps", "future")

    def __init__(self, last, rounds, n_examples, steps):
        self.last, self.rounds, self.n_examples, self.future = last, rounds, n_examples, None
        self.steps = steps  # the race's steps decided after it


class RoundReport(dict):
    """The dict a callback gets. On a cluster its "state" is fetched from a worker when
    the callback first reads it (a copy of the whole state over the network), so that a
    callback that does not read it costs the rounds nothing."""

    _fetch = None

    def __missing__(self, key):
        if key != "state":
            raise KeyError(key)
        if self._fetch is None:
            raise KeyError("state: on a cluster a round's state can be read during its "
                           "callback only")
        self["state"] = state = self._fetch()
        return state

    def __contains__(self, key):
        return dict.__contains__(self, key) or (key == "state" and self._fetch is not None)

    def get(self, key, default=None):
        return self[key] if key in self else default
