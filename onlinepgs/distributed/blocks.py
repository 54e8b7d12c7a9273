"""Blocks of rows, validated and encoded for the core (`finish_block`).

Every source turns what it reads (a dask array's block, a bag partition's lines, a
file's lines) into a `Block` here: CSR float64 or dense C-contiguous rows, finite, within
the model's width budget, with the core's targets, weights and row power sums; a bad
row is named by the source's ``where(row)``.
"""
import numpy as np
import scipy.sparse as sp

from onlinepgs._checks import RowError, check_weight_sum, row_of_entry
from onlinepgs.distributed import _estimator as estimator_api

__all__ = ["Block", "all_finite", "block_meta", "finish_block"]


class Block:
    """Rows of a partition, ready for the core: validated, encoded, canonical."""

    __slots__ = ("X", "y", "sw", "rps", "n_rows", "part", "row0", "next", "name", "line0",
                 "width", "shared_bytes")

    def __sizeof__(self):
        # Dask's scheduler places a lane's task by the bytes of its inputs: without the
        # rows' size it would move blocks of tens of MB between workers as if free
        return object.__sizeof__(self) + self.nbytes()

    def nbytes(self):
        """Bytes of the rows as the core takes them (entries, indices, targets, weights)."""
        return sum(a.nbytes for a in (*_row_arrays(self.X), self.y, self.sw, self.rps)
                   if a is not None)

    def own_bytes(self):
        """Bytes the read made: all but the rows it took as they were given (views)."""
        return self.nbytes() - self.shared_bytes

    def describe(self, row):
        where = f"partition {self.part}, row {self.row0 + row}"
        return where if self.name is None else f"{where} ({self.name})"


def block_meta(block):
    return (block.n_rows, block.next is not None, block.width, block.nbytes(),
            block.own_bytes())


# Worker processes of dask.distributed run with MALLOC_TRIM_THRESHOLD_=65536, so glibc
# maps every large allocation afresh and each temporary the size of a block costs its page
# faults (validation took 2.5x its time in the driver's process): the checks below (and
# the estimator's encoding of two classes, `_binary_targets`) make none on the way that
# finds nothing wrong.
def all_finite(a):
    """Whether every entry of a float array is finite: its sum is, unless an entry is not
    (or finite entries overflow, which the entry-wise check then tells apart)."""
    with np.errstate(over="ignore", invalid="ignore"):
        total = np.add.reduce(a, axis=None)
    return bool(np.isfinite(total)) or bool(np.isfinite(a).all())


def _row_arrays(X):
    """The arrays that hold rows X: a CSR matrix's three, or the dense array."""
    return (X.data, X.indices, X.indptr) if sp.issparse(X) else (X,)


def _shared_bytes(X, given):
    """Bytes of the rows X that are those of the input `given` (not a converted copy)."""
    # rows are taken as they were given only from CSR or dense input (X is one of them);
    # any other sparse format (COO, LIL, ...) has been converted
    if not ((sp.issparse(X) and getattr(given, "format", None) == "csr")
            or (isinstance(X, np.ndarray) and isinstance(given, np.ndarray))):
        return 0
    return sum(a.nbytes for a, b in zip(_row_arrays(X), _row_arrays(given))
               if np.may_share_memory(a, b))


def _refuse_complex(X, where):
    """Complex rows are refused, as partial_fit refuses them (a cast drops their
    imaginary parts with a mere warning)."""
    if np.issubdtype(X.dtype, np.complexfloating):
        raise ValueError(f"Complex data not supported: a block of X is {X.dtype} "
                         f"({where(0)})")


def _n_problems(spec):
    """The problems of the model a spec trains: one, or one per class beyond two."""
    classes = estimator_api.classes_of(spec)
    return 1 if classes is None or len(classes) == 2 else len(classes)


def finish_block(spec, X, y, sw, part, row0, where):
    """Validate and encode rows for the core (the estimator's own checks and encoding)."""
    block = Block()
    given = X
    if sp.issparse(X) or hasattr(X, "to_scipy_sparse"):
        if not sp.issparse(X):
            X = X.to_scipy_sparse()
        _refuse_complex(X, where)
        X = estimator_api.as_matrix(spec, X)
        # a text partition with no rows (or no features) has no columns: 0 rows to train
        X = estimator_api.check_rows(X)
        if not all_finite(X.data):
            bad = np.flatnonzero(~np.isfinite(X.data))
            row = row_of_entry(X, bad[0])
            raise ValueError(f"X contains NaN or infinity at {where(row)}")
        if not X.has_canonical_format or not all(a.flags.c_contiguous
                                                 for a in _row_arrays(X)):
            # the core takes canonical rows in contiguous arrays (a block's arrays may be
            # strided views: the .real of complex ones, say)
            X = X.copy()
            X.sum_duplicates()
    elif isinstance(X, np.ndarray):
        if X.ndim != 2:
            raise ValueError(f"a block of X has {X.ndim} dimensions ({where(0)})")
        _refuse_complex(X, where)
        X = estimator_api.as_matrix(spec, X)
        if sp.issparse(X):  # hashing folds dense rows into sparse columns
            return finish_block(spec, X, y, sw, part, row0, where)
        X = np.ascontiguousarray(X, dtype=np.float64)
        if not all_finite(X):
            bad = np.flatnonzero(~np.isfinite(X).all(axis=1))
            raise ValueError(f"X contains NaN or infinity at {where(int(bad[0]))}")
    else:
        raise TypeError(f"a block of X is a {type(X).__name__} ({where(0)}); expected a "
                        "NumPy array or a scipy.sparse matrix")
    # the model's width budget (max_model_bytes), refused here where the row has a name,
    # before a lane's state grows to it
    estimator_api.check_block_width(spec, X, _n_problems(spec), where)
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(f"a block has {X.shape[0]} rows but labels of shape {y.shape} "
                         f"({where(0)})")
    if y.dtype.kind == "f" and not all_finite(y):
        row = int(np.flatnonzero(~np.isfinite(y))[0])
        raise ValueError(f"y contains NaN or infinity at {where(row)}: {y[row].item()!r}")
    try:
        y_core = estimator_api.encode_targets(spec, X, y)
    except ValueError as exc:
        if estimator_api.is_classifier(spec):  # a label outside the classes, said where
            classes = estimator_api.classes_of(spec)
            known = np.isin(y, classes)
            if not known.all():
                row = int(np.flatnonzero(~known)[0])
                raise ValueError(f"label {y[row].item()!r} at {where(row)} is not one of "
                                 f"the classes {classes.tolist()}") from None
        raise ValueError(f"{exc} (rows from {where(0)})") from None
    if sw is None:
        sw = np.ones(X.shape[0])
    else:
        sw = np.asarray(sw, dtype=np.float64)
        if sw.shape != (X.shape[0],):
            raise ValueError(f"sample_weight has {sw.shape[0]} rows where X has "
                             f"{X.shape[0]} ({where(0)})")
        bad = np.flatnonzero(~np.isfinite(sw) | (sw < 0))
        if bad.size:
            raise ValueError(f"sample_weight must be finite and >= 0; {where(int(bad[0]))} "
                             f"has {sw[bad[0]]!r}")
        sw = np.ascontiguousarray(sw)
        try:  # a block's own sum (a lane's state adds them up as it trains)
            check_weight_sum(sw)
        except RowError as exc:
            raise ValueError(exc.worded(where)) from None
    block.X, block.y, block.sw = X, np.ascontiguousarray(y_core, dtype=np.float64), sw
    block.shared_bytes = _shared_bytes(X, given)
    block.rps = estimator_api.row_power_sums(spec, X)
    block.n_rows = X.shape[0]
    block.width = X.shape[1]
    block.part, block.row0 = part, row0
    block.next, block.name, block.line0 = None, None, None
    return block
