"""Feature hashing and record/stream input."""
import random
import string

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import strategies as st

from fuzzing import fuzzer
from sklearn.utils import murmurhash3_32

from onlinepgs import PGSClassifier, PGSRegressor
from onlinepgs._core._hashing import murmurhash3, records_to_csr


def test_murmurhash3_matches_scikit_learn():
    rng = random.Random(0)
    for _ in range(5000):
        key = "".join(rng.choice(string.printable + "éü中") for _ in range(rng.randint(0, 30)))
        seed = rng.randint(0, 2**32 - 1)
        assert murmurhash3(key, seed) == murmurhash3_32(key, seed=seed, positive=True)
    assert murmurhash3(b"abc", 7) == murmurhash3_32(b"abc", seed=7, positive=True)


def expected_row(record, n_bits, seed):
    """The documented mapping, written independently: index = h mod 2^b, sign = top bit."""
    row = {}
    for key, value in (record.items() if isinstance(record, dict) else record):
        if value is None:  # a missing field: no feature
            continue
        if isinstance(key, str) and isinstance(value, str):  # a category: "key=value", 1
            key, value = key + "=" + value, 1.0
        if isinstance(key, str):
            h = murmurhash3_32(key, seed=seed, positive=True)
            col, sign = h % 2**n_bits, (-1.0 if h >= 2**31 else 1.0)
        else:
            col, sign = key % 2**n_bits, 1.0
        row[col] = row.get(col, 0.0) + sign * value
    return row


def test_records_to_csr_is_the_documented_mapping():
    records = [{"user=alice": 1.0, "item=42": 2.0, 7: 0.5}, [("ctx", 3.0), (2000, 1.5)], {}]
    for n_bits, seed in [(4, 0), (8, 123), (20, 2**32 - 1)]:
        data, indices, indptr, width = records_to_csr(records, n_bits, seed, -1)
        X = sp.csr_matrix((data, indices, indptr), shape=(3, 2**n_bits))
        X.sum_duplicates()
        for i, record in enumerate(records):
            got = dict(zip(X[i].indices.tolist(), X[i].data.tolist()))
            assert got == pytest.approx(expected_row(record, n_bits, seed))


@pytest.mark.parametrize("n_bits", [None, 6])
def test_none_value_is_a_missing_field_with_or_without_hashing(n_bits):
    """A None value adds no feature (a JSON null in a log record), with hashing or not:
    the model equals the one fit on the records without those fields, bit for bit."""
    with_none = [{0: 1.0, 3: None}, [(2, None), (1, -0.5)], {5: None}]
    without = [{0: 1.0}, [(1, -0.5)], {}]
    y = [1.0, 0.0, 2.0]
    a = PGSRegressor(n_bits=n_bits).fit_stream(zip(with_none, y))
    b = PGSRegressor(n_bits=n_bits).fit_stream(zip(without, y))
    assert a.coef_.shape == b.coef_.shape
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert a.intercept_ == b.intercept_


@pytest.mark.parametrize("record, match", [
    ({"word": 1.0}, "string feature 'word' needs hashing"),
    ({3: float("nan")}, "not finite"),
    ({3: "x"}, "not a number"),
    ({-1: 1.0}, "negative feature index"),
    ([(1, 2, 3)], "expected \\(feature, value\\) pairs"),
    ({1.5: 1.0}, "neither a str nor an int"),
    # found by the fuzzer below: an OverflowError and a UnicodeEncodeError naming no row
    ({3: 10**400}, "row 1, feature 3: value 1000.* is not finite as a double"),
    ({"\ud800": 1.0}, "row 1: string feature '\\\\ud800' is not valid Unicode"),
])
def test_bad_records_are_named(record, match):
    n_bits = 8 if isinstance(next(iter(record)), str) and match.startswith("row 1:") else -1
    with pytest.raises(ValueError, match=match):
        records_to_csr([{0: 1.0}, record], n_bits, 0, -1)


def make_stream(n, seed=0, n_words=50_000):
    rng = np.random.RandomState(seed)
    for i in range(n):
        words = rng.randint(0, n_words, 5)
        x = {f"w{w}": 1.0 for w in words}
        x["bias_feature"] = 0.5
        yield x, int(words[0] % 2)


def test_stream_memory_is_bounded_by_n_bits():
    clf = PGSClassifier(n_bits=10, sigma=1e-3).fit_stream(make_stream(3000), classes=[0, 1])
    assert clf.coef_.shape == (1, 1024) and clf.n_features_in_ == 1024
    assert clf._state.dim == 1025  # 50,000 distinct words, 1,024 columns


@pytest.mark.parametrize("k", [1, 3])
def test_fit_stream_does_not_depend_on_chunking(k):
    a = PGSClassifier(n_bits=12, batch_size=k, random_state=0)
    a.fit_stream(make_stream(500), classes=[0, 1], chunk_rows=7)
    b = PGSClassifier(n_bits=12, batch_size=k, random_state=0)
    b.fit_stream(make_stream(500), classes=[0, 1], chunk_rows=1000)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert a.t_ == b.t_ == -(-500 // k)


def test_fit_stream_equals_partial_fit_on_the_hashed_matrix():
    pairs = list(make_stream(300))
    rows = [expected_row(x, 12, 5) for x, _ in pairs]
    indptr = np.cumsum([0] + [len(r) for r in rows])
    indices = np.concatenate([sorted(r) for r in rows])
    data = np.concatenate([[r[c] for c in sorted(r)] for r in rows])
    X = sp.csr_matrix((data, indices, indptr), shape=(300, 4096))
    y = [label for _, label in pairs]
    a = PGSClassifier(n_bits=12, hash_seed=5).fit_stream(pairs, classes=[0, 1])
    b = PGSClassifier(n_bits=12, hash_seed=5).partial_fit(X, y, classes=[0, 1])
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-12)
    np.testing.assert_allclose(a.decision_function([x for x, _ in pairs]),
                               b.decision_function(X), rtol=1e-12)


def test_without_hashing_int_features_beyond_the_model_grow_it_as_csr_columns_do():
    reg = PGSRegressor().partial_fit([{0: 1.0, 4: 2.0}, [(1, 1.0)]], [1.0, 2.0])
    assert reg.n_features_in_ == 5
    reg.partial_fit([{9: 1.0}], [0.0])
    ref = PGSRegressor().partial_fit(sp.csr_matrix(([1.0, 2.0, 1.0], [0, 4, 1], [0, 2, 3]),
                                                   shape=(2, 5)), [1.0, 2.0])
    ref.partial_fit(sp.csr_matrix(([1.0], [9], [0, 1]), shape=(1, 10)), [0.0])
    assert reg.n_features_in_ == ref.n_features_in_ == 10
    np.testing.assert_array_equal(reg.coef_, ref.coef_)
    assert reg.predict([{12: 1.0}]) == reg.intercept_  # unseen at predict time: weight 0
    with pytest.raises(ValueError, match="needs hashing"):
        reg.predict([{"a": 1.0}])


def test_hashing_folds_matrix_columns():
    rng = np.random.RandomState(0)
    X = sp.random(50, 300, density=0.1, random_state=rng, format="csr")
    y = rng.randint(0, 2, 50)
    folded = sp.csr_matrix((X.data.copy(), X.indices % 64, X.indptr.copy()), shape=(50, 64))
    folded.sum_duplicates()
    original = X.copy()
    a = PGSClassifier(n_bits=6, random_state=0).partial_fit(X, y, classes=[0, 1])
    assert (X != original).nnz == 0 and np.array_equal(X.indices, original.indices)
    b = PGSClassifier(random_state=0).partial_fit(folded, y, classes=[0, 1])
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-12)


def test_stream_items_must_be_pairs():
    with pytest.raises(ValueError, match="record 2 of the stream is not an \\(x, y\\) pair"):
        PGSRegressor().fit_stream([({0: 1.0}, 1.0), {0: 1.0}])


@pytest.mark.parametrize("x", [None, 3, "a:1", [1.0, 2.0], (0.5,)])
def test_a_stream_x_that_is_no_record_is_named(x):
    """Found by the fuzzer below: an x that is not a record made the chunk a matrix, so
    a list of numbers trained silently as a dense row, and None failed in sklearn's
    checks with a three-line message naming no item."""
    est = PGSRegressor()
    with pytest.raises(ValueError, match="^record 2 of the stream is .*: expected a dict {feature: "
                                         "value} or a sequence of \\(feature, value\\) pairs"):
        est.fit_stream([({0: 1.0}, 1.0), (x, 2.0)], chunk_rows=5)
    assert not hasattr(est, "_state")
    # a stream of such lists alone trained as dense rows, without a word
    with pytest.raises(ValueError, match="^record 1 of the stream is \\[1.0, 2.0\\]: expected a dict"):
        est.fit_stream([([1.0, 2.0], 1.0), ([0.5, 0.0], 2.0)])
    assert not hasattr(est, "_state")


# ---- fuzzing the record reader (fit_stream / partial_fit on records) --------------------

KEYS = st.one_of(st.integers(-2, 40), st.integers(-2**70, 2**70), st.text(max_size=4),
                 st.booleans(), st.floats(allow_nan=False), st.none(), st.binary(max_size=2))
VALUES = st.one_of(st.floats(), st.floats(-10, 10), st.integers(-2**1100, 2**1100),
                   st.integers(-5, 5), st.text(max_size=2), st.none(), st.booleans(),
                   st.complex_numbers(max_magnitude=2))
RECORDS = st.one_of(st.dictionaries(KEYS, VALUES, max_size=4),
                    st.lists(st.tuples(KEYS, VALUES), max_size=4),
                    st.lists(st.one_of(KEYS, st.tuples(KEYS), st.tuples(KEYS, VALUES, VALUES)),
                             max_size=2),
                    KEYS)


def _valid(record, n_bits):
    """Whether the documented mapping takes a record (the fuzz's independent yardstick)."""
    items = record.items() if isinstance(record, dict) else record
    if not isinstance(items, (list, type({}.items()))):
        return False
    for pair in items:
        if not (isinstance(pair, tuple) and len(pair) == 2):
            return False
        key, value = pair
        if value is None:  # a missing field: skipped whatever its key
            continue
        if isinstance(key, str):
            if n_bits is None:
                return False
            try:
                key.encode("utf-8")
                if isinstance(value, str):  # a category (hashed: n_bits), the feature
                    value.encode("utf-8")   # "key=value" of value 1
                    continue
            except UnicodeEncodeError:
                return False
        elif not isinstance(key, int) or key < 0 or key >= 2**40:
            return False
        if (not isinstance(value, (int, float)) or isinstance(value, complex)
                or abs(value) > 1e300 or value != value):
            return False
    return True


@fuzzer(300, st.lists(RECORDS, min_size=1, max_size=5), st.sampled_from([None, 6]),
        st.integers(1, 3))
def test_fuzz_record_input(records, n_bits, chunk_rows):
    """Any records: either the model of the documented mapping (the same as partial_fit
    on the CSR rows written independently, `expected_row`), or a one-line ValueError
    or TypeError; never another exception, never a partial update."""
    y = [float(i % 3) for i in range(len(records))]
    est = PGSRegressor(n_bits=n_bits, max_model_bytes=2**20)
    try:
        est.fit_stream(zip(records, y), chunk_rows=chunk_rows)
    except (ValueError, TypeError) as exc:
        assert "\n" not in str(exc) and str(exc)
        assert not all(_valid(r, n_bits) for r in records) or any(
            max((k for k, _ in (r.items() if isinstance(r, dict) else r)
                 if not isinstance(k, str)), default=0) >= 2**16 for r in records)
        return
    assert all(_valid(r, n_bits) for r in records), records
    rows = [expected_row(r, n_bits if n_bits is not None else 41, 0) for r in records]
    width = 2**n_bits if n_bits is not None else max(
        [c + 1 for row in rows for c in row], default=0)
    X = sp.lil_matrix((len(rows), max(width, 1)))
    for i, row in enumerate(rows):
        for c, v in row.items():
            X[i, c] = v
    reference = PGSRegressor(n_bits=n_bits)
    for a in range(0, len(rows), chunk_rows):
        reference.partial_fit(sp.csr_matrix(X[a:a + chunk_rows]), y[a:a + chunk_rows])
    np.testing.assert_array_equal(est.coef_[:width], reference.coef_[:width])
    assert est.intercept_ == reference.intercept_
