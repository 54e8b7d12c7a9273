"""Issue 35, item 6: the command's rough edges a newcomer hit (--version, defaults in
--help, a missing model file, compressed predictions, ...)."""
import argparse
import os
import re
import subprocess
import sys

import pytest

from onlinepgs.cli import main
from onlinepgs.cli.parser import build_parser

EXE = [sys.executable, "-m", "onlinepgs.cli"]


def _in(directory):
    """subprocess.run's arguments to run in `directory` with this onlinepgs (a relative
    PYTHONPATH would find another one there)."""
    import os

    import onlinepgs

    root = os.path.dirname(os.path.dirname(os.path.abspath(onlinepgs.__file__)))
    paths = [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
             if p]
    return {"cwd": directory, "env": dict(os.environ,
                                          PYTHONPATH=os.pathsep.join([root] + paths))}


def test_version_prints_the_packages_version_from_pyproject():
    """The yardstick is pyproject.toml's version, read as text."""
    import pathlib

    pyproject = pathlib.Path(__file__).resolve().parent.parent / "pyproject.toml"
    version = re.search(r'^version = "([^"]+)"', pyproject.read_text(), re.M).group(1)
    done = subprocess.run(EXE + ["--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"onlinepgs {version}\n"
    # and without numpy: the version is the package's string, not found by importing
    probe = ("import sys\nfrom onlinepgs.cli import main\ntry:\n    main(['--version'])\n"
             "except SystemExit as exc:\n    assert exc.code == 0\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('numpy', 'scipy', 'sklearn')))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == "[]", done


# option -> the default its --help must show (from the options' documented values)
DEFAULTS = {
    "train": {"--loss": "logistic", "--p": "2.0", "--sigma": "auto", "--batch-size": "1",
              "--iterate": "auto", "--intercept-scaling": "1.0", "--epsilon": "0.1",
              "--hash-seed": "0", "--random-seed": "0", "--passes": "1",
              "--chunk-rows": "2000", "--zero-based": "auto", "--max-model-bytes": "1G",
              "--slice-rows": "65536", "--connect-timeout": "10", "--solver": "pgs",
              "--radius": "auto"},
    "predict": {"--kind": "labels", "--chunk-rows": "10000", "--zero-based": "auto",
                "--output": "stdout"},
    "eval": {"--chunk-rows": "10000", "--zero-based": "auto"},
    "gap": {"--chunk-rows": "10000", "--zero-based": "auto"},
}


def _option_help(text, option):
    """The help text of `option` in `--help` output, joined onto one line."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines)
                 if re.match(rf"\s+(-\w [^,]*, )?{re.escape(option)}\b", line))
    block = [lines[start]]
    for line in lines[start + 1:]:
        if not line.startswith(" " * 20) or not line.strip():
            break
        block.append(line)
    return " ".join(" ".join(block).split())


@pytest.mark.parametrize("command", sorted(DEFAULTS))
def test_help_shows_every_options_default(command):
    done = subprocess.run(EXE + [command, "--help"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    for option, default in DEFAULTS[command].items():
        text = _option_help(done.stdout, option)
        assert re.search(rf"\(?default:? {re.escape(default)}\b|{re.escape(default)} "
                         r"\(default\)", text), (option, text)
        if option == "--sigma":  # the default depends on --solver: both are shown
            assert "(default: auto (PGS), 1e-4 (--solver sdca))" in text, text
    # and no option with a default (other than a flag's False) is left out
    parser = build_parser()
    sub = parser._subparsers._group_actions[0].choices[command]
    for action in sub._actions:
        if action.option_strings and not any(action.default is v for v in
                                             (None, False, argparse.SUPPRESS)):
            assert "default" in action.help, action.option_strings


@pytest.fixture
def model(tmp_path):
    """A small binary model trained by the command on generated data, and its data."""
    from tests.test_cli import write_svmlight

    data, path = tmp_path / "train.svm", tmp_path / "m.pgs"
    write_svmlight(data, n=400, n_features=20)
    assert main(["train", str(data), "-o", str(path), "--quiet"]) == 0
    return path, data


MODEL_COMMANDS = [["predict", "{m}", "{d}"], ["eval", "{m}", "{d}"], ["gap", "{m}", "{d}"],
                  ["info", "{m}"], ["train", "{d}", "-i", "{m}", "-o", "{out}", "--quiet"]]


@pytest.mark.parametrize("argv", MODEL_COMMANDS, ids=lambda a: a[0])
@pytest.mark.parametrize("kind, reason", [("missing", "no such model file"),
                                          ("directory", "is a directory, not a model file")])
def test_a_missing_model_file_is_one_line_naming_it(model, tmp_path, argv, kind, reason):
    bad = tmp_path / "nope.pgs"
    if kind == "directory":
        bad.mkdir()
    out = tmp_path / "out.pgs"
    args = [a.format(m=bad, d=model[1], out=out) for a in argv]
    done = subprocess.run(EXE + args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr == f"onlinepgs: error: {bad}: {reason}\n"
    assert not out.exists()


@pytest.mark.parametrize("argv", MODEL_COMMANDS, ids=lambda a: a[0])
def test_an_unreadable_model_file_says_permission_denied(model, tmp_path, capsys,
                                                         monkeypatch, argv):
    """Run as root a chmod 000 file stays readable, so the refusal is simulated where
    the file is opened."""
    import builtins

    locked = tmp_path / "locked.pgs"
    locked.write_bytes(model[0].read_bytes())
    real_open = builtins.open

    def refusing_open(file, *a, **k):
        if str(file) == str(locked):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *a, **k)

    monkeypatch.setattr(builtins, "open", refusing_open)
    args = [a.format(m=locked, d=model[1], out=tmp_path / "out.pgs") for a in argv]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err == f"onlinepgs: error: {locked}: cannot read the model file: permission denied\n"


@pytest.mark.parametrize("suffix, module", [(".gz", "gzip"), (".bz2", "bz2"), (".xz", "lzma")])
def test_predict_writes_the_compression_its_output_name_says(model, tmp_path, suffix, module):
    """Read back with the standard library, the file holds exactly the plain output."""
    import importlib

    plain, packed = tmp_path / "pred.txt", tmp_path / f"pred.txt{suffix}"
    packed.write_bytes(b"an older file, replaced whole\n")
    for out in (plain, packed):
        assert main(["predict", str(model[0]), str(model[1]), "-o", str(out),
                     "--kind", "scores"]) == 0
    with importlib.import_module(module).open(packed, "rt") as f:
        text = f.read()
    assert text == plain.read_text() and text.count("\n") == 400
    if suffix == ".gz":  # the header names the output, not the temporary file
        import gzip

        raw = packed.read_bytes()
        assert raw[10:raw.index(b"\0", 10)] == b"pred.txt"
        assert gzip.decompress(raw).decode() == text
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_probabilities_name_their_columns_in_a_comment_line(tmp_path, capsys):
    """Three string-free classes given out of order: the header names the columns, and
    each column is that class's probability (yardstick: load_model's predict_proba, and
    the label printed by --kind labels is the header's name of the row's largest)."""
    import numpy as np

    from onlinepgs import load_model, load_svmlight

    rng = np.random.RandomState(0)
    X = rng.rand(300, 6)
    y = np.array([7, 2, 5])[np.argmax(X[:, :3], axis=1)]
    data, model = tmp_path / "three.svm", tmp_path / "m.pgs"
    data.write_text("".join(f"{label} " + " ".join(f"{j + 1}:{v:.5f}" for j, v in
                                                   enumerate(row)) + "\n"
                            for label, row in zip(y, X)))
    assert main(["train", str(data), "-o", str(model), "--quiet", "--classes", "7,2,5",
                 "--sigma", "1e-3"]) == 0
    capsys.readouterr()
    assert main(["predict", str(model), str(data), "--kind", "probabilities"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "# classes: 2 5 7"
    columns = [float(c) for c in lines[0].split(":")[1].split()]
    proba = np.loadtxt(lines)  # the '#' line skipped by NumPy's default
    Xs, _ = load_svmlight(data)
    np.testing.assert_allclose(proba, load_model(model).predict_proba(Xs), rtol=1e-8)
    assert main(["predict", str(model), str(data)]) == 0
    labels = np.loadtxt(capsys.readouterr().out.splitlines())
    np.testing.assert_array_equal(labels, np.array(columns)[np.argmax(proba, axis=1)])
    assert 0.5 < np.mean(labels == y)


@pytest.mark.parametrize("solver", ["pgs", "sdca"])
def test_train_without_output_trains_and_summarises_but_saves_nothing(model, tmp_path,
                                                                      solver):
    """The yardstick: the same run with -o, whose saved model's statistics the summary
    without -o must repeat."""
    import os

    from onlinepgs import load_model

    data = model[1]
    saved = tmp_path / f"saved-{solver}.pgs"
    assert main(["train", str(data), "-o", str(saved), "--quiet", "--solver", solver]) == 0
    before = sorted(os.listdir(tmp_path))
    done = subprocess.run(EXE + ["train", str(data), "--solver", solver], **_in(tmp_path),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert sorted(os.listdir(tmp_path)) == before  # nothing written, not even a temp file
    err = done.stderr.splitlines()
    assert err[0] == ("onlinepgs: note: no -o MODEL: the model is trained and summarised "
                      "but not saved")
    assert err[-1] == "model = not saved (no -o)"
    assert "number of examples = 400" in err
    if solver == "pgs":
        loss = load_model(saved).online_stats_["progressive_loss"]
        assert f"average loss = {loss:.6f}" in err
    else:
        primal = float(load_model(saved).primal_objective_)
        assert f"primal objective = {primal:.9g}" in err


def test_checkpoints_without_output_are_a_usage_error(model, tmp_path):
    done = subprocess.run(EXE + ["train", str(model[1]), "--checkpoint-every", "100"],
                          **_in(tmp_path), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr == ("onlinepgs train: error: argument --checkpoint-every: needs -o "
                           "MODEL (the file the checkpoints are written to)\n")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize("argv", [["train", "DATA", "-o", "/dev/full", "--quiet"],
                                  ["predict", "MODEL", "DATA", "-o", "/dev/full"]])
def test_a_device_that_fills_is_named(model, capsys, argv):
    """An output written in place (a device, a FIFO) that fails names its path."""
    path, data = model
    argv = [str(data) if a == "DATA" else str(path) if a == "MODEL" else a for a in argv]
    capsys.readouterr()
    assert main(argv) == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        "onlinepgs: error: cannot write /dev/full: No space left on device")


def test_eval_of_one_class_says_why_it_has_no_auc(model, tmp_path, capsys):
    """A binary model's eval on rows of one class prints no AUC (none is defined) and
    says so on stderr."""
    path, data = model
    ones = [line for line in data.read_text().splitlines() if line.split()[0] in ("1", "+1")]
    (tmp_path / "ones.svm").write_text("\n".join(ones[:30]) + "\n")
    capsys.readouterr()
    assert main(["eval", str(path), str(tmp_path / "ones.svm")]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("rows = 30\naccuracy = ") and "auc" not in out
    assert err == (f"onlinepgs: note: no auc: {tmp_path / 'ones.svm'} holds rows of class 1 "
                   "only (the AUC ranks each class's rows against the other's)\n")


def test_train_i_refuses_a_base_the_model_was_not_trained_on(model, tmp_path):
    """`train -i` with --zero-based against the model's record is refused before any row
    is read: its rows would be read shifted, and the saved record would then shift every
    later `predict` of the model's first files. The model's own base trains on."""
    path, data = model  # one-based svmlight (its first chunk decided it)
    bad = subprocess.run(EXE + ["train", str(data), "-i", str(path), "--zero-based", "0",
                                "-o", str(tmp_path / "x.pgs")],
                         **_in(tmp_path), capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and not (tmp_path / "x.pgs").exists()
    assert bad.stderr == (f"onlinepgs train: error: argument --zero-based: 0 contradicts "
                          f"{path}, trained on one-based svmlight indices (--zero-based 1); "
                          "give that, with the new files written in its base\n")
    good = subprocess.run(EXE + ["train", str(data), "-i", str(path), "--zero-based", "1",
                                 "-o", str(tmp_path / "x.pgs"), "--quiet"],
                          **_in(tmp_path), capture_output=True, text=True, timeout=120)
    assert good.returncode == 0, good.stderr


@pytest.mark.parametrize("text, expected", [
    ("1..20", list(range(1, 21))), ("0,2..5", [0, 2, 3, 4, 5]),
    ("-3..-1,7", [-3, -2, -1, 7]), ("5,1..3,2", [1, 2, 3, 5]), ("-1,1", [-1, 1])])
def test_classes_take_ranges_mixed_with_lists(text, expected):
    from onlinepgs.cli.common import parse_classes

    assert parse_classes(text).tolist() == expected


@pytest.mark.parametrize("text, why", [
    ("1..x", "range '1..x' needs integer ends"), ("3..1", "range '3..1' is empty"),
    ("1..1000000", "gives 1000000 labels, more than 100000"),
    ("1.5..3", "needs integer ends"), ("a", "'a' is not a number or a range")])
def test_bad_class_ranges_are_one_line_usage_errors(model, tmp_path, capsys, text, why):
    assert main(["train", str(model[1]), f"--classes={text}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("onlinepgs train: error: argument "
                                                   "--classes: ") and why in err, err


def test_a_range_of_classes_trains_labels_the_first_chunk_lacks(tmp_path, capsys):
    """news20's failure: class 3 first appears after the first chunk. With --classes
    1..3 the run trains as partial_fit with classes=[1, 2, 3] does (the yardstick), and
    says at the start which classes it uses."""
    import numpy as np

    from onlinepgs import PGSClassifier, load_model, load_svmlight

    rng = np.random.RandomState(1)
    X = rng.rand(600, 5)
    y = np.where(np.arange(600) < 300, 1 + (X[:, 0] > 0.5), 3)  # 3 only after row 300
    data, model = tmp_path / "late.svm", tmp_path / "m.pgs"
    data.write_text("".join(f"{label} " + " ".join(f"{j + 1}:{v:.5f}" for j, v in
                                                   enumerate(row)) + "\n"
                            for label, row in zip(y, X)))
    assert main(["train", str(data), "-o", str(model), "--chunk-rows", "200"]) == 1
    assert "late.svm:301: label 3 is not one of the classes [1, 2]" in \
        capsys.readouterr().err
    assert main(["train", str(data), "-o", str(model), "--chunk-rows", "200",
                 "--classes", "1..3"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "onlinepgs: classes 1, 2, 3 (given by --classes)"
    Xs, ys = load_svmlight(data)
    reference = PGSClassifier(random_state=0)
    for start in range(0, 600, 200):
        reference.partial_fit(Xs[start:start + 200], ys[start:start + 200], classes=[1, 2, 3])
    trained = load_model(model)
    np.testing.assert_array_equal(trained.classes_, [1, 2, 3])
    np.testing.assert_array_equal(trained.coef_, reference.coef_)


def test_train_says_where_its_classes_came_from(model, tmp_path, capsys):
    path, data = model
    assert main(["train", str(data), "-o", str(tmp_path / "a.pgs")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (f"onlinepgs: classes -1, 1 (the labels of the first chunk of {data}; "
                      "--classes gives them all)")
    assert main(["train", str(data), "-i", str(path), "-o", str(tmp_path / "b.pgs")]) == 0
    assert capsys.readouterr().err.splitlines()[0] == \
        f"onlinepgs: classes -1, 1 (those of the model {path})"
    assert main(["train", str(data), "-o", str(tmp_path / "c.pgs"), "--quiet"]) == 0
    assert "classes" not in capsys.readouterr().err  # --quiet: nothing on stderr
    many = tmp_path / "many.svm"
    many.write_text("".join(f"{k % 30} 1:{k % 7}\n" for k in range(300)))
    assert main(["train", str(many), "-o", str(tmp_path / "d.pgs"), "--sigma", "1e-2"]) == 0
    assert capsys.readouterr().err.splitlines()[0] == (
        f"onlinepgs: classes 0, 1, 2, 3, 4, ..., 28, 29 (30 classes, the labels of the first "
        f"chunk of {many}; --classes gives them all)")


def test_info_summarises_the_online_statistics_and_json_keeps_them_all(tmp_path, capsys):
    """Five classes: one line of the run's statistics and the regret bound once (the sum
    of the model's five, as numpy adds them), where info printed the list of five;
    --json still has every per-problem value."""
    import json

    import numpy as np

    from onlinepgs import load_model

    data, model = tmp_path / "five.svm", tmp_path / "m.pgs"
    data.write_text("".join(f"{k % 5} 1:{k % 7} 2:{k % 3}\n" for k in range(500)))
    assert main(["train", str(data), "-o", str(model), "--quiet"]) == 0
    assert main(["info", str(model)]) == 0
    out = capsys.readouterr().out.splitlines()
    stats = load_model(model).online_stats_
    online = next(line for line in out if line.startswith("online: "))
    fields = dict(item.split("=") for item in online[len("online: "):].split(", "))
    assert int(fields["n_examples"]) == stats["n_examples"] == 500
    assert float(fields["progressive_loss"]) == pytest.approx(stats["progressive_loss"],
                                                              rel=1e-5)
    assert float(fields["progressive_error_rate"]) == pytest.approx(
        stats["progressive_error_rate"], rel=1e-5)
    bound = next(line for line in out if line.startswith("regret_bound: "))
    assert float(bound.split()[1]) == pytest.approx(np.sum(stats["regret_bound"]), rel=1e-5)
    assert float(bound.split()[3].rstrip("),")) == pytest.approx(
        np.sum(stats["optimization_error_bound"]), rel=1e-5)
    assert bound.endswith("summed over 5 one-vs-rest problems")
    assert not any("[" in line for line in out)  # no raw per-problem lists
    assert main(["info", str(model), "--json"]) == 0
    header = json.loads(capsys.readouterr().out)
    np.testing.assert_allclose(header["online_stats"]["regret_bound"], stats["regret_bound"])
    assert len(header["online_stats"]["dual_objective"]) == 5


def test_notes_wait_for_the_table_so_an_early_error_is_the_only_line(tmp_path, capsys):
    """Without -o and with --classes, a label outside them on line 1: one line."""
    bad = tmp_path / "bad.svm"
    bad.write_text("7 1:1\n1 1:2\n")
    assert main(["train", str(bad), "--classes", "1..3"]) == 1
    err = capsys.readouterr().err
    assert err == (f"onlinepgs: error: {bad}:1: label 7 is not one of the classes [1, 2, 3]"
                   " (set by --classes, the model, or the first chunk's labels; pass "
                   "--classes to give them all)\n")


def test_resource_and_overflow_errors_say_where_how_much_and_what_to_do(tmp_path):
    """A crossed value that overflows (1e200 * 1e200 by -q) named no line ("Input X
    contains infinity"); a .bz2 with damaged magic bytes was read as plain text; -b 28
    without the memory ended in a bare "out of memory" and -b 30 advised --bits, which
    was given. Each is one line: the line and column, the file's kind, the memory the
    state needs and the options that shrink it."""
    import bz2
    import resource

    def run(*argv, limit=None):
        def cap():
            resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
        done = subprocess.run(EXE + [str(a) for a in argv], capture_output=True, text=True,
                              timeout=120, preexec_fn=cap if limit else None)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        line, = done.stderr.strip().splitlines()
        return line

    (tmp_path / "ov.vw").write_text("-1 |a z:1 |b w:1\n1 |a x:1e200 |b y:1e200\n")
    line = run("train", tmp_path / "ov.vw", "-q", "ab", "--quiet")
    assert f"{tmp_path / 'ov.vw'}:2: Input X contains infinity" in line
    assert "an interaction of -q" in line
    damaged = bytearray(bz2.compress(b"y,a\n1,x\n0,z\n"))
    damaged[0] = ord("X")
    (tmp_path / "d.csv.bz2").write_bytes(bytes(damaged))
    line = run("train", tmp_path / "d.csv.bz2", "--label", "y", "--quiet")
    assert f"{tmp_path / 'd.csv.bz2'}:1: not a bz2 file, as its name says" in line
    (tmp_path / "t.svm").write_text("1 1:1\n-1 2:1\n")
    # -b 28 and -b 30 needed 18 GiB of state over the width; the states are now over the
    # columns the rows reach (onlinepgs._columns_seen): trained, saved and continued
    # within 2 GB, the model over the width
    for bits, sigma in (("28", []), ("30", ["--sigma", "1e-3"])):
        model = tmp_path / f"b{bits}.pgs"
        for more in ([], ["-i", model]):
            done = subprocess.run(
                EXE + ["train", str(tmp_path / "t.svm"), "-b", bits, "--quiet", *sigma,
                       "-o", str(model), *map(str, more)], capture_output=True, text=True,
                timeout=120, preexec_fn=lambda: resource.setrlimit(
                    resource.RLIMIT_DATA, (2 * 2**30, 2 * 2**30)))
            assert done.returncode == 0, done.stderr
        assert main(["info", str(model)]) == 0
