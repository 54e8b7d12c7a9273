"""Click and flight logs from CSV, with and without interactions, against Vowpal Wabbit.

Issue 35's log goals: ``onlinepgs train`` on a CSV log (each column its own namespace,
categorical values hashed) against VW's own driver on the same rows converted to its text
format (each column a namespace named by the column), the same hashing width (``-b 18``)
and the same interactions (``-q``), both with their defaults otherwise (logistic loss, one
pass; onlinepgs races sigma). Measured:

* test ROC AUC and log loss (scikit-learn's metrics over each tool's probabilities:
  ``onlinepgs predict --kind probabilities``; VW's ``-t -i MODEL -p PRED --link logistic``);
* whole-process wall time and peak RSS of training (``/usr/bin/time -f '%e %M'``, cold,
  imports included), ``--repeats`` runs of each tool interleaved after a warm-up, medians,
  and the median of the per-pair ratios; on the 70,000-row training file as is and on the
  file repeated ``--scale`` times (throughput beyond the start-up).

The logs (``--data-dir``, else $ONLINEPGS_DATA): ``talkingdata_100k.csv.gz`` (TalkingData's
click sample; ``attributed_time`` leaks the label and is dropped, ``click_time`` becomes
its hour) and ``flight_delays_100k.csv.gz`` (US departures; ``DepTime`` becomes its hour,
``Distance`` its hundreds). Columns are renamed so that their first letters (the letters
``-q`` names namespaces by, in both tools) differ. A seeded 70/30 split.

    python bench/bench_logs.py --data-dir DATA --repeats 5 --scale 10 --out docs/bench/logs.md

Needs ``pip install vowpalwabbit scikit-learn``. Run from the repository root with
``PYTHONPATH=.`` to measure the checkout (the command runs as ``python -m onlinepgs.cli``).
"""
import argparse
import csv
import gzip
import io
import json
import os
import platform
import random
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]

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


def prepare(name, data_dir, work, scale):
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


VW_TRAIN = """import sys, vowpalwabbit
w = vowpalwabbit.Workspace(sys.argv[1]); w.run_parser(); w.finish()
"""


def ours_train(csv_path, model, interactions):
    q = [a for inter in interactions for a in ("-q", inter)]
    return ([sys.executable, "-m", "onlinepgs.cli", "train", str(csv_path), "--label", "label",
             "-b", str(BITS), *q, "-o", str(model), "--quiet"])


def vw_train(script, vw_path, model, interactions):
    q = " ".join(f"-q {inter}" for inter in interactions)
    return [sys.executable, str(script),
            f"-d {vw_path} --loss_function logistic -b {BITS} {q} -f {model} --quiet"]


def timed(cmd, env):
    """(wall s, peak MiB) of one whole process."""
    with tempfile.NamedTemporaryFile("r") as t:
        subprocess.run(["/usr/bin/time", "-f", "%e %M", "-o", t.name, *cmd], check=True,
                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wall, kb = t.read().split()[-2:]
    return float(wall), int(kb) / 1024


def interleaved(a, b, repeats, env):
    """Medians of `repeats` interleaved runs of commands a and b after a warm-up of
    each: (a wall, a MiB, b wall, b MiB, median of the a/b wall ratios)."""
    timed(a, env), timed(b, env)
    runs = [(timed(a, env), timed(b, env)) for _ in range(repeats)]
    med = lambda xs: float(np.median(xs))  # noqa: E731
    return (med([r[0][0] for r in runs]), med([r[0][1] for r in runs]),
            med([r[1][0] for r in runs]), med([r[1][1] for r in runs]),
            med([r[0][0] / r[1][0] for r in runs]))


def scores(name, paths, interactions, work, env, y_test):
    """Test AUC and log loss of each tool trained once on the train file."""
    from sklearn.metrics import log_loss, roc_auc_score

    script = work / "vw_train.py"
    tag = "q" if interactions else "plain"
    ours_model, vw_model = work / f"{name}_{tag}.pgs", work / f"{name}_{tag}.vw.model"
    subprocess.run(ours_train(paths["train"][0], ours_model, interactions), check=True,
                   env=env)
    subprocess.run(vw_train(script, paths["train"][1], vw_model, interactions), check=True,
                   env=env)
    out = subprocess.run([sys.executable, "-m", "onlinepgs.cli", "predict", str(ours_model),
                          str(paths["test"][0]), "--kind", "probabilities"], check=True,
                         env=env, capture_output=True, text=True).stdout.splitlines()
    classes = out[0].split(":", 1)[1].split()
    p_ours = np.array([float(line.split()[classes.index("1")]) for line in out[1:]])
    pred = work / f"{name}_{tag}.vw.pred"
    subprocess.run([sys.executable, str(script), f"-t -i {vw_model} -d {paths['test'][1]} "
                    f"-p {pred} --link logistic --quiet"], check=True, env=env)
    p_vw = np.array([float(line.split()[0]) for line in pred.read_text().splitlines()])
    clip = lambda p: np.clip(p, 1e-15, 1 - 1e-15)  # noqa: E731
    return {"ours": (roc_auc_score(y_test, p_ours), log_loss(y_test, clip(p_ours))),
            "vw": (roc_auc_score(y_test, p_vw), log_loss(y_test, clip(p_vw)))}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("ONLINEPGS_DATA"))
    parser.add_argument("--sets", default="talkingdata,flights")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--scale", type=int, default=10)
    parser.add_argument("--out", default=None, help="markdown record to write")
    args = parser.parse_args(argv)
    if not args.data_dir:
        parser.error("--data-dir (or $ONLINEPGS_DATA) is needed")
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    rows, record = [], {}
    with tempfile.TemporaryDirectory(prefix="onlinepgs-logs-") as tmp:
        work = Path(tmp)
        (work / "vw_train.py").write_text(VW_TRAIN)
        for name in args.sets.split(","):
            paths, y_test = prepare(name, args.data_dir, work, args.scale)
            for interactions in ([], SETS[name][3]):
                tag = " ".join(f"-q {i}" for i in interactions) or "none"
                quality = scores(name, paths, interactions, work, env, y_test)
                times = {}
                for size in ("train", f"train_x{args.scale}"):
                    csv_path, vw_path = paths[size]
                    times[size] = interleaved(
                        ours_train(csv_path, work / "t.pgs", interactions),
                        vw_train(work / "vw_train.py", vw_path, work / "t.vw.model",
                                 interactions), args.repeats, env)
                record[f"{name} {tag}"] = {"quality": quality, "times": times}
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
    given = ["DATA" if a == args.data_dir else a for a in (argv or sys.argv[1:])]
    cmd = "python bench/bench_logs.py " + " ".join(shlex.quote(a) for a in given)
    text = (f"# Logs from CSV against Vowpal Wabbit\n\n`{cmd}`\n\n"
            f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
            f"-b {BITS}, {args.repeats} interleaved runs, medians.\n\n{head}\n"
            + "\n".join(rows) + "\n")
    print(text)
    if args.out:
        Path(args.out).write_text(text)
        Path(args.out).with_suffix(".json").write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
