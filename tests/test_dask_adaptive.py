"""The adaptive geometry on onlinepgs.dask's lanes (onlinepgs.distributed.adaptive): the
rounds against a NumPy transcription of the lanes and of the documented merge
(tests/reference.py's adaptive step, run from the round's start), one round of one step a
lane against the transcription's mini-batch step of the lanes' rows together, one lane
against one process, save and resume, the refusal of eta="auto", the command, a cluster,
and a9a's AUC against one process."""
import numpy as np
import pytest
import scipy.sparse as sp

dask = pytest.importorskip("dask", reason="onlinepgs.dask needs Dask (pip install "
                           "'onlinepgs[dask]')")
pytest.importorskip("dask.array")

import onlinepgs.dask as opd  # noqa: E402
from onlinepgs import PGSClassifier, load_model, save_model  # noqa: E402

from dask_helpers import cluster, dask_rows, lane_rows, run_cli  # noqa: E402,F401
from reference import (_batch_sums, _rescaled, _scaled_rows, adaptive_map,  # noqa: E402
                       loss_derivative, reference_adaptive)

SIGMA, ETA = 1e-3, 0.5


def adaptive(**kw):
    """A classifier of the adaptive geometry (the centered form, delta 0)."""
    params = dict(geometry="adaptive", iterate="last", radius=None, sigma=SIGMA, eta=ETA,
                  random_state=0)
    params.update(kw)
    return PGSClassifier(**params)


def raw_rows(m=240, n=8, seed=0, binary=False):
    """Rows with an intercept-free score of a few columns. Raw: columns on scales from
    1e-2 to 1e2, a column's largest values late (scales grow between rounds, and
    differ between lanes). Binary: 0/1 entries (every seen scale is 1)."""
    rng = np.random.RandomState(seed)
    mask = rng.rand(m, n) < 0.5
    if binary:
        X = mask.astype(float)
    else:
        X = rng.randn(m, n) * mask * 10.0 ** rng.uniform(-2, 2, n)
        X[m // 2:, 2] *= 30.0
    Xs = X / np.maximum(np.max(np.abs(X), axis=0), 1e-300)
    score = Xs[:, :4] @ np.array([3.0, -2.0, 1.5, 2.0]) + 0.3 * rng.randn(m)
    if binary:
        score -= np.median(score)
    return X, np.where(score > 0, 1.0, -1.0)


def with_intercept(X):
    return np.hstack([np.ones((X.shape[0], 1)), X])


# ---- the transcription: lanes from the round's start, the merge's formulas -------------
class Sums:
    """The transcription's state of K problems: U (its sign as tests/reference.py's),
    the squares, the scales (0 unseen), t; the loss, delta and the form."""

    def __init__(self, n, K=1, delta=0.0, centered=True, loss="logistic"):
        self.U, self.acc, self.s, self.t = np.zeros((n, K)), np.zeros((n, K)), np.zeros(n), 0
        self.delta, self.centered, self.loss = delta, centered, loss

    def copy(self):
        other = Sums(0, 1, self.delta, self.centered, self.loss)
        other.U, other.acc, other.s = self.U.copy(), self.acc.copy(), self.s.copy()
        other.t = self.t
        return other

    def v(self):
        return adaptive_map(self.U, self.acc, np.zeros(1), self.t, p=2.0, sigma=SIGMA,
                            eta=ETA, l1=0.0, delta=self.delta)

    def raise_to(self, s_new):
        """The scales raised to s_new where larger, as reference_adaptive raises them."""
        raised = np.maximum(self.s, s_new)
        _rescaled(self.U, self.acc, self.s, raised, self.t, p=2.0, sigma=SIGMA, eta=ETA,
                  l1=0.0, delta=self.delta)
        self.s = raised

    def step(self, Xb, Yb, cb):
        """One step of the rows Xb (a mini-batch; targets Yb (b, K), weights cb), as
        reference_adaptive takes it."""
        self.raise_to(np.max(np.abs(Xb), axis=0))
        Xs = _scaled_rows(Xb, self.s)
        V = self.v()
        gt, dn, _ = _batch_sums(Xs, loss_derivative(self.loss, Xs @ V, Yb, 0.1), cb, 2.0)
        self.t += 1
        if self.centered:
            self.U = self.U + gt - (np.sqrt(self.acc + dn) - np.sqrt(self.acc)) / ETA * V
        else:
            self.U = self.U + gt
        self.acc = self.acc + dn

    def weights(self):
        """w = v / s (n, K), 0 where unseen: the intercept's first."""
        s = self.s[:, None]
        return np.where(s > 0, self.v() / np.where(s > 0, s, 1.0), 0.0)


def raised_copy(state, s_new):
    out = state.copy()
    out.raise_to(s_new)
    return out


def merge(start, lanes):
    """The documented merge: every lane brought to the largest scales (its gradients
    times s_L / s, its squares times (s_L / s)^2, the start raised as the core raises),
    the mean of the lanes' changes added, the centered term taken out of each lane and
    put back once at the merged squares, t by the most steps a lane took."""
    s_m = np.max([start.s] + [lane.s for lane in lanes], axis=0)
    merged = raised_copy(start, s_m)
    V0 = start.v()
    grad, squares = np.zeros_like(start.U), np.zeros_like(start.acc)
    for lane in lanes:
        from_start = raised_copy(start, lane.s)
        dU, dn = lane.U - from_start.U, lane.acc - from_start.acc
        if start.centered:
            dU = dU + (np.sqrt(lane.acc) - np.sqrt(from_start.acc)) / ETA * V0
        ratio = np.where(lane.s > 0, lane.s / np.where(s_m > 0, s_m, 1.0), 1.0)[:, None]
        grad += dU * ratio
        squares += dn * ratio ** 2
    acc = merged.acc + squares / len(lanes)
    merged.U = merged.U + grad / len(lanes)
    if start.centered:
        merged.U = merged.U - (np.sqrt(acc) - np.sqrt(merged.acc)) / ETA * V0
    merged.acc = acc
    merged.t = start.t + max(lane.t - start.t for lane in lanes)
    return merged


def reference_rounds(X, Y, lanes, slice_rows, batch_size, c=None, **config):
    """Rounds of `slice_rows` rows a lane (whole steps of `batch_size`), each lane's
    steps taken from the round's start, merged by `merge`; X with its intercept column,
    Y (m, K) the problems' targets, c the rows' weights. Returns the model's weights
    (n, K), the intercept first."""
    Y = np.asarray(Y, dtype=float).reshape(X.shape[0], -1)
    c = np.ones(X.shape[0]) if c is None else c
    state = Sums(X.shape[1], Y.shape[1], **config)
    at = [0] * len(lanes)
    while any(at[l] < len(lanes[l]) for l in range(len(lanes))):
        ends = []
        for l, rows in enumerate(lanes):
            if at[l] >= len(rows):
                continue
            lane = state.copy()
            mine = rows[at[l]:at[l] + slice_rows]
            at[l] += len(mine)
            for k in range(0, len(mine), batch_size):
                rows = mine[k:k + batch_size]
                lane.step(X[rows], Y[rows], c[rows])
            ends.append(lane)
        state = ends[0] if len(ends) == 1 else merge(state, ends)
    return state.weights()


def model_weights(est):
    """(1 + features, K): the intercepts first."""
    coef = np.atleast_2d(est.coef_)
    return np.vstack([np.atleast_1d(est.intercept_)[None, :], coef.T])


def assert_weights(got, want, rtol=1e-10):
    np.testing.assert_allclose(got, want, rtol=0, atol=rtol * np.max(np.abs(want)))


# ---- the rounds against the transcription ----------------------------------------------
@pytest.mark.parametrize("n_lanes,slice_rows,batch_size", [(3, 20, 1), (2, 24, 4), (4, 1, 1)])
def test_rounds_follow_the_transcription_of_lanes_and_merge(n_lanes, slice_rows,
                                                            batch_size):
    """Raw columns whose scales grow and differ between lanes: the lanes' rounds (longer
    slices, mini-batches, one step a lane) end on the transcription's model to 1e-10."""
    X, y = raw_rows()
    sizes = [50, 40, 60, 30, 60]
    clf = opd.fit(adaptive(batch_size=batch_size), dask_rows(X, sizes), y,
                  classes=[-1, 1], n_lanes=n_lanes, slice_rows=slice_rows)
    want = reference_rounds(with_intercept(X), y, lane_rows(sizes, n_lanes), slice_rows,
                            batch_size)
    assert_weights(model_weights(clf), want)
    assert clf.online_stats_["n_examples"] == len(y)


def test_one_vs_rest_weights_and_regression_follow_the_transcription():
    """Three classes one-vs-rest with sample weights in [0.5, 1], and a regressor of the
    squared loss, on raw columns over 3 lanes: the transcription's models, to 1e-10."""
    from onlinepgs import PGSRegressor

    X, y = raw_rows(m=210, seed=3)
    rng = np.random.RandomState(3)
    labels = rng.randint(0, 3, len(y)).astype(float)
    labels[y > 0] = 2.0
    c = rng.uniform(0.5, 1.0, len(y))
    sizes = [70, 70, 70]
    lanes = lane_rows(sizes, 3)
    clf = opd.fit(adaptive(), dask_rows(X, sizes), labels, sample_weight=c,
                  classes=[0, 1, 2], n_lanes=3, slice_rows=9)
    Y = np.where(labels[:, None] == np.arange(3)[None, :], 1.0, -1.0)
    assert_weights(model_weights(clf), reference_rounds(with_intercept(X), Y, lanes, 9, 1, c))
    target = X[:, :3] / np.max(np.abs(X[:, :3]), axis=0) @ np.array([1.0, -2.0, 0.5])
    reg = opd.fit(PGSRegressor(geometry="adaptive", iterate="last", radius=None,
                               sigma=SIGMA, eta=ETA, loss="squared"),
                  dask_rows(X, sizes), target, n_lanes=3, slice_rows=9)
    assert_weights(model_weights(reg), reference_rounds(with_intercept(X), target, lanes, 9,
                                                        1, loss="squared"))


def state_rounds(X, y, lanes, slice_rows, **config):
    """The rounds driven by hand on `PGSState`s: every lane's slice through
    `adaptive.run_lane` from the global state, then `adaptive.merge_round` (what the
    driver's tasks do). Returns the model's weights, the intercept first."""
    from onlinepgs._core import PGSState
    from onlinepgs.distributed.adaptive import merge_round, run_lane

    state = PGSState(p=2.0, sigma=SIGMA, loss="logistic", geometry="adaptive", eta=ETA,
                     n_features=X.shape[1], **config)
    Xc = sp.csr_matrix(X)
    at = [0] * len(lanes)
    while any(at[l] < len(lanes[l]) for l in range(len(lanes))):
        results = []
        for l, rows in enumerate(lanes):
            mine = rows[at[l]:at[l] + slice_rows]
            at[l] += len(mine)
            if len(mine):
                piece = (Xc, y, np.ones(len(y)), np.asarray(mine, dtype=np.int64), None)
                results.append(run_lane(state, [piece], True))
        merge_round(state, results)
    return state.weights()


@pytest.mark.parametrize("centered", [True, False])
@pytest.mark.parametrize("slice_rows", [1, 13])
def test_both_forms_merge_as_transcribed(centered, slice_rows):
    """The merge's arithmetic alone, for the centered form and AdaGrad-RDA's, with the
    stabilizer's start delta > 0: 3 lanes over raw columns, to 1e-10."""
    X, y = raw_rows(m=150)
    lanes = lane_rows([50, 50, 50], 3)
    got = state_rounds(X, y, lanes, slice_rows, centered=centered, delta=0.05)
    want = reference_rounds(with_intercept(X), y, lanes, slice_rows, 1, centered=centered,
                            delta=0.05)
    assert_weights(got, want)


def test_one_step_a_lane_is_the_mini_batch_step_of_the_rounds_rows():
    """Binary rows (every lane reads a feature at the batch's scale), one step of 2 rows
    a lane and round over 3 lanes: the run is the adaptive geometry's mini-batch run of
    batch 6 over the rounds' rows together (reference_adaptive), to 1e-10."""
    X, y = raw_rows(m=180, binary=True)
    sizes = [60, 60, 60]
    clf = opd.fit(adaptive(batch_size=2), dask_rows(X, sizes), y, classes=[-1, 1],
                  n_lanes=3, slice_rows=2)
    lanes = lane_rows(sizes, 3)
    order = np.concatenate([np.concatenate([rows[r:r + 2] for rows in lanes])
                            for r in range(0, 60, 2)])
    its, _ = reference_adaptive(with_intercept(X[order]), y[order], p=2.0, sigma=SIGMA,
                                loss="logistic", eta=ETA, centered=True, batch_size=6)
    assert_weights(model_weights(clf), its[-1])
    assert clf.t_ == 30


def test_one_lane_is_one_process():
    """One lane: rounds of any length give partial_fit's model on the same rows in
    order, bit for bit (the merge takes the lane's fields as they are)."""
    X, y = raw_rows()
    one = adaptive().partial_fit(X, y, classes=[-1, 1])
    for slice_rows in (17, 240):
        clf = opd.fit(adaptive(), dask_rows(X, [100, 140]), y, classes=[-1, 1], n_lanes=1,
                      slice_rows=slice_rows)
        np.testing.assert_array_equal(model_weights(clf), model_weights(one))
        assert clf.t_ == one.t_
        assert clf.online_stats_["n_examples"] == len(y)
        assert np.isclose(clf.online_stats_["progressive_loss"],
                          one.online_stats_["progressive_loss"], rtol=1e-12)


def test_save_and_resume_continue_the_rounds(tmp_path):
    """A model saved after a Dask fit, loaded and continued on Dask is the model of the
    same two calls without the file, bit for bit."""
    X, y = raw_rows()
    dX = dask_rows(X, [60, 60, 60, 60])
    args = dict(n_lanes=2, slice_rows=16)
    a = opd.fit(adaptive(), dX, y, classes=[-1, 1], **args)
    save_model(a, tmp_path / "m.pgs")
    b = load_model(tmp_path / "m.pgs")
    opd.partial_fit(a, dX, y, **args)
    opd.partial_fit(b, dX, y, **args)
    np.testing.assert_array_equal(model_weights(a), model_weights(b))
    assert a.t_ == b.t_
    for key, value in a.online_stats_.items():  # NaN where the geometry has no value
        np.testing.assert_array_equal(b.online_stats_[key], value)


def test_the_race_of_eta_is_refused_with_a_fixed_one_named():
    X, y = raw_rows(m=40)
    with pytest.raises(ValueError, match=r"does not race .*eta='auto'.*eta=0\.5"):
        opd.fit(adaptive(eta="auto"), dask_rows(X, [20, 20]), y, classes=[-1, 1])


def test_p_below_2_is_refused_on_lanes_by_name():
    """p < 2's scalar stabilizer (and its norm's sums) has no merge across lanes: the
    lanes would average the per-coordinate fields only and report a wrong model."""
    X, y = raw_rows(m=40)
    with pytest.raises(ValueError, match=r"adaptive geometry at p=2 only \(p=1\.5\)"):
        opd.fit(adaptive(eta=0.5, p=1.5), dask_rows(X, [20, 20]), y, classes=[-1, 1])


def test_an_average_is_refused_on_lanes_by_name():
    """The averages' settled sums are a lane's own; the merge adds U and the squares."""
    X, y = raw_rows(m=40)
    with pytest.raises(ValueError, match=r"iterate='last' only \(iterate='weighted'\)"):
        opd.fit(adaptive(eta=0.5, iterate="weighted"), dask_rows(X, [20, 20]), y,
                classes=[-1, 1])


def test_the_command_trains_the_adaptive_geometry_on_lanes(tmp_path, capsys):
    """`train --scheduler threads --geometry adaptive --eta 0.5` writes the model of
    onlinepgs.dask.fit with the same options; without --eta, one line names it."""
    X, y = raw_rows(binary=True)
    path = tmp_path / "train.svm"
    with open(path, "w") as f:
        for row, label in zip(X, y):
            f.write(f"{label:+g}" + "".join(f" {j + 1}:{v:g}" for j, v in enumerate(row)
                                            if v) + "\n")
    out = tmp_path / "m.pgs"
    assert run_cli("train", path, "-o", out, "--scheduler", "threads", "--lanes", "2",
                   "--geometry", "adaptive", "--eta", "0.5", "--sigma", "1e-3",
                   "--slice-rows", "30", "--quiet") == 0
    got = load_model(out)
    want = opd.fit(adaptive(), [str(path)], classes=[-1, 1], n_lanes=2, slice_rows=30)
    np.testing.assert_allclose(got.decision_function(X), want.decision_function(X), rtol=1e-12)
    capsys.readouterr()
    assert run_cli("train", path, "-o", tmp_path / "n.pgs", "--scheduler", "threads",
                   "--geometry", "adaptive") != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--eta" in err[0] and "Traceback" not in err[0]
    assert not (tmp_path / "n.pgs").exists()


@pytest.mark.slow
def test_a_local_cluster_gives_the_threads_model(cluster):
    """A LocalCluster of two worker processes (127.0.0.1) and Dask's threads train the
    same adaptive model bit for bit, at a fixed sigma and with the sigma race: every
    copy of the state merges alike."""
    X, y = raw_rows(m=1200, seed=4)
    dX = dask_rows(X, [300, 300, 300, 300])
    args = dict(classes=[-1, 1], n_lanes=2, slice_rows=64, passes=2)
    for sigma in (SIGMA, "auto"):
        a = opd.fit(adaptive(sigma=sigma), dX, y, **args)
        b = opd.fit(adaptive(sigma=sigma), dX, y, client=cluster, **args)
        np.testing.assert_array_equal(model_weights(a), model_weights(b))
        assert a.t_ == b.t_ and a.sigma_ == b.sigma_


def test_the_sigma_race_runs_on_lanes_and_one_lane_is_the_local_race():
    """sigma="auto" with a fixed eta: each run of the race merges as a lone one; with one
    lane the race chooses as the local one does and ends on its model (to rounding)."""
    X, y = raw_rows(m=3000, seed=2)
    dX = dask_rows(X, [1000, 1000, 1000])
    one = adaptive(sigma="auto").partial_fit(X, y, classes=[-1, 1])
    clf = opd.fit(adaptive(sigma="auto"), dX, y, classes=[-1, 1], n_lanes=1,
                  slice_rows=256)
    assert clf.sigma_ == one.sigma_
    assert_weights(model_weights(clf), model_weights(one), rtol=1e-12)
    two = opd.fit(adaptive(sigma="auto"), dX, y, classes=[-1, 1], n_lanes=2,
                  slice_rows=256)
    assert two.online_stats_["n_examples"] == len(y)
    assert two.score(X, y) > one.score(X, y) - 0.02


@pytest.mark.parametrize("n_lanes", [2, 3, 4])
def test_a9a_on_lanes_reaches_one_process_auc(n_lanes):
    """a9a, one pass, eta 0.5 and the sigma race: 2 to 4 lanes (8 partitions, rounds of
    1024 rows a lane) reach a test AUC within 0.005 of one process's."""
    from sklearn.metrics import roc_auc_score

    from onlinepgs import load_svmlight
    from shared_data import shared

    X, y = load_svmlight(shared("a9a.svm.gz"))
    Xt, yt = load_svmlight(shared("a9a.t.svm.gz"), n_features=X.shape[1])
    one = adaptive(sigma="auto").partial_fit(X, y, classes=[-1, 1])
    cuts = np.linspace(0, X.shape[0], 9).astype(int)
    clf = opd.fit(adaptive(sigma="auto"), dask_rows(X, np.diff(cuts)), y, classes=[-1, 1],
                  n_lanes=n_lanes, slice_rows=1024)
    auc_one = roc_auc_score(yt, one.decision_function(Xt))
    auc = roc_auc_score(yt, clf.decision_function(Xt))
    assert auc_one > 0.89 and abs(auc - auc_one) <= 0.005
