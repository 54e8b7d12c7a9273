"""The l_q mirror map both solvers share (onlinepgs/_core/_mirror.pxd): one window and
headroom of the scale M, one running N kept exact, w = grad r*(lambda) near p = 1.

Yardsticks: the documented rule written out here in Python, and NumPy's powers of the
dual vector (in logarithms where they would overflow)."""
import numpy as np
import pytest
import scipy.sparse as sp

from onlinepgs import PGSClassifier
from onlinepgs._core import PGSState
from onlinepgs._core._sdca import SDCAProblem


def documented_window(p):
    """(r_hi, headroom) of docs/design/core.md: 2 and 1.75, narrowed to 2^g and 1.75^g with
    g = 512 / (q - 1) where q - 1 > 512."""
    q = p / (p - 1.0)
    if q - 1.0 > 512.0:
        g = 512.0 / (q - 1.0)
        return 2.0 ** g, 1.75 ** g
    return 2.0, 1.75


def small_problem(seed=0, m=300, n=40):
    rng = np.random.RandomState(seed)
    X = sp.random(m, n, density=0.2, random_state=rng, format="csr")
    X.data = rng.rand(X.nnz) + 0.1
    y = np.where(rng.rand(m) > 0.5, 1.0, -1.0)
    return X, y


def grad_rstar_logs(v, p):
    """grad r*(v)_j = (p - 1) ||v||_q^(2-q) |v_j|^(q-1) sgn(v_j), in logarithms (q - 1 is
    in the thousands near p = 1: the powers themselves overflow)."""
    q = p / (p - 1.0)
    a = np.abs(v)
    big = a.max()
    log_norm = np.log(big) + np.log(np.sum((a / big) ** q)) / q
    with np.errstate(divide="ignore"):
        log_w = np.log(p - 1.0) + (2.0 - q) * log_norm + (q - 1.0) * np.log(a)
    return np.sign(v) * np.exp(log_w)


@pytest.mark.parametrize("p", [1.8, 1.5, 1.001, 1.0005])
def test_both_solvers_keep_one_window_and_headroom(p):
    X, y = small_problem()
    r_hi, headroom = documented_window(p)
    state = PGSState(p=p, sigma=1e-2, n_features=X.shape[1])
    assert state.r_hi == pytest.approx(r_hi, rel=1e-15)
    assert state.headroom == pytest.approx(headroom, rel=1e-15)
    prob = SDCAProblem(X.data, X.indices, X.indptr, X.shape[1], y, np.ones(len(y)),
                       loss="logistic", p=p, sigma=1e-2)
    prob.run(5, tol=0.0)  # each gap check refreshes M from v
    v = prob.v_vector
    assert prob.scale_m == pytest.approx(headroom * np.abs(v).max(), rel=1e-15)
    # the PGS state after a fit: M within its window of the largest |lambda_j|
    est = PGSClassifier(p=p, sigma=1e-2, random_state=0).fit(X, y)
    lam = np.abs(np.asarray(est._state.lam_a)).max()
    M = np.asarray(est._state.scale_a)[0]
    assert lam <= r_hi * M and lam >= M / r_hi


@pytest.mark.parametrize("p", [1.5, 1.0005])
def test_sdca_weights_are_grad_rstar_of_v(p):
    """Near p = 1 (q - 1 = 2000) every power of v leaves the double range: the narrowed
    window keeps w = grad r*(v) exact, and the certificate valid."""
    X, y = small_problem(seed=1)
    prob = SDCAProblem(X.data, X.indices, X.indptr, X.shape[1], y, np.ones(len(y)),
                       loss="logistic", p=p, sigma=1e-2)
    prob.run(30, tol=0.0)
    w = prob.weights()
    expected = grad_rstar_logs(prob.v_vector, p)
    assert np.all(np.isfinite(w))
    np.testing.assert_allclose(w, expected, rtol=1e-9, atol=1e-12 * np.abs(expected).max())
    info = prob.gap_info()
    assert -1e-12 <= info["gap"] <= 1e-6 * info["primal"]


def test_running_n_stays_exact_between_recounts():
    """N = sum_j (|lambda_j| / M)^q is kept running by both solvers, step by step, and
    recounted on the shared rule: it matches NumPy's sum at any point."""
    X, y = small_problem(seed=2, m=2000, n=60)
    p = 1.5
    q = p / (p - 1.0)
    prob = SDCAProblem(X.data, X.indices, X.indptr, X.shape[1], y, np.ones(len(y)),
                       loss="logistic", p=p, sigma=1e-3, order="cyclic")
    rows = np.random.RandomState(0).randint(0, len(y), 5000)
    prob.steps(rows)  # no gap check: N only running and recounted
    v = prob.v_vector
    np.testing.assert_allclose(prob.norm_n, np.sum((np.abs(v) / prob.scale_m) ** q),
                               rtol=1e-10)
    est = PGSClassifier(p=p, sigma=1e-3, random_state=0).partial_fit(X, y, classes=[-1, 1])
    lam = np.asarray(est._state.lam_a)[:, 0]
    M = np.asarray(est._state.scale_a)[0]
    np.testing.assert_allclose(np.asarray(est._state.norm_a)[0],
                               np.sum((np.abs(lam) / M) ** q), rtol=1e-10)
