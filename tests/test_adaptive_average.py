"""The adaptive geometry's averaged iterates (onlinepgs/_core/_adaptive_avg.pxd,
docs/design/adaptive.md, "Averaged iterates"): ``iterate`` average, weighted and
weighted2 report sum_t a_t v_t / sum_t a_t (a_t = 1, t, t^2) divided by the final scales.

Yardsticks: the NumPy transcription (tests/reference.py: `reference_adaptive`'s iterates
every step, combined by `combine`; `lazy_adaptive`'s own lazy sums), math.fsum of the
plain sums a coordinate's average takes between two touches, the same learner in other
chunkings and through a model file, the race's kept run alone, the command's model
against the estimator's, the scaled objective's optimum (scipy) for `gap`."""
import math
import subprocess
import sys

import numpy as np
import pytest

from onlinepgs import PGSClassifier, load_model, save_model
from onlinepgs._core._pgs import adaptive_gap_sum
from onlinepgs._options import OptionError
from reference import combine, gap_sum, lazy_adaptive, loss_value, reference_adaptive
from test_adaptive_core import fresh, run, stream, with_intercept

AVERAGES = ["average", "weighted", "weighted2"]
POWER = {"average": 0, "weighted": 1, "weighted2": 2}


# ---- the lazy sums between two touches ----------------------------------------------------

def _plain_sum(A, l1, c, sigma, a, b, k):
    terms = []
    for t in range(a, b + 1):
        den = sigma * t + c
        terms.append(t ** k * (A - l1 * t) / den if A > l1 * t and den > 0 else 0.0)
    return math.fsum(terms)


@pytest.mark.parametrize("sigma", [0.0, 1e-7, 1e-5, 1e-3, 0.01, 1.0, 100.0])
@pytest.mark.parametrize("l1", [0.0, 1e-4, 3e-3])
def test_the_lazy_sums_between_touches_are_the_plain_sums(sigma, l1):
    """sum_{t=a}^{b} t^k (A - l1 t)_+ / (sigma t + c) in doubles (`ad_gap_sum`) equals
    math.fsum of its terms to 1e-13 (relative), k = 0, 1, 2, over gaps from one step to
    20,000 and the stabilizers of the race's sigmas (c / sigma up to 2e8, where the
    closed forms with the digamma function lose everything: ADAPTIVE-NOTES' table), and
    the transcription's exact `gap_sum`; a gap beyond the threshold sums to 0."""
    rng = np.random.RandomState(int(sigma * 1e7) % 1000 + int(l1 * 1e5))
    gaps = [(1, 1), (1, 3), (2, 9), (1, 40), (5, 40), (100, 100), (1000, 1010), (10, 5000),
            (1, 20000), (3, 17), (700, 9000)]
    for c in (0.0, 0.3, 2.0, 20.0):
        for a, b in gaps:
            for k in (0, 1, 2):
                A = float(rng.uniform(0.5, 5.0))
                want = _plain_sum(A, l1, c, sigma, a, b, k)
                got = adaptive_gap_sum(A, l1, c, sigma, a, b, k)
                assert abs(got - want) <= 1e-13 * abs(want), (c, a, b, k, got, want)
                if c > 0 and (b - a) < 6000:
                    exact = gap_sum(A, l1, c, sigma, a, b, k)
                    assert abs(got - exact) <= 1e-13 * abs(exact)
    assert adaptive_gap_sum(1.0, 0.01, 1.0, 1e-3, 100, 200, 2) == 0.0  # A <= l1 t
    assert adaptive_gap_sum(0.0, 0.0, 1.0, 1e-3, 1, 200, 1) == 0.0


# ---- the averaged iterates against the transcription --------------------------------------

@pytest.mark.parametrize("iterate", AVERAGES)
@pytest.mark.parametrize("centered", [False, True])
@pytest.mark.parametrize("l1", [0.0, 2e-3])
@pytest.mark.parametrize("batch_size", [1, 4])
def test_averaged_iterates_follow_the_transcription(iterate, centered, l1, batch_size):
    """After some of the steps and at the end, the reported weights equal the
    transcription's iterates combined (`combine`: every step's iterate, in the final
    scales) to 1e-12 relative, and, at the end, `lazy_adaptive`'s own lazy sums; the
    last iterate of the averaged state is the last-iterate state's, bit for bit (an
    average changes no step). Scales grow between a coordinate's touches here
    (`stream`), importance weights in [0.5, 2], both forms, l1 on and off, steps of one
    row and of four, sparse rows, with an intercept."""
    X, y, _, _, sw = stream()
    m, n = X.shape
    its, _ = reference_adaptive(with_intercept(X), y, p=2.0, sigma=1e-3, loss="logistic",
                                eta=0.5, l1=l1, centered=centered, sample_weight=sw,
                                batch_size=batch_size)
    state = fresh(n, l1=l1, centered=centered, iterate=iterate, batch_size=batch_size)
    steps = list(range(0, m, batch_size))
    checks = {5, 17, len(steps) - 1}
    for s, start in enumerate(steps):
        run(state, X, y, sw, range(start, min(start + batch_size, m)))
        if s in checks:
            want = combine(its[:s + 1], iterate)
            Xi = with_intercept(X[:min(start + batch_size, m)])
            # the transcription's iterates are in the final scales; the state's in its own
            final = np.max(np.abs(with_intercept(X)), axis=0)[:, None]
            now = np.max(np.abs(Xi), axis=0)[:, None]
            got = state.weights() * np.where(final > 0, now / np.where(final > 0, final, 1), 0)
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * np.max(np.abs(want)))
    lazy, _ = lazy_adaptive(with_intercept(X), y, p=2.0, sigma=1e-3, loss="logistic", eta=0.5,
                            l1=l1, centered=centered, sample_weight=sw,
                            batch_size=batch_size, iterate=iterate)
    np.testing.assert_allclose(state.weights(), lazy, rtol=0,
                               atol=1e-12 * np.max(np.abs(lazy)))
    last = fresh(n, l1=l1, centered=centered, batch_size=batch_size)
    run(last, X, y, sw, range(m))
    np.testing.assert_array_equal(state.weights("last"), last.weights())


@pytest.mark.parametrize("iterate", AVERAGES)
@pytest.mark.parametrize("dense", [False, True])
def test_one_vs_rest_averages_follow_the_transcription(iterate, dense):
    """Three classes, one problem each, centered, with weights up to 1e6 (the invariant
    update of the heavy rows): each problem's average is the transcription's, sparse and
    dense rows alike."""
    X, _, labels, _, _ = stream(seed=1)
    sw = np.random.RandomState(1).choice([1.0, 0.5, 3.0, 1e3, 1e6], len(labels))
    Y = np.where(labels[:, None] == np.arange(3)[None, :], 1.0, -1.0)
    its, _ = reference_adaptive(with_intercept(X), Y, p=2.0, sigma=1e-4, loss="logistic",
                                eta=0.8, centered=True, sample_weight=sw, labels=labels)
    state = fresh(X.shape[1], sigma=1e-4, eta=0.8, centered=True, n_problems=3,
                  multiclass=True, iterate=iterate)
    run(state, X, labels, sw, range(len(labels)), dense=dense)
    want = combine(its, iterate)
    np.testing.assert_allclose(state.weights(), want, rtol=0,
                               atol=1e-12 * np.max(np.abs(want)))


@pytest.mark.parametrize("iterate", AVERAGES)
def test_the_progressive_loss_is_the_reported_averages(iterate):
    """Each row's reported loss is that of the average of the iterates before it, read
    in the row's scales (its own values taken in first, as its margin reads them): the
    transcription's iterates combined row by row give the same progressive loss to
    1e-12; the last iterate's own is kept apart (sum_weighted_loss_last)."""
    X, y, _, _, sw = stream(seed=4)
    kw = dict(p=2.0, sigma=1e-3, loss="logistic", eta=0.5, centered=True)
    reported_progressive_loss_follows(X, y, sw, iterate, **kw)


def reported_progressive_loss_follows(X, y, sw, iterate, **kw):
    """One row a step in a state of `kw` reporting `iterate`: its progressive loss is that
    of the transcription's iterates before each row combined (in the scaled weights v_t)
    and read in the row's scales, to 1e-12, and not the last iterate's."""
    m, n = X.shape
    Xi = with_intercept(X)
    its, stats = reference_adaptive(Xi, y, sample_weight=sw, **kw)
    final = stats["scales"][:, None]
    V = [w * final for w in its]  # the scaled iterates v_t
    a = np.arange(1, m + 1, dtype=float) ** POWER[iterate]
    total, acc = 0.0, np.zeros_like(V[0])
    for i in range(m):
        now = np.max(np.abs(Xi[:i + 1]), axis=0)
        avg = acc / a[:i].sum() if i else acc
        z = np.sum(np.where(now > 0, Xi[i] / np.where(now > 0, now, 1), 0) * avg[:, 0])
        total += sw[i] * loss_value(kw["loss"], z, y[i])
        acc = acc + a[i] * V[i]
    state = fresh(n, iterate=iterate, **kw)
    run(state, X, y, sw, range(m))
    got = state.stats_dict()
    assert got["progressive_loss"] == pytest.approx(total / sw.sum(), rel=1e-12)
    assert got["progressive_loss"] != stats["progressive_loss"]


@pytest.mark.parametrize("kw", [dict(centered=True), dict(p=1.5, eta=16.0)])
def test_a_fork_at_another_sigma_keeps_the_average_so_far(kw):
    """The sigma race forks a run at another sigma (`with_sigma`): the average over the
    steps so far is the old sigma's, unchanged by the fork (to rounding; at p < 2 the
    global geometry's sums, settled), and the fork then averages its own iterates from
    there."""
    X, y, _, _, sw = stream()
    state = fresh(X.shape[1], iterate="weighted2", **kw)
    run(state, X, y, sw, range(100))
    fork = state.with_sigma(0.3)
    np.testing.assert_allclose(fork.weights(), state.weights(), rtol=1e-14, atol=1e-300)
    run(fork, X, y, sw, range(100, 160))
    run(state, X, y, sw, range(100, 160))
    assert not np.allclose(fork.weights(), state.weights(), rtol=1e-6)


# ---- the estimator, the race, the model file, the command ----------------------------------

def raw_columns(m=3000, seed=0):
    rng = np.random.RandomState(seed)
    units = np.array([1.0, 1e3, 1e-3, 30.0, 1e5, 7.0])
    Z = rng.randn(m, units.size) * (rng.rand(m, units.size) < 0.7)
    score = Z @ np.array([1.0, -1.5, 2.0, 0.5, 1.0, -0.7]) + 0.6 * rng.randn(m)
    return Z * units, np.where(score > 0, 1, 0)


@pytest.mark.parametrize("iterate", ["weighted", "weighted2"])
def test_chunks_and_a_model_file_continue_bit_for_bit(tmp_path, iterate):
    """With the race on (eta and sigma "auto"), partial_fit in chunks with the model saved
    and loaded in the middle of the stream ends with the bits of one call; the file
    holds the settled sums and the steps they hold up to."""
    X, y = raw_columns()
    kw = dict(geometry="adaptive", radius=None, iterate=iterate, random_state=0)
    one = PGSClassifier(**kw).partial_fit(X, y, classes=[0, 1])
    parts = PGSClassifier(**kw)
    for a, b in [(0, 1), (1, 777), (777, 1500)]:
        parts.partial_fit(X[a:b], y[a:b], classes=[0, 1])
    save_model(parts, tmp_path / "m.pgs")
    parts = load_model(tmp_path / "m.pgs")
    assert parts.get_params()["iterate"] == iterate
    for a, b in [(1500, 2222), (2222, 3000)]:
        parts.partial_fit(X[a:b], y[a:b])
    assert (parts.eta_, parts.sigma_) == (one.eta_, one.sigma_)
    np.testing.assert_array_equal(parts.coef_, one.coef_)
    np.testing.assert_array_equal(parts.intercept_, one.intercept_)
    np.testing.assert_array_equal(parts.decision_function(X[:40]), one.decision_function(X[:40]))


def test_the_race_picks_with_averages_reported():
    """eta and sigma raced with the weighted average reported: the kept run equals its
    eta's learner alone (its own sigma race), bit for bit, and its model is the
    transcription's average at the chosen eta and sigma is not asked for here: the
    race's forks are (`test_a_fork_at_another_sigma_keeps_the_average_so_far`). The
    averaged model differs from the last iterate's."""
    X, y = raw_columns(m=7000, seed=3)
    kw = dict(geometry="adaptive", radius=None, iterate="weighted", random_state=0)
    raced = PGSClassifier(eta="auto", **kw).partial_fit(X, y, classes=[0, 1])
    alone = PGSClassifier(eta=raced.eta_, **kw).partial_fit(X, y, classes=[0, 1])
    assert raced.sigma_ == alone.sigma_
    np.testing.assert_array_equal(raced.coef_, alone.coef_)
    last = PGSClassifier(eta=raced.eta_, sigma=raced.sigma_,
                         **{**kw, "iterate": "last"}).partial_fit(X, y, classes=[0, 1])
    assert not np.allclose(last.coef_, raced.coef_, rtol=1e-3)
    assert raced.score(X, y) > 0.85


def test_the_random_iterate_is_refused_by_name():
    with pytest.raises(OptionError, match="the adaptive geometry reports the last iterate "
                                          "or an average of its iterates"):
        fresh(3, iterate="random")
    with pytest.raises(ValueError, match="got iterate='random'"):
        PGSClassifier(geometry="adaptive", radius=None, iterate="random").fit(
            np.zeros((2, 1)), [0, 1])


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "onlinepgs.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd)


def test_the_command_trains_an_average_and_gap_certifies_it(tmp_path):
    """``train --geometry adaptive --iterate weighted`` writes the estimator's weighted
    average (one pass, the same sigma and eta), `random` is a one-line error, and `gap`
    runs on the model (its certificate at an average: tests/test_duality_adaptive.py)."""
    X, y = raw_columns(m=1500, seed=5)
    path = tmp_path / "raw.svm"
    with open(path, "w") as f:
        for yi, row in zip(y, X):
            f.write(f"{2 * yi - 1} " + " ".join(f"{j + 1}:{v:.17g}" for j, v in enumerate(row)
                                                if v != 0) + "\n")
    sigma = 1e-2
    done = _cli("train", path, "--geometry", "adaptive", "--iterate", "weighted", "--sigma",
                sigma, "--eta", 0.5, "-o", tmp_path / "m.pgs", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    model = load_model(tmp_path / "m.pgs")
    assert (model.geometry, model.iterate) == ("adaptive", "weighted")
    ours = PGSClassifier(sigma=sigma, eta=0.5, max_epochs=1, shuffle=False,
                         geometry="adaptive", radius=None, iterate="weighted")
    ours.partial_fit(X, 2 * y - 1, classes=[-1, 1])
    np.testing.assert_allclose(model.coef_, ours.coef_, rtol=1e-12, atol=1e-15)
    bad = _cli("train", path, "--geometry", "adaptive", "--iterate", "random", "-o",
               tmp_path / "x.pgs", cwd=tmp_path)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "--iterate" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    gap = _cli("gap", tmp_path / "m.pgs", path, cwd=tmp_path)
    assert gap.returncode == 0 and "objective = scaled" in gap.stdout, gap.stderr

