"""The ``onlinepgs`` command line, in process and as a real console script."""
import gzip
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from onlinepgs import PGSClassifier, iter_svmlight, load_model, load_svmlight
from onlinepgs.cli import main

EXE = [sys.executable, "-m", "onlinepgs.cli"]


def write_svmlight(path, n=3000, n_features=200, seed=0, start=0):
    """Generated binary data in svmlight text (1-based indices); returns the labels."""
    rng = np.random.RandomState(seed)
    w = rng.randn(n_features)
    labels = []
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wt") as f:
        for _ in range(n):
            cols = np.unique(rng.randint(0, n_features, 8))
            vals = rng.rand(cols.size)
            label = 1 if vals @ w[cols] + 0.1 * rng.randn() > 0 else -1
            labels.append(label)
            f.write(f"{label} " + " ".join(f"{c + 1}:{v:.6f}" for c, v in zip(cols, vals))
                    + "\n")
    return np.array(labels)


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "train.svm"
    write_svmlight(path)
    return path


def run(*argv, stdin=None):
    return subprocess.run(EXE + [str(a) for a in argv], input=stdin, capture_output=True,
                          timeout=120)


def test_train_matches_the_python_api(data, tmp_path, capsys):
    model = tmp_path / "m.pgs"
    assert main(["train", str(data), "-o", str(model), "--sigma", "1e-3", "--p", "1.6",
                 "--chunk-rows", "256", "--classes=-1,1"]) == 0
    table = capsys.readouterr().err.splitlines()
    counters = [int(line.split()[2]) for line in table[2:] if line[:1].isdigit()]
    assert counters[:6] == [1, 2, 4, 8, 16, 32] and counters == sorted(counters)
    trained = load_model(model)
    reference = PGSClassifier(sigma=1e-3, p=1.6, random_state=0)
    for X, y in iter_svmlight(data, chunk_rows=1000):
        reference.partial_fit(X, y, classes=[-1, 1])
    np.testing.assert_array_equal(trained.coef_, reference.coef_)
    np.testing.assert_array_equal(trained.intercept_, reference.intercept_)
    assert trained.online_stats_["n_examples"] == 3000


def test_predict_eval_info(data, tmp_path, capsys):
    model, pred = tmp_path / "m.pgs", tmp_path / "pred.txt"
    assert main(["train", str(data), "-o", str(model), "--quiet"]) == 0
    assert main(["predict", str(model), str(data), "-o", str(pred)]) == 0
    labels = np.loadtxt(pred)
    assert labels.shape == (3000,) and set(np.unique(labels)) <= {-1.0, 1.0}
    assert main(["predict", str(model), str(data), "-o", str(pred), "--kind",
                 "probabilities"]) == 0
    assert np.allclose(np.loadtxt(pred).sum(axis=1), 1.0)
    capsys.readouterr()
    assert main(["eval", str(model), str(data)]) == 0
    report = dict(line.split(" = ") for line in capsys.readouterr().out.splitlines())
    assert float(report["accuracy"]) > 0.85 and 0.5 < float(report["auc"]) <= 1.0
    assert float(report["log_loss"]) > 0 and report["rows"] == "3000"
    X, y = load_svmlight(data)
    expected = np.mean(load_model(model).predict(X) == y)
    assert float(report["accuracy"]) == pytest.approx(expected, abs=1e-6)
    assert main(["info", str(model)]) == 0
    out = capsys.readouterr().out
    assert "PGSClassifier" in out and "n_examples: 3000" in out


def test_regression_metrics(tmp_path, capsys):
    path = tmp_path / "reg.svm"
    rng = np.random.RandomState(1)
    X = rng.rand(500, 5)
    y = X @ [1.0, -2.0, 0.5, 0.0, 3.0]
    with open(path, "w") as f:
        for row, target in zip(X, y):
            f.write(f"{target:.6f} " + " ".join(f"{j + 1}:{v:.6f}" for j, v in enumerate(row))
                    + "\n")
    model = tmp_path / "r.pgs"
    assert main(["train", str(path), "-o", str(model), "--loss", "squared", "--sigma", "1e-2",
                 "--passes", "20", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["eval", str(model), str(path)]) == 0
    report = dict(line.split(" = ") for line in capsys.readouterr().out.splitlines())
    predicted = load_model(model).predict(np.round(X, 6))
    assert float(report["rmse"]) == pytest.approx(np.sqrt(np.mean((predicted - y) ** 2)),
                                                  rel=1e-4)
    assert float(report["mae"]) < 0.5


def test_console_script_exit_codes(data, tmp_path):
    model = tmp_path / "m.pgs"
    usage = run("train", data)  # no -o
    assert usage.returncode == 2 and b"-o" in usage.stderr
    missing = run("train", tmp_path / "nope.svm", "-o", model)
    assert missing.returncode == 1 and missing.stderr.count(b"\n") == 1
    assert b"Traceback" not in missing.stderr and b"nope.svm" in missing.stderr
    bad = tmp_path / "bad.svm"
    bad.write_text("1 1:0.5 2:0.25\n-1 3:oops\n")
    broken = run("train", bad, "-o", model)
    assert broken.returncode == 1 and b"bad.svm" in broken.stderr and b"2" in broken.stderr
    assert b"Traceback" not in broken.stderr and not model.exists()
    not_a_model = run("eval", data, data)
    assert not_a_model.returncode == 1 and b"Traceback" not in not_a_model.stderr
    ok = run("train", data, "-o", model, "--quiet")
    assert ok.returncode == 0 and ok.stderr == b"" and model.exists()


def test_gzip_stdin_and_continuation(tmp_path):
    gz = tmp_path / "train.svm.gz"
    write_svmlight(gz)
    whole, first, second = tmp_path / "whole.pgs", tmp_path / "a.pgs", tmp_path / "b.pgs"
    plain = gzip.decompress(gz.read_bytes())
    lines = plain.splitlines(keepends=True)
    part_a, part_b = tmp_path / "a.svm", tmp_path / "b.svm"
    part_a.write_bytes(b"".join(lines[:1000]))
    part_b.write_bytes(b"".join(lines[1000:]))
    assert run("train", gz, "-o", whole, "--quiet", "--chunk-rows", "500").returncode == 0
    assert run("train", "-", "-o", first, "--quiet", "--chunk-rows", "500",
               stdin=part_a.read_bytes()).returncode == 0
    assert run("train", part_b, "-i", first, "-o", second, "--quiet", "--chunk-rows",
               "500").returncode == 0
    a, b = load_model(whole), load_model(second)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert b.online_stats_["n_examples"] == 3000


def test_holdout(data, tmp_path, capsys):
    model = tmp_path / "m.pgs"
    assert main(["train", str(data), "-o", str(model), "--holdout-every", "10"]) == 0
    err = capsys.readouterr().err
    assert "holdout average loss" in err and "(300 rows)" in err
    assert load_model(model).online_stats_["n_examples"] == 2700


def test_sigkill_then_resume_gives_the_uninterrupted_model(tmp_path):
    data = tmp_path / "big.svm"
    write_svmlight(data, n=20_000)
    full, ckpt = tmp_path / "full.pgs", tmp_path / "ckpt.pgs"
    assert run("train", data, "-o", full, "--quiet", "--chunk-rows", "1000").returncode == 0

    lines = data.read_bytes().splitlines(keepends=True)
    proc = subprocess.Popen(EXE + ["train", "-", "-o", str(ckpt), "--quiet", "--chunk-rows",
                                   "1000", "--checkpoint-every", "5000"],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdin.write(b"".join(lines[:12_500]))  # the rest never comes: it blocks reading
    proc.stdin.flush()
    deadline = time.time() + 60
    while time.time() < deadline:
        if ckpt.exists() and load_model(ckpt).online_stats_["n_examples"] >= 10_000:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdin.close()
    proc.stderr.close()
    assert load_model(ckpt).online_stats_["n_examples"] == 10_000

    resumed = run("train", data, "-i", ckpt, "--resume", "-o", ckpt, "--quiet",
                  "--chunk-rows", "1000")
    assert resumed.returncode == 0, resumed.stderr
    a, b = load_model(full), load_model(ckpt)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    assert a.online_stats_ == pytest.approx(b.online_stats_)


def test_gap_matches_the_python_function(tmp_path, capsys):
    import json

    from onlinepgs import duality_gap

    gz = tmp_path / "train.svm.gz"
    write_svmlight(gz, n=2000)
    model = tmp_path / "m.pgs"
    assert main(["train", str(gz), "-o", str(model), "--quiet", "--sigma", "1e-3", "--p", "1.5",
                 "--passes", "2"]) == 0
    capsys.readouterr()
    X, y = load_svmlight(gz)
    expected = duality_gap(load_model(model), X, y)
    assert expected.gap > 0
    assert main(["gap", str(model), str(gz), "--chunk-rows", "300"]) == 0
    report = dict(line.split(" = ") for line in capsys.readouterr().out.splitlines())
    assert report["rows"] == "2000"
    for key in ("primal", "dual", "gap", "relative_gap"):
        assert float(report[key]) == pytest.approx(getattr(expected, key), rel=1e-10)
    assert main(["gap", str(model), str(gz), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["primal"] == pytest.approx(expected.primal, rel=1e-12)
    assert result["dual"] == pytest.approx(expected.dual, rel=1e-12)
    assert result["gap_per_problem"] == pytest.approx([expected.gap], rel=1e-9)
    # stdin, through the console script
    piped = run("gap", model, "-", "--json", stdin=gz.read_bytes())
    assert piped.returncode == 0, piped.stderr
    assert json.loads(piped.stdout)["dual"] == pytest.approx(expected.dual, rel=1e-12)


def test_gap_of_a_multiclass_model_lists_its_classes(tmp_path, capsys):
    path = tmp_path / "three.svm"
    rng = np.random.RandomState(2)
    X = rng.rand(300, 4)
    labels = np.argmax(X[:, :3] + 0.2 * rng.randn(300, 3), axis=1) + 1
    with open(path, "w") as f:
        for row, label in zip(X, labels):
            f.write(f"{label} " + " ".join(f"{j + 1}:{v:.6f}" for j, v in enumerate(row)) + "\n")
    model = tmp_path / "m.pgs"
    assert main(["train", str(path), "-o", str(model), "--quiet", "--loss", "hinge",
                 "--classes", "1,2,3"]) == 0
    capsys.readouterr()
    assert main(["gap", str(model), str(path)]) == 0
    report = dict(line.split(" = ") for line in capsys.readouterr().out.splitlines())
    per_class = [float(report[f"gap[{c}]"]) for c in (1, 2, 3)]
    assert sum(per_class) == pytest.approx(float(report["gap"]), rel=1e-9)


def test_gap_errors_are_one_line_naming_the_place(data, tmp_path, capsys):
    model = tmp_path / "m.pgs"
    assert main(["train", str(data), "-o", str(model), "--quiet"]) == 0

    def fails(*argv):
        code = main([str(a) for a in argv])
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err
        return code, err

    # exit codes as for the other subcommands: 2 usage, 1 data or model errors
    with pytest.raises(SystemExit) as usage:
        main(["gap", str(model)])
    assert usage.value.code == 2 and "DATA" in capsys.readouterr().err
    code, err = fails("gap", model, tmp_path / "nope.svm")
    assert code == 1 and "nope.svm: no such file" in err
    labels = tmp_path / "labels.svm"
    labels.write_text("1 1:0.5\n# a comment\n3 2:1\n")
    code, err = fails("gap", model, labels)
    assert code == 1 and "labels.svm, row 2 (counted from 1): label 3.0 is not one of" in err
    code, err = fails("gap", data, data)
    assert code == 1
    empty = tmp_path / "empty.svm"
    empty.write_text("")
    code, err = fails("gap", model, empty)
    assert code == 1 and "no rows" in err
    # and through the console script: a bad line is named by file and line
    bad = tmp_path / "bad.svm"
    bad.write_text("1 1:0.5 2:0.25\n-1 3:oops\n")
    broken = run("gap", model, bad)
    assert broken.returncode == 1 and broken.stderr.count(b"\n") == 1
    assert b"bad.svm:2:" in broken.stderr and b"Traceback" not in broken.stderr
