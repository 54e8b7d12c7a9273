"""What block placement costs a LocalCluster run of onlinepgs.dask, and what
``locality=True`` saves.

The stream of bench_dask.py (20 blocks of 100,000 rows, 262,144 features), generated on 2
worker processes and persisted twice: once with block i on worker i % 2 (where lane i % 2
trains it: lanes take partitions round-robin), once wherever the scheduler puts it; on
the latter also with ``locality=True`` (each worker's lane trains the blocks it holds).
Each fit gets freshly persisted blocks (no replica left by an earlier fit). 2-lane fits at
262,144-row slices (p = 2, sigma = 1e-5), interleaved after one untimed round of each,
timed, with the time the workers spent moving data between them
(`distributed.get_task_stream`). Prints: | run | seconds per fit | transfer seconds |.

    python bench/bench_dask_locality.py [--repeats 3]
"""
import argparse
import sys
import time
from pathlib import Path

import dask
import dask.array as da
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_dask as bd  # noqa: E402


def placed(client, sizes, args, local, salt):
    addrs = sorted(client.scheduler_info()["workers"])
    meta = sp.csr_matrix((0, args.dim))
    Xs, ys = [], []
    for i, n in enumerate(sizes):
        make = dask.delayed(bd.make_block, nout=2, pure=True)
        key = f"locality-bench-{salt}-{i}"  # fresh keys: no replica left by a run before
        if local:
            with dask.annotate(workers=[addrs[i % len(addrs)]], allow_other_workers=False):
                part = make(1000 + i, n, args.dim, args.nnz, args.zipf, dask_key_name=key)
        else:
            part = make(1000 + i, n, args.dim, args.nnz, args.zipf, dask_key_name=key)
        Xs.append(da.from_delayed(part[0], shape=(n, args.dim), dtype=float, meta=meta))
        ys.append(da.from_delayed(part[1], shape=(n,), dtype=float))
    from distributed import wait

    X, y = client.persist([da.concatenate(Xs), da.concatenate(ys)], optimize_graph=False)
    wait([X, y])
    return X, y


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--slice-rows", type=int, default=262144)
    args = parser.parse_args()
    args.dim, args.nnz, args.zipf = 2**18, 60, 1.2
    from distributed import Client, LocalCluster, get_task_stream

    import onlinepgs.dask as opd

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=None, memory_limit=None)
    client = Client(cluster)
    try:
        runs = {"blocks on their lanes' workers": (True, False),
                "blocks anywhere": (False, False),
                "blocks anywhere, locality=True": (False, True)}
        times = {name: [] for name in runs}
        moved = {name: [] for name in runs}
        salt = 0
        for repeat in range(args.repeats + 1):
            for name, (local, locality) in runs.items():
                salt += 1
                X, y = placed(client, [100_000] * 20, args, local, salt)
                with get_task_stream(client) as ts:
                    start = time.perf_counter()
                    opd.fit(bd.estimator(2.0, 1e-5), X, y, classes=[-1.0, 1.0],
                            slice_rows=args.slice_rows, client=client, locality=locality,
                            n_lanes=2)
                    wall = time.perf_counter() - start
                del X, y
                if repeat:
                    times[name].append(wall)
                    moved[name].append(sum(ss["stop"] - ss["start"] for rec in ts.data
                                           for ss in rec["startstops"]
                                           if ss["action"] == "transfer"))
        for name in runs:
            print(f"| {name} | {', '.join(f'{t:.2f}' for t in times[name])} | "
                  f"{', '.join(f'{t:.2f}' for t in moved[name])} |", flush=True)
    finally:
        client.close()
        cluster.close()


if __name__ == "__main__":
    main()
