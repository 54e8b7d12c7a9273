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
    # eval's figures count each row once: said where the rows have other weights
    done = run("eval", tmp_path / "m.pgs", tmp_path / "d.vw")
    assert done.stderr == (f"onlinepgs: note: {tmp_path / 'd.vw'} gives its rows importance "
                           "weights; the figures count every row once, whatever its weight\n")
    (tmp_path / "plain.vw").write_bytes(vw_data())
    assert run("eval", tmp_path / "m.pgs", tmp_path / "plain.vw").stderr == ""


def test_predict_and_eval_read_as_the_model_was_trained(tmp_path):
    text = vw_data()
    (tmp_path / "d.vw.gz").write_bytes(gzip.compress(text))
    run("train", tmp_path / "d.vw.gz", "-o", tmp_path / "m.pgs", "--sigma", "1e-3",
        "--quiet", "-b", 16)
    with zipfile.ZipFile(tmp_path / "m.pgs") as zf:
        header = json.loads(zf.read("header.json"))
    assert header["extra"]["input"] == {"format": "vw", "vw_hashing": 2}
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
    # from standard input: named as its reader names it
    proc = run("train", "-", "--format", "vw", "--quiet", "--classes=-1,1", check=False,
               stdin="1 |f a\n-1 |f b\n|f c\n")
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        "onlinepgs: error: <stdin>:3: no label (a line to predict?): training needs a "
        "label on every row")


@pytest.mark.parametrize("header", [True, False])
def test_a_csv_rows_error_in_the_first_chunk_names_its_line(tmp_path, header):
    """A row the learner refuses in a CSV file's first chunk is named by its line, the
    header counted (it was named by the range of the chunk's lines, one more than its
    rows), as in every later chunk."""
    rows = [f"{i % 7}.5,{i % 2}" for i in range(300)]
    rows[9] = "0.5,7"  # line 11 with the header, 10 without
    text = ("a,y\n" if header else "") + "\n".join(rows) + "\n"
    (tmp_path / "d.csv").write_text(text)
    label = ["--label", "y"] if header else ["--no-header", "--label", "2"]
    proc = run("train", tmp_path / "d.csv", *label, "--classes", "0,1", "--quiet",
               "--chunk-rows", "100", check=False)
    assert proc.returncode == 1, proc.stderr
    line = 11 if header else 10
    assert proc.stderr.strip().splitlines()[-1].startswith(
        f"onlinepgs: error: {tmp_path / 'd.csv'}:{line}: label 7 is not one of the classes")


def test_bad_vw_line_is_one_line_with_its_column(tmp_path):
    (tmp_path / "d.vw").write_bytes(b"1 |f a\n-1 |f b:2zz\n")  # (b:zz: a string value)
    proc = run("train", tmp_path / "d.vw", "--quiet", check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert f"{tmp_path / 'd.vw'}:2:9: bad feature value '2zz'" in proc.stderr


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


# ---- CSV, TSV and JSON lines through the command (issue 35, end to end) -------------------

CSV_COLUMNS = ("user", "ad", "price", "w", "y", "junk")


def log_rows(n=500, seed=0):
    """Rows of a click log: categorical user/ad (some cells empty), a numeric price, an
    importance weight, a text label Y/N that depends on user, ad and price, a junk column."""
    rng = np.random.RandomState(seed)
    rows = []
    for i in range(n):
        user, ad, price = rng.randint(0, 20), rng.randint(0, 8), round(rng.rand() * 3, 3)
        label = (user % 3 == 0) ^ (ad < 3) ^ (price > 2.5) ^ (rng.rand() < 0.1)
        rows.append({"user": f"u{user}" if i % 17 else "", "ad": f"a{ad}", "price": price,
                     "w": float(rng.choice([0.5, 1.0, 2.0])), "y": "Y" if label else "N",
                     "junk": f"j{rng.randint(1000)}"})
    return rows


def as_csv(rows, delimiter=","):
    lines = [delimiter.join(CSV_COLUMNS)]
    lines += [delimiter.join(str(r[c]) for c in CSV_COLUMNS) for r in rows]
    return ("\n".join(lines) + "\n").encode()


def as_records(rows):
    """The CSV rows as Python records: each column its own namespace, named like the
    column: a categorical cell its text (value 1), a numeric cell the column's name."""
    return [{"user": {r["user"]: 1} if r["user"] else {}, "ad": {r["ad"]: 1},
             "price": {"price": r["price"]}} for r in rows]


CSV_ROLES = ("--label", "y", "--label-map", "Y:1,N:0", "--weight", "w", "--numeric",
             "price", "--ignore", "junk", "--categorical", "user,ad")
CSV_KW = dict(label="y", label_map={"Y": 1, "N": 0}, weight="w", numeric=["price"],
              ignore=["junk"], categorical=["user", "ad"])


def python_learner(chunks, n_bits=18, **params):
    """The Python learner fed the chunks as the command does (partial_fit a chunk; the
    readers' chunks hold their interactions already: `expanded_input`)."""
    from onlinepgs.features import expanded_input

    est = PGSClassifierLearner(sigma=1e-3, n_bits=n_bits, random_state=0, **params)
    with expanded_input():
        for X, y, w in chunks:
            est.partial_fit(X, y, classes=[0, 1], sample_weight=w)
    return est


def assert_same_model(path, est):
    got = load_learner(str(path))
    np.testing.assert_array_equal(got.coef_, est.coef_)
    np.testing.assert_array_equal(got.intercept_, est.intercept_)


@pytest.mark.parametrize("delimiter, name, extra", [
    (",", "log.csv", ()), ("\t", "log.tsv", ()), (";", "log.txt",
                                                  ("--format", "csv", "--delimiter", ";"))])
def test_csv_trains_as_the_python_learner_on_iter_csv_chunks(tmp_path, delimiter, name,
                                                             extra):
    from onlinepgs.formats import iter_csv

    rows = log_rows(2_600)  # two chunks of the command's 2000 rows
    (tmp_path / name).write_bytes(as_csv(rows, delimiter))
    run("train", tmp_path / name, *extra, *CSV_ROLES, "--sigma", "1e-3", "-o",
        tmp_path / "m.pgs", "--quiet")
    est = python_learner(iter_csv(str(tmp_path / name), delimiter=delimiter,
                                  chunk_rows=2_000, **CSV_KW))
    assert_same_model(tmp_path / "m.pgs", est)
    # sample weights do matter: the same rows unweighted give another model
    kw = {**{k: v for k, v in CSV_KW.items() if k != "weight"}, "ignore": ["junk", "w"]}
    plain = python_learner(iter_csv(str(tmp_path / name), delimiter=delimiter,
                                    chunk_rows=2_000, **kw))
    assert not np.array_equal(plain.coef_, est.coef_)
    # predict and eval read as trained: no role repeated (the label column Y/N mapped)
    X = [x for x, _, _ in iter_csv(str(tmp_path / name), delimiter=delimiter,
                                   chunk_rows=None, **CSV_KW)][0]
    want = est.predict(X)
    got = run("predict", tmp_path / "m.pgs", tmp_path / name).stdout.split()
    assert [float(v) for v in got] == want.tolist()
    y = np.array([r["y"] == "Y" for r in rows], float)
    result = dict(line.split(" = ") for line in
                  run("eval", tmp_path / "m.pgs", tmp_path / name).stdout.splitlines())
    assert int(result["rows"]) == len(rows)
    assert float(result["accuracy"]) == pytest.approx(np.mean(want == y), abs=1e-6)


def test_json_lines_train_as_the_python_learner_on_iter_jsonl_chunks(tmp_path):
    from onlinepgs.formats import iter_jsonl

    rows = log_rows(2_300, seed=1)
    lines = [json.dumps({"label": int(r["y"] == "Y"), "weight": r["w"],
                         "features": {"user": {"id": r["user"] or None},
                                      "ad": {"id": r["ad"]}, "price": r["price"]}})
             for r in rows]
    (tmp_path / "log.jsonl").write_text("\n".join(lines) + "\n")
    run("train", tmp_path / "log.jsonl", "--sigma", "1e-3", "-o", tmp_path / "m.pgs",
        "--quiet", "-q", "ua")
    est = python_learner(iter_jsonl(str(tmp_path / "log.jsonl"), chunk_rows=2_000,
                                    interactions=["ua"]), interactions=["ua"])
    assert_same_model(tmp_path / "m.pgs", est)
    plain = python_learner(iter_jsonl(str(tmp_path / "log.jsonl"), chunk_rows=2_000))
    assert not np.array_equal(plain.coef_, est.coef_[:, :])  # -q ua crossed something
    # the Python API on the same rows as records: the same model
    records = [{"user": {"id": r["user"] or None}, "ad": {"id": r["ad"]},
                "price": r["price"]} for r in rows]
    y = np.array([r["y"] == "Y" for r in rows], float)
    w = np.array([r["w"] for r in rows])
    direct = PGSClassifierLearner(sigma=1e-3, n_bits=18, random_state=0,
                                  interactions=["ua"])
    for at in range(0, len(rows), 2_000):
        direct.partial_fit(records[at:at + 2_000], y[at:at + 2_000], classes=[0, 1],
                           sample_weight=w[at:at + 2_000])
    np.testing.assert_array_equal(direct.coef_, est.coef_)
    # predict from stdin (no extension: the model's format), lines without labels
    unlabelled = "\n".join(json.dumps({"features": json.loads(line)["features"]})
                           for line in lines[:50]) + "\n"
    got = run("predict", tmp_path / "m.pgs", "-", stdin=unlabelled).stdout.split()
    assert [float(v) for v in got] == est.predict(records[:50]).tolist()


def test_csv_with_q_is_the_python_learner_with_interactions_on_records(tmp_path):
    """-q ua on a CSV log: bit for bit the Python learner given interactions=["ua"] and
    the rows as records with namespaces named like the columns."""
    rows = log_rows(2_400, seed=2)
    (tmp_path / "log.csv").write_bytes(as_csv(rows))
    run("train", tmp_path / "log.csv", *CSV_ROLES, "-q", "ua", "--interactions", "uap",
        "--sigma", "1e-3", "-o", tmp_path / "m.pgs", "--quiet")
    records = as_records(rows)
    y = np.array([r["y"] == "Y" for r in rows], float)
    w = np.array([r["w"] for r in rows])
    est = PGSClassifierLearner(sigma=1e-3, n_bits=18, random_state=0,
                               interactions=["ua", "uap"])
    for at in range(0, len(rows), 2_000):
        est.partial_fit(records[at:at + 2_000], y[at:at + 2_000], classes=[0, 1],
                        sample_weight=w[at:at + 2_000])
    assert_same_model(tmp_path / "m.pgs", est)
    assert load_learner(str(tmp_path / "m.pgs")).interactions == ["ua", "uap"]
    # and the crossing matters: without -q, another model
    run("train", tmp_path / "log.csv", *CSV_ROLES, "--sigma", "1e-3", "-o",
        tmp_path / "plain.pgs", "--quiet")
    assert not np.array_equal(load_learner(str(tmp_path / "plain.pgs")).coef_, est.coef_)


def test_continuing_a_csv_model_reads_the_new_file_with_its_roles(tmp_path):
    from onlinepgs.formats import iter_csv

    rows = log_rows(1_500, seed=3)
    (tmp_path / "a.csv").write_bytes(as_csv(rows[:900]))
    (tmp_path / "b.csv.gz").write_bytes(gzip.compress(as_csv(rows[900:])))
    run("train", tmp_path / "a.csv", *CSV_ROLES, "-q", "ua", "--sigma", "1e-3", "-o",
        tmp_path / "m.pgs", "--quiet")
    run("train", tmp_path / "b.csv.gz", "-i", tmp_path / "m.pgs", "-o",
        tmp_path / "m2.pgs", "--quiet")
    est = python_learner([*iter_csv(str(tmp_path / "a.csv"), chunk_rows=2_000,
                                    interactions=["ua"], **CSV_KW),
                          *iter_csv(str(tmp_path / "b.csv.gz"), chunk_rows=2_000,
                                    interactions=["ua"], **CSV_KW)],
                         interactions=["ua"])
    assert_same_model(tmp_path / "m2.pgs", est)


def test_csv_from_stdin_with_format(tmp_path):
    from onlinepgs.formats import iter_csv

    rows = log_rows(300, seed=4)
    data = as_csv(rows)
    (tmp_path / "log.csv").write_bytes(data)
    run("train", "-", "--format", "csv", *CSV_ROLES, "--sigma", "1e-3", "-o",
        tmp_path / "m.pgs", "--quiet", stdin=data.decode())
    assert_same_model(tmp_path / "m.pgs", python_learner(iter_csv(
        str(tmp_path / "log.csv"), chunk_rows=2_000, **CSV_KW)))
    got = run("predict", tmp_path / "m.pgs", "-", stdin=data.decode()).stdout.split()
    assert len(got) == 300


def test_a_label_not_in_the_map_is_one_line_with_its_place(tmp_path):
    rows = log_rows(40)
    text = as_csv(rows).decode().splitlines()
    text[7] = text[7].replace(",Y,", ",maybe,").replace(",N,", ",maybe,")
    (tmp_path / "log.csv").write_text("\n".join(text) + "\n")
    proc = run("train", tmp_path / "log.csv", *CSV_ROLES, "--quiet", check=False)
    column = len(",".join(text[7].split(",")[:4])) + 2  # the label is the 5th field
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert f"{tmp_path / 'log.csv'}:8:{column}:" in proc.stderr and "maybe" in proc.stderr


@pytest.mark.parametrize("name, content, where", [
    ("d.csv", b"y,a\n1,x\n1,x,extra\n", ":3:"),
    ("d.csv", b"y,a,a\n1,x,z\n", ":1:"),
    ("d.tsv", b"y\tp\n1\t2\n0\tfar\n", ":3:3:"),
    ("d.jsonl", b'{"label": 1}\n{"label": 1, "features": {"a": [2]}}\n', ":2:27:"),
    ("d.jsonl", b'{"label": 1}\n{"label": 1,\n', ":2:"),
    ("d.vw", b"1 |f a\n1 |f a:1b\n", ":2:8:"),
])
def test_bad_input_of_each_format_is_one_line(tmp_path, name, content, where):
    (tmp_path / name).write_bytes(content)
    extra = ("--label", "y", "--numeric", "p") if name == "d.tsv" else (
        ("--label", "y") if name.endswith(".csv") else ())
    proc = run("train", tmp_path / name, *extra, "--quiet", check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{tmp_path / name}{where}" in lines[0], proc.stderr


def audit_entries(rows):
    """Each row's (namespace, feature) pairs, namespaces named user, ad, price (a CSV
    numeric column's feature is its name)."""
    return [[("user", r["user"]), ("ad", r["ad"]), ("price", "price")] if r["user"] else
            [("ad", r["ad"]), ("price", "price")] for r in rows]


def expected_names(entries, n_bits, pairs):
    """{name: (column, sign)} of every feature and crossed pair (namespace letters) of
    the rows, hashed by hand: murmurhash3 of the feature seeded by its namespace's
    hash, pairs (h_a * 16777619) ^ h_b, the column h & mask, the sign the top bit."""
    from onlinepgs._core._hashing import murmurhash3

    out = {}
    for row in entries:
        hashed = [(ns, f"{ns}^{f}", murmurhash3(f, murmurhash3(ns, 0))) for ns, f in row]
        crossed = [("", f"{na}*{nb}", ((ha * 16777619) & 0xFFFFFFFF) ^ hb)
                   for a, b in pairs for sa, na, ha in hashed for sb, nb, hb in hashed
                   if sa[0] == a and sb[0] == b]
        for _, name, h in hashed + crossed:
            out[name] = (h & ((1 << n_bits) - 1), -1 if h >> 31 else 1)
    return out


@pytest.mark.parametrize("fmt", ["vw", "csv", "jsonl"])
def test_audit_names_crossed_features_at_their_columns(tmp_path, fmt):
    """train --audit -q ua: info --weights --json names every non-zero column by the
    features (and "user^x*ad^y" pairs) that hash there, as computed by hand."""
    rows = log_rows(300, seed=5)
    y = [int(r["y"] == "Y") for r in rows]
    if fmt == "vw":
        text = "".join(f"{2 * t - 1} |user {r['user']} |ad {r['ad']} |price price:{r['price']}\n"
                       if r["user"] else f"{2 * t - 1} |ad {r['ad']} |price price:{r['price']}\n"
                       for r, t in zip(rows, y))
        extra = ()
    elif fmt == "csv":
        text = "user,ad,price,y\n" + "".join(f"{r['user']},{r['ad']},{r['price']},{t}\n"
                                         for r, t in zip(rows, y))
        extra = ("--label", "y", "--numeric", "price")
    else:
        text = "".join(json.dumps({"label": t, "features": {
            **({"user": {r["user"]: 1}} if r["user"] else {}), "ad": {r["ad"]: 1},
            "price": {"price": r["price"]}}}) + "\n" for r, t in zip(rows, y))
        extra = ()
    (tmp_path / f"d.{fmt}").write_text(text)
    run("train", tmp_path / f"d.{fmt}", *extra, "-q", "ua", "-b", 14, "--audit", "-o",
        tmp_path / "m.pgs", "--quiet")
    report = json.loads(run("info", tmp_path / "m.pgs", "--weights", "--top", 0,
                            "--json").stdout)
    want = expected_names(audit_entries(rows), 14, ["ua"])
    assert any("*" in name for name in want) and len(want) > 100
    coef = load_learner(str(tmp_path / "m.pgs")).coef_[0]
    got = {}
    for row in report["problems"][0]["weights"]:
        assert row["more"] == 0  # no column holds more than the 3 names kept
        signs = row.get("signs")  # (the report names each name's sign where it can)
        for k, name in enumerate(row["names"]):
            got[name] = (row["column"], want[name][1] if signs is None else signs[k])
    assert got == {name: at for name, at in want.items() if coef[at[0]] != 0}
    assert sum("*" in name for name in got) > 50


def test_predict_a_csv_without_the_label_weight_and_ignored_columns(tmp_path):
    """A file to predict has no label (nor the weight or junk columns training took or
    ignored): predict scores it as the full file (it used to stop at the header: "the
    label column 'y' is not in the header"); eval, which needs labels, still refuses."""
    rows = log_rows(200, seed=6)
    (tmp_path / "log.csv").write_bytes(as_csv(rows))
    run("train", tmp_path / "log.csv", *CSV_ROLES, "-q", "ua", "-o", tmp_path / "m.pgs",
        "--quiet")
    kept = ("ad", "price", "user")  # another column order too: the header decides
    (tmp_path / "test.csv").write_text("\n".join(
        [",".join(kept)] + [",".join(str(r[c]) for c in kept) for r in rows]) + "\n")
    full = run("predict", tmp_path / "m.pgs", tmp_path / "log.csv",
               "--kind", "scores").stdout
    assert run("predict", tmp_path / "m.pgs", tmp_path / "test.csv",
               "--kind", "scores").stdout == full
    assert len(set(full.split())) > 10
    proc = run("eval", tmp_path / "m.pgs", tmp_path / "test.csv", check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"{tmp_path / 'test.csv'}:1: the label column 'y' is not in the header" in \
        proc.stderr


def test_csv_absent_ok_parameter():
    import io

    from onlinepgs.formats.csv import CSVError, iter_csv

    data = b"user,ad\nu1,a1\nu2,\n"
    with pytest.raises(CSVError, match="the weight column 'w' is not in the header"):
        list(iter_csv(io.BytesIO(data), label="y", weight="w", absent_ok=["label"]))
    (X, y, w), = iter_csv(io.BytesIO(data), label="y", weight="w", ignore="z",
                          absent_ok=("label", "weight", "ignore"), n_bits=10)
    (X0, y0, w0), = iter_csv(io.BytesIO(data), n_bits=10)
    assert (X != X0).nnz == 0 and X.getnnz(axis=1).tolist() == [2, 1]
    assert np.isnan(y).all() and w is None
    with pytest.raises(ValueError, match="absent_ok takes the roles"):
        iter_csv(io.BytesIO(data), absent_ok=["numeric"])


def test_continuing_with_other_csv_options_reads_the_new_file_by_them(tmp_path):
    """train -i MODEL --label lab: the new file's label column is 'lab' (the option used
    to be dropped silently for the model's 'y'), the other roles the model's; the
    model file then keeps the roles merged."""
    from onlinepgs.formats import iter_csv

    rows = log_rows(700, seed=7)
    (tmp_path / "a.csv").write_bytes(as_csv(rows[:400]))
    (tmp_path / "b.csv").write_bytes(as_csv(rows[400:]).replace(b",y,", b",lab,", 1))
    run("train", tmp_path / "a.csv", *CSV_ROLES, "--sigma", "1e-3", "-o",
        tmp_path / "m.pgs", "--quiet")
    run("train", tmp_path / "b.csv", "-i", tmp_path / "m.pgs", "--label", "lab", "-o",
        tmp_path / "m2.pgs", "--quiet")
    est = python_learner([*iter_csv(str(tmp_path / "a.csv"), chunk_rows=2_000, **CSV_KW),
                          *iter_csv(str(tmp_path / "b.csv"), chunk_rows=2_000,
                                    **{**CSV_KW, "label": "lab"})])
    assert_same_model(tmp_path / "m2.pgs", est)
    with zipfile.ZipFile(tmp_path / "m2.pgs") as zf:
        columns = json.loads(zf.read("header.json"))["extra"]["input"]["columns"]
    assert columns["label"] == "lab" and columns["weight"] == "w"


def test_a_vw_file_for_a_csv_model_is_read_as_vw(tmp_path):
    """A model of CSV logs given test.vw reads VW text (hashed as the model): it used to
    read it as CSV, its first line a header, and predict nothing without a word."""
    from onlinepgs.formats import iter_vw

    rows = log_rows(300, seed=8)
    (tmp_path / "log.csv").write_bytes(as_csv(rows))
    run("train", tmp_path / "log.csv", *CSV_ROLES, "-q", "ua", "-o", tmp_path / "m.pgs",
        "--quiet")
    (tmp_path / "t.vw").write_text("".join(
        f"|user {r['user']} |ad {r['ad']} |price price:{r['price']}\n" for r in rows[:40]))
    got = run("predict", tmp_path / "m.pgs", tmp_path / "t.vw", "--kind", "scores").stdout
    from onlinepgs.features import expanded_input

    (X, _, _), = iter_vw(str(tmp_path / "t.vw"), interactions=["ua"], chunk_rows=None)
    with expanded_input():
        want = load_learner(str(tmp_path / "m.pgs")).decision_function(X)
    assert len(got.split()) == 40
    np.testing.assert_allclose([float(v) for v in got.split()], want, rtol=1e-6)
    # the same rows as CSV score the same (namespaces named like the columns)
    csv_scores = run("predict", tmp_path / "m.pgs", tmp_path / "log.csv",
                     "--kind", "scores").stdout.split()[:40]
    np.testing.assert_allclose([float(v) for v in csv_scores],
                               [float(v) for v in got.split()], rtol=1e-9)


@pytest.mark.parametrize("name, good, bad", [
    ("d.svm", [b"1 1:0.5 3:1", b"-1 2:1", b"1 1:1 2:0.25", b"-1 3:0.5"],
     [b"1 2:oops", b"x 1:1"]),
    ("d.vw", [b"1 |f a b:0.5", b"-1 |f c", b"1 |g a", b"-1 |f b |g c:2"],
     [b"1 |f a:1x", b"one |f a"]),
    ("d.csv", [b"1,x,0.5", b"0,y,1", b"1,x,2", b"0,z,0.25"], [b"1,x,far", b"1,x"]),
    ("d.jsonl", [b'{"label": 1, "features": {"a": "x"}}', b'{"label": -1, "features": {"b": 2}}',
                 b'{"label": 1, "features": {"a": "y"}}', b'{"label": -1}'],
     [b'{"label": 1, "features": {"a": [1]}}', b'{"label": 1,']),
])
def test_skip_bad_lines_of_every_format(tmp_path, name, good, bad):
    """--skip-bad-lines (train, predict, eval, gap): the bad lines are skipped and
    counted, the first named with its place and reason (also with --quiet); the model is
    the one trained on the file without them, bit for bit; predict writes a line for
    each good row. Without the option the first bad line stops the command."""
    header = [b"y,a,p"] if name.endswith(".csv") else []
    roles = ("--label", "y", "--numeric", "p") if name.endswith(".csv") else ()
    lines = header + [good[0], bad[0], good[1], good[2], bad[1], good[3]]
    data, clean = tmp_path / name, tmp_path / ("clean" + name[1:])
    data.write_bytes(b"\n".join(lines) + b"\n")
    clean.write_bytes(b"\n".join(header + good) + b"\n")
    options = ("--quiet", "--sigma", "0.1", "--classes", "-1,1" if "csv" not in name
               else "0,1", *roles)
    stopped = run("train", data, "-o", tmp_path / "x.pgs", *options, check=False)
    first_bad = len(header) + 2
    assert stopped.returncode == 1 and f"{data}:{first_bad}:" in stopped.stderr
    assert not (tmp_path / "x.pgs").exists()
    skipped = run("train", data, "-o", tmp_path / "m.pgs", "--skip-bad-lines", *options)
    run("train", clean, "-o", tmp_path / "c.pgs", *options)
    message = skipped.stderr.strip().splitlines()
    assert len(message) == 1, skipped.stderr
    assert message[0].startswith(f"onlinepgs: {data}: skipped 2 bad lines; the first: "
                                 f"{data}:{first_bad}:"), message
    assert stopped.stderr.strip().endswith(message[0].split("; the first: ")[1].split(
        f"{data}:{first_bad}:")[1])  # the same reason as the error
    a, b = load_learner(str(tmp_path / "m.pgs")), load_learner(str(tmp_path / "c.pgs"))
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert a.online_stats_["n_examples"] == 4
    for command in ("predict", "eval", "gap"):
        got = run(command, tmp_path / "m.pgs", data, "--skip-bad-lines")
        want = run(command, tmp_path / "m.pgs", clean)
        assert got.stdout == want.stdout
        assert got.stderr.strip() == message[0]
        assert run(command, tmp_path / "m.pgs", data, check=False).returncode == 1


def test_skip_bad_lines_is_refused_on_dask(tmp_path):
    (tmp_path / "d.svm").write_bytes(b"1 1:1\n")
    proc = run("train", tmp_path / "d.svm", "--skip-bad-lines", "--scheduler", "threads",
               check=False)
    assert proc.returncode == 2 and "argument --skip-bad-lines" in proc.stderr


def test_a_headerless_csv_trains_with_no_header(tmp_path):
    """--no-header: the first line is a row and the columns are named 1, 2, ...: the
    model equals the one of the same rows under a header line naming them so; predict
    and eval read the model's files alike. Without it the first row taken as a header is
    refused with advice when its names look like data."""
    rows = [b"1,x,0.5", b"0,y,1.5", b"1,x,2", b"0,z,0.25", b"1,y,3"]
    (tmp_path / "bare.csv").write_bytes(b"\n".join(rows) + b"\n")
    (tmp_path / "named.csv").write_bytes(b"\n".join([b"1,2,3"] + rows) + b"\n")
    roles = ("--label", "1", "--numeric", "3", "--quiet", "--sigma", "0.1")
    run("train", tmp_path / "bare.csv", "--no-header", *roles, "-o", tmp_path / "b.pgs")
    run("train", tmp_path / "named.csv", *roles, "-o", tmp_path / "n.pgs")
    b, n = load_learner(str(tmp_path / "b.pgs")), load_learner(str(tmp_path / "n.pgs"))
    np.testing.assert_array_equal(b.coef_, n.coef_)
    assert b.online_stats_["n_examples"] == 5
    assert run("predict", tmp_path / "b.pgs", tmp_path / "bare.csv").stdout == \
        run("predict", tmp_path / "n.pgs", tmp_path / "named.csv").stdout
    assert "rows = 5" in run("eval", tmp_path / "b.pgs", tmp_path / "bare.csv").stdout
    refused = run("train", tmp_path / "bare.csv", *roles, check=False)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert "the first line looks like data" in refused.stderr
    assert "--no-header" in refused.stderr


def test_predict_refuses_a_file_whose_columns_are_not_the_models(tmp_path):
    """A CSV-trained model read any file as CSV: an svmlight file's first line became a
    header and its rows were scored silently. The model file keeps the columns it was
    trained on (extra.input.header); predict, eval and gap refuse a file with another
    column or without one of them (the label, weight and ignored columns may be absent
    from a file to predict), naming the first mismatch; order does not matter."""
    from onlinepgs.model_io import read_header

    (tmp_path / "t.csv").write_bytes(b"y,a,b,id\n1,x,u,1\n0,z,v,2\n1,x,v,3\n")
    run("train", tmp_path / "t.csv", "--label", "y", "--ignore", "id", "--sigma", "0.1",
        "-o", tmp_path / "m.pgs", "--quiet")
    assert read_header(str(tmp_path / "m.pgs"))["extra"]["input"]["header"] == \
        ["y", "a", "b", "id"]
    (tmp_path / "reordered.csv").write_bytes(b"b,a\nu,x\nv,z\n")
    got = run("predict", tmp_path / "m.pgs", tmp_path / "reordered.csv").stdout.split()
    assert got == run("predict", tmp_path / "m.pgs", tmp_path / "t.csv").stdout.split()[:2]
    cases = [("s.svm", b"1 1:1 3:1\n0 2:1\n", "column '1 1:1 3:1' is not one the model "
                                               "was trained on"),
             ("extra.csv", b"y,a,b,c\n1,x,u,k\n", "column 'c' is not one the model was "
                                                  "trained on"),
             ("short.csv", b"y,a\n1,x\n", "the model's column 'b' is missing")]
    for name, content, message in cases:
        (tmp_path / name).write_bytes(content)
        for command in ("predict", "eval", "gap"):
            proc = run(command, tmp_path / "m.pgs", tmp_path / name, check=False)
            assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
            line, = proc.stderr.strip().splitlines()
            assert f"{tmp_path / name}:1: {message}" in line, line
    # training on with -i may bring columns (new namespaces): not refused, recorded
    (tmp_path / "more.csv").write_bytes(b"y,a,b,id,c\n1,x,u,4,k\n")
    run("train", tmp_path / "more.csv", "-i", tmp_path / "m.pgs", "-o", tmp_path / "m2.pgs",
        "--quiet")
    assert read_header(str(tmp_path / "m2.pgs"))["extra"]["input"]["header"] == \
        ["y", "a", "b", "id", "c"]
