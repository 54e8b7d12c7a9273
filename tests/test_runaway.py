"""Predictions that ran away while staying finite (onlinepgs/_runaway.py): one feature of
1e9 on 5% of 2,000 rows makes the global geometry's squared-loss predictions swing at
1e9 times the labels, with finite weights and a progressive loss near 1e18. The command
used to end that run with exit status 0 and write the model; the estimators returned it
without a word."""
import subprocess
import sys
import warnings

import numpy as np
import pytest

from onlinepgs import PGSClassifier, PGSDivergedError, PGSRegressor


def huge_feature(m=2000, seed=0):
    """Two ordinary columns and a third of 1e9 on 5% of the rows (0 elsewhere); the
    target is linear in the three (the third's effect 3 where it is on)."""
    rng = np.random.RandomState(seed)
    X = rng.randn(m, 3)
    big = rng.rand(m) < 0.05
    X[:, 2] = np.where(big, 1e9, 0.0)
    return X, X[:, 0] + 2 * X[:, 1] + 3 * big + 0.1 * rng.randn(m)


def raw_counts(m=2000, seed=0):
    """Counts in the tens and a target in the tens: the global geometry ends far above
    the zero model's loss there (43 times its mean with sigma raced, 3,200 times at
    sigma 1e-3), bad but not runaway."""
    rng = np.random.RandomState(seed)
    X = rng.poisson([3.0, 10.0, 1.0, 30.0], size=(m, 4)).astype(float)
    return X, X @ np.array([0.5, 1.0, 2.0, 0.2]) + rng.randn(m)


def write_vw(path, X, y):
    with open(path, "w") as f:
        for row, label in zip(X, y):
            feats = " ".join(f"x{j}:{v:.17g}" for j, v in enumerate(row) if v != 0)
            f.write(f"{label:.17g} |f {feats}\n")


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "onlinepgs.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd)


@pytest.mark.parametrize("sigma", ["auto", "1e-3"])
def test_the_command_stops_a_runaway_fit_in_one_line_and_writes_no_model(tmp_path, sigma):
    """`train --loss squared` on the 1e9 stream: exit status 1, one line naming the
    cause, the line of the largest value and the fix, no traceback, no model file; with
    `--geometry adaptive` the same file trains."""
    X, y = huge_feature()
    write_vw(tmp_path / "huge.vw", X, y)
    done = _cli("train", "huge.vw", "--format", "vw", "--loss", "squared", "--sigma", sigma,
                "-o", "m.pgs", "--quiet", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stderr.splitlines() if "note:" not in line]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    line = lines[0]
    assert "training diverged: the predictions ran away" in line
    assert "over a million times the largest loss of predicting 0" in line
    assert "use --geometry adaptive" in line and "scale the features" in line
    at = int(line.split("huge.vw:")[1].split(":")[0])  # the line of a value of 1e9
    assert X[at - 1, 2] == 1e9
    assert not (tmp_path / "m.pgs").exists()
    adaptive = _cli("train", "huge.vw", "--format", "vw", "--loss", "squared", "--geometry",
                    "adaptive", "-o", "m.pgs", "--quiet", cwd=tmp_path)
    assert adaptive.returncode == 0, adaptive.stderr
    assert (tmp_path / "m.pgs").exists()


@pytest.mark.parametrize("sigma", ["auto", "1e-3"])
def test_rows_crossed_in_the_pass_are_checked_too(tmp_path, sigma):
    """With `-q fg` the command's pass crosses each row itself (`CrossedRows`: the race's
    runs in lockstep, `run_crossed`); a runaway there stops the command as on a matrix,
    naming a line of a value of 1e9 (the crossed feature x2^c carries it)."""
    X, y = huge_feature()
    with open(tmp_path / "huge.vw", "w") as f:
        for row, label in zip(X, y):
            feats = " ".join(f"x{j}:{v:.17g}" for j, v in enumerate(row) if v != 0)
            f.write(f"{label:.17g} |f {feats} |g c\n")
    done = _cli("train", "huge.vw", "--format", "vw", "--loss", "squared", "--sigma", sigma,
                "-q", "fg", "-o", "m.pgs", "--quiet", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    line = [line for line in done.stderr.splitlines() if "note:" not in line][-1]
    assert "training diverged: the predictions ran away" in line, line
    at = int(line.split("huge.vw:")[1].split(":")[0])
    assert X[at - 1, 2] == 1e9
    assert not (tmp_path / "m.pgs").exists()


def test_the_estimators_refuse_a_race_that_ran_away_and_warn_at_a_fixed_sigma():
    """sigma raced: every run ran away, so the fit fails with the race's last error (as
    when every run overflows). A fixed sigma: fit and partial_fit warn with the same
    reason and keep the model (the estimators raise short of overflow for nothing else:
    docs/design/method.md). The adaptive geometry fits the same rows (R^2 0.998)."""
    X, y = huge_feature()
    with pytest.raises(PGSDivergedError, match="the predictions ran away.*1e\\+09 in "
                                               "column 2.*geometry='adaptive'"):
        PGSRegressor().fit(X, y)
    for call in ("fit", "partial_fit"):
        est = PGSRegressor(sigma=1e-2)
        with pytest.warns(RuntimeWarning, match="PGS: the predictions ran away"):
            getattr(est, call)(X, y)
        assert np.all(np.isfinite(est.coef_))
    ours = PGSRegressor(geometry="adaptive", iterate="last", radius=None).fit(X, y)
    assert ours.score(X, y) > 0.99


def test_a_classifier_whose_margins_ran_away_is_said_too():
    """The logistic loss on the same columns, labels the target's sign: margins of 1e9
    times a weight, a progressive loss over a million times log 2."""
    X, y = huge_feature()
    with pytest.warns(RuntimeWarning, match="ran away"):
        PGSClassifier(sigma=1e-2).fit(X, np.where(y > 0, 1, -1))
    with pytest.raises(PGSDivergedError, match="ran away"):
        PGSClassifier().fit(X, np.where(y > 0, 1, -1))


def test_a_model_that_is_only_bad_is_not_refused(tmp_path):
    """Raw counts: the global geometry's progressive loss ends thousands of times above
    the zero model's mean loss (finite, bad): it trains, and so does a later call whose
    labels are all 0 (the zero model's loss is the largest over every row the state
    trained)."""
    X, y = raw_counts()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        est = PGSRegressor(sigma=1e-3).fit(X, y)
        est.partial_fit(X[:50], np.zeros(50))
    assert est.online_stats_["progressive_loss"] > 100 * np.mean(y ** 2)
    write_vw(tmp_path / "counts.vw", X, y)
    done = _cli("train", "counts.vw", "--format", "vw", "--loss", "squared", "-o", "m.pgs",
                "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
