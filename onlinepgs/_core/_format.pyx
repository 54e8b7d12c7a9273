# cython: language_level=3
"""Numbers as text for the command's answers: rows of doubles written as Python's
``format(v, ".9g")`` writes each, in C with the GIL released (``predict`` and ``serve``
write a line a row: in Python the formatting took more time than the prediction).

C's ``%.9g`` and Python's ``.9g`` are both correctly rounded and follow the same rules
(the shorter of fixed and exponent notation, trailing zeros dropped, an exponent of at
least two digits), so a finite value has one text in both; they spell infinities and
NaN differently, and such rows are left to Python (tests/test_serve.py compares them).
"""
from libc.math cimport isfinite
from libc.stdio cimport snprintf
from libc.stdlib cimport malloc, free
from cpython.bytes cimport PyBytes_FromStringAndSize

# the longest text of "%.9g": a sign, 9 digits, a point, "e-308"; with room to spare
DEF ROOM = 24


def format_rows(const double[:, ::1] values):
    """The lines of the rows of `values`, each its numbers as ``format(v, ".9g")`` joined by
    a space and ended by a newline, as one bytes object; None where a value is not
    finite (the caller formats those in Python).

    Examples
    --------
    >>> import numpy as np
    >>> format_rows(np.array([[0.5, -1e-05], [123456789012.0, 2.0]]))
    b'0.5 -1e-05\\n1.23456789e+11 2\\n'
    """
    cdef Py_ssize_t n = values.shape[0], K = values.shape[1], i, c, at = 0
    cdef char* buf
    cdef bint finite = True
    if n == 0 or K == 0:
        return b"\n" * n
    buf = <char*>malloc(n * K * ROOM + 1)
    if buf == NULL:
        raise MemoryError()
    try:
        with nogil:
            for i in range(n):
                for c in range(K):
                    if not isfinite(values[i, c]):
                        finite = False
                        break
                    at += snprintf(buf + at, ROOM, b"%.9g", values[i, c])
                    buf[at] = b" " if c + 1 < K else b"\n"
                    at += 1
                if not finite:
                    break
        if not finite:
            return None
        return PyBytes_FromStringAndSize(buf, at)
    finally:
        free(buf)
