"""Lanes that take the rest of others' slices (``steal=True``) against lanes that each
train their own slice (the default), 2 lanes on Dask's threads, over the generated
stream of bench_dask.py.

One process (``partial_fit`` over the blocks, the baseline), ``onlinepgs.dask.fit`` with
``steal=True`` and with False, interleaved, ``--repeats`` times after one untimed run of
each, in a process with no cluster. Printed: medians, the speedups over one process,
the paired ratio (False over True, each repeat's pair) and the test accuracy of each
way's last model (stealing changes which lane trains a row, so its models differ from
run to run; accuracy is what must not move).

    python bench/dask_steal.py --rows 10000000 --p 2 1.8 --repeats 7
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_dask import dask_array, estimator, generate  # noqa: E402


def timed(fn):
    start = time.perf_counter()
    est = fn()
    return time.perf_counter() - start, est


def compare(label, ways, repeats, test, out):
    """Interleave the ways; report medians, speedups, paired ratios and accuracy."""
    times = {n: [] for n in ways}
    acc = {}
    for r in range(repeats + 1):
        for name, fn in ways.items():
            seconds, est = timed(fn)
            if r:
                times[name].append(seconds)
            acc[name] = est.score(*test)
    med = {n: statistics.median(v) for n, v in times.items()}
    pairs = sorted(b / a for a, b in zip(times["steal"], times["own"]))
    won = sum(p > 1 for p in pairs)
    out(f"| {label} | {med['single']:.2f} | {med['steal']:.2f} "
        f"({med['single'] / med['steal']:.2f}x) | {med['own']:.2f} "
        f"({med['single'] / med['own']:.2f}x) | {statistics.median(pairs):.3f} "
        f"({pairs[0]:.3f}-{pairs[-1]:.3f}) | {won} of {len(pairs)} | "
        f"{acc['single']:.4f} / {acc['steal']:.4f} / {acc['own']:.4f} |")
    out(f"<!-- seconds: {({n: [round(t, 3) for t in v] for n, v in times.items()})} -->")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--dim", type=int, default=2**18)
    parser.add_argument("--nnz", type=int, default=60)
    parser.add_argument("--zipf", type=float, default=1.2)
    parser.add_argument("--block-rows", type=int, default=100_000)
    parser.add_argument("--test-rows", type=int, default=100_000)
    parser.add_argument("--p", type=float, nargs="+", default=[2.0, 1.8])
    parser.add_argument("--sigma", type=float, default=1e-5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out")
    args = parser.parse_args()
    lines = []

    def out(text=""):
        print(text, flush=True)
        lines.append(text)

    _, blocks, test = generate(args)
    X, y = dask_array(blocks, args.dim)
    out(f"`python bench/dask_steal.py {' '.join(sys.argv[1:])}`: {args.rows:,} rows, "
        f"sigma {args.sigma:g}, 2 lanes on Dask's threads, medians of {args.repeats} "
        "(interleaved, after one untimed run of each); paired: each repeat's time with "
        "steal=False over its time with True.")
    out()
    out("| p | one process s | steal=True s (speedup) | steal=False s (speedup) | "
        "paired False / True: median (range) | pairs stealing won | test accuracy: one "
        "process / True / False |")
    out("|---|---|---|---|---|---|---|")

    def single_fit(p):
        def run():
            est = estimator(p, args.sigma)
            for Xb, yb in blocks:
                est.partial_fit(Xb, yb, classes=[-1.0, 1.0])
            return est
        return run

    def dask_fit(p, steal):
        import onlinepgs.dask as opd

        return lambda: opd.fit(estimator(p, args.sigma), X, y, classes=[-1.0, 1.0],
                               n_lanes=2, steal=steal)

    for p in args.p:
        compare(f"{p:g}", {"single": single_fit(p), "steal": dask_fit(p, True),
                           "own": dask_fit(p, False)}, args.repeats, test, out)
    if args.out:
        Path(args.out).write_text("# Lanes that steal the rest of others' slices\n\n"
                                  + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
