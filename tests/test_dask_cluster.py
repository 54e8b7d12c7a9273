"""onlinepgs.dask on a real cluster (a LocalCluster of two worker processes on
127.0.0.1): the same model as threads, the state's copies on the workers, locality,
failures, the command line's --scheduler."""
import time

import numpy as np
import pytest
import scipy.sparse as sp

dask = pytest.importorskip("dask", reason="onlinepgs.dask needs Dask (pip install "
                           "'onlinepgs[dask]')")
da = pytest.importorskip("dask.array")
db = pytest.importorskip("dask.bag")

import onlinepgs.dask as opd  # noqa: E402
from onlinepgs import (PGSClassifier, PGSDivergedError, PGSRegressor,  # noqa: E402
                       SvmlightError, load_model)
from onlinepgs.distributed import backends, run, slices  # noqa: E402

from dask_helpers import cluster, dask_rows, make_data, run_cli, text_data  # noqa: E402


@pytest.mark.slow
def test_threads_and_local_cluster_give_the_same_model(cluster, text_data):
    for it in ("weighted2", "random"):
        kw = dict(p=1.8, sigma=1e-2, iterate=it, random_state=5)
        args = dict(n_lanes=2, slice_rows=48, shuffle=True, passes=2)
        a = opd.fit(PGSClassifier(**kw), text_data["dX"], text_data["y"], **args)
        b = opd.fit(PGSClassifier(**kw), text_data["dX"], text_data["y"], client=cluster,
                    **args)
        np.testing.assert_array_equal(a.coef_, b.coef_)
        for key, value in a.online_stats_.items():
            np.testing.assert_array_equal(b.online_stats_[key], value)
    # more lanes than workers: a worker keeps a copy of the state for each of its lanes
    kw = dict(p=1.5, sigma=1e-2, iterate="average", random_state=2)
    args = dict(n_lanes=3, slice_rows=32, passes=2)
    a = opd.fit(PGSClassifier(**kw), text_data["dX"], text_data["y"], **args)
    b = opd.fit(PGSClassifier(**kw), text_data["dX"], text_data["y"], client=cluster,
                **args)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    kw = dict(sigma=1e-2, random_state=0)
    c = opd.fit(PGSClassifier(**kw), text_data["files"], n_lanes=2, slice_rows=40,
                n_features=25, client=cluster, block_rows=50)
    d = opd.fit(PGSClassifier(**kw), text_data["files"], n_lanes=2, slice_rows=40,
                n_features=25, block_rows=50)
    np.testing.assert_array_equal(c.coef_, d.coef_)


@pytest.mark.slow
def test_a_cluster_block_request_sends_only_that_block(cluster):
    """A block's request on a cluster sends its own tasks and its slice of NumPy labels
    and weights. (It sent the whole array's graph, every in-memory row with it, and a
    dask array made of all the labels and weights.)"""
    import warnings

    X, y = make_data(m=20000, n=5)
    sw = np.random.RandomState(1).uniform(0.5, 2.0, 20000)
    dX = dask_rows(X, [1000] * 20)
    args = dict(sample_weight=sw, n_lanes=2, slice_rows=500)
    # X's 20 blocks take about 500 kB, y and sw 160 kB each; one block under 40 kB
    with dask.config.set({"distributed.admin.large-graph-warning-threshold": "100kB"}):
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message="Sending large graph")
            got = opd.fit(PGSClassifier(p=1.8, random_state=0), dX, y, client=cluster,
                          **args)
    ref = opd.fit(PGSClassifier(p=1.8, random_state=0), dX, y, **args)
    np.testing.assert_array_equal(got.coef_, ref.coef_)
    np.testing.assert_array_equal(got.classes_, [-1.0, 1.0])


@pytest.mark.slow
def test_cluster_rounds_report_and_fail_like_threads(cluster, text_data):
    """The cluster merges on its workers; callbacks, errors and divergence are the
    driver's as on threads."""
    def run(**kw):
        seen = []
        est = opd.fit(PGSClassifier(sigma=1e-2, random_state=0), text_data["dX"],
                      text_data["y"], n_lanes=2, slice_rows=40, passes=2,
                      callback=lambda d: seen.append((d["pass"], d["round"], d["rows"],
                                                      d["n_examples"],
                                                      d["state"].lam_a.copy())), **kw)
        return est, seen
    (a, seen_a), (b, seen_b) = run(), run(client=cluster)
    assert [s[:4] for s in seen_a] == [s[:4] for s in seen_b]
    assert seen_b[-1][3] == 2 * text_data["X"].shape[0]
    for sa, sb in zip(seen_a, seen_b):
        np.testing.assert_array_equal(sa[4], sb[4])
    np.testing.assert_array_equal(a.coef_, b.coef_)

    bad_y = text_data["y"].copy()
    bad_y[123] = 5.0
    est = PGSClassifier()
    with pytest.raises(ValueError, match=r"label 5.0 at partition 1, row 33 \(row 123 of "):
        opd.fit(est, text_data["dX"], bad_y, classes=[-1, 1], client=cluster)
    rng = np.random.RandomState(0)
    X = rng.randn(200, 3) * 1e100
    y = rng.randn(200) * 1e100
    est = PGSRegressor(loss="squared", sigma=1e-12, radius=None)
    with pytest.raises(PGSDivergedError, match="diverged in round 1 at partition"):
        opd.fit(est, da.from_array(X, chunks=(50, 3)), y, n_lanes=2, slice_rows=50,
                client=cluster)
    assert not hasattr(est, "_state")


@pytest.mark.slow
def test_a_cluster_fetches_a_rounds_state_only_when_its_callback_reads_it(cluster,
                                                                          text_data):
    """A callback that reads the state of some rounds gets exactly those of threads;
    the others are never fetched; after its callback a round's state is gone."""
    def run(**kw):
        seen, infos = {}, []

        def callback(info):
            infos.append(info)
            assert "state" in info and info["n_examples"] > 0
            if info["round"] % 3 == 1:
                seen[info["round"]] = (info["state"].lam_a.copy(),
                                       info.get("state").n_examples, info["n_examples"])
        est = opd.fit(PGSClassifier(p=1.8, sigma=1e-2, random_state=0), text_data["dX"],
                      text_data["y"], n_lanes=2, slice_rows=40, passes=2,
                      callback=callback, **kw)
        return est, seen, infos
    from distributed import get_task_stream

    a, seen_a, _ = run()
    with get_task_stream(cluster) as stream:
        b, seen_b, infos_b = run(client=cluster)
    assert sorted(seen_a) == sorted(seen_b) and len(seen_b) >= 4
    # a copy of the state is taken for the rounds read and each pass's end, no more
    copies = sum(str(rec["key"]).startswith("replica_state") for rec in stream.data)
    assert 2 <= copies <= len(seen_b) + 2 < len(infos_b)
    for r in seen_a:
        np.testing.assert_array_equal(seen_a[r][0], seen_b[r][0])
        assert seen_a[r][1:] == seen_b[r][1:] and seen_b[r][1] == seen_b[r][2]
    np.testing.assert_array_equal(a.coef_, b.coef_)
    with pytest.raises(KeyError, match="during its callback only"):
        infos_b[1]["state"]
    assert "state" not in infos_b[1] and infos_b[1].get("state") is None


@pytest.mark.slow
def test_a_worker_lost_mid_fit_is_an_error_not_a_hang(cluster, text_data, monkeypatch):
    """A cluster's lanes train from their workers' copies of the state: when a worker
    restarts mid-fit the fit stops with an error (never waits for ever), and the
    estimator is left as it was."""
    monkeypatch.setattr(backends, "WORKER_CHECK_SECONDS", 0.2)
    args = dict(n_lanes=2, slice_rows=40, client=cluster)
    est = opd.fit(PGSClassifier(sigma=1e-2, random_state=0), text_data["dX"],
                  text_data["y"], **args)
    before, t_before = est.coef_.copy(), est.t_
    victim = sorted(cluster.nthreads())[1]

    def restart(info):
        if info["round"] == 2:
            cluster.restart_workers([victim], timeout=120)

    # which error depends on the moment: the driver finds the worker gone, or a worker
    # finds a copy missing or asked for a round again (Dask recomputing a lost result)
    with pytest.raises(RuntimeError, match="left the cluster during the fit|restarted or "
                                           "left during the fit"):
        opd.partial_fit(est, text_data["dX"], text_data["y"], callback=restart, **args)
    np.testing.assert_array_equal(est.coef_, before)
    assert est.t_ == t_before
    # the restart is reported to the scheduler in its own time: the old worker may still
    # be listed beside its successor for a moment (seen once in CI), so wait, bounded
    deadline = time.monotonic() + 60
    while victim in cluster.nthreads() and time.monotonic() < deadline:
        time.sleep(0.1)
    cluster.wait_for_workers(2, timeout=60)
    assert victim not in cluster.nthreads()
    # the cluster trains on
    again = opd.fit(PGSClassifier(sigma=1e-2, random_state=0), text_data["dX"],
                    text_data["y"], **args)
    np.testing.assert_array_equal(again.coef_, before)


def _placed_on_workers(client, blocks, where, dtype=float, wait=True, seconds=0.0):
    """A dask array persisted with block i on worker where[i] (workers by address),
    each block made in `seconds`; unless `wait`, returned as persist returns it (its
    blocks still being made)."""
    import time

    import dask
    import distributed

    def made(x):
        time.sleep(seconds)
        return x

    addrs = sorted(client.scheduler_info()["workers"])
    parts = []
    for i, Xb in enumerate(blocks):
        with dask.annotate(workers=[addrs[where[i]]], allow_other_workers=False):
            d = dask.delayed(made, pure=True, name=f"placed-{dask.base.tokenize(Xb)}-{i}-"
                                                   f"{where[i]}-{seconds}")(Xb)
        meta = (sp.csr_matrix((0, Xb.shape[1])) if sp.issparse(Xb)
                else np.empty((0, Xb.shape[1])))
        parts.append(da.from_delayed(d, shape=Xb.shape, dtype=dtype, meta=meta))
    X = client.persist(da.concatenate(parts), optimize_graph=False)
    if wait:
        distributed.wait(X)
    return X


@pytest.mark.slow
def test_locality_gives_each_worker_its_own_blocks(cluster, monkeypatch):
    """locality=True: lane i trains the blocks worker i holds, so it is the round-robin
    run of the blocks in the order that deals them so (checked bit for bit on threads);
    where a worker holds more rows, its last block moves to the other lane. X is
    persisted: its blocks are tasks on its partitions' futures, no graph computed."""
    X, y = make_data(m=300, n=20)
    blocks = [X[i * 50:(i + 1) * 50] for i in range(6)]
    kw = dict(p=1.8, sigma=1e-2, random_state=0)
    args = dict(slice_rows=40, passes=2)
    computed, compute = [], cluster.compute
    monkeypatch.setattr(cluster, "compute",
                        lambda *a, **k: computed.append(a) or compute(*a, **k))
    for where, order in (([0, 1, 0, 1, 0, 1], [0, 1, 2, 3, 4, 5]),
                         ([0, 0, 0, 1, 1, 1], [0, 3, 1, 4, 2, 5]),
                         ([0, 0, 0, 0, 1, 1], [0, 3, 1, 4, 2, 5])):
        got = opd.fit(PGSClassifier(**kw), _placed_on_workers(cluster, blocks, where), y,
                      client=cluster, locality=True, **args)
        ref = opd.fit(PGSClassifier(**kw), dask_rows(sp.vstack([blocks[i] for i in order],
                                                               format="csr"), [50] * 6),
                      np.concatenate([y[i * 50:(i + 1) * 50] for i in order]), n_lanes=2,
                      **args)
        np.testing.assert_array_equal(got.coef_, ref.coef_)
        assert got.online_stats_["n_examples"] == 600
    assert computed == []
    with pytest.raises(ValueError, match="one lane per worker holding X .2., but n_lanes=3"):
        opd.fit(PGSClassifier(**kw), _placed_on_workers(cluster, blocks, [0] * 3 + [1] * 3),
                y, client=cluster, locality=True, n_lanes=3)
    with pytest.raises(ValueError, match="partition 0 of X is held by no worker"):
        opd.fit(PGSClassifier(**kw), dask_rows(X, [50] * 6), y, client=cluster,
                locality=True)


@pytest.mark.slow
def test_locality_waits_for_x_persisted_a_moment_ago(cluster):
    """client.persist(X) returns before X's blocks are made: locality=True waits for
    them before it asks where they are (it found them held by no worker). The model is
    the round-robin run of the blocks worker by worker, as once they are made."""
    X, y = make_data(m=200, n=20)
    blocks = [X[i * 50:(i + 1) * 50] for i in range(4)]
    kw = dict(p=1.8, sigma=1e-2, random_state=0)
    placed = _placed_on_workers(cluster, blocks, [0, 0, 1, 1], wait=False, seconds=0.5)
    assert not any(cluster.who_has(placed).values())  # none made yet
    got = opd.fit(PGSClassifier(**kw), placed, y, client=cluster, locality=True,
                  slice_rows=30)
    order = (0, 2, 1, 3)  # dealt to 2 lanes: worker 0's blocks, worker 1's
    ref = opd.fit(PGSClassifier(**kw), dask_rows(sp.vstack([blocks[i] for i in order],
                                                           format="csr"), [50] * 4),
                  np.concatenate([y[i * 50:(i + 1) * 50] for i in order]), n_lanes=2,
                  slice_rows=30)
    np.testing.assert_array_equal(got.coef_, ref.coef_)
    assert got.online_stats_["n_examples"] == 200


@pytest.mark.slow
def test_a_failed_cluster_fit_holds_no_futures(cluster, text_data, tmp_path):
    """A fit that fails on a cluster releases the futures of its rounds, blocks and
    state: the exception's traceback keeps the driver's frames, and the failed task's
    state in the client keeps that traceback, so they stayed for ever (5 to 9 a fit)."""
    import gc
    import time

    def settled():  # the client releases keys on its event loop
        gc.collect()
        for _ in range(100):
            count = len(cluster.futures)
            time.sleep(0.05)
            if len(cluster.futures) == count:
                return count
        return count

    bad_y = text_data["y"].copy()
    bad_y[300] = 5.0  # in the fourth partition: rounds ran before its block was read
    placed = _placed_on_workers(cluster, [text_data["X"][:200], text_data["X"][200:]],
                                [0, 1])
    before = settled()
    for X, kw in ((text_data["dX"], {}), (text_data["dX"], dict(callback=lambda info: 0)),
                  (placed, dict(locality=True))):
        with pytest.raises(ValueError, match="label 5.0 at partition"):
            opd.fit(PGSClassifier(), X, bad_y, classes=[-1, 1], client=cluster,
                    n_lanes=2, slice_rows=20, **kw)
        assert settled() == before, kw
    lines = list(text_data["lines"])
    lines[300] = lines[300].replace(":", ";", 1)
    path = tmp_path / "bad.svm"
    path.write_text("\n".join(lines) + "\n")
    bag = db.from_sequence(lines, npartitions=4)
    # a file's blocks (chained tasks), a bag's labels (the classes' first pass)
    for X, kw in (([str(path)], dict(classes=[-1, 1], block_rows=40)), (bag, {})):
        with pytest.raises(SvmlightError, match="missing ':'"):
            opd.fit(PGSClassifier(), X, client=cluster, n_lanes=2, slice_rows=20, **kw)
        assert settled() == before, X


@pytest.mark.slow
def test_a_persisted_array_is_read_by_the_rounds_once_a_block(cluster, monkeypatch):
    """A persisted array's blocks are read by the lanes' round tasks on their workers,
    no task of their own; a block whose rows two rounds share is read once and kept for
    the second (slices of 40 rows over blocks of 50), and nothing is kept after the fit.
    The model is threads' bit for bit; a bad row is reported where it is; "auto" leaves
    slices trained where they lie unbounded in bytes, and bounds the others."""
    from distributed import get_task_stream

    # run on the workers (functions of the test, so that they travel by value)
    def kept_blocks():
        from onlinepgs.distributed import replicas as worker_replicas

        return len(worker_replicas.OPEN_BLOCKS)

    def install():
        # the round tasks read blocks (replicas), and so would an unread block's meta
        from onlinepgs.distributed import replicas as worker_replicas
        from onlinepgs.distributed.sources import array as worker_array

        log = worker_replicas.count_log = []
        read = worker_array.array_block

        def counted(*args):
            log.append(args[4])  # the partition
            return read(*args)

        worker_replicas.array_block_uncounted = read
        worker_replicas.array_block = worker_array.array_block = counted

    def uninstall():
        from onlinepgs.distributed import replicas as worker_replicas
        from onlinepgs.distributed.sources import array as worker_array

        read = worker_replicas.array_block_uncounted
        worker_replicas.array_block = worker_array.array_block = read
        return worker_replicas.count_log, kept_blocks()

    X, y = make_data(m=300, n=20)
    blocks = [X[i * 50:(i + 1) * 50] for i in range(6)]
    kw = dict(p=1.8, sigma=1e-2, random_state=0)
    args = dict(slice_rows=40, passes=2, n_lanes=2)
    placed = _placed_on_workers(cluster, blocks, [0, 1] * 3)
    cluster.run(install)
    try:
        with get_task_stream(cluster) as stream:
            got = opd.fit(PGSClassifier(**kw), placed, y, client=cluster, locality=True,
                          **args)
    finally:
        reads = cluster.run(uninstall)
    ref = opd.fit(PGSClassifier(**kw), dask_rows(X, [50] * 6), y, **args)
    np.testing.assert_array_equal(got.coef_, ref.coef_)
    names = {str(task["key"]).split("-")[0].strip("('\"") for task in stream.data}
    assert names == {"replica_round", "replica_state"}
    # each block once a pass, on the worker holding it; none kept after
    addrs = sorted(cluster.scheduler_info()["workers"])
    assert sorted(reads[addrs[0]][0]) == [0, 0, 2, 2, 4, 4]
    assert sorted(reads[addrs[1]][0]) == [1, 1, 3, 3, 5, 5]
    assert [kept for _, kept in reads.values()] == [0, 0]

    # a NaN in a block read by a round: said where
    bad = X.copy().tolil()
    bad[163, 4] = np.nan
    bad = bad.tocsr()
    placed = _placed_on_workers(cluster, [bad[i * 50:(i + 1) * 50] for i in range(6)],
                                [0, 1] * 3)
    est = PGSClassifier(**kw)
    with pytest.raises(ValueError, match=r"NaN or infinity at partition 3, row 13 "
                                         r"\(row 163 of X\)"):
        opd.fit(est, placed, y, client=cluster, locality=True, **args)
    assert not hasattr(est, "coef_")
    assert set(cluster.run(kept_blocks).values()) == {0}
    # blocks persisted on the cluster, trained without its client: said, not a KeyError
    with pytest.raises(ValueError, match=r"X is persisted on a dask.distributed cluster "
                                         r".*pass that cluster's Client as client="):
        opd.fit(PGSClassifier(**kw), placed, y, **args)

    # slice_rows="auto" leaves the slices of rows trained where they lie unbounded in
    # bytes (locality, in order, one-row steps): the 2,000 rows are one round, where the
    # 50,000 bytes bound 176-byte rows (20 dense features, a label, a weight) to 284
    monkeypatch.setattr(slices, "SLICE_BYTES_MAX", 50_000)
    rng = np.random.default_rng(5)
    Xd = rng.standard_normal((2000, 20))
    yd = np.where(Xd[:, 0] + 0.3 * rng.standard_normal(2000) > 0, 1.0, -1.0)
    dX = _placed_on_workers(cluster, [Xd[i * 500:(i + 1) * 500] for i in range(4)],
                            [0, 1] * 2)
    rounds = []
    auto = opd.fit(PGSClassifier(sigma=1e-3), dX, yd, n_lanes=2, client=cluster,
                   locality=True, callback=lambda info: rounds.append(info["rows"]))
    assert rounds == [2000]
    given = opd.fit(PGSClassifier(sigma=1e-3), dX, yd, n_lanes=2, client=cluster,
                    locality=True, slice_rows=1000)
    np.testing.assert_array_equal(auto.coef_, given.coef_)
    # ... but not those it moves (no locality) or copies: shuffled, in mini-batches
    # (which may straddle blocks), converted (float32 rows, hashed ones)
    dX32 = _placed_on_workers(cluster, [Xd[i * 500:(i + 1) * 500].astype(np.float32)
                                        for i in range(4)], [0, 1] * 2, dtype=np.float32)
    for kw in (dict(locality=False), dict(shuffle=True), dict(batch_size=4),
               dict(X=dX32), dict(n_bits=16)):
        rounds.clear()
        opd.fit(PGSClassifier(sigma=1e-3, batch_size=kw.get("batch_size", 1),
                              n_bits=kw.get("n_bits")), kw.get("X", dX), yd,
                n_lanes=2, client=cluster, shuffle=kw.get("shuffle", False),
                locality=kw.get("locality", True),
                callback=lambda info: rounds.append(info["rows"]))
        # bounded: 284 rows a lane (hashed ones are sparse, and so lighter: 192)
        assert len(rounds) >= 4 and max(rounds) <= 2 * 284, (kw, rounds)


def test_locality_evens_out_the_lanes_rows():
    """_balanced moves partitions from the longest lane to the shortest while that
    shortens the longest, among equals one the receiving worker holds too, and leaves
    even lanes alone."""
    h = [{"a"}] * 6
    assert run.balanced([[0, 1, 2, 3], [4, 5]], [50] * 6, h, ["a", "b"]) == [[0, 1, 2],
                                                                           [3, 4, 5]]
    assert run.balanced([[0, 1, 2], [3, 4, 5]], [50] * 6, h, ["a", "b"]) == [[0, 1, 2],
                                                                           [3, 4, 5]]
    both = [{"a"}, {"a", "b"}, {"a"}, {"a"}, {"b"}, {"b"}]
    assert run.balanced([[0, 1, 2, 3], [4, 5]], [50] * 6, both, ["a", "b"]) == [
        [0, 2, 3], [1, 4, 5]]
    # 52 and 48 blocks (the scheduler's placement once): one moves, 50 and 50
    rows = [100_000] * 100
    groups = run.balanced([list(range(52)), list(range(52, 100))], rows,
                           [{"a"}] * 100, ["a", "b"])
    assert [len(g) for g in groups] == [50, 50] and groups[1][:2] == [50, 51]
    # unequal blocks, 3 lanes: the longest lane's rows fall from 700 to 500 (the least
    # there can be: one partition has 500), by 3 moves
    rows = [500, 100, 100, 100, 100, 100, 100, 100]
    groups = run.balanced([[1, 2, 3, 4, 5, 6, 7], [0], []], rows, [{"a"}] * 8,
                           ["a", "b", "c"])
    assert sorted(sum(rows[i] for i in g) for g in groups) == [300, 400, 500]
    assert sorted(i for g in groups for i in g) == list(range(8))
    # a partition larger than the lead stays where it is
    assert run.balanced([[0], [1]], [500, 100], [{"a"}, {"b"}], ["a", "b"]) == [[0], [1]]


def test_locality_needs_a_cluster():
    X, y = make_data(m=40)
    with pytest.raises(ValueError, match="locality=True places lanes on the workers"):
        opd.fit(PGSClassifier(), dask_rows(X, [20, 20]), y, locality=True)
    with pytest.raises(ValueError, match="locality must be an instance of 'bool'. Got 'yes'"):
        opd.fit(PGSClassifier(), dask_rows(X, [20, 20]), y, locality="yes")


@pytest.mark.slow
def test_cli_on_a_local_cluster(cluster, tmp_path, text_data):
    out, out2 = tmp_path / "c.pgs", tmp_path / "t.pgs"
    args = ["--lanes", 2, "--slice-rows", 40, "--quiet", "--loss", "hinge"]
    assert run_cli("train", *text_data["files"], "-o", out, "--scheduler",
                   cluster.scheduler.address, *args) == 0
    assert run_cli("train", *text_data["files"], "-o", out2, "--scheduler", "threads",
                   *args) == 0
    np.testing.assert_array_equal(load_model(out).coef_, load_model(out2).coef_)


@pytest.mark.parametrize("scheduler", ["threads", pytest.param("cluster", marks=pytest.mark.slow)])
def test_auto_slices_hold_at_most_their_bytes(monkeypatch, scheduler, request):
    # dense rows of 20 float64 features, a label and a weight: 176 bytes a row as the
    # core takes them, so a 50,000-byte budget is 284 rows a slice (not the 65,536 floor)
    monkeypatch.setattr(slices, "SLICE_BYTES_MAX", 50_000)
    rng = np.random.default_rng(5)
    X = rng.standard_normal((2000, 20))
    y = np.where(X[:, 0] + 0.3 * rng.standard_normal(2000) > 0, 1.0, -1.0)
    dX = da.from_array(X, chunks=(500, 20))
    client = request.getfixturevalue("cluster") if scheduler == "cluster" else None
    rounds = []
    auto = opd.fit(PGSClassifier(sigma=1e-3, batch_size=4), dX, y, n_lanes=2, client=client,
                   callback=lambda info: rounds.append(info["rows"]))
    assert rounds[:3] == [2 * 284] * 3  # 50,000 // 176 = 284, whole mini-batches of 4
    assert sum(rounds) == 2000
    given = opd.fit(PGSClassifier(sigma=1e-3, batch_size=4), dX, y, n_lanes=2,
                    slice_rows=284)
    np.testing.assert_array_equal(auto.coef_, given.coef_)
