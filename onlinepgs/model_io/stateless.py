"""PGS model files without the solver state: the weights only (``save_model(...,
state=False)``, ``onlinepgs train --no-state``).

Such a file is for deployment: it predicts, evaluates, certifies (``gap``) and is
described by ``info`` as the full file is, but it cannot be trained further (resumed,
``partial_fit``, ``-i``): the solver state that training continues from is not in it.
Its header's state is ``{"solver": "pgs-weights", "sigma", "l1", "radius"}`` (the
model's values, e.g. the sigma a race chose) plus the weights' storage entry, its arrays
those of an SDCA model: ``state/coef`` dense or ``state/coef_indptr``, ``_indices``,
``_data`` sparse when that is smaller (`onlinepgs.model_io.weights`), and
``state/intercept_weight``, and for a model of the adaptive geometry its scales
(``state/scale_index``: the coordinates whose scale is not 1, the intercept's 0;
``state/scale_value``: those scales); the header's ``online_stats`` are the statistics at saving,
returned by ``online_stats_`` as they were. It loads as the same estimator class with a
`~onlinepgs.model.LinearModel` (sparse when stored sparse) in place of the solver state.
An older onlinepgs refuses it (the state is not one it reads), never misreads it.
"""
import math

import numpy as np

from onlinepgs.model import LinearModel
from onlinepgs.model_io.errors import ModelFileError, short

__all__ = ["NO_STATE", "SCALE_ARRAYS", "add_scales", "read_scales", "stateless_header",
           "stateless_model", "stateless_inconsistency"]

SCALE_ARRAYS = ("state/scale_index", "state/scale_value")

NO_STATE = ("it was saved without its solver state (save_model(..., state=False), train "
            "--no-state) or loaded without it (load_learner(..., state=False)): it predicts "
            "but cannot be trained further; fit it again on the data, or load a file with "
            "its state whole")


def stateless_header(model):
    """The header's state scalars of a model saved without its solver state."""
    return {"solver": "pgs-weights", "sigma": float(model.sigma),
            "l1": float(getattr(model, "l1", 0.0)), "radius": model.radius}


def add_scales(scales, add_array):
    """Write the adaptive geometry's scales that are not 1 (`scales`: their
    (coordinates, values), `LinearModel.scale_pairs`): the coordinates, increasing, the
    intercept's 0, and the values. Nothing for the global geometry (None)."""
    if scales is None:
        return
    add_array(SCALE_ARRAYS[0], np.asarray(scales[0], dtype=np.int64))
    add_array(SCALE_ARRAYS[1], np.asarray(scales[1], dtype=np.float64))


def read_scales(arrays, n_features, path):
    """The scales of a file's adaptive model that are not 1, (coordinates, values) as
    `LinearModel` holds them, or None (the global geometry: no scale arrays); damaged
    arrays are refused, naming them."""
    present = [name in arrays for name in SCALE_ARRAYS]
    if not any(present):
        return None
    if not all(present):
        missing = SCALE_ARRAYS[present.index(False)]
        raise ModelFileError(path, f"missing array {missing}")
    index, value = (arrays[name] for name in SCALE_ARRAYS)
    if (index.dtype != np.int64 or value.dtype != np.float64 or index.ndim != 1
            or index.shape != value.shape):
        raise ModelFileError(path, f"arrays {SCALE_ARRAYS[0]} and {SCALE_ARRAYS[1]} have "
                                   f"dtypes {index.dtype.str}, {value.dtype.str} and shapes "
                                   f"{index.shape}, {value.shape}: expected int64 and "
                                   "float64 of one length")
    if index.size and not (index[0] >= 0 and index[-1] <= n_features
                           and (np.diff(index) > 0).all()):
        raise ModelFileError(path, f"damaged model: array {SCALE_ARRAYS[0]} is not strictly "
                                   f"increasing coordinates in [0, {n_features}]")
    if not (np.isfinite(value).all() and (value > 0).all()):
        raise ModelFileError(path, f"damaged model: array {SCALE_ARRAYS[1]} holds a scale "
                                   "that is not a finite positive number")
    return index, value


def stateless_model(estimator, weights, attributes, header, path):
    """The `LinearModel` of a file without solver state (`estimator` has its parameters
    and fitted attributes set), its saved statistics kept for ``online_stats_``."""
    state = header["state"]
    values = {}
    for key in ("sigma", "l1", "radius"):
        value = state.get(key)
        if not (value is None and key == "radius") and not (
                isinstance(value, (int, float)) and not isinstance(value, bool)
                and math.isfinite(value) and value >= 0):
            raise ModelFileError(path, f"malformed header: the model's {key} {short(value)} "
                                       "is not a non-negative number")
        values[key] = value
    fitted = estimator._state_params
    model = LinearModel(
        weights.coef, weights.intercept_weight,
        classes=attributes.get("classes_"), loss=estimator.loss, epsilon=estimator.epsilon,
        p=estimator.p, sigma=values["sigma"], l1=values["l1"], radius=values["radius"],
        fit_intercept=estimator.fit_intercept, intercept_scaling=estimator.intercept_scaling,
        n_bits=fitted.get("n_bits"), hash_seed=fitted.get("hash_seed", 0),
        n_features_in=attributes["n_features_in_"], solver="pgs",
        interactions=fitted.get("interactions"),
        multi_class=fitted.get("multi_class", "ovr") if estimator._classifier else "ovr",
        scales=weights.scales)
    if model.has_scales != (getattr(estimator, "geometry", "global") == "adaptive"):
        raise ModelFileError(path, "inconsistent model: a model of the adaptive geometry "
                                   "has scales (state/scale_index, state/scale_value), one "
                                   "of the global geometry none")
    stats = header.get("online_stats")
    if not isinstance(stats, dict):
        raise ModelFileError(path, "malformed header: online_stats is not an object")
    estimator._saved_stats = stats
    return model


def stateless_inconsistency(estimator):
    """Why a PGS model without its solver state contradicts itself (one line), or None."""
    model = estimator._state
    if estimator.n_features_in_ > model.n_features:
        return (f"n_features_in_={estimator.n_features_in_} but the weights have "
                f"{model.n_features} features")
    n_bits = estimator._state_params.get("n_bits")
    if n_bits is not None and model.n_features != 2**n_bits:
        return f"n_bits={n_bits} hashes into {2**n_bits} features, the weights have " \
               f"{model.n_features}"
    coef = model.coef_sparse.data if model.is_sparse else model.coef
    for key, arr in (("coef", coef), ("intercept_weight", model.intercept_weight)):
        if not np.isfinite(arr).all():
            return f"the model's {key} holds {float(arr[~np.isfinite(arr)][0])} (not finite)"
    return None
