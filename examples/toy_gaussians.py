"""Figure 9 of the paper: iterations of l_2-logistic PGS to a fixed direction error, against m.

The paper's toy sets: two Gaussian classes with the same covariance and different means,
10, 20 and 40 features, up to 200,000 rows. The Bayes-optimal separating direction
``w* = Sigma^-1 (mu_+ - mu_-)`` is known, and PGS (l_2-regularized logistic loss, k = 1) is
run until its weight vector's direction is within 0.05 of it:
``|| w*/||w*|| - w/||w|| ||_2 <= 0.05`` (w without the intercept). The paper plots the
median number of iterations this takes against the training-set size m and finds it
falls as m grows: the inverse time dependency.

Run::

    python examples/toy_gaussians.py --quick --out /tmp/toy     # about 10 s
    python examples/toy_gaussians.py --out docs/paper            # the committed figures

What is measured, exactly:

* Each run draws a fresh training set of m rows (seeded) and trains with `partial_fit`
  on shuffled passes over it, checking the target at geometric checkpoints (every 10%
  more iterations); the iteration count reported is the first checkpoint at or below
  0.05, so it overstates the true count by at most 10%.
* Two iterates of the same run: ``"last"`` (w_T, what the paper's experiments most
  likely used, as Pegasos's did: Figure 1's random iterate is a device of the proof) and
  ``"weighted2"`` (the package's default, the t^2-weighted average).
* sigma(m): the regularized logistic optimum is *not* in the direction of w* (with a
  non-spherical covariance the penalty bends it), so sigma must be small enough for the
  target to be reachable at all, and the smaller it is the more iterations PGS needs.
  The example computes the population optimum for each sigma exactly (Gaussian
  quadrature of the expected loss), takes as grid the largest sigma whose direction
  error is at most 0.8 x 0.05 and five halvings below it, and for each m and iterate
  picks the sigma with the fewest median iterations over pilot runs on their own
  seeds; the figure's medians come from fresh runs. With w* known there is no test
  set to leak into: this is the paper's "optimal sigma(m)" done on the quantity plotted.

Outputs in ``--out``: ``toy_gaussians.md`` (summary and the command), ``toy_gaussians.json``
(every number) and, with matplotlib installed, ``toy_gaussians.png``.
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy.optimize import minimize
from scipy.stats import norm

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _paper import (checkpoints, cpu, limit_threads, md_table, pyplot,  # noqa: E402
                    report_header, tidy_log_axis)

from onlinepgs import PGSClassifier  # noqa: E402

TARGET = 0.05
BAYES_ERROR = 0.10
ITERATES = ("last", "weighted2")
FULL = dict(dims=(10, 20, 40), sizes=(1000, 2000, 5000, 10_000, 20_000, 50_000, 100_000,
                                      200_000),
            n_sigmas=6, pilot=8, runs=50, cap=1_000_000)
QUICK = dict(dims=(10,), sizes=(1000, 10_000, 100_000), n_sigmas=3, pilot=2, runs=5,
             cap=300_000)


# ---- the toy problem -----------------------------------------------------------------------
class ToyProblem:
    """Two Gaussian classes ``N(+mu, Sigma)`` and ``N(-mu, Sigma)``, equally likely.

    Sigma has eigenvalues spread log-uniformly over [0.1, 10] in a random basis, so the
    Bayes direction ``u = Sigma^-1 mu / ||.||`` differs from ``mu``; ``mu`` is scaled so
    the Bayes error is `BAYES_ERROR`. The logistic model is well specified here (the
    class posterior is exactly logistic in x), so without regularization the population
    logistic optimum points along u.

    Parameters
    ----------
    n : int
        Features.
    seed : int
        Seeds Sigma and mu (the problem), not the samples.
    """

    def __init__(self, n, seed=0):
        rng = np.random.default_rng([seed, n])
        Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
        eig = np.logspace(-1, 1, n)
        self.cov = (Q * eig) @ Q.T
        self.chol = np.linalg.cholesky(self.cov)
        mu = rng.standard_normal(n)
        # Mahalanobis distance between the means is 2 sqrt(mu' Sigma^-1 mu); error Phi(-d/2)
        d = 2.0 * np.sqrt(mu @ np.linalg.solve(self.cov, mu))
        self.mu = mu * (2.0 * norm.isf(BAYES_ERROR)) / d
        w = np.linalg.solve(self.cov, self.mu)
        self.u = w / np.linalg.norm(w)
        self.n = n

    def sample(self, m, seed):
        """m rows and labels -1/+1 (one seed, one training set)."""
        rng = np.random.default_rng([seed, self.n, 7])
        y = np.where(rng.random(m) < 0.5, 1.0, -1.0)
        X = y[:, None] * self.mu + rng.standard_normal((m, self.n)) @ self.chol.T
        return X, y

    def error(self, w):
        """|| u - w/||w|| ||_2 (2 for w = 0: no direction yet)."""
        nw = np.linalg.norm(w)
        return float(np.linalg.norm(self.u - w / nw)) if nw > 0 else 2.0

    def population_optimum(self, sigma):
        """(b, w) minimizing ``sigma/2 (b^2 + ||w||^2) + E log(1 + exp(-y(<w, x> + b)))``.

        For x ~ N(y mu, Sigma), ``y(<w, x> + b) ~ N(<w, mu> + y b, w' Sigma w)``, so the
        expected loss is a one-dimensional Gaussian integral per class: Gauss-Hermite
        quadrature makes it exact to rounding.
        """
        g, gw = hermegauss(80)
        gw = gw / gw.sum()

        def f(v):
            b, w = v[0], v[1:]
            Sw = self.cov @ w
            s = np.sqrt(max(w @ Sw, 1e-300))
            val, grad = 0.5 * sigma * (v @ v), sigma * v.copy()
            for y in (1.0, -1.0):
                z = w @ self.mu + y * b + s * g
                val += 0.5 * gw @ np.logaddexp(0.0, -z)
                dl = -np.exp(-np.logaddexp(0.0, z))           # d loss / d z
                e1, eg = gw @ dl, gw @ (dl * g)
                grad[0] += 0.5 * y * e1
                grad[1:] += 0.5 * (e1 * self.mu + eg * Sw / s)
            return val, grad

        res = minimize(f, np.concatenate([[0.0], 0.1 * self.mu]), jac=True, method="L-BFGS-B",
                       options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10_000})
        return res.x

    def bias(self, sigma):
        """Direction error of the population optimum at sigma (the floor for any m)."""
        return self.error(self.population_optimum(sigma)[1:])


def sigma_grid(problem, n_sigmas, allowed):
    """The largest sigma whose population direction error is <= allowed, and halvings."""
    lo, hi = -8.0, 1.0  # log10 sigma: the error falls as sigma falls
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if problem.bias(10**mid) <= allowed else (lo, mid)
    top = 10**lo
    return [top / 2**j for j in range(n_sigmas)]


# ---- one run -------------------------------------------------------------------------------
def iterations_to_target(problem, X, y, sigma, iterates, seed, cap):
    """Iterations until each iterate's direction error is <= TARGET (None if never).

    One estimator per iterate, same sigma and seed, fed the same chunks in lockstep: they
    follow the very same PGS path (the iterate only changes what is read out). A run
    ends when every iterate has reached the target, after ``cap`` iterations, or, when
    the averaged iterate is among them, once it has converged outside the target: after
    at least 20 passes and 100,000 iterations, its error is above the target and less
    than 2% below its value at half as many iterations. The average then sits at the
    empirical optimum of these m rows, whose direction is simply too far from w*
    (too few rows for this sigma); running on could only let the noisy last iterate
    brush the target by chance.
    """
    m = X.shape[0]
    ests = {it: PGSClassifier(loss="logistic", p=2.0, sigma=sigma, iterate=it,
                              random_state=seed) for it in iterates}
    reached = {it: None for it in iterates}
    history = []  # (t, error of the averaged iterate)
    rng = np.random.default_rng([seed, m, 11])
    perm, pos, t = rng.permutation(m), 0, 0
    for stop in checkpoints(10, 1.1, cap):
        while t < stop:
            if pos == m:
                perm, pos = rng.permutation(m), 0
            take = min(stop - t, m - pos)
            idx = perm[pos:pos + take]
            Xc, yc = X[idx], y[idx]
            for it, est in ests.items():
                if reached[it] is None:
                    est.partial_fit(Xc, yc, classes=[-1.0, 1.0])
            pos += take
            t += take
        errors = {it: problem.error(est.coef_.ravel()) for it, est in ests.items()}
        for it, err in errors.items():
            if reached[it] is None and err <= TARGET:
                reached[it] = t
        if all(v is not None for v in reached.values()):
            break
        if reached.get("weighted2", 0) is None:
            history.append((t, errors["weighted2"]))
            if t >= max(20 * m, 100_000):
                half = [e for tt, e in history if tt <= t / 2][-1]
                if errors["weighted2"] > TARGET and errors["weighted2"] >= 0.98 * half:
                    break
    return reached


def median_iters(values):
    """Median with unreached runs as +inf, and the quartiles (inf where unreached)."""
    v = np.array([np.inf if x is None else x for x in values], dtype=float)
    # quartiles as order statistics: interpolating between a count and inf is undefined
    q25, q75 = np.quantile(v, [0.25, 0.75], method="inverted_cdf")
    return float(np.median(v)), float(q25), float(q75), float(np.mean(np.isfinite(v)))


# ---- the experiment --------------------------------------------------------------------------
def run(settings, log):
    results = {"target": TARGET, "bayes_error": BAYES_ERROR, "dims": {}}
    for n in settings["dims"]:
        problem = ToyProblem(n)
        grid = sigma_grid(problem, settings["n_sigmas"], 0.8 * TARGET)
        biases = [problem.bias(s) for s in grid]
        sizes = [m for m in settings["sizes"]]
        mmax = max(sizes)
        log(f"n={n}: sigma grid {['%.3g' % s for s in grid]}, population direction errors "
            f"{['%.3f' % b for b in biases]}")
        # pilot runs choose sigma(m) for each iterate
        pilot = {(m, s): {it: [] for it in ITERATES} for m in sizes for s in grid}
        for r in range(settings["pilot"]):
            Xall, yall = problem.sample(mmax, seed=10_000 + r)
            for m in sizes:
                for s in grid:
                    got = iterations_to_target(problem, Xall[:m], yall[:m], s, ITERATES,
                                               10_000 + r, settings["cap"])
                    for it in ITERATES:
                        pilot[m, s][it].append(got[it])
        chosen = {}
        for m in sizes:
            for it in ITERATES:
                meds = {s: median_iters(pilot[m, s][it])[0] for s in grid}
                best = min(meds.values())
                chosen[m, it] = min((s for s in grid if meds[s] == best), key=lambda s: -s) \
                    if np.isfinite(best) else None
        log(f"n={n}: pilot done")
        # fresh runs at sigma(m)
        final = {(m, it): [] for m in sizes for it in ITERATES}
        for r in range(settings["runs"]):
            Xall, yall = problem.sample(mmax, seed=r)
            for m in sizes:
                for it in ITERATES:
                    s = chosen[m, it]
                    if s is None:
                        final[m, it].append(None)
                        continue
                    got = iterations_to_target(problem, Xall[:m], yall[:m], s, (it,), r,
                                               settings["cap"])
                    final[m, it].append(got[it])
        log(f"n={n}: final runs done")
        results["dims"][n] = {
            "sigma_grid": grid, "population_error": biases,
            "mu_direction_error": problem.error(problem.mu),
            "pilot_median": {it: {str(m): {repr(s): median_iters(pilot[m, s][it])[0]
                                           for s in grid} for m in sizes} for it in ITERATES},
            "sizes": sizes,
            "by_iterate": {it: [dict(zip(("m", "sigma", "median", "q25", "q75", "reached"),
                                         (m, chosen[m, it]) + median_iters(final[m, it])))
                                | {"runs": [x for x in final[m, it]]}
                                for m in sizes] for it in ITERATES},
        }
    return results


# ---- report ------------------------------------------------------------------------------------
def fmt_iters(x):
    return "not reached" if not np.isfinite(x) else f"{x:,.0f}"


def findings(res):
    """Plain statements computed from the numbers (no claim the data do not make)."""
    out = []
    for n, d in res["dims"].items():
        for it in ITERATES:
            rows = [r for r in d["by_iterate"][it] if np.isfinite(r["median"])]
            if len(rows) < 2:
                out.append(f"- n={n}, `{it}`: the target was reached at fewer than two sizes.")
                continue
            first, last = rows[0], rows[-1]
            peak = max(rows, key=lambda r: r["median"])
            tail = [r["median"] for r in rows[-3:]]
            out.append(
                f"- n={n}, `{it}`: first reached (by at least half the runs) at m={first['m']:,}, "
                f"in {fmt_iters(first['median'])} iterations; at m={last['m']:,} "
                f"{fmt_iters(last['median'])}, "
                + (f"{first['median'] / last['median']:.1f}x fewer"
                   if first["median"] >= last["median"]
                   else f"{last['median'] / first['median']:.1f}x more")
                + f"; the most at "
                f"m={peak['m']:,} ({fmt_iters(peak['median'])}); over the three largest sizes "
                f"the median moves within a factor {max(tail) / min(tail):.2f}.")
    return out


def write_report(res, settings, argv, out_dir, elapsed, plt):
    lines = report_header("Toy Gaussians: iterations to a fixed direction error (paper Figure 9)",
                          argv)
    lines += [
        f"Two classes N(+mu, Sigma), N(-mu, Sigma), equally likely, Bayes error {BAYES_ERROR:.0%}; "
        "Sigma's eigenvalues log-uniform in [0.1, 10] in a random basis. "
        f"l_2-logistic PGS (k = 1, intercept, `radius=\"auto\"`), target "
        f"`||w*/||w*|| - w/||w|| ||_2 <= {TARGET}`. Each run: a fresh training set of m rows, "
        "shuffled passes, checkpoints every 10% more iterations (counts overstate by <= 10%). "
        f"Medians over {settings['runs']} runs (quartiles in brackets; unreached runs count "
        f"as infinite, cap {settings['cap']:,} iterations); sigma(m) for each iterate chosen "
        f"as the fewest median iterations over {settings['pilot']} pilot runs on other seeds.",
        ""]
    for n, d in res["dims"].items():
        lines += [f"## n = {n} features", "",
                  f"Direction error of mu itself (the sigma -> infinity limit): "
                  f"{d['mu_direction_error']:.3f}. Population optimum's direction error per sigma "
                  "(a floor no m can beat): "
                  + ", ".join(f"{s:.3g}: {b:.4f}" for s, b in
                              zip(d["sigma_grid"], d["population_error"])), ""]
        header = ["m"]
        for it in ITERATES:
            header += [f"`{it}` sigma", f"`{it}` iterations", f"`{it}` passes", "reached"]
        rows = []
        for i, m in enumerate(d["sizes"]):
            row = [f"{m:,}"]
            for it in ITERATES:
                r = d["by_iterate"][it][i]
                it_s = fmt_iters(r["median"])
                if np.isfinite(r["median"]):
                    it_s += f" [{fmt_iters(r['q25'])}, {fmt_iters(r['q75'])}]"
                row += ["-" if r["sigma"] is None else f"{r['sigma']:.3g}", it_s,
                        f"{r['median'] / m:.2f}" if np.isfinite(r["median"]) else "-",
                        f"{r['reached']:.0%}"]
            rows.append(row)
        lines += md_table(header, rows) + [""]
        lines += ["Pilot medians (iterations, `weighted2` / `last`) for every sigma of the grid: "
                  "the landscape sigma(m) was chosen from.", ""]
        prow = []
        for m in d["sizes"]:
            cells = []
            for s in d["sigma_grid"]:
                a = d["pilot_median"]["weighted2"][str(m)][repr(s)]
                b = d["pilot_median"]["last"][str(m)][repr(s)]
                cells.append(f"{fmt_iters(a)} / {fmt_iters(b)}".replace("not reached", "-"))
            prow.append([f"{m:,}"] + cells)
        lines += md_table(["m"] + [f"sigma {s:.3g}" for s in d["sigma_grid"]], prow) + [""]
    lines += ["## Findings (computed from the table)", ""] + findings(res) + [""]
    lines += [f"Total time: {elapsed:.0f} s CPU."]
    figure = None
    if plt is not None:
        figure = out_dir / "toy_gaussians.png"
        plot(res, plt, figure)
        lines += ["", f"Figure: `{figure.name}`."]
    (out_dir / "toy_gaussians.md").write_text("\n".join(lines) + "\n")
    (out_dir / "toy_gaussians.json").write_text(json.dumps(res, indent=1, default=float))
    return figure


def plot(res, plt, path):
    dims = list(res["dims"])
    fig, axes = plt.subplots(1, len(dims), figsize=(4.6 * len(dims), 3.8), squeeze=False)
    for ax, n in zip(axes[0], dims):
        d = res["dims"][n]
        for it, color in zip(ITERATES, ("tab:red", "tab:blue")):
            rows = [r for r in d["by_iterate"][it] if np.isfinite(r["median"])]
            if not rows:
                continue
            m = np.array([r["m"] for r in rows])
            med = np.array([r["median"] for r in rows])
            lo = med - np.array([r["q25"] for r in rows])
            hi = np.array([r["q75"] for r in rows]) - med
            hi[~np.isfinite(hi)] = 0
            ax.errorbar(m, med, yerr=[lo, hi], marker="o", ms=4, capsize=2, color=color,
                        label=f"iterate={it}")
        ms = np.array(d["sizes"], dtype=float)
        ax.plot(ms, ms, ":", color="gray", label="one pass (iterations = m)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        tidy_log_axis(ax.xaxis)
        tidy_log_axis(ax.yaxis)
        ax.set_xlabel("training-set size m")
        ax.set_title(f"{n} features")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel(f"PGS iterations to direction error <= {res['target']}")
    axes[0][0].legend(fontsize=8)
    fig.suptitle("l2-logistic PGS on the toy Gaussians (paper Figure 9): median iterations, "
                 "quartile bars", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--quick", action="store_true",
                        help="10 features, 3 sizes, 3 sigmas, 2 pilot and 5 final runs (~10 s)")
    parser.add_argument("--out", type=Path, default=Path("."),
                        help="directory for toy_gaussians.md/.json/.png (default: .)")
    parser.add_argument("--runs", type=int, help="final runs per point (default 50; quick 5)")
    parser.add_argument("--no-figures", action="store_true", help="skip the PNG")
    args = parser.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    settings = dict(QUICK if args.quick else FULL)
    if args.runs:
        settings["runs"] = args.runs
    args.out.mkdir(parents=True, exist_ok=True)
    limit_threads()
    start = cpu()
    wall = time.perf_counter()

    def log(msg):
        print(f"[{time.perf_counter() - wall:6.0f} s] {msg}", flush=True)

    res = run(settings, log)
    figure = write_report(res, settings, argv, args.out, cpu() - start,
                          pyplot(not args.no_figures))
    print((args.out / "toy_gaussians.md").read_text())
    if figure:
        print(f"wrote {figure}")


if __name__ == "__main__":
    main()
