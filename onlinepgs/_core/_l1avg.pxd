# l1's averaged iterates, folded (docs/design/core.md, "l1: soft thresholds, lazily"):
# with l1 > 0 at p = 2 an average keeps, per (coordinate, problem), acc_j and a flag `on`
# beside lambda_j, and per problem the running sums C (of a_u s_u) and C2 (of a_u s_u
# thr_u). Coordinate j's weighted sum of iterates is acc_j + lambda_j C - sgn(lambda_j) C2
# while it is active, acc_j once a touch left it inactive; one that fell to the threshold
# between touches takes C and C2 as they stood at its fall, in closed form (`l1_fallen`).
# Here: those closed forms, the folded total, and the move of acc_j at a touch.
from libc.math cimport fabs, copysign, ceil, log1p
from libc.stdint cimport int64_t

from onlinepgs._core._pgs cimport Core, ITERATE_WEIGHTED, ITERATE_WEIGHTED2
from onlinepgs._core._pair cimport (opgs_pair, opgs_pair_of, opgs_pair_all, opgs_abs_gt,
                                    opgs_sign_bits)
from onlinepgs._core._l1pair cimport keep_if, l1_acc_move


cdef inline double _psi_tail(double x) noexcept nogil:
    """psi(x) - ln x by its asymptotic series (x >= 32)."""
    cdef double r = 1.0 / (x * x)
    return -0.5 / x - r * (1.0 / 12.0 - r * (1.0 / 120.0 - r * (1.0 / 252.0
                                                              - r * (1.0 / 240.0))))


cdef inline double harmonic_diff(int64_t lo, int64_t hi) noexcept nogil:
    """sum_{v = lo}^{hi} 1 / v for 1 <= lo (0 if hi < lo), to a few ulps: directly for
    short ranges and below 32, else psi(hi + 1) - psi(lo) by the asymptotic series
    (ln x - 1/(2x) - 1/(12x^2) + 1/(120x^4) - 1/(252x^6) + 1/(240x^8); the next term is
    below 1e-17 from x = 32), its log as log1p of the range's relative length."""
    cdef double s = 0.0, a, b
    cdef int64_t v
    if hi < lo:
        return 0.0
    if hi - lo < 32:
        v = hi
        while v >= lo:  # the small terms first
            s += 1.0 / <double>v
            v -= 1
        return s
    while lo < 32:
        s += 1.0 / <double>lo
        lo += 1
    a = <double>lo
    b = <double>hi + 1.0
    return s + log1p((b - a) / a) + (_psi_tail(b) - _psi_tail(a))


cdef inline double weighted_scale_sums(int64_t A, int64_t now, int iterate,
                                       double* sum_w) noexcept nogil:
    """sum_u a_u / (u + 1) over the steps u = A .. now (1 <= A <= now), and sum_u a_u in
    sum_w, in closed form: the averages' weights a_u = 1, u or u^2 (u^2 / v = v - 2 + 1 / v
    and u / v = 1 - 1 / v with v = u + 1: a polynomial plus a harmonic difference). The
    running sums C and C2 of p = 2 add a_u s_u and a_u s_u thr_u with s_u = 1 / ((u + 1)
    sigma) and thr_u = (u + 1) l1 on R^n: these over sigma and times l1 / sigma."""
    cdef double n = <double>(now - A + 1), A_f = <double>A
    cdef int64_t lo = A + 1, hi = now + 1  # v = u + 1
    if iterate == ITERATE_WEIGHTED2:
        # sum u^2 = n A^2 + A n (n - 1) + (n - 1) n (2n - 1) / 6
        sum_w[0] = (n * A_f * A_f + A_f * n * (n - 1.0)
                    + (n - 1.0) * n * (2.0 * n - 1.0) / 6.0)
        return 0.5 * n * (<double>lo + <double>hi) - 2.0 * n + harmonic_diff(lo, hi)
    if iterate == ITERATE_WEIGHTED:
        sum_w[0] = 0.5 * n * (A_f + <double>now)
        return n - harmonic_diff(lo, hi)
    sum_w[0] = n
    return harmonic_diff(lo, hi)


cdef inline double l1_fallen(double a, int64_t now, double sigma, double l1, int iterate,
                             double* dc2) noexcept nogil:
    """The running sums' terms after an l1 coordinate fell to the threshold (R^n, p = 2):
    with lambda_j = +-a fixed, it is active up to the last step u_end with
    (u_end + 1) l1 < a; returns sum_u a_u s_u over u = u_end + 1 .. now (C's terms) and
    leaves sum_u a_u s_u thr_u there in dc2 (C2's), in closed form
    (`weighted_scale_sums`). C - that and C2 - dc2 are the running sums as they stood at
    u_end."""
    cdef double sum_w, sum_wv
    cdef int64_t A
    A = <int64_t>ceil(a / l1) - 1  # u_end + 1 (a / l1 <= now + 1 here: a <= thr)
    if A < 1:
        A = 1
    if A > now:
        dc2[0] = 0.0
        return 0.0
    sum_wv = weighted_scale_sums(A, now, iterate, &sum_w)
    dc2[0] = sum_w * l1 / sigma
    return sum_wv / sigma


cdef inline double l1_folded_total(double lam, double acc, double on, double cum,
                                   double cum2, double thr, int64_t now, double sigma,
                                   double l1, int iterate) noexcept nogil:
    """The weighted sum of an l1 coordinate's iterates, an average ("folded": see
    `_touch_l1`): acc + lambda_j C - sgn(lambda_j) C2 while active; once it fell to the
    threshold since its last touch (on), the same with C and C2 as they stood then
    (`l1_fallen`: on R^n, or on a ball without its heap, whose factor was 1 since; with a
    heap the pop folded it at its fall); acc alone when it was left inactive. now: the
    last step whose terms C and C2 hold."""
    cdef double dc, dc2
    if fabs(lam) > thr:
        return acc + lam * cum - copysign(cum2, lam)
    if on == 0.0:
        return acc
    dc = l1_fallen(fabs(lam), now, sigma, l1, iterate, &dc2)
    return acc + lam * (cum - dc) - copysign(cum2 - dc2, lam)


cdef inline double l1_acc_refold(double lam_old, double lam_new, double acc, double on,
                                 bint act_new, double cum, double cum2, double thr,
                                 int64_t t, double sigma, double l1,
                                 int iterate) noexcept nogil:
    """acc_j after a touch that finds its flag wrong (it fell to the threshold since its
    last touch: rare): its sum in closed form (`l1_folded_total`), less the new active
    part."""
    cdef double total = l1_folded_total(lam_old, acc, on, cum, cum2, thr, t, sigma, l1,
                                        iterate)
    return total - keep_if(lam_new * cum - copysign(cum2, lam_new), act_new)


cdef inline void l1_avg_touch(Core core, double* f, double lam_old, double lam_new,
                             double thr, double cum, double cum2, Py_ssize_t off_acc,
                             Py_ssize_t off_on) noexcept nogil:
    """An average's folded sum and flag at a touch of the coordinate at f (lambda_j moved
    from lam_old to lam_new; C and C2 given): see `_touch_l1`.

    Most touches are steady: j was active and stays active with its sign, or was inactive
    and stays so, and its flag is right (it did not fall since its last touch). Whether a
    coordinate is active mixes at random within a row, but whether it turns, flips or fell
    does not (rare), so that one branch predicts well: a steady touch moves acc_j by
    (lambda_old - lambda_new) C times the flag (1 or 0), the same bits as
    `l1_acc_move`'s sum (whose C2 lane is a zero then), and leaves the flag as it is."""
    cdef double on = f[off_on]
    cdef opgs_pair lam = opgs_pair_of(lam_old, lam_new)
    # bits 0-1: active before and after; 2-3: their signs; 4: the flag
    cdef unsigned int code = (opgs_sign_bits(opgs_abs_gt(lam, opgs_pair_all(thr)))
                              | (opgs_sign_bits(lam) << 2) | ((on != 0.0) << 4))
    # the steady codes: inactive with the flag 0, either sign (0, 4, 8, 12); active with
    # one sign and the flag 1 (3 | 16, 3 | 12 | 16): bits 0, 4, 8, 12, 19, 31
    if (<unsigned int>0x80081111 >> code) & 1:
        f[off_acc] += (lam_old - lam_new) * cum * on
        return
    cdef double on_new
    cdef bint flag_right
    cdef double move = l1_acc_move(lam_old, lam_new, thr, cum, cum2, on, &on_new,
                                   &flag_right)
    if flag_right:
        f[off_acc] += move
    else:
        f[off_acc] = l1_acc_refold(lam_old, lam_new, f[off_acc], on, on_new != 0.0, cum,
                                   cum2, thr, core.t[0], core.sigma, core.l1, core.iterate)
    f[off_on] = on_new
