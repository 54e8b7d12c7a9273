# cython: language_level=3
"""Products of a CSR matrix and a dense one for `onlinepgs._csr.CSR` (the command's chunks,
which spare the import of scipy): ``X @ W`` (``predict``'s scores of K classes) and
``X.T @ U`` (the duality gap's sums), with the GIL released.

Each output element is the sum, from 0.0 and in the entries' stored order, of the
products ``data[e] * W[j, k]`` (rounded, then added): the order and rounding of scipy's
CSR products and of ``np.bincount``, so the results are those bit for bit (the core is
built without fused multiply-adds: setup.py sets no ``-march``).
"""
import numpy as np

from libc.stdint cimport int32_t, int64_t

ctypedef fused index_t:
    int32_t
    int64_t

ctypedef fused pointer_t:
    int32_t
    int64_t


cdef void _add_products(const pointer_t[::1] indptr, const index_t[::1] indices,
                        const double[::1] data, const double[:, ::1] M, double[:, ::1] out,
                        bint transposed) noexcept nogil:
    """out[r] += data[e] M[indices[e]] over each row r's entries e (X @ M), or with
    `transposed` out[indices[e]] += data[e] M[r] (X.T @ M); in stored order."""
    cdef Py_ssize_t n_rows = indptr.shape[0] - 1, K = M.shape[1], r, e, k
    cdef double a
    cdef const double* m
    cdef double* o
    for r in range(n_rows):
        for e in range(indptr[r], indptr[r + 1]):
            a = data[e]
            if transposed:
                m, o = &M[r, 0], &out[indices[e], 0]
            else:
                m, o = &M[indices[e], 0], &out[r, 0]
            for k in range(K):
                o[k] += a * m[k]


def csr_times_dense(const pointer_t[::1] indptr, const index_t[::1] indices,
                    const double[::1] data, const double[:, ::1] W):
    """``X @ W``: X of ``len(indptr) - 1`` rows (its entries ``indptr[r]`` to
    ``indptr[r + 1]`` of `indices` and `data`), W of shape (n_columns, K); the result
    (n_rows, K).

    Examples
    --------
    >>> import numpy as np
    >>> indptr, indices = np.array([0, 2, 3]), np.array([0, 2, 1], dtype=np.int32)
    >>> data = np.array([1.0, 2.0, 3.0])
    >>> csr_times_dense(indptr, indices, data, np.array([[1.0], [10.0], [100.0]]))
    array([[201.],
           [ 30.]])
    """
    out = np.zeros((indptr.shape[0] - 1, W.shape[1]))
    cdef double[:, ::1] o = out
    with nogil:
        _add_products(indptr, indices, data, W, o, False)
    return out


def csr_transposed_times_dense(const pointer_t[::1] indptr, const index_t[::1] indices,
                               const double[::1] data, const double[:, ::1] U,
                               Py_ssize_t n_columns):
    """``X.T @ U``: U of shape (n_rows, K), the result (n_columns, K), where X has
    ``len(indptr) - 1`` rows and `n_columns` columns.

    Examples
    --------
    >>> import numpy as np
    >>> indptr, indices = np.array([0, 2, 3]), np.array([0, 2, 1], dtype=np.int32)
    >>> data = np.array([1.0, 2.0, 3.0])
    >>> csr_transposed_times_dense(indptr, indices, data, np.array([[1.0], [10.0]]), 3)
    array([[ 1.],
           [30.],
           [ 2.]])
    """
    out = np.zeros((n_columns, U.shape[1]))
    cdef double[:, ::1] o = out
    with nogil:
        _add_products(indptr, indices, data, U, o, True)
    return out
