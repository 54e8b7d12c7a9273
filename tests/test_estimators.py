"""Estimator behaviour: determinism, chunking, growth, validation, statistics, extremes."""
import pickle

import numpy as np
import pytest
import scipy.sparse as sp

from onlinepgs import (ModelTooLargeError, PGSClassifier, PGSDivergedError, PGSRegressor,
                       SDCAClassifier, iter_svmlight, load_svmlight)

from onlinepgs.estimators import _finite_weights
from reference import combine, loss_value, reference_pgs
from shared_data import shared


def data(m=120, n=20, seed=0, classes=2):
    rng = np.random.RandomState(seed)
    X = sp.random(m, n, density=0.3, random_state=rng, format="csr")
    W = rng.randn(n, classes)
    labels = np.argmax(X @ W + 0.3 * rng.randn(m, classes), axis=1)
    return X, labels


def snapshot(est):
    """Everything observable about a fitted model (to prove nothing changed)."""
    d = {k: v for k, v in vars(est).items() if k not in ("_state", "_cache")}
    if hasattr(est, "_state"):
        d["state"] = est._state.to_dict()
    return pickle.dumps(d)


@pytest.mark.parametrize("iterate", ["last", "average", "weighted", "weighted2", "random"])
@pytest.mark.parametrize("p", [2.0, 1.6])
def test_chunked_partial_fit_equals_one_call(iterate, p):
    X, y = data(m=120, classes=3)
    one = PGSClassifier(p=p, batch_size=4, iterate=iterate, random_state=3)
    one.partial_fit(X, y, classes=[0, 1, 2])
    chunked = PGSClassifier(p=p, batch_size=4, iterate=iterate, random_state=3)
    for start, stop in [(0, 8), (8, 60), (60, 64), (64, 120)]:
        chunked.partial_fit(X[start:stop], y[start:stop], classes=[0, 1, 2])
    np.testing.assert_array_equal(one.coef_, chunked.coef_)
    np.testing.assert_array_equal(one.intercept_, chunked.intercept_)
    assert one.online_stats_["regret_bound"].tolist() == chunked.online_stats_["regret_bound"].tolist()
    assert one.t_ == chunked.t_ == 30


def test_same_seed_same_model_and_different_seed_differs():
    X, y = data()
    a = PGSClassifier(random_state=1, max_epochs=3).fit(X, y)
    b = PGSClassifier(random_state=1, max_epochs=3).fit(X, y)
    c = PGSClassifier(random_state=2, max_epochs=3).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert not np.array_equal(a.coef_, c.coef_)


def test_fit_restarts_and_partial_fit_continues():
    X, y = data()
    est = PGSClassifier(random_state=0, max_epochs=2).fit(X, y)
    first = est.coef_.copy()
    est.fit(X, y)
    np.testing.assert_array_equal(est.coef_, first)
    assert est.t_ == 240
    est.partial_fit(X, y)
    assert est.t_ == 360 and est.online_stats_["n_examples"] == 360


def test_sparse_chunks_grow_the_model():
    X, y = data(n=30)
    est = PGSClassifier(random_state=0)
    est.partial_fit(X[:60, :10], y[:60], classes=[0, 1])
    assert est.coef_.shape == (1, 10)
    est.partial_fit(X[60:], y[60:])
    assert est.coef_.shape == (1, 30) and est.n_features_in_ == 30
    ref = PGSClassifier(random_state=0)
    ref.partial_fit(sp.hstack([X[:60, :10], sp.csr_matrix((60, 20))]).tocsr(), y[:60], classes=[0, 1])
    ref.partial_fit(X[60:], y[60:])
    # bit for bit: the exact recount of N follows the rows, not when the state grew
    np.testing.assert_array_equal(est.coef_, ref.coef_)
    np.testing.assert_array_equal(est.intercept_, ref.intercept_)
    # fewer columns at predict time: the missing ones are zero
    np.testing.assert_allclose(est.decision_function(X[:, :5]),
                               est.decision_function(sp.hstack([X[:, :5], sp.csr_matrix((120, 25))])))


@pytest.mark.parametrize("p", [2.0, 1.5])
def test_chunks_that_widen_the_model_leave_it_bit_for_bit(p):
    """A file read in chunks of any size (each as wide as its largest index) trains the
    model that one call on the whole matrix trains: at the default sigma a rounding
    difference grew to 0.65 in a9a's weights before N's recount followed the rows."""
    path = shared("a9a.svm.gz")
    X, y = load_svmlight(path)
    whole = PGSClassifier(p=p, random_state=0).partial_fit(X, y, classes=[-1, 1])
    for chunk_rows in (2000, 777):
        est = PGSClassifier(p=p, random_state=0)
        widths = set()
        for Xc, yc in iter_svmlight(path, chunk_rows=chunk_rows):
            widths.add(Xc.shape[1])
            est.partial_fit(Xc, yc, classes=[-1, 1])
        assert len(widths) > 1  # the model grew chunk by chunk
        np.testing.assert_array_equal(est.coef_, whole.coef_)
        np.testing.assert_array_equal(est.intercept_, whole.intercept_)


def test_dense_chunk_with_other_width_is_rejected():
    X, y = data()
    est = PGSClassifier().partial_fit(X.toarray(), y, classes=[0, 1])
    with pytest.raises(ValueError, match="X has 5 features, but PGSClassifier is expecting 20"):
        est.partial_fit(X.toarray()[:, :5], y)


@pytest.mark.parametrize("make_bad, match", [
    (lambda X, y: (X.toarray() * np.nan, y), "NaN"),
    (lambda X, y: (np.where(X.toarray() > 0.5, np.inf, X.toarray()), y), "infinity"),
    (lambda X, y: (X, y[:-1]), "rows but y has"),
    (lambda X, y: (X, np.where(y == 1, 7, y)), r"label 7 \(row \d+\) is not one of the classes"),
])
def test_bad_input_leaves_model_unchanged(make_bad, match):
    X, y = data()
    est = PGSClassifier(random_state=0).partial_fit(X[:60], y[:60], classes=[0, 1])
    before = snapshot(est)
    Xb, yb = make_bad(X[60:], y[60:])
    with pytest.raises(ValueError, match=match):
        est.partial_fit(Xb, yb)
    assert snapshot(est) == before
    if "label" not in match:  # for fit, a new label is simply a new class
        with pytest.raises(ValueError, match=match):
            est.fit(Xb, yb)
        assert snapshot(est) == before


@pytest.mark.parametrize("params, match", [
    (dict(p=1.0), "'p' parameter"), (dict(p=2.5), "'p' parameter"),
    (dict(sigma=0.0), "'sigma' parameter"), (dict(sigma=-1.0), "'sigma' parameter"),
    (dict(sigma=np.inf), "'sigma' parameter"), (dict(radius=-1.0), "'radius'"),
    (dict(batch_size=0), "'batch_size'"), (dict(iterate="median"), "'iterate'"),
    (dict(loss="squared"), "'loss'"),
])
def test_bad_parameters_are_named(params, match):
    X, y = data()
    with pytest.raises(ValueError, match=match):
        PGSClassifier(**params).fit(X, y)


def test_nan_target_and_bad_weights_for_regressor():
    X, _ = data()
    y = np.asarray(X.sum(axis=1)).ravel()
    reg = PGSRegressor().partial_fit(X, y)
    before = snapshot(reg)
    with pytest.raises(ValueError, match=r"y contains NaN or infinity \(row 3"):
        reg.partial_fit(X[:5], np.array([0, 1, 2, np.nan, 4.0]))
    with pytest.raises(ValueError, match="sample_weight must be finite and >= 0; row 1"):
        reg.partial_fit(X[:3], y[:3], sample_weight=[1.0, -2.0, 1.0])
    assert snapshot(reg) == before


def test_changing_state_parameters_mid_stream_is_refused():
    X, y = data()
    est = PGSClassifier().partial_fit(X, y, classes=[0, 1])
    est.set_params(p=1.5)
    with pytest.raises(ValueError, match=r"parameter\(s\) \['p'\] changed"):
        est.partial_fit(X, y)
    est.fit(X, y)  # fit starts over and may
    assert est._state.p == 1.5


def test_partial_fit_needs_classes_first():
    X, y = data()
    with pytest.raises(ValueError, match="classes must be passed on the first call"):
        PGSClassifier().partial_fit(X, y)


def test_online_statistics_equal_numpy_recomputation():
    """Replay the stream row by row, reading w_{t-1} before each update."""
    X, labels = data(m=80)
    y = np.where(labels == 1, 1.0, -1.0)
    sw = np.random.RandomState(2).uniform(0.2, 3.0, 80)
    est = PGSClassifier(loss="logistic", p=1.7, sigma=1e-2, iterate="last")
    losses, mistakes, g_norms = [], 0, []
    q = 1.7 / 0.7
    for i in range(80):
        if i == 0:
            w, b = np.zeros(20), 0.0
        else:
            w, b = est.coef_.ravel(), est.intercept_[0]
        z = X[i] @ w + b
        losses.append(loss_value("logistic", z, y[i])[0])
        mistakes += int((z[0] > 0) != (y[i] > 0))
        g = -y[i] / (1 + np.exp(y[i] * z[0])) * sw[i]
        g_norms.append(np.sum(np.abs(g * np.append(X[i].toarray().ravel(), 1.0)) ** q) ** (2 / q))
        est.partial_fit(X[i], labels[i:i + 1], classes=[0, 1], sample_weight=sw[i:i + 1])
    stats = est.online_stats_
    assert stats["n_examples"] == stats["n_steps"] == 80
    assert stats["progressive_loss"] == pytest.approx(np.dot(sw, losses) / sw.sum(), rel=1e-10)
    assert stats["progressive_mistakes"] == mistakes
    assert stats["progressive_error_rate"] == pytest.approx(mistakes / 80)
    regret = 0.5 * sum(gn / (t * 1e-2) for t, gn in enumerate(g_norms, 1))
    assert stats["regret_bound"] == pytest.approx(regret, rel=1e-10)
    assert stats["optimization_error_bound"] == pytest.approx(regret / 80, rel=1e-10)


@pytest.mark.parametrize("sigma", [1e-12, 1e-6, 1.0, 1e3])
@pytest.mark.parametrize("p", [2.0, 1.5, 1.01])
@pytest.mark.parametrize("scale, loss", [
    (s, loss) for s in (1.0, 1e150, 1e-150) for loss in ("logistic", "hinge", "squared_hinge")
    # the squared hinge's gradient grows like |x|^2: at |x| ~ 1e150 it is itself beyond
    # the double range, so no solver can take that step
    if not (loss == "squared_hinge" and s == 1e150)])
def test_extreme_inputs_give_finite_models(sigma, p, scale, loss):
    X, y = data(m=60)
    est = PGSClassifier(loss=loss, p=p, sigma=sigma, max_epochs=2, random_state=0)
    est.fit(X * scale, y)
    assert np.all(np.isfinite(est.coef_)) and np.all(np.isfinite(est.intercept_))
    assert np.all(np.isfinite(est.decision_function(X * scale)))
    # the bound itself may exceed the double range (1e150^2 / 1e-12): inf, never NaN
    assert not np.isnan(est.online_stats_["regret_bound"])


@pytest.mark.parametrize("p", [2.0, 1.5, 1.01])
@pytest.mark.parametrize("radius", [1e-10, 1e-3, "auto"])
@pytest.mark.parametrize("loss", ["squared", "huber", "absolute", "epsilon_insensitive"])
def test_extreme_regression_and_tiny_radius(p, radius, loss):
    X, _ = data(m=60)
    y = np.asarray(X.sum(axis=1)).ravel() * 1e3
    reg = PGSRegressor(loss=loss, p=p, sigma=1e-9, radius=radius, max_epochs=2, random_state=0)
    reg.fit(X, y)
    coef = np.append(reg.coef_, reg.intercept_)
    assert np.all(np.isfinite(coef))
    if radius != "auto":
        assert np.sum(np.abs(coef) ** p) ** (1 / p) <= radius * (1 + 1e-9)


def test_divergence_is_reported_not_silent():
    X, _ = data()
    y = np.asarray(X.sum(axis=1)).ravel() * 1e3
    reg = PGSRegressor(loss="squared", sigma=1e-12, radius=None, random_state=0)
    with pytest.raises(PGSDivergedError, match="radius='auto'"):
        reg.fit(X, y)
    assert not hasattr(reg, "coef_") or not hasattr(reg, "_state")
    reg.partial_fit(X[:1], y[:1])
    with pytest.raises(PGSDivergedError, match="diverged at row"):
        reg.partial_fit(X, y)
    # the estimator holds the solver's state before the failing step, consistently
    assert reg.t_ == reg.online_stats_["n_steps"] == reg.online_stats_["n_examples"] >= 1


def test_a_progressive_loss_that_overflows_is_a_divergence():
    """Weights near 1e140-1e203 are finite, but their squared loss is not: the fit ended
    without an error, with a NaN progressive loss, and the model could not be saved
    ("sum_weighted_loss is nan"). Found by the core's pins (tests/test_core_pins.py)."""
    from test_core_pins import DATA, _matrix

    X, y = _matrix("train", "csr32"), DATA["train"]["regression"]
    reg = PGSRegressor(loss="squared", p=1.8, sigma=0.01, radius=None, iterate="weighted",
                       max_epochs=2, random_state=0)
    with pytest.raises(PGSDivergedError, match="progressive 'squared' loss overflowed.*"
                                               "use radius='auto'"):
        reg.fit(X, y, sample_weight=DATA["sample_weight"])
    assert not hasattr(reg, "_state")


def test_divergence_message_fits_the_case():
    """The advice names what to change (radius only where it is None), and the message
    says whether the kept state is usable: its weights, read back, are finite or not
    (they were not in every case tried: a margin overflows after the weights do)."""
    rng = np.random.RandomState(0)
    X = rng.randn(200, 4)
    y = X @ [1.0, -2.0, 0.5, 0.0] + 0.3 * rng.randn(200)
    for params, advice in ((dict(radius=None, sigma=1e-8), "use radius='auto'"),
                           # (at 1e-250 the ball's iterate is finite, 1e124: its
                           # projection no longer overflows on the way)
                           (dict(sigma=1e-320, p=1.5), r"Even on the ball \(radius='auto'\)")):
        reg = PGSRegressor(**params)
        with pytest.raises(PGSDivergedError, match=advice) as info:
            reg.partial_fit(X, y)
        usable = _finite_weights(reg._state)
        assert ("keeps the state before that step" in str(info.value)) == usable
        assert ("not usable" in str(info.value)) == (not usable)
        if not usable:  # and its weights are never handed out as inf or NaN
            with pytest.raises(PGSDivergedError, match="the model is not usable"):
                reg.coef_


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_the_finite_check_of_the_touched_coordinates_is_numpys(dtype):
    """After a call on wide rows the state is checked at the intercept's coordinate and
    at each entry's column + 1 only (`finite_at_columns`, compiled): the same answer as
    NumPy's isfinite over those rows of the block, whichever field of which row holds an
    inf or a NaN, repeats and all."""
    from onlinepgs._core._pgs import finite_at_columns

    rng = np.random.RandomState(0)
    block = rng.randn(50, 2, 4)
    columns = rng.randint(0, 49, 30).astype(dtype)
    assert finite_at_columns(block, columns)
    assert finite_at_columns(block, columns[:0])
    for row in range(50):
        for bad in (np.inf, -np.inf, np.nan):
            spoilt = block.copy()
            spoilt[row, rng.randint(2), rng.randint(4)] = bad
            want = bool(np.isfinite(spoilt[0]).all()
                        and np.isfinite(spoilt[columns.astype(np.int64) + 1]).all())
            assert finite_at_columns(spoilt, columns) == want


def test_a_state_of_many_problems_is_checked_whole_where_that_costs_less():
    """An entry's coordinate holds a row of K problems' fields: with 20 problems a call's
    entries hold more doubles than the whole block, which the guard then scans whole
    (compiled, `first_nonfinite`), catching a non-finite field the rows do not reach; a
    wide block of one problem is checked at the rows' columns only."""
    from onlinepgs.pgs import _finite_after

    rng = np.random.RandomState(3)
    X = sp.random(400, 2_000, density=0.01, random_state=3, format="csr")
    for K, wide in ((20, False), (1, True)):
        y = rng.randint(0, K, 400) if K > 2 else np.where(rng.rand(400) > 0.5, 1, -1)
        width = 2**20 if wide else 2_000
        Xw = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(400, width))
        est = PGSClassifier(geometry="adaptive", radius=None, sigma=1e-3, random_state=0,
                            max_model_bytes=None).fit(Xw, y)
        state = est._state
        assert _finite_after(state, Xw)
        unreached = next(c for c in range(width) if c not in set(X.indices.tolist()))
        state.block_a[unreached + 1, -1, 0] = np.nan
        assert _finite_after(state, Xw) == wide  # the wide one looks at the rows' only
        state.block_a[unreached + 1, -1, 0] = 0.0
        state.block_a[X.indices[0] + 1, 0, 1] = np.inf
        assert not _finite_after(state, Xw)


@pytest.mark.parametrize("path", ["partial_fit", "learn_one"])
def test_a_huge_value_on_a_coordinate_never_reached_is_refused_on_a_ball(path):
    """On a ball (the core keeps N, whose refresh of max |lambda_j| catches an overflow of
    lambda), 1e300 on a coordinate no step has reached leaves lambda finite and the
    averaged iterate's sums NaN there: the call's guard looks at the fields of the
    coordinates the row touched and refuses it (PGSDivergedError), where it once let the
    state hold NaN (predictions finite, the model unsaveable)."""
    rng = np.random.RandomState(0)
    X = sp.random(400, 64, density=0.1, random_state=0, format="csr")
    X = sp.hstack([X, sp.csr_matrix((400, 16))]).tocsr()  # columns 64.. never reached
    y = X @ rng.randn(80) + 0.1 * rng.randn(400)
    est = PGSRegressor(sigma=1e-3, n_bits=None, random_state=0).partial_fit(X, y)
    assert est._state.need_norm  # (radius "auto": a ball)
    row = sp.csr_matrix(([1e300, 1.0], ([0, 0], [70, 72])), shape=(1, 80))
    with pytest.raises(PGSDivergedError, match="running sum"):
        if path == "partial_fit":
            est.partial_fit(row, [1.0])
        else:
            est = PGSRegressor(sigma=1e-3, n_bits=18, random_state=0)  # (hashed names)
            for i in np.flatnonzero(np.diff(X.indptr)):
                est.learn_one({f"f{j}": v for j, v in zip(X[i].indices, X[i].data)}, y[i])
            est.learn_one({"g70": 1e300, "g72": 1.0}, 1.0)


def test_predict_proba_and_pickle():
    X, y = data(classes=3)
    est = PGSClassifier(random_state=0).fit(X, y)
    proba = est.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(np.argmax(proba, axis=1), np.argmax(est.decision_function(X), axis=1))
    clone = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(clone.coef_, est.coef_)
    clone.partial_fit(X, y)
    est.partial_fit(X, y)
    np.testing.assert_array_equal(clone.coef_, est.coef_)
    assert not hasattr(PGSClassifier(loss="hinge"), "predict_proba")


def test_binary_probabilities_are_the_logistic_model():
    X, y = data()
    est = PGSClassifier(random_state=0).fit(X, y)
    z = est.decision_function(X)
    np.testing.assert_allclose(est.predict_proba(X)[:, 1], 1 / (1 + np.exp(-z)))
    assert set(est.predict(X)) <= {0, 1}


def test_tol_stops_early():
    X, y = data()
    est = PGSClassifier(tol=10.0, n_iter_no_change=2, max_epochs=50, random_state=0).fit(X, y)
    assert est.n_iter_ == 3  # epoch 1 sets the best; 2 and 3 do not improve it by 10


def test_csr_float64_input_reaches_the_core_without_a_copy(monkeypatch):
    from onlinepgs.pgs import PGSLearner

    seen = []
    original = PGSLearner._run

    def spy(self, state, X, *args, **kwargs):
        seen.append(X.data)
        return original(self, state, X, *args, **kwargs)

    X, y = data()
    X.sort_indices()
    monkeypatch.setattr(PGSLearner, "_run", spy)
    PGSClassifier(sigma=1e-4, max_epochs=2).fit(X, y)
    PGSClassifier(sigma=1e-4).partial_fit(X, y, classes=[0, 1])
    assert len(seen) == 3 and all(np.shares_memory(d, X.data) for d in seen)


def test_strided_csr_arrays_train_as_their_contiguous_copy():
    X, y = data()
    strided = sp.csr_matrix(X.astype(np.complex128)).real  # data is a view with stride 16
    assert not strided.data.flags.c_contiguous
    a = PGSClassifier(random_state=0).partial_fit(strided, y, classes=[0, 1])
    b = PGSClassifier(random_state=0).partial_fit(X, y, classes=[0, 1])
    np.testing.assert_array_equal(a.coef_, b.coef_)


def test_columns_the_model_never_saw_weigh_nothing_and_cost_no_memory():
    X, y = data()
    est = PGSClassifier(random_state=0).fit(X, y)
    # three billion columns, the last row using the last: padding the weights to that
    # width would take 24 GB
    indices = np.r_[X.indices.astype(np.int64), 2_999_999_999]
    huge = sp.csr_matrix((np.r_[X.data, 5.0], indices, np.r_[X.indptr[:-1], X.indptr[-1] + 1]),
                         shape=(X.shape[0], 3_000_000_000))
    np.testing.assert_allclose(est.decision_function(huge), est.decision_function(X),
                               rtol=0, atol=1e-12)


def records_as_csr(records, width):
    """Records of {int: value} (or (int, value) pairs) as a CSR matrix, written plainly."""
    M = np.zeros((len(records), width))
    for i, record in enumerate(records):
        for j, value in (record.items() if isinstance(record, dict) else record):
            M[i, j] += value
    return sp.csr_matrix(M)


def int_stream(m=90, seed=0):
    """Integer-keyed records whose largest index grows along the stream; the first is
    empty, so a first chunk of one record has no columns at all."""
    rng = np.random.RandomState(seed)
    pairs = [({}, 0)]
    for i in range(1, m):
        cols = rng.randint(0, 2 + i // 6, 3)
        x = {int(c): float(v) for c, v in zip(cols, rng.randn(3))}
        pairs.append((x if i % 2 else list(x.items()), int(cols[0] % 2)))
    return pairs


@pytest.mark.parametrize("p, k", [(2.0, 1), (1.5, 1), (1.6, 3)])
def test_integer_records_grow_the_model_whatever_the_chunking(p, k):
    pairs = int_stream()
    width = 1 + max(j for x, _ in pairs for j in dict(x))
    X = records_as_csr([x for x, _ in pairs], width)
    y = [label for _, label in pairs]
    ref = PGSClassifier(p=p, batch_size=k, random_state=0).partial_fit(X, y, classes=[0, 1])
    for chunk_rows in (1, 2, 3, 1000):
        est = PGSClassifier(p=p, batch_size=k, random_state=0)
        est.fit_stream(iter(pairs), classes=[0, 1], chunk_rows=chunk_rows)
        assert est.n_features_in_ == width and est.t_ == ref.t_
        np.testing.assert_array_equal(est.coef_, ref.coef_)
        np.testing.assert_array_equal(est.intercept_, ref.intercept_)
        assert (est.online_stats_["regret_bound"] == ref.online_stats_["regret_bound"])
    # partial_fit too: a record beyond the model's columns grows it, as a wider CSR chunk does
    est = PGSRegressor(random_state=0).partial_fit([{0: 1.0}, {1: 2.0}], [1.0, 2.0])
    est.partial_fit([{3: 1.0}], [0.5])
    ref = PGSRegressor(random_state=0)
    ref.partial_fit(records_as_csr([{0: 1.0}, {1: 2.0}], 2), [1.0, 2.0])
    ref.partial_fit(records_as_csr([{3: 1.0}], 4), [0.5])
    assert est.n_features_in_ == 4
    np.testing.assert_array_equal(est.coef_, ref.coef_)
    # at predict time a column the model never saw weighs nothing, as for CSR input
    rows = [{0: 1.0, 9: 5.0}, [(3, 2.0), (40, 1.0)]]
    np.testing.assert_array_equal(est.predict(rows), ref.predict(records_as_csr(rows, 41)))


def test_stream_errors_name_the_record_of_the_stream():
    pairs = int_stream(20)
    for chunk_rows in (1, 3, 1000):
        bad = pairs[:12] + [({"word": 1.0}, 0)] + pairs[12:]
        with pytest.raises(ValueError, match="^record 13 of the stream: string feature 'word' "
                                             "needs hashing"):
            PGSClassifier().fit_stream(iter(bad), classes=[0, 1], chunk_rows=chunk_rows)
        bad = pairs[:16] + [({0: 1.0}, 7)] + pairs[16:]
        with pytest.raises(ValueError, match=r"label 7 \(record 17 of the stream\) is not one"):
            PGSClassifier().fit_stream(iter(bad), classes=[0, 1], chunk_rows=chunk_rows)
    # partial_fit still names the row of its call
    with pytest.raises(ValueError, match="row 1: string feature 'word'"):
        PGSClassifier().partial_fit([{0: 1.0}, {"word": 1.0}], [0, 1], classes=[0, 1])


def test_a_first_record_without_pairs_is_a_record():
    words = [[], [("a", 1.0)], [("b", 1.0)], [("a", 1.0), ("c", 2.0)], []] * 4
    y = [0, 1, 0, 1, 1] * 4
    as_dicts = [dict(x) for x in words]
    ref = PGSClassifier(n_bits=8, random_state=0).fit_stream(zip(as_dicts, y), classes=[0, 1])
    est = PGSClassifier(n_bits=8, random_state=0).fit_stream(zip(words, y), classes=[0, 1])
    np.testing.assert_array_equal(est.coef_, ref.coef_)
    rows = [[], [("a", 1.0)], [("c", 1.0)]]
    np.testing.assert_array_equal(est.decision_function(rows),
                                  ref.decision_function([dict(x) for x in rows]))
    # integer features against the same rows as a CSR matrix
    rows = [[], [(1, 1.0)], [(0, 2.0), (3, 1.0)]]
    ints = PGSRegressor(random_state=0).partial_fit(rows, [0.0, 1.0, 2.0])
    ref = PGSRegressor(random_state=0).partial_fit(records_as_csr(rows, 4), [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(ints.coef_, ref.coef_)
    np.testing.assert_array_equal(ints.predict(rows), ref.predict(records_as_csr(rows, 4)))
    # a chunk of empty records only: rows with no features, not a matrix of no columns
    ints.partial_fit([[], ()], [1.0, 3.0])
    ref.partial_fit(sp.csr_matrix((2, 4)), [1.0, 3.0])
    np.testing.assert_array_equal(ints.coef_, ref.coef_)
    np.testing.assert_array_equal(ints.predict([[], []]), np.repeat(ref.intercept_, 2))
    # lists of numbers are still a dense matrix
    dense = PGSRegressor(random_state=0).fit([[1.0, 2.0], [3.0, 4.0]], [1.0, 2.0])
    ref = PGSRegressor(random_state=0).fit(np.array([[1.0, 2.0], [3.0, 4.0]]), [1.0, 2.0])
    np.testing.assert_array_equal(dense.coef_, ref.coef_)
    with pytest.raises(ValueError, match="X has 3 features"):
        dense.predict([[1.0, 2.0, 3.0]])


# every layout of the state: p = 2 / p < 2, the iterates, a ball or R^n, l1 (with its
# heap's key on a ball and an average's flag), mini-batches
LAYOUTS = [dict(), dict(p=1.5), dict(iterate="last"), dict(iterate="last", radius=None),
           dict(iterate="random", p=1.7), dict(batch_size=4, iterate="average"),
           dict(l1=0.01), dict(l1=0.01, radius=None), dict(l1=0.01, iterate="last"),
           dict(l1=0.01, iterate="last", radius=None), dict(l1=0.01, radius=1.0),
           dict(l1=0.01, p=1.5, iterate="last"), dict(l1=0.01, p=1.5, iterate="last",
                                                      radius=None)]


def layout_cases():
    for options in LAYOUTS:
        for classes in (2, 3):
            yield options, classes, "ovr"
    yield dict(), 3, "multinomial"
    yield dict(l1=0.01), 3, "multinomial"


@pytest.mark.parametrize("options, n_classes, multi_class", list(layout_cases()))
def test_the_width_budget_is_the_bytes_the_state_allocates(options, n_classes, multi_class):
    """Issue 50, item 16: max_model_bytes counted 16 bytes a feature of an l1 state that
    takes 24 to 34 (its heap's key, its average's flag, the list of coordinates reached).
    The budget's bytes for a width are now exactly the bytes of the arrays a state of
    that width holds beyond one of width 0 (their nbytes), in every configuration; what
    tracemalloc sees allocated agrees; a budget one byte short refuses the width before
    any row trains, and the exact budget passes."""
    import tracemalloc

    est = PGSClassifier(sigma=1e-4, multi_class=multi_class, **options)
    K = 1 if n_classes == 2 else n_classes
    n = 20_000
    counted = est._layout(K).nbytes(n + 1)  # what _check_width weighs
    tracemalloc.start()
    try:
        state = est._new_state(n, K, K > 1, np.random.RandomState(0))
        allocated = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    empty = est._new_state(0, K, K > 1, np.random.RandomState(0))
    assert state.nbytes - empty.nbytes == counted - est._layout(K).nbytes(1)
    assert counted <= allocated <= counted + 30_000, (counted, allocated)
    X = sp.csr_matrix((np.ones(2), [0, n - 1], [0, 1, 2]), shape=(2, n))
    y = [0, 1] if n_classes == 2 else [0, 2]
    classes = list(range(n_classes))
    short = PGSClassifier(sigma=1e-4, multi_class=multi_class, max_model_bytes=counted - 1,
                          **options)
    with pytest.raises(ModelTooLargeError) as e:
        short.partial_fit(X, y, classes=classes)
    assert (e.value.row, e.value.n_features, e.value.needed) == (1, n, counted)
    assert not hasattr(short, "_state")  # refused before anything trained
    fits = PGSClassifier(sigma=1e-4, multi_class=multi_class, max_model_bytes=counted,
                         **options).partial_fit(X, y, classes=classes)
    assert fits._state.dim == n + 1


def stray_index_rows(column, width=None):
    """Three rows, the second with a stray column (CSR of the given width)."""
    indices = np.array([0, 2, column, 5])
    return sp.csr_matrix((np.ones(4), indices, np.array([0, 2, 3, 4])),
                         shape=(3, width or column + 1)), np.array([1, -1, 1])


def test_a_stray_feature_index_is_refused_before_allocating():
    """Issue 32, item 10: one column of 4e8 in three rows made a 6.4 GB model (35 s).
    Training now refuses the row before allocating anything (fast, little memory),
    naming the row, the column, the memory and the remedies; the estimator is left
    as it was."""
    import time
    import tracemalloc

    X, y = stray_index_rows(399_999_999)
    clf = PGSClassifier()
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(ModelTooLargeError) as e:
            clf.partial_fit(X, y, classes=[-1, 1])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - started < 5 and peak < 50_000_000
    err = e.value
    # 18 bytes a feature: lam and the weighted average of p = 2, one problem (16), and
    # the auto ball's list of reached coordinates (a quarter of an int64); for each of
    # the 4 start runs of the default sigma="auto" (and each state's few fixed entries)
    assert (err.row, err.column, err.n_features) == (1, 399_999_999, 4 * 10**8)
    assert 4 * 18 * 4 * 10**8 <= err.needed < 4 * 18 * 4 * 10**8 + 1000
    message = str(err)
    assert message.startswith("row 1 of this call has a feature at column 399999999")
    for part in ("28.8 GB", "(18 bytes a feature) for the 4 runs of sigma='auto'; give "
                 "sigma a number to hold one", "max_model_bytes=1073741824", "n_bits"):
        assert part in message
    assert not hasattr(clf, "_state") and not hasattr(clf, "n_features_in_")
    # fit, records and a fitted model growing: the same refusal
    with pytest.raises(ModelTooLargeError, match="row 1 of this call"):
        PGSClassifier().fit(X, y)
    fitted = PGSClassifier().partial_fit(X[:1, :10], y[:1], classes=[-1, 1])
    before = snapshot(fitted)
    with pytest.raises(ModelTooLargeError, match="row 1 of this call"):
        fitted.partial_fit(X, y)
    assert snapshot(fitted) == before
    with pytest.raises(ModelTooLargeError, match="row 1 of this call"):
        fitted.fit(X, y)  # a new fit is a new state: never exempt
    assert snapshot(fitted) == before
    records = [{0: 1.0}, {399_999_999: 1.0}, {5: 1.0}]
    with pytest.raises(ModelTooLargeError, match="^record 2 of the stream has a feature"):
        PGSRegressor().fit_stream(zip(records, y), chunk_rows=2)


def test_the_width_budget_is_the_parameter_s_and_hashing_is_exempt():
    """The budget is max_model_bytes (None: none); a declared CSR width without entries
    is named as X's columns; with n_bits the width is the user's 2**n_bits."""
    X, y = stray_index_rows(99)
    one = PGSClassifier(sigma=1e-4)._layout(1).nbytes(101)  # one state of 100 features
    assert PGSClassifier(sigma=1e-4, max_model_bytes=one).fit(X, y).coef_.shape == (1, 100)
    with pytest.raises(ModelTooLargeError) as e:
        PGSClassifier(sigma=1e-4, max_model_bytes=one - 1).fit(X, y)
    assert (e.value.row, e.value.column, e.value.n_features) == (1, 99, 100)
    assert "(99 features)" in str(e.value)
    wide, _ = stray_index_rows(5, width=1000)  # no entry beyond column 5
    with pytest.raises(ModelTooLargeError, match="^X has 1000 columns") as e:
        PGSClassifier(sigma=1e-4, max_model_bytes=one).fit(wide, y)
    assert e.value.row is None and e.value.n_features == 1000
    assert PGSClassifier(sigma=1e-4, max_model_bytes=None).fit(X, y).coef_.shape == (1, 100)
    hashed = PGSClassifier(sigma=1e-4, n_bits=10, max_model_bytes=1).fit(X, y)
    assert hashed.coef_.shape == (1, 1024)
    with pytest.raises(ValueError, match="max_model_bytes"):
        PGSClassifier(sigma=1e-4, max_model_bytes=0).fit(X, y)


def test_the_width_budget_counts_the_race_s_start_runs_with_sigma_auto():
    """sigma="auto" holds the race's start runs' states at once over its first rows (one
    state each, `_race.START_SIGMAS`): the budget counts them all, and says so; a number
    for sigma holds one state. A race that has settled (fit's) grows one state."""
    from onlinepgs import _race

    runs = len(_race.START_SIGMAS)
    assert runs == 4
    X, y = stray_index_rows(99)  # 100 features
    layout = PGSClassifier(sigma=1e-4)._layout(1)
    per = layout.per_feature
    assert PGSClassifier()._layout(1).per_feature == per  # the bytes of one state
    one = layout.nbytes(101)  # one state of 100 features, not four
    for train in (lambda est: est.fit(X, y),
                  lambda est: est.partial_fit(X, y, classes=[-1, 1])):
        with pytest.raises(ModelTooLargeError) as e:
            train(PGSClassifier(max_model_bytes=runs * one - 1))
        assert (e.value.row, e.value.column, e.value.n_features) == (1, 99, 100)
        assert e.value.needed == runs * one and e.value.budget == runs * one - 1
        message = str(e.value)
        assert (f"({per} bytes a feature) for the 4 runs of sigma='auto'; give sigma a "
                "number to hold one") in message
        assert f"({layout.max_width((runs * one - 1) // runs)} features)" in message
        assert train(PGSClassifier(max_model_bytes=runs * one)).coef_.shape == (1, 100)
        assert train(PGSClassifier(sigma=1e-4, max_model_bytes=one)).coef_.shape == (1, 100)
        with pytest.raises(ModelTooLargeError) as e:
            train(PGSClassifier(sigma=1e-4, max_model_bytes=one - 1))
        assert "runs of sigma" not in str(e.value) and e.value.needed == one
    # growing a model: a race still running counts its start runs, a settled one itself
    narrow, wide = X[:1, :10], X  # the first row has no column beyond 5
    racing = PGSClassifier(max_model_bytes=runs * one - 1).partial_fit(
        narrow, y[:1], classes=[-1, 1])
    assert not racing._race.schedule.settled
    with pytest.raises(ModelTooLargeError, match="for the 4 runs of sigma='auto'"):
        racing.partial_fit(wide, y)
    settled = PGSClassifier(max_model_bytes=one).fit(X[[0, 2], :10], [1, -1])
    assert settled._race.schedule.settled and len(settled._race.states) == 1
    assert settled.partial_fit(wide, y).coef_.shape == (1, 100)


@pytest.mark.parametrize("iterate", ["average", "weighted2"])
def test_averaged_iterates_with_wide_ranging_sample_weights(iterate):
    """On the ball a heavy row makes s_t fall by orders at once: the running sum C kept
    the early large terms and lost the later ones, and C lambda_j - acc_j cancelled (3%
    off at a weight ratio of 1e24, 83% at 1e32, 0 for one row of 1e150; issue 32 item 9).
    The yardstick is the mean of the reference's own iterates."""
    rng = np.random.RandomState(0)
    X = rng.randn(300, 8)
    y = np.where(X @ rng.randn(8) > 0, 1.0, -1.0)
    for sw in (10 ** rng.uniform(0, 24, 300), np.r_[np.ones(5), 1e150, np.ones(294)]):
        iterates, _ = reference_pgs(np.hstack([np.ones((300, 1)), X]), y, p=2.0, sigma=1e-2,
                                    loss="logistic", sample_weight=sw, radius="auto")
        expected = combine(iterates, iterate)[:, 0]
        est = PGSClassifier(sigma=1e-2, iterate=iterate, shuffle=False)
        est.partial_fit(X, y, classes=[-1, 1], sample_weight=sw)
        got = np.r_[est.intercept_, est.coef_[0]]
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-8 * np.abs(expected).max())


def test_sample_weights_near_the_double_range():
    """sample_weight 1e307: the auto radius sqrt(2 (p-1) w l(0) / sigma) overflowed in the
    square (the ball was lost: weights 1e303, NaN averages); where the model cannot be
    finite the call raises with the reason instead of handing out inf or NaN."""
    rng = np.random.RandomState(0)
    X = rng.randn(50, 3)
    y = np.where(X[:, 0] > 0, 1, -1)
    sw = np.ones(50)
    sw[5] = 1e307
    radius = np.sqrt(1e307) * np.sqrt(2 * np.log(2) / 1e-2)  # closed form, l(0) = log 2
    est = PGSClassifier(sigma=1e-2, iterate="last", random_state=0).fit(X, y, sample_weight=sw)
    w = np.r_[est.intercept_, est.coef_[0]]
    assert np.isfinite(w).all() and np.linalg.norm(w / radius) <= 1 + 1e-12
    # p = 2's lazy average holds C * lambda, and lambda ~ 1e307 times C > 1 overflows
    for radius in ("auto", None):
        est = PGSClassifier(sigma=1e-2, radius=radius, iterate="weighted2", random_state=0)
        with pytest.raises(PGSDivergedError, match="averaged iterate's running sum "
                                                   ".*overflowed the double range"):
            est.fit(X, y, sample_weight=sw)
        assert not hasattr(est, "_state")  # fit leaves nothing behind


def test_p_very_near_1_gives_the_reference_model():
    """Issue 32 item 2: hinge at p = 1.0001 gave coef_ [[nan 0.]]; the yardstick is the
    plain-NumPy Figure 1 over the same rows in the same order."""
    X = np.array([[1.0, 0.0], [0.0, 1.0]] * 20)
    y = np.array([1, -1] * 20)
    for loss in ("hinge", "logistic", "squared_hinge", "smooth_hinge"):
        est = PGSClassifier(loss=loss, p=1.0001, sigma=1.0, shuffle=False, max_epochs=2)
        est.fit(X, y)
        iterates, _ = reference_pgs(np.hstack([np.ones((80, 1)), np.vstack([X, X])]),
                                    np.r_[y, y],
                                    p=1.0001, sigma=1.0, loss=loss, radius="auto")
        expected = combine(iterates, "weighted2")[:, 0]
        got = np.r_[est.intercept_, est.coef_[0]]
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12 * np.abs(expected).max())


@pytest.mark.slow  # a 2^24-wide state: ~5-20 s on a loaded machine
def test_partial_fit_in_a_hashed_width_sweeps_only_reached_coordinates():
    # issue 32 item 11: partial_fit in 2^24 columns must not do O(2^24) work per call;
    # a refresh of M (p < 2) swept every coordinate. The same chunks with their columns
    # renumbered in order into a narrow space give the same model.
    rng = np.random.default_rng(7)
    wide, n_calls, rows, nnz = 2**24, 30, 10, 20
    cols = np.sort(rng.choice(wide, 3000, replace=False))
    kw = dict(p=1.5, radius=1.0, sigma=1e-2, iterate="weighted2")
    big, small = PGSClassifier(**kw), PGSClassifier(**kw)
    for call in range(n_calls):
        pick = np.sort(np.stack([rng.choice(len(cols), nnz, replace=False)
                                 for _ in range(rows)]), axis=1).ravel()
        data, ptr = rng.standard_normal(rows * nnz), np.arange(0, rows * nnz + 1, nnz)
        y = rng.integers(0, 2, rows)
        big.partial_fit(sp.csr_matrix((data, cols[pick], ptr), shape=(rows, wide)), y,
                        classes=[0, 1])
        small.partial_fit(sp.csr_matrix((data, pick, ptr), shape=(rows, len(cols))), y,
                          classes=[0, 1])
        assert big._cache == {}  # coef_ is computed on access, not per call
    state = big._state
    assert state.n_rescales >= 1
    assert state.n_swept < wide  # a single sweep of the old code visited 2^24 + 1
    np.testing.assert_allclose(big.coef_[:, cols], small.coef_, rtol=1e-9, atol=1e-15)
    assert np.count_nonzero(big.coef_) == np.count_nonzero(small.coef_)


@pytest.mark.parametrize("est", [PGSClassifier(n_bits=4, sigma=1e-2, random_state=0),
                                 PGSClassifier(sigma=1e-2, random_state=0),
                                 SDCAClassifier(sigma=1e-2, random_state=0)])
def test_feature_names_are_checked_on_every_path_and_a_refit_forgets_them(est):
    """A DataFrame's column names are recorded and checked also where the input reaches
    the learner as CSR (hashed by n_bits: a reordered frame was scored into other
    columns, silently), and a refit on a sparse matrix drops the names of a frame fitted
    before (they stayed beside the new width)."""
    pd = pytest.importorskip("pandas")
    rng = np.random.RandomState(0)
    frame = pd.DataFrame(rng.rand(200, 4), columns=["age", "income", "score", "tenure"])
    y = (frame["income"] > 0.5).astype(int)
    est.fit(frame, y)
    assert est.feature_names_in_.tolist() == ["age", "income", "score", "tenure"]
    with pytest.raises(ValueError, match="feature names should match"):
        est.predict(frame[["income", "age", "score", "tenure"]])
    with pytest.raises(ValueError, match="feature names should match"):
        est.predict(frame.iloc[:, :2])
    est.fit(sp.csr_matrix(rng.rand(50, 8)), rng.randint(0, 2, 50))
    assert not hasattr(est, "feature_names_in_") and est.n_features_in_ in (8, 16)
