"""scikit-learn-style estimators over the compiled Primal Gradient Solver.

The estimators only validate, order rows and read results out; every example is
processed in the compiled core (`onlinepgs._core._pgs`) with the GIL released.
"""
import contextlib
import numbers
import re
import threading
import weakref

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, check_is_fitted, column_or_1d, validate_data

from onlinepgs._core import CLASSIFICATION_LOSSES, ITERATES, REGRESSION_LOSSES, PGSState
from onlinepgs._core._hashing import records_to_csr
from onlinepgs._core._pgs import check_p, power_is_cheap, row_power_sums

__all__ = ["PGSClassifier", "PGSRegressor", "PGSDivergedError", "ModelTooLargeError"]

# The default of max_model_bytes: 1 GiB of solver state, 2**26 features of a binary
# model with the default iterate and p = 2 (16 bytes each). Real vocabularies pass with
# room to spare (news20: 62k features x 20 classes, 32 bytes each: 40 MB; imdb's 90k
# features: 1.4 MB); one stray index of 4e8 (6.4 GB) does not.
MAX_MODEL_BYTES = 2**30

# Parameters fixed by the solver's state: changing one needs a fresh fit.
_STATE_PARAMS = ("loss", "p", "sigma", "radius", "batch_size", "iterate",
                 "fit_intercept", "intercept_scaling", "epsilon", "n_bits", "hash_seed")

_COMMON_DOC = """
    p : float in (1, 2], default=2.0
        The regularizer is ``||w||_p^2 / (2 (p - 1))``; p < 2 leans towards sparser
        models than p = 2 while staying strongly convex. p may come as close to 1 as
        1 + 2^-23 (1.2e-7; nearer, the power ``|lambda|^(1/(p-1))`` behind the weights
        would amplify each rounding into an error over 1e-9: a ValueError says so).
        Below p = 1.002 the weights stay in the double range by a rescaling pass over
        them each time max |lambda_j| grows ``3.5^(512 (p - 1))``-fold (1.066 at
        p = 1.0001), so training is slower.
    sigma : float > 0, default=1e-4
        Regularization weight (the paper's sigma): the objective is
        ``sigma * r(w) + mean_i sample_weight_i * loss(<w, x_i>, y_i)``.
    radius : "auto", float > 0 or None, default="auto"
        The domain S of w. None: S = R^n (the paper's plain PGS). A number B: the l_p
        ball of radius B. "auto": the ball of radius
        ``sqrt(2 (p - 1) max_i sample_weight_i * loss(0; y_i) / sigma)`` over the rows
        seen so far, which contains the optimum (sigma r(w*) <= F(0)), so the solution
        is that of R^n while the large early steps stay bounded; it is what makes the
        squared and squared-hinge losses (unbounded gradients) safe at small sigma.
    batch_size : int >= 1, default=1
        k rows per step, all evaluated at the same iterate.
    iterate : {"weighted2", "weighted", "average", "last", "random"}, default="weighted2"
        Which iterate the model reports: the average of w_1..w_T with weights
        proportional to t^2 ("weighted2", polynomial-decay averaging) or to t
        ("weighted"), the uniform average, the last iterate, or the paper's uniformly
        random iterate (reservoir-sampled). "weighted2" is the default because it
        gave the best test accuracy after 1, 2 and 5 passes on the IMDB, a9a
        and w8a data (best in 11 of 18 cells, never more than 0.0010 behind;
        docs/benchmarks.md): the early, large steps of PGS count least, while the last
        iterate alone is noisy.
    fit_intercept : bool, default=True
        Learn an intercept as a constant feature of value ``intercept_scaling``
        inside the regularized vector (keeps the objective strongly convex, paper
        Section VII); ``intercept_ = intercept_scaling * w_0``.
    intercept_scaling : float > 0, default=1.0
        The constant feature's value; larger values regularize the intercept less.
    max_epochs : int >= 1, default=5
        Passes over the data made by `fit`.
    tol : float or None, default=None
        With a number, `fit` stops once an epoch's progressive loss has not improved
        on the best so far by ``tol`` for ``n_iter_no_change`` epochs in a row.
    n_iter_no_change : int >= 1, default=5
        See ``tol``.
    shuffle : bool, default=True
        Shuffle the rows before each epoch of `fit` (`partial_fit` keeps the
        caller's order: a stream's order is the caller's).
    random_state : int, RandomState instance or None, default=None
        Seeds the shuffles and the random iterate.
    epsilon : float >= 0, default=0.1
        Width parameter of the huber and epsilon_insensitive losses.
    n_bits : int in [1, 30] or None, default=None
        Feature hashing, as Vowpal Wabbit does: the model has 2**n_bits columns; string
        features of record input are hashed into them (MurmurHash3, signed by the
        hash's top bit) and integer features or matrix columns are taken modulo
        2**n_bits. Memory stays O(2**n_bits) whatever a stream brings. None: no
        hashing; features are column indices and string features are an error.
    hash_seed : int in [0, 2**32), default=0
        Seed of the hash.
    max_model_bytes : int >= 1 or None, default=2**30
        Memory budget of the solver's state, in bytes, when the data decides the
        model's width (``n_bits=None``): training refuses, before allocating, rows
        whose feature indices would make the state larger, with a
        `ModelTooLargeError` naming the row and the column (one stray index of 4e8
        would otherwise make a 6.4 GB model). The state takes
        ``8 * n_problems * f`` bytes per feature, f = 1 (p = 2, iterate "last"), 2 (p = 2
        and an averaged iterate, or p < 2), 4 (p < 2, averaged), plus
        ``16 * n_problems`` for iterate "random" and ``8 * n_problems + 9`` for
        ``batch_size > 1``: the default 1 GiB holds 2**26 features of a binary model with
        the default options. None: no limit. With ``n_bits`` the width is 2**n_bits,
        chosen by you, and not limited.
"""

_THREADS_DOC = """
    Notes
    -----
    Threads may share one estimator. Its training calls (`fit`, `partial_fit`, each
    chunk of `fit_stream`, `onlinepgs.dask`) take turns: each runs whole, after the one
    in progress, so no row is lost and the model is, bit for bit, that of the same
    calls made one after the other in the order they ran. Prediction, ``coef_``,
    ``intercept_``, ``online_stats_`` and `onlinepgs.duality_gap` read one whole
    model: the one before or after a concurrent `partial_fit` call, never one halfway
    through its pass (they wait at most for that one pass); during `fit`, which trains
    a state of its own, they use the previous model without waiting, until fit
    installs the new one. (Attributes read one by one, e.g. ``coef_`` then
    ``intercept_``, may straddle a call: predict reads them at once.)
"""


def _is_records(X):
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
        if record is None:  # says nothing either; `_as_matrix` names it
            continue
        if isinstance(record, dict):
            return True
        if not isinstance(record, (list, tuple)):
            return False
        if len(record):
            return isinstance(record[0], (list, tuple))
    return True


_ROW = re.compile(r"\brow (\d+)(?: of this call)?")


def _in_stream(exc, first):
    """exc (raised by one chunk of `fit_stream`) naming the record of the stream, counted
    from 1, where its message names a row of the chunk (counted from 0); else exc."""
    message = str(exc)
    if not _ROW.search(message):
        return exc
    message = _ROW.sub(lambda m: f"record {first + int(m.group(1)) + 1} of the stream",
                       message)
    try:
        return type(exc)(message)
    except Exception:  # an exception type that takes other arguments: keep it as is
        return exc


def _finite_weights(state):
    """Whether every weight of the state is finite (after divergence it may not be)."""
    with np.errstate(all="ignore"):
        return bool(np.isfinite(state.weights()).all())


# Losses whose derivative is bounded (|l'| <= 1): a non-finite derivative then means a
# non-finite margin, i.e. a model that overflowed before, never a step too large for sigma.
_BOUNDED_DERIVATIVE = ("logistic", "hinge", "smooth_hinge", "absolute", "huber",
                       "epsilon_insensitive")


def _finite_after(state, X):
    """Whether the state is finite after a call on the rows of X, at a cost of O(nnz).

    Every weight where that costs no more than the call (a fit, a large chunk); else the
    scalars, which an overflow of lambda reaches at once where the core keeps N (p < 2
    or a ball: M is refreshed to max |lambda_j|), and for p = 2 on R^n the coordinates
    the rows touched. What remains, averaged sums beyond 1.8e308 with a finite lambda
    (weights near 1e290), is caught where the weights are read (`_weights`).
    """
    K = state.n_problems
    if not sp.issparse(X) or state.dim * K <= 4 * (X.nnz + X.shape[0]):
        return _finite_weights(state)
    with np.errstate(all="ignore"):
        if not all(np.isfinite(a).all() for a in (state.s_a, state.cum_a, state.norm_a,
                                                   state.scale_a)):
            return False
        if state.need_norm:
            return True
        # the intercept's coordinate 0 and each entry's column + 1 (repeats cost less
        # than sorting them out)
        return bool(np.isfinite(state.block_a[0]).all()
                    and np.isfinite(state.block_a[X.indices + 1]).all())


def _heaviest_row(X, sw):
    """(row, sample weight) of the row of largest sample_weight * max_j |x_ij|: the one
    whose gradient moves the solver's sums most (error path only)."""
    if X is None:
        return None, None
    with np.errstate(over="ignore"):
        if sp.issparse(X):
            size = np.asarray(abs(X).max(axis=1).todense()).ravel() if X.nnz else np.zeros(
                X.shape[0])
        else:
            size = np.abs(X).max(axis=1) if X.shape[1] else np.zeros(X.shape[0])
        row = int(np.argmax(sw * np.maximum(size, 1.0)))
    return row, _py(sw[row])


def _overflow_reason(state, X, sw, at=None):
    """Why the state's weights are not finite (or, at row `at`, the margin), and what
    helps, in one sentence."""
    row, weight = _heaviest_row(X, sw)
    heaviest = ("" if row is None else
                f" (the heaviest row of this call is row {row}, sample_weight {weight!r})")
    if at is not None and _finite_weights(state):
        return (f"the margin <w, x> of row {at} overflowed the double range (finite "
                "weights times its values); scale the features down.")
    with np.errstate(all="ignore"):
        lam_finite = bool(np.isfinite(state.lam_a).all())
        last_finite = bool(np.isfinite(state.weights("last")).all())
    if not lam_finite:
        # lambda = -sum_t g_t, g_t = sample_weight * loss' * x: scaling sample_weight and
        # sigma by one factor scales lambda and leaves lambda / (t sigma), the model, as is
        return (f"the solver's running sum of sample_weight * loss' * x overflowed the "
                f"double range{heaviest}; dividing sample_weight and sigma by one "
                f"factor gives the same model with smaller sums.")
    if last_finite:
        return ("the averaged iterate's running sum (the iterates times weights up to "
                "t^2) overflowed the double range although the last iterate is finite; "
                "use iterate='last' or smaller weights (a larger sigma, a smaller radius).")
    return (f"the model's weights exceed the double range (1.8e308){heaviest}: with "
            f"these sample weights and sigma={state.sigma:g} the model cannot be finite; "
            f"use smaller sample weights, a larger sigma or a finite radius.")


def _py(value):
    """A numpy scalar as the plain Python value, for readable messages."""
    return value.item() if isinstance(value, np.generic) else value


def _label_values(values, name, unit="row"):
    """Labels (y or classes) as given, refusing None and a mix of strings and numbers;
    the message names the first offending `unit` (row of y, entry of classes).

    NumPy would turn ``[1, "a"]`` into the strings ``["1", "a"]`` (so label 1 came back
    from predict as "1") and sorting an object array of both raises TypeError; None
    is no label. Only input that NumPy makes strings or objects is looked at, item by
    item: numeric arrays pass at no cost.
    """
    if values is None:  # no y at all: `_as_1d` says so
        return values
    array = np.asarray(values)
    if array.dtype.kind not in "OUS" or (isinstance(values, np.ndarray)
                                         and array.dtype.kind != "O"):
        return values
    items = np.asarray(values, dtype=object).ravel()  # the caller's own objects
    is_none = np.fromiter((item is None for item in items), bool, items.shape[0])
    if is_none.any():
        i = int(np.argmax(is_none))
        raise ValueError(f"{name} contains None ({unit} {i}): every label must be a "
                         "number or a string")
    is_text = np.fromiter((isinstance(item, (str, bytes)) for item in items), bool,
                          items.shape[0])
    if is_text.any() and not is_text.all():
        i, j = int(np.argmax(is_text)), int(np.argmin(is_text))
        first, second = sorted((i, j))
        raise ValueError(f"{name} mixes strings and numbers ({unit} {first}: "
                         f"{_py(items[first])!r}, {unit} {second}: "
                         f"{_py(items[second])!r}); give every label the same type")
    return values


def _as_1d(est, y):
    if y is None:
        raise ValueError(f"{type(est).__name__} requires y to be passed, but the target y is None")
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        return column_or_1d(y, warn=True)
    if y.ndim != 1:
        raise ValueError(f"y should be a 1d array, got an array of shape {y.shape}")
    return y


def _binary_targets(y, classes):
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


class PGSDivergedError(FloatingPointError):
    """A step's loss derivative overflowed (an unbounded loss on R^n with a small sigma).

    ``row``: the row of the call where it happened, and ``reason``: what overflowed and
    what to change, where known (the command line restates them at the file's line).
    """

    def __init__(self, message, row=None, reason=None):
        super().__init__(message)
        self.row, self.reason = row, reason


class ModelTooLargeError(ValueError):
    """Training data whose feature indices would make the model wider than the memory
    budget ``max_model_bytes`` allows (refused before allocating).

    Attributes: ``row`` (the first row of the call needing too much, or None when the
    width is X's declared number of columns), ``column`` (that row's widest column,
    from 0), ``n_features`` (the width asked for), ``needed`` (its bytes of solver
    state) and ``budget`` (max_model_bytes).
    """

    def __init__(self, message, row=None, column=None, n_features=None, needed=None,
                 budget=None):
        super().__init__(message)
        self.row, self.column, self.n_features = row, column, n_features
        self.needed, self.budget = needed, budget


def _size(n_bytes):
    """A byte count for a message: 6.4 GB, 512.0 MB, 1.1 kB."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.1f} {unit}"
    return f"{n_bytes} bytes"


# Each estimator's locks (see _BasePGS._lock), made on first use. Kept outside the
# estimator so that nothing about them is pickled, copied, cloned or compared: a copy
# or an unpickled estimator gets its own on first use.
_LOCKS = weakref.WeakKeyDictionary()
_LOCKS_MADE = threading.Lock()  # makes them once, when two threads ask at once


class _unchanged_on_error:
    """Restore the estimator's attributes if training raises (bad input never half-updates).

    The solver state itself is only touched after every check has passed. The one
    exception is divergence within `partial_fit`, where the state already advanced
    over earlier rows: then the estimator keeps that (consistent) state.
    """

    def __init__(self, est, keep=()):
        self.est = est
        self.keep = keep

    def __enter__(self):
        self.saved = dict(self.est.__dict__)

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None and not issubclass(exc_type, self.keep):
            attributes = self.est.__dict__
            # overwrite, then drop what the call added: a thread predicting meanwhile
            # never finds the fitted attributes missing (clear() then update() would
            # leave a moment without them)
            attributes.update(self.saved)
            for name in [n for n in attributes if n not in self.saved]:
                attributes.pop(name, None)
        return False


@contextlib.contextmanager
def _training(est, keep=()):
    """One training call on `est`: alone (after any other one in progress) and undone if
    it raises (see `_unchanged_on_error`)."""
    with est._lock("_train_lock"), _unchanged_on_error(est, keep):
        yield


def _is_logistic(est):
    return est.loss == "logistic"


class _BasePGS(BaseEstimator):
    _parameter_constraints = {
        "p": [Interval(numbers.Real, 1, 2, closed="right")],
        "sigma": [Interval(numbers.Real, 0, None, closed="neither")],
        "radius": [None, StrOptions({"auto"}), Interval(numbers.Real, 0, None, closed="neither")],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left")],
        "iterate": [StrOptions(set(ITERATES))],
        "fit_intercept": ["boolean"],
        "intercept_scaling": [Interval(numbers.Real, 0, None, closed="neither")],
        "max_epochs": [Interval(numbers.Integral, 1, None, closed="left")],
        "tol": [None, Interval(numbers.Real, 0, None, closed="left")],
        "n_iter_no_change": [Interval(numbers.Integral, 1, None, closed="left")],
        "shuffle": ["boolean"],
        "random_state": ["random_state"],
        "epsilon": [Interval(numbers.Real, 0, None, closed="left")],
        "n_bits": [None, Interval(numbers.Integral, 1, 30, closed="both")],
        "hash_seed": [Interval(numbers.Integral, 0, 2**32 - 1, closed="both")],
        "max_model_bytes": [None, Interval(numbers.Integral, 1, None, closed="left")],
    }

    def __init__(self, loss, *, p=2.0, sigma=1e-4, radius="auto", batch_size=1,
                 iterate="weighted2", fit_intercept=True, intercept_scaling=1.0,
                 max_epochs=5, tol=None, n_iter_no_change=5, shuffle=True,
                 random_state=None, epsilon=0.1, n_bits=None, hash_seed=0,
                 max_model_bytes=MAX_MODEL_BYTES):
        self.loss = loss
        self.p = p
        self.sigma = sigma
        self.radius = radius
        self.batch_size = batch_size
        self.iterate = iterate
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.max_epochs = max_epochs
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.shuffle = shuffle
        self.random_state = random_state
        self.epsilon = epsilon
        self.n_bits = n_bits
        self.hash_seed = hash_seed
        self.max_model_bytes = max_model_bytes

    # ---- hooks for the classifier / regressor ------------------------------------------
    _classifier = False

    # ---- threads ----------------------------------------------------------------------
    # "_train_lock" serializes the training calls (fit, partial_fit, fit_stream's
    # chunks, onlinepgs.dask): partial_fit runs the core on the state's arrays with the
    # GIL released, and a concurrent call widening the model reallocates them under it.
    # "_state_lock" is held only while the installed state changes (a partial_fit
    # pass, installing a fit's new state) and while weights are read from it, so that
    # readers see a whole model and wait for at most one partial_fit pass (fit trains a
    # state of its own and installs it at the end).
    def _lock(self, name):
        """The estimator's reentrant lock `name` ("_train_lock" or "_state_lock")."""
        locks = _LOCKS.get(self)
        if locks is None:
            with _LOCKS_MADE:
                locks = _LOCKS.setdefault(self, {"_train_lock": threading.RLock(),
                                                 "_state_lock": threading.RLock()})
        return locks[name]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    # ---- validation -------------------------------------------------------------------
    def _check_finite_params(self):
        for name in ("p", "sigma", "radius", "intercept_scaling", "epsilon", "tol"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str) and not np.isfinite(value):
                raise ValueError(f"The '{name}' parameter of {type(self).__name__} "
                                 f"must be finite, got {value!r}.")
        check_p(float(self.p))  # before the data: p too near 1 is refused with its reason

    def _as_matrix(self, X, fitted):
        """Record input as CSR, and every input folded into 2**n_bits columns when hashing."""
        n_bits = self.n_bits
        if _is_records(X):
            try:
                missing = X.index(None)  # compared by identity first: C speed
            except ValueError:
                missing = None
            if missing is not None:
                raise ValueError(f"row {missing} is None: expected a dict {{feature: "
                                 "value} or a sequence of (feature, value) pairs")
            # Without hashing an integer feature is a column index, and a record may name
            # one the model has not seen: training grows the model, as a wider CSR chunk
            # does (so fit_stream does not depend on chunk_rows), and prediction gives it
            # weight 0 (_decision). Hence no limit on the indices (-1).
            data, indices, indptr, width = records_to_csr(
                X, -1 if n_bits is None else n_bits, self.hash_seed, -1)
            if n_bits is not None:
                width = 2**n_bits
            elif fitted:
                width = max(width, self.n_features_in_)
            X = sp.csr_matrix((data, indices, indptr), shape=(indptr.shape[0] - 1, width))
            X.sum_duplicates()  # hash collisions add up
            return X
        if n_bits is None:
            return X
        width = 2**n_bits
        if not sp.issparse(X):
            X = sp.csr_matrix(check_array(X, dtype=np.float64, input_name="X"))
        X = X.tocsr()
        if X.shape[1] > width:
            # new arrays throughout: sum_duplicates sorts in place, never the caller's data
            X = sp.csr_matrix((X.data.copy(), X.indices & (width - 1), X.indptr.copy()),
                              shape=(X.shape[0], width))
            X.sum_duplicates()
        elif X.shape[1] < width:
            X = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], width))
        return X

    def _validate_X(self, X, *, reset):
        """CSR float64 (not copied when it already is one) or C-contiguous dense float64."""
        records = _is_records(X)
        X = self._as_matrix(X, fitted=not reset)
        if sp.issparse(X):
            # records declare no width: a first chunk of empty records starts a model of
            # no features, which later chunks grow
            X = check_array(X, accept_sparse="csr", dtype=np.float64,
                            accept_large_sparse=True, input_name="X",
                            ensure_min_features=0 if records else 1)
            if not X.has_canonical_format:
                # the k = 1 step and ||g_t||_q assume one entry per (row, column)
                X = X.copy()
                X.sum_duplicates()
            if not all(a.flags.c_contiguous for a in (X.data, X.indices, X.indptr)):
                # strided views (e.g. the .real of a complex matrix): the core reads raw
                # pointers
                X = sp.csr_matrix((np.ascontiguousarray(X.data),
                                   np.ascontiguousarray(X.indices),
                                   np.ascontiguousarray(X.indptr)), shape=X.shape)
            if reset:
                self.n_features_in_ = X.shape[1]
            return X
        if reset:
            X = validate_data(self, X, dtype=np.float64, order="C", reset=True)
        else:
            X = validate_data(self, X, dtype=np.float64, order="C", reset=False)
        return X

    def _validate_weights(self, sample_weight, n_rows):
        if sample_weight is None:
            return np.ones(n_rows)
        sw = np.asarray(sample_weight, dtype=np.float64)
        if sw.ndim == 0:
            sw = np.full(n_rows, float(sw))
        if sw.shape != (n_rows,):
            raise ValueError(f"sample_weight has shape {sw.shape}, expected ({n_rows},)")
        bad = np.flatnonzero(~np.isfinite(sw) | (sw < 0))
        if bad.size:
            raise ValueError(f"sample_weight must be finite and >= 0; row {bad[0]} "
                             f"has {_py(sw[bad[0]])!r}")
        return np.ascontiguousarray(sw)

    def _new_state(self, n_features, n_problems, multiclass, rng):
        """A fresh solver state; its own RNG (the random iterate) is seeded from rng."""
        seed = int(rng.randint(0, 2**31 - 1)) * 2**32 + int(rng.randint(0, 2**31 - 1))
        return PGSState(p=float(self.p), sigma=float(self.sigma),
                        radius=self.radius if self.radius in (None, "auto") else float(self.radius),
                        loss=self.loss, batch_size=int(self.batch_size),
                        iterate=self.iterate, n_problems=n_problems, multiclass=multiclass,
                        fit_intercept=bool(self.fit_intercept),
                        intercept_scaling=float(self.intercept_scaling),
                        epsilon=float(self.epsilon), n_features=n_features, seed=seed)

    def _bytes_per_feature(self, n_problems):
        """Bytes of solver state per feature (PGSState's arrays, see max_model_bytes)."""
        averaged = self.iterate in ("average", "weighted", "weighted2")
        fields = (1 + averaged) * (1 if self.p == 2.0 else 2)  # lam, acc; phi, mark
        per = 8 * n_problems * fields
        if self.iterate == "random":
            per += 16 * n_problems  # snapshots and their versions
        if self.batch_size > 1:
            per += 8 * n_problems + 9  # the mini-batch's gradient and touched marks
        if self.p != 2.0 or self.radius is not None:
            per += 2  # the list of coordinates reached: at most a quarter of the width
        return per

    def _check_width(self, X, n_problems, where=None, have=0):
        """Refuse, before any allocation, a width of X beyond the max_model_bytes budget.

        Only a width the data decides is limited (with n_bits it is 2**n_bits), and
        only growth beyond the `have` features the state already holds: a model keeps
        what it has. ``where(row)`` names a row in the message (default: "row i of
        this call")."""
        budget = self.max_model_bytes
        width = X.shape[1]
        if budget is None or self.n_bits is not None or width <= have:
            return
        per = self._bytes_per_feature(n_problems)
        limit = budget // per  # the most features the budget holds
        if width <= limit:
            return
        row = column = None
        if sp.issparse(X) and X.nnz:
            # CSR holds its rows in order: the first entry beyond the limit is in the
            # first row that needs too much; name that row's widest column
            beyond = np.flatnonzero(X.indices >= limit)
            if beyond.size:
                row = int(np.searchsorted(X.indptr, beyond[0], side="right")) - 1
                column = int(X.indices[X.indptr[row]:X.indptr[row + 1]].max())
                width = column + 1
        needed = width * per
        if row is None:
            at = f"X has {X.shape[1]} columns"
        else:
            at = (f"row {row} of this call" if where is None else where(row)) + (
                f" has a feature at column {column} (from 0)")
        raise ModelTooLargeError(
            f"{at}: a model over {width} features needs {_size(needed)} of solver "
            f"state ({per} bytes a feature), beyond max_model_bytes={budget} "
            f"({limit} features); a stray feature index? Hash the features with n_bits "
            "(2**n_bits columns), or raise max_model_bytes (None: no limit)",
            row=row, column=column, n_features=width, needed=needed, budget=budget)

    def _check_state_params(self):
        changed = [n for n in _STATE_PARAMS if getattr(self, n) != self._state_params[n]]
        if changed:
            raise ValueError(
                f"parameter(s) {changed} changed since training started; partial_fit "
                "continues one solver state, so call fit (or clone the estimator) to "
                "start over with new values")

    # ---- training ---------------------------------------------------------------------
    def _row_power_sums(self, X, passes=1):
        """sum_j |x_ij|^q per row for the regret statistic when p < 2 and k = 1, or None
        where the core's loop takes them itself as cheaply.

        For the p whose q - 1 is a multiple of 1/4 (p = 1.8, 1.5, ...; `power_is_cheap`)
        the core's loop takes them by packed square roots: precomputed (by the same code)
        only when `fit` reuses them over several epochs. For other p NumPy's SIMD power
        is ~3x faster than the scalar exp2(log2) in the loop. p = 2: ||x||^2 comes with
        the margin's loop.
        """
        if self.batch_size != 1 or self.p == 2.0:
            return None
        if power_is_cheap(self.p):
            if passes == 1 or not sp.issparse(X):
                return None
            return row_power_sums(X.data, X.indptr.astype(np.int64, copy=False), self.p)
        q = self.p / (self.p - 1.0)
        # |x|^q may exceed the double range (|x| ~ 1e150): the bound is then honestly inf
        with np.errstate(over="ignore"):
            if not sp.issparse(X):
                return np.ascontiguousarray((np.abs(X) ** q).sum(axis=1))
            powers = np.abs(X.data) ** q if X.nnz else None
        sums = np.zeros(X.shape[0])
        if X.nnz:
            filled = np.diff(X.indptr) > 0
            sums[filled] = np.add.reduceat(powers, X.indptr[:-1][filled])
        return sums

    def _run(self, state, X, y, sw, order, classifier, row_power_sums=None):
        if sp.issparse(X):
            state.run(X.data, X.indices, X.indptr, X.shape[1], y, sw, order, classifier,
                      row_power_sums)
        else:
            state.run(X.ravel(), None, None, X.shape[1], y, sw, order, classifier,
                      row_power_sums)
        if state.diverged:
            row = int(state.diverged_row)
            state.diverged = False
            if self.loss in _BOUNDED_DERIVATIVE:
                # the derivative is finite at any finite margin: the margin was not,
                # because the model (or the margin's sum) had overflowed
                reason = _overflow_reason(state, X, sw, at=row)
                kept = ("The model keeps the state before that step."
                        if _finite_weights(state) else
                        "The model is not usable; fit again with other parameters.")
                raise PGSDivergedError(
                    f"PGS diverged at row {row} of this call (step {state.t + 1}): "
                    f"{reason} {kept}", row=row, reason=reason)
            if self.radius is None:
                advice = (f"Its gradient is unbounded, so on R^n (radius=None) a small "
                          f"sigma={self.sigma:g} lets the first steps of size 1/(t sigma) "
                          "blow up; use radius='auto' (or a finite radius) or a larger "
                          "sigma.")
            else:
                advice = (f"Even on the ball (radius={self.radius!r}) sigma={self.sigma:g} "
                          "makes the steps of size 1/(t sigma) overflow; use a larger sigma.")
            kept = ("The model keeps the state before that step."
                    if _finite_weights(state) else
                    "The weights before that step had overflowed already: the model is "
                    "not usable; fit again with other parameters.")
            reason = f"the {self.loss!r} loss's derivative overflowed. {advice}"
            raise PGSDivergedError(
                f"PGS diverged at row {row} of this call (step {state.t + 1}): {reason} "
                f"{kept}", row=row, reason=reason)
        if not _finite_after(state, X):
            # the last guard: no path may hand out a non-finite model
            reason = _overflow_reason(state, X, sw)
            row, _ = _heaviest_row(X, sw)
            raise PGSDivergedError(
                f"PGS overflowed in this call (after step {state.t}): {reason} The model is "
                "not usable; fit again with other parameters.", row=row, reason=reason)

    def _fit(self, X, y, sample_weight):
        with _training(self):
            return self._fit_unguarded(X, y, sample_weight)

    def _fit_unguarded(self, X, y, sample_weight):
        self._validate_params()
        self._check_finite_params()
        X = self._validate_X(X, reset=True)
        y_core, n_problems, multiclass, extra = self._encode_targets(X, y, fit=True)
        sw = self._validate_weights(sample_weight, X.shape[0])
        if X.shape[0] and not sw.any():
            raise ValueError("sample_weight is zero for every row: there is nothing to fit")
        self._check_width(X, n_problems)  # a new state, whatever a former fit had
        rng = check_random_state(self.random_state)
        state = self._new_state(X.shape[1], n_problems, multiclass, rng)
        n = X.shape[0]
        power_sums = self._row_power_sums(X, passes=self.max_epochs)
        best, stall, epochs = np.inf, 0, 0
        for _ in range(self.max_epochs):
            order = rng.permutation(n).astype(np.int64) if self.shuffle else np.arange(n, dtype=np.int64)
            before = (state.sum_weighted_loss, state.sum_weight)
            self._run(state, X, y_core, sw, order, self._classifier, power_sums)
            epochs += 1
            if self.tol is not None:
                w = state.sum_weight - before[1]
                epoch_loss = (state.sum_weighted_loss - before[0]) / w if w > 0 else 0.0
                stall = stall + 1 if epoch_loss > best - self.tol else 0
                best = min(best, epoch_loss)
                if stall >= self.n_iter_no_change:
                    break
        self._install(state, epochs, **extra)
        return self

    def _partial_fit(self, X, y, sample_weight, classes=None):
        with _training(self, keep=(PGSDivergedError,)):
            return self._partial_fit_unguarded(X, y, sample_weight, classes)

    def _partial_fit_unguarded(self, X, y, sample_weight, classes):
        first = not hasattr(self, "_state")
        if first:
            self._validate_params()
            self._check_finite_params()
        else:
            self._check_state_params()
        X = self._validate_X(X, reset=first)
        y_core, n_problems, multiclass, extra = self._encode_targets(
            X, y, fit=first, classes=classes)
        sw = self._validate_weights(sample_weight, X.shape[0])
        self._check_width(X, n_problems, have=0 if first else self._state.dim - 1)
        # everything is validated: from here on nothing can fail half-way
        power_sums = self._row_power_sums(X)
        order = np.arange(X.shape[0], dtype=np.int64)
        # the installed state changes in place (and may be reallocated to widen it):
        # readers of the weights wait for this pass
        with self._lock("_state_lock"):
            if first:
                state = self._new_state(X.shape[1], n_problems, multiclass,
                                        check_random_state(self.random_state))
            else:
                state = self._state
                if X.shape[1] > self.n_features_in_:
                    state.ensure_dim(X.shape[1])
                    extra["n_features_in_"] = X.shape[1]
            try:
                self._run(state, X, y_core, sw, order, self._classifier, power_sums)
            finally:
                self._install(state, getattr(self, "n_iter_", 0) + 1 if not first else 1,
                              **extra)
        return self

    def fit_stream(self, stream, *, classes=None, chunk_rows=1000):
        """One pass over an iterable of ``(x, y)`` pairs, ``chunk_rows`` at a time.

        ``x`` is a dict ``{feature: value}`` or a sequence of ``(feature, value)`` pairs,
        features being ints (column indices) or, with ``n_bits``, strings (hashed).
        Memory holds one chunk; the model is called once per chunk. Continues the
        current state like `partial_fit`; chunks are rounded up to whole mini-batches, so
        the result does not depend on ``chunk_rows``. This is
        `onlinepgs.streaming.train_stream` over one iterable, which also offers passes,
        a hold-out, checkpoints and resume.

        Parameters
        ----------
        stream : iterable of (x, y)
        classes : array-like or None
            Every label the stream may hold; None: the model's, else the labels of the
            first chunk.
        chunk_rows : int, default=1000

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Naming the record of the stream (counted from 1) where it can.

        Examples
        --------
        >>> from onlinepgs import PGSClassifier
        >>> stream = ({"word=" + w: 1.0} for w in ["good", "bad"] * 50)
        >>> pairs = zip(stream, [1, 0] * 50)
        >>> clf = PGSClassifier(n_bits=10, sigma=1e-2).fit_stream(pairs, classes=[0, 1])
        >>> clf.predict([{"word=good": 1.0}, {"word=bad": 1.0}])
        array([1, 0])
        """
        from onlinepgs.streaming import EmptyStreamError, LearnerError, train_stream
        from onlinepgs.streaming.sources import IterableSource

        if chunk_rows < 1:
            raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows!r}")
        try:
            # a regressor ignores classes, as partial_fit's signature has none
            train_stream(self, [IterableSource(stream)],
                         classes=classes if self._classifier else None,
                         chunk_rows=int(chunk_rows))
        except EmptyStreamError:  # an empty stream leaves the model as it is
            pass
        except LearnerError as exc:
            # the caller knows records of the stream, not rows of a chunk
            raise _in_stream(exc.error, exc.first_record - 1) from None
        return self

    def _install(self, state, epochs, **attributes):
        """Make `state` the model, with fitted `attributes` (classes_, n_features_in_)."""
        with self._lock("_state_lock"):
            for name, value in attributes.items():
                setattr(self, name, value)
            self._state = state
            self._state_params = {n: getattr(self, n) for n in _STATE_PARAMS}
            self._cache = {}
            self.n_iter_ = epochs
            self.t_ = int(state.t)

    # ---- read-out ---------------------------------------------------------------------
    def _weights(self):
        """(coef, intercept) of the installed state: one model, computed once per state.

        A snapshot already taken is returned without waiting; otherwise it is taken
        under the state lock, after the partial_fit pass in progress if any.
        """
        check_is_fitted(self, "_state")
        weights = self._cache.get("W")
        if weights is not None:
            return weights
        with self._lock("_state_lock"):
            cache = self._cache  # the state's and cache's of the same installation
            if "W" not in cache:
                with np.errstate(all="ignore"):
                    W = self._state.weights()  # (1 + n_features, K)
                if not np.isfinite(W).all():
                    # a state that overflowed (its training call said so): never hand
                    # out inf or NaN weights
                    reason = _overflow_reason(self._state, None, None)
                    raise PGSDivergedError(f"the model is not usable: {reason}",
                                           reason=reason)
                coef = np.ascontiguousarray(W[1:].T)
                if self.fit_intercept:
                    intercept = W[0] * self.intercept_scaling
                else:
                    intercept = np.zeros(W.shape[1])
                cache["W"] = (coef, intercept)
            return cache["W"]

    @property
    def online_stats_(self):
        """Online statistics kept by the core (see the README, "Online statistics")."""
        check_is_fitted(self, "_state")
        with self._lock("_state_lock"):  # not halfway through a partial_fit pass
            stats = self._state.stats_dict()
        if self._classifier:
            n = stats["n_examples"]
            stats["progressive_error_rate"] = stats["progressive_mistakes"] / n if n else float("nan")
        else:
            del stats["progressive_mistakes"]
        if stats["regret_bound"].shape == (1,):
            for key in ("regret_bound", "optimization_error_bound", "online_objective",
                        "dual_objective", "online_duality_gap"):
                stats[key] = float(stats[key][0])
        return stats

    def _decision(self, X):
        check_is_fitted(self, "_state")
        coef, intercept = self._weights()
        records = _is_records(X)
        X = self._as_matrix(X, fitted=True)
        if sp.issparse(X):
            X = check_array(X, accept_sparse="csr", dtype=np.float64,
                            accept_large_sparse=True, input_name="X",
                            ensure_min_features=0 if records else 1)
            n = coef.shape[1]
            if X.shape[1] > n:
                # columns the model never saw carry weight 0: drop them (O(nnz)) rather
                # than pad the weights to X's width, which one huge index makes huge
                X = X[:, :n]
            elif X.shape[1] < n:
                coef = coef[:, : X.shape[1]]
            return np.asarray(X @ coef.T) + intercept
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return X @ coef.T + intercept


class PGSClassifier(ClassifierMixin, _BasePGS):
    __doc__ = """Linear classifier trained by the Primal Gradient Solver (streaming, l_p).

    Binary problems use one weight vector; K > 2 classes use K one-vs-rest problems
    updated in the same pass over each row.

    Parameters
    ----------
    loss : {"logistic", "hinge", "squared_hinge", "smooth_hinge"}, default="logistic"
        Loss of the margin; "smooth_hinge" is the quadratically smoothed hinge
        (smoothing 1) of Shalev-Shwartz and Zhang.
""" + _COMMON_DOC + """
    Attributes
    ----------
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    classes_ : ndarray of shape (n_classes,)
    t_ : int
        Solver steps taken so far (the paper's t).
    n_features_in_ : int
    n_iter_ : int
        Passes made by the last `fit` (or `partial_fit` calls so far).
    online_stats_ : dict
        Progressive loss and error rate, the Lemma 1 regret bound and the bound on
        the expected optimization error it implies.
""" + _THREADS_DOC + """
    Examples
    --------
    >>> import numpy as np
    >>> from onlinepgs import PGSClassifier
    >>> rng = np.random.RandomState(0)
    >>> X = rng.randn(200, 5); y = (X[:, 0] + 0.1 * rng.randn(200) > 0).astype(int)
    >>> clf = PGSClassifier(sigma=1e-3, random_state=0).fit(X, y)
    >>> clf.score(X, y) > 0.9
    True
    >>> clf.online_stats_["n_examples"]
    1000
    """
    _classifier = True

    def __init__(self, loss="logistic", *, p=2.0, sigma=1e-4, radius="auto", batch_size=1,
                 iterate="weighted2", fit_intercept=True, intercept_scaling=1.0,
                 max_epochs=5, tol=None, n_iter_no_change=5, shuffle=True,
                 random_state=None, epsilon=0.1, n_bits=None, hash_seed=0,
                 max_model_bytes=MAX_MODEL_BYTES):
        super().__init__(loss, p=p, sigma=sigma, radius=radius, batch_size=batch_size,
                         iterate=iterate, fit_intercept=fit_intercept,
                         intercept_scaling=intercept_scaling, max_epochs=max_epochs, tol=tol,
                         n_iter_no_change=n_iter_no_change, shuffle=shuffle,
                         random_state=random_state, epsilon=epsilon, n_bits=n_bits,
                         hash_seed=hash_seed, max_model_bytes=max_model_bytes)

    _parameter_constraints = {**_BasePGS._parameter_constraints,
                              "loss": [StrOptions(set(CLASSIFICATION_LOSSES))]}

    def _encode_targets(self, X, y, fit, classes=None):
        y = _as_1d(self, _label_values(y, "y"))
        if classes is not None:
            classes = _label_values(classes, "classes", unit="entry")
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]} labels")
        if not fit and classes is None:
            codes = _binary_targets(y, self.classes_)
            if codes is not None:
                return codes, 1, False, {}
        check_classification_targets(y)
        if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
            bad = np.flatnonzero(~np.isfinite(y))[0]
            raise ValueError(f"y contains NaN or infinity (row {bad}: {_py(y[bad])!r})")
        extra = {}
        if fit:
            if classes is None:
                cls = np.unique(y)
            else:
                cls = np.unique(np.asarray(classes))
            if cls.shape[0] < 2:
                raise ValueError(f"{type(self).__name__} needs samples of at least 2 "
                                 f"classes in the data, got one class: {cls.tolist()}")
            extra["classes_"] = cls
        else:
            cls = self.classes_
            if classes is not None and not np.array_equal(np.unique(classes), cls):
                raise ValueError(f"classes={np.unique(classes).tolist()} differs from "
                                 f"the classes of the first call {cls.tolist()}")
        idx = np.searchsorted(cls, y)
        idx_clip = np.minimum(idx, cls.shape[0] - 1)
        unknown = np.flatnonzero(cls[idx_clip] != y)
        if unknown.size:
            raise ValueError(f"label {_py(y[unknown[0]])!r} (row {unknown[0]}) is not one of "
                             f"the classes {cls.tolist()}")
        n_classes = cls.shape[0]
        if n_classes == 2:
            return np.where(idx_clip == 1, 1.0, -1.0), 1, False, extra
        return idx_clip.astype(np.float64), n_classes, True, extra

    def fit(self, X, y, sample_weight=None):
        """Run `max_epochs` passes of PGS over (X, y) from a fresh state.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None
            Each row's loss weight (scales its gradient).

        Returns
        -------
        self
        """
        return self._fit(X, y, sample_weight)

    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """One pass over the rows of (X, y), in order, continuing the current state.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Sparse chunks may have more columns than earlier ones, and records (without
            ``n_bits``) integer features beyond them: the model grows.
        y : array-like of shape (n_samples,)
        classes : array-like, required on the first call
            Every label the stream may contain.
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        self
        """
        if not hasattr(self, "_state") and classes is None:
            raise ValueError("classes must be passed on the first call to partial_fit")
        return self._partial_fit(X, y, sample_weight, classes=classes)

    @property
    def coef_(self):
        coef, _ = self._weights()
        return coef.copy()

    @property
    def intercept_(self):
        _, intercept = self._weights()
        return intercept.copy()

    def decision_function(self, X):
        """Signed scores: shape (n_samples,) for two classes, else (n_samples, n_classes)."""
        scores = self._decision(X)
        return scores.ravel() if scores.shape[1] == 1 else scores

    def predict(self, X):
        """Predicted class labels."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(int)]
        return self.classes_[np.argmax(scores, axis=1)]

    @available_if(_is_logistic)
    def predict_proba(self, X):
        """Class probabilities (logistic loss only; one-vs-rest normalised for K > 2)."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            pos = _sigmoid(scores)
            return np.column_stack([1.0 - pos, pos])
        prob = _sigmoid(scores)
        total = prob.sum(axis=1, keepdims=True)
        return np.divide(prob, total, out=np.full_like(prob, 1.0 / prob.shape[1]),
                         where=total > 0)

    @available_if(_is_logistic)
    def predict_log_proba(self, X):
        """Logarithm of `predict_proba`."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))


def _sigmoid(z):
    out = np.empty_like(z)
    pos = z >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-z[pos]))
    ez = np.exp(z[~pos])
    out[~pos] = ez / (1.0 + ez)
    return out


class PGSRegressor(RegressorMixin, _BasePGS):
    __doc__ = """Linear regressor trained by the Primal Gradient Solver (streaming, l_p).

    Parameters
    ----------
    loss : {"squared", "absolute", "huber", "epsilon_insensitive"}, default="squared"
        "squared" is the paper's ``(z - y)^2`` (no 1/2). Its gradient is unbounded, so
        the theory needs a finite ``radius``.
""" + _COMMON_DOC + """
    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : ndarray of shape (1,)
    t_ : int
    n_features_in_ : int
    n_iter_ : int
    online_stats_ : dict
        Progressive loss, the Lemma 1 regret bound and the optimization-error bound.
""" + _THREADS_DOC + """
    Examples
    --------
    >>> import numpy as np
    >>> from onlinepgs import PGSRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = rng.randn(500, 3); y = X @ [1.0, -2.0, 0.5] + 0.01 * rng.randn(500)
    >>> reg = PGSRegressor(sigma=1e-3, radius=10.0, max_epochs=20, random_state=0).fit(X, y)
    >>> reg.score(X, y) > 0.99
    True
    """

    def __init__(self, loss="squared", *, p=2.0, sigma=1e-4, radius="auto", batch_size=1,
                 iterate="weighted2", fit_intercept=True, intercept_scaling=1.0,
                 max_epochs=5, tol=None, n_iter_no_change=5, shuffle=True,
                 random_state=None, epsilon=0.1, n_bits=None, hash_seed=0,
                 max_model_bytes=MAX_MODEL_BYTES):
        super().__init__(loss, p=p, sigma=sigma, radius=radius, batch_size=batch_size,
                         iterate=iterate, fit_intercept=fit_intercept,
                         intercept_scaling=intercept_scaling, max_epochs=max_epochs, tol=tol,
                         n_iter_no_change=n_iter_no_change, shuffle=shuffle,
                         random_state=random_state, epsilon=epsilon, n_bits=n_bits,
                         hash_seed=hash_seed, max_model_bytes=max_model_bytes)

    _parameter_constraints = {**_BasePGS._parameter_constraints,
                              "loss": [StrOptions(set(REGRESSION_LOSSES))]}

    def _encode_targets(self, X, y, fit, classes=None):
        y = _as_1d(self, y)
        try:
            y = y.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"y must be numeric for a regressor: {exc}") from None
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]} targets")
        if not np.all(np.isfinite(y)):
            bad = np.flatnonzero(~np.isfinite(y))[0]
            raise ValueError(f"y contains NaN or infinity (row {bad}: {_py(y[bad])!r})")
        return np.ascontiguousarray(y), 1, False, {}

    def fit(self, X, y, sample_weight=None):
        """Run `max_epochs` passes of PGS over (X, y) from a fresh state.

        Returns
        -------
        self
        """
        return self._fit(X, y, sample_weight)

    def partial_fit(self, X, y, sample_weight=None):
        """One pass over the rows of (X, y), in order, continuing the current state.

        Returns
        -------
        self
        """
        return self._partial_fit(X, y, sample_weight)

    @property
    def coef_(self):
        coef, _ = self._weights()
        return coef[0].copy()

    @property
    def intercept_(self):
        _, intercept = self._weights()
        return intercept.copy()

    def predict(self, X):
        """Predicted targets."""
        return self._decision(X).ravel()
