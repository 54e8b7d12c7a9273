"""The source of a dask bag of svmlight lines: partition i is bag partition i, parsed
in one go; errors name the bag partition and its line."""
import io

import dask
import numpy as np

from onlinepgs.distributed.blocks import finish_block
from onlinepgs.distributed.sources.text import (decide_zero_based, relocated, row_line,
                                                text_width)
from onlinepgs.svmlight import SvmlightError, load_svmlight

__all__ = ["BagSource"]


class BagSource:
    """Partition i is partition i of a bag of svmlight lines, parsed in one go."""

    one_block_per_partition = True
    read_in_place = False  # read by tasks of their own (see ArraySource)
    rows_held = False  # parsed: a read makes its rows

    def __init__(self, bag, est, options, backend):
        self.parts = bag.to_delayed()
        self.n_partitions = len(self.parts)
        self.n_rows = None
        self.backend = backend
        self.n_features = options.n_features
        self.width = text_width(est, self.n_features)
        zero_based = options.zero_based
        if zero_based == "auto":
            zero_based = self._zero_based_of_first_rows(backend)
        self.zero_based = zero_based
        self.spec = None

    def _zero_based_of_first_rows(self, backend):
        """zero_based="auto" from the first partition that has rows (a filter may have
        emptied the first ones, which would then decide one-based from nothing): from
        the first partition, then the next 2, 4, ... at a time."""
        start, count = 0, 1
        while start < self.n_partitions:
            found = backend.compute_all([dask.delayed(_bag_decide, pure=False)(p)
                                         for p in self.parts[start:start + count]])
            decided = next((d for d in found if d is not None), None)
            if decided is not None:
                return decided
            start, count = start + count, 2 * count
        return False  # no rows at all (the fit says so)

    def known_meta(self, part):
        return None  # known once the partition is read

    def find_classes(self):
        labels = self.backend.compute_all([
            dask.delayed(_bag_labels, pure=False)(p, self.zero_based, self.n_features, i)
            for i, p in enumerate(self.parts)])
        return np.unique(np.concatenate(labels)) if labels else np.zeros(0)

    def first_block(self, backend, part):
        return backend.start(dask.delayed(_bag_block, pure=False)(
            self.spec, self.parts[part], self.zero_based, self.n_features, part))

    def next_block(self, backend, handle):  # pragma: no cover - one block per partition
        raise AssertionError("a bag partition is one block")

    def close(self):
        pass


def _lines_bytes(lines):
    """The lines of a bag partition as one text. Joined with newlines (a line that
    already ends with one then adds a blank line, which the parser skips)."""
    lines = list(lines)
    if not lines:
        return b"", lines
    if isinstance(lines[0], bytes):
        return b"\n".join(lines), lines
    if not isinstance(lines[0], str):
        raise TypeError(f"a bag of svmlight lines must hold str or bytes, got "
                        f"{type(lines[0]).__name__}")
    return "\n".join(lines).encode("utf-8"), lines


def _bag_line(lines, parsed_line):
    """The line of a bag partition holding line `parsed_line` of `_lines_bytes`' text."""
    at = 0
    for i, line in enumerate(lines):
        at += 1 + (line.count("\n") if isinstance(line, str) else line.count(b"\n"))
        if at >= parsed_line:
            return i + 1
    return len(lines)


def _bag_parse(lines, zero_based, n_features, part):
    data, lines = _lines_bytes(lines)
    name = f"bag partition {part}"
    try:
        return load_svmlight(io.BytesIO(data), n_features=n_features,
                             zero_based=zero_based)
    except SvmlightError as exc:
        raise relocated(exc, name, _bag_line(lines, exc.line)) from None


def _bag_decide(lines):
    data, _ = _lines_bytes(lines)
    return decide_zero_based(io.BytesIO(data), undecided=None)


def _bag_labels(lines, zero_based, n_features, part):
    return np.unique(_bag_parse(lines, zero_based, n_features, part)[1])


def _bag_block(spec, lines, zero_based, n_features, part):
    lines = list(lines)  # a partition may be an iterator: read again for messages
    X, y = _bag_parse(lines, zero_based, n_features, part)

    def where(row):  # called for messages only
        data, kept = _lines_bytes(lines)
        return f"bag partition {part}:{_bag_line(kept, row_line(data, row))}"
    return finish_block(spec, X, y, None, part, 0, where)
