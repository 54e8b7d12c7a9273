"""sigma="auto": a race of PGS runs over a log grid of sigma, judged by progressive loss.

Two layers (docs/design/auto-sigma.md):

* `SigmaSchedule`, a pure decision object: which runs to start, when to look at them
  (`next_check`) and, from their progressive sums alone, which to drop, which to fork at
  another sigma, which leads. No training happens in it, so the local race below and the
  Dask driver (`onlinepgs.distributed`) share it, and a race's result depends only on the
  rows, never on how they were split into calls.
* `SigmaRace`, the local race: one `PGSState` per live run, every run trained on the
  same rows, the rows of a call split at the schedule's checks.

`progressive_sums(state)` is the one place that knows how a state's progressive sums are
read (DESIGN-34, section 1).
"""
import math
from dataclasses import asdict, dataclass, field

__all__ = ["SigmaSchedule", "SigmaRace", "Run", "Decision", "progressive_sums",
           "DEFAULT_GRID", "RaceDivergedError"]

# Half-decade steps from 1 down to 1e-8: the optimum of one averaged pass moves by about a
# decade per decade of rows (sigma* ~ mean ||x||^2 / n), and a half-decade step costs at
# most a few tenths of a percent of log loss near the optimum.
DEFAULT_GRID = tuple(10.0 ** (-k / 2.0) for k in range(17))

# The runs started from row 0: wide enough that the first check finds the region of the
# optimum for features of norm 1 (text) to norm ~4 (one-hot tables), high enough that the
# unbounded losses (squared) start on sane steps; the race then walks down.
START_SIGMAS = (1e-1, 1e-2, 1e-3, 1e-4)

FIRST_CHECK = 1000  # rows before the first decision
GROWTH = 2.0  # each check's row count is this times the previous one's
PATIENCE = 3  # consecutive lost challenges after which the schedule settles


def progressive_sums(state):
    """The progressive sums of a `PGSState` (DESIGN-34, section 1), as a dict.

    ``sum_weighted_loss`` / ``n_mistakes`` are the REPORTED iterate's where the core keeps
    them (``state.progressive_sums()``); a core without that method gives the last
    iterate's sums in their place.
    """
    method = getattr(state, "progressive_sums", None)
    if method is not None:
        return dict(method())
    return dict(n_examples=int(state.n_examples), sum_weight=float(state.sum_weight),
                sum_weighted_loss=float(state.sum_weighted_loss),
                n_mistakes=int(state.n_mistakes),
                sum_weighted_loss_last=float(state.sum_weighted_loss),
                n_mistakes_last=int(state.n_mistakes))


@dataclass
class Run:
    """One PGS run of the race: its sigma, the row count it started at, and the run it
    was forked from (None: trained from row 0)."""
    run_id: int
    sigma: float
    started_at: int = 0
    parent: "int | None" = None


@dataclass
class Decision:
    """What a check decided: the runs to drop, the forks to make as (parent run_id, new
    sigma) (the new runs' ids are `SigmaSchedule.runs`' next ones, in this order), the
    leader, and whether the race is over (only the leader lives on)."""
    drop: list = field(default_factory=list)
    fork: list = field(default_factory=list)
    leader: int = 0
    settled: bool = False


def _loss_between(now, then):
    """Mean weighted progressive loss over the rows between two sums (inf: none)."""
    w = now["sum_weight"] - (then["sum_weight"] if then else 0.0)
    if not w > 0:
        return math.inf
    loss = (now["sum_weighted_loss"] - (then["sum_weighted_loss"] if then else 0.0)) / w
    return loss if math.isfinite(loss) else math.inf


class SigmaSchedule:
    """Which sigma runs to train, from their progressive sums.

    The race: `START_SIGMAS` run from row 0 until the first check (`FIRST_CHECK` rows,
    then GROWTH times more at each check). At a check every live run is judged by the
    mean progressive loss of its reported model over the rows since the previous check
    (all live runs trained on exactly those rows; early rows favour large sigma, so the
    whole history would lag). The best becomes the leader; the runs kept are the leader
    and a challenger one grid step below it (the optimum moves down as rows accumulate),
    forked from the leader (its dual state, at the smaller sigma) unless it is live
    already. A leader at the bottom of the grid has no challenger. After `patience`
    challenges lost in a row the schedule settles: the leader alone goes on.

    Parameters
    ----------
    loss : str
        The runs' loss (kept for the record; the decisions read only progressive sums).
    n_problems : int, default=1
    grid : sequence of float or None
        The sigmas the race may use, any order (None: `DEFAULT_GRID`, 1 to 1e-8 in
        half-decades). The start runs are the grid's points nearest `START_SIGMAS`.
    batch_size : int, default=1
        Checks fall on whole mini-batches (a multiple of it), so that splitting a call
        at a check does not change the steps.
    first_check, growth, patience : see the module's constants.
    """

    def __init__(self, loss, *, n_problems=1, grid=None, batch_size=1,
                 first_check=FIRST_CHECK, growth=GROWTH, patience=PATIENCE):
        grid = DEFAULT_GRID if grid is None else grid
        self.grid = sorted({float(s) for s in grid}, reverse=True)
        if not self.grid or not all(s > 0 and math.isfinite(s) for s in self.grid):
            raise ValueError(f"a sigma grid holds positive finite numbers, got {grid!r}")
        self.loss, self.n_problems = loss, int(n_problems)
        self.batch_size = int(batch_size)
        self.first_check, self.growth, self.patience = int(first_check), float(growth), patience
        self.runs = {}  # live runs: run_id -> Run
        self.next_id = 0
        self.check_at = self._round(self.first_check)
        self.last_check = 0
        self.leader_id = None
        self.lost = 0  # challenges lost in a row
        self.settled = False
        self.marks = {}  # run_id -> its sums at the last check (None: from row 0)
        self.path = []  # sigma_path_: one record per check, fork or drop

    def _round(self, rows):
        """rows rounded up to a whole number of mini-batches."""
        b = self.batch_size
        return -(-int(rows) // b) * b

    def _nearest(self, sigma):
        return min(self.grid, key=lambda s: abs(math.log(s / sigma)))

    def _new_run(self, sigma, started_at, parent):
        run = Run(self.next_id, float(sigma), int(started_at), parent)
        self.runs[run.run_id] = run
        self.next_id += 1
        return run

    def start(self):
        """The runs to start from row 0 (once, before any row)."""
        if self.runs or self.next_id:
            raise RuntimeError("the schedule has started already")
        sigmas = sorted({self._nearest(s) for s in START_SIGMAS}, reverse=True)
        started = [self._new_run(s, 0, None) for s in sigmas]
        self.leader_id = started[0].run_id
        return started

    def next_check(self, n_rows):
        """The row count of the next decision (None once settled): a caller splits its
        rows there and calls `decide` when exactly that many rows have been seen."""
        if self.settled:
            return None
        return self.check_at

    def _window_losses(self, sums):
        return {rid: _loss_between(sums[rid], self.marks.get(rid)) for rid in self.runs
                if rid in sums}

    def _record(self, n_rows, sums, kind, **extra):
        runs = []
        for rid, run in sorted(self.runs.items()):
            s = sums.get(rid)
            runs.append(dict(run_id=rid, sigma=run.sigma, started_at=run.started_at,
                             parent=run.parent,
                             progressive_loss=(None if s is None else
                                               _finite_or_none(_loss_between(s, None))),
                             window_loss=(None if s is None else _finite_or_none(
                                 _loss_between(s, self.marks.get(rid))))))
        self.path.append(dict(rows=int(n_rows), event=kind, runs=runs,
                              leader=self.leader_id,
                              leader_sigma=(self.runs[self.leader_id].sigma
                                            if self.leader_id in self.runs else None),
                              **extra))

    def discard(self, run_id, n_rows, reason="diverged"):
        """Remove a run the driver could not train on (its PGS diverged); recorded in the
        path. The leader passes to the best live run at the next check or `leader`."""
        run = self.runs.pop(run_id)
        self.marks.pop(run_id, None)
        if self.leader_id == run_id:
            self.leader_id = max(self.runs, key=lambda r: self.runs[r].sigma, default=None)
        self.path.append(dict(rows=int(n_rows), event="drop", reason=reason,
                              run_id=run_id, sigma=run.sigma, leader=self.leader_id,
                              leader_sigma=(self.runs[self.leader_id].sigma
                                            if self.leader_id in self.runs else None)))

    def decide(self, n_rows, sums):
        """The decision at a check: `n_rows` must be `next_check`'s count; `sums` maps
        each live run_id to its `progressive_sums` (a run missing from it is dropped)."""
        if self.settled or n_rows != self.check_at:
            raise ValueError(f"no decision is due at row {n_rows} (next: "
                             f"{self.next_check(n_rows)})")
        losses = self._window_losses(sums)
        missing = [rid for rid in self.runs if rid not in sums]
        if not losses:
            raise ValueError("no live run to decide on")
        # the smallest window loss; ties go to the larger sigma (the safer steps)
        leader = min(losses, key=lambda r: (losses[r], -self.runs[r].sigma))
        old_leader = self.leader_id
        challenger_won = old_leader is not None and leader != old_leader and (
            self.runs[leader].sigma < self.runs.get(old_leader, self.runs[leader]).sigma)
        leader_sigma = self.runs[leader].sigma
        i = self.grid.index(leader_sigma) if leader_sigma in self.grid else None
        below = self.grid[i + 1] if i is not None and i + 1 < len(self.grid) else None
        if self.last_check > 0 and not challenger_won and len(losses) > 1:
            self.lost += 1
        elif challenger_won:
            self.lost = 0
        settled = below is None or (self.patience is not None and self.lost >= self.patience)
        keep = {leader}
        fork = []
        if not settled:
            live_below = [r for r in losses if self.runs[r].sigma == below]
            if live_below:
                keep.add(live_below[0])
            else:
                fork.append((leader, below))
        drop = sorted(r for r in self.runs if r not in keep)
        self.leader_id = leader
        self._record(n_rows, sums, "check", window=[self.last_check, int(n_rows)],
                     dropped=[dict(run_id=r, sigma=self.runs[r].sigma) for r in drop],
                     forked=[dict(parent=p, sigma=s, run_id=self.next_id + k)
                             for k, (p, s) in enumerate(fork)],
                     settled=settled, missing=missing)
        for r in drop:
            del self.runs[r]
        self.marks = {r: dict(sums[r]) for r in keep}
        for parent, sigma in fork:
            new = self._new_run(sigma, n_rows, parent)
            self.marks[new.run_id] = dict(sums[parent])
        self.last_check = int(n_rows)
        self.settled = settled
        self.check_at = self._round(max(n_rows + 1, math.ceil(n_rows * self.growth)))
        return Decision(drop=drop, fork=fork, leader=leader, settled=settled)

    def leader(self, n_rows, sums):
        """The run to report now, from the live runs' sums: before the first check, the
        lowest progressive loss; after it, the lowest over the rows since the last check
        once they are at least half the previous window, else the last check's leader."""
        live = {r: s for r, s in sums.items() if r in self.runs}
        if not live:
            return self.leader_id
        if self.last_check and self.leader_id in live:
            previous = self.last_check - (self.path_window_start())
            if (n_rows - self.last_check) * 2 < previous:
                return self.leader_id
        losses = {r: _loss_between(s, self.marks.get(r)) for r, s in live.items()}
        return min(losses, key=lambda r: (losses[r], -self.runs[r].sigma))

    def path_window_start(self):
        """The row count where the last check's window began."""
        for record in reversed(self.path):
            if record.get("event") == "check":
                return record["window"][0]
        return 0

    def settle(self, n_rows, sums, reason="fit"):
        """End the race now (fit after its first pass): the `leader` alone goes on.
        Returns the Decision (the runs to drop)."""
        leader = self.leader(n_rows, sums)
        drop = sorted(r for r in self.runs if r != leader)
        self.leader_id = leader
        if not self.settled:
            self._record(n_rows, sums, "settle", reason=reason,
                         dropped=[dict(run_id=r, sigma=self.runs[r].sigma) for r in drop])
        for r in drop:
            del self.runs[r]
            self.marks.pop(r, None)
        self.settled = True
        return Decision(drop=drop, fork=[], leader=leader, settled=True)

    # ---- model files --------------------------------------------------------------
    def to_dict(self):
        """The schedule as JSON-able values (model files)."""
        return dict(version=1, loss=self.loss, n_problems=self.n_problems, grid=self.grid,
                    batch_size=self.batch_size, first_check=self.first_check,
                    growth=self.growth, patience=self.patience,
                    runs=[asdict(r) for r in self.runs.values()], next_id=self.next_id,
                    check_at=self.check_at, last_check=self.last_check,
                    leader_id=self.leader_id, lost=self.lost, settled=self.settled,
                    marks=[[r, m] for r, m in self.marks.items()], path=self.path)

    @classmethod
    def from_dict(cls, d):
        """The schedule of `to_dict`."""
        if d.get("version") != 1:
            raise ValueError(f"unsupported sigma schedule version {d.get('version')!r}")
        self = cls(d["loss"], n_problems=d["n_problems"], grid=d["grid"],
                   batch_size=d["batch_size"], first_check=d["first_check"],
                   growth=d["growth"], patience=d["patience"])
        self.runs = {int(r["run_id"]): Run(int(r["run_id"]), float(r["sigma"]),
                                           int(r["started_at"]),
                                           None if r["parent"] is None else int(r["parent"]))
                     for r in d["runs"]}
        self.next_id, self.check_at = int(d["next_id"]), int(d["check_at"])
        self.last_check, self.lost = int(d["last_check"]), int(d["lost"])
        self.leader_id = None if d["leader_id"] is None else int(d["leader_id"])
        self.settled = bool(d["settled"])
        self.marks = {int(r): (None if m is None else dict(m)) for r, m in d["marks"]}
        self.path = list(d["path"])
        return self


def _finite_or_none(x):
    return x if math.isfinite(x) else None


class RaceDivergedError(Exception):
    """Every run of the race diverged; ``errors`` holds each run's error (last: the
    last run's), which the learner re-raises."""

    def __init__(self, errors):
        super().__init__(str(errors[-1]))
        self.errors = errors


class SigmaRace:
    """The local race: a `SigmaSchedule` and one `PGSState` per live run.

    Parameters
    ----------
    schedule : SigmaSchedule
    states : dict run_id -> PGSState
        The live runs' states (from `start`: `SigmaRace.begin`).
    n_rows : int
        Rows every live run has seen (their common count).
    """

    def __init__(self, schedule, states, n_rows=0):
        self.schedule, self.states, self.n_rows = schedule, dict(states), int(n_rows)

    @classmethod
    def begin(cls, schedule, make_state):
        """A race at row 0: ``make_state(sigma)`` builds each start run's fresh state."""
        return cls(schedule, {run.run_id: make_state(run.sigma) for run in schedule.start()})

    def sums(self):
        return {rid: progressive_sums(st) for rid, st in self.states.items()}

    @property
    def leader_id(self):
        return self.schedule.leader(self.n_rows, self.sums())

    @property
    def leader(self):
        """The state to report now (`SigmaSchedule.leader`)."""
        return self.states[self.leader_id]

    def advance(self, n, train, diverged=(FloatingPointError,)):
        """Train every live run on the next n rows, deciding at the schedule's checks.

        ``train(state, start, stop)`` trains a state on rows [start, stop) of the caller's
        n rows. A run whose training raises one of `diverged` is discarded (recorded in the
        path); if every run has, RaceDivergedError carries their errors.
        """
        done, errors = 0, []
        while done < n:
            check = self.schedule.next_check(self.n_rows)
            stop = n if check is None else min(n, done + check - self.n_rows)
            for rid in sorted(self.states):
                try:
                    train(self.states[rid], done, stop)
                except diverged as exc:
                    errors.append(exc)
                    del self.states[rid]
                    self.schedule.discard(rid, self.n_rows + stop - done)
            if not self.states:
                raise RaceDivergedError(errors)
            self.n_rows += stop - done
            done = stop
            if check is not None and self.n_rows == check:
                self._apply(self.schedule.decide(self.n_rows, self.sums()))

    def _apply(self, decision):
        forked = {}
        for parent, sigma in decision.fork:
            forked[parent, sigma] = self.states[parent].with_sigma(sigma)
        for rid in decision.drop:
            self.states.pop(rid, None)
        # the forks' ids are the schedule's newest runs, in the decision's order
        new_ids = sorted(self.schedule.runs)[len(self.schedule.runs) - len(decision.fork):]
        for rid, key in zip(new_ids, decision.fork):
            self.states[rid] = forked[key]

    def settle(self, reason="fit"):
        """End the race: only the leader's state remains. Returns it."""
        decision = self.schedule.settle(self.n_rows, self.sums(), reason)
        for rid in decision.drop:
            self.states.pop(rid, None)
        return self.states[decision.leader]
