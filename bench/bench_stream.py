"""Streams in, models out: one pass of parse + train from text, against VW, scikit-learn, River.

Measures, on a data set decompressed to plain text (``--data imdb``, the default, or
``--data a9a``, the copy shipped in ``onlinepgs.datasets``):

* onlinepgs: its driver, ``onlinepgs train FILE -o MODEL --quiet`` (called in process),
  one pass, logistic loss: chunks parsed in a background thread while the solver trains
  on the previous one, model file written;
* Vowpal Wabbit's own driver, ``Workspace("-d FILE --loss_function logistic ...")`` then
  ``run_parser()``, one pass over the same rows in VW's text format (``label |f idx:val``);
* scikit-learn: ``load_svmlight_file`` plus one epoch of ``SGDClassifier(log_loss)``;
* with ``--river``, River: ``river.stream.iter_libsvm`` and ``learn_one`` of its
  ``linear_model.LogisticRegression`` (its defaults), one pass;

medians of ``--repeats`` runs, methods interleaved, with test accuracy on the test file;
with ``--memory``, the peak RSS of ``onlinepgs train -`` fed a generated 200 MB and 2 GB
stream through a pipe; with ``--test-then-train``, the event-by-event loop of a stream
(``predict_proba`` of a one-row CSR input, then ``partial_fit`` on it) per row at 2^16 to
2^22 columns (``--widths``) for every configuration (p, l1, ball, iterates, sigma="auto",
multiclass, regression), against River's ``predict_proba_one`` + ``learn_one``; with
``--events``, the per-event API (``predict_proba_one`` + ``learn_one`` of a 20-feature
dict) against River's and VW's Python (``Workspace.predict`` + ``learn`` of a text line),
one event at a time, at ``--widths`` (18,24). IMDB is
read from $ONLINEPGS_DATA (``imdb_train.svm.gz``, ``imdb_test.svm.gz``), else from
``shared/data`` beside the checkout.

    python bench/bench_stream.py --sigma 1e-5 --p 1.8 --river --repeats 5 \
        --out docs/bench/stream.md#imdb
    python bench/bench_stream.py --data a9a --river --repeats 5 --out docs/bench/stream.md#a9a
    python bench/bench_stream.py --select --out docs/bench/stream.md#select
    python bench/bench_stream.py --memory --out docs/bench/stream.md#memory
    python bench/bench_stream.py --test-then-train --repeats 3 --out docs/bench/stream.md#events
    python bench/bench_stream.py --events --widths 18,24 --warm 30000 --rows 30000 \
        --block 500 --out docs/bench/stream.md#per-event

(``--out FILE#NAME`` writes the run as the section NAME of FILE: bench/_record.py.)
"""
import argparse
import gzip
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from _record import write_record  # bench/, the directory of this script

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("ONLINEPGS_DATA", REPO.parent / "shared" / "data"))
N_FEATURES = {"imdb": 89527, "a9a": 123}


def source(data, part):
    """The gzip svmlight file of a data set's part ("train" or "test")."""
    if data == "a9a":
        from onlinepgs.datasets import a9a_path
        return Path(a9a_path(part))
    return DATA / f"imdb_{part}.svm.gz"


def prepare(workdir, data="imdb"):
    """Plain svmlight and VW text copies of a data set's train/test in workdir."""
    paths = {}
    for part in ("train", "test"):
        svm = Path(workdir) / f"{data}_{part}.svm"
        vw = Path(workdir) / f"{data}_{part}.vw"
        if not svm.exists():
            with gzip.open(source(data, part), "rb") as fin, open(svm, "wb") as f:
                f.write(fin.read())
            with open(svm) as fin, open(vw, "w") as fout:
                for line in fin:
                    label, _, feats = line.partition(" ")
                    fout.write(f"{label} |f {feats}")
        paths[part] = (svm, vw)
    return paths


def select_sigma(args, out):
    """Choose sigma (and p) for one pass on a validation split of the training file only."""
    from onlinepgs import PGSClassifier, load_svmlight

    X, y = load_svmlight(source("imdb", "train"), n_features=N_FEATURES["imdb"])
    out += ["One pass (file order) on the first 20,000 training rows, accuracy on the last "
            "5,000 (the test file is not used):", "",
            "| iterate | p | sigma | validation accuracy |", "|---|---|---|---|"]
    best = None
    for iterate in ("weighted", "weighted2"):
        for p in (2.0, 1.8):
            for sigma in (1e-5, 2e-5, 5e-5, 1e-4, 2e-4):
                clf = PGSClassifier(p=p, sigma=sigma, iterate=iterate)
                clf.partial_fit(X[:20000], y[:20000], classes=[-1.0, 1.0])
                acc = clf.score(X[20000:], y[20000:])
                out.append(f"| {iterate} | {p:g} | {sigma:g} | {acc:.4f} |")
                if best is None or acc > best[0]:
                    best = (acc, iterate, p, sigma)
    out += ["", f"selected: iterate={best[1]}, p={best[2]:g}, sigma={best[3]:g}"]


def run_onlinepgs(svm_train, svm_test, sigma, workdir, p=2.0, iterate="weighted2"):
    """`onlinepgs train` (in process: the driver, like VW's), model file written included."""
    from onlinepgs import load_model, load_svmlight
    from onlinepgs.cli import main

    model = Path(workdir) / "model.pgs"
    start = time.perf_counter()
    code = main(["train", str(svm_train), "-o", str(model), "--quiet", "--p", str(p),
                 "--sigma", str(sigma), "--iterate", iterate, "--classes=-1,1"])
    seconds = time.perf_counter() - start
    assert code == 0
    clf = load_model(model)
    X_test, y_test = load_svmlight(svm_test, n_features=clf.n_features_in_)
    return seconds, clf.score(X_test, y_test)


def run_vw(vw_train, vw_test, workdir):
    from vowpalwabbit import Workspace

    model = Path(workdir) / "model.vw"
    start = time.perf_counter()
    ws = Workspace(f"-d {vw_train} --loss_function logistic --quiet -f {model}")
    ws.run_parser()
    ws.finish()
    seconds = time.perf_counter() - start
    pred = Path(workdir) / "pred.txt"
    ws = Workspace(f"-d {vw_test} -i {model} -t --quiet -p {pred}")
    ws.run_parser()
    ws.finish()
    y = np.array([float(line.split(" ", 1)[0]) for line in open(vw_test)])
    return seconds, float(np.mean(np.where(np.loadtxt(pred) > 0, 1.0, -1.0) == y))


def run_sklearn(svm_train, svm_test, sigma, n_features):
    from sklearn.datasets import load_svmlight_file
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import SGDClassifier

    start = time.perf_counter()
    X, y = load_svmlight_file(str(svm_train), n_features=n_features)
    # SGDClassifier refuses the int64 indices load_svmlight_file returns: part of its cost
    X.indices, X.indptr = X.indices.astype(np.int32), X.indptr.astype(np.int32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = SGDClassifier(loss="log_loss", alpha=sigma, max_iter=1, tol=None,
                            random_state=0).fit(X, y)
    seconds = time.perf_counter() - start
    X_test, y_test = load_svmlight_file(str(svm_test), n_features=n_features)
    return seconds, clf.score(X_test, y_test)


def run_river(svm_train, svm_test):
    """River's own reader and one pass of ``learn_one`` (its LogisticRegression defaults)."""
    from river import linear_model, stream

    start = time.perf_counter()
    model = linear_model.LogisticRegression()
    for x, label in stream.iter_libsvm(str(svm_train)):
        model.learn_one(x, label > 0)
    seconds = time.perf_counter() - start
    hits = total = 0
    for x, label in stream.iter_libsvm(str(svm_test)):
        hits += model.predict_one(x) == (label > 0)
        total += 1
    return seconds, hits / total


def throughput(args, out):
    with tempfile.TemporaryDirectory() as workdir:
        paths = prepare(workdir, args.data)
        (svm_train, vw_train), (svm_test, vw_test) = paths["train"], paths["test"]
        megabytes = os.path.getsize(svm_train) / 1e6
        out += [f"{args.data}_train as plain text: {megabytes:.1f} MB ({os.path.getsize(vw_train) / 1e6:.1f}"
                f" MB in VW's format); one pass, logistic loss, sigma={args.sigma:g} (onlinepgs "
                f"p={args.p:g}, iterate={args.iterate}, and SGD; VW uses its defaults: adaptive, "
                "normalized, invariant updates, no l2)", ""]
        methods = {
            "onlinepgs": lambda: run_onlinepgs(svm_train, svm_test, args.sigma, workdir,
                                               args.p, args.iterate),
            "vowpalwabbit": lambda: run_vw(vw_train, vw_test, workdir),
            "sklearn load+SGD": lambda: run_sklearn(svm_train, svm_test, args.sigma,
                                                    N_FEATURES[args.data]),
        }
        if args.river:
            methods["river"] = lambda: run_river(svm_train, svm_test)
        results = {name: [] for name in methods}
        acc = {}
        for _ in range(args.repeats):
            for name, fn in methods.items():
                seconds, accuracy = fn()
                results[name].append(seconds)
                acc[name] = accuracy
        rows = ["| method | seconds (median) | MB/s | test accuracy |", "|---|---|---|---|"]
        for name, times in results.items():
            med = float(np.median(times))
            rows.append(f"| {name} | {med:.3f} | {megabytes / med:.0f} | {acc[name]:.4f} |")
        out += rows + [""]
        ours = np.median(results["onlinepgs"])
        vs_vw = np.median(results["vowpalwabbit"]) / ours
        vs_sk = np.median(results["sklearn load+SGD"]) / ours
        out += [f"throughput onlinepgs / VW: {vs_vw:.2f}; accuracy onlinepgs - VW: "
                f"{acc['onlinepgs'] - acc['vowpalwabbit']:+.4f}",
                f"throughput onlinepgs / (load_svmlight_file + SGD): {vs_sk:.2f}"]
        if args.river:
            out.append(f"throughput onlinepgs / River: "
                       f"{np.median(results['river']) / ours:.2f}")


def generate(megabytes, out, seed=0, n_features=2**20, distinct_mb=25):
    """Write ~megabytes of svmlight rows (40 non-zeros each) to the binary stream out.

    ~distinct_mb of distinct rows are formatted once and written over and over: the
    stream's size, not its variety, is what the memory bound is about, and formatting
    text in Python would otherwise dominate the run.
    """
    rng = np.random.RandomState(seed)
    w = rng.randn(n_features)
    blocks, size = [], 0
    while size < distinct_mb * 1e6:
        cols = np.sort(rng.randint(0, n_features, (2000, 40)), axis=1)
        vals = rng.rand(2000, 40)
        labels = np.where(np.sum(w[cols] * vals, axis=1) > 0, 1, -1)
        rows = [f"{label} " + " ".join(f"{j + 1}:{x:.4f}" for j, x in zip(c, v))
                for label, c, v in zip(labels, cols, vals)]
        blocks.append(("\n".join(rows) + "\n").encode())
        size += len(blocks[-1])
    written = 0
    while written < megabytes * 1e6:
        for block in blocks:
            out.write(block)
            written += len(block)
            if written >= megabytes * 1e6:
                break


def peak_rss(megabytes):
    """Peak RSS (MB) of `onlinepgs train -` while this process pipes it a generated stream."""
    with tempfile.TemporaryDirectory() as workdir:
        cmd = [sys.executable, "-m", "onlinepgs.cli", "train", "-", "-o",
               str(Path(workdir) / "m.pgs"), "--quiet", "--bits", "20"]
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE)
        generate(megabytes, proc.stdin)
        proc.stdin.close()
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            raise RuntimeError(f"onlinepgs train exited with {proc.returncode}")
        return usage.ru_maxrss / 1024


def memory(args, out):
    small, large = peak_rss(200), peak_rss(2000)
    out += ["Peak RSS of `onlinepgs train - --bits 20` fed a generated svmlight stream through "
            "a pipe (2**20 features, 40 non-zeros per row):", "",
            "| stream | peak RSS (MB) |", "|---|---|", f"| 200 MB | {small:.1f} |",
            f"| 2 GB | {large:.1f} |", "",
            f"ratio 2 GB / 200 MB: {large / small:.3f} (goal <= 1.10: "
            f"{'met' if large / small <= 1.10 else 'NOT met'})"]


# --test-then-train: name -> (estimator parameters, task, prediction method); the
# scikit-learn estimators, except "learner": the sklearn-free one the command trains
# (`onlinepgs.pgs`), whose input checks cost less per call
EVENT_CONFIGS = {
    "default (sigma auto, weighted2, ball auto)": ({}, "binary", "predict_proba"),
    "default, sklearn-free learner": ({}, "learner", "predict_proba"),
    "default, predict": ({}, "binary", "predict"),
    "sigma 1e-4, weighted2": ({"sigma": 1e-4}, "binary", "predict_proba"),
    "sigma 1e-4, last": ({"sigma": 1e-4, "iterate": "last"}, "binary", "predict_proba"),
    "sigma 1e-4, average": ({"sigma": 1e-4, "iterate": "average"}, "binary", "predict_proba"),
    "sigma 1e-4, weighted": ({"sigma": 1e-4, "iterate": "weighted"}, "binary", "predict_proba"),
    "sigma 1e-4, random": ({"sigma": 1e-4, "iterate": "random"}, "binary", "predict_proba"),
    "sigma 1e-4, R^n (radius None)": ({"sigma": 1e-4, "radius": None}, "binary",
                                      "predict_proba"),
    "sigma 1e-4, radius 10": ({"sigma": 1e-4, "radius": 10.0}, "binary", "predict_proba"),
    "p 1.5": ({"sigma": 1e-4, "p": 1.5}, "binary", "predict_proba"),
    "p 1.01": ({"sigma": 1e-4, "p": 1.01}, "binary", "predict_proba"),
    "l1 1e-5": ({"sigma": 1e-4, "l1": 1e-5}, "binary", "predict_proba"),
    "l1 1e-5, p 1.5, last": ({"sigma": 1e-4, "l1": 1e-5, "p": 1.5, "iterate": "last"},
                             "binary", "predict_proba"),
    "4 classes, one-vs-rest": ({"sigma": 1e-4}, "multi", "predict_proba"),
    "4 classes, multinomial": ({"sigma": 1e-4, "multi_class": "multinomial"}, "multi",
                               "predict_proba"),
    "4 classes, Crammer-Singer": ({"sigma": 1e-4, "loss": "hinge",
                                   "multi_class": "crammer_singer"}, "multi",
                                  "decision_function"),
    "regressor (sigma auto)": ({}, "regression", "predict"),
}


def event_rows(width, n_rows, task, nnz=20, seed=0):
    """n_rows one-row CSR inputs of `width` columns (about nnz entries spread over the
    width, as hashed features are) and their targets, learnable from a hidden model of
    the columns modulo 1024; and the same rows as dicts (River's input)."""
    import scipy.sparse as sp

    rng = np.random.RandomState(seed)
    hidden = rng.randn(1024, 4)
    rows, dicts, targets = [], [], []
    for _ in range(n_rows):
        cols = np.unique(rng.randint(0, width, nnz)).astype(np.int32)
        vals = rng.rand(cols.shape[0])
        score = vals @ hidden[cols % 1024]
        rows.append(sp.csr_matrix((vals, cols, [0, cols.shape[0]]), shape=(1, width)))
        dicts.append(dict(zip(cols.tolist(), vals.tolist())))
        targets.append(score[0] if task == "regression" else
                       int(score[0] > 0) if task == "binary" else int(np.argmax(score)))
    return rows, dicts, np.array(targets)


def event_streams(name, widths, n_rows, warm):
    """Configuration `name` at each width: (the estimator after the first `warm` rows in
    one partial_fit, at the model's full width, the prediction method, the next n_rows
    one-row CSR inputs and their targets)."""
    import scipy.sparse as sp

    from onlinepgs import PGSClassifier, PGSRegressor
    from onlinepgs.pgs import PGSClassifierLearner

    params, task, method = EVENT_CONFIGS[name]
    make = {"regression": PGSRegressor, "learner": PGSClassifierLearner}.get(task, PGSClassifier)
    task = "binary" if task == "learner" else task
    streams = {}
    for b in widths:
        rows, _, y = event_rows(2**b, warm + n_rows, task)
        # the budget of sigma="auto"'s four runs at 2^24 columns is above the default's
        est = make(**params, random_state=0, max_model_bytes=None)
        fit = {} if task == "regression" else {"classes": np.unique(y)}
        est.partial_fit(sp.vstack(rows[:warm]).tocsr(), y[:warm], **fit)
        streams[b] = (est, getattr(est, method), rows[warm:], y[warm:])
    return streams


def river_stream(n_rows, warm):
    """River's LogisticRegression (its defaults) after the first `warm` binary rows (as
    dicts), with the next n_rows and their targets."""
    from river import linear_model

    _, dicts, y = event_rows(2**22, warm + n_rows, "binary")
    model = linear_model.LogisticRegression()
    for x, target in zip(dicts[:warm], y[:warm]):
        model.learn_one(x, bool(target))
    return model, dicts[warm:], y[warm:] > 0


def cpu_per_row(step, rows, targets):
    """CPU seconds of this process per row of `step(x, target)` over the rows."""
    start = time.process_time()
    for x, target in zip(rows, targets):
        step(x, target)
    return (time.process_time() - start) / len(rows)


def test_then_train(args, out):
    widths = [int(b) for b in args.widths.split(",")]
    names = list(EVENT_CONFIGS) if not args.configs else [
        n for n in EVENT_CONFIGS if any(c in n for c in args.configs.split(";"))]
    block = args.block
    out += [f"Test then train, event by event: the first {args.warm} rows in one partial_fit, "
            f"then for each of {args.rows} rows (about 20 non-zeros spread over the width) "
            "the prediction (predict_proba, or the method named) of the one-row CSR input, "
            f"then partial_fit on it. CPU milliseconds per row (time.process_time), the "
            f"median over blocks of {block} rows, the widths' blocks (and River's) "
            f"interleaved, {args.repeats} runs; the ratio is 2^22's time over "
            f"2^{widths[0]}'s (goal: at most 1.2x).", ""]
    per_row = {(name, b): [] for name in names for b in widths}
    river = []
    for _ in range(args.repeats):
        for name in names:
            streams = event_streams(name, widths, args.rows, args.warm)
            their = river_stream(args.rows, args.warm) if args.river else None
            for start in range(0, args.rows, block):
                part = slice(start, start + block)
                for b in widths:
                    est, predict, rows, y = streams[b]

                    def step(x, target, est=est, predict=predict):
                        predict(x)
                        est.partial_fit(x, [target])
                    per_row[name, b].append(cpu_per_row(step, rows[part], y[part]))
                if their is not None:
                    model, dicts, labels = their

                    def river_step(x, target, model=model):
                        model.predict_proba_one(x)
                        model.learn_one(x, target)
                    river.append(cpu_per_row(river_step, dicts[part], labels[part]))
            del streams
    ratio_at = 22 if 22 in widths else widths[-1]
    rows = ["| configuration | " + " | ".join(f"2^{b} (ms)" for b in widths)
            + f" | 2^{ratio_at} / 2^{widths[0]} |", "|---" * (len(widths) + 2) + "|"]
    worst = 0.0
    for name in names:
        med = {b: 1e3 * float(np.median(per_row[name, b])) for b in widths}
        ratio = med[ratio_at] / med[widths[0]]
        worst = max(worst, ratio)
        rows.append(f"| {name} | " + " | ".join(f"{med[b]:.3f}" for b in widths)
                    + f" | {ratio:.2f} |")
    out += rows + [""]
    out.append(f"largest ratio 2^{ratio_at} / 2^{widths[0]}: {worst:.2f} (goal <= 1.2: "
               f"{'met' if worst <= 1.2 else 'NOT met'})")
    if args.river:
        ms = 1e3 * float(np.median(river))
        out.append(f"River LogisticRegression (its defaults), predict_proba_one + learn_one "
                   f"of the rows as dicts: {ms:.3f} ms per row")
        for name in names[:2]:
            ours = 1e3 * float(np.median(per_row[name, ratio_at]))
            out.append(f"{name} at 2^{ratio_at}: {ours:.3f} ms per row, {ours / ms:.1f}x "
                       "River's time")


# --events: the per-event API (learn_one, predict_proba_one) against River and VW's Python,
# one 20-feature event at a time: name -> (estimator parameters, timed at these widths)
EVENT_API = {
    "onlinepgs default (sigma auto)": {},
    "onlinepgs sigma 1e-3": {"sigma": 1e-3},
    "onlinepgs geometry adaptive (eta auto, sigma auto)": {
        "geometry": "adaptive", "radius": None, "iterate": "last"},
}
# --count-only's names of them
COUNT_ONLY = dict(zip(("default", "fixed", "adaptive"), EVENT_API))


def event_dicts(n, seed=0, n_categories=16, n_numbers=4):
    """n events of 20 features (16 categories, one-hot by name as River takes them, and 4
    numbers), their labels (a hidden model of the categories) and the same events as VW
    text lines (one namespace)."""
    rng = np.random.RandomState(seed)
    hidden = rng.randn(n_categories, 50)
    events, labels, lines = [], [], []
    for _ in range(n):
        cats = rng.randint(0, 50, n_categories)
        nums = rng.rand(n_numbers)
        x = {f"c{k}={v}": 1.0 for k, v in enumerate(cats)}
        x.update({f"n{k}": float(v) for k, v in enumerate(nums)})
        label = int(hidden[np.arange(n_categories), cats].sum() + nums.sum() - 2 > 0)
        events.append(x)
        labels.append(label)
        lines.append(("1" if label else "-1") + " |f " + " ".join(
            k if v == 1.0 else f"{k}:{v:.6f}" for k, v in x.items()))
    return events, np.array(labels), lines


def per_event(args, out):
    """predict then learn, event by event: CPU microseconds an event, the median over
    blocks (methods and widths interleaved block by block), after a warm-up that every
    method trains on (at 2^24 it also brings the model's pages into memory)."""
    from river import linear_model
    from vowpalwabbit import Workspace

    from onlinepgs import PGSClassifier

    widths = [int(b) for b in args.widths.split(",")]
    events, labels, lines = event_dicts(args.warm + args.rows * args.repeats)
    if args.count_only:  # one configuration's loop, untimed, for an instruction count
        clf = PGSClassifier(n_bits=widths[0], classes=[0, 1], random_state=0,
                            **EVENT_API[COUNT_ONLY[args.count_only]])
        for x, label in zip(events, labels):
            clf.predict_proba_one(x)
            clf.learn_one(x, label)
        out.append(f"{len(events)} events of {args.count_only!r} at 2^{widths[0]}")
        return
    steps = {}
    for b in widths:
        for name, params in EVENT_API.items():
            clf = PGSClassifier(n_bits=b, classes=[0, 1], random_state=0, **params)

            def ours(i, clf=clf):
                x = events[i]
                clf.predict_proba_one(x)
                clf.learn_one(x, labels[i])
            steps[f"{name}, 2^{b}"] = ours
        ws = Workspace(f"--loss_function logistic -b {b} --quiet")

        def vw(i, ws=ws):
            ws.predict(lines[i])
            ws.learn(lines[i])
        steps[f"VW Workspace.predict + learn (text line), 2^{b}"] = vw
    river = linear_model.LogisticRegression()

    def river_step(i):
        x = events[i]
        river.predict_proba_one(x)
        river.learn_one(x, bool(labels[i]))
    steps["River LogisticRegression (its defaults)"] = river_step
    per_block = {name: [] for name in steps}
    total = {name: 0.0 for name in steps}
    for i in range(args.warm):
        for step in steps.values():
            step(i)
    end = args.warm + args.rows * args.repeats
    for start in range(args.warm, end, args.block):
        block = range(start, min(start + args.block, end))
        for name, step in steps.items():
            begin = time.process_time()
            for i in block:
                step(i)
            seconds = time.process_time() - begin
            per_block[name].append(seconds / len(block))
            total[name] += seconds
    river_us = 1e6 * float(np.median(per_block["River LogisticRegression (its defaults)"]))
    out += [f"predict then learn, one event at a time: {args.warm} events of warm-up, then "
            f"{args.rows * args.repeats} timed (20 features each: 16 categories, 4 numbers); CPU "
            f"microseconds an event (time.process_time), the median over blocks of "
            f"{args.block} events, every method's block in turn; the mean beside it "
            "(a fork of the sigma race copies the state: O(width), once per doubling of "
            "the rows). onlinepgs: predict_proba_one + learn_one of the dict; River: "
            "predict_proba_one + learn_one of the dict; VW: Workspace.predict + learn of "
            "the text line.", "",
            "| method | median (us) | mean (us) | median / River's |", "|---|---|---|---|"]
    met = True
    for name in steps:
        med = 1e6 * float(np.median(per_block[name]))
        mean = 1e6 * total[name] / (args.rows * args.repeats)
        out.append(f"| {name} | {med:.2f} | {mean:.2f} | {med / river_us:.2f} |")
        if name.startswith("onlinepgs"):
            met = met and med <= 0.5 * river_us
    out += ["", f"goal: every onlinepgs median at most 0.5x River's: "
                f"{'met' if met else 'NOT met'}"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data", choices=sorted(N_FEATURES), default="imdb",
                        help="imdb (from $ONLINEPGS_DATA) or a9a (shipped with the package)")
    parser.add_argument("--river", action="store_true", help="time River too")
    parser.add_argument("--memory", action="store_true")
    parser.add_argument("--select", action="store_true",
                        help="choose sigma on a validation split of the training file")
    parser.add_argument("--sigma", type=float, default=1e-4)
    parser.add_argument("--p", type=float, default=2.0)
    parser.add_argument("--iterate", default="weighted2")
    parser.add_argument("--test-then-train", action="store_true",
                        help="time predict then partial_fit per row at several widths")
    parser.add_argument("--widths", default="16,20,22",
                        help="--test-then-train: the widths' powers of 2 (e.g. 16,20,22,24)")
    parser.add_argument("--rows", type=int, default=2000,
                        help="--test-then-train: rows timed per run")
    parser.add_argument("--warm", type=int, default=300,
                        help="--test-then-train: rows of the first partial_fit")
    parser.add_argument("--block", type=int, default=100,
                        help="--test-then-train: rows per timed block")
    parser.add_argument("--events", action="store_true",
                        help="time the per-event API (predict_proba_one + learn_one) "
                             "against River and VW's Python, at --widths")
    parser.add_argument("--count-only", choices=sorted(COUNT_ONLY),
                        help="--events: only this configuration's events at the first "
                             "of --widths, untimed (under valgrind: its instructions)")
    parser.add_argument("--configs",
                        help="--test-then-train: ';'-separated parts of configuration names")
    parser.add_argument("--out")
    args = parser.parse_args()
    out = [f"Command: `{shlex.join(['python'] + sys.argv)}`", "",
           f"Machine: {platform.platform()}, {os.cpu_count()} CPUs, load average "
           f"{os.getloadavg()[0]:.2f}", ""]
    (memory if args.memory else select_sigma if args.select
     else test_then_train if args.test_then_train else per_event if args.events
     else throughput)(args, out)
    text = "\n".join(out) + "\n"
    print(text)
    if args.out:
        write_record(args.out, text)


if __name__ == "__main__":
    main()
