"""Streaming reader of Vowpal Wabbit's text format.

A line reads ``label [importance] ['tag]|namespace[:weight] feature[:value] ... |other
...``, as VW's own text parser reads it (the grammar in full: `iter_vw`). Features are
hashed per namespace, as VW hashes them, into ``2**n_bits`` columns
(`onlinepgs.features`); interactions between namespaces are made by
`onlinepgs.features.to_matrix`, or by a PGS learner's pass (`crossed`).
"""
import numpy as np

from onlinepgs._core._vw import _Parser
from onlinepgs._lines import InputError, LineReader, check_reader_params
from onlinepgs.compressed import show_bytes
from onlinepgs.features import FeatureSpec, NamespacedRows, chunk_of

__all__ = ["VWError", "VWReader", "iter_vw"]


class VWError(InputError):
    """Malformed VW text: the message reads ``source:line:column: what 'text'``.

    Its attributes ``source``, ``line``, ``column`` and ``text`` are `InputError`'s.

    Examples
    --------
    >>> import io
    >>> from onlinepgs.formats import iter_vw
    >>> try:
    ...     list(iter_vw(io.BytesIO(b"1 |f a:2\\n-1 |f a:2x\\n")))
    ... except VWError as e:
    ...     print(e)
    <stream>:2:9: bad feature value '2x' in "a:2x"
    """


_WHAT = {
    "label": "bad label '{}' (a number: -1/+1, 0/1, a class or a real)",
    "multiclass": ("label '{}': VW's multiclass / cost-sensitive labels are not supported "
                   "(give one number per line)"),
    "importance": "bad importance weight '{}' (a number >= 0)",
    "extra": "unexpected '{}' before the first '|' (expected: label [importance] ['tag])",
    "namespace_weight": "bad namespace weight '{}'",
    "namespace_empty": "empty namespace name in '{}'",
    "value": "bad feature value '{}'",
    "initial": ("VW's initial prediction '{}' (the third number before the first '|') is "
                "not supported: no model here takes a per-row offset of its score; give 0 "
                "or drop it"),
}


def _check_spec(n_bits, hash_seed):
    if isinstance(n_bits, bool) or not isinstance(n_bits, (int, np.integer)) or not (
            1 <= n_bits <= 31):
        raise ValueError(f"n_bits must be an int in [1, 31], got {n_bits!r}")
    if isinstance(hash_seed, bool) or not isinstance(hash_seed, (int, np.integer)) or not (
            0 <= hash_seed < 2 ** 32):
        raise ValueError(f"hash_seed must be an int in [0, 2**32), got {hash_seed!r}")


class VWReader(LineReader):
    """Iterator over the ``(X, y, w)`` chunks of a VW text source (made by `iter_vw`,
    which documents the parameters).

    Attributes
    ----------
    source_name : str
        How messages name the source.
    n_lines, n_rows, n_skipped : int
        Lines read, rows yielded, bad lines skipped (``on_error="skip"``) so far.
    bytes_read : int
        Bytes consumed from the file (compressed bytes for a compressed file).
    zero_based : None
        Hashed features have no index base (the attribute readers share).
    """

    error_class = None  # VWError, set below its definition
    zero_based = None

    def __init__(self, source, *, n_bits=18, hash_seed=0, interactions=(),
                 chunk_rows=10_000, on_error="raise", audit=None, vw_numbers=True,
                 block_size=1 << 20, crossed=False):
        check_reader_params(chunk_rows, on_error, block_size)
        if not isinstance(vw_numbers, bool):
            raise ValueError(f"vw_numbers must be True or False, got {vw_numbers!r}")
        _check_spec(n_bits, hash_seed)
        self.spec = FeatureSpec(int(n_bits), int(hash_seed), tuple(interactions))
        self._audit = audit
        self._crossed = bool(crossed)
        self._parser = _Parser(int(hash_seed), on_error == "skip",
                               -1 if chunk_rows is None else int(chunk_rows),
                               audit is not None, vw_numbers=vw_numbers)
        super().__init__(source, block_size)

    def _error(self, info, block):
        kind, line, column, (b0, b1), (t0, t1) = info
        bad, token = show_bytes(block[b0:b1]), show_bytes(block[t0:t1])
        message = f"{self.source_name}:{line}:{column}: " + _WHAT[kind].format(bad)
        if kind in ("value", "namespace_weight"):
            message += f' in "{token}"'
        return VWError(message, self.source_name, line, column, bad)

    def _take(self):
        if not self._parser.pending_rows:
            return None
        ns, hashes, values, indptr, labels, weights, names = self._parser.take_chunk()
        rows = NamespacedRows(ns, hashes, values, indptr, names)
        return chunk_of(rows, self.spec, self._audit, self._crossed), labels, weights


VWReader.error_class = VWError


def iter_vw(source, *, n_bits=18, hash_seed=0, interactions=(), chunk_rows=10_000,
            on_error="raise", audit=None, vw_numbers=True, block_size=1 << 20,
            crossed=False):
    """Read VW text as a stream of ``(X, y, w)`` chunks, hashed as VW hashes it.

    A line is ``[label [importance [initial]]] ['tag]|namespace[:weight]
    feature[:value] ... |other ...``, read as VW 9's text parser reads it, so that its
    features land in VW's columns:

    * before the first ``|``: what precedes a tab is dropped (VW's rule, for
      key<TAB>example lines); of the words (separated by spaces) the last is a tag,
      ignored, when it starts with ``'`` or touches the bar (or the end of a line
      without one); the others are the label (none: NaN, a line to predict), the
      importance weight (a number >= 0, default 1) and VW's initial prediction (0 only:
      another is refused, no model here takes a per-row offset);
    * ``|`` followed by a blank, ``|`` or the end opens the default namespace; ``|name``
      or ``|name:weight`` a named one (its name runs to a blank, ``:``, ``|`` or
      ``\r``), whose weight multiplies its features' numeric values;
    * a feature is ``name`` (value 1) or ``name:value``. Names are hashed as VW hashes
      them: murmurhash3 seeded by the namespace's hash (the default namespace's:
      murmurhash3 of the empty string under `hash_seed`, 0 for seed 0; a named one's:
      its name hashed with `hash_seed`), bytes up to 0x20 trimmed at both ends, and a
      name of digits only is its number plus that seed (``|f 123`` is column 123 +
      hash("f")); ``:value`` without a name is the namespace's k-th anonymous feature,
      the seed plus k. A value is read as VW's parse_float reads it (blanks after ``:``
      skipped; ``1e``, ``+2``, ``0x10`` are numbers; ``-``, ``.``, ``e5`` are 0): a
      value of 0 makes no feature; a value that no number starts is a string, running
      to the next blank (``|`` and ``:`` included): ``color:red`` hashes "red" with
      the hash of "color" as seed, value 1 whatever the namespace's weight; nothing
      after ``:`` is the value 1. The namespace's first byte is its letter for
      ``interactions``.

    Fields are separated by spaces and tabs; a ``\r`` before the ``\n`` is dropped and
    one inside a line ends its features; a UTF-8 byte order mark at a line's start is
    dropped; an empty line is not a row, a line of blanks is one (without label or
    features). Memory, compression (gzip, bz2, xz by magic bytes), stdin (``"-"``) and
    errors work as in `onlinepgs.svmlight.iter_svmlight`. Where VW warns and reads a
    part of a line (``a:1x``, ``a:0.7`` then a NUL byte, a label ``x``), where it reads
    a label, importance or namespace weight that is not one whole number (``1x``,
    ``-``: a part, or 0), and for NaN or infinite numbers, the line is an error:
    ``on_error="skip"`` skips such lines and counts them.

    Parameters
    ----------
    source : str, os.PathLike, "-" or binary file object
        A path (plain or compressed), ``"-"`` for stdin, or an object with ``read(n)``.
    n_bits : int in [1, 31], default=18
        Columns: ``2**n_bits``.
    hash_seed : int, default=0
        The hash's seed.
    interactions : sequence of str, default=()
        Namespace letters to cross, e.g. ``("ab", "abc", "::")`` (see
        `onlinepgs.features.to_matrix`).
    chunk_rows : int >= 1 or None, default=10_000
        Rows per chunk; None: one chunk.
    on_error : {"raise", "skip"}, default="raise"
        A bad line raises `VWError`, or is skipped (counted in ``n_skipped``).
    audit : feature-name collector or None, default=None
        Given: the entries' names (``namespace^feature``) go to ``audit.add``.
    vw_numbers : bool, default=True
        Names (of features and namespaces) of digits only index as VW's (their number
        plus the seed) and the default namespace is seeded as VW seeds it; False hashes
        names as text and seeds the default namespace with `hash_seed`, as models
        trained before these rules read (the command keeps such a model's rule).
    block_size : int >= 1, default=1 << 20
        Bytes read at a time.
    crossed : bool, default=False
        With interactions, chunks are `onlinepgs.features.CrossedRows` (crossed a row
        at a time by a PGS learner's pass, no crossed matrix made) instead of CSR
        matrices; the command's training asks for them.

    Returns
    -------
    reader : VWReader
        An iterator of ``(X, y, w)``: X a canonical CSR matrix of shape ``(rows,
        2**n_bits)``, y the labels (float64, NaN where a line has none), w the
        importance weights (float64), or None when all of the chunk's are 1.

    Raises
    ------
    VWError
        On a malformed line (bad label, importance, initial prediction, namespace
        weight or value, VW's multiclass labels), naming the source, line, column and
        text.

    Examples
    --------
    >>> import io
    >>> from onlinepgs.formats import iter_vw
    >>> data = b"1 2 'first|user u9 age:0.5 |ad a3\\n-1 |user u9\\n"
    >>> for X, y, w in iter_vw(io.BytesIO(data), n_bits=4):
    ...     print(X.shape, y, w, X.nnz)
    (2, 16) [ 1. -1.] [2. 1.] 4
    """
    return VWReader(source, n_bits=n_bits, hash_seed=hash_seed,
                    interactions=interactions, chunk_rows=chunk_rows, on_error=on_error,
                    audit=audit, vw_numbers=vw_numbers, block_size=block_size,
                    crossed=crossed)
