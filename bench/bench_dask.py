"""Training on Dask against single-process training: speed and accuracy.

The data: a generated stream of text-like sparse rows (the frequencies of the features
follow Zipf's law, exponent ``--zipf``, as words do; about ``--nnz`` draws a row over
``--dim`` features, duplicates summed, values ``log(1 + rank)`` like idf, rows scaled to
unit length), labels from a fixed random linear model plus logistic noise, and a test set
of ``--test-rows`` rows from the same generator. It is generated once, in blocks of
``--block-rows`` rows (the partitions), and held in memory, so only training is timed:

* single process: ``partial_fit`` over the blocks in order (the baseline);
* threads: ``onlinepgs.dask.fit`` on Dask's local threaded scheduler, ``--lanes`` lanes,
  in a process of their own (forked before any cluster exists, as a user of threads
  has none) against that process's own single-process runs; ``--threads-beside`` also
  times them in the timing process, beside the LocalClusters' scheduler and client;
* LocalCluster: the same on ``LocalCluster(n_workers=--lanes, threads_per_worker=1)``
  (processes), the blocks generated on the workers and persisted before timing, with the
  partitions dealt round-robin and with ``locality=True``; on a cluster with
  dask.distributed's default worker environment, on one whose workers keep freed
  memory (``MALLOC_ENV``), and on one whose workers also keep freed memory and whose
  servers run Dask's diagnostics less often (``QUIET_CONFIG``).

Each is run ``--repeats`` times, interleaved, and the median reported (each repeat's
seconds follow the table as an HTML comment, for paired comparisons; on a shared
machine: a run during which other processes took ``--foreign`` cores or more is run
again, at most ``--tries`` times, after waiting for a quiet moment), with the test
accuracy of each model, and, as the yardstick of the accuracy differences, that of a
single-process run over the same blocks in another order (the lanes see the rows in an
order of their own too). ``--imdb`` also compares test accuracy on IMDB after 1 and 2 passes
(against single-process PGS with the same passes).

    python bench/bench_dask.py --rows 10000000 --slice-rows auto --cluster-slice-rows auto \
        --cluster-kinds quiet --placement locality --p 2 1.8 --sigma 1e-5 --repeats 7 \
        --threads-beside --out docs/bench/dask.md#10m         # docs/benchmarks.md
    python bench/bench_dask.py --quick                                 # 200,000 rows
    python bench/bench_dask.py --imdb --out docs/bench/dask.md#imdb

(``--out FILE#NAME`` writes the run as the section NAME of FILE: bench/_record.py.)
"""
import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from _record import write_record  # bench/, the directory of this script

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("ONLINEPGS_DATA", REPO.parent / "shared" / "data"))


# ---- the generated stream ------------------------------------------------------------------
def make_block(seed, rows, dim, nnz, zipf, data_seed=12345):
    """One block of the stream: (X CSR, y in {-1, +1}); the same seed, the same rows."""
    world = np.random.default_rng(data_seed)  # the vocabulary and the true model
    order = world.permutation(dim)  # rank -> feature (popular ones spread out)
    truth = world.standard_normal(dim)
    rng = np.random.default_rng(seed)
    ranks = rng.zipf(zipf, size=rows * nnz)
    rows_of = np.repeat(np.arange(rows), nnz)
    keep = ranks <= dim
    ranks, rows_of = ranks[keep], rows_of[keep]
    X = sp.csr_matrix((np.log1p(ranks.astype(float)), (rows_of, order[ranks - 1])),
                      shape=(rows, dim))
    X.sum_duplicates()
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    X = sp.csr_matrix(sp.diags(1.0 / np.maximum(norms, 1e-12)) @ X)
    X.sort_indices()
    score = X @ truth
    score = 4.0 * score / np.std(score)
    y = np.where(rng.random(rows) < 1.0 / (1.0 + np.exp(-score)), 1.0, -1.0)
    return X, y


def quartiles(values):
    """First quartile, median and third quartile of paired figures (one: it, thrice)."""
    return statistics.quantiles(values, n=4) if len(values) > 1 else list(values) * 3


def lane_stream(description, rows):
    """For scripts that hand the core row ranges of one matrix: their options (--rows,
    --p, --sigma, --repeats) parsed, and the stream's first rows (2**18 features) as
    100,000-row blocks and as one CSR matrix with its labels."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--rows", type=int, default=rows)
    parser.add_argument("--p", type=float, nargs="+", default=[2.0, 1.8])
    parser.add_argument("--sigma", type=float, default=1e-5)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    blocks = [make_block(1000 + i, 100_000, 2**18, 60, 1.2)
              for i in range(args.rows // 100_000)]
    X = sp.vstack([b[0] for b in blocks], format="csr")
    X.sort_indices()
    return args, blocks, X, np.concatenate([b[1] for b in blocks])


def block_sizes(rows, block_rows=100_000):
    """The rows of each block of a stream of `rows` rows (the last may be short)."""
    return [min(block_rows, rows - start) for start in range(0, rows, block_rows)]


def generate(args):
    sizes = block_sizes(args.rows, args.block_rows)
    blocks = [make_block(1000 + i, n, args.dim, args.nnz, args.zipf)
              for i, n in enumerate(sizes)]
    test = make_block(7, args.test_rows, args.dim, args.nnz, args.zipf)
    return sizes, blocks, test


def dask_array(blocks, dim):
    import dask
    import dask.array as da

    meta = sp.csr_matrix((0, dim))
    X = da.concatenate([da.from_delayed(dask.delayed(Xb, name=f"bench-X-{i}"),
                                        shape=Xb.shape, dtype=float, meta=meta)
                        for i, (Xb, _) in enumerate(blocks)])
    y = np.concatenate([yb for _, yb in blocks])
    return X, y


def cluster_array(client, sizes, args, where=None):
    """The same blocks, generated by the workers and kept there; with `where`, block i
    on worker where[i] (workers by address; keys of their own, so that another placement
    of the same blocks is a copy of its own)."""
    import contextlib

    import dask
    import dask.array as da

    addrs = sorted(client.scheduler_info()["workers"])
    meta = sp.csr_matrix((0, args.dim))
    xs, ys = [], []
    for i, n in enumerate(sizes):
        placed = (contextlib.nullcontext() if where is None else
                  dask.annotate(workers=[addrs[where[i]]], allow_other_workers=False))
        with placed:
            part = dask.delayed(make_block, nout=2, pure=where is None)(
                1000 + i, n, args.dim, args.nnz, args.zipf)
            xs.append(da.from_delayed(part[0], shape=(n, args.dim), dtype=float, meta=meta))
            ys.append(da.from_delayed(part[1], shape=(n,), dtype=float))
    X, y = client.persist([da.concatenate(xs), da.concatenate(ys)],
                          optimize_graph=where is None)
    from distributed import wait
    wait([X, y])
    return X, y


# Worker environment of the "malloc" cluster: allocations up to 64 MiB from the heap,
# and up to 256 MiB of freed memory kept there (glibc tunables).
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": 2**26, "MALLOC_TRIM_THRESHOLD_": 2**28}

# Configuration of the "quiet" cluster (with MALLOC_ENV): Dask's diagnostics, which wake
# every server's event loop many times a second (the loop's health check every 20 ms,
# the workers' statistical profiler every 10 ms, the nannies' memory monitor every
# 100 ms, the system monitor every 500 ms), run at most once a second. An idle
# LocalCluster of 2 workers took 0.14-0.18 cores with dask.distributed's defaults and
# 0.02 with these; on 2 cores the lanes feel it.
QUIET_CONFIG = {"distributed.admin.tick.interval": "1s",
                "distributed.worker.profile.enabled": False,
                "distributed.worker.memory.monitor-interval": "1s",
                "distributed.admin.system-monitor.interval": "2s"}


CLUSTER_KINDS = ("default", "malloc", "quiet")


def cluster_config(kind):
    """dask.config settings for a LocalCluster of `kind` ("default", "malloc", "quiet")."""
    import dask
    import distributed  # noqa: F401  (its configuration's defaults)

    env = dict(dask.config.get("distributed.nanny.pre-spawn-environ"))
    if kind in ("malloc", "quiet"):
        env.update(MALLOC_ENV)
    config = {"distributed.nanny.pre-spawn-environ": env}
    if kind == "quiet":
        config.update(QUIET_CONFIG)
    return config


def local_cluster(n_workers=2, kind="malloc", config=None):
    """A LocalCluster of `n_workers` processes (1 thread each) of `kind` (see
    cluster_config; by default workers that keep freed memory, MALLOC_ENV), or with the
    dask.config settings `config` instead, and its client."""
    import dask
    from distributed import Client, LocalCluster

    with dask.config.set(cluster_config(kind) if config is None else config):
        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                               dashboard_address=None, memory_limit=None)
        client = Client(cluster)
    return cluster, client


# ---- timing on a shared machine ---------------------------------------------------------
HZ = os.sysconf("SC_CLK_TCK")


def _busy_ticks():
    """CPU ticks the whole machine spent busy (all but idle and iowait)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4]


def proc_stat(path):
    """(parent pid, user + system CPU ticks) of a /proc/.../stat file, None if gone."""
    try:
        with open(path) as f:
            st = f.read()
    except OSError:
        return None
    rest = st[st.rindex(")") + 2:].split()
    return int(rest[1]), int(rest[11]) + int(rest[12])


def _own_ticks():
    """CPU ticks of this process and its descendants (LocalCluster's workers)."""
    parent, ticks = {}, {}
    for pid in os.listdir("/proc"):
        found = proc_stat(f"/proc/{pid}/stat") if pid.isdigit() else None
        if found is not None:
            parent[int(pid)], ticks[int(pid)] = found
    children = {}
    for pid, pp in parent.items():
        children.setdefault(pp, []).append(pid)
    total, todo = 0, [os.getpid()]
    while todo:
        pid = todo.pop()
        total += ticks.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


def timed(run, args):
    """run() -> (seconds, ...), repeated (at most --tries times) while other processes
    took more than --foreign cores during it; also returns the load they took."""
    linux = os.path.exists("/proc/stat")
    for _ in range(args.tries):
        if linux:
            deadline = time.time() + 60
            while time.time() < deadline:  # wait for the others to pause
                b0, o0 = _busy_ticks(), _own_ticks()  # (idle workers of ours tick too)
                time.sleep(0.3)
                if ((_busy_ticks() - b0) - (_own_ticks() - o0)) / HZ / 0.3 < args.foreign:
                    break
            b0, o0 = _busy_ticks(), _own_ticks()
        out = run()
        if not linux:
            return out + (float("nan"),)
        foreign = max(0.0, ((_busy_ticks() - b0) - (_own_ticks() - o0)) / HZ / out[0])
        if foreign < args.foreign:
            break
    return out + (foreign,)


# ---- runs ------------------------------------------------------------------------------
def estimator(p, sigma):
    from onlinepgs import PGSClassifier

    return PGSClassifier(loss="logistic", p=p, sigma=sigma, random_state=0)


def run_single(args, p, sigma, blocks):
    est = estimator(p, sigma)
    start = time.perf_counter()
    for _ in range(args.passes):
        for Xb, yb in blocks:
            est.partial_fit(Xb, yb, classes=[-1.0, 1.0])
    return time.perf_counter() - start, est, None


def run_dask(args, p, sigma, X, y, client=None, slice_rows=None, locality=False):
    import onlinepgs.dask as opd

    rounds = []
    est = estimator(p, sigma)
    start = time.perf_counter()
    opd.fit(est, X, y, classes=[-1.0, 1.0], passes=args.passes, n_lanes=args.lanes,
            slice_rows=slice_rows, client=client, locality=locality,
            callback=lambda d: rounds.append(d["rows"]))
    # the rounds, and a lane's rows in the first (what "auto" came to)
    return time.perf_counter() - start, est, f"{len(rounds)} ({rounds[0] // args.lanes:,})"


def _half_worker(conn, barrier, block_args, passes):
    """A process that trains one estimator over its share of the blocks on request (the
    blocks made here: memory of its own, as a worker of a cluster would have)."""
    import time as _time

    blocks = [make_block(*a) for a in block_args]
    conn.send("ready")
    while True:
        msg = conn.recv()
        if msg is None:
            return
        p, sigma = msg
        est = estimator(p, sigma)
        barrier.wait()  # both halves start together: they share the machine as lanes do
        start = _time.perf_counter()
        for _ in range(passes):
            for Xb, yb in blocks:
                est.partial_fit(Xb, yb, classes=[-1.0, 1.0])
        conn.send(_time.perf_counter() - start)


def _forked(target, *args):
    """A daemon process forked to run target(conn, *args): (our end of the pipe, it)."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    mine, theirs = ctx.Pipe()
    proc = ctx.Process(target=target, args=(theirs,) + args, daemon=True)
    proc.start()
    return mine, proc


class Halves:
    """n processes (forked before any Dask thread exists), each training single-process
    PGS on its round-robin share of the blocks at the same time, with no merging at all.
    With n = 1 against n = lanes: the machine's ceiling for a speedup with that many
    workers, whatever a scheme shares or sends."""

    def __init__(self, block_args, n, passes):
        import multiprocessing as mp

        barrier = mp.get_context("fork").Barrier(n)
        self.conns, self.procs = [], []
        for i in range(n):
            mine, proc = _forked(_half_worker, barrier, block_args[i::n], passes)
            self.conns.append(mine)
            self.procs.append(proc)
        for c in self.conns:
            c.recv()  # its blocks are made

    def run(self, p, sigma):
        for c in self.conns:
            c.send((p, sigma))
        return (max(c.recv() for c in self.conns),)

    def close(self):
        for c in self.conns:
            c.send(None)
        for proc in self.procs:
            proc.join()


def _threads_worker(conn, blocks, test, lanes, passes):
    """A process of its own for threads (see ThreadsProcess): times single-process
    training and onlinepgs.dask.fit on request, and scores the model."""
    X, y = dask_array(blocks, blocks[0][0].shape[1])
    run_args = argparse.Namespace(lanes=lanes, passes=passes)
    conn.send("ready")
    while True:
        msg = conn.recv()
        if msg is None:
            return
        kind, p, sigma, slice_rows = msg
        if kind == "single":
            t, est, rounds = run_single(run_args, p, sigma, blocks)
        else:
            t, est, rounds = run_dask(run_args, p, sigma, X, y, slice_rows=slice_rows)
        conn.send((t, est.score(*test), rounds))


class ThreadsProcess:
    """A process (forked before any Dask thread or cluster exists) that times threads
    against single-process training in turn, as a user of threads runs them: with no
    cluster's scheduler, client or workers beside them. Those take 0.1-0.2 s of CPU a
    fit here (heartbeats, monitors), which two lanes on two cores feel and one process
    does not. Each speedup is over this process's own single-process runs."""

    def __init__(self, blocks, test, lanes, passes):
        self.conn, self.proc = _forked(_threads_worker, blocks, test, lanes, passes)
        self.conn.recv()

    def run(self, kind, p, sigma, slice_rows=None):
        self.conn.send((kind, p, sigma, slice_rows))
        return self.conn.recv()

    def close(self):
        self.conn.send(None)
        self.proc.join()


def speed(args, out):
    sizes, blocks, (Xt, yt) = generate(args)
    nnz = sum(Xb.nnz for Xb, _ in blocks)
    out(f"Stream: {args.rows:,} rows in {len(blocks)} blocks of {args.block_rows:,}, "
        f"{args.dim:,} features, {nnz:,} non-zeros ({nnz / args.rows:.1f} a row), "
        f"Zipf exponent {args.zipf}; test set {args.test_rows:,} rows. Logistic loss, "
        f"{args.passes} pass(es), {args.lanes} lanes, "
        f"medians of {args.repeats} runs (interleaved, after one untimed run of each).\n")
    block_args = [(1000 + i, n, args.dim, args.nnz, args.zipf) for i, n in enumerate(sizes)]
    # before any thread or cluster exists
    whole, halves = Halves(block_args, 1, args.passes), Halves(block_args, args.lanes, args.passes)
    alone = ThreadsProcess(blocks, (Xt, yt), args.lanes, args.passes)
    X, y = dask_array(blocks, args.dim)
    clusters_up = {}  # "default" / "malloc" / "quiet": (cluster, client, X, y)
    if not args.no_cluster:
        for kind in args.cluster_kinds:
            cluster, client = local_cluster(args.lanes, kind)
            clusters_up[kind] = (cluster, client) + tuple(cluster_array(client, sizes, args))
    beside_head = ("threads beside the cluster: slice_rows: s (speedup) | "
                   if args.threads_beside else "")
    out("| p | sigma | single process (s) | ceiling: one / two independent processes, s (speedup) | "
        "threads in a process of their own: single process s; slice_rows: s (speedup) | "
        + beside_head + "LocalCluster: slice_rows: s (speedup) | accuracy single / threads "
        "(each slice) / cluster (each slice) | single, blocks reordered | "
        "rounds (a lane's rows in the first) threads / cluster | "
        "time over the ceiling's two processes: threads / cluster |")
    out("|---|---|---|---|---|" + ("---|" if args.threads_beside else "") + "---|---|---|---|---|")
    foreign_max = 0.0
    raw = []
    try:
        for p, sigma in [(p, sigma) for sigma in args.sigma for p in args.p]:
            threads = [f"threads {n}" for n in args.slice_rows]
            beside = ([f"beside {n}" for n in args.slice_rows] if args.threads_beside
                      else [])
            # round-robin (blocks travel to their lanes) and locality=True (they stay)
            placements = {"round-robin": False, "locality": True}
            cluster_runs = [(n, placements[where], kind) for kind in clusters_up
                            for n in args.cluster_slice_rows for where in args.placement]
            clusters = [f"cluster {n}{' locality' if local else ''} {kind}"
                        for n, local, kind in cluster_runs]
            cluster_labels = [f"{slice_label(n, args)}{', locality' if local else ''}"
                              f"{'' if kind == 'default' else ', ' + kind}"
                              for n, local, kind in cluster_runs]
            names = ["single", "whole", "ceiling", "alone single"] + threads + beside + clusters
            models, rounds, scores = {}, {}, {}
            for repeat in range(args.repeats + 1):  # the first run warms up, untimed
                if repeat <= 1:
                    times = {name: [] for name in names}
                t, _, _, f = timed(lambda: run_single(args, p, sigma, blocks), args)
                times["single"].append(t)
                loads = [f]
                t, f = timed(lambda: whole.run(p, sigma), args)
                times["whole"].append(t)
                loads.append(f)
                t, f = timed(lambda: halves.run(p, sigma), args)
                times["ceiling"].append(t)
                loads.append(f)
                t, _, _, f = timed(lambda: alone.run("single", p, sigma), args)
                times["alone single"].append(t)
                loads.append(f)
                for n, name in zip(args.slice_rows, threads):
                    t, scores[name], rounds[name], f = timed(
                        lambda: alone.run("dask", p, sigma, n), args)
                    times[name].append(t)
                    loads.append(f)
                for n, name in zip(args.slice_rows, beside):
                    t, models[name], rounds[name], f = timed(
                        lambda: run_dask(args, p, sigma, X, y, slice_rows=n), args)
                    times[name].append(t)
                    loads.append(f)
                for (n, local, kind), name in zip(cluster_runs, clusters):
                    _, client, cX, cy = clusters_up[kind]
                    t, models[name], rounds[name], f = timed(
                        lambda: run_dask(args, p, sigma, cX, cy, client, slice_rows=n,
                                         locality=local), args)
                    times[name].append(t)
                    loads.append(f)
                if repeat >= 1:
                    foreign_max = max([foreign_max] + loads)
            models["single"] = run_single(args, p, sigma, blocks)[1]
            # the same rows in another order: how far order alone moves the accuracy
            shuffled = [blocks[i] for i in np.random.default_rng(1).permutation(len(blocks))]
            reordered = run_single(args, p, sigma, shuffled)[1].score(Xt, yt)
            med = {k: statistics.median(v) for k, v in times.items() if v}
            acc = dict(scores, **{k: m.score(Xt, yt) for k, m in models.items()})

            def cells(keys, sizes, base="single"):
                return ", ".join(f"{n}: {med[k]:.2f} ({med[base] / med[k]:.2f}x)"
                                 for n, k in zip(sizes, keys)) or "-"

            def per_backend(cell):
                return (" ".join(cell(k) for k in threads) + " / "
                        + (" ".join(cell(k) for k in clusters) or "-"))
            labels = [slice_label(n, args) for n in args.slice_rows]
            out(f"| {p:g} | {sigma:g} | {med['single']:.2f} | "
                f"{med['whole']:.2f} / {med['ceiling']:.2f} ({med['whole'] / med['ceiling']:.2f}x) | "
                f"{med['alone single']:.2f}; {cells(threads, labels, 'alone single')} | "
                + (f"{cells(beside, labels)} | " if beside else "")
                + f"{cells(clusters, cluster_labels)} | {acc['single']:.4f} / "
                + " ".join(f"{acc[k]:.4f}" for k in threads + beside) + " / "
                + (" ".join(f"{acc[k]:.4f}" for k in clusters) or "-")
                + f" | {reordered:.4f} | {per_backend(lambda k: str(rounds[k]))} | "
                # the steadier yardstick: lanes against the machine's best for 2 workers
                + per_backend(lambda k: f"{med[k] / med['ceiling']:.2f}") + " |")
            # each repeat's seconds, for paired comparisons afterwards (after the table:
            # an HTML line would end it)
            raw.append(f"<!-- p={p:g} sigma={sigma:g}, seconds by repeat, in the order run: "
                       + "; ".join(f"{k}: " + " ".join(f"{t:.3f}" for t in v)
                                   for k, v in times.items() if v) + " -->")
    finally:
        whole.close()
        halves.close()
        alone.close()
        for cluster, client, _, _ in clusters_up.values():
            client.close()
            cluster.close()
    out("\n" + "\n".join(raw))
    out(f"\nceiling: one process over all the blocks against {args.lanes} processes, each "
        "over its round-robin share, started together, no merging (the wall time of the "
        "slower); every one forked before any Dask thread, training single-process PGS "
        "(`partial_fit`) on blocks it made itself. Their ratio is the best speedup any "
        f"scheme with {args.lanes} workers could reach on this machine: the lanes share its "
        "memory system, and its cores are virtual. (A process's speed over the same blocks "
        "moved by tens of percent from run to run here, hence a yardstick of its own "
        "rather than the single-process column; the last column is each backend's time "
        "over the ceiling's two processes, 1.00 being as fast as the machine allows.) "
        "Threads run in a process of their own, forked before any Dask thread or cluster, "
        "and their speedup is over that process's own single-process runs (its column), "
        "interleaved with theirs: a user "
        "of threads has no cluster's scheduler, client and workers beside them, whose "
        "heartbeats and monitors take CPU time that two lanes on two cores feel and one "
        "process does not"
        + ("; 'threads beside the cluster' are the same runs in the timing process, over "
           "its single-process column. " if args.threads_beside else ". ")
        + f"slice_rows: threads {[slice_label(n, args) for n in args.slice_rows]} "
        "('auto' is the default of onlinepgs.dask: a pass's first round the rows of 8 "
        "rounds a pass, at least 65,536 a lane, each later one as many as the lane "
        "trained in the pass before it; at most 256 MiB of rows a slice, measured on the "
        "first block read, but for blocks trained in place: an array held in memory on "
        "threads (its labels and weights counted) or persisted on a cluster (no bound); "
        "auto=N shows the rows of 8 rounds, the rounds column the rounds and a lane's rows "
        "in the first), LocalCluster "
        f"{[slice_label(n, args) for n in args.cluster_slice_rows]}, each with the "
        "partitions dealt round-robin (about half of each lane's blocks move to its "
        "worker) and with locality=True (each worker's lane trains the blocks it holds); "
        "'malloc': a second LocalCluster whose workers start with "
        + ", ".join(f"{k}={v}" for k, v in MALLOC_ENV.items()) + " in "
        "`distributed.nanny.pre-spawn-environ` (dask.distributed's default, "
        "MALLOC_TRIM_THRESHOLD_=65536, has glibc map and fault in afresh every "
        "allocation over 128 KiB; these keep freed memory for reuse); 'quiet': the same "
        "environment, and Dask's diagnostics at most once a second ("
        + ", ".join(f"{k}={v}" for k, v in QUIET_CONFIG.items()) + "; the defaults: "
        "the event loop's health check every 20 ms, the workers' profiler every 10 ms, "
        "the memory monitor every 100 ms, the system monitor every 500 ms). "
        "A timed run during "
        f"which other processes took {args.foreign} cores or more was run again (at most "
        f"{args.tries} times, after waiting for a quiet moment); the most they took "
        f"during a kept run: {foreign_max:.2f} cores.")


def imdb(args, out):
    import dask.array as da

    import onlinepgs.dask as opd
    from onlinepgs import PGSClassifier, load_svmlight

    X, y = load_svmlight(DATA / "imdb_train.svm.gz")
    Xt, yt = load_svmlight(DATA / "imdb_test.svm.gz", n_features=X.shape[1])
    dX = da.from_array(X, chunks=(2500, X.shape[1]), asarray=False)  # 10 partitions
    out(f"IMDB: {X.shape[0]:,} training rows in 10 partitions, test accuracy on "
        f"{Xt.shape[0]:,} rows; logistic loss, {args.lanes} lanes on threads.\n")
    out("| p | sigma | passes | slice_rows | single process | Dask | difference |")
    out("|---|---|---|---|---|---|---|")
    for p, sigma in ((2.0, 1e-4), (1.8, 1e-5)):
        for passes in (1, 2):
            ref = PGSClassifier(p=p, sigma=sigma, random_state=0)
            for _ in range(passes):
                ref.partial_fit(X, y, classes=[-1, 1])
            for slice_rows in (1024, 16384):
                got = opd.fit(PGSClassifier(p=p, sigma=sigma, random_state=0), dX, y,
                              n_lanes=args.lanes, slice_rows=slice_rows, passes=passes)
                a, b = ref.score(Xt, yt), got.score(Xt, yt)
                out(f"| {p:g} | {sigma:g} | {passes} | {slice_rows} | {a:.4f} | {b:.4f} | "
                    f"{b - a:+.4f} |")


def _slice_rows(value):
    return value if value == "auto" else int(value)


def slice_label(n, args):
    """A slice_rows setting as the report shows it ("auto" with what it came to)."""
    if n != "auto":
        return str(n)
    from onlinepgs.dask import auto_slice_rows

    return f"auto={auto_slice_rows(args.rows, args.lanes)}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--quick", action="store_true",
                        help="200,000 rows, 1 repeat: a check of the script")
    parser.add_argument("--dim", type=int, default=2**18)
    parser.add_argument("--nnz", type=int, default=60)
    parser.add_argument("--zipf", type=float, default=1.2)
    parser.add_argument("--block-rows", type=int, default=100_000)
    parser.add_argument("--test-rows", type=int, default=100_000)
    parser.add_argument("--p", type=float, nargs="+", default=[2.0, 1.8])
    parser.add_argument("--sigma", type=float, nargs="+", default=[1e-5, 1e-6])
    parser.add_argument("--passes", type=int, default=1)
    parser.add_argument("--lanes", type=int, default=2)
    parser.add_argument("--slice-rows", type=_slice_rows, nargs="+",
                        default=[16384, "auto", 262144],
                        help='rows a lane per round, or "auto" (the default of onlinepgs.dask)')
    parser.add_argument("--cluster-slice-rows", type=_slice_rows, nargs="+", default=[262144])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-cluster", action="store_true")
    parser.add_argument("--threads-beside", action="store_true",
                        help="also time threads in the timing process, beside the "
                             "LocalClusters' scheduler and client (as before)")
    parser.add_argument("--cluster-kinds", nargs="+", choices=CLUSTER_KINDS,
                        default=["default", "malloc"],
                        help="LocalClusters: dask.distributed's worker environment, "
                             "workers that keep freed memory (MALLOC_ENV), and those with "
                             "Dask's diagnostics run less often (QUIET_CONFIG)")
    parser.add_argument("--placement", nargs="+", choices=["round-robin", "locality"],
                        default=["round-robin", "locality"],
                        help="cluster runs with partitions dealt round-robin, with "
                             "locality=True, or both")
    parser.add_argument("--foreign", type=float, default=0.1,
                        help="rerun a timed run if other processes took this many cores "
                             "during it (a shared machine)")
    parser.add_argument("--tries", type=int, default=4)
    parser.add_argument("--imdb", action="store_true", help="the IMDB accuracy comparison")
    parser.add_argument("--out", help="also write the report (markdown) here (FILE#NAME: "
                        "as the section NAME of FILE)")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.repeats, args.test_rows = 200_000, 1, 20_000
        args.block_rows = min(args.block_rows, 25_000)
    lines = []

    def out(text=""):
        print(text, flush=True)
        lines.append(text)

    build = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                           capture_output=True, text=True).stdout.strip()
    out(f"# onlinepgs.dask benchmark\n\n`{' '.join(sys.argv)}` at {build}, "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.2f} at the start.\n")
    if args.imdb:
        imdb(args, out)
    else:
        speed(args, out)
    out(f"\nLoad average {os.getloadavg()[0]:.2f} at the end.")
    if args.out:
        write_record(args.out, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
