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
from cpython.unicode cimport PyUnicode_AsUTF8AndSize

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


def _at_row(row, text):
    """The error at record `row` as `onlinepgs._checks.RowError` (the row as data, for
    callers that count rows their own way, e.g. a stream's records); imported when
    needed, as `onlinepgs._checks` imports this module."""
    from onlinepgs._checks import RowError
    return RowError(row, text)


def records_to_csr(records, int n_bits, uint32_t seed, Py_ssize_t n_features):
    """Rows of {feature: value} (or sequences of (feature, value)) as CSR arrays.

    n_bits < 0: no hashing; features must be ints in [0, n_features) when n_features >= 0
    (any non-negative int when n_features < 0). Returns (data, indices, indptr, width)
    with width the number of columns the rows need.
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
        items = record.items() if isinstance(record, dict) else record
        try:
            iterator = iter(items)
        except TypeError:
            raise _at_row(row, f": expected a dict {{feature: value}} or a sequence of "
                             f"(feature, value) pairs, got {type(record).__name__}") from None
        for pair in iterator:
            try:
                key, raw = pair
            except (TypeError, ValueError):
                raise _at_row(row, f": expected (feature, value) pairs, got "
                                 f"{pair!r}") from None
            try:
                value = raw
            except TypeError:
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
                except (AttributeError, TypeError, OverflowError):
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
