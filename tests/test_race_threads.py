"""The runs of a race on several threads (``n_jobs``, `onlinepgs._jobs`): every result
the same bit for bit as on one thread (the yardstick: n_jobs=1, the serial path), with
the work really split (a spy counts the groups stepped at once)."""
import random
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from onlinepgs import PGSClassifier, PGSRegressor, _jobs
from onlinepgs._core._features import Crossing
from onlinepgs._core._pgs import run_lockstep
from onlinepgs._core._hashing import records_to_rows
from onlinepgs._race import FIRST_CHECK, SigmaRace
from onlinepgs.features import CrossedRows, NamespacedRows
from onlinepgs.model_io import load_learner, load_model, read_header, save_model
from onlinepgs.pgs import PGSClassifierLearner, PGSRegressorLearner
from test_crossed import (click_lines, diverging_crossed_rows, expanded_input,
                          namespaced_records, same_state)


def _rows(n=3000, d=20, seed=0, classes=2):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, d) * (rng.rand(n, d) < 0.3)
    X[:, 0] += 1.0
    Z = X @ rng.randn(d, max(classes, 2)) + 0.5 * rng.randn(n, max(classes, 2))
    y = np.where(Z[:, 0] > Z[:, 1], 1, -1) if classes == 2 else Z.argmax(axis=1)
    return sp.csr_matrix(X), y


@pytest.fixture
def split(monkeypatch):
    """The most groups any piece was stepped in at once (`_jobs.run_groups`)."""
    most = [0]
    run_groups = _jobs.run_groups

    def spy(work, parts):
        most[0] = max(most[0], len(parts))
        return run_groups(work, parts)
    monkeypatch.setattr(_jobs, "run_groups", spy)
    return most


def _same_learners(a, b):
    assert a.sigma_path_ == b.sigma_path_
    assert a.t_ == b.t_
    assert same_state(a._state, b._state)
    race_a, race_b = getattr(a, "_race", None), getattr(b, "_race", None)
    assert (race_a is None) == (race_b is None)
    if race_a is not None:  # every live run, not only the one reported
        assert sorted(race_a.states) == sorted(race_b.states)
        for rid in race_a.states:
            assert same_state(race_a.states[rid], race_b.states[rid])


def _chunked(est, X, y, chunk, **kwargs):
    for lo in range(0, X.shape[0], chunk):
        est.partial_fit(X[lo:lo + chunk], y[lo:lo + chunk], **kwargs)
    return est


CASES = {
    "sigma race": dict(),
    "eta race": dict(geometry="adaptive"),
    "p 1.5": dict(p=1.5),
    "l1": dict(l1=1e-3),
    "mini-batches": dict(batch_size=4),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("n_jobs", [2, 3, -1])  # (-1: every core, as in scikit-learn)
def test_a_threaded_race_is_the_serial_race_bit_for_bit(split, case, n_jobs):
    """fit, then chunked partial_fit (pieces cut at the checks, the first check's beaten
    runs trained `together`): the path, every live run's state and the model equal
    those of n_jobs=1, bit for bit."""
    X, y = _rows(n=5000)
    options = dict(CASES[case], random_state=0)
    one = PGSClassifierLearner(n_jobs=1, **options).fit(X, y)
    assert split[0] <= 1  # mini-batches on one thread: no groups at all
    many = PGSClassifierLearner(n_jobs=n_jobs, **options).fit(X, y)
    # the first pass: the runs outnumber the threads (-1: one a core)
    assert split[0] == (n_jobs if n_jobs > 0 else _jobs.cores())
    _same_learners(one, many)
    one = _chunked(PGSClassifierLearner(n_jobs=1, **options), X, y, 777, classes=[-1, 1])
    many = _chunked(PGSClassifierLearner(n_jobs=n_jobs, **options), X, y, 777,
                    classes=[-1, 1])
    assert len(many.sigma_path_) >= 4
    _same_learners(one, many)


def test_a_threaded_multiclass_race_is_the_serial_race(split):
    """K one-vs-rest problems a state, and the coupled multinomial loss."""
    X, y = _rows(n=3000, classes=5)
    for multi_class in ("ovr", "multinomial"):
        runs = [_chunked(PGSClassifierLearner(n_jobs=n_jobs, multi_class=multi_class,
                                              random_state=1), X, y, 1000,
                         classes=np.arange(5)) for n_jobs in (1, 2)]
        _same_learners(*runs)
    assert split[0] == 2


def test_a_run_diverging_mid_piece_stops_in_its_thread_the_others_go_on(split):
    """Squared loss on R^n with large targets: the small sigmas overflow in the middle
    of a piece (on a thread of their own); they are dropped as on one thread, the
    runaway check's sums included, and the others go on, bit for bit."""
    rng = np.random.RandomState(0)
    X = rng.randn(1500, 5) * 3.0
    y = X @ rng.randn(5) * 10.0
    runs = [PGSRegressorLearner(sigma="auto", radius=None, n_jobs=n_jobs,
                                random_state=0).fit(X, y) for n_jobs in (1, 2, 4)]
    drops = [r for r in runs[0].sigma_path_ if r["event"] == "drop"]
    assert drops and all(r["reason"] == "diverged" for r in drops)
    assert split[0] == 4
    for other in runs[1:]:
        _same_learners(runs[0], other)


def test_crossed_rows_are_crossed_once_for_the_threads(monkeypatch):
    """Rows crossed in the pass: on one thread the runs read the chunk's `Crossing` (its
    builder and row slots are one pass's scratch, not shared); on several, each block
    of the piece is crossed once into a matrix every thread steps over, and no row is
    crossed twice. The race, its diverging runs (their rows in the chunk's numbering)
    and all, is the serial race's, bit for bit (yardstick: n_jobs=1)."""
    import onlinepgs.pgs as pgs_module
    rows, y, spec = diverging_crossed_rows()
    seen, made = [], []
    run_lockstep, to_csr = pgs_module.run_lockstep, CrossedRows.to_csr

    def spy(states, *args):
        seen.append("crossing" if isinstance(args[-1], Crossing) else "matrix")
        return run_lockstep(states, *args)

    def count(self):
        made.append(self.rows.n_rows)
        return to_csr(self)
    monkeypatch.setattr(pgs_module, "run_lockstep", spy)
    monkeypatch.setattr(CrossedRows, "to_csr", count)
    monkeypatch.setattr(_jobs, "CROSSED_BLOCK", 100)  # pieces of several blocks
    learners = []
    for n_jobs in (1, 2):
        seen.clear()
        made.clear()
        est = PGSRegressorLearner(n_bits=12, interactions=["sd", "sda"], radius=None,
                                  n_jobs=n_jobs, random_state=0)
        for start in range(0, rows.n_rows, 300):
            with expanded_input():
                est.partial_fit(CrossedRows(rows, spec)[start:start + 300],
                                y[start:start + 300])
        learners.append(est)
        if n_jobs == 1:
            assert set(seen) == {"crossing"} and made == []
        else:  # the pieces of two or more live runs in blocks; rows of 4 runs crossed once
            assert "matrix" in seen and max(made) == 100
            assert sum(made) <= rows.n_rows
    drops = [r for r in learners[0].sigma_path_ if r["event"] == "drop"]
    assert drops and all(r["reason"] == "diverged" for r in drops)
    _same_learners(*learners)


def test_states_of_all_kinds_on_crossed_blocks_end_as_on_the_crossed_pass(monkeypatch):
    """`_crossed_threads` (blocks crossed once, stepped on threads) against one
    `run_lockstep` over the `Crossing`, rows in a shuffled order, states of every kind
    (tests/test_race.py's `_assorted_states`), one of which diverges: each ends the
    same bit for bit, the diverging one at the same row of the chunk's numbering."""
    from test_race import _assorted_states
    monkeypatch.setattr(_jobs, "CROSSED_BLOCK", 70)
    rows, y, spec = diverging_crossed_rows()
    X = CrossedRows(rows, spec)[:400]
    y = y[:400] * 1e4
    sw = np.ones(400)
    order = np.random.RandomState(0).permutation(400).astype(np.int64)
    threaded, alone = _assorted_states(X.shape[1]), _assorted_states(X.shape[1])
    learner = PGSRegressorLearner(n_bits=12, interactions=["sd", "sda"])
    learner._crossed_threads(threaded, 3, X, y, sw, order, None)
    run_lockstep(alone, None, None, None, X.shape[1], y, sw, order, False, None,
                 X.crossing())
    assert [s.diverged for s in alone] == [False, False, True, False, False, False]
    assert alone[2].diverged_row == threaded[2].diverged_row
    assert alone[2].t < 100  # diverged in the first blocks: the others went on
    for a, b in zip(threaded, alone):
        assert same_state(a, b)


def test_the_first_check_trains_its_runs_together_and_lets_the_beaten_go(monkeypatch):
    """The piece ending at the first check trains `together` start runs at a time (one
    a thread): besides those, the race holds one trained run (the best so far), where
    one thread holds it besides the one it trains."""
    X, y = _rows(n=1200, classes=5)
    for n_jobs, at_once in ((1, 1), (2, 2)):
        races, seen = [], []
        advance = SigmaRace.advance

        def watch(self, *args, **kwargs):
            races.append(self)
            return advance(self, *args, **kwargs)

        def spy(work, parts):
            states = [s for part in parts for s in part]
            race = races[-1]
            if race.n_rows < FIRST_CHECK:
                held = [s for s in race.states.values()
                        if s.n_examples > 0 and all(s is not t for t in states)]
                seen.append((len(states), len(held)))
            return run_groups(work, parts)
        run_groups = _jobs.run_groups
        monkeypatch.setattr(SigmaRace, "advance", watch)
        monkeypatch.setattr(_jobs, "run_groups", spy)
        _chunked(PGSClassifierLearner(n_jobs=n_jobs, random_state=0), X, y, 5000,
                 classes=np.arange(5))
        monkeypatch.undo()
        assert [n for n, _ in seen] == [at_once] * (4 // at_once)
        assert max(held for _, held in seen) == 1


def test_a_model_trained_on_two_threads_continues_on_one(tmp_path, split):
    """n_jobs is no parameter of the model: a file saved at n_jobs=2 loads, and goes on
    at n_jobs=1 as the run that never stopped (and never ran on threads)."""
    X, y = _rows(n=4000)
    first = _chunked(PGSClassifier(n_jobs=2, random_state=0), X[:2500], y[:2500], 700,
                     classes=[-1, 1])
    save_model(first, tmp_path / "m.opgs")
    again = load_model(tmp_path / "m.opgs")
    assert again.n_jobs is None  # how a machine runs it: never in the file
    again.set_params(n_jobs=1)
    _chunked(again, X[2500:], y[2500:], 700)
    whole = _chunked(PGSClassifier(n_jobs=1, random_state=0), X, y, 700, classes=[-1, 1])
    _same_learners(whole, again)
    assert "n_jobs" not in read_header(tmp_path / "m.opgs")["params"]


@pytest.mark.parametrize("value", [0, 1.5, "2"])
def test_n_jobs_out_of_range_is_refused_before_the_data(value):
    X, y = _rows(n=50)
    for cls in (PGSClassifier, PGSClassifierLearner):
        with pytest.raises(ValueError, match=r"The 'n_jobs' parameter of "
                           r"PGSClassifier must be None, an int in the range \[1, inf\) or "
                           r"an int in the range \(-inf, -1\]"):
            cls(n_jobs=value).fit(X, y)
    with pytest.raises(ValueError, match="'n_jobs' parameter of PGSRegressor"):
        PGSRegressor(n_jobs=value).partial_fit(X, y.astype(float))


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "onlinepgs.cli", *args], cwd=cwd,
                          capture_output=True, text=True)


@pytest.mark.parametrize("args, message", [
    (["--jobs", "0"], "argument --jobs must be none or an int in the range [1, inf). "
                      "Got 0 instead."),
    (["--jobs", "x"], "argument --jobs: expected an integer, got 'x'"),
    (["--jobs", "2", "--solver", "sdca"], "argument --jobs: a PGS option; --solver sdca"),
    (["--jobs", "2", "--scheduler", "threads"], "argument --jobs: not available with "
                                                "--scheduler (each lane's task"),
])
def test_the_command_refuses_a_bad_jobs_before_reading(tmp_path, args, message):
    (tmp_path / "d.svm").write_text("1 1:1\n-1 2:1\n")
    done = _cli("train", "d.svm", *args, cwd=tmp_path)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert message in done.stderr, done.stderr


def test_the_command_with_interactions_writes_the_same_model_whatever_jobs(tmp_path):
    """-q on a click log, the race crossing each row in the pass: --jobs 2 writes the
    model --jobs 1 writes (weights and race path), and a model of --jobs 2 resumes with
    --jobs 1 as the run that never stopped."""
    (tmp_path / "c.vw").write_text(click_lines(3000, 4))
    (tmp_path / "a.vw").write_text(click_lines(1500, 5))
    models = {}
    for jobs in ("1", "2"):
        done = _cli("train", "c.vw", "-q", "sd", "--bits", "14", "--chunk-rows", "700",
                    "--jobs", jobs, "--quiet", "-o", f"m{jobs}.opgs", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        models[jobs] = load_learner(tmp_path / f"m{jobs}.opgs")
    assert models["2"].sigma_path_ == models["1"].sigma_path_
    assert same_state(models["1"]._state, models["2"]._state)
    for jobs, name in (("1", "r1.opgs"), ("2", "r2.opgs")):
        done = _cli("train", "a.vw", "-i", f"m{jobs}.opgs", "--jobs", "1" if jobs == "2"
                    else "2", "--chunk-rows", "700", "--quiet", "-o", name, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    a, b = load_learner(tmp_path / "r1.opgs"), load_learner(tmp_path / "r2.opgs")
    assert a.sigma_path_ == b.sigma_path_
    assert same_state(a._state, b._state)


def test_threads_for_counts_the_cores_and_the_runs(monkeypatch):
    monkeypatch.setattr(_jobs, "cores", lambda: 2)
    assert _jobs.threads_for(None, 12) == 2 and _jobs.threads_for(None, 1) == 1
    assert _jobs.threads_for(5, 3) == 3 and _jobs.threads_for(1, 12) == 1
    assert _jobs.groups(list(range(7)), 3) == [[0, 1, 2], [3, 4], [5, 6]]


def test_a_reader_parsing_takes_a_core_from_the_runs(monkeypatch):
    monkeypatch.setattr(_jobs, "cores", lambda: 2)
    with _jobs.reading():
        assert _jobs.threads_for(None, 12) == 1 and _jobs.threads_for(2, 12) == 2
        with _jobs.reading():
            assert _jobs.threads_for(None, 12) == 1
    assert _jobs.threads_for(None, 12) == 2
    monkeypatch.setattr(_jobs, "cores", lambda: 8)
    with _jobs.reading():
        assert _jobs.threads_for(None, 12) == 7


def test_read_ahead_holds_a_core_only_while_it_parses(monkeypatch):
    """The reader counts as parsing while it makes a chunk, not while it waits for room
    in its queue, nor once it has ended."""
    from onlinepgs.streaming import read_ahead
    seen = []

    class Reader:
        n_lines = 0

        def __iter__(self):
            for i in range(3):
                seen.append(_jobs._parsing)  # inside the parse of chunk i
                self.n_lines += 1
                yield sp.csr_matrix(np.ones((1, 2))), np.ones(1)
    chunks = read_ahead(Reader(), depth=1)
    next(chunks)
    list(chunks)
    assert seen == [1, 1, 1] and _jobs._parsing == 0


def test_an_error_in_one_thread_is_raised_after_every_thread_ended():
    ended = []

    def work(i, part):
        if i == 1:
            raise ValueError(f"group {i}")
        ended.append(i)
    with pytest.raises(ValueError, match="group 1"):
        _jobs.run_groups(work, [[0], [1], [2]])
    assert sorted(ended) == [0, 2]
