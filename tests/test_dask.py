"""onlinepgs.dask: fit and partial_fit on dask arrays, bags and files (on Dask's
threads): sources, models, errors, the command line, blocks and slices.

The round arithmetic is tested in test_dask_rounds.py, a real cluster in
test_dask_cluster.py, the options in test_dask_options.py."""
import gzip
import io
import os
import re

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import strategies as st

dask = pytest.importorskip("dask", reason="onlinepgs.dask needs Dask (pip install "
                           "'onlinepgs[dask]')")
da = pytest.importorskip("dask.array")
db = pytest.importorskip("dask.bag")

import onlinepgs.dask as opd  # noqa: E402
from onlinepgs import (ModelTooLargeError, PGSClassifier, PGSDivergedError,  # noqa: E402
                       PGSRegressor, SvmlightError, load_model, load_svmlight, save_model)
from onlinepgs.distributed import backends, blocks, slices  # noqa: E402
from onlinepgs.distributed.options import RunOptions  # noqa: E402
from onlinepgs.distributed.sources import files as file_source  # noqa: E402

from dask_helpers import (assert_close, dask_rows, lane_rows, make_data,  # noqa: E402
                          run_cli, svm_lines, text_data)
from fuzzing import MUTATIONS, fuzzer, mutate  # noqa: E402
from shared_data import shared  # noqa: E402


# ---- the data sources ----------------------------------------------------------------
@pytest.mark.parametrize("slice_rows", [7, 64])
def test_bag_and_files_equal_the_array_on_the_same_partitions(text_data, slice_rows):
    kw = dict(p=1.5, sigma=1e-2, iterate="weighted2", random_state=0)
    A = opd.fit(PGSClassifier(**kw), text_data["dX"], text_data["y"], n_lanes=2,
                slice_rows=slice_rows)
    B = opd.fit(PGSClassifier(**kw), text_data["bag"], n_lanes=2, slice_rows=slice_rows,
                n_features=25)
    # small blocks: slices cross block and partition boundaries
    C = opd.fit(PGSClassifier(**kw), text_data["files"], n_lanes=2, slice_rows=slice_rows,
                n_features=25, blocksize=10**9, block_rows=33)
    for other in (B, C):
        np.testing.assert_array_equal(other.coef_, A.coef_)
        np.testing.assert_array_equal(other.intercept_, A.intercept_)
        assert other.online_stats_["progressive_loss"] == A.online_stats_["progressive_loss"]
        assert other.t_ == A.t_ == 400


@pytest.mark.parametrize("blocksize", [None, 997, 10**9])
@pytest.mark.parametrize("block_rows", [7, 1000])
def test_byte_ranges_cover_every_line_once(text_data, blocksize, block_rows):
    """One file cut into byte ranges at arbitrary offsets, one lane: the ranges are read
    in order, so the run is single-process PGS over the file."""
    kw = dict(p=1.8, sigma=1e-2, random_state=0)
    ref = PGSClassifier(**kw).partial_fit(text_data["X"], text_data["y"], classes=[-1, 1])
    got = opd.fit(PGSClassifier(**kw), [text_data["whole"]], n_lanes=1, slice_rows=50,
                  blocksize=blocksize, block_rows=block_rows, n_features=25)
    assert got.online_stats_["n_examples"] == 400
    assert_close(got.coef_, ref.coef_, rtol=1e-12)


def test_a_bag_from_read_text(text_data):
    """db.read_text's lines keep their newline; cut anywhere, one lane reads them in order."""
    bag = db.read_text(text_data["whole"], blocksize=1500)
    assert bag.npartitions > 3
    kw = dict(p=1.8, sigma=1e-2, random_state=0)
    ref = PGSClassifier(**kw).partial_fit(text_data["X"], text_data["y"], classes=[-1, 1])
    got = opd.fit(PGSClassifier(**kw), bag, n_lanes=1, slice_rows=64, n_features=25)
    assert got.online_stats_["n_examples"] == 400
    assert_close(got.coef_, ref.coef_, rtol=1e-12)


def test_empty_partitions_add_no_rows(tmp_path, text_data):
    """Text partitions with no rows (emptied by a filter, empty or comment-only files,
    byte ranges where no line starts) are read as 0 rows, with or without n_features:
    the model is that of the rows alone. Empty partitions placed so that each lane
    reads the same rows in the same order as on the five partitions of the array."""
    kw = dict(p=1.5, sigma=1e-2, iterate="weighted2", random_state=0)
    args = dict(n_lanes=2, slice_rows=32)
    ref = opd.fit(PGSClassifier(**kw), text_data["dX"], text_data["y"], **args)
    parts = [text_data["lines"][a:b] for a, b in
             zip(np.cumsum([0] + text_data["sizes"][:-1]), np.cumsum(text_data["sizes"]))]
    junk = ["junk"]  # lines the filter drops: their partitions end up empty
    bag = db.from_delayed([dask.delayed(list)(p) for p in (
        parts[0], parts[1], junk, junk, parts[2], parts[3], junk, junk, parts[4], junk)])
    bag = bag.filter(lambda line: line != "junk")
    files = []
    for i, text in enumerate([*parts[:2], [], ["# a comment"], *parts[2:4], [], ["#"],
                              parts[4], ["# one more"]]):
        path = tmp_path / f"p{i}.svm"
        path.write_text("".join(line + "\n" for line in text))
        files.append(str(path))
    # n_features=None: an empty partition's width is 0 (that failed scikit-learn's check)
    for X, extra in ((bag, {}), (bag, dict(n_features=25)), (files, dict(blocksize=10**9))):
        got = opd.fit(PGSClassifier(**kw), X, **extra, **args)
        np.testing.assert_array_equal(got.coef_, ref.coef_)
        np.testing.assert_array_equal(got.intercept_, ref.intercept_)
        assert got.t_ == 400 and got.n_features_in_ == 25

    # byte ranges shorter than a line: most hold no line start; one lane reads them in
    # order, as it reads the file in one range
    whole = tmp_path / "forty.svm"
    whole.write_text("".join(line + "\n" for line in text_data["lines"][:40]))
    one = opd.fit(PGSClassifier(**kw), [str(whole)], n_lanes=1, slice_rows=16,
                  blocksize=10**9)
    got = opd.fit(PGSClassifier(**kw), [str(whole)], n_lanes=1, slice_rows=16,
                  blocksize=16)
    np.testing.assert_array_equal(got.coef_, one.coef_)
    assert got.t_ == 40
    # a one-line file in a byte range a lane (the default): the second has no line start
    single = tmp_path / "single.svm"
    single.write_text(text_data["lines"][0] + "\n")
    got = opd.fit(PGSClassifier(**kw), [str(single)], classes=[-1, 1], n_lanes=2)
    ref = PGSClassifier(**kw).partial_fit(*load_svmlight(str(single)), classes=[-1, 1])
    assert got.t_ == 1 and got.n_features_in_ == ref.n_features_in_
    assert_close(got.coef_, ref.coef_, rtol=1e-12)


def test_no_rows_at_all_is_an_error(tmp_path):
    """Input with no rows at all (an empty bag or array, files of comments) fits nothing:
    an error, as partial_fit's on 0 rows, and the estimator is left as it was."""
    empty = tmp_path / "empty.svm"
    empty.write_text("")
    comments = tmp_path / "comments.svm"
    comments.write_text("# nothing\n# here\n")
    X, y = make_data(m=40)
    fitted = opd.fit(PGSClassifier(random_state=0), dask_rows(X, [20, 20]), y)
    coef = fitted.coef_.copy()
    for data, kw in ((db.from_sequence([], npartitions=1), {}),
                     (db.from_sequence(["# a", "# b"], npartitions=2), {}),
                     ([str(empty), str(comments)], {}),
                     ([str(empty), str(comments)], dict(n_features=3)),
                     (da.zeros((0, 12), chunks=(5, 12)), dict(y=np.zeros(0)))):
        for classes in (None, [-1, 1]):
            est = PGSClassifier()
            with pytest.raises(ValueError, match="no training rows were read"):
                opd.fit(est, data, classes=classes, **kw)
            assert not hasattr(est, "_state")
        with pytest.raises(ValueError, match="no training rows were read"):
            opd.partial_fit(fitted, data, **kw)
        np.testing.assert_array_equal(fitted.coef_, coef)


def test_zero_based_auto_decides_from_the_first_bag_rows():
    """A bag's zero_based="auto" is decided from its first rows, not from a first
    partition that a filter emptied (judged one-based, index 0 was then an error)."""
    lines = ["+1 0:1 2:1", "-1 1:1 2:1", "+1 0:2", "-1 1:2"] * 5
    bag = db.from_delayed([dask.delayed(list)(["junk"] * 3), dask.delayed(list)(lines)])
    got = opd.fit(PGSClassifier(random_state=0), bag.filter(lambda l: l != "junk"),
                  n_lanes=1)
    ref = opd.fit(PGSClassifier(random_state=0), db.from_sequence(lines, npartitions=1),
                  n_lanes=1)
    assert got.n_features_in_ == ref.n_features_in_ == 3
    np.testing.assert_array_equal(got.coef_, ref.coef_)


def test_partitions_of_files_and_lanes(text_data):
    src = file_source.FileSource([text_data["whole"]] + text_data["files"][2:3],
                                 PGSClassifier(),
                                 RunOptions(zero_based=False, blocksize=1000, block_rows=100),
                                 3, backends.LocalBackend())
    # the plain file in byte ranges of at most 1000 bytes, the gzip file whole
    size = os.path.getsize(text_data["whole"])
    plain = [p for p in src.parts if not p[3]]
    assert len(plain) == -(-size // 1000)
    assert plain[0][1] == 0 and plain[-1][2] == size
    assert all(a[2] == b[1] for a, b in zip(plain, plain[1:]))
    assert [p[3] for p in src.parts].count(True) == 1
    src = file_source.FileSource([text_data["whole"]], PGSClassifier(),
                                 RunOptions(zero_based=False, block_rows=100), 3,
                                 backends.LocalBackend())
    assert len(src.parts) == 3  # default: a range per lane


def test_a_relative_path_is_the_drivers_file_on_every_worker(text_data, monkeypatch):
    """A relative path's partitions name the file the driver measured and cut, by its
    absolute path: a worker resolved the relative one in its own directory (another
    file of the name there was trained on, silently)."""
    whole = text_data["whole"]
    monkeypatch.chdir(os.path.dirname(whole))
    src = file_source.FileSource([os.path.basename(whole)], PGSClassifier(),
                                 RunOptions(zero_based=False, block_rows=100), 2,
                                 backends.LocalBackend())
    assert {p[0] for p in src.parts} == {os.path.abspath(whole)}


def test_compressed_reader_reopens_when_its_cache_is_gone(text_data):
    gz = text_data["files"][2]
    task = (gz, 0, os.path.getsize(gz), True, False, 25, 40, 0, "test-token", None)
    first, _, line0, cursor = file_source.read_block_text(task, None)
    assert line0 == 1 and first.count(b"\n") == 40
    second, _, line0, _ = file_source.read_block_text(task, cursor)
    file_source.drop_readers("test-token")  # as if the next block ran on another worker
    again, _, _, _ = file_source.read_block_text(task, cursor)
    assert line0 == 41 and again == second
    file_source.drop_readers("test-token")


def test_shuffle_is_seeded_and_changes_the_order(text_data):
    kw = dict(sigma=1e-2, random_state=0)
    a = opd.fit(PGSClassifier(**kw), text_data["dX"], text_data["y"], n_lanes=2,
                slice_rows=32, shuffle=True, passes=2)
    b = opd.fit(PGSClassifier(**kw), text_data["dX"], text_data["y"], n_lanes=2,
                slice_rows=32, shuffle=True, passes=2)
    c = opd.fit(PGSClassifier(**kw), text_data["dX"], text_data["y"], n_lanes=2,
                slice_rows=32, shuffle=False, passes=2)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert not np.array_equal(a.coef_, c.coef_)
    assert a.n_iter_ == 2 and a.online_stats_["n_examples"] == 800


def test_classes_found_in_a_first_pass(text_data):
    X, y = make_data(m=90, classes=3)
    lines = svm_lines(X, y + 1)  # labels 1, 2, 3
    bag = db.from_sequence(lines, npartitions=3)
    est = opd.fit(PGSClassifier(sigma=1e-2), bag, n_lanes=2, slice_rows=16)
    assert est.classes_.tolist() == [1.0, 2.0, 3.0]
    est = opd.fit(PGSClassifier(sigma=1e-2), dask_rows(X, [30, 30, 30]), y, n_lanes=2)
    assert est.classes_.tolist() == [0.0, 1.0, 2.0]
    assert est.coef_.shape == (3, X.shape[1])


def test_dense_blocks_weights_and_regressor():
    rng = np.random.RandomState(0)
    X = rng.randn(600, 4)
    y = X @ [1.0, -2.0, 0.5, 0.0] + 0.01 * rng.randn(600)
    sw = rng.uniform(0.5, 2.0, 600)
    dX = da.from_array(X, chunks=(150, 2))  # column chunks are merged
    kw = dict(sigma=1e-3, radius=10.0, random_state=0)
    ref = PGSRegressor(**kw).partial_fit(X, y, sample_weight=sw)
    one = opd.fit(PGSRegressor(**kw), dX, da.from_array(y, chunks=100), sample_weight=sw,
                  n_lanes=1, slice_rows=10**6)
    assert_close(one.coef_, ref.coef_, rtol=1e-12)
    assert one.online_stats_["sum_weight"] == pytest.approx(sw.sum(), rel=1e-12)
    two = opd.fit(PGSRegressor(max_epochs=1, **kw), dX, y, n_lanes=2, slice_rows=64,
                  passes=20)
    assert two.score(X, y) > 0.99


def test_partial_fit_continues_and_hashing():
    X, y = make_data(m=200, n=40)
    kw = dict(sigma=1e-2, n_bits=4, random_state=0)
    ref = PGSClassifier(**kw).partial_fit(X[:100], y[:100], classes=[-1, 1])
    ref.partial_fit(X[100:], y[100:])
    est = opd.partial_fit(PGSClassifier(**kw), dask_rows(X[:100], [100]), y[:100],
                          classes=[-1, 1], n_lanes=1, slice_rows=10**6)
    est = opd.partial_fit(est, dask_rows(X[100:], [100]), y[100:], n_lanes=1,
                          slice_rows=10**6)
    assert est.n_features_in_ == 16 and est.t_ == 200 and est.n_iter_ == 2
    assert_close(est.coef_, ref.coef_, rtol=1e-12)


# ---- models, files, quality ----------------------------------------------------------
def test_saved_model_is_like_any_other(tmp_path, text_data):
    est = opd.fit(PGSClassifier(sigma=1e-2, p=1.8), text_data["files"], n_lanes=2,
                  slice_rows=40, n_features=25)
    path = tmp_path / "model.pgs"
    save_model(est, path)
    back = load_model(path)
    assert type(back) is PGSClassifier
    np.testing.assert_array_equal(back.coef_, est.coef_)
    for key, value in est.online_stats_.items():
        np.testing.assert_array_equal(back.online_stats_[key], value)
    # both continue the same way, in one process or on Dask
    est.partial_fit(text_data["X"][:50], text_data["y"][:50])
    back.partial_fit(text_data["X"][:50], text_data["y"][:50])
    np.testing.assert_array_equal(back.coef_, est.coef_)
    again = opd.partial_fit(back, text_data["bag"], n_lanes=2, slice_rows=40, n_features=25)
    assert again.online_stats_["n_examples"] == 450 + 400


def test_accuracy_close_to_single_process_on_a9a():
    X, y = load_svmlight(shared("a9a.svm.gz"), n_features=123)
    Xt, yt = load_svmlight(shared("a9a.t.svm.gz"), n_features=123)
    kw = dict(p=1.8, sigma=1e-4, random_state=0)
    ref = PGSClassifier(**kw)
    for _ in range(2):
        ref.partial_fit(X, y, classes=[-1, 1])
    dX = da.from_array(X, chunks=(4096, 123), asarray=False)
    got = opd.fit(PGSClassifier(**kw), dX, y, n_lanes=2, passes=2)
    assert abs(got.score(Xt, yt) - ref.score(Xt, yt)) <= 0.003


@pytest.mark.slow
def test_accuracy_close_to_single_process_on_imdb():
    X, y = load_svmlight(shared("imdb_train.svm.gz"))
    Xt, yt = load_svmlight(shared("imdb_test.svm.gz"), n_features=X.shape[1])
    kw = dict(p=1.8, sigma=1e-5, random_state=0)  # the configuration chosen in issue 3
    ref = PGSClassifier(**kw).partial_fit(X, y, classes=[-1, 1])
    dX = da.from_array(X, chunks=(2500, X.shape[1]), asarray=False)  # 10 partitions
    for slice_rows in (2048, 16384):
        got = opd.fit(PGSClassifier(**kw), dX, y, n_lanes=2, slice_rows=slice_rows)
        assert abs(got.score(Xt, yt) - ref.score(Xt, yt)) <= 0.003


# ---- errors --------------------------------------------------------------------------
def test_bad_input_says_what_and_where(tmp_path, text_data):
    X, y = text_data["X"], text_data["y"]
    dX = text_data["dX"]
    est = PGSClassifier()
    with pytest.raises(TypeError, match="dask.array.Array, a dask.bag.Bag"):
        opd.fit(est, X, y)
    with pytest.raises(TypeError, match="PGSClassifier or PGSRegressor"):
        opd.fit(object(), dX, y)
    with pytest.raises(ValueError, match="y is required"):
        opd.fit(est, dX)
    with pytest.raises(ValueError, match="X has 400 rows but y has 399"):
        opd.fit(est, dX, y[:399])
    with pytest.raises(ValueError, match="text input"):
        opd.fit(est, text_data["bag"], y)
    with pytest.raises(ValueError, match=r"passes must be an int in the range \[1, inf\). Got 0"):
        opd.fit(est, dX, y, passes=0)
    with pytest.raises(ValueError, match=r"slice_rows must be a str among \{'auto'\} or an int in "
                       r"the range \[1, inf\). Got 'big'"):
        opd.fit(est, dX, y, slice_rows="big")
    with pytest.raises(ValueError, match=r"slice_rows must be .* Got 0 instead"):
        opd.fit(est, dX, y, slice_rows=0)
    with pytest.raises(ValueError, match="classes applies to classification losses only"):
        opd.fit(PGSRegressor(), dX, y, classes=[-1, 1])
    with pytest.raises(FileNotFoundError, match="nope.svm: no such file"):
        opd.fit(est, [str(tmp_path / "nope.svm")])
    bad_y = y.copy()
    bad_y[123] = 5.0  # row 123 is row 33 of partition 1 (which starts at row 90)
    with pytest.raises(ValueError, match=r"label 5.0 at partition 1, row 33 \(row 123 of "
                       r"X\) is not one of the classes \[-1, 1\]"):
        opd.fit(est, dX, bad_y, classes=[-1, 1])
    Xnan = X.copy()
    Xnan.data[Xnan.indptr[200]] = np.nan  # row 200: partition 2, row 50
    with pytest.raises(ValueError, match="NaN or infinity at partition 2, row 50"):
        opd.fit(est, dask_rows(Xnan, text_data["sizes"]), y)
    assert not hasattr(est, "coef_") and not hasattr(est, "_state")  # left as it was

    # blocks that are not what the array declares (the driver plans by the chunks)
    sizes = text_data["sizes"]
    lying = da.concatenate([
        da.from_delayed(dask.delayed(lambda a, b, more: X[a:b + more])(a, b, int(i == 1)),
                        shape=(b - a, X.shape[1]), dtype=float,
                        meta=sp.csr_matrix((0, X.shape[1])))
        for i, (a, b) in enumerate(zip(np.cumsum([0] + sizes[:-1]), np.cumsum(sizes)))])
    with pytest.raises(ValueError, match=r"partition 1 of X \(from row 90\) has 61 rows, "
                       r"but the dask array's chunks say 60"):
        opd.fit(est, lying, y, classes=[-1, 1])
    wide = da.concatenate([
        da.from_delayed(dask.delayed(sp.hstack)([X[a:b], X[a:b]], format="csr"),
                        shape=(b - a, X.shape[1]), dtype=float,
                        meta=sp.csr_matrix((0, X.shape[1])))
        for a, b in zip(np.cumsum([0] + sizes[:-1]), np.cumsum(sizes))])
    with pytest.raises(ValueError, match=r"partition \d+ of X \(from row \d+\) has "
                       rf"{2 * X.shape[1]} columns, but the dask array says {X.shape[1]}"):
        opd.fit(est, wide, y, classes=[-1, 1])
    assert not hasattr(est, "_state")

    # a bad line in the second byte range of a file: its line number in the file
    lines = list(text_data["lines"])
    lines[300] = lines[300].replace(":", ";", 1)
    path = tmp_path / "bad.svm"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(SvmlightError, match=r"bad\.svm:301:\d+: missing ':'"):
        opd.fit(est, [str(path)], n_lanes=2, classes=[-1, 1])
    bag = db.from_sequence(lines, npartitions=4)  # 100 lines a partition
    with pytest.raises(SvmlightError, match="bag partition 3:1:"):
        opd.fit(est, bag, n_lanes=2, classes=[-1, 1])


def test_any_scipy_sparse_block_is_read_as_csr():
    """Blocks in any scipy.sparse format (matrix or array API) train as their CSR
    rows do, as partial_fit takes them; so do CSR blocks whose arrays are strided views
    (the core takes contiguous ones)."""
    X, y = make_data(m=200, n=10)
    dX = dask_rows(X, [60, 70, 70])
    kw = dict(p=1.8, sigma=1e-2, random_state=0)
    ref = opd.fit(PGSClassifier(**kw), dX, y, n_lanes=2, slice_rows=30)

    def strided(block):  # every other entry of an array twice as long
        return sp.csr_matrix((np.repeat(block.data, 2)[::2], block.indices, block.indptr),
                             shape=block.shape)

    for fmt in (sp.coo_matrix, sp.lil_matrix, sp.csc_matrix, sp.dok_matrix, sp.coo_array,
                sp.csr_array, sp.bsr_array, strided):
        blocks = dX.map_blocks(fmt, meta=fmt(sp.csr_matrix((0, 0))), dtype=float)
        got = opd.fit(PGSClassifier(**kw), blocks, y, n_lanes=2, slice_rows=30)
        np.testing.assert_array_equal(got.coef_, ref.coef_, err_msg=fmt.__name__)
        np.testing.assert_array_equal(got.intercept_, ref.intercept_)


def test_bad_labels_are_said_by_file_and_line(tmp_path, text_data):
    """A label outside the classes in svmlight text is named by its file (or bag
    partition) and line, blank and comment lines counted; a non-finite y by its row; y
    with unknown chunks is refused with the remedy."""
    text = b"1 1:1 2:3\n\n# a comment\n-1 2:1\n1 3:1\n3 1:2 # no\n1 3:1\n"
    plain, packed = tmp_path / "lab.svm", tmp_path / "lab.svm.gz"
    plain.write_bytes(text)
    packed.write_bytes(gzip.compress(text))
    for path in (plain, packed):
        with pytest.raises(ValueError, match=rf"^label 3.0 at {path}:6 is not one of the "
                           r"classes \[-1, 1\]$"):
            opd.fit(PGSClassifier(), [str(path)], classes=[-1, 1], n_lanes=2)
    # in the file's last byte range: its line is counted in the whole file
    late = tmp_path / "late.svm"
    late.write_bytes(text.replace(b"3 1:2", b"1 1:2") * 39 + text)
    with pytest.raises(ValueError, match=rf"^label 3.0 at {late}:279 is"):
        opd.fit(PGSClassifier(), [str(late)], classes=[-1, 1], n_lanes=2, blocksize=600)
    lines = text.decode().splitlines() * 2  # the partitions: lines 1-7 and 8-14
    bag = db.from_sequence(lines, npartitions=2)
    # each partition's line 6: whichever lane meets its own first
    with pytest.raises(ValueError, match=r"^label 3.0 at bag partition [01]:6 is not one"):
        opd.fit(PGSClassifier(), bag, classes=[-1, 1])

    X, y = text_data["X"], text_data["y"].copy()
    dX = text_data["dX"]
    y[123] = np.nan  # row 33 of partition 1
    for est, kw in ((PGSClassifier(), {"classes": [-1, 1]}), (PGSRegressor(), {})):
        with pytest.raises(ValueError, match=r"^y contains NaN or infinity at partition 1, "
                           r"row 33 \(row 123 of X\): nan$"):
            opd.fit(est, dX, da.from_array(y, chunks=100), **kw)
    unknown = da.from_array(text_data["y"], chunks=100)
    unknown = unknown[unknown > -5]
    with pytest.raises(ValueError, match=r"^y has unknown chunk sizes; call "
                       r"y.compute_chunk_sizes\(\) first$"):
        opd.fit(PGSClassifier(), dX, unknown, classes=[-1, 1])


def test_blocks_unlike_their_array_are_refused():
    """Complex rows are refused (as partial_fit refuses them), not cast to real; a dense
    block narrower than the array declares is refused, as a wider one is; callback is
    checked before any block is read. Each leaves the estimator as it was."""
    rng = np.random.RandomState(0)
    X = rng.randn(300, 6)
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    Xc = X + 1j * (np.arange(300) == 170)[:, None]
    est = PGSClassifier()
    with pytest.raises(ValueError, match="Complex data not supported"):
        PGSClassifier().partial_fit(Xc, y, classes=[-1, 1])  # the yardstick

    def second_complex(block, block_id=None):  # partition 1 complex, the others real
        return block if block_id[0] == 1 else block.real.astype(float)

    for blocks in (Xc, sp.csr_matrix(Xc)):
        dX = da.from_array(blocks, chunks=(150, 6), asarray=False).map_blocks(
            second_complex, dtype=complex, meta=blocks[:0])
        with pytest.raises(ValueError, match=r"Complex data not supported: a block of X "
                           r"is complex128 \(partition 1, row 0 \(row 150 of X\)\)"):
            opd.fit(est, dX, y, n_lanes=2, classes=[-1, 1])
    narrow = da.from_array(X, chunks=(100, 6)).map_blocks(lambda b: b[:, :5], dtype=float)
    with pytest.raises(ValueError, match=r"partition \d of X \(from row \d+\) has 5 "
                       r"columns, but the dask array says 6"):
        opd.fit(est, narrow, y, n_lanes=2)
    read = []

    def counted(block):
        read.append(block.shape)
        return block

    dX = da.from_array(X, chunks=(100, 6)).map_blocks(counted, meta=X[:0])
    with pytest.raises(TypeError, match="callback must be None or a callable. Got 5 instead"):
        opd.fit(est, dX, y, classes=[-1, 1], callback=5)
    assert read == [] and not hasattr(est, "_state")


@pytest.mark.parametrize("kind", ["gzip", "bz2", "xz", "gzip-crc"])
def test_a_truncated_or_corrupt_compressed_file_says_where(tmp_path, text_data, kind):
    """A compressed file that ends early (or fails its check) is an SvmlightError naming
    the file and the line reached, as the single-process reader says it: the line being
    read where the intact part of the stream ends, whatever the read size."""
    import bz2
    import lzma
    import zlib

    # 8 copies: the first of bz2's 100 kB blocks is whole before the cut
    text = "".join(line + "\n" for line in text_data["lines"] * 8).encode()
    if kind == "gzip-crc":
        data = bytearray(gzip.compress(text))
        data[-8] ^= 0xFF  # the trailer's CRC-32: every line decompresses, then the check
        data = bytes(data)
        intact = text
    else:
        compress = dict(gzip=gzip.compress, bz2=lambda b: bz2.compress(b, 1),
                        xz=lzma.compress)[kind]
        data = compress(text)
        data = data[:len(data) // 2]
        decompressor = dict(gzip=zlib.decompressobj(wbits=31),
                            bz2=bz2.BZ2Decompressor(),
                            xz=lzma.LZMADecompressor())[kind]
        intact = decompressor.decompress(data)  # what the truncated stream holds
    path = tmp_path / f"broken.svm.{kind}"
    path.write_bytes(data)
    name = kind.split("-")[0]
    with pytest.raises(SvmlightError, match=rf"truncated or corrupt {name} stream") as one:
        load_svmlight(str(path))  # the single-process reader's wording
    est = PGSClassifier()
    # zero_based given: "auto" would read the file's first rows in iter_svmlight
    with pytest.raises(SvmlightError) as info:
        opd.fit(est, [str(path)], zero_based=False, n_features=25, classes=[-1, 1],
                block_rows=50)
    error = info.value
    lines = intact.count(b"\n") + (not intact.endswith(b"\n"))
    assert lines > 100 and error.line == one.value.line == lines
    assert str(error).startswith(f"{path}:{error.line}: truncated or corrupt {name} stream "
                                 f"(line {error.line} is the last one reached): ")
    assert error.source == str(path) and error.column is None
    assert not hasattr(est, "_state")


@pytest.mark.parametrize("kind", ["bz2", "xz"])
def test_every_stream_of_a_compressed_file_is_read_or_its_damage_named(tmp_path, text_data,
                                                                      kind):
    """Issue 32, item 4, in the Dask file source (it decompresses with the reader's
    code): a file of several streams trains on every row, as the plain file does; a
    damaged second stream is the single-process reader's error, naming the line and the
    stream (BZ2File/LZMAFile ended at the damage silently, with half the rows). The
    yardstick: the same rows in one stream."""
    import bz2
    import lzma

    compress = dict(bz2=bz2.compress, xz=lzma.compress)[kind]
    text = "".join(line + "\n" for line in text_data["lines"]).encode()
    halves = [text[:text.index(b"\n", len(text) // 2) + 1]]
    halves.append(text[len(halves[0]):])
    streams = [bytearray(compress(half)) for half in halves]
    whole = tmp_path / f"whole.svm.{kind}"
    whole.write_bytes(b"".join(streams))
    single = tmp_path / f"single.svm.{kind}"  # a compressed file is one partition
    single.write_bytes(compress(text))
    kw = dict(zero_based=False, n_features=25, classes=[-1, 1], block_rows=50)
    one = opd.fit(PGSClassifier(), [str(single)], **kw)
    multi = opd.fit(PGSClassifier(), [str(whole)], **kw)
    np.testing.assert_array_equal(multi.coef_, one.coef_)
    assert multi.online_stats_["n_examples"] == len(text_data["lines"])
    streams[1][7] ^= 0xFF  # the second stream's header, after its magic bytes
    damaged = tmp_path / f"damaged.svm.{kind}"
    damaged.write_bytes(b"".join(streams))
    est = PGSClassifier()
    with pytest.raises(SvmlightError) as info:
        opd.fit(est, [str(damaged)], **kw)
    error = info.value
    assert error.line == halves[0].count(b"\n") and error.source == str(damaged)
    assert f"{kind} stream 2, which starts at byte {len(streams[0])} " in str(error)
    with pytest.raises(SvmlightError) as one:
        load_svmlight(str(damaged))
    assert str(one.value) == str(error)
    assert not hasattr(est, "_state")


def test_a_stray_feature_index_in_a_file_is_refused_at_its_line(tmp_path, text_data, capsys):
    """Issue 32, item 10, in Dask's file source: a feature index beyond the estimator's
    max_model_bytes is refused with the file and line of its row, before any lane
    grows to it (as partial_fit refuses it); within the budget the same file trains.
    (One state's bytes: a fixed sigma; sigma="auto" counts its race's runs.)"""
    lines = list(text_data["lines"])
    lines[150] = "1 5000:1"  # 5000 features x 18 bytes (and a few more): 90 kB of state
    needed = PGSClassifier(sigma=1e-4)._layout(1).nbytes(5001)  # onlinepgs._layout
    path = tmp_path / "stray.svm"
    path.write_text("\n".join(lines) + "\n")
    kw = dict(zero_based=False, classes=[-1, 1], block_rows=50, n_lanes=2)
    est = PGSClassifier(sigma=1e-4, max_model_bytes=50_000)
    with pytest.raises(ModelTooLargeError) as info:
        opd.fit(est, [str(path)], **kw)
    assert str(info.value).startswith(f"{path}:151 has a feature at column 4999 (from 0): "
                                      f"a model over 5000 features needs "
                                      f"{needed / 1e3:.1f} kB")
    assert not hasattr(est, "_state")
    fitted = opd.fit(PGSClassifier(sigma=1e-4, max_model_bytes=needed), [str(path)], **kw)
    assert fitted.n_features_in_ == 5000
    # a declared width is checked before the first state is made
    with pytest.raises(ModelTooLargeError, match="^X has 100000 columns"):
        opd.fit(PGSClassifier(sigma=1e-4, max_model_bytes=50_000), [str(path)],
                n_features=100_000, **kw)
    # train --scheduler says it in its flags, in one line, and writes no model
    model = tmp_path / "m.pgs"
    assert run_cli("train", path, "-o", model, "--scheduler", "threads", "--quiet",
                   "--zero-based", "1", "--max-model-bytes", "50000", "--sigma", "1e-4") == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}:151 has a feature at column 4999" in err
    assert "beyond --max-model-bytes 50000" in err and "--bits BITS" in err
    # its sizes in the flag's units, as the command without --scheduler says them
    assert f"needs {needed / 1024:.1f}K of solver state" in err
    assert not model.exists()


def test_divergence_is_reported_and_leaves_the_model():
    rng = np.random.RandomState(0)
    X = rng.randn(200, 3) * 1e100
    y = rng.randn(200) * 1e100
    est = PGSRegressor(loss="squared", sigma=1e-12, radius=None)
    with pytest.raises(PGSDivergedError, match="diverged in round 1 at partition"):
        opd.fit(est, da.from_array(X, chunks=(50, 3)), y, n_lanes=2, slice_rows=50)
    assert not hasattr(est, "_state")


# ---- the command line ----------------------------------------------------------------
def test_cli_scheduler_threads_equals_the_api(tmp_path, text_data, capsys):
    out = tmp_path / "m.pgs"
    files = text_data["files"]
    assert run_cli("train", *files, "-o", out, "--scheduler", "threads", "--lanes", 2,
                   "--slice-rows", 30, "--passes", 2, "--p", 1.8, "--sigma", 0.01) == 0
    err = capsys.readouterr().err
    assert "rounds = " in err and "number of examples = 800" in err
    got = load_model(out)
    ref = opd.partial_fit(PGSClassifier(p=1.8, sigma=0.01, random_state=0), files,
                          classes=[-1, 1], n_lanes=2, slice_rows=30, passes=2)
    np.testing.assert_array_equal(got.coef_, ref.coef_)
    # continue the saved model on Dask
    assert run_cli("train", files[0], "-i", out, "-o", out, "--scheduler", "threads",
                   "--quiet") == 0
    assert load_model(out).online_stats_["n_examples"] == 800 + 90


def test_cli_scheduler_errors(tmp_path, text_data, capsys):
    out = tmp_path / "m.pgs"
    assert run_cli("train", text_data["files"][0], "-o", out, "--scheduler",
                   "tcp://127.0.0.1:1", "--connect-timeout", 0.5) == 1
    assert "cannot reach the Dask scheduler at tcp://127.0.0.1:1" in capsys.readouterr().err
    # a port that accepts and never answers as a scheduler: bounded too (it hung)
    import socket
    import time
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        start = time.monotonic()
        assert run_cli("train", text_data["files"][0], "-o", out, "--scheduler",
                       f"tcp://127.0.0.1:{port}", "--connect-timeout", 0.5) == 1
        assert time.monotonic() - start < 30
    assert (f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port}: it accepted the "
            "connection but did not answer as a scheduler within 0.5 s") in \
        capsys.readouterr().err
    assert run_cli("train", text_data["files"][0], "-o", out, "--scheduler", "threads",
                   "--holdout-every", 5) == 2  # refused before any byte is read
    assert "argument --holdout-every: not available with --scheduler" in capsys.readouterr().err
    assert not out.exists()


def test_cli_a_cluster_lost_mid_fit_is_one_line_and_sigterm_unwinds(tmp_path, text_data,
                                                                    capsys, monkeypatch):
    """A worker (or the scheduler) lost mid-fit is the command's one line, no model
    written (a RuntimeError's traceback before); SIGTERM unwinds the fit as SIGINT does,
    so its copies on the workers are dropped by the driver's `finally`."""
    import os
    import signal

    from onlinepgs.cli import train_dask

    def lost(*args, **kwargs):
        raise RuntimeError("worker tcp://127.0.0.1:9 left the cluster during the fit")
    monkeypatch.setattr(opd, "partial_fit", lost)
    out = tmp_path / "m.pgs"
    assert run_cli("train", text_data["files"][0], "-o", out, "--scheduler", "threads",
                   "--quiet") == 1
    assert capsys.readouterr().err == (
        "onlinepgs: error: training on threads stopped: worker tcp://127.0.0.1:9 left the "
        "cluster during the fit; no model was written\n")
    assert not out.exists()
    before = signal.getsignal(signal.SIGTERM)
    previous = train_dask._terminate_as_interrupt()
    try:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)  # (handled before the call returns)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert signal.getsignal(signal.SIGTERM) is before


# ---- blocks, slices, scheduling on threads -------------------------------------------
def test_block_checks_without_temporaries_agree_with_numpy():
    from onlinepgs.estimators import _binary_targets

    # the sum test must not take overflowing finite values for infinities
    assert blocks.all_finite(np.array([1e308, 1e308, -3.0]))
    for bad in (np.nan, np.inf, -np.inf):
        assert not blocks.all_finite(np.array([1.0, bad, 2.0]))
        assert not blocks.all_finite(np.array([[1e308, 1e308], [0.0, bad]]))
    spec = PGSClassifier()
    for classes, y in [(np.array([-1, 1]), np.array([1, -1, -1, 1])),
                       (np.array([0.0, 3.0]), np.array([3.0, 0.0, 3.0])),
                       (np.array([2, 7]), np.array([7.0, 2.0]))]:
        spec.classes_ = classes
        # the general path (classes= given skips the quick one)
        expected = spec._encode_targets(y[:, None], y, fit=False, classes=classes)[0]
        np.testing.assert_array_equal(_binary_targets(y, classes), expected)
    assert _binary_targets(np.array([1.0, np.nan]), np.array([-1.0, 1.0])) is None
    assert _binary_targets(np.array([0.5, 1.0]), np.array([0.5, 1.0])) is None
    assert _binary_targets(np.array([1, 5]), np.array([-1, 1])) is None
    assert _binary_targets(np.array(["a", "b"]), np.array(["a", "b"])) is None
    assert _binary_targets(np.array([0, 1]), np.array([0, 1, 2])) is None


def test_auto_slice_rows_rule():
    assert opd.auto_slice_rows(None, 2) == 65536  # unknown length (bags, files)
    assert opd.auto_slice_rows(1000, 2) == 65536  # short: one round is all there is
    assert opd.auto_slice_rows(8 * 3 * 100_000, 3) == 100_000  # 8 rounds a pass
    assert opd.auto_slice_rows(8 * 3 * 100_000 + 1, 3) == 100_001  # rounded up
    assert opd.auto_slice_rows(10**9, 2) == 62_500_000  # no cap in rows
    # ... but one in bytes: 256 MiB of 1 KiB rows is 262,144 of them; 10^9 such rows on
    # 2 lanes take 1,908 rounds of 262,055 rows (even), not 1,907 of 262,144 and a short one
    assert opd.auto_slice_rows(10**9, 2, row_bytes=1024) == 262_055
    assert opd.auto_slice_rows(4_000_000, 2, row_bytes=100) == 250_000  # within: 8 rounds
    # 20 M rows of 500 bytes, 5 GB a lane: 19 rounds of 526,316 rows (263 MB each)
    assert opd.auto_slice_rows(20_000_000, 2, row_bytes=500) == 526_316
    assert opd.auto_slice_rows(1000, 2, row_bytes=8192) == 32_768
    assert opd.auto_slice_rows(1000, 2, row_bytes=2**30) == 1


def test_auto_rounds_grow_through_each_pass():
    # long enough for the rule to leave its floor: a first slice of 66,536 rows a lane
    # (8 rounds' worth), rounded up to whole mini-batches of 7: 66,542; then each round
    # a lane trains as many rows as it trained before it in the pass: 4 rounds, not 8.
    # Rows of one entry keep the run short.
    n = 8 * 2 * 66536
    sizes = [n // 8] * 8
    rng = np.random.default_rng(3)
    X = sp.csr_matrix((np.ones(n), rng.integers(0, 50, n), np.arange(n + 1)), shape=(n, 50))
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    rounds = []
    auto = opd.fit(PGSClassifier(sigma=1e-3, batch_size=7), dask_rows(X, sizes), y,
                   classes=[-1, 1], n_lanes=2, passes=2,
                   callback=lambda info: rounds.append(info["rows"]))
    per_lane = [66542, 66542, 133084, 266120]  # the last: what is left of n / 2
    assert rounds == [2 * r for r in per_lane] * 2
    # the yardstick: one call of partial_fit per round, over the round's rows of each lane
    # as a partition of their own, with a slice that holds them
    lanes = lane_rows(sizes, 2)
    chained = PGSClassifier(sigma=1e-3, batch_size=7)
    for _ in range(2):
        start = 0
        for r in per_lane:
            rows = np.concatenate([lane[start:start + r] for lane in lanes])
            chained = opd.partial_fit(chained, dask_rows(X[rows], [r, r]), y[rows],
                                      classes=[-1, 1], n_lanes=2, slice_rows=r)
            start += r
    np.testing.assert_array_equal(auto.coef_, chained.coef_)
    np.testing.assert_array_equal(auto.intercept_, chained.intercept_)
    assert auto.t_ == chained.t_


def test_threads_bound_only_what_reading_adds_to_blocks_in_memory(monkeypatch):
    # On threads, blocks that the array's graph holds (made of arrays in memory, or
    # persisted) are trained where they lie: a slice of them holds only the labels and
    # weights reading adds, 16 bytes a row, and the bound counts those. A 50,000-byte
    # budget is 284 rows of the 176 bytes of a whole row, but 3,125 of 16 bytes.
    monkeypatch.setattr(slices, "SLICE_BYTES_MAX", 50_000)
    rng = np.random.default_rng(5)
    X = rng.standard_normal((8000, 20))
    y = np.where(X[:, 0] + 0.3 * rng.standard_normal(8000) > 0, 1.0, -1.0)

    def made(block):  # a task that makes a block: its rows are new memory
        return block.copy()

    in_memory = da.from_array(X, chunks=(500, 20))
    by_tasks = da.concatenate([
        da.from_delayed(dask.delayed(made)(X[i:i + 500]), shape=(500, 20), dtype=float)
        for i in range(0, 8000, 500)])

    def rounds_of(dX, **kw):
        rounds = []
        est = opd.fit(PGSClassifier(sigma=1e-3, batch_size=kw.pop("batch_size", 1)), dX,
                      y, n_lanes=2, callback=lambda info: rounds.append(info["rows"]), **kw)
        return rounds, est

    held, auto = rounds_of(in_memory)
    assert held == [2 * 3125, 8000 - 2 * 3125]
    given = opd.fit(PGSClassifier(sigma=1e-3), in_memory, y, n_lanes=2, slice_rows=3125)
    np.testing.assert_array_equal(auto.coef_, given.coef_)
    assert rounds_of(by_tasks.persist(scheduler="threads"))[0] == held
    monkeypatch.setattr(slices, "SLICE_BYTES_MAX", 16 * 1000)
    assert rounds_of(in_memory)[0] == [2000] * 4
    monkeypatch.setattr(slices, "SLICE_BYTES_MAX", 50_000)
    # blocks that tasks make, or that reading copies (float32 rows converted, a shuffled
    # slice, mini-batches that may straddle blocks) hold their whole rows: 284 a slice
    for dX, kw in ((by_tasks, {}), (in_memory.astype(np.float32).persist(scheduler="threads"), {}),
                   (in_memory, dict(shuffle=True)), (in_memory, dict(batch_size=4))):
        rounds = rounds_of(dX, **kw)[0]
        assert len(rounds) > 8 and max(rounds) <= 2 * 284, (kw, rounds)


def test_held_value_follows_aliases_to_arrays_the_graph_holds():
    X = np.arange(12.0).reshape(6, 2)
    made = da.from_delayed(dask.delayed(np.ones)((3, 2)), shape=(3, 2), dtype=float)
    for dX, held in ((da.from_array(X, chunks=(3, 2)), True),
                     (da.concatenate([da.from_array(X[:3]), da.from_array(X[3:])]), True),
                     (made, False), (made.persist(scheduler="threads"), True),
                     (da.from_array(X, chunks=(3, 2)) * 2, False)):
        graph = dict(dX.__dask_graph__())
        values = [backends.held_value(graph, key) for key in backends.row_block_keys(dX)]
        assert all((v is not None) == held for v in values), dX
        if held:
            np.testing.assert_array_equal(np.vstack(values), dX.compute())
    assert backends.held_value({"a": "b", "b": "a"}, "a") is None  # a cycle ends


def test_threads_start_the_lanes_before_the_blocks_read_ahead(monkeypatch):
    # Each round's graph holds its lanes, their merge and the next round's block reads.
    # Were a read to start first, both threads could be reading while no lane ran, and
    # the faster lane would idle at the round's end. dask.order ranks them by the
    # graph's shape (and put the reads first in some rounds of bench/bench_dask.py's
    # stream); here it ranks every read first. Witness: a user's Dask callback, which
    # must still see every task.
    import dask.local
    from dask.callbacks import Callback

    def reads_first(dsk):
        keys = sorted(dsk, key=lambda k: (str(k).startswith("onlinepgs-"), str(k)))
        return {k: i for i, k in enumerate(keys)}

    monkeypatch.setattr(dask.local, "order", reads_first)
    rng = np.random.default_rng(5)
    n = 32 * 500
    X = sp.csr_matrix(rng.random((n, 30)) * (rng.random((n, 30)) < 0.2))
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    graphs = []

    def start_state(dsk, state):
        graphs.append([])

    def pretask(key, dsk, state):
        # a submitted call's task calls _call_opaque(func, ...): its function's name
        task = dsk[key]
        graphs[-1].append(str(key).startswith("onlinepgs-") and getattr(
            task, "args", task[1:] if isinstance(task, tuple) else None)[0].__name__)

    with Callback(start_state=start_state, pretask=pretask):
        got = opd.fit(PGSClassifier(sigma=1e-4), dask_rows(X, [500] * 32), y,
                      classes=[-1, 1], n_lanes=2, slice_rows=1000)
    # 8 rounds of 2 lanes, two blocks each, and the merge of each once both lanes are
    # done; the first round's lanes wait for their blocks, the others' were read in
    # the round before, beside its lanes
    for g in graphs:
        assert [name for name in g if name] == ["train_slice"] * 2 + ["merge_task"], g
    ahead = [g for g in graphs[1:] if not all(g)]
    assert len(ahead) == 6
    for started in ahead:
        assert started[:2] == ["train_slice"] * 2, started
    monkeypatch.undo()  # the order changes no result
    want = opd.fit(PGSClassifier(sigma=1e-4), dask_rows(X, [500] * 32), y,
                   classes=[-1, 1], n_lanes=2, slice_rows=1000)
    np.testing.assert_array_equal(got.coef_, want.coef_)


FUZZ_BASE = "".join(f"{(-1) ** i} {1 + i % 7}:0.{i % 10}5 {9 + i % 5}:1\n" for i in range(120))


def test_a_plain_file_s_line_that_starts_like_gzip_is_a_bad_line_in_dask_too(tmp_path):
    """The fuzzer's example (issue 50): gzip's magic bytes at the start of a line of a
    plain file are a bad label to both readers; the yardstick of a Dask lane's error
    read that line alone, where the magic made it a truncated gzip stream."""
    data = mutate(FUZZ_BASE.encode(), [("insert", 1.0, b"\x1f\x8b"), ("insert", 0.5, b"\x00")])
    path = tmp_path / "fuzz.svm"
    path.write_bytes(data)
    with pytest.raises(SvmlightError, match=r"fuzz.svm:(61:1: bad label '1\\x00'|121:1: "
                                            r"bad label '\\x1f\\x8b')"):
        opd.fit(PGSClassifier(), [str(path)], zero_based=False, classes=[-1, 1],
                block_rows=20, n_lanes=2, n_features=None)
    test_fuzz_mutated_file_in_the_dask_source.hypothesis.inner_test(
        [("insert", 1.0, b"\x1f\x8b"), ("insert", 0.5, b"\x00")], "plain")


@fuzzer(40, MUTATIONS, st.sampled_from(["plain", "gz"]))
def test_fuzz_mutated_file_in_the_dask_source(mutations, kind):
    """Dask's text source over damaged files (byte ranges of a plain file; a gzip file
    whole): a file the single-process reader refuses is refused with the same message
    (file, line, column), or for a plain file that of another bad line (its lanes read
    in parallel); one it reads trains on every row; or a line's label outside the
    classes is refused at that line (Dask checks labels as it reads); nothing else."""
    import tempfile

    data = mutate(FUZZ_BASE.encode(), mutations)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "fuzz.svm" + (".gz" if kind == "gz" else ""))
        with open(path, "wb") as f:
            f.write(gzip.compress(data) if kind == "gz" else data)
        try:
            X, y = load_svmlight(path, zero_based=False)
            expected = None
        except SvmlightError as exc:
            expected = str(exc)
        try:
            est = opd.fit(PGSClassifier(), [path], zero_based=False, classes=[-1, 1],
                          block_rows=20, n_lanes=2, n_features=None)
        except SvmlightError as exc:
            assert expected is not None
            if kind == "gz" or str(exc) == expected:  # a gzip file is read in order
                return
            # a plain file's byte ranges are read in parallel: the error may be another
            # bad line's than the first; the same as that line alone gives, read as the
            # plain text it is in the file (after a good line: alone, a line that starts
            # with gzip's magic bytes would be sniffed as a gzip stream)
            line = data.split(b"\n")[exc.line - 1] + b"\n"
            with pytest.raises(SvmlightError) as alone:
                load_svmlight(io.BytesIO(b"1 1:1\n" + line), zero_based=False)
            assert (str(exc).replace(f"{path}:{exc.line}:", "", 1)
                    == str(alone.value).replace("<stream>:2:", "", 1))
            return
        except ValueError as exc:
            # a label outside the classes, named at its line (met before a later bad
            # line, or in a file the reader takes whole): that line's label says so
            found = re.fullmatch(r"label (\S+) at (.+):(\d+) is not one of the classes "
                                 r"\[-1, 1\]", str(exc))
            assert found and found.group(2) == path, str(exc)
            label = data.split(b"\n")[int(found.group(3)) - 1].split()[0]
            assert float(label) == float(found.group(1)) and float(label) not in (-1, 1)
            return
    assert expected is None and np.isin(y, [-1, 1]).all()
    assert est.online_stats_["n_examples"] == X.shape[0]


def test_a_block_whose_weights_add_up_beyond_the_double_range_is_refused_at_its_row():
    """Two importance weights of 1e308 in one block: their sum overflows in the lane's
    state (it diverged with the reason "the loss's derivative overflowed"); the block is
    refused naming its partition, row and weight, as partial_fit refuses it."""
    X, y = make_data(m=40, n=4)
    sw = np.ones(40)
    sw[[3, 5]] = 1e308
    with pytest.raises(ValueError, match=r"^partition 0, row 5 .*the sample weights add up "
                                         r"beyond the double range \(1.8e308\) with this "
                                         r"row's weight 1e\+308"):
        opd.fit(PGSClassifier(sigma=0.1), dask_rows(X, [20, 20]), y, sample_weight=sw,
                classes=[-1, 1], n_lanes=1)
