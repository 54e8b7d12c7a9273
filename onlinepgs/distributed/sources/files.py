"""The source of svmlight files: plain files in byte ranges, compressed files whole.

Each partition is read ``block_rows`` lines at a time, one task per block, chained by
its position (`_Cursor`): a byte offset in a plain file, lines consumed in a compressed
one, whose decompressor a worker keeps between blocks (`_READERS`) and opens again, skipping
ahead, where it has none. A bad line is named by its file and line, counted in the
whole file even in a later byte range; a truncated or corrupt compressed file by the
line being read where it broke.
"""
import io
import os
import threading
import uuid

import dask
import numpy as np

from onlinepgs.compressed import DECOMPRESSION_ERRORS, Steps, compression_of, decompressing
from onlinepgs.distributed.blocks import finish_block
from onlinepgs.distributed.sources.text import (decide_zero_based, relocated, row_line,
                                                text_width)
from onlinepgs.svmlight import SvmlightError, corrupt_error, load_svmlight

__all__ = ["FileSource", "drop_readers", "read_block_text"]


_READ_SIZE = 1 << 20


class FileSource:
    """svmlight files: plain files in byte ranges, compressed files whole; each partition
    read `block_rows` lines at a time (one task per block, chained by its position)."""

    one_block_per_partition = False  # a file's partition is read block by block
    read_in_place = False  # read by tasks of their own (see ArraySource)
    rows_held = False  # parsed: a read makes its rows

    def __init__(self, paths, est, options, n_lanes, backend):
        self.backend = backend
        self.n_features = options.n_features
        self.block_rows = options.block_rows
        self.width = text_width(est, self.n_features)
        zero_based, blocksize = options.zero_based, options.blocksize
        self.parts = []  # (path, start, end, compressed, file index)
        decide = []
        for index, path in enumerate(paths):
            if not os.path.isfile(path):
                raise FileNotFoundError(f"{path}: no such file")
            # the file the driver measured and cut: a relative path resolved on each
            # worker, in its own directory, named another file there, or none
            path = os.path.abspath(path)
            size = os.path.getsize(path)
            with open(path, "rb") as f:
                head = f.read(6)
            compressed = compression_of(head) is not None
            if compressed:
                self.parts.append((path, 0, size, True, index))
            else:
                n = n_lanes if blocksize is None else -(-size // blocksize)
                n = max(1, min(n, size))
                cuts = [size * i // n for i in range(n + 1)]
                self.parts.extend((path, cuts[i], cuts[i + 1], False, index)
                                  for i in range(n))
            if zero_based == "auto":
                decide.append(dask.delayed(_file_decide, pure=False)(path))
        self.zero_based = (backend.compute_all(decide) if zero_based == "auto"
                           else [zero_based] * len(paths))
        self.n_partitions = len(self.parts)
        self.n_rows = None
        self.token = uuid.uuid4().hex
        self.spec = None

    def _task(self, part, cursor):
        path, start, end, compressed, index = self.parts[part]
        return (path, start, end, compressed, self.zero_based[index], self.n_features,
                self.block_rows, part, self.token, cursor)

    def known_meta(self, part):
        return None  # known once the partition is read

    def find_classes(self):
        labels = self.backend.compute_all([
            dask.delayed(_file_labels, pure=False)(self._task(i, None))
            for i in range(self.n_partitions)])
        return np.unique(np.concatenate(labels)) if labels else np.zeros(0)

    def first_block(self, backend, part):
        return backend.submit(_file_block, self.spec, self._task(part, None))

    def next_block(self, backend, handle):
        return backend.submit(_file_next_block, self.spec, handle)

    def close(self):
        self.backend.run_everywhere(drop_readers, self.token)


def _file_decide(path):
    return decide_zero_based(path)


class _Cursor:
    """Where a partition's next block starts: a byte offset (plain files), or lines
    consumed (compressed files, which cannot seek)."""

    __slots__ = ("task", "offset", "lines", "rows")

    def __init__(self, task, offset, lines, rows):
        self.task, self.offset, self.lines, self.rows = task, offset, lines, rows


_READERS = {}  # (token, part) -> [decompressed file, lines consumed, bytes left over]
_READERS_LOCK = threading.Lock()


def drop_readers(token):
    with _READERS_LOCK:
        for key in [k for k in _READERS if k[0] == token]:
            _READERS.pop(key)[0].close()


def _first_line_at(f, start):
    """Offset of the first line starting at or after `start`."""
    if start == 0:
        return 0
    f.seek(start - 1)
    skipped = start - 1
    while True:
        chunk = f.read(_READ_SIZE)
        if not chunk:
            return skipped
        at = chunk.find(b"\n")
        if at >= 0:
            return skipped + at + 1
        skipped += len(chunk)


def _take_lines(read, line_start, end, max_lines, leftover=b""):
    """Read whole lines that start before `end`, at most `max_lines`.

    read(n) returns the bytes after those given so far (and `leftover` first), which
    begin at `line_start`. Returns (text, lines taken, offset after them, bytes read past
    them, at the end of the data).
    """
    buf = bytearray(leftover)
    scanned = line_start  # offset just past buf
    scanned += len(buf)
    stop = line_start
    taken = 0
    eof = False
    search_from = 0
    while taken < max_lines and line_start < end:
        newlines = np.flatnonzero(np.frombuffer(memoryview(buf)[search_from:],
                                                dtype=np.uint8) == 10)
        base = scanned - len(buf) + search_from
        if newlines.size:
            ends = newlines + base  # offsets of the newlines
            starts = np.empty_like(ends)
            starts[0] = line_start
            starts[1:] = ends[:-1] + 1
            m = min(int(np.searchsorted(starts, end)), max_lines - taken)
            if m:
                stop = int(ends[m - 1]) + 1
                taken += m
                line_start = stop
            if m < ends.size:
                break
        search_from = len(buf)
        if taken >= max_lines or line_start >= end:
            break
        chunk = read(_READ_SIZE)
        if not chunk:
            eof = True
            if scanned > line_start:  # a last line without a newline
                stop = scanned
                taken += 1
                line_start = stop
            break
        buf += chunk
        scanned += len(chunk)
    first = scanned - len(buf)  # offset of buf[0]
    text = bytes(buf[:stop - first])
    rest = bytes(buf[stop - first:])
    return text, taken, stop, rest, eof and not rest


class _CompressedLines:
    """A compressed file, read in decompressor steps as the single-process reader reads
    it (`onlinepgs.compressed.Steps`): a stream that ends early or fails its check is the
    same SvmlightError, naming the file and the line being read where it broke (the
    decompressor's EOFError or OSError named neither), counted here."""

    def __init__(self, path):
        with open(path, "rb") as f:
            head = f.read(6)
        self.kind = compression_of(head) or "xz"
        self.raw = open(path, "rb")
        self.file = decompressing(self.kind, self.raw)
        self.steps = Steps(self.file)
        self.path = path
        self.newlines, self.partial = 0, False

    def read(self, size):
        buf = bytearray(size)
        try:
            with memoryview(buf) as view:
                got = self.steps.readinto(view)
        except DECOMPRESSION_ERRORS as exc:
            line = max(1, self.newlines + self.partial)
            raise corrupt_error(self.path, self.kind, line, exc) from exc
        del buf[got:]
        if got:
            self.newlines += buf.count(b"\n")
            self.partial = not buf.endswith(b"\n")
        return buf

    def close(self):
        self.file.close()
        self.raw.close()


def read_block_text(task, cursor):
    """The next block's text of a partition: (text, first line number or None, cursor)."""
    path, start, end, compressed, _, _, block_rows, part, token, _ = task
    if not compressed:
        with open(path, "rb") as f:
            offset = _first_line_at(f, start) if cursor is None else cursor.offset
            f.seek(offset)
            text, _, stop, _, eof = _take_lines(f.read, offset, end, block_rows)
            size = os.fstat(f.fileno()).st_size
        done = eof or stop >= end or stop >= size
        rows = 0 if cursor is None else cursor.rows
        return text, offset, None, None if done else _Cursor(task, stop, None, rows)
    key = (token, part)
    lines_done = 0 if cursor is None else cursor.lines
    with _READERS_LOCK:
        entry = _READERS.pop(key, None)
    if entry is not None and entry[1] != lines_done:
        entry[0].close()
        entry = None
    f = entry[0] if entry is not None else _CompressedLines(path)
    try:
        if entry is None:
            # not this process's reader (or a retried task): open again and skip ahead
            skipped, rest, _, eof = 0, b"", 0, False
            while skipped < lines_done and not eof:
                _, n, _, rest, eof = _take_lines(f.read, 0, float("inf"),
                                                 lines_done - skipped, rest)
                skipped += n
        else:
            rest = entry[2]
        text, n, _, rest, eof = _take_lines(f.read, 0, float("inf"), block_rows, rest)
    except BaseException:
        f.close()  # out of _READERS: nothing else would
        raise
    rows = 0 if cursor is None else cursor.rows
    if eof:
        f.close()
        return text, None, lines_done + 1, None
    with _READERS_LOCK:
        _READERS[key] = [f, lines_done + n, rest]
    return text, None, lines_done + 1, _Cursor(task, None, lines_done + n, rows)


def _parse_block_text(task, text, offset, line0):
    path, _, _, _, zero_based, n_features, _, _, _, _ = task
    try:
        return load_svmlight(io.BytesIO(text), n_features=n_features,
                             zero_based=zero_based)
    except SvmlightError as exc:
        if line0 is None:
            line0 = _line_at(path, offset)
        raise relocated(exc, path, line0 + exc.line - 1) from None


def _line_at(path, offset):
    """The line number of a plain file's byte `offset` (a line's start), counted: for
    messages only, as blocks of plain files are read without counting lines."""
    line = 1
    with open(path, "rb") as f:
        done = 0
        while done < offset:
            chunk = f.read(min(_READ_SIZE, offset - done))
            if not chunk:
                break
            line += chunk.count(b"\n")
            done += len(chunk)
    return line


def _file_block(spec, task, cursor=None):
    text, offset, line0, next_cursor = read_block_text(task, cursor)
    X, y = _parse_block_text(task, text, offset, line0)
    path, part = task[0], task[7]
    row0 = 0 if cursor is None else cursor.rows

    def where(row):  # called for messages only
        first = line0 if line0 is not None else _line_at(path, offset)
        return f"{path}:{first + row_line(text, row) - 1}"
    block = finish_block(spec, X, y, None, part, 0, where)
    block.row0 = row0
    block.name = path
    if next_cursor is not None:
        next_cursor.rows = row0 + block.n_rows
    block.next = next_cursor
    return block


def _file_next_block(spec, previous):
    cursor = previous.next
    return _file_block(spec, cursor.task, cursor)


def _file_labels(task):
    """Labels of a whole partition, block by block (the classes' first pass)."""
    found = []
    cursor = None
    while True:
        text, offset, line0, cursor_next = read_block_text(task, cursor)
        _, y = _parse_block_text(task, text, offset, line0)
        found.append(np.unique(y))
        if cursor_next is None:
            break
        cursor = cursor_next
    return np.unique(np.concatenate(found))
