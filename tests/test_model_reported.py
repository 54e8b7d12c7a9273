"""Reading a model for predict, eval, gap and info: the reported model's weights from the
solver state, read in slices, never the dense states of a race's runs (issue 50, item 14;
onlinepgs/model_io/reported.py)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from onlinepgs.model_io import ModelFileError, load_learner, save_model
from onlinepgs.model_io import reported
from onlinepgs.pgs import PGSClassifierLearner, PGSRegressorLearner

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL_FILES = os.path.join(os.path.dirname(__file__), "model_files")


def tiny_svmlight(path, rows=600, width=2**20, seed=0):
    """A small svmlight file (~40 KB) of 5 features a row spread over `width` columns."""
    rng = np.random.RandomState(seed)
    with open(path, "w") as f:
        for _ in range(rows):
            idx = np.sort(rng.choice(width, 5, replace=False)) + 1
            label = "1" if rng.rand() < 0.5 else "-1"
            f.write(label + " " + " ".join(f"{j}:{rng.rand():.3f}" for j in idx) + "\n")


def peak_rss(args):
    """Peak resident memory (bytes) of `python -m onlinepgs.cli ARGS`, as the only child
    of a wrapper process (RUSAGE_CHILDREN: the largest of its waited children)."""
    code = ("import resource, subprocess, sys\n"
            "done = subprocess.run([sys.executable, '-m', 'onlinepgs.cli'] + sys.argv[1:],"
            " stdout=subprocess.DEVNULL)\n"
            "assert done.returncode == 0, done.returncode\n"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    out = subprocess.run([sys.executable, "-c", code] + [str(a) for a in args], check=True,
                         capture_output=True, cwd=ROOT, timeout=300,
                         env={**os.environ, "PYTHONPATH": ROOT})
    return int(out.stdout) * 1024  # kilobytes on Linux


@pytest.mark.slow  # ~25 s: two -b 24 trainings, eight commands
def test_reading_a_model_costs_one_weight_vector_not_its_race_s_states(tmp_path):
    """Issue 50, item 14: a -b 24 model trained with sigma="auto" on a 40 KB file holds
    its race's runs; predict took 0.91 GB and eval 0.89 GB reading each run's dense
    state (a --no-state file of the same model: 43 MB), info --weights and info of a
    file without the header's weight count as much. Now predict, eval and info read
    the reported model's weights alone: their peak is within one dense weight vector
    (2**24 x 8 bytes) of the interpreter's baseline (the same commands on the
    --no-state file, measured here), plus a small constant; their outputs are the same
    as the --no-state file's."""
    data, full, light = tmp_path / "tiny.svm", tmp_path / "full.pgs", tmp_path / "light.pgs"
    tiny_svmlight(data)
    for model, extra in ((full, []), (light, ["--no-state"])):
        subprocess.run([sys.executable, "-m", "onlinepgs.cli", "train", "-b", "24",
                        str(data), "-o", str(model), "--quiet"] + extra, check=True,
                       cwd=ROOT, timeout=300, env={**os.environ, "PYTHONPATH": ROOT})
    assert "race" in json.loads(_header_text(full))  # several runs' states in the file
    for model in (full, light):  # as an older onlinepgs wrote them: info counts the weights
        _without_weights_entry(model, model.with_suffix(".old"))
    vector, constant = 2**24 * 8, 32 * 2**20
    for command in (["predict", "{m}", data, "-o", tmp_path / "{n}.txt"],
                    ["eval", "{m}", data], ["info", "{old}"],
                    ["info", "--weights", "{m}"]):
        runs = {}
        for name, model in (("full", full), ("light", light)):
            args = [str(a).format(m=model, n=name, old=model.with_suffix(".old"))
                    for a in command]
            runs[name] = peak_rss(args)
        assert runs["full"] <= runs["light"] + vector + constant, (command, runs)
    assert (tmp_path / "full.txt").read_bytes() == (tmp_path / "light.txt").read_bytes()


def _without_weights_entry(source, target):
    """A copy of a model file without the header's informational "weights" count."""
    from test_model_io import raw_parts, write_parts

    header, arrays = raw_parts(source)
    header.pop("weights")
    write_parts(target, header, arrays)


def _header_text(path):
    import zipfile

    with zipfile.ZipFile(path) as zf:
        return zf.read("header.json")


# ---- the reported model is the full load's, bit for bit --------------------------------
def _data(kind, n_bits):
    rng = np.random.RandomState(1)
    width = 2**n_bits if n_bits else 30
    X = sp.random(300, width, density=min(1.0, 6 / width) if n_bits else 0.3,
                  random_state=rng, format="csr")
    w = rng.randn(width)
    score = X @ w + 0.3 * rng.randn(300)
    if kind == "regressor":
        return X, score
    if kind == "multiclass":
        return X, np.digitize(score, np.quantile(score, [0.33, 0.66]))
    return X, np.where(score > 0, "yes", "no")


CASES = [
    ("binary", dict(sigma=1e-3)),
    ("binary", dict(sigma=1e-3, p=1.5, iterate="average")),
    ("binary", dict(sigma=1e-3, p=1.7, iterate="random")),
    ("binary", dict(sigma=1e-3, iterate="last", radius=None)),
    ("binary", dict(sigma=1e-3, l1=0.005)),
    ("binary", dict(sigma=1e-3, l1=0.005, radius=None, iterate="weighted")),
    ("binary", dict(sigma=1e-3, l1=0.005, iterate="last")),
    ("binary", dict(sigma=1e-3, l1=0.002, p=1.5, iterate="last")),
    ("binary", dict(sigma=1e-3, forget=0.99, iterate="last")),
    ("binary", dict(sigma=1e-3, batch_size=3, fit_intercept=False)),
    ("binary", dict()),  # sigma="auto": a race
    ("multiclass", dict(sigma=1e-3)),
    ("multiclass", dict(sigma=1e-3, multi_class="multinomial")),
    ("multiclass", dict(multi_class="crammer_singer", loss="hinge")),
    ("regressor", dict(sigma=1e-3, loss="squared")),
    ("regressor", dict(loss="huber", l1=0.001)),
]


def _same_stats(a, b):
    assert set(a) == set(b)
    for key in a:
        assert np.array_equal(np.asarray(a[key]), np.asarray(b[key]), equal_nan=True), key


@pytest.mark.parametrize("slice_bytes", [64, reported._SLICE_BYTES], ids=["rows", "MBs"])
@pytest.mark.parametrize("n_bits", [None, 12], ids=["dense", "hashed"])
@pytest.mark.parametrize("kind, options", CASES)
def test_the_reported_model_is_the_full_load_s_bit_for_bit(tmp_path, monkeypatch, kind,
                                                           options, n_bits, slice_bytes):
    """Every configuration (p = 2 / p < 2, the iterates, l1 on R^n and on a ball, p < 2
    with l1, forgetting, mini-batches, a race, one-vs-rest and coupled multiclass,
    regressors), stored whole (30 features) or by its non-zero rows (2**12 hashed), read
    a few rows or megabytes at a time: load_learner(state=False) gives the full load's
    weights, intercepts, statistics, sigma and predictions bit for bit, held as the
    file saved without its state holds them (sparse when smaller, the same arrays)."""
    monkeypatch.setattr(reported, "_SLICE_BYTES", slice_bytes)
    X, y = _data(kind, n_bits)
    cls = PGSRegressorLearner if kind == "regressor" else PGSClassifierLearner
    options = dict(options)
    if kind == "regressor":
        options.setdefault("loss", "squared")
    est = cls(random_state=0, n_bits=n_bits, **options).fit(X, y)
    full, light = tmp_path / "full.pgs", tmp_path / "light.pgs"
    save_model(est, full)
    save_model(est, light, state=False)
    whole, alone, saved = load_learner(full), load_learner(full, state=False), \
        load_learner(light)
    assert type(alone._state).__name__ == "LinearModel"
    np.testing.assert_array_equal(alone.model_.coef, whole.model_.coef)
    assert alone.model_.intercept.tobytes() == whole.model_.intercept.tobytes()
    assert alone.model_.is_sparse == saved.model_.is_sparse
    if alone.model_.is_sparse:
        for part in ("indptr", "indices", "data"):
            a, b = (getattr(m.model_.coef_sparse, part) for m in (alone, saved))
            assert a.tobytes() == b.tobytes() and a.dtype == b.dtype, part
    else:
        assert alone.model_.coef.tobytes() == saved.model_.coef.tobytes()
    _same_stats(alone.online_stats_, whole.online_stats_)
    assert alone.sigma_ == whole.sigma_ and alone.t_ == whole.t_
    assert alone.model_.radius == whole.model_.radius
    assert alone.model_.multi_class == whole.model_.multi_class
    for method in ("predict", "decision_function", "predict_proba"):
        if hasattr(whole, method):
            assert np.array_equal(getattr(alone, method)(X), getattr(whole, method)(X)), method
    with pytest.raises(ValueError, match=r"loaded without it \(load_learner"):
        alone.partial_fit(X[:3], y[:3])


@pytest.mark.parametrize("name", sorted(os.listdir(MODEL_FILES)))
def test_old_model_files_give_the_same_reported_model(name):
    """Files of earlier versions (one module; an l1 average written with marks and a
    heap's versions) load with state=False as their full load reports them."""
    path = os.path.join(MODEL_FILES, name)
    whole, alone = load_learner(path), load_learner(path, state=False)
    np.testing.assert_array_equal(alone.model_.coef, whole.model_.coef)
    assert alone.model_.intercept.tobytes() == whole.model_.intercept.tobytes()
    if hasattr(whole, "online_stats_"):  # PGS
        _same_stats(alone.online_stats_, whole.online_stats_)


def test_a_multinomial_model_saved_without_its_state_keeps_its_softmax(tmp_path):
    """A --no-state file of a multinomial model loaded as one-vs-rest: predict_proba
    normalised the K sigmoids instead of the softmax of the scores (0.14 off)."""
    X, y = _data("multiclass", None)
    est = PGSClassifierLearner(sigma=1e-2, multi_class="multinomial", random_state=0).fit(X, y)
    save_model(est, tmp_path / "m.pgs", state=False)
    light = load_learner(tmp_path / "m.pgs")
    assert light.model_.multi_class == "multinomial"
    assert np.array_equal(light.predict_proba(X), est.predict_proba(X))


def test_a_state_stored_whole_is_read_in_slices(tmp_path):
    """A state stored whole (every row reached) is read a slice of rows at a time: the
    load's peak is the weights (dense here) and a few slices, not the state (4 fields a
    feature: p < 2, averaged) nor the file's arrays held whole."""
    import tracemalloc

    rng = np.random.RandomState(0)
    width = 100_000
    X = sp.random(400, width, density=0.02, random_state=rng, format="csr")
    y = np.where(X @ rng.randn(width) > 0, 1, -1)
    est = PGSClassifierLearner(sigma=1e-3, p=1.5, iterate="average", random_state=0).fit(X, y)
    save_model(est, tmp_path / "m.pgs")
    state_bytes = est._state.block_a.nbytes
    tracemalloc.start()
    try:
        alone = load_learner(tmp_path / "m.pgs", state=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert not alone.model_.is_sparse  # most weights are not zero
    weights = 8 * width
    assert state_bytes == 4 * weights + 32  # the case meant: the state is 4 weight vectors
    assert peak < weights + 4 * reported._SLICE_BYTES + 2**20, (peak, weights)
    np.testing.assert_array_equal(alone.model_.coef, est.model_.coef)


def test_damaged_rows_are_refused_as_a_full_load_refuses_them(tmp_path):
    """Stored rows out of order, or a non-finite field, in a file whose checksum is
    valid: the reported model is refused with a one-line error naming the file."""
    from test_model_io import crafted

    X, y = _data("binary", 12)
    est = PGSClassifierLearner(sigma=1e-3, n_bits=12, random_state=0).fit(X, y)
    save_model(est, tmp_path / "m.pgs")

    def swap_rows(header, arrays):
        rows = arrays["state/stored_rows"].copy()
        rows[[1, 2]] = rows[[2, 1]]
        arrays["state/stored_rows"] = rows

    def infinite(header, arrays):
        arrays["state/block_a"] = arrays["state/block_a"].copy()
        arrays["state/block_a"][3, 0, 0] = np.inf

    for mutate, message in ((swap_rows, "not strictly increasing"),
                            (infinite, "block_a holds inf")):
        path = crafted(tmp_path, tmp_path / "m.pgs", mutate)
        for state in (True, False):
            with pytest.raises(ModelFileError, match=message) as info:
                load_learner(path, state=state)
            assert "\n" not in str(info.value) and str(path) in str(info.value)
