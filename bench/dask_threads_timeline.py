"""Where a fit on Dask's threads spends its rounds: each lane's time, the wait of the
faster lane for the slower, and the time between rounds (the merge, planning and the
scheduler), over the generated stream of bench_dask.py.

Fits ``--fits`` times on 2 lanes (the lanes' task and the merge, a task of the round
since ea0fbde, timed from inside, with `time.perf_counter`) and prints for each fit its
wall time and the sums over its rounds: the slower lane's time (which the round lasts),
the faster lane's wait, the merges, and the rest of the gaps between one round's last lane
and the next round's first (planning, Dask's threaded scheduler, blocks read between
rounds).

``--per-round`` adds, for each round, each lane's microseconds a row, the CPU time of its
thread against its wall time (less: the thread waited for a CPU) and the CPU it ran on
last (Linux), which tells a lane slowed by its CPU from one slowed by its work.
``--preread`` times, alternating with the fits above, fits whose blocks were read before
the fit (each partition's block kept from the fit before): the difference is what
reading the blocks costs a fit's wall time, against half its CPU time for two threads
that read in parallel with no loss.

    python bench/dask_threads_timeline.py --rows 10000000 --p 2 --fits 3
    python bench/dask_threads_timeline.py --rows 10000000 --p 2 --fits 11 --preread
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
    parser.add_argument("--per-round", action="store_true")
    parser.add_argument("--preread", action="store_true")
    args = parser.parse_args()

    import onlinepgs.dask as opd

    stream = argparse.Namespace(rows=args.rows, block_rows=100_000, dim=2**18, nnz=60,
                                zipf=1.2, test_rows=1000)
    _, blocks, _ = bd.generate(stream)
    X, y = bd.dask_array(blocks, stream.dim)

    lanes, merges, reads = [], [], []  # lanes: (round, start, end, CPU time, rows, CPU)
    lock = threading.Lock()
    train, merge, read = opd._train_slice, opd.merge_round, opd._array_block
    kept, keep = {}, [False]  # --preread: each partition's block, and whether to use it

    def timed_read(spec, X, y, sw, part, *a):
        if keep[0] and part in kept:
            return kept[part]
        start = time.perf_counter()
        out = read(spec, X, y, sw, part, *a)
        if args.preread:
            kept[part] = out
        with lock:
            reads.append((start, time.perf_counter()))
        return out

    def timed_train(base, plan, *b):
        cpu, start = time.thread_time(), time.perf_counter()
        out = train(base, plan, *b)
        end, cpu = time.perf_counter(), time.thread_time() - cpu
        rows = sum(b - a for a, b in plan.ranges)
        where = _last_cpu() if args.per_round else "?"
        with lock:
            lanes.append((plan.round_no, start, end, cpu, rows, where))
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
    def fit_once():
        start = time.perf_counter()
        opd.fit(bd.estimator(args.p, args.sigma), X, y, classes=[-1.0, 1.0], n_lanes=2,
                slice_rows=args.slice_rows)
        return start, time.perf_counter() - start

    walls = {"as read": [], "read before": []}
    for fit in range(args.fits):
        if args.preread:
            keep[0] = True
            walls["read before"].append(fit_once()[1])
            keep[0] = False
        lanes.clear()
        merges.clear()
        reads.clear()
        start, wall = fit_once()
        walls["as read"].append(wall)
        by_round = {}
        for lane in sorted(lanes, key=lambda lane: lane[1]):
            by_round.setdefault(lane[0], []).append(lane)
        rounds = [[(a, b) for _, a, b, *_ in by_round[r]] for r in sorted(by_round)]
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
        first, last = min(lane[1] for lane in lanes), max(lane[2] for lane in lanes)
        in_gaps = sum(max(0.0, min(b, g1) - max(a, g0)) for a, b in reads for g0, g1 in cuts)
        print(f"<!-- block reads: {len(reads)}, {sum(b - a for a, b in reads):.3f} s, "
              f"{in_gaps:.3f} s of it between rounds; before the first round "
              f"{sum(max(0.0, min(b, first) - a) for a, b in reads):.3f} s; "
              f"first lane start {first - start:.3f} s, last lane end to return "
              f"{start + wall - last:.3f} s -->")
        per = [statistics.median(b - a for a, b in rr) for rr in rounds]
        print(f"<!-- median lane seconds per round: {[round(x, 3) for x in per]} -->")
        if args.per_round:
            for r in sorted(by_round):
                mine = by_round[r]
                print(f"<!-- round {r + 1}: " + "; ".join(
                    f"+{a - mine[0][1]:.3f} s, {1e6 * (b - a) / rows:.3f} us a row, "
                    f"CPU {cpu:.3f} of {b - a:.3f} s on CPU {where}"
                    for _, a, b, cpu, rows, where in mine) + " -->")
    if args.preread:
        q = bd.quartiles([a - b for a, b in zip(walls["as read"], walls["read before"])])
        print(f"\nblocks read in the fit: median wall {statistics.median(walls['as read']):.3f} s;"
              f" read before: {statistics.median(walls['read before']):.3f} s; paired "
              f"difference median {q[1]:.3f} s (quartiles {q[0]:.3f}, {q[2]:.3f}); half the "
              f"reads' CPU time {sum(b - a for a, b in reads) / 2:.3f} s (last fit)")


def _last_cpu():
    """The CPU the calling thread ran on last (Linux), else "?"."""
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[36]
    except (OSError, IndexError):
        return "?"


if __name__ == "__main__":
    main()
