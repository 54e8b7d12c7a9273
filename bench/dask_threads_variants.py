"""Variants of a fit on Dask's threads against single-process training, in one process:
more lanes than threads (Dask's pool then hands a thread that finishes its lane the
next, which evens out threads of unequal speed), a pool with more threads than lanes
(blocks read while both lanes train), and a LocalCluster running beside the threads (as
in bench_dask.py, whose process hosts the cluster's scheduler).

Over the generated stream of bench_dask.py, each repeat times the single process and
then every variant; it prints the medians, the speedups over the single process, each
variant's time over the first's paired by repeat (quartiles), and the test accuracies.

    python bench/dask_threads_variants.py --rows 10000000 --p 2 --repeats 15 --variants 2 4 8
    python bench/dask_threads_variants.py --rows 10000000 --variants 2 2/3
    python bench/dask_threads_variants.py --rows 10000000 --variants 2 --cluster

A variant is ``LANES`` or ``LANES/THREADS`` (Dask's pool size; default 2, the cores).
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
    parser.add_argument("--p", type=float, default=2.0)
    parser.add_argument("--sigma", type=float, default=1e-5)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--variants", nargs="+", default=["2", "4"])
    parser.add_argument("--cluster", action="store_true",
                        help="start a LocalCluster of 2 workers holding the blocks first")
    args = parser.parse_args()

    import dask

    import onlinepgs.dask as opd

    variants = [(v, *map(int, (v + "/2").split("/")[:2])) for v in args.variants]
    stream = argparse.Namespace(rows=args.rows, block_rows=100_000, dim=2**18, nnz=60,
                                zipf=1.2, test_rows=20_000, lanes=2)
    sizes, blocks, (Xt, yt) = bd.generate(stream)
    X, y = bd.dask_array(blocks, stream.dim)
    cluster = client = None
    if args.cluster:
        from distributed import Client, LocalCluster

        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                               dashboard_address=None, memory_limit=None)
        client = Client(cluster)
        bd.cluster_array(client, sizes, stream)
    times = {name: [] for name in ["single"] + [v for v, _, _ in variants]}
    accuracy = {}
    try:
        for repeat in range(args.repeats + 1):  # the first run warms up, untimed
            est = bd.estimator(args.p, args.sigma)
            start = time.perf_counter()
            for Xb, yb in blocks:
                est.partial_fit(Xb, yb, classes=[-1.0, 1.0])
            took = {"single": time.perf_counter() - start}
            accuracy["single"] = est.score(Xt, yt)
            for name, lanes, threads in variants:
                est = bd.estimator(args.p, args.sigma)
                start = time.perf_counter()
                with dask.config.set(num_workers=threads):
                    opd.fit(est, X, y, classes=[-1.0, 1.0], n_lanes=lanes)
                took[name] = time.perf_counter() - start
                accuracy[name] = est.score(Xt, yt)
            if repeat:
                for name, t in took.items():
                    times[name].append(t)
            print(f"<!-- repeat {repeat}: " + ", ".join(f"{k} {v:.3f} s" for k, v in took.items())
                  + " -->", flush=True)
    finally:
        if client is not None:
            client.close()
            cluster.close()
    med = {k: statistics.median(v) for k, v in times.items()}
    first = variants[0][0]
    print(f"\n{args.rows:,} rows, p = {args.p:g}, sigma = {args.sigma:g}, "
          f"{'a LocalCluster beside' if args.cluster else 'no cluster'}; medians of "
          f"{args.repeats}\n")
    print(f"| lanes/threads | median s | speedup | over {first}, paired: quartiles | "
          "test accuracy |")
    print("|---|---|---|---|---|")
    print(f"| single process | {med['single']:.3f} | 1.00x | - | {accuracy['single']:.4f} |")
    for name, _, _ in variants:
        q = bd.quartiles([a / b for a, b in zip(times[name], times[first])])
        print(f"| {name} | {med[name]:.3f} | {med['single'] / med[name]:.2f}x | "
              f"{q[0]:.3f}, {q[1]:.3f}, {q[2]:.3f} | {accuracy[name]:.4f} |")


if __name__ == "__main__":
    main()
