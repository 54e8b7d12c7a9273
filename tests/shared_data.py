"""Where the tests find the shared data sets: where the examples do (`_paper.DEFAULT_DATA`:
$ONLINEPGS_DATA, else ``shared/data`` beside the checkout or one level up)."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from _paper import DEFAULT_DATA  # noqa: E402


def shared(name):
    """The path of a shared data set, or skip the test where it is absent."""
    path = DEFAULT_DATA / name
    if not path.exists():
        pytest.skip(f"shared data {path} is absent (set ONLINEPGS_DATA)")
    return path
