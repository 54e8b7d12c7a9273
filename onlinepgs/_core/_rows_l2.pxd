# Rows without l1 (the l_p regularizer alone: p = 2, and p < 2 through the l_q map of
# _mirror.pxd): the margin <phi, x> of a row, the sum of its powers |x_j|^q, and the row
# kernel of one problem of sparse rows (`_apply_row`: lambda -= cf x with N and the lazy
# iterates in one pass over the row). The margins of one problem of sparse rows that also
# read ||x||^2 and the reported average's sums are _sparse.pxd's.
from libc.math cimport fabs
from libc.stdint cimport int64_t

from onlinepgs._core._pgs cimport Core, ITERATE_RANDOM
from onlinepgs._core._touch cimport _averaged
from onlinepgs._core._mirror cimport mirror_row, MIRROR_CHUNK
from onlinepgs._core._regularizer cimport phi_power_many
from onlinepgs._core._sparse cimport index_t, sparse_axpy


cdef inline double row_power_sum(const double* vals, Py_ssize_t nnz, double q,
                                 int quarters) noexcept nogil:
    """sum_e |x_e|^q = sum_e |x_e| phi_power(|x_e|) over a row's values."""
    cdef double a_buf[MIRROR_CHUNK]
    cdef double ph_buf[MIRROR_CHUNK]
    cdef double total = 0.0
    cdef Py_ssize_t base = 0, n, e
    while base < nnz:
        n = nnz - base if nnz - base < MIRROR_CHUNK else MIRROR_CHUNK
        for e in range(n):
            a_buf[e] = fabs(vals[base + e])
        phi_power_many(a_buf, ph_buf, n, q, quarters)
        for e in range(n):
            total += a_buf[e] * ph_buf[e]
        base += n
    return total


cdef inline double _margin(const double* phi, Py_ssize_t K, Py_ssize_t S, Py_ssize_t c,
                           const double* vals,
                           const index_t* idx, Py_ssize_t nnz, bint dense) noexcept nogil:
    """<phi_c, x> over a row's entries, coordinates offset by one for the intercept (one
    problem of sparse rows: `sparse_dot_sq`, which also takes ||x||^2)."""
    cdef double t0 = 0.0
    cdef Py_ssize_t e
    cdef const double* base = phi + (K + c) * S  # coordinate j + 1 of problem c
    cdef Py_ssize_t KS = K * S
    if dense:
        for e in range(nnz):
            t0 += base[e * KS] * vals[e]
        return t0
    for e in range(nnz):
        t0 += base[<Py_ssize_t>idx[e] * KS] * vals[e]
    return t0


cdef inline double _apply_row(Core core, const double* vals, const index_t* idx, Py_ssize_t nnz,
                       double cf, int* need_rescale, bint want_xq, double dot,
                       double xx) noexcept nogil:
    """lambda -= cf * x for one sparse row of a single problem; returns sum_j |x_j|^q
    (for p < 2 only when want_xq: the caller may have it precomputed).

    For p = 2 the caller passes dot = <lambda, x> before the update and xx = ||x||^2 (the
    margin's loop takes both), so N moves by ||lambda - cf x||^2 - ||lambda||^2 =
    cf (cf xx - 2 dot) in units of M^2, without a per-coordinate chain of additions; the
    exact recount every MIRROR_RECOUNT * span updates bounds the rounding drift.

    The fast path of `_touch` for K = 1, k = 1 and canonical rows (unique indices): one
    tight loop per concern, so no loop carries a branch on the configuration. Called, not
    inlined (`not_inlined`).
    """
    cdef Py_ssize_t e, j, S = core.S
    # data feature j is coordinate j + 1, at (j + 1) * S in the block
    cdef double* lam = core.lam + S
    cdef double* phi = core.phi + S
    cdef double* acc = core.acc + S
    cdef double* mark = core.mark + S
    cdef double* snap
    cdef int64_t* snapv
    cdef double cum, rs, inv_m, d, xq = 0.0
    cdef int64_t ver
    cdef bint averaged = _averaged(core.iterate)
    cum = core.cum[0] if averaged else 0.0
    if core.iterate == ITERATE_RANDOM:
        snap = core.snap + 1
        snapv = core.snapv + 1
        ver = core.rnd_ver[0]
        rs = core.rnd_s[0]
        for e in range(nnz):
            j = idx[e]
            if snapv[j] != ver:
                snap[j] = rs * phi[j * S]
                snapv[j] = ver
    if core.p_is_two:
        if averaged:
            for e in range(nnz):
                j = idx[e] * S
                d = cf * vals[e]
                lam[j] -= d
                acc[j] -= d * cum
        else:
            sparse_axpy(lam, S, -cf, vals, idx, nnz)
        if core.need_norm:
            inv_m = core.inv_scale[0]
            d = cf * inv_m
            core.norm_sum[0] += d * (d * xx - 2.0 * dot * inv_m)
            if not (core.norm_sum[0] < 1e300):  # some |lambda_j| / M passed 1e150 (or overflowed)
                need_rescale[0] = 1
        return xx
    # p < 2: lambda, phi and N through the l_q map (_mirror.pxd), the lazy average's
    # catch-up in the same pass over the row
    core.norm_sum[0] += mirror_row(core.mm, lam, phi, S, vals, idx, nnz, cf, core.inv_scale[0],
                                   acc, mark, cum, averaged, need_rescale)
    if want_xq:
        xq = row_power_sum(vals, nnz, core.mm.q, core.mm.quarters)
    return xq
