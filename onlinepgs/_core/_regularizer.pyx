"""Python access to the regularizer r(w) = ||w||_p^2 / (2 (p - 1)), its conjugate r* and
its link grad r*, on R^n or the l_p ball (for tests and the duality tools)."""
import numpy as np


def _radius(radius):
    if radius is None:
        return INFINITY
    radius = float(radius)
    if not radius > 0.0:
        raise ValueError(f"radius must be > 0 or None, got {radius!r}")
    return radius


def _p(p):
    p = float(p)
    if not 1.0 < p <= 2.0:
        raise ValueError(f"p must be in (1, 2], got {p!r}")
    return p


def _vector(x):
    return np.ascontiguousarray(np.asarray(x, dtype=np.float64).ravel())


def norm(x, p):
    """||x||_p, computed without overflow for any scale of x.

    Examples
    --------
    >>> from onlinepgs._core._regularizer import norm
    >>> norm([3.0, 4.0], 2)
    5.0
    """
    cdef double[::1] v = _vector(x)
    if v.shape[0] == 0:
        return 0.0
    return lp_norm(&v[0], v.shape[0], 1, float(p))


def regularizer_value(w, p, radius=None):
    """r(w) = ||w||_p^2 / (2 (p - 1)); +inf when w is outside the ball of radius `radius`.

    Examples
    --------
    >>> from onlinepgs._core._regularizer import regularizer_value
    >>> regularizer_value([3.0, 4.0], 2), regularizer_value([3.0, 4.0], 2, radius=1.0)
    (12.5, inf)
    """
    p = _p(p)
    return reg_value(norm(w, p), p, _radius(radius))


def regularizer_conjugate(theta, p, radius=None):
    """r*(theta) = sup_{w in S} <theta, w> - r(w), S = R^n or the l_p ball.

    Examples
    --------
    >>> from onlinepgs._core._regularizer import regularizer_conjugate
    >>> regularizer_conjugate([3.0, 4.0], 2), regularizer_conjugate([3.0, 4.0], 2, radius=1.0)
    (12.5, 4.5)
    """
    p = _p(p)
    q = p / (p - 1.0)
    return reg_conjugate(norm(theta, q), p, _radius(radius))


def regularizer_link(theta, p, radius=None):
    """grad r*(theta): the w in S that attains r*(theta).

    Examples
    --------
    >>> from onlinepgs._core._regularizer import regularizer_link
    >>> regularizer_link([3.0, 4.0], 2, radius=1.0)
    array([0.6, 0.8])
    """
    p = _p(p)
    q = p / (p - 1.0)
    theta = _vector(theta)
    s = link_scale(norm(theta, q), p, _radius(radius))
    if p == 2.0:
        return s * theta
    return s * np.abs(theta) ** (q - 1.0) * np.sign(theta)


def _phi_power_check(const double[::1] r, double p):
    """(phi_power, phi_power_many) of every r >= 0 at q = p / (p - 1), for the tests."""
    cdef double q = p / (p - 1.0)
    cdef int quarters = phi_quarters(q)
    cdef Py_ssize_t e, n = r.shape[0]
    scalar_a = np.zeros(n)
    packed_a = np.zeros(n)
    cdef double[::1] scalar = scalar_a, packed = packed_a
    for e in range(n):
        scalar[e] = phi_power(r[e], q, quarters) if r[e] > 0.0 else 0.0
    if n:
        phi_power_many(&r[0], &packed[0], n, q, quarters)
    return scalar_a, packed_a
