"""The command as a whole process, cold, against a Python process running VW's driver.

Each figure is one process from its start to its exit as a user runs it (interpreter
start-up, imports, reading, training, writing the model), measured by
``/usr/bin/time -f '%e %U %S %M'``; the commands of a comparison run in turn (A B A B
...), after one warm-up run each, and the figures are medians of ``--repeats`` runs;
a ratio is the median of the ratios of the pairs (pairing keeps it meaningful when the
machine's speed drifts). VW's peer is its own driver in a Python process,
``python -c "$VW_DRIVER" "OPTIONS"`` (`VW_DRIVER`: ``vowpalwabbit.Workspace(OPTIONS)``,
``run_parser()``, ``finish()``). ``onlinepgs`` runs as ``python -m onlinepgs.cli`` from
this checkout, its sources compiled to bytecode first (as ``pip install`` does; without
it each start compiles them again, about 0.3 s when PYTHONDONTWRITEBYTECODE is set).

The default mode, on IMDB (``--data-dir`` holds ``imdb_train.svm.gz`` and
``imdb_test.svm.gz``):

* ``onlinepgs --help`` and ``onlinepgs info MODEL`` alone;
* ``onlinepgs train imdb_train.svm -o m.pgs --quiet`` (the defaults: sigma auto) against
  VW's driver with ``-d imdb_train.vw --loss_function logistic --quiet``, the same rows in
  VW's text format (``label |f index:value ...``);
* the same on IMDB's training rows five times over (240 MB);
* test accuracy of both models on imdb_test (``onlinepgs eval``; VW ``-t -i -p``).

    python bench/bench_command.py --data-dir DIR --repeats 7 --out docs/bench/command.md#imdb

``--wide`` mode (no data files): the ``--clicks`` log (``--rows`` rows) hashed into 2^18
and into 2^26 columns (``-b``): ``onlinepgs train`` with each geometry's defaults, as it
is and with every state's block in huge pages as before the first call chose its pages
(``HUGE_PAGES_CLI``; the same model file), against VW's driver with the same ``-b``:
whole processes, wall time and peak RSS; then each model scoring a quarter as many
held-out rows (``onlinepgs predict``) against VW's ``-t -i`` on them.

    python bench/bench_command.py --wide --rows 100000 --repeats 5 --out docs/bench/command.md#wide

``--logs`` mode, issue 35's log goals: ``onlinepgs train`` on a CSV log (each column its
own namespace, categorical values hashed) against VW's driver on the same rows converted
to its text format (each column a namespace named by the column), the same hashing width
(``-b 18``) and the same interactions (``-q``), both with their defaults otherwise
(logistic loss, one pass; onlinepgs races sigma). Measured:

* test ROC AUC and log loss (scikit-learn's metrics over each tool's probabilities:
  ``onlinepgs predict --kind probabilities``; VW's ``-t -i MODEL -p PRED --link logistic``);
* whole-process wall time and peak RSS of training, ``--repeats`` runs of each tool in
  turn after a warm-up, medians, and the median of the per-pair ratios; on the
  70,000-row training file as is and on the file repeated ``--scale`` times (throughput
  beyond the start-up).

The logs (``--data-dir``, else $ONLINEPGS_DATA): ``talkingdata_100k.csv.gz`` (TalkingData's
click sample; ``attributed_time`` leaks the label and is dropped, ``click_time`` becomes
its hour) and ``flight_delays_100k.csv.gz`` (US departures; ``DepTime`` becomes its hour,
``Distance`` its hundreds). Columns are renamed so that their first letters (the letters
``-q`` names namespaces by, in both tools) differ. A seeded 70/30 split.

    python bench/bench_command.py --logs --data-dir DATA --repeats 5 --scale 10 \
        --out docs/bench/command.md#logs

``--clicks`` mode, issue 53's interactions on the fly: an Avazu-shaped click log in VW
text, made by this script in a temporary directory (`write_clicks`: namespaces site,
app, device, user and context of hashed categoricals drawn from Zipf laws, 22 features a
row, clicks at about 17% by a logistic model with crossed site x device-model and
app x device-type effects; ``--rows`` training rows, a quarter of that held out),
``onlinepgs train clicks.vw -b 18 [INTERACTIONS] -o m.pgs --quiet`` against VW's driver
with ``-d clicks.vw --loss_function logistic -b 18 [INTERACTIONS]``, for no
interactions, ``-q sd`` and ``--interactions sda`` (triples): whole processes timed as
above (``--repeats`` runs in turn after a warm-up, medians, the median of the per-pair
ratios of wall and of CPU seconds, peak RSS), and test ROC AUC / log loss of each tool's
model on the held-out rows.

    python bench/bench_command.py --clicks --rows 500000 --repeats 5 \
        --out docs/bench/command.md#clicks

``--oaa`` mode, issue 52's multiclass goal: news20 (``news20_multiclass.svm.gz``, 20
classes, raw term counts) split 70/30 by a seeded shuffle (seed 0: `bench_auto.split`'s
rows, the training rows in shuffled order), written once as svmlight and as VW text
(``label |f index:count ...``, the same rows in the same order). Timed in turn, whole
processes, cold: ``onlinepgs train news20_train.svm -o m.pgs --quiet`` (the defaults: the
global geometry, sigma raced), the same with ``--geometry adaptive`` (its race of eta),
``onlinepgs train news20_train.vw`` (the VW text, hashed into 2^18 columns) and VW's own
command ``python -m vowpalwabbit -d news20_train.vw --oaa 20 -f m.vw --quiet`` (the
package has no ``vw`` executable: its ``__main__`` is the whole process, which parses
``-d`` and writes the model at exit); test accuracy of each model (``onlinepgs eval``;
VW ``-t -i m.vw -p``).

    python bench/bench_command.py --oaa --data-dir DATA --repeats 5 \
        --out docs/bench/command.md#oaa

Needs ``pip install vowpalwabbit`` (and scikit-learn for ``--logs`` and ``--clicks``).
"""
import argparse
import compileall
import csv
import filecmp
import gzip
import io
import os
import platform
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from _record import write_record  # bench/, the directory of this script

REPO = Path(__file__).resolve().parents[1]
# VW's own driver over the options given as the one argument: the peer process
VW_DRIVER = ("import sys, vowpalwabbit\n"
             "w = vowpalwabbit.Workspace(sys.argv[1]); w.run_parser(); w.finish()\n")


def vw_driver(options):
    """The command of VW's driver in a Python process with `options`."""
    return [sys.executable, "-c", VW_DRIVER, options]


def prepare(data_dir, workdir, copies):
    """Plain svmlight and VW text copies of IMDB's train and test in workdir, and the
    training rows `copies` times over (both formats)."""
    paths = {}
    for part in ("train", "test"):
        svm, vw = workdir / f"imdb_{part}.svm", workdir / f"imdb_{part}.vw"
        if not svm.exists():
            with gzip.open(Path(data_dir) / f"imdb_{part}.svm.gz", "rb") as fin, \
                    open(svm, "wb") as f:
                shutil.copyfileobj(fin, f)
        if not vw.exists():
            with open(svm) as fin, open(vw, "w") as fout:
                for line in fin:
                    label, _, feats = line.partition(" ")
                    fout.write(f"{label} |f {feats}")
        paths[part] = (svm, vw)
    big = []
    for path in paths["train"]:
        target = workdir / f"imdb_train_x{copies}{path.suffix}"
        if not target.exists():
            with open(target, "wb") as f:
                for _ in range(copies):
                    with open(path, "rb") as fin:
                        shutil.copyfileobj(fin, f)
        big.append(target)
    paths["big"] = tuple(big)
    return paths


def timed(argv, env):
    """(wall s, cpu s, peak MiB) of one whole process, by /usr/bin/time."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as out:
        done = subprocess.run(["/usr/bin/time", "-o", out.name, "-f", "%e %U %S %M", *argv],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(map(str, argv))} failed:\n{done.stderr}")
        wall, user, system, peak = out.read().split()[-4:]
    return float(wall), float(user) + float(system), int(peak) / 1024


def compare(commands, repeats, env):
    """{name: [(wall, cpu, peak), ...]} of the commands run in turn, one warm-up each."""
    for argv in commands.values():
        timed(argv, env)
    runs = {name: [] for name in commands}
    for _ in range(repeats):
        for name, argv in commands.items():
            runs[name].append(timed(argv, env))
    return runs


def row(name, shown, runs):
    wall = [r[0] for r in runs]
    cpu = [r[1] for r in runs]
    peak = [r[2] for r in runs]
    return (f"| {name} | `{shown}` | {statistics.median(wall):.3f} "
            f"({min(wall):.3f}-{max(wall):.3f}) | {statistics.median(cpu):.3f} | "
            f"{statistics.median(peak):.1f} |")


def ratio(ours, theirs, field=0):
    """The median over the pairs of theirs / ours (> 1: onlinepgs is faster)."""
    return statistics.median(b[field] / a[field] for a, b in zip(ours, theirs))


def accuracy_vw(train, test, workdir, env):
    model, pred = workdir / "model.vw", workdir / "pred.vw.txt"
    for options in (f"-d {train} --loss_function logistic --quiet -f {model}",
                    f"-d {test} -i {model} -t --quiet -p {pred}"):
        subprocess.run(vw_driver(options), env=env, check=True)
    labels = [float(line.split(" ", 1)[0]) for line in open(test)]
    scores = [float(line.split()[0]) for line in open(pred)]
    return sum((s > 0) == (y > 0) for s, y in zip(scores, labels)) / len(labels)


def accuracy_ours(model, test, env):
    done = subprocess.run([sys.executable, "-m", "onlinepgs.cli", "eval", str(model), str(test)],
                          env=env, check=True, capture_output=True, text=True)
    for line in done.stdout.splitlines():
        if line.startswith("accuracy = "):
            return float(line.split("=")[1])
    raise SystemExit(f"no accuracy in eval's output:\n{done.stdout}")


# ---- --logs mode ----------------------------------------------------------------------
# set -> (source file, label column, [(new name, function of the row -> cell text)],
#         interactions)
SETS = {
    "talkingdata": (
        "talkingdata_100k.csv.gz", "is_attributed",
        [("ip", lambda r: r["ip"]), ("app", lambda r: r["app"]),
         ("device", lambda r: r["device"]), ("os", lambda r: r["os"]),
         ("channel", lambda r: r["channel"]),
         ("hour", lambda r: r["click_time"].split(" ")[1].split(":")[0])],
        ["ao", "ac", "dc", "oc"]),
    "flights": (
        "flight_delays_100k.csv.gz", "dep_delayed_15min",
        [("month", lambda r: r["Month"]), ("day", lambda r: r["DayofMonth"]),
         ("weekday", lambda r: r["DayOfWeek"]),
         ("hour", lambda r: str(int(r["DepTime"]) // 100)),
         ("carrier", lambda r: r["UniqueCarrier"]), ("from", lambda r: r["Origin"]),
         ("to", lambda r: r["Dest"]), ("span", lambda r: str(int(r["Distance"]) // 100))],
        ["ft", "ch", "fh", "th"]),
}
BITS = 18


def label_of(text):
    """A log's label cell as 0/1 (is_attributed is 0/1; dep_delayed_15min is N/Y)."""
    return {"0": 0, "1": 1, "N": 0, "Y": 1}[text]


def prepare_log(name, data_dir, work, scale):
    """The set's train/test CSV and VW files (and the train files repeated `scale`
    times) in `work`; returns their paths and the test labels (0/1)."""
    source, label, columns, _ = SETS[name]
    with gzip.open(Path(data_dir) / source, "rt", newline="") as f:
        rows = list(csv.DictReader(f))
    random.Random(0).shuffle(rows)
    cut = int(0.7 * len(rows))
    paths = {}
    for part, chosen in (("train", rows[:cut]), ("test", rows[cut:])):
        table = [[fn(r) for _, fn in columns] + [str(label_of(r[label]))] for r in chosen]
        header = [c for c, _ in columns] + ["label"]
        copies = scale if part == "train" else 1
        for suffix, times in ((part, 1), (f"{part}_x{copies}", copies)):
            if suffix in paths or (times == 1 and suffix != part):
                continue
            out = io.StringIO()
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow(header)
            for _ in range(times):
                writer.writerows(table)
            (work / f"{name}_{suffix}.csv").write_text(out.getvalue())
            # VW: "label |column value ..." (the column's namespace; -1/+1 labels)
            lines = []
            for cells in table:
                feats = " ".join(f"|{c} {v.replace(' ', '_').replace(':', '_')}"
                                 for c, v in zip(header[:-1], cells[:-1]))
                lines.append(f"{'1' if cells[-1] == '1' else '-1'} {feats}\n")
            (work / f"{name}_{suffix}.vw").write_text("".join(lines) * times)
            paths[suffix] = (work / f"{name}_{suffix}.csv", work / f"{name}_{suffix}.vw")
        if part == "test":
            y_test = np.array([int(t[-1]) for t in table])
    return paths, y_test


def ours_train(csv_path, model, interactions):
    q = [a for inter in interactions for a in ("-q", inter)]
    return ([sys.executable, "-m", "onlinepgs.cli", "train", str(csv_path), "--label", "label",
             "-b", str(BITS), *q, "-o", str(model), "--quiet"])


def vw_train(vw_path, model, interactions):
    q = " ".join(f"-q {inter}" for inter in interactions)
    return vw_driver(f"-d {vw_path} --loss_function logistic -b {BITS} {q} -f {model} --quiet")


def interleaved(a, b, repeats, env):
    """Medians of `repeats` runs of commands a and b in turn after a warm-up of each:
    (a wall, a MiB, b wall, b MiB, median of the a/b wall ratios)."""
    runs = compare({"a": a, "b": b}, repeats, env)
    med = statistics.median
    return (med(r[0] for r in runs["a"]), med(r[2] for r in runs["a"]),
            med(r[0] for r in runs["b"]), med(r[2] for r in runs["b"]),
            ratio(runs["b"], runs["a"]))


def scores(name, paths, interactions, work, env, y_test):
    """Test AUC and log loss of each tool trained once on the train file."""
    from sklearn.metrics import log_loss, roc_auc_score

    tag = "q" if interactions else "plain"
    ours_model, vw_model = work / f"{name}_{tag}.pgs", work / f"{name}_{tag}.vw.model"
    subprocess.run(ours_train(paths["train"][0], ours_model, interactions), check=True,
                   env=env)
    subprocess.run(vw_train(paths["train"][1], vw_model, interactions), check=True, env=env)
    out = subprocess.run([sys.executable, "-m", "onlinepgs.cli", "predict", str(ours_model),
                          str(paths["test"][0]), "--kind", "probabilities"], check=True,
                         env=env, capture_output=True, text=True).stdout.splitlines()
    classes = out[0].split(":", 1)[1].split()
    p_ours = np.array([float(line.split()[classes.index("1")]) for line in out[1:]])
    pred = work / f"{name}_{tag}.vw.pred"
    subprocess.run(vw_driver(f"-t -i {vw_model} -d {paths['test'][1]} -p {pred} "
                             "--link logistic --quiet"), check=True, env=env)
    p_vw = np.array([float(line.split()[0]) for line in pred.read_text().splitlines()])
    clip = lambda p: np.clip(p, 1e-15, 1 - 1e-15)  # noqa: E731
    return {"ours": (roc_auc_score(y_test, p_ours), log_loss(y_test, clip(p_ours))),
            "vw": (roc_auc_score(y_test, p_vw), log_loss(y_test, clip(p_vw)))}


# ---- --clicks mode --------------------------------------------------------------------
# (namespace, [(feature, values, Zipf exponent)]): Avazu's columns, their cardinalities
# cut down (device id and ip) so that the generator stays quick
CLICK_COLUMNS = [
    ("site", [("id", 4700, 1.2), ("dom", 7700, 1.2), ("cat", 26, 1.5)]),
    ("app", [("id", 8500, 1.3), ("dom", 560, 1.4), ("cat", 36, 1.6)]),
    ("device", [("id", 300000, 1.05), ("ip", 600000, 1.02), ("model", 8000, 1.1),
                ("type", 5, 2.0), ("conn", 4, 2.0)]),
    ("user", [("c14", 2600, 1.1), ("c15", 8, 2.0), ("c16", 9, 2.0), ("c17", 435, 1.2),
              ("c18", 4, 2.0), ("c19", 68, 1.3), ("c20", 172, 1.2), ("c21", 60, 1.3)]),
    ("context", [("hour", 24, 0.0), ("c1", 7, 2.0), ("pos", 7, 2.0)]),
]
CLICK_INTERACTIONS = {"none": [], "-q sd": ["-q", "sd"], "--interactions sda":
                      ["--interactions", "sda"]}


def write_clicks(path, n_rows, seed):
    """An Avazu-shaped click log of n_rows lines in VW text at `path` (module docstring);
    the generating model is the same for every seed. Returns the labels (0/1)."""
    rng = np.random.default_rng(seed)
    model = np.random.default_rng(12345)
    logit = np.full(n_rows, -0.75)
    codes, parts = {}, []
    for ns, features in CLICK_COLUMNS:
        tokens = []
        for name, values, exponent in features:
            p = np.arange(1, values + 1, dtype=float) ** -exponent
            codes[ns, name] = k = rng.choice(values, size=n_rows, p=p / p.sum())
            logit += model.normal(0, 0.35, values)[k]
            salt = sum(map(ord, ns + name)) * 40503
            vocab = np.array([f"{name}_{(v * 2654435761 + salt) & 0xFFFFFFFF:08x}"
                              for v in range(values)])
            tokens.append(vocab[k])
        parts.append((ns, tokens))
    for a, b in ((("site", "id"), ("device", "model")), (("app", "id"), ("device", "type"))):
        logit += model.normal(0, 0.6, 4096)[(codes[a] * 7919 + codes[b] * 104729) % 4096]
    y = rng.random(n_rows) < 1 / (1 + np.exp(-logit))
    with open(path, "w") as f:
        for i in range(n_rows):
            f.write(("1" if y[i] else "-1") + "".join(
                f" |{ns} " + " ".join(t[i] for t in tokens) for ns, tokens in parts) + "\n")
    return y.astype(int)


def run_clicks(args, given):
    """--clicks: the click log with and without interactions against VW (module
    docstring); returns the record's text."""
    from sklearn.metrics import log_loss, roc_auc_score

    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    compileall.compile_dir(str(REPO / "onlinepgs"), quiet=1)
    rows, goals, threads, load = [], [], [], os.getloadavg()[0]
    clip = lambda p: np.clip(p, 1e-15, 1 - 1e-15)  # noqa: E731
    with tempfile.TemporaryDirectory(prefix="onlinepgs-clicks-") as tmp:
        work = Path(tmp)
        train, test = work / "clicks.vw", work / "clicks_test.vw"
        write_clicks(train, args.rows, 1)
        y_test = write_clicks(test, max(args.rows // 4, 1), 2)
        size = os.path.getsize(train) / 1e6
        for tag, options in CLICK_INTERACTIONS.items():
            ours = [sys.executable, "-m", "onlinepgs.cli", "train", str(train), "-b",
                    str(BITS), *options, "-o", str(work / "m.pgs"), "--quiet"]
            theirs = vw_driver(f"-d {train} --loss_function logistic -b {BITS} "
                               f"{' '.join(options)} -f {work / 'm.vw'} --quiet")
            one = ours + ["--jobs", "1"]  # the race's runs on one thread
            runs = compare({"ours": ours, "one": one, "vw": theirs}, args.repeats, env)
            med = statistics.median
            a_wall, a_cpu, a_mib = (med(r[i] for r in runs["ours"]) for i in range(3))
            b_wall, b_cpu, b_mib = (med(r[i] for r in runs["vw"]) for i in range(3))
            speed, cpu_speed = ratio(runs["ours"], runs["vw"]), ratio(runs["ours"], runs["vw"], 1)
            j_wall, j_cpu = (med(r[i] for r in runs["one"]) for i in range(2))
            threads.append(f"| {tag} | {j_wall:.2f} / {j_cpu:.2f} | {a_wall:.2f} / "
                           f"{a_cpu:.2f} | {ratio(runs['ours'], runs['one']):.2f} | "
                           f"{ratio(runs['ours'], runs['one'], 1):.2f} | "
                           f"{ratio(runs['one'], runs['vw']):.2f} |")
            out = subprocess.run([sys.executable, "-m", "onlinepgs.cli", "predict",
                                  str(work / "m.pgs"), str(test), "--kind", "probabilities"],
                                 check=True, env=env, capture_output=True,
                                 text=True).stdout.splitlines()
            classes = out[0].split(":", 1)[1].split()
            p_ours = np.array([float(line.split()[classes.index("1")]) for line in out[1:]])
            pred = work / "pred.vw.txt"
            subprocess.run(vw_driver(f"-t -i {work / 'm.vw'} -d {test} -p {pred} "
                                     "--link logistic --quiet"), check=True, env=env)
            p_vw = np.array([float(line.split()[0]) for line in pred.read_text().splitlines()])
            auc = (roc_auc_score(y_test, p_ours), roc_auc_score(y_test, p_vw))
            rows.append(f"| {tag} | {auc[0]:.4f} / {log_loss(y_test, clip(p_ours)):.4f} | "
                        f"{auc[1]:.4f} / {log_loss(y_test, clip(p_vw)):.4f} | "
                        f"{a_wall:.2f} / {a_cpu:.2f} / {a_mib:.0f} | "
                        f"{b_wall:.2f} / {b_cpu:.2f} / {b_mib:.0f} | {speed:.2f} | "
                        f"{cpu_speed:.2f} |")
            print(rows[-1], flush=True)
            want = {"none": None, "-q sd": 1.5, "--interactions sda": 1.2}[tag]
            if want is not None:
                met = speed >= want and auc[0] >= auc[1]
                goals.append(f"| `train {tag}` at least {want}x VW's speed, test AUC no "
                             f"lower | {speed:.2f}x (wall; CPU {cpu_speed:.2f}x), AUC "
                             f"{auc[0]:.4f} against {auc[1]:.4f} | "
                             f"{'met' if met else '**not met**'} |")
    head = ("| interactions | onlinepgs test AUC / log loss | VW test AUC / log loss | "
            "onlinepgs train: wall s / cpu s / MiB | VW: wall s / cpu s / MiB | "
            "VW wall / ours | VW cpu / ours |\n|---|---|---|---|---|---|---|")
    cmd = "python bench/bench_command.py " + " ".join(shlex.quote(a) for a in given)
    return (f"# An Avazu-shaped click log in VW text against Vowpal Wabbit\n\n`{cmd}`\n\n"
            f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load "
            f"average {load:.1f} at the start and {os.getloadavg()[0]:.1f} at the end, "
            f"{args.rows:,} training rows "
            f"({size:.0f} MB), {max(args.rows // 4, 1):,} held out, -b {BITS}, "
            f"{args.repeats} interleaved runs, medians.\n\n{head}\n" + "\n".join(rows)
            + "\n\n| goal (issue 53) | figure | met? |\n|---|---|---|\n"
            + "\n".join(goals) + "\n\nThe race's runs on one thread (`--jobs 1`) "
            "against the default (threads up to the cores but the reader's while it parses; the same model bit for bit):"
            "\n\n| interactions | --jobs 1: wall s / cpu s | default: wall s / cpu s | "
            "--jobs 1 wall / default's | cpu | VW wall / --jobs 1's |\n|---|---|---|---|---|---|\n"
            + "\n".join(threads) + "\n")


WIDE_BITS = (18, 26)
# the block in huge pages whatever the first call's rows reach, as before the first call
# chose its pages (onlinepgs/_core/_pages.pyx): the same command otherwise
HUGE_PAGES_CLI = ("import sys, onlinepgs.pgs\n"
                  "onlinepgs.pgs.small_pages_pay = lambda *args, **kwargs: False\n"
                  "from onlinepgs.cli import main\n"
                  "sys.exit(main(sys.argv[1:]))")


def run_wide(args, given):
    """--wide: the click log (`write_clicks`, --rows rows) hashed into 2^18 and 2^26
    columns: `onlinepgs train -b B` with each geometry's defaults, its blocks' pages
    chosen by the first call and in huge pages (`HUGE_PAGES_CLI`), against VW's driver
    with the same -b; returns the record's text."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    compileall.compile_dir(str(REPO / "onlinepgs"), quiet=1)
    load, rows, predicted = os.getloadavg()[0], [], []
    with tempfile.TemporaryDirectory(prefix="onlinepgs-wide-") as tmp:
        work = Path(tmp)
        train, test = work / "clicks.vw", work / "clicks_test.vw"
        write_clicks(train, args.rows, 1)
        write_clicks(test, max(args.rows // 4, 1), 2)
        size = os.path.getsize(train) / 1e6
        for bits in WIDE_BITS:
            commands = {"vw": vw_driver(f"-d {train} --loss_function logistic -b {bits} "
                                        f"-f {work / 'm.vw'} --quiet")}
            for geometry in ("global", "adaptive"):
                tail = ["train", str(train), "-b", str(bits), "--geometry", geometry,
                        "--quiet"]
                commands[geometry] = [sys.executable, "-m", "onlinepgs.cli", *tail, "-o",
                                      str(work / f"{geometry}.pgs")]
                commands[geometry + ", huge pages"] = [
                    sys.executable, "-c", HUGE_PAGES_CLI, *tail, "-o",
                    str(work / f"{geometry}_huge.pgs")]
            runs = compare(commands, args.repeats, env)
            for geometry in ("global", "adaptive"):
                same = filecmp.cmp(work / f"{geometry}.pgs", work / f"{geometry}_huge.pgs",
                                   shallow=False)
                for name in (geometry, geometry + ", huge pages"):
                    med = [statistics.median(r[i] for r in runs[name]) for i in range(3)]
                    shown = f"`train --geometry {geometry}`" + (
                        " (huge pages)" if name != geometry else "")
                    rows.append(f"| {bits} | {shown} | {med[0]:.2f} | "
                                f"{med[1]:.2f} | {med[2]:.0f} | "
                                f"{ratio(runs['vw'], runs[name]):.2f} | "
                                f"{ratio(runs['vw'], runs[name], 2):.2f} | "
                                f"{'yes' if same else 'NO'} |")
                    print(rows[-1], flush=True)
            med = [statistics.median(r[i] for r in runs["vw"]) for i in range(3)]
            rows.append(f"| {bits} | VW's driver | {med[0]:.2f} | {med[1]:.2f} | "
                        f"{med[2]:.0f} | 1 | 1 | |")
            # the models just written, scoring the held-out rows
            commands = {"vw": vw_driver(f"-d {test} -t -i {work / 'm.vw'} -p "
                                        f"{work / 'p.vw.txt'} --quiet")}
            for geometry in ("global", "adaptive"):
                commands[geometry] = [sys.executable, "-m", "onlinepgs.cli", "predict",
                                      str(work / f"{geometry}.pgs"), str(test), "-o",
                                      str(work / f"p_{geometry}.txt")]
            runs = compare(commands, args.repeats, env)
            for name in ("global", "adaptive", "vw"):
                med = [statistics.median(r[i] for r in runs[name]) for i in range(3)]
                shown = "VW's driver `-t -i`" if name == "vw" else (
                    f"`predict` (a `--geometry {name}` model)")
                ratios = ("1 | 1" if name == "vw" else f"{ratio(runs['vw'], runs[name]):.2f} | "
                          f"{ratio(runs['vw'], runs[name], 2):.2f}")
                predicted.append(f"| {bits} | {shown} | {med[0]:.2f} | {med[1]:.2f} | "
                                 f"{med[2]:.0f} | {ratios} |")
                print(predicted[-1], flush=True)
    cmd = "python bench/bench_command.py " + " ".join(shlex.quote(a) for a in given)
    return (f"# The click log hashed into 2^18 and 2^26 columns, against Vowpal Wabbit\n\n"
            f"`{cmd}`\n\n{platform.processor() or platform.machine()}, {os.cpu_count()} "
            f"CPUs, load average {load:.1f} at the start and {os.getloadavg()[0]:.1f} at the "
            f"end, {args.rows:,} training rows ({size:.0f} MB), {args.repeats} interleaved "
            "runs after a warm-up each, medians; ratios are medians of the per-round ratios "
            "(> 1: VW's is the smaller).\n\n| -b | command | wall s | cpu s | peak MiB | "
            "ours / VW's wall | ours / VW's peak | the same file in huge pages |\n"
            "|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n\n"
            f"Scoring {max(args.rows // 4, 1):,} held-out rows with each model:\n\n"
            "| -b | command | wall s | cpu s | peak MiB | ours / VW's wall | "
            "ours / VW's peak |\n|---|---|---|---|---|---|---|\n"
            + "\n".join(predicted) + "\n")


def run_logs(args, given):
    """--logs: the CSV logs against VW (module docstring); returns the record's text."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    rows = []
    with tempfile.TemporaryDirectory(prefix="onlinepgs-logs-") as tmp:
        work = Path(tmp)
        for name in args.sets.split(","):
            paths, y_test = prepare_log(name, args.data_dir, work, args.scale)
            for interactions in ([], SETS[name][3]):
                tag = " ".join(f"-q {i}" for i in interactions) or "none"
                quality = scores(name, paths, interactions, work, env, y_test)
                times = {}
                for size in ("train", f"train_x{args.scale}"):
                    csv_path, vw_path = paths[size]
                    times[size] = interleaved(
                        ours_train(csv_path, work / "t.pgs", interactions),
                        vw_train(vw_path, work / "t.vw.model", interactions),
                        args.repeats, env)
                big = times[f"train_x{args.scale}"]
                small = times["train"]
                rows.append(
                    f"| {name} | {tag} | {quality['ours'][0]:.4f} / {quality['ours'][1]:.4f} "
                    f"| {quality['vw'][0]:.4f} / {quality['vw'][1]:.4f} "
                    f"| {small[0]:.2f} / {small[1]:.0f} | {small[2]:.2f} / {small[3]:.0f} "
                    f"| {1 / small[4]:.2f} | {big[0]:.2f} / {big[1]:.0f} "
                    f"| {big[2]:.2f} / {big[3]:.0f} | {1 / big[4]:.2f} |")
                print(rows[-1], flush=True)
    head = ("| log | interactions | onlinepgs test AUC / log loss | VW test AUC / log loss "
            "| onlinepgs train, 70k rows: s / MiB | VW: s / MiB | VW time / ours "
            f"| onlinepgs, {args.scale}x rows: s / MiB | VW: s / MiB | VW time / ours |\n"
            "|---|---|---|---|---|---|---|---|---|---|")
    cmd = "python bench/bench_command.py " + " ".join(shlex.quote(a) for a in given)
    return (f"# Logs from CSV against Vowpal Wabbit\n\n`{cmd}`\n\n"
            f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
            f"-b {BITS}, {args.repeats} interleaved runs, medians.\n\n{head}\n"
            + "\n".join(rows) + "\n")


# ---- --oaa mode -----------------------------------------------------------------------
OAA_SEED, OAA_TEST = 0, 0.3  # bench_auto.py's split of news20


def prepare_oaa(data_dir, work):
    """news20's seeded 70/30 split as svmlight and VW text: {part: (svm, vw)}, and the
    test labels."""
    with gzip.open(Path(data_dir) / "news20_multiclass.svm.gz", "rt") as f:
        lines = [line.strip() for line in f if line.strip()]
    perm = np.random.RandomState(OAA_SEED).permutation(len(lines))
    n_train = len(lines) - int(round(OAA_TEST * len(lines)))
    paths = {}
    for part, rows in (("train", perm[:n_train]), ("test", perm[n_train:])):
        svm, vw = work / f"news20_{part}.svm", work / f"news20_{part}.vw"
        with open(svm, "w") as fs, open(vw, "w") as fv:
            for i in rows:
                label, _, feats = lines[i].partition(" ")
                fs.write(lines[i] + "\n")
                fv.write(f"{label} |f {feats}\n")
        paths[part] = (svm, vw)
    return paths, [int(lines[i].split(" ", 1)[0]) for i in perm[n_train:]]


def vw_command(options):
    """VW's own command: the vowpalwabbit package's ``python -m vowpalwabbit``."""
    return [sys.executable, "-m", "vowpalwabbit", *shlex.split(options)]


def run_oaa(args, given):
    """--oaa: news20 multiclass against VW --oaa 20 (module docstring); the record."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    compileall.compile_dir(str(REPO / "onlinepgs"), quiet=1)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="onlinepgs-oaa-") as tmp:
        work = Path(tmp)
        paths, y_test = prepare_oaa(args.data_dir, work)
        (svm, vw), (svm_test, vw_test) = paths["train"], paths["test"]
        ours = [sys.executable, "-m", "onlinepgs.cli", "train"]
        runs = {  # name: (command shown, argv, model, test file)
            "global": ("onlinepgs train news20_train.svm -o m.pgs --quiet",
                       ours + [str(svm), "-o", str(work / "g.pgs"), "--quiet"],
                       work / "g.pgs", svm_test),
            "adaptive": ("onlinepgs train news20_train.svm -o m.pgs --quiet --geometry adaptive",
                         ours + [str(svm), "-o", str(work / "a.pgs"), "--quiet",
                                 "--geometry", "adaptive"], work / "a.pgs", svm_test),
            "global --jobs 1": ("onlinepgs train news20_train.svm -o m.pgs --quiet --jobs 1",
                                ours + [str(svm), "-o", str(work / "g1.pgs"), "--quiet",
                                        "--jobs", "1"], work / "g1.pgs", svm_test),
            "adaptive --jobs 1": ("onlinepgs train news20_train.svm -o m.pgs --quiet "
                                  "--geometry adaptive --jobs 1",
                                  ours + [str(svm), "-o", str(work / "a1.pgs"), "--quiet",
                                          "--geometry", "adaptive", "--jobs", "1"],
                                  work / "a1.pgs", svm_test),
            "vw text": ("onlinepgs train news20_train.vw -o m.pgs --quiet",
                        ours + [str(vw), "-o", str(work / "v.pgs"), "--quiet"],
                        work / "v.pgs", vw_test),
            "vw": ("python -m vowpalwabbit -d news20_train.vw --oaa 20 -f m.vw --quiet",
                   vw_command(f"-d {vw} --oaa 20 -f {work / 'm.vw'} --quiet"),
                   work / "m.vw", vw_test)}
        times = compare({name: run[1] for name, run in runs.items()}, args.repeats, env)
        acc = {name: accuracy_ours(run[2], run[3], env)
               for name, run in runs.items() if name != "vw"}
        pred = work / "pred.txt"
        subprocess.run(vw_command(f"-d {vw_test} -t -i {work / 'm.vw'} -p {pred} --quiet"),
                       check=True, env=env)
        predicted = [int(float(line.split()[0])) for line in pred.read_text().splitlines()]
        acc["vw"] = float(np.mean(np.array(predicted) == np.array(y_test)))
    med = statistics.median
    lines = ["| run | command | test accuracy | wall s (min-max) | cpu s | peak MiB | "
             "wall / VW's (median of pairs) | cpu / VW's | peak / VW's |",
             "|---|---|---|---|---|---|---|---|---|"]
    goals = []
    for name, (shown, *_rest) in runs.items():
        wall = [r[0] for r in times[name]]
        peak = med(r[2] for r in times[name])
        vw_peak = med(r[2] for r in times["vw"])
        # ours over VW's, pair by pair: wall and CPU seconds
        over, cpu_over = ratio(times["vw"], times[name]), ratio(times["vw"], times[name], 1)
        lines.append(f"| {name} | `{shown}` | {acc[name]:.4f} | {med(wall):.3f} "
                     f"({min(wall):.3f}-{max(wall):.3f}) | "
                     f"{med(r[1] for r in times[name]):.3f} | {peak:.1f} | "
                     + (" | | |" if name == "vw" else
                        f"{over:.2f} | {cpu_over:.2f} | {peak / vw_peak:.2f} |"))
        if name != "vw":
            met = acc[name] >= acc["vw"] and over <= 3.0 and peak <= 3.0 * vw_peak
            goals.append(f"| {name} | {acc[name]:.4f} against {acc['vw']:.4f} | "
                         f"{over:.2f}x (CPU {cpu_over:.2f}x) | {peak / vw_peak:.2f}x | "
                         f"{'met' if met else '**not met**'} |")
    threads = ["| run | wall / --jobs 1's (median of pairs) | cpu / --jobs 1's |",
               "|---|---|---|"]
    for name in ("global", "adaptive"):  # the race's runs on the cores against one thread
        threads.append(f"| {name} | {ratio(times[name + ' --jobs 1'], times[name]):.2f} | "
                       f"{ratio(times[name + ' --jobs 1'], times[name], 1):.2f} |")
    cmd = "python bench/bench_command.py " + " ".join(shlex.quote(a) for a in given)
    return (f"# news20 multiclass against VW --oaa 20\n\n`{cmd}`\n\n"
            f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load "
            f"average {load:.1f} at the start and {os.getloadavg()[0]:.1f} at the end; "
            f"11,155 training rows, 4,780 held out; {args.repeats} runs of each command in "
            "turn after a warm-up, medians.\n\n" + "\n".join(lines)
            + "\n\n| run | accuracy against VW's | time over VW's | peak over VW's | "
            "goal (issue 52: accuracy no lower, at most 3x time and memory) |\n"
            "|---|---|---|---|---|\n" + "\n".join(goals) + "\n\n"
            "The race's runs on the cores (the default: threads up to the cores but the reader's while it parses) against "
            "one thread (`--jobs 1`; the same models bit for bit):\n\n"
            + "\n".join(threads) + "\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logs", action="store_true", help="the CSV logs (TalkingData, "
                        "flights) with and without interactions, instead of IMDB")
    parser.add_argument("--data-dir", default=os.environ.get("ONLINEPGS_DATA"),
                        help="directory with imdb_train.svm.gz and imdb_test.svm.gz (--logs: "
                        "the logs' .csv.gz); default $ONLINEPGS_DATA")
    parser.add_argument("--workdir", help="where IMDB's text copies go (default: a "
                        "temporary directory, removed at the end)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--copies", type=int, default=5, help="copies of IMDB's training "
                        "rows in the large file")
    parser.add_argument("--clicks", action="store_true", help="an Avazu-shaped click log "
                        "that this script makes, with and without interactions, instead "
                        "of IMDB")
    parser.add_argument("--wide", action="store_true", help="the click log hashed into "
                        "2^18 and 2^26 columns, each geometry, pages chosen and in huge "
                        "pages, against VW (no data files; --rows, --repeats)")
    parser.add_argument("--oaa", action="store_true", help="news20 multiclass (20 "
                        "classes) against VW --oaa 20, instead of IMDB")
    parser.add_argument("--rows", type=int, default=500_000, help="--clicks: training rows")
    parser.add_argument("--sets", default="talkingdata,flights", help="--logs: the logs")
    parser.add_argument("--scale", type=int, default=10, help="--logs: copies of a log's "
                        "training rows in the large file")
    parser.add_argument("--out", help="write the markdown report here too (FILE#NAME: as "
                        "the section NAME of FILE, bench/_record.py)")
    args = parser.parse_args(argv)
    if args.clicks or args.wide:
        report = (run_wide if args.wide else run_clicks)(
            args, sys.argv[1:] if argv is None else argv)
        print(report)
        if args.out:
            write_record(args.out, report)
        return
    if not args.data_dir:
        parser.error("--data-dir (or $ONLINEPGS_DATA) is needed")
    if args.logs or args.oaa:
        given = ["DATA" if a == args.data_dir else a
                 for a in (sys.argv[1:] if argv is None else argv)]
        report = (run_oaa if args.oaa else run_logs)(args, given)
        print(report)
        if args.out:
            write_record(args.out, report)
        return
    keep = args.workdir is not None
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench_command_"))
    workdir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    compileall.compile_dir(str(REPO / "onlinepgs"), quiet=1)
    try:
        paths = prepare(args.data_dir, workdir, args.copies)
        (svm, vw), (svm_test, vw_test), (big_svm, big_vw) = (
            paths["train"], paths["test"], paths["big"])
        model, big_model = workdir / "m.pgs", workdir / "m_big.pgs"
        ours = [sys.executable, "-m", "onlinepgs.cli"]
        load = os.getloadavg()[0]
        lines = [f"Whole processes, cold, medians of {args.repeats} runs in turn after a "
                 f"warm-up ({platform.processor() or platform.machine()}, "
                 f"{os.cpu_count()} cores, load average {load:.1f} at the start, Python "
                 f"{platform.python_version()}); wall "
                 "seconds (min-max), CPU seconds (user + system), peak RSS MiB. "
                 "`onlinepgs` is `python -m onlinepgs.cli`, `vw FILE` is VW's driver "
                 "in a Python process with `-d FILE --loss_function logistic --quiet` "
                 "(`bench/bench_command.py`'s `VW_DRIVER`).", "",
                 "| run | command | wall s | cpu s | peak MiB |", "|---|---|---|---|---|"]
        table = {}
        table.update(compare({"help": ours + ["--help"]}, args.repeats, env))
        timed(ours + ["train", str(svm), "-o", str(model), "--quiet"], env)
        table.update(compare({"info": ours + ["info", str(model)]}, args.repeats, env))
        small = compare({"train": ours + ["train", str(svm), "-o", str(model), "--quiet"],
                         "vw": vw_driver(f"-d {vw} --loss_function logistic --quiet")},
                        args.repeats, env)
        big = compare({"train": ours + ["train", str(big_svm), "-o", str(big_model),
                                        "--quiet"],
                       "vw": vw_driver(f"-d {big_vw} --loss_function logistic --quiet")},
                      args.repeats, env)
        size, big_size = os.path.getsize(svm) / 1e6, os.path.getsize(big_svm) / 1e6
        lines += [row("help", "onlinepgs --help", table["help"]),
                  row("info", "onlinepgs info m.pgs", table["info"]),
                  row(f"IMDB train ({size:.0f} MB)",
                      "onlinepgs train imdb_train.svm -o m.pgs --quiet", small["train"]),
                  row("", "vw imdb_train.vw", small["vw"]),
                  row(f"IMDB train x{args.copies} ({big_size:.0f} MB)",
                      f"onlinepgs train imdb_train_x{args.copies}.svm -o m.pgs --quiet",
                      big["train"]),
                  row("", f"vw imdb_train_x{args.copies}.vw", big["vw"])]
        acc = {"ours": accuracy_ours(model, svm_test, env),
               "vw": accuracy_vw(vw, vw_test, workdir, env),
               "ours_big": accuracy_ours(big_model, svm_test, env),
               "vw_big": accuracy_vw(big_vw, vw_test, workdir, env)}
        lines += ["", "| data | VW wall / onlinepgs wall | VW cpu / onlinepgs cpu | "
                  "test accuracy onlinepgs | VW | difference |", "|---|---|---|---|---|---|"]
        for name, runs, a, b in ((f"IMDB ({size:.0f} MB)", small, acc["ours"], acc["vw"]),
                                 (f"IMDB x{args.copies} ({big_size:.0f} MB)", big,
                                  acc["ours_big"], acc["vw_big"])):
            lines.append(f"| {name} | {ratio(runs['train'], runs['vw']):.2f} | "
                         f"{ratio(runs['train'], runs['vw'], 1):.2f} | {a:.4f} | {b:.4f} | "
                         f"{a - b:+.4f} |")
        report = "\n".join(lines) + "\n"
        print(report)
        if args.out:
            write_record(args.out, report)
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
