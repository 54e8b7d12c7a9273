"""The command line as a package: parsing imports only what parsing needs (issue 33's
follow-up; issue 35 wants `onlinepgs --help` cold in <= 0.15 s), and the lazy names of
`onlinepgs.streaming` that make it possible."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

# A child process runs main(argv) and reports, as JSON on stdout, the exit code and the
# modules it imported (the command's own output goes to stderr, out of the way).
_WRAPPER = """
import contextlib, json, os, sys
from onlinepgs.cli import main
with contextlib.redirect_stdout(sys.stderr):
    try:
        code = main(json.loads(sys.argv[1]))
    except SystemExit as exc:
        code = exc.code
print(json.dumps({"code": code, "modules": sorted(sys.modules),
                  "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS")}))
"""

# what parsing must not import: the libraries, and the parts of onlinepgs that import them
HEAVY = ("numpy", "scipy", "sklearn", "onlinepgs._core", "onlinepgs.streaming",
         "onlinepgs.model_io", "onlinepgs.svmlight")


def _run(argv):
    done = subprocess.run([sys.executable, "-c", _WRAPPER, json.dumps(argv)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


@pytest.mark.parametrize("argv, code", [
    (["--help"], 0),
    (["train", "--help"], 0),
    (["predict", "--help"], 0),
    ([], 2),                                             # no command
    (["train", "x.svm", "-o", "m.pgs", "--p", "two"], 2),  # a bad option value
    (["frobnicate"], 2),                                 # an unknown command
])
def test_parsing_imports_no_numpy_scipy_or_sklearn(argv, code):
    report, err = _run(argv)
    assert report["code"] == code, err
    heavy = [m for m in report["modules"] if any(m == h or m.startswith(h + ".")
                                                 for h in HEAVY)]
    assert heavy == [], heavy
    if code == 0:
        assert err.startswith("usage: onlinepgs"), err
    else:
        assert "onlinepgs" in err and "error:" in err and "Traceback" not in err, err


def test_a_command_imports_its_own_module_only():
    """`info` of a missing file: parsing, then the info/gap module, not train's."""
    report, err = _run(["info", "/nonexistent/model.pgs"])
    assert report["code"] == 1 and err.count("\n") == 1, err
    modules = set(report["modules"])
    assert "onlinepgs.cli.inspect" in modules
    assert not modules & {"onlinepgs.cli.train", "onlinepgs.cli.train_sdca",
                          "onlinepgs.cli.train_dask", "onlinepgs.cli.predict",
                          "onlinepgs.cli.progress", "onlinepgs.streaming.engine"}
    assert not any(m.split(".")[0] == "sklearn" for m in modules)


def test_parser_names_are_the_cores():
    """The parser writes out the loss and iterate names (the core imports numpy): they
    must be exactly the compiled core's."""
    from onlinepgs._core import CLASSIFICATION_LOSSES, ITERATES, REGRESSION_LOSSES
    from onlinepgs.cli import parser

    assert parser.CLASSIFICATION_LOSSES == CLASSIFICATION_LOSSES
    assert parser.REGRESSION_LOSSES == REGRESSION_LOSSES
    assert sorted(parser.ITERATES) == sorted(ITERATES)
    train = parser.build_parser()._subparsers._group_actions[0].choices["train"]
    choices = {a.dest: a.choices for a in train._actions if a.choices}
    assert sorted(choices["loss"]) == sorted(CLASSIFICATION_LOSSES + REGRESSION_LOSSES)
    assert sorted(choices["iterate"]) == sorted([*ITERATES, "auto"])  # the core takes no "auto"


def test_streaming_names_are_lazy_and_the_same_objects():
    """Each public name of onlinepgs.streaming is its defining module's object, and the
    errors module comes without the engine (whose checks import scipy)."""
    code = """
import importlib, json, sys
import onlinepgs.streaming.errors
light = sorted(m for m in sys.modules if m.split(".")[0] in ("scipy", "sklearn")
               or m == "onlinepgs.streaming.engine")
import onlinepgs.streaming as s
same = all(getattr(s, n) is getattr(importlib.import_module(
    "onlinepgs.streaming." + s._HOMES[n]), n) for n in s.__all__)
print(json.dumps({"light": light, "same": same, "all": sorted(s.__all__),
                  "dir": set(s.__all__) <= set(dir(s))}))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["light"] == [] and report["same"] and report["dir"]
    assert "train_stream" in report["all"] and "whole_batches" in report["all"]
    import onlinepgs.streaming as s

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        s.nope


def _data(tmp_path):
    rng = np.random.default_rng(0)
    lines = []
    for i in range(300):
        cols = np.sort(rng.choice(50, 6, replace=False))
        values = rng.standard_normal(6)
        label = 1 if values[0] + values[1] > 0 else -1
        lines.append(" ".join([str(label)] + [f"{j + 1}:{v:.4f}" for j, v in zip(cols, values)]))
    path = tmp_path / "d.svm"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_the_commands_paths_import_neither_scipy_nor_sklearn(tmp_path):
    """train (with a holdout and mini-batches joined across chunks, hashed, classes
    given), predict, eval, gap:
    the chunks are the command's own CSR (issue 35: importing scipy.sparse took ~0.25 s
    of a 0.9 s run); what they print is checked against the library in test_cli.py."""
    data, model = _data(tmp_path), str(tmp_path / "m.pgs")
    for argv in (["train", data, "-o", model, "--quiet", "--holdout-every", "5",
                  "--batch-size", "2", "--chunk-rows", "64"],
                 ["train", data, "-o", str(tmp_path / "h.pgs"), "--quiet", "--bits", "4"],
                 ["train", data, "-o", str(tmp_path / "c.pgs"), "--quiet", "--classes=-1,1"],
                 ["predict", model, data, "-o", str(tmp_path / "p.txt")],
                 ["eval", model, data],
                 ["gap", model, data]):
        report, err = _run(argv)
        assert report["code"] == 0, (argv, err)
        heavy = [m for m in report["modules"] if m.split(".")[0] in ("scipy", "sklearn")]
        assert heavy == [], (argv[0], heavy)
        if argv[0] == "train":  # np.unique's import of numpy.ma: ~7 ms of a cold start
            assert "numpy.ma" not in report["modules"], argv
        # set before numpy's import (no OpenBLAS worker threads to start), unless given
        assert report["blas_threads"] == os.environ.get("OPENBLAS_NUM_THREADS", "1")


@pytest.mark.parametrize("argv", [["info", "{m}"], ["info", "{m}", "--json"]])
def test_info_imports_no_numpy(tmp_path, argv):
    """`info` reads the header and the classes of a file as save_model writes it with
    the standard library alone (numpy's import was most of a cold `info`)."""
    from onlinepgs.model_io import save_model
    from onlinepgs.pgs import PGSClassifierLearner

    model = tmp_path / "m.pgs"
    X = np.random.default_rng(0).standard_normal((40, 3))
    y = np.where(X[:, 0] > 0, 1, -1)
    save_model(PGSClassifierLearner(sigma=0.1, random_state=0).fit(X, y), model)
    report, err = _run([a.format(m=model) for a in argv])
    assert report["code"] == 0, err
    heavy = [m for m in report["modules"] if m.split(".")[0] in ("numpy", "scipy", "sklearn")
             or m.startswith("onlinepgs._core")]
    assert heavy == [], heavy
    assert ("classes: -1, 1" in err) if len(argv) == 2 else '"estimator"' in err


@pytest.mark.parametrize("labels", [[-1.0, 1.0], [0, 1, 2], ["cat", "dog", "emu"],
                                    np.array(["no", "yes"], dtype=object), None])
def test_the_plain_reader_reads_what_numpys_reads(tmp_path, labels):
    """container.read_plain's header and classes are read_header's and the loaded
    model's (floats, ints, str, object str; a regressor has none)."""
    from onlinepgs.model_io import container, load_learner, read_header, save_model
    from onlinepgs.model_io.jsonvalues import from_json
    from onlinepgs.pgs import PGSClassifierLearner, PGSRegressorLearner

    rng = np.random.default_rng(1)
    X = rng.standard_normal((60, 4))
    if labels is None:
        est = PGSRegressorLearner(sigma=0.1, random_state=0).fit(X, X[:, 0])
    else:
        y = np.asarray(labels)[np.arange(60) % len(labels)]
        est = PGSClassifierLearner(sigma=0.1, random_state=0).fit(X, y)
    path = tmp_path / "m.pgs"
    save_model(est, path)
    raw, kept = container.read_plain(path, keep=("attributes/classes_",))
    assert from_json(raw) == read_header(path)
    if labels is None:
        assert kept == {}
    else:
        values = container.plain_values(*kept["attributes/classes_"])
        assert values == load_learner(path).classes_.tolist() == sorted(list(labels))


def _rewritten(source, target, change):
    """A copy of a model file's zip with change(name, bytes) -> bytes on each entry."""
    import zipfile

    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w") as zout:
        for info in zin.infolist():
            zout.writestr(info, change(info.filename, zin.read(info)))
    return target


def test_info_leaves_a_damaged_or_unusual_file_to_numpys_reader(tmp_path, capsys):
    """An array changed after writing (zip intact, checksum not): read_plain declines,
    and info prints numpy's reader's one-line error; an entry in a form numpy reads
    but read_plain does not (a Fortran-order .npy): the same report as the plain file."""
    from onlinepgs.cli import main
    from onlinepgs.model_io import container, save_model
    from onlinepgs.pgs import PGSClassifierLearner

    X = np.random.default_rng(2).standard_normal((50, 3))
    model = tmp_path / "m.pgs"
    save_model(PGSClassifierLearner(sigma=0.1, random_state=0).fit(X, X[:, 1] > 0), model)
    assert main(["info", str(model)]) == 0
    plain_report = capsys.readouterr().out

    names = [e["name"] for e in container.read_plain(model)[0]["arrays"]]
    victim = "attributes/coef_" if "attributes/coef_" in names else names[-1]

    def flip_victim(name, data):
        return data[:-1] + bytes([data[-1] ^ 1]) if name == victim + ".npy" else data
    damaged = _rewritten(model, tmp_path / "damaged.pgs", flip_victim)
    assert container.read_plain(damaged) is None
    assert main(["info", str(damaged)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "checksum mismatch" in err, err

    def fortran(name, data):  # the same bytes, the .npy header saying fortran_order
        if name != "attributes/classes_.npy":
            return data
        return data.replace(b"'fortran_order': False", b"'fortran_order': True ")
    unusual = _rewritten(model, tmp_path / "unusual.pgs", fortran)
    assert container.read_plain(unusual) is None
    assert main(["info", str(unusual)]) == 0
    assert capsys.readouterr().out == plain_report.replace(str(model), str(unusual))
