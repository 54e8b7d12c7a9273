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


def test_train_refuses_a_file_whose_later_stream_is_damaged(tmp_path, capsys):
    """Issue 32, item 4: train on a bz2 file of two streams, the second damaged, exited 0
    after the first stream's 1000 rows; now it names the line and the stream, and writes
    no model."""
    import bz2

    streams = []
    for seed in (0, 1):
        part = tmp_path / f"part{seed}.svm"
        write_svmlight(part, n=1000, seed=seed)
        streams.append(bytearray(bz2.compress(part.read_bytes())))
    streams[1][7] ^= 0xFF  # the second stream's first block header
    path, model = tmp_path / "two.svm.bz2", tmp_path / "m.pgs"
    path.write_bytes(b"".join(streams))
    assert main(["train", str(path), "-o", str(model), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"{path}:1000: truncated or corrupt bz2 stream" in err
    assert f"bz2 stream 2, which starts at byte {len(streams[0])} " in err
    assert not model.exists()


def _data_limit():  # a child's heap capped at 2 GB: an unbudgeted 6.4 GB model fails fast
    import resource

    resource.setrlimit(resource.RLIMIT_DATA, (2 * 2**30, 2 * 2**30))


def test_train_refuses_a_stray_feature_index_before_allocating(tmp_path):
    """Issue 32, item 10: one index of 4e8 in a 3-line file made a 6.4 GB model (35 s,
    6.4 GB peak and file). train now stops at that line under the default budget,
    naming the index, the memory and the remedies, and writes nothing. (The child's
    heap is capped so that the unbudgeted code fails instead of allocating.)"""
    from onlinepgs.cli import build_parser
    from onlinepgs.estimators import MAX_MODEL_BYTES

    path, model = tmp_path / "stray.svm", tmp_path / "m.pgs"
    path.write_bytes(b"1 1:1 3:2\n-1 400000000:1\n1 2:1\n")
    # with the progress table too, whose rows split the chunk: the piece before the
    # stray row is as wide as its own entries (it named no line)
    for quiet in (["--quiet"], []):
        done = subprocess.run(EXE + ["train", str(path), "-o", str(model), *quiet,
                                     "--sigma", "1e-4"],  # one state's bytes: fixed sigma
                              capture_output=True, timeout=120, preexec_fn=_data_limit)
        err = done.stderr.decode()
        assert done.returncode == 1 and "Traceback" not in err, err
        assert f"{path}:2: feature index 400000000 would make a model over 400000000 " \
            "features, 6.7G of state, beyond --max-model-bytes 1G" in err.splitlines()[-1]
    assert "--bits BITS" in err and not model.exists()
    # a small budget's sizes in its own units (it said "0.0G of state"); SDCA's names
    # the first row beyond it (it named the widest) and the budget
    small = tmp_path / "small.svm"
    small.write_bytes(b"1 1:1 3:2\n-1 60:1\n1 2:1 90:1\n")
    for solver, words in ((["--sigma", "1e-4"], ":2: feature index 60 would make a model "
                           "over 60 features, 1.1K of state, beyond --max-model-bytes 1K"),
                          (["--solver", "sdca", "--sigma", "1e-4"],
                           ":2: feature index 60 would make an SDCA model over 60 features "
                           "(1.4K a problem), beyond --max-model-bytes 1K")):
        done = subprocess.run(EXE + ["train", str(small), "-o", str(model), "--quiet",
                                     "--max-model-bytes", "1K", *solver],
                              capture_output=True, timeout=120)
        assert done.returncode == 1 and f"{small}{words}" in done.stderr.decode(), done.stderr
    args = build_parser().parse_args(["train", str(path), "-o", str(model)])
    assert args.max_model_bytes == MAX_MODEL_BYTES  # the documented default, both ways
    # hashing makes the width the user's; the budget is an option (18 bytes a feature)
    assert main(["train", str(path), "-o", str(model), "--quiet", "--bits", "12",
                 "--sigma", "1e-4"]) == 0
    assert load_model(model).coef_.shape == (1, 4096)
    small = tmp_path / "small.svm"
    small.write_bytes(b"1 1:1\n-1 1000:1\n")
    from onlinepgs.pgs import PGSClassifierLearner

    budget = str(PGSClassifierLearner()._layout(1).nbytes(1001))  # 1000 features: 18,057
    assert main(["train", str(small), "-o", str(model), "--quiet",
                 "--max-model-bytes", budget, "--sigma", "1e-4"]) == 0
    assert load_model(model).coef_.shape == (1, 1000)
    assert main(["train", str(small), "-o", str(model), "--quiet", "--zero-based", "0",
                 "--max-model-bytes", budget, "--sigma", "1e-4"]) == 1  # 1001 features
    assert main(["train", str(small), "-o", str(model), "--quiet", "--zero-based", "0",
                 "--max-model-bytes", "none", "--sigma", "1e-4"]) == 0


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


def test_the_summary_names_sigmas_choice_only_when_the_model_races_it(data, tmp_path,
                                                                      capsys):
    model = tmp_path / "m.pgs"
    assert main(["train", str(data), "-o", str(model)]) == 0  # --sigma auto, the default
    lines = [line for line in capsys.readouterr().err.splitlines()
             if line.startswith("sigma = ")]
    chosen = load_model(model).sigma_
    # the sigma in full: giving it as --sigma trains with the race's sigma
    assert len(lines) == 1 and lines[0].startswith(f"sigma = {chosen!r} (auto: "), lines
    assert float(lines[0].split()[2]) == chosen
    assert main(["train", str(data), "-o", str(model), "--sigma", "1e-3"]) == 0
    assert "sigma = " not in capsys.readouterr().err


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
    assert "PGSClassifier" in out and "n_examples=3000" in out


@pytest.mark.parametrize("n_classes, bits", [(2, None), (2, 5), (3, None), (3, 5)])
def test_the_table_shows_the_prediction_before_each_update(tmp_path, capsys, n_classes, bits):
    # the yardstick: a model trained through the Python API on the rows before, its last
    # iterate's score (binary) or predicted class (multiclass) for the table's row
    rng = np.random.RandomState(3)
    X = rng.rand(600, 40) * (rng.rand(600, 40) < 0.2)
    y = np.argmax(X @ rng.randn(40, n_classes), axis=1) + 1
    path = tmp_path / "rows.svm"
    with open(path, "w") as f:
        for row, label in zip(X, y):
            f.write(f"{label} " + " ".join(f"{j + 1}:{row[j]:.6f}" for j in np.flatnonzero(row))
                    + "\n")
    X = np.round(X, 6)
    bits_args = [] if bits is None else ["--bits", str(bits)]
    assert main(["train", str(path), "-o", str(tmp_path / "m.pgs"), "--iterate", "last",
                 "--sigma", "1e-3", "--chunk-rows", "100", "--zero-based", "1", *bits_args]) == 0
    lines = capsys.readouterr().err.splitlines()
    # the table follows the notes (which classes) and its two header lines
    lines = lines[next(i for i, line in enumerate(lines) if line.startswith("loss")) + 1:]
    rows = [line.split() for line in lines]
    rows = rows[: rows.index([])]  # the summary follows an empty line
    assert [int(r[2]) for r in rows] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    classes = np.arange(1, n_classes + 1)
    for r in rows:
        n = int(r[2])
        assert float(r[4]) == y[n - 1]
        reference = PGSClassifier(sigma=1e-3, iterate="last", n_bits=bits, random_state=0)
        if n == 1:
            expected = 0.0
        else:
            reference.partial_fit(X[: n - 1], y[: n - 1], classes=classes)
            score = reference.decision_function(X[n - 1: n])[0]
            expected = score if n_classes == 2 else classes[np.argmax(score)]
        assert float(r[5]) == pytest.approx(expected, abs=1e-4), n


def test_eval_names_the_line_of_an_unknown_label(data, tmp_path, capsys):
    model, bad = tmp_path / "m.pgs", tmp_path / "bad.svm"
    assert main(["train", str(data), "-o", str(model), "--quiet"]) == 0
    lines = data.read_text().splitlines()
    lines[2499] = "3" + lines[2499][lines[2499].index(" "):]  # a label the model never saw
    bad.write_text("# a comment\n" + "\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(["eval", str(model), str(bad), "--chunk-rows", "1000"]) == 1
    assert capsys.readouterr().err.strip() == (
        f"onlinepgs: error: {bad}:2501: label 3 is not one of the model's classes [-1, 1]")


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
    usage = run("train", data, "--checkpoint-every", "100")  # checkpoints without -o
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
    labels.write_text("1 1:0.5\n3 2:1\n")
    for refine in ([], ["--refine", "2"]):  # at its line, as eval names it
        code, err = fails("gap", model, labels, *refine)
        assert code == 1 and f"{labels}:2: label 3 is not one of the model's classes" in err
    labels.write_text("1 1:0.5\n# a comment\n3 2:1\n")  # (its chunk's lines are not all rows)
    code, err = fails("gap", model, labels)
    assert code == 1 and f"{labels}:1-3 (row 2 of the 2 rows there): label 3 is not" in err
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


def _noisy(path, n, seed=0, zero_based=False, every_zero=None):
    """Rows of two features and labels; an index 0 every `every_zero` rows if zero-based."""
    rng = np.random.RandomState(seed)
    with open(path, "w") as f:
        for i in range(n):
            label = rng.choice([-1, 1])
            zero = "0:1 " if every_zero and i % every_zero == 0 else ""
            f.write(f"{label} {zero}1:{label + 0.5 * rng.randn():.3f} 2:{rng.randn():.3f}\n")


def test_holdout_keeps_the_same_rows_out_in_every_pass(tmp_path, capsys):
    # 3001 rows: a row count carried across passes would hold out other rows in pass 2
    data = tmp_path / "d.svm"
    write_svmlight(data, n=3001)
    model = tmp_path / "m.pgs"
    assert main(["train", str(data), "-o", str(model), "--passes", "2", "--holdout-every",
                 "10", "--sigma", "1e-3", "--chunk-rows", "700"]) == 0
    assert "(300 rows, pass 2)" in capsys.readouterr().err
    X, y = load_svmlight(data)
    kept = (np.arange(3001) + 1) % 10 != 0
    reference = PGSClassifier(sigma=1e-3, random_state=0)
    for _ in range(2):
        reference.partial_fit(X[kept], y[kept], classes=[-1, 1])
    trained = load_model(model)
    np.testing.assert_array_equal(trained.coef_, reference.coef_)
    assert trained.online_stats_["n_examples"] == 2 * 2701


@pytest.mark.parametrize("holdout", [[], ["--holdout-every", "7"],
                                     ["--holdout-every", "7", "--batch-size", "4"],
                                     # l1 at p < 2: N's sums as they ran, not recounted
                                     ["--p", "1.5", "--l1", "1e-4", "--iterate", "last"]])
def test_resume_with_other_chunks_gives_the_uninterrupted_model(tmp_path, holdout):
    data, broken = tmp_path / "d.svm", tmp_path / "broken.svm"
    write_svmlight(data, n=5000)
    lines = data.read_bytes().splitlines(keepends=True)
    broken.write_bytes(b"".join(lines[:2100]) + b"1 3:oops\n" + b"".join(lines[2100:]))
    full, ckpt = tmp_path / "full.pgs", tmp_path / "ckpt.pgs"
    common = ["--quiet", "--passes", "2", *holdout]
    assert main(["train", str(data), "-o", str(full), *common]) == 0
    # a run that stops at the bad line, its last checkpoint after 1800 rows (chunks of 600)
    failed = run("train", broken, "-o", ckpt, "--chunk-rows", "600", "--checkpoint-every",
                 "900", *common)
    assert failed.returncode == 1 and b"broken.svm:2101:" in failed.stderr
    assert b"holds the last checkpoint" in failed.stderr
    assert load_model(ckpt).online_stats_["n_examples"] < 2100
    # resumed on the repaired file in chunks of 500: the checkpoint falls inside one
    broken.write_bytes(data.read_bytes())
    assert main(["train", str(broken), "-i", str(ckpt), "--resume", "-o", str(ckpt),
                 "--chunk-rows", "500", *common]) == 0
    a, b = load_model(full), load_model(ckpt)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert a.online_stats_ == pytest.approx(b.online_stats_, nan_ok=True)


def test_predict_output_is_replaced_only_when_complete(data, tmp_path, capsys):
    model, pred = tmp_path / "m.pgs", tmp_path / "pred.txt"
    assert main(["train", str(data), "-o", str(model), "--quiet"]) == 0
    assert main(["predict", str(model), str(data), "-o", str(pred)]) == 0
    before = pred.read_bytes()
    bad = tmp_path / "bad.svm"
    bad.write_bytes(data.read_bytes() + b"1 3:oops\n")
    assert main(["predict", str(model), str(bad), "-o", str(pred), "--chunk-rows", "100"]) == 1
    assert main(["predict", str(model), str(tmp_path / "none.svm"), "-o", str(pred)]) == 1
    assert pred.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.svm", "m.pgs", "pred.txt",
                                                          "train.svm"]  # no temporary left
    # an output that is the input is refused before anything is written
    copy = tmp_path / "copy.svm"
    copy.write_bytes(data.read_bytes())
    assert main(["predict", str(model), str(copy), "-o", str(copy)]) == 1
    assert main(["train", str(copy), "-o", str(copy), "--quiet"]) == 1
    assert copy.read_bytes() == data.read_bytes()
    assert capsys.readouterr().err.count("is also an input") == 2


def test_an_unwritable_output_fails_before_training(data, tmp_path, capsys):
    for target in (tmp_path / "nodir" / "m.pgs", str(tmp_path) + os.sep):
        started = time.perf_counter()
        assert main(["train", str(data), "-o", str(target), "--quiet"]) == 1
        err = capsys.readouterr().err
        assert str(target) in err and ".tmp" not in err and err.count("\n") == 1
        assert time.perf_counter() - started < 5


def test_the_model_remembers_the_feature_base(tmp_path, capsys):
    train, test = tmp_path / "train.svm", tmp_path / "test.svm"
    _noisy(train, 2000, every_zero=50)   # zero-based: an index 0 in the first chunk
    _noisy(test, 500, seed=1)            # no index 0: alone it would be judged one-based
    model = tmp_path / "m.pgs"
    assert main(["train", str(train), "-o", str(model), "--quiet"]) == 0
    est = load_model(model)
    X, y = load_svmlight(test, zero_based=True, n_features=est.n_features_in_)
    expected = np.mean(est.predict(X) == y)
    assert expected > 0.9
    capsys.readouterr()
    assert main(["eval", str(model), str(test)]) == 0
    report = dict(line.split(" = ") for line in capsys.readouterr().out.splitlines())
    assert float(report["accuracy"]) == pytest.approx(expected, abs=1e-6)
    # continuing on a file without index 0 reads it zero-based too
    more = tmp_path / "m2.pgs"
    assert main(["train", str(test), "-i", str(model), "-o", str(more), "--quiet"]) == 0
    reference = load_model(model).partial_fit(X, y)
    np.testing.assert_array_equal(load_model(more).coef_, reference.coef_)


def test_option_values_are_usage_errors_named_by_their_flags(data, tmp_path):
    model = tmp_path / "m.pgs"
    for flag, value in (("--p", "2.5"), ("--sigma", "-1"), ("--bits", "0")):
        done = run("train", data, "-o", model, flag, value)
        assert done.returncode == 2 and f"argument {flag} ".encode() in done.stderr
        assert done.stderr.count(b"\n") == 1 and not model.exists()
    ok = run("train", data, "-o", model, "--classes", "-1,1", "--quiet")
    assert ok.returncode == 0, ok.stderr
    noted = run("train", data, "-i", model, "-o", model, "--loss", "hinge", "--quiet")
    assert noted.returncode == 0 and load_model(model).loss == "logistic"
    assert b"--loss hinge (the model's: logistic) ignored" in noted.stderr


def test_options_given_with_i_are_noted_where_they_differ_from_the_model(data, tmp_path,
                                                                          capsys):
    """The note compares what the command line gives with the model's own values (it
    compared with the parser's defaults: a default value given explicitly went unnoted,
    a repeated original command was noted)."""
    model = tmp_path / "h.pgs"
    assert main(["train", str(data), "-o", str(model), "--loss", "hinge", "--bits", "12",
                 "--sigma", "1e-3", "--quiet"]) == 0
    capsys.readouterr()
    # the original command again: nothing differs, nothing to note
    assert main(["train", str(data), "-i", str(model), "-o", str(model), "--loss", "hinge",
                 "--bits", "12", "--sigma", "1e-3", "--quiet"]) == 0
    assert "note" not in capsys.readouterr().err
    # the parser's defaults, given explicitly, differ from this model's values
    assert main(["train", str(data), "-i", str(model), "-o", str(model), "--loss",
                 "logistic", "--sigma", "1e-4", "--no-intercept", "--quiet"]) == 0
    note = capsys.readouterr().err
    assert ("note: --loss logistic (the model's: hinge), --sigma 0.0001 (the model's: "
            "0.001), --no-intercept ignored") in note
    assert load_model(model).loss == "hinge"


def test_label_and_index_errors_name_the_line(data, tmp_path):
    lines = data.read_bytes().splitlines(keepends=True)
    bad = tmp_path / "bad.svm"
    bad.write_bytes(b"# a comment\n" + b"".join(lines[:2500]) + b"3 1:1\n"
                    + b"".join(lines[2500:]))
    for extra in ([], ["--holdout-every", "3"], ["--chunk-rows", "7"]):
        done = run("train", bad, "-o", tmp_path / "m.pgs", *extra)
        assert done.returncode == 1, done.stderr
        assert b"bad.svm:2502: label 3 is not one of the classes [-1, 1]" in done.stderr \
            or b"bad.svm:2-" in done.stderr  # a comment in the chunk: the lines around
    exact = run("train", bad, "-o", tmp_path / "m.pgs", "--chunk-rows", "100")
    assert b"bad.svm:2502: label 3" in exact.stderr


def test_models_with_string_classes_and_checkpoints_predict(data, tmp_path, capsys):
    from onlinepgs import save_model

    X, y = load_svmlight(data)
    model = tmp_path / "s.pgs"
    est = PGSClassifier(random_state=0).fit(X, np.where(y > 0, "pos", "neg"))
    save_model(est, model)
    pred = tmp_path / "pred.txt"
    assert main(["predict", str(model), str(data), "-o", str(pred)]) == 0
    assert pred.read_text().split() == list(est.predict(X))
    assert main(["info", str(model)]) == 0
    assert "classes: neg, pos" in capsys.readouterr().out
    save_model(est, model, extra={"finished": False})
    assert main(["predict", str(model), str(data), "-o", str(pred)]) == 0
    assert "checkpoint of an unfinished training run" in capsys.readouterr().err


def test_train_reads_a_named_pipe_and_refuses_a_directory(data, tmp_path, capsys):
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    feeder = threading.Thread(target=lambda: fifo.write_bytes(data.read_bytes()))
    feeder.start()
    model = tmp_path / "m.pgs"
    code = main(["train", str(fifo), "-o", str(model), "--quiet"])
    if feeder.is_alive():  # the pipe was not read: unblock the writer before failing
        with open(fifo, "rb") as f:
            f.read()
    feeder.join()
    assert code == 0
    assert load_model(model).online_stats_["n_examples"] == 3000
    assert main(["train", str(tmp_path), "-o", str(model), "--quiet"]) == 1
    assert "is a directory" in capsys.readouterr().err


def test_an_index_too_large_for_memory_names_its_line(tmp_path):
    data = tmp_path / "big.svm"
    data.write_text("1 1:1\n-1 2:1\n1 3000000000:1\n")
    for budget, said in (([], b"big.svm:3: feature index 3000000000 would make a model"),
                         (["--max-model-bytes", "none", "--chunk-rows", "1",
                           "--classes=-1,1"],
                          b"big.svm:3: out of memory")):
        # the default budget refuses the index before allocating; without a budget the
        # allocation fails, and the message names the line all the same (a model made
        # narrow by a first chunk of narrow rows, widened by line 3)
        done = subprocess.run(
            ["bash", "-c", f"ulimit -v 3000000; exec {sys.executable} -m onlinepgs.cli "
             f"train {data} -o {tmp_path / 'm.pgs'} --quiet {' '.join(budget)}"],
            capture_output=True, timeout=120)
        assert done.returncode == 1 and done.stderr.count(b"\n") == 1, done.stderr
        assert said in done.stderr and b"--bits" in done.stderr
    # a first chunk that wide holds the model over the columns its rows reach
    # (onlinepgs._columns_seen): trained, saved and continued in the same memory
    for more in ([], ["-i", tmp_path / "m.pgs"]):
        done = subprocess.run(
            ["bash", "-c", f"ulimit -v 3000000; exec {sys.executable} -m onlinepgs.cli "
             f"train {data} -o {tmp_path / 'm.pgs'} --quiet --max-model-bytes none "
             f"{' '.join(map(str, more))}"], capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr
    assert load_model(tmp_path / "m.pgs").n_features_in_ == 3_000_000_000


def test_classes_with_a_regression_loss_is_a_usage_error(data, tmp_path, capsys):
    model = tmp_path / "r.pgs"
    assert main(["train", str(data), "-o", str(model), "--loss", "squared",
                 "--classes=-1,1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "argument --classes" in err and "squared" in err
    assert not model.exists()
    assert main(["train", str(data), "-o", str(model), "--loss", "squared", "--quiet"]) == 0
    more = tmp_path / "r2.pgs"
    assert main(["train", str(data), "-i", str(model), "-o", str(more), "--classes",
                 "0,1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "argument --classes" in err and not more.exists()


def test_bad_classes_and_resume_without_a_model_are_usage_errors(data, tmp_path, capsys):
    model = tmp_path / "m.pgs"
    for value in ("abc", ",", "1", "1,1"):
        assert main(["train", str(data), "-o", str(model), f"--classes={value}"]) == 2, value
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "argument --classes" in err, err
        assert "PGSClassifier" not in err
    assert main(["train", str(data), "-o", str(model), "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "argument --resume" in err and "-i" in err
    assert not model.exists()


def _diverging(path, n=80, at=44):
    """Regression rows whose row `at` (from 0) makes PGS on R^n diverge; returns X, y."""
    rng = np.random.RandomState(0)
    X = np.round(rng.rand(n, 5), 6)
    y = X @ [1.0, -2.0, 0.5, 0.0, 3.0]
    X[at, 0] = 1e300
    with open(path, "w") as f:
        for row, target in zip(X, y):
            f.write(f"{target:.6f} " + " ".join(f"{j + 1}:{v:.6g}" for j, v in enumerate(row))
                    + "\n")
    return X, np.round(y, 6)


def test_divergence_names_its_line_and_the_checkpoint(tmp_path, capsys):
    from onlinepgs import PGSDivergedError, PGSRegressor

    path = tmp_path / "reg.svm"
    X, y = _diverging(path)
    # the yardstick: the Python API keeps the steps before the diverging row
    reference = PGSRegressor(loss="squared", radius=None, sigma=1e-2, random_state=0)
    with pytest.raises(PGSDivergedError):
        reference.partial_fit(X, y)
    line = reference.online_stats_["n_examples"] + 1
    model = tmp_path / "dv.pgs"
    options = ["--loss", "squared", "--radius", "none", "--sigma", "1e-2", "--chunk-rows", "10"]
    # with the table: its reports split the chunks into several calls
    assert main(["train", str(path), "-o", str(model), *options]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith(f"onlinepgs: error: {path}:{line}: training diverged: ")
    assert "--radius auto" in err[-1] and "Traceback" not in "".join(err)
    assert not model.exists()
    assert main(["train", str(path), "-o", str(model), *options, "--quiet",
                 "--checkpoint-every", "10"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}:{line}: training diverged" in err
    assert f"[{model} holds the last checkpoint; resume with -i {model} --resume]" in err
    assert load_model(model).online_stats_["n_examples"] == (line - 1) // 10 * 10


def test_several_passes_over_a_pipe_are_a_usage_error(tmp_path, capsys):
    small = tmp_path / "small.svm"
    write_svmlight(small, n=300)  # fits in a pipe's buffer
    model = tmp_path / "m.pgs"
    read, write = os.pipe()
    try:
        os.write(write, small.read_bytes())
        os.close(write)
        assert main(["train", f"/dev/fd/{read}", "-o", str(model), "--passes", "2",
                     "--quiet"]) == 2
    finally:
        os.close(read)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"/dev/fd/{read}" in err and "--passes" in err
    assert main(["train", "-", "-o", str(model), "--passes", "2"]) == 2
    assert "--passes" in capsys.readouterr().err and not model.exists()
    # a named pipe: refused before it is opened (opening it would wait for a writer)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    try:
        done = subprocess.run(EXE + ["train", str(fifo), "-o", str(model), "--passes", "2"],
                              capture_output=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("train --passes 2 waited on a named pipe")
    assert done.returncode == 2 and str(fifo).encode() in done.stderr
    assert main(["train", str(small), "-o", str(model), "--passes", "2", "--quiet"]) == 0
    assert load_model(model).online_stats_["n_examples"] == 600


def test_predict_writes_into_a_fifo_a_symlink_and_dev_fd(data, tmp_path):
    import stat
    import threading

    from onlinepgs import save_model

    model, expected_path = tmp_path / "m.pgs", tmp_path / "expected.txt"
    assert main(["train", str(data), "-o", str(model), "--quiet"]) == 0
    assert main(["predict", str(model), str(data), "-o", str(expected_path)]) == 0
    expected = expected_path.read_bytes()
    assert expected.count(b"\n") == 3000

    def read_in_thread(opener):
        got = []
        reader = threading.Thread(target=lambda: got.append(opener()), daemon=True)
        reader.start()
        return reader, got

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader, got = read_in_thread(fifo.read_bytes)
    assert main(["predict", str(model), str(data), "-o", str(fifo)]) == 0
    reader.join(timeout=10)
    assert got == [expected] and stat.S_ISFIFO(os.lstat(fifo).st_mode)

    read, write = os.pipe()  # what `-o >(cmd)` passes: /dev/fd/N
    with os.fdopen(read, "rb") as r:
        reader, got = read_in_thread(r.read)
        try:
            code = main(["predict", str(model), str(data), "-o", f"/dev/fd/{write}"])
        finally:
            os.close(write)
        reader.join(timeout=10)
    assert code == 0 and got == [expected]

    real, link = tmp_path / "real.txt", tmp_path / "link.txt"
    real.write_text("old\n")
    link.symlink_to(real.name)
    assert main(["predict", str(model), str(data), "-o", str(link)]) == 0
    assert link.is_symlink() and real.read_bytes() == expected
    # save_model through a link: still a new file renamed onto the target
    inode = real.stat().st_ino
    save_model(load_model(model), link)
    assert link.is_symlink() and real.stat().st_ino != inode
    np.testing.assert_array_equal(load_model(real).coef_, load_model(model).coef_)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_info_json_is_standard_json(data, tmp_path, capsys):
    import json
    import math

    from onlinepgs.model_io import read_header

    model = tmp_path / "m.pgs"
    assert main(["train", str(data), "-o", str(model), "--radius", "none", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["info", str(model), "--json"]) == 0

    def refuse(constant):
        raise AssertionError(f"{constant} is not JSON")

    printed = json.loads(capsys.readouterr().out, parse_constant=refuse)
    non_finite = []

    def same(expected, got, where):
        if isinstance(expected, dict):
            assert sorted(expected) == sorted(got), where
            for key in expected:
                same(expected[key], got[key], f"{where}.{key}")
        elif isinstance(expected, list):
            assert len(expected) == len(got), where
            for i, (e, g) in enumerate(zip(expected, got)):
                same(e, g, f"{where}[{i}]")
        elif isinstance(expected, float) and not math.isfinite(expected):
            non_finite.append(where)
            assert isinstance(got, str) and str(float(got)) == str(expected), where
        else:
            assert got == expected, where

    same(read_header(model), printed, "header")
    assert non_finite  # the case that needs it: a radius-free model's infinite radius


def _checkpoint_then_fail(tmp_path, options):
    """A checkpoint of a run over 1000 rows stopped by a bad line; the good file."""
    data, broken = tmp_path / "d.svm", tmp_path / "broken.svm"
    write_svmlight(data, n=1000)
    lines = data.read_bytes().splitlines(keepends=True)
    broken.write_bytes(b"".join(lines[:700]) + b"1 3:oops\n" + b"".join(lines[700:]))
    ckpt = tmp_path / "ckpt.pgs"
    assert main(["train", str(broken), "-o", str(ckpt), "--chunk-rows", "100",
                 "--checkpoint-every", "200", "--quiet", *options]) == 1
    broken.write_bytes(data.read_bytes())
    return broken, ckpt


def test_resume_refuses_other_run_options(tmp_path, capsys):
    from onlinepgs import save_model

    options = ["--passes", "2", "--holdout-every", "7"]
    data, ckpt = _checkpoint_then_fail(tmp_path, options)
    capsys.readouterr()
    out = tmp_path / "resumed.pgs"
    for given, flag, saved in ((["--passes", "2"], "--holdout-every", "7"),
                               (["--passes", "2", "--holdout-every", "5"], "--holdout-every",
                                "7"),
                               (["--holdout-every", "7"], "--passes", "2")):
        assert main(["train", str(data), "-i", str(ckpt), "--resume", "-o", str(out),
                     *given]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"argument {flag}" in err and f"{flag} {saved}" in err
        assert not out.exists()
    # over another number of files: each pass would read other rows
    assert main(["train", str(data), str(data), "-i", str(ckpt), "--resume", "-o", str(out),
                 *options]) == 2
    assert capsys.readouterr().err == (
        f"onlinepgs train: error: the checkpoint {ckpt} was written by a run over 1 file(s) "
        f"({data}), this one reads 2; resume over as many files, in the same order (each "
        "pass reads them in turn)\n")
    assert not out.exists()
    full = tmp_path / "full.pgs"
    assert main(["train", str(data), "-o", str(full), "--quiet", *options]) == 0
    # a checkpoint written before the options were recorded still resumes
    est, header = load_model(ckpt, return_header=True)
    extra = header["extra"]
    for name in ("holdout_every", "passes"):
        del extra["stream"][name]
    save_model(est, ckpt, extra=extra)
    assert main(["train", str(data), "-i", str(ckpt), "--resume", "-o", str(out), "--quiet",
                 *options]) == 0
    np.testing.assert_array_equal(load_model(out).coef_, load_model(full).coef_)


def test_mini_batches_span_the_held_out_rows_and_chunks(tmp_path):
    data = tmp_path / "d.svm"
    write_svmlight(data, n=5000)
    X, y = load_svmlight(data)
    kept = (np.arange(5000) + 1) % 7 != 0
    reference = PGSClassifier(batch_size=4, sigma=1e-3, random_state=0)
    reference.partial_fit(X[kept], y[kept], classes=[-1, 1])
    for chunk_rows in ("2000", "333"):
        model = tmp_path / f"m{chunk_rows}.pgs"
        assert main(["train", str(data), "-o", str(model), "--quiet", "--batch-size", "4",
                     "--sigma", "1e-3", "--holdout-every", "7", "--chunk-rows",
                     chunk_rows]) == 0
        trained = load_model(model)
        np.testing.assert_array_equal(trained.coef_, reference.coef_)
        np.testing.assert_array_equal(trained.intercept_, reference.intercept_)
        assert trained.online_stats_ == pytest.approx(reference.online_stats_)


def _edited_checkpoint(tmp_path, ckpt, **changes):
    """A copy of checkpoint `ckpt` whose stream position has `changes` (None deletes a
    field; "stream" replaces the whole position), checksum recomputed: a hand edit."""
    from onlinepgs import save_model

    est, header = load_model(ckpt, return_header=True)
    extra = header["extra"]
    if "stream" in changes:
        extra["stream"] = changes.pop("stream")
    for field, value in changes.items():
        if value is None:
            del extra["stream"][field]
        else:
            extra["stream"][field] = value
    path = tmp_path / "edited.pgs"
    save_model(est, path, extra=extra)
    return path


@pytest.mark.parametrize("changes, message", [
    ({"pass": 99}, "extra.stream.pass is 99: beyond the run's 1 pass(es)"),
    ({"rows": 1e30}, "extra.stream.rows is 1e+30: not a non-negative integer"),
    ({"rows": -1}, "extra.stream.rows is -1: not a non-negative integer"),
    ({"pass": "x"}, "extra.stream.pass is 'x': not a non-negative integer"),
    ({"pass": True}, "extra.stream.pass is True: not a non-negative integer"),
    ({"file": 5}, "extra.stream.file is 5: beyond the run's 1 file(s)"),
    ({"pass_rows": 2.5}, "extra.stream.pass_rows is 2.5"),
    ({"rows": None}, "extra.stream has no 'rows'"),
    ({"stream": [0, 0, 600]}, "extra.stream is [0, 0, 600]: not an object"),
    ({"holdout": [float("nan"), 0.0]}, "extra.stream.holdout is [nan, 0.0]"),
    ({"holdout": [1.0, 601.0]}, r"extra.stream.holdout is [1.0, 601.0]"),
    ({"holdout": "none"}, "extra.stream.holdout is 'none'"),
    ({"passes": 0}, "extra.stream.passes is 0: not a positive integer"),
    ({"holdout_every": "7"}, "extra.stream.holdout_every is '7'"),
    ({"data": "d.svm"}, "extra.stream.data is 'd.svm': not a list of file names"),
    # counts that disagree with each other or with the model: another model's position
    ({"pass_rows": 5}, "extra.stream (start_examples 0, pass 0, pass_rows 5, rows 600; 0 "
                       "held out) is not this model's: it has trained on 600 rows"),
    ({"rows": 10**30}, "extra.stream.rows is 10000000000000000000000000000"),
    ({"pass_rows": 10**30}, "extra.stream.pass_rows is 1000000000000000000000000000000: "
                            "not a non-negative integer (at most 2**53)"),
    ({"rows": 500}, "pass_rows 0, rows 500; 0 held out) is not this model's: it has "
                    "trained on 600 rows, which 0 whole pass(es) and the 500 rows"),
    ({"start_examples": 7}, "it has trained on 600 rows"),
    ({"pass": 1, "passes": 2}, "pass 1, pass_rows 0, rows 600; 0 held out) is not this "
                               "model's"),
    ({"holdout": [0.0, 3.0]}, "extra.stream.holdout is [0.0, 3.0]: held-out rows in a run "
                              "without a hold-out"),
])
def test_a_hand_edited_checkpoint_position_is_refused(tmp_path, capsys, changes, message):
    """Every field of the position is checked (type, range, the other fields): one
    line naming the field and its value, in train --resume and info, and no model."""
    data, ckpt = _checkpoint_then_fail(tmp_path, [])
    edited = _edited_checkpoint(tmp_path, ckpt, **changes)
    capsys.readouterr()
    out = tmp_path / "out.pgs"
    assert main(["train", str(data), "-i", str(edited), "--resume", "-o", str(out),
                 "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and str(edited) in err, err
    assert not out.exists()
    assert main(["info", str(edited)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_a_checkpoint_position_beyond_the_data_is_refused(tmp_path, capsys):
    """Positions that are well-formed but outside this run's data: a usage error for
    the passes and files, the file's real length for the rows; never a 'finished'
    model trained on nothing."""
    data, ckpt = _checkpoint_then_fail(tmp_path, [])
    out = tmp_path / "out.pgs"
    # a checkpoint written before the run's options were recorded: only this run's
    old = _edited_checkpoint(tmp_path, ckpt, passes=None, data=None, start_examples=None,
                             **{"pass": 3})
    capsys.readouterr()
    assert main(["train", str(data), "-i", str(old), "--resume", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "resumes in pass 4 (extra.stream.pass = 3), this run " \
                                   "has --passes 1" in err, err
    old = _edited_checkpoint(tmp_path, ckpt, passes=None, data=None, start_examples=None,
                             file=1)
    assert main(["train", str(data), "-i", str(old), "--resume", "-o", str(out)]) == 2
    assert "resumes in file 2 (extra.stream.file = 1), this run reads 1 file(s)" \
        in capsys.readouterr().err
    far = _edited_checkpoint(tmp_path, ckpt, rows=10**15, start_examples=None)
    assert main(["train", str(data), "-i", str(far), "--resume", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{data}: has 1000 rows, but the checkpoint {far} " \
                                   f"resumes after row {10**15} of it" in err, err
    assert not out.exists()
    # the end of the file is a position too: nothing left to train, the model is final
    # (a checkpoint that records its start: refused, the model has 600 rows, not 1000)
    assert main(["train", str(data), "-i", str(_edited_checkpoint(tmp_path, ckpt, rows=1000)),
                 "--resume", "-o", str(out), "--quiet"]) == 1
    assert "it has trained on 600 rows" in capsys.readouterr().err
    end = _edited_checkpoint(tmp_path, ckpt, rows=1000, start_examples=None)
    assert main(["train", str(data), "-i", str(end), "--resume", "-o", str(out),
                 "--quiet"]) == 0
    np.testing.assert_array_equal(load_model(out).coef_, load_model(end).coef_)


def test_a_full_disk_at_a_checkpoint_keeps_the_previous_one(tmp_path, capsys, monkeypatch):
    """ENOSPC while writing the second checkpoint: one line naming the file, saying the
    previous checkpoint is intact; resuming from it gives the uninterrupted model."""
    import errno

    from onlinepgs.model_io import writing as model_io  # where the archive is written

    data = tmp_path / "d.svm"
    write_svmlight(data, n=1000)
    full, ckpt = tmp_path / "full.pgs", tmp_path / "ckpt.pgs"
    assert main(["train", str(data), "-o", str(full), "--quiet"]) == 0
    real, calls = model_io._write_zip, []

    def disk_full_on_second(fileobj, *args):
        calls.append(1)
        if len(calls) == 2:
            fileobj.write(b"PK\x03\x04 part of a model")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fileobj, *args)
    monkeypatch.setattr(model_io, "_write_zip", disk_full_on_second)
    capsys.readouterr()
    assert main(["train", str(data), "-o", str(ckpt), "--quiet", "--chunk-rows", "100",
                 "--checkpoint-every", "300"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert (f"cannot write {ckpt}: No space left on device; the previous {ckpt} is intact "
            f"[{ckpt} holds the last checkpoint; resume with -i {ckpt} --resume]") in err, err
    assert sorted(os.listdir(tmp_path)) == ["ckpt.pgs", "d.svm", "full.pgs"]
    assert load_model(ckpt).online_stats_["n_examples"] == 300
    monkeypatch.setattr(model_io, "_write_zip", real)
    assert main(["train", str(data), "-i", str(ckpt), "--resume", "-o", str(ckpt),
                 "--quiet"]) == 0
    np.testing.assert_array_equal(load_model(ckpt).coef_, load_model(full).coef_)


def test_p_near_1_trains_a_finite_model_and_too_near_is_a_usage_error(tmp_path, capsys):
    """Issue 32 item 2: `train --p 1.0001 --loss hinge` exited 0 and `predict` printed nan.
    The yardstick is the Python API over the same chunks."""
    path = tmp_path / "d.svm"
    write_svmlight(path, n=400, n_features=20)
    model, pred = tmp_path / "m.pgs", tmp_path / "pred.txt"
    assert main(["train", str(path), "-o", str(model), "--quiet", "--p", "1.0001",
                 "--loss", "hinge", "--sigma", "1e-2", "--classes=-1,1"]) == 0
    assert main(["predict", str(model), str(path), "-o", str(pred), "--kind", "scores"]) == 0
    scores = np.loadtxt(pred)
    reference = PGSClassifier(loss="hinge", p=1.0001, sigma=1e-2, random_state=0)
    for X, y in iter_svmlight(path, chunk_rows=1000):
        reference.partial_fit(X, y, classes=[-1, 1])
    assert np.isfinite(scores).all() and np.abs(scores).max() > 0
    np.testing.assert_allclose(scores, reference.decision_function(load_svmlight(path)[0]),
                               rtol=1e-5, atol=1e-9)
    capsys.readouterr()
    done = run("train", path, "-o", tmp_path / "n.pgs", "--p", "1.00000001")
    assert done.returncode == 2 and done.stderr.count(b"\n") == 1
    assert b"argument --p: --p 1.00000001 is too close to 1" in done.stderr
