# The l_q mirror map of both solvers, in one home (docs/design/core.md).
#
# For p < 2 (q = p / (p - 1) > 2) both solvers keep a dual vector lambda (PGS's sum of
# gradients, SDCA's v = X^T alpha / (sigma m)) and the primal weights as
#
#     w = s * phi(lambda),  phi_j = sgn(lambda_j) (|lambda_j| / M)^(q-1),
#     N = sum_j (|lambda_j| / M)^q   (so ||lambda||_q = M N^(1/q)),
#
# with a scale M kept near max_j |lambda_j| so that every power stays inside the double
# range, and a running N, so that a step costs O(nnz) whatever the width. The solver
# supplies s (PGS: M N^((2-q)/q) / ((q-1)(t+1) sigma) times the ball's factor; SDCA:
# (p-1) M N^((2-q)/q)); this file owns the rest, and ONE rule for both:
#
# * the window: M is refreshed (O(coordinates reached)) when some |lambda_j| / M passes
#   r_hi = 2, or when N < norm_low = 2^-q (every coordinate fell below M / 2);
# * the headroom: a refresh sets M = 1.75 max |lambda_j| (below 2, so the fresh N >=
#   1.75^-q stays above 2^-q), so lambda may grow 3.5-fold before the next refresh, not
#   2-fold: O(log_3.5 t) refreshes. SDCA used M = max |lambda_j| (headroom 1) and so
#   refreshed up to twice as often; PGS's 1.75 is kept for both (its Dask lanes each
#   refresh on their own and must then send their sums whole, which makes refreshes
#   costlier there);
# * near p = 1 (q - 1 > PHI_BITS = 512) the window narrows to [M / 2^g, 2^g M] and the
#   headroom to 1.75^g, g = 512 / (q - 1): every phi stays within 2^-512 .. 2^512 of 1
#   (SDCA used the wide window there, whose powers overflow);
# * the recount: N drifts by one rounding per update, so it is recounted exactly after
#   MIRROR_RECOUNT (8) updates per coordinate in reach ("span": 1 + the largest
#   coordinate the rows reach, the intercept's 0 included). PGS learns its span from the
#   rows as they come; SDCA knows its data's from the start. (SDCA counted 8 dim, PGS 8
#   span: for SDCA the two are the same but for empty trailing columns.) N is also
#   recounted when it cancelled MIRROR_CANCEL-fold below its peak since the last count,
#   where its rounding, relative to that peak, would show;
# * the packed roots: where q - 1 is a multiple of 1/4 (p = 1.8, 1.5, ...) a row's powers
#   are taken together in a buffer (`phi_power_many`: square roots packed by the
#   compiler, bit for bit the scalar `phi_power`), chunks of MIRROR_CHUNK coordinates.
#
# p = 2 keeps no map (phi = lambda): PGS still keeps N for its ball (norm_low 2^-600).
from libc.math cimport fabs, copysign, exp, log, pow
from libc.stdint cimport int64_t

from onlinepgs._core._regularizer cimport phi_power, phi_power_many, phi_quarters
from onlinepgs._core._sparse cimport index_t

cdef enum:
    MIRROR_CHUNK = 256    # powers taken this many at a time (stack buffers)
    MIRROR_RECOUNT = 8    # N recounted after this many updates per coordinate in reach
    MIRROR_CANCEL = 1048576  # 2^20: N recounted when it fell this much below its peak


cdef struct Mirror:
    double q          # p / (p - 1); 2 for p = 2
    int quarters      # 4 (q - 1) when a small integer (packed roots), else 0
    double r_hi       # refresh M once some |lambda_j| / M passes this
    double headroom   # a refresh sets M = headroom max |lambda_j|
    double norm_low   # refresh M once N falls below this


cdef inline Mirror mirror_init(double p) noexcept nogil:
    """The map's constants at p in (1, 2] (see the rule above)."""
    cdef Mirror mm
    cdef double g
    mm.q = p / (p - 1.0) if p < 2.0 else 2.0
    mm.quarters = phi_quarters(mm.q)
    mm.r_hi = 2.0
    mm.headroom = 1.75
    # p = 2 needs N only for PGS's ball, and its phi does not depend on M
    mm.norm_low = pow(2.0, -600.0) if p == 2.0 else pow(2.0, -mm.q)
    if p < 2.0 and mm.q - 1.0 > 512.0:  # PHI_BITS
        g = 512.0 / (mm.q - 1.0)
        mm.r_hi = pow(2.0, g)
        mm.headroom = pow(1.75, g)
        mm.norm_low = pow(mm.r_hi, -mm.q)  # every coordinate below M / r_hi
    return mm


cdef inline double mirror_scale(Mirror mm, double lam_max) noexcept nogil:
    """The new M of a refresh from max |lambda_j| (1.75 for an all-zero lambda)."""
    return (lam_max if lam_max > 0.0 else 1.0) * mm.headroom


cdef inline bint mirror_refresh_due(Mirror mm, double norm, bint outgrown) noexcept nogil:
    """M must move: a coordinate passed r_hi M (`outgrown`), or all fell below M / r_hi."""
    return outgrown or norm < mm.norm_low


cdef inline bint mirror_cancelled(double norm, double peak) noexcept nogil:
    """N must be recounted: it cancelled MIRROR_CANCEL-fold below its peak since the last
    count, so its rounding (relative to that peak) would show. Near p = 1 the terms span
    r^q: a coordinate 4% below the largest counts 1e-18 as much at q = 1000, so N may lose
    its largest term and keep only rounding while every coordinate stays above M / 2."""
    return norm * MIRROR_CANCEL < peak


cdef inline bint mirror_drift_due(int64_t updates, int64_t span) noexcept nogil:
    """N must be recounted: MIRROR_RECOUNT updates per coordinate in reach since the last
    drift recount (amortized O(1) per update, and drift-free)."""
    return updates > MIRROR_RECOUNT * span


cdef inline double mirror_link(Mirror mm, double scale, double norm) noexcept nogil:
    """||lambda||_q^(2-q) M^(q-1) = M N^((2-q)/q), the factor of phi in grad r*(lambda)
    up to 1 / (q - 1); 0 when lambda is 0."""
    if norm <= 0.0:
        return 0.0
    return scale * exp(((2.0 - mm.q) / mm.q) * log(norm))


cdef inline double mirror_touch(Mirror mm, double lam_old, double lam_new, double phi_old,
                                double inv_m, double* phi_new,
                                int* outgrown) noexcept nogil:
    """One coordinate moved from lam_old to lam_new: its phi into phi_new, and N's change.
    A coordinate past r_hi M parks phi at 0 (finite) and sets outgrown: M is refreshed
    (and N recounted) after the step, so N's change is then moot."""
    cdef double r_new = fabs(lam_new) * inv_m, ph
    if r_new > mm.r_hi:
        ph = 0.0
        outgrown[0] = 1
    else:
        ph = copysign(phi_power(r_new, mm.q, mm.quarters), lam_new) if r_new > 0.0 else 0.0
    phi_new[0] = ph
    return r_new * fabs(ph) - fabs(lam_old) * inv_m * fabs(phi_old)


cdef inline double mirror_row(Mirror mm, double* lam, double* phi, Py_ssize_t stride,
                              const double* vals, const index_t* idx, Py_ssize_t nnz,
                              double cf, double inv_m, double* acc, double* mark,
                              double cum, bint averaged, int* outgrown) noexcept nogil:
    """lambda_j -= cf x_j over a sparse row (lam[idx[e] * stride], phi likewise), phi
    following; returns N's change. Per chunk of MIRROR_CHUNK entries, one loop per
    concern: the moves (with PGS's lazy average caught up first when `averaged`: acc,
    mark and cum as in _pgs.pyx), then the powers together (packed roots), then phi and N.
    """
    cdef Py_ssize_t e, j, base = 0, n
    cdef double old, new, ph, r_new, dn = 0.0
    cdef double r_buf[MIRROR_CHUNK]
    cdef double ph_buf[MIRROR_CHUNK]
    cdef double old_buf[MIRROR_CHUNK]
    while base < nnz:
        n = nnz - base if nnz - base < MIRROR_CHUNK else MIRROR_CHUNK
        # lambda's update, the lazy average's catch-up (it needs the old phi) and the
        # old phi's share of N; the new |lambda_j| / M go to a buffer ...
        if averaged:
            for e in range(n):
                j = idx[base + e] * stride
                ph = phi[j]
                acc[j] += ph * (cum - mark[j])
                mark[j] = cum
                old = lam[j]
                new = old - cf * vals[base + e]
                lam[j] = new
                r_buf[e] = fabs(new) * inv_m
                old_buf[e] = fabs(old) * inv_m * fabs(ph)
        else:
            for e in range(n):
                j = idx[base + e] * stride
                old = lam[j]
                new = old - cf * vals[base + e]
                lam[j] = new
                r_buf[e] = fabs(new) * inv_m
                old_buf[e] = fabs(old) * inv_m * fabs(phi[j])
        # ... whose powers are taken together (packed square roots) ...
        phi_power_many(r_buf, ph_buf, n, mm.q, mm.quarters)
        # ... and go back into phi and N
        for e in range(n):
            j = idx[base + e] * stride
            r_new = r_buf[e]
            ph = ph_buf[e]
            if r_new > mm.r_hi:
                # M no longer tracks max |lambda_j|: park phi at 0 (finite), refresh after
                ph = 0.0
                outgrown[0] = 1
            dn += r_new * ph - old_buf[e]
            phi[j] = copysign(ph, lam[j])
        base += n
    return dn


cdef inline double mirror_max(const double* lam, Py_ssize_t stride, const int64_t* coords,
                              Py_ssize_t count) noexcept nogil:
    """max |lambda_j| over coordinates coords[:count] (NULL: 0 .. count - 1)."""
    cdef Py_ssize_t i
    cdef double m = 0.0, a
    if coords == NULL:
        for i in range(count):
            a = fabs(lam[i * stride])
            if a > m:
                m = a
    else:
        for i in range(count):
            a = fabs(lam[coords[i] * stride])
            if a > m:
                m = a
    return m


cdef inline double mirror_count(Mirror mm, const double* lam, double* phi,
                                Py_ssize_t stride, const int64_t* coords, Py_ssize_t count,
                                double scale, bint write_phi) noexcept nogil:
    """N = sum_j (|lambda_j| / M)^q exactly over coordinates coords[:count] (sorted; NULL:
    0 .. count - 1), in increasing order, the powers packed; with write_phi (p < 2), phi
    afresh too (after M moved). The coordinates left out must be zeros."""
    cdef Py_ssize_t base = 0, n, e, j
    cdef double total = 0.0, r
    cdef double r_buf[MIRROR_CHUNK]
    cdef double ph_buf[MIRROR_CHUNK]
    if mm.q == 2.0:
        # p = 2 (PGS's ball): the terms are r * r, no powers to pack (the same sums)
        for e in range(count):
            r = fabs(lam[(e if coords == NULL else coords[e]) * stride]) / scale
            total += r * r
        return total
    while base < count:
        n = count - base if count - base < MIRROR_CHUNK else MIRROR_CHUNK
        # coordinates base .. base + n - 1, or the list's (a branch per chunk)
        if coords == NULL:
            for e in range(n):
                r_buf[e] = fabs(lam[(base + e) * stride]) / scale
        else:
            for e in range(n):
                r_buf[e] = fabs(lam[coords[base + e] * stride]) / scale
        phi_power_many(r_buf, ph_buf, n, mm.q, mm.quarters)
        for e in range(n):
            total += r_buf[e] * ph_buf[e]
        if write_phi:
            for e in range(n):
                j = (base + e) if coords == NULL else coords[base + e]
                phi[j * stride] = copysign(ph_buf[e], lam[j * stride])
        base += n
    return total
