"""The progressive loss of the REPORTED iterate (issue 34, item 1), against a NumPy replay.

The yardstick: train a state one step at a time and, before each step, read the reported
model with `PGSState.weights()` and score the step's rows with it in plain NumPy (the
losses' closed forms below); the core's sums, taken in its pass at O(nnz) from the lazy
averages, must equal the replay's. A second state trained in one call must hold the same
sums (the pass is chunking-invariant), and the last iterate's sums stay what they were.
"""
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from onlinepgs import PGSClassifier, PGSRegressor
from onlinepgs._core import PGSState
from onlinepgs.distributed.rounds import merge_round, run_lane

DATASETS = Path(__file__).resolve().parent.parent / "onlinepgs" / "datasets"


def closed_loss(loss, z, y):
    """The losses' textbook forms (not the core's code)."""
    if loss == "logistic":
        return np.logaddexp(0.0, -y * z)
    if loss == "hinge":
        return np.maximum(0.0, 1.0 - y * z)
    assert loss == "squared"
    return (z - y) ** 2


def make_problem(kind, dense, m=41, n=9, seed=0):
    """(X, y for the core, loss, classifier, multiclass, K) of one kind of problem."""
    rng = np.random.RandomState(seed)
    X = sp.random(m, n, density=0.4, random_state=rng, format="csr")
    X.data = rng.randn(X.nnz)
    score = X @ rng.randn(n)
    if kind == "binary":
        y, loss, K = np.where(score + 0.5 * rng.randn(m) > 0, 1.0, -1.0), "logistic", 1
    elif kind == "multiclass":
        y, loss, K = rng.randint(0, 3, m).astype(float), "hinge", 3
    else:
        y, loss, K = score + 0.3 * rng.randn(m), "squared", 1
    return (X.toarray() if dense else X), y, loss, kind != "regression", kind == "multiclass", K


def run(st, X, y, sw, order, classifier):
    if sp.issparse(X):
        st.run(X.data, X.indices, X.indptr, X.shape[1], y, sw, order, classifier)
    else:
        st.run(np.ascontiguousarray(X).ravel(), None, None, X.shape[1], y, sw, order,
               classifier)


def replay(cfg, X, y, sw, classifier, multiclass, loss):
    """Train step by step, scoring each step's rows with the reported model in NumPy first.

    Returns the state and the replay's (sum of w_i loss, mistakes) of the reported model."""
    st = PGSState(**cfg, n_features=X.shape[1], seed=3)
    k, m = cfg["batch_size"], X.shape[0]
    Xd = X.toarray() if sp.issparse(X) else X
    total, mistakes = 0.0, 0
    for start in range(0, m, k):
        rows = np.arange(start, min(m, start + k), dtype=np.int64)
        W = st.weights()  # the reported iterate before the step, (dim, K)
        Z = Xd[rows] @ W[1:]
        if cfg["fit_intercept"]:
            Z = Z + cfg["intercept_scaling"] * W[0]
        if multiclass:
            signs = np.where(y[rows, None] == np.arange(Z.shape[1])[None, :], 1.0, -1.0)
            total += float(sw[rows] @ closed_loss(loss, Z, signs).sum(axis=1))
            mistakes += int((np.argmax(Z, axis=1) != y[rows]).sum())
        else:
            total += float(sw[rows] @ closed_loss(loss, Z[:, 0], y[rows]))
            if classifier:
                mistakes += int(((Z[:, 0] > 0) != (y[rows] > 0)).sum())
        run(st, X, y, sw, rows, classifier)
    return st, total, mistakes


@pytest.mark.parametrize("kind", ["binary", "multiclass", "regression"])
@pytest.mark.parametrize("p", [2.0, 1.5])
@pytest.mark.parametrize("iterate", ["average", "weighted", "weighted2", "random", "last"])
@pytest.mark.parametrize("batch_size", [1, 4])
@pytest.mark.parametrize("dense", [False, True])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_reported_sums_match_numpy_replay(kind, p, iterate, batch_size, dense, fit_intercept):
    X, y, loss, classifier, multiclass, K = make_problem(kind, dense, seed=batch_size)
    sw = np.random.RandomState(5).uniform(0.5, 2.0, X.shape[0])
    cfg = dict(p=p, sigma=0.3 if kind == "regression" else 0.05, loss=loss,
               batch_size=batch_size, iterate=iterate, n_problems=K, multiclass=multiclass,
               fit_intercept=fit_intercept, intercept_scaling=1.7)
    stepwise, total, mistakes = replay(cfg, X, y, sw, classifier, multiclass, loss)
    sums = stepwise.progressive_sums()
    assert sums["sum_weighted_loss"] == pytest.approx(total, rel=1e-12)
    assert sums["n_mistakes"] == mistakes
    # one call over every row: the same sums (the pass does not depend on the calls)
    whole = PGSState(**cfg, n_features=X.shape[1], seed=3)
    run(whole, X, y, sw, np.arange(X.shape[0], dtype=np.int64), classifier)
    assert whole.progressive_sums() == sums
    np.testing.assert_array_equal(whole.weights(), stepwise.weights())
    if iterate == "last":  # the reported iterate is the last one
        assert sums["sum_weighted_loss"] == sums["sum_weighted_loss_last"]
        assert sums["n_mistakes"] == sums["n_mistakes_last"]


def test_last_iterate_sums_unchanged_and_named():
    """The last iterate's sums are the former ones (a NumPy replay with weights("last")),
    and stats_dict names both."""
    X, y, loss, classifier, multiclass, K = make_problem("binary", False, m=60)
    sw = np.ones(X.shape[0])
    st = PGSState(sigma=0.05, iterate="weighted2", n_features=X.shape[1])
    total, mistakes = 0.0, 0
    for i in range(X.shape[0]):
        W = st.weights("last")
        z = float(X[i].toarray()[0] @ W[1:, 0]) + W[0, 0]
        total += float(closed_loss("logistic", z, y[i]))
        mistakes += int((z > 0) != (y[i] > 0))
        run(st, X, y, sw, np.array([i], dtype=np.int64), True)
    stats = st.stats_dict()
    assert stats["progressive_loss_last"] == pytest.approx(total / 60, rel=1e-12)
    assert stats["progressive_mistakes_last"] == mistakes
    sums = st.progressive_sums()
    assert stats["progressive_loss"] == sums["sum_weighted_loss"] / 60
    assert stats["progressive_mistakes"] == sums["n_mistakes"]
    assert sums["sum_weighted_loss"] != sums["sum_weighted_loss_last"]


def test_state_round_trip_v4_and_v3_unknown():
    X, y, loss, classifier, multiclass, K = make_problem("multiclass", False)
    st = PGSState(sigma=0.05, loss="hinge", iterate="weighted2", n_problems=3,
                  multiclass=True, n_features=X.shape[1])
    run(st, X, y, np.ones(X.shape[0]), np.arange(20, dtype=np.int64), True)
    d = st.to_dict()
    assert d["version"] == 4
    back = PGSState.from_dict(d)
    assert back.progressive_sums() == st.progressive_sums()
    # continuing the copy and the original over the same rows: the same sums
    rest = np.arange(20, X.shape[0], dtype=np.int64)
    run(st, X, y, np.ones(X.shape[0]), rest, True)
    run(back, X, y, np.ones(X.shape[0]), rest, True)
    assert back.progressive_sums() == st.progressive_sums()
    # a version-3 state (no reported sums): unknown, NaN, from then on
    old = {key: value for key, value in d.items()
           if key not in ("sum_weighted_loss_reported", "n_mistakes_reported")}
    old["version"] = 3
    v3 = PGSState.from_dict(old)
    sums = v3.progressive_sums()
    assert math.isnan(sums["sum_weighted_loss"]) and math.isnan(sums["n_mistakes"])
    assert sums["sum_weighted_loss_last"] == d["sum_weighted_loss"]
    run(v3, X, y, np.ones(X.shape[0]), rest, True)
    stats = v3.stats_dict()
    assert math.isnan(stats["progressive_loss"]) and math.isnan(stats["progressive_mistakes"])
    assert stats["progressive_loss_last"] == st.stats_dict()["progressive_loss_last"]


def test_frozen_v3_model_file_shows_nan(tmp_path):
    from onlinepgs.model_io import load_model

    est = load_model(Path(__file__).parent / "model_files" / "pgs_classifier_v1.pgs")
    stats = est.online_stats_
    assert math.isnan(stats["progressive_loss"])
    assert math.isnan(stats["progressive_error_rate"])
    assert np.isfinite(stats["progressive_loss_last"])
    assert 0.0 <= stats["progressive_error_rate_last"] <= 1.0


def test_online_stats_of_the_learners():
    rng = np.random.RandomState(0)
    X = rng.randn(300, 5)
    y = (X @ rng.randn(5) + 0.3 * rng.randn(300) > 0).astype(int)
    clf = PGSClassifier(sigma=1e-3, shuffle=False, max_epochs=1).fit(X, y)
    stats = clf.online_stats_
    sums = clf._state.progressive_sums()
    assert stats["progressive_error_rate"] == sums["n_mistakes"] / 300
    assert stats["progressive_error_rate_last"] == sums["n_mistakes_last"] / 300
    assert stats["progressive_loss"] == sums["sum_weighted_loss"] / 300
    # the averaged model is the better one on a sigma this small (larger steps)
    assert stats["progressive_loss"] < stats["progressive_loss_last"]
    reg = PGSRegressor(sigma=0.1, max_epochs=1).fit(X, X @ np.arange(5.0))
    rstats = reg.online_stats_
    assert "progressive_error_rate" not in rstats and "progressive_mistakes_last" not in rstats
    assert rstats["progressive_loss"] != rstats["progressive_loss_last"]


def test_fit_epochs_continue_the_sums():
    """fit's later epochs add to the same sums (every row of every epoch scored)."""
    rng = np.random.RandomState(1)
    X = rng.randn(50, 4)
    y = (X[:, 0] > 0).astype(int)
    clf = PGSClassifier(sigma=1e-2, max_epochs=3, tol=None, random_state=0).fit(X, y)
    assert clf.online_stats_["n_examples"] == 150
    assert np.isfinite(clf.online_stats_["progressive_loss"])


@pytest.mark.parametrize("iterate", ["weighted2", "average", "random"])
@pytest.mark.parametrize("p", [2.0, 1.5])
def test_one_lane_scores_as_one_process(iterate, p):
    """A Dask lane scores its rows with its round start's reported iterate combined with its
    own: with one lane per round, exactly the single process's sums."""
    X, y, loss, classifier, multiclass, K = make_problem("binary", False, m=60)
    sw = np.ones(X.shape[0])
    cfg = dict(p=p, sigma=0.05, iterate=iterate, n_features=X.shape[1], seed=3)
    single = PGSState(**cfg)
    run(single, X, y, sw, np.arange(60, dtype=np.int64), True)
    glob = PGSState(**cfg)
    for start in range(0, 60, 15):
        order = np.arange(start, start + 15, dtype=np.int64)
        result = run_lane(glob, [(X, y, sw, order, None)], True, n_lanes=1)
        merge_round(glob, [result])
    want, got = single.progressive_sums(), glob.progressive_sums()
    if iterate == "random":  # the reservoir is drawn per round: another random iterate
        assert np.isfinite(got["sum_weighted_loss"])
    else:
        assert got["sum_weighted_loss"] == pytest.approx(want["sum_weighted_loss"], rel=1e-12)
        assert got["n_mistakes"] == want["n_mistakes"]
    assert got["sum_weighted_loss_last"] == pytest.approx(want["sum_weighted_loss_last"],
                                                          rel=1e-12)


def test_two_lanes_score_with_the_round_start_and_their_own_iterates():
    """With several lanes, each row is scored by (W_0 w_0 + S_lane) / (W_0 + V_lane): the
    round start's average w_0 of weight W_0 and the lane's own iterates before the row, of
    sum S_lane and weight V_lane (t^2 at the lane's step counts t_0 + 2 i), in NumPy."""
    X, y, loss, classifier, multiclass, K = make_problem("binary", False, m=60)
    sw = np.ones(X.shape[0])
    cfg = dict(sigma=0.05, iterate="weighted2", n_features=X.shape[1])
    glob = PGSState(**cfg)
    run(glob, X, y, sw, np.arange(20, dtype=np.int64), True)  # a start with some history
    t0 = glob.t
    W0 = t0 * (t0 + 1) * (2 * t0 + 1) / 6
    w0 = glob.weights()
    lane = glob.fork()
    lane.t_step = 2
    total = 0.0
    Xd = X.toarray()
    for i in range(20, 30):
        steps = (lane.t - t0) // 2
        V = sum((t0 + 2 * s) ** 2 for s in range(1, steps + 1))
        own = np.asarray(lane.lam_a) * np.asarray(lane.cum_a) - np.asarray(lane.acc_a)
        w = (W0 * w0 + own) / (W0 + V)
        z = Xd[i] @ w[1:, 0] + w[0, 0]
        total += float(closed_loss("logistic", z, y[i]))
        run(lane, X, y, sw, np.array([i], dtype=np.int64), True)
    assert lane.progressive_sums()["sum_weighted_loss"] == pytest.approx(total, rel=1e-12)


def a9a_table_and_model(tmp_path, extra=()):
    data = DATASETS / "a9a_train.svm.gz"
    if not data.exists():
        pytest.skip("no shipped a9a")
    model = tmp_path / "m.pgs"
    out = subprocess.run([sys.executable, "-m", "onlinepgs.cli", "train", str(data), "-o",
                          str(model), *extra], capture_output=True, text=True, check=True)
    return out.stderr, model


def test_table_shows_the_reported_models_progressive_loss(tmp_path):
    """The table's last row is the saved model's progressive loss, labelled, with the
    reported model's prediction. On the shipped a9a with the default sigma="auto" it ends
    at 0.336 (the issue's goal: within 0.02 of VW's 0.332); at sigma = 1e-4 it is well below
    the last iterate's 1.85 that the table used to end at (1.26, the first iterates being
    poor for every model); 0.40 at sigma = 1e-3."""
    from onlinepgs.model_io import load_model

    def table(extra=()):
        stderr, model = a9a_table_and_model(tmp_path, extra)
        lines = stderr.splitlines()
        note = next(i for i, line in enumerate(lines) if "the model saved" in line)
        assert "t^2-weighted average" in lines[note] and lines[note + 1].startswith("average")
        rows = [line for line in lines[note + 3:] if line and line[0].isdigit()]
        stats = load_model(model).online_stats_
        final = float(next(line for line in lines
                           if line.startswith("average loss")).split("=")[1])
        assert final == pytest.approx(stats["progressive_loss"], abs=1e-6)
        assert (f"last iterate: average loss = {stats['progressive_loss_last']:.6f}"
                in stderr)
        # the table's rows: the running mean of the same sums, at doubling counts
        assert [int(r.split()[2]) for r in rows] == [2 ** i for i in range(len(rows))]
        return final, stats

    final, _ = table()  # the default: sigma="auto"
    assert final < 0.35
    _, stats = table(["--sigma", "1e-4"])
    assert stats["progressive_loss_last"] > 1.8  # what the table used to end at
    assert stats["progressive_loss"] < 0.7 * stats["progressive_loss_last"]
    final, _ = table(["--sigma", "1e-3"])
    assert final < 0.45


def test_table_prediction_is_the_reported_models(tmp_path):
    """The table's predict column: the reported (averaged) model's score of the row before
    it trains, in NumPy from the saved weights of a run that stops right there."""
    from onlinepgs.model_io import load_model

    rng = np.random.RandomState(2)
    X = rng.randn(8, 3)
    y = np.where(X[:, 0] > 0, 1, -1)
    text = "".join(f"{y[i]} " + " ".join(f"{j + 1}:{X[i, j]:.6f}" for j in range(3)) + "\n"
                   for i in range(8))
    (tmp_path / "all.svm").write_text(text)
    (tmp_path / "first7.svm").write_text("".join(text.splitlines(True)[:7]))
    out = subprocess.run([sys.executable, "-m", "onlinepgs.cli", "train",
                          str(tmp_path / "all.svm"), "--sigma", "0.01"],
                         capture_output=True, text=True, check=True).stderr
    row8 = next(line.split() for line in out.splitlines() if line.split()[2:3] == ["8"])
    subprocess.run([sys.executable, "-m", "onlinepgs.cli", "train", str(tmp_path / "first7.svm"),
                    "--sigma", "0.01", "-o", str(tmp_path / "m7.pgs"), "--quiet"], check=True)
    est = load_model(tmp_path / "m7.pgs")
    x8 = np.array([float(f"{v:.6f}") for v in X[7]])
    score = float(x8 @ est.coef_.ravel() + est.intercept_[0])
    assert float(row8[5]) == pytest.approx(score, abs=1e-4)
