# cython: language_level=3
"""Compiled core of the VW text reader (`onlinepgs.formats.vw`).

`_Parser` turns complete lines of Vowpal Wabbit's text format, held in a bytes-like
block, into namespaced rows (`onlinepgs.features.NamespacedRows` arrays) with their
labels and importance weights. One pass over the bytes, the GIL released, no Python
object per line or entry (except the entries' names, made only when auditing).

A line is read as VW's text parser reads it (parse_example_text.cc, parse_float,
hashstring and the simple label of VW 9), so that its features land in VW's columns;
where VW warns and reads a part of a line, or reads a number that is not finite, the
line is an error here (a located one, or skipped with on_error="skip")::

    [label [importance [initial]]] ['tag] |namespace[:weight] feature[:value] ... |other

* a UTF-8 byte order mark at a line's start and one ``\r`` before its ``\n`` are
  dropped; an empty line is not a row, any other line is (blanks only: a row to
  predict, without features);
* the label section precedes the first ``|``: what comes before a tab in it is
  dropped (VW's rule, for key<TAB>example input); its words are separated by spaces;
  the last word is a tag (ignored) when it starts with ``'`` or touches the bar (or
  the end of a line without one); the others are the label (none: NaN), the
  importance weight (>= 0, default 1) and VW's initial prediction (0 only);
* after ``|``, a blank, another ``|`` or the end opens the default namespace (letter
  32, seed: murmurhash3 of the empty string under hash_seed, 0 for seed 0); else a
  name runs to a blank, ``:``, ``|`` or ``\r`` (letter: its first byte; seed: its
  hash) with an optional ``:weight``; fields are separated by spaces and tabs, a
  ``\r`` inside a line ends its features;
* a feature is ``name[:value]``; a name is hashed by VW's hashstring with its
  namespace's seed (bytes up to 0x20 trimmed at both ends; digits only: the number
  plus the seed; else murmurhash3), ``:value`` without a name is the namespace's k-th
  anonymous feature (the seed plus k); a value is read by VW's parse_float: a number
  (times the namespace's weight; 0 drops the feature, as ``-``, ``.`` or ``e5`` read
  0), or, when no number starts it (blanks skipped), a string that runs to the next
  blank (``|`` and ``:`` included): ``name^string`` hashed as hashstring(string,
  hashstring(name, seed)), value 1 whatever the namespace's weight; nothing after
  ``:`` is a string too (value 1).

Numbers use the svmlight reader's number parser (svmlight_parser.c, included in
this extension's C source): exact, correctly rounded; a number VW reads by its fast
path with dangling parts (``1e``, ``.5e-``) is read without them, a hexadecimal one
by strtod; NaN and infinities are errors.
"""
cimport cython
from cpython.mem cimport PyMem_RawFree, PyMem_RawRealloc
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport strtod
from libc.string cimport memchr, memcmp, memcpy

import numpy as np
cimport numpy as cnp

from onlinepgs._core._hashing cimport murmurhash3_x86_32, ns_letter
from onlinepgs._core._lineparse cimport (BadLine, LINE_EMPTY, LINE_ERROR, LINE_NOMEM,
                                         LINE_ROW, ST_DONE, ST_ERROR, ST_FULL, ST_NOMEM,
                                         ST_SKIPPED, bad_line_info, mark_bad)
from onlinepgs._core._svmlight import _pow10_table

cnp.import_array()

# The svmlight reader's number parser, included as source (not linked: setup.py lists
# it in no C_SOURCES of _vw) so that the compiler inlines its fast path into the line
# loop, as svm_fast_line does (a call per value cost about a quarter of the parse).
cdef extern from "svmlight_parser.c":
    void svm_set_pow10(int i, uint64_t hi, uint64_t lo) nogil
    int svm_parse_double(const char *s, const char *e, double *out) nogil
    const char* svm_fast_double_at(const char* p, double* out) nogil
    unsigned char svm_cls[256]

# this extension's copy of the number parser's tables (see _svmlight)
for _i, (_hi, _lo) in enumerate(_pow10_table()):
    svm_set_pow10(_i, _hi, _lo)
# what may follow a value read by the fast path: what ends a value for VW (a blank, '|',
# '\r') or the line ('\n'); not '#' (no comments in VW text), \v or \f (a value's
# junk for VW)
for _c in (32, 9, 13, 124):  # space, \t, \r, '|'
    svm_cls[_c] = 1
svm_cls[ord("\n")] = 3

# byte classes of the VW grammar: 1 = a separator (space, tab), 2 = '|', 3 = ':',
# 4 = '\r' (ends a name and the line's features), 0 = else (a name's byte)
cdef uint8_t vw_cls[256]
vw_cls[32] = vw_cls[9] = 1
vw_cls[ord("|")] = 2
vw_cls[ord(":")] = 3
vw_cls[13] = 4

cdef enum:
    E_LABEL = 1
    E_MULTICLASS = 2
    E_IMPORTANCE = 3
    E_EXTRA = 4
    E_NS_WEIGHT = 5
    E_NS_EMPTY = 6
    E_VALUE = 7
    E_INITIAL = 8

ERROR_KINDS = {
    E_LABEL: "label", E_MULTICLASS: "multiclass", E_IMPORTANCE: "importance",
    E_EXTRA: "extra", E_NS_WEIGHT: "namespace_weight", E_NS_EMPTY: "namespace_empty",
    E_VALUE: "value", E_INITIAL: "initial",
}

cdef double NAN = float("nan")


cdef inline bint _finite(double v) noexcept nogil:
    return v - v == 0.0


cdef inline bint _digit(char c) noexcept nogil:
    return <unsigned char>(c - 48) < 10


cdef inline bint _ends_value(const char* p, const char* e) noexcept nogil:
    """Whether a value may end at p for VW: the end, a separator, '|' or '\\r'."""
    return p == e or (vw_cls[<uint8_t>p[0]] != 0 and vw_cls[<uint8_t>p[0]] != 3)


cdef inline const char* _word_end(const char* p, const char* e) noexcept nogil:
    """Where a value's text ends for a message: the next separator, '|' or '\\r'."""
    while not _ends_value(p, e):
        p += 1
    return p


cdef enum:
    NUM_NONE = 0       # no number: a string value
    NUM_OK = 1         # a finite number
    NUM_NONFINITE = 2  # NaN or an infinity (VW reads them; an error here)


cdef int _strtof(const char* s, const char* e, double* out, const char** stop,
                 bint* digits) noexcept nogil:
    """What C's strtof reads at s (VW's slow path of parse_float), bounded by e:
    blanks, a sign, then a decimal number, a hexadecimal one, or inf/nan."""
    cdef const char* p = s
    cdef const char* t
    cdef const char* q
    cdef char buf[128]
    cdef char* end
    cdef Py_ssize_t n
    while p < e and (p[0] == 32 or 9 <= p[0] <= 13):
        p += 1
    t = p
    if p < e and (p[0] == 43 or p[0] == 45):  # '+', '-'
        p += 1
    if p < e and ((p[0] | 32) == 105 or (p[0] | 32) == 110):  # i, n
        if e - p >= 3 and (p[0] | 32) == 105 and (p[1] | 32) == 110 and (p[2] | 32) == 102:
            stop[0] = p + 3
            return NUM_NONFINITE
        if e - p >= 3 and (p[0] | 32) == 110 and (p[1] | 32) == 97 and (p[2] | 32) == 110:
            stop[0] = p + 3
            return NUM_NONFINITE
        return NUM_NONE
    if e - p >= 3 and p[0] == 48 and (p[1] | 32) == 120:  # "0x": strtod reads it exactly
        n = min(e - t, <Py_ssize_t>sizeof(buf) - 1)
        memcpy(buf, t, n)
        buf[n] = 0
        out[0] = strtod(buf, &end)
        if end == buf:
            return NUM_NONE
        stop[0] = t + (end - buf)
        digits[0] = True
        return NUM_OK if _finite(out[0]) else NUM_NONFINITE
    q = p
    while p < e and _digit(p[0]):
        p += 1
    digits[0] = p > q
    if p < e and p[0] == 46:  # '.'
        p += 1
        q = p
        while p < e and _digit(p[0]):
            p += 1
        digits[0] = digits[0] or p > q
    if not digits[0]:
        return NUM_NONE
    if p < e and (p[0] | 32) == 101:  # an exponent, when digits follow
        q = p + 1
        if q < e and (q[0] == 43 or q[0] == 45):
            q += 1
        if q < e and _digit(q[0]):
            while q < e and _digit(q[0]):
                q += 1
            p = q
    stop[0] = p
    svm_parse_double(t, p, out)
    return NUM_OK if _finite(out[0]) else NUM_NONFINITE


cdef int _vw_float(const char* s, const char* e, double* out, const char** stop,
                   bint* digits) noexcept nogil:
    """A number at s as VW's parse_float reads it, bounded by e: NUM_NONE (none, VW's
    end_idx 0), or NUM_OK / NUM_NONFINITE with *stop after it and *digits whether it
    has any digit. The fast path first: spaces, '-', digits, '.' digits, e/E '-'
    digits, each part optional, taken when followed by a space, tab, '\\n' or e (its
    value: 0 without digits, a dangling exponent dropped); else strtof."""
    cdef const char* p = s
    cdef const char* m
    cdef const char* num_end
    cdef const char* q
    cdef bint any_digit = False
    while p < e and p[0] == 32:
        p += 1
    m = p
    if p < e and p[0] == 45:
        p += 1
    while p < e and _digit(p[0]):
        p += 1
        any_digit = True
    if p < e and p[0] == 46:
        p += 1
        while p < e and _digit(p[0]):
            p += 1
            any_digit = True
    num_end = p
    if p < e and (p[0] | 32) == 101:
        p += 1
        if p < e and p[0] == 45:
            p += 1
        q = p
        while p < e and _digit(p[0]):
            p += 1
        if p > q:
            num_end = p
    if p == e or p[0] == 32 or p[0] == 9 or p[0] == 10:
        if p == s:
            return NUM_NONE
        stop[0] = p
        digits[0] = any_digit
        if not any_digit:
            out[0] = 0.0
            return NUM_OK
        svm_parse_double(m, num_end, out)
        return NUM_OK if _finite(out[0]) else NUM_NONFINITE
    return _strtof(s, e, out, stop, digits)


cdef inline bint _whole_number(const char* s, const char* e, double* out) noexcept nogil:
    """Whether the word [s, e) is a finite number with a digit, read whole by VW's
    parse_float (labels, weights: VW would read a part of other words). A decimal
    number (svm_parse_double's syntax, which VW reads whole, to the same value) first."""
    cdef const char* stop = s
    cdef bint digits = False
    if svm_parse_double(s, e, out):
        return _finite(out[0])
    return _vw_float(s, e, out, &stop, &digits) == NUM_OK and digits and stop == e


cdef inline uint32_t _hashstring(const char* s, const char* e, uint32_t seed,
                                 bint vw_numbers) noexcept nogil:
    """A name's hash under `seed` ([s, e) not empty): VW's hashstring where vw_numbers
    (bytes up to 0x20 trimmed at both ends; then digits only, or nothing, is the
    number, modulo 2^32, plus the seed), else murmurhash3 of its bytes."""
    cdef uint32_t v = 0
    cdef const char* p
    if not vw_numbers:
        return murmurhash3_x86_32(<const uint8_t*>s, e - s, seed)
    if <uint8_t>s[0] <= 32 or <uint8_t>e[-1] <= 32:  # (callers' names are not empty)
        while s < e and <uint8_t>s[0] <= 32:
            s += 1
        while e > s and <uint8_t>e[-1] <= 32:
            e -= 1
    p = s
    while p < e and _digit(p[0]):
        v = v * 10 + <uint32_t>(p[0] - 48)
        p += 1
    if p == e:
        return v + seed
    return murmurhash3_x86_32(<const uint8_t*>s, e - s, seed)


@cython.final
cdef class _Parser:
    """Line parser and chunk buffers of one VW text stream (see the module docstring).

    Parameters: hash_seed, skip (on_error="skip"), chunk_rows (-1: unbounded), audit
    (keep each entry's name), fast_path (False: exact number parsing only, for tests),
    vw_numbers (False: names hashed as text and the default namespace seeded with
    hash_seed itself, the reading of models trained before VW's hashing).
    """
    # current chunk
    cdef uint8_t* ns
    cdef uint32_t* hashes
    cdef double* values
    cdef int64_t* indptr
    cdef double* labels
    cdef double* weights
    cdef Py_ssize_t cap_rows, cap_nnz, n_rows, nnz
    cdef bint weighted              # a row of the chunk has an importance other than 1
    # audit: each entry's feature and namespace names as offsets into the block
    cdef bint audit
    cdef int64_t* name_at
    cdef int64_t* ns_at             # -1: the default namespace
    cdef int64_t* value_at          # a string value's offset; -1: none
    cdef int32_t* name_len
    cdef int32_t* ns_len
    cdef int32_t* value_len
    cdef list names
    # settings
    cdef uint32_t seed, default_seed
    cdef bint skip, fast_path, vw_numbers
    cdef Py_ssize_t chunk_rows
    # counters over the stream
    cdef public int64_t n_lines, n_skipped, n_rows_out
    # the last error (offsets into the block given to parse)
    cdef BadLine bad_line  # where the last bad line went wrong (error_info)

    def __cinit__(self, uint32_t hash_seed=0, bint skip=False, Py_ssize_t chunk_rows=-1,
                  bint audit=False, bint fast_path=True, bint vw_numbers=True):
        self.seed = hash_seed
        self.vw_numbers = vw_numbers
        # VW seeds its default namespace with the hash of the empty string (0 for seed 0)
        self.default_seed = murmurhash3_x86_32(NULL, 0, hash_seed) if vw_numbers \
            else hash_seed
        self.skip = skip
        self.chunk_rows = chunk_rows
        self.audit = audit
        self.fast_path = fast_path
        self.names = [] if audit else None
        if not (self._grow_rows(1024 if chunk_rows < 0 or chunk_rows > 1024 else chunk_rows)
                and self._grow_nnz(16 * 1024)):
            raise MemoryError()
        self.indptr[0] = 0

    def __dealloc__(self):
        self.release()

    def release(self):
        """Free the buffers (the stream is done)."""
        PyMem_RawFree(self.ns)
        PyMem_RawFree(self.hashes)
        PyMem_RawFree(self.values)
        PyMem_RawFree(self.indptr)
        PyMem_RawFree(self.labels)
        PyMem_RawFree(self.weights)
        PyMem_RawFree(self.name_at)
        PyMem_RawFree(self.ns_at)
        PyMem_RawFree(self.name_len)
        PyMem_RawFree(self.ns_len)
        PyMem_RawFree(self.value_at)
        PyMem_RawFree(self.value_len)
        self.ns = NULL
        self.hashes = NULL
        self.values = NULL
        self.indptr = NULL
        self.labels = NULL
        self.weights = NULL
        self.name_at = NULL
        self.ns_at = NULL
        self.name_len = NULL
        self.ns_len = NULL
        self.value_at = NULL
        self.value_len = NULL
        self.cap_rows = self.cap_nnz = 0

    @property
    def pending_rows(self):
        return self.n_rows

    def decide(self):
        """No decision is deferred in this format (the LineReader protocol)."""
        return None

    # ---- growth (nogil) -----------------------------------------------------------
    cdef bint _grow_nnz(self, Py_ssize_t need) noexcept nogil:
        cdef Py_ssize_t cap = self.cap_nnz
        while cap < need:
            cap = cap + (cap >> 1) + 1024
        if not (_realloc(<void**>&self.ns, cap * 1)
                and _realloc(<void**>&self.hashes, cap * 4)
                and _realloc(<void**>&self.values, cap * 8)):
            return False
        if self.audit and not (_realloc(<void**>&self.name_at, cap * 8)
                               and _realloc(<void**>&self.ns_at, cap * 8)
                               and _realloc(<void**>&self.value_at, cap * 8)
                               and _realloc(<void**>&self.name_len, cap * 4)
                               and _realloc(<void**>&self.ns_len, cap * 4)
                               and _realloc(<void**>&self.value_len, cap * 4)):
            return False
        self.cap_nnz = cap
        return True

    cdef bint _grow_rows(self, Py_ssize_t need) noexcept nogil:
        cdef Py_ssize_t cap = self.cap_rows
        while cap < need:
            cap = cap + (cap >> 1) + 16
        if not (_realloc(<void**>&self.labels, cap * 8)
                and _realloc(<void**>&self.weights, cap * 8)
                and _realloc(<void**>&self.indptr, (cap + 1) * 8)):
            return False
        self.cap_rows = cap
        return True

    # ---- errors -------------------------------------------------------------------
    cdef inline int _fail(self, int kind, const char* base, const char* line,
                          const char* bad, const char* bad_end,
                          const char* tok, const char* tok_end) noexcept nogil:
        return mark_bad(&self.bad_line, kind, self.n_lines, base, line, bad, bad_end, tok,
                        tok_end)

    def error_info(self):
        """(kind, line, column, bad slice, token slice) of the last error: slices are
        (start, stop) offsets into the block passed to `parse`."""
        return bad_line_info(self.bad_line, ERROR_KINDS)

    # ---- one line -----------------------------------------------------------------
    cdef int _line(self, const char* base, const char* s, const char* le,
                   bint fast) noexcept nogil:
        """Parse the line [s, le) (le: its '\\n' or the end of the data; s after a byte
        order mark); fast: the line ends with a '\\n' at least 8 bytes before the end
        of the buffer, so the fast number parser (which reads up to 7 bytes past a
        '\\n') may be used."""
        cdef const char* end = le - 1 if le > s and le[-1] == 13 else le  # VW drops one \r
        cdef const char* bar
        cdef const char* p
        cdef const char* t
        cdef const char* te
        cdef const char* q
        cdef const char* ls
        cdef const char* lend
        cdef const char* vs
        cdef const char* ve
        cdef double label = NAN, importance = 1.0, v, nsw
        cdef int n_words = 0, r
        cdef uint32_t h, anon
        cdef bint digits
        cdef uint8_t letter
        cdef uint32_t seed
        cdef int64_t ns_off
        cdef int32_t ns_n
        cdef Py_ssize_t row_start = self.nnz, nnz = self.nnz
        if end == s:
            return LINE_EMPTY  # any other line is a row, as in VW (blanks: one to predict)
        bar = <const char*>memchr(s, 124, end - s)  # '|'
        if bar == NULL:
            bar = end
        # the label section: what precedes a tab in it is dropped; words are separated
        # by spaces; the last one is a tag if it starts with "'" or touches the section's
        # end (VW's substring_to_example)
        ls = <const char*>memchr(s, 9, bar - s)
        ls = s if ls == NULL else ls + 1
        lend = bar
        te = bar
        while te > ls and te[-1] == 32:
            te -= 1
        if te > ls:
            t = te
            while t > ls and t[-1] != 32:
                t -= 1
            if te == bar or t[0] == 39:
                lend = t
        p = ls
        while True:
            while p < lend and p[0] == 32:
                p += 1
            if p == lend:
                break
            t = p
            while p < lend and p[0] != 32:
                p += 1
            if n_words == 0:
                if memchr(t, 58, p - t) != NULL:  # ':' in a label: VW's other labels
                    return self._fail(E_MULTICLASS, base, s, t, p, t, p)
                if not _whole_number(t, p, &label):
                    return self._fail(E_LABEL, base, s, t, p, t, p)
            elif n_words == 1:
                if not _whole_number(t, p, &importance) or importance < 0:
                    return self._fail(E_IMPORTANCE, base, s, t, p, t, p)
            elif n_words == 2:
                # VW's initial prediction: 0 is no offset; another is refused (no model
                # here takes a per-row offset of the margin)
                if not _whole_number(t, p, &v) or v != 0.0:
                    return self._fail(E_INITIAL, base, s, t, p, t, p)
            else:
                return self._fail(E_EXTRA, base, s, t, p, t, p)
            n_words += 1
        # the namespaces (VW's tc_parser)
        p = bar
        while p < end and p[0] == 124:  # p at a '|'; a '\\r' ends the features
            p += 1
            letter = 32
            seed = self.default_seed
            nsw = 1.0
            ns_off = -1
            ns_n = 0
            anon = 0  # VW numbers a namespace's anonymous features from 0
            if p < end and vw_cls[<uint8_t>p[0]] == 3:
                self.nnz = row_start
                return self._fail(E_NS_EMPTY, base, s, p, _word_end(p, end), p,
                                  _word_end(p, end))
            if p < end and vw_cls[<uint8_t>p[0]] == 0:
                t = p
                while p < end and vw_cls[<uint8_t>p[0]] == 0:
                    p += 1
                letter = ns_letter(<uint8_t>t[0])
                seed = _hashstring(t, p, self.seed, self.vw_numbers)
                ns_off = t - base
                ns_n = <int32_t>(p - t)
                if p < end and p[0] == 58:  # ':' weight
                    te = _word_end(p + 1, end)
                    if not (_vw_float(p + 1, end, &nsw, &q, &digits) == NUM_OK and digits
                            and _ends_value(q, end)):
                        self.nnz = row_start
                        return self._fail(E_NS_WEIGHT, base, s, p + 1, te, t, te)
                    p = q
            while p < end and vw_cls[<uint8_t>p[0]] == 1:  # the namespace's features
                p += 1
                if p == end or (vw_cls[<uint8_t>p[0]] != 0 and vw_cls[<uint8_t>p[0]] != 3):
                    continue
                t = p
                while p < end and vw_cls[<uint8_t>p[0]] == 0:
                    p += 1
                q = p  # the name's end
                v = nsw
                vs = NULL
                if p < end and p[0] == 58:  # ':' value
                    te = NULL
                    if fast:
                        te = svm_fast_double_at(p + 1, &v)  # ends at what may end it
                    if te == NULL:
                        r = _vw_float(p + 1, end, &v, &te, &digits)
                        if r == NUM_NONE:
                            # no number: a string, blanks before it skipped, running to
                            # the next blank ('|' and ':' included); value 1
                            vs = p + 1
                            while vs < end and (vw_cls[<uint8_t>vs[0]] == 1
                                                or vw_cls[<uint8_t>vs[0]] == 4):
                                vs += 1
                            ve = vs
                            while ve < end and vw_cls[<uint8_t>ve[0]] != 1 \
                                    and vw_cls[<uint8_t>ve[0]] != 4:
                                ve += 1
                            te = ve
                            v = 1.0
                        elif r == NUM_NONFINITE or not _ends_value(te, end):
                            # VW reads a part of it (and warns) or a non-finite number
                            self.nnz = row_start
                            vs = p + 1
                            while vs < end and vs[0] == 32:
                                vs += 1
                            return self._fail(E_VALUE, base, s, vs, _word_end(vs, end), t,
                                              _word_end(vs, end))
                    if vs == NULL:
                        v *= nsw
                    p = te
                if vs != NULL and ve > vs:  # name:string, chained
                    h = _hashstring(vs, ve, _hashstring(t, q, seed, self.vw_numbers),
                                    self.vw_numbers)
                elif q > t:
                    h = _hashstring(t, q, seed, self.vw_numbers)
                else:  # ":value", VW's anonymous feature: the namespace's hash plus k
                    h = seed + anon
                    anon += 1
                if v == 0.0:
                    continue  # VW keeps no feature of value 0
                if nnz == self.cap_nnz:
                    if not self._grow_nnz(nnz + 1):
                        self.nnz = row_start
                        return LINE_NOMEM
                self.ns[nnz] = letter
                self.hashes[nnz] = h
                self.values[nnz] = v
                if self.audit:
                    self.name_at[nnz] = t - base
                    self.name_len[nnz] = <int32_t>(q - t)
                    self.ns_at[nnz] = ns_off
                    self.ns_len[nnz] = ns_n
                    self.value_at[nnz] = -1 if vs == NULL or ve == vs else vs - base
                    self.value_len[nnz] = 0 if vs == NULL else <int32_t>(ve - vs)
                nnz += 1
                self.nnz = nnz
        if self.n_rows == self.cap_rows:
            if not self._grow_rows(self.n_rows + 1):
                self.nnz = row_start
                return LINE_NOMEM
        self.nnz = nnz
        self.labels[self.n_rows] = label
        self.weights[self.n_rows] = importance
        if importance != 1.0:
            self.weighted = True
        self.n_rows += 1
        self.indptr[self.n_rows] = nnz
        return LINE_ROW

    # ---- a block ------------------------------------------------------------------
    def parse(self, const unsigned char[::1] buf, Py_ssize_t pos, Py_ssize_t end):
        """Parse the lines of ``buf[pos:end]`` (the last one may lack its newline).

        Returns ``(status, pos)``: 0 = all consumed, 1 = chunk full (call again from
        pos after `take_chunk`), 2 = error (see `error_info`).
        """
        if pos >= end:
            return ST_DONE, end
        cdef const char* base = <const char*>&buf[0]
        cdef const char* p = base + pos
        cdef const char* e = base + end
        cdef const char* fast_limit = base + buf.shape[0] - 8
        cdef const char* le
        cdef Py_ssize_t first = self.nnz
        cdef int r, status = ST_DONE
        cdef bint bounded = self.chunk_rows > 0
        with nogil:
            while p < e:
                self.n_lines += 1
                le = <const char*>memchr(p, 10, e - p)
                if le == NULL:
                    le = e
                if <uint8_t>p[0] == 0xef and le - p >= 3 and memcmp(p, b"\xef\xbb\xbf", 3) == 0:
                    p += 3  # a UTF-8 byte order mark (VW drops one at any line's start)
                r = self._line(base, p, le, self.fast_path and le < e and le < fast_limit)
                if r == LINE_ERROR:
                    if not self.skip:
                        status = ST_ERROR
                        break
                    self.n_skipped += 1
                    if self.n_skipped == 1:  # the reader keeps the first one's place
                        status = ST_SKIPPED
                        p = le + 1 if le < e else e
                        break
                elif r == LINE_NOMEM:
                    status = ST_NOMEM
                    break
                p = le + 1 if le < e else e
                if r == LINE_ROW and bounded and self.n_rows >= self.chunk_rows:
                    status = ST_FULL
                    break
        if self.audit:
            self._keep_names(buf, first)
        if status == ST_NOMEM:
            raise MemoryError("out of memory while reading VW text")
        return status, p - base

    cdef _keep_names(self, const unsigned char[::1] buf, Py_ssize_t first):
        """The names of the entries [first, nnz) parsed from buf, before buf is
        reused, as VW's audit shows them: "namespace^feature", "feature" in the default
        namespace, "^string" after a string value's name."""
        cdef Py_ssize_t i
        cdef bytes block = bytes(buf)
        for i in range(first, self.nnz):
            name = block[self.name_at[i]:self.name_at[i] + self.name_len[i]].decode(
                "utf-8", "backslashreplace")
            if self.value_at[i] >= 0:
                name += "^" + block[self.value_at[i]:self.value_at[i] + self.value_len[i]
                                    ].decode("utf-8", "backslashreplace")
            if self.ns_at[i] >= 0:
                name = block[self.ns_at[i]:self.ns_at[i] + self.ns_len[i]].decode(
                    "utf-8", "backslashreplace") + "^" + name
            self.names.append(name)

    # ---- chunks -------------------------------------------------------------------
    def take_chunk(self):
        """Hand over the rows held as (ns, hashes, values, indptr, labels, weights,
        names) and start empty: weights None when every importance is 1, names None
        unless auditing."""
        cdef Py_ssize_t n = self.n_rows, nnz = self.nnz
        ns = np.empty(nnz, np.uint8)
        hashes = np.empty(nnz, np.uint32)
        values = np.empty(nnz, np.float64)
        indptr = np.empty(n + 1, np.int64)
        labels = np.empty(n, np.float64)
        _copy(ns, self.ns, nnz)
        _copy(hashes, self.hashes, nnz * 4)
        _copy(values, self.values, nnz * 8)
        _copy(indptr, self.indptr, (n + 1) * 8)
        _copy(labels, self.labels, n * 8)
        weights = None
        if self.weighted:
            weights = np.empty(n, np.float64)
            _copy(weights, self.weights, n * 8)
        names = None
        if self.audit:
            names = self.names
            self.names = []
        self.n_rows_out += n
        self.n_rows = 0
        self.nnz = 0
        self.weighted = False
        return ns, hashes, values, indptr, labels, weights, names


cdef bint _realloc(void** ptr, size_t nbytes) noexcept nogil:
    cdef void* out = PyMem_RawRealloc(ptr[0], nbytes if nbytes else 1)
    if out == NULL:
        return False
    ptr[0] = out
    return True


cdef void _copy(cnp.ndarray dst, const void* src, size_t nbytes) noexcept:
    if nbytes:
        memcpy(cnp.PyArray_DATA(dst), src, nbytes)
