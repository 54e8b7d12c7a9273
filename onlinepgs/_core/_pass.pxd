# The pass over rows (`_run_pass`, _pgs.pyx) apart from its kernels: what the kernels
# share (`Pass`, filled once a run by `pass_of`), a row's place in the data (`row_sparse`
# with the prefetches, `row_dense`), the loss of a row at its margins (`loss_ovr`,
# `loss_coupled`: the step's coefficients and the statistics) and a step's bookkeeping
# (`step_begin`, `step_commit`, `step_end`). Which kernels a pass runs is chosen once,
# in _select.pxd.
from libc.math cimport log, sqrt, pow, isfinite, INFINITY
from libc.stdint cimport int64_t, int32_t, uint32_t

from onlinepgs._core._pgs cimport (PGSState, Core, Rep, Pass, Row, Seen, PART_NONE,
                                   PART_AVG2, PART_AVGQ, PART_RANDOM)
from onlinepgs._core._seen cimport _note_pass, _note_new, _seen_spend
from onlinepgs._core._losses cimport loss_value, loss_and_derivative
from onlinepgs._core._multiclass cimport (mc_loss_grad, MC_NONE, MC_MULTINOMIAL,
                                          MC_CRAMMER_SINGER)
from onlinepgs._core._upkeep cimport end_steps
from onlinepgs._core._sparse cimport index_t, prefetch_gather, OPGS_PREFETCH
from onlinepgs._core._features cimport CrossRows, cross_row, emit_crossed
from onlinepgs._core._written cimport write_cols_first


cdef inline Pass pass_of(PGSState st, Rep rep, bint classifier, bint dense, Py_ssize_t n_cols,
                         const double* y, const double* sw, const int64_t* order,
                         Py_ssize_t n_rows, const double* row_xq,
                         CrossRows* cross) noexcept nogil:
    """What the kernels of a pass over the rows in `order` share (see `Pass`)."""
    cdef Pass ps
    ps.cross = cross
    ps.written = st.written
    ps.core = st._core()
    ps.rep = rep
    ps.K = st.n_problems
    ps.k = st.batch_size
    ps.n_rows = n_rows
    ps.n_cols = n_cols
    ps.y = y
    ps.sw = sw
    ps.order = order
    ps.row_xq = row_xq
    ps.span = &st.span
    ps.touches = &st.touches_since_exact
    ps.dense = dense
    ps.classifier = classifier
    ps.multiclass = st.multiclass
    ps.fit_icpt = st.fit_intercept
    ps.p2 = st.p_is_two
    ps.radius_auto = st.radius_auto
    ps.loss_code = st.loss_code
    ps.quarters = st.quarters
    ps.icpt = st.intercept_scaling
    ps.q = st.q
    ps.sigma = st.sigma
    ps.epsilon = st.epsilon
    ps.loss0_unit = loss_value(ps.loss_code, 0.0, 1.0, ps.epsilon)
    # a coupled multiclass loss (multinomial, Crammer-Singer): the row's K margins, then
    # ONE loss of them whose gradient in the scores gives the K coefficients of the step
    ps.mc = st.mc_code if (classifier and st.multiclass) else MC_NONE
    ps.inv_kp = 1.0 / ps.K
    if ps.mc == MC_MULTINOMIAL:
        ps.loss0_unit = log(<double>ps.K)  # l(0; y) = log K: the ball of radius="auto"
    elif ps.mc == MC_CRAMMER_SINGER:
        ps.loss0_unit = 1.0  # max_j [j != y] at z = 0
    ps.step_w = <double>st.t_step
    ps.step_sq = ps.step_w * ps.step_w
    ps.margins = &st.margins_buf[0]
    ps.rep_scores = &st.mc_scores[0]
    ps.coefs = &st.coefs[0]
    ps.G = &st.grad_acc[0]
    ps.s = &st.s[0]
    ps.gqs = &st.step_gq[0]
    ps.b_loss_c = &st.b_loss_c[0]
    ps.b_conj_c = &st.b_conj_c[0]
    ps.mc_grad = &st.mc_grad[0]
    ps.resc = &st.flag_rescale[0]
    ps.mov = &st.flag_moved[0]
    ps.is_touched = &st.is_touched[0]
    ps.touched = &st.touched[0]
    # the reported iterate's progressive sums: each row's margin at the iterate the state
    # reports (the model a user gets), as it was before the row's step, read from the lazy
    # sums at the row's coordinates (`_part_value`: the formulas of `weights`, divided by
    # the weight total of the iterates so far); the last iterate's is the margin itself
    ps.rep_last = rep.last
    ps.lane = rep.ref.kind != PART_NONE
    ps.rep_random = rep.own.kind == PART_RANDOM or rep.ref.kind == PART_RANDOM
    ps.acc_rel = ps.core.S
    ps.mark_rel = ps.core.S
    if rep.own.kind == PART_AVGQ:  # the sum's and mark's offsets from phi
        ps.acc_rel = st.off_acc - st.off_phi
        ps.mark_rel = st.off_mark - st.off_phi
    elif rep.own.kind == PART_AVG2:
        ps.acc_rel = st.off_acc
    ps.inv_w = 1.0
    ps.row_dot = 0.0
    ps.row_xx = 0.0
    return ps


cdef inline void note_rows(Pass* ps, Seen* sn, const index_t* indices, const int64_t* indptr,
                           const int64_t[::1] order) noexcept nogil:
    """Before the pass: the coordinates its rows may reach on the list of those reached
    (`_note_pass`; crossed rows: `_note_crossed`), for the sweeps."""
    if ps.cross != NULL:
        _note_crossed(ps, sn, order)
        return
    _note_pass(sn, ps.core.lam, ps.K, ps.core.S, indices, indptr, order, ps.n_cols, ps.dense,
               ps.fit_icpt)


cdef inline void _prefetch_ahead(Core core, const double* data, const index_t* indices,
                                 const int64_t* indptr, const double* y, const double* sw,
                                 const int64_t* order, Py_ssize_t n_rows,
                                 Py_ssize_t i) noexcept nogil:
    """Hint the cache about the rows after row position i, each one stage further:
    the offsets of row i + 3, the values, indices, label and weight of row i + 2 (its
    offsets came a row earlier), and the state lines that row i + 1 will gather (its
    indices came a row earlier). Shuffled rows are scattered over memory and their
    coordinates over the state, so neither is foreseen by the hardware; the hints only
    move data, the results do not depend on them."""
    cdef Py_ssize_t e, start, end, stride = core.K * core.S
    cdef Py_ssize_t per_line = 64 // sizeof(index_t)
    cdef int64_t row
    if i + 3 < n_rows:
        OPGS_PREFETCH(&indptr[order[i + 3]])
    if i + 2 < n_rows:
        row = order[i + 2]
        OPGS_PREFETCH(y + row)
        OPGS_PREFETCH(sw + row)
        start = indptr[row]
        end = indptr[row + 1]
        # 64-byte lines: 8 values, 8 (16) indices
        for e in range(start, end, 8):
            OPGS_PREFETCH(data + e)
        e = start
        while e < end:
            OPGS_PREFETCH(indices + e)
            e += per_line
    if i + 1 < n_rows:
        row = order[i + 1]
        start = indptr[row]
        prefetch_gather(core.lam + stride, stride, indices + start, indptr[row + 1] - start)


cdef inline void row_sparse(Pass* ps, Row* rw, const double* data, const index_t* indices,
                            const int64_t* indptr, Py_ssize_t i) noexcept nogil:
    """The row at position i of the order, of CSR input, and the prefetches ahead of it;
    `span` grows to the row's last coordinate."""
    cdef int64_t top
    rw.row = ps.order[i]
    _prefetch_ahead(ps.core, data, indices, indptr, ps.y, ps.sw, ps.order, ps.n_rows, i)
    rw.start = indptr[rw.row]
    rw.nnz = indptr[rw.row + 1] - rw.start
    rw.vals = data + rw.start
    if rw.nnz > 0:  # canonical rows: the last index is the largest
        top = (<int64_t>indices[rw.start + rw.nnz - 1] + 1) + 1
        if top > ps.span[0]:
            ps.span[0] = top


cdef inline void _note_crossed(Pass* ps, Seen* sn, const int64_t[::1] order) noexcept nogil:
    """`_note_pass` of crossed rows: each row's columns as they are made (unsorted, with
    their duplicates: the list is sorted and deduplicated before a sweep)."""
    cdef CrossRows* cx = ps.cross
    cdef Py_ssize_t i, e, n, n_rows = order.shape[0]
    if not sn.track:
        return
    for i in range(n_rows):
        n = emit_crossed(cx, order[i])
        if not _seen_spend(sn, n + (1 if i == 0 else 0)):
            return
        if i == 0 and ps.fit_icpt:
            _note_new(sn, ps.core.lam, ps.K, ps.core.S, 0)
        for e in range(n):
            _note_new(sn, ps.core.lam, ps.K, ps.core.S,
                      <int64_t>cx.build.keys[e] + 1)


cdef inline void row_crossed(Pass* ps, Row* rw, const double* data, const index_t* indices,
                             const int64_t* indptr, Py_ssize_t i) noexcept nogil:
    """The row at position i of the order, of namespaced rows crossed into a slot of
    `ps.cross` (whose row_idx the pass reads as its indices), made by the first run of
    the pass to reach it, and the next row made ahead into the other slot, the state
    lines it will gather hinted to the cache for this run (as `_prefetch_ahead` does for
    CSR rows); `span` grows to the row's last coordinate."""
    cdef CrossRows* cx = ps.cross
    cdef int64_t top
    cdef Py_ssize_t room = cx.build.room, stride = ps.core.K * ps.core.S
    cdef int s = i & 1
    if cx.made_at[s] != i:
        cx.made_nnz[s] = cross_row(cx, ps.order[i], cx.row_idx + s * room,
                                   cx.row_vals + s * room)
        cx.made_at[s] = i
    if i + 1 < ps.n_rows:
        if cx.made_at[1 - s] != i + 1:
            cx.made_nnz[1 - s] = cross_row(cx, ps.order[i + 1], cx.row_idx + (1 - s) * room,
                                           cx.row_vals + (1 - s) * room)
            cx.made_at[1 - s] = i + 1
        prefetch_gather(ps.core.lam + stride, stride,
                        <const int32_t*>cx.row_idx + (1 - s) * room, cx.made_nnz[1 - s])
    rw.row = ps.order[i]
    rw.start = s * room
    rw.nnz = cx.made_nnz[s]
    rw.vals = cx.row_vals + rw.start
    if ps.written != NULL:  # each new page of a block in small pages written first
        write_cols_first(ps.written, <char*>ps.core.lam, 8 * ps.K * ps.core.S,
                         <const int32_t*>cx.row_idx + rw.start, rw.nnz)
    if rw.nnz > 0:  # canonical rows: the last index is the largest
        top = (<int64_t>cx.row_idx[rw.start + rw.nnz - 1] + 1) + 1
        if top > ps.span[0]:
            ps.span[0] = top


cdef inline void row_dense(Pass* ps, Row* rw, const double* data, const index_t* indices,
                           const int64_t* indptr, Py_ssize_t i) noexcept nogil:
    """The row at position i of the order, of dense input (n_cols values a row)."""
    cdef int64_t top
    rw.row = ps.order[i]
    rw.start = rw.row * ps.n_cols
    rw.nnz = ps.n_cols
    rw.vals = data + rw.start
    if rw.nnz > 0:
        top = ps.n_cols + 1
        if top > ps.span[0]:
            ps.span[0] = top


cdef inline void row_sums(Pass* ps, const Row* rw, Py_ssize_t label, double w_i,
                          double ex_loss, double ex_loss_r, int best_c, int best_rc,
                          double zr0) noexcept nogil:
    """A row's mistakes (the last iterate's and the reported one's) and its loss into the
    step's sums."""
    if ps.classifier:
        if ps.multiclass:
            if best_c != label:
                ps.b_mistakes += 1
            if best_rc != label and not ps.rep_last:
                ps.b_mistakes_r += 1
        else:
            if (ps.margins[0] > 0.0) != (ps.y[rw.row] > 0.0):
                ps.b_mistakes += 1
            if (zr0 > 0.0) != (ps.y[rw.row] > 0.0) and not ps.rep_last:
                ps.b_mistakes_r += 1
    ps.b_weight += w_i
    ps.b_loss += ex_loss
    ps.b_wloss += w_i * ex_loss
    ps.b_wloss_r += w_i * ex_loss_r


cdef inline bint loss_ovr(Pass* ps, const Row* rw, Py_ssize_t b) noexcept nogil:
    """The loss of row b of the step at its K margins (one-vs-rest, a binary problem or a
    regression): each problem's coefficient of the step, the dual estimate's terms, the
    reported iterate's loss, the mistakes. True where a derivative is not finite (a run
    diverging on R^n: the step is not applied)."""
    cdef Py_ssize_t c, K = ps.K, label
    cdef double w_i = ps.sw[rw.row], ex_loss = 0.0, ex_loss_r = 0.0, best = 0.0
    cdef double best_r = 0.0, zr0 = 0.0, z, zr, yc, lv, dl, l0
    cdef int best_c = 0, best_rc = 0
    label = <Py_ssize_t>ps.y[rw.row] if (ps.classifier and ps.multiclass) else 0
    for c in range(K):
        z = ps.margins[c]
        if ps.classifier and ps.multiclass:
            yc = 1.0 if c == label else -1.0
            if c == 0 or z > best:
                best = z
                best_c = <int>c
        else:
            yc = ps.y[rw.row]
        if not ps.rep_last:  # the last iterate's: the step's own sums (`step_commit`)
            zr = ps.rep_scores[c]
            ex_loss_r += loss_value(ps.loss_code, zr, yc, ps.epsilon)
            if c == 0:
                zr0 = zr
            if c == 0 or zr > best_r:  # the multiclass prediction: the first argmax
                best_r = zr
                best_rc = <int>c
        lv = loss_and_derivative(ps.loss_code, z, yc, ps.epsilon, &dl)
        ex_loss += lv
        if not isfinite(dl):
            return True
        ps.coefs[b * K + c] = dl * w_i * ps.inv_k
        # the dual estimate's a_i = -w_i l'(z_i), whose conjugate term is
        # w_i l*(l'(z_i)) = w_i (z_i l'(z_i) - l(z_i)) (Fenchel-Young equality)
        ps.b_loss_c[c] += w_i * lv
        ps.b_conj_c[c] += w_i * (z * dl - lv)
        if ps.radius_auto:
            # l(0; +-1) is one constant for the classification losses
            l0 = w_i * (ps.loss0_unit if ps.classifier else
                        loss_value(ps.loss_code, 0.0, yc, ps.epsilon))
            if l0 > ps.b_loss0:
                ps.b_loss0 = l0
    row_sums(ps, rw, label, w_i, ex_loss, ex_loss_r, best_c, best_rc, zr0)
    return False


cdef inline bint loss_coupled(Pass* ps, const Row* rw, Py_ssize_t b) noexcept nogil:
    """`loss_ovr` for a coupled multiclass loss: one loss of the K margins, its gradient
    softmax(z) - e_y (multinomial) or e_j* - e_y (Crammer-Singer) in the scores giving
    problem c's coefficient. True where the loss is not finite (a margin overflowed)."""
    cdef Py_ssize_t c, K = ps.K, label = <Py_ssize_t>ps.y[rw.row]
    cdef double w_i = ps.sw[rw.row], ex_loss, ex_loss_r = 0.0, best = 0.0, best_r = 0.0
    cdef double zr0 = 0.0, z, zr, lv
    cdef int best_c = 0, best_rc = 0
    for c in range(K):
        z = ps.margins[c]
        if c == 0 or z > best:
            best = z
            best_c = <int>c
        if not ps.rep_last:
            zr = ps.rep_scores[c]
            if c == 0:
                zr0 = zr
            if c == 0 or zr > best_r:
                best_r = zr
                best_rc = <int>c
    lv = mc_loss_grad(ps.mc, ps.margins, K, label, ps.mc_grad)
    if not isfinite(lv):
        return True
    ex_loss = lv
    if not ps.rep_last:
        ex_loss_r = mc_loss_grad(ps.mc, ps.rep_scores, K, label, NULL)
    for c in range(K):
        ps.coefs[b * K + c] = ps.mc_grad[c] * w_i * ps.inv_k
        # the online dual estimate: the row's loss counted once and its conjugate term
        # l*(grad) = <z, grad> - l (Fenchel-Young), shared out so that the K problems'
        # figures add up to the coupled objective's
        ps.b_loss_c[c] += w_i * lv * ps.inv_kp
        ps.b_conj_c[c] += w_i * (ps.margins[c] * ps.mc_grad[c] - lv * ps.inv_kp)
    if ps.radius_auto and w_i * ps.loss0_unit > ps.b_loss0:
        ps.b_loss0 = w_i * ps.loss0_unit
    row_sums(ps, rw, label, w_i, ex_loss, ex_loss_r, best_c, best_rc, zr0)
    return False


cdef inline void step_begin(PGSState st, Pass* ps, Py_ssize_t bsize) noexcept nogil:
    """Before the rows of a step of bsize rows: its scales, its sums at zero, and the
    reported iterate's divisor (the weight total of the iterates so far)."""
    cdef Py_ssize_t c
    cdef double w_total
    ps.inv_b = 1.0 / bsize
    ps.inv_k = ps.step_w / bsize  # the gradient's scale (1 / bsize but in a lane)
    if st.forgetting:
        # lambda_t = gamma lambda_{t-1} + g_t is lambda~ += g_t / G_t, G_t = gamma G_{t-1}
        ps.inv_k /= st.decay * st.forget
    for c in range(ps.K):
        ps.resc[c] = 0
        ps.mov[c] = 0
        ps.gqs[c] = 0.0
    ps.b_mistakes = 0
    ps.b_weight = ps.b_loss = ps.b_wloss = 0.0
    ps.b_loss0 = st.loss0_max
    for c in range(ps.K):
        ps.b_loss_c[c] = 0.0
        ps.b_conj_c[c] = 0.0
    ps.b_wloss_r = 0.0
    ps.b_mistakes_r = 0
    if not ps.rep_last and not ps.rep_random:
        w_total = (ps.rep.ref_weight + st.own_weight) if ps.lane else st._average_norm()
        ps.inv_w = 1.0 / w_total if w_total > 0.0 else 0.0  # t = 0: the zero model


cdef inline void step_commit(PGSState st, Pass* ps, Py_ssize_t bsize) noexcept nogil:
    """The step will be applied: its rows' sums into the state's statistics, and the
    radius of a ball "auto" grown to the largest weighted loss at 0 seen."""
    cdef Py_ssize_t c
    st.n_examples += bsize
    st.n_mistakes += ps.b_mistakes
    st.sum_weight += ps.b_weight
    st.sum_loss += ps.b_loss
    st.sum_weighted_loss += ps.b_wloss
    if ps.rep_last:  # the reported iterate is the last one: the same sums
        ps.b_wloss_r = ps.b_wloss
        ps.b_mistakes_r = ps.b_mistakes
    st.sum_weighted_loss_reported += ps.b_wloss_r
    st.n_mistakes_reported += ps.b_mistakes_r
    for c in range(ps.K):
        # r(w_{t-1}) from ||w_{t-1}||_p (NaN without N: p = 2 on R^n)
        st.sum_reg[c] += st.w_norm[c] * st.w_norm[c] / (2.0 * (st.p - 1.0))
        st.sum_step_loss[c] += ps.inv_b * ps.b_loss_c[c]
        st.sum_conj[c] += ps.inv_b * ps.b_conj_c[c]
    if ps.b_loss0 > st.loss0_max:
        st.loss0_max = ps.b_loss0
        st.radius = sqrt(2.0 * (st.p - 1.0) * ps.b_loss0 / ps.sigma)
        if st.radius == INFINITY:
            # the square overflows where the radius itself does not (sample weights
            # near the double range): take the roots apart
            st.radius = sqrt(ps.b_loss0) * sqrt(2.0 * (st.p - 1.0) / ps.sigma)


cdef inline void step_end(PGSState st, Pass* ps) noexcept nogil:
    """After the step's updates: t moves and the scalars follow (`end_steps`), a lane's
    own weight, and the regret statistic's ||g_t||_q^2."""
    cdef Py_ssize_t c
    cdef double gq
    end_steps(st, ps.resc, ps.mov, st.t_step, 1.0, True)
    if ps.lane:
        # the weight the step's iterate got in the lane's own sums (`end_steps`)
        st.own_weight += st._step_weight()
    for c in range(ps.K):
        gq = ps.gqs[c] if ps.p2 else (pow(ps.gqs[c], 2.0 / ps.q) if ps.gqs[c] > 0.0 else 0.0)
        # ||g_t||_q^2 of the step's own gradient (coefs carry the lane's scale)
        st.regret[c] += 0.5 * gq / (st.t * ps.sigma * ps.step_sq)
