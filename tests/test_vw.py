"""The VW text reader (onlinepgs.formats.vw) against a plain-Python transcription of
the grammar and of MurmurHash3 written here, independently of the compiled parser."""
import bz2
import gzip
import io
import lzma
import math
import re
import struct
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import assume
from hypothesis import strategies as st

from fuzzing import MUTATIONS, fuzzer, mutate
from onlinepgs._core._vw import _Parser
from onlinepgs.compressed import compression_of
from onlinepgs.formats import format_of, iter_vw, open_reader
from onlinepgs.formats.vw import VWError


# ---- the yardstick: MurmurHash3 x86_32 and the grammar, in plain Python ---------------
def murmur(data, seed):
    """MurmurHash3_x86_32 of bytes (Austin Appleby's reference, transcribed)."""
    c1, c2, mask = 0xcc9e2d51, 0x1b873593, 0xFFFFFFFF
    h = seed & mask
    n = len(data) // 4
    for (k,) in struct.iter_unpack("<I", data[:4 * n]):
        k = (k * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        k = (k * c2) & mask
        h ^= k
        h = ((h << 13) | (h >> 19)) & mask
        h = (h * 5 + 0xe6546b64) & mask
    tail = data[4 * n:]
    k = 0
    for i, b in enumerate(tail):
        k |= b << (8 * i)
    if tail:
        k = (k * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        k = (k * c2) & mask
        h ^= k
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85ebca6b) & mask
    h ^= h >> 13
    h = (h * 0xc2b2ae35) & mask
    h ^= h >> 16
    return h


def test_murmur_transcription_matches_known_values():
    # published MurmurHash3_x86_32 test vectors
    assert murmur(b"", 0) == 0
    assert murmur(b"", 1) == 0x514E28B7
    assert murmur(b"hello", 0) == 613153351
    assert murmur(b"Hello, world!", 1234) == 0xFAF6CDB3


NUMBER = re.compile(rb"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\Z")


def number(token):
    if not NUMBER.match(token):
        raise ValueError(token)
    value = float(token)
    if not math.isfinite(value):
        raise ValueError(token)
    return value


def reference(text, seed=0):
    """Rows of VW text as (label, importance, [(letter, hash, value, name)]) per the
    grammar of onlinepgs.formats.vw; raises ValueError(line number) on a bad line."""
    rows = []
    for number_, line in enumerate(text.split(b"\n"), 1):
        line = line.replace(b"\r", b" ")
        if not line.strip():
            continue
        try:
            rows.append(_reference_line(line, seed))
        except ValueError:
            raise ValueError(number_) from None
    return rows


def _reference_line(line, seed):
    head, bar, rest = line.partition(b"|")
    tokens = head.split()
    glued = bool(bar) and head and not head[-1:].isspace()
    if glued:
        tokens = tokens[:-1]
    tokens = [t for t in tokens if not t.startswith(b"'")]
    if len(tokens) > 2 or any(b":" in t for t in tokens[:1]):
        raise ValueError
    label = number(tokens[0]) if tokens else math.nan
    importance = number(tokens[1]) if len(tokens) > 1 else 1.0
    if importance < 0:
        raise ValueError
    entries = []
    if bar:
        for part in (b"|" + rest).split(b"|")[1:]:
            letter, ns_seed, weight, ns_name = 32, seed, 1.0, None
            if part[:1] and not part[:1].isspace():
                token = part.split()[0]
                name, colon, w = token.partition(b":")
                if not name:
                    raise ValueError
                if colon:
                    weight = number(w)
                # the first byte; a NUL's is 0x80 (0 marks an unsigned raw column)
                letter, ns_seed, ns_name = name[0] or 0x80, murmur(name, seed), name
                part = part[len(token):]
            for token in part.split():
                name, colon, value = token.partition(b":")
                if not name:
                    raise ValueError
                v = number(value) if colon else 1.0
                shown = _text(name) if ns_name is None else f"{_text(ns_name)}^{_text(name)}"
                entries.append((letter, murmur(name, ns_seed), v * weight, shown))
    return label, importance, entries


def _text(name):
    return name.decode("utf-8", "backslashreplace")


def parse_all(text, seed=0, audit=False, fast_path=True, skip=False):
    """The compiled parser over one block (with the reader's padding)."""
    parser = _Parser(seed, skip, -1, audit, fast_path)
    buf = bytearray(text) + bytes(64)
    status, pos = parser.parse(buf, 0, len(text))
    if status == 2:
        raise VWError(str(parser.error_info()), line=parser.error_info()[1])
    return parser.take_chunk()


def assert_same(text, seed=0, fast_path=True):
    ns, hashes, values, indptr, labels, weights, names = parse_all(text, seed, True,
                                                                   fast_path)
    rows = reference(text, seed)
    np.testing.assert_array_equal(labels, [r[0] for r in rows])
    want_w = np.array([r[1] for r in rows])
    if weights is None:
        assert (want_w == 1).all()
    else:
        np.testing.assert_array_equal(weights, want_w)
    np.testing.assert_array_equal(np.diff(indptr), [len(r[2]) for r in rows])
    entries = [e for r in rows for e in r[2]]
    assert ns.tolist() == [e[0] for e in entries]
    assert hashes.tolist() == [e[1] for e in entries]
    assert values.tolist() == [e[2] for e in entries]
    assert names == [e[3] for e in entries]


EXAMPLES = [
    b"1 |f a b:2 c\n",
    b"-1 2.5 'tag1|user u9 age:0.5 |ad a3:-1e-3 |  x y:7\n",
    b"0 tag|ns:2 13 013:0.25\n",          # a tag glued to the bar; integer-looking names
    b"|f a b\n",                           # no label: a line to predict
    b"3 |f a:1|g b:2\n",                   # a bar ends a value
    b"1 | a:+.5 b:5. c:1E2\r\n",          # CRLF, default namespace, number forms
    b"1\n",                                # a row without features
    "\n  \t \n-1 1 |fé héllo:3\n".encode(),  # blank lines; UTF-8 names
    b"1 0 |f a\n1 |f a:0\n",               # importance 0; value 0 kept
]


@pytest.mark.parametrize("text", EXAMPLES)
@pytest.mark.parametrize("fast_path", [True, False])
def test_parser_matches_the_grammar(text, fast_path):
    assert_same(text, seed=0, fast_path=fast_path)
    assert_same(text, seed=77, fast_path=fast_path)


def test_namespace_seeds_use_the_full_name():
    # user and url share the letter u but not the seed
    ns, hashes, *_ = parse_all(b"1 |user a |url a\n")
    assert ns.tolist() == [ord("u"), ord("u")]
    assert hashes.tolist() == [murmur(b"a", murmur(b"user", 0)), murmur(b"a", murmur(b"url", 0))]
    _, hashes, *_ = parse_all(b"1 | a\n", seed=5)
    assert hashes.tolist() == [murmur(b"a", 5)]


def dense(rows, n_bits):
    """The reference rows as the matrix to_matrix's rules make: col = h & mask, the
    value negated when the hash's top bit is set, duplicates summed."""
    X = np.zeros((len(rows), 1 << n_bits))
    for i, (_, _, entries) in enumerate(rows):
        for _, h, v, _ in entries:
            X[i, h & ((1 << n_bits) - 1)] += -v if h >> 31 else v
    return X


def test_iter_vw_chunks_and_matrix():
    text = b"".join(EXAMPLES) * 7
    rows = reference(text)
    chunks = list(iter_vw(io.BytesIO(text), n_bits=6, chunk_rows=4, block_size=16))
    assert [X.shape[0] for X, _, _ in chunks] == [4] * (len(rows) // 4) + (
        [len(rows) % 4] if len(rows) % 4 else [])
    X = np.vstack([X.toarray() for X, _, _ in chunks])
    np.testing.assert_allclose(X, dense(rows, 6), rtol=0, atol=1e-12)
    y = np.concatenate([y for _, y, _ in chunks])
    np.testing.assert_array_equal(y, [r[0] for r in rows])
    w = np.concatenate([np.ones(len(y_)) if w is None else w for _, y_, w in chunks])
    np.testing.assert_array_equal(w, [r[1] for r in rows])


def test_weights_none_when_all_one():
    (X, y, w), = iter_vw(io.BytesIO(b"1 |f a\n-1 1 |f b\n"))
    assert w is None
    (X, y, w), = iter_vw(io.BytesIO(b"1 |f a\n-1 3 |f b\n"))
    assert w.tolist() == [1.0, 3.0]


def test_counters_and_last_line_without_newline():
    reader = iter_vw(io.BytesIO(b"1 |f a\n\n-1 |f b:2"))
    (X, y, w), = reader
    assert (reader.n_lines, reader.n_rows, reader.n_skipped) == (3, 2, 0)
    assert X.toarray().sum(axis=1).tolist() == [
        v if murmur(n, murmur(b"f", 0)) >> 31 == 0 else -v for n, v in ((b"a", 1), (b"b", 2))]


ERRORS = [
    (b"1 |f a\nx |f a\n", 2, 1, "bad label 'x'"),
    (b"1:0.5 2:1 |f a\n", 1, 1, "multiclass / cost-sensitive labels are not supported"),
    (b"1 -2 |f a\n", 1, 3, "bad importance weight '-2'"),
    (b"1 2 3 |f a\n", 1, 5, "unexpected '3'"),
    (b"1 |f:x a\n", 1, 6, "bad namespace weight 'x'"),
    (b"1 |:2 a\n", 1, 4, "empty namespace name"),
    (b"1 |f a:1x\n", 1, 8, "bad feature value '1x'"),
    (b"1 |f a:nan\n", 1, 8, "bad feature value 'nan'"),
    (b"1 |f a:1e999\n", 1, 8, "bad feature value '1e999'"),
    (b"1 |f :3\n", 1, 6, "empty feature name"),
    (b"1 |f a:\n", 1, 8, "bad feature value ''"),
    (b"1 |f a:1:2\n", 1, 8, "bad feature value '1:2'"),
]


@pytest.mark.parametrize("text, line, column, what", ERRORS)
def test_errors_name_line_and_column(text, line, column, what):
    with pytest.raises(VWError) as info:
        list(iter_vw(io.BytesIO(text)))
    error = info.value
    assert (error.source, error.line, error.column) == ("<stream>", line, column)
    assert str(error).startswith(f"<stream>:{line}:{column}: ")
    assert what in str(error)
    with pytest.raises(ValueError):  # the yardstick refuses the same line
        reference(text)


def test_skip_counts_bad_lines():
    text = b"1 |f a\nx |f a\n-1 |f b:q\n-1 |f b\n"
    reader = iter_vw(io.BytesIO(text), on_error="skip")
    (X, y, w), = reader
    assert y.tolist() == [1.0, -1.0]
    assert (reader.n_skipped, reader.n_rows, reader.n_lines) == (2, 2, 4)


@pytest.mark.parametrize("compress", [gzip.compress, bz2.compress, lzma.compress])
def test_compressed(tmp_path, compress):
    text = b"".join(EXAMPLES) * 3
    path = tmp_path / "d.vw.gz"
    path.write_bytes(compress(text))
    got = np.vstack([X.toarray() for X, _, _ in iter_vw(path, n_bits=5, chunk_rows=5)])
    np.testing.assert_allclose(got, dense(reference(text), 5), atol=1e-12)


STDIN = """
import sys, numpy as np
from onlinepgs.formats import iter_vw
r = iter_vw("-", n_bits=5)
X = np.vstack([X.toarray() for X, y, w in r])
np.save(sys.argv[1], X); print(r.source_name)
"""


def test_stdin(tmp_path):
    text = b"".join(EXAMPLES)
    out = tmp_path / "x.npy"
    proc = subprocess.run([sys.executable, "-c", STDIN, str(out)], input=gzip.compress(text),
                          capture_output=True, check=True)
    assert proc.stdout.strip() == b"<stdin>"
    np.testing.assert_allclose(np.load(out), dense(reference(text), 5), atol=1e-12)


def test_open_reader_and_format_of(tmp_path):
    assert [format_of(n) for n in ("a.vw", "a.VW.gz", "a.vw.xz", "a.svm", "-", "a.csv",
                                   "a.tsv.bz2", "a.jsonl", "a.ndjson", "a.json")] == [
        "vw", "vw", "vw", "svmlight", "svmlight", "csv", "tsv", "json", "json", "json"]
    assert format_of("a.svm", "vw") == "vw"
    with pytest.raises(ValueError, match="unknown format 'libsvm'"):
        format_of("a", "libsvm")
    path = tmp_path / "d.vw"
    path.write_bytes(b"1 |f a\n")
    (X, y, w), = open_reader(str(path), "vw")
    assert X.shape == (1, 2 ** 18)


def test_audit_collector_gets_the_names():
    class Names:
        def __init__(self):
            self.seen = []

        def add(self, rows, spec):
            self.seen.extend(rows.names)

    names = Names()
    list(iter_vw(io.BytesIO(b"1 |user u9 |  x\n-1 'a|ad a3\n"), audit=names, chunk_rows=1,
                 block_size=8))
    assert names.seen == ["user^u9", "x", "ad^a3"]


# ---- fuzzing ------------------------------------------------------------------------
NAME = st.binary(min_size=1, max_size=6).filter(
    lambda b: not any(c in b for c in b" \t\r\n\v\f|:'"))
VALUE = st.one_of(st.integers(-10**6, 10**6).map(str),
                  st.floats(-1e6, 1e6, allow_nan=False).map(repr),
                  st.sampled_from(["0.5", ".25", "3.", "-1e-5", "+2"]))
FEATURE = st.tuples(NAME, st.none() | VALUE).map(
    lambda t: t[0] + (b"" if t[1] is None else b":" + t[1].encode()))
NAMESPACE = st.tuples(st.none() | NAME, st.none() | VALUE, st.lists(FEATURE, max_size=5)).map(
    lambda t: b"|" + (b" " if t[0] is None else t[0]
                      + (b"" if t[1] is None else b":" + t[1].encode()) + b" ")
    + b" ".join(t[2]))
LINE = st.tuples(st.none() | VALUE, st.none() | st.floats(0, 100).map(repr),
                 st.none() | NAME, st.lists(NAMESPACE, max_size=3)).map(
    lambda t: b" ".join(
        [x for x in (None if t[0] is None else t[0].encode(),
                     None if t[0] is None or t[1] is None else t[1].encode(),
                     None if t[2] is None else b"'" + t[2]) if x is not None])
    + b" " + b" ".join(t[3]))


@fuzzer(60, st.lists(LINE, min_size=1, max_size=8), st.integers(0, 2**32 - 1),
        st.sampled_from([b"\n", b"\r\n"]))
def test_fuzz_valid_lines_round_trip(lines, seed, newline):
    text = newline.join(lines) + newline
    assert_same(text, seed, fast_path=True)
    assert_same(text, seed, fast_path=False)


@fuzzer(80, st.lists(LINE, min_size=1, max_size=5), MUTATIONS, st.integers(1, 40))
def test_fuzz_damaged_bytes_never_crash(lines, mutations, block):
    text = mutate(b"\n".join(lines) + b"\n", mutations)
    assume(compression_of(text[:6]) is None)  # not a damaged gzip/bz2/xz stream
    try:
        want = reference(text)
    except ValueError as exc:  # a bad line: the reader names the same one
        with pytest.raises(VWError) as info:
            list(iter_vw(io.BytesIO(text), n_bits=4, chunk_rows=2, block_size=block))
        assert re.match(r"<stream>:\d+:\d+: ", str(info.value))
        assert info.value.line == exc.args[0]
        return
    got = list(iter_vw(io.BytesIO(text), n_bits=4, chunk_rows=2, block_size=block))
    X = np.vstack([X.toarray() for X, _, _ in got]) if got else np.zeros((0, 16))
    np.testing.assert_allclose(X, dense(want, 4), rtol=1e-12,
                               atol=1e-12 * (1 + np.abs(X).max(initial=0)))
