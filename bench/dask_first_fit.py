"""The first fit on a fresh LocalCluster, with and without the workers' imports done
beforehand (`client.run(lambda: __import__("onlinepgs.dask"))`).

A worker imports onlinepgs.dask (and scikit-learn, SciPy) when its first task of a fit
arrives. This starts a LocalCluster of 2 processes four times, alternately cold and with
the imports run first, persists the generated stream of bench_dask.py (2,000,000 rows)
on it, and prints the time of the imports and of three fits in a row.

    python bench/dask_first_fit.py
"""
import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_dask as bd  # noqa: E402


def main():
    import onlinepgs.dask as opd

    for warm in (False, True, False, True):
        cluster, client = bd.local_cluster()
        ns = argparse.Namespace(dim=2**18, nnz=60, zipf=1.2)
        sizes = [100_000] * 20
        X, y = bd.cluster_array(client, sizes, ns)
        t = time.perf_counter()
        if warm:
            client.run(lambda: __import__("onlinepgs.dask"))
        tw = time.perf_counter() - t
        ts = []
        for _ in range(3):
            t = time.perf_counter()
            opd.fit(bd.estimator(2.0, 1e-5), X, y, classes=[-1.0, 1.0], n_lanes=2,
                    slice_rows=262144, client=client, locality=True)
            ts.append(time.perf_counter() - t)
        print("imports first" if warm else "cold         ", f"imports {tw:.2f} s; fits",
              " ".join(f"{x:.2f}" for x in ts), flush=True)
        client.close()
        cluster.close()


if __name__ == "__main__":
    main()
