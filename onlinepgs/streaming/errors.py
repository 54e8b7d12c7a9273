"""The engine's errors: each carries its place in the stream as data, not only as text.

A file's place is its name and line (``train.svm:2502``); an iterable's is the number of
its record, counted from 1 (``record 17 of the stream``). Callers that word errors their
own way (the command line names its options) read the attributes; the messages are
complete sentences for everyone else. Errors of the svmlight reader
(`onlinepgs.svmlight.SvmlightError`: file, line, column) pass through as they are.
"""
import copy


def label_text(value):
    """A label as text: integral numbers without a decimal point, strings as they are."""
    try:
        value = float(value)
    except (TypeError, ValueError):  # a model trained in Python on string labels
        return str(value)
    return str(int(value)) if value.is_integer() else f"{value:.9g}"


def place(source, in_file, line=None, record=None, first=None):
    """Where something is: ``file:line``, ``record N of the stream``, or the rows from
    one (`first`) when only the call that failed is known; standard input (the source
    "-") by the name its reader's own errors give it."""
    if source == "-":
        source = "<stdin>"
    if in_file:
        if line is not None:
            return f"{source}:{line}"
        if first is not None:
            return f"{source} (rows from {first})"
        return source
    if record is not None:
        return f"record {record} of {source}"
    if first is not None:
        return f"records from {first} of {source}"
    return source


class StreamError(ValueError):
    """A problem at a place in a stream (a ValueError: bad data, not a bug).

    Attributes
    ----------
    source : str
        The file as named by the caller (``"-"``: stdin), or for an iterable
        ``"the stream"`` (``"stream 2"`` when there are several sources).
    in_file : bool
        Whether `source` is a file (then `line` names the place) or an iterable.
    line : str or None
        The line in the file: ``"2502"``, or ``"10-14 (row 2 of the 3 rows there)"`` where
        blank or comment lines lie among a chunk's rows.
    record : int or None
        The row of the source, counted from 1 (a file's data rows; an iterable's records).
    reason : str
        What is wrong, without the place.
    """

    def __init__(self, reason, *, source=None, in_file=True, line=None, record=None,
                 message=None):
        self.reason, self.source, self.in_file = reason, source, in_file
        self.line, self.record = line, record
        if message is None:
            where = self.where
            message = reason if where is None else f"{where}: {reason}"
        super().__init__(message)

    @property
    def where(self):
        """The place as text (None when the error concerns no one source)."""
        if self.source is None:
            return None
        return place(self.source, self.in_file, self.line, self.record)

    def __reduce__(self):  # pickling (e.g. across processes) keeps the attributes
        return (_rebuild, (type(self), self.args, self.__dict__))


def _rebuild(cls, args, state):
    error = cls.__new__(cls)
    ValueError.__init__(error, *args)
    error.__dict__.update(state)
    return error


class LabelError(StreamError):
    """A label outside the classes (given, the model's, or the first chunk's).

    ``label``: the label; ``classes``: the classes (an array); ``origin``: "given",
    "model" or "first chunk".
    """

    def __init__(self, label, classes, origin, **where):
        self.label, self.classes, self.origin = label, classes, origin
        shown = f"[{', '.join(label_text(c) for c in classes)}]"
        reason = f"label {label_text(label)} is not one of the classes {shown}"
        message = None
        if not where.get("in_file", True):  # the words of partial_fit's own check
            import numpy as np  # here: `onlinepgs info` imports this module, numpy-free

            value = label.item() if isinstance(label, np.generic) else label
            message = (f"label {value!r} ({place(where['source'], False, None, where['record'])})"
                       f" is not one of the classes {np.asarray(classes).tolist()}")
        super().__init__(reason, message=message, **where)


class StrayLabelError(LabelError):
    """The first chunk's labels hold -1 and +1, a binary file's, and others: a stray
    label would silently make a model of K classes. ``label`` is the first other one,
    ``classes`` all the labels seen; classes given (or the model's) make them legitimate."""

    def __init__(self, label, classes, **where):
        self.label, self.classes, self.origin = label, classes, "first chunk"
        shown = ",".join(label_text(c) for c in classes)
        StreamError.__init__(
            self, f"label {label_text(label)} beside -1 and 1, a binary file's labels: a "
            f"stray label? The classes come from the first chunk's labels; to train the "
            f"{len(classes)} classes {shown}, give them (--classes {shown}, or classes=)",
            **where)


class MissingLabelError(LabelError):
    """A training row without a label (a VW line with none, an empty label cell):
    ``label`` is NaN, ``classes`` None."""

    def __init__(self, **where):
        self.label, self.classes, self.origin = float("nan"), None, None
        StreamError.__init__(self, "no label (a line to predict?): training needs a "
                             "label on every row", **where)


class ClassesError(StreamError):
    """No classes given, none in the model, and a first chunk of one label:
    ``labels`` holds the labels seen."""

    def __init__(self, labels, **where):
        self.labels = labels
        super().__init__(f"the first chunk has one label ({list(labels)}); pass classes "
                         "(every label the stream may hold)", **where)


class LearnerError(StreamError):
    """The learner refused a call (``error``: its exception, e.g. ``ModelTooLargeError``
    or ``PGSDivergedError``). Where the error names its row (``error.row``) the place
    is exact; else `first_record` is the first row of the refused call (counted from 1)
    and `line` / `record` are None. ``records``: the call's rows as rows of the source
    (counted from 1; by default consecutive from `first_record`)."""

    def __init__(self, error, first_record, records=None, **where):
        self.error, self.first_record = error, first_record
        self.records = records
        text = str(error).splitlines()[0] if str(error) else type(error).__name__
        exact = where.get("line") is not None or where.get("record") is not None
        message = None
        if not exact:
            message = f"{place(where['source'], where['in_file'], first=first_record)}: {text}"
        super().__init__(text, message=message, **where)

    def record_of(self, row):
        """The source's row (counted from 1) of the refused call's `row` (from 0)."""
        if self.records is None:
            return self.first_record + int(row)
        return int(self.records[int(row)])

    def in_source_words(self):
        """The learner's error in the source's words: a copy of `error` (its class and
        attributes) naming each row of the call that its message names (``error.rows``,
        `onlinepgs._checks.AtRows`) by its place in the source (``record 17 of the
        stream``; a file's line for the row of `line`), its ``row`` / ``rows`` then the
        source's rows (from 0); an error naming no row, after the records of the call
        (``records from 1001 of the stream: ...``)."""
        error = self.error
        if not getattr(error, "rows", ()):
            message = f"{place(self.source, self.in_file, first=self.first_record)}: {error}"
            return with_message(error, message)
        new = with_message(error, error.worded(self._place_of_row))
        if new is not error:  # its rows are now the source's (from 0), as its words say
            new.rows = tuple(self.record_of(row) - 1 for row in error.rows)
            new.row = self.record_of(error.row) - 1
        return new

    def _place_of_row(self, row):
        record = self.record_of(row)
        if self.in_file and self.line is not None and record == self.record:
            return place(self.source, True, self.line)
        if self.in_file:
            return f"{self.source} (data row {record})"
        return place(self.source, False, record=record)


def with_message(error, message):
    """A copy of the exception `error` (its class and attributes) with another message;
    `error` itself when its class cannot be copied."""
    try:
        new = copy.copy(error)
        new.args = (message,)
    except Exception:  # a class whose constructor wants other arguments: keep the words
        return error
    return new


class OutOfMemory(StreamError):
    """The learner's memory could not be allocated for the chunk whose widest feature is
    at this place: ``column`` (from 0) and ``n_features`` (the chunk's width)."""

    def __init__(self, column, n_features, **where):
        self.column, self.n_features = column, n_features
        super().__init__(f"out of memory for a model over {n_features} features (feature "
                         f"column {column}, from 0); hashing the features bounds the width",
                         **where)


class ReadOnceError(StreamError):
    """More than one pass over a source that can be read only once (stdin, a pipe, an
    iterator): ``passes`` is the number asked for."""

    def __init__(self, passes, **where):
        self.passes = passes
        super().__init__(f"can be read only once (not a regular file, or an iterator); "
                         f"passes={passes} needs files or sequences", **where)


class ResumeError(StreamError):
    """A checkpoint that this run cannot resume. ``option`` says why: "passes" or
    "holdout_every" (a run option other than the checkpoint's run's), "files" (another
    number of sources than its run's), "pass" or "file" (a position beyond this run's
    passes or sources), "rows" (a source shorter than the position); ``saved`` is the
    checkpoint's value (the position's for "pass", "file", "rows") and ``given`` this
    run's."""

    def __init__(self, option, saved, given, reason, **where):
        self.option, self.saved, self.given = option, saved, given
        super().__init__(reason, **where)


class EmptyStreamError(StreamError):
    """The sources held no training row (and the learner was not trained before)."""
