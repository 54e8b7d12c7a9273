"""Train onlinepgs estimators on Dask collections: distributed dual averaging in rounds.

`fit` and `partial_fit` train any `PGSClassifier` or `PGSRegressor` on

* a ``dask.array`` of row blocks (dense NumPy or scipy.sparse, any format) with labels
  (a 1-d dask array with the same rows, or a NumPy array), and optional sample weights;
* a ``dask.bag`` of svmlight/libsvm text lines (one bag partition is one partition);
* a list of svmlight files (plain files split into byte ranges, one partition each;
  a compressed file is one partition), read in blocks, never whole.

The method. The partitions are dealt round-robin to ``n_lanes`` lanes (by default one
per worker thread); each lane reads its partitions in order as one stream of rows. In
every **round** the driver's global state (lambda, t and the scalars of the iterate)
goes to every lane; each lane runs PGS from it over its next ``slice_rows`` rows in the
compiled core (the GIL released) and returns what changed: its delta lambda (sparse),
its delta t (steps), its averaged sums and the increments of the statistics. The driver
adds them into the global state: lambda += the sum of the delta lambdas, t += the sum
of the delta t, so the next iterate ``grad r*(lambda / ((t + 1) sigma))`` is PGS's formula
over every gradient taken so far. Rounds repeat until every lane has read its rows
``passes`` times. No scheduler of our own: rounds are Dask tasks, on the local threaded
scheduler by default or on a ``dask.distributed`` cluster when a ``Client`` is given.
On a cluster every lane's worker keeps a copy of the global state and does the
driver's merge on it at the start of the lane's next round, the same additions in the
same order on every copy, so the copies stay equal bit for bit: between rounds each
worker fetches the other lanes' (sparse) changes, no state moves, and the driver only
plans the rounds and fetches the state at the end of a pass.

Within a round a lane counts each of its steps for ``n`` steps (n = the lanes of the
round): t moves by n and lambda by n times the step's gradient, so its iterate is the one
the global state would reach if every lane took the same steps; it sends back its own
share, (its lambda - the start's) / n. Counting them once instead, a lane that settles on
the optimum of its rows (fast when sigma is small) corrects the whole error of the round's
start, and the sum of n such corrections overshoots: the error is multiplied by about
-(n - 1) every round, which diverges for 3 lanes or more (measured on a9a: 0.82 accuracy
instead of 0.85). Scaled, the merged iterate is the mean of the lanes' iterates.

What it computes, exactly (tested against a NumPy transcription):

* with one step per lane and round (``slice_rows = batch_size``), a round is one step of
  mini-batch PGS whose batch is the lanes' rows together: every step of the round is
  taken at the same iterate, lambda moves by the sum of the lanes' mean gradients and t
  by the number of lanes;
* with one lane, rounds change nothing: the run is single-process PGS over the rows in
  order (`partial_fit`), to rounding;
* with longer slices, a lane's step is taken at its own iterate, which misses the other
  lanes' steps of the round (at most ``(n_lanes - 1) * slice_rows / batch_size``) and
  stands in its own for them: PGS with delayed, extrapolated gradients. See the README
  for what the guarantees become;
* with ``slice_rows="auto"`` on a stream of known length, a pass's rounds grow: its first
  slice is ``n_rows / (8 n_lanes)`` rows a lane, and each later one as many as the lane
  trained in the pass before it (4 rounds a pass where 8 such slices would make 8).
  From the third round on, a step misses fewer of the other lanes' steps than the pass
  had taken before its round, so the delay stays within a fixed share of t while the
  steps 1/(sigma t) shrink; the first rounds, where the iterate moves most, are as short
  as 8 rounds a pass would make them.

The averaged iterates average every iterate the lanes computed, each weighted by its
local step count (1, t or t^2) and each round's weights scaled to those of the global
steps it stands for (`onlinepgs._rounds.average_factor`), so the weights still add up to
those of ``t`` steps. The "random" iterate is a reservoir over rounds: a round's global
iterate is kept with probability (its steps) / (steps so far). The statistics
(`online_stats_`) add up over lanes: every row's loss is taken before its update, by
the iterate that updated with it; the radius of ``radius="auto"`` is the largest any
lane reached.

Examples
--------
>>> import numpy as np, dask.array as da
>>> from onlinepgs import PGSClassifier
>>> import onlinepgs.dask as opd
>>> rng = np.random.RandomState(0)
>>> X = rng.randn(4000, 5); y = np.where(X[:, 0] + 0.1 * rng.randn(4000) > 0, 1, -1)
>>> dX = da.from_array(X, chunks=(1000, 5))              # 4 partitions of 1000 rows
>>> clf = opd.fit(PGSClassifier(sigma=1e-3), dX, y, n_lanes=2, slice_rows=500)
>>> clf.score(X, y) > 0.95, clf.online_stats_["n_examples"]
(True, 4000)
"""
import contextlib
import functools
import io
import itertools
import math
import os
import sys
import threading
import time
import uuid
from collections import deque

import numpy as np
import scipy.sparse as sp

try:
    import dask
    import dask.array as da
    import dask.bag as db
    from dask.callbacks import Callback
    from dask.delayed import Delayed
except ImportError as exc:  # pragma: no cover - exercised only without Dask
    raise ImportError("onlinepgs.dask needs Dask: pip install 'onlinepgs[dask]' "
                      "(dask[array,bag] and distributed)") from exc

from sklearn.base import clone
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_array

from onlinepgs._core._pgs import PGSState
from onlinepgs._rounds import LaneSlot, merge_round, run_lane
from onlinepgs.estimators import PGSDivergedError, _BasePGS, _training
from onlinepgs.svmlight import (_DECOMPRESSION_ERRORS, _MAGIC, SvmlightError, _Steps,
                                _corrupt_error, _decompressing, iter_svmlight,
                                load_svmlight)

__all__ = ["fit", "partial_fit", "auto_slice_rows"]

_PEEK_ROWS = 10_000  # rows that decide zero_based="auto" (iter_svmlight's first chunk)
_READ_SIZE = 1 << 20


# ---- public API ---------------------------------------------------------------------------
def fit(estimator, X, y=None, *, sample_weight=None, classes=None, passes=1, client=None,
        n_lanes=None, slice_rows="auto", shuffle=False, random_state=None, n_features=None,
        zero_based="auto", blocksize=None, block_rows=None, callback=None, locality=False):
    """Train `estimator` from scratch on a Dask collection (distributed PGS in rounds).

    Parameters
    ----------
    estimator : PGSClassifier or PGSRegressor
        Its parameters (loss, p, sigma, radius, batch_size, iterate, ...) define the
        solver; it is trained in place and returned, with the same attributes as after
        `fit` (``coef_``, ``classes_``, ``t_``, ``online_stats_``, ...). ``max_epochs``,
        ``tol`` and ``shuffle`` of the estimator are not used (see ``passes``,
        ``shuffle`` here).
    X : dask.array.Array, dask.bag.Bag or list of paths
        A 2-d dask array of rows (NumPy or scipy.sparse blocks; column chunks are
        merged); a bag of svmlight text lines (str or bytes); or a list of svmlight
        files (a str or os.PathLike alone is one file). Plain files are split into
        byte ranges (``blocksize``), compressed ones (gzip, bz2, xz) are one partition.
        A partition with no rows (an empty or comment-only file, a byte range where no
        line starts, a bag partition a filter emptied) adds none; blocks in any
        scipy.sparse format are read as CSR.
    y : dask.array.Array or array-like, optional
        Labels or targets of the rows of a dask array (same length; rechunked to X's
        rows). Not allowed with text input, whose lines carry their labels.
    sample_weight : dask.array.Array or array-like, optional
        Per-row loss weights, with a dask array X only.
    classes : array-like, optional
        Every label of a classifier. Without it, a first pass finds them: cheap for a
        dask array (``da.unique``), a full parse of the text for bags and files.
    passes : int, default=1
        Passes over the data; every lane reads its partitions once per pass.
    client : distributed.Client, optional
        Train on this cluster (files must be readable by this process, which cuts
        them into partitions, and by the workers, which read them). Default: Dask's
        local threaded scheduler (the core releases the GIL, so threads use every
        core with no server to start).
    n_lanes : int, optional
        Lanes: slices trained at the same time in a round. Default: the worker threads
        (``client``'s total, else Dask's ``num_workers`` or the CPU count), at most the
        number of partitions. The model depends on it (not on the scheduler): pass it
        to get the same model on different machines.
    slice_rows : int or "auto", default="auto"
        Rows each lane trains per round (rounded up to whole mini-batches). Smaller
        slices keep the lanes closer to sequential PGS (a step misses at most
        ``(n_lanes - 1) * slice_rows / batch_size`` steps of the others); larger ones
        spend less on the rounds themselves: each costs every lane work in proportion to
        the coordinates its slice touches (syncing its state, finding its changes) and
        the driver the same to merge them (on a cluster every lane's worker merges, after
        fetching the other lanes' changes), plus a scheduler round trip. "auto": where
        the stream's length is known (a dask array), a pass's first round gives each
        lane ``n_rows / (8 n_lanes)`` rows (at least 65,536; `auto_slice_rows`) and
        every later round as many as the lane trained in the pass before it: 4 rounds a
        pass, the first two as short as 8 rounds' (the method, above). No slice holds
        over 256 MiB of rows as the core takes them, measured on the first block read
        (more rounds where that binds; a lane holds about two slices' blocks, the one it
        trains and the one read ahead). Where reading copies no rows (in order,
        ``batch_size=1``, float64 CSR or dense blocks, no hashing): on threads, an array
        whose graph holds its blocks in memory (from arrays in memory, or persisted)
        counts only its labels and weights, 16 bytes a row; on a cluster, a persisted
        array trained where it lies (``locality=True``) has no bound. Else (bags,
        files) 65,536.
        Measured (2 lanes, a text-like stream over 262,144 features): the rounds add
        160-220% to the CPU time of single-process training with 4096-row slices,
        65-80% with 16384, 40% with 65536; test accuracy on IMDB and on that stream
        (2 M rows) did not move between 1024 and 65536 (within 0.003 of
        single-process), and 8 rounds a pass lost at most 0.0009 from 3 M rows on (2 M
        rows: up to 0.0025 at 8 rounds, 0.0027 at 16; 0.0030 at the default's growing
        rounds). Wall time on 2 cores against single-process training: README,
        "Benchmarks". On a cluster, use slices of 10^5 rows or more.
    shuffle : bool, default=False
        Permute the partitions before each pass (which also changes the lanes they go
        to) and the rows within each slice. False keeps the stream's order.
    random_state : int, RandomState or None, default=None
        Seeds the shuffles and the random iterate; default: the estimator's.
    n_features : int, optional
        Text input: the number of columns (an index beyond it is an error); default:
        1 + the largest index seen (the model grows).
    zero_based : bool or "auto", default="auto"
        Text input: whether indices start at 0. "auto": decided per file (for a bag,
        once: from its first partition that has rows) from its first 10,000 rows, as
        `iter_svmlight` decides from its first chunk.
    blocksize : int, optional
        Plain files: bytes per partition. Default: each plain file in ``n_lanes``
        byte ranges, so that every lane reads a part of every file.
    block_rows : int, optional
        Files: lines read and parsed at a time (memory per lane: about two blocks).
        Default: ``max(slice_rows, 8192)``. It does not change the model.
    callback : callable, optional
        Called after every round with a dict: ``pass``, ``round``, ``rows`` (this
        round), ``n_examples`` (so far), ``seconds`` (since the start) and ``state`` (the
        global `PGSState` after that round, for `stats_dict`; do not modify it). On a
        cluster, where the state is on the workers, a round is reported once the next
        one is submitted, and ``state`` is fetched when the callback reads it, during the
        callback only: a callback that does not read it costs the rounds nothing, one
        that does a copy of the state over the network.
    locality : bool, default=False
        With a ``client`` and a dask array X persisted on the cluster
        (``client.persist(X)``, whose blocks the fit waits for: persist returns before
        they are made): one lane per worker holding partitions of X, each
        training the partitions held by its worker, so no block moves between workers
        (lanes are workers in address order; ``n_lanes``, if given, must be their
        number), except partitions moved from the longest lane to the shortest while
        that shortens the longest, where the cluster put the partitions unevenly (a
        pass lasts as long as its longest lane; those cross to their lane's worker once
        a pass). The model then depends on where the cluster put the partitions;
        without it lanes take partitions round-robin,
        threads and a cluster give the same model bit for bit, and about half of the
        blocks cross to their lane's worker once a pass (read ahead, while the lanes
        train). Measured (LocalCluster of 2 workers keeping freed memory, 2 M rows,
        docs/benchmarks.md): 0.59-1.04 s a fit with locality, 0.57-0.97 s without
        (over loopback; a network makes the moved blocks dearer).

    Returns
    -------
    estimator
        The same object, fitted: `save_model` writes it like any other.

    Raises
    ------
    TypeError, ValueError
        Wrong input types, mismatched lengths, labels outside ``classes``, bad rows
        (naming the partition and row, or the file, line and column; `SvmlightError`
        for text, also for a truncated or corrupt compressed file), no rows at all.
    PGSDivergedError
        As in `partial_fit`; the estimator is then left as it was.

    Examples
    --------
    >>> import numpy as np, dask.bag as db
    >>> from onlinepgs import PGSClassifier
    >>> import onlinepgs.dask as opd
    >>> lines = ["+1 1:1 3:1", "-1 2:1 3:1"] * 500
    >>> bag = db.from_sequence(lines, npartitions=4)
    >>> clf = opd.fit(PGSClassifier(sigma=1e-2), bag, n_lanes=2, slice_rows=100)
    >>> clf.classes_.tolist(), clf.n_features_in_
    ([-1.0, 1.0], 3)
    """
    return _train(estimator, X, y, sample_weight, classes, passes, client, n_lanes,
                  slice_rows, shuffle, random_state, n_features, zero_based, blocksize,
                  block_rows, callback, fresh=True, locality=locality)


def partial_fit(estimator, X, y=None, *, sample_weight=None, classes=None, passes=1,
                client=None, n_lanes=None, slice_rows="auto", shuffle=False,
                random_state=None, n_features=None, zero_based="auto", blocksize=None,
                block_rows=None, callback=None, locality=False):
    """Like `fit`, but continue the estimator's current state (if it has one).

    The parameters are those of `fit`. A fitted estimator keeps its solver state,
    classes and width (dense input must keep it); the run starts from its lambda, t,
    averages and statistics, as `PGSClassifier.partial_fit` would.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from onlinepgs import PGSRegressor
    >>> import onlinepgs.dask as opd
    >>> X = da.from_array(np.eye(4).repeat(50, axis=0), chunks=(50, 4))
    >>> y = np.repeat([1.0, 2.0, 3.0, 4.0], 50)
    >>> reg = PGSRegressor(sigma=1e-3, fit_intercept=False)
    >>> reg = opd.partial_fit(reg, X, y, n_lanes=2, slice_rows=25)
    >>> reg = opd.partial_fit(reg, X, y, n_lanes=2, slice_rows=25)
    >>> reg.t_, reg.online_stats_["n_examples"]
    (400, 400)
    """
    return _train(estimator, X, y, sample_weight, classes, passes, client, n_lanes,
                  slice_rows, shuffle, random_state, n_features, zero_based, blocksize,
                  block_rows, callback, fresh=False, locality=locality)


# ---- the run ----------------------------------------------------------------------------
# slice_rows="auto" (see fit): rounds a pass, the fewest rows a lane trains per round,
# and the most bytes of rows a slice may hold (a lane holds about two: the one it trains
# and the one read ahead)
_ROUNDS_PER_PASS = 8
_SLICE_ROWS = 65536
_SLICE_BYTES_MAX = 256 * 2**20


def auto_slice_rows(n_rows, n_lanes, row_bytes=None):
    """The rows a lane trains in a pass's first round with ``slice_rows="auto"``; later
    rounds train as many as the lane trained in the pass before them (see `fit`).

    Parameters
    ----------
    n_rows : int or None
        Rows in a pass over the stream; None where unknown (bags, files).
    n_lanes : int
        Lanes of each round.
    row_bytes : float, optional
        Bytes of a row as the core takes it (its entries, indices, label, weight); `fit`
        measures it on the first block it reads.

    Returns
    -------
    int
        ``n_rows / (rounds n_lanes)`` rounded up, with 8 rounds a pass, or more where 8
        slices would hold over 256 MiB of rows each (the rounds then as few as keep
        them within it, all of a size); at least 65536 rows, unless 65536 of them hold
        over 256 MiB (then as many as it holds, at least one); 65536 for an unknown
        length. Long slices move the model away from sequential PGS; many small ones
        cost more than they train (see `fit`). The 256 MiB apply to what a lane holds
        of the slice's rows, which `fit` passes as `row_bytes` (see `fit`); the slices
        of the later rounds keep within them too.

    Examples
    --------
    >>> from onlinepgs.dask import auto_slice_rows
    >>> auto_slice_rows(2_000_000, 2), auto_slice_rows(None, 2)
    (125000, 65536)
    >>> auto_slice_rows(10_000_000, 2), auto_slice_rows(10_000_000, 2, row_bytes=500)
    (625000, 500000)
    """
    if n_rows is None:
        return _SLICE_ROWS
    n_rows, n_lanes = int(n_rows), int(n_lanes)
    rounds, most = _ROUNDS_PER_PASS, None
    if row_bytes is not None and row_bytes > 0:
        rounds = max(rounds, math.ceil(n_rows * row_bytes / (n_lanes * _SLICE_BYTES_MAX)))
        most = _rows_within_bytes(row_bytes)
    rows = max(-(-n_rows // (rounds * n_lanes)), _SLICE_ROWS)
    return int(rows if most is None else min(rows, most))


def _rows_within_bytes(row_bytes):
    """The most rows of `row_bytes` bytes a slice may hold (at least one)."""
    return max(1, int(_SLICE_BYTES_MAX // row_bytes))


def _whole_batches(rows, batch_size):
    return -(-int(rows) // batch_size) * batch_size


def _check_int(name, value, low):
    if (not isinstance(value, (int, np.integer)) or isinstance(value, bool)
            or value < low):
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    return int(value)


def _train(est, X, y, sample_weight, classes, passes, client, n_lanes, slice_rows,
           shuffle, random_state, n_features, zero_based, blocksize, block_rows, callback,
           fresh, locality=False):
    if not isinstance(est, _BasePGS):
        raise TypeError("onlinepgs.dask trains a PGSClassifier or PGSRegressor, got "
                        f"{type(est).__name__}")
    passes = _check_int("passes", passes, 1)
    if not (isinstance(slice_rows, str) and slice_rows == "auto"):
        try:
            slice_rows = _check_int("slice_rows", slice_rows, 1)
        except ValueError:
            raise ValueError(f'slice_rows must be "auto" or an int >= 1, got '
                             f'{slice_rows!r}') from None
    if n_lanes is not None:
        n_lanes = _check_int("n_lanes", n_lanes, 1)
    if n_features is not None:
        n_features = _check_int("n_features", n_features, 0)
    if blocksize is not None:
        blocksize = _check_int("blocksize", blocksize, 1)
    if not (zero_based is True or zero_based is False or zero_based == "auto"):
        raise ValueError(f'zero_based must be True, False or "auto", got {zero_based!r}')
    if locality is not True and locality is not False:
        raise ValueError(f"locality must be True or False, got {locality!r}")
    if locality and client is None:
        raise ValueError("locality=True places lanes on the workers of a cluster: pass "
                         "client= (Dask's threads share one memory)")
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable, got {callback!r}")
    if block_rows is None:
        # text sources, the only ones that use it, do not know their length: "auto"
        # slices are then the fallback
        block_rows = max(auto_slice_rows(None, 1) if slice_rows == "auto" else slice_rows,
                         8192)
    else:
        block_rows = _check_int("block_rows", block_rows, 1)
    backend = _DistributedBackend(client) if client is not None else _LocalBackend()
    try:
        with _training(est):  # after any other training call on est, undone on error
            return _train_unguarded(est, X, y, sample_weight, classes, passes, backend,
                                    n_lanes, slice_rows, shuffle, random_state,
                                    n_features, zero_based, blocksize, block_rows,
                                    callback, fresh, locality)
    finally:
        backend.close()


def _train_unguarded(est, X, y, sample_weight, classes, passes, backend, n_lanes,
                     slice_rows, shuffle, random_state, n_features, zero_based, blocksize,
                     block_rows, callback, fresh, locality=False):
    first = fresh or not hasattr(est, "_state")
    if first:
        est._validate_params()
        est._check_finite_params()
    else:
        est._check_state_params()
    lanes_wanted = n_lanes if n_lanes is not None else backend.n_threads()
    source = _make_source(X, y, sample_weight, est, n_features, zero_based, blocksize,
                          block_rows, lanes_wanted, backend, fitted=not first)
    try:
        groups = workers = None
        if locality:
            workers, groups = _groups_by_worker(source, backend)
            if n_lanes is not None and n_lanes != len(groups):
                raise ValueError(f"locality=True makes one lane per worker holding X "
                                 f"({len(groups)}), but n_lanes={n_lanes}")
            lanes_wanted = len(groups)
        return _run(est, source, classes, passes, backend, lanes_wanted, slice_rows,
                    shuffle, random_state, callback, first, groups, workers)
    finally:
        source.close()  # cached file readers, on every worker


def _groups_by_worker(source, backend):
    """The workers holding partitions of a persisted dask array (in address order) and
    the partitions of each (one held by several goes to the first)."""
    if not isinstance(source, _ArraySource):
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
    return workers, _balanced(groups, np.diff(source.offsets), holders, workers)


def _balanced(groups, rows, holders, workers):
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


def _run(est, source, classes, passes, backend, lanes_wanted, slice_rows, shuffle,
         random_state, callback, first, groups=None, workers=None):
    if source.n_partitions == 0:
        raise ValueError("the data has no partitions: there is nothing to fit")
    if source.n_rows == 0:
        raise _no_rows(source)
    n_lanes = min(lanes_wanted, source.n_partitions)
    k = int(est.batch_size)
    # "auto" on a known length: the rounds of a pass grow (_Driver._grown), and the
    # driver bounds the slices' bytes once it has read a block, unless the lanes train
    # the rows where they lie: a persisted array's blocks on the lanes' own workers
    # (locality), read by the round itself (nothing read ahead or moved) as the core
    # takes them (no converted copy), in order and in steps of one row (no copy of a
    # slice); on threads, where an array's blocks are in memory already (values of its
    # graph) and trained in place, a slice holds only what reading adds (labels,
    # weights), and those are the bytes bounded
    growing = slice_rows == "auto" and source.n_rows is not None
    plain = est.n_bits is None and not shuffle and k == 1
    in_place = plain and source.read_in_place and groups is not None
    held = plain and growing and source.rows_held  # asks only where it matters
    sizing = (source.n_rows, k, held) if growing and not in_place else None
    if slice_rows == "auto":
        slice_rows = auto_slice_rows(source.n_rows, n_lanes)
    slice_rows = _whole_batches(slice_rows, k)

    # classes, the encoding of the targets, and the state to start from
    spec = clone(est)
    if est._classifier:
        if not first:
            known = est.classes_
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
            raise ValueError(f"{type(est).__name__} needs at least 2 classes, got "
                             f"{classes.tolist()}")
        spec.classes_ = classes
        n_problems = 1 if classes.shape[0] == 2 else classes.shape[0]
        multiclass = classes.shape[0] > 2
    elif classes is not None:
        raise ValueError("classes is for classifiers; this is a regressor")
    else:
        n_problems, multiclass = 1, False
    source.spec = spec

    seed = est.random_state if random_state is None else random_state
    rng = check_random_state(seed)
    width = source.width
    est._check_width(sp.csr_matrix((0, width)), n_problems,  # a declared width
                     have=0 if first else est.n_features_in_)
    if first:
        state = est._new_state(width, n_problems, multiclass, rng)
        n_features_in = width
    else:
        state = est._state.copy()  # the estimator keeps its own
        n_features_in = max(est.n_features_in_, width)
        state.ensure_dim(n_features_in)
    driver = _Driver(state, source, backend, n_lanes, slice_rows, rng, shuffle, callback,
                     classifier=est._classifier, groups=groups, groups_workers=workers,
                     sizing=sizing, grow=growing)
    try:
        for pass_index in range(passes):
            driver.run_pass(pass_index)
            if driver.rounds == 0:  # text partitions, all empty (every round has rows)
                raise _no_rows(source)
    finally:
        driver.close()
    n_features_in = max(n_features_in, driver.width_seen)
    fitted = {"n_features_in_": n_features_in}
    if first and est._classifier:
        fitted["classes_"] = classes
    epochs = passes if first else getattr(est, "n_iter_", 0) + passes
    est._install(driver.state, epochs, **fitted)  # at once for threads predicting meanwhile
    return est


def _no_rows(source):
    # as partial_fit refuses 0 rows: a model fitted on nothing would look trained
    n = source.n_partitions
    return ValueError(f"no training rows were read: X's {n} partition"
                      f"{'s are' if n > 1 else ' is'} empty; there is nothing to fit")


class _Lane:
    """The driver's view of one lane: its partitions and the blocks requested so far.

    ``blocks`` holds entries ``[handle, n_rows, has_next, part]`` (n_rows and has_next
    None until the block is read); ``pos`` counts the rows of those blocks already
    trained on; ``open`` is the newest entry, from which the next block of its
    partition is requested (kept until then even when its rows are used up).
    """

    def __init__(self, parts):
        self.parts = deque(parts)
        self.blocks = deque()
        self.pos = 0
        self.open = None
        self.worker = None  # on a cluster, where the lane trains

    def waiting(self):
        return any(e[1] is None for e in self.blocks)

    def known_rows(self):
        total = 0
        for entry in self.blocks:
            if entry[1] is None:
                break
            total += entry[1]
        return total - self.pos

    def can_request(self):
        """Whether another block exists that was not requested (its predecessor read)."""
        if self.open is not None and self.open[2]:
            return True
        return bool(self.parts) and (self.open is None or self.open[2] is not None)


class _Driver:
    """Runs the rounds: reads ahead, plans slices, trains the lanes, merges."""

    def __init__(self, state, source, backend, n_lanes, slice_rows, rng, shuffle, callback,
                 classifier, groups=None, groups_workers=None, sizing=None, grow=False):
        self.state = state
        # slice_rows="auto" on a stream of known length: (rows a pass, batch_size) until
        # the first block read bounds the slices' bytes (_size_slices)
        self.sizing = sizing
        # ... and the rounds of a pass grow from the first's slice (_grown), up to the
        # most rows within the bytes' bound (None: no bound)
        self.grow = grow
        self.first_slice = self.most_rows = None
        self.source = source
        self.backend = backend
        self.n_lanes = n_lanes
        self.slice_rows = slice_rows
        self.rng = rng
        self.shuffle = shuffle
        self.callback = callback
        self.classifier = classifier
        self.rounds = 0
        self.width_seen = 0
        self.start = time.perf_counter()
        # threads: each lane keeps its state between rounds (see LaneSlot)
        self.slots = ([LaneSlot() for _ in range(n_lanes)] if backend.shares_memory
                      else None)
        self.changed = None  # coordinates the last merge changed
        self.rows_read = self.blocks_read = 0  # the mean block size, for reading ahead
        self.groups = groups  # locality: each lane's partitions, by worker
        # a cluster keeps the global state on the workers (see _replica_round): the
        # driver holds futures of the last round's lane results and of the state
        self.token = uuid.uuid4().hex
        self.lane_workers = (None if backend.shares_memory
                             else backend.lane_workers(n_lanes, groups_workers))
        self.pass_index = 0
        self.last = None  # the last round's (lane, future) pairs; None before a pass's first
        self.waits = {}  # lane -> a snapshot its next round must not overtake
        self.state_ref = None
        self.in_flight = deque()
        self.reports = deque()  # rounds whose callback is still to be called
        self.reporting = None  # the round whose callback runs
        self.lanes = []  # the pass's
        self.n_examples = int(state.n_examples)

    def _request(self, lane):
        """Ask for the lane's next block: the next of its open partition, or a new one."""
        with self.backend.near(lane.worker):
            self._request_block(lane)

    def _request_block(self, lane):
        previous = lane.open
        if previous is not None and previous[2]:
            entry = [self.source.next_block(self.backend, previous[0]), None, None,
                     previous[3]]
        else:
            part = lane.parts.popleft()
            entry = [self.source.first_block(self.backend, part), None, None, part]
            known = self.source.known_meta(part)
            if known is not None:  # no need to wait for the block to learn its size
                self._note_meta(entry, known)
        if previous is not None and previous[2] and not any(e is previous for e in lane.blocks):
            self.backend.release(previous[0])  # used up, kept only to chain from
        lane.blocks.append(entry)
        lane.open = entry

    def _size_slices(self, lanes):
        """slice_rows="auto": bound the slices' bytes by those of the first block read
        (rows a pass tell the rows a slice, not what they weigh: dense rows of 10,000
        features weigh about 180 times those of the text-like stream in docs/benchmarks.md)."""
        n_rows, batch_size, held = self.sizing
        self.sizing = None
        lane = next((lane for lane in lanes if lane.can_request()), None)
        if lane is None:
            return
        self._request(lane)
        rows, _, _, nbytes, own = self.backend.metas([lane.open[0]])[0]
        if rows:
            row_bytes = (own if held else nbytes) / rows
            rows = auto_slice_rows(n_rows, self.n_lanes, row_bytes=row_bytes)
            self.slice_rows = min(self.slice_rows, _whole_batches(rows, batch_size))
            self.most_rows = _whole_batches(_rows_within_bytes(row_bytes), batch_size)

    def _grown(self, done):
        """slice_rows="auto": a round's slice once the pass's rounds have trained `done`
        rows: the first round's, or as many as a lane trained before it if that is more
        (so the pass's rows at most double each round), within the bytes' bound."""
        if self.first_slice is None:
            self.first_slice = self.slice_rows
        rows = max(self.first_slice,
                   _whole_batches(done // self.n_lanes, int(self.state.batch_size)))
        return rows if self.most_rows is None else min(rows, self.most_rows)

    def _learn_meta(self, lanes):
        """Fill in the rows and continuation of requested blocks (waits for them)."""
        pending = [e for lane in lanes for e in lane.blocks if e[1] is None]
        if not pending:
            return
        for entry, meta in zip(pending, self.backend.metas([e[0] for e in pending])):
            self._note_meta(entry, meta)

    def _note_meta(self, entry, meta):
        n_rows, has_next, width = meta[:3]
        entry[1], entry[2] = n_rows, has_next
        self.width_seen = max(self.width_seen, width)
        self.rows_read += n_rows
        self.blocks_read += 1

    def _fill(self, lanes):
        """Make sure every lane knows a slice's worth of rows, or all it has left."""
        while True:
            wanting = []
            for lane in lanes:
                if lane.known_rows() >= self.slice_rows and not lane.waiting():
                    continue
                if lane.waiting():
                    wanting.append(lane)  # its rows are on their way
                elif lane.can_request():
                    self._request(lane)
                    wanting.append(lane)
            if not wanting:
                return
            self._learn_meta(wanting)

    def _read_ahead(self, lanes):
        """Request each lane's next blocks early, so that reading overlaps training: a
        slice's worth where partitions are single blocks (arrays, bags; rows counted at
        the mean block size seen), else the next block of each lane."""
        guess = self.rows_read / self.blocks_read if self.blocks_read else self.slice_rows
        for lane in lanes:
            if self.source.one_block_per_partition:
                while lane.parts and (
                        lane.known_rows() + guess * sum(e[1] is None for e in lane.blocks)
                        < self.slice_rows):
                    self._request(lane)
            elif (lane.known_rows() < self.slice_rows and not lane.waiting()
                    and lane.can_request()):
                self._request(lane)

    def _take(self, lane):
        """The lane's next slice: pieces (entry, first row, end row) of its blocks."""
        need = self.slice_rows
        pieces = []
        offset = lane.pos
        for entry in lane.blocks:
            n_rows = entry[1]
            if n_rows is None or need == 0:
                break
            if offset >= n_rows:
                offset -= n_rows
                continue
            take = min(n_rows - offset, need)
            pieces.append((entry, offset, offset + take))
            need -= take
            offset = 0
        lane.pos += self.slice_rows - need
        return pieces

    def _drop_used(self, lane):
        while lane.blocks and lane.blocks[0][1] is not None and (
                lane.pos >= lane.blocks[0][1]):
            entry = lane.blocks.popleft()
            lane.pos -= entry[1]
            if entry is not lane.open or not entry[2]:
                self.backend.release(entry[0])

    def run_pass(self, pass_index):
        n_parts = self.source.n_partitions
        if self.groups is not None:
            lanes = [_Lane((self.rng.permutation(g) if self.shuffle else np.asarray(g)).tolist())
                     for g in self.groups]
        else:
            order = self.rng.permutation(n_parts) if self.shuffle else np.arange(n_parts)
            lanes = [_Lane(order[p::self.n_lanes].tolist()) for p in range(self.n_lanes)]
        for lane, worker in zip(lanes, self.lane_workers or ()):
            lane.worker = worker
        self.lanes = lanes
        self.pass_index, self.last, self.waits = pass_index, None, {}
        if self.sizing is not None:
            self._size_slices(lanes)
        done = 0  # rows the pass's rounds trained
        while True:
            if self.grow:
                self.slice_rows = self._grown(done)
            self._fill(lanes)
            jobs = []
            for index, lane in enumerate(lanes):
                pieces = self._take(lane)
                if not pieces:
                    continue
                seed = int(self.rng.randint(0, 2**31 - 1)) if self.shuffle else None
                plan = _SlicePlan([(a, b) for _, a, b in pieces], seed, self.classifier)
                if self.slots is not None:
                    plan.slot, plan.changed = self.slots[index], self.changed
                    plan.round_no = self.rounds
                jobs.append((plan, [e[0] for e, _, _ in pieces], index))
            if not jobs:
                break
            for plan, _, _ in jobs:
                plan.n_lanes = len(jobs)
            rows = sum(b - a for plan, _, _ in jobs for a, b in plan.ranges)
            done += rows
            handles = self._submit_round(jobs)
            for lane in lanes:
                self._drop_used(lane)
            self._read_ahead(lanes)
            if handles is not None:  # threads: a task of the round merges
                merged = self.backend.submit(_merge_task, self.state, self.rounds + 1,
                                             *handles)
                self.changed = self.backend.results([merged])[0]
            self.rounds += 1
            self.n_examples += rows  # every row is an example (a cluster's count)
            if self.callback is not None:
                ref = (None if self.backend.shares_memory else
                       _RoundRef(self.last, self.rounds, self.n_examples))
                self.reports.append(({"pass": pass_index, "round": self.rounds,
                                      "rows": rows}, ref))
                # on a cluster a round is reported once the next is on its way, so that
                # fetching its state never keeps the workers waiting for a round
                self._report(0 if self.backend.shares_memory else 1)
        if self.last is not None and not self.backend.shares_memory:
            final = self._snapshot(self.last, self.rounds)
            if self.reports:  # the last round's: its state is this one
                self.reports[-1][1].future = final
            self._report(0)
            self.state_ref = final  # the next pass's copies start from it
            self.state = self.backend.result(final, self.lane_workers)
            self.in_flight.clear()
        self._report(0)
        for lane in lanes:
            for entry in lane.blocks:
                self.backend.release(entry[0])
            if lane.open is not None and not any(e is lane.open for e in lane.blocks):
                self.backend.release(lane.open[0])

    def close(self):
        """Release the blocks and rounds still held, and free the workers' copies of the
        state (a cluster). After a failure the exception's frames hold the driver: its
        futures would stay on the client with the failed task's exception (see
        `_DistributedBackend._gathered`)."""
        held = [self.state_ref] if self.state_ref is not None else []
        held += [f for round_ in self.in_flight for f in round_]
        held += [f for _, f in self.last or ()]
        held += [f for waits in self.waits.values() for f in waits]
        refs = [ref for _, ref in self.reports if ref is not None] + [self.reporting]
        for ref in refs:
            if ref is not None:
                held += [f for _, f in ref.last] + [ref.future]
        for lane in self.lanes:
            held += [entry[0] for entry in lane.blocks]
            held += [lane.open[0]] if lane.open is not None else []
        for handle in held:
            if handle is not None:
                self.backend.release(handle)
        self.in_flight.clear()
        self.reports.clear()
        self.last, self.waits, self.state_ref, self.lanes = None, {}, None, []
        if not self.backend.shares_memory:
            self.backend.run_everywhere(_drop_replicas, self.token)

    def _report(self, keep):
        while len(self.reports) > keep:
            info, ref = self.reports.popleft()
            report = _RoundReport(info, seconds=time.perf_counter() - self.start)
            if ref is None:
                report.update(n_examples=int(self.state.n_examples), state=self.state)
            else:
                report["n_examples"] = ref.n_examples
                report._fetch = functools.partial(self._fetch_state, ref)
            self.reporting = ref  # its futures, should the callback fail (close)
            try:
                self.callback(report)
            finally:
                report._fetch = None
            self.reporting = None

    def _fetch_state(self, ref):
        if ref.future is None:
            ref.future = self._snapshot(ref.last, ref.rounds)
        return self.backend.result(ref.future, self.lane_workers)

    def _submit_round(self, jobs):
        """Submit a round's lanes. Threads read the driver's state (each lane forks it)
        and their handles come back for the driver to merge. On a cluster the round is
        tasks only (None comes back): every lane's worker keeps a copy of the global
        state, and a lane's task first adds the last round's results of every lane into
        it (the driver's merge, done alike on each copy, so the copies stay equal bit for
        bit) and then trains from it (`_replica_round`). Between rounds each worker
        fetches the others' results, which are sparse, and no state moves: one hop of
        the scheduler a round, where a merge on one worker followed by the state sent
        back to the lanes took three, each lane waiting through the merge. The copies
        start at a pass's first round from the state's future. The driver plans the next
        round without waiting; at most two rounds are in flight, so that blocks are not
        read far ahead."""
        if self.backend.shares_memory:
            return [self.backend.submit(_train_slice, self.state, plan, *blocks)
                    for plan, blocks, _ in jobs]
        if self.last is None:  # the pass's first round: the copies start from the state
            if self.state_ref is None:
                self.state_ref = self.backend.scatter(self.state, self.lane_workers)
            start, results = self.state_ref, []
        else:
            start, results = None, [f for _, f in self.last]
        key = (self.token, self.pass_index)
        self.last = []
        for plan, blocks, lane in jobs:
            waits = self.waits.pop(lane, [])
            inputs, plan.unread = [], []
            for block, (_, end) in zip(blocks, plan.ranges):
                if isinstance(block, _Unread):
                    inputs.extend(block.inputs)
                    plan.unread.append((block.recipe, end == block.n_rows))
                    plan.spec = block.spec
                else:
                    inputs.append(block)
                    plan.unread.append(None)
            future = self.backend.submit(
                _replica_round, key, lane, self.rounds, start, plan, len(results),
                len(waits), *results, *waits, *inputs, priority=_ROUND_PRIORITY,
                worker=self.lane_workers[lane])
            self.last.append((lane, future))
        self.in_flight.append([f for _, f in self.last])
        while len(self.in_flight) > 2:  # raises the round's error
            self.backend.settle(self.in_flight[0], self.lane_workers)
            self.in_flight.popleft()
        return None

    def _snapshot(self, last, rounds):
        """A future of the global state after `rounds` rounds, whose last round's lanes
        and results are `last`: from the copy of its first lane, which must not move on
        (merge a later round) before it is taken. Called before that lane's round after
        next is submitted."""
        lane = last[0][0]
        future = self.backend.submit(
            _replica_state, (self.token, self.pass_index), lane, rounds,
            *[f for _, f in last], priority=_ROUND_PRIORITY,
            worker=self.lane_workers[lane])
        self.waits[lane] = [future]
        return future


class _RoundRef:
    """A cluster's round, as its callback needs it."""

    __slots__ = ("last", "rounds", "n_examples", "future")

    def __init__(self, last, rounds, n_examples):
        self.last, self.rounds, self.n_examples, self.future = last, rounds, n_examples, None


class _RoundReport(dict):
    """The dict a callback gets. On a cluster its "state" is fetched from a worker when
    the callback first reads it (a copy of the whole state over the network), so that a
    callback that does not read it costs the rounds nothing."""

    _fetch = None

    def __missing__(self, key):
        if key != "state":
            raise KeyError(key)
        if self._fetch is None:
            raise KeyError("state: on a cluster a round's state can be read during its "
                           "callback only")
        self["state"] = state = self._fetch()
        return state

    def __contains__(self, key):
        return dict.__contains__(self, key) or (key == "state" and self._fetch is not None)

    def get(self, key, default=None):
        return self[key] if key in self else default


_ROUND_PRIORITY = 1  # a cluster's round tasks, over blocks (Dask's default 0)
_WORKER_CHECK_SECONDS = 5.0  # waiting for a round, how often to check its workers are up


def _merge_task(state, round_no, *results):
    """Merge round `round_no`'s lane results into `state` (merge_round) once none
    diverged. On threads a task of the round's graph, so that while one thread merges
    the other reads the blocks read ahead that the faster lane's wait did not hold; on a
    cluster each lane's replica calls it."""
    _check_diverged(results, round_no)
    return merge_round(state, list(results))


def _check_diverged(results, round_no):
    for result in results:
        if result.diverged_row is not None:
            raise PGSDivergedError(
                f"PGS diverged in round {round_no} at {result.diverged_at}: the loss's "
                "derivative overflowed. Its gradient is unbounded, so on R^n "
                "(radius=None) a small sigma lets the first steps of size 1/(t sigma) "
                "blow up; use radius='auto' (or a finite radius) or a larger sigma. The "
                "model is left as it was.")


class _SlicePlan:
    """Rows of one lane's slice: (first, end) in each of the blocks given with it."""

    def __init__(self, ranges, seed, classifier):
        self.ranges = ranges
        self.seed = seed
        self.classifier = classifier
        self.n_lanes = 1  # lanes in the round (each lane counts its steps that often)
        self.slot = self.changed = self.round_no = None  # threads: the lane's kept state
        self.blocks = None  # set on the worker, for messages
        self.unread = self.spec = None  # a cluster's blocks read by the round itself

    def where(self, row):
        """A row of the slice as "partition P, row R" (or a file position)."""
        if self.blocks is None:
            return f"row {row} of its slice"
        for block, (a, b) in zip(self.blocks, self.ranges):
            if row < b - a:
                return block.describe(a + row)
            row -= b - a
        return f"row {row} past its slice"


# ---- a cluster's copies of the global state --------------------------------------------
_REPLICAS = {}  # (fit token, pass, lane) -> _Replica, in each worker's process
_REPLICAS_LOCK = threading.Lock()


class _Replica:
    """A lane's copy of the global state on its worker, the rounds merged into it, and
    the lane's own state kept between rounds (as on threads)."""

    def __init__(self, state, rounds, lane):
        self.state, self.rounds, self.changed = state, rounds, None
        self.slot = LaneSlot()
        self.lock = threading.Lock()
        self.lane = lane

    def advance(self, rounds, results):
        """Merge the results of round `rounds` (counted from 1) unless that is done."""
        with self.lock:
            if self.rounds == rounds:
                return
            if self.rounds != rounds - 1:
                # Dask computes a round again when a worker took its result with it
                raise _lost_worker(self.lane, f"holds {self.rounds} rounds, but a task "
                                              f"asked for {rounds}")
            self.changed = _merge_task(self.state, rounds, *results)
            self.rounds = rounds


def _replica(key, lane, rounds, start):
    with _REPLICAS_LOCK:
        replica = _REPLICAS.get((*key, lane))
        if replica is None:
            if start is None:
                raise _lost_worker(lane, f"is not on its worker (round {rounds + 1})")
            for old in [k for k in _REPLICAS if k[0] == key[0] and k[1] < key[1]]:
                del _REPLICAS[old]  # an earlier pass's, done with
            # a copy: `start` is also Dask's, which keeps its values unchanged
            replica = _REPLICAS[(*key, lane)] = _Replica(start.copy(), rounds, lane)
        return replica


def _lost_worker(lane, what):
    return RuntimeError(
        f"lane {lane}'s copy of the training state {what}: a worker restarted or left "
        "during the fit, and the rounds it held cannot be rebuilt. The model is left as "
        "it was; fit again.")


def _replica_round(key, lane, rounds, start, plan, n_results, n_waits, *args):
    """Task: a lane's round on a cluster (on the lane's worker): merge the last round's
    results into its copy of the global state, then train its slice from it."""
    replica = _replica(key, lane, rounds, start)
    replica.advance(rounds, args[:n_results])
    blocks = _round_blocks(key, plan, args[n_results + n_waits:])
    plan.slot, plan.changed, plan.round_no = replica.slot, replica.changed, rounds
    return _train_slice(replica.state, plan, *blocks)


def _replica_state(key, lane, rounds, *results):
    """Task: the global state after `rounds` rounds, from a lane's copy."""
    replica = _replica(key, lane, rounds - 1, None)
    replica.advance(rounds, results)
    return replica.state.copy()


def _drop_replicas(token):
    with _REPLICAS_LOCK:
        for kept in (_REPLICAS, _OPEN_BLOCKS):
            for key in [k for k in kept if k[0] == token]:
                del kept[key]


def _train_slice(base, plan, *blocks):
    """Task: one lane's round (runs on a worker)."""
    plan.blocks = blocks
    k = base.batch_size
    lengths = [b - a for a, b in plan.ranges]
    if plan.seed is None and all(n % k == 0 for n in lengths[:-1]):
        # each piece in place, one after the other: no copy of the rows
        pieces = [(block.X, block.y, block.sw, np.arange(a, b, dtype=np.int64), block.rps)
                  for block, (a, b) in zip(blocks, plan.ranges)]
        starts = [a for a, _ in plan.ranges]
    else:
        # shuffled, or a mini-batch across two blocks: one array of the slice's rows
        Xs = [block.X[a:b] for block, (a, b) in zip(blocks, plan.ranges)]
        if sp.issparse(Xs[0]):
            width = max(x.shape[1] for x in Xs)
            X = sp.vstack([sp.csr_matrix((x.data, x.indices, x.indptr),
                                         shape=(x.shape[0], width)) for x in Xs],
                          format="csr")
            X.has_canonical_format = True  # stacking canonical rows keeps them so
        else:
            X = np.ascontiguousarray(np.vstack(Xs))
        parts = [(block, a, b) for block, (a, b) in zip(blocks, plan.ranges)]
        y = np.concatenate([block.y[a:b] for block, a, b in parts])
        sw = np.concatenate([block.sw[a:b] for block, a, b in parts])
        rps = (None if blocks[0].rps is None else
               np.concatenate([block.rps[a:b] for block, a, b in parts]))
        order = np.arange(X.shape[0], dtype=np.int64)
        if plan.seed is not None:
            order = np.random.RandomState(plan.seed).permutation(order)
        pieces = [(X, y, sw, order, rps)]
        starts = [0]
    result = run_lane(base, pieces, plan.classifier, plan.n_lanes, plan.slot,
                      plan.changed, plan.round_no)
    if result.diverged_row is not None:
        # a row of the arrays given to the core: back to the slice's numbering
        number, row = result.diverged_row
        before = sum(lengths[:number]) if len(pieces) > 1 else 0
        result.diverged_at = plan.where(before + row - starts[number])
    return result


# ---- blocks of rows -------------------------------------------------------------------
class _Block:
    """Rows of a partition, ready for the core: validated, encoded, canonical."""

    __slots__ = ("X", "y", "sw", "rps", "n_rows", "part", "row0", "next", "name", "line0",
                 "width", "shared_bytes")

    def __sizeof__(self):
        # Dask's scheduler places a lane's task by the bytes of its inputs: without the
        # rows' size it would move blocks of tens of MB between workers as if free
        return object.__sizeof__(self) + self.nbytes()

    def nbytes(self):
        """Bytes of the rows as the core takes them (entries, indices, targets, weights)."""
        return sum(a.nbytes for a in (*_row_arrays(self.X), self.y, self.sw, self.rps)
                   if a is not None)

    def own_bytes(self):
        """Bytes the read made: all but the rows it took as they were given (views)."""
        return self.nbytes() - self.shared_bytes

    def describe(self, row):
        where = f"partition {self.part}, row {self.row0 + row}"
        return where if self.name is None else f"{where} ({self.name})"


def _block_meta(block):
    return (block.n_rows, block.next is not None, block.width, block.nbytes(),
            block.own_bytes())


# Worker processes of dask.distributed run with MALLOC_TRIM_THRESHOLD_=65536, so glibc
# maps every large allocation afresh and each temporary the size of a block costs its page
# faults (validation took 2.5x its time in the driver's process): the checks below (and
# the estimator's encoding of two classes, `_binary_targets`) make none on the way that
# finds nothing wrong.
def _all_finite(a):
    """Whether every entry of a float array is finite: its sum is, unless an entry is not
    (or finite entries overflow, which the entry-wise check then tells apart)."""
    with np.errstate(over="ignore", invalid="ignore"):
        total = np.add.reduce(a, axis=None)
    return bool(np.isfinite(total)) or bool(np.isfinite(a).all())


def _row_arrays(X):
    """The arrays that hold rows X: a CSR matrix's three, or the dense array."""
    return (X.data, X.indices, X.indptr) if sp.issparse(X) else (X,)


def _shared_bytes(X, given):
    """Bytes of the rows X that are those of the input `given` (not a converted copy)."""
    # rows are taken as they were given only from CSR or dense input (X is one of them);
    # any other sparse format (COO, LIL, ...) has been converted
    if not ((sp.issparse(X) and getattr(given, "format", None) == "csr")
            or (isinstance(X, np.ndarray) and isinstance(given, np.ndarray))):
        return 0
    return sum(a.nbytes for a, b in zip(_row_arrays(X), _row_arrays(given))
               if np.may_share_memory(a, b))


def _refuse_complex(X, where):
    """Complex rows are refused, as partial_fit refuses them (a cast drops their
    imaginary parts with a mere warning)."""
    if np.issubdtype(X.dtype, np.complexfloating):
        raise ValueError(f"Complex data not supported: a block of X is {X.dtype} "
                         f"({where(0)})")


def _n_problems(spec):
    """The problems of the model a spec trains: one, or one per class beyond two."""
    classes = getattr(spec, "classes_", None)
    return 1 if classes is None or len(classes) == 2 else len(classes)


def _finish_block(spec, X, y, sw, part, row0, where):
    """Validate and encode rows for the core (the estimator's own checks and encoding)."""
    block = _Block()
    given = X
    if sp.issparse(X) or hasattr(X, "to_scipy_sparse"):
        if not sp.issparse(X):
            X = X.to_scipy_sparse()
        _refuse_complex(X, where)
        X = spec._as_matrix(X, fitted=True)
        # a text partition with no rows (or no features) has no columns: 0 rows to train
        X = check_array(X, accept_sparse="csr", dtype=np.float64, accept_large_sparse=True,
                        ensure_all_finite=False, ensure_min_samples=0,
                        ensure_min_features=0, input_name="X")
        if not _all_finite(X.data):
            bad = np.flatnonzero(~np.isfinite(X.data))
            row = int(np.searchsorted(X.indptr, bad[0], side="right") - 1)
            raise ValueError(f"X contains NaN or infinity at {where(row)}")
        if not X.has_canonical_format or not all(a.flags.c_contiguous
                                                 for a in _row_arrays(X)):
            # the core takes canonical rows in contiguous arrays (a block's arrays may be
            # strided views: the .real of complex ones, say)
            X = X.copy()
            X.sum_duplicates()
    elif isinstance(X, np.ndarray):
        if X.ndim != 2:
            raise ValueError(f"a block of X has {X.ndim} dimensions ({where(0)})")
        _refuse_complex(X, where)
        X = spec._as_matrix(X, fitted=True)
        if sp.issparse(X):  # hashing folds dense rows into sparse columns
            return _finish_block(spec, X, y, sw, part, row0, where)
        X = np.ascontiguousarray(X, dtype=np.float64)
        if not _all_finite(X):
            bad = np.flatnonzero(~np.isfinite(X).all(axis=1))
            raise ValueError(f"X contains NaN or infinity at {where(int(bad[0]))}")
    else:
        raise TypeError(f"a block of X is a {type(X).__name__} ({where(0)}); expected a "
                        "NumPy array or a scipy.sparse matrix")
    # the model's width budget (max_model_bytes), refused here where the row has a name,
    # before a lane's state grows to it
    spec._check_width(X, _n_problems(spec), where)
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(f"a block has {X.shape[0]} rows but labels of shape {y.shape} "
                         f"({where(0)})")
    if y.dtype.kind == "f" and not _all_finite(y):
        row = int(np.flatnonzero(~np.isfinite(y))[0])
        raise ValueError(f"y contains NaN or infinity at {where(row)}: {y[row].item()!r}")
    try:
        y_core = spec._encode_targets(X, y, fit=False)[0]
    except ValueError as exc:
        if spec._classifier:  # a label outside the classes, said where it is
            known = np.isin(y, spec.classes_)
            if not known.all():
                row = int(np.flatnonzero(~known)[0])
                raise ValueError(f"label {y[row].item()!r} at {where(row)} is not one of "
                                 f"the classes {spec.classes_.tolist()}") from None
        raise ValueError(f"{exc} (rows from {where(0)})") from None
    if sw is None:
        sw = np.ones(X.shape[0])
    else:
        sw = np.asarray(sw, dtype=np.float64)
        if sw.shape != (X.shape[0],):
            raise ValueError(f"sample_weight has {sw.shape[0]} rows where X has "
                             f"{X.shape[0]} ({where(0)})")
        bad = np.flatnonzero(~np.isfinite(sw) | (sw < 0))
        if bad.size:
            raise ValueError(f"sample_weight must be finite and >= 0; {where(int(bad[0]))} "
                             f"has {sw[bad[0]]!r}")
        sw = np.ascontiguousarray(sw)
    block.X, block.y, block.sw = X, np.ascontiguousarray(y_core, dtype=np.float64), sw
    block.shared_bytes = _shared_bytes(X, given)
    block.rps = spec._row_power_sums(X)
    block.n_rows = X.shape[0]
    block.width = X.shape[1]
    block.part, block.row0 = part, row0
    block.next, block.name, block.line0 = None, None, None
    return block


# ---- sources ----------------------------------------------------------------------------
def _make_source(X, y, sample_weight, est, n_features, zero_based, blocksize, block_rows,
                 n_lanes, backend, fitted):
    if isinstance(X, da.Array):
        if n_features is not None or zero_based != "auto" or blocksize is not None:
            raise ValueError("n_features, zero_based and blocksize are for text input "
                             "(a bag of lines or files), not a dask array")
        return _ArraySource(X, y, sample_weight, est, backend, fitted)
    if isinstance(X, (str, bytes, os.PathLike)):
        X = [X]
    is_bag = isinstance(X, db.Bag)
    is_files = isinstance(X, (list, tuple)) and len(X) > 0 and all(
        isinstance(f, (str, bytes, os.PathLike)) for f in X)
    if not (is_bag or is_files):
        raise TypeError("X must be a dask.array.Array, a dask.bag.Bag of svmlight lines or "
                        f"a list of svmlight file paths; got {type(X).__name__}")
    if y is not None or sample_weight is not None:
        raise ValueError("y and sample_weight go with a dask array X; text input (a bag "
                         "of lines or files) carries its labels in its lines")
    if is_bag:
        return _BagSource(X, est, n_features, zero_based, backend)
    return _FileSource([os.fsdecode(f) for f in X], est, n_features, zero_based, blocksize,
                       block_rows, n_lanes, backend)


class _ArraySource:
    """Partition i is row block i of a dask array (with its labels and weights)."""

    one_block_per_partition = True

    def __init__(self, X, y, sample_weight, est, backend, fitted):
        if X.ndim != 2:
            raise ValueError(f"X must be a 2-d dask array, got {X.ndim} dimensions")
        if any(np.isnan(c) for c in X.chunks[0]):
            raise ValueError("X has unknown row chunk sizes; call X.compute_chunk_sizes() "
                             "first")
        if len(X.chunks[1]) > 1:
            X = X.rechunk({1: -1})  # a partition holds whole rows
        if y is None:
            raise ValueError(f"y is required with a dask array X ({type(est).__name__} "
                             "needs labels or targets)")
        self.X = X
        self.y = self._rows(y, "y", X)
        self.sw = None if sample_weight is None else self._rows(sample_weight,
                                                                "sample_weight", X)
        for v, name in ((X, "X"), (self.y, "y"), (self.sw, "sample_weight")):
            if isinstance(v, da.Array):
                backend.check_readable(v, name)
        self.backend = backend
        self.n_partitions = len(X.chunks[0])
        self.offsets = np.concatenate([[0], np.cumsum(X.chunks[0])]).astype(np.int64)
        self.n_rows = int(self.offsets[-1])  # rows a pass (text sources: None)
        n_bits = est.n_bits
        self.width = 2**n_bits if n_bits is not None else int(X.shape[1])
        if (fitted and n_bits is None and X.shape[1] != est.n_features_in_
                and isinstance(getattr(X, "_meta", None), np.ndarray)):
            # sparse rows may grow the model, as in partial_fit; dense ones may not
            raise ValueError(f"X has {X.shape[1]} features, but the fitted model has "
                             f"{est.n_features_in_} (dense input keeps the fitted width)")
        self._x_parts = X.to_delayed().ravel()
        self._y_parts = self._parts(self.y)
        self._w_parts = None if self.sw is None else self._parts(self.sw)
        self._persisted = self._persisted_parts(backend)
        self.spec = None

    @functools.cached_property
    def rows_held(self):
        """Whether the backend holds every row block in memory (`holds_values`)."""
        return self.backend.holds_values(self.X)

    @property
    def read_in_place(self):
        """Whether the round tasks read the blocks on a cluster (`_Unread`) without a
        copy: float64 CSR or dense arrays, as X's meta says (hashing aside)."""
        meta = getattr(self.X, "_meta", None)
        return self._persisted is not None and self.X.dtype == np.float64 and (
            isinstance(meta, np.ndarray) or (sp.issparse(meta) and meta.format == "csr"))

    def _persisted_parts(self, backend):
        """Per input (X, y, sample_weight), what reading each partition's block takes
        when X and every dask array among them is persisted on a cluster: their
        partitions' futures (NumPy inputs: their slices); else None. The lanes' round
        tasks read such blocks themselves (`_Unread`); a graph to compute costs the
        driver's process (and a LocalCluster's scheduler in it) more: median 0.27 CPU s a
        4 M-row fit against 0.185 for a task of its own on the futures (bench/dask_cpu.py),
        which the rounds' reading has since spared too."""
        parts = []
        for v, sliced in ((self.X, None), (self.y, self._y_parts), (self.sw, self._w_parts)):
            if v is None or not isinstance(v, da.Array):
                parts.append(sliced)
                continue
            futures = backend.partition_futures(v)
            if futures is None:
                return None
            parts.append(futures)
        return parts

    def _parts(self, v):
        """A block's labels or weights: a task of a dask array, or a slice of a NumPy
        one (a dask array made of it held the whole array in each block's graph: on a
        cluster, 32 MB sent with each block's request for 4 M labels, measured)."""
        if isinstance(v, da.Array):
            return v.to_delayed().ravel()
        return [v[a:b] for a, b in zip(self.offsets[:-1], self.offsets[1:])]

    @staticmethod
    def _rows(v, name, X):
        if not isinstance(v, da.Array):
            v = np.asarray(v)
            if v.ndim == 2 and v.shape[1] == 1:
                v = v[:, 0]
            if v.ndim != 1:
                raise ValueError(f"{name} must be 1-d, got shape {v.shape}")
            if v.shape[0] != X.shape[0]:
                raise ValueError(f"X has {X.shape[0]} rows but {name} has {v.shape[0]}")
            return v  # cut into the partitions' slices (see _parts)
        if v.ndim == 2 and v.shape[1] == 1:
            v = v[:, 0]
        if v.ndim != 1:
            raise ValueError(f"{name} must be 1-d, got shape {v.shape}")
        if any(np.isnan(c) for c in v.chunks[0]):
            raise ValueError(f"{name} has unknown chunk sizes; call "
                             f"{name}.compute_chunk_sizes() first")
        if v.shape[0] != X.shape[0]:
            raise ValueError(f"X has {X.shape[0]} rows but {name} has {v.shape[0]}")
        if v.chunks[0] != X.chunks[0]:
            v = v.rechunk((X.chunks[0],))  # the rows of block i go with labels i
        return v

    def find_classes(self):
        if isinstance(self.y, da.Array):
            return self.backend.compute(da.unique(self.y))
        return np.unique(self.y)

    def known_meta(self, part):
        """A partition's rows, continuation and width, from the array's chunks: the
        driver plans slices without waiting for blocks (`_array_block` checks them)."""
        return int(self.offsets[part + 1] - self.offsets[part]), False, self.width

    def first_block(self, backend, part):
        if self._persisted is not None:
            x, y, w = (None if p is None else p[part] for p in self._persisted)
            return _Unread(self.spec, x, y, w, part, int(self.offsets[part]),
                           self.known_meta(part))
        w = None if self._w_parts is None else self._w_parts[part]
        return backend.start(dask.delayed(_array_block, pure=False)(
            self.spec, self._x_parts[part], self._y_parts[part], w, part,
            int(self.offsets[part]), self.known_meta(part)))

    def next_block(self, backend, handle):  # pragma: no cover - one block per partition
        raise AssertionError("a dask array partition is one block")

    def close(self):
        pass


def _array_block(spec, X, y, sw, part, first_row, declared):
    def where(row):
        return f"partition {part}, row {row} (row {first_row + row} of X)"
    n_rows, _, width = declared
    shape = getattr(X, "shape", None)
    if shape is not None and len(shape) == 2 and shape[0] != n_rows:
        raise ValueError(f"partition {part} of X (from row {first_row}) has {shape[0]} "
                         f"rows, but the dask array's chunks say {n_rows}: its declared "
                         "shape is wrong (from_delayed/map_blocks with a wrong shape?)")
    block = _finish_block(spec, X, y, sw, part, 0, where)
    # a sparse block may be narrower: its columns keep their indices, the others are
    # zero; a narrower dense one is not the block the array declares
    if block.width > width or (block.width < width and isinstance(block.X, np.ndarray)):
        raise ValueError(f"partition {part} of X (from row {first_row}) has "
                         f"{block.width} columns, but the dask array says {width}")
    return block


class _Unread:
    """A block of a persisted dask array on a cluster, not read yet: its partition's
    futures (and what `_array_block` needs with them). A lane's round task reads it on
    the lane's worker, where the partition is (`_round_blocks`), instead of a task of its
    own: on a LocalCluster each task cost its worker 1-2 ms of dispatch on top of the
    read, and a 10 M-row fit made 100 of them between the rounds (bench/dask_timeline.py)."""

    __slots__ = ("spec", "inputs", "recipe", "key")
    _numbers = itertools.count()

    def __init__(self, spec, x, y, w, part, first_row, declared):
        self.spec, self.inputs = spec, (x, y, w)
        self.recipe = (part, first_row, declared)
        self.key = ("onlinepgs-unread", next(self._numbers))  # the backend's meta cache

    @property
    def n_rows(self):
        return self.recipe[2][0]


def _unread_meta(spec, x, y, w, recipe):
    """Task: an unread block's meta (`_block_meta`), reading it."""
    return _block_meta(_array_block(spec, x, y, w, *recipe))


# blocks read by a lane's round on a cluster that its next round continues:
# (fit token, pass, partition) -> _Block, in each worker's process
_OPEN_BLOCKS = {}


def _round_blocks(key, plan, args):
    """A round's blocks on a cluster: futures' values as they are, and unread blocks
    (plan.unread: recipe and whether the round ends it, or None) read here, or taken from
    the previous round of the lane that began them."""
    blocks, args = [], iter(args)
    for entry in plan.unread:
        if entry is None:
            blocks.append(next(args))
            continue
        recipe, ends = entry
        x, y, w = next(args), next(args), next(args)
        name = (*key, recipe[0])
        with _REPLICAS_LOCK:
            block = _OPEN_BLOCKS.pop(name, None)
        if block is None:
            block = _array_block(plan.spec, x, y, w, *recipe)
        if not ends:
            with _REPLICAS_LOCK:
                _OPEN_BLOCKS[name] = block
        blocks.append(block)
    return blocks


class _BagSource:
    """Partition i is partition i of a bag of svmlight lines, parsed in one go."""

    one_block_per_partition = True
    read_in_place = False  # read by tasks of their own (see _ArraySource)
    rows_held = False  # parsed: a read makes its rows

    def __init__(self, bag, est, n_features, zero_based, backend):
        self.parts = bag.to_delayed()
        self.n_partitions = len(self.parts)
        self.n_rows = None
        self.backend = backend
        self.n_features = n_features
        self.width = n_features or 0
        if est.n_bits is not None:
            self.width = 2**est.n_bits
        if zero_based == "auto":
            zero_based = self._zero_based_of_first_rows(backend)
        self.zero_based = zero_based
        self.spec = None

    def _zero_based_of_first_rows(self, backend):
        """zero_based="auto" from the first partition that has rows (a filter may have
        emptied the first ones, which would then decide one-based from nothing): from
        the first partition, then the next 2, 4, ... at a time."""
        start, count = 0, 1
        while start < self.n_partitions:
            found = backend.compute_all([dask.delayed(_bag_decide, pure=False)(p)
                                         for p in self.parts[start:start + count]])
            decided = next((d for d in found if d is not None), None)
            if decided is not None:
                return decided
            start, count = start + count, 2 * count
        return False  # no rows at all (the fit says so)

    def known_meta(self, part):
        return None  # known once the partition is read

    def find_classes(self):
        labels = self.backend.compute_all([
            dask.delayed(_bag_labels, pure=False)(p, self.zero_based, self.n_features, i)
            for i, p in enumerate(self.parts)])
        return np.unique(np.concatenate(labels)) if labels else np.zeros(0)

    def first_block(self, backend, part):
        return backend.start(dask.delayed(_bag_block, pure=False)(
            self.spec, self.parts[part], self.zero_based, self.n_features, part))

    def next_block(self, backend, handle):  # pragma: no cover - one block per partition
        raise AssertionError("a bag partition is one block")

    def close(self):
        pass


def _lines_bytes(lines):
    """The lines of a bag partition as one text. Joined with newlines (a line that
    already ends with one then adds a blank line, which the parser skips)."""
    lines = list(lines)
    if not lines:
        return b"", lines
    if isinstance(lines[0], bytes):
        return b"\n".join(lines), lines
    if not isinstance(lines[0], str):
        raise TypeError(f"a bag of svmlight lines must hold str or bytes, got "
                        f"{type(lines[0]).__name__}")
    return "\n".join(lines).encode("utf-8"), lines


def _bag_line(lines, parsed_line):
    """The line of a bag partition holding line `parsed_line` of `_lines_bytes`' text."""
    at = 0
    for i, line in enumerate(lines):
        at += 1 + (line.count("\n") if isinstance(line, str) else line.count(b"\n"))
        if at >= parsed_line:
            return i + 1
    return len(lines)


def _bag_parse(lines, zero_based, n_features, part):
    data, lines = _lines_bytes(lines)
    name = f"bag partition {part}"
    try:
        return load_svmlight(io.BytesIO(data), n_features=n_features,
                             zero_based=zero_based)
    except SvmlightError as exc:
        raise _relocated(exc, name, _bag_line(lines, exc.line)) from None


def _bag_decide(lines):
    data, _ = _lines_bytes(lines)
    return _decide_zero_based(io.BytesIO(data), undecided=None)


def _bag_labels(lines, zero_based, n_features, part):
    return np.unique(_bag_parse(lines, zero_based, n_features, part)[1])


def _bag_block(spec, lines, zero_based, n_features, part):
    lines = list(lines)  # a partition may be an iterator: read again for messages
    X, y = _bag_parse(lines, zero_based, n_features, part)

    def where(row):  # called for messages only
        data, kept = _lines_bytes(lines)
        return f"bag partition {part}:{_bag_line(kept, _row_line(data, row))}"
    return _finish_block(spec, X, y, None, part, 0, where)


def _decide_zero_based(source, undecided=False):
    """zero_based="auto" as `iter_svmlight` decides it: from the first chunk (`undecided`
    where it has no feature index)."""
    reader = iter_svmlight(source, chunk_rows=_PEEK_ROWS)
    with reader:
        for _ in reader:
            break
        decided = reader.zero_based
    return bool(decided) if decided is not None else undecided


def _relocated(exc, name, line):
    """An SvmlightError re-addressed to a file (or bag partition) and its line."""
    message = str(exc)
    prefix = f"{exc.source}:{exc.line}:"
    if message.startswith(prefix):
        message = f"{name}:{line}:" + message[len(prefix):]
    return SvmlightError(message, name, line, exc.column, exc.text)


class _FileSource:
    """svmlight files: plain files in byte ranges, compressed files whole; each partition
    read `block_rows` lines at a time (one task per block, chained by its position)."""

    one_block_per_partition = False  # a file's partition is read block by block
    read_in_place = False  # read by tasks of their own (see _ArraySource)
    rows_held = False  # parsed: a read makes its rows

    def __init__(self, paths, est, n_features, zero_based, blocksize, block_rows, n_lanes,
                 backend):
        self.backend = backend
        self.n_features = n_features
        self.block_rows = block_rows
        self.width = n_features or 0
        if est.n_bits is not None:
            self.width = 2**est.n_bits
        self.parts = []  # (path, start, end, compressed, file index)
        decide = []
        for index, path in enumerate(paths):
            if not os.path.isfile(path):
                raise FileNotFoundError(f"{path}: no such file")
            size = os.path.getsize(path)
            with open(path, "rb") as f:
                head = f.read(6)
            compressed = any(head.startswith(m) for m, _ in _MAGIC)
            if compressed:
                self.parts.append((path, 0, size, True, index))
            else:
                n = n_lanes if blocksize is None else -(-size // blocksize)
                n = max(1, min(n, size))
                cuts = [size * i // n for i in range(n + 1)]
                self.parts.extend((path, cuts[i], cuts[i + 1], False, index)
                                  for i in range(n))
            if zero_based == "auto":
                decide.append(dask.delayed(_file_decide, pure=False)(path))
        self.zero_based = (backend.compute_all(decide) if zero_based == "auto"
                           else [zero_based] * len(paths))
        self.n_partitions = len(self.parts)
        self.n_rows = None
        self.token = uuid.uuid4().hex
        self.spec = None

    def _task(self, part, cursor):
        path, start, end, compressed, index = self.parts[part]
        return (path, start, end, compressed, self.zero_based[index], self.n_features,
                self.block_rows, part, self.token, cursor)

    def known_meta(self, part):
        return None  # known once the partition is read

    def find_classes(self):
        labels = self.backend.compute_all([
            dask.delayed(_file_labels, pure=False)(self._task(i, None))
            for i in range(self.n_partitions)])
        return np.unique(np.concatenate(labels)) if labels else np.zeros(0)

    def first_block(self, backend, part):
        return backend.submit(_file_block, self.spec, self._task(part, None))

    def next_block(self, backend, handle):
        return backend.submit(_file_next_block, self.spec, handle)

    def close(self):
        self.backend.run_everywhere(_drop_readers, self.token)


def _file_decide(path):
    return _decide_zero_based(path)


class _Cursor:
    """Where a partition's next block starts: a byte offset (plain files), or lines
    consumed (compressed files, which cannot seek)."""

    __slots__ = ("task", "offset", "lines", "rows")

    def __init__(self, task, offset, lines, rows):
        self.task, self.offset, self.lines, self.rows = task, offset, lines, rows


_READERS = {}  # (token, part) -> [decompressed file, lines consumed, bytes left over]
_READERS_LOCK = threading.Lock()


def _drop_readers(token):
    with _READERS_LOCK:
        for key in [k for k in _READERS if k[0] == token]:
            _READERS.pop(key)[0].close()


def _first_line_at(f, start):
    """Offset of the first line starting at or after `start`."""
    if start == 0:
        return 0
    f.seek(start - 1)
    skipped = start - 1
    while True:
        chunk = f.read(_READ_SIZE)
        if not chunk:
            return skipped
        at = chunk.find(b"\n")
        if at >= 0:
            return skipped + at + 1
        skipped += len(chunk)


def _take_lines(read, line_start, end, max_lines, leftover=b""):
    """Read whole lines that start before `end`, at most `max_lines`.

    read(n) returns the bytes after those given so far (and `leftover` first), which
    begin at `line_start`. Returns (text, lines taken, offset after them, bytes read past
    them, at the end of the data).
    """
    buf = bytearray(leftover)
    scanned = line_start  # offset just past buf
    scanned += len(buf)
    stop = line_start
    taken = 0
    eof = False
    search_from = 0
    while taken < max_lines and line_start < end:
        newlines = np.flatnonzero(np.frombuffer(memoryview(buf)[search_from:],
                                                dtype=np.uint8) == 10)
        base = scanned - len(buf) + search_from
        if newlines.size:
            ends = newlines + base  # offsets of the newlines
            starts = np.empty_like(ends)
            starts[0] = line_start
            starts[1:] = ends[:-1] + 1
            m = min(int(np.searchsorted(starts, end)), max_lines - taken)
            if m:
                stop = int(ends[m - 1]) + 1
                taken += m
                line_start = stop
            if m < ends.size:
                break
        search_from = len(buf)
        if taken >= max_lines or line_start >= end:
            break
        chunk = read(_READ_SIZE)
        if not chunk:
            eof = True
            if scanned > line_start:  # a last line without a newline
                stop = scanned
                taken += 1
                line_start = stop
            break
        buf += chunk
        scanned += len(chunk)
    first = scanned - len(buf)  # offset of buf[0]
    text = bytes(buf[:stop - first])
    rest = bytes(buf[stop - first:])
    return text, taken, stop, rest, eof and not rest


class _Decompressed:
    """A compressed file, read in decompressor steps as the single-process reader reads
    it (`onlinepgs.svmlight._Steps`): a stream that ends early or fails its check is the
    same SvmlightError, naming the file and the line being read where it broke (the
    decompressor's EOFError or OSError named neither), counted here."""

    def __init__(self, path):
        with open(path, "rb") as f:
            head = f.read(6)
        self.kind = next((kind for magic, kind in _MAGIC if head.startswith(magic)), "xz")
        self.raw = open(path, "rb")
        self.file = _decompressing(self.kind, self.raw)
        self.steps = _Steps(self.file)
        self.path = path
        self.newlines, self.partial = 0, False

    def read(self, size):
        buf = bytearray(size)
        try:
            with memoryview(buf) as view:
                got = self.steps.readinto(view)
        except _DECOMPRESSION_ERRORS as exc:
            line = max(1, self.newlines + self.partial)
            raise _corrupt_error(self.path, self.kind, line, exc) from exc
        del buf[got:]
        if got:
            self.newlines += buf.count(b"\n")
            self.partial = not buf.endswith(b"\n")
        return buf

    def close(self):
        self.file.close()
        self.raw.close()


def _read_block_text(task, cursor):
    """The next block's text of a partition: (text, first line number or None, cursor)."""
    path, start, end, compressed, _, _, block_rows, part, token, _ = task
    if not compressed:
        with open(path, "rb") as f:
            offset = _first_line_at(f, start) if cursor is None else cursor.offset
            f.seek(offset)
            text, _, stop, _, eof = _take_lines(f.read, offset, end, block_rows)
            size = os.fstat(f.fileno()).st_size
        done = eof or stop >= end or stop >= size
        rows = 0 if cursor is None else cursor.rows
        return text, offset, None, None if done else _Cursor(task, stop, None, rows)
    key = (token, part)
    lines_done = 0 if cursor is None else cursor.lines
    with _READERS_LOCK:
        entry = _READERS.pop(key, None)
    if entry is not None and entry[1] != lines_done:
        entry[0].close()
        entry = None
    f = entry[0] if entry is not None else _Decompressed(path)
    try:
        if entry is None:
            # not this process's reader (or a retried task): open again and skip ahead
            skipped, rest, _, eof = 0, b"", 0, False
            while skipped < lines_done and not eof:
                _, n, _, rest, eof = _take_lines(f.read, 0, float("inf"),
                                                 lines_done - skipped, rest)
                skipped += n
        else:
            rest = entry[2]
        text, n, _, rest, eof = _take_lines(f.read, 0, float("inf"), block_rows, rest)
    except BaseException:
        f.close()  # out of _READERS: nothing else would
        raise
    rows = 0 if cursor is None else cursor.rows
    if eof:
        f.close()
        return text, None, lines_done + 1, None
    with _READERS_LOCK:
        _READERS[key] = [f, lines_done + n, rest]
    return text, None, lines_done + 1, _Cursor(task, None, lines_done + n, rows)


def _parse_block_text(task, text, offset, line0):
    path, _, _, _, zero_based, n_features, _, _, _, _ = task
    try:
        return load_svmlight(io.BytesIO(text), n_features=n_features,
                             zero_based=zero_based)
    except SvmlightError as exc:
        if line0 is None:
            line0 = _line_at(path, offset)
        raise _relocated(exc, path, line0 + exc.line - 1) from None


def _line_at(path, offset):
    """The line number of a plain file's byte `offset` (a line's start), counted: for
    messages only, as blocks of plain files are read without counting lines."""
    line = 1
    with open(path, "rb") as f:
        done = 0
        while done < offset:
            chunk = f.read(min(_READ_SIZE, offset - done))
            if not chunk:
                break
            line += chunk.count(b"\n")
            done += len(chunk)
    return line


def _row_line(text, row):
    """The 1-based line of svmlight `text` that holds its row `row` (0-based): rows are
    the lines that are not blank or only a comment."""
    rows = -1
    for i, line in enumerate(text.split(b"\n")):
        if line.split(b"#", 1)[0].strip():
            rows += 1
            if rows == row:
                return i + 1
    raise AssertionError(f"the text holds {rows + 1} rows, not {row + 1}")


def _file_block(spec, task, cursor=None):
    text, offset, line0, next_cursor = _read_block_text(task, cursor)
    X, y = _parse_block_text(task, text, offset, line0)
    path, part = task[0], task[7]
    row0 = 0 if cursor is None else cursor.rows

    def where(row):  # called for messages only
        first = line0 if line0 is not None else _line_at(path, offset)
        return f"{path}:{first + _row_line(text, row) - 1}"
    block = _finish_block(spec, X, y, None, part, 0, where)
    block.row0 = row0
    block.name = path
    if next_cursor is not None:
        next_cursor.rows = row0 + block.n_rows
    block.next = next_cursor
    return block


def _file_next_block(spec, previous):
    cursor = previous.next
    return _file_block(spec, cursor.task, cursor)


def _file_labels(task):
    """Labels of a whole partition, block by block (the classes' first pass)."""
    found = []
    cursor = None
    while True:
        text, offset, line0, cursor_next = _read_block_text(task, cursor)
        _, y = _parse_block_text(task, text, offset, line0)
        found.append(np.unique(y))
        if cursor_next is None:
            break
        cursor = cursor_next
    return np.unique(np.concatenate(found))


# ---- schedulers ---------------------------------------------------------------------------
class _Handle:
    """A block or task result of the local scheduler: done (its value), or pending (the
    task graph that makes it, its own task included, and its key)."""

    __slots__ = ("graph", "key", "value", "done", "task")

    def __init__(self, graph, key, task=False):
        self.graph, self.key, self.value, self.done = graph, key, None, False
        self.task = task  # a lane's (or another submitted call's), not a block's


def _lanes_first(tasks):
    """A `start_state` callback of the local scheduler that runs the ready tasks among
    `tasks` before any other ready task. dask.order ranks a round's lanes and the next
    round's block reads by the graph's shape alone, and put the reads first in some
    rounds: both threads read while no lane ran, and the faster lane then idled
    until the slower one was done. The order changes no result (a lane reads only the
    round's state and its own blocks)."""
    def start_state(dsk, state):
        # the scheduler pops its ready list from the end; sort is stable
        state["ready"].sort(key=lambda key: key in tasks)
    return start_state


def _row_block_keys(array):
    """The keys of a dask array's row blocks, in order (`_ArraySource` keeps its rows
    whole, one block of columns)."""
    return [k for row in array.__dask_keys__() for k in (row if isinstance(row, list)
                                                          else [row])]


def _own_graph(delayed_obj):
    """A block's task graph: its own tasks only. A partition's Delayed holds the whole
    array's graph, which a cluster's every block request sent to the scheduler (with
    every row of an array made of in-memory blocks: 1 M rows took 2.5-14.8 s to fit on
    a LocalCluster, 0.8-2.3 s culled)."""
    graph = delayed_obj.__dask_graph__()
    return dict(graph.cull({delayed_obj.key}) if hasattr(graph, "cull") else graph)


def _held_value(graph, key):
    """The array a key of a task graph stands for when the graph holds it (through
    aliases), or None where a task makes it."""
    for _ in range(len(graph) + 1):
        value = graph.get(key)
        kind = type(value).__name__  # dask._task_spec's nodes (dask >= 2024.12)
        if kind == "Alias":
            key = value.target
            continue
        if kind == "DataNode":
            value = value.value
        if isinstance(value, np.ndarray) or sp.issparse(value):
            return value
        try:
            if isinstance(value, (tuple, str)) and value != key and value in graph:
                key = value  # an old-style alias: a key for a value
                continue
        except TypeError:  # a task's tuple with unhashable arguments
            pass
        return None
    return None


class _LocalBackend:
    """Dask's local threaded scheduler. Tasks wait until results are asked for; then
    everything pending (the round's lanes, their merge and the blocks read ahead) runs at
    once on Dask's thread pool as one plain task graph handed to `dask.threaded.get`: a
    block's graph is culled to what it needs once, when it is requested, so that no round
    pays for `dask.compute`'s handling of collections (tokenizing, optimizing, ordering:
    about 3 ms a round, measured). The lanes that can start go first (`_lanes_first`): the
    blocks read ahead then fill the time a thread would wait for the slower lane, and the
    merge."""

    shares_memory = True  # the lanes read the driver's state; a task merges into it

    def __init__(self):
        self.pending = []
        self.prefix = f"onlinepgs-{uuid.uuid4().hex}-"
        self.count = itertools.count()

    def n_threads(self):
        return int(dask.config.get("num_workers", None) or os.cpu_count() or 1)

    def near(self, worker):
        return contextlib.nullcontext()

    def partition_futures(self, collection):
        return None  # no cluster, no futures

    def check_readable(self, collection, name):
        """Threads cannot read what a cluster holds (a persisted collection's futures)."""
        distributed = sys.modules.get("distributed")  # not imported: no futures
        if distributed is not None and distributed.futures_of(collection):
            raise ValueError(f"{name} is persisted on a dask.distributed cluster (its blocks "
                             "are futures there): pass that cluster's Client as client=, "
                             "or persist it with scheduler='threads'")

    def holds_values(self, array):
        """Whether every row block of a dask array is a value its graph holds (persisted,
        or made of arrays in memory), not a task that makes it."""
        graph = dict(array.__dask_graph__())
        return all(_held_value(graph, key) is not None for key in _row_block_keys(array))

    def _run(self):
        todo, self.pending = [h for h in self.pending if not h.done], []
        if not todo:
            return
        graph = {}
        for h in todo:
            graph.update(h.graph)
        tasks = {h.key for h in todo if h.task}
        # callbacks as dask.local.get_async takes them: (start, start_state, pretask,
        # posttask, finish), beside the user's (a progress bar)
        values = dask.threaded.get(graph, [h.key for h in todo], callbacks=[
            *Callback.active, (None, _lanes_first(tasks), None, None, None)])
        for h, v in zip(todo, values):
            h.value, h.done, h.graph = v, True, None

    def start(self, delayed_obj):
        key = delayed_obj.key
        if not isinstance(key, str):  # pragma: no cover - our blocks are named calls
            raise TypeError(f"a block's task needs a name, got the key {key!r}")
        h = _Handle(_own_graph(delayed_obj), key)
        self.pending.append(h)
        return h

    def submit(self, func, *args, priority=0):  # one graph a round: no priorities
        graph, call = {}, []
        for a in args:
            if isinstance(a, _Handle) and not a.done:
                graph.update(a.graph)
                call.append(a.key)  # a task's argument that names a key gets its value
            else:
                call.append(_Opaque(a.value if isinstance(a, _Handle) else a))
        key = self.prefix + str(next(self.count))
        graph[key] = (_call_opaque, func, *call)
        h = _Handle(graph, key, task=True)
        self.pending.append(h)
        return h

    def results(self, handles):
        self._run()
        return [h.value for h in handles]

    def metas(self, handles):
        self._run()
        return [_block_meta(h.value) for h in handles]

    def compute(self, obj):
        return dask.compute(obj, scheduler="threads")[0]

    def compute_all(self, objs):
        return list(dask.compute(*objs, scheduler="threads")) if objs else []

    def release(self, handle):
        handle.value = None

    def run_everywhere(self, func, *args):
        func(*args)

    def close(self):
        self.pending = []


class _Opaque:
    """An argument of a plain task, kept from Dask's eyes: a task graph reads tuples as
    calls and strings as keys, and would walk into lists."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def _call_opaque(func, *args):
    return func(*[a.value if isinstance(a, _Opaque) else a for a in args])


class _DistributedBackend:
    """A dask.distributed cluster: blocks stay on the workers that read them (futures),
    each lane's tasks run on its worker, which keeps its copy of the global state
    (`_Driver._submit_round`): only the lanes' sparse changes cross the network between
    rounds, and the driver fetches the state at the end of a pass (or every round for a
    callback)."""

    shares_memory = False  # the state and its merges live on the workers

    def __init__(self, client):
        try:
            from distributed import Client
        except ImportError as exc:  # pragma: no cover
            raise ImportError("a client needs dask.distributed: pip install distributed") from exc
        if not isinstance(client, Client):
            raise TypeError(f"client must be a distributed.Client, got {type(client).__name__}")
        self.client = client
        self.meta_cache = {}
        self.preferred = None  # see near

    def n_threads(self):
        return max(1, sum(self.client.nthreads().values()))

    def check_readable(self, collection, name):
        pass  # the client reads its cluster's futures

    def holds_values(self, array):
        return False  # a cluster's persisted blocks are its workers' (partition_futures)

    def partition_futures(self, collection):
        """The futures of a persisted dask array's row blocks, in order; None unless
        every block is one."""
        from distributed import futures_of

        found = {f.key: f for f in futures_of(collection)}
        keys = _row_block_keys(collection)
        return [found[k] for k in keys] if all(k in found for k in keys) else None

    def holders(self, X):
        """The workers holding each row block of a dask array (empty if none), once
        its persisted blocks are made: client.persist returns before, when no worker
        holds them yet."""
        from distributed import futures_of, wait

        futures = futures_of(X)
        wait(futures)
        for future in futures:
            if future.status == "error":
                future.result()  # the block's own error, not "held by no worker"
        found = self.client.who_has(X)
        return [set(found.get(key, found.get(str(key), ()))) for key in _row_block_keys(X)]

    @contextlib.contextmanager
    def near(self, worker):
        """Blocks requested within go to `worker` (the lane's, which trains them) where
        it can take them: read elsewhere, a block would cross to it every round."""
        self.preferred = worker
        try:
            yield
        finally:
            self.preferred = None

    def _placement(self, worker=None):
        """Where a task may run: a lane's tasks use its copy of the state, so only on
        its worker (nor stolen); blocks preferably where their lane trains (`near`)."""
        if worker is not None:
            return dict(workers=[worker], allow_other_workers=False)
        if self.preferred is not None:
            return dict(workers=[self.preferred], allow_other_workers=True)
        return {}

    def start(self, delayed_obj):
        return self.client.compute(Delayed(delayed_obj.key, _own_graph(delayed_obj)),
                                   **self._placement())

    def lane_workers(self, n_lanes, workers=None):
        """The worker of each lane: `workers` (locality), else the workers in address
        order, dealt round-robin (a worker with several threads gets several lanes)."""
        if workers is None:
            workers = sorted(self.client.nthreads())
        return [workers[i % len(workers)] for i in range(n_lanes)]

    def submit(self, func, *args, priority=0, worker=None):
        return self.client.submit(func, *args, pure=False, priority=priority,
                                  **self._placement(worker))

    def scatter(self, value, workers):
        """`value` on each of `workers` at once (else the second waits for a copy from the
        first, 7-16 ms for a 262,145-coordinate state, bench/dask_timeline.py)."""
        return self.client.scatter(value, workers=sorted(set(workers)), broadcast=True,
                                   hash=False)

    def result(self, future, workers=()):
        self.settle(future, workers)
        return future.result()

    def settle(self, futures, workers=()):
        """Wait for tasks without fetching their results; raise the first error. A task
        bound to a worker that left the cluster would wait for it for ever: that is an
        error too (`workers`: those the tasks are bound to)."""
        from concurrent.futures import CancelledError

        from distributed import wait

        futures = futures if isinstance(futures, list) else [futures]
        while True:
            try:
                wait(futures, timeout=_WORKER_CHECK_SECONDS)
                break
            except CancelledError:
                # the scheduler dropped the round's tasks: a worker restarted under them
                raise RuntimeError(
                    "the cluster cancelled a round's tasks: a worker restarted or left "
                    "during the fit, and the lanes' copies of the state it held cannot be "
                    "rebuilt. The model is left as it was; fit again.") from None
            except TimeoutError:
                gone = set(workers) - set(self.client.nthreads())
                if gone:
                    raise RuntimeError(
                        f"worker {sorted(gone)[0]} left the cluster during the fit; its "
                        "lanes train from its copy of the state, which no other worker "
                        "has. The model is left as it was; fit again.") from None
        for future in futures:
            if future.status == "error":
                future.result()

    def metas(self, futures):
        todo = [f for f in futures if f.key not in self.meta_cache]
        if todo:
            found = self._gathered([
                self.client.submit(_unread_meta, f.spec, *f.inputs, f.recipe, pure=False)
                if isinstance(f, _Unread) else
                self.client.submit(_block_meta, f, pure=False) for f in todo])
            for f, m in zip(todo, found):
                self.meta_cache[f.key] = m
        return [self.meta_cache[f.key] for f in futures]

    def _gathered(self, futures):
        """The results of futures made for the asking, which are then released. A
        failed task's exception, kept by the client with the task's key, gets the
        frames it is raised through, and they hold the futures of that key: unreleased,
        the key, the futures and those frames stayed on the client for good."""
        try:
            return self.client.gather(futures)
        finally:
            for future in futures:
                future.release()

    def compute(self, obj):
        return self._gathered([self.client.compute(obj)])[0]

    def compute_all(self, objs):
        return self._gathered(self.client.compute(list(objs))) if objs else []

    def release(self, future):
        self.meta_cache.pop(future.key, None)
        if not isinstance(future, _Unread):  # an unread block's futures are the user's
            future.release()

    def run_everywhere(self, func, *args):
        self.client.run(func, *args)

    def close(self):
        self.meta_cache.clear()
