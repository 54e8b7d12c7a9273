"""Compact PGS model files: the solver state stored by its non-zero rows (bit for bit,
resumable), files without the solver state (--no-state), and ``info --weights`` from
sparse weights."""
import os

import numpy as np
import pytest
import scipy.sparse as sp

from onlinepgs.model_io import (ModelFileError, container, load_learner, read_header, save_model,
                                writing)
from onlinepgs.pgs import PGSClassifierLearner, PGSRegressorLearner

N_BITS = 20


def _hashed_data(seed, rows=60):
    """Rows of a 2**20-column space with ~8 non-zeros each: most columns never seen."""
    rng = np.random.RandomState(seed)
    indices = np.sort(rng.randint(0, 2**N_BITS, (rows, 8)), axis=1).ravel()
    X = sp.csr_matrix((rng.rand(rows * 8), indices, np.arange(0, 8 * rows + 1, 8)),
                      shape=(rows, 2**N_BITS))
    X.sum_duplicates()
    y = rng.randint(0, 3, rows)
    return X, y


def _same_state(a, b):
    """Two states' to_dict are equal bit for bit (arrays compared by their bytes)."""
    da, db = a.to_dict(), b.to_dict()
    assert da.keys() == db.keys()
    for key, value in da.items():
        if isinstance(value, np.ndarray):
            assert value.dtype == db[key].dtype and value.shape == db[key].shape, key
            assert value.tobytes() == db[key].tobytes(), key
        else:
            assert value == db[key] or (value != value and db[key] != db[key]), key


@pytest.mark.parametrize("iterate", ["last", "average"])
def test_a_mostly_zero_state_is_stored_by_rows_and_resumes_bit_for_bit(tmp_path, iterate):
    X, y = _hashed_data(0)
    X2, y2 = _hashed_data(5)
    est = PGSClassifierLearner(sigma=1e-2, iterate=iterate, random_state=0)
    est.partial_fit(X, y, classes=[0, 1, 2])
    path = tmp_path / "m.pgs"
    save_model(est, path)
    header = read_header(path)
    rows = header["state"]["stored_rows"]
    reached = np.unique(X.indices).size
    # the intercept's row and every column a row reached, no other (3 problems x 2 slots)
    assert rows["arrays"] == ["block_a"] and rows["n_rows"] <= reached + 1
    dense_block = (2**N_BITS + 1) * 3 * est._state.to_dict()["block_a"].shape[2] * 8
    assert os.path.getsize(path) < dense_block / 50
    loaded = load_learner(path)
    _same_state(loaded._state, est._state)
    est.partial_fit(X2, y2)
    loaded.partial_fit(X2, y2)  # resumed: exactly the unsaved run
    _same_state(loaded._state, est._state)
    assert np.array_equal(loaded.coef_, est.coef_)
    np.testing.assert_equal(loaded.online_stats_, est.online_stats_)


def test_a_dense_state_is_stored_whole(tmp_path):
    """Every column reached: cutting rows would not be smaller, the file is as before."""
    rng = np.random.RandomState(0)
    X = rng.randn(50, 8)
    est = PGSRegressorLearner(sigma=1e-2, random_state=0).fit(X, X @ np.arange(8.0))
    save_model(est, tmp_path / "m.pgs")
    header = read_header(tmp_path / "m.pgs")
    assert "stored_rows" not in header["state"]
    assert {"state/stored_rows"} & {e["name"] for e in header["arrays"]} == set()
    _same_state(load_learner(tmp_path / "m.pgs")._state, est._state)


def _rewritten(tmp_path, source, mutate):
    raw, arrays = container.read(source)
    raw.pop("checksum")
    mutate(raw, arrays)
    for entry in raw["arrays"]:
        entry["shape"] = list(arrays[entry["name"]].shape)
        entry["dtype"] = arrays[entry["name"]].dtype.str
    path = tmp_path / "crafted.pgs"
    writing.write(path, raw, arrays)
    return path


@pytest.mark.parametrize("mutate, message", [
    (lambda h, a: a.__setitem__("state/stored_rows", a["state/stored_rows"][::-1].copy()),
     "state/stored_rows is not strictly increasing row numbers"),
    (lambda h, a: h["state"]["stored_rows"].__setitem__("n_rows", 3),
     "expected 3 integer row numbers"),
    (lambda h, a: h["state"]["dim"].__class__ and h["state"].__setitem__("dim", 2**40),
     "inconsistent model: a solver state over 1099511627775 features"),
    (lambda h, a: h["state"].pop("stored_rows"), "unexpected array state/stored_rows"),
    (lambda h, a: h["state"].__setitem__("stored_rows", [1]), "is not {\"arrays\""),
], ids=["unordered", "count", "huge dim", "no entry", "malformed"])
def test_damaged_stored_rows_are_refused(tmp_path, mutate, message):
    X, y = _hashed_data(0, rows=10)
    est = PGSClassifierLearner(sigma=1e-2, random_state=0).partial_fit(X, y, classes=[0, 1, 2])
    save_model(est, tmp_path / "m.pgs")
    with pytest.raises(ModelFileError, match="crafted.pgs: ") as info:
        load_learner(_rewritten(tmp_path, tmp_path / "m.pgs", mutate))
    assert message in str(info.value)


# ---- files without the solver state ---------------------------------------------------
def test_a_file_without_state_round_trips_smaller_and_sparse(tmp_path):
    X, y = _hashed_data(0)
    est = PGSClassifierLearner(sigma=1e-2, random_state=0).partial_fit(X, y, classes=[0, 1, 2])
    save_model(est, tmp_path / "full.pgs")
    save_model(est, tmp_path / "weights.pgs", state=False)
    full, small = (os.path.getsize(tmp_path / n) for n in ("full.pgs", "weights.pgs"))
    # smaller than the (compact) state, and than the dense weights by far
    assert small < 0.8 * full and small < 3 * 2**N_BITS * 8 / 100
    header = read_header(tmp_path / "weights.pgs")
    assert header["state"]["solver"] == "pgs-weights"
    assert header["state"]["coef"]["storage"] == "sparse"
    loaded = load_learner(tmp_path / "weights.pgs")
    model = loaded.model_
    assert model.is_sparse and model.n_nonzero == est.model_.n_nonzero
    # the same weights, stored and predicted bit for bit (sparse rows)
    assert np.array_equal(model.coef_sparse.to_scipy().toarray(), est.coef_)
    assert np.array_equal(loaded.decision_function(X), est.decision_function(X))
    assert np.array_equal(loaded.predict_proba(X), est.predict_proba(X))
    np.testing.assert_equal(loaded.online_stats_, est.online_stats_)
    with pytest.raises(ValueError, match="saved without its solver state"):
        loaded.partial_fit(X, y)
    # fit starts anew: the model is a trained one again, as the original's first pass
    refit = loaded.fit(X, y)
    twin = PGSClassifierLearner(sigma=1e-2, random_state=0).fit(X, y)
    assert np.array_equal(refit.coef_, twin.coef_)


def _cli(*argv, cwd):
    import subprocess
    import sys

    import onlinepgs
    # the package under test, also from another directory
    root = os.path.dirname(os.path.dirname(os.path.abspath(onlinepgs.__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])}
    return subprocess.run([sys.executable, "-m", "onlinepgs.cli", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def _svmlight(path, X, y):
    with open(path, "w") as f:
        for row, label in zip(X, y):
            f.write(f"{label} " + " ".join(f"{j + 1}:{v:.6g}" for j, v in zip(
                row.indices, row.data)) + "\n")


def test_train_no_state_files_predict_alike_and_refuse_training(tmp_path):
    X, y = _hashed_data(3, rows=300)
    _svmlight(tmp_path / "d.svm", X[:, :5000], np.where(y == 0, -1, 1))
    for args in (["-o", "full.pgs"], ["-o", "ns.pgs", "--no-state"]):
        done = _cli("train", "d.svm", "--quiet", "--sigma", "0.01", *args, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    assert os.path.getsize(tmp_path / "ns.pgs") < os.path.getsize(tmp_path / "full.pgs") / 2
    preds = {}
    for name in ("full.pgs", "ns.pgs"):
        done = _cli("predict", name, "d.svm", "-o", f"{name}.txt", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        preds[name] = (tmp_path / f"{name}.txt").read_text()
        for command in ("eval", "gap", "info"):
            done = _cli(command, name, *(["d.svm"] if command != "info" else []),
                        cwd=tmp_path)
            assert done.returncode == 0, (command, done.stderr)
            preds[name, command] = done.stdout.replace(name, "")
    assert preds["full.pgs"] == preds["ns.pgs"]
    assert "solver state: none (saved with --no-state" in preds["ns.pgs", "info"]
    assert "solver state" not in preds["full.pgs", "info"]
    # info's other lines are the same (the online statistics were saved with the weights)
    assert [l for l in preds["ns.pgs", "info"].splitlines() if "solver state" not in l] \
        == preds["full.pgs", "info"].splitlines()
    assert preds["full.pgs", "eval"] == preds["ns.pgs", "eval"]
    assert preds["full.pgs", "gap"] == preds["ns.pgs", "gap"]
    for extra in ([], ["--resume"]):
        done = _cli("train", "d.svm", "-i", "ns.pgs", "-o", "x.pgs", *extra, cwd=tmp_path)
        assert done.returncode == 1 and not (tmp_path / "x.pgs").exists()
        assert done.stderr.strip().splitlines() == [
            "onlinepgs: error: ns.pgs: saved without its solver state (--no-state): it "
            "predicts but cannot be trained further with -i or --resume; train again "
            "from the data (without --no-state to continue later)"]


def test_info_weights_of_a_sparse_file_never_builds_the_dense_array(tmp_path, monkeypatch,
                                                                    capsys):
    from onlinepgs.cli import main
    from onlinepgs.model import LinearModel

    X, y = _hashed_data(0)
    est = PGSClassifierLearner(sigma=1e-2, random_state=0).partial_fit(X, y, classes=[0, 1, 2])
    save_model(est, tmp_path / "w.pgs", state=False)

    def refuse(self):
        raise AssertionError("the dense (K, d) weights were built")
    monkeypatch.setattr(LinearModel, "coef", property(refuse))
    assert main(["info", str(tmp_path / "w.pgs"), "--weights", "--top", "0", "--json"]) == 0
    import json
    report = json.loads(capsys.readouterr().out)
    monkeypatch.undo()
    report = report.get("weights", report)
    coef = est.coef_  # the yardstick: the trained learner's dense weights
    for k, problem in enumerate(report["problems"]):
        columns = np.flatnonzero(coef[k])
        assert problem["n_nonzero"] == columns.size
        got = {w["column"]: w["weight"] for w in problem["weights"]}
        assert got == {int(c): float(coef[k, c]) for c in columns}
        magnitudes = [abs(w["weight"]) for w in problem["weights"]]
        assert magnitudes == sorted(magnitudes, reverse=True)


@pytest.mark.parametrize("rows", [30, 3000])
def test_a_save_holds_no_copy_of_the_solver_state(tmp_path, rows):
    """Saving writes the solver state's arrays as they are, its kept rows a piece at a
    time (stored by rows: 30 rows; whole: 3000 rows over 2**15 columns): the memory a
    save allocates (tracemalloc, which sees NumPy's buffers) stays far under one copy
    of the state, and the file loads the same state bit for bit."""
    import tracemalloc

    rng = np.random.RandomState(0)
    X = sp.random(rows, 2**15, density=2**-9, random_state=rng, format="csr")
    y = rng.randint(0, 20, rows)
    est = PGSClassifierLearner(sigma=1e-2, random_state=0).partial_fit(X, y, classes=range(20))
    est.model_  # the weights, which `info`'s count reads, made before
    state_bytes = est._state.to_dict()["block_a"].nbytes  # 2**15 x 20 x 2 doubles: 10 MB
    tracemalloc.start()
    try:
        save_model(est, tmp_path / "m.pgs")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < state_bytes / 4, (peak, state_bytes)
    assert ("stored_rows" in read_header(tmp_path / "m.pgs")["state"]) == (rows == 30)
    _same_state(load_learner(tmp_path / "m.pgs")._state, est._state)
