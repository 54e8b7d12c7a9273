"""The .pgs model file: exact round trips, refusals, corruption and atomic writes."""
import io
import json
import math
import os
import pickle
import re
import time
import tracemalloc
import zipfile

import numpy as np
import pytest
from hypothesis import strategies as st
import scipy.sparse as sp

from fuzzing import MUTATIONS, fuzzer, mutate
from onlinepgs import PGSClassifier, PGSRegressor
from onlinepgs import model_io
from onlinepgs.model_io import container, jsonvalues, writing
from onlinepgs.model_io import (FORMAT_NAME, FORMAT_VERSION, ModelFileError, load_learner,
                                load_model, read_header, save_model)

ITERATES = ["last", "average", "weighted", "weighted2", "random"]
RADII = [None, "auto", 3.0]
# a file loaded whole, and its reported model alone (predict, eval, gap, info: the solver
# state read in slices, onlinepgs/model_io/reported.py): both refuse alike
LOADERS = {"whole": load_model, "reported": lambda path: load_learner(path, state=False)}


# ---- helpers ---------------------------------------------------------------------------
def make_data(kind, m=60, n=8, seed=0):
    """(X, y, classes) for a task; sparse kinds are CSR."""
    rng = np.random.RandomState(seed)
    X = rng.randn(m, n) * (rng.rand(m, n) < 0.5)
    score = X @ rng.randn(n) + 0.2 * rng.randn(m)
    if kind.startswith("binary"):
        y, classes = np.where(score > 0, "spam", "ham"), ["ham", "spam"]
    elif kind.startswith("multiclass"):
        y, classes = np.digitize(score, [-1.0, 0.0, 1.0]), [0, 1, 2, 3]
    else:
        y, classes = 0.5 * score, None
    if kind.endswith("sparse"):
        X = sp.csr_matrix(X)
    return X, y, classes


def make_estimator(kind, **params):
    if kind.startswith("regressor"):
        params.setdefault("loss", "huber")
        return PGSRegressor(sigma=1e-2, random_state=0, **params)
    return PGSClassifier(sigma=1e-3, random_state=0, **params)


def train(est, X, y, classes):
    if isinstance(est, PGSClassifier):
        return est.partial_fit(X, y, classes=classes)
    return est.partial_fit(X, y)


def assert_same_stats(a, b):
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
        assert type(a[key]) is type(b[key]), key


def assert_same_state(a, b):
    """Two solver states with equal arrays and scalars (NaN equal to NaN)."""
    state_a, state_b = a.to_dict(), b.to_dict()
    assert state_a.keys() == state_b.keys()
    for key, value in state_a.items():
        if isinstance(value, np.ndarray):
            assert value.dtype == state_b[key].dtype, key
            np.testing.assert_array_equal(value, state_b[key], err_msg=key)
        else:
            assert value == state_b[key] or (value != value and state_b[key] != state_b[key]), key


def assert_same_race(a, b):
    """Two sigma races (sigma="auto"; None for a fixed sigma) with the same schedule, row
    count and live runs' states."""
    assert (a is None) == (b is None)
    if a is None:
        return
    assert type(a) is type(b)
    assert a.schedule.to_dict() == b.schedule.to_dict()
    assert a.n_rows == b.n_rows
    assert sorted(a.states) == sorted(b.states)
    for rid in a.states:
        assert_same_state(a.states[rid], b.states[rid])


def assert_same_model(a, b):
    """Same class, parameters, fitted attributes, solver state and read-out."""
    assert type(a) is type(b)
    assert a.get_params() == b.get_params()
    fitted_a = {k: v for k, v in vars(a).items() if k not in ("_state", "_cache", "_race")}
    fitted_b = {k: v for k, v in vars(b).items() if k not in ("_state", "_cache", "_race")}
    assert fitted_a.keys() == fitted_b.keys()
    assert_same_race(getattr(a, "_race", None), getattr(b, "_race", None))
    for key, value in fitted_a.items():
        if isinstance(value, np.ndarray):
            assert value.dtype == fitted_b[key].dtype, key
            np.testing.assert_array_equal(value, fitted_b[key], err_msg=key)
        else:
            assert value == fitted_b[key] and type(value) is type(fitted_b[key]), key
    assert_same_state(a._state, b._state)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    assert_same_stats(a.online_stats_, b.online_stats_)


def assert_continue_equal(a, b, X, y, classes):
    """partial_fit on the same data keeps the two models bit-for-bit equal."""
    train(a, X, y, classes)
    train(b, X, y, classes)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    assert_same_stats(a.online_stats_, b.online_stats_)
    assert_same_model(a, b)


def raw_parts(path):
    """(raw JSON header, arrays) of a model file, unchecked."""
    with zipfile.ZipFile(path) as zf:
        header = json.loads(zf.read("header.json"))
        arrays = {}
        for entry in header["arrays"]:
            with zf.open(entry["name"] + ".npy") as f:
                arrays[entry["name"]] = np.lib.format.read_array(f, allow_pickle=False)
    return header, arrays


def write_parts(path, header, arrays, *, checksum=True, skip=()):
    """A crafted model file: valid zip; a freshly computed checksum unless told not to."""
    header = dict(header)
    if checksum:
        header["checksum"] = {"algorithm": "sha256",
                              "digest": container._digest(header, arrays)}
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("header.json", json.dumps(header))
        for entry in header["arrays"]:
            if entry["name"] in skip:
                continue
            with zf.open(entry["name"] + ".npy", "w") as out:
                np.lib.format.write_array(out, arrays[entry["name"]], allow_pickle=False)


@pytest.fixture
def fitted():
    X, y, classes = make_data("multiclass_dense")
    return PGSClassifier(sigma=1e-3, iterate="random", p=1.5, random_state=0).fit(X, y)


@pytest.fixture
def model_file(tmp_path, fitted):
    path = tmp_path / "model.pgs"
    save_model(fitted, path)
    return path


def crafted(tmp_path, source, mutate=None, **kwargs):
    header, arrays = raw_parts(source)
    if mutate is not None:
        mutate(header, arrays)
    path = tmp_path / "crafted.pgs"
    write_parts(path, header, arrays, **kwargs)
    return path


# ---- round trips -----------------------------------------------------------------------
@pytest.mark.parametrize("radius", RADII, ids=["Rn", "auto", "ball"])
@pytest.mark.parametrize("p", [2.0, 1.5])
@pytest.mark.parametrize("iterate", ITERATES)
@pytest.mark.parametrize("kind", ["binary_str_sparse", "multiclass_int_dense",
                                  "regressor_dense", "regressor_sparse"])
def test_save_load_continue_is_bit_for_bit(tmp_path, kind, iterate, p, radius):
    X, y, classes = make_data(kind, seed=1)
    X2, y2, _ = make_data(kind, seed=2)
    batch_size = 2 if iterate in ("average", "random") else 1
    original = make_estimator(kind, iterate=iterate, p=p, radius=radius,
                              batch_size=batch_size)
    train(original, X[:40], y[:40], classes)
    path = tmp_path / "m.pgs"
    save_model(original, path)
    loaded = load_model(path)
    assert loaded._cache == {}  # rebuilt empty, before any read-out
    assert_same_model(original, loaded)
    if kind.startswith("binary"):
        assert loaded.classes_.tolist() == ["ham", "spam"]
        assert loaded.predict(X[:5]).tolist() == original.predict(X[:5]).tolist()
    # continue on the rest of the data, then on fresh data: identical throughout
    assert_continue_equal(original, loaded, X[40:], y[40:], classes)
    assert_continue_equal(original, loaded, X2, y2, classes)


@pytest.mark.parametrize("kind", ["binary_str_sparse", "multiclass_int_dense", "regressor_dense"])
def test_fit_models_round_trip_and_refit_identically(tmp_path, kind):
    X, y, classes = make_data(kind, m=80)
    original = make_estimator(kind, max_epochs=3, shuffle=True, iterate="weighted").fit(X, y)
    save_model(original, tmp_path / "m.pgs")
    loaded = load_model(tmp_path / "m.pgs")
    assert_same_model(original, loaded)
    assert loaded.n_iter_ == 3 and loaded.t_ == original.t_ == 240
    # the stored parameters (random_state included) make fit reproduce the model
    refit = loaded.fit(X, y)
    original.fit(X, y)
    assert_same_model(original, refit)


def test_sparse_model_grows_after_loading(tmp_path):
    X, y, classes = make_data("binary_sparse", n=8)
    wide = sp.random(30, 12, density=0.4, random_state=3, format="csr")
    y_wide = np.where(np.arange(30) % 2, "spam", "ham")
    original = PGSClassifier(sigma=1e-3, p=1.5, random_state=0).partial_fit(X, y, classes=classes)
    save_model(original, tmp_path / "m.pgs")
    loaded = load_model(tmp_path / "m.pgs")
    assert_continue_equal(original, loaded, wide, y_wide, classes)
    assert loaded.n_features_in_ == 12 and loaded.coef_.shape == (1, 12)


def test_save_load_save_gives_the_same_bytes(tmp_path, fitted):
    save_model(fitted, tmp_path / "a.pgs", extra={"k": [1, 2.5]})
    save_model(load_model(tmp_path / "a.pgs"), tmp_path / "b.pgs", extra={"k": [1, 2.5]})
    assert (tmp_path / "a.pgs").read_bytes() == (tmp_path / "b.pgs").read_bytes()


def test_object_string_attributes_come_back_as_objects(tmp_path):
    X, y, _ = make_data("binary_dense")
    est = PGSClassifier(random_state=0).fit(X, y.astype(object))
    est.feature_names_in_ = np.array([f"f{i}" for i in range(X.shape[1])], dtype=object)
    assert est.classes_.dtype == object
    save_model(est, tmp_path / "m.pgs")
    entries = {e["name"]: e for e in read_header(tmp_path / "m.pgs")["arrays"]}
    assert entries["attributes/classes_"]["as_object"] is True
    assert entries["attributes/feature_names_in_"]["dtype"] == "<U2"
    loaded = load_model(tmp_path / "m.pgs")
    assert_same_model(est, loaded)
    assert loaded.predict(X[:3]).dtype == object


def written(params):
    """The parameters a model file writes: every one but interactions=None, l1=0,
    multi_class="ovr", geometry="global" and eta="auto" (not written, so that a model
    without them is the file it was before they existed; they read back as the defaults),
    classes (a fresh model's set-up: the file keeps the fitted classes_) and n_jobs (how
    a machine runs the model, never written)."""
    return {k: v for k, v in params.items()
            if (k, v) not in (("interactions", None), ("l1", 0), ("multi_class", "ovr"),
                              ("geometry", "global"), ("eta", "auto"), ("classes", None))
            and k != "n_jobs"}


def test_new_hyperparameters_round_trip(tmp_path):
    """Every get_params value is stored, including the hashing parameters."""
    params = PGSClassifier().get_params()
    X, y, classes = make_data("binary_sparse")
    extra = {"n_bits": 12, "hash_seed": 7} if "n_bits" in params else {}
    est = PGSClassifier(random_state=5, tol=1e-3, **extra).fit(X, y)
    save_model(est, tmp_path / "m.pgs")
    header = read_header(tmp_path / "m.pgs")
    assert header["params"] == written(est.get_params())
    assert load_model(tmp_path / "m.pgs").get_params() == est.get_params()


def test_pickle_continues_bit_for_bit():
    X, y, classes = make_data("multiclass_sparse")
    original = PGSClassifier(sigma=1e-3, p=1.5, iterate="random", batch_size=3,
                             random_state=0).partial_fit(X[:30], y[:30], classes=classes)
    copy = pickle.loads(pickle.dumps(original))
    assert_same_model(original, copy)
    assert_continue_equal(original, copy, X[30:], y[30:], classes)


# ---- the header ------------------------------------------------------------------------
def test_header_inspection(tmp_path):
    X, y, classes = make_data("binary_dense", m=50, n=6)
    est = PGSClassifier(sigma=1e-3, radius=None, random_state=3).fit(X, y)
    extra = {"examples_consumed": 12345, "hashing": {"n_bits": 18, "seed": 0},
             "limit": math.inf, "tags": ["a", "b"]}
    path = tmp_path / "m.pgs"
    save_model(est, path, extra=extra)
    header = read_header(path)
    assert header["format"] == FORMAT_NAME == "onlinepgs-model"
    assert header["format_version"] == FORMAT_VERSION == 1
    import onlinepgs
    assert header["onlinepgs_version"] == onlinepgs.__version__
    assert header["estimator"] == "PGSClassifier"
    assert header["params"] == written(est.get_params())
    assert header["attributes"]["n_features_in_"] == 6
    assert header["attributes"]["t_"] == est.t_ == 250
    assert header["attributes"]["_state_params"] == written(est._state_params)
    assert header["n_features"] == 6 and header["dimension"] == 7
    assert header["state"]["config"]["radius"] is None
    assert header["state"]["radius_now"] == math.inf  # non-finite floats decoded
    assert header["extra"] == extra
    stats = header["online_stats"]
    assert stats["n_examples"] == 250
    assert stats["progressive_error_rate"] == est.online_stats_["progressive_error_rate"]
    assert stats["regret_bound"] == est.online_stats_["regret_bound"]
    names = [entry["name"] for entry in header["arrays"]]
    assert "attributes/classes_" in names and "state/block_a" in names
    block = header["arrays"][names.index("state/block_a")]
    assert block["dtype"] == "<f8" and block["shape"][0] == 7
    assert len(header["checksum"]["digest"]) == 64
    # the file itself: a zip holding header.json (strict JSON) and .npy entries only
    with zipfile.ZipFile(path) as zf:
        members = zf.namelist()
        text = zf.read("header.json").decode("ascii")
    assert members == ["header.json"] + [n + ".npy" for n in names]
    json.loads(text, parse_constant=lambda name: pytest.fail(f"non-strict JSON {name}"))
    assert "pickle" not in text
    # the unverified read gives the same header; load_model can return it too
    assert read_header(path, verify=False) == header
    loaded, header2 = load_model(path, return_header=True)
    assert header2 == header
    assert_same_model(est, loaded)


def test_nan_statistics_are_stored(tmp_path):
    X, y, classes = make_data("regressor_dense")
    est = PGSRegressor().partial_fit(X[:4], y[:4], sample_weight=np.zeros(4))
    assert math.isnan(est.online_stats_["progressive_loss"])
    save_model(est, tmp_path / "m.pgs")
    assert math.isnan(read_header(tmp_path / "m.pgs")["online_stats"]["progressive_loss"])
    assert_same_model(est, load_model(tmp_path / "m.pgs"))


# ---- refusals when saving --------------------------------------------------------------
def test_unfitted_estimator_is_refused(tmp_path):
    path = tmp_path / "m.pgs"
    with pytest.raises(ModelFileError, match="not fitted"):
        save_model(PGSRegressor(), path)
    assert os.listdir(tmp_path) == []


def test_random_state_instance_is_refused(tmp_path):
    X, y, classes = make_data("binary_dense")
    est = PGSClassifier(random_state=np.random.RandomState(0)).fit(X, y)
    with pytest.raises(ModelFileError, match=r"random_state is a RandomState.*int seed") as info:
        save_model(est, tmp_path / "m.pgs")
    assert str(tmp_path / "m.pgs") in str(info.value)
    assert os.listdir(tmp_path) == []


def test_other_estimators_are_refused(tmp_path):
    from sklearn.linear_model import SGDClassifier
    X, y, classes = make_data("binary_dense")
    with pytest.raises(ModelFileError, match="only PGSClassifier, PGSRegressor, SDCAClassifier, SDCARegressor"):
        save_model(SGDClassifier().fit(X, y), tmp_path / "m.pgs")

    class Sub(PGSClassifier):
        pass
    with pytest.raises(ModelFileError, match="cannot save"):
        save_model(Sub().fit(X, y), tmp_path / "m.pgs")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("extra, message", [
    ({"when": object()}, r"extra\['when'\].*cannot be stored"),
    ({"$float": "inf"}, "reserved"),
    ({1: "one"}, "only string keys"),
    ({"a": np.zeros(2)}, "cannot be stored"),
    (["not", "a", "dict"], "extra must be a dict"),
])
def test_unstorable_extra_is_refused(tmp_path, fitted, extra, message):
    with pytest.raises(ModelFileError, match=message):
        save_model(fitted, tmp_path / "m.pgs", extra=extra)
    assert os.listdir(tmp_path) == []


def test_object_arrays_are_refused(tmp_path, fitted):
    fitted.mixed_ = np.array([1, "a", None], dtype=object)
    with pytest.raises(ModelFileError, match="object arrays cannot be stored"):
        save_model(fitted, tmp_path / "m.pgs")
    fitted.mixed_ = {"a": object()}
    with pytest.raises(ModelFileError, match="attribute mixed_"):
        save_model(fitted, tmp_path / "m.pgs")
    assert os.listdir(tmp_path) == []


# ---- refusals when loading -------------------------------------------------------------
def test_text_file_is_not_a_model(tmp_path):
    path = tmp_path / "train.svm"
    path.write_text("1 3:0.5 7:1.25\n-1 2:1\n")
    for reader in (load_model, read_header):
        with pytest.raises(ModelFileError, match="not a zip archive.*text file") as info:
            reader(path)
        message = str(info.value)
        assert message.startswith(str(path) + ": ") and "\n" not in message


def test_empty_and_binary_files_are_not_models(tmp_path):
    (tmp_path / "empty.pgs").write_bytes(b"")
    (tmp_path / "noise.pgs").write_bytes(bytes(range(256)) * 4)
    with pytest.raises(ModelFileError, match="not a zip archive.*empty"):
        load_model(tmp_path / "empty.pgs")
    with pytest.raises(ModelFileError, match="not a zip archive"):
        load_model(tmp_path / "noise.pgs")


def test_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_model(tmp_path / "absent.pgs")


def test_other_zip_archives_are_not_models(tmp_path):
    np.savez(tmp_path / "arrays.npz", a=np.zeros(3))
    with pytest.raises(ModelFileError, match="no header.json"):
        load_model(tmp_path / "arrays.npz")
    with zipfile.ZipFile(tmp_path / "other.zip", "w") as zf:
        zf.writestr("header.json", json.dumps({"format": "something-else"}))
    with pytest.raises(ModelFileError, match="not an onlinepgs model file.*something-else"):
        load_model(tmp_path / "other.zip")


@pytest.mark.parametrize("content, message", [
    (b"{not json", "not valid JSON"),
    (b"\xff\xfe", "not valid JSON"),
    (b'["a", "list"]', "not a JSON object"),
    (b'{"format": "onlinepgs-model", "format_version": NaN}', "not valid JSON"),
    (b'{"format": "onlinepgs-model", "format_version": "1"}', "not a positive integer"),
    (b'{"format": "onlinepgs-model", "format_version": 1}', "no 'estimator' field"),
])
def test_malformed_headers(tmp_path, content, message):
    path = tmp_path / "bad.pgs"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("header.json", content)
    with pytest.raises(ModelFileError, match=message):
        load_model(path)


def test_newer_format_version_is_refused(tmp_path, model_file):
    def newer(header, arrays):
        header["format_version"] = FORMAT_VERSION + 1
        header["something_new"] = {"a": 1}
    path = crafted(tmp_path, model_file, newer)
    for reader in (load_model, read_header):
        with pytest.raises(ModelFileError, match="written by a newer onlinepgs.*upgrade"):
            reader(path)


def test_unknown_top_level_fields_are_ignored(tmp_path, model_file, fitted):
    path = crafted(tmp_path, model_file, lambda h, a: h.update(added_later={"x": 1}))
    assert_same_model(fitted, load_model(path))


def test_state_version_2_file_loads_with_the_dual_estimate_unknown(tmp_path, model_file,
                                                                    fitted):
    """A file written before the online dual estimate (state version 2) loads, predicts
    and continues as before; the estimate it never kept is NaN, not made up."""
    def to_v2(header, arrays):
        header["state"]["version"] = 2
        header["arrays"] = [e for e in header["arrays"] if e["name"] not in
                            ("state/sum_conj_a", "state/sum_step_loss_a", "state/sum_reg_a")]
    path = crafted(tmp_path, model_file, to_v2)
    old = load_model(path)
    np.testing.assert_array_equal(old.coef_, fitted.coef_)
    stats = old.online_stats_
    assert np.isnan(stats["dual_objective"]).all() and np.isnan(stats["online_objective"]).all()
    # the reported iterate's progressive figures are unknown too (state version < 4)
    assert np.isnan(stats["progressive_loss"]) and np.isnan(stats["progressive_error_rate"])

    def known(s):
        return {k: v for k, v in s.items() if "objective" not in k and "gap" not in k
                and k not in ("progressive_loss", "progressive_mistakes",
                              "progressive_error_rate")}
    assert_same_stats(known(stats), known(fitted.online_stats_))
    X, y, _ = make_data("multiclass_dense", seed=3)
    old.partial_fit(X, y)
    fitted.partial_fit(X, y)
    np.testing.assert_array_equal(old.coef_, fitted.coef_)
    assert np.isnan(old.online_stats_["dual_objective"]).all()


def test_a_file_from_before_span_recounts_n_on_the_old_schedule(tmp_path, model_file,
                                                                fitted):
    """Files written before the state kept `span` (the rows' reach, which sets when N is
    recounted) load with the schedule they were trained on, every 8 * dim touches."""
    path = crafted(tmp_path, model_file, lambda h, a: h["state"].pop("span"))
    old = load_model(path)
    np.testing.assert_array_equal(old.coef_, fitted.coef_)
    assert old._state.span == old._state.dim and fitted._state.span <= fitted._state.dim
    X, y, _ = make_data("multiclass_dense", seed=3)
    old.partial_fit(X, y)  # continues


@pytest.mark.parametrize("version", [1, 2.0, True, "3"])
def test_unknown_solver_state_versions_are_refused(tmp_path, model_file, version):
    path = crafted(tmp_path, model_file, lambda h, a: h["state"].update(version=version))
    with pytest.raises(ModelFileError, match="solver state version .* not readable"):
        load_model(path)


def test_newer_solver_state_version_is_refused(tmp_path, model_file):
    path = crafted(tmp_path, model_file, lambda h, a: h["state"].update(version=99))
    with pytest.raises(ModelFileError, match="solver state version 99.*upgrade"):
        load_model(path)


def rename_array(header, arrays, name):
    entry = header["arrays"][0]
    arrays[name] = arrays.pop(entry["name"])
    entry["name"] = name


@pytest.mark.parametrize("mutate, message", [
    (lambda h, a: h.update(estimator="PGSRanker"), "unknown estimator class 'PGSRanker'"),
    (lambda h, a: h["params"].update(future_knob=3), r"\['future_knob'\] unknown.*upgrade"),
    (lambda h, a: h["params"].update(sigma=[1, 2]), "parameter sigma"),
    (lambda h, a: h.update(params="p=2"), "'params' is a str"),
    (lambda h, a: h["attributes"].pop("t_"), r"fitted attribute\(s\) \['t_'\] missing"),
    (lambda h, a: h["attributes"].update(predict=1), "'predict' is not a fitted attribute"),
    (lambda h, a: h["attributes"].update(coef_=[1]), "'coef_' is not a fitted attribute"),
    (lambda h, a: h["attributes"].update(n_iter_=-1), "n_iter_ is -1"),
    (lambda h, a: h["state"].pop("rng"), "has no 'rng'"),
    (lambda h, a: h["state"].update(t="12"), "solver state t is '12'"),
    (lambda h, a: h["state"]["config"].update(p=7.0), "invalid solver configuration"),
    (lambda h, a: h["state"]["config"].update(n_problems=1, multiclass=False),
     r"state/block_a has shape \(9, 4, 2\), expected \(9, 1, ...\)"),
    (lambda h, a: h["state"]["config"].update(multiclass="yes"), "invalid solver configuration"),
    (lambda h, a: h["state"].update(t=-3), "solver state t is -3, expected a non-negative int"),
    (lambda h, a: h["state"].update(dim=10**9), r"expected \(1000000000, 4, ...\)"),
    (lambda h, a: h["params"].update(sigma="tiny"), "'sigma' parameter"),
    (lambda h, a: h["params"].update(p={"$float": "nan"}), "'p' parameter"),
    (lambda h, a: h["attributes"].update(_state_params={"nope": 1}), "_state_params"),
    (lambda h, a: h.update(state={"$float": "inf"}), "'state' is a float"),
    (lambda h, a: rename_array(h, a, "../../etc/passwd"), "invalid name"),
    (lambda h, a: rename_array(h, a, "attributes/x.npy"), "invalid name"),
    (lambda h, a: h["arrays"][0].update(dtype="O"), "unsupported dtype"),
    (lambda h, a: h["arrays"].append(dict(h["arrays"][0])), "listed twice"),
])
@pytest.mark.parametrize("loader", LOADERS)
def test_malformed_models_are_refused(tmp_path, model_file, mutate, message, loader):
    with pytest.raises(ModelFileError, match=message) as info:
        LOADERS[loader](crafted(tmp_path, model_file, mutate))
    assert "\n" not in str(info.value) and str(tmp_path) in str(info.value)


def _set_array(name, value):
    def mutate(header, arrays):
        arrays[name] = arrays[name].copy()
        arrays[name].flat[0] = value
    return mutate


def _set_classes(values):
    def mutate(header, arrays):
        arrays["attributes/classes_"] = np.array(values)
    return mutate


@pytest.mark.parametrize("mutate, message", [
    (lambda h, a: h["params"].update(sigma=0.5),
     r"parameter sigma=0.5 but the solver state was trained with sigma=0.001 "
     r"\(_state_params\)"),
    (lambda h, a: (h["params"].update(sigma=0.5),
                   h["attributes"]["_state_params"].update(sigma=0.5)),
     "_state_params has sigma=0.5 but the solver state's configuration has sigma=0.001"),
    (lambda h, a: h["params"].update(fit_intercept=False), "parameter fit_intercept=False"),
    (_set_classes([0, 1, 1, 2]), r"classes_ \[0, 1, 1, 2\] are not distinct and sorted"),
    (_set_classes([3, 2, 1, 0]), r"classes_ \[3, 2, 1, 0\] are not distinct and sorted"),
    (_set_array("state/block_a", np.nan), "the solver state's block_a holds nan"),
    (_set_array("state/scale_a", np.inf), "the solver state's scale_a holds inf"),
    (lambda h, a: h["state"].update(sum_weight={"$float": "nan"}), "the solver state's sum_weight is nan"),
    (lambda h, a: h["attributes"].update(t_=5), "t_=5 but the solver state has made 300 steps"),
    (lambda h, a: h["attributes"].update(n_features_in_=2**70),
     # (the reported model alone is checked as the weights it holds)
     "n_features_in_=1180591620717411303424 but the (solver state has|weights have) 8 "
     "features"),
    (lambda h, a: (h["params"].update(n_bits=4),
                   h["attributes"]["_state_params"].update(n_bits=4)),
     "n_bits=4 hashes into 16 features(,| but) the (solver state has|weights have) 8"),
])
@pytest.mark.parametrize("loader", LOADERS)
def test_contradictory_files_with_valid_checksums_are_refused(tmp_path, model_file, mutate,
                                                              message, loader):
    """Each part of the file is well-formed but contradicts another (checksum valid)."""
    with pytest.raises(ModelFileError, match="inconsistent model: " + message) as info:
        LOADERS[loader](crafted(tmp_path, model_file, mutate))
    assert "\n" not in str(info.value)


def test_inconsistent_estimators_are_refused_when_saving(tmp_path, fitted):
    """What load_model would refuse, save_model does not write."""
    path = tmp_path / "m.pgs"
    fitted.set_params(sigma=0.5)
    with pytest.raises(ModelFileError, match=r"cannot save this PGSClassifier: parameter "
                                             r"sigma=0.5 but the solver state was trained "
                                             "with sigma=0.001"):
        save_model(fitted, path)
    assert os.listdir(tmp_path) == []
    fitted.set_params(sigma=1e-3, max_epochs=3)  # not a solver-state parameter
    save_model(fitted, path)
    assert load_model(path).max_epochs == 3
    fitted._state.block_a[0, 0, 0] = np.inf  # e.g. weights that overflowed
    with pytest.raises(ModelFileError, match="block_a holds inf"):
        save_model(fitted, tmp_path / "other.pgs")



def test_any_garbled_header_value_is_refused_cleanly(tmp_path, model_file):
    """Replacing any header value (with a valid checksum) never raises anything but
    ModelFileError; a model that loads predicts or refuses its input cleanly."""
    header, arrays = raw_parts(model_file)

    def leaves(node, where=()):
        if isinstance(node, dict):
            for key, value in node.items():
                yield from leaves(value, where + (key,))
        elif isinstance(node, list):
            for i, value in enumerate(node):
                yield from leaves(value, where + (i,))
        yield where

    path = tmp_path / "garbled.pgs"
    X, y, _ = make_data("multiclass_dense", seed=4)
    outcomes = {"refused": 0, "loaded": 0}
    for where in list(leaves(header)):
        if not where or where[0] == "checksum":
            continue
        for value in (None, -1, 2**70, "x", [], {"$float": "nan"}):
            garbled = json.loads(json.dumps(header))
            node = garbled
            for key in where[:-1]:
                node = node[key]
            node[where[-1]] = value
            try:
                write_parts(path, garbled, arrays)
            except (KeyError, TypeError, AttributeError):
                continue  # the test's writer cannot follow this table
            try:
                est = load_model(path)
            except ModelFileError:
                outcomes["refused"] += 1
            else:
                outcomes["loaded"] += 1
                assert isinstance(est, PGSClassifier)
                try:
                    assert est.predict(X).shape == (X.shape[0],)
                except ValueError as exc:  # e.g. a garbled n_features_in_
                    assert "features" in str(exc)
    assert outcomes["refused"] > 300 and outcomes["loaded"] > 50


@pytest.mark.parametrize("checksum", [{"algorithm": "md5", "digest": "0" * 32},
                                      {"algorithm": "sha256", "digest": "xyz"}, "abc"])
def test_unsupported_checksums_are_refused(tmp_path, model_file, checksum):
    path = crafted(tmp_path, model_file, lambda h, a: h.update(checksum=checksum),
                   checksum=False)
    with pytest.raises(ModelFileError, match="checksum"):
        load_model(path)


def test_missing_parameters_take_their_defaults(tmp_path, model_file, fitted):
    """A file from before a parameter existed loads with that parameter's default."""
    path = crafted(tmp_path, model_file, lambda h, a: h["params"].pop("max_epochs"))
    fitted.max_epochs = PGSClassifier().max_epochs
    assert_same_model(fitted, load_model(path))


def test_missing_arrays_are_refused(tmp_path, model_file):
    # listed in the header, absent from the archive
    path = crafted(tmp_path, model_file, skip=("state/norm_a",))
    with pytest.raises(ModelFileError, match="missing array state/norm_a"):
        load_model(path)

    # absent from both: the solver state lacks it
    def drop(header, arrays):
        header["arrays"] = [e for e in header["arrays"] if e["name"] != "state/cum_a"]
    with pytest.raises(ModelFileError, match="missing array state/cum_a"):
        load_model(crafted(tmp_path, model_file, drop))

    def drop_classes(header, arrays):
        header["arrays"] = [e for e in header["arrays"] if e["name"] != "attributes/classes_"]
    with pytest.raises(ModelFileError, match=r"\['classes_'\] missing"):
        load_model(crafted(tmp_path, model_file, drop_classes))


def test_wrong_shapes_and_dtypes_are_refused(tmp_path, model_file):
    def entry(header, name):
        return next(e for e in header["arrays"] if e["name"] == name)

    def short_vector(header, arrays):
        arrays["state/norm_a"] = arrays["state/norm_a"][:2]
        entry(header, "state/norm_a")["shape"] = [2]
    with pytest.raises(ModelFileError, match=r"state/norm_a has .*shape \(2,\), expected .*\(4,\)"):
        load_model(crafted(tmp_path, model_file, short_vector))

    def float32_block(header, arrays):
        arrays["state/block_a"] = arrays["state/block_a"].astype(np.float32)
        entry(header, "state/block_a")["dtype"] = "<f4"
    with pytest.raises(ModelFileError, match="state/block_a has dtype <f4.*expected dtype <f8"):
        load_model(crafted(tmp_path, model_file, float32_block))

    def fewer_rows(header, arrays):
        arrays["state/block_a"] = arrays["state/block_a"][:3]
        entry(header, "state/block_a")["shape"][0] = 3
    with pytest.raises(ModelFileError, match="state/block_a has shape"):
        load_model(crafted(tmp_path, model_file, fewer_rows))

    def header_disagrees(header, arrays):
        entry(header, "state/s_a")["shape"] = [5]
    with pytest.raises(ModelFileError, match=r"state/s_a has dtype <f8 and shape \(4,\), but "
                                             r"the header lists .*\(5,\)"):
        load_model(crafted(tmp_path, model_file, header_disagrees))

    def two_classes(header, arrays):
        arrays["attributes/classes_"] = arrays["attributes/classes_"][:2]
        entry(header, "attributes/classes_")["shape"] = [2]
    with pytest.raises(ModelFileError, match="2 classes but the solver state has 4"):
        load_model(crafted(tmp_path, model_file, two_classes))

    def unexpected(header, arrays):
        arrays["state/bonus"] = np.zeros(3)
        header["arrays"].append({"name": "state/bonus", "dtype": "<f8", "shape": [3]})
    with pytest.raises(ModelFileError, match="unexpected array state/bonus"):
        load_model(crafted(tmp_path, model_file, unexpected))


def test_truncated_array_entry_is_refused(tmp_path, model_file):
    path = tmp_path / "truncated.pgs"
    with zipfile.ZipFile(model_file) as src, zipfile.ZipFile(path, "w") as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename == "state/s_a.npy":
                data = data[:-16]  # a valid .npy header, half of the data
            dst.writestr(info.filename, data)
    with pytest.raises(ModelFileError, match=r"state/s_a is not a valid .npy entry.*ends after"):
        load_model(path)


def test_a_garbled_npy_header_is_refused(tmp_path, model_file):
    """An entry whose .npy header dict does not parse (an unclosed bracket, stored in the
    zip with a valid CRC: written so, or a flip in an entry too large for the CRC to be
    checked before its header is read) is a ModelFileError naming the array, not
    NumPy's tokenize.TokenError."""
    path = tmp_path / "garbled.pgs"
    with zipfile.ZipFile(model_file) as src, zipfile.ZipFile(path, "w") as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename == "state/s_a.npy":
                at = data.index(b"'shape': (") + len(b"'shape': ")
                data = data[:at] + b")" + data[at + 1:]  # '(' -> ')'
            dst.writestr(info.filename, data)
    for reader in (load_model, lambda p: load_learner(str(p), state=False)):
        with pytest.raises(ModelFileError, match=r"state/s_a is not a valid .npy entry"):
            reader(path)


# ---- corruption ------------------------------------------------------------------------
def test_changed_header_fails_the_checksum(tmp_path, model_file):
    path = crafted(tmp_path, model_file, lambda h, a: h["attributes"].update(n_iter_=6),
                   checksum=False)
    for reader in (load_model, read_header):
        with pytest.raises(ModelFileError, match="checksum mismatch"):
            reader(path)
    # without verification the header alone is still readable
    assert read_header(path, verify=False)["attributes"]["n_iter_"] == 6


def test_changed_array_fails_the_checksum(tmp_path, model_file):
    def nudge(header, arrays):
        arrays["state/block_a"] = arrays["state/block_a"].copy()
        arrays["state/block_a"].flat[3] = np.nextafter(arrays["state/block_a"].flat[3], 1.0)
    with pytest.raises(ModelFileError, match="checksum mismatch"):
        load_model(crafted(tmp_path, model_file, nudge, checksum=False))


def test_flipped_bytes_never_load_silently(tmp_path, model_file, fitted):
    """Every flipped byte is refused as a ModelFileError, or is in zip metadata that
    does not change the model (e.g. an entry's timestamp)."""
    original = model_file.read_bytes()
    with zipfile.ZipFile(model_file) as zf:
        # where each entry's (compressed) content lies: after its local header
        payload = set()
        for info in zf.infolist():
            local = original[info.header_offset:info.header_offset + 30]
            start = (info.header_offset + 30 + int.from_bytes(local[26:28], "little")
                     + int.from_bytes(local[28:30], "little"))
            payload.update(range(start, start + info.compress_size))
    target = tmp_path / "flipped.pgs"
    positions = sorted(set(range(0, len(original), 5)) | {len(original) // 2, len(original) - 1})
    refused = set()
    for position in positions:
        data = bytearray(original)
        data[position] ^= 0x55
        target.write_bytes(bytes(data))
        try:
            loaded = load_model(target)
        except ModelFileError as exc:
            refused.add(position)
            assert "\n" not in str(exc) and str(target) in str(exc)
        else:
            assert_same_model(fitted, loaded)
    tested_payload = payload.intersection(positions)
    assert len(tested_payload) > 100
    # a flip in deflate's slack bits leaves the content (and the model) unchanged: fine;
    # every other change to the content is caught
    assert len(tested_payload & refused) > 0.9 * len(tested_payload)


def test_damaged_entry_is_reported_as_corruption(tmp_path, model_file):
    data = bytearray(model_file.read_bytes())
    with zipfile.ZipFile(model_file) as zf:
        info = zf.getinfo("state/block_a.npy")
    # the entry's data starts after its local header (30 bytes + name + extra field)
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    data[start + info.compress_size // 2] ^= 0xFF
    model_file.write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match="corrupted file"):
        load_model(model_file)


# ---- bounded reading: sizes, compression and nesting -------------------------------------
def _npy_header(dtype, shape):
    """The bytes of a .npy header declaring an array of `dtype` and `shape`."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": np.dtype(dtype).str,
                                               "fortran_order": False, "shape": shape})
    return buf.getvalue()


def _declare_huge_block(header, rows):
    """The header of `model_file` with state/block_a declared (rows, 4, 2): 64 * rows bytes."""
    entry = next(e for e in header["arrays"] if e["name"] == "state/block_a")
    entry["shape"] = [rows, 4, 2]
    header["state"]["dim"] = rows


def _peak_of(call):
    """(exception raised by call(), peak bytes traced while it ran)."""
    tracemalloc.start()
    try:
        with pytest.raises(ModelFileError) as info:
            call()
        return info.value, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_deflated_bomb_is_refused_before_inflating(tmp_path, model_file):
    """A ~70 KB file whose deflated entry inflates to 64 MiB (the array its header
    declares) is refused as compressed, without allocating anything that size."""
    header, arrays = raw_parts(model_file)
    rows = 2**20
    _declare_huge_block(header, rows)
    path = tmp_path / "bomb.pgs"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("header.json", json.dumps(header))
        for entry in header["arrays"]:
            name = entry["name"] + ".npy"
            if entry["name"] != "state/block_a":
                with zf.open(name, "w") as out:
                    np.lib.format.write_array(out, arrays[entry["name"]])
                continue
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            with zf.open(info, "w", force_zip64=True) as out:
                out.write(_npy_header("<f8", (rows, 4, 2)))
                for _ in range(64):
                    out.write(bytes(2**20))
    assert path.stat().st_size < 200_000
    for reader in (load_model, read_header):
        exc, peak = _peak_of(lambda: reader(path))
        assert "state/block_a.npy is compressed (deflate)" in str(exc), str(exc)
        assert peak < 2 * path.stat().st_size + 2**20


def test_compressed_model_files_are_refused(tmp_path, model_file):
    """save_model writes stored entries; the same file deflated is refused."""
    path = tmp_path / "deflated.pgs"
    with zipfile.ZipFile(model_file) as src, \
            zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info.filename))
    with pytest.raises(ModelFileError, match=r"header.json is compressed \(deflate\).*stored"):
        read_header(path, verify=False)
    with zipfile.ZipFile(model_file) as zf:
        assert {info.compress_type for info in zf.infolist()} == {zipfile.ZIP_STORED}


def _patch_directory_size(data, name, size):
    """`data` (a zip archive) with the central directory's sizes of entry `name` set."""
    at = 0
    encoded = name.encode()
    while True:
        at = data.index(b"PK\x01\x02", at)
        length = int.from_bytes(data[at + 28:at + 30], "little")
        if data[at + 46:at + 46 + length] == encoded:
            break
        at += 4
    data[at + 20:at + 28] = size.to_bytes(4, "little") * 2  # compressed, uncompressed
    return data


def test_sizes_beyond_the_file_are_refused_before_allocating(tmp_path, model_file):
    """A stored entry whose zip directory claims 1 GiB (and whose .npy header and the
    model's header agree) in a file of a few KB: refused, nothing that size allocated."""
    header, arrays = raw_parts(model_file)
    rows = 2**24
    _declare_huge_block(header, rows)
    path = tmp_path / "claims.pgs"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("header.json", json.dumps(header))
        for entry in header["arrays"]:
            with zf.open(entry["name"] + ".npy", "w") as out:
                if entry["name"] == "state/block_a":
                    out.write(_npy_header("<f8", (rows, 4, 2)))
                else:
                    np.lib.format.write_array(out, arrays[entry["name"]])
    declared = len(_npy_header("<f8", (rows, 4, 2))) + 64 * rows
    path.write_bytes(bytes(_patch_directory_size(bytearray(path.read_bytes()),
                                                 "state/block_a.npy", declared)))
    with zipfile.ZipFile(path) as zf:  # what the attack needs: the directory agrees
        assert zf.getinfo("state/block_a.npy").file_size == declared
    exc, peak = _peak_of(lambda: load_model(path))
    assert "state/block_a.npy claims 1073741952 bytes, more than the" in str(exc), str(exc)
    assert peak < 2**20 + 2 * path.stat().st_size


def test_a_zero_itemsize_dtype_is_refused(tmp_path, model_file):
    def empty_strings(header, arrays):
        header["arrays"].append({"name": "attributes/names_", "dtype": "<U0",
                                 "shape": [2**40]})
    with pytest.raises(ModelFileError, match="names_ has the unsupported dtype '<U0'"):
        load_model(crafted(tmp_path, model_file, empty_strings, checksum=False,
                           skip=("attributes/names_",)))


def test_reading_memory_is_a_small_multiple_of_the_file(tmp_path):
    """Loading a model (here ~2 MiB of arrays) peaks at a few times the file's size
    (a state stored whole: every column is reached, so no row is left out)."""
    rng = np.random.RandomState(0)
    X = sp.random(300, 2**16, density=3e-2, format="csr", random_state=rng)
    est = PGSClassifier(iterate="random", random_state=0).fit(X, rng.randint(0, 3, 300))
    path = tmp_path / "m.pgs"
    save_model(est, path)
    size = path.stat().st_size
    tracemalloc.start()
    try:
        load_model(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert size > 2**20 and peak < 4 * size, (size, peak)


def _nested(depth):
    """A dict nesting `depth` levels of dicts (itself the first)."""
    value = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def test_deeply_nested_extra_is_refused_when_saving(tmp_path, fitted):
    """What save_model writes, load_model reads: extra nests at most 63 levels."""
    limit = jsonvalues.MAX_JSON_DEPTH - 1
    path = tmp_path / "m.pgs"
    with pytest.raises(ModelFileError, match=r"extra\['a'\].*nested too deeply.*extra at most "
                                             f"{limit}") as info:
        save_model(fitted, path, extra=_nested(500))
    assert "\n" not in str(info.value) and os.listdir(tmp_path) == []
    with pytest.raises(ModelFileError, match="nested too deeply"):
        save_model(fitted, path, extra=_nested(limit + 1))
    cyclic = {}
    cyclic["self"] = cyclic
    with pytest.raises(ModelFileError, match="nested too deeply"):
        save_model(fitted, path, extra=cyclic)
    # a non-finite float is stored as an object: one level more
    inner = _nested(limit)
    node = inner
    while node:
        node = node["a"]
    node["x"] = math.inf
    with pytest.raises(ModelFileError, match="nested too deeply"):
        save_model(fitted, path, extra=inner)
    node["x"] = 1.5
    for extra in (inner, _nested(limit - 1) | {"inf": math.inf}):
        save_model(fitted, path, extra=extra)
        assert read_header(path)["extra"] == extra
        assert load_model(path, return_header=True)[1]["extra"] == extra


def test_deeply_nested_headers_are_refused_before_parsing(tmp_path, model_file, capsys):
    from onlinepgs.cli import main

    header, arrays = raw_parts(model_file)
    text = json.dumps(header)
    # 500 levels of lists, brackets inside strings not counted
    deep = text[:-1] + ', "extra": {"s": "[[[{{{", "a": ' + "[" * 500 + "]" * 500 + "}}"
    path = tmp_path / "deep.pgs"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("header.json", deep)
    for reader in (load_model, read_header):
        with pytest.raises(ModelFileError, match="header.json nests 502 levels of lists and "
                                                 r"objects \(at most 64\)"):
            reader(path)
    assert main(["info", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nests 502 levels" in err
    assert jsonvalues.json_depth(b'{"a": "]]]}}", "b": [{"c": "\\"[["}]}') == 3


def test_huge_integers_and_headers_are_refused_when_saving(tmp_path, fitted, monkeypatch):
    path = tmp_path / "m.pgs"
    with pytest.raises(ModelFileError, match=r"extra\['n'\] is an integer of 13288 bits"):
        save_model(fitted, path, extra={"n": 10**4000})
    save_model(fitted, path, extra={"n": 2**4000})
    assert read_header(path)["extra"]["n"] == 2**4000
    # the header's size limit, lowered: the writer refuses what the reader would
    size = len(path.read_bytes())
    monkeypatch.setattr(container, "_MAX_HEADER_BYTES", 20_000)
    with pytest.raises(ModelFileError, match="header would have .* more than the 20000"):
        save_model(fitted, path, extra={"s": "x" * 20_000})
    assert len(path.read_bytes()) == size
    big = crafted(tmp_path, path, lambda h, a: h.update(extra={"s": "x" * 20_000}))
    with pytest.raises(ModelFileError, match=r"header.json has \d+ bytes \(at most 20000\)"):
        load_model(big)


def test_arrays_in_fortran_order_and_in_many_pieces_load_checked(tmp_path, wide_model,
                                                                 monkeypatch):
    """A kept array is read (and hashed) a piece at a time (`container._READ_BYTES`) as it
    comes in C order, and hashed in C order after its read in Fortran order (a file
    another writer made): both load as saved, with the checksum verified, and a
    changed byte in either is refused."""
    monkeypatch.setattr(container, "_READ_BYTES", 1000)  # many pieces, a partial last
    path = tmp_path / "m.pgs"
    save_model(wide_model, path)
    header, arrays = raw_parts(path)
    name = next(n for n, a in arrays.items() if a.ndim == 3 and a.size > 10_000)

    def written(path, arrays, order):  # the saved file's checksum, not recomputed
        arrays = {k: np.asarray(v, order=order) if k == name else v
                  for k, v in arrays.items()}
        write_parts(path, header, arrays, checksum=False)
        return path
    fortran = written(tmp_path / "fortran.pgs", arrays, "F")
    assert not np.isfortran(raw_parts(path)[1][name]) and np.isfortran(raw_parts(fortran)[1][name])
    for source in (path, fortran):
        np.testing.assert_array_equal(load_learner(source).coef_, wide_model.coef_)
    changed = dict(arrays)
    changed[name] = arrays[name].copy()
    changed[name].flat[12_345] += 1.0
    for order in "CF":
        with pytest.raises(ModelFileError, match="checksum mismatch"):
            load_learner(written(tmp_path / f"bad_{order}.pgs", changed, order))


# ---- atomic writes ---------------------------------------------------------------------
def assert_only(directory, names):
    assert sorted(os.listdir(directory)) == sorted(names)


@pytest.fixture
def previous(tmp_path):
    """A model file already at the target path, and its bytes."""
    X, y, classes = make_data("regressor_dense")
    path = tmp_path / "model.pgs"
    save_model(PGSRegressor(random_state=1).fit(X, y), path)
    return path, path.read_bytes()


def test_crash_at_rename_keeps_the_previous_file(previous, fitted, monkeypatch):
    path, before = previous

    def crash(src, dst):
        assert os.path.exists(src) and os.path.getsize(src) > 0  # fully written first
        raise OSError("disk full (simulated)")
    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="simulated"):
        save_model(fitted, path)
    assert path.read_bytes() == before
    assert_only(path.parent, ["model.pgs"])


def test_crash_while_writing_arrays_keeps_the_previous_file(previous, fitted, monkeypatch):
    path, before = previous
    calls = []
    real = writing._write_array

    def crash_on_third(fileobj, arr, *rest):
        calls.append(arr.shape)
        if len(calls) == 3:
            raise KeyboardInterrupt  # not only Exceptions: an interrupt too
        real(fileobj, arr, *rest)
    monkeypatch.setattr(writing, "_write_array", crash_on_third)
    with pytest.raises(KeyboardInterrupt):
        save_model(fitted, path)
    assert len(calls) == 3
    assert path.read_bytes() == before
    assert_only(path.parent, ["model.pgs"])
    load_model(path)  # still a valid model


@pytest.fixture
def wide_model():
    """A model whose arrays are a few MiB: hashed while written (`_OVERLAP_BYTES`)."""
    rng = np.random.default_rng(0)
    X = sp.random(400, 100_000, density=0.01, format="csr", random_state=0)
    y = rng.integers(0, 5, 400)
    est = PGSClassifier(random_state=0).fit(X, y)  # the race's runs: several states
    assert est._state.nbytes > 4 * writing._OVERLAP_BYTES
    return est


def test_arrays_hashed_while_written_give_the_bytes_of_hashing_first(tmp_path, wide_model,
                                                                     monkeypatch):
    """A large file's digest is taken on a thread while its arrays are written, then the
    header filled in where it lies: byte for byte the file hashed first (the small
    files' way), which the reader verifies."""
    save_model(wide_model, tmp_path / "overlapped.pgs")
    monkeypatch.setattr(writing, "_OVERLAP_BYTES", 2**62)
    save_model(wide_model, tmp_path / "first.pgs")
    overlapped = (tmp_path / "overlapped.pgs").read_bytes()
    assert overlapped == (tmp_path / "first.pgs").read_bytes()
    assert len(overlapped) > 4 * 2**20
    reloaded = load_model(tmp_path / "overlapped.pgs")  # the checksum verified
    np.testing.assert_array_equal(reloaded.coef_, wide_model.coef_)


def test_crash_while_hashing_and_writing_keeps_the_previous_file(previous, wide_model,
                                                                   monkeypatch):
    """An interrupt between the arrays of a large file: the previous file stays whole,
    and the hashing thread has ended."""
    import threading

    path, before = previous
    real, calls = writing._write_array, []

    def crash_on_fifth(fileobj, arr, hasher=None):
        calls.append(hasher is not None)
        if len(calls) == 5:
            raise KeyboardInterrupt
        real(fileobj, arr, hasher)
    monkeypatch.setattr(writing, "_write_array", crash_on_fifth)
    with pytest.raises(KeyboardInterrupt):
        save_model(wide_model, path)
    assert calls == [True] * 5  # the overlapped way
    assert path.read_bytes() == before
    assert_only(path.parent, ["model.pgs"])
    assert not [t for t in threading.enumerate() if t.name == "onlinepgs-sha256"]


def test_crash_at_fsync_leaves_no_file_behind(tmp_path, fitted, monkeypatch):
    def crash(fd):
        raise OSError("I/O error (simulated)")
    monkeypatch.setattr(os, "fsync", crash)
    with pytest.raises(OSError, match="simulated"):
        save_model(fitted, tmp_path / "new.pgs")
    assert_only(tmp_path, [])


def test_successful_save_replaces_the_file(previous, fitted, monkeypatch):
    path, before = previous
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    save_model(fitted, path)
    assert len(synced) == 2  # the file, then its directory
    assert path.read_bytes() != before
    assert_only(path.parent, ["model.pgs"])
    assert_same_model(fitted, load_model(path))
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~umask


def test_model_file_error_is_a_pickleable_value_error():
    exc = ModelFileError("/tmp/m.pgs", "bad\nthing")
    assert isinstance(exc, ValueError)
    assert str(exc) == "/tmp/m.pgs: bad thing"
    again = pickle.loads(pickle.dumps(exc))
    assert (again.path, again.reason, str(again)) == (exc.path, exc.reason, str(exc))


@pytest.mark.parametrize("where", ["write", "fsync"])
def test_a_full_disk_names_the_file_and_keeps_the_previous_one(previous, fitted, monkeypatch,
                                                                where):
    import errno

    path, before = previous

    def no_space(*args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    if where == "write":
        monkeypatch.setattr(writing, "_write_array", no_space)
    else:
        monkeypatch.setattr(os, "fsync", no_space)
    with pytest.raises(OSError, match=re.escape(f"cannot write {path}: No space left on "
                                                f"device; the previous {path} is intact")) \
            as info:
        save_model(fitted, path)
    assert info.value.errno == errno.ENOSPC and "\n" not in str(info.value)
    assert path.read_bytes() == before
    assert_only(path.parent, ["model.pgs"])
    with pytest.raises(OSError, match=re.escape(f"no file was written at "
                                                f"{path.parent / 'new.pgs'}")):
        save_model(fitted, path.parent / "new.pgs")
    assert_only(path.parent, ["model.pgs"])


def test_an_input_error_inside_the_writer_is_not_called_a_full_disk(tmp_path):
    """Only errors of room are reworded: an input that fails keeps its own message."""
    def failing_input(f):
        raise FileNotFoundError(2, "No such file or directory", "input.svm")
    with pytest.raises(FileNotFoundError, match="input.svm") as info:
        model_io.replace_atomically(tmp_path / "pred.txt", failing_input)
    assert "intact" not in str(info.value)
    assert_only(tmp_path, [])


def _age(path, seconds):
    old = os.stat(path).st_mtime - seconds
    os.utime(path, (old, old))


def test_temp_files_of_killed_writers_are_removed_by_the_next_write(tmp_path, fitted):
    """A writer killed mid-write leaves .model.pgs.<hex>.tmp; the next successful write
    of model.pgs removes it once its lock is free and it is a minute old. A live
    writer's file (locked) and other names stay."""
    import signal

    path = tmp_path / "model.pgs"
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the writer: stops half-way, holding its temporary file
        try:
            def stall(f):
                f.write(b"PK\x03\x04 half a model")
                f.flush()
                os.write(ready_w, b"1")
                time.sleep(60)
            model_io.replace_atomically(path, stall)
        finally:
            os._exit(1)
    try:
        assert os.read(ready_r, 1) == b"1"
        (live,) = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
        assert re.fullmatch(r"\.model\.pgs\.[0-9a-f]{12}\.tmp", live.name)
        _age(live, 3600)
        save_model(fitted, path)
        assert live.exists()  # its writer is alive: never removed, however old
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(ready_r)
        os.close(ready_w)
    # the writer is gone; an unlocked file of an older writer, younger and older ones
    young = tmp_path / ".model.pgs.0123456789ab.tmp"
    unlocked = tmp_path / ".model.pgs.ba9876543210.tmp"
    other = tmp_path / ".other.pgs.0123456789ab.tmp"
    mine = tmp_path / ".model.pgs.backup.tmp"
    for p in (young, unlocked, other, mine):
        p.write_bytes(b"x")
    for p in (unlocked, other, mine):
        _age(p, 3600)
    save_model(fitted, path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["model.pgs", young.name, other.name, mine.name])
    assert_same_model(fitted, load_model(path))


# ---- fuzzing (bounded in examples and time: runs in every test run) --------------------
@fuzzer(120, MUTATIONS, st.booleans())
def test_fuzzed_model_files_load_the_same_model_or_a_one_line_error(tmp_path, model_file,
                                                                    fitted, mutations, cut):
    """Random edits of a model file's bytes (insertions, deletions, replacements, and a cut
    at the last edit): load_model gives back the very model that was saved, or a one-line
    ModelFileError naming the file, and reading allocates no more than a small multiple
    of the file's size. The reported model alone (load_learner(state=False): predict,
    eval, gap, info) is the saved model's, or refused alike."""
    data = mutate(model_file.read_bytes(), mutations)
    if cut:
        data = data[:int(mutations[-1][1] * len(data))]
    target = tmp_path / "fuzzed.pgs"
    target.write_bytes(data)
    outcomes = []
    for loader in LOADERS.values():
        tracemalloc.start()
        try:
            loaded = loader(target)
        except ModelFileError as exc:
            assert "\n" not in str(exc) and str(target) in str(exc)
            outcomes.append(False)
        else:
            outcomes.append(True)
            if loader is load_model:
                assert_same_model(fitted, loaded)
            else:
                np.testing.assert_array_equal(loaded.coef_, fitted.coef_)
                np.testing.assert_array_equal(loaded.intercept_, fitted.intercept_)
        finally:
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
        assert peak < 8 * model_file.stat().st_size + (1 << 20)
    assert outcomes[0] == outcomes[1]


# ---- SDCA model files ----------------------------------------------------------------------
@pytest.fixture
def sdca_file(tmp_path):
    from onlinepgs import SDCAClassifier
    X, y, classes = make_data("multiclass_dense")
    path = tmp_path / "sdca.pgs"
    save_model(SDCAClassifier(sigma=1e-2, random_state=0).fit(X, y), path)
    return path


def _replace_array(name, value):
    def mutate(header, arrays):
        arrays[name] = value
        for entry in header["arrays"]:
            if entry["name"] == name:
                entry["shape"], entry["dtype"] = list(value.shape), value.dtype.str
    return mutate


@pytest.mark.parametrize("mutate, message", [
    (lambda h, a: h["attributes"].pop("n_iter_"), r"fitted attribute\(s\) \['n_iter_'\] missing"),
    (lambda h, a: h["attributes"].pop("gap_history_"), "gap_history_'] missing"),
    (lambda h, a: h["state"].pop("solver"), "not marked solver 'sdca'"),
    (lambda h, a: h["attributes"].update(gap_history_=[[1.0], "x"]), "not a list of number"),
    (lambda h, a: [_replace_array("state/coef", np.zeros((2, 8)))(h, a),
                   _replace_array("state/intercept_weight", np.zeros(2))(h, a)],
     r"4 classes but the solver state has 2"),
    (_replace_array("state/coef", np.zeros((4, 8), dtype=np.float32)), "expected float64"),
    (_replace_array("state/coef", np.full((4, 8), np.inf)), "not finite"),
    (_replace_array("state/intercept_weight", np.zeros(3)), "expected float64"),
    (lambda h, a: [h["arrays"].append(dict(h["arrays"][0], name="state/extra")),
                   a.update({"state/extra": a[h["arrays"][0]["name"]]})],
     "unexpected array state/extra"),
])
def test_malformed_sdca_models_are_refused(tmp_path, sdca_file, mutate, message):
    with pytest.raises(ModelFileError, match=message) as info:
        load_model(crafted(tmp_path, sdca_file, mutate))
    assert "\n" not in str(info.value) and str(tmp_path) in str(info.value)


# ---- the format is frozen: files written before model_io became a package ---------------
# tests/model_files/ holds files written by onlinepgs/model_io.py (one module, before the
# move to the package onlinepgs/model_io/): a PGSClassifier of 3 string classes with an
# extra holding an infinity, and an SDCARegressor.
MODEL_FILES = os.path.join(os.path.dirname(__file__), "model_files")


@pytest.mark.parametrize("name", ["pgs_classifier_v1.pgs", "sdca_regressor_v1.pgs"])
@pytest.mark.parametrize("loader", ["load_model", "load_learner"])
def test_files_of_the_single_module_load_and_save_to_the_same_bytes(tmp_path, monkeypatch,
                                                                    name, loader):
    """A file of format_version 1 written before the move loads (as estimator or learner),
    predicts what its weights say (a plain NumPy product), and saving it again writes the
    very same bytes: the format did not change. The header records the package version,
    which enters the bytes, so it is set to the file's while saving."""
    import onlinepgs

    path = os.path.join(MODEL_FILES, name)
    model, header = getattr(model_io, loader)(path, return_header=True)
    X = np.array([[0.5, -1.0, 2.0], [-0.3, 0.8, 0.1], [1.5, 0.2, -0.7]])
    if header["estimator"] == "PGSClassifier":
        assert header["extra"] == {"examples_consumed": 60, "note": [1, math.inf]}
        assert model.classes_.tolist() == ["eggs", "ham", "spam"]
        scores = X @ model.coef_.T + model.intercept_
        np.testing.assert_allclose(model.decision_function(X), scores, rtol=1e-12)
        assert model.predict(X).tolist() == model.classes_[scores.argmax(axis=1)].tolist()
    else:
        np.testing.assert_allclose(model.predict(X), X @ model.coef_ + model.intercept_,
                                   rtol=1e-12)
    monkeypatch.setattr(onlinepgs, "__version__", header["onlinepgs_version"])
    if header["estimator"].startswith("PGS"):
        # a parameter added since (issue 34's forget, issue 35's class_weight) is written
        # at its default, which reads back as the file without it (issue 35's
        # interactions, None, issue 36's l1, 0, and multi_class, "ovr", and issue 52's
        # geometry, "global", and eta, "auto", are not written at all, nor issue 53's classes,
        # ever, nor n_jobs): save the model as the file's onlinepgs did
        added = {k: v for k, v in model.get_params().items() if k not in header["params"]}
        assert added == {"forget": 1.0, "interactions": None, "l1": 0.0,
                         "geometry": "global", "eta": "auto", "n_jobs": None,
                         **({"class_weight": None, "multi_class": "ovr", "classes": None}
                            if model._classifier else {})}
        params = model.get_params
        monkeypatch.setattr(model, "get_params", lambda deep=True: {
            k: v for k, v in params(deep).items() if k not in added})
        model._state_params = {k: v for k, v in model._state_params.items()
                               if k not in added}
    save_model(model, tmp_path / name, extra=header["extra"])
    if header["estimator"] == "PGSClassifier":
        # its solver state is version 3, written again as 4: the two sums of the reported
        # iterate's progressive loss added, unknown (NaN) for the rows of the old file
        # (and so the statistics named after them); everything else is the same
        new = model_io.read_header(tmp_path / name)
        assert (header["state"]["version"], new["state"]["version"]) == (3, 4)
        assert math.isnan(new["state"].pop("sum_weighted_loss_reported"))
        assert new["state"].pop("n_mistakes_reported") == 0
        for key in ("progressive_loss", "progressive_mistakes", "progressive_error_rate"):
            # the old figures were the last iterate's: now under that name
            assert new["online_stats"].pop(key + "_last") == header["online_stats"][key]
            assert math.isnan(new["online_stats"].pop(key))
            del header["online_stats"][key]
        del header["state"]["version"], new["state"]["version"]
        del header["checksum"], new["checksum"]  # of the header's bytes, which changed
        # issue 36: a new, informational top-level field (readers ignore it): the count
        # of the weights' non-zeros, which `info` prints without numpy
        assert new.pop("weights") == {"n_nonzero": model.n_nonzero_,
                                      "n_weights": model.coef_.size}
        assert new == header
        again = getattr(model_io, loader)(tmp_path / name)
        np.testing.assert_array_equal(again._state.block_a, model._state.block_a)
        return
    with open(path, "rb") as f:
        assert (tmp_path / name).read_bytes() == f.read()


def test_the_package_imports_no_scikit_learn_and_keeps_its_modules_small(tmp_path):
    """The command line reads and writes models through onlinepgs.model_io without
    scikit-learn: every module of the package imported, both kinds of file loaded as
    learners and saved again, and still no sklearn module. And the house rule for the
    package: no module above 600 lines."""
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = ("import os, pkgutil, sys, importlib, onlinepgs.model_io as mio\n"
            "for m in pkgutil.iter_modules(mio.__path__):\n"
            "    importlib.import_module('onlinepgs.model_io.' + m.name)\n"
            f"for name in {sorted(os.listdir(MODEL_FILES))!r}:\n"
            f"    learner = mio.load_learner(os.path.join({MODEL_FILES!r}, name))\n"
            f"    mio.save_model(learner, os.path.join({str(tmp_path)!r}, name))\n"
            "assert not [m for m in sys.modules if m.startswith('sklearn')]\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root,
                   env={**os.environ, "PYTHONPATH": root})
    assert sorted(os.listdir(tmp_path)) == sorted(os.listdir(MODEL_FILES))
    for module in os.listdir(model_io.__path__[0]):
        if module.endswith(".py"):
            with open(os.path.join(model_io.__path__[0], module)) as f:
                assert sum(1 for _ in f) <= 600, module
