# The pages of a state's block that the state has written, so that a pass's rows write
# each page of theirs before they read it (a block in small pages, `_pages.pyx`).
#
# A block in small pages is mapped page by page as its coordinates are reached. A step
# reads a coordinate's fields before it writes them; a first read of a page never
# touched maps the kernel's shared page of zeros, and the write after it faults again,
# copies that page and flushes its old mapping from every processor's TLB, which with
# the race's two threads is an interrupt to the other processor: under `perf`, 23% of a
# -b 24 click log's samples (one write fault maps the page once, no flush). So before a
# pass each page its rows reach is written first, once: an atomic OR of zero into the
# row's first and last eight bytes, a write that leaves them as they are (whatever wrote
# the page before), and a byte a page marks it done. Rows crossed in the pass are
# written first as each is made; dense rows and blocks in huge pages are left as they are.
from libc.stdint cimport int32_t, int64_t, uint8_t, uintptr_t

from onlinepgs._core._sparse cimport index_t

cdef extern from *:
    """
    static inline void onlinepgs_write_first(void* p) {
        __atomic_fetch_or((unsigned long long*)p, 0ULL, __ATOMIC_RELAXED);
    }
    """
    void write_first "onlinepgs_write_first"(void* p) noexcept nogil

cdef enum:
    WRITTEN_PAGE_SHIFT = 12  # 4 KB pages (a larger page size: more writes, as correct)


cdef inline void _write_row_first(uint8_t* written, uintptr_t page0, char* row,
                                  Py_ssize_t row_bytes) noexcept nogil:
    cdef char* last = row + row_bytes - 8
    cdef uintptr_t p = (<uintptr_t>row >> WRITTEN_PAGE_SHIFT) - page0
    if not written[p]:
        write_first(row)
        written[p] = 1
    p = (<uintptr_t>last >> WRITTEN_PAGE_SHIFT) - page0
    if not written[p]:
        write_first(last)
        written[p] = 1


cdef inline void write_rows_first(uint8_t* written, char* block, Py_ssize_t row_bytes,
                                  const index_t* indices, const int64_t* indptr,
                                  const int64_t[::1] order, bint intercept) noexcept nogil:
    """Write first every page of `block` (rows of `row_bytes`, coordinate j at row j) that
    the CSR rows in `order` reach (column c at coordinate c + 1, the intercept's 0 with
    `intercept`) and `written` (a byte a page from the block's first) does not mark."""
    cdef uintptr_t page0 = <uintptr_t>block >> WRITTEN_PAGE_SHIFT
    cdef Py_ssize_t i, n_rows = order.shape[0]
    cdef int64_t row, e
    if written == NULL:
        return
    if intercept:
        _write_row_first(written, page0, block, row_bytes)
    for i in range(n_rows):
        row = order[i]
        for e in range(indptr[row], indptr[row + 1]):
            _write_row_first(written, page0, block + (<int64_t>indices[e] + 1) * row_bytes,
                             row_bytes)


cdef inline void write_cols_first(uint8_t* written, char* block, Py_ssize_t row_bytes,
                                  const int32_t* cols, Py_ssize_t n) noexcept nogil:
    """`write_rows_first` of one row's `n` columns (a row crossed in the pass, made just
    before its step: its columns are known only then)."""
    cdef uintptr_t page0 = <uintptr_t>block >> WRITTEN_PAGE_SHIFT
    cdef Py_ssize_t e
    for e in range(n):
        _write_row_first(written, page0, block + (<int64_t>cols[e] + 1) * row_bytes,
                         row_bytes)


cdef inline Py_ssize_t written_pages(char* block, Py_ssize_t nbytes) noexcept nogil:
    """The bytes `written` takes for a block of `nbytes` at `block`: one a page."""
    return (((<uintptr_t>block + nbytes - 1) >> WRITTEN_PAGE_SHIFT)
            - (<uintptr_t>block >> WRITTEN_PAGE_SHIFT) + 1)
