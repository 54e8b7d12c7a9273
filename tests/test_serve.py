"""`onlinepgs serve`: the daemon against `onlinepgs predict` and `onlinepgs train -i` (the
yardsticks, bit for bit), and its behaviour with many, broken, slow or hostile clients.

Every server here listens on 127.0.0.1 on a free port (--port 0 --port-file), and every
loop that talks to it is bounded in count and in time.
"""
import contextlib
import gzip
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from onlinepgs.datasets import a9a_path
from onlinepgs.model_io import load_learner
from test_cli_formats import vw_data

HOST = "127.0.0.1"
TIMEOUT = 60  # seconds any wait here takes at most


def run(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "onlinepgs.cli", *map(str, args)],
                          capture_output=True, timeout=TIMEOUT)
    if check and proc.returncode != 0:
        raise AssertionError(proc.stderr.decode())
    return proc


@pytest.fixture(scope="module")
def a9a(tmp_path_factory):
    """a9a's first 2,000 training rows and a model of them (fixed sigma: a quick one),
    and 1,500 test rows."""
    root = tmp_path_factory.mktemp("serve")
    with gzip.open(a9a_path("train"), "rb") as f:
        train = b"".join(f.readline() for _ in range(2000))
    with gzip.open(a9a_path("test"), "rb") as f:
        test = b"".join(f.readline() for _ in range(1500))
    (root / "train.svm").write_bytes(train)
    (root / "test.svm").write_bytes(test)
    run("train", root / "train.svm", "-o", root / "model.pgs", "--sigma", "1e-3", "--quiet")
    return root


# a9a's columns spread over WIDE_STRIDE times as many (2.46 million): a model this wide
# holds its states over the columns its rows reach (onlinepgs._columns_seen), and so does
# the server that learns on
WIDE_STRIDE = 20011


def _spread(data):
    out = []
    for line in data.splitlines(keepends=True):
        label, *entries = line.split()
        out.append(b" ".join([label] + [b"%d:%s" % (int(j) * WIDE_STRIDE, v) for j, v in
                                        (e.split(b":") for e in entries)]) + b"\n")
    return b"".join(out)


@pytest.fixture(scope="module")
def a9a_wide(a9a, tmp_path_factory):
    """The a9a fixture's rows with their columns spread over 2.46 million (a model of
    them: over the columns seen)."""
    root = tmp_path_factory.mktemp("serve_wide")
    for name in ("train.svm", "test.svm"):
        (root / name).write_bytes(_spread((a9a / name).read_bytes()))
    run("train", root / "train.svm", "-o", root / "model.pgs", "--sigma", "1e-3", "--quiet")
    assert load_learner(str(root / "model.pgs"))._columns is not None
    return root


@pytest.fixture(params=["narrow", "wide"])
def a9a_any(request):
    """The a9a fixture, then its columns spread wide."""
    return request.getfixturevalue("a9a" if request.param == "narrow" else "a9a_wide")


@contextlib.contextmanager
def served(model, *flags, tmp_path):
    """A server of `model` on 127.0.0.1 (a free port); stopped by SIGTERM on leaving,
    which must end it with status 0."""
    port_file = tmp_path / f"port-{time.monotonic_ns()}"
    proc = subprocess.Popen([sys.executable, "-m", "onlinepgs.cli", "serve", str(model),
                             "--port", "0", "--port-file", str(port_file),
                             *map(str, flags)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not port_file.exists():
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)
        proc.port = int(port_file.read_text())
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=TIMEOUT)
        finally:
            if proc.poll() is None:
                proc.kill()
        proc.stderr_text = proc.stderr.read().decode()
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == 0, proc.stderr_text


def connect(proc):
    return socket.create_connection((HOST, proc.port), timeout=TIMEOUT)


def exchange(proc, data):
    """Send `data` on one connection (in a thread, as a pipelining client does), close
    the sending side, and return every byte answered until the server closes."""
    with connect(proc) as conn:
        sender = threading.Thread(target=lambda: (conn.sendall(data),
                                                  conn.shutdown(socket.SHUT_WR)))
        sender.start()
        out = read_all(conn)
        sender.join(TIMEOUT)
    return out


def read_all(conn):
    parts, deadline = [], time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        part = conn.recv(1 << 16)
        if not part:
            break
        parts.append(part)
    return b"".join(parts)


def read_lines(conn, n):
    """The next `n` answer lines of `conn` (bounded in time)."""
    got, deadline = b"", time.monotonic() + TIMEOUT
    while got.count(b"\n") < n and time.monotonic() < deadline:
        part = conn.recv(1 << 16)
        assert part, "the server closed the connection"
        got += part
    return got.decode().splitlines()


def predicted(model, data_path, kind):
    out = run("predict", model, data_path, "--kind", kind).stdout.decode().splitlines()
    return [line for line in out if not line.startswith("# classes")]


# ---- answers: predict's, bit for bit ------------------------------------------------------
@pytest.mark.parametrize("kind", ["labels", "scores", "probabilities"])
def test_answers_are_predicts_lines(a9a, tmp_path, kind):
    with served(a9a / "model.pgs", "--kind", kind, tmp_path=tmp_path) as proc:
        answers = exchange(proc, (a9a / "test.svm").read_bytes()).decode().splitlines()
    assert answers == predicted(a9a / "model.pgs", a9a / "test.svm", kind)
    assert len(answers) == 1500


def test_vw_with_interactions_and_csv_with_columns_read_as_predict_reads_them(tmp_path):
    text = vw_data(400)
    (tmp_path / "d.vw").write_bytes(text)
    run("train", tmp_path / "d.vw", "-o", tmp_path / "vw.pgs", "-q", "ua", "-b", "12",
        "--sigma", "1e-3", "--quiet")
    rng = np.random.RandomState(1)
    cities = ["paris", "lyon", '"x,y"']  # a quoted field with the delimiter in it
    rows = ["city,size,y"] + [f"{cities[rng.randint(3)]},{rng.rand():.3f},"
                              f"{rng.randint(2)}" for _ in range(300)]
    (tmp_path / "d.csv").write_text("\n".join(rows) + "\n")
    run("train", tmp_path / "d.csv", "-o", tmp_path / "csv.pgs", "--label", "y",
        "--numeric", "size", "--sigma", "1e-3", "--quiet")
    with served(tmp_path / "vw.pgs", "--kind", "scores", tmp_path=tmp_path) as proc:
        vw = exchange(proc, text).decode().splitlines()
    with served(tmp_path / "csv.pgs", "--kind", "scores", tmp_path=tmp_path) as proc:
        # the rows without the header: the server reads them in the model's columns
        csv = exchange(proc, ("\n".join(rows[1:]) + "\n").encode()).decode().splitlines()
    assert vw == predicted(tmp_path / "vw.pgs", tmp_path / "d.vw", "scores")
    assert csv == predicted(tmp_path / "csv.pgs", tmp_path / "d.csv", "scores")
    assert len(vw) == 400 and len(csv) == 300


def test_a_line_whose_crossed_product_overflows_is_its_own_error(tmp_path):
    """A line whose -q product leaves the double range (found when the batch is scored,
    not when it is read) is answered its own error; the lines sent with it get predict's
    answers (every line of the batch was answered that error)."""
    text = vw_data(50)
    (tmp_path / "d.vw").write_bytes(text)
    run("train", tmp_path / "d.vw", "-o", tmp_path / "vw.pgs", "-q", "ua", "-b", "12",
        "--sigma", "1e-3", "--quiet")
    lines = text.splitlines(keepends=True)[:6]
    bad = b"1 |user x:1e200 |ad y:1e200\n"
    for flags in ((), ("--learn",)):
        with served(tmp_path / "vw.pgs", "--kind", "scores", *flags,
                    tmp_path=tmp_path) as proc:
            got = exchange(proc, b"".join(lines[:3]) + bad).decode().splitlines()
        want = predicted(tmp_path / "vw.pgs", tmp_path / "d.vw", "scores")[:3]
        # (learning, each line is answered before it is learned: the first as predict)
        assert got[:3] == want if not flags else got[0] == want[0], flags
        assert all(float(answer) == float(answer) for answer in got[:3])
        assert got[3].startswith("error: this line: Input X contains infinity"), got[3]


def test_concurrent_clients_each_get_their_answers_in_order(a9a, tmp_path):
    data = (a9a / "test.svm").read_bytes().splitlines(keepends=True)
    parts = [b"".join(data[i::4]) for i in range(4)]
    want = predicted(a9a / "model.pgs", a9a / "test.svm", "scores")
    results = [None] * 4
    with served(a9a / "model.pgs", "--kind", "scores", tmp_path=tmp_path) as proc:
        def client(i):
            results[i] = exchange(proc, parts[i]).decode().splitlines()
        threads = [threading.Thread(target=client, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT)
    for i in range(4):
        assert results[i] == want[i::4]


def test_bad_blank_and_oversized_lines_get_errors_and_the_connection_stays(a9a, tmp_path):
    good = (a9a / "test.svm").read_bytes().splitlines(keepends=True)[:3]
    long_line = b"1 " + b" ".join(b"%d:1" % j for j in range(1, 400)) + b"\n"
    assert len(long_line) > 1000
    lines = [good[0], b"-1 3:x1.5\n", b"\n", b"# a comment\n", good[1], long_line,
             b"+1 5:1 2:\n", good[2]]
    want = predicted(a9a / "model.pgs", a9a / "test.svm", "labels")[:3]
    with served(a9a / "model.pgs", "--max-line-bytes", "1000", tmp_path=tmp_path) as proc:
        with connect(proc) as conn:
            conn.sendall(b"".join(lines))
            answers = read_lines(conn, len(lines))
            # a long line sent in pieces is skipped to its newline, then reading goes on
            for piece in range(0, len(long_line), 100):
                conn.sendall(long_line[piece:piece + 100])
                time.sleep(0.002)
            conn.sendall(good[0])
            later = read_lines(conn, 2)
    assert answers[0] == want[0] and answers[4] == want[1] and answers[7] == want[2]
    assert answers[1] == "error: column 6: bad feature value 'x1.5' in \"3:x1.5\""
    assert answers[2] == answers[3] == ("error: no example on the line (a blank or "
                                        "comment line)")
    assert answers[5] == "error: line longer than 1000 bytes"
    assert answers[6].startswith("error: column ")
    assert later == ["error: line longer than 1000 bytes", want[0]]


# ---- learning: train -i's model, bit for bit -----------------------------------------
def _same_model(path, reference):
    a, b = load_learner(str(path)), load_learner(str(reference))
    assert np.array_equal(a.coef_, b.coef_) and np.array_equal(a.intercept_, b.intercept_)
    assert a.t_ == b.t_
    # the solver states, field by field (the models go on alike)
    da, db = a._state.to_dict(), b._state.to_dict()
    assert da.keys() == db.keys()
    for key, value in da.items():
        if isinstance(value, np.ndarray):
            assert np.array_equal(value, db[key], equal_nan=value.dtype.kind == "f"), key
        else:
            assert value == db[key] or value != value and db[key] != db[key], key


def test_learning_gives_train_is_model_and_answers_before_each_row(a9a_any, tmp_path):
    data = (a9a_any / "test.svm").read_bytes()
    with served(a9a_any / "model.pgs", "--learn", "-o", tmp_path / "learned.pgs",
                "--kind", "scores", tmp_path=tmp_path) as proc:
        answers = exchange(proc, data).decode().splitlines()
    run("train", a9a_any / "test.svm", "-i", a9a_any / "model.pgs", "-o",
        tmp_path / "ref.pgs", "--quiet")
    _same_model(tmp_path / "learned.pgs", tmp_path / "ref.pgs")
    # test-then-train: the answer to line i+1 is the model of train -i on lines 1..i
    lines = data.splitlines(keepends=True)
    for i in (0, 1, 37, 1499):
        (tmp_path / "next.svm").write_bytes(lines[i])
        if i:
            (tmp_path / "head.svm").write_bytes(b"".join(lines[:i]))
            run("train", tmp_path / "head.svm", "-i", a9a_any / "model.pgs", "-o",
                tmp_path / "head.pgs", "--quiet")
        model = tmp_path / "head.pgs" if i else a9a_any / "model.pgs"
        assert answers[i] == predicted(model, tmp_path / "next.svm", "scores")[0]
    # a saved model resumes like any other
    run("train", a9a_any / "test.svm", "-i", tmp_path / "learned.pgs", "--quiet")


# rows that would make the model diverge: a label whose squared loss overflows, a value
# of 1e300 (the running sums overflow), a value of 1e9 among values near 1 (predictions
# that run away, `onlinepgs._runaway`)
POISON = [b"1e200 3:1\n", b"1 3:1e300 5:1\n", b"1 3:1e9\n"]


def _poison(root):
    """POISON on the columns of the rows in `root` (the a9a fixture's or the wide one's)."""
    return [_spread(line) for line in POISON] if root.name.startswith("serve_wide") else POISON


def test_a_row_that_diverges_is_undone_and_the_server_goes_on(a9a_any, tmp_path):
    """Each poisoned row is answered `error: not learned: ...` and leaves the model as it
    was: the saved model is train -i's of the file without them, bit for bit, and the
    answers after them are predict's of the models train -i makes of the clean rows
    before them."""
    run("train", a9a_any / "train.svm", "-o", tmp_path / "sq.pgs", "--loss", "squared",
        "--sigma", "1e-3", "--quiet")
    clean = (a9a_any / "test.svm").read_bytes().splitlines(keepends=True)[:600]
    poison = _poison(a9a_any)
    stream = clean[:200] + poison[:1] + clean[200:400] + poison[1:] + clean[400:]
    with served(tmp_path / "sq.pgs", "--learn", "-o", tmp_path / "learned.pgs", "--kind",
                "scores", tmp_path=tmp_path) as proc:
        answers = exchange(proc, b"".join(stream)).decode().splitlines()
    assert len(answers) == len(stream)
    refused = [answers[200], answers[401], answers[402]]
    assert all(a.startswith("error: not learned: ") for a in refused), refused
    assert "overflowed" in refused[0] and "ran away" in refused[2]
    clean_answers = answers[:200] + answers[201:401] + answers[403:]
    (tmp_path / "clean.svm").write_bytes(b"".join(clean))
    run("train", tmp_path / "clean.svm", "-i", tmp_path / "sq.pgs", "-o",
        tmp_path / "ref.pgs", "--quiet")
    _same_model(tmp_path / "learned.pgs", tmp_path / "ref.pgs")
    for i in (200, 201, 400, 599):  # the clean row i, answered by the rows before it
        (tmp_path / "head.svm").write_bytes(b"".join(clean[:i]))
        (tmp_path / "next.svm").write_bytes(clean[i])
        run("train", tmp_path / "head.svm", "-i", tmp_path / "sq.pgs", "-o",
            tmp_path / "head.pgs", "--quiet")
        assert clean_answers[i] == predicted(tmp_path / "head.pgs", tmp_path / "next.svm",
                                             "scores")[0]


@pytest.mark.parametrize("sigma", ["1e-3", "auto"])
def test_undo_from_a_snapshot_replays_the_rows_since(a9a_any, tmp_path, monkeypatch, sigma):
    """In the server's process, snapshots every few hundred rows: poisoned rows in
    batches and alone, on the compiled pass (a fixed sigma; a sigma race, one run or two
    live, its checks' rows on partial_fit), leave the model of partial_fit over the clean
    rows, bit for bit."""
    from onlinepgs.cli.parser import build_parser
    from onlinepgs.cli.serve import ServedModel, Undo
    from onlinepgs.streaming.engine import _narrow
    from onlinepgs.svmlight import load_svmlight

    monkeypatch.setattr(Undo, "MIN_BYTES", 4000)
    monkeypatch.setattr(Undo, "MAX_BYTES", 4000)
    run("train", a9a_any / "train.svm", "-o", tmp_path / "sq.pgs", "--loss", "squared",
        "--sigma", sigma, "--quiet")
    args = build_parser().parse_args(["serve", str(tmp_path / "sq.pgs"), "--learn",
                                      "--kind", "scores"])
    served_model = ServedModel.from_args(args)
    duel_rows = []  # rows learned while two runs of the race were live
    race_rows = ServedModel._race_rows
    monkeypatch.setattr(ServedModel, "_race_rows", lambda self, *a: duel_rows.append(
        len(a[5])) or race_rows(self, *a))
    clean = (a9a_any / "test.svm").read_bytes().splitlines(keepends=True)[:1500]
    poison = _poison(a9a_any)
    batches = [clean[:150] + poison[:1] + clean[150:300], poison[1:2], clean[300:301],
               poison[2:] + clean[301:]]
    answers = []
    for batch in batches:
        answers += served_model.answer([b"".join(batch)])
    assert [a.startswith("error: not learned") for a in answers].count(True) == 3
    assert len(served_model.undo.since) < 20  # snapshots were taken on the way
    assert (sum(duel_rows) > 100) == (sigma == "auto"), duel_rows
    reference = load_learner(str(tmp_path / "sq.pgs"))
    (tmp_path / "clean.svm").write_bytes(b"".join(clean))
    X, y = load_svmlight(str(tmp_path / "clean.svm"), zero_based=False)
    for i in range(X.shape[0]):  # each row as wide as it needs, as the server takes it
        reference.partial_fit(_narrow(X[i:i + 1]), y[i:i + 1])
    est = served_model.est
    # a wide model learns over the columns its rows reach, as partial_fit does
    assert (est._columns is not None) == a9a_any.name.startswith("serve_wide")
    assert np.array_equal(est.coef_, reference.coef_)
    assert np.array_equal(est.intercept_, reference.intercept_) and est.t_ == reference.t_


def _three_classes(a9a, tmp_path):
    """a9a's rows with a third class (label 2 where feature 40 is on) and a model of
    its training rows."""
    def relabel(lines):
        return [(b"2" + line[line.index(b" "):] if b" 40:1" in line else line)
                for line in lines]
    train = relabel((a9a / "train.svm").read_bytes().splitlines(keepends=True))
    (tmp_path / "mc.svm").write_bytes(b"".join(train))
    run("train", tmp_path / "mc.svm", "-o", tmp_path / "mc.pgs", "--sigma", "1e-3",
        "--classes", "-1,1,2", "--quiet")
    return relabel((a9a / "test.svm").read_bytes().splitlines(keepends=True)[:400])


@pytest.mark.parametrize("classes, kind", [(2, "labels"), (2, "probabilities"),
                                           (3, "labels"), (3, "probabilities"),
                                           (3, "scores")])
def test_the_compiled_pass_answers_and_learns_as_partial_fit_a_row(a9a, tmp_path,
                                                                   classes, kind):
    """In the server's process: the answers and the model of `test_then_train`'s pass are
    those of predict then partial_fit on each row in turn (the learner's Python), a
    label outside the classes refused in the middle of a batch."""
    from onlinepgs.cli.parser import build_parser
    from onlinepgs.cli.predict import prediction_lines
    from onlinepgs.cli.serve import ServedModel
    from onlinepgs.streaming.engine import _narrow

    if classes == 2:
        model = a9a / "model.pgs"
        lines = (a9a / "test.svm").read_bytes().splitlines(keepends=True)[:400]
    else:
        lines = _three_classes(a9a, tmp_path)
        model = tmp_path / "mc.pgs"
    lines.insert(150, b"7" + lines[0][lines[0].index(b" "):])
    args = build_parser().parse_args(["serve", str(model), "--learn", "--kind", kind])
    served_model = ServedModel.from_args(args)
    answers = served_model.answer([b"".join(lines[:300]), b"".join(lines[300:])])
    reference = load_learner(str(model))
    pieces, _ = served_model.lines.read(b"".join(lines))
    X, y, _, _ = pieces[0]
    want = []
    for i in range(X.shape[0]):
        if y[i] == 7:
            want.append(answers[150])
            continue
        want += prediction_lines(reference, X[i:i + 1], kind)
        reference.partial_fit(_narrow(X[i:i + 1]), y[i:i + 1], classes=reference.classes_)
    assert answers[150].startswith("error: label 7 is not one of the model's classes")
    assert answers == want
    est = served_model.est
    assert np.array_equal(est.coef_, reference.coef_) and est.t_ == reference.t_


def test_numbers_are_written_as_pythons_format_writes_them():
    """The compiled formatting of the answers (and predict's lines): Python's
    ``format(v, ".9g")`` of every finite double, across the exponents; a row with a value
    that is not finite left to Python."""
    from onlinepgs._core._format import format_rows
    from onlinepgs.cli.predict import _lines

    rng = np.random.default_rng(0)
    with np.errstate(over="ignore"):
        values = rng.standard_normal(60000) * 10.0 ** rng.integers(-320, 309, 60000)
    values = np.concatenate([values[np.isfinite(values)],
                             [0.0, -0.0, 1e-5, 1e-4, 123456789.0, 1234567890.0, 5e-324,
                              1.7976931348623157e308, 0.5, 2.5, 1e16, 0.1, -1.0]])
    rows = np.ascontiguousarray(values[:len(values) // 3 * 3].reshape(-1, 3))
    text = format_rows(rows).decode().split("\n")[:-1]
    assert text == [" ".join(format(v, ".9g") for v in row) for row in rows]
    assert format_rows(np.array([[1.0, np.inf]])) is None
    assert _lines(np.array([0.25, np.nan, -np.inf]), "scores") == ["0.25", "nan", "-inf"]


def test_a_sigma_race_learns_as_train_continues_it(a9a_any, tmp_path):
    """A model whose sigma race is live (one run, its next check at row 2,250): the
    compiled pass steps its one run up to the check's row, the race's Python takes that
    row (and any row while two runs are live); the model is train -i's, bit for bit."""
    run("train", a9a_any / "train.svm", "-o", tmp_path / "race.pgs", "--quiet")
    race = load_learner(str(tmp_path / "race.pgs"))._race
    assert len(race.states) == 1 and race.n_rows < race.schedule.check_at < race.n_rows + 1500
    with served(tmp_path / "race.pgs", "--learn", "-o", tmp_path / "learned.pgs",
                tmp_path=tmp_path) as proc:
        exchange(proc, (a9a_any / "test.svm").read_bytes())
    run("train", a9a_any / "test.svm", "-i", tmp_path / "race.pgs", "-o",
        tmp_path / "ref.pgs", "--quiet")
    _same_model(tmp_path / "learned.pgs", tmp_path / "ref.pgs")
    # the check was decided on the way (the next one is later)
    assert load_learner(str(tmp_path / "learned.pgs"))._race.schedule.check_at > \
        race.schedule.check_at


def test_a_hashed_model_of_2_to_26_columns_learns_in_the_memory_of_its_columns(tmp_path):
    """A model trained with -b 26 (its states over the columns its rows reach) learns
    on in the server over those columns too: its peak memory a small part of one
    state over the width (2^26 coordinates of 4 doubles each: 2 GiB), and the model
    it saves train -i's."""
    (tmp_path / "a.vw").write_bytes(vw_data(600, seed=1))
    (tmp_path / "b.vw").write_bytes(vw_data(600, seed=2))
    run("train", tmp_path / "a.vw", "-b", "26", "--geometry", "adaptive", "-o",
        tmp_path / "m.pgs", "--quiet")
    with served(tmp_path / "m.pgs", "--learn", "-o", tmp_path / "learned.pgs",
                tmp_path=tmp_path) as proc:
        answers = exchange(proc, (tmp_path / "b.vw").read_bytes()).decode().splitlines()
        with open(f"/proc/{proc.pid}/status") as f:
            peak_kib = int(f.read().split("VmHWM:")[1].split()[0])
    assert len(answers) == 600 and not any(a.startswith("error") for a in answers)
    assert peak_kib < 400 * 1024, peak_kib
    run("train", tmp_path / "b.vw", "-i", tmp_path / "m.pgs", "-o", tmp_path / "ref.pgs",
        "--quiet")
    _same_model(tmp_path / "learned.pgs", tmp_path / "ref.pgs")


def test_a_client_that_leaves_mid_line_leaves_no_half_row(a9a, tmp_path):
    lines = (a9a / "test.svm").read_bytes().splitlines(keepends=True)[:300]
    with served(a9a / "model.pgs", "--learn", "-o", tmp_path / "learned.pgs",
                tmp_path=tmp_path) as proc:
        with connect(proc) as conn:
            conn.sendall(b"".join(lines[:200]) + lines[200][:20])
            read_lines(conn, 200)
        # the next client is served by the model of the 200 whole lines
        (tmp_path / "rest.svm").write_bytes(b"".join(lines[200:]))
        exchange(proc, b"".join(lines[200:]))
    (tmp_path / "all.svm").write_bytes(b"".join(lines))
    run("train", tmp_path / "all.svm", "-i", a9a / "model.pgs", "-o", tmp_path / "ref.pgs",
        "--quiet")
    _same_model(tmp_path / "learned.pgs", tmp_path / "ref.pgs")


def test_saves_every_n_rows_and_on_sigterm_mid_stream_a_consistent_snapshot(a9a, tmp_path):
    lines = (a9a / "test.svm").read_bytes().splitlines(keepends=True)
    t0 = load_learner(str(a9a / "model.pgs")).t_
    out = tmp_path / "learned.pgs"
    with served(a9a / "model.pgs", "--learn", "-o", out, "--save-every", "500",
                tmp_path=tmp_path) as proc:
        with connect(proc) as conn:
            conn.sendall(b"".join(lines[:1200]))
            read_lines(conn, 1200)
            assert load_learner(str(out)).t_ == t0 + 1000  # saved at 500 and 1000
            # SIGTERM while a client streams rows to learn: the rows learned so far
            sender = threading.Thread(target=lambda: _send_quietly(conn, lines * 20))
            sender.start()
            read_lines(conn, 2000)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=TIMEOUT) == 0
            sender.join(TIMEOUT)
    learned = load_learner(str(out)).t_ - t0
    assert learned >= 3200
    stream = lines[:1200] + (lines * 20)
    (tmp_path / "seen.svm").write_bytes(b"".join(stream[:learned]))
    run("train", tmp_path / "seen.svm", "-i", a9a / "model.pgs", "-o", tmp_path / "ref.pgs",
        "--quiet")
    _same_model(out, tmp_path / "ref.pgs")


def test_a_save_that_fails_is_said_and_the_server_goes_on(a9a, tmp_path):
    """A periodic save that cannot be written (its directory removed) is said on
    stderr, and the server answers and learns on (it closed every client whose batch
    made a save due, each batch after retrying it); the final save, once it can be
    written, holds every row learned."""
    lines = (a9a / "test.svm").read_bytes().splitlines(keepends=True)
    t0 = load_learner(str(a9a / "model.pgs")).t_
    folder = tmp_path / "out"
    folder.mkdir()
    out = folder / "learned.pgs"
    with served(a9a / "model.pgs", "--learn", "-o", out, "--save-every", "10",
                tmp_path=tmp_path) as proc:
        assert exchange(proc, b"".join(lines[:20])).count(b"\n") == 20
        assert load_learner(str(out)).t_ == t0 + 20
        shutil.rmtree(folder)
        for k in range(3):
            got = exchange(proc, b"".join(lines[20 + 5 * k:25 + 5 * k]))
            assert got.count(b"\n") == 5 and b"error" not in got
        folder.mkdir()
    assert f"cannot save to {out} at row 30" in proc.stderr_text
    assert "learning goes on" in proc.stderr_text
    (tmp_path / "seen.svm").write_bytes(b"".join(lines[:35]))
    run("train", tmp_path / "seen.svm", "-i", a9a / "model.pgs", "-o", tmp_path / "ref.pgs",
        "--quiet")
    _same_model(out, tmp_path / "ref.pgs")


def _send_quietly(conn, lines):
    with contextlib.suppress(OSError):
        for start in range(0, len(lines), 500):
            conn.sendall(b"".join(lines[start:start + 500]))


def test_a_client_that_never_reads_is_not_read_either(a9a, tmp_path):
    """The server stops reading a client whose answers wait: its memory stays bounded,
    the client's sends block, and other clients are served meanwhile."""
    block = (a9a / "test.svm").read_bytes()
    with served(a9a / "model.pgs", "--kind", "probabilities", tmp_path=tmp_path) as proc:
        rss_before = _rss(proc.pid)
        with socket.socket() as conn:
            # a small window: the answers back up after a few MB of lines, not tens
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            conn.settimeout(2.0)
            conn.connect((HOST, proc.port))
            sent = 0
            with contextlib.suppress(socket.timeout):
                for _ in range(400):  # at most 400 * 106 KB: far beyond the buffers
                    conn.sendall(block)
                    sent += len(block)
            assert sent < 400 * len(block)  # blocked: the server stopped reading
            answers = exchange(proc, block).decode().splitlines()  # another client
            assert answers == predicted(a9a / "model.pgs", a9a / "test.svm",
                                        "probabilities")
            grown = _rss(proc.pid) - rss_before
    assert grown < 60 * 2**20, grown


def _rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    pytest.skip("no /proc")


# ---- options and models refused before any socket ------------------------------------
@pytest.mark.parametrize("flags, message", [
    (["--save-every", "10"], "argument --save-every: needs -o MODEL"),
    (["-o", "x.pgs"], "argument --output: needs --learn"),
    (["--max-model-bytes", "1K"], "argument --max-model-bytes: needs --learn"),
    (["--port", "70000"], "--port must be an int in the range [0, 65535]"),
    (["--max-line-bytes", "0"], "--max-line-bytes"),
])
def test_bad_options_exit_2_before_listening(a9a, flags, message):
    proc = run("serve", a9a / "model.pgs", *flags, check=False)
    assert proc.returncode == 2
    err = proc.stderr.decode()
    assert message in err and "listening" not in err and len(err.splitlines()) == 1


def test_models_that_cannot_do_what_is_asked_are_refused(a9a, tmp_path):
    run("train", a9a / "train.svm", "-o", tmp_path / "light.pgs", "--sigma", "1e-3",
        "--no-state", "--quiet")
    run("train", a9a / "train.svm", "-o", tmp_path / "hinge.pgs", "--sigma", "1e-3",
        "--loss", "hinge", "--quiet")
    for args, message in (((tmp_path / "light.pgs", "--learn"), "--no-state"),
                          ((tmp_path / "hinge.pgs", "--kind", "probabilities"),
                           "probabilities need the logistic loss")):
        proc = run("serve", *args, check=False)
        assert proc.returncode == 1 and message in proc.stderr.decode()
        assert "Traceback" not in proc.stderr.decode()
