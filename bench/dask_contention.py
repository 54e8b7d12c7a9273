"""What a second lane costs the first on this machine: a lane's CPU time a row, alone and
with another running at once (two threads of one process, or two processes).

Over the generated stream of bench_dask.py (``--rows`` rows, 2**18 features), each of two
lanes (`onlinepgs._rounds.run_lane`, one round, from a fresh state) trains on its half of
the rows: one after the other in one thread, then at once on two threads, then at once in
two forked processes. Printed per p and repeat: the wall time of each way and each lane's
CPU microseconds a row (its thread's CPU clock). Where the CPU time a row grows when the
lanes run at once, the lanes are slowed by what they share (caches, memory, the host's
cores), not by waiting: no scheme of training can win that back.

    python bench/dask_contention.py --rows 2000000 --repeats 3
"""
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_dask import lane_stream  # noqa: E402
from onlinepgs import PGSClassifier  # noqa: E402
from onlinepgs._rounds import LaneSlot, run_lane  # noqa: E402


def main():
    args, _, X, y = lane_stream(__doc__.splitlines()[0], 2_000_000)
    n = X.shape[0]
    halves = [(0, n // 2), (n // 2, n)]
    pool = ThreadPoolExecutor(2)

    def lane(state, core_args, a, b):
        """Train rows a..b; the thread's CPU seconds."""
        y_core, sw, rps = core_args
        c0 = time.thread_time()
        run_lane(state, [(X, y_core, sw, np.arange(a, b, dtype=np.int64), rps)], True, 2,
                 LaneSlot(), None, 0)
        return time.thread_time() - c0

    def in_process(new_state, core_args, a, b):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            os.write(write, repr(lane(new_state(), core_args, a, b)).encode())
            os._exit(0)
        os.close(write)
        return pid, read

    print(f"{n:,} rows, sigma={args.sigma}; wall s (CPU us a row of each lane)")
    print("| p | one after the other | two threads | two processes |")
    print("|---|---|---|---|")
    for _ in range(args.repeats):
        for p in args.p:
            est = PGSClassifier(loss="logistic", p=p, sigma=args.sigma, random_state=0)
            est.partial_fit(X[:10], y[:10], classes=[-1.0, 1.0])
            y_core, K, multiclass, _ = est._encode_targets(X, y, fit=True)
            core_args = (y_core, np.ones(n), est._row_power_sums(X))

            def new_state():
                return est._new_state(X.shape[1], K, multiclass, np.random.RandomState(0))

            cells = []
            start = time.perf_counter()
            cpu = [lane(new_state(), core_args, a, b) for a, b in halves]
            cells.append((time.perf_counter() - start, cpu))
            start = time.perf_counter()
            futures = [pool.submit(lane, new_state(), core_args, a, b) for a, b in halves]
            cpu = [f.result() for f in futures]
            cells.append((time.perf_counter() - start, cpu))
            start = time.perf_counter()
            children = [in_process(new_state, core_args, a, b) for a, b in halves]
            cpu = []
            for pid, read in children:
                with os.fdopen(read) as f:
                    cpu.append(float(f.read()))
                os.waitpid(pid, 0)
            cells.append((time.perf_counter() - start, cpu))
            text = " | ".join(f"{wall:.2f} ({' '.join(f'{c / (n // 2) * 1e6:.3f}' for c in cpu)})"
                              for wall, cpu in cells)
            print(f"| {p} | {text} |", flush=True)


if __name__ == "__main__":
    main()
