"""``predict`` (one prediction per row, to stdout or a file replaced atomically) and
``eval`` (metrics in one pass, in memory that does not grow with the rows)."""
import contextlib
import io
import os
import sys

import numpy as np

from onlinepgs.cli.common import (check_labels, check_output, data_base, load,
                                  open_reader, reader_skipped, reading_of)
from onlinepgs.cli.errors import PROG, UserError
from onlinepgs.streaming.errors import label_text


def cmd_predict(args):
    est, extra = load(args.model, "predict")
    if args.kind == "probabilities" and not hasattr(est, "predict_proba"):
        raise UserError(f"{args.model}: probabilities need the logistic loss "
                        f"(this model's loss is {est.loss!r})")
    fmt, spec, columns = reading_of(args.data, est, extra, args.format)
    if columns and fmt in ("csv", "tsv"):
        # a file to predict need not have the columns training took labels, weights from
        # or ignored (its rows are scored, not trained on)
        columns = {**columns, "absent_ok": ("label", "weight", "ignore")}
    reader = open_reader(args.data, args.chunk_rows, data_base(args, extra),
                         (fmt, spec, columns), skip=args.skip_bad_lines)
    if args.output == "-":
        _write_predictions(est, reader, args.kind, sys.stdout)
        reader_skipped(args.data, reader)
        return 0
    # a new file replaces the old only once complete, as model files do
    from onlinepgs.model_io import replace_atomically

    check_output(args.output, [args.data, args.model])

    def write(out):
        with _compressing(out, args.output) as text:
            _write_predictions(est, reader, args.kind, text)

    replace_atomically(args.output, write)
    reader_skipped(args.data, reader)
    return 0


@contextlib.contextmanager
def _compressing(out, path):
    """A text stream onto the binary file `out` that compresses as `path`'s suffix says
    (.gz, .bz2, .xz; otherwise plain text). On leaving, the compressed stream is
    finished and `out` is left open for `replace_atomically` to sync and rename."""
    raw = None
    if path.endswith(".gz"):
        import gzip

        # the name in gzip's header: the output's, not the temporary file's beside it
        raw = gzip.GzipFile(filename=os.path.basename(path)[:-3], mode="wb", fileobj=out)
    elif path.endswith(".bz2"):
        import bz2

        raw = bz2.BZ2File(out, "wb")
    elif path.endswith(".xz"):
        import lzma

        raw = lzma.LZMAFile(out, "wb")
    text = io.TextIOWrapper(out if raw is None else raw, encoding="utf-8", newline="\n")
    yield text
    text.flush()
    text.detach()  # closing the wrapper would close `out`
    if raw is not None:
        raw.close()  # the compressed stream's end; `out` itself stays open


def _write_predictions(est, reader, kind, out):
    if kind == "probabilities":
        # the columns' classes, once, before any row: a '#' line that no row can be, and
        # that np.loadtxt, pandas (comment="#") and `grep -v '^#'` skip
        out.write("# classes: " + " ".join(label_text(c) for c in est.classes_) + "\n")
    for X, *_ in reader:
        lines = prediction_lines(est, X, kind)
        if lines:
            out.write("\n".join(lines) + "\n")


def prediction_lines(est, X, kind):
    """The lines (without their newlines) that predict writes for the rows of X, one a
    row, of `kind` ("labels", "scores" or "probabilities"): also `serve`'s answers."""
    if kind == "labels":
        return _lines(est.predict(X), kind)
    if kind == "scores":
        return _lines(est.decision_function(X) if hasattr(est, "decision_function")
                      else est.predict(X), kind)
    return _lines(est.predict_proba(X), kind)


def score_lines(est, scores, kind):
    """`prediction_lines` of rows whose (rows, K) scores by `est`'s model are `scores`
    (as `decision_function`, `predict` and `predict_proba` make them of the scores:
    ``serve --learn``'s rows, scored in the pass that learns them)."""
    from onlinepgs.model import labels_from_scores, proba_from_scores

    values = scores.ravel() if scores.shape[1] == 1 else scores
    if kind == "labels":
        values = labels_from_scores(values, est.classes_ if est._classifier else None)
    elif kind == "probabilities":
        values = proba_from_scores(values, est._fitted_multi_class())
    return _lines(values, kind)


def _lines(values, kind):
    """The text of each row of `values` (labels, or numbers written ``.9g``, a space
    between a row's), in compiled code where it can (`_format.format_rows`, the text of
    Python's ``format``, the GIL released: ``serve``'s clients format in parallel)."""
    from onlinepgs._core._format import format_rows

    values = np.asarray(values)
    if not len(values):
        return []
    if kind == "labels":  # each distinct label's text once
        distinct, at = np.unique(values, return_inverse=True)
        texts = [label_text(v) for v in distinct]
        return [texts[k] for k in at.ravel().tolist()]
    text = format_rows(np.ascontiguousarray(values.reshape(len(values), -1),
                                            dtype=np.float64))
    if text is not None:
        return text.decode("ascii").split("\n")[:-1]
    # a value not finite: Python spells it ("inf", "nan")
    return [" ".join(f"{v:.9g}" for v in np.atleast_1d(row)) for row in values]


def cmd_eval(args):
    from onlinepgs._metrics import StreamMetrics
    from onlinepgs.streaming import read_ahead

    est, extra = load(args.model, "eval")
    # one pass, each chunk folded into sums (and the AUC's sorted runs) as it comes:
    # memory does not grow with the rows (onlinepgs._metrics)
    metrics = StreamMetrics(est.classes_ if est._classifier else None)
    reader = open_reader(args.data, args.chunk_rows, data_base(args, extra),
                         reading_of(args.data, est, extra, args.format),
                         skip=args.skip_bad_lines)
    weighted = False  # rows of a weight other than 1 (VW's, CSV's --weight)
    for X, y, w, line_of in read_ahead(reader):
        weighted = weighted or (w is not None and bool(np.any(w != 1.0)))
        if est._classifier:  # at its line, before the rest of the file is scored
            check_labels(y, est.classes_, args.data, line_of, what="the model's classes")
            scores = est.decision_function(X)
            _check_scores(scores, args.data, line_of)
            proba = est.predict_proba(X) if hasattr(est, "predict_proba") else None
            metrics.add_classified(y, scores, proba)
        else:
            predicted = est.predict(X)
            _check_scores(predicted, args.data, line_of)
            metrics.add_regressed(y, predicted)
    reader_skipped(args.data, reader)
    if not metrics.rows:
        raise UserError(f"{args.data}: no rows")
    result = metrics.result()
    for key, value in result.items():
        print(f"{key} = {value:.6f}" if isinstance(value, float) else f"{key} = {value}")
    if weighted:
        print(f"{PROG}: note: {args.data} gives its rows importance weights; the figures "
              "count every row once, whatever its weight", file=sys.stderr)
    if metrics.auc is not None and "auc" not in result:  # a binary model, one class here
        only = est.classes_[1 if metrics.auc.n_positive else 0]
        print(f"{PROG}: note: no auc: {args.data} holds rows of class {label_text(only)} "
              "only (the AUC ranks each class's rows against the other's)", file=sys.stderr)
    return 0


def _check_scores(scores, source, line_of):
    """A NaN score (a model with non-finite weights) has no rank, class or error."""
    nan = np.isnan(scores)
    if nan.any():
        i = int(np.argmax(nan.reshape(nan.shape[0], -1).any(axis=1)))
        raise UserError(f"{source}:{line_of(i)}: the model's score is NaN (its weights are "
                        "not finite): it cannot be evaluated")


