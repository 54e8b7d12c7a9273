# cython: language_level=3, boundscheck=False, wraparound=False
"""A learner's map from the columns its rows reach to consecutive slots.

A hashed feature space is wide (2^24 columns and more) and a stream's rows reach a small
part of it: the click log of ``bench_core.py --columns-seen`` reaches 550,000 of 2^24
columns with ``-q sd``. A solver state over the width pays for the width: a race's forks
copy it, its pages are faulted in, its rows are spread over more memory than the caches
and the TLB hold. A learner that keeps this map numbers each column the first time its
rows reach it (0, 1, 2, ... in the order of the rows' entries) and holds its state over
those numbers, the slots (docs/design/core.md, "A state over the columns seen").

The map is an open-addressing table of (column, slot) pairs, side by side (a probe reads
one cache line), with linear probing, at most half full, doubled when it would be more;
the columns by slot in a second array. A lookup is one mixing hash and, at that load,
one or two probes; the table of a wide stream is larger than the caches, so each
lookup prefetches the home of the entry `PREFETCH_AHEAD` places further on.
"""
import numpy as np

cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint64_t

cnp.import_array()

ctypedef fused index_t:
    int32_t
    int64_t

cdef extern from *:
    """
    #define OPGS_PREFETCH_COLUMNS(p) __builtin_prefetch((p), 0, 1)
    """
    void OPGS_PREFETCH_COLUMNS(const void* p) noexcept nogil

cdef enum:
    MIN_TABLE = 1024
    EMPTY = -1
    PREFETCH_AHEAD = 8
    MAX_SLOTS = 2147483647  # int32 slots


cdef inline Py_ssize_t _home(int64_t column, int shift) noexcept nogil:
    # a 64-bit finalizer's mix (MurmurHash3's), then the top bits: consecutive and
    # strided columns (svmlight's, a stride of 10,000) spread alike, where a product
    # alone left strided ones in clusters that linear probing walked (2.9x the lookups)
    cdef uint64_t h = <uint64_t>column
    h ^= h >> 33
    h *= 0xff51afd7ed558ccdULL
    h ^= h >> 33
    h *= 0xc4ceb9fe1a85ec53ULL
    h ^= h >> 33
    return <Py_ssize_t>(h >> shift)


cdef inline Py_ssize_t _probe(const int64_t* table, Py_ssize_t mask, int shift,
                              int64_t column) noexcept nogil:
    """The pair of `column` in the table, or the free pair where it would go (linear
    probing from its home)."""
    cdef Py_ssize_t h = _home(column, shift)
    while table[2 * h] != column and table[2 * h] != EMPTY:
        h = (h + 1) & mask
    return h


cdef class ColumnMap:
    """Slots for columns, numbered in the order they are first given.

    Parameters
    ----------
    columns : array-like of int, optional
        The columns of slots 0, 1, ... (distinct, non-negative): a map rebuilt as it was
        (a pickled one's).

    Examples
    --------
    >>> import numpy as np
    >>> from onlinepgs._core._columns import ColumnMap
    >>> m = ColumnMap()
    >>> m.slots(np.array([900, 7, 900, 123456789], dtype=np.int64)).tolist()
    [0, 1, 0, 2]
    >>> m.n_slots, m.columns().tolist()
    (3, [900, 7, 123456789])
    >>> m.find(np.array([7, 8], dtype=np.int64)).tolist()
    [1, -1]
    """
    def __init__(self, columns=None):
        self.n_slots = 0
        self._table(MIN_TABLE)
        self.by_slot = np.empty(MIN_TABLE // 2, dtype=np.int64)
        if columns is not None:
            cols = np.ascontiguousarray(columns, dtype=np.int64)
            if cols.ndim != 1 or (cols.size and cols.min() < 0):
                raise ValueError("a column map's columns must be a vector of non-negative "
                                 "integers")
            self.slots(cols)
            if self.n_slots != cols.size:
                raise ValueError("a column map's columns must be distinct")

    def _table(self, Py_ssize_t size):
        self.table = np.full((size, 2), EMPTY, dtype=np.int64)
        self.mask = size - 1
        self.shift = 64 - (size.bit_length() - 1)

    def __reduce__(self):
        return (ColumnMap, (self.columns(),))

    def columns(self):
        """The column of each slot, a copy (int64, ``n_slots`` of them)."""
        return np.array(self.by_slot[:self.n_slots], dtype=np.int64)

    cdef int _grow(self, Py_ssize_t need) except -1:
        """Room for `need` slots: the table at most half full, the columns by slot."""
        cdef Py_ssize_t size = self.mask + 1
        if 2 * need > size:
            while 2 * need > size:
                size *= 2
            old = self.table
            self._table(size)
            self._rehash(old)
        if need > self.by_slot.shape[0]:
            grown = np.empty(max(need, 2 * self.by_slot.shape[0]), dtype=np.int64)
            grown[:self.n_slots] = self.by_slot[:self.n_slots]
            self.by_slot = grown
        return 0

    cdef void _rehash(self, int64_t[:, ::1] old):
        cdef Py_ssize_t i, h, mask = self.mask
        cdef int shift = self.shift
        with nogil:
            for i in range(old.shape[0]):
                if old[i, 0] != EMPTY:
                    h = _home(old[i, 0], shift)
                    while self.table[h, 0] != EMPTY:
                        h = (h + 1) & mask
                    self.table[h, 0] = old[i, 0]
                    self.table[h, 1] = old[i, 1]

    def slots(self, index_t[::1] columns):
        """The slot of each column (int32), a new one for a column not seen before, in
        the order given. Columns must be non-negative (unchecked: the learner's are
        validated)."""
        cdef Py_ssize_t n = columns.shape[0], i = 0, h, mask, room
        cdef int shift
        out = np.empty(n, dtype=np.int32)
        cdef int32_t[::1] res = out
        cdef int64_t col
        cdef int64_t* table
        while i < n:
            if self.n_slots == MAX_SLOTS:
                raise OverflowError(f"a column map holds at most {MAX_SLOTS} columns")
            # room for the new slots that keep the table at most half full (and the
            # columns by slot); grown, and the loop taken up again, when it is spent
            self._grow(self.n_slots + 1)
            room = min((self.mask + 1) // 2, self.by_slot.shape[0], MAX_SLOTS) - self.n_slots
            mask, shift, table = self.mask, self.shift, &self.table[0, 0]
            with nogil:
                while i < n:
                    if i + PREFETCH_AHEAD < n:
                        OPGS_PREFETCH_COLUMNS(table + 2 * _home(columns[i + PREFETCH_AHEAD],
                                                                shift))
                    col = columns[i]
                    h = _probe(table, mask, shift, col)
                    if table[2 * h] == EMPTY:
                        if room == 0:
                            break
                        table[2 * h] = col
                        table[2 * h + 1] = self.n_slots
                        self.by_slot[self.n_slots] = col
                        self.n_slots += 1
                        room -= 1
                    res[i] = <int32_t>table[2 * h + 1]
                    i += 1
        return out

    cdef int slots_into(self, const int32_t* columns, Py_ssize_t n, int32_t* out) except -1:
        """`slots` of n columns into out, for a row's few entries (room made for them
        all first, no prefetch)."""
        cdef Py_ssize_t i, h
        cdef int64_t col
        cdef int64_t* table
        if self.n_slots > MAX_SLOTS - n:
            raise OverflowError(f"a column map holds at most {MAX_SLOTS} columns")
        self._grow(self.n_slots + n)
        table = &self.table[0, 0]
        for i in range(n):
            col = columns[i]
            h = _probe(table, self.mask, self.shift, col)
            if table[2 * h] == EMPTY:
                table[2 * h] = col
                table[2 * h + 1] = self.n_slots
                self.by_slot[self.n_slots] = col
                self.n_slots += 1
            out[i] = <int32_t>table[2 * h + 1]
        return 0

    cdef Py_ssize_t found_into(self, const int32_t* columns, const double* values,
                               Py_ssize_t n, int32_t* slots, double* kept) noexcept:
        """The entries (columns, values) of a row whose columns have slots, as (slots,
        kept values), in their order; returns how many (the map unchanged: an entry left
        out has weight 0 in every problem, `onlinepgs._columns_seen.slots_of_rows`)."""
        cdef Py_ssize_t i, h, m = 0
        cdef const int64_t* table = &self.table[0, 0]
        for i in range(n):
            h = _probe(table, self.mask, self.shift, columns[i])
            if table[2 * h] != EMPTY:
                slots[m] = <int32_t>table[2 * h + 1]
                kept[m] = values[i]
                m += 1
        return m

    def find(self, index_t[::1] columns):
        """The slot of each column (int64), -1 for a column not seen; the map unchanged."""
        cdef Py_ssize_t n = columns.shape[0], i, h, mask = self.mask
        cdef int shift = self.shift
        out = np.empty(n, dtype=np.int64)
        cdef int64_t[::1] res = out
        cdef int64_t[:, ::1] held = self.table  # (kept alive while it is read)
        cdef int64_t* table = &held[0, 0]
        with nogil:
            for i in range(n):
                if i + PREFETCH_AHEAD < n:
                    OPGS_PREFETCH_COLUMNS(table + 2 * _home(columns[i + PREFETCH_AHEAD], shift))
                h = _probe(table, mask, shift, columns[i])
                res[i] = table[2 * h + 1] if table[2 * h] != EMPTY else -1
        return out
