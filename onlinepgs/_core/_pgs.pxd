# The declarations of the PGS state that the merge of Dask's lanes (_merge.pyx) shares
# with the pass (_pgs.pyx): the state's attributes and C methods, the raw views of its hot
# loop (Core), the list of coordinates reached (Seen) and the one-coordinate update
# (_touch), which a merged entry goes through exactly as a step's.
cimport cython
cimport numpy as cnp
from libc.math cimport fabs, fmax, copysign, ceil, log1p
from libc.stdint cimport uint64_t, int64_t

from onlinepgs._core._mirror cimport Mirror, mirror_touch
from onlinepgs._core._l1q cimport L1Q, l1q_add
from onlinepgs._core._l1pair cimport (opgs_pair, opgs_pair_of, opgs_pair_all, opgs_lo,
                                      opgs_hi, opgs_sub, opgs_mul, opgs_max, opgs_pos_bits,
                                      opgs_abs_gt, opgs_sign_bits, keep_if, l1_acc_move)

cdef enum:
    ITERATE_LAST = 0
    ITERATE_AVERAGE = 1
    ITERATE_WEIGHTED = 2
    ITERATE_WEIGHTED2 = 4
    ITERATE_RANDOM = 3


cdef inline bint _averaged(int iterate) noexcept nogil:
    """An average of the iterates (weights 1, t or t^2), kept lazily."""
    return (iterate == ITERATE_AVERAGE or iterate == ITERATE_WEIGHTED
            or iterate == ITERATE_WEIGHTED2)


# The sweeps over every coordinate (a refresh of M, a settle of the lazy averages, N's
# exact recount) need only the coordinates some update reached: the others hold zeros in
# every field and add nothing. While a state is young it keeps a list of those (before
# a pass, each coordinate its rows may update whose lambda is 0 in every problem), sorted and
# deduplicated before a sweep, which then visits them in increasing order: the same terms
# in the same order as a sweep over all of dim, so N and the model are bit for bit the
# same. Noting costs a few instructions per coordinate update, and a sweep over dim costs
# about as much as one over a list of dim / SEEN_DENSE: the list is dropped (sweeps visit
# every coordinate, updates stop noting) once it holds more than dim / SEEN_DENSE
# coordinates or SEEN_WORK * dim updates have been checked, when the O(dim) of a sweep is
# below SEEN_DENSE times the updates made. A sweep thus never visits more than
# SEEN_DENSE times the coordinate updates so far: a state of 2^24 hashed features that
# sees a few thousand updates sweeps a few thousand coordinates, not 2^24.
cdef enum:
    SEEN_DENSE = 4
    SEEN_WORK = 2


cdef struct Seen:
    int64_t* lst  # coordinates reached (first n_sorted sorted and unique, then appended)
    Py_ssize_t n
    Py_ssize_t n_sorted
    Py_ssize_t cap
    Py_ssize_t dim
    int64_t budget  # coordinate updates that may still be checked before the list is dropped
    bint track  # False: no list, a sweep visits every coordinate


cdef void _seen_compact(Seen* sn) noexcept nogil


cdef inline void _seen_drop(Seen* sn) noexcept nogil:
    sn.track = False
    sn.n = sn.n_sorted = 0


cdef inline bint _seen_spend(Seen* sn, Py_ssize_t updates) noexcept nogil:
    """Account for `updates` coordinate updates about to be checked; False (and the list
    dropped) once the budget is spent or the list is gone."""
    if not sn.track:
        return False
    sn.budget -= updates
    if sn.budget < 0:
        _seen_drop(sn)
        return False
    return True


cdef inline void _note_new(Seen* sn, const double* lam, Py_ssize_t K, Py_ssize_t S,
                           int64_t j) noexcept nogil:
    """Put coordinate j on the list if no update reached it yet: its lambda is 0 in every
    problem (one that came back to 0 goes in twice; compaction removes duplicates)."""
    cdef const double* at = lam + j * K * S
    cdef Py_ssize_t c
    if not sn.track:
        return
    for c in range(K):
        if at[c * S] != 0.0:
            return
    if sn.n == sn.cap:
        _seen_compact(sn)
        if not sn.track:
            return
    sn.lst[sn.n] = j
    sn.n += 1


# Raw views of a state for the hot loop. Passed by value into inline functions so the
# compiler keeps the pointers in registers: Python builds with -fno-strict-aliasing, so
# pointers read through the state object would be reloaded after every store.
cdef struct Core:
    double* lam
    double* phi
    double* acc
    double* mark
    double* snap
    int64_t* snapv
    double* cum
    double* norm_sum
    double* inv_scale
    double* rnd_s
    int64_t* rnd_ver
    Mirror mm  # the l_q map's constants (_mirror.pxd)
    # l1 > 0 (p = 2): the threshold (a pointer: it moves every step), the running sum C2,
    # the heaps (NULL without), the offset of the heap's key in the block; an average
    # keeps its sums folded with a flag per coordinate at off_on > 0 (`_touch_l1`)
    double l1
    double sigma
    const double* thr
    double* cum2
    L1Heap* heaps
    L1Q* l1q  # l1 > 0 with p < 2: N(thr)'s sums per problem (_l1q.pxd), else NULL
    Py_ssize_t off_key, off_on
    const int64_t* t  # the state's step count
    Py_ssize_t K
    Py_ssize_t S  # doubles per (coordinate, problem) in the block
    int iterate
    bint p_is_two
    bint need_norm


# How the pass reads the REPORTED iterate's margin of a row before the row trains (the
# progressive loss of the model a user gets, see `_run_pass`): one part per set of lazy
# sums, read-only at the row's coordinates, no settling (the formulas of `weights()`).
cdef enum:
    PART_NONE = 0
    PART_AVG2 = 1  # averaged, p = 2: the sum of weighted iterates is lambda_j C - acc_j
    PART_AVGQ = 2  # averaged, p < 2: acc_j + phi_j (C - mark_j)
    PART_RANDOM = 3  # the random iterate's weight: snap_j if snapped, else rnd_s phi_j
    PART_L1AVG = 4  # averaged, p = 2, l1 > 0: acc_j + the pending sum while active


# l1 > 0 (p = 2): the coordinates whose |lambda_j| is above the threshold thr (in lambda's
# units, `PGSState._l1_advance`), one min-heap per problem keyed by |lambda_j| with lazy
# deletion: an entry is live while its key equals the coordinate's `key` field (0 when it
# has none: an inactive coordinate). thr only grows, so a coordinate leaves the active set
# when thr passes its key: the heap pops it at that very step, which folds its average's
# sums exactly. A live entry's key may be below |lambda_j|: a touch pushes a new entry
# only when |lambda_j| falls below the live key (or the coordinate turns active), and the
# pop of an entry whose coordinate is still active keys it again at |lambda_j|. Most
# touches of an active coordinate push nothing: |lambda_j| rarely reaches a new low since
# its last entry (the pushes were every touch that made |lambda_j| smaller, and the dead
# entries they left made most of the heap's recounts).
# Over the active coordinates it keeps n_act, s1 = sum (|lambda_j| - base) and n2 =
# sum (|lambda_j| - base)^2 = ||soft(lambda, base)||^2 (the ball's norm) about the
# threshold base they were last moved to: when thr grows by d, n2 -= 2 d s1 - n_act d^2
# and s1 -= n_act d (sums of the shifted values, which stay small where every coordinate
# is near thr: s2 - 2 thr s1 + n thr^2 would cancel there). n2 is counted again exactly
# once it fell L1_CANCEL-fold below its peak since the last count.
cdef struct L1Heap:
    double* key
    int64_t* j
    Py_ssize_t n
    Py_ssize_t cap
    double base
    double s1
    double n_act
    double n2
    double peak
    # the ball while it cannot bind ("lazy"): no heap (n = 0), only bn2 = sum_j
    # (|lambda_j| - bbase)_+^2 at a fixed bbase <= thr, kept exactly a touch: an upper
    # bound of ||soft(lambda, thr)||^2, so while s_t sqrt(bn2) <= radius the ball's factor
    # is exactly 1 (`PGSState._l1_ball_factor`), and an average's coordinates that fell
    # meanwhile have their sums in closed form, as on R^n
    # bbase = 0 makes bn2 ||lambda||^2, l2's running sum: the cheapest touch (two squares,
    # no threshold), and a bound that does not loosen as thr grows; a recount picks it
    # when it leaves the radius room (L1_ZERO_BASE), and a problem on bbase = thr counts
    # again after (reached coordinates << backoff) touches to look for that room
    bint lazy
    double bbase
    double bn2
    int64_t touches  # since bn2 was last counted exactly (a recount needs as many)
    int backoff


cdef int _l1_push(L1Heap* h, double key, int64_t j) noexcept nogil


cdef inline double soft_threshold(double lam, double thr) noexcept nogil:
    """sgn(lam) max(|lam| - thr, 0)."""
    # branch-free (a margin's coordinates fall either side at random); a comparison, not
    # fmax, which without -ffast-math is a libm call (NaN rules) in the hot loops
    cdef double a = fabs(lam) - thr
    return copysign(a if a > 0.0 else 0.0, lam)


cdef struct Part:
    int kind
    const double* blk  # the state's block (coordinate j, problem c at (j K + c) S)
    Py_ssize_t K, S, off_phi, off_acc, off_mark
    Py_ssize_t dim  # coordinates at or past dim are zero in this part
    const double* cum
    const double* snap
    const int64_t* snapv
    const int64_t* rnd_ver
    const double* rnd_s
    const double* cum2  # l1: the running sum of weighted scale times threshold
    const double* thr   # l1: the current threshold (lambda units)
    Py_ssize_t off_on  # l1, an average: the flag's offset
    const int64_t* t
    double l1, sigma
    int iterate


cdef struct Rep:
    bint last  # the reported iterate is the last one, whose margin the pass has already
    # the reported margin is (own's dot + ref's dot) * inv_w; ref is a lane's round start
    # (its global state's sums, see `_merge.fork`), PART_NONE elsewhere
    Part own
    Part ref
    double ref_weight  # the weight total of ref's iterates (0 without ref)


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


cdef inline double _psi_tail(double x) noexcept nogil:
    """psi(x) - ln x by its asymptotic series (x >= 32)."""
    cdef double r = 1.0 / (x * x)
    return -0.5 / x - r * (1.0 / 12.0 - r * (1.0 / 120.0 - r * (1.0 / 252.0
                                                              - r * (1.0 / 240.0))))


cdef inline double harmonic_diff(int64_t lo, int64_t hi) noexcept nogil:
    """sum_{v = lo}^{hi} 1 / v for 1 <= lo (0 if hi < lo), to a few ulps: directly for
    short ranges and below 32, else psi(hi + 1) - psi(lo) by the asymptotic series
    (ln x - 1/(2x) - 1/(12x^2) + 1/(120x^4) - 1/(252x^6) + 1/(240x^8); the next term is
    below 1e-17 from x = 32), its log as log1p of the range's relative length."""
    cdef double s = 0.0, a, b
    cdef int64_t v
    if hi < lo:
        return 0.0
    if hi - lo < 32:
        v = hi
        while v >= lo:  # the small terms first
            s += 1.0 / <double>v
            v -= 1
        return s
    while lo < 32:
        s += 1.0 / <double>lo
        lo += 1
    a = <double>lo
    b = <double>hi + 1.0
    return s + log1p((b - a) / a) + (_psi_tail(b) - _psi_tail(a))


cdef inline double l1_fallen(double a, int64_t now, double sigma, double l1, int iterate,
                             double* dc2) noexcept nogil:
    """The running sums' terms after an l1 coordinate fell to the threshold (R^n, p = 2):
    with lambda_j = +-a fixed, it is active up to the last step u_end with
    (u_end + 1) l1 < a; returns sum_u a_u s_u over u = u_end + 1 .. now (C's terms) and
    leaves sum_u a_u s_u thr_u there in dc2 (C2's), in closed form: s_u = 1 / ((u + 1)
    sigma), thr_u = (u + 1) l1, weights a_u = 1, u or u^2, so C2's terms are a_u l1 /
    sigma and C's a polynomial plus a harmonic difference. C - that and C2 - dc2 are the
    running sums as they stood at u_end."""
    cdef double n, sum_w, sum_wv, A_f
    cdef int64_t A, lo, hi
    A = <int64_t>ceil(a / l1) - 1  # u_end + 1 (a / l1 <= now + 1 here: a <= thr)
    if A < 1:
        A = 1
    if A > now:
        dc2[0] = 0.0
        return 0.0
    n = <double>(now - A + 1)
    A_f = <double>A
    lo = A + 1  # v = u + 1
    hi = now + 1
    if iterate == ITERATE_WEIGHTED2:
        # sum u^2 = n A^2 + A n (n - 1) + (n - 1) n (2n - 1) / 6; u^2 / v = v - 2 + 1 / v
        sum_w = n * A_f * A_f + A_f * n * (n - 1.0) + (n - 1.0) * n * (2.0 * n - 1.0) / 6.0
        sum_wv = 0.5 * n * (<double>lo + <double>hi) - 2.0 * n + harmonic_diff(lo, hi)
    elif iterate == ITERATE_WEIGHTED:
        sum_w = 0.5 * n * (A_f + <double>now)  # u / v = 1 - 1 / v
        sum_wv = n - harmonic_diff(lo, hi)
    else:
        sum_w = n
        sum_wv = harmonic_diff(lo, hi)
    dc2[0] = sum_w * l1 / sigma
    return sum_wv / sigma


cdef inline double l1_folded_total(double lam, double acc, double on, double cum,
                                   double cum2, double thr, int64_t now, double sigma,
                                   double l1, int iterate) noexcept nogil:
    """The weighted sum of an l1 coordinate's iterates, an average ("folded": see
    `_touch_l1`): acc + lambda_j C - sgn(lambda_j) C2 while active; once it fell to the
    threshold since its last touch (on), the same with C and C2 as they stood then
    (`l1_fallen`: on R^n, or on a ball without its heap, whose factor was 1 since; with a
    heap the pop folded it at its fall); acc alone when it was left inactive. now: the
    last step whose terms C and C2 hold."""
    cdef double dc, dc2
    if fabs(lam) > thr:
        return acc + lam * cum - copysign(cum2, lam)
    if on == 0.0:
        return acc
    dc = l1_fallen(fabs(lam), now, sigma, l1, iterate, &dc2)
    return acc + lam * (cum - dc) - copysign(cum2 - dc2, lam)


cdef inline double l1_acc_refold(double lam_old, double lam_new, double acc, double on,
                                 bint act_new, double cum, double cum2, double thr,
                                 int64_t t, double sigma, double l1,
                                 int iterate) noexcept nogil:
    """acc_j after a touch that finds its flag wrong (it fell to the threshold since its
    last touch: rare): its sum in closed form (`l1_folded_total`), less the new active
    part."""
    cdef double total = l1_folded_total(lam_old, acc, on, cum, cum2, thr, t, sigma, l1,
                                        iterate)
    return total - keep_if(lam_new * cum - copysign(cum2, lam_new), act_new)


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


cdef inline void l1_avg_touch(Core core, double* f, double lam_old, double lam_new,
                             double thr, double cum, double cum2, Py_ssize_t off_acc,
                             Py_ssize_t off_on) noexcept nogil:
    """An average's folded sum and flag at a touch of the coordinate at f (lambda_j moved
    from lam_old to lam_new; C and C2 given): see `_touch_l1`.

    Most touches are steady: j was active and stays active with its sign, or was inactive
    and stays so, and its flag is right (it did not fall since its last touch). Whether a
    coordinate is active mixes at random within a row, but whether it turns, flips or fell
    does not (rare), so that one branch predicts well: a steady touch moves acc_j by
    (lambda_old - lambda_new) C times the flag (1 or 0), the same bits as
    `l1_acc_move`'s sum (whose C2 lane is a zero then), and leaves the flag as it is."""
    cdef double on = f[off_on]
    cdef opgs_pair lam = opgs_pair_of(lam_old, lam_new)
    # bits 0-1: active before and after; 2-3: their signs; 4: the flag
    cdef unsigned int code = (opgs_sign_bits(opgs_abs_gt(lam, opgs_pair_all(thr)))
                              | (opgs_sign_bits(lam) << 2) | ((on != 0.0) << 4))
    # the steady codes: inactive with the flag 0, either sign (0, 4, 8, 12); active with
    # one sign and the flag 1 (3 | 16, 3 | 12 | 16): bits 0, 4, 8, 12, 19, 31
    if (<unsigned int>0x80081111 >> code) & 1:
        f[off_acc] += (lam_old - lam_new) * cum * on
        return
    cdef double on_new
    cdef bint flag_right
    cdef double move = l1_acc_move(lam_old, lam_new, thr, cum, cum2, on, &on_new,
                                   &flag_right)
    if flag_right:
        f[off_acc] += move
    else:
        f[off_acc] = l1_acc_refold(lam_old, lam_new, f[off_acc], on, on_new != 0.0, cum,
                                   cum2, thr, core.t[0], core.sigma, core.l1, core.iterate)
    f[off_on] = on_new


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


@cython.final
cdef class PGSState:
    # configuration
    cdef readonly double p, q, sigma, epsilon, intercept_scaling
    # forgetting (docs/design/forgetting.md): the factor gamma in (0, 1] and whether it is
    # below 1. The core keeps lambda~ = lambda / G (G = gamma^t, `decay`), so a step
    # decays the past in O(1); tau = gamma tau + 1 is the step count in w_t's scale and
    # weight_sum = sum_u a_u / G_u the averaged iterate's divisor (in lambda~ units).
    # Not kept (1, t, unused) when gamma = 1, whose arithmetic is unchanged.
    cdef readonly double forget
    cdef readonly bint forgetting
    # l1 (docs/design/core.md "l1: soft thresholds, lazily"): the weight of ||w||_1, the
    # threshold in lambda's units (_denom(t) l1 / sigma), the running sum C2 of the
    # averages (per problem) and the heaps of the active coordinates (the ball's norm:
    # l1_heap); l1_sum_t, the last step whose terms C and C2 hold (t, except within
    # `_end_steps` before the step's terms are added; not saved: t at a load)
    cdef readonly double l1, l1_thr
    cdef readonly bint l1_heap
    cdef int64_t l1_sum_t
    cdef public int64_t n_l1_recounts  # exact recounts of the heaps (a diagnostic)
    cdef readonly Py_ssize_t off_key, off_on
    cdef public cnp.ndarray cum2_a
    cdef double[::1] cum2
    cdef L1Heap* heaps
    # l1 > 0 with p < 2 (_l1q.pxd): N(thr)'s sums per problem, the tolerance of their
    # estimate (l1q_tol(); not saved) and their exact recounts (a diagnostic)
    cdef L1Q* l1q
    cdef public double l1q_tol
    cdef public int64_t n_l1q_recounts
    cdef public double tau, decay, weight_sum
    # how often lambda~ was brought back to G = 1 (a diagnostic, not saved)
    cdef public int64_t n_renorms
    cdef readonly int quarters
    cdef public double radius
    cdef readonly int loss_code, iterate, batch_size, n_problems
    cdef readonly bint fit_intercept, multiclass, p_is_two, bounded, need_norm, radius_auto
    cdef readonly object layout  # onlinepgs._layout.StateLayout: fields and arrays
    cdef readonly bint keep_seen  # sweeps its coordinates: keeps a list of those reached
    # the coupled multiclass loss of the K problems (_multiclass.pxd's MC_*): MC_NONE is
    # one-vs-rest, K independent binary problems
    cdef readonly int mc_code
    cdef double norm_low
    # the l_q map's constants (_mirror.pxd); r_hi, headroom and norm_low are copies:
    # M is refreshed where |lambda_j| / M passes r_hi, set to headroom max |lambda_j|
    cdef Mirror mm
    cdef readonly double r_hi, headroom
    cdef readonly str loss
    # coordinates (rows of the arrays) = 1 + number of features
    cdef readonly Py_ssize_t dim
    # Per (coordinate, problem), the fields this configuration needs sit side by side in
    # block (dim, K, S): lambda; phi (p < 2; for p = 2 it is lambda); the lazy average's
    # running sum (averaged iterates); its mark (p < 2 averaged). One coordinate's update
    # then touches one cache line, not one per array (the block starts a line, see
    # cache_aligned_zeros). lam_a, phi_a, acc_a, mark_a are (dim, K) views into it (None
    # where absent).
    cdef public cnp.ndarray block_a, snap_a, snapv_a
    cdef public object lam_a, phi_a, acc_a, mark_a
    cdef readonly Py_ssize_t n_fields, off_phi, off_acc, off_mark
    cdef double[:, :, ::1] block
    cdef double[:, :] lam, phi, acc, mark
    cdef double[:, ::1] snap
    cdef int64_t[:, ::1] snapv
    # (K,) per-problem scalars
    cdef public cnp.ndarray norm_a, scale_a, s_a, cum_a, rnd_s_a, regret_a, rnd_ver_a
    # the online dual estimate (see stats_dict): per problem, sums over steps
    cdef public cnp.ndarray sum_conj_a, sum_step_loss_a, sum_reg_a
    cdef double[::1] sum_conj, sum_step_loss, sum_reg, w_norm, b_loss_c, b_conj_c
    cdef double[::1] norm_sum, mscale, inv_scale, s, cum, rnd_s, regret
    # the largest N since it was last recomputed: the running N's rounding is relative to
    # it (not saved; a loaded state starts from its N)
    cdef double[::1] norm_peak
    cdef int64_t[::1] rnd_ver
    # global counters
    cdef public int64_t t, n_examples, n_mistakes, rnd_t, touches_since_exact
    # 1 + the largest coordinate a row has reached (the intercept's 0 counts): N is
    # recounted every 8 * span touches, a schedule set by the rows, which growing the state
    # early for a wide chunk does not move (chunking must not change the model)
    cdef public int64_t span
    # steps each step counts for (not saved; 1 except in a lane of onlinepgs.dask, which
    # counts its steps once per lane: t moves by t_step and the gradient is scaled by it)
    cdef public int64_t t_step
    # set when a step's loss derivative is not finite; that step is not applied
    cdef public bint diverged
    # how often the scale M was refreshed (O(touched) each; a diagnostic)
    cdef public int64_t n_rescales
    # how often a lazy average's running sum restarted (also counted in n_rescales): every
    # coordinate's sums changed, which a lane must send whole (see onlinepgs.distributed.rounds)
    cdef public int64_t n_restarts
    # coordinates visited by the sweeps (refreshes of M, settles, recounts of N): a
    # diagnostic, not saved; O(coordinates reached), not O(dim), per sweep
    cdef public int64_t n_swept
    # the coordinates updates reached (see SEEN_DENSE); seen_a owns seen.lst
    cdef Seen seen
    cdef cnp.ndarray seen_a
    cdef public int64_t diverged_row
    cdef public double sum_weight, sum_loss, sum_weighted_loss, loss0_max
    # the reported iterate's progressive sums (`progressive_sums`); NaN loss: unknown (a
    # state written before they existed), its mistakes then unknown too
    cdef public double sum_weighted_loss_reported
    cdef public int64_t n_mistakes_reported
    # a lane's (`_merge.fork`): the global state it forked, read-only during its round, whose
    # reported iterate its rows are scored with together with the lane's own iterates;
    # own_weight is the weight total of the lane's own averaged iterates (not saved)
    cdef public object reference
    cdef public double own_weight
    cdef public uint64_t rng
    # scratch for mini-batches (not part of the saved state)
    cdef double[::1] grad_acc, coefs, margins_buf
    cdef int64_t[::1] touched
    cdef unsigned char[::1] is_touched
    cdef int[::1] flag_rescale, flag_moved
    cdef double[::1] step_gq
    # a coupled loss's row: the K gradients in the scores, the reported iterate's scores
    cdef double[::1] mc_grad, mc_scores

    cdef Core _core(self) noexcept nogil
    cdef Part _part(self)
    cdef Rep _rep(self)
    cdef double _scale_of(self, Py_ssize_t c, int64_t t) noexcept nogil
    cdef double _denom(self, int64_t t) noexcept nogil
    cdef double _average_norm(self) noexcept nogil
    cdef void _renormalize(self) noexcept nogil
    cdef double _norm_q(self, Py_ssize_t c) noexcept nogil
    cdef double _w_norm(self, Py_ssize_t c, int64_t t) noexcept nogil
    cdef Py_ssize_t _sweep(self, const int64_t** coords) noexcept nogil
    cdef void _settle_all(self, Py_ssize_t c) noexcept nogil
    cdef double _step_weight(self) noexcept nogil
    cdef void _restart_sum_if_needed(self, Py_ssize_t c, double term) noexcept nogil
    cdef void _exact_norm(self, Py_ssize_t c, bint rescale) noexcept nogil
    cdef void _upkeep_norms(self, int* need_rescale, int* moved) noexcept nogil
    cdef void _l1_advance(self) noexcept nogil
    cdef double _l1_overflowed_factor(self, Py_ssize_t c, double denom) noexcept nogil
    cdef void _l1q_recount(self, Py_ssize_t c) noexcept nogil
    cdef void _l1q_check(self) noexcept nogil
    cdef double _l1q_scale(self, Py_ssize_t c, double denom) noexcept nogil
    cdef void _l1_recount(self, Py_ssize_t c) noexcept nogil
    cdef double _l1_ball_factor(self, Py_ssize_t c, double denom) noexcept nogil
    cdef void _l1_lazy_recount(self, Py_ssize_t c, double denom) noexcept nogil
    cdef int _l1_build_heap(self, Py_ssize_t c, const int64_t* coords,
                            Py_ssize_t n) noexcept nogil
    cdef void _l1_settle_all(self, Py_ssize_t c) noexcept nogil
    cdef void _end_steps(self, int* need_rescale, int* moved, int64_t steps, double draw,
                         bint add_to_sum) noexcept nogil
