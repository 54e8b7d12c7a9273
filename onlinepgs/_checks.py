"""Input checks shared by every linear model of the package, importing no scikit-learn.

One home for what PGS and SDCA learners, the fitted value (`onlinepgs.model`), the
certificates and the command line check: records and their hashing, matrices (NumPy and
SciPy only), sample weights, labels (THE label check, `check_labels`), target encoding
and random states. The rules about parameters are `onlinepgs._options`' (re-exported
here: `check_params`, `InvalidParameterError`), the errors that name rows
`onlinepgs._row_errors`' (`RowError`, `AtRows`, re-exported too). The scikit-learn estimator classes may
check more on top (feature names, scikit-learn's messages) through the hooks of
`onlinepgs._base`.
"""
import math
import numbers

import numpy as np

from onlinepgs._core._hashing import records_to_csr, records_to_rows
from onlinepgs._csr import like, widen
from onlinepgs._csr import sparse as sp  # scipy.sparse, imported when first needed
from onlinepgs._options import InvalidParameterError, check_params  # noqa: F401
from onlinepgs._row_errors import AtRows, RowError  # noqa: F401 (their home)

__all__ = ["NotFittedError", "ConvergenceWarning", "InvalidParameterError", "RowError",
           "AtRows", "row_of_entry", "check_params",
           "check_labels", "encode_targets", "label_values", "is_records", "single_record",
           "as_matrix", "check_csr", "refuse_stray_columns", "beyond_doubles",
           "check_dense", "check_weights", "check_random_state", "available_if"]


class NotFittedError(ValueError, AttributeError):
    """A model used before it was trained (scikit-learn's exception, by its bases)."""


class ConvergenceWarning(UserWarning):
    """A solver stopped before its tolerance (scikit-learn's estimators warn with its own)."""


def unique(values):
    """``np.unique(values)`` (sorted distinct values, NaNs as one) of numbers without
    np.unique's import of numpy.ma: about 50 ms of a cold command, for a chunk's labels."""
    a = np.asarray(values).ravel()
    if a.dtype.kind not in "biuf":
        return np.unique(a)
    a = np.sort(a)
    keep = np.empty(a.shape, bool)
    keep[:1] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    if a.dtype.kind == "f" and a.size and np.isnan(a[-1]):
        keep[int(np.searchsorted(a, a[-1])) + 1:] = False  # NaNs sort last: keep the first
    return a[keep]


def row_of_entry(X, entry):
    """The row of CSR matrix X that holds its stored entry number `entry` (an index
    into ``X.data`` / ``X.indices``)."""
    return int(np.searchsorted(X.indptr, entry, side="right")) - 1


def py(value):
    """A numpy scalar as the plain Python value, for readable messages."""
    return value.item() if isinstance(value, np.generic) else value


# ---- parameters: their rules are onlinepgs._options' (check_params, InvalidParameterError)
def check_random_state(seed):
    """A RandomState from None, an int or a RandomState (scikit-learn's rule)."""
    if seed is None:
        return np.random.mtrand._rand
    if isinstance(seed, numbers.Integral):
        return np.random.RandomState(seed)
    if isinstance(seed, np.random.RandomState):
        return seed
    raise ValueError(f"{seed!r} cannot be used to seed a numpy.random.RandomState instance")


class available_if:
    """A method that exists only where ``check(obj)`` holds (scikit-learn's `available_if`:
    ``hasattr(model, "predict_proba")`` says whether the loss has probabilities)."""

    def __init__(self, check):
        self.check = check

    def __call__(self, fn):
        self.fn = fn
        self.__doc__ = fn.__doc__
        return self

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self.fn
        if not self.check(obj):
            raise AttributeError(f"This {type(obj).__name__} has no attribute "
                                 f"{self.name!r} (the loss has no probabilities)")
        return self.fn.__get__(obj, owner)


# ---- rows -----------------------------------------------------------------------------------
def is_records(X):
    """A list/tuple of dicts or of (feature, value) sequences, as opposed to a matrix.

    Decided by the first record that is a dict or a non-empty sequence: an empty record
    ``[]`` says nothing (``[[], [("a", 1.0)]]`` is records, ``[[1.0, 2.0]]`` a matrix),
    and a list of only empty sequences is empty records (as a matrix it would have no
    columns, which no estimator takes). A None record says nothing either (the
    records' reader refuses it by its row; taken for a matrix row it gave an error
    about float() of a dict).
    """
    if not isinstance(X, (list, tuple)) or not X:
        return False
    for record in X:
        if record is None:  # says nothing either; `as_matrix` names it
            continue
        if isinstance(record, dict):
            return True
        if not isinstance(record, (list, tuple)):
            return False
        if len(record):
            return isinstance(record[0], (list, tuple))
    return True


def single_record(X):
    """One record (a dict) as a list of it, so that prediction takes one record and
    gives arrays of length 1; any other input as it is (a DOK matrix is a dict too)."""
    return [X] if isinstance(X, dict) and not sp.issparse(X) else X


def as_matrix(X, n_bits, hash_seed, n_features=None, dense=None, interactions=()):
    """Record input as CSR, and every input folded into 2**n_bits columns when hashing.

    ``n_features``: the model's width, the least width of records without hashing (a
    fitted model; None while training starts). ``dense(X)`` makes a dense input a
    float64 array before it is hashed (default `check_dense`; scikit-learn's layer passes
    its check_array). With hashing, records are namespaced rows
    (`onlinepgs._core._hashing.records_to_rows`: string values, nested namespaces) and
    ``interactions`` (normalized, `onlinepgs.features.parse_interactions`) are generated
    from them; a matrix has no namespaces to cross, so with interactions it is refused
    unless its columns already hold them (`onlinepgs.features.expanded_input`). A
    reader's `onlinepgs.features.CrossedRows` becomes its matrix when its hashing is
    this one's (else an error).
    """
    from_reader = getattr(X, "spec", None)
    if from_reader is not None and hasattr(X, "to_csr"):
        from onlinepgs.features import FeatureSpec

        if (n_bits, hash_seed, tuple(interactions or ())) != (
                from_reader.n_bits, from_reader.hash_seed, from_reader.interactions):
            mine = FeatureSpec(n_bits, hash_seed, tuple(interactions or ()))
            raise ValueError(f"these rows were read as {from_reader}, the model hashes as "
                             f"{mine}: read them with the model's hashing")
        return X.to_csr()
    if is_records(X):
        try:
            missing = X.index(None)  # compared by identity first: C speed
        except ValueError:
            missing = None
        if missing is not None:
            raise RowError(missing, " is None: expected a dict {feature: value} or a "
                           "sequence of (feature, value) pairs")
        if n_bits is not None:
            from onlinepgs import features

            ns, hashes, values, indptr, _ = records_to_rows(X, hash_seed)
            return features.to_matrix(features.NamespacedRows(ns, hashes, values, indptr),
                                      features.FeatureSpec(n_bits, hash_seed, interactions))
        # Without hashing an integer feature is a column index, and a record may name
        # one the model has not seen: training grows the model, as a wider CSR chunk
        # does (so fit_stream does not depend on chunk_rows), and prediction gives it
        # weight 0. Hence no limit on the indices (-1).
        data, indices, indptr, width = records_to_csr(
            X, -1 if n_bits is None else n_bits, hash_seed, -1)
        if n_bits is not None:
            width = 2**n_bits
        elif n_features is not None:
            width = max(width, n_features)
        X = sp.csr_matrix((data, indices, indptr), shape=(indptr.shape[0] - 1, width))
        X.sum_duplicates()  # hash collisions add up
        return X
    if interactions:
        from onlinepgs.features import input_is_expanded

        if not input_is_expanded():
            raise ValueError(
                f"interactions {list(interactions)} need records (dicts of features, "
                "nested dicts as namespaces) or files read by the command: a matrix has no "
                "namespaces to cross")
    if n_bits is None:
        return X
    width = 2**n_bits
    if not sp.issparse(X):
        X = sp.csr_matrix((dense or check_dense)(X))
    X = X.tocsr()
    if X.shape[1] > width:
        # new arrays throughout: sum_duplicates sorts in place, never the caller's data
        X = like(X, X.data.copy(), X.indices & (width - 1), X.indptr.copy(),
                 (X.shape[0], width))
        X.sum_duplicates()
    elif X.shape[1] < width:
        X = widen(X, width)
    return X


def _refuse_nonfinite(values, X=None):
    """A non-finite entry of X (its `values`: CSR X's data, or the dense X) as an error
    naming its row and column (the command maps the row to its line; a crossed entry of
    -q that overflowed shows here too)."""
    with np.errstate(invalid="ignore"):
        finite = np.isfinite(values).all() if values.size else True
    if finite:
        return
    what = ("NaN" if np.isnan(values).any()
            else "infinity or a value too large for dtype('float64')")
    at = int(np.flatnonzero(~np.isfinite(np.ravel(values)))[0])
    if X is not None:  # CSR: the entry's row and column
        row, column = row_of_entry(X, at), int(X.indices[at])
    else:
        row, column = divmod(at, values.shape[1] if values.ndim == 2 else 1)
    raise RowError(row, f": Input X contains {what} ({py(np.ravel(values)[at])!r} in "
                   f"column {column}; an interaction of -q whose factors' product overflows "
                   "shows as one)")


def check_csr(X, min_features=1):
    """X as CSR float64 with finite values and at least one row (NumPy / SciPy only)."""
    X = X.tocsr() if sp.issparse(X) else sp.csr_matrix(X)
    if X.dtype.kind == "c":
        raise ValueError("Complex data not supported")
    if X.dtype != np.float64:
        X = X.astype(np.float64)
    _refuse_nonfinite(X.data, X)
    _refuse_empty(X.shape, min_features)
    refuse_stray_columns(X)
    return X


def refuse_stray_columns(X):
    """Refuse a CSR matrix with a column index outside [0, n_features): scipy builds
    one without a word, and the core would read and write outside its state (a negative
    index corrupts the process's memory). The error names the first such entry."""
    indices = X.indices[:X.nnz]
    if not indices.size:
        return
    low, high = indices.min(), indices.max()
    if low >= 0 and high < X.shape[1]:
        return
    entry = int(np.flatnonzero((indices < 0) | (indices >= X.shape[1]))[0])
    row = row_of_entry(X, entry)
    raise ValueError(f"X's column index {int(indices[entry])} (row {row}, entry "
                     f"{entry - int(X.indptr[row])} of the row) is outside the matrix's "
                     f"{X.shape[1]} columns [0, {X.shape[1]}): a CSR matrix's indices "
                     "must be in [0, shape[1])")


def _refuse_empty(shape, min_features):
    # scikit-learn's words, which callers and tests know
    if shape[0] < 1:
        raise ValueError(f"Found array with 0 sample(s) (shape={shape}) while a minimum "
                         "of 1 is required.")
    if shape[1] < min_features:
        raise ValueError(f"Found array with 0 feature(s) (shape={shape}) while a minimum "
                         f"of {min_features} is required.")


def check_dense(X, n_features=None, owner="the model"):
    """X as a C-contiguous 2-D float64 array with finite values, at least one row and
    column, and ``n_features`` columns when given (NumPy only)."""
    if np.iscomplexobj(X):
        raise ValueError("Complex data not supported")
    X = np.asarray(X, dtype=np.float64, order="C")
    if X.ndim != 2:
        raise ValueError(f"Expected a 2-dimensional array, got {X.ndim} dimension(s): "
                         "reshape a single sample with array.reshape(1, -1)")
    _refuse_nonfinite(X)
    _refuse_empty(X.shape, 1)
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"X has {X.shape[1]} features, but {owner} is expecting "
                         f"{n_features} features as input.")
    return X


def check_weight_sum(sw, before=0.0, passes=1, raw=None):
    """Refuse sample weights (class weights applied) whose running sum, from `before`
    (the model's so far) over `passes` passes, leaves the double range: the solver's
    sums and the objective's mean would be infinite (a model of zeros or NaN). The
    error names the row where it does and its weight (`raw`: the sample weights
    before the class weights, named beside the product); dividing every weight by one
    factor (and a fixed sigma by it too) gives the same model."""
    if not sw.shape[0]:
        return
    with np.errstate(over="ignore"):
        running = before + np.cumsum(sw)
        total = before + (running[-1] - before) * passes
    if np.isfinite(total):
        return
    i = int(np.argmax(~np.isfinite(running))) if not np.isfinite(running[-1]) else None
    weighed = raw is not None and bool(np.any(raw != sw))
    why = (f"the sample weights{' (times their class weights)' if weighed else ''} add up "
           "beyond the double range (1.8e308)")
    fix = ("; divide every weight by one factor (with a fixed sigma, sigma too): the "
           "model is the same")
    if i is None:
        raise ValueError(f"{why} over {passes} passes (one pass: {running[-1] - before:g})"
                         f"{fix}")
    weight = f"weight {py(sw[i])!r}"
    if weighed and raw[i] != sw[i]:
        product = f"{py(sw[i])!r} in all" if np.isfinite(sw[i]) else "an overflowing product"
        weight = f"sample weight {py(raw[i])!r} times its class weight ({product})"
    raise RowError(i, f": {why} with this row's {weight} (the sum before it "
                   f"{py(running[i - 1] if i else before)!r}){fix}")


# weights whose largest lies beyond these powers of two are brought near 1 by `in_units`
_FAR_WEIGHT = 2.0 ** 256


def in_units(sw):
    """``(sw * 2**-e, e)``: sample weights >= 0 in units of a power of two near their
    largest when that lies beyond 2**256 or below 2**-256 (e = 0 otherwise, sw as it
    is), for an objective that averages by their sum and so is the same in any unit
    (SDCA's, the certificates'): its sums and per-row products then stay in the
    double range however large or small the weights. Exact (a power of two), but for
    weights below 2**-1074 of the largest."""
    top = float(np.max(sw, initial=0.0))
    if top == 0.0 or 1.0 / _FAR_WEIGHT <= top <= _FAR_WEIGHT:
        return sw, 0
    e = math.frexp(top)[1]
    return np.ldexp(sw, -e), e


def check_weights(sample_weight, n_rows):
    """Sample weights: one finite value >= 0 a row (a scalar: the same for every row)."""
    if sample_weight is None:
        return np.ones(n_rows)
    try:
        sw = np.asarray(sample_weight, dtype=np.float64)
    except OverflowError:
        raise _beyond_doubles("sample_weight must be finite and >= 0; ",
                              np.ravel(np.asarray(sample_weight, dtype=object))) from None
    if sw.ndim == 0:
        sw = np.full(n_rows, float(sw))
    if sw.shape != (n_rows,):
        raise ValueError(f"sample_weight has shape {sw.shape}, expected ({n_rows},)")
    bad = np.flatnonzero(~np.isfinite(sw) | (sw < 0))
    if bad.size:
        raise RowError("sample_weight must be finite and >= 0; ", bad[0],
                       f" has {py(sw[bad[0]])!r}")
    return np.ascontiguousarray(sw)


def beyond_doubles(value):
    """A number that float() cannot take (a Python int, or a fraction, beyond the double
    range) in a message: its size, not its thousand digits."""
    if isinstance(value, int):
        return f"an integer of {len(str(abs(value)))} digits, beyond the double range"
    text = repr(value)
    return (text if len(text) <= 40 else text[:30] + "...") + ", beyond the double range"


def _beyond_doubles(what, values):
    """The RowError of the first of `values` (1-D, objects) that float() cannot take."""
    for row, value in enumerate(values):
        try:
            float(value)
        except OverflowError:
            return RowError(what, row, f" has {beyond_doubles(value)}")
    return ValueError(what + "a value is beyond the double range")


# ---- labels and targets -----------------------------------------------------------------------
def label_values(values, name, unit="row", like=None):
    """Labels (y or classes) as given, refusing None and a mix of strings and numbers;
    the message names the first offending `unit` (row of y, entry of classes). Of a
    mix it names the first label of each type and blames (``RowError.row``) the first
    one unlike `like` (labels of the right type, e.g. the classes), else the first
    unlike the first label.

    NumPy would turn ``[1, "a"]`` into the strings ``["1", "a"]`` (so label 1 came back
    from predict as "1") and sorting an object array of both raises TypeError; None
    is no label. Only input that NumPy makes strings or objects is looked at, item by
    item: numeric arrays pass at no cost.
    """
    if values is None:  # no y at all: `as_1d` says so
        return values
    array = np.asarray(values)
    if array.dtype.kind not in "OUS" or (isinstance(values, np.ndarray)
                                         and array.dtype.kind != "O"):
        return values
    items = np.asarray(values, dtype=object).ravel()  # the caller's own objects
    is_none = np.fromiter((item is None for item in items), bool, items.shape[0])
    if is_none.any():
        i = int(np.argmax(is_none))
        text = (f"{name} contains None (", "): every label must be a number or a string")
        if unit == "row":
            raise RowError(text[0], i, text[1])
        raise ValueError(f"{text[0]}{unit} {i}{text[1]}")
    is_text = np.fromiter((isinstance(item, (str, bytes)) for item in items), bool,
                          items.shape[0])
    if is_text.any() and not is_text.all():
        i, j = int(np.argmax(is_text)), int(np.argmin(is_text))
        first, second = sorted((i, j))
        blame = second
        if like is not None and np.size(like):
            blame = j if isinstance(py(np.asarray(like).ravel()[0]), (str, bytes)) else i
        pieces = (f"{name} mixes strings and numbers (", first, f": {py(items[first])!r}, ",
                  second, f": {py(items[second])!r}); give every label the same type")
        if unit == "row":
            raise RowError(*pieces, row=blame)
        raise ValueError("".join(p if isinstance(p, str) else f"{unit} {p}" for p in pieces))
    return values


def as_1d(y, owner, column=None):
    """y as a 1-D array; a column vector is raveled by ``column(y)`` (default: silently)."""
    if y is None:
        raise ValueError(f"{owner} requires y to be passed, but the target y is None")
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        return column(y) if column is not None else y.ravel()
    if y.ndim != 1:
        raise ValueError(f"y should be a 1d array, got an array of shape {y.shape}")
    return y


def check_discrete(y):
    """Refuse targets a classifier cannot take: non-integral floats (scikit-learn's
    "continuous" type), in scikit-learn's words."""
    if y.dtype.kind == "f" and np.all(np.isfinite(y)) and not np.array_equal(y, np.round(y)):
        raise ValueError("Unknown label type: continuous. Maybe you are trying to fit a "
                         "classifier, which expects discrete classes on a regression "
                         "target with continuous values.")


def check_labels(y, classes):
    """THE label check: the first label of `y` that is not one of `classes`, as
    ``(row, label)`` (row counted from 0, label a plain Python value), or None.

    Every caller words the error in its own terms (a row of a call, a line of a file, a
    record of a stream); the test itself is this one.

    Examples
    --------
    >>> check_labels(np.array([1, 0, 2, 1]), np.array([0, 1]))
    (2, 2)
    >>> check_labels(np.array(["a", "b"]), np.array(["a", "b"])) is None
    True
    """
    y = np.asarray(y).ravel()
    bad = ~np.isin(y, classes)
    if not bad.any():
        return None
    i = int(np.argmax(bad))
    return i, py(y[i])


def binary_targets(y, classes):
    """+1.0 for classes[1] and -1.0 for classes[0] (the encoding of two classes), or None
    when this quick path does not apply or some label is neither. It makes no temporary
    the size of y in floats (Dask's worker processes pay page faults for each: see
    `onlinepgs.dask`), where the general path searches and checks the labels."""
    if classes.shape[0] != 2 or y.dtype.kind not in "biuf" or classes.dtype.kind not in "biuf":
        return None
    if not np.array_equal(classes, np.round(classes)):
        return None  # labels like 0.5 are "continuous" to scikit-learn: its error decides
    positive = y == classes[1]
    if np.count_nonzero(positive) + np.count_nonzero(y == classes[0]) != y.shape[0]:
        return None
    return np.where(positive, 1.0, -1.0)


def encode_labels(y, n_rows, owner, *, fitted_classes=None, classes=None,
                  check_targets=check_discrete, column=None, one_class=False):
    """A classifier's labels as the core's targets: ``(y_core, n_problems, multiclass,
    classes_)``; +-1 for two classes, class indices for K > 2 (one-vs-rest); -1 for a
    model of one class (`learn_one`'s first label, ``one_class``: `classes` of one label
    may start it; onlinepgs._learned_classes).

    ``fitted_classes``: the classes of a trained model (None: training starts, and the
    classes are `classes` or those of y). ``check_targets(y)`` refuses label types a
    classifier cannot take (scikit-learn's layer passes its own check).
    """
    known = fitted_classes if fitted_classes is not None else classes
    y = as_1d(label_values(y, "y", like=known), owner, column)
    if classes is not None:
        classes = label_values(classes, "classes", unit="entry")
    if y.shape[0] != n_rows:
        raise ValueError(f"X has {n_rows} rows but y has {y.shape[0]} labels")
    if fitted_classes is not None and classes is None:
        codes = binary_targets(y, fitted_classes)
        if codes is not None:
            return codes, 1, False, fitted_classes
    check_targets(y)
    if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
        bad = np.flatnonzero(~np.isfinite(y))[0]
        raise RowError("y contains NaN or infinity (", bad, f": {py(y[bad])!r})")
    if fitted_classes is None:
        cls = unique(y) if classes is None else unique(classes)
        if cls.shape[0] < 2 and not (one_class and cls.shape[0] == 1):
            raise ValueError(f"{owner} needs samples of at least 2 classes in the data, "
                             f"got one class: {cls.tolist()}")
    else:
        cls = fitted_classes
        if classes is not None and not np.array_equal(unique(classes), cls):
            raise ValueError(f"classes={np.unique(classes).tolist()} differs from "
                             f"the classes of the first call {cls.tolist()}")
    unknown = check_labels(y, cls)
    if unknown is not None:
        raise RowError(f"label {unknown[1]!r} (", unknown[0], ") is not one of the "
                       f"classes {cls.tolist()}")
    if cls.shape[0] == 1:
        return np.full(y.shape[0], -1.0), 1, False, cls
    idx = np.searchsorted(cls, y)
    if cls.shape[0] == 2:
        return np.where(idx == 1, 1.0, -1.0), 1, False, cls
    return idx.astype(np.float64), cls.shape[0], True, cls


def encode_values(y, n_rows, owner, column=None):
    """A regressor's targets as the core's: finite float64, one a row."""
    y = as_1d(y, owner, column)
    try:
        y = y.astype(np.float64)
    except OverflowError:
        raise _beyond_doubles("y must be finite; ", y) from None
    except (TypeError, ValueError) as exc:
        raise ValueError(f"y must be numeric for a regressor: {exc}") from None
    if y.shape[0] != n_rows:
        raise ValueError(f"X has {n_rows} rows but y has {y.shape[0]} targets")
    if not np.all(np.isfinite(y)):
        bad = np.flatnonzero(~np.isfinite(y))[0]
        raise RowError("y contains NaN or infinity (", bad, f": {py(y[bad])!r})")
    return np.ascontiguousarray(y)


def encode_targets(y, n_rows, owner, classifier, **kwargs):
    """`encode_labels` for a classifier, `encode_values` (no classes) for a regressor."""
    if classifier:
        return encode_labels(y, n_rows, owner, **kwargs)
    return encode_values(y, n_rows, owner, kwargs.get("column")), 1, False, None
