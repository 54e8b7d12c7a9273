"""The certificate of the adaptive geometry's objective (docs/design/adaptive.md): the
objective on the scaled weights v_j = s_j w_j over the features x_j / s_j, s_j the
largest |x_j| the training saw.

Yardsticks: the objective written here in NumPy from its definition, with the scales
taken from the data (not from the model), and its optimum from scipy's L-BFGS; the scale
invariance of that objective (a column times c leaves it, its optimum and the model
unchanged); the global geometry's certificate of the raw weights for `objective="raw"`.
"""
import json
import subprocess
import sys

import numpy as np
import pytest
from scipy.optimize import minimize

from onlinepgs import PGSClassifier, PGSRegressor, duality_gap, load_model, load_svmlight
from onlinepgs.duality import duality_gap_stream, gap_of_weights

SIGMA = 1e-2


def columns_of_every_size(m=300, seed=0):
    """Four columns whose sizes span 1e-3 to 1e3, a label from all of them."""
    rng = np.random.RandomState(seed)
    X = rng.randn(m, 4) * np.array([1e-3, 1.0, 1e3, 10.0])
    score = X[:, 0] * 1e3 + X[:, 1] + X[:, 2] * 1e-3 - 0.1 * X[:, 3] + 0.5 * rng.randn(m)
    return X, score


def adaptive(cls=PGSClassifier, iterate="last", **params):
    return cls(geometry="adaptive", iterate=iterate, radius=None, sigma=SIGMA,
               random_state=0, **params)


def scaled_objective(v, v0, Xs, y):
    """sigma ||(v, v0)||^2 / 2 + the mean logistic loss of <v, x / s> + v0: the global
    geometry's objective (p = 2) of the scaled columns, the intercept's feature 1."""
    z = Xs @ v + v0
    return SIGMA / 2 * (v @ v + v0 * v0) + np.mean(np.logaddexp(0.0, -y * z))


@pytest.mark.parametrize("iterate", ["last", "weighted2"])
def test_the_certificate_brackets_scipys_optimum_of_the_scaled_objective(iterate):
    """The primal is the NumPy objective at v = S w (S = max |x_j| of the training rows,
    w the reported iterate: the last, or the weighted2 average divided by the final
    scales); the dual is below scipy's optimum of it, which is below the primal; after
    100 epochs the gap is near 0 (the average's below the last iterate's). The raw
    objective of the same weights is another number."""
    X, score = columns_of_every_size()
    y = np.where(score > 0, 1, -1)
    s = np.abs(X).max(axis=0)
    Xs = X / s
    best = minimize(lambda u: scaled_objective(u[:-1], u[-1], Xs, y), np.zeros(5),
                    method="L-BFGS-B", options={"gtol": 1e-12, "ftol": 1e-15}).fun
    for epochs, loose in ((1, None), (100, 1e-4)):
        clf = adaptive(max_epochs=epochs, iterate=iterate).fit(X, y)
        cert = duality_gap(clf, X, y)
        v, v0 = clf.coef_[0] * s, clf.intercept_[0]
        assert cert.primal == pytest.approx(scaled_objective(v, v0, Xs, y), rel=1e-12)
        assert cert.dual <= best + 1e-12 <= cert.primal + 2e-12
        assert cert.gap >= cert.primal - best - 1e-12
        if loose is not None:
            assert cert.relative_gap < loose
    if iterate != "last":
        assert cert.gap < duality_gap(adaptive(max_epochs=100).fit(X, y), X, y).gap
    raw = duality_gap(clf, X, y, objective="raw")
    w = clf.coef_[0]
    assert raw.primal == pytest.approx(
        SIGMA / 2 * (w @ w + clf.intercept_[0] ** 2)
        + np.mean(np.logaddexp(0.0, -y * (X @ w + clf.intercept_[0]))), rel=1e-12)
    assert raw.relative_gap > 1.0  # a far worse point of another objective


@pytest.mark.parametrize("params", [
    {},                                      # binary
    {"l1": 1e-3},                            # binary with l1 (exact zeros)
    {"multi_class": "ovr"},                  # three classes, one-vs-rest
    {"multi_class": "multinomial"},          # three classes, coupled
])
def test_columns_times_any_factor_leave_the_certificate(params):
    """The scaled objective is scale-free: with each column multiplied by a factor in
    [1e-3, 1e3] the model's predictions (within 1e-9) and its certificate (primal and
    dual within 1e-9, relative) are the same; the raw objective's are not."""
    X, score = columns_of_every_size()
    three = "multi_class" in params
    y = np.digitize(score, [-1.0, 1.0]) if three else np.where(score > 0, 1, -1)
    c = np.array([1e3, 1e-3, 0.5, 20.0])
    one, other = adaptive(max_epochs=3, **params).fit(X, y), \
        adaptive(max_epochs=3, **params).fit(X * c, y)
    np.testing.assert_allclose(other.decision_function(X * c), one.decision_function(X),
                               rtol=1e-9, atol=1e-12)
    a, b = duality_gap(one, X, y), duality_gap(other, X * c, y)
    assert b.primal == pytest.approx(a.primal, rel=1e-9)
    assert b.dual == pytest.approx(a.dual, rel=1e-9)
    assert 0 <= a.gap < a.primal
    raw_a, raw_b = (duality_gap(one, X, y, objective="raw"),
                    duality_gap(other, X * c, y, objective="raw"))
    assert raw_b.primal != pytest.approx(raw_a.primal, rel=1e-3)


def test_raw_is_the_global_certificate_of_the_weights_and_global_models_have_one():
    """objective="raw" of an adaptive regressor = `gap_of_weights` of its weights and
    intercept; a model of the global geometry certifies the same either way."""
    X, score = columns_of_every_size()
    reg = adaptive(PGSRegressor, max_epochs=2).fit(X, score)
    raw = duality_gap(reg, X, score, objective="raw")
    same = gap_of_weights(reg.coef_, reg.intercept_, X, score, loss="squared", sigma=SIGMA)
    assert (raw.primal, raw.dual) == pytest.approx((same.primal, same.dual), rel=1e-12)
    glob = PGSRegressor(sigma=SIGMA, random_state=0, max_epochs=2).fit(X / 1e3, score)
    a = duality_gap(glob, X / 1e3, score)
    b = duality_gap(glob, X / 1e3, score, objective="raw")
    assert (a.primal, a.dual) == (b.primal, b.dual)
    with pytest.raises(ValueError, match="objective must be one of"):
        duality_gap(reg, X, score, objective="scaled")


def test_a_column_beyond_the_model_and_the_stream_form(tmp_path):
    """Rows streamed in chunks give the certificate of the rows in memory; a column the
    model never saw (all zeros in training) keeps the scale 1 and its weight 0."""
    X, score = columns_of_every_size()
    y = np.where(score > 0, 1, -1)
    Xz = np.hstack([X, np.zeros((X.shape[0], 1))])
    clf = adaptive(max_epochs=2).fit(Xz, y)
    assert clf.coef_[0, 4] == 0.0 and clf.model_.scales[5] == 1.0
    whole = duality_gap(clf, Xz, y)
    Xo = Xz.copy()
    Xo[:5, 4] = 7.0  # seen only here: the objective's column of scale 1
    chunks = [(Xo[i:i + 64], y[i:i + 64]) for i in range(0, len(y), 64)]
    streamed = duality_gap_stream(clf, chunks)
    assert streamed.primal == pytest.approx(whole.primal, rel=1e-12)
    assert streamed.dual <= whole.dual + 1e-12  # X^T a grows at the new column


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "onlinepgs.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd)


def test_the_gap_command_certifies_an_adaptive_model_file(tmp_path):
    """`train --geometry adaptive` then `gap`: the scaled objective's certificate (the
    API's on the same rows, printed to 12 digits), named on its own line; --objective raw
    the raw one; --json says which."""
    X, score = columns_of_every_size(m=200)
    y = np.where(score > 0, 1, -1)
    with open(tmp_path / "d.svm", "w") as f:
        for row, label in zip(X, y):
            f.write(f"{label} " + " ".join(f"{j + 1}:{v:.17g}" for j, v in enumerate(row))
                    + "\n")
    done = _cli("train", "d.svm", "--geometry", "adaptive", "--sigma", SIGMA, "-o", "m.pgs",
                "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = {}
    for objective in ("trained", "raw"):
        shown = _cli("gap", "m.pgs", "d.svm", "--objective", objective, cwd=tmp_path)
        assert shown.returncode == 0, shown.stderr
        out[objective] = dict(line.split(" = ", 1) for line in shown.stdout.splitlines())
    assert out["trained"]["objective"].startswith("scaled")
    assert out["raw"]["objective"].startswith("raw")
    est = load_model(tmp_path / "m.pgs")
    Xf, yf = load_svmlight(str(tmp_path / "d.svm"))
    for objective in ("trained", "raw"):
        cert = duality_gap(est, Xf, yf, objective=objective)
        assert float(out[objective]["primal"]) == pytest.approx(cert.primal, rel=1e-11)
        assert float(out[objective]["dual"]) == pytest.approx(cert.dual, rel=1e-11)
    assert float(out["trained"]["primal"]) < float(out["raw"]["primal"])
    shown = _cli("gap", "m.pgs", "d.svm", "--json", cwd=tmp_path)
    assert json.loads(shown.stdout)["objective"] == "scaled"


@pytest.mark.parametrize("multi_class", [None, "ovr", "multinomial"])
def test_the_scales_survive_every_way_a_model_file_is_read(tmp_path, multi_class):
    """The scales of the model in memory (s_j = max |x_j|, checked against the data),
    bit for bit in a file with its state (loaded whole, or its reported model read in
    slices: `load_learner(state=False)`, the commands' way) and in one saved without it,
    whose certificate is then the same; a global model has none."""
    from onlinepgs.model_io import load_learner, save_model

    X, score = columns_of_every_size()
    X[:, 1] = np.where(np.abs(X[:, 1]) > 1.0, 0.0, X[:, 1])  # a sparse column too
    y = np.digitize(score, [-1.0, 1.0]) if multi_class else np.where(score > 0, 1, -1)
    est = adaptive(max_epochs=2, **({"multi_class": multi_class} if multi_class else {}))
    est.fit(X, y)
    scales = est.model_.scales
    # the state keeps 1 / s_j: s_j comes back to within a rounding
    np.testing.assert_allclose(scales[1:], np.abs(X).max(axis=0), rtol=1e-15)
    assert scales[0] == est.intercept_scaling
    save_model(est, tmp_path / "whole.pgs")
    save_model(est, tmp_path / "weights.pgs", state=False)
    cert = duality_gap(est, X, y)
    for path, state in (("whole.pgs", True), ("whole.pgs", False), ("weights.pgs", True)):
        back = load_learner(tmp_path / path, state=state)
        np.testing.assert_array_equal(back.model_.scales, scales)
        again = duality_gap(back, X, y)
        assert (again.primal, again.dual) == (cert.primal, cert.dual)
    glob = PGSClassifier(sigma=SIGMA, random_state=0).fit(X / 1e3, y)
    save_model(glob, tmp_path / "global.pgs", state=False)
    assert load_learner(tmp_path / "global.pgs").model_.scales is None


def test_damaged_scales_are_refused_naming_the_array(tmp_path):
    """A weights-only file whose scales are damaged (a scale of 0, coordinates out of
    order, one array missing) is refused with the array's name; nothing else loads."""
    import zipfile

    from onlinepgs.model_io import ModelFileError, load_learner, save_model
    from onlinepgs.model_io import container

    X, score = columns_of_every_size()
    est = adaptive(max_epochs=1).fit(X, np.where(score > 0, 1, -1))
    save_model(est, tmp_path / "m.pgs", state=False)
    with zipfile.ZipFile(tmp_path / "m.pgs") as zf:
        header = json.loads(zf.read("header.json"))
        arrays = {e["name"]: np.lib.format.read_array(zf.open(e["name"] + ".npy"))
                  for e in header["arrays"]}

    def crafted(change, drop=None):
        parts, head = dict(arrays), dict(header)
        change(parts)
        head["arrays"] = [e for e in header["arrays"] if e["name"] != drop]
        parts.pop(drop, None)
        head["checksum"] = {"algorithm": "sha256", "digest": container._digest(head, parts)}
        path = tmp_path / "crafted.pgs"
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr("header.json", json.dumps(head))
            for e in head["arrays"]:
                with zf.open(e["name"] + ".npy", "w") as out:
                    np.lib.format.write_array(out, parts[e["name"]])
        return path

    def zero(parts):
        parts["state/scale_value"] = np.where(np.arange(len(parts["state/scale_value"])) == 1,
                                              0.0, parts["state/scale_value"])

    def reversed_index(parts):
        parts["state/scale_index"] = parts["state/scale_index"][::-1].copy()

    for change, drop, message in ((zero, None, "state/scale_value holds a scale that is "
                                               "not a finite positive"),
                                  (reversed_index, None, "state/scale_index is not strictly "
                                                         "increasing"),
                                  (lambda parts: None, "state/scale_value",
                                   "missing array state/scale_value")):
        with pytest.raises(ModelFileError, match=message):
            load_learner(crafted(change, drop))
