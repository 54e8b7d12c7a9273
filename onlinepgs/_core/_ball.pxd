# l1 on a ball (p = 2): the norm ||soft(lambda, thr)|| that the ball's factor needs,
# kept per problem in O(1) a touch (docs/design/core.md, "the ball"): while the ball cannot
# bind, an upper bound bn2 about a fixed base (the "lazy" ball: no heap); while it may, a
# min-heap of the active |lambda_j| (`L1Heap`, declared in _pgs.pxd) that pops each
# coordinate at the step the threshold passes it, and the shifted sums n_act, s1, n2
# about the threshold. Here: the heap's operations, a touch's moves of the sums, the
# factor, the recounts and builds, and the pops at a new threshold.
from libc.math cimport fabs, sqrt, isfinite, copysign
from libc.stdint cimport int64_t
from libc.stdlib cimport realloc

from onlinepgs._core._pgs cimport PGSState, L1Heap
from onlinepgs._core._l1avg cimport l1_folded_total
from onlinepgs._core._pair cimport (opgs_pair, opgs_pair_of, opgs_pair_all, opgs_lo, opgs_hi,
                                    opgs_sub, opgs_mul, opgs_max, opgs_pos_bits)


cdef extern from *:
    """
    /* the l1 ball's rules (_ball.pxd) */
    static const double OPGS_L1_CANCEL = 1048576.0;  /* 2^20 */
    static const double OPGS_L1_HEAP_BUILD = 0.9;
    static const double OPGS_L1_HEAP_DROP = 0.8;
    static const double OPGS_L1_ZERO_BASE = 0.7;
    """
    # ||soft(lambda, thr)||^2 = s2 - 2 thr s1 + n_act thr^2 is counted again exactly once
    # it cancelled this much below s2 (its rounding is relative to s2)
    const double L1_CANCEL "OPGS_L1_CANCEL"
    # a lazy problem (no heap) whose bound failed builds its heap when the norm counted
    # then is above L1_HEAP_BUILD times the radius; a problem with its heap drops it once
    # the norm is at most L1_HEAP_DROP times the radius. Between the two, a heap that was
    # just built is not dropped at the next step; above the drop, a norm that soon reaches
    # the radius again is not counted from scratch every few steps. With "auto" (the
    # radius grows as the examples come) the ball binds through much of a first pass at a
    # small sigma and the norm then falls slowly: dropping at half the radius kept IMDB's
    # heap a whole pass longer (news20 two passes) for no binding step.
    const double L1_HEAP_BUILD "OPGS_L1_HEAP_BUILD"
    const double L1_HEAP_DROP "OPGS_L1_HEAP_DROP"
    # a lazy ball's recount takes the bound at bbase = 0 (||lambda||^2) when it is within
    # this fraction of the radius: room for ||lambda|| to grow before the bound fails again
    const double L1_ZERO_BASE "OPGS_L1_ZERO_BASE"


cdef inline int _l1_push(L1Heap* h, double key, int64_t j) noexcept nogil:
    """Add an entry to a min-heap of active coordinates (1 when out of memory)."""
    cdef Py_ssize_t i, parent, cap
    cdef double* nk
    cdef int64_t* nj
    if h.n == h.cap:
        cap = 2 * h.cap if h.cap else 64
        nk = <double*>realloc(h.key, cap * sizeof(double))
        if nk == NULL:
            return 1
        h.key = nk
        nj = <int64_t*>realloc(h.j, cap * sizeof(int64_t))
        if nj == NULL:
            return 1
        h.j = nj
        h.cap = cap
    i = h.n
    h.n += 1
    while i > 0:
        parent = (i - 1) >> 1
        if h.key[parent] <= key:
            break
        h.key[i] = h.key[parent]
        h.j[i] = h.j[parent]
        i = parent
    h.key[i] = key
    h.j[i] = j
    return 0


cdef inline void _l1_sift_down(L1Heap* h, Py_ssize_t i) noexcept nogil:
    cdef double key = h.key[i]
    cdef int64_t j = h.j[i]
    cdef Py_ssize_t child
    while True:
        child = 2 * i + 1
        if child >= h.n:
            break
        if child + 1 < h.n and h.key[child + 1] < h.key[child]:
            child += 1
        if h.key[child] >= key:
            break
        h.key[i] = h.key[child]
        h.j[i] = h.j[child]
        i = child
    h.key[i] = key
    h.j[i] = j


cdef inline opgs_pair l1_above(double a_old, double a_new, double base) noexcept nogil:
    """(|lambda_j| - base)_+ before and after |lambda_j| moves from a_old to a_new, as the
    pair (old, new): no branch."""
    return opgs_max(opgs_sub(opgs_pair_of(a_old, a_new), opgs_pair_all(base)),
                    opgs_pair_all(0.0))


cdef inline opgs_pair l1_bound_sq(double a_old, double a_new, double bbase) noexcept nogil:
    """Coordinate j's terms of the lazy ball's bound bn2 = sum_j (|lambda_j| - bbase)_+^2
    (L1Heap) before and after a touch, as the pair (old, new). A row sums the pairs and
    moves bn2 by the difference once."""
    cdef opgs_pair d = l1_above(a_old, a_new, bbase)
    return opgs_mul(d, d)


cdef inline double l1_bound_move(double a_old, double a_new, double bbase) noexcept nogil:
    """The change of bn2 (`l1_bound_sq`) at one touch."""
    cdef opgs_pair d = l1_bound_sq(a_old, a_new, bbase)
    return opgs_hi(d) - opgs_lo(d)


cdef inline void l1_heap_touch(L1Heap* h, double* key, Py_ssize_t j, double a_old,
                              double a_new, double* s1, double* n2, double* peak,
                              double* n_act) noexcept nogil:
    """A touch of coordinate j (|lambda_j| from a_old to a_new) on a problem whose heap is
    kept: its entry (key: the coordinate's `key` field) and the heap's sums s1, n2, peak,
    n_act (the heap's own, or a row kernel's copies in registers). The heap's base is
    the threshold (every advance and recount moves it there), so the shifted values
    max(|lambda_j| - base, 0), old and new, are 0 exactly where j is inactive, and
    `s1 += d_new - d_old`, `n2 += (d_new - d_old)(d_new + d_old)` cover the four cases
    without a branch (a row mixes active and inactive coordinates at random: branches on
    them mispredict). Only a push, a turn to active or a fall branches (rare: about one
    touch in ten on IMDB's first pass)."""
    cdef opgs_pair d = l1_above(a_old, a_new, h.base)
    cdef double d_old = opgs_lo(d), d_new = opgs_hi(d)
    # act: bit 0 active before, bit 1 after
    cdef int act = opgs_pos_bits(d)
    s1[0] += d_new - d_old
    n2[0] += (d_new - d_old) * (d_new + d_old)
    peak[0] = n2[0] if n2[0] > peak[0] else peak[0]
    # a new entry when j turns active (2) or stays active (3) below its live entry's key
    # (its entry pops no later than thr passes |lambda_j| otherwise); none live once it
    # falls (1)
    if (<unsigned int>(act - 1) < 2) | ((act == 3) & (a_new < key[0])):
        if act & 2:
            key[0] = a_new
            _l1_push(h, a_new, j)
            if act == 2:
                n_act[0] += 1.0
        else:
            key[0] = 0.0
            n_act[0] -= 1.0


cdef inline double l1_ball_factor(PGSState st, Py_ssize_t c, double denom) noexcept nogil:
    """The ball's factor min(1, radius / ||soft(lambda, thr) / denom||) with l1 (p = 2)
    and w_norm[c]. No heap while the ball cannot bind ("lazy", see L1Heap): the
    factor is exactly 1 while its bound s sqrt(bn2) is within the radius (with 1e-9 to
    spare for bn2's rounding); when the bound fails bn2 is counted exactly at thr, and
    the heap is built when the ball may bind (the norm above L1_HEAP_BUILD times the
    radius, or fewer touches since the last count than coordinates to count: O(1)
    amortized); a heap's problem turns lazy again at L1_HEAP_DROP times the radius or
    less. A lazy problem on bbase = thr also counts again after (coordinates reached
    << backoff) touches, to move to bbase = 0 (`l1_lazy_recount`): O(1) amortized
    too. Lazy, w_norm is the bound
    (it feeds only the online gap's sums, NaN with l1)."""
    cdef L1Heap* h = st.heaps + c
    cdef double wnorm
    cdef int64_t reached
    if h.lazy:
        wnorm = sqrt(h.bn2 if h.bn2 > 0.0 else 0.0) / denom
        if wnorm * (1.0 + 1e-9) <= st.radius:
            st.w_norm[c] = wnorm
            if h.bbase == 0.0:
                return 1.0
            # on bbase = thr: count again, now and then, to move to bbase = 0
            reached = st.seen.n if st.seen.track else st.dim
            if h.touches < (reached << h.backoff):
                return 1.0
        l1_lazy_recount(st, c, denom)
        if h.lazy:
            st.w_norm[c] = sqrt(h.bn2) / denom
            return 1.0
    wnorm = sqrt(h.n2) / denom
    if wnorm <= L1_HEAP_DROP * st.radius:
        # (an average's flags are exact here: the pops folded every fallen coordinate)
        h.lazy = True
        h.bbase = h.base  # the heap's sums are about thr: exact, with the margin above
        h.bn2 = h.n2 if h.n2 > 0.0 else 0.0
        h.touches = 0
        h.backoff = 0
        h.n = 0
        h.n_act = h.s1 = h.n2 = h.peak = 0.0
    st.w_norm[c] = st.radius if wnorm > st.radius else wnorm
    if not isfinite(wnorm):
        # the sums of squares overflowed (|lambda_j| near 1e154 and more: sample
        # weights of 1e308): the factor from the norm counted exactly, scaled
        return l1_overflowed_factor(st, c, denom)
    return st.radius / wnorm if wnorm > st.radius else 1.0


cdef inline double l1_overflowed_factor(PGSState st, Py_ssize_t c,
                                        double denom) noexcept nogil:
    """`l1_ball_factor` where ||soft(lambda, thr)||^2 leaves the double range: the
    norm as top * sqrt(sum (x_j / top)^2), top the largest active part x_j (two
    sweeps of the coordinates reached, on this rare path only), and the factor
    radius denom / norm in that order."""
    cdef Py_ssize_t i, j, n
    cdef const int64_t* coords
    cdef double top = 0.0, total = 0.0, x
    n = st._sweep(&coords)
    for i in range(n):
        j = coords[i] if coords != NULL else i
        x = fabs(st.block[j, c, 0]) - st.l1_thr
        if x > top:
            top = x
    if top <= 0.0:
        return 1.0
    for i in range(n):
        j = coords[i] if coords != NULL else i
        x = fabs(st.block[j, c, 0]) - st.l1_thr
        if x > 0.0:
            total += (x / top) * (x / top)
    x = st.radius / top / sqrt(total) * denom
    return x if x < 1.0 else 1.0


cdef inline void l1_lazy_recount(PGSState st, Py_ssize_t c, double denom) noexcept nogil:
    """A lazy problem whose bound failed, or is due to count again: ||soft(lambda,
    thr)||^2 and ||lambda||^2 counted exactly (over the coordinates reached); lazy
    again if the ball is far from binding and the count was paid for, from bbase = 0
    when ||lambda|| leaves room within the radius (L1_ZERO_BASE), else from thr (and
    the next look for that room twice as far off); else its heap built
    (`l1_ball_factor`)."""
    cdef L1Heap* h = st.heaps + c
    cdef Py_ssize_t i, j, n
    cdef const int64_t* coords
    cdef double thr = st.l1_thr, a, lam, n2 = 0.0, m2 = 0.0
    n = st._sweep(&coords)
    for i in range(n):
        j = coords[i] if coords != NULL else i
        lam = st.lam[j, c]
        m2 += lam * lam
        a = fabs(lam) - thr
        if a > 0.0:
            n2 += a * a
    st.n_l1_recounts += 1
    if h.touches >= n and sqrt(n2) / denom <= L1_HEAP_BUILD * st.radius:
        if sqrt(m2) / denom <= L1_ZERO_BASE * st.radius:
            h.bbase = 0.0
            h.bn2 = m2
            h.backoff = 0
        else:
            h.bbase = thr
            h.bn2 = n2
            h.backoff = h.backoff + 1 if h.backoff < 30 else 30
        h.touches = 0
        return
    l1_build_heap(st, c, coords, n)


cdef inline int l1_build_heap(PGSState st, Py_ssize_t c, const int64_t* coords,
                        Py_ssize_t n) noexcept nogil:
    """Problem c's heap afresh from lambda over the n coordinates in coords (NULL:
    0 .. n - 1): those above thr, then their sums and norm exactly (`l1_recount`); its
    lazy mode off (`l1_ball_factor` turns it on again). An average's coordinates that
    fell to the threshold without a heap (the factor 1 since) are folded first, in
    closed form: the heap's pops fold the others as they fall. 1 when out of memory."""
    cdef L1Heap* h = st.heaps + c
    cdef Py_ssize_t i, j
    cdef double a
    cdef double* f
    cdef int failed = 0
    h.lazy = False
    h.n = 0
    for i in range(n):
        j = coords[i] if coords != NULL else i
        f = &st.block[j, c, 0]
        a = fabs(f[0])
        if a > st.l1_thr:
            f[st.off_key] = a
            failed |= _l1_push(h, a, j)
            continue
        f[st.off_key] = 0.0  # none live (a key left from an earlier heap is not)
        if st.off_on > 0 and f[st.off_on] != 0.0:
            f[st.off_acc] = l1_folded_total(f[0], f[st.off_acc], 1.0, st.cum[c],
                                              st.cum2[c], st.l1_thr, st.l1_sum_t,
                                              st.sigma, st.l1, st.iterate)
            f[st.off_on] = 0.0
    l1_recount(st, c)
    return failed


cdef inline void l1_recount(PGSState st, Py_ssize_t c) noexcept nogil:
    """Problem c's heap without its dead entries (re-heapified), and its s1, s2,
    n_act and norm counted exactly: O(entries), after as many touches or pops, or
    when the running norm cancelled."""
    cdef L1Heap* h = st.heaps + c
    cdef Py_ssize_t i, n = 0
    cdef double a, thr = st.l1_thr, s1 = 0.0, n2 = 0.0
    cdef double* f
    st.n_l1_recounts += 1
    for i in range(h.n):
        f = &st.block[h.j[i], c, 0]
        if f[st.off_key] != h.key[i]:
            continue  # dead
        a = fabs(f[0])
        if a <= thr:  # (not after the pops: every live key is above thr)
            f[st.off_key] = 0.0
            continue
        # its key afresh (a live key may lag |lambda_j|), the field negative until
        # the loop ends: a second entry of the same key (the pop of one keyed it
        # again at the value of the other) is not counted twice
        f[st.off_key] = -a
        h.key[n] = a
        h.j[n] = h.j[i]
        n += 1
        s1 += a - thr
        n2 += (a - thr) * (a - thr)
    h.n = n
    for i in range(n):
        st.block[h.j[i], c, st.off_key] = h.key[i]
    i = n // 2
    while i > 0:
        i -= 1
        _l1_sift_down(h, i)
    h.base = thr
    h.s1 = s1
    h.n_act = <double>n
    h.n2 = n2
    h.peak = n2


cdef inline void l1_heaps_pop(PGSState st, double thr) noexcept nogil:
    """The threshold moves to thr (from each heap's base): each problem's coordinates that
    fell to it leave the active set (their lazy average settled with C and C2 as they
    stand, the sums of the steps they were active in), and the active sums move to thr.
    The state's threshold is set only after the pops: the sums removed are about the old
    base."""
    cdef Py_ssize_t c, j
    cdef L1Heap* h
    cdef double a, d
    cdef double* f
    cdef bint folded = st.off_on > 0
    for c in range(st.n_problems):
        h = st.heaps + c
        while h.n > 0 and h.key[0] <= thr:
            j = h.j[0]
            f = &st.block[j, c, 0]
            a = fabs(f[0])
            if f[st.off_key] == h.key[0] and a > thr:
                # live, its key lagging |lambda_j|: still active, again at its value
                h.key[0] = a
                f[st.off_key] = a
                _l1_sift_down(h, 0)
                continue
            if f[st.off_key] == h.key[0]:
                if folded:  # it was active up to the last step: C and C2 as they stand
                    f[st.off_acc] += f[0] * st.cum[c] - copysign(st.cum2[c], f[0])
                    f[st.off_on] = 0.0
                a -= h.base
                h.s1 -= a
                h.n2 -= a * a
                h.n_act -= 1.0
                f[st.off_key] = 0.0  # no entry of it is live now
            h.n -= 1
            if h.n > 0:
                h.key[0] = h.key[h.n]
                h.j[0] = h.j[h.n]
                _l1_sift_down(h, 0)
        # the active sums about the new threshold
        d = thr - h.base
        h.n2 += h.n_act * d * d - 2.0 * d * h.s1
        h.s1 -= h.n_act * d
        h.base = thr


cdef inline void l1_heaps_upkeep(PGSState st) noexcept nogil:
    """After the pops at a new threshold: each heap counted again where its dead entries
    outnumber the live ones (O(1) amortized) or its norm cancelled below its peak."""
    cdef Py_ssize_t c
    cdef L1Heap* h
    for c in range(st.n_problems):
        h = st.heaps + c
        if h.n > 2 * <Py_ssize_t>h.n_act + 1024:
            l1_recount(st, c)  # dead entries as many as live ones: O(1) amortized
        elif h.n_act <= 0.0:
            h.n2 = h.s1 = h.peak = 0.0
        elif not (h.n2 * L1_CANCEL > h.peak):
            l1_recount(st, c)  # it cancelled below its peak: count it exactly
