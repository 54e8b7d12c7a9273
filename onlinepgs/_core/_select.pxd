# The one selection: the table of kernels a pass runs (`RowKernels`, declared in
# _pgs.pxd), chosen once a run from the state's configuration and the input's form
# (docs/design/core.md, "The table of row kernels", lists which runs where). The pass
# (`_run_pass`, _pgs.pyx) calls through it and makes no choice of its own. An update
# family of its own is its kernels (a margin, a step, a batch step; their touch, _touch.pxd)
# and one branch here.
#
# Each kernel is called through a pointer the compiler cannot see into (`not_inlined`),
# so it is compiled as a function of its own with the registers to itself: inlined into
# a function as large as the pass, gcc kept a row loop's invariants on the stack and
# rebuilt its vector constants on every entry (docs/design/core.md). One call a row,
# beside a loop over the row's entries, costs nothing that shows.
from libc.stdint cimport int64_t

from onlinepgs._core._pgs cimport PGSState, Pass, Row, RowKernels, PART_AVG2, PART_AVGQ, \
    PART_L1AVG
from onlinepgs._core._multiclass cimport MC_NONE
from onlinepgs._core._touch cimport touch_kind, TOUCH_L1, TOUCH_L1Q
from onlinepgs._core._pass cimport row_sparse, row_dense, row_crossed, loss_ovr, loss_coupled
from onlinepgs._core._rows_l2 cimport (margins_l2_one_avg2, margins_l2_one_avgq,
                                       margins_l2_one, margins_l2, margins_l2_avg2,
                                       step_l2_one, step_l2,
                                       batch_l2)
from onlinepgs._core._rows_l1 cimport (margins_l1_one_avg, margins_l1_one, margins_l1,
                                       margins_l1q, step_l1_one, step_l1, step_l1q,
                                       batch_l1, batch_l1q)
from onlinepgs._core._adaptive cimport (margins_ad_one, margins_ad_one_l1, margins_ad,
                                       step_ad_one, step_ad, batch_ad, margins_adq,
                                       step_adq, batch_adq, margins_adq_l1, step_adq_l1,
                                       batch_adq_l1, margins_ad_one_fg,
                                       margins_ad_fg, step_ad_one_fg, step_ad_fg)
from onlinepgs._core._adaptive_avg cimport margins_ad_avg
from onlinepgs._core._touch cimport _averaged
from onlinepgs._core._sparse cimport index_t, not_inlined


cdef inline RowKernels select_kernels(const Pass* ps, const index_t* of_type) noexcept nogil:
    """The kernels of a pass (`of_type`: the rows' index type, its value unused).

    One problem of sparse rows has kernels of its own (its margin's loop also takes
    ||x||^2, and the reported average's sums where it is one; its step one loop over the
    row); several problems, dense rows, and l1 at p < 2 take the general kernels (the K
    margins entry by entry; the step through the one-coordinate update of the state's
    kind). A coupled multiclass loss takes its own loss kernel."""
    cdef RowKernels kn
    cdef int kind = touch_kind(ps.core)
    cdef bint one = ps.K == 1 and not ps.dense
    cdef int own = ps.rep.own.kind if not ps.lane else -1  # the fused reported sums
    cdef void (*row)(Pass*, Row*, const double*, const index_t*, const int64_t*,
                     Py_ssize_t) noexcept nogil
    cdef void (*margins)(Pass*, const Row*, const index_t*) noexcept nogil
    cdef bint (*loss)(Pass*, const Row*, Py_ssize_t) noexcept nogil
    cdef void (*step)(Pass*, const Row*, const index_t*) noexcept nogil
    cdef void (*batch)(Pass*, const double*, const index_t*, const int64_t*, Py_ssize_t,
                       Py_ssize_t) noexcept nogil
    row = row_crossed if ps.cross != NULL else row_dense if ps.dense else row_sparse
    loss = loss_ovr if ps.mc == MC_NONE else loss_coupled
    if ps.core.adaptive and not ps.core.p_is_two and kind == TOUCH_L1Q:
        # p < 2's scalar stabilizer with l1: the l_q map of the soft threshold, N(thr)'s
        # sums (_l1q.pxd)
        margins = margins_adq_l1
        step = step_adq_l1
        batch = batch_adq_l1
    elif ps.core.adaptive and not ps.core.p_is_two:  # p < 2's scalar stabilizer
        margins = margins_adq
        step = step_adq
        batch = batch_adq
    elif ps.core.adaptive:  # the adaptive geometry (_adaptive.pxd)
        # with batches the general margins (the one-problem kernels keep a row's weights
        # where a batch sums its gradient) and every step a batch's (`_pass_step`)
        one = one and ps.k == 1
        # an average settles a coordinate's sums before its fields move: its own margins
        # (_adaptive_avg.pxd), and the general step
        one = one and not _averaged(ps.core.iterate)
        margins = (margins_ad_avg if _averaged(ps.core.iterate) else
                   margins_ad_one_l1 if one and ps.core.l1 > 0.0 else
                   margins_ad_one if one else margins_ad)
        step = step_ad_one if one else step_ad
        if ps.core.forgetting:  # kernels of their own (docs/design/adaptive.md, "Forgetting")
            margins = margins_ad_one_fg if one else margins_ad_fg
            step = step_ad_one_fg if one else step_ad_fg
        batch = batch_ad
    elif kind == TOUCH_L1Q:  # l1 at p < 2 (the last iterate only)
        margins = margins_l1q
        step = step_l1q
        batch = batch_l1q
    elif kind == TOUCH_L1:  # l1 at p = 2
        margins = (margins_l1_one_avg if one and own == PART_L1AVG else
                   margins_l1_one if one else margins_l1)
        step = step_l1_one if one else step_l1
        batch = batch_l1
    else:  # the l_p regularizer alone
        margins = (margins_l2_one_avg2 if one and own == PART_AVG2 else
                   margins_l2_one_avgq if one and own == PART_AVGQ else
                   margins_l2_one if one else
                   margins_l2_avg2 if not ps.dense and own == PART_AVG2 else margins_l2)
        step = step_l2_one if one else step_l2
        batch = batch_l2
    kn.row = not_inlined(<void*>row)
    kn.margins = not_inlined(<void*>margins)
    kn.loss = not_inlined(<void*>loss)
    kn.step = not_inlined(<void*>step)
    kn.batch = not_inlined(<void*>batch)
    return kn


cdef inline void call_row(RowKernels kn, Pass* ps, Row* rw, const double* data,
                          const index_t* indices, const int64_t* indptr,
                          Py_ssize_t i) noexcept nogil:
    """The row at position i of the order into rw."""
    (<void (*)(Pass*, Row*, const double*, const index_t*, const int64_t*,
               Py_ssize_t) noexcept nogil>kn.row)(ps, rw, data, indices, indptr, i)


cdef inline void call_margins(RowKernels kn, Pass* ps, const Row* rw,
                              const index_t* indices) noexcept nogil:
    """The row's K margins (and the reported iterate's) into ps.margins (ps.rep_scores)."""
    (<void (*)(Pass*, const Row*, const index_t*) noexcept nogil>kn.margins)(
        ps, rw, indices + rw.start if indices != NULL else NULL)


cdef inline bint call_loss(RowKernels kn, Pass* ps, const Row* rw,
                           Py_ssize_t b) noexcept nogil:
    """The loss of row b of the step; True when the run diverged at it."""
    return (<bint (*)(Pass*, const Row*, Py_ssize_t) noexcept nogil>kn.loss)(ps, rw, b)


cdef inline void call_step(RowKernels kn, Pass* ps, const Row* rw,
                           const index_t* indices) noexcept nogil:
    """A step of the one row rw."""
    (<void (*)(Pass*, const Row*, const index_t*) noexcept nogil>kn.step)(
        ps, rw, indices + rw.start if indices != NULL else NULL)


cdef inline void call_batch(RowKernels kn, Pass* ps, const double* data,
                            const index_t* indices, const int64_t* indptr, Py_ssize_t pos,
                            Py_ssize_t bsize) noexcept nogil:
    """A step of the bsize rows at order[pos:]."""
    (<void (*)(Pass*, const double*, const index_t*, const int64_t*, Py_ssize_t,
               Py_ssize_t) noexcept nogil>kn.batch)(ps, data, indices, indptr, pos, bsize)
