# cython: language_level=3
"""The merge of distributed PGS rounds (`onlinepgs.dask`), apart from the pass.

A round of distributed training forks the driver's global state into lanes (`fork`), each
lane runs its slice of rows (`PGSState.run`), hands back its own changes (`delta_from`),
and the driver merges every lane's changes into the global state (`absorb`); a lane kept
for the next round is brought back to the global state in place (`sync_from`). The
functions work on the state through the declarations in _pgs.pxd: a merged entry goes
through the same one-coordinate update as a step (`_touch`, the l_q map of _mirror.pxd),
and a round ends with the step's upkeep of N and M (`upkeep_norms`, _upkeep.pxd).

`PGSState.fork`, `.delta_from`, `.sync_from` and `.absorb` call these functions: the
Python-visible API of the state is unchanged.
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int64_t

from onlinepgs._core._pgs cimport PGSState, Core
from onlinepgs._core._seen cimport _note_new, _seen_spend
from onlinepgs._core._touch cimport _averaged, _touch
from onlinepgs._core._upkeep cimport end_steps
from onlinepgs._options import PYTHON, dask_rules

cnp.import_array()


cdef inline (Py_ssize_t, Py_ssize_t) _entry(int64_t flat, Py_ssize_t K) noexcept nogil:
    """(coordinate, problem) of a flat entry ``coordinate * K + problem``. A 64-bit
    division costs tens of cycles, more than the rest of a merged entry's update: one
    problem (binary, regression) needs none."""
    if K == 1:
        return flat, 0
    return flat // K, flat % K


cdef const int64_t[::1] _checked_coords(PGSState state, coords):
    """coords as a view, checked to be sorted coordinates of the state (at both ends)."""
    cdef const int64_t[::1] cview = coords
    cdef Py_ssize_t count = cview.shape[0]
    if count and (cview[0] < 0 or cview[count - 1] >= state.dim):
        raise ValueError("coords must be sorted coordinates of this state")
    return cview


def fork(PGSState self):
    """A lane's starting state for one round of distributed training (`onlinepgs.dask`).

    The same dynamics (lambda, phi, N, M, s, t, the ball's radius) with every counter,
    statistic and averaged sum at zero: after `run`, the lane's counters are the round's
    increments and its averaged sums hold only its own iterates, each weighted by its
    local step count. A lane keeps no random iterate (the driver draws it per round, see
    `absorb`), so a "random" state forks into a "last" one. O(dim): two array copies.

    The lane scores its rows with this state's reported iterate combined with its own
    (`PGSState.reference`): the average of this state's iterates and the lane's so far,
    each weighted as its own sums weigh it (t^2 at the lane's step counts for
    "weighted2"), or this state's random iterate (drawn again only at the round's end).
    With one lane that is exactly the single process's reported iterate; with several,
    each lane's own steps stand in for the round's (the merge rescales them, see
    `onlinepgs.distributed.rounds.average_factor`).
    """
    # what lanes cannot merge exactly (l1, forgetting, coupled losses): the rules of
    # onlinepgs.dask, which refuses them before any work (onlinepgs._options)
    dask_rules(self.config(), PYTHON)
    cfg = self.config()
    if not _averaged(self.iterate):
        cfg["iterate"] = "last"
    lane = PGSState(**cfg, n_features=self.dim - 1)
    lane.lam_a[...] = self.lam_a
    if not self.p_is_two:
        lane.phi_a[...] = self.phi_a
    lane.norm_a[...] = self.norm_a
    lane.scale_a[...] = self.scale_a
    lane.s_a[...] = self.s_a
    lane.t = self.t
    lane.radius = self.radius
    lane.loss0_max = self.loss0_max
    lane.touches_since_exact = self.touches_since_exact
    lane.span = self.span
    lane.reference = self  # read-only while the lane runs (`_run_pass`)
    lane._set_seen(None, self._seen_coords(), self.seen.budget)
    lane._bind()  # 1/M and ||w_t||_p from N and t, as this state has them
    return lane


def delta_from(PGSState self, PGSState base, coords=None):
    """A lane's own changes since it forked `base`, in one pass (`onlinepgs.dask`).

    Returns ``(idx, dlam, avg_val)``: the flat entries ``coordinate * K + problem``
    where lambda moved (or, averaged, where the lazy sum saw a touch), the move divided
    by the lane's step weight ``t_step`` (its own share), and there the lane's averaged
    sum minus ``cum * phi_base`` (None when not averaged). Coordinates beyond
    ``base.dim`` count from zero. ``coords`` (sorted int64 coordinates), if given,
    limits the search to them: the columns of the lane's rows and the intercept's 0,
    which hold every coordinate a run can touch. Valid while M did not move in the
    lane (for p < 2 a refresh settles every coordinate in new units: the caller then
    sends the sums whole).
    """
    cdef Py_ssize_t K = self.n_problems, i, j, c, e, n = 0, count
    cdef Py_ssize_t base_dim = base.dim, S = self.n_fields, SB = base.n_fields
    cdef bint averaged = _averaged(self.iterate), p2 = self.p_is_two
    cdef bint every = coords is None
    cdef double inv_step = 1.0 / self.t_step, d, lam_b, phi_b, total, acc, cum
    cdef const int64_t[::1] cview
    cdef const double* lam
    cdef const double* blam
    cdef const double* cums
    if base.n_problems != K or base.p != self.p:
        raise ValueError("a lane's delta is taken against the state it forked")
    if every:
        count = self.dim
    else:
        cview = _checked_coords(self, coords)
        count = cview.shape[0]
    cdef cnp.ndarray idx_a = np.empty(count * K, dtype=np.int64)
    cdef cnp.ndarray dlam_a = np.empty(count * K)
    cdef cnp.ndarray avg_a = np.empty(count * K if averaged else 0)
    cdef int64_t[::1] idx = idx_a
    cdef double[::1] dlam = dlam_a
    cdef double[::1] avg = avg_a
    # raw pointers into the blocks: entry (j, c) starts at (j K + c) S; lambda is
    # field 0, phi field off_phi, the average's sum off_acc and its mark off_mark
    lam = &self.block[0, 0, 0]
    blam = &base.block[0, 0, 0]
    cums = &self.cum[0]
    with nogil:
        for i in range(count):
            j = i if every else cview[i]
            for c in range(K):
                e = j * K + c
                lam_b = blam[e * SB] if j < base_dim else 0.0
                d = lam[e * S] - lam_b
                acc = lam[e * S + self.off_acc] if averaged else 0.0
                if d == 0.0 and acc == 0.0:
                    continue
                idx[n] = e
                dlam[n] = d * inv_step
                if averaged:
                    # the lane's sums started at zero: C phi - acc (p = 2) or
                    # acc + phi (C - mark); C phi_base is sent as C
                    cum = cums[c]
                    if p2:
                        total = lam[e * S] * cum - acc
                        avg[n] = total - cum * lam_b
                    else:
                        phi_b = blam[e * SB + base.off_phi] if j < base_dim else 0.0
                        total = acc + lam[e * S + self.off_phi] * (
                            cum - lam[e * S + self.off_mark])
                        avg[n] = total - cum * phi_b
                n += 1
    # views, not copies: a fresh copy of each (MBs once a slice touches most
    # coordinates) costs more than the unused tail it would free
    return idx_a[:n], dlam_a[:n], (avg_a[:n] if averaged else None)


def sync_from(PGSState self, PGSState base, coords=None):
    """Make this lane state, kept from a round, what ``base.fork()`` would return.

    coords None: copy every coordinate into this state's arrays (a fork without
    allocating: memory already written once does not fault again). Sorted int64
    coordinates: copy only those, valid when since this state last equalled a fork of
    `base`'s earlier self they are the only coordinates either side changed (the
    merge's, which hold this lane's own) and neither side moved its scale M.
    """
    cdef Py_ssize_t K = self.n_problems, i, j, c, e, count, f
    cdef Py_ssize_t S = self.n_fields, SB = base.n_fields
    cdef const int64_t[::1] cview
    cdef bint every = coords is None
    cdef bint averaged = _averaged(self.iterate), p2 = self.p_is_two
    cdef double* lam
    cdef const double* blam
    cdef bint track
    if (base.dim != self.dim or base.n_problems != K or base.p != self.p
            or (self.n_rescales and not every)):
        raise ValueError("sync_from needs a lane of the same shape (that kept its "
                         "scale, for chosen coordinates)")
    if every:
        count = self.dim
    else:
        cview = _checked_coords(self, coords)
        count = cview.shape[0]
    lam = &self.block[0, 0, 0]
    blam = &base.block[0, 0, 0]
    # the merge's coordinates may be new to this lane: onto its list
    track = not every and _seen_spend(&self.seen, count)
    with nogil:
        for i in range(count):
            j = i if every else cview[i]
            if track:
                _note_new(&self.seen, lam, K, S, j)
            for c in range(K):
                e = j * K + c
                lam[e * S] = blam[e * SB]
                if not p2:
                    lam[e * S + self.off_phi] = blam[e * SB + base.off_phi]
                if averaged:
                    lam[e * S + self.off_acc] = 0.0
                    if not p2:
                        lam[e * S + self.off_mark] = 0.0
    if every:
        self._set_seen(None, base._seen_coords(), base.seen.budget)
    self.norm_a[...] = base.norm_a
    self.scale_a[...] = base.scale_a
    self.s_a[...] = base.s_a
    self.cum_a[...] = 0.0
    for name in ("regret_a", "sum_conj_a", "sum_step_loss_a"):
        getattr(self, name)[...] = 0.0
    self.sum_reg_a[...] = 0.0 if self.need_norm else np.nan
    self.t = base.t
    self.radius = base.radius
    self.loss0_max = base.loss0_max
    self.touches_since_exact = base.touches_since_exact
    self.span = base.span
    self.n_examples = self.n_mistakes = self.n_mistakes_reported = 0
    self.sum_weight = self.sum_loss = self.sum_weighted_loss = 0.0
    self.sum_weighted_loss_reported = self.own_weight = 0.0
    self.reference = base
    self.diverged = False
    self.diverged_row = 0
    self.n_rescales = 0
    self.n_restarts = 0
    self.t_step = 1
    self._bind()


def absorb(PGSState self, int64_t steps, double factor, list deltas, changed=None):
    """Merge one round of lanes into this, the driver's global state (`onlinepgs.dask`).

    deltas holds one tuple per lane, ``(idx, dlam, C, avg_idx, avg_val)``: flat entries
    ``coordinate * K + problem`` (int64) whose lambda moved by dlam in the lane; C
    (K,), the lane's running sum of weighted scales, which is the weight its averaged
    iterates put on every coordinate it left alone (whose phi is this state's at the
    round's start); and where the lane's averaged sums differ from ``C * phi``, the
    difference avg_val at avg_idx (every coordinate if the lane moved its scale M).
    The lanes' averaged sums are added scaled by ``factor`` (the caller makes the
    round's weights those of the ``steps`` steps it stands for; see onlinepgs.dask).

    In order: ``C * phi`` is added lazily through the running sum; each moved entry
    goes through the same update as a step (`_touch`: lambda, phi, the running N, the
    lazy averages settled first, the random iterate's copy-on-write); the rest of the
    averaged sums is added; then ``t += steps`` and the scalars follow as after a step:
    N kept exact on the same schedule, M refreshed if needed, new s_t, and the random
    iterate's reservoir at round granularity (the new iterate is kept with probability
    steps / t). The counters and statistics are plain attributes, merged by the caller;
    the caller sets the radius first (a ball of radius "auto" grows to the largest).

    changed, optional: a uint8 array with one entry per coordinate, set to 1 where a
    lane moved lambda (the merge's coordinates, for `sync_from`).
    """
    cdef Py_ssize_t K = self.n_problems, c, e, j, n
    cdef Py_ssize_t size = self.dim * K
    cdef const int64_t[::1] idx
    cdef const double[::1] vals
    cdef const double[::1] lane_cum
    cdef int* resc = &self.flag_rescale[0]
    cdef int* mov = &self.flag_moved[0]
    cdef bint averaged = _averaged(self.iterate)
    cdef Core core
    cdef unsigned char[::1] marks_view
    cdef unsigned char* marks = NULL
    cdef bint track
    if steps < 0:
        raise ValueError("steps must be >= 0")
    if changed is not None:
        marks_view = changed
        if marks_view.shape[0] != self.dim:
            raise ValueError(f"changed needs {self.dim} entries, one per coordinate")
        marks = &marks_view[0]
    for d in deltas:
        # a lane's averaged entries are its moved ones unless it moved M: check once
        for arr in ((d[0],) if d[3] is d[0] else (d[0], d[3])):
            arr = np.asarray(arr)
            if arr.size and (arr.min() < 0 or arr.max() >= size):
                raise ValueError(f"a lane's entries reach past this state's {self.dim} "
                                 "coordinates: grow it first (ensure_dim)")
    for c in range(K):
        resc[c] = 0
        mov[c] = 0
    if averaged:
        for d in deltas:
            lane_cum = d[2]
            for c in range(K):
                self.cum[c] += factor * lane_cum[c]
    core = self._core()
    for d in deltas:
        idx = d[0]
        vals = d[1]
        n = idx.shape[0]
        track = _seen_spend(&self.seen, n)
        with nogil:
            for e in range(n):
                j, c = _entry(idx[e], K)
                if track:
                    _note_new(&self.seen, core.lam, K, core.S, j)
                _touch(core, j, c, -vals[e], &resc[c])
                mov[c] = 1
                if marks != NULL:
                    marks[j] = 1
        self.touches_since_exact += n
    if averaged:
        for d in deltas:
            idx = d[3]
            vals = d[4]
            n = idx.shape[0]
            with nogil:
                for e in range(n):
                    j, c = _entry(idx[e], K)
                    # the lazy sum is C phi - acc for p = 2, acc + phi (C - mark) else
                    if self.p_is_two:
                        self.acc[j, c] -= factor * vals[e]
                    else:
                        self.acc[j, c] += factor * vals[e]
    if steps > 0:
        end_steps(self, resc, mov, steps, <double>steps, False)
