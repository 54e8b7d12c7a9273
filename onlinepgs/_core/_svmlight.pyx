# cython: language_level=3
"""Compiled core of the streaming svmlight / libsvm reader (`onlinepgs.svmlight`).

`_Parser` turns complete text lines held in a bytes-like block into CSR buffers. Every
line is parsed with C pointers and the GIL released; no Python object is created per
line or per entry. The buffers are C arrays (``PyMem_Raw*``, so ``tracemalloc`` sees
them) that grow geometrically and are handed over to NumPy without a copy when a chunk
is taken (`_Parser.take_chunk`), after which the parser starts fresh buffers.

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
from cpython.pycapsule cimport PyCapsule_Destructor, PyCapsule_GetPointer, PyCapsule_New
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.string cimport memchr, memcmp, memcpy

import numpy as np
cimport numpy as cnp

cnp.import_array()

cdef extern from *:
    """
    #include <stdint.h>
    #include <stdlib.h>
    #include <string.h>
    #include <math.h>

    /* 128-bit truncated (rounded down) mantissas of 10^e, e in [-348, 347], most
       significant bit set; filled at import by _fill_pow10 (computed exactly with
       Python integers). */
    #define SVM_POW10_MIN (-348)
    #define SVM_POW10_MAX 347
    static uint64_t svm_pow10_hi[SVM_POW10_MAX - SVM_POW10_MIN + 1];
    static uint64_t svm_pow10_lo[SVM_POW10_MAX - SVM_POW10_MIN + 1];

    static const double svm_exact_pow10[23] = {
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
        1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

    static void svm_set_pow10(int i, uint64_t hi, uint64_t lo) {
        svm_pow10_hi[i] = hi;
        svm_pow10_lo[i] = lo;
    }

    static inline uint64_t svm_mul128(uint64_t a, uint64_t b, uint64_t *lo) {
    #if defined(__SIZEOF_INT128__)
        unsigned __int128 r = (unsigned __int128)a * b;
        *lo = (uint64_t)r;
        return (uint64_t)(r >> 64);
    #else
        uint64_t a0 = (uint32_t)a, a1 = a >> 32, b0 = (uint32_t)b, b1 = b >> 32;
        uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
        uint64_t mid = (p00 >> 32) + (uint32_t)p01 + (uint32_t)p10;
        *lo = (mid << 32) | (uint32_t)p00;
        return p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
    #endif
    }

    static inline int svm_clz64(uint64_t x) {  /* x != 0 */
    #if defined(__GNUC__) || defined(__clang__)
        return __builtin_clzll(x);
    #else
        int n = 0;
        while (!(x & 0x8000000000000000ULL)) { x <<= 1; n++; }
        return n;
    #endif
    }

    /* man * 10^e10 (man != 0) correctly rounded to a normal double, by the
       Eisel-Lemire algorithm; returns 0 when it cannot decide (the caller falls back). */
    static int svm_eisel_lemire(uint64_t man, int64_t e10, int neg, double *out) {
        if (e10 < SVM_POW10_MIN || e10 > SVM_POW10_MAX) return 0;
        int clz = svm_clz64(man);
        man <<= clz;
        /* floor(e10 * log2(10)) (arithmetic shift) + 64 + bias - clz, wrapping */
        uint64_t exp2 = (uint64_t)(((217706 * e10) >> 16) + 64 + 1023) - (uint64_t)clz;
        const uint64_t phi = svm_pow10_hi[e10 - SVM_POW10_MIN];
        const uint64_t plo = svm_pow10_lo[e10 - SVM_POW10_MIN];
        uint64_t xlo, xhi = svm_mul128(man, phi, &xlo);
        if ((xhi & 0x1FF) == 0x1FF && xlo + man < man) {
            /* the truncation of the upper product may matter: use all 128 bits */
            uint64_t ylo, yhi = svm_mul128(man, plo, &ylo);
            uint64_t mhi = xhi, mlo = xlo + yhi;
            if (mlo < xlo) mhi++;
            if ((mhi & 0x1FF) == 0x1FF && mlo + 1 == 0 && ylo + man < man) return 0;
            xhi = mhi;
            xlo = mlo;
        }
        uint64_t msb = xhi >> 63;
        uint64_t mant = xhi >> (msb + 9);
        exp2 -= 1 ^ msb;
        if (xlo == 0 && (xhi & 0x1FF) == 0 && (mant & 3) == 1) return 0;  /* tie */
        mant += mant & 1;
        mant >>= 1;
        if (mant >> 53) {
            mant >>= 1;
            exp2 += 1;
        }
        if (exp2 - 1 >= 0x7FF - 1) return 0;  /* subnormal, zero or overflow */
        uint64_t bits = (exp2 << 52) | (mant & 0x000FFFFFFFFFFFFFULL);
        if (neg) bits |= 0x8000000000000000ULL;
        memcpy(out, &bits, sizeof bits);
        return 1;
    }

    /* The rare undecided cases (subnormals, ties beyond 19 digits): CPython's
       correctly rounded, locale-independent conversion, under the GIL. The token
       is already validated, a syntax Python accepts. */
    static int svm_parse_double_slow(const char *s, const char *e, double *out) {
        char stackbuf[128];
        size_t n = (size_t)(e - s);
        char *buf = n < sizeof stackbuf ? stackbuf : (char *)malloc(n + 1);
        char *end = NULL;
        int ok;
        PyGILState_STATE gil;
        if (buf == NULL) return 0;
        memcpy(buf, s, n);
        buf[n] = 0;
        gil = PyGILState_Ensure();
        *out = PyOS_string_to_double(buf, &end, NULL);
        ok = (end == buf + n) && !PyErr_Occurred();
        PyErr_Clear();
        PyGILState_Release(gil);
        if (buf != stackbuf) free(buf);
        return ok;
    }

    /* [s, e) as a decimal number (see the module docstring). Returns 1 and the
       correctly rounded value (possibly +-inf on overflow) or 0 on a syntax error. */
    static int svm_parse_double(const char *s, const char *e, double *out) {
        const char *p = s;
        int neg = 0, any = 0, truncated = 0, ndig = 0;
        uint64_t man = 0;
        int64_t e10 = 0;
        if (p < e && (*p == '+' || *p == '-')) { neg = (*p == '-'); p++; }
        while (p < e && (unsigned)(*p - '0') < 10) {
            unsigned d = (unsigned)(*p - '0');
            any = 1;
            if (ndig < 19) {
                if (man || d) { man = man * 10 + d; ndig++; }
            } else {
                e10++;
                if (d) truncated = 1;
            }
            p++;
        }
        if (p < e && *p == '.') {
            p++;
            while (p < e && (unsigned)(*p - '0') < 10) {
                unsigned d = (unsigned)(*p - '0');
                any = 1;
                if (ndig < 19) {
                    if (man || d) { man = man * 10 + d; ndig++; }
                    e10--;
                } else if (d) {
                    truncated = 1;
                }
                p++;
            }
        }
        if (!any) return 0;
        if (p < e && (*p == 'e' || *p == 'E')) {
            int eneg = 0;
            int64_t x = 0;
            p++;
            if (p < e && (*p == '+' || *p == '-')) { eneg = (*p == '-'); p++; }
            if (p >= e || (unsigned)(*p - '0') >= 10) return 0;
            while (p < e && (unsigned)(*p - '0') < 10) {
                if (x < 100000000) x = x * 10 + (*p - '0');
                p++;
            }
            e10 += eneg ? -x : x;
        }
        if (p != e) return 0;
        if (man == 0) {
            *out = neg ? -0.0 : 0.0;
            return 1;
        }
        /* man has ndig digits: man * 10^e10 is in [10^(ndig-1+e10), 10^(ndig+e10)) */
        if (ndig - 1 + e10 >= 309) {
            *out = neg ? -HUGE_VAL : HUGE_VAL;
            return 1;
        }
        if (ndig + e10 <= -324) {  /* below half the smallest subnormal */
            *out = neg ? -0.0 : 0.0;
            return 1;
        }
        if (!truncated) {
            if (man <= (1ULL << 53) && e10 >= -22 && e10 <= 22) {  /* Clinger */
                double v = (double)man;
                v = e10 < 0 ? v / svm_exact_pow10[-e10] : v * svm_exact_pow10[e10];
                *out = neg ? -v : v;
                return 1;
            }
            if (svm_eisel_lemire(man, e10, neg, out)) return 1;
        } else if (man < 9999999999999999999ULL) {
            /* digits dropped: the value lies in [man, man + 1) * 10^e10 */
            double lo, hi;
            if (svm_eisel_lemire(man, e10, neg, &lo)
                    && svm_eisel_lemire(man + 1, e10, neg, &hi) && lo == hi) {
                *out = lo;
                return 1;
            }
        }
        return svm_parse_double_slow(s, e, out);
    }
    """
    void svm_set_pow10(int i, uint64_t hi, uint64_t lo) nogil
    int svm_parse_double(const char *s, const char *e, double *out) nogil
    int SVM_POW10_MIN
    int SVM_POW10_MAX


def _fill_pow10():
    mask = (1 << 64) - 1
    for e in range(SVM_POW10_MIN, SVM_POW10_MAX + 1):
        if e >= 0:
            v = 10 ** e
            b = v.bit_length()
            v = v >> (b - 128) if b > 128 else v << (128 - b)
        else:
            d = 10 ** -e
            v = (1 << (128 + d.bit_length())) // d
            v >>= v.bit_length() - 128
        svm_set_pow10(e - SVM_POW10_MIN, (v >> 64) & mask, v & mask)


_fill_pow10()


def _parse_float(bytes s):
    """The reader's number parser on one token (testing aid): a float, or None."""
    cdef double v
    cdef const char* p = s
    if svm_parse_double(p, p + len(s), &v):
        return v
    return None


# ---------------------------------------------------------------------------------
# line parser

cdef enum:
    # parse() statuses
    ST_DONE = 0        # every line up to `end` consumed
    ST_FULL = 1        # the chunk is full (parse again from the returned position)
    ST_ERROR = 2       # a bad line with on_error="raise" (see error_info)
    ST_NOMEM = 3

cdef enum:
    # line outcomes
    LINE_EMPTY = 0
    LINE_ROW = 1
    LINE_ERROR = 2
    LINE_NOMEM = 3

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

# character classes: 1 = whitespace inside a line, 2 = '#'
cdef unsigned char CHAR_CLASS[256]
for _c in (32, 9, 13, 11, 12):  # space, \t, \r, \v, \f
    CHAR_CLASS[_c] = 1
CHAR_CLASS[ord("#")] = 2

cdef enum:
    AMB_TEXT = 256             # bytes kept of the deferred error's token
    INSERTION_SORT_MAX = 16

# an index above this is an error (E_OVERFLOW): checked before each "* 10 + digit"
cdef int64_t INDEX_LIMIT_DIV10 = ((<int64_t>1) << 62) // 10


cdef void _free_capsule(object capsule) noexcept:
    PyMem_RawFree(PyCapsule_GetPointer(capsule, NULL))


cdef object _own_array(void* ptr, Py_ssize_t n, int typenum):
    """A 1-d NumPy array over a PyMem_Raw buffer, which it frees when collected."""
    cdef cnp.npy_intp dims[1]
    dims[0] = n
    cdef cnp.ndarray arr = cnp.PyArray_SimpleNewFromData(1, dims, typenum, ptr)
    capsule = PyCapsule_New(ptr, NULL, <PyCapsule_Destructor>_free_capsule)
    cnp.set_array_base(arr, capsule)
    return arr


cdef inline const char* _skip_ws(const char* p, const char* e) noexcept nogil:
    while p < e and CHAR_CLASS[<unsigned char>p[0]] == 1:
        p += 1
    return p


cdef inline const char* _token_end(const char* p, const char* e) noexcept nogil:
    while p < e and CHAR_CLASS[<unsigned char>p[0]] == 0:
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
    skip (on_error="skip"), chunk_rows (-1: unbounded).
    """
    # current chunk
    cdef double* labels
    cdef int64_t* indptr
    cdef int64_t* indices
    cdef double* data
    cdef Py_ssize_t cap_rows, cap_nnz, n_rows, nnz
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
    cdef int err_kind
    cdef int64_t err_line
    cdef Py_ssize_t err_line_start, err_bad_start, err_bad_end, err_tok_start, err_tok_end

    def __cinit__(self, int64_t n_features=-1, int zero_based=-1, bint skip=False,
                  Py_ssize_t chunk_rows=-1):
        self.n_features = n_features
        self.mode = MODE_UNDECIDED if zero_based < 0 else (
            MODE_ZERO_BASED if zero_based else MODE_ONE_BASED)
        self.skip = skip
        self.chunk_rows = chunk_rows
        self.chunk_max = -1
        self.seen_max = -1
        self.cap_rows = 1024 if chunk_rows < 0 or chunk_rows > 1024 else chunk_rows
        self.cap_nnz = 16 * self.cap_rows
        if not self._alloc():
            raise MemoryError()

    def __dealloc__(self):
        PyMem_RawFree(self.labels)
        PyMem_RawFree(self.indptr)
        PyMem_RawFree(self.indices)
        PyMem_RawFree(self.data)
        PyMem_RawFree(self.tmp_idx)
        PyMem_RawFree(self.tmp_val)
        PyMem_RawFree(self.amb_rows)

    cdef bint _alloc(self):
        self.labels = <double*>PyMem_RawMalloc(self.cap_rows * sizeof(double))
        self.indptr = <int64_t*>PyMem_RawMalloc((self.cap_rows + 1) * sizeof(int64_t))
        self.indices = <int64_t*>PyMem_RawMalloc(self.cap_nnz * sizeof(int64_t))
        self.data = <double*>PyMem_RawMalloc(self.cap_nnz * sizeof(double))
        self.n_rows = 0
        self.nnz = 0
        if self.indptr != NULL:
            self.indptr[0] = 0
        return (self.labels != NULL and self.indptr != NULL and self.indices != NULL
                and self.data != NULL)

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
        while cap < need:
            cap = cap + (cap >> 1) + 16
        cdef int64_t* ni = <int64_t*>PyMem_RawRealloc(self.indices, cap * sizeof(int64_t))
        if ni == NULL:
            return False
        self.indices = ni
        cdef double* nd = <double*>PyMem_RawRealloc(self.data, cap * sizeof(double))
        if nd == NULL:
            return False
        self.data = nd
        self.cap_nnz = cap
        return True

    cdef bint _grow_rows(self) noexcept nogil:
        cdef Py_ssize_t cap = self.cap_rows + (self.cap_rows >> 1) + 16
        cdef double* nl = <double*>PyMem_RawRealloc(self.labels, cap * sizeof(double))
        if nl == NULL:
            return False
        self.labels = nl
        cdef int64_t* np_ = <int64_t*>PyMem_RawRealloc(self.indptr,
                                                       (cap + 1) * sizeof(int64_t))
        if np_ == NULL:
            return False
        self.indptr = np_
        self.cap_rows = cap
        return True

    # ---- errors -----------------------------------------------------------------
    cdef inline int _fail(self, int kind, const char* base, const char* line,
                          const char* bad, const char* bad_end,
                          const char* tok, const char* tok_end) noexcept nogil:
        self.err_kind = kind
        self.err_line = self.n_lines
        self.err_line_start = line - base
        self.err_bad_start = bad - base
        self.err_bad_end = bad_end - base
        self.err_tok_start = tok - base
        self.err_tok_end = tok_end - base
        return LINE_ERROR

    def error_info(self):
        """(kind, line, column, bad slice, token slice) of the last error: slices are
        (start, stop) offsets into the block passed to `parse`."""
        return (ERROR_KINDS[self.err_kind], self.err_line,
                self.err_bad_start - self.err_line_start + 1,
                (self.err_bad_start, self.err_bad_end),
                (self.err_tok_start, self.err_tok_end))

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
        # commit the row
        self.nnz = nnz
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
        cdef int r, status = ST_DONE
        cdef bint bounded = self.chunk_rows > 0
        with nogil:
            while p < e:
                le = <const char*>memchr(p, 10, e - p)
                if le == NULL:
                    le = e
                self.n_lines += 1
                r = self._line(base, p, le)
                if r == LINE_ERROR:
                    if not self.skip:
                        status = ST_ERROR
                        break
                    self.n_skipped += 1
                elif r == LINE_NOMEM:
                    status = ST_NOMEM
                    break
                p = le + 1 if le < e else e
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
        every value fits, else int64."""
        cdef Py_ssize_t n_rows = self.n_rows, nnz = self.nnz, i
        cdef bint narrow = nnz < 2147483647 and self.chunk_max < 2147483647
        cdef int32_t* i32
        cdef int typenum
        if self.chunk_max > self.seen_max:
            self.seen_max = self.chunk_max
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
        # shrink to size (a failed realloc leaves the buffer as it was)
        self.data = <double*>_shrink(self.data, nnz * 8)
        self.indices = <int64_t*>_shrink(self.indices, nnz * isz)
        self.indptr = <int64_t*>_shrink(self.indptr, (n_rows + 1) * isz)
        self.labels = <double*>_shrink(self.labels, n_rows * 8)
        data = _own_array(self.data, nnz, cnp.NPY_FLOAT64)
        self.data = NULL
        indices = _own_array(self.indices, nnz, typenum)
        self.indices = NULL
        indptr = _own_array(self.indptr, n_rows + 1, typenum)
        self.indptr = NULL
        labels = _own_array(self.labels, n_rows, cnp.NPY_FLOAT64)
        self.labels = NULL
        self.indptr = NULL
        self.indices = NULL
        self.data = NULL
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
        if not self._alloc():
            raise MemoryError()
        return data, indices, indptr, labels, self.seen_max + 1


cdef void* _shrink(void* ptr, Py_ssize_t nbytes) noexcept:
    """Shrink a PyMem_Raw buffer (kept at >= 1 byte); on failure keep it as it is."""
    cdef void* out = PyMem_RawRealloc(ptr, nbytes if nbytes > 0 else 1)
    return ptr if out == NULL else out
