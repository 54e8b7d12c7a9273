"""SDCA learners: the batch solver of the dual, importing no scikit-learn.

SDCA maximizes the Fenchel dual of the PGS objective one row's dual variable at a time
(`onlinepgs._core._sdca`) and stops on the exact duality gap, a certificate of how far the
model is from the optimum. Input handling (validation, hashing, label encoding,
prediction) is the shared base's (`onlinepgs._base`), so PGS and SDCA read data and score
identically. `SDCAClassifierLearner` / `SDCARegressorLearner` hold the training; the
scikit-learn estimators `onlinepgs.SDCAClassifier` / `SDCARegressor` (defined in
`onlinepgs.estimators`) add scikit-learn's conventions on top.

Examples
--------
>>> import numpy as np
>>> from onlinepgs.sdca import SDCARegressorLearner
>>> rng = np.random.RandomState(0)
>>> X = rng.randn(200, 3); y = X @ [1.0, -2.0, 0.5]
>>> reg = SDCARegressorLearner(sigma=1e-3, tol=1e-10, random_state=0).fit(X, y)
>>> bool(reg.duality_gap_ <= 1e-10 * reg.primal_objective_)
True
>>> reg.model_.solver
'sdca'
"""
import warnings

import numpy as np

from onlinepgs import _options
from onlinepgs._base import ClassifierLearner, LinearLearner, RegressorLearner
from onlinepgs._checks import ConvergenceWarning, check_random_state, in_units
from onlinepgs._core import loss_derivative as _loss_derivative
from onlinepgs._core._sdca import SDCAProblem
from onlinepgs._core._sdca_multiclass import MulticlassSDCA
from onlinepgs._csr import sparse as sp  # scipy.sparse, imported when first needed
from onlinepgs.model import LinearModel
from onlinepgs.pgs import PGSClassifierLearner, PGSRegressorLearner

__all__ = ["SDCAClassifierLearner", "SDCARegressorLearner"]

_COMMON_DOC = """
    p : float in (1, 2], default=2.0
        The regularizer is ``r(w) = ||w||_p^2 / (2 (p - 1))``. For p < 2 each step
        maximizes Prox-SDCA's lower bound of the dual with ``||x_i||_q^2`` in place of
        ``||x_i||^2`` (q = p / (p - 1); Shalev-Shwartz and Zhang, "Proximal stochastic dual coordinate ascent",
        2012, Option I with the l_q dual norm).
    sigma : float >= 0, default=1e-4
        Regularization weight. The objective is ``P(w) = sigma * r(w) + l1 * ||w||_1 +
        (1 / sum_i c_i) sum_i c_i loss(<w, x_i>, y_i)``, c_i the sample weights (1 by
        default; scikit-learn's convention: an integer weight is that many copies of the
        row), the objective `onlinepgs.duality_gap` certifies. ``sigma = 0`` (with
        ``l1 > 0``) is pure l_1 regularization.
    l1 : float >= 0, default=0.0
        l_1 weight (needs p = 2): elastic net for sigma > 0, plain l_1 for sigma = 0.
        SDCA then runs Prox-SDCA with ``g(w) = ||w||^2 / 2 + (l1 / sigma) ||w||_1``
        (Shalev-Shwartz and Zhang, 2012, section 3.1). Pure l_1 runs it on a smoothed problem with a small
        l_2 weight ``smoothing_`` lowered as the target accuracy requires; its certificate
        bounds the l_1 objective's suboptimality (see ``duality_gap_``).
    l1_geometry : {"auto", "l2", "lq"}, default="auto"
        How pure l_1 (``sigma=0, l1 > 0``) is smoothed; ignored otherwise. "l2": section 3.1
        above. "lq": section 3.2, for rows with a small largest entry ``||x_i||_inf`` but a
        large ``||x_i||_2``: ``g(w) = ||w||_p^2 / (2 (p - 1)) + (l1 / lam) ||w||_1`` with
        ``p = ln d / (ln d - 1)`` (d: the columns the rows reach, plus the intercept; for
        ``d < 8`` this is "l2"), whose steps use ``||x_i||_q^2``, ``q = ln d``, in place of
        ``||x_i||_2^2``. "auto" takes "lq" when its run-time bound is the smaller one on
        the data: ``(ln d - 1) max_i ||x_i||_q^2 < max_i ||x_i||_2^2`` (both with the
        bound ``B = P(0) / l1`` on ``||w*||_1 >= ||w*||_2``; one O(nnz) pass before the
        epochs). The choice is ``l1_geometry_``.
    fit_intercept : bool, default=True
        The intercept is the weight of a constant feature of value ``intercept_scaling``
        inside the regularized vector (so the dual has no equality constraint; the l_1
        term includes it too); ``intercept_ = intercept_scaling * w_0``.
    intercept_scaling : float > 0, default=1.0
        The constant feature's value; larger values regularize the intercept less.
    tol : float >= 0, default=1e-6
        Stop once the relative duality gap ``(P(w) - D(alpha)) / P(w) <= tol``.
    max_epochs : int >= 1, default=1000
        Passes over the rows at most (a ConvergenceWarning says when they ran out).
    order : {"permutation", "random", "cyclic"}, default="permutation"
        Rows of an epoch: a fresh random permutation (LIBLINEAR's choice), i.i.d. uniform
        draws (the papers' analysis), or the data's order.
    check_every : int >= 1 or "auto", default="auto"
        Epochs between two duality-gap checks. A check is one O(nnz) pass over every row
        (the margins at the current w, each row's loss and conjugate), about a fifth to a
        half of an epoch's cost. "auto" spaces them by the gap's observed linear rate:
        the next check comes when the gap is predicted to reach tol, after at most a
        quarter of the epochs run so far with shrinking (each check also refreshes the
        active set) or as many as ran so far without it (the logistic loss: its gap falls
        at a steady rate), and after a tenth while no rate is known; so checks stay a
        small share of the time. Deterministic (no clocks). 1 checks after every epoch.
    shrinking : bool, default=True
        Skip rows that sit at a bound of their dual box and are optimal there (losses
        with such boxes: hinge, squared_hinge, smooth_hinge, absolute, huber,
        epsilon_insensitive; p = 2, no l1, order "permutation"). Every gap check runs over
        all rows, so the result's certificate never depends on it.
    init : "zero", "pgs" or a fitted PGS estimator or learner, default="zero"
        Starting dual point. "pgs": one PGS epoch on the same objective (sigma > 0) first,
        then ``alpha_i = -sample_weight_i * loss'(<w_pgs, x_i>; y_i)`` clipped into the
        conjugate's domain. A fitted `PGSClassifier` / `PGSRegressor` of the same
        classes and width: the same dual estimate from its model (warm start).
    random_state : int, RandomState instance or None, default=None
        Seeds the row orders (and the "pgs" initialization).
    epsilon : float >= 0, default=0.1
        Width parameter of the huber and epsilon_insensitive losses.
    verbose : int, default=0
        Print the primal and dual objectives and the gap after every epoch (with
        ``check_every="auto"`` verbose checks every epoch; with an integer, at every
        check).
    n_bits : int in [1, 30] or None, default=None
        Feature hashing into 2**n_bits columns, exactly as the PGS estimators do.
    hash_seed : int in [0, 2**32), default=0
        Seed of the hash.
    interactions : list of str or None, default=None
        Feature interactions of record input, as Vowpal Wabbit's ``-q ab`` /
        ``--cubic abc``: each a string of 2 or 3 namespace letters (a nested dict
        ``{"user": {...}}`` is namespace "user", letter u; top-level features are
        namespace " "), ``":"`` any letter, ``"::"`` every pair. Generated per row in the
        compiled core, hashed into the 2**n_bits columns (needs ``n_bits``); the
        original features are kept (docs/design/features.md). A matrix has no
        namespaces: with interactions it is refused.
"""

_ATTRS_DOC = """
    intercept_ : ndarray of shape (n_problems,)
    dual_coef_ : ndarray of shape (n_samples,) or (n_classes, n_samples)
        The dual variables alpha: ``w = grad g*(X1^T alpha / (sigma W))`` where X1 is X
        with the constant column ``intercept_scaling`` first and W the sum of the sample
        weights (the number of rows without weights); one row per problem for K > 2
        classes.
    n_iter_ : int
        Epochs run (the largest over the one-vs-rest problems).
    duality_gap_, primal_objective_, dual_objective_ : float or ndarray of shape (n_classes,)
        At the last check: ``P(w)``, the dual bound ``D`` and the gap ``P(w) - D``, an upper
        bound on ``P(w) - min P``. Pure l_1: P is the l_1 objective and the gap its
        certificate (the smaller of 004's ``P(w) - D_lam(alpha) + lam B^2 / 2`` with
        ``B = P(w) / l1 >= ||w*||_2`` and ``P(w) - D_1(s alpha)``, the l_1 dual at the
        dual point scaled into its feasible set).
    gap_history_ : ndarray (or list of them, one per class)
        The gap at every check (every epoch with ``check_every=1``).
    gap_epochs_ : ndarray (or list of them, one per class)
        The epochs after which those checks ran.
    smoothing_ : float or ndarray
        Pure l_1 only: the final l_2 weight lam of the smoothed problem (else 0).
    l1_geometry_ : {"l2", "lq"} or None
        Pure l_1 only: the smoothing used (``l1_geometry``'s choice; None otherwise).
    n_features_in_ : int
"""


_MULTI_CLASS_DOC = """    multi_class : {"ovr", "multinomial", "crammer_singer"}, default="ovr"
        K > 2 classes: K one-vs-rest problems ("ovr"), or K weight vectors coupled by one
        loss of the K scores, solved by SDCA on the multiclass dual (Prox-SDCA section
        3.3; p = 2, no l1): "multinomial" (needs loss="logistic"; the softmax's
        log loss, `predict_proba` the softmax) or "crammer_singer" (needs loss="hinge";
        ``max_j([j != y] + z_j) - z_y``, each row's step an exact K-dim QP solved by
        sorting). With two classes both keep the binary model (one weight vector:
        multinomial is logistic, crammer_singer the hinge on the margin), as
        scikit-learn's LogisticRegression does. ``init`` must be "zero";
        ``shrinking`` keeps an active set of classes per Crammer-Singer row (LIBLINEAR
        -s 4's; every row and class rejoins at each gap check and every tenth epoch).
"""

_CLASS_WEIGHT_DOC = """    class_weight : dict, "balanced" or None, default=None
        Weights of the classes: a row of class c weighs ``class_weight[c]`` times its
        sample weight (scikit-learn's meaning; classes the dict does not name weigh 1,
        a key that is no class is an error; for K > 2 classes the weight counts in every
        one-vs-rest problem). "balanced": scikit-learn's ``n / (K * n_c)`` on all rows,
        rows counted by their sample weights (``compute_class_weight`` with
        ``sample_weight``), so integer weights stay repeated rows.
"""

# the docstring of the scikit-learn estimator `onlinepgs.SDCAClassifier`
_SDCACLASSIFIER_DOC = """Linear classifier trained by SDCA on the dual, stopped by the duality gap.

    The objective is the PGS estimators' (plus an optional l_1 term); binary problems
    use labels +-1 and K > 2 classes K one-vs-rest problems solved one after the other.

    Parameters
    ----------
    loss : {"logistic", "hinge", "squared_hinge", "smooth_hinge"}, default="logistic"
        Steps: hinge, squared_hinge and smooth_hinge in closed form; logistic by a
        bracketed Newton iteration on the step's optimality condition.
""" + _COMMON_DOC + _MULTI_CLASS_DOC + _CLASS_WEIGHT_DOC + """
    Attributes
    ----------
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
""" + _ATTRS_DOC + """    classes_ : ndarray of shape (n_classes,)

    Examples
    --------
    >>> import numpy as np
    >>> from onlinepgs import SDCAClassifier
    >>> rng = np.random.RandomState(0)
    >>> X = rng.randn(200, 5); y = (X[:, 0] + 0.1 * rng.randn(200) > 0).astype(int)
    >>> clf = SDCAClassifier(sigma=1e-3, random_state=0).fit(X, y)
    >>> clf.score(X, y) > 0.9
    True
    >>> bool(clf.duality_gap_ <= 1e-6 * clf.primal_objective_)
    True
    """

# the docstring of the scikit-learn estimator `onlinepgs.SDCARegressor`
_SDCAREGRESSOR_DOC = """Linear regressor trained by SDCA on the dual, stopped by the duality gap.

    Parameters
    ----------
    loss : {"squared", "absolute", "huber", "epsilon_insensitive"}, default="squared"
        "squared" is ``(z - y)^2`` (no 1/2). Every step is in closed form.
""" + _COMMON_DOC + """
    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
""" + _ATTRS_DOC + """
    Examples
    --------
    >>> import numpy as np
    >>> from onlinepgs import SDCARegressor
    >>> rng = np.random.RandomState(0)
    >>> X = rng.randn(500, 3); y = X @ [1.0, -2.0, 0.5] + 0.01 * rng.randn(500)
    >>> reg = SDCARegressor(sigma=1e-2, random_state=0).fit(X, y)
    >>> reg.score(X, y) > 0.99
    True
    >>> reg.n_iter_ < 100
    True
    """


class SDCALearner(LinearLearner):
    """SDCA training shared by the classifier and the regressor (see the module docstring).

    The fitted ``_state`` is the model itself (`onlinepgs.model.LinearModel`): SDCA keeps
    no solver state between calls (no ``partial_fit``).
    """

    _solver = "sdca"
    _pgs_class = None
    _convergence_warning = ConvergenceWarning
    multi_class = "ovr"  # regressors' (classifiers set it in __init__)

    def __init__(self, loss, *, p=2.0, sigma=1e-4, l1=0.0, fit_intercept=True,
                 intercept_scaling=1.0, tol=1e-6, max_epochs=1000, order="permutation",
                 check_every="auto", shrinking=True, init="zero", random_state=None, epsilon=0.1,
                 verbose=0, n_bits=None, hash_seed=0, interactions=None, l1_geometry="auto"):
        self.loss = loss
        self.p = p
        self.sigma = sigma
        self.l1 = l1
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.tol = tol
        self.max_epochs = max_epochs
        self.order = order
        self.check_every = check_every
        self.shrinking = shrinking
        self.init = init
        self.random_state = random_state
        self.epsilon = epsilon
        self.verbose = verbose
        self.n_bits = n_bits
        self.hash_seed = hash_seed
        self.interactions = interactions
        self.l1_geometry = l1_geometry

    def fit(self, X, y, sample_weight=None):
        return self._fit(X, y, sample_weight)

    def _pgs_margins(self, X, y_core, sw, rng):
        """The starting PGS model's margins, shape (n_samples, n_problems), or None."""
        if isinstance(self.init, str) and self.init == "zero":
            return None
        if isinstance(self.init, str):
            pgs = self._pgs_class(
                loss=self.loss, p=self.p, sigma=self.sigma, fit_intercept=self.fit_intercept,
                intercept_scaling=self.intercept_scaling, epsilon=self.epsilon, max_epochs=1,
                random_state=rng.randint(0, 2**31 - 1))
            # for classifiers the encoded labels (+-1, or class indices) pose the same
            # one-vs-rest problems in the same order
            pgs.fit(X, y_core, sample_weight=sw)
        else:
            pgs = self.init
            if pgs.n_features_in_ != X.shape[1]:
                raise ValueError(f"init was fitted on {pgs.n_features_in_} features, X has "
                                 f"{X.shape[1]}")
            if self._classifier:
                wanted = (self.classes_ if hasattr(self, "classes_") else None)
                if wanted is not None and not np.array_equal(pgs.classes_, wanted):
                    raise ValueError(f"init's classes {pgs.classes_.tolist()} differ from "
                                     f"the data's {wanted.tolist()}")
        coef, intercept = pgs._weights()
        return np.asarray(X @ coef.T) + intercept

    def _fit_unguarded(self, X, y, sample_weight):
        X, y_core, n_problems, multiclass, extra, sw = self._fit_inputs(X, y, sample_weight)
        Xc = X if sp.issparse(X) else sp.csr_matrix(X)
        rng = check_random_state(self.random_state)
        # the objective is the same for weights in any unit: weights far from 1 (1e308)
        # are solved in units of 2**unit, so that no sum or product overflows
        sw, unit = in_units(sw)
        # the objective averages by the sum of the weights W, the core's by the rows m:
        # the core's problem with sigma and l1 times W / m has the same minimizer and
        # objectives W / m times ours (weights k_i are k_i copies of the rows)
        scale = float(sw.sum()) / X.shape[0]
        if "classes_" in extra:
            self.classes_ = extra["classes_"]  # the warm start compares against it
        if multiclass and getattr(self, "multi_class", "ovr") != "ovr":
            self._fit_coupled(Xc, y_core, n_problems, extra, sw, rng, scale)
            return self._in_callers_units(unit)
        margins = self._pgs_margins(Xc, y_core, sw, rng)
        problems, converged = [], True
        for c in range(n_problems):
            yc = np.where(y_core == c, 1.0, -1.0) if multiclass else y_core
            alpha0 = None
            if margins is not None:
                alpha0 = -sw * _loss_derivative(self.loss, margins[:, c], yc, self.epsilon)
            seed = int(rng.randint(0, 2**31 - 1)) * 2**32 + int(rng.randint(0, 2**31 - 1))
            prob = SDCAProblem(
                Xc.data, Xc.indices, Xc.indptr, Xc.shape[1], yc, sw, loss=self.loss,
                p=float(self.p), sigma=float(self.sigma) * scale, l1=float(self.l1) * scale,
                fit_intercept=bool(self.fit_intercept),
                intercept_scaling=float(self.intercept_scaling), epsilon=float(self.epsilon),
                order=self.order, seed=seed, alpha0=alpha0, shrinking=bool(self.shrinking),
                l1_geometry=self.l1_geometry)
            label = f" [class {self.classes_[c]!r}]" if multiclass else ""
            check_every = (self.check_every if isinstance(self.check_every, str)
                           else int(self.check_every))
            if self.verbose and check_every == "auto":
                check_every = 1  # verbose shows the gap after every epoch
            converged &= prob.run(int(self.max_epochs), float(self.tol), check_every,
                                  bool(self.verbose), label)
            problems.append(prob)
        for name, value in extra.items():
            setattr(self, name, value)
        self._install(problems, multiclass, scale, X.shape[1])
        self._in_callers_units(unit)
        relative_gaps = np.array([prob.relative_gap() for prob in problems])
        if not converged:
            warnings.warn(
                f"{self._owner} did not reach the relative duality gap tol="
                f"{self.tol:g} in max_epochs={self.max_epochs} epochs (relative gap "
                f"{np.max(relative_gaps):.3g}); raise max_epochs or tol.",
                self._convergence_warning)
        return self

    def _in_callers_units(self, unit):
        """dual_coef_ of weights solved in units of 2**unit (`in_units`) in the caller's."""
        if unit:
            with np.errstate(over="ignore"):  # beyond the double range: it is infinite
                self.dual_coef_ = np.ldexp(self.dual_coef_, unit)
        return self

    def _fit_coupled(self, Xc, y_core, n_classes, extra, sw, rng, scale):
        """K > 2 classes with a coupled loss: one `MulticlassSDCA` over the K vectors."""
        seed = int(rng.randint(0, 2**31 - 1)) * 2**32 + int(rng.randint(0, 2**31 - 1))
        prob = MulticlassSDCA(Xc.data, Xc.indices, Xc.indptr, Xc.shape[1],
                              np.asarray(y_core, dtype=np.int64), sw, n_classes,
                              self.multi_class, float(self.sigma) * scale,
                              bool(self.fit_intercept), float(self.intercept_scaling), seed)
        check_every = (self.check_every if isinstance(self.check_every, str)
                       else int(self.check_every))
        converged = prob.run(int(self.max_epochs), float(self.tol), check_every,
                             bool(self.verbose), bool(self.shrinking))
        for name, value in extra.items():
            setattr(self, name, value)
        W = prob.weights()  # (K, 1 + n_features)
        self._state = self._model(W, Xc.shape[1], multi_class=self.multi_class)
        self.dual_coef_ = (prob.beta * sw[:, None]).T  # a_i = sw_i beta_i, (K, m)
        self.n_iter_ = int(prob.n_epochs)
        # the core's objectives are `scale` times ours (see _fit_unguarded)
        self.primal_objective_ = prob.primal / scale
        self.dual_objective_ = prob.dual / scale
        self.duality_gap_ = prob.gap / scale
        self.smoothing_ = 0.0
        self.gap_history_ = np.array(prob.gap_history) / scale
        self.gap_epochs_ = np.array(prob.check_epochs, dtype=np.int64)
        if not converged:
            warnings.warn(
                f"{self._owner} did not reach the relative duality gap tol={self.tol:g} in "
                f"max_epochs={self.max_epochs} epochs (relative gap "
                f"{prob.relative_gap():.3g}); raise max_epochs or tol.",
                self._convergence_warning)
        return self

    def _model(self, W, n_features, **extra):
        return LinearModel(
            W[:, 1:], W[:, 0] if self.fit_intercept else None,
            classes=self.classes_ if self._classifier else None, loss=self.loss,
            epsilon=self.epsilon, p=self.p, sigma=self.sigma, l1=self.l1, radius=None,
            fit_intercept=self.fit_intercept, intercept_scaling=self.intercept_scaling,
            n_bits=self.n_bits, hash_seed=self.hash_seed, n_features_in=n_features,
            solver="sdca", interactions=self.interactions, **extra)

    def _install(self, problems, multiclass, scale, n_features):
        W = np.array([prob.weights() for prob in problems])  # (K, 1 + n_features)
        self._state = self._model(W, n_features)
        info = [prob.gap_info() for prob in problems]

        def per_problem(values):
            # the core's objectives are `scale` times ours (see _fit_unguarded)
            values = np.asarray(values, dtype=float) / scale
            return values if multiclass else float(values[0])

        self.dual_coef_ = (np.array([prob.alpha for prob in problems]) if multiclass
                           else problems[0].alpha)
        self.n_iter_ = int(max(prob.n_epochs for prob in problems))
        self.primal_objective_ = per_problem([d["primal"] for d in info])
        self.dual_objective_ = per_problem([d["dual"] for d in info])
        self.duality_gap_ = per_problem([d["gap"] for d in info])
        self.smoothing_ = per_problem([d.get("smoothing", 0.0) for d in info])
        # one geometry for all one-vs-rest problems: it depends on the rows only
        self.l1_geometry_ = problems[0].l1_geometry
        histories = [np.array(prob.gap_history) / scale for prob in problems]
        self.gap_history_ = histories if multiclass else histories[0]
        epochs = [np.array(prob.check_epochs, dtype=np.int64) for prob in problems]
        self.gap_epochs_ = epochs if multiclass else epochs[0]

    def _make_model(self, check_finite=True):
        return self._state


class SDCAClassifierLearner(ClassifierLearner, SDCALearner):
    """SDCA classifier without scikit-learn (what `onlinepgs.SDCAClassifier` adds
    scikit-learn's conventions to): parameters and attributes are that estimator's,
    ``model_`` the fitted model as a value (`onlinepgs.model.LinearModel`)."""
    _public_name = "SDCAClassifier"
    _pgs_class = PGSClassifierLearner
    _constraints = _options.learner_constraints("sdca", "classifier")
    _constraints["init"] = [*_constraints["init"], PGSClassifierLearner]  # or fitted PGS

    def __init__(self, loss="logistic", *, p=2.0, sigma=1e-4, l1=0.0, fit_intercept=True,
                 intercept_scaling=1.0, tol=1e-6, max_epochs=1000, order="permutation",
                 check_every="auto", shrinking=True, init="zero", random_state=None, epsilon=0.1,
                 verbose=0, n_bits=None, hash_seed=0, interactions=None,
                 class_weight=None, multi_class="ovr", l1_geometry="auto"):
        super().__init__(loss, p=p, sigma=sigma, l1=l1, fit_intercept=fit_intercept,
                         intercept_scaling=intercept_scaling, tol=tol, max_epochs=max_epochs,
                         order=order, check_every=check_every, shrinking=shrinking, init=init,
                         random_state=random_state, epsilon=epsilon, verbose=verbose,
                         n_bits=n_bits, hash_seed=hash_seed, interactions=interactions,
                         l1_geometry=l1_geometry)
        self.class_weight = class_weight
        self.multi_class = multi_class

    def fit(self, X, y, sample_weight=None):
        """Solve the dual to the relative gap `tol` (or `max_epochs`).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None
            Each row's loss weight (an integer k: as k copies of the row); rows of weight
            0 keep alpha_i = 0.

        Returns
        -------
        self
        """
        return self._fit(X, y, sample_weight)


class SDCARegressorLearner(RegressorLearner, SDCALearner):
    """SDCA regressor without scikit-learn (what `onlinepgs.SDCARegressor` adds
    scikit-learn's conventions to): parameters and attributes are that estimator's,
    ``model_`` the fitted model as a value (`onlinepgs.model.LinearModel`)."""
    _public_name = "SDCARegressor"
    _pgs_class = PGSRegressorLearner
    _constraints = _options.learner_constraints("sdca", "regressor")
    _constraints["init"] = [*_constraints["init"], PGSRegressorLearner]  # or fitted PGS

    def __init__(self, loss="squared", *, p=2.0, sigma=1e-4, l1=0.0, fit_intercept=True,
                 intercept_scaling=1.0, tol=1e-6, max_epochs=1000, order="permutation",
                 check_every="auto", shrinking=True, init="zero", random_state=None, epsilon=0.1,
                 verbose=0, n_bits=None, hash_seed=0, interactions=None, l1_geometry="auto"):
        super().__init__(loss, p=p, sigma=sigma, l1=l1, fit_intercept=fit_intercept,
                         intercept_scaling=intercept_scaling, tol=tol, max_epochs=max_epochs,
                         order=order, check_every=check_every, shrinking=shrinking, init=init,
                         random_state=random_state, epsilon=epsilon, verbose=verbose,
                         n_bits=n_bits, hash_seed=hash_seed, interactions=interactions,
                         l1_geometry=l1_geometry)

    def fit(self, X, y, sample_weight=None):
        """Solve the dual to the relative gap `tol` (or `max_epochs`).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        self
        """
        return self._fit(X, y, sample_weight)
