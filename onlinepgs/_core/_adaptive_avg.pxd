# The adaptive geometry's averaged iterates (docs/design/adaptive.md, "Averaged
# iterates"): the reported weight is sum_t a_t v_j(t) / sum_t a_t over the steps t = 1..T,
# a_t = 1, t or t^2, divided by the final scale. Between two touches of a coordinate its
# fields are frozen (lam_j: -U_j, or FTRL-Proximal's -z_j in the centered form; stab_j),
# and only sigma t and the threshold l1 t move, so there
#
#     v_j(t) = sgn(lam_j) (|lam_j| - l1 t)_+ / (sigma t + stab_j)
#
# in both forms. Per (coordinate, problem) the state keeps the settled sum acc_j of
# a_t v_j(t) over t <= upto_j (in the arrays snap and snapv, which the random iterate
# uses otherwise: they are saved with the model); a touch settles it through the step
# before its own (`ad_settle`) with the closed-form sum over the gap (`ad_gap_sum`), and
# a read adds the pending sum without settling (`ad_avg_value`).
from libc.math cimport fabs, copysign, floor
from libc.stdint cimport int64_t

from onlinepgs._core._pgs cimport (Core, Pass, Row, ITERATE_WEIGHTED, ITERATE_WEIGHTED2)
from onlinepgs._core._sparse cimport index_t
from onlinepgs._core._steps cimport batch_row, batch_entry
from onlinepgs._core._adaptive cimport AD_STAB, AD_INV, _raised, ad_value


cdef enum:
    # a piece of the gap of at most this many steps is summed term by term (so that a
    # piece's series has h >= 4, where its moments' terms fall: `_moment_ratio`)
    AVG_DIRECT = 8
    # the longest series about a piece's middle (its ratio is at most 1/8: 8^-19 < 1e-17)
    AVG_TERMS = 20


cdef inline double _em_coef(int j) noexcept nogil:
    """B_2j / (2j)! (Bernoulli numbers), j = 1..11: the Euler-Maclaurin coefficients."""
    if j == 1:
        return 0.08333333333333333
    if j == 2:
        return -0.001388888888888889
    if j == 3:
        return 3.306878306878307e-05
    if j == 4:
        return -8.267195767195768e-07
    if j == 5:
        return 2.08767569878681e-08
    if j == 6:
        return -5.284190138687493e-10
    if j == 7:
        return 1.3382536530684679e-11
    if j == 8:
        return -3.3896802963225827e-13
    if j == 9:
        return 8.586062056277845e-15
    if j == 10:
        return -2.174868698558062e-16
    return 5.5090028283602295e-18


cdef inline double _moment_ratio(int d, double h, double ih, double ih2) noexcept nogil:
    """sum_u u^d / h^d over u = -h, -h + 1, .., h (h >= 4, integer or half; d even, at
    most 24; ih = 1 / h, ih2 = ih^2): by Euler-Maclaurin, exact for a polynomial,
    2h / (d+1) + 1 + 2 sum_j B_2j / (2j)! d! / (d - 2j + 1)! h^(1 - 2j), j = 1..d/2. The
    terms alternate and fall in size (by (d - 2j)^2 / (2 pi h)^2 < 1 a term), so the sum
    stops at the first below 1e-18 of the total."""
    cdef double total = 2.0 * h / (d + 1.0) + 1.0, fall = <double>d, hp = ih, term
    cdef int j
    for j in range(1, d // 2 + 1):
        if j > 1:  # d! / (d - 2j + 1)!: two more factors
            fall *= <double>((d - 2 * j + 3) * (d - 2 * j + 2))
            hp *= ih2
        term = 2.0 * _em_coef(j) * fall * hp
        total += term
        if fabs(term) < 1e-18 * total:
            break
    return total


cdef inline void _taylor(double A, double l1, double mid, int k, double* F) noexcept nogil:
    """F[e], e = 0..k+1: the coefficients of f(mid + u) = (mid + u)^k (A - l1 (mid + u))
    in u (k <= 2)."""
    cdef double B = A - l1 * mid
    F[2] = 0.0
    F[3] = 0.0
    if k == 0:
        F[0] = B
        F[1] = -l1
    elif k == 1:
        F[0] = mid * B
        F[1] = B - l1 * mid
        F[2] = -l1
    else:
        F[0] = mid * mid * B
        F[1] = 2.0 * mid * B - l1 * mid * mid
        F[2] = B - 2.0 * l1 * mid
        F[3] = -l1


cdef inline double _direct(double A, double l1, double c, double sigma, int64_t a,
                           int64_t b, int k) noexcept nogil:
    """sum_{t=a}^{b} t^k (A - l1 t) / (sigma t + c), term by term (all active)."""
    cdef double total = 0.0, tf, w
    cdef int64_t t
    for t in range(a, b + 1):
        tf = <double>t
        w = 1.0 if k == 0 else (tf if k == 1 else tf * tf)
        total += w * (A - l1 * tf) / (sigma * tf + c)
    return total


cdef inline double _piece(double A, double l1, double x, int64_t a, int64_t b,
                          int k) noexcept nogil:
    """sum_{t=a}^{b} f(t) / (t + x), f(t) = t^k (A - l1 t), for a piece whose half length
    h = (b - a) / 2 is at most an eighth of y = x + mid (mid its middle): with t = mid +
    u, 1 / (y + u) = sum_m (-u)^m / y^(m+1), so the sum is sum_e F_e h^e / y sum_m (-r)^m
    beta_(e+m) (r = h / y, beta_d = sum_u u^d / h^d, 0 for odd d): no cancellation
    whatever x is (the closed forms with the digamma function lose (x / t)^(k+1))."""
    cdef double mid = 0.5 * (<double>a + <double>b), h = 0.5 * <double>(b - a)
    cdef double y = x + mid, r = h / y, total = 0.0, inner, rm, he = 1.0, ih = 1.0 / h
    cdef double F[4]
    cdef double beta[AVG_TERMS + 4]
    cdef int e, m, n_terms = 1, d
    _taylor(A, l1, mid, k, F)
    rm = r
    while n_terms < AVG_TERMS and rm > 1e-17:
        rm *= r
        n_terms += 1
    for d in range(0, n_terms + k + 2, 2):
        beta[d] = _moment_ratio(d, h, ih, ih * ih)
    for e in range(k + 2):
        inner = 0.0
        rm = 1.0
        for m in range(n_terms):
            if (e + m) % 2 == 0:
                inner += rm * beta[e + m]
            rm *= -r
        total += F[e] * he * inner
        he *= h
    return total / y


cdef inline double ad_gap_sum(double A, double l1, double c, double sigma, int64_t a,
                              int64_t b, int k) noexcept nogil:
    """sum_{t=a}^{b} t^k (A - l1 t)_+ / (sigma t + c) for A >= 0, c >= 0, to a few ulps of
    the terms' sum: a term is 0 where A <= l1 t (the threshold, as `ad_values` tests it)
    or where its denominator is 0. sigma = 0: sums of powers about the range's middle;
    otherwise the range in pieces short enough for `_piece`'s series (a piece grows by
    9/7 at least, so a gap [a, b] takes O(1 + log(b / a)) pieces, and a coordinate's
    gaps together O(touches + log T)), the shortest summed term by term."""
    cdef int64_t last, stop
    cdef double x, total = 0.0, n, mid, lim
    cdef double F[4]
    if not A > 0.0 or b < a:
        return 0.0
    if l1 > 0.0:  # the last step still above the threshold
        lim = floor(A / l1)
        if lim < <double>b:
            last = <int64_t>lim
            while last >= a and not A > l1 * <double>last:
                last -= 1
            while last < b and A > l1 * <double>(last + 1):
                last += 1
            b = last
            if b < a:
                return 0.0
    if sigma == 0.0:
        if not c > 0.0:
            return 0.0
        mid = 0.5 * (<double>a + <double>b)
        n = <double>(b - a + 1)
        _taylor(A, l1, mid, k, F)
        # sum_u 1 = n, sum_u u^2 = n (n^2 - 1) / 12, odd powers 0
        return (F[0] * n + F[2] * (n * (n * n - 1.0) / 12.0 if k >= 1 else 0.0)) / c
    x = c / sigma
    while a <= b:
        # the longest piece from a with (stop - a) / 2 <= (x + (a + stop) / 2) / 8
        lim = (2.0 * x + 9.0 * <double>a) / 7.0
        stop = b if lim >= <double>b else <int64_t>floor(lim)
        if stop - a + 1 <= AVG_DIRECT:
            stop = a + AVG_DIRECT - 1 if b - a + 1 > AVG_DIRECT else b
            total += _direct(A, l1, c, sigma, a, stop, k)
        else:
            total += _piece(A, l1, x, a, stop, k) / sigma
        a = stop + 1
    return total


cdef inline double ad_pending(const double* at, int64_t upto, int64_t t, double sigma,
                              double l1, int k) noexcept nogil:
    """sum_{u = upto+1}^{t} u^k v_j(u) of the (coordinate, problem) whose fields start at
    `at`, frozen since its last touch."""
    if t <= upto or at[0] == 0.0:
        return 0.0
    return copysign(ad_gap_sum(fabs(at[0]), l1, at[AD_STAB], sigma, upto + 1, t, k), at[0])


cdef inline void ad_settle(const double* at, double* acc, int64_t* upto, Py_ssize_t K,
                           Py_ssize_t S, int64_t t, double sigma, double l1,
                           int k) noexcept nogil:
    """Before a touch at step t + 1: the K problems' settled sums of the coordinate whose
    fields start at `at` (acc, upto: its K entries) brought up to step t."""
    cdef Py_ssize_t c
    for c in range(K):
        if upto[c] < t:
            acc[c] += ad_pending(at + c * S, upto[c], t, sigma, l1, k)
            upto[c] = t


cdef inline int avg_power(int iterate) noexcept nogil:
    """k of an average's weights t^k: 0 (average), 1 (weighted), 2 (weighted2)."""
    return 2 if iterate == ITERATE_WEIGHTED2 else 1 if iterate == ITERATE_WEIGHTED else 0


cdef inline void _settle_raise_add(Pass* ps, Py_ssize_t j, double x, double* rep) noexcept nogil:
    """Coordinate j's part of a row's margins (value x): its K averages settled through
    the step before this one (`ad_settle`: its fields change from here on), its scale
    raised (`_raised`), then the K margins += v_c x / s_j and the reported ones' sums
    rep[c] += acc_c x / s_j."""
    cdef Core core = ps.core
    cdef Py_ssize_t c, K = core.K, S = core.S
    cdef double st = core.sigma * <double>core.t[0], thr = core.l1 * <double>core.t[0]
    cdef double* at = core.lam + j * K * S
    cdef double xs
    ad_settle(at, core.snap + j * K, core.snapv + j * K, K, S, core.t[0], core.sigma,
              core.l1, avg_power(core.iterate))
    xs = x * _raised(at, K, S, x, st, thr, 1.0, core.delta, 1.0 / core.eta)
    for c in range(K):
        ps.margins[c] += ad_value(at + c * S, st, thr, 1.0) * xs
        rep[c] += core.snap[j * K + c] * xs


cdef inline void margins_ad_avg(Pass* ps, const Row* rw, const index_t* idx) noexcept nogil:
    """The K margins of a row and the reported average's (every problem, sparse or dense
    rows): each entry's coordinate settled, raised and summed in the row's order
    (`_settle_raise_add`), the intercept's constant feature last; the reported margins
    are the settled sums over the weights' total (inv_w) at the row's scales."""
    cdef Py_ssize_t e, c
    for c in range(ps.K):
        ps.margins[c] = 0.0
        ps.rep_scores[c] = 0.0
    for e in range(rw.nnz):
        _settle_raise_add(ps, (e if ps.dense else <Py_ssize_t>idx[e]) + 1, rw.vals[e],
                          ps.rep_scores)
    if ps.fit_icpt:
        _settle_raise_add(ps, 0, ps.icpt, ps.rep_scores)
    for c in range(ps.K):
        ps.rep_scores[c] *= ps.inv_w


cdef inline void settle_batch(Pass* ps, const double* data, const index_t* indices,
                              const int64_t* indptr, Py_ssize_t pos,
                              Py_ssize_t bsize) noexcept nogil:
    """Before a step of several rows raises their scales (`raise_batch`): the averages
    of every coordinate they reach settled through the step before."""
    cdef Core core = ps.core
    cdef Py_ssize_t b, e, j, nnz, start, K = core.K
    cdef int k = avg_power(core.iterate)
    cdef double xv
    for b in range(bsize):
        batch_row(ps, indptr, pos + b, &start, &nnz)
        for e in range(-1 if ps.fit_icpt else 0, nnz):
            j = batch_entry(ps, data, indices, start, e, &xv)
            if xv != 0.0:
                ad_settle(core.lam + j * K * core.S, core.snap + j * K, core.snapv + j * K,
                          K, core.S, core.t[0], core.sigma, core.l1, k)
