# cython: language_level=3
"""Feature hashing for log streams: records of {feature: value} into CSR rows.

String features are hashed with MurmurHash3 (x86, 32 bit) into 2**n_bits columns, signed
by the hash's top bit so that collisions cancel in expectation; integer features are
column indices (taken modulo 2**n_bits when hashing is on). One Python object walk per
record is unavoidable for Python input; it happens here in C loops, and the model sees
whole batches.
"""
import numpy as np
cimport numpy as cnp
from libc.math cimport isfinite
from libc.stdint cimport uint32_t, int64_t, uint8_t
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_DATA, PyUnicode_GET_LENGTH
from cpython.float cimport PyFloat_AS_DOUBLE
from cpython.dict cimport PyDict_Next
from cpython.object cimport PyObject
from libc.string cimport memcpy
from cpython cimport array
import array as _array

cdef extern from "Python.h":
    void Py_SET_SIZE(object o, Py_ssize_t size)
    bint PyUnicode_IS_COMPACT_ASCII(object o)


cdef extern from *:
    """
    /* a record's item that is an exact str name in ASCII with an exact float value (read
       from the pointers, no reference taken) */
    static inline int onlinepgs_ascii_name_number(PyObject* key, PyObject* value) {
        return Py_TYPE(key) == &PyUnicode_Type && PyUnicode_IS_COMPACT_ASCII(key)
            && Py_TYPE(value) == &PyFloat_Type;
    }
    """
    bint _ascii_name_number "onlinepgs_ascii_name_number"(PyObject* key,
                                                          PyObject* value) noexcept

from onlinepgs._row_errors import RowError

if _array.array("I").itemsize != 4:  # pragma: no cover - the hashes are 32-bit
    raise ImportError("onlinepgs needs a 32-bit C unsigned int")

cnp.import_array()


# the algorithm's constants (set at import: large literals would be Python ints)
cdef uint32_t C1 = 0xcc9e2d51
cdef uint32_t C2 = 0x1b873593
cdef uint32_t N1 = 0xe6546b64
cdef uint32_t F1 = 0x85ebca6b
cdef uint32_t F2 = 0xc2b2ae35


cdef inline uint32_t _rotl32(uint32_t x, int r) noexcept nogil:
    return (x << r) | (x >> (32 - r))


cdef uint32_t murmurhash3_x86_32(const uint8_t* key, Py_ssize_t length,
                                 uint32_t seed) noexcept nogil:
    """MurmurHash3_x86_32 (Austin Appleby's public-domain design)."""
    cdef uint32_t c1 = C1, c2 = C2, h1 = seed, k1
    cdef Py_ssize_t i, nblocks = length // 4
    cdef const uint8_t* tail
    for i in range(nblocks):
        k1 = (<uint32_t>key[4 * i] | (<uint32_t>key[4 * i + 1] << 8)
              | (<uint32_t>key[4 * i + 2] << 16) | (<uint32_t>key[4 * i + 3] << 24))
        k1 *= c1
        k1 = _rotl32(k1, 15)
        k1 *= c2
        h1 ^= k1
        h1 = _rotl32(h1, 13)
        h1 = h1 * 5 + N1
    tail = key + nblocks * 4
    k1 = 0
    if length & 3 == 3:
        k1 ^= <uint32_t>tail[2] << 16
    if length & 3 >= 2:
        k1 ^= <uint32_t>tail[1] << 8
    if length & 3 >= 1:
        k1 ^= <uint32_t>tail[0]
        k1 *= c1
        k1 = _rotl32(k1, 15)
        k1 *= c2
        h1 ^= k1
    h1 ^= <uint32_t>length
    h1 ^= h1 >> 16
    h1 *= F1
    h1 ^= h1 >> 13
    h1 *= F2
    h1 ^= h1 >> 16
    return h1


def murmurhash3(key, uint32_t seed=0):
    """Unsigned 32-bit MurmurHash3 of a str (UTF-8) or bytes.

    Examples
    --------
    >>> from onlinepgs._core._hashing import murmurhash3
    >>> murmurhash3("hello", seed=0)
    613153351
    """
    cdef const char* buf
    cdef Py_ssize_t n
    if isinstance(key, str):
        buf = PyUnicode_AsUTF8AndSize(key, &n)
    elif isinstance(key, bytes):
        buf = key
        n = len(key)
    else:
        raise TypeError(f"murmurhash3 takes str or bytes, got {type(key).__name__}")
    return murmurhash3_x86_32(<const uint8_t*>buf, n, seed)


def namespace_letter(bytes name):
    """The letter of a namespace named `name` (UTF-8 bytes, not empty): its first byte,
    but 0x80 for a NUL byte (0 marks a raw, unsigned column).

    >>> from onlinepgs._core._hashing import namespace_letter
    >>> namespace_letter(b"user"), namespace_letter(b"\x00user")
    (117, 128)
    """
    return ns_letter(<uint8_t>name[0])


def _at_row(row, text):
    """The error at record `row` as a `RowError` (the row as data, for callers that
    count rows their own way, e.g. a stream's records)."""
    return RowError(row, text)


def _at_feature(row, text, reason, feature, namespace=None, value=None):
    """`_at_row`'s error for a bad feature of a record, with what a caller that shows
    the record in its own words needs as data (a reader of JSON lines: the column of the
    feature in its line): ``reason`` ("number", "finite", "nest", "empty namespace",
    "unicode"), ``feature`` (its key), ``namespace`` (the namespace's name or None) and
    ``value`` (the raw value)."""
    error = _at_row(row, text)
    error.reason, error.feature, error.namespace, error.value = (reason, feature,
                                                                namespace, value)
    return error


cdef object _pairs_of(object record, Py_ssize_t row):
    """An iterator over a record's (feature, value) pairs: a dict's items or the sequence
    itself; an error names `row` when it is neither."""
    items = record.items() if isinstance(record, dict) else record
    try:
        return iter(items)
    except TypeError:
        raise _at_row(row, f": expected a dict {{feature: value}} or a sequence of "
                         f"(feature, value) pairs, got {type(record).__name__}") from None


def records_to_csr(records, int n_bits, uint32_t seed, Py_ssize_t n_features):
    """Rows of {feature: value} (or sequences of (feature, value)) as CSR arrays.

    n_bits < 0: no hashing; features must be ints in [0, n_features) when n_features >= 0
    (any non-negative int when n_features < 0). A None value is a missing field: no
    feature (`records_to_rows`' rule, with or without hashing). Returns (data, indices,
    indptr, width) with width the number of columns the rows need.
    """
    cdef Py_ssize_t row = 0, count = 0, width = 0, col
    cdef int64_t mask = (1 << n_bits) - 1 if n_bits >= 0 else -1
    cdef uint32_t h
    cdef const char* buf
    cdef Py_ssize_t n
    cdef double value, sign
    data, indices, indptr = [], [], [0]
    data_append, indices_append = data.append, indices.append
    for record in records:
        for pair in _pairs_of(record, row):
            try:
                key, raw = pair
            except (TypeError, ValueError):
                raise _at_row(row, f": expected (feature, value) pairs, got "
                                 f"{pair!r}") from None
            if raw is None:  # a missing field, as records_to_rows reads it
                continue
            try:
                value = raw
            except TypeError:
                if isinstance(raw, (str, dict)) and isinstance(key, str) and n_bits < 0:
                    # records_to_rows takes them (a category, a namespace): they hash
                    what = ("string value" if isinstance(raw, str)
                            else "namespace (a dict value)")
                    raise _at_row(row, f", feature {key!r:.40}: a {what} needs hashing "
                                     "(set n_bits)") from None
                raise _at_row(row, f", feature {key!r}: value {raw!r:.40} is not a "
                                 "number") from None
            except OverflowError:  # an int beyond the doubles
                raise _at_row(row, f", feature {key!r:.40}: value {raw!r:.40} is not "
                                 "finite as a double") from None
            if not isfinite(value):
                raise _at_row(row, f", feature {key!r}: value {raw!r} is not finite")
            sign = 1.0
            if isinstance(key, str):
                if n_bits < 0:
                    raise _at_row(row, f": string feature {key!r} needs hashing "
                                     "(set n_bits)")
                try:
                    buf = PyUnicode_AsUTF8AndSize(key, &n)
                except UnicodeEncodeError as exc:  # a lone surrogate: no UTF-8 to hash
                    raise _at_row(row, f": string feature {key!r} is not valid "
                                     f"Unicode ({exc.reason})") from None
                h = murmurhash3_x86_32(<const uint8_t*>buf, n, seed)
                col = <Py_ssize_t>(h & <uint32_t>mask)
                if h >> 31:
                    sign = -1.0
            else:
                try:
                    col = key.__index__()
                except OverflowError:
                    raise _at_row(row, f": feature index {key!r:.40} is beyond 2**63 - "
                                     "1") from None
                except (AttributeError, TypeError):
                    raise _at_row(row, f": feature {key!r} is neither a str nor an "
                                     "int") from None
                if col < 0:
                    raise _at_row(row, f": negative feature index {key!r}")
                if n_bits >= 0:
                    col &= mask
                elif n_features >= 0 and col >= n_features:
                    raise _at_row(
                        row, f": feature index {col} is beyond the model's {n_features} "
                        "features (set n_bits to hash into a fixed space)")
            if col + 1 > width:
                width = col + 1
            data_append(sign * value)
            indices_append(col)
            count += 1
        indptr.append(count)
        row += 1
    return (np.asarray(data, dtype=np.float64), np.asarray(indices, dtype=np.int64),
            np.asarray(indptr, dtype=np.int64), width)


cdef uint8_t DEFAULT_NAMESPACE = 32  # onlinepgs.features.DEFAULT_NAMESPACE
cdef uint8_t RAW_COLUMN = 0  # onlinepgs.features.RAW_COLUMN


cdef uint32_t _hash_text(object text, uint32_t seed, Py_ssize_t row, str what,
                         object namespace=None) except? 0:
    """murmurhash3 of a str's UTF-8 (a lone surrogate has none: an error at `row`); a
    subclass of str (NumPy's str_) hashes as its text does (typed `str`, Cython took only
    str itself, and a str_ key failed with a TypeError naming no feature)."""
    cdef const char* buf
    cdef Py_ssize_t n
    if PyUnicode_IS_COMPACT_ASCII(text):  # its UTF-8 is its data (no try: an event's cost)
        return murmurhash3_x86_32(<const uint8_t*>PyUnicode_DATA(text),
                                  PyUnicode_GET_LENGTH(text), seed)
    try:
        buf = PyUnicode_AsUTF8AndSize(text, &n)
    except UnicodeEncodeError as exc:
        raise _at_feature(row, f": {what} {text!r:.40} is not valid Unicode "
                             f"({exc.reason})", "unicode", text, namespace) from None
    return murmurhash3_x86_32(<const uint8_t*>buf, n, seed)


cdef double _number(object raw, Py_ssize_t row, object key,
                    object namespace=None) except? -1.0:
    """A feature's value as a finite double (bool: 0 or 1), else an error at `row`."""
    cdef double value
    if type(raw) is float:  # no try for the common case (an event's cost)
        value = PyFloat_AS_DOUBLE(raw)
        if isfinite(value):
            return value
    try:
        value = raw
    except TypeError:
        raise _at_feature(row, f", feature {key!r:.40}: value {raw!r:.40} is not a number "
                             "or a string", "number", key, namespace, raw) from None
    except OverflowError:  # an int beyond the doubles
        raise _at_feature(row, f", feature {key!r:.40}: value {raw!r:.40} is not finite "
                             "as a double", "finite", key, namespace, raw) from None
    if not isfinite(value):
        raise _at_feature(row, f", feature {key!r:.40}: value {raw!r:.40} is not finite",
                          "finite", key, namespace, raw)
    return value


cdef class _Entries:
    """The growing typed arrays of `records_to_rows` (no Python object an entry; the
    attributes are declared in _hashing.pxd)."""

    def __cinit__(self):
        self.ns = _array.array("B")
        self.hashes = _array.array("I")  # 32-bit unsigned on the platforms built for
        self.values = _array.array("d")
        self.count = 0
        self.room = 0

    cdef int _size(self, Py_ssize_t n) except -1:
        """The arrays' length n. Their memory only grows: resize_smart would give it
        back below a quarter, and the entries of an event start at 0 each time (one
        dict after another, onlinepgs._core._event)."""
        if n > self.room:
            array.resize_smart(self.ns, n)
            array.resize_smart(self.hashes, n)
            array.resize_smart(self.values, n)
            self.room = n  # resize_smart leaves at least n allocated
        else:
            Py_SET_SIZE(self.ns, n)
            Py_SET_SIZE(self.hashes, n)
            Py_SET_SIZE(self.values, n)
        return 0

    cdef int push(self, uint8_t letter, uint32_t h, double value) except -1:
        cdef Py_ssize_t k = self.count
        if k < self.room:  # `_size`'s own case, inlined
            Py_SET_SIZE(self.ns, k + 1)
            Py_SET_SIZE(self.hashes, k + 1)
            Py_SET_SIZE(self.values, k + 1)
        else:
            self._size(k + 1)
        self.ns.data.as_uchars[k] = letter
        self.hashes.data.as_uints[k] = h
        self.values.data.as_doubles[k] = value
        self.count = k + 1
        return 0

    cdef int truncate(self, Py_ssize_t k) except -1:
        """Keep the first k entries (a skipped record's are dropped; 0: the next event)."""
        self._size(k)
        self.count = k
        return 0


cdef uint32_t _hash_joined(object key, object raw, uint32_t seed, Py_ssize_t row,
                          object namespace) except? 0:
    """murmurhash3 of ``key + "=" + raw`` (a category), without making that str: the two
    UTF-8 texts joined in a buffer (the str's own errors where one has no UTF-8)."""
    cdef const char* kb
    cdef const char* rb
    cdef Py_ssize_t kn, rn
    cdef char joined[256]
    try:
        kb = PyUnicode_AsUTF8AndSize(key, &kn)
        rb = PyUnicode_AsUTF8AndSize(raw, &rn)
    except UnicodeEncodeError:
        kn = rn = sizeof(joined)  # the joined str says which, in _hash_text's words
    if kn + 1 + rn > <Py_ssize_t>sizeof(joined):
        return _hash_text(key + "=" + raw, seed, row, "feature", namespace)
    memcpy(joined, kb, kn)
    joined[kn] = 61  # "="
    memcpy(joined + kn + 1, rb, rn)
    return murmurhash3_x86_32(<const uint8_t*>joined, kn + 1 + rn, seed)


cdef Py_ssize_t _push_namespace(object key, dict features, Py_ssize_t row, uint32_t hash_seed,
                                _Entries out, list name_out) except -1:
    """Push the features of namespace `key` (one level); returns how many."""
    cdef Py_ssize_t pushed = 0, n
    cdef uint32_t seed, h
    cdef uint8_t letter
    cdef double value
    cdef const char* buf
    if not key:
        raise _at_feature(row, ": a namespace (a dict value) needs a "
                             "non-empty name", "empty namespace", key)
    seed = _hash_text(key, hash_seed, row, "namespace")
    buf = PyUnicode_AsUTF8AndSize(key, &n)  # valid: _hash_text took it
    letter = ns_letter(<uint8_t>buf[0])
    for inner, raw_inner in features.items():
        if raw_inner is None:
            continue
        if isinstance(inner, str):
            name = inner
        elif isinstance(inner, int) and not isinstance(inner, bool):
            name = str(inner)  # hashed as its text, as VW hashes "13"
        else:
            raise _at_row(row, f", namespace {key!r:.40}: feature "
                             f"{inner!r:.40} is not a str")
        if isinstance(raw_inner, str):
            value = 1.0
            if name_out is None:
                h = _hash_joined(name, raw_inner, seed, row, key)
                out.push(letter, h, value)
                pushed += 1
                continue
            name = name + "=" + raw_inner
        elif isinstance(raw_inner, dict):
            raise _at_feature(row, f", namespace {key!r:.40}: feature "
                                 f"{inner!r:.40} is a dict (namespaces do "
                                 "not nest)", "nest", inner, key, raw_inner)
        else:
            value = _number(raw_inner, row, inner, key)
        h = _hash_text(name, seed, row, "feature", key)
        out.push(letter, h, value)
        if name_out is not None:
            name_out.append(key + "^" + name)
        pushed += 1
    return pushed


cdef Py_ssize_t _push_pair(object key, object raw, Py_ssize_t row, uint32_t hash_seed,
                           _Entries out, list name_out) except -1:
    """Push the entries of one (feature, value) pair of a record; returns how many."""
    cdef Py_ssize_t col
    cdef uint32_t h
    cdef double value
    if raw is None:
        return 0
    if isinstance(key, str):
        if isinstance(raw, dict):
            return _push_namespace(key, raw, row, hash_seed, out, name_out)
        if isinstance(raw, str):
            value = 1.0
            if name_out is None:
                out.push(DEFAULT_NAMESPACE, _hash_joined(key, raw, hash_seed, row, None),
                         value)
                return 1
            name = key + "=" + raw
        else:
            name = key
            value = _number(raw, row, key)
        h = _hash_text(name, hash_seed, row, "feature")
        out.push(DEFAULT_NAMESPACE, h, value)
        if name_out is not None:
            name_out.append(name)
        return 1
    try:
        col = key.__index__()
    except OverflowError:
        raise _at_row(row, f": feature index {key!r:.40} is beyond 2**63 - 1") from None
    except (AttributeError, TypeError):
        raise _at_row(row, f": feature {key!r:.40} is neither a str nor an "
                         "int") from None
    if col < 0:
        raise _at_row(row, f": negative feature index {key!r}")
    if isinstance(raw, (str, dict)):
        raise _at_row(row, f": feature index {col} has the value {raw!r:.40}: a "
                         "column index takes a number (name a namespace or a "
                         "category by a str)")
    value = _number(raw, row, key)
    out.push(RAW_COLUMN, <uint32_t>(col & 0xFFFFFFFF), value)  # masked later
    if name_out is not None:
        name_out.append(str(col))
    return 1


cdef Py_ssize_t _push_record(object record, Py_ssize_t row, uint32_t hash_seed,
                             _Entries out, list name_out, bint* plain=NULL) except -1:
    """Push the entries of one record (the rules of `records_to_rows`) onto `out`, their
    names onto `name_out` unless None; returns how many; an error names `row`. `plain`,
    unless NULL: set to whether the record is a dict whose items cannot change
    (`_unchanging_item`, taken in the same walk: the per-event path keeps such a row)."""
    cdef Py_ssize_t pushed = 0, pos = 0
    cdef PyObject* key
    cdef PyObject* raw
    cdef double value
    if plain != NULL:
        plain[0] = type(record) is dict
    if type(record) is dict:
        # a plain dict's items without a tuple each (one event's cost is mostly this walk)
        while PyDict_Next(record, &pos, &key, &raw):
            if plain != NULL and plain[0] and not _unchanging_item(key, raw):
                plain[0] = False
            if name_out is None and _ascii_name_number(key, raw):
                # `_push_pair`'s entry of a str name (ASCII: its UTF-8 is its data) with a
                # finite float value, without its calls: the commonest item
                value = PyFloat_AS_DOUBLE(<object>raw)
                if isfinite(value):
                    out.push(DEFAULT_NAMESPACE, murmurhash3_x86_32(
                        <const uint8_t*>PyUnicode_DATA(<object>key),
                        PyUnicode_GET_LENGTH(<object>key), hash_seed), value)
                    pushed += 1
                    continue
            pushed += _push_pair(<object>key, <object>raw, row, hash_seed, out, name_out)
        return pushed
    for pair in _pairs_of(record, row):
        try:
            key_, raw_ = pair
        except (TypeError, ValueError):
            raise _at_row(row, f": expected (feature, value) pairs, got "
                             f"{pair!r:.60}") from None
        pushed += _push_pair(key_, raw_, row, hash_seed, out, name_out)
    return pushed


def records_to_rows(records, uint32_t hash_seed, bint names=False,
                    list skipped=None):
    """Records as namespaced rows: the arrays of `onlinepgs.features.NamespacedRows`.

    A record is a dict (or a sequence of (key, value) pairs):

    * str key, number value: a feature of the default namespace, hashed by its name;
    * str key, str value: the feature ``"key=value"``, value 1 (a category);
    * str key, dict value: a namespace (its first UTF-8 byte is the letter, 0x80 for a
      NUL byte; its full name seeds its features' hash) of features by the two rules
      above (one level);
    * int key, number value: a raw column (the index, not hashed nor signed);
    * None value: no feature; bool value: 0 or 1.

    Parameters
    ----------
    records : iterable of dict or of sequences of (key, value)
    hash_seed : int
    names : bool
        Also the entries' names (``"key"``, ``"key=value"``, ``"ns^key"``, the index as
        text), for an audit.
    skipped : list or None
        None: a bad record raises. A list: a bad record is left out (no row) and
        ``(its index among the records, its RowError)`` appended, the rest read on (a
        reader's skip mode: one pass, whatever the bad records).

    Returns
    -------
    (ns uint8, hashes uint32, values float64, indptr int64, names list or None)

    Raises
    ------
    onlinepgs._row_errors.RowError
        Naming the record (row) and the feature (unless `skipped` is a list).

    Examples
    --------
    >>> from onlinepgs._core._hashing import records_to_rows
    >>> ns, h, v, ptr, names = records_to_rows([{"user": "u9", "geo": {"fr": 2.0}, 3: 1}],
    ...                                        0, names=True)
    >>> ns.tolist(), v.tolist(), ptr.tolist(), names
    ([32, 103, 0], [1.0, 2.0, 1.0], [0, 3], ['user=u9', 'geo^fr', '3'])
    """
    cdef Py_ssize_t row = 0, count = 0
    cdef _Entries out = _Entries()
    indptr, name_out = [0], ([] if names else None)
    for record in records:
        if skipped is None:
            count += _push_record(record, row, hash_seed, out, name_out)
        else:
            try:
                count += _push_record(record, row, hash_seed, out, name_out)
            except RowError as exc:  # its entries (and names) so far are dropped
                out.truncate(count)
                if name_out is not None:
                    del name_out[count:]
                skipped.append((row, exc.with_traceback(None)))  # (no frames kept)
                row += 1
                continue
        indptr.append(count)
        row += 1
    return (np.frombuffer(out.ns, dtype=np.uint8), np.frombuffer(out.hashes, dtype=np.uint32),
            np.frombuffer(out.values, dtype=np.float64), np.asarray(indptr, dtype=np.int64),
            name_out)
