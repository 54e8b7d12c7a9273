# The declarations of the PGS core, shared by its units and by the merge of Dask's lanes
# (_merge.pyx): the state (`PGSState`: its attributes and C methods) and the structs its
# kernels work on: the raw views of its hot loop (Core), the list of coordinates reached
# (Seen), the l1 ball's heaps (L1Heap), the reported iterate's parts (Part, Rep). The
# code lives in the units (docs/design/core.md, "The units"): _seen.pxd, _touch.pxd,
# _rows_l2.pxd, _rows_l1.pxd, _l1avg.pxd, _ball.pxd, _readout.pxd, _upkeep.pxd, and the
# pass in _pgs.pyx.
cimport cython
cimport numpy as cnp
from libc.stdint cimport uint64_t, int64_t, int32_t, uint8_t
from cpython.object cimport PyObject

from onlinepgs._core._mirror cimport Mirror
from onlinepgs._core._l1q cimport L1Q
from onlinepgs._core._features cimport CrossRows

# the version of the state as a dict (`to_dict`, _state_dict.pyx); onlinepgs.model_io reads
# 2 and up, 4 keeps the reported iterate's progressive sums
cdef enum:
    STATE_DICT_VERSION = 4


cdef enum:
    ITERATE_LAST = 0
    ITERATE_AVERAGE = 1
    ITERATE_WEIGHTED = 2
    ITERATE_WEIGHTED2 = 4
    ITERATE_RANDOM = 3


# The coordinates reached (_seen.pxd): the list is dropped past dim / SEEN_DENSE of them
# or after SEEN_WORK * dim updates checked
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
    # the adaptive geometry (_adaptive.pxd): per-coordinate steps on scaled features, the
    # centered form's flag, the base rate eta, the stabilizer's delta
    bint adaptive
    bint centered
    double eta, delta
    double* ad_sq  # p < 2: each problem's scalar accumulator L (_adaptive.pxd)
    # forgetting (docs/design/forgetting.md): gamma, whether it is below 1, and the
    # state's tau and G (`decay`), which the adaptive geometry's weights read
    bint forgetting
    double forget
    const double* tau
    const double* decay


# How the pass reads the REPORTED iterate's margin of a row before the row trains (the
# progressive loss of the model a user gets, see `_run_pass`): one part per set of lazy
# sums, read-only at the row's coordinates, no settling (the formulas of `weights()`).
cdef enum:
    PART_NONE = 0
    PART_AVG2 = 1  # averaged, p = 2: the sum of weighted iterates is lambda_j C - acc_j
    PART_AVGQ = 2  # averaged, p < 2: acc_j + phi_j (C - mark_j)
    PART_RANDOM = 3  # the random iterate's weight: snap_j if snapped, else rnd_s phi_j
    PART_L1AVG = 4  # averaged, p = 2, l1 > 0: acc_j + the pending sum while active


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
    # the adaptive geometry's weights with forgetting (_adaptive.pxd, `ad_now`): tau, G
    # and the stabilizer's start delta / eta
    bint forgetting
    const double* tau
    const double* decay
    double delta_eta


cdef struct Rep:
    bint last  # the reported iterate is the last one, whose margin the pass has already
    # the reported margin is (own's dot + ref's dot) * inv_w; ref is a lane's round start
    # (its global state's sums, see `_merge.fork`), PART_NONE elsewhere
    Part own
    Part ref
    double ref_weight  # the weight total of ref's iterates (0 without ref)


# How the read-out (_readout.pxd) reads an iterate's weight at a coordinate
cdef enum:
    READ_ZERO = 0  # t = 0: w_0 = 0
    READ_LAST = 1  # s_c phi_j (phi = lambda for p = 2)
    READ_L1_LAST = 2  # l1: s_c times soft(lambda_j, thr) through the l_q map (p < 2)
    READ_SUMS = 3  # an average: the part's weighted sum over the weights' total
    READ_RANDOM = 4  # the random iterate: the part's value (a snapshot or rnd_s phi_j)
    READ_ADAPTIVE = 5  # the adaptive geometry's last iterate, v_j / scale_j (_adaptive.pxd)
    READ_ADAPTIVE_Q = 6  # the same at p < 2: s_c phi_j / scale_j
    READ_ADAPTIVE_AVG = 7  # its averages (p = 2): settled and pending sums (_adaptive_avg.pxd)
    READ_ADAPTIVE_Q_L1 = 8  # p < 2 with l1: s_c times the l_q map of soft(lam, l1 t) / scale_j
    READ_ADAPTIVE_Q_AVG = 9  # p < 2, an average: (acc_j + phi_j (C - mark_j)) / total / scale_j


cdef struct Readout:
    int kind
    Part pt  # the lazy sums of the state's own iterate, as its pass reads them
    const double* s
    const L1Q* l1q  # l1 with p < 2: the scale of the soft thresholds' powers
    double qm1, norm
    int quarters  # the l_q map's packed roots (l1q_link)
    bint p_is_two


# The pass over rows (`_run_pass`, _pass.pxd): one row's place in the data, set by the
# table's row kernel, read by its margin and step kernels
cdef struct Row:
    int64_t row  # the row's index in the data (y, sample_weight, row_xq)
    Py_ssize_t start  # its first entry in data (and indices, for sparse rows)
    Py_ssize_t nnz  # its entries (n_cols for a dense row)
    const double* vals


# What the kernels of one pass share (_pass.pxd's `pass_of`, once a run): the state's raw
# views, the run's constants, the state's scratch, a step's sums until they are committed,
# and what a row's margin kernel leaves for its step. By pointer: a kernel reads what it
# needs once, into locals, before its loop.
cdef struct Pass:
    Core core
    Rep rep  # how the reported iterate's margins are read (own and, in a lane, ref)
    # the run's constants
    Py_ssize_t K  # problems
    Py_ssize_t k  # rows a step
    Py_ssize_t n_rows, n_cols
    const double* y
    const double* sw
    const int64_t* order
    const double* row_xq  # sum_j |x_ij|^q of every row, or NULL
    CrossRows* cross  # namespaced rows crossed a row at a time (`row_crossed`), or NULL
    uint8_t* written  # the state's pages written first (_written.pxd), or NULL
    int64_t* span  # the state's `span` and `touches_since_exact`, which the rows move
    int64_t* touches
    bint dense, classifier, multiclass, fit_icpt, p2, radius_auto
    bint rep_last, rep_random, lane
    int loss_code, mc, quarters
    double icpt, q, sigma, epsilon, loss0_unit, inv_kp, step_w, step_sq
    Py_ssize_t acc_rel, mark_rel  # the average's sum and mark from phi (fused margins)
    # the state's scratch: a row's K margins and the reported iterate's, a step's
    # coefficients (k K), gradient (mini-batches) and flags
    double* margins
    double* rep_scores
    double* coefs
    double* G
    double* s
    double* gqs
    double* b_loss_c
    double* b_conj_c
    double* mc_grad
    int* resc
    int* mov
    unsigned char* is_touched
    int64_t* touched
    # a step's: its scales, and its rows' sums until it is applied (`step_commit`)
    double inv_b, inv_k, inv_w
    double b_weight, b_loss, b_wloss, b_loss0, b_wloss_r
    int64_t b_mistakes, b_mistakes_r
    # one problem of sparse rows: <lambda, x> and ||x||^2 of the row, from its margin's
    # loop, for its step (`_apply_row`)
    double row_dot, row_xx


# The table of a pass's kernels (_select.pxd's `select_kernels`, once a run): the
# addresses of functions of one index type, called through _select.pxd's `call_*`
cdef struct RowKernels:
    void* row  # the row's place in the data, and the prefetches (_pass.pxd)
    void* margins  # its K margins at w_{t-1}, and the reported iterate's
    void* loss  # its loss: the step's coefficients and the statistics (_pass.pxd)
    void* step  # lambda -= the coefficients times the row (a step of one row)
    void* batch  # lambda -= a mini-batch's gradient (a step of several rows)


# l1 > 0 (p = 2): the coordinates whose |lambda_j| is above the threshold thr (in lambda's
# units, `l1_advance` in _upkeep.pxd), one min-heap per problem keyed by |lambda_j| with lazy
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
    # is exactly 1 (`l1_ball_factor`, _ball.pxd), and an average's coordinates that fell
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
    # `end_steps` before the step's terms are added; not saved: t at a load)
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
    # the adaptive geometry (docs/design/adaptive.md): its flag, the centered form's, the
    # base rate and the stabilizer's delta
    cdef readonly bint adaptive, centered
    cdef readonly double eta, delta
    # p < 2: each problem's scalar accumulator L, the sum of the scaled gradients' squared
    # dual norms (_adaptive.pxd; zeros otherwise)
    cdef public cnp.ndarray ad_sq_a
    cdef double[::1] ad_sq
    cdef readonly bint keep_seen  # sweeps its coordinates: keeps a list of those reached
    # its block mapped in small pages (_pages.pyx, `small_pages_pay`): how this process
    # maps it, not part of the model (copies keep it, model files do not)
    cdef readonly bint small_pages
    # a byte a 4 KB page of the block in small pages: written by a pass already
    # (_written.pxd); NULL in huge pages
    cdef uint8_t* written
    cdef cnp.ndarray written_a
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
    # this state's number among the states made in the process (never reused: a state
    # made where a freed one was is another)
    cdef readonly int64_t serial
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
    cdef double _denom(self, int64_t t) noexcept nogil
    cdef double _average_norm(self) noexcept nogil
    cdef double _norm_q(self, Py_ssize_t c) noexcept nogil
    cdef double _w_norm(self, Py_ssize_t c, int64_t t) noexcept nogil
    cdef Py_ssize_t _sweep(self, const int64_t** coords) noexcept nogil
    cdef double _step_weight(self) noexcept nogil
    cdef void _restart_sum_if_needed(self, Py_ssize_t c, double term) noexcept nogil


# One row's pass for the per-event API (_event.pyx): `PGSState.run` without its input's
# conversions (the row is the caller's canonical one, int32 columns below n_cols)
cdef int run_row(PGSState self, const double* data, const int32_t* indices,
                 int64_t* indptr, Py_ssize_t n_cols, const double[::1] y,
                 const double[::1] sample_weight, const int64_t[::1] order, bint classifier,
                 const double* row_xq) except -1


# The per-event API's steps of one or several states (a race's live runs) on its row, each
# state's pass kept from event to event (`RowPasses.step`, _pgs.pyx)
cdef class RowPasses:
    cdef Pass* ps
    cdef RowKernels* kn
    cdef Row* rw
    # the states the passes were made for (not held: a race lets a run go at once), known
    # by their address and `serial`, and each one's `coefs` then (`_bind` renews it)
    cdef PyObject** ptrs
    cdef int64_t* serials
    cdef double** scratch
    cdef Py_ssize_t room, n_made

    cdef int step(self, list states, const double* data, const int32_t* indices,
                  int64_t* indptr, Py_ssize_t n_cols, const double[::1] y,
                  const double[::1] sample_weight, const int64_t[::1] order,
                  bint classifier) except -1
    cdef bint _current(self, Py_ssize_t s, PGSState st, const double* y, const double* sw,
                       const int64_t* order, bint classifier)
