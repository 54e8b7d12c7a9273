# Rows without l1 (the l_p regularizer alone: p = 2, and p < 2 through the l_q map of
# _mirror.pxd): the margin <phi, x> of a row, the row kernel of one problem of sparse rows
# (`_apply_row`: lambda -= cf x with N and the lazy iterates in one pass over the row), and
# the table's kernels for these configurations (_select.pxd): `margins_l2*` (one problem
# of sparse rows: the margin's loop also takes ||x||^2 and, for an average, the reported
# iterate's sums, _sparse.pxd's fused dots), `step_l2_one`, `step_l2`, `batch_l2`.
from libc.math cimport fabs
from libc.stdint cimport int64_t

from onlinepgs._core._pgs cimport Core, Pass, Part, Row, ITERATE_RANDOM
from onlinepgs._core._touch cimport _averaged, TOUCH_PLAIN
from onlinepgs._core._steps cimport row_power_sum, step_tail, step_rows, batch_rows
from onlinepgs._core._readout cimport rep_margin, rep_dot, _part_dot
from onlinepgs._core._mirror cimport mirror_row
from onlinepgs._core._sparse cimport (index_t, sparse_axpy, sparse_dot_sq, sparse_dot_sq_avg2,
                                      sparse_dot_sq_avgq)


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


cdef inline void margin_l2_done(Pass* ps, Py_ssize_t c, double z) noexcept nogil:
    """Problem c's margin from the row's dot z with phi: the intercept's term, times the
    scale s_c."""
    if ps.fit_icpt:
        z += ps.core.phi[c * ps.core.S] * ps.icpt
    ps.margins[c] = z * ps.s[c]


cdef inline void margins_l2_one_avg2(Pass* ps, const Row* rw,
                                     const index_t* idx) noexcept nogil:
    """One problem of sparse rows, an average at p = 2: the margin, ||x||^2 and the
    average's sum lambda_j C - acc_j read in one loop over the row."""
    cdef Py_ssize_t S = ps.core.S
    cdef double dot_r
    cdef double z = sparse_dot_sq_avg2(ps.core.phi + S, ps.acc_rel, S, rw.vals, idx, rw.nnz,
                                       &ps.row_xx, &dot_r)
    ps.row_dot = z
    margin_l2_done(ps, 0, z)
    rep_margin(ps, 0, ps.core.cum[0] * z - dot_r)


cdef inline void margins_l2_one_avgq(Pass* ps, const Row* rw,
                                     const index_t* idx) noexcept nogil:
    """One problem of sparse rows, an average at p < 2: the margin, ||x||^2 and the
    average's sum acc_j + phi_j (C - mark_j) read in one loop over the row."""
    cdef Py_ssize_t S = ps.core.S
    cdef double dot_r
    cdef double z = sparse_dot_sq_avgq(ps.core.phi + S, ps.acc_rel, ps.mark_rel, S,
                                       ps.core.cum[0], rw.vals, idx, rw.nnz, &ps.row_xx,
                                       &dot_r)
    ps.row_dot = z
    margin_l2_done(ps, 0, z)
    rep_margin(ps, 0, dot_r)


cdef inline void margins_l2_one(Pass* ps, const Row* rw, const index_t* idx) noexcept nogil:
    """One problem of sparse rows: the margin and ||x||^2 in one loop (the reported
    iterate, when it is not the last, read apart: a lane's, the random iterate)."""
    cdef Py_ssize_t S = ps.core.S
    cdef double z = sparse_dot_sq(ps.core.phi + S, S, rw.vals, idx, rw.nnz, &ps.row_xx)
    ps.row_dot = z
    margin_l2_done(ps, 0, z)
    if not ps.rep_last:
        rep_margin(ps, 0, rep_dot(ps, 0, rw.vals, idx, rw.nnz))


cdef inline void margins_l2(Pass* ps, const Row* rw, const index_t* idx) noexcept nogil:
    """The K margins of a row (several problems, or a dense row), and the reported
    iterate's."""
    cdef Py_ssize_t c
    for c in range(ps.K):
        margin_l2_done(ps, c, _margin(ps.core.phi, ps.K, ps.core.S, c, rw.vals, idx, rw.nnz,
                                      ps.dense))
        if not ps.rep_last:
            rep_margin(ps, c, rep_dot(ps, c, rw.vals, idx, rw.nnz))


cdef inline void margins_l2_avg2(Pass* ps, const Row* rw, const index_t* idx) noexcept nogil:
    """The K margins of a sparse row (several problems), an average at p = 2: problem
    c's margin and its average's sums lambda_j C_c - acc_j read in one loop over the row
    (`margins_l2` reads them in two: `_margin`, then `rep_dot`; the same sums, term by
    term, in the same order)."""
    cdef Py_ssize_t c, e, j, K = ps.K, S = ps.core.S, KS = K * S
    cdef Part pt = ps.rep.own
    cdef const double* base
    cdef const double* at
    cdef double t0, r0, cum
    for c in range(K):
        base = ps.core.phi + (K + c) * S  # coordinate j + 1 of problem c
        cum = pt.cum[c]
        t0 = 0.0
        r0 = 0.0
        for e in range(rw.nnz):
            j = <Py_ssize_t>idx[e]
            t0 += base[j * KS] * rw.vals[e]
            if j + 1 < pt.dim:  # `_part_value` of PART_AVG2 at coordinate j + 1
                at = pt.blk + ((j + 1) * pt.K + c) * pt.S
                r0 += rw.vals[e] * (at[0] * cum - at[pt.off_acc])
            else:
                r0 += rw.vals[e] * 0.0
        margin_l2_done(ps, c, t0)
        rep_margin(ps, c, r0 + _part_dot(ps.rep.ref, c, rw.vals, idx, rw.nnz, False))


cdef inline void step_l2_one(Pass* ps, const Row* rw, const index_t* idx) noexcept nogil:
    """A step of one row, one problem of sparse rows: `_apply_row` (with the row's dot
    and ||x||^2 from its margin's loop), then the intercept (`step_tail`)."""
    cdef double cf = ps.coefs[0], xq = 0.0
    if cf != 0.0:
        xq = _apply_row(ps.core, rw.vals, idx, rw.nnz, cf, ps.resc, ps.row_xq == NULL,
                        ps.row_dot, ps.row_xx)
        if ps.row_xq != NULL:
            xq = ps.row_xq[rw.row]
        ps.mov[0] = 1
    step_tail(ps, xq, rw.nnz, TOUCH_PLAIN)


cdef inline void step_l2(Pass* ps, const Row* rw, const index_t* idx) noexcept nogil:
    """A step of one row, several problems or a dense row (`step_rows`)."""
    step_rows(ps, rw, idx, TOUCH_PLAIN)


cdef inline void batch_l2(Pass* ps, const double* data, const index_t* indices,
                          const int64_t* indptr, Py_ssize_t pos,
                          Py_ssize_t bsize) noexcept nogil:
    """A step of several rows (`batch_rows`)."""
    batch_rows(ps, data, indices, indptr, pos, bsize, TOUCH_PLAIN)
