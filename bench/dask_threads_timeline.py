"""Where a fit on Dask's threads spends its rounds: each lane's time, the wait of the
faster lane for the slower, and the time between rounds (the driver's merge, planning and
the scheduler), over the generated stream of bench_dask.py.

Fits ``--fits`` times on 2 lanes (the lanes' task and the driver's merge timed from
inside, with `time.perf_counter`) and prints for each fit its wall time and the sums over
its rounds: the slower lane's time (which the round lasts), the faster lane's wait, the
merges, and the rest of the gaps between one round's last lane and the next round's first
(planning, Dask's threaded scheduler, blocks read between rounds).

    python bench/dask_threads_timeline.py --rows 10000000 --p 2 --fits 3
"""
import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_dask as bd  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--slice-rows", type=bd._slice_rows, default="auto")
    parser.add_argument("--p", type=float, default=2.0)
    parser.add_argument("--sigma", type=float, default=1e-5)
    parser.add_argument("--fits", type=int, default=3)
    args = parser.parse_args()

    import onlinepgs.dask as opd

    stream = argparse.Namespace(rows=args.rows, block_rows=100_000, dim=2**18, nnz=60,
                                zipf=1.2, test_rows=1000)
    _, blocks, _ = bd.generate(stream)
    X, y = bd.dask_array(blocks, stream.dim)

    lanes, merges, reads = [], [], []
    lock = threading.Lock()
    train, merge, read = opd._train_slice, opd.merge_round, opd._array_block

    def timed_read(*a):
        start = time.perf_counter()
        out = read(*a)
        with lock:
            reads.append((start, time.perf_counter()))
        return out

    def timed_train(base, plan, *b):
        start = time.perf_counter()
        out = train(base, plan, *b)
        with lock:
            lanes.append((plan.round_no, start, time.perf_counter()))
        return out

    def timed_merge(state, results):
        start = time.perf_counter()
        out = merge(state, results)
        merges.append((start, time.perf_counter()))
        return out

    opd._train_slice, opd.merge_round, opd._array_block = timed_train, timed_merge, timed_read
    print("| fit | wall s | rounds | slower lanes s | faster lane's wait s | merges s | "
          "other gaps s |")
    print("|---|---|---|---|---|---|---|")
    for fit in range(args.fits):
        lanes.clear()
        merges.clear()
        reads.clear()
        start = time.perf_counter()
        opd.fit(bd.estimator(args.p, args.sigma), X, y, classes=[-1.0, 1.0], n_lanes=2,
                slice_rows=args.slice_rows)
        wall = time.perf_counter() - start
        by_round = {}
        for r, a, b in lanes:
            by_round.setdefault(r, []).append((a, b))
        rounds = [by_round[r] for r in sorted(by_round)]
        slower = sum(max(b for _, b in rr) - min(a for a, _ in rr) for rr in rounds)
        wait = sum(max(b - a for a, b in rr) - min(b - a for a, b in rr) for rr in rounds)
        merged = sum(b - a for a, b in merges)
        # between rounds: from a round's last lane to the next round's first
        cuts = [(max(b for _, b in cur), min(a for a, _ in nxt))
                for cur, nxt in zip(rounds, rounds[1:])]
        gaps = sum(g1 - g0 for g0, g1 in cuts)
        between = sum(b - a for a, b in merges if any(g0 <= a < g1 for g0, g1 in cuts))
        print(f"| {fit + 1} | {wall:.3f} | {len(rounds)} | {slower:.3f} | {wait:.3f} | "
              f"{merged:.3f} | {gaps - between:.3f} |")
        first, last = min(a for _, a, _ in lanes), max(b for _, _, b in lanes)
        in_gaps = sum(max(0.0, min(b, g1) - max(a, g0)) for a, b in reads for g0, g1 in cuts)
        print(f"<!-- block reads: {len(reads)}, {sum(b - a for a, b in reads):.3f} s, "
              f"{in_gaps:.3f} s of it between rounds; before the first round "
              f"{sum(max(0.0, min(b, first) - a) for a, b in reads):.3f} s; "
              f"first lane start {first - start:.3f} s, last lane end to return "
              f"{start + wall - last:.3f} s -->")
        per = [statistics.median(b - a for a, b in rr) for rr in rounds]
        print(f"<!-- median lane seconds per round: {[round(x, 3) for x in per]} -->")


if __name__ == "__main__":
    main()
