"""PGS learners: the Primal Gradient Solver's training, importing no scikit-learn.

`PGSClassifierLearner` and `PGSRegressorLearner` hold every piece of PGS training
(validation through `onlinepgs._base`, the solver state, divergence and width guards,
threads); the scikit-learn estimators `onlinepgs.PGSClassifier` / `PGSRegressor` are these
classes with scikit-learn's base classes on top. The command line trains these learners
directly, so that a run never imports scikit-learn. Every example is processed in the
compiled core (`onlinepgs._core._pgs`) with the GIL released.

Examples
--------
>>> import numpy as np
>>> from onlinepgs.pgs import PGSClassifierLearner
>>> X = np.array([[1.0, 0.0], [0.0, 1.0]] * 50); y = np.array([1, 0] * 50)
>>> clf = PGSClassifierLearner(sigma=1e-2, random_state=0).fit(X, y)
>>> clf.predict([[1.0, 0.0]])
array([1])
>>> clf.model_.coef.shape
(1, 2)
"""
import warnings

import numpy as np

from onlinepgs import (_checks, _class_weight, _columns_seen, _eta_race, _jobs, _options,
                       _race, _runaway)
from onlinepgs._options import settle_auto
from onlinepgs._base import (ClassifierLearner, LinearLearner, RegressorLearner,  # noqa: F401
                             _training, _unchanged_on_error)
from onlinepgs._checks import AtRows, check_random_state, is_records, py, row_of_entry
from onlinepgs._core import PGSState
from onlinepgs._core._pgs import (finite_at_columns, power_is_cheap, row_power_sums,
                                  run_lockstep)
from onlinepgs._event import EventClassifier, EventLearner
from onlinepgs._csr import sparse as sp  # scipy.sparse, imported when first needed
from onlinepgs._core._pages import first_nonfinite, small_pages_pay
from onlinepgs._layout import StateLayout, scales_of
from onlinepgs._sparse_readout import rows_read_out
from onlinepgs._weights import SparseWeights
from onlinepgs.features import CrossedRows
from onlinepgs.model import LinearModel

__all__ = ["PGSClassifierLearner", "PGSRegressorLearner", "PGSDivergedError",
           "ModelTooLargeError", "MAX_MODEL_BYTES"]

# The default of max_model_bytes: 1 GiB of solver state, 59.6 million features of a
# binary model with the default iterate, radius and p = 2 (18 bytes each, onlinepgs._layout;
# a quarter as many with sigma="auto", whose race holds 4 states at first). Real
# vocabularies pass with room to spare (news20: 62k features x 20 classes, 322 bytes
# each: 20 MB; imdb's 90k features: 1.6 MB); one stray index of 4e8 (7.2 GB) does not.
MAX_MODEL_BYTES = 2**30

# Parameters fixed by the solver's state: changing one needs a fresh fit.
_STATE_PARAMS = ("loss", "p", "sigma", "l1", "radius", "batch_size", "iterate",
                 "fit_intercept", "intercept_scaling", "epsilon", "n_bits", "hash_seed",
                 "forget", "interactions", "multi_class")

_COMMON_DOC = """
    p : float in (1, 2], default=2.0
        The regularizer is ``||w||_p^2 / (2 (p - 1))``; p < 2 leans towards sparser
        models than p = 2 while staying strongly convex. p may come as close to 1 as
        1 + 2^-23 (1.2e-7; nearer, the power ``|lambda|^(1/(p-1))`` behind the weights
        would amplify each rounding into an error over 1e-9: a ValueError says so).
        Below p = 1.002 the weights stay in the double range by a rescaling pass over
        them each time max |lambda_j| grows ``3.5^(512 (p - 1))``-fold (1.066 at
        p = 1.0001), so training is slower.
    sigma : "auto" or float > 0, default="auto"
        Regularization weight (the paper's sigma): PGS minimizes
        ``sigma * r(w) + mean_i sample_weight_i * loss(<w, x_i>, y_i)`` (the mean over
        rows). A row's weight c multiplies the gradient of its one step, whose size is
        ``1 / (sigma t)``, t counting rows. The package's objective (SDCA's and the
        certificates') averages by the sum of the weights instead, scikit-learn's
        convention: the two agree when the mean weight is 1; otherwise PGS's iterates
        target that objective with sigma times the mean weight's inverse.
        "auto": a race of PGS runs over a half-decade grid of sigma on the same rows,
        judged by the progressive loss of the reported model over recent rows
        (`onlinepgs._race`, docs/design/auto-sigma.md): `fit` races in its first pass
        and continues the winner forked at the grid's sigma nearest its sigma /
        max_epochs, `partial_fit` races across calls until the race settles.
        ``sigma_`` is the choice and ``sigma_path_`` the race's record.
    l1 : float >= 0, default=0.0
        Weight of an l_1 term: PGS minimizes ``sigma * r(w) + l1 * ||w||_1 + mean
        loss``, by dual averaging with the composite regularizer (each iterate soft-
        thresholds lambda by ``(t + 1) * l1`` before the l_p map), so that every
        coordinate whose running gradient sum stays below its threshold is exactly
        zero in the iterate: sparse models while streaming, as FTRL-Proximal gives
        them. An averaged iterate (the default) is reported on the last iterate's
        support (the intercept keeps its average): l1 selects the coordinates, the average gives their values (as
        accurate as the plain average, as sparse as the last iterate). 0: none (the
        plain PGS). With sigma="auto" the race's runs share it. The intercept, a regularized constant feature, has
        the l_1 term too. p < 2 keeps the last iterate only (``iterate="last"``, no
        forget < 1), its mirror map's scale within a relative 1e-6 of exact (an
        expansion with exact recounts); the random iterate, and forget < 1 with an
        average, are refused; not with `onlinepgs.dask`. See docs/design/l1.md
        (choosing l1, p < 2, the certificate).
    radius : "auto", float > 0 or None, default="auto"
        The domain S of w. None: S = R^n (the paper's plain PGS). A number B: the l_p
        ball of radius B. "auto": the ball of radius
        ``sqrt(2 (p - 1) max_i sample_weight_i * loss(0; y_i) / sigma)`` over the rows
        seen so far, which contains the optimum (sigma r(w*) <= F(0)), so the solution
        is that of R^n while the large early steps stay bounded; it is what makes the
        squared and squared-hinge losses (unbounded gradients) safe at small sigma.
        With ``geometry="adaptive"`` at p = 2, "auto" is R^n: its per-coordinate steps
        are bounded by their own stabilizers, and a ball there has no O(nnz) step.
    batch_size : int >= 1, default=1
        k rows per step, all evaluated at the same iterate. Each call's rows make its
        steps, the last one shorter where the call's rows are not a multiple of k: calls
        of multiples of k (as `fit_stream` and the command make them) give the model of
        one call; other cuts give other steps.
    iterate : {"auto", "weighted2", "weighted", "average", "last", "random"}, default="auto"
        Which iterate the model reports: the average of w_1..w_T with weights
        proportional to t^2 ("weighted2", polynomial-decay averaging) or to t
        ("weighted"), the uniform average, the last iterate, or the paper's uniformly
        random iterate (reservoir-sampled). "auto" is "weighted2" in the global
        geometry, because it gave the best test accuracy after 1, 2 and 5 passes on the
        IMDB, a9a and w8a data (best in 11 of 18 cells, never more than 0.0010 behind;
        docs/benchmarks.md): the early, large steps of PGS count least, while the last
        iterate alone is noisy. It is "last" where an average does not run or does not
        pay: l1 at p < 2 or with forget < 1, and the adaptive geometry (its small early
        steps need no averaging, and its averages cost several times its epoch).
    fit_intercept : bool, default=True
        Learn an intercept as a constant feature of value ``intercept_scaling``
        inside the regularized vector (keeps the objective strongly convex, paper
        Section VII); ``intercept_ = intercept_scaling * w_0``.
    intercept_scaling : float > 0, default=1.0
        The constant feature's value; larger values regularize the intercept less.
        No effect in the adaptive geometry, which divides the constant by its own
        largest value as it divides every feature.
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
    interactions : list of str or None, default=None
        Feature interactions of record input, as Vowpal Wabbit's ``-q ab`` /
        ``--cubic abc``: each a string of 2 or 3 namespace letters (a nested dict
        ``{"user": {...}}`` is namespace "user", letter u; top-level features are
        namespace " "), ``":"`` any letter, ``"::"`` every pair. Generated per row in the
        compiled core, hashed into the 2**n_bits columns (needs ``n_bits``); the
        original features are kept (docs/design/features.md). A matrix has no
        namespaces: with interactions it is refused.
    max_model_bytes : int >= 1 or None, default=2**30
        Memory budget of the solver's state, in bytes, when the data decides the
        model's width (``n_bits=None``): training refuses, before allocating, rows
        whose feature indices would make the state larger, with a
        `ModelTooLargeError` naming the row and the column (one stray index of 4e8
        would otherwise make a 6.4 GB model). The state takes
        ``8 * n_problems * f`` bytes per feature, f its fields (`onlinepgs._layout`, the
        one definition the state allocates from): 1 (p = 2, iterate "last"), 2 (p = 2
        and an averaged iterate, or p < 2), 4 (p < 2, averaged), one more with l1 on a
        ball (p = 2) and one more with l1 and an averaged iterate (p = 2); plus
        ``16 * n_problems`` for iterate "random", ``8 * n_problems + 9`` for
        ``batch_size > 1`` and 2 for the list of coordinates reached (p < 2, a ball, or
        l1 but for its last iterate on R^n at p = 2). sigma="auto" holds the race's 4
        start runs' states at once (its first rows), and the budget counts all 4: the
        default 1 GiB holds 2**30 / (4 * 18), about 14.9 million, features of a binary
        model with the default options (4 times as many with a numeric sigma: one
        state). None: no limit.
        With ``n_bits`` the width is 2**n_bits, chosen by you, and not limited.
    forget : float in (0, 1], default=1.0
        Forgetting for drifting streams: each step multiplies the past's sum of gradients
        and the step count by ``forget`` (gamma), so the model minimizes the regularized
        loss with row u of T weighted ``gamma^(T-u)``: it keeps adapting, over a memory
        of about ``1 / (1 - gamma)`` steps (1000 for 0.999), instead of settling; the
        averaged iterates forget alike. 1.0: no forgetting, the plain PGS. With
        forgetting the regret bound and online duality gap of ``online_stats_`` are NaN
        (they concern the unweighted objective); not on Dask (docs/design/forgetting.md).
        With ``geometry="adaptive"`` each coordinate's sum of squared gradients (at
        p < 2 the problem's sum of their squared dual norms) decays by ``forget`` too
        (its step grows again once the gradients shrink), not the feature scales
        (docs/design/adaptive.md, "Forgetting").
    geometry : {"global", "adaptive"}, default="global"
        "global": PGS's one step size for every coordinate, ``1 / (sigma t)`` through the
        l_p map. "adaptive": a step per coordinate, which shrinks with that coordinate's
        own squared gradients (FTRL-Proximal's centered form), on each feature divided by
        the largest ``|x_j|`` seen so far: raw columns of any units need no scaling (a
        column multiplied by any c > 0 leaves every prediction as it was), and sigma, l1
        regularize the scaled weights ``s_j w_j``. At p < 2 the stabilizer is one
        scalar a problem, grown by the scaled gradients' squared dual norms (uncentered;
        Orabona and Pal's scale-free form), and a radius bounds ``||S w||_p``; p=2 has
        no ball (refused: its step on one would move every coordinate). It runs with
        iterate "last" or an average ("average", "weighted", "weighted2": the
        scaled weights' average divided by the final scales; not "random"), forget < 1
        with the last iterate, l1 (at p < 2 with the last iterate, as in the
        global geometry), any batch_size; on Dask with a
        fixed eta at p=2 and the last iterate; `onlinepgs.duality_gap` certifies its
        objective on the scaled weights (docs/design/adaptive.md).
    eta : float > 0 or "auto", default="auto"
        The adaptive geometry's base rate: a coordinate's step is ``eta / sqrt(sum of
        its squared scaled gradients)`` while sigma t is small against it. "auto" races
        0.1, 0.5 and 2 (8, 32 and 128 at p < 2), each with its own sigma race (or at
        the fixed sigma), over the first 4,000 rows and keeps the best by progressive loss over the second half of
        them (``eta_`` is the choice). Unused by the global geometry.
    n_jobs : int (not 0) or None, default=None
        Threads the runs of a race (sigma="auto", eta="auto") learn on: the live runs
        are split into groups, each stepped by its own thread over the same rows. None:
        one thread a live run, up to the cores this process may run on
        (``os.sched_getaffinity``) less those a file reader of the command or of
        ``onlinepgs.streaming.train_stream`` is parsing on at that moment; 1: every run
        on the calling thread; -1: one a run up to every core, -2 all but one (as in
        scikit-learn). Every result is the same bit for bit whatever n_jobs is
        (each run makes the same steps; only the wall time changes, not the CPU time),
        so it is not a parameter of the model: a model trained with one n_jobs continues
        with another, and a model file does not hold it (a loaded model has None). A
        fixed sigma trains one run (one thread), as do `learn_one` and
        `onlinepgs.dask`'s lanes (Dask's lanes are its parallelism).
"""

_MULTI_CLASS_DOC = """    multi_class : {"ovr", "multinomial", "crammer_singer"}, default="ovr"
        How K > 2 classes are learned. "ovr": K one-vs-rest binary problems of the loss,
        updated in one pass over each row. "multinomial" (needs loss="logistic"): one
        weight vector per class coupled by the softmax loss ``log sum_k exp(z_k) - z_y``
        of the K scores ``z_k = <w_k, x>``, whose ``predict_proba`` is the softmax of
        the scores. "crammer_singer" (needs loss="hinge"): Crammer and Singer's
        multiclass hinge ``max_j ([j != y] + z_j) - z_y``; no probabilities. Either
        takes one gradient over the K vectors per row (O(K nnz)) with the regularizer
        ``sigma sum_k r(w_k)``. With two classes both keep the binary model (one weight
        vector; multinomial is then the logistic loss and crammer_singer the hinge on
        the margin), as scikit-learn's LogisticRegression does. The progressive loss of
        ``online_stats_`` is then the coupled loss of each row, and its regret bound and
        online duality figures are the coupled objective's (sums over the classes).
"""

_CLASS_WEIGHT_DOC = """    class_weight : dict, "balanced" or None, default=None
        Weights of the classes: a row of class c weighs ``class_weight[c]`` times its
        sample weight (scikit-learn's meaning; classes the dict does not name weigh 1,
        a key that is no class is an error). For K > 2 classes (one-vs-rest) the row's
        class weight multiplies its weight in every binary problem, as in scikit-learn's
        SGDClassifier (with a coupled ``multi_class``, the weight of its one loss). "balanced": ``n / (K * n_c)``, rows counted by their sample
        weights (scikit-learn's ``compute_class_weight`` with ``sample_weight``). `fit`
        computes it on all rows; `partial_fit` (and `fit_stream`, the command line)
        estimates it on the stream as it goes, which scikit-learn's
        ``SGDClassifier.partial_fit`` refuses: row i weighs ``n_i / (K * n_c,i)`` with
        the (weighted) rows up to and including row i, so the weights do not depend on
        how the stream is cut into calls. The counts are the fitted attributes
        ``class_counts_`` and ``class_counts_total_``, kept in model files: a resumed
        run weighs as an uninterrupted one (docs/design/estimators.md, "Class weights").
"""

_CLASSES_DOC = """    classes : array-like or None, default=None
        Every label the stream may hold, for a model started without a set-up call:
        the first `learn_one` (or a first `partial_fit` / `fit_stream` that passes no
        ``classes``) takes them, and `learn_one` refuses any other label. None: the
        first training call gives them, and `learn_one` learns a label it has not seen
        as a new class (the binary model of two labels is the model of both declared;
        a third class's one-vs-rest problem starts at zero at its first event, as
        River's one-vs-rest does: `learn_one`'s Notes). `fit` takes the labels of its
        y, as scikit-learn's does.
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

    The scalars, then every field of every coordinate (lambda, the averages' sums, ...)
    where one compiled pass over them (`_pages.first_nonfinite`) costs no more than the
    entries' rows (a fit, a large chunk, many problems): the state itself, not its
    weights, whose l1 averages take closed forms at about 20 ns a coordinate, as much as
    the pass itself on news20's small splits. Else the coordinates the rows touched,
    every field: where the core keeps N (p < 2 or a ball) its refresh of M = max
    |lambda_j| reaches an overflow of lambda, not one of the averages' sums (a value
    of 1e300 on a coordinate no step has reached leaves lambda finite and its sums
    NaN). What remains, weights beyond 1.8e308 from a finite state (averaged sums near
    it), is caught where the weights are read (`model_`).
    """
    with np.errstate(all="ignore"):
        if not all(np.isfinite(a).all() for a in (state.s_a, state.cum_a, state.cum2_a,
                                                   state.norm_a, state.scale_a)):
            return False
        block = state.block_a
        crossed = isinstance(X, CrossedRows)  # its entries: at most the crossing's bound
        nnz = X.crossing().entries if crossed else X.nnz if sp.issparse(X) else None
        # an entry's coordinate holds a row of K problems' fields: the scan of the
        # whole block (compiled, in the pages it has, no temporary) costs its doubles,
        # the entries' about theirs (news20's 20 classes: 80 doubles an entry, 15 ms a
        # call where the block's 5M took 4)
        if nnz is None or block.size <= 4 * (nnz + X.shape[0]) * (block.shape[1]
                                                                  * block.shape[2]):
            return bool(first_nonfinite(block) < 0 and np.isfinite(state.snap_a).all())
        # the intercept's coordinate 0 and each entry's column + 1 (repeats cost less
        # than sorting them out; crossed rows' columns made again, unsorted), in
        # compiled code: a gather of the rows would copy them all (on wide rows it took
        # 2-3x the pass itself)
        return finite_at_columns(block, X.crossing().columns() if crossed else X.indices)


def feature_scales(state, inv_at):
    """The adaptive geometry's scale of each coordinate of `state` (the intercept's
    first): the largest |x_j| seen, the constant feature's value for the intercept, 1
    where no value was seen (docs/design/adaptive.md), from the field 1 / s_j at
    `inv_at` of a problem's doubles; None for the global geometry."""
    if not state.adaptive:
        return None
    return scales_of(np.asarray(state.block_a)[:state.dim, 0, inv_at])


def _reach(X):
    """The column indices the rows of X reach (a CSR matrix's `indices`; rows crossed in
    the pass, `CrossedRows`, their columns made once more, O(entries)); None for dense
    rows."""
    if isinstance(X, CrossedRows):
        return X.crossing().columns()
    return getattr(X, "indices", None)


def _heaviest_row(X, sw):
    """(row, sample weight) of the row of largest sample_weight * max_j |x_ij|: the one
    whose gradient moves the solver's sums most (error path only)."""
    if X is None:
        return None, None
    if isinstance(X, CrossedRows):
        X = X.to_csr()
    with np.errstate(over="ignore"):
        if sp.issparse(X):
            # max over each row's stored |x_ij| (0 for an empty row), without scipy
            size, filled = np.zeros(X.shape[0]), np.diff(X.indptr) > 0
            if X.nnz:
                size[filled] = np.maximum.reduceat(np.abs(X.data[:X.nnz]),
                                                   X.indptr[:-1][filled])
        else:
            size = np.abs(X).max(axis=1) if X.shape[1] else np.zeros(X.shape[0])
        row = int(np.argmax(sw * np.maximum(size, 1.0)))
    return row, py(sw[row])


def _overflow_reason(state, X, sw, at=None, columns=None):
    """Why the state's weights are not finite (or, at row `at`, the margin), and what
    helps, in one sentence (`columns`: the column map whose slots the state's
    coordinates are, for a column named)."""
    tiny = _tiny_scale_reason(state, columns) if state.adaptive else None
    if tiny is not None:
        return tiny
    row, weight = _heaviest_row(X, sw)
    heaviest = ("" if row is None else
                f" (the heaviest row of this call is row {row}, sample_weight {weight!r})")
    if at is not None and _finite_weights(state):
        return (f"the margin <w, x> of row {at} overflowed the double range (finite "
                "weights times its values); scale the features down.")
    with np.errstate(all="ignore"):
        lam_finite = bool(np.isfinite(state.lam_a).all())
        last_finite = bool(np.isfinite(state.weights("last")).all())
    if not lam_finite and state.adaptive:
        # each coordinate's sums take a row's weight as its size (the squares' root
        # grows as sqrt(weight)): no one factor leaves its model as it is
        return (f"the solver's running sum of sample_weight * loss' * x / s overflowed the "
                f"double range{heaviest}; use smaller sample weights (the adaptive "
                f"geometry's model depends on their sizes, not only on their ratios).")
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


def _tiny_scale_reason(state, columns=None):
    """Where the adaptive geometry's state overflowed because of a tiny feature: its
    scale s_j, the largest |value| seen, so small that 1 / s_j or its weight v_j / s_j
    leaves the double range; the column of the smallest such scale named (a slot of
    `columns` as its column). None where no feature is so."""
    inv = np.asarray(state.block_a)[:state.dim, 0, state.layout.offset("inv_scale")]
    with np.errstate(all="ignore"):
        v = state.weights("last")  # the scaled weights: finite here, else not the scale's
        bad = ~np.isfinite(inv) | (np.isfinite(v).all(axis=1)
                                   & ~np.isfinite(v * inv[:, None]).all(axis=1))
    bad[0] = False  # the intercept's constant is its own scale
    bad = np.flatnonzero(bad)
    if not bad.size:
        return None
    with np.errstate(all="ignore"):
        scales = np.abs(1.0 / inv[bad])
    j = int(bad[np.argmin(scales)]) - 1  # data feature j is coordinate j + 1
    column = j if columns is None else int(columns.columns()[j])
    # 1 / s_j infinite: a subnormal s_j, below the least normal double's 2.2e-308
    size = "below 2.2e-308" if np.min(scales) == 0.0 else f"{np.min(scales):.3g}"
    return (f"the weight of column {column}, whose largest |value| is {size}, "
            "leaves the double range: the adaptive geometry divides a feature by that "
            "value and its weight by it again; scale that column up (a feature whose "
            "values are all below about 1e-300 leaves no room for a weight).")


class _InThisCall(AtRows):
    """PGS's errors name a row as "row 3 of this call" (`AtRows`)."""

    @staticmethod
    def _in_call(row):
        return f"row {row} of this call"


class PGSDivergedError(_InThisCall, FloatingPointError):
    """A step's loss derivative overflowed (an unbounded loss on R^n with a small sigma).

    ``row``: the row of the call where it happened, and ``reason``: what overflowed and
    what to change, where known (the command line restates them at the file's line).
    ``message`` may be `AtRows` pieces (text and the row) instead of text.
    """

    def __init__(self, message, row=None, reason=None):
        super().__init__(self._message(message, row))
        self.reason = reason


class ModelTooLargeError(_InThisCall, ValueError):
    """Training data whose feature indices would make the model wider than the memory
    budget ``max_model_bytes`` allows (refused before allocating).

    Attributes: ``row`` (the first row of the call needing too much, or None when the
    width is X's declared number of columns), ``column`` (that row's widest column,
    from 0), ``n_features`` (the width asked for), ``needed`` (its bytes of solver
    state) and ``budget`` (max_model_bytes). ``message`` may be `AtRows` pieces.
    """

    def __init__(self, message, row=None, column=None, n_features=None, needed=None,
                 budget=None):
        super().__init__(self._message(message, row))
        self.column, self.n_features = column, n_features
        self.needed, self.budget = needed, budget


def _size(n_bytes):
    """A byte count for a message: 6.4 GB, 512.0 MB, 1.1 kB."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.1f} {unit}"
    return f"{n_bytes} bytes"


class PGSLearner(EventLearner, LinearLearner):
    """PGS training shared by the classifier and the regressor (see the module docstring)."""

    _solver = "pgs"
    _diverged_error = PGSDivergedError  # what the per-event path (onlinepgs._event) catches
    # predictions that ran away at a fixed sigma (`_runaway`): a warning, or (the command's
    # learner) PGSDivergedError
    _runaway_fatal = False

    def __init__(self, loss, *, p=2.0, sigma="auto", l1=0.0, radius="auto", batch_size=1,
                 iterate="auto", fit_intercept=True, intercept_scaling=1.0,
                 max_epochs=5, tol=None, n_iter_no_change=5, shuffle=True,
                 random_state=None, epsilon=0.1, n_bits=None, hash_seed=0,
                 max_model_bytes=MAX_MODEL_BYTES, forget=1.0, interactions=None,
                 geometry="global", eta="auto", n_jobs=None):
        self.loss = loss
        self.p = p
        self.sigma = sigma
        self.l1 = l1
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
        self.forget = forget
        self.interactions = interactions
        self.geometry = geometry
        self.eta = eta
        self.n_jobs = n_jobs

    def _new_state(self, n_features, n_problems, multiclass, rng, reach=None):
        """A fresh solver state at the sigma parameter (a number); its own RNG (the random
        iterate) is seeded from rng."""
        return self._state_factory(n_features, n_problems, multiclass, rng,
                                   reach)(float(self.sigma))

    def _state_factory(self, n_features, n_problems, multiclass, rng, reach=None):
        """sigma -> a fresh solver state; the seed is drawn from rng once, so every run of
        a race shares it and a run equals its sigma trained alone. `reach`: the column
        indices of the first rows, from which the states' blocks are mapped in small
        pages where those rows reach few of each huge page's (`_pages.small_pages_pay`)."""
        seed = int(rng.randint(0, 2**31 - 1)) * 2**32 + int(rng.randint(0, 2**31 - 1))
        # K > 2 classes only: two classes keep the binary model whatever multi_class says
        multi_class = getattr(self, "multi_class", "ovr") if multiclass else "ovr"

        # l1 only when there is one: the state's config (and model files) omit it at 0;
        # the adaptive geometry's options only in it
        l1 = {"l1": float(self.l1)} if self.l1 else {}
        if self.geometry == "adaptive":
            l1.update(geometry="adaptive")
            if not self._eta_auto():
                l1.update(eta=float(self.eta))

        settled = self._settled()
        radius, iterate = settled["radius"], settled["iterate"]
        small_pages = reach is not None and small_pages_pay(
            reach, 1 + n_features, StateLayout(
                p=float(self.p), iterate=iterate, l1=float(self.l1), radius=radius,
                batch_size=int(self.batch_size), n_problems=n_problems,
                geometry=self.geometry).block_bytes, offset=1)

        def make(sigma, eta=None):
            # a run of a race of eta (eta="auto") takes its family's rate
            rate = {} if eta is None else {"eta": float(eta)}
            return PGSState(p=float(self.p), sigma=float(sigma), **{**l1, **rate},
                            multi_class=multi_class,
                            radius=radius if radius in (None, "auto") else float(radius),
                            loss=self.loss, batch_size=int(self.batch_size),
                            iterate=iterate, n_problems=n_problems, multiclass=multiclass,
                            fit_intercept=bool(self.fit_intercept),
                            intercept_scaling=float(self.intercept_scaling),
                            epsilon=float(self.epsilon), n_features=n_features, seed=seed,
                            forget=float(self.forget), small_pages=small_pages)
        return make

    def _settled(self):
        """The iterate and the radius this learner runs, "auto" settled for its geometry,
        p, l1 and forget (`onlinepgs._options.settle_auto`): ``{"iterate", "radius"}``."""
        settled = settle_auto(dict(geometry=self.geometry, p=self.p, l1=self.l1,
                                   forget=self.forget, iterate=self.iterate,
                                   radius=self.radius))
        return {"iterate": settled["iterate"], "radius": settled["radius"]}

    def _auto(self):
        """Whether a race trains the model: sigma="auto", or the adaptive geometry's
        eta="auto" (`onlinepgs._eta_race`)."""
        return isinstance(self.sigma, str) or self._eta_auto()

    def _eta_auto(self):
        """Whether the adaptive geometry's base rate is raced (eta="auto")."""
        return self.geometry == "adaptive" and isinstance(self.eta, str)

    def _weight_passes(self):
        return self.max_epochs  # the state's sum of the weights grows each epoch

    def _new_race(self, n_features, n_problems, multiclass, rng, reach=None):
        """A race at row 0 (sigma="auto"): the schedule and its start runs' states
        (`reach`: `_state_factory`'s)."""
        if self._eta_auto():
            # sigma's race inside each eta's family, or the fixed sigma as a grid of one
            fixed = {} if isinstance(self.sigma, str) else dict(
                grid=[float(self.sigma)], start=[float(self.sigma)])
            etas, default = _eta_race.etas_for(float(self.p))
            schedule = _eta_race.EtaSchedule(self.loss, n_problems=n_problems,
                                             batch_size=int(self.batch_size), etas=etas,
                                             default=default, **fixed)
        else:
            # the adaptive geometry's sigma race at a fixed eta is a family of its race
            # of eta alone (the same ties from row 4,000 on)
            options = (_eta_race.EtaSchedule.sigma_options()
                       if self.geometry == "adaptive" else {})
            schedule = _race.SigmaSchedule(self.loss, n_problems=n_problems,
                                           batch_size=int(self.batch_size), **options)
        return _race.SigmaRace.begin(
            schedule, self._state_factory(n_features, n_problems, multiclass, rng, reach))

    def _race_pass(self, race, X, y, sw, order, power_sums, columns=None):
        """Train every live run of the race on the rows of `order`; a run that diverges
        is dropped (the race's path says so), unless every run has: then the last
        run's error is raised. With one row a step the runs learn each piece in lockstep
        (`run_lockstep`: a row read, or crossed, once for them all); mini-batches run
        after run. With ``n_jobs`` threads (`onlinepgs._jobs`), the runs are split into
        groups, each stepped on its own thread over the same rows (crossed rows: crossed
        once into blocks the threads share, `_crossed_threads`): the same steps, bit for
        bit. `columns`: the column map whose slots X's columns are (`_run`)."""
        crossed = isinstance(X, CrossedRows)
        lockstep = crossed or self.batch_size == 1
        n_jobs = getattr(self, "n_jobs", None)  # a learner unpickled from before it
        together = _jobs.threads_for(n_jobs, len(race.states))
        before = {}  # trained by train_all: each run's sums before it, for the runaway check

        def train(state, start, stop):
            # the finiteness guard once a call (below), not once a piece: it is O(width)
            if id(state) in before:  # trained by train_all with the other runs
                self._after_pass(state, X, y, sw, order[start:stop], self._classifier,
                                 before.pop(id(state)), guard=False, columns=columns)
            else:
                self._run(state, X, y, sw, order[start:stop], self._classifier, power_sums,
                          guard=False, columns=columns)

        def step(i, states, rows):
            if not lockstep:  # mini-batches: run after run
                for state in states:
                    self._core_pass(state, X, y, sw, rows, self._classifier, power_sums)
            elif crossed:  # each row crossed once for the runs (one thread)
                run_lockstep(states, None, None, None, X.shape[1], y, sw, rows,
                             self._classifier, power_sums, X.crossing())
            elif sp.issparse(X):
                run_lockstep(states, X.data, X.indices, X.indptr, X.shape[1], y, sw, rows,
                             self._classifier, power_sums)
            else:
                run_lockstep(states, X.ravel(), None, None, X.shape[1], y, sw, rows,
                             self._classifier, power_sums)

        def train_all(states, start, stop):
            before.update({id(state): (state.sum_weighted_loss_reported, state.sum_weight)
                           for state in states})
            rows = order[start:stop]
            k = _jobs.threads_for(n_jobs, len(states)) if len(rows) >= _jobs.MIN_ROWS else 1
            if crossed and k > 1:
                self._crossed_threads(states, k, X, y, sw, rows, power_sums)
                return
            _jobs.run_groups(lambda i, group: step(i, group, rows), _jobs.groups(states, k))
        try:
            race.advance(len(order), train, diverged=(PGSDivergedError,),
                         train_all=train_all if lockstep or together > 1 else None,
                         together=together)
            race.check(lambda state: self._check_finite(state, X, sw, columns),
                       diverged=(PGSDivergedError,))
        except _race.RaceDivergedError as exc:
            raise exc.errors[-1] from None

    def _crossed_threads(self, states, k, X, y, sw, rows, power_sums):
        """The runs `states` over the rows `rows` of the `CrossedRows` X, on k threads: a
        Crossing's scratch (its row builder, the slots of made rows) serves one pass at a
        time, so the rows are crossed once, on this thread, into a matrix of at most
        `_jobs.CROSSED_BLOCK` rows at a time, which every thread's runs then step over in
        lockstep. The steps are those over the crossed rows (the same entries, in the same
        order); a run that diverges stops at its row (named in X's numbering) and sits
        out the blocks after it."""
        for lo in range(0, len(rows), _jobs.CROSSED_BLOCK):
            take = rows[lo:lo + _jobs.CROSSED_BLOCK]
            live = [state for state in states if not state.diverged]
            if not live:
                return
            block = X[take].to_csr()
            y_b, sw_b = y[take], sw[take]
            sums_b = None if power_sums is None else power_sums[take]
            at = np.arange(len(take), dtype=np.int64)
            _jobs.run_groups(
                lambda i, group: run_lockstep(group, block.data, block.indices, block.indptr,
                                              X.shape[1], y_b, sw_b, at, self._classifier,
                                              sums_b),
                _jobs.groups(live, k))
            for state in live:
                if state.diverged:  # the block's row: X's
                    state.diverged_row = int(take[state.diverged_row])

    def _layout(self, n_problems):
        """The solver state's per-coordinate layout at these parameters
        (`onlinepgs._layout`: what PGSState allocates, what max_model_bytes counts)."""
        return StateLayout(p=float(self.p), l1=float(self.l1), **self._settled(),
                           batch_size=int(self.batch_size),
                           n_problems=n_problems, geometry=self.geometry)

    def _check_width(self, X, n_problems, where=None, have=0):
        """Refuse, before any allocation, a width of X beyond the max_model_bytes budget.

        Only a width the data decides is limited (with n_bits it is 2**n_bits), and
        only growth beyond the `have` features the state already holds: a model keeps
        what it has. ``where(row)`` names a row in the message (default: "row i of
        this call"). A learner whose states are over the columns its rows reach
        (`onlinepgs._columns_seen`) is held to the width too: a model file holds them over
        it, and loading one expands them (a stray index of 4e8 would make it 6 GB)."""
        budget = self.max_model_bytes
        width = X.shape[1]
        if budget is None or self.n_bits is not None or width <= have:
            return
        layout = self._layout(n_problems)  # of one state
        runs = self._states_held(have)
        limit = layout.max_width(budget // runs)  # the most features the budget holds
        if width <= limit:
            return
        row = column = None
        if sp.issparse(X) and X.nnz:
            # CSR holds its rows in order: the first entry beyond the limit is in the
            # first row that needs too much; name that row's widest column
            beyond = np.flatnonzero(X.indices >= limit)
            if beyond.size:
                row = row_of_entry(X, beyond[0])
                column = int(X.indices[X.indptr[row]:X.indptr[row + 1]].max())
                width = column + 1
        needed = layout.nbytes(width + 1) * runs
        if row is None:
            at = (f"X has {X.shape[1]} columns",)
        else:
            # the row as a piece (AtRows) unless the caller names it its own way
            at = (row if where is None else where(row),
                  f" has a feature at column {column} (from 0)")
        held = ("," if runs == 1 else
                f" for the {runs} runs of sigma='auto'; give sigma a number to hold one."
                " That is")
        raise ModelTooLargeError(
            (*at, f": a model over {width} features needs {_size(needed)} of solver "
             f"state ({layout.per_feature} bytes a feature){held} beyond max_model_bytes={budget} "
             f"({limit} features); a stray feature index? Hash the features with n_bits "
             "(2**n_bits columns), or raise max_model_bytes (None: no limit)"),
            row=row, column=column, n_features=width, needed=needed, budget=budget)

    def _states_held(self, have=0):
        """The most solver states training holds at once, for the width budget: one for
        a fixed sigma; with sigma="auto", the race's start runs (`_race.START_SIGMAS`,
        all live over the first rows; a duel holds two), or one once a race this model
        continues (``have`` > 0) has settled."""
        if not self._auto():
            return 1
        race = getattr(self, "_race", None) if have else None
        if race is not None and race.schedule.settled:
            return 1
        starts = len(_race.START_SIGMAS) if isinstance(self.sigma, str) else 1
        return starts * (len(_eta_race.etas_for(float(self.p))[0]) if self._eta_auto() else 1)

    def _check_state_params(self):
        changed = [n for n in _STATE_PARAMS
                   if hasattr(self, n) and getattr(self, n) != self._state_params[n]]
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

    def crosses_rows(self):
        """Whether this learner's pass makes the interactions of namespaced rows itself,
        a row at a time (`onlinepgs.features.CrossedRows`, which the command's readers
        then give): one row a step (batch_size=1) and no sums of |x_ij|^q taken before
        the pass (p = 2, or p whose q - 1 is a multiple of 1/4). Other chunks of crossed
        rows are made into their matrix first."""
        return self.batch_size == 1 and (self.p == 2.0 or power_is_cheap(self.p))

    def _validate_crossed(self, X, reset):
        """`CrossedRows` as the pass takes them (their interactions made in the pass), or
        None where they must be a matrix first: a learner that cannot (`crosses_rows`),
        another spec (refused by the matrix's check), a value whose products may
        overflow (refused, naming its row, by the matrix's check)."""
        spec = X.spec
        if not (self.crosses_rows() and X.products_finite()
                and self.n_bits == spec.n_bits and self.hash_seed == spec.hash_seed
                and tuple(self._interactions()) == spec.interactions):
            return None
        if reset:
            self.n_features_in_ = X.shape[1]
        return X

    def _run(self, state, X, y, sw, order, classifier, row_power_sums=None, guard=True,
             columns=None):
        """One core pass over the rows of `order`; PGSDivergedError where a step diverged,
        (with `guard`, the O(nnz) `_check_finite`) where the state is not finite, or where
        the predictions ran away (`_runaway`). `columns`: the column map whose slots X's
        columns are (`_columns_seen`), for the messages' columns."""
        before = (state.sum_weighted_loss_reported, state.sum_weight)
        self._core_pass(state, X, y, sw, order, classifier, row_power_sums)
        self._after_pass(state, X, y, sw, order, classifier, before, guard, columns)

    @staticmethod
    def _core_pass(state, X, y, sw, order, classifier, row_power_sums=None):
        """The core's pass of `state` over the rows of `order` of X (CSR, dense or
        `CrossedRows`), nothing checked after it."""
        if isinstance(X, CrossedRows):
            state.run(None, None, None, X.shape[1], y, sw, order, classifier,
                      row_power_sums, crossing=X.crossing())
        elif sp.issparse(X):
            state.run(X.data, X.indices, X.indptr, X.shape[1], y, sw, order, classifier,
                      row_power_sums)
        else:
            state.run(X.ravel(), None, None, X.shape[1], y, sw, order, classifier,
                      row_power_sums)

    def _after_pass(self, state, X, y, sw, order, classifier, before, guard=True,
                    columns=None):
        """After a core pass over the rows `order` of X (`before`: the state's
        sum_weighted_loss_reported and sum_weight before it): `_after_run`'s checks, then
        the runaway check (a warning at a fixed sigma with `guard`, else
        PGSDivergedError)."""
        self._after_run(state, X, sw, guard, columns)
        runaway = _runaway.check(self, state, X, y, order, classifier, before, columns)
        if runaway is None:
            return
        reason, row = runaway
        if guard and not self._runaway_fatal:  # a call at a fixed sigma: said, not refused
            warnings.warn(f"PGS: {reason}", RuntimeWarning, stacklevel=2)
            return
        # a run of a sigma race (dropped, as a run that overflowed), or the command's
        raise PGSDivergedError(f"PGS diverged in this call (after step {state.t}): {reason} "
                               "The model is not usable; fit again with other parameters.",
                               row=row, reason=reason)

    def _after_run(self, state, X, sw, guard=True, columns=None):
        """After a core pass over X (weights sw): PGSDivergedError where a step diverged
        or (with `guard`) where the state is not finite."""
        if state.diverged:
            row = int(state.diverged_row)
            state.diverged = False
            if self.loss in _BOUNDED_DERIVATIVE:
                # the derivative is finite at any finite margin: the margin was not,
                # because the model (or the margin's sum) had overflowed
                reason = _overflow_reason(state, X, sw, at=row,
                                          columns=self._map_of(columns))
                kept = ("The model keeps the state before that step."
                        if _finite_weights(state) else
                        "The model is not usable; fit again with other parameters.")
                raise PGSDivergedError(
                    ("PGS diverged at ", row, f" (step {state.t + 1}): {reason} {kept}"),
                    reason=reason)
            radius = self._settled()["radius"]
            if state.adaptive:
                # the steps are eta / sqrt(n_j) on scaled features: what is left to
                # overflow is the residual, the targets' or the sample weights' size
                advice = ("Its gradient grows with the residual: use smaller sample "
                          "weights or scale the targets down.")
            elif radius is None:
                advice = (f"Its gradient is unbounded, so on R^n (radius=None) a small "
                          f"sigma={state.sigma:g} lets the first steps of size 1/(t sigma) "
                          "blow up; use radius='auto' (or a finite radius) or a larger "
                          "sigma.")
            else:
                advice = (f"Even on the ball (radius={radius!r}) sigma={state.sigma:g} "
                          "makes the steps of size 1/(t sigma) overflow; use a larger sigma.")
            kept = ("The model keeps the state before that step."
                    if _finite_weights(state) else
                    "The weights before that step had overflowed already: the model is "
                    "not usable; fit again with other parameters.")
            reason = f"the {self.loss!r} loss's derivative overflowed. {advice}"
            raise PGSDivergedError(
                ("PGS diverged at ", row, f" (step {state.t + 1}): {reason} {kept}"),
                reason=reason)
        if guard:
            self._check_finite(state, X, sw, columns)

    def _map_of(self, columns):
        """The column map whose slots a call's rows are: `columns` (a first call's,
        not installed yet), else the learner's (None: the rows are over the columns)."""
        return columns if columns is not None else self.__dict__.get("_columns")

    def _check_finite(self, state, X, sw, columns=None):
        """PGSDivergedError unless the state is finite after a call on X (`_finite_after`)
        and so is its progressive loss (a loss's value overflows long before the weights
        do: squared loss at weights of 1e154)."""
        if not np.isfinite(state.sum_weighted_loss) and state.adaptive:
            # its steps are scaled per feature: the weights' sum, or the targets', is what
            # leaves the range, not the steps of one size
            row, weight = _heaviest_row(X, sw)
            reason = (f"the progressive {self.loss!r} loss times sample_weight overflowed "
                      f"the double range (the heaviest row of this call is row {row}, "
                      f"sample_weight {weight!r}); use smaller sample weights"
                      + (" or scale the targets down." if not self._classifier else "."))
        elif not np.isfinite(state.sum_weighted_loss):
            row, _ = _heaviest_row(X, sw)
            reason = (f"the progressive {self.loss!r} loss overflowed the double range: "
                      "the predictions grew without bound (the steps of size 1/(t sigma) "
                      f"overshoot at sigma={state.sigma:g}); use "
                      + ("radius='auto' (or a finite radius) or "
                         if self._settled()["radius"] is None
                         else "") + "a larger sigma.")
        if not np.isfinite(state.sum_weighted_loss):
            raise PGSDivergedError(
                f"PGS diverged in this call (after step {state.t}): {reason} The model is "
                "not usable; fit again with other parameters.", row=row, reason=reason)
        if not _finite_after(state, X):
            # the last guard: no path may hand out a non-finite model
            reason = _overflow_reason(state, X, sw, columns=self._map_of(columns))
            row, _ = _heaviest_row(X, sw)
            raise PGSDivergedError(
                f"PGS overflowed in this call (after step {state.t}): {reason} The model is "
                "not usable; fit again with other parameters.", row=row, reason=reason)

    def _fit_unguarded(self, X, y, sample_weight):
        X, y_core, n_problems, multiclass, extra, sw = self._fit_inputs(X, y, sample_weight)
        self._check_width(X, n_problems)  # a new state, whatever a former fit had
        # a wide sparse matrix: the states over the columns its rows reach (_columns_seen)
        columns = _columns_seen.ColumnMap() if _columns_seen.maps(X) else None
        if columns is not None:
            X = _columns_seen.mapped(X, columns)
        width = X.shape[1] if columns is None else _columns_seen.capacity(X.shape[1])
        rng = check_random_state(self.random_state)
        race = state = None
        if self._auto():
            race = self._new_race(width, n_problems, multiclass, rng, _reach(X))
        else:
            state = self._new_state(width, n_problems, multiclass, rng, _reach(X))
        n = X.shape[0]
        power_sums = self._row_power_sums(X, passes=self.max_epochs)
        best, stall, epochs = np.inf, 0, 0
        for _ in range(self.max_epochs):
            order = rng.permutation(n).astype(np.int64) if self.shuffle else np.arange(n, dtype=np.int64)
            if race is not None and state is None:
                # the first pass races; the later ones continue the winner
                self._race_pass(race, X, y_core, sw, order, power_sums, columns)
                state = race.settle("fit", int(self.max_epochs))
                before = (0.0, 0.0)
            else:
                # tol compares the epochs' LAST-iterate progressive loss, as it always did:
                # the reported model's would move where fit stops, and so the model of a
                # fixed sigma (issue 34 keeps those); a later epoch's last iterate is also
                # the better-resolved signal of progress (the average lags by design)
                before = (state.sum_weighted_loss, state.sum_weight)
                self._run(state, X, y_core, sw, order, self._classifier, power_sums,
                          columns=columns)
            epochs += 1
            if self.tol is not None:
                w = state.sum_weight - before[1]
                epoch_loss = (state.sum_weighted_loss - before[0]) / w if w > 0 else 0.0
                stall = stall + 1 if epoch_loss > best - self.tol else 0
                best = min(best, epoch_loss)
                if stall >= self.n_iter_no_change:
                    break
        self._install(state, epochs, race=race, _columns=columns, **extra)  # (max_epochs >= 1)
        return self

    def _partial_fit(self, X, y, sample_weight, classes=None, one_class=False):
        with _training(self, keep=(PGSDivergedError,)):
            return self._partial_fit_unguarded(X, y, sample_weight, classes,
                                               one_class=one_class)

    def _check_call_params(self, first):
        """The parameter checks of a partial_fit call starting (`first`) or continuing
        the state."""
        if first:
            self._validate_params()
            self._check_rules()
        else:
            self._check_state_params()

    def _partial_fit_unguarded(self, X, y, sample_weight, classes, one_class=False):
        first = not hasattr(self, "_state")
        if not first and hasattr(self, "_saved_stats"):  # loaded from a weights-only file
            from onlinepgs.model_io.stateless import NO_STATE
            raise ValueError(f"this {type(self).__name__} cannot continue training: "
                             f"{NO_STATE}")
        self._check_call_params(first)
        crossed = self._validate_crossed(X, first) if isinstance(X, CrossedRows) else None
        X = crossed if crossed is not None else self._validate_X(X, reset=first)
        y_core, n_problems, multiclass, extra = self._encode_targets(
            X, y, fit=first, classes=classes, one_class=one_class)
        raw = self._validate_weights(sample_weight, X.shape[0])
        # "balanced" adds them up since the stream's start (class_counts_total_)
        _checks.check_weight_sum(raw, 0.0 if first else getattr(self, "class_counts_total_",
                                                                0.0))
        sw = raw
        if self._classifier:
            sw = _class_weight.partial_fit_weights(self, raw, y_core, multiclass, extra,
                                                   first)
        _checks.check_weight_sum(sw, 0.0 if first else self._state.sum_weight, raw=raw)
        # a learner whose first matrix is wide and sparse holds its states over the columns
        # its rows reach (_columns_seen): X's columns as their slots from here on
        columns = (self.__dict__.get("_columns") if not first else
                   _columns_seen.ColumnMap() if _columns_seen.maps(X) else None)
        self._check_width(X, n_problems, have=0 if first else self.n_features_in_)
        width_in = X.shape[1]
        # everything is validated: from here on nothing can fail half-way
        power_sums = self._row_power_sums(X)  # (a row's: the same over slots)
        order = np.arange(X.shape[0], dtype=np.int64)
        # the installed state changes in place (and may be reallocated to widen it):
        # readers of the weights wait for this pass
        with self._lock("_state_lock"):
            if columns is not None:  # (under the lock: readers look columns up in it)
                X = _columns_seen.mapped(X, columns)
            width = X.shape[1] if columns is None else _columns_seen.capacity(X.shape[1])
            race, state = (None if first else getattr(self, "_race", None)), None
            if first and self._auto():
                race = self._new_race(width, n_problems, multiclass,
                                      check_random_state(self.random_state), _reach(X))
            elif first:
                state = self._new_state(width, n_problems, multiclass,
                                        check_random_state(self.random_state), _reach(X))
            else:
                state = self._state
                if X.shape[1] > state.dim - 1:  # more columns, or slots, than it holds
                    for grown in (race.states.values() if race is not None else (state,)):
                        grown.ensure_dim(width)
                if width_in > self.n_features_in_:
                    extra["n_features_in_"] = width_in
            if first:
                extra["_columns"] = columns
            diverged = False
            try:
                if race is not None:
                    self._race_pass(race, X, y_core, sw, order, power_sums, columns)
                else:
                    self._run(state, X, y_core, sw, order, self._classifier, power_sums,
                              columns=columns)
            except PGSDivergedError:
                diverged = True
                raise
            finally:
                self._install_after(state, race, first, diverged, **extra)
        return self

    def _install_after(self, state, race, first, diverged, **attributes):
        """After a training call's pass over `state` or `race` (partial_fit's, an event's):
        the race's leader (or the state) installed as the model, the call counted."""
        if race is not None and race.states:
            state = race.leader
        elif race is not None:
            # every run of the race diverged (its error is on its way): the race is over;
            # the last leader, as it stood before its failed step, goes on at its sigma
            # (none on a first call)
            state, race = (None if first else self._state), None
        if state is not None:
            self._install(state, getattr(self, "n_iter_", 0) + 1 if not first else 1,
                          race=race, **attributes)
            if diverged:
                # its weights may not be finite: predictions read the whole model, which
                # says whether it is usable (`_scores`)
                self._cache["diverged"] = True

    def _unmap(self):
        """A learner that holds its states over the columns its rows reach
        (`onlinepgs._columns_seen`) holds them over the width from here on, each state
        expanded (the same steps, each slot's rows at its column): for the paths that run
        the core on columns themselves (Dask's lanes). Nothing for any other learner."""
        columns = self.__dict__.get("_columns")
        if columns is None:
            return
        with self._lock("_state_lock"):
            width, race = self.n_features_in_, getattr(self, "_race", None)
            if race is not None:
                leader = next(rid for rid, st in race.states.items() if st is self._state)
                race.states = {rid: _columns_seen.expanded(st, columns, width)
                               for rid, st in race.states.items()}
                state = race.states[leader]
            else:
                state = _columns_seen.expanded(self._state, columns, width)
            self._install(state, self.n_iter_, race=race, _columns=None)

    def _settle_race(self, reason, epochs):
        """End a live sigma race after a first pass that later passes over the same rows
        follow (the streaming engine's ``passes``, as `fit`'s epochs): the leader goes on,
        forked for ``epochs`` passes (`SigmaSchedule.settle`). Nothing without a race."""
        race = getattr(self, "_race", None)
        if race is None or race.schedule.settled:
            return
        with self._lock("_state_lock"):
            self._install(race.settle(reason, int(epochs)), self.n_iter_, race=race)

    def _install(self, state, epochs, race=None, **attributes):
        """Make `state` the model, with fitted `attributes` (classes_, n_features_in_);
        `race`: the sigma race it leads (sigma="auto"), else None."""
        with self._lock("_state_lock"):
            for name, value in attributes.items():
                setattr(self, name, value)
            self._state = state
            self.__dict__.pop("_saved_stats", None)  # a weights-only file's, now replaced
            self._race = race
            self._state_params = {n: getattr(self, n) for n in _STATE_PARAMS
                                  if hasattr(self, n)}  # a regressor has no multi_class
            self._cache = {}
            self.n_iter_ = epochs
            self.t_ = int(state.t)

    # ---- read-out ---------------------------------------------------------------------
    def _make_model(self, check_finite=True):
        """The installed state's model as a value, computed once per state: dense, or,
        for a wide state whose rows reached few of its coordinates, its weights held
        sparse and read at those coordinates only (`onlinepgs._sparse_readout`: the same
        model, O(coordinates reached) rather than O(width)).

        A snapshot already taken is returned without waiting; otherwise it is taken
        under the state lock, after the partial_fit pass in progress if any. Weights
        that are not finite (a state that overflowed: its training call said so) raise
        PGSDivergedError, never handed out, unless ``check_finite=False`` (for the
        certificates, which name the entry).
        """
        model = self._cache.get("model")
        if model is not None:
            return model
        with self._lock("_state_lock"):
            cache = self._cache  # the state's and cache's of the same installation
            if "model" in cache:
                return cache["model"]
            state = self._state
            at_rows = rows_read_out(state)  # a wide model: at the coordinates reached
            if at_rows is not None:
                (indptr, indices, data), w0, scales = at_rows
                coef = SparseWeights(indptr, indices, data,
                                     (state.n_problems, state.dim - 1))
                finite = True  # (checked: else the dense read-out below says where)
            else:
                with np.errstate(all="ignore"):
                    W = state.weights()  # (1 + n_features, K)
                coef, w0 = W[1:].T, W[0]
                scales = feature_scales(state, self._layout(1).offset("inv_scale"))
                finite = bool(np.isfinite(W).all())
            columns = self.__dict__.get("_columns")
            if not finite and (check_finite or columns is not None):
                reason = _overflow_reason(state, None, None, columns=columns)
                raise PGSDivergedError(f"the model is not usable: {reason}", reason=reason)
            if columns is not None:  # a state over slots: its weights at their columns
                coef, scales = _columns_seen.model_at_columns(coef, scales, columns,
                                                              self.n_features_in_)
            cfg = state.config()  # the fitted configuration, whatever set_params did since
            fitted = self._state_params
            model = LinearModel(
                coef, w0 if cfg["fit_intercept"] else None,
                classes=self.classes_ if self._classifier else None, loss=cfg["loss"],
                epsilon=cfg["epsilon"], p=cfg["p"], sigma=cfg["sigma"],
                l1=cfg.get("l1", 0.0),
                # "auto": the ball grown over the rows seen, its radius in the state
                radius=None if cfg["radius"] is None else float(state.radius),
                fit_intercept=cfg["fit_intercept"], intercept_scaling=cfg["intercept_scaling"],
                n_bits=fitted["n_bits"], hash_seed=fitted["hash_seed"],
                n_features_in=self.n_features_in_, solver="pgs",
                interactions=fitted.get("interactions"),
                multi_class=self._fitted_multi_class(), scales=scales)
            if finite:
                cache["model"] = model
            return model

    def _scores(self, X):
        """`LinearLearner._scores`, where a few sparse rows (records too) are scored from
        the solver state at their coordinates (`PGSState.scores`, O(nnz K)) while no
        model was read out since the last training call, rather than by reading out the
        model's every weight (O(width K)): predicting between partial_fit calls (test
        then train, row by row) costs O(nnz) whatever the width. The scores are those
        of the model read out, bit for bit. Rows with as many entries as the model has
        coordinates, and dense rows, are scored by the model (read once, then kept until
        the next training call), as are the rows of a state a divergence left (whose
        model may not be usable: reading it out says so) and scores that are not finite
        (the model then says whether its weights are)."""
        self._check_fitted()
        cache = self._cache
        if "model" in cache or "diverged" in cache:  # (a weights-only file's: no state)
            return super()._scores(X)
        x, dim = _checks.single_record(X), self._state.dim
        if not ((sp.issparse(x) and x.nnz + x.shape[0] < dim)
                or (is_records(x) and len(x) < dim)):
            return super()._scores(X)  # the model first, then X (an unusable model says so)
        X = self._prediction_matrix(x)
        if sp.issparse(X):
            with self._lock("_state_lock"):  # not halfway through a partial_fit pass
                cache, state = self._cache, self._state
                columns = self.__dict__.get("_columns")
                # the rows over the state's slots; X stays over the columns, for the
                # model below (which reads slots as columns: the weights of others)
                rows = X if columns is None else _columns_seen.slots_of_rows(X, columns)
                if ("model" not in cache and "diverged" not in cache
                        and rows.nnz + rows.shape[0] < state.dim):
                    scores = state.scores(rows.data, rows.indices, rows.indptr)
                    if np.isfinite(scores).all():
                        return (scores, self.classes_ if self._classifier else None,
                                self._fitted_multi_class())
        model = self.model_
        return model.scores(X), model.classes, model.multi_class

    def _fitted_multi_class(self):
        """How the fitted model's K > 2 classes were learned ("ovr" for a regressor)."""
        return self._state_params.get("multi_class", "ovr") if self._classifier else "ovr"

    @property
    def sigma_(self):
        """The sigma of the model (float): the race's choice with sigma="auto", else the
        sigma parameter."""
        self._check_fitted()
        return float(self._state.sigma)

    @property
    def eta_(self):
        """The adaptive geometry's base rate of the model (float): the race's choice
        with eta="auto" (the rate of the run reported now, while the race of eta is
        on), else the eta parameter; None in the global geometry."""
        self._check_fitted()
        return float(self._state.eta) if self.geometry == "adaptive" else None

    @property
    def sigma_path_(self):
        """The sigma race's record (sigma="auto"; [] for a fixed sigma): one dict per
        event, at ``rows`` rows: a ``"check"`` (each live run's ``sigma``, ``started_at``,
        ``parent``, cumulative ``progressive_loss`` and ``window_loss`` over the rows since
        the previous check, the ``leader`` run and its ``leader_sigma``, the runs
        ``dropped`` and ``forked``), a ``"drop"`` of a run that diverged, or the
        ``"settle"`` that ended the race (fit's first pass: its ``epochs`` and the
        ``sigma_for_epochs`` the winner goes on with)."""
        self._check_fitted()
        race = getattr(self, "_race", None)
        return [] if race is None else list(race.schedule.path)

    @property
    def online_stats_(self):
        """Online statistics kept by the core (see the README, "Online statistics")."""
        self._check_fitted()
        if hasattr(self, "_saved_stats"):  # a weights-only file's: as they were saved
            return dict(self._saved_stats)
        with self._lock("_state_lock"):  # not halfway through a partial_fit pass
            stats = self._state.stats_dict()
        # progressive_*: the reported model's (the iterate coef_ is), *_last: the last
        # iterate's (see PGSState.progressive_sums)
        if self._classifier:
            n = stats["n_examples"]
            for suffix in ("", "_last"):
                stats["progressive_error_rate" + suffix] = (
                    stats["progressive_mistakes" + suffix] / n if n else float("nan"))
        else:
            del stats["progressive_mistakes"], stats["progressive_mistakes_last"]
        keys = ("regret_bound", "optimization_error_bound", "online_objective",
                "dual_objective", "online_duality_gap")
        if stats["regret_bound"].shape == (1,):
            for key in keys:
                stats[key] = float(stats[key][0])
        elif self._state.mc_code:
            # a coupled loss: one objective over the K vectors, whose figures the core
            # keeps shared out over the problems (PGSState.stats_dict): their sums
            for key in keys:
                stats[key] = float(np.sum(stats[key]))
        return stats

    def fit_stream(self, stream, *, classes=None, chunk_rows=1000):
        """One pass over an iterable of ``(x, y)`` pairs, ``chunk_rows`` at a time.

        ``x`` is a dict ``{feature: value}`` or a sequence of ``(feature, value)`` pairs,
        features being ints (column indices) or, with ``n_bits``, strings (hashed).
        Memory holds one chunk; the model is called once per chunk. Continues the
        current state like `partial_fit`; chunks are rounded up to whole mini-batches, so
        the result does not depend on ``chunk_rows``. This is the streaming engine's
        pass over one iterable (`onlinepgs.streaming.engine.StreamPasses`);
        `onlinepgs.streaming.train_stream` also offers passes, a hold-out, checkpoints
        and resume.

        Parameters
        ----------
        stream : iterable of (x, y)
        classes : array-like or None
            Every label the stream may hold; None: the model's, else the labels of the
            first chunk. A regressor ignores it.
        chunk_rows : int, default=1000

        Returns
        -------
        self

        Raises
        ------
        ValueError, PGSDivergedError
            `partial_fit`'s error, naming the record of the stream (counted from 1)
            instead of the row of its call (``record 17 of the stream``); one that names
            no row says the records of the chunk it came from (``records from 1001 of
            the stream: ...``). Errors of the stream itself (an item that is no pair, a
            label outside the classes) are `onlinepgs.streaming.StreamError`.

        Examples
        --------
        >>> from onlinepgs.pgs import PGSClassifierLearner
        >>> stream = ({"word=" + w: 1.0} for w in ["good", "bad"] * 50)
        >>> pairs = zip(stream, [1, 0] * 50)
        >>> clf = PGSClassifierLearner(n_bits=10, sigma=1e-2).fit_stream(pairs, classes=[0, 1])
        >>> clf.predict([{"word=good": 1.0}, {"word=bad": 1.0}])
        array([1, 0])
        """
        from onlinepgs.streaming.engine import StreamPasses
        from onlinepgs.streaming.errors import EmptyStreamError, LearnerError
        from onlinepgs.streaming.sources import IterableSource

        if chunk_rows < 1:
            raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows!r}")
        # partial_fit's first check, made before any record: it concerns none
        self._check_call_params(not hasattr(self, "_state"))
        try:
            StreamPasses(self, classes=classes if self._classifier else None,
                         chunk_rows=int(chunk_rows)).run([IterableSource(stream)])
        except EmptyStreamError:  # an empty stream leaves the model as it is
            pass
        except LearnerError as exc:
            # the caller knows records of the stream, not rows of a chunk
            raise exc.in_source_words() from None
        return self



_INIT_DOC = """
    Parameters and attributes are those of `onlinepgs.{0}` (this is that estimator
    without scikit-learn: the same training, bit for bit); ``model_`` is the fitted model
    as a value (`onlinepgs.model.LinearModel`).
"""


class PGSClassifierLearner(ClassifierLearner, EventClassifier, PGSLearner):
    __doc__ = """PGS classifier without scikit-learn (what `onlinepgs.PGSClassifier` adds
    scikit-learn's conventions to).
""" + _INIT_DOC.format("PGSClassifier")
    _public_name = "PGSClassifier"
    _constraints = _options.learner_constraints("pgs", "classifier")

    def __init__(self, loss="logistic", *, p=2.0, sigma="auto", l1=0.0, radius="auto",
                 batch_size=1, iterate="auto", fit_intercept=True, intercept_scaling=1.0,
                 max_epochs=5, tol=None, n_iter_no_change=5, shuffle=True,
                 random_state=None, epsilon=0.1, n_bits=None, hash_seed=0,
                 max_model_bytes=MAX_MODEL_BYTES, forget=1.0, interactions=None,
                 geometry="global", eta="auto", n_jobs=None, class_weight=None,
                 multi_class="ovr", classes=None):
        super().__init__(loss, p=p, sigma=sigma, l1=l1, radius=radius,
                         batch_size=batch_size, iterate=iterate, fit_intercept=fit_intercept,
                         intercept_scaling=intercept_scaling, max_epochs=max_epochs, tol=tol,
                         n_iter_no_change=n_iter_no_change, shuffle=shuffle,
                         random_state=random_state, epsilon=epsilon, n_bits=n_bits,
                         hash_seed=hash_seed, max_model_bytes=max_model_bytes,
                         forget=forget, interactions=interactions, geometry=geometry,
                         eta=eta, n_jobs=n_jobs)
        self.class_weight = class_weight
        self.multi_class = multi_class
        self.classes = classes

    def fit(self, X, y, sample_weight=None):
        """Run `max_epochs` passes of PGS over (X, y) from a fresh state.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features), or records
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None
            Each row's loss weight: a row of weight c takes one step whose gradient is
            c times its loss's (see docs/design/estimators.md, "Sample weights").

        Returns
        -------
        self
        """
        return self._fit(X, y, sample_weight)

    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """One pass over the rows of (X, y), in order, continuing the current state.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features), or records
            Sparse chunks may have more columns than earlier ones, and records (without
            ``n_bits``) integer features beyond them: the model grows.
        y : array-like of shape (n_samples,)
        classes : array-like, required on the first call unless the classes
            parameter holds them
            Every label the stream may contain.
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        self
        """
        if not hasattr(self, "_state") and classes is None:
            classes = self.classes
        if not hasattr(self, "_state") and classes is None:
            raise ValueError("classes must be passed on the first call to partial_fit (or "
                             "set as the classes parameter)")
        return self._partial_fit(X, y, sample_weight, classes=classes)


class PGSRegressorLearner(RegressorLearner, PGSLearner):
    __doc__ = """PGS regressor without scikit-learn (what `onlinepgs.PGSRegressor` adds
    scikit-learn's conventions to).
""" + _INIT_DOC.format("PGSRegressor")
    _public_name = "PGSRegressor"
    _constraints = _options.learner_constraints("pgs", "regressor")

    def __init__(self, loss="squared", *, p=2.0, sigma="auto", l1=0.0, radius="auto",
                 batch_size=1, iterate="auto", fit_intercept=True, intercept_scaling=1.0,
                 max_epochs=5, tol=None, n_iter_no_change=5, shuffle=True,
                 random_state=None, epsilon=0.1, n_bits=None, hash_seed=0,
                 max_model_bytes=MAX_MODEL_BYTES, forget=1.0, interactions=None,
                 geometry="global", eta="auto", n_jobs=None):
        super().__init__(loss, p=p, sigma=sigma, l1=l1, radius=radius,
                         batch_size=batch_size, iterate=iterate, fit_intercept=fit_intercept,
                         intercept_scaling=intercept_scaling, max_epochs=max_epochs, tol=tol,
                         n_iter_no_change=n_iter_no_change, shuffle=shuffle,
                         random_state=random_state, epsilon=epsilon, n_bits=n_bits,
                         hash_seed=hash_seed, max_model_bytes=max_model_bytes,
                         forget=forget, interactions=interactions, geometry=geometry,
                         eta=eta, n_jobs=n_jobs)

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
