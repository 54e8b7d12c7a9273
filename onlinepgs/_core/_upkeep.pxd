# The state between steps: after a step's (or a merged round's) updates, t moves and
# the scalars follow (docs/design/core.md): the scale s_t of every iterate (the ball's
# projection, l1's threshold and factor, N(thr) for l1 at p < 2), the upkeep of the l_q
# map (N recounted, M refreshed), forgetting's renormalization, the lazy averages' running
# sums (settled and restarted), the random iterate's reservoir. Sweeps visit the
# coordinates reached (`PGSState._sweep`, _seen.pxd).
from libc.math cimport fabs, sqrt, exp, log, pow, isfinite
from libc.stdint cimport int64_t

from onlinepgs._core._pgs cimport PGSState, L1Heap, ITERATE_RANDOM
from onlinepgs._core._touch cimport _averaged
from onlinepgs._core._mirror cimport (mirror_scale, mirror_refresh_due, mirror_cancelled,
                                      mirror_drift_due, mirror_link, mirror_max, mirror_count)
from onlinepgs._core._l1q cimport L1Q, l1q_add, l1q_estimate
from onlinepgs._core._l1avg cimport l1_folded_total
from onlinepgs._core._ball cimport (l1_ball_factor, l1_heaps_pop, l1_heaps_upkeep,
                                    l1_build_heap)
from onlinepgs._core._random cimport uniform01
from onlinepgs._core._adaptive cimport adq_scales, ad_renormalize


cdef extern from *:
    """
    static const double OPGS_RENORM_BELOW = 6.223015277861142e-61;  /* 2^-200 */
    static const double OPGS_M_FLOOR = 2.409919865102884e-181;  /* 2^-600 */
    """
    # Forgetting keeps lambda~ = lambda / G with G = gamma^t falling every step, so lambda~
    # and the lazy sums grow like 1 / G: once G falls below RENORM_BELOW they are
    # multiplied by G and G set to 1 (one sweep over the coordinates reached, every
    # 138.6 / ln(1/gamma) steps), far from the double range (lambda~ at most 2^200 times
    # lambda).
    const double RENORM_BELOW "OPGS_RENORM_BELOW"
    # the smallest M a renormalization leaves as it is (M_FLOOR): far enough above
    # the double range's bottom (2^-1074) for the next renormalizations' factors of
    # about 2^-200 each
    const double M_FLOOR "OPGS_M_FLOOR"


cdef inline double _projected_scale(double radius, double norm, double q) noexcept nogil:
    """The s of w = s phi on the ball's boundary, radius N^(-1/p) (||phi||_p = N^(1/p),
    p = q / (q - 1)): the projection without M or t, for the rare state whose norm over
    (t + 1) sigma leaves the double range while the projected iterate does not (sample
    weights of 1e308: the usual s * radius / ||w|| collapsed to 0)."""
    return radius * exp(log(norm) * (1.0 - q) / q)


cdef inline double ad_threshold(PGSState st) noexcept nogil:
    """The adaptive geometry's l1 threshold at p < 2 in lam's units, l1 t: v =
    grad r*(soft(lam, l1 t) / D_t) (docs/design/adaptive.md, "l1 at p < 2")."""
    return st.l1 * <double>st.t


cdef inline void l1q_recount(PGSState st, Py_ssize_t c) noexcept nogil:
    """l1, p < 2: problem c's sums S_k counted exactly about the current threshold
    (O(coordinates reached), _l1q.pxd)."""
    cdef L1Q fresh
    cdef Py_ssize_t i, j, n
    cdef const int64_t* coords
    cdef double top = 0.0
    fresh.thr0 = st.l1_thr
    fresh.s0 = fresh.s1 = fresh.s2 = 0.0
    fresh.outgrown = 0
    n = st._sweep(&coords)
    for i in range(n):
        j = coords[i] if coords != NULL else i
        if fabs(st.lam[j, c]) > top:
            top = fabs(st.lam[j, c])
    # the mirror map's window about the largest active part (_l1q.pxd)
    fresh.m = mirror_scale(st.mm, top - fresh.thr0 if top > fresh.thr0 else 0.0)
    fresh.inv_m = 1.0 / fresh.m
    for i in range(n):
        j = coords[i] if coords != NULL else i
        l1q_add(&fresh, fabs(st.lam[j, c]), st.mm, 1.0)
    st.l1q[c] = fresh
    st.n_l1q_recounts += 1


cdef inline void l1q_check(PGSState st) noexcept nogil:
    """l1, p < 2, after the threshold moved: count N again where the estimate's
    error bound passed l1q_tol() (_l1q.pxd)."""
    cdef Py_ssize_t c
    cdef double bound, n
    for c in range(st.n_problems):
        n = l1q_estimate(st.l1q + c, st.l1_thr, st.q, &bound)
        # the estimate's error, a term past the window (bound infinite), or every
        # active part below m / r_hi (the window's other side; an empty set stays)
        if bound > st.l1q_tol or (0.0 < n < st.mm.norm_low):
            l1q_recount(st, c)


cdef inline double l1q_scale(PGSState st, Py_ssize_t c, double denom) noexcept nogil:
    """l1, p < 2: s with w_j = s sgn(lambda_j) ((|lambda_j| - thr)_+ / m)^(q-1), i.e.
    grad r*(u / denom) for u = soft(lambda, thr): m N^((2-q)/q) / ((q - 1) denom), times
    the ball's factor, N = ||u / m||_q^q from its estimate (_l1q.pxd: an upper bound, so
    that on the ball ||w||_p <= radius)."""
    cdef double bound, s, wnorm
    cdef double n = l1q_estimate(st.l1q + c, st.l1_thr, st.q, &bound)
    if n <= 0.0:
        if st.bounded:
            st.w_norm[c] = 0.0
        return 0.0
    s = st.l1q[c].m * exp(log(n) * (2.0 - st.q) / st.q) / ((st.q - 1.0) * denom)
    if st.bounded:
        wnorm = (st.p - 1.0) * st.l1q[c].m * exp(log(n) / st.q) / denom
        if wnorm > st.radius:
            s *= st.radius / wnorm
            if not (isfinite(wnorm) and isfinite(s)):
                s = _projected_scale(st.radius, n, st.q)
        st.w_norm[c] = st.radius if wnorm > st.radius else wnorm
    return s


cdef inline double scale_of(PGSState st, Py_ssize_t c, int64_t t) noexcept nogil:
    """s such that w_t = s * phi, from N, M and t (Figure 2 in scalar form). On the
    ball it also leaves ||w_t||_p in w_norm[c] (the projection needs it anyway);
    on R^n `_w_norm` computes that."""
    cdef double denom = st._denom(t)
    cdef double s, norm_q, wnorm
    if st.l1q != NULL:
        return l1q_scale(st, c, denom)
    if st.l1 > 0.0:
        # w = soft(lambda, thr) / denom, times the ball's factor (the heaps' norm)
        s = 1.0 / denom
        if st.bounded:
            s *= l1_ball_factor(st, c, denom)
        return s
    if st.p_is_two:
        s = 1.0 / denom
        if st.bounded:
            wnorm = st.mscale[c] * sqrt(st.norm_sum[c]) / denom
            if wnorm > st.radius:
                s *= st.radius / wnorm
                if not isfinite(wnorm):  # ||lambda|| / denom beyond the double range:
                    # the projection's s = radius / ||lambda|| needs no denom
                    s = st.radius / st.mscale[c] / sqrt(st.norm_sum[c])
            st.w_norm[c] = st.radius if wnorm > st.radius else wnorm
        return s
    if st.norm_sum[c] <= 0.0:
        if st.bounded:
            st.w_norm[c] = 0.0
        return 0.0
    # ||lambda||_q^(2-q) M^(q-1) / ((q-1)(t+1) sigma), with ||lambda||_q = M N^(1/q)
    s = mirror_link(st.mm, st.mscale[c], st.norm_sum[c]) / ((st.q - 1.0) * denom)
    if st.bounded:
        norm_q = st.mscale[c] * exp(log(st.norm_sum[c]) / st.q)
        wnorm = (st.p - 1.0) * norm_q / denom
        if wnorm > st.radius:
            s *= st.radius / wnorm
            if not (isfinite(wnorm) and isfinite(s)):
                s = _projected_scale(st.radius, st.norm_sum[c], st.q)
        st.w_norm[c] = st.radius if wnorm > st.radius else wnorm
    return s


cdef inline void settle_all(PGSState st, Py_ssize_t c) noexcept nogil:
    """Fold the lazy average of problem c into acc and restart its running sum."""
    cdef Py_ssize_t i, j, n
    cdef const int64_t* coords
    if not _averaged(st.iterate):
        return
    if st.l1 > 0.0:
        l1_settle_all(st, c)
        return
    # a loop per kind of sweep: every coordinate's has no indirection to pay
    n = st._sweep(&coords)
    if st.p_is_two:
        # the sum is C lambda_j - acc_j: moving C lambda_j into acc leaves it with C = 0
        if coords == NULL:
            for j in range(n):
                st.acc[j, c] -= st.lam[j, c] * st.cum[c]
        else:
            for i in range(n):
                j = coords[i]
                st.acc[j, c] -= st.lam[j, c] * st.cum[c]
    elif coords == NULL:
        for j in range(n):
            st.acc[j, c] += st.phi[j, c] * (st.cum[c] - st.mark[j, c])
            st.mark[j, c] = 0.0
    else:
        for i in range(n):
            j = coords[i]
            st.acc[j, c] += st.phi[j, c] * (st.cum[c] - st.mark[j, c])
            st.mark[j, c] = 0.0
    st.cum[c] = 0.0


cdef inline void settle_every(PGSState st) noexcept nogil:
    """`settle_all` of every problem: one sweep of the coordinates, each one's K problems
    side by side in the block, not K sweeps that each read a line of every coordinate
    (a race's fork of a 20-class state over 62k features: one pass of 20 MB, not 20).
    The same values: each (coordinate, problem) is folded by the same formula."""
    cdef Py_ssize_t c, i, j, n, K = st.n_problems
    cdef const int64_t* coords
    if not _averaged(st.iterate):
        return
    if st.l1 > 0.0 or K == 1:
        for c in range(K):
            settle_all(st, c)
        return
    n = st._sweep(&coords)
    for i in range(n):
        j = coords[i] if coords != NULL else i
        if st.p_is_two:
            for c in range(K):
                st.acc[j, c] -= st.lam[j, c] * st.cum[c]
        else:
            for c in range(K):
                st.acc[j, c] += st.phi[j, c] * (st.cum[c] - st.mark[j, c])
                st.mark[j, c] = 0.0
    for c in range(K):
        st.cum[c] = 0.0


cdef inline void l1_settle_all(PGSState st, Py_ssize_t c) noexcept nogil:
    """l1: fold every coordinate's running sums into acc and restart C and C2 (every
    coordinate reached is visited; one that fell to the threshold since its touch, on
    R^n or on a ball without its heap, by the closed form)."""
    cdef Py_ssize_t i, j, n
    cdef double* f
    cdef const int64_t* coords
    n = st._sweep(&coords)
    for i in range(n):
        j = coords[i] if coords != NULL else i
        f = &st.block[j, c, 0]
        if f[0] == 0.0:
            continue  # left inactive at its touch (its sum is acc; zero rows stay zero)
        f[st.off_acc] = l1_folded_total(f[0], f[st.off_acc], f[st.off_on],
                                          st.cum[c], st.cum2[c], st.l1_thr,
                                          st.l1_sum_t, st.sigma, st.l1,
                                          st.iterate)
        # with C = C2 = 0 an active one's sum is acc + 0; the others' is acc
        f[st.off_on] = 1.0 if fabs(f[0]) > st.l1_thr else 0.0
    st.cum[c] = 0.0
    st.cum2[c] = 0.0


cdef inline void widen_window(PGSState st) noexcept nogil:
    """Forgetting, p < 2: widen M's window from [M / 2, 2 M] to [M / 2^g, 2^g M],
    g = 256 / q, and its headroom to 1.75^g (the rule near p = 1, _mirror.pxd).
    lambda~ grows by 1 / gamma a step on the coordinates the rows keep touching, so
    the 3.5-fold window would be refreshed every ln 3.5 / ln(1 / gamma) steps (1,252
    at 0.999), a sweep over the coordinates reached each time; 3.5^g-fold lasts g
    times longer. Every phi stays within 2^-256 .. 2^256 (g (q - 1) < 256) and N
    below dim 2^256 (g q = 256). Where g <= 1 (q >= 256) the window stays."""
    cdef double g = 256.0 / st.mm.q
    if g <= 1.0 or st.mm.r_hi > 2.0:
        return
    st.mm.r_hi = pow(2.0, g)
    st.mm.headroom = pow(1.75, g)
    st.mm.norm_low = pow(st.mm.r_hi, -st.mm.q)


cdef inline void renormalize(PGSState st) noexcept nogil:
    """Forgetting: bring lambda~ back to G = 1 (lambda~, M, the lazy sums and their
    divisor times G), which leaves every iterate as it is. One sweep over the
    coordinates reached, every 138.6 / ln(1/gamma) steps (see RENORM_BELOW)."""
    cdef Py_ssize_t c, i, j, n, K = st.n_problems
    cdef const int64_t* coords
    cdef double g = st.decay
    cdef bint averaged = _averaged(st.iterate)
    settle_every(st)  # the running sums C restart at 0: the rest is in acc
    n = st._sweep(&coords)
    for i in range(n):
        j = coords[i] if coords != NULL else i
        for c in range(K):
            st.lam[j, c] *= g
            if averaged:
                st.acc[j, c] *= g
            if st.off_key > 0:  # the heap's keys below take the same product
                st.block[j, c, st.off_key] *= g
    for c in range(K):
        # phi = (|lambda~| / M)^(q-1) is unchanged with M; for p = 2 phi is lambda~,
        # so the random iterate's scale takes 1 / G (its snapshots are weights)
        st.mscale[c] *= g
        st.inv_scale[c] = 1.0 / st.mscale[c]
        if st.p_is_two:
            st.rnd_s[c] /= g
    st.weight_sum *= g
    if st.l1 > 0.0:
        # l1: the threshold and the heaps' keys and sums in the new units (the order
        # of the keys is kept)
        st.l1_thr *= g
        if st.heaps != NULL:
            for c in range(K):
                for i in range(st.heaps[c].n):
                    st.heaps[c].key[i] *= g
                st.heaps[c].base *= g
                st.heaps[c].s1 *= g
                st.heaps[c].n2 *= g * g
                st.heaps[c].peak *= g * g
                st.heaps[c].bbase *= g
                st.heaps[c].bn2 *= g * g
    st.decay = 1.0
    st.n_renorms += 1
    st.n_rescales += 1
    st.n_restarts += 1


cdef inline void exact_norm(PGSState st, Py_ssize_t c, bint rescale) noexcept nogil:
    """Recompute N exactly from lambda; with rescale, first move M to headroom times
    max |lambda_j| (and phi with it). Sweeps the coordinates updates reached
    (`_sweep`), in increasing order. The map's arithmetic: _mirror.pxd."""
    cdef Py_ssize_t i, j, count, KS = st.n_problems * st.n_fields
    cdef double m, total
    cdef const int64_t* coords
    # problem c's lambda and phi: every KS doubles from these
    cdef double* lam_c = &st.block[0, 0, 0] + c * st.n_fields
    cdef double* phi_c = lam_c + st.off_phi
    if rescale:
        st.n_rescales += 1
        count = st._sweep(&coords)
        m = mirror_scale(st.mm, mirror_max(lam_c, KS, coords, count))
        if not st.p_is_two:
            settle_all(st, c)
            # w = rnd_s * phi for coordinates not yet snapped: snap them all now, in the
            # old units (scaling rnd_s by (m / old_m)^(q-1) instead overflows near
            # p = 1, where phi underflows: inf * 0)
            # (the coordinates no update reached have phi = 0 and need no snap)
            if st.rnd_ver[c] > 0:
                count = st._sweep(&coords)
                for i in range(count):
                    j = coords[i] if coords != NULL else i
                    if st.snapv[j, c] != st.rnd_ver[c]:
                        st.snap[j, c] = st.rnd_s[c] * st.phi[j, c]
                        st.snapv[j, c] = st.rnd_ver[c]
        st.mscale[c] = m
        st.inv_scale[c] = 1.0 / m
    count = st._sweep(&coords)
    # p = 2: phi is lambda, which M does not change
    total = mirror_count(st.mm, lam_c, phi_c, KS, coords, count, st.mscale[c],
                         rescale and not st.p_is_two)
    st.norm_sum[c] = total
    st.norm_peak[c] = total


cdef inline void l1_advance(PGSState st) noexcept nogil:
    """After t moved: the new threshold; on the ball each problem's coordinates that fell
    to it leave the active set and the norm of soft(lambda, thr) follows (_ball.pxd); for
    p < 2, N(thr) is counted again where its estimate is no longer close enough."""
    cdef double thr = st._denom(st.t) * st.l1 / st.sigma
    if st.heaps == NULL:
        st.l1_thr = thr
        if st.l1q != NULL:
            l1q_check(st)
        return
    l1_heaps_pop(st, thr)
    st.l1_thr = thr
    l1_heaps_upkeep(st)


cdef inline void upkeep_norms(PGSState st, int* need_rescale, int* moved) noexcept nogil:
    """After a step or a merged round, the l_q map's upkeep (_mirror.pxd): recount N
    where it cancelled below its peak, refresh M where lambda outgrew it (or every
    coordinate fell below M / r_hi), clamp N's rounding below 0, and recount N
    exactly every MIRROR_RECOUNT * span coordinate updates."""
    cdef Py_ssize_t c
    if not st.need_norm:
        return
    for c in range(st.n_problems):
        if moved[c] and not need_rescale[c] and mirror_cancelled(st.norm_sum[c],
                                                                 st.norm_peak[c]):
            exact_norm(st, c, False)  # then tested against norm_low as it is
        if need_rescale[c] or (moved[c] and mirror_refresh_due(st.mm, st.norm_sum[c],
                                                               False)):
            exact_norm(st, c, True)
        elif st.norm_sum[c] < 0.0:
            st.norm_sum[c] = 0.0
        if st.norm_sum[c] > st.norm_peak[c]:
            st.norm_peak[c] = st.norm_sum[c]
    if mirror_drift_due(st.touches_since_exact, st.span):
        st.touches_since_exact = 0
        for c in range(st.n_problems):
            exact_norm(st, c, False)


cdef inline void floor_scales(PGSState st) noexcept nogil:
    """After a renormalization: a problem whose lambda stays at (or near) 0, as through a
    run of zero-weight rows, is never refreshed by a step: its M only shrinks by G at
    each renormalization, and at the sixth 1 / M would overflow; below M_FLOOR it is
    refreshed."""
    cdef Py_ssize_t c
    if not st.need_norm:
        return
    for c in range(st.n_problems):
        if st.mscale[c] < M_FLOOR:
            exact_norm(st, c, True)


cdef inline void end_steps(PGSState st, int* need_rescale, int* moved, int64_t steps, double draw,
                     bint add_to_sum) noexcept nogil:
    """After the updates of a step (steps = t_step, draw = 1, add_to_sum) or of a merged
    round of `steps` steps (`_merge.absorb`: draw = steps, its averaged sums merged
    already): t += steps, the upkeep of N and M, the random iterate's reservoir (the
    new iterate kept with probability draw / t), the new scales and lazy sums."""
    cdef Py_ssize_t c, K = st.n_problems
    cdef bint select = False
    cdef double wt, to_sum
    st.t += steps
    if st.adaptive:
        # its weights read t, sigma and their own fields (_adaptive.pxd): no scalar to
        # keep at p = 2; p < 2 keeps the l_q map's N and M, and the factor of its iterate;
        # forgetting's tau and G, and the fields back to G = 1 once G is small
        # (`ad_renormalize`)
        st.l1_sum_t = st.t
        if st.l1q != NULL:
            # p < 2 with l1: the threshold l1 t on lam = -U, N(thr)'s sums counted again
            # where their estimate is no longer close enough (the l_q map's N and M are
            # not kept: its phi is the soft threshold's, read on the fly)
            st.l1_thr = ad_threshold(st)
            l1q_check(st)
        elif not st.p_is_two:
            upkeep_norms(st, need_rescale, moved)
        if st.forgetting:
            st.decay *= st.forget
            st.tau = st.forget * st.tau + 1.0
            if st.decay < RENORM_BELOW and st.p_is_two:
                ad_renormalize(&st.block[0, 0, 0], st.block.shape[0], st.n_problems,
                               st.decay)
                st.decay = 1.0
                st.n_renorms += 1
            elif st.decay < RENORM_BELOW:
                # p < 2: lam~ and M as the global geometry's (phi and N stay), and each
                # problem's L~ = L / G likewise
                for c in range(K):
                    st.ad_sq[c] *= st.decay
                renormalize(st)
                floor_scales(st)
        if not st.p_is_two:
            adq_scales(st)  # at the step's t, tau and G
            if _averaged(st.iterate):
                # an average: the running sum C of the weighted factors, as the global
                # geometry's (v_j = s_c phi_j; phi_j moves only at a touch)
                wt = st._step_weight()
                for c in range(K):
                    st._restart_sum_if_needed(c, wt * st.s[c])
                    if add_to_sum:
                        st.cum[c] += wt * st.s[c]
        return
    st.l1_sum_t = st.t - steps  # C and C2 take the step's terms below
    if st.forgetting:
        # steps is 1 here (forgetting is refused on Dask, whose rounds merge many)
        st.decay *= st.forget
        st.tau = st.forget * st.tau + 1.0
        st.weight_sum += st._step_weight() / st.decay
    if st.l1 > 0.0:
        l1_advance(st)
    upkeep_norms(st, need_rescale, moved)
    if st.forgetting and st.decay < RENORM_BELOW:
        renormalize(st)
        floor_scales(st)
    if st.iterate == ITERATE_RANDOM:
        # a reservoir over steps; a merged round's iterate stands for its steps, so
        # the choice can only stop at the ends of rounds there
        select = uniform01(&st.rng) * st.t < draw
        if select:
            st.rnd_t = st.t
    wt = st._step_weight()
    for c in range(K):
        st.s[c] = scale_of(st, c, st.t)
        # the lazy sums weigh w_u by gamma^(T-u) = G_T / G_u: they add s_u / G_u (the
        # scale of lambda~), G_T cancelling in `weights`
        to_sum = wt * st.s[c] / st.decay if st.forgetting else wt * st.s[c]
        st._restart_sum_if_needed(c, to_sum)
        if add_to_sum:
            st.cum[c] += to_sum
            st.cum2[c] += to_sum * st.l1_thr
        if st.need_norm and not st.bounded:  # the ball's: from scale_of
            st.w_norm[c] = st._w_norm(c, st.t)
        if select:
            st.rnd_ver[c] += 1
            st.rnd_s[c] = st.s[c]
    st.l1_sum_t = st.t


cdef inline void l1_rebuild(PGSState st, l1q_sums=None):
    """Set the threshold from t and sigma, and build the heaps afresh from lambda:
    the coordinates above it, their sums and the norm (O(dim), at a load, a copy or a
    change of sigma). p < 2: N(thr)'s sums are counted again, or, where `l1q_sums`
    gives them (a load or a copy: the running state's own, estimate and all, so that
    it continues bit for bit), taken as they are."""
    cdef Py_ssize_t c
    if st.l1 == 0.0:
        return
    st.l1_thr = ad_threshold(st) if st.l1q != NULL and st.adaptive else \
        st._denom(st.t) * st.l1 / st.sigma
    if st.l1q != NULL and l1q_sums is not None:
        for c in range(st.n_problems):
            (st.l1q[c].thr0, st.l1q[c].m, st.l1q[c].s0, st.l1q[c].s1,
             st.l1q[c].s2) = [float(v) for v in l1q_sums[c]]
            st.l1q[c].inv_m = 1.0 / st.l1q[c].m
            st.l1q[c].outgrown = 0
    elif st.l1q != NULL:
        for c in range(st.n_problems):
            l1q_recount(st, c)
    if st.heaps == NULL:
        return
    for c in range(st.n_problems):
        if l1_build_heap(st, c, NULL, st.dim):
            raise MemoryError()
