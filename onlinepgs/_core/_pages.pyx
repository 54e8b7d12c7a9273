# cython: language_level=3, boundscheck=False, wraparound=False
"""Which pages a solver state's block is mapped in, and a copy that leaves its unwritten
pages unwritten.

A state is allocated at the width of its data's columns (2^24 hashed columns and more),
while its rows may reach only a few thousand of them. The kernel maps anonymous memory
at its first write: a 4 KB page costs about 2 us, a transparent huge page of 2 MB
220-260 us, as it zeroes the whole region (x86-64; `python bench/bench_core.py
--page-costs`). NumPy asks for huge pages for arrays of 4 MB and more. Huge pages are
right where the rows reach most of the block (fewer faults, fewer TLB misses); where they
reach a few coordinates in each 2 MB region, every region is zeroed for a handful of
writes: 5,000 coordinates over a 1.6 GB block took 0.12-0.14 s in a first call whose
steps took 0.02-0.03 s, and a race's forks mapped the whole block each. So the block is
mapped in small pages where the first rows reach fewer than `SMALL_PAGES_PAY` of each
region's 512 pages, on average over the regions they reach (`small_pages_pay`), and a
copy of such a block (a race's fork, a state grown wider) writes only the pages its
source has written (`copy_mapped`), so that it does not map the whole width; and a save's
passes over it (`mark_nonzero_rows`, `first_nonfinite`) read only the pages it has.
"""
import math
import os

import numpy as np

cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint64_t, uint8_t
from libc.math cimport isfinite
from libc.string cimport memcpy
from posix.types cimport off_t
from posix.unistd cimport pread

cnp.import_array()

cdef extern from "<sys/mman.h>" nogil:
    """
    #ifndef MADV_NOHUGEPAGE
    #define MADV_NOHUGEPAGE -1
    #endif
    """
    int madvise(void* addr, size_t length, int advice)
    int MADV_NOHUGEPAGE

cdef enum:
    C_SMALL_PAGE = 1 << 12  # a base page of x86-64 (and of most Linux machines)
    C_HUGE_PAGE = 1 << 21   # a transparent huge page of x86-64

CACHE_LINE = 64
SMALL_PAGE = C_SMALL_PAGE
HUGE_PAGE = C_HUGE_PAGE
# Small pages pay while the writes reach fewer pages of a 2 MB region than a huge page's
# fault costs in small ones: 220-260 us against 2 us a page, about 110 pages; but small
# pages miss the TLB more in the steps too, which moves the first call's break-even (the
# same 5,000 columns spread wider and wider) to between 32 pages a region (small pages
# 0.030 s, huge 0.035) and 48 (0.029 s, 0.027): `bench_core.py --page-costs`
SMALL_PAGES_PAY = 40
# the pages' map of this process: a word a page, bit 63 mapped, bit 62 swapped out
# (Linux's Documentation/admin-guide/mm/pagemap.rst)
PAGEMAP = "/proc/self/pagemap"
# its pages are the system's (4 KB on x86-64, 16 or 64 KB on some ARM machines)
cdef Py_ssize_t page_size = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
cdef uint64_t PAGE_PRESENT = 1ULL << 63
cdef uint64_t PAGE_SWAPPED = 1ULL << 62


def cache_aligned_zeros(shape, bint zero=True, bint small_pages=False):
    """A C-contiguous float64 array of zeros whose first element starts a cache line
    (``zero=False``: its elements not set, for a caller that writes every one), mapped in
    small pages with `small_pages` (`small_pages_pay`), else in huge ones where it holds
    a huge page or more.

    malloc aligns to 16 bytes only: a block of 32-byte coordinates (p < 2, averaged)
    that starts 16 or 48 bytes into a line splits every other coordinate over two lines,
    and the state's random accesses then cost 12-20% more in one process, and a lane up
    to 62% more than its partner on the other core (docs/benchmarks.md).
    """
    n = math.prod(shape)
    # a block of a huge page or more starts one (and holds 4 MB or more, for which NumPy
    # asks for transparent huge pages): its first touches fault a 2 MB page each, not
    # 512 small ones, each twice (read, then written). A race's twelve fresh states of
    # 89,528 coordinates (2.9 MB each) took 27 ms in faults, a third of their first rows
    align = HUGE_PAGE if n * 8 >= HUGE_PAGE and not small_pages else CACHE_LINE
    size = n * 8 + align
    if align == HUGE_PAGE:
        size = max(-(-size // HUGE_PAGE) * HUGE_PAGE, 2 * HUGE_PAGE)
    raw = (np.zeros if zero else np.empty)(size, dtype=np.uint8)
    if small_pages:
        map_in_small_pages(raw)
    start = (-raw.ctypes.data) % align
    return raw[start:start + n * 8].view(np.float64).reshape(shape)


ctypedef fused column_t:
    int32_t
    int64_t


cdef void _count_reached(const column_t[::1] cols, Py_ssize_t n_coords,
                         Py_ssize_t coord_bytes, Py_ssize_t offset, Py_ssize_t enough,
                         uint8_t[::1] page_hit, uint8_t[::1] region_hit,
                         Py_ssize_t* reached) noexcept nogil:
    """Into reached: the distinct small pages and huge-page regions the coordinates
    cols + offset fall in, each of coord_bytes (columns outside [0, n_coords) left out);
    the count stops at `enough` pages."""
    cdef Py_ssize_t i, pages = 0, regions = 0
    cdef int64_t page, region, col
    for i in range(cols.shape[0]):
        col = <int64_t>cols[i] + offset
        if col < 0 or col >= n_coords:
            continue
        page = col * coord_bytes // C_SMALL_PAGE
        if not page_hit[page >> 3] & (1 << (page & 7)):
            page_hit[page >> 3] |= 1 << (page & 7)
            pages += 1
            if pages >= enough:
                # huge pages whatever the regions reached: a dense block (every narrow
                # one) is decided in its first few hundred entries
                break
        region = col * coord_bytes // C_HUGE_PAGE
        if not region_hit[region >> 3] & (1 << (region & 7)):
            region_hit[region >> 3] |= 1 << (region & 7)
            regions += 1
    reached[0] = pages
    reached[1] = regions


def small_pages_pay(indices, Py_ssize_t n_coords, Py_ssize_t coord_bytes, Py_ssize_t offset=0):
    """True where a block of `n_coords` coordinates of `coord_bytes` each, written at the
    coordinates `indices` + `offset` (the first rows' column indices, repeats allowed;
    a state's coordinate 0 is the intercept's, column j its coordinate j + 1), is better
    mapped in small pages: the writes reach fewer than `SMALL_PAGES_PAY` pages of each
    2 MB region they reach, on average. Blocks below a huge page never take one.

    >>> import numpy as np
    >>> small_pages_pay(np.arange(0, 50_000_000, 10_000), 50_000_000, 32)  # 1.6 GB, sparse
    True
    >>> small_pages_pay(np.arange(0, 5_000_000, 10), 5_000_000, 32)  # every page reached
    False
    """
    cdef Py_ssize_t n_bytes = n_coords * coord_bytes
    if n_bytes < C_HUGE_PAGE or coord_bytes <= 0:
        return False
    cdef Py_ssize_t n_pages = (n_bytes + C_SMALL_PAGE - 1) // C_SMALL_PAGE
    cdef Py_ssize_t n_regions = (n_bytes + C_HUGE_PAGE - 1) // C_HUGE_PAGE
    # a bit a page and one a region: 1.6 GB of block, 49 KB of bits
    cdef uint8_t[::1] page_hit = np.zeros(n_pages // 8 + 1, dtype=np.uint8)
    cdef uint8_t[::1] region_hit = np.zeros(n_regions // 8 + 1, dtype=np.uint8)
    cdef Py_ssize_t reached[2]
    cols = np.asarray(indices)
    if cols.dtype != np.int32:  # a CSR matrix's indices are int32 or int64, read as they are
        cols = np.ascontiguousarray(cols, dtype=np.int64)
    elif not cols.flags.c_contiguous:
        cols = np.ascontiguousarray(cols)
    if cols.dtype == np.int32:
        _count_reached[int32_t](cols, n_coords, coord_bytes, offset, SMALL_PAGES_PAY * n_regions,
                                page_hit, region_hit, reached)
    else:
        _count_reached[int64_t](cols, n_coords, coord_bytes, offset, SMALL_PAGES_PAY * n_regions,
                                page_hit, region_hit, reached)
    pages, regions = reached[0], reached[1]
    return regions > 0 and pages < SMALL_PAGES_PAY * regions


def map_in_small_pages(cnp.ndarray raw):
    """Ask the kernel to map the pages of `raw` (a fresh buffer, nothing written yet) in
    small pages; False where it cannot be asked (no such advice on this system)."""
    if MADV_NOHUGEPAGE < 0 or raw.nbytes == 0:
        return False
    cdef size_t start = <size_t>cnp.PyArray_DATA(raw)
    cdef size_t end = start + <size_t>raw.nbytes
    # madvise takes page-aligned ranges: the pages wholly inside the buffer
    start = (start + page_size - 1) // page_size * page_size
    end = end // page_size * page_size
    if end <= start:
        return False
    return madvise(<void*>start, end - start, MADV_NOHUGEPAGE) == 0


def mapped_pages(cnp.ndarray arr):
    """A flag for each page that the bytes of the contiguous array `arr` fall in, in
    order: 1 where the page is mapped or swapped out (written, or read), 0 where it was
    never touched and reads as zeros. None where this process cannot read its page map
    (not Linux, or no access to it)."""
    cdef size_t start = <size_t>cnp.PyArray_DATA(arr)
    cdef size_t first = start // page_size
    cdef size_t last = (start + <size_t>arr.nbytes + page_size - 1) // page_size
    cdef int fd
    try:
        fd = os.open(PAGEMAP, os.O_RDONLY)
    except OSError:
        return None
    # read straight into the words' array (a 2 GB block's map is 4 MB), then flag them
    entries = np.empty(last - first, dtype=np.uint64)
    cdef uint64_t[::1] words = entries
    cdef uint8_t[::1] flags
    cdef Py_ssize_t want = 8 * (last - first), got = 0, n_read = 0, i
    try:
        with nogil:
            while got < want:
                n_read = pread(fd, <char*>&words[0] + got, want - got,
                               <off_t>(8 * first + got))
                if n_read <= 0:
                    break
                got += n_read
    finally:
        os.close(fd)
    if got < want:
        return None  # a map this process may not read (or a short one): no flags
    out = np.empty(last - first, dtype=np.uint8)
    flags = out
    with nogil:
        for i in range(words.shape[0]):
            flags[i] = (words[i] & (PAGE_PRESENT | PAGE_SWAPPED)) != 0
    return out


cdef inline bint all_zero(const char* p, Py_ssize_t n) noexcept nogil:
    """Whether the n bytes at p are all zero (a page of 8-byte words, and a tail)."""
    cdef Py_ssize_t i, words = n // 8
    cdef const uint64_t* w = <const uint64_t*>p
    for i in range(words):
        if w[i]:
            return False
    for i in range(words * 8, n):
        if p[i]:
            return False
    return True


cdef inline void page_span(Py_ssize_t page0, Py_ssize_t p, Py_ssize_t start,
                           Py_ssize_t n, Py_ssize_t* lo, Py_ssize_t* hi) noexcept nogil:
    """Into lo, hi: the offsets of the bytes of page p (pages from the address page0) that
    belong to the n bytes at address start (lo >= hi: none)."""
    lo[0] = max(page0 + p * page_size - start, 0)
    hi[0] = min(page0 + (p + 1) * page_size - start, n)


def copy_mapped(cnp.ndarray target, cnp.ndarray source):
    """Copy the C-contiguous array `source` into `target` (a fresh buffer of zeros of as
    many bytes or more: its first ones) where the source holds something: only the
    pages its page map says were touched, and of those only the ones not all zeros. A
    page never touched reads as zeros, which the target holds already; a page only read
    is the kernel's shared page of zeros (a sweep of the block, a save's, maps them), so
    the copy maps only the pages the source has written. Without a page map, the whole
    copy."""
    cdef Py_ssize_t n = source.nbytes
    if target.nbytes < n:
        raise ValueError(f"copy_mapped: {target.nbytes} target bytes for {n}")
    cdef char* src = <char*>cnp.PyArray_DATA(source)
    cdef char* dst = <char*>cnp.PyArray_DATA(target)
    flags = mapped_pages(source)
    if flags is None:
        memcpy(dst, src, n)
        return
    cdef uint8_t[::1] mapped = flags
    cdef Py_ssize_t page0 = <Py_ssize_t>((<size_t>src) // page_size * page_size)
    cdef Py_ssize_t i, lo, hi
    with nogil:
        for i in range(mapped.shape[0]):
            if mapped[i]:
                page_span(page0, i, <Py_ssize_t>src, n, &lo, &hi)
                if hi > lo and not all_zero(src + lo, hi - lo):
                    memcpy(dst + lo, src + lo, hi - lo)


def pages_to_read(cnp.ndarray values):
    """A flag for each page the bytes of `values` fall in: its page map's (`mapped_pages`),
    or every page where there is none."""
    flags = mapped_pages(values)
    if flags is not None:
        return flags
    cdef size_t start = <size_t>cnp.PyArray_DATA(values)
    return np.ones((start + <size_t>values.nbytes + page_size - 1) // page_size
                   - start // page_size, dtype=np.uint8)


def mark_nonzero_rows(cnp.ndarray values, uint8_t[::1] kept):
    """Set ``kept[i]`` where row i of the C-contiguous array `values` (``kept``'s length
    of rows, each the same number of bytes) holds a non-zero byte (-0.0 and NaN payloads
    count: bytes, not values). Pages the page map says were never touched read as zeros
    and are not read (nor mapped by reading them): a wide block a few rows reached is
    searched in the pages it has, not over its width. Without a page map, every page.

    >>> import numpy as np
    >>> kept = np.zeros(4, dtype=np.uint8)
    >>> mark_nonzero_rows(np.array([[0.0, 0.0], [0.0, -0.0], [1.0, 0.0], [0.0, 0.0]]), kept)
    >>> kept.tolist()
    [0, 1, 1, 0]
    """
    cdef Py_ssize_t n = values.nbytes, dim = kept.shape[0]
    if dim == 0 or n == 0:
        return
    if n % dim:
        raise ValueError(f"mark_nonzero_rows: {n} bytes are not {dim} rows")
    if not values.flags.c_contiguous:
        raise ValueError("mark_nonzero_rows: the array must be C-contiguous")
    cdef Py_ssize_t row_bytes = n // dim
    cdef const char* src = <const char*>cnp.PyArray_DATA(values)
    cdef uint8_t[::1] mapped = pages_to_read(values)
    cdef Py_ssize_t page0 = <Py_ssize_t>((<size_t>src) // page_size * page_size)
    cdef Py_ssize_t p, lo, hi, row, start, stop
    with nogil:
        for p in range(mapped.shape[0]):
            if not mapped[p]:
                continue
            # the array's bytes in this page, and the rows they belong to
            page_span(page0, p, <Py_ssize_t>src, n, &lo, &hi)
            if hi <= lo:
                continue
            row = lo // row_bytes
            while row * row_bytes < hi:
                if not kept[row]:
                    start = max(row * row_bytes, lo)
                    stop = min((row + 1) * row_bytes, hi)
                    if not all_zero(src + start, stop - start):
                        kept[row] = 1
                row += 1


def nonzero_rows(arrays, Py_ssize_t dim):
    """The rows, increasing (int64), that hold a non-zero byte in some array of `arrays`
    (C-contiguous arrays of `dim` rows each, as `mark_nonzero_rows` takes them), found
    in the pages the arrays have and collected from the pages their marks have: a wide
    state a few rows reached is searched in O(rows reached), not over its width (NumPy's
    ``flatnonzero`` of a 2^26-row mask took 0.1 s).

    >>> import numpy as np
    >>> nonzero_rows([np.array([[0.0], [2.0], [0.0]]), np.array([[0, 0], [0, 0], [0, 1]])], 3)
    array([1, 2])
    """
    marks = np.zeros(dim, dtype=np.uint8)  # pages mapped only where a mark is written
    cdef uint8_t[::1] kept = marks
    for values in arrays:
        mark_nonzero_rows(values, kept)
    if dim == 0:
        return np.zeros(0, dtype=np.int64)
    cdef uint8_t[::1] mapped = pages_to_read(marks)
    cdef Py_ssize_t n
    with nogil:
        n = _marked(&kept[0], dim, mapped, NULL)
    out = np.empty(n, dtype=np.int64)
    cdef int64_t[::1] rows = out
    if n:
        with nogil:
            _marked(&kept[0], dim, mapped, &rows[0])
    return out


cdef Py_ssize_t _marked(const uint8_t* kept, Py_ssize_t dim, const uint8_t[::1] mapped,
                        int64_t* rows) noexcept nogil:
    """The count of the marks kept[i] != 0 in the pages `mapped` flags, their i written
    to `rows` in order unless it is NULL."""
    cdef Py_ssize_t page0 = <Py_ssize_t>((<size_t>kept) // page_size * page_size)
    cdef Py_ssize_t p, i, lo, hi, n = 0
    for p in range(mapped.shape[0]):
        if not mapped[p]:
            continue
        page_span(page0, p, <Py_ssize_t>kept, dim, &lo, &hi)
        for i in range(lo, hi):
            if kept[i]:
                if rows != NULL:
                    rows[n] = i
                n += 1
    return n


def first_nonfinite(cnp.ndarray values):
    """The flat index of the first element of the C-contiguous float64 array `values`
    that is not finite, or -1: read in the pages it has (a page never touched holds
    zeros, finite), without a temporary of its size.

    >>> import numpy as np
    >>> first_nonfinite(np.array([[0.0, 1.0], [np.inf, np.nan]])), first_nonfinite(np.zeros(3))
    (2, -1)
    """
    if values.dtype != np.float64 or not values.flags.c_contiguous:
        raise ValueError("first_nonfinite: a C-contiguous float64 array")
    cdef Py_ssize_t n = values.nbytes
    if n == 0:
        return -1
    cdef const char* src = <const char*>cnp.PyArray_DATA(values)
    cdef const double* x = <const double*>src
    cdef uint8_t[::1] mapped = pages_to_read(values)
    cdef Py_ssize_t page0 = <Py_ssize_t>((<size_t>src) // page_size * page_size)
    cdef Py_ssize_t p, lo, hi, i, found = -1
    with nogil:
        for p in range(mapped.shape[0]):
            if not mapped[p]:
                continue
            page_span(page0, p, <Py_ssize_t>src, n, &lo, &hi)
            # the doubles that start in this page (a double split by the page's end is
            # read whole with the page it starts in)
            for i in range((lo + 7) // 8, (hi + 7) // 8):
                if not isfinite(x[i]):
                    found = i
                    break
            if found >= 0:
                break
    return found
