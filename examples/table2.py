"""Table II of the paper: optimal sigma, L-BFGS accuracy, PGS accuracy and PGS training time.

For each regularizer-loss pair of the paper (l_2-logistic, l_1.8-logistic, l_2 least
squares), on the whole training set:

* **sigma**: chosen on held-out data (PGS k = 1 on 80% of the training rows, accuracy on
  the other 20%, a hill climb over the grid 10^(j/2); never the test set);
* **L-BFGS**: scipy's L-BFGS-B from 0 on the same objective, run to convergence; its
  test accuracy and CPU time, and the duality-gap certificate of its solution (which
  shows it *is* the optimum: `onlinepgs.duality.gap_of_weights`);
* **PGS**: the package's estimator (``iterate="weighted2"``, ``radius="auto"``) trained
  on shuffled passes until its objective is within 1% of L-BFGS's optimum,
  ``F(w) <= 1.01 F*`` (checked after 1, 2, 3, 4, 6, 8, 12, ... passes, untimed), or
  until ``max_passes``; over 20 runs (seeds), the median and standard deviation of the
  test accuracy there, the median CPU time and passes. Also the accuracy after one pass.
  p = 1.8 runs with the paper's k = 300 and with k = 1.

The paper does not say when it stopped PGS for its Table II; "within 1% of the optimal
objective" is a rule on training data only, and it puts PGS's accuracy within about
0.001 of the optimum's on the data here.

Run::

    python examples/table2.py --quick --out /tmp/t2       # ~20 s
    python examples/table2.py --data imdb --out docs/paper
    python examples/table2.py --data rcv1 --out docs/paper

Outputs: ``table2_D.md`` (the table beside the paper's, with the command) and
``table2_D.json``, and with matplotlib ``table2_D.png`` (accuracy against CPU time of
every run and of L-BFGS).
"""
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _paper import (CONFIGS, DEFAULT_DATA, OBJECTIVES, PAPER_TABLE2, accuracy, cpu,  # noqa: E402
                    fmt_sigma, hill_climb_sigma, lbfgs, limit_threads, load_imdb,
                    load_rcv1_like, make_pgs, margins, md_table, objective_value, pgs_trace,
                    pyplot, report_header, run_program, tidy_log_axis)

from onlinepgs.duality import gap_of_weights  # noqa: E402

TOLERANCE = 0.01
CHECK_PASSES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
SETTINGS = {
    "imdb": dict(runs=20, select_passes=10, max_passes=64, sigma_start=1e-5),
    "rcv1": dict(n_train=781_265, n_test=23_149, runs=20, select_passes=3, max_passes=16,
                 sigma_start=1e-6),
}
QUICK = {
    "imdb": dict(train_rows=5000, test_rows=5000, runs=3, select_passes=3, max_passes=8,
                 sigma_start=1e-4),
    "rcv1": dict(n_train=30_000, n_test=5000, runs=3, select_passes=2, max_passes=8,
                 sigma_start=1e-5),
}


def run_dataset(name, settings, data_dir, log):
    t0 = time.perf_counter()
    if name == "imdb":
        Xtr, ytr, Xte, yte = load_imdb(data_dir)
        if settings.get("train_rows"):
            Xtr, ytr = Xtr[:settings["train_rows"]], ytr[:settings["train_rows"]]
            Xte, yte = Xte[:settings["test_rows"]], yte[:settings["test_rows"]]
    else:
        Xtr, ytr, Xte, yte = load_rcv1_like(settings["n_train"], settings["n_test"])
    m = Xtr.shape[0]
    log(f"{name}: {m} training rows, {Xte.shape[0]} test rows ({time.perf_counter() - t0:.0f} s)")
    res = {"data": name, "n_train": m, "n_test": Xte.shape[0], "n_features": Xtr.shape[1],
           "runs": settings["runs"], "max_passes": settings["max_passes"],
           "select_passes": settings["select_passes"], "tolerance": TOLERANCE,
           "objectives": {}, "configs": {}}
    for obj in OBJECTIVES:
        sigma, scores = hill_climb_sigma(obj, Xtr, ytr, settings["sigma_start"],
                                         settings["select_passes"], seed=0)
        out = lbfgs(Xtr, ytr, obj, sigma, maxiter=5000, ftol=1e-12, gtol=1e-9,
                    evaluate=lambda wb: accuracy(Xte @ wb[1:] + wb[0], yte))
        wb = out["wb"]
        cert = gap_of_weights(wb[1:], wb[0], Xtr, ytr, loss=obj.loss, p=obj.p, sigma=sigma)
        res["objectives"][obj.name] = {
            "sigma": sigma, "holdout": {fmt_sigma(k): v for k, v in sorted(scores.items())},
            "lbfgs_accuracy": accuracy(Xte @ wb[1:] + wb[0], yte), "lbfgs_cpu": out["cpu"],
            "lbfgs_nit": out["nit"], "lbfgs_message": out["message"], "fstar": out["fun"],
            "lbfgs_relative_gap": cert.relative_gap,
            "lbfgs_trace": [(c, a) for _, c, a in out["trace"]]}
        log(f"{name} {obj.name}: sigma {fmt_sigma(sigma)}, L-BFGS {out['nit']} iterations, "
            f"{out['cpu']:.1f} s, certified relative gap {cert.relative_gap:.1e}")
    for cfg in CONFIGS:
        o = res["objectives"][cfg.objective.name]
        sigma, fstar = o["sigma"], o["fstar"]
        at = [int(np.ceil(p * m / cfg.k)) for p in CHECK_PASSES if p <= settings["max_passes"]]
        runs = []
        for r in range(settings["runs"]):
            est = make_pgs(cfg.objective, sigma, cfg.k, seed=r)
            trace = pgs_trace(est, Xtr, ytr, at_steps=at, seed=r,
                              evaluate=lambda e: (objective_value(e, Xtr, ytr, sigma) / fstar - 1.0,
                                                  accuracy(margins(e, Xte), yte)),
                              stop_when=lambda v: v[0] <= TOLERANCE)
            steps, rows, spent, (excess, acc) = trace[-1]
            runs.append({"passes": rows / m, "cpu": spent, "excess": excess, "accuracy": acc,
                         "met": excess <= TOLERANCE, "accuracy_1pass": trace[0][3][1],
                         "trace": [(c, v[1]) for _, _, c, v in trace]})
        res["configs"][cfg.name] = runs
        log(f"{name} {cfg.name}: median accuracy {np.median([r['accuracy'] for r in runs]):.4f}, "
            f"median {np.median([r['cpu'] for r in runs]):.2f} s")
    return res


def write_report(res, argv, out_dir, elapsed, plt):
    d = res["data"]
    what = "IMDB (shared data, real)" if d == "imdb" else "the RCV1-shaped generator"
    lines = report_header(f"Table II on {what}", argv)
    lines += [
        f"{res['n_train']:,} training rows, {res['n_test']:,} test rows, {res['n_features']:,} "
        f"features. sigma: best held-out accuracy (PGS k=1, {res['select_passes']} passes on 80% "
        "of the training rows, the other 20% held out). L-BFGS: scipy L-BFGS-B from 0 to "
        "convergence; its certified relative duality gap shows it reached the optimum. PGS: "
        f"{res['runs']} runs, `iterate=\"weighted2\"`, stopped when F(w) <= "
        f"{1 + res['tolerance']:g} F* (checked after 1, 2, 3, 4, 6, 8, ... passes) or after "
        f"{res['max_passes']} passes; accuracy median +- standard deviation, time and passes "
        "medians; CPU seconds, one thread, checks excluded.", ""]
    rows, catch_up = [], []
    for cfg in CONFIGS:
        o = res["objectives"][cfg.objective.name]
        runs = res["configs"][cfg.name]
        acc = np.array([r["accuracy"] for r in runs])
        hit = next(((i + 1, c) for i, (c, a) in enumerate(o["lbfgs_trace"])
                    if a >= np.median(acc)), None)
        catch_up.append([cfg.name, f"{np.median(acc):.5f}",
                         f"{np.median([r['cpu'] for r in runs]):.2f} s",
                         "never" if hit is None else f"{hit[1]:.2f} s ({hit[0]} it.)"])
        acc1 = np.array([r["accuracy_1pass"] for r in runs])
        met = np.mean([r["met"] for r in runs])
        rows.append([cfg.objective.name, cfg.k, fmt_sigma(o["sigma"]), f"{o['lbfgs_accuracy']:.5f}",
                     f"{o['lbfgs_cpu']:.1f} s ({o['lbfgs_nit']} it.)",
                     f"{np.median(acc):.5f} +- {np.std(acc):.5f}",
                     f"{np.median([r['cpu'] for r in runs]):.2f} s",
                     f"{np.median([r['passes'] for r in runs]):.3g}" + ("" if met == 1 else
                                                                     f" ({met:.0%} met)"),
                     f"{np.median(acc1):.5f}"])
    lines += ["## This package", ""]
    lines += md_table(["regularizer-loss", "k", "sigma", "L-BFGS accuracy", "L-BFGS time",
                       "PGS accuracy", "PGS time", "PGS passes", "PGS accuracy, 1 pass"], rows)
    lines += ["", "The L-BFGS time above is to convergence, as the paper's QN column; the time "
              "L-BFGS takes to first reach PGS's median accuracy (from its per-iteration test "
              "accuracy, a measurement, not a choice) is the fairer comparison:", ""]
    lines += md_table(["PGS configuration", "PGS median accuracy", "PGS time",
                       "L-BFGS time to that accuracy"], catch_up)
    lines += ["", "## The paper (CCAT, 781,265 training rows; k = 1 for p = 2, k = 300 for p = 1.8)", ""]
    lines += md_table(["regularizer-loss", "optimal sigma", "QN accuracy", "PGS accuracy",
                       "PGS training time"],
                      [[k] + list(v) for k, v in PAPER_TABLE2.items()])
    lines += ["", "## Checks", ""]
    for obj in OBJECTIVES:
        o = res["objectives"][obj.name]
        lines.append(f"- {obj.name}: L-BFGS {o['lbfgs_message'].lower()}; certified relative gap "
                     f"{o['lbfgs_relative_gap']:.1e}; F* = {o['fstar']:.6f}; held-out accuracy by "
                     "sigma: " + ", ".join(f"{k}: {v:.4f}" for k, v in o["holdout"].items()))
    for cfg in CONFIGS:
        runs = res["configs"][cfg.name]
        o = res["objectives"][cfg.objective.name]
        lines.append(f"- PGS {cfg.name}: median F/F* - 1 at the stop "
                     f"{np.median([r['excess'] for r in runs]):.1e}; median accuracy - L-BFGS's "
                     f"{np.median([r['accuracy'] for r in runs]) - o['lbfgs_accuracy']:+.5f}; "
                     f"time / L-BFGS's {np.median([r['cpu'] for r in runs]) / o['lbfgs_cpu']:.3f}")
    lines += ["", f"Total: {elapsed:.0f} s CPU."]
    figures = []
    if plt is not None:
        figures.append(out_dir / f"table2_{d}.png")
        plot(res, plt, figures[0])
        lines += ["", f"Figure: `{figures[0].name}`."]
    (out_dir / f"table2_{d}.md").write_text("\n".join(lines) + "\n")
    (out_dir / f"table2_{d}.json").write_text(json.dumps(res, indent=1, default=float))
    return figures


def plot(res, plt, path):
    fig, axes = plt.subplots(1, 3, figsize=(14, 4), sharey=True)
    best = max(max(o["lbfgs_accuracy"] for o in res["objectives"].values()),
               max(r["accuracy"] for runs in res["configs"].values() for r in runs))
    low = min(o["lbfgs_accuracy"] for o in res["objectives"].values()) - 0.05
    colors = {1: "tab:blue", 300: "tab:orange"}
    for ax, obj in zip(axes, OBJECTIVES):
        o = res["objectives"][obj.name]
        tr = np.array(o["lbfgs_trace"])
        if len(tr):
            ax.plot(tr[:, 0], tr[:, 1], "k--", label="L-BFGS")
        for cfg in CONFIGS:
            if cfg.objective != obj:
                continue
            for i, run in enumerate(res["configs"][cfg.name]):
                t = np.array(run["trace"])
                ax.plot(t[:, 0], t[:, 1], ".-", color=colors[cfg.k], alpha=0.35, lw=0.8, ms=3,
                        label=f"PGS k={cfg.k} ({len(res['configs'][cfg.name])} runs)" if i == 0 else None)
        ax.set_xscale("log")
        tidy_log_axis(ax.xaxis)
        ax.set_title(f"{obj.name}, sigma {fmt_sigma(o['sigma'])}", fontsize=10)
        ax.set_xlabel("CPU seconds")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_ylim(low, best + 0.005)
    axes[0].set_ylabel("test accuracy")
    fig.suptitle(f"{res['data']}: test accuracy against training time, PGS checkpoints "
                 "(after whole passes) and L-BFGS iterations", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    run_program(__doc__, "table2", run_dataset, write_report, SETTINGS, QUICK, argv,
                quick_help="small subsets, 3 runs (~20 s)", runs_help="PGS runs (default 20)",
                figures_help="skip the PNG")


if __name__ == "__main__":
    main()
