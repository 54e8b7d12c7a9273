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
`onlinepgs._lines.LineReader`'s; each line is decoded by `json.loads`, and the
"features" of the lines of a block are hashed together by the compiled
`onlinepgs._core._hashing.records_to_rows` (the records' rules, in one place).
"""
import json
import math
import re
import sys
from array import array

import numpy as np

from onlinepgs._checks import RowError
from onlinepgs._core._hashing import records_to_rows
from onlinepgs._lines import InputError, LineReader, check_reader_params
from onlinepgs.compressed import show_bytes
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


# a JSON string (skipped whole: digits in a name are no number) or number; group 1: the
# integer part of a number without a fraction or an exponent
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|(-?\d+)(?![.eE\d])|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?')


def _long_integer(line):
    """The match of the first integer literal of `line` (outside strings) with more
    digits than Python converts, or None."""
    limit = sys.get_int_max_str_digits()
    for token in _TOKEN.finditer(line):
        integer = token.group(1)
        if integer is not None and limit and len(integer.lstrip(b"-")) > limit:
            return token
    return None


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
        column = _column(line, key)
        written = _number_after(line, column)  # as the line has it (1e400: inf parsed)
        raise _Bad(f"{what} is not finite" + (f": {written}" if written else ""), column,
                   json.dumps(value))
    raise _Bad(f"{what} must be a number, got {_kind(value)} "
               f"'{show_bytes(json.dumps(value).encode())}'", _column(line, key),
               json.dumps(value))


_NUMBER = re.compile(rb'\s*:\s*(-?[0-9][0-9.eE+-]*|-?Infinity|NaN)')


def _number_after(line, column):
    """The number written after the key at 1-based byte `column` of the line (the key's
    first occurrence, as `_column` finds it), or None."""
    if column is None:
        return None
    end = line.find(b'"', column)  # the key's closing quote (keys here have no escapes)
    found = _NUMBER.match(line, end + 1) if end >= 0 else None
    return found.group(1).decode("ascii") if found else None


def _column(line, key):
    """The 1-based byte column of the key's first occurrence in the line, or None."""
    try:
        at = line.find(json.dumps(key, ensure_ascii=False).encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate (an escape in the line) has no UTF-8
        at = -1
    if at < 0:
        at = line.find(json.dumps(key).encode("ascii"))
    return at + 1 if at >= 0 else None


class _Parser:
    """The LineReader parser protocol for JSON lines: each line decoded by `json.loads`
    and its "label" and "weight" checked here; the "features" objects of the lines
    parsed so far turned into namespaced rows together by the compiled
    `records_to_rows` (the records' rules: one home for the Python API and this
    format), whose error names the record and the feature (its line and column here)."""

    def __init__(self, hash_seed, skip, chunk_rows, names):
        self.hash_seed = hash_seed
        self.skip = skip
        self.chunk_rows = chunk_rows
        self.want_names = names
        self.n_lines = self.n_skipped = self.n_rows_out = 0
        self._error = None
        self.first_skip = None  # (what, line, column, text) of the first line skipped
        self._lines = []  # (features, line number, line, label, weight) not hashed yet
        self._new_chunk()

    def _new_chunk(self):
        self.parts = []  # (ns, hashes, values, indptr past its first 0) of the rows
        self.nnz = 0
        self.labels, self.weights = array("d"), array("d")
        self.names = [] if self.want_names else None
        self.has_weight = False

    @property
    def pending_rows(self):
        return len(self.labels)

    def decide(self):
        return None

    def release(self):
        self._lines = []

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
                    self._lines.append((*self._row(line), self.n_lines, line))
                except _Bad as bad:
                    # a bad feature on an earlier line comes first (skipping: only for
                    # the first line skipped, whose place is kept; the rest just count)
                    if (not self.skip or self.first_skip is None) and not self._hash():
                        return 2, pos
                    what, column, text = bad.args
                    if not self.skip:
                        self._error = (what, self.n_lines, column, text)
                        return 2, pos
                    self._skipped(lambda: (what, self.n_lines, column, text))
            pos = nxt
            if self.chunk_rows > 0 and len(self.labels) + len(self._lines) >= self.chunk_rows:
                if not self._hash():
                    return 2, pos
                if len(self.labels) >= self.chunk_rows:
                    return 1, pos
        return (0 if self._hash() else 2), end

    def _row(self, line):
        """(features dict, label, weight or None) of a line: json and the line's keys."""
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
        except ValueError:
            # Python reads at most sys.get_int_max_str_digits() digits of an integer
            # literal (4,300 by default): a longer one is out of any number's range
            literal = _long_integer(line)
            if literal is None:
                raise
            raise _Bad(f"bad JSON: an integer of {len(literal.group().lstrip(b'-')):,} "
                       "digits is out of range", literal.start() + 1,
                       show_bytes(line[literal.start():literal.start() + 20]) + "...")
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
        if features is None:
            features = {}
        elif not isinstance(features, dict):
            raise _Bad(f'"features" must be an object of features, got '
                       f"{_kind(features)} '{show_bytes(json.dumps(features).encode())}'",
                       _column(line, "features"), json.dumps(features))
        return features, label, weight

    def _hash(self):
        """Hash the pending lines' features into the chunk; False at a bad feature when
        raising (`error_info`), else its line skipped."""
        lines, self._lines = self._lines, []
        if not lines:
            return True
        if self.skip:  # one pass: bad records are left out and listed
            bad = []
            rows = records_to_rows([entry[0] for entry in lines], self.hash_seed,
                                   self.want_names, bad)
            for index, exc in bad:
                self._skipped(lambda: _feature_info(exc, lines[index]))
            if bad:
                left_out = {index for index, _ in bad}
                lines = [entry for i, entry in enumerate(lines) if i not in left_out]
            self._add(rows, lines)
            return True
        try:
            rows = records_to_rows([entry[0] for entry in lines], self.hash_seed,
                                   self.want_names)
        except RowError as exc:
            if exc.row:  # the lines before it are good
                self._add(records_to_rows([entry[0] for entry in lines[:exc.row]],
                                          self.hash_seed, self.want_names),
                          lines[:exc.row])
            self._error = _feature_info(exc, lines[exc.row])
            return False
        self._add(rows, lines)
        return True

    def _skipped(self, info):
        """Count a skipped line; the first one's (what, line, column, text) is kept
        (`info()`: worded only for the first, so that skipping costs what reading does)."""
        self.n_skipped += 1
        if self.first_skip is None:
            self.first_skip = info()

    def _add(self, rows, lines):
        ns, hashes, values, indptr, names = rows
        self.parts.append((ns, hashes, values, indptr[1:] + self.nnz))
        self.nnz += len(ns)
        if names is not None:
            self.names.extend(names)
        for _, label, weight, _, _ in lines:
            self.labels.append(label)
            self.weights.append(1.0 if weight is None else weight)
            self.has_weight |= weight is not None

    def take_chunk(self):
        """(ns, hashes, values, indptr, labels, weights or None, names or None)."""
        ns, hashes, values, indptr = zip(*self.parts)
        out = (np.concatenate(ns), np.concatenate(hashes), np.concatenate(values),
               np.concatenate([np.zeros(1, np.int64), *indptr]),
               np.frombuffer(self.labels, np.float64).copy(),
               np.frombuffer(self.weights, np.float64).copy() if self.has_weight else None,
               self.names)
        self.n_rows_out += len(self.labels)
        self._new_chunk()
        return out


def _feature_info(exc, entry):
    """(what, line number, column, text) of `records_to_rows`'s error at a feature of
    the pending line `entry`."""
    _, _, _, number, line = entry
    what, column, text = _feature_error(exc, line).args
    return what, number, column, text


def _feature_error(exc, line):
    """The `_Bad` of `records_to_rows`'s error at a feature of `line`, in this format's
    words (its key's column in the line)."""
    reason, key = getattr(exc, "reason", None), getattr(exc, "feature", None)
    what = f"feature {json.dumps(key)}"
    if reason in ("number", "finite"):
        try:
            _number(exc.value, what, key, line)
        except _Bad as bad:
            return bad
    elif reason == "nest":
        return _Bad(f"{what} of namespace {json.dumps(exc.namespace)} is an object: "
                    "namespaces do not nest", _column(line, key), key)
    elif reason == "empty namespace":
        return _Bad("a namespace has an empty name", _column(line, key), key)
    elif reason == "unicode":
        return _Bad(f"{what} is not valid Unicode (a lone surrogate)",
                    _column(line, key), json.dumps(key))
    return _Bad(exc.worded(lambda row: "the line").removeprefix("the line: "), None, "")


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
                 chunk_rows=10_000, on_error="raise", audit=None, block_size=1 << 20,
                 crossed=False):
        self._to_close = []  # (close() may run even when a check below fails)
        check_reader_params(chunk_rows, on_error, block_size)
        self._spec = feature_spec(n_bits, hash_seed, interactions)
        self._audit = audit
        self._crossed = bool(crossed)
        self._parser = _Parser(self._spec.hash_seed, on_error == "skip",
                               -1 if chunk_rows is None else int(chunk_rows),
                               audit is not None)
        super().__init__(source, block_size)

    def _take(self):
        if not self._parser.pending_rows:
            return None
        ns, hashes, values, indptr, labels, weights, names = self._parser.take_chunk()
        return (rows_matrix(ns, hashes, values, indptr, names, self._spec, self._audit,
                            self._crossed),
                labels, weights)

    def _error(self, info, block):
        what, line, column, text = info
        where = f"{line}:{column}" if column is not None else f"{line}"
        return JSONLinesError(f"{self.source_name}:{where}: {what}", self.source_name,
                              line, column, text)


JSONLinesReader.error_class = JSONLinesError


def iter_jsonl(source, *, n_bits=18, hash_seed=0, interactions=(), chunk_rows=10_000,
               on_error="raise", audit=None, block_size=1 << 20, crossed=False):
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
    crossed : bool, default=False
        With interactions, chunks are `onlinepgs.features.CrossedRows` (crossed a row
        at a time by a PGS learner's pass, no crossed matrix made) instead of CSR
        matrices; the command's training asks for them.

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
                           on_error=on_error, audit=audit, block_size=block_size,
                           crossed=crossed)
