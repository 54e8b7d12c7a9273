"""A PGS learner's state over the columns its rows reach, not over the width.

A learner that first trains on a sparse matrix of `MIN_WIDTH` columns or more (hashed
features, records and events too: ``n_bits`` 21 and more, ``onlinepgs train -b 21`` and
more) keeps a map from
column to slot (`onlinepgs._core._columns.ColumnMap`): each column gets the next slot the
first time a row reaches it, each chunk's columns are given to the core as their slots,
and the solver states (a race's runs share the map: they see the same rows) are as wide
as the slots seen, grown by doubling. A weight depends on its coordinate's own fields and
the state's scalars only, so the steps are those of a state over the width, coordinate
for coordinate; only the sums over every coordinate (the l_p norm's recounts, p < 2 and
the ball) take them in slot order.

Everything that reads the state in columns goes through here: the model read out
(`model_at_columns`), a few rows scored from the state (`slots_of_rows`), a model file's
state rows (`onlinepgs.model_io.staterows`, stored at their columns: the file an
unmapped state of the same steps writes), a batch that ``onlinepgs serve --learn`` tests
then trains (`slots_of_batch`), an event (the per-event path's row maps its own entries,
`onlinepgs._core._event.EventRow`), and Dask's lanes, which run the core on columns and
take the state expanded to the width first (`expanded`: the same state, each slot's
rows at its column). docs/design/core.md, "A state over the columns seen".
"""
import numpy as np

from onlinepgs._core._columns import ColumnMap
from onlinepgs._csr import like
from onlinepgs._csr import sparse as sp
from onlinepgs._layout import StateLayout
from onlinepgs.features import CrossedRows

__all__ = ["MIN_WIDTH", "ColumnMap", "capacity", "columns_of", "coordinates", "expanded",
           "grow_states", "maps", "mapped", "model_at_columns", "slots_of_batch",
           "slots_of_rows", "span_at_width", "state_dim"]

# a learner whose first matrix is this wide or wider maps its columns: at 2^20 hashed
# columns a state over the width costs what one over the columns seen does (the click
# log of `bench/bench_core.py --columns-seen`), at 2^22 the races take 1.9-4.8x the
# time over the width, at 2^24 3.3-30x
MIN_WIDTH = 2**21


def columns_of(estimator):
    """(the column map of a learner whose states are over the columns its rows reach,
    its width), or (None, None)."""
    columns = estimator.__dict__.get("_columns")
    return (None, None) if columns is None else (columns, estimator.n_features_in_)


def state_dim(estimator):
    """The coordinates of a PGS learner's state over the width (as a file holds it)."""
    columns, width = columns_of(estimator)
    return int(estimator._state.dim) if columns is None else width + 1


def maps(X):
    """Whether a learner's first training call on X makes it keep a column map: a sparse
    matrix (records hashed into one, rows crossed in the pass) of `MIN_WIDTH` columns or
    more."""
    return (isinstance(X, CrossedRows) or sp.issparse(X)) and X.shape[1] >= MIN_WIDTH


def capacity(n_slots):
    """The width of a state that holds `n_slots` slots: a power of two (from 1,024),
    so that growing it copies each slot O(1) times."""
    return max(1024, 1 << max(0, int(n_slots) - 1).bit_length())


def mapped(X, columns):
    """X (CSR, or `CrossedRows` crossed into one) with its columns replaced by their slots
    in `columns` (new ones numbered in the order of X's entries), as wide as the slots;
    the entries' values and rows shared."""
    if isinstance(X, CrossedRows):
        X = X.to_csr()
    elif not sp.issparse(X):  # a dense chunk after a sparse first one
        X = sp.csr_matrix(X)
    X = X.tocsr()
    slots = columns.slots(np.ascontiguousarray(X.indices[:X.nnz]))
    return like(X, X.data[:X.nnz], slots, X.indptr, (X.shape[0], columns.n_slots))


def coordinates(columns, rows):
    """The state coordinates at the width of state rows `rows` (0, the intercept's, stays
    0; slot s's row s + 1 is its column's + 1)."""
    rows = np.asarray(rows, dtype=np.int64)
    out = np.zeros(rows.shape, dtype=np.int64)
    data = rows > 0
    out[data] = columns.columns()[rows[data] - 1] + 1
    return out


def span_at_width(columns):
    """The state's `span` over the width (1 + the largest coordinate the rows reach, the
    schedule of the l_p norm's recounts): where a state over the columns seen has slots'."""
    return 1 if columns.n_slots == 0 else int(columns.columns().max()) + 2


def slots_of_rows(X, columns):
    """Sparse X's rows over the slots of `columns` (the map unchanged): entries on a
    column no row has reached are left out (their weight is 0 in every problem)."""
    X = X.tocsr()
    slots = columns.find(np.ascontiguousarray(X.indices[:X.nnz]))
    keep = slots >= 0
    kept = np.zeros(X.nnz + 1, dtype=np.int64)
    np.cumsum(keep, out=kept[1:])
    indptr = kept[np.asarray(X.indptr, dtype=np.int64)]
    return like(X, X.data[:X.nnz][keep], slots[keep].astype(np.int32), indptr,
                (X.shape[0], max(1, columns.n_slots)))


def slots_of_batch(data, indices, indptr, trained, columns):
    """A CSR batch (its arrays; `indptr` int64) over the slots of `columns`, for a pass
    that tests every row and trains the rows flagged in `trained`: a trained row's
    columns get their slots (new ones in the order of the entries, as `mapped` gives
    them), a row only tested looks its columns up, and an entry on a column no trained
    row reaches is left out (its weight is 0 in every problem, as at a column of the
    width no step has reached). The rows keep their numbers; returns (data, slots
    (int32), indptr), each entry where it was in its row (`onlinepgs serve --learn`)."""
    n = len(indptr) - 1
    end = int(indptr[n])
    rows = np.repeat(np.arange(n), np.diff(indptr))
    on = np.asarray(trained, dtype=bool)[rows]
    cols = np.ascontiguousarray(indices[:end])
    slots = np.empty(end, dtype=np.int64)
    slots[on] = columns.slots(np.ascontiguousarray(cols[on]))
    slots[~on] = columns.find(np.ascontiguousarray(cols[~on]))
    keep = slots >= 0
    kept = np.zeros(end + 1, dtype=np.int64)
    np.cumsum(keep, out=kept[1:])
    return (np.ascontiguousarray(data[:end][keep]), slots[keep].astype(np.int32),
            kept[np.asarray(indptr, dtype=np.int64)])


def grow_states(states, columns):
    """Each solver state of a learner over `columns` made as wide as its slots (by the
    doubling `capacity`, as a training call grows them; never shrunk)."""
    width = capacity(columns.n_slots)
    for state in states:
        if columns.n_slots > state.dim - 1:
            state.ensure_dim(width)


def model_at_columns(coef, scales, columns, width):
    """The read-out of a state over slots (`coef` (K, slots) dense or `SparseWeights`, the
    adaptive geometry's `scales` whole over 1 + slots or as pairs, or None) at the
    columns: (`SparseWeights` (K, width), scale pairs or None)."""
    from onlinepgs._weights import SparseWeights

    by_slot = columns.columns()
    n = by_slot.size
    if not isinstance(coef, SparseWeights):
        coef = SparseWeights.from_dense(np.asarray(coef)[:, :n])
    indptr, slot_of, data = coef.indptr, coef.indices, coef.data
    K = len(indptr) - 1
    cols = by_slot[np.asarray(slot_of, dtype=np.int64)]
    order = np.lexsort((cols, np.repeat(np.arange(K), np.diff(indptr))))
    index_type = np.int32 if width <= 2**31 - 1 else np.int64
    weights = SparseWeights(indptr, cols[order].astype(index_type), np.asarray(data)[order],
                            (K, width))
    if scales is None:
        return weights, None
    if isinstance(scales, tuple):
        at, values = (np.asarray(a) for a in scales)
    else:
        scales = np.asarray(scales)[:1 + n]
        at = np.flatnonzero(scales != 1.0)
        values = scales[at]
    at = coordinates(columns, at)
    order = np.argsort(at, kind="stable")
    return weights, (at[order], np.asarray(values, dtype=np.float64)[order])


def expanded(state, columns, width):
    """`state` (over the slots of `columns`) over the width: a new state whose coordinate
    column + 1 holds each slot's rows (every other row zero), its scalars the same: the
    state an unmapped learner of the same steps holds (`PGSState.from_dict`, as a model
    file loads one)."""
    from onlinepgs._core import PGSState

    d = state.to_dict()
    dim, new_dim = int(d["dim"]), int(width) + 1
    n = min(columns.n_slots, dim - 1)
    at = coordinates(columns, np.arange(1 + n))
    for key in StateLayout.of(d["config"]).row_arrays(dim):
        rows = d[key]
        full = np.zeros((new_dim,) + rows.shape[1:], dtype=rows.dtype)
        full[at] = rows[:1 + n]
        d[key] = full
    d["dim"], d["span"] = new_dim, span_at_width(columns)
    return PGSState.from_dict(d)
