# The read-out: an iterate's weight at any coordinate, read from the lazy state and
# nothing settled (docs/design/core.md, "Predicting between steps"). `weights` reads every
# coordinate through `_read_weight`, `scores` the coordinates of its rows: one formula for
# a weight, so a row scored from the state gets the bits of the model read out whole. The
# averages and the random iterate are read as the pass reads the reported iterate's
# margins (`_part_value`), and the pass's reading of them is here too (`rep_margin`). A
# read-out changes nothing.
from libc.math cimport fabs, copysign, pow, signbit
from libc.stdint cimport uint64_t, int64_t

from onlinepgs._core._pgs cimport (PGSState, Part, Rep, Pass, Readout, READ_ZERO, READ_LAST,
                                   READ_L1_LAST, READ_SUMS, READ_RANDOM, READ_ADAPTIVE,
                                   READ_ADAPTIVE_Q, READ_ADAPTIVE_Q_L1, READ_ADAPTIVE_Q_AVG,
                                   READ_ADAPTIVE_AVG,
                                   PART_NONE,
                                   PART_AVG2, PART_AVGQ, PART_RANDOM, PART_L1AVG,
                                   ITERATE_LAST, ITERATE_WEIGHTED, ITERATE_WEIGHTED2,
                                   ITERATE_RANDOM)
from onlinepgs._core._l1q cimport L1Q, l1q_link
from onlinepgs._core._l1avg cimport l1_folded_total
from onlinepgs._core._touch cimport _averaged
from onlinepgs._core._sparse cimport index_t
from onlinepgs._core._adaptive cimport ad_value, ad_scalars, AD_INV, AD_PHI
from onlinepgs._core._adaptive_avg cimport ad_pending, avg_power


cdef inline double weight_total(int iterate, int64_t t) noexcept nogil:
    """The total weight of the averaged iterates w_1 .. w_t (the divisor of
    `PGSState.weights`): t, t (t + 1) / 2 or t (t + 1) (2 t + 1) / 6."""
    cdef double T = <double>t
    if iterate == ITERATE_WEIGHTED:
        return 0.5 * T * (T + 1.0)
    if iterate == ITERATE_WEIGHTED2:
        return T * (T + 1.0) * (2.0 * T + 1.0) / 6.0
    return T


cdef inline double _part_value(Part pt, Py_ssize_t j, Py_ssize_t c) noexcept nogil:
    """Coordinate j's entry of the part for problem c: the (unnormalised) weighted sum of
    its iterates, or the random iterate's weight."""
    cdef const double* at
    cdef Py_ssize_t flat
    if j >= pt.dim:
        return 0.0
    flat = j * pt.K + c
    at = pt.blk + flat * pt.S
    if pt.kind == PART_AVG2:
        return at[0] * pt.cum[c] - at[pt.off_acc]
    if pt.kind == PART_AVGQ:
        return at[pt.off_acc] + at[pt.off_phi] * (pt.cum[c] - at[pt.off_mark])
    if pt.kind == PART_RANDOM:
        if pt.snapv[flat] == pt.rnd_ver[c]:
            return pt.snap[flat]
        return pt.rnd_s[c] * at[pt.off_phi]
    if pt.kind == PART_L1AVG:
        if j > 0 and fabs(at[0]) <= pt.thr[0]:
            return 0.0  # the average on the last iterate's support (the intercept kept)
        return l1_folded_total(at[0], at[pt.off_acc], at[pt.off_on], pt.cum[c], pt.cum2[c],
                               pt.thr[0], pt.t[0], pt.sigma, pt.l1, pt.iterate)
    return 0.0


cdef inline Part part_of(PGSState st):
    """The lazy sums of the iterate this state reports, for the pass to read (see
    Rep; a lane reads its global state's, `_merge.fork`'s reference, the same way)."""
    cdef Part pt
    pt.kind = PART_NONE
    pt.blk = &st.block[0, 0, 0]
    pt.K = st.n_problems
    pt.S = st.n_fields
    pt.off_phi = st.off_phi
    pt.off_acc = st.off_acc
    pt.off_mark = st.off_mark
    pt.dim = st.dim
    pt.cum = &st.cum[0]
    pt.snap = &st.snap[0, 0]
    pt.snapv = &st.snapv[0, 0]
    pt.rnd_ver = &st.rnd_ver[0]
    pt.rnd_s = &st.rnd_s[0]
    pt.cum2 = &st.cum2[0]
    pt.thr = &st.l1_thr
    pt.off_on = st.off_on
    pt.t = &st.t
    pt.l1 = st.l1
    pt.sigma = st.sigma
    pt.forgetting = st.forgetting
    pt.tau = &st.tau
    pt.decay = &st.decay
    pt.delta_eta = st.delta / st.eta if st.adaptive else 0.0
    pt.iterate = st.iterate
    if st.adaptive and st.p_is_two:
        # its averages' settled sums are read by its own kernels (_adaptive_avg.pxd); p < 2
        # keeps the global geometry's (acc, mark and the running sum C of the factors)
        return pt
    if _averaged(st.iterate):
        pt.kind = PART_AVG2 if st.p_is_two else PART_AVGQ
        if st.l1 > 0.0:
            pt.kind = PART_L1AVG
    elif st.iterate == ITERATE_RANDOM:
        pt.kind = PART_RANDOM
    return pt


cdef inline Rep rep_of(PGSState st):
    """How this pass reads the reported iterate's margins (see Rep and `_run_pass`)."""
    cdef Rep rep
    cdef PGSState ref = st.reference
    rep.own = part_of(st)
    rep.ref.kind = PART_NONE
    rep.ref_weight = 0.0
    rep.last = st.iterate == ITERATE_LAST and ref is None
    if ref is not None:
        # a lane: its round starts from ref's iterates, which its own sums lack
        rep.ref = part_of(ref)
        if ref.iterate == ITERATE_LAST:
            rep.last = True
        elif rep.ref.kind != PART_RANDOM:
            rep.ref_weight = ref._average_norm()
    return rep


cdef inline Readout _readout(PGSState st, int it):
    """How iterate `it` (the state's own or the last) is read from the state's fields."""
    cdef Readout rd
    rd.pt = part_of(st)
    rd.s = &st.s[0]
    rd.l1q = st.l1q
    rd.qm1 = st.q - 1.0
    rd.quarters = st.quarters
    rd.norm = st._average_norm() if _averaged(it) else 1.0
    rd.p_is_two = st.p_is_two
    if st.t == 0:
        rd.kind = READ_ZERO
    elif st.adaptive:
        rd.kind = (READ_ADAPTIVE_AVG if _averaged(it) else
                   READ_ADAPTIVE if st.p_is_two else
                   READ_ADAPTIVE_Q_L1 if st.l1q != NULL else READ_ADAPTIVE_Q)
        if _averaged(it) and not st.p_is_two:
            rd.kind = READ_ADAPTIVE_Q_AVG
    elif it == ITERATE_LAST:
        rd.kind = READ_L1_LAST if st.l1 > 0.0 else READ_LAST
    elif _averaged(it):
        rd.kind = READ_SUMS
    else:
        rd.kind = READ_RANDOM
    return rd


cdef inline double _read_weight(Readout rd, int kind, Py_ssize_t j,
                                Py_ssize_t c) noexcept nogil:
    """Coordinate j's weight in problem c (j = 0: the intercept's constant feature), for
    the Readout's kind (passed apart: a constant where a loop reads one kind, which the
    compiler then folds). By value, as `Core`: its fields stay in registers across the
    caller's stores."""
    cdef const double* at
    cdef double lam, a, st, thr, bs
    if kind == READ_SUMS:
        return _part_value(rd.pt, j, c) / rd.norm
    if kind == READ_RANDOM:
        return _part_value(rd.pt, j, c)
    if kind == READ_ZERO:
        return 0.0
    at = rd.pt.blk + (j * rd.pt.K + c) * rd.pt.S
    if kind == READ_ADAPTIVE_AVG:  # the settled sum and the pending one, in the final scale
        return ((rd.pt.snap[j * rd.pt.K + c]
                 + ad_pending(at, rd.pt.snapv[j * rd.pt.K + c], rd.pt.t[0], rd.pt.sigma,
                              rd.pt.l1, avg_power(rd.pt.iterate))) / rd.norm) * at[AD_INV]
    if kind == READ_ADAPTIVE:  # a feature never seen: inv_scale 0
        ad_scalars(rd.pt.forgetting, rd.pt.sigma, rd.pt.l1, rd.pt.t[0], rd.pt.tau[0],
                   rd.pt.decay[0], rd.pt.delta_eta, &st, &thr, &bs)
        return ad_value(at, st, thr, bs) * at[AD_INV]
    if kind == READ_ADAPTIVE_Q_AVG:  # p < 2: the average of v_j, in the final scale
        return (_part_value(rd.pt, j, c) / rd.norm) * at[AD_INV]
    if kind == READ_ADAPTIVE_Q:  # p < 2: v_j = s_c phi_j (_adaptive.pxd)
        return at[AD_PHI] * rd.s[c] * at[AD_INV]
    if kind == READ_ADAPTIVE_Q_L1:  # with l1: the l_q map of soft(lam, l1 t), as margins
        return (l1q_link(at[0], rd.pt.thr[0], rd.l1q[c].inv_m, rd.qm1 + 1.0, rd.quarters)
                * rd.s[c] * at[AD_INV])
    if kind == READ_LAST:
        return at[rd.pt.off_phi] * rd.s[c]
    lam = at[0]
    a = fabs(lam) - rd.pt.thr[0]
    if not a > 0.0:
        return 0.0  # exactly 0 at or below the threshold (l1 selects)
    # p < 2: the l_q map of the soft threshold in the scale's units, times the scale
    # (`l1q_scale`, _upkeep.pxd)
    return copysign(a if rd.p_is_two else pow(a * rd.l1q[c].inv_m, rd.qm1), lam) * rd.s[c]


cdef inline void _read_range(Readout rd, int kind, Py_ssize_t dim, double* out) noexcept nogil:
    cdef Py_ssize_t j, c, K = rd.pt.K
    cdef double w
    # l1's zeros: out's stand (pages they fill are never touched)
    cdef bint sparse = (kind == READ_L1_LAST or kind == READ_ADAPTIVE_Q_L1
                        or (kind == READ_SUMS and rd.pt.kind == PART_L1AVG))
    for c in range(K):
        for j in range(dim):
            w = _read_weight(rd, kind, j, c)
            if sparse and w == 0.0 and not signbit(w):
                continue
            out[j * K + c] = w


cdef inline void _read_all(Readout rd, Py_ssize_t dim, double* out) noexcept nogil:
    """Every coordinate's weights into out, (dim, K) C order and zeros (l1 writes its
    non-zeros only): one loop per kind, each compiled for its kind alone."""
    if rd.kind == READ_LAST:
        _read_range(rd, READ_LAST, dim, out)
    elif rd.kind == READ_L1_LAST:
        _read_range(rd, READ_L1_LAST, dim, out)
    elif rd.kind == READ_SUMS:
        _read_range(rd, READ_SUMS, dim, out)
    elif rd.kind == READ_RANDOM:
        _read_range(rd, READ_RANDOM, dim, out)
    elif rd.kind == READ_ADAPTIVE:
        _read_range(rd, READ_ADAPTIVE, dim, out)
    elif rd.kind == READ_ADAPTIVE_Q:
        _read_range(rd, READ_ADAPTIVE_Q, dim, out)
    elif rd.kind == READ_ADAPTIVE_Q_L1:
        _read_range(rd, READ_ADAPTIVE_Q_L1, dim, out)
    elif rd.kind == READ_ADAPTIVE_Q_AVG:
        _read_range(rd, READ_ADAPTIVE_Q_AVG, dim, out)
    elif rd.kind == READ_ADAPTIVE_AVG:
        _read_range(rd, READ_ADAPTIVE_AVG, dim, out)


cdef inline void _read_scores(Readout rd, const double* vals, const index_t* idx,
                       const int64_t* ptr, Py_ssize_t n_rows, Py_ssize_t width,
                       bint fit_intercept, double intercept_scaling,
                       double* out) noexcept nogil:
    """(n_rows, K) scores of CSR rows into out: each row's products x_e w_(j+1) summed in
    the row's order from 0 (entries at columns >= width weigh 0 and are skipped), then
    the intercept added: the operations of scipy's CSR product and the model's
    intercept, so the bits of the model read out whole."""
    cdef Py_ssize_t i, e, c, K = rd.pt.K
    cdef uint64_t j
    cdef double x
    cdef double* row
    for i in range(n_rows):
        row = out + i * K
        for c in range(K):
            row[c] = 0.0
        for e in range(ptr[i], ptr[i + 1]):
            j = <uint64_t>idx[e]  # a negative index wraps past width: skipped
            if j >= <uint64_t>width:
                continue
            x = vals[e]
            for c in range(K):
                row[c] += x * _read_weight(rd, rd.kind, <Py_ssize_t>j + 1, c)
        for c in range(K):
            row[c] += (_read_weight(rd, rd.kind, 0, c) * intercept_scaling
                       if fit_intercept else 0.0)


cdef inline double _part_dot(Part pt, Py_ssize_t c, const double* vals, const index_t* idx,
                             Py_ssize_t nnz, bint dense) noexcept nogil:
    """sum_e x_e (the part's entry of coordinate j_e + 1) over a row's entries (the
    reported margin's general path: several problems, dense rows, lanes, "random")."""
    cdef double t0 = 0.0
    cdef Py_ssize_t e
    if pt.kind == PART_NONE:
        return 0.0
    for e in range(nnz):
        t0 += vals[e] * _part_value(pt, (e if dense else <Py_ssize_t>idx[e]) + 1, c)
    return t0


cdef inline void rep_margin(Pass* ps, Py_ssize_t c, double dot) noexcept nogil:
    """The reported iterate's margin of the pass's row for problem c (`_run_pass`), into
    rep_scores[c]: `dot` (the row's dot with the parts' sums, `_part_dot` or a fused
    margin's), the intercept's term, over the iterates' weight total (inv_w)."""
    cdef double zr = dot
    if ps.fit_icpt:
        zr += ps.icpt * (_part_value(ps.rep.own, 0, c) + _part_value(ps.rep.ref, 0, c))
    ps.rep_scores[c] = zr * ps.inv_w


cdef inline double rep_dot(Pass* ps, Py_ssize_t c, const double* vals, const index_t* idx,
                           Py_ssize_t nnz) noexcept nogil:
    """The reported iterate's dot of a row with problem c's parts (own, and ref in a
    lane), read at the row's coordinates (the general path: `_part_dot`)."""
    return (_part_dot(ps.rep.own, c, vals, idx, nnz, ps.dense)
            + _part_dot(ps.rep.ref, c, vals, idx, nnz, ps.dense))
