# cython: language_level=3
"""One event at a time: a dict of features as the core's one-row input, its step and its
scores (the learners' ``learn_one`` / ``predict_one``, onlinepgs._event).

`EventRow` holds the row of the latest event in buffers it keeps from event to event: the
dict is read by the records' own rules (`_hashing._push_record`), hashed into the
learner's 2**n_bits columns with its interactions by the chunks' own row builder
(`_features.build_row`), so a row is bit for bit the row `partial_fit` makes of the same
record; the step is the core's pass over that one row (`_pgs.run_row`) and the scores
are read from the lazy state at the row's coordinates (`_readout._read_scores`). Nothing
here grows with the model's width, and an event costs no NumPy call.
"""
cimport cython
import numpy as np
cimport numpy as cnp
from libc.math cimport isfinite, exp, INFINITY
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int32_t, int64_t, INT64_MAX
from libc.stdlib cimport realloc, free
from libc.string cimport memcpy
from cpython.dict cimport PyDict_Next, PyDict_GetItem
from cpython.object cimport PyObject


cdef extern from "Python.h":
    # the instance's __dict__ without looking the attribute up in its class's MRO (an
    # event's cost; the learners' classes do not redefine __dict__)
    dict PyObject_GenericGetDict(object obj, void* context)
from cpython.ref cimport Py_INCREF, Py_DECREF
from cpython.float cimport PyFloat_AsDouble

from onlinepgs._core._hashing cimport _Entries, _push_record, _unchanging_item
from onlinepgs._core._features cimport (MAX_ORDER, RowBuilder, builder_init,
                                         builder_reserve, builder_release, check_row_bound,
                                         row_bound, build_row)
from onlinepgs._core._pgs cimport PGSState, run_row, RowPasses, Readout
from onlinepgs._core._columns cimport ColumnMap
from onlinepgs._core._readout cimport _readout, _read_scores

from onlinepgs._race import SigmaSchedule
from onlinepgs._eta_race import EtaSchedule

cnp.import_array()


cdef extern from *:
    """
    /* A dict's version tag (PEP 509): a new value each time the dict changes, never
       reused; deprecated from CPython 3.12, where EventRow holds the items instead */
    #if PY_VERSION_HEX < 0x030C0000
    #define ONLINEPGS_DICT_TAGS 1
    static inline uint64_t onlinepgs_dict_tag(PyObject* d) {
        return ((PyDictObject*)d)->ma_version_tag;
    }
    #else
    #define ONLINEPGS_DICT_TAGS 0
    static inline uint64_t onlinepgs_dict_tag(PyObject* d) { (void)d; return 0; }
    #endif
    """
    bint DICT_TAGS "ONLINEPGS_DICT_TAGS"
    uint64_t _dict_tag "onlinepgs_dict_tag"(object d)


@cython.final
cdef class EventRow:
    """The one-row CSR input of the latest event (hashed, with the interactions).

    Parameters
    ----------
    n_bits : int in [1, 30]
        The learner's columns are 2**n_bits (the per-event path needs hashing: int32
        columns and a width that no event grows).
    hash_seed : int
    letters, orders : the interactions' arrays (`onlinepgs.features._letters`)

    Attributes ``data``, ``indices`` (int32) and ``indptr`` are NumPy copies of the row
    as the state takes it (over its slots, for a learner over the columns seen), for the
    paths that want a matrix (the errors of a diverging step). ``columns``: the column
    map of a learner whose states are over the columns its rows reach
    (`onlinepgs._columns_seen`), or None: the row's columns are then given as slots (new
    ones where it learns, looked up where it is scored) and the states it learns on grown
    to hold them.
    """
    cdef _Entries entries
    cdef uint32_t seed
    cdef cnp.ndarray letters_a, orders_a
    # the row, room for `room` entries, and its builder (the chunks' own, grown as the
    # events need)
    cdef double* vals
    cdef int32_t* cols
    cdef Py_ssize_t room
    cdef RowBuilder build
    cdef readonly Py_ssize_t nnz, n_entries
    # the dict the row was made of, and its version tag then (CPython < 3.12) or its
    # items' objects then (held: 2 references an item), for `read` to know the same dict
    # again: predict_one then learn_one of one event read it once
    cdef object last_x
    cdef uint64_t last_tag
    cdef PyObject** held
    cdef Py_ssize_t n_held, held_room
    # the pass's one-row arguments
    cdef int64_t ptr[2]
    cdef double[::1] y_v, sw_v, scores_v
    # the steps' passes, kept from event to event, and the list of one state that `step`
    # gives them
    cdef RowPasses passes
    cdef list one
    cdef int64_t[::1] order_v
    cdef cnp.ndarray y_a, sw_a, order_a, scores_a
    # the row over the slots of `columns`: at_slots 0 where it is not (the row's own
    # arrays are the state's), 1 looked up (entries on a column without slot left out;
    # valid while the map holds `looked_at` slots: it only grows), 2 given slots
    cdef public ColumnMap columns
    cdef double* svals
    cdef int32_t* scols
    cdef Py_ssize_t sroom, looked_at
    cdef int64_t sptr[2]
    cdef int at_slots

    def __cinit__(self, int n_bits, uint32_t hash_seed, letters, orders):
        if not 1 <= n_bits <= 30:
            raise ValueError(f"an event row needs n_bits in [1, 30], got {n_bits}")
        self.entries = _Entries()
        self.seed = hash_seed
        self.letters_a = np.ascontiguousarray(letters, dtype=np.uint8).reshape(-1, MAX_ORDER)
        self.orders_a = np.ascontiguousarray(orders, dtype=np.int32)
        if self.letters_a.shape[0] != self.orders_a.shape[0]:
            raise ValueError("letters must have shape (n_interactions, 3)")
        builder_init(&self.build, n_bits, <const uint8_t*>cnp.PyArray_DATA(self.letters_a),
                     <const int32_t*>cnp.PyArray_DATA(self.orders_a),
                     self.orders_a.shape[0])
        self.y_a, self.sw_a = np.zeros(1), np.ones(1)
        self.order_a = np.zeros(1, dtype=np.int64)
        self.y_v, self.sw_v, self.order_v = self.y_a, self.sw_a, self.order_a
        self.scores_a = np.zeros(1)
        self.scores_v = self.scores_a
        self.passes = RowPasses()
        self.ptr[0] = 0
        self.ptr[1] = 0

    def __dealloc__(self):
        cdef Py_ssize_t i
        for i in range(self.n_held):  # (no Python attribute here: they may be gone)
            Py_DECREF(<object>self.held[i])
        free(self.held)
        free(self.vals)
        free(self.cols)
        free(self.svals)
        free(self.scols)
        builder_release(&self.build)

    cdef int _reserve(self, Py_ssize_t entries, Py_ssize_t bound) except -1:
        """Room for a row of `entries` entries that makes at most `bound` (grown only)."""
        cdef void* p
        builder_reserve(&self.build, entries, bound)
        if bound > self.room:
            p = realloc(self.vals, bound * sizeof(double))
            if p == NULL:
                raise MemoryError()
            self.vals = <double*>p
            p = realloc(self.cols, bound * sizeof(int32_t))
            if p == NULL:
                raise MemoryError()
            self.cols = <int32_t*>p
            self.room = bound
        return 0

    cpdef Py_ssize_t read(self, object x) except -1:
        """Make `x` (one record: a dict) the row; returns its entries (0: x has no
        feature). Errors are the records' (`onlinepgs._row_errors.RowError` at row 0),
        raised before the row changes."""
        cdef Py_ssize_t n, bound
        cdef const uint8_t* ns
        cdef bint plain = False
        if x is self.last_x and self._holds(<dict>x):
            return self.nnz  # the same keys and values, the same objects: the same row
        self._let_go()
        self.at_slots = 0
        self.entries.truncate(0)
        n = _push_record(x, 0, self.seed, self.entries, None, &plain)
        self.n_entries = n
        if n == 0:
            self.nnz = 0
            self.ptr[1] = 0
            return 0
        ns = self.entries.ns.data.as_uchars
        bound = row_bound(&self.build, ns, 0, n)
        check_row_bound(bound, "the event")
        self._reserve(n, bound)
        self.nnz = build_row(&self.build, ns, self.entries.hashes.data.as_uints,
                             self.entries.values.data.as_doubles, 0, n, self.vals,
                             self.cols, NULL)
        self.ptr[1] = self.nnz
        if plain and self._hold(<dict>x):
            self.last_x = x
        return self.nnz

    cdef bint _hold(self, dict x) except -1:
        """Hold x, a dict whose keys and values are objects that cannot change (str or int
        keys, float, int, str, bool or None values, exactly: `_push_record` looked at
        them as it read x; a namespace, a dict, can change). Where dicts have version
        tags, the tag (of a dict kept alive by `last_x`) says whether x changed since;
        else its items are held."""
        cdef Py_ssize_t pos = 0, n = 0
        cdef PyObject* key
        cdef PyObject* value
        cdef void* room
        if DICT_TAGS:
            self.last_tag = _dict_tag(x)
            return True
        if 2 * len(x) > self.held_room:
            room = realloc(self.held, 2 * len(x) * sizeof(PyObject*))
            if room == NULL:
                raise MemoryError()
            self.held, self.held_room = <PyObject**>room, 2 * len(x)
        while PyDict_Next(x, &pos, &key, &value):
            if not _unchanging_item(key, value):
                self._let_go()
                return False
            Py_INCREF(<object>key)
            Py_INCREF(<object>value)
            self.held[n] = key
            self.held[n + 1] = value
            n += 2
            self.n_held = n
        return True

    cdef bint _holds(self, dict x):
        """Whether x holds the very objects held, in the same order (where dicts have
        version tags: whether x, the dict held, has not changed since)."""
        cdef Py_ssize_t pos = 0, n = 0
        cdef PyObject* key
        cdef PyObject* value
        if DICT_TAGS:
            return _dict_tag(x) == self.last_tag
        if 2 * len(x) != self.n_held:
            return False
        while PyDict_Next(x, &pos, &key, &value):
            if key != self.held[n] or value != self.held[n + 1]:
                return False
            n += 2
        return True

    cdef void _let_go(self):
        cdef Py_ssize_t i
        for i in range(self.n_held):
            Py_DECREF(<object>self.held[i])
        self.n_held = 0
        self.last_x = None

    cpdef bint finite(self):
        """Whether every value of the row is finite (an interaction's product may
        overflow although its factors did not)."""
        cdef Py_ssize_t e
        for e in range(self.nnz):
            if not isfinite(self.vals[e]):
                return False
        return True

    cdef int _slotted(self, bint give) except -1:
        """The row over the map's slots, where there is a map: `give` (a step) gives its
        columns slots, else (a score) looks them up."""
        cdef void* p
        if self.columns is None or self.at_slots == 2 or (
                self.at_slots == 1 and not give and self.looked_at == self.columns.n_slots):
            return 0
        if self.nnz > self.sroom:
            p = realloc(self.svals, self.nnz * sizeof(double))
            if p == NULL:
                raise MemoryError()
            self.svals = <double*>p
            p = realloc(self.scols, self.nnz * sizeof(int32_t))
            if p == NULL:
                raise MemoryError()
            self.scols = <int32_t*>p
            self.sroom = self.nnz
        self.sptr[0] = 0
        if give:
            self.columns.slots_into(self.cols, self.nnz, self.scols)
            if self.nnz:
                memcpy(self.svals, self.vals, self.nnz * sizeof(double))
            self.sptr[1] = self.nnz
            self.at_slots = 2
        else:
            self.sptr[1] = self.columns.found_into(self.cols, self.vals, self.nnz,
                                                   self.scols, self.svals)
            self.looked_at = self.columns.n_slots
            self.at_slots = 1
        return 0

    cdef inline const double* _vals(self):
        return self.svals if self.at_slots else self.vals

    cdef inline const int32_t* _cols(self):
        return self.scols if self.at_slots else self.cols

    cdef inline int64_t* _ptr(self):
        if self.at_slots:
            return &self.sptr[0]
        return &self.ptr[0]

    cdef Py_ssize_t _width(self, Py_ssize_t n_cols, list states) except -1:
        """The width a step on the row takes (the slots, over the columns seen: each of
        `states` grown to hold them, as a training call grows a race's runs)."""
        cdef PGSState state
        if self.columns is None:
            return n_cols
        self._slotted(True)
        for state in states:
            if self.columns.n_slots > state.dim - 1:
                from onlinepgs._columns_seen import grow_states
                grow_states(states, self.columns)
                break
        return self.columns.n_slots

    @property
    def data(self):
        self._slotted(True)  # (as a step takes it)
        cdef Py_ssize_t n = self._ptr()[1]
        return np.array(<double[:n]>self._vals()) if n else np.zeros(0)

    @property
    def indices(self):
        self._slotted(True)
        cdef Py_ssize_t n = self._ptr()[1]
        return (np.array(<int32_t[:n]>self._cols()) if n
                else np.zeros(0, dtype=np.int32))

    @property
    def indptr(self):
        self._slotted(True)
        return np.array([0, self._ptr()[1]], dtype=np.int64)

    cpdef int learn(self, PGSState state, Py_ssize_t n_cols, double y, double weight,
                    bint classifier, power_sum=None) except -1:
        """One step of `state` on the row: target y (+-1, a class index, or a value),
        sample weight `weight`; `power_sum`, the row's sum_j |x_j|^q where partial_fit
        passes it (NumPy's powers, `PGSLearner._row_power_sums`), else None (the loop
        takes it). The caller reads ``state.diverged``."""
        cdef double rps = 0.0
        cdef const double* rps_ptr = NULL
        if power_sum is not None:
            rps = power_sum
            rps_ptr = &rps
        n_cols = self._width(n_cols, [state])
        self.y_v[0] = y
        self.sw_v[0] = weight
        run_row(state, self._vals(), self._cols(), self._ptr(), n_cols, self.y_v, self.sw_v,
                self.order_v, classifier, rps_ptr)
        return 0

    cdef int learn_each(self, list states, Py_ssize_t n_cols, double y, double weight,
                        bint classifier) except -1:
        """`learn` of each state of `states` (a race's live runs, in their order; the
        one installed state) under one release of the GIL, each state's pass kept from
        event to event (`_pgs.RowPasses`); the caller reads each one's ``diverged``."""
        n_cols = self._width(n_cols, states)
        self.y_v[0] = y
        self.sw_v[0] = weight
        self.passes.step(states, self._vals(), self._cols(), self._ptr(), n_cols, self.y_v,
                         self.sw_v, self.order_v, classifier)
        return 0

    cpdef bint step(self, PGSState state, Py_ssize_t n_cols, double y, double weight,
                    bint classifier) except -1:
        """`learn`, then whether the state is sound: False where the step diverged or
        `state_finite` fails (the learner's Python then raises its error)."""
        if self.one is None or self.one[0] is not state:
            self.one = [state]
        self.learn_each(self.one, n_cols, y, weight, classifier)
        return not state.diverged and self.state_finite(state)

    cdef int _scores_into(self, PGSState state, double* out) except -1:
        cdef Readout rd = _readout(state, state.iterate)
        self._slotted(False)
        cdef const double* vals = self._vals()
        cdef const int32_t* cols = self._cols()
        cdef int64_t* ptr = self._ptr()
        with nogil:
            _read_scores(rd, vals, cols, ptr, 1, state.dim - 1,
                         state.fit_intercept, state.intercept_scaling, out)
        return 0

    cdef double* _scores_room(self, Py_ssize_t K) except NULL:
        if self.scores_v.shape[0] < K:
            self.scores_a = np.zeros(K)
            self.scores_v = self.scores_a
        return &self.scores_v[0]

    cpdef object label(self, PGSState state, list labels):
        """`predict` of the row: labels[1] where the one score is positive (else
        labels[0]), the first argmax's label of K scores; None where a score is not
        finite (the learner's Python then reads the model, which says why)."""
        cdef Py_ssize_t K = state.n_problems, c, best = 0
        cdef double* out = self._scores_room(K)
        self._scores_into(state, out)
        for c in range(K):
            if not isfinite(out[c]):
                return None
            if out[c] > out[best]:
                best = c
        if K == 1:  # (a model of one class: that class)
            return labels[1] if out[0] > 0 and len(labels) == 2 else labels[0]
        return labels[best]

    cpdef object proba(self, PGSState state, list labels, int multi_class_code):
        """`predict_proba` of the row as a dict {label: probability} (the formulas of
        `onlinepgs.model.proba_from_scores` in C, `event_proba`); None where a score is
        not finite."""
        cdef Py_ssize_t K = state.n_problems, c
        cdef double* out = self._scores_room(K)
        cdef double top, total = 0.0, z
        self._scores_into(state, out)
        for c in range(K):
            if not isfinite(out[c]):
                return None
        if K == 1 and len(labels) == 1:  # a model of one class
            return {labels[0]: 1.0}
        if K == 1:
            z = _sigmoid(out[0])
            return {labels[0]: 1.0 - z, labels[1]: z}
        if multi_class_code == 1:
            top = out[0]
            for c in range(K):
                if out[c] > top:
                    top = out[c]
            for c in range(K):
                out[c] = exp(out[c] - top)
                total += out[c]
            return {labels[c]: out[c] / total for c in range(K)}
        for c in range(K):
            out[c] = _sigmoid(out[c])
            total += out[c]
        if total > 0:
            return {labels[c]: out[c] / total for c in range(K)}
        return {labels[c]: 1.0 / K for c in range(K)}

    cpdef object scores(self, PGSState state):
        """The row's K scores by the reported iterate, read from the lazy state at its
        coordinates (`PGSState.scores` of the one row, bit for bit): a float for K = 1,
        else a list."""
        cdef Py_ssize_t K = state.n_problems, c
        cdef double* out = self._scores_room(K)
        self._scores_into(state, out)
        if K == 1:
            return out[0]
        return [out[c] for c in range(K)]

    cpdef bint state_finite(self, PGSState state):
        """`onlinepgs.pgs._finite_after` for a call on this one row (`_finite_at_row`)."""
        return _finite_at_row(state, self._cols(), self._ptr()[1])


cdef bint _finite_at_row(PGSState state, const int32_t* cols, Py_ssize_t nnz) except -1:
    """`onlinepgs.pgs._finite_after` for a call on the one row of columns `cols`, in
    O(nnz K): the state's scalars, then its fields at the intercept and the row's
    coordinates (every field where the state is as small as the row), and the
    progressive loss (`PGSLearner._check_finite`'s first test)."""
    cdef Py_ssize_t K = state.n_problems, S = state.n_fields
    cdef const double* blk = <const double*>cnp.PyArray_DATA(state.block_a)
    if not isfinite(state.sum_weighted_loss):
        return False
    # the per-problem scalars the core steps with (s_a, cum_a, cum2_a, norm_a, scale_a,
    # as bound to the state's views), read through the views: no object an array
    if not (_finite_run(&state.s[0], state.s.shape[0])
            and _finite_run(&state.cum[0], state.cum.shape[0])
            and _finite_run(&state.cum2[0], state.cum2.shape[0])
            and _finite_run(&state.norm_sum[0], state.norm_sum.shape[0])
            and _finite_run(&state.mscale[0], state.mscale.shape[0])):
        return False
    if cnp.PyArray_SIZE(state.block_a) <= 4 * (nnz + 1):
        return _all_finite(state.block_a) and _all_finite(state.snap_a)
    return _finite_rows(blk, cols, nnz, K * S)


# why `test_then_train` stopped before the end (0: it did not)
STOP_SCORE = 1  # a score of the row is not finite: nothing done on it
STOP_UNSOUND = 2  # its step diverged, or left the state not finite
STOP_RUNAWAY = 3  # its progressive loss ran away (`onlinepgs._runaway.check`)


def test_then_train(PGSState state, const double[::1] data, const int32_t[::1] indices,
                    const int64_t[::1] indptr, const int64_t[::1] rows,
                    const uint8_t[::1] learn, Py_ssize_t n_cols, const double[::1] y,
                    const double[::1] sw, bint classifier, double[:, ::1] scores,
                    zero_loss=None, double ratio=0.0, double seen=0.0):
    """Test then train the rows `rows` of a canonical CSR batch (int32 columns below
    n_cols), in order: the K scores of row rows[k] by the reported model as it stands
    into scores[k] (`PGSState.scores` of the row, bit for bit), then, where learn[k], its
    step (target y[k], sample weight sw[k]) as `PGSLearner.partial_fit` on that one row
    takes it, and that call's checks: the step did not diverge, the state is finite
    (`_finite_at_row`), and, with `zero_loss` (each row's loss of predicting 0: the
    global geometry on a ball), its progressive loss is at most `ratio` times the
    largest such loss so far (`seen` before the batch), as `onlinepgs._runaway.check`
    judges a call. One core call a row, without the per-call work of the learner's
    Python (`onlinepgs serve --learn`).

    Returns ``(done, stop, seen, loss_before, weight_before)``: the rows done, why it
    stopped at row rows[done] (0: it did not, else STOP_*), the runaway check's `seen`
    and the state's sum_weighted_loss_reported and sum_weight before that row (the
    learner's Python then words the error, or takes the row, from there)."""
    cdef Py_ssize_t k, n = rows.shape[0], K = state.n_problems, c
    cdef int64_t i, start
    cdef int64_t ptr[2]
    cdef double[::1] y1 = np.zeros(1), sw1 = np.ones(1)
    cdef int64_t[::1] order1 = np.zeros(1, dtype=np.int64)
    cdef const double[::1] zero
    cdef bint check = zero_loss is not None
    cdef double loss_before = 0.0, weight_before = 0.0, z, weight, mean
    cdef const double* vals
    cdef const int32_t* cols
    cdef Readout rd
    if check:
        zero = zero_loss
    if scores.shape[0] < n or scores.shape[1] != K or learn.shape[0] < n or (
            y.shape[0] < n or sw.shape[0] < n):
        raise ValueError("scores, learn, y and sw need a row for each of rows")
    if n_cols + 1 > state.dim:
        raise ValueError("state dimension too small for the data")
    ptr[0] = 0
    for k in range(n):
        i = rows[k]
        if i < 0 or i + 1 >= indptr.shape[0] or indptr[i] > indptr[i + 1] or (
                indptr[i + 1] > indices.shape[0] or indptr[i + 1] > data.shape[0]):
            raise ValueError(f"row {i} is not a row of the batch")
        start = indptr[i]
        ptr[1] = indptr[i + 1] - start
        vals = &data[start] if ptr[1] else NULL
        cols = &indices[start] if ptr[1] else NULL
        rd = _readout(state, state.iterate)
        with nogil:
            _read_scores(rd, vals, cols, ptr, 1, state.dim - 1, state.fit_intercept,
                         state.intercept_scaling, &scores[k, 0])
        for c in range(K):
            if not isfinite(scores[k, c]):
                return k, STOP_SCORE, seen, loss_before, weight_before
        if not learn[k]:
            continue
        loss_before, weight_before = state.sum_weighted_loss_reported, state.sum_weight
        y1[0] = y[k]
        sw1[0] = sw[k]
        run_row(state, vals, cols, ptr, n_cols, y1, sw1, order1, classifier, NULL)
        if state.diverged or not _finite_at_row(state, cols, ptr[1]):
            return k, STOP_UNSOUND, seen, loss_before, weight_before
        if check:  # `onlinepgs._runaway.check` of a call on this row
            z = zero[k]
            if weight_before > 0 and seen > z:
                z = seen
            weight = state.sum_weight - weight_before
            if weight > 0 and z > 0:
                mean = (state.sum_weighted_loss_reported - loss_before) / weight
                if isfinite(mean) and mean > ratio * z:
                    return k, STOP_RUNAWAY, seen, loss_before, weight_before
            seen = z
    return n, 0, seen, loss_before, weight_before


cdef bint _as_double(object value, double* out):
    """A float or an int (NumPy's float64 is a float) as a double into out; False for
    anything else (the learner's Python then reads and words it) and for an int beyond
    the doubles."""
    if isinstance(value, float):
        out[0] = PyFloat_AsDouble(value)
        return True
    if not isinstance(value, int):
        return False
    try:
        out[0] = value
    except OverflowError:
        return False
    return True


cdef uint64_t _EXPONENT = 0x7FF0000000000000  # a double's exponent bits


cdef inline uint64_t _beyond(const double* values, Py_ssize_t n) noexcept nogil:
    """Not 0 where one of the n doubles is not finite (every exponent bit set: inf, NaN),
    read as integers without a branch an entry, so that the compiler takes them 4 at a
    time (each run of a race looks at its state at the event's coordinates: K S an
    entry)."""
    cdef Py_ssize_t i
    cdef uint64_t bits, beyond = 0
    for i in range(n):
        memcpy(&bits, &values[i], sizeof(uint64_t))
        beyond |= (bits & _EXPONENT) == _EXPONENT
    return beyond


cdef inline bint _finite_run(const double* values, Py_ssize_t n) noexcept nogil:
    """Whether the n doubles are finite."""
    return _beyond(values, n) == 0


cdef inline bint _finite_rows(const double* blk, const int32_t* cols, Py_ssize_t nnz,
                              Py_ssize_t width) noexcept nogil:
    """Whether the `width` doubles of coordinate 0 (the intercept's) and of each column
    + 1 in cols are finite: one pass, no branch an entry (a race's runs each look at
    theirs on every event)."""
    cdef Py_ssize_t e, i
    cdef const double* at
    cdef uint64_t bits, beyond = _beyond(blk, width)
    for e in range(nnz):  # (`_beyond` inlined: a call an entry costs more than its loop)
        at = blk + (<Py_ssize_t>cols[e] + 1) * width
        for i in range(width):
            memcpy(&bits, &at[i], sizeof(uint64_t))
            beyond |= (bits & _EXPONENT) == _EXPONENT
    return beyond == 0


cdef bint _all_finite(object arr) except -1:
    """Whether a C-contiguous float64 array of the state is all finite (None: yes)."""
    cdef cnp.ndarray a
    if arr is None:
        return True
    a = arr
    if not (cnp.PyArray_IS_C_CONTIGUOUS(a) and cnp.PyArray_TYPE(a) == cnp.NPY_DOUBLE):
        return bool(np.isfinite(a).all())
    return _finite_run(<const double*>cnp.PyArray_DATA(a), cnp.PyArray_SIZE(a))


cdef inline double _sigmoid(double z) noexcept:
    cdef double ez
    if z >= 0:
        return 1.0 / (1.0 + exp(-z))
    ez = exp(z)
    return ez / (1.0 + ez)


cdef struct _Family:
    # a family of runs of the leader rule an `EventPath` holds (`_hold_families`): its
    # live runs are ruled[first:first + n], leader_at its judged leader's index (-1: not
    # live); its window's start and the check that ends it, the evidence a lead change
    # needs, and whether its rate is not the race of eta's default (its ties)
    Py_ssize_t first, n, leader_at
    int64_t since
    double check_at, evidence
    bint not_default


@cython.final
cdef class EventPath:
    """The hot path of one event for a learner's installed model (onlinepgs._event): its
    checks of the event and the label, the row read, the step, the prediction, the model
    installed, without the Python of the learner's general path. It holds no reference
    to the learner (which holds it through a weak dict): the learner is passed in.

    `learn`, `label` and `proba` return NotImplemented where the learner's Python takes
    the event (a model installed since, a changed parameter, a check of the race of
    sigma, an error to word): nothing has changed then.
    """
    cdef public EventRow row
    cdef public object params, classes, read_params, train_lock, state_lock
    # the locks' bound methods, taken once (not looked up each event)
    cdef object train_acquire, train_release, state_acquire, state_release
    cdef public tuple names, fitted
    # whether the learner's parameters the state depends on were those it was fitted
    # with when this path was made: a learner drops its path when a parameter is set
    # (`EventLearner.__setattr__`), so this is not compared again each event
    cdef public bint params_ok
    cdef public dict codes
    cdef public list labels
    cdef public int mc
    cdef public bint classifier, numpy_powers
    cdef public Py_ssize_t n_cols
    # The race (sigma="auto") as this path holds it between two of its checks (`_hold`):
    # read from its Python objects when the path first meets it, then kept here and
    # moved by each event (its row count). A check, a fork, a duel's judgement or a run
    # dropped go through the race's Python (`SigmaRace.advance`), which installs the
    # model anew (a new path), or drops this hold (`_race_step`); a row count that is not
    # the one this path left (a call that trained the race otherwise) reads it again.
    cdef object race, race_states
    cdef list steppers  # the live runs' states, in the order of their ids
    cdef int64_t race_rows  # race.n_rows as this path left it
    cdef int64_t race_check  # the row of the race's next check (INT64_MAX: none)
    # `SigmaSchedule.leader`'s rule between checks, its inputs read once: the live runs
    # in the order of the schedule's runs (its ties), each one's marks and sigma; a
    # race of eta before its choice (`EtaSchedule.leader`) is one such group of runs a
    # family, the family leaders then compared over the choice's window (`eta_mark_at`:
    # the window's start, INT64_MAX where the race is a sigma race)
    cdef int rule
    cdef list ruled
    # 5 a ruled run: sum_weight, sum_weighted_loss at its family's mark; -sigma; the
    # same two sums at the race of eta's mark (0 without)
    cdef double* marks
    cdef Py_ssize_t n_ruled
    cdef _Family* families
    cdef Py_ssize_t n_families
    cdef int64_t eta_mark_at

    def __dealloc__(self):
        free(self.marks)
        free(self.families)

    def __reduce__(self):
        # a copy or an unpickled learner makes its own path at its next event
        return (_no_path, ())

    cdef inline bint _current(self, dict d):
        # (a learner's states expanded to the width, `PGSLearner._unmap`, drop the map)
        return (d.get("_state_params") is self.params and d.get("classes_") is self.classes
                and d.get("_columns") is self.row.columns)

    def current(self, est):
        """Whether this path is the one of `est`'s installed model."""
        return self._current(est.__dict__)

    def hold_locks(self, train_lock, state_lock):
        """The learner's training and state locks (`_base._lock`), for each event."""
        self.train_lock, self.state_lock = train_lock, state_lock
        self.train_acquire, self.train_release = train_lock.acquire, train_lock.release
        self.state_acquire, self.state_release = state_lock.acquire, state_lock.release

    cdef inline bint _read(self, object x) except -1:
        """Whether x is a dict the row could take (False: the learner words the error)."""
        if type(x) is not dict:
            return False
        try:
            self.row.read(x)
        except ValueError:
            return False
        return self.row.n_entries > 0 and self.row.finite()

    def learn(self, est, x, y, w):
        """`learn_one`: the event's step on the installed state, or on each run of its
        race on a row that is no check of the race's schedule."""
        cdef dict d = PyObject_GenericGetDict(est, NULL)
        cdef double target, weight
        cdef PGSState state
        if not (_as_double(w, &weight) and 0.0 <= weight < INFINITY):
            return NotImplemented
        self.train_acquire()
        try:
            race = d.get("_race")
            # the model this path was made for (a call in another thread may have
            # installed another while this one waited), and its parameters
            if not self._current(d) or not self.params_ok or self.numpy_powers or (
                    race is not None and not self._between_checks(race)):
                return NotImplemented
            if self.classifier:
                try:
                    code = self.codes.get(y)
                except TypeError:
                    return NotImplemented
                if code is None:
                    return NotImplemented
                target = code
            elif not (_as_double(y, &target) and isfinite(target)):
                return NotImplemented
            self.state_acquire()
            try:
                state = d["_state"]
                if not isfinite(state.sum_weight + weight) or not self._read(x):
                    return NotImplemented
                if race is not None:
                    state = self._race_step(est, race, target, weight)
                    d["_state"] = state
                elif not self.row.step(state, self.n_cols, target, weight, self.classifier):
                    est._event_unsound(self, state, weight)  # raises the learner's error
                # the model installed as partial_fit installs it (its cache emptied
                # under the state lock, where `_make_model` fills it)
                cache = d["_cache"]
                if cache:
                    d["_cache"] = {}
                d["n_iter_"] = d["n_iter_"] + 1
                d["t_"] = state.t
            finally:
                self.state_release()
        finally:
            self.train_release()
        return est

    cdef bint _between_checks(self, race) except -1:
        """Whether the race's next row is no check of its schedule (`SigmaRace.advance`
        over it only trains its runs), batch_size being 1: the race held (`_hold`)."""
        if race is not self.race or race.n_rows != self.race_rows or (
                race.states is not self.race_states):
            self._hold(race)
        return self.race_rows + 1 < self.race_check

    cdef int _hold(self, race) except -1:
        """Read the race's live runs, the row of its next check and the inputs of its
        leader rule from its Python objects (see the attributes)."""
        cdef dict states = race.states
        self.race = None
        schedule = race.schedule
        check = None if schedule.settled else schedule.check_at
        self.race_check = (INT64_MAX if check is None or check == INFINITY
                           else <int64_t>check)
        self.steppers = [states[rid] for rid in sorted(states)]
        self.eta_mark_at = INT64_MAX
        eta_race = None
        if type(schedule) is EtaSchedule:
            if schedule.eta is None:  # every family's runs, their leaders compared
                eta_race = schedule
                families = list(schedule.families.values())
                self.eta_mark_at = schedule.mark_at
            else:
                families = [schedule.families[schedule.eta]]  # the kept family's runs
        else:
            families = [schedule] if type(schedule) is SigmaSchedule else []
        self.rule = _RULE_ONE if len(states) == 1 else (
            _RULE_SIGMA if families else _RULE_RACE)
        self.ruled, self.n_ruled, self.n_families = [], 0, 0
        if self.rule == _RULE_SIGMA:
            self._hold_families(families, states, eta_race)
            if self.n_ruled == 0:
                self.rule = _RULE_RACE  # (no live run the schedule knows: its own rule)
        self.race, self.race_states, self.race_rows = race, states, race.n_rows
        return 0

    cdef int _hold_families(self, list families, dict states, eta_race) except -1:
        """The leader rule's inputs (see the attributes): each family's live runs, in
        the order of its runs, their marks and sigmas, the family's window and judged
        leader; in a race of eta before its choice, the marks of its window too."""
        cdef Py_ssize_t k, n = 0, g
        cdef _Family* fam
        cdef void* room
        for family in families:
            n += len(family.runs)
        room = realloc(self.marks, 5 * max(n, 1) * sizeof(double))
        if room == NULL:
            raise MemoryError()
        self.marks = <double*>room
        room = realloc(self.families, max(len(families), 1) * sizeof(_Family))
        if room == NULL:
            raise MemoryError()
        self.families = <_Family*>room
        for g, family in enumerate(families):
            fam = &self.families[g]
            fam.first, fam.leader_at = self.n_ruled, -1
            marks = family.marks
            for rid, run in family.runs.items():
                if rid not in states:
                    continue
                k = self.n_ruled
                then = marks.get(rid)
                self.marks[5 * k] = <double>then["sum_weight"] if then else 0.0
                self.marks[5 * k + 1] = <double>then["sum_weighted_loss"] if then else 0.0
                self.marks[5 * k + 2] = -(<double>run.sigma)
                then = None if eta_race is None else eta_race.marks.get(
                    eta_race.origin.get(rid, rid))
                self.marks[5 * k + 3] = <double>then["sum_weight"] if then else 0.0
                self.marks[5 * k + 4] = <double>then["sum_weighted_loss"] if then else 0.0
                if rid == family.leader_id:
                    fam.leader_at = k
                self.ruled.append(states[rid])
                self.n_ruled = k + 1
            fam.n = self.n_ruled - fam.first
            fam.since, fam.check_at = family.since, family.check_at
            fam.evidence = family.evidence
            fam.not_default = eta_race is not None and family.eta != eta_race.default
        self.n_families = len(families)
        return 0

    cdef PGSState _race_step(self, est, race, double target, double weight):
        """The row as `SigmaRace.advance` over one row that is no check, then `check`:
        every live run steps on it (in the order of their ids), the row counted, each
        run's soundness looked at; the learner's Python where a run is not sound
        (`_event_race_unsound`: the run dropped, as the race drops it, and the race read
        again at the next event). Returns the state to report (`SigmaRace.leader`)."""
        cdef PGSState state
        cdef bint sound = True
        self.row.learn_each(self.steppers, self.n_cols, target, weight, self.classifier)
        for state in self.steppers:
            if state.diverged:
                sound = False
        self.race_rows += 1
        race.n_rows = self.race_rows
        if sound:
            for state in self.steppers:
                if not self.row.state_finite(state):
                    sound = False
        if not sound:
            self.race = None
            est._event_race_unsound(self, race, weight)  # drops runs, or raises
            return race.leader
        return self._leader(race)

    cdef PGSState _leader(self, race):
        """`SigmaSchedule.leader` after an event, read from the held runs' states in
        place (the rule's home is `SigmaSchedule.leader`, with `_loss_between`, `_best`
        and `_informed`; this is its reading for one event, without a dict of sums a
        run: an event's cost); a race of eta before its choice, `EtaSchedule.leader`:
        each family's leader so, the one of the least loss over the choice's window
        (once past its start; ties: the default rate's, then the first family's).
        tests/test_event.py holds the two equal at every event."""
        cdef Py_ssize_t g, k, best = -1
        cdef double loss, best_loss = INFINITY
        cdef bint best_not_default = True
        cdef int64_t n_rows = self.race_rows
        cdef bint windowed = n_rows > self.eta_mark_at
        if self.rule == _RULE_ONE:
            return self.steppers[0]
        if self.rule == _RULE_RACE:
            return race.leader
        if self.eta_mark_at == INT64_MAX:  # a sigma race
            return self.ruled[self._family_leader(&self.families[0], n_rows)]
        for g in range(self.n_families):
            if self.families[g].n == 0:
                continue
            k = self._family_leader(&self.families[g], n_rows)
            loss = _window_loss(<PGSState>self.ruled[k],
                                self.marks[5 * k + 3] if windowed else 0.0,
                                self.marks[5 * k + 4] if windowed else 0.0)
            # min over (loss, not the default rate), the first family on a tie (`_least`)
            if best < 0 or loss < best_loss or (
                    loss == best_loss and best_not_default and not self.families[g].not_default):
                best, best_loss, best_not_default = k, loss, self.families[g].not_default
        return self.ruled[best]

    cdef Py_ssize_t _family_leader(self, const _Family* fam, int64_t n_rows) except -1:
        """`SigmaSchedule.leader` of one family's live runs: the index of its run."""
        cdef PGSState st
        cdef Py_ssize_t k, best = -1
        cdef double loss, best_loss = INFINITY, best_neg_sigma = INFINITY, mass
        if fam.n == 1:
            return fam.first
        if fam.since and fam.leader_at >= 0 and (
                (n_rows - fam.since) * 2 < fam.check_at - fam.since):
            return fam.leader_at  # the first half of a duel: the judged leader
        for k in range(fam.first, fam.first + fam.n):
            st = <PGSState>self.ruled[k]
            loss = _window_loss(st, self.marks[5 * k], self.marks[5 * k + 1])
            # min over (loss, -sigma), the first of the runs' order on a tie (`_best`)
            if best < 0 or loss < best_loss or (loss == best_loss
                                                and self.marks[5 * k + 2] < best_neg_sigma):
                best, best_loss, best_neg_sigma = k, loss, self.marks[5 * k + 2]
        if fam.since and best != fam.leader_at and fam.leader_at >= 0:
            # a window too poor in information keeps the incumbent (`_informed`)
            st = <PGSState>self.ruled[fam.leader_at]
            mass = st.sum_weighted_loss_reported - self.marks[5 * fam.leader_at + 1]
            if not mass >= fam.evidence:
                best = fam.leader_at
        return best

    cdef object _predict(self, est, x, int kind):
        cdef dict d = PyObject_GenericGetDict(est, NULL)
        cdef PGSState state
        self.state_acquire()
        try:
            if not self._current(d) or "diverged" in d["_cache"] or not self._read(x):
                return NotImplemented
            state = d["_state"]
            if kind == 0:
                if self.labels is not None:
                    out = self.row.label(state, self.labels)
                else:
                    out = self.row.scores(state)
                    if not isfinite(out):
                        out = None
            else:
                out = self.row.proba(state, self.labels, self.mc)
        finally:
            self.state_release()
        return NotImplemented if out is None else out

    def label(self, est, x):
        """`predict_one`: the label (a classifier) or the value (a regressor)."""
        return self._predict(est, x, 0)

    def proba(self, est, x):
        """`predict_proba_one`: the dict {label: probability}."""
        return self._predict(est, x, 1)


# the leader rules an `EventPath` holds (`EventPath._hold`)
cdef enum:
    _RULE_ONE = 0  # one live run
    _RULE_SIGMA = 1  # SigmaSchedule.leader's (EtaSchedule.leader's), read in place
    _RULE_RACE = 2  # the race's own (a schedule of another kind)


cdef inline double _window_loss(PGSState st, double weight_then,
                                double loss_then) noexcept:
    """`onlinepgs._race._loss_between` of the state's progressive sums and a mark's."""
    cdef double w = st.sum_weight - weight_then
    cdef double loss
    if not w > 0:
        return INFINITY
    loss = (st.sum_weighted_loss_reported - loss_then) / w
    return loss if isfinite(loss) else INFINITY


def _no_path():
    """What a pickled or copied `EventPath` becomes: none (the learner makes one)."""
    return None
