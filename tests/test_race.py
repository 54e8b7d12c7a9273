"""sigma="auto": the race of PGS runs (onlinepgs._race) against plain fixed-sigma runs.

Yardsticks: a NumPy replay of PGS whose sigma switches at a row (`with_sigma`), fixed-sigma
learners trained alone on the same rows (a race run from row 0 equals its sigma alone,
bit for bit; a forked run equals a manual fork), the same rows in other chunkings, a model
file resumed mid-race, and a loop over the fixed grid for regression quality.
"""
import json

import numpy as np
import pytest
import scipy.sparse as sp

from onlinepgs import PGSClassifier, PGSRegressor, duality_gap
from onlinepgs.duality import gap_of_weights
from onlinepgs._core import PGSState
from onlinepgs._core._pgs import run_lockstep
from onlinepgs._race import (DEFAULT_GRID, FIRST_CHECK, RaceDivergedError, SigmaRace,
                             SigmaSchedule, progressive_sums)
from onlinepgs.model_io import load_learner, save_model
from onlinepgs.pgs import PGSClassifierLearner, PGSDivergedError, PGSRegressorLearner


def _rows(n=3000, d=20, seed=0, classes=2, regression=False):
    """Sparse rows with a linear signal: labels -1/+1, class indices, or real targets."""
    rng = np.random.RandomState(seed)
    X = rng.randn(n, d) * (rng.rand(n, d) < 0.3)
    X[:, 0] += 1.0  # every row has column 0: every chunk shows the full width early
    W = rng.randn(d, classes)
    Z = X @ W + 0.5 * rng.randn(n, classes)
    if regression:
        y = Z[:, 0]
    elif classes == 2:
        y = np.where(Z[:, 0] > Z[:, 1], 1, -1)
    else:
        y = Z.argmax(axis=1)
    return sp.csr_matrix(X), y


# ---- PGSState.with_sigma against a NumPy replay ------------------------------------------

def _numpy_pgs_switch(X, y, sigma1, sigma2, k):
    """Logistic PGS, p = 2 on R^n, the t^2-weighted average; sigma1 for the iterates after
    steps 1..k, sigma2 from the iterate that scores row k + 1 on (a transcription of the
    paper's Figure 1 with w_t = lambda_t / ((t + 1) sigma))."""
    X = np.hstack([np.ones((X.shape[0], 1)), X])  # the intercept as feature 0
    lam = np.zeros(X.shape[1])
    w = np.zeros(X.shape[1])
    total, weight = np.zeros_like(w), 0.0
    for t in range(1, X.shape[0] + 1):
        x, label = X[t - 1], y[t - 1]
        if t == k + 1:  # the fork: the same lambda at the new sigma
            w = lam / (t * sigma2)
        z = x @ w
        lam += label / (1.0 + np.exp(label * z)) * x  # lambda -= l'(z) x
        w = lam / ((t + 1) * (sigma1 if t <= k else sigma2))
        total += t * t * w
        weight += t * t
    return total / weight


@pytest.mark.parametrize("k", [1, 37, 150])
def test_with_sigma_continues_as_a_numpy_replay_of_the_switch(k):
    X, y = _rows(n=300, d=6, seed=k)
    Xd = X.toarray()
    state = PGSState(sigma=1e-2, iterate="weighted2", n_features=6)
    yf, sw = y.astype(float), np.ones(300)
    state.run(np.ascontiguousarray(Xd).ravel(), None, None, 6, yf, sw,
              np.arange(k, dtype=np.int64), True)
    before = state.weights()
    forked = state.with_sigma(1e-3)
    # the average so far is kept; the parent is untouched
    np.testing.assert_allclose(forked.weights(), before, rtol=1e-13, atol=1e-16)
    assert state.sigma == 1e-2 and forked.sigma == 1e-3
    forked.run(np.ascontiguousarray(Xd).ravel(), None, None, 6, yf, sw,
               np.arange(k, 300, dtype=np.int64), True)
    expected = _numpy_pgs_switch(Xd, yf, 1e-2, 1e-3, k)
    np.testing.assert_allclose(forked.weights()[:, 0], expected, rtol=1e-9, atol=1e-12)


def test_with_sigma_scales_the_last_iterate_and_rejects_a_bad_sigma():
    X, y = _rows(n=200, d=5)
    state = PGSState(sigma=1e-2, iterate="last", n_features=5)
    state.run(X.data, X.indices, X.indptr, 5, y.astype(float), np.ones(200),
              np.arange(200, dtype=np.int64), True)
    # w = lambda / ((t + 1) sigma): a tenth of sigma, ten times the weights
    np.testing.assert_allclose(state.with_sigma(1e-3).weights(), 10 * state.weights(),
                               rtol=1e-13)
    for bad in (0.0, -1.0, np.inf, np.nan):
        with pytest.raises(ValueError, match="sigma must be a positive finite number"):
            state.with_sigma(bad)


# ---- the schedule's decisions --------------------------------------------------------------
# (these tests' numbers are worked out for a first check at row 1000: they pass it)

def _sums(loss, rows):
    return dict(n_examples=rows, sum_weight=float(rows), sum_weighted_loss=loss * rows,
                n_mistakes=0, sum_weighted_loss_last=loss * rows, n_mistakes_last=0)


@pytest.mark.parametrize("chase", [False, True])
def test_schedule_judges_by_the_window_and_forks_below_the_leader(chase):
    schedule = SigmaSchedule("logistic", chase=chase, first_check=1000)
    runs = schedule.start()
    assert [r.sigma for r in runs] == [1e-1, 1e-2, 1e-3, 1e-4]
    assert all(r.started_at == 0 and r.parent is None for r in runs)
    assert schedule.next_check(0) == 1000
    # 1e-2 is best over rows 0..1000: it leads, the others go, 10^-2.5 is forked from it
    d = schedule.decide(1000, {0: _sums(0.5, 1000), 1: _sums(0.4, 1000),
                               2: _sums(0.45, 1000), 3: _sums(0.9, 1000)})
    assert (d.leader, d.drop, d.fork, d.settled) == (1, [0, 2, 3], [(1, 10 ** -2.5)], False)
    assert schedule.runs[4].parent == 1 and schedule.runs[4].started_at == 1000
    # the duel: burn-in to row 1250, judged at 1500 on rows 1250..1500 only
    assert schedule.next_check(1000) == 1250
    d = schedule.decide(1250, {1: _sums(0.4, 1250), 4: _sums(0.48, 1250)})
    assert d.drop == [] and d.fork == [] and schedule.next_check(1250) == 1500
    # over rows 1250..1500 the challenger's mean loss is the lower (0.29 against 0.30)
    s1 = _sums(0.4, 1250)
    s4 = _sums(0.48, 1250)
    s1 = dict(s1, sum_weight=1500.0, sum_weighted_loss=s1["sum_weighted_loss"] + 0.30 * 250)
    s4 = dict(s4, sum_weight=1500.0, sum_weighted_loss=s4["sum_weighted_loss"] + 0.29 * 250)
    d = schedule.decide(1500, {1: s1, 4: s4})
    record = schedule.path[-1]
    assert record["leader_sigma"] == 10 ** -2.5 and record["window"] == [1250, 1500]
    assert {r["run_id"]: round(r["window_loss"], 12) for r in record["runs"]} == {
        1: 0.3, 4: 0.29}
    if not chase:
        # the challenger won: it leads alone until the next fork point, 2000
        assert (d.leader, d.drop, d.fork) == (4, [1], [])
        assert schedule.next_check(1500) == 2000
        d = schedule.decide(2000, {4: _sums(0.3, 2000)})
        assert (d.leader, d.drop, d.fork) == (4, [], [(4, 1e-3)])
        assert schedule.next_check(2000) == 2500  # burn-in to 2500, judged at 3000
        return
    # chase: the winner is challenged at once from one step below; the new duel's
    # burn-in ends at 1875, its judgement at 2250 (half way to 2 x 1500)
    assert (d.leader, d.drop, d.fork) == (4, [1], [(4, 1e-3)])
    assert schedule.next_check(1500) == 1875
    assert record["forked"] == [dict(parent=4, sigma=1e-3, run_id=5)]
    schedule.decide(1875, {4: _sums(0.3, 1875), 5: _sums(0.3, 1875)})
    # a lost duel: the winner alone until the fork point 3000
    d = schedule.decide(2250, {4: _sums(0.3, 2250), 5: _sums(0.31, 2250)})
    assert (d.leader, d.drop, d.fork) == (4, [5], [])
    assert schedule.next_check(2250) == 3000


def _duel(schedule, at, runs, means):
    """`decide` at row `at` with each run's mean loss over the judged window (since the
    schedule's marks) given, rows weighted 1."""
    sums = {}
    for rid, mean in zip(runs, means):
        mark = schedule.marks[rid]
        rows = at - schedule.since
        sums[rid] = dict(mark, n_examples=at, sum_weight=mark["sum_weight"] + rows,
                         sum_weighted_loss=mark["sum_weighted_loss"] + mean * rows)
    return schedule.decide(at, sums)


def _to_the_judgement(schedule, leader):
    """Past the burn-in of the duel just forked from `leader` (marks at the same loss):
    the row of its judgement and the challenger's id."""
    challenger = max(schedule.runs)
    at = schedule.next_check(0)
    schedule.decide(at, {r: _sums(0.3, at) for r in (leader, challenger)})
    return schedule.next_check(at), challenger


@pytest.mark.parametrize("after", [0, 10_000])
def test_duels_between_sigmas_that_no_longer_matter_are_ties_and_two_settle(after):
    """With `indifference` (the adaptive geometry's races from row 4,000 on), a duel
    whose runs' mean window losses differ by less than that fraction of the larger is a
    tie: the larger sigma leads, no chase; a second such duel in a row settles the race
    there. A duel that differs by more is judged as always (the challenger wins and is
    chased), and before `indifferent_after` every duel is (the smaller loss wins)."""
    schedule = SigmaSchedule("logistic", first_check=1000, indifference=1e-3,
                             indifferent_after=after)
    schedule.start()
    d = schedule.decide(1000, {0: _sums(0.5, 1000), 1: _sums(0.4, 1000),
                               2: _sums(0.45, 1000), 3: _sums(0.9, 1000)})
    leader = d.leader
    at, challenger = _to_the_judgement(schedule, leader)
    # 0.2% better: a win, chased at once, whatever `after`
    d = _duel(schedule, at, [leader, challenger], [0.3, 0.3 * (1 - 2e-3)])
    assert (d.leader, d.drop, d.settled) == (challenger, [leader], False) and d.fork
    leader = challenger
    at, challenger = _to_the_judgement(schedule, leader)
    # 0.05% better: a tie where indifference applies (the leader stays, no fork now)
    d = _duel(schedule, at, [leader, challenger], [0.3, 0.3 * (1 - 5e-4)])
    if after:
        assert (d.leader, d.settled) == (challenger, False) and d.fork
        assert "indifferent" not in schedule.path[-1]
        return
    assert (d.leader, d.drop, d.fork, d.settled) == (leader, [challenger], [], False)
    assert schedule.path[-1]["indifferent"] and schedule.indifferent == 1
    copy = SigmaSchedule.from_dict(json.loads(json.dumps(schedule.to_dict())))
    assert copy.to_dict() == schedule.to_dict() and copy.indifferent == 1
    # the next fork point's duel, again within 0.1% (the challenger worse): settled
    at = schedule.next_check(at)
    d = schedule.decide(at, {leader: _sums(0.3, at)})
    assert d.fork
    at, challenger = _to_the_judgement(schedule, leader)
    d = _duel(schedule, at, [leader, challenger], [0.3, 0.3 * (1 + 5e-4)])
    assert (d.leader, d.drop, d.fork, d.settled) == (leader, [challenger], [], True)
    assert schedule.next_check(at) is None


def test_schedule_round_trips_through_json_and_decides_the_same():
    schedule = SigmaSchedule("squared", batch_size=7, first_check=1000)
    schedule.start()
    sums = {r: _sums(0.1 * (r + 1), 1001) for r in range(4)}
    assert schedule.next_check(0) == 1001  # whole mini-batches
    schedule.decide(1001, sums)
    copy = SigmaSchedule.from_dict(json.loads(json.dumps(schedule.to_dict())))
    assert copy.to_dict() == schedule.to_dict()
    later = {0: _sums(0.3, 1253), 4: _sums(0.2, 1253)}
    assert copy.next_check(1001) == schedule.next_check(1001) == 1253
    assert copy.decide(1253, later) == schedule.decide(1253, later)


def test_schedule_settles_at_the_bottom_of_its_grid():
    schedule = SigmaSchedule("logistic", grid=[1e-1, 1e-2], first_check=1000)
    assert [r.sigma for r in schedule.start()] == [1e-1, 1e-2]
    d = schedule.decide(1000, {0: _sums(0.5, 1000), 1: _sums(0.4, 1000)})
    assert d.settled and d.leader == 1 and d.fork == [] and schedule.next_check(1000) is None


def _same_state(a, b):
    """Two PGS states equal bit for bit, field by field (their `to_dict`)."""
    da, db = a.to_dict(), b.to_dict()
    assert da.keys() == db.keys()
    for key in da:
        if isinstance(da[key], np.ndarray):
            assert da[key].tobytes() == db[key].tobytes(), key
        else:
            assert repr(da[key]) == repr(db[key]), key


def _assorted_states(n_features):
    """States of several kinds (the adaptive geometry, the default ball, p < 2, l1, the
    random iterate) and one that diverges (sigma 1e-9 on R^n with large targets)."""
    kinds = [dict(sigma=1e-2, geometry="adaptive", eta=0.5, radius=None),
             dict(sigma=1e-1, radius="auto", iterate="weighted2"),
             dict(sigma=1e-9, radius=None), dict(sigma=1e-2, p=1.5, radius="auto"),
             dict(sigma=1e-2, l1=1e-3, radius=None), dict(sigma=1e-2, iterate="random")]
    return [PGSState(loss="squared", n_features=n_features, seed=3, **kind) for kind in kinds]


@pytest.mark.parametrize("form", ["csr32", "csr64", "dense"])
def test_states_in_lockstep_end_as_each_alone(form):
    """run_lockstep (a race's runs on a chunk of rows, each row read once for them all):
    every state ends as its own pass over the same rows, bit for bit, a diverging one
    stopped at its row, the others going on (yardstick: `PGSState.run`, state after
    state)."""
    X, y = _rows(n=400, d=30, seed=5, regression=True)
    y = y * 1e6
    order = np.arange(X.shape[0], dtype=np.int64)[::-1].copy()
    sw = np.ones(X.shape[0])
    if form == "dense":
        args = (np.ascontiguousarray(X.toarray()).ravel(), None, None)
    else:
        dtype = np.int32 if form == "csr32" else np.int64
        args = (X.data, X.indices.astype(dtype), X.indptr.astype(dtype))
    together, alone = _assorted_states(X.shape[1]), _assorted_states(X.shape[1])
    run_lockstep(together, *args, X.shape[1], y, sw, order, False)
    for state in alone:
        state.run(*args, X.shape[1], y, sw, order, False)
    assert [s.diverged for s in together] == [False, False, True, False, False, False]
    assert together[2].diverged_row == alone[2].diverged_row and together[2].t < len(y)
    for a, b in zip(together, alone):
        _same_state(a, b)


@pytest.mark.parametrize("kind", [dict(geometry="adaptive", eta=0.5, radius=None),
                                  dict(radius="auto", iterate="weighted2")])
def test_a_fork_is_its_parent_bit_for_bit_over_reused_memory(kind):
    """A fork's block is taken without zeros where every element is copied (the adaptive
    state), with zeros where only the coordinates reached are (the ball's list): over
    memory that held NaNs just before, the fork equals its parent bit for bit (the same
    numbers, the same zeros elsewhere), then steps as a fork into fresh memory."""
    X, y = _rows(n=200, d=30, seed=7, regression=True)
    width = 300_000  # a block of 2 MB or more: it starts a huge page
    parent = PGSState(loss="squared", sigma=1e-2, n_features=width, seed=3, **kind)
    order, sw = np.arange(150, dtype=np.int64), np.ones(X.shape[0])
    y = np.ascontiguousarray(y)
    parent.run(X.data, X.indices, X.indptr, X.shape[1], y, sw, order, False)
    nbytes = parent.block_a.nbytes
    fresh = parent.with_sigma(1e-3)
    for _ in range(3):  # freed memory full of NaNs, which the next blocks may reuse
        garbage = np.full(nbytes // 8 + 1024, np.nan)
        del garbage
        reused = parent.with_sigma(1e-3)
        if parent.adaptive:  # its fork changes no number of the block (sigma is read afresh)
            np.testing.assert_array_equal(reused.block_a, parent.block_a)
        untouched = ~parent.block_a.any(axis=(1, 2))
        assert untouched.sum() > width // 2 and not reused.block_a[untouched].any()
        _same_state(reused, fresh)
    rest = np.arange(150, 200, dtype=np.int64)
    for state in (fresh, reused):
        state.run(X.data, X.indices, X.indptr, X.shape[1], y, sw, rest, False)
    _same_state(fresh, reused)
    # a model file's state is built the same way
    _same_state(PGSState.from_dict(fresh.to_dict()), fresh)


# ---- the race against fixed-sigma runs --------------------------------------------------------

@pytest.mark.parametrize("kind", ["binary", "multiclass", "regression"])
def test_race_runs_equal_fixed_sigma_runs_and_manual_forks(kind):
    """Just after the first fork (row FIRST_CHECK, past its duel's burn-in): the leader,
    from row 0, equals its sigma trained alone bit for bit; the challenger equals the
    leader's sigma trained to row FIRST_CHECK, forked by hand with with_sigma and trained
    on the rest."""
    regression = kind == "regression"
    # the duel's burn-in ends at 1.25 FIRST_CHECK, its judgement at 1.5 FIRST_CHECK
    n, cut = FIRST_CHECK * 13 // 10, FIRST_CHECK * 6 // 10
    X, y = _rows(n=n, classes=3 if kind == "multiclass" else 2, regression=regression)
    Learner = PGSRegressorLearner if regression else PGSClassifierLearner
    fit_kw = {} if regression else {"classes": np.unique(y)}
    race_est = Learner(sigma="auto", random_state=0).partial_fit(X[:cut], y[:cut], **fit_kw)
    race_est.partial_fit(X[cut:], y[cut:])
    race = race_est._race
    live = race.schedule.runs
    assert len(live) == 2 and race.n_rows == n
    leader = next(r for r in live.values() if r.parent is None)
    challenger = next(r for r in live.values() if r.parent is not None)
    assert challenger.parent == leader.run_id and challenger.started_at == FIRST_CHECK
    assert challenger.sigma < leader.sigma
    alone = Learner(sigma=leader.sigma, random_state=0).partial_fit(X, y, **fit_kw)
    np.testing.assert_array_equal(race.states[leader.run_id].weights(), alone._state.weights())
    manual = Learner(sigma=leader.sigma, random_state=0).partial_fit(
        X[:FIRST_CHECK], y[:FIRST_CHECK], **fit_kw)
    manual._state = manual._state.with_sigma(challenger.sigma)
    manual.partial_fit(X[FIRST_CHECK:], y[FIRST_CHECK:])
    np.testing.assert_array_equal(race.states[challenger.run_id].weights(),
                                  manual._state.weights())
    # the path says which run was added when, from which
    fork = race_est.sigma_path_[0]
    assert fork["rows"] == FIRST_CHECK and fork["forked"] == [
        dict(parent=leader.run_id, sigma=challenger.sigma, run_id=challenger.run_id)]
    assert race_est.sigma_ == race_est.model_.sigma == race_est._state.sigma
    assert race_est.sigma_ in DEFAULT_GRID


def test_every_piece_of_a_race_steps_its_live_runs_together(monkeypatch):
    """One row a step on one thread (n_jobs=1; tests/test_race_threads.py: on several):
    every piece of rows, those that end at a check too, is one
    `run_lockstep` call for every live run (not one call a run), but the piece that
    ends at the first check (its start runs trained in turn, each beaten one let go at
    once); and the race ends as the race whose runs are trained one at a time
    (yardstick: `run_lockstep` called on each state alone)."""
    import onlinepgs.pgs as pgs_module
    X, y = _rows(n=2500, classes=2)
    calls, races = [], []
    advance = SigmaRace.advance

    def watch(self, *args, **kwargs):
        races.append(self)
        return advance(self, *args, **kwargs)

    def spy(states, *args, **kwargs):
        calls.append((len(states), len(races[-1].states), races[-1].n_rows))
        return run_lockstep(states, *args, **kwargs)
    monkeypatch.setattr(SigmaRace, "advance", watch)
    monkeypatch.setattr(pgs_module, "run_lockstep", spy)
    together = PGSClassifierLearner(sigma="auto", random_state=0, n_jobs=1).fit(X, y)
    later = [(n, live) for n, live, at in calls if at >= FIRST_CHECK]
    assert len(later) > 4 and all(n == live for n, live in later)
    assert any(n > 1 for n, _ in later)
    assert [n for n, _, at in calls if at < FIRST_CHECK] == [1, 1, 1, 1]

    def one_at_a_time(states, *args, **kwargs):
        for state in states:
            run_lockstep([state], *args, **kwargs)
    monkeypatch.setattr(pgs_module, "run_lockstep", one_at_a_time)
    alone = PGSClassifierLearner(sigma="auto", random_state=0, n_jobs=1).fit(X, y)
    assert together.sigma_path_ == alone.sigma_path_
    np.testing.assert_array_equal(together.model_.coef, alone.model_.coef)
    np.testing.assert_array_equal(together.model_.intercept, alone.model_.intercept)


def _stream(X, y):
    for i in range(X.shape[0]):
        row = X[i]
        yield dict(zip(row.indices.tolist(), row.data.tolist())), y[i]


def test_the_race_does_not_depend_on_the_chunking():
    X, y = _rows(n=4100)
    fitted = PGSClassifierLearner(sigma="auto", max_epochs=1, shuffle=False,
                                  random_state=3).fit(X, y)
    chunked = PGSClassifierLearner(sigma="auto", random_state=3)
    for lo in range(0, 4100, 777):
        chunked.partial_fit(X[lo:lo + 777], y[lo:lo + 777], classes=[-1, 1])
    streamed = PGSClassifierLearner(sigma="auto", random_state=3).fit_stream(
        _stream(X, y), classes=[-1, 1], chunk_rows=450)
    assert len(fitted.sigma_path_) >= 5  # several checks: forks, burn-ins, judgements
    for other in (chunked, streamed):
        assert other.sigma_ == fitted.sigma_
        np.testing.assert_array_equal(other.model_.coef, fitted.model_.coef)
        np.testing.assert_array_equal(other.model_.intercept, fitted.model_.intercept)
        # the same checks; fit then settles the race at the end of its pass
        assert other.sigma_path_ == fitted.sigma_path_[:-1]
    assert fitted.sigma_path_[-1]["event"] == "settle"
    assert len(fitted._race.states) == 1 and len(chunked._race.states) == 2


def test_the_race_after_a_short_batch_does_not_depend_on_the_chunking():
    """Two passes of 1503 rows in mini-batches of 4, as the streaming engine calls
    partial_fit (whole batches, each pass's short batch last): the short batch shifts the
    second pass's batches off the checks' multiples of 4, and a check left there would
    split a batch at a place that depends on the calls (`SigmaSchedule.align` moves it
    onto the batches' ends)."""
    n, k = 1503, 4
    X, y = _rows(n=n)

    def two_passes(chunk):
        est = PGSClassifierLearner(sigma="auto", batch_size=k, random_state=0)
        for _ in range(2):
            for lo in range(0, n, chunk):
                est.partial_fit(X[lo:lo + chunk], y[lo:lo + chunk], classes=[-1, 1])
        return est

    whole = two_passes(n + 1)
    checks = [r["rows"] for r in whole.sigma_path_]
    assert any(c > n and (c - n) % k == 0 and c % k for c in checks), checks
    for chunk in (400, 52):
        other = two_passes(chunk)
        assert other.sigma_path_ == whole.sigma_path_
        np.testing.assert_array_equal(other.model_.coef, whole.model_.coef)


def test_fit_continues_the_winner_after_its_first_pass():
    """fit's later epochs continue the first pass's winner, forked at the grid's sigma
    nearest its sigma / max_epochs (the rows seen grow max_epochs-fold): the same as a
    one-epoch fit's state, forked by hand and trained on the next epochs' orders."""
    X, y = _rows(n=2600)
    est = PGSClassifierLearner(sigma="auto", max_epochs=3, random_state=0).fit(X, y)
    first = PGSClassifierLearner(sigma="auto", max_epochs=1, random_state=0).fit(X, y)
    grid = SigmaSchedule("logistic").grid
    target = min(grid, key=lambda s: abs(np.log(s / (first.sigma_ / 3))))
    assert target < first.sigma_ and est.sigma_ == target
    assert est.n_iter_ == 3 and est.t_ == 3 * 2600
    settle = est.sigma_path_[-1]
    assert settle["event"] == "settle" and settle["epochs"] == 3
    assert settle["leader_sigma"] == first.sigma_ and settle["sigma_for_epochs"] == target
    assert est.sigma_path_[:-1] == first.sigma_path_[:-1]
    # the yardstick: the one-epoch winner's state, forked and trained by hand
    rng = np.random.RandomState(0)
    rng.randint(0, 2**31 - 1), rng.randint(0, 2**31 - 1)  # the state's seed
    orders = [rng.permutation(2600).astype(np.int64) for _ in range(3)]
    state = first._state.with_sigma(target)
    X_csr = sp.csr_matrix(X) if not sp.issparse(X) else X
    for order in orders[1:]:
        state.run(X_csr.data, X_csr.indices.astype(np.int32), X_csr.indptr.astype(np.int64),
                  X_csr.shape[1], y.astype(np.float64), np.ones(2600), order, True, None)
    np.testing.assert_array_equal(state.weights(), est._state.weights())


def test_a_saved_race_resumes_exactly(tmp_path):
    X, y = _rows(n=4000)
    whole = PGSClassifierLearner(sigma="auto", random_state=0)
    whole.partial_fit(X, y, classes=[-1, 1])
    # stop in a duel's burn-in, two runs live, after the first one
    cut = [r["rows"] for r in whole.sigma_path_ if r.get("forked")][1] + 10
    half = PGSClassifierLearner(sigma="auto", random_state=0)
    half.partial_fit(X[:cut], y[:cut], classes=[-1, 1])
    assert len(half._race.states) == 2
    save_model(half, tmp_path / "m.pgs")
    loaded = load_learner(tmp_path / "m.pgs")
    assert loaded.sigma_path_ == half.sigma_path_ and loaded._race.n_rows == cut
    loaded.partial_fit(X[cut:], y[cut:])
    assert loaded.sigma_ == whole.sigma_ and loaded.sigma_path_ == whole.sigma_path_
    assert sorted(loaded._race.states) == sorted(whole._race.states)
    for rid, state in whole._race.states.items():
        np.testing.assert_array_equal(loaded._race.states[rid].weights(), state.weights())
    np.testing.assert_array_equal(loaded.model_.coef, whole.model_.coef)


# ---- divergence, regression, duality --------------------------------------------------------

def test_a_diverging_run_is_dropped_and_the_fit_goes_on():
    """Squared loss on R^n: the steps 1/(sigma t) of the small-sigma runs overflow on
    large targets; those runs leave the race, recorded, and the fit succeeds."""
    rng = np.random.RandomState(0)
    X = rng.randn(1500, 5) * 3.0
    y = X @ rng.randn(5) * 10.0
    est = PGSRegressorLearner(sigma="auto", radius=None, random_state=0).fit(X, y)
    drops = [r for r in est.sigma_path_ if r["event"] == "drop"]
    assert drops and all(r["reason"] == "diverged" for r in drops)
    assert all(r["sigma"] < est.sigma_ for r in drops)
    assert np.isfinite(est.model_.coef).all()
    with pytest.raises(PGSDivergedError):  # alone, such a sigma fails the fit
        PGSRegressorLearner(sigma=drops[0]["sigma"], radius=None, random_state=0).fit(X, y)


def test_every_run_diverging_fails_the_fit():
    schedule = SigmaSchedule("squared")
    race = SigmaRace.begin(schedule, lambda s: PGSState(sigma=s, loss="squared"))

    def train(state, start, stop):
        raise FloatingPointError(f"diverged at sigma {state.sigma}")
    with pytest.raises(RaceDivergedError) as info:
        race.advance(10, train)
    assert len(info.value.errors) == 4
    assert [r["sigma"] for r in schedule.path] == [1e-1, 1e-2, 1e-3, 1e-4]


@pytest.mark.parametrize("fitted_before", [False, True])
def test_every_run_diverging_in_partial_fit_raises_its_error(fitted_before):
    """partial_fit whose every race run diverges raises the divergence (not a KeyError of
    the emptied race, nor an IndexError at the next call); a first call leaves no model,
    a later one a model that says it is not usable, as a fixed sigma's does."""
    X = np.array([[1e200], [2e200], [1e200]])
    est = PGSRegressor(loss="squared", random_state=0)
    if fitted_before:
        est.partial_fit(X * 1e-200, [1.0, 2.0, 3.0])
    with pytest.raises(PGSDivergedError, match="diverged"):
        est.partial_fit(X, [1.0, 2.0, 3.0])
    if not fitted_before:
        assert not hasattr(est, "coef_")
        return
    fixed = PGSRegressor(loss="squared", sigma=est.sigma_, random_state=0)
    fixed.partial_fit(X * 1e-200, [1.0, 2.0, 3.0])
    with pytest.raises(PGSDivergedError):
        fixed.partial_fit(X, [1.0, 2.0, 3.0])
    for model in (est, fixed):
        with pytest.raises(PGSDivergedError, match="not usable"):
            model.predict(X * 1e-200)
        with pytest.raises(PGSDivergedError):
            model.partial_fit(X * 1e-200, [1.0, 2.0, 3.0])


def test_regression_auto_is_near_the_best_fixed_sigma():
    X, y = _rows(n=6000, d=30, seed=5, regression=True)
    Xt, yt = X[4000:], y[4000:]
    X, y = X[:4000], y[:4000]
    grid = [10.0 ** -k for k in range(1, 8)]
    fixed = {s: PGSRegressor(sigma=s, max_epochs=1, random_state=0).fit(X, y).score(Xt, yt)
             for s in grid}
    auto = PGSRegressor(sigma="auto", max_epochs=1, random_state=0).fit(X, y)
    assert auto.score(Xt, yt) >= max(fixed.values()) - 0.01
    assert auto.score(Xt, yt) > 0.0  # better than the constant prediction


def test_duality_certifies_the_chosen_sigma():
    X, y = _rows(n=1500)
    est = PGSClassifier(sigma="auto", random_state=0).fit(X, y)
    gap = duality_gap(est, X, y)
    by_hand = gap_of_weights(est.coef_[0], est.intercept_[0], X, np.where(y > 0, 1, -1),
                             loss="logistic", sigma=est.sigma_, radius=est.model_.radius)
    assert gap.primal == pytest.approx(by_hand.primal, rel=1e-12)
    assert est.online_stats_["n_examples"] == 5 * 1500


def test_progressive_sums_reads_the_state():
    X, y = _rows(n=500)
    est = PGSClassifierLearner(sigma=1e-2, random_state=0).fit(X, y)
    sums = progressive_sums(est._state)
    assert sums["n_examples"] == est.online_stats_["n_examples"]
    assert sums["sum_weighted_loss"] / sums["sum_weight"] == pytest.approx(
        est.online_stats_["progressive_loss"])


# ---- the command line and scikit-learn's checks ---------------------------------------------

def test_train_sigma_auto_prints_and_saves_the_choice(tmp_path):
    import subprocess
    import sys

    from sklearn.datasets import dump_svmlight_file

    from onlinepgs import load_model, load_svmlight

    X, y = _rows(n=2600)
    data, model, more = tmp_path / "d.svm", tmp_path / "m.pgs", tmp_path / "m2.pgs"
    dump_svmlight_file(X, y, str(data), zero_based=False)
    exe = [sys.executable, "-m", "onlinepgs.cli", "train"]
    done = subprocess.run(exe + [str(data), "-o", str(model), "--sigma", "auto",
                                 "--chunk-rows", "700"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    note = [line for line in done.stderr.splitlines() if line.startswith("sigma = ")]
    saved = load_model(model)
    # the same rows (as the file gives them) through partial_fit in other chunks
    X, y = load_svmlight(str(data))
    learner = PGSClassifierLearner(sigma="auto", random_state=0)
    learner.partial_fit(X[:1300], y[:1300], classes=[-1, 1]).partial_fit(X[1300:], y[1300:])
    assert saved.sigma_ == learner.sigma_ and saved.sigma_path_ == learner.sigma_path_
    np.testing.assert_array_equal(saved.coef_, learner.model_.coef)
    assert len(note) == 1 and note[0].startswith(f"sigma = {learner.sigma_!r} (auto: ")
    # -i continues the race
    done = subprocess.run(exe + [str(data), "-i", str(model), "-o", str(more), "--quiet"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    learner.partial_fit(X, y)
    np.testing.assert_array_equal(load_model(more).coef_, learner.model_.coef)
    assert load_model(more).sigma_path_ == learner.sigma_path_
    refused = subprocess.run(exe + [str(data), "--sigma", "auto", "--solver", "sdca"],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and refused.stderr.strip().endswith(
        "argument --sigma: --sigma auto races PGS runs over a stream; --solver sdca needs a number")


@pytest.mark.parametrize("options", [dict(batch_size=7), dict(p=1.5), dict(n_bits=4),
                                     dict(iterate="random"), dict(loss="hinge")])
def test_the_race_is_chunking_invariant_for_every_option(options):
    """Checks fall on whole mini-batches; p < 2, hashing, the random iterate and other
    losses fork and race like the default."""
    X, y = _rows(n=3001)
    fitted = PGSClassifierLearner(sigma="auto", max_epochs=1, shuffle=False, random_state=1,
                                  **options).fit(X, y)
    chunked = PGSClassifierLearner(sigma="auto", random_state=1, **options)
    for lo in range(0, 3001, 700):
        chunked.partial_fit(X[lo:lo + 700], y[lo:lo + 700], classes=[-1, 1])
    assert chunked.sigma_ == fitted.sigma_
    np.testing.assert_array_equal(chunked.model_.coef, fitted.model_.coef)
    checks = [r["rows"] for r in chunked.sigma_path_]
    assert len(checks) >= 3 and all(r % options.get("batch_size", 1) == 0 for r in checks)


def test_two_passes_of_a_stream_end_the_race_with_the_first_as_fit_does(tmp_path):
    """train_stream (and so `onlinepgs train --passes 2`) ends the race with its first
    pass, forked for the passes, as fit does for its epochs: the second pass's rows were
    seen, so their progressive loss could not judge. Same model as fit, bit for bit."""
    from onlinepgs import load_svmlight
    from onlinepgs.streaming import train_stream

    X, y = _rows(n=2600)
    path = tmp_path / "d.svm"
    with open(path, "w") as f:  # repr: the values round-trip exactly
        for i, label in enumerate(y):  # X is CSR: its rows' entries in column order
            row = X[i]
            f.write(f"{label} " + " ".join(f"{j + 1}:{float(v)!r}"
                                           for j, v in zip(row.indices, row.data)) + "\n")
    run = train_stream(PGSClassifierLearner(random_state=0), str(path), passes=2,
                       chunk_rows=700)
    Xs, ys = load_svmlight(str(path))
    fit = PGSClassifierLearner(max_epochs=2, shuffle=False, random_state=0).fit(Xs, ys)
    settle = run.learner.sigma_path_[-1]
    assert settle["event"] == "settle" and settle["epochs"] == 2
    assert settle["rows"] == 2600 and run.learner.sigma_ == fit.sigma_
    assert settle["reason"] == "passes" and fit.sigma_path_[-1]["reason"] == "fit"
    assert run.learner.sigma_path_[:-1] == fit.sigma_path_[:-1]
    assert dict(settle, reason="fit") == fit.sigma_path_[-1]
    np.testing.assert_array_equal(run.learner._state.weights(), fit._state.weights())


def test_fit_on_fewer_rows_than_the_first_check_keeps_the_start_winner():
    """No check before the end of the first pass: the start runs were compared on too few
    rows to place the optimum, so the later epochs keep the winner's sigma (no fork)."""
    X, y = _rows(n=FIRST_CHECK - 50)
    est = PGSClassifierLearner(max_epochs=3, random_state=0).fit(X, y)
    settle = est.sigma_path_[-1]
    assert [r["event"] for r in est.sigma_path_] == ["settle"]
    assert settle["sigma_for_epochs"] == settle["leader_sigma"] == est.sigma_
    assert est.t_ == 3 * (FIRST_CHECK - 50)
    more = PGSClassifierLearner(max_epochs=3, random_state=0).fit(*_rows(n=FIRST_CHECK + 50))
    assert more.sigma_path_[-1]["sigma_for_epochs"] < more.sigma_path_[-1]["leader_sigma"]


# ---- rare positives: a duel needs a window that carries information ----------------------

def _rare_stream(n, seed):
    """One-hot rows of 3 fields x 10 values, labels drawn from a logistic model whose
    intercept (-7.5) makes positives rare (~0.15%): most early windows hold none."""
    rng = np.random.RandomState(seed)
    fields, values = 3, 10
    effects = np.random.RandomState(99).randn(fields, values) * 1.2
    cols = rng.randint(values, size=(n, fields))
    z = -7.5 + effects[np.arange(fields), cols].sum(axis=1)
    y = (rng.rand(n) < 1.0 / (1.0 + np.exp(-z))).astype(float)
    X = sp.csr_matrix((np.ones(n * fields), (np.repeat(np.arange(n), fields),
                                              (cols + values * np.arange(fields)).ravel())),
                      shape=(n, fields * values))
    return X, y


def test_rare_positives_do_not_drive_sigma_down_on_empty_windows(monkeypatch):
    """The old rule (evidence 0) lets a challenger win a window with no positive, where
    every run's loss is ~0 and the smaller sigma's more negative intercept wins by a hair:
    it walks down to 1e-5 and its held-out log loss is three times the best fixed
    sigma's. With the evidence rule the race stays near the best fixed sigma."""
    from onlinepgs import _race
    X, y = _rare_stream(20000, 0)
    Xt, yt = _rare_stream(20000, 1)

    def held_out(**kw):
        est = PGSClassifierLearner(**kw)
        for i in range(0, len(y), 1000):
            est.partial_fit(X[i:i + 1000], y[i:i + 1000], classes=np.array([0.0, 1.0]))
        p = np.clip(est.predict_proba(Xt)[:, 1], 1e-15, 1 - 1e-15)
        return est, -np.mean(yt * np.log(p) + (1 - yt) * np.log(1 - p))

    best = min(held_out(sigma=s)[1] for s in (1e-3, 10 ** -3.5, 1e-4, 10 ** -4.5))
    new, new_loss = held_out()
    monkeypatch.setattr(_race, "EVIDENCE", 0.0)
    old, old_loss = held_out()
    assert old.sigma_ < new.sigma_
    assert old_loss > 2 * best and new_loss <= 1.05 * best
    # every step down of the old race was taken on a window where the leader it replaced
    # lost under one nat in all (no positive): the evidence rule refuses exactly those
    downs = [(r["rows"], r["window"], next(x for x in r["runs"] if x["sigma"] > r["leader_sigma"]))
             for r in old.sigma_path_ if r["event"] == "check" and r["window"][0] > 0
             and any(x["sigma"] > r["leader_sigma"] for x in r["runs"])]
    assert len(downs) >= 3
    for rows, (start, stop), beaten in downs:
        assert beaten["window_loss"] * (stop - start) < 1.0, rows
    assert min(r["leader_sigma"] for r in new.sigma_path_) >= 1e-4


def test_a_duel_on_a_window_without_information_keeps_the_leader():
    """The duel of TalkingData's row 375 (63 judged rows, no positive): the leader's mean
    loss 2.9e-11 against the challenger's 0; the lead moves only once the leader's summed
    loss over the window reaches `evidence` (3 log 2 for the logistic loss)."""
    for mass, moves in [(63 * 2.9e-11, False), (3 * np.log(2) - 1e-9, False),
                        (3 * np.log(2) + 1e-9, True)]:
        schedule = SigmaSchedule("logistic", first_check=250)
        schedule.start()
        schedule.decide(250, {r: _sums(0.01 * (4 - r), 250) for r in range(4)})
        assert schedule.runs[4].sigma == 10 ** -4.5
        leader_sums, challenger_sums = _sums(0.003, 250), _sums(0.003, 250)
        schedule.decide(312, {3: leader_sums, 4: challenger_sums})  # the burn-in's end
        d = schedule.decide(375, {
            3: dict(leader_sums, sum_weight=375.0,
                    sum_weighted_loss=leader_sums["sum_weighted_loss"] + mass),
            4: dict(challenger_sums, sum_weight=375.0,
                    sum_weighted_loss=challenger_sums["sum_weighted_loss"] + mass / 2)})
        assert d.leader == (4 if moves else 3), mass
    # regression losses keep the old rule: no unit of information to count
    assert SigmaSchedule("squared").evidence == 0.0


# ---- memory: the runs a check drops are let go as soon as they are trained ---------------

def _trained_alive(monkeypatch, est):
    """Spy on `est`'s race as it trains: the most states the race holds that were
    trained already, besides the one being trained, at any run's training call."""
    races, most = [], [0]
    advance, train = SigmaRace.advance, type(est)._run

    def watch(self, *args, **kwargs):
        races.append(self)
        return advance(self, *args, **kwargs)

    def spy(self, state, *args, **kwargs):
        held = [s for s in races[-1].states.values() if s is not state and s.n_examples > 0]
        most[0] = max(most[0], len(held))
        return train(self, state, *args, **kwargs)
    monkeypatch.setattr(SigmaRace, "advance", watch)
    monkeypatch.setattr(type(est), "_run", spy)
    return most


@pytest.mark.parametrize("chunk", [5000, 100])
def test_the_first_check_holds_one_start_run_besides_the_one_trained(monkeypatch, chunk):
    """The first check keeps the best start run alone: a start run beaten by another one
    trained before it is let go at once (the K-class states of news20 are 20 MB each),
    and the race goes on as if every start run had lived to the check: its path and its
    model equal, bit for bit, those of the race whose runs are all kept to the check.
    (Steps of 2 rows on one thread: the runs train one after another. Steps of one row
    train them in lockstep, a row for them all, so every start run is trained when the
    check comes; on several threads: tests/test_race_threads.py.)"""
    X, y = _rows(n=1200, classes=5)

    def fit(est):
        for lo in range(0, X.shape[0], chunk):
            est.partial_fit(X[lo:lo + chunk], y[lo:lo + chunk], classes=np.unique(y))
        return est
    lean = PGSClassifierLearner(sigma="auto", random_state=0, batch_size=2, n_jobs=1)
    most = _trained_alive(monkeypatch, lean)
    fit(lean)
    # a call covering the first check: the best so far and the one being trained; a
    # call ending before it holds what the earlier calls trained (every start run)
    assert most[0] == (1 if chunk > FIRST_CHECK else 3)
    monkeypatch.setattr(SigmaSchedule, "beaten", lambda self, n_rows, sums: [])
    whole = fit(PGSClassifierLearner(sigma="auto", random_state=0, batch_size=2, n_jobs=1))
    assert lean.sigma_path_ == whole.sigma_path_
    assert [r["event"] for r in lean.sigma_path_][:1] == ["check"]
    assert len(lean.sigma_path_[0]["runs"]) == 4  # every start run's sums recorded
    np.testing.assert_array_equal(lean.model_.coef, whole.model_.coef)
    np.testing.assert_array_equal(lean.model_.intercept, whole.model_.intercept)


def test_beaten_names_all_but_the_best_at_the_first_check_only():
    schedule = SigmaSchedule("logistic")
    runs = schedule.start()
    sums = {r.run_id: dict(sum_weight=250.0, sum_weighted_loss=100.0 + k, n_examples=250)
            for k, r in enumerate(runs)}
    best = runs[0].run_id
    assert schedule.beaten(FIRST_CHECK, sums) == sorted(set(sums) - {best})
    assert schedule.beaten(FIRST_CHECK - 1, sums) == []  # not a check
    # a tie goes to the larger sigma, as the check's own choice does
    tied = {r.run_id: dict(s, sum_weighted_loss=100.0) for r, s in zip(runs, sums.values())}
    assert schedule.beaten(FIRST_CHECK, tied) == sorted(set(sums) - {best})
    decision = schedule.decide(FIRST_CHECK, sums)
    assert decision.leader == best and decision.drop == sorted(set(sums) - {best})
    # a duel's judgement reads both windows: nothing is beaten before it is made
    later = {r: sums.get(r, sums[best]) for r in schedule.runs}
    assert schedule.beaten(schedule.check_at, later) == []
