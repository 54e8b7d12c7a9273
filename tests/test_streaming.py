"""The streaming engine (onlinepgs.streaming) from Python: passes, hold-out, checkpoints,
exact resume, sources (files, records, chunks), progress and errors with their place.

Yardsticks: partial_fit on the same rows in one call (the engine's whole-batch promise),
a NumPy replay of the held-out estimate, the file's own line numbers."""
import ast
import pathlib

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import strategies as st

from fuzzing import MUTATIONS, fuzzer, mutate
from onlinepgs import PGSClassifier, PGSRegressor, load_svmlight
from onlinepgs.streaming import (ClassesError, EmptyStreamError, LabelError, LearnerError,
                                 ReadOnceError, ResumeError, StreamError, StreamTrainer,
                                 read_checkpoint, train_stream, whole_batches)
from onlinepgs.model_io import ModelFileError
from onlinepgs.svmlight import SvmlightError
from test_model_io import raw_parts, write_parts


def write_svmlight(path, n=3000, n_features=50, seed=0, classes=(-1, 1)):
    """Generated rows in svmlight text (1-based indices); returns nothing: the test
    reads the file back with load_svmlight, its independent reader."""
    rng = np.random.RandomState(seed)
    w = rng.randn(n_features, len(classes))
    with open(path, "w") as f:
        for _ in range(n):
            cols = np.unique(rng.randint(0, n_features, 6))
            vals = rng.rand(cols.size)
            label = classes[int(np.argmax(vals @ w[cols] + 0.3 * rng.randn(len(classes))))]
            f.write(f"{label} " + " ".join(f"{c + 1}:{v:.5f}" for c, v in zip(cols, vals))
                    + "\n")


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "d.svm"
    write_svmlight(path)
    return str(path)


def assert_same_model(a, b):
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    assert a.online_stats_ == pytest.approx(b.online_stats_, rel=1e-12)


def test_whole_batches():
    assert [whole_batches(r, 4) for r in (1, 4, 5, 8, 9)] == [4, 4, 8, 8, 12]
    assert whole_batches(7, 1) == 7


def test_passes_over_files_and_sequences_equal_partial_fit(data, tmp_path):
    X, y = load_svmlight(data)
    reference = PGSClassifier(sigma=1e-3, batch_size=3, random_state=0)
    for _ in range(2):
        reference.partial_fit(X, y, classes=[-1, 1])
    run = train_stream(PGSClassifier(sigma=1e-3, batch_size=3, random_state=0), data,
                       passes=2, chunk_rows=500)
    assert run.rows == 6000 and np.isnan(run.holdout_loss)
    assert_same_model(run.learner, reference)
    # two files in order are one pass over their rows (each file's last short batch is
    # trained at its end: a cut at a whole batch changes nothing)
    lines = pathlib.Path(data).read_text().splitlines(keepends=True)
    a, b = tmp_path / "a.svm", tmp_path / "b.svm"
    a.write_text("".join(lines[:1002]))
    b.write_text("".join(lines[1002:]))
    run = train_stream(PGSClassifier(sigma=1e-3, batch_size=3, random_state=0),
                       [str(a), b], passes=2, chunk_rows=333)
    assert_same_model(run.learner, reference)
    # a list of (X, y) chunks of uneven sizes can be read again; an iterator cannot
    cuts = [0, 7, 700, 701, 2000, 3000]
    chunks = [(X[i:j], y[i:j]) for i, j in zip(cuts, cuts[1:])]
    run = train_stream(PGSClassifier(sigma=1e-3, batch_size=3, random_state=0), chunks,
                       passes=2)
    assert_same_model(run.learner, reference)
    dense = [(Xc.toarray(), yc) for Xc, yc in chunks]
    once = PGSClassifier(sigma=1e-3, batch_size=3, random_state=0)
    with pytest.raises(ReadOnceError, match="can be read only once") as caught:
        train_stream(once, iter(dense), passes=2)
    assert caught.value.passes == 2 and not hasattr(once, "coef_")
    dense_ref = PGSClassifier(sigma=1e-3, batch_size=3, random_state=0)
    dense_ref.partial_fit(X.toarray(), y, classes=[-1, 1])
    run = train_stream(PGSClassifier(sigma=1e-3, batch_size=3, random_state=0), iter(dense))
    assert_same_model(run.learner, dense_ref)


def test_records_with_hashing_equal_partial_fit_on_them():
    rng = np.random.RandomState(1)
    words = ["good", "bad", "fine", "poor", "ok"]
    records = [{f"w={words[j]}": 1.0 for j in rng.randint(0, 5, 3)} for _ in range(500)]
    labels = [int(("w=good" in r) or ("w=fine" in r)) for r in records]
    reference = PGSClassifier(n_bits=8, batch_size=2, random_state=0)
    reference.partial_fit(records, labels, classes=[0, 1])
    run = train_stream(PGSClassifier(n_bits=8, batch_size=2, random_state=0),
                       zip(records, labels), chunk_rows=33)  # classes: the first chunk's
    assert_same_model(run.learner, reference)
    assert run.learner.classes_.tolist() == [0, 1]


def test_holdout_estimate_equals_a_numpy_replay(data):
    """Every 7th row is scored before the rows after it in its segment (1000 rows) are
    trained, never trained on; the estimate is the mean logistic loss of those scores,
    replayed here with partial_fit segment by segment and the loss in NumPy."""
    X, y = load_svmlight(data)
    run = train_stream(PGSClassifier(sigma=1e-3, random_state=0), data, holdout_every=7,
                       chunk_rows=1000)
    held = (np.arange(3000) + 1) % 7 == 0
    replay, losses = PGSClassifier(sigma=1e-3, random_state=0), []
    for start in range(0, 3000, 1000):
        rows = np.arange(start, start + 1000)
        out, kept = rows[held[rows]], rows[~held[rows]]
        scores = (replay.decision_function(X[out]) if hasattr(replay, "coef_")
                  else np.zeros(out.size))  # the first model is w = 0
        losses.append(np.logaddexp(0.0, -y[out] * scores))
        replay.partial_fit(X[kept], y[kept], classes=[-1, 1])
    losses = np.concatenate(losses)
    assert run.holdout_rows == held.sum() == 428
    assert run.holdout_loss == pytest.approx(losses.mean(), rel=1e-12)
    assert_same_model(run.learner, replay)


class MeanRegressor:
    """The learner protocol at its smallest, without scikit-learn: predicts the mean
    of the targets trained on (squared loss)."""

    _classifier, loss, epsilon, batch_size = False, "squared", 0.0, 1

    def __init__(self):
        self.total, self.n = 0.0, 0

    def partial_fit(self, X, y):
        self.total += float(np.sum(y))
        self.n += len(y)
        return self

    @property
    def online_stats_(self):
        if not self.n:
            raise AttributeError("not trained")
        return {"n_examples": self.n}

    def predict(self, X):
        return np.full(len(X), self.total / self.n)


def test_a_duck_typed_learner_and_records_count_from_one():
    rows = [({0: float(i)}, float(i)) for i in range(1, 41)]
    run = train_stream(MeanRegressor(), rows, holdout_every=4, chunk_rows=6)
    # replay: segments are within chunks of 6 rows; held rows 4, 8, ..., 40 (values = row)
    means, total, n = [], 0.0, 0
    for start in range(0, 40, 6):
        for row in range(start + 1, min(start + 6, 40) + 1):
            if row % 4 == 0:
                means.append((row - (total / n if n else 0.0)) ** 2)  # no 1/2
        kept = [r for r in range(start + 1, min(start + 6, 40) + 1) if r % 4]
        total, n = total + sum(kept), n + len(kept)
    assert run.learner.n == 30 and run.holdout_rows == 10
    assert run.holdout_loss == pytest.approx(np.mean(means), rel=1e-12)


@pytest.mark.parametrize("k, chunks", [(1, (300, 300, 300)), (4, (2000, 300, 777))])
def test_checkpoint_then_resume_from_python_equals_the_uninterrupted_run(data, tmp_path, k,
                                                                         chunks):
    """A run stopped in its second pass (here by its progress callback) resumes from the
    checkpoint file, in other chunks, to the model of the run never stopped. The held-out
    rows are the same; their estimate too where the chunks are (with other chunks, the
    segments a held row is scored before move, and so its score)."""
    options = dict(passes=2, holdout_every=7)
    full = train_stream(PGSClassifier(sigma=1e-3, batch_size=k, random_state=0), data,
                        chunk_rows=chunks[0], **options)
    model = str(tmp_path / "m.pgs")

    class Stop(Exception):
        pass

    def stop_in_pass_two(event):
        if event.kind == "chunk" and event.pass_index == 1 and event.rows >= 4300:
            raise Stop

    trainer = StreamTrainer(PGSClassifier(sigma=1e-3, batch_size=k, random_state=0),
                            checkpoint_path=model, checkpoint_every=900, chunk_rows=chunks[1],
                            progress=stop_in_pass_two, **options)
    with pytest.raises(Stop):
        trainer.run(data)
    assert trainer.last_checkpoint == 3600 and trainer.checkpoints == 4
    checkpoint = read_checkpoint(model)
    # rows short of a whole batch are not in the model: the position is before them
    assert checkpoint.position["pass"] == 1 and 600 - k < checkpoint.position["rows"] <= 600
    assert checkpoint.position["holdout_every"] == 7 and checkpoint.zero_based is False
    resumed = train_stream(checkpoint.learner, data, resume=checkpoint,
                           checkpoint_path=model, chunk_rows=chunks[2], **options)
    assert resumed.rows == 3000 - checkpoint.position["rows"]
    assert_same_model(resumed.learner, full.learner)
    assert resumed.holdout_rows == full.holdout_rows == 428
    if k == 1:
        assert resumed.holdout_loss == pytest.approx(full.holdout_loss, rel=1e-12)
    # the file now holds the finished model
    from onlinepgs import load_model

    final, header = load_model(model, return_header=True)
    assert header["extra"] == {"finished": True, "zero_based": False}
    assert_same_model(final, full.learner)
    # a resume with other run options is refused before any work
    for changed, option in (({"passes": 3}, "passes"), ({"holdout_every": 5}, "holdout_every")):
        with pytest.raises(ResumeError) as caught:
            train_stream(checkpoint.learner, data, resume=checkpoint,
                         **{**options, **changed})
        assert caught.value.option == option and caught.value.saved == options[option]


def test_errors_carry_their_place(data, tmp_path):
    lines = pathlib.Path(data).read_text().splitlines(keepends=True)
    bad = tmp_path / "bad.svm"
    bad.write_text("".join(lines[:1234]) + "3 1:1\n" + "".join(lines[1234:]))
    with pytest.raises(LabelError) as caught:
        train_stream(PGSClassifier(), str(bad), chunk_rows=100, holdout_every=3)
    error = caught.value
    assert (error.source, error.line, error.record, error.label) == (str(bad), "1235", 1235, 3)
    assert str(error) == f"{bad}:1235: label 3 is not one of the classes [-1, 1]"
    assert error.origin == "first chunk"
    # the same row of an iterable is named by its number
    X, y = load_svmlight(bad)
    records = [(dict(zip(X[i].indices.tolist(), X[i].data.tolist())), y[i])
               for i in range(X.shape[0])]
    with pytest.raises(LabelError, match=r"^label 3\.0 \(record 1235 of the stream\)"):
        train_stream(PGSClassifier(), records, classes=[-1, 1])
    # a bad line: the reader's error, with its line and column
    bad.write_text("".join(lines[:10]) + "1 3:oops\n")
    with pytest.raises(SvmlightError) as caught:
        train_stream(PGSClassifier(), str(bad))
    assert (caught.value.line, caught.value.column, caught.value.text) == (11, 5, "oops")
    # the learner's refusals at their row: a stray index beyond the memory budget
    bad.write_text("1 1:1\n-1 2:1\n1 400000000:1\n")
    with pytest.raises(LearnerError) as caught:
        train_stream(PGSClassifier(), str(bad))
    assert (caught.value.line, caught.value.record) == ("3", 3)
    assert caught.value.error.column == 399_999_999
    one = tmp_path / "one.svm"
    one.write_text("1 1:1\n1 2:1\n")
    with pytest.raises(ClassesError) as caught:
        train_stream(PGSClassifier(), str(one))
    assert caught.value.labels == [1.0]
    empty = tmp_path / "empty.svm"
    empty.write_text("# nothing\n")
    with pytest.raises(EmptyStreamError, match="empty.svm: no training rows were read"):
        train_stream(PGSClassifier(), str(empty))
    with pytest.raises(StreamError, match="nowhere.svm: no such file"):
        train_stream(PGSClassifier(), str(tmp_path / "nowhere.svm"))
    with pytest.raises(ValueError, match=r"classes applies to classification losses only \(loss='squared'"):
        train_stream(PGSRegressor(), data, classes=[-1, 1])


def test_divergence_names_the_row_of_the_stream():
    from onlinepgs import PGSDivergedError

    rng = np.random.RandomState(0)
    X = rng.rand(80, 5)
    y = X @ [1.0, -2.0, 0.5, 0.0, 3.0]
    X[44, 0] = 1e300
    learner = PGSRegressor(radius=None, sigma=1e-2, random_state=0)
    chunks = [(sp.csr_matrix(X[i:i + 10]), y[i:i + 10]) for i in range(0, 80, 10)]
    with pytest.raises(LearnerError) as caught:
        train_stream(learner, chunks)
    assert isinstance(caught.value.error, PGSDivergedError)
    assert caught.value.record == 45 and caught.value.line is None
    assert str(caught.value).startswith("record 45 of the stream: PGS diverged")


def test_progress_reports_rows_at_doubling_counts_and_the_bytes(data):
    events = []
    run = train_stream(PGSClassifier(random_state=0), data, passes=2, chunk_rows=700,
                       progress=events.append)
    rows = [e for e in events if e.kind == "row"]
    assert [e.stats["n_examples"] for e in rows] == [2**i for i in range(13)]
    chunks = [e for e in events if e.kind == "chunk"]
    size = pathlib.Path(data).stat().st_size
    assert chunks[-1].bytes_read == chunks[-1].bytes_total == 2 * size
    assert [e.rows for e in chunks] == sorted(e.rows for e in chunks)
    assert [e.kind for e in events].count("source") == 2
    # reporting splits the calls at whole batches only: the model is the same
    quiet = train_stream(PGSClassifier(random_state=0), data, passes=2, chunk_rows=700)
    assert_same_model(run.learner, quiet.learner)


def test_the_engine_imports_no_scikit_learn():
    """The engine is duck-typed: no module of onlinepgs/streaming imports sklearn or the
    estimators (which do)."""
    folder = pathlib.Path(__file__).parent.parent / "onlinepgs" / "streaming"
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + [getattr(node, "module", "") or ""]
                assert not any(n.startswith(("sklearn", "onlinepgs.estimators"))
                               for n in names), (path.name, names)


def test_records_resume_too_and_wait_for_whole_batches(tmp_path):
    """A sequence of records: hold-out rows between training rows and chunks of 10 do not
    cut mini-batches of 3 (the model is partial_fit on the kept records in one call), and
    a checkpoint written mid-run resumes to the same model."""
    rng = np.random.RandomState(2)
    records = [{int(j): float(v) for j, v in zip(rng.randint(0, 30, 4), rng.rand(4))}
               for _ in range(400)]
    labels = [int(sum(r.values()) > 2.0) for r in records]
    stream = list(zip(records, labels))
    kept = [i for i in range(400) if (i + 1) % 6]
    reference = PGSClassifier(batch_size=3, random_state=0)
    reference.partial_fit([records[i] for i in kept], [labels[i] for i in kept],
                          classes=[0, 1])
    model = str(tmp_path / "r.pgs")
    options = dict(holdout_every=6, chunk_rows=10, checkpoint_path=model)
    full = train_stream(PGSClassifier(batch_size=3, random_state=0), stream, **options)
    assert_same_model(full.learner, reference)
    assert full.holdout_rows == 66

    def stop(event):
        if event.kind == "chunk" and event.rows >= 250:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_stream(PGSClassifier(batch_size=3, random_state=0), stream, progress=stop,
                     checkpoint_every=100, **options)
    checkpoint = read_checkpoint(model)
    assert checkpoint.position["data"] == ["the stream"]
    resumed = train_stream(checkpoint.learner, stream, resume=checkpoint, **options)
    assert_same_model(resumed.learner, reference)


@pytest.mark.parametrize("options, match", [
    ({"passes": 0}, r"passes must be an int in the range \[1, inf\). Got 0 instead"),
    ({"chunk_rows": 2.5}, r"chunk_rows must be an int in the range \[1, inf\). Got 2.5"),
    ({"holdout_every": 0}, r"holdout_every must be None or an int in the range \[1, inf\). Got 0"),
    ({"checkpoint_every": 10}, "checkpoint_every needs checkpoint_path"),
])
def test_bad_options_are_refused_before_any_work(options, match):
    learner = PGSClassifier()
    with pytest.raises(ValueError, match=match):
        StreamTrainer(learner, **options)
    assert not hasattr(learner, "coef_")


def test_fit_stream_is_the_engine_over_one_iterable():
    """fit_stream keeps its contract: a regressor ignores classes (partial_fit has none),
    an empty stream leaves the model as it is, a classifier without classes takes the
    first chunk's labels."""
    records = [{0: float(i % 5), 1: 1.0} for i in range(60)]
    y = [float(i % 5) for i in range(60)]
    a = PGSRegressor(random_state=0).fit_stream(zip(records, y), classes=[0, 1])
    b = PGSRegressor(random_state=0).partial_fit(records, y)
    assert_same_model(a, b)
    a.fit_stream(iter(()))
    assert_same_model(a, b)
    labels = [int(v > 2) for v in y]
    c = PGSClassifier(random_state=0).fit_stream(zip(records, labels), chunk_rows=7)
    d = PGSClassifier(random_state=0).partial_fit(records, labels, classes=[0, 1])
    assert_same_model(c, d)


# ---- checkpoints, fuzzed ------------------------------------------------------------------
class _Stop(Exception):
    pass


@pytest.fixture
def checkpoint_file(data, tmp_path):
    """A checkpoint of a 2-pass run over `data` (3,000 rows), stopped in its second pass
    at row 600 (4,300 rows in)."""
    model = tmp_path / "cp.pgs"

    def stop(event):
        if event.kind == "chunk" and event.pass_index == 1 and event.rows >= 4300:
            raise _Stop

    trainer = StreamTrainer(PGSClassifier(sigma=1e-3, random_state=0), passes=2,
                            holdout_every=7, checkpoint_path=str(model),
                            checkpoint_every=900, chunk_rows=300, progress=stop)
    with pytest.raises(_Stop):
        trainer.run(data)
    return model


POSITION_FIELDS = ["pass", "file", "rows", "pass_rows", "passes", "holdout_every", "data",
                   "holdout"]
JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-2, 7000)
                           | st.floats(-10, 1e4) | st.text(max_size=3),
                           lambda inner: st.lists(inner, max_size=3), max_leaves=4)


@fuzzer(40, st.dictionaries(st.sampled_from(POSITION_FIELDS), JSON_VALUES, max_size=3),
        st.lists(st.sampled_from(POSITION_FIELDS), max_size=2), MUTATIONS, st.booleans())
def test_fuzzed_checkpoints_resume_or_refuse_in_one_line(data, checkpoint_file, tmp_path,
                                                         changes, dropped, mutations,
                                                         damaged_bytes):
    """A checkpoint with its stream position edited (fields changed or dropped; the
    checksum valid: a hand-edited file), or its bytes damaged: reading it gives the
    saved learner and a position, or a one-line ModelFileError naming the file; a
    resume from a position read trains the rows after it, (passes - pass) x 3,000 -
    rows of them, or refuses in one line before training a wrong model (ResumeError,
    or a ModelFileError), never anything else."""
    target = tmp_path / "edited.pgs"
    header, arrays = raw_parts(checkpoint_file)
    original = read_checkpoint(checkpoint_file)
    if damaged_bytes:
        target.write_bytes(mutate(checkpoint_file.read_bytes(), mutations))
    else:
        position = header["extra"]["stream"]
        position.update(changes)
        for field in dropped:
            position.pop(field, None)
        write_parts(target, header, arrays)
    try:
        checkpoint = read_checkpoint(target)
    except ModelFileError as exc:
        assert "\n" not in str(exc) and str(target) in str(exc), str(exc)
        return
    if damaged_bytes:  # the checksum let it through: the very checkpoint saved
        assert checkpoint.position == original.position
    assert_same_model(checkpoint.learner, original.learner)
    position = checkpoint.position
    try:
        run = train_stream(checkpoint.learner, data, resume=checkpoint, passes=2,
                           holdout_every=7, chunk_rows=500)
    except (ResumeError, ModelFileError) as exc:
        assert "\n" not in str(exc), str(exc)
        return
    assert run.rows == (2 - position["pass"]) * 3000 - position["rows"]
