"""Where each lane's state lands in memory, and what its rounds cost there (threads).

Over the generated stream of bench_dask.py (``--rows`` rows, 2**18 features) this fits one
process (`partial_fit` over the blocks) and then `onlinepgs.dask.fit` on 2 lanes of
Dask's threads at the default slices, ``--fits`` times, and prints for each: the
single-process time and how far its state's block starts into a 64-byte cache line, the
Dask fit's time, and per lane that offset and its rounds' median wall time. Run it with
``PYTHONPATH`` set to a build from before the block was allocated cache-aligned to see
states land 16 or 48 bytes in, and lanes of one round differ by that.

    python bench/dask_lane_offsets.py --rows 4000000 --p 1.8
    PYTHONPATH=/tmp/oldwt python bench/dask_lane_offsets.py --rows 4000000 --p 1.8
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_dask as bd  # noqa: E402
import onlinepgs  # noqa: E402
import onlinepgs.dask as opd  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--p", type=float, default=1.8)
    parser.add_argument("--sigma", type=float, default=1e-5)
    parser.add_argument("--fits", type=int, default=3)
    args = parser.parse_args()
    stream = argparse.Namespace(rows=args.rows, block_rows=100_000, dim=2**18, nnz=60,
                                zipf=1.2, test_rows=1, passes=1, lanes=2)
    _, blocks, _ = bd.generate(stream)
    X, y = bd.dask_array(blocks, stream.dim)
    lanes = {}
    run_lane = opd.run_lane

    def timed_lane(*a, **k):
        start = time.perf_counter()
        out = run_lane(*a, **k)
        slot = a[4]
        lanes.setdefault(id(slot), []).append(
            (slot.state.block_a.ctypes.data % 64, time.perf_counter() - start))
        return out

    opd.run_lane = timed_lane
    print(f"onlinepgs from {Path(onlinepgs.__file__).parent}; {args.rows:,} rows, "
          f"p={args.p}, sigma={args.sigma}")
    print("| fit | one process, s (offset) | threads, s | each lane: offset, ms a round "
          "(median) |")
    print("|---|---|---|---|")
    for fit in range(args.fits):
        single, est, _ = bd.run_single(stream, args.p, args.sigma, blocks)
        offset = est._state.block_a.ctypes.data % 64
        lanes.clear()
        seconds, _, _ = bd.run_dask(stream, args.p, args.sigma, X, y, slice_rows="auto")
        each = "; ".join(
            f"{sorted({o for o, _ in runs})}: {1e3 * statistics.median(s for _, s in runs):.1f}"
            for runs in lanes.values())
        print(f"| {fit + 1} | {single:.3f} ({offset}) | {seconds:.3f} | {each} |", flush=True)


if __name__ == "__main__":
    main()
