"""The linear-model base shared by the PGS and SDCA learners; imports no scikit-learn.

The layers (docs/design/estimators.md):

* the value, `onlinepgs.model.LinearModel`: a fitted model as data (what model files,
  certificates, the command line and Dask take);
* this base, `LinearLearner`: parameters (``get_params`` / ``set_params`` and their
  checks), validation of X (records hashed, CSR or dense float64), sample weights,
  target encoding (binary, one-vs-rest, regression; the label check of
  `onlinepgs._checks`) and prediction through the value (``model_``);
* the learners, which add one solver's training: `onlinepgs.pgs` and `onlinepgs.sdca`'s
  ``*Learner`` classes, used as they are by the command line;
* the scikit-learn estimators (`onlinepgs.estimators`): the learners
  with scikit-learn's base classes and checks on top (its parameter validation, feature
  names, messages), through the hooks below (``_check_fitted``, ``_check_sparse``,
  ``_check_dense``, ``_check_discrete``, ``_column``, ``_array``).
"""
import contextlib
import inspect
import threading
import weakref

import numpy as np

from onlinepgs import _checks, _class_weight, _options
from onlinepgs._checks import NotFittedError, available_if, check_params, is_records
from onlinepgs._csr import sparse as sp  # scipy.sparse, imported when first needed
from onlinepgs.features import parse_interactions
from onlinepgs.model import LinearModel, labels_from_scores, proba_from_scores

__all__ = ["LinearLearner", "ClassifierLearner", "RegressorLearner"]


# Each estimator's locks (see LinearLearner._lock), made on first use. Kept outside the
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


class LinearLearner:
    """What every linear learner of the package shares (see the module docstring).

    A subclass sets ``_solver`` ("pgs" or "sdca": whose rules apply, `onlinepgs._options`),
    ``_constraints`` (its parameters' ranges, `onlinepgs._options.learner_constraints`),
    ``_public_name`` (the class name in model files and messages: the scikit-learn
    estimator's) and implements ``_make_model()`` (the fitted `LinearModel`) and
    training. A fitted learner has ``_state``.
    """

    _classifier = False
    _public_name = None
    _solver = None
    _constraints = {}

    # ---- parameters (scikit-learn's conventions, without it) ------------------------------
    @classmethod
    def _get_param_names(cls):
        signature = inspect.signature(cls.__init__)
        return sorted(name for name, p in signature.parameters.items()
                      if name != "self" and p.kind != p.VAR_KEYWORD)

    def get_params(self, deep=True):
        """The parameters, as scikit-learn's ``get_params`` gives them."""
        return {name: getattr(self, name) for name in self._get_param_names()}

    def set_params(self, **params):
        """Set parameters by name (an unknown name is an error); returns self."""
        valid = self._get_param_names()
        for name, value in params.items():
            if name not in valid:
                raise ValueError(f"Invalid parameter {name!r} for estimator {self._owner}. "
                                 f"Valid parameters are: {valid!r}.")
            setattr(self, name, value)
        return self

    def __repr__(self):
        defaults = {name: p.default for name, p in
                    inspect.signature(type(self).__init__).parameters.items()}
        changed = [f"{name}={value!r}" for name, value in self.get_params().items()
                   if not (defaults.get(name) is value or (
                       isinstance(value, (str, int, float, type(None)))
                       and defaults.get(name) == value))]
        return f"{type(self).__name__}({', '.join(changed)})"

    @property
    def _owner(self):
        """The name in messages and model files."""
        return self._public_name or type(self).__name__

    def _validate_params(self):
        """The parameters' ranges (`onlinepgs._options`; the scikit-learn layer checks
        the same table through scikit-learn's ``_validate_params``)."""
        check_params(self.get_params(deep=False), self._constraints, self._owner)

    def _check_rules(self):
        """The rules on the parameters beyond their ranges (`onlinepgs._options`:
        finite numbers, the combinations the solver refuses), before any data."""
        params = self.get_params(deep=False)
        words = _options.Words(self._owner)
        _options.check_finite(params, self._solver, words)
        _options.learner_rules(params, self._solver, words)

    def _interactions(self):
        """The normalized ``interactions`` parameter (checked by `_check_rules`)."""
        return parse_interactions(getattr(self, "interactions", None))

    def _weight_passes(self):
        """How many times a fit adds up the sample weights (PGS: once an epoch)."""
        return 1

    def _fit(self, X, y, sample_weight):
        with _training(self):
            # a new model: coef_ dense, as scikit-learn's fit gives
            self.__dict__.pop("_sparse_coef", None)
            return self._fit_unguarded(X, y, sample_weight)

    def _fit_inputs(self, X, y, sample_weight):
        """A fit's checked parameters and inputs: ``(X, y_core, n_problems, multiclass,
        fitted attributes, sample weights)``."""
        self._validate_params()
        self._check_rules()
        X = self._validate_X(X, reset=True)
        y_core, n_problems, multiclass, extra = self._encode_targets(X, y, fit=True)
        raw = self._validate_weights(sample_weight, X.shape[0])
        _checks.check_weight_sum(raw)  # "balanced" divides sums of them
        sw = raw
        if self._classifier:
            sw = _class_weight.fit_weights(self, raw, y_core, multiclass, extra)
        _checks.check_weight_sum(sw, passes=self._weight_passes(), raw=raw)
        if X.shape[0] and not sw.any():
            raise ValueError("sample_weight is zero for every row: there is nothing to fit"
                             if getattr(self, "class_weight", None) is None else
                             "sample_weight times class_weight is zero for every row: "
                             "there is nothing to fit")
        return X, y_core, n_problems, multiclass, extra, sw

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

    # ---- hooks (the scikit-learn layer replaces them by its own checks) --------------------
    def _check_fitted(self):
        if not hasattr(self, "_state"):
            raise NotFittedError(f"This {self._owner} instance is not fitted yet. Call 'fit' "
                                 "with appropriate arguments before using this estimator.")

    def _check_sparse(self, X, records):
        return _checks.check_csr(X, min_features=0 if records else 1)

    def _check_dense(self, X, reset):
        X = _checks.check_dense(X, None if reset else self.n_features_in_, self._owner)
        if reset:
            self.n_features_in_ = X.shape[1]
        return X

    def _array(self, X):
        return _checks.check_dense(X)

    def _check_discrete(self, y):
        _checks.check_discrete(y)

    def _column(self, y):
        return y.ravel()

    # ---- input ----------------------------------------------------------------------------
    def _as_matrix(self, X, fitted):
        """Record input as CSR, and every input folded into 2**n_bits columns when hashing."""
        # the fitted width matters to records only (Dask asks unfitted copies, `fitted`
        # meaning "do not reset": hence getattr)
        width = getattr(self, "n_features_in_", None) if fitted else None
        n_bits, seed, interactions = self._hashing(fitted)
        return _checks.as_matrix(X, n_bits, seed, width, self._array,
                                 interactions=interactions)

    def _hashing(self, fitted):
        """(n_bits, hash_seed, interactions) that input is hashed by: a fitted model's
        those it learned with (its columns), as the per-event path hashes, whatever
        set_params set since (partial_fit refuses such a change; fit starts over with the
        parameters)."""
        learned = getattr(self, "_state_params", None) if fitted else None
        if learned is not None and "n_bits" in learned:
            return (learned["n_bits"], learned["hash_seed"],
                    parse_interactions(learned.get("interactions")))
        return self.n_bits, self.hash_seed, self._interactions()

    def _validate_X(self, X, *, reset):
        """CSR float64 (not copied when it already is one) or C-contiguous dense float64."""
        records = is_records(X)
        X = self._as_matrix(X, fitted=not reset)
        if not sp.issparse(X):
            return self._check_dense(X, reset)
        # records declare no width: a first chunk of empty records starts a model of
        # no features, which later chunks grow
        X = self._check_sparse(X, records)
        if not X.has_canonical_format:
            # the k = 1 step and ||g_t||_q assume one entry per (row, column)
            X = X.copy()
            X.sum_duplicates()
        if not all(a.flags.c_contiguous for a in (X.data, X.indices, X.indptr)):
            # strided views (e.g. the .real of a complex matrix): the core reads raw pointers
            X = sp.csr_matrix((np.ascontiguousarray(X.data), np.ascontiguousarray(X.indices),
                               np.ascontiguousarray(X.indptr)), shape=X.shape)
        if reset:
            self.n_features_in_ = X.shape[1]
        return X

    def _validate_weights(self, sample_weight, n_rows):
        return _checks.check_weights(sample_weight, n_rows)

    def _encode_targets(self, X, y, fit, classes=None, one_class=False):
        """``(y_core, n_problems, multiclass, fitted attributes)`` of y for the core
        (`one_class`: `classes` of one label may start a classifier, `learn_one`'s)."""
        kwargs = {"column": self._column}
        if self._classifier:
            kwargs.update(fitted_classes=None if fit else self.classes_, classes=classes,
                          check_targets=self._check_discrete, one_class=one_class)
        y_core, n_problems, multiclass, cls = _checks.encode_targets(
            y, X.shape[0], self._owner, self._classifier, **kwargs)
        extra = {"classes_": cls} if fit and self._classifier else {}
        return y_core, n_problems, multiclass, extra

    # ---- the value and prediction through it ---------------------------------------------
    @property
    def model_(self):
        """The fitted model as a value (`onlinepgs.model.LinearModel`): one snapshot,
        consistent (weights, intercepts and classes of the same model)."""
        self._check_fitted()
        return self._make_model()

    def _scores(self, X):
        """((rows, K) scores of X, classes, multi_class): the model read once, then X
        checked as the learner checks it for prediction; the classes (None: a regressor)
        and how K > 2 scores make probabilities are that model's."""
        model = self.model_
        X = self._prediction_matrix(X)
        return model.scores(X), model.classes, model.multi_class

    def _prediction_matrix(self, X):
        """X checked as the learner checks it for prediction (CSR or dense float64)."""
        X = _checks.single_record(X)
        records = is_records(X)
        X = self._as_matrix(X, fitted=True)
        if sp.issparse(X):
            return self._check_sparse(X, records)
        return self._check_dense(X, reset=False)

    def _weights(self):
        """(coef (K, n_features), intercept (K,)) of the fitted model."""
        model = self.model_
        return model.coef, model.intercept

    # ---- sparse coefficients (scikit-learn's SparseCoefMixin) -------------------------------
    @property
    def n_nonzero_(self):
        """int: the fitted weights that are not zero, over all problems (intercepts
        excluded)."""
        return self.model_.n_nonzero

    def sparsify(self):
        """Make ``coef_`` a `scipy.sparse.csr_matrix`, as scikit-learn's ``sparsify``.

        Predictions (``predict``, ``decision_function``, ``predict_proba``, ``score``)
        are unchanged (bit for bit on sparse input, to rounding on dense input); the
        intercept stays an ndarray. An SDCA model's weights are then also held sparse
        (their non-zeros only: the memory l1 saves). Unlike scikit-learn's, training
        goes on working: ``partial_fit`` trains the solver state as before and keeps
        ``coef_`` sparse; ``fit`` gives a new model, with a dense ``coef_`` (as
        scikit-learn's). A rule of thumb (scikit-learn's): it pays when more than half
        of the weights are zero (``n_nonzero_``).

        Returns
        -------
        self

        Examples
        --------
        >>> import numpy as np
        >>> from onlinepgs.sdca import SDCAClassifierLearner
        >>> rng = np.random.RandomState(0)
        >>> X = rng.randn(200, 50); y = (X[:, 0] + X[:, 1] > 0).astype(int)
        >>> clf = SDCAClassifierLearner(sigma=1e-3, l1=0.05, random_state=0).fit(X, y)
        >>> dense = clf.predict(X)
        >>> clf.n_nonzero_, clf.coef_.shape       # l1: 2 weights of 50 are not zero
        (2, (1, 50))
        >>> clf.sparsify().coef_.nnz, type(clf.coef_).__name__
        (2, 'csr_matrix')
        >>> bool((clf.predict(X) == dense).all()), type(clf.densify().coef_).__name__
        (True, 'ndarray')
        """
        self._check_fitted()
        self._sparse_coef = True
        if isinstance(getattr(self, "_state", None), LinearModel):
            self._state = self._state.sparse()  # SDCA: the model is the state
        return self

    def densify(self):
        """Make ``coef_`` an ndarray again (a no-op if it is one), as scikit-learn's
        ``densify``.

        Returns
        -------
        self
        """
        self._check_fitted()
        self.__dict__.pop("_sparse_coef", None)  # as never sparsified
        return self

    def _coef_out(self, rows):
        """coef_ as the user asked: a fresh ndarray (``rows`` of it), or after
        `sparsify` a scipy CSR matrix (rows kept: a regressor's is (1, n_features))."""
        model = self.model_
        if getattr(self, "_sparse_coef", False):
            return model.coef_sparse.to_scipy()
        return model.coef[rows].copy()


class ClassifierLearner:
    """Prediction of a classifier through its value (mixed into a `LinearLearner`)."""

    _classifier = True

    def decision_function(self, X):
        """Signed scores: shape (n_samples,) for two classes, else (n_samples, n_classes)."""
        scores, _, _ = self._scores(X)
        return scores.ravel() if scores.shape[1] == 1 else scores

    def predict(self, X):
        """Predicted class labels."""
        scores, classes, _ = self._scores(X)
        return labels_from_scores(scores.ravel() if scores.shape[1] == 1 else scores, classes)

    @available_if(_is_logistic)
    def predict_proba(self, X):
        """Class probabilities (logistic loss only): for K > 2 the softmax of the scores
        (multi_class="multinomial") or the one-vs-rest sigmoids normalised."""
        scores, classes, multi_class = self._scores(X)
        return proba_from_scores(scores.ravel() if scores.shape[1] == 1 else scores,
                                 multi_class, classes.shape[0])

    @available_if(_is_logistic)
    def predict_log_proba(self, X):
        """Logarithm of `predict_proba`."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    @property
    def coef_(self):
        """ndarray of shape (1, n_features) or (n_classes, n_features); after
        `sparsify`, a scipy.sparse.csr_matrix of that shape."""
        return self._coef_out(slice(None))

    @property
    def intercept_(self):
        """ndarray of shape (1,) or (n_classes,)."""
        return self.model_.intercept.copy()


class RegressorLearner:
    """Prediction of a regressor through its value (mixed into a `LinearLearner`)."""

    _classifier = False

    def predict(self, X):
        """Predicted targets."""
        scores, _, _ = self._scores(X)
        return scores.ravel()

    @property
    def coef_(self):
        """ndarray of shape (n_features,); after `sparsify`, a scipy.sparse.csr_matrix
        of shape (1, n_features) (scipy's matrices are 2-d)."""
        return self._coef_out(0)

    @property
    def intercept_(self):
        """ndarray of shape (1,)."""
        return self.model_.intercept.copy()
