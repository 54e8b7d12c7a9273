"""The paper's examples (examples/toy_gaussians.py, inverse_time.py, table2.py) in --quick mode.

Each example runs once as a program, the way a reader runs it, into a temporary
directory; the tests then check properties of what it wrote (the JSON beside each
markdown summary holds every number). PNG checks apply where matplotlib is installed
(the ``examples`` extra); ``--no-figures`` exercises the path taken without it.
"""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
HAS_MPL = importlib.util.find_spec("matplotlib") is not None
sys.path.insert(0, str(EXAMPLES))

from shared_data import DEFAULT_DATA  # noqa: E402

needs_imdb = pytest.mark.skipif(not (DEFAULT_DATA / "imdb_train.svm.gz").exists(),
                                reason="shared IMDB data not found")


def run_example(script, out, *extra):
    cmd = [sys.executable, str(EXAMPLES / script), "--quick", "--out", str(out), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    out = tmp_path_factory.mktemp("toy")
    run_example("toy_gaussians.py", out)
    return out, json.loads((out / "toy_gaussians.json").read_text())


@pytest.fixture(scope="module")
def inverse(tmp_path_factory):
    out = tmp_path_factory.mktemp("inverse")
    run_example("inverse_time.py", out)
    return out, {d: json.loads((out / f"inverse_time_{d}.json").read_text())
                 for d in ("imdb", "rcv1")}


@pytest.fixture(scope="module")
def table2(tmp_path_factory):
    out = tmp_path_factory.mktemp("table2")
    run_example("table2.py", out)
    return out, {d: json.loads((out / f"table2_{d}.json").read_text()) for d in ("imdb", "rcv1")}


@pytest.mark.parametrize("script", ["toy_gaussians.py", "inverse_time.py", "table2.py"])
def test_help(script):
    proc = subprocess.run([sys.executable, str(EXAMPLES / script), "--help"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert "--quick" in proc.stdout and "--out" in proc.stdout


# ---- the shared yardstick: F, its gradient, L-BFGS -------------------------------------------
@pytest.mark.parametrize("name", ["l2-LR", "l1.8-LR", "l2-LS"])
def test_objective_gradient_and_lbfgs_optimum(name):
    import scipy.sparse as sp
    from scipy.optimize import approx_fprime

    from _paper import OBJECTIVES, lbfgs, make_pgs, objective_value, objective_value_grad

    obj = {o.name: o for o in OBJECTIVES}[name]
    rng = np.random.RandomState(0)
    X = sp.random(300, 40, density=0.2, format="csr", random_state=rng)
    y = np.where(X @ rng.randn(40) + 0.1 * rng.randn(300) > 0, 1.0, -1.0)
    XT = X.T.tocsr()
    sigma = 1e-2
    wb = rng.randn(41)
    value, grad = objective_value_grad(wb, X, XT, y, obj, sigma)
    numeric = approx_fprime(wb, lambda v: objective_value_grad(v, X, XT, y, obj, sigma)[0], 1e-7)
    assert np.allclose(grad, numeric, rtol=1e-4, atol=1e-6)
    # the same F as the estimators minimise: PGS run long lands on L-BFGS's optimum
    out = lbfgs(X, y, obj, sigma)
    est = make_pgs(obj, sigma).set_params(max_epochs=300).fit(X, y)
    f_pgs = objective_value(est, X, y, sigma)
    assert out["fun"] <= f_pgs <= out["fun"] * (1 + 1e-3)
    est_wb = np.concatenate([est.intercept_, est.coef_.ravel()])
    assert f_pgs == pytest.approx(objective_value_grad(est_wb, X, XT, y, obj, sigma)[0])


# ---- the RCV1-shaped generator -----------------------------------------------------------------
def test_rcv1_like_has_rcv1s_shape():
    import doctest

    import _synthetic

    assert doctest.testmod(_synthetic).failed == 0
    gen = _synthetic.RCV1Like(seed=0)
    X, y = gen.sample(40_000)
    assert X.shape == (40_000, 47_236) and X.indices.dtype == np.int32
    assert X.has_sorted_indices and (X.data > 0).all()
    assert abs(X.nnz / X.shape[0] - 76) < 2                     # the paper's 0.16% density
    assert np.allclose(np.sqrt(X.multiply(X).sum(axis=1)), 1.0)  # L2-normalised rows
    assert abs(np.mean(y > 0) - 0.47) < 0.02
    # Zipf-like: document frequency falls with the rank, the top 1% of features are in
    # most documents' rows and half the features in few
    df = np.bincount(X.indices, minlength=X.shape[1])
    assert df[:100].mean() > 20 * df[20_000:].mean()
    assert np.median(df) < 0.005 * X.shape[0]
    # labels follow the planted model up to the stated noise: the clean score is right
    # about 96% of the time, far from chance and short of certainty
    clean = np.where(X @ gen.w_true + gen.bias > 0, 1.0, -1.0)
    assert 0.93 < np.mean(clean == y) < 0.99
    # a test stream is other rows from the same model
    Xt, yt = gen.sample(1000, stream=1)
    assert (Xt != X[:1000]).nnz > 0 and Xt.shape[1] == X.shape[1]


# ---- toy Gaussians (Figure 9) -------------------------------------------------------------
def test_toy_population_optimum_matches_a_large_sample():
    """The quadrature optimum that sets the sigma grid is the sample optimum's limit."""
    from scipy.optimize import minimize
    from toy_gaussians import ToyProblem

    problem = ToyProblem(10)
    X, y = problem.sample(200_000, seed=3)
    sigma = 1e-2

    def f(v):
        z = X @ v[1:] + v[0]
        d = -y * np.exp(-np.logaddexp(0, y * z)) / len(y)
        return (np.logaddexp(0, -y * z).mean() + 0.5 * sigma * v @ v,
                np.concatenate([[d.sum()], X.T @ d]) + sigma * v)

    sample = minimize(f, np.zeros(11), jac=True, method="L-BFGS-B").x
    population = problem.population_optimum(sigma)
    assert np.linalg.norm(sample - population) < 0.01 * np.linalg.norm(population)
    # and the Bayes direction separates the classes with the stated error
    assert abs(np.mean(np.sign(X @ problem.u) != y) - 0.10) < 0.005


def test_toy_reaches_the_target_and_iterations_stay_flat_in_m(toy):
    out, res = toy
    d = res["dims"]["10"]
    assert all(e <= 0.8 * res["target"] + 1e-9 for e in d["population_error"])
    w2 = d["by_iterate"]["weighted2"]
    assert w2[-1]["m"] == max(d["sizes"])
    assert w2[-1]["reached"] >= 0.5 and np.isfinite(w2[-1]["median"])
    assert 10 <= w2[-1]["median"] <= 300_000
    assert w2[-1]["sigma"] in d["sigma_grid"]
    # time flat in m: ten times the rows, not ten times the iterations (the full run,
    # docs/paper/toy_gaussians.md, has 2,402 at 10,000 rows and 2,769 at 100,000; 5
    # quick runs cannot order two medians that close: their quartiles overlap)
    by_m = {r["m"]: r for r in w2}
    assert by_m[100_000]["median"] <= 2.0 * by_m[10_000]["median"]
    # every run's count is a checkpoint the target was checked at, or None (not reached)
    for r in w2:
        assert all(x is None or x >= 10 for x in r["runs"])
    text = (out / "toy_gaussians.md").read_text()
    assert "Command: `python examples/toy_gaussians.py --quick --out" in text
    assert (out / "toy_gaussians.png").exists() == HAS_MPL


def test_toy_without_figures(tmp_path):
    run_example("toy_gaussians.py", tmp_path, "--no-figures", "--runs", "2")
    assert (tmp_path / "toy_gaussians.md").exists()
    assert not (tmp_path / "toy_gaussians.png").exists()


def test_pyplot_is_optional(monkeypatch):
    import _paper

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails as if not installed
    assert _paper.pyplot(True) is None
    assert _paper.pyplot(False) is None


# ---- inverse time (Figures 5-8) -------------------------------------------------------------
@needs_imdb
@pytest.mark.slow
def test_inverse_time_sigma_is_chosen_on_held_out_training_rows(inverse):
    """sigma(m) is the held-out argmax, and rerunning the selection on the training rows
    alone (no test data anywhere in reach) gives the same choice."""
    from _paper import OBJECTIVES, fmt_sigma, hill_climb_sigma, load_rcv1_like

    _, res = inverse
    for data in res.values():
        for e in data["sizes"]:
            for name, sigma in e["sigma"].items():
                scores = e["holdout"][name]
                assert scores[fmt_sigma(sigma)] == max(scores.values())
    rcv1 = res["rcv1"]
    e = rcv1["sizes"][0]
    X, y, _, _ = load_rcv1_like(e["m"], 0)
    obj = OBJECTIVES[0]
    again, _ = hill_climb_sigma(obj, X, y, 1e-5, rcv1["select_passes"], seed=e["m"])
    assert again == e["sigma"][obj.name]


@needs_imdb
@pytest.mark.slow
def test_inverse_time_targets_and_baseline(inverse):
    out, res = inverse
    for d, data in res.items():
        last = data["sizes"][-1]
        top = str(max(data["targets"]))
        # PGS l2-LR reaches every target at the largest m, in every run, in finite time
        p = last["pgs"]["l2-LR (k=1)"][top]
        assert p["reached"] == 1.0 and 0 < p["cpu"] < 30 and p["steps"] >= 1
        # L-BFGS reached it too, and stopped there (the trace ends at the first hit)
        trace = last["lbfgs"]["l2-LR"]["trace"]
        assert trace[-1][2] >= max(data["targets"])
        assert all(a < max(data["targets"]) for _, _, a in trace[:-1])
        # each run: checkpoints at growing step counts, and the replayed CPU time grows
        # with the steps and is timed exactly at the checkpoints where levels were hit
        for cfg, pgs in last["pgs"].items():
            for run in pgs["traces"]:
                steps = [s for s, _, _ in run["checkpoints"]]
                assert steps == sorted(steps) and len(set(steps)) == len(steps)
                cpu_at = run["cpu_at"]
                assert [c for _, c in cpu_at] == sorted(c for _, c in cpu_at)
                assert all(c > 0 and np.isfinite(c) for _, c in cpu_at)
                assert {s for s, _ in cpu_at} <= set(steps)
        text = (out / f"inverse_time_{d}.md").read_text()
        assert "Command: `python examples/inverse_time.py --quick" in text
        assert "chosen on held-out data" in text
        for kind in ("time", "steps", "fig5"):
            assert (out / f"inverse_time_{d}_{kind}.png").exists() == HAS_MPL


# ---- Table II ----------------------------------------------------------------------------------
@needs_imdb
@pytest.mark.slow
def test_table2_lbfgs_is_optimal_and_pgs_gets_there(table2):
    from _paper import fmt_sigma

    out, res = table2
    for d, data in res.items():
        for name, o in data["objectives"].items():
            # L-BFGS reached the optimum of the same objective: a certificate, not a belief
            assert o["lbfgs_relative_gap"] < 1e-6, (d, name)
            assert o["holdout"][fmt_sigma(o["sigma"])] == max(o["holdout"].values())
        for cfg in ("l2-LR (k=1)", "l1.8-LR (k=1)", "l2-LS (k=1)"):
            runs = data["configs"][cfg]
            assert len(runs) == data["runs"]
            assert np.mean([r["met"] for r in runs]) >= 0.5, (d, cfg)
            lb = data["objectives"][cfg.split(" ")[0]]["lbfgs_accuracy"]
            assert abs(np.median([r["accuracy"] for r in runs]) - lb) < 0.01, (d, cfg)
            # stopped at the first check within 1%: the F/F* - 1 recorded says so
            assert all(r["excess"] <= data["tolerance"] for r in runs if r["met"])
            assert all(r["excess"] > -1e-6 for r in runs)  # nothing beats the optimum
        text = (out / f"table2_{d}.md").read_text()
        assert "0.94799" in text  # the paper's row beside ours
        assert (out / f"table2_{d}.png").exists() == HAS_MPL
