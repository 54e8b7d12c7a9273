"""What the onlinepgs.dask tests share: rows in partitions, the same rows as svmlight
text (a dask array, a bag, files), a LocalCluster of two worker processes on 127.0.0.1,
the command line."""
import gzip
import io

import dask
import dask.array as da
import dask.bag as db
import numpy as np
import pytest
import scipy.sparse as sp

from onlinepgs import load_svmlight


def make_data(m=60, n=12, seed=0, classes=2):
    rng = np.random.RandomState(seed)
    X = sp.random(m, n, density=0.35, random_state=rng, format="csr")
    X.data = rng.randn(X.nnz)
    score = X @ rng.randn(n) + 0.3 * rng.randn(m)
    if classes == 2:
        y = np.where(score > 0, 1.0, -1.0)
    else:
        y = np.digitize(score, np.quantile(score, [1 / 3, 2 / 3])).astype(float)
    return X, y


def dask_rows(X, sizes):
    """A dask array whose row blocks (partitions) have the given sizes."""
    cuts = np.concatenate([[0], np.cumsum(sizes)])
    blocks = [da.from_array(X[a:b], chunks=X[a:b].shape, asarray=False)
              for a, b in zip(cuts, cuts[1:])]
    return da.concatenate(blocks, axis=0)


def lane_rows(sizes, n_lanes):
    """Rows of each lane: partitions dealt round-robin, each lane's in order."""
    cuts = np.concatenate([[0], np.cumsum(sizes)])
    parts = [np.arange(a, b) for a, b in zip(cuts, cuts[1:])]
    return [np.concatenate(parts[p::n_lanes]) for p in range(n_lanes)]


def svm_lines(X, y):
    out = []
    for i in range(X.shape[0]):
        row = X[i]
        label = f"{y[i]:g}" if y[i] != 1 else "+1"
        out.append(label + "".join(f" {j + 1}:{v:.6g}" for j, v in zip(row.indices, row.data)))
    return out


@pytest.fixture(scope="module")
def text_data(tmp_path_factory):
    """The same rows as a dask array, a bag and files, in partitions of equal sizes."""
    X, y = make_data(m=400, n=25, seed=1)
    lines = svm_lines(X, y)
    Xp, yp = load_svmlight(io.BytesIO("\n".join(lines).encode()), n_features=25)
    sizes = [90, 60, 110, 80, 60]
    cuts = np.concatenate([[0], np.cumsum(sizes)])
    d = tmp_path_factory.mktemp("svm")
    files = []
    for i, (a, b) in enumerate(zip(cuts, cuts[1:])):
        text = ("\n".join(lines[a:b]) + "\n").encode()
        if i == 2:  # a compressed file: one partition, read in chained blocks
            path = d / f"part{i}.svm.gz"
            path.write_bytes(gzip.compress(text))
        else:
            path = d / f"part{i}.svm"
            path.write_bytes(text)
        files.append(str(path))
    whole = d / "all.svm"
    whole.write_bytes(("\n".join(lines) + "\n").encode())
    bag = db.from_delayed([dask.delayed(list)(lines[a:b]) for a, b in zip(cuts, cuts[1:])])
    return dict(X=Xp, y=yp, sizes=sizes, files=files, whole=str(whole), bag=bag,
                lines=lines, dX=dask_rows(Xp, sizes))


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  memory_limit="512MiB", dashboard_address=None) as c:
        with distributed.Client(c) as client:
            yield client


def run_cli(*argv):
    from onlinepgs.cli import main
    return main([str(a) for a in argv])


def assert_close(actual, expected, rtol=1e-9):
    scale = max(np.max(np.abs(expected)), 1e-300)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol * scale)
