"""l1 in the adaptive geometry at p < 2: v = grad r*(soft(-U, l1 t) / D_t), the l_q map of
the soft threshold with N(thr) kept by the global geometry's expansion and recounts
(onlinepgs/_core/_adaptive.pxd: `margins_adq_l1`, `step_adq_l1`, `batch_adq_l1`,
`adq_scales`; _l1q.pxd), compiled and lazy, against the eager NumPy transcription
`reference_adaptive` (tests/reference.py, every coordinate every step); its exact zeros,
the recounts, the race of eta and the command (docs/design/adaptive.md, "l1 at p < 2").
Copies, chunks, model files, scale invariance and the certificate with l1: the tests of
p < 2 in tests/test_adaptive_lp.py, each with l1 on and off."""
import subprocess
import sys

import numpy as np
import pytest

from onlinepgs import PGSClassifier, load_model
from onlinepgs._options import OptionError
from reference import reference_adaptive
from test_adaptive import write_svm
from test_adaptive_core import fresh, run, stream, with_intercept
from test_adaptive_lp import L1, _race_data

P_VALUES = [1.2, 1.5, 1.8]
TOL = 1e-6  # the state's default l1q_tol: N(thr)'s estimate within 2 TOL, relative


def exact(state):
    """The state with N(thr) counted exactly after every step (l1q_tol 0): the estimate's
    error out of the way, the iterate is the transcription's to rounding."""
    state.l1q_tol = 0.0
    return state


def follow(X, target, sw, *, classifier, dense, batch_size=1, labels=None, tol=None,
           **kw):
    """The compiled weights (scaled: times the scales of the rows so far) after each of
    the first 20 steps, every 7th and the last, against the transcription's iterate:
    within 1e-12 of the largest (N counted exactly: `exact`) or the estimate's bound
    (`tol`); the same zeros; the progressive loss likewise."""
    m, n = X.shape
    Xi = with_intercept(X)
    its, stats = reference_adaptive(Xi, target, sample_weight=sw, batch_size=batch_size,
                                    labels=labels, **kw)
    state = fresh(n, batch_size=batch_size, **kw)
    if tol is None:
        exact(state)
    final = stats["scales"][:, None]
    rel = 1e-12 if tol is None else tol
    for k, start in enumerate(range(0, m, batch_size)):
        rows = list(range(start, min(start + batch_size, m)))
        run(state, X, target, sw, rows, classifier, dense)
        if k < 20 or k % 7 == 0 or rows[-1] == m - 1:
            now = np.max(np.abs(Xi[:rows[-1] + 1]), axis=0)[:, None]
            want = its[k] * final
            got = state.weights().reshape(want.shape) * now
            np.testing.assert_allclose(got, want, rtol=0,
                                       atol=rel * max(np.max(np.abs(want)), 1e-300))
            np.testing.assert_array_equal(got == 0, want == 0)
    assert (state.stats_dict()["progressive_loss"]
            == pytest.approx(stats["progressive_loss"], rel=rel))
    return state, its[-1]


@pytest.mark.parametrize("p", P_VALUES)
@pytest.mark.parametrize("radius", [None, 1.0])
@pytest.mark.parametrize("dense", [False, True])
@pytest.mark.parametrize("batch_size", [1, 4])
def test_l1_at_p_below_2_follows_the_transcription_row_by_row(p, radius, dense, batch_size):
    """300 rows whose columns span 1e-3..1e3 (scales growing late), importance weights in
    [0.5, 2]: every step's iterate is the transcription's to 1e-12, with its zeros; on
    the ball ||S w||_p <= 1 (binding: checked); and the final model holds zeros and
    non-zeros both."""
    X, y, _, _, sw = stream(m=300, seed=4)
    state, last = follow(X, y, sw, classifier=True, dense=dense, batch_size=batch_size, p=p,
                         sigma=1e-3, loss="logistic", eta=16.0, centered=False,
                         radius=radius, l1=L1)
    assert 0 < np.sum(last == 0) < last.size - 1
    v = state.weights()[:, 0] * np.max(np.abs(with_intercept(X)), axis=0)
    if radius is not None:
        assert np.sum(np.abs(v) ** p) ** (1 / p) == pytest.approx(radius, rel=1e-9)


@pytest.mark.parametrize("p", [1.2, 1.5])
@pytest.mark.parametrize("loss", ["squared", "hinge"])
def test_the_default_estimate_of_n_keeps_the_iterate_within_its_bound(p, loss):
    """With the state's default tolerance (N(thr) estimated, counted again only when its
    bound passes 1e-6) the iterate stays within 20 TOL of the transcription's (an
    iterate off by ~TOL moves the later gradients by as much, as in the global
    geometry's tests/test_l1_q.py) with the same zeros."""
    X, y, _, score, sw = stream(m=300, seed=6)
    classifier = loss != "squared"
    follow(X, y if classifier else score, sw, classifier=classifier, dense=False,
           tol=20 * TOL, p=p, sigma=1e-3, loss=loss, eta=16.0, centered=False, radius=None,
           l1=L1)


def test_the_recounts_of_n_become_rare_on_a_long_stream():
    """A recount lasts a fixed fraction of t (the sums grow like t, the threshold's move
    a step is l1): over 32,000 rows those between T/2 and T are about as many as between
    T/4 and T/2, and all of them a few percent of the steps, not one a step."""
    import scipy.sparse as sp
    rng = np.random.RandomState(0)
    n = 30
    X = sp.random(32000, n, density=0.2, random_state=rng, format="csr")
    score = X @ np.where(np.arange(n) < 6, 3.0, 0.0) + 0.3 * rng.randn(32000)
    y = np.where(score > 0.5, 1.0, -1.0)
    X = (X @ sp.diags(10.0 ** rng.uniform(-3, 3, n))).tocsr()  # columns in their own units
    state = fresh(n, p=1.5, sigma=1e-4, eta=32.0, l1=1e-3)
    counts, start = {}, 0
    for stop in (4000, 8000, 16000, 32000):
        rows = np.arange(start, stop)
        state.run(X.data, X.indices, X.indptr.astype(np.int64), n, y, np.ones(32000),
                  rows, True)
        counts[stop] = state.n_l1q_recounts
        start = stop
    late, mid = counts[32000] - counts[16000], counts[16000] - counts[8000]
    assert counts[32000] < 0.05 * 32000
    assert late <= 1.5 * mid + 10
    assert 0 < np.sum(state.weights() == 0) < n + 1


@pytest.mark.parametrize("p", P_VALUES)
@pytest.mark.parametrize("batch_size", [1, 3])
def test_one_vs_rest_problems_with_l1_follow_the_transcription(p, batch_size):
    """Three classes, each problem its own L, threshold sums and factor over shared
    scales, on the ball and off: every column to 1e-12 with its zeros, the mistakes."""
    X, _, labels, _, sw = stream(m=240, seed=5)
    Y = np.where(labels[:, None] == np.arange(3)[None, :], 1.0, -1.0)
    for radius in (None, 5.0):
        kw = dict(p=p, sigma=1e-4, loss="logistic", eta=8.0, delta=0.5, centered=False,
                  radius=radius, l1=L1)
        its, stats = reference_adaptive(with_intercept(X), Y, sample_weight=sw,
                                        labels=labels, batch_size=batch_size, **kw)
        state = exact(fresh(X.shape[1], n_problems=3, multiclass=True,
                            batch_size=batch_size, **kw))
        run(state, X, labels, sw, range(len(labels)))
        want = its[-1]
        np.testing.assert_allclose(state.weights(), want, rtol=0,
                                   atol=1e-12 * np.max(np.abs(want)))
        np.testing.assert_array_equal(state.weights() == 0, want == 0)
        assert 0 < np.sum(want == 0)
        assert state.n_mistakes == stats["progressive_mistakes"]


@pytest.mark.parametrize("p", [1.2, 1.5])
def test_a_weight_is_zero_exactly_where_its_sum_is_within_l1_t(p):
    """w_j = 0 exactly iff |U_j| <= l1 t (the intercept's too), with -U_j's sign
    otherwise: the threshold is l1 t in the sums' units, t the steps taken."""
    X, y, _, _, sw = stream(m=400, seed=7)
    state = fresh(X.shape[1], p=p, sigma=1e-3, eta=16.0, l1=L1)
    run(state, X, y, sw, range(len(y)))
    lam = np.asarray(state.lam_a)[:, 0]
    w = state.weights()[:, 0]
    assert state.l1_thr == L1 * state.t
    above = np.abs(lam) > L1 * state.t
    assert 0 < above.sum() < above.size
    np.testing.assert_array_equal(w != 0, above)
    assert np.all(np.sign(w[above]) == np.sign(lam[above]))


def test_the_eta_race_with_l1_at_p_below_2_keeps_its_rate_alone():
    """eta="auto" with l1 at p = 1.5: the kept family (its own sigma race) equals the
    learner of that eta alone, bit for bit, sigma_ too; the race ran p < 2's grid."""
    X, y = _race_data(m=6000, n=20, seed=13)
    params = dict(geometry="adaptive", iterate="last", p=1.5, radius=None, l1=1e-3,
                  random_state=0)
    raced = PGSClassifier(eta="auto", **params).partial_fit(X, y, classes=[-1, 1])
    assert raced.eta_ in (8.0, 32.0, 128.0)
    alone = PGSClassifier(eta=raced.eta_, **params).partial_fit(X, y, classes=[-1, 1])
    assert raced.sigma_ == alone.sigma_
    np.testing.assert_array_equal(raced.coef_, alone.coef_)
    np.testing.assert_array_equal(raced.intercept_, alone.intercept_)
    assert 0 < np.sum(raced.coef_ == 0)


def test_the_command_trains_l1_at_p_below_2_and_refuses_what_stays_refused(tmp_path):
    """train --geometry adaptive --p 1.5 --l1: the model file's weights are the
    estimator's on the same rows, zeros included; l1 at p < 2 with forgetting or an
    average stays refused (as in the global geometry), before any row is read."""
    X, y = _race_data(m=500, n=8, seed=11)
    data = write_svm(tmp_path / "rows.svm", X, y)
    done = subprocess.run([sys.executable, "-m", "onlinepgs.cli", "train", str(data),
                           "--geometry", "adaptive", "--p", "1.5", "--sigma", "1e-4",
                           "--eta", "32", "--l1", "0.01", "-o", str(tmp_path / "m.pgs"),
                           "--quiet"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    model = load_model(tmp_path / "m.pgs")
    ours = PGSClassifier(geometry="adaptive", iterate="last", p=1.5, sigma=1e-4, eta=32.0,
                         l1=0.01, radius=None, max_epochs=1, shuffle=False)
    ours.partial_fit(X, y, classes=[-1, 1])
    np.testing.assert_allclose(model.coef_, ours.coef_, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(model.coef_ == 0, ours.coef_ == 0)
    assert 0 < np.sum(ours.coef_ == 0)
    with pytest.raises(OptionError, match="l1=0.01.* with p=1.5 < 2 does not support"):
        fresh(3, p=1.5, l1=0.01, forget=0.99)
    with pytest.raises(OptionError, match="keeps only the last iterate"):
        fresh(3, p=1.5, l1=0.01, iterate="weighted2")
    bad = subprocess.run([sys.executable, "-m", "onlinepgs.cli", "train", str(tmp_path / "none"),
                          "--geometry", "adaptive", "--p", "1.5", "--l1", "0.01",
                          "--forget", "0.99", "-o", str(tmp_path / "x.pgs")],
                         capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "--l1" in bad.stderr and "--forget" in bad.stderr
