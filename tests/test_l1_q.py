"""l1 with p < 2 in PGS (docs/design/l1.md, "p < 2"): the last iterate of composite dual
averaging, its mirror map's scale N(thr) = sum_j (|lambda_j| - thr)_+^q kept by an expansion
about a reference threshold with exact recounts (onlinepgs/_core/_l1q.pxd)."""
import copy

import numpy as np
import pytest
import scipy.sparse as sp

from onlinepgs import PGSClassifier, duality_gap, load_model, save_model
from onlinepgs._core import PGSState
from onlinepgs.pgs import PGSClassifierLearner

import reference
from core_probes import l1q_norm_sum
from test_l1 import np_objective, problem, scipy_optimum

TOL = 1e-6  # the state's default l1q_tol: its estimate of N within 2 TOL, relative


def composite_dual_averaging(X, y, p, sigma, l1, radius, batch_size=1):
    """PGS's steps with the l1 term, transcribed: lambda -= the batch's mean gradient at
    w, w = grad r_S*(soft(lambda / ((t+1) sigma), l1 / sigma)) with N counted in full."""
    lam, w = np.zeros(X.shape[1]), np.zeros(X.shape[1])
    for t, start in enumerate(range(0, X.shape[0], batch_size), start=1):
        rows = slice(start, start + batch_size)
        d = reference.loss_derivative("logistic", X[rows] @ w, y[rows])
        lam -= X[rows].T @ d / len(d)
        theta = lam / ((t + 1) * sigma)
        w = reference.grad_rstar(np.sign(theta) * np.maximum(np.abs(theta) - l1 / sigma, 0),
                                 p, radius)
    return w, lam, t


@pytest.mark.parametrize("batch_size", [1, 5])
@pytest.mark.parametrize("p, radius", [(1.5, None), (1.2, None), (1.5, 0.5), (1.2, 0.5),
                                       (2.0, None)])
def test_the_last_iterate_is_composite_dual_averaging(p, radius, batch_size):
    """coef_ and intercept_ are the transcription's last iterate within the documented
    bound (exactly at p = 2, which checks the transcription), with the same zeros."""
    X, y = problem(m=150, n=8)
    sigma, l1 = 0.05, 0.02
    clf = PGSClassifierLearner(sigma=sigma, l1=l1, p=p, radius=radius, iterate="last",
                               batch_size=batch_size, shuffle=False)
    clf.partial_fit(X, y, classes=[-1.0, 1.0])
    Xa = np.hstack([np.ones((X.shape[0], 1)), X])
    expected, lam, _ = composite_dual_averaging(Xa, y, p, sigma, l1, radius, batch_size)
    got = np.concatenate([clf.intercept_, clf.coef_.ravel()])
    # an iterate off by a relative ~TOL moves the later gradients by as much
    np.testing.assert_allclose(got, expected, rtol=1e-9 if p == 2 else 20 * TOL, atol=1e-12)
    np.testing.assert_array_equal(got == 0, expected == 0)
    assert 0 < np.sum(expected == 0) < expected.size
    if radius is not None:
        assert np.sum(np.abs(got) ** p) ** (1 / p) <= radius * (1 + 1e-12)


@pytest.mark.parametrize("p", [1.5, 1.2])
def test_zeros_exactly_where_lambda_is_below_the_threshold(p):
    """Weight j is exactly 0 iff |lambda_j| <= thr = (t + 1) l1 (lambda's units), and has
    lambda_j's sign otherwise."""
    rng = np.random.RandomState(0)
    X = sp.random(300, 200, density=0.05, random_state=rng, format="csr")
    y = np.where(X @ rng.randn(200) > 0, 1, 0)
    clf = PGSClassifier(sigma=0.01, l1=0.002, p=p, radius=None, iterate="last",
                        max_epochs=3, random_state=0).fit(X, y)
    state = clf._state
    lam = np.asarray(state.lam_a)[:, 0]
    w = np.asarray(state.weights("last"))[:, 0]
    above = np.abs(lam) > state.l1_thr
    assert state.l1_thr == pytest.approx((state.t + 1) * 0.002)
    assert 0 < above.sum() < above.size
    np.testing.assert_array_equal(w != 0, above)
    assert np.all(np.sign(w[above]) == np.sign(lam[above]))


@pytest.mark.parametrize("radius", [None, 0.5])
@pytest.mark.parametrize("p", [1.5, 1.2])
def test_the_estimate_of_n_stays_within_its_bound_at_every_step(p, radius):
    """Row by row, the state's N(thr) against the exact sum: never below it (an upper
    bound) and within 2 TOL relative (in practice far closer: a third-order remainder)."""
    X, y = problem(m=400, n=8, seed=1)
    clf = PGSClassifierLearner(sigma=0.02, l1=0.01, p=p, radius=radius, iterate="last",
                               shuffle=False)
    worst = 0.0
    for i in range(X.shape[0]):
        clf.partial_fit(X[i:i + 1], y[i:i + 1], classes=[-1.0, 1.0])
        st = clf._state
        est, exact = l1q_norm_sum(st, 0), l1q_norm_sum(st, 0, exact=True)
        if exact > 0:
            err = (est - exact) / exact
            worst = max(worst, abs(err))
            assert err >= -1e-12
    assert 0 < worst <= 2 * TOL * (1 + 1e-6)
    assert st.n_l1q_recounts < st.t


def test_recounts_grow_like_log_t():
    """On a long stream whose active weights settle, the exact recounts of N between
    T/2 and T stay about as many as between T/4 and T/2 (a recount lasts a fixed fraction
    of t): O(log T) of them, not O(T)."""
    rng = np.random.RandomState(0)
    n = 30
    X = sp.random(32000, n, density=0.2, random_state=rng, format="csr")
    y = np.where(X @ np.where(np.arange(n) < 6, 3.0, 0.0) + 0.3 * rng.randn(32000) > 0.5,
                 1.0, -1.0)
    clf = PGSClassifierLearner(sigma=1e-3, l1=1e-3, p=1.5, radius=None, iterate="last",
                               shuffle=False)
    counts = {}
    start = 0
    for stop in (4000, 8000, 16000, 32000):
        clf.partial_fit(X[start:stop], y[start:stop], classes=[-1.0, 1.0])
        counts[stop] = clf._state.n_l1q_recounts
        start = stop
    late, mid = counts[32000] - counts[16000], counts[16000] - counts[8000]
    assert counts[32000] < 0.05 * 32000
    assert late <= 1.5 * mid + 10
    assert np.sum(clf.coef_ != 0) < n  # sparse


@pytest.mark.parametrize("p, radius", [(1.5, None), (1.2, None), (1.5, 0.6), (1.2, 0.6)])
def test_the_certificate_of_a_long_run_is_small(p, radius):
    """gap >= P(w) - P(w*) >= 0 against scipy's optimum of the same objective, and small."""
    X, y = problem(m=200)
    sigma, l1 = 0.05, 0.03
    clf = PGSClassifier(sigma=sigma, l1=l1, p=p, radius=radius, fit_intercept=False,
                        iterate="last", max_epochs=300, random_state=0).fit(X, y)
    cert = duality_gap(clf, X, y)
    _, p_star = scipy_optimum(X, y, "logistic", p, sigma, l1, radius)
    assert cert.primal == pytest.approx(
        np_objective(clf.coef_.ravel(), X, y, "logistic", p, sigma, l1, radius), rel=1e-10)
    assert -1e-8 <= cert.primal - p_star <= cert.gap + 1e-9
    assert cert.gap < 1e-3


def test_save_load_resumes_and_sigma_auto_races(tmp_path):
    """A model file of an l1, p < 2 state resumes bit for bit: the two halves with a save
    and load between end where one run ends (the file keeps N's sums as the running state
    estimates them); sigma="auto" (the race, with_sigma) trains with it."""
    rng = np.random.RandomState(0)
    X = sp.random(2000, 300, density=0.03, random_state=rng, format="csr")
    y = np.where(X @ np.where(rng.rand(300) < 0.1, rng.randn(300), 0) > 0, 1, 0)
    kw = dict(sigma=0.01, l1=1e-3, p=1.5, iterate="last", random_state=0)
    whole = PGSClassifier(**kw)
    whole.partial_fit(X, y, classes=[0, 1])
    half = PGSClassifier(**kw)
    half.partial_fit(X[:1000], y[:1000], classes=[0, 1])
    save_model(half, tmp_path / "m.pgs")
    back = load_model(tmp_path / "m.pgs")
    np.testing.assert_array_equal(back.decision_function(X), half.decision_function(X))
    back.partial_fit(X[1000:], y[1000:])
    np.testing.assert_array_equal(back.coef_, whole.coef_)
    np.testing.assert_array_equal(back._state.to_dict()["l1q_a"],
                                  whole._state.to_dict()["l1q_a"])
    auto = PGSClassifier(l1=1e-3, p=1.5, iterate="last", random_state=0, max_epochs=2)
    auto.fit(X, y)
    assert auto.sigma_path_
    assert 0 < np.sum(auto.coef_ != 0) < 0.5 * auto.coef_.size


@pytest.mark.parametrize("kwargs, match", [
    (dict(iterate="weighted2"), "keeps only the last iterate, not iterate='weighted2'; use "
                                "iterate='last'"),
    (dict(iterate="average"), "use iterate='last'"),
    (dict(iterate="random"), "use iterate='last'"),
    (dict(forget=0.99, iterate="last"), "use forget=1"),
])
def test_the_remaining_refusals(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PGSState(l1=0.1, p=1.5, **kwargs)
    with pytest.raises(ValueError, match=match):
        PGSClassifier(l1=0.1, p=1.5, sigma=0.1, **kwargs).fit(*problem(m=20))


@pytest.mark.parametrize("kw", [dict(p=1.5, sigma=0.01), dict(p=1.2, sigma=0.01, radius=0.7),
                                dict(p=1.5, sigma="auto"), dict(p=1.01, sigma=0.1)])
@pytest.mark.parametrize("multiclass", [False, True])
def test_a_copy_and_a_file_continue_bit_for_bit(tmp_path, kw, multiclass):
    """The state's copy (a race's fork keeps it too) and a model file carry N's sums as
    they ran: continuing either gives the uninterrupted run's state, every array equal."""
    rng = np.random.RandomState(3)
    X = sp.random(1500, 120, density=0.05, random_state=rng, format="csr")
    y = np.asarray(X @ rng.randn(120) > 0, dtype=int) + (2 * (rng.rand(1500) < 0.3)
                                                         if multiclass else 0)
    args = dict(l1=2e-4, iterate="last", random_state=0, **kw)
    whole = PGSClassifier(**args).partial_fit(X, y, classes=np.unique(y))
    half = PGSClassifier(**args).partial_fit(X[:700], y[:700], classes=np.unique(y))
    save_model(half, tmp_path / "m.pgs")
    back = load_model(tmp_path / "m.pgs")
    back.partial_fit(X[700:], y[700:])
    twin = copy.deepcopy(half)  # the state's copy (to_dict, from_dict)
    twin.partial_fit(X[700:], y[700:])
    np.testing.assert_array_equal(twin.coef_, whole.coef_)
    np.testing.assert_array_equal(back.coef_, whole.coef_)
    np.testing.assert_array_equal(back.intercept_, whole.intercept_)
    a, b = whole._state.to_dict(), back._state.to_dict()
    for key in ("block_a", "s_a", "l1q_a"):
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@pytest.mark.parametrize("p", [1.005, 1.001])
def test_near_p_1_the_powers_stay_in_range(p):
    """Near p = 1, q - 1 = 1 / (p - 1) is 200-1000: (|lambda_j| - thr)^(q-1) overflows once
    the active part passes ~34 (p = 1.005), which a9a's rows reach by the 140th step at
    sigma = 1. In the scale's units (_l1q.pxd) the iterate is the transcription's, nothing
    diverges, and sigma="auto" races to the end."""
    X, y = problem(m=300, n=6, seed=2)
    X = X * 4.0  # active parts of lambda of tens within the 300 steps
    sigma, l1 = 1.0, 1e-3
    clf = PGSClassifierLearner(sigma=sigma, l1=l1, p=p, radius=None, iterate="last",
                               shuffle=False)
    clf.partial_fit(X, y, classes=[-1.0, 1.0])
    Xa = np.hstack([np.ones((X.shape[0], 1)), X])
    expected, lam, t = composite_dual_averaging(Xa, y, p, sigma, l1, None)
    assert np.max(np.abs(lam)) - (t + 1) * l1 > 40  # where the unscaled powers overflow
    got = np.concatenate([clf.intercept_, clf.coef_.ravel()])
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-12)
    auto = PGSClassifier(l1=l1, p=p, iterate="last", random_state=0).fit(X, y)
    assert np.isfinite(auto.coef_).all() and auto.sigma_path_


@pytest.mark.parametrize("options", [["--p", "1.001", "--iterate", "last"],
                                     ["--p", "1.005", "--iterate", "last", "--sigma", "1"]])
def test_the_command_trains_near_p_1_with_l1(tmp_path, capsys, options):
    """`train --l1` near p = 1 on the shipped a9a: sigma="auto" raced to the end (its
    runs' powers overflowed: a KeyError traceback of the emptied race), sigma = 1 without
    a false "training diverged" at line 141; the model is finite and sparse."""
    from onlinepgs.cli import main
    from onlinepgs.datasets import a9a_path

    model = tmp_path / "m.pgs"
    assert main(["train", str(a9a_path("train")), "-o", str(model), "--quiet", "--l1",
                 "1e-4", *options]) == 0, capsys.readouterr().err
    clf = load_model(model)
    assert np.isfinite(clf.coef_).all() and 0 < np.sum(clf.coef_ != 0) < clf.coef_.size
