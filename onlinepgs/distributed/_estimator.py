"""Everything the distributed layer asks of an estimator, in one place.

The rest of `onlinepgs.distributed` never touches an estimator's private attributes or
methods, nor scikit-learn: it calls the functions here. Where the estimators change
(a shared linear-model base, classes without scikit-learn), this module is the one to
adapt. What it uses of a `PGSClassifier` / `PGSRegressor` `est`:

* parameters: ``batch_size``, ``n_bits``, ``random_state``;
* fitted attributes: ``classes_``, ``n_features_in_``, ``n_iter_``, ``_state`` (the
  solver's `PGSState`), ``_race`` (sigma="auto": the `SigmaRace` of its live runs, or
  None), ``_classifier`` (class attribute);
* methods: ``_validate_params``, ``_check_rules``, ``_check_state_params``,
  ``_check_width``, ``_auto``, ``_new_state``, ``_new_race``, ``_install``, and, on the
  workers (a clone of `est` with ``classes_`` set, the "spec"), ``_as_matrix``,
  ``_encode_targets``, ``_row_power_sums``;
* from `onlinepgs._race`: `SigmaRace`, `SigmaSchedule` (a race's copy);
* from `onlinepgs.pgs`: ``PGSLearner`` (the type check: the scikit-learn estimators and
  the command line's learners are both), `PGSDivergedError`; from `onlinepgs._base`:
  ``_training`` (one training call at a time, undone on error).

Nothing here imports scikit-learn: ``onlinepgs train --scheduler`` runs without it.
"""
import numpy as np
import scipy.sparse as sp

from onlinepgs import _options
from onlinepgs._base import _training
from onlinepgs._race import SigmaRace, SigmaSchedule
from onlinepgs._checks import check_random_state
from onlinepgs.distributed.runs import Race, Runs
from onlinepgs.pgs import PGSDivergedError, PGSLearner

__all__ = ["PGSDivergedError", "as_matrix", "batch_size", "check_block_width",
           "check_params", "check_rows", "check_trainable", "check_width", "classes_of",
           "encode_targets", "epochs_after", "fitted_width", "hashing_bits", "install",
           "is_classifier", "is_fitted", "name_of", "new_runs", "random_state",
           "row_power_sums", "runs_copy", "spec", "training"]


# ---- the estimator the driver trains ----------------------------------------------------
def check_trainable(est):
    """TypeError unless `est` is an estimator `onlinepgs.dask` trains (what it refuses of
    its parameters is `check_params`')."""
    if not isinstance(est, PGSLearner):
        raise TypeError("onlinepgs.dask trains a PGSClassifier or PGSRegressor, got "
                        f"{type(est).__name__}")


def training(est):
    """A context for one training call on `est`: after any other training call on it,
    and the estimator left as it was if the call raises."""
    return _training(est)


def is_fitted(est):
    """Whether `est` holds a solver state to continue."""
    return hasattr(est, "_state")


def check_params(est, first, classes):
    """Check the parameters (`onlinepgs._options`): all of them for a first training,
    else that those the solver state depends on did not change since it began; then
    what Dask refuses of them (l1, forgetting, class weights, coupled multiclass
    losses), and `classes` of a regressor."""
    if first:
        est._validate_params()
        est._check_rules()
    else:
        est._check_state_params()
    params = est.get_params(deep=False)
    words = _options.Words()
    _options.dask_rules(params, words, balanced=hasattr(est, "class_counts_"))
    _options.check_stream_run({"loss": est.loss, "classes": classes}, words)


def name_of(est):
    return type(est).__name__


def is_classifier(est):
    """Whether `est` (or a spec) is a classifier (labels) or a regressor (targets)."""
    return bool(est._classifier)


def batch_size(est):
    return int(est.batch_size)


def hashing_bits(est):
    """``n_bits`` of feature hashing, or None (columns are the data's)."""
    return est.n_bits


def random_state(est, seed):
    """A RandomState from `seed`, or from the estimator's ``random_state`` when None."""
    return check_random_state(est.random_state if seed is None else seed)


def fitted_width(est):
    """The features of a fitted estimator (``n_features_in_``)."""
    return est.n_features_in_


def classes_of(est):
    """The classes of a classifier (fitted, or a spec); None for a regressor."""
    return getattr(est, "classes_", None)


def check_width(est, width, n_problems, have=0):
    """Refuse a declared width beyond the estimator's ``max_model_bytes`` budget."""
    est._check_width(sp.csr_matrix((0, width)), n_problems, have=have)


def new_runs(est, width, n_problems, multiclass, rng):
    """The runs of a first training and the race (None for a fixed sigma): one fresh
    solver state of the estimator's parameters, or with ``sigma="auto"`` the runs the
    race's schedule starts (`_new_race`)."""
    if not est._auto():
        return Runs({0: est._new_state(width, n_problems, multiclass, rng)}, 0), None
    race = est._new_race(width, n_problems, multiclass, rng)
    return Runs(race.states, race.leader_id, racing=True), Race(race.schedule, race.n_rows)


def runs_copy(est):
    """A copy of a fitted estimator's runs and race (the estimator keeps its own, so a
    failed call leaves it as it was): its state, or with ``sigma="auto"`` every live run
    of its race and the schedule (settled, or going on across calls)."""
    race = getattr(est, "_race", None)
    if race is None:
        return Runs({0: est._state.copy()}, 0), None
    schedule = SigmaSchedule.from_dict(race.schedule.to_dict())
    runs = Runs({k: s.copy() for k, s in race.states.items()}, race.leader_id, racing=True)
    return runs, Race(schedule, race.n_rows)


def epochs_after(est, passes, first):
    """``n_iter_`` once `passes` more passes are done."""
    return passes if first else getattr(est, "n_iter_", 0) + passes


def install(est, runs, race, epochs, **fitted):
    """Make the leader of `runs` the estimator's model, with fitted attributes, all at
    once (threads may be predicting meanwhile); with ``sigma="auto"`` its race too (the
    live runs and the schedule: `sigma_`, `sigma_path_`, and the race partial_fit goes on
    with)."""
    # the lanes' states are over the width (`run`: a learner's that were over the
    # columns seen expanded first)
    if race is None:
        est._install(runs.state, epochs, _columns=None, **fitted)
        return
    kept = SigmaRace(race.schedule, runs.states, race.n_rows)
    est._install(runs.state, epochs, race=kept, _columns=None, **fitted)


def spec(est, classes):
    """What the workers need of the estimator to read blocks: an unfitted copy of its
    parameters, with the classes (a classifier) that encode the labels."""
    # an unfitted copy of the parameters (scikit-learn's clone, without importing it)
    copy = type(est)(**est.get_params(deep=False))
    if classes is not None:
        copy.classes_ = classes
    return copy


# ---- the spec, on the workers -----------------------------------------------------------
def as_matrix(spec, X):
    """Rows as the model takes them: CSR for sparse input, hashed into 2**n_bits
    columns when hashing."""
    return spec._as_matrix(X, fitted=True)


def check_rows(X):
    """Sparse rows as CSR float64 (no finiteness check; no rows or columns allowed)."""
    X = X.tocsr() if sp.issparse(X) else sp.csr_matrix(X)
    return X if X.dtype == np.float64 else X.astype(np.float64)


def check_block_width(spec, X, n_problems, where):
    """The width budget, on a block's rows, naming the row beyond it with `where`."""
    spec._check_width(X, n_problems, where)


def encode_targets(spec, X, y):
    """The core's targets of labels (classifier: raises ValueError for an unknown label)
    or of regression targets."""
    return spec._encode_targets(X, y, fit=False)[0]


def row_power_sums(spec, X):
    """The rows' power sums the core's regret statistic takes, or None."""
    return spec._row_power_sums(X)
