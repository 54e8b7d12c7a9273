"""The input formats by name, apart from their readers: which exist, which hash their
named features, the default width of a hashed model, and `format_of`, the format of a
source by ``--format`` or its extension.

The rules about options (`onlinepgs._options`) and the command ask it without importing
a reader; `onlinepgs.formats` gives the same names with the readers.
"""
import os

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
