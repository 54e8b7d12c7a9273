"""Streaming reader of CSV/TSV logs: each column its own namespace.

`iter_csv` reads a delimited text source whose first line names the columns (or, with
``header=False``, whose columns are named by their position, "1", "2", ...) and yields
``(X, y, w)`` chunks: ``X`` the rows' features hashed into ``2**n_bits`` columns
(`onlinepgs.features.to_matrix`, interactions included), ``y`` the labels, ``w`` the
weights (None without a weight column). The parsing runs in `onlinepgs._core._csv` with
the GIL released; reading (compression, stdin, blocks of bounded size) is
`onlinepgs._lines.LineReader`'s.

Each column has one role: the label, the weight, numeric, categorical, or ignored; a
column named in no role is categorical (a log's IDs are categories). A column is the
namespace named by its header (letter: its first byte, for interactions):

* a categorical cell hashes its text as the feature name in the column's namespace
  (value 1): ``murmurhash3(text, seed=murmurhash3(column, hash_seed))``;
* a numeric cell hashes the column's name in its namespace, value the number;
* an empty categorical or numeric cell gives no feature; an empty label is NaN (a row
  without a label: fine to predict, refused by training).
"""
import numpy as np

from onlinepgs._core._csv import ROLES, _Parser
from onlinepgs._core._hashing import murmurhash3, namespace_letter
from onlinepgs._lines import InputError, LineReader, check_reader_params
from onlinepgs.compressed import show_bytes
from onlinepgs.features import namespace_seed
from onlinepgs.formats._common import feature_spec, rows_matrix

__all__ = ["CSVError", "CSVReader", "iter_csv"]


class CSVError(InputError):
    """Malformed CSV/TSV input, or column roles that do not fit its header.

    The message reads ``source:line:column: what 'text'`` (column: the 1-based byte
    column of the field in its line); a cell's message names its column too. The
    attributes ``source``, ``line``, ``column`` and ``text`` are `InputError`'s.

    Examples
    --------
    >>> import io
    >>> from onlinepgs.formats.csv import CSVError, iter_csv
    >>> try:
    ...     list(iter_csv(io.BytesIO(b"y,dist\\n1,12\\n0,far\\n"), label="y",
    ...                   numeric=["dist"]))
    ... except CSVError as e:
    ...     print(e)
    <stream>:3:3: bad number 'far' in column 'dist' (field 2)
    """


def _names(value, role):
    """A role's columns as a list of str (a str is one column's name)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    names = []
    for name in value:
        if not isinstance(name, str):
            raise ValueError(f"{role}: column names are strings, got {name!r}")
        if name not in names:
            names.append(name)
    return names


def _check_roles(label, weight, categorical, numeric, ignore):
    """{column: role} of the named columns; a column in two roles is a ValueError."""
    if label is not None and not isinstance(label, str):
        raise ValueError(f"label must be a column name or None, got {label!r}")
    if weight is not None and not isinstance(weight, str):
        raise ValueError(f"weight must be a column name or None, got {weight!r}")
    roles = {}
    for role, names in (("label", _names(label, "label")),
                        ("weight", _names(weight, "weight")),
                        ("categorical", _names(categorical, "categorical")),
                        ("numeric", _names(numeric, "numeric")),
                        ("ignore", _names(ignore, "ignore"))):
        for name in names:
            if name in roles:
                raise ValueError(f"column {name!r} is given two roles: {roles[name]} and "
                                 f"{role}")
            roles[name] = role
    return roles


def _check_label_map(label_map):
    """The label map as a list of (bytes, float)."""
    if label_map is None:
        return []
    if not isinstance(label_map, dict):
        raise ValueError(f"label_map must be a dict of text to number, got {label_map!r}")
    out = []
    for text, value in label_map.items():
        if not isinstance(text, str) or isinstance(value, (bool, str)):
            raise ValueError(f"label_map maps texts to numbers, got {text!r}: {value!r}")
        value = float(value)
        if not np.isfinite(value):
            raise ValueError(f"label_map: the label of {text!r} is not finite")
        out.append((text.encode("utf-8"), value))
    return out


class CSVReader(LineReader):
    """Iterator over the ``(X, y, w)`` chunks of a CSV/TSV source (see `iter_csv`).

    It can be iterated once; it closes the files it opened when exhausted, on
    `close`, or when leaving a ``with`` block.

    Attributes
    ----------
    source_name : str
        How messages name the source.
    columns : list of str or None
        The header's column names (None before the header is read).
    roles : dict or None
        Each column's role ("label", "weight", "categorical", "numeric", "ignore"),
        once the header is read.
    n_lines, n_rows, n_skipped, bytes_read : int
        Lines read (the header, blank and skipped lines included), rows yielded, bad
        lines skipped (``on_error="skip"``), bytes read from the file.
    zero_based : None
        Column indices are not used by this format.
    """

    error_class = None  # CSVError, set below
    zero_based = None

    def __init__(self, source, *, label=None, weight=None, categorical=(), numeric=(),
                 ignore=(), delimiter=",", n_bits=18, hash_seed=0, interactions=(),
                 chunk_rows=10_000, on_error="raise", audit=None, label_map=None,
                 absent_ok=(), header=True, expected_columns=None, block_size=1 << 20,
                 crossed=False):
        self._to_close = []  # (close() may run even when a check below fails)
        check_reader_params(chunk_rows, on_error, block_size)
        if not isinstance(delimiter, str) or len(delimiter.encode("utf-8")) != 1 \
                or delimiter in '"\r\n':
            raise ValueError("delimiter must be one ASCII character other than a quote "
                             f"or a line break, got {delimiter!r}")
        self._spec = feature_spec(n_bits, hash_seed, interactions)
        self._named = _check_roles(label, weight, categorical, numeric, ignore)
        self._label_map = _check_label_map(label_map)
        absent_ok = (absent_ok,) if isinstance(absent_ok, str) else tuple(absent_ok)
        unknown = [role for role in absent_ok if role not in ("label", "weight", "ignore")]
        if unknown:
            raise ValueError(f"absent_ok takes the roles 'label', 'weight' and 'ignore', "
                             f"got {unknown[0]!r}")
        self._absent_ok = absent_ok
        if not isinstance(header, bool):
            raise ValueError(f"header must be True (the first line names the columns) or "
                             f"False (columns named 1, 2, ...), got {header!r}")
        self._has_header = header
        if expected_columns is not None and not (
                isinstance(expected_columns, (list, tuple))
                and all(isinstance(name, str) for name in expected_columns)):
            raise ValueError(f"expected_columns must be a list of column names, got "
                             f"{expected_columns!r}")
        self._expected = None if expected_columns is None else list(expected_columns)
        self._audit = audit
        self._crossed = bool(crossed)
        self.columns = None
        self.roles = None
        self._parser = _Parser(delimiter.encode("ascii"), on_error == "skip",
                               -1 if chunk_rows is None else int(chunk_rows),
                               audit is not None, header)
        super().__init__(source, block_size)

    # ---- the header ---------------------------------------------------------------
    def _header_error(self, what, text=""):
        return CSVError(f"{self.source_name}:1: {what}", self.source_name, 1, None, text)

    def _configure(self):
        """Decide each column's role, namespace letter and seeds from the header."""
        raw = self._parser.header
        if not self._has_header:  # the first row only counts the columns
            raw = [str(i + 1).encode("ascii") for i in range(len(raw))]
        columns = []
        for i, name in enumerate(raw):
            try:
                text = name.decode("utf-8")
            except UnicodeDecodeError:
                raise self._header_error(f"column {i + 1}'s name is not UTF-8 text: "
                                         f"'{show_bytes(name)}'", show_bytes(name)) from None
            if not text:
                raise self._header_error(f"column {i + 1} has an empty name (every column "
                                         "of the header needs one)")
            if text in columns:
                raise self._header_error(f"column '{text}' appears twice in the header "
                                         f"(fields {columns.index(text) + 1} and {i + 1})"
                                         + _data_hint(raw), text)
            columns.append(text)
        self._check_expected(columns, raw)
        missing = [(role, name) for name, role in self._named.items()
                   if name not in columns and role not in self._absent_ok]
        if missing:
            role, name = missing[0]
            known = ", ".join(columns) if len(columns) <= 20 else \
                ", ".join(columns[:20]) + f", ... ({len(columns)} in all)"
            raise self._header_error(
                f"the {role} column '{name}' is not in the "
                + (f"header (columns: {known})" + _data_hint(raw) if self._has_header else
                   f"file: without a header its columns are named 1 to {len(columns)}"),
                name)
        roles = {name: self._named.get(name, "categorical") for name in columns}
        seed = self._spec.hash_seed
        seeds = [namespace_seed(name, seed) for name in columns]
        encoded = [name.encode("utf-8") for name in columns]
        self._parser.configure(
            [ROLES[roles[name]] for name in columns],
            [namespace_letter(name) for name in encoded], seeds,
            [murmurhash3(name, s) for name, s in zip(encoded, seeds)], encoded,
            self._label_map)
        self.columns, self.roles = columns, roles

    def _check_expected(self, columns, raw):
        """The header against `expected_columns` (a model's): no other column, and each of
        those named in no role present (the roles' columns are checked as always, with
        absent_ok); the first mismatch named."""
        if self._expected is None:
            return
        # a column given a role is the role check's (it knows which may be absent)
        may_lack = set(self._named)
        known = ", ".join(self._expected[:20]) + (
            f", ... ({len(self._expected)} in all)" if len(self._expected) > 20 else "")
        unknown = [name for name in columns if name not in self._expected]
        missing = [name for name in self._expected
                   if name not in columns and name not in may_lack]
        if not (unknown or missing):
            return
        what = (f"column '{unknown[0]}' is not one the model was trained on"
                if unknown else f"the model's column '{missing[0]}' is missing")
        raise self._header_error(
            f"{what}: the model reads CSV/TSV with the columns {known}, and this header "
            f"has {', '.join(columns[:20])}" + (" ..." if len(columns) > 20 else "")
            + ("" if self._has_header else " (no header: columns by position)")
            + "; is it the model's kind of file? (--format names another)"
            + _data_hint(raw), unknown[0] if unknown else missing[0])

    def _generate(self):
        yield from super()._generate()
        if self._parser.header is None:
            raise self._header_error("empty source: a CSV source starts with a header line "
                                     "naming its columns")

    @property
    def lines_before_rows(self):
        """Lines of the source before its first row: the header's (`n_lines` counts
        it), so that a chunk's rows are named by their lines
        (`onlinepgs.streaming.sources.lines_of`)."""
        return 1 if self._has_header else 0

    # ---- chunks -------------------------------------------------------------------
    def _take(self):
        parser = self._parser
        if not parser.configured:
            self._configure()
            return None
        if not parser.pending_rows:  # every row skipped (on_error="skip")
            return None
        ns, hashes, values, indptr, labels, weights, names = parser.take_chunk()
        X = rows_matrix(ns, hashes, values, indptr, names, self._spec, self._audit,
                        self._crossed)
        return X, labels, weights

    def _error(self, info, block):
        kind, line, column, (b0, b1), field = info
        bad = show_bytes(block[b0:b1])
        name = f" ('{self.columns[field]}')" if self.columns and field < len(
            self.columns) else ""
        where = f"in column '{self.columns[field]}' (field {field + 1})" if name else ""
        if kind == "quote":
            what = f"text after the closing quote of field {field + 1}{name}: '{bad}'"
        elif kind == "unterminated":
            what = (f"quote not closed on its line in field {field + 1}{name} (a line "
                    f"break inside a quoted field is not supported): '{bad}'")
        elif kind == "too_many":
            what = (f"more fields than the header's {len(self.columns)}: extra text "
                    f"'{bad}'")
        elif kind == "too_few":
            what = f"{field} fields where the header has {len(self.columns)}"
        elif kind == "label":
            hint = "" if self._label_map else " (a label_map can turn texts into labels)"
            what = f"bad label '{bad}' {where}: not a number{hint}"
        elif kind == "weight":
            what = f"bad weight '{bad}' {where}: not a positive number"
        elif kind == "number":
            what = f"bad number '{bad}' {where}"
        elif kind == "empty_header" and not self._has_header:
            what = "empty first line: a CSV source without a header starts with a row"
        elif kind == "empty_header":
            what = "empty header line: a CSV source starts with its column names"
        else:  # pragma: no cover - all kinds are listed above
            what = f"bad input '{bad}'"
        return CSVError(f"{self.source_name}:{line}:{column}: {what}", self.source_name,
                        line, column, bad)


CSVReader.error_class = CSVError


def _data_hint(fields):
    """Advice for a header whose names look like data (a number among them): the file
    may have no header line."""
    for field in fields:
        try:
            float(field)
        except ValueError:
            continue
        return ("; the first line looks like data: a file without a header is read with "
                "header=False (train --no-header), its columns named 1, 2, ...")
    return ""


def iter_csv(source, *, label=None, weight=None, categorical=(), numeric=(), ignore=(),
             delimiter=",", n_bits=18, hash_seed=0, interactions=(), chunk_rows=10_000,
             on_error="raise", audit=None, label_map=None, absent_ok=(), header=True,
             expected_columns=None, block_size=1 << 20, crossed=False):
    """Read a CSV/TSV log as a stream of ``(X, y, w)`` chunks.

    Memory does not depend on the size of the source: it is read ``block_size`` bytes
    at a time and at most one chunk of rows is held.

    Parameters
    ----------
    source : str, os.PathLike, "-" or binary file object
        A path to a plain, gzip, bz2 or xz file (recognised by its magic bytes),
        ``"-"`` for stdin, or an object with ``read(n)`` returning bytes.
    label : str or None, default=None
        The label column: a number per row (an empty cell: NaN, a row without a
        label). None: every label is NaN (rows to predict).
    weight : str or None, default=None
        The weight column: a positive number per row (importance weights, ``w``).
        None: ``w`` is None.
    categorical, numeric, ignore : str or sequence of str, default=()
        Columns whose cell text is a category (hashed as the feature's name, value
        1), whose cell is a number (the column's name hashed, value the number), or
        that are not read. A column named in no role is categorical.
    delimiter : str, default=","
        One ASCII character (``"\\t"`` for TSV).
    n_bits : int in [1, 32], default=18
        Features are hashed into ``2**n_bits`` columns.
    hash_seed : int, default=0
        The seed of the hashes (the namespaces' seeds derive from it).
    interactions : sequence of str, default=()
        Namespace letters crossed (``"ab"``, ``"abc"``, ``"::"``): a column's letter
        is the first byte of its name (`onlinepgs.features`).
    chunk_rows : int >= 1 or None, default=10_000
        Rows per chunk; None: one chunk.
    on_error : {"raise", "skip"}, default="raise"
        A bad row raises `CSVError`, or is skipped (counted in ``n_skipped``). A bad
        header always raises.
    audit : collector or None, default=None
        When given, each chunk's feature names (``"column^text"``; a numeric column's
        ``"column^column"``) go to ``audit.add(rows, spec)``.
    label_map : dict of str to number, or None
        Label texts read as numbers (e.g. ``{"Y": 1, "N": -1}``), checked before a
        cell is read as a number.
    absent_ok : sequence of {"label", "weight", "ignore"}, default=()
        Roles whose column may be missing from the header (else an error): a file to
        predict need not have the label or weight column (its labels are NaN, ``w``
        None) nor a column training ignored.
    header : bool, default=True
        Whether the first line names the columns. False: every line is a row and the
        columns are named by their position, ``"1"``, ``"2"``, ... (``label="1"``; a
        column's namespace letter is its name's first character, so ``"1"`` is shared
        by columns 1 and 10 to 19 for interactions).
    expected_columns : list of str or None, default=None
        The columns a model was trained on (its file's ``extra.input.header``): the
        source may have no other, and must have each that no role names (the roles'
        columns are checked as always, with ``absent_ok``), else a `CSVError` names the
        first mismatch. Order does not matter.
    block_size : int >= 1, default=1 << 20
        Bytes read (after decompression) at a time.
    crossed : bool, default=False
        With interactions, chunks are `onlinepgs.features.CrossedRows` (crossed a row
        at a time by a PGS learner's pass, no crossed matrix made) instead of CSR
        matrices; the command's training asks for them.

    Returns
    -------
    reader : CSVReader
        An iterator of ``(X, y, w)``: X a canonical CSR matrix of shape
        ``(rows, 2**n_bits)``, y float64 labels, w float64 weights or None.

    Raises
    ------
    ValueError
        A column given two roles, or a bad parameter (at the call).
    CSVError
        An empty source (no header line), a role naming a column not in the header,
        an empty or repeated column name, a bad quote, a row with more or fewer fields
        than the header, a bad label, weight or number (naming the line, the byte
        column and the column's name); a damaged compressed stream.

    Notes
    -----
    Fields follow RFC 4180: a field starting with ``"`` is quoted (``""`` inside is
    one ``"``; the closing quote ends the field), so it may hold the delimiter; a
    line break inside a quoted field is not supported (an error naming the line).
    Lines end with LF or CRLF; blank lines are not rows; a UTF-8 byte order mark
    before the header is dropped. Cells are not trimmed. Numbers are decimals
    (svmlight's grammar: no ``nan`` or ``inf``).

    Examples
    --------
    >>> import io
    >>> from onlinepgs.formats.csv import iter_csv
    >>> log = b"clicked,app,os,price\\n1,game,ios,2.5\\n0,news,,\\n"
    >>> for X, y, w in iter_csv(io.BytesIO(log), label="clicked", numeric=["price"],
    ...                         n_bits=10):
    ...     print(X.shape, y.tolist(), w, X.getnnz(axis=1).tolist())
    (2, 1024) [1.0, 0.0] None [3, 1]
    """
    return CSVReader(source, label=label, weight=weight, categorical=categorical,
                     numeric=numeric, ignore=ignore, delimiter=delimiter, n_bits=n_bits,
                     hash_seed=hash_seed, interactions=interactions, chunk_rows=chunk_rows,
                     on_error=on_error, audit=audit, label_map=label_map,
                     absent_ok=absent_ok, header=header, expected_columns=expected_columns,
                     block_size=block_size, crossed=crossed)
