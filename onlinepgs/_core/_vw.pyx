# cython: language_level=3
"""Compiled core of the VW text reader (`onlinepgs.formats.vw`).

`_Parser` turns complete lines of Vowpal Wabbit's text format, held in a bytes-like
block, into namespaced rows (`onlinepgs.features.NamespacedRows` arrays) with their
labels and importance weights. One pass over the bytes, the GIL released, no Python
object per line or entry (except the entries' names, made only when auditing).

Grammar of a line (fields separated by runs of spaces or tabs; ``\\r`` before the
newline is whitespace)::

    [label [importance]] ['tag] |namespace[:weight] feature[:value] ... |other ...

* the label section is what precedes the first ``|``: a label (a decimal number; none:
  NaN, a test line), an importance weight (a decimal number >= 0, default 1), and a
  tag: a token starting with ``'`` or a token glued to the bar (``1 t|f a``); the tag
  is kept out of the features;
* ``|`` followed by whitespace opens the default namespace (letter 32, seed
  hash_seed); else the namespace's name runs to the next whitespace, with an optional
  ``:weight`` that multiplies its features' values; its letter is the name's first
  byte, its seed murmurhash3(name, hash_seed);
* a feature is ``name[:value]`` (value 1 without ``:``); the name (any bytes but
  whitespace, ``|`` and ``:``) is hashed as a string with the namespace's seed, so
  ``13`` and ``013`` are different features. A ``|`` ends a feature too (``a:1|g b``);
* a line of whitespace only is not a row.

Numbers use the svmlight reader's number parser (svmlight_parser.c, included in
this extension's C source): exact, correctly rounded; NaN and infinities are errors.
"""
cimport cython
from cpython.mem cimport PyMem_RawFree, PyMem_RawRealloc
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
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
for _c in (32, 9, 13, 11, 12):  # space, \t, \r, \v, \f
    svm_cls[_c] = 1
svm_cls[ord("#")] = 2
svm_cls[ord("\n")] = 3

# byte classes of the VW grammar: 1 = whitespace, 2 = '|', 3 = ':', 0 = else
cdef uint8_t vw_cls[256]
for _c in (32, 9, 13, 11, 12):
    vw_cls[_c] = 1
vw_cls[ord("|")] = 2
vw_cls[ord(":")] = 3

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


cdef inline const char* _skip_ws(const char* p, const char* e) noexcept nogil:
    while p < e and vw_cls[<uint8_t>p[0]] == 1:
        p += 1
    return p


cdef inline const char* _field_end(const char* p, const char* e) noexcept nogil:
    """The end of a field: the next whitespace or '|' (':' included in the field)."""
    while p < e and vw_cls[<uint8_t>p[0]] != 1 and vw_cls[<uint8_t>p[0]] != 2:
        p += 1
    return p


cdef inline bint _number(const char* s, const char* e, double* out) noexcept nogil:
    return svm_parse_double(s, e, out) and _finite(out[0])


cdef inline bint _digits(const char* s, const char* e, uint32_t* out) noexcept nogil:
    """Whether [s, e) is all decimal digits (not empty); its value modulo 2^32 in out
    (VW's hashstring: such a name's index is the number plus the namespace's hash)."""
    cdef uint32_t v = 0
    if s == e:
        return False
    while s < e:
        if s[0] < 48 or s[0] > 57:
            return False
        v = v * 10 + <uint32_t>(s[0] - 48)
        s += 1
    out[0] = v
    return True


cdef inline bint _numeric_start(const char* s, const char* e) noexcept nogil:
    """Whether a feature value reads as a number (VW's parseFloat takes a prefix): a
    digit, a sign or point before a digit, or nan/inf; else it is a string value."""
    cdef const char* p = s
    if p < e and (p[0] == 43 or p[0] == 45):  # '+', '-'
        p += 1
    if p < e and p[0] == 46:  # '.'
        p += 1
    if p < e and 48 <= p[0] <= 57:
        return True
    p = s + 1 if s < e and (s[0] == 43 or s[0] == 45) else s
    return e - p >= 3 and (p[0] | 32) in (105, 110) and (p[1] | 32) in (110, 97) \
        and (p[2] | 32) in (102, 110)  # inf, nan (any case)


cdef inline uint32_t _name_hash(const char* s, const char* e, uint32_t seed,
                                bint vw_numbers) noexcept nogil:
    """A name's hash under `seed`: VW's hashstring (an all-digit name is its number
    plus the seed) where vw_numbers, else murmurhash3 of its bytes."""
    cdef uint32_t v
    if vw_numbers and _digits(s, e, &v):
        return v + seed
    return murmurhash3_x86_32(<const uint8_t*>s, e - s, seed)


@cython.final
cdef class _Parser:
    """Line parser and chunk buffers of one VW text stream (see the module docstring).

    Parameters: hash_seed, skip (on_error="skip"), chunk_rows (-1: unbounded), audit
    (keep each entry's name), fast_path (False: exact number parsing only, for tests).
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
    cdef int32_t* name_len
    cdef int32_t* ns_len
    cdef list names
    # settings
    cdef uint32_t seed
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
                               and _realloc(<void**>&self.name_len, cap * 4)
                               and _realloc(<void**>&self.ns_len, cap * 4)):
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
        """Parse the line [s, le) (le: its '\\n' or the end of the data); fast: the
        line ends with a '\\n' at least 8 bytes before the end of the buffer, so the
        fast number parser (which reads up to 7 bytes past a '\\n') may be used."""
        cdef const char* bar = <const char*>memchr(s, 124, le - s)  # '|'
        cdef const char* p
        cdef const char* t
        cdef const char* te
        cdef const char* q
        cdef const char* colon
        cdef double label = NAN, importance = 1.0, v, nsw
        cdef int n_numbers = 0
        cdef uint32_t h, anon
        cdef const char* vt
        cdef bint glued, any_field = False
        cdef uint8_t letter
        cdef uint32_t seed
        cdef int64_t ns_off
        cdef int32_t ns_n
        cdef Py_ssize_t row_start = self.nnz, nnz = self.nnz
        if bar == NULL:
            bar = le
        # the label section
        glued = bar < le and bar > s and vw_cls[<uint8_t>bar[-1]] != 1
        p = s
        while True:
            p = _skip_ws(p, bar)
            if p == bar:
                break
            t = p
            te = p
            while te < bar and vw_cls[<uint8_t>te[0]] != 1:
                te += 1
            p = te
            any_field = True
            if t[0] == 39 or (glued and te == bar):  # "'tag" or a tag glued to the bar
                continue
            if n_numbers == 0:
                if memchr(t, 58, te - t) != NULL:  # ':' in a label: VW's other labels
                    return self._fail(E_MULTICLASS, base, s, t, te, t, te)
                if not _number(t, te, &label):
                    return self._fail(E_LABEL, base, s, t, te, t, te)
            elif n_numbers == 1:
                if not _number(t, te, &importance) or importance < 0:
                    return self._fail(E_IMPORTANCE, base, s, t, te, t, te)
            elif n_numbers == 2:
                # VW's initial prediction: 0 is no offset; another is refused (no model
                # here takes a per-row offset of the margin)
                if not _number(t, te, &v) or v != 0.0:
                    return self._fail(E_INITIAL, base, s, t, te, t, te)
            else:
                return self._fail(E_EXTRA, base, s, t, te, t, te)
            n_numbers += 1
        if bar == le and not any_field:
            return LINE_EMPTY
        # the namespaces
        p = bar
        while p < le:  # p at a '|'
            p += 1
            letter = 32
            seed = self.seed
            nsw = 1.0
            ns_off = -1
            ns_n = 0
            if p < le and vw_cls[<uint8_t>p[0]] != 1 and vw_cls[<uint8_t>p[0]] != 2:
                t = p
                te = _field_end(p, le)
                colon = <const char*>memchr(t, 58, te - t)
                q = te if colon == NULL else colon
                if q == t:
                    self.nnz = row_start
                    return self._fail(E_NS_EMPTY, base, s, t, te, t, te)
                if colon != NULL and not _number(colon + 1, te, &nsw):
                    self.nnz = row_start
                    return self._fail(E_NS_WEIGHT, base, s, colon + 1, te, t, te)
                letter = ns_letter(<uint8_t>t[0])
                seed = _name_hash(t, q, self.seed, self.vw_numbers)
                ns_off = t - base
                ns_n = <int32_t>(q - t)
                p = te
            anon = 0  # VW numbers a namespace's anonymous features from 0
            while True:  # the namespace's features
                p = _skip_ws(p, le)
                if p == le or p[0] == 124:
                    break
                t = p
                while p < le and vw_cls[<uint8_t>p[0]] == 0:
                    p += 1
                q = p  # the name's end
                v = 1.0
                if q == t:  # ":value", VW's anonymous feature: the namespace's hash + k
                    h = seed + anon
                    anon += 1
                else:
                    h = _name_hash(t, q, seed, self.vw_numbers)
                if p < le and p[0] == 58:  # ':' value
                    te = NULL
                    if fast:
                        te = svm_fast_double_at(p + 1, &v)
                        if te != NULL and te < le and vw_cls[<uint8_t>te[0]] != 1 \
                                and vw_cls[<uint8_t>te[0]] != 2:
                            te = NULL  # not followed by whitespace, '|' or the end
                    if te == NULL:
                        # as VW reads it: blanks after ':' skipped; no value (the line's
                        # end or a '|') is 1; a value that is no number is a string,
                        # chained: hash(value, hash(name)), value 1 ("color:red")
                        vt = _skip_ws(p + 1, le)
                        te = _field_end(vt, le)
                        if vt == te:
                            v = 1.0
                        elif _numeric_start(vt, te):
                            if not _number(vt, te, &v):
                                self.nnz = row_start
                                return self._fail(E_VALUE, base, s, vt, te, t, te)
                        else:
                            h = murmurhash3_x86_32(<const uint8_t*>vt, te - vt, h)
                            v = 1.0
                            q = te  # the name audited: "name:value"
                    p = te
                if nnz == self.cap_nnz:
                    if not self._grow_nnz(nnz + 1):
                        self.nnz = row_start
                        return LINE_NOMEM
                self.ns[nnz] = letter
                self.hashes[nnz] = h
                self.values[nnz] = v * nsw
                if self.audit:
                    self.name_at[nnz] = t - base
                    self.name_len[nnz] = <int32_t>(q - t)
                    self.ns_at[nnz] = ns_off
                    self.ns_len[nnz] = ns_n
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
                if self.n_lines == 1 and le - p >= 3 and memcmp(p, b"\xef\xbb\xbf", 3) == 0:
                    p += 3  # a UTF-8 byte order mark before the first line
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
        reused: "namespace^feature", or "feature" in the default namespace."""
        cdef Py_ssize_t i
        cdef bytes block = bytes(buf)
        for i in range(first, self.nnz):
            # (a string value's entry is "name:value": VW's audit shows name^value)
            name = block[self.name_at[i]:self.name_at[i] + self.name_len[i]].decode(
                "utf-8", "backslashreplace").replace(":", "^", 1)
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
