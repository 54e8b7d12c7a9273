"""Who uses the CPU during a LocalCluster fit: the driver's process, thread by thread,
and each lane's wall time against its CPU time on its worker.

On a machine with as many cores as workers, every CPU-second the driver's process spends
(the scheduler, the client's and the nannies' event loop, the driver itself) is taken from
a lane, and a lane that waits for a core makes its whole round wait. This fits the
generated stream of bench_dask.py (``--rows`` rows persisted on a LocalCluster of 2
processes of ``--kind``, ``locality=True``) ``--fits`` times and prints, per fit: its
wall time; the CPU time of each thread of this process (from /proc/self/task); and per
worker, each round's training (``_train_slice``) and what its task did before it (the
merge of the last round and, for blocks trained in place, their validation), as wall /
CPU milliseconds (wall above CPU: the lane waited for a core).

    python bench/dask_cpu.py --rows 4000000 --fits 4
"""
import argparse
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_dask as bd  # noqa: E402


def _thread_seconds():
    """CPU seconds of each thread of this process, by thread id."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        found = bd.proc_stat(f"/proc/self/task/{tid}/stat")
        if found is not None:
            out[int(tid)] = found[1] / bd.HZ
    return out


def _install_lane_clock():
    """On a worker: time each lane's task and its training, wall and CPU."""
    import onlinepgs.dask as opd

    if hasattr(opd, "_bench_log"):
        opd._bench_log.clear()
        return
    opd._bench_log = []
    train, task = opd._train_slice, opd._replica_round

    def clocked(kind, func):
        def run(*args):
            w, c = time.perf_counter(), time.thread_time()
            try:
                return func(*args)
            finally:
                opd._bench_log.append((kind, time.perf_counter() - w, time.thread_time() - c))
        return run
    opd._train_slice = clocked("train", train)
    opd._replica_round = clocked("task", task)


def _lane_log():
    import onlinepgs.dask as opd
    return list(opd._bench_log)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--slice-rows", type=bd._slice_rows, default="auto")
    parser.add_argument("--kind", choices=bd.CLUSTER_KINDS, default="malloc",
                        help="the LocalCluster (see bench_dask.py --cluster-kinds)")
    parser.add_argument("--p", type=float, default=2.0)
    parser.add_argument("--fits", type=int, default=4)
    args = parser.parse_args()

    import onlinepgs.dask as opd

    cluster, client = bd.local_cluster(kind=args.kind)
    try:
        stream = argparse.Namespace(dim=2**18, nnz=60, zipf=1.2)
        sizes = bd.block_sizes(args.rows)
        X, y = bd.cluster_array(client, sizes, stream)
        for _ in range(args.fits):
            client.run(_install_lane_clock)
            before, start = _thread_seconds(), time.perf_counter()
            opd.fit(bd.estimator(args.p, 1e-5), X, y, classes=[-1.0, 1.0], n_lanes=2,
                    slice_rows=args.slice_rows, client=client, locality=True)
            wall, after = time.perf_counter() - start, _thread_seconds()
            names = {t.native_id: t.name for t in threading.enumerate()}
            used = sorted(((after[t] - before.get(t, 0.0), names.get(t, str(t)))
                           for t in after), reverse=True)
            print(f"fit {wall:.3f} s; this process {sum(s for s, _ in used):.3f} CPU s: "
                  + ", ".join(f"{name} {s:.3f}" for s, name in used if s >= 0.005))
            for worker, log in sorted(client.run(_lane_log).items()):
                trains = [(w, c) for kind, w, c in log if kind == "train"]
                tasks = [(w, c) for kind, w, c in log if kind == "task"]
                print(f"  {worker} train, wall/CPU ms: "
                      + " ".join(f"{1e3 * w:.0f}/{1e3 * c:.0f}" for w, c in trains))
                print(f"  {worker} merge, wall/CPU ms: "
                      + " ".join(f"{1e3 * (w - tw):.1f}/{1e3 * (c - tc):.1f}"
                                 for (w, c), (tw, tc) in zip(tasks, trains)))
    finally:
        client.close()
        cluster.close()


if __name__ == "__main__":
    main()
