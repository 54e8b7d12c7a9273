"""class_weight on the classifiers and --class-weight on ``train`` (issue 35, item 5).

Yardsticks: the same weights given by hand as sample_weight (bit for bit), the stream's
"balanced" estimate computed row by row in plain Python, scikit-learn's
compute_class_weight, and the minority class's recall on held-out rows.
"""
import numpy as np
import pytest
import scipy.sparse as sp

from onlinepgs import PGSClassifier, SDCAClassifier, load_model, save_model
from onlinepgs._checks import InvalidParameterError
from onlinepgs._class_weight import stream_weights
from onlinepgs.cli import main
from onlinepgs.model_io import load_learner, read_header
from onlinepgs.pgs import PGSClassifierLearner
from onlinepgs.sdca import SDCAClassifierLearner


def imbalanced(n=2000, n_features=20, positives=0.05, seed=0, n_classes=2):
    """Sparse rows whose class depends on a linear score; the top `positives` share of
    scores is class 1 (for 3 classes, class 2 the next share)."""
    rng = np.random.RandomState(seed)
    X = sp.random(n, n_features, density=0.3, format="csr", random_state=rng)
    X.data = rng.randn(X.nnz)
    score = X @ rng.randn(n_features) + 0.3 * rng.randn(n)
    cut = np.quantile(score, 1 - positives)
    y = (score > cut).astype(np.int64)
    if n_classes == 3:
        y[(score > np.quantile(score, 1 - 3 * positives)) & (y == 0)] = 2
    return X, y


def plain_balanced(y, classes, sw=None):
    """The stream's "balanced" weights, one row at a time in plain Python: row i weighs
    n_i / (K * n_c), n_i the sample weights of rows 0..i, n_c those of its class's
    (counts of rows for unit weights)."""
    sw = np.ones(len(y)) if sw is None else sw
    counts, n, out = dict.fromkeys(classes.tolist(), 0.0), 0.0, []
    for label, w in zip(y.tolist(), sw.tolist()):
        n += w
        counts[label] += w
        out.append(n / (len(classes) * counts[label]))
    return np.array(out), counts


def same_model(a, b):
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)


def same_stats(a, b):
    sa, sb = a.online_stats_, b.online_stats_
    assert sa.keys() == sb.keys()
    for key in sa:
        np.testing.assert_array_equal(sa[key], sb[key], err_msg=key)


# ---- a dict -------------------------------------------------------------------------
@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("sigma", [1e-3, "auto"])
def test_dict_equals_the_same_sample_weights_given_by_hand(n_classes, sigma):
    X, y = imbalanced(n=600, n_classes=n_classes)
    cw = {1: 4.0, 0: 0.5}  # a class the dict does not name (2) weighs 1
    sw = np.random.RandomState(1).rand(600) * 2
    by_hand = sw * np.array([cw.get(c, 1.0) for c in y.tolist()])
    params = dict(sigma=sigma, random_state=0)
    # partial_fit (the stream) and fit (epochs, shuffled), learner and estimator
    for cls in (PGSClassifierLearner, PGSClassifier):
        a = cls(class_weight=cw, **params).partial_fit(X, y, classes=np.unique(y),
                                                      sample_weight=sw)
        b = cls(**params).partial_fit(X, y, classes=np.unique(y), sample_weight=by_hand)
        same_model(a, b)
        same_stats(a, b)
        same_model(cls(class_weight=cw, max_epochs=2, **params).fit(X, y, sample_weight=sw),
                   cls(max_epochs=2, **params).fit(X, y, sample_weight=by_hand))


def test_sdca_dict_equals_sample_weights():
    X, y = imbalanced(n=400)
    cw = {0: 1.0, 1: 7.5}
    a = SDCAClassifierLearner(class_weight=cw, sigma=1e-3, random_state=0).fit(X, y)
    b = SDCAClassifierLearner(sigma=1e-3, random_state=0).fit(
        X, y, sample_weight=np.where(y == 1, 7.5, 1.0))
    same_model(a, b)
    assert a.duality_gap_ == b.duality_gap_


def test_string_labels_and_float_keys():
    X, y = imbalanced(n=300)
    labels = np.array(["neg", "pos"])[y]
    a = PGSClassifierLearner(class_weight={"pos": 3.0}, sigma=1e-3).partial_fit(
        X, labels, classes=["neg", "pos"])
    b = PGSClassifierLearner(sigma=1e-3).partial_fit(
        X, labels, classes=["neg", "pos"], sample_weight=np.where(y == 1, 3.0, 1.0))
    same_model(a, b)
    # labels read from a file are floats: the key 1 names the class 1.0, -1.0 the class -1
    yf = np.where(y == 1, 1.0, -1.0)
    a = PGSClassifierLearner(class_weight={1: 3.0, -1.0: 0.5}, sigma=1e-3).partial_fit(
        X, yf, classes=[-1.0, 1.0])
    b = PGSClassifierLearner(sigma=1e-3).partial_fit(
        X, yf, classes=[-1.0, 1.0], sample_weight=np.where(y == 1, 3.0, 0.5))
    same_model(a, b)


@pytest.mark.parametrize("cls", [PGSClassifierLearner, SDCAClassifierLearner, PGSClassifier,
                                 SDCAClassifier])
def test_bad_class_weights_are_clear_errors(cls):
    X, y = imbalanced(n=100)
    with pytest.raises(ValueError, match=r"names the class 3, which is not one of the "
                                         r"classes \[0, 1\]"):
        cls(class_weight={1: 2.0, 3: 1.0}).fit(X, y)
    for bad in (-1.0, float("nan"), True, "2"):
        with pytest.raises(ValueError, match=r"the class 1 has the weight .* in class_weight; a class "
                                             r"weight is a finite number >= 0"):
            cls(class_weight={1: bad}).fit(X, y)
    with pytest.raises(InvalidParameterError if cls.__module__.startswith("onlinepgs")
                       and "Learner" in cls.__name__ else ValueError,
                       match="'class_weight' parameter .* must be"):
        cls(class_weight="balance").fit(X, y)
    with pytest.raises(ValueError, match="times class_weight is zero for every row"):
        cls(class_weight={0: 0.0, 1: 0.0}).fit(X, y)


def test_a_failed_call_leaves_the_counts_as_they_were():
    X, y = imbalanced(n=200)
    clf = PGSClassifierLearner(class_weight="balanced", sigma=1e-3).partial_fit(
        X, y, classes=[0, 1])
    counts = clf.class_counts_.copy()
    with pytest.raises(ValueError):
        clf.partial_fit(X, np.where(y == 1, 5, 0))  # a label outside the classes
    with pytest.raises(ValueError, match="not one of the classes"):
        clf.set_params(class_weight={7: 1.0}).partial_fit(X, y)
    np.testing.assert_array_equal(clf.class_counts_, counts)


# ---- "balanced" on a stream ---------------------------------------------------------------
@pytest.mark.parametrize("weighted", [False, True])
def test_stream_weights_are_the_plain_row_by_row_estimate(weighted):
    rng = np.random.RandomState(0)
    y = rng.choice(4, size=5000, p=[0.7, 0.2, 0.09, 0.01])
    sw = rng.rand(5000) * 3 if weighted else np.ones(5000)
    expected, counts = plain_balanced(y, np.arange(4), sw)
    got, state = [], (np.zeros(4), 0.0)
    for a, b in [(0, 1), (1, 1), (1, 1234), (1234, 5000)]:
        w, *state = stream_weights(y[a:b], sw[a:b], *state, 4)
        got.append(w)
    np.testing.assert_array_equal(np.concatenate(got), expected)
    np.testing.assert_array_equal(state[0], [counts[c] for c in range(4)])


def test_a_class_that_weighed_nothing_yet_keeps_weight_1():
    w, counts, total = stream_weights(np.array([0, 1, 1]), np.array([0.0, 0.0, 2.0]),
                                      np.zeros(2), 0.0, 2)
    np.testing.assert_array_equal(w, [1.0, 1.0, 2.0 / (2 * 2.0)])
    np.testing.assert_array_equal(counts, [0.0, 2.0])


@pytest.mark.parametrize("n_classes", [2, 3])
def test_balanced_equals_the_plain_numpy_weights_as_sample_weight(n_classes):
    X, y = imbalanced(n=800, n_classes=n_classes)
    classes = np.unique(y)
    sw = np.random.RandomState(2).rand(800)
    by_hand, counts = plain_balanced(y, classes, sw)
    a = PGSClassifierLearner(class_weight="balanced", sigma=1e-3, random_state=0)
    a.partial_fit(X, y, classes=classes, sample_weight=sw)
    b = PGSClassifierLearner(sigma=1e-3, random_state=0)
    b.partial_fit(X, y, classes=classes, sample_weight=sw * by_hand)
    same_model(a, b)
    np.testing.assert_array_equal(a.class_counts_, [counts[c] for c in classes.tolist()])


@pytest.mark.parametrize("sigma", [1e-3, "auto"])
def test_balanced_does_not_depend_on_how_the_stream_is_cut(sigma):
    X, y = imbalanced(n=500, n_classes=3)
    classes = np.unique(y)

    def trained(cuts):
        clf = PGSClassifierLearner(class_weight="balanced", sigma=sigma, random_state=0)
        for a, b in zip(cuts[:-1], cuts[1:]):
            clf.partial_fit(X[a:b], y[a:b], classes=classes)
        return clf

    whole = trained([0, 500])
    rng = np.random.RandomState(3)
    for cuts in ([*range(0, 500), 500],  # one row at a time
                 [0, *sorted(rng.choice(np.arange(1, 500), 17, replace=False)), 500]):
        other = trained(cuts)
        same_model(whole, other)
        np.testing.assert_array_equal(whole.class_counts_, other.class_counts_)


def test_fit_stream_balanced_is_partial_fit_balanced():
    X, y = imbalanced(n=300)
    records = [{int(j): float(v) for j, v in zip(X[i].indices, X[i].data)} for i in range(300)]
    a = PGSClassifierLearner(class_weight="balanced", sigma=1e-3, n_bits=6)
    a.fit_stream(zip(records, y.tolist()), classes=[0, 1], chunk_rows=37)
    b = PGSClassifierLearner(class_weight="balanced", sigma=1e-3, n_bits=6)
    b.partial_fit(records, y, classes=[0, 1])
    same_model(a, b)


def test_counts_go_on_through_other_class_weights():
    """Counts kept from the first "balanced" call on: a return to it is exact; a model that
    never kept them refuses "balanced" later rather than guess."""
    X, y = imbalanced(n=600)
    a = PGSClassifierLearner(class_weight="balanced", sigma=1e-3).partial_fit(
        X[:200], y[:200], classes=[0, 1])
    a.set_params(class_weight={1: 2.0}).partial_fit(X[200:400], y[200:400])
    a.set_params(class_weight="balanced").partial_fit(X[400:], y[400:])
    by_hand, _ = plain_balanced(y, np.array([0, 1]))
    sw = by_hand.copy()  # the counts went on over rows 200..400
    sw[200:400] = np.where(y[200:400] == 1, 2.0, 1.0)
    b = PGSClassifierLearner(sigma=1e-3).partial_fit(X, y, classes=[0, 1], sample_weight=sw)
    same_model(a, b)
    never = PGSClassifierLearner(sigma=1e-3).partial_fit(X[:200], y[:200], classes=[0, 1])
    with pytest.raises(ValueError, match="did not keep"):
        never.set_params(class_weight="balanced").partial_fit(X[200:], y[200:])


def test_fit_forgets_the_counts_of_a_former_training():
    X, y = imbalanced(n=300)
    clf = PGSClassifierLearner(class_weight="balanced", sigma=1e-3).partial_fit(
        X, y, classes=[0, 1])
    clf.set_params(class_weight=None).fit(X, y)
    assert not hasattr(clf, "class_counts_") and not hasattr(clf, "class_counts_total_")
    with pytest.raises(ValueError, match="did not keep"):
        clf.set_params(class_weight="balanced").partial_fit(X, y)
    clf.fit(X, y)  # a balanced fit counts its rows afresh
    np.testing.assert_array_equal(clf.class_counts_, np.bincount(y))
    with pytest.raises(ValueError):  # a failed fit leaves them as they were
        clf.set_params(class_weight=None).fit(X, np.full(300, 7))
    np.testing.assert_array_equal(clf.class_counts_, np.bincount(y))


def test_balanced_raises_the_minority_recall():
    """5% positives, logistic loss, one pass: the stream's balanced weights trade some
    majority accuracy for a much better recall of the minority (a real effect)."""
    X, y = imbalanced(n=8000, positives=0.05, seed=4)
    train, test = slice(0, 6000), slice(6000, None)

    def recall(**params):
        clf = PGSClassifierLearner(sigma=1e-3, random_state=0, **params)
        clf.partial_fit(X[train], y[train], classes=[0, 1])
        predicted = clf.predict(X[test])
        return np.mean(predicted[y[test] == 1] == 1)

    plain, balanced = recall(), recall(class_weight="balanced")
    assert balanced > plain + 0.2, (plain, balanced)
    assert balanced > 0.8


# ---- batch "balanced": scikit-learn's formula ---------------------------------------------
@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("weighted", [False, True])
def test_fit_balanced_equals_compute_class_weight(n_classes, weighted):
    from sklearn.utils.class_weight import compute_class_weight

    X, y = imbalanced(n=400, n_classes=n_classes)
    sw = np.random.RandomState(5).randint(0, 4, 400).astype(float) if weighted else None
    classes = np.unique(y)
    weights = compute_class_weight("balanced", classes=classes, y=y, sample_weight=sw)[
        np.searchsorted(classes, y)] * (1.0 if sw is None else sw)
    sdca = SDCAClassifier(class_weight="balanced", sigma=1e-3, random_state=0)
    same_model(sdca.fit(X, y, sample_weight=sw),
               SDCAClassifier(sigma=1e-3, random_state=0).fit(X, y, sample_weight=weights))
    pgs = PGSClassifier(class_weight="balanced", sigma=1e-3, random_state=0)
    same_model(pgs.fit(X, y, sample_weight=sw),
               PGSClassifier(sigma=1e-3, random_state=0).fit(X, y, sample_weight=weights))
    np.testing.assert_array_equal(pgs.class_counts_, np.bincount(y, weights=sw))


def test_sdca_balanced_integer_weights_are_repeated_rows():
    """Rows are counted by their sample weights: a row of weight k is k copies of it
    for "balanced" too, so SDCA's optimum is that of the repeated rows."""
    X, y = imbalanced(n=300)
    k = np.random.RandomState(6).randint(0, 4, 300)
    params = dict(class_weight="balanced", sigma=0.1, tol=0.0, random_state=0)
    a = SDCAClassifier(**params).fit(X, y, sample_weight=k.astype(float))
    rows = np.repeat(np.arange(300), k)
    b = SDCAClassifier(**params).fit(X[rows], y[rows])
    # (counting rows instead, the class weights differ and coef by 0.015)
    np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-7)
    np.testing.assert_allclose(a.intercept_, b.intercept_, atol=1e-7)


# ---- model files ----------------------------------------------------------------------------
@pytest.mark.parametrize("class_weight", ["balanced", {1: 3.0, 0: 0.5}, {1.0: 2}])
def test_model_file_round_trip_and_resume(tmp_path, class_weight):
    X, y = imbalanced(n=600, n_classes=3 if class_weight == "balanced" else 2)
    classes = np.unique(y)
    whole = PGSClassifier(class_weight=class_weight, sigma="auto", random_state=0)
    whole.partial_fit(X, y, classes=classes)
    half = PGSClassifier(class_weight=class_weight, sigma="auto", random_state=0)
    half.partial_fit(X[:250], y[:250], classes=classes)
    path = tmp_path / "m.pgs"
    save_model(half, path)
    for loaded in (load_model(path), load_learner(path)):
        assert loaded.get_params()["class_weight"] == class_weight
        assert type(loaded.class_weight) is type(class_weight)
        loaded.partial_fit(X[250:], y[250:])
        same_model(loaded, whole)
        if class_weight == "balanced":
            np.testing.assert_array_equal(loaded.class_counts_, np.bincount(y))
            assert loaded.class_counts_total_ == 600
    stored = read_header(path)["params"]["class_weight"]
    assert stored == (class_weight if isinstance(class_weight, str)
                      else [[k, v] for k, v in class_weight.items()])


def test_sdca_model_file_keeps_class_weight(tmp_path):
    X, y = imbalanced(n=200)
    clf = SDCAClassifierLearner(class_weight={1: 4.0}, sigma=1e-3, random_state=0).fit(X, y)
    save_model(clf, tmp_path / "s.pgs")
    loaded = load_learner(tmp_path / "s.pgs")
    assert loaded.class_weight == {1: 4.0}
    np.testing.assert_array_equal(loaded.predict(X), clf.predict(X))


def test_a_malformed_stored_class_weight_is_refused(tmp_path):
    import json
    import zipfile

    from onlinepgs.model_io import ModelFileError
    from onlinepgs.model_io.writing import write

    X, y = imbalanced(n=100)
    path = tmp_path / "m.pgs"
    save_model(PGSClassifierLearner(class_weight={1: 2.0}, sigma=1e-3).fit(X, y), path)
    with zipfile.ZipFile(path) as z:
        header = json.loads(z.read("header.json"))
        arrays = {e["name"]: np.load(z.open(e["name"] + ".npy")) for e in header["arrays"]}
    header["params"]["class_weight"] = [[1, 2.0, 3]]
    del header["checksum"]
    bad = tmp_path / "bad.pgs"
    write(str(bad), header, arrays)
    with pytest.raises(ModelFileError, match=r"class_weight holds \[1, 2.0, 3\], not a "
                                             r"\[label, weight\] pair"):
        load_learner(bad)


def test_dask_refuses_class_weights():
    from onlinepgs.distributed._estimator import check_params

    with pytest.raises(ValueError, match="onlinepgs.dask does not weigh classes"):
        check_params(PGSClassifierLearner(class_weight="balanced"), True, [-1, 1])


# ---- the command line -----------------------------------------------------------------------
def write_svm(path, X, y):
    with open(path, "w") as f:
        for i in range(X.shape[0]):
            row = X[i]
            f.write(f"{int(y[i])} " + " ".join(f"{j + 1}:{float(v)!r}" for j, v in
                                                 zip(row.indices, row.data)) + "\n")


@pytest.mark.parametrize("option, class_weight", [
    ("1:5,-1:1", {1: 5.0, -1: 1.0}), ("-1:0.5", {-1: 0.5}), ("balanced", "balanced")])
def test_cli_class_weight_trains_as_the_learner(tmp_path, option, class_weight):
    from onlinepgs import load_svmlight

    X, y = imbalanced(n=1500)
    data, model = tmp_path / "d.svm", tmp_path / "m.pgs"
    write_svm(data, X, np.where(y == 1, 1, -1))
    assert main(["train", str(data), "-o", str(model), "--quiet", "--sigma", "1e-3",
                 "--chunk-rows", "400", "--class-weight", option]) == 0
    trained = load_learner(model)
    assert trained.class_weight == class_weight
    Xf, yf = load_svmlight(data)
    reference = PGSClassifierLearner(sigma=1e-3, random_state=0, class_weight=class_weight)
    reference.partial_fit(Xf, yf, classes=[-1, 1])
    same_model(trained, reference)


def test_cli_balanced_checkpoint_resumes_exactly(tmp_path):
    X, y = imbalanced(n=3000)
    data, broken = tmp_path / "d.svm", tmp_path / "broken.svm"
    write_svm(data, X, np.where(y == 1, 1, -1))
    lines = data.read_bytes().splitlines(keepends=True)
    broken.write_bytes(b"".join(lines[:1700]) + b"1 3:oops\n" + b"".join(lines[1700:]))
    full, ckpt = tmp_path / "full.pgs", tmp_path / "ckpt.pgs"
    common = ["--quiet", "--class-weight", "balanced"]
    assert main(["train", str(data), "-o", str(full), *common]) == 0
    assert main(["train", str(broken), "-o", str(ckpt), "--chunk-rows", "500",
                 "--checkpoint-every", "600", *common]) == 1
    assert load_learner(ckpt).class_counts_total_ < 1700
    broken.write_bytes(data.read_bytes())
    assert main(["train", str(broken), "-i", str(ckpt), "--resume", "-o", str(ckpt),
                 "--chunk-rows", "700", "--quiet"]) == 0
    a, b = load_learner(full), load_learner(ckpt)
    same_model(a, b)
    np.testing.assert_array_equal(a.class_counts_, b.class_counts_)


@pytest.mark.parametrize("option, words", [
    ("1:5,-1:x", "'-1:x': the weight 'x' is not a number"),
    ("1:-2", "the class 1 has the weight -2.0 in --class-weight; a class weight is a "
             "finite number >= 0"),
    ("1:inf", "the class 1 has the weight inf in --class-weight; a class weight is a "
              "finite number >= 0"),
    ("a:2", "'a:2': the label 'a' is not a number"),
    ("1=5", "'1=5' is not LABEL:WEIGHT"),
    ("1:5,", "'1:5,' has an empty item"),
    ("1:5,1.0:2", "'1.0:2': the label '1.0' is given twice"),
    ("Balanced", "'Balanced' is not LABEL:WEIGHT")])
def test_cli_class_weight_errors_name_the_item(tmp_path, capsys, option, words):
    data = tmp_path / "d.svm"
    data.write_text("1 1:1\n-1 2:1\n")
    try:  # argparse exits on an item it cannot read; the rules refuse a value
        code = main(["train", str(data), "--class-weight", option])
    except SystemExit as exit_:
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err
    assert f"argument --class-weight: {words}" in err and "Traceback" not in err


def test_cli_class_weight_refusals(tmp_path, capsys):
    data, model = tmp_path / "d.svm", tmp_path / "m.pgs"
    data.write_text("1 1:1\n-1 2:1\n" * 20)
    # a label that is no class: one line, after the classes are known
    assert main(["train", str(data), "--class-weight", "3:2", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ("argument --class-weight: the label 3 is not one of "
                                     "the classes [-1, 1]") in err
    assert main(["train", str(data), "--loss", "squared", "--class-weight", "1:2"]) == 2
    assert "applies to classification losses only" in capsys.readouterr().err
    assert main(["train", str(data), "--scheduler", "threads", "--class-weight",
                 "balanced"]) == 2
    assert ("argument --class-weight: --scheduler does not weigh classes"
            in capsys.readouterr().err)
    # with -i the model keeps its own (a note says so); --solver sdca takes it too
    assert main(["train", str(data), "-o", str(model), "--quiet", "--class-weight",
                 "balanced"]) == 0
    assert main(["train", str(data), "-i", str(model), "-o", str(model), "--quiet",
                 "--class-weight", "1:2"]) == 0
    assert "--class-weight {1: 2.0} (the model's: balanced) ignored" in \
        capsys.readouterr().err
    assert load_learner(model).class_weight == "balanced"
    assert main(["train", str(data), "-o", str(model), "--quiet", "--solver", "sdca",
                 "--class-weight", "-1:3"]) == 0
    assert load_learner(model).class_weight == {-1: 3.0}


# ---- scikit-learn's checks with class weights -----------------------------------------------
def test_pgs_passes_the_class_weight_check_given_epochs():
    """scikit-learn's check_class_weight_classifiers (class weights 1000 and 0.0001: nearly
    every test row must be predicted class 0) with the epochs it would give through
    max_iter; test_sklearn_checks.py expects it to fail with the default 5 epochs."""
    from sklearn.utils.estimator_checks import check_class_weight_classifiers

    check_class_weight_classifiers("PGSClassifier", PGSClassifier(max_epochs=50,
                                                                  random_state=0))


def test_check_estimator_with_balanced():
    from sklearn.utils.estimator_checks import check_estimator

    expected = {"check_sample_weight_equivalence_on_dense_data": "see test_sklearn_checks",
                "check_sample_weight_equivalence_on_sparse_data": "see test_sklearn_checks",
                "check_class_weight_classifiers": "see test_sklearn_checks"}
    for est, xfail in ((PGSClassifier(class_weight="balanced", random_state=0), expected),
                       (SDCAClassifier(class_weight="balanced", tol=0.0, max_epochs=300,
                                       random_state=0), {})):
        results = check_estimator(est, on_fail=None, expected_failed_checks=xfail)
        failures = [c for c in results if c["status"] == "failed"]
        assert not failures, [(c["check_name"], c["exception"]) for c in failures]


def test_balanced_weights_of_counts_near_the_double_range():
    """A class whose weighted count nears 1e308 weighs about 1 / K, which is finite:
    computing K * n_c first overflowed to inf and gave its rows the weight 0 (after a
    RuntimeWarning), in fit, on a stream and in the certificate's weights. Rows of
    sample weight 1e308 and 1: n = 1e308 + 1 = 1e308, so the big row's class weighs
    1e308 / (2 * 1e308) = 1/2 and the other 1e308 / 2."""
    from onlinepgs._class_weight import batch_weights, objective_weights

    codes, sw = np.array([0, 1]), np.array([1.0, 1e308])
    with np.errstate(all="raise"):
        w, _, total = stream_weights(codes, sw, np.zeros(2), 0.0, 2)
        assert w.tolist() == [1.0 / 2, 1e308 / 1e308 / 2] and total == 1e308
        w, counts = batch_weights("balanced", codes, sw, 2, "test", np.array([0, 1]))
        assert w.tolist() == [1e308 / 2, 0.5] and counts.tolist() == [1.0, 1e308]
        clf = PGSClassifier(class_weight="balanced")
        clf.classes_, clf.class_counts_ = np.array([0, 1]), counts
        assert objective_weights(clf).tolist() == [1e308 / 2, 0.5]
        # scikit-learn's own expression where it does not overflow, bit for bit
        w, _ = batch_weights("balanced", codes, np.array([1.0, 3.0]), 2, "test", codes)
        assert w.tolist() == [4.0 / (2 * 1.0), 4.0 / (2 * 3.0)]


def test_weights_whose_sum_overflows_are_refused_naming_the_row_and_its_class_weight():
    """Sample weights whose sum leaves the double range are refused at their row by fit
    and partial_fit, PGS and SDCA, naming the sample weight (with "balanced" they were
    named "inf", its class weight overflowed first; SDCA said "l1 must be a finite
    number >= 0, got nan"); a product with a dict's class weight that overflows names
    both."""
    X, y = np.array([[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), np.array([1, 0, 1])
    for class_weight in ("balanced", {1: 3.0}, None):
        calls = [lambda: PGSClassifier(class_weight=class_weight, max_epochs=1).fit(
                     X, y, sample_weight=[1e308, 1e308, 1.0]),
                 lambda: PGSClassifier(class_weight=class_weight).partial_fit(
                     X, y, classes=[0, 1], sample_weight=[1e308, 1e308, 1.0]),
                 lambda: SDCAClassifier(class_weight=class_weight).fit(
                     X, y, sample_weight=[1e308, 1e308, 1.0])]
        for call in calls:
            with pytest.raises(ValueError, match=r"^row 1: the sample weights add up beyond "
                               r"the double range \(1.8e308\) with this row's weight "
                               r"1e\+308 \(the sum before it 1e\+308\)"):
                call()
    for est in (PGSClassifier(class_weight={1: 3.0}), SDCAClassifier(class_weight={1: 3.0})):
        with pytest.raises(ValueError, match=r"^row 2: the sample weights \(times their class "
                           r"weights\) add up beyond the double range \(1.8e308\) with this "
                           r"row's sample weight 1e\+308 times its class weight \(an "
                           r"overflowing product\)"):
            est.fit(X, y, sample_weight=[1.0, 1.0, 1e308])
