# Rows under l1 (docs/design/core.md, "l1: soft thresholds, lazily"): the margins of
# soft(lambda, thr) read on the fly at a row's coordinates (p = 2, and p < 2 through the
# l_q map of the soft threshold), the row kernels of one problem of sparse rows, which do
# `_touch_l1`'s update (_touch.pxd) entry by entry in one loop a row, and the table's
# kernels for these configurations (_select.pxd): `margins_l1*`, `step_l1*`, `batch_l1*`.
from libc.math cimport fabs, copysign
from libc.stdint cimport int64_t

from onlinepgs._core._pgs cimport Core, Pass, Row, L1Heap
from onlinepgs._core._touch cimport TOUCH_L1, TOUCH_L1Q
from onlinepgs._core._steps cimport step_tail, step_rows, batch_rows
from onlinepgs._core._readout cimport rep_margin, rep_dot
from onlinepgs._core._l1q cimport l1q_link
from onlinepgs._core._l1avg cimport l1_avg_touch
from onlinepgs._core._ball cimport l1_bound_sq, l1_heap_touch
from onlinepgs._core._pair cimport (opgs_pair, opgs_pair_of, opgs_pair_all, opgs_lo, opgs_hi,
                                    opgs_add, opgs_mul)
from onlinepgs._core._l1pair cimport L1AvgSums, l1avg_add
from onlinepgs._core._sparse cimport index_t, sparse_axpy, not_inlined


cdef inline double soft_threshold(double lam, double thr) noexcept nogil:
    """sgn(lam) max(|lam| - thr, 0)."""
    # branch-free (a margin's coordinates fall either side at random); a comparison, not
    # fmax, which without -ffast-math is a libm call (NaN rules) in the hot loops
    cdef double a = fabs(lam) - thr
    return copysign(a if a > 0.0 else 0.0, lam)


cdef inline double _soft_clamp(double lam, double thr) noexcept nogil:
    """soft(lam, thr) as lam - clamp(lam, -thr, thr): a min, a max and a subtraction (no
    branch, no fabs/copysign masks), for the margin's loop. The same value as
    `soft_threshold` bit for bit where |lam| > thr (lam -+ thr is sgn(lam) (|lam| - thr)
    exactly: rounding is symmetric); +0 instead of a signed zero below it, which adds
    nothing to a sum either way."""
    cdef double c = lam if lam < thr else thr
    c = c if c > -thr else -thr
    return lam - c


cdef inline double _margin_l1(const double* lam, Py_ssize_t K, Py_ssize_t S, Py_ssize_t c,
                              const double* vals, const index_t* idx, Py_ssize_t nnz,
                              bint dense, double thr) noexcept nogil:
    """<soft(lambda_c, thr), x> over a row's entries (`_margin` with l1: the soft
    threshold read on the fly, O(nnz))."""
    cdef double t0 = 0.0
    cdef Py_ssize_t e
    cdef const double* base = lam + (K + c) * S
    cdef Py_ssize_t KS = K * S
    for e in range(nnz):
        t0 += soft_threshold(base[(e if dense else <Py_ssize_t>idx[e]) * KS], thr) * vals[e]
    return t0


cdef inline double _margin_l1q(const double* lam, Py_ssize_t K, Py_ssize_t S, Py_ssize_t c,
                               const double* vals, const index_t* idx, Py_ssize_t nnz,
                               bint dense, double thr, double inv_m, double q,
                               int quarters) noexcept nogil:
    """`_margin_l1` for p < 2: sum_e x_e sgn(lambda_j) (|lambda_j| - thr)_+^(q-1) (l1q_link;
    a power only where the coordinate is active)."""
    cdef double t0 = 0.0
    cdef Py_ssize_t e
    cdef const double* base = lam + (K + c) * S
    cdef Py_ssize_t KS = K * S
    for e in range(nnz):
        t0 += l1q_link(base[(e if dense else <Py_ssize_t>idx[e]) * KS], thr, inv_m, q,
                       quarters) * vals[e]
    return t0


cdef inline double _sparse_dot_sq_l1(const double* lam, Py_ssize_t stride, double thr,
                              const double* vals, const index_t* idx, Py_ssize_t nnz,
                              double* xx) noexcept nogil:
    """`sparse_dot_sq` of soft(lambda, thr) (one problem, sparse rows, l1 > 0): the
    margin's soft thresholds read on the fly and ||x||^2 from the same loads, in two
    independent sums. Called, not inlined (`not_inlined`)."""
    cdef double t0 = 0.0, t1 = 0.0, s0 = 0.0, s1 = 0.0, v0, v1
    cdef Py_ssize_t e, half = nnz - (nnz & 1)
    for e in range(0, half, 2):
        v0 = vals[e]
        v1 = vals[e + 1]
        t0 += _soft_clamp(lam[idx[e] * stride], thr) * v0
        t1 += _soft_clamp(lam[idx[e + 1] * stride], thr) * v1
        s0 += v0 * v0
        s1 += v1 * v1
    if half < nnz:
        v0 = vals[half]
        t0 += _soft_clamp(lam[idx[half] * stride], thr) * v0
        s0 += v0 * v0
    xx[0] = s0 + s1
    return t0 + t1


cdef inline double _sparse_dot_sq_l1avg(const double* blk, Py_ssize_t S, Py_ssize_t off_acc,
                                 double thr, double cum, double cum2, const double* vals,
                                 const index_t* idx, Py_ssize_t nnz, double* xx,
                                 double* rep) noexcept nogil:
    """`_sparse_dot_sq_l1` and, from the same loads, the reported average's dot
    (PART_L1AVG's `_part_value` summed over the row: 0 off the last iterate's support,
    else the folded sum acc + lambda C - sgn(lambda) C2, `l1_folded_total`) for one
    problem of sparse rows: one loop over the row instead of two, two entries at a time
    (`l1avg_add`; the margin and ||x||^2 bit for bit `_sparse_dot_sq_l1`'s). Called,
    not inlined (`not_inlined`)."""
    cdef L1AvgSums sums
    cdef opgs_pair zero = opgs_pair_all(0.0), vthr = opgs_pair_all(thr)
    cdef opgs_pair vneg = opgs_pair_all(-thr), vcum = opgs_pair_all(cum)
    cdef opgs_pair vcum2 = opgs_pair_all(cum2)
    cdef const double* f0
    cdef const double* f1
    cdef Py_ssize_t e, half = nnz - (nnz & 1)
    sums.margin = zero
    sums.sq = zero
    sums.rep = zero
    for e in range(0, half, 2):
        f0 = blk + idx[e] * S
        f1 = blk + idx[e + 1] * S
        l1avg_add(&sums, opgs_pair_of(f0[0], f1[0]), opgs_pair_of(f0[off_acc], f1[off_acc]),
                  opgs_pair_of(vals[e], vals[e + 1]), vthr, vneg, vcum, vcum2)
    if half < nnz:  # the last entry in the even lane, a zero entry in the odd one
        f0 = blk + idx[half] * S
        l1avg_add(&sums, opgs_pair_of(f0[0], 0.0), opgs_pair_of(f0[off_acc], 0.0),
                  opgs_pair_of(vals[half], 0.0), vthr, vneg, vcum, vcum2)
    xx[0] = opgs_lo(sums.sq) + opgs_hi(sums.sq)
    rep[0] = opgs_lo(sums.rep) + opgs_hi(sums.rep)
    return opgs_lo(sums.margin) + opgs_hi(sums.margin)


cdef inline double _l1_entries(Core core, const double* vals, const index_t* idx,
                               Py_ssize_t nnz, double cf, bint averaged,
                               int ball) noexcept nogil:
    """The loop of `_apply_row_l1_lazy`, `_touch_l1` entry by entry (averaged and ball are
    constants at each call, so each case compiles to its own loop): lambda's axpy; an average's
    folded sums with the threshold, C and C2 read once for the row (through `core` they
    are reloaded after every store to acc, which may alias them); on the ball (ball 1,
    or 2 when bbase = 0), returns the change of the lazy bound, the row's old and new
    terms summed as a pair (`l1_bound_sq`; at bbase = 0 lambda_j^2 old and new, the
    same bits) and subtracted once. An entry of value 0 leaves lambda_j
    as it is and an average's flag right (a touch that finds the flag wrong folds it:
    right at any step)."""
    cdef double thr = core.thr[0]
    cdef double cum = core.cum[0] if averaged else 0.0
    cdef double cum2 = core.cum2[0] if averaged else 0.0
    cdef Py_ssize_t e, S = core.S, off_acc = core.acc - core.lam, off_on = core.off_on
    cdef double lam_old, lam_new
    cdef opgs_pair sq = opgs_pair_all(0.0)
    cdef double bbase = core.heaps[0].bbase if ball else 0.0
    cdef double* base = core.lam + S  # data feature j is coordinate j + 1
    cdef double* f
    for e in range(nnz):
        f = base + <Py_ssize_t>idx[e] * S
        lam_old = f[0]
        lam_new = lam_old - cf * vals[e]
        f[0] = lam_new
        if averaged:
            l1_avg_touch(core, f, lam_old, lam_new, thr, cum, cum2, off_acc, off_on)
        if ball == 1:
            sq = opgs_add(sq, l1_bound_sq(fabs(lam_old), fabs(lam_new), bbase))
        elif ball == 2:
            sq = opgs_add(sq, opgs_mul(opgs_pair_of(lam_old, lam_new),
                                       opgs_pair_of(lam_old, lam_new)))
    return opgs_hi(sq) - opgs_lo(sq)


cdef inline void _apply_row_l1_lazy(Core core, const double* vals, const index_t* idx,
                             Py_ssize_t nnz, double cf) noexcept nogil:
    """`_apply_row_l1` with no heap kept (R^n, or a ball that cannot bind): one loop of
    `_l1_entries` for each case (the average's folded sums or not, the lazy ball's bound
    or not). Called, not inlined (`not_inlined`)."""
    cdef L1Heap* h = core.heaps  # NULL on R^n; lazy here on the ball
    cdef bint averaged = core.off_on > 0
    if h == NULL:
        if averaged:
            _l1_entries(core, vals, idx, nnz, cf, True, 0)
        else:  # the last iterate on R^n: the threshold is read at the margins
            sparse_axpy(core.lam + core.S, core.S, -cf, vals, idx, nnz)
        return
    # (bbase = 0: the bound is ||lambda||^2, its terms squares: the same bits, less work)
    if averaged:
        if h.bbase == 0.0:
            h.bn2 += _l1_entries(core, vals, idx, nnz, cf, True, 2)
        else:
            h.bn2 += _l1_entries(core, vals, idx, nnz, cf, True, 1)
    elif h.bbase == 0.0:
        h.bn2 += _l1_entries(core, vals, idx, nnz, cf, False, 2)
    else:
        h.bn2 += _l1_entries(core, vals, idx, nnz, cf, False, 1)
    h.touches += nnz


cdef inline void _l1_entries_heap(Core core, const double* vals, const index_t* idx,
                                  Py_ssize_t nnz, double cf, bint averaged) noexcept nogil:
    """`_touch_l1` entry by entry for problem 0 with its heap kept (`l1_heap_touch`, the
    same bits), with the threshold, the heap's sums, C and C2 in locals for the row:
    through `core` and the heap they are reloaded after every store to the block, which
    may alias them."""
    cdef L1Heap* h = core.heaps
    cdef double thr = core.thr[0]
    cdef double s1 = h.s1, n2 = h.n2, peak = h.peak, n_act = h.n_act
    cdef double cum = core.cum[0] if averaged else 0.0
    cdef double cum2 = core.cum2[0] if averaged else 0.0
    cdef Py_ssize_t e, j, S = core.S, off_acc = core.acc - core.lam
    cdef Py_ssize_t off_on = core.off_on, off_key = core.off_key
    cdef double xv, lam_old, lam_new
    cdef double* f
    for e in range(nnz):
        xv = vals[e]
        if xv == 0.0:
            continue
        j = <Py_ssize_t>idx[e] + 1  # data feature j is coordinate j + 1
        f = core.lam + j * S
        lam_old = f[0]
        lam_new = lam_old - cf * xv
        f[0] = lam_new
        if averaged:
            l1_avg_touch(core, f, lam_old, lam_new, thr, cum, cum2, off_acc, off_on)
        l1_heap_touch(h, f + off_key, j, fabs(lam_old), fabs(lam_new), &s1, &n2, &peak,
                      &n_act)
    h.s1 = s1
    h.n2 = n2
    h.peak = peak
    h.n_act = n_act


cdef inline void _apply_row_l1_heap(Core core, const double* vals, const index_t* idx,
                             Py_ssize_t nnz, double cf) noexcept nogil:
    """`_apply_row_l1` with the heap of a ball that may bind: one loop of
    `_l1_entries_heap` for an average or the last iterate. Called, not inlined
    (`not_inlined`)."""
    if core.off_on > 0:
        _l1_entries_heap(core, vals, idx, nnz, cf, True)
    else:
        _l1_entries_heap(core, vals, idx, nnz, cf, False)


cdef inline void _apply_row_l1(Core core, const double* vals, const index_t* idx,
                               Py_ssize_t nnz, double cf) noexcept nogil:
    """lambda -= cf * x for one sparse row of a single problem with l1 > 0 (p = 2): the
    fast path of `_touch_l1`. Without a heap kept (R^n, or a ball that cannot bind) the
    row takes `_apply_row_l1_lazy`; with its heap `_apply_row_l1_heap` (`_touch_l1`'s
    operations, no per-problem loop, no configuration branch of `_touch`)."""
    cdef void (*kernel)(Core, const double*, const index_t*, Py_ssize_t,
                        double) noexcept nogil
    if core.heaps == NULL or core.heaps[0].lazy:
        kernel = _apply_row_l1_lazy
    else:
        kernel = _apply_row_l1_heap
    kernel = <void (*)(Core, const double*, const index_t*, Py_ssize_t,
                       double) noexcept nogil>not_inlined(<void*>kernel)
    kernel(core, vals, idx, nnz, cf)


cdef inline void margin_l1_done(Pass* ps, Py_ssize_t c, double z) noexcept nogil:
    """Problem c's margin from the row's dot z with soft(lambda, thr) (p = 2): the
    intercept's term, times the scale s_c."""
    if ps.fit_icpt:
        z += soft_threshold(ps.core.lam[c * ps.core.S], ps.core.thr[0]) * ps.icpt
    ps.margins[c] = z * ps.s[c]


cdef inline void margins_l1_one_avg(Pass* ps, const Row* rw,
                                    const index_t* idx) noexcept nogil:
    """One problem of sparse rows, l1, an average: the margin, ||x||^2 and the average's
    folded sums read in one loop over the row (`_sparse_dot_sq_l1avg`)."""
    cdef Py_ssize_t S = ps.core.S
    cdef double dot_r
    cdef double z = _sparse_dot_sq_l1avg(ps.core.lam + S, S, ps.core.acc - ps.core.lam,
                                         ps.core.thr[0], ps.core.cum[0], ps.core.cum2[0],
                                         rw.vals, idx, rw.nnz, &ps.row_xx, &dot_r)
    margin_l1_done(ps, 0, z)
    rep_margin(ps, 0, dot_r)


cdef inline void margins_l1_one(Pass* ps, const Row* rw, const index_t* idx) noexcept nogil:
    """One problem of sparse rows, l1: the margin of soft(lambda, thr) and ||x||^2 in
    one loop (`_sparse_dot_sq_l1`; the reported iterate, when not the last, read apart)."""
    cdef Py_ssize_t S = ps.core.S
    cdef double z = _sparse_dot_sq_l1(ps.core.lam + S, S, ps.core.thr[0], rw.vals, idx,
                                      rw.nnz, &ps.row_xx)
    margin_l1_done(ps, 0, z)
    if not ps.rep_last:
        rep_margin(ps, 0, rep_dot(ps, 0, rw.vals, idx, rw.nnz))


cdef inline void margins_l1(Pass* ps, const Row* rw, const index_t* idx) noexcept nogil:
    """l1 at p = 2, several problems or a dense row: the K margins of soft(lambda, thr)
    and the reported iterate's."""
    cdef Py_ssize_t c
    for c in range(ps.K):
        margin_l1_done(ps, c, _margin_l1(ps.core.lam, ps.K, ps.core.S, c, rw.vals, idx,
                                         rw.nnz, ps.dense, ps.core.thr[0]))
        if not ps.rep_last:
            rep_margin(ps, c, rep_dot(ps, c, rw.vals, idx, rw.nnz))


cdef inline void margins_l1q(Pass* ps, const Row* rw, const index_t* idx) noexcept nogil:
    """l1 at p < 2: the K margins through the l_q map of the soft threshold (a power only
    where a coordinate is active), the intercept's the same way."""
    cdef Py_ssize_t c, S = ps.core.S
    cdef double z, thr
    for c in range(ps.K):
        thr = ps.core.thr[0]
        z = _margin_l1q(ps.core.lam, ps.K, S, c, rw.vals, idx, rw.nnz, ps.dense, thr,
                        ps.core.l1q[c].inv_m, ps.q, ps.quarters)
        if ps.fit_icpt:
            z += l1q_link(ps.core.lam[c * S], thr, ps.core.l1q[c].inv_m, ps.q,
                          ps.quarters) * ps.icpt
        ps.margins[c] = z * ps.s[c]
        if not ps.rep_last:
            rep_margin(ps, c, rep_dot(ps, c, rw.vals, idx, rw.nnz))


cdef inline void step_l1_one(Pass* ps, const Row* rw, const index_t* idx) noexcept nogil:
    """A step of one row, l1 at p = 2, one problem of sparse rows: `_apply_row_l1`, then
    the intercept (`step_tail`); ||x||^2 from the margin's loop."""
    cdef double cf = ps.coefs[0], xq
    if cf != 0.0:
        _apply_row_l1(ps.core, rw.vals, idx, rw.nnz, cf)
        ps.mov[0] = 1
    xq = ps.row_xq[rw.row] if ps.row_xq != NULL else ps.row_xx
    step_tail(ps, xq, rw.nnz, TOUCH_L1)


cdef inline void step_l1(Pass* ps, const Row* rw, const index_t* idx) noexcept nogil:
    """A step of one row, l1 at p = 2, several problems or a dense row (`step_rows`)."""
    step_rows(ps, rw, idx, TOUCH_L1)


cdef inline void step_l1q(Pass* ps, const Row* rw, const index_t* idx) noexcept nogil:
    """A step of one row, l1 at p < 2 (`step_rows`)."""
    step_rows(ps, rw, idx, TOUCH_L1Q)


cdef inline void batch_l1(Pass* ps, const double* data, const index_t* indices,
                          const int64_t* indptr, Py_ssize_t pos,
                          Py_ssize_t bsize) noexcept nogil:
    """A step of several rows, l1 at p = 2 (`batch_rows`)."""
    batch_rows(ps, data, indices, indptr, pos, bsize, TOUCH_L1)


cdef inline void batch_l1q(Pass* ps, const double* data, const index_t* indices,
                           const int64_t* indptr, Py_ssize_t pos,
                           Py_ssize_t bsize) noexcept nogil:
    """A step of several rows, l1 at p < 2 (`batch_rows`)."""
    batch_rows(ps, data, indices, indptr, pos, bsize, TOUCH_L1Q)
