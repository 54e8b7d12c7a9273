"""locality=True when the cluster holds the partitions unevenly: fit time and rounds.

A pass lasts as long as its longest lane. This persists the generated stream of
bench_dask.py on a LocalCluster of 2 processes (workers keeping freed memory) with a
share ``--share`` of its 100,000-row blocks on the first worker and the rest on the
second, and, for comparison, half and half; then fits with ``locality=True`` (the
default ``slice_rows="auto"``), the two placements alternating, ``--fits`` times each
after one untimed fit of each. Per placement it prints the rounds a pass and the
seconds a fit (each, then the median). Run it with another build on PYTHONPATH to
compare builds (it uses only the public API).

    python bench/dask_balance.py --rows 4000000 --share 0.55 --fits 5
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_dask as bd  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--share", type=float, default=0.55)
    parser.add_argument("--fits", type=int, default=5)
    parser.add_argument("--p", type=float, default=2.0)
    parser.add_argument("--sigma", type=float, default=1e-5)
    args = parser.parse_args()

    import onlinepgs
    import onlinepgs.dask as opd
    from onlinepgs import PGSClassifier

    cluster, client = bd.local_cluster()
    try:
        stream = argparse.Namespace(dim=2**18, nnz=60, zipf=1.2)
        sizes = bd.block_sizes(args.rows)
        n = len(sizes)
        uneven = [0 if i < round(args.share * n) else 1 for i in range(n)]
        even = [i % 2 for i in range(n)]
        placements = {}
        for name, where in ((f"{args.share:.2f}", uneven), ("0.50", even)):
            X, y = bd.cluster_array(client, sizes, stream, where)
            held = client.who_has(X)
            counts = [sum(1 for v in held.values() if min(v) == a)
                      for a in sorted(client.scheduler_info()["workers"])]
            placements[name] = (X, y, counts)

        def fit(X, y):
            rounds = []
            start = time.perf_counter()
            opd.fit(PGSClassifier(p=args.p, sigma=args.sigma, random_state=0), X, y,
                    client=client, locality=True, callback=lambda r: rounds.append(1))
            return time.perf_counter() - start, len(rounds)

        times = {name: [] for name in placements}
        rounds = {}
        for name, (X, y, _) in placements.items():
            fit(X, y)  # untimed
        for _ in range(args.fits):
            for name, (X, y, _) in placements.items():
                seconds, rounds[name] = fit(X, y)
                times[name].append(seconds)
        print(f"onlinepgs at {Path(onlinepgs.__file__).parent}; {args.rows:,} rows, "
              f"p={args.p}, sigma={args.sigma}")
        for name, (_, _, counts) in placements.items():
            ts = " ".join(f"{t:.2f}" for t in times[name])
            print(f"share {name}: blocks held {counts}, {rounds[name]} rounds, "
                  f"s a fit {ts}, median {statistics.median(times[name]):.2f}")
    finally:
        client.close()
        cluster.close()


if __name__ == "__main__":
    main()
