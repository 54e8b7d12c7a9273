"""bench/bench_auto.py's own measurements against plain computations: the averaged model's
progressive loss (a replay through the solver state) against a loop of public calls, the
VW text it writes, and a regression record against scikit-learn's metrics."""
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import bench_auto  # noqa: E402
from onlinepgs import PGSClassifier  # noqa: E402


def _data(n_classes, n=150, d=6, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, d) * (rng.rand(n, d) < 0.6)
    W = rng.randn(d, n_classes)
    y = np.argmax(X @ W + 0.5 * rng.randn(n, n_classes), axis=1) if n_classes > 2 else \
        np.where(X @ W[:, 0] + 0.3 * rng.randn(n) > 0, 1.0, -1.0)
    return sp.csr_matrix(X), y


def _loop_of_public_calls(X, y, classes, sigma):
    """Each row scored by the fitted model's decision_function, then partial_fit on it."""
    clf = PGSClassifier(sigma=sigma)
    losses, mistakes = [], 0.0
    for i in range(X.shape[0]):
        if i == 0:
            z = np.zeros(len(classes) if len(classes) > 2 else 1)
        else:
            z = np.atleast_1d(clf.decision_function(X[i:i + 1])[0])
        if len(classes) > 2:
            signs = np.where(classes == y[i], 1.0, -1.0)
            mistakes += classes[np.argmax(z)] != y[i]
        else:
            signs = np.array([y[i]])
            mistakes += (z[0] > 0) != (y[i] > 0)
        losses.append(np.sum(np.log1p(np.exp(-signs * z))))
        clf.partial_fit(X[i:i + 1], y[i:i + 1], classes=classes)
    return np.array(losses), mistakes / X.shape[0]


@pytest.mark.parametrize("n_classes", [2, 3])
def test_replay_is_the_loop_of_public_calls(n_classes):
    X, y = _data(n_classes)
    classes = np.unique(y)
    got = bench_auto.replay_progressive(PGSClassifier(sigma=1e-2), X, y, classes)
    losses, error = _loop_of_public_calls(X, y, classes, 1e-2)
    half = len(y) // 2
    assert got["progressive_loss_avg"] == pytest.approx(losses.mean(), rel=1e-10)
    assert got["progressive_loss_avg_2nd_half"] == pytest.approx(losses[half:].mean(), rel=1e-10)
    assert got["progressive_error_avg"] == error
    # the last iterate's second half: the core's own statistic over a second call
    clf = PGSClassifier(sigma=1e-2).partial_fit(X[:half], y[:half], classes=classes)
    first = clf.online_stats_["progressive_loss_last"]
    whole = clf.partial_fit(X[half:], y[half:]).online_stats_["progressive_loss_last"]
    second = (whole * len(y) - first * half) / (len(y) - half)
    assert got["progressive_loss_last_2nd_half"] == pytest.approx(second, rel=1e-10)


def test_replay_averaged_differs_from_last_iterate():
    # the point of the replay: the reported (averaged) model's figure is not the last
    # iterate's; the core now keeps the reported one too, which the replay must match
    X, y = _data(2, n=300)
    classes = np.unique(y)
    clf = PGSClassifier(sigma=1e-3).partial_fit(X, y, classes=classes)
    got = bench_auto.replay_progressive(PGSClassifier(sigma=1e-3), X, y, classes)
    stats = clf.online_stats_
    assert abs(got["progressive_loss_avg"] - stats["progressive_loss_last"]) > 1e-3
    assert got["progressive_loss_avg"] == pytest.approx(stats["progressive_loss"], rel=1e-10)


def test_write_vw(tmp_path):
    X = sp.csr_matrix(np.array([[0.5, 0.0, 2.0], [0.0, 0.0, 0.0], [1e-20, 3.0, 0.0]]))
    bench_auto.write_vw(tmp_path / "d.vw", X, np.array([1.0, -1.0, 3.0]))
    assert (tmp_path / "d.vw").read_text().splitlines() == [
        "1 |f 1:0.5 3:2", "-1 |f ", "3 |f 1:9.9999999999999995e-21 2:3"]


def test_regression_record(tmp_path):
    from sklearn.datasets import load_diabetes
    from sklearn.metrics import r2_score
    record = tmp_path / "r.json"
    bench_auto.main(["--data-dir", str(tmp_path), "--parts", "regression", "--sets",
                     "diabetes", "--sigmas", "1e-1", "--json", str(record)])
    got = json.loads(record.read_text())
    X, y = load_diabetes(return_X_y=True)
    perm = np.random.RandomState(0).permutation(len(y))
    train, test = perm[:len(y) - 133], perm[len(y) - 133:]
    const = r2_score(y[test], np.full(len(test), y[train].mean()))
    assert got["regression_peers"][0]["constant_r2"] == pytest.approx(const)
    reg = bench_auto.PGSRegressor(sigma=1e-1).partial_fit(X[train], y[train])
    squared = [r for r in got["regression"] if r["loss"] == "squared"][0]
    assert squared["test_r2"] == pytest.approx(r2_score(y[test], reg.predict(X[test])))


def test_goals_from_a_record():
    # a hand-made record: the goals table's figures are its arithmetic
    record = {
        "grid": [{"set": "a9a", "requested": "auto", "sigma": 1e-3, "test_log_loss": 0.33,
                  "test_accuracy": 0.851},
                 {"set": "a9a", "requested": 1e-3, "sigma": 1e-3, "test_log_loss": 0.36,
                  "test_accuracy": 0.85},
                 {"set": "a9a", "requested": 1e-4, "sigma": 1e-4, "test_log_loss": 0.30,
                  "test_accuracy": 0.84}],
        "vw": [{"set": "a9a", "test_log_loss": 0.325}],
        "sgd": [{"set": "a9a", "setting": "defaults", "test_accuracy": 0.848},
                {"set": "a9a", "setting": "defaults", "test_accuracy": 0.853},
                {"set": "a9a", "setting": "one pass", "test_accuracy": 0.9}],
        "regression": [{"set": "d", "loss": "squared", "requested": "auto", "sigma": 0.1,
                        "test_r2": 0.40},
                       {"set": "d", "loss": "squared", "requested": 0.1, "sigma": 0.1,
                        "test_r2": 0.45},
                       {"set": "d", "loss": "squared", "requested": 0.01, "sigma": 0.01,
                        "test_r2": None}],
        "regression_peers": [{"set": "d", "constant_r2": -0.01}],
    }
    args = type("Args", (), {"sets": ["a9a", "d"]})()
    out = []
    bench_auto.part_goals(args, record, out)
    assert "| a9a | 0.3300 (0.001) | 0.3000 (0.0001) | +10.00% | 0.3250 | -0.0020 |" in out
    assert "| d | squared | 0.4000 (0.1) | 0.4500 (0.1) | -0.0500 | -0.0100 |" in out


@pytest.mark.parametrize("argv, says", [
    (["--sets", "a9b"], "unknown set or part 'a9b'"),
    (["--parts", "grids"], "unknown set or part 'grids'"),
    (["--sigmas", "1e-3,x"], "'x' is neither a number nor 'auto'"),
    (["--sigmas", "0"], "sigma must be positive, got '0'"),
    (["--sets", "a9a"], "a9a.svm.gz, which is absent"),
])
def test_bad_arguments_say_why(tmp_path, capsys, argv, says):
    with pytest.raises(SystemExit):
        bench_auto.main(["--data-dir", str(tmp_path), *argv])
    assert says in capsys.readouterr().err


def test_a_weighted_file_and_its_copies_hold_the_same_weighted_rows(tmp_path):
    """`--parts weights`: every +1 line of weight k in one file, written k times in the
    other; read back (`_vw_matrix`), the weighted rows' weights sum to the copies' count
    and each weighted row is the copied one."""
    train = tmp_path / "t.vw"
    train.write_text("-1 |f a:1 b:2\n1 |f c:3\n-1 |f a:2\n1 |f b:1 c:1\n")
    paths = bench_auto._weighted_and_copied(train, tmp_path, "t", 3)
    Xw, yw, w = bench_auto._vw_matrix(paths["weight k"], weights=True)
    Xc, yc, wc = bench_auto._vw_matrix(paths["k copies"], weights=True)
    assert list(w) == [1, 3, 1, 3] and np.all(wc == 1) and w.sum() == len(yc) == 8
    copies_of = np.repeat(np.arange(4), [1, 3, 1, 3])
    assert (abs(Xc - Xw[copies_of]).sum() == 0) and np.array_equal(yc, yw[copies_of])


def test_the_raw_streams_are_what_they_say():
    """`--parts raw_squared`: x1 + x2 exactly over binary features; a 1e9 feature on
    about 5% of the rows; counts with a target in the tens."""
    X, y, _ = bench_auto.raw_stream("binary_sum", 0)
    assert set(np.unique(X)) == {0.0, 1.0} and np.array_equal(y, X[:, 0] + X[:, 1])
    X, y, _ = bench_auto.raw_stream("huge_feature", 0)
    assert set(np.unique(X[:, 2])) == {0.0, 1e9} and 0.03 < np.mean(X[:, 2] > 0) < 0.07
    X, y, _ = bench_auto.raw_stream("counts", 0)
    assert np.all(X == np.round(X)) and 10 < np.mean(y) < 30
