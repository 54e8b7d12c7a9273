"""Streaming reader of JSON lines: one object per line, features in namespaces.

Each line is ``{"label": ..., "weight": ..., "features": {...}}`` (every key optional):

* ``label``: a number (true/false: 1/0); missing or null: NaN, a row without a label;
* ``weight``: a positive number (an importance weight); missing or null: 1;
* ``features``: ``{name: value}`` in the default namespace, where a value is a number
  (the name hashed, value the number), true/false (value 1/0), a string (``name=value``
  hashed, value 1), null (no feature), or an object: a namespace of that name holding
  ``{name: value}`` of the same kinds (one level: no object inside it).

Hashing follows `onlinepgs.features` (the records of the Python API do the same):
``murmurhash3(name, seed)`` with seed ``hash_seed`` in the default namespace, else
``murmurhash3(namespace, hash_seed)``; a namespace's letter (for interactions) is the
first byte of its name. Reading (compression, stdin, bounded blocks) is
`onlinepgs._lines.LineReader`'s; each line is decoded by `json.loads`.
"""
import json
import math
from array import array

import numpy as np

from onlinepgs._core._hashing import murmurhash3
from onlinepgs._lines import InputError, LineReader, check_reader_params
from onlinepgs.compressed import show_bytes
from onlinepgs.features import DEFAULT_NAMESPACE
from onlinepgs.formats._common import feature_spec, rows_matrix

__all__ = ["JSONLinesError", "JSONLinesReader", "iter_jsonl"]

_KEYS = ("label", "weight", "features")


class JSONLinesError(InputError):
    """Malformed JSON lines input.

    The message reads ``source:line:column: what``: for a line that is not JSON, the
    byte column `json` reports; for a bad value, the column of its key's first
    occurrence in the line. The attributes are `InputError`'s.

    Examples
    --------
    >>> import io
    >>> from onlinepgs.formats.jsonl import JSONLinesError, iter_jsonl
    >>> try:
    ...     list(iter_jsonl(io.BytesIO(b'{"label": 1}\\n{"label": 1, "features": [1]}\\n')))
    ... except JSONLinesError as e:
    ...     print(e)
    <stream>:2:14: "features" must be an object of features, got a list '[1]'
    """


class _Bad(Exception):
    """A bad line: what, the byte column (or None), the text."""


def _kind(value):
    return {list: "a list", str: "a string", dict: "an object", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")


def _number(value, what, key, line, finite_only=True):
    """value as a float (a JSON number or a boolean), else _Bad."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        try:
            out = float(value)
        except OverflowError:
            out = math.inf
        if not finite_only or math.isfinite(out):
            return out
        raise _Bad(f"{what} is not finite", _column(line, key), json.dumps(value))
    raise _Bad(f"{what} must be a number, got {_kind(value)} "
               f"'{show_bytes(json.dumps(value).encode())}'", _column(line, key),
               json.dumps(value))


def _column(line, key):
    """The 1-based byte column of the key's first occurrence in the line, or None."""
    at = line.find(json.dumps(key, ensure_ascii=False).encode("utf-8"))
    if at < 0:
        at = line.find(json.dumps(key).encode("ascii"))
    return at + 1 if at >= 0 else None


class _Parser:
    """The LineReader parser protocol for JSON lines, in Python (one `json.loads` a
    line): rows into the arrays of `onlinepgs.features.NamespacedRows`."""

    def __init__(self, hash_seed, skip, chunk_rows, names):
        self.hash_seed = hash_seed
        self.skip = skip
        self.chunk_rows = chunk_rows
        self.want_names = names
        self.n_lines = self.n_skipped = self.n_rows_out = 0
        self._seeds = {}  # namespace name -> (letter, seed)
        self._error = None
        self._new_chunk()

    def _new_chunk(self):
        self.ns, self.hashes, self.values = array("B"), array("I"), array("d")
        self.indptr, self.labels, self.weights = array("q", [0]), array("d"), array("d")
        self.names = [] if self.want_names else None
        self.has_weight = False

    @property
    def pending_rows(self):
        return len(self.labels)

    def decide(self):
        return None

    def release(self):
        self._seeds = {}

    def error_info(self):
        return self._error

    def parse(self, buf, pos, end):
        """Parse the lines of buf[pos:end] (status 0 done, 1 chunk full, 2 error)."""
        while pos < end:
            nl = buf.find(b"\n", pos, end)
            le = nl if nl >= 0 else end
            nxt = le + 1 if nl >= 0 else end
            line = bytes(buf[pos:le])
            if line.endswith(b"\r"):
                line = line[:-1]
            self.n_lines += 1
            if line.strip():
                try:
                    self._row(line)
                except _Bad as bad:
                    if not self.skip:
                        what, column, text = bad.args
                        self._error = (what, self.n_lines, column, text)
                        return 2, pos
                    self.n_skipped += 1
            pos = nxt
            if self.chunk_rows > 0 and len(self.labels) >= self.chunk_rows:
                return 1, pos
        return 0, end

    def _row(self, line):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad = show_bytes(line[exc.start:exc.end])
            raise _Bad(f"not UTF-8 text: '{bad}'", exc.start + 1, bad)
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            column = len(text[:exc.pos].encode("utf-8")) + 1
            raise _Bad(f"bad JSON: {exc.msg}", column,
                       show_bytes(text[exc.pos:exc.pos + 20].encode("utf-8")))
        except RecursionError:
            raise _Bad("bad JSON: nested too deeply", None, "")
        if not isinstance(obj, dict):
            raise _Bad(f"a line must be a JSON object, got {_kind(obj)}", 1,
                       show_bytes(line[:20]))
        for key in obj:
            if key not in _KEYS:
                raise _Bad(f"unknown key {json.dumps(key)} (a line holds \"label\", "
                           "\"weight\" and \"features\")", _column(line, key), key)
        label = obj.get("label")
        label = math.nan if label is None else _number(label, '"label"', "label", line)
        weight = obj.get("weight")
        if weight is not None:
            weight = _number(weight, '"weight"', "weight", line)
            if not weight > 0:
                raise _Bad(f'"weight" must be positive, got {weight!r}',
                           _column(line, "weight"), json.dumps(obj["weight"]))
        features = obj.get("features")
        start = len(self.ns)
        try:
            if features is not None:
                if not isinstance(features, dict):
                    raise _Bad(f'"features" must be an object of features, got '
                               f"{_kind(features)} '{show_bytes(json.dumps(features).encode())}'",
                               _column(line, "features"), json.dumps(features))
                self._namespace(features, "", DEFAULT_NAMESPACE, self.hash_seed, line)
        except _Bad:
            del self.ns[start:], self.hashes[start:], self.values[start:]
            if self.names is not None:
                del self.names[start:]
            raise
        self.labels.append(label)
        self.weights.append(1.0 if weight is None else weight)
        self.has_weight |= weight is not None
        self.indptr.append(len(self.ns))

    def _namespace(self, features, space, letter, seed, line):
        """Append the entries of one namespace's {name: value}."""
        prefix = space + "^" if space else ""
        for name, value in features.items():
            if value is None:
                continue
            if isinstance(value, dict):
                if space:
                    raise _Bad(f"feature {json.dumps(name)} of namespace "
                               f"{json.dumps(space)} is an object: namespaces do not nest",
                               _column(line, name), name)
                if not name:
                    raise _Bad("a namespace has an empty name", _column(line, name), name)
                if name not in self._seeds:
                    self._seeds[name] = (name.encode("utf-8")[0],
                                         murmurhash3(name, self.hash_seed))
                self._namespace(value, name, *self._seeds[name], line)
                continue
            if isinstance(value, str):
                key, v = name + "=" + value, 1.0
            else:
                key = name
                v = _number(value, f"feature {json.dumps(name)}", name, line)
            self.ns.append(letter)
            self.hashes.append(murmurhash3(key, seed))
            self.values.append(v)
            if self.names is not None:
                self.names.append(prefix + key)

    def take_chunk(self):
        """(ns, hashes, values, indptr, labels, weights or None, names or None)."""
        out = (np.frombuffer(self.ns, np.uint8).copy(),
               np.frombuffer(self.hashes, np.uint32).copy(),
               np.frombuffer(self.values, np.float64).copy(),
               np.frombuffer(self.indptr, np.int64).copy(),
               np.frombuffer(self.labels, np.float64).copy(),
               np.frombuffer(self.weights, np.float64).copy() if self.has_weight else None,
               self.names)
        self.n_rows_out += len(self.labels)
        self._new_chunk()
        return out


class JSONLinesReader(LineReader):
    """Iterator over the ``(X, y, w)`` chunks of a JSON lines source (see `iter_jsonl`).

    Attributes
    ----------
    source_name : str
    n_lines, n_rows, n_skipped, bytes_read : int
        Lines read (blank and skipped ones included), rows yielded, bad lines skipped,
        bytes read from the file.
    zero_based : None
    """

    error_class = None  # JSONLinesError, set below
    zero_based = None

    def __init__(self, source, *, n_bits=18, hash_seed=0, interactions=(),
                 chunk_rows=10_000, on_error="raise", audit=None, block_size=1 << 20):
        self._to_close = []  # (close() may run even when a check below fails)
        check_reader_params(chunk_rows, on_error, block_size)
        self._spec = feature_spec(n_bits, hash_seed, interactions)
        self._audit = audit
        self._parser = _Parser(self._spec.hash_seed, on_error == "skip",
                               -1 if chunk_rows is None else int(chunk_rows),
                               audit is not None)
        super().__init__(source, block_size)

    def _take(self):
        if not self._parser.pending_rows:
            return None
        ns, hashes, values, indptr, labels, weights, names = self._parser.take_chunk()
        return (rows_matrix(ns, hashes, values, indptr, names, self._spec, self._audit),
                labels, weights)

    def _error(self, info, block):
        what, line, column, text = info
        where = f"{line}:{column}" if column is not None else f"{line}"
        return JSONLinesError(f"{self.source_name}:{where}: {what}", self.source_name,
                              line, column, text)


JSONLinesReader.error_class = JSONLinesError


def iter_jsonl(source, *, n_bits=18, hash_seed=0, interactions=(), chunk_rows=10_000,
               on_error="raise", audit=None, block_size=1 << 20):
    """Read a JSON lines source as a stream of ``(X, y, w)`` chunks.

    Parameters
    ----------
    source : str, os.PathLike, "-" or binary file object
        A path to a plain, gzip, bz2 or xz file (recognised by its magic bytes),
        ``"-"`` for stdin, or an object with ``read(n)`` returning bytes.
    n_bits : int in [1, 32], default=18
        Features are hashed into ``2**n_bits`` columns.
    hash_seed : int, default=0
        The seed of the hashes.
    interactions : sequence of str, default=()
        Namespace letters crossed (``"ab"``, ``"abc"``, ``"::"``;
        `onlinepgs.features`); the default namespace's letter is ``" "``.
    chunk_rows : int >= 1 or None, default=10_000
        Rows per chunk; None: one chunk.
    on_error : {"raise", "skip"}, default="raise"
        A bad line raises `JSONLinesError`, or is skipped (counted in ``n_skipped``).
    audit : collector or None, default=None
        When given, each chunk's feature names (``"name"``, ``"name=value"``,
        ``"namespace^name"``) go to ``audit.add(rows, spec)``.
    block_size : int >= 1, default=1 << 20
        Bytes read (after decompression) at a time.

    Returns
    -------
    reader : JSONLinesReader
        An iterator of ``(X, y, w)``: X a canonical CSR matrix of shape
        ``(rows, 2**n_bits)``, y float64 labels (NaN where a line has none), w the
        float64 weights (1 where a line has none), or None when no line of the chunk
        has a weight.

    Raises
    ------
    JSONLinesError
        A line that is not UTF-8 or not JSON (with the column `json` reports), not an
        object, with an unknown key, a label or weight that is not a (positive)
        number, a feature value that is a list or a nested object inside a
        namespace, a non-finite number; a damaged compressed stream.

    Examples
    --------
    >>> import io
    >>> from onlinepgs.formats.jsonl import iter_jsonl
    >>> lines = (b'{"label": 1, "weight": 2, "features": {"price": 2.5, "os": "ios",'
    ...          b' "user": {"id": "u9", "age": 31}}}\\n'
    ...          b'{"features": {"os": "android"}}\\n')
    >>> for X, y, w in iter_jsonl(io.BytesIO(lines), n_bits=10):
    ...     print(X.shape, y.tolist(), w.tolist(), X.getnnz(axis=1).tolist())
    (2, 1024) [1.0, nan] [2.0, 1.0] [4, 1]
    """
    return JSONLinesReader(source, n_bits=n_bits, hash_seed=hash_seed,
                           interactions=interactions, chunk_rows=chunk_rows,
                           on_error=on_error, audit=audit, block_size=block_size)
