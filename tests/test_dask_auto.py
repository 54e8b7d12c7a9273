"""sigma="auto" on Dask: the driver trains every live run of the race each round and
asks the race's schedule between rounds (onlinepgs/distributed/runs.py).

Yardsticks: the local race (`PGSClassifier(sigma="auto")`, one process), which one lane
must reproduce; the fixed-sigma Dask training of each sigma, which every run of the race
from row 0 must reproduce bit for bit (a plain loop of fixed-sigma runs); the states the
lanes and the driver hold, which must be the live runs' only."""
import gc
import io

import numpy as np
import pytest
import scipy.sparse as sp

dask = pytest.importorskip("dask", reason="onlinepgs.dask needs Dask (pip install "
                           "'onlinepgs[dask]')")
db = pytest.importorskip("dask.bag")

import onlinepgs.dask as opd  # noqa: E402
from onlinepgs import (PGSClassifier, PGSDivergedError, PGSRegressor,  # noqa: E402
                       load_model, load_svmlight, save_model)
from onlinepgs._core import PGSState  # noqa: E402
from onlinepgs import _race  # noqa: E402
from onlinepgs._race import FIRST_CHECK, SigmaSchedule, progressive_sums  # noqa: E402
from onlinepgs.distributed.runs import Race  # noqa: E402

from dask_helpers import (assert_close, cluster, dask_rows, make_data,  # noqa: E402,F401
                          run_cli, svm_lines)

# rows enough for several of the schedule's decisions (its first is at FIRST_CHECK rows); the
# tests read what the race did from its records, not from the schedule's tuning
ROWS = 3000
START = [run.sigma for run in SigmaSchedule("logistic").start()]


def _runs_seen(est):
    """Every run the race's records name, by run id (sigma, started_at, parent)."""
    seen = {r["run_id"]: r for record in est.sigma_path_ for r in record.get("runs", ())}
    for run in est._race.schedule.runs.values():
        seen[run.run_id] = dict(run_id=run.run_id, sigma=run.sigma,
                                started_at=run.started_at, parent=run.parent)
    return seen


def _gone(est, rows):
    """The runs the race had dropped at a decision before `rows` rows: a record lists
    the runs live before its decision, so those of no later record nor of the end."""
    later = {r["run_id"] for record in est.sigma_path_ if record["rows"] >= rows
             for r in record.get("runs", ())} | set(est._race.states)
    return set(_runs_seen(est)) - later


def _local(est, X, y, chunks, **kw):
    """The local race over the rows in `chunks` (one partial_fit call each)."""
    cuts = np.concatenate([[0], np.cumsum(chunks)])
    for a, b in zip(cuts, cuts[1:]):
        est.partial_fit(X[a:b], y[a:b], **kw)
    return est


def _path(est):
    """The race's record without its floats (compared exactly elsewhere)."""
    return [(r["rows"], r["event"], r.get("leader"),
             [(run["run_id"], run["sigma"]) for run in r.get("runs", [])])
            for r in est.sigma_path_]


@pytest.mark.parametrize("kind", ["binary", "multiclass", "regression", "p1.5-batch4"])
def test_one_lane_races_as_the_local_race(kind):
    """One lane, slices that end nowhere near the decisions (the driver cuts a round
    there): the race's decisions, sigma_ and model are the local race's; fit settles
    after its first pass as the local fit does."""
    X, y = make_data(m=ROWS, n=30, seed=3, classes=3 if kind == "multiclass" else 2)
    kw = dict(p=1.5, batch_size=4, iterate="average") if kind == "p1.5-batch4" else {}
    if kind == "regression":
        y = X @ np.linspace(-1, 1, 30) + 0.1 * np.random.RandomState(0).randn(ROWS)
        make = lambda: PGSRegressor(sigma="auto", random_state=0)  # noqa: E731
    else:
        make = lambda: PGSClassifier(sigma="auto", random_state=0, **kw)  # noqa: E731
    dX = dask_rows(X, [701] * 4 + [196])  # mini-batches across partitions
    got = opd.fit(make(), dX, y, n_lanes=1, slice_rows=302)
    want = make().set_params(max_epochs=1, shuffle=False).fit(X, y)
    assert _path(got) == _path(want)
    assert got.sigma_path_[-1]["event"] == "settle"
    assert got.sigma_ == want.sigma_
    assert_close(got.coef_, want.coef_, rtol=1e-12)
    assert_close(got.intercept_, want.intercept_, rtol=1e-12)
    if kind == "binary":  # a second pass continues the winner alone, forked for 2 passes
        # (labels a quarter flipped: the noise-free rows' fork lands at sigma 1e-4, where
        # a saturated logistic model amplifies rounding so that one lane and one process
        # part by 3e-8 after a single fixed-sigma pass already, and 3% after two)
        flip = np.random.RandomState(1).rand(ROWS) < 0.25
        y = np.where(flip, -y if y.min() < 0 else 1 - y, y)
        got = opd.fit(make(), dX, y, n_lanes=1, slice_rows=302, passes=2)
        want = make().set_params(max_epochs=2, shuffle=False).fit(X, y)
        settle = want.sigma_path_[-1]
        assert settle["event"] == "settle" and settle["epochs"] == 2
        assert settle["sigma_for_epochs"] == want.sigma_ < settle["leader_sigma"]
        assert _path(got) == _path(want)
        assert got.sigma_ == want.sigma_ and got.t_ == want.t_ == 2 * ROWS
        assert got._race.n_rows == want._race.n_rows  # the race's rows: the first pass
        assert_close(got.coef_, want.coef_, rtol=1e-12)


def test_a_run_that_diverges_is_dropped_unless_every_run_does():
    """Squared loss on R^n (radius=None): the runs at the small sigmas diverge; the race
    drops them (recorded in sigma_path_, as the local race records them) and goes on
    with the others; if every run diverges, the fit fails and the estimator is left as
    it was."""
    X, y = make_data(m=ROWS, n=30, seed=3)
    X = X * 0.3
    y = X @ np.linspace(-1, 1, 30) + np.random.RandomState(0).randn(ROWS)
    make = lambda: PGSRegressor(sigma="auto", radius=None, random_state=0)  # noqa: E731
    want = make().set_params(max_epochs=1, shuffle=False).fit(X, y)
    dX = dask_rows(X, [700] * 4 + [200])
    got = opd.fit(make(), dX, y, n_lanes=1, slice_rows=300)
    drops = [(r["rows"], r["sigma"]) for r in got.sigma_path_ if r["event"] == "drop"]
    assert drops and {sigma for _, sigma in drops} <= set(START[1:])
    assert _path(got) == _path(want) and got.sigma_ == want.sigma_
    assert_close(got.coef_, want.coef_, rtol=1e-12)
    two = opd.fit(make(), dX, y, n_lanes=2, slice_rows=300)
    assert [(r["rows"], r["sigma"]) for r in two.sigma_path_ if r["event"] == "drop"] \
        == drops
    wild = dask_rows(X * 100, [1500] * 2)
    fresh = make()
    with pytest.raises(PGSDivergedError, match="diverged in round 1"):
        opd.partial_fit(fresh, wild, y, n_lanes=2)
    assert not hasattr(fresh, "coef_")
    before = two.coef_.copy()  # settled: one run left
    with pytest.raises(PGSDivergedError, match="diverged in round 1"):
        opd.partial_fit(two, wild, y, n_lanes=2)
    np.testing.assert_array_equal(two.coef_, before)


def test_partial_fit_keeps_racing_across_calls_as_the_local_race():
    """partial_fit goes on with the race (every live run) from call to call; a model
    file in between changes nothing."""
    X, y = make_data(m=ROWS, n=30, seed=4)
    cuts = [1300, 1700]
    got = PGSClassifier(sigma="auto", random_state=0)
    opd.partial_fit(got, dask_rows(X[:1300], [650, 650]), y[:1300], classes=[-1, 1],
                    n_lanes=1, slice_rows=256)
    assert got._race.schedule.next_check(1300) is not None  # racing on
    want = _local(PGSClassifier(sigma="auto", random_state=0), X, y, cuts,
                  classes=[-1, 1])
    opd.partial_fit(got, dask_rows(X[1300:], [850, 850]), y[1300:], n_lanes=1,
                    slice_rows=256)
    assert _path(got) == _path(want)
    assert got.sigma_ == want.sigma_ and got._race.n_rows == want._race.n_rows == ROWS
    for run, state in want._race.states.items():
        assert_close(got._race.states[run].weights(), state.weights(), rtol=1e-12)


def _fixed(sigma, dX, y, state=None, **kw):
    """Fixed-sigma Dask training over dX, from scratch or from `state` (a fork)."""
    est = PGSClassifier(sigma=sigma, random_state=0)
    if state is not None:
        est._install(state, 1, classes_=np.array([-1.0, 1.0]), n_features_in_=dX.shape[1])
    return opd.partial_fit(est, dX, y, classes=[-1, 1], **kw)


def test_before_the_first_decision_one_lane_trains_at_a_time():
    """Until the race's first decision the lanes train in turn, one a round: each start
    run is the one-lane fixed-sigma training over the lanes' rows one lane after the
    other (to rounding: the rounds' boundaries)."""
    X, y = make_data(m=ROWS, n=30, seed=5)
    p = (FIRST_CHECK - 1) // 6  # six partitions, fewer rows than the first decision's
    early, rounds = PGSClassifier(sigma="auto", random_state=0), []
    opd.partial_fit(early, dask_rows(X[:6 * p], [p] * 6), y[:6 * p], classes=[-1, 1],
                    n_lanes=2, slice_rows=p, callback=lambda i: rounds.append(i["rows"]))
    assert rounds == [p] * 6
    order = np.concatenate([np.arange(a * p, (a + 1) * p) for a in (0, 2, 4, 1, 3, 5)])
    assert [s.sigma for s in early._race.states.values()] == START
    for state in early._race.states.values():
        fixed = _fixed(state.sigma, dask_rows(X[order], [6 * p]), y[order], n_lanes=1)
        assert_close(state.weights(), fixed._state.weights(), rtol=1e-12)


def test_each_run_is_its_fixed_sigma_training_on_two_lanes(monkeypatch):
    """Two lanes whose rounds end on the decisions' rows (so the race's rounds are those
    of a fixed-sigma training; the lanes train together from the first row): each run of
    the race is bit for bit the plain loop's fixed-sigma Dask training of its sigma, from
    row 0 or, for a run the race forked, from its parent's state there (`with_sigma`)."""
    monkeypatch.setattr(Race, "sequential_start", False)

    class Schedule(SigmaSchedule):
        """The schedule with its first decision at row 1000 and no chase: the decisions
        (1000, 1250, 1500, 2000, ...) then fall on the rounds' ends (the test's numbers
        need it)."""

        def __init__(self, *args, first_check=1000, chase=False, **kw):
            super().__init__(*args, first_check=first_check, chase=chase, **kw)

    monkeypatch.setattr(_race, "SigmaSchedule", Schedule)
    X, y = make_data(m=ROWS, n=30, seed=5)
    kw = dict(n_lanes=2, slice_rows=125)  # rounds of 250 rows, partitions of 125

    def rows(a, b):
        return dask_rows(X[a:b], [125] * ((b - a) // 125)), y[a:b]

    early = PGSClassifier(sigma="auto", random_state=0)
    opd.partial_fit(early, *rows(0, 750), classes=[-1, 1], **kw)
    assert [s.sigma for s in early._race.states.values()] == START
    for state in early._race.states.values():
        fixed = _fixed(state.sigma, *rows(0, 750), **kw)
        np.testing.assert_array_equal(state.weights(), fixed._state.weights())
        assert progressive_sums(state) == progressive_sums(fixed._state)
    for n in (1750, ROWS):  # past the first decisions: runs from row 0, runs forked
        race, rounds = PGSClassifier(sigma="auto", random_state=0), []
        opd.partial_fit(race, *rows(0, n), classes=[-1, 1], **kw,
                        callback=lambda info: rounds.append(info["rows"]))
        assert set(rounds) == {250}, "a decision cut a round: the yardstick's differ"
        seen = _runs_seen(race)

        def trained(run_id, upto):
            """The plain loop: the run's sigma trained alone up to row `upto`."""
            run = seen[run_id]
            if run["parent"] is None:
                return _fixed(run["sigma"], *rows(0, upto), **kw)._state
            start = run["started_at"]
            parent = trained(run["parent"], start)
            return _fixed(run["sigma"], *rows(start, upto), **kw,
                          state=parent.with_sigma(run["sigma"]))._state

        forked = 0
        for run_id, state in race._race.states.items():
            forked += seen[run_id]["parent"] is not None
            np.testing.assert_array_equal(state.weights(), trained(run_id, n).weights())
        if n == ROWS:
            assert forked, "the test wants a forked run alive at the end"


def test_dropped_runs_free_their_states():
    """Between decisions the driver and the lanes that trained hold one state per live
    run each (the driver's global state, each lane's kept copy; before the first decision
    one lane trains): the dropped runs' are freed."""
    X, y = make_data(m=ROWS, n=30, seed=6)
    held = []

    def count(info):
        gc.collect()
        held.append((info["n_examples"],
                     sum(isinstance(o, PGSState) for o in gc.get_objects())))

    est = opd.fit(PGSClassifier(sigma="auto", random_state=0), dask_rows(X, [250] * 12),
                  y, classes=[-1, 1], n_lanes=2, slice_rows=250, callback=count)
    decisions = sorted({r["rows"] for r in est.sigma_path_})
    assert len(decisions) >= 3 and decisions[-1] == ROWS
    checked = 0
    for rows, n in held:
        if rows in decisions:
            continue  # a decision's round: its lanes held the runs it dropped
        # the runs live then: those the next decision's record lists
        nxt = min(r for r in decisions if r > rows)
        live = {r["run_id"] for record in est.sigma_path_ if record["rows"] == nxt
                for r in record.get("runs", ())}
        if rows < decisions[0]:  # one lane trains: it and the driver hold every run
            assert n == 2 * len(live), (rows, n, live)
        else:  # at most the driver's and each lane's (a lane done may miss a new run)
            assert len(live) * 2 <= n <= 3 * len(live), (rows, n, live)
        checked += 1
    assert checked >= 2


def test_text_sources_race_as_the_array(tmp_path):
    """A bag of svmlight lines and files give the race of the dask array of their rows
    (the same partitions, slices crossing blocks)."""
    X, y = make_data(m=ROWS, n=30, seed=7)
    lines = svm_lines(X, y)
    Xp, yp = load_svmlight(io.BytesIO("\n".join(lines).encode()), n_features=30)
    kw = dict(n_lanes=2, slice_rows=300, n_features=30)
    want = opd.fit(PGSClassifier(sigma="auto", random_state=0), dask_rows(Xp, [1000] * 3),
                   yp, classes=[-1, 1], n_lanes=2, slice_rows=300)
    assert len(want.sigma_path_) >= 3
    bag = db.from_sequence(lines, npartitions=3)
    files = []
    for i in range(3):
        files.append(tmp_path / f"part{i}.svm")
        files[-1].write_text("\n".join(lines[1000 * i:1000 * (i + 1)]) + "\n")
    for source, extra in ((bag, {}), ([str(f) for f in files],
                                      dict(blocksize=10**9, block_rows=170))):
        got = opd.fit(PGSClassifier(sigma="auto", random_state=0), source, **kw, **extra)
        assert _path(got) == _path(want)
        np.testing.assert_array_equal(got.coef_, want.coef_)


def test_race_quotas_end_a_round_on_the_decision():
    """The rows each lane trains in the round that reaches a decision: they add up to
    the rows left before it, evenly and in whole mini-batches where the lanes allow."""
    class Schedule:  # a stand-in: the next decision at 1000 rows, one taken before
        path = [dict(event="check")]

        def next_check(self, n_rows):
            return 1000

    race = Race(Schedule(), n_rows=400)
    assert race.quotas([300, 300], 1) is None  # the round ends at 1000 or before
    assert race.quotas([500, 500], 4) == [300, 300]
    assert race.quotas([500, 100, 500], 4) == [300, 100, 200]
    assert race.quotas([500, 500, 500], 8) == [200, 200, 200]
    race.n_rows = 403  # after a short mini-batch: one lane's slice ends mid-batch
    assert race.quotas([500, 500], 4) == [301, 296]
    Schedule.path = []  # before the first decision: one lane at a time
    race = Race(Schedule(), n_rows=400)
    assert race.quotas([300, 300], 1) == [300, 0]
    assert race.quotas([0, 700], 1) == [0, 600]


def _held_runs():
    """On a worker: the run ids each of this fit's copies of the runs holds, by lane (its
    global states, its lanes' kept states)."""
    from onlinepgs.distributed import replicas

    for _ in range(100):  # a round's task may change a dict while it is read
        try:
            return {key[2]: (sorted(r.state.states), sorted(r.slot))
                    for key, r in list(replicas._REPLICAS.items())}
        except RuntimeError:
            pass


@pytest.mark.slow
def test_a_cluster_races_as_threads_and_frees_dropped_runs(cluster):
    """On a LocalCluster (two worker processes, each lane's copy of the runs on its
    worker) the race is that of threads bit for bit: fit over two passes (settled
    after the first), partial_fit in two calls (the race going on, shuffled); the copies
    hold the live runs only."""
    X, y = make_data(m=ROWS, n=30, seed=8)
    dX = dask_rows(X, [300] * 10)
    args = dict(n_lanes=2, slice_rows=200, passes=2)
    a = opd.fit(PGSClassifier(sigma="auto", random_state=1), dX, y, **args)
    held = []

    def inspect(info):
        info["state"]  # waits for the round's merge on the first lane's copy
        held.append((info["n_examples"], cluster.run(_held_runs)))

    b = opd.fit(PGSClassifier(sigma="auto", random_state=1), dX, y, client=cluster,
                callback=inspect, **args)
    assert _path(b) == _path(a)
    np.testing.assert_array_equal(b.coef_, a.coef_)
    assert b.sigma_ == a.sigma_ and b.t_ == a.t_ == 2 * ROWS
    # once the round after a decision ran, no copy holds a run the decision dropped
    # (a report comes once the next round is on its way; reading its state waits for
    # the first lane's copy to merge the round, so the rounds before ran everywhere)
    seen = 0
    for rows, by_worker in held:
        gone = _gone(a, rows - 400)
        for copies in by_worker.values():
            for states, slots in copies.values():
                assert not gone & (set(states) | set(slots)), (rows, states, slots, gone)
                seen += bool(gone)
    assert seen >= 4 and any(len(states) == len(START) for _, w in held
                             for c in w.values() for states, _ in c.values())
    # partial_fit: the race goes on across calls; shuffled slices
    args = dict(n_lanes=2, slice_rows=128, shuffle=True, random_state=3)
    c, d = (PGSClassifier(sigma="auto", random_state=1) for _ in range(2))
    for est, client in ((c, None), (d, cluster)):
        opd.partial_fit(est, dask_rows(X[:1800], [600] * 3), y[:1800], classes=[-1, 1],
                        client=client, **args)
        opd.partial_fit(est, dask_rows(X[1800:], [600] * 2), y[1800:], client=client,
                        **args)
    assert _path(d) == _path(c) and d._race.states.keys() == c._race.states.keys()
    for run, state in c._race.states.items():
        np.testing.assert_array_equal(d._race.states[run].weights(), state.weights())


def test_a_saved_race_goes_on_where_it_stopped(tmp_path):
    """A model file keeps the live race (every run, the schedule): loaded, partial_fit
    on Dask continues it exactly as the uninterrupted estimator does."""
    X, y = make_data(m=ROWS, n=30, seed=9)
    kw = dict(n_lanes=2, slice_rows=200)
    first, rest = dask_rows(X[:1600], [400] * 4), dask_rows(X[1600:], [700] * 2)
    straight = opd.partial_fit(PGSClassifier(sigma="auto", random_state=0), first, y[:1600],
                               classes=[-1, 1], **kw)
    assert straight._race.schedule.next_check(1600) is not None  # racing on
    save_model(straight, tmp_path / "m.pgs")
    resumed = opd.partial_fit(load_model(tmp_path / "m.pgs"), rest, y[1600:], **kw)
    opd.partial_fit(straight, rest, y[1600:], **kw)
    assert _path(resumed) == _path(straight) and resumed.sigma_ == straight.sigma_
    assert resumed._race.states.keys() == straight._race.states.keys()
    for run, state in straight._race.states.items():
        np.testing.assert_array_equal(resumed._race.states[run].weights(), state.weights())


def test_cli_scheduler_races_sigma_as_the_local_command(tmp_path, capsys):
    """train --scheduler threads --sigma auto prints the choice, and with one lane its
    model is the local command's (the race decides on the same rows)."""
    X, y = make_data(m=ROWS, n=30, seed=10)
    path = tmp_path / "d.svm"
    path.write_text("\n".join(svm_lines(X, y)) + "\n")
    out, ref = tmp_path / "dask.pgs", tmp_path / "local.pgs"
    assert run_cli("train", path, "-o", out, "--scheduler", "threads", "--lanes", 1,
                   "--slice-rows", 333, "--sigma", "auto") == 0
    err = capsys.readouterr().err
    assert "rounds = " in err and "sigma = " in err and "(auto: " in err, err
    assert run_cli("train", path, "-o", ref, "--sigma", "auto", "--quiet") == 0
    got, want = load_model(out), load_model(ref)
    assert got.sigma_ == want.sigma_ and _path(got) == _path(want)
    assert_close(got.coef_, want.coef_, rtol=1e-12)
