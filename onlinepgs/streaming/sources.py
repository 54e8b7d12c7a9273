"""The sources a stream is read from, each as chunks ``(X, y, w, line_of)``.

* `FileSource`: a file in one of the input formats (`onlinepgs.formats`: svmlight, VW
  text, CSV/TSV, JSON lines; plain, .gz, .bz2, .xz), a named pipe, /dev/fd/N, or
  ``"-"`` (stdin), parsed in a background thread (`read_ahead`); ``line_of(i)`` names
  the file's line of the chunk's row i; ``w`` the rows' importance weights (None: all
  1, and always for svmlight).
* `IterableSource`: an iterable of ``(x, y)`` records (``x`` a dict ``{feature: value}``
  or a sequence of ``(feature, value)`` pairs), cut into chunks of records, or of
  ``(X, y)`` or ``(X, y, w)`` chunks (X a 2-D array or sparse matrix, w the rows'
  sample weights or None); its rows are named by number.

A source knows whether it can be read again (passes): a regular file can, stdin or a
pipe cannot, a sequence (list, tuple) can, an iterator or generator cannot.
"""
import os

from onlinepgs.streaming.errors import ReadOnceError, StreamError

_RECORD = ("expected a dict {feature: value} or a sequence of (feature, value) pairs")


def lines_of(lines_before, lines_after, n_rows):
    """Row i of a chunk -> its line in the file, as text: exact where the chunk's lines are
    all rows (no blank or comment line among them), else the lines it lies between."""
    if lines_after - lines_before == n_rows:
        return lambda i: str(lines_before + 1 + i)
    return lambda i: (f"{lines_before + 1}-{lines_after} (row {i + 1} of the {n_rows} rows "
                      "there)")


def read_ahead(reader, depth=2):
    """Iterate a reader's ``(X, y)`` or ``(X, y, w)`` chunks as (X, y, w, line_of),
    parsing the next ones in a background thread; ``line_of(i)`` names the line of the
    chunk's row i, w is None for a reader without weights.

    The parser and the solver both release the GIL, so on two cores parsing chunk i+1
    overlaps training on chunk i (Vowpal Wabbit's driver overlaps them too). Errors are
    re-raised in the caller, in order; memory holds at most ``depth`` extra chunks.
    """
    import queue
    import threading

    chunks = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def produce():
        from onlinepgs import _jobs

        try:
            # the lines before the first row (a CSV header): else the first chunk's rows
            # would span one line more than they are, and be named by a range
            lines, items = getattr(reader, "lines_before_rows", 0), iter(reader)
            while True:
                with _jobs.reading():  # a core parsing: a race's runs take one fewer
                    item = next(items, done)
                if item is done:
                    break
                X, y = item[0], item[1]
                w = item[2] if len(item) > 2 else None
                # the parser stops right after the row that fills a chunk
                chunk = (X, y, w, lines_of(lines, reader.n_lines, X.shape[0]))
                lines = reader.n_lines
                while not stop.is_set():
                    try:
                        chunks.put(chunk, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            chunks.put(done)
        except BaseException as exc:  # handed to the consumer
            chunks.put(exc)

    worker = threading.Thread(target=produce, name="onlinepgs-reader", daemon=True)
    worker.start()
    try:
        while True:
            item = chunks.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        worker.join(timeout=5)


class FileSource:
    """A data file, named pipe or ``"-"`` (stdin), checked when made: it exists and is
    no directory.

    ``fmt``: its format (`onlinepgs.formats.FORMATS`; None: by the extension, see
    `onlinepgs.formats.format_of`); ``options``: the reader's (`open_reader`: ``spec``,
    ``on_error``, ``audit``, ``columns``).
    """

    in_file = True

    def __init__(self, path, fmt=None, **options):
        from onlinepgs.formats import format_of

        self.name = os.fspath(path)
        self.fmt = format_of(self.name, fmt)
        self.options = options
        if self.name != "-":
            if os.path.isdir(self.name):
                raise StreamError("is a directory, not a data file", source=self.name)
            if not os.path.exists(self.name):
                raise StreamError("no such file", source=self.name)
        # a pipe gives its rows once: a second pass would find it empty, or block
        self.rereadable = self.name != "-" and os.path.isfile(self.name)
        self.size = os.path.getsize(self.name) if self.rereadable else None
        self.reader = None

    def chunks(self, chunk_rows, zero_based):
        """The file's chunks as (X, y, w, line_of), parsed ahead in a thread."""
        from onlinepgs.formats import open_reader

        self.reader = open_reader(self.name, self.fmt, chunk_rows=chunk_rows,
                                  zero_based=zero_based, **self.options)
        return read_ahead(self.reader)

    @property
    def bytes_read(self):
        return self.reader.bytes_read if self.reader is not None else 0

    @property
    def zero_based(self):
        """The base the reader decided on (None before its first chunk)."""
        return self.reader.zero_based if self.reader is not None else None

    @property
    def n_skipped(self):
        return getattr(self.reader, "n_skipped", 0)

    @property
    def first_skipped(self):
        """The first skipped line's error as text (its place and reason), or None."""
        first = getattr(self.reader, "first_skipped", None)
        return None if first is None else str(first)


def _is_chunk(item):
    """Whether an item of an iterable is an (X, y) or (X, y, w) chunk rather than an
    (x, y) record."""
    return (isinstance(item, tuple) and len(item) in (2, 3)
            and len(getattr(item[0], "shape", ())) == 2)


class IterableSource:
    """An iterable of ``(x, y)`` records or of ``(X, y)`` chunks (its first item decides).

    Records are checked one by one (a pair, x a record) as they come, so a bad one is
    named by its number before its chunk reaches the learner.
    """

    in_file = False
    size = None
    bytes_read = 0
    zero_based = None
    n_skipped = 0
    first_skipped = None

    def __init__(self, items, name="the stream"):
        self.items, self.name = items, name
        try:
            # a container gives a new iterator each time; an iterator gives itself
            self.rereadable = iter(items) is not items
        except TypeError:
            raise TypeError(f"a source must be a file name, '-' or an iterable of (x, y) "
                            f"records or (X, y) chunks, got {type(items).__name__}") from None

    def chunks(self, chunk_rows, zero_based):
        """Chunks as (X, y, w, None): lists of records and labels (w None), or the given
        chunks."""
        items = iter(self.items)
        first = next(items, None)
        if first is None:
            return
        if _is_chunk(first):
            yield from self._given_chunks(first, items)
        else:
            yield from self._record_chunks(first, items, chunk_rows)

    def _given_chunks(self, first, items):
        for number, chunk in enumerate(_chain(first, items), 1):
            if not _is_chunk(chunk):
                reason = (f"is {chunk!r:.80}: expected an (X, y) or (X, y, w) chunk, X 2-D, "
                          "like the first")
                raise StreamError(reason, source=self.name, in_file=False,
                                  message=f"item {number} of {self.name} {reason}")
            yield chunk[0], chunk[1], (chunk[2] if len(chunk) > 2 else None), None

    def _record_chunks(self, first, items, chunk_rows):
        xs, ys = [], []
        number = 0
        for item in _chain(first, items):
            number += 1
            try:
                x, y = item
            except (TypeError, ValueError):
                raise self._bad(number, f"is not an (x, y) pair: {item!r:.80}") from None
            if not (isinstance(x, dict) or (isinstance(x, (list, tuple)) and (
                    not x or isinstance(x[0], (list, tuple))))):
                # else the chunk would not be records: a list of numbers would be taken
                # for a dense row, anything else fail in the matrix checks, far from here
                what = "is None" if x is None else f"is {x!r:.80}"
                raise self._bad(number, f"{what}: {_RECORD}")
            xs.append(x)
            ys.append(y)
            if len(xs) == chunk_rows:
                yield xs, ys, None, None
                xs, ys = [], []
        if xs:
            yield xs, ys, None, None

    def _bad(self, number, reason):
        return StreamError(reason, source=self.name, in_file=False, record=number,
                           message=f"record {number} of {self.name} {reason}")


def _chain(first, rest):
    yield first
    yield from rest


def make_sources(sources):
    """A list of sources from what a caller gives: a file name (or ``"-"``), a list of file
    names, or one iterable of records or chunks. Files are checked here (they exist,
    are no directories), before any work."""
    if isinstance(sources, (str, bytes, os.PathLike)):
        sources = [sources]
    if isinstance(sources, (list, tuple)) and sources and all(
            isinstance(s, (str, os.PathLike, FileSource, IterableSource)) for s in sources):
        return [s if isinstance(s, (FileSource, IterableSource)) else FileSource(s)
                for s in sources]
    return [IterableSource(sources)]


def check_passes(sources, passes):
    """Refuse several passes over a source that can be read only once."""
    if passes > 1:
        for source in sources:
            if not source.rereadable:
                raise ReadOnceError(passes, source=source.name, in_file=source.in_file)
