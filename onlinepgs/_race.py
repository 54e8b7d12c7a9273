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

FIRST_CHECK = 250  # rows before the first decision
GROWTH = 2.0  # each check's row count is this times the previous one's
DUEL = 0.5  # the part of each interval between fork points that a challenger runs
BURN = 0.5  # the first part of a duel, not judged: the fork's average is its parent's
CHASE = True  # a challenger that wins is challenged at once (not at the next fork point)
PATIENCE = None  # duels lost in a row after which the schedule settles (None: never)
# A duel whose two runs' mean losses over its window differ by less than this fraction is
# a tie where the schedule is told so (`indifference`: the adaptive geometry's sigma races
# from row 4,000 on, `onlinepgs._eta_race`), and two such duels in a row settle the race
# at the larger sigma: a half-decade of sigma that moves the loss by less than 0.1% no
# longer matters on these rows, and chasing it down costs a second run all the way (IMDB
# at eta 0.1: every duel from row 4,000 on differs by 0.004-0.05%, each won by the
# smaller sigma, down to the grid's bottom). The duels that matter differ by 1-6% (w8a,
# TalkingData, the flight log). One such duel alone does not settle: sigma's weight grows
# with the rows (news20 at row 5,700: 0.04%, yet 1e-6 is better than 3.2e-6 by the end)
INDIFFERENCE = 1e-3
INDIFFERENT_DUELS = 2
# A challenger wins only over a window in which the leader's summed loss is at least this
# (classification losses, in nats or hinge units: about three mistakes' worth). With rare
# positives an early window holds none; there every run's loss is ~0, the run of smaller
# sigma (the more negative intercept) wins by 1e-11, and the race never comes back up.
EVIDENCE = 3 * math.log(2.0)
CLASSIFICATION = ("hinge", "logistic", "squared_hinge", "smooth_hinge")


def evidence_for(loss, evidence=None):
    """The least summed loss of a window that may move a race's lead: `evidence`, or by
    default `EVIDENCE` for the classification losses and 0 for the regression ones
    (which have no unit of information: their windows are judged as they are)."""
    return float((EVIDENCE if loss in CLASSIFICATION else 0.0)
                 if evidence is None else evidence)


def progressive_sums(state):
    """The progressive sums of a `PGSState` (DESIGN-34, section 1), as a dict.

    ``sum_weighted_loss`` / ``n_mistakes`` are the REPORTED iterate's where the core keeps
    them (``state.progressive_sums()``); a core without that method gives the last
    iterate's sums in their place.
    """
    method = getattr(state, "progressive_sums", None)
    if method is not None:
        return method()  # a new dict each call
    return dict(n_examples=int(state.n_examples), sum_weight=float(state.sum_weight),
                sum_weighted_loss=float(state.sum_weighted_loss),
                n_mistakes=int(state.n_mistakes),
                sum_weighted_loss_last=float(state.sum_weighted_loss),
                n_mistakes_last=int(state.n_mistakes))


# Run and Decision are plain classes, not dataclasses: the command imports this module,
# and `dataclasses` imports `inspect` (10 ms of a cold start)
class Run:
    """One PGS run of the race: its sigma, the row count it started at, the run it
    was forked from (None: trained from row 0) and its base rate eta (the adaptive
    geometry's, in a race of eta: `onlinepgs._eta_race`; None: the learner's own)."""

    def __init__(self, run_id, sigma, started_at=0, parent=None, eta=None):
        self.run_id, self.sigma, self.started_at = run_id, sigma, started_at
        self.parent, self.eta = parent, eta

    def to_dict(self):
        """The run as JSON-able values (eta only where a race of eta set it)."""
        d = dict(run_id=self.run_id, sigma=self.sigma, started_at=self.started_at,
                 parent=self.parent)
        if self.eta is not None:
            d["eta"] = self.eta
        return d

    def __eq__(self, other):
        return self.to_dict() == other.to_dict() if type(other) is Run else NotImplemented

    __hash__ = None  # mutable, as a dataclass's

    def __repr__(self):
        return "Run(" + ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items()) + ")"


class Decision:
    """What a check decided: the runs to drop, the forks to make as (parent run_id, new
    sigma) (the new runs' ids are `SigmaSchedule.runs`' next ones, in this order), the
    leader, and whether the race is over (only the leader lives on)."""

    def __init__(self, drop=None, fork=None, leader=0, settled=False):
        self.drop = [] if drop is None else drop
        self.fork = [] if fork is None else fork
        self.leader, self.settled = leader, settled

    def _key(self):
        return self.drop, self.fork, self.leader, self.settled

    def __eq__(self, other):
        return self._key() == other._key() if type(other) is Decision else NotImplemented

    __hash__ = None  # mutable, as a dataclass's

    def __repr__(self):
        return (f"Decision(drop={self.drop!r}, fork={self.fork!r}, leader={self.leader!r}, "
                f"settled={self.settled!r})")


def _loss_between(now, then):
    """Mean weighted progressive loss over the rows between two sums (inf: none)."""
    w = now["sum_weight"] - (then["sum_weight"] if then else 0.0)
    if not w > 0:
        return math.inf
    loss = (now["sum_weighted_loss"] - (then["sum_weighted_loss"] if then else 0.0)) / w
    return loss if math.isfinite(loss) else math.inf


class SigmaSchedule:
    """Which sigma runs to train, from their progressive sums.

    The race: `START_SIGMAS` run from row 0 until the first check (`FIRST_CHECK` rows).
    There the best one leads and a challenger is forked from it one grid step below (the
    optimum of one averaged pass moves down as rows accumulate): a copy of the leader's
    dual state at the smaller sigma (`PGSState.with_sigma`). Forks happen at the fork
    points F_0 = FIRST_CHECK, F_(k+1) = GROWTH * F_k; the duel of leader and challenger
    lasts the fraction `duel` of the interval (judged at F_k + duel (F_(k+1) - F_k)), then
    the winner runs alone to the next fork point: about 1 + duel runs live on average.
    A judgement compares the mean progressive loss of each run's reported model over the
    rows since the fork (all live runs trained on exactly those rows; the whole history
    would favour large sigma, which early rows do). Ties go to the larger sigma, and so
    does a window too poor in information to move the lead (classification losses: the
    leader's summed loss over it under `evidence`, about three mistakes' worth; with rare
    positives a short window holds none, and every run's loss there is ~0). After
    `patience` duels lost by the challenger in a row, with the leader at the bottom of
    the grid, or after `INDIFFERENT_DUELS` ties in a row between sigmas that no longer
    matter (`indifference`), the schedule settles: the leader alone goes on, no more
    checks.

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
    first_check, growth, duel, patience : see the module's constants.
    evidence : float or None
        The least summed loss of the leader over a duel's window for the challenger to
        win it (None: `EVIDENCE` for classification losses, 0 for regression ones).
    indifference : float or None
        A duel judged after row `indifferent_after` whose runs' mean window losses differ
        by less than this fraction of the larger is a tie, and `INDIFFERENT_DUELS` of them
        in a row settle the schedule at the larger sigma (None: never; `INDIFFERENCE`).
    indifferent_after : int, default=0
        The row after which `indifference` applies (the adaptive geometry's: 4,000).
    """

    def __init__(self, loss, *, n_problems=1, grid=None, batch_size=1, start=START_SIGMAS,
                 first_check=FIRST_CHECK, growth=GROWTH, duel=DUEL, burn=BURN,
                 chase=CHASE, patience=PATIENCE, evidence=None, eta=None, first_id=0,
                 indifference=None, indifferent_after=0):
        grid = DEFAULT_GRID if grid is None else grid
        self.grid = sorted({float(s) for s in grid}, reverse=True)
        if not self.grid or not all(s > 0 and math.isfinite(s) for s in self.grid):
            raise ValueError(f"a sigma grid holds positive finite numbers, got {grid!r}")
        if not (growth > 1 and 0 < duel <= 1 and first_check >= 1):
            raise ValueError("a sigma schedule needs first_check >= 1, growth > 1 and "
                             f"0 < duel <= 1, got {first_check!r}, {growth!r}, {duel!r}")
        self.loss, self.n_problems = loss, int(n_problems)
        self.batch_size = int(batch_size)
        self.first_check, self.growth, self.duel = int(first_check), float(growth), float(duel)
        self.burn, self.chase = float(burn), bool(chase)
        self.start_sigmas = sorted({self._nearest(float(x)) for x in start}, reverse=True)
        self.patience = patience
        self.indifference = None if indifference is None else float(indifference)
        self.indifferent_after = int(indifferent_after)
        self.indifferent = 0  # duels in a row whose runs differed by under `indifference`
        self.evidence = evidence_for(loss, evidence)
        self.eta = None if eta is None else float(eta)  # every run's (a race of eta)
        self.runs = {}  # live runs: run_id -> Run
        self.next_id = int(first_id)
        self.fork_at = self.check_at = self._round(self.first_check)
        self.judge_at = self.mark_at = -1  # the current duel's judgement, end of burn-in
        self.since = 0  # where the live runs' comparison window began (a start or fork)
        self.leader_id = None
        self.lost = 0  # duels lost by the challenger in a row
        self.settled = False
        self.marks = {}  # run_id -> its sums where the window began (None: from row 0)
        self.path = []  # sigma_path_: one record per check, drop or settle

    def _round(self, rows):
        """rows rounded up to a whole number of mini-batches."""
        b = self.batch_size
        return -(-int(rows) // b) * b

    def _nearest(self, sigma):
        return min(self.grid, key=lambda s: abs(math.log(s / sigma)))

    def _new_run(self, sigma, started_at, parent):
        run = Run(self.next_id, float(sigma), int(started_at), parent, self.eta)
        self.runs[run.run_id] = run
        self.next_id += 1
        return run

    def start(self):
        """The runs to start from row 0 (once, before any row)."""
        if self.runs or self.leader_id is not None or self.path:
            raise RuntimeError("the schedule has started already")
        started = [self._new_run(s, 0, None) for s in self.start_sigmas]
        self.leader_id = started[0].run_id
        return started

    def next_check(self, n_rows):
        """The row count of the next decision (None once settled): a caller splits its
        rows there and calls `decide` when exactly that many rows have been seen."""
        return None if self.settled else self.check_at

    def align(self, n_rows):
        """Move the next check to the first whole mini-batch of rows trained from row
        `n_rows` (where a caller's mini-batches begin: a call's first row, or the check
        it was split at). Checks are whole mini-batches from row 0; a short batch (the
        end of a pass whose training rows are not a multiple of the batch size) shifts
        the later calls' batches, and a check left where it was would split a batch at a
        place that depends on the calls. Returns the (possibly moved) check."""
        check = self.next_check(n_rows)
        if check is None or check <= n_rows or self.batch_size == 1:
            return check
        b = self.batch_size
        moved = n_rows + -(-(check - n_rows) // b) * b
        if moved != check:
            for key in ("check_at", "fork_at", "mark_at", "judge_at"):
                if getattr(self, key) == check:
                    setattr(self, key, moved)
        return self.next_check(n_rows)

    def _losses(self, sums):
        """Each live run's mean progressive loss since the window began."""
        return {rid: _loss_between(sums[rid], self.marks.get(rid)) for rid in self.runs
                if rid in sums}

    def _informed(self, best, sums):
        """The duel's better run `best`, unless the window is too poor in information to
        move the lead: the leader's summed loss over it is under `evidence`."""
        incumbent = self.leader_id
        if best == incumbent or incumbent not in sums:
            return best
        then = self.marks.get(incumbent)
        mass = sums[incumbent]["sum_weighted_loss"] - (
            then["sum_weighted_loss"] if then else 0.0)
        return best if mass >= self.evidence else incumbent

    def _indifferent(self, losses):
        """Whether a duel's two window losses differ by less than `indifference` of the
        larger (never without it, nor with a loss that is not finite)."""
        if self.indifference is None or len(losses) != 2:
            return False
        a, b = losses.values()
        if not (math.isfinite(a) and math.isfinite(b)):
            return False
        return abs(a - b) < self.indifference * max(abs(a), abs(b))

    def _best(self, losses):
        return min(losses, key=lambda r: (losses[r], -self.runs[r].sigma))

    def _leader_sigma(self):
        run = self.runs.get(self.leader_id)
        return None if run is None else run.sigma

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
        self._log(dict(rows=int(n_rows), event=kind, window=[self.since, int(n_rows)],
                       runs=runs, **extra))

    def _log(self, record):
        """A record of the path (with the runs' eta in a race of eta)."""
        self.path.append(record if self.eta is None else dict(record, eta=self.eta))

    def discard(self, run_id, n_rows, reason="diverged"):
        """Remove a run the driver could not train on (its PGS diverged); recorded in the
        path. A discarded leader passes to the live run of the largest sigma until the
        next judgement."""
        run = self.runs.pop(run_id)
        self.marks.pop(run_id, None)
        if self.leader_id == run_id:
            self.leader_id = max(self.runs, key=lambda r: self.runs[r].sigma, default=None)
        self._log(dict(rows=int(n_rows), event="drop", reason=reason, run_id=run_id,
                       sigma=run.sigma, leader=self.leader_id,
                       leader_sigma=self._leader_sigma()))

    def decide(self, n_rows, sums):
        """The decision at a check: `n_rows` must be `next_check`'s count; `sums` maps
        each live run_id to its `progressive_sums` (a run missing from it is dropped).

        With several runs live it judges them (the best over the window leads, the
        others are dropped); at a fork point it forks the challenger one grid step below
        the leader."""
        if self.settled or n_rows != self.check_at:
            raise ValueError(f"no decision is due at row {n_rows} (next: "
                             f"{self.next_check(n_rows)})")
        if n_rows == self.mark_at < self.judge_at and len(self.runs) > 1:
            # the duel's burn-in is over: judge it on the rows from here on (just after
            # the fork the challenger's average is still mostly its parent's)
            for r in [r for r in self.runs if r not in sums]:
                del self.runs[r]
            self.marks = {r: dict(sums[r]) for r in self.runs}
            self.since, self.check_at = int(n_rows), self.judge_at
            return Decision(drop=[], fork=[], leader=self.leader_id, settled=False)
        losses = self._losses(sums)
        if not losses:
            raise ValueError("no live run to decide on")
        leader = self._best(losses)
        won = indifferent = False
        if len(self.runs) == 2 and self.since > 0:  # a duel: did the challenger win?
            leader = self._informed(leader, sums)
            indifferent = n_rows > self.indifferent_after and self._indifferent(losses)
            self.indifferent = self.indifferent + 1 if indifferent else 0
            if indifferent:  # a tie: the larger sigma leads
                leader = max(self.runs, key=lambda r: self.runs[r].sigma)
            won = self.runs[leader].sigma < max(r.sigma for r in self.runs.values())
            self.lost = 0 if won else self.lost + 1
        if won and self.chase:
            # the optimum is further down than one step: the next duel starts now
            self.fork_at = int(n_rows)
        self.leader_id = leader
        drop = sorted(r for r in self.runs if r != leader)
        fork = []
        settled = (self.indifferent >= INDIFFERENT_DUELS
                   or (self.patience is not None and self.lost >= self.patience))
        if n_rows == self.fork_at and not settled:
            i = self.grid.index(self.runs[leader].sigma)
            if i + 1 < len(self.grid):
                fork.append((leader, self.grid[i + 1]))
            else:
                settled = True  # the bottom of the grid: nothing left to try below
        self._record(n_rows, sums, "check", leader=leader,
                     leader_sigma=self.runs[leader].sigma,
                     dropped=[dict(run_id=r, sigma=self.runs[r].sigma) for r in drop],
                     forked=[dict(parent=p, sigma=s, run_id=self.next_id + k)
                             for k, (p, s) in enumerate(fork)], settled=settled,
                     **({"indifferent": True} if indifferent else {}))
        for r in drop:
            del self.runs[r]
        self.marks = {leader: dict(sums[leader])}
        self.since = int(n_rows)
        for parent, sigma in fork:
            new = self._new_run(sigma, n_rows, parent)
            self.marks[new.run_id] = dict(sums[parent])
        self.settled = settled
        if fork:  # the end of the duel's burn-in, its judgement, the next fork point
            following = self._round(max(n_rows + 1, math.ceil(n_rows * self.growth)))
            self.judge_at = self._round(n_rows + max(1, math.ceil(
                self.duel * (following - n_rows))))
            self.mark_at = self._round(n_rows + math.floor(self.burn * (self.judge_at - n_rows)))
            if not n_rows < self.mark_at < self.judge_at:
                self.mark_at = self.judge_at
            self.check_at = self.mark_at
            self.fork_at = following
        else:
            self.check_at = self.fork_at
        return Decision(drop=drop, fork=fork, leader=leader, settled=settled)

    def drops_early(self, n_rows):
        """Whether the check at row `n_rows` may drop runs whatever the others' sums
        (`beaten`): the first check only."""
        return not (self.settled or n_rows != self.check_at or self.since != 0 or (
            n_rows == self.mark_at))

    def beaten(self, n_rows, sums):
        """The runs of `sums` (the sums at row `n_rows`, the next check's, of some live
        runs) that this check drops whatever the other runs' sums: at the first check,
        which keeps the best run over the whole history, every one but the best of
        them; none at the others (a duel's judgement reads both runs' windows)."""
        if not self.drops_early(n_rows):
            return []
        losses = self._losses(sums)
        best = self._best(losses) if losses else None
        return sorted(r for r in losses if r != best)

    def leader(self, n_rows, sums, live=None):
        """The run to report now, from the live runs' sums: before the first check, the
        lowest progressive loss; in a duel, the lower over the rows since the fork once
        they are at least half the duel, else the last judged leader.

        ``sums`` maps each live run to its sums; or, with ``live`` (the live runs' ids),
        it is a function giving that dict, called only where the choice reads them (one
        live run, or the first half of a duel, needs none: an event's cost)."""
        if live is None:
            live = [r for r in self.runs if r in sums]
        else:
            live = [r for r in self.runs if r in live]
        if not live:
            return self.leader_id
        if len(live) == 1:
            return live[0]  # what the rules below choose of one run, without its sums
        if self.since and self.leader_id in live and (
                (n_rows - self.since) * 2 < self.check_at - self.since):
            return self.leader_id
        if callable(sums):
            sums = sums()
        best = self._best({r: _loss_between(sums[r], self.marks.get(r)) for r in live})
        return self._informed(best, sums) if self.since else best

    def settle(self, n_rows, sums, reason="fit", epochs=1):
        """End the race now (fit after its first pass): the `leader` alone goes on.

        With ``epochs`` > 1 (fit's passes, of which this was the first) the leader goes on
        as a fork at the grid's sigma nearest ``leader's sigma / epochs``: the race chose
        for the rows of one pass, and the later passes cannot choose again (rows seen
        before score no held-out loss), so the choice follows the rule the race itself
        walks by, an optimum inversely proportional to the rows seen
        (docs/design/auto-sigma.md). Returns the Decision (the runs to drop, the fork).
        """
        leader = self.leader(n_rows, sums)
        drop = sorted(r for r in self.runs if r != leader)
        self.leader_id = leader
        fork = []
        sigma = self.runs[leader].sigma
        # only a race that has followed the optimum down by its checks: before the first
        # check the start runs were compared on so few rows that the largest sigma leads
        # for safety, not as a point on the optimum's path (scikit-learn's 200-row
        # regression check: R^2 0.80 at 1e-1 over 5 epochs, 0.62 at 1e-1 / 5)
        checked = any(record["event"] == "check" for record in self.path)
        target = self._nearest(sigma / epochs) if epochs > 1 and checked else sigma
        if not self.settled:
            self._record(n_rows, sums, "settle", reason=reason, leader=leader,
                         leader_sigma=sigma,
                         dropped=[dict(run_id=r, sigma=self.runs[r].sigma) for r in drop],
                         epochs=int(epochs), sigma_for_epochs=target)
            if target != sigma:
                fork = [(leader, target)]
                drop.append(leader)
        for r in drop:
            del self.runs[r]
            self.marks.pop(r, None)
        if fork:
            self.leader_id = self._new_run(target, n_rows, leader).run_id
        self.settled = True
        return Decision(drop=sorted(drop), fork=fork, leader=self.leader_id, settled=True)

    def fork_ids(self, decision):
        """The run ids `decide` / `settle` gave the forks of `decision`, in its order: the
        schedule's newest runs (what the local race and the Dask driver key them by)."""
        return list(range(self.next_id - len(decision.fork), self.next_id))

    # ---- model files --------------------------------------------------------------
    _SCALARS = ("next_id", "fork_at", "check_at", "judge_at", "mark_at", "since", "lost")

    def to_dict(self):
        """The schedule as JSON-able values (model files)."""
        return dict(version=1, loss=self.loss, n_problems=self.n_problems, grid=self.grid,
                    start=self.start_sigmas,
                    batch_size=self.batch_size, first_check=self.first_check,
                    growth=self.growth, duel=self.duel, burn=self.burn, chase=self.chase,
                    patience=self.patience, evidence=self.evidence,
                    **({} if self.indifference is None else
                       {"indifference": self.indifference,
                        "indifferent_after": self.indifferent_after,
                        "indifferent": self.indifferent}),
                    runs=[r.to_dict() for r in self.runs.values()],
                    leader_id=self.leader_id, settled=self.settled,
                    marks=[[r, m] for r, m in self.marks.items()], path=self.path,
                    **({} if self.eta is None else {"eta": self.eta}),
                    **{k: getattr(self, k) for k in self._SCALARS})

    @classmethod
    def from_dict(cls, d):
        """The schedule of `to_dict`."""
        if d.get("version") != 1:
            raise ValueError(f"unsupported sigma schedule version {d.get('version')!r}")
        self = cls(d["loss"], n_problems=d["n_problems"], grid=d["grid"], start=d["start"],
                   batch_size=d["batch_size"], first_check=d["first_check"],
                   growth=d["growth"], duel=d["duel"], burn=d["burn"], chase=d["chase"],
                   patience=d["patience"], evidence=d.get("evidence", 0.0),
                   indifference=d.get("indifference"),
                   indifferent_after=d.get("indifferent_after", 0),
                   eta=d.get("eta"))
        self.runs = {int(r["run_id"]): Run(int(r["run_id"]), float(r["sigma"]),
                                           int(r["started_at"]),
                                           None if r["parent"] is None else int(r["parent"]),
                                           None if r.get("eta") is None else float(r["eta"]))
                     for r in d["runs"]}
        for key in self._SCALARS:
            setattr(self, key, int(d[key]))
        self.leader_id = None if d["leader_id"] is None else int(d["leader_id"])
        self.settled = bool(d["settled"])
        self.indifferent = int(d.get("indifferent", 0))
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
        """A race at row 0: ``make_state(sigma)`` (``make_state(sigma, eta)`` for a run
        of a race of eta) builds each start run's fresh state."""
        return cls(schedule, {run.run_id: make_state(run.sigma) if run.eta is None
                              else make_state(run.sigma, run.eta)
                              for run in schedule.start()})

    def sums(self):
        return {rid: progressive_sums(st) for rid, st in self.states.items()}

    @property
    def leader_id(self):
        return self.schedule.leader(self.n_rows, self.sums, live=self.states)

    @property
    def leader(self):
        """The state to report now (`SigmaSchedule.leader`)."""
        return self.states[self.leader_id]

    def advance(self, n, train, diverged=(FloatingPointError,), train_all=None,
                together=1):
        """Train every live run on the next n rows, deciding at the schedule's checks.

        ``train(state, start, stop)`` trains a state on rows [start, stop) of the caller's
        n rows. A run whose training raises one of `diverged` is discarded (recorded in the
        path); if every run has, RaceDivergedError carries their errors. With
        ``train_all(states, start, stop)``, the live runs' states (in the order of their
        ids) are trained on those rows together first (rows crossed in the pass, made
        once for them all: `onlinepgs._core._pgs.run_crossed`; on several threads:
        `onlinepgs._jobs`), and ``train`` then only raises each one's divergence. The
        pieces whose beaten runs go early are trained `together` runs at a time.
        """
        done, errors = 0, []
        while done < n:
            # each piece's mini-batches begin at its first row: the check on their ends
            check = self.schedule.align(self.n_rows)
            if check is not None and check <= self.n_rows:
                raise RuntimeError(f"the schedule's next check ({check}) is not after row "
                                   f"{self.n_rows}")
            stop = n if check is None else min(n, done + check - self.n_rows)
            at = self.n_rows + stop - done
            # at a check that drops runs whatever the others' sums (`beaten`: the first
            # check keeps the best start run alone), a run it drops is let go as soon as
            # it is trained: the runs of that piece are trained `together` at a time (one
            # a thread), and this holds together + 1 trained states at a time instead of
            # every start run's. Every other piece, those ending at the other checks
            # too, is stepped in lockstep
            early = at == check and self.schedule.drops_early(at)
            beaten = (lambda sums: self.schedule.beaten(at, sums)) if early else None
            gone = {}  # the sums of the runs dropped so, for the check's decision
            if train_all is not None and beaten is None:
                train_all([self.states[rid] for rid in sorted(self.states)], done, stop)
            waiting = sorted(self.states)  # a beaten piece's runs not trained yet

            def call(state):
                # `_each` calls the runs in the order of their ids: the first waiting
                # one is this run, then trained with the next ones
                if train_all is not None and beaten is not None and waiting and (
                        self.states.get(waiting[0]) is state):
                    ids = waiting[:max(1, together)]
                    del waiting[:len(ids)]
                    train_all([self.states[rid] for rid in ids], done, stop)
                train(state, done, stop)
            self._each(call, diverged, at, errors, beaten, gone)
            self.n_rows += stop - done
            done = stop
            if check is not None and self.n_rows == check:
                self._apply(self.schedule.decide(self.n_rows, {**gone, **self.sums()}))

    def check(self, check, diverged=(FloatingPointError,)):
        """``check(state)`` on every live run after a call: a run for which it raises one
        of `diverged` is discarded like one that diverged in training (RaceDivergedError
        if none is left)."""
        self._each(check, diverged, self.n_rows, [])

    def _each(self, call, diverged, at_row, errors, beaten=None, gone=None):
        """``call(state)`` on every live run; a run for which it raises one of `diverged`
        is discarded at row `at_row` (its error kept in `errors`); RaceDivergedError
        with them all if none is left. With ``beaten(sums)`` (the runs a check at
        `at_row` drops whatever the others' sums, of those whose sums it is given), each
        run's sums are taken once it is done, and the states of the runs beaten so far
        are let go (their sums into `gone`)."""
        done = {}
        for rid in sorted(self.states):
            try:
                call(self.states[rid])
            except diverged as exc:
                errors.append(exc)
                del self.states[rid]
                self.schedule.discard(rid, at_row)
                continue
            if beaten is not None:
                done[rid] = progressive_sums(self.states[rid])
                for loser in beaten(done):
                    if loser in self.states:
                        gone[loser] = done[loser]
                        del self.states[loser]
        if not self.states:
            raise RaceDivergedError(errors)

    def _apply(self, decision):
        # the dropped runs go before the forks are made (a fork is a whole state: the
        # runs a check drops and its forks are never held at once), their parents after
        parents = {parent for parent, _ in decision.fork}
        for rid in decision.drop:
            if rid not in parents:
                self.states.pop(rid, None)
        forked = {}
        for parent, sigma in decision.fork:
            forked[parent, sigma] = self.states[parent].with_sigma(sigma)
        for rid in decision.drop:
            self.states.pop(rid, None)
        for rid, key in zip(self.schedule.fork_ids(decision), decision.fork):
            self.states[rid] = forked[key]
        # a race of eta that has chosen is its kept family's sigma race from then on
        kept = getattr(self.schedule, "kept", None)
        if kept is not None:
            self.schedule = kept

    def settle(self, reason="fit", epochs=1):
        """End the race: only the leader's state remains (with ``epochs`` > 1, its fork
        for them: `SigmaSchedule.settle`). Returns it."""
        decision = self.schedule.settle(self.n_rows, self.sums(), reason, epochs)
        self._apply(decision)
        return self.states[decision.leader]
