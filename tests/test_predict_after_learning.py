"""Predicting between learning steps (test then train) reads the lazy state at the row's
coordinates: O(nnz) whatever the width, and the scores of the model read out whole.

The yardsticks: the dense model (``coef_``, ``intercept_``, read out after the prediction)
times the row, by scipy's CSR product (the same operations: bit for bit) and in dense
NumPy (within 1e-12 of the row's sum of |x_j w_j|); for the cost, the memory a prediction
allocates (tracemalloc: the whole model is 8 bytes a column and problem) and, marked slow,
the time per row at 2^14 and 2^22 columns.
"""
import itertools
import time
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

from onlinepgs import PGSClassifier, PGSRegressor
from onlinepgs._core import PGSState
from onlinepgs.model import proba_from_scores
from onlinepgs.pgs import PGSDivergedError


def _rows(n, d, density, seed):
    """n sparse rows of d columns, about density * d entries each (at least one), values
    of both signs."""
    rng = np.random.RandomState(seed)
    per_row = max(1, int(round(density * d)))
    cols = [np.unique(rng.randint(0, d, per_row)) for _ in range(n)]
    indptr = np.concatenate([[0], np.cumsum([len(c) for c in cols])])
    values = 3.0 * rng.rand(indptr[-1]) - 1.0
    return sp.csr_matrix((values, np.concatenate(cols), indptr), shape=(n, d))


def _dense_yardstick(x, coef, intercept):
    """Each row's scores in dense NumPy and the scale of their rounding (sum |x_j w_j|)."""
    xd = x.toarray()[:, :coef.shape[1]]
    return xd @ coef.T + intercept, np.abs(xd) @ np.abs(coef.T) + np.abs(intercept)


def _state_configs():
    for p, l1, radius, iterate, (K, multi_class), forget, intercept in itertools.product(
            (2.0, 1.5, 1.01), (0.0, 1e-3), (None, 1.0, "auto"),
            ("last", "average", "weighted", "weighted2", "random"),
            ((1, "ovr"), (3, "ovr"), (3, "multinomial")), (1.0, 0.99),
            ((True, 1.0), (True, 3.0), (False, 1.0))):
        yield dict(p=p, l1=l1, radius=radius, iterate=iterate, n_problems=K,
                   multiclass=K > 1, multi_class=multi_class, forget=forget,
                   fit_intercept=intercept[0], intercept_scaling=intercept[1])


def test_state_scores_are_the_read_out_models():
    """`PGSState.scores` against `weights()` times the rows, for every kind of read-out
    (p, l1, ball, iterate, K, forgetting, intercept) and awkward CSR (unsorted and repeated
    indices, empty rows, columns past the model, int64 indices)."""
    d, rng = 30, np.random.RandomState(0)
    X = _rows(80, d, 0.2, 1)
    # unsorted and repeated entries, an empty row: scored in the row's order, as scipy does
    odd = sp.csr_matrix((np.array([2.0, -1.0, 0.5, 4.0, -3.0]), np.array([7, 3, 7, 0, d - 1]),
                         np.array([0, 3, 3, 5])), shape=(3, d))
    wide = _rows(20, d + 10, 0.3, 2)  # columns past the model's weigh 0
    tested = 0
    for cfg in _state_configs():
        l1 = {"l1": cfg.pop("l1")} if cfg["l1"] else {}
        try:
            st = PGSState(sigma=1e-2, loss="logistic", n_features=d, seed=5, **l1, **cfg)
        except ValueError:  # a combination the core refuses (l1 with p < 2 averaged, ...)
            continue
        K = cfg["n_problems"]
        y = rng.randint(0, K, 80).astype(float) if K > 1 else np.where(rng.rand(80) > .5, 1., -1.)
        for start in (0, 40):  # t = 0 first: the zero model
            W = st.weights()
            icpt = W[0] * cfg["intercept_scaling"] if cfg["fit_intercept"] else np.zeros(K)
            for x in (X, odd, wide):
                scores = st.scores(x.data, x.indices, x.indptr)
                expected = np.asarray(x[:, :d] @ W[1:] if x.shape[1] > d else x @ W[1:]) + icpt
                np.testing.assert_array_equal(scores, expected, err_msg=str(cfg))
                dense, scale = _dense_yardstick(x, W[1:].T, icpt)
                assert (np.abs(scores - dense) <= 1e-12 * scale).all(), cfg
            as64 = st.scores(X.data, X.indices.astype(np.int64), X.indptr.astype(np.int64))
            np.testing.assert_array_equal(as64, st.scores(X.data, X.indices, X.indptr))
            st.run(X.data, X.indices, X.indptr, d, y[start:start + 40], np.ones(40),
                   np.arange(start, start + 40, dtype=np.int64) - start, True)
        tested += 1
    assert tested > 300  # the grid ran, not only its refusals
    assert st.scores(np.empty(0), np.empty(0, np.int32), np.zeros(1, np.int64)).shape == (0, K)


@pytest.mark.parametrize("cfg", [
    dict(radius="auto", iterate="weighted2"), dict(radius=1.0, iterate="random"),
    dict(p=1.5, iterate="average"), dict(p=1.01, radius=None, iterate="last"),
    dict(l1=1e-3, radius="auto", iterate="weighted2"), dict(l1=1e-3, p=1.5, iterate="last"),
    dict(n_problems=3, multiclass=True, radius="auto", iterate="weighted"),
    dict(geometry="adaptive", p=1.5, radius=None, iterate="average")])
def test_a_copy_is_the_state(cfg):
    """A copy (a race's fork) that copies only the coordinates reached is the state
    rebuilt from its whole arrays (`from_dict`), bit for bit, and trains on as it does."""
    width = 20000
    X = _rows(60, width, 0.001, 8)
    K = cfg.get("n_problems", 1)
    y = np.random.RandomState(9).randint(0, K, 60).astype(float) if K > 1 else \
        np.where(np.arange(60) % 3 == 0, 1.0, -1.0)
    st = PGSState(sigma=1e-2, n_features=width, seed=2, **cfg)
    assert st.keep_seen  # the states whose copies take the list's rows only

    def train(state, rows):
        state.run(X.data, X.indices, X.indptr, width, y, np.ones(60),
                  np.asarray(rows, dtype=np.int64), True)

    train(st, range(30))
    copy, whole = st.copy(), PGSState.from_dict(st.to_dict())
    assert st.n_tracked < width // 10  # the list held few coordinates
    for _ in range(2):
        saved, copied = whole.to_dict(), copy.to_dict()
        assert saved.keys() == copied.keys()
        for key, value in saved.items():
            if isinstance(value, np.ndarray):
                np.testing.assert_array_equal(copied[key], value, err_msg=key)
            else:
                assert copied[key] == value, key
        train(copy, range(30, 60))
        train(whole, range(30, 60))


def _estimator_configs():
    """(name, estimator, task) over the configurations a user can pick."""
    for p, l1, radius, iterate in itertools.product(
            (2.0, 1.5, 1.01), (0.0, 1e-3), (None, 1.0, "auto"),
            ("last", "average", "weighted", "weighted2", "random")):
        if l1 and (iterate == "random" or (p < 2.0 and iterate != "last")):
            continue  # refused combinations (PGSState)
        yield (f"p={p} l1={l1} radius={radius} {iterate}",
               PGSClassifier(p=p, l1=l1, radius=radius, iterate=iterate, sigma=1e-2),
               "binary")
    yield "auto", PGSClassifier(), "binary"
    yield "auto p=1.5 l1", PGSClassifier(p=1.5, l1=1e-3, iterate="last"), "binary"
    yield "auto random", PGSClassifier(iterate="random"), "binary"
    yield "no intercept", PGSClassifier(sigma=1e-2, fit_intercept=False), "binary"
    yield "intercept_scaling", PGSClassifier(sigma=1e-2, intercept_scaling=3.0), "binary"
    yield "forget", PGSClassifier(sigma=1e-2, forget=0.99), "binary"
    yield "batch_size", PGSClassifier(sigma=1e-2, batch_size=3), "binary"
    yield "hinge", PGSClassifier(loss="hinge", sigma=1e-2), "binary"
    for iterate, sigma in (("weighted2", 1e-2), ("last", 1e-2), ("weighted2", "auto")):
        yield f"ovr {iterate} {sigma}", PGSClassifier(sigma=sigma, iterate=iterate), "multi"
        yield (f"multinomial {iterate} {sigma}",
               PGSClassifier(sigma=sigma, iterate=iterate, multi_class="multinomial"), "multi")
        yield (f"crammer_singer {iterate} {sigma}",
               PGSClassifier(loss="hinge", sigma=sigma, iterate=iterate,
                             multi_class="crammer_singer"), "multi")
    yield "ovr l1 p=1.5", PGSClassifier(sigma=1e-2, p=1.5, l1=1e-3, iterate="last"), "multi"
    for iterate, sigma in (("weighted2", 1e-2), ("last", 1e-2), ("random", 1e-2),
                           ("weighted2", "auto")):
        yield f"regressor {iterate} {sigma}", PGSRegressor(sigma=sigma, iterate=iterate), "reg"
    yield "regressor p=1.5 l1", PGSRegressor(sigma=1e-2, p=1.5, l1=1e-3, iterate="last"), "reg"


@pytest.mark.parametrize("name, est, task", list(_estimator_configs()),
                         ids=[c[0] for c in _estimator_configs()])
def test_predictions_after_each_step_are_the_dense_models(name, est, task):
    """Test then train, row by row: each row's predictions (decision_function / predict,
    predict_proba, predict) before it trains are those of the dense model read out after
    them, ``x @ coef_.T + intercept_``: bit for bit with scipy's product, within 1e-12 of
    the dense NumPy one; and were made without reading that model out."""
    n, d = 40, 300
    X = _rows(n, d, 0.03, 3)
    rng = np.random.RandomState(4)
    if task == "reg":
        y = X @ rng.randn(d) + 0.1 * rng.randn(n)
    elif task == "multi":
        y = rng.randint(0, 3, n)
    else:
        y = (X @ rng.randn(d) > 0).astype(int)
    fit = {} if task == "reg" else {"classes": np.unique(y)}
    est.partial_fit(X[:5], y[:5], **fit)
    wider = _rows(1, d + 7, 0.05, 6)  # a sparse row past the model's columns
    for i in range(5, n):
        x = X[i:i + 1] if i % 9 else wider
        if task == "reg":
            scores = est.predict(x)[:, None]
        else:
            scores = est.decision_function(x).reshape(1, -1)
            labels = est.predict(x)
            proba = est.predict_proba(x) if est.loss == "logistic" else None
        assert "model" not in est._cache, name  # scored from the state, not a read-out
        coef, intercept = np.atleast_2d(est.coef_), est.intercept_
        expected = np.asarray(x[:, :d] @ coef.T) + intercept
        np.testing.assert_array_equal(scores, expected, err_msg=f"{name}, row {i}")
        dense, scale = _dense_yardstick(x, coef, intercept)
        assert (np.abs(scores - dense) <= 1e-12 * scale).all(), (name, i)
        if task != "reg":
            model = est.model_
            np.testing.assert_array_equal(labels, model.predict(x))
            if proba is not None:
                np.testing.assert_array_equal(
                    proba, proba_from_scores(expected.ravel() if expected.shape[1] == 1
                                             else expected, model.multi_class))
        est.partial_fit(X[i:i + 1], y[i:i + 1])


@pytest.mark.parametrize("make", [
    lambda: PGSClassifier(sigma=1e-3),
    lambda: PGSClassifier(sigma=1e-3, iterate="last", radius=None),
    lambda: PGSClassifier(sigma=1e-3, p=1.5),
    lambda: PGSClassifier(sigma=1e-3, l1=1e-4),
    lambda: PGSClassifier(sigma=1e-3, p=1.5, l1=1e-4, iterate="last"),
    lambda: PGSClassifier(sigma=1e-3, iterate="random"),
    lambda: PGSClassifier(),  # sigma="auto": the race's leader
    lambda: PGSClassifier(sigma=1e-3, multi_class="multinomial"),
    lambda: PGSClassifier(loss="hinge", sigma=1e-3, multi_class="crammer_singer"),
    lambda: PGSRegressor(sigma=1e-3),
], ids=["weighted2", "last", "p=1.5", "l1", "l1 p=1.5", "random", "auto", "multinomial",
        "crammer_singer", "regressor"])
def test_predicting_after_learning_allocates_nothing_of_the_width(make):
    """A prediction between partial_fit calls never materializes the model: at 2^20
    columns it allocates less than a byte a column (the whole model is 8 bytes a column
    and problem, 2 or 3 times over while it is read out and copied)."""
    width, rng = 2**20, np.random.RandomState(0)
    X = _rows(40, width, 2e-5, 7)
    est = make()
    multi = getattr(est, "multi_class", "ovr") != "ovr"
    y = rng.randint(0, 3 if multi else 2, 40).astype(float) if est._classifier else rng.randn(40)
    fit = {"classes": np.unique(y)} if est._classifier else {}
    est.partial_fit(X[:20], y[:20], **fit)
    predict = (est.predict_proba if getattr(est, "loss", "") == "logistic"
               else est.decision_function if est._classifier else est.predict)
    peaks = []
    for i in range(20, 40):
        est.partial_fit(X[i - 1:i], y[i - 1:i])
        x = X[i:i + 1]
        tracemalloc.start()
        predict(x)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert max(peaks) < width, peaks


def test_a_diverged_state_is_not_read_lazily():
    """After a divergence that left weights not finite, a sparse prediction says the
    model is not usable (as coef_ does), even where its row reads finite weights only."""
    rng = np.random.RandomState(0)
    x0 = rng.randn(200)
    X = sp.csr_matrix((x0, np.zeros(200, np.int32), np.arange(201)), shape=(200, 4))
    reg = PGSRegressor(radius=None, sigma=1e-8, fit_intercept=False)
    with pytest.raises(PGSDivergedError, match="not usable"):
        reg.partial_fit(X, 3.0 * x0)
    W = reg._state.weights()
    assert not np.isfinite(W[1]).all() and np.isfinite(W[4]).all()  # column 0 overflowed
    with pytest.raises(PGSDivergedError, match="the model is not usable"):
        reg.predict(sp.csr_matrix(([1.0], [3], [0, 1]), shape=(1, 4)))  # reads column 3


def test_a_score_that_overflows_is_the_models():
    """A score beyond the double range from finite weights is the model's (inf), as when
    the model is read out: no error."""
    X = sp.csr_matrix(np.array([[1.0, 1.0], [1.0, 1.0], [-1.0, -1.0]]))
    est = PGSClassifier(sigma=1e-2, iterate="last").partial_fit(X, [1, 1, 0], classes=[0, 1])
    huge = sp.csr_matrix(np.array([[1.7e308, 1.7e308]]))
    score = est.decision_function(huge)
    assert score[0] == np.inf
    np.testing.assert_array_equal(score, est.model_.decision_function(huge))


def _seconds_per_row(width, rows=200):
    """Test then train at `width` columns (sigma fixed, the default iterate): the least of
    three runs of predict_proba then partial_fit on each of `rows` one-row CSR inputs."""
    rng = np.random.RandomState(1)
    idx = [np.unique(rng.randint(0, width, 20)).astype(np.int32) for _ in range(rows + 20)]
    X = [sp.csr_matrix((rng.rand(len(i)), i, [0, len(i)]), shape=(1, width)) for i in idx]
    y = rng.randint(0, 2, rows + 20)
    best = np.inf
    for _ in range(3):
        est = PGSClassifier(sigma=1e-3, random_state=0)
        est.partial_fit(sp.vstack(X[:20]), y[:20], classes=[0, 1])
        start = time.perf_counter()
        for x, label in zip(X[20:], y[20:]):
            est.predict_proba(x)
            est.partial_fit(x, [label])
        best = min(best, (time.perf_counter() - start) / rows)
    return best


@pytest.mark.slow
def test_test_then_train_time_does_not_grow_with_the_width():
    """Seconds per row at 2^22 columns within 3x those at 2^14 (it was about 50x: every
    prediction after a step read out the whole model)."""
    narrow = _seconds_per_row(2**14)
    wide = _seconds_per_row(2**22)
    narrow = min(narrow, _seconds_per_row(2**14))  # a quieter moment, if any
    assert wide < 3.0 * narrow, (wide, narrow)
