"""SDCA against independent yardsticks: a NumPy transcription of the step, scipy's optima,
scikit-learn's ElasticNet and Lasso, the hinge dual QP; warm starts, weights, validation."""
import threading
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import ElasticNet, Lasso

from onlinepgs import PGSClassifier, PGSRegressor, SDCAClassifier, SDCARegressor
from onlinepgs._core._sdca import SDCAProblem

from reference import grad_rstar, loss_value
from test_convergence import objective, scipy_optimum

CLASSIFICATION = ["hinge", "logistic", "squared_hinge", "smooth_hinge"]
REGRESSION = ["squared", "absolute", "huber", "epsilon_insensitive"]
EPS = 0.3  # epsilon of huber / epsilon_insensitive in these tests


# ---- a plain-NumPy transcription of the step (papers 001 section 4, 004 Option I) --------
def conjugate(loss, u, y, eps=EPS):
    """l*(u; y) from the losses' definitions (docs/design/sdca.md); +inf outside the domain."""
    t = -u * y
    if loss == "hinge":
        return u * y if -1 <= u * y <= 0 else np.inf
    if loss == "logistic":
        if not 0 <= t <= 1:
            return np.inf
        return sum(x * np.log(x) for x in (t, 1 - t) if x > 0)
    if loss == "squared_hinge":
        return u * y + u * u / 4 if u * y <= 0 else np.inf
    if loss == "smooth_hinge":
        return u * y + u * u / 2 if -1 <= u * y <= 0 else np.inf
    if loss == "squared":
        return u * u / 4 + u * y
    if loss == "absolute":
        return u * y if abs(u) <= 1 else np.inf
    if loss == "huber":
        return u * y + u * u / 2 if abs(u) <= eps else np.inf
    return u * y + eps * abs(u) if abs(u) <= 1 else np.inf


def conjugate_slope(loss, u, y, eps=EPS):
    """d l*(u; y) / du inside the domain (a subgradient at kinks), nondecreasing in u."""
    if loss in ("hinge", "absolute"):
        return y
    if loss == "logistic":
        t = min(max(-u * y, 1e-300), 1 - 1e-16)
        return -y * np.log(t / (1 - t))
    if loss == "squared_hinge":
        return y + u / 2
    if loss in ("smooth_hinge", "huber"):
        return y + u
    if loss == "squared":
        return u / 2 + y
    return y + eps * np.sign(u)


def alpha_box(loss, y, sw, eps=EPS):
    """The interval of alpha_i for which l*(-alpha_i / sw_i) is finite."""
    lo, hi = {"hinge": (0, 1), "logistic": (0, 1), "squared_hinge": (0, np.inf),
              "smooth_hinge": (0, 1), "squared": (-np.inf, np.inf), "absolute": (-1, 1),
              "huber": (-eps, eps), "epsilon_insensitive": (-1, 1)}[loss]
    if loss in CLASSIFICATION:  # alpha y / sw in [lo, hi]
        lo, hi = sorted((lo * y * sw, hi * y * sw))
    else:
        lo, hi = lo * sw, hi * sw
    return lo, hi


def reference_step(loss, a0, z, y, sw, R2, sigma, m):
    """argmax_a  -sw l*(-a/sw) - (a - a0) z - (a - a0)^2 R2 / (2 sigma m), by bisection on
    the (nonincreasing) slope: independent of the core's closed forms and Newton."""
    def slope(a):
        return conjugate_slope(loss, -a / sw, y) - z - (a - a0) * R2 / (sigma * m)
    lo, hi = alpha_box(loss, y, sw)
    if np.isinf(lo) or np.isinf(hi):
        width = 1.0
        while slope(a0 - width) <= 0 or slope(a0 + width) >= 0:
            width *= 2
        lo, hi = max(lo, a0 - width), min(hi, a0 + width)
    if slope(lo) <= 0:
        return lo
    if slope(hi) >= 0:
        return hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if slope(mid) > 0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def reference_sdca(X1, y, sw, loss, p, sigma, rows):
    """Steps over `rows` in order on dense X1 (constant column first); returns alpha and w
    after every step. O(n) per step: w = grad r*(X1^T alpha / (sigma m)) afresh."""
    m = X1.shape[0]
    q = p / (p - 1) if p < 2 else 2.0
    alpha = np.zeros(m)
    trace = []
    for i in rows:
        if sw[i] > 0:
            v = X1.T @ alpha / (sigma * m)
            w = v if p == 2 else grad_rstar(v, p)
            R2 = np.sum(np.abs(X1[i]) ** q) ** (2 / q)
            alpha[i] = reference_step(loss, alpha[i], X1[i] @ w, y[i], sw[i], R2, sigma, m)
        v = X1.T @ alpha / (sigma * m)
        trace.append((alpha.copy(), v if p == 2 else grad_rstar(v, p)))
    return trace


def problem_data(loss, m=25, n=6, seed=0):
    rng = np.random.RandomState(seed)
    X = sp.random(m, n, density=0.5, random_state=rng, format="csr")
    X.data = rng.randn(X.nnz)
    if loss in CLASSIFICATION:
        y = np.where(rng.rand(m) > 0.4, 1.0, -1.0)
    else:
        y = X @ rng.randn(n) + 0.5 * rng.randn(m)
    sw = rng.choice([0.0, 0.5, 1.0, 2.0], size=m, p=[0.1, 0.2, 0.5, 0.2])
    return X, y, sw


@pytest.mark.parametrize("p", [2.0, 1.5])
@pytest.mark.parametrize("loss", CLASSIFICATION + REGRESSION)
def test_core_matches_numpy_transcription_step_for_step(loss, p):
    X, y, sw = problem_data(loss)
    m, n = X.shape
    sigma, icpt = 0.05, 0.7
    X1 = np.hstack([np.full((m, 1), icpt), X.toarray()])
    rows = np.concatenate([np.arange(m)] * 3)  # three cyclic epochs
    trace = reference_sdca(X1, y, sw, loss, p, sigma, rows)
    prob = SDCAProblem(X.data, X.indices, X.indptr, n, y, sw, loss=loss, p=p, sigma=sigma,
                       intercept_scaling=icpt, epsilon=EPS, order="cyclic", shrinking=False)
    for t, (alpha_ref, w_ref) in enumerate(trace):
        prob.steps([rows[t]])
        scale = max(1.0, np.abs(alpha_ref).max())
        # logistic: the core's Newton stops once a step is below 1e-4 of b, leaving an
        # error below 5e-9 of b (its docstring); the bisection here solves to the last bit
        rtol = 2e-8 if loss == "logistic" else 1e-9
        np.testing.assert_allclose(prob.alpha, alpha_ref, rtol=rtol, atol=1e-11 * scale,
                                   err_msg=f"alpha after step {t}")
        np.testing.assert_allclose(prob.weights(), w_ref, rtol=max(1e-8, rtol),
                                   atol=max(1e-10, rtol) * max(1.0, np.abs(w_ref).max()),
                                   err_msg=f"w after step {t}")
    # the epochs of run() in cyclic order are the same steps
    again = SDCAProblem(X.data, X.indices, X.indptr, n, y, sw, loss=loss, p=p, sigma=sigma,
                        intercept_scaling=icpt, epsilon=EPS, order="cyclic", shrinking=False)
    again.run(3, tol=0.0)
    np.testing.assert_allclose(again.alpha, prob.alpha, rtol=1e-12, atol=1e-14)


def test_numpy_step_is_the_argmax_of_the_model():
    """The transcription's bisection against a brute-force grid of the model itself."""
    rng = np.random.RandomState(1)
    for loss in CLASSIFICATION + REGRESSION:
        for _ in range(5):
            y = rng.choice([-1.0, 1.0]) if loss in CLASSIFICATION else rng.randn()
            sw, z, R2, a0 = rng.rand() + 0.5, rng.randn(), rng.rand() + 0.1, 0.0
            a = reference_step(loss, a0, z, y, sw, R2, 0.1, 10)

            def model(b):
                return -sw * conjugate(loss, -b / sw, y) - (b - a0) * z - (b - a0) ** 2 * R2 / 2

            lo, hi = alpha_box(loss, y, sw)
            grid = np.linspace(max(lo, a - 3), min(hi, a + 3), 20001)
            values = [model(b) for b in grid]
            assert model(a) >= max(values) - 1e-7


# ---- optima: scipy on the primal (smooth losses) and on the dual (hinge, absolute) --------
def dense_problem(loss, m=120, n=6, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(m, n) / np.sqrt(n)
    w = rng.randn(n)
    if loss in CLASSIFICATION:
        y = np.where(X @ w + 0.3 * rng.randn(m) > 0.2, 1.0, -1.0)
    else:
        y = X @ w + 0.5 + 0.3 * rng.randn(m)
    return X, y


def fit(loss, X, y, **kw):
    cls = SDCAClassifier if loss in CLASSIFICATION else SDCARegressor
    return cls(loss=loss, random_state=0, **kw).fit(X, y)


def primal(est, X, y, p, sigma):
    wb = np.concatenate([np.ravel(est.intercept_), np.ravel(est.coef_)])
    return objective(wb, X, y, p, sigma, est.loss)[0]


@pytest.mark.parametrize("p", [2.0, 1.5])
@pytest.mark.parametrize("loss", ["logistic", "squared_hinge", "smooth_hinge", "squared"])
def test_smooth_losses_reach_scipy_optimum_with_a_valid_gap(loss, p):
    X, y = dense_problem(loss)
    sigma = 0.02
    est = fit(loss, X, y, p=p, sigma=sigma, tol=1e-9, max_epochs=5000)
    f_opt = scipy_optimum(X, y, p, sigma, loss)
    f = primal(est, X, y, p, sigma)
    assert f == pytest.approx(est.primal_objective_, rel=1e-12)
    assert est.duality_gap_ <= 1e-9 * est.primal_objective_
    # the gap bounds the suboptimality (scipy's optimum is itself only ~1e-12 accurate)
    assert f - f_opt <= est.duality_gap_ + 1e-11 * abs(f_opt)
    assert abs(f - f_opt) <= 1e-8 * abs(f_opt)


def hinge_dual_qp(X1, y, sigma):
    """max_a sum(a)/m - ||X1^T (a y)||^2 / (2 sigma m^2) over a in [0, 1]^m (L-BFGS-B)."""
    m = X1.shape[0]
    Z = X1 * y[:, None]

    def neg(a):
        u = Z.T @ a
        return -(a.sum() / m - u @ u / (2 * sigma * m * m)), -(1 / m - Z @ u / (sigma * m * m))
    res = minimize(neg, np.full(m, 0.5), jac=True, method="L-BFGS-B", bounds=[(0, 1)] * m,
                   options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 20000})
    return -res.fun


def absolute_dual(X1, y, sigma):
    """max_a a.y/m - ||X1^T a||^2 / (2 sigma m^2) over a in [-1, 1]^m (L-BFGS-B)."""
    m = X1.shape[0]

    def neg(a):
        u = X1.T @ a
        return -(a @ y / m - u @ u / (2 * sigma * m * m)), -(y / m - X1 @ u / (sigma * m * m))
    res = minimize(neg, np.zeros(m), jac=True, method="L-BFGS-B", bounds=[(-1, 1)] * m,
                   options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 20000})
    return -res.fun


@pytest.mark.parametrize("shrinking", [True, False])
def test_hinge_against_its_dual_qp(shrinking):
    X, y = dense_problem("hinge")
    sigma = 0.05
    est = fit("hinge", X, y, sigma=sigma, tol=1e-7, max_epochs=20000, shrinking=shrinking)
    X1 = np.hstack([np.ones((len(y), 1)), X])
    d_opt = hinge_dual_qp(X1, y, sigma)
    f = primal(est, X, y, 2.0, sigma)
    assert est.duality_gap_ <= 1e-7 * f
    assert f - d_opt <= est.duality_gap_ + 1e-10  # P(w) - P* <= gap, P* = D*
    assert abs(f - d_opt) <= 1e-6 * f
    assert est.dual_objective_ <= d_opt + 1e-10
    # the dual variables are the QP's box: alpha y in [0, 1]
    assert np.all(est.dual_coef_ * y >= 0) and np.all(est.dual_coef_ * y <= 1)


def test_absolute_loss_against_its_dual():
    X, y = dense_problem("absolute")
    sigma = 0.05
    est = fit("absolute", X, y, sigma=sigma, tol=1e-7, max_epochs=20000)
    X1 = np.hstack([np.ones((len(y), 1)), X])
    d_opt = absolute_dual(X1, y, sigma)
    f = primal(est, X, y, 2.0, sigma)
    assert est.duality_gap_ <= 1e-7 * f
    assert f - d_opt <= est.duality_gap_ + 1e-10
    assert abs(f - d_opt) <= 1e-6 * f


@pytest.mark.parametrize("loss", ["huber", "epsilon_insensitive"])
def test_other_regression_losses_gap_matches_objective(loss):
    X, y = dense_problem(loss)
    est = fit(loss, X, y, sigma=0.05, epsilon=EPS, tol=1e-8, max_epochs=20000)
    z = X @ est.coef_ + est.intercept_[0]
    w_all = np.concatenate([est.intercept_, est.coef_])
    P = 0.05 * w_all @ w_all / 2 + loss_value(loss, z, y, EPS).mean()
    assert P == pytest.approx(est.primal_objective_, rel=1e-12)
    assert 0 <= est.duality_gap_ <= 1e-8 * P
    assert est.primal_objective_ - est.dual_objective_ == pytest.approx(est.duality_gap_,
                                                                        abs=1e-12)


# ---- elastic net and l_1 against scikit-learn --------------------------------------------
def test_elastic_net_matches_sklearn():
    # ours: (1/m) sum (z - y)^2 + sigma/2 ||w||^2 + l1 ||w||_1 = 2 x sklearn's
    # (1/2m) ||y - Xw||^2 + a rho ||w||_1 + a (1 - rho)/2 ||w||^2: sigma = 2a(1-rho), l1 = 2a rho
    rng = np.random.RandomState(0)
    X = rng.randn(200, 15)
    y = X[:, :4] @ [2.0, -1.0, 0.5, 1.5] + 0.3 * rng.randn(200)
    a, rho = 0.1, 0.6
    ref = ElasticNet(alpha=a, l1_ratio=rho, fit_intercept=False, tol=1e-12,
                     max_iter=100000).fit(X, y)
    est = SDCARegressor(sigma=2 * a * (1 - rho), l1=2 * a * rho, fit_intercept=False,
                        tol=1e-10, max_epochs=5000, random_state=0).fit(X, y)
    np.testing.assert_allclose(est.coef_, ref.coef_, atol=1e-5)
    assert np.array_equal(est.coef_ == 0, ref.coef_ == 0)
    f_ref = ((X @ ref.coef_ - y) ** 2).mean() + a * (1 - rho) * ref.coef_ @ ref.coef_ \
        + 2 * a * rho * np.abs(ref.coef_).sum()
    assert est.primal_objective_ - f_ref <= est.duality_gap_ + 1e-12
    assert est.duality_gap_ <= 1e-10 * est.primal_objective_


def test_pure_l1_matches_lasso_with_a_valid_certificate():
    rng = np.random.RandomState(1)
    X = rng.randn(60, 80) / 4  # wide: the smoothed dual stays well conditioned
    y = X[:, :3] @ [3.0, -2.0, 1.0] + 0.1 * rng.randn(60)
    a = 0.05
    ref = Lasso(alpha=a, fit_intercept=False, tol=1e-14, max_iter=1000000).fit(X, y)
    est = SDCARegressor(sigma=0.0, l1=2 * a, fit_intercept=False, tol=1e-5,
                        max_epochs=20000, random_state=0).fit(X, y)

    def p1(w):
        return ((X @ w - y) ** 2).mean() + 2 * a * np.abs(w).sum()
    assert p1(est.coef_) == pytest.approx(est.primal_objective_, rel=1e-10)
    assert est.duality_gap_ <= 1e-5 * est.primal_objective_
    # the certificate bounds the l_1 objective's suboptimality
    assert p1(est.coef_) - p1(ref.coef_) <= est.duality_gap_ + 1e-12
    assert est.primal_objective_ - est.dual_objective_ == pytest.approx(est.duality_gap_)
    assert 0 < est.smoothing_ < 1.0
    np.testing.assert_allclose(est.coef_, ref.coef_, atol=2e-2)


def test_l1_zeroes_coefficients_and_needs_p2():
    rng = np.random.RandomState(2)
    X = rng.randn(100, 10)
    y = np.where(X[:, 0] - X[:, 1] > 0, 1, 0)
    est = SDCAClassifier(sigma=1e-3, l1=0.05, random_state=0, tol=1e-8).fit(X, y)
    assert np.sum(est.coef_ == 0) >= 5 and est.coef_[0, 0] > 0 > est.coef_[0, 1]
    with pytest.raises(ValueError, match="needs p=2"):
        SDCAClassifier(p=1.5, l1=0.1).fit(X, y)


# ---- warm starts -------------------------------------------------------------------------
@pytest.mark.parametrize("loss", ["logistic", "hinge", "squared_hinge"])
def test_pgs_warm_start_is_a_valid_dual_point_and_reaches_the_same_optimum(loss):
    X, y = dense_problem(loss, m=300)
    sigma = 1e-2
    cold = SDCAClassifier(loss=loss, sigma=sigma, tol=1e-8, random_state=0,
                          max_epochs=20000).fit(X, y)
    warm = SDCAClassifier(loss=loss, sigma=sigma, tol=1e-8, random_state=0, init="pgs",
                          max_epochs=20000).fit(X, y)
    pgs = PGSClassifier(loss=loss, sigma=sigma, random_state=0, max_epochs=3).fit(X, y)
    warm2 = SDCAClassifier(loss=loss, sigma=sigma, tol=1e-8, random_state=0, init=pgs,
                           max_epochs=20000).fit(X, y)
    for est in (warm, warm2):
        assert np.all(np.isfinite(est.gap_history_))
        assert est.primal_objective_ == pytest.approx(cold.primal_objective_, rel=1e-7)
    # the starting point itself: alpha = -l'(z_pgs) has a finite dual and a gap that
    # certifies the PGS model's primal
    yy = np.where(y > 0, 1.0, -1.0)
    z = X @ pgs.coef_[0] + pgs.intercept_[0]
    from onlinepgs._core import loss_derivative
    alpha0 = -loss_derivative(loss, z, yy)
    Xc = sp.csr_matrix(X)
    prob = SDCAProblem(Xc.data, Xc.indices, Xc.indptr, X.shape[1], yy, np.ones(len(y)),
                       loss=loss, sigma=sigma, alpha0=alpha0)
    info = prob.check()
    assert np.isfinite(info["dual"]) and np.isfinite(info["gap"]) and info["gap"] >= 0
    assert info["dual"] <= cold.primal_objective_ + 1e-12


def test_warm_start_from_a_pgs_regressor_and_bad_inits():
    X, y = dense_problem("squared")
    pgs = PGSRegressor(sigma=0.01, random_state=0).fit(X, y)
    est = SDCARegressor(sigma=0.01, init=pgs, tol=1e-9, random_state=0).fit(X, y)
    cold = SDCARegressor(sigma=0.01, tol=1e-9, random_state=0).fit(X, y)
    assert est.primal_objective_ == pytest.approx(cold.primal_objective_, rel=1e-8)
    with pytest.raises(ValueError, match="init"):
        SDCARegressor(init="warm").fit(X, y)
    with pytest.raises(ValueError, match="features"):
        SDCARegressor(init=pgs).fit(X[:, :3], y)
    with pytest.raises(ValueError, match="sigma > 0"):
        SDCARegressor(sigma=0.0, l1=0.1, init="pgs").fit(X, y)


# ---- sample weights, multiclass, input kinds ---------------------------------------------
def test_weight_two_equals_a_duplicated_row_and_zero_equals_removal():
    X, y = dense_problem("logistic", m=80)
    sw = np.ones(80)
    sw[[3, 10]] = 2.0
    sw[[5, 6, 7]] = 0.0
    keep = np.flatnonzero(sw > 0)
    rep = np.concatenate([keep, [3, 10]])
    sigma = 0.01
    weighted = SDCAClassifier(sigma=sigma, tol=1e-12, random_state=0).fit(X, y, sample_weight=sw)
    # scikit-learn's convention: the objective averages the weighted losses by the sum of
    # the weights, so integer weights are copies of the rows with the same sigma
    repeated = SDCAClassifier(sigma=sigma, tol=1e-12, random_state=0).fit(X[rep], y[rep])
    assert weighted.primal_objective_ == pytest.approx(repeated.primal_objective_, rel=1e-9)
    # both objectives are sigma-strongly convex with the same minimizer w*, so
    # ||w - w*||^2 <= 2 gap / sigma for each
    radius = (np.sqrt(2 * weighted.duality_gap_ / sigma)
              + np.sqrt(2 * repeated.duality_gap_ / sigma))
    diff = np.concatenate([weighted.coef_[0] - repeated.coef_[0],
                           weighted.intercept_ - repeated.intercept_])
    assert np.linalg.norm(diff) <= radius and radius < 1e-4
    assert np.all(weighted.dual_coef_[[5, 6, 7]] == 0)


def test_multiclass_is_one_vs_rest_of_binary_problems():
    rng = np.random.RandomState(3)
    X = rng.randn(150, 4)
    y = np.argmax(X[:, :3] + 0.5 * rng.randn(150, 3), axis=1)
    labels = np.array(["a", "b", "c"])[y]
    est = SDCAClassifier(loss="smooth_hinge", sigma=1e-2, tol=1e-10, random_state=0).fit(X, labels)
    assert est.coef_.shape == (3, 4) and est.dual_coef_.shape == (3, 150)
    assert est.duality_gap_.shape == (3,) and len(est.gap_history_) == 3
    for c, name in enumerate("abc"):
        one = SDCAClassifier(loss="smooth_hinge", sigma=1e-2, tol=1e-10,
                             random_state=0).fit(X, labels == name)
        diff = np.concatenate([est.coef_[c] - one.coef_[0], est.intercept_[[c]] - one.intercept_])
        radius = np.sqrt(2 * est.duality_gap_[c] / 1e-2) + np.sqrt(2 * one.duality_gap_ / 1e-2)
        assert np.linalg.norm(diff) <= radius and radius < 1e-3
        assert est.primal_objective_[c] == pytest.approx(one.primal_objective_, rel=1e-9)
    assert est.score(X, labels) > 0.7


def test_sparse_dense_and_int64_indices_agree():
    X, y = dense_problem("hinge", m=100)
    X[np.abs(X) < 0.3] = 0.0
    dense = SDCAClassifier(loss="hinge", sigma=1e-2, random_state=0).fit(X, y)
    csr = sp.csr_matrix(X)
    sparse = SDCAClassifier(loss="hinge", sigma=1e-2, random_state=0).fit(csr, y)
    big = sp.csr_matrix((csr.data, csr.indices.astype(np.int64), csr.indptr.astype(np.int64)),
                        shape=csr.shape)
    wide = SDCAClassifier(loss="hinge", sigma=1e-2, random_state=0).fit(big, y)
    np.testing.assert_array_equal(dense.coef_, sparse.coef_)
    np.testing.assert_array_equal(sparse.coef_, wide.coef_)
    np.testing.assert_array_equal(sparse.dual_coef_, wide.dual_coef_)
    assert sparse.n_iter_ == wide.n_iter_


@pytest.mark.parametrize("order", ["permutation", "random", "cyclic"])
def test_every_order_converges_and_seeds_reproduce(order):
    X, y = dense_problem("logistic")
    a = SDCAClassifier(sigma=1e-2, order=order, random_state=5, check_every=1).fit(X, y)
    b = SDCAClassifier(sigma=1e-2, order=order, random_state=5, check_every=1).fit(X, y)
    assert a.duality_gap_ <= 1e-6 * a.primal_objective_
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert len(a.gap_history_) == a.n_iter_
    np.testing.assert_array_equal(a.gap_epochs_, np.arange(1, a.n_iter_ + 1))


def test_p_below_two_gap_is_exact_after_many_updates():
    """The running N is refreshed before a check: the reported gap is that of
    w = grad r*(v), recomputed here from alpha alone."""
    rng = np.random.RandomState(4)
    X = sp.random(400, 300, density=0.05, random_state=rng, format="csr")
    y = np.where(rng.rand(400) > 0.5, 1.0, -1.0)
    p, sigma, m = 1.3, 1e-3, 400
    prob = SDCAProblem(X.data, X.indices, X.indptr, 300, y, np.ones(m), loss="logistic",
                       p=p, sigma=sigma)
    prob.run(40, tol=0.0)
    info = prob.gap_info()
    X1 = sp.hstack([np.ones((m, 1)), X]).tocsr()
    v = X1.T @ prob.alpha / (sigma * m)
    w = grad_rstar(v, p)
    np.testing.assert_allclose(prob.weights(), w, rtol=1e-9, atol=1e-12 * np.abs(w).max())
    q = p / (p - 1)
    P = sigma * np.sum(np.abs(w) ** p) ** (2 / p) / (2 * (p - 1)) + np.logaddexp(0, -y * (X1 @ w)).mean()
    t = y * prob.alpha
    conj = np.where(t > 0, t * np.log(np.maximum(t, 1e-300)), 0) + np.where(
        t < 1, (1 - t) * np.log1p(-np.minimum(t, 1 - 1e-16)), 0)
    D = -conj.mean() - sigma * (p - 1) * np.sum(np.abs(v) ** q) ** (2 / q) / 2
    assert info["primal"] == pytest.approx(P, rel=1e-11)
    assert info["dual"] == pytest.approx(D, rel=1e-11)
    assert info["gap"] == pytest.approx(P - D, rel=1e-6, abs=1e-13)


def test_verbose_history_and_convergence_warning(capsys):
    X, y = dense_problem("hinge")
    with pytest.warns(ConvergenceWarning, match="did not reach"):
        est = SDCAClassifier(loss="hinge", sigma=1e-3, max_epochs=2, verbose=1,
                             check_every=1).fit(X, y)
    out = capsys.readouterr().out
    assert out.count("gap") == 2 and "epoch 2" in out
    assert est.n_iter_ == 2 and est.gap_history_.shape == (2,)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = SDCAClassifier(loss="hinge", sigma=1e-1, check_every=5, tol=1e-4,
                             random_state=0).fit(X, y)
    assert est.n_iter_ % 5 == 0 and len(est.gap_history_) == est.n_iter_ // 5
    # verbose with the default "auto" schedule reports the gap after every epoch
    with pytest.warns(ConvergenceWarning):
        est = SDCAClassifier(loss="hinge", sigma=1e-3, max_epochs=3, verbose=1).fit(X, y)
    out = capsys.readouterr().out
    assert out.count("gap") == 3 and "epoch 3" in out and est.gap_history_.shape == (3,)


@pytest.mark.parametrize("params, match", [
    (dict(sigma=0.0), "needs l1 > 0"),
    (dict(sigma=-1.0), "sigma"),
    (dict(p=1.0), "'p' parameter"),
    (dict(p=2.5), "'p' parameter"),
    (dict(tol=-1e-3), "'tol' parameter"),
    (dict(l1=-0.1), "'l1' parameter"),
    (dict(order="shuffled"), "'order' parameter"),
    (dict(check_every=0), "'check_every' parameter"),
    (dict(check_every="sometimes"), "'check_every' parameter"),
    (dict(max_epochs=0), "'max_epochs' parameter"),
    (dict(loss="squared"), "'loss' parameter"),
    (dict(init="warm"), "init"),
    (dict(init=PGSRegressor()), "init"),
    (dict(sigma=float("inf")), "sigma"),
    (dict(epsilon=float("nan")), "epsilon"),
])
def test_bad_parameters_raise_and_leave_the_model_unchanged(params, match):
    X, y = dense_problem("logistic")
    est = SDCAClassifier(sigma=1e-2, random_state=0).fit(X, y)
    before = (est.coef_.copy(), est.dual_coef_.copy(), est.n_iter_)
    est.set_params(**params)
    with pytest.raises(ValueError, match=match):
        est.fit(X, y)
    np.testing.assert_array_equal(est.coef_, before[0])
    np.testing.assert_array_equal(est.dual_coef_, before[1])
    assert est.n_iter_ == before[2]


def test_bad_data_raises():
    X, y = dense_problem("logistic")
    est = SDCAClassifier()
    with pytest.raises(ValueError, match="sample_weight"):
        est.fit(X, y, sample_weight=-np.ones(len(y)))
    with pytest.raises(ValueError, match="zero for every row"):
        est.fit(X, y, sample_weight=np.zeros(len(y)))
    with pytest.raises(ValueError, match="rows"):
        est.fit(X, y[:-1])
    Xbad = X.copy()
    Xbad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        est.fit(Xbad, y)
    with pytest.raises(ValueError, match="labels"):
        SDCAProblem(np.ones(1), np.zeros(1, np.int32), np.array([0, 1]), 1, np.array([2.0]),
                    np.ones(1), loss="hinge")


def test_rows_that_never_move_get_their_optimal_dual():
    """An all-zero row without intercept and zero-weight rows: the gap stays exact."""
    X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 2.0], [1.0, 1.0]]))
    y = np.array([1.0, -1.0, -1.0, 1.0])
    prob = SDCAProblem(X.data, X.indices, X.indptr, 2, y, np.array([1.0, 1.0, 1.0, 0.0]),
                       loss="logistic", sigma=0.1, fit_intercept=False)
    assert prob.alpha[1] == pytest.approx(-0.5) and prob.alpha[3] == 0
    assert prob.run(200, tol=1e-12)


def test_epochs_release_the_gil():
    rng = np.random.RandomState(0)
    m, n, per_row = 20000, 2000, 10
    X = sp.csr_matrix((rng.rand(m * per_row), rng.randint(0, n, m * per_row),
                       np.arange(0, m * per_row + 1, per_row)), shape=(m, n))
    X.sum_duplicates()
    y = np.where(rng.rand(m) > 0.5, 1.0, -1.0)
    prob = SDCAProblem(X.data, X.indices, X.indptr, n, y, np.ones(m), loss="logistic",
                       sigma=1e-6)
    started = threading.Event()

    def train():
        started.set()
        prob.run(60, tol=0.0, check_every=1000)

    worker = threading.Thread(target=train)
    worker.start()
    started.wait()
    spins = 0
    while worker.is_alive():
        spins += 1
    worker.join()
    assert prob.n_epochs == 60
    # measured here: ~1 M spins beside these epochs (~0.2 s)
    assert spins > 50_000, spins


def test_auto_check_schedule():
    from onlinepgs._core._sdca import next_check
    assert next_check([], 1e-6) == 1
    assert next_check([(40, 1e-2)], 1e-6) == 4                  # no rate yet: a tenth
    assert next_check([(40, 1e-2), (44, 1e-3)], 1e-6) == 11     # a quarter of 44 caps 12
    assert next_check([(40, 1e-2), (50, 1e-4)], 1e-6) == 10     # two decades in 10 more
    assert next_check([(40, 1e-3), (50, 2e-3)], 1e-6) == 5      # the gap rose: a tenth
    assert next_check([(40, 1e-2), (44, 1e-3)], 1e-6, 1) == 12  # three decades in 12 more
    assert next_check([(4, 1e-2), (5, 1e-2 / 1.1)], 1e-6, 1) == 5   # at most doubles
    X, y = dense_problem("logistic", m=300)
    auto = SDCAClassifier(sigma=1e-3, random_state=0, tol=1e-9).fit(X, y)
    every = SDCAClassifier(sigma=1e-3, random_state=0, tol=1e-9, check_every=1).fit(X, y)
    # no shrinking for logistic: the checks do not touch the iterates, so the runs agree
    # up to where they stop, and auto checks far less often for at most twice the epochs
    assert auto.duality_gap_ <= 1e-9 * auto.primal_objective_
    assert every.n_iter_ <= auto.n_iter_ <= 2 * every.n_iter_
    assert len(auto.gap_history_) < len(every.gap_history_) / 2
    longer = SDCAClassifier(sigma=1e-3, random_state=0, tol=0.0, check_every=1,
                            max_epochs=auto.n_iter_)
    with pytest.warns(ConvergenceWarning):
        longer.fit(X, y)
    np.testing.assert_array_equal(auto.gap_history_, longer.gap_history_[auto.gap_epochs_ - 1])


@pytest.mark.parametrize("loss", ["hinge", "logistic", "squared"])
def test_weights_far_from_one_solve_the_same_objective(loss):
    """SDCA's objective averages by the sum of the weights: weights 2**1000 times
    larger (or smaller) are the same problem, solved in a power-of-two unit to the same
    bits (dual_coef_ in the caller's units); weights near 1e300 to rounding. They were
    refused with "l1 must be a finite number >= 0, got nan", or fitted after overflow
    warnings (a hinge model of 1e-304 weights, a regressor of NaN)."""
    rng = np.random.RandomState(0)
    X = rng.randn(60, 3)
    y = X @ [1.0, 2.0, -1.0] if loss == "squared" else np.where(X[:, 0] > 0, 1, -1)
    sw = rng.uniform(0.5, 1.5, 60)
    est = (SDCARegressor if loss == "squared" else SDCAClassifier)(
        loss=loss, sigma=0.01, tol=1e-10, max_epochs=5000, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plain = est.fit(X, y, sample_weight=sw)
        coef, dual, primal = plain.coef_.copy(), plain.dual_coef_.copy(), plain.primal_objective_
        for shift in (1000, -1000):
            far = est.fit(X, y, sample_weight=np.ldexp(sw, shift))
            np.testing.assert_array_equal(far.coef_, coef)
            np.testing.assert_array_equal(far.dual_coef_, np.ldexp(dual, shift))
            assert far.primal_objective_ == primal
        near = est.fit(X, y, sample_weight=sw * 1e300)
        np.testing.assert_allclose(near.coef_, coef, rtol=1e-6, atol=1e-6)
        one = np.ones(60)
        one[7] = 1e308  # one row outweighs the rest: the problem of that row alone
        big = est.fit(X, y, sample_weight=one)
        alone = est.fit(X, y, sample_weight=(np.arange(60) == 7) * 1.0)
        np.testing.assert_allclose(big.coef_, alone.coef_, rtol=1e-6, atol=1e-6)
