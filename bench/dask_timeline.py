"""Where a LocalCluster's rounds spend their time: the task stream of `onlinepgs.dask.fit`.

Generates the stream of bench_dask.py on a LocalCluster of 2 worker processes (1 thread
each, workers that keep freed memory; ``--kind quiet``: Dask's diagnostics run less often
too; the blocks persisted where they were made), fits it ``--fits`` times with
``locality=True`` and prints, for the last fit, every task and transfer per worker
(milliseconds from the first), the time each worker spent on each kind, and the rounds'
dead time: from the end of a round's later lane to the start of the next round's earlier
one (a lane's task includes its merge of the previous round).
With ``--files``, the fits read those svmlight files instead (round-robin lanes; the
transfers then show whether blocks cross between workers).

    python bench/dask_timeline.py --rows 4000000 --slice-rows 262144
    python bench/dask_timeline.py --files big.svm --slice-rows auto
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
    parser.add_argument("--slice-rows", type=bd._slice_rows, default=262144)
    parser.add_argument("--p", type=float, default=2.0)
    parser.add_argument("--sigma", type=float, default=1e-5)
    parser.add_argument("--fits", type=int, default=3)
    parser.add_argument("--quiet", action="store_true", help="no task list")
    parser.add_argument("--files", nargs="+", help="svmlight files to fit instead")
    parser.add_argument("--kind", choices=bd.CLUSTER_KINDS, default="malloc",
                        help="the LocalCluster (see bench_dask.py --cluster-kinds)")
    args = parser.parse_args()

    from distributed import get_task_stream

    import onlinepgs.dask as opd

    cluster, client = bd.local_cluster(kind=args.kind)
    try:
        if args.files:
            data = dict(X=args.files)
        else:
            ns = argparse.Namespace(dim=2**18, nnz=60, zipf=1.2)
            sizes = bd.block_sizes(args.rows)
            X, y = bd.cluster_array(client, sizes, ns)
            data = dict(X=X, y=y, locality=True)
        for _ in range(args.fits):
            with get_task_stream(client) as ts:
                start = time.perf_counter()
                opd.fit(bd.estimator(args.p, args.sigma), classes=[-1.0, 1.0], n_lanes=2,
                        slice_rows=args.slice_rows, client=client, **data)
                print(f"fit: {time.perf_counter() - start:.3f} s")
        report(ts.data, args.quiet)
    finally:
        client.close()
        cluster.close()


def report(data, quiet):
    spans = []
    for rec in data:
        key = rec["key"] if isinstance(rec["key"], str) else str(rec["key"])
        for ss in rec["startstops"]:
            spans.append((ss["start"], ss["stop"], rec["worker"].rsplit(":", 1)[-1],
                          key.split("-")[0].strip("('\""), ss["action"]))
    spans.sort()
    t0 = spans[0][0]
    totals = {}
    for a, b, worker, name, action in spans:
        if not quiet:
            print(f"{worker:>6} {action:9} {name:18} {1e3 * (a - t0):8.1f} "
                  f"{1e3 * (b - t0):8.1f} {1e3 * (b - a):7.1f}")
        totals[worker, action, name] = totals.get((worker, action, name), 0.0) + b - a
    for (worker, action, name), seconds in sorted(totals.items()):
        print(f"worker {worker}: {action} {name}: {seconds:.3f} s")
    moves = [b - a for a, b, _, _, action in spans if action == "transfer"]
    print(f"transfers: {len(moves)}, {sum(moves):.3f} s (a transfer shows under the task "
          "that needed the data)")
    # a lane's task: _replica_round (before 2026-11-22: _train_slice, merged by a task)
    lanes = [s for s in spans if s[3] in ("_replica_round", "_train_slice")
             and s[4] == "compute"]
    rounds = [lanes[i:i + 2] for i in range(0, len(lanes) - 1, 2)]
    dead = [1e3 * (min(s[0] for s in nxt) - max(s[1] for s in cur))
            for cur, nxt in zip(rounds, rounds[1:]) if len(cur) == len(nxt) == 2]
    if dead:
        print(f"dead time between rounds: median {statistics.median(dead):.1f} ms "
              f"(min {min(dead):.1f}, max {max(dead):.1f}) over {len(dead)} rounds")


if __name__ == "__main__":
    main()
