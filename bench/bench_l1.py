"""l1 in PGS (issue 36): sparse models at the l2 model's test accuracy, against FTRL-Proximal
(River, Vowpal Wabbit) and scikit-learn's SGDClassifier(penalty="l1"), and l1's cost per epoch.

Data ($ONLINEPGS_DATA, else ``shared/data`` beside the checkout):

* IMDB: ``imdb_train`` / ``imdb_test`` as they are (tf-idf, L2 rows).
* news20, binary splits of ``news20_multiclass`` (raw counts), each split 80/20 by a
  fixed permutation (seed 0); rows become ``(1 + log tf) * idf`` with idf
  ``log((1 + n) / (1 + df)) + 1`` from the training part only, then L2-normalised:
  ``news20`` = the 10 technical groups (comp.*, misc.forsale, sci.*: LIBSVM classes 2-7,
  12-15) against the 10 others; ``news20sci`` = sci.* (12-15) against the rest, a split
  on which the certified elastic-net optimum itself reaches the goal's 5x (the scan of
  part 5 shows all nine splits); ``news20cr`` (not run by default) = comp.* (2-6) against
  rec.* (8-11), other groups left out.

What is measured (``--passes`` passes for every method and setting, l2 and l1 alike):

1. The frontier at test accuracy (the goal's own comparison): every setting of every
   method's grid trained on the whole training part; test accuracy and non-zero weights
   (intercepts excluded), medians over ``--seeds`` shuffle seeds for PGS and
   SGDClassifier. The bar = the best l2 PGS model's test accuracy (over its sigma grid);
   a method's figure = its fewest non-zeros among settings within 0.002 of the bar.
   The certified elastic-net optimum (SDCAClassifier, tol 1e-4) over the same grid is the
   reference: what the objective itself reaches.
2. The choice a user makes without the test set: 5-fold cross-validation on the training
   part (one seed per fold) for PGS and SGDClassifier, with the same rule (the sparsest
   setting within 0.002 of the best l2 CV accuracy); its test figures are reported beside
   the frontier's. The goal is judged on the frontier.
3. Peers at matched accuracy: for each peer setting, our fewest non-zeros among settings
   with test accuracy >= the peer's, twice: with the default iterate (the weighted2
   average on the ball radius "auto") and with the last iterate on R^n (``iterate="last",
   radius=None``: the PGS iterate itself, its l1 grid trained as in 1; SGDClassifier
   reports its last iterate too). The goal is met at a peer's setting if either of ours is
   sparser and faster per pass. Time per pass: in process for the Python methods
   (ours: ``fit`` / passes, median over the seeds; SGDClassifier the same; River's
   ``learn_one`` over rows made into dicts beforehand, ``--river-passes`` pass(es), one
   run: about 37 s a pass on IMDB); whole process against whole process for VW
   (``onlinepgs train`` on the rows as svmlight text, VW on them as VW text, both started by
   ``subprocess``; the package compiled to bytecode first): T(P) / P and the marginal pass
   (T(P) - T(1)) / (P - 1).
4. l1's cost per epoch: ``partial_fit`` passes of an l1 and an l2 model (same sigma, p,
   iterate and radius) interleaved, after one pass each; p = 2 (the goal: at most 1.3x)
   and p = 1.5 with the last iterate (recorded).
5. ``splits``: the certified elastic-net optimum alone on nine binary splits of news20
   (same preparation): where does the objective itself reach 5x fewer non-zeros within
   0.002 of its l2 optimum?

    python bench/bench_l1.py --out docs/bench/l1.md
"""
import argparse
import compileall
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
from onlinepgs import PGSClassifier, SDCAClassifier, load_model, load_svmlight  # noqa: E402

DATA = Path(os.environ.get("ONLINEPGS_DATA", REPO.parent / "shared" / "data"))
TOL = 0.002            # "equal accuracy": within this of the l2 model's
EPS = 1e-9            # accuracies are ratios of counts: ties at exactly 0.002 count as within
GOAL_SPARSER = 5.0     # at least this many times fewer non-zeros than l2
GOAL_COST = 1.3        # l1's epoch at most this many times l2's
FOLDS = 5
# the smallest sigma and the l1 of 3e-5 and up reach scikit-learn's sparse end (its alpha
# 3e-5 and 1e-4 settings, an l1 penalty alone: the elastic net near sigma = 0)
SIGMAS = (3e-5, 1e-5, 5e-6, 2e-6)
L2_SIGMAS = (1e-4, 3e-5, 1e-5, 5e-6)
OUR_L1 = (2e-6, 5e-6, 1e-5, 2e-5, 3e-5, 4e-5, 8e-5)
Q_P = 1.5  # p < 2's epoch cost is recorded at this p (no goal: the issue asks it measured)
OUR_ITERATE = "weighted2"  # the default: with l1, the average on the last iterate's zeros
DEFAULT = dict(iterate=OUR_ITERATE, radius="auto")  # our models unless said otherwise
LAST = dict(iterate="last", radius=None)  # the PGS iterate itself, on R^n (part 3)
RIVER = dict(alpha=1.0, l1=(0.3, 1.0))
VW_L1 = (0.3, 1.0, 3.0)
SGD_ALPHA = (3e-6, 1e-5, 3e-5, 1e-4)
TECH = (2, 3, 4, 5, 6, 7, 12, 13, 14, 15)  # comp.*, misc.forsale, sci.*
COMP, REC, SCI = (2, 3, 4, 5, 6), (8, 9, 10, 11), (12, 13, 14, 15)
AUTOS, SPORTS = (8, 9), (10, 11)


def progress(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


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
    X = sp.csr_matrix(sp.diags(1.0 / norms) @ X)
    # canonical rows, as load_svmlight gives them: the product leaves the indices of a
    # row unsorted, and partial_fit copies and sorts such a chunk (a few ms a news20
    # epoch, which would dilute the epoch ratios of part 4)
    X.sort_indices()
    return X


def news20(positive, negative=None):
    """news20 rows of the groups in positive (+1) and negative (-1; None = all others)."""
    X, labels = load_svmlight(DATA / "news20_multiclass.svm.gz")
    if negative is not None:
        keep = np.flatnonzero(np.isin(labels, positive + negative))
        X, labels = X[keep], labels[keep]
    y = np.where(np.isin(labels, positive), 1.0, -1.0)
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


# ---- the methods -------------------------------------------------------------------------------
def _fit_pgs(X, y, passes, sigma, l1, seed, how):
    est = PGSClassifier(sigma=sigma, l1=l1, max_epochs=passes, tol=None, random_state=seed,
                        **how)
    start = time.perf_counter()
    est.fit(X, y)
    return time.perf_counter() - start, est


def fit_ours(X, y, passes, sigma, l1, seed):
    """Ours with the defaults (``DEFAULT``), l2 and l1 alike."""
    return _fit_pgs(X, y, passes, sigma, l1, seed, DEFAULT)


def fit_last(X, y, passes, sigma, l1, seed):
    """Ours with the last iterate on R^n (``LAST``)."""
    return _fit_pgs(X, y, passes, sigma, l1, seed, LAST)


def fit_sgd(X, y, passes, alpha, seed):
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import SGDClassifier

    X32 = X.copy()
    X32.indices, X32.indptr = X.indices.astype(np.int32), X.indptr.astype(np.int32)
    est = SGDClassifier(loss="log_loss", penalty="l1", alpha=alpha, max_iter=passes,
                        tol=None, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        start = time.perf_counter()
        est.fit(X32, y)
    return time.perf_counter() - start, est


def fit_sdca(X, y, sigma, l1):
    est = SDCAClassifier(sigma=sigma, l1=l1, tol=1e-4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        est.fit(X, y)
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


def ours_argv(train, model, passes, sigma, l1, iterate, radius="auto"):
    return [sys.executable, "-m", "onlinepgs.cli", "train", str(train), "-o", str(model),
            "--quiet", "--sigma", repr(sigma), "--l1", repr(l1), "--iterate", iterate,
            "--radius", "none" if radius is None else str(radius),
            "--passes", str(passes), "--classes=-1,1"]


def nnz(coef):
    return int(np.count_nonzero(np.asarray(coef.toarray() if sp.issparse(coef) else coef)))


# ---- the report ------------------------------------------------------------------------------
def frontier(results, bar):
    """The sparsest result within TOL of bar, or None."""
    ok = [r for r in results if r["acc"] >= bar - TOL - EPS]
    return min(ok, key=lambda r: (r["nnz"], -r["acc"])) if ok else None


def table(header, rows):
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def met(flag):
    return "MET" if flag else "NOT MET"


def grid_ours():
    return [(s, 0.0) for s in L2_SIGMAS] + [(s, l1) for s in SIGMAS for l1 in OUR_L1]


def stochastic_grid(fit, settings, Xtr, ytr, Xte, yte, passes, seeds):
    """Each setting trained on all training rows for every seed: median test accuracy,
    non-zeros and seconds per pass."""
    results = []
    for setting in settings:
        accs, counts, secs = [], [], []
        for seed in range(seeds):
            seconds, est = fit(Xtr, ytr, passes, *setting, seed)
            accs.append(est.score(Xte, yte))
            counts.append(nnz(est.coef_))
            secs.append(seconds / passes)
        results.append(dict(setting=setting, acc=float(np.median(accs)),
                            nnz=int(np.median(counts)), spp=float(np.median(secs)),
                            spread=max(accs) - min(accs)))
        progress(f"  {fit.__name__} {setting}: {results[-1]['acc']:.4f} / {results[-1]['nnz']}")
    return results


def cross_validate(fit, settings, X, y, passes):
    """Mean 5-fold CV accuracy of each setting on the training part (seed = fold)."""
    folds = np.array_split(np.random.RandomState(1).permutation(X.shape[0]), FOLDS)
    scores = {setting: [] for setting in settings}
    for k, held in enumerate(folds):
        fit_rows = np.concatenate([f for j, f in enumerate(folds) if j != k])
        for setting in settings:
            _, est = fit(X[fit_rows], y[fit_rows], passes, *setting, k)
            scores[setting].append(est.score(X[held], y[held]))
        progress(f"  {fit.__name__} CV fold {k + 1}/{FOLDS}")
    return {setting: float(np.mean(v)) for setting, v in scores.items()}


def cv_choice(cv, l2_settings):
    """The rule on CV accuracy: among the settings within TOL of the best l2 CV accuracy,
    the largest l1 (the sparsest by design; ties: the higher CV accuracy); else the most
    accurate."""
    bar = max(cv[s] for s in l2_settings)
    ok = [s for s in cv if s not in l2_settings and cv[s] >= bar - TOL - EPS]
    if ok:
        return max(ok, key=lambda s: (s[-1], cv[s])), bar
    return max((s for s in cv if s not in l2_settings), key=cv.get), bar


def describe(r):
    return "none within 0.002" if r is None else f"{r['acc']:.4f} / {r['nnz']}"


def one_dataset(name, data, args, work, out, goals):
    Xtr, ytr, Xte, yte = data
    P, seeds = args.passes, args.seeds
    out += [f"## {name}", "", f"{Xtr.shape[0]} training rows, {Xte.shape[0]} test rows, "
            f"{Xtr.shape[1]} features, {Xtr.nnz} training non-zeros; {P} passes for every "
            f"method and setting (River: {args.river_passes}); medians over {seeds} shuffle "
            "seeds for PGS and SGDClassifier.", ""]

    # 1. the frontier at test accuracy
    progress(f"{name}: PGS grid")
    ours = stochastic_grid(fit_ours, grid_ours(), Xtr, ytr, Xte, yte, P, seeds)
    l2 = [r for r in ours if r["setting"][1] == 0]
    best_l2 = max(l2, key=lambda r: r["acc"])
    bar, l2_nnz = best_l2["acc"], best_l2["nnz"]
    sparse = [r for r in ours if r["setting"][1] > 0]
    progress(f"{name}: PGS grid, last iterate on R^n")
    last = stochastic_grid(fit_last, [s for s in grid_ours() if s[1] > 0], Xtr, ytr, Xte, yte,
                           P, seeds)
    progress(f"{name}: SGDClassifier grid")
    sgd = stochastic_grid(fit_sgd, [(a,) for a in SGD_ALPHA], Xtr, ytr, Xte, yte, P, seeds)
    progress(f"{name}: SDCA (the certified optimum)")
    opt = []
    for sigma, l1 in grid_ours():
        seconds, est = fit_sdca(Xtr, ytr, sigma, l1)
        opt.append(dict(setting=(sigma, l1), acc=est.score(Xte, yte), nnz=nnz(est.coef_),
                        spp=seconds))
    progress(f"{name}: River FTRL-Proximal")
    rows_tr, rows_te = as_dicts(Xtr), as_dicts(Xte)
    river = []
    for l1 in RIVER["l1"]:
        m = RiverModel(rows_tr, ytr, args.river_passes, l1)
        river.append(dict(setting=(l1,), acc=m.score(rows_te, yte), nnz=m.nonzeros(),
                          spp=m.seconds / args.river_passes))
    progress(f"{name}: VW --ftrl")
    write_text(Xtr, ytr, work / "train.vw", vw=True)
    write_text(Xte, yte, work / "test.vw", vw=True)
    write_text(Xtr, ytr, work / "train.svm", vw=False)
    vw = []
    for l1 in VW_L1:
        t_one = run_process(vw_argv(work / "train.vw", work / "m.vw", 1, l1))
        t_all = run_process(vw_argv(work / "train.vw", work / "m.vw", P, l1))
        vw.append(dict(setting=(l1,), acc=vw_test(work / "m.vw", work / "test.vw", yte),
                       nnz=vw_nonzeros(work / "m.vw"), spp=t_all / P,
                       marginal=(t_all - t_one) / (P - 1)))

    # 2. the choice without the test set: 5-fold CV for ours and SGDClassifier
    progress(f"{name}: cross-validation")
    cv_ours = cross_validate(fit_ours, grid_ours(), Xtr, ytr, P)
    cv_sgd = cross_validate(fit_sgd, [(a,) for a in SGD_ALPHA], Xtr, ytr, P)
    rows = []
    for r in ours:
        sigma, l1 = r["setting"]
        rows.append(["PGS " + ("l2" if l1 == 0 else "l1"), f"sigma={sigma:g}, l1={l1:g}",
                     f"{r['acc']:.4f}", f"{r['spread']:.4f}", f"{cv_ours[r['setting']]:.4f}",
                     r["nnz"], f"{r['spp']:.4f}"])
    for r in last:
        sigma, l1 = r["setting"]
        rows.append(["PGS l1, last iterate on R^n", f"sigma={sigma:g}, l1={l1:g}",
                     f"{r['acc']:.4f}", f"{r['spread']:.4f}", "-", r["nnz"], f"{r['spp']:.4f}"])
    for r in opt:
        sigma, l1 = r["setting"]
        rows.append(["SDCA optimum", f"sigma={sigma:g}, l1={l1:g}", f"{r['acc']:.4f}", "-", "-",
                     r["nnz"], f"({r['spp']:.2f} s to certify)"])
    for r in sgd:
        rows.append(["SGDClassifier l1", f"alpha={r['setting'][0]:g}", f"{r['acc']:.4f}",
                     f"{r['spread']:.4f}", f"{cv_sgd[r['setting']]:.4f}", r["nnz"],
                     f"{r['spp']:.4f}"])
    for r in river:
        rows.append([f"River FTRL ({args.river_passes} pass)",
                     f"alpha={RIVER['alpha']:g}, l1={r['setting'][0]:g}",
                     f"{r['acc']:.4f}", "1 run", "-", r["nnz"], f"{r['spp']:.4f}"])
    for r in vw:
        rows.append(["VW --ftrl (process)", f"--l1 {r['setting'][0]:g}", f"{r['acc']:.4f}",
                     "1 run", "-", r["nnz"], f"{r['spp']:.4f}"])
    out += ["### Every setting (trained on all training rows, scored on the test rows)", "",
            f"The bar: the best l2 PGS model, sigma={best_l2['setting'][0]:g}, test accuracy "
            f"{bar:.4f} with {l2_nnz} non-zeros; within 0.002 means >= {bar - TOL:.4f} "
            f"(0.002 is {TOL * Xte.shape[0]:.1f} of the {Xte.shape[0]} test rows). "
            "Spread = max - min test accuracy over the seeds; CV = mean 5-fold "
            "cross-validation accuracy on the training part. PGS l2 and l1: the default "
            f"iterate ({OUR_ITERATE} average, radius \"auto\"); \"last iterate on R^n\": "
            "iterate=\"last\", radius=None (for part 3; not cross-validated).", ""]
    out += table(["method", "setting", "test accuracy", "spread", "CV",
                  "non-zeros", "s / pass"],
                 rows) + [""]

    l2_settings = [r["setting"] for r in l2]
    ours_cv, ours_cv_bar = cv_choice(cv_ours, l2_settings)
    # SGDClassifier has no l2 model in its grid: the same CV bar (our best l2 model)
    sgd_cv = max((s for s in cv_sgd if cv_sgd[s] >= ours_cv_bar - TOL - EPS),
                 key=lambda s: s[0], default=max(cv_sgd, key=cv_sgd.get))
    by_setting = {r["setting"]: r for r in ours + sgd}

    front = {"PGS l1": frontier(sparse, bar), "SDCA optimum": frontier(
        [r for r in opt if r["setting"][1] > 0], bar), "SGDClassifier l1": frontier(sgd, bar),
        "River FTRL": frontier(river, bar), "VW --ftrl": frontier(vw, bar)}
    summary = []
    for method, r in front.items():
        setting = "-" if r is None else ", ".join(f"{v:g}" for v in r["setting"])
        ratio = "-" if r is None else f"{l2_nnz / max(r['nnz'], 1):.1f}x"
        summary.append([method, "frontier (test)", setting, describe(r), ratio])
    for method, setting, cv in (("PGS l1", ours_cv, cv_ours[ours_cv]),
                                ("SGDClassifier l1", sgd_cv, cv_sgd[sgd_cv])):
        r = by_setting[setting]
        # the rule's fallback (none within 0.002 on CV: the most accurate) is said so
        within = cv >= ours_cv_bar - TOL - EPS
        summary.append([method, f"5-fold CV (CV accuracy {cv:.4f}"
                        + ("" if within else "; none within 0.002: the most accurate") + ")",
                        ", ".join(f"{v:g}" for v in setting), describe(r),
                        f"{l2_nnz / max(r['nnz'], 1):.1f}x"])
    out += ["### The goal's figure: fewest non-zeros within 0.002 of the l2 model", "",
            f"l2 model: {bar:.4f} / {l2_nnz} (test accuracy / non-zeros). Frontier = the "
            "sparsest setting whose test accuracy is within 0.002 of it (the goal's "
            "comparison). 5-fold CV = the setting a user picks from the training part alone "
            f"(best l2 CV accuracy {ours_cv_bar:.4f}; the sparsest setting within 0.002 of it), "
            "with its test figures.", ""]
    out += table(["method", "chosen by", "setting", "test accuracy / non-zeros",
                  "fewer than l2"], summary) + [""]
    mine = front["PGS l1"]
    goals.append((name, "l1 vs l2 (frontier): >= 5x fewer non-zeros within 0.002 test "
                  "accuracy", "PGS " + describe(mine) + f" vs l2 {bar:.4f} / {l2_nnz}; "
                  "certified optimum " + describe(front["SDCA optimum"]),
                  met(mine is not None and l2_nnz / mine["nnz"] >= GOAL_SPARSER)))

    # 3. peers at matched accuracy: our sparsest setting at >= the peer's accuracy, with
    # the default iterate and with the last iterate on R^n; met if either is sparser and
    # faster per pass
    progress(f"{name}: whole processes (ours against VW)")
    peer_rows = []
    kinds = (("default", sparse, DEFAULT), ("last, R^n", last, LAST))
    for method, results in (("SGDClassifier l1", sgd), ("River FTRL", river),
                            ("VW --ftrl", vw)):
        for r in results:
            setting = ", ".join(f"{v:g}" for v in r["setting"])
            verdicts = []
            for kind, candidates, how_run in kinds:
                match = frontier(candidates, r["acc"] + TOL)  # ours at accuracy >= theirs
                if match is None:
                    peer_rows.append([method, setting, f"{r['acc']:.4f} / {r['nnz']}", kind,
                                      "none", "-", "-"])
                    verdicts.append((False, f"{kind}: no setting reaches {r['acc']:.4f}"))
                    continue
                mine_spp, theirs_spp, how = match["spp"], r["spp"], "in process"
                if method == "VW --ftrl":
                    sigma, l1 = match["setting"]
                    t_one = run_process(ours_argv(work / "train.svm", work / "m.pgs", 1,
                                                  sigma, l1, **how_run))
                    t_all = run_process(ours_argv(work / "train.svm", work / "m.pgs", P,
                                                  sigma, l1, **how_run))
                    mine_spp = t_all / P
                    how = (f"whole process; marginal pass ours {(t_all - t_one) / (P - 1):.4f}"
                           f" vs VW {r['marginal']:.4f}")
                peer_rows.append([method, setting, f"{r['acc']:.4f} / {r['nnz']}", kind,
                                  f"sigma={match['setting'][0]:g}, l1={match['setting'][1]:g}: "
                                  f"{match['acc']:.4f} / {match['nnz']}",
                                  f"{mine_spp:.4f} vs {theirs_spp:.4f}", how])
                verdicts.append((match["nnz"] < r["nnz"] and mine_spp < theirs_spp,
                                 f"{kind}: {match['nnz']} vs {r['nnz']}, s/pass "
                                 f"{mine_spp:.4f} vs {theirs_spp:.4f}"))
            goals.append((name, f"vs {method} {setting} at matched accuracy: fewer non-zeros,"
                          " faster per pass", "; ".join(v[1] for v in verdicts),
                          met(any(v[0] for v in verdicts))))
    out += ["### Against the peers at matched accuracy", "",
            "For each peer setting: our sparsest setting whose test accuracy is >= the "
            f"peer's, with the default iterate ({OUR_ITERATE} average on the ball) and with "
            "the last iterate on R^n, and seconds per pass (ours / theirs).", ""]
    out += table(["peer", "setting", "peer: accuracy / non-zeros", "ours", "ours at >= that "
                  "accuracy", "s / pass (ours vs peer)", "timed"], peer_rows) + [""]

    # 4. l1's cost per epoch, in process, interleaved
    progress(f"{name}: l1's cost per epoch")
    sigma, l1 = (mine or max(sparse, key=lambda r: r["acc"]))["setting"]
    cost_rows = []
    for p, iterate, radius in ((2.0, "last", None), (2.0, "last", "auto"),
                               (2.0, "weighted2", None), (2.0, "weighted2", "auto"),
                               (Q_P, "last", None), (Q_P, "last", "auto")):
        first = {"l1": [], "l2": []}  # fresh models' first pass (on the ball: it may bind)
        for _ in range(args.epoch_repeats):
            ests = {}
            for key, lam in (("l1", l1), ("l2", 0.0)):
                ests[key] = PGSClassifier(sigma=sigma, l1=lam, p=p, iterate=iterate,
                                          radius=radius, random_state=0)
                start = time.perf_counter()
                ests[key].partial_fit(Xtr, ytr, classes=[-1.0, 1.0])
                first[key].append(time.perf_counter() - start)
        spent = {"l1": [], "l2": []}
        for _ in range(args.epoch_repeats):
            for key, est in ests.items():
                start = time.perf_counter()
                est.partial_fit(Xtr, ytr)
                spent[key].append(time.perf_counter() - start)
        r = np.median(spent["l1"]) / np.median(spent["l2"])
        r1 = np.median(first["l1"]) / np.median(first["l2"])
        cost_rows.append([f"{p:g}", iterate, str(radius), f"{np.median(spent['l2']):.4f}",
                          f"{np.median(spent['l1']):.4f}", f"{r:.2f}",
                          f"{np.median(first['l2']):.4f}", f"{np.median(first['l1']):.4f}",
                          f"{r1:.2f}"])
        if p == 2.0:  # the goal is p = 2's; p < 2 is recorded beside it
            goals.append((name, f"p = 2 with l1 <= {GOAL_COST}x without, per epoch "
                          f"(iterate={iterate}, radius={radius})", f"{r:.2f}x",
                          met(r <= GOAL_COST)))
    out += ["### l1's cost per epoch (in process)", "",
            f"`partial_fit` over the {Xtr.shape[0]} training rows, after one pass each; "
            f"median of {args.epoch_repeats} interleaved passes; l1={l1:g}, sigma={sigma:g}; "
            f"each l1 model against the l2 model of the same p, iterate and radius (p < 2 "
            f"with l1 keeps the last iterate only). The first pass of fresh models (median "
            f"of {args.epoch_repeats}, interleaved) apart: on the ball it is where the "
            f"ball binds (radius \"auto\" grows from 0), which the l1 models follow with "
            f"a heap of their active coordinates.", ""]
    out += table(["p", "iterate", "radius", "without l1: s / epoch", "l1: s / epoch",
                  "ratio", "first pass without l1", "first pass with l1", "ratio"],
                 cost_rows) + [""]


# ---- news20: what the elastic-net objective reaches on other splits --------------------------
SCAN_SPLITS = (
    ("technical vs other (news20)", TECH, None),
    ("sci.* vs the rest (news20sci)", SCI, None),
    ("comp.* vs rec.* (news20cr)", COMP, REC),
    ("rec.* vs the rest", (8, 9, 10, 11), None),
    ("talk.*, religion vs the rest", (1, 16, 17, 18, 19, 20), None),
    ("talk.politics.* vs religion", (17, 18, 19), (1, 16, 20)),
    ("comp.* vs sci.*", COMP, SCI),
    ("rec.* vs sci.*", REC, SCI),
    ("autos, motorcycles vs sports (news20am)", AUTOS, SPORTS),
)
SCAN_L2 = (1e-4, 3e-5, 1e-5, 3e-6)
SCAN_SIGMAS = (3e-5, 1e-5, 5e-6, 3e-6)
SCAN_L1S = (2e-6, 3e-6, 5e-6, 7e-6, 1e-5, 2e-5, 4e-5)
SCAN_L1 = [(s, l1) for s in SCAN_SIGMAS for l1 in SCAN_L1S]


def split_scan(out, goals):
    """The certified elastic-net optimum (no PGS run) on more binary splits of news20: the
    sparsest l1 optimum within TOL of the most accurate l2 optimum, as the frontier rule."""
    rows = []
    for name, positive, negative in SCAN_SPLITS:
        progress(f"news20 split scan: {name}")
        Xtr, ytr, Xte, yte = news20(positive, negative)
        results = []
        for sigma, l1 in [(s, 0.0) for s in SCAN_L2] + SCAN_L1:
            _, est = fit_sdca(Xtr, ytr, sigma, l1)
            results.append(dict(setting=(sigma, l1), acc=est.score(Xte, yte),
                                nnz=nnz(est.coef_)))
        l2 = max((r for r in results if r["setting"][1] == 0), key=lambda r: r["acc"])
        best = frontier([r for r in results if r["setting"][1] > 0], l2["acc"])
        ratio = l2["nnz"] / best["nnz"] if best else None
        rows.append([name, Xtr.shape[0], f"{l2['acc']:.4f} / {l2['nnz']}",
                     "none within 0.002" if best is None else
                     f"{best['setting'][0]:g}, {best['setting'][1]:g}: "
                     f"{best['acc']:.4f} / {best['nnz']}",
                     "-" if ratio is None else f"{ratio:.1f}x"])
    reached = [r for r in rows if r[-1] != "-" and float(r[-1][:-1]) >= GOAL_SPARSER]
    goals.append(("news20, other splits", f"the certified optimum >= {GOAL_SPARSER:g}x "
                  "fewer non-zeros within 0.002 on some split",
                  f"{len(reached)} of {len(rows)} splits", met(bool(reached))))
    out += ["## news20: what the objective itself reaches on other splits", "",
            "The certified elastic-net optimum (SDCAClassifier, tol 1e-4; no PGS run) on nine "
            "binary splits of news20 (prepared as above, groups left out where a split names "
            f"both sides): the most accurate l2 optimum over sigma in {SCAN_L2}, and the "
            f"sparsest l1 optimum within 0.002 of it over sigma in {SCAN_SIGMAS} x l1 in "
            f"{SCAN_L1S}.", ""]
    out += table(["split", "training rows", "l2 optimum: accuracy / non-zeros",
                  "sparsest l1 optimum within 0.002", "fewer than l2"], rows) + [""]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="markdown record to write")
    parser.add_argument("--passes", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--river-passes", type=int, default=1)
    parser.add_argument("--epoch-repeats", type=int, default=15)
    parser.add_argument("--datasets", default="imdb,news20,news20sci,news20am,splits",
                        help="comma-separated: imdb, news20, news20sci, news20cr, news20am, "
                        "splits (the news20 split scan of the optimum)")
    args = parser.parse_args()
    # our command's whole processes start from bytecode, as `pip install` leaves it: with
    # PYTHONDONTWRITEBYTECODE set, each start would compile the package again (~0.05 s)
    compileall.compile_dir(str(REPO / "onlinepgs"), quiet=1)
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
    loaders = {"imdb": ("IMDB", imdb),
               "news20": ("news20, technical vs other groups", lambda: news20(TECH)),
               "news20sci": ("news20, sci.* vs the rest", lambda: news20(SCI)),
               "news20cr": ("news20, comp.* vs rec.*", lambda: news20(COMP, REC)),
               # picked after the scan below: one of the two splits of the nine where
               # the elastic-net optimum itself is 5x sparser within 0.002
               "news20am": ("news20, autos and motorcycles vs sports",
                            lambda: news20(AUTOS, SPORTS))}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as work:
        for key in args.datasets.split(","):
            if key == "splits":
                split_scan(out, goals)
                continue
            name, load = loaders[key]
            one_dataset(name, load(), args, Path(work), out, goals)
    out += [f"Load average (1 min) at the end: {os.getloadavg()[0]:.2f}; the run took "
            f"{(time.perf_counter() - start) / 60:.1f} min.", "", "## Goals", "",
            "The sparsity goal is judged on the frontier at test accuracy (above); the 5-fold "
            "CV choice is what a user gets without the test set.", ""]
    out += table(["data", "goal", "figures", "verdict"], goals)
    text = "\n".join(["# l1 in PGS: sparse models at the l2 model's accuracy", ""] + out) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
