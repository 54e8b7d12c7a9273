"""The compiled PGS matches the plain-NumPy reference of Figure 1, iterate for iterate."""
import numpy as np
import pytest
import scipy.sparse as sp

from onlinepgs import PGSClassifier, PGSRegressor
from onlinepgs._core import PGSState

from reference import combine, grad_rstar, reference_pgs

CLS = ["hinge", "logistic", "squared_hinge", "smooth_hinge"]
REG = ["squared", "absolute", "huber", "epsilon_insensitive"]


def make_data(loss, m=60, n=15, seed=0):
    rng = np.random.RandomState(seed)
    X = sp.random(m, n, density=0.3, random_state=rng, format="csr")
    X.data = rng.randn(X.nnz)
    w_true = rng.randn(n)
    score = X @ w_true
    if loss in CLS:
        y = np.where(score + 0.3 * rng.randn(m) > 0, 1.0, -1.0)
    else:
        y = score + 0.3 * rng.randn(m)
    return X, y


def run_core(X, y, *, fit_intercept=True, intercept_scaling=1.0, sw=None, **cfg):
    st = PGSState(n_features=X.shape[1], fit_intercept=fit_intercept,
                  intercept_scaling=intercept_scaling, seed=7, **cfg)
    sw = np.ones(X.shape[0]) if sw is None else sw
    st.run(X.data, X.indices, X.indptr, X.shape[1], y, sw,
           np.arange(X.shape[0], dtype=np.int64), cfg["loss"] in CLS)
    return st


def augmented(X, fit_intercept, intercept_scaling):
    col = np.full((X.shape[0], 1), intercept_scaling if fit_intercept else 0.0)
    return np.hstack([col, X.toarray()])


def assert_close(actual, expected, rtol=1e-9):
    scale = max(np.max(np.abs(expected)), 1e-300)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol * scale)


# 1.8, 1.5, 1.2: q - 1 a multiple of 1/4 (square roots); 1.3: the general power
@pytest.mark.parametrize("p", [2.0, 1.8, 1.5, 1.3, 1.2])
@pytest.mark.parametrize("bounded", [False, True, "auto"])
@pytest.mark.parametrize("k", [1, 7])
@pytest.mark.parametrize("loss", CLS + REG)
def test_core_matches_reference(p, bounded, k, loss):
    X, y = make_data(loss, seed=int(p * 10) + k)
    # the squared loss's gradient is unbounded: on R^n a small sigma makes the run
    # diverge and amplify rounding, so give it a sigma where PGS is stable
    sigma = 1.0 if (loss == "squared" and not bounded) else 0.05
    sw = np.random.RandomState(1).uniform(0.5, 2.0, X.shape[0])
    radius = "auto" if bounded == "auto" else None
    if bounded is True:  # half the largest norm of the free run: the projection is active
        free, _ = reference_pgs(augmented(X, True, 1.3), y, p=p, sigma=sigma, loss=loss,
                                batch_size=k, sample_weight=sw)
        radius = 0.5 * max(np.sum(np.abs(w) ** p) ** (1 / p) for w in free)
    iterates, stats = reference_pgs(augmented(X, True, 1.3), y, p=p, sigma=sigma, loss=loss,
                                    batch_size=k, radius=radius, sample_weight=sw)
    if bounded is True:  # make sure the ball really constrains the run
        norms = [np.sum(np.abs(w) ** p) ** (1 / p) for w in iterates]
        assert max(norms) == pytest.approx(radius, rel=1e-9)
    for which in ["last", "average", "weighted", "weighted2", "random"]:
        st = run_core(X, y, p=p, sigma=sigma, radius=radius, loss=loss, batch_size=k,
                      iterate=which, intercept_scaling=1.3, sw=sw)
        assert_close(st.weights("last"), iterates[-1])
        assert_close(st.weights(), combine(iterates, which, rnd_t=st.rnd_t))
        got = st.stats_dict()
        assert got["n_steps"] == stats["n_steps"] == -(-X.shape[0] // k)
        # the reference scores each row with the last iterate (the reported iterate's
        # sums are checked against a NumPy replay in test_progressive.py)
        assert got["progressive_loss_last"] == pytest.approx(stats["progressive_loss"],
                                                             rel=1e-9)
        assert got["progressive_mistakes_last"] == stats["progressive_mistakes"]
        assert_close(got["regret_bound"], stats["regret_bound"])
        if p == 2.0 and radius is None:  # p = 2 on R^n keeps no running norm: unknown
            assert np.isnan(got["dual_objective"]).all()
            assert np.isnan(got["online_objective"]).all()
        else:
            assert_close(got["online_objective"], stats["online_objective"])
            assert_close(got["dual_objective"], stats["dual_objective"])
            assert_close(got["online_duality_gap"],
                         stats["online_objective"] - stats["dual_objective"])


@pytest.mark.parametrize("p", [2.0, 1.8, 1.3])
@pytest.mark.parametrize("radius", [None, "auto"])
def test_core_matches_reference_on_long_rows(p, radius):
    """Rows of ~600 non-zeros: the k = 1 update takes a row in chunks of 256 (p < 2), and
    p = 2 moves N by cf (cf ||x||^2 - 2 <lambda, x>) instead of coordinate by coordinate."""
    rng = np.random.RandomState(5)
    X = sp.random(24, 700, density=0.85, random_state=rng, format="csr")
    X.data = rng.randn(X.nnz)
    assert np.diff(X.indptr).min() > 2 * 256
    y = np.where(X @ rng.randn(700) > 0, 1.0, -1.0)
    iterates, stats = reference_pgs(augmented(X, True, 1.0), y, p=p, sigma=0.05,
                                    loss="logistic", radius=radius)
    for which in ["weighted2", "random"]:
        st = run_core(X, y, p=p, sigma=0.05, radius=radius, loss="logistic", iterate=which)
        assert_close(st.weights("last"), iterates[-1])
        assert_close(st.weights(), combine(iterates, which, rnd_t=st.rnd_t))
        assert_close(st.stats_dict()["regret_bound"], stats["regret_bound"])
        if radius is not None or p != 2.0:
            assert_close(st.stats_dict()["dual_objective"], stats["dual_objective"])


def test_packed_powers_equal_the_scalar_power_bit_for_bit():
    """phi_power_many (packed square roots) and the per-row |x|^q sums are the scalar
    phi_power's values exactly, for every q - 1 that is a multiple of 1/4, and NumPy's
    power within rounding for the others."""
    from onlinepgs._core._pgs import row_power_sums
    from onlinepgs._core._regularizer import _phi_power_check

    rng = np.random.RandomState(2)
    r = np.concatenate([[0.0, 1.0, 2.0, 1e-300, 1e150], rng.lognormal(0, 3, 997)])
    for p in [1.8, 1.5, 1.25, 1.2, 1.1, 4 / 3, 1.3, 1.01]:
        q = p / (p - 1.0)
        scalar, packed = _phi_power_check(r, p)
        np.testing.assert_array_equal(packed, scalar)
        with np.errstate(over="ignore"):
            np.testing.assert_allclose(scalar[r > 0], r[r > 0] ** (q - 1.0), rtol=1e-13)
    X = sp.random(50, 900, density=0.5, random_state=rng, format="csr")
    X.data = rng.randn(X.nnz)
    X.indptr[5:7] = X.indptr[5]  # an empty row (row 5)
    X = sp.csr_matrix((X.data[: X.indptr[-1]], X.indices[: X.indptr[-1]], X.indptr),
                      shape=X.shape)
    for p in [1.8, 1.3]:
        q = p / (p - 1.0)
        expected = np.asarray(abs(X).power(q).sum(axis=1)).ravel()
        np.testing.assert_allclose(row_power_sums(X.data, X.indptr.astype(np.int64), p),
                                   expected, rtol=1e-12)


def test_every_iterate_matches_step_by_step():
    """Each w_t, not only the last: run the core one step at a time."""
    X, y = make_data("logistic", m=30)
    iterates, _ = reference_pgs(augmented(X, True, 1.0), y, p=1.5, sigma=0.1, loss="logistic")
    st = PGSState(p=1.5, sigma=0.1, loss="logistic", n_features=X.shape[1])
    for i in range(X.shape[0]):
        st.run(X.data, X.indices, X.indptr, X.shape[1], y, np.ones(30),
               np.array([i], dtype=np.int64), True)
        assert_close(st.weights("last"), iterates[i])


@pytest.mark.parametrize("p", [1.01, 1.02, 1.05])
@pytest.mark.parametrize("which", ["average", "weighted", "weighted2"])
def test_averaged_iterates_near_p_1(p, which):
    """Near p = 1, s_t falls by up to 2^179 between refreshes of M: the lazy sums must not
    lose the late steps (they did: 17-67% off at p <= 1.02, 1e-7 at 1.05)."""
    rng = np.random.RandomState(0)
    X = rng.randn(1500, 20)
    X[rng.rand(1500, 20) < 0.6] = 0
    y = np.where(X @ rng.randn(20) + 0.5 * rng.randn(1500) > 0, 1.0, -1.0)
    iterates, _ = reference_pgs(augmented(sp.csr_matrix(X), True, 1.0), y, p=p, sigma=0.1,
                                loss="logistic")
    est = PGSClassifier(p=p, sigma=0.1, radius=None, iterate=which, shuffle=False)
    est.partial_fit(X, y, classes=[-1, 1])
    assert_close(np.r_[est.intercept_, est.coef_[0]], combine(iterates, which)[:, 0],
                 rtol=1e-9)


def test_random_iterate_is_uniform():
    """The reservoir keeps each of w_1..w_T with probability 1/T."""
    X, y = make_data("logistic", m=8)
    picks = []
    for seed in range(4000):
        st = PGSState(p=2.0, sigma=0.1, loss="logistic", iterate="random",
                      n_features=X.shape[1], seed=seed)
        st.run(X.data, X.indices, X.indptr, X.shape[1], y, np.ones(8),
               np.arange(8, dtype=np.int64), True)
        picks.append(st.rnd_t)
    counts = np.bincount(picks, minlength=9)[1:]
    # chi-square with 7 dof; 99.9% quantile is 24.3
    expected = 4000 / 8
    assert np.sum((counts - expected) ** 2 / expected) < 24.3


def test_grad_rstar_is_the_argmax():
    """The reference's closed form equals argmax_w <w, theta> - r(w), found numerically."""
    from scipy.optimize import minimize

    rng = np.random.RandomState(3)
    for p, radius in [(1.5, None), (1.3, None), (1.5, 0.4), (2.0, 0.4)]:
        theta = rng.randn(4)
        r = lambda w: np.sum(np.abs(w) ** p) ** (2 / p) / (2 * (p - 1))
        cons = [] if radius is None else [
            {"type": "ineq", "fun": lambda w: radius - np.sum(np.abs(w) ** p) ** (1 / p)}]
        res = minimize(lambda w: r(w) - w @ theta, np.zeros(4) + 0.01, constraints=cons,
                       method="SLSQP", options={"ftol": 1e-14, "maxiter": 500})
        np.testing.assert_allclose(grad_rstar(theta, p, radius), res.x, atol=2e-4)


@pytest.mark.parametrize("p", [1.8, 1.3])
@pytest.mark.parametrize("epochs", [1, 2])
def test_estimator_regret_statistic_on_both_power_paths(p, epochs):
    """k = 1, p < 2: the per-row sum |x|^q comes from the loop's square roots (p = 1.8, one
    epoch), from the same roots once per fit (p = 1.8, several epochs) or from NumPy's
    power once per fit (p = 1.3); all give the reference's regret bound."""
    X, y = make_data("logistic", m=60)
    clf = PGSClassifier(p=p, sigma=0.05, shuffle=False, fit_intercept=False, radius=None,
                        max_epochs=epochs).fit(X, np.where(y > 0, 1, 0))
    rows = sp.vstack([X] * epochs, format="csr")
    iterates, stats = reference_pgs(augmented(rows, False, 1.0), np.tile(y, epochs), p=p,
                                    sigma=0.05, loss="logistic")
    assert_close(clf._state.weights("last"), iterates[-1])
    assert clf.online_stats_["regret_bound"] == pytest.approx(stats["regret_bound"][0],
                                                              rel=1e-9)


@pytest.mark.parametrize("p", [2.0, 1.5])
def test_estimator_partial_fit_is_figure_1(p):
    """shuffle=False, fit_intercept=False, iterate='last': coef_ is the paper's w_T."""
    X, y = make_data("hinge", m=50)
    labels = np.where(y > 0, "spam", "ham")
    clf = PGSClassifier(loss="hinge", p=p, sigma=0.05, batch_size=3, shuffle=False,
                        fit_intercept=False, iterate="last", radius=None)
    clf.partial_fit(X, labels, classes=["ham", "spam"])
    iterates, _ = reference_pgs(augmented(X, False, 1.0), y, p=p, sigma=0.05, loss="hinge",
                                batch_size=3)
    assert_close(clf.coef_.ravel(), iterates[-1][1:, 0])
    assert clf.intercept_.tolist() == [0.0]
    assert clf.t_ == 17


@pytest.mark.parametrize("which", ["last", "average", "weighted", "weighted2", "random"])
@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("p", [2.0, 1.4])
def test_multiclass_matches_one_vs_rest_reference(which, k, p):
    rng = np.random.RandomState(5)
    X = sp.random(40, 6, density=0.5, random_state=rng, format="csr")
    labels = rng.randint(0, 3, 40)
    Y = np.where(labels[:, None] == np.arange(3), 1.0, -1.0)
    iterates, stats = reference_pgs(augmented(X, True, 1.0), Y, p=p, sigma=0.1,
                                    loss="logistic", labels=labels, batch_size=k,
                                    radius="auto")
    clf = PGSClassifier(p=p, sigma=0.1, batch_size=k, iterate=which, random_state=0)
    clf.partial_fit(X, labels, classes=[0, 1, 2])
    W = combine(iterates, which, rnd_t=clf._state.rnd_t)
    assert_close(clf.coef_, W[1:].T)
    assert_close(clf.intercept_, W[0])
    assert clf.online_stats_["progressive_mistakes_last"] == stats["progressive_mistakes"]
    assert_close(clf.online_stats_["regret_bound"], stats["regret_bound"])
    assert_close(clf.online_stats_["dual_objective"], stats["dual_objective"])
    assert_close(clf.online_stats_["online_objective"], stats["online_objective"])


def test_dense_int64_and_float32_inputs_match_csr():
    X, y = make_data("squared", m=40)
    ref = PGSRegressor(sigma=0.1, shuffle=False).partial_fit(X, y)
    X64 = X.copy()
    X64.indices = X64.indices.astype(np.int64)
    X64.indptr = X64.indptr.astype(np.int64)
    for Xv in [X.toarray(), X.toarray().astype(np.float32), X64, X.tocsc(), X.tocoo()]:
        if Xv.dtype == np.float32:
            expected = PGSRegressor(sigma=0.1).partial_fit(
                X.astype(np.float32).astype(np.float64), y).coef_
        else:
            expected = ref.coef_
        got = PGSRegressor(sigma=0.1).partial_fit(Xv, y).coef_
        assert_close(got, expected, rtol=1e-12)


def test_scale_refreshes_leave_headroom():
    # hinge on one always-violated example (w stays near 1/sigma < 1): lambda_t = t, so
    # lambda outgrows 2 M again and again. The documented rule: a refresh sets M to 1.75
    # max |lambda_j| (M starts at 1), so lambda grows 3.5-fold between refreshes (O(dim)
    # each): 7 refreshes over 10,000 steps, where M = max |lambda_j| would take 13
    T = 10_000
    est = PGSClassifier(p=1.5, sigma=10.0, loss="hinge", fit_intercept=False)
    est.partial_fit(np.ones((T, 1)), np.ones(T), classes=[-1, 1])
    expected, M = 0, 1.0
    for t in range(1, T + 1):
        if t / M > 2.0:
            expected, M = expected + 1, 1.75 * t
    state = est._state
    assert np.asarray(state.lam_a).ravel()[1] == T
    assert state.n_rescales == expected == 7
    assert np.asarray(state.scale_a)[0] == M


def test_state_block_starts_a_cache_line():
    # 32-byte coordinates (p < 2, averaged) that start 16 or 48 bytes into a line split
    # every other coordinate over two lines (12-62% slower, docs/benchmarks.md); malloc
    # promises 16 bytes only, so each way a state comes to be is checked, at many sizes
    import pickle

    def offset(state):
        assert state.block_a.flags.c_contiguous
        return state.block_a.ctypes.data % 64

    for n in range(100, 140):
        st = PGSState(p=1.8, iterate="weighted2", n_features=n)
        assert st.n_fields == 4
        assert offset(st) == 0
        st.ensure_dim(3 * n)
        assert offset(st) == 0
        assert offset(st.copy()) == offset(st.fork()) == 0
        assert offset(PGSState.from_dict(st.to_dict())) == 0
        assert offset(pickle.loads(pickle.dumps(st))) == 0
        assert offset(PGSState(p=2.0, n_problems=3, n_features=n)) == 0


def near_1_data(m=400, n=10, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(m, n)
    X[rng.rand(m, n) < 0.5] = 0
    y = np.where(X @ rng.randn(n) + 0.3 * rng.randn(m) > 0, 1.0, -1.0)
    return sp.csr_matrix(X), y


@pytest.mark.parametrize("p", [1.001, 1.0001, 1.00001])
@pytest.mark.parametrize("loss", ["hinge", "logistic", "squared_hinge"])
@pytest.mark.parametrize("which", ["last", "average", "weighted2", "random"])
def test_core_matches_reference_very_near_p_1(p, loss, which):
    """q - 1 = 1/(p - 1) in the thousands: (|lambda_j| / M)^(q-1) over the window [M/2, 2M]
    left the double range (the model was NaN, or the run 'diverged', issue 32 item 2), and
    the running N lost its dominant term to rounding while no coordinate fell below M/2.
    The reference takes the powers of theta / max |theta_j| and needs no scale."""
    X, y = near_1_data()
    iterates, _ = reference_pgs(augmented(X, True, 1.0), y, p=p, sigma=1e-2, loss=loss,
                                radius="auto")
    st = run_core(X, y, p=p, sigma=1e-2, loss=loss, radius="auto", iterate=which)
    assert st.n_rescales > 5  # the narrow window of M was exercised
    assert_close(st.weights(), combine(iterates, which, rnd_t=st.rnd_t), rtol=1e-9)


def test_p_too_near_1_is_refused_with_its_reason():
    """Past q - 1 = 2^23 each rounding of lambda would be amplified over 1e-9 in w."""
    from onlinepgs._options import check_p

    check_p(1.0 + 2.0**-23)
    with pytest.raises(ValueError, match=r"p=1\.00000001 is too close to 1: .*q - 1 = "
                                         r"1/\(p - 1\) = 1e\+08"):
        PGSClassifier(p=1.00000001).fit(np.eye(2), [0, 1])
    with pytest.raises(ValueError, match="too close to 1"):
        PGSState(p=1.00000001)


@pytest.mark.parametrize("p,radius", [(1.5, 1.0), (1.5, None), (2.0, 1.0)])
def test_sweeps_visit_reached_coordinates_not_dim(p, radius):
    # issue 32 item 11: the refreshes of M, settles and recounts of N swept all of dim,
    # so the same rows spread over 2^22 columns cost ~1000x those over 4000. The same
    # rows in a narrow and a wide space (columns mapped in order, j -> 1000 j) must give
    # the same weights (up to the rounding of N's recounts, scheduled by the span), and
    # the wide sweeps visit no more coordinates.
    rng = np.random.default_rng(3)
    n, nnz, narrow = 3000, 15, 4000
    idx = np.sort(np.stack([rng.choice(narrow, nnz, replace=False) for _ in range(n)]), axis=1)
    data = rng.standard_normal(n * nnz)
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    ptr = np.arange(0, n * nnz + 1, nnz, dtype=np.int64)
    order = np.arange(n, dtype=np.int64)
    states = []
    for scale, dim in ((1, narrow), (1000, narrow * 1000)):
        st = PGSState(p=p, radius=radius, iterate="weighted2", sigma=1e-2, n_features=dim)
        st.run(data, (idx * scale).ravel().astype(np.int64), ptr, dim, y, np.ones(n), order,
               True)
        states.append(st)
    small, wide = states
    W, V = small.weights(), wide.weights()
    np.testing.assert_allclose(V[1 + 1000 * np.arange(narrow)], W[1:], rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(V[0], W[0], rtol=1e-10)
    assert np.count_nonzero(V) == np.count_nonzero(W)
    assert small.n_rescales == wide.n_rescales
    assert small.n_rescales >= 1 or p == 2.0
    assert wide.n_swept <= small.n_swept
    # every sweep visited only coordinates some update reached: none near dim
    assert wide.n_swept <= 4 * (small.n_rescales + 1) * 4 * n * (nnz + 1)
    assert wide.n_swept < wide.dim
