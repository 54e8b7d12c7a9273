# cython: language_level=3
# distutils: language = c++
"""Namespaced rows into hashed columns, interactions generated in C (issue 35): THE row
builder (`build_row`) and its three users.

A row's entries are masked into 2**n_bits columns and signed by the top bit of their
hash (raw columns are not), its interactions are generated from its entries (a pair
crosses the entries of two namespace letters, O(nnz_a * nnz_b); a triple
O(nnz_a * nnz_b * nnz_c)), and its entries are sorted by column with duplicates summed,
so the row is canonical CSR. Its users: `rows_to_csr` (the kernel behind
`onlinepgs.features.to_matrix`: a chunk sized by a first pass, an upper bound per row,
filled by a second, all without the GIL), `Crossing` (a chunk the PGS pass crosses a row
at a time, `cross_row`) and the per-event rows (_event.pyx).

The rules (docs/design/features.md): position m of an interaction matches the entries
of its letter (``':'`` any letter but RAW_COLUMN); when two positions hold entries of
the same letter, the earlier position's entry comes first in the row (``i <= j``: an
unordered pair once, squares included); among wildcard positions the letters do not
decrease (so ``"::"`` is every unordered pair of letters once).
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int32_t, int64_t, INT32_MAX
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memset, memcpy
from libcpp.algorithm cimport sort

cnp.import_array()

cdef uint32_t FNV_PRIME = 16777619
cdef uint8_t WILDCARD = 58  # b":"
cdef uint8_t RAW_COLUMN = 0
cdef uint64_t LOW32 = 0xFFFFFFFF  # the low half of a sort key: the entry's number

# A row's entries while it is built (RowBuilder's keys and vals): keys[n] the n-th
# entry's column and vals[n] its signed value. The row is sorted stably by column
# (duplicates are summed in the order they were made, deterministically): a short row
# by rank (rank_sort.h: compares without branches; sorting a few dozen random columns by
# branches mispredicts about half of them), a long one, or one of 2**31 columns and
# more, by std::sort of column << 32 | n.
DEF RANK_SORT_MAX = 128  # rank sorting is O(n^2): about as fast as std::sort at 200

cdef extern from "rank_sort.h":
    enum: OPGS_RANK_PAD
    void opgs_rank_sort(const int32_t* keys, const double* vals, Py_ssize_t n,
                        Py_ssize_t padded, int32_t* sorted_keys,
                        double* sorted_vals) noexcept nogil
    int opgs_rank_sort_use(int level) noexcept nogil
    int opgs_rank_sort_level

opgs_rank_sort_use(-1)
_RANK_SORTS = ("plain C", "AVX2", "AVX-512")


def _rank_sort_version(level=None):
    """The rank sort's version in use (`rank_sort.h`), by name; given a level (0 plain C,
    1 AVX2, 2 AVX-512, -1 the best the CPU runs), that one first where the CPU runs it,
    else the next below (for the tests, which compare the versions' rows)."""
    if level is not None:
        opgs_rank_sort_use(level)
    return _RANK_SORTS[opgs_rank_sort_level]


cdef inline bint _matches(uint8_t letter, uint8_t ns) noexcept nogil:
    return ns != RAW_COLUMN and (letter == WILDCARD or letter == ns)


cdef inline double _signed(double value, uint32_t h) noexcept nogil:
    """value negated where h's top bit is set: its sign bit flipped (the exact negation),
    without a branch or a load."""
    cdef uint64_t bits
    memcpy(&bits, &value, sizeof(bits))  # (the compiler's way to reinterpret bits)
    bits ^= <uint64_t>(h >> 31) << 63
    memcpy(&value, &bits, sizeof(bits))
    return value


# One interaction position's entries of a row, gathered (`_gather`): their positions in
# the row, hashes and values side by side.
ctypedef struct Gathered:
    int64_t* at
    uint32_t* hashes
    double* values
    Py_ssize_t n


cdef Gathered _gathered(RowBuilder* b, int m) noexcept nogil:
    cdef Gathered g
    g.at = b.positions + m * b.entries_room
    g.hashes = b.gathered_hashes + m * b.entries_room
    g.values = b.gathered_values + m * b.entries_room
    g.n = 0
    return g


cdef void _gather(const uint8_t* ns, const uint32_t* hashes, const double* values,
                  Py_ssize_t start, Py_ssize_t stop, uint8_t letter,
                  Gathered* g) noexcept nogil:
    """The entries of row [start, stop) that position `letter` matches, into g."""
    cdef Py_ssize_t i, n = 0
    for i in range(start, stop):
        if _matches(letter, ns[i]):
            g.at[n] = i
            g.hashes[n] = hashes[i]
            g.values[n] = values[i]
            n += 1
    g.n = n


cdef inline bint _allowed(const uint8_t* ns, const uint8_t* letters, const int64_t* at,
                          int m) noexcept nogil:
    """Whether entry at[m] may follow at[0..m-1] at position m (see the module rules)."""
    cdef int k
    cdef uint8_t here = ns[at[m]]
    for k in range(m):
        if ns[at[k]] == here and at[k] > at[m]:
            return False
        if letters[k] == WILDCARD and letters[m] == WILDCARD and ns[at[k]] > here:
            return False
    return True


cdef inline bint _distinct(const uint8_t* letters, int order) noexcept nogil:
    """Whether the interaction's letters are distinct and none is the wildcard: then
    every tuple of their entries is allowed."""
    cdef int k, m
    for m in range(order):
        if letters[m] == WILDCARD:
            return False
        for k in range(m):
            if letters[k] == letters[m]:
                return False
    return True


cdef inline Py_ssize_t _cross_last(uint32_t* keys, double* vals, Py_ssize_t n, uint32_t h,
                                   double v, const Gathered* last,
                                   uint32_t mask) noexcept nogil:
    """The entries of (the prefix of hash h and value v) x each entry of the last
    position: hash h * P ^ h_c, value v * v_c, at keys[n:], vals[n:]; the new count. A
    loop without branches over contiguous hashes and values (the compiler's vectors)."""
    cdef Py_ssize_t c
    cdef uint32_t hc
    h *= FNV_PRIME
    for c in range(last.n):
        hc = h ^ last.hashes[c]
        keys[n + c] = hc & mask
        vals[n + c] = _signed(v * last.values[c], hc)
    return n + last.n


cdef Py_ssize_t _interact(const uint8_t* ns, const uint8_t* letters, int order,
                          const Gathered* g, uint32_t mask, uint32_t* keys, double* vals,
                          Py_ssize_t n) noexcept nogil:
    """Append one interaction's entries for a row to keys[n:] and vals[n:], return the
    new count. Its hashes: pairs (h_a * P) ^ h_b, triples ((h_a * P) ^ h_b) * P ^ h_c,
    each prefix's hash and product made once for all the entries that follow it."""
    cdef int64_t at[MAX_ORDER]
    cdef Py_ssize_t a, b, c
    cdef uint32_t h
    cdef double v
    if _distinct(letters, order):  # every tuple is allowed: the last position in a run
        for a in range(g[0].n):
            if order == 2:
                n = _cross_last(keys, vals, n, g[0].hashes[a], g[0].values[a], &g[1], mask)
                continue
            h = g[0].hashes[a] * FNV_PRIME
            for b in range(g[1].n):
                n = _cross_last(keys, vals, n, h ^ g[1].hashes[b],
                                g[0].values[a] * g[1].values[b], &g[2], mask)
        return n
    for a in range(g[0].n):
        at[0] = g[0].at[a]
        for b in range(g[1].n):
            at[1] = g[1].at[b]
            if not _allowed(ns, letters, at, 1):
                continue
            h = g[0].hashes[a] * FNV_PRIME ^ g[1].hashes[b]
            v = g[0].values[a] * g[1].values[b]
            if order == 2:
                keys[n] = h & mask
                vals[n] = _signed(v, h)
                n += 1
                continue
            for c in range(g[2].n):
                at[2] = g[2].at[c]
                if not _allowed(ns, letters, at, 2):
                    continue
                keys[n] = (h * FNV_PRIME ^ g[2].hashes[c]) & mask
                vals[n] = _signed(v * g[2].values[c], h * FNV_PRIME ^ g[2].hashes[c])
                n += 1
    return n


# ---- THE row builder ---------------------------------------------------------------------

cdef void builder_init(RowBuilder* b, int n_bits, const uint8_t* letters,
                       const int32_t* orders, Py_ssize_t n_inter) noexcept nogil:
    """Point b at the interactions (`letters` (n_inter, MAX_ORDER), `orders`) and the
    hashing of n_bits columns; its scratch is kept (grown by `builder_reserve`)."""
    b.letters = letters
    b.orders = orders
    b.n_inter = n_inter
    b.mask = <uint32_t>((<uint64_t>1 << n_bits) - 1)
    b.spare_bits = 31 - n_bits if n_bits < 31 else 0


cdef int _grow(void** p, Py_ssize_t size) except -1:
    cdef void* q = realloc(p[0], size)
    if q == NULL:
        raise MemoryError()
    p[0] = q
    return 0


cdef int builder_reserve(RowBuilder* b, Py_ssize_t entries, Py_ssize_t bound) except -1:
    """Room for rows of up to `entries` namespaced entries that make up to `bound`
    entries (`row_bound`); grown only."""
    entries = max(1, entries)
    bound = max(1, bound)
    if entries > b.entries_room:
        _grow(<void**>&b.positions, MAX_ORDER * entries * sizeof(int64_t))
        _grow(<void**>&b.gathered_hashes, MAX_ORDER * entries * sizeof(uint32_t))
        _grow(<void**>&b.gathered_values, MAX_ORDER * entries * sizeof(double))
        b.entries_room = entries
    if bound > b.room:
        _grow(<void**>&b.keys, bound * sizeof(uint32_t))
        _grow(<void**>&b.vals, bound * sizeof(double))
        _grow(<void**>&b.sorted_keys, bound * sizeof(int32_t))
        _grow(<void**>&b.sorted_vals, bound * sizeof(double))
        _grow(<void**>&b.unique, (bound + OPGS_RANK_PAD) * sizeof(int32_t))
        _grow(<void**>&b.wide, bound * sizeof(uint64_t))
        b.room = bound
    return 0


cdef void builder_release(RowBuilder* b) noexcept nogil:
    free(b.positions)
    free(b.gathered_hashes)
    free(b.gathered_values)
    free(b.keys)
    free(b.vals)
    free(b.sorted_keys)
    free(b.sorted_vals)
    free(b.unique)
    free(b.wide)
    b.positions = NULL
    b.gathered_hashes = NULL
    b.gathered_values = NULL
    b.keys = NULL
    b.vals = NULL
    b.sorted_keys = NULL
    b.sorted_vals = NULL
    b.unique = NULL
    b.wide = NULL
    b.entries_room = 0
    b.room = 0


cdef int check_row_bound(Py_ssize_t bound, str what) except -1:
    """Refuse a row whose bound (`row_bound`) the sort key's 32 bits of an entry's
    number cannot count."""
    if bound >= 2**32:
        raise ValueError(f"{what} would have {bound} entries with its interactions "
                         "(at most 2**32 - 1)")
    return 0


cdef Py_ssize_t row_bound(const RowBuilder* b, const uint8_t* ns, Py_ssize_t start,
                          Py_ssize_t stop) noexcept nogil:
    """An upper bound of the entries of row [start, stop) with its interactions: its own
    and, per interaction, the product of its letters' entry counts (exact for distinct
    letters)."""
    cdef Py_ssize_t bound = stop - start, q, m, e, n, w
    for q in range(b.n_inter):
        w = 1
        for m in range(b.orders[q]):
            n = 0
            for e in range(start, stop):
                if _matches(b.letters[q * MAX_ORDER + m], ns[e]):
                    n += 1
            w *= n
        bound += w
    return bound


cdef Py_ssize_t emit_row(RowBuilder* b, const uint8_t* ns, const uint32_t* hashes,
                         const double* values, Py_ssize_t start,
                         Py_ssize_t stop) noexcept nogil:
    """Row [start, stop)'s entries as they are made (its own, then each interaction's)
    into b.keys (columns) and b.vals, unsorted, with their duplicates; returns their
    count. b has room for the row (`builder_reserve`)."""
    cdef Py_ssize_t n = 0, e, q, m
    cdef Gathered g[MAX_ORDER]
    cdef uint32_t* keys = b.keys  # locals: the stores alias nothing of b's
    cdef double* vals = b.vals
    cdef uint32_t mask = b.mask, h
    cdef const uint8_t* letters
    for e in range(start, stop):
        # a raw column is an index given as is: never signed
        h = hashes[e]
        keys[n] = h & mask
        vals[n] = _signed(values[e], h if ns[e] != RAW_COLUMN else 0)
        n += 1
    for q in range(b.n_inter):
        letters = b.letters + q * MAX_ORDER
        for m in range(b.orders[q]):
            g[m] = _gathered(b, m)
            _gather(ns, hashes, values, start, stop, letters[m], &g[m])
        n = _interact(ns, letters, b.orders[q], g, mask, keys, vals, n)
    return n


cdef Py_ssize_t build_row(RowBuilder* b, const uint8_t* ns, const uint32_t* hashes,
                          const double* values, Py_ssize_t start, Py_ssize_t stop,
                          double* out_data, int32_t* out32, int64_t* out64) noexcept nogil:
    """Row [start, stop)'s canonical entries (`emit_row`'s, sorted by column, duplicates
    summed in the order they were made) into out_data and out32 (or out64, the other
    NULL); returns their count. The one place a row is built."""
    cdef Py_ssize_t n = emit_row(b, ns, hashes, values, start, stop), e, w = 0, padded
    cdef int spare = b.spare_bits
    cdef uint32_t* keys = b.keys
    cdef int32_t* unique = b.unique
    cdef int32_t* sorted_keys = b.sorted_keys
    cdef double* sorted_vals = b.sorted_vals
    cdef uint32_t col, last = 0
    if n <= RANK_SORT_MAX and n < (<Py_ssize_t>1 << spare):
        # the column and the entry's number in one nonnegative int32 (the columns' spare
        # low bits): distinct keys in (column, number) order; padded to OPGS_RANK_PAD
        # with keys above all
        padded = (n + OPGS_RANK_PAD - 1) & ~(OPGS_RANK_PAD - 1)
        for e in range(n):
            unique[e] = <int32_t>((keys[e] << spare) | <uint32_t>e)
        for e in range(n, padded):
            unique[e] = INT32_MAX
        opgs_rank_sort(unique, b.vals, n, padded, sorted_keys, sorted_vals)
    else:
        spare = 0
        for e in range(n):
            b.wide[e] = (<uint64_t>keys[e] << 32) | <uint64_t>e
        sort(b.wide, b.wide + n)
        for e in range(n):
            sorted_keys[e] = <int32_t>(b.wide[e] >> 32)
            sorted_vals[e] = b.vals[b.wide[e] & LOW32]
    # duplicates summed: the row's columns into keys (free now), then to the output
    for e in range(n):
        col = <uint32_t>sorted_keys[e] >> spare
        if w > 0 and col == last:
            out_data[w - 1] += sorted_vals[e]
        else:
            out_data[w] = sorted_vals[e]
            keys[w] = col
            last = col
            w += 1
    if out32 != NULL:
        for e in range(w):
            out32[e] = <int32_t>keys[e]
    else:
        for e in range(w):
            out64[e] = <int64_t>keys[e]
    return w


# ---- chunks: rows_to_csr and Crossing -----------------------------------------------------

cdef Py_ssize_t cross_row(CrossRows* cx, Py_ssize_t r, int32_t* idx,
                          double* vals) noexcept nogil:
    """Row r's canonical entries into idx and vals (cx.build.room entries at most);
    returns their count."""
    return build_row(&cx.build, cx.ns, cx.hashes, cx.values, cx.indptr[r],
                     cx.indptr[r + 1], vals, idx, NULL)


cdef Py_ssize_t emit_crossed(CrossRows* cx, Py_ssize_t r) noexcept nogil:
    """Row r's entries unsorted, with their duplicates (`emit_row`: their columns in
    cx.build.keys), for the pass's note of the coordinates it reaches."""
    return emit_row(&cx.build, cx.ns, cx.hashes, cx.values, cx.indptr[r], cx.indptr[r + 1])


cdef void _release(CrossRows* cx) noexcept nogil:
    builder_release(&cx.build)
    free(cx.row_idx)
    free(cx.row_vals)
    cx.row_idx = NULL
    cx.row_vals = NULL


cdef int _prepare(CrossRows* cx, const uint8_t[::1] ns, const uint32_t[::1] hashes,
                  const double[::1] values, const int64_t[::1] indptr, int n_bits,
                  const uint8_t[:, ::1] letters, const int32_t[::1] orders,
                  bint with_row, Py_ssize_t* total) except -1:
    """Check the chunk, point cx at it, size its builder for the widest row (and, with
    `with_row`, the slots of the pass's rows); the sum of the rows' bounds into
    total."""
    cdef Py_ssize_t n_rows = indptr.shape[0] - 1, n_inter = orders.shape[0], r, q, bound
    cdef Py_ssize_t widest = 0, widest_row = 0, all_rows = 0
    if not 1 <= n_bits <= 32:
        raise ValueError(f"n_bits must be in [1, 32], got {n_bits}")
    if letters.shape[0] != n_inter or (n_inter and letters.shape[1] != MAX_ORDER):
        raise ValueError("letters must have shape (n_interactions, 3)")
    for q in range(n_inter):
        if orders[q] not in (2, 3):
            raise ValueError(f"an interaction has 2 or 3 letters, got {orders[q]}")
    if n_rows < 0 or indptr[0] != 0 or indptr[n_rows] > ns.shape[0] or \
            ns.shape[0] != hashes.shape[0] or ns.shape[0] != values.shape[0]:
        raise ValueError("inconsistent rows: ns, hashes, values and indptr disagree")
    for r in range(n_rows):
        if indptr[r + 1] < indptr[r]:
            raise ValueError(f"inconsistent rows: indptr decreases at row {r}")
    _release(cx)
    cx.ns = &ns[0] if ns.shape[0] else NULL
    cx.hashes = &hashes[0] if hashes.shape[0] else NULL
    cx.values = &values[0] if values.shape[0] else NULL
    cx.indptr = &indptr[0]
    cx.n_rows = n_rows
    builder_init(&cx.build, n_bits, &letters[0, 0] if n_inter else NULL,
                 &orders[0] if n_inter else NULL, n_inter)
    with nogil:
        for r in range(n_rows):
            bound = row_bound(&cx.build, cx.ns, indptr[r], indptr[r + 1])
            all_rows += bound
            if bound > widest_row:
                widest_row = bound
            if indptr[r + 1] - indptr[r] > widest:
                widest = indptr[r + 1] - indptr[r]
    check_row_bound(widest_row, "a row")
    total[0] = all_rows
    try:
        builder_reserve(&cx.build, widest, widest_row)
        if with_row:
            cx.row_idx = <int32_t*>malloc(2 * cx.build.room * sizeof(int32_t))
            cx.row_vals = <double*>malloc(2 * cx.build.room * sizeof(double))
            if cx.row_idx == NULL or cx.row_vals == NULL:
                raise MemoryError()
            cx.made_at[0] = cx.made_at[1] = -1
    except MemoryError:
        _release(cx)
        raise
    return 0


def rows_to_csr(const uint8_t[::1] ns, const uint32_t[::1] hashes,
                const double[::1] values, const int64_t[::1] indptr, int n_bits,
                const uint8_t[:, ::1] letters, const int32_t[::1] orders):
    """Canonical CSR arrays ``(data, indices, indptr)`` of namespaced rows.

    Parameters
    ----------
    ns, hashes, values, indptr : the `onlinepgs.features.NamespacedRows` arrays
    n_bits : int in [1, 32]
        Columns are ``hash & (2**n_bits - 1)``; indices are int32 when 2**n_bits fits.
    letters : uint8 array (n_interactions, 3)
        Each interaction's namespace letters (``b":"``: any), `orders` of them used.
    orders : int32 array (n_interactions,), each 2 or 3

    Returns
    -------
    data : float64 (nnz,), indices : int32 or int64 (nnz,), indptr : int64 (n_rows + 1,)
    """
    cdef CrossRows cx
    cdef Py_ssize_t r, total = 0, w = 0
    cdef double* out_data
    cdef int32_t* out32 = NULL
    cdef int64_t* out64 = NULL
    cdef int64_t* out_ptr
    memset(&cx, 0, sizeof(cx))
    # pass 1: the rows' bounds size the output
    _prepare(&cx, ns, hashes, values, indptr, n_bits, letters, orders, False, &total)
    try:
        data = np.empty(total, dtype=np.float64)
        indices = np.empty(total, dtype=np.int32 if n_bits <= 31 else np.int64)
        out_indptr = np.zeros(cx.n_rows + 1, dtype=np.int64)
        out_data = <double*>cnp.PyArray_DATA(data)
        if n_bits <= 31:
            out32 = <int32_t*>cnp.PyArray_DATA(indices)
        else:
            out64 = <int64_t*>cnp.PyArray_DATA(indices)
        out_ptr = <int64_t*>cnp.PyArray_DATA(out_indptr)
        with nogil:  # pass 2: each row's entries, sorted by column, duplicates summed
            for r in range(cx.n_rows):
                w += build_row(&cx.build, cx.ns, cx.hashes, cx.values, cx.indptr[r],
                               cx.indptr[r + 1], out_data + w,
                               out32 + w if out32 != NULL else NULL,
                               out64 + w if out64 != NULL else NULL)
                out_ptr[r + 1] = w
    finally:
        _release(&cx)
    if w < total:  # interactions of equal letters, and duplicates, made fewer entries
        data = data[:w].copy()
        indices = indices[:w].copy()
    return data, indices, out_indptr


cdef class Crossing:
    """A chunk of namespaced rows that the PGS pass crosses one row at a time
    (`PGSState.run(..., crossing=)`): each row's canonical entries, the same as the
    row of `rows_to_csr`, made into a buffer of the widest row when the pass reaches it.

    Parameters are `rows_to_csr`'s, n_bits in [1, 31] (int32 columns).
    """

    def __cinit__(self):
        memset(&self.c, 0, sizeof(self.c))

    def __init__(self, const uint8_t[::1] ns, const uint32_t[::1] hashes,
                 const double[::1] values, const int64_t[::1] indptr, int n_bits,
                 const uint8_t[:, ::1] letters, const int32_t[::1] orders):
        if n_bits > 31:
            raise ValueError(f"a Crossing's columns are int32: n_bits must be at most 31, "
                             f"got {n_bits}")
        _prepare(&self.c, ns, hashes, values, indptr, n_bits, letters, orders, True,
                 &self.entries)
        self.arrays = (ns, hashes, values, indptr, letters, orders)

    def __dealloc__(self):
        _release(&self.c)

    @property
    def n_rows(self):
        return self.c.n_rows

    @property
    def widest_row(self):
        """The bound of the widest row's entries (the size of a row's buffers)."""
        return self.c.build.room

    def columns(self):
        """The columns the rows reach, as they are made (int32, unsorted, with repeats: at
        most `entries`), for a look at the state where they are: O(entries), as the
        chunk's matrix's indices would be."""
        out = np.empty(self.entries, dtype=np.int32)
        cdef int32_t[::1] cols = out
        cdef Py_ssize_t r, e, n, w = 0
        with nogil:
            for r in range(self.c.n_rows):
                n = emit_crossed(&self.c, r)
                for e in range(n):
                    cols[w + e] = <int32_t>self.c.build.keys[e]
                w += n
        return out[:w]

    def row(self, Py_ssize_t r):
        """Row r's canonical ``(indices int32, data float64)``, as the pass sees it."""
        if not 0 <= r < self.c.n_rows:
            raise IndexError(f"row {r} of {self.c.n_rows}")
        cdef Py_ssize_t n = cross_row(&self.c, r, self.c.row_idx, self.c.row_vals)
        self.c.made_at[0] = -1  # the slot holds no position of a pass now
        return (np.array(<int32_t[:n]>self.c.row_idx) if n else np.zeros(0, np.int32),
                np.array(<double[:n]>self.c.row_vals) if n else np.zeros(0))
