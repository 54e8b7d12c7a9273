"""A wide state's model read out at the coordinates its rows reached
(onlinepgs/_sparse_readout.py): against the dense read-out of the same state
(`PGSState.weights`, every coordinate, the read-out the NumPy transcriptions of the
solver check), bit for bit, for every kind of state; the scales held as pairs against
the scales whole; the file a save writes, the same bytes either way; the memory of the
read-out, against the width's."""
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

import onlinepgs._columns_seen as columns_seen
from onlinepgs import PGSClassifier, PGSRegressor, duality_gap, load_model, save_model
from onlinepgs.model_io import load_learner
from onlinepgs import _sparse_readout
from onlinepgs.model import LinearModel
from onlinepgs.pgs import feature_scales


def rows_in_a_wide_space(n_rows=400, width=5_000, used=60, seed=0, classes=2):
    """Rows of `used` columns spread over `width` (a hashed space), raw values of
    mixed magnitudes, labels from a linear rule."""
    rng = np.random.default_rng(seed)
    columns = np.sort(rng.choice(width, size=used, replace=False))
    dense = sp.random(n_rows, used, density=0.1, random_state=seed, format="csr")
    magnitudes = 10.0 ** rng.integers(-2, 3, size=used)
    X = sp.csr_matrix((dense.data * magnitudes[dense.indices], columns[dense.indices],
                       dense.indptr), shape=(n_rows, width))
    scores = dense @ rng.standard_normal((used, classes))
    y = scores.argmax(axis=1) if classes > 2 else np.where(scores[:, 0] > 0, 1, -1)
    return X, y.astype(float)


def dense_read_out(est):
    """(coef, intercept weights, scales or None) of the state, read over its width."""
    state = est._state
    with np.errstate(all="ignore"):
        W = state.weights()
    return W[1:].T, W[0], feature_scales(state, est._layout(1).offset("inv_scale"))


CONFIGS = {
    "global default": dict(),
    "global p 1.5": dict(p=1.5, sigma=1e-3, radius=None),
    "global l1": dict(l1=1e-3, sigma=1e-3, iterate="last"),
    "global l1 average": dict(l1=1e-3, sigma=1e-3, iterate="average"),
    "global random": dict(sigma=1e-3, iterate="random", radius=None),
    "global ball": dict(sigma=1e-3, radius=0.5, iterate="average"),
    "global p 1.5 l1 ball": dict(p=1.5, l1=1e-3, sigma=1e-3, radius=1.0),
    "adaptive default": dict(geometry="adaptive", iterate="last", radius=None),
    "adaptive average": dict(geometry="adaptive", iterate="average", radius=None,
                             sigma=1e-4, eta=0.5),
    "adaptive p 1.5": dict(geometry="adaptive", p=1.5, sigma=1e-3, radius=None),
    "adaptive l1": dict(geometry="adaptive", l1=1e-3, sigma=1e-4, iterate="last",
                        radius=None),
    "adaptive forget": dict(geometry="adaptive", forget=0.99, iterate="last", radius=None,
                            sigma=1e-4),
    "adaptive batches": dict(geometry="adaptive", batch_size=7, iterate="last",
                             radius=None, sigma=1e-4),
}


@pytest.mark.parametrize("params", CONFIGS.values(), ids=CONFIGS.keys())
def test_the_model_at_the_rows_reached_is_the_dense_one(params, monkeypatch):
    monkeypatch.setattr(_sparse_readout, "READ_OUT_DENSE_BYTES", 0)  # every width "wide"
    X, y = rows_in_a_wide_space()
    est = PGSClassifier(random_state=0, **params)
    est.partial_fit(X[:150], y[:150], classes=[-1.0, 1.0])
    est.partial_fit(X[150:], y[150:])
    coef, w0, scales = dense_read_out(est)
    model = est.model_
    assert model.is_sparse and model.n_nonzero <= 60
    assert np.array_equal(model.coef, coef) and model.coef.tobytes() == coef.tobytes()
    assert model.intercept_weight.tobytes() == w0.tobytes()
    if scales is None:
        assert not model.has_scales and model.scale_pairs is None
    else:
        assert model.scales.tobytes() == scales.tobytes()
        index, value = model.scale_pairs
        assert index.size <= 61 and np.array_equal(scales[index], value)
    # the predictions of the dense model, bit for bit on sparse rows
    dense = LinearModel(coef, w0, classes=model.classes, loss=model.loss)
    assert np.array_equal(est.decision_function(X), dense.decision_function(X))
    assert np.array_equal(est.coef_, coef)


@pytest.mark.parametrize("multi_class", ["ovr", "multinomial"])
def test_multiclass_and_regression_models_too(multi_class, monkeypatch):
    monkeypatch.setattr(_sparse_readout, "READ_OUT_DENSE_BYTES", 0)
    X, y = rows_in_a_wide_space(classes=4, seed=1)
    for est in (PGSClassifier(random_state=0, multi_class=multi_class, sigma=1e-3,
                              geometry="adaptive", radius=None).fit(X, y),
                PGSRegressor(random_state=0, loss="squared", geometry="adaptive",
                             radius=None, sigma=1e-3).fit(X, y * 10.0)):
        coef, w0, scales = dense_read_out(est)
        model = est.model_
        assert model.is_sparse and model.n_problems == coef.shape[0]
        assert model.coef.tobytes() == coef.tobytes()
        assert model.intercept_weight.tobytes() == w0.tobytes()
        assert model.scales.tobytes() == scales.tobytes()


def test_a_state_that_reached_most_coordinates_is_read_out_dense(monkeypatch):
    monkeypatch.setattr(_sparse_readout, "READ_OUT_DENSE_BYTES", 0)
    X, y = rows_in_a_wide_space(width=80, used=80)
    est = PGSClassifier(random_state=0, geometry="adaptive", radius=None).fit(X, y)
    assert not est.model_.is_sparse  # sparse rows would not be smaller
    assert est.model_.coef.tobytes() == dense_read_out(est)[0].tobytes()


def test_a_small_model_is_read_out_dense_whatever_its_rows():
    X, y = rows_in_a_wide_space()  # 5,000 columns: 40 KB of weights
    est = PGSClassifier(random_state=0, geometry="adaptive", radius=None).fit(X, y)
    assert not est.model_.is_sparse


def test_a_wide_model_costs_its_coordinates_not_its_width(tmp_path, monkeypatch):
    # a state over the width (over the columns seen, onlinepgs._columns_seen, the
    # read-out is of their slots: tests/test_columns_seen.py)
    monkeypatch.setattr(columns_seen, "MIN_WIDTH", 2**62)
    width = 2**23  # 64 MB of weights dense, as much of scales
    X, y = rows_in_a_wide_space(n_rows=600, width=width, used=300, seed=2)
    est = PGSClassifier(random_state=0, geometry="adaptive", radius=None,
                        max_model_bytes=None).fit(X, y)
    tracemalloc.start()
    model = est.model_
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # the dense read-out allocated 24 bytes a coordinate (the weights, their copy, the
    # scales: 192 MB); this one a byte of marks (`nonzero_rows`, address space whose
    # pages are mapped where a mark is written) and its coordinates' arrays
    assert model.is_sparse and peak < width + 2**20
    coef, w0, scales = dense_read_out(est)
    assert np.array_equal(model.coef_sparse.toarray(), coef)
    assert np.array_equal(model.scales, scales)
    # the file is the one the dense read-out's model gave, byte for byte
    save_model(est, tmp_path / "sparse.pgs")
    est._cache.clear()
    monkeypatch.setattr(_sparse_readout, "READ_OUT_DENSE_BYTES", 2**40)
    assert not est.model_.is_sparse
    save_model(est, tmp_path / "dense.pgs")
    assert (tmp_path / "sparse.pgs").read_bytes() == (tmp_path / "dense.pgs").read_bytes()
    monkeypatch.undo()
    back = load_learner(tmp_path / "sparse.pgs", state=False)  # predict's reader
    assert back.model_.scale_pairs[0].size <= 301  # held as pairs, not the width
    assert np.array_equal(back.model_.scales, scales)
    assert np.array_equal(back.predict_proba(X), est.predict_proba(X))
    whole = load_model(tmp_path / "sparse.pgs")  # the state too: its model, as read out
    assert whole.model_.is_sparse and np.array_equal(whole.model_.scales, scales)


def test_scales_held_as_pairs_are_the_scales_whole():
    rng = np.random.default_rng(4)
    whole = np.ones(1_001)
    at = np.sort(rng.choice(1_001, 40, replace=False))
    whole[at] = rng.uniform(0.01, 100.0, size=40)
    coef = sp.random(3, 1_000, density=0.05, random_state=4, format="csr").toarray()
    a = LinearModel(coef, [0.3, -0.1, 0.2], classes=[0, 1, 2], scales=whole)
    b = LinearModel(coef, [0.3, -0.1, 0.2], classes=[0, 1, 2], scales=(at, whole[at]))
    assert a.scales.tobytes() == b.scales.tobytes()
    for model in (a, b):
        index, value = model.scale_pairs
        assert np.array_equal(index, at) and np.array_equal(value, whole[at])
        coords = np.array([0, at[3], at[3] + 1 if at[3] + 1 not in at else 0, 1_000, 5_000])
        expected = np.where(coords <= 1_000, whole[np.minimum(coords, 1_000)], 1.0)
        assert np.array_equal(model.scales_at(coords), expected)
    X = sp.random(300, 1_000, density=0.02, random_state=5, format="csr") * 50.0
    y = rng.integers(0, 3, size=300)
    for sparse in (False, True):
        ga = duality_gap(a.sparse() if sparse else a, X, y)
        gb = duality_gap(b.sparse() if sparse else b, X, y)
        assert (ga.primal, ga.dual) == (gb.primal, gb.dual)
        dense_x = duality_gap(a, X.toarray(), y)
        assert abs(dense_x.primal - ga.primal) <= 1e-12 * abs(ga.primal)


@pytest.mark.parametrize("bad, words", [
    ((np.array([3, 2]), np.array([1.0, 2.0])), "strictly increasing"),
    ((np.array([0, 11]), np.array([1.0, 2.0])), "strictly increasing"),
    ((np.array([0, 2]), np.array([1.0, 0.0])), "finite positive"),
    ((np.array([0, 2]), np.array([1.0])), "one length"),
    ((np.array([0]), np.array([1.0]), np.array([1.0])), "pair"),
])
def test_bad_scale_pairs_are_refused(bad, words):
    with pytest.raises(ValueError, match=words):
        LinearModel(np.zeros((1, 10)), scales=bad)
