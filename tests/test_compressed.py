"""Compressed input in the record formats (VW text, CSV, JSON lines): the reading loop
they share with svmlight (onlinepgs/_lines.py, onlinepgs/compressed.py), fuzzed with
damaged gzip, bz2 and xz files of one or more streams. (svmlight's own fuzzers of
compressed files: tests/test_svmlight.py.)"""
import bz2
import gzip
import io
import lzma

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from fuzzing import MUTATIONS, fuzzer, mutate, xz_streams
from onlinepgs._lines import InputError
from onlinepgs.compressed import compression_of
from onlinepgs.formats import iter_csv, iter_jsonl, iter_vw

COMPRESS = {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}
# (xz: every stream, the padding between them skipped: `fuzzing.xz_streams`)
DECOMPRESS = {"gzip": gzip.decompress, "bz2": bz2.decompress, "xz": xz_streams}
VALID = {
    "vw": b"".join(b"%d |a w%d:%d x |b y:0.5\n" % ((-1) ** i, i % 7, i % 3 + 1)
                   for i in range(40)),
    "csv": b"label,a,b\n" + b"".join(b"%d,w%d,%d\n" % ((-1) ** i, i % 7, i % 5)
                                     for i in range(40)),
    "json": b"".join(b'{"label": %d, "a": "w%d", "b": %d}\n' % ((-1) ** i, i % 7, i % 5)
                     for i in range(40)),
}


def read(fmt, data, block_size):
    """(X, y) of `data` read whole in format `fmt`, or the InputError it raises."""
    options = dict(n_bits=8, chunk_rows=7, block_size=block_size)
    if fmt == "vw":
        reader = iter_vw(io.BytesIO(data), **options)
    elif fmt == "csv":
        reader = iter_csv(io.BytesIO(data), label="label", numeric=["b"], **options)
    else:
        reader = iter_jsonl(io.BytesIO(data), **options)
    try:
        chunks = list(reader)
    except InputError as exc:
        return exc
    if not chunks:
        return np.zeros((0, 256)), np.zeros(0)
    return (np.vstack([X.toarray() for X, y, w in chunks]),
            np.concatenate([y for X, y, w in chunks]))


@fuzzer(60, st.sampled_from(sorted(VALID)), st.sampled_from(sorted(COMPRESS)), MUTATIONS,
        st.integers(1, 2), st.sampled_from([16, 1 << 20]), st.booleans())
def test_fuzz_damaged_compressed_records(fmt, kind, mutations, n_streams, block_size,
                                         damaged_text):
    """A damaged compressed file of VW text, CSV or JSON lines (its bytes, or the text
    before compressing it): rows, or the format's one-line error naming the line
    reached; what is read is what the standard library's decompression of the whole
    file gives, read as plain text (without the magic bytes, the data is the plain
    text it then is), and damaged text gives the plain text's rows or error."""
    if damaged_text:
        plain = mutate(VALID[fmt], mutations) * n_streams
        # plain text that begins with magic bytes is sniffed as compressed; once
        # decompressed, the same bytes are text
        assume(compression_of(plain[:6]) is None)
        data = b"".join(COMPRESS[kind](mutate(VALID[fmt], mutations))
                        for _ in range(n_streams))
        got, want = read(fmt, data, block_size), read(fmt, plain, 1 << 20)
        if isinstance(want, InputError) or isinstance(got, InputError):
            assert str(got) == str(want)
        else:
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])
        return
    data = mutate(b"".join(COMPRESS[kind](VALID[fmt]) for _ in range(n_streams)), mutations)
    got = read(fmt, data, block_size)
    if isinstance(got, InputError):
        assert "\n" not in str(got) and str(got).startswith("<stream>:"), str(got)
        return
    compression = compression_of(data[:6])
    text = DECOMPRESS[compression](data) if compression else data  # raises if damage passed
    want = read(fmt, text, 1 << 20)
    assert not isinstance(want, InputError), (want, got)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
