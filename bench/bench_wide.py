"""Wide feature spaces: the same rows in 5,000 columns and spread over 5,000,000.

20,000 rows of 30 non-zeros; the second of two partial_fit calls is timed (the first
makes the model), for p = 1.5 on a ball of radius 1 and on R^n and for p = 2 on R^n.
Per-example work should not depend on the width: what differs is memory latency (the
state of 5,000,000 features spans 80-160 MB).

    python bench/bench_wide.py --repeats 5
"""
import argparse
import time

import numpy as np
import scipy.sparse as sp

from onlinepgs import PGSClassifier


def rows(dim, m=20_000, k=30, seed=0):
    rng = np.random.RandomState(seed)
    cols = rng.randint(0, 5000, size=(m, k)) * (dim // 5000)  # the same rows, spread
    cols.sort(axis=1)
    X = sp.csr_matrix((rng.rand(m * k), cols.ravel(), np.arange(0, m * k + 1, k)),
                      shape=(m, dim))
    X.sum_duplicates()
    return X, np.where(rng.rand(m) > 0.5, 1, -1)


def seconds(X, y, p, radius):
    est = PGSClassifier(p=p, radius=radius, sigma=1e-4, random_state=0)
    est.partial_fit(X[:10], y[:10], classes=[-1, 1])
    start = time.perf_counter()
    est.partial_fit(X, y)
    return time.perf_counter() - start, est._state.n_swept


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print("| p | radius | 5,000 columns: s | 5,000,000 columns: s | coordinates swept (wide) |")
    print("|---|---|---|---|---|")
    data = {dim: rows(dim) for dim in (5000, 5_000_000)}
    for p, radius in ((1.5, 1.0), (1.5, None), (2.0, None)):
        times = {dim: [] for dim in data}
        for _ in range(args.repeats):  # interleaved
            for dim, (X, y) in data.items():
                t, swept = seconds(X, y, p, radius)
                times[dim].append(t)
        print(f"| {p} | {radius} | {np.median(times[5000]):.3f} | "
              f"{np.median(times[5_000_000]):.3f} | {swept:,} |")


if __name__ == "__main__":
    main()
