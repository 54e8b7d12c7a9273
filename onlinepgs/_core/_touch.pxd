# One coordinate's update, in every configuration: lambda_j -= delta for problem c, with
# what the state keeps of it exact (phi and N through the l_q map, the lazy averages'
# catch-up, the random iterate's snapshot; with l1 the folded sums and the ball's norm, or
# N(thr)'s sums). The general path of a step (several problems, dense rows, mini-batches,
# the intercept) and the merge of Dask's lanes (_merge.pyx) go through it; the row
# kernels of one problem of sparse rows (_rows_l2.pxd, _rows_l1.pxd) do the same
# operations a row at a time.
from libc.math cimport fabs
from libc.stdint cimport int64_t

from onlinepgs._core._pgs cimport (Core, ITERATE_AVERAGE, ITERATE_WEIGHTED,
                                   ITERATE_WEIGHTED2, ITERATE_RANDOM)
from onlinepgs._core._mirror cimport mirror_touch
from onlinepgs._core._l1q cimport l1q_add
from onlinepgs._core._rows_l1 cimport _touch_l1


cdef inline bint _averaged(int iterate) noexcept nogil:
    """An average of the iterates (weights 1, t or t^2), kept lazily."""
    return (iterate == ITERATE_AVERAGE or iterate == ITERATE_WEIGHTED
            or iterate == ITERATE_WEIGHTED2)


cdef inline void _touch(Core core, Py_ssize_t j, Py_ssize_t c, double delta,
                        int* need_rescale) noexcept nogil:
    """lambda_j -= delta for problem c, keeping phi, N and the lazy iterates exact."""
    cdef Py_ssize_t idx = j * core.K + c, at = idx * core.S
    cdef double lam_old = core.lam[at], lam_new, phi_old = core.phi[at]
    cdef double inv_m, r_old, r_new, dn
    if core.l1q != NULL:
        # l1, p < 2 (last iterate only): lambda_j and its terms in N's sums
        l1q_add(core.l1q + c, fabs(lam_old), core.mm, -1.0)
        lam_new = lam_old - delta
        core.lam[at] = lam_new
        l1q_add(core.l1q + c, fabs(lam_new), core.mm, 1.0)
        return
    if core.l1 > 0.0:
        _touch_l1(core, j, c, delta)
        return
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
