"""Sparse weights of a linear model: K rows of weights as NumPy CSR arrays, no scipy.

l1 makes most weights exactly zero, and hashing makes the models wide (2**18 to 2**24+
columns): a 2**24 x 20 model is 2.7 GB dense, 40 MB as the indices and values of its
1% non-zeros. `SparseWeights` holds such weights for `onlinepgs.model.LinearModel`, which
scores with them directly (never densifying), with NumPy only: the command's paths
(predict, eval, info) import no scipy.

Rounding: with a sparse X (a scipy CSR matrix or the command's own CSR) the scores are
bit for bit those of the dense weights, since both add each row's products in the
row's stored order and the skipped products are exact zeros. With a dense X the dense
weights go through one BLAS product and the sparse ones through a product over the
non-zero columns, which may add in another order: each score then differs by at most
``2 n u sum_j |x_j w_j|`` (n the non-zeros of the row of weights, u = 2**-53 the unit
roundoff; the standard bound of a sum of n products, twice: one for each order).
"""
import numpy as np

__all__ = ["SparseWeights"]


class SparseWeights:
    """K rows of weights over ``n_features`` columns, in compressed sparse rows.

    Parameters
    ----------
    indptr : array-like of int, shape (K + 1,)
        Row k's weights are ``data[indptr[k]:indptr[k + 1]]``, from ``indptr[0] == 0``.
    indices : array-like of int, shape (nnz,)
        Their columns, strictly increasing within each row, in ``[0, n_features)``.
    data : array-like of float, shape (nnz,)
        The weights (finite).
    shape : (int, int)
        (K, n_features).
    where : str, default="the sparse weights"
        Who holds the arrays, for the error messages (e.g. a file's name).

    Raises
    ------
    ValueError
        Arrays that do not describe such weights (wrong lengths, indices out of range
        or unsorted, weights not finite), saying which and where: a damaged model file
        is refused, never loaded wrong.

    Examples
    --------
    >>> import numpy as np
    >>> from onlinepgs._weights import SparseWeights
    >>> W = SparseWeights.from_dense(np.array([[0.0, 2.0, 0.0], [1.0, 0.0, 0.0]]))
    >>> W.indptr.tolist(), W.indices.tolist(), W.data.tolist(), W.nnz
    ([0, 1, 2], [1, 0], [2.0, 1.0], 2)
    >>> W.toarray().tolist()
    [[0.0, 2.0, 0.0], [1.0, 0.0, 0.0]]
    """

    def __init__(self, indptr, indices, data, shape, where="the sparse weights"):
        K, d = (int(s) for s in shape)
        indptr, indices, data = (np.asarray(a) for a in (indptr, indices, data))
        if K < 1 or d < 0:
            raise ValueError(f"{where}: shape ({K}, {d}) is not (K >= 1, n_features >= 0)")
        for name, a in (("indptr", indptr), ("indices", indices)):
            if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
                raise ValueError(f"{where}: {name} is not a 1-d integer array "
                                 f"(dtype {a.dtype.str}, shape {a.shape})")
        if data.ndim != 1 or (data.size and data.dtype.kind != "f"):
            raise ValueError(f"{where}: data is not a 1-d float array (dtype "
                             f"{data.dtype.str}, shape {data.shape})")
        if indptr.shape[0] != K + 1:
            raise ValueError(f"{where}: indptr has {indptr.shape[0]} entries, expected "
                             f"{K + 1} (one more than the {K} row(s))")
        nnz = indices.shape[0]
        if data.shape[0] != nnz:
            raise ValueError(f"{where}: {nnz} indices but {data.shape[0]} values")
        steps = np.diff(indptr.astype(np.int64))
        if indptr[0] != 0 or indptr[-1] != nnz or (steps < 0).any():
            raise ValueError(f"{where}: indptr is not non-decreasing from 0 to {nnz} "
                             f"(the number of values): {_short(indptr)}")
        indices = indices.astype(np.int64 if d > 2**31 - 1 else np.int32, copy=False)
        if nnz:
            bad = np.flatnonzero((indices < 0) | (indices >= d))
            if bad.size:
                raise ValueError(f"{where}: index {int(indices[bad[0]])} (entry {bad[0]}) is "
                                 f"out of range for {d} features")
            # within a row, each index above the previous one; a row's first entry is free
            rising = np.diff(indices.astype(np.int64)) > 0
            first = np.zeros(nnz, bool)
            first[indptr[:-1][steps > 0]] = True
            bad = np.flatnonzero(~(rising | first[1:]))
            if bad.size:
                at = bad[0] + 1
                row = int(np.searchsorted(indptr, at, side="right") - 1)
                raise ValueError(f"{where}: indices of row {row} are not strictly increasing "
                                 f"(entry {at}: {int(indices[at])} after "
                                 f"{int(indices[at - 1])})")
            bad = np.flatnonzero(~np.isfinite(data))
            if bad.size:
                raise ValueError(f"{where}: weight {data[bad[0]]} (entry {bad[0]}) is not "
                                 "finite")
        self.indptr = np.ascontiguousarray(indptr, dtype=np.int64)
        self.indices = np.ascontiguousarray(indices)
        self.data = np.ascontiguousarray(data, dtype=np.float64)
        self.shape = (K, d)
        for a in (self.indptr, self.indices, self.data):
            a.setflags(write=False)  # part of a value

    @classmethod
    def from_dense(cls, coef):
        """The non-zero entries of a dense (K, n_features) array."""
        coef = np.asarray(coef, dtype=np.float64)
        rows, cols = np.nonzero(coef)  # row-major: each row's columns increasing
        indptr = np.zeros(coef.shape[0] + 1, np.int64)
        np.cumsum(np.bincount(rows, minlength=coef.shape[0]), out=indptr[1:])
        return cls(indptr, cols, coef[rows, cols], coef.shape)

    @classmethod
    def from_scipy(cls, matrix):
        """A scipy.sparse matrix or array of shape (K, n_features), duplicates summed
        and explicit zeros dropped."""
        matrix = matrix.tocsr(copy=True).astype(np.float64)
        matrix.sum_duplicates()
        matrix.eliminate_zeros()
        return cls(matrix.indptr, matrix.indices, matrix.data, matrix.shape)

    def __repr__(self):
        return f"<SparseWeights {self.shape[0]}x{self.shape[1]}, {self.nnz} stored>"

    dtype = np.dtype(np.float64)

    @property
    def nnz(self):
        """The stored weights."""
        return int(self.indptr[-1])

    @property
    def n_nonzero(self):
        """The non-zero weights (stored zeros not counted)."""
        return int(np.count_nonzero(self.data))

    def row(self, k):
        """(indices, values) of row k."""
        a, b = self.indptr[k], self.indptr[k + 1]
        return self.indices[a:b], self.data[a:b]

    def toarray(self):
        """The dense (K, n_features) array (O(K n_features) memory)."""
        out = np.zeros(self.shape)
        rows = np.repeat(np.arange(self.shape[0]), np.diff(self.indptr))
        out[rows, self.indices] = self.data
        return out

    def to_scipy(self):
        """The weights as a `scipy.sparse.csr_matrix` (imports scipy)."""
        import scipy.sparse as sp

        return sp.csr_matrix((self.data.copy(), self.indices.copy(), self.indptr.copy()),
                             shape=self.shape)

    def equals(self, other):
        """The same shape and stored entries, bit for bit."""
        return (self.shape == other.shape and np.array_equal(self.indptr, other.indptr)
                and np.array_equal(self.indices, other.indices)
                and np.array_equal(self.data.view(np.int64), other.data.view(np.int64)))

    def scores(self, X):
        """``X @ W.T``, shape (rows, K), for a dense X or a CSR one (scipy's or the
        command's: ``data``, ``indices``, ``indptr``). Columns of X past the weights meet
        weight 0; a narrower X uses the first weights."""
        K = self.shape[0]
        if isinstance(X, np.ndarray):
            out = np.empty((X.shape[0], K))
            for k in range(K):
                idx, val = self.row(k)
                cut = np.searchsorted(idx, X.shape[1])  # columns X has
                out[:, k] = X[:, idx[:cut]] @ val[:cut]
            return out
        X = X.tocsr()
        start, stop = X.indptr[0], X.indptr[-1]
        cols, values = X.indices[start:stop], X.data[start:stop]
        rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
        out = np.empty((X.shape[0], K))
        for k in range(K):
            idx, val = self.row(k)
            if idx.shape[0] == 0:
                out[:, k] = 0.0
                continue
            at = np.minimum(np.searchsorted(idx, cols), idx.shape[0] - 1)
            hit = idx[at] == cols
            # the products of the dense weights, their zeros included: bincount adds in
            # stored order, the sums scipy's and the command's CSR products give
            picked = np.where(hit, val[at], 0.0)
            out[:, k] = np.bincount(rows, weights=values * picked, minlength=X.shape[0])
        return out


def _short(a, n=6):
    a = np.asarray(a)
    text = ", ".join(str(v) for v in a[:n].tolist())
    return f"[{text}{', ...' if a.shape[0] > n else ''}]"
