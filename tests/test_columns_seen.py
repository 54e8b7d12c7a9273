"""A learner's states over the columns its rows reach (onlinepgs._columns_seen): the map
against a dict, and every learner path against the same learner over the width (the
map switched off by raising `MIN_WIDTH`), bit for bit where no sum over the coordinates
is taken (p = 2 on R^n, the adaptive geometry), to 1e-12 where one is (the l_p norm)."""
import pickle

import numpy as np
import pytest
import scipy.sparse as sp

import onlinepgs._columns_seen as columns_seen
from onlinepgs import PGSClassifier, PGSRegressor, load_model, save_model
from onlinepgs._core._columns import ColumnMap
from onlinepgs.pgs import ModelTooLargeError

WIDTH = 2**22


# ---- the map ------------------------------------------------------------------------------
def _first_sight(columns):
    slots = {}
    return np.array([slots.setdefault(int(c), len(slots)) for c in columns]), slots


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_slots_are_numbered_in_the_order_columns_first_come(dtype):
    rng = np.random.default_rng(0)
    pool = rng.choice(2**30, 5000, replace=False)
    calls = [pool[rng.integers(0, 5000, n)].astype(dtype) for n in (1, 700, 20_000, 3)]
    m = ColumnMap()
    want, slots = _first_sight(np.concatenate(calls))
    got = np.concatenate([m.slots(c) for c in calls])  # the table grows between calls
    assert got.dtype == np.int32 and got.tolist() == want.tolist()
    assert m.n_slots == len(slots) and m.columns().tolist() == list(slots)
    probe = np.concatenate([pool[:10], [2**30 + 1, 0]]).astype(dtype)
    assert m.find(probe).tolist() == [slots.get(int(c), -1) for c in probe]
    again = pickle.loads(pickle.dumps(m))
    assert again.find(probe).tolist() == m.find(probe).tolist()
    assert again.slots(np.array([7], dtype=dtype)).tolist() == [m.n_slots]  # the next one


def test_a_map_is_rebuilt_from_distinct_non_negative_columns_only():
    assert ColumnMap([5, 9, 2]).slots(np.array([2, 5], dtype=np.int64)).tolist() == [2, 0]
    for bad in ([1, 1], [-3]):
        with pytest.raises(ValueError, match="column map's columns"):
            ColumnMap(bad)


# ---- the learner ------------------------------------------------------------------------------
def _hashed(n_rows=3000, seed=0, pool=2500, width=WIDTH):
    """Rows of ~8 entries over `pool` columns spread over `width`, labels of a linear
    model (and targets for regression)."""
    rng = np.random.default_rng(seed)
    cols = np.sort(rng.choice(width, pool, replace=False))
    truth = rng.normal(size=pool)
    per_row = rng.integers(3, 12, n_rows)
    indptr = np.concatenate([[0], np.cumsum(per_row)])
    picks = np.concatenate([np.sort(rng.choice(pool, k, replace=False)) for k in per_row])
    values = rng.exponential(1.0, picks.size)
    X = sp.csr_matrix((values, cols[picks], indptr), shape=(n_rows, width))
    score = np.add.reduceat(values * truth[picks], indptr[:-1])
    return X, np.where(score + 0.3 * rng.normal(size=n_rows) > 0, 1.0, -1.0), score


@pytest.fixture
def over_the_width(monkeypatch):
    """A context in which new learners do not map their columns."""
    def off():
        monkeypatch.setattr(columns_seen, "MIN_WIDTH", 2**62)

    def on():
        monkeypatch.setattr(columns_seen, "MIN_WIDTH", 2**21)
    return off, on


def _trained(make, chunks, off, on, mapped, **fit):
    (off if not mapped else on)()
    est = make()
    for i, (X, y) in enumerate(chunks):
        est.partial_fit(X, y, **(fit if i == 0 else {}))
    on()
    return est


def _coef(est):
    coef = est.model_.coef
    return coef.toarray() if hasattr(coef, "toarray") else np.asarray(coef)


CONFIGS = {
    "adaptive, its race": (dict(geometry="adaptive"), 0.0),
    "global, its race (a ball: its norm)": ({}, 1e-12),
    "adaptive, eta 0.5, sigma 1e-4": (dict(geometry="adaptive", eta=0.5, sigma=1e-4), 0.0),
    "global, p 1.5 on a ball": (dict(p=1.5, sigma=1e-3, radius=1.0), 1e-12),
    "global, l1 on a ball": (dict(sigma=1e-3, l1=1e-3), 1e-12),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_a_wide_learner_is_the_learner_over_the_width(name, over_the_width, tmp_path):
    params, rtol = CONFIGS[name]
    off, on = over_the_width
    X, y, _ = _hashed()
    chunks = [(X[a:a + 600], y[a:a + 600]) for a in range(0, 3000, 600)]

    def make():
        return PGSClassifier(random_state=0, max_model_bytes=None, **params)
    got = _trained(make, chunks, off, on, True, classes=[-1.0, 1.0])
    want = _trained(make, chunks, off, on, False, classes=[-1.0, 1.0])
    # the states are as wide as the columns reached (2,500 of 2^22), grown by doubling
    reached = np.unique(X.indices).size
    assert got._columns.n_slots == reached and got._state.dim - 1 == 4096
    assert want.__dict__.get("_columns") is None and want._state.dim == WIDTH + 1
    assert got.n_features_in_ == want.n_features_in_ == WIDTH
    assert got.sigma_ == want.sigma_ and got.t_ == want.t_
    np.testing.assert_allclose(_coef(got), _coef(want), rtol=rtol, atol=0)
    np.testing.assert_allclose(got.intercept_, want.intercept_, rtol=rtol, atol=0)
    got_scales, want_scales = got.model_.scale_pairs, want.model_.scale_pairs
    if want_scales is not None:
        assert np.array_equal(got_scales[0], want_scales[0])
        assert np.array_equal(got_scales[1], want_scales[1])
    # a few rows scored from the state (unseen columns in them) and by the model
    rows = sp.vstack([X[:2], sp.csr_matrix(([1.0], [7], [0, 1]), shape=(1, WIDTH))]).tocsr()
    for est in (got, want):
        est.partial_fit(X[:5], y[:5])
    np.testing.assert_allclose(got.decision_function(rows), want.decision_function(rows),
                               rtol=rtol, atol=1e-300)
    # the model file is the one the learner over the width writes: the same bytes
    # where no sum over the coordinates is taken
    save_model(got, tmp_path / "got.pgs")
    save_model(want, tmp_path / "want.pgs")
    if rtol == 0.0:
        assert (tmp_path / "got.pgs").read_bytes() == (tmp_path / "want.pgs").read_bytes()
    # loaded over the columns its states' rows reach (every run's), not over the width,
    # and resumed as the learner over the width goes on
    loaded = load_model(tmp_path / "got.pgs")
    assert loaded._columns.n_slots == reached and loaded._state.dim - 1 == 4096
    race = getattr(loaded, "_race", None)
    assert all(st.dim == 4097 for st in (race.states.values() if race else []))
    save_model(loaded, tmp_path / "again.pgs")
    if rtol == 0.0:
        assert (tmp_path / "again.pgs").read_bytes() == (tmp_path / "want.pgs").read_bytes()
    for est in (loaded, got, want):
        est.partial_fit(X[2000:2600], y[2000:2600])
    np.testing.assert_allclose(_coef(loaded), _coef(want), rtol=rtol, atol=1e-300)
    np.testing.assert_allclose(_coef(got), _coef(want), rtol=rtol, atol=1e-300)


def test_multiclass_regression_and_fit_over_the_columns_seen(over_the_width):
    off, on = over_the_width
    X, _, score = _hashed(n_rows=1500, seed=1)
    classes = np.digitize(score, np.quantile(score, [1 / 3, 2 / 3])).astype(float)
    common = dict(random_state=0, max_model_bytes=None)
    cases = [(lambda: PGSClassifier(**common, multi_class="multinomial"), classes),
             (lambda: PGSClassifier(**common, geometry="adaptive"), classes),
             (lambda: PGSRegressor(**common, geometry="adaptive", loss="squared"), score)]
    for make, target in cases:
        fit = {"classes": [0.0, 1.0, 2.0]} if target is classes else {}
        got, want = (_trained(make, [(X, target)], off, on, mapped, **fit)
                     for mapped in (True, False))
        assert got._state.dim <= 4097 < want._state.dim
        np.testing.assert_array_equal(got.predict(X), want.predict(X))
        np.testing.assert_array_equal(_coef(got), _coef(want))
        # fit's epochs too
        on()
        got = make().set_params(max_epochs=3).fit(X, target)
        off()
        want = make().set_params(max_epochs=3).fit(X, target)
        on()
        assert got._state.dim <= 4097 < want._state.dim
        np.testing.assert_array_equal(_coef(got), _coef(want))


def test_the_per_event_path_steps_a_mapped_learner_over_its_slots(over_the_width):
    """The per-event path (learn_one, predict_one) gives an event's columns as slots of a
    mapped learner's map (new ones where it learns) and goes on as the learner over the
    width does; a pickled learner keeps its map; expanded to the width (as Dask's lanes
    expand it), the learner's next event takes a path over the width."""
    off, on = over_the_width
    X, y, _ = _hashed(n_rows=1200, seed=2, width=2**21)

    def make():
        return PGSClassifier(random_state=0, n_bits=21, geometry="adaptive")
    got = _trained(make, [(X[:1000], y[:1000])], off, on, True, classes=[-1.0, 1.0])
    want = _trained(make, [(X[:1000], y[:1000])], off, on, False, classes=[-1.0, 1.0])
    copy = pickle.loads(pickle.dumps(got))
    assert copy._columns.n_slots == got._columns.n_slots
    copy.partial_fit(X[1000:1100], y[1000:1100])
    got_twin = pickle.loads(pickle.dumps(got))
    got_twin.partial_fit(X[1000:1100], y[1000:1100])
    np.testing.assert_array_equal(_coef(copy), _coef(got_twin))
    slots = got._columns.n_slots

    def events_alike(rows):
        for i in rows:
            row = X[i]
            event = {f"{c}": v for c, v in zip(row.indices, row.data)}
            # n_bits hashes the names: the same dict for both learners
            assert got.predict_proba_one(event) == want.predict_proba_one(event)
            got.learn_one(event, y[i])
            want.learn_one(event, y[i])
    events_alike(range(1000, 1010))
    assert got._events is not None and got._events.row.columns is got._columns
    assert got._columns.n_slots > slots and got._state.dim <= 4097 < want._state.dim
    np.testing.assert_array_equal(_coef(got), _coef(want))
    np.testing.assert_array_equal(got.decision_function(X[:50]), want.decision_function(X[:50]))
    got._unmap()
    events_alike(range(1010, 1020))
    assert got.__dict__.get("_columns") is None and got._events.row.columns is None
    np.testing.assert_array_equal(_coef(got), _coef(want))


def test_a_hashed_width_costs_the_columns_reached_and_a_data_width_its_budget():
    """With n_bits the width is the user's (never held to max_model_bytes): over 2^28
    columns the race's states hold the columns reached, where 2^28 of them would take
    8.6 GB each. A width the data decides is held to the budget as before, mapped or
    not (a model file holds the states over it)."""
    X, y, _ = _hashed(n_rows=400, seed=3, width=2**28)
    est = PGSClassifier(n_bits=28).partial_fit(X, y, classes=[-1.0, 1.0])
    states = list(est._race.states.values())
    assert est._columns.n_slots == np.unique(X.indices).size
    assert sum(st.nbytes for st in states) < 2**22 and est.coef_.shape == (1, 2**28)
    with pytest.raises(ModelTooLargeError, match="has a feature at column .* beyond max_model"):
        PGSClassifier(sigma=1e-3).partial_fit(X, y, classes=[-1.0, 1.0])


def test_a_matrix_below_the_threshold_keeps_the_width_and_records_map_as_matrices():
    X, y, _ = _hashed(n_rows=300, seed=4, width=2**20)
    est = PGSClassifier(sigma=1e-3).partial_fit(X, y, classes=[-1.0, 1.0])
    assert est.__dict__.get("_columns") is None and est._state.dim == 2**20 + 1
    event = PGSClassifier(sigma=1e-3, n_bits=22, classes=[-1.0, 1.0])
    event.learn_one({"a": 1.0}, 1.0)
    assert event._columns.n_slots == 1 and event._state.dim == 1025
    narrow = PGSClassifier(sigma=1e-3, n_bits=20, classes=[-1.0, 1.0])
    narrow.learn_one({"a": 1.0}, 1.0)
    assert narrow.__dict__.get("_columns") is None and narrow._state.dim == 2**20 + 1


@pytest.mark.parametrize("params", [
    dict(), dict(geometry="adaptive"), dict(sigma=1e-3, p=1.5, radius=5.0),
    dict(sigma=1e-3, l1=1e-3), dict(geometry="adaptive", classes=[0, 1, 2])])
def test_learn_one_over_the_slots_is_partial_fit_of_the_records(params):
    """Events at n_bits=22 (the states over the slots of the columns they reach, grown
    as new columns come): a sequence of learn_one, each after predict_proba_one, ends
    with partial_fit's model of the same records, bit for bit, the race included; the
    states hold the columns reached."""
    rng = np.random.RandomState(7)
    classes = params.pop("classes", [0, 1])
    events = [{f"u{rng.randint(3000)}": 1.0, f"a{rng.randint(40)}": 1.0,
               "n": float(rng.rand())} for _ in range(1500)]
    labels = [int(rng.randint(len(classes))) for _ in events]
    got = PGSClassifier(n_bits=22, random_state=0, classes=classes, **params)
    for x, label in zip(events, labels):
        got.predict_proba_one(x)
        got.learn_one(x, label)
    want = PGSClassifier(n_bits=22, random_state=0, classes=classes, **params)
    want.partial_fit(events, labels)
    assert got._columns.columns().tolist() == want._columns.columns().tolist()
    assert got._state.dim <= 4097
    np.testing.assert_array_equal(_coef(got), _coef(want))
    np.testing.assert_array_equal(got.intercept_, want.intercept_)
    assert got.predict_proba_one(events[0]) == want.predict_proba_one(events[0])


def test_dask_lanes_go_on_from_a_learner_over_the_columns_seen(over_the_width):
    """Dask's lanes step states at the columns: a learner that mapped its columns
    continues there as the learner over the width does (its states expanded first, the
    model installed over the width)."""
    pytest.importorskip("dask.array")
    import onlinepgs.dask as opd
    from dask_helpers import dask_rows

    off, on = over_the_width
    X, y, _ = _hashed(n_rows=1600, seed=5, width=2**21)

    def make():
        return PGSClassifier(random_state=0, sigma=1e-3, max_model_bytes=None)
    got = _trained(make, [(X[:1000], y[:1000])], off, on, True, classes=[-1.0, 1.0])
    want = _trained(make, [(X[:1000], y[:1000])], off, on, False, classes=[-1.0, 1.0])
    assert got._columns is not None
    for est in (got, want):
        opd.partial_fit(est, dask_rows(X[1000:], [300, 300]), y[1000:], n_lanes=1,
                        slice_rows=200)
    assert got.__dict__.get("_columns") is None and got._state.dim == want._state.dim
    np.testing.assert_array_equal(_coef(got), _coef(want))


def test_readers_while_a_wide_learner_trains_see_a_whole_model():
    """Rows scored from the state (a map lookup) while partial_fit maps new columns and
    grows the states: every answer is the model before or after some call, and the end
    is the serial run's."""
    import threading

    X, y, _ = _hashed(n_rows=3000, seed=6)
    est = PGSClassifier(random_state=0, sigma=1e-3).partial_fit(X[:100], y[:100],
                                                                 classes=[-1.0, 1.0])
    serial = pickle.loads(pickle.dumps(est))
    rows, errors, done = X[2990:], [], threading.Event()

    def read():
        while not done.is_set():
            try:
                scores = est.decision_function(rows)
                assert np.isfinite(scores).all()
            except Exception as exc:  # noqa: BLE001 - the test reports it
                errors.append(exc)
                return
    reader = threading.Thread(target=read)
    reader.start()
    try:
        for a in range(100, 2900, 100):
            est.partial_fit(X[a:a + 100], y[a:a + 100])
    finally:
        done.set()
        reader.join()
    assert not errors, errors[0]
    for a in range(100, 2900, 100):
        serial.partial_fit(X[a:a + 100], y[a:a + 100])
    np.testing.assert_array_equal(est.decision_function(rows), serial.decision_function(rows))


def test_out_of_memory_counts_the_columns_reached():
    """The command's out-of-memory message with -b counts the state it holds: over the
    columns the rows reach for a learner that maps them, over 2**BITS otherwise."""
    from types import SimpleNamespace

    from onlinepgs.cli.train import _no_memory_for_bits

    X, y, _ = _hashed(n_rows=200, seed=7, width=2**28)
    est = PGSClassifier(n_bits=28, sigma=1e-3).partial_fit(X, y, classes=[-1.0, 1.0])
    trainer = SimpleNamespace(_classes=[-1.0, 1.0])
    said = str(_no_memory_for_bits(est, trainer, None))
    reached = np.unique(X.indices).size
    assert f"the model of the {reached} columns the rows reached of 2**28 (-b 28)" in said
    assert "about 0.0 GiB" in said
    wide = PGSClassifier(n_bits=28, sigma=1e-3)
    assert "the model of 2**28 columns (-b 28): its solver state takes about 4.5 GiB" in str(
        _no_memory_for_bits(wide, trainer, None))


def test_classes_learned_as_labels_arrive_over_the_slots(over_the_width):
    """Without the classes parameter, learn_one of a mapped learner (n_bits=22) adds a
    class as it comes (the states' problems regrouped over the slots) and ends with the
    model of the learner over the width: equal to rounding (the ball's norm sums its
    coordinates in slot order), the same predictions."""
    off, on = over_the_width
    rng = np.random.RandomState(8)
    events = [{f"u{rng.randint(2000)}": 1.0, "n": float(rng.rand())} for _ in range(900)]
    labels = ["a"] * 5 + [["a", "b"][rng.randint(2)] for _ in range(395)] + [
        ["a", "b", "c"][rng.randint(3)] for _ in range(500)]
    learners = {}
    for mapped in (True, False):
        (on if mapped else off)()
        est = PGSClassifier(n_bits=22, random_state=0)
        for x, label in zip(events, labels):
            est.predict_proba_one(x)
            est.learn_one(x, label)
        learners[mapped] = est
    on()
    got, want = learners[True], learners[False]
    assert got._columns is not None and want.__dict__.get("_columns") is None
    assert got.classes_.tolist() == ["a", "b", "c"] and got._state.dim <= 4097
    np.testing.assert_allclose(_coef(got), _coef(want), rtol=1e-12, atol=1e-15)
    assert [got.predict_one(x) for x in events[:100]] == [want.predict_one(x)
                                                          for x in events[:100]]


def test_scores_a_mapped_learner_takes_from_its_model_are_over_the_columns(over_the_width):
    """Rows scored between calls are looked up in the map, and where the state's scores
    are not finite the model scores them: the rows over the columns, not the slots (which
    the model over the width would read as other columns, giving the intercept alone).
    Against the learner over the width: the same inf, the same finite scores."""
    off, on = over_the_width
    X, y, _ = _hashed(n_rows=600, pool=500)
    learners = [_trained(lambda: PGSClassifier(sigma=1e-3, random_state=0), [(X, y)], off,
                         on, mapped, classes=[-1.0, 1.0]) for mapped in (True, False)]
    got, want = learners
    assert got._columns is not None and want.__dict__.get("_columns") is None
    w = _coef(want)[0]
    top = np.sort(np.argsort(-w)[:3])  # three columns of positive weight
    huge = sp.csr_matrix((np.full(3, 1e308), top, [0, 3]), shape=(1, WIDTH))
    with np.errstate(over="ignore", invalid="ignore"):
        assert np.isinf(want.decision_function(huge)).all()
        np.testing.assert_array_equal(got.decision_function(huge),
                                      want.decision_function(huge))
    # (the ball's norm sums its coordinates in slot order: equal to rounding)
    np.testing.assert_allclose(got.decision_function(X[:50]), want.decision_function(X[:50]),
                               rtol=1e-12)


def test_a_dense_chunk_after_a_sparse_first_one(over_the_width):
    """A mapped learner takes a dense chunk of the width (its non-zeros become slots) and
    continues as the learner over the width."""
    off, on = over_the_width
    X, y, _ = _hashed(n_rows=300, seed=4)
    dense = X[:2].toarray()
    learners = [_trained(lambda: PGSClassifier(sigma=1e-3, random_state=0),
                         [(X, y), (dense, y[:2])], off, on, mapped, classes=[-1.0, 1.0])
                for mapped in (True, False)]
    got, want = learners
    assert got._columns is not None and got.t_ == want.t_ == 302
    np.testing.assert_allclose(_coef(got), _coef(want), rtol=1e-12, atol=1e-15)


def test_a_runaway_names_the_users_column_not_its_slot(over_the_width):
    """The message of predictions that ran away names the column of the call's largest
    value as the user gave it, also where the learner trains on slots."""
    off, on = over_the_width
    n, cols = 300, np.array([3_000_001, 3_500_017, 4_000_037])
    X = sp.csr_matrix((np.tile([1.0, 1.0, 1e9], n), (np.repeat(np.arange(n), 3),
                                                       np.tile(cols, n))), shape=(n, WIDTH))
    y = np.random.default_rng(0).normal(size=n)
    for mapped in (True, False):
        (on if mapped else off)()
        with pytest.warns(RuntimeWarning, match="ran away") as caught:
            est = PGSRegressor(loss="squared", sigma=1e-3, random_state=0).partial_fit(X, y)
        assert (est.__dict__.get("_columns") is not None) == mapped
        assert "1e+09 in column 4000037" in str(caught[0].message)
    on()


@pytest.mark.parametrize("column", [-1, -5, WIDTH])
def test_a_column_index_outside_the_matrix_is_refused(column):
    """A CSR matrix whose index is outside [0, n_features) (scipy builds one without a
    word) is refused before any step, with the row and the entry: -1 was the map's empty
    cell (a new slot at every entry) and -5 wrote outside a state over the width."""
    X, y, _ = _hashed(n_rows=50)
    bad = X.copy()
    bad.indices[bad.indptr[7] + 1] = column
    est = PGSClassifier(sigma=1e-3, random_state=0)
    message = rf"column index {column} \(row 7, entry 1 of the row\) is outside"
    with pytest.raises(ValueError, match=message):
        est.partial_fit(bad, y, classes=[-1.0, 1.0])
    assert not hasattr(est, "coef_")
    est.partial_fit(X, y, classes=[-1.0, 1.0])
    before = _coef(est).copy()
    with pytest.raises(ValueError, match=message):
        est.partial_fit(bad, y)
    with pytest.raises(ValueError, match=message):
        est.decision_function(bad)
    np.testing.assert_array_equal(_coef(est), before)
    assert est._columns.n_slots == len(np.unique(X.indices))


@pytest.mark.parametrize("params", [dict(p=1.5, sigma=1e-3, radius=1.0), {}],
                         ids=["p 1.5 on a ball", "global race (a ball)"])
def test_a_loaded_learner_goes_on_as_the_learner_saved_bit_for_bit(params, tmp_path):
    """A file of states that keep the l_p norm holds the map's slots in their order
    (`slots/columns`): loaded over the same slots, the norm's recounts sum the
    coordinates in the same order, and the learner goes on bit for bit (over slots in
    increasing column order it was equal to 1e-15)."""
    X, y, _ = _hashed(n_rows=3000, seed=3)
    est = PGSClassifier(random_state=0, max_model_bytes=None, **params)
    est.partial_fit(X[:1000], y[:1000], classes=[-1.0, 1.0])
    save_model(est, tmp_path / "m.pgs")
    loaded = load_model(tmp_path / "m.pgs")
    assert loaded._columns.columns().tolist() == est._columns.columns().tolist()
    for learner in (est, loaded):
        learner.partial_fit(X[1000:], y[1000:])
    np.testing.assert_array_equal(_coef(loaded), _coef(est))
    np.testing.assert_array_equal(loaded.intercept_, est.intercept_)
