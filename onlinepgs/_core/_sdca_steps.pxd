# One row's dual step of SDCA, per loss (the table in _sdca.pyx's docstring), and what
# shrinking reads of a row: its dual box and the model's slope at the current point.
#
# Inline functions, compiled into _sdca (no call across modules). In units
# b = alpha_i / (s_i sw_i), every loss's step depends only on the current b0, the margin z,
# the label y and kappa_i = sw_i ||x_i||_D'^2 / (sigma m); eps is the regression losses'
# width. The logistic root is found by Newton's method from the row's cached log-odds
# (_logistic_root); the other losses' steps are closed forms.
from libc.math cimport fabs, log, copysign, isfinite, fmax, INFINITY

from onlinepgs._core._losses cimport (HINGE, LOGISTIC, SQUARED_HINGE, SMOOTH_HINGE, SQUARED,
                                      ABSOLUTE, HUBER, EPSILON_INSENSITIVE)


cdef inline double _clip(double x, double lo, double hi) noexcept nogil:
    return lo if x < lo else (hi if x > hi else x)


cdef inline double _logistic_root(double kappa, double A, double x, double* lodds,
                                  double sg) noexcept nogil:
    """The root in (0, 1/2] of h(x) = log((1-x)/x) - kappa x - A, given h(1/2) <= 0.

    x is the starting point (the previous value when it is usable). h is convex and
    decreasing on (0, 1/2]: from the left of the root Newton increases monotonically to it;
    from the right it lands left of the root, or below the bracket, where we bisect.
    Convergence is quadratic with e' / x <= (e / x)^2 / 2 (h'' <= 1/x^2, |h'| >= 1/x), so a
    step below 1e-4 x leaves an error below 5e-9 x: one Newton step from the cached value
    usually suffices, which saves the second log of most rows (a9a, logistic: 7% of the
    instructions against a 1e-6 x test); the gap check evaluates the true conjugates, so
    the certificate does not depend on it. The test comes before the bracket, since a step
    that rounds to nothing must not be mistaken for an overshoot.

    lodds[0] caches the row's log-odds log((1-b)/b) (sg = +1: x = b; sg = -1: x = 1 - b), so
    the first iteration at the previous value takes no log, and a converged row's step
    none at all; the accepted step updates it to first order (error <= (step/x)^2 / 2).
    """
    cdef double lo = 0.0, hi = 0.5, hx, xn, t, step, lx
    cdef bint cached = (x > 0.0 and x <= 0.5) and isfinite(lodds[0])
    cdef int it
    if not (x > 0.0 and x <= 0.5):
        x = 0.25
    for it in range(100):
        if cached:
            lx = sg * lodds[0]
            cached = False
        else:
            lx = log((1.0 - x) / x)
        hx = lx - kappa * x - A
        if hx > 0.0:
            lo = x
        elif hx < 0.0:
            hi = x
        else:
            lodds[0] = sg * lx
            return x
        t = x * (1.0 - x)
        step = hx * t / (1.0 + kappa * t)
        xn = x + step
        if fabs(step) <= 1e-4 * x:
            lodds[0] = sg * (lx - step / t)
            return xn
        if xn <= lo or xn >= hi:
            xn = 0.5 * (lo + hi) if lo > 0.0 else 0.1 * x
        x = xn
    lodds[0] = sg * log((1.0 - x) / x)
    return x


cdef inline double _step(int loss, double b0, double z, double y, double kappa,
                         double eps, double* lodds) noexcept nogil:
    """The maximizer b of the Option I model (_sdca.pyx's docstring), in units of sw_i s_i."""
    cdef double u, A, t
    if loss == HINGE:
        return _clip(b0 + (1.0 - y * z) / kappa, 0.0, 1.0)
    elif loss == LOGISTIC:
        u = y * z
        # the root lies in (0, 1/2] iff G(1/2) = -u - kappa (1/2 - b0) <= 0
        if u + kappa * (0.5 - b0) >= 0.0:
            return _logistic_root(kappa, u - kappa * b0, b0, lodds, 1.0)
        return 1.0 - _logistic_root(kappa, -(u + kappa * (1.0 - b0)), 1.0 - b0, lodds, -1.0)
    elif loss == SQUARED_HINGE:
        return fmax((1.0 - y * z + kappa * b0) / (0.5 + kappa), 0.0)
    elif loss == SMOOTH_HINGE:
        return _clip((1.0 - y * z + kappa * b0) / (1.0 + kappa), 0.0, 1.0)
    elif loss == SQUARED:
        return (y - z + kappa * b0) / (0.5 + kappa)
    elif loss == ABSOLUTE:
        return _clip(b0 + (y - z) / kappa, -1.0, 1.0)
    elif loss == HUBER:
        return _clip((y - z + kappa * b0) / (1.0 + kappa), -eps, eps)
    else:  # EPSILON_INSENSITIVE
        t = b0 + (y - z) / kappa
        return _clip(copysign(fmax(fabs(t) - eps / kappa, 0.0), t), -1.0, 1.0)


cdef inline double _box_lo(int loss, double eps) noexcept nogil:
    if loss == HINGE or loss == SMOOTH_HINGE or loss == SQUARED_HINGE or loss == LOGISTIC:
        return 0.0
    if loss == HUBER:
        return -eps
    if loss == SQUARED:
        return -INFINITY
    return -1.0


cdef inline double _box_hi(int loss, double eps) noexcept nogil:
    if loss == SQUARED_HINGE or loss == SQUARED:
        return INFINITY
    if loss == HUBER:
        return eps
    return 1.0


cdef inline double _gradient(int loss, double b0, double z, double y, double eps) noexcept nogil:
    """d/db of the row's dual term minus b s z at b0 (the model's slope at d = 0), for the
    box-constrained losses that shrinking applies to. eps-insensitive: the slope away from
    the kink at 0 is what the bounds +-1 need."""
    if loss == HINGE:
        return 1.0 - y * z
    elif loss == SMOOTH_HINGE:
        return 1.0 - b0 - y * z
    elif loss == SQUARED_HINGE:
        return 1.0 - 0.5 * b0 - y * z
    elif loss == ABSOLUTE:
        return y - z
    elif loss == HUBER:
        return y - b0 - z
    else:  # EPSILON_INSENSITIVE
        return y - z - copysign(eps, b0)


cdef inline double _soft(double v, double c) noexcept nogil:
    return copysign(fmax(fabs(v) - c, 0.0), v)
