"""Namespaced features: rows as (namespace, hash, value) entries, into hashed columns.

SCAFFOLD (issue 35): the interface is fixed (see NamespacedRows, FeatureSpec,
to_matrix); `to_matrix` here is a slow placeholder without interactions, to be
replaced by the compiled kernel.
"""
from dataclasses import dataclass, field

import numpy as np

DEFAULT_NAMESPACE = 32  # b" ": the namespace of features given outside any namespace
RAW_COLUMN = 0  # an integer feature given as a column index: not hashed, not signed


@dataclass
class NamespacedRows:
    """A chunk of rows before hashing into columns.

    ns : uint8 (nnz,)      the entry's namespace letter: the first byte of the namespace's
                           name (UTF-8), DEFAULT_NAMESPACE for no namespace, RAW_COLUMN for
                           an integer feature that is a column index
    hashes : uint32 (nnz,) murmurhash3(feature name UTF-8, seed=namespace_seed(ns name)),
                           or the column index for RAW_COLUMN entries
    values : float64 (nnz,)
    indptr : int64 (n_rows + 1,)
    names : list of str or None   the entries' names ("namespace^feature", or "feature" in
                           the default namespace), only when asked for (audit)
    """
    ns: np.ndarray
    hashes: np.ndarray
    values: np.ndarray
    indptr: np.ndarray
    names: list = None

    @property
    def n_rows(self):
        return self.indptr.shape[0] - 1


@dataclass
class FeatureSpec:
    """How namespaced rows become columns: 2**n_bits hashed columns, the hash seed, the
    interactions (normalized strings of namespace letters, e.g. ("ab", "abc", "::"))."""
    n_bits: int
    hash_seed: int = 0
    interactions: tuple = field(default_factory=tuple)


def namespace_seed(name, hash_seed):
    """The seed a namespace's features are hashed with: hash_seed for the default
    namespace (""), else murmurhash3(name, hash_seed)."""
    from onlinepgs._core._hashing import murmurhash3

    return hash_seed if name == "" else murmurhash3(name, hash_seed)


def to_matrix(rows, spec, audit=None):
    """PLACEHOLDER: the CSR chunk (n_rows x 2**n_bits) of `rows` under `spec`; hashed
    entries signed by the hash's top bit, raw columns not; duplicates summed."""
    if spec.interactions:
        raise NotImplementedError("interactions: the compiled kernel is not merged yet")
    if audit is not None:
        audit.add(rows, spec)
    from onlinepgs._csr import csr

    mask = (1 << spec.n_bits) - 1
    cols = (rows.hashes & np.uint32(mask)).astype(np.int64)
    signed = (rows.ns != RAW_COLUMN) & (rows.hashes >> np.uint32(31) == 1)
    data = np.where(signed, -rows.values, rows.values)
    X = csr(data, cols, rows.indptr.astype(np.int64), (rows.n_rows, 1 << spec.n_bits))
    X.sum_duplicates()
    return X
