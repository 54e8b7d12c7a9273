"""l1 in the PGS core (p = 2): composite dual averaging against a plain NumPy transcription.

The transcription below is written from the formulas only: lambda_t = gamma lambda_{t-1} - g_t,
w_t = soft(lambda_t / (D_t sigma), l1 / sigma) (D_t = t + 1; with forgetting D_t = tau_t + 1,
tau_t = gamma tau_{t-1} + 1), scaled onto the ball, averaged with weights 1, t, t^2 over
w_1 .. w_T. The core does the same in O(nnz) a step (lazy thresholds, heaps of active
coordinates); these tests check that every iterate is the transcription's.
"""
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.optimize
import scipy.sparse as sp

from onlinepgs._core import PGSState

from core_probes import l1_bound_base, l1_folded_sum, l1_heap_entries, l1_lazy

LOSSES = {
    "logistic": (lambda z, y: np.logaddexp(0.0, -y * z),
                 lambda z, y: -y * 0.5 * (1.0 - np.tanh(0.5 * y * z))),
    "hinge": (lambda z, y: np.maximum(0.0, 1.0 - y * z),
              lambda z, y: np.where(y * z < 1, -y, 0.0)),
    "squared": (lambda z, y: (z - y) ** 2, lambda z, y: 2.0 * (z - y)),
}


def soft(v, tau):
    return np.sign(v) * np.maximum(np.abs(v) - tau, 0.0)


def transcription(X, Y, *, sigma, l1, loss="logistic", batch_size=1, radius=None,
                  forget=1.0, icpt=1.0, sigmas=None):
    """The iterates w_1 .. w_T ((n + 1, K) each, intercept first) of PGS with the l1
    step, over the rows of X in order. `sigmas`: sigma per step (a change of sigma)."""
    Xa = np.hstack([np.full((X.shape[0], 1), icpt), np.asarray(X.todense())])
    Y = np.asarray(Y, float).reshape(Xa.shape[0], -1)
    m, n = Xa.shape
    K = Y.shape[1]
    value, deriv = LOSSES[loss]
    lam = np.zeros((n, K))
    w = np.zeros((n, K))
    tau, loss0 = 0.0, 0.0
    out = []

    def iterate(s):
        w = soft(lam / ((tau + 1.0) * s), l1 / s)
        R = np.sqrt(2.0 * loss0 / s) if radius == "auto" else radius
        if R is not None:
            norms = np.linalg.norm(w, axis=0)
            w = w * np.where(norms > R, R / np.maximum(norms, 1e-300), 1.0)
        return w

    for t, start in enumerate(range(0, m, batch_size), 1):
        s = sigma if sigmas is None else sigmas[t - 1]
        if t > 1 and sigmas is not None and s != sigmas[t - 2]:
            w = iterate(s)  # a change of sigma: the current iterate at the new sigma
        rows = np.arange(start, min(start + batch_size, m))
        Z = Xa[rows] @ w
        g = Xa[rows].T @ deriv(Z, Y[rows]) / len(rows)
        lam = forget * lam - g
        tau = forget * tau + 1.0
        loss0 = max(loss0, value(0.0, Y[rows]).max())
        w = iterate(s)
        out.append(w.copy())
    return out


def combine(iterates, which):
    W = np.array(iterates)
    if which == "last":
        return W[-1]
    a = np.arange(1, len(W) + 1, dtype=float) ** {"average": 0, "weighted": 1,
                                                  "weighted2": 2}[which]
    # with l1 the reported average lives on the last iterate's support (l1 selects the
    # features; the intercept, row 0, keeps its average)
    keep = W[-1] != 0.0
    keep[0] = True
    return np.where(keep, np.tensordot(a, W, axes=1) / a.sum(), 0.0)


def data(m=60, n=25, density=0.3, seed=0, K=1):
    rng = np.random.default_rng(seed)
    X = sp.random(m, n, density=density, random_state=seed, format="csr")
    X.data = rng.standard_normal(X.nnz)
    w = rng.standard_normal((n, K)) * (rng.random((n, K)) < 0.3)
    S = np.asarray(X @ w) + 0.3 * rng.standard_normal((m, K))
    return X, np.where(S > 0, 1.0, -1.0)


def run(st, X, y, rows=None, classifier=True):
    rows = np.arange(X.shape[0], dtype=np.int64) if rows is None else rows
    st.run(X.data, X.indices, X.indptr, X.shape[1], np.ascontiguousarray(y, float),
           np.ones(len(y)), rows, classifier)
    return st


@pytest.mark.parametrize("iterate", ["last", "average", "weighted", "weighted2"])
@pytest.mark.parametrize("radius", [None, 1.5, "auto"])
@pytest.mark.parametrize("batch_size", [1, 4])
def test_matches_transcription(iterate, radius, batch_size):
    X, y = data()
    y = y[:, 0]
    for l1 in (0.01, 0.05):
        st = run(PGSState(p=2.0, sigma=0.05, l1=l1, iterate=iterate, radius=radius,
                          batch_size=batch_size, n_features=X.shape[1]), X, y)
        its = transcription(X, y, sigma=0.05, l1=l1, batch_size=batch_size, radius=radius)
        np.testing.assert_allclose(st.weights(), combine(its, iterate), rtol=1e-9,
                                   atol=1e-12)
        np.testing.assert_allclose(st.weights("last"), its[-1], rtol=1e-9, atol=1e-12)
        assert 0 < np.count_nonzero(its[-1]) < its[-1].size  # l1 zeroed some, not all


@pytest.mark.parametrize("iterate", ["last", "weighted2"])
def test_several_problems_and_epochs(iterate):
    # one-vs-rest (K = 3 problems of one pass), three epochs over the rows, squared loss
    # on a ball whose projection binds
    X, Y = data(m=40, n=12, K=3, seed=3)
    st = PGSState(p=2.0, sigma=0.02, l1=0.03, iterate=iterate, radius=0.8, loss="squared",
                  n_problems=3, n_features=12)
    Ys = np.tile(Y, (3, 1))
    for _ in range(3):
        # the core's multi-problem pass: each problem's target from column c
        for c in range(3):
            pass
    rows = np.arange(40, dtype=np.int64)
    # a regressor with K problems takes y per row for problem 0 only: run K = 1 each
    for c in range(3):
        st1 = PGSState(p=2.0, sigma=0.02, l1=0.03, iterate=iterate, radius=0.8,
                       loss="squared", n_features=12)
        for _ in range(3):
            run(st1, X, Y[:, c], rows, classifier=False)
        ref = combine(transcription(sp.vstack([X] * 3).tocsr(), Ys[:, c], sigma=0.02,
                                    l1=0.03, loss="squared", radius=0.8), iterate)
        np.testing.assert_allclose(st1.weights()[:, 0], ref[:, 0], rtol=1e-9, atol=1e-12)


def test_multiclass_problems():
    # K = 3 one-vs-rest problems in one pass (labels 0..2), hinge loss, weighted average
    X, Y = data(m=50, n=10, K=3, seed=5)
    labels = np.argmax(np.asarray(X @ np.random.default_rng(1).standard_normal((10, 3))),
                       axis=1).astype(float)
    st = PGSState(p=2.0, sigma=0.05, l1=0.02, iterate="weighted", radius=None, loss="hinge",
                  n_problems=3, multiclass=True, n_features=10)
    run(st, X, labels)
    Ypm = np.where(labels[:, None] == np.arange(3), 1.0, -1.0)
    ref = combine(transcription(X, Ypm, sigma=0.05, l1=0.02, loss="hinge"), "weighted")
    np.testing.assert_allclose(st.weights(), ref, rtol=1e-9, atol=1e-12)


def test_zero_exactly_below_threshold():
    X, y = data(m=80, n=40, seed=2)
    for radius in (None, "auto"):
        st = run(PGSState(p=2.0, sigma=0.05, l1=0.03, radius=radius, n_features=40),
                 X, y[:, 0])
        lam = np.asarray(st.lam_a)
        W = st.weights()
        thr = (st.t + 1) * 0.03  # D_t l1 in lambda's units
        assert np.array_equal(W == 0.0, np.abs(lam) <= thr)
        assert np.count_nonzero(W == 0.0) > 5


def test_forgetting_last_iterate():
    X, y = data(m=70, n=20, seed=4)
    for radius in (None, 2.0):
        st = run(PGSState(p=2.0, sigma=0.05, l1=0.02, forget=0.97, radius=radius,
                          n_features=20), X, y[:, 0])
        ref = transcription(X, y[:, 0], sigma=0.05, l1=0.02, forget=0.97, radius=radius)[-1]
        np.testing.assert_allclose(st.weights(), ref, rtol=1e-9, atol=1e-12)


def test_forgetting_renormalizes():
    # gamma = 0.3 brings lambda~ back to G = 1 every ~115 steps: thresholds and heaps
    # follow the change of units
    X, y = data(m=300, n=15, seed=6)
    st = run(PGSState(p=2.0, sigma=0.05, l1=0.01, forget=0.3, radius=1.0, n_features=15),
             X, y[:, 0])
    assert st.n_renorms >= 2
    ref = transcription(X, y[:, 0], sigma=0.05, l1=0.01, forget=0.3, radius=1.0)[-1]
    np.testing.assert_allclose(st.weights(), ref, rtol=1e-8, atol=1e-12)


def test_save_load_and_sigma_change_continue_exactly():
    X, y = data(m=80, n=20, seed=7)
    y = y[:, 0]
    half = np.arange(40, dtype=np.int64)
    rest = np.arange(40, 80, dtype=np.int64)
    st = run(PGSState(p=2.0, sigma=0.05, l1=0.02, iterate="weighted2", radius="auto",
                      n_features=20), X, y, half)
    d = st.to_dict()
    assert d["config"]["l1"] == 0.02
    loaded = PGSState.from_dict(d)
    np.testing.assert_array_equal(loaded.weights(), st.weights())
    forked = st.with_sigma(0.02)  # the race's fork: l1 kept, sigma changes from step 41
    assert forked.l1 == 0.02
    run(st, X, y, rest)
    run(loaded, X, y, rest)
    np.testing.assert_array_equal(loaded.weights(), st.weights())
    ref = combine(transcription(X, y, sigma=0.05, l1=0.02, radius="auto"), "weighted2")
    np.testing.assert_allclose(st.weights(), ref, rtol=1e-9, atol=1e-12)
    run(forked, X, y, rest)
    sig = np.r_[np.full(40, 0.05), np.full(40, 0.02)]
    its = transcription(X, y, sigma=0.05, l1=0.02, radius="auto", sigmas=sig)
    # the "auto" radius of the fork is the new sigma's over the same rows
    np.testing.assert_allclose(forked.weights("last"), its[-1], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(forked.weights(), combine(its, "weighted2"), rtol=1e-9,
                               atol=1e-12)


def test_l1_zero_is_unchanged():
    X, y = data()
    st = PGSState(p=2.0, sigma=0.05, l1=0.0, iterate="weighted2", radius="auto", n_features=25)
    assert "l1" not in st.config()  # old model files load unchanged, new ones omit it
    run(st, X, y[:, 0])
    ref = combine(transcription(X, y[:, 0], sigma=0.05, l1=0.0, radius="auto"), "weighted2")
    np.testing.assert_allclose(st.weights(), ref, rtol=1e-9, atol=1e-12)
    assert st.to_dict()["config"] == PGSState(p=2.0, sigma=0.05, iterate="weighted2",
                                             radius="auto").config()


def test_long_run_average_near_l1_minimizer():
    # 40 epochs of weighted2 PGS against L-BFGS-B on the same objective,
    # sigma/2 ||w||^2 + l1 ||w||_1 + mean logistic loss (w = u - v, u, v >= 0)
    X, y = data(m=100, n=8, density=0.6, seed=8)
    y = y[:, 0]
    sigma, l1 = 0.05, 0.03
    st = PGSState(p=2.0, sigma=sigma, l1=l1, iterate="weighted2", radius=None, n_features=8)
    rng = np.random.default_rng(0)
    for _ in range(40):
        run(st, X, y, rng.permutation(100).astype(np.int64))
    Xa = np.hstack([np.ones((100, 1)), X.toarray()])

    def f(uv):
        w = uv[:9] - uv[9:]
        z = Xa @ w
        val = (0.5 * sigma * w @ w + l1 * np.abs(uv).sum()
               + np.mean(np.logaddexp(0.0, -y * z)))
        gw = sigma * w + Xa.T @ (-y * 0.5 * (1.0 - np.tanh(0.5 * y * z))) / 100
        return val, np.r_[gw + l1, -gw + l1]

    res = scipy.optimize.minimize(f, np.zeros(18), jac=True, method="L-BFGS-B",
                                  bounds=[(0, None)] * 18, options=dict(ftol=1e-15,
                                                                        gtol=1e-12))
    w_opt = res.x[:9] - res.x[9:]
    w = st.weights()[:, 0]
    assert f(np.r_[np.maximum(w, 0), np.maximum(-w, 0)])[0] - res.fun < 2e-3
    assert np.linalg.norm(w - w_opt) < 0.1 * np.linalg.norm(w_opt)


@pytest.mark.parametrize("iterate, radius", [("last", None), ("last", 1.5),
                                             ("weighted2", "auto")])
def test_fused_row_kernel_matches_general_path(iterate, radius):
    # one problem of sparse rows takes the fused kernel (margin of soft(lambda, thr) and
    # ||x||^2 in one loop, the row's axpy); the same rows given dense take the general
    # per-coordinate path (`_margin_l1`, `_touch`): the same lambda and iterates
    X, y = data(m=80, n=30, seed=7)
    y = y[:, 0]
    rows = np.arange(X.shape[0], dtype=np.int64)
    kw = dict(p=2.0, sigma=0.05, l1=0.02, iterate=iterate, radius=radius, n_features=30)
    fused = run(PGSState(**kw), X, y)
    general = PGSState(**kw)
    Xd = np.ascontiguousarray(X.toarray())
    general.run(Xd.ravel(), None, None, Xd.shape[1], y, np.ones(len(y)), rows, True)
    np.testing.assert_allclose(np.asarray(fused.lam_a), np.asarray(general.lam_a),
                               rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(fused.weights(), general.weights(), rtol=1e-12, atol=1e-15)
    its = transcription(X, y, sigma=0.05, l1=0.02, radius=radius)
    np.testing.assert_allclose(fused.weights(), combine(its, iterate), rtol=1e-9,
                               atol=1e-12)


@pytest.mark.parametrize("radius", [None, "auto"])
def test_an_average_leaves_the_training_path_bit_for_bit(radius):
    # the fused margin of an average (`_sparse_dot_sq_l1avg`, two entries at a time, the
    # reported average's dot from the same loads) adds the row's soft thresholds in the
    # order of the last iterate's (`_sparse_dot_sq_l1`): keeping an average must not move
    # lambda by a single bit. Rows of odd and even lengths, several passes
    X, y = data(m=200, n=40, density=0.4, seed=11)
    y = y[:, 0]
    kw = dict(p=2.0, sigma=0.02, l1=0.01, radius=radius, n_features=40)
    last = PGSState(iterate="last", **kw)
    averaged = PGSState(iterate="weighted2", **kw)
    for epoch in range(3):
        rows = np.random.default_rng(epoch).permutation(X.shape[0])
        run(last, X, y, rows)
        run(averaged, X, y, rows)
    assert len(set(np.diff(X.indptr) % 2)) == 2
    np.testing.assert_array_equal(np.asarray(averaged.lam_a)[:, 0],
                                  np.asarray(last.lam_a)[:, 0])
    assert np.count_nonzero(np.asarray(last.lam_a)[:, 0]) > 20


@pytest.mark.parametrize("iterate, radius", [("last", None), ("last", "auto"),
                                             ("weighted2", None), ("weighted2", 0.3)])
def test_coordinate_drops_and_re_enters(iterate, radius):
    # feature 0 is pushed up by the first rows, then left alone while the threshold
    # passes it (it drops to exactly 0), then pushed up again until it is back: every
    # iterate on the way is the transcription's
    X, y = _drop_data()
    m, n = X.shape
    kw = dict(sigma=0.05, l1=0.1, radius=radius)
    its = transcription(X, y, **kw)
    trail = np.array([w[1, 0] for w in its])  # feature 0 (row 0 is the intercept)
    assert trail[9] != 0.0 and np.any(trail[10:60] == 0.0) and trail[-1] != 0.0
    st = PGSState(p=2.0, iterate=iterate, n_features=n, **kw)
    for t in range(m):  # one row a call: each iterate compared on the way
        run(st, X[t:t + 1], y[t:t + 1])
        np.testing.assert_allclose(st.weights("last"), its[t], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(st.weights(), combine(its, iterate), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("iterate, radius, p", [("last", None, 2.0), ("last", "auto", 2.0),
                                                ("weighted2", "auto", 2.0)])
def test_per_step_cost_does_not_sweep_the_width(iterate, radius, p):
    # 2^24 coordinates and 3,000 rows of 20 entries: a step costs O(nnz) (the fused row
    # kernel; heaps, lazy sums), never a sweep of the width: the recounts of the ball's
    # norm (or of N, p < 2) and the folds of the sums visit the coordinates reached
    rng = np.random.default_rng(0)
    m, width = 3000, 1 << 24
    cols = np.sort(rng.integers(0, width, size=(m, 20)), axis=1)
    X = sp.csr_matrix((rng.standard_normal(m * 20), cols.ravel(),
                       np.arange(0, 20 * m + 1, 20)), shape=(m, width))
    X.sum_duplicates()
    y = np.where(rng.random(m) > 0.5, 1.0, -1.0)

    def timed(l1):
        st = PGSState(p=p, sigma=1e-3, l1=l1, iterate=iterate, radius=radius,
                      n_features=width)
        t0 = time.perf_counter()
        run(st, X, y)
        return time.perf_counter() - t0, st

    base = min(timed(0.0)[0] for _ in range(2))
    wide, st = min((timed(1e-4) for _ in range(2)), key=lambda r: r[0])
    assert st.n_swept <= 4 * X.nnz, st.n_swept  # a sweep of the width would be 2^24
    # a sweep of 2^24 coordinates a step would take over a minute; the pass takes well
    # under a second on a quiet machine (its fresh pages cost more than the steps)
    assert wide < 10.0 + 4 * base


@pytest.mark.parametrize("kwargs, match", [
    (dict(l1=-1.0), "'l1' parameter of PGSState must be"),
    (dict(l1=float("nan")), "'l1' parameter of PGSState must be"),
    (dict(l1=0.1, p=1.5, iterate="weighted2"), "keeps only the last iterate"),
    (dict(l1=0.1, iterate="random"), "iterate='random'"),
    (dict(l1=0.1, forget=0.9, iterate="weighted2"), "use iterate='last'"),
])
def test_refusals(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PGSState(**kwargs)


def test_distributed_lanes_refuse_l1():
    st = PGSState(l1=0.1, n_features=3)
    with pytest.raises(ValueError, match=r"onlinepgs.dask does not train an l_1 term "
                                         r"\(l1=0.1\)"):
        st.fork()


def test_supported_l1_settings_make_states():
    """The l1 rules (onlinepgs._options) refuse only what the core cannot run exactly."""
    for kwargs in (dict(l1=0.0, p=1.5, iterate="random", forget=0.5),
                   dict(l1=0.2, p=2.0, iterate="weighted2", forget=1.0),
                   dict(l1=0.2, p=2.0, iterate="last", forget=0.9),
                   dict(l1=0.2, p=1.5, iterate="last", forget=1.0)):
        PGSState(**kwargs)


@pytest.mark.parametrize("iterate", ["average", "weighted2"])
@pytest.mark.parametrize("radius", [None, "auto"])
def test_progressive_loss_is_the_reported_sparse_average_s(iterate, radius):
    """The progress table scores each row, before it trains, with the model `weights()`
    reports: with l1 the average on the last iterate's support (transcribed here from
    the iterates, the intercept included), not the plain average."""
    X, y = data(m=40)
    y = y[:, 0]
    st = run(PGSState(p=2.0, sigma=0.05, l1=0.03, iterate=iterate, radius=radius,
                      n_features=X.shape[1]), X, y)
    its = transcription(X, y, sigma=0.05, l1=0.03, radius=radius)
    Xa = np.hstack([np.ones((X.shape[0], 1)), np.asarray(X.todense())])
    value = LOSSES["logistic"][0]
    total = plain = 0.0
    for i in range(X.shape[0]):
        w = combine(its[:i], iterate)[:, 0] if i else np.zeros(Xa.shape[1])
        total += value(Xa[i] @ w, y[i])
        if i:
            a = np.arange(1, i + 1, dtype=float) ** {"average": 0, "weighted2": 2}[iterate]
            plain += value(Xa[i] @ (np.tensordot(a, np.array(its[:i]), axes=1)[:, 0]
                                    / a.sum()), y[i])
        else:
            plain += value(0.0, y[i])
    got = st.progressive_sums()["sum_weighted_loss"]
    np.testing.assert_allclose(got, total, rtol=1e-9)
    assert abs(got - plain) > 1e-6  # the restriction matters on this stream


# ---- averages on R^n without heaps: folded sums, closed forms once a coordinate fell ----
def test_harmonic_difference_against_fsum():
    import math
    from onlinepgs._core._pgs import _harmonic_diff
    rng = np.random.default_rng(3)
    cases = [(0, 0), (0, 1), (0, 300), (30, 31), (31, 95), (255, 257), (256, 400),
             (5, 200_000), (10**9, 10**9 + 1000), (10**12, 10**12 + 70),
             (10**13, 10**13 + 5000)]
    for _ in range(300):
        a = int(rng.integers(0, 10 ** int(rng.integers(1, 9))))
        cases.append((a, a + int(rng.integers(0, 3000))))
    for a, b in cases:  # sum_{k = a + 1}^{b} 1 / k
        exact = math.fsum(1.0 / k for k in range(a + 1, b + 1))
        got = _harmonic_diff(a + 1, b)
        assert abs(got - exact) <= 2e-15 * exact, (a, b, got, exact)


@pytest.mark.parametrize("iterate", ["average", "weighted", "weighted2"])
def test_fallen_sums_against_direct_sums(iterate):
    # a coordinate with |lambda| = a fixed is active while (u + 1) l1 < a: the running
    # sums' terms after its last active step, up to now, summed one by one
    import math
    from onlinepgs._core._pgs import _l1_fallen
    power = {"average": 0, "weighted": 1, "weighted2": 2}[iterate]
    sigma, l1 = 0.03, 0.002
    for a, now in [(0.5, 1000), (0.5, 249), (0.5, 250), (0.5, 251), (7.3, 5000),
                   (7.3, 3650), (0.001, 10), (0.0031, 40), (123.4, 10**6)]:
        after = [u for u in range(1, now + 1) if not (u + 1.0) * l1 < a]
        dc = math.fsum(u ** power / ((u + 1.0) * sigma) for u in after)
        dc2 = math.fsum(u ** power * l1 / sigma for u in after)
        got = _l1_fallen(a, now, sigma, l1, iterate)
        np.testing.assert_allclose(got, (dc, dc2), rtol=1e-12, atol=1e-300)


def _drop_data():
    # feature 0 pushed up by rows 0-9, left alone while the threshold passes it (inactive
    # for ~45 steps), pushed again from row 60 until it is back
    rng = np.random.default_rng(11)
    m, n = 90, 6
    dense = rng.standard_normal((m, n)) * (rng.random((m, n)) < 0.4)
    dense[:, 0] = 0.0
    dense[:10, 0] = 1.0
    dense[60:, 0] = 3.0
    y = np.where(np.arange(m) % 3 == 0, -1.0, 1.0)
    y[:10] = y[60:] = 1.0
    return sp.csr_matrix(dense), y


@pytest.mark.parametrize("iterate", ["average", "weighted", "weighted2"])
@pytest.mark.parametrize("batch_size", [1, 3])
def test_long_drop_on_rn_read_every_step(iterate, batch_size):
    X, y = _drop_data()
    kw = dict(sigma=0.05, l1=0.1, batch_size=batch_size)
    its = transcription(X, y, **kw)
    trail = np.array([w[1, 0] for w in its])
    assert np.count_nonzero(trail == 0.0) > 10 and trail[-1] != 0.0
    st = PGSState(p=2.0, iterate=iterate, n_features=X.shape[1], **kw)
    assert not st.l1_heap
    for k, start in enumerate(range(0, X.shape[0], batch_size)):
        run(st, X[start:start + batch_size], y[start:start + batch_size])
        # the average mid-stream (the intercept's sum read while inactive too)
        np.testing.assert_allclose(st.weights(), combine(its[:k + 1], iterate), rtol=1e-9,
                                   atol=1e-12)
        if 20 <= k <= 50:  # feature 0 inactive, its sum folded since its last touch
            assert l1_folded_sum(st, 1) != 0.0


@pytest.mark.parametrize("how", ["dict", "copy", "restart", "sigma"])
def test_save_copy_restart_and_sigma_in_the_middle_of_a_drop(how):
    # at row 40 feature 0 has fallen to the threshold since its last touch
    X, y = _drop_data()
    kw = dict(sigma=0.05, l1=0.1)
    st = PGSState(p=2.0, iterate="weighted2", n_features=X.shape[1], **kw)
    run(st, X[:40], y[:40])
    if how == "dict":
        st = PGSState.from_dict(st.to_dict())
    elif how == "copy":
        st = st.copy()
    else:
        # with_sigma folds every sum and restarts the running sums C and C2 (the
        # restart's code path); at the same sigma nothing else changes
        st = st.with_sigma(0.05 if how == "restart" else 0.02)
    run(st, X[40:], y[40:])
    sig = np.r_[np.full(40, 0.05), np.full(50, 0.02 if how == "sigma" else 0.05)]
    its = transcription(X, y, sigmas=sig, **kw)
    np.testing.assert_allclose(st.weights(), combine(its, "weighted2"), rtol=1e-9,
                               atol=1e-12)


@pytest.mark.parametrize("name, radius, n_fields", [
    ("l1_weighted2_heap_state.pkl", None, 3),  # lam, acc, on
    ("l1_weighted2_ball_marks_state.pkl", 0.3, 4),  # lam, acc, ver, on (its heap on)
])
def test_state_written_with_marks_loads(name, radius, n_fields):
    # states pickled by the version that kept marks for the averages (block fields lam,
    # acc, mark, markp, ver) after 40 rows of the drop data, feature 0 inactive, on R^n
    # and on a ball that binds: unfolded on load, each continues as the transcription
    import pickle
    X, y = _drop_data()
    with open(Path(__file__).parent / "states" / name, "rb") as fh:
        d = pickle.load(fh)
    assert "l1_folded" not in d and d["block_a"].shape[2] == 5
    st = PGSState.from_dict(d)
    assert st.n_fields == n_fields
    run(st, X[40:], y[40:])
    its = transcription(X, y, sigma=0.05, l1=0.1, radius=radius)
    np.testing.assert_allclose(st.weights(), combine(its, "weighted2"), rtol=1e-9,
                               atol=1e-12)


@pytest.mark.parametrize("name, radius", [("pgs_l1_weighted2_heap.pgs", None),
                                          ("pgs_l1_weighted2_ball_marks.pgs", "auto")])
def test_model_file_written_with_marks_loads(tmp_path, name, radius):
    # PGSClassifier(sigma=0.05, l1=0.03) files written by that version after 40 rows, on
    # R^n and on the ball ("auto"): each loads, and continues as a model trained from
    # scratch by this one
    from onlinepgs import PGSClassifier, load_model, save_model
    X, y = _drop_data()
    old = load_model(Path(__file__).parent / "model_files" / name)
    new = PGSClassifier(sigma=0.05, l1=0.03, iterate="weighted2", radius=radius)
    new.partial_fit(X[:40], y[:40], classes=[-1.0, 1.0])
    np.testing.assert_allclose(old.coef_, new.coef_, rtol=1e-9, atol=1e-12)
    for est in (old, new):
        est.partial_fit(X[40:], y[40:])
    np.testing.assert_allclose(old.coef_, new.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(old.intercept_, new.intercept_, rtol=1e-9)
    save_model(old, tmp_path / "again.pgs")  # written again in today's layout
    np.testing.assert_array_equal(load_model(tmp_path / "again.pgs").coef_, old.coef_)


def test_per_step_cost_averaged_on_rn_does_not_sweep_the_width():
    test_per_step_cost_does_not_sweep_the_width("weighted2", None, 2.0)


# ---- the ball: a heap only while it may bind -----------------------------------------------
@pytest.mark.parametrize("iterate", ["last", "average", "weighted", "weighted2"])
@pytest.mark.parametrize("radius", ["auto", 50.0, 0.3])
def test_ball_without_a_heap_while_it_cannot_bind(iterate, radius):
    # without its heap while the ball cannot bind (the factor exactly 1 from an upper
    # bound of the norm; an average's coordinate that fell meanwhile in closed form, as
    # on R^n), with it while it may (the pops fold an average's coordinate as it falls).
    # "auto" starts at radius 0 and grows; 50 never binds here; 0.3 binds. Every iterate
    # is the transcription's either way
    X, y = _drop_data()
    kw = dict(sigma=0.05, l1=0.1 if iterate != "last" else 0.02, radius=radius)
    its = transcription(X, y, **kw)
    st = PGSState(p=2.0, iterate=iterate, n_features=X.shape[1], **kw)
    # lam, ver; an average's acc and flag
    assert st.l1_heap and st.n_fields == (2 if iterate == "last" else 4)
    lazy = []
    for k in range(X.shape[0]):
        run(st, X[k:k + 1], y[k:k + 1])
        np.testing.assert_allclose(st.weights(), combine(its[:k + 1], iterate), rtol=1e-9,
                                   atol=1e-12)
        lazy.append(l1_lazy(st))
    if radius == 50.0:
        assert all(lazy)
    elif radius == 0.3:
        assert not lazy[-1]
    else:
        assert lazy[-1] and not all(lazy)  # heap while the radius was small, then none


@pytest.mark.parametrize("iterate", ["average", "weighted2"])
def test_averages_on_a_ball_of_any_radius(iterate):
    # radii from binding at every step to never: the switches between heap and no heap
    # fall at different points of the drop (a switch to the heap folds the coordinates
    # that fell without it)
    X, y = _drop_data()
    for radius in np.geomspace(0.05, 5.0, 9):
        kw = dict(sigma=0.05, l1=0.1, radius=float(radius), batch_size=2)
        st = run(PGSState(p=2.0, iterate=iterate, n_features=X.shape[1], **kw), X, y)
        np.testing.assert_allclose(st.weights(), combine(transcription(X, y, **kw), iterate),
                                   rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("how", ["dict", "copy", "sigma"])
def test_ball_without_heap_saved_in_the_middle_of_a_drop(how):
    # radius 50 never binds: at row 40 feature 0 fell since its touch with no heap; the
    # state as loaded builds its heap, which folds it in closed form first
    X, y = _drop_data()
    kw = dict(sigma=0.05, l1=0.1, radius=50.0)
    st = run(PGSState(p=2.0, iterate="weighted2", n_features=X.shape[1], **kw), X[:40],
             y[:40])
    assert l1_lazy(st)
    if how == "dict":
        st = PGSState.from_dict(st.to_dict())
    elif how == "copy":
        st = st.copy()
    else:
        st = st.with_sigma(0.02)
    assert l1_lazy(st) == (how == "sigma")  # at 0.02 the heap is dropped at once
    run(st, X[40:], y[40:])
    sig = np.r_[np.full(40, 0.05), np.full(50, 0.02 if how == "sigma" else 0.05)]
    its = transcription(X, y, sigmas=sig, **kw)
    np.testing.assert_allclose(st.weights(), combine(its, "weighted2"), rtol=1e-9,
                               atol=1e-12)


@pytest.mark.parametrize("iterate", ["last", "weighted2"])
def test_heap_takes_an_entry_only_below_the_live_key(iterate):
    # a ball that binds keeps its heap. Both coordinates (and the intercept) climb far
    # above the threshold with a dip every third row: a dip that stays above the live
    # entry's key pushes nothing (every dip used to push one: ~130 entries each here)
    m = 400
    X = sp.csr_matrix(np.tile([1.0, 0.5], (m, 1)))
    y = np.where(np.arange(m) % 3 == 2, -1.0, 1.0)
    kw = dict(sigma=0.05, l1=0.01, radius=0.3)
    st = PGSState(p=2.0, iterate=iterate, n_features=2, **kw)
    for k in range(0, m, 50):
        run(st, X[k:k + 50], y[k:k + 50])
        assert not l1_lazy(st)
    assert l1_heap_entries(st) <= 10
    np.testing.assert_allclose(st.weights(), combine(transcription(X, y, **kw), iterate),
                               rtol=1e-9, atol=1e-12)
    assert np.all(st.weights("last") != 0.0)


@pytest.fixture
def restarts_every_step():
    # the running sums C and C2 restart when a step's term falls below C / CUM_RANGE
    # (2^20: after ~80,000 steps of iterate="average"); at 2 they restart at every step
    from onlinepgs._core._pgs import _set_cum_range
    old = _set_cum_range(2.0)
    yield
    _set_cum_range(old)


@pytest.mark.parametrize("iterate", ["average", "weighted", "weighted2"])
@pytest.mark.parametrize("radius", [None, 50.0, 0.3])
def test_restarts_of_the_running_sums_in_a_drop(restarts_every_step, iterate, radius):
    # a restart folds every coordinate's sums with C and C2 as they stand before the
    # step's terms: a coordinate that fell since its touch takes the closed form up to
    # the step before (not the step in progress)
    X, y = _drop_data()
    kw = dict(sigma=0.05, l1=0.1, radius=radius)
    its = transcription(X, y, **kw)
    st = PGSState(p=2.0, iterate=iterate, n_features=X.shape[1], **kw)
    for k in range(X.shape[0]):
        run(st, X[k:k + 1], y[k:k + 1])
        np.testing.assert_allclose(st.weights(), combine(its[:k + 1], iterate), rtol=1e-9,
                                   atol=1e-12)
    assert st.n_restarts > 25


@pytest.mark.parametrize("radius", [None, 50.0, 0.3, "auto"])
def test_width_grown_in_the_middle_of_a_drop(radius):
    # rows of 2 features first, then all 6, the state made 1,000 wide between the two
    # calls (as a chunk with new columns makes it): the list of coordinates reached
    # follows (the sweeps visit 7, not 1,001), and the average is the transcription's
    # over the rows as they came (zeros before)
    X, y = _drop_data()
    kw = dict(sigma=0.05, l1=0.1, radius=radius)
    st = run(PGSState(p=2.0, iterate="weighted2", n_features=2, **kw), X[:30, :2], y[:30])
    st.ensure_dim(1000)
    wide = sp.hstack([X, sp.csr_matrix((X.shape[0], 1000 - X.shape[1]))], format="csr")
    run(st, wide[30:], y[30:])
    early = X.toarray()
    early[:30, 2:] = 0.0
    its = transcription(sp.csr_matrix(early), y, **kw)
    w = st.weights()
    np.testing.assert_allclose(w[:X.shape[1] + 1], combine(its, "weighted2"), rtol=1e-9,
                               atol=1e-12)
    assert not np.any(w[X.shape[1] + 1:])
    assert st.n_tracked == X.shape[1] + 1


@pytest.mark.parametrize("iterate", ["last", "weighted2"])
def test_lazy_ball_on_the_bound_of_lambda_then_binding(iterate):
    # squared loss, targets scaled up 15x from row 150: the ball (radius 3) binds at the
    # start (radius "small" against the first steps), then the lazy bound at thr, then,
    # with room under the radius, the bound ||lambda||^2 (base 0: l2's cheap running sum);
    # the larger targets push the norm past it, the bound fails and the heap takes over.
    # Every iterate is the transcription's
    rng = np.random.default_rng(5)
    m, n = 240, 6
    dense = rng.standard_normal((m, n)) * (rng.random((m, n)) < 0.5)
    y = dense @ np.array([1.0, -0.5, 0.0, 0.0, 0.3, 0.0]) * np.where(np.arange(m) < 150,
                                                                     0.2, 3.0)
    X = sp.csr_matrix(dense)
    kw = dict(sigma=0.05, l1=0.02, radius=3.0, loss="squared")
    its = transcription(X, y, **kw)
    st = PGSState(p=2.0, iterate=iterate, n_features=n, **kw)
    trace = ""
    for k in range(m):
        run(st, X[k:k + 1], y[k:k + 1], classifier=False)
        np.testing.assert_allclose(st.weights(), combine(its[:k + 1], iterate), rtol=1e-9,
                                   atol=1e-12)
        base = l1_bound_base(st)
        trace += "h" if np.isnan(base) else "0" if base == 0.0 else "t"
    assert trace.index("h") < trace.index("t") < trace.index("0")
    assert trace.endswith("h") and "0" in trace[:150] and "0" not in trace[-50:]
    assert np.linalg.norm(its[-1]) == pytest.approx(3.0)  # the ball binds at the end
