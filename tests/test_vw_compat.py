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
    if line.startswith(b"\xef\xbb\xbf"):
        return  # VW's parser reads the mark into the label (label 0): dropped here
    try:
        import vowpalwabbit  # noqa: F401
    except ImportError:
        return
    import tempfile

    with tempfile.NamedTemporaryFile("wb", suffix=".vw", delete=False) as f:
        f.write(line + b"\n")
    try:
        assert vw_compare.compare(f.name)[0].startswith("same"), vw_compare.compare(f.name)
    finally:
        os.unlink(f.name)


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
                    reason="set ONLINEPGS_VW_TESTS to a folder of VW text files (VW's "
                           "test/train-sets) to compare the reader with VW's on each")
def test_a_folder_of_vw_files_reads_as_vw_reads_it():
    """Every simple-label file of the folder reads as VW's parser reads it, but those
    with a non-zero initial prediction or a damaged value (refused, located)."""
    pytest.importorskip("vowpalwabbit")
    folder = os.environ["ONLINEPGS_VW_TESTS"]
    results = {}
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if vw_compare.simple_label_file(path):
            kind, why = vw_compare.compare(path)
            results.setdefault(kind, []).append((name, why))
    other = {k: v for k, v in results.items() if not k.startswith("same")}
    refused = other.pop("refused", [])
    assert not other, other
    assert all("initial prediction" in why or "bad feature value" in why
               for _, why in refused), refused
