"""The CSV/TSV log reader (onlinepgs.formats.csv) against a plain-Python transcription of
its rules: Python's csv module splits the fields, murmurhash3 hashes them, NumPy builds
the hashed columns; on generated tables, on the shared click and flight logs, on bad
input (errors, skip), compressed files, stdin and every chunk and block boundary."""
import bz2
import csv
import gzip
import io
import lzma
import math
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import strategies as st

from fuzzing import MUTATIONS, fuzzer, mutate
from onlinepgs._core._hashing import murmurhash3
from onlinepgs.formats.csv import CSVError, iter_csv
from shared_data import shared


class Audit:
    """A collector keeping every chunk's namespaced rows (the reader's raw entries)."""

    def __init__(self):
        self.rows = []

    def add(self, rows, spec):
        self.rows.append(rows)


# ---- the transcription ----------------------------------------------------------------
def transcribe(data, label=None, weight=None, numeric=(), ignore=(), delimiter=",",
               hash_seed=0, label_map=None):
    """(entries, labels, weights) of a CSV source by the documented rules: entries a list
    per row of (letter, hash, value, name)."""
    text = data.decode("utf-8-sig")
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    header = next(reader)
    seeds = [murmurhash3(name, hash_seed) for name in header]
    entries, labels, weights = [], [], []
    for fields in reader:
        if not fields:  # a blank line
            continue
        assert len(fields) == len(header)
        row, y, w = [], math.nan, 1.0
        for name, seed, cell in zip(header, seeds, fields):
            letter = name.encode()[0]
            if name == label:
                if label_map and cell in label_map:
                    y = float(label_map[cell])
                elif cell:
                    y = float(cell)
            elif name == weight:
                w = float(cell)
            elif name in ignore or not cell:
                continue
            elif name in numeric:
                row.append((letter, murmurhash3(name, seed), float(cell), f"{name}^{name}"))
            else:
                row.append((letter, murmurhash3(cell, seed), 1.0, f"{name}^{cell}"))
        entries.append(row)
        labels.append(y)
        weights.append(w)
    return entries, np.array(labels), np.array(weights)


def hashed(entries, n_bits):
    """The hashed columns of the entries, built from triplets: column h & mask, value
    negated when the hash's top bit is set, collisions summed (scipy's COO rule)."""
    rows, cols, vals = [], [], []
    for i, row in enumerate(entries):
        for _, h, v, _ in row:
            rows.append(i)
            cols.append(h & (2**n_bits - 1))
            vals.append(-v if h >> 31 else v)
    return sp.coo_matrix((vals, (rows, cols)), shape=(len(entries), 2**n_bits)).tocsr()


def assert_close(X, Y):
    """Two sparse matrices equal to rounding (sums in another order)."""
    assert X.shape == Y.shape
    diff = abs(X - Y)
    assert diff.nnz == 0 or diff.max() <= 1e-12 * max(1.0, abs(Y).max())


def read_all(data, n_bits=12, **kw):
    """Every chunk of iter_csv concatenated: (entries as the transcription's, X,
    y, w, reader)."""
    audit = Audit()
    reader = iter_csv(io.BytesIO(data) if isinstance(data, bytes) else data,
                      n_bits=n_bits, audit=audit, **kw)
    chunks = list(reader)
    entries = []
    for rows in audit.rows:
        for r in range(rows.n_rows):
            a, b = rows.indptr[r], rows.indptr[r + 1]
            entries.append([(int(rows.ns[k]), int(rows.hashes[k]), float(rows.values[k]),
                             rows.names[k]) for k in range(a, b)])
    X = sp.vstack([c[0] for c in chunks], format="csr") if chunks else \
        sp.csr_matrix((0, 2**n_bits))
    y = np.concatenate([c[1] for c in chunks]) if chunks else np.zeros(0)
    ws = [c[2] for c in chunks]
    w = None if not chunks or ws[0] is None else np.concatenate(ws)
    return entries, X, y, w, reader


def assert_agrees(data, n_bits=12, **kw):
    """The reader equals the transcription on data (entries exactly, X to rounding)."""
    roles = {k: v for k, v in kw.items() if k in ("label", "weight", "numeric", "ignore",
                                                   "delimiter", "hash_seed", "label_map")}
    want, y0, w0 = transcribe(data, **roles)
    got, X, y, w, reader = read_all(data, n_bits=n_bits, **kw)
    assert got == want
    assert_close(X, hashed(want, n_bits))
    np.testing.assert_array_equal(y, y0)
    if kw.get("weight") is None:
        assert w is None
    else:
        np.testing.assert_array_equal(w, w0)
    assert reader.n_rows == len(want)
    return reader


# ---- generated tables ---------------------------------------------------------------
CELL = st.text(st.sampled_from(list("abc ,;\t\"'x=é|^") + ["日"]), max_size=6)
NAMES = st.lists(st.text(st.sampled_from(list("abuvx_ ,\"é")), min_size=1, max_size=4),
                 min_size=1, max_size=6, unique=True)


@st.composite
def tables(draw):
    """(bytes, roles): a table csv.writer writes, its roles drawn at random."""
    delimiter = draw(st.sampled_from([",", "\t", ";", "|"]))
    names = draw(NAMES)
    kinds = {n: draw(st.sampled_from(["label", "weight", "numeric", "categorical",
                                      "ignore", None])) for n in names}
    label = next((n for n in names if kinds[n] == "label"), None)
    weight = next((n for n in names if kinds[n] == "weight"), None)
    numeric = [n for n in names if kinds[n] == "numeric"]
    ignore = [n for n in names if kinds[n] == "ignore"]
    number = st.one_of(st.integers(-10**6, 10**6).map(str),
                       st.floats(-1e6, 1e6, allow_nan=False).map(repr))
    rows = []
    for _ in range(draw(st.integers(0, 12))):
        row = []
        for n in names:
            if n == label:
                row.append(draw(st.one_of(number, st.just(""))))
            elif n == weight:
                row.append(draw(st.floats(1e-3, 1e3).map(repr)))
            elif n in numeric:
                row.append(draw(st.one_of(number, st.just(""))))
            else:
                row.append(draw(CELL))
        rows.append(row)
    out = io.StringIO()
    writer = csv.writer(out, delimiter=delimiter, lineterminator="\n")
    writer.writerow(names)
    for row in rows:
        writer.writerow(row)
        if draw(st.booleans()) and draw(st.booleans()):
            out.write("\n")  # a blank line (not a row)
    kw = dict(label=label, weight=weight, numeric=numeric, ignore=ignore,
              delimiter=delimiter, hash_seed=draw(st.sampled_from([0, 7, 2**32 - 1])))
    return out.getvalue().encode("utf-8"), kw


@fuzzer(150, tables(), st.sampled_from([None, 1, 2, 5]), st.sampled_from([1, 3, 64, 1 << 20]))
def test_generated_tables_match_the_transcription(table, chunk_rows, block_size):
    data, kw = table
    assert_agrees(data, chunk_rows=chunk_rows, block_size=block_size, **kw)


@fuzzer(150, tables(), MUTATIONS, st.sampled_from(["raise", "skip"]))
def test_damaged_tables_give_a_clean_error(table, mutations, on_error):
    """Random edits of a valid table: rows, or a CSVError naming its line; never a crash
    or another exception."""
    data, kw = table
    rows_or_clean_error(lambda: iter_csv(io.BytesIO(mutate(data, mutations)), n_bits=8,
                                         chunk_rows=2, block_size=7, on_error=on_error,
                                         **kw), CSVError)


def rows_or_clean_error(make_reader, error_class):
    """The reader's chunks are whole, or it raises error_class naming a line."""
    try:
        for X, y, w in make_reader():
            assert X.shape[0] == y.shape[0] and (w is None or w.shape == y.shape)
    except error_class as e:
        assert e.line >= 1 and str(e).startswith(f"<stream>:{e.line}")


@fuzzer(200, st.binary(max_size=200))
def test_random_bytes_give_rows_or_a_clean_error(data):
    try:
        list(iter_csv(io.BytesIO(b"a,b\n" + data), numeric=["b"], n_bits=6))
    except CSVError as e:
        assert e.line >= 1


# ---- real logs ----------------------------------------------------------------------
def head(data, n):
    """The first n lines of data."""
    return b"".join(io.BytesIO(data).readlines()[:n])


def test_talkingdata_log():
    path = shared("talkingdata_100k.csv.gz")
    kw = dict(label="is_attributed", ignore=["attributed_time"])
    # the transcription (slow: Python) on a part, the reader on the whole file
    reader = assert_agrees(head(gzip.decompress(path.read_bytes()), 25_001), n_bits=18,
                           chunk_rows=7_000, **kw)
    assert reader.roles["ip"] == "categorical" and reader.columns[-1] == "is_attributed"
    reader = iter_csv(path, **kw)
    y = np.concatenate([y for _, y, _ in reader])
    assert reader.n_rows == 100_000 and reader.n_lines == 100_001
    assert y.sum() == 227  # the data README: 0.227% positive


def test_flight_delays_log_with_a_label_map():
    path = shared("flight_delays_100k.csv.gz")
    kw = dict(label="dep_delayed_15min", numeric=["DepTime", "Distance"],
              label_map={"Y": 1, "N": -1})
    assert_agrees(head(gzip.decompress(path.read_bytes()), 25_001), n_bits=18, **kw)
    y = np.concatenate([y for _, y, _ in iter_csv(path, **kw)])
    assert y.shape == (100_000,) and set(y) == {-1.0, 1.0}
    assert np.mean(y == 1) == pytest.approx(0.19, abs=0.005)  # the data README's 19.0% Y


# ---- the format's details -----------------------------------------------------------
def test_quotes_crlf_bom_and_blank_lines():
    data = (b'\xef\xbb\xbfy,"a,b",c\r\n1,"x ""q"", z",3\r\n\r\n,"",\n'
            b'0,"",""\n')
    got, X, y, w, reader = read_all(data, label="y", numeric=["c"])
    sa, sc = murmurhash3("a,b"), murmurhash3("c")
    assert got == [[(97, murmurhash3('x "q", z', sa), 1.0, 'a,b^x "q", z'),
                    (99, murmurhash3("c", sc), 3.0, "c^c")], [], []]
    np.testing.assert_array_equal(y, [1.0, np.nan, 0.0])
    assert reader.columns == ["y", "a,b", "c"]
    assert (reader.n_lines, reader.n_rows, reader.n_skipped) == (5, 3, 0)


def test_tsv_and_a_quote_inside_an_unquoted_field():
    data = b'y\tname\n1\tsay "hi"\n'
    assert_agrees(data, label="y", delimiter="\t")
    got = read_all(data, label="y", delimiter="\t")[0]
    assert got[0][0][3] == 'name^say "hi"'


def test_weights_label_map_and_a_column_in_no_role():
    data = b"w,y,user\n2.5,yes,u1\n0.5,no,u2\n1,-3,\n"
    got, X, y, w, _ = read_all(data, label="y", weight="w", label_map={"yes": 1, "no": 0})
    np.testing.assert_array_equal(y, [1.0, 0.0, -3.0])
    np.testing.assert_array_equal(w, [2.5, 0.5, 1.0])
    assert [len(r) for r in got] == [1, 1, 0]  # user is categorical; its empty cell: none


def test_label_none_gives_nan_labels_and_every_column_is_a_feature():
    got, X, y, w, _ = read_all(b"a,b\n1,2\n")
    assert np.isnan(y).all() and w is None
    assert [e[3] for e in got[0]] == ["a^1", "b^2"]


@pytest.mark.parametrize("chunk_rows", [1, 2, 3, 7, None])
@pytest.mark.parametrize("block_size", [1, 2, 5, 17, 1 << 20])
def test_chunks_and_blocks_do_not_change_the_rows(chunk_rows, block_size):
    lines = [b"y,u,v,n"] + [b'%d,u%d,"v,%d",%d.5' % (i % 2, i % 7, i % 3, i)
                            for i in range(23)]
    data = b"\n".join(lines) + b"\n"
    reader = iter_csv(io.BytesIO(data), label="y", numeric="n", chunk_rows=chunk_rows,
                      block_size=block_size, n_bits=10)
    chunks = list(reader)
    if chunk_rows:
        assert [c[0].shape[0] for c in chunks] == [min(chunk_rows, 23 - i)
                                                   for i in range(0, 23, chunk_rows)]
    assert_agrees(data, n_bits=10, label="y", numeric=["n"], chunk_rows=chunk_rows,
                  block_size=block_size)


@pytest.mark.parametrize("kind", ["gz", "bz2", "xz"])
def test_compressed_files(tmp_path, kind):
    data = b"y,a,n\n" + b"".join(b"%d,a%d,%d\n" % (i % 2, i, i) for i in range(500))
    path = tmp_path / f"log.csv.{kind}"
    path.write_bytes({"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}[kind](data))
    want = read_all(data, label="y", numeric=["n"])
    got = read_all(str(path), label="y", numeric=["n"], chunk_rows=64)
    assert got[0] == want[0]
    np.testing.assert_array_equal(got[2], want[2])
    assert got[4].source_name == str(path) and got[4].bytes_read == path.stat().st_size


def test_stdin(monkeypatch):
    data = b"y,a\n1,x\n0,z\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(gzip.compress(data))))
    got, X, y, w, reader = read_all("-", label="y")
    assert reader.source_name == "<stdin>" and got == read_all(data, label="y")[0]


# ---- errors -------------------------------------------------------------------------
ERRORS = [
    # (data, kwargs, line, column, text, message part)
    (b"y,n\n1,2\n0,x1\n", dict(label="y", numeric=["n"]), 3, 3, "x1",
     "bad number 'x1' in column 'n' (field 2)"),
    (b"y,n\n1,nan\n", dict(label="y", numeric=["n"]), 2, 3, "nan", "bad number 'nan'"),
    (b"y,n\n1,1e999\n", dict(label="y", numeric=["n"]), 2, 3, "1e999", "bad number"),
    (b"y,n\n1,2\nyes,3\n", dict(label="y", numeric=["n"]), 3, 1, "yes",
     "bad label 'yes' in column 'y' (field 1): not a number (a label_map can"),
    (b"w,n\n0,2\n", dict(weight="w"), 2, 1, "0", "bad weight '0' in column 'w'"),
    (b"w,n\n,2\n", dict(weight="w"), 2, 1, "", "bad weight '' in column 'w'"),
    (b"w,n\n-1,2\n", dict(weight="w"), 2, 1, "-1",
     "bad weight '-1' in column 'w' (field 1): not a positive number"),
    (b"a,b\n1,2,3\n", {}, 2, 5, "3", "more fields than the header's 2: extra text '3'"),
    (b"a,b,c\n1,2\n", {}, 2, 4, "", "2 fields where the header has 3"),
    (b'a,b\n1,"x"y\n', {}, 2, 6, "y", "text after the closing quote of field 2 ('b')"),
    (b'a,b\n1,"x\n2,y"\n', {}, 2, 3, '"x', "quote not closed on its line in field 2"),
    (b'a,"b\n', {}, 1, 3, '"b', "quote not closed on its line in field 2"),
    (b"\n1,2\n", {}, 1, 1, "", "empty header line"),
]


@pytest.mark.parametrize("data, kw, line, column, text, message", ERRORS)
def test_errors(data, kw, line, column, text, message):
    with pytest.raises(CSVError) as info:
        list(iter_csv(io.BytesIO(data), **kw))
    e = info.value
    assert (e.source, e.line, e.column, e.text) == ("<stream>", line, column, text)
    assert str(e).startswith(f"<stream>:{line}:{column}: {message}")


@pytest.mark.parametrize("data, kw, message", [
    (b"", {}, "<stream>:1: empty source: a CSV source starts with a header line"),
    (b"a,b\n", dict(label="y"),
     "<stream>:1: the label column 'y' is not in the header (columns: a, b)"),
    (b"a,b\n", dict(numeric=["a", "q"]), "<stream>:1: the numeric column 'q' is not in the"),
    (b"a,a\n", {}, "<stream>:1: column 'a' appears twice in the header (fields 1 and 2)"),
    (b"a,,b\n", {}, "<stream>:1: column 2 has an empty name"),
    (b"a,\xff\n", {}, "<stream>:1: column 2's name is not UTF-8 text"),
])
def test_header_errors(data, kw, message):
    with pytest.raises(CSVError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        list(iter_csv(io.BytesIO(data), on_error="skip", **kw))


@pytest.mark.parametrize("kw, message", [
    (dict(label="a", categorical=["a"]), "column 'a' is given two roles: label and "
                                         "categorical"),
    (dict(numeric="b", ignore=("c", "b")), "column 'b' is given two roles: numeric and ignore"),
    (dict(label=["a"]), "label must be a column name or None"),
    (dict(delimiter=",,"), "delimiter must be one ASCII character"),
    (dict(delimiter='"'), "delimiter must be one ASCII character"),
    (dict(n_bits=0), r"n_bits must be an int in \[1, 32\]"),
    (dict(hash_seed=-1), r"hash_seed must be an int in \[0, 2\*\*32\)"),
    (dict(on_error="ignore"), "on_error must be"),
    (dict(label_map={"Y": "1"}), "label_map maps texts to numbers"),
    (dict(label_map={"Y": math.inf}), "label_map: the label of 'Y' is not finite"),
])
def test_parameter_errors(kw, message):
    with pytest.raises(ValueError, match=message):
        iter_csv(io.BytesIO(b"a,b,c\n"), **kw)


def test_skip_drops_exactly_the_bad_lines():
    good = [b"1,a,1", b"0,b,2", b"1,c,3", b"0,d,4"]
    bad = [b"1,x,oops", b"1,x", b'1,"x"x,3', b"q,x,1", b"1,x,1,1"]
    lines = [good[0], bad[0], bad[1], good[1], bad[2], good[2], bad[3], bad[4], good[3]]
    data = b"y,c,n\n" + b"\n".join(lines) + b"\n"
    got, X, y, w, reader = read_all(data, label="y", numeric=["n"], on_error="skip",
                                    chunk_rows=2)
    want = transcribe(b"y,c,n\n" + b"\n".join(good) + b"\n", label="y", numeric=["n"])
    assert got == want[0]
    np.testing.assert_array_equal(y, want[1])
    assert (reader.n_rows, reader.n_skipped, reader.n_lines) == (4, 5, 10)


def test_chunks_before_an_error_are_whole():
    data = b"y,n\n" + b"".join(b"1,%d\n" % i for i in range(10)) + b"1,bad\n"
    reader = iter_csv(io.BytesIO(data), label="y", numeric=["n"], chunk_rows=4)
    sizes = []
    with pytest.raises(CSVError, match="<stream>:12:3:"):
        for X, y, w in reader:
            sizes.append(X.shape[0])
    assert sizes == [4, 4]


def test_corrupt_gzip_names_the_line():
    data = gzip.compress(b"y,a\n" + b"".join(b"1,a%d\n" % i for i in range(20000)))
    with pytest.raises(CSVError, match="truncated or corrupt gzip stream"):
        list(iter_csv(io.BytesIO(data[:len(data) // 2]), label="y"))


def test_interactions_cross_the_columns_letters():
    """A pair of columns' letters crosses their entries by the DESIGN formula."""
    pytest.importorskip("onlinepgs._core._features")  # the interactions kernel
    data = b"y,app,os\n1,game,ios\n"
    got, X, *_ = read_all(data, n_bits=16, label="y", interactions=["ao"])
    (_, ha, va, _), (_, ho, vo, _) = got[0]
    h = ((ha * 16777619) & 0xFFFFFFFF) ^ ho
    assert_close(X, hashed([got[0] + [(0, h, va * vo, "")]], 16))


def test_a_learner_on_the_hashed_log_matches_it_on_an_exact_one_hot():
    """Flights, one pass of PGSClassifier: on the reader's hashed columns, the test AUC
    of the same learner on an exact one-hot encoding built here (column=value -> its own
    column) to within collisions' noise, and far from chance."""
    from sklearn.metrics import roc_auc_score

    from onlinepgs import PGSClassifier

    path = shared("flight_delays_100k.csv.gz")
    kw = dict(label="dep_delayed_15min", label_map={"Y": 1, "N": -1})
    X = sp.vstack([X for X, _, _ in iter_csv(path, **kw)], format="csr")
    rows = list(csv.reader(io.StringIO(gzip.decompress(path.read_bytes()).decode())))
    header, rows = rows[0], rows[1:]
    y = np.array([1.0 if r[-1] == "Y" else -1.0 for r in rows])
    index = {}
    cols = [[index.setdefault((j, cell), len(index)) for j, cell in enumerate(r[:-1])]
            for r in rows]
    onehot = sp.csr_matrix((np.ones(8 * len(rows)), np.ravel(cols),
                            np.arange(0, 8 * len(rows) + 1, 8)), shape=(len(rows), len(index)))
    split = 70_000
    aucs = []
    for M in (X, onehot):
        clf = PGSClassifier(loss="logistic", random_state=0)
        for start in range(0, split, 10_000):
            clf.partial_fit(M[start:start + 10_000], y[start:start + 10_000], classes=[-1, 1])
        aucs.append(roc_auc_score(y[split:], clf.decision_function(M[split:])))
    assert aucs[0] > 0.65 and abs(aucs[0] - aucs[1]) < 0.005, aucs


class Generated:
    """A file object of n CSV rows made as they are read (never held whole)."""

    def __init__(self, n):
        self.rows = (b"%d,u%d,%d.25\n" % (i % 2, i % 1000, i) for i in range(n))
        self.head = b"y,user,x\n"

    def read(self, size):
        while len(self.head) < size:
            row = next(self.rows, None)
            if row is None:
                break
            self.head += row
        out, self.head = self.head[:size], self.head[size:]
        return out


def test_memory_does_not_grow_with_the_source():
    """120,000 rows (2.8 MB) in chunks of 1,000: the peak of traced memory (the parser's
    buffers are PyMem_Raw, which tracemalloc sees) stays that of a few chunks."""
    import tracemalloc

    tracemalloc.start()
    try:
        reader = iter_csv(Generated(120_000), label="y", numeric="x", chunk_rows=1_000,
                          block_size=1 << 16)
        n = sum(X.shape[0] for X, _, _ in reader)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert n == 120_000 and peak < 1 << 20, peak


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"])
def test_header_false_reads_the_first_line_as_a_row(bom):
    """header=False: columns named "1", "2", ... by position, every line a row (a byte
    order mark dropped): the rows of the same lines under the header "1,2,3"."""
    body = b"1,x,0.5\n0,y,\n1,,2\n"
    kw = dict(label="1", numeric=["3"], n_bits=8, chunk_rows=None)
    X, y, _ = next(iter(iter_csv(io.BytesIO(bom + body), header=False, **kw)))
    X2, y2, _ = next(iter(iter_csv(io.BytesIO(b"1,2,3\n" + body), **kw)))
    assert (X != X2).nnz == 0 and X.shape == (3, 256)
    np.testing.assert_array_equal(y, [1, 0, 1])
    np.testing.assert_array_equal(y, y2)
    with pytest.raises(CSVError, match="without a header its columns are named 1 to 3"):
        list(iter_csv(io.BytesIO(body), header=False, label="y"))
    with pytest.raises(CSVError, match="the first line looks like data"):
        list(iter_csv(io.BytesIO(b"1,1,3\n" + body)))
    with pytest.raises(ValueError, match="header must be True"):
        iter_csv(io.BytesIO(body), header="no")
