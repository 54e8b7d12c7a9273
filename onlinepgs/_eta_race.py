"""eta="auto": the adaptive geometry's base rate chosen by a race of sigma races.

The base rate eta of the adaptive geometry (docs/design/adaptive.md) sets how far one
coordinate moves per unit of its normalized gradient; the best one differs by stream by
more than a decade (0.1 on a9a's one-hot rows, 0.5 on text and click logs, 2 on some
sparse sets), and sigma's best depends on it. `EtaSchedule` runs one sigma race
(`onlinepgs._race.SigmaSchedule`) per eta of `ETAS` on the same rows, side by side, up to
row `DECIDE_AT`; there it keeps the family whose reported model had the lowest mean
progressive loss over the window [`DECIDE_AT` / 2, `DECIDE_AT`] and drops the others, and
from then on it is that family's sigma race alone.

Why a window and why that late (docs/design/adaptive.md, "Choosing eta"): the early rows
favour the small rate (a large one pays its first big steps), so a judgement over the
whole history, or at 250-2,000 rows, picks the rate that is best early, not the one best
over a pass; judged over the second half of the first 4,000 rows the pick equalled the
whole pass's best on every set tried. The cost is three sigma races for those rows, then
one.

`EtaSchedule` is a schedule as `SigmaSchedule` is (the same methods: `start`,
`next_check`, `align`, `drops_early`, `beaten`, `decide`, `leader`, `settle`, `discard`,
`fork_ids`, `to_dict`), so `onlinepgs._race.SigmaRace` runs it unchanged: a pure decision object, which reads only
progressive sums, so the choice depends on the rows and never on how they were split into
calls.
"""
import math

from onlinepgs._race import (INDIFFERENCE, Decision, SigmaSchedule, _finite_or_none,
                             _loss_between, evidence_for)

__all__ = ["EtaSchedule", "ETAS", "ETAS_BELOW_2", "etas_for", "DECIDE_AT"]

ETAS = (0.1, 0.5, 2.0)  # the base rates raced (a decade and a half each side of 0.5)
DEFAULT_ETA = 0.5  # ties and windows too poor in information keep it
# p < 2 (one scalar stabilizer a problem, docs/design/adaptive.md "p < 2"): a rare
# coordinate steps at the rate of the whole gradient's norm, so the best rates are two
# decades higher (8 to 128 in one-pass replays of a9a, w8a, IMDB, the flight log and
# TalkingData at p = 1.5), and p = 2's grid leaves them far too small
ETAS_BELOW_2 = (8.0, 32.0, 128.0)
DEFAULT_ETA_BELOW_2 = 32.0


def etas_for(p):
    """The rates raced at p, and the one that ties keep."""
    return (ETAS, DEFAULT_ETA) if p == 2 else (ETAS_BELOW_2, DEFAULT_ETA_BELOW_2)
DECIDE_AT = 4000  # the row of the choice; its window is the second half of the rows
# each family's run ids start here (disjoint from the other families'): far above any
# race's count of runs (one fork a check, a check per doubling of the rows)
ID_STRIDE = 1 << 20


class EtaSchedule:
    """A race of eta: one sigma race per base rate, the best kept at `DECIDE_AT` rows.

    Parameters
    ----------
    loss : str
    etas : sequence of float, default=`ETAS`
        The base rates raced (each > 0).
    decide_at : int, default=`DECIDE_AT`
        The row count at which one family is kept; judged on the mean progressive loss of
        each family's reported run over the rows since ``decide_at // 2``.
    grid, start : the sigmas of every family's sigma race (`SigmaSchedule`'s; a grid of
        one sigma races eta alone at that sigma).
    default : float, default=`DEFAULT_ETA`
        The rate that ties and windows too poor in information keep (the grid's rate
        nearest to it, in ratio).
    batch_size : int, default=1
        Rows a step: every check (the families', the window's start and the choice)
        falls on whole mini-batches, moved as `SigmaSchedule.align` moves its own.
    indifference : float or None, default=`onlinepgs._race.INDIFFERENCE`
        Every family's duels judged after `DECIDE_AT` (the kept family's, then) whose
        runs' window losses differ by less than this fraction are ties, and two in a row
        settle its race (`SigmaSchedule`; None: it races on).
    **options
        The other `SigmaSchedule` parameters, the same for every family.
    """

    def __init__(self, loss, *, etas=ETAS, decide_at=DECIDE_AT, n_problems=1, batch_size=1,
                 evidence=None, default=DEFAULT_ETA, indifference=INDIFFERENCE, **options):
        etas = sorted({float(e) for e in etas})
        if not etas or not all(e > 0 and math.isfinite(e) for e in etas):
            raise ValueError(f"a race of eta needs positive finite rates, got {etas!r}")
        if int(batch_size) < 1 or int(decide_at) < 2:
            raise ValueError("a race of eta steps on whole mini-batches (batch_size >= 1) "
                             f"and decides after 2 rows or more, got {batch_size!r}, "
                             f"{decide_at!r}")
        self.loss, self.n_problems, self.batch_size = loss, int(n_problems), int(batch_size)
        self.decide_at, self.mark_at = int(decide_at), int(decide_at) // 2
        self.evidence = evidence_for(loss, evidence)
        self.indifference = None if indifference is None else float(indifference)
        self.options = dict(options)
        self.families = {eta: SigmaSchedule(loss, n_problems=n_problems,
                                            batch_size=self.batch_size,
                                            eta=eta, first_id=k * ID_STRIDE,
                                            evidence=evidence,
                                            **self.sigma_options(indifference), **options)
                         for k, eta in enumerate(etas)}
        self.default = min(etas, key=lambda e: (abs(math.log(e / default)), e))
        self.eta = None  # the kept family's rate, once chosen
        self.origin = {}  # run_id -> the run, live at mark_at, it descends from
        self.marks = {}  # a run live at mark_at -> its sums there
        self.own_path = []  # this race's own records (the choice, a family's end)
        self.dropped_path = []  # the records of families whose every run diverged
        self.last_forks = []  # the run ids of the last decision's forks, in its order
        self.decided = 0  # the row of the last decision

    @staticmethod
    def sigma_options(indifference=INDIFFERENCE):
        """The options of the adaptive geometry's sigma races (every family's, and a
        learner's at a fixed eta, so that a kept family equals its rate raced alone):
        ties between sigmas that no longer matter from row `DECIDE_AT` on."""
        return dict(indifference=indifference, indifferent_after=DECIDE_AT)

    # ---- the families ------------------------------------------------------------
    @property
    def grid(self):
        return next(iter(self.families.values())).grid

    @property
    def runs(self):
        """Live runs of every family: run_id -> Run."""
        return {rid: run for f in self.families.values() for rid, run in f.runs.items()}

    @property
    def settled(self):
        return self.eta is not None and self.families[self.eta].settled

    @property
    def kept(self):
        """The kept family's sigma race once eta is chosen (its path then holds every
        family's records and the choice's), else None: `SigmaRace` goes on with it."""
        return None if self.eta is None else self.families[self.eta]

    @property
    def path(self):
        """Every family's records (each with its eta) and this race's own, by row."""
        if self.eta is not None:
            return self.families[self.eta].path
        records = [r for f in self.families.values() for r in f.path]
        return sorted(records + self.dropped_path + self.own_path, key=lambda r: r["rows"])

    def _family_of(self, run_id):
        return next(f for f in self.families.values() if run_id in f.runs)

    def _pending(self):
        """This race's own checks still to come (the window's start, the choice)."""
        return [c for c in (self.mark_at, self.decide_at)
                if self.eta is None and c > self.decided]

    # ---- the schedule's interface ------------------------------------------------
    def start(self):
        """Every family's start runs (once, before any row)."""
        return [run for f in self.families.values() for run in f.start()]

    def next_check(self, n_rows):
        checks = [f.next_check(n_rows) for f in self.families.values()]
        checks = [c for c in checks if c is not None]
        return min(checks + self._pending(), default=None)

    @property
    def check_at(self):
        """The row of the next check (as `SigmaSchedule.check_at`; read with `settled`)."""
        check = self.next_check(self.decided)
        return math.inf if check is None else check

    def align(self, n_rows):
        """Every family's checks aligned (`SigmaSchedule.align`), and the window's start
        and the choice moved alike to the first whole mini-batch of rows trained from row
        `n_rows`; the next check."""
        for family in self.families.values():
            family.align(n_rows)
        b = self.batch_size
        if b > 1 and self.eta is None:
            for key in ("mark_at", "decide_at"):
                check = getattr(self, key)
                if check > n_rows:
                    setattr(self, key, n_rows + -(-(check - n_rows) // b) * b)
        return self.next_check(n_rows)

    def fork_ids(self, decision):
        return list(self.last_forks)

    def decide(self, n_rows, sums):
        """The decision at a check (`SigmaSchedule.decide`): each family due decides;
        at ``mark_at`` the window of the choice begins, at ``decide_at`` one family is
        kept (the others' runs dropped, their forks not made)."""
        if self.next_check(n_rows) != n_rows:
            raise ValueError(f"no decision is due at row {n_rows}")
        self.decided = int(n_rows)
        drop, fork, forks = [], [], []
        for family in list(self.families.values()):
            if family.next_check(n_rows) == n_rows:
                live = list(family.runs)
                d = family.decide(n_rows, {r: sums[r] for r in live if r in sums})
                drop += d.drop
                for (parent, sigma), child in zip(d.fork, family.fork_ids(d)):
                    self.origin[child] = self.origin.get(parent, parent)
                    fork.append((parent, sigma))
                    forks.append(child)
        if self.eta is None and n_rows == self.mark_at:
            runs = self.runs  # one merge of the families' runs, not one a lookup
            for rid in runs:
                parent = runs[rid].parent if rid not in sums else rid
                self.marks[rid] = dict(sums[parent])
                self.origin[rid] = rid
        if self.eta is None and n_rows == self.decide_at:
            kept = self._choose(n_rows, sums)
            for eta, family in list(self.families.items()):
                if eta != kept:
                    gone = set(family.runs)
                    drop += sorted(r for r in gone if r in sums)
                    fork = [f for f, c in zip(fork, forks) if c not in gone]
                    forks = [c for c in forks if c not in gone]
            self._keep(kept)
        self.last_forks = forks
        return Decision(drop=sorted(set(drop)), fork=fork,
                        leader=self.leader(n_rows, sums), settled=self.settled)

    def drops_early(self, n_rows):
        """Whether the check at row `n_rows` may drop runs whatever the others' sums
        (`beaten`): where a family due drops early and this race's own checks do not
        fall."""
        if self.next_check(n_rows) != n_rows or n_rows in self._pending():
            return False
        return any(family.next_check(n_rows) == n_rows and family.drops_early(n_rows)
                   for family in self.families.values())

    def beaten(self, n_rows, sums):
        """The runs of `sums` that the check at row `n_rows` drops whatever the other
        runs' sums (`SigmaSchedule.beaten`): each family due there says which of its
        own; none where this race's own checks fall (the window's start, the choice)."""
        if self.next_check(n_rows) != n_rows or n_rows in self._pending():
            return []
        return sorted(r for family in self.families.values()
                      if family.next_check(n_rows) == n_rows
                      for r in family.beaten(n_rows, {k: sums[k] for k in family.runs
                                                      if k in sums}))

    def _window_losses(self, n_rows, sums):
        """Each family's reported run's mean progressive loss since ``mark_at`` (the
        whole history before it) and the run; only families with a run in `sums`."""
        out = {}
        for eta, family in self.families.items():
            live = [r for r in family.runs if r in sums]
            if not live:
                continue
            rid = family.leader(n_rows, {r: sums[r] for r in live})
            then = self.marks.get(self.origin.get(rid, rid)) if n_rows > self.mark_at else None
            out[eta] = (_loss_between(sums[rid], then), rid, then)
        return out

    def _least(self, losses):
        """The rate of the least window loss (`_window_losses`); ties keep the default."""
        return min(losses, key=lambda e: (losses[e][0], e != self.default))

    def _choose(self, n_rows, sums):
        """The family kept: the lowest window loss; the default's when that window holds
        less than `evidence` of its loss (too few mistakes to tell the rates apart)."""
        losses = self._window_losses(n_rows, sums)
        best = self._least(losses)
        if self.default in losses and best != self.default:
            _, rid, then = losses[self.default]
            mass = sums[rid]["sum_weighted_loss"] - (then["sum_weighted_loss"] if then else 0.0)
            if mass < self.evidence:
                best = self.default
        self.own_path.append(dict(
            rows=int(n_rows), event="eta", eta_chosen=best, window=[self.mark_at, int(n_rows)],
            families=[dict(eta=e, run_id=rid, sigma=self.families[e].runs[rid].sigma,
                           window_loss=_finite_or_none(loss))
                      for e, (loss, rid, _) in sorted(losses.items())]))
        return best

    def _keep(self, eta):
        merged = self.path
        self.families = {eta: self.families[eta]}
        self.families[eta].path = merged
        self.eta = eta
        self.marks, self.origin = {}, {}

    def leader(self, n_rows, sums, live=None):
        """The run to report now: once chosen, the kept family's (`SigmaSchedule.leader`);
        before, the family leader of the lowest mean progressive loss (since ``mark_at``
        once past it)."""
        if self.eta is not None:
            return self.families[self.eta].leader(n_rows, sums, live)
        if live is not None:
            sums = sums()
        losses = self._window_losses(n_rows, sums)
        return losses[self._least(losses)][1] if losses else None

    def discard(self, run_id, n_rows, reason="diverged"):
        """Remove a run that diverged; a family left with no run ends there."""
        family = self._family_of(run_id)
        family.discard(run_id, n_rows, reason)
        if not family.runs and self.eta is None and len(self.families) > 1:
            del self.families[family.eta]
            self.dropped_path += family.path
            self.own_path.append(dict(rows=int(n_rows), event="eta_dropped",
                                      eta=family.eta, reason=reason))
            if len(self.families) == 1:
                self._keep(next(iter(self.families)))

    def settle(self, n_rows, sums, reason="fit", epochs=1):
        """End the race now (`SigmaSchedule.settle`); before the choice, the family of
        the reported run is kept."""
        if self.eta is None:
            leader = self.leader(n_rows, sums)
            kept = self._family_of(leader).eta
            drop = sorted(r for e, f in self.families.items() if e != kept for r in f.runs)
            self.own_path.append(dict(rows=int(n_rows), event="eta", eta_chosen=kept,
                                      reason=reason))
            self._keep(kept)
        else:
            drop = []
        decision = self.families[self.eta].settle(n_rows, sums, reason, epochs)
        self.last_forks = self.families[self.eta].fork_ids(decision)
        decision.drop = sorted(set(decision.drop) | set(drop))
        return decision

    # ---- model files --------------------------------------------------------------
    def to_dict(self):
        """The race as JSON-able values (model files)."""
        return dict(version=1, kind="eta", loss=self.loss, n_problems=self.n_problems,
                    decide_at=self.decide_at, mark_at=self.mark_at,
                    batch_size=self.batch_size, evidence=self.evidence, options=self.options,
                    indifference=self.indifference,
                    default=self.default, eta=self.eta, decided=self.decided,
                    families=[f.to_dict() for f in self.families.values()],
                    origin=[[r, o] for r, o in self.origin.items()],
                    marks=[[r, m] for r, m in self.marks.items()],
                    own_path=self.own_path, dropped_path=self.dropped_path)

    @classmethod
    def from_dict(cls, d):
        """The race of `to_dict`."""
        if d.get("version") != 1 or d.get("kind") != "eta":
            raise ValueError(f"unsupported race of eta {d.get('version')!r}")
        families = [SigmaSchedule.from_dict(f) for f in d["families"]]
        self = cls(d["loss"], etas=[f.eta for f in families], decide_at=d["decide_at"],
                   n_problems=d["n_problems"], batch_size=d.get("batch_size", 1),
                   evidence=d["evidence"], indifference=d.get("indifference"),
                   **d["options"])
        self.mark_at = int(d.get("mark_at", self.mark_at))  # as aligned
        self.families = {f.eta: f for f in families}
        self.default = float(d["default"])
        self.eta = None if d["eta"] is None else float(d["eta"])
        self.decided = int(d["decided"])
        self.origin = {int(r): int(o) for r, o in d["origin"]}
        self.marks = {int(r): dict(m) for r, m in d["marks"]}
        self.own_path, self.dropped_path = list(d["own_path"]), list(d["dropped_path"])
        return self


def schedule_from_dict(d):
    """A race's schedule from its `to_dict` values: a race of eta or a sigma race."""
    return (EtaSchedule if d.get("kind") == "eta" else SigmaSchedule).from_dict(d)
