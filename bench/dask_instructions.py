"""Instructions, not seconds: the work of a fit on Dask's threads against one process's,
counted by callgrind, a witness that this machine's noise does not move.

The stream of bench_dask.py (``--rows`` rows in blocks of 100,000, 2**18 features) is made
once and kept as .npy files under ``--cache``. The script then runs itself under
``valgrind --tool=callgrind --separate-threads=yes`` (PYTHONHASHSEED=0, one BLAS thread)
for each p: once loading the blocks and building the estimator and the Dask array
without training (what the other runs subtract), once training one process
(``partial_fit`` over the blocks in order, the benchmark's baseline) and once
``onlinepgs.dask.fit`` on Dask's 2 threads (the defaults: 2 lanes, ``slice_rows="auto"``).
Every run first fits a few rows both ways (what a first fit costs, paid alike).
Printed: each fit's instructions (all its threads), the threads' over one process's (the
work the scheme adds), and the threads' split by the core's methods, inclusive: the
lanes' training (``PGSState.run``), their forks, syncs and deltas (``fork``,
``sync_from``, ``delta_from``: each lane's own, run in parallel), the merges
(``absorb``) and the rest (blocks read and validated, Dask's scheduler, the driver). The
speedup the instructions allow two equal cores is one process's instructions over the
lanes' half plus all the rest, as if the merges, reads and driver never overlapped a
lane. A speedup short of that on a real machine is time that instructions do not show:
the cores' speed, their shared caches and memory, the faster lane's wait.

    python bench/dask_instructions.py --rows 10000000 --p 2 1.8 --out docs/bench/dask_instructions_10m.md
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_dask import block_sizes, make_block  # noqa: E402

DIM = 2**18


def prepare(cache, rows):
    """Make the blocks once (the same rows as bench_dask.py's) and keep them as .npy."""
    cache.mkdir(parents=True, exist_ok=True)
    if (cache / f"rows-{rows}").exists():
        return
    sizes = block_sizes(rows)
    for i, n in enumerate(sizes):
        X, y = make_block(1000 + i, n, DIM, 60, 1.2)
        np.save(cache / f"data-{i}.npy", X.data)
        np.save(cache / f"indices-{i}.npy", X.indices)
        np.save(cache / f"indptr-{i}.npy", X.indptr)
        np.save(cache / f"y-{i}.npy", y)
    (cache / f"rows-{rows}").write_text(str(len(sizes)))


def load(cache, rows):
    blocks = []
    for i, n in enumerate(block_sizes(rows)):
        X = sp.csr_matrix((np.load(cache / f"data-{i}.npy"), np.load(cache / f"indices-{i}.npy"),
                           np.load(cache / f"indptr-{i}.npy")), shape=(n, DIM))
        X.has_canonical_format = True  # as make_block left it (sorted, summed)
        blocks.append((X, np.load(cache / f"y-{i}.npy")))
    return blocks


def child(cache, rows, what, p, sigma):
    """Run under callgrind: load, warm up, then train as `what` says ("load": not at all).
    The warm-up (a few rows, both ways) makes every run pay alike for what a first fit
    costs (Dask's threaded scheduler imported, the core's first calls)."""
    from bench_dask import dask_array, estimator

    import onlinepgs.dask as opd

    blocks = load(cache, rows)
    X, y = dask_array(blocks, DIM)
    est = estimator(p, sigma)
    few = [(Xb[:1000], yb[:1000]) for Xb, yb in blocks[:2]]
    estimator(p, sigma).partial_fit(few[0][0], few[0][1], classes=[-1.0, 1.0])
    opd.fit(estimator(p, sigma), *dask_array(few, DIM), classes=[-1.0, 1.0], n_lanes=2)
    if what == "single":
        for Xb, yb in blocks:
            est.partial_fit(Xb, yb, classes=[-1.0, 1.0])
    elif what == "threads":
        opd.fit(est, X, y, classes=[-1.0, 1.0], n_lanes=2)


# The core's methods whose inclusive instructions split a fit (Cython's wrappers)
PARTS = {"run": "train", "fork": "lanes", "delta_from": "lanes", "sync_from": "lanes",
         "absorb": "merge"}


def _thread_files(prefix):
    def tid(path):
        tail = path[len(prefix):]
        return int(tail.rsplit("-", 1)[1]) if "-" in tail else 0
    return sorted(glob.glob(f"{prefix}*"), key=tid)


_METHOD = re.compile(r"^\s*([\d,]+) \([ \d.]+%\)\s+[^ ]*_pgs\.c:__pyx_pw_\w*_8PGSState_\d+([a-z_]+) \[")


def totals(prefix):
    """(instructions of each thread of one callgrind run, main thread first; the
    inclusive instructions of each of PARTS' methods over all threads)."""
    counts, parts = [], dict.fromkeys(PARTS, 0)
    for path in _thread_files(prefix):
        for line in open(path, errors="replace"):
            if line.startswith(("summary:", "totals:")):
                counts.append(int(line.split()[1]))
                break
        text = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", "--auto=no",
                               path], capture_output=True, text=True).stdout
        for line in text.splitlines():
            m = _METHOD.match(line)
            if m and m.group(2) in PARTS:
                parts[m.group(2)] += int(m.group(1).replace(",", ""))
    return counts, parts


def measure(cache, rows, what, p, sigma, workdir):
    prefix = os.path.join(workdir, f"cg-{what}-{p}")
    env = dict(os.environ, PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1",
               OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--separate-threads=yes",
         f"--callgrind-out-file={prefix}.%p", sys.executable, __file__, "--child", what,
         "--cache", str(cache.parent), "--rows", str(rows), "--p", str(p),
         "--sigma", str(sigma)],
        env=env, stderr=subprocess.PIPE, text=True)
    if done.returncode:
        sys.exit(f"{what} at p = {p} failed under callgrind:\n{done.stderr[-3000:]}")
    return totals(prefix + ".")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--p", type=float, nargs="+", default=[2.0])
    parser.add_argument("--sigma", type=float, default=1e-5)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "onlinepgs-stream")
    parser.add_argument("--child", choices=["load", "single", "threads"])
    parser.add_argument("--out")
    args = parser.parse_args()
    cache = args.cache / str(args.rows)
    if args.child:
        child(cache, args.rows, args.child, args.p[0], args.sigma)
        return
    prepare(cache, args.rows)
    build = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                           text=True, cwd=Path(__file__).resolve().parents[1]).stdout.strip()
    lines = [f"`python bench/dask_instructions.py {' '.join(sys.argv[1:])}` at {build}: "
             f"{args.rows:,} rows, sigma {args.sigma:g}; instructions (millions) by "
             "`valgrind --tool=callgrind --separate-threads=yes`, minus a run that loads "
             "the blocks and trains nothing.", "",
             "| p | one process | threads: all | threads over one process | lanes' "
             "training | lanes' forks, syncs and deltas | merges | the rest (blocks read, "
             "Dask, the driver) | speedup the instructions allow |",
             "|---|---|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as workdir:
        for p in args.p:
            base, b_parts = measure(cache, args.rows, "load", p, args.sigma, workdir)
            single, s_parts = measure(cache, args.rows, "single", p, args.sigma, workdir)
            threads, t_parts = measure(cache, args.rows, "threads", p, args.sigma, workdir)
            # the warm-up's calls are in every run: what the fit made is the difference
            s_parts = {n: v - b_parts[n] for n, v in s_parts.items()}
            t_parts = {n: v - b_parts[n] for n, v in t_parts.items()}
            s = sum(single) - sum(base)
            t = sum(threads) - sum(base)
            by = {k: sum(v for n, v in t_parts.items() if PARTS[n] == k)
                  for k in ("train", "lanes", "merge")}
            rest = t - sum(by.values())
            path = (by["train"] + by["lanes"]) / 2 + by["merge"] + rest
            lines.append(
                f"| {p:g} | {s / 1e6:,.0f} (training {s_parts['run'] / 1e6:,.0f}) | "
                f"{t / 1e6:,.0f} | {t / s:.3f} | {by['train'] / 1e6:,.0f} | "
                f"{by['lanes'] / 1e6:,.0f} | {by['merge'] / 1e6:,.0f} | {rest / 1e6:,.0f} | "
                f"{s / path:.2f}x |")
            lines.append(f"<!-- by thread (millions): one process {[round(c / 1e6) for c in single]}, "
                         f"threads {[round(c / 1e6) for c in threads]}, load only "
                         f"{[round(c / 1e6) for c in base]}; methods: {s_parts} / {t_parts} -->")
            print("\n".join(lines[-2:]), flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text("# Training on Dask's threads, in instructions\n\n" + text)


if __name__ == "__main__":
    main()
