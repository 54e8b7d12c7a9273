"""Where in the stream was this row: the learners' errors carry their row as data
(`onlinepgs._checks.RowError` and the PGS errors), and `fit_stream` and the streaming
engine name the record of the stream from it (no parsing of messages).

Every kind of error is put at a known record of a stream and looked for there, for
several chunk sizes (the record's number is computed here from where it was put)."""
import pickle

import numpy as np
import pytest

from onlinepgs import PGSClassifier
from onlinepgs._checks import RowError, row_of_entry
from onlinepgs.pgs import (ModelTooLargeError, PGSClassifierLearner, PGSDivergedError,
                           PGSRegressorLearner)
from onlinepgs.streaming import LearnerError, train_stream

CHUNKS = (1, 3, 7, 1000)
N, AT = 20, 12  # a stream of N good records and a bad one inserted at index AT (from 0)


def stream(bad_x=None, bad_y=None, classifier=True):
    rng = np.random.RandomState(0)
    pairs = [({int(j): float(rng.rand())}, int(i % 2) if classifier else float(rng.rand()))
             for i, j in enumerate(rng.randint(0, 5, N))]
    x = {0: 1.0} if bad_x is None else bad_x
    y = (1 if classifier else 0.5) if bad_y is None else bad_y
    return pairs[:AT] + [(x, y)] + pairs[AT:]


# (learner, bad x, bad y, the message in the stream's words up to the record, after it)
ROW_KINDS = {
    "string feature without hashing": (
        PGSClassifierLearner, {"word": 1.0}, None, "", ": string feature 'word' needs hashing"),
    "non-finite value": (
        PGSClassifierLearner, {0: float("nan")}, None, "", ", feature 0: value nan is not finite"),
    "value not a number": (
        PGSClassifierLearner, {0: "x"}, None, "", ", feature 0: value 'x' is not a number"),
    "negative index": (
        PGSRegressorLearner, {-3: 1.0}, None, "", ": negative feature index -3"),
    "not a pair": (
        PGSRegressorLearner, [(0, 1.0, 2.0)], None, "", ": expected (feature, value) pairs"),
    "None label": (
        PGSClassifierLearner, None, None, "y contains None (", "): every label"),
    "NaN target": (
        PGSRegressorLearner, None, float("nan"), "y contains NaN or infinity (", ": nan)"),
    "too wide": (
        PGSRegressorLearner, {10**9: 1.0}, None, "", " has a feature at column 1000000000"),
}


@pytest.mark.parametrize("kind", list(ROW_KINDS))
@pytest.mark.parametrize("chunk_rows", CHUNKS)
def test_fit_stream_names_the_record_of_each_error(kind, chunk_rows):
    cls, x, y, before, after = ROW_KINDS[kind]
    classifier = cls is PGSClassifierLearner
    pairs = stream(x, y, classifier)
    if kind == "None label":
        pairs[AT] = (pairs[AT][0], None)
    record = AT + 1  # counted from 1
    with pytest.raises(ValueError) as caught:
        cls().fit_stream(iter(pairs), chunk_rows=chunk_rows,
                         **({"classes": [0, 1]} if classifier else {}))
    message = str(caught.value)
    assert message.startswith(f"{before}record {record} of the stream{after}"), message
    assert "row" not in message.split(":")[0]  # no row of a chunk left in the place
    assert caught.value.row == AT  # the row of the stream, from 0
    if kind == "too wide":
        assert isinstance(caught.value, ModelTooLargeError)
        assert caught.value.column == 10**9


@pytest.mark.parametrize("chunk_rows", CHUNKS)
def test_mixed_labels_blame_the_record_unlike_the_classes(chunk_rows):
    """A chunk of numbers and "a" is the learner's mix (RowError, blaming "a", not the
    chunk's first label); a chunk of "a" alone the engine's label check (LabelError)."""
    pairs = stream(bad_y="a")
    with pytest.raises(ValueError) as caught:
        PGSClassifierLearner().fit_stream(iter(pairs), classes=[0, 1], chunk_rows=chunk_rows)
    error = caught.value
    if isinstance(error, RowError):
        assert error.row == AT and f"record {AT + 1} of the stream: 'a'" in str(error)
    else:
        assert error.record == AT + 1 and error.label == "a"
    assert isinstance(error, RowError) == (chunk_rows > 1)


@pytest.mark.parametrize("chunk_rows", CHUNKS)
def test_divergence_names_the_record_partial_fit_names_as_a_row(chunk_rows):
    """The yardstick: partial_fit on the whole stream at once names row r; fit_stream,
    whatever its chunks, names record r + 1."""
    rng = np.random.RandomState(0)
    records = [{0: float(a), 1: float(b)} for a, b in rng.rand(60, 2)]
    y = [2.0 * r[0] - r[1] for r in records]
    records[37] = {0: 1e300}
    with pytest.raises(PGSDivergedError) as whole:
        PGSRegressorLearner(radius=None, sigma=1e-2).partial_fit(records, y)
    row = whole.value.row
    assert str(whole.value).startswith(f"PGS diverged at row {row} of this call")
    with pytest.raises(PGSDivergedError) as caught:
        PGSRegressorLearner(radius=None, sigma=1e-2).fit_stream(zip(records, y),
                                                                 chunk_rows=chunk_rows)
    assert str(caught.value).startswith(f"PGS diverged at record {row + 1} of the stream")
    assert caught.value.row == row and caught.value.reason == whole.value.reason


@pytest.mark.parametrize("chunk_rows", CHUNKS)
def test_an_error_without_a_row_names_the_records_of_its_chunk(chunk_rows):
    pairs = stream(bad_y="not a number", classifier=False)
    first = AT // chunk_rows * chunk_rows + 1  # the first record of the chunk holding AT
    with pytest.raises(ValueError, match=f"^records from {first} of the stream: y must be "
                                         "numeric for a regressor"):
        PGSRegressorLearner().fit_stream(iter(pairs), chunk_rows=chunk_rows)


@pytest.mark.parametrize("cls", [PGSClassifierLearner, PGSClassifier])
def test_a_bad_parameter_names_no_record(cls):
    """A parameter concerns no record: fit_stream refuses it as partial_fit does,
    before reading the stream."""
    read = []
    pairs = (read.append(pair) or pair for pair in stream())
    with pytest.raises(ValueError, match="^The 'sigma' parameter of PGSClassifier must be"):
        cls(sigma=-1.0).fit_stream(pairs, classes=[0, 1])
    assert read == []


def test_the_scikit_learn_estimators_have_the_learners_fit_stream():
    assert PGSClassifier.fit_stream is PGSClassifierLearner.fit_stream
    with pytest.raises(RowError, match=f"^record {AT + 1} of the stream: string feature"):
        PGSClassifier().fit_stream(iter(stream({"w": 1.0})), classes=[0, 1], chunk_rows=5)


@pytest.mark.parametrize("kind", list(ROW_KINDS))
@pytest.mark.parametrize("chunk_rows", (1, 7))
@pytest.mark.parametrize("holdout_every", (None, 5))
def test_the_engine_over_records_places_each_error(kind, chunk_rows, holdout_every):
    """train_stream's LearnerError: the record as data (``record``), with a hold-out too
    (then the calls' rows are not consecutive records)."""
    cls, x, y, before, after = ROW_KINDS[kind]
    classifier = cls is PGSClassifierLearner
    pairs = stream(x, y, classifier)
    if kind == "None label":
        pairs[AT] = (pairs[AT][0], None)
    assert (AT + 1) % 5  # the bad record is trained on, not held out
    with pytest.raises(LearnerError) as caught:
        train_stream(cls(), pairs, chunk_rows=chunk_rows, holdout_every=holdout_every,
                     **({"classes": [0, 1]} if classifier else {}))
    error = caught.value
    assert error.record == AT + 1 and error.line is None
    assert str(error).startswith(f"record {AT + 1} of the stream: ")
    assert error.record_of(error.error.row) == AT + 1
    assert str(error.in_source_words()).startswith(f"{before}record {AT + 1} of the stream{after}")


def test_row_errors_keep_their_rows_through_pickling():
    error = RowError("y mixes strings and numbers (", 0, ": 3, ", 4, ": 'x')", row=4)
    assert str(error) == "y mixes strings and numbers (row 0: 3, row 4: 'x')"
    assert (error.row, error.rows) == (4, (0, 4))
    assert error.worded(lambda i: f"line {i + 10}") == (
        "y mixes strings and numbers (line 10: 3, line 14: 'x')")
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.row, copy.rows) == (str(error), 4, (0, 4))
    big = ModelTooLargeError((2, " has a feature"), row=2, column=7)
    assert str(big) == "row 2 of this call has a feature" and big.row == 2
    copy = pickle.loads(pickle.dumps(big))
    assert (str(copy), copy.row, copy.column) == (str(big), 2, 7)


def test_row_of_entry_against_a_plain_search():
    import scipy.sparse as sp

    X = sp.csr_matrix(np.array([[1.0, 0, 2], [0, 0, 0], [0, 3.0, 0], [4.0, 5.0, 0]]))
    rows = np.repeat(np.arange(4), np.diff(X.indptr))  # each stored entry's row
    assert [row_of_entry(X, e) for e in range(X.nnz)] == rows.tolist()
