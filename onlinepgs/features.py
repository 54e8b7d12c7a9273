"""Namespaced features: rows as (namespace, hash, value) entries, into hashed columns.

Readers of namespaced formats (VW text, CSV, JSON lines) and Python records give
`NamespacedRows`; `to_matrix` turns them into the CSR chunk a learner trains on, with
the interactions of a `FeatureSpec` generated row by row in the compiled core
(`onlinepgs._core._features`). The rules (docs/design/features.md):

* a feature's hash is ``murmurhash3(name UTF-8, seed=namespace_seed(namespace))``; its
  column is ``hash & (2**n_bits - 1)`` and its value is negated when the hash's top bit
  is set (collisions cancel in expectation); a raw column (an integer feature given as
  a column index, namespace letter `RAW_COLUMN`) is neither hashed nor signed;
* an interaction is a string of 2 or 3 namespace letters (the first byte of a
  namespace's name; ``":"`` any letter): ``"ab"`` crosses every entry of letter a with
  every entry of letter b of the same row, hash ``(h_a * 16777619) ^ h_b`` (uint32),
  value ``v_a * v_b``; entries of equal letters pair once (``i <= j`` by position,
  squares included); among ``":"`` positions the letters do not decrease, so ``"::"``
  is every unordered pair of letters once. The original features are kept.

Examples
--------
>>> import numpy as np
>>> from onlinepgs.features import FeatureSpec, NamespacedRows, to_matrix
>>> rows = NamespacedRows(ns=np.array([97, 98], np.uint8),        # letters a, b
...                       hashes=np.array([3, 5], np.uint32),
...                       values=np.array([2.0, 0.5]), indptr=np.array([0, 2]))
>>> X = to_matrix(rows, FeatureSpec(n_bits=4, interactions=("ab",)))
>>> X.indices.tolist(), X.data.tolist()       # columns 3, 5 and (3 * 16777619 ^ 5) & 15 = 12
([3, 5, 12], [2.0, 0.5, 1.0])
"""
import contextlib
import threading

import numpy as np

from onlinepgs._options import parse_interactions  # noqa: F401 (the rule's home)

__all__ = ["DEFAULT_NAMESPACE", "RAW_COLUMN", "WILDCARD", "NamespacedRows", "FeatureSpec",
           "CrossedRows", "namespace_seed", "parse_interactions", "to_matrix", "chunk_of",
           "interaction_names", "expanded_input", "input_is_expanded"]

DEFAULT_NAMESPACE = 32  # b" ": the namespace of features given outside any namespace
RAW_COLUMN = 0  # an integer feature given as a column index: not hashed, not signed
WILDCARD = ":"  # in an interaction: any namespace letter (never RAW_COLUMN)
FNV_PRIME = 16777619  # combines the hashes of an interaction (as Vowpal Wabbit does)


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
    # a plain class, not a dataclass: the command imports this module, and `dataclasses`
    # imports `inspect` (10 ms of a cold start)

    def __init__(self, ns, hashes, values, indptr, names=None):
        self.ns, self.hashes, self.values, self.indptr = ns, hashes, values, indptr
        self.names = names

    def __repr__(self):
        return f"NamespacedRows(n_rows={self.n_rows}, nnz={len(self.values)})"

    @property
    def n_rows(self):
        return self.indptr.shape[0] - 1

    def take(self, rows):
        """The rows `rows` (a slice or integer indices), as NamespacedRows of their own
        (names, when kept, follow their entries)."""
        indptr = np.asarray(self.indptr, dtype=np.int64)
        if isinstance(rows, slice):
            first, stop, step = rows.indices(self.n_rows)
            if step == 1:
                stop = max(stop, first)
                a, b = int(indptr[first]), int(indptr[stop])
                return NamespacedRows(self.ns[a:b], self.hashes[a:b], self.values[a:b],
                                      indptr[first:stop + 1] - a,
                                      None if self.names is None else self.names[a:b])
            rows = np.arange(first, stop, step)
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        if rows.size and (rows.min() < -self.n_rows or rows.max() >= self.n_rows):
            raise IndexError(f"row index out of range for {self.n_rows} rows")
        rows = np.where(rows < 0, rows + self.n_rows, rows)
        lengths = indptr[rows + 1] - indptr[rows]
        out_ptr = np.zeros(rows.size + 1, dtype=np.int64)
        np.cumsum(lengths, out=out_ptr[1:])
        # each kept entry's place in the chunk: its row's start plus its rank in the row
        at = np.repeat(indptr[rows] - out_ptr[:-1], lengths) + np.arange(out_ptr[-1])
        return NamespacedRows(self.ns[at], self.hashes[at], self.values[at], out_ptr,
                              None if self.names is None else [self.names[i] for i in at])

    @classmethod
    def stack(cls, parts):
        """The rows of `parts` (NamespacedRows) one after the other."""
        starts = np.cumsum([0] + [int(p.indptr[-1]) for p in parts[:-1]])
        names = None
        if all(p.names is not None for p in parts):
            names = [n for p in parts for n in p.names]
        return cls(np.concatenate([p.ns for p in parts]),
                   np.concatenate([p.hashes for p in parts]),
                   np.concatenate([p.values for p in parts]),
                   np.concatenate([np.asarray(parts[0].indptr[:1], dtype=np.int64)] + [
                       np.asarray(p.indptr[1:], dtype=np.int64) + s
                       for p, s in zip(parts, starts)]), names)


class FeatureSpec:
    """How namespaced rows become columns: 2**n_bits hashed columns, the hash seed, the
    interactions (normalized strings of namespace letters, e.g. ("ab", "abc", "::"), as
    `parse_interactions` gives them). Equal when the three are."""

    def __init__(self, n_bits, hash_seed=0, interactions=()):
        self.n_bits, self.hash_seed, self.interactions = n_bits, hash_seed, interactions

    def _key(self):
        return self.n_bits, self.hash_seed, self.interactions

    def __eq__(self, other):
        return self._key() == other._key() if type(other) is FeatureSpec else NotImplemented

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return (f"FeatureSpec(n_bits={self.n_bits!r}, hash_seed={self.hash_seed!r}, "
                f"interactions={self.interactions!r})")


def namespace_seed(name, hash_seed):
    """The seed a namespace's features are hashed with: hash_seed for the default
    namespace (""), else murmurhash3(name, hash_seed) (the full name: "user" and "url"
    share the letter u but not the seed)."""
    from onlinepgs._core._hashing import murmurhash3

    return hash_seed if name == "" else murmurhash3(name, hash_seed)


def _letters(interactions):
    """The kernel's arrays: letters (n, 3) uint8 and orders (n,) int32."""
    letters = np.zeros((len(interactions), 3), dtype=np.uint8)
    for q, item in enumerate(interactions):
        letters[q, :len(item)] = np.frombuffer(item.encode("ascii"), dtype=np.uint8)
    return letters, np.array([len(i) for i in interactions], dtype=np.int32)


def to_matrix(rows, spec, audit=None):
    """The canonical CSR chunk (n_rows x 2**n_bits) of `rows` under `spec`.

    Hashed entries are signed by their hash's top bit, raw columns are not; each row's
    interactions are generated in the compiled core; each row's columns are sorted and
    its duplicates summed (hash collisions add up). ``audit.add(rows, spec)`` is called
    first when an audit collector is given.

    Parameters
    ----------
    rows : NamespacedRows
    spec : FeatureSpec
    audit : object with ``add(rows, spec)`` or None

    Returns
    -------
    scipy.sparse.csr_matrix (through `onlinepgs._csr.csr`), canonical
    """
    from onlinepgs._core._features import rows_to_csr
    from onlinepgs._csr import csr

    interactions = parse_interactions(spec.interactions)
    if audit is not None:
        audit.add(rows, spec)
    letters, orders = _letters(interactions)
    data, indices, indptr = rows_to_csr(
        np.ascontiguousarray(rows.ns, dtype=np.uint8),
        np.ascontiguousarray(rows.hashes, dtype=np.uint32),
        np.ascontiguousarray(rows.values, dtype=np.float64),
        np.ascontiguousarray(rows.indptr, dtype=np.int64), int(spec.n_bits), letters, orders)
    return csr(data, indices, indptr, (rows.n_rows, 1 << int(spec.n_bits)), canonical=True)


def chunk_of(rows, spec, audit=None, crossed=False):
    """A reader's chunk of `rows` under `spec`: the CSR matrix (`to_matrix`), or with
    `crossed` and interactions to make, `CrossedRows` (crossed by the PGS pass, a row at
    a time). ``audit.add(rows, spec)`` is called first when an audit collector is
    given."""
    if crossed and spec.interactions and spec.n_bits <= 31:
        if audit is not None:
            audit.add(rows, spec)
        return CrossedRows(rows, spec)
    return to_matrix(rows, spec, audit)


class CrossedRows:
    """A chunk of namespaced rows whose interactions are made as the PGS pass reaches
    each row, never as a chunk: the rows of ``to_matrix(rows, spec)``, bit for bit,
    without the crossed matrix.

    The command's readers give such chunks to a PGS learner that reads its rows one at a
    time (``batch_size=1``; `PGSLearner` says when); everything else takes the matrix
    (`to_csr`): a learner that cannot cross in its pass, the predictions of a chunk's
    rows, an error's diagnosis. ``shape`` is the matrix's; rows are taken with
    ``X[rows]`` (a slice or integer indices).

    Parameters
    ----------
    rows : NamespacedRows
    spec : FeatureSpec
        Its interactions normalized (`parse_interactions`), n_bits <= 31.

    Examples
    --------
    >>> import numpy as np
    >>> from onlinepgs.features import CrossedRows, FeatureSpec, NamespacedRows, to_matrix
    >>> rows = NamespacedRows(ns=np.array([97, 98], np.uint8), hashes=np.array([3, 5], np.uint32),
    ...                       values=np.array([2.0, 0.5]), indptr=np.array([0, 2]))
    >>> spec = FeatureSpec(n_bits=4, interactions=("ab",))
    >>> X = CrossedRows(rows, spec)
    >>> X.shape, X.to_csr().indices.tolist() == to_matrix(rows, spec).indices.tolist()
    ((1, 16), True)
    """

    def __init__(self, rows, spec):
        self.rows = NamespacedRows(np.ascontiguousarray(rows.ns, dtype=np.uint8),
                                   np.ascontiguousarray(rows.hashes, dtype=np.uint32),
                                   np.ascontiguousarray(rows.values, dtype=np.float64),
                                   np.ascontiguousarray(rows.indptr, dtype=np.int64),
                                   rows.names)
        self.spec = FeatureSpec(int(spec.n_bits), int(spec.hash_seed),
                                parse_interactions(spec.interactions))
        self._crossing = self._finite = None

    @property
    def shape(self):
        return (self.rows.n_rows, 1 << self.spec.n_bits)

    def __len__(self):
        return self.rows.n_rows

    def __getitem__(self, rows):
        if isinstance(rows, (int, np.integer)):
            rows = [rows]
        return CrossedRows(self.rows.take(rows), self.spec)

    def stacked(self, other):
        """The rows of self, then those of `other` (CrossedRows of the same spec)."""
        return CrossedRows(NamespacedRows.stack([self.rows, other.rows]), self.spec)

    def to_csr(self):
        """The chunk as its CSR matrix (`to_matrix`): what a learner that does not cross
        in its pass trains on."""
        return to_matrix(self.rows, self.spec)

    @property
    def nnz(self):
        """The matrix's stored entries (made by `to_csr`)."""
        return self.to_csr().nnz

    def crossing(self):
        """The compiled chunk the pass crosses (`onlinepgs._core._features.Crossing`),
        made once."""
        if self._crossing is None:
            from onlinepgs._core._features import Crossing

            letters, orders = _letters(self.spec.interactions)
            self._crossing = Crossing(self.rows.ns, self.rows.hashes, self.rows.values,
                                      self.rows.indptr, self.spec.n_bits, letters, orders)
        return self._crossing

    def products_finite(self):
        """Whether every value, and every product of up to 3 of them, is finite (a
        crossed value that overflows is refused, naming its row, by the matrix's
        checks); found once."""
        if self._finite is None:
            values = self.rows.values
            with np.errstate(over="ignore"):
                top = np.abs(values).max() if values.size else 0.0
                self._finite = bool(np.isfinite(top) and np.isfinite(top ** 3))
        return self._finite


def _tuples(ns, letters):
    """The position tuples of one row that an interaction (`letters`) makes, in the
    kernel's order (the rules of the module docstring)."""
    def fits(letter, i):
        return ns[i] != RAW_COLUMN and (letter == WILDCARD or ord(letter) == ns[i])

    lists = [[i for i in range(len(ns)) if fits(letter, i)] for letter in letters]
    found = [()]
    for m, choices in enumerate(lists):
        found = [t + (i,) for t in found for i in choices
                 if all(not (ns[t[k]] == ns[i] and t[k] > i) and not (
                     letters[k] == WILDCARD == letters[m] and ns[t[k]] > ns[i])
                        for k in range(m))]
    return found


def interaction_names(ns, hashes, names, interactions):
    """One row's features with their names, interactions expanded (for the audit).

    Parameters
    ----------
    ns, hashes : sequences (one row's entries of `NamespacedRows`)
    names : sequence of str (the entries' names)
    interactions : the normalized interactions (`parse_interactions`)

    Returns
    -------
    list of (hash, name)
        The row's entries as they are, then each interaction's entries: the combined
        hash (uint32, before masking and signing, as `to_matrix` masks and signs it) and
        the names joined by ``"*"`` (``"a^x*b^y"``).

    Examples
    --------
    >>> interaction_names([97, 98], [3, 5], ["a^x", "b^y"], ("ab",))
    [(3, 'a^x'), (5, 'b^y'), (50332860, 'a^x*b^y')]
    """
    ns = [int(n) for n in ns]
    out = [(int(h), str(n)) for h, n in zip(hashes, names)]
    for item in interactions:
        for t in _tuples(ns, item):
            h = int(hashes[t[0]])
            for i in t[1:]:
                h = ((h * FNV_PRIME) & 0xFFFFFFFF) ^ int(hashes[i])
            out.append((h, "*".join(names[i] for i in t)))
    return out


# Matrices a learner with interactions takes as they are: chunks a reader built with
# `to_matrix` under the learner's spec (the command's files). Process-wide, not per
# thread: the command may train in a thread of its own; it only lifts a refusal.
_EXPANDED = [0]
_EXPANDED_LOCK = threading.Lock()


@contextlib.contextmanager
def expanded_input():
    """Within it, learners and models with ``interactions`` take matrices as they are:
    their interactions are already in the columns (chunks of a reader's `to_matrix`).

    Outside it such a matrix is refused: a plain matrix has no namespaces to cross, and
    taking it silently would drop the interactions. The command wraps its runs over
    files in it.
    """
    with _EXPANDED_LOCK:
        _EXPANDED[0] += 1
    try:
        yield
    finally:
        with _EXPANDED_LOCK:
            _EXPANDED[0] -= 1


def input_is_expanded():
    """Whether `expanded_input` is in force."""
    return _EXPANDED[0] > 0
