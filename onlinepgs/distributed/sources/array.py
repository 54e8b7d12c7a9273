"""The source of a dask array: partition i is row block i, with its labels and weights.

On a cluster, the blocks of an array persisted there are read by the lanes' round
tasks themselves where they lie (`Unread`, read by `replicas`), instead of by tasks of
their own.
"""
import functools
import itertools

import dask
import dask.array as da
import numpy as np
import scipy.sparse as sp

from onlinepgs.distributed import _estimator as estimator_api
from onlinepgs.distributed.blocks import block_meta, finish_block

__all__ = ["ArraySource", "Unread", "array_block", "unread_meta"]


class ArraySource:
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
            raise ValueError(f"y is required with a dask array X "
                             f"({estimator_api.name_of(est)} needs labels or targets)")
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
        n_bits = estimator_api.hashing_bits(est)
        self.width = 2**n_bits if n_bits is not None else int(X.shape[1])
        if (fitted and n_bits is None and X.shape[1] != estimator_api.fitted_width(est)
                and isinstance(getattr(X, "_meta", None), np.ndarray)):
            # sparse rows may grow the model, as in partial_fit; dense ones may not
            raise ValueError(f"X has {X.shape[1]} features, but the fitted model has "
                             f"{estimator_api.fitted_width(est)} (dense input keeps the "
                             "fitted width)")
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
        """Whether the round tasks read the blocks on a cluster (`Unread`) without a
        copy: float64 CSR or dense arrays, as X's meta says (hashing aside)."""
        meta = getattr(self.X, "_meta", None)
        return self._persisted is not None and self.X.dtype == np.float64 and (
            isinstance(meta, np.ndarray) or (sp.issparse(meta) and meta.format == "csr"))

    def _persisted_parts(self, backend):
        """Per input (X, y, sample_weight), what reading each partition's block takes
        when X and every dask array among them is persisted on a cluster: their
        partitions' futures (NumPy inputs: their slices); else None. The lanes' round
        tasks read such blocks themselves (`Unread`); a graph to compute costs the
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
        driver plans slices without waiting for blocks (`array_block` checks them)."""
        return int(self.offsets[part + 1] - self.offsets[part]), False, self.width

    def first_block(self, backend, part):
        if self._persisted is not None:
            x, y, w = (None if p is None else p[part] for p in self._persisted)
            return Unread(self.spec, x, y, w, part, int(self.offsets[part]),
                           self.known_meta(part))
        w = None if self._w_parts is None else self._w_parts[part]
        return backend.start(dask.delayed(array_block, pure=False)(
            self.spec, self._x_parts[part], self._y_parts[part], w, part,
            int(self.offsets[part]), self.known_meta(part)))

    def next_block(self, backend, handle):  # pragma: no cover - one block per partition
        raise AssertionError("a dask array partition is one block")

    def close(self):
        pass


def array_block(spec, X, y, sw, part, first_row, declared):
    def where(row):
        return f"partition {part}, row {row} (row {first_row + row} of X)"
    n_rows, _, width = declared
    shape = getattr(X, "shape", None)
    if shape is not None and len(shape) == 2 and shape[0] != n_rows:
        raise ValueError(f"partition {part} of X (from row {first_row}) has {shape[0]} "
                         f"rows, but the dask array's chunks say {n_rows}: its declared "
                         "shape is wrong (from_delayed/map_blocks with a wrong shape?)")
    block = finish_block(spec, X, y, sw, part, 0, where)
    # a sparse block may be narrower: its columns keep their indices, the others are
    # zero; a narrower dense one is not the block the array declares
    if block.width > width or (block.width < width and isinstance(block.X, np.ndarray)):
        raise ValueError(f"partition {part} of X (from row {first_row}) has "
                         f"{block.width} columns, but the dask array says {width}")
    return block


class Unread:
    """A block of a persisted dask array on a cluster, not read yet: its partition's
    futures (and what `array_block` needs with them). A lane's round task reads it on
    the lane's worker, where the partition is (`round_blocks`), instead of a task of its
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


def unread_meta(spec, x, y, w, recipe):
    """Task: an unread block's meta (`block_meta`), reading it."""
    return block_meta(array_block(spec, x, y, w, *recipe))
