"""The JSON lines reader (onlinepgs.formats.jsonl) against a transcription of its rules
(json + murmurhash3 + hashed columns from triplets), against the CSV reader on the same
real log written as JSON lines, on bad input, compressed files, stdin and every chunk
and block boundary."""
import bz2
import gzip
import io
import json
import lzma
import math
import sys

import numpy as np
import pytest
from hypothesis import strategies as st

from fuzzing import MUTATIONS, fuzzer, mutate
from onlinepgs._core._hashing import murmurhash3
from onlinepgs.formats.csv import iter_csv
from onlinepgs.formats.jsonl import JSONLinesError, iter_jsonl
from shared_data import shared
from test_csv import Audit, assert_close, hashed, head, rows_or_clean_error


def transcribe(lines, hash_seed=0):
    """(entries, labels, weights) of decoded JSON objects by the documented rules."""
    entries, labels, weights = [], [], []
    for obj in lines:
        row = []

        def add(name, value, space):
            seed = hash_seed if space is None else murmurhash3(space, hash_seed)
            letter = 32 if space is None else space.encode()[0]
            prefix = "" if space is None else space + "^"
            if value is None:
                return
            if isinstance(value, str):
                name, value = f"{name}={value}", 1.0
            row.append((letter, murmurhash3(name, seed), float(value), prefix + name))

        for name, value in (obj.get("features") or {}).items():
            if isinstance(value, dict):
                for inner, v in value.items():
                    add(inner, v, name)
            else:
                add(name, value, None)
        entries.append(row)
        label = obj.get("label")
        labels.append(math.nan if label is None else float(label))
        weights.append(obj.get("weight") or 1.0)
    return entries, np.array(labels), np.array(weights)


def read_all(source, n_bits=12, **kw):
    """Every chunk concatenated: (entries, X, y, w or None, reader)."""
    import scipy.sparse as sp

    audit = Audit()
    reader = iter_jsonl(io.BytesIO(source) if isinstance(source, bytes) else source,
                        n_bits=n_bits, audit=audit, **kw)
    chunks = list(reader)
    entries = [[(int(rows.ns[k]), int(rows.hashes[k]), float(rows.values[k]), rows.names[k])
                for k in range(rows.indptr[r], rows.indptr[r + 1])]
               for rows in audit.rows for r in range(rows.n_rows)]
    X = sp.vstack([c[0] for c in chunks], format="csr") if chunks else None
    y = np.concatenate([c[1] for c in chunks]) if chunks else np.zeros(0)
    ws = [c[2] for c in chunks]
    w = None if all(v is None for v in ws) else np.concatenate(
        [np.ones(c[0].shape[0]) if v is None else v for c, v in zip(chunks, ws)])
    return entries, X, y, w, reader


def dump(objs, blank=()):
    """JSON lines of the objects (a blank line after the positions in blank)."""
    out = []
    for i, obj in enumerate(objs):
        out.append(json.dumps(obj, ensure_ascii=i % 2 == 0))
        if i in blank:
            out.append("  ")
    return ("\n".join(out) + "\n").encode() if out else b""


KEY = st.text(st.sampled_from(list("abuv_ =^\"\\é") + ["日"]), max_size=4)
VALUE = st.one_of(st.none(), st.booleans(), st.integers(-10**9, 10**9),
                  st.floats(-1e9, 1e9, allow_nan=False), KEY)
SPACE = st.text(st.sampled_from(list("abuvé")), min_size=1, max_size=3)
OBJ = st.fixed_dictionaries({}, optional={
    "label": st.one_of(st.none(), st.integers(-3, 3), st.floats(-1, 1)),
    "weight": st.one_of(st.none(), st.floats(1e-3, 1e3)),
    "features": st.tuples(st.dictionaries(KEY, VALUE, max_size=4), st.dictionaries(
        SPACE, st.dictionaries(KEY, VALUE, max_size=3), max_size=2)).map(
            lambda parts: {**parts[0], **parts[1]})})


@fuzzer(150, st.lists(OBJ, max_size=10), st.sampled_from([None, 1, 3]),
        st.sampled_from([1, 7, 1 << 20]), st.sampled_from([0, 99]))
def test_generated_lines_match_the_transcription(objs, chunk_rows, block_size, seed):
    data = dump(objs, blank={1, 4})
    want, y0, w0 = transcribe(objs, seed)
    got, X, y, w, reader = read_all(data, chunk_rows=chunk_rows, block_size=block_size,
                                    hash_seed=seed)
    assert got == want
    if want:
        assert_close(X, hashed(want, 12))
    np.testing.assert_array_equal(y, y0)
    if any(o.get("weight") is not None for o in objs):
        np.testing.assert_array_equal(w, w0)
    else:
        assert w is None
    assert reader.n_rows == len(objs) and reader.n_lines == len(objs) + (
        (len(objs) > 1) + (len(objs) > 4))


def test_a_log_as_json_lines_equals_the_csv_reader():
    """Talkingdata's rows, each column a namespace holding its cell as a feature of
    value 1: the CSV reader's columns exactly."""
    data = head(gzip.decompress(shared("talkingdata_100k.csv.gz").read_bytes()), 5_001)
    lines = io.StringIO(data.decode()).read().splitlines()
    header = lines[0].split(",")
    objs = []
    for line in lines[1:]:
        cells = dict(zip(header, line.split(",")))
        objs.append({"label": int(cells.pop("is_attributed")), "features": {
            k: {v: 1} for k, v in cells.items() if k != "attributed_time" and v}})
    _, X, y, w, _ = read_all(dump(objs), n_bits=18)
    Xc, yc = [np.concatenate(a) if i else a for i, a in enumerate(zip(*[
        (c[0], c[1]) for c in iter_csv(io.BytesIO(data), label="is_attributed",
                                       ignore="attributed_time", n_bits=18,
                                       chunk_rows=None)]))]
    assert (X != Xc[0]).nnz == 0 and X.nnz == 5_000 * 6
    np.testing.assert_array_equal(y, yc)


def test_values_of_every_kind():
    line = (b'{"label": true, "weight": 2, "features": {"n": 2.5, "s": "x", "t": true, '
            b'"f": false, "z": null, "user": {"id": "u9", "age": 31}}}\n')
    got, X, y, w, _ = read_all(line)
    su = murmurhash3("user")
    assert got == [[(32, murmurhash3("n"), 2.5, "n"), (32, murmurhash3("s=x"), 1.0, "s=x"),
                    (32, murmurhash3("t"), 1.0, "t"), (32, murmurhash3("f"), 0.0, "f"),
                    (117, murmurhash3("id=u9", su), 1.0, "user^id=u9"),
                    (117, murmurhash3("age", su), 31.0, "user^age")]]
    assert y.tolist() == [1.0] and w.tolist() == [2.0]


@pytest.mark.parametrize("kind", ["gz", "bz2", "xz"])
def test_compressed_files(tmp_path, kind):
    data = dump([{"label": i % 2, "features": {"a": f"v{i}", "n": i}} for i in range(300)])
    path = tmp_path / f"log.jsonl.{kind}"
    path.write_bytes({"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}[kind](data))
    want = read_all(data)
    got = read_all(str(path), chunk_rows=64)
    assert got[0] == want[0] and got[4].source_name == str(path)
    np.testing.assert_array_equal(got[2], want[2])


def test_stdin(monkeypatch):
    data = dump([{"label": 1, "features": {"a": "x"}}])
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    got, X, y, w, reader = read_all("-")
    assert reader.source_name == "<stdin>" and got == read_all(data)[0]


ERRORS = [
    # (line 2 of the source, column, text, message)
    (b'{"label": 1,}', 13, "}", "bad JSON: Expecting property name enclosed in double quotes"),
    (b'{"label": 1} x', 14, "x", "bad JSON: Extra data"),
    (b'[1, 2]', 1, "[1, 2]", "a line must be a JSON object, got a list"),
    (b'{"lable": 1}', 2, "lable", 'unknown key "lable" (a line holds "label", "weight" and'),
    (b'{"label": "1"}', 2, '"1"', "\"label\" must be a number, got a string '\"1\"'"),
    # the number as the line writes it (json reads 1e999 as inf)
    (b'{"label": 1e999}', 2, "Infinity", '"label" is not finite: 1e999'),
    (b'{"features": {"a": -2E400, "b": 1}}', 15, "-Infinity", 'feature "a" is not finite: -2E400'),
    (b'{"weight": 0}', 2, "0", '"weight" must be positive, got 0.0'),
    (b'{"weight": -2.5}', 2, "-2.5", '"weight" must be positive'),
    (b'{"features": [1]}', 2, "[1]", '"features" must be an object of features, got a list'),
    (b'{"features": {"a": [1]}}', 15, "[1]", 'feature "a" must be a number, got a list'),
    (b'{"features": {"a": NaN}}', 15, "NaN", 'feature "a" is not finite: NaN'),
    (b'{"features": {"u": {"v": {}}}}', 21, "v",
     'feature "v" of namespace "u" is an object: namespaces do not nest'),
    (b'{"features": {"": {"a": 1}}}', 15, "", "a namespace has an empty name"),
    (b'{"features": {"a": "\xff"}}', 21, "\\xff", "not UTF-8 text: '\\xff"),
    # a lone surrogate escaped in the JSON has no UTF-8 to hash (was a UnicodeEncodeError)
    (b'{"features": {"\\ud800": 1}}', 15, '"\\ud800"',
     'feature "\\ud800" is not valid Unicode'),
    (b'{"\\ud800": 1}', 2, "\ud800", 'unknown key "\\ud800"'),
]


@pytest.mark.parametrize("line, column, text, message", ERRORS)
def test_errors(line, column, text, message):
    with pytest.raises(JSONLinesError) as info:
        list(iter_jsonl(io.BytesIO(b'{"label": 1}\n' + line + b"\n")))
    e = info.value
    assert (e.source, e.line, e.column, e.text) == ("<stream>", 2, column, text)
    assert str(e).startswith(f"<stream>:2:{column}: {message}")


def test_skip_drops_exactly_the_bad_lines():
    good = [{"label": 1, "features": {"a": "x"}}, {"label": 0, "weight": 3},
            {"features": {"u": {"b": 2}}}]
    data = (dump(good[:1]) + b'{"label": [}\n' + dump(good[1:2]) + b'{"features": 1}\n'
            + b"\xff\n" + dump(good[2:]))
    got, X, y, w, reader = read_all(data, on_error="skip", chunk_rows=1)
    assert got == transcribe(good)[0]
    np.testing.assert_array_equal(y, [1, 0, np.nan])
    np.testing.assert_array_equal(w, [1, 3, 1])
    assert (reader.n_rows, reader.n_skipped, reader.n_lines) == (3, 3, 6)


@fuzzer(150, st.lists(OBJ, min_size=1, max_size=6), MUTATIONS, st.sampled_from(["raise", "skip"]))
def test_damaged_lines_give_a_clean_error(objs, mutations, on_error):
    rows_or_clean_error(lambda: iter_jsonl(io.BytesIO(mutate(dump(objs), mutations)),
                                           n_bits=8, chunk_rows=2, block_size=5,
                                           on_error=on_error), JSONLinesError)


@fuzzer(150, st.binary(max_size=100))
def test_random_bytes_give_rows_or_a_clean_error(data):
    try:
        list(iter_jsonl(io.BytesIO(data), n_bits=6))
    except JSONLinesError as e:
        assert e.line >= 1


def test_deep_nesting_is_a_clean_error():
    with pytest.raises(JSONLinesError, match="<stream>:1"):
        list(iter_jsonl(io.BytesIO(b"[" * 100_000 + b"]" * 100_000 + b"\n")))


@pytest.mark.parametrize("kw, message", [
    (dict(n_bits=33), r"n_bits must be an int in \[1, 32\]"),
    (dict(chunk_rows=0), "chunk_rows must be"),
    (dict(interactions="ab"), "interactions must be a list of strings"),
])
def test_parameter_errors(kw, message):
    with pytest.raises(ValueError, match=message):
        iter_jsonl(io.BytesIO(b""), **kw)


@pytest.mark.parametrize("chunk_rows", [None, 2])
def test_skip_of_bad_features_keeps_the_lines_around_them(chunk_rows):
    """Bad feature values are found by the compiled records_to_rows over many lines at
    once: the good lines before and after a bad one keep their rows, in order."""
    good = [{"label": i, "features": {"a": f"x{i}", "u": {"n": i + 1}}} for i in range(5)]
    bad = [{"features": {"a": [1]}}, {"features": {"u": {"v": {}}}}]
    data = dump(good[:2] + bad[:1] + good[2:4] + bad[1:] + good[4:])
    got, X, y, w, reader = read_all(data, on_error="skip", chunk_rows=chunk_rows)
    assert got == transcribe(good)[0]
    np.testing.assert_array_equal(y, np.arange(5))
    assert (reader.n_rows, reader.n_skipped, reader.n_lines) == (5, 2, 7)
    with pytest.raises(JSONLinesError, match=r'^<stream>:3:15: feature "a" must be'):
        read_all(data, chunk_rows=chunk_rows)


def test_an_integer_beyond_pythons_digit_limit_is_a_located_error_or_skipped():
    """Python reads at most 4,300 digits of an integer literal: json.loads raised a bare
    ValueError (no file, no line), also in skip mode. It is a located error (the column
    of the literal), and skip mode skips and counts the line."""
    digits = "1" * 5000
    data = (b'{"label": 1, "features": {"a": 1}}\n'
            + f'{{"label": 1, "features": {{"big": {digits}}}}}\n'.encode()
            + b'{"label": 0, "features": {"b": 1}}\n')
    with pytest.raises(JSONLinesError) as info:
        read_all(data)
    e = info.value
    assert (e.source, e.line, e.column) == ("<stream>", 2, 34)
    assert str(e).startswith("<stream>:2:34: bad JSON: an integer of 5,000 digits is out "
                             "of range")
    got, X, y, w, reader = read_all(data, on_error="skip")
    np.testing.assert_array_equal(y, [1, 0])
    assert (reader.n_skipped, str(reader.first_skipped)) == (1, str(e))


@pytest.mark.parametrize("bad", ['{"features": {"a": [1]}}', '{"label": "x"}'])
def test_skipping_hashes_each_line_once(bad, monkeypatch):
    """Skip mode read the rest of a chunk's lines again (a copy) at each bad feature:
    quadratic in the chunk (20,000 bad rows 1.8 s against 0.1 s for good ones). Counted,
    not timed: the records handed to the hashing over a chunk of bad lines between good
    ones are at most the chunk's lines (the quadratic handed n^2 / 2)."""
    from onlinepgs.formats import jsonl

    handed = []

    def counting(records, *args, **kwargs):
        records = list(records)
        handed.append(len(records))
        return records_to_rows(records, *args, **kwargs)

    records_to_rows = jsonl.records_to_rows
    monkeypatch.setattr(jsonl, "records_to_rows", counting)
    n = 2_000
    good = '{"label": 1, "features": {"a": 1, "b": "x"}}\n'
    data = ((good + bad + "\n") * n).encode()
    reader = iter_jsonl(io.BytesIO(data), on_error="skip", chunk_rows=None)
    rows = sum(chunk[0].shape[0] for chunk in reader)
    assert (rows, reader.n_skipped) == (n, n)
    assert sum(handed) <= 2 * n, sum(handed)
