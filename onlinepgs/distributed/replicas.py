"""A cluster's copies of the global state, kept on the lanes' workers.

On a ``dask.distributed`` cluster each lane's worker keeps a copy of the global state
(`Replica`); a lane's round task (`replica_round`) first merges the last round's results
of every lane into it, the same additions in the same order on every copy, so that the
copies stay equal bit for bit, then trains its slice from it. Between rounds only the
lanes' sparse results cross the network. The blocks of a persisted array that a lane's
round reads itself, and that its next round continues, are kept here too
(`OPEN_BLOCKS`). Everything is per worker process, keyed by the fit's token, and dropped
at the end of the fit (`drop_fit`).
"""
import threading

from onlinepgs.distributed.sources.array import array_block
from onlinepgs.distributed.tasks import merge_task, train_slice

__all__ = ["OPEN_BLOCKS", "drop_fit", "replica_merge", "replica_round", "replica_state",
           "replica_sums"]


_REPLICAS = {}  # (fit token, pass, lane) -> _Replica, in each worker's process
# blocks read by a lane's round on a cluster that its next round continues:
# (fit token, pass, partition) -> Block, in each worker's process
OPEN_BLOCKS = {}
_LOCK = threading.Lock()  # guards both


class _Replica:
    """A lane's copy of the global state (`Runs`) on its worker, the rounds merged into
    it, and the lane's own state of each run kept between rounds (as on threads)."""

    def __init__(self, state, rounds, lane):
        self.state, self.rounds, self.changed = state, rounds, None
        self.slot = {}  # run id -> LaneSlot
        self.lock = threading.Lock()
        self.lane = lane
        self.stepped = None  # the round after which the race's last step was applied

    def step(self, rounds, steps):
        """Apply the race's `RaceStep`s decided after round `rounds`, once."""
        with self.lock:
            if self.stepped == rounds:
                return
            for step in steps:
                self.state.apply(step)  # a fork copies its parent, which stays as it was
                for run in step.drop:
                    self.slot.pop(run, None)
            self.stepped = rounds

    def advance(self, rounds, results):
        """Merge the results of round `rounds` (counted from 1) unless that is done."""
        with self.lock:
            if self.rounds == rounds:
                return
            if self.rounds != rounds - 1:
                # Dask computes a round again when a worker took its result with it
                raise _lost_worker(self.lane, f"holds {self.rounds} rounds, but a task "
                                              f"asked for {rounds}")
            self.changed = merge_task(self.state, rounds, *results)
            self.rounds = rounds


def _replica(key, lane, rounds, start):
    with _LOCK:
        replica = _REPLICAS.get((*key, lane))
        if replica is None:
            if start is None:
                raise _lost_worker(lane, f"is not on its worker (round {rounds + 1})")
            for old in [k for k in _REPLICAS if k[0] == key[0] and k[1] < key[1]]:
                del _REPLICAS[old]  # an earlier pass's, done with
            # a copy: `start` is also Dask's, which keeps its values unchanged
            replica = _REPLICAS[(*key, lane)] = _Replica(start.copy(), rounds, lane)
        return replica


def _lost_worker(lane, what):
    return RuntimeError(
        f"lane {lane}'s copy of the training state {what}: a worker restarted or left "
        "during the fit, and the rounds it held cannot be rebuilt. The model is left as "
        "it was; fit again.")


def replica_round(key, lane, rounds, start, plan, n_results, n_waits, *args):
    """Task: a lane's round on a cluster (on the lane's worker): merge the last round's
    results into its copy of the global state, then train its slice from it."""
    replica = _replica(key, lane, rounds, start)
    replica.advance(rounds, args[:n_results])
    if plan.step is not None:
        replica.step(rounds, plan.step)
    blocks = _round_blocks(key, plan, args[n_results + n_waits:])
    plan.slot, plan.changed, plan.round_no = replica.slot, replica.changed, rounds
    return train_slice(replica.state, plan, *blocks)


def replica_merge(key, lane, rounds, start, steps, n_results, *args):
    """Task: a round in which a lane trains no rows (on the lane's worker): its copy
    merges the last round and applies the race's steps as `replica_round` does, so that
    it can train from the next. Sends back nothing (None: no result to merge)."""
    replica = _replica(key, lane, rounds, start)
    replica.advance(rounds, args[:n_results])
    if steps is not None:
        replica.step(rounds, steps)


def replica_state(key, lane, rounds, steps, *results):
    """Task: the global state after `rounds` rounds and the race's `steps` decided then
    (the copy may have applied them already, with the lane's next round), from a lane's
    copy."""
    replica = _replica(key, lane, rounds - 1, None)
    replica.advance(rounds, results)
    with replica.lock:
        state = replica.state.copy()
        if replica.stepped != rounds:
            for step in steps:
                state.apply(step)
    return state


def replica_sums(key, lane, rounds, *results):
    """Task: the runs' progressive sums after `rounds` rounds, from a lane's copy, and
    the runs its merges dropped as diverged since it was last asked (the race's
    decisions need only these, never the states)."""
    replica = _replica(key, lane, rounds - 1, None)
    replica.advance(rounds, results)
    with replica.lock:
        diverged, replica.state.diverged = replica.state.diverged, []
        return replica.state.sums(), diverged


def drop_fit(token):
    """Task, on every worker: forget a fit's copies of the state and its open blocks."""
    with _LOCK:
        for kept in (_REPLICAS, OPEN_BLOCKS):
            for key in [k for k in kept if k[0] == token]:
                del kept[key]


def _round_blocks(key, plan, args):
    """A round's blocks on a cluster: futures' values as they are, and unread blocks
    (plan.unread: recipe and whether the round ends it, or None) read here, or taken from
    the previous round of the lane that began them."""
    blocks, args = [], iter(args)
    for entry in plan.unread:
        if entry is None:
            blocks.append(next(args))
            continue
        recipe, ends = entry
        x, y, w = next(args), next(args), next(args)
        name = (*key, recipe[0])
        with _LOCK:
            block = OPEN_BLOCKS.pop(name, None)
        if block is None:
            block = array_block(plan.spec, x, y, w, *recipe)
        if not ends:
            with _LOCK:
                OPEN_BLOCKS[name] = block
        blocks.append(block)
    return blocks
