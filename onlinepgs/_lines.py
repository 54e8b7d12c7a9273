"""Reading a line-oriented text source block by block, for the compiled parsers.

The one home of what every text format's reader shares (svmlight, VW text, CSV/TSV):
opening a path, ``"-"`` (stdin) or a binary file object; recognising gzip, bz2 and xz
by their magic bytes; reading blocks into one reused buffer that keeps the partial
last line; reporting a damaged compressed stream at the line it reached; the
counters. A format plugs in a compiled parser with this protocol:

* ``parse(buf, pos, end) -> (status, pos)``: parse the complete lines of
  ``buf[pos:end]``; status 1: a chunk is full (call again from pos), 2: a bad line
  (``error_info()`` describes it), 4: with on_error="skip", the first bad line was
  skipped (``error_info()`` describes it; call again from pos), 0: all parsed; a parser
  that describes its first skipped line later keeps it in ``first_skip`` instead;
* ``decide()``: a deferred error of the pending rows (or None); ``pending_rows``;
  ``n_lines``, ``n_rows_out``, ``n_skipped``; ``release()`` at the end;

and a subclass turns ``error_info()`` into its error (`_error`) and the parser's
pending rows into a chunk (`_take`).
"""
import io
import operator
import os
import sys

from onlinepgs.compressed import (DECOMPRESSION_ERRORS, MAGIC, NON_BLOCKING, Steps,
                                  compression_of, decompressing, read_bytes, show_bytes)

__all__ = ["InputError", "LineReader", "corrupt_error", "check_reader_params"]

_PAD = 64  # spare bytes after the data in the read buffer (the parser reads past lines)
# a file named so must hold that compression (its magic bytes), else it is refused
_SUFFIXES = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz"}
_MAGIC_OF = {kind: magic for magic, kind in MAGIC}
_SNIFF = 512  # bytes looked at to tell a misnamed text file from a damaged stream


def _looks_like_text(head):
    """Whether bytes read like a text file's start: UTF-8 (a character cut at the end
    aside) with no NUL and no control character but tab, line breaks and form feed."""
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:
            return False
        text = head[:exc.start].decode("utf-8")
    return not any(ord(c) < 32 and c not in "\t\n\r\f" for c in text)


class InputError(ValueError):
    """Malformed input text: the message reads ``source:line:column: what``.

    Attributes
    ----------
    source : str
        The file name, or ``"<stdin>"``, or the name of a file object (else
        ``"<stream>"``).
    line : int
        1-based line number (for a truncated compressed stream: the line being read
        when the data ended).
    column : int or None
        1-based byte column of the offending text (None where no column applies).
    text : str
        The offending text.
    """

    def __init__(self, message, source=None, line=None, column=None, text=""):
        super().__init__(message)
        self.source = source
        self.line = line
        self.column = column
        self.text = text

    def __reduce__(self):
        return (type(self), (self.args[0], self.source, self.line, self.column,
                             self.text))


class _Prefixed:
    """A binary stream with some already-read bytes put back in front. `taken` counts
    the bytes it has read from the raw stream (the head's not included)."""

    def __init__(self, head, raw):
        self._head = head
        self._raw = raw
        self.taken = 0
        into = getattr(raw, "readinto", None)
        if not isinstance(raw, (io.BufferedIOBase, io.RawIOBase)):
            into = None  # only read(n) is required of other objects
        self._raw_into = into

    def readinto(self, b):
        """Read up to len(b) bytes into the writable buffer b (a memoryview)."""
        if self._head:
            n = min(len(b), len(self._head))
            b[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        if self._raw_into is None:
            data = read_bytes(self._raw, len(b))
            self.taken += len(data)
            if len(data) > len(b):  # more than asked: keep the rest for later
                self._head = data[len(b):]
                data = data[:len(b)]
            b[:len(data)] = data
            return len(data)
        n = self._raw_into(b)
        if n is None:
            raise BlockingIOError(NON_BLOCKING)
        self.taken += n
        return n

    def read(self, n=-1):
        if self._head:
            if n is None or n < 0:
                rest = read_bytes(self._raw, -1)
                self.taken += len(rest)
                out, self._head = self._head + rest, b""
                return out
            out, self._head = self._head[:n], self._head[n:]
            return out
        data = read_bytes(self._raw, n)
        self.taken += len(data)
        return data

    def readable(self):
        return True



def corrupt_error(name, kind, line, exc, error_class=InputError):
    """The error of a compressed stream that broke (ended early or failed a check)."""
    error = error_class(
        f"{name}:{line}: truncated or corrupt {kind} stream (line {line} is the last one "
        f"reached): {type(exc).__name__}: {exc}", name, line, None, "")
    error.__cause__ = exc
    return error


def _is_count(value, least):
    """Whether value is an int (Python or NumPy; not a bool) of at least `least`."""
    if isinstance(value, bool):
        return False
    try:
        return operator.index(value) >= least
    except TypeError:
        return False


def check_reader_params(chunk_rows, on_error, block_size):
    """The parameters every reader takes, checked."""
    if chunk_rows is not None and not _is_count(chunk_rows, 1):
        raise ValueError(f"chunk_rows must be an int >= 1 or None, got {chunk_rows!r}")
    if on_error not in ("raise", "skip"):
        raise ValueError(f'on_error must be "raise" or "skip", got {on_error!r}')
    if not _is_count(block_size, 1):
        raise ValueError(f"block_size must be an int >= 1, got {block_size!r}")


class LineReader:
    """Iterator over the chunks of a text source, parsed by a compiled parser.

    Subclasses set ``self._parser`` before calling ``__init__`` of this class, and
    define ``_error(info, block)`` (the error of the parser's ``error_info()``) and
    ``_take()`` (the pending rows as a chunk, or None when every row was skipped).
    ``error_class`` is the error a damaged compressed stream raises.
    """

    error_class = InputError
    _to_close = ()  # until __init__ runs (a subclass's parameter check may fail first)

    def __init__(self, source, block_size=1 << 20):
        self._to_close = []
        self._block_size = int(block_size)
        self._compression = None
        self._readinto = None  # set by _generate (what _or_corrupt reads on with)
        self._stream, self.source_name = self._open(source)
        self._chunks = self._generate()

    # ---- opening ------------------------------------------------------------------
    def _open(self, source):
        if isinstance(source, str) and source == "-":
            raw, name = sys.stdin.buffer, "<stdin>"
        elif isinstance(source, (str, bytes, os.PathLike)):
            name = os.fsdecode(source)
            raw = open(source, "rb")
            self._to_close.append(raw)
            self._file = raw  # a file on disk: `bytes_read` counts its bytes (progress bars)
        elif hasattr(source, "read"):
            raw = source
            name = getattr(source, "name", None)
            name = name if isinstance(name, str) and name else "<stream>"
        else:
            raise TypeError("source must be a path, '-' or a binary file object with "
                            f"read(n); got {type(source).__name__}")
        # sniff the compression from the first bytes (short reads from pipes)
        head = b""
        while len(head) < 6:
            part = read_bytes(raw, 6 - len(head))
            if not part:
                break
            head += bytes(part)
        kind = compression_of(head)
        named = _SUFFIXES.get(os.path.splitext(name)[1].lower()) if name[:1] != "<" else None
        if named is not None and kind is None and head:
            # named compressed, no compression's magic: a plain text file misnamed is read
            # as text (as ever), but binary bytes are a damaged stream, which must not be
            # read as text ("column 1's name is not UTF-8", or rows of garbage)
            while len(head) < _SNIFF:
                part = read_bytes(raw, _SNIFF - len(head))
                if not part:
                    break
                head += bytes(part)
            if not _looks_like_text(head):
                raise self.error_class(
                    f"{name}:1: not a {named} file, as its name says, nor text: it begins "
                    f"with '{head[:6].hex(' ')}' where a {named} stream begins with "
                    f"'{_MAGIC_OF[named].hex(' ')}' (a damaged {named} file?)",
                    name, 1, None, show_bytes(head[:6]))
        stream = self._prefixed = _Prefixed(head, raw)
        self._sniffed = len(head)
        if kind is not None:
            self._compression = kind
            stream = decompressing(kind, stream)
            self._to_close.insert(0, stream)
        return stream, name

    def close(self):
        """Close the files the reader opened (not a file object it was given)."""
        # getattr: a subclass whose parameter checks failed never reached __init__ here
        for f in getattr(self, "_to_close", ()):
            try:
                f.close()
            except Exception:  # noqa: BLE001 - closing a broken stream
                pass
        self._to_close = []

    def __enter__(self):
        return self

    def __del__(self):
        self.close()

    def __exit__(self, *exc):
        self.close()

    # ---- counters -----------------------------------------------------------------
    @property
    def n_lines(self):
        return self._parser.n_lines

    @property
    def n_rows(self):
        return self._parser.n_rows_out

    @property
    def n_skipped(self):
        return self._parser.n_skipped

    @property
    def first_skipped(self):
        """With on_error="skip": the error of the first line skipped (its place and
        reason, as it would have been raised), or None."""
        found = getattr(self, "_first_skipped", None)
        info = getattr(self._parser, "first_skip", None)
        if found is None and info is not None:
            found = self._first_skipped = self._error(info, None)
        return found

    @property
    def bytes_read(self):
        """Bytes consumed from the file on disk (compressed bytes for .gz/.bz2/.xz);
        0 for streams, whose size is unknown anyway. Counted as they are read, not the
        file's ``tell()``: the command asks after each chunk while the reader's thread
        reads on, and ``tell()`` waited for that read's lock (45 ms over IMDB's rows five
        times under cProfile)."""
        prefixed = getattr(self, "_prefixed", None)  # None: the file's opening failed
        if getattr(self, "_file", None) is None or prefixed is None:
            return 0
        return self._sniffed + prefixed.taken

    # ---- iteration ----------------------------------------------------------------
    def __iter__(self):
        return self

    def __next__(self):
        return next(self._chunks)

    def _generate(self):
        parser = self._parser
        block_size = self._block_size
        readinto = self._readinto = self._reader_into()
        # one buffer, reused: [start, fill) holds the bytes not parsed yet (the start
        # of a line), then the next block is read in after them; _PAD spare bytes at
        # the end let the parser read a few bytes past the last line (its fast path)
        buf = bytearray(block_size + _PAD)
        start = fill = 0
        try:
            while True:
                if start:  # move the partial line to the front
                    tail = fill - start
                    size = tail + block_size + _PAD
                    if len(buf) > 2 * size:  # grown for a long line: shrink back
                        buf = buf[start:fill] + bytes(block_size + _PAD)
                    elif tail:
                        buf[:tail] = buf[start:fill]
                    start, fill = 0, tail
                if len(buf) < fill + block_size + _PAD:  # a line longer than the buffer
                    buf.extend(bytes(max(fill + block_size + _PAD, 2 * len(buf)) - len(buf)))
                try:
                    n = readinto(buf, fill, block_size)
                except DECOMPRESSION_ERRORS as exc:
                    if self._compression is None:
                        raise
                    line = max(1, parser.n_lines + (1 if fill > start else 0))
                    raise corrupt_error(self.source_name, self._compression, line,
                                        exc, self.error_class) from exc
                final = not n
                if final:
                    end = fill
                else:
                    nl = buf.rfind(b"\n", fill, fill + n)
                    fill += n
                    if nl < 0:
                        continue  # no complete line yet
                    end = nl + 1
                pos = start
                while True:
                    status, pos = parser.parse(buf, pos, end)
                    if status == 1:
                        chunk = self._take()
                        if chunk is not None:
                            yield chunk
                    elif status == 2:
                        raise self._or_corrupt(self._error(parser.error_info(), buf))
                    elif status == 4:
                        self._first_skipped = self._error(parser.error_info(), buf)
                    else:
                        break
                start = end
                if final:
                    break
            if parser.pending_rows:
                chunk = self._take()
                if chunk is not None:
                    yield chunk
        finally:
            parser.release()
            self.close()

    def _reader_into(self):
        """A function (buf, at, n) reading up to n bytes of the source into the
        bytearray buf at offset at (len(buf) >= at + n), returning how many (0 at the
        end): readinto, which saves a copy of each block."""
        if self._compression is not None:
            return self._decompressed_into()
        into = self._stream.readinto  # _Prefixed

        def readinto(buf, at, n):
            with memoryview(buf) as view, view[at:at + n] as part:
                got = into(part)
            if got is None:
                raise BlockingIOError(NON_BLOCKING)
            return got
        return readinto

    def _or_corrupt(self, error):
        """A bad line of a compressed stream may be the garbage a damaged stream decodes
        to before the decompressor notices: read on (a few MiB at most, on this error
        path only) and report the damage, at the bad line, if the decompressor fails
        there; else the bad line."""
        if self._compression is None or self._readinto is None:
            return error
        probe = bytearray(1 << 20)
        try:
            for _ in range(4):
                if not self._readinto(probe, 0, len(probe)):
                    break
        except DECOMPRESSION_ERRORS as exc:
            return corrupt_error(self.source_name, self._compression, error.line, exc,
                                 self.error_class)
        except Exception:  # the stream cannot be read on: the bad line stands
            pass
        return error

    def _decompressed_into(self):
        """Like `_reader_into`, for a (Gzip|BZ2|LZMA)File, in decompressor steps (`Steps`)."""
        into = Steps(self._stream).readinto

        def readinto(buf, at, n):
            with memoryview(buf) as view, view[at:at + n] as part:
                return into(part)
        return readinto
