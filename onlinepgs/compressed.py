"""Reading gzip, bz2 and xz data: every stream of a file, in decompressor steps.

The one home of the decompression pieces that the svmlight reader
(`onlinepgs.svmlight`) and the distributed file source
(`onlinepgs.distributed.sources.files`) both use: the formats' magic bytes, the
errors a damaged stream raises, a decompressor over every concatenated stream
(`decompressing`), reads gathered in decompressor steps (`Steps`), so that the
bytes before a break are returned before its error, and how input bytes are shown
in a message (`show_bytes`).
"""
import bz2
import lzma
import zlib

__all__ = ["MAGIC", "DECOMPRESSION_ERRORS", "NON_BLOCKING", "Steps", "compression_of",
           "decompressing", "read_bytes", "show_bytes"]

MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bz2"),
    (b"\xfd7zXZ\x00", "xz"),
)
DECOMPRESSION_ERRORS = (EOFError, OSError, zlib.error, lzma.LZMAError)
MAX_TEXT = 80  # characters of offending text shown in a message
# bytes asked of one read1 of a decompressor (the most one step makes: zlib, bz2 and
# lzma allocate all they are allowed to return)
DECOMPRESS_STEP = 1 << 16
COMPRESSED_STEP = 1 << 15  # compressed bytes given to a decompressor at a time
NON_BLOCKING = ("the svmlight source is a non-blocking stream with no data available; "
                "give a blocking stream")


def compression_of(head):
    """The compression ("gzip", "bz2", "xz") whose magic bytes begin `head`, or None."""
    return next((kind for magic, kind in MAGIC if head.startswith(magic)), None)


def show_bytes(raw):
    """Bytes of the input as text for a message (truncated, undecodable escaped)."""
    text = bytes(raw[:4 * MAX_TEXT]).decode("utf-8", errors="backslashreplace")
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT - 3] + "..."


def read_bytes(f, n):
    """f.read(n) as bytes; a non-blocking stream with nothing to read, or one that
    returns text, is an error."""
    data = f.read(n)
    if data is None:
        raise BlockingIOError(NON_BLOCKING)
    if isinstance(data, memoryview):
        data = data.tobytes()
    elif not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"the svmlight source must be a binary stream; read() "
                        f"returned {type(data).__name__}")
    return data


def decompressing(kind, raw):
    """A file object over `raw` whose read1 decompresses it (kind: as in MAGIC)."""
    return Concatenated(kind, raw)


class Concatenated:
    """Every stream of a gzip, bz2 or xz file, decompressed one after the other.

    A file may hold several streams (``cat a.gz b.gz``, pbzip2's bz2, ``xz`` with
    padding between streams). Python's GzipFile/BZ2File/LZMAFile take a failure at the
    first step of a later stream for trailing junk and stop there without an error, and
    LZMAFile stops at stream padding: rows silently lost. Here one decompressor reads
    each stream, and the bytes after a stream's end must be another stream (or the
    padding the format allows: zero bytes after gzip members, as gzip skips them;
    xz's stream padding, zero bytes in multiples of four); anything else is reported
    as damage, like an error inside a stream, with the stream's number and the byte
    offset (in the compressed data) where it starts.

    Parameters
    ----------
    kind : {"gzip", "bz2", "xz"}
        The format (as in ``MAGIC``).
    raw : object with read(n)
        The compressed bytes, from the start of the first stream.
    """

    def __init__(self, kind, raw):
        self.kind = kind
        self._magic = next(magic for magic, k in MAGIC if k == kind)
        self._raw = raw
        self._taken = 0  # compressed bytes taken from raw so far
        self._number, self._start = 1, 0  # the current stream: its number and offset
        self._tail = b""  # compressed bytes taken and not yet given to the decompressor
        self._hungry = True  # (zlib) the last step left no output pending
        self._raw_done = False
        self._failure = None  # the error met after the bytes last returned
        self._d = self._decompressor()

    def _decompressor(self):
        if self.kind == "gzip":
            return zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # one gzip member
        if self.kind == "bz2":
            return bz2.BZ2Decompressor()
        return lzma.LZMADecompressor(format=lzma.FORMAT_XZ)

    def _take(self):
        """The next compressed bytes of raw (b"" at its end)."""
        if self._raw_done:
            return b""
        data = read_bytes(self._raw, COMPRESSED_STEP)
        self._raw_done = not data
        self._taken += len(data)
        return data

    def _fail(self, exc, where=None):
        """exc, of the same type, saying which stream broke and where it starts; every
        later read raises it again (the data is not read on past damage)."""
        where = where or (f"in {self.kind} stream {self._number}, which starts at "
                          f"byte {self._start} of the compressed data")
        try:
            out = type(exc)(f"{exc} ({where})")
            out.__cause__ = exc
        except Exception:  # noqa: BLE001 - a type that takes other arguments: keep it
            out = exc
        self._failure = out
        return out

    def read1(self, n):
        """Up to n decompressed bytes (at least one unless at the end), from one step of
        the decompressor: an error is raised by the call that meets it, so the bytes
        before it are returned first (see `Steps`)."""
        if self._failure is not None:
            raise self._failure
        n = max(1, n)
        while self._d is not None:
            d = self._d
            if d.eof:
                self._next_stream()
                continue
            data, self._tail = self._tail, b""
            hungry = d.needs_input if self.kind != "gzip" else self._hungry
            if not data and hungry:
                data = self._take()
                if not data:
                    raise self._fail(EOFError("Compressed file ended before the "
                                              "end-of-stream marker was reached"))
            before = d.copy() if self.kind == "gzip" else None
            try:
                out = d.decompress(data, n)
            except DECOMPRESSION_ERRORS as exc:
                if before is None:
                    raise self._fail(exc) from exc
                return self._before_damage(before, data, exc)
            if self.kind == "gzip":
                # zlib keeps the input its output limit left over in unconsumed_tail;
                # a full output may leave more pending inside it (asked for next time)
                self._tail = d.unconsumed_tail
                self._hungry = len(out) < n and not self._tail
            if out:
                return out
        return b""

    def _before_damage(self, d, data, exc):
        """What zlib's `d` makes of data before the failure exc, which the failing call
        dropped: a gzip member's CRC is checked after its last bytes, in the same call.
        Byte by byte, on this error path only; the failure is raised by the next read."""
        out = bytearray()
        try:
            while True:
                part = d.decompress(data, 1)
                if not part:
                    break
                out += part
                data = d.unconsumed_tail
        except DECOMPRESSION_ERRORS:
            pass
        failure = self._fail(exc)
        if out:
            return bytes(out)
        raise failure

    def _next_stream(self):
        """After a stream's end: start the next one, or end (self._d = None)."""
        # all input after the end (zlib's unconsumed_tail then repeats part of it)
        rest = self._d.unused_data
        end = self._taken - len(rest)  # where the stream ended (its first byte after)
        padding = 0
        while True:
            if self.kind != "bz2":  # zero bytes between or after streams
                kept = rest.lstrip(b"\0")
                padding += len(rest) - len(kept)
                rest = kept
            if len(rest) >= len(self._magic):
                break
            more = self._take()
            if not more:
                break
            rest += more
        at = end + padding
        if self.kind == "xz" and padding % 4:
            raise self._fail(lzma.LZMAError(
                f"{padding} zero bytes after xz stream {self._number} (at byte {end}) are "
                "not stream padding (a multiple of 4 bytes)"), "damaged or not xz data")
        if not rest:
            self._d, self._tail = None, b""
            return
        if not rest.startswith(self._magic):
            raise self._fail(OSError(
                f"the bytes at byte {at}, after {self.kind} stream {self._number}, are "
                f"not a {self.kind} stream: '{show_bytes(rest[:16])}'"),
                "a damaged stream, or other data appended to the file")
        self._number += 1
        self._start = at
        self._d, self._tail, self._hungry = self._decompressor(), rest, True

    def close(self):
        """Drop the decompressor (raw is its owner's to close)."""
        self._d, self._tail = None, b""


class Steps:
    """Reads of a decompressing file gathered from read1 calls, each one step of the
    decompressor: one read(n) that meets a break in the stream raises and drops all it
    had decompressed. The bytes before a break are returned, and the break's error is
    raised by the next read, so that the lines before it are parsed and the error names
    the line being read when the stream broke (the svmlight reader's and the
    distributed file source's)."""

    def __init__(self, stream):
        self._read1 = stream.read1
        self._broken = None

    def readinto(self, view):
        """Fill the writable memoryview `view` as far as the stream goes; how many bytes."""
        if self._broken is not None:
            raise self._broken
        got, n = 0, len(view)
        while got < n:
            try:
                part = self._read1(min(n - got, DECOMPRESS_STEP))
            except DECOMPRESSION_ERRORS as exc:
                if not got:
                    raise
                self._broken = exc
                break
            if not part:
                break
            view[got:got + len(part)] = part
            got += len(part)
        return got

