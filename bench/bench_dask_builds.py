"""Two builds of onlinepgs against each other on Dask: alternating runs of the same fits.

For a change to `onlinepgs.dask` whose effect is smaller than this machine's noise
between separate benchmark runs: each build (a checkout with its extensions built, e.g.
``git worktree add /tmp/old REV`` plus its ``.so`` files) runs in a process of its own
(``PYTHONPATH`` set to it, so its LocalCluster's workers import it too), the builds
alternating ``--rounds`` times. Each process makes the stream of bench_dask.py
(``--rows`` rows in blocks of 100,000, 262,144 features), fits it ``--fits`` times and
prints the median of all but the first fit, for each configuration:

* ``threads``: Dask's threads at ``--slice-rows`` (default 65536 and 262144);
* ``cluster``, ``cluster locality``: a LocalCluster of 2 processes (blocks persisted where
  the scheduler puts them) at ``--cluster-slice-rows`` (default 262,144; "auto" is the
  default of onlinepgs.dask), round-robin and ``locality=True``; ``--malloc``: workers
  that keep freed memory (bench_dask.MALLOC_ENV);
* ``--single``: also single-process ``partial_fit`` over the blocks, the baseline of
  bench_dask.py's speedups (each build's ratios are then its own).

    python bench/bench_dask_builds.py /tmp/old . [--rounds 3] [--fits 6] [--no-cluster]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_dask as bd  # noqa: E402


def child(args):
    import onlinepgs
    import onlinepgs.dask as opd

    if not str(Path(onlinepgs.__file__).resolve()).startswith(os.environ["PYTHONPATH"]):
        raise SystemExit(f"imported {onlinepgs.__file__}, not the build at "
                         f"{os.environ['PYTHONPATH']} (is it built in place?)")

    stream = argparse.Namespace(rows=args.rows, block_rows=100_000, dim=2**18, nnz=60,
                                zipf=1.2, test_rows=1)
    sizes, blocks, _ = bd.generate(stream)
    X, y = bd.dask_array(blocks, stream.dim)
    runs = {f"threads {n}": (X, y, None, n, False) for n in args.slice_rows}
    if args.single:
        runs = {"single": None, **runs}
    client = cluster = None
    if not args.no_cluster:
        from distributed import Client, LocalCluster

        if args.malloc:
            cluster, client = bd.local_cluster()
        else:
            cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                   dashboard_address=None, memory_limit=None)
            client = Client(cluster)
        cX, cy = bd.cluster_array(client, sizes, stream)
        n = args.cluster_slice_rows
        runs["cluster"] = (cX, cy, client, n, False)
        runs["cluster locality"] = (cX, cy, client, n, True)
    times = {name: [] for name in runs}
    try:
        for _ in range(args.fits):
            for name, run in runs.items():
                start = time.perf_counter()
                if run is None:
                    est = bd.estimator(args.p, 1e-5)
                    for Xb, yb in blocks:
                        est.partial_fit(Xb, yb, classes=[-1.0, 1.0])
                else:
                    Xr, yr, cl, n, local = run
                    opd.fit(bd.estimator(args.p, 1e-5), Xr, yr, classes=[-1.0, 1.0],
                            n_lanes=2, slice_rows=n, client=cl, locality=local)
                times[name].append(time.perf_counter() - start)
    finally:
        if client is not None:
            client.close()
            cluster.close()
    print(json.dumps({name: statistics.median(t[1:]) for name, t in times.items()}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("builds", nargs=2, help="two checkouts with their extensions built")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fits", type=int, default=6)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--p", type=float, default=2.0)
    parser.add_argument("--slice-rows", nargs="+", default=[65536, 262144],
                        type=bd._slice_rows)
    parser.add_argument("--no-cluster", action="store_true")
    parser.add_argument("--cluster-slice-rows", default=262144, type=bd._slice_rows)
    parser.add_argument("--malloc", action="store_true",
                        help="cluster workers that keep freed memory")
    parser.add_argument("--single", action="store_true",
                        help="also time single-process partial_fit (the baseline)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    results = {b: [] for b in args.builds}
    passed = [a for a in sys.argv[1:] if a not in args.builds]
    for _ in range(args.rounds):
        for build in args.builds:
            env = dict(os.environ, PYTHONPATH=str(Path(build).resolve()))
            out = subprocess.run([sys.executable, str(Path(__file__).resolve()), *args.builds,
                                  *passed, "--child"],
                                 env=env, cwd="/", capture_output=True, text=True, check=True)
            results[build].append(json.loads(out.stdout.strip().splitlines()[-1]))
    names = list(results[args.builds[0]][0])
    print("| build | " + " | ".join(f"{n} (s, median of each run)" for n in names) + " |")
    print("|---|" + "---|" * len(names))
    for build, rows in results.items():
        print(f"| {build} | " + " | ".join(" ".join(f"{r[n]:.3f}" for r in rows)
                                           for n in names) + " |")


if __name__ == "__main__":
    main()
