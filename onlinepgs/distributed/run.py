"""A distributed run: from the user's estimator, data and options to the fitted model.

`train` sets up the run (the scheduler, the source of partitions, the classes and
their encoding, the solver state to start from, the lanes' partitions), hands the
rounds to the `Driver`, and installs the state it ends with in the estimator, or
leaves the estimator as it was if anything fails.
"""
import numpy as np

from onlinepgs.distributed import _estimator as estimator_api
from onlinepgs.distributed.backends import DistributedBackend, LocalBackend
from onlinepgs.distributed.driver import Driver
from onlinepgs.distributed.slices import auto_slice_rows
from onlinepgs.distributed.sources import make_source
from onlinepgs.distributed.sources.array import ArraySource
from onlinepgs.streaming import whole_batches

__all__ = ["train", "balanced"]


def train(est, X, y, sample_weight, classes, options):
    """Train `est` on X (y, sample_weight: a dask array's) as `options` (`RunOptions`)
    say; return it, fitted."""
    estimator_api.check_trainable(est)
    # every option before any work: the estimator's, Dask's (options: RunOptions')
    first = options.fresh or not estimator_api.is_fitted(est)
    estimator_api.check_params(est, first, classes)
    backend = (DistributedBackend(options.client) if options.client is not None
               else LocalBackend())
    try:
        with estimator_api.training(est):  # after any other training call, undone on error
            return _train_guarded(est, X, y, sample_weight, classes, options, backend)
    finally:
        backend.close()


def _train_guarded(est, X, y, sample_weight, classes, options, backend):
    first = options.fresh or not estimator_api.is_fitted(est)
    n_lanes = options.n_lanes
    lanes_wanted = n_lanes if n_lanes is not None else backend.n_threads()
    source = make_source(X, y, sample_weight, est, options, lanes_wanted, backend,
                         fitted=not first)
    try:
        groups = workers = None
        if options.locality:
            workers, groups = _groups_by_worker(source, backend)
            if n_lanes is not None and n_lanes != len(groups):
                raise ValueError(f"locality=True makes one lane per worker holding X "
                                 f"({len(groups)}), but n_lanes={n_lanes}")
            lanes_wanted = len(groups)
        return _run(est, source, classes, options, backend, lanes_wanted, first, groups,
                    workers)
    finally:
        source.close()  # cached file readers, on every worker


def _groups_by_worker(source, backend):
    """The workers holding partitions of a persisted dask array (in address order) and
    the partitions of each (one held by several goes to the first)."""
    if not isinstance(source, ArraySource):
        raise ValueError("locality=True needs X as a dask array persisted on the cluster; "
                         "text partitions are read where their tasks run")
    holders = backend.holders(source.X)
    missing = [i for i, h in enumerate(holders) if not h]
    if missing:
        raise ValueError(f"locality=True needs X persisted on the cluster "
                         f"(client.persist(X)); partition {missing[0]} of X is held by no "
                         f"worker")
    workers = sorted({min(h) for h in holders})
    groups = [[i for i, h in enumerate(holders) if min(h) == w] for w in workers]
    return workers, balanced(groups, np.diff(source.offsets), holders, workers)


def balanced(groups, rows, holders, workers):
    """Lanes' partitions with their rows evened out: a pass lasts as long as its
    longest lane, so while the longest has a partition smaller than its lead over the
    shortest, the one nearest half that lead moves to the shortest (among equals, one
    the shortest's worker also holds, as it needs no transfer, then the last). Each move
    shrinks the spread, so it ends; a moved block crosses to its lane's worker once a
    pass. The scheduler puts persisted partitions unevenly (52 and 48 of 100 on 2
    workers, seen): that lane trained one round more, alone."""
    groups = [list(g) for g in groups]
    loads = [int(sum(rows[i] for i in g)) for g in groups]
    while len(groups) > 1:
        heavy = max(range(len(groups)), key=lambda k: (loads[k], -k))
        light = min(range(len(groups)), key=lambda k: (loads[k], k))
        gap = loads[heavy] - loads[light]
        movable = [i for i in groups[heavy] if 0 < rows[i] < gap]
        if not movable:
            break
        part = min(movable, key=lambda i: (abs(2 * int(rows[i]) - gap),
                                           workers[light] not in holders[i], -i))
        groups[heavy].remove(part)
        groups[light].append(part)
        groups[light].sort()
        loads[heavy] -= int(rows[part])
        loads[light] += int(rows[part])
    return groups


def _run(est, source, classes, options, backend, lanes_wanted, first, groups=None,
         workers=None):
    if source.n_partitions == 0:
        raise ValueError("the data has no partitions: there is nothing to fit")
    if source.n_rows == 0:
        raise _no_rows(source)
    n_lanes = min(lanes_wanted, source.n_partitions)
    slice_rows, sizing, growing = _slices(est, source, options, n_lanes, groups)
    classes, n_problems, multiclass = _classes(est, source, classes, first)
    source.spec = estimator_api.spec(est, classes)

    # the state to start from
    rng = estimator_api.random_state(est, options.random_state)
    width = source.width
    if not first:
        # the lanes step states at the columns: a learner that holds its states over the
        # columns seen (onlinepgs._columns_seen) expands them first
        est._unmap()
    estimator_api.check_width(est, width, n_problems,  # a declared width
                              have=0 if first else estimator_api.fitted_width(est))
    if first:
        runs, race = estimator_api.new_runs(est, width, n_problems, multiclass, rng)
        n_features_in = width
    else:
        runs, race = estimator_api.runs_copy(est)
        n_features_in = max(estimator_api.fitted_width(est), width)
        for state in runs.states.values():
            state.ensure_dim(n_features_in)
    driver = Driver(runs, source, backend, n_lanes, slice_rows, rng, options.shuffle,
                    options.callback, classifier=classes is not None, groups=groups,
                    groups_workers=workers, sizing=sizing, grow=growing, race=race)
    try:
        for pass_index in range(options.passes):
            driver.racing = race is not None and race.next_check is not None
            driver.counting = race is not None and (not options.fresh or pass_index == 0)
            driver.run_pass(pass_index)
            if driver.rounds == 0:  # text partitions, all empty (every round has rows)
                raise _no_rows(source)
            if (driver.racing and race.next_check is not None
                    and (options.fresh or pass_index + 1 < options.passes)):
                # sigma="auto": the race is the first pass's (later passes read the rows
                # again, whose progressive losses are no longer those of unseen rows);
                # `fit` ends it there, as the local fit does; the winner goes on
                driver.take_step(race.settle(*driver.race_sums(), epochs=options.passes))
    finally:
        driver.close()
    runs = driver.state
    if race is not None and race.next_check is not None:
        # a race partial_fit goes on with: the model reported is the leader now
        runs.leader = race.leader(*driver.race_sums())
    n_features_in = max(n_features_in, driver.width_seen)
    fitted = {"n_features_in_": n_features_in}
    if first and classes is not None:
        fitted["classes_"] = classes
    estimator_api.install(est, runs, race,
                          estimator_api.epochs_after(est, options.passes, first), **fitted)
    return est


def _slices(est, source, options, n_lanes, groups):
    """The first round's rows a lane (whole mini-batches); what the driver needs to bound
    the slices' bytes once it has read a block (None: no bound); whether the rounds of
    a pass grow."""
    k = estimator_api.batch_size(est)
    slice_rows = options.slice_rows
    # "auto" on a known length: the rounds of a pass grow (Driver._grown), and the
    # driver bounds the slices' bytes once it has read a block, unless the lanes train
    # the rows where they lie: a persisted array's blocks on the lanes' own workers
    # (locality), read by the round itself (nothing read ahead or moved) as the core
    # takes them (no converted copy), in order and in steps of one row (no copy of a
    # slice); on threads, where an array's blocks are in memory already (values of its
    # graph) and trained in place, a slice holds only what reading adds (labels,
    # weights), and those are the bytes bounded
    growing = slice_rows == "auto" and source.n_rows is not None
    plain = estimator_api.hashing_bits(est) is None and not options.shuffle and k == 1
    in_place = plain and source.read_in_place and groups is not None
    held = plain and growing and source.rows_held  # asks only where it matters
    sizing = (source.n_rows, k, held) if growing and not in_place else None
    if slice_rows == "auto":
        slice_rows = auto_slice_rows(source.n_rows, n_lanes)
    return whole_batches(slice_rows, k), sizing, growing


def _classes(est, source, classes, first):
    """A classifier's classes (sorted; the fitted model's when it continues, else those
    given, else those a first pass over the source finds), its problems (one, or one
    per class beyond two) and whether it is multiclass; a regressor's None, 1, False."""
    if not estimator_api.is_classifier(est):  # (train refused classes for it)
        return None, 1, False
    if not first:
        known = estimator_api.classes_of(est)
        if classes is not None and not np.array_equal(np.unique(classes), known):
            raise ValueError(f"classes={np.unique(classes).tolist()} differs from "
                             f"the classes of the fitted model {known.tolist()}")
        classes = known
    elif classes is None:
        classes = source.find_classes()
        if len(classes) == 0:  # every row has a label
            raise _no_rows(source)
    classes = np.unique(np.asarray(classes))
    if classes.shape[0] < 2:
        raise ValueError(f"{estimator_api.name_of(est)} needs at least 2 classes, got "
                         f"{classes.tolist()}")
    n_problems = 1 if classes.shape[0] == 2 else classes.shape[0]
    return classes, n_problems, classes.shape[0] > 2


def _no_rows(source):
    # as partial_fit refuses 0 rows: a model fitted on nothing would look trained
    n = source.n_partitions
    return ValueError(f"no training rows were read: X's {n} partition"
                      f"{'s are' if n > 1 else ' is'} empty; there is nothing to fit")
