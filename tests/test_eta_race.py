"""eta="auto": the adaptive geometry's race of base rates (onlinepgs._eta_race).

Yardsticks: the same learners at each fixed eta trained alone on the same rows (the race's
kept family equals its eta alone, bit for bit; its choice is the one their progressive
losses over the window [2000, 4000] make, computed here from their own statistics), the
same rows in other chunkings and one event at a time, and a model file resumed before and
after the choice.
"""
import subprocess
import sys

import numpy as np
import pytest

from onlinepgs import PGSClassifier, PGSRegressor, load_model, save_model
from onlinepgs._eta_race import DECIDE_AT, ETAS, EtaSchedule, schedule_from_dict
from onlinepgs._race import INDIFFERENCE, SigmaSchedule

ADAPTIVE = dict(geometry="adaptive", iterate="last", radius=None, random_state=0)


def raw_rows(m=6000, seed=0, regression=False):
    """Columns in unrelated units, a label from their scaled sum (what a log delivers)."""
    rng = np.random.RandomState(seed)
    units = np.array([1.0, 1e3, 1e-3, 30.0, 1e5, 1.0, 7.0, 0.2])
    Z = rng.randn(m, units.size) * (rng.rand(m, units.size) < 0.7)
    score = Z @ np.array([1.0, -1.5, 2.0, 0.5, 1.0, 0.0, -0.7, 0.3]) + 0.6 * rng.randn(m)
    return Z * units, (score if regression else np.where(score > 0, 1, -1))


def _fit_in_chunks(est, X, y, chunks, **kw):
    stops = [0, *chunks, X.shape[0]]
    for a, b in zip(stops, stops[1:]):
        est.partial_fit(X[a:b], y[a:b], **kw)
    return est


def _window_loss(est_at, lo, hi):
    """Mean progressive loss over rows [lo, hi) from a learner's statistics at lo, hi."""
    (w0, l0), (w1, l1) = est_at[lo], est_at[hi]
    return (l1 * w1 - l0 * w0) / (w1 - w0)


@pytest.mark.parametrize("estimator", [PGSClassifier, PGSRegressor])
def test_the_choice_is_the_best_window_of_the_rates_trained_alone(estimator):
    """At a fixed sigma each family is one run: the race keeps the eta whose learner,
    trained alone on the same rows, has the least mean progressive loss over rows
    [2000, 4000] (read from its own online_stats_), and ends with that learner's model,
    bit for bit."""
    regression = estimator is PGSRegressor
    X, y = raw_rows(regression=regression)
    kw = {} if regression else dict(classes=[-1, 1])
    chunks = [DECIDE_AT // 2, DECIDE_AT]
    alone, windows = {}, {}
    for eta in ETAS:
        est = estimator(sigma=1e-4, eta=eta, **ADAPTIVE)
        seen = {}
        for a, b in zip([0, *chunks], [*chunks, X.shape[0]]):
            est.partial_fit(X[a:b], y[a:b], **kw)
            st = est.online_stats_
            seen[b] = (st["sum_weight"], st["progressive_loss"])
        alone[eta] = est
        windows[eta] = _window_loss(seen, DECIDE_AT // 2, DECIDE_AT)
    best = min(windows, key=lambda e: (windows[e], e != 0.5))
    raced = estimator(sigma=1e-4, eta="auto", **ADAPTIVE).partial_fit(X, y, **kw)
    assert raced.eta_ == best
    assert len(set(windows.values())) == len(ETAS)  # a real choice, not a tie
    np.testing.assert_array_equal(raced.coef_, alone[best].coef_)
    np.testing.assert_array_equal(raced.intercept_, alone[best].intercept_)
    choice = [r for r in raced.sigma_path_ if r["event"] == "eta"]
    assert [c["eta_chosen"] for c in choice] == [best]
    got = {f["eta"]: f["window_loss"] for f in choice[0]["families"]}
    assert got == pytest.approx(windows, rel=1e-9)


def test_with_sigma_raced_the_kept_family_is_its_rate_alone():
    """sigma="auto" too: each family is a sigma race; the kept one equals that eta's
    learner with its own sigma race, alone, bit for bit (sigma_ too)."""
    X, y = raw_rows(m=7000, seed=3)
    raced = PGSClassifier(eta="auto", **ADAPTIVE).partial_fit(X, y, classes=[-1, 1])
    alone = PGSClassifier(eta=raced.eta_, **ADAPTIVE).partial_fit(X, y, classes=[-1, 1])
    assert raced.sigma_ == alone.sigma_
    np.testing.assert_array_equal(raced.coef_, alone.coef_)
    np.testing.assert_array_equal(raced.decision_function(X[:50]),
                                  alone.decision_function(X[:50]))
    # every family's sigma checks are in the record, each with its eta
    etas = {r.get("eta") for r in raced.sigma_path_ if r["event"] == "check"}
    assert etas == set(ETAS)


@pytest.mark.parametrize("chunks", [[1], [250, 1999, 2000, 2001, 3999, 4001], [3000, 5000],
                                    list(range(137, 7000, 613))])
def test_the_race_does_not_depend_on_the_chunking(chunks):
    X, y = raw_rows(m=7000, seed=1)
    one = PGSClassifier(eta="auto", **ADAPTIVE).partial_fit(X, y, classes=[-1, 1])
    many = _fit_in_chunks(PGSClassifier(eta="auto", **ADAPTIVE), X, y, chunks,
                          classes=[-1, 1])
    assert many.eta_ == one.eta_ and many.sigma_ == one.sigma_
    np.testing.assert_array_equal(many.coef_, one.coef_)
    assert many.sigma_path_ == one.sigma_path_


def test_one_event_at_a_time_is_the_same_race():
    """learn_one over 4,500 events (through the choice) ends with partial_fit's model."""
    X, y = raw_rows(m=4500, seed=2)
    batch = PGSClassifier(eta="auto", **ADAPTIVE).partial_fit(X, y, classes=[-1, 1])
    events = PGSClassifier(eta="auto", classes=[-1, 1], **ADAPTIVE)
    for row, label in zip(X, y):
        events.learn_one({j: v for j, v in enumerate(row) if v != 0.0}, label)
    assert events.eta_ == batch.eta_
    np.testing.assert_array_equal(events.coef_, batch.coef_)


@pytest.mark.parametrize("stop", [3000, 5000])
def test_a_saved_race_resumes_exactly(tmp_path, stop):
    """Saved before the choice (three families live) or after (one), loaded and
    continued: the model of an uninterrupted run, bit for bit."""
    X, y = raw_rows(m=7000, seed=4)
    whole = PGSClassifier(eta="auto", **ADAPTIVE).partial_fit(X, y, classes=[-1, 1])
    part = PGSClassifier(eta="auto", **ADAPTIVE).partial_fit(X[:stop], y[:stop],
                                                             classes=[-1, 1])
    live = len(part._race.states)
    assert (live > len(ETAS)) if stop < DECIDE_AT else (live <= 2)
    save_model(part, tmp_path / "m.pgs")
    resumed = load_model(tmp_path / "m.pgs").partial_fit(X[stop:], y[stop:])
    assert resumed.eta_ == whole.eta_
    np.testing.assert_array_equal(resumed.coef_, whole.coef_)
    assert resumed.sigma_path_ == whole.sigma_path_


def test_fit_on_fewer_rows_than_the_choice_keeps_the_leading_family():
    """fit's first pass ends before row 4,000: the race settles on the family of the run
    it reports (the least progressive loss), which goes on for the later epochs."""
    X, y = raw_rows(m=1500, seed=5)
    est = PGSClassifier(eta="auto", max_epochs=2, **ADAPTIVE).fit(X, y)
    settle = [r for r in est.sigma_path_ if r["event"] == "eta"]
    assert len(settle) == 1 and settle[0]["reason"] == "fit"
    assert est.eta_ == settle[0]["eta_chosen"] in ETAS
    assert est._race.schedule.settled and len(est._race.states) == 1


def test_the_schedule_round_trips_and_decides_the_same():
    s = EtaSchedule("logistic")
    runs = s.start()
    assert len(runs) == len(ETAS) * 4 and len({r.run_id for r in runs}) == len(runs)
    assert {r.eta for r in runs} == set(ETAS)
    copy = schedule_from_dict(s.to_dict())
    assert isinstance(copy, EtaSchedule) and copy.to_dict() == s.to_dict()
    plain = SigmaSchedule("logistic")
    plain.start()
    assert isinstance(schedule_from_dict(plain.to_dict()), SigmaSchedule)


def test_a_family_whose_runs_all_diverge_leaves_the_race():
    s = EtaSchedule("logistic", grid=[1e-3], start=[1e-3])
    runs = {r.eta: r.run_id for r in s.start()}
    s.discard(runs[2.0], 10)
    assert set(s.families) == {0.1, 0.5} and s.eta is None
    s.discard(runs[0.1], 20)
    assert s.eta == 0.5 and s.kept is s.families[0.5]
    assert [r["event"] for r in s.path if r["event"] == "eta_dropped"] == ["eta_dropped"] * 2


def test_bad_rates_are_refused_by_name():
    X, y = raw_rows(m=50)
    with pytest.raises(ValueError, match="'eta' parameter"):
        PGSClassifier(eta="fast", **ADAPTIVE).fit(X, y)
    with pytest.raises(ValueError, match="batch_size >= 1"):
        EtaSchedule("logistic", batch_size=0)


def test_the_command_races_eta_and_says_so(tmp_path):
    X, y = raw_rows(m=4500, seed=6)
    data = tmp_path / "d.csv"
    data.write_text("y," + ",".join(f"c{j}" for j in range(X.shape[1])) + "\n" + "".join(
        f"{label}," + ",".join(f"{v:.6g}" for v in row) + "\n" for row, label in zip(X, y)))
    cols = ",".join(f"c{j}" for j in range(X.shape[1]))
    run = subprocess.run([sys.executable, "-m", "onlinepgs.cli", "train", str(data),
                          "--label", "y", "--numeric", cols, "--geometry", "adaptive",
                          "-o", str(tmp_path / "m.pgs")], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    model = load_model(tmp_path / "m.pgs")
    assert f"eta = {model.eta_:g} (auto: 0.1, 0.5 and 2 raced; chosen at row 4,000)" \
        in run.stderr
    bad = subprocess.run([sys.executable, "-m", "onlinepgs.cli", "train", str(data),
                          "--label", "y", "--geometry", "adaptive", "--eta", "fast"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "--eta" in bad.stderr and "Traceback" not in bad.stderr


def test_steps_of_several_rows_race_as_one_row_steps_do(tmp_path):
    """batch_size=8: the kept family equals its rate alone (its own sigma race), bit for
    bit; chunks whose sizes are multiples of 8 give the same model; a file saved before
    the choice resumes to it exactly."""
    X, y = raw_rows(m=7000, seed=3)
    kw = dict(batch_size=8, **ADAPTIVE)
    raced = PGSClassifier(eta="auto", **kw).partial_fit(X, y, classes=[-1, 1])
    alone = PGSClassifier(eta=raced.eta_, **kw).partial_fit(X, y, classes=[-1, 1])
    assert raced.sigma_ == alone.sigma_
    np.testing.assert_array_equal(raced.coef_, alone.coef_)
    many = _fit_in_chunks(PGSClassifier(eta="auto", **kw), X, y, [800, 2400, 4000, 4808],
                          classes=[-1, 1])
    np.testing.assert_array_equal(many.coef_, raced.coef_)
    half = PGSClassifier(eta="auto", **kw).partial_fit(X[:3000], y[:3000], classes=[-1, 1])
    save_model(half, tmp_path / "m.pgs")
    back = load_model(tmp_path / "m.pgs").partial_fit(X[3000:], y[3000:])
    np.testing.assert_array_equal(back.coef_, raced.coef_)
    assert back.eta_ == raced.eta_


def test_a_call_that_ends_inside_a_mini_batch_moves_the_choice_to_a_whole_one():
    """Calls of 3, then 4,998 rows (batch_size 8): the choice moves from row 4,000 to
    4,003 (a whole batch of the second call) and the window's start from 2,000 to 2,003,
    so that no step is split; the kept family is its rate alone in the same calls."""
    X, y = raw_rows(m=5001, seed=4)
    kw = dict(batch_size=8, **ADAPTIVE)
    raced = _fit_in_chunks(PGSClassifier(eta="auto", **kw), X, y, [3], classes=[-1, 1])
    choice = [r for r in raced.sigma_path_ if r["event"] == "eta"]
    assert [(c["rows"], c["window"]) for c in choice] == [(4003, [2003, 4003])]
    alone = _fit_in_chunks(PGSClassifier(eta=raced.eta_, **kw), X, y, [3], classes=[-1, 1])
    np.testing.assert_array_equal(raced.coef_, alone.coef_)


def test_the_start_runs_beaten_at_the_first_check_are_let_go_alike(monkeypatch):
    """Each family's start runs beaten at the first check are let go once trained
    (`EtaSchedule.beaten`): the race's path and model equal, bit for bit, those of the
    race that keeps every start run to the check."""
    X, y = raw_rows(m=1500)
    lean = PGSClassifier(**ADAPTIVE).fit(X, y)
    schedule = EtaSchedule("logistic")
    runs = schedule.start()
    sums = {r.run_id: dict(sum_weight=250.0, sum_weighted_loss=float(r.run_id % 7),
                           n_examples=250) for r in runs}
    beaten = schedule.beaten(250, sums)
    assert len(beaten) == len(runs) - len(ETAS)  # all but one start run a family
    assert schedule.beaten(250, {r: sums[r] for r in list(sums)[:1]}) == []
    monkeypatch.setattr(EtaSchedule, "beaten", lambda self, n_rows, sums: [])
    whole = PGSClassifier(**ADAPTIVE).fit(X, y)
    assert lean.sigma_path_ == whole.sigma_path_ and lean.eta_ == whole.eta_
    np.testing.assert_array_equal(lean.coef_, whole.coef_)
    np.testing.assert_array_equal(lean.intercept_, whole.intercept_)


def test_the_race_settles_after_two_duels_between_sigmas_that_no_longer_matter():
    """From row DECIDE_AT on, a duel whose runs' window losses differ by less than
    INDIFFERENCE (relative) is a tie, and the second in a row settles the race at the
    larger sigma: no check after it, the model that of the kept rate's sigma race
    alone (the same rule), bit for bit."""
    X, y = raw_rows(m=20000, seed=0)
    raced = PGSClassifier(eta="auto", **ADAPTIVE).partial_fit(X, y, classes=[-1, 1])
    ties = [r for r in raced.sigma_path_ if r.get("indifferent")]
    assert [r["settled"] for r in ties] == [False, True]
    assert all(r["rows"] > DECIDE_AT and not r["forked"] for r in ties)
    for r in ties:
        a, b = (run["window_loss"] for run in r["runs"])
        assert abs(a - b) < INDIFFERENCE * max(a, b)
        assert r["leader_sigma"] == max(run["sigma"] for run in r["runs"])
    assert raced.sigma_path_[-1] is ties[-1] and raced.sigma_ == ties[-1]["leader_sigma"]
    alone = PGSClassifier(eta=raced.eta_, **ADAPTIVE).partial_fit(X, y, classes=[-1, 1])
    assert alone.sigma_ == raced.sigma_
    np.testing.assert_array_equal(raced.coef_, alone.coef_)
    np.testing.assert_array_equal(raced.intercept_, alone.intercept_)
