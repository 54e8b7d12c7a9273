# One coordinate's update, in every configuration: lambda_j -= delta for problem c, with
# what the state keeps of it exact (phi and N through the l_q map, the lazy averages'
# catch-up, the random iterate's snapshot; with l1 the folded sums and the ball's norm, or
# N(thr)'s sums). Three kinds, one per family of the state's fields (`touch_kind`): the
# general steps (_steps.pxd: several problems, dense rows, mini-batches, the intercept)
# take the kind the table of row kernels chose (_select.pxd) as a constant, so each
# compiles to its own loop; the merge of Dask's lanes (_merge.pyx) goes through `_touch`,
# which dispatches on the same rule. The row kernels of one problem of sparse rows
# (_rows_l2.pxd, _rows_l1.pxd) do the same operations a row at a time.
from libc.math cimport fabs
from libc.stdint cimport int64_t

from onlinepgs._core._pgs cimport (Core, L1Heap, ITERATE_AVERAGE, ITERATE_WEIGHTED,
                                   ITERATE_WEIGHTED2, ITERATE_RANDOM)
from onlinepgs._core._mirror cimport mirror_touch
from onlinepgs._core._l1q cimport l1q_add
from onlinepgs._core._l1avg cimport l1_avg_touch
from onlinepgs._core._ball cimport l1_bound_move, l1_heap_touch


cdef enum:
    TOUCH_PLAIN = 0  # no l1: lambda, and phi, N, the averages, the snapshots as kept
    TOUCH_L1 = 1  # l1 at p = 2: lambda, an average's folded sums, the ball's norm
    TOUCH_L1Q = 2  # l1 at p < 2 (the last iterate): lambda and N(thr)'s sums


cdef inline bint _averaged(int iterate) noexcept nogil:
    """An average of the iterates (weights 1, t or t^2), kept lazily."""
    return (iterate == ITERATE_AVERAGE or iterate == ITERATE_WEIGHTED
            or iterate == ITERATE_WEIGHTED2)


cdef inline int touch_kind(Core core) noexcept nogil:
    """The kind of one-coordinate update the state's fields take."""
    if core.l1q != NULL:
        return TOUCH_L1Q
    if core.l1 > 0.0:
        return TOUCH_L1
    return TOUCH_PLAIN


cdef inline void _touch_plain(Core core, Py_ssize_t j, Py_ssize_t c, double delta,
                              int* need_rescale) noexcept nogil:
    """`_touch` without l1: lambda_j, and phi and N through the l_q map (p < 2, or N for
    the ball at p = 2), the lazy average's catch-up, the random iterate's snapshot."""
    cdef Py_ssize_t idx = j * core.K + c, at = idx * core.S
    cdef double lam_old = core.lam[at], lam_new, phi_old = core.phi[at]
    cdef double inv_m, r_old, r_new, dn
    if not core.p_is_two and _averaged(core.iterate):
        core.acc[at] += phi_old * (core.cum[c] - core.mark[at])
        core.mark[at] = core.cum[c]
    elif core.iterate == ITERATE_RANDOM:
        if core.snapv[idx] != core.rnd_ver[c]:
            core.snap[idx] = core.rnd_s[c] * phi_old
            core.snapv[idx] = core.rnd_ver[c]
    lam_new = lam_old - delta
    core.lam[at] = lam_new
    if core.p_is_two and _averaged(core.iterate):
        core.acc[at] -= delta * core.cum[c]
    if not core.need_norm:
        return
    inv_m = core.inv_scale[c]
    r_new = fabs(lam_new) * inv_m
    if core.p_is_two:
        if r_new > 1e150:
            need_rescale[0] = 1
            return
        r_old = lam_old * inv_m
        core.norm_sum[c] += r_new * r_new - r_old * r_old
        return
    dn = mirror_touch(core.mm, lam_old, lam_new, phi_old, inv_m, &core.phi[at], need_rescale)
    if not need_rescale[0]:  # else M is refreshed and N recounted after the step
        core.norm_sum[c] += dn


cdef inline void _touch_l1(Core core, Py_ssize_t j, Py_ssize_t c, double delta) noexcept nogil:
    """`_touch` with l1 > 0 (p = 2): move lambda_j, keep the average's folded sums, and
    on the ball the norm of the active set (heap, s1, n2, n_act; or the lazy bound)."""
    cdef Py_ssize_t at = (j * core.K + c) * core.S
    cdef double* f = core.lam + at
    cdef double thr = core.thr[0], lam_old = f[0], a_old = fabs(lam_old), a_new
    cdef double lam_new = lam_old - delta
    cdef L1Heap* h
    f[0] = lam_new
    if core.off_on > 0:
        # an average, folded: the sum of the iterates is acc_j + lambda_j C - sgn(lambda_j)
        # C2 while j is active (as l2 keeps lambda_j C - acc_j) and acc_j while inactive,
        # with the flag on = "left active at its last touch". A touch moves acc_j by the
        # change of its active part (`l1_avg_touch`: l2's delta C when it stays active with
        # its sign, nothing when it stays inactive). Only a coordinate that fell to the
        # threshold since its touch (on, |lambda_j| <= thr: rare; never while a heap pops
        # them as they fall) takes C and C2 as they stood then (`l1_acc_refold`)
        l1_avg_touch(core, f, lam_old, lam_new, thr, core.cum[c], core.cum2[c],
                     core.acc - core.lam, core.off_on)
    if core.heaps == NULL:
        return
    h = core.heaps + c
    a_new = fabs(lam_new)
    if h.lazy:
        h.bn2 += l1_bound_move(a_old, a_new, h.bbase)
        h.touches += 1
        return
    l1_heap_touch(h, f + core.off_key, j, a_old, a_new, &h.s1, &h.n2, &h.peak, &h.n_act)


cdef inline void _touch_l1q(Core core, Py_ssize_t j, Py_ssize_t c,
                            double delta) noexcept nogil:
    """`_touch` with l1 > 0 at p < 2 (the last iterate only): lambda_j and its terms in
    N(thr)'s sums (_l1q.pxd)."""
    cdef Py_ssize_t at = (j * core.K + c) * core.S
    cdef double lam_old = core.lam[at], lam_new
    l1q_add(core.l1q + c, fabs(lam_old), core.mm, -1.0)
    lam_new = lam_old - delta
    core.lam[at] = lam_new
    l1q_add(core.l1q + c, fabs(lam_new), core.mm, 1.0)


cdef inline void touch_as(int kind, Core core, Py_ssize_t j, Py_ssize_t c, double delta,
                          int* need_rescale) noexcept nogil:
    """`_touch` of a kind known where it is called (a constant there: one branch folded)."""
    if kind == TOUCH_L1Q:
        _touch_l1q(core, j, c, delta)
    elif kind == TOUCH_L1:
        _touch_l1(core, j, c, delta)
    else:
        _touch_plain(core, j, c, delta, need_rescale)


cdef inline void _touch(Core core, Py_ssize_t j, Py_ssize_t c, double delta,
                        int* need_rescale) noexcept nogil:
    """lambda_j -= delta for problem c, keeping phi, N and the lazy iterates exact."""
    touch_as(touch_kind(core), core, j, c, delta, need_rescale)
