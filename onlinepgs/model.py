"""The fitted linear model as a value: weights, intercepts, classes and the objective.

Every estimator of the package (PGS and SDCA, with or without scikit-learn) gives its
fitted model as a `LinearModel` through its ``model_`` property. Model files, duality-gap
certificates (`onlinepgs.duality_gap`), the command line (predict, eval, info, gap) and
the Dask layer take this one value; none of them needs the solver that trained it. It
imports no scikit-learn.

Examples
--------
>>> import numpy as np
>>> from onlinepgs.model import LinearModel
>>> model = LinearModel(coef=[[1.0, -1.0]], intercept_weight=[0.5], classes=["no", "yes"],
...                     loss="logistic", sigma=1e-3)
>>> model.decision_function([[2.0, 0.0], [0.0, 2.0]])
array([ 2.5, -1.5])
>>> model.predict([{0: 2.0}, {1: 2.0}])
array(['yes', 'no'], dtype='<U3')
>>> model.predict_proba([[0.0, 0.5]]).round(3)
array([[0.5, 0.5]])
"""
import copy

import numpy as np

from onlinepgs._checks import (as_matrix, available_if, check_csr, check_dense, encode_targets,
                               is_records, single_record)
from onlinepgs._options import MULTI_CLASS_LOSS  # the loss each multi_class needs
from onlinepgs.features import parse_interactions
from onlinepgs._csr import sparse as sp  # scipy.sparse, imported when first needed
from onlinepgs._weights import SparseWeights

__all__ = ["LinearModel"]

_PROBABILISTIC = ("logistic",)


def _sigmoid(z):
    out = np.empty_like(z)
    pos = z >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-z[pos]))
    ez = np.exp(z[~pos])
    out[~pos] = ez / (1.0 + ez)
    return out


def softmax(scores):
    """Row-wise softmax of (rows, K) scores, shifted by each row's largest score (no
    overflow at any finite score)."""
    shifted = scores - scores.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=1, keepdims=True)


def proba_from_scores(scores, multi_class="ovr", n_classes=None):
    """Class probabilities of the logistic loss from `decision_function`'s scores: the
    sigmoid for two classes; for K > 2, the softmax of the scores (multinomial) or the
    one-vs-rest sigmoids normalised; 1 for a model of one class (``n_classes=1``: a
    classifier that has seen one label, `learn_one`)."""
    if n_classes == 1:
        return np.ones((scores.shape[0], 1))
    if scores.ndim == 1:
        pos = _sigmoid(scores)
        return np.column_stack([1.0 - pos, pos])
    if multi_class == "multinomial":
        return softmax(scores)
    prob = _sigmoid(scores)
    total = prob.sum(axis=1, keepdims=True)
    return np.divide(prob, total, out=np.full_like(prob, 1.0 / prob.shape[1]),
                     where=total > 0)


def labels_from_scores(scores, classes):
    """Labels from `decision_function`'s scores: ``classes[1]`` where a binary score is
    positive (else ``classes[0]``), the argmax's class for K > 2, the one class of a
    model of one; classes None (a regressor): the scores, its targets."""
    if classes is None:
        return scores
    if classes.shape[0] == 1:
        return classes[np.zeros(scores.shape[0], dtype=int)]
    if scores.ndim == 1:
        return classes[(scores > 0).astype(int)]
    return classes[np.argmax(scores, axis=1)]


class LinearModel:
    """A fitted linear model: ``score_k(x) = <coef[k], x> + intercept[k]``, k one problem.

    One row of weights per problem: one for a binary classifier (the score of
    ``classes[1]``) and for a regressor, K for K > 2 classes (one-vs-rest, or coupled by
    a multiclass loss: ``multi_class``). The
    intercept is the weight ``intercept_weight`` of a constant feature of value
    ``intercept_scaling`` inside the regularized vector (0 without ``fit_intercept``).
    The objective the weights were trained for is part of the value, so that it can be
    certified (`onlinepgs.duality_gap`):
    ``P(w) = sigma ||w||_p^2 / (2 (p - 1)) + l1 ||w||_1
    + (1 / sum_i c_i) sum_i c_i loss(<w, x_i>; y_i)`` over R^n (``radius`` None) or the
    l_p ball of radius ``radius``.

    The weights are held dense (an ndarray) or sparse (`onlinepgs._weights.SparseWeights`:
    the indices and values of the non-zeros, NumPy arrays), as ``coef`` is given; a
    sparse model scores without ever densifying (a 2**24 x 20 model with 1% non-zeros
    takes 40 MB, not 2.7 GB) and gives the dense model's scores: bit for bit on sparse
    input, to rounding on dense input (each score within ``2 n u sum_j |x_j w_j|``, n
    the row's non-zeros, u = 2**-53). `sparse` / `dense` convert; `n_nonzero` and
    `density` count.

    Parameters
    ----------
    coef : array-like, scipy.sparse matrix or SparseWeights, shape (n_problems, n_features)
        Dense weights (held dense; a read-only C-contiguous float64 array owning its
        data is held as it is, otherwise copied) or sparse ones (held sparse, explicit
        zeros dropped).
    intercept_weight : array-like of shape (n_problems,), default=zeros
        The constant feature's weights (``intercept = intercept_scaling *
        intercept_weight``).
    classes : array-like of shape (n_classes,) or None, default=None
        Sorted distinct labels of a classifier (None: a regressor).
    loss : str, default="logistic"
    epsilon : float, default=0.1
        Width of the huber and epsilon_insensitive losses.
    p, sigma, l1 : float, defaults 2.0, 1e-4, 0.0
    radius : float or None, default=None
        The domain's radius (for PGS's "auto", the radius the training reached).
    fit_intercept : bool, default=True
    intercept_scaling : float, default=1.0
    n_bits : int or None, default=None
        Records' string features are hashed into 2**n_bits columns (and integer
        features or matrix columns taken modulo 2**n_bits), as in training.
    hash_seed : int, default=0
    interactions : list of str or None, default=None
        Interactions generated from records' namespaces, as in training
        (`onlinepgs.features.parse_interactions`; needs ``n_bits``).
    n_features_in : int or None, default=None
        Columns of the training matrices (dense input must have as many); default the
        width of coef.
    solver : str, default="pgs"
        The solver's name ("pgs" or "sdca"), informational.
    multi_class : {"ovr", "multinomial", "crammer_singer"}, default="ovr"
        How a classifier of K > 2 classes was trained: K one-vs-rest problems of
        ``loss``, the multinomial logistic loss of the K scores (``loss="logistic"``;
        ``predict_proba`` is their softmax) or Crammer and Singer's multiclass hinge
        (``loss="hinge"``; no probabilities). ``predict`` is the argmax for all three.
        Two classes: the binary model whatever its value (multinomial is then the
        logistic loss, crammer_singer the hinge). A regressor: "ovr".
    scales : array-like of shape (n_features + 1,), (coordinates, values) or None, default=None
        A model of the adaptive geometry (``geometry="adaptive"``): the scale s_j of each
        coordinate, the intercept's constant feature first, 1 where training saw no
        value; its objective is taken on the scaled weights ``s_j w_j``
        (`onlinepgs.duality_gap` certifies that one). Given whole, or as the pair of
        the coordinates whose scale is not 1 (strictly increasing, in ``[0,
        n_features]``) and their scales, which is how a wide model holds them (a
        2**26-column model's scales whole take 512 MB). None: the global geometry,
        whose objective is on the weights as they are.

    Attributes
    ----------
    coef : ndarray of shape (n_problems, n_features)
        The weights, dense (a sparse model builds the array on each access: O(K d)
        memory; `coef_sparse` does not).
    intercept : ndarray of shape (n_problems,)
    n_problems, n_features, n_nonzero : int
    density : float
    is_sparse : bool
    scales : ndarray of shape (n_features + 1,) or None
        The scales whole (built on each access from a pair: prefer `scale_pairs` or
        `scales_at`).
    """

    def __init__(self, coef, intercept_weight=None, *, classes=None, loss="logistic",
                 epsilon=0.1, p=2.0, sigma=1e-4, l1=0.0, radius=None, fit_intercept=True,
                 intercept_scaling=1.0, n_bits=None, hash_seed=0, n_features_in=None,
                 solver="pgs", interactions=None, multi_class="ovr", scales=None):
        if sp.issparse(coef) and not isinstance(coef, SparseWeights):
            coef = SparseWeights.from_scipy(coef)
        if isinstance(coef, SparseWeights):
            self._coef, self._sparse = None, coef
        elif (isinstance(coef, np.ndarray) and coef.dtype == np.float64 and coef.ndim == 2
              and coef.flags.c_contiguous and not coef.flags.writeable and coef.base is None):
            # a value already (read-only, owning its data): held as it is, not copied (a
            # model file's 2**24 weights loaded once, not twice)
            self._coef, self._sparse = coef, None
        else:
            coef = np.array(coef, dtype=np.float64, order="C", ndmin=2)
            if coef.ndim != 2:
                raise ValueError(f"coef must have shape (n_problems, n_features), got "
                                 f"{coef.shape}")
            self._coef, self._sparse = coef, None
            coef.setflags(write=False)  # a value: shared by readers, never changed
        K = coef.shape[0]
        w0 = (np.zeros(K) if intercept_weight is None
              else np.array(intercept_weight, dtype=np.float64, ndmin=1))
        if w0.shape != (K,):
            raise ValueError(f"intercept_weight must have shape ({K},), got {w0.shape}")
        if classes is not None:
            classes = np.asarray(classes)
            expected = 1 if classes.shape[0] <= 2 else classes.shape[0]
            if classes.ndim != 1 or classes.shape[0] < 1 or expected != K:
                raise ValueError(f"{classes.shape[0]} classes need {expected} row(s) of "
                                 f"weights, got {K}")
        elif K != 1:
            raise ValueError(f"a regressor has one row of weights, got {K}")
        self.intercept_weight, self.classes = w0, classes
        self.loss, self.epsilon = loss, float(epsilon)
        self.p, self.sigma, self.l1 = float(p), float(sigma), float(l1)
        self.radius = None if radius is None else float(radius)
        self.fit_intercept, self.intercept_scaling = bool(fit_intercept), float(intercept_scaling)
        self.n_bits, self.hash_seed = n_bits, int(hash_seed)
        self.interactions = parse_interactions(interactions)
        if self.interactions and n_bits is None:
            raise ValueError("interactions need n_bits (they are hashed into 2**n_bits "
                             "columns)")
        self.n_features_in = self.n_features if n_features_in is None else int(n_features_in)
        self.solver = solver
        if multi_class not in MULTI_CLASS_LOSS:
            raise ValueError(f"multi_class must be one of {sorted(MULTI_CLASS_LOSS)}, got "
                             f"{multi_class!r}")
        if multi_class != "ovr" and (classes is None or loss != MULTI_CLASS_LOSS[multi_class]):
            raise ValueError(f"multi_class={multi_class!r} is a classifier's with loss="
                             f"{MULTI_CLASS_LOSS[multi_class]!r}, got "
                             + ("a regressor" if classes is None else f"loss={loss!r}"))
        # K > 2 weight vectors of one loss; with two classes the model is binary whatever
        # the option (multinomial == logistic, crammer_singer == hinge on the margin)
        self.multi_class = multi_class if K > 1 else "ovr"
        w0.setflags(write=False)
        self._set_scales(scales)

    def _set_scales(self, scales):
        """Hold `scales` (see the class's parameter), checked: whole, as a pair, or None."""
        self._scales = self._scale_pairs = None
        if scales is None:
            return
        if isinstance(scales, tuple):
            if len(scales) != 2:
                raise ValueError("scales given as a pair must be (coordinates, values)")
            index = np.array(scales[0], dtype=np.int64, ndmin=1)
            value = np.array(scales[1], dtype=np.float64, ndmin=1)
            if index.ndim != 1 or index.shape != value.shape:
                raise ValueError(f"scales' coordinates and values must be two vectors of "
                                 f"one length, got shapes {index.shape} and {value.shape}")
            if index.size and not (index[0] >= 0 and index[-1] <= self.n_features
                                   and (np.diff(index) > 0).all()):
                raise ValueError(f"scales' coordinates must be strictly increasing in [0, "
                                 f"{self.n_features}]")
            if not (np.isfinite(value).all() and (value > 0).all()):
                raise ValueError("scales must be finite positive numbers")
            index.setflags(write=False)
            value.setflags(write=False)
            self._scale_pairs = index, value
            return
        scales = np.array(scales, dtype=np.float64)
        if scales.shape != (self.n_features + 1,) or not (
                np.isfinite(scales).all() and (scales > 0).all()):
            raise ValueError(f"scales must be {self.n_features + 1} finite positive "
                             f"numbers (the intercept's first), got shape {scales.shape}")
        scales.setflags(write=False)
        self._scales = scales

    @property
    def has_scales(self):
        """Whether the model is of the adaptive geometry (it has scales)."""
        return self._scales is not None or self._scale_pairs is not None

    @property
    def scales(self):
        """The scales of the n_features + 1 coordinates (the intercept's first) as a
        read-only ndarray, or None (the global geometry); held as a pair, they are
        built on each access (O(n_features) memory: prefer `scale_pairs`)."""
        if self._scale_pairs is None:
            return self._scales
        scales = np.ones(self.n_features + 1)
        scales[self._scale_pairs[0]] = self._scale_pairs[1]
        scales.setflags(write=False)
        return scales

    @property
    def scale_pairs(self):
        """(coordinates, values) of the scales that are not 1, the coordinates strictly
        increasing (the intercept's is 0), or None (the global geometry)."""
        if self._scales is None:
            return self._scale_pairs
        index = np.flatnonzero(self._scales != 1.0)
        return index, self._scales[index]

    def scales_at(self, coordinates):
        """The scales of the given coordinates (0 the intercept's, j + 1 column j's; 1
        past the model's width), O(len(coordinates) log(held scales)); None without
        scales."""
        coordinates = np.asarray(coordinates, dtype=np.int64)
        if self._scales is not None:
            out = np.ones(coordinates.shape)
            inside = coordinates <= self.n_features
            out[inside] = self._scales[coordinates[inside]]
            return out
        if self._scale_pairs is None:
            return None
        index, value = self._scale_pairs
        at = np.searchsorted(index, coordinates)
        found = at < index.size
        found[found] = index[at[found]] == coordinates[found]
        out = np.ones(coordinates.shape)
        out[found] = value[at[found]]
        return out

    # ---- what it is ----------------------------------------------------------------------
    @property
    def coef(self):
        """The weights as a read-only ndarray (n_problems, n_features): a sparse model's
        are built on each access (O(K d) memory: prefer `coef_sparse`)."""
        if self._coef is not None:
            return self._coef
        coef = self._sparse.toarray()
        coef.setflags(write=False)
        return coef

    @property
    def coef_sparse(self):
        """The weights as `onlinepgs._weights.SparseWeights` (the held ones, or the
        non-zeros of the dense ones)."""
        return self._sparse if self._sparse is not None else SparseWeights.from_dense(
            self._coef)

    @property
    def is_sparse(self):
        """Whether the weights are held sparse."""
        return self._sparse is not None

    @property
    def n_nonzero(self):
        """Non-zero weights over all problems (intercepts excluded)."""
        if self._sparse is not None:
            return self._sparse.n_nonzero
        return int(np.count_nonzero(self._coef))

    @property
    def density(self):
        """`n_nonzero` over the number of weights (0 for a model of no features)."""
        size = self.n_problems * self.n_features
        return self.n_nonzero / size if size else 0.0

    def sparse(self):
        """The same model with its weights held sparse (self if they are)."""
        return self if self._sparse is not None else self._with(None, self.coef_sparse)

    def dense(self):
        """The same model with its weights held dense (self if they are)."""
        return self if self._sparse is None else self._with(self.coef, None)

    def _with(self, coef, sparse):
        # a copy keeps every other attribute, whatever later versions add
        other = copy.copy(self)
        other._coef, other._sparse = coef, sparse
        return other

    @property
    def intercept(self):
        """The intercepts (``intercept_scaling * intercept_weight``; 0 without one)."""
        if not self.fit_intercept:
            return np.zeros(self.n_problems)
        return self.intercept_weight * self.intercept_scaling

    @property
    def n_problems(self):
        return (self._coef if self._sparse is None else self._sparse).shape[0]

    @property
    def n_features(self):
        return (self._coef if self._sparse is None else self._sparse).shape[1]

    @property
    def is_classifier(self):
        return self.classes is not None

    def __repr__(self):
        kind = (f"{self.classes.shape[0]} classes" if self.is_classifier else "regressor")
        coupled = "" if self.multi_class == "ovr" else f", multi_class={self.multi_class!r}"
        return (f"LinearModel({kind}, {self.n_features} features, loss={self.loss!r}"
                f"{coupled}, p={self.p:g}, sigma={self.sigma:g}, solver={self.solver!r})")

    # ---- prediction ------------------------------------------------------------------------
    def matrix(self, X):
        """X as the model's columns (float64 CSR or dense): records hashed, hashed input
        folded, dense input checked against the training width (NumPy / SciPy only)."""
        X = single_record(X)
        records = is_records(X)
        X = as_matrix(X, self.n_bits, self.hash_seed, self.n_features_in,
                      interactions=self.interactions)
        if sp.issparse(X):
            return check_csr(X, min_features=0 if records else 1)
        return check_dense(X, self.n_features_in)

    def targets(self, y, n_rows):
        """y as (n_rows, n_problems) targets in the loss's encoding: +-1 for classes (one
        column per one-vs-rest problem), the values for a regressor. Labels outside the
        classes are refused, naming the row."""
        y_core, n_problems, multiclass, _ = encode_targets(
            y, n_rows, "the model", self.is_classifier,
            **({"fitted_classes": self.classes} if self.is_classifier else {}))
        if multiclass:  # one-vs-rest: column c is +1 for class c, else -1
            return np.where(y_core[:, None] == np.arange(n_problems), 1.0, -1.0)
        return np.asarray(y_core, dtype=np.float64)[:, None]

    def scores(self, X):
        """(rows, n_problems) scores of a matrix `matrix` has checked. Sparse columns
        past the weights carry weight 0 (dropped, O(nnz)); fewer columns use the first
        weights."""
        if self._sparse is not None:
            return self._sparse.scores(X) + self.intercept
        coef, intercept = self.coef, self.intercept
        if sp.issparse(X):
            n = coef.shape[1]
            if X.shape[1] > n:
                # columns the model never saw carry weight 0: drop them rather than pad
                # the weights to X's width, which one huge index makes huge
                X = X[:, :n]
            elif X.shape[1] < n:
                coef = coef[:, : X.shape[1]]
            return np.asarray(X @ coef.T) + intercept
        return X @ coef.T + intercept

    def decision_function(self, X):
        """Scores: shape (rows,) for one problem (binary, regression), else (rows, K)."""
        scores = self.scores(self.matrix(X))
        return scores.ravel() if scores.shape[1] == 1 else scores

    def predict_from_scores(self, scores):
        """Labels (classifier) or targets (regressor) from `decision_function`'s scores."""
        return labels_from_scores(scores, self.classes)

    def predict(self, X):
        """Predicted labels (classifier) or targets (regressor)."""
        return self.predict_from_scores(self.decision_function(X))

    @available_if(lambda model: model.loss in _PROBABILISTIC)
    def predict_proba(self, X):
        """Class probabilities (the logistic loss): for K > 2 the softmax of the scores
        (multinomial) or the one-vs-rest sigmoids normalised."""
        return proba_from_scores(self.decision_function(X), self.multi_class,
                                 self.classes.shape[0])
