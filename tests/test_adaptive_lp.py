"""The adaptive geometry at p < 2 (one scale-free scalar stabilizer a problem) and its l_p
ball, compiled (onlinepgs/_core/_adaptive.pxd: `margins_adq`, `step_adq`, `batch_adq`,
`adq_scales`) against the NumPy transcription `reference_adaptive` (tests/reference.py),
row by row; scale invariance, copies, files and chunks continuing bit for bit, the eta
race's grid, the certificate and the command (docs/design/adaptive.md, "p < 2")."""
import subprocess
import sys

import numpy as np
import pytest

from onlinepgs import PGSClassifier, duality_gap, load_model
from onlinepgs._core import PGSState
from onlinepgs._options import OptionError
from reference import reference_adaptive
from test_adaptive import write_svm
from test_adaptive_core import assert_scale_free, fresh, run, stream, with_intercept

P_VALUES = [1.5, 1.2]
L1 = 0.03  # on `stream`'s rows: about a third of the weights held at 0 at the end


def assert_rows_follow(X, target, sw, *, classifier, dense, batch_size=1, check_every=1,
                       **kw):
    """The compiled state's scaled weights after each of the first steps and at the end
    equal the transcription's to 1e-12 (relative to the largest), and so does the
    progressive loss."""
    m, n = X.shape
    Xi = with_intercept(X)
    its, stats = reference_adaptive(Xi, target, sample_weight=sw, batch_size=batch_size, **kw)
    state = fresh(n, batch_size=batch_size, **kw)
    final = stats["scales"][:, None]
    for k, start in enumerate(range(0, m, batch_size)):
        rows = list(range(start, min(start + batch_size, m)))
        run(state, X, target, sw, rows, classifier, dense)
        if k < 20 or k % check_every == 0 or rows[-1] == m - 1:
            now = np.max(np.abs(Xi[:rows[-1] + 1]), axis=0)[:, None]
            want = its[k] * final
            got = state.weights().reshape(want.shape) * now
            np.testing.assert_allclose(got, want, rtol=0,
                                       atol=1e-12 * max(np.max(np.abs(want)), 1e-300))
    got_loss = state.stats_dict()["progressive_loss"]
    assert abs(got_loss - stats["progressive_loss"]) <= 1e-12 * stats["progressive_loss"]
    return state


@pytest.mark.parametrize("p", P_VALUES)
@pytest.mark.parametrize("radius", [None, 1.5])
@pytest.mark.parametrize("loss", ["logistic", "squared"])
@pytest.mark.parametrize("dense", [False, True])
@pytest.mark.parametrize("batch_size", [1, 4])
def test_p_below_2_follows_the_transcription_row_by_row(p, radius, loss, dense, batch_size):
    """300 rows whose columns span 1e-3..1e3 (scales growing late), importance weights in
    [0.5, 2]: the iterate grad r*(-U / (sigma t + (delta + sqrt(L_t)) / eta)), on the
    ball ||S w||_p <= 1.5 times min(1, B / ||v||_p) (the radius binds: checked), every
    step to 1e-12; one row a step and steps of 4."""
    X, y, _, score, sw = stream(m=300, seed=4)
    classifier = loss != "squared"
    target = y if classifier else score
    state = assert_rows_follow(X, target, sw, classifier=classifier, dense=dense,
                               batch_size=batch_size, check_every=7, p=p, sigma=1e-3,
                               loss=loss, eta=16.0, delta=0.0, centered=False,
                               radius=radius)
    v = state.weights()[:, 0] * np.max(np.abs(with_intercept(X)), axis=0)
    norm = np.sum(np.abs(v) ** p) ** (1 / p)
    if radius is not None:
        assert norm == pytest.approx(radius, rel=1e-9)  # the ball binds
    else:
        assert norm > 1.5  # and so it would bind


@pytest.mark.parametrize("p", P_VALUES)
@pytest.mark.parametrize("batch_size", [1, 3])
def test_one_vs_rest_problems_at_p_below_2_follow_the_transcription(p, batch_size):
    """Three classes, a problem each with its own scalar accumulator, sharing the
    features' scales, on the ball: every column to 1e-12, the progressive mistakes."""
    X, _, labels, _, sw = stream(m=240, seed=5)
    Y = np.where(labels[:, None] == np.arange(3)[None, :], 1.0, -1.0)
    kw = dict(p=p, sigma=1e-4, loss="logistic", eta=8.0, delta=0.5, centered=False,
              radius=5.0)
    its, stats = reference_adaptive(with_intercept(X), Y, sample_weight=sw, labels=labels,
                                    batch_size=batch_size, **kw)
    state = fresh(X.shape[1], n_problems=3, multiclass=True, batch_size=batch_size, **kw)
    run(state, X, labels, sw, range(len(labels)))
    want = its[-1]
    np.testing.assert_allclose(state.weights(), want, rtol=0,
                               atol=1e-12 * np.max(np.abs(want)))
    assert state.n_mistakes == stats["progressive_mistakes"]


def test_p_below_2_with_an_auto_radius_follows_the_radius_of_the_rows_so_far():
    """radius="auto": the ball's radius sqrt(2 (p - 1) max_i c_i l(0; y_i) / sigma), grown
    with the rows (the global geometry's): the transcription with that radius, which on
    these rows is fixed by the first (the largest weight times log 2), is followed to
    1e-12 after every row, and the ball binds at some of them."""
    X, y, _, _, _ = stream(m=200, seed=6)
    sw = np.ones(len(y))
    sw[0] = 2.0
    p, sigma = 1.5, 1e-2
    radius = np.sqrt(2 * (p - 1) * 2.0 * np.log(2.0) / sigma)
    Xi = with_intercept(X)
    its, stats = reference_adaptive(Xi, y, p=p, sigma=sigma, loss="logistic", eta=32.0,
                                    centered=False, sample_weight=sw, radius=radius)
    final = stats["scales"][:, None]
    state = fresh(X.shape[1], p=p, sigma=sigma, eta=32.0, radius="auto")
    norms = []
    for i in range(len(y)):
        run(state, X, y, sw, [i])
        want = its[i] * final
        got = state.weights() * np.max(np.abs(Xi[:i + 1]), axis=0)[:, None]
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * np.max(np.abs(want)))
        norms.append(np.sum(np.abs(want) ** p) ** (1 / p))
    assert max(norms) == pytest.approx(radius, rel=1e-9)


@pytest.mark.parametrize("l1", [0.0, L1])
def test_p_below_2_continues_bit_for_bit_through_a_copy_a_dict_and_chunks(l1):
    """One pass in one call, and in three calls through a copy and the state's dict (L,
    M, N and the factor of the iterate are the state's; with l1, N(thr)'s sums about
    their reference threshold): the same bits; a fork at another sigma continues as a
    state built at that sigma from the same sums would, its weights (and zeros) v times
    D_t(old) / D_t(new)."""
    X, y, _, _, sw = stream(seed=7)
    m, n = X.shape
    kw = dict(p=1.5, eta=32.0, radius=4.0, l1=l1)
    whole = fresh(n, **kw)
    run(whole, X, y, sw, range(m))
    parts = fresh(n, **kw)
    run(parts, X, y, sw, range(50))
    run(parts, X, y, sw, range(50, 90))
    moved = PGSState.from_dict(parts.to_dict()).copy()
    assert np.array_equal(moved.weights(), parts.weights())
    run(moved, X, y, sw, range(90, m))
    assert np.array_equal(moved.weights(), whole.weights())
    assert moved.stats_dict()["progressive_loss"] == whole.stats_dict()["progressive_loss"]
    assert moved.config() == whole.config()
    assert (0 < np.sum(whole.weights() == 0)) == (l1 > 0)
    # with_sigma (a race's fork): the iterate's factor follows sigma at once, v times
    # D_t(old sigma) / D_t(new sigma) off the ball, and the fork goes on at the new sigma
    free = fresh(n, p=1.5, eta=32.0, l1=l1)
    run(free, X, y, sw, range(90))
    forked = free.with_sigma(1e-2)
    L, t = free.to_dict()["ad_sq_a"][0], free.t
    ratio = (1e-3 * t + np.sqrt(L) / 32.0) / (1e-2 * t + np.sqrt(L) / 32.0)
    np.testing.assert_allclose(forked.weights(), free.weights() * ratio, rtol=1e-14)
    np.testing.assert_array_equal(forked.weights() == 0, free.weights() == 0)
    alone = fresh(n, p=1.5, eta=32.0, sigma=1e-2, l1=l1)
    run(forked, X, y, sw, range(90, m))
    run(alone, X, y, sw, range(90, m))
    assert not np.allclose(forked.weights(), alone.weights())  # it kept its sums


@pytest.mark.parametrize("l1", [0.0, 1e-3])
@pytest.mark.parametrize("radius", [None, "auto"])
def test_p_below_2_resumes_bit_for_bit_from_a_model_file(tmp_path, radius, l1):
    """A model file written mid-stream (the eta race still on) holds the scalar
    accumulators, N, M and the iterate's factor (with l1, N(thr)'s sums): the rest of
    the rows after a load give the model of one pass, bit for bit, zeros and all."""
    from onlinepgs import save_model
    X, y = _race_data(m=5000, n=20, seed=12)
    params = dict(geometry="adaptive", iterate="last", p=1.5, radius=radius, l1=l1,
                  random_state=0)
    whole = PGSClassifier(**params)
    whole.partial_fit(X, y, classes=[-1, 1])
    parts = PGSClassifier(**params)
    parts.partial_fit(X[:3000], y[:3000], classes=[-1, 1])
    save_model(parts, tmp_path / "m.pgs")
    parts = load_model(tmp_path / "m.pgs")
    parts.partial_fit(X[3000:], y[3000:])
    assert np.array_equal(whole.coef_, parts.coef_)
    assert np.array_equal(whole.intercept_, parts.intercept_)
    assert (whole.sigma_, whole.eta_) == (parts.sigma_, parts.eta_)
    assert (0 < np.sum(whole.coef_ == 0)) == (l1 > 0)


@pytest.mark.parametrize("l1", [0.0, L1])
@pytest.mark.parametrize("radius", [None, 2.0])
def test_p_below_2_a_column_multiplied_by_any_c_changes_no_prediction(radius, l1):
    """Columns times c in [1e-3, 1e3]: the scaled gradients, so U, L, the ball's norm
    ||S w||_p and l1's threshold on U, are those of the columns as they were: every
    progressive loss and the final predictions equal within 1e-9 (relative)."""
    X, y, _, _, sw = stream(seed=8)
    c = 10.0 ** np.linspace(-3, 3, X.shape[1])
    assert_scale_free(X, y, sw, c, p=1.5, eta=32.0, radius=radius, l1=l1)


def test_p_below_2_takes_the_uncentered_form_and_refuses_what_it_does_not_run():
    """The centered form is per-coordinate (p = 2); at p < 2 a state is uncentered by
    default and refuses centered=True; a ball at p = 2 is refused by name, with the
    reason. l1 at p < 2 runs (tests/test_adaptive_l1q.py), and so do the averages
    (tests/test_adaptive_avgq.py)."""
    assert fresh(3, p=1.5).config()["centered"] is False
    assert fresh(3).config()["centered"] is True
    with pytest.raises(ValueError, match="centered form is per-coordinate"):
        fresh(3, p=1.5, centered=True)
    with pytest.raises(OptionError, match="ball .*needs a p below 2, got p=2"):
        fresh(3, radius="auto")
    assert fresh(3, p=1.5, l1=1e-3).config()["l1"] == 1e-3
    assert fresh(3, p=1.5, iterate="weighted2").config()["iterate"] == "weighted2"


def _race_data(m=4400, n=30, seed=9):
    rng = np.random.RandomState(seed)
    X = rng.randn(m, n) * (rng.rand(m, n) < 0.3) * 10.0 ** rng.uniform(-2, 2, n)
    w = rng.randn(n) / np.max(np.abs(X), axis=0)
    y = np.where(X @ w + 0.5 * rng.randn(m) > 0, 1, -1)
    return X, y


def test_the_eta_race_at_p_below_2_races_its_own_grid():
    """eta="auto" at p < 2 races 8, 32 and 128 (its best rates are two decades above
    p = 2's), and the choice is one of them; at p = 2 it races 0.1, 0.5 and 2."""
    X, y = _race_data()
    est = PGSClassifier(geometry="adaptive", iterate="last", p=1.5, sigma=1e-4, max_epochs=1,
                        random_state=0).fit(X, y)
    raced = sorted({r["eta"] for r in est.sigma_path_ if "eta" in r})
    assert raced == [8.0, 32.0, 128.0]
    assert est.eta_ in raced
    est2 = PGSClassifier(geometry="adaptive", iterate="last", radius=None, sigma=1e-4,
                         max_epochs=1,
                         random_state=0).fit(X, y)
    assert sorted({r["eta"] for r in est2.sigma_path_ if "eta" in r}) == [0.1, 0.5, 2.0]


@pytest.mark.parametrize("l1", [0.0, 2e-2])
@pytest.mark.parametrize("radius", [None, 2.0])
def test_the_gap_at_p_below_2_certifies_the_scaled_objective(radius, l1):
    """`duality_gap` of a p < 2 model certifies F(w) = mean loss + sigma r(S w) + l1
    ||S w||_1 (on the ball ||S w||_p <= B): the primal is that value (checked by hand),
    the gap is >= 0 and it shrinks with the passes."""
    X, y = _race_data(m=600, n=12, seed=10)
    sigma, p = 1e-2, 1.5
    gaps = []
    for epochs in (1, 30):
        est = PGSClassifier(geometry="adaptive", iterate="last", p=p, sigma=sigma, eta=8.0,
                            radius=radius, l1=l1, max_epochs=epochs,
                            random_state=0).fit(X, y)
        cert = duality_gap(est, X, y)
        s = np.max(np.abs(X), axis=0)
        v = est.coef_.ravel() * s
        z = X @ est.coef_.ravel() + est.intercept_[0]
        vi = np.append(v, est.intercept_[0])  # the intercept's constant column, scale 1
        primal = (np.mean(np.log1p(np.exp(-y * z)))
                  + sigma * np.sum(np.abs(vi) ** p) ** (2 / p) / (2 * (p - 1))
                  + l1 * np.sum(np.abs(vi)))
        assert cert.primal == pytest.approx(primal, rel=1e-9)
        assert cert.gap >= -1e-12
        gaps.append(cert.gap)
    assert gaps[1] < gaps[0] / 3
    assert (0 < np.sum(est.coef_ == 0)) == (l1 > 0)


def test_the_command_trains_p_below_2_in_the_adaptive_geometry(tmp_path):
    """train --geometry adaptive --p 1.5: the model file's weights are the estimator's on
    the same rows; --radius at p = 2 is refused, in the flags' words, before any row is
    read."""
    X, y = _race_data(m=500, n=8, seed=11)
    data = write_svm(tmp_path / "rows.svm", X, y)
    done = subprocess.run([sys.executable, "-m", "onlinepgs.cli", "train", str(data),
                           "--geometry", "adaptive", "--p", "1.5", "--sigma", "1e-4",
                           "--eta", "32", "--radius", "4", "-o", str(tmp_path / "m.pgs"),
                           "--quiet"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    model = load_model(tmp_path / "m.pgs")
    assert (model.geometry, model.p, model.radius) == ("adaptive", 1.5, 4.0)
    ours = PGSClassifier(geometry="adaptive", iterate="last", p=1.5, sigma=1e-4, eta=32.0, radius=4.0,
                         max_epochs=1, shuffle=False)
    ours.partial_fit(X, y, classes=[-1, 1])
    np.testing.assert_allclose(model.coef_, ours.coef_, rtol=1e-12, atol=1e-15)
    bad = subprocess.run([sys.executable, "-m", "onlinepgs.cli", "train", str(tmp_path / "none"),
                          "--geometry", "adaptive", "--radius", "3", "-o",
                          str(tmp_path / "x.pgs")], capture_output=True, text=True,
                         cwd=tmp_path)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "--radius: the adaptive geometry's ball (--radius 3) needs a p below 2" in bad.stderr
