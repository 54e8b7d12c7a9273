"""Readable models (issue 35 item 4): the feature-name collector (`onlinepgs.feature_names`),
``train --audit`` and ``info MODEL --weights [--top N] [--json]``.

Yardsticks: the columns are computed here from scikit-learn's MurmurHash3 and the
DESIGN's hashing and interaction rules written as plain loops; the weights printed are
the model's ``coef_``; the names of svmlight columns are the file's indices."""
import json
import tracemalloc

import numpy as np
import pytest
from sklearn.utils import murmurhash3_32

from onlinepgs import load_model
from onlinepgs.cli import main
from onlinepgs.feature_names import FeatureNames
from onlinepgs.features import (DEFAULT_NAMESPACE, RAW_COLUMN, FeatureSpec, NamespacedRows,
                                to_matrix)
from onlinepgs.model_io import read_header

from test_cli import write_svmlight

P = 16777619


def mm(text, seed):
    return murmurhash3_32(text, seed=seed, positive=True)


def make_rows(rows, hash_seed=0):
    """NamespacedRows of rows given as lists of (namespace, feature): namespace None for
    the default one, "#" for a raw column index (feature an int); hashed here with
    scikit-learn's MurmurHash3 by the DESIGN's rule."""
    ns, hashes, names, indptr = [], [], [], [0]
    for row in rows:
        for space, feature in row:
            if space == "#":
                ns.append(RAW_COLUMN)
                hashes.append(feature)
                names.append(str(feature))
            elif space is None:
                ns.append(DEFAULT_NAMESPACE)
                hashes.append(mm(feature, hash_seed))
                names.append(feature)
            else:
                ns.append(space.encode()[0])
                hashes.append(mm(feature, mm(space, hash_seed)))
                names.append(f"{space}^{feature}")
        indptr.append(len(ns))
    return NamespacedRows(np.array(ns, np.uint8), np.array(hashes, np.uint32),
                          np.linspace(0.5, 2.0, len(ns)), np.array(indptr, np.int64), names)


def expected_names(rows, n_bits, interactions=()):
    """column -> {names}: each entry, and each crossed tuple of a row, the DESIGN's rule as
    plain loops (pairs (h_a * P) ^ h_b mod 2**32, triples once more; equal successive
    letters: positions non-decreasing; ':' any letter but a raw column's, the wildcards
    of a pattern non-decreasing)."""
    out = {}

    def put(h, name):
        out.setdefault(h % 2**n_bits, set()).add(name)

    for r in range(rows.n_rows):
        at = range(rows.indptr[r], rows.indptr[r + 1])
        entries = [(int(rows.ns[i]), int(rows.hashes[i]), rows.names[i]) for i in at]
        for _, h, name in entries:
            put(h, name)
        letters = sorted({e[0] for e in entries if e[0] != RAW_COLUMN})
        for pattern in interactions:
            for concrete in expand(pattern, letters):
                for combo in tuples(entries, concrete):
                    h = combo[0][1]
                    for e in combo[1:]:
                        h = ((h * P) % 2**32) ^ e[1]
                    put(h, "*".join(e[2] for e in combo))
    return out


def expand(pattern, letters):
    found = [[]]
    for c in pattern:
        nxt = []
        for head in found:
            wild = [head[i] for i, p in enumerate(pattern[:len(head)]) if p == ":"]
            choices = [ord(c)] if c != ":" else [x for x in letters if not wild or x >= wild[-1]]
            nxt += [head + [x] for x in choices]
        found = nxt
    unique = []
    for t in found:
        if t not in unique:
            unique.append(t)
    return unique


def tuples(entries, letters):
    """Every tuple of entries (by position) whose letters are `letters`; where two
    factors have one letter, the later one's position is not before the earlier's."""
    import itertools

    found = []
    for combo in itertools.product(range(len(entries)), repeat=len(letters)):
        if all(entries[i][0] == c for i, c in zip(combo, letters)) and all(
                combo[s] <= combo[t] for t in range(len(letters)) for s in range(t)
                if letters[s] == letters[t]):
            found.append([entries[i] for i in combo])
    return found


def collected(names):
    """column -> set of all names a collector kept (and no column left uncounted)."""
    out = {}
    for col in set(names._names) | set(names._more):
        kept, _, more = names.names_of(col)
        assert more == 0
        out[col] = set(kept)
    return out


ROWS = [[("f", "a"), ("f", "b"), ("user", "u9"), ("url", "x.com"), (None, "13")],
        [("user", "u1"), ("f", "a"), ("#", 7), (None, "price")],
        [],
        [("g", "z"), ("f", "c"), ("f", "c"), ("user", "u9")]]


def test_names_land_in_the_columns_of_their_hashes():
    """Each name in the column of its MurmurHash3 (namespaces seeded by their full name:
    user and url differ), raw columns by their index, and exactly the columns of the
    chunk's matrix."""
    rows = make_rows(ROWS, hash_seed=5)
    names = FeatureNames(n_bits=20, per_column=10)
    spec = FeatureSpec(n_bits=20, hash_seed=5)
    names.add(rows, spec)
    assert collected(names) == expected_names(rows, 20)
    assert names.names_of(7) == (["7"], [1], 0)  # a raw column: never negated
    h = mm("u9", mm("user", 5))
    assert h % 2**20 in collected(names)
    kept, signs, _ = names.names_of(h % 2**20)  # negated where the hash's top bit is set
    assert signs[kept.index("user^u9")] == (-1 if h >> 31 else 1)
    X = to_matrix(rows, spec)
    assert set(X.indices.tolist()) == set(collected(names))
    # distinct: f^a f^b f^c g^z user^u9 user^u1 url^x.com 13 price and raw 7 (repeats once)
    assert names.n_features == 10


@pytest.mark.parametrize("interactions", [("fu",), ("ff",), ("fuf",), ("::",), ("f:",),
                                          ("ff", "uu", "fug"), (":::",), ("f:f",)])
def test_interaction_names_and_columns(interactions):
    """Crossed names "f^a*user^u9" in the column of the combined hash, every tuple of
    the DESIGN's rule (letters: user and url are both u) and no other."""
    rows = make_rows(ROWS, hash_seed=3)
    names = FeatureNames(n_bits=22, hash_seed=3, per_column=50)
    names.add(rows, FeatureSpec(n_bits=22, hash_seed=3, interactions=interactions))
    want = expected_names(rows, 22, interactions)
    assert collected(names) == want
    if interactions == ("fu",):
        h = ((mm("a", mm("f", 3)) * P) % 2**32) ^ mm("u9", mm("user", 3))
        assert "f^a*user^u9" in collected(names)[h % 2**22]
        assert "f^a*url^x.com" in {n for s in want.values() for n in s}
    if interactions == ("ff",):  # each unordered pair once, squares included
        crossed = {n for s in want.values() for n in s if "*" in n}
        assert crossed == {"f^a*f^a", "f^a*f^b", "f^b*f^b", "f^c*f^c"}


def test_interaction_columns_are_the_kernels():
    """Row by row, the collector's columns are those of the compiled kernel's matrix, on
    random rows (namespaces sharing a letter, the default one, raw columns) and random
    interactions (wildcards, the default namespace's letter ' ', triples); skipped while
    to_matrix has no interactions."""
    import random

    try:
        to_matrix(make_rows(ROWS), FeatureSpec(n_bits=8, interactions=("fu",)))
    except NotImplementedError:
        pytest.skip("to_matrix has no interactions yet")
    rng = random.Random(0)
    for _ in range(200):
        rows = make_rows([[(s, rng.randrange(50) if s == "#" else f"x{rng.randrange(8)}")
                           for s in rng.choices(["a", "ab", "b", "c", None, "#"],
                                                k=rng.randrange(7))]
                          for _ in range(rng.randrange(1, 6))], hash_seed=rng.randrange(5))
        interactions = tuple("".join(rng.choice("abc: ") for _ in range(rng.choice([2, 3])))
                             for _ in range(rng.randrange(1, 3)))
        spec = FeatureSpec(n_bits=rng.choice([3, 6, 12]), interactions=interactions)
        X = to_matrix(rows, spec)
        for r in range(rows.n_rows):
            a, b = rows.indptr[r], rows.indptr[r + 1]
            one = NamespacedRows(rows.ns[a:b], rows.hashes[a:b], rows.values[a:b],
                                 np.array([0, b - a]), rows.names[a:b])
            names = FeatureNames(n_bits=spec.n_bits, per_column=1000)
            names.add(one, spec)
            assert set(X.indices[X.indptr[r]:X.indptr[r + 1]].tolist()) == \
                set(collected(names)), (interactions, r)


def test_collisions_are_shown_and_counted():
    """With 2**3 columns every column holds several features: the first names are kept,
    the others counted, and the counts add up to the distinct features there."""
    rows = make_rows([[("f", f"x{i}") for i in range(j, j + 20)] for j in range(0, 200, 20)]
                     + [[("f", "x0"), ("f", "x1")]])  # repeats do not count again
    names = FeatureNames(n_bits=3, per_column=2)
    names.add(rows, FeatureSpec(n_bits=3))
    want = expected_names(rows, 3)
    assert sum(map(len, want.values())) == 200
    for col, features in want.items():
        kept, _, more = names.names_of(col)
        assert len(kept) == min(2, len(features)) and set(kept) <= features
        assert len(kept) + more == len(features)


def test_the_cap_bounds_the_features_and_memory():
    """At most `limit` features are tracked; past the cap memory stays put while new
    features keep coming, and the collector says it was capped."""
    def chunk(start, n=5000):
        return make_rows([[("f", f"id{start + i}")] for i in range(n)])

    names = FeatureNames(n_bits=24, limit=2000)
    spec = FeatureSpec(n_bits=24)
    chunks = [chunk(s) for s in range(0, 60_000, 5000)]
    names.add(chunks[0], spec)
    assert names.n_features == 2000 and names.capped
    # the first 2000 features met are kept, and named while their columns have room
    kept = {n for c in names._names for n in names.names_of(c)[0]}
    assert len(kept) + sum(names._more.values()) == 2000
    assert kept <= {f"f^id{i}" for i in range(2000)} and len(kept) > 1900
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for rows in chunks[1:]:
        names.add(rows, spec)
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert names.n_features == 2000
    assert sum(len(names.names_of(c)[0]) for c in names._names) <= 2000
    assert grown < 50_000, grown  # an uncapped collector would hold 55,000 names more
    assert "CAPPED" in names.describe()
    assert FeatureNames.from_dict(json.loads(json.dumps(names.to_dict()))).capped


def test_the_text_budget_bounds_the_names(monkeypatch):
    """Past the names' text budget features are counted, not named, and it says so."""
    import onlinepgs.feature_names as fn

    monkeypatch.setattr(fn, "MAX_CHARS", 50)
    names = FeatureNames(n_bits=20)
    names.add(make_rows([[("f", f"w{i:03d}") for i in range(40)]]), FeatureSpec(n_bits=20))
    kept = [n for c in names._names for n in names.names_of(c)[0]]
    # "+f^w000": 7 characters (the name and its sign in the column)
    assert sum(len(n) + 1 for n in kept) <= 50 and len(kept) == 7
    assert len(kept) + sum(names._more.values()) == 40 and names.capped


def test_to_dict_round_trip_keeps_counting_exactly():
    """to_dict/from_dict through JSON: the same names, counts and features; the rows
    added again after the reload add nothing (the features are remembered)."""
    rows = make_rows(ROWS * 3)
    spec = FeatureSpec(n_bits=4, interactions=("::",))
    names = FeatureNames(n_bits=4, interactions=("::",), per_column=2)
    names.add(rows, spec)
    again = FeatureNames.from_dict(json.loads(json.dumps(names.to_dict())))
    again.add(rows, spec)
    for col in range(16):
        assert again.names_of(col) == names.names_of(col)
    assert again.n_features == names.n_features and again.interactions == ("::",)
    # a name with a line break (a quoted CSV cell) stays one line of info, and one name
    odd = FeatureNames(n_bits=4)
    odd.add(make_rows([[("c", "two\nlines"), ("c", "x" * 500)]]), FeatureSpec(n_bits=4))
    again = FeatureNames.from_dict(json.loads(json.dumps(odd.to_dict())))
    shown = {n for col in range(16) for n in again.names_of(col)[0]}
    assert "c^two\\nlines" in shown and "c^" + "x" * 195 + "..." in shown
    with pytest.raises(ValueError, match="feature_names.seen"):
        FeatureNames.from_dict({**names.to_dict(), "seen": "not base64!"})


def test_rows_without_names_are_refused():
    rows = make_rows(ROWS)
    rows.names = None
    with pytest.raises(ValueError, match="needs rows with names"):
        FeatureNames(n_bits=8).add(rows, FeatureSpec(n_bits=8))
    with pytest.raises(ValueError, match="2\\*\\*9 columns"):
        FeatureNames(n_bits=8).add(make_rows(ROWS), FeatureSpec(n_bits=9))


# ---- the command ------------------------------------------------------------------------
@pytest.fixture
def svm(tmp_path):
    path = tmp_path / "train.svm"
    write_svmlight(path, n=1500, n_features=60)
    return path


def file_indices(path):
    """The feature indices of an svmlight file, as written."""
    out = set()
    for line in open(path):
        out.update(int(item.split(":")[0]) for item in line.split()[1:])
    return out


def parse_weight_lines(text):
    """{column: (weight, names text)} and the intercept of `info --weights` text."""
    rows, intercept = {}, None
    for line in text.splitlines():
        parts = line.split(None, 2)
        if parts and parts[0] == "intercept":
            intercept = float(parts[1])
        elif line.startswith("  ") and parts[0].isdigit():  # a weight's row, indented
            rows[int(parts[0])] = (float(parts[1]), parts[2] if len(parts) > 2 else "")
    return rows, intercept


def test_info_weights_of_an_svmlight_model(svm, tmp_path, capsys):
    """Without hashing the names are the file's one-based indices; the weights printed are
    coef_, sorted by |weight|, and --top N keeps the first N."""
    model = tmp_path / "m.pgs"
    assert main(["train", str(svm), "-o", str(model), "--quiet"]) == 0
    est = load_model(model)
    capsys.readouterr()
    assert main(["info", str(model), "--weights", "--top", "0"]) == 0
    out = capsys.readouterr().out
    rows, intercept = parse_weight_lines(out)
    w = est.coef_[0]
    assert set(rows) == set(np.flatnonzero(w).tolist())
    for col, (weight, names) in rows.items():
        assert weight == pytest.approx(w[col], rel=1e-7)
        assert names == str(col + 1)
    assert intercept == pytest.approx(est.intercept_[0], rel=1e-7)
    assert {int(n) for _, n in rows.values()} <= file_indices(svm)
    printed = [line.split()[0] for line in out.splitlines()
               if line.startswith("  ") and line.split()[0].isdigit()]
    assert [int(c) for c in printed] == sorted(rows, key=lambda c: (-abs(w[c]), c))
    assert main(["info", str(model), "--weights", "--top", "3"]) == 0
    top, _ = parse_weight_lines(capsys.readouterr().out)
    assert list(top) == [int(c) for c in printed[:3]]
    # the default 20; --top without --weights counts nothing: refused
    assert main(["info", str(model), "--weights"]) == 0
    assert len(parse_weight_lines(capsys.readouterr().out)[0]) == min(20, len(rows))
    assert main(["info", str(model), "--top", "3"]) == 2
    assert capsys.readouterr().err == ("onlinepgs info: error: argument --top: needs "
                                       "--weights (the weights it counts)\n")


def test_info_weights_json_matches_coef(svm, tmp_path, capsys):
    model = tmp_path / "m.pgs"
    assert main(["train", str(svm), "-o", str(model), "--quiet"]) == 0
    est = load_model(model)
    capsys.readouterr()
    assert main(["info", str(model), "--weights", "--top", "0", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "binary" and doc["classes"] == [-1, 1] and doc["names"] == "columns"
    (problem,) = doc["problems"]
    assert problem["class"] == 1 and problem["intercept"] == est.intercept_[0]
    got = np.zeros(est.coef_.shape[1])
    for row in problem["weights"]:
        got[row["column"]] = row["weight"]
        assert row["names"] == [str(row["column"] + 1)]
    np.testing.assert_array_equal(got, est.coef_[0])  # exact: JSON keeps every digit
    assert problem["n_nonzero"] == np.count_nonzero(est.coef_[0])


def test_audit_names_hashed_svmlight_columns(svm, tmp_path, capsys):
    """--bits 3 --audit: column c's names are the file's indices j with (j - 1) mod 8 ==
    c, three shown and the rest counted; saved in the model file; collisions printed."""
    model = tmp_path / "m.pgs"
    assert main(["train", str(svm), "-o", str(model), "--quiet", "--bits", "3",
                 "--audit"]) == 0
    extra = read_header(model)["extra"]
    names = FeatureNames.from_dict(extra["feature_names"])
    indices = file_indices(svm)
    for col in range(8):
        want = {str(j) for j in indices if (j - 1) % 8 == col}
        kept, _, more = names.names_of(col)
        assert set(kept) <= want and len(kept) == 3 and len(kept) + more == len(want)
    capsys.readouterr()
    assert main(["info", str(model), "--weights"]) == 0
    out = capsys.readouterr().out
    rows, _ = parse_weight_lines(out)
    assert len(rows) == 8 and "collected in training (--audit)" in out
    for col, (_, text) in rows.items():
        kept, _, more = names.names_of(col)
        assert text == " | ".join(kept) + f" (+{more} more)"


def test_hashed_model_without_audit_says_how_to_get_names(svm, tmp_path, capsys):
    model = tmp_path / "m.pgs"
    assert main(["train", str(svm), "-o", str(model), "--quiet", "--bits", "4"]) == 0
    assert "feature_names" not in read_header(model)["extra"]
    capsys.readouterr()
    assert main(["info", str(model), "--weights", "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("(no name: train with --audit)") == 2


def test_multiclass_weights_per_class(tmp_path, capsys):
    """One-vs-rest: a block (a JSON problem) a class, each equal to its row of coef_."""
    rng = np.random.RandomState(1)
    path = tmp_path / "multi.svm"
    with open(path, "w") as f:
        for _ in range(600):
            label = rng.randint(3)
            cols = np.unique(rng.randint(0, 12, 4)) + 4 * label
            f.write(f"{label} " + " ".join(f"{c + 1}:1" for c in cols) + "\n")
    model = tmp_path / "m.pgs"
    assert main(["train", str(path), "-o", str(model), "--quiet"]) == 0
    est = load_model(model)
    capsys.readouterr()
    assert main(["info", str(model), "--weights", "--top", "0", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "one-vs-rest" and [p["class"] for p in doc["problems"]] == [0, 1, 2]
    for k, problem in enumerate(doc["problems"]):
        got = np.zeros(est.coef_.shape[1])
        for row in problem["weights"]:
            got[row["column"]] = row["weight"]
        np.testing.assert_array_equal(got, est.coef_[k])
        assert problem["intercept"] == est.intercept_[k]
    assert main(["info", str(model), "--weights", "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "one-vs-rest" in out and [l.split(":")[0] for l in out.splitlines()
                                     if l.startswith("class ")] == ["class 0", "class 1",
                                                                    "class 2"]


def test_continued_training_keeps_and_extends_names(svm, tmp_path):
    """-i keeps the model's names; with --audit the new file's features are added."""
    first, second = tmp_path / "a.pgs", tmp_path / "b.pgs"
    more = tmp_path / "more.svm"
    with open(more, "w") as f:
        f.write("1 500:1 501:2\n-1 502:1\n")
    assert main(["train", str(svm), "-o", str(first), "--quiet", "--bits", "10",
                 "--audit"]) == 0
    assert main(["train", str(more), "-i", str(first), "-o", str(second), "--quiet"]) == 0
    kept = read_header(second)["extra"]["feature_names"]
    assert kept == read_header(first)["extra"]["feature_names"]
    assert main(["train", str(more), "-i", str(first), "-o", str(second), "--quiet",
                 "--audit"]) == 0
    names = FeatureNames.from_dict(read_header(second)["extra"]["feature_names"])
    assert "501" in names.names_of(500 % 1024)[0]
    assert names.n_features == len(file_indices(svm)) + 3


def test_errors_are_one_line(svm, tmp_path, capsys):
    model = tmp_path / "m.pgs"
    assert main(["train", str(svm), "--quiet", "--audit"]) == 2
    assert "--audit: needs -o MODEL" in capsys.readouterr().err
    assert main(["train", str(svm), "-o", str(model), "--quiet", "--audit",
                 "--solver", "sdca"]) == 2
    assert "argument --audit: not available with --solver sdca" in capsys.readouterr().err
    assert main(["info", str(tmp_path / "none.pgs"), "--weights"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such model file" in err
    assert main(["info", str(model), "--weights", "--top", "-1"]) == 2
    assert ("argument --top must be an int in the range [0, inf). Got -1 instead."
            in capsys.readouterr().err)
    # a damaged names record: the file and the field, not a traceback
    from onlinepgs import PGSClassifier
    from onlinepgs.model_io import save_model
    est = PGSClassifier(n_bits=4, sigma=1e-3).fit(np.eye(16)[:4], [0, 1, 0, 1])
    save_model(est, model, extra={"feature_names": {"version": 2, "n_bits": 4,
                                                    "hash_seed": 0, "interactions": [],
                                                    "limit": 10, "per_column": 3,
                                                    "columns": [1], "names": [[3]],
                                                    "more": [0], "seen": ""}})
    capsys.readouterr()
    assert main(["info", str(model), "--weights"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "extra.feature_names.columns" in err, err


def test_weights_path_imports_no_sklearn_and_plain_info_no_names(svm, tmp_path):
    """`info --weights` loads the model without scikit-learn; plain `info` does not even
    import the names module (it reads the header alone)."""
    import subprocess
    import sys

    model = tmp_path / "m.pgs"
    assert main(["train", str(svm), "-o", str(model), "--quiet"]) == 0
    probe = ("import sys, contextlib, io\nfrom onlinepgs.cli import main\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n"
             "    code = main(sys.argv[1:])\n"
             "print(code, 'sklearn' in sys.modules, 'onlinepgs.feature_names' in sys.modules)")
    for argv, names_imported in ((["info", str(model), "--weights"], True),
                                 (["info", str(model)], False)):
        done = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True,
                              text=True, timeout=120)
        assert done.stdout.split() == ["0", "False", str(names_imported)], done.stderr


def test_a_names_weight_is_its_features_weight(tmp_path, capsys):
    """`info --weights` prints each named feature's own weight: hashing negates about half
    the features in their column, and the printed weight undoes it (the yardstick: the
    model's score of a record holding that feature alone, minus the intercept)."""
    from onlinepgs.model_io import load_learner

    log = tmp_path / "clicks.csv"
    rng = np.random.default_rng(0)
    users = [f"u{i}" for i in range(12)]
    lines = ["user,clicked"] + [f"{u},{int(rng.random() < (0.8 if u < 'u5' else 0.2))}"
                                for u in rng.choice(users, 400)]
    log.write_text("\n".join(lines) + "\n")
    model = tmp_path / "m.pgs"
    assert main(["train", str(log), "--label", "clicked", "--sigma", "1e-2", "--audit",
                 "-o", str(model), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["info", str(model), "--weights", "--top", "0"]) == 0
    printed = {}
    for line in capsys.readouterr().out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2].startswith("user^"):
            printed[parts[2]] = float(parts[1])
    assert len(printed) == len(users)
    est = load_learner(model)
    signs = set()
    for name, weight in printed.items():
        score = est.decision_function({"user": {name.split("^")[1]: 1.0}})[0]
        assert weight == pytest.approx(score - est.intercept_[0], rel=1e-6, abs=1e-9)
        signs.add(np.sign(weight))
    # the data: users u0..u4 click (positive weights), the others do not
    assert all(printed[f"user^u{i}"] > 0 for i in range(5)) and signs == {-1.0, 1.0}


def test_a_snapshot_while_the_reader_records_is_consistent():
    """`train --audit --checkpoint-every`: the reader's thread records names while the
    trainer's takes the checkpoint's snapshot (`to_dict`). Every snapshot reads back
    (`from_dict`: its counts match its names) and names or counts every feature it has
    seen, and the last one is the collector's."""
    import threading

    rng = np.random.RandomState(0)
    chunks = [make_rows([[("a", f"x{v}") for v in rng.randint(0, 10**6, 40)]
                         + [("b", f"y{v}") for v in rng.randint(0, 10**6, 5)]
                         for _ in range(40)]) for _ in range(12)]
    names = FeatureNames(12, 0, ("ab",), per_column=2, limit=10**6)
    spec = FeatureSpec(12, 0, ("ab",))
    done = threading.Event()

    def read():
        for rows in chunks:
            names.add(rows, spec)
        done.set()
    reader = threading.Thread(target=read)
    reader.start()
    snapshots = []
    while not done.is_set() or not snapshots:
        snapshots.append(names.to_dict())
        done.wait(0.002)
    reader.join()
    snapshots.append(names.to_dict())
    for d in snapshots:
        back = FeatureNames.from_dict(d)
        named = sum(len(v) for v in back._names.values()) + sum(back._more.values())
        assert named == back.n_features
    assert len(snapshots) > 2
    assert snapshots[-1] == FeatureNames.from_dict(snapshots[-1]).to_dict()


@pytest.mark.parametrize("block", [1, 7, 10**9])
def test_names_do_not_depend_on_how_rows_are_grouped(monkeypatch, block):
    """Features are met row by row (a row's own entries, then its crossed ones), so the
    names kept under the caps are the same whatever the chunks and the blocks a chunk
    is recorded in (BLOCK_ENTRIES bounds a block's crossed entries: memory)."""
    import onlinepgs.feature_names as fn

    rng = np.random.RandomState(1)
    rows = [[("a", f"x{v}") for v in rng.randint(0, 40, 6)]
            + [("b", f"y{v}") for v in rng.randint(0, 40, 3)] for _ in range(60)]
    spec = FeatureSpec(5, 0, ("ab", "aa"))
    whole = FeatureNames(5, 0, ("ab", "aa"), limit=300)
    whole.add(make_rows(rows), spec)
    monkeypatch.setattr(fn, "BLOCK_ENTRIES", block)
    pieces = FeatureNames(5, 0, ("ab", "aa"), limit=300)
    for start in range(0, 60, 13):
        pieces.add(make_rows(rows[start:start + 13]), spec)
    assert whole.capped and pieces.to_dict() == whole.to_dict()


@pytest.mark.slow
def test_audit_with_interactions_costs_at_most_twice_the_memory(tmp_path):
    """`train --audit -q ab` over wide rows: the crossed entries were recorded a chunk at
    once (~100 bytes each: 3.1x the peak memory of the same run without --audit, 15 GB
    against 2 GB at scale). Recorded in bounded blocks, and not at all once the feature
    cap is full: at most 2x, whole processes (peak resident memory of each child)."""
    import resource
    import subprocess
    import sys

    rng = np.random.RandomState(0)
    data = tmp_path / "wide.vw"
    with open(data, "w") as f:
        for _ in range(6000):
            a = " ".join(f"a{v}" for v in rng.randint(0, 10**5, 60))
            b = " ".join(f"b{v}" for v in rng.randint(0, 10**5, 60))
            f.write(f"{rng.choice([1, -1])} |a {a} |b {b}\n")
    probe = ("import resource, sys\nfrom onlinepgs.cli import main\n"
             "code = main(sys.argv[1:])\n"
             "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\nsys.exit(code)")
    peak = {}
    for audit in ([], ["--audit"]):
        done = subprocess.run([sys.executable, "-c", probe, "train", str(data), "-q", "ab",
                               "-b", "18", "--sigma", "1e-4", "-o", str(tmp_path / "m.pgs"),
                               "--quiet", *audit], capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr
        peak[bool(audit)] = int(done.stdout.split()[-1])
    assert peak[True] <= 2 * peak[False], peak
