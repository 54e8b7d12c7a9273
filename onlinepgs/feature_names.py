"""Readable models: the names of the features that land in each column of a model.

A hashed model (``n_bits``) knows its columns only as numbers: ``FeatureNames`` collects,
while training reads the data (``onlinepgs train --audit``), which feature names hash to
which column, so that ``onlinepgs info MODEL --weights`` can print ``f^a | g^b`` beside a
weight, the way Vowpal Wabbit's ``--audit`` / ``--invert_hash`` do.

Readers of namespaced formats call ``audit.add(rows, spec)`` with the chunk's
`onlinepgs.features.NamespacedRows` (``names`` filled) before hashing it; svmlight files
give their column indices (``add_columns``). A model trained without names, and not
hashed, still has readable columns: `FeatureNames.for_columns` names column j by the
file's feature index (j + 1 for one-based data).

Memory is bounded: at most ``limit`` distinct features are tracked (default 1,000,000;
8 bytes each, a sorted key array), of which at most ``per_column`` names a column are
kept (default 3, about 100 bytes a name; the rest counted as "+N more"), each name cut
at 200 characters, and the names kept add up to at most 32 MiB of text (the model
file's header holds them). A feature is told apart from another by its full 32-bit hash (its column and
sign follow from it), so two names with one full hash are one feature. Once a cap is
reached later new features are not recorded and ``capped`` says so (``info`` prints it).
"""
import base64
import threading
import zlib

import numpy as np

from onlinepgs.features import RAW_COLUMN

__all__ = ["FeatureNames", "weights_report", "FNV_PRIME"]

FNV_PRIME = 16777619  # the interaction hash's multiplier (DESIGN: h = (h_a * P) ^ h_b)
LIMIT = 1_000_000
PER_COLUMN = 3
MAX_NAME = 200
MAX_CHARS = 32 * 2**20
# crossed entries (interactions) recorded at a time: a chunk of wide rows under -q has
# millions, and their keys, hashes and positions cost ~100 bytes each while recorded
BLOCK_ENTRIES = 2**18
_VERSION = 2  # 2: each name kept with its sign in the column ("+" or "-" first)


class FeatureNames:
    """Collector of the feature names that land in each hashed column.

    Parameters
    ----------
    n_bits : int or None
        The model's hashing: columns are ``hash & (2**n_bits - 1)``. None: no hashing
        (svmlight column indices are the columns).
    hash_seed : int, default=0
        Recorded only (the readers hash; the collector receives the hashes).
    interactions : sequence of str, default=()
        The interactions the chunks are expanded with (recorded; `add` uses its spec's).
    limit : int, default=1_000_000
        Most distinct features tracked (and names kept).
    per_column : int, default=3
        Most names kept a column; further features of a column are counted.

    Attributes
    ----------
    capped : bool
        Whether a cap was reached: features met after it are not recorded.
    n_features : int
        Distinct features tracked.

    Examples
    --------
    >>> import numpy as np
    >>> from onlinepgs.features import NamespacedRows, FeatureSpec
    >>> rows = NamespacedRows(ns=np.array([ord("f"), ord("f")], np.uint8),
    ...                       hashes=np.array([5, 1029], np.uint32), values=np.ones(2),
    ...                       indptr=np.array([0, 2]), names=["f^a", "f^b"])
    >>> names = FeatureNames(n_bits=10)
    >>> names.add(rows, FeatureSpec(n_bits=10))
    >>> names.names_of(5)   # 5 and 1029 both land in column 5 of 2**10, neither negated
    (['f^a', 'f^b'], [1, 1], 0)
    """

    def __init__(self, n_bits=None, hash_seed=0, interactions=(), *, limit=LIMIT,
                 per_column=PER_COLUMN):
        if n_bits is not None and not (isinstance(n_bits, (int, np.integer))
                                       and 1 <= n_bits <= 32):
            raise ValueError(f"n_bits must be None or an integer in [1, 32], got {n_bits!r}")
        for name, value in (("limit", limit), ("per_column", per_column)):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) \
                    or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self.n_bits = None if n_bits is None else int(n_bits)
        self.hash_seed = int(hash_seed)
        self.interactions = tuple(interactions or ())
        self.limit, self.per_column = int(limit), int(per_column)
        self.capped = False
        self.offset = None  # for_columns: column j is named j + offset, nothing collected
        # the features' keys, sorted: full hash, or -(index + 1) for a raw column
        self._seen = np.empty(0, np.int64)
        self._names = {}    # column -> the first names met there
        self._more = {}     # column -> further distinct features met there
        self._chars = 0
        # the reader's thread records while a checkpoint (the trainer's thread) takes a
        # snapshot (`to_dict`): one at a time, so that a snapshot is consistent
        self._lock = threading.Lock()

    @classmethod
    def for_columns(cls, zero_based=None):
        """Names of an unhashed model's columns without collecting: column j is the data's
        feature index j (zero-based data, or unknown) or j + 1 (one-based)."""
        names = cls(None)
        names.offset = 1 if zero_based is False else 0
        return names

    @property
    def n_features(self):
        return int(self._seen.shape[0])

    @property
    def _mask(self):
        return None if self.n_bits is None else (1 << self.n_bits) - 1

    # ---- collecting ----------------------------------------------------------------
    def add(self, rows, spec):
        """Record the names of a chunk of `onlinepgs.features.NamespacedRows` (``names``
        filled), hashed under `spec` (`onlinepgs.features.FeatureSpec`), interactions
        included: the columns are those `onlinepgs.features.to_matrix` gives."""
        if rows.names is None:
            raise ValueError("FeatureNames.add needs rows with names (the reader was given "
                             "no audit collector when it parsed them)")
        if len(rows.names) != rows.hashes.shape[0]:
            raise ValueError(f"rows have {rows.hashes.shape[0]} entries but "
                             f"{len(rows.names)} names")
        if spec.n_bits != self.n_bits:
            raise ValueError(f"the rows are hashed into 2**{spec.n_bits} columns, the "
                             f"collector's model into 2**{self.n_bits}")
        self.interactions = tuple(spec.interactions or ())
        if self._full():
            return
        ns = np.asarray(rows.ns, np.uint8)
        hashes = np.asarray(rows.hashes, np.uint32)
        indptr = np.asarray(rows.indptr, np.int64)
        raw = ns == RAW_COLUMN
        keys = np.where(raw, -(hashes.astype(np.int64) + 1), hashes.astype(np.int64))
        row_of = np.repeat(np.arange(indptr.shape[0] - 1), np.diff(indptr))
        if not (self.interactions and hashes.shape[0]):
            self._record([(keys, hashes, rows.names.__getitem__, row_of)])
            return
        tuples = _concrete(self.interactions, np.unique(ns[~raw]))
        # blocks of rows with at most BLOCK_ENTRIES crossed entries (bounded memory; one
        # row may exceed it alone); the order met is the rows' either way (`_record`)
        crossed = _crossed_bound(ns, row_of, indptr.shape[0] - 1, tuples)
        start = 0
        for stop in _blocks(crossed, BLOCK_ENTRIES):
            a, b = int(indptr[start]), int(indptr[stop])
            part_rows = row_of[a:b] - start
            groups = [(keys[a:b], hashes[a:b], lambda i, a=a: rows.names[a + i],
                       part_rows + start)]
            for letters in tuples:
                factors = _crossed(ns[a:b], part_rows, letters)
                if factors[0].shape[0]:
                    groups.append(_crossed_group([f + a for f in factors], hashes,
                                                 rows.names, row_of))
            self._record(groups)
            if self._full():
                return
            start = stop

    def add_columns(self, indices, zero_based):
        """Record an svmlight chunk's column indices (before any folding into
        2**n_bits): feature index j of the data is named j, or j + 1 when the data is
        one-based (``zero_based`` False), as it is written in the file."""
        idx = np.asarray(indices, np.int64)
        keys = -(idx + 1)
        offset = 0 if zero_based is True else 1
        self._record([(keys, idx, lambda i: str(int(idx[i]) + offset),
                       np.zeros(idx.shape[0], np.int64))])

    def _full(self):
        """Whether no feature can be recorded any more (the feature cap reached: a new
        one is dropped, a known one changes nothing)."""
        return self.capped and self._seen.shape[0] >= self.limit

    def _record(self, groups):
        """Record groups of entries (keys, hashes or indices, name of entry i, the row
        of each entry): each new key's column and (while there is room) name, in the
        order met, row by row (a row's own entries before its crossed ones), whatever
        the chunks. Python works on the new features only: the known ones are found in
        the sorted key array."""
        with self._lock:
            self._record_locked(groups)

    def _record_locked(self, groups):
        keys = np.concatenate([g[0] for g in groups])
        if not keys.shape[0]:
            return
        unique, first = _first_of_each(keys)
        seen = self._seen
        at = np.searchsorted(seen, unique)
        known = at < seen.shape[0]
        known[known] = seen[at[known]] == unique[known]
        new, first = unique[~known], first[~known]
        if not new.shape[0]:
            return
        rows_of = np.concatenate([g[3] for g in groups])
        order = np.lexsort((first, rows_of[first]))  # the features in the order met
        new, first = new[order], first[order]
        room = max(self.limit - seen.shape[0], 0)
        if new.shape[0] > room:  # those met first are kept (and named) still
            self.capped = True
            new, first = new[:room], first[:room]
        # two sorted runs: the stable sort merges them in linear time
        self._seen = np.sort(np.concatenate([seen, np.sort(new)]), kind="stable")
        cols = np.concatenate([g[1] for g in groups]).astype(np.int64)[first]
        if self._mask is not None:
            cols &= self._mask
        ends = np.cumsum([g[0].shape[0] for g in groups])
        group_of = np.searchsorted(ends, first, side="right")
        local = first - np.concatenate([[0], ends])[group_of]
        names, more = self._names, self._more
        # a hashed feature (key >= 0: its full hash) enters its column negated when the
        # hash's top bit is set (onlinepgs.features.to_matrix); a raw column never is
        negated = (new >= 2**31).tolist()
        for col, group, i, neg in zip(cols.tolist(), group_of.tolist(), local.tolist(),
                                      negated):
            if len(names.get(col, ())) < self.per_column and self._chars < MAX_CHARS:
                name = ("-" if neg else "+") + _printable(groups[group][2](i))
                if self._chars + len(name) <= MAX_CHARS:
                    names.setdefault(col, []).append(name)
                    self._chars += len(name)
                    continue
                # the text budget: from now on features are counted, not named
                self._chars, self.capped = MAX_CHARS, True
            more[col] = more.get(col, 0) + 1

    # ---- reading ---------------------------------------------------------------------
    def names_of(self, column):
        """(names kept for `column`, their signs there (+1, or -1 for a feature that
        enters the column negated: its weight is minus the column's), further distinct
        features counted there)."""
        if self.offset is not None:
            return [str(int(column) + self.offset)], [1], 0
        column = int(column)
        kept = self._names.get(column, ())
        return ([n[1:] for n in kept], [-1 if n[0] == "-" else 1 for n in kept],
                self._more.get(column, 0))

    def describe(self):
        """One line on where the names come from, and whether a cap was reached."""
        if self.offset is not None:
            return ("names: the data's feature indices" +
                    (" (one-based, as in the file)" if self.offset else ""))
        text = (f"names: collected in training (--audit): {self.n_features} features, "
                f"at most {self.per_column} names a column")
        if self.capped:
            text += (f"; CAPPED (at most {self.limit} features, {MAX_CHARS // 2**20} MiB "
                     "of names): features met later have no name")
        return text

    # ---- the model file's header extra ("feature_names") ---------------------------
    def to_dict(self):
        """A compact JSON-able form (`from_dict` reads it back exactly): the integer
        arrays zlib-compressed in base64, the names one string, a line each."""
        if self.offset is not None:
            return {"version": _VERSION, "columns_offset": self.offset}
        with self._lock:  # a consistent snapshot while the reader records (checkpoints)
            return self._as_dict()

    def _as_dict(self):
        columns = np.array(sorted(set(self._names) | set(self._more)), np.int64)
        kept = [self._names.get(c, []) for c in columns.tolist()]
        return {"version": _VERSION, "n_bits": self.n_bits, "hash_seed": self.hash_seed,
                "interactions": list(self.interactions), "limit": self.limit,
                "per_column": self.per_column, "capped": self.capped,
                "columns": _pack(np.diff(columns, prepend=np.int64(0))),
                "counts": _pack(np.array([len(k) for k in kept], np.int64)),
                "more": _pack(np.array([self._more.get(c, 0) for c in columns.tolist()],
                                       np.int64)),
                "names": "\n".join(n for k in kept for n in k),
                "seen": _pack(np.diff(self._seen, prepend=np.int64(0)))}

    @classmethod
    def from_dict(cls, data):
        """The collector `to_dict` described; ValueError naming the field if malformed."""
        def bad(field, why):
            return ValueError(f"feature_names.{field}: {why}")

        if not isinstance(data, dict) or data.get("version") != _VERSION:
            raise bad("version", f"expected {_VERSION}")
        if "columns_offset" in data:
            if data["columns_offset"] not in (0, 1):
                raise bad("columns_offset", "expected 0 or 1")
            return cls.for_columns(zero_based=data["columns_offset"] == 0)
        try:
            names = cls(data["n_bits"], data["hash_seed"], data["interactions"],
                        limit=data["limit"], per_column=data["per_column"])
        except (KeyError, TypeError, ValueError) as exc:
            raise bad("header", f"malformed ({exc})") from None
        columns, counts, more, seen = (_unpack(data, f, bad)
                                       for f in ("columns", "counts", "more", "seen"))
        columns, seen = np.cumsum(columns), np.cumsum(seen)
        text = data.get("names")
        if not isinstance(text, str):
            raise bad("names", "not a string")
        listed = text.split("\n") if text else []
        if any(not n or n[0] not in "+-" for n in listed):
            raise bad("names", "a name without its sign")
        if not (columns.shape == counts.shape == more.shape) or (
                columns.shape[0] and (columns[0] < 0 or np.any(np.diff(columns) <= 0))):
            raise bad("columns", "not increasing columns, or not one count a column")
        if np.any(counts < 0) or np.any(counts > names.per_column) or np.any(more < 0) \
                or int(counts.sum()) != len(listed):
            raise bad("counts", f"do not match the {len(listed)} names")
        if np.any(np.diff(seen) <= 0):
            raise bad("seen", "not increasing keys")
        ends = np.cumsum(counts).tolist()
        for col, n, end, extra in zip(columns.tolist(), counts.tolist(), ends,
                                      more.tolist()):
            if n:
                names._names[col] = listed[end - n:end]
            if extra:
                names._more[col] = extra
        names._chars = sum(map(len, listed))
        names._seen = seen
        names.capped = bool(data.get("capped", False))
        return names


def _first_of_each(keys):
    """The distinct keys (sorted) and the position of each one's first occurrence (a
    stable sort: faster here than np.unique's hash path)."""
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    first = np.empty(ordered.shape[0], bool)
    first[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    return ordered[first], order[first]


def _pack(values):
    """An int64 array as base64 text of its zlib-compressed little-endian bytes."""
    return base64.b64encode(zlib.compress(values.astype("<i8").tobytes(), 6)).decode("ascii")


def _unpack(data, field, bad):
    try:
        raw = zlib.decompress(base64.b64decode(data[field], validate=True))
    except (KeyError, TypeError, ValueError, zlib.error) as exc:
        raise bad(field, f"not a compressed integer list ({exc})") from None
    if len(raw) % 8:
        raise bad(field, "not a whole number of 8-byte integers")
    return np.frombuffer(raw, "<i8").astype(np.int64)


def _printable(name):
    """A name on one line of `info` (a line a name in the model file), at most MAX_NAME
    characters."""
    if "\n" in name or "\r" in name:
        name = name.replace("\n", "\\n").replace("\r", "\\r")
    return name if len(name) <= MAX_NAME else name[:MAX_NAME - 3] + "..."


# ---- interactions: the DESIGN rule, transcribed on a chunk's entries ------------------
def _concrete(patterns, letters):
    """The concrete letter tuples of interaction `patterns` over the namespace `letters`
    present (uint8, RAW_COLUMN excluded): ':' takes every letter, and the wildcards of one
    pattern take letters in non-decreasing order ("::" = each unordered pair once, a <= b);
    each tuple once."""
    out = []
    letters = [int(c) for c in letters]
    for pattern in patterns:
        codes = [None if c == ":" else ord(c) for c in pattern]
        partial = [()]
        for code in codes:
            grown = []
            for head in partial:
                if code is not None:
                    grown.append(head + (code,))
                    continue
                # the wildcards' letters non-decreasing: the last wildcard's letter bounds
                before = [head[i] for i, c in enumerate(codes[:len(head)]) if c is None]
                grown.extend(head + (c,) for c in letters if not before or c >= before[-1])
            partial = grown
        out.extend(t for t in partial if t not in out)
    return out


def _cross(left_rows, right, right_rows, n_rows):
    """Every (left item, right entry) pair of one row: (index into left, right entry
    position). `right` sorted (its rows then are too)."""
    counts = np.bincount(right_rows, minlength=n_rows)
    starts = np.cumsum(counts) - counts
    reps = counts[left_rows]
    left = np.repeat(np.arange(left_rows.shape[0]), reps)
    offsets = np.arange(left.shape[0]) - np.repeat(np.cumsum(reps) - reps, reps)
    return left, right[np.repeat(starts[left_rows], reps) + offsets]


def _crossed(ns, row_of, letters):
    """The entry positions (one array a factor) of a row's interaction `letters`: each
    factor an entry of that letter in the same row; where two factors have one letter,
    the later factor's entry is at or after the earlier's in the row (each unordered
    pair once, squares included; "aba": the second a at or after the first)."""
    n_rows = int(row_of[-1]) + 1
    first = np.flatnonzero(ns == letters[0])
    factors = [first]
    for t, letter in enumerate(letters[1:], 1):
        right = np.flatnonzero(ns == letter)
        left, pos = _cross(row_of[factors[0]], right, row_of[right], n_rows)
        factors = [f[left] for f in factors] + [pos]
        for s in range(t):
            if letters[s] == letter:
                keep = factors[s] <= factors[t]
                factors = [f[keep] for f in factors]
    return factors


def _crossed_group(factors, hashes, names, row_of):
    """(keys, hashes, namer, rows) of crossed entries: h = (h_a * P) ^ h_b (uint32),
    then times P xor h_c for a triple; names "a^x*b^y"."""
    h = hashes[factors[0]]
    with np.errstate(over="ignore"):
        for f in factors[1:]:
            h = (h * np.uint32(FNV_PRIME)) ^ hashes[f]
    return (h.astype(np.int64), h,
            lambda i: "*".join(names[int(f[i])] for f in factors), row_of[factors[0]])


def _crossed_bound(ns, row_of, n_rows, tuples):
    """Per row, an upper bound of its crossed entries: for each letter tuple the product
    of the row's entries of each letter (exact but for repeated letters)."""
    bound = np.zeros(n_rows, np.int64)
    for letters in tuples:
        product = np.ones(n_rows, np.int64)
        for letter in letters:
            product *= np.bincount(row_of[ns == letter], minlength=n_rows)
        bound += product
    return bound


def _blocks(sizes, most):
    """The ends of consecutive runs of `sizes` summing to at most `most` each (a run of
    one item may exceed it), the last end len(sizes)."""
    ends, total = [], 0
    for i, size in enumerate(sizes.tolist()):
        if total and total + size > most:
            ends.append(i)
            total = 0
        total += size
    ends.append(len(sizes))
    return ends


# ---- info --weights ---------------------------------------------------------------------
def _label(value):
    """A class label for JSON: an integral float as an int."""
    if isinstance(value, (np.floating, float)) and float(value).is_integer():
        return int(value)
    return value.item() if isinstance(value, np.generic) else value


def weights_report(est, names, top=20):
    """The non-zero weights of a fitted learner, largest |w| first, with their names.

    Parameters
    ----------
    est : fitted learner (``model_``; a classifier's ``classes_``)
    names : FeatureNames or None
    top : int
        Weights a problem (0: all).

    Returns
    -------
    dict
        ``{"kind": "regression" | "binary" | "one-vs-rest" | "multinomial" |
        "crammer_singer" (K > 2 classes: the model's multi_class), "n_features", "classes",
        "names": "collected" | "columns" | "none", "names_capped", "names_note",
        "problems": [{"class", "intercept", "n_nonzero", "weights": [{"column", "weight",
        "names", "signs", "more"}]}]}``; a binary classifier's one problem scores its
        second class (the positive one). A name's feature weighs ``sign * weight``:
        hashing negates about half the features in their column (collisions then cancel
        in expectation).
    """
    # the model's non-zeros as sparse rows: a sparse model (a --no-state file's, an l1
    # model's) is never densified into its (K, n_features) array
    model = est.model_
    weights = model.coef_sparse
    intercept = np.ravel(np.asarray(model.intercept, np.float64))
    classes = getattr(est, "classes_", None) if est._classifier else None
    if classes is None:
        kind, labels = "regression", [None]
    elif model.n_problems == 1:
        kind, labels = "binary", [_label(classes[-1])]
    else:
        multi_class = getattr(est, "multi_class", "ovr")
        kind = "one-vs-rest" if multi_class == "ovr" else multi_class
        labels = [_label(c) for c in classes]
    problems = []
    for k, (label, b) in enumerate(zip(labels, intercept)):
        span = slice(int(weights.indptr[k]), int(weights.indptr[k + 1]))
        columns, values = weights.indices[span], weights.data[span]
        kept = values != 0  # a stored zero is no weight
        columns, values = columns[kept].astype(np.int64), values[kept]
        order = np.lexsort((columns, -np.abs(values)))
        if top:
            order = order[:top]
        rows = []
        for i in order.tolist():
            col = int(columns[i])
            found, signs, more = names.names_of(col) if names is not None else ([], [], 0)
            rows.append({"column": col, "weight": float(values[i]), "names": found,
                         "signs": signs, "more": more})
        problems.append({"class": label, "intercept": float(b),
                         "n_nonzero": int(columns.shape[0]), "weights": rows})
    source = ("none" if names is None else "columns" if names.offset is not None
              else "collected")
    note = (names.describe() if names is not None else "names: none (a hashed model "
            "trained without --audit: train with --audit to collect them)")
    return {"kind": kind, "n_features": int(model.n_features),
            "classes": None if classes is None else [_label(c) for c in classes],
            "names": source, "names_capped": bool(names is not None and names.capped),
            "names_note": note, "problems": problems}
