"""VW text read as Vowpal Wabbit reads it (issue 50, item 21): the constructs its own test
files use, against VW's parser where the `vowpalwabbit` package is installed and against
the closed forms of its hashing rules always; models trained before the numeric-name rule
keep reading as they were trained."""
import io
import os

import numpy as np
import pytest

from onlinepgs.formats.vw import VWError, iter_vw
from test_vw import hashstring, murmur

import vw_compare

MASK = 2**18 - 1
F = murmur(b"f", 0)  # the seed of namespace "f"


def rows(text, **options):
    """Each row's (letter, column, value) of VW text, from the reader's raw hashes."""
    path = io.BytesIO(text)
    got = []
    reader = iter_vw(path, n_bits=18, chunk_rows=None, **options)
    parser = reader._parser

    def take():
        ns, hashes, values, indptr, labels, weights, _ = parser.take_chunk()
        for r in range(len(labels)):
            got.append(sorted((int(ns[k]), int(hashes[k]) & MASK, float(values[k]))
                              for k in range(indptr[r], indptr[r + 1])))
        return None
    reader._take = take
    for _ in reader:
        pass
    return got


F_ = ord("f")
CASES = [  # line, its features as VW's rules give them (the closed forms)
    (b"1 |f a b:2", [(F_, murmur(b"a", F), 1.0), (F_, murmur(b"b", F), 2.0)]),
    (b"1 |f :0.5 :0.25 x", [(F_, F, 0.5), (F_, F + 1, 0.25), (F_, murmur(b"x", F), 1.0)]),
    (b"1 |f x :1 y :2", [(F_, murmur(b"x", F), 1.0), (F_, F, 1.0),
                         (F_, murmur(b"y", F), 1.0), (F_, F + 1, 2.0)]),
    (b"1 |f:2 a :3", [(F_, murmur(b"a", F), 2.0), (F_, F, 6.0)]),
    (b"1 | :5 :6", [(32, 0, 5.0), (32, 1, 6.0)]),
    (b"0 1 0 'tag |f a", [(F_, murmur(b"a", F), 1.0)]),
    (b"1 |f happiness:true color:red", [(F_, murmur(b"true", murmur(b"happiness", F)), 1.0),
                                        (F_, murmur(b"red", murmur(b"color", F)), 1.0)]),
    (b"1 |f color:   red", [(F_, murmur(b"red", murmur(b"color", F)), 1.0)]),
    (b"1 |f a:b:c", [(F_, murmur(b"b:c", murmur(b"a", F)), 1.0)]),
    (b"1 |f a: 2 b:", [(F_, murmur(b"a", F), 2.0), (F_, murmur(b"b", F), 1.0)]),
    (b"1 |f 123:1 013", [(F_, (123 + F) % 2**32, 1.0), (F_, (13 + F) % 2**32, 1.0)]),
    (b"1 |f 4294967297 -13", [(F_, (1 + F) % 2**32, 1.0), (F_, murmur(b"-13", F), 1.0)]),
    (b"1 | 123:1 a", [(32, 123, 1.0), (32, murmur(b"a", 0), 1.0)]),
    (b"1 |123 a", [(ord("1"), murmur(b"a", 123), 1.0)]),
    (b"\xef\xbb\xbf1 |f a", [(F_, murmur(b"a", F), 1.0)]),
    # a string value is no anonymous feature: the next ":value" is still the first
    (b"1 |f x :red :1", [(F_, murmur(b"x", F), 1.0), (F_, murmur(b"red", F), 1.0),
                         (F_, F, 1.0)]),
    # a string runs to the next blank, '|' included
    (b"1 |f a:red|g b", [(F_, murmur(b"red|g", murmur(b"a", F)), 1.0),
                         (F_, murmur(b"b", F), 1.0)]),
    # what VW's parse_float reads as 0 (no feature), or with a dangling exponent, or in hex
    (b"1 |f a:- b:. c:e5 d:1e e:.5e- g:0x1p-2", [(F_, murmur(b"d", F), 1.0),
                                                 (F_, murmur(b"e", F), 0.5),
                                                 (F_, murmur(b"g", F), 0.25)]),
    (b"1 |f a: ", []),  # blanks after ':' then the end: VW reads 0
    # a string's value is 1 whatever the namespace's weight; a number's is multiplied
    (b"1 |f:2 a:red c:3 b:", [(F_, murmur(b"red", murmur(b"a", F)), 1.0),
                              (F_, murmur(b"b", F), 1.0), (F_, murmur(b"c", F), 6.0)]),
    (b"1 |f b: c:3", [(F_, murmur(b"c:3", murmur(b"b", F)), 1.0)]),  # blanks, then "c:3"
    (b"1 |f y:\t5", [(F_, (5 + murmur(b"y", F)) % 2**32, 1.0)]),  # a tab: a string "5"
    # bytes up to 0x20 but blanks are a name's, trimmed at both ends by VW's hashstring
    (b"1 |f a\x0bb \x0bc\x0b \x0c12", [(F_, murmur(b"a\x0bb", F), 1.0),
                                        (F_, murmur(b"c", F), 1.0), (F_, F + 12, 1.0)]),
    (b"1 |f a\rb c", [(F_, murmur(b"a", F), 1.0)]),  # a \r inside a line ends it
    (b"1 |f a:0 :0 :2", [(F_, F + 1, 2.0)]),  # no feature of value 0 (counted if anonymous)
]


@pytest.mark.parametrize("line, want", CASES)
def test_each_construct_is_read_as_vw_hashes_it(line, want):
    """Anonymous features (the namespace's hash plus k), VW's initial prediction of 0,
    string values (chained hashes), blanks after ':', numeric names (the number plus the
    namespace's hash, also of a numeric namespace), a byte order mark: each line's
    columns are VW's hashing rules' closed forms, and VW's parser's where installed."""
    got, = rows(line + b"\n")
    assert got == sorted((letter, h & MASK, v) for letter, h, v in want)
    assert hashstring(b"123", F) == (123 + F) % 2**32
    assert_read_as_vw_reads(line + b"\n")


def assert_read_as_vw_reads(text, hash_seed=0):
    """Where the vowpalwabbit package is installed: the text reads as VW's parser reads
    it (vw_compare: rows, labels, weights, letters, columns, values)."""
    try:
        import vowpalwabbit  # noqa: F401
    except ImportError:
        return
    import tempfile

    with tempfile.NamedTemporaryFile("wb", suffix=".vw", delete=False) as f:
        f.write(text)
    try:
        result = vw_compare.compare(f.name, 18, hash_seed)
        assert result[0] in vw_compare.SAME, result
    finally:
        os.unlink(f.name)


def labels_of(text, **options):
    ys, ws = [], []
    for _, y, w in iter_vw(io.BytesIO(text), **options):
        ys.extend(y)
        ws.extend(np.ones(len(y)) if w is None else w)
    return ys, ws


@pytest.mark.parametrize("text, labels, weights", [
    (b"key\t1 2 |f a\n", [1.0], [2.0]),           # what precedes a tab is dropped (VW)
    (b"1\t|f a\n", [np.nan], [1.0]),              # so this line has no label
    (b"1 2\n1 \n", [1.0, 1.0], [1.0, 1.0]),       # no bar: "2" touches the end, a tag
    (b"1 |f a\n  \n\t\n\n\r\n-1 |f b\n", [1.0, np.nan, np.nan, -1.0], [1.0] * 4),
    (b"1 |f a\n\xef\xbb\xbf-1 |f b\n", [1.0, -1.0], [1.0, 1.0]),  # a mark at any line
    (b"1e 0x2 'tag |f a\n", [1.0], [2.0]),          # numbers as VW's parse_float reads them
])
def test_label_sections_and_lines_are_read_as_vw_reads_them(text, labels, weights):
    """VW's label section (a tab drops what precedes it; the tag is the last word,
    when it starts with "'" or touches the bar or the line's end), its lines (a byte
    order mark at any line's start dropped; blanks only: a row to predict, not an
    empty line), against the yardstick's rules and VW's parser where installed."""
    got_labels, got_weights = labels_of(text)
    np.testing.assert_array_equal(got_labels, labels)
    np.testing.assert_array_equal(got_weights, weights)
    assert_read_as_vw_reads(text)


def test_the_default_namespace_is_seeded_as_vw_seeds_it():
    """Under a hash seed, VW's default namespace is seeded with murmurhash3 of the
    empty string (its named, numeric and anonymous features move with it); a named
    namespace with the hash of its name; the closed forms, and VW's --hash_seed."""
    text = b"1 | a 7 :2 |f b 8\n"
    for seed in (0, 5, 2**32 - 1):
        default, f = murmur(b"", seed), murmur(b"f", seed)
        got, = rows(text, hash_seed=seed)
        assert got == sorted((letter, h % 2**32 & MASK, v) for letter, h, v in [
            (32, murmur(b"a", default), 1.0), (32, default + 7, 1.0), (32, default, 2.0),
            (F_, murmur(b"b", f), 1.0), (F_, f + 8, 1.0)])
        assert_read_as_vw_reads(text, hash_seed=seed)
    assert murmur(b"", 0) == 0  # seed 0: the default namespace's hash is 0, as before


@pytest.mark.parametrize("line, what", [
    (b"0 1 0.5 'tag |f a", "VW's initial prediction '0.5'"),
    (b"1 |f x:0.7\x00", "bad feature value '0.7\\x00'"),
    (b"1 |f a:1x", "bad feature value '1x'"),
    (b"1 |f a:inf", "bad feature value 'inf'"),
])
def test_what_is_still_refused_is_one_located_error(line, what):
    """A non-zero initial prediction (no model here takes a per-row offset) and damaged
    or non-finite values (VW warns and reads a part of them) stay errors at their
    column; on_error="skip" skips and counts them."""
    with pytest.raises(VWError, match="^<stream>:2:") as info:
        rows(b"1 |f a\n" + line + b"\n")
    assert what in str(info.value)
    reader = iter_vw(io.BytesIO(b"1 |f a\n" + line + b"\n-1 |f b\n"), on_error="skip")
    assert sum(X.shape[0] for X, _, _ in reader) == 2 and reader.n_skipped == 1


def test_numeric_names_of_an_older_model_read_as_it_was_trained(tmp_path):
    """A VW model trained before numeric names indexed as VW's (its file's input record
    has no vw_hashing) reads them as text still: its predictions do not move; a new
    model records the rule, and iter_vw(vw_numbers=False) is the old reading."""
    import json

    from onlinepgs.cli import main
    from onlinepgs.model_io import load_model, read_header, save_model

    data = tmp_path / "d.vw"
    data.write_bytes(b"".join(b"%d |f %d %d:0.5\n" % (1 if i % 3 else -1, i % 7, 10 + i % 5)
                              for i in range(60)))
    new = tmp_path / "new.pgs"
    assert main(["train", str(data), "-o", str(new), "--quiet", "--sigma", "0.1"]) == 0
    header = read_header(str(new))
    assert header["extra"]["input"]["vw_hashing"] == 2
    # the same model as an older file: trained on the text reading, no vw_hashing
    est = load_model(new)
    old_rows = [X for X, _, _ in iter_vw(str(data), vw_numbers=False)]
    est.partial_fit(old_rows[0], [1 if i % 3 else -1 for i in range(60)])
    extra = dict(header["extra"], input={"format": "vw"})
    old = tmp_path / "old.pgs"
    save_model(est, old, extra=extra)
    pred = tmp_path / "p.txt"
    assert main(["predict", str(old), str(data), "--kind", "scores", "-o", str(pred)]) == 0
    want = est.decision_function(old_rows[0])
    np.testing.assert_allclose(np.loadtxt(pred), want, rtol=1e-8)  # 9 digits printed
    new_rows = [X for X, _, _ in iter_vw(str(data))]
    assert (new_rows[0] != old_rows[0]).nnz > 0  # the rule does move numeric names
    assert json.dumps(read_header(str(old))["extra"]["input"]) == '{"format": "vw"}'


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("ONLINEPGS_VW_TESTS"),
                    reason="set ONLINEPGS_VW_TESTS to folders of VW text files (VW's "
                           "test/train-sets and test/test-sets, separated by os.pathsep) "
                           "to compare the reader with VW's parser on each")
@pytest.mark.parametrize("hash_seed", [0, 7])
def test_folders_of_vw_files_read_as_vw_reads_them(hash_seed, capsys):
    """Every simple-label file of the folders reads as VW's parser reads it, but those
    refused at a line where VW warns (it reads a part of the line) or that holds a
    non-zero initial prediction. The counts are printed (pytest -s)."""
    pytest.importorskip("vowpalwabbit")
    folders = os.environ["ONLINEPGS_VW_TESTS"].split(os.pathsep)
    results = vw_compare.compare_folders(folders, 18, hash_seed)
    with capsys.disabled():
        print(f"\nhash seed {hash_seed}:", {kind: len(v) for kind, v in results.items()})
    other = {k: v for k, v in results.items()
             if k not in vw_compare.SAME + (vw_compare.REFUSED_AS_VW_WARNS,)}
    refused = other.pop("refused", [])
    assert not other, other
    assert all("initial prediction" in why for _, why in refused), refused


VW_AUDIT = """
import sys, vowpalwabbit
vw = vowpalwabbit.Workspace("-d " + sys.argv[1] + " -b 18 -t --audit --quiet " + sys.argv[2])
vw.finish()
"""


def vw_audit_columns(path, options):
    """Per example, VW's --audit entries (column, value) but its constant."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", VW_AUDIT, str(path), options],
                         capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        if line.startswith("\t"):
            rows.append(sorted((int(column), round(float(value), 9)) for name, column, value, _
                               in (item.rsplit(":", 3) for item in line.strip().split("\t"))
                               if name != "Constant"))
    return rows


@pytest.mark.parametrize("options, interactions", [
    ("-q fg", ["fg"]), ("-q ff", ["ff"]), ("-q ::", ["::"]), ("--cubic ffg", ["ffg"]),
    ("--cubic :::", [":::"])])
def test_interactions_of_vw_constructs_land_in_vws_columns(tmp_path, options, interactions):
    """Crossed anonymous, numeric and string features, under namespace weights and in
    the default namespace, land in the columns of VW's -q/--cubic (its --audit)."""
    pytest.importorskip("vowpalwabbit")
    from onlinepgs.features import interaction_names, parse_interactions

    path = tmp_path / "q.vw"
    path.write_bytes(b"1 |f a :2 123 |g b:3 x:red :4 :red\n1 |f a b |f c\n"
                     b"1 | 7 :3 |f :1 z\n1 |f:2 q:red w:0.5 |g 9\n")
    want = vw_audit_columns(path, options)
    reader = iter_vw(str(path), n_bits=18, chunk_rows=None, audit=object())
    ns, hashes, values, indptr, labels, _, names = _raw_chunk(reader)
    got = []
    for r in range(len(labels)):
        a, b = indptr[r], indptr[r + 1]
        crossed = interaction_names(ns[a:b], hashes[a:b], names[a:b],
                                    parse_interactions(interactions))
        value_of = dict(zip(names[a:b], values[a:b]))
        got.append(sorted((h & MASK, round(float(np.prod(
            [value_of[part] for part in name.split("*")])), 9)) for h, name in crossed))
    assert got == want


def _raw_chunk(reader):
    """The reader's one chunk as the parser hands it over (before hashing)."""
    chunk = []

    def take():
        chunk.append(reader._parser.take_chunk())
        return None
    reader._take = take
    for _ in reader:
        pass
    return chunk[0]
