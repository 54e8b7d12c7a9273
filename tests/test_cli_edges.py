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
