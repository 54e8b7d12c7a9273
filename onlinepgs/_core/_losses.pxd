# Losses of the margin z = <w, x> and the label y, value and (sub)derivative in z.
# Inline here so the solver loops in _pgs.pyx compile them in place.
from libc.math cimport exp, log, log1p, fabs, INFINITY

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
