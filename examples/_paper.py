"""Shared pieces of the paper's experiments: data, solvers with checkpoints, reports.

Used by ``toy_gaussians.py``, ``inverse_time.py`` and ``table2.py`` (run those, not this).

Conventions, everywhere in these examples:

* The objective is the estimators' (paper eq. 7): ``F(w) = sigma ||w||_p^2 / (2 (p-1)) +
  (1/m) sum_i loss(<w, x_i> + w_0; y_i)``, the intercept ``w_0`` the weight of a constant
  feature of value 1 inside the regularized vector. The squared loss is the paper's
  ``(z - y)^2``, used as a classifier on labels -1/+1 (accuracy of ``sign(z)``).
* Times are CPU seconds of this process (`time.process_time`) with the BLAS limited to
  one thread: the machine is shared, and CPU time is what a busy neighbour disturbs
  least. Evaluations on test data at checkpoints, the copies that put rows in a
  shuffled order, and sigma selection are not counted; the solvers' own input
  checks are.
* PGS is always the package's public estimator, fed with `partial_fit` one chunk per
  checkpoint: the model after a chunk is exactly the model a single call would have
  made (the core is deterministic and chunks are whole mini-batches).
"""
import argparse
import os
import platform
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy
from scipy.optimize import minimize

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))  # the in-place build when run from a checkout
import onlinepgs  # noqa: E402
from onlinepgs import PGSClassifier, PGSRegressor, load_svmlight  # noqa: E402

def _default_data():
    """$ONLINEPGS_DATA, else the first ``shared/data`` directory beside the checkout or one
    level up from it."""
    if os.environ.get("ONLINEPGS_DATA"):
        return Path(os.environ["ONLINEPGS_DATA"])
    for base in (REPO.parent, REPO.parent.parent):
        if (base / "shared" / "data").is_dir():
            return base / "shared" / "data"
    return REPO.parent / "shared" / "data"


DEFAULT_DATA = _default_data()
IMDB_FEATURES = 89_527


# ---- objectives and solver configurations ------------------------------------------------
@dataclass(frozen=True)
class Objective:
    """A regularizer-loss pair of the paper's experiments."""

    name: str
    loss: str
    p: float


@dataclass(frozen=True)
class Config:
    """A PGS configuration: an objective and the mini-batch size k."""

    objective: Objective
    k: int

    @property
    def name(self):
        return f"{self.objective.name} (k={self.k})"


LR2 = Objective("l2-LR", "logistic", 2.0)
LR18 = Objective("l1.8-LR", "logistic", 1.8)
LS2 = Objective("l2-LS", "squared", 2.0)
OBJECTIVES = (LR2, LR18, LS2)
CONFIGS = (Config(LR2, 1), Config(LR18, 300), Config(LR18, 1), Config(LS2, 1))

# Table II of the paper (CCAT, 781,265 training rows): optimal sigma, L-BFGS (QN) accuracy,
# PGS accuracy (median +- std of 20 runs) and PGS training time. k = 1 for p = 2, 300 for 1.8.
PAPER_TABLE2 = {
    "l2-LR": ("1e-6", "0.94799", "0.94735 +- 0.00042", "55 s"),
    "l1.8-LR": ("4e-7", "0.94808", "0.94763 +- 0.00035", "576 s"),
    "l2-LS": ("2e-5", "0.94687", "0.94615 +- 0.00060", "22 s"),
}


def make_pgs(objective, sigma, k=1, seed=0, iterate="weighted2"):
    """The package's estimator for an objective (defaults: radius "auto", intercept)."""
    cls = PGSClassifier if objective.loss == "logistic" else PGSRegressor
    return cls(loss=objective.loss, p=objective.p, sigma=sigma, batch_size=k,
               iterate=iterate, random_state=seed)


def margins(est, X):
    """Real-valued predictions (decision function or regression output)."""
    return est.decision_function(X) if est.loss == "logistic" else est.predict(X)


def accuracy(z, y):
    """Accuracy of sign(z) against labels -1/+1 (z = 0 counts as -1, as `predict` does)."""
    return float(np.mean(np.where(z > 0, 1.0, -1.0) == y))


def objective_value_grad(wb, X, XT, y, objective, sigma):
    """F and its gradient at ``wb = (w_0, w)`` (intercept first), with sparse products.

    ``XT`` is ``X.T`` in CSR, so both products stream through memory in order. For
    p < 2 the regularizer ``||w||_p^2 / (2 (p-1))`` is differentiable everywhere (p > 1);
    its gradient is ``||w||_p^(2-p) |w|^(p-1) sgn(w) / (p-1)``.
    """
    p = objective.p
    z = X @ wb[1:] + wb[0]
    if objective.loss == "logistic":
        yz = y * z
        value = np.logaddexp(0.0, -yz).mean()
        d = -y * np.exp(-np.logaddexp(0.0, yz))        # -y sigmoid(-yz), no overflow
    else:
        r = z - y
        value = np.dot(r, r) / len(y)
        d = 2.0 * r
    d /= len(y)
    grad = np.empty_like(wb)
    grad[0] = d.sum()
    grad[1:] = XT @ d
    if p == 2.0:
        value += 0.5 * sigma * np.dot(wb, wb)
        grad += sigma * wb
    else:
        a = np.abs(wb)
        norm = np.sum(a ** p) ** (1.0 / p)
        value += sigma * norm ** 2 / (2.0 * (p - 1.0))
        if norm > 0:
            grad += sigma * norm ** (2.0 - p) * a ** (p - 1.0) * np.sign(wb) / (p - 1.0)
    return value, grad


def objective_value(est, X, y, sigma):
    """F of a fitted estimator on (X, y)."""
    wb = np.concatenate([np.ravel(est.intercept_), np.ravel(est.coef_)])
    z = margins(est, X)
    loss = np.logaddexp(0.0, -y * z).mean() if est.loss == "logistic" else np.mean((z - y) ** 2)
    p = float(est.p)
    norm = np.sum(np.abs(wb) ** p) ** (1.0 / p)
    return float(sigma * norm ** 2 / (2.0 * (p - 1.0)) + loss)


# ---- timing -------------------------------------------------------------------------------
def limit_threads():
    """One BLAS thread, so that CPU time is one core's time (see the module doc)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # scikit-learn depends on it; be tolerant anyway
        return None
    return threadpool_limits(1)


cpu = time.process_time


# ---- L-BFGS with a trace -----------------------------------------------------------------
def lbfgs(X, y, objective, sigma, *, evaluate=None, stop_at=None, maxiter=2000,
          ftol=1e-12, gtol=1e-8):
    """Minimize F with scipy's L-BFGS-B from w = 0, recording every iteration.

    Parameters
    ----------
    X : csr_matrix, y : ndarray
    objective : Objective
    sigma : float
    evaluate : callable(wb) -> float, optional
        Called after each iteration (e.g. test accuracy); its time is not counted.
    stop_at : float, optional
        Stop as soon as ``evaluate`` returns at least this.
    maxiter, ftol, gtol : L-BFGS-B's options.

    Returns
    -------
    dict with ``wb`` (intercept first), ``fun``, ``nit``, ``nfev``, ``cpu`` (seconds,
    including forming ``X.T``), ``message`` and ``trace``: a list of
    ``(iteration, cpu seconds so far, evaluate's value)``.
    """
    start = cpu()
    XT = X.T.tocsr()
    excluded = 0.0
    trace = []

    def callback(intermediate_result):
        nonlocal excluded
        t0 = cpu()
        value = evaluate(intermediate_result.x) if evaluate is not None else float("nan")
        excluded += cpu() - t0
        trace.append((len(trace) + 1, cpu() - start - excluded, value))
        if stop_at is not None and value >= stop_at:
            raise StopIteration

    res = minimize(objective_value_grad, np.zeros(X.shape[1] + 1),
                   args=(X, XT, y, objective, sigma), jac=True, method="L-BFGS-B",
                   callback=callback,
                   options={"maxiter": maxiter, "ftol": ftol, "gtol": gtol, "maxcor": 10})
    return {"wb": res.x, "fun": float(res.fun), "nit": int(res.nit), "nfev": int(res.nfev),
            "cpu": cpu() - start - excluded, "message": str(res.message), "trace": trace}


def wb_accuracy(X, y):
    """evaluate(wb) for `lbfgs`: the accuracy of sign(X w + w_0) on (X, y)."""
    return lambda wb: accuracy(X @ wb[1:] + wb[0], y)


# ---- PGS with checkpoints ----------------------------------------------------------------
class RowStream:
    """Row indices of successive shuffled passes over m rows (what `fit` does per epoch)."""

    def __init__(self, m, rng):
        self.m, self.rng = m, rng
        self.perm, self.pos = rng.permutation(m), 0

    def take(self, n):
        parts = []
        while n > 0:
            if self.pos == self.m:
                self.perm, self.pos = self.rng.permutation(self.m), 0
            step = min(n, self.m - self.pos)
            parts.append(self.perm[self.pos:self.pos + step])
            self.pos += step
            n -= step
        return np.concatenate(parts) if len(parts) > 1 else parts[0]


def checkpoints(first, ratio, last):
    """Increasing integers first, ~first*ratio, ..., last (geometric, always ending at last)."""
    out, t = [], float(first)
    while int(np.ceil(t)) < last:
        c = int(np.ceil(t))
        if not out or c > out[-1]:
            out.append(c)
        t *= ratio
    out.append(int(last))
    return out


def pgs_trace(est, X, y, *, evaluate, stop_at=None, max_passes=20.0, first_rows=None,
              ratio=1.25, seed=0, at_steps=None, stop_when=None):
    """Train ``est`` on shuffled passes over (X, y), evaluating at geometric checkpoints.

    Parameters
    ----------
    est : PGSClassifier or PGSRegressor (unfitted)
    X, y : the m training rows
    evaluate : callable(est) -> float, not timed
    stop_at : float, optional
        Stop at the first checkpoint where ``evaluate`` reaches it.
    stop_when : callable(value) -> bool, optional
        A general stopping rule on ``evaluate``'s value (instead of ``stop_at``).
    max_passes : float
        Cap on the rows processed, in passes over the m rows.
    first_rows : int, optional
        Rows before the first checkpoint (default: max(50, m / 100), in whole steps).
    ratio : float
        Growth of the step count from one checkpoint to the next.
    seed : int
        Seeds the row order (the estimator has its own random_state).
    at_steps : list of int, optional
        Explicit checkpoints (in steps) instead of the geometric ones.

    Returns
    -------
    list of ``(steps, rows, cpu seconds, evaluate's value)`` per checkpoint.
    """
    m, k = X.shape[0], est.batch_size
    cap = int(np.ceil(max_passes * m / k))
    if at_steps is None:
        first = max(1, int(np.ceil((first_rows or max(50, m // 100)) / k)))
        at_steps = checkpoints(first, ratio, cap)
    trace = []
    for steps, spent in _feed(est, X, y, at_steps, seed):
        value = evaluate(est)
        trace.append((steps, steps * k, spent, value))
        if (stop_at is not None and value >= stop_at) or (stop_when is not None
                                                           and stop_when(value)):
            break
    return trace


def pgs_replay_cpu(est, X, y, at_steps, seed=0):
    """CPU seconds `partial_fit` takes to reach each of ``at_steps``, replaying a run.

    Same row order as `pgs_trace` with the same ``seed`` and an estimator with the same
    parameters and random_state, so the very same PGS path (the core is deterministic and
    chunks are whole mini-batches), but with `partial_fit` called only at the given step
    counts: the time has none of the checkpoints' per-call overhead (input validation, a
    fraction of a millisecond each, which would dominate runs of a few milliseconds).

    Returns
    -------
    dict step count -> cumulative CPU seconds
    """
    return dict(_feed(est, X, y, sorted(set(at_steps)), seed))


def _feed(est, X, y, at_steps, seed):
    """`partial_fit` over the seeded row stream up to each step count of ``at_steps`` in
    turn; yields (steps, cumulative CPU seconds of the partial_fit calls)."""
    k = est.batch_size
    stream = RowStream(X.shape[0], np.random.default_rng(seed))
    kw = {"classes": [-1.0, 1.0]} if est.loss == "logistic" else {}
    steps, spent = 0, 0.0
    for target in at_steps:
        idx = stream.take((target - steps) * k)
        Xc, yc = X[idx], y[idx]
        t0 = cpu()
        est.partial_fit(Xc, yc, **kw)
        spent += cpu() - t0
        steps = target
        yield steps, spent


def first_reaching(trace, target, col_value=-1):
    """The first checkpoint of a trace whose value reaches ``target``, or None."""
    for row in trace:
        if row[col_value] >= target:
            return row
    return None


def median_or_none(values, runs):
    """Median over ``runs`` runs where unreached runs count as +inf; None if over half are."""
    vals = sorted(list(values) + [np.inf] * (runs - len(values)))
    med = np.median(vals) if vals else np.inf
    return None if not np.isfinite(med) else float(med)


# ---- choosing sigma on held-out data -------------------------------------------------------
SIGMA_GRID = tuple(10.0 ** (-j / 2) for j in range(2, 19))  # 1e-1 .. 1e-9


def holdout_split(X, y, holdout=0.2):
    """The first 1 - holdout of the rows to train, the rest to validate (rows are shuffled)."""
    cut = X.shape[0] - max(1, int(round(holdout * X.shape[0])))
    return X[:cut], y[:cut], X[cut:], y[cut:]


def holdout_accuracy(objective, sigma, split, *, passes, seed=0):
    """Accuracy on the held-out rows of PGS (k = 1, package defaults) after ``passes`` passes."""
    Xa, ya, Xv, yv = split
    est = make_pgs(objective, sigma, 1, seed).set_params(max_epochs=passes).fit(Xa, ya)
    return accuracy(margins(est, Xv), yv)


def hill_climb_sigma(objective, X, y, start, passes, seed, holdout=0.2):
    """The sigma of the grid 10^(j/2) with the best accuracy on held-out rows of (X, y).

    The last ``holdout`` fraction of the rows is held out (rows are in random order
    here), PGS (k = 1, the package's defaults) trains ``passes`` passes on the rest, and
    the held-out accuracy decides; ties go to the larger sigma (the faster problem). The
    test set is never looked at. The search walks the grid from ``start``, towards
    larger sigma first, then smaller, stopping where a neighbour is no better: much
    cheaper than the whole grid, and as good where the held-out accuracy is unimodal in
    log sigma (as it is here, up to noise).

    Returns the chosen sigma and every (sigma, held-out accuracy) evaluated.
    """
    grid = list(SIGMA_GRID)
    split = holdout_split(X, y, holdout)
    i = min(range(len(grid)), key=lambda j: abs(np.log(grid[j] / start)))
    scores = {}

    def score(j):
        if grid[j] not in scores:
            scores[grid[j]] = holdout_accuracy(objective, grid[j], split, passes=passes, seed=seed)
        return scores[grid[j]]

    for step in (-1, +1):  # the grid runs from large to small sigma
        while 0 <= i + step < len(grid) and score(i + step) > score(i):
            i += step
    best_acc = max(scores.values())
    best = max(s for s, a in scores.items() if a == best_acc)
    return best, scores


# ---- data ---------------------------------------------------------------------------------
def load_imdb(data_dir):
    """IMDB train/test from the shared data (25,000 rows each, tf-idf, L2-normalised)."""
    data_dir = Path(data_dir)
    Xtr, ytr = load_svmlight(data_dir / "imdb_train.svm.gz", n_features=IMDB_FEATURES)
    Xte, yte = load_svmlight(data_dir / "imdb_test.svm.gz", n_features=IMDB_FEATURES)
    return Xtr, ytr, Xte, yte


def load_rcv1_like(n_train, n_test, seed=0):
    """Rows of the RCV1-shaped generator (`_synthetic.RCV1Like`), train and test streams."""
    from _synthetic import RCV1Like

    gen = RCV1Like(seed=seed)
    Xtr, ytr = gen.sample(n_train, stream=0)
    Xte, yte = gen.sample(n_test, stream=1)
    return Xtr, ytr, Xte, yte


# ---- reports -------------------------------------------------------------------------------
def md_table(header, rows):
    """Lines of a markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def report_header(title, argv):
    """Title, the exact command, versions and machine load, as markdown lines."""
    script = Path(sys.argv[0]).resolve()
    try:
        shown = script.relative_to(REPO)
    except ValueError:
        shown = script
    command = shlex.join(["python", str(shown)] + list(argv))
    return [f"# {title}", "", f"Command: `{command}`", "",
            f"Python {platform.python_version()}, numpy {np.__version__}, scipy "
            f"{scipy.__version__}, onlinepgs {onlinepgs.__version__}, {platform.machine()}, "
            f"{os.cpu_count()} logical CPUs; load average (1 min) at start "
            f"{os.getloadavg()[0]:.2f}", ""]


def pyplot(enabled=True):
    """matplotlib.pyplot with the Agg backend, or None when absent or disabled."""
    if not enabled:
        return None
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def tidy_log_axis(axis):
    """Short labels on a log axis ("0.02", "5k", "2M"), minor ticks labelled at 2 and 5 only."""
    from matplotlib.ticker import FuncFormatter

    def label(v, _pos, minor):
        if v <= 0:
            return ""
        mant = v / 10 ** np.floor(np.log10(v) + 1e-9)
        if minor and round(mant) not in (2, 5):
            return ""
        if v >= 1e6:
            return f"{v / 1e6:g}M"
        return f"{v / 1e3:g}k" if v >= 1e3 else f"{v:g}"

    axis.set_major_formatter(FuncFormatter(lambda v, p: label(v, p, False)))
    axis.set_minor_formatter(FuncFormatter(lambda v, p: label(v, p, True)))


def fmt_sigma(s):
    """1e-05 -> 1e-5, 3.1622e-06 -> 3.2e-6."""
    return f"{s:.2g}".replace("e-0", "e-").replace("e+0", "e")


def run_program(doc, prefix, run_dataset, write_report, settings, quick, argv, *, quick_help,
                runs_help, figures_help):
    """The command line shared by inverse_time.py and table2.py: parse, then for each data
    set run it, write ``{prefix}_{data}.md/.json`` (and figures) and print the summary."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=doc.split("\n\n", 1)[1])
    parser.add_argument("--data", choices=("imdb", "rcv1", "both"), default="both")
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--runs", type=int, help=runs_help)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA,
                        help=f"directory with imdb_*.svm.gz (default {DEFAULT_DATA})")
    parser.add_argument("--out", type=Path, default=Path("."), help="output directory")
    parser.add_argument("--no-figures", action="store_true", help=figures_help)
    args = parser.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    args.out.mkdir(parents=True, exist_ok=True)
    limit_threads()
    wall = time.perf_counter()

    def log(msg):
        print(f"[{time.perf_counter() - wall:6.0f} s] {msg}", flush=True)

    plt = pyplot(not args.no_figures)
    for name in (("imdb", "rcv1") if args.data == "both" else (args.data,)):
        run_settings = dict((quick if args.quick else settings)[name])
        if args.runs:
            run_settings["runs"] = args.runs
        start = cpu()
        res = run_dataset(name, run_settings, args.data_dir, log)
        figures = write_report(res, argv, args.out, cpu() - start, plt)
        print((args.out / f"{prefix}_{name}.md").read_text())
        for f in figures:
            print(f"wrote {f}")
