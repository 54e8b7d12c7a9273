"""Fenchel conjugates of the compiled losses and of the regularizer r, against numerical sups.

The yardsticks are independent of the code under test: the losses come from the NumPy
transcription in `reference.py`, the sups from grids refined by scipy.optimize, and the
domains of the conjugates are written here from the loss definitions.
"""
import numpy as np
import pytest
from scipy.optimize import minimize, minimize_scalar

from onlinepgs._core._losses import (
    CLASSIFICATION_LOSSES,
    LOSS_CODES,
    loss_conjugate_py,
    loss_derivative_py,
    loss_value_py,
)
from onlinepgs._core._regularizer import (
    norm,
    regularizer_conjugate,
    regularizer_link,
    regularizer_value,
)

import reference

EPS = 0.3  # the huber / epsilon_insensitive width used throughout


def labels(loss):
    return [-1.0, 1.0] if loss in CLASSIFICATION_LOSSES else [-1.7, 0.0, 2.3]


def in_domain(loss, u, y):
    """Where sup_z (u z - l(z; y)) is finite, from the slopes of l at z -> +-inf."""
    v = u * y
    if loss in ("hinge", "logistic", "smooth_hinge"):
        return -1.0 <= v <= 0.0      # slopes -y (yz -> -inf) and 0 (yz -> +inf)
    if loss == "squared_hinge":
        return v <= 0.0              # slope 0 on one side, quadratic growth on the other
    if loss == "squared":
        return True
    if loss == "huber":
        return abs(u) <= EPS
    return abs(u) <= 1.0             # absolute, epsilon_insensitive


def dual_grid(loss, y):
    """Dual values u: a grid across the domain, its boundaries exactly, and just beyond."""
    if loss in CLASSIFICATION_LOSSES:
        v = np.concatenate([np.linspace(-1.4, 0.4, 37), [-1.0, 0.0, -1.0 - 1e-12, 1e-12]])
        if loss == "squared_hinge":
            v = np.concatenate([v, [-3.0, -7.5]])
        return v * y
    if loss == "squared":
        return np.linspace(-8.0, 8.0, 33)
    b = EPS if loss == "huber" else 1.0
    return np.concatenate([np.linspace(-1.4 * b, 1.4 * b, 29), [-b, b, -b * (1 + 1e-12),
                                                               b * (1 + 1e-12), 0.0]])


def numerical_sup(loss, u, y, half_width=60.0):
    """sup over |z| <= half_width of u z - l(z; y): a fine grid, then Brent around its best."""
    def g(z):
        return u * z - float(reference.loss_value(loss, z, y, EPS))

    z = np.linspace(-half_width, half_width, 24001)
    values = u * z - reference.loss_value(loss, z, y, EPS)
    k = int(np.argmax(values))
    h = z[1] - z[0]
    lo, hi = max(z[k] - h, -half_width), min(z[k] + h, half_width)
    res = minimize_scalar(lambda t: -g(t), bounds=(lo, hi), method="bounded",
                          options={"xatol": 1e-13})
    return max(values[k], -res.fun)


@pytest.mark.parametrize("loss", sorted(LOSS_CODES))
def test_loss_conjugate_is_the_numerical_sup(loss):
    for y in labels(loss):
        for u in dual_grid(loss, y):
            got = loss_conjugate_py(loss, u, y, EPS)
            if in_domain(loss, u, y):
                assert np.isfinite(got), (loss, u, y)
                assert got == pytest.approx(numerical_sup(loss, u, y), abs=1e-9), (loss, u, y)
            else:
                assert got == np.inf, (loss, u, y)
                # and the sup really is unbounded there: it grows with the range of z
                distance = min(abs(u - b) for b in _boundaries(loss, y))
                if distance > 1e-3:
                    far, near = numerical_sup(loss, u, y, 1e4), numerical_sup(loss, u, y, 1e2)
                    assert far - near > 0.5 * distance * (1e4 - 1e2), (loss, u, y)


def _boundaries(loss, y):
    if loss in ("hinge", "logistic", "smooth_hinge"):
        return [-y, 0.0]
    if loss == "squared_hinge":
        return [0.0]
    b = EPS if loss == "huber" else 1.0
    return [-b, b]


@pytest.mark.parametrize("loss", sorted(LOSS_CODES))
def test_fenchel_young_equality_at_subgradients(loss):
    """l(z) + l*(l'(z)) = z l'(z): the compiled subgradient lies in the conjugate's domain."""
    for y in labels(loss):
        kinks = [y, 0.0, 1.0 / y] if loss in CLASSIFICATION_LOSSES else [y, y - EPS, y + EPS]
        z = np.concatenate([np.linspace(-5, 5, 201), kinks, [-40.0, 40.0]])
        d = loss_derivative_py(loss, z, y, EPS)
        lhs = loss_value_py(loss, z, y, EPS) + loss_conjugate_py(loss, d, y, EPS)
        np.testing.assert_allclose(lhs, z * d, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("loss, z_of_y, low, high", [
    # every element of the subdifferential at a kink satisfies Fenchel-Young too
    ("hinge", lambda y: y, -1.0, 0.0),  # at yz = 1: l' = t y, t in [-1, 0]
    ("absolute", lambda y: y, -1.0, 1.0),
    ("epsilon_insensitive", lambda y: y + EPS, 0.0, 1.0),
    ("epsilon_insensitive", lambda y: y - EPS, -1.0, 0.0),
])
def test_fenchel_young_on_the_whole_subdifferential(loss, z_of_y, low, high):
    for y in labels(loss):
        z = z_of_y(y)
        for t in np.linspace(low, high, 11):
            u = t * y if loss == "hinge" else t  # hinge: u y in [-1, 0]
            value = loss_value_py(loss, z, y, EPS) + loss_conjugate_py(loss, u, y, EPS)
            assert value == pytest.approx(z * u, abs=1e-12), (y, u)


def test_conjugate_broadcasts_and_logistic_ends_are_finite():
    out = loss_conjugate_py("logistic", np.array([[-1.0], [0.0], [1.0]]), np.array([1.0, -1.0]))
    assert out.shape == (3, 2)
    np.testing.assert_array_equal(out, [[0.0, np.inf], [0.0, 0.0], [np.inf, 0.0]])


# ---- the regularizer r(w) = ||w||_p^2 / (2 (p - 1)) on R^n or the l_p ball -----------------

PS = [2.0, 1.5, 1.2]


def np_norm(x, p):
    return float(np.sum(np.abs(x) ** p) ** (1.0 / p))


def numerical_rstar(theta, p, radius=None):
    """sup over w in S of <theta, w> - r(w), by BFGS (R^n) or SLSQP (the ball)."""
    def neg(w):
        return -(theta @ w - np_norm(w, p) ** 2 / (2 * (p - 1)))

    q = p / (p - 1)
    start = np.sign(theta) * np.abs(theta) ** (q - 1)  # a sensible direction, not the answer
    best = None
    for scale in (0.1, 1.0, 3.0):
        w0 = scale * start / max(np_norm(start, p), 1e-300)
        if radius is None:
            res = minimize(neg, w0, method="BFGS", options={"gtol": 1e-11})
        else:
            w0 = w0 * min(1.0, 0.5 * radius / np_norm(w0, p))
            res = minimize(neg, w0, method="SLSQP", options={"ftol": 1e-15, "maxiter": 500},
                           constraints=[{"type": "ineq",
                                         "fun": lambda w: radius - np_norm(w, p)}])
            if np_norm(res.x, p) > radius * (1 + 1e-9):
                continue
        if best is None or res.fun < best.fun:
            best = res
    return -best.fun, best.x


def test_norm_and_value_match_numpy_at_any_scale():
    rng = np.random.RandomState(0)
    for p in PS + [1.01]:
        for scale in (1e-200, 1.0, 1e200):
            x = rng.randn(7) * scale
            expected = scale * np_norm(x / scale, p)
            assert norm(x, p) == pytest.approx(expected, rel=1e-12)
        x = rng.randn(5)
        assert regularizer_value(x, p) == pytest.approx(np_norm(x, p) ** 2 / (2 * (p - 1)),
                                                        rel=1e-12)
    assert norm([], 1.5) == 0.0 and norm(np.zeros(3), 1.5) == 0.0


@pytest.mark.parametrize("p", PS)
def test_regularizer_is_infinite_outside_the_ball(p):
    w = np.array([0.3, -1.2, 0.7])
    B = np_norm(w, p)
    assert regularizer_value(w, p, radius=B) == pytest.approx(B**2 / (2 * (p - 1)))
    assert regularizer_value(w, p, radius=B * (1 - 1e-9)) == np.inf
    assert np.isfinite(regularizer_value(w, p, radius=B * (1 + 1e-9)))


@pytest.mark.parametrize("p", PS)
@pytest.mark.parametrize("radius", [None, 0.8])
def test_rstar_is_the_numerical_sup_and_the_link_attains_it(p, radius):
    rng = np.random.RandomState(int(10 * p))
    q = p / (p - 1)
    thetas = [rng.randn(3) for _ in range(3)]
    if radius is not None:
        # both sides of the ball's switch point (p - 1) ||theta||_q = B, and on it exactly
        direction = rng.randn(3)
        direction /= np_norm(direction, q)
        thetas += [f * radius / (p - 1) * direction for f in (0.5, 1.0, 2.0, 6.0)]
    for theta in thetas:
        expected, argmax = numerical_rstar(theta, p, radius)
        got = regularizer_conjugate(theta, p, radius)
        assert got == pytest.approx(expected, rel=1e-7, abs=1e-10)
        w = regularizer_link(theta, p, radius)
        # grad r* is the maximizer: it attains r*, inside S, and where scipy found it
        attained = theta @ w - np_norm(w, p) ** 2 / (2 * (p - 1))
        assert attained == pytest.approx(got, rel=1e-12, abs=1e-14)
        if radius is not None:
            assert np_norm(w, p) <= radius * (1 + 1e-12)
        np.testing.assert_allclose(w, argmax, atol=2e-4 * max(1.0, np_norm(w, p)))


@pytest.mark.parametrize("p", PS)
def test_rstar_closed_forms_and_fenchel_young_inequality(p):
    q = p / (p - 1)
    rng = np.random.RandomState(1)
    B = 0.5
    for _ in range(50):
        theta, w = rng.randn(4) * rng.choice([0.1, 1, 10]), rng.randn(4)
        t = np_norm(theta, q)
        assert regularizer_conjugate(theta, p) == pytest.approx(t**2 / (2 * (q - 1)), rel=1e-12)
        ball = t**2 / (2 * (q - 1)) if (p - 1) * t <= B else B * t - B**2 / (2 * (p - 1))
        assert regularizer_conjugate(theta, p, B) == pytest.approx(ball, rel=1e-12)
        # r(w) + r*(theta) >= <theta, w> on both domains (w scaled into the ball for S_B)
        assert regularizer_value(w, p) + regularizer_conjugate(theta, p) >= theta @ w - 1e-12
        wb = w * min(1.0, B / np_norm(w, p))
        assert (regularizer_value(wb, p, B) + regularizer_conjugate(theta, p, B)
                >= theta @ wb - 1e-12)
    assert regularizer_conjugate(np.zeros(3), p, B) == 0.0
    np.testing.assert_array_equal(regularizer_link(np.zeros(3), p, B), np.zeros(3))


def test_bad_regularizer_arguments_are_named():
    with pytest.raises(ValueError, match="p must be in"):
        regularizer_conjugate([1.0], 2.5)
    with pytest.raises(ValueError, match="radius must be > 0"):
        regularizer_value([1.0], 2.0, radius=-1.0)
