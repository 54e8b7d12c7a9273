"""True multiclass in PGS: multi_class="multinomial" and "crammer_singer".

The yardsticks: a plain NumPy transcription of PGS with the coupled gradient (written
here from the formulas of docs/design/multiclass.md, not from the core), scipy's
optimum of the same objective, scikit-learn's multinomial LogisticRegression, and the
softmax computed in the test.
"""
import subprocess
import sys

import numpy as np
import pytest
import scipy.optimize
import scipy.sparse as sp
from scipy.special import logsumexp, softmax

from onlinepgs import PGSClassifier
from onlinepgs._core import PGSState
from onlinepgs.model import LinearModel
from onlinepgs.pgs import PGSClassifierLearner

from reference import combine, grad_rstar


# ---- the yardstick: PGS with one loss of the K scores, in NumPy -------------------------
def np_loss_grad(kind, z, y):
    """The coupled loss of scores z (K,) for label y and its (sub)gradient in z."""
    K = z.shape[0]
    e_y = np.eye(K)[y]
    if kind == "multinomial":
        return logsumexp(z) - z[y], softmax(z) - e_y
    aug = z + (1.0 - e_y)  # [j != y] + z_j
    j = int(np.argmax(aug))  # the first argmax, as the core takes it
    return aug[j] - z[y], np.eye(K)[j] - e_y


def reference_coupled(X, labels, K, *, kind, sigma, p=2.0, batch_size=1, radius=None,
                      sample_weight=None, intercept=False):
    """Dual averaging over the rows of dense X in order: lambda -= mean of sw_i grad_i
    x_i^T over a step's rows (all at w_{t-1}), w_t = grad r*(lambda / ((t + 1) sigma))
    problem by problem (r(W) = sum_k r(w_k)). Returns the iterates and the progressive
    loss and mistakes of the last iterate."""
    X = np.asarray(X, dtype=float)
    if intercept:
        X = np.hstack([np.ones((X.shape[0], 1)), X])
    m, n = X.shape
    sw = np.ones(m) if sample_weight is None else np.asarray(sample_weight, float)
    lam, W = np.zeros((n, K)), np.zeros((n, K))
    iterates, loss_sum, mistakes, loss0 = [], 0.0, 0, 0.0
    l0 = np.log(K) if kind == "multinomial" else 1.0
    for t, start in enumerate(range(0, m, batch_size), start=1):
        rows = range(start, min(start + batch_size, m))
        G = np.zeros((n, K))
        for r in rows:
            z = X[r] @ W
            value, grad = np_loss_grad(kind, z, labels[r])
            loss_sum += sw[r] * value
            mistakes += int(np.argmax(z) != labels[r])
            G += np.outer(X[r], sw[r] * grad)
            loss0 = max(loss0, sw[r] * l0)
        lam -= G / len(rows)
        B = np.sqrt(2 * (p - 1) * loss0 / sigma) if radius == "auto" else radius
        for c in range(K):
            W[:, c] = grad_rstar(lam[:, c] / ((t + 1) * sigma), p, B)
        iterates.append(W.copy())
    return iterates, loss_sum / sw.sum(), mistakes


def blobs(m=60, n=5, K=4, seed=0):
    rng = np.random.RandomState(seed)
    centers = rng.randn(K, n) * 1.5
    labels = rng.randint(0, K, m)
    X = centers[labels] + rng.randn(m, n)
    return X, labels


def run_core(X, labels, K, *, kind, sigma, iterate="last", p=2.0, batch_size=1,
             radius=None, sample_weight=None, intercept=False, sparse=False):
    state = PGSState(p=p, sigma=sigma, radius=radius,
                     loss="logistic" if kind == "multinomial" else "hinge",
                     batch_size=batch_size, iterate=iterate, n_problems=K, multiclass=True,
                     fit_intercept=intercept, n_features=X.shape[1], multi_class=kind)
    m = X.shape[0]
    sw = np.ones(m) if sample_weight is None else np.asarray(sample_weight, float)
    y = labels.astype(np.float64)
    order = np.arange(m, dtype=np.int64)
    if sparse:
        A = sp.csr_matrix(X)
        state.run(A.data, A.indices, A.indptr, X.shape[1], y, sw, order, True)
    else:
        state.run(np.ascontiguousarray(X).ravel(), None, None, X.shape[1], y, sw, order, True)
    return state


@pytest.mark.parametrize("kind", ["multinomial", "crammer_singer"])
@pytest.mark.parametrize("iterate,batch_size,p,radius,intercept,sparse", [
    ("last", 1, 2.0, None, False, False),
    ("last", 1, 2.0, None, True, True),
    ("weighted2", 1, 2.0, "auto", True, True),
    ("average", 3, 2.0, None, False, False),
    ("weighted", 4, 1.5, "auto", True, True),
    ("last", 2, 1.7, 3.0, False, True),
])
def test_core_matches_numpy_transcription(kind, iterate, batch_size, p, radius, intercept,
                                          sparse):
    X, labels = blobs(m=45, K=4, seed=1)
    sw = np.random.RandomState(2).uniform(0.5, 2.0, X.shape[0])
    sigma = 0.05
    iterates, loss, mistakes = reference_coupled(
        X, labels, 4, kind=kind, sigma=sigma, p=p, batch_size=batch_size, radius=radius,
        sample_weight=sw, intercept=intercept)
    state = run_core(X, labels, 4, kind=kind, sigma=sigma, iterate=iterate, p=p,
                     batch_size=batch_size, radius=radius, sample_weight=sw,
                     intercept=intercept, sparse=sparse)
    want = combine(iterates, iterate)
    got = state.weights()
    if not intercept:
        got = got[1:]
    scale = np.abs(want).max()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * max(scale, 1.0))
    sums = state.progressive_sums()
    # the last iterate's progressive loss: the coupled loss of each row, counted once
    assert sums["sum_weighted_loss_last"] / sums["sum_weight"] == pytest.approx(loss, rel=1e-12)
    assert sums["n_mistakes_last"] == mistakes


@pytest.mark.parametrize("kind", ["multinomial", "crammer_singer"])
def test_reported_progressive_loss_is_coupled(kind):
    """The averaged iterate's progressive loss: each row's coupled loss at the average of
    the iterates before it (w_0 = 0 first), recomputed from the NumPy iterates."""
    X, labels = blobs(m=30, K=3, seed=3)
    iterates, _, _ = reference_coupled(X, labels, 3, kind=kind, sigma=0.1)
    state = run_core(X, labels, 3, kind=kind, sigma=0.1, iterate="weighted2")
    total, mistakes = 0.0, 0
    for i in range(X.shape[0]):
        W = combine(iterates[:i], "weighted2") if i else np.zeros((X.shape[1], 3))
        z = X[i] @ W
        total += np_loss_grad(kind, z, labels[i])[0]
        mistakes += int(np.argmax(z) != labels[i])
    sums = state.progressive_sums()
    assert sums["sum_weighted_loss"] == pytest.approx(total, rel=1e-10)
    assert sums["n_mistakes"] == mistakes


def test_online_statistics_of_the_coupled_objective():
    """The problems' shares of the online primal and dual add up to the coupled
    objective's: primal = (1/T) sum_t [sigma sum_k r(w_k,t-1) + l(z_t)], dual = -(1/T)
    sum_t l*(grad_t) - sigma sum_k r*(lambda_k / (sigma T)) with l*(g) = <z, g> - l(z)
    (Fenchel-Young), and the gap is >= 0 (weak duality)."""
    X, labels = blobs(m=40, K=3, seed=4)
    sigma = 0.1
    iterates, _, _ = reference_coupled(X, labels, 3, kind="multinomial", sigma=sigma,
                                       radius="auto")
    state = run_core(X, labels, 3, kind="multinomial", sigma=sigma, radius="auto")
    stats = state.stats_dict()
    T = X.shape[0]
    W_prev = [np.zeros((X.shape[1], 3))] + iterates[:-1]
    primal = conj = 0.0
    lam = np.zeros((X.shape[1], 3))
    for i in range(T):
        z = X[i] @ W_prev[i]
        value, grad = np_loss_grad("multinomial", z, labels[i])
        primal += sigma * 0.5 * np.sum(W_prev[i] ** 2) + value
        conj += z @ grad - value
        lam -= np.outer(X[i], grad)
    B = np.sqrt(2 * np.log(3) / sigma)
    rstar = 0.0
    for c in range(3):
        w = grad_rstar(lam[:, c] / (sigma * T), 2.0, B)
        rstar += lam[:, c] / (sigma * T) @ w - 0.5 * w @ w
    dual = -conj / T - sigma * rstar
    assert np.sum(stats["online_objective"]) == pytest.approx(primal / T, rel=1e-9)
    assert np.sum(stats["dual_objective"]) == pytest.approx(dual, rel=1e-9)
    assert np.sum(stats["online_duality_gap"]) >= 0
    est = PGSClassifier(multi_class="multinomial", sigma=sigma, max_epochs=1, shuffle=False,
                        fit_intercept=False).fit(X, labels)
    online = est.online_stats_
    assert online["online_duality_gap"] == pytest.approx(
        online["online_objective"] - online["dual_objective"])
    assert isinstance(online["regret_bound"], float)


# ---- the optimum ------------------------------------------------------------------------
def objective(flat, X, labels, K, sigma, kind="multinomial"):
    """sigma/2 sum_k ||w_k||^2 + mean loss, and its gradient, for scipy."""
    W = flat.reshape(X.shape[1], K)
    Z = X @ W
    m = X.shape[0]
    lse = logsumexp(Z, axis=1)
    value = 0.5 * sigma * np.sum(W**2) + np.mean(lse - Z[np.arange(m), labels])
    P = np.exp(Z - lse[:, None])
    P[np.arange(m), labels] -= 1.0
    return value, (sigma * W + X.T @ P / m).ravel()


def test_long_run_reaches_the_scipy_and_sklearn_optimum():
    from sklearn.linear_model import LogisticRegression

    X, labels = blobs(m=150, n=6, K=4, seed=5)
    K, m, sigma = 4, X.shape[0], 0.05
    res = scipy.optimize.minimize(objective, np.zeros(X.shape[1] * K), jac=True,
                                  args=(X, labels, K, sigma), method="L-BFGS-B",
                                  options=dict(gtol=1e-12, ftol=1e-15, maxiter=5000))
    W_star = res.x.reshape(-1, K)
    # scikit-learn's objective is (1/2)||W||^2 + C sum_i loss_i: divided by C m it is
    # ours with sigma = 1 / (C m), so C = 1 / (sigma m)
    ref = LogisticRegression(C=1.0 / (sigma * m), fit_intercept=False, tol=1e-12,
                             max_iter=10000).fit(X, labels)
    # scikit-learn's multinomial W is defined up to a shift common to the classes; the
    # penalty makes the optimum's columns sum to 0 (grad: sigma sum_k w_k = 0)
    np.testing.assert_allclose(ref.coef_.T, W_star, atol=1e-5)
    est = PGSClassifier(multi_class="multinomial", sigma=sigma, max_epochs=100,
                        fit_intercept=False, random_state=0).fit(X, labels)
    f_star = objective(res.x, X, labels, K, sigma)[0]
    f_ours = objective(est.coef_.T.ravel(), X, labels, K, sigma)[0]
    assert 0 <= f_ours - f_star < 1e-4 * f_star
    assert np.abs(est.coef_.T - W_star).max() < 0.02 * np.abs(W_star).max()
    np.testing.assert_allclose(est.predict_proba(X), ref.predict_proba(X), atol=5e-3)


def test_crammer_singer_near_its_optimum():
    """The multiclass hinge's objective (non-smooth): PGS's averaged iterate after many
    passes is near the minimum found by a linear program's equivalent, scipy's
    Nelder-free L-BFGS on a tiny problem being unreliable there; the yardstick is the
    convex objective itself: the model beats every iterate's neighbours little."""
    X, labels = blobs(m=80, n=3, K=3, seed=6)
    sigma, m, K = 0.1, X.shape[0], 3

    def cs_objective(W):
        Z = X @ W
        aug = Z + 1.0 - np.eye(K)[labels]
        return 0.5 * sigma * np.sum(W**2) + np.mean(aug.max(axis=1) - Z[np.arange(m), labels])

    # the exact optimum: a quadratic program solved by scipy (SLSQP) in the epigraph form
    # min sigma/2 ||W||^2 + mean xi_i  s.t.  xi_i >= [j != y_i] + z_ij - z_iy_i for all j
    n = X.shape[1]

    def fun(v):
        W, xi = v[: n * K].reshape(n, K), v[n * K:]
        return 0.5 * sigma * np.sum(W**2) + xi.mean()

    def cons(v):
        W, xi = v[: n * K].reshape(n, K), v[n * K:]
        Z = X @ W
        return (xi[:, None] - (Z + 1.0 - np.eye(K)[labels] - Z[np.arange(m), labels][:, None])).ravel()

    v0 = np.concatenate([np.zeros(n * K), np.ones(m)])
    res = scipy.optimize.minimize(fun, v0, constraints=[{"type": "ineq", "fun": cons}],
                                  method="SLSQP", options=dict(maxiter=500, ftol=1e-12))
    f_star = fun(res.x)
    assert cs_objective(res.x[: n * K].reshape(n, K)) == pytest.approx(f_star, rel=1e-6)
    est = PGSClassifier(loss="hinge", multi_class="crammer_singer", sigma=sigma,
                        max_epochs=200, fit_intercept=False, random_state=0).fit(X, labels)
    f_ours = cs_objective(est.coef_.T)
    assert f_star - 1e-9 <= f_ours < f_star * (1 + 5e-3)


# ---- the estimator ------------------------------------------------------------------------
def test_predict_proba_is_the_softmax():
    X, labels = blobs(m=90, K=4, seed=7)
    est = PGSClassifier(multi_class="multinomial", sigma=1e-2, random_state=0).fit(X, labels)
    proba = est.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-14)
    np.testing.assert_allclose(proba, softmax(est.decision_function(X), axis=1), rtol=1e-12)
    np.testing.assert_allclose(est.model_.predict_proba(X), proba, rtol=1e-14)
    np.testing.assert_array_equal(est.predict(X), np.argmax(est.decision_function(X), axis=1))
    ovr = PGSClassifier(sigma=1e-2, random_state=0).fit(X, labels)
    assert not np.allclose(ovr.predict_proba(X), proba, atol=1e-3)  # a different model
    cs = PGSClassifier(loss="hinge", multi_class="crammer_singer", sigma=1e-2,
                       random_state=0).fit(X, labels)
    assert not hasattr(cs, "predict_proba") and not hasattr(cs.model_, "predict_proba")
    assert cs.score(X, labels) > 0.8
    assert cs.coef_.shape == (4, X.shape[1])


def test_loss_checks_and_binary_keeps_the_binary_model():
    X, labels = blobs(m=60, K=3, seed=8)
    with pytest.raises(ValueError, match="multi_class='multinomial' needs loss='logistic'"):
        PGSClassifier(loss="hinge", multi_class="multinomial").fit(X, labels)
    with pytest.raises(ValueError, match="crammer_singer' needs loss='hinge'"):
        PGSClassifier(multi_class="crammer_singer").fit(X, labels)
    with pytest.raises(ValueError, match="multi_class"):
        PGSClassifier(multi_class="softmax").fit(X, labels)
    y2 = (labels > 0).astype(int)
    for kind, loss in (("multinomial", "logistic"), ("crammer_singer", "hinge")):
        a = PGSClassifier(loss=loss, multi_class=kind, sigma=1e-2, random_state=0).fit(X, y2)
        b = PGSClassifier(loss=loss, sigma=1e-2, random_state=0).fit(X, y2)
        assert a.coef_.shape == (1, X.shape[1])
        np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_allclose(a.decision_function(X), b.decision_function(X))


def test_partial_fit_class_weight_and_auto_sigma():
    X, labels = blobs(m=120, K=3, seed=9)
    # partial_fit in two calls equals one pass of fit without shuffling
    a = PGSClassifier(multi_class="multinomial", sigma=1e-2, max_epochs=1, shuffle=False)
    a.fit(X, labels)
    b = PGSClassifier(multi_class="multinomial", sigma=1e-2)
    b.partial_fit(X[:50], labels[:50], classes=[0, 1, 2]).partial_fit(X[50:], labels[50:])
    np.testing.assert_array_equal(a.coef_, b.coef_)
    with pytest.raises(ValueError, match="multi_class"):
        b.set_params(multi_class="ovr").partial_fit(X, labels)
    # a class weight is the row's weight in its one loss
    cw = {0: 2.0, 1: 1.0, 2: 0.5}
    c = PGSClassifier(multi_class="multinomial", sigma=1e-2, max_epochs=1, shuffle=False,
                      class_weight=cw).fit(X, labels)
    d = PGSClassifier(multi_class="multinomial", sigma=1e-2, max_epochs=1,
                      shuffle=False).fit(X, labels, sample_weight=[cw[v] for v in labels])
    np.testing.assert_array_equal(c.coef_, d.coef_)
    # sigma="auto": the race judges the coupled progressive loss
    e = PGSClassifier(multi_class="multinomial", random_state=0).fit(X, labels)
    assert e.sigma_ > 0 and e.model_.multi_class == "multinomial"
    assert e.score(X, labels) > 0.8


def test_model_file_round_trip(tmp_path):
    from onlinepgs.model_io import load_learner, load_model, read_header, save_model

    X, labels = blobs(m=60, K=3, seed=10)
    est = PGSClassifier(multi_class="multinomial", sigma=1e-2, random_state=0).fit(X, labels)
    path = tmp_path / "m.opgs"
    save_model(est, path)
    assert read_header(path)["params"]["multi_class"] == "multinomial"
    back = load_model(path)
    np.testing.assert_array_equal(back.predict_proba(X), est.predict_proba(X))
    back.partial_fit(X, labels)  # continues the coupled state
    assert back._state.multi_class == "multinomial"
    learner = load_learner(path)
    assert learner.model_.multi_class == "multinomial"
    # one-vs-rest files omit it: what older versions read
    save_model(PGSClassifier(sigma=1e-2).fit(X, labels), path)
    header = read_header(path)
    assert "multi_class" not in header["params"]
    assert "multi_class" not in header["state"]["config"]


def test_linear_model_value():
    coef = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]])
    model = LinearModel(coef, [0.1, 0.2, 0.3], classes=["a", "b", "c"], loss="logistic",
                        multi_class="multinomial")
    X = np.array([[1.0, 2.0], [0.0, 0.0]])
    np.testing.assert_allclose(model.predict_proba(X), softmax(X @ coef.T + [0.1, 0.2, 0.3],
                                                               axis=1))
    assert "multinomial" in repr(model)
    with pytest.raises(ValueError, match="loss='hinge'"):
        LinearModel(coef, classes=["a", "b", "c"], loss="logistic",
                    multi_class="crammer_singer")
    with pytest.raises(ValueError, match="regressor"):
        LinearModel([[1.0]], loss="squared", multi_class="multinomial")


def test_learner_without_sklearn_and_dask_refusal():
    X, labels = blobs(m=60, K=3, seed=11)
    a = PGSClassifierLearner(multi_class="crammer_singer", loss="hinge", sigma=1e-2,
                             random_state=0).fit(X, labels)
    b = PGSClassifier(multi_class="crammer_singer", loss="hinge", sigma=1e-2,
                      random_state=0).fit(X, labels)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    from onlinepgs.distributed._estimator import check_params

    with pytest.raises(ValueError, match="multi_class"):
        check_params(PGSClassifier(multi_class="multinomial"), True, [0, 1, 2])


def test_state_round_trip_and_refusals():
    X, labels = blobs(m=20, K=3, seed=12)
    state = run_core(X, labels, 3, kind="crammer_singer", sigma=0.1, iterate="weighted2")
    assert state.config()["multi_class"] == "crammer_singer"
    back = PGSState.from_dict(state.to_dict())
    np.testing.assert_array_equal(back.weights(), state.weights())
    assert back.multi_class == "crammer_singer"
    assert "multi_class" not in PGSState(n_problems=3, multiclass=True).config()
    with pytest.raises(ValueError, match="needs loss='hinge'"):
        PGSState(loss="logistic", n_problems=3, multiclass=True, multi_class="crammer_singer")
    with pytest.raises(ValueError, match="multiclass=True"):
        PGSState(multi_class="multinomial")


# ---- the command line ---------------------------------------------------------------------
def _write_svmlight(path, X, labels):
    with open(path, "w") as f:
        for x, y in zip(X, labels):
            f.write(f"{y} " + " ".join(f"{j + 1}:{v:.6f}" for j, v in enumerate(x)) + "\n")


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "onlinepgs.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def test_command_line_end_to_end(tmp_path):
    X, labels = blobs(m=200, K=3, seed=13)
    data = tmp_path / "train.svm"
    _write_svmlight(data, X, labels)
    model = tmp_path / "m.opgs"
    run = _cli("train", data, "-o", model, "--multi-class", "multinomial", "--sigma", "0.01",
               "--passes", "3", "--quiet")
    assert run.returncode == 0, run.stderr
    info = _cli("info", model)
    assert "multi_class=multinomial" in info.stdout
    pred = _cli("predict", model, data, "--kind", "probabilities", "-o", tmp_path / "p.txt")
    assert pred.returncode == 0, pred.stderr
    proba = np.loadtxt(tmp_path / "p.txt")
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-5)
    from onlinepgs.model_io import load_model

    est = load_model(model)
    np.testing.assert_allclose(proba, est.predict_proba(X), atol=1e-5)
    ev = _cli("eval", model, data)
    assert ev.returncode == 0, ev.stderr
    expected = -np.mean(np.log(est.predict_proba(X)[np.arange(len(labels)), labels]))
    line = [s for s in ev.stdout.splitlines() if s.startswith("log_loss")][0]
    assert float(line.split("=")[1]) == pytest.approx(expected, rel=1e-4)
    bad = _cli("train", data, "--multi-class", "crammer_singer", "--quiet")
    assert bad.returncode != 0
    assert "--loss hinge" in bad.stderr or "loss='hinge'" in bad.stderr
    assert "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    cs = _cli("train", data, "--loss", "hinge", "--multi-class", "crammer_singer", "--quiet",
              "--holdout-every", "5")
    assert cs.returncode == 0, cs.stderr


@pytest.mark.parametrize("kind,loss", [("multinomial", "logistic"), ("crammer_singer", "hinge")])
def test_streaming_hold_out_scores_the_coupled_loss(kind, loss):
    """The streaming engine's held-out rows: the coupled loss of the model's K scores
    (NumPy's), and log K or 1 for the zero model before any training."""
    from onlinepgs._core._losses import multiclass_loss
    from onlinepgs.streaming.engine import _loss_rows

    X, labels = blobs(m=50, K=3, seed=14)
    classes = np.array(["a", "b", "c"])
    y = classes[labels]
    est = PGSClassifierLearner(loss=loss, multi_class=kind, sigma=1e-2, random_state=0)
    est.fit(X, y)
    scores = est.decision_function(X)
    want = [np_loss_grad(kind, z, c)[0] for z, c in zip(scores, labels)]
    np.testing.assert_allclose(_loss_rows(est, X, y), want, rtol=1e-9, atol=1e-14)
    zero = multiclass_loss(kind, np.zeros((2, 3)), np.array([0, 2]))
    np.testing.assert_allclose(zero, np.log(3) if kind == "multinomial" else 1.0)
    with pytest.raises(ValueError, match="label index 3"):
        multiclass_loss(kind, np.zeros((1, 3)), np.array([3]))


# ---- certificates of coupled models: every p, the ball, l1 --------------------------------
# (p, radius, l1): R^n and a ball small enough to bind, p = 2 and 1.5, l1 at p = 2
CERT_CASES = [(2.0, None, 0.0), (1.5, None, 0.0), (2.0, 0.8, 0.0), (1.5, 0.8, 0.0),
              (2.0, None, 0.03), (2.0, 0.8, 0.03)]
KINDS = [("multinomial", "logistic"), ("crammer_singer", "hinge")]


def np_reg(w, p, sigma, radius, l1):
    """sigma ||w||_p^2 / (2 (p - 1)) + l1 ||w||_1 over the ball (+inf outside)."""
    norm_p = np.sum(np.abs(w) ** p) ** (1.0 / p)
    if radius is not None and norm_p > radius * (1 + 1e-9):
        return np.inf
    return sigma * norm_p**2 / (2 * (p - 1)) + l1 * np.abs(w).sum()


def np_hstar(v, p, sigma, radius, l1):
    """sup_w <v, w> - sigma r(w) - l1 ||w||_1 over ||w||_p <= radius, numerically: SLSQP
    on w = u - u' (u, u' >= 0, which makes the l1 term linear)."""
    n = v.shape[0]

    def neg(x):
        w = x[:n] - x[n:]
        np_ = np.sum(np.abs(w) ** p)
        value = v @ w - sigma * np_ ** (2 / p) / (2 * (p - 1)) - l1 * x.sum()
        dw = v - (sigma / (p - 1)) * np_ ** (2 / p - 1) * np.sign(w) * np.abs(w) ** (p - 1)
        return -value, -np.concatenate([dw - l1, -dw - l1])

    cons = []
    if radius is not None:
        def ball(x):
            return radius**p - np.sum(np.abs(x[:n] - x[n:]) ** p)

        def ball_jac(x):
            w = x[:n] - x[n:]
            d = -p * np.sign(w) * np.abs(w) ** (p - 1)
            return np.concatenate([d, -d])
        cons = [{"type": "ineq", "fun": ball, "jac": ball_jac}]
    x0 = np.concatenate([np.maximum(v, 0), np.maximum(-v, 0)]) * 1e-3
    res = scipy.optimize.minimize(neg, x0, jac=True, method="SLSQP", bounds=[(0, None)] * 2 * n,
                                  constraints=cons, options=dict(ftol=1e-15, maxiter=1000))
    return -res.fun


def np_certificate_pieces(kind, est, X, labels):
    """A plain NumPy transcription of the certificate's inputs: the primal, the loss term's
    coefficient A along the ray (Crammer-Singer: mean g_y; multinomial: mean l*(g), the
    chord) and the K vectors z_k = X1^T g_k / m, the intercept's weight inside each w_k."""
    m, K = X.shape[0], len(est.classes_)
    X1 = np.hstack([np.full((m, 1), est.intercept_scaling), X])
    W1 = np.hstack([(est.intercept_ / est.intercept_scaling)[:, None], est.coef_])
    Z = X1 @ W1.T
    losses, grads = zip(*(np_loss_grad(kind, z, c) for z, c in zip(Z, labels)))
    G = np.array(grads)
    if kind == "crammer_singer":
        A = np.mean(G[np.arange(m), labels])
    else:
        pi = G + np.eye(K)[labels]
        A = np.mean(np.sum(np.where(pi > 0, pi * np.log(np.where(pi > 0, pi, 1)), 0), axis=1))
    return W1, np.mean(losses), A, X1.T @ G / m


@pytest.mark.parametrize("kind,loss", KINDS)
@pytest.mark.parametrize("p,radius,l1", CERT_CASES)
def test_coupled_certificate_against_numpy_and_numerical_conjugate(kind, loss, p, radius, l1):
    """P and D of a rough PGS model: P from NumPy, D = -s A - sum_k h*(s z_k) with h*
    computed by scipy (a constrained maximization), at the scale s reported."""
    from onlinepgs import duality_gap

    X, labels = blobs(m=30, n=3, K=3, seed=16)
    sigma = 0.05
    est = PGSClassifier(loss=loss, multi_class=kind, sigma=sigma, p=p, radius=radius, l1=l1,
                        max_epochs=1, random_state=0).fit(X, labels)
    cert = duality_gap(est, X, labels)
    W1, mean_loss, A, Zk = np_certificate_pieces(kind, est, X, labels)
    primal = sum(np_reg(w, p, sigma, radius, l1) for w in W1) + mean_loss
    assert cert.primal == pytest.approx(primal, rel=1e-10)
    s = float(cert.dual_scale[0])
    assert 0.0 <= s <= 1.0
    dual = -s * A - sum(np_hstar(s * Zk[:, k], p, sigma, radius, l1) for k in range(3))
    assert cert.dual == pytest.approx(dual, rel=1e-6, abs=1e-8)
    # the scale is the best one: no s on a grid beats it by more than rounding
    grid = [-t * A - sum(np_hstar(t * Zk[:, k], p, sigma, radius, l1) for k in range(3))
            for t in np.linspace(0, 1, 6)]
    assert cert.dual >= max(grid) - 1e-7


def np_optimum(kind, X1, labels, K, p, sigma, radius, l1):
    """min_W sum_k [sigma r(w_k) + l1 ||w_k||_1] + mean loss over the K balls, by SLSQP on
    W = U - U' (U, U' >= 0), Crammer-Singer in its epigraph form (slacks xi_i)."""
    m, n = X1.shape
    nw = n * K
    rows = np.arange(m)
    onehot = np.eye(K)[labels]
    extra = m if kind == "crammer_singer" else 0

    def weights(v):
        return (v[:nw] - v[nw:2 * nw]).reshape(n, K)

    def fun(v):
        W = weights(v)
        reg = sum(np_reg(W[:, k], p, sigma, None, 0.0) for k in range(K)) + l1 * v[:2 * nw].sum()
        if kind == "crammer_singer":
            return reg + v[2 * nw:].mean()
        Z = X1 @ W
        return reg + np.mean(logsumexp(Z, axis=1) - Z[rows, labels])

    cons = []
    if kind == "crammer_singer":
        def margins(v):
            Z = X1 @ weights(v)
            return (v[2 * nw:][:, None] - (Z + 1 - onehot - Z[rows, labels][:, None])).ravel()
        cons.append({"type": "ineq", "fun": margins})
    if radius is not None:
        cons.append({"type": "ineq", "fun": lambda v: radius**p - np.sum(
            np.abs(weights(v)) ** p, axis=0)})
    v0 = np.concatenate([np.full(2 * nw, 1e-3), np.ones(extra)])
    res = scipy.optimize.minimize(fun, v0, method="SLSQP", constraints=cons,
                                  bounds=[(0, None)] * (2 * nw) + [(None, None)] * extra,
                                  options=dict(ftol=1e-14, maxiter=3000))
    return fun(res.x)


@pytest.mark.parametrize("kind,loss", KINDS)
@pytest.mark.parametrize("p,radius,l1", CERT_CASES)
def test_coupled_gap_bounds_the_true_suboptimality(kind, loss, p, radius, l1):
    """gap >= P(W) - P* >= 0 with P* scipy's optimum of the same objective (tiny data),
    for a rough PGS model, a long PGS run and a random model inside the ball."""
    from onlinepgs import duality_gap

    X, labels = blobs(m=24, n=2, K=3, seed=17)
    sigma = 0.05
    X1 = np.hstack([np.ones((X.shape[0], 1)), X])
    p_star = np_optimum(kind, X1, labels, 3, p, sigma, radius, l1)
    common = dict(loss=loss, multi_class=kind, sigma=sigma, p=p, radius=radius, l1=l1,
                  random_state=0)
    rough = PGSClassifier(max_epochs=1, **common).fit(X, labels)
    long = PGSClassifier(max_epochs=300, **common).fit(X, labels)
    rng = np.random.RandomState(18)
    W = rng.randn(3, 3)
    if radius is not None:
        W *= radius / np.sum(np.abs(W) ** p, axis=1, keepdims=True) ** (1 / p)
    hand = LinearModel(W[:, 1:], W[:, 0], classes=np.arange(3), loss=loss, sigma=sigma, p=p,
                       radius=radius, l1=l1, multi_class=kind)
    for model in (rough, long, hand):
        cert = duality_gap(model, X, labels)
        assert cert.primal - p_star >= -1e-7                   # scipy found the optimum
        assert cert.gap >= cert.primal - p_star - 1e-9         # gap >= suboptimality
        assert cert.dual <= p_star + 1e-9
    assert duality_gap(long, X, labels).primal - p_star < 1e-2 * p_star


@pytest.mark.parametrize("p,l1", [(2.0, 0.0), (1.5, 0.0), (2.0, 1e-3)])
def test_gap_of_a_long_default_run_is_small(p, l1):
    """radius="auto" (the default ball): the certificate of a long multinomial run is
    tight (the loss is smooth: s = 1 and a(W*) is the dual optimum); Crammer-Singer's,
    whose a(W) is a subgradient at the kinks, is an upper bound that still shrinks."""
    from onlinepgs import duality_gap

    X, labels = blobs(m=150, n=4, K=3, seed=19)
    for kind, loss in KINDS:
        gaps = []
        for epochs in (1, 60):
            est = PGSClassifier(loss=loss, multi_class=kind, sigma=1e-2, p=p, l1=l1,
                                max_epochs=epochs, random_state=0).fit(X, labels)
            assert est.model_.radius is not None  # certified on the auto ball
            gaps.append(duality_gap(est, X, labels))
        if kind == "multinomial":
            assert gaps[1].relative_gap < 2e-3 < 0.5 < gaps[0].relative_gap
        else:
            assert gaps[1].gap < gaps[0].gap / 10


def test_coupled_certificate_refuses_sigma_zero():
    """A coupled model without the l_p term (sigma = 0) has no certificate here: said."""
    from onlinepgs.duality import duality_gap

    X, labels = blobs(m=20, n=2, K=3, seed=15)
    hand = LinearModel(np.ones((3, 2)), classes=np.arange(3), loss="hinge", sigma=0.0,
                       multi_class="crammer_singer")
    with pytest.raises(ValueError, match="sigma > 0"):
        duality_gap(hand, X, labels)


def test_command_line_gap_of_a_default_multinomial_model(tmp_path):
    from onlinepgs import duality_gap
    from onlinepgs.model_io import load_model

    X, labels = blobs(m=120, K=3, seed=20)
    data = tmp_path / "train.svm"
    _write_svmlight(data, X, labels)
    model = tmp_path / "m.opgs"
    run = _cli("train", data, "-o", model, "--multi-class", "multinomial", "--quiet")
    assert run.returncode == 0, run.stderr
    gap = _cli("gap", model, data)
    assert gap.returncode == 0, gap.stderr
    report = dict(line.split(" = ") for line in gap.stdout.splitlines())
    assert 0 <= float(report["gap"]) < np.inf
    X_read, y_read = X.round(6), labels  # the file's rounding
    expected = duality_gap(load_model(model), X_read, y_read)
    assert float(report["gap"]) == pytest.approx(expected.gap, rel=1e-8, abs=1e-12)
