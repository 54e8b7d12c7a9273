"""True multiclass on news20: multinomial PGS against scikit-learn's multinomial
LogisticRegression at the same sigma, and calibration (issue 36's PGS multiclass goal);
with ``--crammer-singer``, SDCA against LIBLINEAR -s 4, judged by onlinepgs's certificate.

The data: LIBSVM's news20 multiclass training part (20 classes, raw term counts),
shuffled with seed 0 and split 80/20 (train/test). The rows are made tf-idf here: the
counts times scikit-learn's smooth idf ``ln((1 + n) / (1 + df)) + 1`` with df counted
on the training part only, each row then L2-normalised (``TfidfTransformer`` fitted on
the training rows).

The objective, for both: ``sigma/2 sum_k ||w_k||^2 + (1/m) sum_i l(W x_i; y_i)``, l the
multinomial logistic loss, no intercept (PGS regularizes its intercept as a feature,
scikit-learn does not: without one the two minimize the same function). scikit-learn's
``LogisticRegression(C=1/(sigma m), fit_intercept=False)`` minimizes
``1/2 ||W||^2 + C sum_i l_i``, which is ours times ``C m`` (lbfgs, ``tol=1e-10``, up to
10,000 iterations: its optimum). PGS: ``PGSClassifier(multi_class="multinomial",
sigma=sigma, fit_intercept=False, max_epochs=5)``, its other options the defaults.

Also: PGS one-vs-rest with every default (``PGSClassifier()``: the package's model of
K > 2 classes before issue 36) and at the goal's sigma (5 passes, no intercept), and
multinomial PGS with every other default
(``sigma="auto"``, intercept). For each model: test log loss, accuracy, the objective
on the training rows (the multinomial runs at a fixed sigma), fit time (medians of ``--repeats``
interleaved runs), and calibration: a reliability table over 10 equal bins of the
top-class probability (mean confidence, accuracy, count) and the expected calibration
error ``ECE = sum_b (n_b / n) |accuracy_b - confidence_b|``.

The goal (issue 36): the multinomial PGS test log loss after 5 passes within 2% of
scikit-learn's at the same sigma.

``--crammer-singer`` mode: true multiclass SDCA against LIBLINEAR -s 4 (Crammer-Singer) and
scikit-learn's multinomial LogisticRegression, every model judged by onlinepgs's own
certificate. Rows: every row of news20's training part, tf-idf as above (idf of all of
them) and each row L2-normalized. Objective sigma ||W||_F^2 / 2 + (1/m) sum_i l(W^T x_i;
y_i), no intercept (LIBLINEAR's default). LIBLINEAR -s 4 minimizes ||W||^2 / 2 + C sum_i
xi_i, i.e. our objective times 1 / sigma with C = 1 / (sigma m). Goal (issue 36):
Crammer-Singer SDCA to a certified relative gap of 1e-6 in at most LIBLINEAR's time to
the same suboptimality, where LIBLINEAR's suboptimality is bounded by P(W_lib) - D(our
dual) (our best dual, a favour to it) and by our certificate of its W, run with
decreasing -e until one reaches ours. Multinomial: time and gap against scikit-learn at
the same sigma (a figure, no goal). Runs interleaved, medians reported. Needs ``pip
install liblinear-official``.

Run from the repository root (``PYTHONPATH=.`` measures the checkout)::

    python bench/bench_multiclass.py --data-dir DATA --out docs/bench/multiclass.md#pgs
    python bench/bench_multiclass.py --crammer-singer --data-dir DATA \
        --out docs/bench/multiclass.md#sdca

DATA holds ``news20_multiclass.svm.gz`` (default $ONLINEPGS_DATA).
"""
import argparse
import os
import platform
import statistics
import sys
import time
import warnings
import numpy as np

from _record import write_record  # bench/, the directory of this script
from onlinepgs import PGSClassifier, SDCAClassifier, duality_gap, load_svmlight
from onlinepgs.model import LinearModel

GOAL_SIGMA = 1e-5
SIGMAS = (1e-4, 1e-5, 3e-6)
GOAL = 0.02  # relative test log loss


def news20(data_dir):
    """(X_train, y_train, X_test, y_test): tf-idf rows (idf from the training part), L2."""
    from sklearn.feature_extraction.text import TfidfTransformer

    X, y = load_svmlight(os.path.join(data_dir, "news20_multiclass.svm.gz"))
    perm = np.random.RandomState(0).permutation(X.shape[0])
    cut = int(0.8 * X.shape[0])
    train, test = perm[:cut], perm[cut:]
    tfidf = TfidfTransformer().fit(X[train])
    return (tfidf.transform(X[train]).tocsr(), y[train],
            tfidf.transform(X[test]).tocsr(), y[test])


def multinomial_objective(coef, intercept, X, y, classes, sigma):
    """sigma/2 sum_k ||w_k||^2 + mean multinomial loss on (X, y) (no intercept)."""
    from scipy.special import logsumexp

    Z = np.asarray(X @ coef.T) + intercept
    idx = np.searchsorted(classes, y)
    return 0.5 * sigma * float(np.sum(coef**2)) + float(
        np.mean(logsumexp(Z, axis=1) - Z[np.arange(len(y)), idx]))


def reliability(proba, y, classes, bins=10):
    """The reliability table (10 equal bins of the top-class probability in [0, 1]) and
    the expected calibration error."""
    top = proba.max(axis=1)
    right = classes[np.argmax(proba, axis=1)] == y
    which = np.minimum((top * bins).astype(int), bins - 1)
    rows, ece = [], 0.0
    for b in range(bins):
        at = which == b
        n = int(at.sum())
        conf = float(top[at].mean()) if n else float("nan")
        acc = float(right[at].mean()) if n else float("nan")
        if n:
            ece += n / len(y) * abs(acc - conf)
        rows.append((b / bins, (b + 1) / bins, conf, acc, n))
    return rows, ece


def models():
    """(name, factory, sigma for the objective or None) of every model measured."""
    from sklearn.linear_model import LogisticRegression

    out = []
    for sigma in SIGMAS:
        out.append((f"scikit-learn LogisticRegression multinomial, sigma={sigma:g}",
                    lambda m, s=sigma: LogisticRegression(C=1.0 / (s * m), fit_intercept=False,
                                                          tol=1e-10, max_iter=10000), sigma))
        out.append((f"PGS multinomial, sigma={sigma:g}, 5 passes",
                    lambda m, s=sigma: PGSClassifier(multi_class="multinomial", sigma=s,
                                                     fit_intercept=False, max_epochs=5,
                                                     random_state=0), sigma))
    out.append((f"PGS one-vs-rest, sigma={GOAL_SIGMA:g}, 5 passes",
                lambda m: PGSClassifier(sigma=GOAL_SIGMA, fit_intercept=False, max_epochs=5,
                                        random_state=0), GOAL_SIGMA))
    out.append(("PGS multinomial, defaults (sigma='auto')",
                lambda m: PGSClassifier(multi_class="multinomial", random_state=0), None))
    out.append(("PGS one-vs-rest, defaults (PGSClassifier())",
                lambda m: PGSClassifier(random_state=0), None))
    return out


def run(data_dir, repeats):
    from sklearn.metrics import log_loss

    Xtr, ytr, Xte, yte = news20(data_dir)
    m = Xtr.shape[0]
    results = {}
    specs = models()
    for r in range(repeats):  # interleaved: each model once per round
        for name, make, sigma in specs:
            est = make(m)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                start = time.perf_counter()
                est.fit(Xtr, ytr)
                took = time.perf_counter() - start
            entry = results.setdefault(name, {"times": [], "sigma": sigma})
            entry["times"].append(took)
            if r == 0:
                proba = est.predict_proba(Xte)
                classes = est.classes_
                entry["log_loss"] = log_loss(yte, proba, labels=classes)
                entry["accuracy"] = float(np.mean(classes[np.argmax(proba, axis=1)] == yte))
                entry["table"], entry["ece"] = reliability(proba, yte, classes)
                entry["sigma_"] = getattr(est, "sigma_", sigma)
                if sigma is not None and "one-vs-rest" not in name:
                    entry["objective"] = multinomial_objective(
                        est.coef_, est.intercept_, Xtr, ytr, classes, sigma)
            print(f"round {r + 1}: {name}: {took:.2f} s", file=sys.stderr, flush=True)
    return results, (Xtr.shape, Xte.shape)


def _shown(argv):
    """The command's arguments for the record: the data directory is the reader's own
    (DATA)."""
    return ["DATA" if i and argv[i - 1] == "--data-dir" else a for i, a in enumerate(argv)]


def report(results, shapes, argv, repeats):
    load = os.getloadavg()[0]
    lines = [f"Command: `python bench/bench_multiclass.py {' '.join(_shown(argv))}`",
             "(DATA holds `news20_multiclass.svm.gz`; run from the repository root with "
             "`PYTHONPATH=.`.)", "",
             f"Machine: {platform.machine()}, {os.cpu_count()} cores shared with other "
             f"work (load average {load:.1f} at the end), Python {platform.python_version()}.",
             "",
             f"news20, 20 classes: {shapes[0][0]} training rows, {shapes[1][0]} test rows "
             f"(seeded 80/20 split), {shapes[0][1]} features, tf-idf (idf of the training "
             "part) then L2 rows. Objective `sigma/2 sum_k ||w_k||^2 + mean multinomial "
             "loss`, no intercept, for the multinomial runs at a fixed sigma (scikit-learn at "
             "C = 1/(sigma m), fitted to its optimum: lbfgs, tol 1e-10). Times: fit in "
             f"memory, medians of {repeats} interleaved runs (min-max).", "",
             "| model | sigma | test log loss | accuracy | ECE | train objective | fit s |",
             "|---|---|---|---|---|---|---|"]
    for name, e in results.items():
        t = e["times"]
        sig = f"{e['sigma_']:g}" if e["sigma"] is not None else f"auto: {e['sigma_']:g}"
        obj = f"{e['objective']:.6f}" if "objective" in e else "-"
        lines.append(f"| {name} | {sig} | {e['log_loss']:.4f} | {e['accuracy']:.4f} | "
                     f"{e['ece']:.4f} | {obj} | {np.median(t):.2f} ({min(t):.2f}-{max(t):.2f}) |")
    lines += ["", "## The goal: multinomial PGS after 5 passes against scikit-learn's "
              "optimum at the same sigma", "",
              "| sigma | scikit-learn log loss | PGS log loss | PGS / scikit-learn | "
              "objective gap (PGS - optimum) | scikit-learn fit s / PGS fit s | met? |",
              "|---|---|---|---|---|---|---|"]
    for sigma in SIGMAS:
        sk = results[f"scikit-learn LogisticRegression multinomial, sigma={sigma:g}"]
        ours = results[f"PGS multinomial, sigma={sigma:g}, 5 passes"]
        ratio = ours["log_loss"] / sk["log_loss"]
        met = "**MET**" if abs(ratio - 1.0) <= GOAL else "NOT MET"
        speed = np.median(sk["times"]) / np.median(ours["times"])
        goal = " (the goal's sigma)" if sigma == GOAL_SIGMA else ""
        lines.append(f"| {sigma:g}{goal} | {sk['log_loss']:.4f} | {ours['log_loss']:.4f} | "
                     f"{ratio:.4f} | {ours['objective'] - sk['objective']:.2e} | "
                     f"{speed:.1f}x | {met} |")
    lines += ["", "## Calibration: reliability tables", "",
              "Rows: 10 equal bins of the top-class probability; in each, the mean "
              "top-class probability (confidence), the accuracy and the number of test "
              "rows. A calibrated model has accuracy = confidence in every bin (ECE 0).", ""]
    for name, e in results.items():
        if e["sigma"] not in (None, GOAL_SIGMA):
            continue
        lines += [f"**{name}** (ECE {e['ece']:.4f})", "",
                  "| top-class probability | confidence | accuracy | rows |", "|---|---|---|---|"]
        for lo, hi, conf, acc, n in e["table"]:
            cells = (f"{conf:.3f} | {acc:.3f}" if n else "- | -")
            lines.append(f"| {lo:.1f}-{hi:.1f} | {cells} | {n} |")
        lines.append("")
    return "\n".join(lines) + "\n"


# ---- --crammer-singer mode ----------------------------------------------------------
def news20_whole(data_dir):
    """Every row of news20's training part, tf-idf as `news20`'s (idf of all the rows),
    and the labels as 0..19 (LIBLINEAR's labels index its weights)."""
    from sklearn.feature_extraction.text import TfidfTransformer

    X, y = load_svmlight(os.path.join(data_dir, "news20_multiclass.svm.gz"))
    return (TfidfTransformer().fit_transform(X).tocsr(),
            (np.asarray(y) - 1).astype(np.int64))


def objective(mc, W, X, y, sigma):
    model = LinearModel(W, None, classes=np.arange(W.shape[0]), sigma=sigma,
                        loss="hinge" if mc == "crammer_singer" else "logistic",
                        fit_intercept=False, multi_class=mc)
    return duality_gap(model, X, y)


def liblinear_run(X, y, C, eps):
    from liblinear.liblinearutil import parameter, problem, train

    prob = problem(list(y), X)
    start = time.perf_counter()
    model = train(prob, parameter(f"-s 4 -c {C} -e {eps} -q"))
    seconds = time.perf_counter() - start
    K, d = int(y.max()) + 1, X.shape[1]
    nr = model.nr_feature
    raw = np.array([model.w[i] for i in range(nr * K)]).reshape(nr, K).T
    W = np.zeros((K, d))
    W[np.array(model.get_labels()), :nr] = raw
    return seconds, W


def run_crammer_singer(args, shown):
    """--crammer-singer (module docstring); returns the record's text."""
    X, y = news20_whole(args.data_dir)
    m = X.shape[0]
    sigma, C = args.sigma, 1.0 / (args.sigma * X.shape[0])
    epsilons = [1e-1, 3e-2, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4, 1e-5, 1e-6]
    ours_t, lib_t, mn_t, sk_t = [], [], [], []
    record = {}
    for rep in range(args.repeats):
        start = time.perf_counter()
        cs = SDCAClassifier(loss="hinge", multi_class="crammer_singer", sigma=sigma, tol=1e-6,
                            fit_intercept=False, max_epochs=args.max_epochs,
                            random_state=rep).fit(X, y)
        ours_t.append(time.perf_counter() - start)
        P, D = cs.primal_objective_, cs.dual_objective_
        target = P - D  # our certified suboptimality
        record.update(P=P, D=D, epochs=cs.n_iter_, gap=target)
        record.setdefault("runs", []).append((ours_t[-1], cs.n_iter_, len(cs.gap_history_)))
        reached = None
        for eps in epsilons:
            seconds, W = liblinear_run(X, y, C, eps)
            cert = objective("crammer_singer", W, X, y, sigma)
            bound = min(cert.primal - D, cert.gap)
            record.setdefault("lib", {})[eps] = (seconds, cert.primal, cert.primal - D,
                                                 cert.gap)
            if bound <= target:
                reached = (eps, seconds)
                break
        lib_t.append(reached[1] if reached else float("inf"))
        record["lib_eps"] = reached[0] if reached else None
        start = time.perf_counter()
        mn = SDCAClassifier(multi_class="multinomial", sigma=sigma, tol=1e-6, fit_intercept=False,
                            max_epochs=args.max_epochs, random_state=rep).fit(X, y)
        mn_t.append(time.perf_counter() - start)
        record.update(mnP=mn.primal_objective_, mngap=mn.duality_gap_, mnep=mn.n_iter_)
        from sklearn.linear_model import LogisticRegression

        start = time.perf_counter()
        sk = LogisticRegression(C=C, fit_intercept=False, max_iter=1000).fit(X, y)
        sk_t.append(time.perf_counter() - start)
        skc = objective("multinomial", sk.coef_, X, y, sigma)
        record.update(skP=skc.primal, skgap=skc.primal - mn.dual_objective_,
                      skcert=skc.gap)
        print(f"repeat {rep}: ours {ours_t[-1]:.2f}s lib {lib_t[-1]:.2f}s mn {mn_t[-1]:.2f}s "
              f"sk {sk_t[-1]:.2f}s", file=sys.stderr, flush=True)
    med = statistics.median
    ok = med(ours_t) <= med(lib_t)
    load = os.getloadavg()
    lines = [
        "# Crammer-Singer and multinomial SDCA on news20 (issue 36)", "",
        "```", f"python bench/bench_multiclass.py {' '.join(shown)}", "```", "",
        f"news20 (LIBSVM training part), {m} rows, {X.shape[1]} features, 20 classes, tf-idf "
        f"rows L2-normalized; sigma = {sigma:g} (C = 1/(sigma m) = {C:.4g} for LIBLINEAR), no "
        f"intercept. Medians of {args.repeats} interleaved runs; load average at the end "
        f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} on 2 cores (shared machine).", "",
        "## Crammer-Singer: SDCA to a certified relative gap 1e-6 against LIBLINEAR -s 4", "",
        f"- ours: {med(ours_t):.2f} s (runs: "
        + ", ".join(f"{t:.2f} s, {e} epochs, {c} checks" for t, e, c in record["runs"])
        + f"); last run P = {record['P']:.10g}, "
        f"certified gap {record['gap']:.3g} (relative {record['gap'] / record['P']:.2g})",
        f"- LIBLINEAR -s 4: {med(lib_t):.2f} s to the same certified suboptimality "
        f"(runs: {', '.join(f'{t:.2f} s' for t in lib_t)}; last run's first -e reaching it: "
        f"{record['lib_eps']})", "",
        "| -e | seconds | P(W_lib) | P(W_lib) - D(ours) | our certificate of W_lib |",
        "|---|---|---|---|---|"]
    for eps, (s, p, sub, gap) in record["lib"].items():
        lines.append(f"| {eps:g} | {s:.2f} | {p:.10g} | {sub:.3g} | {gap:.3g} |")
    lines += ["", f"Goal (ours at most LIBLINEAR's time): **{'MET' if ok else 'NOT MET'}** "
              f"({med(ours_t):.2f} s against {med(lib_t):.2f} s, ratio "
              f"{med(ours_t) / med(lib_t):.2f}).", "",
              "## Multinomial: SDCA against scikit-learn's LogisticRegression (no goal)", "",
              f"- ours (tol 1e-6): {med(mn_t):.2f} s, {record['mnep']} epochs, P = "
              f"{record['mnP']:.10g}, certified gap {record['mngap']:.3g}",
              f"- scikit-learn (lbfgs, default tol): {med(sk_t):.2f} s, P = {record['skP']:.10g}, "
              f"P - D(ours) = {record['skgap']:.3g}, our certificate of its W "
              f"{record['skcert']:.3g}", ""]
    return "\n".join(lines) + "\n"



def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("ONLINEPGS_DATA"),
                        help="directory holding news20_multiclass.svm.gz")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--crammer-singer", action="store_true", help="Crammer-Singer and "
                        "multinomial SDCA against LIBLINEAR -s 4 and scikit-learn")
    parser.add_argument("--sigma", type=float, default=1e-4, help="--crammer-singer's sigma")
    parser.add_argument("--max-epochs", type=int, default=2000,
                        help="--crammer-singer: SDCA's max_epochs")
    parser.add_argument("--out", default=None, help="write the record (markdown) here "
                        "(FILE#NAME: as the section NAME of FILE, bench/_record.py)")
    args = parser.parse_args(argv)
    if not args.data_dir:
        parser.error("--data-dir (or $ONLINEPGS_DATA) is needed")
    if args.crammer_singer:
        text = run_crammer_singer(args, _shown(argv))
    else:
        results, shapes = run(args.data_dir, args.repeats)
        text = report(results, shapes, argv, args.repeats)
    print(text)
    if args.out:
        write_record(args.out, text)


if __name__ == "__main__":
    main()
