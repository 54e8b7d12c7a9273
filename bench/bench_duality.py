"""Time to a certified relative duality gap: SDCA, PGS then SDCA, LIBLINEAR, scikit-learn.

For each data set (imdb_train, a9a), loss (logistic, hinge) and sigma (1e-5, 1e-4), the
objective is onlinepgs's own, p = 2:

    F(w) = sigma/2 ||w||^2 + (1/m) sum_i loss(<w, x_i> + w_0; y_i)

with the intercept w_0 a regularized constant feature of value 1. That is LIBLINEAR's
objective ``1/2 ||w||^2 + C sum_i loss_i`` times sigma, with ``C = 1/(sigma m)`` and
``-B 1`` (LIBLINEAR regularizes its bias too), and scikit-learn's LogisticRegression's with
the same C on X with a column of ones and ``fit_intercept=False``.

Methods (each timed as the median of ``--repeats`` fits on data already in memory):

* ``SDCA``: `onlinepgs.SDCAClassifier(tol=1e-6)`, which stops on its own exact duality
  gap, so the time is a time to a *certified* relative gap;
* ``PGS then SDCA``: the same with ``init="pgs"`` (one PGS pass first, its dual estimate
  as SDCA's start), the PGS pass included in the time;
* ``LIBLINEAR``: its dual coordinate-descent solvers (``-s 7`` logistic, ``-s 3`` hinge)
  and, for the logistic loss, its primal Newton solver (``-s 0``), each over a sweep of
  its own tolerance ``-e``; a run "reaches" 1e-6 when its solution's suboptimality
  ``(F(w) - D*) / F(w)`` is at most 1e-6, D* being the certified lower bound of the
  optimum from SDCA run to a relative gap of 1e-8. The certificate `onlinepgs.duality.gap_of_weights`
  gives for its solution (from w alone, Mairal's dual point) is reported beside it;
* ``LogisticRegression`` (logistic only): lbfgs over a sweep of ``tol``, judged the same way.

``--l1`` mode, pure l_1 by SDCA: Prox-SDCA section 3.2 (l1_geometry="lq") against section
3.1 ("l2"), time to the same certified l_1 gap, and what l1_geometry="auto" picks, on two
data sets:

* generated, the paper's case: m rows with a fraction of the d columns set to +-1 (so
  ||x_i||_inf = 1 while ||x_i||_2^2 is the row's count of entries, hundreds), a sparse true w,
  the squared loss (the Lasso). Section 3.1's step scales with max ||x_i||_2^2, 3.2's with
  (ln d - 1) max ||x_i||_q^2, q = ln d, at most e^2 (ln d - 1) max ||x_i||_inf^2 (the paper's
  3 ln d max ||x_i||_inf^2 up to that constant): far smaller here;
* IMDB (l2-normalised tf-idf rows, with the intercept), logistic loss: ||x_i||_2 = 1, so
  3.1's bound is the smaller one and "auto" should keep it.

Each geometry runs to each relative gap (the certificate P1(w) - D, tol) from scratch; the
runs of one repeat are interleaved (l2, lq, l2, lq ...) and the medians over repeats are
reported with the machine's load average.

Run from the repository root::

    python bench/bench_duality.py --quick               # a9a only, 1 repeat
    python bench/bench_duality.py --out docs/bench/duality.md#certified
    python bench/bench_duality.py --l1 --out docs/bench/duality.md#l1
"""
import argparse
import gzip
import os
import platform
import shlex
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import scipy
import scipy.sparse as sp
import sklearn
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
import onlinepgs  # noqa: E402
from _record import write_record  # noqa: E402
from bench_core import DEFAULT_DATA, core_build, load_dataset, md_table  # noqa: E402
from onlinepgs import SDCAClassifier, SDCARegressor  # noqa: E402
from onlinepgs._core._sdca import SDCAProblem  # noqa: E402
from onlinepgs.duality import gap_of_weights  # noqa: E402

TARGET = 1e-6
# the yardstick optimum: two orders below the target (1e-10 would take ~10^5 hinge epochs)
REFERENCE_TOL = 1e-8
LIBLINEAR_EPS = (1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8)
LBFGS_TOL = (1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-10)
LIBLINEAR_SOLVERS = {"logistic": {"dual (-s 7)": 7, "primal Newton (-s 0)": 0},
                     "hinge": {"dual (-s 3)": 3}}


def primal(w, b, X, y, loss, sigma):
    """F(w) in NumPy, written from the formula (independent of the package)."""
    z = y * (X @ w + b)
    losses = np.logaddexp(0.0, -z) if loss == "logistic" else np.maximum(0.0, 1.0 - z)
    return sigma * 0.5 * (w @ w + b * b) + losses.mean()


def timed(fn, repeats):
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times)), result


def sdca(loss, sigma, tol, init="zero", seed=0):
    return SDCAClassifier(loss=loss, sigma=sigma, tol=tol, init=init, max_epochs=100000,
                          random_state=seed)


def liblinear_runs(X, y, loss, sigma, repeats, d_star):
    from liblinear.liblinearutil import parameter, problem, train
    m = X.shape[0]
    prob = problem(y, X)  # the conversion is outside the timing, as our data is in memory
    rows = []
    for name, solver in LIBLINEAR_SOLVERS[loss].items():
        for eps in LIBLINEAR_EPS:
            param = parameter(f"-s {solver} -c {1.0 / (sigma * m)!r} -e {eps!r} -B 1 -q")
            seconds, model = timed(lambda: train(prob, param), repeats)
            w, b = model.get_decfun()
            w, b = np.asarray(w), float(b)
            if model.get_labels()[0] != 1:  # LIBLINEAR's first label is its positive class
                w, b = -w, -b
            p_w = primal(w, b, X, y, loss, sigma)
            cert = gap_of_weights(w, b, X, y, loss=loss, sigma=sigma)
            rows.append(dict(method=f"LIBLINEAR {name}", setting=f"-e {eps:g}",
                             seconds=seconds, subopt=(p_w - d_star) / p_w,
                             certificate=cert.relative_gap))
    return rows


def lbfgs_runs(X, y, sigma, repeats, d_star):
    m = X.shape[0]
    Xa = sp.hstack([sp.csr_matrix(np.ones((m, 1))), X], format="csr")
    rows = []
    for tol in LBFGS_TOL:
        model = LogisticRegression(C=1.0 / (sigma * m), tol=tol, max_iter=100000,
                                   fit_intercept=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            seconds, model = timed(lambda: model.fit(Xa, y), repeats)
        coef = model.coef_.ravel()
        w, b = coef[1:], coef[0]
        p_w = primal(w, b, X, y, "logistic", sigma)
        cert = gap_of_weights(w, b, X, y, loss="logistic", sigma=sigma)
        rows.append(dict(method="LogisticRegression (lbfgs)", setting=f"tol {tol:g}",
                         seconds=seconds, subopt=(p_w - d_star) / p_w,
                         certificate=cert.relative_gap))
    return rows


def first_reaching(rows, key):
    """The fastest run of each method whose `key` is <= TARGET (None if none reaches)."""
    best = {}
    for row in rows:
        if row[key] <= TARGET:
            if row["method"] not in best or row["seconds"] < best[row["method"]]["seconds"]:
                best[row["method"]] = row
    return best


def run_case(name, X, y, loss, sigma, repeats, out):
    # the yardstick: SDCA to a certified relative gap of REFERENCE_TOL
    ref = sdca(loss, sigma, REFERENCE_TOL).fit(X, y)
    d_star = ref.dual_objective_
    rows = []
    for label, init in (("SDCA", "zero"), ("PGS then SDCA", "pgs")):
        seconds, model = timed(lambda: sdca(loss, sigma, TARGET, init).fit(X, y), repeats)
        p_w = primal(model.coef_.ravel(), float(model.intercept_[0]), X, y, loss, sigma)
        rows.append(dict(method=label, setting=f"tol {TARGET:g}, {model.n_iter_} epochs",
                         seconds=seconds, subopt=(p_w - d_star) / p_w,
                         certificate=model.duality_gap_ / model.primal_objective_))
    rows += liblinear_runs(X, y, loss, sigma, repeats, d_star)
    if loss == "logistic":
        rows += lbfgs_runs(X, y, sigma, repeats, d_star)
    out += [f"### {name}, {loss}, sigma = {sigma:g}", "",
            f"Optimum: F(w*) in [{d_star:.12g}, {ref.primal_objective_:.12g}] "
            f"(SDCA to a relative gap of {REFERENCE_TOL:g}, {ref.n_iter_} epochs).", ""]
    out += md_table(["method", "setting", "seconds", "suboptimality (F(w) - D*)/F(w)",
                     "certified relative gap"],
                    [[r["method"], r["setting"], f"{r['seconds']:.3f}", f"{r['subopt']:.2e}",
                      f"{r['certificate']:.2e}"] for r in rows])
    reach = first_reaching(rows, "subopt")
    base = reach.get("SDCA")
    summary = []
    for method, row in reach.items():
        ratio = row["seconds"] / base["seconds"] if base else float("nan")
        summary.append([method, row["setting"], f"{row['seconds']:.3f}", f"{ratio:.2f}"])
    out += ["", f"Fastest run of each method to suboptimality <= {TARGET:g} (SDCA's is "
            "certified by its own gap), and its time over SDCA's:", ""]
    out += md_table(["method", "setting", "seconds", "time / SDCA's"], summary)
    out.append("")
    return {m: r["seconds"] for m, r in reach.items()}


# ---- --l1 mode ------------------------------------------------------------------------
def generated(m, d, density, k, seed=0):
    """Rows with about density * d entries +-1 at random columns; y = <w, x> + noise with
    a k-sparse w."""
    rng = np.random.RandomState(seed)
    X = sp.random(m, d, density=density, random_state=rng, format="csr")
    X.data = rng.choice([-1.0, 1.0], size=X.nnz)
    w = np.zeros(d)
    w[rng.choice(d, k, replace=False)] = rng.uniform(0.5, 1.5, k) * rng.choice([-1, 1], k)
    y = X @ w + 0.5 * rng.randn(m)
    return X, y


def read_svmlight(path, n_rows):
    from sklearn.datasets import load_svmlight_file

    with gzip.open(path, "rb") as f:
        X, y = load_svmlight_file(f)
    return sp.csr_matrix(X[:n_rows]), y[:n_rows]


def l1_max(X, y, loss):
    """The smallest l1 whose solution is w = 0 (no intercept): ||grad of the mean loss at
    0||_inf, (2/m) X^T y for (z - y)^2, (1/(2m)) X^T y for the logistic loss."""
    factor = 2.0 if loss == "squared" else 0.5
    return factor * float(np.max(np.abs(X.T @ y))) / X.shape[0]


def bounds(X, y, loss, l1, fit_intercept):
    """The two bounds' row factors and auto's choice (the core's rule)."""
    Xc = sp.csr_matrix(X)
    yy = np.where(y > 0, 1.0, -1.0) if loss == "logistic" else y
    prob = SDCAProblem(Xc.data, Xc.indices, Xc.indptr, X.shape[1], yy, np.ones(len(y)),
                       loss=loss, sigma=0.0, l1=l1, fit_intercept=fit_intercept,
                       l1_geometry="auto")
    return prob.bound_l2, prob.bound_lq, prob.l1_geometry


def one_run(cls, X, y, loss, l1, geometry, tol, fit_intercept, max_epochs):
    est = cls(loss=loss, sigma=0.0, l1=l1, tol=tol, l1_geometry=geometry,
              fit_intercept=fit_intercept, max_epochs=max_epochs, random_state=0)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
    seconds = time.perf_counter() - start
    rel = float(np.max(est.duality_gap_ / np.abs(est.primal_objective_)))
    return dict(seconds=seconds, epochs=est.n_iter_, rel=rel, met=rel <= tol,
                nnz=int(np.count_nonzero(est.coef_)), geometry=est.l1_geometry_)


def race(name, cls, X, y, loss, frac, tols, fit_intercept, repeats, max_epochs):
    l1 = frac * l1_max(X, np.where(y > 0, 1.0, -1.0) if loss == "logistic" else y, loss)
    b2, bq, auto = bounds(X, y, loss, l1, fit_intercept)
    print(f"{name}: bound l2 {b2:.4g}, lq {bq:.4g} -> auto picks {auto}", flush=True)
    runs = {(g, t): [] for g in ("l2", "lq") for t in tols}
    for r in range(repeats):
        for tol in tols:
            for geometry in (("l2", "lq") if r % 2 == 0 else ("lq", "l2")):
                res = one_run(cls, X, y, loss, l1, geometry, tol, fit_intercept, max_epochs)
                runs[(geometry, tol)].append(res)
                print(f"  rep {r} tol {tol:g} {geometry}: {res['seconds']:.2f} s, "
                      f"{res['epochs']} epochs, gap {res['rel']:.2e}, nnz {res['nnz']}",
                      flush=True)
    rows = []
    for tol in tols:
        med = {g: statistics.median(x["seconds"] for x in runs[(g, tol)]) for g in ("l2", "lq")}
        ep = {g: statistics.median(x["epochs"] for x in runs[(g, tol)]) for g in ("l2", "lq")}
        met = {g: all(x["met"] for x in runs[(g, tol)]) for g in ("l2", "lq")}
        nnz = {g: runs[(g, tol)][-1]["nnz"] for g in ("l2", "lq")}
        rows.append((tol, med, ep, met, nnz))
    return dict(name=name, b2=b2, bq=bq, auto=auto, rows=rows, shape=X.shape,
                nnz=X.nnz, l1=l1, frac=frac, loss=loss)


def table(res):
    lines = [f"### {res['name']}", "",
             f"{res['shape'][0]} rows x {res['shape'][1]} columns, {res['nnz']} non-zeros, "
             f"loss {res['loss']}, l1 = {res['l1']:.4g} ({res['frac']:g} of the smallest "
             f"l1 with w* = 0), sigma = 0. Bounds' row factors: "
             f"3.1 max ||x||_2^2 = {res['b2']:.4g}, 3.2 (ln d - 1) max ||x||_q^2 = "
             f"{res['bq']:.4g}: **auto picks {res['auto']}**.", "",
             "| relative gap | 3.1 (l2) s | epochs | 3.2 (lq) s | epochs | l2 / lq time | "
             "reached (l2, lq) | non-zeros (l2, lq) |",
             "|---|---|---|---|---|---|---|---|"]
    for tol, med, ep, met, nnz in res["rows"]:
        lines.append(f"| {tol:g} | {med['l2']:.2f} | {ep['l2']:.0f} | {med['lq']:.2f} | "
                     f"{ep['lq']:.0f} | {med['l2'] / med['lq']:.2f}x | "
                     f"{'yes' if met['l2'] else 'NO'}, {'yes' if met['lq'] else 'NO'} | "
                     f"{nnz['l2']}, {nnz['lq']} |")
    return lines


def run_l1(args, argv):
    """--l1: Prox-SDCA's two geometries for pure l_1 (module docstring); returns the
    record's text."""
    load0 = os.getloadavg()
    started = time.perf_counter()
    results = []
    X, y = generated(2000, 5000, 0.1, 20)
    gen = race("generated: +-1 entries, 10% dense, d = 5000, 20 true non-zeros (the "
               "paper's case), no intercept", SDCARegressor, X, y, "squared",
               0.3, (1e-2, 1e-3, 1e-4), False, args.repeats, 5000)
    results.append(gen)
    imdb_path = Path(args.data) / "imdb_train.svm.gz"
    imdb = None
    if imdb_path.exists():
        Xi, yi = read_svmlight(imdb_path, args.imdb_rows)
        imdb = race(f"IMDB train, first {args.imdb_rows} rows (l2-normalised tf-idf, "
                    "intercept)", SDCAClassifier, Xi, yi, "logistic",
                    0.2, (1e-1, 1e-2), True, args.imdb_repeats, 1500)
        results.append(imdb)
    load1 = os.getloadavg()
    command = "python bench/bench_duality.py " + " ".join(sys.argv[1:] if argv is None
                                                          else argv)
    out = ["# SDCA pure l_1: Prox-SDCA section 3.2 against 3.1", "",
           f"Command: `{command}`", "",
           f"Load average (1, 5, 15 min) at the start {load0[0]:.2f} {load0[1]:.2f} "
           f"{load0[2]:.2f}, at the end {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f} (2 "
           "cores shared with other jobs: the ratios of interleaved runs are what counts). "
           f"Medians of {args.repeats} interleaved repeats ({args.imdb_repeats} on IMDB, "
           "at most 1500 epochs there, 5000 on the generated set); each run starts from "
           "alpha = 0 "
           f"and stops at the relative certified l_1 gap (the objective "
           "mean loss + l1 ||w||_1); total "
           f"{time.perf_counter() - started:.0f} s.", ""]
    for res in results:
        out += table(res) + [""]
    # the goals
    last = gen["rows"][-1]
    faster = all(r[1]["lq"] < r[1]["l2"] and r[3]["lq"] for r in gen["rows"])
    out += ["## Goals", "",
            f"- 3.2 faster than 3.1 to the same certified l_1 gap on the generated data "
            f"(every level): **{'MET' if faster else 'NOT MET'}** (at {last[0]:g}: "
            f"{last[1]['l2']:.2f} s vs {last[1]['lq']:.2f} s, "
            f"{last[1]['l2'] / last[1]['lq']:.2f}x).",
            f"- auto picks 3.2 on the generated data: "
            f"**{'MET' if gen['auto'] == 'lq' else 'NOT MET'}** ({gen['auto']})."]
    if imdb is not None:
        right = imdb["auto"] == "l2"
        quicker = all(r[1]["l2"] <= r[1]["lq"] for r in imdb["rows"])
        out.append(f"- auto picks 3.1 on IMDB: **{'MET' if right else 'NOT MET'}** "
                   f"({imdb['auto']}); 3.1 is the faster there: "
                   f"{'yes' if quicker else 'no'}.")
    else:
        out.append("- IMDB absent (--data): auto's choice on it not measured.")
    return "\n".join(out) + "\n"



def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--quick", action="store_true", help="a9a, sigma 1e-4, 1 repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--datasets", default="imdb,a9a")
    parser.add_argument("--losses", default="logistic,hinge")
    parser.add_argument("--sigmas", default="1e-5,1e-4")
    parser.add_argument("--l1", action="store_true", help="pure l_1: Prox-SDCA's geometries "
                        "(sections 3.2 and 3.1) instead of the peers")
    parser.add_argument("--imdb-rows", type=int, default=2000, help="--l1: IMDB's rows")
    parser.add_argument("--imdb-repeats", type=int, default=1, help="--l1: repeats on IMDB, "
                        "where 3.2's runs take the whole max_epochs (1500)")
    parser.add_argument("--out", help="also write the record here (FILE#NAME: as the "
                        "section NAME of FILE, bench/_record.py)")
    args = parser.parse_args(argv)
    if args.l1:
        text = run_l1(args, argv)
        print(text)
        if args.out:
            write_record(args.out, text)
        return
    if args.quick:
        args.repeats, args.datasets, args.sigmas = 1, "a9a", "1e-4"
    import liblinear
    command = shlex.join(["python"] + (sys.argv if argv is None else [sys.argv[0]] + argv))
    out = [f"Command: `{command}`", "",
           f"Python {platform.python_version()}, numpy {np.__version__}, scipy "
           f"{scipy.__version__}, scikit-learn {sklearn.__version__}, liblinear-official "
           f"{getattr(liblinear, '__version__', '?')}, {os.cpu_count()} logical CPUs", "",
           f"onlinepgs {onlinepgs.__version__}, compiled core {core_build()}", "",
           f"Load average (1 min) at start: {os.getloadavg()[0]:.2f}", ""]
    print("\n".join(out), flush=True)
    n_head = len(out)
    summary = []
    for name in args.datasets.split(","):
        X, y, _, _ = load_dataset(name, args.data)
        y = np.where(y > 0, 1.0, -1.0)
        for loss in args.losses.split(","):
            for sigma in (float(s) for s in args.sigmas.split(",")):
                reach = run_case(name, X, y, loss, sigma, args.repeats, out)
                print("\n".join(out[n_head:]), flush=True)
                n_head = len(out)
                sd = reach.get("SDCA")
                ll = min((s for m, s in reach.items() if m.startswith("LIBLINEAR dual")),
                         default=None)
                summary.append([name, loss, f"{sigma:g}",
                                f"{sd:.3f}" if sd else "not reached",
                                f"{ll:.3f}" if ll else "not reached",
                                f"{ll / sd:.2f}" if sd and ll else "-",
                                ("met" if sd and (ll is None or sd <= ll) else "NOT met")])
    out += ["## Summary: SDCA against LIBLINEAR's dual solver, time to suboptimality <= 1e-6",
            ""]
    out += md_table(["data", "loss", "sigma", "SDCA s", "LIBLINEAR dual s",
                     "LIBLINEAR / SDCA", "goal: no slower than LIBLINEAR"], summary)
    out += ["", f"Load average (1 min) at the end: {os.getloadavg()[0]:.2f}"]
    print("\n".join(out[n_head:]))
    if args.out:
        write_record(args.out, "\n".join(out) + "\n")


if __name__ == "__main__":
    main()
