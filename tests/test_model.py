"""The value (onlinepgs.model.LinearModel), the shared base and the sklearn-free learners,
against independent yardsticks: NumPy's products, scikit-learn's murmurhash, scipy's
optimizer, repeated rows, and the scikit-learn estimators bit for bit."""
import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize
from sklearn.utils import murmurhash3_32

from onlinepgs import (PGSClassifier, PGSRegressor, SDCAClassifier, SDCARegressor, duality_gap,
                       load_model, save_model)
from onlinepgs._checks import check_labels
from onlinepgs.duality import duality_gap_stream
from onlinepgs.model import LinearModel
from onlinepgs.model_io import load_learner
from onlinepgs.pgs import PGSClassifierLearner, PGSRegressorLearner
from onlinepgs.sdca import SDCAClassifierLearner, SDCARegressorLearner

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _data(seed=0, m=120, n=5, classes=2):
    rng = np.random.RandomState(seed)
    X = rng.randn(m, n)
    score = X @ rng.randn(n) + 0.3 * rng.randn(m)
    if classes == 2:
        return X, np.where(score > 0, "yes", "no")
    return X, np.digitize(score, np.quantile(score, np.linspace(0, 1, classes + 1)[1:-1]))


# ---- the value ------------------------------------------------------------------------------
def test_value_scores_dense_csr_and_records_as_numpy_does():
    rng = np.random.RandomState(1)
    coef, w0 = rng.randn(3, 4), rng.randn(3)
    model = LinearModel(coef, w0, classes=[2, 5, 9], loss="hinge", intercept_scaling=2.0)
    X = rng.randn(7, 4)
    expected = X @ coef.T + 2.0 * w0
    np.testing.assert_allclose(model.decision_function(X), expected, rtol=1e-15)
    np.testing.assert_allclose(model.decision_function(sp.csr_matrix(X)), expected, rtol=1e-15)
    records = [{j: float(v) for j, v in enumerate(row)} for row in X]
    np.testing.assert_allclose(model.decision_function(records), expected, rtol=1e-15)
    np.testing.assert_array_equal(model.predict(X), np.array([2, 5, 9])[expected.argmax(1)])
    assert not hasattr(model, "predict_proba")  # the hinge loss has no probabilities
    with pytest.raises(ValueError, match="X has 3 features, but the model is expecting 4"):
        model.decision_function(X[:, :3])
    # sparse columns past the weights carry weight 0
    wide = sp.hstack([sp.csr_matrix(X), sp.csr_matrix(np.ones((7, 2)))], format="csr")
    np.testing.assert_allclose(model.decision_function(wide), expected, rtol=1e-15)


def test_value_hashes_records_as_murmurhash3_signed_by_its_top_bit():
    n_bits, seed = 6, 17
    coef = np.arange(2.0**n_bits)[None, :] / 10
    model = LinearModel(coef, [0.0], loss="squared", n_bits=n_bits, hash_seed=seed)
    h = murmurhash3_32("word=good", seed=seed, positive=True)
    sign = -1.0 if h >> 31 else 1.0
    expected = 2.5 * sign * coef[0, h & (2**n_bits - 1)]
    assert model.predict([{"word=good": 2.5}])[0] == pytest.approx(expected, rel=1e-15)


def test_value_refuses_weights_that_do_not_fit_its_classes():
    with pytest.raises(ValueError, match="3 classes need 3 row"):
        LinearModel(np.zeros((1, 2)), classes=[0, 1, 2])
    with pytest.raises(ValueError, match="regressor has one row"):
        LinearModel(np.zeros((2, 2)))


@pytest.mark.parametrize("make", [
    lambda: PGSClassifier(sigma=1e-2, random_state=0),
    lambda: PGSRegressor(sigma=1e-2, random_state=0),
    lambda: SDCAClassifier(sigma=1e-2, random_state=0),
    lambda: SDCARegressor(sigma=1e-2, random_state=0),
    lambda: PGSClassifierLearner(sigma=1e-2, loss="hinge", random_state=0),
    lambda: SDCARegressorLearner(sigma=1e-2, loss="huber", random_state=0),
])
@pytest.mark.parametrize("classes", [2, 4])
def test_every_estimator_gives_its_value(make, classes):
    est = make()
    X, y = _data(classes=classes)
    if not est._classifier:
        if classes != 2:
            pytest.skip("one regression problem")
        y = X @ [1.0, -1.0, 0.5, 0.0, 2.0]
    est.fit(X, y)
    model = est.model_
    assert model.solver == ("sdca" if "SDCA" in type(est).__name__ else "pgs")
    coef = est.coef_ if est.coef_.ndim == 2 else est.coef_[None, :]
    np.testing.assert_array_equal(model.coef, coef)
    np.testing.assert_array_equal(model.intercept, est.intercept_)
    np.testing.assert_array_equal(model.predict(X), est.predict(X))
    # the value is what the estimator predicts with: NumPy's product of its weights
    np.testing.assert_allclose(model.decision_function(X).reshape(len(X), -1),
                               X @ coef.T + est.intercept_, rtol=1e-13)
    if hasattr(est, "predict_proba"):
        np.testing.assert_array_equal(model.predict_proba(X), est.predict_proba(X))


# ---- the label check ----------------------------------------------------------------------------
def test_the_label_check_is_numpy_membership():
    rng = np.random.RandomState(3)
    for _ in range(20):
        classes = np.unique(rng.randint(0, 6, 4))
        y = rng.randint(0, 6, 30)
        bad = np.flatnonzero(~np.array([label in set(classes) for label in y]))
        got = check_labels(y, classes)
        assert got == (None if not bad.size else (int(bad[0]), int(y[bad[0]])))


@pytest.mark.parametrize("est", [PGSClassifierLearner(random_state=0),
                                 SDCAClassifierLearner(random_state=0)])
def test_learners_name_the_row_of_an_unknown_label(est):
    X, y = _data()
    est.fit(X, y)
    if hasattr(est, "partial_fit"):
        with pytest.raises(ValueError, match=r"label 'maybe' \(row 4\) is not one of"):
            est.partial_fit(X[:6], np.where(np.arange(6) == 4, "maybe", y[:6]))
    with pytest.raises(ValueError, match=r"label 'maybe' \(row 4\) is not one of"):
        duality_gap(est, X[:6], np.where(np.arange(6) == 4, "maybe", y[:6]))


# ---- learners: the estimators' training without scikit-learn, bit for bit ------------------------
@pytest.mark.parametrize("pair", [(PGSClassifierLearner, PGSClassifier),
                                  (PGSRegressorLearner, PGSRegressor),
                                  (SDCAClassifierLearner, SDCAClassifier),
                                  (SDCARegressorLearner, SDCARegressor)])
def test_learners_train_the_estimators_models_bit_for_bit(pair):
    learner_cls, sklearn_cls = pair
    X, y = _data(classes=3)
    if not learner_cls._classifier:
        y = X @ [1.0, -1.0, 0.5, 0.0, 2.0]
    kw = dict(sigma=1e-2, random_state=0)
    a, b = learner_cls(**kw).fit(X, y), sklearn_cls(**kw).fit(X, y)
    assert issubclass(sklearn_cls, learner_cls)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    if hasattr(a, "partial_fit"):
        a.partial_fit(X[:50], y[:50])
        b.partial_fit(X[:50], y[:50])
        np.testing.assert_array_equal(a.coef_, b.coef_)
        assert a.online_stats_["progressive_loss"] == b.online_stats_["progressive_loss"]
    assert a.get_params() == b.get_params()


def test_learner_parameters_are_checked_in_scikit_learns_words():
    with pytest.raises(ValueError, match=r"The 'sigma' parameter of PGSClassifier must be a "
                                         r"str among \{'auto'\} or a float in the range "
                                         r"\(0, inf\)\. Got -1\.0 instead"):
        PGSClassifierLearner(sigma=-1.0).fit(*_data())
    with pytest.raises(ValueError, match="Invalid parameter 'sigmaa'"):
        PGSClassifierLearner().set_params(sigmaa=1.0)
    with pytest.raises(AttributeError, match="not fitted"):
        SDCARegressorLearner().predict([[1.0]])


def test_import_onlinepgs_imports_no_scikit_learn():
    code = ("import sys, onlinepgs\n"
            "assert not any(m.startswith('sklearn') for m in sys.modules)\n"
            "from onlinepgs.pgs import PGSClassifierLearner\n"
            "import onlinepgs.model_io, onlinepgs.duality, onlinepgs.cli, onlinepgs.sdca\n"
            "assert not any(m.startswith('sklearn') for m in sys.modules)\n"
            "from onlinepgs import PGSClassifier\n"
            "assert 'sklearn' in sys.modules and 'PGSClassifier' in onlinepgs.__all__\n"
            "assert set(onlinepgs.__all__) <= set(dir(onlinepgs))\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT,
                   env={**os.environ, "PYTHONPATH": ROOT})


# ---- SDCA models are first-class: model files, certificates --------------------------------------
def _same_attributes(a, b):
    keys = sorted(k for k in vars(a) if k.endswith("_"))
    assert keys == sorted(k for k in vars(b) if k.endswith("_"))
    for key in keys:
        x, y = getattr(a, key), getattr(b, key)
        if isinstance(x, list):
            assert len(x) == len(y)
            for u, v in zip(x, y):
                assert u.dtype == v.dtype
                np.testing.assert_array_equal(u, v)
        elif isinstance(x, np.ndarray):
            assert x.dtype == y.dtype, key
            np.testing.assert_array_equal(x, y)
        else:
            assert type(x) is type(y) and x == y, key


@pytest.mark.parametrize("case", ["binary", "multiclass", "regressor", "elastic_net"])
def test_sdca_models_round_trip_exactly(tmp_path, case):
    X, y = _data(classes=4 if case == "multiclass" else 2)
    if case in ("regressor", "elastic_net"):
        y = X @ [1.0, -1.0, 0.5, 0.0, 2.0]
        est = SDCARegressor(sigma=1e-2, l1=0.05 if case == "elastic_net" else 0.0,
                            random_state=0)
    else:
        est = SDCAClassifier(loss="smooth_hinge", sigma=1e-2, random_state=0)
    est.fit(X, y, sample_weight=np.linspace(0.5, 2.0, len(y)))
    path = tmp_path / "m.pgs"
    save_model(est, path, extra={"note": 1})
    loaded, header = load_model(path, return_header=True)
    assert type(loaded) is type(est) and header["estimator"] == type(est).__name__
    assert loaded.get_params() == est.get_params()
    _same_attributes(loaded, est)
    np.testing.assert_array_equal(loaded.coef_, est.coef_)
    np.testing.assert_array_equal(loaded.intercept_, est.intercept_)
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))
    learner = load_learner(path)
    assert type(learner).__name__ == type(est).__name__ + "Learner"
    _same_attributes(learner, est)
    # a parameter changed after fit would describe another model: refused, as for PGS
    est.set_params(sigma=1.0)
    with pytest.raises(ValueError, match="sigma=1.0 but the model was fitted with"):
        save_model(est, tmp_path / "other.pgs")


@pytest.mark.parametrize("loss", ["logistic", "squared_hinge", "squared", "huber"])
def test_duality_gap_certifies_sdca_models(loss):
    X, y = _data(classes=3)
    cls = SDCAClassifier
    if loss in ("squared", "huber"):
        y = X @ [1.0, -1.0, 0.5, 0.0, 2.0] + np.random.RandomState(0).randn(len(X))
        cls = SDCARegressor
    sw = np.random.RandomState(2).randint(1, 4, len(y)).astype(float)
    est = cls(loss=loss, sigma=1e-2, tol=1e-12, random_state=0).fit(X, y, sample_weight=sw)
    cert = duality_gap(est, X, y, sample_weight=sw)
    # the certificate's objective is SDCA's: the same P(w) at the optimum
    assert cert.primal == pytest.approx(np.sum(est.primal_objective_), rel=1e-10)
    assert -1e-12 <= cert.gap <= 1e-8 * cert.primal
    stream = duality_gap_stream(est, [(X[:40], y[:40], sw[:40]), (X[40:], y[40:], sw[40:])])
    assert stream.gap == pytest.approx(cert.gap, rel=1e-6, abs=1e-13)


@pytest.mark.parametrize("sigma", [1e-2, 0.0])
def test_duality_gap_certifies_l1_models_as_numpy_computes_it(sigma):
    """Squared loss, P(w) = sigma ||w||^2 / 2 + l1 ||w||_1 + sum_i c_i (<w, x_i> - y_i)^2 / W
    and D(s a) = -(1/W) sum_i c_i (s u_i y_i + s^2 u_i^2 / 4) - h*(s X1^T a / W) with
    u = loss' and h* = sum_j (|z_j| - l1)_+^2 / (2 sigma) (pure l_1: 0 on the feasible
    set), written here in NumPy; the intercept is a feature inside the l_1 term."""
    X, _ = _data(seed=8)
    rng = np.random.RandomState(9)
    y = X @ [1.0, -1.0, 0.0, 0.0, 2.0] + 0.3 * rng.randn(len(X))
    sw = rng.randint(1, 4, len(y)).astype(float)
    l1 = 0.05
    with _no_check():
        est = SDCARegressor(sigma=sigma, l1=l1, tol=1e-10, random_state=0).fit(
            X, y, sample_weight=sw)
    cert = duality_gap(est, X, y, sample_weight=sw)
    Xa = np.hstack([np.ones((len(y), 1)), X])
    w = np.concatenate([est.intercept_, est.coef_])
    W = sw.sum()
    primal = sigma * w @ w / 2 + l1 * np.abs(w).sum() + np.sum(sw * (Xa @ w - y) ** 2) / W
    assert cert.primal == pytest.approx(primal, rel=1e-12)
    assert cert.primal == pytest.approx(est.primal_objective_, rel=1e-12)
    u = 2 * (Xa @ w - y)
    s = float(cert.dual_scale[0])
    z = -Xa.T @ (sw * s * u) / W
    excess = np.maximum(np.abs(z) - l1, 0.0)
    if sigma:
        hstar = excess @ excess / (2 * sigma)
    else:
        assert np.abs(z).max() <= l1 * (1 + 1e-12)  # the scaled point is feasible
        hstar = 0.0
    dual = -np.sum(sw * (s * u * y + (s * u) ** 2 / 4)) / W - hstar
    assert cert.dual == pytest.approx(dual, rel=1e-9, abs=1e-13)
    # a lower bound on the optimum; near it for the elastic net (pure l_1's scaled a(w)
    # is a looser point: SDCA's own certificate, duality_gap_, is the tighter one there)
    assert cert.gap >= 0 and cert.dual <= est.primal_objective_
    if sigma:
        assert cert.gap <= 1e-6 * cert.primal


class _no_check:
    def __enter__(self):
        import warnings
        self.catcher = warnings.catch_warnings()
        self.catcher.__enter__()
        warnings.simplefilter("ignore")  # pure l_1 may stop on max_epochs: the test is
        return self                      # about the certificate of what it returns

    def __exit__(self, *exc):
        return self.catcher.__exit__(*exc)


def test_duality_gap_refuses_pure_l1_logistic_with_its_reason():
    X, y = _data()
    with _no_check():
        est = SDCAClassifier(sigma=0.0, l1=0.01, max_epochs=20, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="logistic loss with pure l_1"):
        duality_gap(est, X, y)


def test_dask_refuses_an_sdca_estimator():
    opd = pytest.importorskip("onlinepgs.dask")
    X, y = _data()
    with pytest.raises(TypeError, match="trains a PGSClassifier or PGSRegressor, got "
                                        "SDCAClassifier"):
        opd.fit(SDCAClassifier(), X, y)


# ---- sample weights: scikit-learn's convention -------------------------------------------------
def test_sdca_weights_solve_the_sum_normalised_objective_as_scipy_does():
    """P(w) = sigma ||w||^2 / 2 + sum_i c_i log(1 + exp(-y_i <w, x_i>)) / sum_i c_i,
    minimized by scipy's L-BFGS in NumPy (the intercept a regularized constant feature)."""
    X, y = _data(seed=4, m=80)
    signs = np.where(y == "yes", 1.0, -1.0)
    sw = np.random.RandomState(5).uniform(0.0, 3.0, len(y))
    sigma = 0.05
    Xa = np.hstack([np.ones((len(y), 1)), X])

    def objective(w):
        z = signs * (Xa @ w)
        value = sigma * w @ w / 2 + np.sum(sw * np.logaddexp(0.0, -z)) / sw.sum()
        grad = sigma * w - Xa.T @ (sw * signs / (1.0 + np.exp(z))) / sw.sum()
        return value, grad

    best = minimize(objective, np.zeros(Xa.shape[1]), jac=True, method="L-BFGS-B",
                    options={"ftol": 1e-16, "gtol": 1e-12, "maxiter": 10000})
    est = SDCAClassifier(sigma=sigma, tol=1e-13, random_state=0).fit(X, y, sample_weight=sw)
    w = np.concatenate([est.intercept_, est.coef_[0]])
    np.testing.assert_allclose(w, best.x, atol=1e-6)
    assert est.primal_objective_ == pytest.approx(best.fun, rel=1e-10)
    # scaling every weight by one factor changes nothing (the mean weight does not matter)
    scaled = SDCAClassifier(sigma=sigma, tol=1e-13, random_state=0).fit(X, y, sample_weight=7 * sw)
    np.testing.assert_allclose(scaled.coef_, est.coef_, atol=1e-9)


def test_pgs_weights_scale_a_steps_gradient_and_target_the_row_mean_objective():
    """A PGS step's gradient is c_i times the loss's: PGS minimizes sigma r(w) +
    (1/m) sum_i c_i l_i, the sum-normalised objective only when the mean weight is 1.
    With weights 2 everywhere PGS's model is that of sigma / 2 without weights."""
    X, y = _data(seed=6)
    kw = dict(loss="logistic", iterate="last", radius=None, max_epochs=3, random_state=0)
    doubled = PGSClassifier(sigma=0.02, **kw).fit(X, y, sample_weight=np.full(len(y), 2.0))
    halved = PGSClassifier(sigma=0.01, **kw).fit(X, y)
    np.testing.assert_allclose(doubled.coef_, halved.coef_, rtol=1e-12)
