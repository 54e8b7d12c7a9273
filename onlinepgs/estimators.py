"""scikit-learn estimators over the PGS learners (`onlinepgs.pgs`).

`PGSClassifier` and `PGSRegressor` are `onlinepgs.pgs.PGSClassifierLearner` and
`PGSRegressorLearner` (which hold every piece of training) with scikit-learn's base
classes and conventions on top: its parameter validation, feature names, input checks
and their messages (`SklearnLayer`); `SDCAClassifier` and `SDCARegressor` are the
learners of `onlinepgs.sdca` with the same layer.
"""
import numbers

from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (_check_feature_names, check_array, check_is_fitted,
                                      column_or_1d, validate_data)

import numpy as np
import scipy.sparse as sp

from onlinepgs._checks import binary_targets as _binary_targets  # noqa: F401
from onlinepgs._checks import is_records as _is_records  # noqa: F401
from onlinepgs._checks import refuse_stray_columns
from onlinepgs.pgs import (_CLASS_WEIGHT_DOC, _CLASSES_DOC, _COMMON_DOC,  # noqa: F401
                           _STATE_PARAMS,
                           _MULTI_CLASS_DOC, _THREADS_DOC,
                           MAX_MODEL_BYTES, ModelTooLargeError, PGSClassifierLearner,
                           PGSDivergedError, PGSLearner, PGSRegressorLearner,
                           _finite_weights, _training, _unchanged_on_error)
from onlinepgs.sdca import (_SDCACLASSIFIER_DOC, _SDCAREGRESSOR_DOC, SDCAClassifierLearner,
                            SDCARegressorLearner)

__all__ = ["PGSClassifier", "PGSRegressor", "SDCAClassifier", "SDCARegressor",
           "PGSDivergedError", "ModelTooLargeError"]


def sklearn_constraints(constraints):
    """A learner's parameter constraints (`onlinepgs._checks.check_params`' language) as
    scikit-learn's ``_parameter_constraints``: one home for them, two checkers."""
    kinds = {"real": numbers.Real, "int": numbers.Integral}

    def one(c):
        if c is None or isinstance(c, (str, type)):
            return c
        if c[0] == "str":
            return StrOptions(set(c[1]))
        kind, low, high, closed = c
        return Interval(kinds[kind], low, high, closed=closed)

    return {name: [one(c) for c in allowed] for name, allowed in constraints.items()}


class SklearnLayer:
    """scikit-learn's checks in the hooks of `onlinepgs._base.LinearLearner` (mixed in
    before `BaseEstimator`, which then gives get_params, set_params, repr and parameter
    validation)."""

    _convergence_warning = ConvergenceWarning

    @property
    def _owner(self):
        return type(self).__name__

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def _check_fitted(self):
        check_is_fitted(self, "_state")

    def _as_matrix(self, X, fitted):
        # input that reaches the learner as CSR (sparse, or dense hashed by n_bits) never
        # passes validate_data: its feature names are checked here, as validate_data
        # checks a dense X's (recorded on a first fit, else compared: a DataFrame with
        # its columns reordered is refused; a refit on other input drops stale names)
        if not _is_records(X) and (sp.issparse(X) or self._hashing(fitted)[0] is not None):
            _check_feature_names(self, X, reset=not fitted)
        return super()._as_matrix(X, fitted)

    def _check_sparse(self, X, records):
        X = check_array(X, accept_sparse="csr", dtype=np.float64, accept_large_sparse=True,
                        input_name="X", ensure_min_features=0 if records else 1)
        refuse_stray_columns(X)  # (as check_csr does: scikit-learn's checks let them by)
        return X

    def _check_dense(self, X, reset):
        return validate_data(self, X, dtype=np.float64, order="C", reset=reset)

    def _array(self, X):
        return check_array(X, dtype=np.float64, input_name="X")

    def _check_discrete(self, y):
        check_classification_targets(y)

    def _column(self, y):
        return column_or_1d(y, warn=True)


class _PGSEstimator(SklearnLayer, BaseEstimator, PGSLearner):
    """The scikit-learn PGS estimators' shared part: scikit-learn's checks over the
    learner's training (`fit_stream` included)."""


class PGSClassifier(ClassifierMixin, _PGSEstimator, PGSClassifierLearner):
    __doc__ = """Linear classifier trained by the Primal Gradient Solver (streaming, l_p).

    Binary problems use one weight vector; K > 2 classes use K weight vectors: K
    one-vs-rest problems updated in the same pass over each row (the default), or one
    multinomial (softmax) or Crammer-Singer loss of the K scores (``multi_class``).

    Parameters
    ----------
    loss : {"logistic", "hinge", "squared_hinge", "smooth_hinge"}, default="logistic"
        Loss of the margin; "smooth_hinge" is the quadratically smoothed hinge
        (smoothing 1) of Shalev-Shwartz and Zhang.
""" + _COMMON_DOC + _CLASS_WEIGHT_DOC + _MULTI_CLASS_DOC + _CLASSES_DOC + """
    Attributes
    ----------
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    classes_ : ndarray of shape (n_classes,)
    class_counts_ : ndarray of shape (n_classes,)
        With class_weight="balanced" (from the first such call on): each class's rows
        trained on so far, counted by their sample weights; ``class_counts_total_`` their
        sum, added row by row.
    t_ : int
        Solver steps taken so far (the paper's t).
    n_nonzero_ : int
        Non-zero weights over all problems (intercepts excluded); `sparsify` /
        `densify` make ``coef_`` a scipy.sparse.csr_matrix and back, as scikit-learn's.
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
    >>> clf.n_nonzero_, clf.sparsify().coef_.format   # coef_ as scipy's CSR (sparsify)
    (5, 'csr')
    >>> clf.densify().coef_.shape
    (1, 5)
    """
    _parameter_constraints = sklearn_constraints(PGSClassifierLearner._constraints)


class PGSRegressor(RegressorMixin, _PGSEstimator, PGSRegressorLearner):
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
    _parameter_constraints = sklearn_constraints(PGSRegressorLearner._constraints)


class SDCAClassifier(ClassifierMixin, SklearnLayer, BaseEstimator, SDCAClassifierLearner):
    __doc__ = _SDCACLASSIFIER_DOC
    _parameter_constraints = sklearn_constraints(SDCAClassifierLearner._constraints)


class SDCARegressor(RegressorMixin, SklearnLayer, BaseEstimator, SDCARegressorLearner):
    __doc__ = _SDCAREGRESSOR_DOC
    _parameter_constraints = sklearn_constraints(SDCARegressorLearner._constraints)
