"""PGS reaches the optimum that scipy.optimize finds for the same objective."""
import numpy as np
import pytest
from scipy.optimize import minimize

from onlinepgs import PGSClassifier, PGSRegressor

from reference import loss_derivative, loss_value


def objective(wb, X, y, p, sigma, loss):
    """F(w) = sigma ||w||_p^2 / (2(p-1)) + mean loss, w including the intercept's weight."""
    z = X @ wb[1:] + wb[0]
    norm = np.sum(np.abs(wb) ** p) ** (1 / p)
    value = sigma * norm**2 / (2 * (p - 1)) + loss_value(loss, z, y).mean()
    d = loss_derivative(loss, z, y) / len(y)
    grad_r = norm ** (2 - p) * np.abs(wb) ** (p - 1) * np.sign(wb) / (p - 1) if norm > 0 else 0 * wb
    grad = sigma * grad_r + np.concatenate([[d.sum()], X.T @ d])
    return value, grad


def scipy_optimum(X, y, p, sigma, loss):
    res = minimize(objective, np.full(X.shape[1] + 1, 0.01), args=(X, y, p, sigma, loss),
                   jac=True, method="L-BFGS-B", options={"ftol": 1e-15, "gtol": 1e-12,
                                                         "maxiter": 10000})
    return res.fun


@pytest.mark.parametrize("p", [2.0, 1.5])
@pytest.mark.parametrize("loss", ["logistic", "squared_hinge", "smooth_hinge", "squared"])
def test_objective_within_1e3_of_scipy(p, loss):
    rng = np.random.RandomState(0)
    m, n = 300, 8
    X = rng.randn(m, n) / np.sqrt(n)
    w_true = rng.randn(n)
    sigma = 0.02
    if loss == "squared":
        y = X @ w_true + 0.5 + 0.3 * rng.randn(m)
        est = PGSRegressor(loss=loss, p=p, sigma=sigma, max_epochs=300, random_state=0)
    else:
        y = np.where(X @ w_true + 0.3 * rng.randn(m) > 0.2, 1.0, -1.0)
        est = PGSClassifier(loss=loss, p=p, sigma=sigma, max_epochs=300, random_state=0)
    est.fit(X, y)
    wb = np.concatenate([est.intercept_.ravel(), est.coef_.ravel()])
    f_pgs, _ = objective(wb, X, y, p, sigma, loss)
    f_opt = scipy_optimum(X, y, p, sigma, loss)
    assert f_pgs >= f_opt - 1e-9 * abs(f_opt)
    assert (f_pgs - f_opt) / abs(f_opt) < 1e-3


@pytest.mark.parametrize("p", [2.0, 1.5])
@pytest.mark.parametrize("loss", ["logistic", "smooth_hinge", "squared"])
def test_online_dual_objective_is_a_lower_bound_that_tightens(p, loss):
    """After whole epochs with k = 1 every row has counted equally often, so the solver's
    own dual objective is a certified lower bound on scipy's optimum of F; the online gap
    (progressive objective minus that bound) shrinks as the passes go on."""
    rng = np.random.RandomState(1)
    m, n = 200, 6
    X = rng.randn(m, n) / np.sqrt(n)
    w_true = rng.randn(n)
    sigma = 0.05
    if loss == "squared":
        y = X @ w_true + 0.3 * rng.randn(m)
        make = lambda e: PGSRegressor(loss=loss, p=p, sigma=sigma, max_epochs=e, random_state=0)
    else:
        y = np.where(X @ w_true + 0.3 * rng.randn(m) > 0, 1.0, -1.0)
        make = lambda e: PGSClassifier(loss=loss, p=p, sigma=sigma, max_epochs=e, random_state=0)
    f_opt = scipy_optimum(X, y, p, sigma, loss)
    gaps = []
    for epochs in (1, 4, 40):
        stats = make(epochs).fit(X, y).online_stats_
        assert stats["dual_objective"] <= f_opt + 1e-12 * abs(f_opt)
        assert stats["online_objective"] - stats["dual_objective"] == pytest.approx(
            stats["online_duality_gap"])
        gaps.append(stats["online_duality_gap"])
    assert gaps[0] > gaps[1] > gaps[2] > 0
    assert gaps[2] < 0.1 * gaps[0]
