"""``serve``: a model behind a TCP port, one answer a line (docs/design/serve.md).

A client sends examples as newline-terminated lines in the model's own format (read by
the same readers as ``predict``, with the model's hashing, interactions and columns);
the server answers each line with one line, in order: the prediction as ``predict
--kind`` writes it, or ``error: <why>``. With ``--learn`` a line with a label then
trains the model (test-then-train), one row at a time, serialized across clients.

Three parts: `LineBatch` (the lines a client sent at once, read as rows of the
model's format), `ServedModel` (the answers, the learning and the saves, under one
lock) and `Server` (the socket, one thread a client, the signals).
"""
import csv
import io
import math
import os
import signal
import socket
import sys
import threading

from onlinepgs.cli.common import (check_output, data_base, load, reading_of)
from onlinepgs.cli.errors import PROG, UserError
from onlinepgs.cli.predict import prediction_lines

# bytes taken from a client's socket at a time: the lines in them are one batch
RECV_BYTES = 1 << 17
# what a line that is not an example answers
NO_EXAMPLE = "no example on the line (a blank or comment line)"


def cmd_serve(args):
    served = ServedModel.from_args(args)
    server = Server(served, args)
    server.open()  # the options and the model were checked: now the socket
    return server.run()


class LineBatch:
    """How the lines a client sent are read: the model's format, hashing, interactions
    and columns (`onlinepgs.cli.common.reading_of`, as ``predict`` reads a file), each
    batch of lines a source in memory for the format's own reader."""

    def __init__(self, est, extra, args):
        from onlinepgs.formats import open_reader

        self._open = open_reader
        fmt, spec, columns = reading_of("-", est, extra, args.format)
        self.fmt, self.spec, self.columns = fmt, spec, columns
        self.zero_based = data_base(args, extra)
        if self.zero_based == "auto":  # a batch cannot decide for the stream
            self.zero_based = False
        self.head = b""
        if fmt in ("csv", "tsv") and (columns or {}).get("header", True) is not False:
            # the model's header, before each batch: clients send rows only
            header = (columns or {}).get("expected_columns")
            if not header:
                raise UserError(f"{args.model}: the model file records no CSV header "
                                "(its columns): serve cannot read rows for it")
            delimiter = columns.get("delimiter") or ("\t" if fmt == "tsv" else ",")
            text = io.StringIO()
            csv.writer(text, delimiter=delimiter, lineterminator="\n").writerow(header)
            self.head = text.getvalue().encode("utf-8")

    def _parse(self, data):
        """(X, y, w, rows) of the bytes `data` (complete lines); InputError or
        ValueError at a bad line."""
        data = self.head + data
        reader = self._open(io.BytesIO(data), self.fmt, chunk_rows=None,
                            spec=self.spec, zero_based=self.zero_based,
                            columns=self.columns, block_size=len(data) + 1)
        chunks = list(reader)
        if not chunks:
            return None, None, None, 0
        X, y, *rest = chunks[0]
        return X, y, (rest[0] if rest else None), reader.n_rows

    def read(self, block):
        """The rows of `block` (complete lines, bytes): a list of pieces ``(X, y, w,
        at)``, the rows of X answering the block's lines ``at`` (from 0) in order, and
        ``why``, the reason of each line that is no row ({line: text})."""
        n_lines = block.count(b"\n")
        try:
            X, y, w, n = self._parse(block)
            if n == n_lines:
                return [(X, y, w, list(range(n)))], {}
        except ValueError:
            pass
        # a bad, blank or comment line among them: each line read alone says which
        lines = [line + b"\n" for line in block.split(b"\n")[:n_lines]]
        good, why = [], {}
        for i, line in enumerate(lines):
            if line in (b"\n", b"\r\n"):  # an empty line is no row in any format
                why[i] = NO_EXAMPLE
                continue
            try:
                n = self._parse(line)[3]
            except ValueError as exc:
                why[i] = reason(exc)
                continue
            if n == 1:
                good.append(i)
            else:
                why[i] = NO_EXAMPLE
        if not good:
            return [], why
        try:
            X, y, w, n = self._parse(b"".join(lines[i] for i in good))
            if n == len(good):
                return [(X, y, w, good)], why
        except ValueError:
            pass
        # rows that read alone but not together (CSV without a header: the first row
        # sets the field count): each its own piece
        return [(*self._parse(lines[i])[:3], [i]) for i in good], why


def reason(exc):
    """A reader's error without its place in the batch: the client knows the line it
    answers (``column 6: bad feature value ...``)."""
    message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    source, line = getattr(exc, "source", None), getattr(exc, "line", None)
    prefix = f"{source}:{line}:"
    if source is not None and message.startswith(prefix):
        message = message[len(prefix):]
        column = getattr(exc, "column", None)
        if column is not None and message.startswith(f"{column}:"):
            message = f"column {column}:" + message[len(str(column)) + 1:]
    return message.strip()


def diverged_reason(exc):
    """Why a row's step diverged (PGSDivergedError's reason: what overflowed or ran away
    and what helps), without the learner's words about its model: the server undoes
    the step."""
    return getattr(exc, "reason", None) or reason(exc)


class ServedModel:
    """The model the server answers with: its predictions, and with ``learn`` its
    training row by row (test then train) and its saves, all under `lock` (one writer
    at a time, in the order the batches took the lock; predictions without ``learn``
    read the model without it: it does not change)."""

    def __init__(self, est, extra, args):
        self.est, self.kind, self.learn = est, args.kind, args.learn
        self.output, self.save_every = args.output, args.save_every
        self.lines = LineBatch(est, extra, args)
        # the model file's record, as `train -i` writes it at the end of its run
        self.extra = {key: value for key, value in extra.items() if key != "stream"}
        self.extra["finished"] = True
        self.lock = threading.Lock()
        self.learned = 0  # rows learned since the start
        self.saved_at = 0  # ... at the last save
        self.save_tried_at = 0  # ... at the last save tried (the next is due from it)
        self.closed = False  # shutting down: no more learning
        # what undoes a row that diverges (the learner as it was, and the rows since)
        self.undo = Undo(est) if self.learn else None

    @classmethod
    def from_args(cls, args):
        """The model of MODEL, checked for the options (``--kind probabilities``: the
        logistic loss; ``--learn``: a PGS model with its solver state); -o checked."""
        if not args.learn:
            est, extra = load(args.model, "serve")
        else:
            est, extra = _trainable(args.model)
            # the run option train sets too: the budget of a model the data widens
            from onlinepgs.pgs import MAX_MODEL_BYTES  # (the learner's default: train's)
            est.set_params(max_model_bytes=getattr(args, "max_model_bytes",
                                                   MAX_MODEL_BYTES))
            # predictions that run away stop a row as they stop train (then undone)
            est._runaway_fatal = True
            check_output(args.output, [])
        if args.kind == "probabilities" and not hasattr(est, "predict_proba"):
            raise UserError(f"{args.model}: probabilities need the logistic loss "
                            f"(this model's loss is {est.loss!r})")
        return cls(est, extra, args)

    def answer(self, items):
        """The answers (a list of str, one a line) to `items`, in order: blocks of
        complete lines (bytes) or, for a line refused before reading (too long), its
        reason (str)."""
        answers = []
        for item in items:
            if isinstance(item, str):
                answers.append("error: " + item)
                continue
            n_lines = item.count(b"\n")
            pieces, why = self.lines.read(item)
            if not why and len(pieces) == 1 and len(pieces[0][3]) == n_lines:
                answers += self._rows(*pieces[0][:3])  # every line a row, in order
                continue
            out = [None] * n_lines
            for j, text in why.items():
                out[j] = "error: " + text
            for X, y, w, at in pieces:
                for j, text in zip(at, self._rows(X, y, w)):
                    out[j] = text
            answers += out
        return answers

    def _rows(self, X, y, w):
        """The answers to the rows of X: their predictions (a row with a label learned
        after its answer, with ``learn``)."""
        import numpy as np

        if not self.learn:
            return self._predicted(X)
        labeled = ~np.isnan(np.asarray(y, dtype=float))
        with self.lock:
            if self.closed or not labeled.any():
                return self._predicted(X)
            out, at = [None] * X.shape[0], 0
            while at < len(out):
                at = self._pass(X, y, w, labeled, at, out)
                if at is None:  # the learner's Python takes the rows left, one by one
                    for i in range(len(out)):
                        if out[i] is None:
                            out[i:i + 1] = (self._learn_row(X, y, w, i) if labeled[i]
                                            else self._predicted(X[i:i + 1]))
                    break
            return out

    def _pass(self, X, y, w, labeled, at, out):
        """Rows at, at + 1, ... of X answered (into out) and learned in compiled code
        (`onlinepgs._core._event.test_then_train`: each row scored, then its step), the
        model installed after them as partial_fit installs it a row. Returns the row to
        go on from: the end; a save due; after a row the learner's Python took (a score
        not finite; a step the learner's checks refuse, undone). None where the learner
        or the batch is none the pass takes (a sigma race of several live runs, class
        weights, p whose powers NumPy takes, a row wider than the model, non-canonical
        rows); a race of one live run is taken up to the row of its next check, which
        the race's Python takes."""
        import numpy as np

        from onlinepgs import _runaway
        from onlinepgs._core._event import STOP_SCORE, test_then_train
        from onlinepgs.cli.predict import score_lines

        est = self.est
        batch = self._fast_batch(X, y, w, labeled, at)
        if batch is None:
            return None
        csr, n_cols, rows, learn, targets, weights, refused = batch
        for i, text in refused.items():
            out[i] = text
        if self.save_every:  # no further than the row that makes a save due
            due = self.save_every - (self.learned - self.save_tried_at)
            cut = np.flatnonzero(np.cumsum(learn) >= due)
            if len(cut):
                rows, learn = rows[:cut[0] + 1], learn[:cut[0] + 1]
        race = est.__dict__.get("_race")
        if race is not None and not race.schedule.settled:
            # a race of one live run steps it alone, as a fixed sigma steps its state, up
            # to the row of its next check (decided by the race's Python)
            room = race.schedule.check_at - race.n_rows - 1
            cut = np.flatnonzero(np.cumsum(learn) > room)
            if len(cut) and cut[0] == 0:
                i = int(rows[0])
                out[i:i + 1] = self._learn_row(X, y, w, i)
                return i + 1
            if len(cut):
                rows, learn = rows[:cut[0]], learn[:cut[0]]
        if not len(rows):
            return len(out)
        if race is not None and len(race.states) > 1:
            return self._race_rows(X, y, w, csr, n_cols, rows, learn, targets, weights,
                                   out)
        state = est._state
        check = _runaway.checked(state)
        zero = (_runaway.zero_model_losses(state, targets, est._classifier)
                if check else None)
        seen = _runaway.seen(est)
        scores = np.empty((len(rows), state.n_problems))
        done, stop, seen_then, loss_before, weight_before = test_then_train(
            state, *csr, rows, learn, n_cols, targets, weights, est._classifier,
            scores, zero, _runaway.RATIO, seen or 0.0)
        before = seen_then if check else seen  # the runaway check's memory then
        n_learned = int(np.count_nonzero(learn[:done]))
        if n_learned:
            if check:
                _runaway.remember(est, seen_then)
            self._installed(n_learned)
            self.undo.keep_pass(csr, n_cols, rows[:done], learn[:done],
                                targets[:done], weights[:done])
        for i, text in zip(rows[:done].tolist(), score_lines(est, scores[:done],
                                                               self.kind)):
            out[i] = text
        if done == len(rows) or stop == STOP_SCORE:  # the state: after rows[:done]
            self._learned(n_learned)  # (a save, a snapshot: not before)
        if done == len(rows):
            return int(rows[-1]) + 1
        i = int(rows[done])
        if stop == STOP_SCORE:  # the learner's Python answers it (the model says why)
            out[i:i + 1] = (self._learn_row(X, y, w, i) if learn[done]
                            else self._predicted(X[i:i + 1]))
            return i + 1
        # the step diverged, left the state not finite or ran away: the learner's own
        # checks of that call (`PGSLearner._after_pass`) word it, and it is undone
        _runaway.remember(est, before)
        try:
            est._after_pass(state, _one_row_csr(csr, n_cols, i), targets[done:done + 1],
                            weights[done:done + 1], np.zeros(1, dtype=np.int64),
                            est._classifier, (loss_before, weight_before),
                            columns=est.__dict__.get("_columns"))  # (csr: its slots)
        except FloatingPointError as exc:  # PGSDivergedError
            self.undo.undo(before)
            self._learned(n_learned)
            out[i] = f"error: not learned: {diverged_reason(exc)}"
            return i + 1
        # the learner's checks take it (they have the last word): learned
        self._installed(1)
        self.undo.keep_pass(csr, n_cols, rows[done:done + 1], learn[done:done + 1],
                            targets[done:done + 1], weights[done:done + 1])
        out[i] = score_lines(est, scores[done:done + 1], self.kind)[0]
        self._learned(n_learned + 1)
        return i + 1

    def _race_rows(self, X, y, w, csr, n_cols, rows, learn, targets, weights, out):
        """`_pass` while several runs of a sigma race are live (between its checks): a
        row at a time, scored by the leader, then every live run's step on it in the
        order of their ids (`SigmaRace.advance`), each with its call's checks, then the
        leader chosen again (`SigmaRace.leader`). A row that fails a run's checks is
        undone and taken by the race's Python (which drops that run, or refuses the
        row). Returns the row to go on from."""
        import numpy as np

        from onlinepgs import _runaway
        from onlinepgs._core._event import test_then_train
        from onlinepgs.cli.predict import score_lines

        est = self.est
        check = _runaway.checked(est._state)
        zero = (_runaway.zero_model_losses(est._state, targets, est._classifier)
                if check else np.zeros(len(rows)))
        test_only, step = np.zeros(1, dtype=np.uint8), np.ones(1, dtype=np.uint8)
        scores = np.empty((len(rows), est._state.n_problems))
        n_learned = 0
        for k in range(len(rows)):
            i, row = int(rows[k]), rows[k:k + 1]
            done = test_then_train(est._state, *csr, row, test_only, n_cols, targets[k:],
                                   weights[k:], est._classifier, scores[k:k + 1])[0]
            if done == 0 or not learn[k]:
                if done:
                    out[i] = score_lines(est, scores[k:k + 1], self.kind)[0]
                    continue
                self._learned(n_learned)
                out[i:i + 1] = (self._learn_row(X, y, w, i) if learn[k]
                                else self._predicted(X[i:i + 1]))
                return i + 1
            seen = _runaway.seen(est)
            for rid in sorted(est._race.states):
                done, _, seen_then = test_then_train(
                    est._race.states[rid], *csr, row, step, n_cols, targets[k:],
                    weights[k:], est._classifier, scores[k:k + 1].copy(),
                    zero[k:k + 1] if check else None, _runaway.RATIO, seen or 0.0)[:3]
                if not done:  # undone; the race's Python decides
                    self.undo.undo(seen)
                    self._learned(n_learned)
                    out[i:i + 1] = self._learn_row(X, y, w, i)
                    return i + 1
            if check:
                _runaway.remember(est, seen_then)
            self.undo.keep_pass(csr, n_cols, row, step, targets[k:k + 1],
                                weights[k:k + 1], slow=True)
            out[i] = score_lines(est, scores[k:k + 1], self.kind)[0]
            _installed(est, 1)  # the rows counted, the leader chosen again
            n_learned += 1
        self._learned(n_learned)
        return int(rows[-1]) + 1

    def _fast_batch(self, X, y, w, labeled, at):
        """The rows at, at + 1, ... of X as `test_then_train` takes them: (the batch's
        CSR arrays and its count of columns, rows, learn flags, core targets, sample
        weights, {row: answer} of the rows refused for their label), or None where the
        learner's Python must take them. A learner whose states are over the columns
        its rows reach (`onlinepgs._columns_seen`) gets the batch over its slots, its
        states grown to hold them (under the lock: its readers look columns up)."""
        import numpy as np

        from onlinepgs._checks import check_labels

        est = self.est
        d = est.__dict__
        race = d.get("_race")
        if ((race is not None and d["_state"] not in race.states.values())
                or "diverged" in d.get("_cache", {})
                or getattr(est, "class_weight", None) is not None
                or getattr(est, "class_counts_", None) is not None
                or "_saved_stats" in d or not self._cheap_powers()):
            return None
        indices = getattr(X, "indices", None)
        if (indices is None or getattr(X, "format", "csr") != "csr"
                or hasattr(X, "crossing") or indices.dtype != np.int32
                or X.shape[1] > est.n_features_in_):
            return None
        csr = (np.ascontiguousarray(X.data, dtype=np.float64),
               np.ascontiguousarray(indices), np.ascontiguousarray(X.indptr, dtype=np.int64))
        indptr, n = csr[2], X.shape[0]
        lo, hi = int(indptr[at]), int(indptr[n])
        data, cols = csr[0][lo:hi], csr[1][lo:hi]
        if not np.isfinite(data).all():
            return None
        # canonical rows (columns increasing within each row), as the readers make them
        steps = np.diff(cols) <= 0
        if steps.any():
            starts = indptr[at + 1:n] - lo - 1  # a row's first entry after another's last
            steps[starts[(starts >= 0) & (starts < len(steps))]] = False
            if steps.any():
                return None
        rows = np.arange(at, n, dtype=np.int64)
        learn = np.asarray(labeled[at:], dtype=np.uint8)
        refused = {}
        yv = np.asarray(y)
        if est._classifier:
            known = np.isin(yv[at:], est.classes_) | ~learn.astype(bool)
            if not known.all():
                for i in (at + np.flatnonzero(~known)).tolist():
                    refused[i] = self._label_refused(y[i])
                rows, learn = rows[known], learn[known]
        targets = np.zeros(len(rows))
        chosen = rows[learn.astype(bool)]
        if len(chosen):
            try:  # (a shape for the count of rows)
                targets[learn.astype(bool)] = est._encode_targets(
                    np.empty((len(chosen), 0)), yv[chosen], fit=False,
                    classes=est.classes_ if est._classifier else None)[0]
            except ValueError:  # the learner's Python words it
                return None
        weights = np.ones(len(rows)) if w is None else np.asarray(w, dtype=float)[rows]
        if not (np.isfinite(weights).all() and (weights >= 0).all()
                and np.isfinite(est._state.sum_weight + weights[learn.astype(bool)].sum())):
            return None
        n_cols, columns = X.shape[1], d.get("_columns")
        if columns is not None:
            from onlinepgs import _columns_seen

            trained = np.zeros(n, dtype=bool)
            trained[rows[learn.astype(bool)]] = True
            csr = _columns_seen.slots_of_batch(*csr, trained, columns)
            n_cols = columns.n_slots
            _columns_seen.grow_states(_states(d), columns)
        return csr, n_cols, rows, learn, np.ascontiguousarray(targets), weights, refused

    def _cheap_powers(self):
        """Whether partial_fit passes no row power sums taken by NumPy (p = 2, or a p
        whose powers the core takes: `PGSLearner._row_power_sums`)."""
        from onlinepgs._event import _one_row_matrix
        import numpy as np

        cheap = getattr(self, "_powers_cheap", None)
        if cheap is None:
            probe = _one_row_matrix(np.ones(1), np.zeros(1, dtype=np.int32), 2)
            cheap = self._powers_cheap = self.est._row_power_sums(probe) is None
        return cheap

    def _label_refused(self, label):
        from onlinepgs.streaming.errors import label_text

        classes = ", ".join(label_text(c) for c in self.est.classes_)
        return (f"error: label {label_text(label)} is not one of the model's classes "
                f"[{classes}]")

    def _installed(self, n):
        _installed(self.est, n)

    def _learned(self, n):
        self.learned += n
        if self.save_every and self.learned - self.save_tried_at >= self.save_every:
            try:
                self._save()
            except (OSError, ValueError) as exc:  # (ModelFileError: a ValueError)
                # said, not raised: the rows were learned and the clients are answered;
                # the next save is due save_every rows on (each batch would retry it)
                print(f"{PROG} serve: cannot save to {self.output} at row {self.learned:,}: "
                      f"{exc}; learning goes on, the next save after "
                      f"{self.save_every:,} more rows", file=sys.stderr, flush=True)
        self.undo.maybe_snapshot()

    def _predicted(self, X):
        try:
            return prediction_lines(self.est, X, self.kind)
        except (ValueError, FloatingPointError) as exc:  # e.g. a model that diverged
            if X.shape[0] == 1:  # (its row, "row 0" of the call, is the line answered)
                text = (exc.worded(lambda row: "this line") if hasattr(exc, "worded")
                        else reason(exc))
                return [f"error: {text}"]
        # a row's own error (a -q product that overflows) is its line's: each row alone
        return [line for i in range(X.shape[0]) for line in self._predicted(X[i:i + 1])]

    def _learn_row(self, X, y, w, i):
        """Row i's answer, then the row learned by partial_fit (under the lock); a row
        whose step diverges is undone (`Undo`)."""
        from onlinepgs import _runaway
        from onlinepgs.streaming.engine import _narrow, first_unknown_label

        est = self.est
        row = X[i:i + 1]
        answer = self._predicted(row)
        if answer[0].startswith("error: "):
            return answer
        kwargs = {}
        if est._classifier:
            if first_unknown_label(y[i:i + 1], est.classes_) is not None:
                return [self._label_refused(y[i])]
            kwargs["classes"] = est.classes_
        if w is not None:
            kwargs["sample_weight"] = w[i:i + 1]
        seen = _runaway.seen(est)
        # as wide as its own entries: a row must not widen the model beyond them
        # (the streaming engine's pieces, whose model serve's must equal)
        row = _narrow(row)
        try:
            est.partial_fit(row, y[i:i + 1], **kwargs)
        except FloatingPointError as exc:  # PGSDivergedError: the step undone
            self.undo.undo(seen)
            return [f"error: not learned: {diverged_reason(exc)}"]
        except ValueError as exc:  # refused before any step: nothing changed
            return [f"error: not learned: {reason(exc)}"]
        self.undo.keep_call(row, y[i:i + 1], kwargs)
        self._learned(1)
        return answer

    def _save(self):
        """The model to -o, atomically (under the lock: a whole update, never half)."""
        from onlinepgs.model_io import save_model

        self.save_tried_at = self.learned
        save_model(self.est, self.output, extra=self.extra)
        self.saved_at = self.learned

    def close(self):
        """After the update in progress: no more learning, the model saved to -o (a
        UserError where it cannot be: what is lost said)."""
        with self.lock:
            self.closed = True
            if self.learn and self.output is not None:
                try:
                    self._save()
                except (OSError, ValueError) as exc:
                    raise UserError(
                        f"cannot save the model to {self.output}: {exc} (the "
                        f"{self.learned - self.saved_at:,} rows learned since the last "
                        "save are not in any file)") from None


def _installed(est, n):
    """The model installed after n rows stepped in `test_then_train`, as partial_fit
    installs it after each (`PGSLearner._install`: its read-out emptied, the calls
    counted)."""
    race = est._race
    if race is not None:  # the rows counted (`SigmaRace.advance`), the leader installed
        race.n_rows += n
        if len(race.states) > 1:  # (then a row at a time: the leader may change)
            est._state = race.leader
    est._cache = {}
    est.n_iter_ = est.n_iter_ + n
    est.t_ = int(est._state.t)


def _one_row_csr(csr, n_cols, i):
    """Row i of a batch's CSR arrays (data, indices, indptr) as a one-row CSR of n_cols
    columns (error paths)."""
    import numpy as np

    from onlinepgs._csr import csr as make_csr

    data, indices, indptr = csr
    lo, hi = int(indptr[i]), int(indptr[i + 1])
    cols = indices[lo:hi]  # (slots, over the columns seen, are not in order)
    return make_csr(data[lo:hi], cols, np.array([0, hi - lo], dtype=np.int64), (1, n_cols),
                    canonical=bool((np.diff(cols) > 0).all()))


class Undo:
    """What makes a row whose step diverges leave the model as it was: the learner at
    its last snapshot, and the rows learned since, in order, as they were learned (the
    pieces of `test_then_train`, the partial_fit calls). `undo` restores the snapshot and
    learns those rows again by the same calls, so the state is, bit for bit, the one
    before that row (PGS is deterministic). A snapshot copies the learner's solver
    states, O(width); it is taken when the rows kept since the last one reach its size
    (between MIN_BYTES and MAX_BYTES of rows), so its cost spread over those rows is a
    copy of their own bytes, and an undo learns at most MAX_BYTES of rows again
    (docs/design/serve.md, "A row that diverges"). A piece kept weighs its arrays' bytes
    and PIECE_BYTES (the objects that hold them); a row learned again slowly weighs as
    many bytes as the compiled pass's rows learned again in the same time: SLOW_ROW_BYTES
    a row of a race of two live runs (a row at a time, the leader chosen in Python), and
    CALL_BYTES a partial_fit call."""

    MIN_BYTES, MAX_BYTES = 1 << 20, 64 << 20
    PIECE_BYTES, SLOW_ROW_BYTES, CALL_BYTES = 512, 8 << 10, 64 << 10

    def __init__(self, est):
        self.est = est
        self.snapshot()

    def snapshot(self):
        from onlinepgs import _runaway

        self.saved = _attributes_copy(self.est.__dict__)
        self.saved_seen = _runaway.seen(self.est)
        self.since, self.kept, self.last_batch = [], 0, None
        self.limit = min(max(_states_bytes(self.saved), self.MIN_BYTES), self.MAX_BYTES)

    def maybe_snapshot(self):
        if self.kept >= self.limit:
            self.snapshot()

    def _count(self, arrays, extra):
        if arrays[0] is not self.last_batch:  # a batch's arrays are held once
            self.last_batch = arrays[0]
            self.kept += sum(a.nbytes for a in arrays)
        self.kept += extra

    def keep_pass(self, csr, n_cols, rows, learn, targets, weights, slow=False):
        """Rows `rows` of the batch `csr` (data, indices, indptr) of n_cols columns
        tested then trained (where `learn`) by `test_then_train`; `slow`: a row of a race
        of several live runs."""
        piece = (rows.copy(), learn.copy(), targets.copy(), weights.copy())
        self.since.append(("pass", (csr, n_cols, *piece)))
        self._count(csr, sum(a.nbytes for a in piece) + self.PIECE_BYTES
                    + (self.SLOW_ROW_BYTES if slow else 0))

    def keep_call(self, X, y, kwargs):
        """A partial_fit call (its arguments)."""
        self.since.append(("call", (X, y, kwargs)))
        self._count((X.data, X.indices, X.indptr), self.CALL_BYTES)

    def undo(self, seen):
        """The learner as it was after the rows kept: the snapshot, those rows learned
        again; `seen`, the runaway check's memory then (`onlinepgs._runaway.seen`)."""
        import numpy as np

        from onlinepgs import _runaway
        from onlinepgs._core._event import test_then_train

        est = self.est
        attributes = _attributes_copy(self.saved)
        est.__dict__.update(attributes)
        for name in [n for n in est.__dict__ if n not in attributes]:
            del est.__dict__[name]
        _runaway.remember(est, self.saved_seen)
        columns = est.__dict__.get("_columns")
        if columns is not None:  # (slots given since the snapshot: the rows kept hold them)
            from onlinepgs import _columns_seen
            _columns_seen.grow_states(_states(est.__dict__), columns)
        for kind, piece in self.since:
            if kind == "call":
                X, y, kwargs = piece
                est.partial_fit(X, y, **kwargs)
                continue
            csr, n_cols, rows, learn, targets, weights = piece
            scores = np.empty((len(rows), est._state.n_problems))
            # the one state, or each live run of a race (a row at a time, then)
            race = est._race
            states = ([race.states[rid] for rid in sorted(race.states)] if race is not None
                      else [est._state])
            for state in states:
                done = test_then_train(state, *csr, rows, learn, n_cols, targets, weights,
                                       est._classifier, scores)[0]
                if done != len(rows):  # the same steps as before: they cannot differ
                    raise RuntimeError("serve: a row learned before did not learn again")
            _installed(est, int(np.count_nonzero(learn)))
        _runaway.remember(est, seen)


def _attributes_copy(attributes):
    """A learner's attributes (its __dict__), independent of it: each solver state copied
    once (`PGSState.copy`; the race's leader is one of its runs), the rest deep-copied;
    without the event path and the read-out cache (made again as needed)."""
    import copy

    kept = {k: v for k, v in attributes.items() if k not in ("_events", "_cache")}
    # a column map is shared, not copied: it only grows, and the slots it gave since a
    # snapshot stay those of the rows kept to learn again (`Undo.undo`)
    memo = {id(kept.get("_columns")): kept.get("_columns")}
    for state in _states(kept):
        memo.setdefault(id(state), state.copy())
    out = copy.deepcopy(kept, memo)
    out["_cache"] = {}
    return out


def _states(attributes):
    race = attributes.get("_race")
    states = [attributes["_state"]] if "_state" in attributes else []
    return states + (list(race.states.values()) if race is not None else [])


def _states_bytes(attributes):
    """The bytes of the solver states' arrays (what a snapshot copies)."""
    import numpy as np

    seen, total = set(), 0
    for state in _states(attributes):
        if id(state) in seen:
            continue
        seen.add(id(state))
        for name in ("block_a", "snap_a", "snapv_a"):
            array = getattr(state, name, None)
            if isinstance(array, np.ndarray):
                total += array.nbytes
    return total


def _trainable(path):
    """MODEL for ``--learn``: a PGS model with its solver state (as ``train -i``
    continues one), with the model file's extra record."""
    from onlinepgs.cli.common import check_model
    from onlinepgs.model_io import load_learner
    from onlinepgs.pgs import PGSLearner

    check_model(path)
    est, header = load_learner(path, return_header=True)
    if hasattr(est, "_saved_stats"):
        raise UserError(f"{path}: saved without its solver state (--no-state): it "
                        "predicts but cannot learn; serve it without --learn")
    if not isinstance(est, PGSLearner):
        raise UserError(f"{path}: an SDCA model: --learn continues PGS models only")
    if int(est.batch_size) != 1:
        raise UserError(f"{path}: trained with --batch-size {est.batch_size}: --learn "
                        "steps on one row at a time (each line scored, then learned)")
    return est, header.get("extra") or {}


class Server:
    """The listening socket, a thread a client, and the shutdown on SIGTERM / SIGINT."""

    def __init__(self, served, args):
        self.served = served
        self.host, self.port, self.port_file = args.host, args.port, args.port_file
        self.max_line = args.max_line_bytes
        self.max_clients = args.max_clients
        self.stop = threading.Event()
        self.clients = set()  # sockets of the clients connected
        self.clients_lock = threading.Lock()
        self.listener = None

    def open(self):
        try:
            family, kind, proto, _, address = socket.getaddrinfo(
                self.host, self.port, type=socket.SOCK_STREAM)[0]
            listener = socket.socket(family, kind, proto)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(address)
            listener.listen(128)
        except OSError as exc:
            raise UserError(f"cannot listen on {self.host}:{self.port}: "
                            f"{exc.strerror or exc}") from None
        self.listener = listener
        port = listener.getsockname()[1]
        if self.port_file is not None:
            from onlinepgs.model_io import replace_atomically

            replace_atomically(self.port_file, lambda f: f.write(f"{port}\n".encode()))
        learning = (f"learning, saved to {self.served.output}" if self.served.learn
                    and self.served.output else "learning (not saved: no -o)"
                    if self.served.learn else "predicting")
        print(f"{PROG} serve: listening on {self.host}:{port} ({learning}; "
              f"--kind {self.served.kind})", file=sys.stderr, flush=True)

    def run(self):
        """Accept clients until SIGTERM or SIGINT; then save (with --learn -o), exit 0."""
        def stop(signum, frame):
            self.stop.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        self.listener.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except (socket.timeout, InterruptedError):
                continue
            except OSError:
                if self.stop.is_set():
                    break
                continue  # e.g. too many open files: the client is dropped, not the server
            self._start(conn)
        self.listener.close()
        self.served.close()  # after the update in progress; then no more
        with self.clients_lock:
            for conn in self.clients:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        learned = self.served.learned
        print(f"{PROG} serve: stopped" + (f" ({learned} rows learned"
              + (f", saved to {self.served.output})" if self.served.output else ")")
              if self.served.learn else ""), file=sys.stderr)
        return 0

    def _start(self, conn):
        with self.clients_lock:
            full = len(self.clients) >= self.max_clients
            if not full:
                self.clients.add(conn)
        if full:
            try:
                conn.sendall(f"error: too many clients (--max-clients "
                             f"{self.max_clients})\n".encode())
            except OSError:
                pass
            conn.close()
            return
        threading.Thread(target=self._client, args=(conn,), daemon=True,
                         name="onlinepgs-serve-client").start()

    def _client(self, conn):
        try:
            self._converse(conn)
        except OSError:
            pass  # the client went away
        finally:
            with self.clients_lock:
                self.clients.discard(conn)
            conn.close()

    def _converse(self, conn):
        """Read lines, answer them, until the client closes. At most RECV_BYTES and one
        line of max_line bytes are held, and no more is read while the answers wait
        for the client to take them (sendall blocks): a client that does not read its
        answers is not read either."""
        buf = bytearray()
        skipping = False  # in a line beyond max_line, dropped up to its newline
        too_long = f"line longer than {self.max_line} bytes"
        while not self.stop.is_set():
            data = conn.recv(RECV_BYTES)
            if not data:
                return  # a partial last line is not an example: dropped
            start = len(buf)
            buf += data
            last = buf.rfind(b"\n", start)
            items = []
            if last >= 0 and not skipping and last < self.max_line:
                # no line in it can be too long: the complete lines as one block
                items.append(bytes(buf[:last + 1]))
                del buf[:last + 1]
            elif last >= 0:
                items, skipping = self._cut(buf, start, skipping, too_long)
            if skipping or len(buf) > self.max_line:
                skipping = True
                buf.clear()
            if items:
                answers = self.served.answer(items)
                conn.sendall(("\n".join(answers) + "\n").encode("utf-8"))

    def _cut(self, buf, start, skipping, too_long):
        """The complete lines of `buf` (a newline at or after `start`) as items (blocks
        of lines, and `too_long` for each line beyond max_line or ended while
        `skipping`), removed from `buf`; and whether a line is still being skipped
        (no: it ended here)."""
        items, block, begin = [], bytearray(), 0
        while True:
            end = buf.find(b"\n", start)
            if end < 0:
                break
            if skipping or end + 1 - begin > self.max_line:
                if block:
                    items.append(bytes(block))
                    block.clear()
                items.append(too_long)
                skipping = False
            else:
                block += buf[begin:end + 1]
            begin = start = end + 1
        if block:
            items.append(bytes(block))
        del buf[:begin]
        return items, skipping
