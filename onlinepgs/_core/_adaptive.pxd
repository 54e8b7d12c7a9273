# The adaptive geometry (docs/design/adaptive.md): dual averaging with a stabilizer per
# coordinate that grows with that coordinate's own squared gradients (AdaGrad-RDA, Duchi,
# Hazan and Singer 2011; FTRL-Proximal, McMahan et al. 2013), on features divided by the
# largest |x_j| seen so far (Ross, Mineiro and Langford 2013), p = 2.
#
# Per (coordinate j, problem c) the block holds lam (minus the sum U_j of the scaled
# gradients; FTRL-Proximal's -z_j in the centered form), sq (n_j, the sum of their
# squares) and scale (s_j; every problem keeps a copy, so a coordinate's update reads one
# place). The scaled weight after t steps is
#
#     v_j = soft(lam_j, l1 t) / (sigma t + (delta + sqrt(n_j)) / eta)
#
# and the model's weight w_j = v_j / s_j. A weight depends on the coordinate's own fields
# and t alone, so the last iterate is read lazily at a row's coordinates in O(nnz).
# Kernels of the table (_select.pxd): `margins_ad` (the row's scales raised, then its K
# margins) and `step_ad` (a step of one row).
from libc.math cimport fabs, copysign, sqrt
from libc.stdint cimport int64_t

from onlinepgs._core._pgs cimport Core, Pass, Row
from onlinepgs._core._sparse cimport index_t


cdef inline double ad_value(const double* at, Py_ssize_t off_sq, double t, double sigma,
                            double l1, double eta, double delta) noexcept nogil:
    """The scaled weight v_j of the (coordinate, problem) whose fields start at `at`,
    after t steps: exactly 0 while |lam_j| <= l1 t (and before any gradient reached it)."""
    cdef double lam = at[0], a = fabs(lam) - l1 * t, den
    if not a > 0.0:
        return 0.0
    den = sigma * t + (delta + sqrt(at[off_sq])) / eta
    if not den > 0.0:  # a gradient so small that its square underflowed, at sigma t = 0
        return 0.0
    return copysign(a, lam) / den


cdef inline void _raise_scale(double* at, Py_ssize_t K, Py_ssize_t S, Py_ssize_t off_scale,
                              double x) noexcept nogil:
    """s_j = max(s_j, |x|) in every problem's copy of the coordinate at `at`."""
    cdef Py_ssize_t c
    x = fabs(x)
    if x > at[off_scale]:
        for c in range(K):
            at[c * S + off_scale] = x


cdef inline void margins_ad(Pass* ps, const Row* rw, const index_t* idx) noexcept nogil:
    """The row's K margins at the weights after t steps: first the row's entries raise
    their coordinates' scales (so every scaled value |x_j / s_j| is at most 1, a first
    touch included), then z_c = sum_j v_j x_j / s_j, the intercept's constant feature
    (its scale the constant itself) last."""
    cdef Core core = ps.core
    cdef Py_ssize_t e, j, c, K = core.K, S = core.S, KS = K * S
    cdef Py_ssize_t o_sq = core.off_sq, o_sc = core.off_scale
    cdef double t = <double>core.t[0], sg = core.sigma, l1 = core.l1
    cdef double eta = core.eta, dl = core.delta, s
    cdef double* at
    for c in range(K):
        ps.margins[c] = 0.0
    # one loop over the row: an entry's coordinate takes its scale before its terms (the
    # row's coordinates are distinct), each problem's margin summed in the row's order
    for e in range(rw.nnz):
        j = (e if ps.dense else <Py_ssize_t>idx[e]) + 1
        at = core.lam + j * KS
        _raise_scale(at, K, S, o_sc, rw.vals[e])
        s = at[o_sc]
        if s > 0.0:
            for c in range(K):
                ps.margins[c] += ad_value(at + c * S, o_sq, t, sg, l1, eta, dl) * (rw.vals[e] / s)
    if ps.fit_icpt:
        _raise_scale(core.lam, K, S, o_sc, ps.icpt)
        for c in range(K):
            at = core.lam + c * S
            ps.margins[c] += ad_value(at, o_sq, t, sg, l1, eta, dl) * (ps.icpt / at[o_sc])


cdef inline void _ad_touch(Core core, double* at, double xs, double cf, double wk,
                           double dl, double t) noexcept nogil:
    """One coordinate's update by a row's scaled value xs: the gradient g = cf xs moves
    lam, its weighted square wk (dl xs)^2 grows n_j (a row of weight c in a step of b rows
    counts c / b times, `wk`), and the centered form moves lam back by the stabilizer's
    growth times the weight it had (FTRL-Proximal's z_j -= (sqrt(n'_j) - sqrt(n_j))/eta v_j)."""
    cdef double g = cf * xs, d = dl * xs, sq_old, sq_new, v
    sq_old = at[core.off_sq]
    sq_new = sq_old + wk * (d * d)
    if core.centered:
        v = ad_value(at, core.off_sq, t, core.sigma, core.l1, core.eta, core.delta)
        at[0] -= g - (sqrt(sq_new) - sqrt(sq_old)) / core.eta * v
    else:
        at[0] -= g
    at[core.off_sq] = sq_new


cdef inline void step_ad(Pass* ps, const Row* rw, const index_t* idx) noexcept nogil:
    """A step of one row: for each problem with a non-zero coefficient cf = c l'(z) / b,
    every entry's coordinate and the intercept's take `_ad_touch`."""
    cdef Core core = ps.core
    cdef Py_ssize_t e, j, c, K = core.K, S = core.S, KS = K * S
    cdef double t = <double>core.t[0], cf, wk, dl, s
    cdef double* at
    wk = ps.sw[rw.row] * ps.inv_k
    for c in range(K):
        cf = ps.coefs[c]
        if cf == 0.0:  # nothing moves (a zero weight, or a loss flat at the margin)
            continue
        dl = cf / wk  # the loss's derivative, l'(z_c)
        for e in range(rw.nnz):
            j = (e if ps.dense else <Py_ssize_t>idx[e]) + 1
            at = core.lam + j * KS + c * S
            s = at[core.off_scale]
            if s > 0.0:
                _ad_touch(core, at, rw.vals[e] / s, cf, wk, dl, t)
        if ps.fit_icpt:
            at = core.lam + c * S
            _ad_touch(core, at, ps.icpt / at[core.off_scale], cf, wk, dl, t)
        ps.mov[c] = 1
