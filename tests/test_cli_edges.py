"""Issue 35, item 6: the command's rough edges a newcomer hit (--version, defaults in
--help, a missing model file, compressed predictions, ...)."""
import argparse
import re
import subprocess
import sys

import pytest

from onlinepgs.cli import main
from onlinepgs.cli.parser import build_parser

EXE = [sys.executable, "-m", "onlinepgs.cli"]


def test_version_prints_the_packages_version_from_pyproject():
    """The yardstick is pyproject.toml's version, read as text."""
    import pathlib

    pyproject = pathlib.Path(__file__).resolve().parent.parent / "pyproject.toml"
    version = re.search(r'^version = "([^"]+)"', pyproject.read_text(), re.M).group(1)
    done = subprocess.run(EXE + ["--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"onlinepgs {version}\n"


# option -> the default its --help must show (from the options' documented values)
DEFAULTS = {
    "train": {"--loss": "logistic", "--p": "2.0", "--sigma": "0.0001", "--batch-size": "1",
              "--iterate": "weighted2", "--intercept-scaling": "1.0", "--epsilon": "0.1",
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
