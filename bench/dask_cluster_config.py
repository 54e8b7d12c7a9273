"""What a LocalCluster's configuration costs a fit: clusters of each kind in turn.

bench_dask.py keeps its clusters up for the whole run, so an idle one ticks beside the
others' fits. Here one cluster is up at a time: for each ``--cycles``, each kind in
``--kinds`` gets a fresh LocalCluster of 2 processes (1 thread each) holding the
generated stream of bench_dask.py (``--rows`` rows persisted on the workers), one
untimed fit, then ``--fits`` pairs of a single-process run (``partial_fit`` over the same
blocks, in this process) and a cluster fit (``locality=True``, ``slice_rows="auto"``).
Kinds: ``malloc`` (workers keep freed memory, bench_dask.MALLOC_ENV), ``quiet``
(that, and bench_dask.QUIET_CONFIG), and ``malloc`` plus one setting of QUIET_CONFIG:
``tick``, ``profile``, ``memory``, ``system``.

    python bench/dask_cluster_config.py --rows 10000000 --fits 4 --cycles 3
    python bench/dask_cluster_config.py --rows 10000000 --fits 3 --cycles 2 \\
        --kinds malloc tick profile memory quiet
"""
import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_dask as bd  # noqa: E402

ONE_SETTING = {"tick": "distributed.admin.tick.interval",
               "profile": "distributed.worker.profile.enabled",
               "memory": "distributed.worker.memory.monitor-interval",
               "system": "distributed.admin.system-monitor.interval"}


def config(kind):
    if kind in ONE_SETTING:
        key = ONE_SETTING[kind]
        return dict(bd.cluster_config("malloc"), **{key: bd.QUIET_CONFIG[key]})
    return bd.cluster_config(kind)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--p", type=float, default=2.0)
    parser.add_argument("--sigma", type=float, default=1e-5)
    parser.add_argument("--fits", type=int, default=4)
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--kinds", nargs="+", default=["malloc", "quiet"],
                        choices=[*bd.CLUSTER_KINDS, *ONE_SETTING])
    args = parser.parse_args()

    run = argparse.Namespace(dim=2**18, nnz=60, zipf=1.2, passes=1, lanes=2)
    sizes = bd.block_sizes(args.rows)
    blocks = [bd.make_block(1000 + i, n, run.dim, run.nnz, run.zipf)
              for i, n in enumerate(sizes)]
    print(f"`bench/dask_cluster_config.py {' '.join(sys.argv[1:])}`: p = {args.p:g}, "
          f"sigma = {args.sigma:g}, {args.rows:,} rows; single process over a cluster fit "
          "(locality=True, slice_rows='auto'), pairs run one after the other\n")
    print("| after cycle | kind | single s | cluster s | speedup: median (least-most) | pairs |")
    print("|---|---|---|---|---|---|")
    pairs = {kind: [] for kind in args.kinds}
    for cycle in range(args.cycles):
        for kind in args.kinds:
            cluster, client = bd.local_cluster(2, config=config(kind))
            try:
                X, y = bd.cluster_array(client, sizes, run)
                bd.run_dask(run, args.p, args.sigma, X, y, client, "auto", True)  # warm
                for _ in range(args.fits):
                    single = bd.run_single(run, args.p, args.sigma, blocks)[0]
                    fit = bd.run_dask(run, args.p, args.sigma, X, y, client, "auto", True)[0]
                    pairs[kind].append((single, fit))
            finally:
                client.close()
                cluster.close()
        for kind, done in pairs.items():
            ratios = [a / b for a, b in done]
            print(f"| {cycle + 1} | {kind} | {statistics.median(a for a, _ in done):.3f} | "
                  f"{statistics.median(b for _, b in done):.3f} | "
                  f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) | "
                  f"{len(done)} |", flush=True)


if __name__ == "__main__":
    main()
