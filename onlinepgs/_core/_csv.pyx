# cython: language_level=3
"""Compiled core of the CSV/TSV log reader (`onlinepgs.formats.csv`).

`_Parser` follows the line parser protocol of `onlinepgs._lines` (``parse``,
``error_info``, ``decide``, ``pending_rows``, ``take_chunk``, the counters,
``release``). The first line of the source is the header: ``parse`` splits it, stops
there (status 1) and waits for `configure` (each column's role, namespace letter and
seed, decided in Python from the names); then every line is a row, parsed with the
GIL released and no Python object per line or cell, into the arrays of
`onlinepgs.features.NamespacedRows` plus the labels and the weights.

Fields (RFC 4180): separated by a one-byte delimiter; a field that starts with ``"``
is quoted: it ends at the next lone ``"``, ``""`` inside stands for one ``"``, and the
closing quote must end the line or be followed by the delimiter. A ``"`` inside an
unquoted field is an ordinary byte (as Python's csv module reads it). A quoted field
cannot hold a line break: the reader hands over whole lines, so an unterminated quote
is an error naming its line. A final ``\\r`` (CRLF) is dropped; blank lines are not rows.

Cells by role: the label (a number; empty: NaN, a row without a label; a text listed in
the label map: its number), the weight (a positive finite number), a categorical cell
(its text hashed in the column's namespace, value 1), a numeric cell (the column's
name hashed in its namespace, value the number), an ignored cell; an empty categorical
or numeric cell gives no entry. Numbers are svmlight's (`_svmlight.parse_number`:
correctly rounded decimals; no ``nan``/``inf``; overflow is an error).
"""
cimport cython
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_RawFree, PyMem_RawMalloc, PyMem_RawRealloc
from libc.math cimport NAN
from libc.stdint cimport int8_t, int64_t, uint8_t, uint32_t
from libc.string cimport memchr, memcmp, memcpy

import numpy as np
cimport numpy as cnp

from onlinepgs._core._hashing cimport murmurhash3_x86_32
from onlinepgs._core._lineparse cimport (LINE_EMPTY, LINE_ERROR, LINE_NOMEM, LINE_ROW,
                                         ST_DONE, ST_ERROR, ST_FULL, ST_SKIPPED)
from onlinepgs._core._svmlight cimport parse_number

cnp.import_array()

# column roles (set by configure)
cdef enum:
    R_IGNORE = 0
    R_CATEGORICAL = 1
    R_NUMERIC = 2
    R_LABEL = 3
    R_WEIGHT = 4

ROLES = {"ignore": R_IGNORE, "categorical": R_CATEGORICAL, "numeric": R_NUMERIC,
         "label": R_LABEL, "weight": R_WEIGHT}

# error kinds (ERROR_KINDS gives their names)
cdef enum:
    E_QUOTE = 1         # bytes after a closing quote
    E_UNTERMINATED = 2  # a quote not closed on its line
    E_TOO_MANY = 3      # more fields than the header
    E_TOO_FEW = 4       # fewer fields than the header
    E_LABEL = 5
    E_WEIGHT = 6
    E_NUMBER = 7
    E_EMPTY_HEADER = 8

ERROR_KINDS = {E_QUOTE: "quote", E_UNTERMINATED: "unterminated", E_TOO_MANY: "too_many",
               E_TOO_FEW: "too_few", E_LABEL: "label", E_WEIGHT: "weight",
               E_NUMBER: "number", E_EMPTY_HEADER: "empty_header"}

cdef char QUOTE = 34  # '"'


cdef inline bint _finite(double v) noexcept nogil:
    return v - v == 0.0


@cython.final
cdef class _Parser:
    """Field splitter, row parser and chunk buffers of one CSV stream.

    Parameters: delimiter (one byte), skip (on_error="skip"), chunk_rows (-1:
    unbounded), names (collect each entry's "column^feature" name, for audits), header
    (False: the first line is a row too; its fields only count the columns).
    """
    # settings
    cdef char delim
    cdef bint skip, want_names, has_header
    cdef Py_ssize_t chunk_rows
    # columns (after configure)
    cdef public object header          # list of bytes (the header's fields), or None
    cdef public bint configured
    cdef int n_cols
    cdef int8_t* role
    cdef uint8_t* letter
    cdef uint32_t* seed
    cdef uint32_t* name_hash           # a numeric column's feature: its name's hash
    cdef bytes col_names               # "name^" of every column, concatenated (audit)
    cdef const char* col_names_p       # its bytes
    cdef int64_t* col_name_off         # (n_cols + 1) offsets into col_names
    cdef bytes map_text                # label map: texts concatenated,
    cdef const char* map_text_p        # its bytes,
    cdef int64_t* map_off              # (n_map + 1) offsets,
    cdef double* map_value             # and their labels
    cdef Py_ssize_t n_map
    cdef bint has_weight
    # current chunk
    cdef uint8_t* ns
    cdef uint32_t* hashes
    cdef double* values
    cdef int64_t* indptr
    cdef double* labels
    cdef double* weights
    cdef Py_ssize_t n_rows, nnz, cap_rows, cap_nnz
    cdef char* names                   # entries' names, concatenated (audit)
    cdef int64_t* name_end             # (nnz) end offset of each entry's name
    cdef Py_ssize_t names_len, cap_names
    # a quoted field with "" escapes is unescaped here
    cdef char* scratch
    cdef Py_ssize_t cap_scratch
    # counters over the stream
    cdef public int64_t n_lines, n_skipped, n_rows_out
    # the last error (offsets into the block given to parse)
    cdef int err_kind, err_field
    cdef int64_t err_line
    cdef Py_ssize_t err_line_start, err_bad_start, err_bad_end

    def __cinit__(self, bytes delimiter=b",", bint skip=False, Py_ssize_t chunk_rows=-1,
                  bint names=False, bint header=True):
        if len(delimiter) != 1 or delimiter in (b'"', b"\n", b"\r"):
            raise ValueError(f"the delimiter must be one byte other than a quote or a "
                             f"line break, got {delimiter!r}")
        self.delim = delimiter[0]
        self.skip = skip
        self.has_header = header
        self.chunk_rows = chunk_rows
        self.want_names = names
        self.cap_rows = 1024 if chunk_rows < 0 or chunk_rows > 1024 else chunk_rows
        self.cap_nnz = 16 * self.cap_rows
        self.ns = <uint8_t*>PyMem_RawMalloc(self.cap_nnz)
        self.hashes = <uint32_t*>PyMem_RawMalloc(self.cap_nnz * 4)
        self.values = <double*>PyMem_RawMalloc(self.cap_nnz * 8)
        self.name_end = <int64_t*>PyMem_RawMalloc(self.cap_nnz * 8) if names else NULL
        self.labels = <double*>PyMem_RawMalloc(self.cap_rows * 8)
        self.weights = <double*>PyMem_RawMalloc(self.cap_rows * 8)
        self.indptr = <int64_t*>PyMem_RawMalloc((self.cap_rows + 1) * 8)
        if (self.ns == NULL or self.hashes == NULL or self.values == NULL
                or self.labels == NULL or self.weights == NULL or self.indptr == NULL
                or (names and self.name_end == NULL)):
            raise MemoryError()
        self.indptr[0] = 0

    def __dealloc__(self):
        PyMem_RawFree(self.ns)
        PyMem_RawFree(self.hashes)
        PyMem_RawFree(self.values)
        PyMem_RawFree(self.name_end)
        PyMem_RawFree(self.labels)
        PyMem_RawFree(self.weights)
        PyMem_RawFree(self.indptr)
        PyMem_RawFree(self.names)
        PyMem_RawFree(self.scratch)
        PyMem_RawFree(self.role)
        PyMem_RawFree(self.letter)
        PyMem_RawFree(self.seed)
        PyMem_RawFree(self.name_hash)
        PyMem_RawFree(self.col_name_off)
        PyMem_RawFree(self.map_off)
        PyMem_RawFree(self.map_value)

    def release(self):
        """Free the scratch buffers (the stream is done; the chunks taken are NumPy's)."""
        PyMem_RawFree(self.scratch)
        self.scratch = NULL
        self.cap_scratch = 0
        PyMem_RawFree(self.names)
        self.names = NULL
        self.cap_names = 0
        self.names_len = 0

    # ---- columns ------------------------------------------------------------------
    def configure(self, roles, letters, seeds, name_hashes, col_names, label_map):
        """Set each column's role (codes of ROLES), namespace letter, seed and (numeric
        columns) feature hash; col_names: each column's name as bytes (for the names
        of an audit); label_map: a list of (bytes, float), texts read as labels."""
        cdef int i, n = len(self.header)
        cdef Py_ssize_t k
        if self.configured or self.header is None:
            raise RuntimeError("configure() once, after the header is read")
        if not (len(roles) == len(letters) == len(seeds) == len(name_hashes)
                == len(col_names) == n):
            raise ValueError("configure: one role, letter, seed and name per column")
        self.role = <int8_t*>PyMem_RawMalloc(n)
        self.letter = <uint8_t*>PyMem_RawMalloc(n)
        self.seed = <uint32_t*>PyMem_RawMalloc(4 * n)
        self.name_hash = <uint32_t*>PyMem_RawMalloc(4 * n)
        self.col_name_off = <int64_t*>PyMem_RawMalloc(8 * (n + 1))
        self.map_off = <int64_t*>PyMem_RawMalloc(8 * (len(label_map) + 1))
        self.map_value = <double*>PyMem_RawMalloc(8 * (len(label_map) + 1))
        if (self.role == NULL or self.letter == NULL or self.seed == NULL
                or self.name_hash == NULL or self.col_name_off == NULL
                or self.map_off == NULL or self.map_value == NULL):
            raise MemoryError()
        self.has_weight = False
        self.col_name_off[0] = 0
        for i in range(n):
            self.role[i] = roles[i]
            self.letter[i] = letters[i]
            self.seed[i] = seeds[i]
            self.name_hash[i] = name_hashes[i]
            self.col_name_off[i + 1] = self.col_name_off[i] + len(col_names[i]) + 1
            if roles[i] == R_WEIGHT:
                self.has_weight = True
        self.col_names = b"".join(name + b"^" for name in col_names)
        self.col_names_p = <const char*>self.col_names
        self.map_text = b"".join(text for text, _ in label_map)
        self.map_text_p = <const char*>self.map_text
        self.map_off[0] = 0
        for k, (text, value) in enumerate(label_map):
            self.map_off[k + 1] = self.map_off[k] + len(text)
            self.map_value[k] = value
        self.n_map = len(label_map)
        self.n_cols = n
        self.configured = True

    # ---- growth (nogil) -------------------------------------------------------------
    cdef bint _grow_nnz(self, Py_ssize_t need) noexcept nogil:
        cdef Py_ssize_t cap = self.cap_nnz
        cdef void* p
        while cap < need:
            cap = cap + (cap >> 1) + 16
        p = PyMem_RawRealloc(self.ns, cap)
        if p == NULL:
            return False
        self.ns = <uint8_t*>p
        p = PyMem_RawRealloc(self.hashes, cap * 4)
        if p == NULL:
            return False
        self.hashes = <uint32_t*>p
        p = PyMem_RawRealloc(self.values, cap * 8)
        if p == NULL:
            return False
        self.values = <double*>p
        if self.want_names:
            p = PyMem_RawRealloc(self.name_end, cap * 8)
            if p == NULL:
                return False
            self.name_end = <int64_t*>p
        self.cap_nnz = cap
        return True

    cdef bint _grow_rows(self) noexcept nogil:
        cdef Py_ssize_t cap = self.cap_rows + (self.cap_rows >> 1) + 16
        cdef void* p
        p = PyMem_RawRealloc(self.labels, cap * 8)
        if p == NULL:
            return False
        self.labels = <double*>p
        p = PyMem_RawRealloc(self.weights, cap * 8)
        if p == NULL:
            return False
        self.weights = <double*>p
        p = PyMem_RawRealloc(self.indptr, (cap + 1) * 8)
        if p == NULL:
            return False
        self.indptr = <int64_t*>p
        self.cap_rows = cap
        return True

    cdef bint _reserve(self, char** buf, Py_ssize_t* cap, Py_ssize_t need) noexcept nogil:
        """Grow a byte buffer to hold need bytes."""
        cdef Py_ssize_t c = cap[0]
        cdef void* p
        if need <= c:
            return True
        while c < need:
            c = c + (c >> 1) + 256
        p = PyMem_RawRealloc(buf[0], c)
        if p == NULL:
            return False
        buf[0] = <char*>p
        cap[0] = c
        return True

    # ---- one field ----------------------------------------------------------------
    cdef int _field(self, const char* q, const char* le, const char** fs,
                    const char** fe, const char** nxt, bint* more,
                    const char** bad) noexcept nogil:
        """Split the field at q of a line ending at le: its text [fs, fe) (in the
        scratch buffer when it had "" escapes), where the next field starts, whether
        one follows. Returns 0, an error kind (bad: where), or -1 (out of memory)."""
        cdef const char* t
        cdef const char* c
        cdef Py_ssize_t n = 0
        cdef bint escaped = False
        if q < le and q[0] == QUOTE:
            t = q + 1
            while True:
                c = <const char*>memchr(t, QUOTE, le - t)
                if c == NULL:
                    bad[0] = q
                    return E_UNTERMINATED
                if c + 1 < le and c[1] == QUOTE:  # "" stands for "
                    if not self._reserve(&self.scratch, &self.cap_scratch, n + (c + 1 - t)):
                        return -1
                    memcpy(self.scratch + n, t, c + 1 - t)
                    n += c + 1 - t
                    escaped = True
                    t = c + 2
                    continue
                break
            if escaped:
                if not self._reserve(&self.scratch, &self.cap_scratch, n + (c - t) + 1):
                    return -1
                memcpy(self.scratch + n, t, c - t)
                n += c - t
                fs[0] = self.scratch
                fe[0] = self.scratch + n
            else:
                fs[0] = q + 1
                fe[0] = c
            c += 1
            if c == le:
                more[0] = False
                nxt[0] = le
            elif c[0] == self.delim:
                more[0] = True
                nxt[0] = c + 1
            else:
                bad[0] = c
                return E_QUOTE
            return 0
        # a short scan, not memchr: a log's cells are a few bytes, below memchr's
        # call and setup cost
        c = q
        while c < le and c[0] != self.delim:
            c += 1
        fs[0] = q
        if c == le:
            fe[0] = le
            nxt[0] = le
            more[0] = False
        else:
            fe[0] = c
            nxt[0] = c + 1
            more[0] = True
        return 0

    # ---- errors -------------------------------------------------------------------
    cdef int _fail(self, int kind, int field, const char* base, const char* line,
                   const char* bad, const char* bad_end) noexcept nogil:
        self.err_kind = kind
        self.err_field = field
        self.err_line = self.n_lines
        self.err_line_start = line - base
        self.err_bad_start = bad - base
        self.err_bad_end = bad_end - base
        return LINE_ERROR

    def error_info(self):
        """(kind, line, column, (bad start, bad stop), field) of the last error: byte
        offsets into the block given to `parse`, the 0-based field number."""
        return (ERROR_KINDS[self.err_kind], self.err_line,
                self.err_bad_start - self.err_line_start + 1,
                (self.err_bad_start, self.err_bad_end), self.err_field)

    # ---- one row ------------------------------------------------------------------
    cdef inline bint _label_of(self, const char* fs, const char* fe,
                               double* out) noexcept nogil:
        cdef Py_ssize_t k, n = fe - fs
        cdef const char* text = self.map_text_p
        for k in range(self.n_map):
            if (self.map_off[k + 1] - self.map_off[k] == n
                    and memcmp(text + self.map_off[k], fs, n) == 0):
                out[0] = self.map_value[k]
                return True
        if fs == fe:
            out[0] = NAN
            return True
        return parse_number(fs, fe, out) and _finite(out[0])

    cdef inline bint _entry(self, int col, uint32_t h, double v, const char* text,
                            Py_ssize_t n) noexcept nogil:
        """Append an entry of column col (with its name "column^text" when auditing)."""
        cdef Py_ssize_t k = self.nnz, m
        if k == self.cap_nnz and not self._grow_nnz(k + 1):
            return False
        self.ns[k] = self.letter[col]
        self.hashes[k] = h
        self.values[k] = v
        if self.want_names:
            m = self.col_name_off[col + 1] - self.col_name_off[col]
            if not self._reserve(&self.names, &self.cap_names, self.names_len + m + n):
                return False
            memcpy(self.names + self.names_len,
                   self.col_names_p + self.col_name_off[col], m)
            memcpy(self.names + self.names_len + m, text, n)
            self.names_len += m + n
            self.name_end[k] = self.names_len
        self.nnz = k + 1
        return True

    cdef int _row(self, const char* base, const char* s, const char* le) noexcept nogil:
        cdef Py_ssize_t row_start = self.nnz, names_start = self.names_len
        cdef const char* q = s
        cdef const char* fs
        cdef const char* fe
        cdef const char* nxt
        cdef const char* bad
        cdef const char* raw_end
        cdef bint more = True
        cdef int col = 0, r, role
        cdef double label = NAN, weight = 1.0, v
        cdef const char* name
        while more:
            if col == self.n_cols:
                self.nnz = row_start
                self.names_len = names_start
                return self._fail(E_TOO_MANY, col, base, s, q, le)
            r = self._field(q, le, &fs, &fe, &nxt, &more, &bad)
            if r != 0:
                self.nnz = row_start
                self.names_len = names_start
                if r < 0:
                    return LINE_NOMEM
                return self._fail(r, col, base, s, bad, le)
            raw_end = nxt - 1 if more else le  # the field as written (for messages)
            role = self.role[col]
            if role == R_CATEGORICAL:
                if fe > fs and not self._entry(
                        col, murmurhash3_x86_32(<const uint8_t*>fs, fe - fs, self.seed[col]),
                        1.0, fs, fe - fs):
                    self.nnz = row_start
                    self.names_len = names_start
                    return LINE_NOMEM
            elif role == R_NUMERIC:
                if fe > fs:
                    if not parse_number(fs, fe, &v) or not _finite(v):
                        self.nnz = row_start
                        self.names_len = names_start
                        return self._fail(E_NUMBER, col, base, s, q, raw_end)
                    name = self.col_names_p + self.col_name_off[col]
                    if not self._entry(col, self.name_hash[col], v, name,
                                       self.col_name_off[col + 1] - self.col_name_off[col] - 1):
                        self.nnz = row_start
                        self.names_len = names_start
                        return LINE_NOMEM
            elif role == R_LABEL:
                if not self._label_of(fs, fe, &label):
                    self.nnz = row_start
                    self.names_len = names_start
                    return self._fail(E_LABEL, col, base, s, q, raw_end)
            elif role == R_WEIGHT:
                if fe == fs or not parse_number(fs, fe, &weight) or not (
                        _finite(weight) and weight > 0):
                    self.nnz = row_start
                    self.names_len = names_start
                    return self._fail(E_WEIGHT, col, base, s, q, raw_end)
            col += 1
            q = nxt
        if col < self.n_cols:
            self.nnz = row_start
            self.names_len = names_start
            return self._fail(E_TOO_FEW, col, base, s, le, le)
        if self.n_rows == self.cap_rows and not self._grow_rows():
            self.nnz = row_start
            self.names_len = names_start
            return LINE_NOMEM
        self.labels[self.n_rows] = label
        self.weights[self.n_rows] = weight
        self.n_rows += 1
        self.indptr[self.n_rows] = self.nnz
        return LINE_ROW

    # ---- the header ---------------------------------------------------------------
    cdef int _header(self, const char* base, const char* s, const char* le):
        """Split the header line into self.header (a list of bytes)."""
        cdef const char* q = s
        cdef const char* fs
        cdef const char* fe
        cdef const char* nxt
        cdef const char* bad
        cdef bint more = True
        cdef int r, col = 0
        if le - s >= 3 and memcmp(s, b"\xef\xbb\xbf", 3) == 0:  # a UTF-8 byte order mark
            q = s + 3
        if q == le:
            return self._fail(E_EMPTY_HEADER, 0, base, s, q, le)
        fields = []
        while more:
            r = self._field(q, le, &fs, &fe, &nxt, &more, &bad)
            if r < 0:
                raise MemoryError()
            if r:
                return self._fail(r, col, base, s, bad, le)
            fields.append(PyBytes_FromStringAndSize(fs, fe - fs))
            col += 1
            q = nxt
        self.header = fields
        return LINE_ROW

    # ---- a block ------------------------------------------------------------------
    def parse(self, const unsigned char[::1] buf, Py_ssize_t pos, Py_ssize_t end):
        """Parse the lines of ``buf[pos:end]`` (the last one may lack its newline).

        Returns ``(status, pos)``: 0 = all consumed, 1 = chunk full or the header read
        (call again from pos after `take_chunk` / `configure`), 2 = error (see
        `error_info`).
        """
        if pos >= end:
            return ST_DONE, end
        cdef const char* base = <const char*>&buf[0]
        cdef const char* p = base + pos
        cdef const char* e = base + end
        cdef const char* le
        cdef const char* nxt
        cdef int r, status = ST_DONE
        cdef bint bounded = self.chunk_rows > 0
        if self.header is None:
            le = <const char*>memchr(p, 10, e - p)
            nxt = le + 1 if le != NULL else e
            if le == NULL:
                le = e
            if le > p and (le - 1)[0] == 13:
                le -= 1
            self.n_lines += 1
            if self._header(base, p, le) == LINE_ERROR:
                return ST_ERROR, p - base
            if not self.has_header:  # the line is read again as the first row
                self.n_lines -= 1
                if le - p >= 3 and memcmp(p, b"\xef\xbb\xbf", 3) == 0:
                    p += 3  # (its byte order mark dropped)
                return ST_FULL, p - base
            return ST_FULL, nxt - base
        if not self.configured:
            raise RuntimeError("configure() the columns after reading the header")
        with nogil:
            while p < e:
                le = <const char*>memchr(p, 10, e - p)
                nxt = le + 1 if le != NULL else e
                if le == NULL:
                    le = e
                if le > p and (le - 1)[0] == 13:  # CRLF
                    le -= 1
                self.n_lines += 1
                if le == p:
                    p = nxt
                    continue
                r = self._row(base, p, le)
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
                    status = -1
                    break
                p = nxt
                if r == LINE_ROW and bounded and self.n_rows >= self.chunk_rows:
                    status = ST_FULL
                    break
        if status < 0:
            raise MemoryError("out of memory while reading CSV data")
        return status, p - base

    # ---- chunks -------------------------------------------------------------------
    @property
    def pending_rows(self):
        return self.n_rows

    def decide(self):
        """No deferred errors in this format: None."""
        return None

    def take_chunk(self):
        """Hand over the rows held as (ns, hashes, values, indptr, labels, weights,
        names): NumPy copies (weights None without a weight column; names a list of
        str, or None when not collected) and start the next chunk."""
        cdef Py_ssize_t n_rows = self.n_rows, nnz = self.nnz, i
        ns = np.empty(nnz, dtype=np.uint8)
        hashes = np.empty(nnz, dtype=np.uint32)
        values = np.empty(nnz, dtype=np.float64)
        indptr = np.empty(n_rows + 1, dtype=np.int64)
        labels = np.empty(n_rows, dtype=np.float64)
        if nnz:
            memcpy(cnp.PyArray_DATA(ns), self.ns, nnz)
            memcpy(cnp.PyArray_DATA(hashes), self.hashes, nnz * 4)
            memcpy(cnp.PyArray_DATA(values), self.values, nnz * 8)
        memcpy(cnp.PyArray_DATA(indptr), self.indptr, (n_rows + 1) * 8)
        if n_rows:
            memcpy(cnp.PyArray_DATA(labels), self.labels, n_rows * 8)
        weights = None
        if self.has_weight:
            weights = np.empty(n_rows, dtype=np.float64)
            if n_rows:
                memcpy(cnp.PyArray_DATA(weights), self.weights, n_rows * 8)
        names = None
        if self.want_names:
            blob = PyBytes_FromStringAndSize(self.names, self.names_len)
            names = []
            start = 0
            for i in range(nnz):
                names.append(blob[start:self.name_end[i]].decode("utf-8", "replace"))
                start = self.name_end[i]
            self.names_len = 0
        self.n_rows_out += n_rows
        self.n_rows = 0
        self.nnz = 0
        return ns, hashes, values, indptr, labels, weights, names
