# cython: language_level=3
"""Compiled core of the streaming svmlight / libsvm reader (`onlinepgs.svmlight`).

`_Parser` turns complete text lines held in a bytes-like block into CSR buffers. Every
line is parsed with C pointers and the GIL released; no Python object is created per
line or per entry. Two line parsers share that work:

* the fast path (``svm_fast_line``) takes a line that ends with a newline at least 8
  bytes before the end of the block (so it needs no bounds checks and may load 8
  bytes at a time): indices and decimals are read 8 digits at a time (SWAR), the
  usual values (``d.ddd``, ``d``, and any decimal whose digits make an integer below
  2^53 with a power of ten up to 10^22) are converted exactly (Clinger's fast path),
  other values go to the exact number parser below. On anything else (an error, an
  index beyond 15 digits or out of range, ...) it gives up the line, untouched;
* the exact line parser (`_Parser._line`) then reads it, as it reads every other
  line: it decides every error and its position. The fast path only accepts lines
  that `_line` accepts, with the same result (the tests compare the two).

The buffers are C arrays (``PyMem_Raw*``, so ``tracemalloc`` sees them) that grow
geometrically. Taking a chunk (`_Parser.take_chunk`) hands the values and labels
over to NumPy without a copy, and the indices too when they need int64 (or when
chunks are unbounded); bounded int32 chunks get narrowed copies and the parser keeps
its int64 index buffers. Buffers handed over come back to a small pool of the parser
when their arrays are collected, for its next chunks: memory already mapped, instead
of fresh pages (whose page faults cost more than the parsing itself).

Numbers are parsed by hand: ``[+-]? (d+ [. d*] | . d+) ([eE] [+-]? d+)?``, no hex,
``inf``, ``nan`` or digit separators. The value is the correctly rounded double:
exact small cases use Clinger's fast path, the others the Eisel-Lemire algorithm
(128-bit truncated powers of ten; with more than 19 significant digits, when both
ends of the truncation interval round alike), and the rare undecided cases
(subnormals, near-ties) CPython's ``PyOS_string_to_double`` under the GIL, which is
correctly rounded and locale-independent (glibc's ``strtod`` is not always, on long
subnormal inputs).
"""
cimport cython
from cpython.mem cimport PyMem_RawFree, PyMem_RawMalloc, PyMem_RawRealloc
from libc.stdint cimport INT64_MAX, int32_t, int64_t, uint64_t
from libc.string cimport memchr, memcmp, memcpy

import numpy as np
cimport numpy as cnp

from onlinepgs._core._lineparse cimport (BadLine, LINE_EMPTY, LINE_ERROR, LINE_NOMEM,
                                         LINE_ROW, ST_DONE, ST_ERROR, ST_FULL, ST_NOMEM,
                                         ST_SKIPPED, bad_line_info, mark_bad)

cnp.import_array()

# The number and line parsers in C (svmlight_parser.c, compiled into this extension by
# setup.py): the lines are read without the GIL and without a Python object per entry.
cdef extern from "svmlight_parser.h":
    void svm_set_pow10(int i, uint64_t hi, uint64_t lo) nogil
    int svm_parse_double(const char *s, const char *e, double *out) nogil
    unsigned char svm_cls[256]
    ctypedef struct svm_fast_state:
        int64_t* indices
        double* data
        Py_ssize_t nnz, cap
        int64_t shift, jlim
        double label
        int64_t row_max
        int is_sorted, row_zero
    int svm_fast_line(const char* s, const char* e, svm_fast_state* st,
                      const char** endp) nogil
    const char* svm_fast_double(const char* p, double* out) nogil
    int SVM_FAST_BAIL, SVM_FAST_ROW, SVM_FAST_EMPTY, SVM_FAST_GROW
    int SVM_POW10_MIN
    int SVM_POW10_MAX


def _pow10_table():
    """The 128-bit truncated powers of ten 10^e, e in [SVM_POW10_MIN, SVM_POW10_MAX], as
    (hi, lo) pairs: computed exactly once here, also for the VW reader (_vw), which
    compiles its own copy of svmlight_parser.c and fills its table from this list."""
    mask = (1 << 64) - 1
    table = []
    for e in range(SVM_POW10_MIN, SVM_POW10_MAX + 1):
        if e >= 0:
            v = 10 ** e
            b = v.bit_length()
            v = v >> (b - 128) if b > 128 else v << (128 - b)
        else:
            d = 10 ** -e
            v = (1 << (128 + d.bit_length())) // d
            v >>= v.bit_length() - 128
        table.append(((v >> 64) & mask, v & mask))
    return table


def _fill_pow10():
    for i, (hi, lo) in enumerate(_pow10_table()):
        svm_set_pow10(i, hi, lo)


_fill_pow10()


cdef int parse_number(const char* s, const char* e, double* out) noexcept nogil:
    """[s, e) as a decimal number (the grammar above): 1 and the correctly rounded value
    (+-inf on overflow), or 0 on a syntax error. For the other compiled readers
    (declared in _svmlight.pxd); may take the GIL (svm_parse_double's rare cases)."""
    return svm_parse_double(s, e, out)


def _parse_float(bytes s):
    """The reader's number parser on one token (testing aid): a float, or None."""
    cdef double v
    cdef const char* p = s
    if svm_parse_double(p, p + len(s), &v):
        return v
    return None


def _fast_float(bytes s):
    """The line parser's fast path on one token (testing aid): the value, or None
    when the fast path declines it (the exact parser svm_parse_double then decides,
    on the whole token). s must not contain whitespace, '#' or a newline."""
    cdef double v
    cdef bytes padded = s + b"\n" + b"\0" * 16
    if svm_fast_double(<const char*>padded, &v) == NULL:
        return None
    return v


# ---------------------------------------------------------------------------------
# line parser

# the statuses and line outcomes (ST_*, LINE_*) and BadLine are _lineparse.pxd's
cdef enum:
    LINE_BAIL = 4      # (fast path) a line outcome: not handled, parse it with _line

cdef enum:
    # error kinds (ERROR_KINDS below gives their names)
    E_LABEL = 1
    E_VALUE = 2
    E_COLON = 3
    E_EMPTY_INDEX = 4
    E_INDEX = 5
    E_NEGATIVE = 6
    E_ZERO_ONE_BASED = 7
    E_TOO_LARGE = 8
    E_OVERFLOW = 9
    E_QID = 10

ERROR_KINDS = {
    E_LABEL: "label", E_VALUE: "value", E_COLON: "colon",
    E_EMPTY_INDEX: "empty_index", E_INDEX: "index", E_NEGATIVE: "negative_index",
    E_ZERO_ONE_BASED: "zero_in_one_based", E_TOO_LARGE: "index_too_large",
    E_OVERFLOW: "index_overflow", E_QID: "qid",
}

cdef enum:
    MODE_ONE_BASED = 0
    MODE_ZERO_BASED = 1
    MODE_UNDECIDED = 2

# byte classes (svm_cls, shared with the C fast path): 1 = whitespace inside a line,
# 2 = '#', 3 = '\n' (never inside a line given to _line; ends one for svm_fast_line)
for _c in (32, 9, 13, 11, 12):  # space, \t, \r, \v, \f
    svm_cls[_c] = 1
svm_cls[ord("#")] = 2
svm_cls[ord("\n")] = 3

cdef enum:
    AMB_TEXT = 256             # bytes kept of the deferred error's token
    INSERTION_SORT_MAX = 16

# an index above this is an error (E_OVERFLOW): checked before each "* 10 + digit"
cdef int64_t INDEX_LIMIT_DIV10 = ((<int64_t>1) << 62) // 10


cdef enum:
    POOL_MAX = 8               # buffers kept for reuse (two chunks' worth)


@cython.final
cdef class _Pool:
    """Buffers of a parser's chunks, given back when their arrays are collected, for
    its next chunks: a new chunk then reuses memory already mapped instead of taking
    fresh pages from the system (a page fault per 4 KiB, which cost more than the
    parsing). At most POOL_MAX buffers are kept; the rest are freed."""
    cdef void* ptrs[POOL_MAX]
    cdef size_t caps[POOL_MAX]
    cdef int n
    cdef bint closed                # the parser is gone: free what comes back

    def __dealloc__(self):
        self.clear()

    cdef void clear(self) noexcept:
        cdef int i
        for i in range(self.n):
            PyMem_RawFree(self.ptrs[i])
        self.n = 0

    cdef void* get(self, size_t need, size_t want, size_t* cap) noexcept:
        """A buffer of at least need bytes, want (>= need) if possible: the smallest
        kept one of want bytes or more, else the largest kept one of need bytes or
        more, else a new one of want bytes. Its size goes to *cap; NULL when out of
        memory."""
        cdef int i, best = -1
        cdef size_t c, b
        cdef void* ptr
        for i in range(self.n):
            c = self.caps[i]
            if c < need:
                continue
            if best < 0:
                best = i
                continue
            b = self.caps[best]
            if (c >= want and c < b) or (b < want and c > b):
                best = i
        if best >= 0:
            ptr = self.ptrs[best]
            cap[0] = self.caps[best]
            self.n -= 1
            self.ptrs[best] = self.ptrs[self.n]
            self.caps[best] = self.caps[self.n]
            return ptr
        if want == 0:
            want = 1
        cap[0] = want
        return PyMem_RawMalloc(want)

    cdef void put(self, void* ptr, size_t cap) noexcept:
        cdef int i, small = 0
        if self.closed:
            PyMem_RawFree(ptr)
            return
        if self.n < POOL_MAX:
            self.ptrs[self.n] = ptr
            self.caps[self.n] = cap
            self.n += 1
            return
        for i in range(1, self.n):  # full: keep the larger buffers
            if self.caps[i] < self.caps[small]:
                small = i
        if self.caps[small] < cap:
            PyMem_RawFree(self.ptrs[small])
            self.ptrs[small] = ptr
            self.caps[small] = cap
        else:
            PyMem_RawFree(ptr)


@cython.final
@cython.no_gc  # holds no container: untracked, so chunks do not drive the collector
cdef class _Owner:
    """The base of a chunk's array: owns its buffer, given back to the pool (or
    freed) when the array is collected."""
    cdef void* ptr
    cdef size_t cap
    cdef _Pool pool

    def __dealloc__(self):
        if self.pool is not None:
            self.pool.put(self.ptr, self.cap)
        else:
            PyMem_RawFree(self.ptr)


cdef object _own_array(void* ptr, size_t cap, Py_ssize_t n, int typenum, _Pool pool):
    """A 1-d NumPy array of n items over a PyMem_Raw buffer of cap bytes, which goes
    back to pool when the array is collected."""
    cdef cnp.npy_intp dims[1]
    dims[0] = n
    cdef _Owner owner = _Owner.__new__(_Owner)
    owner.ptr = ptr
    owner.cap = cap
    owner.pool = pool
    cdef cnp.ndarray arr = cnp.PyArray_SimpleNewFromData(1, dims, typenum, ptr)
    cnp.set_array_base(arr, owner)
    return arr


cdef inline const char* _skip_ws(const char* p, const char* e) noexcept nogil:
    while p < e and svm_cls[<unsigned char>p[0]] == 1:
        p += 1
    return p


cdef inline const char* _token_end(const char* p, const char* e) noexcept nogil:
    while p < e and svm_cls[<unsigned char>p[0]] == 0:
        p += 1
    return p


cdef inline bint _all_digits(const char* p, const char* e) noexcept nogil:
    if p >= e:
        return False
    while p < e:
        if <unsigned char>(p[0] - 48) >= 10:
            return False
        p += 1
    return True


@cython.final
cdef class _Parser:
    """Line parser and chunk buffers of one stream (see `onlinepgs.svmlight`).

    Parameters: n_features (-1: not declared), zero_based (1, 0 or -1 for "auto"),
    skip (on_error="skip"), chunk_rows (-1: unbounded), fast_path (False: parse every
    line with the exact line parser only, for tests).
    """
    # current chunk
    cdef double* labels
    cdef int64_t* indptr
    cdef int64_t* indices
    cdef double* data
    cdef Py_ssize_t cap_rows, cap_nnz, n_rows, nnz
    cdef size_t capb_labels, capb_indptr, capb_indices, capb_data  # in bytes
    cdef _Pool pool                 # buffers of collected chunks, for reuse
    cdef int64_t chunk_max          # largest stored index (raw while undecided), -1
    # sort scratch
    cdef int64_t* tmp_idx
    cdef double* tmp_val
    cdef Py_ssize_t cap_tmp
    # settings
    cdef int64_t n_features
    cdef int mode
    cdef bint skip
    cdef Py_ssize_t chunk_rows
    cdef bint fast_path             # False: every line through _line (for tests)
    # counters over the stream
    cdef public int64_t n_lines, n_skipped, n_rows_out, n_nnz_out
    cdef int64_t seen_max           # largest index (after the shift) in emitted chunks
    # auto mode, first chunk: index 0 seen in a kept row; rows whose raw index equals
    # the declared n_features (bad only if the data proves zero-based)
    cdef bint saw_zero
    cdef int64_t* amb_rows
    cdef Py_ssize_t n_amb, cap_amb
    cdef int64_t amb_line, amb_col, amb_bad_len
    cdef char amb_text[AMB_TEXT]
    cdef Py_ssize_t amb_text_len
    # the last error (offsets into the block given to parse)
    cdef BadLine bad_line  # where the last bad line went wrong (error_info)

    def __cinit__(self, int64_t n_features=-1, int zero_based=-1, bint skip=False,
                  Py_ssize_t chunk_rows=-1, bint fast_path=True):
        self.fast_path = fast_path
        self.n_features = n_features
        self.mode = MODE_UNDECIDED if zero_based < 0 else (
            MODE_ZERO_BASED if zero_based else MODE_ONE_BASED)
        self.skip = skip
        self.chunk_rows = chunk_rows
        self.chunk_max = -1
        self.seen_max = -1
        self.pool = _Pool()
        self.cap_rows = 1024 if chunk_rows < 0 or chunk_rows > 1024 else chunk_rows
        self.cap_nnz = 16 * self.cap_rows
        if not self._alloc(False):
            raise MemoryError()

    def __dealloc__(self):
        if self.pool is not None:
            self.pool.closed = True
            self.pool.clear()
        PyMem_RawFree(self.labels)
        PyMem_RawFree(self.indptr)
        PyMem_RawFree(self.indices)
        PyMem_RawFree(self.data)
        PyMem_RawFree(self.tmp_idx)
        PyMem_RawFree(self.tmp_val)
        PyMem_RawFree(self.amb_rows)

    cdef bint _alloc(self, bint keep_index):
        """Buffers for a new chunk of cap_rows rows and about cap_nnz entries (from
        the pool when it holds fitting ones); keep_index: keep indices and indptr."""
        cdef size_t want = self.cap_nnz * 8
        self.labels = <double*>self.pool.get(self.cap_rows * 8, self.cap_rows * 8,
                                             &self.capb_labels)
        self.data = <double*>self.pool.get(want - (want >> 2), want, &self.capb_data)
        if not keep_index:
            self.indptr = <int64_t*>self.pool.get((self.cap_rows + 1) * 8,
                                                  (self.cap_rows + 1) * 8, &self.capb_indptr)
            self.indices = <int64_t*>self.pool.get(want, want, &self.capb_indices)
        self.n_rows = 0
        self.nnz = 0
        if (self.labels == NULL or self.indptr == NULL or self.indices == NULL
                or self.data == NULL):
            return False
        self.indptr[0] = 0
        self._set_caps()
        return True

    cdef inline void _set_caps(self) noexcept nogil:
        cdef size_t b = self.capb_indices if self.capb_indices < self.capb_data else self.capb_data
        self.cap_nnz = <Py_ssize_t>(b // 8)
        b = self.capb_labels if self.capb_labels + 8 < self.capb_indptr else self.capb_indptr - 8
        self.cap_rows = <Py_ssize_t>(b // 8)

    def release(self):
        """Free the buffers kept for reuse (the stream is done); arrays collected later
        free theirs."""
        if self.pool is not None:
            self.pool.closed = True
            self.pool.clear()

    # ---- properties -------------------------------------------------------------
    @property
    def zero_based(self):
        """True or False once known; None while "auto" has not decided."""
        if self.mode == MODE_UNDECIDED:
            return None
        return self.mode == MODE_ZERO_BASED

    @property
    def n_features_seen(self):
        return self.seen_max + 1

    @property
    def pending_rows(self):
        return self.n_rows

    # ---- growth (nogil) -----------------------------------------------------------
    cdef bint _grow_nnz(self, Py_ssize_t need) noexcept nogil:
        cdef Py_ssize_t cap = self.cap_nnz
        cdef void* ptr
        while cap < need:
            cap = cap + (cap >> 1) + 16
        if self.capb_indices < <size_t>cap * 8:
            ptr = PyMem_RawRealloc(self.indices, cap * 8)
            if ptr == NULL:
                return False
            self.indices = <int64_t*>ptr
            self.capb_indices = cap * 8
        if self.capb_data < <size_t>cap * 8:
            ptr = PyMem_RawRealloc(self.data, cap * 8)
            if ptr == NULL:
                return False
            self.data = <double*>ptr
            self.capb_data = cap * 8
        self._set_caps()
        return True

    cdef bint _grow_rows(self) noexcept nogil:
        cdef Py_ssize_t cap = self.cap_rows + (self.cap_rows >> 1) + 16
        cdef void* ptr
        if self.capb_labels < <size_t>cap * 8:
            ptr = PyMem_RawRealloc(self.labels, cap * 8)
            if ptr == NULL:
                return False
            self.labels = <double*>ptr
            self.capb_labels = cap * 8
        if self.capb_indptr < <size_t>(cap + 1) * 8:
            ptr = PyMem_RawRealloc(self.indptr, (cap + 1) * 8)
            if ptr == NULL:
                return False
            self.indptr = <int64_t*>ptr
            self.capb_indptr = (cap + 1) * 8
        self._set_caps()
        return True

    # ---- errors -----------------------------------------------------------------
    cdef inline int _fail(self, int kind, const char* base, const char* line,
                          const char* bad, const char* bad_end,
                          const char* tok, const char* tok_end) noexcept nogil:
        return mark_bad(&self.bad_line, kind, self.n_lines, base, line, bad, bad_end, tok,
                        tok_end)

    def error_info(self):
        """(kind, line, column, bad slice, token slice) of the last error: slices are
        (start, stop) offsets into the block passed to `parse`."""
        return bad_line_info(self.bad_line, ERROR_KINDS)

    # ---- sorting a row ------------------------------------------------------------
    cdef bint _canonicalize_row(self, Py_ssize_t start) noexcept nogil:
        """Sort row entries [start, nnz) by index (stable) and sum duplicates in file
        order; updates nnz."""
        cdef int64_t* idx = self.indices + start
        cdef double* val = self.data + start
        cdef Py_ssize_t n = self.nnz - start, i, j, width, lo, mid, hi, a, b, k
        cdef int64_t ki
        cdef double kv
        cdef int64_t* src_i
        cdef double* src_v
        cdef int64_t* dst_i
        cdef double* dst_v
        cdef int64_t* swap_i
        cdef double* swap_v
        if n <= INSERTION_SORT_MAX:
            for i in range(1, n):
                ki = idx[i]
                kv = val[i]
                j = i - 1
                while j >= 0 and idx[j] > ki:
                    idx[j + 1] = idx[j]
                    val[j + 1] = val[j]
                    j -= 1
                idx[j + 1] = ki
                val[j + 1] = kv
        else:
            if self.cap_tmp < n:
                PyMem_RawFree(self.tmp_idx)
                PyMem_RawFree(self.tmp_val)
                self.tmp_idx = <int64_t*>PyMem_RawMalloc(n * sizeof(int64_t))
                self.tmp_val = <double*>PyMem_RawMalloc(n * sizeof(double))
                if self.tmp_idx == NULL or self.tmp_val == NULL:
                    self.cap_tmp = 0
                    return False
                self.cap_tmp = n
            # bottom-up merge sort (stable), runs of INSERTION_SORT_MAX first
            lo = 0
            while lo < n:
                hi = lo + INSERTION_SORT_MAX if lo + INSERTION_SORT_MAX < n else n
                for i in range(lo + 1, hi):
                    ki = idx[i]
                    kv = val[i]
                    j = i - 1
                    while j >= lo and idx[j] > ki:
                        idx[j + 1] = idx[j]
                        val[j + 1] = val[j]
                        j -= 1
                    idx[j + 1] = ki
                    val[j + 1] = kv
                lo = hi
            src_i = idx
            src_v = val
            dst_i = self.tmp_idx
            dst_v = self.tmp_val
            width = INSERTION_SORT_MAX
            while width < n:
                lo = 0
                while lo < n:
                    mid = lo + width if lo + width < n else n
                    hi = lo + 2 * width if lo + 2 * width < n else n
                    a = lo
                    b = mid
                    k = lo
                    while a < mid and b < hi:
                        if src_i[b] < src_i[a]:
                            dst_i[k] = src_i[b]
                            dst_v[k] = src_v[b]
                            b += 1
                        else:
                            dst_i[k] = src_i[a]
                            dst_v[k] = src_v[a]
                            a += 1
                        k += 1
                    while a < mid:
                        dst_i[k] = src_i[a]
                        dst_v[k] = src_v[a]
                        a += 1
                        k += 1
                    while b < hi:
                        dst_i[k] = src_i[b]
                        dst_v[k] = src_v[b]
                        b += 1
                        k += 1
                    lo = hi
                swap_i = src_i
                src_i = dst_i
                dst_i = swap_i
                swap_v = src_v
                src_v = dst_v
                dst_v = swap_v
                width *= 2
            if src_i != idx:
                memcpy(idx, src_i, n * sizeof(int64_t))
                memcpy(val, src_v, n * sizeof(double))
        # sum duplicates (in file order, thanks to the stable sort)
        k = 0
        for i in range(n):
            if k > 0 and idx[k - 1] == idx[i]:
                val[k - 1] += val[i]
            else:
                idx[k] = idx[i]
                val[k] = val[i]
                k += 1
        self.nnz = start + k
        return True

    # ---- one line ---------------------------------------------------------------
    cdef int _line(self, const char* base, const char* s, const char* le) noexcept nogil:
        cdef const char* p = _skip_ws(s, le)
        cdef const char* t
        cdef const char* te
        cdef const char* colon
        cdef const char* q
        cdef double label, v
        cdef int64_t idx, j, row_max = -1, prev = -1, nf = self.n_features
        cdef bint row_zero = False, row_amb = False, is_sorted = True, first = True
        cdef Py_ssize_t row_start = self.nnz, nnz = self.nnz
        cdef Py_ssize_t cap = self.cap_nnz
        cdef int64_t* indices = self.indices
        cdef double* data = self.data
        cdef int mode = self.mode
        cdef Py_ssize_t ncopy
        if p == le or p[0] == 35:  # '#'
            return LINE_EMPTY
        t = p
        te = _token_end(p, le)
        if not svm_parse_double(t, te, &label) or not (label - label == 0.0):
            return self._fail(E_LABEL, base, s, t, te, t, te)
        p = te
        while True:
            p = _skip_ws(p, le)
            if p == le or p[0] == 35:
                break
            t = p
            te = _token_end(p, le)
            p = te
            if first:
                first = False
                if te - t >= 4 and memcmp(t, b"qid:", 4) == 0:
                    q = t + 4
                    if q < te and (q[0] == 43 or q[0] == 45):  # sign
                        q += 1
                    if not _all_digits(q, te):
                        self.nnz = row_start
                        return self._fail(E_QID, base, s, t + 4, te, t, te)
                    continue
            colon = <const char*>memchr(t, 58, te - t)
            if colon == NULL:
                self.nnz = row_start
                return self._fail(E_COLON, base, s, t, te, t, te)
            if colon == t:
                self.nnz = row_start
                return self._fail(E_EMPTY_INDEX, base, s, t, colon, t, te)
            q = t
            if q[0] == 43:  # '+'
                q += 1
            elif q[0] == 45 and _all_digits(q + 1, colon):  # '-'
                self.nnz = row_start
                return self._fail(E_NEGATIVE, base, s, t, colon, t, te)
            if q == colon:
                self.nnz = row_start
                return self._fail(E_INDEX, base, s, t, colon, t, te)
            idx = 0
            while q < colon:
                if <unsigned char>(q[0] - 48) >= 10:
                    self.nnz = row_start
                    return self._fail(E_INDEX, base, s, t, colon, t, te)
                if idx > INDEX_LIMIT_DIV10:
                    self.nnz = row_start
                    return self._fail(E_OVERFLOW, base, s, t, colon, t, te)
                idx = idx * 10 + (q[0] - 48)
                q += 1
            if not svm_parse_double(colon + 1, te, &v) or not (v - v == 0.0):
                self.nnz = row_start
                return self._fail(E_VALUE, base, s, colon + 1, te, t, te)
            if mode == MODE_ZERO_BASED:
                j = idx
            elif mode == MODE_ONE_BASED:
                if idx == 0:
                    self.nnz = row_start
                    return self._fail(E_ZERO_ONE_BASED, base, s, t, colon, t, te)
                j = idx - 1
            else:
                j = idx
                if idx == 0:
                    row_zero = True
            if nf >= 0:
                if mode != MODE_UNDECIDED:
                    if j >= nf:
                        self.nnz = row_start
                        return self._fail(E_TOO_LARGE, base, s, t, colon, t, te)
                elif idx > nf:
                    self.nnz = row_start
                    return self._fail(E_TOO_LARGE, base, s, t, colon, t, te)
                elif idx == nf and not row_amb:
                    row_amb = True
                    if self.n_amb == 0:  # keep what a deferred error must show
                        self.amb_line = self.n_lines
                        self.amb_col = t - s + 1
                        ncopy = te - t if te - t < AMB_TEXT else AMB_TEXT
                        memcpy(self.amb_text, t, ncopy)
                        self.amb_text_len = ncopy
                        self.amb_bad_len = colon - t
            if nnz == cap:
                self.nnz = nnz
                if not self._grow_nnz(nnz + 1):
                    self.nnz = row_start
                    return LINE_NOMEM
                cap = self.cap_nnz
                indices = self.indices
                data = self.data
            indices[nnz] = j
            data[nnz] = v
            nnz += 1
            if j <= prev:
                is_sorted = False
            prev = j
            if j > row_max:
                row_max = j
        self.nnz = nnz
        return self._commit_row(row_start, label, is_sorted, row_max, row_zero, row_amb)

    cdef int _commit_row(self, Py_ssize_t row_start, double label, bint is_sorted,
                         int64_t row_max, bint row_zero, bint row_amb) noexcept nogil:
        """Make a row of the entries [row_start, nnz) just parsed."""
        if not is_sorted:
            if not self._canonicalize_row(row_start):
                self.nnz = row_start
                return LINE_NOMEM
        if self.n_rows == self.cap_rows:
            if not self._grow_rows():
                self.nnz = row_start
                return LINE_NOMEM
        if row_amb:
            if self.n_amb == self.cap_amb:
                self.cap_amb = 2 * self.cap_amb + 16
                self.amb_rows = <int64_t*>PyMem_RawRealloc(
                    self.amb_rows, self.cap_amb * sizeof(int64_t))
                if self.amb_rows == NULL:
                    self.nnz = row_start
                    return LINE_NOMEM
            self.amb_rows[self.n_amb] = self.n_rows
            self.n_amb += 1
        self.labels[self.n_rows] = label
        self.n_rows += 1
        self.indptr[self.n_rows] = self.nnz
        if row_max > self.chunk_max:
            self.chunk_max = row_max
        if row_zero:
            self.saw_zero = True
        return LINE_ROW

    # ---- one line, fast path (see svm_fast_line) ------------------------------------
    cdef inline void _fast_setup(self, svm_fast_state* st) noexcept nogil:
        st.shift = 1 if self.mode == MODE_ONE_BASED else 0
        st.jlim = self.n_features if self.n_features >= 0 else INT64_MAX

    cdef inline int _fast_line(self, const char* s, const char* e, svm_fast_state* st,
                               const char** nxt) noexcept nogil:
        cdef Py_ssize_t row_start = self.nnz
        cdef int r
        while True:
            st.indices = self.indices
            st.data = self.data
            st.nnz = row_start
            st.cap = self.cap_nnz
            r = svm_fast_line(s, e, st, nxt)
            if r == SVM_FAST_ROW:
                self.nnz = st.nnz
                return self._commit_row(
                    row_start, st.label, st.is_sorted, st.row_max,
                    st.row_zero and self.mode == MODE_UNDECIDED, False)
            if r == SVM_FAST_EMPTY:
                return LINE_EMPTY
            if r == SVM_FAST_BAIL:
                return LINE_BAIL
            if not self._grow_nnz(self.cap_nnz + 1):  # SVM_FAST_GROW: retry
                return LINE_NOMEM

    # ---- a block ------------------------------------------------------------------
    def parse(self, const unsigned char[::1] buf, Py_ssize_t pos, Py_ssize_t end):
        """Parse the lines of ``buf[pos:end]`` (the last one may lack its newline).

        Returns ``(status, pos)``: 0 = all consumed, 1 = chunk full (call again from
        pos after `take_chunk`), 2 = error (see `error_info`; pos is the bad line's
        start), 3 = out of memory.
        """
        if pos >= end:
            return ST_DONE, end
        cdef const char* base = <const char*>&buf[0]
        cdef const char* p = base + pos
        cdef const char* e = base + end
        cdef const char* le
        cdef const char* nxt
        cdef const char* fast_end
        cdef Py_ssize_t fast_off
        cdef int r, status = ST_DONE
        cdef bint bounded = self.chunk_rows > 0
        cdef svm_fast_state st
        with nogil:
            # the fast path takes the lines that end with a '\n' at least 8 bytes
            # before the end of buf (it reads up to 7 bytes past a line's end)
            fast_off = buf.shape[0] - 8
            if fast_off > end:
                fast_off = end
            if fast_off < pos or not self.fast_path:
                fast_off = pos
            fast_end = base + fast_off
            while fast_end > p and (fast_end - 1)[0] != 10:
                fast_end -= 1
            self._fast_setup(&st)
            while p < e:
                self.n_lines += 1
                r = LINE_BAIL
                if p < fast_end:
                    r = self._fast_line(p, fast_end, &st, &nxt)
                if r == LINE_BAIL:
                    le = <const char*>memchr(p, 10, e - p)
                    if le == NULL:
                        le = e
                    r = self._line(base, p, le)
                    nxt = le + 1 if le < e else e
                if r == LINE_ERROR:
                    if not self.skip:
                        status = ST_ERROR
                        break
                    self.n_skipped += 1
                    if self.n_skipped == 1:  # the reader keeps the first one's place
                        status = ST_SKIPPED
                        p = nxt
                        break
                elif r == LINE_NOMEM:
                    status = ST_NOMEM
                    break
                p = nxt
                if r == LINE_ROW and bounded and self.n_rows >= self.chunk_rows:
                    status = ST_FULL
                    break
        if status == ST_NOMEM:
            raise MemoryError("out of memory while reading svmlight data")
        return status, p - base

    # ---- chunks -------------------------------------------------------------------
    def decide(self):
        """Settle "auto" on the rows held (the first chunk). Returns None, or the
        deferred error (kind, line, column, bad text, token text) when the
        data turned out zero-based and a row holds index n_features, with
        on_error="raise" (with "skip" such rows are dropped and counted)."""
        cdef Py_ssize_t i, r, k, out_rows, out_nnz, start, stop, amb_k
        cdef int64_t mx
        if self.mode != MODE_UNDECIDED or self.n_rows == 0:
            return None
        if not self.saw_zero:
            self.mode = MODE_ONE_BASED
            with nogil:
                for i in range(self.nnz):
                    self.indices[i] -= 1
            self.chunk_max -= 1
        else:
            self.mode = MODE_ZERO_BASED
            if self.n_amb > 0:
                if not self.skip:
                    text = self.amb_text[:self.amb_text_len]
                    return ("index_too_large", self.amb_line, self.amb_col,
                            text[:self.amb_bad_len], text)
                # drop the rows listed in amb_rows (increasing), compacting in place
                with nogil:
                    out_rows = 0
                    out_nnz = 0
                    amb_k = 0
                    mx = -1
                    for r in range(self.n_rows):
                        start = self.indptr[r]
                        stop = self.indptr[r + 1]
                        if amb_k < self.n_amb and self.amb_rows[amb_k] == r:
                            amb_k += 1
                            continue
                        for k in range(start, stop):
                            self.indices[out_nnz] = self.indices[k]
                            self.data[out_nnz] = self.data[k]
                            if self.indices[k] > mx:
                                mx = self.indices[k]
                            out_nnz += 1
                        self.labels[out_rows] = self.labels[r]
                        out_rows += 1
                        self.indptr[out_rows] = out_nnz
                    self.n_skipped += self.n_amb
                    self.n_rows = out_rows
                    self.nnz = out_nnz
                    self.chunk_max = mx
        self.n_amb = 0
        PyMem_RawFree(self.amb_rows)
        self.amb_rows = NULL
        self.cap_amb = 0
        return None

    def take_chunk(self):
        """Hand over the rows held as (data, indices, indptr, labels, n_features_seen)
        (call `decide` first) and start empty buffers. indices/indptr are int32 when
        every value fits, else int64.

        With bounded chunks, int32 indices and indptr are copies (narrowed) into
        buffers of the pool, and the int64 ones stay for the next chunk; data and
        labels are handed over as they are. A buffer much larger than its content is
        shrunk first."""
        cdef Py_ssize_t n_rows = self.n_rows, nnz = self.nnz, i
        cdef bint narrow = nnz < 2147483647 and self.chunk_max < 2147483647
        cdef bint keep_index = narrow and self.chunk_rows > 0
        cdef bint exact = self.chunk_rows <= 0  # one chunk of all: no slack
        cdef int32_t* i32
        cdef int32_t* p32
        cdef int64_t* src
        cdef size_t capb_i, capb_p
        cdef int typenum
        cdef _Pool pool = self.pool
        if self.chunk_max > self.seen_max:
            self.seen_max = self.chunk_max
        if keep_index:
            i32 = <int32_t*>pool.get(nnz * 4, nnz * 4 + (nnz >> 1) + 64, &capb_i)
            if i32 == NULL:
                raise MemoryError()
            p32 = <int32_t*>pool.get((n_rows + 1) * 4, (n_rows + 1) * 4, &capb_p)
            if p32 == NULL:
                pool.put(i32, capb_i)
                raise MemoryError()
            with nogil:
                src = self.indices
                for i in range(nnz):
                    i32[i] = <int32_t>src[i]
                src = self.indptr
                for i in range(n_rows + 1):
                    p32[i] = <int32_t>src[i]
            indices = _own_array(i32, capb_i, nnz, cnp.NPY_INT32, pool)
            indptr = _own_array(p32, capb_p, n_rows + 1, cnp.NPY_INT32, pool)
        else:
            if narrow:
                with nogil:
                    i32 = <int32_t*>self.indices  # in place: slot i (4 bytes) <= slot i (8)
                    for i in range(nnz):
                        i32[i] = <int32_t>self.indices[i]
                    i32 = <int32_t*>self.indptr
                    for i in range(n_rows + 1):
                        i32[i] = <int32_t>self.indptr[i]
            isz = 4 if narrow else 8
            typenum = cnp.NPY_INT32 if narrow else cnp.NPY_INT64
            self.indices = <int64_t*>_shrink(self.indices, nnz * isz, &self.capb_indices,
                                             exact)
            self.indptr = <int64_t*>_shrink(self.indptr, (n_rows + 1) * isz,
                                            &self.capb_indptr, exact)
            indices = _own_array(self.indices, self.capb_indices, nnz, typenum, pool)
            self.indices = NULL
            indptr = _own_array(self.indptr, self.capb_indptr, n_rows + 1, typenum, pool)
            self.indptr = NULL
        self.data = <double*>_shrink(self.data, nnz * 8, &self.capb_data, exact)
        self.labels = <double*>_shrink(self.labels, n_rows * 8, &self.capb_labels, exact)
        data = _own_array(self.data, self.capb_data, nnz, cnp.NPY_FLOAT64, pool)
        self.data = NULL
        labels = _own_array(self.labels, self.capb_labels, n_rows, cnp.NPY_FLOAT64, pool)
        self.labels = NULL
        self.n_rows_out += n_rows
        self.n_nnz_out += nnz
        # next buffers: sized after this chunk
        if self.chunk_rows > 0:
            self.cap_rows = self.chunk_rows
            self.cap_nnz = nnz + (nnz >> 3) + 16
        else:
            self.cap_rows = 1024
            self.cap_nnz = 16 * 1024
        self.chunk_max = -1
        if not self._alloc(keep_index):
            raise MemoryError()
        return data, indices, indptr, labels, self.seen_max + 1


cdef void* _shrink(void* ptr, size_t nbytes, size_t* cap, bint exact) noexcept:
    """Shrink a PyMem_Raw buffer of cap bytes holding nbytes to nbytes if exact or
    when it is much larger (kept at >= 1 byte; on failure keep it as it is); updates
    cap."""
    if nbytes == 0:
        nbytes = 1
    if cap[0] == nbytes or (not exact and cap[0] <= nbytes + (nbytes >> 2) + 65536):
        return ptr
    cdef void* out = PyMem_RawRealloc(ptr, nbytes)
    if out == NULL:
        return ptr
    cap[0] = nbytes
    return out
