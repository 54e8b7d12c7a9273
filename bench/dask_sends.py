"""What a cluster's driver sends with each block: fits on a LocalCluster of X made of
in-memory blocks, of X persisted with NumPy labels, and of both persisted.

A partition's Delayed holds the whole dask array's graph, and a dask array made of NumPy
labels holds all of them in each block's graph: a driver that sent those graphs as they
are shipped the array's every in-memory row, and all the labels, with each block's
request. This prints each fit's wall time and the driver process's CPU time (the
scheduler of a LocalCluster runs in it too), ``--fits`` times for each kind of input, on
the generated stream of bench_dask.py (``--rows`` rows, 262,144-row slices, 2 lanes).
Run it under two builds (``PYTHONPATH=/path/to/build``) to compare them.

    python bench/dask_sends.py --rows 1000000
    python bench/dask_sends.py --rows 4000000 --inputs persisted-X persisted
"""
import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_dask as bd  # noqa: E402


KINDS = {"in-memory": "in-memory X, NumPy y", "persisted-X": "persisted X, NumPy y",
         "persisted": "persisted X and y"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--fits", type=int, default=3)
    parser.add_argument("--inputs", nargs="+", choices=list(KINDS), default=list(KINDS))
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # dask's "Sending large graph", the old builds' fate

    from distributed import Client, LocalCluster

    import onlinepgs
    import onlinepgs.dask as opd

    print(f"onlinepgs from {onlinepgs.__file__}")
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=None, memory_limit=None)
    client = Client(cluster)
    try:
        stream = argparse.Namespace(rows=args.rows, block_rows=100_000, dim=2**18, nnz=60,
                                    zipf=1.2, test_rows=1)
        sizes, blocks, _ = bd.generate(stream)
        X, y = bd.dask_array(blocks, stream.dim)  # in-memory blocks, NumPy labels
        cX, cy = bd.cluster_array(client, sizes, stream)  # both persisted on the workers
        made = {"in-memory": (X, y), "persisted-X": (cX, y), "persisted": (cX, cy)}
        inputs = {KINDS[k]: made[k] for k in args.inputs}
        for _ in range(args.fits):
            for label, (Xi, yi) in inputs.items():
                cpu, start = time.process_time(), time.perf_counter()
                opd.fit(bd.estimator(2.0, 1e-5), Xi, yi, classes=[-1.0, 1.0], n_lanes=2,
                        slice_rows=262144, client=client)
                print(f"{label}: {time.perf_counter() - start:.3f} s, driver process "
                      f"{time.process_time() - cpu:.3f} CPU s", flush=True)
    finally:
        client.close()
        cluster.close()


if __name__ == "__main__":
    main()
