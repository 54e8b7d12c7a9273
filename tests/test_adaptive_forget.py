"""Forgetting in the adaptive geometry (``geometry="adaptive", forget=gamma``;
docs/design/adaptive.md, "Forgetting"): the compiled core against the eager NumPy
transcription (tests/reference.py: `reference_adaptive(..., forget=gamma)`, which decays
U (z), the accumulators and the count every step), through the renormalization of its
lazy scale G, chunks, a copy, the state's dict and a model file, the eta/sigma race, the
command and `gap`; and what it is for: a stream whose concept flips."""
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from onlinepgs import PGSClassifier, load_model, save_model
from onlinepgs._core import PGSState
from reference import reference_adaptive
from test_adaptive import write_svm
from test_adaptive_core import (assert_scale_free, fresh, heavy_weights, ovr_follows, run,
                                stream, with_intercept)
from test_adaptive_lp import assert_rows_follow

ADAPTIVE = dict(geometry="adaptive", iterate="last", radius=None, random_state=0)


def _assert_follows(state, its, final, Xi, stop, step):
    """The state's scaled weights (at the scales of rows [0, stop)) against the
    transcription's iterate `step` (in the final scales), to 1e-12 of the largest."""
    now = np.max(np.abs(Xi[:stop]), axis=0)[:, None]
    want = (its[step] * final).ravel()
    got = (state.weights() * now).ravel()
    np.testing.assert_allclose(got, want, rtol=0,
                               atol=1e-12 * max(np.max(np.abs(want)), 1e-300))


@pytest.mark.parametrize("forget", [0.9, 0.99, 0.999])
@pytest.mark.parametrize("centered", [False, True])
@pytest.mark.parametrize("l1", [0.0, 2e-3])
@pytest.mark.parametrize("loss, weights", [("logistic", "ones"), ("logistic", "heavy"),
                                           ("squared", "mild"), ("hinge", "heavy")])
@pytest.mark.parametrize("batch_size", [1, 4])
def test_forgetting_rows_follow_the_transcription(forget, centered, l1, loss, weights,
                                                  batch_size):
    """300 rows, a step of 1 or 4 rows: after each of the first steps and at the end the
    weights equal the eager transcription's to 1e-12, and so does the progressive loss
    (importance weights of 1, in [0.5, 2], or up to 1e6: the invariant update)."""
    X, y, _, score, sw = stream(m=300)
    classifier = loss != "squared"
    target = y if classifier else score
    sw = dict(ones=np.ones(len(y)), mild=sw, heavy=heavy_weights(len(y)))[weights]
    m, n = X.shape
    Xi = with_intercept(X)
    its, stats = reference_adaptive(Xi, target, p=2.0, sigma=1e-3, loss=loss, eta=0.5, l1=l1,
                                    centered=centered, sample_weight=sw,
                                    batch_size=batch_size, forget=forget)
    state = fresh(n, loss=loss, l1=l1, centered=centered, forget=forget,
                  batch_size=batch_size)
    final = stats["scales"][:, None]
    for step, start in enumerate(range(0, m, batch_size)):
        stop = min(start + batch_size, m)
        run(state, X, target, sw, range(start, stop), classifier, dense=step % 2 == 1)
        if step < 15 or stop == m or step % 25 == 0:
            _assert_follows(state, its, final, Xi, stop, step)
    got_loss = state.stats_dict()["progressive_loss"]
    assert abs(got_loss - stats["progressive_loss"]) <= 1e-12 * stats["progressive_loss"]
    assert state.tau == pytest.approx((1 - forget ** len(its)) / (1 - forget), rel=1e-12)


@pytest.mark.parametrize("centered", [False, True])
def test_one_vs_rest_problems_forget_as_the_transcription(centered):
    X, _, labels, _, sw = stream(m=240, seed=1)
    ovr_follows(X, labels, sw, centered=centered, forget=0.95)
    ovr_follows(X, labels, sw, centered=centered, forget=0.95, batch_size=3)


@pytest.mark.parametrize("centered", [False, True])
@pytest.mark.parametrize("forget, m", [(0.5, 700), (0.9, 1500)])
def test_the_lazy_scale_is_brought_back_to_1_and_nothing_moves(centered, forget, m):
    """G = gamma^t falls below 2^-200 every 200 ln 2 / ln(1 / gamma) steps (200 at 0.5,
    1,316 at 0.9): the fields are brought back to G = 1, and the weights still follow
    the eager transcription to 1e-12 after it; a copy taken across it continues bit for
    bit."""
    renormalizes_and_follows(m, p=2.0, sigma=1e-3, loss="logistic", eta=0.5, l1=1e-3,
                             centered=centered, forget=forget)


def renormalizes_and_follows(m, **kw):
    """m rows in a state of `kw` (forget among them), moved through its dict half-way:
    the renormalizations the rows make happen, the moved state ends with the same bits,
    and the weights and the progressive loss are the eager transcription's (1e-12)."""
    X, y, _, _, sw = stream(m=m, seed=4)
    Xi = with_intercept(X)
    its, stats = reference_adaptive(Xi, y, sample_weight=sw, **kw)
    state = fresh(X.shape[1], **kw)
    half = m // 2
    run(state, X, y, sw, range(half))
    moved = PGSState.from_dict(state.to_dict())
    run(state, X, y, sw, range(half, m))
    run(moved, X, y, sw, range(half, m))
    want_renorms = int(np.floor(m * np.log(kw["forget"]) / np.log(2.0 ** -200)))
    assert state.n_renorms == want_renorms >= 1
    assert np.array_equal(moved.weights(), state.weights())
    _assert_follows(state, its, stats["scales"][:, None], Xi, m, m - 1)
    got_loss = state.stats_dict()["progressive_loss"]
    assert abs(got_loss - stats["progressive_loss"]) <= 1e-12 * stats["progressive_loss"]


def test_chunks_a_copy_and_the_dict_continue_bit_for_bit():
    """One call, three calls, and a copy and the state's dict in the middle: the same
    bits (the state carries tau and G)."""
    X, y, _, _, sw = stream(seed=2)
    m, n = X.shape
    whole = fresh(n, l1=1e-3, forget=0.97, centered=True)
    run(whole, X, y, sw, range(m))
    parts = fresh(n, l1=1e-3, forget=0.97, centered=True)
    run(parts, X, y, sw, range(50))
    run(parts, X, y, sw, range(50, 90))
    d = parts.to_dict()
    assert d["tau"] == parts.tau and d["decay"] == parts.decay < 1.0
    moved = PGSState.from_dict(d).copy()
    run(moved, X, y, sw, range(90, m))
    assert np.array_equal(moved.weights(), whole.weights())
    assert moved.config() == whole.config() and moved.config()["forget"] == 0.97


def drift_stream(m=6000, n=20, flip=3000, seed=0):
    """Gaussian rows in columns of unrelated units, labels of a fixed linear concept
    with 5% noise, the concept's sign flipped at row `flip`."""
    rng = np.random.RandomState(seed)
    Z = rng.randn(m, n)
    w = rng.randn(n)
    y = np.where(Z @ w > 0, 1, -1)
    y[flip:] *= -1
    y[rng.rand(m) < 0.05] *= -1
    return Z * 10.0 ** rng.uniform(-2, 2, n), y


def second_half_loss(est, X, y, flip, chunk=100):
    """The progressive log loss over the rows from `flip` on (each chunk scored before it
    trains), from the learner's own statistics."""
    est.partial_fit(X[:flip], y[:flip], classes=[-1, 1])
    before = est.online_stats_
    w0, l0 = before["sum_weight"], before["progressive_loss"]
    for a in range(flip, X.shape[0], chunk):
        est.partial_fit(X[a:a + chunk], y[a:a + chunk])
    st = est.online_stats_
    return (st["progressive_loss"] * st["sum_weight"] - l0 * w0) / (st["sum_weight"] - w0)


def test_forgetting_recovers_from_a_flipped_concept():
    """After the concept flips half-way, the adaptive model that forgets has a lower
    progressive log loss over the second half than the one that does not: at sigma 1e-4
    and eta 0.5, 0.544 (forget 0.99) and 0.604 (0.999) against 0.710; with sigma and eta
    raced, 0.481 (0.999) against 0.533 (at 0.99 the race's 0.556 is worse: not asserted)."""
    X, y = drift_stream()
    fixed = dict(sigma=1e-4, eta=0.5)
    keep = second_half_loss(PGSClassifier(**ADAPTIVE, **fixed), X, y, 3000)
    for forget, below in ((0.99, 0.8), (0.999, 0.9)):
        got = second_half_loss(PGSClassifier(**ADAPTIVE, forget=forget, **fixed), X, y, 3000)
        assert got < below * keep, (forget, got, keep)
    keep = second_half_loss(PGSClassifier(**ADAPTIVE), X, y, 3000)
    got = second_half_loss(PGSClassifier(**ADAPTIVE, forget=0.999), X, y, 3000)
    assert got < 0.95 * keep, (got, keep)


def test_a_model_file_resumes_a_forgetting_race_exactly(tmp_path):
    """sigma and eta raced with forget=0.99, saved mid-stream (before eta's choice) and
    resumed: the model of an uninterrupted run, bit for bit; the kept family equals its
    eta and sigma race alone."""
    X, y = drift_stream(m=5000, seed=1)
    whole = PGSClassifier(forget=0.99, **ADAPTIVE).partial_fit(X, y, classes=[-1, 1])
    part = PGSClassifier(forget=0.99, **ADAPTIVE).partial_fit(X[:2500], y[:2500],
                                                              classes=[-1, 1])
    save_model(part, tmp_path / "m.pgs")
    resumed = load_model(tmp_path / "m.pgs")
    assert resumed.forget == 0.99
    resumed.partial_fit(X[2500:], y[2500:])
    assert resumed.eta_ == whole.eta_ and resumed.sigma_ == whole.sigma_
    np.testing.assert_array_equal(resumed.coef_, whole.coef_)
    alone = PGSClassifier(forget=0.99, eta=whole.eta_, **ADAPTIVE).partial_fit(
        X, y, classes=[-1, 1])
    assert alone.sigma_ == whole.sigma_
    np.testing.assert_array_equal(alone.coef_, whole.coef_)


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "onlinepgs.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd)


def test_the_command_trains_and_certifies_with_forget(tmp_path):
    """``train --geometry adaptive --forget 0.999`` ends with the estimator's model on
    the same rows; ``gap`` certifies its scaled objective as for any model of the
    geometry (the uniform objective: primal >= dual); ``--scheduler`` stays refused."""
    X, y = drift_stream(m=1500, seed=2)
    path = write_svm(tmp_path / "drift.svm", X, y)
    done = _cli("train", path, "--geometry", "adaptive", "--forget", "0.999", "--sigma",
                "1e-4", "--eta", "0.5", "-o", tmp_path / "m.pgs", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    model = load_model(tmp_path / "m.pgs")
    assert (model.geometry, model.forget) == ("adaptive", 0.999)
    ours = PGSClassifier(sigma=1e-4, eta=0.5, forget=0.999, max_epochs=1, shuffle=False,
                         **ADAPTIVE)
    ours.partial_fit(X, y, classes=[-1, 1])
    np.testing.assert_allclose(model.coef_, ours.coef_, rtol=1e-12, atol=1e-15)
    gap = _cli("gap", tmp_path / "m.pgs", path, cwd=tmp_path)
    assert gap.returncode == 0 and "objective = scaled" in gap.stdout, gap.stderr
    dask = _cli("train", path, "--geometry", "adaptive", "--forget", "0.999", "--scheduler",
                "local", "-o", tmp_path / "x.pgs", cwd=tmp_path)
    assert dask.returncode != 0 and "Traceback" not in dask.stderr


# ---- p < 2: one scalar stabilizer a problem, its L decayed with U and t ------------------
@pytest.mark.parametrize("p", [1.2, 1.5, 1.8])
@pytest.mark.parametrize("forget", [0.9, 0.99])
@pytest.mark.parametrize("radius", [None, 1.0])
@pytest.mark.parametrize("dense", [False, True])
@pytest.mark.parametrize("batch_size", [1, 4])
def test_forgetting_at_p_below_2_follows_the_transcription(p, forget, radius, dense,
                                                           batch_size):
    """300 rows, importance weights in [0.5, 2]: every step decays U, L and t (tau) by
    gamma before its additions, v = grad r*(-U / (sigma tau + (delta + sqrt(L)) / eta)),
    on the ball times min(1, B / ||v||_p): the compiled state (lam~, L~ over G) equals the
    eager transcription to 1e-12 after each of the first 20 steps, every seventh and the
    last, and so does the progressive loss."""
    X, y, _, _, sw = stream(m=300, seed=4)
    state = assert_rows_follow(X, y, sw, classifier=True, dense=dense, batch_size=batch_size,
                               check_every=7, p=p, sigma=1e-3, loss="logistic", eta=16.0,
                               delta=0.5, centered=False, radius=radius, forget=forget)
    assert state.tau == pytest.approx((1 - forget ** state.t) / (1 - forget), rel=1e-12)


@pytest.mark.parametrize("batch_size", [1, 3])
def test_one_vs_rest_problems_at_p_below_2_forget_as_the_transcription(batch_size):
    X, _, labels, _, sw = stream(m=240, seed=1)
    ovr_follows(X, labels, sw, p=1.5, centered=False, forget=0.95, batch_size=batch_size)
    ovr_follows(X, labels, sw, p=1.2, centered=False, forget=0.95, radius=5.0,
                batch_size=batch_size)


@pytest.mark.parametrize("forget, m", [(0.5, 700), (0.9, 1500)])
@pytest.mark.parametrize("radius", [None, 1.0])
def test_at_p_below_2_the_lazy_scale_is_brought_back_to_1_and_nothing_moves(forget, m,
                                                                            radius):
    """Every 200 ln 2 / ln(1 / gamma) steps lam~, the map's M and each problem's L~ are
    brought back to G = 1 (phi and N stay): the weights follow the eager transcription
    to 1e-12 after it, and a state moved through its dict before it continues bit for
    bit."""
    renormalizes_and_follows(m, p=1.5, sigma=1e-3, loss="logistic", eta=16.0,
                             centered=False, radius=radius, forget=forget)


@pytest.mark.parametrize("radius", [None, 2.0])
def test_at_p_below_2_a_column_multiplied_by_any_c_changes_no_forgetting_prediction(radius):
    """Columns times c in [1e-3, 1e3] with forget 0.95 at p = 1.5: within 1e-9."""
    X, y, _, _, sw = stream(seed=8)
    c = 10.0 ** np.linspace(-3, 3, X.shape[1])
    assert_scale_free(X, y, sw, c, p=1.5, eta=32.0, radius=radius, forget=0.95)


def test_at_p_below_2_a_model_file_resumes_a_forgetting_race_exactly(tmp_path):
    """p = 1.5, sigma and eta raced (p < 2's grid) with forget=0.99, saved mid-stream
    (before eta's choice) and resumed: the model of an uninterrupted run, bit for bit;
    the kept family equals its eta and sigma race alone."""
    X, y = drift_stream(m=5000, seed=1)
    params = dict(ADAPTIVE, p=1.5, forget=0.99)
    whole = PGSClassifier(**params).partial_fit(X, y, classes=[-1, 1])
    part = PGSClassifier(**params).partial_fit(X[:2500], y[:2500], classes=[-1, 1])
    save_model(part, tmp_path / "m.pgs")
    resumed = load_model(tmp_path / "m.pgs")
    assert (resumed.forget, resumed.p) == (0.99, 1.5)
    resumed.partial_fit(X[2500:], y[2500:])
    assert resumed.eta_ == whole.eta_ in (8.0, 32.0, 128.0)
    assert resumed.sigma_ == whole.sigma_
    np.testing.assert_array_equal(resumed.coef_, whole.coef_)
    alone = PGSClassifier(eta=whole.eta_, **params).partial_fit(X, y, classes=[-1, 1])
    assert alone.sigma_ == whole.sigma_
    np.testing.assert_array_equal(alone.coef_, whole.coef_)


def test_at_p_below_2_forgetting_recovers_from_a_flipped_concept():
    """p = 1.5, sigma 1e-4: after the concept flips half-way the model that forgets has
    a lower progressive log loss over the second half than the one that does not: eta
    8, 0.586 (forget 0.99) against 0.658; eta 32, 0.469 (0.999) against 0.532 (at 0.99
    eta 32's steps are too long for its memory of 100 steps: 0.585, not asserted)."""
    X, y = drift_stream()
    for eta, forget in ((8.0, 0.99), (32.0, 0.999)):
        fixed = dict(ADAPTIVE, p=1.5, sigma=1e-4, eta=eta)
        keep = second_half_loss(PGSClassifier(**fixed), X, y, 3000)
        got = second_half_loss(PGSClassifier(forget=forget, **fixed), X, y, 3000)
        assert got < 0.95 * keep, (eta, forget, got, keep)
