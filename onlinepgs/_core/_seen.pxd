# The coordinates reached: the list that lets a sweep (a refresh of M, a settle of the
# lazy averages, N's exact recount, l1's recounts) visit only the coordinates some update
# reached, not the width of the state (`Seen`, declared in _pgs.pxd).
#
# The others hold zeros in every field and add nothing. While a state is young it keeps a
# list of those (before a pass, each coordinate its rows may update whose lambda is 0 in
# every problem), sorted and deduplicated before a sweep, which then visits them in
# increasing order: the same terms in the same order as a sweep over all of dim, so N and
# the model are bit for bit the same. Noting costs a few instructions per coordinate
# update, and a sweep over dim costs about as much as one over a list of dim / SEEN_DENSE:
# the list is dropped (sweeps visit every coordinate, updates stop noting) once it holds
# more than dim / SEEN_DENSE coordinates or SEEN_WORK * dim updates have been checked, when
# the O(dim) of a sweep is below SEEN_DENSE times the updates made. A sweep thus never
# visits more than SEEN_DENSE times the coordinate updates so far: a state of 2^24 hashed
# features that sees a few thousand updates sweeps a few thousand coordinates, not 2^24.
from libc.stdint cimport uint64_t, int64_t
from libc.stdlib cimport malloc, free, qsort
from libc.string cimport memcpy

from onlinepgs._core._pgs cimport Seen, SEEN_DENSE
from onlinepgs._core._sparse cimport index_t


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


cdef inline int _cmp_int64(const void* a, const void* b) noexcept nogil:
    cdef int64_t x = (<const int64_t*>a)[0], y = (<const int64_t*>b)[0]
    return (x > y) - (x < y)


cdef inline void _sort_coords(int64_t* a, Py_ssize_t n, Py_ssize_t dim) noexcept nogil:
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


cdef inline void _seen_compact(Seen* sn) noexcept nogil:
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


cdef inline void _note_pass(Seen* sn, const double* lam, Py_ssize_t K, Py_ssize_t S,
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
