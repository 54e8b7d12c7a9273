"""Streaming svmlight / libsvm reader with a compiled parser.

`iter_svmlight` reads a source block by block and yields ``(X, y)`` chunks of at most
``chunk_rows`` rows, so that memory does not depend on the size of the source;
`load_svmlight` reads a whole source. Each line is ``label [qid:N] idx:val ... [#
comment]``; the parsing itself runs in `onlinepgs._core._svmlight` with the GIL
released. Malformed input raises `SvmlightError`, which names the source, the line,
the column and the offending text.

Choices, shared by both functions:

* ``X`` is a canonical `scipy.sparse.csr_matrix` of float64: the indices of a row are
  sorted and **duplicate indices within a row are summed** (in file order), as
  ``X.sum_duplicates()`` would do. Unsorted rows are therefore accepted. Explicit
  zeros (``3:0``) are kept as stored entries, as scikit-learn's reader does.
  ``indices`` and ``indptr`` are int32 when every value fits, int64 otherwise.
* ``zero_based="auto"`` decides from the **first chunk**: the data is zero-based if
  index 0 appears in it, else one-based. A later index 0 in a stream judged one-based
  is then an error naming its line. (`load_svmlight` reads its source as one chunk, so
  there the whole source decides, as in `sklearn.datasets.load_svmlight_file`.)
* Numbers are decimal (``1``, ``-1``, ``+1``, ``2.5``, ``1e-3``, ``.5``), parsed to the
  correctly rounded double; ``nan``, ``inf``, hexadecimal floats, digit separators
  and values that overflow to infinity are errors.
* Lines end with LF or CRLF. Blank and comment-only lines are skipped (they are not
  rows); fields are separated by any run of spaces or tabs; ``qid:N`` right after the
  label is accepted and ignored.
"""
import numpy as np

from onlinepgs._core._svmlight import _Parser
from onlinepgs._csr import csr
from onlinepgs._csr import sparse as sp  # scipy.sparse, imported when first needed
from onlinepgs._lines import InputError, LineReader, check_reader_params
from onlinepgs._lines import corrupt_error as _corrupt_error
from onlinepgs.compressed import show_bytes

__all__ = ["SvmlightError", "SvmlightReader", "iter_svmlight", "load_svmlight"]



class SvmlightError(InputError):
    """Malformed svmlight / libsvm input.

    The message reads ``source:line:column: what 'text' in "entry"``, where column is
    the 1-based byte column of ``text`` in its line.

    Its attributes ``source``, ``line``, ``column`` and ``text`` are `InputError`'s
    (``text``: the bad label, index, value or field; ``column`` None for a truncated
    stream).

    Examples
    --------
    >>> import io
    >>> from onlinepgs.svmlight import SvmlightError, load_svmlight
    >>> try:
    ...     load_svmlight(io.BytesIO(b"1 1:0.5\\n-1 3:x1.5\\n"))
    ... except SvmlightError as e:
    ...     print(e)
    ...     print(e.source, e.line, e.column, e.text)
    <stream>:2:6: bad feature value 'x1.5' in "3:x1.5"
    <stream> 2 6 x1.5
    """


def _non_finite(raw):
    """A note for a number that parses but is not finite (for a message); raw is the
    whole token's bytes, not its shortened display (a long token that overflows only
    shows its first digits)."""
    try:
        value = float(bytes(raw))
    except ValueError:
        return ""
    return "" if np.isfinite(value) else " (not a finite number)"



def corrupt_error(name, kind, line, exc):
    """The error of a compressed svmlight stream that broke (ended early or failed a
    check), as an SvmlightError."""
    return _corrupt_error(name, kind, line, exc, SvmlightError)


def _check_params(chunk_rows, n_features, zero_based, on_error, block_size):
    check_reader_params(chunk_rows, on_error, block_size)
    if n_features is not None and (not isinstance(n_features, (int, np.integer))
                                   or isinstance(n_features, bool) or n_features < 0):
        raise ValueError(f"n_features must be an int >= 0 or None, got {n_features!r}")
    if not (zero_based is True or zero_based is False or zero_based == "auto"):
        raise ValueError(f'zero_based must be True, False or "auto", got {zero_based!r}')


class SvmlightReader(LineReader):
    """Iterator over the ``(X, y)`` chunks of an svmlight source.

    Made by `iter_svmlight` (see there for the parameters). It can be iterated once;
    it closes the files it opened when exhausted, on `close`, or when leaving a
    ``with`` block.

    Attributes
    ----------
    source_name : str
        How messages name the source.
    n_lines : int
        Lines read so far (rows, blank and comment lines, skipped lines).
    n_rows : int
        Rows yielded so far.
    n_skipped : int
        Bad lines skipped so far (``on_error="skip"``).
    n_features_seen : int
        1 + the largest feature index (after the zero/one-based shift) in the rows
        yielded so far; 0 before any.
    zero_based : bool or None
        Whether indices are zero-based: the parameter, or with ``"auto"`` the
        decision once the first chunk is read (None before).

    Examples
    --------
    >>> import io
    >>> from onlinepgs.svmlight import iter_svmlight
    >>> reader = iter_svmlight(io.BytesIO(b"1 1:1\\n-1 2:1\\n1 3:1\\n"), chunk_rows=2)
    >>> [X.shape for X, y in reader]
    [(2, 2), (1, 3)]
    >>> reader.n_rows, reader.n_features_seen, reader.zero_based
    (3, 3, False)
    """

    error_class = None  # SvmlightError, set below its definition

    def __init__(self, source, *, chunk_rows=10_000, n_features=None,
                 zero_based="auto", on_error="raise", block_size=1 << 20):
        _check_params(chunk_rows, n_features, zero_based, on_error, block_size)
        self._n_features = None if n_features is None else int(n_features)
        self._parser = _Parser(
            -1 if n_features is None else int(n_features),
            -1 if zero_based == "auto" else int(bool(zero_based)),
            on_error == "skip",
            -1 if chunk_rows is None else int(chunk_rows),
        )
        self._auto = zero_based == "auto"
        super().__init__(source, block_size)

    # ---- counters (n_lines, n_rows, n_skipped, bytes_read: LineReader's) ---------
    @property
    def n_features_seen(self):
        return self._parser.n_features_seen

    @property
    def zero_based(self):
        return self._parser.zero_based

    # ---- chunks (the reading loop is LineReader's) -------------------------------
    def _error(self, info, block):
        kind, line, column, (b0, b1), (t0, t1) = info
        return self._make_error(kind, line, column, block[b0:b1], block[t0:t1])

    def _make_error(self, kind, line, column, raw_bad, raw_token):
        """The SvmlightError of a bad line (raw_bad, raw_token: the input's bytes)."""
        bad, token = show_bytes(raw_bad), show_bytes(raw_token)
        where = f'in "{token}"'
        if kind == "label":
            what = f"bad label '{bad}'{_non_finite(raw_bad)}"
            where = ""
        elif kind == "value":
            what = f"bad feature value '{bad}'{_non_finite(raw_bad)}"
        elif kind == "colon":
            what = f"missing ':' in feature '{bad}'"
            where = ""
        elif kind == "empty_index":
            what = "empty feature index"
        elif kind == "index":
            what = f"bad feature index '{bad}' (not an integer)"
        elif kind == "negative_index":
            what = f"negative feature index '{bad}'"
        elif kind == "zero_in_one_based":
            why = ("data judged one-based from its first chunk" if self._auto
                   else "zero_based=False")
            what = f"feature index '{bad}' is negative after the one-based shift ({why})"
        elif kind == "index_too_large":
            zero_based = self._parser.zero_based
            base = ("zero- or one-based" if zero_based is None else
                    ("zero-based" if zero_based else "one-based")
                    + (", judged from the first chunk" if self._auto else ""))
            what = (f"feature index '{bad}' out of range for n_features="
                    f"{self._n_features} ({base})")
        elif kind == "index_overflow":
            what = f"feature index '{bad}' too large"
        elif kind == "qid":
            what = f"bad qid '{bad}'"
        else:  # pragma: no cover - all kinds are listed above
            what = f"bad input '{bad}'"
        message = f"{self.source_name}:{line}:{column}: {what}"
        if where:
            message += " " + where
        return SvmlightError(message, self.source_name, line, column, bad)

    def _take(self):
        parser = self._parser
        deferred = parser.decide()
        if deferred is not None:
            kind, line, column, bad, token = deferred
            raise self._or_corrupt(self._make_error(kind, line, column, bad, token))
        if not parser.pending_rows:  # every row dropped by on_error="skip"
            return None
        data, indices, indptr, labels, n_seen = parser.take_chunk()
        n_cols = self._n_features if self._n_features is not None else n_seen
        return csr(data, indices, indptr, (len(labels), n_cols), canonical=True), labels


SvmlightReader.error_class = SvmlightError


def iter_svmlight(source, *, chunk_rows=10_000, n_features=None, zero_based="auto",
                  on_error="raise", block_size=1 << 20):
    """Read an svmlight / libsvm source as a stream of ``(X, y)`` chunks.

    Memory does not depend on the size of the source: it is read ``block_size``
    bytes at a time, only the partial last line is kept between blocks, and at most
    one chunk of parsed rows is held. A chunk is yielded only once complete, so a
    consumer never sees part of a bad line.

    Parameters
    ----------
    source : str, os.PathLike, "-" or binary file object
        A path to a plain, gzip, bz2 or xz file (the compression is recognised by its
        magic bytes, whatever the extension), ``"-"`` for ``sys.stdin.buffer``, or any
        object with a ``read(n)`` method returning bytes (pipes and sockets included;
        a compressed stream is recognised too). A file object is not closed. A
        compressed file may hold several streams (``cat a.gz b.gz``, pbzip2, xz with
        stream padding): all are read, and what follows a stream must be another one
        of the same format (or gzip's zero padding).
    chunk_rows : int >= 1 or None, default=10_000
        Rows per chunk (the last chunk may have fewer). None: one chunk.
    n_features : int or None, default=None
        Number of columns of every chunk; an index >= n_features (after the shift)
        is an error. None: each chunk has ``1 + the largest index seen so far in the
        stream`` columns, so later chunks may be wider than earlier ones.
    zero_based : bool or "auto", default="auto"
        Whether indices start at 0 (True) or 1 (False; index 0 is then an error).
        "auto": zero-based if index 0 appears in the first chunk, else one-based; an
        index 0 seen later in a stream judged one-based is an error naming its line.
    on_error : {"raise", "skip"}, default="raise"
        What a bad line does: raise `SvmlightError`, or skip the line (counted in
        ``n_skipped``; a skipped line adds nothing to any chunk). A truncated or
        corrupt compressed stream always raises.
    block_size : int >= 1, default=1 << 20
        Bytes read (after decompression) at a time.

    Returns
    -------
    reader : SvmlightReader
        An iterator of ``(X, y)``: X a canonical `scipy.sparse.csr_matrix` of float64
        (indices sorted within each row, duplicate indices summed, explicit zeros
        kept; int32 indices when they fit, int64 otherwise), y a float64 array of the
        labels. It exposes the counters ``n_lines``, ``n_rows``, ``n_skipped`` and
        ``n_features_seen``.

    Raises
    ------
    SvmlightError
        On a malformed line (bad label or value, NaN or infinity, missing ``:``,
        empty, non-integer or negative index, index >= n_features, bad qid), naming
        the source, line, column and text; or on a truncated or damaged compressed
        stream (in any stream of the file, or bytes after a stream that are not a
        stream), naming the source, the line being read and the stream with the byte
        offset where it starts.

    Examples
    --------
    >>> import io
    >>> from onlinepgs.svmlight import iter_svmlight
    >>> data = b"1 qid:3 1:0.5 3:-2 # a comment\\n\\n-1 2:1.5\\n+1 3:1 1:2 3:1\\n"
    >>> for X, y in iter_svmlight(io.BytesIO(data), chunk_rows=2):
    ...     print(X.shape, y, X.toarray().tolist())
    (2, 3) [ 1. -1.] [[0.5, 0.0, -2.0], [0.0, 1.5, 0.0]]
    (1, 3) [1.] [[2.0, 0.0, 2.0]]
    """
    return SvmlightReader(source, chunk_rows=chunk_rows, n_features=n_features,
                          zero_based=zero_based, on_error=on_error,
                          block_size=block_size)


def load_svmlight(source, *, n_features=None, zero_based="auto", on_error="raise"):
    """Read a whole svmlight / libsvm source into ``(X, y)``.

    The same reader as `iter_svmlight` with the source as one chunk: with
    ``zero_based="auto"`` the whole source decides (zero-based if index 0 appears
    anywhere), as in `sklearn.datasets.load_svmlight_file`.

    Parameters
    ----------
    source : str, os.PathLike, "-" or binary file object
        See `iter_svmlight`.
    n_features : int or None, default=None
        Number of columns; None: 1 + the largest index seen.
    zero_based : bool or "auto", default="auto"
        See `iter_svmlight`.
    on_error : {"raise", "skip"}, default="raise"
        See `iter_svmlight`.

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_rows, n_features)
        Canonical (sorted indices, duplicates summed), float64.
    y : ndarray of shape (n_rows,)
        The labels, float64.

    Examples
    --------
    >>> import io
    >>> from onlinepgs.svmlight import load_svmlight
    >>> X, y = load_svmlight(io.BytesIO(b"1 1:0.5 4:1\\n-1 2:2\\n"))
    >>> X.shape, y.tolist(), X.indices.tolist(), X.data.tolist()
    ((2, 4), [1.0, -1.0], [0, 3, 1], [0.5, 1.0, 2.0])
    """
    reader = SvmlightReader(source, chunk_rows=None, n_features=n_features,
                            zero_based=zero_based, on_error=on_error)
    with reader:
        chunks = list(reader)
    if chunks:
        return chunks[0]
    n_cols = 0 if n_features is None else int(n_features)
    X = sp.csr_matrix((np.empty(0), np.empty(0, np.int32), np.zeros(1, np.int32)),
                      shape=(0, n_cols))
    return X, np.empty(0)
