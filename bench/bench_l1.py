"""l1 in PGS (issue 36): sparse models at the l2 model's accuracy, against FTRL-Proximal
(River, Vowpal Wabbit) and scikit-learn's SGDClassifier(penalty="l1"), and the cost of l1
per epoch.

Data ($ONLINEPGS_DATA, else ``shared/data`` beside the checkout):

* IMDB: ``imdb_train`` / ``imdb_test`` as they are (tf-idf, L2 rows).
* news20, binary: ``news20_multiclass`` (raw counts) split 80/20 by a fixed permutation
  (seed 0); label +1 for the 10 technical groups (comp.*, misc.forsale, sci.*: LIBSVM
  classes 2-7 and 12-15), -1 for the 10 others (alt.atheism, rec.*, soc.*, talk.*): a
  fixed, balanced partition by topic that no handful of words decides. Rows become
  ``(1 + log tf) * idf`` with idf ``log((1 + n) / (1 + df)) + 1`` from the training part
  only, then L2-normalised.

Every choice is made on a validation part of the training data (its last 20%: IMDB's rows
are shuffled, news20's permuted), never on the test part:

1. l2: PGS (logistic, default iterate) over a grid of sigma; the best validation accuracy
   is the bar.
2. Each sparse method over a grid of its l1 (ours: sigma x l1 x iterate;
   River ``LogisticRegression(optimizer=optim.FTRLProximal(l1=...))``; VW ``--ftrl --l1``;
   ``SGDClassifier(loss="log_loss", penalty="l1", alpha=...)``): the setting with the
   fewest non-zeros whose validation accuracy is within 0.002 of the bar (else, flagged,
   its most accurate).
3. The chosen settings trained on the whole training part, ``--passes`` passes each;
   test accuracy and non-zero weights (the intercept excluded; VW's hashed weights, its
   constant excluded).

Time per pass: in-process fit time / passes for the Python methods (ours: `fit`;
River's ``learn_one`` over rows made into dicts beforehand), median over ``--repeats``
interleaved runs (River: one run); whole process against whole process for VW
(``onlinepgs train`` on the same rows as svmlight text, VW on them as VW text, both
started by ``subprocess`` and timed by the same clock, median of interleaved runs). l1's
cost per epoch: `partial_fit` passes over the training part of an l1 model and an l2
model (same sigma) interleaved, after one pass each.

    python bench/bench_l1.py --out docs/bench/l1.md
"""
import argparse
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the in-place build, when run as bench/bench_l1.py
from onlinepgs import PGSClassifier, load_model, load_svmlight  # noqa: E402

DATA = Path(os.environ.get("ONLINEPGS_DATA", REPO.parent / "shared" / "data"))
TOL = 0.002            # "equal accuracy": within this of the l2 model's
GOAL_SPARSER = 5.0     # at least this many times fewer non-zeros than l2
GOAL_COST = 1.3        # l1's epoch at most this many times l2's
SIGMAS = (1e-4, 3e-5, 1e-5, 3e-6)
OUR_L1 = (1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5)
OUR_ITERATES = ("weighted2", "last")
RIVER = dict(alpha=1.0, l1=(0.3, 1.0))
VW_L1 = (0.3, 1.0, 3.0)
SGD_ALPHA = (3e-6, 1e-5, 3e-5)
TECH = (2, 3, 4, 5, 6, 7, 12, 13, 14, 15)  # comp.*, misc.forsale, sci.*


# ---- data ------------------------------------------------------------------------------------
def imdb():
    Xtr, ytr = load_svmlight(DATA / "imdb_train.svm.gz", n_features=89527)
    Xte, yte = load_svmlight(DATA / "imdb_test.svm.gz", n_features=89527)
    return Xtr, ytr, Xte, yte


def tfidf(X, idf):
    """(1 + log tf) * idf, rows L2-normalised (counts >= 1 in X.data)."""
    X = X.copy()
    X.data = (1.0 + np.log(X.data)) * idf[X.indices]
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    norms[norms == 0] = 1.0
    return sp.csr_matrix(sp.diags(1.0 / norms) @ X)


def news20():
    X, labels = load_svmlight(DATA / "news20_multiclass.svm.gz")
    y = np.where(np.isin(labels, TECH), 1.0, -1.0)
    order = np.random.RandomState(0).permutation(X.shape[0])
    cut = int(0.8 * X.shape[0])
    train, test = order[:cut], order[cut:]
    df = np.bincount(X[train].indices, minlength=X.shape[1])
    idf = np.log((1.0 + cut) / (1.0 + df)) + 1.0
    return tfidf(X[train], idf), y[train], tfidf(X[test], idf), y[test]


def write_text(X, y, path, vw):
    """X, y as svmlight (1-based) or VW text (one namespace, the same indices)."""
    with open(path, "w") as f:
        for i in range(X.shape[0]):
            s, e = X.indptr[i], X.indptr[i + 1]
            feats = " ".join(f"{j + 1}:{v:.9g}" for j, v in zip(X.indices[s:e], X.data[s:e]))
            f.write(f"{int(y[i])} |f {feats}\n" if vw else f"{int(y[i])} {feats}\n")


def as_dicts(X):
    return [dict(zip(X.indices[X.indptr[i]:X.indptr[i + 1]].tolist(),
                     X.data[X.indptr[i]:X.indptr[i + 1]].tolist()))
            for i in range(X.shape[0])]


# ---- the methods: fit on (X, y), return (seconds, model) ---------------------------------------
def fit_ours(X, y, passes, sigma, l1=0.0, iterate="weighted2"):
    est = PGSClassifier(sigma=sigma, l1=l1, iterate=iterate, max_epochs=passes,
                        random_state=0)
    start = time.perf_counter()
    est.fit(X, y)
    return time.perf_counter() - start, est


def fit_sgd(X, y, passes, alpha):
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import SGDClassifier

    X32 = X.copy()
    X32.indices, X32.indptr = X.indices.astype(np.int32), X.indptr.astype(np.int32)
    est = SGDClassifier(loss="log_loss", penalty="l1", alpha=alpha, max_iter=passes,
                        tol=None, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        start = time.perf_counter()
        est.fit(X32, y)
    return time.perf_counter() - start, est


class RiverModel:
    def __init__(self, rows, y, passes, l1):
        from river import linear_model, optim

        self.model = linear_model.LogisticRegression(
            optimizer=optim.FTRLProximal(alpha=RIVER["alpha"], beta=1.0, l1=l1, l2=1.0))
        start = time.perf_counter()
        for _ in range(passes):
            for x, label in zip(rows, y):
                self.model.learn_one(x, label > 0)
        self.seconds = time.perf_counter() - start

    def score(self, rows, y):
        return float(np.mean([self.model.predict_one(x) == (label > 0)
                              for x, label in zip(rows, y)]))

    def nonzeros(self):
        return sum(1 for v in self.model.weights.values() if v != 0)


def run_process(argv):
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def vw_argv(train, model, passes, l1):
    cache = f" -c -k --passes {passes} --holdout_off" if passes > 1 else ""
    options = (f"-d {train} --ftrl --l1 {l1} --loss_function logistic --quiet -f {model} "
               f"--readable_model {model}.txt{cache}")
    code = ("import sys, vowpalwabbit; w = vowpalwabbit.Workspace(sys.argv[1]); "
            "w.run_parser(); w.finish()")
    return [sys.executable, "-c", code, options]


def vw_test(model, test, y):
    out = f"{model}.pred"
    subprocess.run([sys.executable, "-c",
                    "import sys, vowpalwabbit; w = vowpalwabbit.Workspace(sys.argv[1]); "
                    "w.run_parser(); w.finish()",
                    f"-d {test} -i {model} -t --quiet -p {out}"], check=True)
    return float(np.mean(np.where(np.loadtxt(out) > 0, 1.0, -1.0) == y))


VW_CONSTANT = 116060  # the hashed index of VW's constant feature (its intercept), -b 18


def vw_nonzeros(model):
    count = 0
    with open(f"{model}.txt") as f:
        for line in f:
            m = re.match(r"^(\d+):(\S+)", line)
            if m and int(m.group(1)) != VW_CONSTANT and float(m.group(2)) != 0:
                count += 1
    return count


def ours_argv(train, model, passes, sigma, l1, iterate):
    return [sys.executable, "-m", "onlinepgs.cli", "train", str(train), "-o", str(model),
            "--quiet", "--sigma", repr(sigma), "--l1", repr(l1), "--iterate", iterate,
            "--passes", str(passes), "--classes=-1,1"]


def nnz(coef):
    return int(np.count_nonzero(np.asarray(coef.toarray() if sp.issparse(coef) else coef)))


# ---- the report ------------------------------------------------------------------------------
def pick(results, bar):
    """The sparsest result within TOL of the bar, else the most accurate (flagged)."""
    ok = [r for r in results if r["acc"] >= bar - TOL]
    if ok:
        return dict(min(ok, key=lambda r: (r["nnz"], -r["acc"])), reached=True)
    return dict(max(results, key=lambda r: r["acc"]), reached=False)


def table(header, rows):
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def met(flag):
    return "MET" if flag else "NOT MET"


def one_dataset(name, data, args, work, out, goals):
    Xtr, ytr, Xte, yte = data
    cut = int(0.8 * Xtr.shape[0])
    Xa, ya, Xv, yv = Xtr[:cut], ytr[:cut], Xtr[cut:], ytr[cut:]
    P = args.passes
    out += [f"## {name}", "", f"{Xtr.shape[0]} training rows ({cut} fit + "
            f"{Xtr.shape[0] - cut} validation for the choices), {Xte.shape[0]} test rows, "
            f"{Xtr.shape[1]} features, {Xtr.nnz} training non-zeros; {P} passes "
            "everywhere.", ""]

    # 1. the l2 bar, then our l1 grid
    rows, l2 = [], []
    for sigma in SIGMAS:
        _, est = fit_ours(Xa, ya, P, sigma)
        l2.append(dict(sigma=sigma, acc=est.score(Xv, yv), nnz=nnz(est.coef_)))
        rows.append(["l2", f"{sigma:g}", 0, "weighted2", f"{l2[-1]['acc']:.4f}", l2[-1]["nnz"]])
    best = max(l2, key=lambda r: r["acc"])
    sigma, bar = best["sigma"], best["acc"]
    ours = []
    for iterate in OUR_ITERATES:
        for l1_sigma in SIGMAS:
            for l1 in OUR_L1:
                _, est = fit_ours(Xa, ya, P, l1_sigma, l1, iterate)
                ours.append(dict(sigma=l1_sigma, l1=l1, iterate=iterate, acc=est.score(Xv, yv),
                                 nnz=nnz(est.coef_)))
                rows.append(["PGS l1", f"{l1_sigma:g}", f"{l1:g}", iterate,
                             f"{ours[-1]['acc']:.4f}", ours[-1]["nnz"]])
    mine = pick(ours, bar)

    # the peers' grids, against the same bar
    river_fit, river_val = as_dicts(Xa), as_dicts(Xv)
    river = []
    for l1 in RIVER["l1"]:
        m = RiverModel(river_fit, ya, P, l1)
        river.append(dict(l1=l1, acc=m.score(river_val, yv), nnz=m.nonzeros()))
        rows.append(["River FTRL", f"alpha={RIVER['alpha']}", f"{l1:g}", "-",
                     f"{river[-1]['acc']:.4f}", river[-1]["nnz"]])
    write_text(Xa, ya, work / "fit.vw", vw=True)
    write_text(Xv, yv, work / "valid.vw", vw=True)
    vw = []
    for l1 in VW_L1:
        run_process(vw_argv(work / "fit.vw", work / "m.vw", P, l1))
        vw.append(dict(l1=l1, acc=vw_test(work / "m.vw", work / "valid.vw", yv),
                       nnz=vw_nonzeros(work / "m.vw")))
        rows.append(["VW --ftrl", "-", f"{l1:g}", "-", f"{vw[-1]['acc']:.4f}", vw[-1]["nnz"]])
    sgd = []
    for alpha in SGD_ALPHA:
        _, est = fit_sgd(Xa, ya, P, alpha)
        sgd.append(dict(alpha=alpha, acc=est.score(Xv, yv), nnz=nnz(est.coef_)))
        rows.append(["SGD l1", "-", f"alpha={alpha:g}", "-", f"{sgd[-1]['acc']:.4f}",
                     sgd[-1]["nnz"]])
    out += ["### Validation (the choices)", "",
            f"The bar: l2 PGS at sigma={sigma:g} (the best of its grid), validation accuracy "
            f"{bar:.4f}; each sparse method's choice is its sparsest setting (ours over sigma, "
            f"l1 and iterate) at >= {bar - TOL:.4f}.", ""]
    out += table(["method", "sigma / rate", "l1", "iterate", "validation accuracy",
                  "non-zeros"], rows) + [""]
    chosen = {"river": pick(river, bar), "vw": pick(vw, bar), "sgd": pick(sgd, bar)}

    # 3. the chosen settings on the whole training part: test accuracy, non-zeros, time
    times = {"l2": [], "l1": [], "sgd": []}
    fit_ours(Xtr, ytr, 1, sigma)  # warm-ups: first-call costs are not a pass's
    fit_sgd(Xtr, ytr, 1, chosen["sgd"]["alpha"])
    for _ in range(args.repeats):  # interleaved
        t, est_l2 = fit_ours(Xtr, ytr, P, sigma)
        times["l2"].append(t)
        t, est_l1 = fit_ours(Xtr, ytr, P, mine["sigma"], mine["l1"], mine["iterate"])
        times["l1"].append(t)
        t, est_sgd = fit_sgd(Xtr, ytr, P, chosen["sgd"]["alpha"])
        times["sgd"].append(t)
    river_model = RiverModel(as_dicts(Xtr), ytr, P, chosen["river"]["l1"])
    write_text(Xtr, ytr, work / "train.vw", vw=True)
    write_text(Xte, yte, work / "test.vw", vw=True)
    write_text(Xtr, ytr, work / "train.svm", vw=False)
    proc = {"ours": [], "vw": []}
    for _ in range(args.repeats):
        proc["ours"].append(run_process(ours_argv(work / "train.svm", work / "m.pgs", P,
                                                  mine["sigma"], mine["l1"], mine["iterate"])))
        proc["vw"].append(run_process(vw_argv(work / "train.vw", work / "m.vw", P,
                                              chosen["vw"]["l1"])))
    cli_model = load_model(work / "m.pgs")
    X_cli = Xte[:, :cli_model.n_features_in_]
    test = {
        "l2": (est_l2.score(Xte, yte), nnz(est_l2.coef_), np.median(times["l2"]) / P),
        "l1": (est_l1.score(Xte, yte), nnz(est_l1.coef_), np.median(times["l1"]) / P),
        "l1 (command)": (cli_model.score(X_cli, yte), nnz(cli_model.coef_),
                         np.median(proc["ours"]) / P),
        "river": (river_model.score(as_dicts(Xte), yte), river_model.nonzeros(),
                  river_model.seconds / P),
        "vw": (vw_test(work / "m.vw", work / "test.vw", yte), vw_nonzeros(work / "m.vw"),
               np.median(proc["vw"]) / P),
        "sgd": (est_sgd.score(Xte, yte), nnz(est_sgd.coef_), np.median(times["sgd"]) / P),
    }
    labels = {
        "l2": f"PGS l2 (sigma={sigma:g})",
        "l1": f"PGS sigma={mine['sigma']:g}, l1={mine['l1']:g}, iterate={mine['iterate']} (fit)",
        "l1 (command)": "the same, `onlinepgs train` process",
        "river": f"River FTRLProximal l1={chosen['river']['l1']:g}"
                 + ("" if chosen["river"]["reached"] else " (bar not reached)"),
        "vw": f"VW --ftrl --l1 {chosen['vw']['l1']:g} process"
              + ("" if chosen["vw"]["reached"] else " (bar not reached)"),
        "sgd": f"SGDClassifier l1 alpha={chosen['sgd']['alpha']:g}"
               + ("" if chosen["sgd"]["reached"] else " (bar not reached)"),
    }
    how = {"l2": "in process", "l1": "in process", "l1 (command)": "whole process",
           "river": "in process (1 run)", "vw": "whole process", "sgd": "in process"}
    out += ["### Test (trained on all training rows)", ""]
    out += table(["method", "test accuracy", "non-zeros", "s / pass", "timed"],
                 [[labels[k], f"{a:.4f}", n, f"{s:.4f}", how[k]] for k, (a, n, s) in test.items()])
    out.append("")

    acc_l2, nnz_l2, _ = test["l2"]
    acc_l1, nnz_l1, sec_l1 = test["l1"]
    ratio = nnz_l2 / max(nnz_l1, 1)
    goals.append((name, "l1 vs l2: >= 5x fewer non-zeros within 0.002 test accuracy",
                  f"{nnz_l2} / {nnz_l1} = {ratio:.1f}x fewer; accuracy {acc_l1:.4f} vs "
                  f"{acc_l2:.4f} ({acc_l1 - acc_l2:+.4f})",
                  met(ratio >= GOAL_SPARSER and acc_l1 >= acc_l2 - TOL)))
    for peer, mine_key in (("river", "l1"), ("sgd", "l1"), ("vw", "l1 (command)")):
        a, n, s = test[peer]
        my_a, my_n, my_s = test[mine_key]
        matched = abs(my_a - a) <= TOL or my_a > a
        goals.append((name, f"fewer non-zeros and faster per pass than {labels[peer]}",
                      f"non-zeros {my_n} vs {n}; s/pass {my_s:.4f} vs {s:.4f} "
                      f"({s / my_s:.1f}x); test accuracy {my_a:.4f} vs {a:.4f}",
                      met(matched and my_n < n and my_s < s)))

    # l1's cost per epoch, in process, interleaved
    cost_rows = []
    for iterate in dict.fromkeys((mine["iterate"], "weighted2")):
        ests = {}
        for key, l1 in (("l1", mine["l1"]), ("l2", 0.0)):
            ests[key] = PGSClassifier(sigma=mine["sigma"], l1=l1, iterate=iterate,
                                      random_state=0)
            ests[key].partial_fit(Xtr, ytr, classes=[-1.0, 1.0])
        spent = {"l1": [], "l2": []}
        for _ in range(args.epoch_repeats):
            for key, est in ests.items():
                start = time.perf_counter()
                est.partial_fit(Xtr, ytr)
                spent[key].append(time.perf_counter() - start)
        r = np.median(spent["l1"]) / np.median(spent["l2"])
        cost_rows.append([iterate, f"{np.median(spent['l2']):.4f}",
                          f"{np.median(spent['l1']):.4f}", f"{r:.2f}"])
        goals.append((name, f"p = 2 with l1 <= {GOAL_COST}x without, per epoch "
                      f"(iterate={iterate})", f"{r:.2f}x", met(r <= GOAL_COST)))
    out += ["### l1's cost per epoch (p = 2, in process)", "",
            f"`partial_fit` over the {Xtr.shape[0]} training rows, after one pass each; "
            f"median of {args.epoch_repeats} interleaved passes; l1={mine['l1']:g}, "
            f"sigma={mine['sigma']:g} for both.", ""]
    out += table(["iterate", "l2: s / epoch", "l1: s / epoch", "ratio"], cost_rows) + [""]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="markdown record to write")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--epoch-repeats", type=int, default=9)
    parser.add_argument("--datasets", default="imdb,news20")
    args = parser.parse_args()
    import river
    import sklearn
    import vowpalwabbit  # noqa: F401

    command = "python bench/bench_l1.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    out = [f"Command: `{command}`", "",
           f"Python {platform.python_version()}, numpy {np.__version__}, scikit-learn "
           f"{sklearn.__version__}, River {river.__version__}, vowpalwabbit "
           f"{getattr(vowpalwabbit, '__version__', '?')}, {platform.machine()}, "
           f"{os.cpu_count()} logical CPUs", "",
           f"Load average (1 min) at start: {os.getloadavg()[0]:.2f} (the machine is "
           "shared: ratios within one run are what counts)", ""]
    goals = []
    loaders = {"imdb": ("IMDB", imdb), "news20": ("news20, technical vs other groups", news20)}
    with tempfile.TemporaryDirectory() as work:
        for key in args.datasets.split(","):
            name, load = loaders[key]
            one_dataset(name, load(), args, Path(work), out, goals)
    out += [f"Load average (1 min) at the end: {os.getloadavg()[0]:.2f}", "", "## Goals", ""]
    out += table(["data", "goal", "figures", "verdict"], goals)
    text = "\n".join(["# l1 in PGS: sparse models at the l2 model's accuracy", ""] + out) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
