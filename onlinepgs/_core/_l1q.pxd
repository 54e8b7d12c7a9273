# l1 > 0 with p < 2 in PGS (docs/design/l1.md, "p < 2"): the scale of the mirror map needs
#
#     N(thr) = sum_j (|lambda_j| - thr)_+^q,    q = p / (p - 1) > 2,
#
# and thr = (t + 1) l1 moves every step through every active coordinate. Kept per problem
# about a reference threshold thr0 (where it was last counted exactly), over every
# coordinate with |lambda_j| > thr0 (x_j = |lambda_j| - thr0):
#
#     S_k = sum_j x_j^(q - k),   k = 0, 1, 2,
#
# exact at thr0: a touch of lambda_j moves its three terms. For thr = thr0 + d (d >= 0),
# with L = S_0 - q d S_1 and E = q (q - 1) d^2 S_2 / 2, every x >= 0 satisfies
#
#     x^q - q d x^(q-1) <= (x - d)_+^q <= x^q - q d x^(q-1) + q (q-1) d^2 x^(q-2) / 2
#
# (left: convexity of x^q, also where x <= d, the left side being <= 0 there; right: the
# second derivative of (x - d)^q is at most q (q - 1) x^(q-2) for d <= x, and for x < d the
# quadratic x^2 - q d x + q (q - 1) d^2 / 2 has a negative discriminant when q > 2). So
# L <= N(thr) <= L + E (d, like x, in units of m). The estimate is U = L + E, the second-order expansion (on the ball
# an upper bound keeps the projected iterate inside it), relative error at most E / L; as
# soon as E / (2 L) passes the state's l1q_tol (l1q_tol() by default) the sums are counted
# again exactly at thr (O(coordinates reached)). Measured, U's error is far below its bound
# (~1e-9 on IMDB against 2e-6): the expansion's remainder is of the third order except on
# the few coordinates that crossed the threshold since thr0. The bound grows like (q d / x)^2 / 2 for the coordinates
# that carry N: with lambda's active part growing like t, a recount lasts a fixed fraction
# of t, so a stream of T steps makes O(log T) of them (measured in tests/test_l1_q.py).
from libc.math cimport fabs, copysign
from libc.stdint cimport int64_t

from onlinepgs._core._mirror cimport Mirror
from onlinepgs._core._regularizer cimport phi_power


cdef struct L1Q:
    double thr0  # the reference threshold (lambda's units) the sums are about
    double m, inv_m  # the scale of x = (|lambda_j| - thr0) / m, and its inverse
    double s0, s1, s2  # sum x^q, x^(q-1), x^(q-2) over x > 0
    int outgrown  # a touch passed r_hi m: the sums wait for the recount after the step


# the default largest E / (2 L): N's estimate within twice that of exact, the scale
# N^((2-q)/q) within (q - 2) / q times that. A
# recount lasts a fraction ~ sqrt(tol) of t (see above): 1e-6 keeps them rare on real
# streams (measured in docs/design/l1.md) while the iterates stay within ~1e-6 of exact.
cdef inline double l1q_tol() noexcept nogil:
    return 1e-6


cdef inline void l1q_add(L1Q* st, double a, Mirror mm, double sign) noexcept nogil:
    """Add (sign = 1) or remove (sign = -1) the terms of a coordinate with |lambda_j| = a
    (one power, a few multiplies where q - 1 is a multiple of 1/4: phi_power). A term past
    the window parks the sums (`outgrown`) until the recount that ends the step."""
    cdef double x = (a - st.thr0) * st.inv_m, y
    if x <= 0.0 or st.outgrown:
        return
    if x > mm.r_hi:
        st.outgrown = 1
        return
    y = phi_power(x, mm.q, mm.quarters)
    st.s1 += sign * y
    st.s0 += sign * y * x
    st.s2 += sign * y / x


cdef inline double l1q_estimate(const L1Q* st, double thr, double q,
                                double* bound) noexcept nogil:
    """The estimate of N(thr) / m^q (thr >= thr0), the upper bound L + E, and in bound
    E / (2 L) (infinite where L <= 0 and the sums are not empty, or where they are parked:
    count again)."""
    cdef double d = (thr - st.thr0) * st.inv_m, low, e
    if st.outgrown:
        bound[0] = 1e300
        return 0.0
    if d <= 0.0:
        bound[0] = 0.0
        return st.s0 if st.s0 > 0.0 else 0.0
    low = st.s0 - q * d * st.s1
    e = 0.5 * q * (q - 1.0) * d * d * st.s2
    if low <= 0.0:
        bound[0] = 0.0 if st.s0 <= 0.0 else 1e300
        return 0.0
    bound[0] = 0.5 * e / low
    return low + e


cdef inline double l1q_link(double lam, double thr, double inv_m, double q,
                            int quarters) noexcept nogil:
    """sgn(lambda) ((|lambda| - thr)_+ / m)^(q - 1): the l_q map's coordinate of a
    soft-thresholded lambda in the scale's units; the weight is this times the scale."""
    cdef double x = (fabs(lam) - thr) * inv_m
    if x <= 0.0:
        return 0.0
    return copysign(phi_power(x, q, quarters), lam)
