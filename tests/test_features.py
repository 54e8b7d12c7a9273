"""Namespaced features (onlinepgs.features): the compiled kernel against a plain-Python
transcription of the rules of docs/design/features.md, records as namespaced rows, and the
learners' ``interactions`` parameter."""
import itertools
import math
import random

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import strategies as st

from fuzzing import fuzzer
from sklearn.utils import murmurhash3_32

from onlinepgs import PGSClassifier, PGSRegressor
from onlinepgs._checks import as_matrix
from onlinepgs._core._features import rows_to_csr
from onlinepgs._core._hashing import records_to_csr, records_to_rows
from onlinepgs.features import (DEFAULT_NAMESPACE, RAW_COLUMN, FeatureSpec, NamespacedRows,
                                expanded_input, interaction_names, parse_interactions,
                                to_matrix)
from onlinepgs.model import LinearModel
from onlinepgs.model_io import load_learner, load_model, save_model
from onlinepgs.pgs import PGSClassifierLearner, PGSRegressorLearner
from onlinepgs.sdca import SDCAClassifierLearner

P = 16777619


# ---- the transcription: the design's words, written out in Python ----------------------
def letter_tuples(spec, present):
    """The letter tuples an interaction names in a row whose letters are `present`:
    ':' is each present letter; among ':' positions the letters do not decrease."""
    choices = [sorted(present) if c == ":" else [ord(c)] for c in spec]
    out = []
    for t in itertools.product(*choices):
        wild = [t[m] for m, c in enumerate(spec) if c == ":"]
        if wild == sorted(wild) and t not in out:
            out.append(t)
    return out


def reference_row(ns, hashes, values, specs, n_bits):
    """{column: value} of one row: originals, then each interaction's letter tuples, each
    crossing the entries of its letters (equal letters: positions non-decreasing)."""
    mask = 2**n_bits - 1
    out = {}

    def add(h, v, raw=False):
        col = h & mask
        out[col] = out.get(col, 0.0) + (v if raw or h < 2**31 else -v)

    for n, h, v in zip(ns, hashes, values):
        add(int(h), float(v), raw=n == RAW_COLUMN)
    present = {int(n) for n in ns if n != RAW_COLUMN}
    for spec in specs:
        for letters in letter_tuples(spec, present):
            pools = [[i for i in range(len(ns)) if ns[i] == L] for L in letters]
            for idx in itertools.product(*pools):
                if any(letters[a] == letters[b] and idx[a] > idx[b]
                       for a in range(len(idx)) for b in range(a + 1, len(idx))):
                    continue
                h, v = int(hashes[idx[0]]), float(values[idx[0]])
                for i in idx[1:]:
                    h = ((h * P) % 2**32) ^ int(hashes[i])
                    v *= float(values[i])
                add(h, v)
    return out


def random_rows(rng, n_rows, letters=(97, 98, 99, DEFAULT_NAMESPACE, RAW_COLUMN), most=6):
    ns, hashes, values, indptr = [], [], [], [0]
    for _ in range(n_rows):
        k = rng.randint(0, most)
        for _ in range(k):
            ns.append(rng.choice(letters))
            hashes.append(rng.randint(0, 2**32 - 1))
            values.append(rng.choice([1.0, -0.5, 2.0, rng.uniform(-3, 3)]))
        indptr.append(len(ns))
    return NamespacedRows(np.array(ns, np.uint8), np.array(hashes, np.uint32),
                          np.array(values), np.array(indptr, np.int64))


def assert_matches_reference(X, rows, specs, n_bits):
    assert X.shape == (rows.n_rows, 2**n_bits)
    assert X.has_canonical_format
    for r in range(rows.n_rows):
        a, b = rows.indptr[r], rows.indptr[r + 1]
        want = reference_row(rows.ns[a:b], rows.hashes[a:b], rows.values[a:b], specs, n_bits)
        got_cols = X.indices[X.indptr[r]:X.indptr[r + 1]]
        assert got_cols.tolist() == sorted(want), r  # sorted, unique, the same columns
        np.testing.assert_allclose(X.data[X.indptr[r]:X.indptr[r + 1]],
                                   [want[c] for c in sorted(want)], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("specs", [(), ("ab",), ("aa",), ("ba", "cc"), ("::",), ("abc",),
                                   ("aab",), ("aba",), (":::",), ("a:",), (":a", " a"),
                                   ("ab", "::", "abc", "a::")])
@pytest.mark.parametrize("n_bits", [3, 18])
def test_kernel_matches_the_transcription(specs, n_bits):
    # n_bits 3: collisions everywhere (duplicates summed); 18: mostly distinct columns
    rng = random.Random(hash((specs, n_bits)) % 1000)
    rows = random_rows(rng, 60)
    X = to_matrix(rows, FeatureSpec(n_bits, 0, specs))
    assert_matches_reference(X, rows, specs, n_bits)


def test_a_pair_by_hand():
    # a^x (hash 3, value 2) and b^y (hash 2**31 + 5, value 0.5): the pair's hash is
    # (3 * 16777619) ^ (2**31 + 5) = 50332857 ^ 2147483653, top bit set: negative
    rows = NamespacedRows(np.array([97, 98], np.uint8), np.array([3, 2**31 + 5], np.uint32),
                          np.array([2.0, 0.5]), np.array([0, 2]))
    X = to_matrix(rows, FeatureSpec(8, 0, ("ab",)))
    h = (3 * 16777619) ^ (2**31 + 5)
    assert h >> 31 == 1
    assert dict(zip(X.indices.tolist(), X.data.tolist())) == {3: 2.0, 5: -0.5, h % 256: -1.0}


def test_squares_and_each_unordered_pair_once():
    # three entries of letter a: "aa" makes (0,0) (0,1) (0,2) (1,1) (1,2) (2,2)
    hashes = [11, 22, 33]
    rows = NamespacedRows(np.full(3, 97, np.uint8), np.array(hashes, np.uint32),
                          np.array([1.0, 2.0, 3.0]), np.array([0, 3]))
    X = to_matrix(rows, FeatureSpec(30, 0, ("aa",)))
    want = {h: v for h, v in zip(hashes, [1.0, 2.0, 3.0])}
    for i, j in [(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)]:
        h = ((hashes[i] * P) % 2**32) ^ hashes[j]
        want[h & (2**30 - 1)] = (-1 if h >> 31 else 1) * (i + 1.0) * (j + 1.0)
    assert dict(zip(X.indices.tolist(), X.data.tolist())) == want


def test_entry_counts_follow_the_formulas():
    # distinct hashes into 2**30 columns: no collision, so nnz counts what was made
    rng = np.random.RandomState(0)
    na, nb, nc, nd, nraw = 7, 5, 3, 4, 2
    ns = np.array([97] * na + [98] * nb + [99] * nc + [DEFAULT_NAMESPACE] * nd
                  + [RAW_COLUMN] * nraw, np.uint8)
    rng.shuffle(ns)
    n = ns.shape[0]
    hashes = np.array(random.Random(0).sample(range(2**31), n), np.uint32) * 2 + 1
    rows = NamespacedRows(ns, hashes, np.ones(n), np.array([0, n]))
    c = n - nraw  # the entries ':' matches
    for specs, made in [(("ab",), na * nb), (("abc",), na * nb * nc),
                        (("aa",), na * (na + 1) // 2), (("::",), c * (c + 1) // 2),
                        (("a:",), na * c - na * (na - 1) // 2),
                        ((":::",), math.comb(c + 2, 3))]:
        X = to_matrix(rows, FeatureSpec(30, 0, specs))
        assert X.nnz == n + made, specs


def test_empty_rows_and_chunks():
    rows = NamespacedRows(np.array([97, 98], np.uint8), np.array([1, 2], np.uint32),
                          np.array([1.0, 1.0]), np.array([0, 0, 2, 2]))
    X = to_matrix(rows, FeatureSpec(8, 0, ("ab",)))  # columns 1, 2, 145
    assert X.indptr.tolist() == [0, 0, 3, 3]
    empty = NamespacedRows(np.zeros(0, np.uint8), np.zeros(0, np.uint32), np.zeros(0),
                           np.array([0]))
    assert to_matrix(empty, FeatureSpec(4, 0, ("::",))).shape == (0, 16)


def test_raw_columns_are_neither_signed_nor_crossed():
    rows = NamespacedRows(np.array([RAW_COLUMN, 97], np.uint8),
                          np.array([2**31 + 7, 2**31 + 9], np.uint32), np.array([1.5, 1.0]),
                          np.array([0, 2]))
    X = to_matrix(rows, FeatureSpec(5, 0, ("::", ":::")))
    a = (((2**31 + 9) * P) % 2**32) ^ (2**31 + 9)
    b = (((a * P) % 2**32)) ^ (2**31 + 9)
    want = {7: 1.5, 9: -1.0}
    for h in (a, b):
        want[h % 32] = want.get(h % 32, 0.0) + (-1.0 if h >> 31 else 1.0)
    assert dict(zip(X.indices.tolist(), X.data.tolist())) == want


def test_a_namespace_named_from_a_nul_byte_is_hashed_and_signed():
    """A namespace (VW), column (CSV) or record/JSON namespace whose name starts with a NUL
    byte: letter 0 would make its entries raw columns, unhashed and unsigned. Every reader
    puts its features in the column and with the sign of the hash (murmurhash3 of the name
    seeded by the namespace's; VW text's, as VW's hashstring, trims the NUL), as for any
    other name, and `::` crosses it."""
    import io

    from onlinepgs.formats import open_reader

    ns = "\x00geo"
    seed = murmurhash3_32(ns.encode(), 0, positive=True)
    h = murmurhash3_32(b"fr", seed, positive=True)
    want = {h % 2**10: -1.0 if h >> 31 else 1.0}
    spec = FeatureSpec(10, 0, ())
    got = {}
    got["records"] = to_matrix(NamespacedRows(*records_to_rows([{ns: {"fr": 1}}], 0)[:4]),
                               spec)
    for fmt, data, columns in (("vw", b"1 |\x00geo fr\n", None),
                               ("json", b'{"label": 1, "features": {"\\u0000geo": '
                                        b'{"fr": 1}}}\n', None),
                               ("csv", b"y,\x00geo\n1,fr\n", {"label": "y"})):
        got[fmt] = next(iter(open_reader(io.BytesIO(data), fmt, spec=spec,
                                         columns=columns)))[0]
    # VW text hashes names as VW does, bytes up to 0x20 trimmed: its seed is hash("geo")
    h_vw = murmurhash3_32(b"fr", murmurhash3_32(b"geo", 0, positive=True), positive=True)
    for fmt, X in got.items():
        assert dict(zip(X.indices.tolist(), X.data.tolist())) == (
            {h_vw % 2**10: -1.0 if h_vw >> 31 else 1.0} if fmt == "vw" else want), fmt
    crossed = to_matrix(NamespacedRows(*records_to_rows([{ns: {"fr": 1}, "a": 1.0}], 0)[:4]),
                        FeatureSpec(10, 0, ("::",)))
    assert crossed.nnz > 2  # the pair (and the squares) of the NUL-named namespace


def test_widest_space_and_the_int64_path():
    rows = random_rows(random.Random(3), 20)
    X = to_matrix(rows, FeatureSpec(30, 0, ("ab",)))
    assert X.shape[1] == 2**30 and X.indices.dtype == np.int32
    assert_matches_reference(X, rows, ("ab",), 30)
    # 2**32 columns need int64 indices: the kernel's other path, the same entries
    letters = np.array([[97, 98, 0]], np.uint8)
    data, indices, indptr = rows_to_csr(rows.ns, rows.hashes, rows.values, rows.indptr, 32,
                                        letters, np.array([2], np.int32))
    assert indices.dtype == np.int64
    for r in range(rows.n_rows):
        a, b = rows.indptr[r], rows.indptr[r + 1]
        want = reference_row(rows.ns[a:b], rows.hashes[a:b], rows.values[a:b], ("ab",), 32)
        assert indices[indptr[r]:indptr[r + 1]].tolist() == sorted(want)


def test_parse_interactions():
    assert parse_interactions(["ab", "::", "ab", "abc", " a"]) == ("ab", "::", "abc", " a")
    assert parse_interactions(None) == parse_interactions([]) == ()
    for bad, match in [("ab", "list of strings"), ([""], "empty"), (["a"], "1 letter"),
                       (["abcd"], "4 letter"), (["aé"], "ASCII"), ([3], "not a string")]:
        with pytest.raises(ValueError, match=match):
            parse_interactions(bad)


def test_interaction_names_give_the_kernels_columns():
    rng = random.Random(5)
    rows = random_rows(rng, 30)
    specs = ("ab", "::", "abc")
    X = to_matrix(rows, FeatureSpec(6, 0, specs))
    for r in range(rows.n_rows):
        a, b = rows.indptr[r], rows.indptr[r + 1]
        names = [f"n{i}" for i in range(b - a)]
        got = {}
        for (h, name), raw in itertools.zip_longest(
                interaction_names(rows.ns[a:b], rows.hashes[a:b], names, specs),
                rows.ns[a:b] == RAW_COLUMN, fillvalue=False):
            value = math.prod(float(rows.values[a + int(i[1:])]) for i in name.split("*"))
            got[h % 64] = got.get(h % 64, 0.0) + (value if raw or h < 2**31 else -value)
        row = X[r]
        np.testing.assert_allclose([got[c] for c in sorted(got)], row.data, atol=1e-12)
        assert sorted(got) == row.indices.tolist()


# ---- records ------------------------------------------------------------------------------
def mm(text, seed):
    return murmurhash3_32(text, seed=seed, positive=True)


def reference_record(record, seed):
    """(ns, hash, value, name) entries of a record by the rules, with scikit-learn's hash."""
    out = []
    for key, value in record.items():
        if value is None:
            continue
        if isinstance(key, int):
            out.append((RAW_COLUMN, key % 2**32, float(value), str(key)))
        elif isinstance(value, dict):
            nseed = mm(key, seed)
            for inner, v in value.items():
                if v is None:
                    continue
                name = f"{inner}={v}" if isinstance(v, str) else str(inner)
                # the name's first byte; a NUL takes 0x80 (0 marks raw columns)
                out.append((key.encode()[0] or 0x80, mm(name, nseed),
                            1.0 if isinstance(v, str) else float(v), f"{key}^{name}"))
        else:
            name = f"{key}={value}" if isinstance(value, str) else key
            out.append((DEFAULT_NAMESPACE, mm(name, seed),
                        1.0 if isinstance(value, str) else float(value), name))
    return out


def test_records_to_rows_rules():
    record = {"user": "u9", "price": 2.5, "geo": {"fr": 1.0, "city": "Lyon", "gone": None},
              "user2": {3: 2.0}, 7: True, "flag": False, "skip": None}
    ns, hashes, values, indptr, names = records_to_rows([record], 11, names=True)
    want = reference_record({**record, "user2": {"3": 2.0}, 7: 1.0, "flag": 0.0}, 11)
    assert list(zip(ns.tolist(), hashes.tolist(), values.tolist(), names)) == want
    assert names == ["user=u9", "price", "geo^fr", "geo^city=Lyon", "user2^3", "7", "flag"]
    assert indptr.tolist() == [0, 7]
    # the namespace's full name seeds it: "user" and "url" share the letter, not the seed
    a = records_to_rows([{"user": {"x": 1}}, {"url": {"x": 1}}], 0)
    assert a[0].tolist() == [ord("u")] * 2 and a[1][0] != a[1][1]


@pytest.mark.parametrize("record, match", [
    ({"a": {"b": {"c": 1.0}}}, "row 1, namespace 'a': feature 'b' is a dict"),
    ({"a": float("inf")}, "row 1, feature 'a': value inf is not finite"),
    ({3: "x"}, "row 1: feature index 3 has the value 'x'"),
    ({"": {"x": 1.0}}, "row 1: a namespace .* needs a non-empty name"),
    ({"a": {1.5: 1.0}}, "row 1, namespace 'a': feature 1.5 is not a str"),
    ({1.5: 1.0}, "row 1: feature 1.5 is neither a str nor an int"),
    ({"a": [1]}, "row 1, feature 'a': value \\[1\\] is not a number or a string"),
    ({"\ud800": 1.0}, "row 1: feature '\\\\ud800' is not valid Unicode"),
    ({-2: 1.0}, "row 1: negative feature index -2"),
])
def test_bad_records_name_their_row(record, match):
    with pytest.raises(ValueError, match=match):
        records_to_rows([{"ok": 1.0}, record], 0)


def test_hashed_records_keep_todays_columns():
    # str -> number and int keys: the namespaced path equals records_to_csr bit for bit
    rng = np.random.RandomState(1)
    records = [{**{f"w{rng.randint(50)}": rng.randn() for _ in range(rng.randint(0, 8))},
                **{int(rng.randint(0, 5000)): rng.randn() for _ in range(rng.randint(0, 3))}}
               for _ in range(300)]
    for n_bits in (4, 12, 30):
        data, indices, indptr, _ = records_to_csr(records, n_bits, 7, -1)
        old = sp.csr_matrix((data, indices, indptr), shape=(300, 2**n_bits))
        old.sum_duplicates()
        new = as_matrix(records, n_bits, 7)
        assert new.indptr.tolist() == old.indptr.tolist()
        assert new.indices.tolist() == old.indices.tolist()
        assert new.data.tobytes() == old.data.tobytes()


def test_string_values_without_hashing_ask_for_n_bits():
    with pytest.raises(ValueError, match="row 0, feature 'user': a string value needs "
                                         "hashing \\(set n_bits\\)"):
        PGSClassifierLearner(sigma=1e-2).fit([{"user": "u9"}, {"user": "u1"}], [0, 1])
    with pytest.raises(ValueError, match="a namespace \\(a dict value\\) needs hashing"):
        as_matrix([{"geo": {"fr": 1.0}}], None, 0)


FEATURE = st.text(st.characters(blacklist_categories=("Cs",)), max_size=6)
VALUE = st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000),
                  st.floats(allow_nan=False, allow_infinity=False, width=32), FEATURE)
RECORD = st.dictionaries(
    st.one_of(FEATURE, st.integers(0, 2**40)),
    st.one_of(VALUE, st.dictionaries(FEATURE, VALUE, max_size=4)), max_size=6)


@fuzzer(300, records=st.lists(RECORD, max_size=5), seed=st.integers(0, 2**32 - 1))
def test_records_to_rows_fuzzed_against_the_transcription(records, seed):
    ok = []
    for r in records:
        # what the rules refuse (checked above): an int key with a str or dict value,
        # an empty namespace name
        if any(isinstance(k, int) and isinstance(v, (str, dict))
               or (isinstance(v, dict) and k == "") for k, v in r.items()):
            with pytest.raises(ValueError, match="row 0"):
                records_to_rows([r], seed)
            continue
        ok.append(r)
    ns, hashes, values, indptr, names = records_to_rows(ok, seed, names=True)
    want = [e for r in ok for e in reference_record(r, seed)]
    assert list(zip(ns.tolist(), hashes.tolist(), values.tolist(), names)) == want
    assert indptr.tolist() == [0] + list(itertools.accumulate(
        len(reference_record(r, seed)) for r in ok))


# ---- learners ---------------------------------------------------------------------------
def xor_records(n, seed=0):
    rng = np.random.RandomState(seed)
    a, b = rng.randint(0, 2, n), rng.randint(0, 2, n)
    records = [{"a": {"x": f"v{i}"}, "b": {"y": f"v{j}"}, "noise": rng.randn()}
               for i, j in zip(a, b)]
    return records, a ^ b


def test_interactions_learn_what_a_linear_model_cannot():
    records, y = xor_records(2000)
    test, y_test = xor_records(1000, seed=1)
    linear = PGSClassifierLearner(n_bits=14, random_state=0).fit(records, y)
    crossed = PGSClassifierLearner(n_bits=14, interactions=["ab"], random_state=0).fit(records, y)
    # no linear function of the one-hot a and b fits XOR on more than 3 of its 4 cells
    assert (linear.predict(test) == y_test).mean() <= 0.76
    assert (crossed.predict(test) == y_test).mean() >= 0.99


def hand_expanded(records, n_bits, specs):
    """The records' columns written out by the transcription (no kernel)."""
    rows = []
    for r in records:
        entries = reference_record(r, 0)
        ns = [e[0] for e in entries]
        rows.append(reference_row(ns, [e[1] for e in entries], [e[2] for e in entries],
                                  specs, n_bits))
    X = sp.lil_matrix((len(rows), 2**n_bits))
    for i, row in enumerate(rows):
        for c, v in row.items():
            X[i, c] = v
    return X.tocsr()


@pytest.mark.parametrize("cls, params", [
    (PGSClassifierLearner, {"sigma": 1e-3, "random_state": 0, "max_epochs": 2}),
    (SDCAClassifierLearner, {"sigma": 1e-2, "random_state": 0}),
])
def test_learners_equal_training_on_hand_expanded_columns(cls, params):
    records, y = xor_records(300)
    specs = ["ab", "::"]
    X = hand_expanded(records, 16, specs)
    with_records = cls(n_bits=16, interactions=specs, **params).fit(records, y)
    with_columns = cls(n_bits=16, **params).fit(X, y)
    assert with_records.coef_.tobytes() == with_columns.coef_.tobytes()
    assert with_records.intercept_.tobytes() == with_columns.intercept_.tobytes()


def test_matrices_need_expanded_input():
    records, y = xor_records(200)
    clf = PGSClassifierLearner(n_bits=10, interactions=["ab"], sigma=1e-2).fit(records, y)
    X = as_matrix(records, 10, 0, interactions=("ab",))
    with pytest.raises(ValueError, match="interactions \\['ab'\\] need records"):
        clf.decision_function(X)
    with pytest.raises(ValueError, match="need records"):
        PGSClassifierLearner(n_bits=10, interactions=["ab"]).fit(X, y)
    with expanded_input():  # a reader's chunks hold the interactions already
        np.testing.assert_array_equal(clf.decision_function(X), clf.decision_function(records))
        np.testing.assert_array_equal(clf.model_.decision_function(X),
                                      clf.decision_function(records))


@pytest.mark.parametrize("bad, match", [
    ({"interactions": ["ab"]}, "needs n_bits"),
    ({"interactions": ["abcd"], "n_bits": 8}, "4 letter"),
    ({"interactions": "ab", "n_bits": 8}, "interactions"),
])
def test_bad_interactions_parameter(bad, match):
    records, y = xor_records(20)
    for est in (PGSClassifierLearner(**bad), PGSClassifier(**bad)):
        with pytest.raises(ValueError, match=match):
            est.fit(records, y)
    with pytest.raises(ValueError, match="interactions need n_bits"):
        LinearModel([[1.0]], interactions=["ab"])


def test_single_record_prediction():
    records, y = xor_records(300)
    clf = PGSClassifier(n_bits=10, interactions=["ab"], sigma=1e-2, random_state=0)
    clf.fit(records, y)
    one = records[5]
    assert clf.predict(one).shape == (1,) and clf.predict(one)[0] == clf.predict(records)[5]
    assert clf.decision_function(one).shape == (1,)
    assert clf.predict_proba(one).shape == (1, 2)
    assert clf.model_.predict(one).tolist() == [clf.predict(records)[5]]
    reg = PGSRegressor(n_bits=10, sigma=1e-2, random_state=0).fit(records, y.astype(float))
    assert reg.predict(one).shape == (1,)


@pytest.mark.parametrize("cls", [PGSClassifierLearner, SDCAClassifierLearner,
                                 PGSRegressorLearner])
def test_model_files_keep_interactions(tmp_path, cls):
    records, y = xor_records(200)
    est = cls(n_bits=10, interactions=("ab", "::"), sigma=1e-2, random_state=0).fit(records, y)
    path = tmp_path / "m.pgs"
    save_model(est, path)
    method = "decision_function" if hasattr(est, "decision_function") else "predict"
    for loaded in (load_learner(path), load_model(path)):
        assert loaded.interactions == ["ab", "::"]
        assert loaded.model_.interactions == ("ab", "::")
        np.testing.assert_array_equal(getattr(loaded, method)(records[:20]),
                                      getattr(est, method)(records[:20]))


def test_old_model_files_load_without_interactions():
    from pathlib import Path

    for name in ("pgs_classifier_v1.pgs", "sdca_regressor_v1.pgs"):
        est = load_learner(Path(__file__).parent / "model_files" / name)
        assert est.interactions is None and est.model_.interactions == ()


def test_partial_fit_continues_with_the_same_interactions():
    records, y = xor_records(400)
    clf = PGSClassifierLearner(n_bits=10, interactions=["ab"], sigma=1e-2)
    clf.partial_fit(records[:200], y[:200], classes=[0, 1])
    clf.partial_fit(records[200:], y[200:])
    clf.set_params(interactions=["ab", "aa"])
    with pytest.raises(ValueError, match="interactions"):
        clf.partial_fit(records, y)


def test_the_audit_sees_the_rows_first():
    seen = []

    class Collector:
        def add(self, rows, spec):
            seen.append((rows.n_rows, spec.interactions))

    rows = random_rows(random.Random(2), 7)
    X = to_matrix(rows, FeatureSpec(6, 0, ["ab"]), audit=Collector())
    assert seen == [(7, ["ab"])] and X.shape == (7, 64)
