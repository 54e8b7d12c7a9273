"""The runs a distributed fit trains side by side: one for a fixed sigma, several for
``sigma="auto"`` (the race of `onlinepgs._race`).

`Runs` is the fit's global state: each run's `PGSState` by run id, and which one the
model reports (the leader). A round trains every run on the same rows (each lane trains
each run on its slice, the rows read once) and merges each run's lanes as a single run's
are merged (`tasks`). Between rounds the driver's `Race` asks the race's schedule which
runs to drop and which to fork, from the runs' progressive sums, and hands the answer
to every copy of the runs as a `RaceStep`: on a cluster each lane's worker applies it to
its copy (`replicas`) once it has merged the round, the same way on every copy, so the
copies stay equal bit for bit.

No Dask here (the tests call it directly).
"""
# a state's progressive sums (DESIGN-34 section 1): the race's helper is the one place
# that knows how to read them
from onlinepgs._race import progressive_sums

__all__ = ["Race", "RaceStep", "Runs"]


class RaceStep:
    """What every copy of the runs does between two rounds: start the forks, drop runs,
    and which run leads (the model reported).

    Attributes
    ----------
    fork : list of (int, int, float)
        ``(new run id, parent run id, sigma)``: the new run starts as a copy of the
        parent's merged state with that sigma (`PGSState.with_sigma`).
    drop : list of int
        Runs to forget (their states and the lanes' copies are released).
    leader : int
        The run the model reports from now on.
    """

    __slots__ = ("fork", "drop", "leader")

    def __init__(self, fork, drop, leader):
        self.fork, self.drop, self.leader = list(fork), list(drop), int(leader)

    def __repr__(self):
        return f"RaceStep(fork={self.fork}, drop={self.drop}, leader={self.leader})"


class Runs:
    """The global states of a fit's runs, by run id (in the order they started).

    Parameters
    ----------
    states : dict of int to PGSState
    leader : int
        The run whose state the model reports.
    racing : bool, default=False
        Whether the runs race (``sigma="auto"``): then a run that diverges is dropped
        (recorded in ``diverged``) instead of failing the fit, unless it is the last.
    """

    __slots__ = ("states", "leader", "racing", "diverged")

    def __init__(self, states, leader, racing=False):
        self.states = dict(states)
        self.leader = int(leader)
        self.racing = bool(racing)
        self.diverged = []  # (run id, message) of runs the merges dropped, for the driver

    @property
    def state(self):
        """The leader's state: the model the fit reports."""
        return self.states[self.leader]

    def copy(self):
        runs = Runs({k: s.copy() for k, s in self.states.items()}, self.leader, self.racing)
        runs.diverged = list(self.diverged)
        return runs

    def sums(self):
        """Each run's progressive sums (DESIGN-34 section 1), by run id."""
        return {k: progressive_sums(s) for k, s in self.states.items()}

    def apply(self, step):
        """Start the forks (from the parents' merged states), then drop, then lead."""
        for new, parent, sigma in step.fork:
            self.states[new] = self.states[parent].with_sigma(sigma)
        for run in step.drop:
            self.states.pop(run, None)
        self.leader = step.leader

    def drop_diverged(self, run, message):
        """Drop a run that diverged in a round; the leader moves to the first run left
        until the schedule says otherwise. The caller keeps the last run (it raises)."""
        del self.states[run]
        self.diverged.append((run, message))
        if self.leader == run:
            self.leader = next(iter(self.states))


class Race:
    """The driver's side of a race: the schedule (`onlinepgs._race.SigmaSchedule`, pure
    decisions), the rows the race has seen, and when to ask it.

    The schedule decides from ``(n_rows, sums)`` at the row counts it names
    (``next_check``); the driver ends a round there (`quotas`), so that the race decides
    on the same rows whatever the lanes and slices, as the local race does.

    Parameters
    ----------
    schedule : SigmaSchedule
    n_rows : int
        Rows the race has seen already (a race continued by `partial_fit`).
    """

    # Until the race's first decision one lane trains at a time (each lane's rows in
    # turn). A lane counts each of its steps once per lane of the round (`run_lane`), so
    # on n lanes its iterate moves by n times its own gradients; the first steps, of
    # size 1/(sigma t), are the largest at the smallest sigmas, whose progressive loss
    # over the first rows that amplified noise inflates (IMDB, 2 lanes: 0.72 instead of
    # 0.64 at 1e-3 over the first 1000 rows; 4 lanes: 0.87). The first decision then
    # led with 0.1, and a race that descends half a decade per fork point ended at 3e-4
    # (test log loss 0.443) where one lane ends at 3e-5 (0.277). One lane over the first
    # rows costs little: they are few.
    sequential_start = True

    def __init__(self, schedule, n_rows=0):
        self.schedule = schedule
        self.n_rows = int(n_rows)
        self.decided = any(r.get("event") == "check" for r in schedule.path)

    @property
    def next_check(self):
        """The row count of the next decision; None once the race is settled."""
        return self.schedule.next_check(self.n_rows)

    def due(self):
        check = self.next_check
        return check is not None and self.n_rows >= check

    def quotas(self, takes, batch_size):
        """Each lane's rows this round so that the round ends at the next decision's row
        count, given the rows each lane would take (`takes`); None where the round ends
        before it. As even as the lanes allow, in whole mini-batches but (where the count
        needs it) one lane's last; before the first decision, the first lane with rows
        alone (`sequential_start`)."""
        check = self.next_check
        if check is None:
            return None
        remaining = check - self.n_rows
        if self.sequential_start and not self.decided:
            first = next((i for i, t in enumerate(takes) if t > 0), None)
            quotas = [0] * len(takes)
            if first is not None:
                quotas[first] = min(takes[first], remaining)
            return quotas
        if sum(takes) <= remaining:
            return None
        active = [i for i, t in enumerate(takes) if t > 0]
        share = remaining // len(active) // batch_size * batch_size
        quotas = [min(t, share) for t in takes]
        left = remaining - sum(quotas)
        for whole in (True, False):  # whole mini-batches first, then what the count needs
            for i in active:
                add = min(takes[i] - quotas[i], left)
                if whole:
                    add = add // batch_size * batch_size
                quotas[i] += add
                left -= add
        return quotas

    def _lost(self, diverged):
        """Tell the schedule of the runs the merges dropped as diverged (once each)."""
        for run, _ in diverged:
            if run in self.schedule.runs:
                self.schedule.discard(run, self.n_rows)

    def decide(self, sums, diverged):
        """The `RaceStep` at a decision's row count, from the runs' progressive sums
        (run id -> `progressive_sums`) and the runs dropped as diverged since the last."""
        self._lost(diverged)
        decision = self.schedule.decide(self.n_rows, sums)
        self.decided = True
        return self._step(decision)

    def settle(self, sums, diverged, reason="fit", epochs=1):
        """The `RaceStep` that ends the race: the leader alone goes on (with ``epochs``
        passes > 1, its fork for them: `SigmaSchedule.settle`)."""
        self._lost(diverged)
        return self._step(self.schedule.settle(self.n_rows, sums, reason, epochs))

    def _step(self, decision):
        """The `RaceStep` of a schedule's Decision: its forks under their run ids."""
        forks = [(rid, parent, sigma) for rid, (parent, sigma)
                 in zip(self.schedule.fork_ids(decision), decision.fork)]
        return RaceStep(forks, decision.drop, decision.leader)

    def leader(self, sums, diverged):
        """The run to report now (between decisions: `SigmaSchedule.leader`)."""
        self._lost(diverged)
        return self.schedule.leader(self.n_rows, sums)
