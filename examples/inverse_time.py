"""Figures 5-8 of the paper: time and iterations to fixed test accuracies against m.

The paper's claim (Section V): for a fixed target accuracy, PGS's training time does not
grow, and even shrinks, as the training set grows, while a batch method's (L-BFGS) grows.
This example measures it for the paper's three regularizer-loss pairs, l_2-logistic,
l_1.8-logistic and l_2 least squares (the squared loss ``(z - y)^2`` used as a classifier),
with PGS at k = 1 for p = 2 and, for p = 1.8, at the paper's k = 300 and at k = 1 (the
paper needed k = 300 because its p < 2 steps cost O(n); this package's cost O(nnz)).

Data (``--data``):

* ``imdb``: the IMDB reviews (real; 25,000 training rows, 89,527 tf-idf features,
  the 25,000-row test set); training sizes 1,000 to 25,000.
* ``rcv1``: the RCV1-shaped generator of ``_synthetic.py`` (781,265 training rows, 23,149
  test rows, 47,236 features, 76 non-zeros per row, Zipf feature frequencies, tf-idf rows,
  labels from a planted sparse model with noise); training sizes 25,000 to 781,265.

For each training size m (the first m rows; they are in random order):

1. sigma(m) for each objective is chosen on held-out data: PGS (k = 1) trains on the first
   80% of the m rows for each candidate sigma and the one with the best accuracy on the
   other 20% wins (a hill climb on the grid 10^(j/2), started from the previous size's
   choice). The test set is never used to choose anything. (The paper chose sigma on its
   test set and says itself that this is unsound.) Both p = 1.8 configurations and L-BFGS
   use the sigma of their objective.
2. PGS (the package's defaults: ``iterate="weighted2"``, ``radius="auto"``, an
   intercept) trains on all m rows, shuffled passes fed to `partial_fit` chunk by chunk;
   after each chunk (geometric checkpoints, 25% more steps each time) the test accuracy
   is measured, untimed, and the run stops once the highest target is reached or after
   ``max_passes`` passes. The time to a target is then measured on a replay of the same
   run (same seeds, same row order, so the same PGS path) with `partial_fit` called only
   where targets were first met, free of the checkpoints' per-call overhead. Median over
   the runs of the CPU time and of the steps to each target (a target counts as reached
   if at least half of the runs reach it).
3. L-BFGS (scipy, from 0) minimizes the same objective with the same sigma(m); after each
   iteration the test accuracy is measured, untimed, and it stops at the highest target or
   at convergence.

Run::

    python examples/inverse_time.py --quick --out /tmp/inv              # both data, ~30 s
    python examples/inverse_time.py --data imdb --out docs/paper
    python examples/inverse_time.py --data rcv1 --out docs/paper

Outputs in ``--out``, per data set D: ``inverse_time_D.md`` (summary, with the command),
``inverse_time_D.json`` and, with matplotlib, ``inverse_time_D_time.png`` (CPU seconds to
each target against m: paper Figures 6-8), ``inverse_time_D_steps.png`` (iterations
against m) and ``inverse_time_D_fig5.png`` (time to each accuracy at the largest m:
paper Figure 5).
"""
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _paper import (CONFIGS, DEFAULT_DATA, OBJECTIVES, accuracy, cpu,  # noqa: E402
                    first_reaching, fmt_sigma, hill_climb_sigma, lbfgs, limit_threads, load_imdb,
                    load_rcv1_like, make_pgs, margins, md_table, median_or_none, pgs_replay_cpu,
                    pgs_trace,
                    pyplot, report_header, run_program, tidy_log_axis,
                    wb_accuracy)

SETTINGS = {
    "imdb": dict(sizes=(1000, 2000, 4000, 8000, 16_000, 25_000), targets=(0.85, 0.87, 0.88),
                 select_passes=10, max_passes=30, runs=20, sigma_start=1e-4,
                 levels=np.round(np.arange(0.80, 0.8951, 0.005), 3)),
    "rcv1": dict(n_train=781_265, n_test=23_149,
                 sizes=(25_000, 50_000, 100_000, 200_000, 400_000, 781_265),
                 targets=(0.92, 0.93, 0.94), select_passes=3, max_passes=10, runs=10,
                 sigma_start=1e-5, levels=np.round(np.arange(0.88, 0.9551, 0.005), 3)),
}
QUICK = {
    "imdb": dict(sizes=(1000, 4000), test_rows=5000, targets=(0.80, 0.84), select_passes=3,
                 max_passes=10, runs=3, sigma_start=1e-4, levels=(0.78, 0.80, 0.82, 0.84)),
    "rcv1": dict(n_train=40_000, n_test=5000, sizes=(10_000, 40_000), targets=(0.85, 0.88),
                 select_passes=2, max_passes=6, runs=3, sigma_start=1e-5,
                 levels=(0.83, 0.85, 0.87, 0.88)),
}
def run_dataset(name, settings, data_dir, log):
    t0 = time.perf_counter()
    if name == "imdb":
        Xtr, ytr, Xte, yte = load_imdb(data_dir)
        if settings.get("test_rows"):
            Xte, yte = Xte[:settings["test_rows"]], yte[:settings["test_rows"]]
    else:
        Xtr, ytr, Xte, yte = load_rcv1_like(settings["n_train"], settings["n_test"])
    log(f"{name}: {Xtr.shape[0]} training rows, {Xte.shape[0]} test rows, {Xtr.shape[1]} "
        f"features, {Xtr.nnz / Xtr.shape[0]:.1f} non-zeros per row "
        f"({time.perf_counter() - t0:.0f} s to load)")
    targets = tuple(settings["targets"])
    res = {"data": name, "n_train": Xtr.shape[0], "n_test": Xte.shape[0],
           "n_features": Xtr.shape[1], "nnz_per_row": Xtr.nnz / Xtr.shape[0],
           "targets": targets, "runs": settings["runs"], "max_passes": settings["max_passes"],
           "select_passes": settings["select_passes"], "sizes": [], "levels": list(settings["levels"])}
    start = {o.name: settings["sigma_start"] for o in OBJECTIVES}
    for m in settings["sizes"]:
        X, y = Xtr[:m], ytr[:m]
        entry = {"m": m, "sigma": {}, "holdout": {}, "lbfgs": {}, "pgs": {}}
        for obj in OBJECTIVES:
            s, scores = hill_climb_sigma(obj, X, y, start[obj.name], settings["select_passes"],
                                         seed=m)
            start[obj.name] = s
            entry["sigma"][obj.name] = s
            entry["holdout"][obj.name] = {fmt_sigma(k): v for k, v in sorted(scores.items())}
        log(f"{name} m={m}: sigma " + ", ".join(f"{k} {fmt_sigma(v)}"
                                                for k, v in entry["sigma"].items()))
        for obj in OBJECTIVES:
            out = lbfgs(X, y, obj, entry["sigma"][obj.name], evaluate=wb_accuracy(Xte, yte),
                        stop_at=max(targets), maxiter=1000, ftol=1e-10, gtol=1e-7)
            entry["lbfgs"][obj.name] = {
                "trace": out["trace"], "nit": out["nit"], "nfev": out["nfev"], "cpu": out["cpu"],
                "message": out["message"],
                "final_accuracy": out["trace"][-1][2] if out["trace"] else None}
        log(f"{name} m={m}: L-BFGS done")
        for cfg in CONFIGS:
            sigma = entry["sigma"][cfg.objective.name]
            levels = list(targets) + (list(settings["levels"]) if m == settings["sizes"][-1] else [])
            traces = []
            for r in range(settings["runs"]):
                est = make_pgs(cfg.objective, sigma, cfg.k, seed=r)
                trace = pgs_trace(est, X, y, evaluate=lambda e: accuracy(margins(e, Xte), yte),
                                  stop_at=max(targets), max_passes=settings["max_passes"], seed=r)
                # time the path again without the checkpoints' overhead, stopping at the hits
                hits = [first_reaching(trace, lv) for lv in levels]
                replay = pgs_replay_cpu(make_pgs(cfg.objective, sigma, cfg.k, seed=r), X, y,
                                        [h[0] for h in hits if h is not None], seed=r)
                traces.append({"checkpoints": [(s, rows, a) for s, rows, _, a in trace],
                               "cpu_at": sorted(replay.items())})
            entry["pgs"][cfg.name] = summarize_pgs(traces, targets, settings["runs"], m)
            if m == settings["sizes"][-1]:
                entry["pgs"][cfg.name]["traces"] = traces
        log(f"{name} m={m}: PGS done")
        res["sizes"].append(entry)
    return res


def run_hit(run, target):
    """(steps, rows, CPU seconds) of a PGS run's first checkpoint at ``target``, or None."""
    hit = first_reaching(run["checkpoints"], target)
    return None if hit is None else (hit[0], hit[1], dict(run["cpu_at"])[hit[0]])


def summarize_pgs(runs, targets, n_runs, m):
    """Median CPU seconds, steps and rows to each target, and the fraction of runs reaching it."""
    out = {"best_accuracy": float(np.median([max(c[-1] for c in r["checkpoints"]) for r in runs]))}
    for target in targets:
        hits = [h for h in (run_hit(r, target) for r in runs) if h is not None]
        out[str(target)] = {
            "cpu": median_or_none([h[2] for h in hits], n_runs),
            "steps": median_or_none([h[0] for h in hits], n_runs),
            "passes": (median_or_none([h[1] for h in hits], n_runs) or np.nan) / m,
            "reached": len(hits) / n_runs,
        }
    return out


def lbfgs_hit(entry, obj_name, target):
    tr = entry["lbfgs"][obj_name]["trace"]
    hit = first_reaching(tr, target)
    return None if hit is None else (hit[1], hit[0])  # cpu, iterations


# ---- report ------------------------------------------------------------------------------------
def fmt_s(x):
    if x is None:
        return "-"
    return f"{x:.3f}" if x < 10 else f"{x:.1f}"


def findings(res):
    """Statements computed from the numbers: does time fall (PGS) or grow (L-BFGS) with m?"""
    out = []
    sizes = res["sizes"]
    for target in res["targets"]:
        for cfg in CONFIGS:
            pts = [(e["m"], e["pgs"][cfg.name][str(target)]["cpu"],
                    e["pgs"][cfg.name][str(target)]["steps"]) for e in sizes]
            pts = [p for p in pts if p[1] is not None]
            if len(pts) < 2:
                out.append(f"- {target}, PGS {cfg.name}: reached at fewer than two sizes.")
                continue
            (m0, c0, s0), (m1, c1, s1) = pts[0], pts[-1]
            out.append(f"- {target}, PGS {cfg.name}: first reached at m={m0:,} in {fmt_s(c0)} s "
                       f"({s0:,.0f} steps); at m={m1:,} {fmt_s(c1)} s ({s1:,.0f} steps): "
                       f"time x{c1 / c0:.2f}, steps x{s1 / s0:.2f} for {m1 / m0:.0f}x the data.")
        for obj in OBJECTIVES:
            pts = [(e["m"],) + lbfgs_hit(e, obj.name, target) for e in sizes
                   if lbfgs_hit(e, obj.name, target) is not None]
            if len(pts) < 2:
                out.append(f"- {target}, L-BFGS {obj.name}: reached at fewer than two sizes.")
                continue
            (m0, c0, i0), (m1, c1, i1) = pts[0], pts[-1]
            out.append(f"- {target}, L-BFGS {obj.name}: first reached at m={m0:,} in {fmt_s(c0)} s "
                       f"({i0} iterations); at m={m1:,} {fmt_s(c1)} s ({i1} iterations): "
                       f"time x{c1 / c0:.2f}, iterations x{i1 / i0:.2f}.")
    return out


def write_report(res, argv, out_dir, elapsed, plt):
    d = res["data"]
    what = ("IMDB (shared data, real)" if d == "imdb" else
            "the RCV1-shaped generator (`examples/_synthetic.py`, seed 0)")
    lines = report_header(f"Inverse time dependency on {what}: paper Figures 5-8", argv)
    lines += [
        f"{res['n_train']:,} training rows (the first m are used), {res['n_test']:,} test rows, "
        f"{res['n_features']:,} features, {res['nnz_per_row']:.1f} non-zeros per row. Targets: "
        f"test accuracy {', '.join(map(str, res['targets']))}. PGS: {res['runs']} runs per point, "
        f"`iterate=\"weighted2\"`, at most {res['max_passes']} passes; times are CPU seconds "
        "(one thread, evaluation excluded), medians over the runs; steps are PGS iterations "
        "(k rows each). sigma(m): best held-out accuracy (20% of the m rows) of PGS k=1 after "
        f"{res['select_passes']} passes on the other 80%. L-BFGS: scipy L-BFGS-B from 0 on the "
        "same objective and sigma, stopped at the highest target or at convergence.", ""]
    lines += ["## sigma(m), chosen on held-out data", ""]
    rows = []
    for e in res["sizes"]:
        row = [f"{e['m']:,}"]
        for obj in OBJECTIVES:
            h = e["holdout"][obj.name]
            s = fmt_sigma(e["sigma"][obj.name])
            row.append(f"{s} (held-out {h[s]:.4f}; tried {', '.join(h)})")
        rows.append(row)
    lines += md_table(["m"] + [o.name for o in OBJECTIVES], rows) + [""]
    lines += ["## CPU seconds [PGS steps] to each target accuracy", "",
              "`-`: not reached by half the runs (PGS) or not reached (L-BFGS). "
              "In brackets for L-BFGS: iterations.", ""]
    for target in res["targets"]:
        header = ["m"] + [f"PGS {c.name}" for c in CONFIGS] + [f"L-BFGS {o.name}" for o in OBJECTIVES]
        rows = []
        for e in res["sizes"]:
            row = [f"{e['m']:,}"]
            for cfg in CONFIGS:
                p = e["pgs"][cfg.name][str(target)]
                row.append("-" if p["cpu"] is None else
                           f"{fmt_s(p['cpu'])} [{p['steps']:,.0f}]" +
                           ("" if p["reached"] == 1 else f" ({p['reached']:.0%})"))
            for obj in OBJECTIVES:
                hit = lbfgs_hit(e, obj.name, target)
                row.append("-" if hit is None else f"{fmt_s(hit[0])} [{hit[1]}]")
            rows.append(row)
        lines += [f"### target {target}", ""] + md_table(header, rows) + [""]
    lines += ["## Best test accuracy reached", "",
              "PGS: median over runs of the best checkpoint (runs stop at the highest target); "
              "L-BFGS: at its last iteration.", ""]
    rows = [[f"{e['m']:,}"] + [f"{e['pgs'][c.name]['best_accuracy']:.4f}" for c in CONFIGS]
            + [f"{e['lbfgs'][o.name]['final_accuracy']:.4f} ({e['lbfgs'][o.name]['nit']} it.)"
               for o in OBJECTIVES] for e in res["sizes"]]
    lines += md_table(["m"] + [f"PGS {c.name}" for c in CONFIGS]
                      + [f"L-BFGS {o.name}" for o in OBJECTIVES], rows) + [""]
    lines += ["## Findings (computed from the tables)", ""] + findings(res) + [""]
    lines += [f"Total: {elapsed:.0f} s CPU for this data set."]
    figures = []
    if plt is not None:
        figures = plot(res, plt, out_dir)
        lines += ["", "Figures: " + ", ".join(f"`{f.name}`" for f in figures) + "."]
    (out_dir / f"inverse_time_{d}.md").write_text("\n".join(lines) + "\n")
    (out_dir / f"inverse_time_{d}.json").write_text(json.dumps(res, indent=1, default=float))
    return figures


COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red")


def plot(res, plt, out_dir):
    d = res["data"]
    ms = [e["m"] for e in res["sizes"]]
    paths = []
    for kind, ylabel in (("time", "CPU seconds to target"), ("steps", "iterations to target")):
        fig, axes = plt.subplots(2, 2, figsize=(10, 7.5), sharex=True)
        for ax, cfg in zip(axes.ravel(), CONFIGS):
            for target, color in zip(res["targets"], COLORS):
                key = "cpu" if kind == "time" else "steps"
                ys = [e["pgs"][cfg.name][str(target)][key] for e in res["sizes"]]
                xs = [m for m, v in zip(ms, ys) if v is not None]
                ax.plot(xs, [v for v in ys if v is not None], "o-", color=color,
                        label=f"PGS, acc {target}")
                hits = [lbfgs_hit(e, cfg.objective.name, target) for e in res["sizes"]]
                xs = [m for m, h in zip(ms, hits) if h is not None]
                vals = [h[0] if kind == "time" else h[1] for h in hits if h is not None]
                ax.plot(xs, vals, "s--", color=color, alpha=0.7, label=f"L-BFGS, acc {target}")
            ax.set_xscale("log")
            ax.set_xlim(min(ms) / 1.3, max(ms) * 1.3)
            tidy_log_axis(ax.xaxis)
            if any(len(line.get_xdata()) for line in ax.lines):
                ax.set_yscale("log")
                tidy_log_axis(ax.yaxis)
            else:
                ax.text(0.5, 0.5, "no target reached", ha="center", transform=ax.transAxes)
            ax.set_title(f"{cfg.name}", fontsize=10)
            ax.grid(True, which="both", alpha=0.3)
        for ax in axes[1]:
            ax.set_xlabel("training-set size m")
        for ax in axes[:, 0]:
            ax.set_ylabel(ylabel)
        axes[0, 0].legend(fontsize=7)
        fig.suptitle(f"{d}: {ylabel} against m, sigma(m) chosen on held-out data "
                     f"(PGS median of {res['runs']} runs; L-BFGS {'iterations' if kind == 'steps' else 'CPU s'} dashed)",
                     fontsize=10)
        fig.tight_layout()
        path = out_dir / f"inverse_time_{d}_{kind}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    # Figure 5: time to each accuracy level at the largest m
    last = res["sizes"][-1]
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    levels = res["levels"]
    for cfg, color in zip(CONFIGS, COLORS):
        runs = last["pgs"][cfg.name]["traces"]
        meds = []
        for lv in levels:
            hits = [run_hit(r, lv) for r in runs]
            meds.append(median_or_none([h[2] for h in hits if h is not None], len(runs)))
        xs = [lv for lv, v in zip(levels, meds) if v is not None]
        ax.plot(xs, [v for v in meds if v is not None], "o-", color=color, label=f"PGS {cfg.name}")
    for obj, style in zip(OBJECTIVES, ("k--", "k-.", "k:")):
        tr = last["lbfgs"][obj.name]["trace"]
        hits = [first_reaching(tr, lv) for lv in levels]
        xs = [lv for lv, h in zip(levels, hits) if h is not None]
        ax.plot(xs, [h[1] for h in hits if h is not None], style, label=f"L-BFGS {obj.name}")
    ax.set_yscale("log")
    tidy_log_axis(ax.yaxis)
    ax.set_xlabel("test accuracy")
    ax.set_ylabel("CPU seconds to reach it")
    ax.set_title(f"{d}, m = {last['m']:,}: time to a given accuracy (paper Figure 5)", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = out_dir / f"inverse_time_{d}_fig5.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    paths.append(path)
    return paths


def main(argv=None):
    run_program(__doc__, "inverse_time", run_dataset, write_report, SETTINGS, QUICK, argv,
                quick_help="two small sizes per data set, 3 runs (well under a minute)",
                runs_help="PGS runs per point (default: 20 imdb, 10 rcv1)",
                figures_help="skip the PNGs")


if __name__ == "__main__":
    main()
