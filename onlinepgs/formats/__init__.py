"""The input formats of the command and the streaming engine, and how to open them.

* ``svmlight``: `onlinepgs.svmlight` (integer column indices; the default);
* ``vw``: Vowpal Wabbit's text format (`iter_vw`);
* ``csv`` / ``tsv``: logs with a header (`iter_csv`);
* ``json``: JSON lines (`iter_jsonl`).

`format_of` picks a format from ``--format`` or the file's extension (it lives with the
formats' names in `onlinepgs.formats.registry`, which imports no reader); `open_reader`
opens a source in a format, as an iterator of ``(X, y)`` (svmlight) or ``(X, y, w)``
chunks (the namespaced formats: ``w`` importance weights or None).
"""
from onlinepgs.formats.registry import DEFAULT_BITS, FORMATS, HASHED, format_of

__all__ = ["FORMATS", "HASHED", "DEFAULT_BITS", "format_of", "open_reader", "iter_vw",
           "iter_csv", "iter_jsonl"]


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
                on_error="raise", audit=None, columns=None, block_size=1 << 20,
                crossed=False):
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
    block_size : int >= 1
        Bytes read at a time (a reader of a few lines in memory needs no more).
    crossed : bool
        Namespaced formats with interactions only: chunks of
        `onlinepgs.features.CrossedRows`, which a PGS learner crosses in its pass.

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
                             on_error=on_error, block_size=block_size)
    if spec is None:
        from onlinepgs.features import FeatureSpec

        spec = FeatureSpec(DEFAULT_BITS)
    hashing = {"n_bits": spec.n_bits, "hash_seed": spec.hash_seed,
               "interactions": tuple(spec.interactions), "chunk_rows": chunk_rows,
               "on_error": on_error, "audit": audit, "block_size": block_size,
               "crossed": crossed}
    if fmt == "vw":
        return iter_vw(source, **hashing, **(columns or {}))
    if fmt == "json":
        return iter_jsonl(source, **hashing)
    roles = dict(columns or {})
    roles.setdefault("delimiter", "\t" if fmt == "tsv" else ",")
    return iter_csv(source, **roles, **hashing)
