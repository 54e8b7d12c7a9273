"""What the state's place in memory costs: PGS over the same rows with its block starting
0, 16, 32 or 48 bytes into a 64-byte cache line.

malloc promises 16-byte alignment; before the block was allocated cache-aligned
(`onlinepgs._core._pgs.cache_aligned_zeros`), a state landed at any of these offsets.
Over the generated stream of bench_dask.py (``--rows`` rows, 2**18 features) this trains
one estimator (`partial_fit` over 100,000-row blocks) with its block moved to each offset
in turn, then two lanes at once on two threads (`onlinepgs._rounds.run_lane`, each on
half the rows from a fresh state), both aligned, and one aligned with the other at 16.
Printed: microseconds a row (wall time for one process; each lane's CPU time on threads).

    python bench/state_alignment.py --rows 1000000 --repeats 3
"""
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_dask import estimator, lane_stream  # noqa: E402
from onlinepgs._rounds import LaneSlot, run_lane  # noqa: E402

OFFSETS = (0, 16, 32, 48)


def moved(state, offset):
    """Move the state's block to start `offset` bytes into a cache line."""
    block = state.block_a
    raw = np.empty(block.nbytes + 2 * 4096, dtype=np.uint8)
    start = (-raw.ctypes.data) % 4096 + offset
    new = raw[start:start + block.nbytes].view(np.float64).reshape(block.shape)
    new[...] = block
    state.block_a = new
    state._views()
    state._bind()
    return state


def main():
    args, blocks, X, y = lane_stream(__doc__.splitlines()[0], 1_000_000)
    n = X.shape[0]
    pool = ThreadPoolExecutor(2)

    def lane(state, offset, core_args, a, b):
        y_core, sw, rps = core_args
        slot = LaneSlot()  # the lane trains in the slot's state, synced from `state`
        slot.state = moved(state.fork(), offset)
        c0 = time.thread_time()
        run_lane(state, [(X, y_core, sw, np.arange(a, b, dtype=np.int64), rps)], True, 2,
                 slot, None, 0)
        return (time.thread_time() - c0) / (b - a) * 1e6

    offsets = " | ".join(f"offset {o}" for o in OFFSETS)
    print(f"{n:,} rows, sigma={args.sigma}; us a row")
    print(f"| p | fields a coordinate | one process: {offsets} | two lanes, both at 0 | "
          "two lanes, at 0 and at 16 |")
    print("|---|---|" + "---|" * (len(OFFSETS) + 2))
    for _ in range(args.repeats):
        for p in args.p:
            cells = []
            for offset in OFFSETS:
                est = estimator(p, args.sigma)
                est.partial_fit(X[:10], y[:10], classes=[-1.0, 1.0])
                moved(est._state, offset)
                start = time.perf_counter()
                for Xb, yb in blocks:
                    est.partial_fit(Xb, yb)
                cells.append(f"{(time.perf_counter() - start) / n * 1e6:.3f}")
            fields = est._state.n_fields
            y_core, K, multiclass, _ = est._encode_targets(X, y, fit=True)
            core_args = (y_core, np.ones(n), est._row_power_sums(X))
            for second in (0, 16):
                base = est._new_state(X.shape[1], K, multiclass, np.random.RandomState(0))
                halves = [(0, n // 2), (n // 2, n)]
                futures = [pool.submit(lane, base, off, core_args, a, b)
                           for off, (a, b) in zip((0, second), halves)]
                cells.append(" ".join(f"{f.result():.3f}" for f in futures))
            print(f"| {p} | {fields} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
