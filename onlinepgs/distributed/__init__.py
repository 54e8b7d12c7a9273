"""Distributed PGS in rounds: the machinery behind `onlinepgs.dask` (its public face).

Users call `onlinepgs.dask.fit` / `partial_fit`; nothing here is public API. The
modules, from the top of a run down (the method: docs/design/dask.md):

* `options`: `RunOptions`, every option of a run, validated once;
* `run`: `train`, a run from the estimator, data and options to the fitted model
  (scheduler, source, classes, starting state, lanes by worker);
* `driver`: `Driver`, the rounds of each pass: lanes, slices, reading ahead,
  submitting, merging, the callback's reports;
* `runs`: `Runs`, the global state (one run per sigma; a ``sigma="auto"`` race's
  several) and `Race`, when the race's schedule decides and what every copy then does;
* `slices`: how many rows a lane trains per round (``slice_rows="auto"``);
* `tasks`: what runs on the workers each round: a lane's slice, the merge;
* `rounds`: the round's arithmetic, no Dask: a lane's run (`run_lane`) and the merge
  (`merge_round`);
* `adaptive`: the same for the adaptive geometry (its merge at the largest scales);
* `replicas`: a cluster's copies of the global state on the lanes' workers;
* `blocks`: rows validated and encoded for the core;
* `sources`: the partitions of a dask array, a bag of svmlight lines, svmlight files;
* `backends`: the schedulers: Dask's threads, or a ``dask.distributed`` cluster;
* `_estimator`: everything the package asks of an estimator (and of scikit-learn).
"""
