"""The tasks of a round that run on the workers: a lane's slice and the merge.

`train_slice` gathers a lane's slice from its blocks (in place where it can) and runs
`rounds.run_lane` on it for every run of the global `Runs` (one, or a race's); `merge_task`
checks that no lane diverged and adds the round's results into each run's global state
(`rounds.merge_round`; the adaptive geometry's `adaptive.run_lane` and
`adaptive.merge_round`). `SlicePlan` says which rows of
which blocks a lane trains, and names a row of the slice in messages.
"""
import numpy as np
import scipy.sparse as sp

from onlinepgs.distributed import adaptive, rounds
from onlinepgs.distributed._estimator import PGSDivergedError
from onlinepgs.distributed.rounds import LaneSlot

__all__ = ["SlicePlan", "merge_task", "train_slice"]


def merge_task(runs, round_no, *results):
    """Merge round `round_no`'s lane results (each lane's a dict: run id -> `LaneResult`)
    into the global `Runs`, run by run (merge_round), once none of the run's lanes
    diverged; return the coordinates each run's merge changed (run id -> array, or None
    where it moved M). A run that diverged fails the fit, unless the runs race and
    others are left: then it is dropped (`Runs.drop_diverged`). On threads a task of the
    round's graph, so that while one thread merges the other reads the blocks read ahead
    that the faster lane's wait did not hold; on a cluster each lane's replica calls it."""
    changed = {}
    results = [result for result in results if result is not None]  # lanes with no rows
    for run in list(runs.states):
        lanes = [result[run] for result in results if run in result]
        try:
            _check_diverged(lanes, round_no)
        except PGSDivergedError as exc:
            if not runs.racing or len(runs.states) == 1:
                raise
            runs.drop_diverged(run, str(exc))
            continue
        state = runs.states[run]
        # each geometry's merge (the adaptive one's at the largest scales)
        changed[run] = (adaptive if state.adaptive else rounds).merge_round(state, lanes)
    return changed


def _check_diverged(results, round_no):
    for result in results:
        if result.diverged_row is not None:
            raise PGSDivergedError(
                f"PGS diverged in round {round_no} at {result.diverged_at}: the loss's "
                "derivative overflowed. Its gradient is unbounded, so on R^n "
                "(radius=None) a small sigma lets the first steps of size 1/(t sigma) "
                "blow up; use radius='auto' (or a finite radius) or a larger sigma. The "
                "model is left as it was.")


class SlicePlan:
    """Rows of one lane's slice: (first, end) in each of the blocks given with it."""

    def __init__(self, ranges, seed, classifier):
        self.ranges = ranges
        self.seed = seed
        self.classifier = classifier
        self.n_lanes = 1  # lanes in the round (each lane counts its steps that often)
        # the lane's kept states (run id -> LaneSlot) and what the last merge changed
        # (run id -> coordinates); on a cluster set by the lane's replica
        self.slot = self.changed = self.round_no = None
        self.step = None  # a cluster: the race's RaceStep its replica applies first
        self.blocks = None  # set on the worker, for messages
        self.unread = self.spec = None  # a cluster's blocks read by the round itself

    def where(self, row):
        """A row of the slice as "partition P, row R" (or a file position)."""
        if self.blocks is None:
            return f"row {row} of its slice"
        for block, (a, b) in zip(self.blocks, self.ranges):
            if row < b - a:
                return block.describe(a + row)
            row -= b - a
        return f"row {row} past its slice"


def train_slice(base, plan, *blocks):
    """Task: one lane's round (runs on a worker): every run of `base` (`Runs`) over the
    lane's slice; the results by run id."""
    plan.blocks = blocks
    k = base.state.batch_size
    lengths = [b - a for a, b in plan.ranges]
    if plan.seed is None and all(n % k == 0 for n in lengths[:-1]):
        # each piece in place, one after the other: no copy of the rows
        pieces = [(block.X, block.y, block.sw, np.arange(a, b, dtype=np.int64), block.rps)
                  for block, (a, b) in zip(blocks, plan.ranges)]
        starts = [a for a, _ in plan.ranges]
    else:
        # shuffled, or a mini-batch across two blocks: one array of the slice's rows
        Xs = [block.X[a:b] for block, (a, b) in zip(blocks, plan.ranges)]
        if sp.issparse(Xs[0]):
            width = max(x.shape[1] for x in Xs)
            X = sp.vstack([sp.csr_matrix((x.data, x.indices, x.indptr),
                                         shape=(x.shape[0], width)) for x in Xs],
                          format="csr")
            X.has_canonical_format = True  # stacking canonical rows keeps them so
        else:
            X = np.ascontiguousarray(np.vstack(Xs))
        parts = [(block, a, b) for block, (a, b) in zip(blocks, plan.ranges)]
        y = np.concatenate([block.y[a:b] for block, a, b in parts])
        sw = np.concatenate([block.sw[a:b] for block, a, b in parts])
        rps = (None if blocks[0].rps is None else
               np.concatenate([block.rps[a:b] for block, a, b in parts]))
        order = np.arange(X.shape[0], dtype=np.int64)
        if plan.seed is not None:
            order = np.random.RandomState(plan.seed).permutation(order)
        pieces = [(X, y, sw, order, rps)]
        starts = [0]
    # every run of the global `Runs` over the same rows, in the same order
    slots, results = plan.slot, {}
    for run, state in base.states.items():
        slot = None if slots is None else slots.setdefault(run, LaneSlot())
        changed = None if plan.changed is None else plan.changed.get(run)
        if state.adaptive:  # its lanes count their steps once, from a copy
            result = adaptive.run_lane(state, pieces, plan.classifier)
        else:
            result = rounds.run_lane(state, pieces, plan.classifier, plan.n_lanes, slot,
                                     changed, plan.round_no)
        if result.diverged_row is not None:
            # a row of the arrays given to the core: back to the slice's numbering
            number, row = result.diverged_row
            before = sum(lengths[:number]) if len(pieces) > 1 else 0
            result.diverged_at = plan.where(before + row - starts[number])
        results[run] = result
    if slots is not None:
        for run in [run for run in slots if run not in base.states]:
            del slots[run]  # a dropped run's lane state: its memory goes with it
    return results
