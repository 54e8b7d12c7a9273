"""Prox-SDCA section 3.2 (pure l_1 with the l_q smoothing, `l1_geometry`): grad g* against a
NumPy transcription of the paper's equations 10-11 and scipy's minimize, the solutions
against scikit-learn's Lasso and LogisticRegression(penalty="l1"), the certificate against
the true suboptimality, the "auto" rule on both kinds of rows, model files and the command."""
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize
from sklearn.datasets import dump_svmlight_file
from sklearn.linear_model import Lasso, LogisticRegression

from onlinepgs import SDCAClassifier, SDCARegressor, duality_gap
from onlinepgs._core._sdca import SDCAProblem
from onlinepgs.model_io import load_model, save_model

EXE = [sys.executable, "-m", "onlinepgs.cli"]


def dense_sign_rows(m, d, seed=0, k=5):
    """The paper's case: entries +-1 (||x||_inf = 1) in every column, so ||x||_2^2 = d is
    large against 3 ln d; labels from a k-sparse w."""
    rng = np.random.RandomState(seed)
    X = rng.choice([-1.0, 1.0], size=(m, d))
    w = np.zeros(d)
    w[:k] = rng.uniform(0.5, 1.5, k) * rng.choice([-1, 1], k)
    return X, X @ w + 0.3 * rng.randn(m)


def soft(v, c):
    return np.sign(v) * np.maximum(np.abs(v) - c, 0.0)


def paper_grad_gstar(v, K, c, p):
    """004 eqs. 10-11 for g(w) = (K/2)||w||_p^2 + c||w||_1 (the paper: K = 3 ln d, its q is
    our p): w_i = sgn(v_i) (a (|v_i| - c))^(1/(p-1)) on |v_i| > c, with
    a = ((1/K) (sum_i (|v_i| - c)_+^(p/(p-1)))^((p-2)/p))^(p-1)."""
    ex = np.maximum(np.abs(v) - c, 0.0)
    if not ex.any():
        return np.zeros_like(v)
    a = ((1.0 / K) * np.sum(ex ** (p / (p - 1.0))) ** ((p - 2.0) / p)) ** (p - 1.0)
    return np.sign(v) * (a * ex) ** (1.0 / (p - 1.0))


def lq_problem(X, y, loss, l1, alpha0=None, fit_intercept=False):
    Xc = sp.csr_matrix(X)
    return SDCAProblem(Xc.data, Xc.indices, Xc.indptr, X.shape[1], y, np.ones(len(y)),
                       loss=loss, sigma=0.0, l1=l1, fit_intercept=fit_intercept,
                       alpha0=alpha0, l1_geometry="lq")


def l1_objective(X, y, w, l1, loss="squared"):
    z = X @ w
    if loss == "squared":
        mean = np.mean((z - y) ** 2)
    else:
        mean = np.mean(np.logaddexp(0.0, -y * z))
    return mean + l1 * np.abs(w).sum()


# ---- grad g* ---------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_grad_gstar_matches_the_papers_equations(seed):
    # a dual point alpha0: the core's w = grad g*(v), v = X^T alpha / (lam m), must be
    # eqs. 10-11 with K = 1 / (p - 1) (r(w) = ||w||_p^2 / (2 (p - 1))) and c = l1 / lam
    rng = np.random.RandomState(seed)
    X, y = dense_sign_rows(60, 40, seed)
    prob = lq_problem(X, y, "squared", l1=0.05, alpha0=rng.randn(60) * 3)
    assert prob.l1_geometry == "lq"
    d = 40  # the columns the rows reach (no intercept)
    p = np.log(d) / (np.log(d) - 1.0)
    assert prob.p == pytest.approx(p)
    v = prob.v_vector[1:]
    c = prob.l1 / prob.sigma
    w = prob.weights()[1:]
    expected = paper_grad_gstar(v, 1.0 / (p - 1.0), c, p)
    assert np.count_nonzero(expected) not in (0, d)  # both branches of eq. 10 are used
    np.testing.assert_allclose(w, expected, rtol=1e-9, atol=1e-14)
    assert np.array_equal(w == 0, np.abs(v) <= c)  # zeros exactly where the threshold says
    # and the paper's own scaling: (3 ln d / 2)||w||_p^2 at lam' = lam / (3 ln d (p - 1))
    lam_paper = prob.sigma / (3 * np.log(d) * (p - 1.0))
    np.testing.assert_allclose(paper_grad_gstar(v * prob.sigma / lam_paper, 3 * np.log(d),
                                                prob.l1 / lam_paper, p), w, rtol=1e-9,
                               atol=1e-14)


@pytest.mark.parametrize("seed", [0, 1])
def test_grad_gstar_maximizes_theta_w_minus_g(seed):
    # grad g*(theta) = argmax_w <theta, w> - g(w): scipy's minimize on the split w = a - b
    rng = np.random.RandomState(seed)
    d = 12
    p = np.log(d) / (np.log(d) - 1.0)
    K, c = 1.0 / (p - 1.0), 0.3
    theta = rng.randn(d)

    def neg(ab):
        w = ab[:d] - ab[d:]
        norm = np.sum(np.abs(w) ** p) ** (1.0 / p)
        return -(theta @ w) + 0.5 * K * norm ** 2 + c * ab.sum()

    res = minimize(neg, np.full(2 * d, 0.01), method="L-BFGS-B",
                   bounds=[(0, None)] * (2 * d), options=dict(ftol=1e-15, gtol=1e-12,
                                                               maxiter=20000))
    w_scipy = res.x[:d] - res.x[d:]
    w = paper_grad_gstar(theta, K, c, p)
    assert neg(np.concatenate([np.maximum(w, 0), np.maximum(-w, 0)])) <= res.fun + 1e-10
    np.testing.assert_allclose(w, w_scipy, atol=2e-4)
    # the core on a problem whose v is theta: one row per coordinate (X = I), alpha = theta
    Xc = sp.identity(d, format="csr")
    prob = SDCAProblem(Xc.data, Xc.indices, Xc.indptr, d, np.zeros(d), np.ones(d),
                       loss="squared", sigma=0.0, l1=1.0, fit_intercept=False,
                       alpha0=theta, l1_geometry="lq")
    v = prob.v_vector[1:]
    np.testing.assert_allclose(prob.weights()[1:],
                               paper_grad_gstar(v, K, prob.l1 / prob.sigma, p), rtol=1e-9)


# ---- solutions ---------------------------------------------------------------------------
def test_lq_solves_the_lasso():
    # our P1 = mean (z - y)^2 + l1 ||w||_1 is twice Lasso's (1/(2m))||y - Xw||^2 + a||w||_1
    # at l1 = 2a: the same minimizer
    X, y = dense_sign_rows(400, 60, seed=3)
    a = 0.25
    lasso = Lasso(alpha=a, fit_intercept=False, tol=1e-14, max_iter=200000).fit(X, y)
    best = l1_objective(X, y, lasso.coef_, 2 * a)
    reg = SDCARegressor(sigma=0.0, l1=2 * a, fit_intercept=False, tol=1e-5,
                        l1_geometry="lq", random_state=0).fit(X, y)
    assert reg.l1_geometry_ == "lq"
    mine = l1_objective(X, y, reg.coef_, 2 * a)
    assert mine == pytest.approx(reg.primal_objective_, rel=1e-10)
    # certified: P1(w) - P1* <= gap <= tol P1(w), and Lasso's optimum agrees
    assert reg.duality_gap_ <= 1e-5 * reg.primal_objective_
    assert mine - best <= reg.duality_gap_ + 1e-12
    assert best - mine <= 1e-9 * best
    # (2/m) X^T X has its smallest eigenvalue near 2 (1 - sqrt(60/400))^2 = 0.7, so
    # ||w - w*||^2 <= 2 gap / 0.7: a few 1e-3
    np.testing.assert_allclose(reg.coef_, lasso.coef_, atol=1e-2)
    assert abs(np.count_nonzero(reg.coef_) - np.count_nonzero(lasso.coef_)) <= 3
    # the package's certificate of any model (duality.py, from w alone) agrees on P1(w)
    cert = duality_gap(reg, X, y)
    assert cert.primal == pytest.approx(reg.primal_objective_, rel=1e-10)
    assert cert.gap >= mine - best - 1e-12


def test_lq_solves_l1_logistic_regression():
    # LogisticRegression(penalty="l1", C): ||w||_1 + C sum log(1 + exp(-y z)), i.e. m C
    # times ours at l1 = 1 / (C m)
    X, yr = dense_sign_rows(400, 60, seed=4)
    y = np.where(yr > 0, 1.0, -1.0)
    C = 0.125
    l1 = 1.0 / (C * len(y))
    ref = LogisticRegression(penalty="l1", C=C, fit_intercept=False, solver="liblinear",
                             tol=1e-12, max_iter=100000).fit(X, y)
    best = l1_objective(X, y, ref.coef_.ravel(), l1, "logistic")
    clf = SDCAClassifier(sigma=0.0, l1=l1, fit_intercept=False, tol=1e-5, max_epochs=3000,
                         l1_geometry="lq", random_state=0).fit(X, y)
    assert clf.l1_geometry_ == "lq"
    mine = l1_objective(X, y, clf.coef_.ravel(), l1, "logistic")
    assert clf.duality_gap_ <= 1e-5 * clf.primal_objective_
    assert mine - best <= clf.duality_gap_ + 1e-12
    assert best - mine <= 1e-7 * best  # liblinear's is near-optimal too
    np.testing.assert_allclose(clf.coef_.ravel(), ref.coef_.ravel(), atol=5e-2)


def test_certificate_bounds_the_true_suboptimality_along_the_run():
    # every check's gap >= P1(w) - P1*, with P1* from a very tight Lasso, for both geometries
    X, y = dense_sign_rows(400, 60, seed=5)
    a = 0.25
    lasso = Lasso(alpha=a, fit_intercept=False, tol=1e-15, max_iter=500000).fit(X, y)
    best = l1_objective(X, y, lasso.coef_, 2 * a)
    for geometry in ("lq", "l2"):
        prob = SDCAProblem(*(lambda c: (c.data, c.indices, c.indptr))(sp.csr_matrix(X)),
                           X.shape[1], y, np.ones(len(y)), loss="squared", sigma=0.0,
                           l1=2 * a, fit_intercept=False, l1_geometry=geometry, seed=1)
        assert prob.l1_geometry == geometry
        for _ in range(30):
            # tol 1e-5 as the estimators' runs: the smoothing falls on their schedule
            prob.run(max_epochs=20, tol=1e-5, check_every=5)
            info = prob.check()  # at the current w (a lowered lam moved it since)
            w = prob.weights()[1:]
            assert info["primal"] == pytest.approx(l1_objective(X, y, w, 2 * a), rel=1e-10)
            assert info["gap"] >= info["primal"] - best - 1e-10 * best
        assert info["gap"] <= 1e-4 * info["primal"]  # and it does converge


@pytest.mark.parametrize("geometry", ["lq", "l2"])
def test_reported_gap_is_that_of_the_returned_weights(geometry):
    # when max_epochs runs out right after a check that lowered lam, w would move off the
    # certified point: the reported objective and gap must be those of coef_
    X, y = dense_sign_rows(200, 40, seed=11)
    for epochs in (5, 17, 40, 97):
        reg = SDCARegressor(sigma=0.0, l1=0.4, fit_intercept=False, check_every=1,
                            max_epochs=epochs, l1_geometry=geometry, random_state=0)
        with pytest.warns(Warning):
            reg.fit(X, y)
        assert reg.primal_objective_ == pytest.approx(
            l1_objective(X, y, reg.coef_, 0.4), rel=1e-10)


# ---- the "auto" rule -----------------------------------------------------------------------
def test_auto_picks_lq_on_dense_small_entries_and_l2_on_normalised_sparse_rows():
    X, y = dense_sign_rows(200, 2000, seed=6)
    reg = SDCARegressor(sigma=0.0, l1=0.5, max_epochs=1, random_state=0)
    with pytest.warns(Warning):
        reg.fit(X, y)
    assert reg.l1_geometry_ == "lq"
    # the rule in numbers: (ln d - 1) max ||x||_q^2 vs max ||x||_2^2 (with the intercept)
    d = 2001
    q = np.log(d)
    Xc = sp.csr_matrix(X)
    prob = SDCAProblem(Xc.data, Xc.indices, Xc.indptr, X.shape[1], y, np.ones(len(y)),
                       loss="squared", sigma=0.0, l1=0.5, l1_geometry="auto")
    assert prob.bound_l2 == pytest.approx(2001.0)
    assert prob.bound_lq == pytest.approx((q - 1) * (2000 + 1) ** (2 / q), rel=1e-9)
    assert prob.bound_lq < prob.bound_l2 / 10
    # l2-normalised sparse rows (text-like): ||x||_2 = 1, and the intercept's 1 alone
    # makes (ln d - 1) ||x||_q^2 > 2
    rng = np.random.RandomState(7)
    S = sp.random(300, 5000, density=0.004, random_state=rng, format="csr")
    S.data = rng.rand(S.nnz)
    norms = np.sqrt(np.asarray(S.multiply(S).sum(axis=1)).ravel())
    S = sp.csr_matrix(sp.diags(1.0 / np.where(norms > 0, norms, 1.0)) @ S)
    ys = np.where(rng.rand(300) > 0.5, 1, -1)
    clf = SDCAClassifier(loss="hinge", sigma=0.0, l1=1e-3, random_state=0).fit(S, ys)
    assert clf.l1_geometry_ == "l2"
    assert clf.get_params()["l1_geometry"] == "auto"
    # not pure l_1: no geometry; explicit choices are obeyed
    assert SDCARegressor(sigma=1e-2, l1=0.1).fit(X[:50, :20], y[:50]).l1_geometry_ is None
    forced = SDCAClassifier(loss="hinge", sigma=0.0, l1=1e-3, l1_geometry="lq",
                            max_epochs=3, random_state=0)
    with pytest.warns(Warning):
        forced.fit(S, ys)
    assert forced.l1_geometry_ == "lq"


def test_lq_with_fewer_than_8_coordinates_is_l2():
    # p = ln d / (ln d - 1) > 2 for d < e^2: section 3.2 does not apply, 3.1 runs
    X, y = dense_sign_rows(100, 5, seed=8, k=2)
    reg = SDCARegressor(sigma=0.0, l1=0.1, l1_geometry="lq", random_state=0).fit(X, y)
    assert reg.l1_geometry_ == "l2"


def test_bad_l1_geometry_is_refused():
    X, y = dense_sign_rows(20, 10)
    with pytest.raises(ValueError, match="l1_geometry"):
        SDCARegressor(sigma=0.0, l1=0.1, l1_geometry="l1").fit(X, y)
    Xc = sp.csr_matrix(X)
    with pytest.raises(ValueError, match="The 'l1_geometry' parameter of SDCAProblem must be a str among"):
        SDCAProblem(Xc.data, Xc.indices, Xc.indptr, 10, y, np.ones(20), loss="squared",
                    sigma=0.0, l1=0.1, l1_geometry="L2")


# ---- model files and the command ---------------------------------------------------------
def test_model_file_keeps_the_choice_and_omits_the_default(tmp_path):
    import json
    import zipfile

    X, y = dense_sign_rows(80, 30, seed=9)
    for geometry in ("auto", "lq"):
        reg = SDCARegressor(sigma=0.0, l1=0.2, l1_geometry=geometry, random_state=0)
        reg.fit(X, y)
        path = tmp_path / f"{geometry}.opgs"
        save_model(reg, path)
        with zipfile.ZipFile(path) as z:
            header = json.loads(z.read(next(n for n in z.namelist() if n.endswith("json"))))
        assert ("l1_geometry" in header["params"]) == (geometry != "auto")
        back = load_model(path)
        assert back.l1_geometry == geometry
        assert back.l1_geometry_ == reg.l1_geometry_ == "lq"
        np.testing.assert_array_equal(back.predict(X), reg.predict(X))


def test_command_trains_with_l1_geometry(tmp_path):
    X, yr = dense_sign_rows(150, 60, seed=10)
    y = np.where(yr > 0, 1, -1)
    data = tmp_path / "d.svm"
    dump_svmlight_file(X, y, str(data))
    model = tmp_path / "m.opgs"
    done = subprocess.run(EXE + ["train", str(data), "--solver", "sdca", "--sigma", "0",
                                 "--l1", "0.02", "--l1-geometry", "lq", "--no-intercept",
                                 "-o", str(model)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "l1 geometry = lq (Prox-SDCA section 3.2, by --l1-geometry)" in done.stderr
    est = load_model(model)
    assert (est.l1_geometry, est.l1_geometry_, est.l1, est.sigma) == ("lq", "lq", 0.02, 0.0)
    # the same fit in Python: the same weights
    ref = SDCAClassifier(sigma=0.0, l1=0.02, l1_geometry="lq", fit_intercept=False,
                         random_state=0).fit(X, y)
    np.testing.assert_allclose(est.coef_, ref.coef_, atol=1e-6)
    # a PGS run refuses it in one line
    bad = subprocess.run(EXE + ["train", str(data), "--l1-geometry", "lq"],
                         capture_output=True, text=True)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1].endswith(
        "argument --l1-geometry: an SDCA option (with --solver sdca --sigma 0 --l1 L1)")
    assert "Traceback" not in bad.stderr
    bad = subprocess.run(EXE + ["train", str(data), "--solver", "sdca", "--l1-geometry",
                                "l3"], capture_output=True, text=True)
    assert bad.returncode == 2 and "invalid choice: 'l3'" in bad.stderr
