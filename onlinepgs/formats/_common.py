"""What the namespaced readers of this package share: their hashing parameters checked
into a `FeatureSpec`, and a chunk's rows turned into ``X`` (`features.chunk_of`)."""
import operator

import numpy as np

from onlinepgs.features import FeatureSpec, NamespacedRows, chunk_of


def feature_spec(n_bits, hash_seed, interactions):
    """The `FeatureSpec` of a reader's parameters, checked (ValueError naming the bad
    one)."""
    if isinstance(n_bits, bool) or not _is_int(n_bits) or not 1 <= n_bits <= 32:
        raise ValueError(f"n_bits must be an int in [1, 32], got {n_bits!r}")
    if isinstance(hash_seed, bool) or not _is_int(hash_seed) or not \
            0 <= hash_seed < 2**32:
        raise ValueError(f"hash_seed must be an int in [0, 2**32), got {hash_seed!r}")
    try:  # the normalized form (onlinepgs.features, issue 35's kernel)
        from onlinepgs.features import parse_interactions
    except ImportError:  # pragma: no cover - before the kernel is merged
        def parse_interactions(items):
            if isinstance(items, str):
                raise ValueError(f"interactions must be a list of strings such as "
                                 f"['ab'], got the string {items!r}")
            return tuple(items or ())
    return FeatureSpec(int(n_bits), int(hash_seed), parse_interactions(interactions))


def _is_int(value):
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


def rows_matrix(ns, hashes, values, indptr, names, spec, audit, crossed=False):
    """The chunk of a chunk's namespaced entries (names: only with an audit): CSR, or
    `CrossedRows` with `crossed` (`features.chunk_of`)."""
    rows = NamespacedRows(ns, hashes, values, np.asarray(indptr, dtype=np.int64),
                          names if audit is not None else None)
    return chunk_of(rows, spec, audit, crossed)
