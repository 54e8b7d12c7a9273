# Losses of the margin z = <w, x> and the label y, value and (sub)derivative in z.
# Inline here so the solver loops in _pgs.pyx compile them in place.
from libc.math cimport exp, expm1, log, log1p, fabs, copysign, fmin, INFINITY

cdef enum:
    HINGE = 0
    LOGISTIC = 1
    SQUARED_HINGE = 2
    SMOOTH_HINGE = 3
    SQUARED = 4
    ABSOLUTE = 5
    HUBER = 6
    EPSILON_INSENSITIVE = 7


cdef inline double loss_value(int code, double z, double y, double epsilon) noexcept nogil:
    cdef double yz, r, a
    if code == HINGE:
        yz = y * z
        return 1.0 - yz if yz < 1.0 else 0.0
    elif code == LOGISTIC:
        # log(1 + exp(-yz)) without overflow for any sign of yz
        yz = y * z
        if yz > 0.0:
            return log1p(exp(-yz))
        return -yz + log1p(exp(yz))
    elif code == SQUARED_HINGE:
        yz = y * z
        return (1.0 - yz) * (1.0 - yz) if yz < 1.0 else 0.0
    elif code == SMOOTH_HINGE:
        # quadratically smoothed hinge with gamma = 1 (Shalev-Shwartz & Zhang)
        yz = y * z
        if yz >= 1.0:
            return 0.0
        if yz <= 0.0:
            return 0.5 - yz
        return 0.5 * (1.0 - yz) * (1.0 - yz)
    elif code == SQUARED:
        r = z - y
        return r * r
    elif code == ABSOLUTE:
        return fabs(z - y)
    elif code == HUBER:
        a = fabs(z - y)
        if a <= epsilon:
            return 0.5 * a * a
        return epsilon * a - 0.5 * epsilon * epsilon
    else:  # EPSILON_INSENSITIVE
        a = fabs(z - y) - epsilon
        return a if a > 0.0 else 0.0


cdef inline double loss_derivative(int code, double z, double y, double epsilon) noexcept nogil:
    cdef double yz, r, e
    if code == HINGE:
        # the paper prints +y x; the subgradient of max(0, 1 - yz) is -y where yz < 1
        return -y if y * z < 1.0 else 0.0
    elif code == LOGISTIC:
        yz = y * z
        if yz > 0.0:
            e = exp(-yz)
            return -y * e / (1.0 + e)
        return -y / (1.0 + exp(yz))
    elif code == SQUARED_HINGE:
        yz = y * z
        return -2.0 * y * (1.0 - yz) if yz < 1.0 else 0.0
    elif code == SMOOTH_HINGE:
        yz = y * z
        if yz >= 1.0:
            return 0.0
        if yz <= 0.0:
            return -y
        return -y * (1.0 - yz)
    elif code == SQUARED:
        return 2.0 * (z - y)
    elif code == ABSOLUTE:
        r = z - y
        return 1.0 if r > 0.0 else (-1.0 if r < 0.0 else 0.0)
    elif code == HUBER:
        r = z - y
        if r > epsilon:
            return epsilon
        if r < -epsilon:
            return -epsilon
        return r
    else:  # EPSILON_INSENSITIVE
        r = z - y
        if r > epsilon:
            return 1.0
        if r < -epsilon:
            return -1.0
        return 0.0


cdef inline double loss_and_derivative(int code, double z, double y, double epsilon,
                                       double* derivative) noexcept nogil:
    """Value and derivative together: the logistic loss shares one exp between them."""
    cdef double yz, e
    if code == LOGISTIC:
        yz = y * z
        if yz > 0.0:
            e = exp(-yz)
            derivative[0] = -y * e / (1.0 + e)
            return log1p(e)
        e = exp(yz)
        derivative[0] = -y / (1.0 + e)
        return -yz + log1p(e)
    derivative[0] = loss_derivative(code, z, y, epsilon)
    return loss_value(code, z, y, epsilon)


cdef inline double loss_conjugate(int code, double u, double y, double epsilon) noexcept nogil:
    """l*(u; y) = sup_z (u z - l(z; y)), +inf outside the conjugate's domain.

    The classification losses take y in {-1, +1}; a subgradient u = l'(z; y) is always
    inside the domain (Fenchel-Young holds with equality there).
    """
    cdef double v
    if code == HINGE:
        v = u * y
        return v if -1.0 <= v <= 0.0 else INFINITY
    elif code == LOGISTIC:
        v = -u * y  # in [0, 1]; 0 log 0 = 0 at both ends
        if not (0.0 <= v <= 1.0):
            return INFINITY
        return (v * log(v) if v > 0.0 else 0.0) + ((1.0 - v) * log1p(-v) if v < 1.0 else 0.0)
    elif code == SQUARED_HINGE:
        v = u * y
        return v + 0.25 * u * u if v <= 0.0 else INFINITY
    elif code == SMOOTH_HINGE:
        v = u * y
        return v + 0.5 * u * u if -1.0 <= v <= 0.0 else INFINITY
    elif code == SQUARED:
        return 0.25 * u * u + u * y
    elif code == ABSOLUTE:
        return u * y if fabs(u) <= 1.0 else INFINITY
    elif code == HUBER:
        return u * y + 0.5 * u * u if fabs(u) <= epsilon else INFINITY
    else:  # EPSILON_INSENSITIVE
        return u * y + epsilon * fabs(u) if fabs(u) <= 1.0 else INFINITY


cdef inline double _logistic_rise(double m, double tau) noexcept nogil:
    """The rise d >= 0 of the margin m along dm/dtau = 1 / (1 + e^m) over tau >= 0:
    m + e^m grows by tau, so d + e^m expm1(d) = tau. Newton's iteration on that convex,
    increasing function of d, from a point right of the root (d <= tau, and
    e^m expm1(d) <= tau gives d <= log1p(tau e^-m)), falls to the root from the right;
    written over e^m for m > 0 so that nothing overflows."""
    cdef double d, f, slope, step, em
    cdef int it
    if m > 0.0:
        em = exp(-m)
        d = fmin(tau, log1p(tau * em))
    else:
        em = exp(m)
        d = fmin(tau, log1p(tau / em))  # tau / em = inf: log1p(inf) = inf, d = tau
    for it in range(100):
        if m > 0.0:  # (d + e^m expm1(d) - tau) e^-m
            f = d * em + expm1(d) - tau * em
            slope = em + exp(d)
        else:
            f = d + em * expm1(d) - tau
            slope = 1.0 + em * exp(d)
        step = f / slope
        if not step > 1e-16 * d:  # converged (or rounding turned it back)
            break
        d -= step
    return d


cdef inline double invariant_move(int code, double z, double y, double tau,
                                  double epsilon) noexcept nogil:
    """z(tau) - z along dz/dtau = -l'(z; y) from z over tau >= 0: where a row's many
    small copies of total importance R take its margin at a frozen rate Q (tau = Q R),
    the importance-invariant update (Karampatziakis and Langford 2011; the derivation,
    loss by loss, in docs/design/adaptive.md). The margin walks toward the loss's
    minimizer and never passes it."""
    cdef double r, a, m, dm, edge, start
    if code == SQUARED or code == ABSOLUTE or code == HUBER or code == EPSILON_INSENSITIVE:
        r = z - y
        a = fabs(r)
        if code == SQUARED:  # z - y shrinks by exp(-2 tau)
            return r * expm1(-2.0 * tau)
        if code == ABSOLUTE:  # |z - y| falls at rate 1, to 0
            return -copysign(fmin(tau, a), r)
        if code == EPSILON_INSENSITIVE:  # at rate 1, to epsilon
            return -copysign(fmin(tau, a - epsilon), r) if a > epsilon else 0.0
        if a <= epsilon:  # huber's quadratic part: shrinks by exp(-tau)
            return r * expm1(-tau)
        edge = (a - epsilon) / epsilon  # falls at rate epsilon to epsilon first
        if tau <= edge:
            return -copysign(epsilon * tau, r)
        return -copysign(a - epsilon - epsilon * expm1(edge - tau), r)
    m = y * z  # the classification losses, in the margin m (y = +-1)
    if m >= 1.0 and code != LOGISTIC:
        return 0.0
    if code == HINGE:  # m rises at rate 1, to 1
        dm = fmin(tau, 1.0 - m)
    elif code == SQUARED_HINGE:  # 1 - m shrinks by exp(-2 tau)
        dm = -(1.0 - m) * expm1(-2.0 * tau)
    elif code == SMOOTH_HINGE:  # m rises at rate 1 to 0, then 1 - m shrinks by exp(-tau)
        if m < 0.0 and tau <= -m:
            dm = tau
        else:
            start = m if m > 0.0 else 0.0
            dm = start - m - (1.0 - start) * expm1(-(tau + (m if m < 0.0 else 0.0)))
    else:  # LOGISTIC
        dm = _logistic_rise(m, tau)
    return y * dm
