"""The command as a whole process, cold, against a Python process running VW's driver.

Each figure is one process from its start to its exit as a user runs it (interpreter
start-up, imports, reading, training, writing the model), measured by
``/usr/bin/time -f '%e %U %S %M'``; the commands of a comparison run in turn (A B A B
...), after one warm-up run each, and the figures are medians of ``--repeats`` runs;
a ratio is the median of the ratios of the pairs (pairing keeps it meaningful when the
machine's speed drifts). The commands:

* ``onlinepgs --help`` and ``onlinepgs info MODEL`` alone;
* ``onlinepgs train imdb_train.svm -o m.pgs --quiet`` (the defaults: sigma auto) against
  ``python bench/vw_run.py imdb_train.vw`` (``vowpalwabbit.Workspace("-d FILE
  --loss_function logistic --quiet")`` then ``run_parser()``), the same rows in VW's
  text format (``label |f index:value ...``);
* the same on IMDB's training rows five times over (240 MB);
* test accuracy of both models on imdb_test (``onlinepgs eval``; VW ``-t -i -p``).

``onlinepgs`` runs as ``python -m onlinepgs.cli`` from this checkout, its sources
compiled to bytecode first (as ``pip install`` does; without it each start compiles
them again, about 0.3 s when PYTHONDONTWRITEBYTECODE is set).

    python bench/bench_command.py --data-dir DIR --repeats 7 --out docs/bench/command.md

DIR holds ``imdb_train.svm.gz`` and ``imdb_test.svm.gz``; needs ``pip install
vowpalwabbit``.
"""
import argparse
import compileall
import gzip
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VW_RUN = REPO / "bench" / "vw_run.py"


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
    code = ("import sys, vowpalwabbit\n"
            "w = vowpalwabbit.Workspace(sys.argv[1]); w.run_parser(); w.finish()\n")
    for options in (f"-d {train} --loss_function logistic --quiet -f {model}",
                    f"-d {test} -i {model} -t --quiet -p {pred}"):
        subprocess.run([sys.executable, "-c", code, options], env=env, check=True)
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True,
                        help="directory with imdb_train.svm.gz and imdb_test.svm.gz")
    parser.add_argument("--workdir", help="where the text copies go (default: a temporary "
                        "directory, removed at the end)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--copies", type=int, default=5, help="copies of IMDB's training "
                        "rows in the large file")
    parser.add_argument("--out", help="write the markdown report here too")
    args = parser.parse_args()
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
        theirs = [sys.executable, str(VW_RUN)]
        load = os.getloadavg()[0]
        lines = [f"Whole processes, cold, medians of {args.repeats} runs in turn after a "
                 f"warm-up ({platform.processor() or platform.machine()}, "
                 f"{os.cpu_count()} cores, load average {load:.1f} at the start, Python "
                 f"{platform.python_version()}); wall "
                 "seconds (min-max), CPU seconds (user + system), peak RSS MiB. "
                 "`onlinepgs` is `python -m onlinepgs.cli`, `vw_run.py` is "
                 "`python bench/vw_run.py`.", "",
                 "| run | command | wall s | cpu s | peak MiB |", "|---|---|---|---|---|"]
        table = {}
        table.update(compare({"help": ours + ["--help"]}, args.repeats, env))
        timed(ours + ["train", str(svm), "-o", str(model), "--quiet"], env)
        table.update(compare({"info": ours + ["info", str(model)]}, args.repeats, env))
        small = compare({"train": ours + ["train", str(svm), "-o", str(model), "--quiet"],
                         "vw": theirs + [str(vw)]}, args.repeats, env)
        big = compare({"train": ours + ["train", str(big_svm), "-o", str(big_model),
                                        "--quiet"],
                       "vw": theirs + [str(big_vw)]}, args.repeats, env)
        size, big_size = os.path.getsize(svm) / 1e6, os.path.getsize(big_svm) / 1e6
        lines += [row("help", "onlinepgs --help", table["help"]),
                  row("info", "onlinepgs info m.pgs", table["info"]),
                  row(f"IMDB train ({size:.0f} MB)",
                      "onlinepgs train imdb_train.svm -o m.pgs --quiet", small["train"]),
                  row("", "vw_run.py imdb_train.vw", small["vw"]),
                  row(f"IMDB train x{args.copies} ({big_size:.0f} MB)",
                      f"onlinepgs train imdb_train_x{args.copies}.svm -o m.pgs --quiet",
                      big["train"]),
                  row("", f"vw_run.py imdb_train_x{args.copies}.vw", big["vw"])]
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
            Path(args.out).write_text(report)
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
