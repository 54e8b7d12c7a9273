"""The mapping between fitted models and the model file's header and arrays.

`encode` turns a fitted PGS or SDCA estimator (or its sklearn-free learner) into the
header (without checksum) and the arrays the container stores; `build` turns a verified
header and its arrays back into the estimator (or, with ``sklearn=False``, the learner),
checking every field against the class's parameters and the solver's configuration.
`_inconsistency` / `_sdca_inconsistency` are the rules both directions share, so that
`onlinepgs.model_io.save_model` never writes a file `onlinepgs.model_io.load_model`
refuses. Only `build` with ``sklearn=True`` imports scikit-learn.
"""
import math
import numbers

import numpy as np

from onlinepgs._checks import unique
from onlinepgs._options import settle_auto
from onlinepgs._core._pages import first_nonfinite
from onlinepgs._core._pgs import STATE_VERSION, PGSState
from onlinepgs import pgs as _pgs
from onlinepgs.model import LinearModel
from onlinepgs.model_io.container import FORMAT_NAME, FORMAT_VERSION
from onlinepgs.model_io.writing import storable_array
from onlinepgs.model_io.errors import ModelFileError, describe, short
from onlinepgs.model_io.jsonvalues import (class_weight_from_json as _class_weight_from_json,
                                            class_weight_to_json as _class_weight_to_json,
                                            to_json)
from onlinepgs._columns_seen import columns_of, state_dim
from onlinepgs.model_io.staterows import add_slots, add_state, expand, over_slots, state_template
from onlinepgs.model_io.stateless import (add_scales, stateless_header, stateless_inconsistency,
                                           stateless_model)
from onlinepgs.model_io.weights import add_sdca_weights, build_weights_state, pgs_count
from onlinepgs.pgs import PGSClassifierLearner, PGSRegressorLearner
from onlinepgs.sdca import SDCAClassifierLearner, SDCARegressorLearner

__all__ = ["encode", "build"]

# the learner (sklearn-free) of each estimator class name a file may hold
_LEARNERS = {cls._public_name: cls for cls in (PGSClassifierLearner, PGSRegressorLearner,
                                               SDCAClassifierLearner, SDCARegressorLearner)}
_ESTIMATORS = _LEARNERS  # the names, for messages
# SDCA attributes that are lists of arrays for K > 2 classes (one per problem): stored as
# JSON lists, restored as arrays of these dtypes
_LISTS_OF_ARRAYS = {"gap_history_": np.float64, "gap_epochs_": np.int64}


def _classes(sklearn):
    """Class name -> the class `load_model` (sklearn=True) or `load_learner` builds."""
    if not sklearn:
        return _LEARNERS
    from onlinepgs import estimators  # scikit-learn, only for the estimators

    return {name: getattr(estimators, name) for name in _LEARNERS}


def _is_sdca(cls):
    return issubclass(cls, (SDCAClassifierLearner, SDCARegressorLearner))


# private attributes that are part of a fitted model (public ones end in "_")
_PRIVATE_ATTRIBUTES = ("_state_params",)
# attributes rebuilt on load rather than stored
_NOT_STORED = ("_state", "_cache")
_REQUIRED_ATTRIBUTES = ("n_features_in_", "n_iter_", "t_", "_state_params")
_REQUIRED_SDCA_ATTRIBUTES = ("n_features_in_", "n_iter_", "dual_coef_", "primal_objective_",
                             "dual_objective_", "duality_gap_", "gap_history_", "gap_epochs_")


def _param_to_json(name, value, path):
    if name == "class_weight" and isinstance(value, dict):
        return _class_weight_to_json(value, path)
    if isinstance(value, (np.random.RandomState, np.random.Generator)):
        raise ModelFileError(path, f"parameter {name} is a {type(value).__name__} instance, "
                                   f"which a model file cannot store; set {name} to an int "
                                   f"seed (e.g. {name}=0) or None before fitting")
    if value is None or isinstance(value, (bool, np.bool_, str, numbers.Real)):
        return to_json(value, f"parameter {name}", path)
    if name in _LIST_PARAMS and isinstance(value, (list, tuple)) and all(
            isinstance(v, str) for v in value):
        return list(value)  # stored as a JSON list; loaded as a list
    raise ModelFileError(path, f"parameter {name}={short(value)} ({type(value).__name__}) "
                               "cannot be stored: only None, bool, int, float and str values")


# parameters not written at their default, so that a model without them is the file older
# versions read (a PGS model's l1 at 0 too, below); never classes (classes_ is kept)
_LIST_PARAMS = ("interactions",)
_OMITTED_AT = dict(interactions=None, multi_class="ovr", l1_geometry="auto", geometry="global",
                   eta="auto")
# parameters never written: how this machine runs the model, not what the model is (the
# threads of a race: the same model bit for bit whatever their number); a loaded model
# takes their defaults
_RUN_PARAMS = ("n_jobs",)


def encode(estimator, path, extra, with_state=True):
    """The header (without checksum) and the arrays of a fitted estimator or learner
    (a PGS one without its solver state, only its weights, if not `with_state`)."""
    name = getattr(estimator, "_public_name", None)
    learner = _LEARNERS.get(name)
    kind = type(estimator)
    if learner is None or not (kind is learner or (
            kind.__name__ == name and kind.__module__ == "onlinepgs.estimators")):
        raise ModelFileError(path, f"cannot save a {kind.__module__}.{kind.__name__}: only "
                                   f"{', '.join(_LEARNERS)} models (or their learners) can "
                                   "be saved")
    sdca = _is_sdca(kind)
    state = getattr(estimator, "_state", None)
    if not isinstance(state, LinearModel if sdca else (PGSState, LinearModel)):
        raise ModelFileError(path, f"this {name} is not fitted: call fit "
                                   f"{'' if sdca else 'or partial_fit '}before save_model")
    if extra is not None and not isinstance(extra, dict):
        raise ModelFileError(path, f"extra must be a dict or None, got {type(extra).__name__}")
    params = estimator.get_params(deep=False)
    omit = {**_OMITTED_AT, **({} if sdca else {"l1": 0})}  # SDCA's l1 is older
    json_params = {key: _param_to_json(key, value, path) for key, value in params.items()
                   if key != "classes" and key not in _RUN_PARAMS
                   and not (key in omit and value == omit[key])}

    arrays, table = {}, []

    def add_array(array_name, value):
        arr, entry = storable_array(array_name, value, path)
        arrays[array_name] = arr
        table.append(entry)

    attributes = {}
    for key, value in vars(estimator).items():
        if key in params or key in _NOT_STORED:
            continue
        if not _is_stored_attribute(key):
            continue
        if isinstance(value, np.ndarray):
            add_array(f"attributes/{key}", value)
        else:
            if key == "_state_params":
                value = {k: v for k, v in value.items() if not (k in omit and v == omit[k])}
            attributes[key] = to_json(value, f"attribute {key}", path, depth=3,
                                       arrays_as_lists=key in _LISTS_OF_ARRAYS)

    reason = (_sdca_inconsistency if sdca else _pgs_inconsistency)(estimator)
    if reason is not None:  # load_model would refuse the file
        raise ModelFileError(path, f"cannot save this {name}: {reason}")
    stateless = not sdca and (not with_state or isinstance(state, LinearModel))
    if sdca or stateless:
        # the model is the state: its weights (the intercept's as the constant feature's)
        model = state if sdca else estimator.model_
        state_json = {"solver": "sdca" if sdca else "pgs-weights",
                      **add_sdca_weights(model, add_array)}
        add_array("state/intercept_weight", model.intercept_weight)
        if stateless:
            state_json.update(to_json(stateless_header(model), "the model", path))
            add_scales(model.scale_pairs, add_array)
        n_features, stats = model.n_features, estimator.online_stats_ if stateless else {}
    else:
        state_json = add_state(state, add_array, "state/", lambda key, value: to_json(
            value, f"solver state {key}", path, depth=3), *columns_of(estimator))
        n_features, stats = state_dim(estimator) - 1, estimator.online_stats_
        add_slots(estimator, add_array)
    race = None if sdca or stateless else _encode_race(estimator, add_array, path)

    import onlinepgs  # late: the package may import this module while initialising

    header = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "onlinepgs_version": str(getattr(onlinepgs, "__version__", "unknown")),
        "estimator": name,
        "params": json_params,
        "attributes": attributes,
        "n_features": n_features,
        "dimension": n_features + 1,
        "state": state_json,
        "online_stats": to_json(stats, "online_stats_", path, arrays_as_lists=True, depth=2),
        "extra": to_json(extra if extra is not None else {}, "extra", path, depth=2),
        "arrays": table,
    }
    header.update({} if race is None else {"race": race})
    if not sdca:  # its weights come from the solver state: their count, for `info`
        header["weights"] = pgs_count(estimator.model_)
    return header, arrays


def _encode_race(estimator, add_array, path):
    """A racing model's (sigma or eta "auto") header entry "race": its schedule, the rows
    seen, the leader's run id (its state is the file's state/) and each other live run's
    state scalars and arrays (``race/run<id>_<key>``); None without a race."""
    race = getattr(estimator, "_race", None)
    if race is None:
        return None
    leader = next(rid for rid, st in race.states.items() if st is estimator._state)
    runs = {}
    for rid, st in sorted(race.states.items()):
        if rid == leader:
            continue
        runs[str(rid)] = add_state(st, add_array, f"race/run{rid}_",
                                   lambda k, v, rid=rid: to_json(
                                       v, f"race run {rid} state {k}", path, depth=5),
                                   *columns_of(estimator))
    return {"schedule": to_json(race.schedule.to_dict(), "sigma race schedule", path, depth=3),
            "n_rows": race.n_rows, "leader": leader, "runs": runs}


def _build_race(header, arrays, path, leader_state):
    """The `SigmaRace` of a racing model's header entry "race" (see `_encode_race`)."""
    from onlinepgs._eta_race import schedule_from_dict
    from onlinepgs._race import SigmaRace

    entry = header["race"]
    if not isinstance(entry, dict) or not isinstance(entry.get("runs"), dict):
        raise ModelFileError(path, "malformed header: 'race' is not an object with runs")
    try:
        schedule = schedule_from_dict(entry["schedule"])
        leader, n_rows = entry["leader"], entry["n_rows"]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ModelFileError(path, f"malformed header: the sigma race's schedule is not "
                                   f"readable ({describe(exc)})") from None
    states = {}
    names = {e["name"] for e in header["arrays"] if e["name"].startswith("race/")}
    for rid, scalars in entry["runs"].items():
        prefix = f"race/run{rid}_"
        mine = [e for e in header["arrays"] if e["name"].startswith(prefix)]
        names -= {e["name"] for e in mine}
        sub_header = {"state": scalars,
                      "arrays": [dict(e, name="state/" + e["name"][len(prefix):]) for e in mine]}
        sub_arrays = {"state/" + e["name"][len(prefix):]: arrays[e["name"]] for e in mine}
        states[int(rid)] = _build_state(sub_header, sub_arrays, path)
    if names:
        raise ModelFileError(path, f"unexpected array {sorted(names)[0]} (no run of the "
                                   "sigma race)")
    if not isinstance(leader, int) or leader in states:
        raise ModelFileError(path, f"malformed header: the sigma race's leader "
                                   f"{short(leader)} is not the file's state")
    states[leader] = leader_state
    if set(states) != set(schedule.runs) or not isinstance(n_rows, int) or n_rows < 0:
        raise ModelFileError(path, f"malformed header: the sigma race's runs "
                                   f"{sorted(states)} are not its schedule's "
                                   f"{sorted(schedule.runs)}")
    return SigmaRace(schedule, states, n_rows)


# solver state arrays that hold the weights and their scales: finite in any usable state
# (the running sums of the statistics may legitimately be infinite or unknown, NaN)
_FINITE_STATE_ARRAYS = ("block_a", "snap_a", "norm_a", "scale_a", "s_a", "cum_a", "rnd_s_a")


def _same(a, b):
    return a == b and isinstance(a, bool) == isinstance(b, bool)


def _inconsistency(estimator):
    """Why the parts of a fitted estimator contradict each other (one line), or None.

    The same rules refuse a file on loading and an estimator on saving, so that
    `save_model` never writes a file `load_model` refuses: the parameters that fix the
    solver state equal those it was trained with (``_state_params``) and those of its
    configuration; with ``n_bits`` the state has ``2**n_bits`` features, and never fewer
    than ``n_features_in_``; ``t_`` is the state's step count; the classes are distinct
    and sorted (as ``np.unique`` gives them, the order the labels are coded in) and
    match the state's problems; the weights' arrays are finite.
    """
    state = estimator._state
    config = state.config()
    params = estimator.get_params(deep=False)
    trained = estimator._state_params
    # "auto" of iterate and radius as the state settled it (`_options.settle_auto`)
    settled = settle_auto({**trained, "geometry": config.get("geometry", "global")})
    for key in _pgs._STATE_PARAMS:
        if key in params and key in trained and not _same(params[key], trained[key]):
            return (f"parameter {key}={short(params[key])} but the solver state was trained "
                    f"with {key}={short(trained[key])} (_state_params); set it back, or fit "
                    "again")
        if key == "sigma" and trained.get(key) == "auto":
            continue  # the race's choice: any sigma of the state's own
        if key in config and key in trained and not _same(settled[key], config[key]):
            return (f"_state_params has {key}={short(trained[key])} but the solver state's "
                    f"configuration has {key}={short(config[key])}")
    n_bits = trained.get("n_bits")
    dim = state_dim(estimator)
    if n_bits is not None and dim != 2**n_bits + 1:
        return (f"n_bits={n_bits} hashes into {2**n_bits} features but the solver state has "
                f"{dim - 1}")
    if estimator.n_features_in_ > dim - 1:
        return (f"n_features_in_={estimator.n_features_in_} but the solver state has "
                f"{dim - 1} features")
    if estimator.t_ != state.t:
        return f"t_={estimator.t_} but the solver state has made {state.t} steps"
    if estimator._classifier:
        classes = estimator.classes_
        try:
            ordered = unique(classes)  # np.unique without its import of numpy.ma
        except TypeError:  # e.g. str and int mixed in an object array
            ordered = None
        if ordered is None or not np.array_equal(ordered, classes):
            return (f"classes_ {short(classes.tolist())} are not distinct and sorted "
                    "(np.unique's order, which codes the labels)")
        coupled = trained.get("multi_class", "ovr") if classes.shape[0] > 2 else "ovr"
        if config["multiclass"] != (classes.shape[0] > 2) or state.multi_class != coupled:
            return (f"{classes.shape[0]} classes, multi_class={coupled!r}, but the solver state "
                    f"is multiclass={config['multiclass']}, multi_class={state.multi_class!r}")
    elif config["n_problems"] != 1 or config["multiclass"]:
        return (f"a regressor's solver state has {config['n_problems']} problems "
                f"(multiclass={config['multiclass']})")
    for key in _FINITE_STATE_ARRAYS:
        arr = getattr(state, key)
        if arr.dtype.kind != "f":
            continue
        # in the pages the array has, without a temporary of its size (2 GB at -b 26)
        at = first_nonfinite(np.ascontiguousarray(arr, dtype=np.float64))
        if at >= 0:
            return (f"the solver state's {key} holds {float(arr.flat[at])} "
                    "(the weights' arrays must be finite)")
    for key in ("sum_weight", "sum_loss", "sum_weighted_loss", "loss0_max", "radius"):
        if math.isnan(getattr(state, key)):
            return f"the solver state's {key} is nan"
    return None


# the parameters an SDCA model's value records (the LinearModel field of each)
_SDCA_FIELDS = {"loss": "loss", "p": "p", "sigma": "sigma", "l1": "l1", "epsilon": "epsilon",
                "fit_intercept": "fit_intercept", "intercept_scaling": "intercept_scaling",
                "n_bits": "n_bits", "hash_seed": "hash_seed"}


def _sdca_inconsistency(estimator):
    """`_inconsistency` for an SDCA model: its parameters are those of its value (a
    parameter set after fit would describe another model), the width and the classes
    match the weights, the weights are finite and the dual variables one per row and
    problem."""
    model = estimator._state
    params = estimator.get_params(deep=False)
    for key, field in _SDCA_FIELDS.items():
        value, fitted = params[key], getattr(model, field)
        if not (_same(value, fitted) or (isinstance(value, numbers.Real) and not isinstance(
                value, bool) and isinstance(fitted, float) and float(value) == fitted)):
            return (f"parameter {key}={short(value)} but the model was fitted with "
                    f"{key}={short(fitted)}; set it back, or fit again")
    width = model.n_features
    if model.n_bits is not None and width != 2**model.n_bits:
        return f"n_bits={model.n_bits} hashes into {2**model.n_bits} features but coef has {width}"
    if estimator.n_features_in_ != width:
        return f"n_features_in_={estimator.n_features_in_} but coef has {width} features"
    if estimator._classifier:
        classes = getattr(estimator, "classes_", None)
        if model.classes is None or classes is None or not np.array_equal(model.classes,
                                                                          classes):
            return "classes_ differ from the model's classes"
        try:
            ordered = unique(classes)  # np.unique without its import of numpy.ma
        except TypeError:
            ordered = None
        if ordered is None or not np.array_equal(ordered, classes):
            return (f"classes_ {short(classes.tolist())} are not distinct and sorted "
                    "(np.unique's order, which codes the labels)")
    elif model.classes is not None:
        return "a regressor's model has classes"
    coef = model.coef_sparse.data if model.is_sparse else model.coef  # not densified
    for key, arr in (("coef", coef), ("intercept_weight", model.intercept_weight)):
        if not np.isfinite(arr).all():
            return f"the model's {key} holds {float(arr[~np.isfinite(arr)][0])} (not finite)"
    alpha = np.asarray(estimator.dual_coef_)
    if alpha.ndim != (2 if model.n_problems > 1 else 1) or (
            alpha.ndim == 2 and alpha.shape[0] != model.n_problems):
        return (f"dual_coef_ has shape {alpha.shape} for {model.n_problems} problem(s)")
    return None


def _pgs_inconsistency(estimator):  # a model without solver state has its own rules
    return (stateless_inconsistency if isinstance(estimator._state, LinearModel)
            else _inconsistency)(estimator)


def _is_stored_attribute(key):
    """Fitted attributes: public ones end in "_" (scikit-learn's rule), plus a few private."""
    return (key.endswith("_") and not key.startswith("__")) or key in _PRIVATE_ATTRIBUTES


def build(header, arrays, path, sklearn=True):
    """The fitted estimator (or, with ``sklearn=False``, learner) described by a verified
    header and its arrays."""
    name = header["estimator"]
    cls = _classes(sklearn).get(name) if name in _LEARNERS else None
    if cls is None:
        raise ModelFileError(path, f"unknown estimator class {short(name)} (this onlinepgs "
                                   f"reads {', '.join(_ESTIMATORS)})")

    params = dict(header["params"])
    if isinstance(params.get("class_weight"), list):
        params["class_weight"] = _class_weight_from_json(params["class_weight"], path)
    known = cls().get_params(deep=False)
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise ModelFileError(path, f"parameter(s) {unknown} unknown to this onlinepgs's {name} "
                                   "(written by a newer onlinepgs?); upgrade onlinepgs")
    for key, value in params.items():
        if key in _LIST_PARAMS and isinstance(value, list) and all(
                isinstance(v, str) for v in value):
            continue
        if not (value is None or isinstance(value, (bool, int, float, str))
                or key == "class_weight" and isinstance(value, dict)):
            raise ModelFileError(path, f"malformed header: parameter {key} is "
                                       f"{short(value)}, not a None, bool, int, float or str")
    estimator = cls(**params)
    try:
        estimator._validate_params()
    except ValueError as exc:  # sklearn's InvalidParameterError
        raise ModelFileError(path, f"malformed header: {exc}") from None

    sdca = _is_sdca(cls)
    stateless = not sdca and header["state"].get("solver") == "pgs-weights"
    # a wide model's states over the columns their rows reach (onlinepgs._columns_seen)
    header, arrays, columns, file_dim = ((header, arrays, None, None) if sdca or stateless
                                         else over_slots(header, arrays))
    state = (build_weights_state if sdca or stateless else _build_state)(header, arrays, path)

    attributes = dict(header["attributes"])
    for entry in header["arrays"]:
        group, _, key = entry["name"].partition("/")
        if group != "attributes":
            continue
        if key in attributes:
            raise ModelFileError(path, f"malformed header: attribute {key} is both a JSON value "
                                       "and an array")
        arr = arrays[entry["name"]]
        attributes[key] = arr.astype(object) if entry.get("as_object") else arr
    required = (_REQUIRED_SDCA_ATTRIBUTES if sdca else _REQUIRED_ATTRIBUTES) + (
        ("classes_",) if cls._classifier else ())
    missing = [key for key in required if key not in attributes]
    if missing:
        raise ModelFileError(path, f"malformed header: fitted attribute(s) {missing} missing")
    for key in attributes:
        if not (_is_stored_attribute(key) and key.isidentifier()) or key in known \
                or hasattr(cls, key):
            raise ModelFileError(path, f"malformed header: {key!r} is not a fitted attribute")
    if not sdca:
        state_params = attributes["_state_params"]
        if not isinstance(state_params, dict) or not set(state_params) <= set(known):
            raise ModelFileError(path, "malformed header: attribute _state_params is not an object "
                                       f"of {name} parameters")
        # a parameter that did not exist when the file was written has its default
        attributes["_state_params"] = {
            **{key: getattr(estimator, key)
               for key in _pgs._STATE_PARAMS if key in known},
            **state_params}
    for key in ("n_features_in_", "n_iter_") + (() if sdca else ("t_",)):
        value = attributes[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ModelFileError(path, f"malformed header: attribute {key} is {short(value)}, "
                                       "not a non-negative integer")
    if cls._classifier:
        classes = attributes["classes_"]
        if not isinstance(classes, np.ndarray) or classes.ndim != 1 or classes.shape[0] < 1:
            raise ModelFileError(path, "malformed model: classes_ is not an array of at "
                                       "least 1 class")
        expected = 1 if classes.shape[0] <= 2 else classes.shape[0]  # 1: learn_one's first
        if state.n_problems != expected:
            raise ModelFileError(path, f"malformed model: {classes.shape[0]} classes but the "
                                       f"solver state has {state.n_problems} problem(s)")
    for key, dtype in _LISTS_OF_ARRAYS.items():
        value = attributes.get(key)
        if sdca and isinstance(value, list):  # one array per problem (K > 2 classes)
            try:
                attributes[key] = [np.array(v, dtype=dtype) for v in value]
            except (TypeError, ValueError, OverflowError):
                raise ModelFileError(path, f"malformed header: attribute {key} is not a list "
                                           "of number lists") from None
            if any(v.ndim != 1 for v in attributes[key]):
                raise ModelFileError(path, f"malformed header: attribute {key} is not a "
                                           "list of number lists")
    for key, value in attributes.items():
        setattr(estimator, key, value)
    if sdca and not cls._classifier and state.n_problems != 1:
        raise ModelFileError(path, f"malformed model: a regressor's state has "
                                   f"{state.n_problems} problems")
    if sdca:
        # the value's classes are the estimator's (checked against the weights above)
        state = LinearModel(state.coef, state.intercept_weight,
                            classes=attributes.get("classes_"), loss=estimator.loss,
                            epsilon=estimator.epsilon, p=estimator.p, sigma=estimator.sigma,
                            l1=estimator.l1, fit_intercept=estimator.fit_intercept,
                            intercept_scaling=estimator.intercept_scaling,
                            n_bits=estimator.n_bits, hash_seed=estimator.hash_seed,
                            n_features_in=attributes["n_features_in_"], solver="sdca",
                            interactions=estimator.interactions,
                            multi_class=estimator.multi_class)
    elif stateless:
        state = stateless_model(estimator, state, attributes, header, path)
    estimator._state = state
    estimator._columns = columns  # (a state over the columns seen: over_slots)
    if columns is not None and file_dim != estimator.n_features_in_ + 1:
        raise ModelFileError(path, f"inconsistent model: a solver state over {file_dim - 1} "
                                   f"features, n_features_in_={estimator.n_features_in_}")
    estimator._cache = {"model": state} if stateless else {}
    estimator._race = _build_race(header, arrays, path, state) if "race" in header else None
    reason = (_sdca_inconsistency if sdca else _pgs_inconsistency)(estimator)
    if reason is not None:
        raise ModelFileError(path, f"inconsistent model: {reason}")
    return estimator


# state version 2 files load; the arrays version 3 added are then unknown (NaN)
_READABLE_STATE_VERSIONS = (2, 3, STATE_VERSION)
_ADDED_IN_STATE_3 = ("sum_conj_a", "sum_step_loss_a", "sum_reg_a")
_ADDED_IN_STATE_4 = ("sum_weighted_loss_reported", "n_mistakes_reported")  # progressive_sums


def _build_state(header, arrays, path):
    """The solver state: header scalars and state/ arrays checked against a template."""
    state_json = header["state"]
    version = state_json.get("version")
    if type(version) is not int or version not in _READABLE_STATE_VERSIONS:
        if isinstance(version, int) and not isinstance(version, bool) and version > STATE_VERSION:
            reason = (f"solver state version {version} was written by a newer onlinepgs (this "
                      f"one reads version {STATE_VERSION}); upgrade onlinepgs to read it")
        else:
            reason = (f"solver state version {short(version)} is not readable by this "
                      f"onlinepgs (it reads version {STATE_VERSION})")
        raise ModelFileError(path, reason)
    config, dim = state_json.get("config"), state_json.get("dim")
    if not isinstance(config, dict):
        raise ModelFileError(path, "malformed header: the solver state has no config object")
    if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
        raise ModelFileError(path, f"malformed header: solver state dim {short(dim)} is not a "
                                   "positive integer")
    arrays = expand(state_json, arrays, "state/", path)  # stored rows put back
    # the main array is checked before the template is allocated: a bogus dim or number
    # of problems must not allocate more than the file holds
    block = arrays.get("state/block_a")
    if block is None:
        raise ModelFileError(path, "missing array state/block_a")
    if block.ndim != 3 or block.shape[:2] != (dim, config.get("n_problems")) \
            or block.shape[2] < 1:
        raise ModelFileError(path, f"array state/block_a has shape {block.shape}, expected "
                                   f"({dim}, {short(config.get('n_problems'))}, ...) for the "
                                   "solver state's dim and n_problems")
    try:
        template = state_template(config, dim)  # allocates no state of dim coordinates
    except (TypeError, ValueError, OverflowError, MemoryError) as exc:
        raise ModelFileError(path, f"malformed header: invalid solver configuration "
                                   f"({describe(exc)})") from None
    if template["config"] != config or any(
            type(value) is bool and type(config[key]) is not bool
            for key, value in template["config"].items()):
        raise ModelFileError(path, f"malformed header: invalid solver configuration "
                                   f"{short(config)}")
    state_dict = {"version": version}
    for key, expected in template.items():
        if key == "version":
            continue
        if isinstance(expected, np.ndarray):
            name = f"state/{key}"
            if name not in arrays and key == "l1q_a":
                continue  # l1, p < 2, written before N's sums were saved: counted again
            if name not in arrays and version == 2 and key in _ADDED_IN_STATE_3:
                state_dict[key] = np.full(expected.shape, np.nan)  # unknown from here on
                continue
            if name not in arrays:
                raise ModelFileError(path, f"missing array {name}")
            arr = arrays[name]
            if key == "block_a" and "l1_folded" in template and "l1_folded" not in state_json:
                expected = arr  # an l1 average written with marks: from_dict unfolds, checks
            if (arr.shape != expected.shape or arr.dtype.kind != expected.dtype.kind
                    or arr.dtype.itemsize != expected.dtype.itemsize):
                raise ModelFileError(path, f"array {name} has dtype {arr.dtype.str} and shape "
                                           f"{arr.shape}, expected dtype {expected.dtype.str} "
                                           f"and shape {expected.shape} for this solver "
                                           "configuration")
            state_dict[key] = arr
        elif key == "config":
            state_dict[key] = config
        else:
            if key not in state_json and key == "span":
                state_dict[key] = dim  # written before it existed: N's old schedule
                continue
            if key in _ADDED_IN_STATE_4 and version < 4:
                continue  # written before they existed: from_dict makes them unknown (NaN)
            if key == "l1_folded" and key not in state_json:
                continue  # an l1 average written with marks: from_dict unfolds it
            if key not in state_json:
                raise ModelFileError(path, f"malformed header: the solver state has no {key!r}")
            value = state_json[key]
            wanted = float if isinstance(expected, float) else int
            if (isinstance(value, bool) or not isinstance(value, (int, float))
                    or (wanted is int and not (isinstance(value, int) and value >= 0))):
                raise ModelFileError(path, f"malformed header: solver state {key} is "
                                           f"{short(value)}, expected a "
                                           + ("float" if wanted is float else
                                              "non-negative int"))
            state_dict[key] = value
    for name in arrays:
        group, _, key = name.partition("/")
        if group == "state" and key not in template:
            raise ModelFileError(path, f"unexpected array {name} (not part of the "
                                       "solver state)")
    try:
        return PGSState.from_dict(state_dict)
    except (TypeError, ValueError, OverflowError, KeyError) as exc:
        raise ModelFileError(path, f"malformed solver state: {exc}") from None


