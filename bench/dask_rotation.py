"""Lanes trading CPUs (``rotate_cpus``) against lanes left to the operating system: 2
lanes on Dask's threads and on a LocalCluster, over the generated stream of bench_dask.py.

First threads, with no cluster in the process: one process (``partial_fit`` over the
blocks, the baseline), ``onlinepgs.dask.fit`` with ``rotate_cpus=True`` and with False,
interleaved, ``--repeats`` times after one untimed run of each. Then (``--cluster``) a
LocalCluster of 2 single-thread workers of ``--kind`` (bench_dask.CLUSTER_KINDS) holding
the blocks (persisted, ``locality=True``), the same pair interleaved with one process.
Printed: medians, the speedups over one process, the paired ratio (off over on, each
repeat's pair), and whether the two ways' models are equal bit for bit (they must be).

    python bench/dask_rotation.py --rows 10000000 --p 2 1.8 --repeats 7 --cluster
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_dask import (CLUSTER_KINDS, cluster_array, dask_array, estimator,  # noqa: E402
                        generate, local_cluster)


def timed(fn):
    start = time.perf_counter()
    est = fn()
    return time.perf_counter() - start, est


def compare(label, single, ways, repeats, out):
    """Interleave one process and each way; report medians, speedups, paired ratios."""
    names = ["single"] + list(ways)
    times = {n: [] for n in names}
    models = {}
    for r in range(repeats + 1):
        for n in names:
            seconds, est = timed(single if n == "single" else ways[n])
            if r:
                times[n].append(seconds)
            models[n] = est.coef_.copy()
    med = {n: statistics.median(v) for n, v in times.items()}
    on, off = [n for n in names if n.endswith("on")][0], [n for n in names if n.endswith("off")][0]
    pairs = sorted(b / a for a, b in zip(times[on], times[off]))
    same = np.array_equal(models[on], models[off])
    out(f"| {label} | {med['single']:.2f} | {med[on]:.2f} ({med['single'] / med[on]:.2f}x) | "
        f"{med[off]:.2f} ({med['single'] / med[off]:.2f}x) | "
        f"{statistics.median(pairs):.3f} ({pairs[0]:.3f}-{pairs[-1]:.3f}) | "
        f"{'yes' if same else 'NO'} |")
    out(f"<!-- seconds: {({n: [round(t, 3) for t in v] for n, v in times.items()})} -->")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--dim", type=int, default=2**18)
    parser.add_argument("--nnz", type=int, default=60)
    parser.add_argument("--zipf", type=float, default=1.2)
    parser.add_argument("--block-rows", type=int, default=100_000)
    parser.add_argument("--test-rows", type=int, default=1000)
    parser.add_argument("--p", type=float, nargs="+", default=[2.0, 1.8])
    parser.add_argument("--sigma", type=float, default=1e-5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cluster", action="store_true")
    parser.add_argument("--kind", choices=CLUSTER_KINDS, default="quiet")
    parser.add_argument("--out")
    args = parser.parse_args()
    lines = []

    def out(text=""):
        print(text, flush=True)
        lines.append(text)

    sizes, blocks, _ = generate(args)
    X, y = dask_array(blocks, args.dim)
    out(f"`python bench/dask_rotation.py {' '.join(sys.argv[1:])}`: {args.rows:,} rows, "
        f"sigma {args.sigma:g}, 2 lanes, medians of {args.repeats} (interleaved, after one "
        "untimed run of each); paired: each repeat's time with rotate_cpus=False over "
        "its time with True.")
    out()
    out("| where, p | one process s | rotate_cpus=True s (speedup) | False s (speedup) | "
        "paired False / True: median (range) | same model |")
    out("|---|---|---|---|---|---|")

    def single_fit(p):
        def run():
            est = estimator(p, args.sigma)
            for Xb, yb in blocks:
                est.partial_fit(Xb, yb, classes=[-1.0, 1.0])
            return est
        return run

    def dask_fit(p, rotate, X=X, y=y, **kw):
        import onlinepgs.dask as opd

        return lambda: opd.fit(estimator(p, args.sigma), X, y, classes=[-1.0, 1.0],
                               n_lanes=2, rotate_cpus=rotate, **kw)

    for p in args.p:
        compare(f"threads, {p:g}", single_fit(p),
                {"threads on": dask_fit(p, True), "threads off": dask_fit(p, False)},
                args.repeats, out)
    if args.cluster:
        cluster, client = local_cluster(2, args.kind)
        try:
            cX, cy = cluster_array(client, sizes, args)
            for p in args.p:
                ways = {name: dask_fit(p, name.endswith("on"), X=cX, y=cy, client=client,
                                       locality=True)
                        for name in ("cluster on", "cluster off")}
                compare(f"cluster ({args.kind}), {p:g}", single_fit(p), ways, args.repeats,
                        out)
        finally:
            client.close()
            cluster.close()
    if args.out:
        Path(args.out).write_text("# Lanes trading CPUs\n\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
