"""The adaptive geometry through the estimators and the command (``geometry="adaptive"``,
``--geometry adaptive``): raw columns of any units, the same model in chunks and through
a file, its refusals by name; the core's update is held to its NumPy transcription in
tests/test_adaptive_core.py."""
import subprocess
import sys

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss

from onlinepgs import PGSClassifier, PGSRegressor, load_model, save_model
from onlinepgs.pgs import PGSDivergedError

ADAPTIVE = dict(geometry="adaptive", iterate="last", radius=None)


def raw_columns(m=4000, seed=0):
    """Columns in wildly different units (counts in the thousands, fractions in
    thousandths), labels from their scaled sum: what a log delivers, unscaled."""
    rng = np.random.RandomState(seed)
    units = np.array([1.0, 1e3, 1e-3, 30.0, 1e5, 1.0])
    Z = rng.randn(m, units.size)
    y = (Z @ np.array([1.0, -1.5, 2.0, 0.5, 1.0, 0.0]) + 0.5 * rng.randn(m) > 0).astype(int)
    return Z * units, y


def test_one_pass_on_raw_columns_matches_the_batch_optimum_on_scaled_ones():
    """One pass of the adaptive geometry with its defaults (sigma and eta raced) on raw
    columns comes within 0.05 of the test log loss of scikit-learn's batch logistic
    regression on the same columns max-abs scaled by hand (0.139 against 0.118: the race
    keeps eta 2; eta 0.5 alone gives 0.189, 0.1 0.337); the global geometry, one step
    size for every unit, is off by more than 10 (12.9)."""
    X, y = raw_columns()
    Xt, yt = raw_columns(seed=1)
    scale = np.max(np.abs(X), axis=0)
    batch = LogisticRegression(C=1e4, max_iter=1000).fit(X / scale, y)
    best = log_loss(yt, batch.predict_proba(Xt / scale))
    ours = PGSClassifier(max_epochs=1, random_state=0, **ADAPTIVE).fit(X, y)
    flat = PGSClassifier(max_epochs=1, random_state=0).fit(X, y)
    assert log_loss(yt, ours.predict_proba(Xt)) < best + 0.05
    assert log_loss(yt, flat.predict_proba(Xt)) > best + 10


@pytest.mark.parametrize("estimator", [PGSClassifier, PGSRegressor])
def test_a_column_in_other_units_changes_no_prediction(estimator):
    """Every column multiplied by a c in [1e-3, 1e3]: the predictions of the model fitted
    on it equal the model's on the original columns within 1e-9 (relative)."""
    X, y = raw_columns(m=1500)
    target = y if estimator is PGSClassifier else X[:, 0] / 1.0 + 3.0 * y
    c = 10.0 ** np.linspace(-3, 3, X.shape[1])
    a = estimator(sigma=1e-4, max_epochs=2, random_state=0, **ADAPTIVE).fit(X, target)
    b = estimator(sigma=1e-4, max_epochs=2, random_state=0, **ADAPTIVE).fit(X * c, target)
    np.testing.assert_allclose(b.decision_function(X * c) if estimator is PGSClassifier
                               else b.predict(X * c),
                               a.decision_function(X) if estimator is PGSClassifier
                               else a.predict(X), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(b.coef_ * c, a.coef_, rtol=1e-9, atol=1e-12)


def test_chunks_and_a_model_file_continue_bit_for_bit(tmp_path):
    """partial_fit in chunks, with the model saved and loaded in between, ends with the
    bits of the same calls without the file (the race on: sigma="auto")."""
    X, y = raw_columns(m=3000)
    whole = PGSClassifier(random_state=0, eta=0.3, **ADAPTIVE)
    parts = PGSClassifier(random_state=0, eta=0.3, **ADAPTIVE)
    for est in (whole, parts):
        est.partial_fit(X[:1000], y[:1000], classes=[0, 1])
    save_model(parts, tmp_path / "m.pgs")
    parts = load_model(tmp_path / "m.pgs")
    assert parts.get_params()["geometry"] == "adaptive" and parts.eta == 0.3
    for est in (whole, parts):
        est.partial_fit(X[1000:], y[1000:])
    assert np.array_equal(whole.coef_, parts.coef_)
    assert np.array_equal(whole.intercept_, parts.intercept_)
    assert whole.sigma_ == parts.sigma_


@pytest.mark.parametrize("p", [2.0, 1.5])
def test_what_it_does_not_run_yet_is_refused_by_name_before_any_row(p):
    """Forgetting decays the sums over one global factor: the averages' settled sums
    have no decayed form, refused by name (p < 2 forgets with the last iterate:
    tests/test_adaptive_forget.py)."""
    params = {**ADAPTIVE, "iterate": "weighted2", "p": p, "forget": 0.999}
    with pytest.raises(ValueError, match=r"forgets \(forget=0\.999\) with the last "
                       r"iterate only"):
        PGSClassifier(**params).fit(np.zeros((2, 1)), [0, 1])


def write_svm(path, X, y):
    """The rows of X with labels y as an svmlight file at path (every value exact)."""
    with open(path, "w") as f:
        for yi, row in zip(y, X):
            f.write(f"{yi} " + " ".join(f"{j + 1}:{v:.17g}" for j, v in enumerate(row))
                    + "\n")
    return path


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "onlinepgs.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd)


@pytest.mark.parametrize("params, settled", [
    (dict(geometry="adaptive"), dict(iterate="last", radius=None)),
    (dict(geometry="adaptive", p=1.5), dict(iterate="last", radius="auto")),
    (dict(), dict(iterate="weighted2", radius="auto")),
    (dict(l1=1e-3, p=1.5), dict(iterate="last", radius="auto")),
    (dict(l1=1e-3, forget=0.99), dict(iterate="last", radius="auto")),
    (dict(forget=0.99), dict(iterate="weighted2", radius="auto")),
])
def test_auto_iterate_and_radius_settle_by_the_geometry(params, settled):
    """The defaults iterate="auto", radius="auto" run what the configuration runs best:
    a fresh ``PGSClassifier(geometry="adaptive")`` trains (the last iterate on R^n at
    p = 2) and its model is, bit for bit, the one of those values typed out."""
    X, y = raw_columns(m=600)
    X = X / np.abs(X).max(axis=0)  # the global geometry's cases need scaled columns
    auto = PGSClassifier(sigma=1e-4, random_state=0, **params).partial_fit(X, y, [0, 1])
    typed = PGSClassifier(sigma=1e-4, random_state=0, **params, **settled)
    typed.partial_fit(X, y, [0, 1])
    config = auto._state.config()
    assert (config["iterate"], config["radius"]) == (settled["iterate"], settled["radius"])
    np.testing.assert_array_equal(auto.coef_, typed.coef_)
    assert auto.get_params()["iterate"] == auto.get_params()["radius"] == "auto"


def test_the_command_trains_raw_columns_with_geometry_adaptive(tmp_path):
    """``train --geometry adaptive`` takes the last iterate and no ball by default, and
    its model predicts the raw file as the estimator does; its wrong combinations and
    --scheduler with the race of eta are one-line errors in the flags' words."""
    X, y = raw_columns(m=2000)
    path = write_svm(tmp_path / "raw.svm", X, 2 * y - 1)
    done = _cli("train", path, "--geometry", "adaptive", "--sigma", "1e-4", "-o",
                tmp_path / "m.pgs", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    model = load_model(tmp_path / "m.pgs")
    config = model._state.config()
    assert (model.geometry, model.iterate, model.radius) == ("adaptive", "auto", "auto")
    assert (config["geometry"], config["iterate"], config["radius"]) == \
        ("adaptive", "last", None)
    ours = PGSClassifier(sigma=1e-4, max_epochs=1, shuffle=False, **ADAPTIVE)
    ours.partial_fit(X, 2 * y - 1, classes=[-1, 1])
    np.testing.assert_allclose(model.coef_, ours.coef_, rtol=1e-12, atol=1e-15)
    bad = _cli("train", path, "--geometry", "adaptive", "--iterate", "random", "-o",
               tmp_path / "x.pgs", cwd=tmp_path)
    assert bad.returncode == 2
    assert "--iterate: the adaptive geometry reports the last iterate or an average" in bad.stderr
    # options the geometry given would ignore: refused, not dropped without a word
    for flags, words in ((["--eta", "0.1"], "--eta: the adaptive geometry's base rate: "
                                            "give --geometry adaptive"),
                         (["--geometry", "adaptive", "--intercept-scaling", "10"],
                          "--intercept-scaling: has no effect with --geometry adaptive")):
        bad = _cli("train", path, *flags, "-o", tmp_path / "x.pgs", cwd=tmp_path)
        assert bad.returncode == 2 and words in bad.stderr, bad.stderr
        assert not (tmp_path / "x.pgs").exists()
    dask = _cli("train", path, "--geometry", "adaptive", "--scheduler", "local", "-o",
                tmp_path / "x.pgs", cwd=tmp_path)
    assert dask.returncode != 0 and "--eta 0.5" in dask.stderr
    assert "Traceback" not in dask.stderr
    gap = _cli("gap", tmp_path / "m.pgs", path, cwd=tmp_path)  # its scaled objective's
    assert gap.returncode == 0 and "objective = scaled" in gap.stdout, gap.stderr


def test_a_coupled_multiclass_loss_learns_raw_columns():
    """Three classes from raw columns, the multinomial loss, two passes: the adaptive
    geometry comes within 0.03 of the test accuracy of the global geometry on the
    columns scaled by hand (0.962 against 0.985; eta 8 gives 0.980) and far above the
    global geometry on the raw columns (0.42)."""
    X, _ = raw_columns(m=3000)
    Xt, _ = raw_columns(m=3000, seed=1)
    scale = np.max(np.abs(X), axis=0)
    w = np.array([[2.0, -1.0, 0.0, 1.0, 0.0, 0.5], [0.0, 2.0, -2.0, 0.0, 1.0, 0.0]])

    def labels(Z):
        score = (Z / scale) @ w.T * 5.0
        return np.argmax(np.hstack([score, np.zeros((Z.shape[0], 1))]), axis=1)

    y, yt = labels(X), labels(Xt)
    by_hand = PGSClassifier(multi_class="multinomial", max_epochs=2, random_state=0)
    raw = PGSClassifier(multi_class="multinomial", max_epochs=2, random_state=0)
    ours = PGSClassifier(multi_class="multinomial", max_epochs=2, random_state=0,
                         **ADAPTIVE).fit(X, y)
    assert ours.coef_.shape == (3, X.shape[1])
    assert ours.score(Xt, yt) > by_hand.fit(X / scale, y).score(Xt / scale, yt) - 0.03
    assert ours.score(Xt, yt) > raw.fit(X, y).score(Xt, yt) + 0.3


def test_a_row_of_weight_1e6_is_learned_to_its_label_not_past_it(tmp_path):
    """VW text, the squared loss: 200 rows of raw counts, then one row of importance
    weight 1e6 and label 50. The model predicts that row's label within 1e-5 (VW's
    invariant update gives 50.0 on the same file); the linear rule (1e6 times the row's
    slope) took the prediction to 4047."""
    rng = np.random.RandomState(0)
    lines = []
    for _ in range(200):
        a, b = rng.poisson([3.0, 40.0])
        lines.append(f"{2 * a + 0.1 * b + rng.randn():.6g} |f a:{a} b:{b}\n")
    (tmp_path / "heavy.vw").write_text("".join(lines) + "50 1000000 |f a:4 b:35\n")
    (tmp_path / "row.vw").write_text("50 |f a:4 b:35\n")
    done = _cli("train", "heavy.vw", "--format", "vw", "--loss", "squared", "--geometry",
                "adaptive", "--sigma", "1e-4", "-o", "m.pgs", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    shown = _cli("predict", "m.pgs", "row.vw", "--format", "vw", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert float(shown.stdout.split()[0]) == pytest.approx(50.0, abs=1e-5)


def test_its_divergences_give_its_own_causes_and_advice():
    """The adaptive geometry's errors name what overflows there: a tiny feature (its
    scale's reciprocal, or the weight divided by it, beyond the double range: the column
    and its size, scale it up) or heavy sample weights (smaller ones: no factor shared
    with sigma leaves its model as it is), never the global geometry's 1/(t sigma) steps,
    radius or sigma."""
    rng = np.random.RandomState(0)
    X = rng.randn(300, 3)
    y = (X[:, 0] > 0).astype(int)
    Z = X.copy()
    Z[:, 1] = np.where(X[:, 1] > 0, 2e-310, -2e-310)  # 1 / 2e-310 overflows
    with pytest.raises(PGSDivergedError, match=r"the weight of column 1, whose largest "
                       r"\|value\| is below 2.2e-308, .*scale that column up"):
        PGSClassifier(geometry="adaptive", random_state=0).fit(Z, y)
    weights = np.where(np.arange(300) % 5 == 0, 1e300, 1.0)
    with pytest.raises(PGSDivergedError) as caught:
        PGSClassifier(geometry="adaptive", random_state=0).partial_fit(
            X, y, classes=[0, 1], sample_weight=weights)
    message = str(caught.value)
    assert "sample_weight 1e+300); use smaller sample weights" in message
    for global_words in ("1/(t sigma)", "radius", "sigma by one factor", "sigma="):
        assert global_words not in message
