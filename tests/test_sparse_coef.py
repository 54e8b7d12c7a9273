"""Sparse models (issue 36): weights held sparse in `LinearModel`, scikit-learn's
sparsify/densify on the estimators, sparse weights in model files, and the command's
info/predict on them."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import SGDClassifier, SGDRegressor

from onlinepgs import PGSClassifier, PGSRegressor, SDCAClassifier, SDCARegressor
from onlinepgs import model_io
from onlinepgs._weights import SparseWeights
from onlinepgs.model import LinearModel
from onlinepgs.model_io import ModelFileError, load_learner, load_model, save_model
from onlinepgs.sdca import SDCAClassifierLearner
from test_cli import run
from test_cli_imports import _run as run_reporting_modules
from test_model_io import crafted

U = 2.0**-53  # the unit roundoff of float64


def write_svmlight(path, X, y):
    """X's non-zeros in svmlight text, exactly (17 significant digits), 1-based."""
    with open(path, "w") as f:
        for row, label in zip(X, y):
            cols = np.flatnonzero(row)
            f.write(f"{label} " + " ".join(f"{c + 1}:{row[c]:.17g}" for c in cols) + "\n")


def _hand_built(K=3, d=40, seed=0):
    """A model with known zeros: a third of each row's weights non-zero."""
    rng = np.random.default_rng(seed)
    coef = rng.standard_normal((K, d)) * (rng.random((K, d)) < 0.3)
    classes = None if K == 1 else np.arange(K if K > 1 else 2)
    return coef, LinearModel(coef, rng.standard_normal(K), classes=classes, loss="logistic")


def _rounding_bound(X, coef):
    """Per score: 2 n u sum_j |x_j w_j| (n the row of weights' non-zeros), the bound of
    `onlinepgs._weights`: the two sums' errors, each within n u sum |x_j w_j|."""
    n = np.count_nonzero(coef, axis=1)
    return 2 * n * U * (np.abs(X) @ np.abs(coef).T) + 1e-300


# ---- the model -----------------------------------------------------------------------
@pytest.mark.parametrize("K", [1, 3])
def test_a_hand_built_sparse_model_predicts_what_the_dense_one_does(K):
    coef, dense = _hand_built(K)
    if K == 1:
        dense = LinearModel(coef, [0.25], classes=["a", "b"], loss="logistic")
    sparse = dense.sparse()
    assert sparse.is_sparse and not dense.is_sparse and sparse.dense() is not sparse
    assert sparse.n_nonzero == dense.n_nonzero == np.count_nonzero(coef)
    assert sparse.density == pytest.approx(np.count_nonzero(coef) / coef.size)
    np.testing.assert_array_equal(sparse.coef, coef)  # densified on request, exactly
    rng = np.random.default_rng(1)
    X = rng.standard_normal((50, coef.shape[1])) * (rng.random((50, coef.shape[1])) < 0.4)
    # sparse input (scipy's CSR): the same sums in the same order, bit for bit
    for Xs in (sp.csr_matrix(X), sp.csr_matrix(X[:, :25]), sp.csr_matrix(np.hstack([X, X]))):
        np.testing.assert_array_equal(sparse.decision_function(Xs), dense.decision_function(Xs))
    # dense input: BLAS against a product over the non-zeros, within the stated bound
    exact = X @ coef.T + dense.intercept  # the reference, a plain NumPy product
    got = sparse.decision_function(X).reshape(exact.shape)
    bound = _rounding_bound(X, coef) + 2 * U * np.abs(exact)  # + the intercept's add
    assert (np.abs(got - exact) <= bound).all()
    np.testing.assert_array_equal(sparse.predict(X), dense.predict(X))
    np.testing.assert_allclose(sparse.predict_proba(X), dense.predict_proba(X), rtol=1e-12)
    # records (dicts) go through the same columns
    records = [{j: v for j, v in enumerate(row) if v} for row in X[:5]]
    np.testing.assert_array_equal(sparse.decision_function(records),
                                  dense.decision_function(records))


def test_a_model_is_built_from_scipy_sparse_weights_without_their_zeros():
    coef = sp.csr_matrix(np.array([[0.0, 2.0, 0.0, -1.0]]))
    coef.data[1] = 0.0  # an explicit zero
    model = LinearModel(coef, classes=[0, 1])
    assert model.is_sparse and model.n_nonzero == 1 and model.coef_sparse.nnz == 1
    np.testing.assert_array_equal(model.coef, [[0.0, 2.0, 0.0, 0.0]])
    assert model.n_features == model.n_features_in == 4


@pytest.mark.parametrize("arrays, message", [
    (([0, 2], [1, 5], [1.0, 2.0]), r"index 5 \(entry 1\) is out of range for 4 features"),
    (([0, 2], [-1, 2], [1.0, 2.0]), "index -1 .* out of range"),
    (([0, 2], [2, 1], [1.0, 2.0]), r"row 0 are not strictly increasing \(entry 1: 1 after 2"),
    (([0, 2], [1, 1], [1.0, 2.0]), "not strictly increasing"),
    (([0, 2], [1, 2], [1.0]), "2 indices but 1 values"),
    (([0, 1, 2], [1, 2], [1.0, 2.0]), "indptr has 3 entries, expected 2"),
    (([0, 3], [1, 2], [1.0, 2.0]), "not non-decreasing from 0 to 2"),
    (([1, 2], [1, 2], [1.0, 2.0]), "not non-decreasing from 0 to 2"),
    (([0, 2], [1, 2], [1.0, np.inf]), r"weight inf \(entry 1\) is not finite"),
    (([0, 2], [1.0, 2.0], [1.0, 2.0]), "indices is not a 1-d integer array"),
])
def test_damaged_sparse_weights_are_refused(arrays, message):
    with pytest.raises(ValueError, match=message):
        SparseWeights(*(np.asarray(a) for a in arrays), (1, 4))


def test_a_row_may_start_below_the_previous_rows_end():
    W = SparseWeights([0, 2, 3], [1, 3, 0], [1.0, 2.0, 3.0], (2, 4))
    np.testing.assert_array_equal(W.toarray(), [[0, 1, 0, 2], [3, 0, 0, 0]])


# ---- the estimators: scikit-learn's sparsify / densify ----------------------------------
def _l1_data(seed=0, n=300, d=60, K=2):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, d)
    y = (X[:, 0] + X[:, 1] > 0).astype(int) if K == 2 else np.argmax(X[:, :K], axis=1)
    return X, y


@pytest.mark.parametrize("K", [2, 3])
def test_a_trained_sdca_l1_model_predicts_the_same_sparsified(K):
    X, y = _l1_data(K=K)
    clf = SDCAClassifier(sigma=1e-3, l1=0.05, random_state=0).fit(X, y)
    dense_coef = clf.coef_
    # l1 makes exact zeros: the count is NumPy's on the dense coef_
    assert 0 < clf.n_nonzero_ == np.count_nonzero(dense_coef) < dense_coef.size / 4
    before = {name: getattr(clf, name)(X) for name in ("decision_function", "predict",
                                                       "predict_proba")}
    score = clf.score(X, y)
    assert clf.sparsify() is clf
    assert sp.issparse(clf.coef_) and clf.coef_.format == "csr"
    assert clf.coef_.shape == dense_coef.shape and clf.coef_.nnz == clf.n_nonzero_
    np.testing.assert_array_equal(clf.coef_.toarray(), dense_coef)
    assert clf._state.is_sparse  # SDCA's model is its state: now held sparse
    assert isinstance(clf.intercept_, np.ndarray)
    Xs = sp.csr_matrix(X)
    for name, value in before.items():
        got = getattr(clf, name)(X)
        if name == "predict":
            np.testing.assert_array_equal(got, value)
        else:  # to rounding (dense X); bit for bit on sparse X
            np.testing.assert_allclose(got, value, rtol=1e-12, atol=1e-14)
            np.testing.assert_array_equal(getattr(clf, name)(Xs),
                                          getattr(clf.model_.dense(), name)(Xs))
    assert clf.score(X, y) == score
    assert clf.densify() is clf and isinstance(clf.coef_, np.ndarray)
    np.testing.assert_array_equal(clf.coef_, dense_coef)


def _twins(sk_cls, ours_cls, X, y, **params):
    """A fitted SGD estimator carrying our estimator's coef_ and intercept_."""
    ours = ours_cls(**params).fit(X, y)
    sgd = sk_cls(random_state=0, max_iter=5, tol=None).fit(X, y)
    sgd.coef_, sgd.intercept_ = ours.coef_, ours.intercept_
    return sgd, ours


@pytest.mark.parametrize("K", [2, 3])
def test_sparsify_and_densify_mean_what_scikit_learns_mean(K):
    """The same coef_ in SGDClassifier and ours: sparsify gives the same type, shape and
    entries, densify the same array; both return self, both refuse an unfitted
    estimator, and fit gives a dense coef_ again."""
    X, y = _l1_data(K=K)
    sgd, ours = _twins(SGDClassifier, SDCAClassifier, X, y, sigma=1e-3, l1=0.05,
                       random_state=0)
    assert sgd.sparsify() is sgd and ours.sparsify() is ours
    assert type(ours.coef_) is type(sgd.coef_) and ours.coef_.shape == sgd.coef_.shape
    assert ours.coef_.nnz == sgd.coef_.nnz
    np.testing.assert_array_equal(ours.coef_.toarray(), sgd.coef_.toarray())
    # both to rounding: a dense X times sparse weights adds in another order
    np.testing.assert_allclose(ours.decision_function(X), sgd.decision_function(X),
                               rtol=1e-12, atol=1e-14)
    sgd.densify(), ours.densify()
    assert type(ours.coef_) is type(sgd.coef_) and ours.coef_.shape == sgd.coef_.shape
    np.testing.assert_array_equal(ours.coef_, sgd.coef_)
    assert sgd.densify() is sgd and ours.densify() is ours  # a no-op on dense coef_
    for est in (sgd, ours):
        est.sparsify().fit(X, y)
        assert isinstance(est.coef_, np.ndarray)  # fit: a new model, dense
    for est in (SGDClassifier(), SDCAClassifier(), PGSClassifier()):
        for method in ("sparsify", "densify"):
            with pytest.raises(NotFittedError):
                getattr(est, method)()


def test_a_regressors_sparse_coef_is_one_row():
    """scipy's matrices are 2-d: the regressor's sparse coef_ has one row (scikit-learn's
    SGDRegressor gives a 1-d sparse array there); its entries and densify are
    scikit-learn's, its predictions scikit-learn's up to rounding (the two sum the
    products of a row in different orders: scipy 1.17's sparse products differ from
    scikit-learn's in the last bit)."""
    rng = np.random.RandomState(0)
    X = rng.randn(200, 30)
    y = X[:, 0] - 2 * X[:, 1]
    sgd, ours = _twins(SGDRegressor, SDCARegressor, X, y, sigma=1e-3, l1=0.05,
                       loss="squared", random_state=0)
    sgd.sparsify(), ours.sparsify()
    assert sp.issparse(ours.coef_) and ours.coef_.shape == (1, 30)
    np.testing.assert_array_equal(ours.coef_.toarray().ravel(), sgd.coef_.toarray().ravel())
    np.testing.assert_allclose(ours.predict(X), sgd.predict(X), rtol=1e-12, atol=1e-14)
    ours.densify(), sgd.densify()
    np.testing.assert_array_equal(ours.coef_, sgd.coef_)
    assert ours.coef_.shape == (30,)


@pytest.mark.parametrize("cls", [PGSClassifier, PGSRegressor])
def test_partial_fit_goes_on_after_sparsify(cls):
    """scikit-learn's partial_fit fails after sparsify (until densify); ours trains the
    solver state as a never-sparsified twin does, coef_ staying sparse."""
    X, y = _l1_data()
    y = y if cls is PGSClassifier else X[:, 0]
    extra = {"classes": [0, 1]} if cls is PGSClassifier else {}
    a = cls(sigma=1e-2, random_state=0).partial_fit(X[:100], y[:100], **extra)
    b = cls(sigma=1e-2, random_state=0).partial_fit(X[:100], y[:100], **extra)
    a.sparsify()
    a.partial_fit(X[100:], y[100:]), b.partial_fit(X[100:], y[100:])
    assert sp.issparse(a.coef_)
    np.testing.assert_array_equal(a.coef_.toarray().reshape(b.coef_.shape), b.coef_)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    assert a.n_nonzero_ == np.count_nonzero(b.coef_)


# ---- model files ---------------------------------------------------------------------
def _sdca_l1(K=2, l1=0.05, d=400, **kw):
    """An SDCA l1 model of few non-zeros among 400 features (a few weights make dense
    storage the smaller: each array entry of a file costs ~250 bytes)."""
    X, y = _l1_data(K=K, d=d, **kw)
    return SDCAClassifierLearner(sigma=1e-3, l1=l1, random_state=0).fit(X, y), X


def _entries(path):
    return [entry["name"] for entry in model_io.read_header(path)["arrays"]]


@pytest.mark.parametrize("K", [2, 3])
def test_sparse_weights_make_smaller_files_that_round_trip_bit_for_bit(tmp_path, K):
    est, X = _sdca_l1(K=K)
    sparse_path, dense_path = tmp_path / "s.pgs", tmp_path / "d.pgs"
    save_model(est, sparse_path)
    assert "state/coef_data" in _entries(sparse_path) and "state/coef" not in _entries(
        sparse_path)
    # the same model with no zero weight: stored dense, as before
    est_dense, _ = _sdca_l1(K=K, l1=0.0)
    save_model(est_dense, dense_path)
    assert "state/coef" in _entries(dense_path)
    assert os.path.getsize(sparse_path) < os.path.getsize(dense_path)
    loaded = load_learner(sparse_path)
    assert loaded.model_.is_sparse
    assert loaded.model_.coef_sparse.equals(est.model_.coef_sparse)
    np.testing.assert_array_equal(loaded.model_.coef, est.model_.coef)
    np.testing.assert_array_equal(loaded.decision_function(sp.csr_matrix(X)),
                                  est.decision_function(sp.csr_matrix(X)))
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))
    again = tmp_path / "again.pgs"
    save_model(load_model(sparse_path), again)
    assert again.read_bytes() == sparse_path.read_bytes()


def test_the_file_is_the_smaller_of_the_two(tmp_path):
    """At each density the file holds the weights the smaller way: sparse up to about
    2/3 of non-zeros (12 bytes each against 8 a weight), dense above."""
    est, _ = _sdca_l1(d=400)
    sizes = {}
    for density in (0.05, 0.5, 0.8, 1.0):
        rng = np.random.default_rng(0)
        coef = rng.standard_normal((1, 400)) * (rng.random((1, 400)) < density)
        est._state = LinearModel(coef, est._state.intercept_weight, classes=est.classes_,
                                 loss="logistic", sigma=est.sigma, l1=est.l1, solver="sdca")
        path = tmp_path / f"{density}.pgs"
        save_model(est, path)
        sizes[density] = ("state/coef" not in _entries(path), os.path.getsize(path))
        np.testing.assert_array_equal(load_learner(path).model_.coef, coef)
    assert [s for s, _ in sizes.values()] == [True, True, False, False]
    assert sizes[0.05][1] < sizes[0.5][1] < sizes[0.8][1] == sizes[1.0][1]


def _edit(name, change):
    """A `crafted` mutation changing one array (and its entry in the table)."""
    def mutate(header, arrays):
        arrays[name] = change(arrays[name].copy())
        for entry in header["arrays"]:
            if entry["name"] == name:
                entry["dtype"], entry["shape"] = arrays[name].dtype.str, list(arrays[name].shape)
    return mutate


def _state_edit(change):
    def mutate(header, arrays):
        change(header["state"])
    return mutate


def _set(a, at, value):
    a[at] = value
    return a


@pytest.mark.parametrize("mutate, message", [
    (_edit("state/coef_indices", lambda a: _set(a, -1, 400)), "index 400 .* out of range "
                                                               "for 400 features"),
    (_edit("state/coef_indices", lambda a: a[::-1].copy()), "not strictly increasing"),
    (_edit("state/coef_indices", lambda a: a[:-1]), "indices but"),
    (_edit("state/coef_data", lambda a: a[:-1]), "values"),
    (_edit("state/coef_indptr", lambda a: _set(a, -1, a[-1] + 1)), "indptr is not"),
    (_edit("state/coef_indptr", lambda a: a[:-1]), "indptr has"),
    (_edit("state/coef_data", lambda a: a.astype(np.float32)), "expected float64"),
    (_state_edit(lambda s: s["coef"].update(shape=[1, 10**12])),  # nothing that size made
     "n_features_in_=400 but coef has 1000000000000 features"),
    (_state_edit(lambda s: s["coef"].update(shape=[2, 400])), "indptr has"),
    (_state_edit(lambda s: s.update(coef="sparse")), "is not {\"storage\""),
    (_state_edit(lambda s: s.pop("coef")), "missing array state/coef"),
])
def test_damaged_sparse_files_are_refused(tmp_path, mutate, message):
    est, _ = _sdca_l1()
    path = tmp_path / "m.pgs"
    save_model(est, path)
    bad = crafted(tmp_path, path, mutate)  # the checksum recomputed: only the checks catch it
    for loader in (load_model, load_learner):
        with pytest.raises(ModelFileError, match=message) as info:
            loader(bad)
        assert str(bad) in str(info.value) and "\n" not in str(info.value)


# ---- the command ---------------------------------------------------------------------
def _sparse_file(tmp_path):
    est, X = _sdca_l1()
    path = tmp_path / "s.pgs"
    save_model(est, path)
    data = tmp_path / "d.svm"
    write_svmlight(data, X, est.predict(X))
    return est, X, path, data


def test_info_says_the_non_zero_weights(tmp_path):
    est, X, path, _ = _sparse_file(tmp_path)
    n = est.model_.n_nonzero
    assert 0 < n < 40
    done = run("info", path)
    assert done.returncode == 0, done.stderr
    line = f"weights: {n:,} non-zero of 400 ({100 * n / 400:.3g}%)"
    assert line in done.stdout.decode().splitlines()
    done = run("info", path, "--json")
    assert json.loads(done.stdout)["weights"] == {"n_nonzero": n, "n_weights": 400}
    # a PGS model's count is in its header; a dense SDCA file's comes from its array
    pgs = PGSClassifier(sigma=1e-2, random_state=0).fit(X, est.predict(X))
    dense = SDCAClassifierLearner(sigma=1e-3, random_state=0).fit(X, est.predict(X))
    for model, name in ((pgs, "p.pgs"), (dense, "d.pgs")):
        save_model(model, tmp_path / name)
        done = run("info", tmp_path / name)
        count = np.count_nonzero(model.coef_)
        assert f"weights: {count:,} non-zero of 400 (100%)" in done.stdout.decode()


def test_the_train_summary_says_the_non_zero_weights(tmp_path):
    X, y = _l1_data()
    data = tmp_path / "d.svm"
    write_svmlight(data, X, np.where(y == 1, 1, -1))
    for solver in ("pgs", "sdca"):
        done = run("train", data, "-o", tmp_path / "m.pgs", "--solver", solver)
        assert done.returncode == 0, done.stderr
        model = load_learner(tmp_path / "m.pgs")
        n = np.count_nonzero(model.coef_)
        assert f"weights = {n:,} non-zero of 60 (" in done.stderr.decode()


def test_predict_eval_and_gap_read_sparse_files_without_scipy(tmp_path):
    est, X, path, data = _sparse_file(tmp_path)
    out = tmp_path / "p.txt"
    for argv in (["predict", str(path), str(data), "-o", str(out)], ["eval", str(path),
                                                                    str(data)],
                 ["gap", str(path), str(data)], ["info", str(path)]):
        report, err = run_reporting_modules(argv)
        assert report["code"] == 0, (argv, err)
        heavy = [m for m in report["modules"] if m.split(".")[0] in ("scipy", "sklearn")]
        assert heavy == [], (argv[0], heavy)
    predicted = np.loadtxt(out, comments="#")
    np.testing.assert_array_equal(predicted, est.predict(X))


@pytest.mark.slow
def test_predict_and_info_of_a_wide_sparse_file_stay_small(tmp_path):
    """A 2**22 x 20 model with 1% non-zeros: 671 MB dense, 10 MB in its file, and
    predict/info on it stay far below the dense size (peak RSS of the process)."""
    rng = np.random.default_rng(0)
    K, d = 20, 2**22
    est, _ = _sdca_l1(K=K, n=400, d=30)
    nnz = d // 100
    indices = np.sort(np.concatenate([rng.choice(d, nnz, replace=False) for _ in range(K)])
                      .reshape(K, nnz), axis=1)
    W = SparseWeights(np.arange(K + 1) * nnz, indices.ravel(), rng.standard_normal(K * nnz),
                      (K, d))
    est._state = LinearModel(W, est._state.intercept_weight, classes=est.classes_,
                             loss="logistic", sigma=est.sigma, l1=est.l1, solver="sdca")
    est.n_features_in_ = d
    path, data = tmp_path / "w.pgs", tmp_path / "d.svm"
    save_model(est, path)
    assert os.path.getsize(path) < 12 * K * nnz + 2**18  # + the attributes
    lines = [f"{i % K} " + " ".join(f"{j + 1}:1" for j in sorted(rng.choice(d, 20, False)))
             for i in range(200)]
    data.write_text("\n".join(lines) + "\n")
    # the peak resident size of the process's own memory (VmHWM: ru_maxrss would count
    # the forked pytest's pages too, kept across exec)
    peak = ("import re, runpy, sys; sys.argv = ['onlinepgs'] + sys.argv[1:]\n"
            "try:\n    runpy.run_module('onlinepgs.cli', run_name='__main__')\n"
            "finally:\n    print(re.search(r'VmHWM:\\s*(\\d+)', open('/proc/self/status')"
            ".read()).group(1), file=sys.stderr)")
    for argv in (["predict", path, data, "-o", tmp_path / "p.txt"], ["info", path]):
        done = subprocess.run([sys.executable, "-c", peak, *map(str, argv)],
                              capture_output=True, text=True, timeout=300)
        assert "Traceback" not in done.stderr, done.stderr
        kib = int(done.stderr.strip().splitlines()[-1])
        assert kib * 1024 < 8 * K * d / 3, (argv[0], kib)  # a third of the dense weights


@pytest.mark.parametrize("n", [1000, 2**23 + 5])  # array.count's slices; numpy past 64 MiB
def test_info_counts_a_dense_arrays_zeros_either_way(n):
    from onlinepgs.model_io.weights import count_plain

    rng = np.random.default_rng(0)
    coef = rng.standard_normal(n) * (rng.random(n) < 0.1)
    coef[:3] = [-0.0, 0.0, 5e-324]  # a negative zero is zero; the least subnormal is not
    raw = {"state": {"solver": "sdca"}}
    kept = {"state/coef": ("<f8", (1, n), coef.astype("<f8").tobytes())}
    assert count_plain(raw, kept) == (np.count_nonzero(coef), n)
