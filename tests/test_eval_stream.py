"""`onlinepgs eval` in one pass and bounded memory, the AUC exact (issue 32, item 8)."""
import gc
import tracemalloc

import numpy as np
import pytest
from sklearn import metrics

import onlinepgs.cli as cli
import onlinepgs.cli.predict
from onlinepgs import PGSClassifier, PGSRegressor, load_model, load_svmlight, save_model
from onlinepgs._metrics import ExactAUC


def _small(auc, run_rows=1000, fan_in=3, block_rows=64):
    """Tiny runs, fan-in and blocks: every path of the external sort on little data."""
    auc.RUN_ROWS, auc.FAN_IN, auc.BLOCK_ROWS = run_rows, fan_in, block_rows
    return auc


def _auc_of_chunks(scores, positive, chunk, **small):
    auc = _small(ExactAUC(), **small)
    for start in range(0, scores.shape[0], chunk):
        auc.add(scores[start:start + chunk], positive[start:start + chunk])
    return auc.result()


@pytest.mark.parametrize("kind", ["continuous", "few_values", "all_tied", "signed_zeros",
                                  "infinite"])
def test_exact_auc_equals_roc_auc_score(kind):
    rng = np.random.RandomState(0)
    n = 60_000
    scores = rng.randn(n)
    if kind == "few_values":
        scores = np.round(scores, 1)  # ~80 distinct values: ties across every run
    elif kind == "all_tied":
        scores = np.full(n, 0.25)
    elif kind == "signed_zeros":
        scores = np.where(scores > 0.5, 0.0, np.where(scores < -0.5, -0.0, scores))
    elif kind == "infinite":
        scores[rng.rand(n) < 0.05] = np.inf
        scores[rng.rand(n) < 0.05] = -np.inf
    positive = rng.rand(n) < 1.0 / (1.0 + np.exp(-np.clip(2 * scores, -50, 50)))
    # roc_auc_score refuses infinities; the AUC depends on the order only
    expected = metrics.roc_auc_score(positive, np.clip(scores, -1e300, 1e300))
    # 60 spills, merged 3 at a time into runs of 3 and 9 spills, then a final merge
    got = _auc_of_chunks(scores, positive, chunk=777)
    assert abs(got - expected) <= 1e-12, (got, expected)
    # the constants as shipped: everything in one in-memory run
    assert abs(_auc_of_chunks(scores, positive, chunk=5000, run_rows=ExactAUC.RUN_ROWS,
                              fan_in=ExactAUC.FAN_IN, block_rows=ExactAUC.BLOCK_ROWS)
               - expected) <= 1e-12


def test_exact_auc_of_one_class_is_none():
    auc = ExactAUC()
    auc.add([0.1, 0.2], [True, True])
    assert auc.result() is None


def _peak_bytes(run):
    gc.collect()
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_exact_auc_memory_does_not_grow_with_the_rows():
    rng = np.random.RandomState(1)

    def feed(n):
        auc = _small(ExactAUC(), run_rows=4096, fan_in=4, block_rows=512)
        for _ in range(n // 2048):
            scores = np.round(rng.randn(2048), 3)
            auc.add(scores, rng.rand(2048) < 0.5)
        assert 0.45 < auc.result() < 0.55

    small, large = _peak_bytes(lambda: feed(40_960)), _peak_bytes(lambda: feed(327_680))
    # 8x the rows: the same bound (holding them would take 8 x 9 bytes a row more)
    assert large < 1.25 * small + 200_000, (small, large)


def _write(path, X, y):
    with open(path, "w") as f:
        for row, label in zip(X, y):
            nz = np.flatnonzero(row)
            f.write(f"{label:g} " + " ".join(f"{j + 1}:{float(row[j])!r}" for j in nz) + "\n")


def _printed(capsys):
    out = capsys.readouterr().out
    return {k: float(v) for k, v in (line.split(" = ") for line in out.splitlines())}


@pytest.mark.parametrize("loss, classes", [("logistic", 2), ("hinge", 2), ("logistic", 3),
                                           ("squared", None)])
def test_eval_equals_the_metrics_on_all_rows(tmp_path, capsys, monkeypatch, loss, classes):
    rng = np.random.RandomState(2)
    X = np.round(rng.randn(5000, 6), 1) * (rng.rand(5000, 6) < 0.6)
    signal = X @ rng.randn(6)
    if classes is None:
        y = np.round(signal + 0.3 * rng.randn(5000), 2)
        est = PGSRegressor(loss=loss, sigma=1e-2, radius=20.0, random_state=0).fit(X, y)
    else:
        y = np.digitize(signal + 0.5 * rng.randn(5000),
                        np.quantile(signal, np.linspace(0, 1, classes + 1)[1:-1]))
        y = np.array([-1.0, 1.0])[y] if classes == 2 else y.astype(float)
        est = PGSClassifier(loss=loss, sigma=1e-2, random_state=0).fit(X, y)
    data, model = tmp_path / "d.svm", tmp_path / "m.pgs"
    _write(data, X, y)
    save_model(est, model)
    monkeypatch.setattr(ExactAUC, "RUN_ROWS", 700)  # spilled runs and merges in the CLI
    monkeypatch.setattr(ExactAUC, "FAN_IN", 3)
    assert cli.main(["eval", str(model), str(data), "--chunk-rows", "333"]) == 0
    got = _printed(capsys)

    # the yardstick: scikit-learn on every row at once, scored by the loaded model
    est = load_model(model)
    Xf, yf = load_svmlight(data, n_features=X.shape[1])
    expected = {"rows": 5000}
    if classes is None:
        pred = est.predict(Xf)
        expected["rmse"] = np.sqrt(metrics.mean_squared_error(yf, pred))
        expected["mae"] = metrics.mean_absolute_error(yf, pred)
    else:
        if classes == 2:
            expected["auc"] = metrics.roc_auc_score(yf, est.decision_function(Xf))
        expected["accuracy"] = metrics.accuracy_score(yf, est.predict(Xf))
        if loss == "logistic":
            expected["log_loss"] = metrics.log_loss(yf, est.predict_proba(Xf),
                                                    labels=est.classes_)
    assert list(got) == list(expected)  # the same lines, in the same order
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, abs=6e-7), key


def test_eval_memory_does_not_grow_with_the_rows(tmp_path, capsys, monkeypatch):
    rng = np.random.RandomState(3)
    X = np.round(rng.rand(400, 4), 2)
    y = np.where(X[:, 0] > 0.5, 1.0, -1.0)
    model = tmp_path / "m.pgs"
    save_model(PGSClassifier(sigma=1e-2, random_state=0).fit(X, y), model)
    monkeypatch.setattr(ExactAUC, "RUN_ROWS", 4096)  # the bound, scaled to the test
    peaks = []
    for copies in (50, 400):  # 20,000 and 160,000 rows
        data = tmp_path / f"d{copies}.svm"
        _write(data, np.tile(X, (copies, 1)), np.tile(y, copies))
        args = ["eval", str(model), str(data), "--chunk-rows", "1000"]
        peaks.append(_peak_bytes(lambda: cli.main(args)))
        assert _printed(capsys)["rows"] == 400 * copies
    # before: every label, score and probability kept (8x the rows, ~8x the memory)
    assert peaks[1] < 1.25 * peaks[0] + 500_000, peaks


def test_eval_of_an_unusable_model_is_one_line(tmp_path, capsys, monkeypatch):
    rng = np.random.RandomState(4)
    X = rng.rand(50, 3)
    y = np.where(X[:, 0] > 0.5, 1.0, -1.0)
    est = PGSClassifier(sigma=1e-2, random_state=0).fit(X, y)
    est._state.block_a[3] = np.nan  # the weight of feature 2 (a diverged model)
    est._cache.clear()
    X[:, 2] = 0.0
    X[36, 2] = 1.0  # only line 37 uses that feature
    data = tmp_path / "d.svm"
    _write(data, X, y)
    monkeypatch.setattr(onlinepgs.cli.predict, "load", lambda path, command: (est, {}))
    assert cli.main(["eval", "m.pgs", str(data)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    # the estimator refuses to hand out its non-finite weights: one line, nothing printed
    assert err.count("\n") == 1
    assert err.startswith("onlinepgs: error: the model is not usable: ")
