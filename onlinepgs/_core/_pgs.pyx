# cython: language_level=3
"""The Primal Gradient Solver's state and its pass over rows (Zhu et al., 2009, Figure 1).

Every iterate is w_t = s_t * phi(lambda) coordinate-wise (docs/design/method.md): for p = 2,
phi = lambda; for p < 2, phi_j = sgn(lambda_j) (|lambda_j| / M)^(q-1) with a per-problem
scale M that keeps the powers inside double range, and N = sum_j (|lambda_j| / M)^q is
a running scalar. A step touches only the coordinates of its rows; s_t, N and the
sums behind the averaged iterates are scalars, so every step costs O(nnz).

Averaged iterates are lazy: the running sum C_t of s_t (of t s_t for "weighted", of t^2 s_t
for "weighted2") lets
coordinate j be settled only when touched. For p = 2 one array suffices,
D_j = sum_u (change of phi_j at step u) C_{u-1}, and the sum of w_j is C_T phi_j - D_j; for
p < 2, phi spans many magnitudes and that difference would cancel, so each touch adds
phi_j (C - mark_j) exactly and moves mark_j.

The fields of one (coordinate, problem) sit side by side in one block (see PGSState),
the K one-vs-rest problems of a coordinate next to each other, so one pass over a row
serves every class and one coordinate's update touches one cache line. Coordinate 0 is
the intercept's constant feature; feature j of the data is coordinate j + 1.
"""
cimport cython
import math

import numpy as np
cimport numpy as cnp
from libc.math cimport (pow, fabs, sqrt, log, exp, exp2, log2, copysign, isfinite, floor,
                        signbit, INFINITY)
from libc.stdint cimport uint64_t, int64_t, int32_t
from libc.stdlib cimport malloc, free, qsort, calloc, realloc
from libc.string cimport memcpy

from onlinepgs._core._losses cimport loss_value, loss_derivative, loss_and_derivative
from onlinepgs._core._multiclass cimport (mc_loss_grad, MC_NONE, MC_MULTINOMIAL,
                                          MC_CRAMMER_SINGER)
from onlinepgs._core._regularizer cimport reg_conjugate, phi_power, phi_power_many, phi_quarters
from onlinepgs._core._mirror cimport (Mirror, mirror_init, mirror_scale, mirror_refresh_due,
                                      mirror_cancelled, mirror_drift_due, mirror_link,
                                      mirror_touch, mirror_row, mirror_max, mirror_count,
                                      MIRROR_CHUNK)
from onlinepgs._core._random cimport uniform01
from onlinepgs._core._l1q cimport L1Q, l1q_add, l1q_estimate, l1q_link, l1q_tol
from onlinepgs._core._l1pair cimport (opgs_pair, opgs_pair_of, opgs_pair_all, opgs_lo,
                                      opgs_add, opgs_mul, opgs_hi, L1AvgSums, l1avg_add)
from onlinepgs._core._sparse cimport (index_t, sparse_dot_sq, sparse_dot_sq_avg2,
                                      sparse_dot_sq_avgq, sparse_axpy,
                                      prefetch_gather, OPGS_PREFETCH, not_inlined)
from onlinepgs._core._losses import LOSS_CODES, CLASSIFICATION_LOSSES
from onlinepgs._options import PYTHON, check_pgs_state, learner_rules
from onlinepgs import _layout
from onlinepgs._layout import StateLayout

if _layout.SEEN_DENSE != SEEN_DENSE:  # the list's room (_layout) and its drop rule (here)
    raise ImportError("onlinepgs._layout.SEEN_DENSE differs from the compiled core's")

cnp.import_array()

# the multiclass losses: one-vs-rest (K binary problems), or one loss of the K scores
# coupling them (_multiclass.pxd; the binary loss each needs: onlinepgs._options)
MULTI_CLASS = {"ovr": MC_NONE, "multinomial": MC_MULTINOMIAL,
               "crammer_singer": MC_CRAMMER_SINGER}


def multi_class_code(multi_class, str loss="logistic", bint multiclass=True):
    """The code (_multiclass.pxd's MC_*) of `multi_class`, a name of MULTI_CLASS or
    its code; ValueError for another value, or a coupled loss with a loss it is not
    (multinomial: "logistic", crammer_singer: "hinge") or without K > 2 classes."""
    names = {v: k for k, v in MULTI_CLASS.items()}
    if isinstance(multi_class, str):
        name = multi_class
    elif isinstance(multi_class, int) and not isinstance(multi_class, bool):
        name = names.get(multi_class)
    else:
        name = None
    if name not in MULTI_CLASS:
        raise ValueError(f"multi_class must be one of {sorted(MULTI_CLASS)}, "
                         f"got {multi_class!r}")
    if name != "ovr":
        learner_rules({"multi_class": name, "loss": loss}, "pgs", PYTHON)
        if not multiclass:
            raise ValueError(f"multi_class={name!r} couples the K > 2 problems of a "
                             "multiclass state (multiclass=True)")
    return MULTI_CLASS[name]


ITERATES = {"last": ITERATE_LAST, "average": ITERATE_AVERAGE,
            "weighted": ITERATE_WEIGHTED, "weighted2": ITERATE_WEIGHTED2,
            "random": ITERATE_RANDOM}


# For p < 2 the scale M is kept within a factor 2 of max_j |lambda_j| (refreshed when a
# coordinate passes 2M, or when N < 2^-q, i.e. all fall below M/2): the powers stay in
# range and s_t keeps one magnitude, which the lazy averages' running sums need for
# precision. The refresh is O(dim) and happens O(log t) times.
STATE_VERSION = 4  # 4: the reported iterate's progressive sums
# The l_q map's window of M, its headroom, its narrowing near p = 1 and N's recount
# rule: _mirror.pxd, shared with SDCA.
# How near 1 p may come (q - 1 at most 2^23) is a rule of onlinepgs._options
# (MAX_Q_MINUS_1, check_p): past it the weights are not worth computing, and the window
# of M (_mirror.pxd) is so narrow that its refreshes dominate the run.
# The lazy averages for p < 2 take differences C - mark_j of the running sum C of weighted
# scales: a term far below C is lost in it, and with it coordinate j's weight for that
# step. s_t falls steeply as lambda grows between refreshes of M when q is large (by up to
# 3.5^(q-2): 2^179 for p = 1.01), so every coordinate is settled and C restarted when a
# term falls below C / CUM_RANGE (relative error of a difference then ~ 2 CUM_RANGE eps).
# Where the terms grow or decay slowly (p >= 1.2, the weights t and t^2) it happens
# O(log t) times at most, in O(dim) each. p = 2 needs it too on the ball, where s_t falls
# with the projection's factor: a row of a large sample weight makes it fall many orders
# at once, and C lambda_j - acc_j then cancelled to nothing.
cdef double CUM_RANGE = 1048576.0  # 2^20
# Forgetting keeps lambda~ = lambda / G with G = gamma^t falling every step, so lambda~ and
# the lazy sums grow like 1 / G: once G falls below RENORM_BELOW they are multiplied by G
# and G set to 1 (one sweep over the coordinates reached, every 138.6 / ln(1/gamma)
# steps), far from the double range (lambda~ at most 2^200 times lambda).
cdef double RENORM_BELOW = 6.223015277861142e-61  # 2^-200

# l1 on the ball: ||soft(lambda, thr)||^2 = s2 - 2 thr s1 + n_act thr^2 is counted again
# exactly once it cancelled this much below s2 (its rounding is relative to s2)
cdef double L1_CANCEL = 1048576.0  # 2^20
# l1 on the ball: a lazy problem (no heap) whose bound failed builds its heap when the norm
# counted then is above L1_HEAP_BUILD times the radius; a problem with its heap drops it
# once the norm is at most L1_HEAP_DROP times the radius. Between the two, a heap that was
# just built is not dropped at the next step; above the drop, a norm that soon reaches the
# radius again is not counted from scratch every few steps. With "auto" (the radius grows
# as the examples come) the ball binds through much of a first pass at a small sigma and
# the norm then falls slowly: dropping at half the radius kept IMDB's heap a whole pass
# longer (news20 two passes) for no binding step.
cdef double L1_HEAP_BUILD = 0.9
cdef double L1_HEAP_DROP = 0.8
# a lazy ball's recount takes the bound at bbase = 0 (||lambda||^2) when it is within this
# fraction of the radius: room for ||lambda|| to grow before the bound fails again
cdef double L1_ZERO_BASE = 0.7


cdef int _l1_push(L1Heap* h, double key, int64_t j) noexcept nogil:
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


cdef void _l1_sift_down(L1Heap* h, Py_ssize_t i) noexcept nogil:
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


cdef int _cmp_int64(const void* a, const void* b) noexcept nogil:
    cdef int64_t x = (<const int64_t*>a)[0], y = (<const int64_t*>b)[0]
    return (x > y) - (x < y)


cdef void _sort_coords(int64_t* a, Py_ssize_t n, Py_ssize_t dim) noexcept nogil:
    """Sort n coordinates in [0, dim) in place: least-significant-digit radix sort, one
    pass per byte of dim (3 for 5,000,000), O(n) each, several times faster than qsort's
    compare callbacks; qsort where no scratch memory can be had."""
    cdef int64_t* tmp
    cdef int64_t* src = a
    cdef int64_t* dst
    cdef int64_t* swap
    cdef Py_ssize_t count[256]
    cdef Py_ssize_t i, total, c, here
    cdef int shift = 0
    if n < 64:
        qsort(a, n, sizeof(int64_t), _cmp_int64)
        return
    tmp = <int64_t*>malloc(n * sizeof(int64_t))
    if tmp == NULL:
        qsort(a, n, sizeof(int64_t), _cmp_int64)
        return
    dst = tmp
    while shift < 64 and (<uint64_t>dim - 1) >> shift:
        for c in range(256):
            count[c] = 0
        for i in range(n):
            count[(<uint64_t>src[i] >> shift) & 255] += 1
        total = 0
        for c in range(256):  # counts -> where each digit's run starts
            here = count[c]
            count[c] = total
            total += here
        for i in range(n):
            c = (<uint64_t>src[i] >> shift) & 255
            dst[count[c]] = src[i]
            count[c] += 1
        swap = src
        src = dst
        dst = swap
        shift += 8
    if src != a:
        memcpy(a, src, n * sizeof(int64_t))
    free(tmp)


cdef void _seen_compact(Seen* sn) noexcept nogil:
    """Sort and deduplicate the list (the sorted prefix merged with the sorted tail);
    drop it when it has grown past dim / SEEN_DENSE. O(tail + n) (radix sort)."""
    cdef Py_ssize_t a, b, n_out = 0, n = sn.n, mid = sn.n_sorted
    cdef int64_t* lst = sn.lst
    cdef int64_t* out = NULL
    cdef int64_t v
    if not sn.track or mid == n:
        return
    _sort_coords(lst + mid, n - mid, sn.dim)
    if mid > 0:
        out = <int64_t*>malloc(n * sizeof(int64_t))
        if out == NULL:  # no memory to merge into: sort it all in place
            _sort_coords(lst, n, sn.dim)
    if out != NULL:
        a = 0
        b = mid
        while a < mid or b < n:
            if b == n or (a < mid and lst[a] <= lst[b]):
                v = lst[a]
                a += 1
            else:
                v = lst[b]
                b += 1
            if n_out == 0 or out[n_out - 1] != v:
                out[n_out] = v
                n_out += 1
        memcpy(lst, out, n_out * sizeof(int64_t))
        free(out)
    else:
        for a in range(n):
            if n_out == 0 or lst[n_out - 1] != lst[a]:
                lst[n_out] = lst[a]
                n_out += 1
    sn.n = sn.n_sorted = n_out
    if n_out * SEEN_DENSE > sn.dim:
        _seen_drop(sn)


cdef void _note_pass(Seen* sn, const double* lam, Py_ssize_t K, Py_ssize_t S,
                     const index_t* indices, const int64_t* indptr, const int64_t[::1] order,
                     Py_ssize_t n_cols, bint dense, bint intercept) noexcept nogil:
    """Before a pass: note every coordinate its rows may update (a dense row's are
    1 .. n_cols), and the intercept's 0. Noted ahead of their updates, the coordinates
    of rows not yet run are zeros to a sweep meanwhile, which leaves its sums as they are;
    and the pass's own loop does not check anything."""
    cdef Py_ssize_t i, e, n_rows = order.shape[0]
    cdef int64_t row, updates = 0
    if not sn.track:
        return
    if dense:
        updates = n_cols if n_rows else 0
    else:
        for i in range(n_rows):
            row = order[i]
            updates += indptr[row + 1] - indptr[row]
    if not _seen_spend(sn, updates + 1):
        return
    if intercept:
        _note_new(sn, lam, K, S, 0)
    if dense:
        for e in range(updates):
            _note_new(sn, lam, K, S, e + 1)
        return
    for i in range(n_rows):
        row = order[i]
        for e in range(indptr[row], indptr[row + 1]):
            _note_new(sn, lam, K, S, <int64_t>indices[e] + 1)


CACHE_LINE = 64


def cache_aligned_zeros(shape):
    """A C-contiguous float64 array of zeros whose first element starts a cache line.

    malloc aligns to 16 bytes only: a block of 32-byte coordinates (p < 2, averaged)
    that starts 16 or 48 bytes into a line splits every other coordinate over two lines,
    and the state's random accesses then cost 12-20% more in one process, and a lane up
    to 62% more than its partner on the other core (docs/benchmarks.md).
    """
    n = math.prod(shape)
    raw = np.zeros(n * 8 + CACHE_LINE, dtype=np.uint8)
    start = (-raw.ctypes.data) % CACHE_LINE
    return raw[start:start + n * 8].view(np.float64).reshape(shape)


def power_is_cheap(double p):
    """True where |x|^(q-1) takes square roots and multiplies, not a log and an exp."""
    return p == 2.0 or phi_quarters(p / (p - 1.0)) > 0


# ---- read-out: an iterate's weights at any coordinate, nothing settled --------------------
# `weights` reads every coordinate through `_read_weight`, `scores` the coordinates of its
# rows: one formula for a weight, so a row scored from the state gets the bits of the
# model read out whole. The averages and the random iterate are read as the pass reads
# the reported iterate's margins (`_part_value`, _pgs.pxd). A read-out changes nothing.
cdef enum:
    READ_ZERO = 0  # t = 0: w_0 = 0
    READ_LAST = 1  # s_c phi_j (phi = lambda for p = 2)
    READ_L1_LAST = 2  # l1: s_c times soft(lambda_j, thr) through the l_q map (p < 2)
    READ_SUMS = 3  # an average: the part's weighted sum over the weights' total
    READ_RANDOM = 4  # the random iterate: the part's value (a snapshot or rnd_s phi_j)


cdef struct Readout:
    int kind
    Part pt  # the lazy sums of the state's own iterate, as its pass reads them
    const double* s
    const L1Q* l1q  # l1 with p < 2: the scale of the soft thresholds' powers
    double qm1, norm
    bint p_is_two


cdef Readout _readout(PGSState st, int it):
    """How iterate `it` (the state's own or the last) is read from the state's fields."""
    cdef Readout rd
    rd.pt = st._part()
    rd.s = &st.s[0]
    rd.l1q = st.l1q
    rd.qm1 = st.q - 1.0
    rd.norm = st._average_norm() if _averaged(it) else 1.0
    rd.p_is_two = st.p_is_two
    if st.t == 0:
        rd.kind = READ_ZERO
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
    cdef double lam, a
    if kind == READ_SUMS:
        return _part_value(rd.pt, j, c) / rd.norm
    if kind == READ_RANDOM:
        return _part_value(rd.pt, j, c)
    if kind == READ_ZERO:
        return 0.0
    at = rd.pt.blk + (j * rd.pt.K + c) * rd.pt.S
    if kind == READ_LAST:
        return at[rd.pt.off_phi] * rd.s[c]
    lam = at[0]
    a = fabs(lam) - rd.pt.thr[0]
    if not a > 0.0:
        return 0.0  # exactly 0 at or below the threshold (l1 selects)
    # p < 2: the l_q map of the soft threshold in the scale's units, times the scale
    # (`_l1q_scale`)
    return copysign(a if rd.p_is_two else pow(a * rd.l1q[c].inv_m, rd.qm1), lam) * rd.s[c]


cdef inline void _read_range(Readout rd, int kind, Py_ssize_t dim, double* out) noexcept nogil:
    cdef Py_ssize_t j, c, K = rd.pt.K
    cdef double w
    # l1's zeros: out's stand (pages they fill are never touched)
    cdef bint sparse = kind == READ_L1_LAST or (kind == READ_SUMS and rd.pt.kind == PART_L1AVG)
    for c in range(K):
        for j in range(dim):
            w = _read_weight(rd, kind, j, c)
            if sparse and w == 0.0 and not signbit(w):
                continue
            out[j * K + c] = w


cdef void _read_all(Readout rd, Py_ssize_t dim, double* out) noexcept nogil:
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


cdef void _read_scores(Readout rd, const double* vals, const index_t* idx,
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


@cython.final
cdef class PGSState:
    """Everything PGS carries between steps, for K problems sharing one pass.

    Built by the estimators; exposed for tests, model files and the Dask layer.
    `to_dict()` / `from_dict()` round-trip it exactly.

    ``l1`` (>= 0) adds ``l1 ||w||_1`` to the objective ``sigma r(w) + mean loss``:
    the iterates are ``soft(lambda, D l1 / sigma) / D`` (D = (t + 1) sigma, or forgetting's),
    scaled onto the ball, so a coordinate is exactly 0 while ``|lambda_j| <= D l1 / sigma``
    (in the averaged iterates too: they are reported on the last iterate's support);
    every coordinate is thresholded, the intercept's too (docs/design/core.md, "l1: soft
    thresholds, lazily"); for p < 2 the l_q map of the soft threshold, its scale from an
    estimate of N within 2e-6 (_l1q.pxd, docs/design/l1.md "p < 2"), the last iterate only.
    Not available (ValueError): p < 2 with an averaged iterate or forgetting,
    iterate="random", forgetting with an averaged iterate, Dask lanes. With l1 > 0 the
    online duality gap of `stats_dict` is NaN (it lacks the l1 term); the regret bound is
    kept.
    """
    # the attributes are declared in _pgs.pxd (the merge, _merge.pyx, reads them)

    def __init__(self, *, double p=2.0, double sigma=1e-4, radius=None, str loss="logistic",
                 int batch_size=1, str iterate="last", int n_problems=1, bint multiclass=False,
                 bint fit_intercept=True, double intercept_scaling=1.0, double epsilon=0.1,
                 Py_ssize_t n_features=0, uint64_t seed=0, double forget=1.0,
                 double l1=0.0, multi_class="ovr"):
        # the learners' rules (onlinepgs._options): a state is never built from options
        # they refuse
        check_pgs_state(p=p, sigma=sigma, radius=radius, loss=loss, batch_size=batch_size,
                        iterate=iterate, fit_intercept=bool(fit_intercept),
                        intercept_scaling=intercept_scaling, epsilon=epsilon, forget=forget,
                        l1=l1, multi_class=multi_class)
        if n_problems < 1:
            raise ValueError("n_problems must be >= 1")
        self.p = p
        self.q = p / (p - 1.0)
        self.mm = mirror_init(p)
        if forget < 1.0 and p < 2.0:
            self._widen_window()
        self.quarters = self.mm.quarters
        self.p_is_two = p == 2.0
        self.sigma = sigma
        self.bounded = radius is not None
        self.radius_auto = radius == "auto"
        # "auto": sqrt(2 (p-1) max_i sw_i l(0; y_i) / sigma), grown example by example
        self.radius = 0.0 if self.radius_auto else (
            float(radius) if radius is not None else float("inf"))
        self.l1 = l1
        # l1 on the ball keeps its own norm, ||soft(lambda, thr)||, in the heaps: no N
        self.need_norm = ((not self.p_is_two) or self.bounded) and l1 == 0.0
        # the states that sweep their coordinates now and then (N's upkeep; l1's recounts
        # of the ball's norm and of N, the folds of its averages) keep a list of those the
        # passes reached, so that a sweep is not one of the width (2^24 and more hashed)
        self.keep_seen = self.need_norm or (l1 > 0.0 and (
            self.bounded or p != 2.0 or _averaged(ITERATES[iterate])))
        # l1 on the ball keeps the active coordinates in heaps while the ball may bind (its
        # norm moves with thr; none while it cannot, `_l1_ball_factor`); an average keeps
        # its sums folded with a flag per coordinate (`_touch_l1`; the heap's pops fold a
        # coordinate as it falls to the threshold, else closed forms, `l1_fallen`)
        self.l1_heap = l1 > 0.0 and p == 2.0 and self.bounded
        l1_folded = l1 > 0.0 and p == 2.0 and _averaged(ITERATES[iterate])
        self.norm_low = self.mm.norm_low
        self.r_hi = self.mm.r_hi
        self.headroom = self.mm.headroom
        self.loss = loss
        self.loss_code = LOSS_CODES[loss]
        self.epsilon = epsilon
        self.batch_size = batch_size
        self.iterate = ITERATES[iterate]
        self.n_problems = n_problems
        self.multiclass = multiclass
        self.mc_code = multi_class_code(multi_class, loss, multiclass)
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.rng = seed
        self.t_step = 1
        self.forget = forget
        self.forgetting = forget < 1.0
        self.tau = 0.0
        self.decay = 1.0
        self.weight_sum = 0.0
        K = n_problems
        # the fields of a (coordinate, problem) and the arrays that grow with the width:
        # onlinepgs._layout, which max_model_bytes and the model files read too
        self.layout = StateLayout(p=p, iterate=iterate, l1=l1, radius=radius,
                                  batch_size=batch_size, n_problems=n_problems)
        fields = self.layout.fields
        if self.layout.keeps_seen != self.keep_seen or ("key" in fields) != self.l1_heap \
                or ("on" in fields) != l1_folded:
            raise AssertionError("onlinepgs._layout disagrees with PGSState")
        self.n_fields = len(fields)
        self.off_key = fields.index("key") if "key" in fields else 0
        self.off_on = fields.index("on") if "on" in fields else 0
        self.off_phi = fields.index("phi") if "phi" in fields else 0
        self.off_acc = fields.index("acc") if "acc" in fields else -1
        self.off_mark = fields.index("mark") if "mark" in fields else -1
        self.norm_a = np.zeros(K)
        self.scale_a = np.ones(K)
        self.s_a = np.zeros(K)
        self.cum_a = np.zeros(K)
        self.rnd_s_a = np.zeros(K)
        self.regret_a = np.zeros(K)
        self.rnd_ver_a = np.zeros(K, dtype=np.int64)
        self.sum_conj_a = np.zeros(K)
        self.sum_step_loss_a = np.zeros(K)
        # the regularizer's running value needs N, which p = 2 on R^n does not keep
        self.sum_reg_a = np.zeros(K) if self.need_norm else np.full(K, np.nan)
        self.cum2_a = np.zeros(K)
        if self.l1_heap:
            self.heaps = <L1Heap*>calloc(K, sizeof(L1Heap))
            if self.heaps == NULL:
                raise MemoryError()
            for c in range(K):
                self.heaps[c].lazy = True  # lambda = 0: within any ball
        self.l1_thr = l1  # _denom(0) l1 / sigma
        if l1 > 0.0 and p != 2.0:
            # p < 2: N(thr) by its expansion about thr0, per problem (_l1q.pxd)
            self.l1q_tol = l1q_tol()
            self.l1q = <L1Q*>calloc(n_problems, sizeof(L1Q))
            if self.l1q == NULL:
                raise MemoryError()
            for c in range(n_problems):
                self.l1q[c].m = self.l1q[c].inv_m = 1.0
        self.dim = 0
        self.span = 1
        self._allocate(1 + n_features)
        self._bind()

    def __dealloc__(self):
        cdef Py_ssize_t c
        if self.heaps != NULL:
            for c in range(self.n_problems):
                free(self.heaps[c].key)
                free(self.heaps[c].j)
            free(self.heaps)
            self.heaps = NULL
        free(self.l1q)
        self.l1q = NULL

    def _l1_rebuild(self, l1q_sums=None):
        """Set the threshold from t and sigma, and build the heaps afresh from lambda:
        the coordinates above it, their sums and the norm (O(dim), at a load, a copy or a
        change of sigma). p < 2: N(thr)'s sums are counted again, or, where `l1q_sums`
        gives them (a load or a copy: the running state's own, estimate and all, so that
        it continues bit for bit), taken as they are."""
        cdef Py_ssize_t c
        if self.l1 == 0.0:
            return
        self.l1_thr = self._denom(self.t) * self.l1 / self.sigma
        if self.l1q != NULL and l1q_sums is not None:
            for c in range(self.n_problems):
                (self.l1q[c].thr0, self.l1q[c].m, self.l1q[c].s0, self.l1q[c].s1,
                 self.l1q[c].s2) = [float(v) for v in l1q_sums[c]]
                self.l1q[c].inv_m = 1.0 / self.l1q[c].m
                self.l1q[c].outgrown = 0
        elif self.l1q != NULL:
            for c in range(self.n_problems):
                self._l1q_recount(c)
        if self.heaps == NULL:
            return
        for c in range(self.n_problems):
            if self._l1_build_heap(c, NULL, self.dim):
                raise MemoryError()

    def _widen_window(self):
        """Forgetting, p < 2: widen M's window from [M / 2, 2 M] to [M / 2^g, 2^g M],
        g = 256 / q, and its headroom to 1.75^g (the rule near p = 1, _mirror.pxd).
        lambda~ grows by 1 / gamma a step on the coordinates the rows keep touching, so
        the 3.5-fold window would be refreshed every ln 3.5 / ln(1 / gamma) steps (1,252
        at 0.999), a sweep over the coordinates reached each time; 3.5^g-fold lasts g
        times longer. Every phi stays within 2^-256 .. 2^256 (g (q - 1) < 256) and N
        below dim 2^256 (g q = 256). Where g <= 1 (q >= 256) the window stays."""
        cdef double g = 256.0 / self.mm.q
        if g <= 1.0 or self.mm.r_hi > 2.0:
            return
        self.mm.r_hi = pow(2.0, g)
        self.mm.headroom = pow(1.75, g)
        self.mm.norm_low = pow(self.mm.r_hi, -self.mm.q)

    # ---- storage ---------------------------------------------------------------
    def _allocate(self, Py_ssize_t new_dim):
        """Grow the state to new_dim coordinates, its arrays as `self.layout` gives them
        (onlinepgs._layout); new coordinates are zero."""
        shapes = self.layout.arrays(new_dim)
        block = cache_aligned_zeros(shapes["block_a"][0])
        if self.dim:
            block[: self.dim] = self.block_a
        self.block_a = block
        for name in ("snap_a", "snapv_a"):
            # the random iterate's snapshots; a placeholder row otherwise
            shape, dtype = shapes[name]
            new = np.zeros(shape, dtype=dtype)
            if shape[0] > 1 and self.dim:
                new[: self.dim] = getattr(self, name)
            setattr(self, name, new)
        old_dim = self.dim
        self.dim = new_dim
        self._views()
        self._grow_seen(old_dim)
        # the mini-batch's gradient accumulator and touched marks (one entry without)
        self.grad_acc = np.zeros(*shapes["grad_acc"])
        self.is_touched = np.zeros(*shapes["is_touched"])
        self.touched = np.zeros(*shapes["touched"])

    def _grow_seen(self, Py_ssize_t old_dim):
        """Room for a list of dim / SEEN_DENSE + 1 coordinates (more are never kept: the
        list is dropped first; np.empty: pages are mapped only where written), keeping the coordinates reached; a state that had stopped tracking in
        its old width looks for them again, as they may be few in the new one (O(old dim),
        like the growth's copy). A state that never sweeps (p = 2 on R^n, the last
        iterate) keeps no list."""
        coords = ()
        if old_dim and self.keep_seen:
            coords = self._seen_coords()
            if coords is None:
                coords = self._reached(old_dim)
        self._set_seen(np.empty(*self.layout.arrays(self.dim)["seen_a"]), coords)

    @property
    def nbytes(self):
        """Bytes of every array the state holds (as NumPy's ``nbytes``: the arrays that
        grow with the width, `self.layout.nbytes(dim)`, and those of K entries)."""
        held = (self.block_a, self.snap_a, self.snapv_a, self.seen_a, self.cum2_a,
                self.norm_a, self.scale_a, self.s_a, self.cum_a, self.rnd_s_a, self.regret_a,
                self.rnd_ver_a, self.sum_conj_a, self.sum_step_loss_a, self.sum_reg_a,
                self.grad_acc, self.is_touched, self.touched, self.coefs, self.margins_buf,
                self.flag_rescale, self.flag_moved, self.step_gq, self.mc_grad,
                self.mc_scores, self.b_loss_c, self.b_conj_c, self.w_norm, self.norm_peak,
                self.inv_scale)
        return sum(np.asarray(a).nbytes for a in held)

    def _reached(self, Py_ssize_t upto):
        """The coordinates below `upto` with a non-zero field (sorted): O(upto)."""
        block = np.asarray(self.block_a)[:upto]
        return np.flatnonzero((block != 0.0).reshape(upto, -1).any(axis=1))

    def _set_seen(self, seen_a, coords, budget=None):
        """Make `coords` (sorted, unique) the list, in buffer seen_a of dim / SEEN_DENSE + 1
        entries (None: the current one), with `budget` updates to check (None: SEEN_WORK *
        dim); None or too many coordinates: no list, sweeps visit every coordinate."""
        if seen_a is None:
            seen_a = self.seen_a
        cdef int64_t[::1] lst = seen_a
        cdef Py_ssize_t n = 0 if coords is None else len(coords)
        self.seen_a = seen_a
        self.seen.lst = &lst[0]
        self.seen.cap = seen_a.shape[0]
        self.seen.dim = self.dim
        self.seen.budget = SEEN_WORK * self.dim if budget is None else budget
        self.seen.track = (self.keep_seen and coords is not None
                           and n * SEEN_DENSE <= self.dim)
        if self.seen.track:
            seen_a[:n] = coords
        self.seen.n = self.seen.n_sorted = n if self.seen.track else 0

    def _seen_coords(self):
        """The sorted coordinates on the list, or None when every coordinate counts."""
        _seen_compact(&self.seen)
        if not self.seen.track:
            return None
        return self.seen_a[: self.seen.n]

    @property
    def n_tracked(self):
        """How many coordinates a sweep visits: those the passes reached, or dim once the
        list was dropped (more than dim / 4 of them, or 2 dim updates checked; a state
        that never sweeps keeps none)."""
        coords = self._seen_coords()
        return self.dim if coords is None else len(coords)

    def _views(self):
        block = self.block_a
        self.lam_a = block[:, :, 0]
        self.phi_a = block[:, :, self.off_phi]
        self.acc_a = block[:, :, self.off_acc] if self.off_acc >= 0 else None
        self.mark_a = block[:, :, self.off_mark] if self.off_mark >= 0 else None

    def _bind(self):
        self.block = self.block_a
        self.lam = self.lam_a
        self.phi = self.phi_a
        if self.acc_a is not None:
            self.acc = self.acc_a
        if self.mark_a is not None:
            self.mark = self.mark_a
        self.snap = self.snap_a
        self.snapv = self.snapv_a
        self.cum2 = self.cum2_a
        self.norm_sum = self.norm_a
        self.norm_peak = np.array(self.norm_a, dtype=np.float64)
        self.mscale = self.scale_a
        self.inv_scale = 1.0 / self.scale_a
        self.s = self.s_a
        self.cum = self.cum_a
        self.rnd_s = self.rnd_s_a
        self.regret = self.regret_a
        self.rnd_ver = self.rnd_ver_a
        self.sum_conj = self.sum_conj_a
        self.sum_step_loss = self.sum_step_loss_a
        self.sum_reg = self.sum_reg_a
        K = self.n_problems
        self.coefs = np.zeros(max(self.batch_size, 1) * K)
        self.margins_buf = np.zeros(K)
        self.flag_rescale = np.zeros(K, dtype=np.intc)
        self.flag_moved = np.zeros(K, dtype=np.intc)
        self.step_gq = np.zeros(K)
        self.mc_grad = np.zeros(K)
        self.mc_scores = np.zeros(K)
        self.b_loss_c = np.zeros(K)
        self.b_conj_c = np.zeros(K)
        self.w_norm = np.zeros(K)
        if self.t > 0 and self.need_norm:
            for c in range(K):
                self.w_norm[c] = self._w_norm(c, self.t)

    def ensure_dim(self, Py_ssize_t n_features):
        """Make room for n_features data features (never shrinks)."""
        if 1 + n_features > self.dim:
            self._allocate(1 + n_features)
            self._bind()

    # ---- serialisation -----------------------------------------------------------
    def config(self):
        """The constructor's arguments; ``forget`` only when below 1 (a state without
        it, e.g. one written before forgetting existed, does not forget), ``multi_class``
        only when coupled (a state without it is one-vs-rest)."""
        radius = "auto" if self.radius_auto else (self.radius if self.bounded else None)
        cfg = dict(p=self.p, sigma=self.sigma, radius=radius,
                   loss=self.loss, batch_size=self.batch_size,
                   iterate={v: k for k, v in ITERATES.items()}[self.iterate],
                   n_problems=self.n_problems, multiclass=bool(self.multiclass),
                   fit_intercept=bool(self.fit_intercept),
                   intercept_scaling=self.intercept_scaling, epsilon=self.epsilon)
        if self.forgetting:
            cfg["forget"] = self.forget
        if self.l1 > 0.0:
            cfg["l1"] = self.l1
        if self.mc_code != MC_NONE:
            cfg["multi_class"] = self.multi_class
        return cfg

    @property
    def multi_class(self):
        """"ovr" (K one-vs-rest problems, or one binary one), "multinomial" or
        "crammer_singer" (one loss of the K scores)."""
        return {v: k for k, v in MULTI_CLASS.items()}[self.mc_code]

    def to_dict(self):
        """The whole state as plain numbers and arrays (copies)."""
        return self._as_dict(True)

    def copy(self):
        """An independent copy of the state (each array copied once; where the state
        keeps the list of the coordinates reached, their rows only). The list is copied
        too: finding it again is a scan of the whole block, which a race's fork
        (`with_sigma`) would pay each time."""
        return PGSState._restore(self._as_dict(False), self._seen_coords(), True)

    def _as_dict(self, bint copy):
        d = dict(version=STATE_VERSION, config=self.config(), dim=self.dim,
                 t=self.t, n_examples=self.n_examples, n_mistakes=self.n_mistakes,
                 rnd_t=self.rnd_t, touches_since_exact=self.touches_since_exact,
                 span=self.span,
                 sum_weight=self.sum_weight, sum_loss=self.sum_loss,
                 sum_weighted_loss=self.sum_weighted_loss, loss0_max=self.loss0_max,
                 sum_weighted_loss_reported=self.sum_weighted_loss_reported,
                 n_mistakes_reported=self.n_mistakes_reported,
                 radius_now=self.radius, rng=int(self.rng))
        if self.forgetting:
            d.update(tau=self.tau, decay=self.decay, weight_sum=self.weight_sum)
        if self.l1 > 0.0:
            d["cum2_a"] = np.array(self.cum2_a, copy=True) if copy else self.cum2_a
        if self.l1q != NULL:
            d["l1q_a"] = self._l1q_sums()
        if self.off_on > 0:
            # the sums folded with a flag (before: marks and a heap's version count)
            d["l1_folded"] = 1
        for name in ("block_a", "snap_a", "snapv_a", "norm_a", "scale_a",
                     "s_a", "cum_a", "rnd_s_a", "regret_a", "rnd_ver_a",
                     "sum_conj_a", "sum_step_loss_a", "sum_reg_a"):
            d[name] = np.array(getattr(self, name), copy=True) if copy else getattr(self, name)
        return d

    @classmethod
    def from_dict(cls, d):
        """The state of `to_dict`; version 2 (before the online dual estimate) is read with
        that estimate unknown (NaN) from then on, versions 2 and 3 (before the reported
        iterate's progressive sums) with those unknown (NaN) from then on."""
        return cls._restore(d, None, False)

    @classmethod
    def _restore(cls, d, coords, bint coords_known):
        """`from_dict`, with the list of coordinates reached given (`coords_known`: a
        copy's; None when every coordinate counts) instead of found by a scan."""
        if d.get("version") not in (2, 3, STATE_VERSION):
            raise ValueError(f"unsupported solver state version {d.get('version')!r}")
        cfg = d["config"]
        self = cls(**cfg, n_features=int(d["dim"]) - 1)
        if self.off_on > 0 and not d.get("l1_folded"):
            d = _unfold_marks_layout(d)
        K = self.n_problems
        # a copy's list of coordinates reached: every other coordinate holds zeros in every
        # field, as the fresh arrays do, so only the list's are copied: O(reached), not
        # O(width), for a race's forks (docs/design/auto-sigma.md)
        sparse_copy = coords_known and coords is not None and self.keep_seen
        for name in ("block_a", "snap_a", "snapv_a"):
            arr = np.ascontiguousarray(d[name])
            target = getattr(self, name)
            if arr.shape != target.shape:
                raise ValueError(f"solver state array {name} has shape {arr.shape}, "
                                 f"expected {target.shape}")
            if sparse_copy and arr.shape[0] == self.dim:
                target[coords] = arr[coords]
            else:
                target[...] = arr
        for name in ("norm_a", "scale_a", "s_a", "cum_a", "rnd_s_a", "regret_a", "rnd_ver_a"):
            getattr(self, name)[...] = d[name]
        for name in ("sum_conj_a", "sum_step_loss_a", "sum_reg_a"):
            getattr(self, name)[...] = d[name] if d["version"] >= 3 else np.nan
        for name in ("t", "n_examples", "n_mistakes", "rnd_t", "touches_since_exact"):
            setattr(self, name, int(d[name]))
        (<PGSState>self).l1_sum_t = self.t  # a state is saved between steps
        # states written before `span` existed recount N on the old schedule
        self.span = max(1, min(int(d.get("span", self.dim)), self.dim))
        for name in ("sum_weight", "sum_loss", "sum_weighted_loss", "loss0_max"):
            setattr(self, name, float(d[name]))
        if d["version"] >= 4:
            self.sum_weighted_loss_reported = float(d["sum_weighted_loss_reported"])
            self.n_mistakes_reported = int(d["n_mistakes_reported"])
        else:
            # which rows the reported iterate would have mispredicted is not known: NaN,
            # never the last iterate's figures under the reported model's name
            self.sum_weighted_loss_reported = float("nan")
            self.n_mistakes_reported = 0
        if self.forgetting:
            for name in ("tau", "decay", "weight_sum"):
                setattr(self, name, float(d[name]))
        self.radius = float(d["radius_now"])
        self.rng = int(d["rng"])
        if self.l1 > 0.0:
            self.cum2_a[...] = d["cum2_a"]
        if self.keep_seen:
            self._set_seen(None, coords if coords_known else self._reached(self.dim))
        self._bind()
        # l1: the threshold, heaps and norm (s_a was saved); p < 2: N's sums as they ran
        # (files written before they were saved count them again)
        l1q_sums = d.get("l1q_a")
        if l1q_sums is not None:
            l1q_sums = np.asarray(l1q_sums, dtype=np.float64)
            if l1q_sums.shape != (K, 5) or not (np.isfinite(l1q_sums).all()
                                                and (l1q_sums[:, 1] > 0).all()):
                raise ValueError(f"solver state array l1q_a is not {K} rows of a reference "
                                 "threshold, a positive scale and three finite sums")
        self._l1_rebuild(l1q_sums)
        return self

    def _l1q_sums(self):
        """l1, p < 2: each problem's (thr0, m, S_0, S_1, S_2) (_l1q.pxd), as saved."""
        return np.array([[self.l1q[c].thr0, self.l1q[c].m, self.l1q[c].s0, self.l1q[c].s1,
                          self.l1q[c].s2] for c in range(self.n_problems)])

    def __reduce__(self):
        return (_rebuild_state, (self.to_dict(),))

    cdef Core _core(self) noexcept nogil:
        cdef Core core
        cdef double* base = &self.block[0, 0, 0]
        core.lam = base
        core.phi = base + self.off_phi
        # absent fields are never dereferenced: their code paths are off
        core.acc = base + (self.off_acc if self.off_acc >= 0 else 0)
        core.mark = base + (self.off_mark if self.off_mark >= 0 else 0)
        core.S = self.n_fields
        core.snap = &self.snap[0, 0]
        core.snapv = &self.snapv[0, 0]
        core.cum = &self.cum[0]
        core.norm_sum = &self.norm_sum[0]
        core.inv_scale = &self.inv_scale[0]
        core.rnd_s = &self.rnd_s[0]
        core.rnd_ver = &self.rnd_ver[0]
        core.mm = self.mm
        core.l1 = self.l1
        core.thr = &self.l1_thr
        core.cum2 = &self.cum2[0]
        core.heaps = self.heaps
        core.l1q = self.l1q
        core.off_key = self.off_key
        core.off_on = self.off_on
        core.t = &self.t
        core.sigma = self.sigma
        core.K = self.n_problems
        core.iterate = self.iterate
        core.p_is_two = self.p_is_two
        core.need_norm = self.need_norm
        return core

    cdef Part _part(self):
        """The lazy sums of the iterate this state reports, for the pass to read (see
        Rep; a lane reads its global state's, `_merge.fork`'s reference, the same way)."""
        cdef Part pt
        pt.kind = PART_NONE
        pt.blk = &self.block[0, 0, 0]
        pt.K = self.n_problems
        pt.S = self.n_fields
        pt.off_phi = self.off_phi
        pt.off_acc = self.off_acc
        pt.off_mark = self.off_mark
        pt.dim = self.dim
        pt.cum = &self.cum[0]
        pt.snap = &self.snap[0, 0]
        pt.snapv = &self.snapv[0, 0]
        pt.rnd_ver = &self.rnd_ver[0]
        pt.rnd_s = &self.rnd_s[0]
        pt.cum2 = &self.cum2[0]
        pt.thr = &self.l1_thr
        pt.off_on = self.off_on
        pt.t = &self.t
        pt.l1 = self.l1
        pt.sigma = self.sigma
        pt.iterate = self.iterate
        if _averaged(self.iterate):
            pt.kind = PART_AVG2 if self.p_is_two else PART_AVGQ
            if self.l1 > 0.0:
                pt.kind = PART_L1AVG
        elif self.iterate == ITERATE_RANDOM:
            pt.kind = PART_RANDOM
        return pt

    cdef Rep _rep(self):
        """How this pass reads the reported iterate's margins (see Rep and `_run_pass`)."""
        cdef Rep rep
        cdef PGSState ref = self.reference
        rep.own = self._part()
        rep.ref.kind = PART_NONE
        rep.ref_weight = 0.0
        rep.last = self.iterate == ITERATE_LAST and ref is None
        if ref is not None:
            # a lane: its round starts from ref's iterates, which its own sums lack
            rep.ref = ref._part()
            if ref.iterate == ITERATE_LAST:
                rep.last = True
            elif rep.ref.kind != PART_RANDOM:
                rep.ref_weight = ref._average_norm()
        return rep

    # ---- scalars -------------------------------------------------------------------
    cdef double _scale_of(self, Py_ssize_t c, int64_t t) noexcept nogil:
        """s such that w_t = s * phi, from N, M and t (Figure 2 in scalar form). On the
        ball it also leaves ||w_t||_p in w_norm[c] (the projection needs it anyway);
        on R^n `_w_norm` computes that."""
        cdef double denom = self._denom(t)
        cdef double s, norm_q, wnorm
        if self.l1q != NULL:
            return self._l1q_scale(c, denom)
        if self.l1 > 0.0:
            # w = soft(lambda, thr) / denom, times the ball's factor (the heaps' norm)
            s = 1.0 / denom
            if self.bounded:
                s *= self._l1_ball_factor(c, denom)
            return s
        if self.p_is_two:
            s = 1.0 / denom
            if self.bounded:
                wnorm = self.mscale[c] * sqrt(self.norm_sum[c]) / denom
                if wnorm > self.radius:
                    s *= self.radius / wnorm
                    if not isfinite(wnorm):  # ||lambda|| / denom beyond the double range:
                        # the projection's s = radius / ||lambda|| needs no denom
                        s = self.radius / self.mscale[c] / sqrt(self.norm_sum[c])
                self.w_norm[c] = self.radius if wnorm > self.radius else wnorm
            return s
        if self.norm_sum[c] <= 0.0:
            if self.bounded:
                self.w_norm[c] = 0.0
            return 0.0
        # ||lambda||_q^(2-q) M^(q-1) / ((q-1)(t+1) sigma), with ||lambda||_q = M N^(1/q)
        s = mirror_link(self.mm, self.mscale[c], self.norm_sum[c]) / ((self.q - 1.0) * denom)
        if self.bounded:
            norm_q = self.mscale[c] * exp(log(self.norm_sum[c]) / self.q)
            wnorm = (self.p - 1.0) * norm_q / denom
            if wnorm > self.radius:
                s *= self.radius / wnorm
                if not (isfinite(wnorm) and isfinite(s)):
                    s = _projected_scale(self.radius, self.norm_sum[c], self.q)
            self.w_norm[c] = self.radius if wnorm > self.radius else wnorm
        return s

    cdef double _denom(self, int64_t t) noexcept nogil:
        """(t + 1) sigma: w_t = grad r*(lambda_t / ((t + 1) sigma)). Forgetting puts tau for
        t and lambda = G lambda~: (tau + 1) sigma / G maps lambda~ (the state's tau, the
        caller's t being the state's)."""
        if self.forgetting:
            return (self.tau + 1.0) * self.sigma / self.decay
        return (t + 1.0) * self.sigma

    cdef double _average_norm(self) noexcept nogil:
        """The averaged iterate's divisor, the sum of its weights over the t steps: t,
        t (t + 1) / 2, t (t + 1) (2t + 1) / 6; with forgetting weight_sum, in the running
        sums' lambda~ units (see `weights`)."""
        if self.forgetting:
            return self.weight_sum
        return weight_total(self.iterate, self.t)

    cdef void _renormalize(self) noexcept nogil:
        """Forgetting: bring lambda~ back to G = 1 (lambda~, M, the lazy sums and their
        divisor times G), which leaves every iterate as it is. One sweep over the
        coordinates reached, every 138.6 / ln(1/gamma) steps (see RENORM_BELOW)."""
        cdef Py_ssize_t c, i, j, n, K = self.n_problems
        cdef const int64_t* coords
        cdef double g = self.decay
        cdef bint averaged = _averaged(self.iterate)
        for c in range(K):
            self._settle_all(c)  # the running sums C restart at 0: the rest is in acc
        n = self._sweep(&coords)
        for i in range(n):
            j = coords[i] if coords != NULL else i
            for c in range(K):
                self.lam[j, c] *= g
                if averaged:
                    self.acc[j, c] *= g
                if self.off_key > 0:  # the heap's keys below take the same product
                    self.block[j, c, self.off_key] *= g
        for c in range(K):
            # phi = (|lambda~| / M)^(q-1) is unchanged with M; for p = 2 phi is lambda~,
            # so the random iterate's scale takes 1 / G (its snapshots are weights)
            self.mscale[c] *= g
            self.inv_scale[c] = 1.0 / self.mscale[c]
            if self.p_is_two:
                self.rnd_s[c] /= g
        self.weight_sum *= g
        if self.l1 > 0.0:
            # l1: the threshold and the heaps' keys and sums in the new units (the order
            # of the keys is kept)
            self.l1_thr *= g
            if self.heaps != NULL:
                for c in range(K):
                    for i in range(self.heaps[c].n):
                        self.heaps[c].key[i] *= g
                    self.heaps[c].base *= g
                    self.heaps[c].s1 *= g
                    self.heaps[c].n2 *= g * g
                    self.heaps[c].peak *= g * g
                    self.heaps[c].bbase *= g
                    self.heaps[c].bn2 *= g * g
        self.decay = 1.0
        self.n_renorms += 1
        self.n_rescales += 1
        self.n_restarts += 1

    cdef double _norm_q(self, Py_ssize_t c) noexcept nogil:
        """||lambda||_q = M N^(1/q) of problem c (needs N: need_norm)."""
        if self.norm_sum[c] <= 0.0:
            return 0.0
        if self.p_is_two:
            return self.mscale[c] * sqrt(self.norm_sum[c])
        return self.mscale[c] * exp(log(self.norm_sum[c]) / self.q)

    cdef double _w_norm(self, Py_ssize_t c, int64_t t) noexcept nogil:
        """||w_t||_p = min(B, (p - 1) ||lambda_t||_q / ((t + 1) sigma)) (grad r*'s norm)."""
        cdef double wnorm = (self.p - 1.0) * self._norm_q(c) / self._denom(t)
        if self.bounded and wnorm > self.radius:
            return self.radius
        return wnorm

    cdef Py_ssize_t _sweep(self, const int64_t** coords) noexcept nogil:
        """Start a sweep: the number of coordinates to visit, and in coords the sorted
        list of them (NULL: every coordinate 0 .. dim - 1). The others are all zero."""
        _seen_compact(&self.seen)
        if self.seen.track:
            coords[0] = self.seen.lst
            self.n_swept += self.seen.n
            return self.seen.n
        coords[0] = NULL
        self.n_swept += self.dim
        return self.dim

    cdef void _settle_all(self, Py_ssize_t c) noexcept nogil:
        """Fold the lazy average of problem c into acc and restart its running sum."""
        cdef Py_ssize_t i, j, n
        cdef const int64_t* coords
        if not _averaged(self.iterate):
            return
        if self.l1 > 0.0:
            self._l1_settle_all(c)
            return
        # a loop per kind of sweep: every coordinate's has no indirection to pay
        n = self._sweep(&coords)
        if self.p_is_two:
            # the sum is C lambda_j - acc_j: moving C lambda_j into acc leaves it with C = 0
            if coords == NULL:
                for j in range(n):
                    self.acc[j, c] -= self.lam[j, c] * self.cum[c]
            else:
                for i in range(n):
                    j = coords[i]
                    self.acc[j, c] -= self.lam[j, c] * self.cum[c]
        elif coords == NULL:
            for j in range(n):
                self.acc[j, c] += self.phi[j, c] * (self.cum[c] - self.mark[j, c])
                self.mark[j, c] = 0.0
        else:
            for i in range(n):
                j = coords[i]
                self.acc[j, c] += self.phi[j, c] * (self.cum[c] - self.mark[j, c])
                self.mark[j, c] = 0.0
        self.cum[c] = 0.0

    cdef double _step_weight(self) noexcept nogil:
        """w_t's weight in the averaged iterate: 1, t or t^2 (tau, tau^2 forgetting)."""
        if self.forgetting:
            if self.iterate == ITERATE_WEIGHTED:
                return self.tau
            if self.iterate == ITERATE_WEIGHTED2:
                return self.tau * self.tau
            return 1.0
        if self.iterate == ITERATE_WEIGHTED:
            return <double>self.t
        if self.iterate == ITERATE_WEIGHTED2:
            return <double>self.t * <double>self.t
        return 1.0

    cdef void _restart_sum_if_needed(self, Py_ssize_t c, double term) noexcept nogil:
        """Settle problem c's lazy average and restart its running sum C if `term`, the
        next step's weighted scale, would be lost in C (see CUM_RANGE). Counted as a
        rescale: every coordinate's sums changed (what lanes and their merge check)."""
        if _averaged(self.iterate) and term * CUM_RANGE < self.cum[c]:
            self._settle_all(c)
            self.n_rescales += 1
            self.n_restarts += 1

    cdef void _exact_norm(self, Py_ssize_t c, bint rescale) noexcept nogil:
        """Recompute N exactly from lambda; with rescale, first move M to headroom times
        max |lambda_j| (and phi with it). Sweeps the coordinates updates reached
        (`_sweep`), in increasing order. The map's arithmetic: _mirror.pxd."""
        cdef Py_ssize_t i, j, count, KS = self.n_problems * self.n_fields
        cdef double m, total
        cdef const int64_t* coords
        # problem c's lambda and phi: every KS doubles from these
        cdef double* lam_c = &self.block[0, 0, 0] + c * self.n_fields
        cdef double* phi_c = lam_c + self.off_phi
        if rescale:
            self.n_rescales += 1
            count = self._sweep(&coords)
            m = mirror_scale(self.mm, mirror_max(lam_c, KS, coords, count))
            if not self.p_is_two:
                self._settle_all(c)
                # w = rnd_s * phi for coordinates not yet snapped: snap them all now, in the
                # old units (scaling rnd_s by (m / old_m)^(q-1) instead overflows near
                # p = 1, where phi underflows: inf * 0)
                # (the coordinates no update reached have phi = 0 and need no snap)
                if self.rnd_ver[c] > 0:
                    count = self._sweep(&coords)
                    for i in range(count):
                        j = coords[i] if coords != NULL else i
                        if self.snapv[j, c] != self.rnd_ver[c]:
                            self.snap[j, c] = self.rnd_s[c] * self.phi[j, c]
                            self.snapv[j, c] = self.rnd_ver[c]
            self.mscale[c] = m
            self.inv_scale[c] = 1.0 / m
        count = self._sweep(&coords)
        # p = 2: phi is lambda, which M does not change
        total = mirror_count(self.mm, lam_c, phi_c, KS, coords, count, self.mscale[c],
                             rescale and not self.p_is_two)
        self.norm_sum[c] = total
        self.norm_peak[c] = total

    cdef void _l1_settle_all(self, Py_ssize_t c) noexcept nogil:
        """l1: fold every coordinate's running sums into acc and restart C and C2 (every
        coordinate reached is visited; one that fell to the threshold since its touch, on
        R^n or on a ball without its heap, by the closed form)."""
        cdef Py_ssize_t i, j, n
        cdef double* f
        cdef const int64_t* coords
        n = self._sweep(&coords)
        for i in range(n):
            j = coords[i] if coords != NULL else i
            f = &self.block[j, c, 0]
            if f[0] == 0.0:
                continue  # left inactive at its touch (its sum is acc; zero rows stay zero)
            f[self.off_acc] = l1_folded_total(f[0], f[self.off_acc], f[self.off_on],
                                              self.cum[c], self.cum2[c], self.l1_thr,
                                              self.l1_sum_t, self.sigma, self.l1,
                                              self.iterate)
            # with C = C2 = 0 an active one's sum is acc + 0; the others' is acc
            f[self.off_on] = 1.0 if fabs(f[0]) > self.l1_thr else 0.0
        self.cum[c] = 0.0
        self.cum2[c] = 0.0

    def _l1_folded_sum(self, int j, int c=0):
        """The weighted sum of coordinate j's iterates in problem c, an l1 average
        (`l1_folded_total`: a diagnostic for the tests)."""
        cdef const double* f = &self.block[j, c, 0]
        if self.off_on == 0:
            raise ValueError("only an l1 average keeps its sums folded")
        return l1_folded_total(f[0], f[self.off_acc], f[self.off_on], self.cum[c],
                               self.cum2[c], self.l1_thr, self.l1_sum_t, self.sigma, self.l1,
                               self.iterate)

    cdef double _l1_ball_factor(self, Py_ssize_t c, double denom) noexcept nogil:
        """The ball's factor min(1, radius / ||soft(lambda, thr) / denom||) with l1 (p = 2)
        and w_norm[c]. No heap while the ball cannot bind ("lazy", see L1Heap): the
        factor is exactly 1 while its bound s sqrt(bn2) is within the radius (with 1e-9 to
        spare for bn2's rounding); when the bound fails bn2 is counted exactly at thr, and
        the heap is built when the ball may bind (the norm above L1_HEAP_BUILD times the
        radius, or fewer touches since the last count than coordinates to count: O(1)
        amortized); a heap's problem turns lazy again at L1_HEAP_DROP times the radius or
        less. A lazy problem on bbase = thr also counts again after (coordinates reached
        << backoff) touches, to move to bbase = 0 (`_l1_lazy_recount`): O(1) amortized
        too. Lazy, w_norm is the bound
        (it feeds only the online gap's sums, NaN with l1)."""
        cdef L1Heap* h = self.heaps + c
        cdef double wnorm
        cdef int64_t reached
        if h.lazy:
            wnorm = sqrt(h.bn2 if h.bn2 > 0.0 else 0.0) / denom
            if wnorm * (1.0 + 1e-9) <= self.radius:
                self.w_norm[c] = wnorm
                if h.bbase == 0.0:
                    return 1.0
                # on bbase = thr: count again, now and then, to move to bbase = 0
                reached = self.seen.n if self.seen.track else self.dim
                if h.touches < (reached << h.backoff):
                    return 1.0
            self._l1_lazy_recount(c, denom)
            if h.lazy:
                self.w_norm[c] = sqrt(h.bn2) / denom
                return 1.0
        wnorm = sqrt(h.n2) / denom
        if wnorm <= L1_HEAP_DROP * self.radius:
            # (an average's flags are exact here: the pops folded every fallen coordinate)
            h.lazy = True
            h.bbase = h.base  # the heap's sums are about thr: exact, with the margin above
            h.bn2 = h.n2 if h.n2 > 0.0 else 0.0
            h.touches = 0
            h.backoff = 0
            h.n = 0
            h.n_act = h.s1 = h.n2 = h.peak = 0.0
        self.w_norm[c] = self.radius if wnorm > self.radius else wnorm
        if not isfinite(wnorm):
            # the sums of squares overflowed (|lambda_j| near 1e154 and more: sample
            # weights of 1e308): the factor from the norm counted exactly, scaled
            return self._l1_overflowed_factor(c, denom)
        return self.radius / wnorm if wnorm > self.radius else 1.0

    cdef double _l1_overflowed_factor(self, Py_ssize_t c, double denom) noexcept nogil:
        """`_l1_ball_factor` where ||soft(lambda, thr)||^2 leaves the double range: the
        norm as top * sqrt(sum (x_j / top)^2), top the largest active part x_j (two
        sweeps of the coordinates reached, on this rare path only), and the factor
        radius denom / norm in that order."""
        cdef Py_ssize_t i, j, n
        cdef const int64_t* coords
        cdef double top = 0.0, total = 0.0, x
        n = self._sweep(&coords)
        for i in range(n):
            j = coords[i] if coords != NULL else i
            x = fabs(self.block[j, c, 0]) - self.l1_thr
            if x > top:
                top = x
        if top <= 0.0:
            return 1.0
        for i in range(n):
            j = coords[i] if coords != NULL else i
            x = fabs(self.block[j, c, 0]) - self.l1_thr
            if x > 0.0:
                total += (x / top) * (x / top)
        x = self.radius / top / sqrt(total) * denom
        return x if x < 1.0 else 1.0

    def _l1_lazy(self, int c=0):
        """Whether problem c's ball runs without its heap now (a diagnostic for the tests)."""
        return self.heaps != NULL and self.heaps[c].lazy

    def _l1_bound_base(self, int c=0):
        """Problem c's lazy bound's base bbase (0: the bound is ||lambda||^2), NaN with no
        lazy bound (a diagnostic for the tests)."""
        if self.heaps == NULL or not self.heaps[c].lazy:
            return float("nan")
        return self.heaps[c].bbase

    def _l1_heap_entries(self, int c=0):
        """The entries in problem c's heap, live and dead (a diagnostic for the tests)."""
        return self.heaps[c].n if self.heaps != NULL else 0

    cdef void _l1_lazy_recount(self, Py_ssize_t c, double denom) noexcept nogil:
        """A lazy problem whose bound failed, or is due to count again: ||soft(lambda,
        thr)||^2 and ||lambda||^2 counted exactly (over the coordinates reached); lazy
        again if the ball is far from binding and the count was paid for, from bbase = 0
        when ||lambda|| leaves room within the radius (L1_ZERO_BASE), else from thr (and
        the next look for that room twice as far off); else its heap built
        (`_l1_ball_factor`)."""
        cdef L1Heap* h = self.heaps + c
        cdef Py_ssize_t i, j, n
        cdef const int64_t* coords
        cdef double thr = self.l1_thr, a, lam, n2 = 0.0, m2 = 0.0
        n = self._sweep(&coords)
        for i in range(n):
            j = coords[i] if coords != NULL else i
            lam = self.lam[j, c]
            m2 += lam * lam
            a = fabs(lam) - thr
            if a > 0.0:
                n2 += a * a
        self.n_l1_recounts += 1
        if h.touches >= n and sqrt(n2) / denom <= L1_HEAP_BUILD * self.radius:
            if sqrt(m2) / denom <= L1_ZERO_BASE * self.radius:
                h.bbase = 0.0
                h.bn2 = m2
                h.backoff = 0
            else:
                h.bbase = thr
                h.bn2 = n2
                h.backoff = h.backoff + 1 if h.backoff < 30 else 30
            h.touches = 0
            return
        self._l1_build_heap(c, coords, n)

    cdef int _l1_build_heap(self, Py_ssize_t c, const int64_t* coords,
                            Py_ssize_t n) noexcept nogil:
        """Problem c's heap afresh from lambda over the n coordinates in coords (NULL:
        0 .. n - 1): those above thr, then their sums and norm exactly (`_l1_recount`); its
        lazy mode off (`_l1_ball_factor` turns it on again). An average's coordinates that
        fell to the threshold without a heap (the factor 1 since) are folded first, in
        closed form: the heap's pops fold the others as they fall. 1 when out of memory."""
        cdef L1Heap* h = self.heaps + c
        cdef Py_ssize_t i, j
        cdef double a
        cdef double* f
        cdef int failed = 0
        h.lazy = False
        h.n = 0
        for i in range(n):
            j = coords[i] if coords != NULL else i
            f = &self.block[j, c, 0]
            a = fabs(f[0])
            if a > self.l1_thr:
                f[self.off_key] = a
                failed |= _l1_push(h, a, j)
                continue
            f[self.off_key] = 0.0  # none live (a key left from an earlier heap is not)
            if self.off_on > 0 and f[self.off_on] != 0.0:
                f[self.off_acc] = l1_folded_total(f[0], f[self.off_acc], 1.0, self.cum[c],
                                                  self.cum2[c], self.l1_thr, self.l1_sum_t,
                                                  self.sigma, self.l1, self.iterate)
                f[self.off_on] = 0.0
        self._l1_recount(c)
        return failed

    cdef void _l1_recount(self, Py_ssize_t c) noexcept nogil:
        """Problem c's heap without its dead entries (re-heapified), and its s1, s2,
        n_act and norm counted exactly: O(entries), after as many touches or pops, or
        when the running norm cancelled."""
        cdef L1Heap* h = self.heaps + c
        cdef Py_ssize_t i, n = 0
        cdef double a, thr = self.l1_thr, s1 = 0.0, n2 = 0.0
        cdef double* f
        self.n_l1_recounts += 1
        for i in range(h.n):
            f = &self.block[h.j[i], c, 0]
            if f[self.off_key] != h.key[i]:
                continue  # dead
            a = fabs(f[0])
            if a <= thr:  # (not after the pops: every live key is above thr)
                f[self.off_key] = 0.0
                continue
            # its key afresh (a live key may lag |lambda_j|), the field negative until
            # the loop ends: a second entry of the same key (the pop of one keyed it
            # again at the value of the other) is not counted twice
            f[self.off_key] = -a
            h.key[n] = a
            h.j[n] = h.j[i]
            n += 1
            s1 += a - thr
            n2 += (a - thr) * (a - thr)
        h.n = n
        for i in range(n):
            self.block[h.j[i], c, self.off_key] = h.key[i]
        i = n // 2
        while i > 0:
            i -= 1
            _l1_sift_down(h, i)
        h.base = thr
        h.s1 = s1
        h.n_act = <double>n
        h.n2 = n2
        h.peak = n2

    cdef void _l1q_recount(self, Py_ssize_t c) noexcept nogil:
        """l1, p < 2: problem c's sums S_k counted exactly about the current threshold
        (O(coordinates reached), _l1q.pxd)."""
        cdef L1Q fresh
        cdef Py_ssize_t i, j, n
        cdef const int64_t* coords
        cdef double top = 0.0
        fresh.thr0 = self.l1_thr
        fresh.s0 = fresh.s1 = fresh.s2 = 0.0
        fresh.outgrown = 0
        n = self._sweep(&coords)
        for i in range(n):
            j = coords[i] if coords != NULL else i
            if fabs(self.lam[j, c]) > top:
                top = fabs(self.lam[j, c])
        # the mirror map's window about the largest active part (_l1q.pxd)
        fresh.m = mirror_scale(self.mm, top - fresh.thr0 if top > fresh.thr0 else 0.0)
        fresh.inv_m = 1.0 / fresh.m
        for i in range(n):
            j = coords[i] if coords != NULL else i
            l1q_add(&fresh, fabs(self.lam[j, c]), self.mm, 1.0)
        self.l1q[c] = fresh
        self.n_l1q_recounts += 1

    cdef void _l1q_check(self) noexcept nogil:
        """l1, p < 2, after the threshold moved: count N again where the estimate's
        error bound passed l1q_tol() (_l1q.pxd)."""
        cdef Py_ssize_t c
        cdef double bound, n
        for c in range(self.n_problems):
            n = l1q_estimate(self.l1q + c, self.l1_thr, self.q, &bound)
            # the estimate's error, a term past the window (bound infinite), or every
            # active part below m / r_hi (the window's other side; an empty set stays)
            if bound > self.l1q_tol or (0.0 < n < self.mm.norm_low):
                self._l1q_recount(c)

    cdef double _l1q_scale(self, Py_ssize_t c, double denom) noexcept nogil:
        """l1, p < 2: s with w_j = s sgn(lambda_j) ((|lambda_j| - thr)_+ / m)^(q-1), i.e.
        grad r*(u / denom) for u = soft(lambda, thr): m N^((2-q)/q) / ((q - 1) denom), times
        the ball's factor, N = ||u / m||_q^q from its estimate (_l1q.pxd: an upper bound, so
        that on the ball ||w||_p <= radius)."""
        cdef double bound, s, wnorm
        cdef double n = l1q_estimate(self.l1q + c, self.l1_thr, self.q, &bound)
        if n <= 0.0:
            if self.bounded:
                self.w_norm[c] = 0.0
            return 0.0
        s = self.l1q[c].m * exp(log(n) * (2.0 - self.q) / self.q) / ((self.q - 1.0) * denom)
        if self.bounded:
            wnorm = (self.p - 1.0) * self.l1q[c].m * exp(log(n) / self.q) / denom
            if wnorm > self.radius:
                s *= self.radius / wnorm
                if not (isfinite(wnorm) and isfinite(s)):
                    s = _projected_scale(self.radius, n, self.q)
            self.w_norm[c] = self.radius if wnorm > self.radius else wnorm
        return s

    def _l1q_norm_sum(self, int c=0, bint exact=False):
        """l1, p < 2: N(thr) = sum_j (|lambda_j| - thr)_+^q of problem c as the state
        estimates it (the scale's), or counted exactly (a diagnostic for the tests)."""
        cdef double bound
        if self.l1q == NULL:
            raise ValueError("only a state with l1 > 0 and p < 2 keeps N(thr) this way")
        if exact:
            x = np.abs(np.asarray(self.lam_a)[:, c]) - self.l1_thr
            return float(np.sum((x[x > 0] / self.l1q[c].m) ** self.q)) * self.l1q[c].m ** self.q
        return l1q_estimate(self.l1q + c, self.l1_thr, self.q, &bound) * self.l1q[c].m ** self.q

    cdef void _l1_advance(self) noexcept nogil:
        # (thr is set only after the pops: the sums removed are about the old base)
        """After t moved: the new threshold; each problem's coordinates that fell to it
        leave the active set (their lazy average settled with C and C2 as they stand, the
        sums of the steps they were active in); the norm of soft(lambda, thr)."""
        cdef Py_ssize_t c, j
        cdef L1Heap* h
        cdef double thr, a, d
        cdef double* f
        cdef bint folded = self.off_on > 0
        thr = self._denom(self.t) * self.l1 / self.sigma
        if self.heaps == NULL:
            self.l1_thr = thr
            if self.l1q != NULL:
                self._l1q_check()
            return
        for c in range(self.n_problems):
            h = self.heaps + c
            while h.n > 0 and h.key[0] <= thr:
                j = h.j[0]
                f = &self.block[j, c, 0]
                a = fabs(f[0])
                if f[self.off_key] == h.key[0] and a > thr:
                    # live, its key lagging |lambda_j|: still active, again at its value
                    h.key[0] = a
                    f[self.off_key] = a
                    _l1_sift_down(h, 0)
                    continue
                if f[self.off_key] == h.key[0]:
                    if folded:  # it was active up to the last step: C and C2 as they stand
                        f[self.off_acc] += f[0] * self.cum[c] - copysign(self.cum2[c], f[0])
                        f[self.off_on] = 0.0
                    a -= h.base
                    h.s1 -= a
                    h.n2 -= a * a
                    h.n_act -= 1.0
                    f[self.off_key] = 0.0  # no entry of it is live now
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
        self.l1_thr = thr
        for c in range(self.n_problems):
            h = self.heaps + c
            if h.n > 2 * <Py_ssize_t>h.n_act + 1024:
                self._l1_recount(c)  # dead entries as many as live ones: O(1) amortized
            elif h.n_act <= 0.0:
                h.n2 = h.s1 = h.peak = 0.0
            elif not (h.n2 * L1_CANCEL > h.peak):
                self._l1_recount(c)  # it cancelled below its peak: count it exactly

    cdef void _upkeep_norms(self, int* need_rescale, int* moved) noexcept nogil:
        """After a step or a merged round, the l_q map's upkeep (_mirror.pxd): recount N
        where it cancelled below its peak, refresh M where lambda outgrew it (or every
        coordinate fell below M / r_hi), clamp N's rounding below 0, and recount N
        exactly every MIRROR_RECOUNT * span coordinate updates."""
        cdef Py_ssize_t c
        if not self.need_norm:
            return
        for c in range(self.n_problems):
            if moved[c] and not need_rescale[c] and mirror_cancelled(self.norm_sum[c],
                                                                     self.norm_peak[c]):
                self._exact_norm(c, False)  # then tested against norm_low as it is
            if need_rescale[c] or (moved[c] and mirror_refresh_due(self.mm, self.norm_sum[c],
                                                                   False)):
                self._exact_norm(c, True)
            elif self.norm_sum[c] < 0.0:
                self.norm_sum[c] = 0.0
            if self.norm_sum[c] > self.norm_peak[c]:
                self.norm_peak[c] = self.norm_sum[c]
        if mirror_drift_due(self.touches_since_exact, self.span):
            self.touches_since_exact = 0
            for c in range(self.n_problems):
                self._exact_norm(c, False)

    cdef void _end_steps(self, int* need_rescale, int* moved, int64_t steps, double draw,
                         bint add_to_sum) noexcept nogil:
        """After the updates of a step (steps = t_step, draw = 1, add_to_sum) or of a merged
        round of `steps` steps (`_merge.absorb`: draw = steps, its averaged sums merged
        already): t += steps, the upkeep of N and M, the random iterate's reservoir (the
        new iterate kept with probability draw / t), the new scales and lazy sums."""
        cdef Py_ssize_t c, K = self.n_problems
        cdef bint select = False
        cdef double wt, to_sum
        self.t += steps
        self.l1_sum_t = self.t - steps  # C and C2 take the step's terms below
        if self.forgetting:
            # steps is 1 here (forgetting is refused on Dask, whose rounds merge many)
            self.decay *= self.forget
            self.tau = self.forget * self.tau + 1.0
            self.weight_sum += self._step_weight() / self.decay
        if self.l1 > 0.0:
            self._l1_advance()
        self._upkeep_norms(need_rescale, moved)
        if self.forgetting and self.decay < RENORM_BELOW:
            self._renormalize()
        if self.iterate == ITERATE_RANDOM:
            # a reservoir over steps; a merged round's iterate stands for its steps, so
            # the choice can only stop at the ends of rounds there
            select = uniform01(&self.rng) * self.t < draw
            if select:
                self.rnd_t = self.t
        wt = self._step_weight()
        for c in range(K):
            self.s[c] = self._scale_of(c, self.t)
            # the lazy sums weigh w_u by gamma^(T-u) = G_T / G_u: they add s_u / G_u (the
            # scale of lambda~), G_T cancelling in `weights`
            to_sum = wt * self.s[c] / self.decay if self.forgetting else wt * self.s[c]
            self._restart_sum_if_needed(c, to_sum)
            if add_to_sum:
                self.cum[c] += to_sum
                self.cum2[c] += to_sum * self.l1_thr
            if self.need_norm and not self.bounded:  # the ball's: from _scale_of
                self.w_norm[c] = self._w_norm(c, self.t)
            if select:
                self.rnd_ver[c] += 1
                self.rnd_s[c] = self.s[c]
        self.l1_sum_t = self.t

    # ---- read-out ------------------------------------------------------------------------
    def weights(self, str which=None):
        """The (dim, K) weights of the chosen iterate (intercept feature in row 0).

        One pass over the coordinates into the result (`_read_weight`), no temporaries:
        over a hashed space of 2^24, l1's average in vectorized form took 1.9 s and five
        times the result's memory. O(dim K): to score a few rows, `scores` reads their
        coordinates only."""
        return self.weights_of(self.block_a, self.snap_a, self.snapv_a, which)

    def weights_of(self, block, snap=None, snapv=None, str which=None, bint intercept=True):
        """The (n, K) weights of the chosen iterate at n coordinates whose fields are
        `block` (n, K, n_fields: rows of a block like this state's) and, for the random
        iterate, `snap` and `snapv` (n, K), with this state's scalars (its step count,
        scales, running sums, threshold): a coordinate's weight depends on its own
        fields and the scalars only (`_read_weight`), so rows read from a model file in
        slices give the weights of the whole state (`onlinepgs.model_io.reported`) bit
        for bit. ``intercept``: the first row is coordinate 0, the intercept's (an l1
        average reports it off the support)."""
        it = self.iterate if which is None else ITERATES[which]
        if it != self.iterate and it != ITERATE_LAST:
            raise ValueError("this state keeps only the last iterate and its own "
                             f"{self.config()['iterate']!r} iterate")
        cdef const double[:, :, ::1] blk = np.ascontiguousarray(block, dtype=np.float64)
        if blk.shape[1] != self.n_problems or blk.shape[2] != self.n_fields:
            raise ValueError(f"block has shape {np.shape(block)}, expected (n, "
                             f"{self.n_problems}, {self.n_fields})")
        cdef Py_ssize_t n = blk.shape[0], j
        cdef const double[:, ::1] sn
        cdef const int64_t[:, ::1] sv
        cdef Readout rd = _readout(self, it)
        out = np.zeros((n, self.n_problems))
        if n == 0:
            return out
        cdef double[:, ::1] W = out
        rd.pt.blk = &blk[0, 0, 0]
        rd.pt.dim = n
        if rd.kind == READ_RANDOM:
            sn = np.ascontiguousarray(snap, dtype=np.float64).reshape(n, self.n_problems)
            sv = np.ascontiguousarray(snapv, dtype=np.int64).reshape(n, self.n_problems)
            rd.pt.snap = &sn[0, 0]
            rd.pt.snapv = &sv[0, 0]
        with nogil:
            _read_all(rd, n, &W[0, 0])
            if not intercept and rd.kind == READ_SUMS and rd.pt.kind == PART_L1AVG:
                # row 0 is no intercept here: on the last iterate's support like the rest
                for j in range(self.n_problems):
                    if fabs(blk[0, j, 0]) <= rd.pt.thr[0]:
                        W[0, j] = 0.0
        return out

    def scores(self, data, indices, indptr):
        """The (rows, K) scores ``<w, x> + intercept`` of CSR rows (data, indices, indptr)
        by the reported iterate, read from the lazy state at the rows' coordinates only:
        O(nnz K), whatever the width, nothing settled, the GIL released.

        The scores of the model `weights()` gives, bit for bit: each row's products summed
        in its order from 0, then ``intercept_scaling`` times coordinate 0's weight added
        (0 without ``fit_intercept``), as scipy's CSR product and `LinearModel.scores` do.
        Columns at or past the state's features weigh 0.

        Examples
        --------
        >>> import numpy as np
        >>> from onlinepgs._core import PGSState
        >>> st = PGSState(iterate="average", n_features=3)
        >>> x, y = np.array([1.0, 0.0, 2.0]), np.ones(1)
        >>> st.run(x, None, None, 3, y, np.ones(1), np.arange(1), True)
        >>> W = st.weights()
        >>> data, indices, indptr = np.array([1.0, 2.0]), np.array([0, 2]), np.array([0, 2])
        >>> bool(st.scores(data, indices, indptr)[0, 0] == 1.0 * W[1, 0] + 2.0 * W[3, 0] + W[0, 0])
        True
        """
        cdef const double[::1] d = np.ascontiguousarray(data, dtype=np.float64)
        offsets = np.ascontiguousarray(indptr, dtype=np.int64)
        cdef const int64_t[::1] ptr = offsets
        cdef const int32_t[::1] ind32
        cdef const int64_t[::1] ind64
        cdef Py_ssize_t i, n_rows = ptr.shape[0] - 1
        cdef Readout rd = _readout(self, self.iterate)
        cdef const double* vals = &d[0] if d.shape[0] else NULL
        cdef double[:, ::1] out
        if n_rows < 0:
            raise ValueError("indptr must hold n_rows + 1 offsets")
        result = np.empty((n_rows, self.n_problems))
        if n_rows == 0:
            return result
        for i in range(n_rows):
            if ptr[i] > ptr[i + 1]:
                raise ValueError("indptr must not decrease")
        if ptr[0] < 0 or ptr[n_rows] > d.shape[0]:
            raise ValueError("indptr points past data")
        out = result
        indices = np.asarray(indices)
        if indices.dtype == np.int32:
            ind32 = np.ascontiguousarray(indices)
            if ind32.shape[0] < ptr[n_rows]:
                raise ValueError("indices is shorter than data")
            with nogil:
                _read_scores(rd, vals, &ind32[0] if ind32.shape[0] else NULL, &ptr[0], n_rows,
                             self.dim - 1, self.fit_intercept, self.intercept_scaling,
                             &out[0, 0])
        else:
            ind64 = np.ascontiguousarray(indices, dtype=np.int64)
            if ind64.shape[0] < ptr[n_rows]:
                raise ValueError("indices is shorter than data")
            with nogil:
                _read_scores(rd, vals, &ind64[0] if ind64.shape[0] else NULL, &ptr[0], n_rows,
                             self.dim - 1, self.fit_intercept, self.intercept_scaling,
                             &out[0, 0])
        return result

    def progressive_sums(self):
        """The progressive sums since the state was created: each row scored before it
        trains (before its step, for a mini-batch) by the reported iterate (the state's
        `iterate`, what `weights()` returns) and by the last iterate.

        Returns
        -------
        dict
            ``n_examples``, ``sum_weight``; ``sum_weighted_loss`` and ``n_mistakes``, the
            reported iterate's sum of w_i times the row's loss (summed over the problems;
            a coupled ``multi_class``'s one loss of the K scores)
            and its mispredicted rows (classifiers; 0 otherwise); and the last iterate's,
            ``sum_weighted_loss_last`` and ``n_mistakes_last``. The reported ones are NaN
            where unknown: a state saved before they were kept (version < 4).

        Examples
        --------
        >>> import numpy as np
        >>> from onlinepgs._core import PGSState
        >>> st = PGSState(iterate="average", n_features=1)
        >>> x, y = np.ones(3), np.ones(3)
        >>> st.run(x, None, None, 1, y, np.ones(3), np.arange(3), True)
        >>> sums = st.progressive_sums()
        >>> sums["n_examples"], sums["n_mistakes"], sums["n_mistakes_last"]  # w_0 = 0 errs
        (3, 1, 1)
        """
        unknown = self.sum_weighted_loss_reported != self.sum_weighted_loss_reported
        return {"n_examples": int(self.n_examples), "sum_weight": float(self.sum_weight),
                "sum_weighted_loss": float(self.sum_weighted_loss_reported),
                "n_mistakes": float("nan") if unknown else int(self.n_mistakes_reported),
                "sum_weighted_loss_last": float(self.sum_weighted_loss),
                "n_mistakes_last": int(self.n_mistakes)}

    def stats_dict(self):
        """Online statistics (paper Section VI). ``progressive_loss`` and
        ``progressive_mistakes`` are the reported iterate's (see `progressive_sums`),
        ``progressive_loss_last`` and ``progressive_mistakes_last`` the last iterate's.
        With forgetting the regret bound, the optimization error bound and the online
        duality gap are NaN: they bound the uniformly weighted objective over all steps,
        which the iterates then do not minimize (docs/design/forgetting.md); the
        progressive statistics stay."""
        T = self.t
        regret = np.asarray(self.regret_a).copy()
        if self.forgetting:
            regret[...] = np.nan
        sums = self.progressive_sums()
        return dict(
            n_examples=int(self.n_examples),
            n_steps=int(T),
            sum_weight=float(self.sum_weight),
            progressive_loss=(sums["sum_weighted_loss"] / self.sum_weight
                              if self.sum_weight > 0 else float("nan")),
            progressive_mistakes=sums["n_mistakes"],
            progressive_loss_last=(self.sum_weighted_loss / self.sum_weight
                                   if self.sum_weight > 0 else float("nan")),
            progressive_mistakes_last=int(self.n_mistakes),
            regret_bound=regret,
            optimization_error_bound=regret / T if T else np.full_like(regret, np.inf),
            **self._online_duality(),
        )

    def _online_duality(self):
        """The solver's own primal-dual pair over the T steps so far (see the README).

        F_T(w) = sigma r(w) + (1/T) sum_t mean_{i in A_t} sw_i l(<w, x_i>; y_i) is the
        objective over the steps seen. lambda_T / T is X^T a / m for the dual point
        a_i = -sw_i l'(<w_{t-1}, x_i>; y_i) of that objective, so
        D_T = -(1/T) sum_t mean_i sw_i l*(l'(z_i)) - sigma r*(lambda_T / (sigma T)) <= min F_T
        (weak duality), and the progressive objective (1/T) sum_t F_t(w_{t-1}) minus D_T
        bounds the average regret against the best fixed w.

        A coupled ``multi_class`` (one loss of the K scores, r(W) = sum_k r(w_k)) shares
        each row's loss l and conjugate term l*(g) = <z, g> - l out over the K problems
        (l / K and z_k g_k - l / K): the sums over the problems are the coupled
        objective's primal, dual and gap, the shares alone mean nothing (the estimators
        report the sums; docs/design/multiclass.md).
        """
        K = self.n_problems
        T = <double>self.t
        if self.t == 0 or self.forgetting:
            nan = np.full(K, np.nan)
            return dict(online_objective=nan, dual_objective=nan.copy(),
                        online_duality_gap=nan.copy())
        primal = (self.sigma * np.asarray(self.sum_reg_a) + np.asarray(self.sum_step_loss_a)) / T
        dual = np.empty(K)
        for c in range(K):
            if not self.need_norm:
                dual[c] = np.nan
                continue
            dual[c] = -self.sum_conj_a[c] / T - self.sigma * reg_conjugate(
                self._norm_q(c) / (self.sigma * T), self.p,
                self.radius if self.bounded else INFINITY)
        return dict(online_objective=primal, dual_objective=dual,
                    online_duality_gap=primal - dual)

    # ---- sigma="auto" (onlinepgs._race): a run forked at another sigma ----------------
    def with_sigma(self, double sigma):
        """A copy of this state with regularization weight `sigma`, continuing from the
        same dual state: lambda, t, the statistics and the averaged iterate so far are
        kept, and the next steps take the iterates ``grad r*(lambda / ((t + 1) sigma))``.

        The lazy average's running sum holds scales of the old sigma, so it is settled
        first (its sums moved into acc: the average itself does not change); the scale
        s and the iterate's norm are recomputed for the new sigma, and an "auto" radius
        is that of the new sigma over the same rows. The random iterate's chosen
        iterate keeps its own scale.
        """
        cdef PGSState new
        cdef Py_ssize_t c
        if not (sigma > 0.0 and isfinite(sigma)):
            raise ValueError(f"sigma must be a positive finite number, got {sigma!r}")
        new = self.copy()
        for c in range(new.n_problems):
            new._settle_all(c)
        new.sigma = sigma
        # l1: the threshold moves with sigma (down for a larger one), so the active sets
        # are found again (the lazy sums were settled above at the old sigma)
        new._l1_rebuild()
        if new.radius_auto and new.loss0_max > 0.0:
            new.radius = sqrt(new.loss0_max) * sqrt(2.0 * (new.p - 1.0) / sigma)
        if new.t > 0:
            for c in range(new.n_problems):
                new.s[c] = new._scale_of(c, new.t)
                if new.need_norm and not new.bounded:
                    new.w_norm[c] = new._w_norm(c, new.t)
        return new

    # ---- distributed rounds (onlinepgs.dask): the merge of lanes lives in _merge.pyx ----
    def fork(self):
        """A lane's starting state for one round of distributed training (`_merge.fork`)."""
        return _merge_module().fork(self)

    def delta_from(self, PGSState base, coords=None):
        """A lane's own changes since it forked `base`, in one pass (`_merge.delta_from`)."""
        return _merge_module().delta_from(self, base, coords)

    def sync_from(self, PGSState base, coords=None):
        """Make this lane state, kept from a round, what ``base.fork()`` would return
        (`_merge.sync_from`)."""
        _merge_module().sync_from(self, base, coords)

    def absorb(self, int64_t steps, double factor, list deltas, changed=None):
        """Merge one round of lanes into this, the driver's global state (`_merge.absorb`)."""
        _merge_module().absorb(self, steps, factor, deltas, changed)

    # ---- the pass -------------------------------------------------------------------------
    def run(self, data, indices, indptr, Py_ssize_t n_cols, const double[::1] y,
            const double[::1] sample_weight, const int64_t[::1] order, bint classifier,
            row_power_sums=None):
        """One pass of Figure 1 over the rows in `order` (k rows a step, a last short step).

        CSR input: data/indices/indptr; dense C-contiguous input: indices is None.
        y holds +-1 (binary), the class index (multiclass) or the target (regression).
        row_power_sums, optional: sum_j |x_ij|^q for every row (see `row_power_sums`),
        so the regret statistic's powers need not be taken again in the loop.
        """
        cdef const double[::1] rps
        cdef const double* rps_ptr = NULL
        if row_power_sums is not None:
            rps = row_power_sums
            if rps.shape[0] != y.shape[0]:
                raise ValueError("row_power_sums must have one entry per row")
            rps_ptr = &rps[0] if rps.shape[0] else NULL
        cdef const double[::1] d = data
        cdef const int32_t[::1] ind32
        cdef const int64_t[::1] ind64
        cdef int64_t[::1] ptr64
        cdef Core core
        cdef Rep rep
        if n_cols + 1 > self.dim:
            raise ValueError("state dimension too small for the data")
        core = self._core()
        rep = self._rep()
        if indices is None:
            with nogil:
                _note_pass(&self.seen, core.lam, core.K, core.S, <const int32_t*>NULL,
                           <int64_t*>NULL, order, n_cols, True, self.fit_intercept)
                _run_pass(self, &d[0] if d.shape[0] else NULL, <const int32_t*>NULL, <int64_t*>NULL,
                          n_cols, y, sample_weight, order, classifier, True, rps_ptr, rep)
            return
        ptr64 = np.array(indptr, dtype=np.int64)  # writable copy of n_rows + 1 offsets
        if indices.dtype == np.int32:
            ind32 = indices
            with nogil:
                _note_pass(&self.seen, core.lam, core.K, core.S,
                           &ind32[0] if ind32.shape[0] else NULL, &ptr64[0], order, 0,
                           False, self.fit_intercept)
                _run_pass(self, &d[0] if d.shape[0] else NULL,
                          &ind32[0] if ind32.shape[0] else NULL, &ptr64[0], 0,
                          y, sample_weight, order, classifier, False, rps_ptr, rep)
        else:
            ind64 = indices
            with nogil:
                _note_pass(&self.seen, core.lam, core.K, core.S,
                           &ind64[0] if ind64.shape[0] else NULL, &ptr64[0], order, 0,
                           False, self.fit_intercept)
                _run_pass(self, &d[0] if d.shape[0] else NULL,
                          &ind64[0] if ind64.shape[0] else NULL, &ptr64[0], 0,
                          y, sample_weight, order, classifier, False, rps_ptr, rep)




cdef inline double row_power_sum(const double* vals, Py_ssize_t nnz, double q,
                                 int quarters) noexcept nogil:
    """sum_e |x_e|^q = sum_e |x_e| phi_power(|x_e|) over a row's values."""
    cdef double a_buf[MIRROR_CHUNK]
    cdef double ph_buf[MIRROR_CHUNK]
    cdef double total = 0.0
    cdef Py_ssize_t base = 0, n, e
    while base < nnz:
        n = nnz - base if nnz - base < MIRROR_CHUNK else MIRROR_CHUNK
        for e in range(n):
            a_buf[e] = fabs(vals[base + e])
        phi_power_many(a_buf, ph_buf, n, q, quarters)
        for e in range(n):
            total += a_buf[e] * ph_buf[e]
        base += n
    return total


def row_power_sums(const double[::1] data, const int64_t[::1] indptr, double p):
    """sum_j |x_ij|^q (q = p / (p - 1)) of every row of a CSR matrix, by the core's own
    powers (the regret statistic's row norms, taken once for all the epochs of a fit)."""
    cdef Py_ssize_t n_rows = indptr.shape[0] - 1, i
    cdef double q = p / (p - 1.0)
    cdef int quarters = phi_quarters(q)
    out_a = np.zeros(max(n_rows, 0))
    cdef double[::1] out = out_a
    cdef const double* d = &data[0] if data.shape[0] else NULL
    with nogil:
        for i in range(n_rows):
            if indptr[i + 1] > indptr[i]:
                out[i] = row_power_sum(d + indptr[i], indptr[i + 1] - indptr[i], q, quarters)
    return out_a


def _phi_power_check(const double[::1] r, double p):
    """(phi_power, phi_power_many) of every r >= 0 at q = p / (p - 1), for the tests."""
    cdef double q = p / (p - 1.0)
    cdef int quarters = phi_quarters(q)
    cdef Py_ssize_t e, n = r.shape[0]
    scalar_a = np.zeros(n)
    packed_a = np.zeros(n)
    cdef double[::1] scalar = scalar_a, packed = packed_a
    for e in range(n):
        scalar[e] = phi_power(r[e], q, quarters) if r[e] > 0.0 else 0.0
    if n:
        phi_power_many(&r[0], &packed[0], n, q, quarters)
    return scalar_a, packed_a


cdef inline double _projected_scale(double radius, double norm, double q) noexcept nogil:
    """The s of w = s phi on the ball's boundary, radius N^(-1/p) (||phi||_p = N^(1/p),
    p = q / (q - 1)): the projection without M or t, for the rare state whose norm over
    (t + 1) sigma leaves the double range while the projected iterate does not (sample
    weights of 1e308: the usual s * radius / ||w|| collapsed to 0)."""
    return radius * exp(log(norm) * (1.0 - q) / q)


cdef double _apply_row(Core core, const double* vals, const index_t* idx, Py_ssize_t nnz,
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


cdef inline double _soft_clamp(double lam, double thr) noexcept nogil:
    """soft(lam, thr) as lam - clamp(lam, -thr, thr): a min, a max and a subtraction (no
    branch, no fabs/copysign masks), for the margin's loop. The same value as
    `soft_threshold` bit for bit where |lam| > thr (lam -+ thr is sgn(lam) (|lam| - thr)
    exactly: rounding is symmetric); +0 instead of a signed zero below it, which adds
    nothing to a sum either way."""
    cdef double c = lam if lam < thr else thr
    c = c if c > -thr else -thr
    return lam - c


cdef double _sparse_dot_sq_l1(const double* lam, Py_ssize_t stride, double thr,
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


cdef double _sparse_dot_sq_l1avg(const double* blk, Py_ssize_t S, Py_ssize_t off_acc,
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


cdef void _apply_row_l1_heap(Core core, const double* vals, const index_t* idx,
                             Py_ssize_t nnz, double cf) noexcept nogil:
    """`_apply_row_l1` with the heap of a ball that may bind: one loop of
    `_l1_entries_heap` for an average or the last iterate. Called, not inlined
    (`not_inlined`)."""
    if core.off_on > 0:
        _l1_entries_heap(core, vals, idx, nnz, cf, True)
    else:
        _l1_entries_heap(core, vals, idx, nnz, cf, False)


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


cdef void _apply_row_l1_lazy(Core core, const double* vals, const index_t* idx,
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


cdef inline void _prefetch_ahead(Core core, const double* data, const index_t* indices,
                                 const int64_t* indptr, const double* y, const double* sw,
                                 const int64_t[::1] order,
                                 Py_ssize_t n_rows, Py_ssize_t i) noexcept nogil:
    """Hint the cache about the rows after row position i, each one stage further:
    the offsets of row i + 3, the values, indices, label and weight of row i + 2 (its
    offsets came a row earlier), and the state lines that row i + 1 will gather (its
    indices came a row earlier). Shuffled rows are scattered over memory and their coordinates over the
    state, so neither is foreseen by the hardware; the hints only move data, the results
    do not depend on them."""
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


cdef void _run_pass(PGSState self, const double* data, const index_t* indices, int64_t* indptr,
                    Py_ssize_t n_cols, const double[::1] y, const double[::1] sw,
                    const int64_t[::1] order, bint classifier, bint dense,
                    const double* row_xq, Rep rep) noexcept nogil:
    cdef Core core = self._core()
    cdef Py_ssize_t n_rows = order.shape[0], K = self.n_problems
    cdef Py_ssize_t k = self.batch_size, pos = 0, b, bsize, e, c, j, nnz, start, label
    cdef Py_ssize_t n_touched, ti
    cdef int64_t row
    cdef double xv, z, yc, dl, w_i, inv_k, icpt = self.intercept_scaling, ex_loss, cf
    cdef double inv_b, step_w = <double>self.t_step, step_sq = step_w * step_w
    cdef double xq, g, gq, best, l0, lv, b_weight, b_loss, b_wloss, b_loss0
    # one problem, sparse rows: the margin's loop also takes ||x||^2, and <lambda, x> is
    # kept, for a single-row step's N at p = 2 (see `_apply_row`)
    cdef bint one_sparse = K == 1 and not dense and self.l1 == 0.0
    cdef bint use_l1 = self.l1 > 0.0
    cdef bint use_l1q = self.l1q != NULL
    # one problem, sparse rows, l1: the margin of soft(lambda, thr) and ||x||^2 in one
    # loop, a single-row step's lambda by `_apply_row_l1`
    cdef bint one_l1 = K == 1 and not dense and use_l1 and not use_l1q
    cdef double row_dot = 0.0, row_xx = 0.0
    cdef int64_t b_mistakes, top
    cdef double q = self.q, sigma = self.sigma, epsilon = self.epsilon
    cdef int loss_code = self.loss_code
    cdef bint fit_icpt = self.fit_intercept, p2 = self.p_is_two, multiclass = self.multiclass
    cdef bint radius_auto = self.radius_auto
    cdef double loss0_unit = loss_value(loss_code, 0.0, 1.0, epsilon)
    # a coupled multiclass loss (multinomial, Crammer-Singer): the row's K margins, then
    # ONE loss of them whose gradient in the scores gives the K coefficients of the step
    cdef int mc = self.mc_code if (classifier and multiclass) else MC_NONE
    cdef bint coupled = mc != MC_NONE
    cdef double* mc_grad = &self.mc_grad[0]
    cdef double* mc_scores = &self.mc_scores[0]
    cdef double inv_kp = 1.0 / K
    if mc == MC_MULTINOMIAL:
        loss0_unit = log(<double>K)  # l(0; y) = log K: the ball of radius="auto"
    elif mc == MC_CRAMMER_SINGER:
        loss0_unit = 1.0  # max_j [j != y] at z = 0
    cdef double* margins = &self.margins_buf[0]
    cdef double* coefs = &self.coefs[0]
    cdef double* G = &self.grad_acc[0]
    cdef double* s = &self.s[0]
    cdef int* resc = &self.flag_rescale[0]
    cdef int* mov = &self.flag_moved[0]
    cdef double* gqs = &self.step_gq[0]
    cdef double* b_loss_c = &self.b_loss_c[0]
    cdef double* b_conj_c = &self.b_conj_c[0]
    cdef unsigned char* is_touched = &self.is_touched[0]
    cdef int64_t* touched = &self.touched[0]
    cdef const double* vals
    cdef const index_t* idx
    cdef int best_c
    # the reported iterate's progressive sums: each row's margin at the iterate the state
    # reports (the model a user gets), as it was before the row's step, read from the lazy
    # sums at the row's coordinates (`_part_value`: the formulas of `weights`, divided by
    # the weight total of the iterates so far); the last iterate's is z itself
    cdef bint rep_last = rep.last, lane = rep.ref.kind != PART_NONE
    cdef int iterate = self.iterate
    cdef bint rep_random = rep.own.kind == PART_RANDOM or rep.ref.kind == PART_RANDOM
    # one problem, sparse rows, averaged: the margin's loop reads the sums (same lines)
    cdef bint rep_fused = one_sparse and not lane and (rep.own.kind == PART_AVG2
                                                        or rep.own.kind == PART_AVGQ)
    # one problem of sparse rows with l1 and an average: the same, `_sparse_dot_sq_l1avg`
    cdef bint rep_fused_l1 = one_l1 and not lane and rep.own.kind == PART_L1AVG
    # the row kernels of a single-row step: called, not inlined (`not_inlined`)
    cdef double (*apply_row)(Core, const double*, const index_t*, Py_ssize_t, double, int*,
                             bint, double, double) noexcept nogil
    apply_row = _apply_row
    apply_row = <double (*)(Core, const double*, const index_t*, Py_ssize_t, double, int*,
                            bint, double, double) noexcept nogil>not_inlined(<void*>apply_row)
    cdef double (*dot_l1)(const double*, Py_ssize_t, double, const double*, const index_t*,
                          Py_ssize_t, double*) noexcept nogil
    dot_l1 = _sparse_dot_sq_l1
    dot_l1 = <double (*)(const double*, Py_ssize_t, double, const double*, const index_t*,
                         Py_ssize_t, double*) noexcept nogil>not_inlined(<void*>dot_l1)
    cdef double (*dot_l1avg)(const double*, Py_ssize_t, Py_ssize_t, double, double, double,
                             const double*, const index_t*, Py_ssize_t, double*,
                             double*) noexcept nogil
    dot_l1avg = _sparse_dot_sq_l1avg
    dot_l1avg = <double (*)(const double*, Py_ssize_t, Py_ssize_t, double, double, double,
                            const double*, const index_t*, Py_ssize_t, double*,
                            double*) noexcept nogil>not_inlined(<void*>dot_l1avg)
    cdef double inv_w = 1.0, w_total, zr, ex_loss_r, best_r, zr0, rep_dot = 0.0
    cdef double b_wloss_r
    cdef int64_t b_mistakes_r
    cdef int best_rc
    cdef Py_ssize_t acc_rel = core.S, mark_rel = core.S
    if rep.own.kind == PART_AVGQ:  # the sum's and mark's offsets from phi
        acc_rel = self.off_acc - self.off_phi
        mark_rel = self.off_mark - self.off_phi
    elif rep.own.kind == PART_AVG2:
        acc_rel = self.off_acc
    while pos < n_rows:
        bsize = k if n_rows - pos >= k else n_rows - pos
        inv_b = 1.0 / bsize
        inv_k = step_w / bsize  # the gradient's scale (1 / bsize but in a lane)
        if self.forgetting:
            # lambda_t = gamma lambda_{t-1} + g_t is lambda~ += g_t / G_t, G_t = gamma G_{t-1}
            inv_k /= self.decay * self.forget
        for c in range(K):
            resc[c] = 0
            mov[c] = 0
            gqs[c] = 0.0
        b_mistakes = 0
        b_weight = b_loss = b_wloss = 0.0
        b_loss0 = self.loss0_max
        for c in range(K):
            b_loss_c[c] = 0.0
            b_conj_c[c] = 0.0
        b_wloss_r = 0.0
        b_mistakes_r = 0
        if not rep_last and not rep_random:
            w_total = (rep.ref_weight + self.own_weight) if lane else self._average_norm()
            inv_w = 1.0 / w_total if w_total > 0.0 else 0.0  # t = 0: the zero model
        # phase 1: every row of the step at w_{t-1}
        for b in range(bsize):
            row = order[pos + b]
            if dense:
                start = row * n_cols
                nnz = n_cols
            else:
                _prefetch_ahead(core, data, indices, indptr, &y[0], &sw[0], order, n_rows,
                                pos + b)
                start = indptr[row]
                nnz = indptr[row + 1] - start
            vals = data + start
            idx = NULL if dense else indices + start
            if nnz > 0:  # canonical rows: the last index is the largest
                top = (n_cols if dense else <int64_t>idx[nnz - 1] + 1) + 1
                if top > self.span:
                    self.span = top
            w_i = sw[row]
            ex_loss = 0.0
            label = <Py_ssize_t>y[row] if (classifier and multiclass) else 0
            best = 0.0
            best_c = 0
            ex_loss_r = 0.0
            best_r = 0.0
            best_rc = 0
            zr0 = 0.0
            for c in range(K):
                if rep_fused:
                    # coordinate j + 1 of the block: phi (lambda for p = 2) and the sums
                    if rep.own.kind == PART_AVG2:
                        z = sparse_dot_sq_avg2(core.phi + core.S, acc_rel, core.S, vals, idx,
                                               nnz, &row_xx, &rep_dot)
                        rep_dot = core.cum[0] * z - rep_dot
                    else:
                        z = sparse_dot_sq_avgq(core.phi + core.S, acc_rel, mark_rel, core.S,
                                               core.cum[0], vals, idx, nnz, &row_xx, &rep_dot)
                    row_dot = z
                elif one_sparse:
                    z = sparse_dot_sq(core.phi + core.S, core.S, vals, idx, nnz, &row_xx)
                    row_dot = z
                elif use_l1q:
                    z = _margin_l1q(core.lam, K, core.S, c, vals, idx, nnz, dense,
                                    self.l1_thr, self.l1q[c].inv_m, q, self.quarters)
                elif rep_fused_l1:
                    z = dot_l1avg(core.lam + core.S, core.S, self.off_acc, self.l1_thr,
                                  core.cum[0], core.cum2[0], vals, idx, nnz, &row_xx,
                                  &rep_dot)
                elif one_l1:
                    z = dot_l1(core.lam + core.S, core.S, self.l1_thr, vals, idx, nnz,
                               &row_xx)
                elif use_l1:
                    z = _margin_l1(core.lam, K, core.S, c, vals, idx, nnz, dense,
                                   self.l1_thr)
                else:
                    z = _margin(core.phi, K, core.S, c, vals, idx, nnz, dense)
                if use_l1q:
                    if fit_icpt:
                        z += l1q_link(core.lam[c * core.S], self.l1_thr,
                                      self.l1q[c].inv_m, q, self.quarters) * icpt
                elif use_l1:
                    if fit_icpt:
                        z += soft_threshold(core.lam[c * core.S], self.l1_thr) * icpt
                elif fit_icpt:
                    z += core.phi[c * core.S] * icpt
                z *= s[c]
                margins[c] = z
                if classifier and multiclass:
                    yc = 1.0 if c == label else -1.0
                    if c == 0 or z > best:
                        best = z
                        best_c = <int>c
                else:
                    yc = y[row]
                if not rep_last:  # the last iterate's: the step's own sums, below
                    if not (rep_fused or rep_fused_l1):
                        rep_dot = (_part_dot(rep.own, c, vals, idx, nnz, dense)
                                   + _part_dot(rep.ref, c, vals, idx, nnz, dense))
                    zr = rep_dot
                    if fit_icpt:
                        zr += icpt * (_part_value(rep.own, 0, c) + _part_value(rep.ref, 0, c))
                    zr *= inv_w
                    if coupled:
                        mc_scores[c] = zr  # its loss: once the K scores are known
                    else:
                        ex_loss_r += loss_value(loss_code, zr, yc, epsilon)
                    if c == 0:
                        zr0 = zr
                    if c == 0 or zr > best_r:  # the multiclass prediction: the first argmax
                        best_r = zr
                        best_rc = <int>c
                if coupled:
                    continue  # the loss of the K margins: after this loop
                lv = loss_and_derivative(loss_code, z, yc, epsilon, &dl)
                ex_loss += lv
                if not isfinite(dl):
                    # a run diverging on R^n (unbounded gradient): stop before this step
                    self.diverged = True
                    self.diverged_row = row
                    return
                coefs[b * K + c] = dl * w_i * inv_k
                # the dual estimate's a_i = -w_i l'(z_i), whose conjugate term is
                # w_i l*(l'(z_i)) = w_i (z_i l'(z_i) - l(z_i)) (Fenchel-Young equality)
                b_loss_c[c] += w_i * lv
                b_conj_c[c] += w_i * (z * dl - lv)
                if radius_auto:
                    # l(0; +-1) is one constant for the classification losses
                    l0 = w_i * (loss0_unit if classifier else
                                loss_value(loss_code, 0.0, yc, epsilon))
                    if l0 > b_loss0:
                        b_loss0 = l0
            if coupled:
                # one loss of the K margins, its gradient softmax(z) - e_y (multinomial) or
                # e_j* - e_y (Crammer-Singer) in the scores: problem c's coefficient
                lv = mc_loss_grad(mc, margins, K, label, mc_grad)
                if not isfinite(lv):  # a margin overflowed: stop before this step
                    self.diverged = True
                    self.diverged_row = row
                    return
                ex_loss = lv
                if not rep_last:
                    ex_loss_r = mc_loss_grad(mc, mc_scores, K, label, NULL)
                for c in range(K):
                    coefs[b * K + c] = mc_grad[c] * w_i * inv_k
                    # the online dual estimate: the row's loss counted once and its
                    # conjugate term l*(grad) = <z, grad> - l (Fenchel-Young), shared out
                    # so that the K problems' figures add up to the coupled objective's
                    b_loss_c[c] += w_i * lv * inv_kp
                    b_conj_c[c] += w_i * (margins[c] * mc_grad[c] - lv * inv_kp)
                if radius_auto and w_i * loss0_unit > b_loss0:
                    b_loss0 = w_i * loss0_unit
            if classifier:
                if multiclass:
                    if best_c != label:
                        b_mistakes += 1
                    if best_rc != label and not rep_last:
                        b_mistakes_r += 1
                else:
                    if (margins[0] > 0.0) != (y[row] > 0.0):
                        b_mistakes += 1
                    if (zr0 > 0.0) != (y[row] > 0.0) and not rep_last:
                        b_mistakes_r += 1
            b_weight += w_i
            b_loss += ex_loss
            b_wloss += w_i * ex_loss
            b_wloss_r += w_i * ex_loss_r
        # the step will be applied: commit its rows to the statistics
        self.n_examples += bsize
        self.n_mistakes += b_mistakes
        self.sum_weight += b_weight
        self.sum_loss += b_loss
        self.sum_weighted_loss += b_wloss
        if rep_last:  # the reported iterate is the last one: the same sums
            b_wloss_r = b_wloss
            b_mistakes_r = b_mistakes
        self.sum_weighted_loss_reported += b_wloss_r
        self.n_mistakes_reported += b_mistakes_r
        for c in range(K):
            # r(w_{t-1}) from ||w_{t-1}||_p (NaN without N: p = 2 on R^n)
            self.sum_reg[c] += self.w_norm[c] * self.w_norm[c] / (2.0 * (self.p - 1.0))
            self.sum_step_loss[c] += inv_b * b_loss_c[c]
            self.sum_conj[c] += inv_b * b_conj_c[c]
        if b_loss0 > self.loss0_max:
            self.loss0_max = b_loss0
            self.radius = sqrt(2.0 * (self.p - 1.0) * b_loss0 / sigma)
            if self.radius == INFINITY:
                # the square overflows where the radius itself does not (sample weights
                # near the double range): take the roots apart
                self.radius = sqrt(b_loss0) * sqrt(2.0 * (self.p - 1.0) / sigma)
        # phase 2: lambda <- lambda - g_t, touching only the step's coordinates
        if bsize == 1:
            # vals, idx, nnz still describe the step's single row
            xq = 0.0
            if one_sparse:
                cf = coefs[0]
                if cf != 0.0:
                    xq = apply_row(core, vals, idx, nnz, cf, resc, row_xq == NULL, row_dot,
                                   row_xx)
                    if row_xq != NULL:
                        xq = row_xq[row]
                    mov[0] = 1
            elif one_l1:
                cf = coefs[0]
                if cf != 0.0:
                    _apply_row_l1(core, vals, idx, nnz, cf)
                    mov[0] = 1
                # p = 2: sum_j x_j^2, from the margin's loop
                xq = row_xq[row] if row_xq != NULL else row_xx
            else:
                if row_xq != NULL:
                    xq = row_xq[row]
                elif not p2:
                    xq = row_power_sum(vals, nnz, q, self.quarters)
                for e in range(nnz):
                    xv = vals[e]
                    if xv == 0.0:
                        continue
                    j = (e if dense else <Py_ssize_t>idx[e]) + 1
                    if p2 and row_xq == NULL:
                        xq += xv * xv
                    for c in range(K):
                        if coefs[c] != 0.0:
                            _touch(core, j, c, coefs[c] * xv, &resc[c])
                            mov[c] = 1
            if fit_icpt:
                xq += icpt * icpt if p2 else pow(fabs(icpt), q)
                for c in range(K):
                    if coefs[c] != 0.0:
                        _touch(core, 0, c, coefs[c] * icpt, &resc[c])
                        mov[c] = 1
            for c in range(K):
                if coefs[c] != 0.0:
                    gqs[c] = (coefs[c] * coefs[c] if p2 else pow(fabs(coefs[c]), q)) * xq
            self.touches_since_exact += nnz + 1
        else:
            n_touched = 0
            for b in range(bsize):
                row = order[pos + b]
                if dense:
                    start = row * n_cols
                    nnz = n_cols
                else:
                    start = indptr[row]
                    nnz = indptr[row + 1] - start
                for e in range(-1 if fit_icpt else 0, nnz):
                    if e < 0:
                        j = 0
                        xv = icpt
                    else:
                        xv = data[start + e]
                        if xv == 0.0:
                            continue
                        j = (e if dense else <Py_ssize_t>indices[start + e]) + 1
                    if not is_touched[j]:
                        is_touched[j] = 1
                        touched[n_touched] = j
                        n_touched += 1
                    for c in range(K):
                        G[j * K + c] += coefs[b * K + c] * xv
            for ti in range(n_touched):
                j = touched[ti]
                is_touched[j] = 0
                for c in range(K):
                    g = G[j * K + c]
                    if g != 0.0:
                        G[j * K + c] = 0.0
                        gqs[c] += g * g if p2 else pow(fabs(g), q)
                        _touch(core, j, c, g, &resc[c])
                        mov[c] = 1
            self.touches_since_exact += n_touched
        self._end_steps(resc, mov, self.t_step, 1.0, True)
        if lane:
            # the weight the step's iterate got in the lane's own sums (`_end_steps`)
            self.own_weight += self._step_weight()
        for c in range(K):
            gq = gqs[c] if p2 else (pow(gqs[c], 2.0 / q) if gqs[c] > 0.0 else 0.0)
            # ||g_t||_q^2 of the step's own gradient (coefs carry the lane's scale)
            self.regret[c] += 0.5 * gq / (self.t * sigma * step_sq)
        pos += bsize


def multiclass_loss(multi_class, const double[:, ::1] scores, const int64_t[::1] labels):
    """Each row's coupled multiclass loss (`multi_class` "multinomial" or
    "crammer_singer", _multiclass.pxd) at its K scores, for label indices 0..K-1 (the
    streaming engine's held-out rows). ValueError for a label outside 0..K-1."""
    cdef int code = MULTI_CLASS.get(multi_class, MC_NONE)
    cdef Py_ssize_t i, n = scores.shape[0], K = scores.shape[1]
    if code == MC_NONE:
        raise ValueError(f"multiclass_loss is the loss of a coupled multi_class "
                         f"('multinomial' or 'crammer_singer'), got {multi_class!r}")
    if labels.shape[0] != n:
        raise ValueError(f"{n} rows of scores but {labels.shape[0]} labels")
    out_a = np.zeros(n)
    cdef double[::1] out = out_a
    for i in range(n):
        if not (0 <= labels[i] < K):
            raise ValueError(f"label index {labels[i]} of row {i} is not in 0..{K - 1}")
        out[i] = mc_loss_grad(code, &scores[i, 0], K, labels[i], NULL)
    return out_a


def _merge_module():
    # imported on first use: _merge cimports this module, which must be loaded first
    from onlinepgs._core import _merge
    return _merge


def _rebuild_state(d):
    return PGSState.from_dict(d)


def _unfold_marks_layout(d):
    """A state dict of an l1 average written when it kept marks (block fields lam, acc,
    mark, markp, ver; no ``l1_folded``) in today's layout: the sums of the active
    coordinates folded (`_touch_l1`), the others' settled already (the heap popped them);
    (lam, acc, on) on R^n, (lam, acc, key, on) on the ball (the heap's field, set afresh
    when the heap is built at the load). Other dicts are returned as they are."""
    block = np.asarray(d.get("block_a"))
    if d.get("l1_folded") or block.ndim != 3 or block.shape[2] != 5:
        return d
    lam, acc, mark, markp, ver = (block[:, :, k] for k in range(5))
    cum, cum2 = np.asarray(d["cum_a"]), np.asarray(d["cum2_a"])
    thr = (int(d["t"]) + 1.0) * float(d["config"]["l1"])
    a = np.abs(lam)
    active = a > thr
    total = acc + np.where(active, np.sign(lam) * np.maximum(
        a * (cum - mark) - (cum2 - markp), 0.0), 0.0)
    folded = np.where(active, total - lam * cum + np.sign(lam) * cum2, total)
    fields = [lam, folded] + ([ver] if d["config"].get("radius") is not None else [])
    d = dict(d, l1_folded=1)
    d["block_a"] = np.ascontiguousarray(np.stack(fields + [active * 1.0], axis=2))
    return d


def _set_cum_range(double value):
    """Set CUM_RANGE (the running sums restart when a term falls below C / CUM_RANGE) and
    return the old value: the tests make restarts happen every few steps with it."""
    global CUM_RANGE
    old = CUM_RANGE
    if not value >= 1.0:
        raise ValueError(f"CUM_RANGE must be >= 1, got {value!r}")
    CUM_RANGE = value
    return old


def _harmonic_diff(int64_t lo, int64_t hi):
    """sum_{v = lo}^{hi} 1 / v as the core computes it (`harmonic_diff`; for the tests)."""
    if lo < 1:
        raise ValueError(f"lo must be >= 1, got {lo}")
    return harmonic_diff(lo, hi)


def _l1_fallen(double a, int64_t now, double sigma, double l1, str iterate):
    """(C's terms, C2's terms) over the steps after a coordinate with |lambda_j| = a fell
    to the threshold, up to step now (`l1_fallen`; for the tests)."""
    cdef double dc2
    cdef double dc = l1_fallen(a, now, sigma, l1, ITERATES[iterate], &dc2)
    return dc, dc2
