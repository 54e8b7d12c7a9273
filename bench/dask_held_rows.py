"""Threads over blocks held in memory: slices bounded by the bytes of their whole rows
(as before 1b867fa: 9 rounds a pass on the 10 M-row stream) against the default, which
counts only what reading adds (labels and weights: 4 growing rounds), in one process.

Over the generated stream of bench_dask.py, each repeat times the single process and
both fits, in alternating order; it prints the rounds, the medians, the speedups over the
single process and the bounded fit's time over the default's, paired by repeat
(quartiles).

    python bench/dask_held_rows.py --rows 10000000 --p 2 --repeats 15
"""
import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_dask as bd  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--p", type=float, default=2.0)
    parser.add_argument("--sigma", type=float, default=1e-5)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()

    import onlinepgs.dask as opd

    stream = argparse.Namespace(rows=args.rows, block_rows=100_000, dim=2**18, nnz=60,
                                zipf=1.2, test_rows=1000)
    _, blocks, _ = bd.generate(stream)
    X, y = bd.dask_array(blocks, stream.dim)
    run = argparse.Namespace(passes=1, lanes=2)
    holds_values = opd._LocalBackend.holds_values
    rounds = {}

    def fit(kind):
        if kind == "single":
            return bd.run_single(run, args.p, args.sigma, blocks)[0]
        # "whole rows": the array's blocks taken as if tasks made them
        opd._LocalBackend.holds_values = (
            holds_values if kind == "default" else lambda self, array: False)
        seconds, _, rounds[kind] = bd.run_dask(run, args.p, args.sigma, X, y,
                                               slice_rows="auto")
        return seconds

    kinds = ["single", "whole rows", "default"]
    times = {k: [] for k in kinds}
    for k in kinds:  # untimed
        fit(k)
    for i in range(args.repeats):
        for k in kinds if i % 2 == 0 else kinds[::-1]:
            times[k].append(fit(k))
    opd._LocalBackend.holds_values = holds_values
    med = {k: statistics.median(v) for k, v in times.items()}
    paired = [a / b for a, b in zip(times["whole rows"], times["default"])]
    print(f"rows {args.rows:,}, p = {args.p}, {args.repeats} repeats")
    print("rounds (a lane's rows in the first):", rounds)
    for k in kinds:
        print(f"{k:>10}: median {med[k]:.3f} s, speedup {med['single'] / med[k]:.3f}")
    print("whole rows / default, paired: quartiles",
          np.percentile(paired, [25, 50, 75]).round(3).tolist())


if __name__ == "__main__":
    main()
