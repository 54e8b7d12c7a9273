"""The input formats of the command and the streaming engine, and how to open them.

* ``svmlight``: `onlinepgs.svmlight` (integer column indices; the default);
* ``vw``: Vowpal Wabbit's text format (`iter_vw`);
* ``csv`` / ``tsv``: logs with a header (`iter_csv`);
* ``json``: JSON lines (`iter_jsonl`).

`format_of` picks a format from ``--format`` or the file's extension; `open_reader`
opens a source in a format, as an iterator of ``(X, y)`` (svmlight) or ``(X, y, w)``
chunks (the namespaced formats: ``w`` importance weights or None).
"""
import os

__all__ = ["FORMATS", "HASHED", "DEFAULT_BITS", "format_of", "open_reader", "iter_vw",
           "iter_csv", "iter_jsonl"]

FORMATS = ("svmlight", "vw", "csv", "tsv", "json")
HASHED = ("vw", "csv", "tsv", "json")  # formats of named features: always hashed
DEFAULT_BITS = 18  # columns 2**18 for a hashed format when --bits is not given (VW's)
_EXTENSIONS = {".vw": "vw", ".csv": "csv", ".tsv": "tsv", ".json": "json",
               ".jsonl": "json", ".ndjson": "json"}
_COMPRESSED = (".gz", ".bz2", ".xz")


def format_of(path, given=None):
    """The format of a source: `given` (``--format``) if any, else by the extension
    (``.vw``; ``.csv``; ``.tsv``; ``.json``, ``.jsonl``, ``.ndjson``; a ``.gz``,
    ``.bz2`` or ``.xz`` suffix is looked through), else svmlight (stdin too).

    Examples
    --------
    >>> from onlinepgs.formats import format_of
    >>> format_of("clicks.vw.gz"), format_of("log.TSV"), format_of("a9a.svm")
    ('vw', 'tsv', 'svmlight')
    >>> format_of("-"), format_of("-", "vw")
    ('svmlight', 'vw')
    """
    if given is not None:
        if given not in FORMATS:
            raise ValueError(f"unknown format {given!r}: one of {', '.join(FORMATS)}")
        return given
    if not isinstance(path, (str, os.PathLike)) or os.fspath(path) == "-":
        return "svmlight"
    name = os.path.basename(os.fspath(path)).lower()
    stem, ext = os.path.splitext(name)
    if ext in _COMPRESSED:
        ext = os.path.splitext(stem)[1]
    return _EXTENSIONS.get(ext, "svmlight")


def iter_vw(source, **options):
    """Read VW text as ``(X, y, w)`` chunks: see `onlinepgs.formats.vw.iter_vw`."""
    from onlinepgs.formats.vw import iter_vw as read

    return read(source, **options)


def iter_csv(source, **options):
    """Read a CSV/TSV log as ``(X, y, w)`` chunks: `onlinepgs.formats.csv.iter_csv`."""
    return _module("csv", "csv").iter_csv(source, **options)


def iter_jsonl(source, **options):
    """Read JSON lines as ``(X, y, w)`` chunks: `onlinepgs.formats.jsonl.iter_jsonl`."""
    return _module("jsonl", "json").iter_jsonl(source, **options)


def _module(name, fmt):
    import importlib

    try:
        return importlib.import_module(f"onlinepgs.formats.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"onlinepgs.formats.{name}":
            raise
        raise ValueError(f"the {fmt} input format is not available in this build") from None


def open_reader(source, fmt, *, chunk_rows=10_000, spec=None, zero_based="auto",
                on_error="raise", audit=None, columns=None):
    """A reader of `source` in format `fmt`.

    Parameters
    ----------
    source : str, os.PathLike, "-" or binary file object
    fmt : {"svmlight", "vw", "csv", "tsv", "json"}
    chunk_rows : int or None
    spec : onlinepgs.features.FeatureSpec or None
        Hashing of the namespaced formats (None: ``2**18`` columns, seed 0, no
        interactions); svmlight's columns are its indices (a learner's ``n_bits``
        folds them).
    zero_based : bool or "auto"
        svmlight only.
    on_error : {"raise", "skip"}
    audit : feature-name collector or None
        Namespaced formats only.
    columns : dict or None
        The format's own options: CSV/TSV column roles (``label``, ``weight``,
        ``categorical``, ``numeric``, ``ignore``, ``delimiter``, ...); VW text's
        ``vw_numbers`` (see `iter_vw`).

    Returns
    -------
    reader
        An iterator of ``(X, y)`` (svmlight) or ``(X, y, w)`` chunks, with the
        counters ``n_lines``, ``n_rows``, ``n_skipped``, ``bytes_read`` and the
        attribute ``zero_based``.
    """
    fmt = format_of(source, fmt)
    if fmt == "svmlight":
        from onlinepgs.svmlight import iter_svmlight

        return iter_svmlight(source, chunk_rows=chunk_rows, zero_based=zero_based,
                             on_error=on_error)
    if spec is None:
        from onlinepgs.features import FeatureSpec

        spec = FeatureSpec(DEFAULT_BITS)
    hashing = {"n_bits": spec.n_bits, "hash_seed": spec.hash_seed,
               "interactions": tuple(spec.interactions), "chunk_rows": chunk_rows,
               "on_error": on_error, "audit": audit}
    if fmt == "vw":
        return iter_vw(source, **hashing, **(columns or {}))
    if fmt == "json":
        return iter_jsonl(source, **hashing)
    roles = dict(columns or {})
    roles.setdefault("delimiter", "\t" if fmt == "tsv" else ",")
    return iter_csv(source, **roles, **hashing)
