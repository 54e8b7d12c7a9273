"""The command line on the sklearn-free learners: no scikit-learn imported, the models
and predictions of the scikit-learn estimators bit for bit, and ``train --solver sdca``."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from onlinepgs import PGSClassifier, SDCAClassifier, SDCARegressor, load_model, load_svmlight
from onlinepgs.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _write(path, X, y):
    with open(path, "w") as f:
        for row, label in zip(X, y):
            f.write(f"{label:g} " + " ".join(f"{j + 1}:{v:.6f}" for j, v in enumerate(row)
                                               if v) + "\n")


@pytest.fixture
def data(tmp_path):
    rng = np.random.RandomState(0)
    X = np.round(rng.rand(400, 8), 6) * (rng.rand(400, 8) < 0.6)
    y = np.where(X[:, 0] - X[:, 1] + 0.2 * rng.randn(400) > 0, 1, -1)
    path = tmp_path / "train.svm"
    _write(path, X, y)
    return tmp_path, str(path)


_RUN = """
import sys
from onlinepgs.cli import main
for argv in {runs!r}:
    code = main(argv)
    assert code == 0, (argv, code)
loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'sklearn')
print('SKLEARN:', ','.join(loaded))
"""


def test_the_command_imports_no_scikit_learn_and_matches_the_estimator(data):
    tmp, path = data
    runs = [["train", path, "-o", "m.pgs", "--sigma", "1e-3", "--quiet"],
            ["predict", "m.pgs", path, "-o", "labels.txt"],
            ["predict", "m.pgs", path, "-o", "scores.txt", "--kind", "scores"],
            ["eval", "m.pgs", path], ["info", "m.pgs"], ["gap", "m.pgs", path, "--json"]]
    done = subprocess.run([sys.executable, "-c", _RUN.format(runs=runs)], cwd=tmp,
                          capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": ROOT})
    assert done.returncode == 0, done.stderr
    assert "SKLEARN: \n" in done.stdout  # not one scikit-learn module
    # the scikit-learn estimator on the same rows, as the command trains (one chunk)
    X, y = load_svmlight(path)
    reference = PGSClassifier(sigma=1e-3, random_state=0).partial_fit(X, y, classes=[-1, 1])
    model = load_model(tmp / "m.pgs")
    assert type(model) is PGSClassifier
    np.testing.assert_array_equal(model.coef_, reference.coef_)
    np.testing.assert_array_equal(model.intercept_, reference.intercept_)
    labels = np.loadtxt(tmp / "labels.txt")
    np.testing.assert_array_equal(labels, reference.predict(X))
    scores = np.loadtxt(tmp / "scores.txt")
    np.testing.assert_array_equal(scores, [float(f"{v:.9g}") for v in
                                           reference.decision_function(X)])
    gap = json.loads(done.stdout[done.stdout.index("{"):done.stdout.rindex("}") + 1])
    assert gap["rows"] == 400 and gap["gap"] >= 0


def test_train_solver_sdca_is_the_sdca_estimator_on_the_loaded_file(data, capsys):
    tmp, path = data
    out = str(tmp / "sdca.pgs")
    assert main(["train", path, "-o", out, "--solver", "sdca", "--sigma", "1e-2"]) == 0
    err = capsys.readouterr().err
    assert "finished run (sdca)" in err and "number of examples = 400" in err
    X, y = load_svmlight(path)
    reference = SDCAClassifier(sigma=1e-2, random_state=0).fit(X, y)
    model = load_model(out)
    assert type(model) is SDCAClassifier
    np.testing.assert_array_equal(model.coef_, reference.coef_)
    np.testing.assert_array_equal(model.dual_coef_, reference.dual_coef_)
    assert model.duality_gap_ == reference.duality_gap_
    assert main(["eval", out, path]) == 0
    assert f"accuracy = {np.mean(reference.predict(X) == y):.6f}" in capsys.readouterr().out
    assert main(["gap", out, path]) == 0
    primal = float(capsys.readouterr().out.split("primal = ")[1].split()[0])
    assert primal == pytest.approx(reference.primal_objective_, rel=1e-9)
    assert main(["info", out]) == 0
    assert "estimator: SDCAClassifier" in capsys.readouterr().out
    assert main(["predict", out, path, "--kind", "probabilities"]) == 0
    proba = np.loadtxt(capsys.readouterr().out.splitlines())
    np.testing.assert_allclose(proba, reference.predict_proba(X), rtol=1e-8)
    # a class of --classes that no row has: refused (the fit would leave it out)
    assert main(["train", path, "-o", str(tmp / "x.pgs"), "--solver", "sdca", "--sigma",
                 "1e-2", "--classes", "-1,1,2"]) == 1
    assert capsys.readouterr().err == (
        f"onlinepgs: error: {path}: no row has the label 2 of --classes; --solver sdca "
        "solves for the classes of the rows (drop it from --classes, or train PGS, which "
        "keeps a class before its rows come)\n")
    assert not (tmp / "x.pgs").exists()


def test_train_solver_sdca_regression_and_its_refusals(data, capsys):
    tmp, path = data
    out = str(tmp / "r.pgs")
    assert main(["train", path, "-o", out, "--solver", "sdca", "--loss", "squared",
                 "--sigma", "0.1", "--quiet"]) == 0
    X, y = load_svmlight(path)
    reference = SDCARegressor(sigma=0.1, random_state=0).fit(X, y)
    np.testing.assert_array_equal(load_model(out).coef_, reference.coef_)
    for extra, flag in ((["-i", out], "-i"), (["--passes", "2"], "--passes"),
                        (["--radius", "1"], "--radius"), (["--holdout-every", "3"],
                                                          "--holdout-every")):
        capsys.readouterr()
        assert main(["train", path, "-o", str(tmp / "x.pgs"), "--solver", "sdca",
                     *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"argument {flag}" in err
    # a bad line is named by its file and line, as for PGS
    bad = tmp / "bad.svm"
    bad.write_text("1 1:0.5\n-1 2:x\n")
    assert main(["train", str(bad), "-o", str(tmp / "x.pgs"), "--solver", "sdca"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.svm" in err and ":2" in err
    # a stray feature index is refused at its line before SDCA allocates its weights
    stray = tmp / "stray.svm"
    stray.write_text("1 1:0.5\n-1 2:1\n1 400000000:1\n")
    assert main(["train", str(stray), "-o", str(tmp / "x.pgs"), "--solver", "sdca"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "stray.svm:3: feature index 400000000" in err


def test_train_continuing_an_sdca_model_is_refused_and_keeps_the_output(data, capsys):
    # an SDCA model has no stream to continue: one line, exit 1, no output file written
    tmp, path = data
    model = str(tmp / "s.pgs")
    assert main(["train", path, "-o", model, "--solver", "sdca", "--quiet"]) == 0
    before = open(model, "rb").read()
    capsys.readouterr()
    out = tmp / "s2.pgs"
    assert main(["train", path, "-i", model, "-o", str(out), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "SDCAClassifier" in err and "--solver sdca" in err
    assert not out.exists() and open(model, "rb").read() == before
