"""The NumPy transcriptions of adaptive, normalized dual averaging (tests/reference.py:
`reference_adaptive`, eager, every coordinate every step; `lazy_adaptive`, only a step's
coordinates, the averages settled between touches in closed form) against each other and
against independent yardsticks: direct sums, scipy's optimum of the scaled objective and
its Fenchel dual, the same rows with a column multiplied by c, and a row of weight k
against k copies. Pure NumPy/SciPy: the yardstick the compiled form (issue 52) is built
against.
"""
import math

import numpy as np
import pytest
from scipy.optimize import minimize

import reference
from reference import combine, gap_sum, harmonic_gap, lazy_adaptive, reference_adaptive

ITERATES = ["last", "average", "weighted", "weighted2", "random"]
RND_T = 37  # the random iterate's step


def stream(m=200, n=16, seed=0):
    """Rows whose columns live on scales from 1e-2 to 1e2 (a column's largest value
    arriving late, so scales grow between touches), an intercept column of ones, labels
    from a few columns, importance weights in [0.5, 2]."""
    rng = np.random.RandomState(seed)
    X = rng.randn(m, n) * (rng.rand(m, n) < 0.3)
    X *= 10.0 ** rng.uniform(-2, 2, n)
    X[m // 2:, 3] *= 50.0  # the largest |x| of column 3 comes late
    X[:, 0] = 1.0
    y = np.where(X[:, 1:5] @ (1 / np.max(np.abs(X[:, 1:5]), axis=0)) + 0.3 * rng.randn(m) > 0,
                 1.0, -1.0)
    return X, y, rng.uniform(0.5, 2.0, m)


def assert_close(actual, expected, rtol):
    scale = max(np.max(np.abs(expected)), 1e-300)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=rtol * scale)


# ---- the closed forms between touches ----------------------------------------------------

def plain_sum(A, l1, c, sigma, a, b, k):
    return math.fsum(t**k * max(A - l1 * t, 0.0) / (sigma * t + c) for t in range(a, b + 1))


@pytest.mark.parametrize("sigma, c", [(0.0, 3.0), (0.5, 2.0), (1e-2, 40.0), (1e-7, 5.0),
                                      (1e-12, 1.0), (3.0, 1e-9)])
@pytest.mark.parametrize("k", [0, 1, 2])
@pytest.mark.parametrize("l1", [0.0, 0.01])
def test_the_lazy_sums_between_touches_are_the_plain_sums(sigma, c, k, l1):
    """sum_{t=a}^{b} t^k (A - l1 t)_+ / (sigma t + c): exact polynomial sums, the
    digamma closed form and the expansion for c / sigma far beyond t all agree with a
    direct fsum to 1e-13, including ranges that the l1 threshold cuts."""
    for a, b in [(1, 1), (1, 40), (7, 8), (300, 301), (250, 900), (5000, 5012)]:
        for A in (0.3, 4.0, 5.05):  # 5.05: the threshold t* = 505 falls inside a range
            got = gap_sum(A, l1, c, sigma, a, b, k)
            want = plain_sum(A, l1, c, sigma, a, b, k)
            assert abs(got - want) <= 1e-13 * abs(want) + 1e-300, (a, b, A, got, want)


def test_the_harmonic_gap_is_the_digamma_difference_without_its_cancellation():
    """sum_{j<count} 1/(y + j) to a few ulps where psi(y + count) - psi(y) in floats
    loses digits (one term at y = 1e6: 1e-6 from two numbers near 13.8)."""
    from scipy.special import digamma

    for y, count in [(0.5, 1), (0.5, 300), (15.5, 3), (1e6, 1), (1e6, 1000), (3e10, 7)]:
        want = math.fsum(1.0 / (y + j) for j in range(count))
        assert abs(harmonic_gap(y, count) - want) <= 4e-16 * want
    naive = digamma(1e6 + 1) - digamma(1e6)
    assert abs(naive - 1e-6) > 1e-12 * 1e-6  # why harmonic_gap exists


# ---- lazy equals eager -----------------------------------------------------------------

FORMS = [(2.0, False), (2.0, True), (1.5, False)]


@pytest.mark.parametrize("p, centered", FORMS, ids=["p2", "p2-centered", "p1.5"])
@pytest.mark.parametrize("l1", [0.0, 0.01])
@pytest.mark.parametrize("batch_size", [1, 4])
@pytest.mark.parametrize("iterate", ITERATES)
def test_lazy_equals_eager(p, centered, l1, batch_size, iterate):
    """Every reported iterate and every progressive margin of the lazy run equal the
    eager run's to 1e-12 (relative to the largest), over 200 rows of mixed scales with
    importance weights; sigma 0, 1e-2 and 1e-7 reach each closed form of the averages.
    p < 2 with l1 keeps the last iterate only: the lazy form refuses the others."""
    X, y, sw = stream()
    config = dict(p=p, centered=centered, l1=l1, batch_size=batch_size, loss="logistic",
                  sample_weight=sw, eta=0.5)
    if p != 2.0 and l1 > 0 and iterate != "last":
        with pytest.raises(ValueError, match="last iterate"):
            lazy_adaptive(X, y, sigma=0.01, iterate=iterate, **config)
        return
    averaged = iterate in reference.AVERAGES and p == 2.0
    for sigma in ((0.0, 1e-2, 1e-7) if averaged else (1e-2,)):
        iterates, stats = reference_adaptive(X, y, sigma=sigma, **config)
        w, lazy_stats = lazy_adaptive(X, y, sigma=sigma, iterate=iterate, rnd_t=RND_T,
                                      **config)
        assert_close(w, combine(iterates, iterate, RND_T), 1e-12)
        assert_close(lazy_stats["margins"], stats["margins"], 1e-12)
        assert lazy_stats["progressive_loss"] == pytest.approx(stats["progressive_loss"],
                                                               rel=1e-12)
        if l1 > 0 and iterate == "last":
            assert np.array_equal(w == 0, iterates[-1] == 0)  # the same exact zeros
            assert np.sum(w == 0) >= 3


@pytest.mark.parametrize("l1", [0.0, 0.01])
@pytest.mark.parametrize("iterate", ["last", "weighted2", "random"])
def test_lazy_equals_eager_on_the_p_below_2_ball(l1, iterate):
    """The ball ||S w||_p <= B at p = 1.5 (the stabilizer is a multiple of r: PGS's
    global factor), with a radius that binds."""
    X, y, sw = stream(seed=3)
    free, _ = reference_adaptive(X, y, p=1.5, sigma=1e-3, loss="logistic", l1=l1,
                                 sample_weight=sw)
    s = np.max(np.abs(X), axis=0)
    radius = 0.5 * np.sum(np.abs(s * free[-1][:, 0]) ** 1.5) ** (1 / 1.5)
    config = dict(p=1.5, sigma=1e-3, loss="logistic", l1=l1, sample_weight=sw, radius=radius)
    if l1 > 0 and iterate != "last":
        return
    iterates, stats = reference_adaptive(X, y, **config)
    v = s * iterates[-1][:, 0]
    assert np.sum(np.abs(v) ** 1.5) ** (1 / 1.5) == pytest.approx(radius, rel=1e-12)
    w, lazy_stats = lazy_adaptive(X, y, iterate=iterate, rnd_t=RND_T, **config)
    assert_close(w, combine(iterates, iterate, RND_T), 1e-12)
    assert_close(lazy_stats["margins"], stats["margins"], 1e-12)


def test_the_p2_ball_step_is_the_constrained_minimizer():
    """At p = 2 the ball's step minimizes <U, v> + sum_j D_j v_j^2 / 2 over ||v||_2 <= B
    (scipy's SLSQP on the same problem), which no global factor of the free point does;
    the lazy form refuses it (the multiplier moves every coordinate)."""
    rng = np.random.RandomState(5)
    U, acc = rng.randn(12, 1) * 3, rng.rand(12, 1) * 4
    config = dict(p=2.0, sigma=0.1, eta=0.5, l1=0.0, delta=0.1)
    v = reference.adaptive_map(U, acc, np.zeros(1), 7, radius=0.4, **config)[:, 0]
    D = 0.1 * 7 + (0.1 + np.sqrt(acc[:, 0])) / 0.5
    res = minimize(lambda x: (U[:, 0] @ x + D @ x**2 / 2, U[:, 0] + D * x), np.zeros(12),
                   jac=True, method="SLSQP", options={"ftol": 1e-15, "maxiter": 1000},
                   constraints=[{"type": "ineq", "fun": lambda x: 0.16 - x @ x,
                                 "jac": lambda x: -2 * x}])
    np.testing.assert_allclose(v, res.x, atol=1e-7)
    free = reference.adaptive_map(U, acc, np.zeros(1), 7, **config)[:, 0]
    assert np.max(np.abs(free * 0.4 / np.linalg.norm(free) - v)) > 1e-3
    X, y, _ = stream(m=20)
    with pytest.raises(ValueError, match="no lazy form"):
        lazy_adaptive(X, y, p=2.0, sigma=0.1, loss="logistic", radius=1.0)


# ---- scale invariance ------------------------------------------------------------------

@pytest.mark.parametrize("p, centered", FORMS, ids=["p2", "p2-centered", "p1.5"])
@pytest.mark.parametrize("iterate", ["last", "weighted2"])
def test_multiplying_columns_changes_no_prediction(p, centered, iterate):
    """Columns multiplied by factors in [1e-3, 1e3] (each its own) leave every progressive
    margin and the reported model's test margins equal within 1e-9, relative, with sigma,
    l1 (p = 2) and the ball (p = 1.5): the objective is on S w and the steps on scaled
    gradients, at p < 2 too (its scalar stabilizer is built from scaled gradients). The
    global-step PGS of the same rows is not invariant (the check can fail)."""
    X, y, sw = stream(seed=7)
    X_test, _, _ = stream(m=50, seed=8)
    c = 10.0 ** np.random.RandomState(9).uniform(-3, 3, X.shape[1])
    c[0] = 1.0  # the intercept's column stays 1
    config = dict(p=p, centered=centered, sigma=1e-3, loss="logistic", sample_weight=sw,
                  l1=0.01 if p == 2.0 else 0.0, radius=None if p == 2.0 else 2.0,
                  iterate=iterate, rnd_t=RND_T)
    w, stats = lazy_adaptive(X, y, **config)
    w_c, stats_c = lazy_adaptive(X * c, y, **config)
    assert_close(stats_c["margins"], stats["margins"], 1e-9)
    assert_close((X_test * c) @ w_c, X_test @ w, 1e-9)
    iterates, _ = reference.reference_pgs(X, y, p=p, sigma=1e-3, loss="logistic")
    iterates_c, _ = reference.reference_pgs(X * c, y, p=p, sigma=1e-3, loss="logistic")
    plain, plain_c = X_test @ iterates[-1], (X_test * c) @ iterates_c[-1]
    assert np.max(np.abs(plain_c - plain)) > 0.1 * np.max(np.abs(plain))


# ---- importance weights ----------------------------------------------------------------

def copies_of(X, y, sw, row, k):
    """The rows with row `row`'s weight multiplied by k, and the rows with it repeated k
    times."""
    weighted = sw.copy()
    weighted[row] *= k
    reps = np.where(np.arange(len(y)) == row, k, 1)
    return (X, y, weighted), (np.repeat(X, reps, axis=0), np.repeat(y, reps),
                              np.repeat(sw, reps))


@pytest.mark.parametrize("p", [2.0, 1.5])
def test_a_row_of_weight_k_is_k_copies_while_its_slope_holds(p):
    """Where the slope cannot change along the way (the hinge inside its margin, small
    steps) and t does not enter (sigma = l1 = 0), a row of weight k and k copies of it
    reach the same model and the same later margins, to 1e-12: at p = 2 (uncentered) the
    first copy, then the invariant update of the rest, whose hinge margin rises at rate
    Q and whose accumulators take (k - 1) l'^2 (the bound G's first term: l(z) / Q is
    larger at eta 1e-3), adds what the copies add; at p < 2 the linear rule (k gt, k
    ||gt||_q^2) is k copies with the slope of the first."""
    X, y, sw = stream(m=60, seed=11)
    (Xw, yw, sww), (Xk, yk, swk) = copies_of(X, y, sw, row=20, k=5)
    config = dict(p=p, sigma=0.0, loss="hinge", eta=1e-3)
    w, stats = lazy_adaptive(Xw, yw, sample_weight=sww, **config)
    w_k, stats_k = lazy_adaptive(Xk, yk, sample_weight=swk, **config)
    assert np.max(np.abs(stats_k["margins"])) < 1  # the hinge's slope never changed
    assert_close(w_k, w, 1e-12)
    assert_close(stats_k["margins"][-39:], stats["margins"][-39:], 1e-12)


SCALAR_LOSSES = ["squared", "absolute", "huber", "epsilon_insensitive", "hinge", "logistic",
                 "squared_hinge", "smooth_hinge"]


@pytest.mark.parametrize("loss", SCALAR_LOSSES)
def test_the_invariant_move_is_the_limit_of_many_small_steps(loss):
    """`invariant_move(z, y, tau)` against its definition taken literally: 200,000
    gradient steps of size tau / 200,000 from z (the copies of a row of tiny weight each,
    at a frozen rate), for margins on both sides of the loss's minimizer and on its
    edges, tau from 1e-3 to 30: within 1e-4 and two steps (the steps' own error is
    O(tau / N); at a kink they swing about it by a step)."""
    regression = loss in ("squared", "absolute", "huber", "epsilon_insensitive")
    starts = [-3.0, -1.0, -0.3, -0.05, 0.0, 0.05, 0.5, 0.95, 1.0, 2.5]
    cases = [(z, y, tau) for z in starts for y in ((0.7, -2.0) if regression else (1.0, -1.0))
             for tau in (1e-3, 0.2, 1.0, 4.0, 30.0)]
    z0 = np.array([c[0] for c in cases])
    y = np.array([c[1] for c in cases])
    tau = np.array([c[2] for c in cases])
    steps = 200_000
    z = z0.copy()
    for _ in range(steps):
        z -= tau / steps * reference.loss_derivative(loss, z, y)
    moves = np.array([reference.invariant_move(loss, *c) for c in cases])
    gap = np.abs(z0 + moves - z)
    assert np.all(gap <= 1e-4 + 2 * tau / steps), (np.max(gap), cases[np.argmax(gap)])
    # never past the minimizer (up to a rounding at it): the residual keeps its sign, a
    # margin below 1 does not pass 1
    if regression:
        assert np.all((z0 + moves - y) * np.sign(z0 - y) >= -1e-12)
    elif loss != "logistic":
        assert np.all(y * (z0 + moves) <= np.maximum(1.0, y * z0) + 1e-12)


def warm_rows(m=40, n=6, seed=0):
    """Rows of mixed scales with an intercept column, a real target and its sign."""
    rng = np.random.RandomState(seed)
    X = rng.randn(m, n) * (rng.rand(m, n) < 0.6)
    X *= 10.0 ** rng.uniform(-2, 2, n)
    X[:, 0] = 1.0
    score = X @ (rng.randn(n) / np.abs(X).max(0))
    return X, score, np.where(score > 0, 1.0, -1.0)


@pytest.mark.parametrize("centered", [False, True])
@pytest.mark.parametrize("loss", ["squared", "logistic", "squared_hinge", "smooth_hinge"])
def test_a_row_of_weight_k_moves_its_margin_as_k_copies_do(loss, centered):
    """Rows 10..39 of a stream, each once with weight k and once as k copies (sigma =
    l1 = 0): where one copy does not pass the loss's minimizer (the copies' steps are
    stable), the weighted row's margin moves within 12% of the copies' move for k = 2, 3,
    5, 10 and 100 (the worst measured: 9.7%, smooth hinge, k = 2), and within 1e-6 of it
    at k = 100 where the copies reach the minimizer (squared, squared and smooth hinge).
    The linear rule (k l'(z) x / s) moved it 1.01 to 84 times as far (median 1.2 at
    k = 2, 20 at k = 100)."""
    X, score, sign = warm_rows()
    y = score if loss == "squared" else sign
    config = dict(p=2.0, sigma=0.0, loss=loss, eta=0.5, centered=centered)
    compared = 0
    for row in range(10, 40):
        head, label = X[:row + 1], y[:row + 1]
        _, twice = lazy_adaptive(np.vstack([head, X[row:row + 1]]), np.r_[label, y[row]],
                                 **config)
        z0, z1 = twice["margins"][row][0], twice["margins"][row + 1][0]
        d0 = reference.loss_derivative(loss, z0, y[row])
        if d0 == 0 or d0 * reference.loss_derivative(loss, z1, y[row]) <= 0:
            continue  # the loss is flat there, or one copy passes the minimizer
        for k in (2, 3, 5, 10, 100):
            sw = np.ones(row + 1)
            sw[row] = k
            w, _ = lazy_adaptive(head, label, sample_weight=sw, **config)
            reps = np.where(np.arange(row + 1) == row, k, 1)
            w_k, _ = lazy_adaptive(np.repeat(head, reps, axis=0), np.repeat(label, reps),
                                   **config)
            moved, copies = X[row] @ w[:, 0] - z0, X[row] @ w_k[:, 0] - z0
            assert abs(moved - copies) <= 0.12 * abs(copies), (row, k, moved, copies)
            if k == 100 and loss != "logistic":
                assert abs(moved - copies) <= 1e-6 * abs(copies)
            compared += 1
    assert compared >= 50


@pytest.mark.parametrize("centered", [False, True])
def test_a_heavy_row_walks_to_the_label_and_no_further(centered):
    """A fresh row (every scaled value +-1) of weight k, squared loss, label 1: the first
    copy steps each coordinate by eta from the slope at 0 and lands on 1.5, past the
    label, as a row of weight 1 does; the rest of the importance brings the margin back
    toward 1, monotonically in k, never below it, and to 1 (1e-12) at k = 400 and 1e6.
    The linear rule stepped eta sqrt(k) a coordinate: 30 at k = 400, 1500 at k = 1e6.
    Its k copies stop at the label too (within 0.1 at k = 400)."""
    X = np.array([[1.0, 3.0, -2.0]])
    y = np.array([1.0])
    config = dict(p=2.0, sigma=0.0, loss="squared", eta=0.5, centered=centered)
    margins = []
    for k in (1.0, 1.5, 2.0, 5.0, 400.0, 1e6):
        w, _ = lazy_adaptive(X, y, sample_weight=np.array([k]), **config)
        margins.append(float(X[0] @ w[:, 0]))
    assert margins[0] == pytest.approx(1.5)
    assert np.all(np.diff(margins) <= 1e-15) and min(margins) >= 1.0 - 1e-12, margins
    assert margins[-2] == pytest.approx(1.0, abs=1e-12)
    assert margins[-1] == pytest.approx(1.0, abs=1e-12)
    w_k, _ = lazy_adaptive(np.repeat(X, 400, axis=0), np.repeat(y, 400), **config)
    assert abs(X[0] @ w_k[:, 0] - 1.0) < 0.1


def test_a_heavy_hinge_row_stops_at_the_margin_s_edge():
    """The hinge: a row of weight 50 whose first copy stays inside its margin rises to
    m = 1 exactly (1e-12), where its 50 copies pass it."""
    X, _, sign = warm_rows()
    config = dict(p=2.0, sigma=0.0, loss="hinge", eta=0.5)
    row = 17  # its first copy stays inside the margin: -0.69, then -0.15
    _, twice = lazy_adaptive(np.vstack([X[:row + 1], X[row:row + 1]]),
                             np.r_[sign[:row + 1], sign[row]], **config)
    assert sign[row] * twice["margins"][row + 1][0] < 1
    sw = np.ones(row + 1)
    sw[row] = 50
    w, _ = lazy_adaptive(X[:row + 1], sign[:row + 1], sample_weight=sw, **config)
    assert sign[row] * X[row] @ w[:, 0] == pytest.approx(1.0, abs=1e-12)
    reps = np.where(np.arange(row + 1) == row, 50, 1)
    w_k, _ = lazy_adaptive(np.repeat(X[:row + 1], reps, axis=0), np.repeat(sign[:row + 1], reps),
                           **config)
    assert sign[row] * X[row] @ w_k[:, 0] >= 1.0


# ---- the certificate of the scaled objective -------------------------------------------

def scaled_problem(m=80, n=6, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(m, n) * 10.0 ** rng.uniform(-2, 2, n)
    X[:, 0] = 1.0
    y = np.where(X[:, 1] / np.std(X[:, 1]) - X[:, 2] / np.std(X[:, 2])
                 + 0.5 * rng.randn(m) > 0, 1.0, -1.0)
    return X, y, rng.uniform(0.5, 2.0, m)


def primal(v, Xs, y, c, p, sigma, l1):
    """F at w = v / s: mean weighted loss + sigma r(v) + l1 ||v||_1 (v = S w)."""
    return (np.mean(c * reference.loss_value("logistic", Xs @ v, y))
            + sigma * reference.r_value(v, p) + l1 * np.sum(np.abs(v)))


def dual_at(v, Xs, y, c, p, sigma, l1):
    """D(a) at a_i = -l'(<v, x_i / s>): -(1/m) sum c_i l*(-a_i) - sigma g*(X^T (c a) /
    (sigma m)) with g* = r*(soft(., l1 / sigma))."""
    a = -reference.loss_derivative("logistic", Xs @ v, y)
    theta = Xs.T @ (c * a) / (sigma * len(y))
    soft = np.sign(theta) * np.maximum(np.abs(theta) - l1 / sigma, 0.0)
    return (-np.mean(c * reference.loss_conjugate("logistic", -a, y))
            - sigma * reference.r_conjugate(soft, p))


def scipy_minimum(Xs, y, c, p, sigma, l1):
    """min over v = v+ - v- >= 0 (smooth in the split for p > 1), L-BFGS-B."""
    n = Xs.shape[1]

    def value(x):
        v = x[:n] - x[n:]
        norm = np.sum(np.abs(v) ** p) ** (1 / p)
        grad_r = norm ** (2 - p) * np.abs(v) ** (p - 1) * np.sign(v) / (p - 1) if norm else 0 * v
        g = Xs.T @ (c * reference.loss_derivative("logistic", Xs @ v, y)) / len(y)
        g = g + sigma * grad_r
        return primal(v, Xs, y, c, p, sigma, 0.0) + l1 * x.sum(), np.r_[g + l1, -g + l1]

    res = minimize(value, np.zeros(2 * n), jac=True, method="L-BFGS-B",
                   bounds=[(0, None)] * (2 * n),
                   options={"ftol": 1e-16, "gtol": 1e-12, "maxiter": 20000})
    return res.x[:n] - res.x[n:]


@pytest.mark.parametrize("p, l1, centered", [(2.0, 0.01, False), (2.0, 0.01, True),
                                             (1.5, 0.0, False)])
def test_the_scaled_objective_s_gap_certifies_and_closes(p, l1, centered):
    """F(w) = mean loss + sigma r(S w) + l1 ||S w||_1 at the final scales: the duality gap
    of the reported model is >= F(w) - F* >= 0 (F* by scipy), it is ~0 at scipy's
    minimizer, and it closes as passes over the same rows accumulate (40 passes: below a
    fifth of 2 passes' gap)."""
    X, y, c = scaled_problem()
    sigma = 0.05
    s = np.max(np.abs(X), axis=0)
    Xs = X / s
    v_star = scipy_minimum(Xs, y, c, p, sigma, l1)
    f_star = primal(v_star, Xs, y, c, p, sigma, l1)
    assert f_star - dual_at(v_star, Xs, y, c, p, sigma, l1) < 1e-7
    gaps = []
    for passes in (2, 40):
        w, _ = lazy_adaptive(np.tile(X, (passes, 1)), np.tile(y, passes), p=p, sigma=sigma,
                             l1=l1, centered=centered, loss="logistic", eta=0.5,
                             sample_weight=np.tile(c, passes), iterate="weighted2")
        v = s * w[:, 0]
        gap = primal(v, Xs, y, c, p, sigma, l1) - dual_at(v, Xs, y, c, p, sigma, l1)
        assert gap >= primal(v, Xs, y, c, p, sigma, l1) - f_star - 1e-12
        assert primal(v, Xs, y, c, p, sigma, l1) - f_star >= -1e-12
        gaps.append(gap)
    assert gaps[1] < gaps[0] / 5 and gaps[1] < 1e-2, gaps
