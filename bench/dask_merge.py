"""What one round's merge costs: `merge_round` of 2 lanes' results into the global state.

The lanes each run ``--rows-per-lane`` rows of bench_dask.py's generated stream from the
same state (the estimator after one block), as a threads fit's third round would; then
the merge is timed ``--repeats`` times, each time into a fresh copy of the state made
beforehand (in a fit the lanes' rows have streamed through the cache since the state
was last touched), whole (`merge_round`) and its core part alone (`PGSState.absorb`).
Prints the median and the least time of each, in ms, and a digest of the merged state,
which must not change from one build to another when a change is only faster.

Build against build (a worktree of the old revision with its extensions built):

    PYTHONPATH=/tmp/old python bench/dask_merge.py
    python bench/dask_merge.py
"""
import argparse
import hashlib
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_dask as bd  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows-per-lane", type=int, default=600_000)
    parser.add_argument("--lanes", type=int, default=2)
    parser.add_argument("--p", type=float, nargs="+", default=[2.0, 1.8])
    parser.add_argument("--sigma", type=float, default=1e-5)
    parser.add_argument("--repeats", type=int, default=60)
    args = parser.parse_args()

    import onlinepgs
    from onlinepgs import PGSClassifier
    from onlinepgs._rounds import merge_round, run_lane

    print(f"onlinepgs from {Path(onlinepgs.__file__).parent}; {args.lanes} lanes of "
          f"{args.rows_per_lane:,} rows; {args.repeats} merges into fresh copies\n")
    print("| p | entries a lane | merge_round ms: median (least) | absorb ms: median (least) "
          "| merged state's digest |")
    print("|---|---|---|---|---|")
    block_rows = 100_000
    per_lane = -(-args.rows_per_lane // block_rows)
    blocks = [bd.make_block(1000 + i, block_rows, 2**18, 60, 1.2)
              for i in range(1 + per_lane * args.lanes)]
    for p in args.p:
        est = PGSClassifier(loss="logistic", p=p, sigma=args.sigma)
        est.partial_fit(*blocks[0], classes=[-1.0, 1.0])
        state = est._state

        def pieces(lane):
            out = []
            for X, y in blocks[1 + lane * per_lane: 1 + (lane + 1) * per_lane]:
                out.append((X, np.where(y > 0, 1.0, -1.0), np.ones(X.shape[0]),
                            np.arange(X.shape[0], dtype=np.int64), est._row_power_sums(X)))
            return out

        results = [run_lane(state, pieces(lane), True, args.lanes)
                   for lane in range(args.lanes)]
        steps = sum(r.steps for r in results)
        times = {"merge": [], "absorb": []}
        for kind in times:
            copies = [state.copy() for _ in range(args.repeats)]
            for copy in copies:
                start = time.perf_counter()
                if kind == "merge":
                    merge_round(copy, results)
                else:
                    copy.absorb(steps, 1.0, [r.delta() for r in results])
                times[kind].append(time.perf_counter() - start)
            if kind == "merge":
                merged = copies[-1]
            del copies
        digest = hashlib.sha1()
        for name in ("block_a", "norm_a", "scale_a", "s_a", "cum_a"):
            digest.update(np.ascontiguousarray(getattr(merged, name)).tobytes())
        cells = [f"{1e3 * statistics.median(v):.2f} ({1e3 * min(v):.2f})"
                 for v in times.values()]
        print(f"| {p:g} | {statistics.median(r.idx.size for r in results):,.0f} | "
              f"{cells[0]} | {cells[1]} | {digest.hexdigest()[:12]} |")


if __name__ == "__main__":
    main()
