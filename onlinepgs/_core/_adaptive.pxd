# The adaptive geometry (docs/design/adaptive.md): dual averaging with a stabilizer per
# coordinate that grows with that coordinate's own squared gradients (AdaGrad-RDA, Duchi,
# Hazan and Singer 2011; FTRL-Proximal, McMahan et al. 2013), on features divided by the
# largest |x_j| seen so far (Ross, Mineiro and Langford 2013), p = 2.
#
# Per (coordinate j, problem c) the block holds lam (minus the sum U_j of the scaled
# gradients; FTRL-Proximal's -z_j in the centered form), sq (n_j, the sum of their
# squares), stab (the stabilizer (delta + sqrt(n_j)) / eta, kept so that a margin takes
# no square root) and inv_scale (1 / s_j, 0 for a feature never seen; every problem keeps
# a copy, so that a coordinate's update reads one cache line). The scaled weight after t
# steps is
#
#     v_j = soft(lam_j, l1 t) / (sigma t + stab_j)
#
# and the model's weight w_j = v_j / s_j. A weight depends on the coordinate's own fields
# and t alone, so the last iterate is read lazily at a row's coordinates in O(nnz).
# Kernels of the table (_select.pxd): `margins_ad_one` and `step_ad_one` (one problem of
# sparse rows: one loop over the row each), `margins_ad` and `step_ad` (several problems
# or dense rows).
from libc.math cimport fabs, copysign, sqrt
from libc.stdint cimport int64_t

from onlinepgs._core._pgs cimport Core, Pass, Row
from onlinepgs._core._sparse cimport index_t


cdef enum:
    # the fields' offsets in a (coordinate, problem)'s doubles (onlinepgs._layout)
    AD_SQ = 1
    AD_STAB = 2
    AD_INV = 3


cdef inline double ad_value(const double* at, double sigma_t, double thr) noexcept nogil:
    """The scaled weight v_j of the (coordinate, problem) whose fields start at `at`, with
    sigma t and the threshold l1 t of the step count t: exactly 0 while |lam_j| <= l1 t
    (and before any gradient reached it)."""
    cdef double lam = at[0], a = fabs(lam) - thr, den
    if not a > 0.0:
        return 0.0
    den = sigma_t + at[AD_STAB]
    if not den > 0.0:  # a gradient so small that its square underflowed, at sigma t = 0
        return 0.0
    return copysign(a, lam) / den


cdef inline double _raised(double* at, Py_ssize_t K, Py_ssize_t S, double x, double st,
                          double thr, double delta, double inv_eta) noexcept nogil:
    """1 / s_j after s_j = max(s_j, |x|), in every problem's copy of the coordinate at
    `at` (0 while the feature has shown only zeros). A scale that grows shrinks the
    coordinate's sum of squares by (s_old / s_new)^2 (those of the same gradients in the
    new scale, as VW's normalized update has it) and moves lam so that the weight at
    sigma t = st, threshold thr, is the one it was."""
    cdef Py_ssize_t c
    cdef double ax = fabs(x), inv = at[AD_INV], ratio, den, a
    cdef double* f
    if ax > 0.0 and (inv == 0.0 or ax * inv > 1.0):
        ratio = 0.0 if inv == 0.0 else 1.0 / (ax * inv)  # s_old / s_new (0: unseen)
        inv = 1.0 / ax
        for c in range(K):
            f = at + c * S
            f[AD_INV] = inv
            if ratio > 0.0 and f[AD_SQ] > 0.0:
                den = st + f[AD_STAB]
                f[AD_SQ] = f[AD_SQ] * (ratio * ratio)
                f[AD_STAB] = (delta + sqrt(f[AD_SQ])) * inv_eta
                a = fabs(f[0]) - thr
                if a > 0.0 and den > 0.0:
                    f[0] = copysign(thr + a * ((st + f[AD_STAB]) / den), f[0])
    return inv


cdef inline void _ad_touch(double* at, double xs, double cf, double wk, double dl,
                           double v, double delta, double inv_eta,
                           bint centered) noexcept nogil:
    """One coordinate's update by a row's scaled value xs (v: its weight before the step):
    the gradient g = cf xs moves lam, its weighted square wk (dl xs)^2 grows n_j (a row of
    weight c in a step of b rows counts c / b times: wk), and the centered form moves lam
    back by the stabilizer's growth times the weight it had (FTRL-Proximal's
    z_j -= (sqrt(n'_j) - sqrt(n_j)) / eta v_j)."""
    cdef double d = dl * xs, sq_new = at[AD_SQ] + wk * (d * d)
    cdef double stab_new = (delta + sqrt(sq_new)) * inv_eta
    if centered:
        at[0] -= cf * xs - (stab_new - at[AD_STAB]) * v
    else:
        at[0] -= cf * xs
    at[AD_SQ] = sq_new
    at[AD_STAB] = stab_new


cdef inline void margins_ad_one(Pass* ps, const Row* rw, const index_t* idx) noexcept nogil:
    """One problem of sparse rows: an entry's coordinate takes its scale, then its term
    v_j x_j / s_j, in one loop over the row; the intercept's constant feature (its scale
    the constant itself) last."""
    cdef Core core = ps.core
    cdef Py_ssize_t e, S = core.S
    cdef double st = core.sigma * <double>core.t[0], thr = core.l1 * <double>core.t[0]
    cdef double z = 0.0, inv, v, inv_eta = 1.0 / core.eta, delta = core.delta
    cdef double* lam = core.lam + S  # data feature j is coordinate j + 1
    cdef double* at
    cdef double* kept = ps.G  # each entry's weight, for the step (`step_ad_one`)
    for e in range(rw.nnz):
        at = lam + <Py_ssize_t>idx[e] * S
        inv = _raised(at, 1, S, rw.vals[e], st, thr, delta, inv_eta)
        v = ad_value(at, st, thr)
        kept[e] = v
        z += v * (rw.vals[e] * inv)
    if ps.fit_icpt:
        inv = _raised(core.lam, 1, S, ps.icpt, st, thr, delta, inv_eta)
        z += ad_value(core.lam, st, thr) * (ps.icpt * inv)
    ps.margins[0] = z


cdef inline void step_ad_one(Pass* ps, const Row* rw, const index_t* idx) noexcept nogil:
    """A step of one row, one problem of sparse rows (`_ad_touch` at each entry, with the
    weight `margins_ad_one` kept, and the intercept)."""
    cdef Core core = ps.core
    cdef Py_ssize_t e, S = core.S
    cdef double t = <double>core.t[0], st = core.sigma * t, thr = core.l1 * t
    cdef double cf = ps.coefs[0], wk = ps.sw[rw.row] * ps.inv_k, dl, v = 0.0
    cdef double inv_eta = 1.0 / core.eta, delta = core.delta
    cdef bint centered = core.centered
    cdef double* lam = core.lam + S
    cdef double* at
    if cf == 0.0:  # nothing moves (a zero weight, or a loss flat at the margin)
        return
    dl = cf / wk  # the loss's derivative, l'(z)
    for e in range(rw.nnz):
        at = lam + <Py_ssize_t>idx[e] * S
        # the weight the margin read (nothing moved it since: the row's coordinates are
        # distinct), not a second division
        _ad_touch(at, rw.vals[e] * at[AD_INV], cf, wk, dl, ps.G[e], delta, inv_eta,
                  centered)
    if ps.fit_icpt:
        if centered:
            v = ad_value(core.lam, st, thr)
        _ad_touch(core.lam, ps.icpt * core.lam[AD_INV], cf, wk, dl, v, delta, inv_eta,
                  centered)
    ps.mov[0] = 1


cdef inline void margins_ad(Pass* ps, const Row* rw, const index_t* idx) noexcept nogil:
    """The K margins of a row (several problems, or a dense row): as `margins_ad_one`,
    each entry's scale raised once for every problem."""
    cdef Core core = ps.core
    cdef Py_ssize_t e, j, c, K = core.K, S = core.S, KS = K * S
    cdef double st = core.sigma * <double>core.t[0], thr = core.l1 * <double>core.t[0]
    cdef double xs, inv_eta = 1.0 / core.eta, delta = core.delta
    cdef double* at
    for c in range(K):
        ps.margins[c] = 0.0
    for e in range(rw.nnz):
        j = (e if ps.dense else <Py_ssize_t>idx[e]) + 1
        at = core.lam + j * KS
        xs = rw.vals[e] * _raised(at, K, S, rw.vals[e], st, thr, delta, inv_eta)
        for c in range(K):
            ps.margins[c] += ad_value(at + c * S, st, thr) * xs
    if ps.fit_icpt:
        xs = ps.icpt * _raised(core.lam, K, S, ps.icpt, st, thr, delta, inv_eta)
        for c in range(K):
            ps.margins[c] += ad_value(core.lam + c * S, st, thr) * xs


cdef inline void step_ad(Pass* ps, const Row* rw, const index_t* idx) noexcept nogil:
    """A step of one row, several problems or a dense row: for each problem with a
    non-zero coefficient cf = c l'(z) / b, every entry's coordinate and the intercept's
    take `_ad_touch`."""
    cdef Core core = ps.core
    cdef Py_ssize_t e, j, c, K = core.K, S = core.S, KS = K * S
    cdef double t = <double>core.t[0], st = core.sigma * t, thr = core.l1 * t
    cdef double cf, wk = ps.sw[rw.row] * ps.inv_k, dl, v = 0.0
    cdef double inv_eta = 1.0 / core.eta, delta = core.delta
    cdef bint centered = core.centered
    cdef double* at
    for c in range(K):
        cf = ps.coefs[c]
        if cf == 0.0:
            continue
        dl = cf / wk
        for e in range(rw.nnz):
            j = (e if ps.dense else <Py_ssize_t>idx[e]) + 1
            at = core.lam + j * KS + c * S
            if centered:
                v = ad_value(at, st, thr)
            _ad_touch(at, rw.vals[e] * at[AD_INV], cf, wk, dl, v, delta, inv_eta, centered)
        if ps.fit_icpt:
            at = core.lam + c * S
            if centered:
                v = ad_value(at, st, thr)
            _ad_touch(at, ps.icpt * at[AD_INV], cf, wk, dl, v, delta, inv_eta, centered)
        ps.mov[c] = 1
