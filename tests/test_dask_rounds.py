"""The arithmetic of onlinepgs.dask's rounds (onlinepgs.distributed.rounds): lanes
and merges against a NumPy transcription of the documented rules, and against
single-process partial_fit."""
import numpy as np
import pytest
import scipy.sparse as sp

dask = pytest.importorskip("dask", reason="onlinepgs.dask needs Dask (pip install "
                           "'onlinepgs[dask]')")
pytest.importorskip("dask.array")

import onlinepgs.dask as opd  # noqa: E402
from onlinepgs import PGSClassifier  # noqa: E402
from onlinepgs._core import PGSState  # noqa: E402
from onlinepgs.distributed.rounds import average_factor, merge_round, run_lane  # noqa: E402

from dask_helpers import assert_close, dask_rows, lane_rows, make_data  # noqa: E402
from reference import (grad_rstar, loss_conjugate, loss_derivative,  # noqa: E402
                       loss_value, r_conjugate, r_value)


def reference_rounds(X, Y, lanes, *, k, p, sigma, loss, radius, iterate):
    """Plain NumPy: rounds of one k-row step per lane, merged by the documented rules.

    Every lane's step is taken at the global iterate w_r. Lane l counts its step for P
    steps (P = lanes in the round): its own iterate is grad r*((lambda_r - P g_l) /
    ((t_r + P + 1) sigma)) on its ball, weighted w(t_r + P) in its average. The driver:
    lambda += -sum g_l, t += P, the ball's radius the largest, the averages added with
    factor W / V (W = sum of w(t) over the round's steps, V = the lanes' weights).
    Each lane scores its step's rows with the reported iterate of the round's start (the
    average so far, w_0 = 0 first; w_r for "last"): its own sums are empty before its
    first step (stats "sum_loss_reported", "mistakes_reported").
    """
    X = np.asarray(X, dtype=float)
    Y = np.asarray(Y, dtype=float).reshape(X.shape[0], -1)
    n, K = X.shape[1], Y.shape[1]
    q = p / (p - 1.0)
    power = {"average": 0, "weighted": 1, "weighted2": 2}.get(iterate)
    lam = np.zeros((n, K))
    w = np.zeros((n, K))
    total = np.zeros((n, K))
    t = 0
    loss0_max = 0.0
    reg_radius = radius if radius != "auto" else None
    stats = dict(n_examples=0, sum_loss=0.0, mistakes=0, sum_loss_reported=0.0,
                 mistakes_reported=0, regret=np.zeros(K),
                 sum_reg=np.zeros(K), sum_step=np.zeros(K), sum_conj=np.zeros(K))
    iterates = []
    at = [0] * len(lanes)
    while True:
        active = [l for l in range(len(lanes)) if at[l] < len(lanes[l])]
        if not active:
            break
        P = len(active)
        step_lam = np.zeros((n, K))
        contrib = np.zeros((n, K))
        round_loss0 = loss0_max
        for l in active:
            rows = lanes[l][at[l]:at[l] + k]
            at[l] += len(rows)
            Z = X[rows] @ w
            if power is None:
                Z_rep = Z
            else:
                weight = sum(float(s) ** power for s in range(1, t + 1))
                Z_rep = X[rows] @ (total / weight if t else total)
            for i, r in enumerate(rows):
                stats["sum_loss_reported"] += loss_value(loss, Z_rep[i], Y[r]).sum()
                if K > 1:
                    stats["mistakes_reported"] += int(np.argmax(Z_rep[i]) != np.argmax(Y[r]))
                else:
                    stats["mistakes_reported"] += int((Z_rep[i, 0] > 0) != (Y[r, 0] > 0))
            g = np.zeros((n, K))
            for i, r in enumerate(rows):
                stats["sum_loss"] += loss_value(loss, Z[i], Y[r]).sum()
                if K > 1:
                    stats["mistakes"] += int(np.argmax(Z[i]) != np.argmax(Y[r]))
                else:
                    stats["mistakes"] += int((Z[i, 0] > 0) != (Y[r, 0] > 0))
                g += np.outer(X[r], loss_derivative(loss, Z[i], Y[r]))
            g /= len(rows)
            stats["n_examples"] += len(rows)
            lane_loss0 = loss0_max
            for r in rows:
                lane_loss0 = max(lane_loss0, np.max(loss_value(loss, 0.0, Y[r])))
            round_loss0 = max(round_loss0, lane_loss0)
            lane_radius = (np.sqrt(2 * (p - 1) * lane_loss0 / sigma) if radius == "auto"
                           else radius)
            for c in range(K):
                stats["sum_reg"][c] += r_value(w[:, c], p)
                stats["sum_step"][c] += np.mean(loss_value(loss, Z[:, c], Y[rows, c]))
                stats["sum_conj"][c] += np.mean(loss_conjugate(
                    loss, loss_derivative(loss, Z[:, c], Y[rows, c]), Y[rows, c]))
                stats["regret"][c] += 0.5 * np.sum(np.abs(g[:, c]) ** q) ** (2 / q) / (
                    (t + P) * sigma)
                own = grad_rstar((lam[:, c] - P * g[:, c]) / ((t + P + 1) * sigma), p,
                                 lane_radius)
                if power is not None:
                    contrib[:, c] += float(t + P) ** power * own
            step_lam -= g
        if power is not None:
            W = sum(float(s) ** power for s in range(t + 1, t + P + 1))
            total += W / (P * float(t + P) ** power) * contrib
        t += P
        loss0_max = round_loss0
        reg_radius = np.sqrt(2 * (p - 1) * loss0_max / sigma) if radius == "auto" else radius
        lam += step_lam
        for c in range(K):
            w[:, c] = grad_rstar(lam[:, c] / ((t + 1) * sigma), p, reg_radius)
        iterates.append(w.copy())
    stats["dual"] = np.array([-stats["sum_conj"][c] / t - sigma * r_conjugate(
        lam[:, c] / (sigma * t), p, reg_radius) for c in range(K)])
    stats["primal"] = (sigma * stats["sum_reg"] + stats["sum_step"]) / t
    if power is not None:
        model = total / sum(float(s) ** power for s in range(1, t + 1))
    else:
        model = w
    return model, iterates, t, stats


@pytest.mark.parametrize("p, radius, loss, k, iterate, classes", [
    (2.0, None, "logistic", 1, "weighted2", 2),
    (2.0, "auto", "hinge", 3, "average", 2),
    (1.5, "auto", "logistic", 1, "weighted", 2),
    (1.8, 0.7, "smooth_hinge", 2, "last", 2),
    (1.5, None, "logistic", 2, "weighted2", 3),
])
def test_one_step_slices_match_numpy_reference(p, radius, loss, k, iterate, classes):
    X, y = make_data(m=34, classes=classes)
    sizes = [7, 5, 9, 3, 6, 4]  # unequal: lanes run dry at different rounds
    lanes = lane_rows(sizes, 3)
    sigma = 0.05
    est = PGSClassifier(loss=loss, p=p, sigma=sigma, radius=radius, batch_size=k,
                        iterate=iterate, fit_intercept=False)
    opd.fit(est, dask_rows(X, sizes), y, n_lanes=3, slice_rows=k)
    if classes == 2:
        Y = y
    else:
        Y = np.where(y[:, None] == np.arange(3)[None, :], 1.0, -1.0)
    model, _, T, st = reference_rounds(X.toarray(), Y, lanes, k=k, p=p, sigma=sigma,
                                       loss=loss, radius=radius, iterate=iterate)
    W = est._state.weights()[1:]
    assert est.t_ == T
    assert_close(W, model)
    got = est.online_stats_
    assert got["n_examples"] == X.shape[0]
    assert got["progressive_mistakes_last"] == st["mistakes"]
    assert got["progressive_loss_last"] == pytest.approx(st["sum_loss"] / X.shape[0],
                                                         rel=1e-9)
    assert got["progressive_mistakes"] == st["mistakes_reported"]
    assert got["progressive_loss"] == pytest.approx(st["sum_loss_reported"] / X.shape[0],
                                                    rel=1e-9)
    assert_close(np.atleast_1d(got["regret_bound"]), st["regret"])
    if p == 2.0 and radius is None:  # no running norm kept: unknown, as single-process
        assert np.isnan(got["dual_objective"])
    else:
        assert_close(np.atleast_1d(got["dual_objective"]), st["dual"])
        assert_close(np.atleast_1d(got["online_objective"]), st["primal"])


def test_random_iterate_is_a_round_iterate():
    X, y = make_data(m=40)
    sizes = [10, 10, 10, 10]
    est = PGSClassifier(sigma=0.05, iterate="random", fit_intercept=False, radius=None,
                        random_state=4)
    opd.fit(est, dask_rows(X, sizes), y, n_lanes=2, slice_rows=1)
    _, iterates, T, _ = reference_rounds(X.toarray(), y, lane_rows(sizes, 2), k=1, p=2.0,
                                         sigma=0.05, loss="logistic", radius=None,
                                         iterate="last")
    W = est._state.weights()[1:]
    # a round's global iterate (rounds end at t = 2, 4, ...), chosen at its end
    chosen = est._state.rnd_t
    assert chosen % 2 == 0 and 0 < chosen <= T
    assert_close(W, iterates[chosen // 2 - 1])


def test_one_lane_one_step_rounds_are_sequential_pgs_even_for_random():
    X, y = make_data(m=50)
    kw = dict(sigma=0.05, iterate="random", random_state=2)
    ref = PGSClassifier(**kw).partial_fit(X, y, classes=[-1, 1])
    got = opd.fit(PGSClassifier(**kw), dask_rows(X, [20, 30]), y, n_lanes=1, slice_rows=1)
    assert got._state.rnd_t == ref._state.rnd_t  # the same reservoir draws
    assert_close(got.coef_, ref.coef_, rtol=1e-12)


@pytest.mark.parametrize("iterate", ["last", "average", "weighted", "weighted2"])
@pytest.mark.parametrize("p, radius", [(2.0, "auto"), (2.0, None), (1.8, "auto"),
                                       (1.3, None)])
@pytest.mark.parametrize("classes", [2, 3])
def test_one_lane_equals_partial_fit(iterate, p, radius, classes):
    """One lane, any slices: single-process PGS, to 1e-12 (not always bit for bit: the
    driver's scale M and running N may round differently from the lane's, which moves
    the last iterate's scalar s_t by an ulp; the averaged sums and statistics are
    exact with a single round)."""
    X, y = make_data(m=300, n=20, classes=classes)
    kw = dict(p=p, sigma=1e-2, radius=radius, iterate=iterate, random_state=3)
    ref = PGSClassifier(**kw).partial_fit(X, y, classes=np.unique(y))
    dX = dask_rows(X, [100, 120, 80])
    for slice_rows in (10**6, 37):
        got = opd.fit(PGSClassifier(**kw), dX, y, n_lanes=1, slice_rows=slice_rows)
        assert_close(got.coef_, ref.coef_, rtol=1e-12)
        assert_close(got.intercept_, ref.intercept_, rtol=1e-12)
        for key, value in ref.online_stats_.items():
            np.testing.assert_allclose(got.online_stats_[key], value, rtol=1e-12)
        if slice_rows > X.shape[0] and iterate != "last":
            np.testing.assert_array_equal(got.coef_, ref.coef_)


def test_average_factor_gives_the_steps_weights():
    # weights t^2 over steps 11..16 shared by lanes of 2, 2 and 2 steps, spaced by 3
    W = sum(t * t for t in range(11, 17))
    V = 3 * ((10 + 3) ** 2 + (10 + 6) ** 2)
    assert average_factor("weighted2", 10, [2, 2, 2], 3) == pytest.approx(W / V, rel=1e-15)
    assert average_factor("weighted", 7, [5], 1) == 1.0
    assert average_factor("last", 7, [5, 1], 2) == 1.0
    big = 10**9  # exact integers: no cancellation at large t
    f = average_factor("weighted2", big, [4, 4], 2)
    assert f == pytest.approx(1.0, abs=1e-8) and f != 1.0


def test_merge_is_order_free_in_lambda_and_counts():
    """The global lambda is the start's plus each lane's own change (its lambda's move /
    its step weight), and t and the counters are sums."""
    X, y = make_data(m=80)
    g = PGSState(p=1.5, sigma=0.05, radius="auto", loss="logistic", iterate="weighted2",
                 n_features=X.shape[1])
    sw = np.ones(X.shape[0])
    results = [run_lane(g, [(X, y, sw, np.arange(a, a + 20, dtype=np.int64), None)], True, 4)
               for a in range(0, 80, 20)]
    lam0 = np.asarray(g.lam_a).copy()
    own = []
    for a in range(0, 80, 20):
        lane = g.fork()
        lane.t_step = 4
        lane.run(X.data, X.indices, X.indptr, X.shape[1], y, sw,
                 np.arange(a, a + 20, dtype=np.int64), True)
        assert lane.t == 4 * 20
        own.append((np.asarray(lane.lam_a) - lam0) / 4)
    merge_round(g, results)
    assert g.t == 80 and g.n_examples == 80
    assert_close(np.asarray(g.lam_a), lam0 + sum(own), rtol=1e-12)
    # the iterate is grad r* of the merged lambda (the state's scalars are consistent)
    theta = np.asarray(g.lam_a)[:, 0] / ((g.t + 1) * 0.05)
    assert_close(g.weights("last")[:, 0], grad_rstar(theta, 1.5, g.radius), rtol=1e-10)


@pytest.mark.parametrize("p, iterate", [(2.0, "weighted2"), (1.5, "average"), (1.8, "last")])
def test_a_kept_lane_synced_equals_a_fresh_fork(p, iterate):
    """The threads' lane states: synced over the merged coordinates, bit for bit a fork."""
    from onlinepgs.distributed.rounds import LaneSlot
    rng = np.random.RandomState(3)
    X = sp.random(120, 300, density=0.02, random_state=rng, format="csr")
    X.data = rng.randn(X.nnz)
    y = np.where(X @ rng.randn(300) > 0, 1.0, -1.0)
    sw = np.ones(120)
    g = PGSState(p=p, sigma=0.05, radius="auto", loss="logistic", iterate=iterate,
                 n_features=300)
    slots = [LaneSlot(), LaneSlot()]
    changed = None
    synced = 0
    for r in range(6):
        res = [run_lane(g, [(X, y, sw, np.arange(20 * r + 10 * l, 20 * r + 10 * l + 10,
                                                 dtype=np.int64), None)], True, 2,
                        slots[l], changed, r) for l in range(2)]
        changed = merge_round(g, res)
        if changed is None or slots[0].state.n_rescales:
            continue  # the merge or the lane moved M: every phi changed, lanes fork again
        assert 0 < changed.size < 301
        kept = slots[0].state
        kept.sync_from(g, changed)
        fresh = g.fork()
        for name in ("block_a", "norm_a", "scale_a", "s_a", "cum_a", "regret_a"):
            np.testing.assert_array_equal(getattr(kept, name), getattr(fresh, name))
        assert (kept.t, kept.radius, kept.n_examples) == (fresh.t, fresh.radius, 0)
        synced += 1
        slots[0].state = None  # the next round forks it again
    assert synced >= 2
