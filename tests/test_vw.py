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


# VW's parse_float (parse_primitives.h): a fast path of spaces, '-', digits, '.' digits,
# e/E '-' digits (each part optional) when a space, tab, newline or the end follows it;
# else C's strtof
FAST = re.compile(rb" *(-?)(\d*)(?:\.(\d*))?(?:[eE](-?)(\d*))?")
STRTOF = re.compile(rb"[ \t\n\v\f\r]*([+-]?(?:0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*"
                    rb"|\.[0-9a-fA-F]+)(?:[pP][+-]?\d+)?|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"
                    rb"|(?i:inf(?:inity)?|nan)))")


def vw_float(rest):
    """(consumed, value, digits) of VW's parse_float at the start of `rest`: consumed 0
    when it reads nothing (VW: a string value)."""
    m = FAST.match(rest)
    end = m.end()
    if end == len(rest) or rest[end:end + 1] in (b" ", b"\t", b"\n"):
        if end == 0:
            return 0, 0.0, False
        sign, whole, frac, exp_sign, exp_digits = m.groups()
        if not (whole or frac):
            return end, 0.0, False  # "-", ".", "e5": 0
        text = sign + whole + b"." + (frac or b"") + (
            b"e" + exp_sign + exp_digits if exp_digits else b"")  # "1e", "5e-": dropped
        return end, float(text), True
    m = STRTOF.match(rest)
    if not m:
        return 0, 0.0, False
    token = m.group(1)
    if token.lstrip(b"+-")[:2].lower() == b"0x":
        return m.end(), float.fromhex(token.decode()), True
    return m.end(), float(token), any(c in b"0123456789" for c in token)


def whole_number(word):
    """A label word, importance or namespace weight: a finite number with a digit
    that VW reads whole (VW reads a part of other words, or 0 with a warning)."""
    consumed, value, digits = vw_float(word)
    if consumed != len(word) or not digits or not math.isfinite(value):
        raise ValueError(word)
    return value


def hashstring(name, seed):
    """VW's hashstring: bytes up to 0x20 trimmed at both ends; digits only (or nothing)
    is the number plus the seed (mod 2**32), anything else murmurhash3 of its bytes."""
    name = name.strip(bytes(range(33)))
    if all(48 <= c <= 57 for c in name):
        return (int(name or b"0") + seed) % 2**32
    return murmur(name, seed)


def reference(text, seed=0):
    """Rows of VW text as (label, importance, [(letter, hash, value, name)]) as VW's
    text parser reads them (parse_example_text.cc, transcribed), or ValueError(line
    number) where the reader refuses a line: VW warns and reads a part of it, or reads
    a non-finite number, a non-zero initial prediction, more than three label words."""
    rows = []
    for number_, line in enumerate(text.split(b"\n"), 1):
        if line.startswith(b"\xef\xbb\xbf"):
            line = line[3:]
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line:
            continue
        try:
            rows.append(_reference_line(line, seed))
        except ValueError:
            raise ValueError(number_) from None
    return rows


def _reference_line(line, seed):
    head = line.split(b"|", 1)[0]
    if b"\t" in head:  # what precedes a tab in the label section is dropped
        head = head.split(b"\t", 1)[1]
    words = [w for w in head.split(b" ") if w]
    if words and (not head.endswith(b" ") or words[-1].startswith(b"'")):
        words.pop()  # the tag
    if len(words) > 3 or any(b":" in w for w in words[:1]):
        raise ValueError
    label = whole_number(words[0]) if words else math.nan
    importance = whole_number(words[1]) if len(words) > 1 else 1.0
    if importance < 0 or (len(words) > 2 and whole_number(words[2]) != 0):
        raise ValueError  # VW's initial prediction: 0 only
    entries = []
    i, n = line.find(b"|"), len(line)
    while 0 <= i < n and line[i:i + 1] == b"|":  # VW's list_name_space
        i += 1
        # the default namespace's seed: murmurhash3 of the empty string (0 for seed 0)
        letter, ns_seed, weight, ns_name, anon = 32, murmur(b"", seed), 1.0, None, 0
        if line[i:i + 1] == b":":
            raise ValueError  # VW warns: a namespace without a name
        if i < n and line[i:i + 1] not in (b" ", b"\t", b"|", b"\r"):
            j = i
            while j < n and line[j:j + 1] not in (b" ", b":", b"\t", b"|", b"\r"):
                j += 1
            ns_name = line[i:j]
            # the first byte; a NUL's is 0x80 (0 marks an unsigned raw column)
            letter, ns_seed, i = ns_name[0] or 0x80, hashstring(ns_name, seed), j
            if line[i:i + 1] == b":":
                consumed, weight, digits = vw_float(line[i + 1:])
                i += 1 + consumed
                if not consumed or not digits or not math.isfinite(weight) or (
                        i < n and line[i:i + 1] not in (b" ", b"\t", b"|", b"\r")):
                    raise ValueError  # VW reads 0 or a part of it
        while i < n and line[i:i + 1] in (b" ", b"\t"):  # VW's list_features
            i += 1
            if i == n or line[i:i + 1] in (b" ", b"\t", b"|", b"\r"):
                continue
            j = i
            while j < n and line[j:j + 1] not in (b" ", b":", b"\t", b"|", b"\r"):
                j += 1
            name, i, string, v = line[i:j], j, None, weight
            if line[i:i + 1] == b":":
                consumed, value, _ = vw_float(line[i + 1:])
                if consumed:
                    i += 1 + consumed
                    if not math.isfinite(value) or (
                            i < n and line[i:i + 1] not in (b" ", b"\t", b"|", b"\r")):
                        raise ValueError  # VW warns and reads a part of the line
                    v = value * weight
                else:  # a string: blanks skipped, to the next blank; value 1
                    j = i + 1
                    while j < n and line[j:j + 1] in (b" ", b"\t", b"\r"):
                        j += 1
                    k = j
                    while k < n and line[k:k + 1] not in (b" ", b"\t", b"\r"):
                        k += 1
                    string, i, v = line[j:k], k, 1.0
            if string:
                h = hashstring(string, hashstring(name, ns_seed))
            elif name:
                h = hashstring(name, ns_seed)
            else:
                h, anon = (ns_seed + anon) % 2**32, anon + 1
            if v == 0:
                continue  # VW keeps no feature of value 0
            shown = _text(name) + ("^" + _text(string) if string else "")
            entries.append((letter, h, v, shown if ns_name is None
                            else f"{_text(ns_name)}^{shown}"))
    return label, importance, entries


def _text(name):
    return name.decode("utf-8", "backslashreplace")


def parse_all(text, seed=0, audit=False, fast_path=True, skip=False, vw_numbers=True):
    """The compiled parser over one block (with the reader's padding)."""
    parser = _Parser(seed, skip, -1, audit, fast_path, vw_numbers=vw_numbers)
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
    b"0 tag|ns:2 13 013:0.25\n",          # a tag glued to the bar; numeric names
    b"|f a b\n",                           # no label: a line to predict
    b"3 |f a:1|g b:2\n",                   # a bar ends a number
    b"1 | a:+.5 b:5. c:1E2\r\n",          # CRLF, default namespace, number forms
    b"1\n1 2\n1 \n",                       # no bar: the last word touching the end is a tag
    "\n\r\n  \t \n-1 1 |fé héllo:3\n".encode(),  # empty lines; blanks: a row; UTF-8
    b"1 0 |f a\n1 |f a:0 b:-0\n",          # importance 0; value 0: no feature
    # anonymous features (a string value is none), a tab before a string value, blanks
    # before a number, nothing after ':'
    b"1 |f :0.5 x :red :2 y:\t5 z: 7 w: v:\n",
    b"k\t1 2 |f a\n1\t|f a\n",                # what precedes a tab in the label section
    # a string runs through '|'; numbers VW reads as 0 (no feature), dangling exponents,
    # '+', hexadecimal
    b"1 |f a:red|g b c:- d:. e:e5 f:1e g:.5e- h:+3 i:0x1p-2 j:-0x.8\n",
    b"1 |f:2 a:red b:3 c:\n",              # a string's value is 1 whatever the weight
    b"1 |f a\x0bb \x0bc\x0b 12\x0c\x00 |\x0b a\n",  # bytes up to 0x20: name bytes, trimmed
    b"1 |f a\n\xef\xbb\xbf-1 |f b\n",        # a byte order mark at any line's start
    b"1 |f a\rb c |g d\n",                  # a \r inside a line ends its features
    b"1 |g 4294967297 -13 0x1 |7 a\n",      # numbers mod 2**32; numeric namespace
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
    # VW seeds the default namespace with the hash of the empty string (0 for seed 0)
    _, hashes, *_ = parse_all(b"1 | a\n", seed=5)
    assert hashes.tolist() == [murmur(b"a", murmur(b"", 5))] != [murmur(b"a", 5)]
    _, hashes, *_ = parse_all(b"1 | a\n", seed=0)
    assert hashes.tolist() == [murmur(b"a", 0)]
    # models trained before VW's hashing read as they were trained: the seed itself
    _, hashes, *_ = parse_all(b"1 | a 12\n", seed=5, vw_numbers=False)
    assert hashes.tolist() == [murmur(b"a", 5), murmur(b"12", 5)]


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
    (b"1 2 3 |f a\n", 1, 5, "VW's initial prediction '3' (the third number before the "
                            "first '|') is not supported"),
    (b"1 2 0 4 |f a\n", 1, 7, "unexpected '4'"),
    (b"1 |f:x a\n", 1, 6, "bad namespace weight 'x'"),
    (b"1 |:2 a\n", 1, 4, "empty namespace name"),
    (b"1 |f a:1x\n", 1, 8, "bad feature value '1x'"),
    (b"1 |f a:nan\n", 1, 8, "bad feature value 'nan'"),
    (b"1 |f a:1e999\n", 1, 8, "bad feature value '1e999'"),
    (b"1 |f :3x\n", 1, 7, "bad feature value '3x'"),
    (b"1 |f a:1:2\n", 1, 8, "bad feature value '1:2'"),
    (b"1 |f x:0.7\x00\n", 1, 8, "bad feature value '0.7\\x00'"),
    (b"1 |f a:inf\n", 1, 8, "bad feature value 'inf'"),
    (b"1 |f a:1\x0b\n", 1, 8, "bad feature value '1\\x0b'"),
    (b"1 |f a:  1x\n", 1, 10, "bad feature value '1x'"),
    (b"1 |f: a\n", 1, 6, "bad namespace weight ''"),
    (b"1 |f:- a\n", 1, 6, "bad namespace weight '-'"),
    (b"1 x 2 |f a\n", 1, 3, "bad importance weight 'x'"),
    (b"'t 1 |f a\n", 1, 1, "bad label ''t'"),         # a tag is the last word only
    (b"- |f a\n", 1, 1, "bad label '-'"),              # VW reads 0 (with a warning)
    (b"1x |f a\n", 1, 1, "bad label '1x'"),            # VW reads a part of it
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
    text = b"1 |f a\nx |f a\n-1 |f b:1q\n-1 |f b\n"
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
    # as VW's audit names them: a string value after '^' (blanks before it not shown),
    # an anonymous feature by its namespace, no feature of value 0
    names = Names()
    list(iter_vw(io.BytesIO(b"1 |f color:   red a:b:c :2 z:0 | s:t\n"), audit=names))
    assert names.seen == ["f^color^red", "f^a^b:c", "f^", "s^t"]


# ---- fuzzing ------------------------------------------------------------------------
NAME = st.binary(min_size=1, max_size=6).filter(
    lambda b: not any(c in b for c in b" \t\r\n|:'"))
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
