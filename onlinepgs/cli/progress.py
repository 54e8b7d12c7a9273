"""The progress ``train`` prints on stderr: Vowpal Wabbit's table at doubling row
counts, a byte bar on terminals, and the engine's events onto both."""
import os
import sys

from onlinepgs.cli.common import class_note, print_skipped
from onlinepgs.cli.errors import PROG


# what the table's loss and prediction are of: the model the run reports (and saves)
_REPORTED = {"weighted2": "the t^2-weighted average of the iterates",
             "weighted": "the t-weighted average of the iterates",
             "average": "the average of the iterates",
             "random": "the random iterate", "last": "the last iterate"}


def reported_note(iterate):
    """The note above the table: whose progressive loss and prediction it shows."""
    return (f"{PROG}: average loss and predict: the model saved ({_REPORTED[iterate]}), "
            "each row scored before it trains")


class ProgressTable:
    """Vowpal Wabbit's progressive-validation table on stderr, at doubling row counts.

    Its loss columns are the reported model's progressive loss (``online_stats_``'s
    ``progressive_loss``: each row scored by the model the run reports, before the row
    trains), labelled by a note line above the header when ``iterate`` is given."""

    HEADER = ("average  since         example        example  current  current  current\n"
              "loss     last          counter         weight    label  predict features")

    def __init__(self, stream, enabled, iterate=None):
        self.stream = stream
        self.enabled = enabled
        self.iterate = iterate
        self.next_report = 1
        self.last_loss = 0.0
        self.last_weight = 0.0
        self.started = False
        self.bar = None  # a ByteProgress sharing the terminal, if any
        # lines printed above the header (which classes, no -o): with the table, so that
        # an error before the first trained row stays the only line printed
        self.notes = []

    def row(self, stats, label, prediction, n_features):
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.clear()  # a table row must not land on the bar's line
        if not self.started:  # lazily: an early error must be the only line printed
            whose = [] if self.iterate is None else [reported_note(self.iterate)]
            print("\n".join([*self.notes, *whose, self.HEADER]), file=self.stream, flush=True)
            self.started = True
        total, weight = stats["progressive_loss"] * stats["sum_weight"], stats["sum_weight"]
        since = ((total - self.last_loss) / (weight - self.last_weight)
                 if weight > self.last_weight else float("nan"))
        average = total / weight if weight else float("nan")
        if label is None:  # Dask rounds: no single current row
            current = f"{'-':>8} {'-':>8} {'-':>8}"
        else:
            current = f"{label:>8.4f} {prediction:>8.4f} {n_features:>8d}"
        print(f"{average:<8.6f} {since:<8.6f} {stats['n_examples']:>12d} {weight:>14.1f} "
              f"{current}", file=self.stream, flush=True)
        self.last_loss, self.last_weight = total, weight
        if self.bar is not None:
            self.bar.redraw()


class ByteProgress:
    """A one-line progress bar for terminals when the input's size is known."""

    def __init__(self, paths, passes, enabled):
        sizes = [os.path.getsize(p) for p in paths if p != "-" and os.path.isfile(p)]
        self.total = sum(sizes) * passes if len(sizes) == len(paths) else None
        self.enabled = enabled and self.total
        self.done = 0

    def update(self, done):
        self.done = done
        self.redraw()

    def redraw(self):
        if self.enabled:
            frac = min(1.0, self.done / self.total)
            bar = "#" * int(30 * frac)
            print(f"\r[{bar:<30}] {100 * frac:5.1f}%", end="", file=sys.stderr, flush=True)

    def clear(self):
        if self.enabled:
            print("\r" + " " * 40 + "\r", end="", file=sys.stderr, flush=True)

    close = clear


def show_progress(table, bar):
    """The engine's progress events onto the table (a row at doubling counts) and the
    byte bar (after each chunk)."""
    def show(event):
        if event.kind == "row":
            table.row(event.stats, float(event.label), event.prediction, event.n_features)
        elif event.kind == "chunk":
            bar.update(event.bytes_read)
        elif event.kind == "classes":  # the first chunk decided them: say so, and where
            table.notes.append(class_note(event.classes, f"the labels of the first chunk "
                                          f"of {event.source}; --classes gives them all"))
        else:
            report_skipped(event)
    return show


def report_skipped(event):
    """A source read to its end with bad lines skipped (--skip-bad-lines): how many, and
    the first's place and reason, on stderr (also with --quiet)."""
    if event.kind == "source" and event.n_skipped:
        print_skipped(event.source, event.n_skipped, event.first_skipped)


