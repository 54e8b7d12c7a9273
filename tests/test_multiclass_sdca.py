"""True multiclass SDCA (multinomial, Crammer-Singer) and the multiclass certificates,
against independent yardsticks: scipy's constrained minimizer for the row steps,
LIBLINEAR -s 4 and scikit-learn's multinomial LogisticRegression for the optima, plain
NumPy objectives for the certificates."""
import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.optimize as so
import scipy.sparse as sp

from onlinepgs import SDCAClassifier, duality_gap
from onlinepgs._core._sdca_multiclass import cs_step_py, mn_step_py
from onlinepgs.model import LinearModel


def _data(m=300, d=6, K=4, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(m, d)
    y = np.argmax(X[:, :K] + 0.5 * rng.randn(m, K), axis=1)
    return X, y


def _objective(mc, W, b, X, y, sigma, sw=None):
    """P(W) in plain NumPy: sigma ||W||^2 / 2 (intercepts inside) + weighted mean loss."""
    sw = np.ones(X.shape[0]) if sw is None else sw
    Z = X @ W.T + b
    rows = np.arange(X.shape[0])
    if mc == "multinomial":
        top = Z.max(axis=1)
        loss = top + np.log(np.exp(Z - top[:, None]).sum(axis=1)) - Z[rows, y]
    else:
        margin = Z + 1.0
        margin[rows, y] -= 1.0
        loss = margin.max(axis=1) - Z[rows, y]
    return 0.5 * sigma * (np.sum(W ** 2) + np.sum(b ** 2)) + sw @ loss / sw.sum()


@pytest.mark.parametrize("seed", range(6))
def test_crammer_singer_step_is_the_qp_optimum(seed):
    rng = np.random.RandomState(seed)
    K = 3 + seed
    y = int(rng.randint(K))
    kappa = float(rng.uniform(0.05, 5.0))
    C = np.zeros(K)
    C[y] = 1.0
    pi0 = rng.dirichlet(np.ones(K))
    beta0 = C - pi0
    z = 2.0 * rng.randn(K)
    beta = cs_step_py(beta0, z, y, kappa)

    def neg(b):  # minus the row's dual objective
        return -(b[y] - (b - beta0) @ z - 0.5 * kappa * np.sum((b - beta0) ** 2))

    ref = so.minimize(neg, beta0, method="SLSQP", bounds=[(None, c) for c in C],
                      constraints=[{"type": "eq", "fun": np.sum}],
                      options={"ftol": 1e-15, "maxiter": 500})
    assert abs(beta.sum()) < 1e-12 and np.all(beta <= C + 1e-12)
    assert neg(beta) <= ref.fun + 1e-10
    np.testing.assert_allclose(beta, ref.x, atol=1e-5)


@pytest.mark.parametrize("seed", range(4))
def test_multinomial_step_is_the_row_optimum(seed):
    rng = np.random.RandomState(seed)
    K = 3 + seed
    y = int(rng.randint(K))
    kappa = float(rng.uniform(0.05, 5.0))
    pi0 = rng.dirichlet(np.ones(K))
    beta0 = -pi0
    beta0[y] += 1.0
    z = 2.0 * rng.randn(K)
    beta = mn_step_py(beta0, z, y, kappa)
    pi = -beta
    pi[y] += 1.0

    def neg(p):
        p = np.maximum(p, 1e-300)
        return -(-(p * np.log(p)).sum() + (p - pi0) @ z - 0.5 * kappa * np.sum((p - pi0) ** 2))

    ref = so.minimize(neg, pi0, method="SLSQP", bounds=[(1e-14, 1.0)] * K,
                      constraints=[{"type": "eq", "fun": lambda p: p.sum() - 1.0}],
                      options={"ftol": 1e-15, "maxiter": 500})
    assert abs(pi.sum() - 1.0) < 1e-12 and np.all(pi > 0)
    assert neg(pi) <= ref.fun + 1e-10


def test_crammer_singer_matches_liblinear_s4():
    liblinear = pytest.importorskip("liblinear.liblinearutil")
    X, y = _data()
    m, sigma = X.shape[0], 1e-2
    clf = SDCAClassifier(loss="hinge", multi_class="crammer_singer", sigma=sigma, tol=1e-7,
                         fit_intercept=False, max_epochs=20000, random_state=0).fit(X, y)
    assert clf.coef_.shape == (4, 6)
    assert clf.duality_gap_ <= 1e-7 * clf.primal_objective_
    # LIBLINEAR minimizes ||W||^2 / 2 + C sum_i xi_i: ours times 1 / sigma with C = 1/(sigma m)
    model = liblinear.train(liblinear.problem(list(y), sp.csr_matrix(X)),
                            liblinear.parameter(f"-s 4 -c {1 / (sigma * m)} -e 1e-8 -q"))
    raw = np.array([model.w[i] for i in range(6 * 4)]).reshape(6, 4).T
    W = np.zeros((4, 6))
    W[np.array(model.get_labels())] = raw
    ours = _objective("crammer_singer", clf.coef_, np.zeros(4), X, y, sigma)
    theirs = _objective("crammer_singer", W, np.zeros(4), X, y, sigma)
    assert ours == pytest.approx(clf.primal_objective_, rel=1e-12)
    # both above the certified lower bound, and equal to 1e-6 relative
    assert theirs >= clf.dual_objective_ - 1e-12
    assert abs(ours - theirs) <= 1e-6 * theirs
    hand = LinearModel(W, None, classes=np.arange(4), loss="hinge", sigma=sigma,
                       fit_intercept=False, multi_class="crammer_singer")
    cert = duality_gap(hand, X, y)
    assert cert.primal == pytest.approx(theirs, rel=1e-12)
    assert cert.dual <= ours + 1e-12


def test_multinomial_matches_sklearn():
    from sklearn.linear_model import LogisticRegression

    X, y = _data(seed=1)
    m, sigma = X.shape[0], 1e-2
    clf = SDCAClassifier(multi_class="multinomial", sigma=sigma, tol=1e-10, fit_intercept=False,
                         random_state=0).fit(X, y)
    ref = LogisticRegression(C=1 / (sigma * m), fit_intercept=False, tol=1e-12,
                             max_iter=10000).fit(X, y)
    ours = _objective("multinomial", clf.coef_, np.zeros(4), X, y, sigma)
    theirs = _objective("multinomial", ref.coef_, np.zeros(4), X, y, sigma)
    assert ours <= theirs + 1e-9 and theirs - ours <= 1e-7 * theirs
    assert clf.duality_gap_ <= 1e-10 * clf.primal_objective_
    np.testing.assert_allclose(clf.coef_, ref.coef_, atol=1e-4)
    proba = clf.predict_proba(X)
    Z = X @ clf.coef_.T
    soft = np.exp(Z - Z.max(axis=1, keepdims=True))
    np.testing.assert_allclose(proba, soft / soft.sum(axis=1, keepdims=True), rtol=1e-12)
    np.testing.assert_array_equal(clf.predict(X), np.argmax(Z, axis=1))


@pytest.mark.parametrize("mc,loss", [("multinomial", "logistic"), ("crammer_singer", "hinge")])
def test_certificate_bounds_the_suboptimality(mc, loss):
    X, y = _data(m=200, seed=2)
    rng = np.random.RandomState(3)
    sw = rng.uniform(0.2, 2.0, X.shape[0])
    sigma = 3e-2
    best = SDCAClassifier(loss=loss, multi_class=mc, sigma=sigma, tol=1e-9, max_epochs=20000,
                          random_state=0).fit(X, y, sample_weight=sw)
    p_star = best.primal_objective_
    lower = best.dual_objective_
    assert _objective(mc, best.coef_, best.intercept_, X, y, sigma, sw) == pytest.approx(
        p_star, rel=1e-12)
    for epochs in (1, 3, 10):
        rough = SDCAClassifier(loss=loss, multi_class=mc, sigma=sigma, max_epochs=epochs, tol=0.0,
                               check_every=1, random_state=1)
        with pytest.warns(Warning):
            rough.fit(X, y, sample_weight=sw)
        cert = duality_gap(rough, X, y, sample_weight=sw)
        primal = _objective(mc, rough.coef_, rough.intercept_, X, y, sigma, sw)
        assert cert.primal == pytest.approx(primal, rel=1e-12)
        assert cert.gap >= primal - p_star - 1e-12 >= -1e-9  # gap >= suboptimality >= 0
        assert cert.dual <= p_star + 1e-12                    # the dual bounds the optimum
        assert rough.dual_objective_ <= p_star + 1e-12
        assert rough.duality_gap_ >= primal - p_star - 1e-12
    # the random hand-built model too
    W = rng.randn(4, 6)
    hand = LinearModel(W, rng.randn(4), classes=np.arange(4), loss=loss, sigma=sigma,
                       multi_class=mc)
    cert = duality_gap(hand, X, y, sample_weight=sw)
    assert cert.gap >= cert.primal - p_star - 1e-12 > 0
    assert lower <= p_star


def test_two_classes_keep_the_binary_model():
    X, y = _data(K=2, seed=4)
    a = SDCAClassifier(multi_class="multinomial", sigma=1e-2, random_state=0).fit(X, y)
    b = SDCAClassifier(sigma=1e-2, random_state=0).fit(X, y)
    assert a.coef_.shape == (1, 6)
    np.testing.assert_allclose(a.coef_, b.coef_)


@pytest.mark.parametrize("params,needle", [
    ({"multi_class": "crammer_singer"}, "needs loss='hinge'"),
    ({"multi_class": "multinomial", "loss": "hinge"}, "needs loss='logistic'"),
    ({"multi_class": "multinomial", "p": 1.5}, "needs p=2"),
    ({"multi_class": "multinomial", "l1": 0.1}, "no l1 term"),
    ({"multi_class": "multinomial", "init": "pgs"}, "init='zero'"),
])
def test_bad_combinations_are_refused(params, needle):
    X, y = _data(m=50)
    with pytest.raises(ValueError, match=needle.replace("(", r"\(")):
        SDCAClassifier(**params).fit(X, y)


def test_cli_end_to_end(tmp_path):
    X, y = _data(m=200, d=5, K=3, seed=5)
    X = np.abs(X)
    data = tmp_path / "d.svm"
    data.write_text("".join(f"{c + 1} " + " ".join(f"{j + 1}:{v:.6g}" for j, v in
                                                   enumerate(row)) + "\n"
                            for row, c in zip(X, y)))
    model = tmp_path / "m.opgs"
    env = dict(os.environ)

    def run(*argv):
        return subprocess.run([sys.executable, "-m", "onlinepgs.cli", *argv], env=env,
                              capture_output=True, text=True)

    out = run("train", str(data), "--solver", "sdca", "--loss", "hinge", "--multi-class",
              "crammer_singer", "--sigma", "0.05", "-o", str(model), "--quiet")
    assert out.returncode == 0, out.stderr
    gap = run("gap", str(model), str(data))
    assert gap.returncode == 0, gap.stderr
    values = dict(line.split(" = ") for line in gap.stdout.strip().splitlines())
    Xr = np.abs(X).round(6)  # the file's values
    from onlinepgs import load_model

    est = load_model(model)
    assert est.multi_class == "crammer_singer" and est.coef_.shape == (3, 5)
    assert float(values["primal"]) == pytest.approx(
        _objective("crammer_singer", est.coef_, est.intercept_, Xr, y, 0.05), rel=1e-6)
    assert float(values["gap"]) >= 0
    pred = run("predict", str(model), str(data))
    assert pred.returncode == 0, pred.stderr
    labels = np.array(pred.stdout.split(), dtype=float)
    scores = Xr @ est.coef_.T + est.intercept_
    top2 = np.sort(scores, axis=1)[:, -2:]
    # rows at a near tie (3e-7 apart at this sigma) may go either way between the
    # command line's streaming predict and this NumPy product
    clear = top2[:, 1] - top2[:, 0] > 1e-5
    assert clear.sum() >= 190
    np.testing.assert_array_equal(labels[clear], np.argmax(scores, axis=1)[clear] + 1)
    bad = run("train", str(data), "--solver", "sdca", "--multi-class", "crammer_singer",
              "-o", str(tmp_path / "x.opgs"))
    assert bad.returncode != 0
    assert bad.stderr.strip().splitlines()[-1].endswith(
        "crammer_singer needs --loss hinge, got the default --loss logistic")


def test_shrinking_changes_the_time_not_the_optimum():
    X, y = _data(m=300, seed=6)
    runs = [SDCAClassifier(loss="hinge", multi_class="crammer_singer", sigma=1e-2, tol=1e-7,
                           shrinking=shrinking, max_epochs=20000, random_state=0).fit(X, y)
            for shrinking in (True, False)]
    for clf in runs:  # each certified by the NumPy objective and its own gap
        assert clf.duality_gap_ <= 1e-7 * clf.primal_objective_
        assert _objective("crammer_singer", clf.coef_, clf.intercept_, X, y,
                          1e-2) == pytest.approx(clf.primal_objective_, rel=1e-12)
    a, b = (clf.primal_objective_ for clf in runs)
    assert abs(a - b) <= 1e-7 * max(a, b)


def _sparse_problem(m=400, d=40, K=8, seed=11):
    """Sparse rows of K well-separated classes: most classes of a row sit at their bound
    soon, so the active sets shrink."""
    rng = np.random.RandomState(seed)
    y = rng.randint(K, size=m)
    X = sp.random(m, d, density=0.2, random_state=rng, format="csr")
    X = sp.csr_matrix(X + sp.csr_matrix((np.full(m, 2.0), (np.arange(m), y % d)),
                                        shape=(m, d)))
    return X, y.astype(np.int64), rng.uniform(0.5, 2.0, m)


def _core(X, y, sw, K, sigma, seed=0):
    from onlinepgs._core._sdca_multiclass import MulticlassSDCA

    return MulticlassSDCA(X.data, X.indices.astype(np.int32), X.indptr.astype(np.int64),
                          X.shape[1], y, sw, K, "crammer_singer", sigma, True, 1.0, seed)


def _numpy_certificate(prob, X, y, sw, sigma):
    """P(W), D(beta) of the core's W and beta in plain NumPy, after checking that beta is
    dual feasible (beta_k <= [k = y], sum beta = 0) and that W = X1^T (sw beta) / (sigma m)."""
    m, K = X.shape[0], prob.beta.shape[1]
    beta = prob.beta
    C = np.zeros((m, K))
    C[np.arange(m), y] = 1.0
    assert np.all(beta <= C) and np.allclose(beta.sum(axis=1), 0.0, atol=1e-12)
    X1 = sp.hstack([np.ones((m, 1)), X]).tocsr()
    W = prob.weights()
    np.testing.assert_allclose(W, (X1.T @ (sw[:, None] * beta)).T / (sigma * m), atol=1e-12)
    Z = X1 @ W.T
    margin = Z + 1.0 - C
    loss = margin.max(axis=1) - Z[np.arange(m), y]  # max_j([j != y] + z_j) - z_y
    primal = 0.5 * sigma * np.sum(W ** 2) + sw @ loss / m
    dual = sw @ beta[np.arange(m), y] / m - 0.5 * sigma * np.sum(W ** 2)
    return primal, dual


def test_crammer_singer_step_over_an_active_set_is_the_qp_optimum():
    # the shrunk classes (at their bounds) are fixed: the step over the others, with the
    # label's position or -1 when the label's class is shrunk, is the QP over the active
    # classes with sum beta_A = -(the shrunk classes' bounds)
    rng = np.random.RandomState(5)
    for trial in range(8):
        K, y = 7, int(rng.randint(7))
        C = np.zeros(K)
        C[y] = 1.0
        shrunk = rng.permutation(K)[:3]
        beta0 = C - rng.dirichlet(np.ones(K))
        beta0[shrunk] = C[shrunk]
        beta0[np.setdiff1d(np.arange(K), shrunk)] -= (beta0.sum()) / (K - 3)
        if np.any(beta0 > C):
            continue
        A = np.setdiff1d(np.arange(K), shrunk)
        z, kappa = 2.0 * rng.randn(K), float(rng.uniform(0.1, 3.0))
        ypos = int(np.flatnonzero(A == y)[0]) if y in A else -1
        got = cs_step_py(beta0[A], z[A], ypos, kappa)

        def neg(b):
            d = b - beta0[A]
            return -(d @ (C[A] - z[A]) - 0.5 * kappa * d @ d)

        ref = so.minimize(neg, beta0[A], method="SLSQP", bounds=[(None, c) for c in C[A]],
                          constraints=[{"type": "eq",
                                        "fun": lambda b: b.sum() + C[shrunk].sum()}],
                          options={"ftol": 1e-15, "maxiter": 500})
        assert got.sum() == pytest.approx(-C[shrunk].sum(), abs=1e-12)
        assert np.all(got <= C[A] + 1e-12)
        assert neg(got) <= ref.fun + 1e-10
        np.testing.assert_allclose(got, ref.x, atol=1e-5)


def test_epoch_dual_increase_is_the_dual_difference():
    # the exact per-row increases summed over an epoch (what "auto" checks use) against the
    # dual computed from scratch at the checks
    X, y, sw = _sparse_problem()
    prob = _core(X, y, sw, 8, 1e-2)
    prob.focus_sweeps = 0  # (runs of one epoch: a focused pass would follow each check)
    duals = []
    for _ in range(6):
        prob.run(1, 0.0, 1, False, True)
        duals.append(prob.dual)
    np.testing.assert_allclose(np.diff(duals), prob.gains[1:], rtol=1e-9, atol=1e-15)
    assert np.all(np.asarray(prob.gains) >= 0.0)


@pytest.mark.parametrize("reset,focus", [(10, 0), (10**6, 0), (10, 50)])
def test_shrinking_keeps_the_certified_optimum(reset, focus):
    # the active sets do shrink; the run stops only on a check over every row and class
    # (with reset 10**6 the sets rejoin only after failed checks: the unshrink-and-verify);
    # the optima with and without shrinking agree within their gaps, each certified in NumPy
    X, y, sw = _sparse_problem()
    sigma, tol = 1e-2, 1e-8
    results = []
    for shrinking in (True, False):
        prob = _core(X, y, sw, 8, sigma)
        prob.reset_epochs = reset
        prob.focus_sweeps = focus if shrinking else 0
        assert prob.run(5000, tol, "auto", False, shrinking)
        counts = prob.active_counts()
        if shrinking:
            assert counts.mean() < 0.5 * 8  # most classes shrunk by the end
        else:
            assert np.all(counts == 8)
        primal, dual = _numpy_certificate(prob, X, y, sw, sigma)
        assert primal == pytest.approx(prob.primal, rel=1e-12)
        assert dual == pytest.approx(prob.dual, rel=1e-12)
        assert prob.gap <= tol * prob.primal
        results.append((prob.primal, prob.dual))
    (pa, da), (pb, db) = results
    assert max(da, db) <= min(pa, pb) + 1e-15  # each dual bounds the other's primal
    assert abs(pa - pb) <= (pa - da) + (pb - db)


def test_gap_shares_are_the_rows_fenchel_young_terms():
    # the shares the focused passes select by, against the rows' terms in NumPy
    X, y, sw = _sparse_problem()
    prob = _core(X, y, sw, 8, 1e-2)
    prob.run(3, 0.0, 1, False, True)
    m = X.shape[0]
    X1 = sp.hstack([np.ones((m, 1)), X]).tocsr()
    Z = X1 @ prob.weights().T
    C = np.zeros_like(Z)
    C[np.arange(m), y] = 1.0
    beta = prob.beta
    terms = (Z + 1.0 - C).max(axis=1) - Z[np.arange(m), y] - beta[np.arange(m), y] + \
        np.sum(beta * Z, axis=1)
    np.testing.assert_allclose(prob.gap_shares(), sw * np.maximum(terms, 0.0) / m,
                               rtol=1e-9, atol=1e-15)
    assert prob.gap_shares().sum() == pytest.approx(prob.gap, rel=1e-12)


def test_a_run_out_of_epochs_returns_its_certified_point():
    # the focused passes follow failed checks but never the last one: the returned W and
    # beta are those the certificate was computed at
    X, y, sw = _sparse_problem()
    for epochs in (1, 2, 7):
        prob = _core(X, y, sw, 8, 1e-2)
        assert not prob.run(epochs, 0.0, 1, False, True)
        primal, dual = _numpy_certificate(prob, X, y, sw, 1e-2)
        assert primal == pytest.approx(prob.primal, rel=1e-12)
        assert dual == pytest.approx(prob.dual, rel=1e-12)
