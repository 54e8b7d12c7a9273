"""The command on VW text (and the format plumbing every format shares): `train`,
`predict`, `eval` and `gap` read by --format or the extension, hashed as the model is."""
import gzip
import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from onlinepgs.model_io import load_learner
from onlinepgs.pgs import PGSClassifierLearner
from test_vw import murmur, reference


def run(*args, stdin=None, check=True):
    proc = subprocess.run([sys.executable, "-m", "onlinepgs.cli", *map(str, args)],
                          capture_output=True, text=True, input=stdin)
    if check and proc.returncode != 0:
        raise AssertionError(proc.stderr)
    return proc


def vw_data(n=600, seed=0, weights=False):
    """VW lines whose label depends on a few named features, in two namespaces."""
    rng = np.random.RandomState(seed)
    lines = []
    for i in range(n):
        user, ad = rng.randint(0, 30), rng.randint(0, 10)
        age = rng.rand()
        label = 1 if (user % 3 == 0) ^ (ad < 4) ^ (rng.rand() < 0.1) else -1
        head = f"{label}" + (f" {rng.choice([0.5, 1, 2, 3])}" if weights else "")
        lines.append(f"{head} 'r{i}|user u{user} age:{age:.4f} |ad a{ad} |  bias\n")
    return "".join(lines).encode()


def as_svmlight(text, n_bits):
    """The VW rows as zero-based svmlight rows hashed by hand (murmur of test_vw): the
    column h & mask, the value negated for a hash with its top bit set, duplicates
    summed; and the importance weights."""
    out, weights = [], []
    for label, importance, entries in reference(text):
        row = {}
        for _, h, v, _ in entries:
            col = h & ((1 << n_bits) - 1)
            row[col] = row.get(col, 0.0) + (-v if h >> 31 else v)
        out.append(f"{label:g} " + " ".join(f"{c}:{row[c]!r}" for c in sorted(row)))
        weights.append(importance)
    return ("\n".join(out) + "\n").encode(), np.array(weights)


def coef(path):
    est = load_learner(str(path))
    return est.coef_, est.intercept_


def test_vw_trains_as_the_same_rows_hashed_by_hand_in_svmlight(tmp_path):
    text = vw_data()
    (tmp_path / "d.vw").write_bytes(text)
    svm, _ = as_svmlight(text, 18)
    (tmp_path / "d.svm").write_bytes(svm)
    run("train", tmp_path / "d.vw", "-o", tmp_path / "a.pgs", "--sigma", "1e-3", "--quiet")
    run("train", tmp_path / "d.svm", "-o", tmp_path / "b.pgs", "--sigma", "1e-3", "--quiet",
        "--bits", 18, "--zero-based", 0)
    (ca, ia), (cb, ib) = coef(tmp_path / "a.pgs"), coef(tmp_path / "b.pgs")
    assert ca.shape == (1, 2 ** 18)
    np.testing.assert_array_equal(ca, cb)
    np.testing.assert_array_equal(ia, ib)


def test_importance_weights_are_sample_weights(tmp_path):
    text = vw_data(weights=True)
    (tmp_path / "d.vw").write_bytes(text)
    run("train", tmp_path / "d.vw", "-o", tmp_path / "m.pgs", "--sigma", "1e-3", "--quiet",
        "-b", 12)
    svm, w = as_svmlight(text, 12)
    assert len(set(w)) > 1
    from onlinepgs.svmlight import load_svmlight

    X, y = load_svmlight(__import__("io").BytesIO(svm), n_features=2 ** 12, zero_based=True)
    est = PGSClassifierLearner(sigma=1e-3, n_bits=12, random_state=0)
    est.partial_fit(X, y, classes=[-1, 1], sample_weight=w)
    got = load_learner(str(tmp_path / "m.pgs"))
    np.testing.assert_array_equal(got.coef_, est.coef_)
    np.testing.assert_array_equal(got.intercept_, est.intercept_)
    # and not the unweighted model
    plain = PGSClassifierLearner(sigma=1e-3, n_bits=12, random_state=0)
    plain.partial_fit(X, y, classes=[-1, 1])
    assert not np.array_equal(plain.coef_, est.coef_)


def test_predict_and_eval_read_as_the_model_was_trained(tmp_path):
    text = vw_data()
    (tmp_path / "d.vw.gz").write_bytes(gzip.compress(text))
    run("train", tmp_path / "d.vw.gz", "-o", tmp_path / "m.pgs", "--sigma", "1e-3",
        "--quiet", "-b", 16)
    with zipfile.ZipFile(tmp_path / "m.pgs") as zf:
        header = json.loads(zf.read("header.json"))
    assert header["extra"]["input"] == {"format": "vw"}
    est = load_learner(str(tmp_path / "m.pgs"))
    svm, _ = as_svmlight(text, 16)
    from onlinepgs.svmlight import load_svmlight

    X, y = load_svmlight(__import__("io").BytesIO(svm), n_features=2 ** 16, zero_based=True)
    want = est.predict(X)
    # a test file without labels, from stdin (no extension): the model's format
    unlabelled = b"".join(b"|" + line.split(b"|", 1)[1] + b"\n"
                          for line in text.splitlines())
    out = run("predict", tmp_path / "m.pgs", "-", stdin=unlabelled.decode()).stdout.split()
    assert [float(v) for v in out] == want.tolist()
    result = dict(line.split(" = ") for line in
                  run("eval", tmp_path / "m.pgs", tmp_path / "d.vw.gz").stdout.splitlines())
    assert int(result["rows"]) == len(y)
    assert float(result["accuracy"]) == pytest.approx(np.mean(want == y), abs=1e-6)
    gap = run("gap", tmp_path / "m.pgs", tmp_path / "d.vw.gz").stdout
    assert "rows = 600" in gap


def test_format_option_overrides_the_extension(tmp_path):
    (tmp_path / "d.txt").write_bytes(vw_data(50))
    bad = run("train", tmp_path / "d.txt", "--quiet", check=False)
    assert bad.returncode != 0 and "d.txt:1:" in bad.stderr and "Traceback" not in bad.stderr
    run("train", tmp_path / "d.txt", "--format", "vw", "-o", tmp_path / "m.pgs", "--quiet")
    assert load_learner(str(tmp_path / "m.pgs")).coef_.shape == (1, 2 ** 18)


def test_bits_short_option(tmp_path):
    (tmp_path / "d.vw").write_bytes(vw_data(50))
    run("train", tmp_path / "d.vw", "-b", 10, "-o", tmp_path / "m.pgs", "--quiet")
    assert load_learner(str(tmp_path / "m.pgs")).coef_.shape == (1, 1024)


def test_train_refuses_a_line_without_label(tmp_path):
    (tmp_path / "d.vw").write_bytes(b"1 |f a\n-1 |f b\n|f c\n")
    proc = run("train", tmp_path / "d.vw", "--quiet", "--classes=-1,1", check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].endswith(
        f"{tmp_path / 'd.vw'}:3: no label (a line to predict?): training needs a label "
        "on every row")


def test_bad_vw_line_is_one_line_with_its_column(tmp_path):
    (tmp_path / "d.vw").write_bytes(b"1 |f a\n-1 |f b:zz\n")
    proc = run("train", tmp_path / "d.vw", "--quiet", check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert f"{tmp_path / 'd.vw'}:2:9: bad feature value 'zz'" in proc.stderr


def test_interactions_need_a_namespaced_format(tmp_path):
    (tmp_path / "d.svm").write_bytes(b"1 1:1\n-1 2:1\n")
    proc = run("train", tmp_path / "d.svm", "-q", "ab", "--quiet", check=False)
    assert proc.returncode == 2 and "-q/--interactions" in proc.stderr
    proc = run("train", tmp_path / "d.svm", "-q", "abc", "--quiet", check=False)
    assert proc.returncode == 2 and "expected 2 namespace letters" in proc.stderr
    proc = run("train", tmp_path / "d.svm", "--label", "y", "--quiet", check=False)
    assert proc.returncode == 2 and "--label: applies to csv or tsv" in proc.stderr


def test_sdca_refuses_vw_input(tmp_path):
    (tmp_path / "d.vw").write_bytes(vw_data(20))
    proc = run("train", tmp_path / "d.vw", "--solver", "sdca", "--quiet", check=False)
    assert proc.returncode == 2 and "reads svmlight input only" in proc.stderr


@pytest.mark.parametrize("held_weight", [0.0, 3.0])
def test_holdout_losses_are_weighted_like_training(tmp_path, held_weight):
    """Rows held out (every 2nd) with importance c: the model is that of the run where
    they have weight 1 (they are not trained on), and the held-out loss sum is c times
    its sum."""
    from onlinepgs.streaming import train_stream
    from onlinepgs.streaming.sources import FileSource

    lines = vw_data(400).decode().splitlines()
    weighted = [(line if i % 2 == 0 else line.replace(" 'r", f" {held_weight} 'r", 1))
                for i, line in enumerate(lines)]
    (tmp_path / "a.vw").write_text("\n".join(lines) + "\n")
    (tmp_path / "b.vw").write_text("\n".join(weighted) + "\n")
    runs = [train_stream(PGSClassifierLearner(sigma=1e-3, n_bits=18, random_state=0),
                         [FileSource(tmp_path / name)], holdout_every=2, chunk_rows=64)
            for name in ("a.vw", "b.vw")]
    np.testing.assert_array_equal(runs[0].learner.coef_, runs[1].learner.coef_)
    assert runs[0].holdout_rows == runs[1].holdout_rows == 200
    assert runs[0].holdout_sum > 0
    assert runs[1].holdout_sum == pytest.approx(held_weight * runs[0].holdout_sum,
                                                rel=1e-12)
