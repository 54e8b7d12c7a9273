# cython: language_level=3
# distutils: language = c++
"""Namespaced rows into hashed CSR columns, interactions generated in C (issue 35).

The kernel behind `onlinepgs.features.to_matrix`: each row's entries are masked into
2**n_bits columns and signed by the top bit of their hash (raw columns are not), the
row's interactions are generated from its entries (a pair crosses the entries of two
namespace letters, O(nnz_a * nnz_b); a triple O(nnz_a * nnz_b * nnz_c)), and the row's
entries are sorted by column with duplicates summed, so the chunk is canonical CSR. The
output is sized by a first pass (an upper bound per row: the product of the letters'
entry counts), filled by a second, all without the GIL.

The rules (docs/design/features.md): position m of an interaction matches the entries
of its letter (``':'`` any letter but RAW_COLUMN); when two positions hold entries of
the same letter, the earlier position's entry comes first in the row (``i <= j``: an
unordered pair once, squares included); among wildcard positions the letters do not
decrease (so ``"::"`` is every unordered pair of letters once).
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int32_t, int64_t
from libc.stdlib cimport malloc, free
from libcpp.algorithm cimport sort

cnp.import_array()

cdef uint32_t FNV_PRIME = 16777619
cdef uint8_t WILDCARD = 58  # b":"
cdef uint8_t RAW_COLUMN = 0
cdef uint64_t LOW32 = 0xFFFFFFFF  # the low half of a sort key: the entry's number


cdef inline bint _matches(uint8_t letter, uint8_t ns) noexcept nogil:
    return ns != RAW_COLUMN and (letter == WILDCARD or letter == ns)


cdef Py_ssize_t _gather(const uint8_t* ns, Py_ssize_t start, Py_ssize_t stop,
                        uint8_t letter, int64_t* out) noexcept nogil:
    """The positions of row [start, stop) whose entries position `letter` matches."""
    cdef Py_ssize_t i, n = 0
    for i in range(start, stop):
        if _matches(letter, ns[i]):
            out[n] = i
            n += 1
    return n


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


cdef inline Py_ssize_t _emit(Row out, Py_ssize_t n, uint32_t h, double value,
                             uint32_t mask, bint signed) noexcept nogil:
    out.keys[n] = (<uint64_t>(h & mask) << 32) | <uint64_t>n
    out.vals[n] = -value if signed and h >> 31 else value
    return n + 1


cdef Py_ssize_t _interact(const uint8_t* ns, const uint32_t* hashes, const double* values,
                          const uint8_t* letters, int order, int64_t** lists,
                          const Py_ssize_t* sizes, uint32_t mask, Row out,
                          Py_ssize_t n) noexcept nogil:
    """Append one interaction's entries for a row to out[n:], return the new count."""
    cdef int64_t at[MAX_ORDER]
    cdef Py_ssize_t a, b, c
    cdef uint32_t h
    for a in range(sizes[0]):
        at[0] = lists[0][a]
        for b in range(sizes[1]):
            at[1] = lists[1][b]
            if not _allowed(ns, letters, at, 1):
                continue
            h = hashes[at[0]] * FNV_PRIME ^ hashes[at[1]]
            if order == 2:
                n = _emit(out, n, h, values[at[0]] * values[at[1]], mask, True)
                continue
            for c in range(sizes[2]):
                at[2] = lists[2][c]
                if not _allowed(ns, letters, at, 2):
                    continue
                n = _emit(out, n, h * FNV_PRIME ^ hashes[at[2]],
                          values[at[0]] * values[at[1]] * values[at[2]], mask, True)
    return n


cdef Py_ssize_t row_bound(const uint8_t* ns, Py_ssize_t start, Py_ssize_t stop,
                          const uint8_t* letters, const int32_t* orders,
                          Py_ssize_t n_inter) noexcept nogil:
    """An upper bound of the entries of row [start, stop) with its interactions (the
    product of each interaction's letters' counts); `letters` is (n_inter, MAX_ORDER)."""
    cdef Py_ssize_t bound = stop - start, q, m, e, n, w
    for q in range(n_inter):
        w = 1
        for m in range(orders[q]):
            n = 0
            for e in range(start, stop):
                if _matches(letters[q * MAX_ORDER + m], ns[e]):
                    n += 1
            w *= n
        bound += w
    return bound


cdef Py_ssize_t build_row(const uint8_t* ns, const uint32_t* hashes, const double* values,
                          Py_ssize_t start, Py_ssize_t stop, const uint8_t* letters,
                          const int32_t* orders, Py_ssize_t n_inter, uint32_t mask,
                          int64_t** lists, Row row, double* out_data, int32_t* out32,
                          int64_t* out64) noexcept nogil:
    """Row [start, stop)'s canonical entries (masked, signed, its interactions, sorted by
    column, duplicates summed in the order they were made) into out_data and out32 (or
    out64, the other NULL); returns how many. `lists`: MAX_ORDER arrays of stop - start
    positions; `row`: room for `row_bound` entries. The one place a row is built: the
    chunks of `rows_to_csr` and the per-event rows (_event.pyx) alike."""
    cdef Py_ssize_t sizes[MAX_ORDER]
    cdef Py_ssize_t n = 0, e, w = 0, q, m
    cdef uint64_t key, col
    for e in range(start, stop):
        # a raw column is an index given as is: never signed
        n = _emit(row, n, hashes[e], values[e], mask, ns[e] != RAW_COLUMN)
    for q in range(n_inter):
        for m in range(orders[q]):
            sizes[m] = _gather(ns, start, stop, letters[q * MAX_ORDER + m], lists[m])
        n = _interact(ns, hashes, values, letters + q * MAX_ORDER, orders[q],
                      lists, sizes, mask, row, n)
    if n > 1:
        sort(row.keys, row.keys + n)
    e = 0
    while e < n:
        key = row.keys[e]
        col = key >> 32
        out_data[w] = row.vals[key & LOW32]
        if out32 != NULL:
            out32[w] = <int32_t>col
        else:
            out64[w] = <int64_t>col
        e += 1
        while e < n and row.keys[e] >> 32 == col:
            out_data[w] += row.vals[row.keys[e] & LOW32]
            e += 1
        w += 1
    return w


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
    cdef Py_ssize_t n_rows = indptr.shape[0] - 1, n_inter = orders.shape[0]
    cdef Py_ssize_t r, q, m, start, stop, bound, widest = 0, w
    cdef Py_ssize_t total = 0, widest_row = 0
    cdef uint32_t mask = <uint32_t>((<uint64_t>1 << n_bits) - 1)
    cdef int64_t* lists[MAX_ORDER]
    cdef int64_t* positions = NULL
    cdef Row row
    cdef double* out_data
    cdef int32_t* out32 = NULL
    cdef int64_t* out64 = NULL
    cdef int64_t* out_ptr
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

    # pass 1: an upper bound of each row's entries (the product of its letters' counts)
    with nogil:
        for r in range(n_rows):
            start, stop = indptr[r], indptr[r + 1]
            bound = row_bound(&ns[0] if ns.shape[0] else NULL, start, stop,
                              &letters[0, 0] if n_inter else NULL, &orders[0] if n_inter else NULL,
                              n_inter)
            total += bound
            if bound > widest_row:
                widest_row = bound
            if stop - start > widest:
                widest = stop - start

    if widest_row >= 2**32:  # the sort key holds an entry's number in 32 bits
        raise ValueError(f"a row would have {widest_row} entries with its interactions "
                         "(at most 2**32 - 1)")
    data = np.empty(total, dtype=np.float64)
    indices = np.empty(total, dtype=np.int32 if n_bits <= 31 else np.int64)
    out_indptr = np.zeros(n_rows + 1, dtype=np.int64)
    out_data = <double*>cnp.PyArray_DATA(data)
    if n_bits <= 31:
        out32 = <int32_t*>cnp.PyArray_DATA(indices)
    else:
        out64 = <int64_t*>cnp.PyArray_DATA(indices)
    out_ptr = <int64_t*>cnp.PyArray_DATA(out_indptr)
    positions = <int64_t*>malloc(max(1, MAX_ORDER * widest) * sizeof(int64_t))
    row.keys = <uint64_t*>malloc(max(1, widest_row) * sizeof(uint64_t))
    row.vals = <double*>malloc(max(1, widest_row) * sizeof(double))
    if positions == NULL or row.keys == NULL or row.vals == NULL:
        free(positions)
        free(row.keys)
        free(row.vals)
        raise MemoryError()
    for m in range(MAX_ORDER):
        lists[m] = positions + m * widest

    # pass 2: each row's entries and interactions, sorted by column, duplicates summed
    w = 0
    try:
        with nogil:
            for r in range(n_rows):
                w += build_row(&ns[0], &hashes[0], &values[0], indptr[r], indptr[r + 1],
                               &letters[0, 0] if n_inter else NULL,
                               &orders[0] if n_inter else NULL, n_inter, mask, lists, row,
                               out_data + w, out32 + w if out32 != NULL else NULL,
                               out64 + w if out64 != NULL else NULL)
                out_ptr[r + 1] = w
    finally:
        free(positions)
        free(row.keys)
        free(row.vals)
    if w < total:  # interactions of equal letters, and duplicates, made fewer entries
        data = data[:w].copy()
        indices = indices[:w].copy()
    return data, indices, out_indptr
