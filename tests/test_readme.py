"""Every code block of README.md runs as written.

The ```python and ```bash blocks are extracted and run, each in a fresh temporary
directory: python blocks by this interpreter, bash blocks by ``bash -e`` with this
interpreter's bin directory first on PATH (where ``pip install`` puts the ``onlinepgs``
command). The README's two setup commands are special: the first creates a virtual
environment and installs into it, which a test must not redo, so only its last part, the
main job (``python examples/quickstart.py``), runs here; the second runs this very test
suite and is not re-entered. Both must stay exactly what .ci/run runs.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = [(lang, code) for lang, code in
          re.findall(r"^```([A-Za-z]*)\n(.*?)^```", README, flags=re.S | re.M)]
RUNNABLE = [(i, lang, code) for i, (lang, code) in enumerate(BLOCKS)
            if lang in ("python", "bash")]
# The two commands a newcomer types first (see the module docstring).
SETUP = 'python3 -m venv .venv && . .venv/bin/activate && pip install -q -e ".[test]" && python examples/quickstart.py'
TESTS = '. .venv/bin/activate && python -m pytest -q -m "not slow"'
SLOW = ". .venv/bin/activate && python -m pytest -q -m slow"  # CI runs them as well
MAIN_JOB = "python examples/quickstart.py"


def _env():
    """This interpreter's environment with its bin directory (the venv's) first on PATH."""
    env = dict(os.environ)
    if env.get("PYTHONPATH"):
        # the blocks run in other directories: a relative entry ("." for a checkout
        # under test) must keep naming the same place
        env["PYTHONPATH"] = os.pathsep.join(
            os.path.abspath(entry) for entry in env["PYTHONPATH"].split(os.pathsep) if entry)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.setdefault("MPLBACKEND", "Agg")
    return env


def _run(cmd, cwd):
    proc = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, (
        f"exit code {proc.returncode}\n--- stdout ---\n{proc.stdout[-3000:]}"
        f"\n--- stderr ---\n{proc.stderr[-3000:]}")
    return proc.stdout


def test_readme_starts_with_the_two_commands_ci_runs():
    """The first two blocks are the setup and test commands, and .ci/run runs exactly them."""
    first = [code.strip() for lang, code in BLOCKS[:2]]
    assert first == [SETUP, TESTS]
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert SETUP in ci and TESTS in ci and SLOW in ci
    assert SETUP.endswith("&& " + MAIN_JOB)


def test_every_block_is_runnable_or_text():
    """No block in a language the runner would silently skip; placeholders go in ```text."""
    assert {lang for lang, _ in BLOCKS} <= {"python", "bash", "text"}
    assert len(RUNNABLE) >= 4


def test_code_reaches_only_this_machine():
    """No address but this machine's in a block that runs."""
    for _, _, code in RUNNABLE:
        for address in re.findall(r"(?:tcp|tls|ws|wss|https?)://([^\s/:\"']+)", code):
            assert address in ("127.0.0.1", "localhost"), address
        for ip in re.findall(r"\b\d{1,3}(?:\.\d{1,3}){3}\b", code):
            assert ip == "127.0.0.1", ip


@pytest.mark.slow
@pytest.mark.parametrize("index,lang,code", RUNNABLE,
                         ids=[f"block{i}-{lang}" for i, lang, _ in RUNNABLE])
def test_block_runs(index, lang, code, tmp_path):
    """Each block runs to completion (exit code 0) in a fresh directory."""
    if code.strip() == TESTS:
        pytest.skip("the README's test command is this test suite")
    if code.strip() == SETUP:
        # the venv and the install are what this suite runs in; run the main job
        out = _run(["bash", "-e", "-c", MAIN_JOB], cwd=ROOT)
        assert re.search(r"accuracy = 0\.8[4-6]\d*", out), out
        return
    if lang == "python":
        _run([sys.executable, "-c", code], cwd=tmp_path)
    else:
        _run(["bash", "-e", "-c", code], cwd=tmp_path)
