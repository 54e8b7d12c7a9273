"""Pure l_1 by SDCA: Prox-SDCA section 3.2 (l1_geometry="lq") against section 3.1 ("l2"),
time to the same certified l_1 gap, and what l1_geometry="auto" picks.

Usage:
    python bench/bench_sdca_l1.py --out docs/bench/sdca_l1.md [--repeats 3] [--data DIR]

Two data sets:

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
"""
import argparse
import gzip
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from onlinepgs import SDCAClassifier, SDCARegressor
from onlinepgs._core._sdca import SDCAProblem


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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--data", default=os.environ.get("ONLINEPGS_DATA", "../shared/data"))
    ap.add_argument("--imdb-rows", type=int, default=2000)
    ap.add_argument("--imdb-repeats", type=int, default=1,
                    help="3.2's runs on IMDB take the whole max_epochs (1500): one repeat")
    args = ap.parse_args(argv)
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
    command = "python bench/bench_sdca_l1.py " + " ".join(sys.argv[1:] if argv is None
                                                          else argv)
    out = [f"# SDCA pure l_1: Prox-SDCA section 3.2 against 3.1", "",
           f"Command: `PYTHONPATH=. {command}`", "",
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
    text = "\n".join(out) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
