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
  order (`partial_fit`), to rounding (the random iterate aside: its reservoir draws over
  rounds);
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
steps it stands for (`onlinepgs.distributed.rounds.average_factor`), so the weights
still add up to those of ``t`` steps. The "random" iterate is a reservoir over rounds:
a round's global iterate is kept with probability (its steps) / (steps so far). The
statistics (`online_stats_`) add up over lanes: every row's loss is taken before its
update, by the iterate that updated with it; the radius of ``radius="auto"`` is the
largest any lane reached.

With ``sigma="auto"`` the global state holds one run per sigma of the race
(`onlinepgs._race`): every lane trains each live run on its slice, each run's lanes
merge as above, and between rounds the race's schedule drops and forks runs from their
progressive sums (summed over the lanes); a round ends at each of its decisions.

The adaptive geometry (``geometry="adaptive"``, with a fixed ``eta``: the race of eta is
refused on lanes) merges differently (`onlinepgs.distributed.adaptive`,
docs/design/dask.md): its lanes count their steps once and the merge adds the mean of the
lanes' changes of U (the sum of the scaled gradients) and of the squares n_j, both
brought to the merged scales, the largest any lane reached (a lane's gradient times
s_lane / s, its square times (s_lane / s)^2, the round's start raised as the core raises
a scale), the centered term taken once at the merged squares; t moves by the most steps
a lane took. With one lane the run is the single process's, bit for bit; with one step
per lane and round it is the mini-batch run whose batch is the round's rows together,
wherever each lane read its rows at the batch's scales (always on binary or one-hot
features); longer slices take delayed gradients, as above.

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
>>> ada = PGSClassifier(geometry="adaptive", eta=0.5, sigma=1e-3)  # a fixed eta: no race
>>> ada = opd.fit(ada, dX * 1000.0, y, n_lanes=2, slice_rows=500)   # raw units
>>> ada.score(X * 1000.0, y) > 0.95, ada.t_             # t: the rounds' merged steps
(True, 2000)
"""
import dataclasses

try:
    import dask  # noqa: F401 - the layers below need it: say so here, once
    import dask.array  # noqa: F401
    import dask.bag  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without Dask
    raise ImportError("onlinepgs.dask needs Dask: pip install 'onlinepgs[dask]' "
                      "(dask[array,bag] and distributed)") from exc

from onlinepgs.distributed.options import RunOptions
from onlinepgs.distributed.run import train
from onlinepgs.distributed.slices import auto_slice_rows

__all__ = ["fit", "partial_fit", "auto_slice_rows"]


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
        ``shuffle`` here). With ``sigma="auto"`` each lane trains every live run of the
        race on its slice and the race decides between rounds, on the rows the local race
        would (a round ends at each decision): ``sigma_``, ``sigma_path_`` as after
        `fit`; the race ends after the first pass of `fit`, and `partial_fit` keeps it
        (docs/design/dask.md). ``geometry="adaptive"`` needs a fixed ``eta`` (its race
        is not run on lanes); its lanes' merge: above.
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
        global `PGSState` after that round, for `stats_dict`; with ``sigma="auto"`` the
        leading run's; do not modify it). On a cluster, where the state is on the
        workers, a round is reported once the next one is submitted, and ``state`` is
        fetched when the callback reads it, during the callback only: a callback that
        does not read it costs the rounds nothing, one that does a copy of the state
        over the network.
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
    return _train(locals(), fresh=True)


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
    return _train(locals(), fresh=False)


def _train(arguments, fresh):
    """`fit` or `partial_fit` (`fresh`: from scratch): their arguments (``locals()`` on
    entry) checked into one `RunOptions`, then the run."""
    names = {f.name for f in dataclasses.fields(RunOptions)} - {"fresh"}
    options = RunOptions(fresh=fresh, **{k: v for k, v in arguments.items() if k in names})
    return train(arguments["estimator"], arguments["X"], arguments["y"],
                 arguments["sample_weight"], arguments["classes"], options)
