"""Interactions crossed in the PGS pass (onlinepgs.features.CrossedRows, the compiled
`Crossing`): the rows the pass makes one at a time are the rows of `to_matrix` and of
the per-event API, bit for bit (one row builder makes all three), and so is everything
trained on them: the core's state, the sigma race's runs (crossed once for them all),
the learners through partial_fit and the streaming engine, the command on real VW
files, and a model file that the materialized path trained
(tests/model_files/pgs_interactions_q.pgs)."""
import gzip
import csv
import itertools
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import onlinepgs._columns_seen as columns_seen
from onlinepgs._core._event import EventRow
from onlinepgs._core._features import Crossing, _rank_sort_version
from onlinepgs._core._hashing import records_to_rows
from onlinepgs._core._pgs import PGSState, run_crossed
from onlinepgs.features import (RAW_COLUMN, CrossedRows, FeatureSpec, NamespacedRows,
                                _letters, expanded_input, parse_interactions, to_matrix)
from onlinepgs.formats import open_reader
from onlinepgs.model_io import load_learner
from onlinepgs.pgs import PGSClassifierLearner, PGSRegressorLearner
from onlinepgs.sdca import SDCAClassifierLearner
from onlinepgs.streaming import train_stream
from onlinepgs.streaming.sources import FileSource
from shared_data import shared

MODEL_FILES = Path(__file__).parent / "model_files"
STATES = Path(__file__).parent / "states"


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def same_state(a, b):
    """Whether two PGS states are equal bit for bit, field by field."""
    da, db = a.to_dict(), b.to_dict()
    assert da.keys() == db.keys()
    for key in da:
        if isinstance(da[key], np.ndarray):
            assert same_bits(da[key], db[key]), key
        else:
            assert repr(da[key]) == repr(db[key]), key
    return True


def click_lines(n, seed):
    """VW lines of a small click log: namespaces site, device, app, user (hashed
    categories), a numeric user feature, a default-namespace feature, a feature given
    twice in a row (a duplicate to sum), labels -1/+1 by a crossed effect."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        site, model, app = rng.randrange(30), rng.randrange(12), rng.randrange(8)
        click = (site * 7 + model * 3 + app) % 5 == 0 or rng.random() < 0.1
        extra = f" dom_{site % 4}" if rng.random() < 0.5 else f" id_{site}"
        lines.append(
            f"{'1' if click else '-1'} |site id_{site}{extra} cat_{site % 3} "
            f"|device model_{model} type_{model % 2} conn_{rng.randrange(3)} "
            f"|app id_{app} cat_{app % 2} |user age:{rng.random():.3f} "
            f"h{rng.randrange(24)} | bias\n")
    return "".join(lines)


def chunks(path, spec, crossed, chunk_rows=50):
    return list(open_reader(str(path), "vw", chunk_rows=chunk_rows, spec=spec,
                            crossed=crossed))


# ---- the rows ------------------------------------------------------------------------
def random_rows(rng, n_rows, widest):
    ns, hashes, values, indptr = [], [], [], [0]
    letters = [97, 98, 99, RAW_COLUMN]
    for _ in range(n_rows):
        width = rng.randrange(widest + 1)
        for _ in range(width):
            ns.append(rng.choice(letters))
            # few distinct hashes: duplicates and collisions in most rows
            hashes.append(rng.choice([rng.randrange(2**32), rng.randrange(6),
                                      2**31 + rng.randrange(4)]))
            values.append(rng.choice([1.0, -0.5, 2.0, rng.uniform(-3, 3)]))
        indptr.append(len(ns))
    return NamespacedRows(np.array(ns, np.uint8), np.array(hashes, np.uint32),
                          np.array(values), np.array(indptr, np.int64))


@pytest.mark.parametrize("n_bits", [3, 12, 18, 30, 31])
@pytest.mark.parametrize("interactions", [("ab",), ("aa",), ("a:", "bc"), ("::",),
                                          ("abc",), ("aab", ":::"), ("ab", "abc", "ca")])
def test_each_crossed_row_is_the_matrix_row_bit_for_bit(n_bits, interactions):
    rng = random.Random(n_bits * 31 + len(interactions))
    rows = random_rows(rng, 40, 14)
    spec = FeatureSpec(n_bits, 0, parse_interactions(interactions))
    X = to_matrix(rows, spec)
    letters, orders = _letters(spec.interactions)
    crossing = Crossing(rows.ns, rows.hashes, rows.values, rows.indptr, n_bits, letters,
                        orders)
    for r in range(rows.n_rows):
        indices, data = crossing.row(r)
        a, b = X.indptr[r], X.indptr[r + 1]
        assert same_bits(indices, X.indices[a:b].astype(np.int32))
        assert same_bits(data, X.data[a:b])


def test_long_rows_sort_as_short_ones():
    # a row of more than 128 entries (std::sort, not ranks) and rows of one entry
    rng = random.Random(5)
    rows = random_rows(rng, 6, 60)
    spec = FeatureSpec(18, 0, ("abc", "::"))
    letters, orders = _letters(spec.interactions)
    crossing = Crossing(rows.ns, rows.hashes, rows.values, rows.indptr, 18, letters, orders)
    assert crossing.widest_row > 128
    X = to_matrix(rows, spec)
    for r in range(rows.n_rows):
        indices, data = crossing.row(r)
        a, b = X.indptr[r], X.indptr[r + 1]
        assert same_bits(indices, X.indices[a:b].astype(np.int32))
        assert same_bits(data, X.data[a:b])


def namespaced_records(rng, n):
    """n records of namespaces s(ite), s2 (a second namespace of letter s), d(evice) and
    a(pp), categories and numbers, default-namespace features and raw columns: duplicate
    letters, wildcards' every letter, and collisions at few bits."""
    records = []
    for _ in range(n):
        x = {"site": {"id": f"s{rng.randrange(40)}", "w": rng.uniform(-2, 2)},
             "device": {"m": f"m{rng.randrange(9)}", "t": rng.choice([None, "p", "q"]),
                        "c": rng.choice([None, 2.0])},
             "bias": 1.0, rng.randrange(50): rng.choice([1.0, -2.5])}
        if rng.random() < 0.6:
            x["s2"] = {f"k{rng.randrange(5)}": rng.choice([1.0, 0.5, -3.0])
                       for _ in range(rng.randrange(1, 4))}
        if rng.random() < 0.8:
            x["app"] = {"id": f"a{rng.randrange(7)}", "c": "x" if rng.random() < 0.5 else "y"}
        records.append(x)
    return records


RANK_SORTS = {"plain C": 0, "AVX2": 1, "AVX-512": 2}


@pytest.fixture(params=list(RANK_SORTS))
def rank_sort(request):
    """Each version of the rank sort (rank_sort.h) the CPU runs, in turn."""
    if _rank_sort_version(RANK_SORTS[request.param]) != request.param:
        _rank_sort_version(-1)
        pytest.skip(f"this CPU does not run the {request.param} rank sort")
    yield request.param
    _rank_sort_version(-1)


@pytest.mark.parametrize("n_bits", [4, 18])
@pytest.mark.parametrize("interactions", [("sd",), ("sda",), ("ss", "sda"), ("::",),
                                          ("s:", "sad", ":::")])
def test_the_matrix_the_pass_and_an_event_build_each_row_alike(rank_sort, n_bits,
                                                                interactions):
    # one builder makes the rows of to_matrix (partial_fit, predict), those the pass
    # crosses (Crossing) and an event's (EventRow, learn_one): bit for bit, in every
    # version of the sort; the yardstick is the transcription of the rules in Python
    # (tests/test_features.py), n_bits 4 summing many collisions
    from test_features import reference_row

    rng = random.Random(n_bits * 7 + len(interactions))
    records = namespaced_records(rng, 60)
    ns, hashes, values, indptr, _ = records_to_rows(records, 5)
    rows = NamespacedRows(ns, hashes, values, indptr)
    spec = FeatureSpec(n_bits, 5, parse_interactions(interactions))
    X = to_matrix(rows, spec)
    letters, orders = _letters(spec.interactions)
    crossing = Crossing(ns, hashes, values, indptr, n_bits, letters, orders)
    event = EventRow(n_bits, 5, letters, orders)
    for r, record in enumerate(records):
        a, b = X.indptr[r], X.indptr[r + 1]
        matrix = (X.indices[a:b].astype(np.int32), X.data[a:b])
        crossed = crossing.row(r)
        event.read(record)
        assert same_bits(crossed[0], matrix[0]) and same_bits(crossed[1], matrix[1])
        assert same_bits(event.indices, matrix[0]) and same_bits(event.data, matrix[1])
        want = reference_row(ns[indptr[r]:indptr[r + 1]], hashes[indptr[r]:indptr[r + 1]],
                             values[indptr[r]:indptr[r + 1]], spec.interactions, n_bits)
        assert matrix[0].tolist() == sorted(want)
        np.testing.assert_allclose(matrix[1], [want[c] for c in sorted(want)], rtol=1e-13)
    assert crossing.widest_row > 16  # rows of several sixteens of entries to rank


def test_the_rank_sorts_order_rows_alike(rank_sort):
    # rows of 0 to 128 entries and more (the rank sort's whole range, then std::sort's):
    # each version's rows are those of plain C, whose are the transcription's
    from test_features import reference_row

    rng = random.Random(9)
    rows = NamespacedRows.stack([random_rows(rng, 150, 10), random_rows(rng, 12, 40)])
    spec = FeatureSpec(18, 0, ("abc", "ab"))
    mine = to_matrix(rows, spec)
    _rank_sort_version(0)
    plain = to_matrix(rows, spec)
    _rank_sort_version(RANK_SORTS[rank_sort])
    assert same_bits(mine.indices, plain.indices) and same_bits(mine.data, plain.data)
    sizes = np.diff(plain.indptr)
    assert sizes.min() <= 1 and sizes.max() > 128
    assert len({n for n in sizes.tolist() if 16 < n <= 128}) >= 10  # groups of 16 and tails
    for r in range(rows.n_rows):
        a, b = rows.indptr[r], rows.indptr[r + 1]
        want = reference_row(rows.ns[a:b], rows.hashes[a:b], rows.values[a:b],
                             spec.interactions, 18)
        got = slice(plain.indptr[r], plain.indptr[r + 1])
        assert plain.indices[got].tolist() == sorted(want)
        np.testing.assert_allclose(plain.data[got], [want[c] for c in sorted(want)],
                                   rtol=1e-13)


def test_crossed_rows_take_and_stack_rows_as_the_matrix_does():
    rows = random_rows(random.Random(2), 30, 8)
    spec = FeatureSpec(10, 0, ("ab", "c:"))
    X, lazy = to_matrix(rows, spec), CrossedRows(rows, spec)
    assert lazy.shape == X.shape and lazy.nnz == X.nnz
    for take in (slice(3, 17), slice(None, None, 4), [5, 0, 29, 5], np.array([7]), 11):
        got, want = lazy[take].to_csr(), X[[take] if isinstance(take, int) else take]
        for field in ("data", "indices", "indptr"):
            assert same_bits(getattr(got, field), getattr(want, field).astype(
                getattr(got, field).dtype))
    both = lazy[:10].stacked(lazy[10:])
    assert same_bits(both.to_csr().data, X.data)


# ---- the pass ------------------------------------------------------------------------
@pytest.mark.parametrize("params", [
    {}, {"p": 1.5}, {"l1": 1e-3}, {"iterate": "last", "radius": None},
    {"forget": 0.99}, {"n_problems": 3}, {"geometry": "adaptive", "iterate": "last"}])
def test_the_pass_over_crossed_rows_is_the_pass_over_the_matrix(tmp_path, params):
    path = tmp_path / "clicks.vw"
    path.write_text(click_lines(400, 1))
    spec = FeatureSpec(12, 0, parse_interactions(["sd", "sda", "a:"]))
    states = []
    for crossed in (False, True):
        state = PGSState(loss="logistic", sigma=1e-2, n_features=2**12, seed=3,
                         **{"p": 2.0, **params})
        for X, y, _ in chunks(path, spec, crossed):
            assert isinstance(X, CrossedRows) == crossed
            labels = (y > 0).astype(float) if params.get("n_problems") else y
            order = np.arange(len(y), dtype=np.int64)[::-1].copy()  # not in file order
            if crossed:
                state.run(None, None, None, X.shape[1], labels, np.ones(len(y)), order, True,
                          crossing=X.crossing())
            else:
                state.run(X.data, X.indices, X.indptr, X.shape[1], labels, np.ones(len(y)),
                          order, True)
        states.append(state)
    assert same_state(*states)


def test_states_in_lockstep_end_as_each_alone(tmp_path):
    # run_crossed: each row made once for every state, each state's steps its own; a
    # state that diverges (sigma 1e-9 on R^n: its steps overflow) stops at its row,
    # the others go on, as each would alone
    path = tmp_path / "clicks.vw"
    path.write_text(click_lines(300, 4))
    spec = FeatureSpec(12, 0, parse_interactions(["sd", "sda"]))
    (X, y, _), = chunks(path, spec, True, chunk_rows=300)
    y = y * 1e6  # targets that make the small sigma's steps overflow
    order = np.arange(len(y), dtype=np.int64)[::-1].copy()

    def states():
        return [PGSState(loss="squared", sigma=sigma, n_features=2**12, seed=3, radius=None,
                         **extra)
                for sigma, extra in [(1e-1, {}), (1e-9, {}), (1e-2, {"p": 1.5}),
                                     (1e-2, {"l1": 1e-3})]]
    together, alone = states(), states()
    run_crossed(together, X.shape[1], y, np.ones(len(y)), order, False, X.crossing())
    for state in alone:
        state.run(None, None, None, X.shape[1], y, np.ones(len(y)), order, False,
                  crossing=X.crossing())
    assert [s.diverged for s in together] == [False, True, False, False]
    assert together[1].diverged_row == alone[1].diverged_row and together[1].t < len(y)
    for a, b in zip(together, alone):
        assert same_state(a, b)


def diverging_crossed_rows():
    """1,200 namespaced rows (`namespaced_records`), targets so large that the small
    sigmas of a race on R^n (squared loss) diverge on them, and the spec that crosses
    them (-q sd, sda at 12 bits)."""
    records = namespaced_records(random.Random(3), 1200)
    ns, hashes, values, indptr, _ = records_to_rows(records, 0)
    rows = NamespacedRows(ns, hashes, values, indptr)
    y = np.array([10.0 * (hash(str(sorted(r["site"].items()))) % 7) + 30 * r["site"]["w"]
                  for r in records]) * 100.0
    return rows, y, FeatureSpec(12, 0, parse_interactions(["sd", "sda"]))


def test_a_race_on_crossed_chunks_drops_diverging_runs_as_on_matrices():
    # squared loss on R^n with large targets: the race's small sigmas diverge and leave
    # it; the runs learn each chunk together (rows crossed once for all), and the race
    # ends as the one over the chunks' matrices, its path and its drops alike
    rows, y, spec = diverging_crossed_rows()
    learners = []
    for crossed in (False, True):
        est = PGSRegressorLearner(n_bits=12, interactions=["sd", "sda"], radius=None,
                                  random_state=0)
        for start in range(0, rows.n_rows, 200):
            part = CrossedRows(rows, spec)[start:start + 200]
            with expanded_input():
                est.partial_fit(part if crossed else part.to_csr(), y[start:start + 200])
        learners.append(est)
    a, b = learners
    drops = [r for r in a.sigma_path_ if r["event"] == "drop"]
    assert drops and all(r["reason"] == "diverged" for r in drops)
    assert a.sigma_path_ == b.sigma_path_
    assert same_state(a._state, b._state)


def test_a_state_of_mini_batches_refuses_crossed_rows(tmp_path):
    path = tmp_path / "clicks.vw"
    path.write_text(click_lines(20, 1))
    (X, y, _), = chunks(path, FeatureSpec(12, 0, ("sd",)), True)
    state = PGSState(loss="logistic", sigma=1e-2, n_features=2**12, batch_size=4)
    with pytest.raises(ValueError, match="batch_size must be 1"):
        state.run(None, None, None, X.shape[1], y, np.ones(len(y)),
                  np.arange(len(y), dtype=np.int64), True, crossing=X.crossing())


# ---- the learners and the engine ---------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda: PGSClassifierLearner(n_bits=12, interactions=["sd", "sda"], random_state=0),
    lambda: PGSClassifierLearner(n_bits=12, interactions=["sd", "sda"], sigma=1e-3,
                                 l1=1e-4, random_state=0),
    lambda: PGSRegressorLearner(n_bits=12, interactions=["sd", "sda"], random_state=0),
    # these take the matrix: a mini-batch, sums of |x|^q before the pass, SDCA
    lambda: PGSClassifierLearner(n_bits=12, interactions=["sd", "sda"], batch_size=3,
                                 random_state=0),
    lambda: PGSClassifierLearner(n_bits=12, interactions=["sd", "sda"], p=1.7,
                                 random_state=0),
    lambda: SDCAClassifierLearner(n_bits=12, interactions=["sd", "sda"], random_state=0)])
def test_partial_fit_on_crossed_chunks_is_partial_fit_on_matrices(tmp_path, make):
    path = tmp_path / "clicks.vw"
    path.write_text(click_lines(600, 2))
    spec = FeatureSpec(12, 0, parse_interactions(["sd", "sda"]))
    learners = []
    for crossed in (False, True):
        est = make()
        with expanded_input():
            for X, y, w in chunks(path, spec, crossed, chunk_rows=97):
                if isinstance(est, SDCAClassifierLearner):
                    est.fit(X, y)
                else:
                    est.partial_fit(X, y, **({"classes": [-1.0, 1.0]}
                                             if est._classifier else {}))
        learners.append(est)
    a, b = learners
    assert same_bits(a.coef_, b.coef_) and same_bits(a.intercept_, b.intercept_)
    if isinstance(a, PGSClassifierLearner):
        assert same_state(a._state, b._state)


@pytest.mark.parametrize("n_bits", [10, 22])
def test_the_finiteness_guard_looks_where_crossed_rows_reach(tmp_path, n_bits, monkeypatch):
    # after a call, a state that is not finite where the rows reach is refused; at 2**22
    # columns and 30 rows the guard looks at those columns only (O(nnz), not O(width),
    # as it does for a chunk's matrix), at 2**10 at the whole state (a state over the
    # width: a learner over the columns seen gives the pass their slots)
    from onlinepgs.pgs import _finite_after

    monkeypatch.setattr(columns_seen, "MIN_WIDTH", 2**62)

    path = tmp_path / "clicks.vw"
    path.write_text(click_lines(30, 6))
    spec = FeatureSpec(n_bits, 0, parse_interactions(["sda"]))
    (X, y, _), = chunks(path, spec, True)
    est = PGSClassifierLearner(n_bits=n_bits, interactions=["sda"], sigma=1e-2,
                               radius=None, random_state=0)  # p = 2 on R^n: no norm kept
    with expanded_input():
        est.partial_fit(X, y, classes=[-1.0, 1.0])
    state, matrix = est._state, X.to_csr()
    assert not state.need_norm
    assert _finite_after(state, X)
    reached = set(matrix.indices.tolist())
    crossed_column = int(matrix.indices[matrix.indptr[1] - 1])  # a triple's, row 0
    elsewhere = next(c for c in range(2**n_bits) if c not in reached)
    state.block_a[elsewhere + 1] = np.inf
    assert _finite_after(state, X) == (n_bits == 22)  # unseen where no row reaches
    state.block_a[elsewhere + 1] = 0.0
    state.block_a[crossed_column + 1] = np.nan
    assert not _finite_after(state, X) and not _finite_after(state, matrix)
    assert sorted(set(X.crossing().columns().tolist())) == sorted(reached)


def test_which_pgs_learners_cross_in_their_pass():
    assert PGSClassifierLearner().crosses_rows() and PGSRegressorLearner().crosses_rows()
    assert PGSClassifierLearner(p=1.5).crosses_rows()  # q - 1 = 2: powers in the loop
    assert not PGSClassifierLearner(p=1.7).crosses_rows()  # sums of |x|^q before it
    assert not PGSClassifierLearner(batch_size=3).crosses_rows()


def test_crossed_rows_of_another_hashing_are_refused(tmp_path):
    path = tmp_path / "clicks.vw"
    path.write_text(click_lines(30, 2))
    (X, y, _), = chunks(path, FeatureSpec(12, 0, ("sd",)), True)
    est = PGSClassifierLearner(n_bits=12, interactions=["sa"], sigma=1e-2)
    with expanded_input(), pytest.raises(ValueError, match="read them with the model"):
        est.partial_fit(X, y, classes=[-1.0, 1.0])


@pytest.mark.parametrize("batch_size", [1, 3])  # 3: whole batches joined across chunks
def test_the_engine_holds_out_and_passes_over_crossed_chunks_as_over_matrices(tmp_path,
                                                                               batch_size):
    path = tmp_path / "clicks.vw"
    path.write_text(click_lines(500, 3))
    spec = FeatureSpec(12, 0, parse_interactions(["sd", "sda"]))
    runs = []
    for crossed in (False, True):
        est = PGSClassifierLearner(n_bits=12, interactions=["sd", "sda"], random_state=0,
                                   batch_size=batch_size)
        with expanded_input():
            runs.append(train_stream(est, [FileSource(path, "vw", spec=spec,
                                                      crossed=crossed)],
                                     passes=2, holdout_every=4, chunk_rows=64))
    a, b = (run.learner for run in runs)
    assert runs[0].holdout_loss == runs[1].holdout_loss
    assert same_state(a._state, b._state)


# ---- the command -------------------------------------------------------------------------
def command(*argv):
    done = subprocess.run([sys.executable, "-m", "onlinepgs.cli", *map(str, argv)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def talkingdata_vw(path, n_rows):
    """TalkingData's first n_rows clicks as VW text, a namespace a column (the first
    letters a, d, o, c, h differ), as bench/bench_command.py converts them."""
    with gzip.open(shared("talkingdata_100k.csv.gz"), "rt", newline="") as f:
        rows = list(itertools.islice(csv.DictReader(f), n_rows))
    with open(path, "w") as out:
        for r in rows:
            hour = r["click_time"].split(" ")[1].split(":")[0]
            out.write(f"{'1' if r['is_attributed'] == '1' else '-1'} |ip {r['ip']} "
                      f"|app {r['app']} |device {r['device']} |os {r['os']} "
                      f"|channel {r['channel']} |hour {hour}\n")


@pytest.mark.slow
def test_the_command_trains_a_real_vw_file_as_the_matrix_path_does(tmp_path):
    data = tmp_path / "td.vw"
    talkingdata_vw(data, 6000)
    options = ["-b", "16", "-q", "ao", "-q", "dc", "--interactions", "aoc"]
    command("train", data, *options, "-o", tmp_path / "m.pgs", "--quiet")
    trained = load_learner(tmp_path / "m.pgs")
    spec = FeatureSpec(16, 0, parse_interactions(["ao", "dc", "aoc"]))
    est = PGSClassifierLearner(n_bits=16, interactions=["ao", "dc", "aoc"])
    est.set_params(**{k: v for k, v in trained.get_params().items()
                      if k not in ("max_model_bytes",)})
    with expanded_input():
        for X, y, w in open_reader(str(data), "vw", spec=spec):  # CSR: the matrix path
            est.partial_fit(X, y, classes=[-1.0, 1.0], sample_weight=w)
    assert same_state(est._state, trained._state)


def test_a_model_the_matrix_path_trained_is_trained_and_predicted_bit_for_bit(tmp_path):
    # tests/model_files/pgs_interactions_q.pgs: `onlinepgs train clicks.vw -b 10 -q sd
    # --interactions sda -o pgs_interactions_q.pgs --quiet` by the code before the pass
    # crossed rows (every chunk a matrix of `to_matrix`), on click_lines(300, 7); its
    # scores of click_lines(100, 8) in tests/states/pgs_interactions_q_scores.npy
    data, test = tmp_path / "clicks.vw", tmp_path / "test.vw"
    data.write_text(click_lines(300, 7))
    test.write_text(click_lines(100, 8))
    command("train", data, "-b", "10", "-q", "sd", "--interactions", "sda", "-o",
            tmp_path / "m.pgs", "--quiet")
    before = load_learner(MODEL_FILES / "pgs_interactions_q.pgs")
    now = load_learner(tmp_path / "m.pgs")
    assert same_state(before._state, now._state)
    spec = FeatureSpec(10, 0, parse_interactions(["sd", "sda"]))
    with expanded_input():
        scores = np.concatenate([before.decision_function(X)
                                 for X, _, _ in open_reader(str(test), "vw", spec=spec)])
    assert same_bits(scores, np.load(STATES / "pgs_interactions_q_scores.npy"))


def test_rows_crossed_in_the_pass_map_a_wide_block_in_small_pages(tmp_path, monkeypatch):
    """Rows crossed in the pass decide the block's pages as a matrix's do (their columns
    made once more for the rule: a first call over 2^25 columns that reaches a few
    thousand maps small pages), and over such a block each row, as it is made, writes
    each new page of its before its step reads it (_written.pxd): about one fault a page
    the block maps, where a read of the kernel's page of zeros and the write after it
    took two. The same state as in huge pages. (States over the width: over the columns
    seen, onlinepgs._columns_seen, the rows are a matrix of slots.)"""
    import resource

    monkeypatch.setattr(columns_seen, "MIN_WIDTH", 2**62)

    from onlinepgs import pgs as pgs_module
    from onlinepgs._core._pages import mapped_pages, nonzero_rows

    if mapped_pages(np.zeros(1)) is None:
        pytest.skip("no /proc/self/pagemap here")
    path = tmp_path / "clicks.vw"
    path.write_text(click_lines(400, 8))
    spec = FeatureSpec(25, 0, parse_interactions(["sda"]))
    (X, y, _), = chunks(path, spec, True, chunk_rows=400)

    def learner():
        return PGSClassifierLearner(n_bits=25, interactions=["sda"], geometry="adaptive",
                                    radius=None, sigma=1e-2, eta=0.5, random_state=0,
                                    max_model_bytes=None)  # one run: its faults alone

    small = learner()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    small.partial_fit(X, y, classes=[-1.0, 1.0])
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    pages = int(mapped_pages(small._state.block_a).sum())
    assert small._state.small_pages and pages > 1_000
    assert faults < 1.5 * pages, (faults, pages)  # about 2 a page without
    monkeypatch.setattr(pgs_module, "small_pages_pay", lambda *args, **kwargs: False)
    huge = learner()
    huge.partial_fit(X, y, classes=[-1.0, 1.0])
    assert not huge._state.small_pages
    a, b = small._state, huge._state
    rows = nonzero_rows([a.block_a], a.dim)  # (the blocks whole: 1 GB of bytes each)
    assert np.array_equal(rows, nonzero_rows([b.block_a], b.dim))
    assert same_bits(a.block_a[rows], b.block_a[rows])
