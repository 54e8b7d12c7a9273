# cython: language_level=3
"""The Primal Gradient Solver's state and its pass over rows (Zhu et al., 2009, Figure 1).

`PGSState` holds what PGS carries between steps, for K problems sharing one pass: every
iterate is w_t = s_t phi(lambda) coordinate-wise, the lazy averages kept as running sums,
the fields of a (coordinate, problem) side by side in one block (docs/design/core.md).
Here: the state's construction, storage and Python API (read-out, statistics, forks),
and the pass (`_run_pass`), which calls the kernels of the table chosen once a run
(_select.pxd). The kernels and the upkeep between steps live in the units _pgs.pxd
lists; the state as a dict in _state_dict.pyx, the merge of Dask's lanes in _merge.pyx.
Coordinate 0 is the intercept's constant feature; feature j of the data is j + 1.
"""
cimport cython

import numpy as np
cimport numpy as cnp
from libc.math cimport pow, fabs, sqrt, log, exp, isfinite, INFINITY
from libc.stdint cimport uint64_t, int64_t, int32_t
from libc.stdlib cimport free, calloc, realloc
from cpython.object cimport PyObject

from onlinepgs._core._multiclass cimport MC_NONE
from onlinepgs._core._regularizer cimport reg_conjugate, phi_quarters
from onlinepgs._core._mirror cimport mirror_init, MIRROR_CHUNK
from onlinepgs._core._l1q cimport L1Q, l1q_tol
from onlinepgs._core._sparse cimport index_t
from onlinepgs._core._seen cimport _seen_compact
from onlinepgs._core._written cimport write_rows_first, written_pages
from onlinepgs._core._touch cimport _averaged
from onlinepgs._core._steps cimport row_power_sum
from onlinepgs._core._features cimport Crossing, CrossRows
from onlinepgs._core._pass cimport pass_of, note_rows, step_begin, step_commit, step_end
from onlinepgs._core._select cimport (select_kernels, call_row, call_margins, call_loss,
                                      call_step, call_batch)
from onlinepgs._core._l1avg cimport harmonic_diff, l1_fallen, weighted_scale_sums
from onlinepgs._core._readout cimport (weight_total, _part_value, rep_of, _readout,
                                       _read_all, _read_scores)
from onlinepgs._core._upkeep cimport (settle_all, settle_every, scale_of, widen_window,
                                      l1_rebuild, RENORM_BELOW, M_FLOOR)
from onlinepgs._core._adaptive cimport AD_SQ, AD_STAB, AD_INV, AD_S, raise_batch, adq_scales
from onlinepgs._core._adaptive_avg cimport settle_batch, ad_settle, ad_gap_sum, avg_power
from onlinepgs._core._pages import cache_aligned_zeros, copy_mapped
from onlinepgs._core._losses import LOSS_CODES, MULTI_CLASS, multi_class_code
from onlinepgs._options import check_pgs_state
from onlinepgs import _layout
from onlinepgs._layout import L1_MARKS_FIELDS, StateLayout

if _layout.SEEN_DENSE != SEEN_DENSE:  # the list's room (_layout) and its drop rule (here)
    raise ImportError("onlinepgs._layout.SEEN_DENSE differs from the compiled core's")
_AD_LAYOUT = StateLayout(geometry="adaptive")  # the adaptive kernels' fields (_adaptive.pxd)
if (len(_AD_LAYOUT.fields), _AD_LAYOUT.offset("sq"), _AD_LAYOUT.offset("stab"),
        _AD_LAYOUT.offset("inv_scale")) != (AD_S, AD_SQ, AD_STAB, AD_INV):
    raise ImportError("onlinepgs._layout's adaptive fields differ from the compiled core's")

cnp.import_array()

STATE_VERSION = STATE_DICT_VERSION  # of `to_dict` (_pgs.pxd)

ITERATES = {"last": ITERATE_LAST, "average": ITERATE_AVERAGE,
            "weighted": ITERATE_WEIGHTED, "weighted2": ITERATE_WEIGHTED2,
            "random": ITERATE_RANDOM}


# How near 1 p may come (q - 1 at most 2^23) is a rule of onlinepgs._options
# (MAX_Q_MINUS_1, check_p); the l_q map's window of M, its headroom and N's recount:
# _mirror.pxd, shared with SDCA.
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


def power_is_cheap(double p):
    """True where |x|^(q-1) takes square roots and multiplies, not a log and an exp."""
    return p == 2.0 or phi_quarters(p / (p - 1.0)) > 0


cdef int64_t _states_made = 0  # PGSStates made in the process (`PGSState.serial`)


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

    ``small_pages`` maps the block in small pages, not huge ones (the learners' first call
    decides, `_pages.small_pages_pay`: a wide block its rows reach sparsely); its copies
    then write only the pages it has written (`_pages.copy_mapped`). How the process maps
    the state, not part of the model: `config()` and model files leave it out.
    """
    # the attributes are declared in _pgs.pxd (the merge, _merge.pyx, reads them)

    def __cinit__(self, *args, **kwargs):
        global _states_made
        _states_made += 1
        self.serial = _states_made

    def __init__(self, *, double p=2.0, double sigma=1e-4, radius=None, str loss="logistic",
                 int batch_size=1, str iterate="last", int n_problems=1, bint multiclass=False,
                 bint fit_intercept=True, double intercept_scaling=1.0, double epsilon=0.1,
                 Py_ssize_t n_features=0, uint64_t seed=0, double forget=1.0,
                 double l1=0.0, multi_class="ovr", str geometry="global", double eta=0.5,
                 double delta=0.0, centered=None, bint small_pages=False):
        # the learners' rules (onlinepgs._options): a state is never built from options
        # they refuse
        check_pgs_state(p=p, sigma=sigma, radius=radius, loss=loss, batch_size=batch_size,
                        iterate=iterate, fit_intercept=bool(fit_intercept),
                        intercept_scaling=intercept_scaling, epsilon=epsilon, forget=forget,
                        l1=l1, multi_class=multi_class, geometry=geometry, eta=eta,
                        delta=delta, n_problems=n_problems)
        if n_problems < 1:
            raise ValueError("n_problems must be >= 1")
        self.p = p
        self.q = p / (p - 1.0)
        self.mm = mirror_init(p)
        if forget < 1.0 and p < 2.0:
            widen_window(self)
        self.quarters = self.mm.quarters
        self.p_is_two = p == 2.0
        self.sigma = sigma
        self.bounded = radius is not None
        self.radius_auto = radius == "auto"
        # "auto": sqrt(2 (p-1) max_i sw_i l(0; y_i) / sigma), grown example by example
        self.radius = 0.0 if self.radius_auto else (
            float(radius) if radius is not None else float("inf"))
        self.l1 = l1
        # the fields of a (coordinate, problem), the arrays that grow with the width and
        # what the state keeps beside them: onlinepgs._layout, which max_model_bytes and
        # the model files read too
        self.layout = StateLayout(p=p, iterate=iterate, l1=l1, radius=radius,
                                  batch_size=batch_size, n_problems=n_problems,
                                  geometry=geometry)
        self.adaptive = geometry == "adaptive"
        # the centered form (FTRL-Proximal) by default at p = 2; p < 2 has one scalar
        # stabilizer, which has no centered form (docs/design/adaptive.md, "p < 2")
        if centered is None:
            centered = p == 2.0
        if self.adaptive and p != 2.0 and centered:
            raise ValueError("the adaptive geometry's centered form is per-coordinate: it "
                             f"needs p=2, got p={p!r}; at p < 2 the stabilizer is one "
                             "scalar (centered=False)")
        self.centered = bool(centered)
        self.eta = eta
        self.delta = delta
        # N, the l_q map's running sum (p < 2, or the ball's norm at p = 2; l1 on the ball
        # keeps its own norm, ||soft(lambda, thr)||, in the heaps)
        self.need_norm = self.layout.keeps_norm
        # the states that sweep their coordinates now and then keep a list of those the
        # passes reached, so that a sweep is not one of the width (2^24 and more hashed)
        self.keep_seen = self.layout.keeps_seen
        # l1 on the ball keeps the active coordinates in heaps while the ball may bind (its
        # norm moves with thr; none while it cannot, `l1_ball_factor`), keyed by a field
        self.l1_heap = self.layout.offset("key") is not None
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
        fields = self.layout.fields
        self.n_fields = len(fields)
        # an absent field's offset: 0 (phi is lambda at p = 2; the heap's key and the
        # flag are tested > 0), or -1
        offset = {name: i for i, name in enumerate(fields)}
        self.off_key = offset.get("key", 0)
        self.off_on = offset.get("on", 0)
        self.off_phi = offset.get("phi", 0)
        self.off_acc = offset.get("acc", -1)
        self.off_mark = offset.get("mark", -1)
        self.norm_a = np.zeros(K)
        self.scale_a = np.ones(K)
        self.s_a = np.zeros(K)
        self.cum_a = np.zeros(K)
        self.rnd_s_a = np.zeros(K)
        self.regret_a = np.zeros(K)
        self.rnd_ver_a = np.zeros(K, dtype=np.int64)
        self.ad_sq_a = np.zeros(K)
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
        # _denom(0) l1 / sigma; the adaptive geometry's at p < 2, l1 t (_upkeep.pxd's
        # `ad_threshold`): 0
        self.l1_thr = 0.0 if self.adaptive and p != 2.0 else l1
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
        self.small_pages = small_pages
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

    # ---- storage ---------------------------------------------------------------
    def _allocate(self, Py_ssize_t new_dim, bint zero=True):
        """Grow the state to new_dim coordinates, its arrays as `self.layout` gives them
        (onlinepgs._layout); new coordinates are zero (``zero=False``: their block rows
        not set, for a caller that writes every one: a copy's)."""
        shapes = self.layout.arrays(new_dim)
        block = cache_aligned_zeros(shapes["block_a"][0], zero, self.small_pages)
        if self.dim and self.small_pages:
            copy_mapped(block, self.block_a)  # not every page of the width
        elif self.dim:
            block[: self.dim] = self.block_a
        self.block_a = block
        self.written = NULL  # (a block in huge pages: none)
        self.written_a = None
        if self.small_pages:
            self.written_a = np.zeros(written_pages(<char*>cnp.PyArray_DATA(block),
                                                    block.nbytes), dtype=np.uint8)
            self.written = <uint8_t*>cnp.PyArray_DATA(self.written_a)
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
                self.flag_rescale, self.flag_moved, self.step_gq, self.mc_grad, self.ad_sq_a,
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
        self.ad_sq = self.ad_sq_a
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
        if self.adaptive:
            cfg.update(geometry="adaptive", eta=self.eta, delta=self.delta,
                       centered=bool(self.centered))
        return cfg

    @property
    def multi_class(self):
        """"ovr" (K one-vs-rest problems, or one binary one), "multinomial" or
        "crammer_singer" (one loss of the K scores)."""
        return {v: k for k, v in MULTI_CLASS.items()}[self.mc_code]

    def to_dict(self):
        """The whole state as plain numbers and arrays (copies)."""
        return _state_dict().as_dict(self, True)

    def copy(self):
        """An independent copy of the state (each array copied once; where the state
        keeps the list of the coordinates reached, their rows only). The list is copied
        too: finding it again is a scan of the whole block, which a race's fork
        (`with_sigma`) would pay each time."""
        io = _state_dict()
        return io.restore(PGSState, io.as_dict(self, False), self._seen_coords(), True,
                          self.small_pages)

    @classmethod
    def from_dict(cls, d):
        """The state of `to_dict`; version 2 (before the online dual estimate) is read with
        that estimate unknown (NaN) from then on, versions 2 and 3 (before the reported
        iterate's progressive sums) with those unknown (NaN) from then on."""
        return _state_dict().restore(cls, d, None, False)

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
        core.adaptive = self.adaptive
        core.centered = self.centered
        core.eta = self.eta
        core.delta = self.delta
        core.ad_sq = &self.ad_sq[0]
        core.forgetting = self.forgetting
        core.forget = self.forget
        core.tau = &self.tau
        core.decay = &self.decay
        return core

    # ---- scalars -------------------------------------------------------------------
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
            settle_all(self, c)
            self.n_rescales += 1
            self.n_restarts += 1

    def l1_ball(self):
        """The l1 ball's bookkeeping of each problem (l1 > 0 at p = 2 on a ball; None for
        another state): a dict per problem of ``lazy`` (True while the ball cannot bind:
        no heap, the factor 1 from a bound of the norm), ``bound_base`` (that bound's
        base: 0 where it is ||lambda||^2; NaN with a heap) and ``heap_entries`` (the
        heap's entries, live and dead). A diagnostic, as ``n_rescales`` is
        (docs/design/core.md, "l1: soft thresholds, lazily").

        Examples
        --------
        >>> from onlinepgs._core import PGSState
        >>> PGSState(l1=0.01, radius=1.0).l1_ball()
        [{'lazy': True, 'bound_base': 0.0, 'heap_entries': 0}]
        """
        cdef Py_ssize_t c
        if self.heaps == NULL:
            return None
        return [{"lazy": bool(self.heaps[c].lazy),
                 "bound_base": self.heaps[c].bbase if self.heaps[c].lazy else float("nan"),
                 "heap_entries": int(self.heaps[c].n)} for c in range(self.n_problems)]

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
        if rd.kind == READ_RANDOM or rd.kind == READ_ADAPTIVE_AVG:
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
        duality gap are NaN (the first two also in the adaptive geometry, whose steps are
        not the ones they bound): they bound the uniformly weighted objective over all steps,
        which the iterates then do not minimize (docs/design/forgetting.md); the
        progressive statistics stay."""
        T = self.t
        regret = np.asarray(self.regret_a).copy()
        if self.forgetting or self.adaptive:
            # the adaptive geometry's steps are not Lemma 1's, whose bound this is
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
        if self.t == 0 or self.forgetting or self.adaptive:
            # the adaptive geometry's iterates are not grad r*(lambda / (sigma t)): no
            # running r(w_t) is kept, and the pair is not its own (`duality_gap` certifies it)
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
        if new.adaptive:
            # its weights read sigma afresh at every step (_adaptive.pxd); an average's
            # pending sums hold the old sigma's iterates: settled first
            if _averaged(new.iterate) and new.p_is_two:
                new._settle_averages()
            else:
                settle_every(new)  # p < 2: the global geometry's sums
            new.sigma = sigma
        else:
            settle_every(new)
            new.sigma = sigma
            # l1: the threshold moves with sigma (down for a larger one), so the active
            # sets are found again (the lazy sums were settled above at the old sigma)
            l1_rebuild(new)
        if new.radius_auto and new.loss0_max > 0.0:
            new.radius = sqrt(new.loss0_max) * sqrt(2.0 * (new.p - 1.0) / sigma)
        if new.adaptive:
            # p < 2 keeps the factor of its iterate, set again at the new sigma and radius
            if not new.p_is_two:
                adq_scales(new)
            return new
        if new.t > 0:
            for c in range(new.n_problems):
                new.s[c] = scale_of(new, c, new.t)
                if new.need_norm and not new.bounded:
                    new.w_norm[c] = new._w_norm(c, new.t)
        return new

    def _settle_averages(self):
        """The adaptive geometry's averages: every coordinate's settled sum brought up to
        step t (`ad_settle`; the reported average does not change)."""
        cdef Py_ssize_t j, K = self.n_problems
        cdef Core core = self._core()
        cdef int k = avg_power(self.iterate)
        with nogil:
            for j in range(self.dim):
                ad_settle(core.lam + j * K * core.S, core.snap + j * K, core.snapv + j * K,
                          K, core.S, self.t, self.sigma, self.l1, k)

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
            row_power_sums=None, Crossing crossing=None):
        """One pass of Figure 1 over the rows in `order` (k rows a step, a last short step).

        CSR input: data/indices/indptr; dense C-contiguous input: indices is None;
        namespaced rows crossed one at a time as the pass reaches them: `crossing`
        (`onlinepgs._core._features.Crossing`, one row a step; data, indices and indptr
        are not read: `run_lockstep`), the same rows as its chunk by `rows_to_csr` and the
        same steps.
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
        cdef const double* vals = &d[0] if d.shape[0] else NULL
        cdef const int32_t[::1] ind32
        cdef const int64_t[::1] ind64
        cdef int64_t[::1] ptr64
        cdef Rep rep
        if crossing is not None:
            run_lockstep([self], None, None, None, n_cols, y, sample_weight, order,
                         classifier, row_power_sums, crossing)
            return
        if n_cols + 1 > self.dim:
            raise ValueError("state dimension too small for the data")
        rep = rep_of(self)
        if indices is None:
            with nogil:
                _run_pass(self, vals, <const int32_t*>NULL, <int64_t*>NULL, n_cols, y,
                          sample_weight, order, classifier, True, rps_ptr, rep)
            return
        ptr64 = np.array(indptr, dtype=np.int64)  # writable copy of n_rows + 1 offsets
        if indices.dtype == np.int32:
            ind32 = indices
            with nogil:
                _run_pass(self, vals, &ind32[0] if ind32.shape[0] else NULL, &ptr64[0], 0,
                          y, sample_weight, order, classifier, False, rps_ptr, rep)
        else:
            ind64 = indices
            with nogil:
                _run_pass(self, vals, &ind64[0] if ind64.shape[0] else NULL, &ptr64[0], 0,
                          y, sample_weight, order, classifier, False, rps_ptr, rep)


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


cdef bint _rows_finite(const double* block, Py_ssize_t width, const index_t* idx,
                       Py_ssize_t n) noexcept nogil:
    """Whether the `width` doubles of block row idx[e] + 1 are finite for every e: x - x
    is 0 for a finite x, NaN else, and a sum of them stays 0 only where all are."""
    cdef Py_ssize_t e, f
    cdef const double* row
    cdef double acc = 0.0
    for e in range(n):
        row = block + (<Py_ssize_t>idx[e] + 1) * width
        for f in range(width):
            acc += row[f] - row[f]
    return acc == 0.0


def finite_at_columns(const double[:, :, ::1] block, indices):
    """Whether a state's block (`PGSState.block_a`) is finite at coordinate 0 (the
    intercept's) and at column + 1 for every column in `indices` (a CSR matrix's, below
    the state's width, repeats allowed): after a call whose rows reached only those
    coordinates, in O(len(indices)) and without a copy."""
    cdef Py_ssize_t width = block.shape[1] * block.shape[2]
    cdef const int32_t[::1] ind32
    cdef const int64_t[::1] ind64
    cdef bint ok
    cdef int32_t zero = -1  # row -1 + 1: the intercept's
    if block.shape[0] == 0:
        return True
    with nogil:
        ok = _rows_finite(&block[0, 0, 0], width, &zero, 1)
    if not ok or len(indices) == 0:
        return ok
    if indices.dtype == np.int32:
        ind32 = indices
        with nogil:
            ok = _rows_finite(&block[0, 0, 0], width, &ind32[0], ind32.shape[0])
    else:
        ind64 = np.asarray(indices, dtype=np.int64)
        with nogil:
            ok = _rows_finite(&block[0, 0, 0], width, &ind64[0], ind64.shape[0])
    return ok


cdef int run_row(PGSState self, const double* data, const int32_t* indices,
                 int64_t* indptr, Py_ssize_t n_cols, const double[::1] y,
                 const double[::1] sample_weight, const int64_t[::1] order, bint classifier,
                 const double* row_xq) except -1:
    """`run` over one canonical CSR row of int32 columns below n_cols that the caller
    built (indptr [0, nnz], order [0]; row_xq: its sum_j |x_j|^q or NULL), without
    `run`'s conversions of its input: the per-event API's step (onlinepgs._core._event)."""
    cdef Rep rep
    if n_cols + 1 > self.dim:
        raise ValueError("state dimension too small for the data")
    rep = rep_of(self)
    with nogil:
        _run_pass(self, data, indices, indptr, 0, y, sample_weight, order, classifier, False,
                  row_xq, rep)
    return 0


@cython.final
cdef class RowPasses:
    """The per-event API's step (onlinepgs._core._event) of one or several states on the
    event's one row: `run_row` of each, in their order (a race's live runs), with each
    state's pass kept from event to event (its `Pass` and kernels, `pass_of` and
    `select_kernels`: the state's arrays and constants, which a pass only reads, and the
    caller's one-row buffers), made again only for a state it was not made for (another
    `serial`), one whose arrays were bound again (`_bind` renews its scratch), a lane's
    (its round's reference moves every step) or other buffers. A pass over many rows
    keeps its `Pass` from row to row the same way: each step sets its own sums
    (`step_begin`), so a kept pass is a pass that goes on. The GIL is released once for
    all the states' steps."""

    def __dealloc__(self):
        free(self.ps)
        free(self.kn)
        free(self.rw)
        free(self.ptrs)
        free(self.serials)
        free(self.scratch)

    def __reduce__(self):
        raise TypeError("RowPasses is not picklable")

    cdef bint _current(self, Py_ssize_t s, PGSState st, const double* y, const double* sw,
                       const int64_t* order, bint classifier):
        cdef const Pass* ps = &self.ps[s]
        return (s < self.n_made and self.ptrs[s] == <PyObject*>st
                and self.serials[s] == st.serial and st.reference is None
                and self.scratch[s] == &st.coefs[0] and ps.y == y and ps.sw == sw
                and ps.order == order and ps.classifier == classifier
                and ps.step_w == <double>st.t_step)

    cdef int step(self, list states, const double* data, const int32_t* indices,
                  int64_t* indptr, Py_ssize_t n_cols, const double[::1] y,
                  const double[::1] sample_weight, const int64_t[::1] order,
                  bint classifier) except -1:
        """One step of each state of `states` (PGSStates of batch_size 1) on the row (a
        canonical CSR row of int32 columns below n_cols, `indptr` [0, nnz], order [0]),
        as `run_row` of each in turn: a state that diverges stops there (its `diverged`
        says so), the others step as they would alone."""
        cdef Py_ssize_t n = len(states), s
        cdef PGSState st
        cdef Rep rep
        cdef void* room
        for st in states:
            if n_cols + 1 > st.dim:
                raise ValueError("state dimension too small for the data")
            if st.batch_size != 1:
                raise ValueError("an event's step is one row: batch_size must be 1")
        if n > self.room:
            room = realloc(self.ps, n * sizeof(Pass))
            if room != NULL:
                self.ps = <Pass*>room
                room = realloc(self.kn, n * sizeof(RowKernels))
            if room != NULL:
                self.kn = <RowKernels*>room
                room = realloc(self.rw, n * sizeof(Row))
            if room != NULL:
                self.rw = <Row*>room
                room = realloc(self.ptrs, n * sizeof(PyObject*))
            if room != NULL:
                self.ptrs = <PyObject**>room
                room = realloc(self.serials, n * sizeof(int64_t))
            if room != NULL:
                self.serials = <int64_t*>room
                room = realloc(self.scratch, n * sizeof(double*))
            if room == NULL:
                raise MemoryError()
            self.scratch = <double**>room
            self.room = n
        for s in range(n):
            st = states[s]
            if not self._current(s, st, &y[0], &sample_weight[0], &order[0], classifier):
                rep = rep_of(st)
                self.ps[s] = pass_of(st, rep, classifier, False, 0, &y[0], &sample_weight[0],
                                     &order[0], 1, NULL, NULL)
                self.kn[s] = select_kernels(&self.ps[s], indices)
                self.scratch[s] = &st.coefs[0]
                self.ptrs[s] = <PyObject*>st  # borrowed: `states` keeps them
                self.serials[s] = st.serial
        self.n_made = n
        with nogil:
            for s in range(n):
                _write_first(<PGSState>self.ptrs[s], &self.ps[s], indices, indptr, order)
                note_rows(&self.ps[s], &(<PGSState>self.ptrs[s]).seen, indices, indptr,
                          order)  # for the sweeps (_seen.pxd)
            for s in range(n):
                _pass_step(<PGSState>self.ptrs[s], &self.ps[s], &self.kn[s], &self.rw[s],
                           data, indices, indptr, 0, 1)
        return 0


cdef inline bint _pass_step(PGSState self, Pass* ps, const RowKernels* kn, Row* rw,
                            const double* data, const index_t* indices, int64_t* indptr,
                            Py_ssize_t pos, Py_ssize_t bsize) noexcept nogil:
    """One step of a pass, the rows at order[pos:pos + bsize]: phase 1 scores each row of
    the step at w_{t-1} (its margins, and the reported iterate's, the progressive loss of
    the model a user gets), its loss, the step's coefficients and the statistics; phase 2
    moves lambda by the step's gradient on the coordinates of its rows; then t moves and
    the scalars follow. False where a run diverges at a row (a derivative or a coupled
    loss not finite: the state says which row), before the step is taken."""
    cdef Py_ssize_t b
    # the adaptive geometry with batches: every step's rows read in the same scales, and
    # a last short step of one row a batch's too (linear in its weight)
    cdef bint batched_ad = self.adaptive and ps.k > 1
    step_begin(self, ps, bsize)
    if batched_ad:
        # the averages settled before the scales move (p = 2; at p < 2 a raise moves
        # no weight)
        if _averaged(self.iterate) and self.p_is_two:
            settle_batch(ps, data, indices, indptr, pos, bsize)
        raise_batch(ps, data, indices, indptr, pos, bsize)
    for b in range(bsize):  # phase 1: every row of the step at w_{t-1}
        call_row(kn[0], ps, rw, data, indices, indptr, pos + b)
        call_margins(kn[0], ps, rw, indices)
        if call_loss(kn[0], ps, rw, b):
            self.diverged = True
            self.diverged_row = rw.row
            return False
    step_commit(self, ps, bsize)
    # phase 2: lambda <- lambda - g_t, touching only the step's coordinates (with a single
    # row, rw still describes it)
    if bsize == 1 and not batched_ad:
        call_step(kn[0], ps, rw, indices)
    else:
        call_batch(kn[0], ps, data, indices, indptr, pos, bsize)
    step_end(self, ps)
    return True


cdef inline void _write_first(PGSState self, Pass* ps, const index_t* indices,
                              const int64_t* indptr, const int64_t[::1] order) noexcept nogil:
    """Before a pass over CSR rows: the pages of a block in small pages that its rows
    reach written first (_written.pxd)."""
    if self.written != NULL and not ps.dense and ps.cross == NULL:
        write_rows_first(self.written, <char*>&self.block[0, 0, 0],
                         8 * self.n_problems * self.n_fields, indices, indptr, order,
                         ps.fit_icpt)


cdef void _run_pass(PGSState self, const double* data, const index_t* indices,
                    int64_t* indptr, Py_ssize_t n_cols, const double[::1] y,
                    const double[::1] sw, const int64_t[::1] order, bint classifier,
                    bint dense, const double* row_xq, Rep rep) noexcept nogil:
    """One pass of Figure 1 over the rows in `order`, k rows a step (a last short step):
    `_pass_step` after step. What runs for the configuration and the input's form was
    chosen once, before the first row: the table of kernels (_select.pxd) that the loop
    calls through."""
    cdef Py_ssize_t n_rows = order.shape[0], pos = 0, bsize
    cdef Pass ps = pass_of(self, rep, classifier, dense, n_cols, &y[0], &sw[0], &order[0],
                           n_rows, row_xq, NULL)
    cdef RowKernels kn = select_kernels(&ps, indices)
    cdef Row rw
    _write_first(self, &ps, indices, indptr, order)
    note_rows(&ps, &self.seen, indices, indptr, order)  # for the sweeps (_seen.pxd)
    while pos < n_rows:
        bsize = ps.k if n_rows - pos >= ps.k else n_rows - pos
        if not _pass_step(self, &ps, &kn, &rw, data, indices, indptr, pos, bsize):
            return
        pos += bsize


cdef void _run_lockstep(PyObject** states, Py_ssize_t n_states, const Rep* reps,
                        Pass* ps, RowKernels* kn, Row* rw, bint* live,
                        const double* data, const index_t* indices, int64_t* indptr,
                        Py_ssize_t n_cols, bint dense, const double[::1] y,
                        const double[::1] sw, const int64_t[::1] order, bint classifier,
                        const double* row_xq, CrossRows* cross) noexcept nogil:
    """One pass of each of n_states states (PGSState, one row a step) over the rows in
    `order`, in lockstep: row after row, each live state's step on it (`_pass_step`), so
    that a row is read (crossed rows: made, `row_crossed`; then `indices` is the
    crossing's) once for them all. A state that diverges stops there (its `diverged`
    says where); the others go on, as they would alone. `ps`, `kn`, `rw` and `live`:
    room for n_states of each."""
    cdef Py_ssize_t n_rows = order.shape[0], pos, s
    if cross != NULL:
        cross.made_at[0] = cross.made_at[1] = -1  # no row of this pass made yet
    for s in range(n_states):
        ps[s] = pass_of(<PGSState>states[s], reps[s], classifier, dense, n_cols, &y[0],
                        &sw[0], &order[0], n_rows, row_xq, cross)
        kn[s] = select_kernels(&ps[s], indices)
        _write_first(<PGSState>states[s], &ps[s], indices, indptr, order)
        note_rows(&ps[s], &(<PGSState>states[s]).seen, indices, indptr, order)
        live[s] = True
    for pos in range(n_rows):
        for s in range(n_states):
            if live[s]:
                live[s] = _pass_step(<PGSState>states[s], &ps[s], &kn[s], &rw[s], data,
                                     indices, indptr, pos, 1)


def run_lockstep(states, data, indices, indptr, Py_ssize_t n_cols, const double[::1] y,
                 const double[::1] sample_weight, const int64_t[::1] order,
                 bint classifier, row_power_sums=None, Crossing crossing=None):
    """One pass of each state of `states` (PGSStates of batch_size 1) over the rows in
    `order`, in lockstep, each row read once for all the states while each state's
    coordinates of it are touched in turn: the states end as after ``state.run(...)``
    with the same arguments one after the other (a state that diverges stops at its
    row, its `diverged` set; the others go on). The rows as `PGSState.run` takes them:
    CSR (data, indices, indptr), dense C-contiguous (indices None) or namespaced rows
    crossed as the pass reaches them (`crossing`; data, indices and indptr not read),
    each made once for all the states. The runs of a race learn a chunk this way
    (`onlinepgs._race.SigmaRace.advance`).
    """
    cdef list held = list(states)
    cdef Py_ssize_t n_states = len(held), s
    cdef PGSState st
    cdef const double[::1] rps
    cdef const double* rps_ptr = NULL
    cdef const double[::1] d
    cdef const double* vals = NULL
    cdef const int32_t[::1] ind32
    cdef const int64_t[::1] ind64
    cdef int64_t[::1] ptr64
    cdef int64_t* ptr = NULL
    cdef const int32_t* idx32 = NULL
    cdef const int64_t* idx64 = NULL
    cdef bint dense = crossing is None and indices is None, wide = False
    cdef CrossRows* cross = NULL
    cdef PyObject** ptrs = NULL
    cdef Rep* reps = NULL
    cdef Pass* ps = NULL
    cdef RowKernels* kn = NULL
    cdef Row* rw = NULL
    cdef bint* live = NULL
    if row_power_sums is not None:
        rps = row_power_sums
        if rps.shape[0] != y.shape[0]:
            raise ValueError("row_power_sums must have one entry per row")
        rps_ptr = &rps[0] if rps.shape[0] else NULL
    if crossing is not None:
        if crossing.c.n_rows != y.shape[0]:
            raise ValueError("the crossing must hold one row per label")
        cross = &crossing.c
        idx32 = <const int32_t*>cross.row_idx
    else:
        d = data
        vals = &d[0] if d.shape[0] else NULL
        if not dense:
            ptr64 = np.array(indptr, dtype=np.int64)  # writable copy of n_rows + 1 offsets
            ptr = &ptr64[0]
            if indices.dtype == np.int32:
                ind32 = indices
                idx32 = &ind32[0] if ind32.shape[0] else NULL
            else:
                ind64 = indices
                idx64 = &ind64[0] if ind64.shape[0] else NULL
                wide = True
    for st in held:
        if n_cols + 1 > st.dim:
            raise ValueError("state dimension too small for the data")
        if st.batch_size != 1:
            raise ValueError("states in lockstep take one row a step: batch_size must be 1")
    if n_states == 0 or order.shape[0] == 0:
        return
    try:
        ptrs = <PyObject**>calloc(n_states, sizeof(PyObject*))
        reps = <Rep*>calloc(n_states, sizeof(Rep))
        ps = <Pass*>calloc(n_states, sizeof(Pass))
        kn = <RowKernels*>calloc(n_states, sizeof(RowKernels))
        rw = <Row*>calloc(n_states, sizeof(Row))
        live = <bint*>calloc(n_states, sizeof(bint))
        if not (ptrs and reps and ps and kn and rw and live):
            raise MemoryError()
        for s in range(n_states):
            ptrs[s] = <PyObject*>held[s]  # borrowed: `held` keeps them
            reps[s] = rep_of(held[s])
        with nogil:
            if wide:
                _run_lockstep(ptrs, n_states, reps, ps, kn, rw, live, vals, idx64, ptr,
                              0, False, y, sample_weight, order, classifier, rps_ptr, NULL)
            else:  # dense rows: their width; CSR and crossed rows: their columns
                _run_lockstep(ptrs, n_states, reps, ps, kn, rw, live, vals, idx32, ptr,
                              n_cols if dense else 0, dense, y, sample_weight, order,
                              classifier, rps_ptr, cross)
    finally:
        free(ptrs)
        free(reps)
        free(ps)
        free(kn)
        free(rw)
        free(live)


def run_crossed(states, Py_ssize_t n_cols, const double[::1] y,
                const double[::1] sample_weight, const int64_t[::1] order, bint classifier,
                Crossing crossing, row_power_sums=None):
    """`run_lockstep` over the rows of `crossing` (namespaced rows whose interactions
    are made as the pass reaches each row, once for all the states)."""
    run_lockstep(states, None, None, None, n_cols, y, sample_weight, order, classifier,
                 row_power_sums, crossing)


def _merge_module():
    # imported on first use: _merge cimports this module, which must be loaded first
    from onlinepgs._core import _merge
    return _merge


def _state_dict():
    # imported on first use, as _merge
    from onlinepgs._core import _state_dict
    return _state_dict


def _rebuild_state(d):
    return PGSState.from_dict(d)


def _set_cum_range(double value):
    """Set CUM_RANGE (the running sums restart when a term falls below C / CUM_RANGE) and
    return the old value: the tests make restarts happen every few steps with it."""
    global CUM_RANGE
    old = CUM_RANGE
    if not value >= 1.0:
        raise ValueError(f"CUM_RANGE must be >= 1, got {value!r}")
    CUM_RANGE = value
    return old


def _cum_range():
    """CUM_RANGE: the running sums restart when a term falls below C / CUM_RANGE."""
    return CUM_RANGE


def _weighted_scale_sums(int64_t lo, int64_t hi, str iterate):
    """(sum_u a_u / (u + 1), sum_u a_u) over the steps u = lo .. hi (1 <= lo <= hi) with
    the weights a_u of `iterate` ("average": 1, "weighted": u, "weighted2": u^2), in
    closed form (`weighted_scale_sums`): the running sums' terms on R^n at p = 2 over
    sigma, and C2's over l1 / sigma (onlinepgs._learned_classes)."""
    cdef double sum_w
    if not 1 <= lo <= hi:
        raise ValueError(f"need 1 <= lo <= hi, got {lo}, {hi}")
    cdef double sum_wv = weighted_scale_sums(lo, hi, ITERATES[iterate], &sum_w)
    return sum_wv, sum_w


# the smallest M forgetting's renormalization leaves as it is (`end_steps` refreshes a
# smaller one from max |lambda_j|: onlinepgs._learned_classes follows it)
RENORM_M_FLOOR = M_FLOOR


def _zero_forget_steps(double forget, double sigma, double l1, str iterate, int64_t n,
                       double tau, double decay, double cum, double cum2,
                       bint until_renorm=False):
    """Forgetting at p = 2 in the global geometry: `n` steps of a problem whose gradients
    are zero, from the scalars (tau, G = decay, C = cum, C2 = cum2) before them, with the
    arithmetic of `end_steps` (_upkeep.pxd), bit for bit: G = gamma G, tau = gamma tau +
    1, l1's threshold, the renormalization (G back to 1, the threshold times G, an
    average's sums restarted), s = 1 / ((tau + 1) sigma / G) and the sums' terms a s / G
    (restarted past CUM_RANGE); `until_renorm`: stop after the first renormalization.
    Returns (steps, tau, decay, cum, cum2, s, renorms, g): g is the last
    renormalization's factor (0 without), renorms how many there were. A few ns a step
    (onlinepgs._learned_classes: at most a period of the renormalization's)."""
    cdef int code = ITERATES[iterate]
    cdef bint averaged = _averaged(code)
    cdef double thr = l1, s = 0.0, g = 0.0, wt, to_sum
    cdef int64_t i, renorms = 0, steps = 0
    cdef bint done = False
    with nogil:
        for i in range(n):
            decay *= forget
            tau = forget * tau + 1.0
            if l1 > 0.0:
                thr = (tau + 1.0) * sigma / decay * l1 / sigma
            if decay < RENORM_BELOW:
                if averaged:
                    cum = 0.0
                    cum2 = 0.0
                thr *= decay
                g = decay
                renorms += 1
                decay = 1.0
                done = until_renorm
            if code == ITERATE_WEIGHTED:
                wt = tau
            elif code == ITERATE_WEIGHTED2:
                wt = tau * tau
            else:
                wt = 1.0
            s = 1.0 / ((tau + 1.0) * sigma / decay)
            to_sum = wt * s / decay
            if averaged and to_sum * CUM_RANGE < cum:
                cum = 0.0
                cum2 = 0.0
            cum += to_sum
            cum2 += to_sum * thr
            steps += 1
            if done:
                break
    return steps, tau, decay, cum, cum2, s, renorms, g


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


def adaptive_gap_sum(double A, double l1, double c, double sigma, int64_t a, int64_t b,
                     int k):
    """sum_{t=a}^{b} t^k (A - l1 t)_+ / (sigma t + c): the adaptive geometry's lazy sum of
    an average between two touches (`ad_gap_sum`, _adaptive_avg.pxd), for its tests."""
    return ad_gap_sum(A, l1, c, sigma, a, b, k)
