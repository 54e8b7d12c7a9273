"""Sources of partitions: what a distributed run reads, and how.

A source cuts its input into partitions and reads each as blocks of rows
(`blocks.Block`) through the backend: `ArraySource` (row blocks of a dask array, with
labels and weights), `BagSource` (partitions of a bag of svmlight lines),
`FileSource` (svmlight files: plain ones in byte ranges, compressed ones whole, read
``block_rows`` lines at a time). `make_source` picks one for the user's X.

A source has ``n_partitions``, ``n_rows`` (rows a pass, or None where unknown),
``width``, ``spec`` (set by the run: what the workers need of the estimator),
``one_block_per_partition``, ``read_in_place``, ``rows_held`` (what sizing the slices
may assume), and ``find_classes()``, ``known_meta(part)``, ``first_block(backend,
part)``, ``next_block(backend, handle)``, ``close()``.
"""
import os

import dask.array as da
import dask.bag as db

from onlinepgs.distributed.sources.array import ArraySource
from onlinepgs.distributed.sources.bag import BagSource
from onlinepgs.distributed.sources.files import FileSource

__all__ = ["ArraySource", "BagSource", "FileSource", "make_source"]


def make_source(X, y, sample_weight, est, options, n_lanes, backend, fitted):
    """The source of X's partitions (`RunOptions` `options`; `n_lanes` lanes wanted;
    `fitted`: the run continues the estimator's state)."""
    if isinstance(X, da.Array):
        auto = isinstance(options.zero_based, str)  # "auto", the only string it takes
        if options.n_features is not None or options.blocksize is not None or not auto:
            raise ValueError("n_features, zero_based and blocksize are for text input "
                             "(a bag of lines or files), not a dask array")
        return ArraySource(X, y, sample_weight, est, backend, fitted)
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
        return BagSource(X, est, options, backend)
    return FileSource([os.fsdecode(f) for f in X], est, options, n_lanes, backend)
