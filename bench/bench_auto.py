"""One pass, no tuning: PGS over a grid of fixed sigma (and ``sigma="auto"`` where the
package has it) against Vowpal Wabbit and scikit-learn's SGD, the figures of issue 34.

Parts (``--parts``, comma-separated; all by default):

* ``grid``: for each classification set, one pass (file order, `partial_fit` once) of
  ``PGSClassifier(sigma=s)`` with its other defaults (logistic loss, p = 2, the
  t^2-weighted average ``iterate="weighted2"``) for every s of ``--sigmas``: test log loss
  and accuracy, fit time (in memory), and the progressive loss at the end of the pass of
  the last iterate (the core's ``online_stats_``) and of the averaged model (the reported
  one: every row scored by the average before the row trains, replayed here row by row
  through the solver state, exact; ``--no-replay`` skips it), both also over the second
  half of the rows (n//2..), where the average has settled; an auto run's ``sigma_`` and
  ``sigma_path_``;
* ``vw``: Vowpal Wabbit's one pass with its defaults and the logistic loss
  (``--oaa K --probabilities`` for multiclass) over the same rows in the same order in its
  text format: test log loss, accuracy and the final ``average loss`` of its progress table;
* ``sgd``: scikit-learn's ``SGDClassifier()`` (hinge) and ``SGDClassifier(loss="log_loss")``
  with their defaults (several epochs: ``max_iter=1000, tol=1e-3``, shuffled) and one pass
  (``max_iter=1, tol=None``), ``random_state=0``;
* ``regression``: ``PGSRegressor(sigma=s)`` one pass, squared and huber loss, test R^2
  over the grid, a constant prediction's R^2 (the training mean), least squares
  (``Ridge(alpha=1e-3)``, for scale) and ``SGDRegressor()`` with its defaults and one pass,
  on two real regression sets (see `flights_distance` and `regression_set`);
* ``cost`` (needs ``sigma="auto"``): the cost ratio auto / fixed sigma = 1e-4, medians of
  ``--repeats`` interleaved runs, in memory (one pass: `partial_fit`; and ``fit`` with its
  defaults) on IMDB and a9a, and whole processes ``onlinepgs train FILE -o m.pgs --quiet``
  with and without ``--sigma auto`` from plain text;
* ``commands``: whole processes, defaults (and ``--sigma auto`` where the package has it):
  ``onlinepgs train`` (its progress table's final average loss) then ``onlinepgs eval``
  (test log loss) against VW's driver in a Python process (``VW_TRAIN``: one pass,
  without ``--quiet`` for its table) on a9a and IMDB text;
* ``goals``: issue 34's goals tabulated from the parts run in the same call (auto against
  the best fixed sigma, VW, the better SGD default; regression: against the best fixed
  sigma and a constant);
* ``geometry``: the adaptive geometry (``geometry="adaptive"``, eta raced ("auto"), 0.1,
  0.5 and 2) and the global default against VW and VW ``--ftrl``, one pass over the same
  VW text files (a9a, w8a, IMDB, news20 binary, the flight log with raw numbers,
  TalkingData; `geometry_files`), 2^18 hashed columns: test log loss and AUC;
* ``geometry_p``: the adaptive geometry at p = 1.5 (one scalar stabilizer; eta raced over
  p < 2's rates, and each of them) against p = 2 (eta raced), one pass over the same VW
  files of a9a and w8a: test log loss and AUC;
* ``geometry_l1``: l1 in the adaptive geometry (defaults, an l1 grid) on IMDB and news20
  binary: test accuracy and non-zero weights;
* ``race_cost``: the adaptive geometry's races of eta and sigma against one run at a
  fixed eta and sigma on IMDB, each race at n_jobs 1 and 2 (wall and CPU time,
  ``--repeats`` interleaved rounds);
* ``raw_squared`` (issue 52): small raw regression streams (`raw_stream`: a target
  exactly x1 + x2 over two binary features, targets in the tens over raw counts, one
  feature of 1e9 on 5% of the rows), 2,000 rows, seeds 0-2, as VW text: the progressive
  average loss of one pass of ``onlinepgs train --loss squared`` (the global default
  and the adaptive geometry, eta raced and at 0.1, 0.5 and 2) against VW's default
  (``--loss_function squared``), from their own summaries;
* ``sorted`` (issue 52): a9a and IMDB with the training rows sorted by label and the
  same rows shuffled, one pass: test log loss and AUC of the global geometry, the
  adaptive one (eta raced, 0.1, 0.5 and 2; and eta raced with its averaged iterates
  weighted2 and average) and VW's default;
* ``weights`` (issue 52): a9a and IMDB with every +1 row of importance weight k (3, 30)
  and with every +1 row written k times in its place: test log loss and AUC of the
  global geometry, the adaptive one (eta raced, 0.5) and VW's default.

Classification sets: a9a (train/test), w8a (shuffled with seed 0, 30% held out), IMDB
(train/test), news20 multiclass (shuffled with seed 0, 30% held out). Regression: the
flight-delay log's ``Distance`` from its other columns one-hot (seeded 70/30) and
scikit-learn's bundled diabetes data (seeded 70/30).

The data directory is ``--data-dir`` (else $ONLINEPGS_DATA) holding the files
``a9a.svm.gz a9a.t.svm.gz w8a.svm.gz imdb_train.svm.gz imdb_test.svm.gz
news20_multiclass.svm.gz flight_delays_100k.csv.gz``. It measures the onlinepgs that Python
imports (and the command ``python -m onlinepgs.cli`` in subprocesses): run from the
repository root with ``PYTHONPATH=.`` for the checkout's::

    python bench/bench_auto.py --data-dir DATA --parts grid,vw,sgd,regression
    python bench/bench_auto.py --data-dir DATA --no-replay --parts grid,vw,sgd,regression,goals \\
        --sigmas auto,1e-1,3e-2,1e-2,3e-3,1e-3,3e-4,1e-4,3e-5,1e-5,3e-6,1e-6,3e-7,1e-7
    python bench/bench_auto.py --data-dir DATA --parts cost,commands --sets a9a,imdb

Prints a markdown table per part and, with ``--json FILE``, writes the record as JSON
(docs/benchmarks.md gives each command's record file).
"""
import argparse
import contextlib
import csv
import gzip
import io
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

# the onlinepgs measured is the one Python imports: PYTHONPATH=. for a checkout's
REPO = Path(__file__).resolve().parents[1]
from onlinepgs import PGSClassifier, PGSRegressor, load_svmlight  # noqa: E402

DECADES = [10.0 ** -k for k in range(1, 8)]
HALVES = [3 * 10.0 ** -k for k in range(2, 8)]
CLASSIFICATION = {
    # name: (train file, test file or None (seeded split), n_features)
    "a9a": ("a9a.svm.gz", "a9a.t.svm.gz", 123),
    "w8a": ("w8a.svm.gz", None, 300),
    "imdb": ("imdb_train.svm.gz", "imdb_test.svm.gz", 89527),
    "news20": ("news20_multiclass.svm.gz", None, 62061),
}
REGRESSION = ("flights_distance", "diabetes")
SPLIT_SEED, TEST_FRACTION = 0, 0.3


# ---- data --------------------------------------------------------------------------------
def split(n, seed=SPLIT_SEED, test_fraction=TEST_FRACTION):
    """(train rows, test rows) of a seeded shuffle: the training rows in shuffled order."""
    perm = np.random.RandomState(seed).permutation(n)
    n_train = n - int(round(test_fraction * n))
    return perm[:n_train], perm[n_train:]


def classification_set(data_dir, name):
    """(X, y, X_test, y_test, classes) of a classification set, training rows in pass order."""
    train, test, n_features = CLASSIFICATION[name]
    X, y = load_svmlight(Path(data_dir) / train, n_features=n_features)
    if test is not None:
        X_test, y_test = load_svmlight(Path(data_dir) / test, n_features=n_features)
    else:
        tr, te = split(X.shape[0])
        X, y, X_test, y_test = X[tr], y[tr], X[te], y[te]
    X.sort_indices()
    X_test.sort_indices()
    return X, y, X_test, y_test, np.unique(np.concatenate([y, y_test]))


def flights_distance(data_dir):
    """The flight log's Distance (miles) from its other columns, one-hot.

    A real quantity, not a label made up: the great-circle distance of a route is set by
    its two airports, which a linear model of one-hot Origin and Dest can approximate
    only additively (a + b per airport), so the fit is good but not perfect; the carrier,
    date and departure hour add weak signal. 100,000 rows, ~650 sparse features: the
    streaming, categorical setting PGS is for. The delay label is left out.
    """
    with gzip.open(Path(data_dir) / "flight_delays_100k.csv.gz", "rt") as f:
        rows = list(csv.DictReader(f))
    columns = ("Month", "DayofMonth", "DayOfWeek", "UniqueCarrier", "Origin", "Dest", "hour")
    vocab, indices, target = {}, [], []
    for r in rows:
        r["hour"] = str(int(r["DepTime"]) // 100)
        indices.append(sorted(vocab.setdefault(f"{c}={r[c]}", len(vocab)) for c in columns))
        target.append(float(r["Distance"]))
    indptr = np.arange(0, len(columns) * (len(rows) + 1), len(columns))
    X = sp.csr_matrix((np.ones(indptr[-1]), np.concatenate(indices), indptr),
                      shape=(len(rows), len(vocab)))
    return X, np.asarray(target)


def regression_set(data_dir, name):
    """(X, y, X_test, y_test) of a regression set (seeded 70/30 split, training rows in
    shuffled order)."""
    if name == "flights_distance":
        X, y = flights_distance(data_dir)
    else:
        from sklearn.datasets import load_diabetes
        X, y = load_diabetes(return_X_y=True)
    tr, te = split(X.shape[0])
    return X[tr], y[tr], X[te], y[te]


# ---- PGS ---------------------------------------------------------------------------------
def logistic_losses(z, y_pm):
    """log(1 + exp(-y z)), summed over the problems (the core's progressive loss)."""
    return np.logaddexp(0.0, -y_pm * z).sum(axis=-1)


def _last(stats, key):
    """The last iterate's progressive figure: ``key + "_last"`` where the package keeps the
    reported model's under ``key`` (issue 34), else ``key``."""
    return stats.get(key + "_last", stats[key])


def replay_progressive(est, X, y, classes):
    """(averaged model's, last iterate's) progressive loss and mistakes of one pass of
    ``est`` (a fresh classifier) over X in order, every row scored by each iterate before
    it trains: one row at a time through the solver state, so exact.

    The last iterate's figures are the core's own statistic, recomputed here: the replay
    checks itself against ``online_stats_``.
    """
    est.partial_fit(X[:1], y[:1], classes=classes)
    state = est._state
    y_core, n_problems, multiclass, _ = est._encode_targets(X, y, fit=False)
    y_core = np.ascontiguousarray(y_core, dtype=np.float64)
    sw = np.ones(X.shape[0])
    icpt = est.intercept_scaling if est.fit_intercept else 0.0
    K = n_problems

    def y_pm(i):
        if multiclass:
            v = -np.ones(K)
            v[int(y_core[i])] = 1.0
            return v
        return np.array([y_core[i]])

    def score(W, i, yi):
        lo, hi = X.indptr[i], X.indptr[i + 1]
        z = X.data[lo:hi] @ W[1 + X.indices[lo:hi]] + W[0] * icpt
        wrong = (np.argmax(z) != int(y_core[i])) if multiclass else ((z[0] > 0) != (yi[0] > 0))
        return logistic_losses(z, yi), int(wrong)

    # the last iterate is the core's own statistic: recomputed (as a check of the replay)
    # where reading the weights is cheap
    check_last = X.shape[1] * K <= 10_000
    zero = np.zeros(K)
    # row 0 meets the zero model: margins 0, the core's argmax the first class
    first_wrong = int(y_core[0]) != 0 if multiclass else y_core[0] > 0
    sums = {"avg": [float(logistic_losses(zero, y_pm(0))), int(first_wrong)]}
    sums["last"] = list(sums["avg"])
    half = X.shape[0] // 2
    for i in range(1, X.shape[0]):
        if i == half:  # the second half's figures: the sums so far set aside
            at_half = {key: list(v) for key, v in sums.items()}
            at_half["core"] = state.stats_dict()
        yi = y_pm(i)
        for key, which in (("avg", None), ("last", "last"))[:2 if check_last else 1]:
            loss, wrong = score(state.weights(which), i, yi)
            sums[key][0] += loss
            sums[key][1] += wrong
        state.run(X.data, X.indices, X.indptr, X.shape[1], y_core, sw,
                  np.array([i], dtype=np.int64), True, None)
    n = X.shape[0]
    core = state.stats_dict()
    # the margins are summed in another order than the core's: equal to rounding, which
    # flips the signs of margins within rounding of 0 (at tiny sigma the saturated steps
    # are exact multiples of 1/(sigma t): margins cancel to about 0 on some rows)
    # the last iterate's figures: "*_last" where the core also keeps the reported model's
    last_loss, last_mistakes = _last(core, "progressive_loss"), _last(core, "progressive_mistakes")
    check = abs(sums["last"][0] / n - last_loss) / last_loss
    flips = abs(sums["last"][1] - last_mistakes)
    if check_last and (check > 1e-7 or flips > max(2, n // 100)):
        raise RuntimeError(f"replay disagrees with the core: {sums['last']} vs {core}")
    before = at_half["core"]
    last_half = last_loss * n - _last(before, "progressive_loss") * half
    return {"progressive_loss_avg": sums["avg"][0] / n,
            "progressive_error_avg": sums["avg"][1] / n,
            # rows n//2.. only: the later rows, where the average has settled
            "progressive_loss_avg_2nd_half": (sums["avg"][0] - at_half["avg"][0]) / (n - half),
            "progressive_loss_last_2nd_half": last_half / (n - half)}


def pgs_one_pass(X, y, X_test, y_test, classes, sigma, replay=True):
    """One pass of PGSClassifier(sigma=sigma), defaults otherwise: its figures."""
    from sklearn.metrics import log_loss
    clf = PGSClassifier(sigma=sigma)
    start = time.perf_counter()
    try:
        clf.partial_fit(X, y, classes=classes)
    except Exception as exc:  # a diverged run is a figure too
        return {"sigma": sigma, "requested": sigma, "error": f"{type(exc).__name__}: {exc}"}
    seconds = time.perf_counter() - start
    stats = clf.online_stats_
    out = {"sigma": float(getattr(clf, "sigma_", sigma)), "requested": sigma,
           "fit_seconds": seconds,
           "test_log_loss": float(log_loss(y_test, clf.predict_proba(X_test), labels=classes)),
           "test_accuracy": float(clf.score(X_test, y_test)),
           "progressive_loss_last": float(stats.get("progressive_loss_last",
                                                    stats["progressive_loss"])),
           "progressive_error_last": _last(stats, "progressive_mistakes") / stats["n_examples"]}
    if "progressive_loss_last" in stats:  # the package keeps the reported model's too
        out["progressive_loss_core"] = float(stats["progressive_loss"])
    if sigma == "auto":
        out["sigma_path"] = json.loads(json.dumps(clf.sigma_path_, default=_plain))
    if replay and sigma != "auto":
        out.update(replay_progressive(PGSClassifier(sigma=sigma), X, y, classes))
    return out


def _plain(value):
    """A NumPy value as JSON's (for the race's record)."""
    return value.tolist() if hasattr(value, "tolist") else str(value)


def has_auto():
    """Whether this onlinepgs takes sigma="auto" (issue 34)."""
    try:
        PGSClassifier(sigma="auto").partial_fit(np.eye(2), [0, 1], classes=[0, 1])
        return True
    except Exception:
        return False


# ---- peers -------------------------------------------------------------------------------
def write_vw(path, X, y):
    """X, y in VW's text format (``label |f idx:val``, 1-based indices as in svmlight)."""
    with open(path, "w") as f:
        for i in range(X.shape[0]):
            lo, hi = X.indptr[i], X.indptr[i + 1]
            feats = " ".join(f"{j + 1}:{v:.17g}" for j, v in zip(X.indices[lo:hi], X.data[lo:hi]))
            label = int(y[i]) if y[i] == int(y[i]) else y[i]
            f.write(f"{label} |f {feats}\n")


VW_TRAIN = ("import sys, vowpalwabbit; ws = vowpalwabbit.Workspace(sys.argv[1]); "
            "ws.run_parser(); ws.finish()")


def vw_pass(workdir, X, y, X_test, y_test, classes):
    """VW one pass, defaults, logistic loss: test log loss, accuracy, its table's final
    average loss and the seconds of the training process."""
    train, test = Path(workdir) / "train.vw", Path(workdir) / "test.vw"
    model, pred = Path(workdir) / "model.vw", Path(workdir) / "pred.txt"
    write_vw(train, X, y)
    write_vw(test, X_test, y_test)
    multi = len(classes) > 2
    opts = f"--oaa {len(classes)} --probabilities " if multi else ""
    start = time.perf_counter()
    run = subprocess.run([sys.executable, "-c", VW_TRAIN,
                          f"-d {train} {opts}--loss_function logistic -f {model}"],
                         capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - start
    subprocess.run([sys.executable, "-c", VW_TRAIN,
                    f"-d {test} -i {model} -t --quiet -p {pred}" + (" --probabilities" * multi)],
                   check=True)
    average = float(re.findall(r"average loss = ([-\d.e+]+)", run.stderr)[-1])
    if multi:
        # "class:probability" pairs per line (probabilities normalised over the classes)
        proba = np.array([[float(p.split(":")[1]) for p in line.split()]
                          for line in open(pred)])
        labels = np.arange(1, len(classes) + 1)
    else:
        proba = 1.0 / (1.0 + np.exp(-np.loadtxt(pred)))
        proba = np.column_stack([1 - proba, proba])
        labels = np.array([-1.0, 1.0])
    return {"test_log_loss": log_loss_clipped(y_test, proba, labels),
            "test_accuracy": float(np.mean(labels[np.argmax(proba, axis=1)] == y_test)),
            "progress_average_loss": average, "train_seconds": seconds}


def log_loss_clipped(y, proba, labels):
    from sklearn.metrics import log_loss
    proba = np.clip(proba, 1e-15, 1.0)
    return float(log_loss(y, proba / proba.sum(axis=1, keepdims=True), labels=labels))


def sgd_runs(X, y, X_test, y_test, classes):
    """SGDClassifier hinge and log_loss, defaults (several epochs) and one pass."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import SGDClassifier
    out = []
    for loss in ("hinge", "log_loss"):
        for label, kw in (("defaults", {}), ("one pass", {"max_iter": 1, "tol": None})):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                start = time.perf_counter()
                clf = SGDClassifier(loss=loss, random_state=0, **kw).fit(X, y)
                seconds = time.perf_counter() - start
            row = {"loss": loss, "setting": label, "epochs": int(clf.n_iter_),
                   "fit_seconds": seconds, "test_accuracy": float(clf.score(X_test, y_test))}
            if loss == "log_loss":
                row["test_log_loss"] = log_loss_clipped(y_test, clf.predict_proba(X_test),
                                                        clf.classes_)
            out.append(row)
    return out


# ---- parts -------------------------------------------------------------------------------
def fmt(v, spec=".4f"):
    return "-" if v is None else (format(v, spec) if isinstance(v, float) else str(v))


def part_grid(args, record, out):
    out += ["## One pass of PGSClassifier(sigma=s), defaults otherwise", "",
            "file order, `partial_fit` once; progressive figures at the end of the pass "
            "(news20: summed over the 20 one-vs-rest problems, as the core keeps them)", "",
            "| set | sigma | test log loss | test accuracy | prog. loss, last iterate | "
            "prog. loss, averaged (reported) | prog. error last / avg | "
            "2nd half prog. loss last / avg | fit s |",
            "|---|---|---|---|---|---|---|---|---|"]
    for name in args.sets:
        if name not in CLASSIFICATION:
            continue
        X, y, X_test, y_test, classes = classification_set(args.data_dir, name)
        rows = []
        for sigma in args.sigmas:
            r = pgs_one_pass(X, y, X_test, y_test, classes, sigma,
                             replay=args.replay and (name != "news20" or sigma in DECADES))
            r["set"] = name
            rows.append(r)
            if "error" in r:
                out.append(f"| {name} | {sigma} | {r['error'][:60]} | | | | | | |")
                continue
            s = f"auto ({r['sigma']:g})" if sigma == "auto" else f"{sigma:g}"
            out.append(
                f"| {name} | {s} | {r['test_log_loss']:.4f} | {r['test_accuracy']:.4f} | "
                f"{r['progressive_loss_last']:.4f} | "
                f"{fmt(r.get('progressive_loss_avg', r.get('progressive_loss_core')))} | "
                f"{r['progressive_error_last']:.4f} / {fmt(r.get('progressive_error_avg'))} | "
                f"{fmt(r.get('progressive_loss_last_2nd_half'))} / "
                f"{fmt(r.get('progressive_loss_avg_2nd_half'))} | {r['fit_seconds']:.3f} |")
            print(out[-1], file=sys.stderr, flush=True)
        fixed = [r for r in rows if "error" not in r and r["requested"] != "auto"]
        if fixed:
            best = min(fixed, key=lambda r: r["test_log_loss"])
            out.append(f"| {name} | best fixed: {best['sigma']:g} | **{best['test_log_loss']:.4f}**"
                       f" | {best['test_accuracy']:.4f} | | | | | |")
        record.setdefault("grid", []).extend(rows)
    out.append("")


def part_vw(args, record, out):
    out += ["## Vowpal Wabbit, one pass, defaults, logistic loss (same rows, same order)", "",
            "| set | test log loss | test accuracy | table's final average loss | train s |",
            "|---|---|---|---|---|"]
    for name in args.sets:
        if name not in CLASSIFICATION:
            continue
        X, y, X_test, y_test, classes = classification_set(args.data_dir, name)
        with tempfile.TemporaryDirectory() as workdir:
            r = vw_pass(workdir, X, y, X_test, y_test, classes)
        r["set"] = name
        record.setdefault("vw", []).append(r)
        out.append(f"| {name} | {r['test_log_loss']:.4f} | {r['test_accuracy']:.4f} | "
                   f"{r['progress_average_loss']:.4f} | {r['train_seconds']:.2f} |")
        print(out[-1], file=sys.stderr, flush=True)
    out.append("")


# ---- the adaptive geometry against VW on VW files (issue 52's sets) -----------------------
GEOMETRY_SETS = ("a9a", "w8a", "imdb", "news20_binary", "flights_raw", "talkingdata")
# news20's technical groups (comp.*, misc.forsale, sci.*: LIBSVM classes 2-7, 12-15)
# against the ten others, raw counts
NEWS20_POSITIVE = (2, 3, 4, 5, 6, 7, 12, 13, 14, 15)
GEOMETRY_BITS = 18


def _csv_rows(path):
    with gzip.open(path, "rt", newline="") as f:
        return list(csv.DictReader(f))


def geometry_files(data_dir, name, workdir):
    """(train.vw, test.vw) of a set in VW's text format, as everyone reads it: the
    svmlight sets' features in one namespace (w8a a seeded 70/30 split of the shuffled
    rows); the flight log with DepTime and Distance as raw numbers and the rest
    categorical; TalkingData's clicks with bench_command.py's categorical columns and the
    click's hour (both a seeded 70/30 split); news20's raw counts, its technical groups
    against the others (`NEWS20_POSITIVE`, the multiclass set's seeded 70/30 split)."""
    train, test = Path(workdir) / f"{name}_train.vw", Path(workdir) / f"{name}_test.vw"
    if name == "news20_binary":
        X, y, X_test, y_test, _ = classification_set(data_dir, "news20")
        write_vw(train, X, np.where(np.isin(y, NEWS20_POSITIVE), 1, -1))
        write_vw(test, X_test, np.where(np.isin(y_test, NEWS20_POSITIVE), 1, -1))
        return train, test
    if name in CLASSIFICATION:
        X, y, X_test, y_test, _ = classification_set(data_dir, name)
        write_vw(train, X, np.where(y > 0, 1, -1))
        write_vw(test, X_test, np.where(y_test > 0, 1, -1))
        return train, test
    if name == "flights_raw":
        rows = _csv_rows(Path(data_dir) / "flight_delays_100k.csv.gz")

        def line(r):
            return (f"{1 if r['dep_delayed_15min'] == 'Y' else -1} |month {r['Month']} "
                    f"|day {r['DayofMonth']} |weekday {r['DayOfWeek']} |hour "
                    f"DepTime:{r['DepTime']} |carrier {r['UniqueCarrier']} |from "
                    f"{r['Origin']} |to {r['Dest']} |span Distance:{r['Distance']}\n")
    else:
        rows = _csv_rows(Path(data_dir) / "talkingdata_100k.csv.gz")

        def line(r):
            hour = r["click_time"].split(" ")[1].split(":")[0]
            return (f"{1 if r['is_attributed'] == '1' else -1} |ip {r['ip']} |app {r['app']} "
                    f"|device {r['device']} |os {r['os']} |channel {r['channel']} "
                    f"|hour {hour}\n")
    tr, te = split(len(rows))
    train.write_text("".join(line(rows[i]) for i in tr))
    test.write_text("".join(line(rows[i]) for i in te))
    return train, test


def _vw_matrix(path, weights=False):
    """(X, y) of a VW file read by onlinepgs into 2^GEOMETRY_BITS columns, and with
    `weights` its importance weights (1 where a line has none)."""
    from onlinepgs.formats import iter_vw
    Xs, ys, ws = [], [], []
    for X, y, w in iter_vw(str(path), n_bits=GEOMETRY_BITS):
        Xs.append(X)
        ys.append(y)
        ws.append(np.ones(len(y)) if w is None else np.asarray(w, dtype=float))
    X, y = sp.vstack(Xs).tocsr(), np.concatenate(ys)
    return (X, y, np.concatenate(ws)) if weights else (X, y)


def _log_loss_auc(y, z):
    from sklearn.metrics import roc_auc_score
    p = 1.0 / (1.0 + np.exp(-np.clip(z, -700, 700)))
    proba = np.column_stack([1 - p, p])
    return (log_loss_clipped(y, proba, np.array([-1.0, 1.0])),
            float(roc_auc_score(y > 0, p)))


def _vw_scores(train, test, workdir, options, model_options=""):
    """VW's margins on the VW file `test` after one pass over `train` (its defaults, the
    logistic loss, 2^GEOMETRY_BITS columns, `options`; `model_options`: beside the model
    it writes, e.g. a readable copy), and the model's path."""
    model, pred = Path(workdir) / "vw.model", Path(workdir) / "vw.pred"
    subprocess.run([sys.executable, "-c", VW_TRAIN,
                    f"-d {train} --loss_function logistic -b {GEOMETRY_BITS}{options} "
                    f"-f {model}{model_options.format(model=model)} --quiet"], check=True)
    subprocess.run([sys.executable, "-c", VW_TRAIN,
                    f"-d {test} -i {model} -t --quiet -p {pred}"], check=True)
    return np.loadtxt(pred), model


def _vw_logistic(train, test, y_test, workdir, extra=""):
    """Test (log loss, AUC) of VW's one pass over `train` (its defaults, the logistic
    loss, 2^GEOMETRY_BITS columns, and `extra`), scoring the VW file `test`."""
    return _log_loss_auc(y_test, _vw_scores(train, test, workdir, extra)[0])


def _ours_logistic(params, X, y, X_test, y_test, sample_weight=None):
    """Test (log loss, AUC) of `PGSClassifier(random_state=0, **params)` after one
    partial_fit over X."""
    est = PGSClassifier(random_state=0, **params)
    est.partial_fit(X, y, classes=[-1.0, 1.0], sample_weight=sample_weight)
    return _log_loss_auc(y_test, est.decision_function(X_test))


def part_geometry(args, record, out):
    out += ["## The adaptive geometry against VW, one pass, defaults (same VW files)", "",
            f"Test log loss / AUC; every learner reads the same VW text, hashed into "
            f"2^{GEOMETRY_BITS} columns (onlinepgs with its VW reader), one pass in file "
            "order; onlinepgs races sigma; VW: `--loss_function logistic`, with and without "
            "`--ftrl`.", "",
            "| set | global (default) | adaptive eta auto | adaptive eta 0.1 | "
            "adaptive eta 0.5 | adaptive eta 2 | VW | VW --ftrl |",
            "|---|---|---|---|---|---|---|---|"]
    for name in GEOMETRY_SETS:
        with tempfile.TemporaryDirectory() as workdir:
            train, test = geometry_files(args.data_dir, name, workdir)
            X, y = _vw_matrix(train)
            X_test, y_test = _vw_matrix(test)
            r = {"set": name}
            for tag, extra in (("vw", ""), ("vw_ftrl", " --ftrl")):
                r[tag] = _vw_logistic(train, test, y_test, workdir, extra)
        runs = {"global": {}, **{f"eta {eta}": dict(geometry="adaptive", iterate="last",
                                                    radius=None, eta=eta)
                                 for eta in ("auto", 0.1, 0.5, 2.0)}}
        _one_pass_each(runs, X, y, X_test, y_test, r)
        record.setdefault("geometry", []).append(r)
        cells = [f"{r[t][0]:.4f} / {r[t][1]:.4f}" for t in
                 ("global", "eta auto", "eta 0.1", "eta 0.5", "eta 2.0", "vw", "vw_ftrl")]
        out.append(f"| {name} | " + " | ".join(cells) + " |")
        print(out[-1], file=sys.stderr, flush=True)
    out.append("")


def _one_pass_each(runs, X, y, X_test, y_test, r):
    """Into r, for each run {tag: params}: one pass of PGSClassifier(**params) on (X, y),
    its test (log loss, AUC) under the tag, and the sigma and eta it kept."""
    for tag, params in runs.items():
        est = PGSClassifier(random_state=0, **params)
        est.partial_fit(X, y, classes=[-1.0, 1.0])
        r[tag] = _log_loss_auc(y_test, est.decision_function(X_test))
        r[tag + " sigma_"] = float(est.sigma_)
        r[tag + " eta_"] = est.eta_


GEOMETRY_P_SETS = ("a9a", "w8a")


def part_geometry_p(args, record, out):
    """The adaptive geometry at p = 1.5 against p = 2, one pass, sigma raced."""
    from onlinepgs._eta_race import ETAS_BELOW_2
    adaptive = dict(geometry="adaptive", iterate="last", radius=None)
    runs = {"p 2, eta auto": dict(adaptive),
            "p 1.5, eta auto": dict(adaptive, p=1.5),
            **{f"p 1.5, eta {eta:g}": dict(adaptive, p=1.5, eta=eta) for eta in ETAS_BELOW_2}}
    out += ["## The adaptive geometry at p = 1.5 against p = 2, one pass (same VW files)", "",
            "Test log loss / AUC (the rate the race kept in brackets); sigma raced.", "",
            "| set | " + " | ".join(runs) + " |", "|---" * (len(runs) + 1) + "|"]
    for name in GEOMETRY_P_SETS:
        with tempfile.TemporaryDirectory() as workdir:
            train, test = geometry_files(args.data_dir, name, workdir)
            X, y = _vw_matrix(train)
            X_test, y_test = _vw_matrix(test)
        r = {"set": name}
        _one_pass_each(runs, X, y, X_test, y_test, r)
        record.setdefault("geometry_p", []).append(r)
        cells = [f"{r[t][0]:.4f} / {r[t][1]:.4f}"
                 + (f" ({r[t + ' eta_']:g})" if "auto" in t else "") for t in runs]
        out.append(f"| {name} | " + " | ".join(cells) + " |")
        print(out[-1], file=sys.stderr, flush=True)
    out.append("")


# ---- issue 52: small raw regression streams, and label-sorted streams -----------------
RAW_STREAMS = ("binary_sum", "counts", "huge_feature")
RAW_SEEDS = (0, 1, 2)
RAW_ROWS = 2000


def raw_stream(kind, seed, m=RAW_ROWS):
    """(X, y, names) of a small raw regression stream: ``binary_sum``, a target that is
    exactly x1 + x2 over two binary features; ``counts``, Poisson counts (means 3, 10,
    1, 30) and a target in the tens (0.5, 1, 2 and 0.2 times them plus N(0, 1));
    ``huge_feature``, two N(0, 1) columns and a third of 1e9 on 5% of the rows (0
    elsewhere), the target x1 + 2 x2 + 3 [x3 on] + N(0, 0.01)."""
    rng = np.random.RandomState(seed)
    if kind == "binary_sum":
        X = (rng.rand(m, 2) < 0.5).astype(float)
        return X, X.sum(axis=1), ["x1", "x2"]
    if kind == "counts":
        X = rng.poisson([3.0, 10.0, 1.0, 30.0], size=(m, 4)).astype(float)
        return X, X @ np.array([0.5, 1.0, 2.0, 0.2]) + rng.randn(m), ["a", "b", "c", "d"]
    X = rng.randn(m, 3)
    big = rng.rand(m) < 0.05
    X[:, 2] = np.where(big, 1e9, 0.0)
    return X, X[:, 0] + 2 * X[:, 1] + 3 * big + 0.1 * rng.randn(m), ["a", "b", "h"]


def write_raw_vw(path, X, y, names):
    """Rows as VW text (``label |f name:value``, zeros left out): what both tools read."""
    with open(path, "w") as f:
        for row, label in zip(X, y):
            feats = " ".join(f"{n}:{v:.17g}" for n, v in zip(names, row) if v != 0)
            f.write(f"{label:.17g} |f {feats}\n")


def _ours_average_loss(path, *options):
    """``onlinepgs train PATH --format vw --loss squared OPTIONS``: (its summary's average
    loss, the progressive loss of one pass, or None; its exit status; its error line)."""
    import onlinepgs
    run = subprocess.run([sys.executable, "-m", "onlinepgs.cli", "train", str(path),
                          "--format", "vw", "--loss", "squared", *options],
                         capture_output=True, text=True,
                         cwd=Path(onlinepgs.__file__).resolve().parents[1])
    found = re.findall(r"^average loss = (\S+)", run.stderr, re.M)
    error = [line for line in run.stderr.splitlines() if "error:" in line]
    return (float(found[-1]) if found else None), run.returncode, (error[0] if error else "")


RAW_PEERS = {"global (default)": (),
             "adaptive (eta auto)": ("--geometry", "adaptive"),
             **{f"adaptive eta {eta}": ("--geometry", "adaptive", "--eta", eta)
                for eta in ("0.1", "0.5", "2")}}


def part_raw_squared(args, record, out):
    out += ["## Small raw regression streams, squared loss: onlinepgs train against VW", "",
            f"Progressive average loss of one pass over {RAW_ROWS} rows of VW text (every "
            "tool reads the same file; `raw_stream`), seeds "
            f"{', '.join(map(str, RAW_SEEDS))}: VW's default with `--loss_function "
            "squared` (its progress table's final average loss) and `onlinepgs train FILE "
            "--format vw --loss squared` with the options below (sigma raced; its "
            "summary's average loss), and each one's ratio to VW's. `exit 1`: the command "
            "stopped (the predictions ran away).", "",
            "| stream | seed | VW | " + " | ".join(RAW_PEERS) + " |",
            "|---|---|---|" + "---|" * len(RAW_PEERS)]
    with tempfile.TemporaryDirectory() as workdir:
        for kind in RAW_STREAMS:
            for seed in RAW_SEEDS:
                path = Path(workdir) / f"{kind}_{seed}.vw"
                write_raw_vw(path, *raw_stream(kind, seed))
                run = subprocess.run([sys.executable, "-c", VW_TRAIN,
                                      f"-d {path} --loss_function squared"],
                                     capture_output=True, text=True, check=True)
                vw = float(re.findall(r"average loss = ([-\d.e+]+)", run.stderr)[-1])
                r = {"stream": kind, "seed": seed, "vw": vw}
                cells = []
                for tag, options in RAW_PEERS.items():
                    loss, status, error = _ours_average_loss(path, *options)
                    r[tag] = {"average_loss": loss, "exit": status, "error": error,
                              "ratio_to_vw": None if loss is None else loss / vw}
                    cells.append(f"exit {status}" if loss is None else
                                 f"{loss:.4g} ({loss / vw:.3g}x)")
                record.setdefault("raw_squared", []).append(r)
                out.append(f"| {kind} | {seed} | {vw:.4g} | " + " | ".join(cells) + " |")
                print(out[-1], file=sys.stderr, flush=True)
    out.append("")


SORTED_SETS = ("a9a", "imdb")


def _sorted_and_shuffled(train, workdir, name):
    """The training file's lines sorted by label (all -1, then all +1, each in file
    order) and shuffled (seed 0)."""
    lines = Path(train).read_text().splitlines(keepends=True)
    neg = [line for line in lines if line.split(" ", 1)[0] == "-1"]
    pos = [line for line in lines if line.split(" ", 1)[0] != "-1"]
    perm = np.random.RandomState(SPLIT_SEED).permutation(len(lines))
    paths = {}
    for order, rows in (("sorted", neg + pos), ("shuffled", [lines[i] for i in perm])):
        paths[order] = Path(workdir) / f"{name}_{order}.vw"
        paths[order].write_text("".join(rows))
    return paths


def _variants_table(args, record, out, key, title, leads, sets, runs, variants):
    """A table under `title` (lines): for each set of `sets` (of ``--sets``), each
    variant of its training file (`variants(train, workdir, name)` yields the row's
    leading cells, a dict of the columns `leads`, and the variant's VW file): test (log
    loss, AUC) after one pass of each learner of `runs` (PGSClassifier parameters; a
    line's importance weight is its sample weight) and of VW, into record[key]."""
    out += [*title, "", f"| set | {' | '.join(leads)} | " + " | ".join([*runs, "VW"]) + " |",
            "|---|" + "---|" * (len(leads) + len(runs) + 1)]
    for name in sets:
        if name not in args.sets:
            continue
        with tempfile.TemporaryDirectory() as workdir:
            train, test = geometry_files(args.data_dir, name, workdir)
            X_test, y_test = _vw_matrix(test)
            for lead, path in variants(train, workdir, name):
                X, y, w = _vw_matrix(path, weights=True)
                r = {"set": name, **lead}
                for tag, params in runs.items():
                    r[tag] = _ours_logistic(params, X, y, X_test, y_test, w)
                r["VW"] = _vw_logistic(path, test, y_test, workdir)
                record.setdefault(key, []).append(r)
                out.append("| " + " | ".join([name, *map(str, lead.values())]) + " | "
                           + " | ".join(f"{r[t][0]:.4f} / {r[t][1]:.4f}"
                                        for t in [*runs, "VW"]) + " |")
                print(out[-1], file=sys.stderr, flush=True)
    out.append("")


def _adaptive_runs(etas):
    """The global geometry's defaults and the adaptive geometry's at each eta."""
    return {"global (default)": {}, **{f"adaptive eta {eta}": dict(
        geometry="adaptive", iterate="last", radius=None, eta=eta) for eta in etas}}


def part_sorted(args, record, out):
    title = ["## A stream sorted by label against the same rows shuffled", "",
             "Test log loss / AUC after one pass over the training rows sorted by label "
             "(every -1, then every +1) and over the same rows shuffled (seed 0), every "
             f"learner on the same VW text (2^{GEOMETRY_BITS} hashed columns, onlinepgs "
             "with its VW reader, sigma raced); VW: its default, `--loss_function "
             "logistic`. The standard test sets."]

    def variants(train, workdir, name):
        for order, path in _sorted_and_shuffled(train, workdir, name).items():
            yield {"order": order}, path

    # the adaptive geometry's averages (eta raced): an average forgets the first class
    # less than a last iterate does
    averages = {f"adaptive {iterate}": dict(geometry="adaptive", iterate=iterate, radius=None)
                for iterate in ("weighted2", "average")}
    _variants_table(args, record, out, "sorted", title, ["order"], SORTED_SETS,
                    {**_adaptive_runs(("auto", 0.1, 0.5, 2.0)), **averages}, variants)


WEIGHT_SETS = ("a9a", "imdb")
WEIGHT_KS = (3, 30)


def _weighted_and_copied(train, workdir, name, k):
    """The training file with each +1 row given importance weight k (VW's ``1 k |...``),
    and with each +1 row written k times in its place instead."""
    weighted, copied = [], []
    for line in Path(train).read_text().splitlines(keepends=True):
        label, rest = line.split(" ", 1)
        if label == "-1":
            weighted.append(line)
            copied.append(line)
        else:
            weighted.append(f"{label} {k} {rest}")
            copied.extend([line] * k)
    paths = {}
    for form, rows in (("weight k", weighted), ("k copies", copied)):
        paths[form] = Path(workdir) / f"{name}_{form.replace(' ', '_')}_{k}.vw"
        paths[form].write_text("".join(rows))
    return paths


def part_weights(args, record, out):
    title = ["## Importance weights: a row of weight k against k copies of it", "",
             "One pass in file order over the training rows with every +1 row of importance "
             "weight k, and with every +1 row written k times in its place instead: test "
             "log loss / AUC (the standard test sets; every learner on the same VW text, "
             f"2^{GEOMETRY_BITS} hashed columns, onlinepgs with its VW reader and the "
             "weights as sample weights, sigma raced; VW: its default, `--loss_function "
             "logistic`)."]

    def variants(train, workdir, name):
        for k in WEIGHT_KS:
            for form, path in _weighted_and_copied(train, workdir, name, k).items():
                yield {"k": k, "form": form}, path

    _variants_table(args, record, out, "weights", title, ["k", "form"], WEIGHT_SETS,
                    _adaptive_runs(("auto", 0.5)), variants)


def part_sgd(args, record, out):
    out += ["## scikit-learn SGDClassifier (random_state=0)", "",
            "defaults = `max_iter=1000, tol=1e-3`, shuffled epochs until the loss stalls "
            "(the epochs column); one pass = `max_iter=1, tol=None`", "",
            "| set | loss | setting | epochs | test accuracy | test log loss | fit s |",
            "|---|---|---|---|---|---|---|"]
    for name in args.sets:
        if name not in CLASSIFICATION:
            continue
        X, y, X_test, y_test, classes = classification_set(args.data_dir, name)
        for r in sgd_runs(X, y, X_test, y_test, classes):
            r["set"] = name
            record.setdefault("sgd", []).append(r)
            out.append(f"| {name} | {r['loss']} | {r['setting']} | {r['epochs']} | "
                       f"{r['test_accuracy']:.4f} | {fmt(r.get('test_log_loss'))} | "
                       f"{r['fit_seconds']:.2f} |")
    out.append("")


def part_regression(args, record, out):
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import Ridge, SGDRegressor
    from sklearn.metrics import r2_score
    out += ["## Regression: test R^2 of one pass of PGSRegressor(sigma=s, loss=...)", "",
            "seeded 70/30 split, training rows in shuffled order, `partial_fit` once", "",
            "| set | loss | " + " | ".join(f"{s:g}" if s != "auto" else "auto"
                                           for s in args.sigmas) + " |",
            "|---|---|" + "---|" * len(args.sigmas)]
    for name in args.sets:
        if name not in REGRESSION:
            continue
        X, y, X_test, y_test = regression_set(args.data_dir, name)
        for loss in ("squared", "huber"):
            cells = []
            for sigma in args.sigmas:
                reg = PGSRegressor(sigma=sigma, loss=loss)
                start = time.perf_counter()
                try:
                    reg.partial_fit(X, y)
                    r2 = float(r2_score(y_test, reg.predict(X_test)))
                except Exception as exc:
                    r2 = None
                    err = f"{type(exc).__name__}"
                seconds = time.perf_counter() - start
                record.setdefault("regression", []).append(
                    {"set": name, "loss": loss, "sigma": getattr(reg, "sigma_", sigma),
                     "requested": sigma, "test_r2": r2, "fit_seconds": seconds})
                cells.append(f"{r2:.4f}" if r2 is not None else err)
            out.append(f"| {name} | {loss} | " + " | ".join(cells) + " |")
        const = float(r2_score(y_test, np.full(len(y_test), y.mean())))
        # the linear model's reach, for scale: least squares (barely regularised), all epochs
        ridge = float(r2_score(y_test, Ridge(alpha=1e-3).fit(X, y).predict(X_test)))
        sgd = {}
        for label, kw in (("defaults", {}), ("one pass", {"max_iter": 1, "tol": None})):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                m = SGDRegressor(random_state=0, **kw).fit(X, y)
            pred = m.predict(X_test)
            sgd[label] = float(r2_score(y_test, pred)) if np.all(np.isfinite(pred)) else None
        record.setdefault("regression_peers", []).append(
            {"set": name, "n_train": X.shape[0], "n_test": X_test.shape[0],
             "n_features": X.shape[1], "constant_r2": const, "ridge_r2": ridge,
             "sgd_regressor_defaults_r2": sgd["defaults"],
             "sgd_regressor_one_pass_r2": sgd["one pass"]})
        out.append(f"| {name} | constant (training mean): {const:.4f}; Ridge(alpha=1e-3): "
                   f"{ridge:.4f}; SGDRegressor() defaults: "
                   f"{fmt(sgd['defaults'])}, one pass: {fmt(sgd['one pass'])} |" +
                   " |" * (len(args.sigmas) - 1))
    out.append("")


def median_runs(fns, repeats):
    """Median seconds of each callable, interleaved over the repeats."""
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: float(np.median(t)) for name, t in times.items()}


def plain_text(workdir, data_dir, name, part):
    """A decompressed svmlight copy of a set's train or test part (a9a, imdb)."""
    train, test, _ = CLASSIFICATION[name]
    path = Path(workdir) / f"{name}_{part}.svm"
    if not path.exists():
        with gzip.open(Path(data_dir) / (train if part == "train" else test), "rb") as f:
            path.write_bytes(f.read())
    return path


def cli(*argv):
    """``python -m onlinepgs.cli ARGV`` of the onlinepgs this process imported (-m puts the
    working folder first on the path: the package's parent folder, then)."""
    import onlinepgs
    run = subprocess.run([sys.executable, "-m", "onlinepgs.cli", *map(str, argv)],
                         capture_output=True, text=True,
                         cwd=Path(onlinepgs.__file__).resolve().parents[1])
    if run.returncode:
        raise RuntimeError(f"onlinepgs {' '.join(map(str, argv))} exited with "
                           f"{run.returncode}: {run.stderr.strip()}")
    return run


def part_cost(args, record, out):
    if not has_auto():
        out += ["## Cost of sigma=\"auto\": skipped (this onlinepgs has no sigma=\"auto\")", ""]
        return
    out += ["## Cost of sigma=\"auto\" against sigma=1e-4 (medians of "
            f"{args.repeats}, interleaved)", "",
            "| set | what | fixed 1e-4 s | auto s | auto / fixed |", "|---|---|---|---|---|"]
    for name in ("a9a", "imdb"):
        if name not in args.sets:
            continue
        X, y, _, _, classes = classification_set(args.data_dir, name)
        cases = {
            "one pass in memory (partial_fit)":
                lambda s: PGSClassifier(sigma=s).partial_fit(X, y, classes=classes),
            "fit, defaults (max_epochs=5)": lambda s: PGSClassifier(sigma=s).fit(X, y),
        }
        with tempfile.TemporaryDirectory() as workdir:
            text = plain_text(workdir, args.data_dir, name, "train")
            model = Path(workdir) / "m.pgs"
            cases["whole process `onlinepgs train FILE -o m.pgs --quiet` from text"] = (
                lambda s: cli("train", text, "-o", model, "--quiet", "--sigma", s))
            for what, fn in cases.items():
                t = median_runs({"fixed": lambda: fn(1e-4), "auto": lambda: fn("auto")},
                                args.repeats)
                ratio = t["auto"] / t["fixed"]
                record.setdefault("cost", []).append(
                    {"set": name, "what": what, "fixed_seconds": t["fixed"],
                     "auto_seconds": t["auto"], "ratio": ratio})
                out.append(f"| {name} | {what} | {t['fixed']:.3f} | {t['auto']:.3f} | "
                           f"{ratio:.2f} |")
                print(out[-1], file=sys.stderr, flush=True)
    out.append("")


def part_commands(args, record, out):
    settings = [("defaults", [])] + ([("--sigma auto", ["--sigma", "auto"])] if has_auto() else [])
    out += ["## Whole processes: `onlinepgs train` + `onlinepgs eval` against VW's one pass "
            "(`--loss_function logistic`)", "",
            "| set | train options | onlinepgs test log loss | onlinepgs table's final average "
            "loss | VW test log loss | VW table's final average loss | table difference |",
            "|---|---|---|---|---|---|---|"]
    for name in ("a9a", "imdb"):
        if name not in args.sets:
            continue
        with tempfile.TemporaryDirectory() as workdir:
            train = plain_text(workdir, args.data_dir, name, "train")
            test = plain_text(workdir, args.data_dir, name, "test")
            X, y = load_svmlight(train, n_features=CLASSIFICATION[name][2])
            X_test, y_test = load_svmlight(test, n_features=CLASSIFICATION[name][2])
            vw = vw_pass(workdir, X, y, X_test, y_test, np.array([-1.0, 1.0]))
            vw_avg = vw["progress_average_loss"]
            for label, options in settings:
                model = Path(workdir) / "m.pgs"
                table = cli("train", train, "-o", model, *options)
                text = table.stdout + table.stderr
                # the summary's line (a line of its own: not "last iterate: average loss")
                ours_avg = float(re.findall(r"^average loss = ([-\d.e+]+)", text, re.M)[-1])
                ev = cli("eval", model, test).stdout
                ours_ll = float(re.search(r"log_loss = ([-\d.e+]+)", ev).group(1))
                record.setdefault("commands", []).append(
                    {"set": name, "train_options": label, "onlinepgs_test_log_loss": ours_ll,
                     "onlinepgs_progress_average_loss": ours_avg,
                     "vw_test_log_loss": vw["test_log_loss"], "vw_progress_average_loss": vw_avg,
                     "onlinepgs_table_tail": text.strip().splitlines()[-12:]})
                out.append(f"| {name} | {label} | {ours_ll:.4f} | {ours_avg:.4f} | "
                           f"{vw['test_log_loss']:.4f} | {vw_avg:.4f} | {ours_avg - vw_avg:+.4f} |")
    out.append("")


def part_goals(args, record, out):
    """Issue 34's goals from the parts run in this call (those absent are left out)."""
    grid, vw = record.get("grid", []), {r["set"]: r for r in record.get("vw", [])}
    sgd = {}
    for r in record.get("sgd", []):
        if r["setting"] == "defaults":
            sgd[r["set"]] = max(sgd.get(r["set"], 0.0), r["test_accuracy"])
    out += ["## Goals of issue 34 (from the parts above)", "",
            "| set | auto test log loss (sigma_) | best fixed | auto / best - 1 (goal <= 1%) | "
            "VW (goal: auto <=) | auto accuracy - better SGD default (goal >= -0.005) |",
            "|---|---|---|---|---|---|"]
    for name in args.sets:
        rows = [r for r in grid if r["set"] == name and "error" not in r]
        auto = [r for r in rows if r["requested"] == "auto"]
        fixed = [r for r in rows if r["requested"] != "auto"]
        if not auto or not fixed:
            continue
        a, best = auto[0], min(fixed, key=lambda r: r["test_log_loss"])
        gap = a["test_log_loss"] / best["test_log_loss"] - 1
        v = vw.get(name, {}).get("test_log_loss")
        s = sgd.get(name)
        out.append(f"| {name} | {a['test_log_loss']:.4f} ({a['sigma']:g}) | "
                   f"{best['test_log_loss']:.4f} ({best['sigma']:g}) | {100 * gap:+.2f}% | "
                   f"{fmt(v)} | {fmt(None if s is None else a['test_accuracy'] - s, '+.4f')} |")
    reg = record.get("regression", [])
    peers = {r["set"]: r for r in record.get("regression_peers", [])}
    lines = []
    for name in args.sets:
        for loss in ("squared", "huber"):
            rows = [r for r in reg if r["set"] == name and r["loss"] == loss
                    and r["test_r2"] is not None]
            auto = [r for r in rows if r["requested"] == "auto"]
            fixed = [r for r in rows if r["requested"] != "auto"]
            if not auto or not fixed:
                continue
            best = max(fixed, key=lambda r: r["test_r2"])
            const = peers.get(name, {}).get("constant_r2")
            lines.append(f"| {name} | {loss} | {auto[0]['test_r2']:.4f} ({auto[0]['sigma']:g}) | "
                         f"{best['test_r2']:.4f} ({best['sigma']:g}) | "
                         f"{auto[0]['test_r2'] - best['test_r2']:+.4f} | {fmt(const)} |")
    if lines:
        out += ["", "| set | loss | auto R^2 (sigma_) | best fixed R^2 | auto - best "
                "(goal >= -0.01) | constant (goal: auto above) |", "|---|---|---|---|---|---|"]
        out += lines
    out.append("")


GEOMETRY_L1 = (1e-6, 1e-5, 3e-5, 1e-4, 3e-4)
# VW's --l1 per learner: the default update truncates every step's weights (l1 a row),
# FTRL-Proximal thresholds the gradients' sum (its lambda_1, as our l1 times t)
VW_L1 = {"VW": (1e-7, 1e-6, 1e-5, 1e-4), "VW --ftrl": (0.1, 0.3, 1.0, 3.0, 10.0)}


def part_geometry_l1(args, record, out):
    """l1 in the adaptive geometry on IMDB and news20 binary (the `geometry_files`): test
    accuracy and non-zero weights (intercept excluded) over an l1 grid with its defaults
    (eta and sigma raced) and at eta 0.1 (sigma raced), against the same learner without
    l1 (issue 52's l1 goal: 5x fewer non-zeros at accuracy within 0.002), and VW's own
    l1 (`--l1`, with and without `--ftrl`) over the same files for scale."""
    out += ["## l1 in the adaptive geometry, one pass (same VW files)", "",
            "| set | learner | l1 | eta_ | test accuracy | non-zeros | fewer than without l1 |",
            "|---|---|---|---|---|---|---|"]
    for name in ("imdb", "news20_binary"):
        rows = []
        with tempfile.TemporaryDirectory() as workdir:
            train, test = geometry_files(args.data_dir, name, workdir)
            X, y = _vw_matrix(train)
            X_test, y_test = _vw_matrix(test)
            for learner, eta in (("adaptive, defaults", "auto"), ("adaptive, eta 0.1", 0.1)):
                for l1 in (0.0, *GEOMETRY_L1):
                    est = PGSClassifier(geometry="adaptive", eta=eta, l1=l1, random_state=0)
                    est.partial_fit(X, y, classes=[-1.0, 1.0])
                    rows.append(dict(set=name, learner=learner, l1=l1, eta=est.eta_,
                                     accuracy=float(np.mean(est.predict(X_test) == y_test)),
                                     nonzeros=int(np.count_nonzero(est.coef_))))
            for learner, extra in (("VW", ""), ("VW --ftrl", " --ftrl")):
                for l1 in (0.0, *VW_L1[learner]):
                    accuracy, nonzeros = _vw_l1(train, test, y_test, workdir, extra, l1)
                    rows.append(dict(set=name, learner=learner, l1=l1, eta=None,
                                     accuracy=accuracy, nonzeros=nonzeros))
        record.setdefault("geometry_l1", []).extend(rows)
        for r in rows:
            base = next(b for b in rows if b["learner"] == r["learner"] and b["l1"] == 0)
            eta = "" if r["eta"] is None else f"{r['eta']:g}"
            out.append(f"| {name} | {r['learner']} | {r['l1']:g} | {eta} | "
                       f"{r['accuracy']:.4f} | {r['nonzeros']:,} | "
                       f"{base['nonzeros'] / max(r['nonzeros'], 1):.1f}x |")
            print(out[-1], file=sys.stderr, flush=True)
    out.append("")


def _vw_l1(train, test, y_test, workdir, extra, l1):
    """(test accuracy, non-zero weights) of VW's one pass over `train` with ``--l1 l1``
    (the logistic loss, 2^GEOMETRY_BITS columns, and `extra`), its weights counted in
    ``--readable_model`` by `bench_l1.vw_nonzeros` (the constant excluded)."""
    from bench_l1 import vw_nonzeros  # the counting of bench_l1's FTRL comparisons
    # margins: the logistic loss without --link
    scores, model = _vw_scores(train, test, workdir, f"{extra} --l1 {l1}",
                               " --readable_model {model}.txt")
    return float(np.mean(np.where(scores > 0, 1.0, -1.0) == y_test)), vw_nonzeros(model)


def part_race_cost(args, record, out):
    """The adaptive geometry's races against one run at a fixed eta and sigma (one
    partial_fit over IMDB's training rows, medians of interleaved rounds), the global
    geometry's race against its fixed run in the same rounds: each race on one thread
    (n_jobs=1) and on two (n_jobs=2), wall time and CPU time (the threads lower the
    first, not the second; the models are the same bit for bit)."""
    adaptive = dict(geometry="adaptive", iterate="last", radius=None, random_state=0)
    runs = {"adaptive, eta 0.5, sigma 1e-4": dict(adaptive, eta=0.5, sigma=1e-4),
            "adaptive, sigma raced, eta 0.5": dict(adaptive, eta=0.5),
            "adaptive, eta and sigma raced (default)": adaptive,
            "global, sigma 1e-4": dict(random_state=0, sigma=1e-4),
            "global, sigma raced (default)": dict(random_state=0)}
    X, y, _, _, _ = classification_set(args.data_dir, "imdb")
    jobs = (1, 2)
    walls = {(tag, n): [] for tag in runs for n in jobs}
    cpus = {(tag, n): [] for tag in runs for n in jobs}
    paths = {(tag, n): [] for tag in runs for n in jobs}
    for _ in range(args.repeats):
        for tag, params in runs.items():
            for n in jobs:
                if "raced" not in tag and n > 1:  # one run: nothing to share out
                    continue
                with _threads_clocked() as spared:
                    wall, cpu = time.perf_counter(), time.process_time()
                    PGSClassifier(**params, n_jobs=n).partial_fit(X, y, classes=[-1.0, 1.0])
                    walls[tag, n].append(time.perf_counter() - wall)
                    cpus[tag, n].append(time.process_time() - cpu)
                paths[tag, n].append(cpus[tag, n][-1] - spared[0])
    med = {key: tuple(float(np.median(v[key])) for v in (walls, cpus, paths))
           for key in walls if walls[key]}
    record["race_cost"] = {f"{tag}, n_jobs={n}": dict(wall=w, cpu=c, critical_path=p)
                           for (tag, n), (w, c, p) in med.items()}
    record["race_cost_load"] = os.getloadavg()
    out += [f"## The races' cost, IMDB, one pass (medians of {args.repeats} interleaved "
            f"rounds; load average {os.getloadavg()[0]:.2f} after)", "",
            "| run | n_jobs | wall s | / its geometry's fixed run | CPU s | / fixed run | "
            "critical path s | / fixed run |", "|---|---|---|---|---|---|---|---|"]
    for (tag, n), (w, c, p) in med.items():
        fixed = med[next(t for t in runs if t.split(",")[0] == tag.split(",")[0]
                         and "raced" not in t), 1]
        out.append(f"| {tag} | {n} | {w:.3f} | {w / fixed[0]:.2f} | {c:.3f} | "
                   f"{c / fixed[1]:.2f} | {p:.3f} | {p / fixed[2]:.2f} |")
    out.append("")


@contextlib.contextmanager
def _threads_clocked():
    """The CPU seconds the race's threads spared the longest of them (`onlinepgs._jobs`'s
    groups, each timed by its thread's own clock, `time.thread_time`): over each piece,
    the sum of the groups' times less the longest. The CPU time less this is the
    critical path: the wall time with a free core for each thread, whatever the load."""
    from onlinepgs import _jobs
    run_groups, spared = _jobs.run_groups, [0.0]

    def clocked(work, parts):
        took = [0.0] * len(parts)

        def timed(i, part):
            start = time.thread_time()
            try:
                return work(i, part)
            finally:
                took[i] = time.thread_time() - start
        try:
            return run_groups(timed, parts)
        finally:
            spared[0] += sum(took) - max(took)
    _jobs.run_groups = clocked
    try:
        yield spared
    finally:
        _jobs.run_groups = run_groups


PARTS = {"grid": part_grid, "vw": part_vw, "sgd": part_sgd, "regression": part_regression,
         "cost": part_cost, "commands": part_commands, "goals": part_goals,
         "geometry": part_geometry, "race_cost": part_race_cost,
         "geometry_l1": part_geometry_l1, "geometry_p": part_geometry_p,
         "raw_squared": part_raw_squared,
         "sorted": part_sorted, "weights": part_weights}


def parse_sigmas(text):
    """--sigmas: positive numbers or "auto", comma-separated."""
    sigmas = []
    for item in text.split(","):
        try:
            sigmas.append(item if item == "auto" else float(item))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{item!r} is neither a number nor 'auto'")
        if sigmas[-1] != "auto" and not sigmas[-1] > 0:
            raise argparse.ArgumentTypeError(f"sigma must be positive, got {item!r}")
    return sigmas


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("ONLINEPGS_DATA"),
                        help="the folder of the data files (default: $ONLINEPGS_DATA)")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help=f"comma-separated, of {','.join(PARTS)}")
    parser.add_argument("--sets", default=",".join([*CLASSIFICATION, *REGRESSION]))
    parser.add_argument("--sigmas", type=parse_sigmas,
                        default=sorted(DECADES + HALVES, reverse=True),
                        help="comma-separated sigmas, 'auto' allowed (default: 1e-1..1e-7 "
                             "and 3e-2..3e-7)")
    parser.add_argument("--no-replay", dest="replay", action="store_false",
                        help="skip the averaged model's progressive loss (a row-by-row replay)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", default=None,
                        help="write the record here (docs/bench/auto.json for the parts "
                        "docs/benchmarks.md records there); none by default, so that a "
                        "part run alone does not replace another's record")
    args = parser.parse_args(argv)
    if not args.data_dir:
        parser.error("give --data-dir (or set ONLINEPGS_DATA)")
    args.sets = args.sets.split(",")
    unknown = [n for n in args.sets if n not in CLASSIFICATION and n not in REGRESSION]
    unknown += [p for p in args.parts.split(",") if p not in PARTS]
    if unknown:
        parser.error(f"unknown set or part {unknown[0]!r}: sets are "
                     f"{','.join([*CLASSIFICATION, *REGRESSION])}; parts are {','.join(PARTS)}")
    files = {"flights_distance": ["flight_delays_100k.csv.gz"], "diabetes": []}
    files.update({n: [f for f in CLASSIFICATION[n][:2] if f] for n in CLASSIFICATION})
    for name in args.sets:
        for f in files[name]:
            if not (Path(args.data_dir) / f).is_file():
                parser.error(f"set {name!r} needs {Path(args.data_dir) / f}, which is absent")
    if "auto" in args.sigmas and not has_auto():
        print("this onlinepgs has no sigma='auto': left out", file=sys.stderr)
        args.sigmas = [s for s in args.sigmas if s != "auto"]
    command = shlex.join(["python", "bench/bench_auto.py",
                          *[a.replace(str(args.data_dir), "DATA") for a in sys.argv[1:]]])
    record = {"command": command, "machine": f"{platform.platform()}, {os.cpu_count()} CPUs",
              "load_average": os.getloadavg()[0], "git": git_head(),
              "sigmas": args.sigmas, "has_auto": has_auto()}
    out = [f"Command: `{command}`", "", f"Machine: {record['machine']}, load average "
           f"{record['load_average']:.2f}; onlinepgs at {record['git']}", ""]
    for part in args.parts.split(","):
        PARTS[part](args, record, out)
    print("\n".join(out))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(record, indent=1, default=_plain) + "\n")


def git_head():
    try:
        return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip()
    except OSError:
        return "unknown"


if __name__ == "__main__":
    main()
