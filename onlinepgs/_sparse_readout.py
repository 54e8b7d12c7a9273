"""A PGS state's model read out at the coordinates its rows reached, not over its width.

A hashed model is wide (2**24 to 2**28 columns) and the rows of a stream reach a few of
its coordinates: a coordinate no row reached has every field of its state zero, and
weight 0 (checked: `empty_row_weight`). A weight depends on its coordinate's own fields
and the state's scalars only (`onlinepgs._core.PGSState.weights_of`), so the weights of
the coordinates whose fields are not all zero, read a slice of rows at a time, are the
model's, bit for bit: held as sparse rows (`onlinepgs._weights.SparseWeights`) with the
adaptive geometry's scales that are not 1, they cost O(coordinates reached), where the
dense read-out allocated and wrote the whole width (a 2**26-column model: 512 MB of
weights and 512 MB of scales a problem, 0.7-5 s of a command whose pass took 2 s).

Two readers share the pieces here: the estimator's model (`rows_read_out`, from the
state in memory, whose non-zero rows `onlinepgs._core._pages.nonzero_rows` finds in the
pages the state has) and a model file's reported model
(`onlinepgs.model_io.reported`, from the rows the file stores).
"""
import numpy as np

from onlinepgs._core._pages import nonzero_rows
from onlinepgs._layout import StateLayout, scales_of
from onlinepgs.model_io.weights import sparse_is_smaller

__all__ = ["READ_OUT_DENSE_BYTES", "SLICE_BYTES", "csr_of", "dense_of", "empty_row_weight",
           "rows_read_out", "scale_pairs_of"]

# a model whose dense weights take at most this is read out dense, as it always was
# (its coef_ an array kept, its scores on dense input by one BLAS product); above it,
# at the rows the state has when the sparse rows take fewer bytes (the file's rule)
READ_OUT_DENSE_BYTES = 2**24
SLICE_BYTES = 4 * 2**20  # of a state's rows read at a time (here, and from model files)


def empty_row_weight(state, n_fields):
    """Whether a coordinate whose fields are all zero has a non-zero weight in some
    problem of `state` (its scalars): never in a state of today's layouts, checked
    rather than assumed before reading a model at the rows alone."""
    K = state.n_problems
    with np.errstate(all="ignore"):
        W = state.weights_of(np.zeros((1, K, n_fields)), np.zeros((1, K)),
                             np.zeros((1, K), dtype=np.int64), intercept=False)
    return bool((W[0] != 0.0).any())


def csr_of(pieces, nnz, K, d):
    """The weights of the data's coordinates (1 .. d) as CSR arrays (indptr, indices,
    data) from ``(coordinates, weights)`` pieces in increasing coordinates, `nnz` the
    non-zeros of each problem (coordinate 0, the intercept's, left out)."""
    indptr = np.zeros(K + 1, dtype=np.int64)
    np.cumsum(nnz, out=indptr[1:])
    indices = np.empty(int(indptr[-1]), dtype=np.int32 if d <= 2**31 - 1 else np.int64)
    data = np.empty(int(indptr[-1]))
    filled = indptr[:-1].copy()
    for at, W in pieces:
        for c in range(K):
            keep = (W[:, c] != 0.0) & (at > 0)
            n = int(np.count_nonzero(keep))
            indices[filled[c]:filled[c] + n] = at[keep] - 1
            data[filled[c]:filled[c] + n] = W[keep, c]
            filled[c] += n
    return indptr, indices, data


def dense_of(pieces, K, d):
    """The weights of the data's coordinates as a read-only (K, d) array from
    ``(coordinates, weights)`` pieces (coordinate 0 left out)."""
    coef = np.zeros((K, d))
    for at, W in pieces:
        data = at > 0
        coef[:, at[data] - 1] = W[data].T
    coef.setflags(write=False)  # the model holds it as it is (LinearModel, no copy)
    return coef


def scale_pairs_of(pieces):
    """The adaptive geometry's scales that are not 1, (coordinates, values), from
    ``(coordinates, 1 / s_j)`` pieces (the field ``inv_scale`` of those coordinates)."""
    index, value = [np.zeros(0, dtype=np.int64)], [np.zeros(0)]
    for at, inv_scale in pieces:
        scales = scales_of(inv_scale)
        keep = scales != 1.0
        index.append(np.asarray(at, dtype=np.int64)[keep])
        value.append(scales[keep])
    return np.concatenate(index), np.concatenate(value)


def rows_read_out(state):
    """The model of `state` read at the coordinates its rows reached: ``(indptr,
    indices, data), intercept weights (K,), scale pairs or None``, the weights finite;
    None where the dense read-out is the one to take (a model of at most
    `READ_OUT_DENSE_BYTES` of weights, rows reached too many for sparse rows to be
    smaller, a coordinate of empty fields with a weight, a weight that is not finite:
    the dense read-out says which)."""
    dim, K = int(state.dim), int(state.n_problems)
    d = dim - 1
    if 8 * K * d <= READ_OUT_DENSE_BYTES:
        return None
    layout = StateLayout.of(state.config())
    keys = layout.row_arrays(dim)
    arrays = {key: getattr(state, key) for key in keys}
    rows = nonzero_rows(list(arrays.values()), dim)
    if rows.size == 0 or rows[0] != 0:  # the intercept's, whatever its fields
        rows = np.concatenate((np.zeros(1, dtype=np.int64), rows))
    block = arrays["block_a"]
    n_fields = block.shape[2]
    if not sparse_is_smaller(K, d, K * (rows.size - 1)) or empty_row_weight(state, n_fields):
        return None
    snaps = "snap_a" in arrays  # the random iterate's snapshots, a row a coordinate
    step = max(1, SLICE_BYTES // (8 * K * n_fields))
    inv_at = layout.offset("inv_scale")
    # one pass over the rows, a slice at a time; their weights are kept for the sparse
    # rows (K doubles a row reached: less than those rows' bytes, which are smaller)
    pieces, scale_pieces, nnz = [], [], np.zeros(K, dtype=np.int64)
    for start in range(0, rows.size, step):
        at = rows[start:start + step]
        fields = block[at]
        with np.errstate(all="ignore"):
            W = state.weights_of(fields, arrays["snap_a"][at] if snaps else None,
                                 arrays["snapv_a"][at] if snaps else None,
                                 intercept=start == 0)
        if not np.isfinite(W).all():
            return None
        pieces.append((at, W))
        nnz += np.count_nonzero(W[at > 0], axis=0)
        if inv_at is not None:
            scale_pieces.append((at, fields[:, 0, inv_at].copy()))  # not all the fields
    coef = csr_of(pieces, nnz, K, d)
    first = pieces[0][1][0]  # coordinate 0's weights: the intercept's
    return coef, first, None if inv_at is None else scale_pairs_of(scale_pieces)
