"""The streaming engine: passes, hold-out, exact resume and progress.

`StreamPasses` drives a learner through ``partial_fit`` calls over sources
(`onlinepgs.streaming.sources`). The model it ends with is, bit for bit, that of
``partial_fit`` on the training rows of each pass in one call: rows short of a whole
mini-batch wait for the next chunk (`_Batcher`), so neither the chunking, nor the
held-out rows between training rows, nor where a run was interrupted and resumed,
changes it.

It writes no file: `onlinepgs.streaming.trainer.StreamTrainer` is these passes with
checkpoints (model files, `onlinepgs.model_io`), and a learner's ``fit_stream`` runs the
passes alone, so that the learners, the engine and the model files import one another in
one direction only.

The learner is duck-typed (no scikit-learn here): ``partial_fit(X, y[, classes])``,
``batch_size``, ``_classifier``, ``classes_`` once trained, ``online_stats_``,
``decision_function`` (classifiers) / ``predict``, ``loss`` and ``epsilon``.
"""
import math
from typing import Any, NamedTuple

import numpy as np

from onlinepgs._checks import check_labels, row_of_entry, unique
from onlinepgs._options import check_stream_run
from onlinepgs.streaming._batches import whole_batches
from onlinepgs.streaming.checkpoints import (RUN_OPTIONS, checkpoint_extra,
                                             check_resume)
from onlinepgs.streaming.errors import (ClassesError, EmptyStreamError, LabelError,
                                        LearnerError, MissingLabelError, OutOfMemory,
                                        ResumeError, StrayLabelError, StreamError)
from onlinepgs.streaming.sources import check_passes, make_sources


class Progress(NamedTuple):
    """What a progress callback receives.

    ``kind`` is "row" (an example reported at the counts of `next_report`: ``stats`` is
    the learner's ``online_stats_`` after its mini-batch, ``label``, ``prediction`` (the
    solver's score of the row before its update) and ``n_features`` (the row's non-zero
    entries) describe it), "chunk" (after each chunk read), "source" (a source read
    to its end; ``n_skipped`` lines the reader skipped, ``first_skipped`` the first's
    error, its place and reason, as text) or "classes" (a classifier's
    classes taken from the first chunk's labels, none being given or in the model:
    ``classes``, before that chunk is trained). Every event has ``rows`` (rows
    read by this run), ``bytes_read`` and ``bytes_total`` (None unless every source is
    a regular file) over all passes, the 0-based ``pass_index`` and the ``source``'s name.
    """

    kind: str
    rows: int
    bytes_read: int
    bytes_total: Any
    pass_index: int
    source: str
    stats: Any = None
    label: Any = None
    prediction: Any = None
    n_features: Any = None
    n_skipped: int = 0
    classes: Any = None
    first_skipped: Any = None


class StreamResult(NamedTuple):
    """What a run returns (`train_stream`): the trained ``learner``; ``rows`` read by this run;
    the held-out loss sum and rows of the last pass (``holdout_sum``,
    ``holdout_rows``; see `holdout_loss`); the feature base the files were read with
    (``zero_based``: True, False, or "auto"/None where no file decided it); and the
    number of ``checkpoints`` written."""

    learner: Any
    rows: int
    holdout_sum: float
    holdout_rows: int
    zero_based: Any
    checkpoints: int

    @property
    def holdout_loss(self):
        """The average loss of the held-out rows of the last pass (NaN without any)."""
        return self.holdout_sum / self.holdout_rows if self.holdout_rows else math.nan


def next_power_of_two(n):
    """The first example count after `n` that is reported: 1, 2, 4, 8, ..."""
    return 1 << int(n).bit_length()


def _record(rows, i):
    """The source's row, counted from 1 (a record's number), of row `i` (from 0) of a
    call: `rows` are the call's rows in the source (from 0), or the first one's."""
    if isinstance(rows, (int, np.integer)):
        return int(rows) + int(i) + 1
    return int(rows[i]) + 1


def _n_rows(X):
    return X.shape[0] if hasattr(X, "shape") else len(X)


def _take(X, rows):
    """Rows of a chunk (CSR, dense, or a list of records or labels): a slice or indices."""
    if isinstance(X, list):
        return X[rows] if isinstance(rows, slice) else [X[i] for i in rows]
    if hasattr(X, "iloc"):  # a pandas chunk: X[...] would select columns
        return X.iloc[rows]
    return X[rows]


def _narrow(X):
    """A piece of a sparse chunk as wide as its own entries need: the chunk's width is
    its widest row's, and a piece without that row must not widen the model (the budget
    of max_model_bytes would refuse it with no row to name). Other kinds as they are."""
    indices = getattr(X, "indices", None)
    if indices is None or getattr(X, "format", "csr") != "csr":
        return X
    width = int(indices.max()) + 1 if X.nnz else 1
    if width >= X.shape[1]:
        return X
    from onlinepgs._csr import like

    return like(X, X.data, X.indices, X.indptr, (X.shape[0], width))


def _join(A, B):
    """The rows of A, then those of B (a later sparse chunk may have more columns)."""
    if isinstance(A, list):
        return A + list(B)
    if hasattr(A, "stacked"):  # namespaced rows crossed in the pass (features.CrossedRows)
        return A.stacked(B)
    if hasattr(A, "tocsr"):
        from onlinepgs._csr import vstack

        return vstack([A, B])
    return np.concatenate([A, B])


def _join_weights(a, n_a, b, n_b):
    """The sample weights of rows (n_a rows weighted a) then (n_b rows weighted b),
    None standing for all 1: None if both are."""
    if a is None and b is None:
        return None
    return np.concatenate([np.ones(n_a) if a is None else np.asarray(a, float),
                           np.ones(n_b) if b is None else np.asarray(b, float)])


def _check_present(y, source, where, first_row):
    """Refuse a row without a label (NaN: a VW test line, a CSV row with its label
    empty), naming its line: training needs every label."""
    if isinstance(y, np.ndarray) and y.dtype.kind == "f":
        missing = np.flatnonzero(np.isnan(y))
        if missing.shape[0]:
            i = int(missing[0])
            raise MissingLabelError(source=source.name, in_file=source.in_file,
                                    line=where(i), record=_record(first_row, i))


def widen(X, width):
    from onlinepgs._csr import widen as _widen  # the kind of X kept: CSR or scipy

    return _widen(X, width)


def _row_nnz(X, i):
    if isinstance(X, list):
        return len(X[i])
    row = X[i]
    return int(row.nnz) if hasattr(row, "nnz") else int(np.count_nonzero(row))


def _trained(learner):
    """Whether the learner holds a model (``online_stats_`` exists only then)."""
    try:
        learner.online_stats_
    except AttributeError:  # scikit-learn's NotFittedError is one too
        return False
    return True


def _label_kind(values):
    """"number", "text" or None (labels the engine leaves to the learner, which names
    them: None, a mix of numbers and strings, objects)."""
    if isinstance(values, np.ndarray):
        kind = values.dtype.kind
    else:
        values = list(values)
        if all(isinstance(v, (int, float, np.number)) and not isinstance(v, bool)
               for v in values):
            kind = "f"
        elif all(isinstance(v, str) for v in values):
            kind = "U"
        else:
            return None
    return "number" if kind in "biuf" else "text" if kind in "US" else None


def _refuse_stray_labels(y, labels, source, where, first_row):
    """The first chunk's labels as classes: -1 and +1 (a binary file's) with others
    beside them are refused (`StrayLabelError`, at the first other label's row) rather
    than silently trained as K classes."""
    if labels.dtype.kind not in "iuf" or not (np.any(labels == -1) and np.any(labels == 1)):
        return
    if labels.shape[0] == 2:
        return
    i = int(np.flatnonzero((np.asarray(y) != -1) & (np.asarray(y) != 1))[0])
    raise StrayLabelError(y[i], labels, source=source.name, in_file=source.in_file,
                          line=where(i), record=_record(first_row, i))


def first_unknown_label(y, classes):
    """The engine's (and the command's eval) use of THE label check
    (`onlinepgs._checks.check_labels`): the index of the first label of `y` outside
    `classes`, or None; None too where the labels are of no kind the check judges (None,
    mixed types: the learner's own check names those).
    """
    if _label_kind(y) is None:
        return None
    bad = check_labels(y, classes)  # numbers are none of the strings, and vice versa
    return None if bad is None else bad[0]


class StreamPasses:
    """The streaming engine's passes over sources, writing no file (`StreamTrainer`
    writes checkpoints; see `onlinepgs.streaming.train_stream` for an example).

    Parameters
    ----------
    learner : object
        ``PGSClassifier`` / ``PGSRegressor`` or the same protocol (duck-typed).
    classes : array-like or None
        A classifier's labels. None: the model's (a trained learner), else the distinct
        labels of the first chunk (which must hold two at least: `ClassesError`).
    passes : int, default=1
        Passes over the sources: files and sequences only (`ReadOnceError` for stdin,
        pipes and iterators).
    chunk_rows : int, default=2000
        Rows read and trained at once, rounded up to whole mini-batches
        (`whole_batches`); memory holds about three chunks (the parsing thread reads
        ahead). The model does not depend on it.
    zero_based : bool or "auto", default="auto"
        Feature base of svmlight files; "auto": the checkpoint's (`resume`), else the
        first chunk of the first file decides for every file.
    holdout_every : int or None
        Hold out every N-th row of each pass (the N-th, 2N-th, ... rows of the
        sources in order): scored with the model before the rows after it are trained,
        never trained on; the same rows in every pass and after a resume.
        ``StreamResult.holdout_loss`` is the last pass's average.
    resume : Checkpoint or None
        Continue a run from this checkpoint (`read_checkpoint`): its learner must be
        `learner`; the rows before its position are skipped. The run's `passes` and
        `holdout_every` must be the checkpoint's (`ResumeError`).
    progress : callable or None
        Called with a `Progress` after each chunk and source, and for the rows at the
        example counts of `next_report` (their calls are then split at whole batches,
        which does not change the model).
    next_report : callable or None
        ``next_report(n)``: the first example count after n to report; default: the
        powers of two (Vowpal Wabbit's progress table).

    Attributes
    ----------
    zero_based : bool or "auto"
        The feature base in use (decided by the first chunk when "auto").
    """

    # checkpoints: a subclass that writes them (StreamTrainer) sets these before
    # __init__ and defines `_save(extra)`; the passes call it when one is due
    checkpoint_path = None
    checkpoint_every = None

    def __init__(self, learner, *, classes=None, passes=1, chunk_rows=2000,
                 zero_based="auto", holdout_every=None, resume=None, progress=None,
                 next_report=None):
        # the run's options by onlinepgs._options' rules (the learner's: at `run`)
        check_stream_run({"passes": passes, "chunk_rows": chunk_rows,
                          "zero_based": zero_based, "holdout_every": holdout_every,
                          "checkpoint_every": self.checkpoint_every,
                          "checkpoint_path": self.checkpoint_path, "classes": classes,
                          "loss": getattr(learner, "loss", None)})
        if zero_based == "auto" and resume is not None \
                and isinstance(resume.zero_based, bool):
            zero_based = resume.zero_based
        self.learner, self.classes = learner, classes
        self.passes, self.holdout_every = int(passes), holdout_every
        self.k = int(learner.batch_size)
        # whole mini-batches: the chunking never changes the model
        self.chunk_rows = whole_batches(chunk_rows, self.k)
        self.zero_based = zero_based
        self.resume, self.progress = resume, progress
        self.next_report = next_report or next_power_of_two
        self.last_checkpoint = None  # rows of this run at the last checkpoint written
        self.checkpoints = 0

    # ---- the run -----------------------------------------------------------------------
    def run(self, sources):
        """Train over `sources` (see `train_stream`); returns a `StreamResult`."""
        sources = make_sources(sources)
        check_passes(sources, self.passes)
        self._names = [source.name for source in sources]
        at = {"pass": 0, "file": 0, "rows": 0}
        if self.resume is not None:
            check_resume(self.resume, self._names, self.passes, self.holdout_every)
            at = self.resume.position
        learner = self.learner
        self._fitted = _trained(learner)
        check = getattr(learner, "_check_call_params", None)
        if check is not None:  # the learner's options, before any source is read
            check(not self._fitted)
        self._classes = self.classes
        self._origin = "given"
        if self._classes is None and learner._classifier and self._fitted:
            self._classes, self._origin = learner.classes_, "model"
        self._sorted_classes = None if self._classes is None else _sorted(self._classes)
        done = learner.online_stats_["n_examples"] if self._fitted else 0
        self._report_at = self.next_report(done) if self.progress else None
        # the rows the model had when the run began (a checkpoint's position checks the
        # rows its model has trained on against it)
        self._start_examples = (at["start_examples"] if "start_examples" in at
                                else done if self.resume is None else None)
        sizes = [source.size for source in sources]
        self._bytes_total = (None if None in sizes else sum(sizes) * self.passes)
        # held-out rows are every N-th row of a pass (its sources in order), the same rows
        # in every pass and after a resume; the loss kept is the last pass's
        self._holdout = list(at.get("holdout", (0.0, 0.0)))
        self._rows_seen = 0
        self._bytes_before = 0  # size of the sources (and passes) already read
        for pass_index in range(at["pass"], self.passes):
            if pass_index > at["pass"]:
                self._holdout = [0.0, 0.0]
            pass_rows = at.get("pass_rows", 0) if pass_index == at["pass"] else 0
            for file_index, source in enumerate(sources):
                if (pass_index, file_index) < (at["pass"], at["file"]):
                    continue
                skip = at["rows"] if (pass_index, file_index) == (at["pass"], at["file"]) else 0
                pass_rows += self._train_source(source, pass_index, file_index, skip,
                                                pass_rows)
                self._bytes_before += source.size or 0
                self._event("source", pass_index, source, n_skipped=source.n_skipped,
                            first_skipped=source.first_skipped)
            if pass_index == 0 and self.passes > 1:
                # sigma="auto": later passes read the rows again, whose progressive loss
                # is no held-out estimate: the race ends with the first pass, as in fit
                settle = getattr(self.learner, "_settle_race", None)
                if settle is not None:
                    settle("passes", self.passes)
        if not self._fitted:
            raise EmptyStreamError("no training rows were read",
                                   source=", ".join(self._names), in_file=sources[0].in_file)
        if self.checkpoint_path is not None:
            self._save(checkpoint_extra(self.zero_based, True))
        return StreamResult(learner, self._rows_seen, self._holdout[0],
                            int(self._holdout[1]), self.zero_based, self.checkpoints)

    def _train_source(self, source, pass_index, file_index, skip, file_row0):
        """Train on one source's rows after the first `skip`; returns its rows."""
        self._source, self._pass = source, pass_index
        batcher = _Batcher(self)
        # held rows scored after the first row still waiting in `batcher`: a checkpoint
        # resumes at that row, which scores them again
        held_rows, held_losses = np.empty(0, np.int64), np.empty(0)
        rows_in_file = 0
        for X, y, w, line_of in source.chunks(self.chunk_rows, self.zero_based):
            if self.zero_based == "auto" and isinstance(source.zero_based, bool):
                self.zero_based = source.zero_based  # the first chunk decided, for every file
            n = _n_rows(X)
            if rows_in_file + n <= skip:  # resuming: rows already consumed
                rows_in_file += n
                continue
            first = 0
            if rows_in_file < skip:  # the checkpoint fell inside this chunk
                first = skip - rows_in_file
                X, y = _take(X, slice(first, None)), _take(y, slice(first, None))
                w = None if w is None else w[first:]
                rows_in_file, n = skip, n - first

            def where(i, first=first, line_of=line_of):  # the line of X's row i, if a file
                return None if line_of is None else line_of(first + i)

            _check_present(y, source, where, rows_in_file)
            self._check_labels(y, source, where, rows_in_file)
            if self.holdout_every:
                rows, losses = self._train_with_holdout(
                    batcher, X, y, w, file_row0 + rows_in_file, where, rows_in_file)
                self._holdout[0] += float(np.sum(losses))
                self._holdout[1] += rows.shape[0]
                waiting = batcher.first_waiting()
                held_rows = np.concatenate([held_rows, rows])
                later = held_rows > (np.inf if waiting is None else waiting)
                held_rows = held_rows[later]
                held_losses = np.concatenate([held_losses, losses])[later]
            else:
                batcher.add(X, y, w, where, rows_in_file + np.arange(n))
            rows_in_file += n
            self._rows_seen += n
            self._event("chunk", pass_index, source)
            if self.checkpoint_every and (self._rows_seen - (self.last_checkpoint or 0)
                                          >= self.checkpoint_every):
                # the rows still waiting for a whole batch are not in the model yet
                waiting = batcher.first_waiting()
                position = {
                    "data": self._names, "pass": pass_index, "file": file_index,
                    "rows": rows_in_file if waiting is None else waiting,
                    "pass_rows": file_row0,
                    "holdout": [self._holdout[0] - float(np.sum(held_losses)),
                                self._holdout[1] - held_rows.shape[0]],
                    **{name: getattr(self, name) for name in RUN_OPTIONS}}
                if self._start_examples is not None:
                    position["start_examples"] = int(self._start_examples)
                self._save(checkpoint_extra(self.zero_based, False, position))
                self.last_checkpoint = self._rows_seen
        if rows_in_file < skip:
            raise ResumeError(
                "rows", skip, rows_in_file,
                f"has {rows_in_file} rows, but the checkpoint {self.resume.path} resumes "
                f"after row {skip} of it (extra.stream.rows = {skip}): not the data that "
                "run read", source=source.name, in_file=source.in_file)
        batcher.finish()
        return rows_in_file

    def _event(self, kind, pass_index, source, **fields):
        if self.progress is not None:
            self.progress(Progress(kind, self._rows_seen,
                                   self._bytes_before + source.bytes_read, self._bytes_total,
                                   pass_index, source.name, **fields))

    # ---- classes and labels ------------------------------------------------------------
    def _check_labels(self, y, source, where, first_row):
        """Class discovery (the first chunk's labels, when none are given or in the
        model) and the label check, naming the row of a label outside the classes."""
        if not self.learner._classifier:
            return
        if self._classes is None:
            try:
                labels = unique(y)
            except TypeError:  # None or a mix of types: the learner's check names it
                labels = np.asarray(y, dtype=object)
            if labels.shape[0] < 2:
                raise ClassesError(labels.tolist(), source=source.name,
                                   in_file=source.in_file)
            _refuse_stray_labels(y, labels, source, where, first_row)
            self._classes, self._origin = labels, "first chunk"
            self._sorted_classes = _sorted(labels)
            self._event("classes", self._pass, source, classes=labels)
        if self._sorted_classes is None:
            return
        i = first_unknown_label(y, self._sorted_classes)
        if i is not None:
            label = y[i]
            raise LabelError(label, self._sorted_classes, self._origin, source=source.name,
                             in_file=source.in_file, line=where(i),
                             record=_record(first_row, i))

    # ---- training ----------------------------------------------------------------------
    def _fit(self, X, y, w, where, rows):
        """One partial_fit call (w: the rows' sample weights, or None); its refusal as a
        `LearnerError` at the row it names."""
        learner = self.learner
        kwargs = {"classes": self._classes} if learner._classifier else {}
        if w is not None:  # only then: a learner without sample weights still streams
            kwargs["sample_weight"] = w
        try:
            learner.partial_fit(X, y, **kwargs)
        except MemoryError:
            raise self._out_of_memory(X, where, rows) from None
        except (ValueError, FloatingPointError) as exc:
            row = getattr(exc, "row", None)
            exact = {}
            if isinstance(row, (int, np.integer)) and 0 <= row < len(rows):
                exact = {"line": where(int(row)), "record": _record(rows, row)}
            raise LearnerError(exc, _record(rows, 0), np.asarray(rows) + 1,
                               source=self._source.name, in_file=self._source.in_file,
                               **exact) from exc
        self._fitted = True

    def _out_of_memory(self, X, where, rows):
        """Name the row whose largest feature index made the model too large to allocate."""
        if not hasattr(X, "indices") or X.nnz == 0:
            return MemoryError("out of memory")
        at = int(np.argmax(X.indices))
        row = row_of_entry(X, at)
        return OutOfMemory(int(X.indices[at]), X.shape[1], source=self._source.name,
                           in_file=self._source.in_file, line=where(row),
                           record=_record(rows, row))

    def _train_rows(self, X, y, w, where, rows):
        """partial_fit on rows (w: their sample weights, or None), split (at whole
        batches) where progress reports a row."""
        n = _n_rows(X)
        if n == 0:
            return
        k = self.k
        learner = self.learner
        done = learner.online_stats_["n_examples"] if self._fitted else 0

        def fit(a, b):
            part = X if (a, b) == (0, n) else _narrow(_take(X, slice(a, b)))
            self._fit(part, _take(y, slice(a, b)),
                      None if w is None else w[a:b], lambda i: where(a + i), rows[a:b])

        start = 0
        while start < n:
            report = self._report_at
            if report is not None and done + n - start >= report:
                # the batch holding example number `report` ends the segment
                end = min(n, start + whole_batches(report - done, k))
                stop_before = max(start, end - k)
                if stop_before > start:
                    fit(start, stop_before)
                last = end - 1
                prediction = _online_prediction(learner, _take(X, slice(last, end)),
                                                self._fitted)
                fit(stop_before, end)
                done += end - start
                self._event("row", self._pass, self._source,
                            stats=learner.online_stats_, label=y[last],
                            prediction=prediction, n_features=_row_nnz(X, last))
                self._report_at = self.next_report(done)
                start = end
            else:
                fit(start, n)
                done += n - start
                start = n

    def _train_with_holdout(self, batcher, X, y, w, rows_before, where, first_row):
        """Score every N-th row with the model before its segment, train on the others.

        A held row's loss is weighted by its sample weight (w; None: 1), as the learner
        weighs a row it trains on (the objective's mean of sample_weight * loss).

        Segments of max(1000, 8 * N) rows keep the estimate progressive without a Python
        call per row. Before any training the model is PGS's w_0 = 0, whose loss is the
        loss at margin 0. Returns the held rows (their rows in the source, from 0) and
        their losses.
        """
        every = self.holdout_every
        n = _n_rows(X)
        seg = max(1000, 8 * every)
        rows, losses = [np.empty(0, np.int64)], [np.empty(0)]
        for start in range(0, n, seg):
            stop = min(n, start + seg)
            held = (rows_before + np.arange(start, stop) + 1) % every == 0
            if held.any():
                at = start + np.flatnonzero(held)
                loss = self._held_losses(_take(X, at), _take(y, at))
                losses.append(loss if w is None else loss * w[at])
                rows.append(first_row + at)
            kept = start + np.flatnonzero(~held)
            batcher.add(_take(X, kept), _take(y, kept), None if w is None else w[kept],
                        lambda i, kept=kept: where(kept[i]), first_row + kept)
        return np.concatenate(rows), np.concatenate(losses)

    def _held_losses(self, X, y):
        """The model's loss on each held-out row (the reported iterate; before any
        training the zero model's)."""
        from onlinepgs._core import loss_value

        learner = self.learner
        y = np.asarray(y)
        if self._fitted:
            return _loss_rows(learner, X, y)
        if learner._classifier:
            # every classification loss is symmetric at margin 0: l(0; +1) = l(0; -1)
            n_problems = 1 if len(self._classes) == 2 else len(self._classes)
            multi_class = getattr(learner, "multi_class", "ovr")
            if n_problems > 1 and multi_class != "ovr":  # one loss of the K zero scores
                return np.full(y.shape[0], float(np.log(n_problems))
                               if multi_class == "multinomial" else 1.0)
            return np.full(y.shape[0], n_problems * float(loss_value(learner.loss, 0.0, 1.0)))
        return np.asarray(loss_value(learner.loss, np.zeros(y.shape[0]), y, learner.epsilon),
                          dtype=float)


def _sorted(classes):
    """The classes as a sorted array for the label check, or None where they are of no
    kind it judges."""
    kind = _label_kind(classes)
    return None if kind is None else unique(classes)


def _loss_rows(learner, X, y):
    """The model's loss on each row (the reported iterate), for the held-out estimate."""
    from onlinepgs._core import loss_value

    if learner._classifier:
        scores = learner.decision_function(X)
        classes = learner.classes_
        if scores.ndim == 1:
            signs = np.where(y == classes[1], 1.0, -1.0)
            return np.asarray(loss_value(learner.loss, scores, signs), dtype=float)
        multi_class = getattr(learner, "multi_class", "ovr")
        if multi_class != "ovr":  # the coupled loss of the K scores
            from onlinepgs._core._losses import multiclass_loss

            return multiclass_loss(multi_class, np.ascontiguousarray(scores, dtype=float),
                                   np.searchsorted(classes, y).astype(np.int64))
        signs = np.where(y[:, None] == classes[None, :], 1.0, -1.0)
        return np.asarray(loss_value(learner.loss, scores, signs), dtype=float).sum(axis=1)
    scores = learner.predict(X)
    return np.asarray(loss_value(learner.loss, scores, y, learner.epsilon), dtype=float)


def _online_prediction(learner, x, fitted):
    """The reported model's prediction for a row before its update (the iterate the
    learner reports, whose progressive loss the table shows beside it): a regressor's or
    binary classifier's raw score, a multiclass model's predicted class. PGS scores the
    row from its state at the row's coordinates (O(nnz), whatever the width)."""
    if not fitted:
        return 0.0
    score = learner.decision_function(x) if learner._classifier else learner.predict(x)
    score = np.asarray(score).ravel()
    if score.shape[0] == 1:
        return float(score[0])
    return float(learner.classes_[int(np.argmax(score))])


class _Batcher:
    """partial_fit on one source's training rows in whole mini-batches across calls.

    Rows short of a whole batch wait for the source's next rows (and are trained at its
    end), so neither the chunks nor the held-out rows between them change the model: it
    is partial_fit on the source's training rows in one call.
    """

    def __init__(self, trainer):
        self.trainer, self.k = trainer, trainer.k
        self.waiting = None  # (X, y, w, lines, rows) of fewer than k rows

    def first_waiting(self):
        """The source row (from 0) of the first row not yet trained, or None."""
        return None if self.waiting is None else int(self.waiting[4][0])

    def add(self, X, y, w, where, rows, final=False):
        """Train on the waiting rows, then these, but for the rows short of a whole batch
        unless `final`. ``w``: the rows' sample weights (None: all 1); ``where(i)`` names
        row i's line (None for an iterable); `rows` are its rows in the source, from 0."""
        if self.waiting is not None:
            Xw, yw, ww, lines, rows_w = self.waiting
            X, y = _join(Xw, X), _join(yw, y)
            w = _join_weights(ww, _n_rows(Xw), w, _n_rows(X) - _n_rows(Xw))
            rows = np.concatenate([rows_w, rows])
            where = (lambda i, inner=where, m=len(lines):
                     lines[i] if i < m else inner(i - m))
            self.waiting = None
        n = _n_rows(X)
        n_train = n if final else n - n % self.k
        if n_train < n:
            self.waiting = (_take(X, slice(n_train, n)), _take(y, slice(n_train, n)),
                            None if w is None else w[n_train:],
                            [where(i) for i in range(n_train, n)], rows[n_train:])
        if n_train == n:
            self.trainer._train_rows(X, y, w, where, rows)
        elif n_train:
            self.trainer._train_rows(_take(X, slice(0, n_train)),
                                     _take(y, slice(0, n_train)),
                                     None if w is None else w[:n_train], where,
                                     rows[:n_train])

    def finish(self):
        """Train on the rows still waiting: the source's last, short batch."""
        if self.waiting is not None:
            Xw, yw, ww, lines, rows_w = self.waiting
            self.waiting = None
            self.trainer._train_rows(Xw, yw, ww, lines.__getitem__, rows_w)
