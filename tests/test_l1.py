"""l1 in PGS (issue 36, item 1): the parameter, the command's --l1, model files, Dask's
refusal, and the certificate of ``sigma r(w) + l1 ||w||_1 + mean loss`` at every p, on R^n
and on the ball.

Yardsticks, all independent of the package: scipy's optima of the same objective
(L-BFGS-B on the split w = w+ - w-, SLSQP on the ball), scipy's numerical supremum for the
conjugate of the regularizer, scikit-learn's ``LogisticRegression(penalty="elasticnet")``
and ``ElasticNet`` with the parameter mapping derived below, and the soft-threshold rule
of composite dual averaging (Xiao 2010) computed in NumPy from the solver's lambda.
"""
import json

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize

from onlinepgs import PGSClassifier, PGSRegressor, duality_gap, load_model, save_model
from onlinepgs._core import PGSState
from onlinepgs.duality import gap_of_weights
from onlinepgs.model import LinearModel
from onlinepgs.pgs import PGSClassifierLearner

import reference
from test_cli import run, write_svmlight


def _core_has_l1():
    try:
        PGSState(l1=0.1)
    except TypeError:
        return False
    return True


# the training tests need the compiled core's l1 (branch l1core); the surface, the
# certificate and the refusals do not
needs_core = pytest.mark.skipif(not _core_has_l1(),
                                reason="the compiled core has no l1 yet (PGSState(l1=...))")


def core_takes(p, iterate="last"):
    """Skip a training test at a p (and iterate) the core's l1 refuses (p < 2 keeps the last
    iterate only: it says so in a ValueError); the certificate's tests cover every p."""
    try:
        PGSState(l1=0.1, p=p, iterate=iterate)
    except ValueError as exc:
        pytest.skip(f"the core's l1 refuses p={p}: {exc}")


# ---- the yardstick, in NumPy and scipy ------------------------------------------------------
def np_objective(w, X, y, loss, p, sigma, l1, radius=None):
    """P(w) = sigma ||w||_p^2 / (2 (p - 1)) + l1 ||w||_1 + mean loss (+inf off the ball)."""
    norm_p = np.sum(np.abs(w) ** p) ** (1 / p)
    if radius is not None and norm_p > radius * (1 + 1e-9):
        return np.inf
    return (sigma * norm_p**2 / (2 * (p - 1)) + l1 * np.abs(w).sum()
            + reference.loss_value(loss, X @ w, y).mean())


def scipy_optimum(X, y, loss, p, sigma, l1, radius=None):
    """min P over R^n (L-BFGS-B) or the l_p ball (SLSQP), on w = w+ - w- with w+-, >= 0:
    smooth in (w+, w-) for p > 1 and the smooth losses."""
    n = X.shape[1]

    def split(x):
        return x[:n] - x[n:]

    def value(x):
        w = split(x)
        norm_p = np.sum(np.abs(w) ** p) ** (1 / p)
        grad_r = (norm_p ** (2 - p) * np.abs(w) ** (p - 1) * np.sign(w) / (p - 1)
                  if norm_p > 0 else 0 * w)
        d = reference.loss_derivative(loss, X @ w, y) / X.shape[0]
        g = sigma * grad_r + X.T @ d
        f = (sigma * norm_p**2 / (2 * (p - 1)) + l1 * x.sum()
             + reference.loss_value(loss, X @ w, y).mean())
        return f, np.concatenate([g + l1, -g + l1])

    x0 = np.zeros(2 * n)
    bounds = [(0, None)] * (2 * n)
    if radius is None:
        res = minimize(value, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                       options={"ftol": 1e-16, "gtol": 1e-12, "maxiter": 20000})
    else:
        ball = {"type": "ineq",
                "fun": lambda x: radius**p - np.sum(np.abs(split(x)) ** p)}
        res = minimize(value, x0, jac=True, method="SLSQP", bounds=bounds,
                       constraints=[ball], options={"ftol": 1e-15, "maxiter": 2000})
    w = split(res.x)
    return w, np_objective(w, X, y, loss, p, sigma, l1, radius)


def scipy_hstar(z, p, sigma, l1, radius=None):
    """h*(z) = sup_{w in S} <z, w> - sigma r(w) - l1 ||w||_1, numerically."""
    n = z.shape[0]

    def neg(x):
        w = x[:n] - x[n:]
        norm_p = np.sum(np.abs(w) ** p) ** (1 / p)
        grad_r = (norm_p ** (2 - p) * np.abs(w) ** (p - 1) * np.sign(w) / (p - 1)
                  if norm_p > 0 else 0 * w)
        f = z @ w - sigma * norm_p**2 / (2 * (p - 1)) - l1 * x.sum()
        g = z - sigma * grad_r
        return -f, -np.concatenate([g - l1, -g - l1])

    x0 = np.zeros(2 * n)
    bounds = [(0, None)] * (2 * n)
    if radius is None:
        res = minimize(neg, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                       options={"ftol": 1e-16, "gtol": 1e-13, "maxiter": 20000})
    else:
        ball = {"type": "ineq",
                "fun": lambda x: radius**p - np.sum(np.abs(x[:n] - x[n:]) ** p)}
        res = minimize(neg, x0, jac=True, method="SLSQP", bounds=bounds,
                       constraints=[ball], options={"ftol": 1e-15, "maxiter": 2000})
    return -res.fun


def problem(loss="logistic", m=80, n=6, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(m, n) / np.sqrt(n)
    w = np.zeros(n)
    w[:2] = [3.0, -2.0]  # two informative features, the rest noise: l1 zeroes them
    if loss == "logistic":
        y = np.where(X @ w + 0.3 * rng.randn(m) > 0, 1.0, -1.0)
    else:
        y = X @ w + 0.1 * rng.randn(m)
    return X, y


GRID = [(2.0, None), (1.5, None), (2.0, 0.8), (1.5, 0.8)]


# ---- the certificate (pure NumPy: no compiled l1 needed) --------------------------------------
@pytest.mark.parametrize("p, radius", GRID)
def test_the_l1_dual_term_is_the_numerical_conjugate(p, radius):
    """With scale_dual=False the dual is D(a(w)) = -mean l*(u_i) - h*(X^T a / m): its h*
    (the soft threshold then r_S*) equals scipy's supremum of <z, w> - sigma r(w) -
    l1 ||w||_1 over S, at a point where some coordinates are above the threshold and
    some below."""
    X, y = problem()
    sigma, l1 = 0.05, 0.04
    w = np.array([1.0, -0.7, 0.2, 0.0, -0.1, 0.05])
    cert = gap_of_weights(w, 0.0, X, y, loss="logistic", p=p, sigma=sigma, l1=l1,
                          radius=radius, fit_intercept=False, scale_dual=False)
    u = reference.loss_derivative("logistic", X @ w, y)
    z = -X.T @ u / X.shape[0]
    assert np.sum(np.abs(z) > l1) >= 2 and np.sum(np.abs(z) <= l1) >= 1
    conj = reference.loss_conjugate("logistic", u, y).mean()
    expected = -conj - scipy_hstar(z, p, sigma, l1, radius)
    assert cert.dual == pytest.approx(expected, rel=1e-7, abs=1e-9)
    assert cert.primal == pytest.approx(np_objective(w, X, y, "logistic", p, sigma, l1,
                                                     radius), rel=1e-12)


@pytest.mark.parametrize("loss", ["logistic", "squared"])
@pytest.mark.parametrize("p, radius", GRID)
def test_the_l1_certificate_bounds_the_true_suboptimality(loss, p, radius):
    """gap >= P(w) - P(w*) >= 0 for points near and far from scipy's optimum, and at the
    optimum itself the gap is ~0 (a smooth loss: a(w*) is the dual optimum)."""
    X, y = problem(loss)
    sigma, l1 = 0.05, 0.04
    if loss == "squared" and radius is not None:
        radius = 2.0  # the squared loss's optimum lies further out: keep the ball active
    w_star, p_star = scipy_optimum(X, y, loss, p, sigma, l1, radius)
    assert np.sum(np.abs(w_star) < 1e-8) >= 1  # l1 zeroes the noise features
    if radius is not None:
        assert np.sum(np.abs(w_star) ** p) ** (1 / p) == pytest.approx(radius, rel=1e-6)
    rng = np.random.RandomState(1)
    for shift in (0.0, 0.01, 0.3):
        w = w_star + shift * rng.randn(w_star.shape[0])
        if radius is not None:  # stay in the ball: P is +inf outside
            w *= min(1.0, radius / np.sum(np.abs(w) ** p) ** (1 / p))
        cert = gap_of_weights(w, 0.0, X, y, loss=loss, p=p, sigma=sigma, l1=l1,
                              radius=radius, fit_intercept=False)
        sub = np_objective(w, X, y, loss, p, sigma, l1, radius) - p_star
        assert sub >= -1e-9
        assert cert.gap >= sub - 1e-9
        if shift == 0.0:
            assert cert.gap < 1e-6
    far = gap_of_weights(w_star + 0.3, 0.0, X, y, loss=loss, p=p, sigma=sigma, l1=l1,
                         radius=None, fit_intercept=False)
    assert far.gap > 1e-3  # and it is no constant: a poor point has a visible gap


def test_the_l1_certificate_of_the_plain_case_is_sdca_s_closed_form():
    """p = 2 on R^n keeps the closed form sum_j (|z_j| - l1)_+^2 / (2 sigma) (SDCA's
    section 3.1 path), written out here."""
    X, y = problem()
    sigma, l1 = 0.05, 0.04
    w = np.array([1.0, -0.7, 0.2, 0.0, -0.1, 0.05])
    cert = gap_of_weights(w, 0.0, X, y, loss="logistic", sigma=sigma, l1=l1,
                          fit_intercept=False, scale_dual=False)
    u = reference.loss_derivative("logistic", X @ w, y)
    z = np.abs(X.T @ u / X.shape[0])
    expected = (-reference.loss_conjugate("logistic", u, y).mean()
                - np.sum(np.maximum(z - l1, 0) ** 2) / (2 * sigma))
    assert cert.dual == pytest.approx(expected, rel=1e-12)


def test_bad_l1_of_the_certificate_is_refused():
    X, y = problem()
    for bad in (-0.1, float("nan"), float("inf"), "x"):
        with pytest.raises(ValueError, match="l1 must be"):
            gap_of_weights(np.zeros(6), 0.0, X, y, loss="logistic", sigma=0.1, l1=bad)


def test_a_model_value_with_l1_at_p_below_2_on_the_ball_is_certified():
    """The refusal of l1 with p != 2 or a radius is lifted: a LinearModel with l1 at
    p = 1.5 on a ball is certified, the same as gap_of_weights on its weights."""
    X, y = problem()
    w = np.array([[0.9, -0.6, 0.0, 0.0, 0.1, 0.0]])
    model = LinearModel(w, [0.2], classes=[-1.0, 1.0], loss="logistic", p=1.5, sigma=0.05,
                        l1=0.04, radius=2.0)
    cert = duality_gap(model, X, y)
    expected = gap_of_weights(w, 0.2, X, y, loss="logistic", p=1.5, sigma=0.05, l1=0.04,
                              radius=2.0)
    assert cert.gap == pytest.approx(expected.gap, rel=1e-12)
    assert cert.gap > 0


# ---- the estimators -------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [PGSClassifier, PGSRegressor, PGSClassifierLearner])
@pytest.mark.parametrize("bad", [-0.1, float("nan"), float("inf"), "0.1", None])
def test_bad_l1_is_refused_before_training(cls, bad):
    X, y = problem()
    with pytest.raises(ValueError, match="l1"):
        cls(l1=bad, sigma=0.1).fit(X, (y > 0).astype(int))


def test_l1_is_a_parameter_of_every_pgs_estimator():
    for cls in (PGSClassifier, PGSRegressor):
        est = cls()
        assert est.get_params()["l1"] == 0.0
        assert cls(l1=0.5).get_params()["l1"] == 0.5
        assert "l1=0.5" in repr(cls(l1=0.5))


def test_dask_refuses_l1_in_one_line():
    """onlinepgs.dask refuses l1 > 0 (the merged rounds would not be one process's
    sparse model) before touching any data."""
    pytest.importorskip("dask")
    import dask.array as da
    import onlinepgs.dask as opd

    X, y = problem()
    with pytest.raises(ValueError, match=r"^onlinepgs.dask does not train an l_1 term "
                                         r"\(l1=0.01\)[^\n]*$"):
        opd.fit(PGSClassifier(l1=0.01, sigma=0.1), da.from_array(X, chunks=40), y)


def sklearn_logistic_objective(X, y, sigma, l1):
    """scikit-learn's elastic-net logistic regression at the optimum of ours.

    Ours: sigma ||w||^2 / 2 + l1 ||w||_1 + (1/m) sum_i log(1 + exp(-y_i <w, x_i>)).
    Theirs: (1 - rho) ||w||^2 / 2 + rho ||w||_1 + C sum_i log(...). Multiplying ours by
    C m: C m sigma = 1 - rho and C m l1 = rho, so C = 1 / (m (sigma + l1)) and
    rho = l1 / (sigma + l1)."""
    from sklearn.linear_model import LogisticRegression

    m = X.shape[0]
    lr = LogisticRegression(penalty="elasticnet", solver="saga", l1_ratio=l1 / (sigma + l1),
                            C=1.0 / (m * (sigma + l1)), fit_intercept=False, tol=1e-12,
                            max_iter=100_000).fit(X, y)
    return lr.coef_.ravel()


@needs_core
def test_the_classifier_reaches_scikit_learn_s_elastic_net_optimum():
    """PGSClassifier(l1) after many passes is near scikit-learn's optimum of the same
    objective: objective values within 1e-4 and the same support where it matters."""
    X, y = problem(m=200)
    sigma, l1 = 0.05, 0.03
    ref = sklearn_logistic_objective(X, y, sigma, l1)
    p_ref = np_objective(ref, X, y, "logistic", 2.0, sigma, l1)
    clf = PGSClassifier(sigma=sigma, l1=l1, radius=None, fit_intercept=False,
                        max_epochs=200, random_state=0).fit(X, y)
    w = clf.coef_.ravel()
    assert np_objective(w, X, y, "logistic", 2.0, sigma, l1) - p_ref < 1e-4
    assert np.all(ref[np.abs(ref) > 0.05] * w[np.abs(ref) > 0.05] > 0)
    np.testing.assert_allclose(w, ref, atol=0.02)


@needs_core
def test_the_regressor_reaches_scikit_learn_s_elastic_net():
    """PGSRegressor(loss="squared", l1) against ElasticNet. Ours: sigma ||w||^2 / 2 +
    l1 ||w||_1 + (1/m) sum (z - y)^2; halved: (1/2m) sum (z - y)^2 + (sigma/2) ||w||^2 / 2
    + (l1/2) ||w||_1 = ElasticNet's with alpha rho = l1 / 2, alpha (1 - rho) = sigma / 2."""
    from sklearn.linear_model import ElasticNet

    X, y = problem("squared", m=200)
    sigma, l1 = 0.05, 0.06
    alpha = (sigma + l1) / 2
    ref = ElasticNet(alpha=alpha, l1_ratio=l1 / (sigma + l1), fit_intercept=False,
                     tol=1e-14, max_iter=100_000).fit(X, y).coef_
    assert np.sum(ref == 0) >= 2
    p_ref = np_objective(ref, X, y, "squared", 2.0, sigma, l1)
    reg = PGSRegressor(sigma=sigma, l1=l1, fit_intercept=False, max_epochs=200,
                       random_state=0).fit(X, y)
    assert np_objective(reg.coef_, X, y, "squared", 2.0, sigma, l1) - p_ref < 1e-4
    np.testing.assert_allclose(reg.coef_, ref, atol=0.02)


def composite_dual_averaging(X, y, p, sigma, l1, radius):
    """PGS's steps with the l_1 term, transcribed (Xiao 2010's regularized dual averaging
    with r + (l1/sigma) ||.||_1): w_t = grad r_S*(soft(lambda / ((t+1) sigma), l1 / sigma)),
    O(n) per row; the list of iterates w_1..w_T."""
    lam, w, iterates = np.zeros(X.shape[1]), np.zeros(X.shape[1]), []
    for t, (x, label) in enumerate(zip(X, y), start=1):
        lam -= reference.loss_derivative("logistic", x @ w, label) * x
        theta = lam / ((t + 1) * sigma)
        w = reference.grad_rstar(np.sign(theta) * np.maximum(np.abs(theta) - l1 / sigma, 0),
                                 p, radius)
        iterates.append(w[:, None].copy())
    return iterates


@needs_core
@pytest.mark.parametrize("iterate", ["last", "weighted2", "average"])
@pytest.mark.parametrize("p, radius", [(2.0, None), (1.5, None), (2.0, 0.5), (1.5, 0.5)])
def test_the_steps_are_composite_dual_averaging(p, radius, iterate):
    """One pass in order: coef_ and intercept_ are the transcription's iterate (its
    average for the averaged iterates), the intercept's constant feature thresholded like
    every coordinate."""
    core_takes(p, iterate)
    X, y = problem(m=120)
    sigma, l1 = 0.05, 0.02
    clf = PGSClassifierLearner(sigma=sigma, l1=l1, p=p, radius=radius, iterate=iterate,
                               shuffle=False).partial_fit(X, y, classes=[-1.0, 1.0])
    Xa = np.hstack([np.ones((X.shape[0], 1)), X])
    iterates = composite_dual_averaging(Xa, y, p, sigma, l1, radius)
    last = iterates[-1][:, 0]
    # an average is reported on the last iterate's support: l1 selects the features (the
    # intercept, entry 0, keeps its average), the average gives the values
    keep = last != 0.0
    keep[0] = True
    expected = np.where(keep, reference.combine(iterates, iterate)[:, 0], 0.0)
    got = np.concatenate([clf.intercept_, clf.coef_.ravel()])
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(got[1:] == 0, last[1:] == 0)
    assert np.sum(last == 0) >= 1
    if iterate != "last":  # the plain average is zero on fewer coordinates
        assert np.sum(reference.combine(iterates, iterate)[:, 0] == 0) < np.sum(last == 0)


@needs_core
@pytest.mark.parametrize("p", [2.0, 1.5])
def test_zeros_exactly_where_the_threshold_says(p):
    """The last iterate is grad r*(soft(lambda / ((t+1) sigma), l1 / sigma)): weight j is
    exactly 0 iff |lambda_j| <= (t + 1) l1, and otherwise has lambda_j's sign."""
    core_takes(p)
    rng = np.random.RandomState(0)
    X = sp.random(300, 200, density=0.05, random_state=rng, format="csr")
    y = np.where(X @ rng.randn(200) > 0, 1, 0)
    l1 = 0.002
    clf = PGSClassifier(sigma=0.01, l1=l1, p=p, radius=None, iterate="last",
                        max_epochs=3, random_state=0).fit(X, y)
    state = clf._state
    lam = np.asarray(state.lam_a)[:, 0] * np.asarray(state.scale_a)[0]
    w = np.asarray(state.weights("last"))[:, 0]
    above = np.abs(lam) > (state.t + 1) * l1
    assert 0 < above.sum() < above.size  # both kinds of coordinate
    np.testing.assert_array_equal(w != 0, above)
    assert np.all(np.sign(w[above]) == np.sign(lam[above]))


@needs_core
@pytest.mark.parametrize("p, radius", [(2.0, None), (1.5, None), (2.0, 0.6), (1.5, 0.6)])
def test_the_certificate_of_a_trained_l1_model(p, radius):
    """A long run's model: gap >= P(w) - P(w*) >= 0 (scipy's optimum) and the gap is
    small, at p = 2 and 1.5, on R^n and on the ball."""
    core_takes(p)
    X, y = problem(m=200)
    sigma, l1 = 0.05, 0.03
    clf = PGSClassifier(sigma=sigma, l1=l1, p=p, radius=radius, fit_intercept=False,
                        max_epochs=300, random_state=0,
                        iterate="weighted2" if p == 2 else "last").fit(X, y)
    cert = duality_gap(clf, X, y)
    _, p_star = scipy_optimum(X, y, "logistic", p, sigma, l1, radius)
    sub = cert.primal - p_star
    assert cert.primal == pytest.approx(
        np_objective(clf.coef_.ravel(), X, y, "logistic", p, sigma, l1, radius), rel=1e-10)
    assert -1e-8 <= sub <= cert.gap + 1e-9
    assert cert.gap < 2e-4


@needs_core
def test_sigma_auto_races_with_l1_and_partial_fit_keeps_it(tmp_path):
    """sigma="auto": every run of the race (forks included) has the model's l1; the model
    is sparse; a partial_fit continues with it; l1 changed since is refused; the model file
    keeps it."""
    rng = np.random.RandomState(0)
    X = sp.random(3000, 400, density=0.02, random_state=rng, format="csr")
    y = np.where(X @ np.where(rng.rand(400) < 0.1, rng.randn(400), 0) > 0, 1, 0)
    # the last iterate: an average is zero only where every averaged iterate was
    clf = PGSClassifier(l1=1e-3, iterate="last", random_state=0, max_epochs=2).fit(X, y)
    assert clf._state.config()["l1"] == 1e-3
    assert clf.sigma_path_  # a race ran
    assert np.sum(clf.coef_ != 0) < 0.5 * clf.coef_.size
    assert clf.model_.l1 == 1e-3
    stream = PGSClassifier(l1=1e-3, iterate="last", random_state=0)
    stream.partial_fit(X[:1500], y[:1500], classes=[0, 1])
    for state in stream._race.states.values():
        assert state.config()["l1"] == 1e-3
    stream.partial_fit(X[1500:], y[1500:])
    stream.set_params(l1=0.0)
    with pytest.raises(ValueError, match=r"\['l1'\] changed"):
        stream.partial_fit(X[:10], y[:10])
    stream.set_params(l1=1e-3)
    save_model(stream, tmp_path / "m.pgs")
    back = load_model(tmp_path / "m.pgs")
    assert back.l1 == 1e-3
    np.testing.assert_array_equal(back.decision_function(X), stream.decision_function(X))
    back.partial_fit(X[:100], y[:100])  # the race and l1 go on


def test_model_files_omit_l1_at_zero(tmp_path):
    """l1 = 0 is not written (the files older versions read); SDCA's l1, older, is."""
    from onlinepgs import SDCAClassifier
    from onlinepgs.model_io import read_header

    X, y = problem()
    save_model(PGSClassifier(sigma=0.1).fit(X, y), tmp_path / "pgs.pgs")
    header = read_header(tmp_path / "pgs.pgs")
    assert "l1" not in header["params"] and "l1" not in header["attributes"]["_state_params"]
    assert load_model(tmp_path / "pgs.pgs").l1 == 0.0
    save_model(SDCAClassifier(sigma=0.1).fit(X, y), tmp_path / "sdca.pgs")
    assert read_header(tmp_path / "sdca.pgs")["params"]["l1"] == 0.0


# ---- the command ---------------------------------------------------------------------------
@pytest.mark.parametrize("value, says", [
    ("-1", "argument --l1 must be a float in the range [0, inf). Got -1.0 instead."),
    ("nan", "argument --l1 must be a float in the range [0, inf). Got nan instead."),
    ("inf", "argument --l1 must be finite, got inf."),
    ("abc", "argument --l1: expected a number, got 'abc'")])
def test_bad_l1_on_the_command_is_a_one_line_error(tmp_path, value, says):
    path = tmp_path / "d.svm"
    write_svmlight(path, n=50)
    done = run("train", path, f"--l1={value}")
    err = done.stderr.decode().strip().splitlines()
    assert done.returncode == 2
    assert err[-1].endswith(says)
    assert "Traceback" not in done.stderr.decode()


def test_the_command_refuses_l1_where_it_is_not_available(tmp_path):
    path = tmp_path / "d.svm"
    write_svmlight(path, n=50)
    done = run("train", path, "--l1", "0.01", "--scheduler", "threads", "--sigma", "0.1")
    assert done.returncode == 2
    assert done.stderr.decode().strip().splitlines()[-1] == (
        "onlinepgs train: error: argument --l1: --scheduler does not train an l_1 term "
        "(--l1 0.01): the lanes' soft thresholds do not merge into one process's sparse "
        "model; train with --l1 0, or without --scheduler")
    done = run("train", path, "--l1", "0.01", "--solver", "sdca", "--p", "1.5")
    assert done.returncode == 2
    assert "argument --l1: --solver sdca with an l_1 term (--l1 0.01) needs --p 2 " \
        "(Prox-SDCA), got --p 1.5" in done.stderr.decode()
    assert "--l1" in run("train", "--help").stdout.decode()


def test_sdca_on_the_command_takes_l1(tmp_path):
    """--solver sdca --l1 trains SDCA's l_1 path (section 3.1): sparser than without, and
    `gap` certifies the file's objective (l1 included) at SDCA's tolerance."""
    path, model = tmp_path / "d.svm", tmp_path / "m.pgs"
    write_svmlight(path, n=400, n_features=50)
    nonzeros = []
    for l1 in ("0", "0.01"):
        done = run("train", path, "-o", model, "--solver", "sdca", "--sigma", "0.01",
                   "--l1", l1, "--quiet")
        assert done.returncode == 0, done.stderr.decode()
        est = load_model(model)
        assert est.l1 == float(l1)
        nonzeros.append(int(np.sum(est.coef_ != 0)))
    assert nonzeros[1] < nonzeros[0]
    assert "l1=0.01" in run("info", model).stdout.decode()
    done = run("gap", model, path, "--json")
    assert json.loads(done.stdout)["relative_gap"] < 1e-5


def test_continuing_a_model_keeps_its_l1(tmp_path):
    """-i MODEL keeps the model's l1: a different --l1 is named as ignored."""
    path, model = tmp_path / "d.svm", tmp_path / "m.pgs"
    write_svmlight(path, n=200)
    assert run("train", path, "-o", model, "--sigma", "0.01", "--quiet").returncode == 0
    done = run("train", path, "-i", model, "-o", model, "--l1", "0.5", "--quiet")
    assert done.returncode == 0, done.stderr.decode()
    assert "--l1 0.5 (the model's: 0.0)" in done.stderr.decode()
    assert load_model(model).l1 == 0.0


@needs_core
def test_train_info_gap_predict_with_l1(tmp_path):
    """train --l1 end to end: info shows l1, the model is sparser than without, gap
    certifies it (the same as duality_gap on the loaded model), predict agrees with the
    weights."""
    path, model, plain = tmp_path / "d.svm", tmp_path / "m.pgs", tmp_path / "p.pgs"
    write_svmlight(path, n=2000, n_features=300)
    for out, extra in ((model, ["--l1", "0.001"]), (plain, [])):
        done = run("train", path, "-o", out, "--sigma", "1e-3", "--passes", "3", "--quiet",
                   "--iterate", "last", *extra)
        assert done.returncode == 0, done.stderr.decode()
    info = run("info", model).stdout.decode()
    assert "l1=0.001" in info
    assert "l1=" not in run("info", plain).stdout.decode()
    est, ref = load_model(model), load_model(plain)
    assert np.sum(est.coef_ != 0) < 0.7 * np.sum(ref.coef_ != 0)  # 180 of 300 here
    done = run("gap", model, path, "--json")
    assert done.returncode == 0, done.stderr.decode()
    cert = json.loads(done.stdout)
    from onlinepgs import load_svmlight
    X, y = load_svmlight(str(path))
    expected = duality_gap(est, X, y)
    assert cert["gap"] == pytest.approx(expected.gap, rel=1e-9)
    assert cert["primal"] == pytest.approx(
        np_objective(np.concatenate([est.intercept_, est.coef_.ravel()]),
                     np.hstack([np.ones((X.shape[0], 1)), X.toarray()[:, :est.coef_.shape[1]]]),
                     y, "logistic", 2.0, 1e-3, 1e-3), rel=1e-9)
    done = run("predict", model, path, "--kind", "scores")
    scores = np.array(done.stdout.decode().split(), dtype=float)
    np.testing.assert_allclose(scores, est.decision_function(X), rtol=1e-6, atol=1e-9)
