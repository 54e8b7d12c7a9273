"""Save and load fitted estimators: the ``.pgs`` model file format.

`save_model` writes a fitted `~onlinepgs.PGSClassifier`, `~onlinepgs.PGSRegressor`,
`~onlinepgs.SDCAClassifier` or `~onlinepgs.SDCARegressor` (or its sklearn-free learner,
`onlinepgs.pgs` / `onlinepgs.sdca`) to one file and `load_model` rebuilds it exactly: same
parameters, same fitted attributes and the same solver state, so that training continued
on the loaded model (`partial_fit`) gives bit for bit the coefficients and online
statistics the never-saved model gives on the same data. `load_learner` rebuilds the
learner instead, without importing scikit-learn (the command line's loader).
`read_header` returns a file's header (what ``onlinepgs info`` shows) without building
the model.

The format holds data only: no pickle, nothing executable, so loading a file runs
no code from it. Every field is type- and shape-checked (array shapes against the
solver configuration before anything that size is allocated), and every defect is
reported as a `ModelFileError` naming the file and the reason (a file that cannot
be opened at all raises the usual `OSError`).

Notes
-----
**Container.** A model file (suffix ``.pgs`` by convention) is a zip archive of
``ZIP_STORED`` (uncompressed) entries holding

``header.json``
    The header: one JSON object (strict RFC 8259 JSON, ASCII), described below.
``<name>.npy``
    One entry per array listed in the header's ``"arrays"``, in NumPy's ``.npy``
    format, written with ``allow_pickle=False``. Object arrays are never stored:
    an array of Python strings (e.g. ``feature_names_in_``, or ``classes_`` learnt
    from an object-dtype ``y``) is stored as a fixed-width unicode array and
    marked ``"as_object": true`` so the reader restores the object dtype; any
    other object array is refused.

**Header fields** (format_version 1):

``"format"``
    Always ``"onlinepgs-model"``.
``"format_version"``
    The integer 1 (see *Versioning*).
``"onlinepgs_version"``
    Version of the package that wrote the file (informational).
``"estimator"``
    Class name: ``"PGSClassifier"``, ``"PGSRegressor"``, ``"SDCAClassifier"`` or
    ``"SDCARegressor"`` (the scikit-learn estimator's, also when a learner was saved).
``"params"``
    Every ``get_params()`` value (each None, bool, int, float or str). A
    ``random_state`` holding a RandomState instance cannot be stored: pass an int.
    Reading a file without a parameter that a later onlinepgs added gives that
    parameter its default (in ``_state_params`` too); a parameter this onlinepgs
    does not know is refused, and so are values its parameter checks reject.
``"attributes"``
    The fitted attributes with JSON values: ``n_features_in_``, ``n_iter_``,
    ``t_``, ``_state_params``, ... (every instance attribute whose name ends in
    ``_``, plus ``_state_params``). Array-valued attributes (``classes_``,
    ``feature_names_in_``) are the arrays named ``attributes/<name>``. The
    estimator's read-out cache is not stored (it is rebuilt empty).
``"n_features"``, ``"dimension"``
    Features of the solver state and its dimension (``n_features + 1``; the
    first coordinate carries the intercept). Informational.
``"state"``
    The solver state's scalars (`onlinepgs._core.PGSState.to_dict` without its
    arrays): ``version`` (the solver state's own version), ``config`` (the
    solver's configuration), ``dim``, ``t``, ``rng``, running sums, ... Its
    arrays are the arrays named ``state/<key>``. An SDCA model keeps no solver state:
    ``{"solver": "sdca"}``, its weights the arrays ``state/coef`` (problems x
    features) and ``state/intercept_weight``; its certificate (``duality_gap_``,
    the objectives, ``gap_history_``, ...) and ``dual_coef_`` are fitted attributes
    (per-problem lists of arrays as JSON lists).
``"online_stats"``
    ``online_stats_`` at the time of saving (``{}`` for SDCA; informational: the loaded model
    recomputes it from the state).
``"extra"``
    The caller's ``extra`` object (e.g. the command line's hashing options and
    the number of examples consumed from a stream), ``{}`` when none. Keys
    starting with ``$`` are reserved (refused by the writer).
``"arrays"``
    List of ``{"name", "dtype", "shape"}`` objects (plus ``"as_object": true``
    where it applies), one per ``.npy`` entry, in checksum order. ``dtype`` is
    NumPy's type string (``"<f8"``, ``"<i8"``, ``"<U3"``, ...); the entry is
    ``<name>.npy``.
``"checksum"``
    ``{"algorithm": "sha256", "digest": <64 hex digits>}``, see below.

Floats are written with Python's shortest round-trip representation, so they are
read back exactly. JSON has no infinity or NaN: such a float is written as the
object ``{"$float": "inf"}`` (or ``"-inf"``, ``"nan"``); objects whose only key is
``"$float"`` are reserved for this and decoded by the reader.

**Checksum.** SHA-256 over, in order, the raw bytes (C order, the stored dtype)
of every array in the order of ``"arrays"``, then the canonical JSON of the header
without its ``"checksum"`` field (``json.dumps(header, sort_keys=True,
separators=(",", ":"), ensure_ascii=True, allow_nan=False)`` encoded as ASCII). It
covers the header's content, not its formatting. A mismatch (or a zip CRC error)
means the file is corrupt and it is refused.

**Limits on reading.** A reader trusts nothing a file declares before checking it
against the file's own size: compressed entries (deflate, bzip2, lzma) are refused,
and every entry read must lie within the file, beside the others, so the arrays
allocated add up to at most the file's size and a few KiB declaring gigabytes are
refused at once (loading peaks at about 3 times the file's size). ``header.json``
has at most 64 MiB and nests at most 64 levels of lists and objects (checked before
it is parsed); integers in it have at most 4096 bits. `save_model` refuses what a
reader would refuse, so every file it writes loads.

**Versioning.** ``format_version`` is a major version. A reader refuses a file
whose ``format_version`` is greater than the one it knows (`FORMAT_VERSION`):
"written by a newer onlinepgs; upgrade". Changes that an older reader would
misread increase it; new top-level header fields that a reader may ignore do
not (readers ignore unknown top-level fields). The solver state carries its own
``version``, which the reader also checks.

**Writing** is atomic: the archive is written to a temporary file in the target's
directory, flushed, fsynced and renamed (`os.replace`) onto the target, then the
directory is fsynced. If anything fails, the temporary file is removed and a
previous file at the target is left as it was; a full disk says so, naming the
file. The temporary file ``.NAME.<12 hex digits>.tmp`` is locked (``flock``) by its
writer until it is renamed; one that a killed writer left behind is removed by the
next successful write of the same target once it is over a minute old and its lock
is free. The bytes written depend only on the model, ``extra`` and the package
version (entries carry a fixed timestamp).

Examples
--------
>>> import os, tempfile
>>> import numpy as np
>>> from onlinepgs import PGSClassifier
>>> from onlinepgs.model_io import load_model, read_header, save_model
>>> X = np.array([[1.0, 0.0], [0.0, 1.0]] * 20); y = np.array(["yes", "no"] * 20)
>>> clf = PGSClassifier(sigma=1e-2, random_state=0).fit(X, y)
>>> with tempfile.TemporaryDirectory() as tmp:
...     path = os.path.join(tmp, "model.pgs")
...     save_model(clf, path, extra={"examples_consumed": 40})
...     header = read_header(path)
...     loaded = load_model(path)
>>> header["estimator"], header["format_version"], header["extra"]
('PGSClassifier', 1, {'examples_consumed': 40})
>>> loaded.predict([[1.0, 0.0]])
array(['yes'], dtype='<U3')
>>> bool(np.array_equal(loaded.coef_, clf.coef_))
True
"""
import errno
import hashlib
import json
import math
import numbers
import os
import re
import secrets
import stat
import struct
import time
import zipfile
import zlib

try:
    import fcntl
except ImportError:  # Windows: no advisory locks, so no clean-up of orphaned temp files
    fcntl = None

import numpy as np
from numpy.lib import format as _npy

from onlinepgs._core._pgs import STATE_VERSION, PGSState
from onlinepgs import pgs as _pgs
from onlinepgs.model import LinearModel
from onlinepgs.pgs import PGSClassifierLearner, PGSRegressorLearner
from onlinepgs.sdca import SDCAClassifierLearner, SDCARegressorLearner

__all__ = ["save_model", "load_model", "load_learner", "read_header", "ModelFileError",
           "FORMAT_NAME", "FORMAT_VERSION"]

FORMAT_NAME = "onlinepgs-model"
FORMAT_VERSION = 1

_HEADER_ENTRY = "header.json"
_MAX_HEADER_BYTES = 64 * 2**20
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
_ARRAY_NAME = re.compile(r"(state|attributes)/[A-Za-z_][A-Za-z0-9_]*\Z")
_ARRAY_KINDS = "biufcUS"  # bool, ints, floats, complex, unicode, bytes
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
_NONFINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}
# header.json nests at most this many levels of lists and objects (the header is level 1,
# so the caller's extra, at level 2, nests at most _MAX_JSON_DEPTH - 1 levels): the
# writer refuses deeper data and the reader refuses deeper files before parsing them,
# so neither recurses without bound
_MAX_JSON_DEPTH = 64
# integers in header.json: far below Python's int-to-str digit limit (4300 digits)
_MAX_INT_BITS = 4096
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_BRACKET_STEP = np.zeros(256, dtype=np.int8)
_BRACKET_STEP[[ord("["), ord("{")]] = 1
_BRACKET_STEP[[ord("]"), ord("}")]] = -1


class ModelFileError(ValueError):
    """A model file cannot be read or written: names the file and the reason.

    Attributes
    ----------
    path : str
        The model file.
    reason : str
        What is wrong with it (one line).
    """

    def __init__(self, path, reason):
        path = os.fspath(path) if path is not None else None
        reason = " ".join(str(reason).splitlines())
        super().__init__(path, reason)
        self.path = path
        self.reason = reason

    def __str__(self):
        printable = isinstance(self.path, str) and self.path.isprintable()
        shown = self.path if printable else repr(self.path)
        return f"{shown}: {self.reason}"


# ---- JSON values -----------------------------------------------------------------------
def _to_json(value, where, path, *, arrays_as_lists=False, depth=1):
    """value as strict JSON data (non-finite floats tagged); refuses anything else.

    `depth` is the nesting level of `value` in ``header.json`` (the header object is 1):
    lists and dicts nested deeper than `_MAX_JSON_DEPTH` allow are refused, so that
    whatever is written is read back (and a cyclic structure is refused, not recursed).
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, numbers.Integral):
        value = int(value)
        if value.bit_length() > _MAX_INT_BITS:
            raise ModelFileError(path, f"{where} is an integer of {value.bit_length()} bits: "
                                       f"at most {_MAX_INT_BITS} bits can be stored")
        return value
    if isinstance(value, numbers.Real):
        value = float(value)
        if math.isfinite(value):
            return value
        if depth > _MAX_JSON_DEPTH:  # the tag is an object one level down
            raise _too_deep(where, path)
        return {"$float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if isinstance(value, (dict, list, tuple)) or (arrays_as_lists
                                                  and isinstance(value, np.ndarray)):
        if depth > _MAX_JSON_DEPTH:
            raise _too_deep(where, path)
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ModelFileError(path, f"{where} has the key {key!r}: only string keys "
                                           "can be stored")
            if key.startswith("$"):
                raise ModelFileError(path, f"{where} has the key {key!r}: keys starting "
                                           "with '$' are reserved by the model file format")
            out[key] = _to_json(item, f"{where}[{key!r}]", path, arrays_as_lists=arrays_as_lists,
                                depth=depth + 1)
        return out
    if isinstance(value, (list, tuple)) or (arrays_as_lists and isinstance(value, np.ndarray)):
        return [_to_json(item, f"{where}[{i}]", path, arrays_as_lists=arrays_as_lists,
                         depth=depth + 1)
                for i, item in enumerate(value)]
    raise ModelFileError(path, f"{where} = {_short(value)} ({type(value).__name__}) cannot be "
                               "stored: only None, bool, int, float, str, lists and dicts")


def _too_deep(where, path):
    shown = where if len(where) <= 80 else where[:40] + "..." + where[-37:]
    return ModelFileError(path, f"{shown} is nested too deeply: a model file's header nests "
                                f"at most {_MAX_JSON_DEPTH} levels of lists and dicts, so extra "
                                f"at most {_MAX_JSON_DEPTH - 1} (extra itself is one level; a "
                                "non-finite float, stored as an object, is one too)")


def _json_depth(data):
    """The deepest nesting of lists and objects in JSON text `data` (bytes), found
    without recursion: brackets outside strings, counted by running sums in blocks."""
    skeleton = _JSON_STRING.sub(b'""', data)
    codes = np.frombuffer(skeleton, dtype=np.uint8)
    level = deepest = 0
    block = 2**20
    for start in range(0, codes.shape[0], block):
        levels = np.cumsum(_BRACKET_STEP[codes[start:start + block]], dtype=np.int64) + level
        deepest = max(deepest, int(levels.max()))
        level = int(levels[-1])
    return deepest


def _is_float_tag(value):
    return (isinstance(value, dict) and len(value) == 1 and "$float" in value
            and value["$float"] in _NONFINITE)


def _from_json(value):
    """Undo the non-finite float tags of `_to_json`."""
    if isinstance(value, dict):
        if _is_float_tag(value):
            return _NONFINITE[value["$float"]]
        return {key: _from_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_from_json(item) for item in value]
    return value


def _describe(exc):
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _short(value):
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _canonical(header):
    body = {key: value for key, value in header.items() if key != "checksum"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False).encode("ascii")


def _digest(header, arrays):
    """SHA-256 of the arrays' raw bytes (header order) and the canonical header."""
    h = hashlib.sha256()
    for entry in header["arrays"]:
        arr = np.ascontiguousarray(arrays[entry["name"]])
        h.update(arr.reshape(-1).view(np.uint8))
    h.update(_canonical(header))
    return h.hexdigest()


# ---- saving ----------------------------------------------------------------------------
def _param_to_json(name, value, path):
    if isinstance(value, (np.random.RandomState, np.random.Generator)):
        raise ModelFileError(path, f"parameter {name} is a {type(value).__name__} instance, "
                                   f"which a model file cannot store; set {name} to an int "
                                   f"seed (e.g. {name}=0) or None before fitting")
    if value is None or isinstance(value, (bool, np.bool_, str, numbers.Real)):
        return _to_json(value, f"parameter {name}", path)
    raise ModelFileError(path, f"parameter {name}={_short(value)} ({type(value).__name__}) "
                               "cannot be stored: only None, bool, int, float and str values")


def _storable_array(name, arr, path):
    """(array to write, table entry) for one array; object arrays only as strings."""
    arr = np.asarray(arr)
    as_object = False
    if arr.dtype == object:
        if not all(isinstance(item, str) for item in arr.flat):
            kinds = sorted({type(item).__name__ for item in arr.flat})
            raise ModelFileError(path, f"array {name} has dtype object with {kinds} elements: "
                                       "object arrays cannot be stored (no pickle); only "
                                       "object arrays of str are converted")
        arr = arr.astype(str) if arr.size else arr.astype("<U1")
        as_object = True
    if arr.dtype.kind not in _ARRAY_KINDS or arr.dtype.fields is not None:
        raise ModelFileError(path, f"array {name} has dtype {arr.dtype}, which a model file "
                                   "cannot store (bool, int, float, complex or str only)")
    arr = np.ascontiguousarray(arr)
    entry = {"name": name, "dtype": arr.dtype.str, "shape": list(arr.shape)}
    if as_object:
        entry["as_object"] = True
    return arr, entry


def _encode(estimator, path, extra):
    """The header (without checksum) and the arrays of a fitted estimator or learner."""
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
    if not isinstance(state, LinearModel if sdca else PGSState):
        raise ModelFileError(path, f"this {name} is not fitted: call fit "
                                   f"{'' if sdca else 'or partial_fit '}before save_model")
    if extra is not None and not isinstance(extra, dict):
        raise ModelFileError(path, f"extra must be a dict or None, got {type(extra).__name__}")
    params = estimator.get_params(deep=False)
    json_params = {key: _param_to_json(key, value, path) for key, value in params.items()}

    arrays, table = {}, []

    def add_array(array_name, value):
        arr, entry = _storable_array(array_name, value, path)
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
            attributes[key] = _to_json(value, f"attribute {key}", path, depth=3,
                                       arrays_as_lists=key in _LISTS_OF_ARRAYS)

    reason = (_sdca_inconsistency if sdca else _inconsistency)(estimator)
    if reason is not None:  # load_model would refuse the file
        raise ModelFileError(path, f"cannot save this {name}: {reason}")
    if sdca:
        # the model is the state: its weights (the intercept's as the constant feature's)
        add_array("state/coef", state.coef)
        add_array("state/intercept_weight", state.intercept_weight)
        state_json, n_features, stats = {"solver": "sdca"}, state.n_features, {}
    else:
        state_dict = state.to_dict()
        state_json = {}
        for key, value in state_dict.items():
            if isinstance(value, np.ndarray):
                add_array(f"state/{key}", value)
            else:
                state_json[key] = _to_json(value, f"solver state {key}", path, depth=3)
        n_features, stats = int(state_dict["dim"]) - 1, estimator.online_stats_

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
        "online_stats": _to_json(stats, "online_stats_", path, arrays_as_lists=True, depth=2),
        "extra": _to_json(extra if extra is not None else {}, "extra", path, depth=2),
        "arrays": table,
    }
    return header, arrays


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
    for key in _pgs._STATE_PARAMS:
        if key in params and key in trained and not _same(params[key], trained[key]):
            return (f"parameter {key}={_short(params[key])} but the solver state was trained "
                    f"with {key}={_short(trained[key])} (_state_params); set it back, or fit "
                    "again")
        if key in config and key in trained and not _same(trained[key], config[key]):
            return (f"_state_params has {key}={_short(trained[key])} but the solver state's "
                    f"configuration has {key}={_short(config[key])}")
    n_bits = trained.get("n_bits")
    if n_bits is not None and state.dim != 2**n_bits + 1:
        return (f"n_bits={n_bits} hashes into {2**n_bits} features but the solver state has "
                f"{state.dim - 1}")
    if estimator.n_features_in_ > state.dim - 1:
        return (f"n_features_in_={estimator.n_features_in_} but the solver state has "
                f"{state.dim - 1} features")
    if estimator.t_ != state.t:
        return f"t_={estimator.t_} but the solver state has made {state.t} steps"
    if estimator._classifier:
        classes = estimator.classes_
        try:
            ordered = np.unique(classes)
        except TypeError:  # e.g. str and int mixed in an object array
            ordered = None
        if ordered is None or not np.array_equal(ordered, classes):
            return (f"classes_ {_short(classes.tolist())} are not distinct and sorted "
                    "(np.unique's order, which codes the labels)")
        if config["multiclass"] != (classes.shape[0] > 2):
            return (f"{classes.shape[0]} classes but the solver state is "
                    f"{'' if config['multiclass'] else 'not '}multiclass")
    elif config["n_problems"] != 1 or config["multiclass"]:
        return (f"a regressor's solver state has {config['n_problems']} problems "
                f"(multiclass={config['multiclass']})")
    for key in _FINITE_STATE_ARRAYS:
        arr = getattr(state, key)
        if arr.dtype.kind == "f" and not np.isfinite(arr).all():
            return (f"the solver state's {key} holds {float(arr[~np.isfinite(arr)][0])} "
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
            return (f"parameter {key}={_short(value)} but the model was fitted with "
                    f"{key}={_short(fitted)}; set it back, or fit again")
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
            ordered = np.unique(classes)
        except TypeError:
            ordered = None
        if ordered is None or not np.array_equal(ordered, classes):
            return (f"classes_ {_short(classes.tolist())} are not distinct and sorted "
                    "(np.unique's order, which codes the labels)")
    elif model.classes is not None:
        return "a regressor's model has classes"
    for key, arr in (("coef", model.coef), ("intercept_weight", model.intercept_weight)):
        if not np.isfinite(arr).all():
            return f"the model's {key} holds {float(arr[~np.isfinite(arr)][0])} (not finite)"
    alpha = np.asarray(estimator.dual_coef_)
    if alpha.ndim != (2 if model.n_problems > 1 else 1) or (
            alpha.ndim == 2 and alpha.shape[0] != model.n_problems):
        return (f"dual_coef_ has shape {alpha.shape} for {model.n_problems} problem(s)")
    return None


def _is_stored_attribute(key):
    """Fitted attributes: public ones end in "_" (scikit-learn's rule), plus a few private."""
    return (key.endswith("_") and not key.startswith("__")) or key in _PRIVATE_ATTRIBUTES


def _zip_info(name, compress):
    info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
    info.compress_type = compress
    info.external_attr = 0o644 << 16
    return info


def _write_array(fileobj, arr):
    _npy.write_array(fileobj, arr, allow_pickle=False)


def _header_bytes(header, arrays, path):
    """header.json's bytes: the header with its checksum added, refused if the reader
    would refuse it for its size."""
    header = dict(header)
    header["checksum"] = {"algorithm": "sha256", "digest": _digest(header, arrays)}
    data = json.dumps(header, indent=1, ensure_ascii=True, allow_nan=False).encode("ascii")
    data += b"\n"
    if len(data) > _MAX_HEADER_BYTES:
        raise ModelFileError(path, f"the header would have {len(data)} bytes, more than the "
                                   f"{_MAX_HEADER_BYTES} a model file's header may have "
                                   "(a large extra?)")
    return data


def _write_zip(fileobj, header_bytes, table, arrays):
    """Write the archive: header.json and one .npy per array of `table`, in its order."""
    # stored, not deflated: saving stays a few ms on a hot path (checkpoints), and the
    # arrays of a trained model compress little anyway; readers refuse compressed entries
    compress = zipfile.ZIP_STORED
    with zipfile.ZipFile(fileobj, "w", compression=compress, allowZip64=True) as zf:
        zf.writestr(_zip_info(_HEADER_ENTRY, compress), header_bytes)
        for entry in table:
            arr = arrays[entry["name"]]
            with zf.open(_zip_info(entry["name"] + ".npy", compress), "w",
                         force_zip64=arr.nbytes > 2**30) as out:
                _write_array(out, arr)


def _temp_name(base):
    return f".{base}.{secrets.token_hex(6)}.tmp"


def _create_temp(directory, base):
    """A new temporary file beside the target, locked (see `_remove_orphans`)."""
    for _ in range(100):
        tmp = os.path.join(directory, _temp_name(base))
        try:
            # the mode is filtered by the umask, as for any new file
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                         0o666)
        except FileExistsError:
            continue
        if fcntl is not None:
            try:  # held until the file is renamed and closed: "my writer is alive"
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                pass  # e.g. a file system without locks: written all the same
        return tmp, fd
    raise FileExistsError(f"could not create a temporary file next to {base!r} in {directory!r}")


# a temporary file younger than this is never removed as an orphan: its writer may be
# between creating it and locking it
_ORPHAN_AGE = 60.0


def _remove_orphans(directory, base):
    """Remove the temporary files that killed writers of the same target left behind.

    A writer holds an exclusive `flock` on its temporary file ``.BASE.<12 hex>.tmp``
    from just after creating it until it has been renamed onto the target. A file of
    that name beside the target is an orphan when its lock can be taken (its writer is
    gone: the kernel drops the locks of a dead process) and it is older than
    `_ORPHAN_AGE` seconds; it is then removed, under that lock. A live writer's file is
    never removed, whatever its age. Nothing is done where `fcntl` does not exist.
    """
    if fcntl is None:
        return
    pattern = re.compile(re.escape(f".{base}.") + r"[0-9a-f]{12}\.tmp\Z")
    try:
        names = [name for name in os.listdir(directory) if pattern.match(name)]
    except OSError:
        return
    for name in names:
        tmp = os.path.join(directory, name)
        try:
            fd = os.open(tmp, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
                         | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            continue
        try:
            before = os.fstat(fd)
            if not stat.S_ISREG(before.st_mode) or time.time() - before.st_mtime < _ORPHAN_AGE:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # its writer is alive
            if os.path.samestat(os.lstat(tmp), before):
                os.unlink(tmp)
        except OSError:
            pass  # e.g. removed meanwhile by another writer's clean-up
        finally:
            os.close(fd)


def _fsync_directory(directory):
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return  # e.g. Windows: directories cannot be opened
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_target(path):
    """``(target, atomic)``: where `replace_atomically` writes `path`, and whether through a
    temporary file renamed onto it.

    A symlink's file is replaced, not the link; an existing FIFO, device or ``/dev/fd/N``
    is written in place, since a rename would replace it rather than write to it."""
    path = os.fspath(path)
    try:
        mode = os.stat(path).st_mode  # follows symlinks
    except OSError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        return path, False
    if os.path.islink(path):
        real = os.path.realpath(path)
        if mode is None or (os.path.exists(real) and os.path.samefile(real, path)):
            return real, True
        # a /proc/PID/fd link to a deleted file names no path that could be renamed onto
        return path, False
    return path, True


def replace_atomically(path, write, *, binary=True):
    """Write a file through ``write(fileobj)`` into a temporary file beside `path`, then
    rename it onto `path`: a failure at any point leaves the previous file whole (model
    files; the command line's predictions). A symlink stays: the file it points to is
    replaced. An existing FIFO, character device or ``/dev/fd/N`` is written directly
    (see `_write_target`).

    The temporary file is ``.NAME.<12 hex digits>.tmp`` in the target's directory. A
    writer that is killed leaves it behind; the next successful write of the same
    target removes it once it is older than a minute and no live writer holds its lock
    (`_remove_orphans`). A full disk (or quota, or file size limit) is an `OSError`
    naming `path` and saying that the previous file there is intact."""
    path = os.fspath(path)
    target, atomic = _write_target(path)
    if not atomic:
        try:
            f = open(target, "wb" if binary else "w")
        except OSError as exc:
            raise OSError(exc.errno, f"cannot write {path}: {exc.strerror or exc}") from None
        with f:
            write(f)
        return
    directory = os.path.dirname(os.path.abspath(target))
    base = os.path.basename(target)
    existed = os.path.exists(target)
    try:
        tmp, fd = _create_temp(directory, base)
    except OSError as exc:  # name the user's path, not the temporary file's
        raise OSError(exc.errno, f"cannot write {path}: {exc.strerror or exc}") from None
    written = False
    try:
        try:
            # closing flushes what `write` left buffered: a full disk may show only there
            with os.fdopen(fd, "wb" if binary else "w") as f:
                write(f)
                written = True
                f.flush()
                os.fsync(f.fileno())
                # renamed while still open, so locked: never taken for an orphan
                os.replace(tmp, target)
        except OSError as exc:
            if not written and exc.errno not in _NO_SPACE:
                raise  # e.g. an input of `write` that failed: its own message
            raise _write_error(exc, path, existed) from None
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_directory(directory)
    _remove_orphans(directory, base)


# errors of a write that found no room: the disk, a quota, the file size limit
_NO_SPACE = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC), errno.EFBIG}


def _write_error(exc, path, existed):
    """`exc` of writing the temporary file for `path`, naming `path` and what it holds."""
    kept = (f"the previous {path} is intact" if existed else f"no file was written at {path}")
    message = f"cannot write {path}: {exc.strerror or exc}; {kept}"
    return OSError(exc.errno, message) if exc.errno is not None else OSError(message)


def save_model(estimator, path, *, extra=None):
    """Write a fitted estimator to a model file, atomically.

    Parameters
    ----------
    estimator : PGS or SDCA estimator, or its learner
        A fitted estimator. Its parameters must be None, bool, int, float or str
        (a ``random_state`` RandomState instance is refused: use an int).
    path : str or os.PathLike
        The file to write (suffix ``.pgs`` by convention). An existing file is
        replaced only once the new one is complete; on failure it is left intact.
    extra : dict, optional
        JSON-serialisable data stored in the header's ``"extra"`` field (str keys;
        None, bool, int, float, str, lists and dicts), e.g. hashing options or the
        number of examples consumed from a stream. Read it back with `read_header`
        or ``load_model(path, return_header=True)``. Limits (so that what is written
        can be read): lists and dicts nest at most 63 levels (``extra`` itself is
        one; a non-finite float, stored as an object, is one too), integers have at
        most 4096 bits, and the whole header is at most 64 MiB.

    Raises
    ------
    ModelFileError
        The estimator is not a fitted onlinepgs estimator or learner, holds a value
        the format cannot store, or ``extra`` exceeds the limits above. Nothing is
        written then.
    OSError
        The file cannot be written (the previous file, if any, is intact).
    """
    path = os.fspath(path)
    header, arrays = _encode(estimator, path, extra)
    header_bytes = _header_bytes(header, arrays, path)
    replace_atomically(path, lambda f: _write_zip(f, header_bytes, header["arrays"], arrays))


# ---- reading ---------------------------------------------------------------------------
# What `zipfile` may raise on a damaged archive: its parsing of untrusted bytes is not
# limited to BadZipFile (e.g. NotImplementedError for a garbled version field).
_COMPRESSIONS = {zipfile.ZIP_DEFLATED: "deflate", zipfile.ZIP_BZIP2: "bzip2",
                 zipfile.ZIP_LZMA: "lzma"}
_DAMAGED = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, ValueError,
            NotImplementedError, RuntimeError, OverflowError, IndexError, KeyError,
            struct.error, UnicodeDecodeError)


def _open_archive(path):
    try:
        return zipfile.ZipFile(path, "r")
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except (OSError,) + _DAMAGED as exc:
        hint = ""
        try:
            with open(path, "rb") as f:
                start = f.read(512)
            if start.startswith(b"PK\x03\x04"):
                raise ModelFileError(path, "corrupted file: damaged zip archive "
                                           f"({_describe(exc)})") from None
            if not start:
                hint = " (the file is empty)"
            elif b"\0" not in start:
                hint = " (it looks like a text file: a data file given in place of a model?)"
        except OSError:
            pass
        raise ModelFileError(path, "not an onlinepgs model file: not a zip "
                                   f"archive{hint}") from None


class _Room:
    """The bytes of the archive not yet claimed by the entries read: each entry read is
    checked to be stored (not compressed) and to fit, so whatever an archive's directory
    claims, the entries read, and the arrays allocated for them, add up to at most the
    file's size (no zip bomb: a few KiB declaring gigabytes are refused at once)."""

    def __init__(self, zf):
        self.size = self.left = os.fstat(zf.fp.fileno()).st_size

    def claim(self, info, path):
        if info.compress_type != zipfile.ZIP_STORED:
            method = _COMPRESSIONS.get(info.compress_type, f"method {info.compress_type}")
            raise ModelFileError(path, f"entry {info.filename} is compressed ({method}): a "
                                       "model file holds stored (uncompressed) entries only, "
                                       "as save_model writes them")
        if info.compress_size != info.file_size:
            raise ModelFileError(path, f"corrupted file: the stored entry {info.filename} "
                                       f"has {info.compress_size} bytes for "
                                       f"{info.file_size} bytes of content")
        if info.file_size > self.left or info.header_offset + info.file_size > self.size:
            raise ModelFileError(path, f"corrupted file: entry {info.filename} claims "
                                       f"{info.file_size} bytes, more than the "
                                       f"{self.size}-byte file holds beside the other entries")
        self.left -= info.file_size


def _read_entry(zf, info, path, what):
    try:
        with zf.open(info) as f:
            return f.read()
    except (OSError,) + _DAMAGED as exc:
        raise ModelFileError(path, f"corrupted file: {what} is damaged "
                                   f"({_describe(exc)})") from None


def _reject_constant(name):
    raise ValueError(f"{name} is not valid JSON")


def _read_raw_header(zf, path, room):
    """The header as parsed JSON (non-finite floats still tagged), format checked."""
    try:
        info = zf.getinfo(_HEADER_ENTRY)
    except KeyError:
        raise ModelFileError(path, "not an onlinepgs model file: the zip archive has no "
                                   "header.json") from None
    room.claim(info, path)
    if info.file_size > _MAX_HEADER_BYTES:
        raise ModelFileError(path, f"malformed header: header.json has {info.file_size} bytes "
                                   f"(at most {_MAX_HEADER_BYTES})")
    data = _read_entry(zf, info, path, "header.json")
    depth = _json_depth(data)
    if depth > _MAX_JSON_DEPTH:
        raise ModelFileError(path, f"malformed header: header.json nests {depth} levels of "
                                   f"lists and objects (at most {_MAX_JSON_DEPTH})")
    try:
        header = json.loads(data.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ModelFileError(path, "malformed header: header.json is not valid JSON "
                                   f"({exc})") from None
    if not isinstance(header, dict):
        raise ModelFileError(path, "malformed header: header.json is not a JSON object")
    if header.get("format") != FORMAT_NAME:
        raise ModelFileError(path, f"not an onlinepgs model file: header format is "
                                   f"{_short(header.get('format'))}, expected {FORMAT_NAME!r}")
    version = header.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ModelFileError(path, f"malformed header: format_version {_short(version)} is not a "
                                   "positive integer")
    if version > FORMAT_VERSION:
        raise ModelFileError(path, f"format_version {version} was written by a newer onlinepgs "
                                   f"(this one reads format_version <= {FORMAT_VERSION}); "
                                   "upgrade onlinepgs to read it")
    for key, kind in (("estimator", str), ("params", dict), ("attributes", dict),
                      ("state", dict), ("arrays", list), ("checksum", dict)):
        if key not in header:
            raise ModelFileError(path, f"malformed header: no {key!r} field")
        if not isinstance(header[key], kind) or _is_float_tag(header[key]):
            raise ModelFileError(path, f"malformed header: {key!r} is a "
                                       f"{type(_from_json(header[key])).__name__}, expected "
                                       f"a {kind.__name__}")
    if not isinstance(header.get("extra", {}), dict) or _is_float_tag(header.get("extra")):
        raise ModelFileError(path, "malformed header: 'extra' is not a JSON object")
    checksum = header["checksum"]
    digest = checksum.get("digest")
    if (checksum.get("algorithm") != "sha256" or not isinstance(digest, str)
            or not re.fullmatch(r"[0-9a-f]{64}", digest)):
        raise ModelFileError(path, f"malformed header: unsupported checksum {_short(checksum)} "
                                   "(expected sha256 with a 64-digit hex digest)")
    _check_table(header["arrays"], path)
    return header


def _check_table(table, path):
    seen = set()
    for i, entry in enumerate(table):
        if not isinstance(entry, dict):
            raise ModelFileError(path, f"malformed header: arrays[{i}] is not a JSON object")
        name, dtype, shape = entry.get("name"), entry.get("dtype"), entry.get("shape")
        if not isinstance(name, str) or not _ARRAY_NAME.match(name):
            raise ModelFileError(path, f"malformed header: arrays[{i}] has the invalid name "
                                       f"{_short(name)}")
        if name in seen:
            raise ModelFileError(path, f"malformed header: array {name} is listed twice")
        seen.add(name)
        try:
            dt = np.dtype(dtype) if isinstance(dtype, str) else None
        except (TypeError, ValueError, SyntaxError):
            dt = None
        if (dt is None or dt.kind not in _ARRAY_KINDS or dt.fields is not None
                or dt.itemsize == 0 or dt.subdtype is not None):
            raise ModelFileError(path, f"malformed header: array {name} has the unsupported "
                                       f"dtype {_short(dtype)}")
        if (not isinstance(shape, list)
                or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                           for n in shape)):
            raise ModelFileError(path, f"malformed header: array {name} has the invalid shape "
                                       f"{_short(shape)}")
        if not isinstance(entry.get("as_object", False), bool):
            raise ModelFileError(path, f"malformed header: array {name} has a non-boolean "
                                       "as_object")


def _read_arrays(zf, header, path, room):
    """Every listed array, checked against its listed dtype and shape; sizes are checked
    against the file's before anything is allocated."""
    arrays = {}
    for entry in header["arrays"]:
        name = entry["name"]
        member = name + ".npy"
        dtype, shape = np.dtype(entry["dtype"]), tuple(entry["shape"])
        try:
            info = zf.getinfo(member)
        except KeyError:
            raise ModelFileError(path, f"missing array {name}: the archive has no entry "
                                       f"{member}") from None
        room.claim(info, path)
        nbytes = dtype.itemsize * math.prod(shape)  # itemsize >= 1 (`_check_table`)
        if info.file_size < nbytes:
            raise ModelFileError(path, f"array {name} is truncated: {info.file_size} bytes for "
                                       f"{nbytes} bytes of data")
        try:
            with zf.open(info) as f:
                arr = _read_npy(f, dtype, shape, name, path)
        except ModelFileError:
            raise
        except (zipfile.BadZipFile, zlib.error) as exc:
            raise ModelFileError(path, f"corrupted file: {member} is damaged "
                                       f"({_describe(exc)})") from None
        except (OSError, TypeError, SyntaxError, MemoryError) + _DAMAGED as exc:
            raise ModelFileError(path, f"array {name} is not a valid .npy entry "
                                       f"({_describe(exc)})") from None
        arrays[name] = arr
    return arrays


def _read_npy(f, dtype, shape, name, path):
    """One .npy entry, checked against the header before any data is allocated."""
    version = _npy.read_magic(f)
    if version == (1, 0):
        found_shape, fortran, found_dtype = _npy.read_array_header_1_0(f)
    elif version == (2, 0):
        found_shape, fortran, found_dtype = _npy.read_array_header_2_0(f)
    else:
        raise ValueError(f"unsupported .npy format version {version}")
    if found_dtype != dtype or found_shape != shape:
        raise ModelFileError(path, f"array {name} has dtype {found_dtype.str} and shape "
                                   f"{found_shape}, but the header lists dtype {dtype.str} "
                                   f"and shape {shape}")
    arr = np.empty(shape, dtype=dtype, order="F" if fortran else "C")
    buffer = memoryview(arr.reshape(-1, order="A").view(np.uint8)) if arr.size else b""
    filled = 0
    while filled < len(buffer):
        n = f.readinto(buffer[filled:])
        if not n:
            raise ValueError(f"the data ends after {filled} of {len(buffer)} bytes")
        filled += n
    if f.read(1):  # also makes zipfile check the entry's CRC-32
        raise ValueError("data after the array's end")
    return np.ascontiguousarray(arr)


def _verify(header, arrays, path):
    if _digest(header, arrays) != header["checksum"]["digest"]:
        raise ModelFileError(path, "corrupted file: checksum mismatch (the header or the "
                                   "arrays changed after the file was written)")


def _read(path, *, verify=True):
    """(raw header, arrays or None) of a model file, checked as far as `verify` asks."""
    with _open_archive(path) as zf:
        room = _Room(zf)
        raw = _read_raw_header(zf, path, room)
        if not verify:
            return raw, None
        arrays = _read_arrays(zf, raw, path, room)
    _verify(raw, arrays, path)
    return raw, arrays


def read_header(path, *, verify=True):
    """The header of a model file, as a dict (see the module docstring).

    Parameters
    ----------
    path : str or os.PathLike
    verify : bool, default=True
        Also read the arrays and check the checksum (so a corrupt file is refused).
        False reads only ``header.json``, which is faster for large models.

    Returns
    -------
    header : dict
        The JSON header, with non-finite floats decoded back to float values.

    Raises
    ------
    ModelFileError
        The file is not a model file this onlinepgs reads, or is corrupt.
    """
    path = os.fspath(path)
    raw, _ = _read(path, verify=verify)
    return _from_json(raw)


def _build(header, arrays, path, sklearn=True):
    """The fitted estimator (or, with ``sklearn=False``, learner) described by a verified
    header and its arrays."""
    name = header["estimator"]
    cls = _classes(sklearn).get(name) if name in _LEARNERS else None
    if cls is None:
        raise ModelFileError(path, f"unknown estimator class {_short(name)} (this onlinepgs "
                                   f"reads {', '.join(_ESTIMATORS)})")

    params = header["params"]
    known = cls().get_params(deep=False)
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise ModelFileError(path, f"parameter(s) {unknown} unknown to this onlinepgs's {name} "
                                   "(written by a newer onlinepgs?); upgrade onlinepgs")
    for key, value in params.items():
        if not (value is None or isinstance(value, (bool, int, float, str))):
            raise ModelFileError(path, f"malformed header: parameter {key} is "
                                       f"{_short(value)}, not a None, bool, int, float or str")
    estimator = cls(**params)
    try:
        estimator._validate_params()
    except ValueError as exc:  # sklearn's InvalidParameterError
        raise ModelFileError(path, f"malformed header: {exc}") from None

    sdca = _is_sdca(cls)
    state = (_build_sdca_state if sdca else _build_state)(header, arrays, path)

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
            raise ModelFileError(path, f"malformed header: attribute {key} is {_short(value)}, "
                                       "not a non-negative integer")
    if cls._classifier:
        classes = attributes["classes_"]
        if not isinstance(classes, np.ndarray) or classes.ndim != 1 or classes.shape[0] < 2:
            raise ModelFileError(path, "malformed model: classes_ is not an array of at "
                                       "least 2 classes")
        expected = 1 if classes.shape[0] == 2 else classes.shape[0]
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
                            n_features_in=attributes["n_features_in_"], solver="sdca")
    estimator._state = state
    estimator._cache = {}
    reason = (_sdca_inconsistency if sdca else _inconsistency)(estimator)
    if reason is not None:
        raise ModelFileError(path, f"inconsistent model: {reason}")
    return estimator


def _build_sdca_state(header, arrays, path):
    """An SDCA model's weights: ``state/coef`` (K, n_features) and ``state/intercept_weight``
    (K,), K problems, as a LinearModel (its parameters and classes are set by `_build`)."""
    if header["state"].get("solver") != "sdca":
        raise ModelFileError(path, f"malformed header: an {header['estimator']} model's state "
                                   "is not marked solver 'sdca'")
    names = {"state/coef", "state/intercept_weight"}
    for entry in header["arrays"]:
        if entry["name"].startswith("state/") and entry["name"] not in names:
            raise ModelFileError(path, f"unexpected array {entry['name']} (not part of an "
                                       "SDCA model)")
    for name in sorted(names):
        if name not in arrays:
            raise ModelFileError(path, f"missing array {name}")
    coef, w0 = arrays["state/coef"], arrays["state/intercept_weight"]
    if coef.dtype != np.float64 or w0.dtype != np.float64 or coef.ndim != 2 or \
            w0.shape != (coef.shape[0],) or coef.shape[0] < 1:
        raise ModelFileError(path, f"array state/coef has dtype {coef.dtype.str} and shape "
                                   f"{coef.shape}, state/intercept_weight {w0.dtype.str} and "
                                   f"{w0.shape}: expected float64 (K, n_features) and (K,)")
    return _SDCAWeights(coef, w0)


class _SDCAWeights:
    def __init__(self, coef, intercept_weight):
        self.coef, self.intercept_weight = coef, intercept_weight
        self.n_problems = coef.shape[0]


# state version 2 files load; the arrays version 3 added are then unknown (NaN)
_READABLE_STATE_VERSIONS = (2, STATE_VERSION)
_ADDED_IN_STATE_3 = ("sum_conj_a", "sum_step_loss_a", "sum_reg_a")


def _build_state(header, arrays, path):
    """The solver state: header scalars and state/ arrays checked against a template."""
    state_json = header["state"]
    version = state_json.get("version")
    if type(version) is not int or version not in _READABLE_STATE_VERSIONS:
        if isinstance(version, int) and not isinstance(version, bool) and version > STATE_VERSION:
            reason = (f"solver state version {version} was written by a newer onlinepgs (this "
                      f"one reads version {STATE_VERSION}); upgrade onlinepgs to read it")
        else:
            reason = (f"solver state version {_short(version)} is not readable by this "
                      f"onlinepgs (it reads version {STATE_VERSION})")
        raise ModelFileError(path, reason)
    config, dim = state_json.get("config"), state_json.get("dim")
    if not isinstance(config, dict):
        raise ModelFileError(path, "malformed header: the solver state has no config object")
    if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
        raise ModelFileError(path, f"malformed header: solver state dim {_short(dim)} is not a "
                                   "positive integer")
    # the main array is checked before the template is allocated: a bogus dim or number
    # of problems must not allocate more than the file holds
    block = arrays.get("state/block_a")
    if block is None:
        raise ModelFileError(path, "missing array state/block_a")
    if block.ndim != 3 or block.shape[:2] != (dim, config.get("n_problems")) \
            or block.shape[2] < 1:
        raise ModelFileError(path, f"array state/block_a has shape {block.shape}, expected "
                                   f"({dim}, {_short(config.get('n_problems'))}, ...) for the "
                                   "solver state's dim and n_problems")
    try:
        template = PGSState(**config, n_features=dim - 1).to_dict()
    except (TypeError, ValueError, OverflowError, MemoryError) as exc:
        raise ModelFileError(path, f"malformed header: invalid solver configuration "
                                   f"({_describe(exc)})") from None
    if template["config"] != config or any(
            type(value) is bool and type(config[key]) is not bool
            for key, value in template["config"].items()):
        raise ModelFileError(path, f"malformed header: invalid solver configuration "
                                   f"{_short(config)}")
    state_dict = {"version": version}
    for key, expected in template.items():
        if key == "version":
            continue
        if isinstance(expected, np.ndarray):
            name = f"state/{key}"
            if name not in arrays and version == 2 and key in _ADDED_IN_STATE_3:
                # written before the online dual estimate existed: unknown from here on
                state_dict[key] = np.full(expected.shape, np.nan)
                continue
            if name not in arrays:
                raise ModelFileError(path, f"missing array {name}")
            arr = arrays[name]
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
            if key not in state_json:
                raise ModelFileError(path, f"malformed header: the solver state has no {key!r}")
            value = state_json[key]
            wanted = float if isinstance(expected, float) else int
            if (isinstance(value, bool) or not isinstance(value, (int, float))
                    or (wanted is int and not (isinstance(value, int) and value >= 0))):
                raise ModelFileError(path, f"malformed header: solver state {key} is "
                                           f"{_short(value)}, expected a "
                                           + ("float" if wanted is float else
                                              "non-negative int"))
            state_dict[key] = value
    for entry in header["arrays"]:
        group, _, key = entry["name"].partition("/")
        if group == "state" and key not in template:
            raise ModelFileError(path, f"unexpected array {entry['name']} (not part of the "
                                       "solver state)")
    try:
        return PGSState.from_dict(state_dict)
    except (TypeError, ValueError, OverflowError, KeyError) as exc:
        raise ModelFileError(path, f"malformed solver state: {exc}") from None


def load_model(path, *, return_header=False):
    """Read a model file written by `save_model`: the fitted estimator, exactly.

    Parameters
    ----------
    path : str or os.PathLike
    return_header : bool, default=False
        Also return the header (as `read_header` does) read from the same file
        in the same pass, e.g. for the ``"extra"`` data saved with the model.

    Returns
    -------
    estimator : PGSClassifier, PGSRegressor, SDCAClassifier or SDCARegressor
        Equal to the saved one: parameters, fitted attributes and solver state;
        `partial_fit` continues exactly where the saved model stopped.
    header : dict
        Only with ``return_header=True``.

    Raises
    ------
    ModelFileError
        Not a model file, a file of a newer format_version, a corrupt file
        (checksum mismatch), a malformed header, missing arrays, arrays of the
        wrong shape or dtype, or an unknown estimator class.
    OSError
        The file cannot be opened (e.g. it does not exist).
    """
    return _load(path, return_header, sklearn=True)


def load_learner(path, *, return_header=False):
    """`load_model` without scikit-learn: the same model as the learner its class stands on.

    A file of a ``PGSClassifier`` gives an `onlinepgs.pgs.PGSClassifierLearner` (and so
    on for ``PGSRegressor``, ``SDCAClassifier``, ``SDCARegressor``): the same parameters,
    fitted attributes and solver state, predicting, certifying and continuing training
    bit for bit as the estimator does. The command line loads models with it, so that
    it never imports scikit-learn. Parameters, returns and errors as `load_model`.

    Examples
    --------
    >>> import os, sys, tempfile
    >>> import numpy as np
    >>> from onlinepgs.pgs import PGSRegressorLearner
    >>> from onlinepgs.model_io import load_learner, save_model
    >>> X = np.arange(20.0).reshape(10, 2); y = X @ [1.0, -1.0]
    >>> reg = PGSRegressorLearner(sigma=1e-2, random_state=0).fit(X, y)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     save_model(reg, os.path.join(tmp, "m.pgs"))
    ...     loaded = load_learner(os.path.join(tmp, "m.pgs"))
    >>> type(loaded).__name__, bool(np.array_equal(loaded.predict(X), reg.predict(X)))
    ('PGSRegressorLearner', True)
    """
    return _load(path, return_header, sklearn=False)


def _load(path, return_header, sklearn):
    path = os.fspath(path)
    raw, arrays = _read(path, verify=True)
    header = _from_json(raw)
    estimator = _build(header, arrays, path, sklearn=sklearn)
    return (estimator, header) if return_header else estimator
