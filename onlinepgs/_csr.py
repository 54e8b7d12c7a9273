"""THE constructor of the CSR chunks that readers hand to learners.

Every reader (svmlight, VW text, CSV, JSON lines) and the namespaced-features kernel
build their chunks here, so that the matrix type the command's path carries is
decided in one place.

Two kinds of chunk come out of `csr`:

* a `scipy.sparse.csr_matrix` (the default): what the Python API documents, takes and
  returns (`iter_svmlight`, `load_svmlight`, the estimators);
* inside `light_chunks()` (the command line: ``train``, ``predict``, ``eval``, ``gap``),
  a `CSR`: the same three arrays and shape, with just what the command's path does
  with a chunk (row selection for the holdout, products with dense weights, the
  transposed product of the duality gap, a column cut, summing duplicates). Importing
  ``scipy.sparse`` costs a cold process about 0.25 s and 20 MB (its array-API layer
  pulls in numpy.testing and numpy.f2py), more than parsing and training IMDB's 25,000
  rows; the command never needed anything else of it.

`issparse` recognises both without importing scipy (no scipy matrix can exist before
scipy is imported); `vstack`, `widen` and `like` keep the kind they are given. Products
give the bits scipy gives: each row's (column's) sum in stored order, from 0.

`sparse` stands in for ``import scipy.sparse as sp`` in the modules the command
imports: ``sp.issparse`` is `issparse`, any other name imports scipy.sparse then (the
Python API's paths: dense or record input made CSR, a scipy vstack).
"""
import contextlib
import sys

import numpy as np

_light = False


@contextlib.contextmanager
def light_chunks(on=True):
    """Within the block, `csr` gives `CSR` chunks (``on``) or scipy ones (``not on``)."""
    global _light
    before, _light = _light, bool(on)
    try:
        yield
    finally:
        _light = before


def csr(data, indices, indptr, shape, canonical=False):
    """A CSR matrix over the arrays (not copied): a `CSR` inside `light_chunks()`, else a
    `scipy.sparse.csr_matrix`. ``canonical``: the indices of each row are sorted and
    unique (the caller guarantees it)."""
    if _light:
        return CSR(data, indices, indptr, shape, canonical)
    import scipy.sparse as sp

    X = sp.csr_matrix((data, indices, indptr), shape=shape)
    if canonical:
        X.has_canonical_format = True
    return X


def issparse(X):
    """Whether X is a sparse matrix: a `CSR`, or any scipy.sparse matrix or array."""
    if isinstance(X, CSR):
        return True
    sp = sys.modules.get("scipy.sparse")
    return sp is not None and sp.issparse(X)


class _ScipySparse:
    """``scipy.sparse``, imported on the first use of a name other than ``issparse``."""

    issparse = staticmethod(issparse)

    def __getattr__(self, name):
        import scipy.sparse

        return getattr(scipy.sparse, name)


sparse = _ScipySparse()


def like(X, data, indices, indptr, shape):
    """A CSR matrix over the arrays of the kind of X (`CSR` or scipy)."""
    if isinstance(X, CSR):
        return CSR(data, indices, indptr, shape)
    import scipy.sparse as sp

    return sp.csr_matrix((data, indices, indptr), shape=shape)


def widen(X, width):
    """Sparse X with `width` columns (at least its own), its entries shared."""
    if X.shape[1] == width:
        return X
    X = X.tocsr()
    return like(X, X.data, X.indices, X.indptr, (X.shape[0], width))


def vstack(blocks):
    """The rows of the sparse `blocks` in order, as one CSR matrix as wide as the
    widest (scipy's vstack for scipy blocks)."""
    width = max(X.shape[1] for X in blocks)
    if not all(isinstance(X, CSR) for X in blocks):
        import scipy.sparse as sp

        return sp.vstack([widen(X, width) for X in blocks], format="csr")
    sizes = [X.nnz for X in blocks]
    indptr = np.zeros(sum(X.shape[0] for X in blocks) + 1, np.int64)
    at, offset = 1, 0
    for X, size in zip(blocks, sizes):
        rows = X.shape[0]
        indptr[at:at + rows] = X.indptr[1:] - X.indptr[0] + offset
        at, offset = at + rows, offset + size
    data = np.concatenate([X.data[X.indptr[0]:X.indptr[-1]] for X in blocks])
    indices = np.concatenate([X.indices[X.indptr[0]:X.indptr[-1]] for X in blocks])
    return CSR(data, indices, _narrow(indptr, max(offset, width)), (indptr.shape[0] - 1, width),
               all(X.has_canonical_format for X in blocks))


def _narrow(indptr, largest):
    """int32 offsets where they fit (as scipy chooses), else int64."""
    return indptr.astype(np.int32) if largest < 2**31 else indptr


class CSR:
    """A compressed sparse row matrix as three arrays and a shape: the command's chunk.

    Parameters
    ----------
    data : ndarray of shape (nnz,)
        The stored values, row after row.
    indices : ndarray of shape (nnz,)
        The column of each stored value.
    indptr : ndarray of shape (n_rows + 1,)
        Row i's entries are ``data[indptr[i]:indptr[i + 1]]``.
    shape : (int, int)
        Rows and columns.
    canonical : bool, default=False
        Each row's indices are sorted and unique (the caller guarantees it).

    Notes
    -----
    What the learners, the model's scores and the duality gap use of a scipy CSR
    matrix, with the same meaning: ``nnz``, ``dtype``, ``has_canonical_format``,
    ``tocsr``, ``copy``, ``astype``, ``sum_duplicates``, rows by an int, a slice, an
    integer or boolean array (``X[rows]``), the first columns (``X[:, :n]``),
    ``X @ W`` and ``X.T @ U`` for dense W, U; `to_scipy` for anything else.
    """

    format = "csr"
    ndim = 2

    def __init__(self, data, indices, indptr, shape, canonical=False):
        self.data, self.indices, self.indptr = data, indices, indptr
        self.shape = (int(shape[0]), int(shape[1]))
        self.has_canonical_format = bool(canonical)

    def __repr__(self):
        return (f"<CSR {self.shape[0]}x{self.shape[1]} of {self.dtype}, "
                f"{self.nnz} stored entries>")

    @property
    def nnz(self):
        """The number of stored entries."""
        return int(self.indptr[-1] - self.indptr[0])

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def T(self):
        """The transpose, for products ``X.T @ U`` only."""
        return _Transposed(self)

    def tocsr(self, copy=False):
        return self.copy() if copy else self

    def copy(self):
        return CSR(self.data.copy(), self.indices.copy(), self.indptr.copy(), self.shape,
                   self.has_canonical_format)

    def astype(self, dtype):
        return CSR(self.data.astype(dtype), self.indices, self.indptr, self.shape,
                   self.has_canonical_format)

    def to_scipy(self):
        """The same matrix as a `scipy.sparse.csr_matrix` (its arrays shared)."""
        import scipy.sparse as sp

        X = sp.csr_matrix((self.data, self.indices, self.indptr), shape=self.shape)
        X.has_canonical_format = self.has_canonical_format
        return X

    def _rows_of_entries(self):
        """The row of each stored entry (from ``indptr[0]``: a slice's view)."""
        return np.repeat(np.arange(self.shape[0]), np.diff(self.indptr))

    def sum_duplicates(self):
        """Sort each row's indices and add up the entries of a repeated column (in
        stored order), in place, as scipy does."""
        if self.has_canonical_format:
            return
        start, stop = self.indptr[0], self.indptr[-1]
        rows = self._rows_of_entries()
        indices, data = self.indices[start:stop], self.data[start:stop]
        # stable: a column's duplicates add up in stored order (scipy's unstable sort of
        # a long row may add them in another, a difference in the last bit)
        order = np.lexsort((indices, rows))
        rows, indices, data = rows[order], indices[order], data[order]
        first = np.ones(rows.shape[0], bool)
        first[1:] = (rows[1:] != rows[:-1]) | (indices[1:] != indices[:-1])
        starts = np.flatnonzero(first)
        # bincount adds in order (reduceat may add pairwise)
        self.data = np.bincount(np.cumsum(first) - 1, weights=data,
                                minlength=starts.shape[0]).astype(data.dtype, copy=False)
        self.indices = np.ascontiguousarray(indices[starts])
        counts = np.bincount(rows[starts], minlength=self.shape[0])
        indptr = np.zeros(self.shape[0] + 1, self.indptr.dtype)
        np.cumsum(counts, out=indptr[1:])
        self.indptr = indptr
        self.has_canonical_format = True

    # ---- selection ---------------------------------------------------------------------
    def __getitem__(self, key):
        if isinstance(key, tuple):
            return self._first_columns(key)
        if isinstance(key, (int, np.integer)):
            row = int(key) + (self.shape[0] if key < 0 else 0)
            if not 0 <= row < self.shape[0]:
                raise IndexError(f"row index ({int(key)}) out of range")
            key = slice(row, row + 1)
        if isinstance(key, slice):
            start, stop, step = key.indices(self.shape[0])
            if step == 1:
                stop = max(start, stop)
                a, b = self.indptr[start], self.indptr[stop]
                return CSR(self.data[a:b], self.indices[a:b],
                           self.indptr[start:stop + 1] - a, (stop - start, self.shape[1]),
                           self.has_canonical_format)
            key = np.arange(start, stop, step)
        return self._take_rows(np.asarray(key))

    def _take_rows(self, rows):
        if rows.dtype == bool:
            if rows.shape != (self.shape[0],):
                raise IndexError(f"boolean index of shape {rows.shape} for "
                                 f"{self.shape[0]} rows")
            rows = np.flatnonzero(rows)
        if rows.ndim != 1 or (rows.size and rows.dtype.kind not in "iu"):
            raise IndexError("rows are selected by an int, a slice, or a 1-d integer or "
                             "boolean array")
        rows = rows.astype(np.intp, copy=False)  # an empty list is float
        rows = np.where(rows < 0, rows + self.shape[0], rows)
        if rows.size and (rows.min() < 0 or rows.max() >= self.shape[0]):
            raise IndexError(f"row index out of range for {self.shape[0]} rows")
        starts, stops = self.indptr[rows], self.indptr[rows + 1]
        counts = stops - starts
        indptr = np.zeros(rows.shape[0] + 1, self.indptr.dtype)
        np.cumsum(counts, out=indptr[1:])
        # entry k of the selection is entry starts[r] + (k - indptr[r]) of X
        take = np.repeat(starts - indptr[:-1], counts) + np.arange(indptr[-1])
        return CSR(self.data[take], self.indices[take], indptr,
                   (rows.shape[0], self.shape[1]), self.has_canonical_format)

    def _first_columns(self, key):
        """``X[:, :n]``: the entries of the first n columns (the only column selection)."""
        rows, cols = key if len(key) == 2 else (None, None)
        if (rows != slice(None) or not isinstance(cols, slice) or cols.start not in (None, 0)
                or cols.step not in (None, 1)):
            raise IndexError(f"CSR selects columns as X[:, :n] only, not {key!r}")
        n = min(self.shape[1], self.shape[1] if cols.stop is None else max(cols.stop, 0))
        start, stop = self.indptr[0], self.indptr[-1]
        keep = self.indices[start:stop] < n
        counts = np.bincount(self._rows_of_entries()[keep], minlength=self.shape[0])
        indptr = np.zeros(self.shape[0] + 1, self.indptr.dtype)
        np.cumsum(counts, out=indptr[1:])
        return CSR(self.data[start:stop][keep], self.indices[start:stop][keep], indptr,
                   (self.shape[0], n), self.has_canonical_format)

    # ---- products ----------------------------------------------------------------------
    def __matmul__(self, other):
        """X @ W for a dense W of shape (n_columns,) or (n_columns, K)."""
        W = np.asarray(other)
        if W.ndim not in (1, 2) or W.shape[0] != self.shape[1]:
            raise ValueError(f"dimension mismatch: X is {self.shape}, W {W.shape}")
        if _compiled(self, W):
            from onlinepgs._core._products import csr_times_dense

            # a model's coef_.T is in Fortran order: one copy in C order, so that an
            # entry's K weights lie side by side
            out = csr_times_dense(self.indptr, self.indices, self.data,
                                  np.ascontiguousarray(W.reshape(W.shape[0], -1)))
            return out.reshape(-1) if W.ndim == 1 else out
        start, stop = self.indptr[0], self.indptr[-1]
        return _sums(self._rows_of_entries(), self.data[start:stop],
                     W[self.indices[start:stop]], self.shape[0])


class _Transposed:
    """``X.T`` of a `CSR`, for ``X.T @ U`` (U dense, one row per row of X)."""

    def __init__(self, X):
        self.X = X
        self.shape = (X.shape[1], X.shape[0])

    def __matmul__(self, other):
        X, U = self.X, np.asarray(other)
        if U.ndim not in (1, 2) or U.shape[0] != X.shape[0]:
            raise ValueError(f"dimension mismatch: X.T is {self.shape}, U {U.shape}")
        if _compiled(X, U):
            from onlinepgs._core._products import csr_transposed_times_dense

            out = csr_transposed_times_dense(X.indptr, X.indices, X.data,
                                             np.ascontiguousarray(U.reshape(U.shape[0], -1)),
                                             X.shape[1])
            return out.reshape(-1) if U.ndim == 1 else out
        start, stop = X.indptr[0], X.indptr[-1]
        return _sums(X.indices[start:stop], X.data[start:stop], U[X._rows_of_entries()],
                     X.shape[1])


def _compiled(X, W):
    """Whether the compiled products take X and the dense W (`_core._products`: float64
    values, 32- or 64-bit indices, contiguous arrays of X): the same sums as `_sums`, in
    compiled code (a 20-class `predict` of 4,780 rows took 0.1 s in `_sums`, 5 ms so)."""
    return (X.data.dtype == np.float64 and W.dtype == np.float64
            and X.data.flags.c_contiguous
            and all(a.dtype in (np.int32, np.int64) and a.flags.c_contiguous
                    for a in (X.indices, X.indptr)))


def _sums(bins, data, picked, n):
    """out[b] = sum of data[k] * picked[k] over the entries k of bin b, in stored order
    from 0 (np.bincount adds in order: the sums of scipy's CSR/CSC products)."""
    dtype = np.result_type(data.dtype, picked.dtype)
    if picked.ndim == 1:
        return np.bincount(bins, weights=data * picked, minlength=n).astype(dtype, copy=False)
    out = np.empty((n, picked.shape[1]), dtype)
    for k in range(picked.shape[1]):
        out[:, k] = np.bincount(bins, weights=data * picked[:, k], minlength=n)
    return out
