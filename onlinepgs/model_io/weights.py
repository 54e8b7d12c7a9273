"""A model file's weights, dense or sparse, and the count of their non-zeros.

An SDCA model's weights are its state: ``state/coef`` (K, n_features) dense, or, when
that is smaller, their non-zeros in compressed sparse rows: ``state/coef_indptr``
(K + 1,), ``state/coef_indices`` (nnz,) and ``state/coef_data`` (nnz,), the header's
state saying ``"coef": {"storage": "sparse", "shape": [K, n_features]}``. A dense file is
byte for byte what earlier versions wrote; a sparse one is refused by them (an
unexpected array), never misread. Sparse arrays are checked (lengths, indices in
range and strictly increasing in each row, finite weights) before they are used and
load into a sparse `onlinepgs.model.LinearModel`: a 2**24 x 20 model with 1% non-zeros
stays about 40 MB on loading, never becomes its 2.7 GB dense array.

A PGS model's weights are computed from its solver state (kept as it is: training
resumes from it), so the header carries their count, ``"weights": {"n_nonzero": N,
"n_weights": K * n_features}`` (informational; readers ignore it), for ``onlinepgs info``,
which counts without numpy. `count_plain` counts an SDCA file's from its arrays' bytes.
"""
import array
import math
import sys

from onlinepgs.model_io.errors import ModelFileError  # no numpy: `info` counts without it

__all__ = ["add_sdca_weights", "build_weights_state", "read_sdca_coef", "sparse_is_smaller", "SPARSE_ARRAYS", "pgs_count", "count_plain"]

SPARSE_ARRAYS = ("state/coef_indptr", "state/coef_indices", "state/coef_data")
# each further .npy entry costs its zip headers (local and central, with the name) and
# the .npy header: about 250 bytes; counted so that "smaller" is the file's size
_ENTRY_BYTES = 250


def _sparse_bytes(K, d, nnz):
    index = 4 if d <= 2**31 - 1 else 8
    return 8 * (K + 1) + (index + 8) * nnz + 2 * _ENTRY_BYTES


def sparse_is_smaller(K, d, nnz):
    """Whether K x d weights with nnz non-zeros take fewer bytes in a file sparse."""
    return _sparse_bytes(K, d, nnz) < 8 * K * d


def add_sdca_weights(model, add_array):
    """Write an SDCA model's weights with ``add_array(name, array)``, sparse when that is
    smaller than dense; returns the state's header entries beside ``"solver"``."""
    K, d = model.n_problems, model.n_features
    sparse = model.coef_sparse  # the held one, or the dense weights' non-zeros
    if not sparse_is_smaller(K, d, sparse.nnz):
        add_array("state/coef", model.coef)
        return {}
    for name, values in zip(SPARSE_ARRAYS, (sparse.indptr, sparse.indices, sparse.data)):
        add_array(name, values)
    return {"coef": {"storage": "sparse", "shape": [K, d]}}


def build_weights_state(header, arrays, path):
    """The weights that are a file's state (an SDCA model's; a PGS model's saved without
    its solver state, "pgs-weights", with its scales if it is of the adaptive geometry):
    ``state/coef`` (K, n_features), ``state/intercept_weight`` (K,), K problems, checked,
    as a namespace of coef, intercept_weight, n_problems and scales (None where there are
    none); `schema.build` makes it the estimator's LinearModel."""
    from types import SimpleNamespace

    import numpy as np

    from onlinepgs.model_io.stateless import SCALE_ARRAYS, read_scales

    if header["state"].get("solver") not in ("sdca", "pgs-weights"):
        raise ModelFileError(path, f"malformed header: an {header['estimator']} model's state "
                                   "is not marked solver 'sdca'")
    weights_only = header["state"].get("solver") == "pgs-weights"
    names = {"state/coef", "state/intercept_weight", *SPARSE_ARRAYS,
             *(SCALE_ARRAYS if weights_only else ())}
    for entry in header["arrays"]:
        if entry["name"].startswith("state/") and entry["name"] not in names:
            raise ModelFileError(path, f"unexpected array {entry['name']} (not part of an "
                                       "SDCA model)")
    if "state/intercept_weight" not in arrays:
        raise ModelFileError(path, "missing array state/intercept_weight")
    coef = read_sdca_coef(header["state"], arrays, path)  # dense, or sparse and checked
    w0 = arrays["state/intercept_weight"]
    if coef.dtype != np.float64 or w0.dtype != np.float64 or len(coef.shape) != 2 or \
            w0.shape != (coef.shape[0],) or coef.shape[0] < 1:
        raise ModelFileError(path, f"array state/coef has dtype {coef.dtype.str} and shape "
                                   f"{coef.shape}, state/intercept_weight {w0.dtype.str} and "
                                   f"{w0.shape}: expected float64 (K, n_features) and (K,)")
    scales = read_scales(arrays, coef.shape[1], path) if weights_only else None
    return SimpleNamespace(coef=coef, intercept_weight=w0, n_problems=coef.shape[0],
                           scales=scales)


def read_sdca_coef(state_json, arrays, path):
    """The weights of an SDCA file: a (K, n_features) float64 array or `SparseWeights`,
    checked; a damaged file is refused naming the array and the reason."""
    storage = state_json.get("coef")
    if storage is None:
        if "state/coef" not in arrays:
            raise ModelFileError(path, "missing array state/coef")
        return arrays["state/coef"]
    if not (isinstance(storage, dict) and storage.get("storage") == "sparse"
            and isinstance(storage.get("shape"), list) and len(storage["shape"]) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in storage["shape"])):
        raise ModelFileError(path, f"malformed header: the state's coef entry {storage!r:.80} "
                                   "is not {\"storage\": \"sparse\", \"shape\": [K, d]}")
    if "state/coef" in arrays:
        raise ModelFileError(path, "unexpected array state/coef: the weights are stored sparse")
    for name in SPARSE_ARRAYS:
        if name not in arrays:
            raise ModelFileError(path, f"missing array {name}")
    import numpy as np

    from onlinepgs._weights import SparseWeights

    indptr, indices, data = (arrays[name] for name in SPARSE_ARRAYS)
    if data.dtype != np.float64:
        raise ModelFileError(path, f"array state/coef_data has dtype {data.dtype.str}, "
                                   "expected float64")
    try:
        return SparseWeights(indptr, indices, data, storage["shape"],
                             where="the sparse weights (state/coef_*)")
    except ValueError as exc:
        raise ModelFileError(path, f"damaged weights: {exc}") from None


def pgs_count(model):
    """The header's ``"weights"`` entry of a PGS model."""
    return {"n_nonzero": model.n_nonzero, "n_weights": model.n_problems * model.n_features}


def count_plain(raw, kept):
    """(non-zero weights, weights) of a file from its header and the plain bytes of its
    weight arrays (`onlinepgs.model_io.container.read_plain` with keep=`plain_keep`),
    without numpy; None when they are not there (an older PGS file: ask the model)."""
    entry = raw.get("weights")
    if isinstance(entry, dict) and all(isinstance(entry.get(k), int)
                                       for k in ("n_nonzero", "n_weights")):
        return entry["n_nonzero"], entry["n_weights"]
    state = raw.get("state") or {}
    sparse = state.get("coef")
    name = "state/coef_data" if sparse is not None else "state/coef"
    if state.get("solver") != "sdca" or name not in kept or kept[name][0] != "<f8":
        return None
    dtype, shape, data = kept[name]
    if sparse is not None:
        shape = sparse.get("shape") if isinstance(sparse, dict) else None
        if not (isinstance(shape, list) and len(shape) == 2
                and all(isinstance(v, int) for v in shape)):
            return None  # the loader words what is wrong
    total = math.prod(shape)
    if len(data) > 2**26:
        # a large dense array: numpy's import (~0.1 s) is nothing next to reading it, and
        # it counts ~30x faster than array.count (30 s for 2.7 GB under load)
        import numpy as np

        return int(np.count_nonzero(np.frombuffer(data, "<f8"))), total
    zeros, step = 0, 8 * 2**20  # in slices of 8 MiB: no second copy of the array
    for start in range(0, len(data), step):
        values = array.array("d")
        values.frombytes(data[start:start + step])
        if sys.byteorder != "little":
            values.byteswap()
        zeros += values.count(0.0)  # -0.0 == 0.0: both are zero
    return len(data) // 8 - zeros, total


plain_keep = ("state/coef", "state/coef_data")
