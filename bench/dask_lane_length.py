"""A lane's cost per row against the length of its slices (no Dask, one thread).

Two lanes of `onlinepgs._rounds.run_lane`, run one after the other in this process, with the
driver's merge between rounds, over the generated stream of bench_dask.py: the seconds
inside the lanes per row for each slice length, the merges' seconds, and how often a lane
refreshed the scale M (p < 2) and so sent its averaged sums whole. One thread, so the
machine's other tenants and the second lane's competition for memory stay out of it.

    cd bench && python dask_lane_length.py --p 1.8 --sigma 1e-6 --rows 4000000 \
        --slice-rows 125000 250000 500000 1000000
"""
import argparse
import time

import numpy as np
import scipy.sparse as sp

from bench_dask import make_block
from onlinepgs import PGSClassifier
from onlinepgs._rounds import LaneSlot, merge_round, run_lane


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--p", type=float, default=1.8)
    parser.add_argument("--sigma", type=float, default=1e-6)
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--slice-rows", type=int, nargs="+",
                        default=[125_000, 250_000, 500_000, 1_000_000])
    parser.add_argument("--nnz", type=int, default=60, help="draws a row (bench_dask.py's)")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    blocks = [make_block(1000 + i, 100_000, 2**18, args.nnz, 1.2)
              for i in range(args.rows // 100_000)]
    X = sp.vstack([b[0] for b in blocks], format="csr")
    y = np.concatenate([b[1] for b in blocks])
    X.sort_indices()
    est = PGSClassifier(loss="logistic", p=args.p, sigma=args.sigma, random_state=0)
    y_core, K, multiclass, _ = est._encode_targets(X, y, fit=True)
    sw, rps = np.ones(X.shape[0]), est._row_power_sums(X)
    n = X.shape[0]
    print("| slice rows | rounds | lanes, s | us a row | merges, s | lane M refreshes | "
          "lanes sending their sums whole |")
    print("|---|---|---|---|---|---|---|")
    for _ in range(args.repeats):
        for length in args.slice_rows:
            state = est._new_state(X.shape[1], K, multiclass, np.random.RandomState(0))
            slots, changed = [LaneSlot(), LaneSlot()], None
            lanes_s = merges_s = 0.0
            refreshes = whole = rounds = 0
            for start in range(0, n, 2 * length):
                results = []
                for k in range(2):
                    a, b = start + k * length, min(start + (k + 1) * length, n)
                    if a >= b:
                        continue
                    t0 = time.perf_counter()
                    out = run_lane(state, [(X, y_core, sw, np.arange(a, b, dtype=np.int64), rps)],
                                   True, 2, slots[k], changed, rounds)
                    lanes_s += time.perf_counter() - t0
                    refreshes += slots[k].state.n_rescales
                    whole += out.avg_idx.size == state.dim * K
                    results.append(out)
                t0 = time.perf_counter()
                changed = merge_round(state, results)
                merges_s += time.perf_counter() - t0
                rounds += 1
            print(f"| {length:,} | {rounds} | {lanes_s:.2f} | {lanes_s / n * 1e6:.3f} | "
                  f"{merges_s:.3f} | {refreshes} | {whole} |", flush=True)


if __name__ == "__main__":
    main()
