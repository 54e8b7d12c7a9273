"""Evaluation metrics over a stream of chunks, in memory bounded whatever its length.

`onlinepgs eval` used to keep every label, score and probability until the end (about
420 bytes a row: 1 GB of memory for a 1 GB file); here each chunk is folded into sums
as it comes. Accuracy, log loss, RMSE and MAE are sums. The ROC AUC needs the scores in
order: it is computed exactly, as the Mann-Whitney statistic with ties counted half,
from sorted runs of at most `RUN_ROWS` scores spilled to temporary files and merged
(an external sort), so memory stays below a constant (about 60 MB; see `ExactAUC`)
and the answer is that of ``sklearn.metrics.roc_auc_score`` on all rows at once.
"""
import tempfile

import numpy as np

__all__ = ["ExactAUC", "StreamMetrics"]

# one distinct score of a sorted run, with how many positive and negative rows have it
_RUN_DTYPE = np.dtype([("score", "<f8"), ("pos", "<i8"), ("neg", "<i8")])


def _grouped(scores, pos, neg):
    """Entries sorted by score, equal scores made one entry (their counts added)."""
    order = np.argsort(scores, kind="stable")
    scores = scores[order]
    # -0.0 == 0.0: one score, as for roc_auc_score
    starts = np.flatnonzero(np.concatenate(([True], scores[1:] != scores[:-1])))
    run = np.empty(starts.shape[0], dtype=_RUN_DTYPE)
    run["score"] = scores[starts]
    run["pos"] = np.add.reduceat(pos[order], starts) if starts.size else 0
    run["neg"] = np.add.reduceat(neg[order], starts) if starts.size else 0
    return run


class _Run:
    """A run: distinct scores in increasing order with their counts, in a temporary
    file (deleted when closed or collected) or, for the last one, in memory."""

    def __init__(self, blocks=None, array=None):
        self.array, self.file, self.n = array, None, 0
        if array is not None:
            self.n = array.shape[0]
            return
        self.file = tempfile.TemporaryFile(prefix="onlinepgs-auc-")
        for block in blocks:
            self.file.write(block.tobytes())
            self.n += block.shape[0]

    def blocks(self, size):
        if self.array is not None:
            for start in range(0, self.n, size):
                yield self.array[start:start + size]
            return
        self.file.seek(0)
        left = self.n
        while left:
            count = min(size, left)
            data = self.file.read(count * _RUN_DTYPE.itemsize)
            if len(data) != count * _RUN_DTYPE.itemsize:  # the disk lost part of it
                raise OSError(f"temporary file of the AUC's sort: read {len(data)} bytes "
                              f"where {count * _RUN_DTYPE.itemsize} were written")
            yield np.frombuffer(data, dtype=_RUN_DTYPE)
            left -= count

    def close(self):
        if self.file is not None:
            self.file.close()


def _merged(runs, block_rows):
    """The runs' entries merged into one increasing sequence of distinct scores, as
    blocks of at most len(runs) * block_rows entries.

    Each run holds one block in memory. Every score up to the smallest last score
    among the blocks of runs not yet fully read is final (a run's later scores are
    larger than its block's, its scores being distinct), so those entries are taken
    from every block, grouped and given out; the run whose block ended there reads
    its next block.
    """
    readers = []
    for run in runs:
        blocks = run.blocks(block_rows)
        first = next(blocks, None)
        if first is not None:
            readers.append([first, blocks, run.n - first.shape[0]])  # block, rest, unread
    while readers:
        unread_lasts = [block["score"][-1] for block, _, unread in readers if unread]
        parts = []
        for reader in readers:
            block = reader[0]
            k = (np.searchsorted(block["score"], min(unread_lasts), side="right")
                 if unread_lasts else block.shape[0])
            parts.append(block[:k])
            reader[0] = block[k:]
        taken = np.concatenate(parts)
        if taken.shape[0]:
            yield _grouped(taken["score"], taken["pos"], taken["neg"])
        for reader in readers:
            if reader[0].shape[0] == 0 and reader[2]:
                reader[0] = next(reader[1])
                reader[2] -= reader[0].shape[0]
        readers = [reader for reader in readers if reader[0].shape[0]]


class ExactAUC:
    """ROC AUC of a stream of (score, is_positive) pairs, exact, in bounded memory.

    The AUC is ``(sum over positive rows of #negatives scored lower + #equal / 2) /
    (#positives #negatives)`` (what ``sklearn.metrics.roc_auc_score`` computes), from
    integer counts, so the only rounding is the final division. Scores are gathered
    until `RUN_ROWS` of them, then sorted, equal scores merged into one entry, and
    written as a run (24 bytes a distinct score) to a temporary file in the usual
    temporary directory (``TMPDIR``). When `FAN_IN` runs of one size exist they are
    merged into one (so there are at most ``FAN_IN - 1`` per size, and
    log_FAN_IN(rows / RUN_ROWS) sizes); at the end all runs are merged, reading
    `BLOCK_ROWS` entries of each at a time. Memory: the gathered scores and their sort
    (about 40 bytes x RUN_ROWS = 42 MB) or one merge (about 60 bytes x FAN_IN x
    BLOCK_ROWS = 32 MB), whatever the number of rows; disk: at most 24 bytes a row.
    """

    RUN_ROWS = 1 << 20
    FAN_IN = 16
    BLOCK_ROWS = 1 << 15

    def __init__(self):
        self._scores, self._positive, self._held = [], [], 0
        self._sizes = []  # _sizes[k]: the runs made of FAN_IN**k spills
        self.n_positive = self.n_negative = 0

    def add(self, scores, positive):
        """Scores (float, no NaN) and whether each row is of the positive class."""
        scores = np.asarray(scores, dtype=np.float64).ravel()
        positive = np.asarray(positive, dtype=bool).ravel()
        n_pos = int(np.count_nonzero(positive))
        self.n_positive += n_pos
        self.n_negative += positive.shape[0] - n_pos
        start = 0
        while start < scores.shape[0]:  # no run longer than RUN_ROWS, whatever the chunk
            take = min(self.RUN_ROWS - self._held, scores.shape[0] - start)
            self._scores.append(scores[start:start + take].copy())
            self._positive.append(positive[start:start + take].copy())
            self._held += take
            start += take
            if self._held == self.RUN_ROWS:
                self._add_run(0, _Run([self._held_run()]))

    def _held_run(self):
        positive = np.concatenate(self._positive).astype(np.int64)
        run = _grouped(np.concatenate(self._scores), positive, 1 - positive)
        self._scores, self._positive, self._held = [], [], 0
        return run

    def _add_run(self, size, run):
        if size == len(self._sizes):
            self._sizes.append([])
        self._sizes[size].append(run)
        if len(self._sizes[size]) == self.FAN_IN:
            runs, self._sizes[size] = self._sizes[size], []
            self._add_run(size + 1, self._merge(runs))

    def _merge(self, runs):
        try:
            return _Run(_merged(runs, self.BLOCK_ROWS))
        finally:
            for run in runs:
                run.close()

    def result(self):
        """The AUC, or None when the stream lacks positive or negative rows."""
        runs = [run for size in self._sizes for run in size]  # smallest first
        self._sizes = []
        if self._held:
            runs.append(_Run(array=self._held_run()))
        try:
            while len(runs) > self.FAN_IN:
                runs = [self._merge(runs[:self.FAN_IN])] + runs[self.FAN_IN:]
            if not (self.n_positive and self.n_negative):
                return None
            twice_wins, negatives_below = 0, 0  # integers: exact at any count
            for block in _merged(runs, self.BLOCK_ROWS):
                neg = block["neg"]
                below = negatives_below + np.cumsum(neg) - neg
                # sum over positives of 2 #lower + #equal, per block in int64 (< 2^63
                # for up to 4e9 rows), then summed as a Python int
                twice_wins += int(np.sum(block["pos"] * (2 * below + neg)))
                negatives_below += int(neg.sum())
            return twice_wins / (2 * self.n_positive * self.n_negative)
        finally:
            for run in runs:
                run.close()


class StreamMetrics:
    """`onlinepgs eval`'s metrics, fed one chunk at a time.

    Classifier: accuracy, the AUC (binary models, when both classes occur; exact, see
    `ExactAUC`) and, when probabilities are given, the log loss as
    ``sklearn.metrics.log_loss`` computes it (the true class's probability clipped to
    [eps, 1 - eps]). Regressor: RMSE and MAE. Each is the metric on all rows at once,
    up to the rounding of sums taken chunk by chunk.
    """

    def __init__(self, classes=None):
        self.classes = None if classes is None else np.asarray(classes)
        self.rows = 0
        self.correct = 0
        self.sum_log_loss = 0.0
        self.has_proba = False
        self.sum_squared = self.sum_absolute = 0.0
        binary = self.classes is not None and self.classes.shape[0] == 2
        self.auc = ExactAUC() if binary else None

    def add_classified(self, y, scores, proba=None):
        """Labels y (among the classes), scores (rows,) for two classes or (rows, K),
        and the class probabilities (rows, K) if the model gives them."""
        scores = np.asarray(scores, dtype=np.float64)
        if scores.ndim == 1:
            predicted = (scores > 0).astype(np.intp)
            if self.auc is not None:
                self.auc.add(scores, y == self.classes[1])
        else:
            predicted = np.argmax(scores, axis=1)
        truth = np.searchsorted(self.classes, y)
        self.correct += int(np.count_nonzero(predicted == truth))
        if proba is not None:
            self.has_proba = True
            p = np.asarray(proba, dtype=np.float64)[np.arange(truth.shape[0]), truth]
            eps = np.finfo(np.float64).eps
            self.sum_log_loss += float(-np.sum(np.log(np.clip(p, eps, 1 - eps))))
        self.rows += truth.shape[0]

    def add_regressed(self, y, predicted):
        error = np.asarray(predicted, dtype=np.float64) - np.asarray(y, dtype=np.float64)
        self.sum_squared += float(np.sum(error * error))
        self.sum_absolute += float(np.sum(np.abs(error)))
        self.rows += error.shape[0]

    def result(self):
        """{"rows", then "auc", "accuracy", "log_loss" or "rmse", "mae"}; floats."""
        result = {"rows": self.rows}
        if self.classes is not None:
            auc = self.auc.result() if self.auc is not None else None
            if auc is not None:
                result["auc"] = auc
            result["accuracy"] = self.correct / self.rows
            if self.has_proba:
                result["log_loss"] = self.sum_log_loss / self.rows
        else:
            result["rmse"] = float(np.sqrt(self.sum_squared / self.rows))
            result["mae"] = self.sum_absolute / self.rows
        return result
