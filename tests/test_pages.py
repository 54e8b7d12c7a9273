"""The pages a state's block is mapped in (onlinepgs/_core/_pages.pyx): the rule that
picks small pages for a wide block the first rows reach sparsely, against a plain NumPy
count; the copy that leaves untouched pages unmapped, against a whole copy; the search
for a block's non-zero rows (model files) against NumPy's; and the learners, whose
models do not depend on the pages (bit for bit), while a wide sparse state maps only
the pages its coordinates fall in."""
import resource

import numpy as np
import pytest
import scipy.sparse as sp

import onlinepgs._columns_seen as columns_seen
from onlinepgs import PGSClassifier
from onlinepgs import pgs as pgs_module
from onlinepgs._core import PGSState
from onlinepgs._core._pages import (HUGE_PAGE, SMALL_PAGE, SMALL_PAGES_PAY,
                                    cache_aligned_zeros, copy_mapped, mapped_pages,
                                    first_nonfinite, mark_nonzero_rows, nonzero_rows,
                                    small_pages_pay)

HAVE_PAGEMAP = mapped_pages(np.zeros(1)) is not None
needs_pagemap = pytest.mark.skipif(not HAVE_PAGEMAP, reason="no /proc/self/pagemap here")


def rule_by_numpy(cols, n_coords, coord_bytes, offset=0):
    cols = np.asarray(cols, dtype=np.int64) + offset
    cols = cols[(cols >= 0) & (cols < n_coords)]
    if n_coords * coord_bytes < HUGE_PAGE or cols.size == 0:
        return False
    pages = np.unique(cols * coord_bytes // SMALL_PAGE).size
    regions = np.unique(cols * coord_bytes // HUGE_PAGE).size
    return pages < SMALL_PAGES_PAY * regions


@pytest.mark.parametrize("seed", range(6))
def test_the_rule_counts_pages_and_regions_as_numpy_does(seed):
    rng = np.random.default_rng(seed)
    n_coords = int(rng.choice([10_000, 70_000, 2_000_000, 50_000_000]))
    coord_bytes = int(rng.choice([8, 32, 320]))
    spread = int(rng.choice([1, 7, 1_000, 100_000]))
    cols = rng.integers(0, n_coords // spread + 1, size=int(rng.integers(1, 40_000))) * spread
    cols = np.concatenate([cols, [-3, n_coords + 5]])  # outside: not counted
    for offset in (0, 1):
        assert small_pages_pay(cols, n_coords, coord_bytes, offset) == rule_by_numpy(
            cols, n_coords, coord_bytes, offset)


def test_the_rule_at_its_edges():
    # below a huge page a block never takes one; no column reached: nothing to decide
    assert not small_pages_pay(np.array([0]), HUGE_PAGE // 8 - 1, 8)
    assert not small_pages_pay(np.array([], dtype=np.int64), 10**8, 32)
    # one column a page, every 2 MB region reached by SMALL_PAGES_PAY - 1 and by as many
    # pages as pay: small pages below the break-even, huge ones at it
    per_page, per_region = SMALL_PAGE // 32, HUGE_PAGE // 32
    for n, small in ((SMALL_PAGES_PAY - 1, True), (SMALL_PAGES_PAY, False)):
        cols = (np.arange(50)[:, None] * per_region + np.arange(n) * per_page).ravel()
        assert small_pages_pay(cols, 50 * per_region, 32) is small


@needs_pagemap
@pytest.mark.parametrize("small", [False, True])
def test_a_copy_of_the_touched_pages_equals_the_whole_copy(small):
    rng = np.random.default_rng(1)
    n = 3_000_017  # not a whole number of pages
    source = cache_aligned_zeros((n,), True, small)
    at = rng.choice(n, size=300, replace=False)
    source[at] = rng.standard_normal(300)
    source[-1] = 5.0  # the last, partial page
    for read_first in (False, True):
        if read_first:
            assert source.sum() != 0.0  # a sweep maps the shared page of zeros
        target = cache_aligned_zeros((n + 100,), True, small)
        # memory the allocator gives back may be mapped already: the copy's own pages
        # are the difference (counted before the checks below read every page)
        before = int(mapped_pages(target).sum())
        copy_mapped(target, source)
        if small:
            # a page of the source written, copied where it lies in the target: its
            # bytes fall in one or two of the target's pages
            written = np.unique(
                (source.ctypes.data + 8 * np.append(at, n - 1)) // SMALL_PAGE).size
            assert int(mapped_pages(target).sum()) - before <= 2 * written
        assert np.array_equal(target[:n], source)
        assert not target[n:].any()


def test_a_copy_refuses_a_smaller_target():
    with pytest.raises(ValueError, match="target bytes"):
        copy_mapped(np.zeros(3), np.zeros(4))


def wide_rows(n_rows=600, width=2**22, used=400, seed=0):
    """Rows of a few hundred columns spread over a 2^22-column space (a hashed one),
    labels from a linear rule."""
    rng = np.random.default_rng(seed)
    columns = np.sort(rng.choice(width, size=used, replace=False))
    dense = sp.random(n_rows, used, density=0.05, random_state=seed, format="csr")
    X = sp.csr_matrix((dense.data * 3.0, columns[dense.indices], dense.indptr),
                      shape=(n_rows, width))
    y = np.where(dense @ rng.standard_normal(used) > 0, 1.0, -1.0)
    return X, y


@pytest.mark.parametrize("params", [
    dict(geometry="adaptive", iterate="last", radius=None),  # eta and sigma raced
    dict(sigma=1e-3, geometry="adaptive", iterate="last", radius=None, eta=0.5),
    dict(),  # the global default: sigma raced, the weighted average on the ball
], ids=["adaptive race", "adaptive fixed", "global race"])
def test_models_do_not_depend_on_the_pages(params, monkeypatch):
    # states over the width (a learner over the columns seen, onlinepgs._columns_seen,
    # holds a narrow block): the expanded ones, the event path's, Dask's lanes'
    monkeypatch.setattr(columns_seen, "MIN_WIDTH", 2**62)
    X, y = wide_rows()
    chunks = [(X[:200], y[:200]), (X[200:], y[200:])]
    wider = sp.hstack([X[200:], sp.csr_matrix((400, 5))]).tocsr()  # grows the state

    def train():
        est = PGSClassifier(random_state=0, max_model_bytes=None, **params)
        est.partial_fit(*chunks[0], classes=[-1.0, 1.0])
        est.partial_fit(*chunks[1])
        est.partial_fit(wider, y[200:])
        return est

    small = train()
    if HAVE_PAGEMAP:
        # the state maps the pages its 400 columns fall in (and the intercept's), not
        # the 2^22 columns' width: the race's forks and the growth copied no more
        # (counted before coef_)
        assert mapped_pages(small._state.block_a).sum() <= 400 + 8
    monkeypatch.setattr(pgs_module, "small_pages_pay", lambda *args, **kwargs: False)
    huge = train()
    assert small._state.small_pages and not huge._state.small_pages
    assert np.array_equal(small.coef_, huge.coef_)
    assert np.array_equal(small.intercept_, huge.intercept_)
    assert small.sigma_ == huge.sigma_


def test_a_dense_first_call_keeps_huge_pages():
    X, y = wide_rows(n_rows=400, width=60_000, used=60_000)
    est = PGSClassifier(geometry="adaptive", iterate="last", radius=None, random_state=0)
    est.partial_fit(X, y, classes=[-1.0, 1.0])
    assert not est._state.small_pages


def nonzero_rows_by_numpy(values):
    rows = values.reshape(values.shape[0], -1)
    return (rows.view(f"u{rows.itemsize}") != 0).any(axis=1)


@pytest.mark.parametrize("row_doubles", [1, 4, 80, 800])  # 8 B to 6.4 KB a row
@pytest.mark.parametrize("small", [False, True])
def test_the_nonzero_rows_are_numpys(row_doubles, small):
    rng = np.random.default_rng(row_doubles)
    dim = 3_000_000 // row_doubles + 7
    values = cache_aligned_zeros((dim, row_doubles), True, small)
    at = rng.choice(dim, size=200, replace=False)
    values[at, rng.integers(0, row_doubles, size=200)] = rng.choice(
        [1.0, -0.0, np.nan, 1e-300], size=200)
    values[-1, -1] = -0.0  # the last row's last byte
    other = np.zeros((dim, 2), dtype=np.int64)  # a second array of the rows (snapv_a's)
    other[rng.choice(dim, size=50, replace=False), 1] = 7
    for _ in range(2):  # as written, then with every page read (the page of zeros)
        kept = np.zeros(dim, dtype=np.uint8)
        mark_nonzero_rows(values, kept)
        assert np.array_equal(kept.astype(bool), nonzero_rows_by_numpy(values))
        rows = nonzero_rows([values, other], dim)
        assert rows.dtype == np.int64 and np.array_equal(rows, np.flatnonzero(
            nonzero_rows_by_numpy(values) | nonzero_rows_by_numpy(other)))
    with pytest.raises(ValueError, match="rows"):
        mark_nonzero_rows(np.zeros(7, dtype=np.uint8), np.zeros(2, dtype=np.uint8))


@needs_pagemap
def test_a_wide_block_is_searched_in_its_pages_only():
    values = cache_aligned_zeros((50_000_000, 2), True, True)  # 800 MB of address space
    values[::1_000_000] = 1.0
    before = int(mapped_pages(values).sum())
    kept = np.zeros(50_000_000, dtype=np.uint8)
    mark_nonzero_rows(values, kept)
    assert int(mapped_pages(values).sum()) == before  # nothing else read
    assert np.array_equal(np.flatnonzero(kept), np.arange(0, 50_000_000, 1_000_000))
    assert np.array_equal(nonzero_rows([values], 50_000_000),
                          np.arange(0, 50_000_000, 1_000_000))
    assert int(mapped_pages(values).sum()) == before
    assert nonzero_rows([values[:0]], 0).shape == (0,)


def test_without_a_page_map_every_page_is_read_and_copied(monkeypatch):
    from onlinepgs._core import _pages
    monkeypatch.setattr(_pages, "PAGEMAP", "/nonexistent/pagemap")  # not Linux, say
    source = cache_aligned_zeros((600_001, 3), True, True)
    source[::997, 1] = -0.0
    assert mapped_pages(source) is None
    target = cache_aligned_zeros((600_001, 3), True, True)
    copy_mapped(target, source)
    assert target.tobytes() == source.tobytes()
    kept = np.zeros(600_001, dtype=np.uint8)
    mark_nonzero_rows(source, kept)
    assert np.array_equal(kept.astype(bool), nonzero_rows_by_numpy(source))
    assert np.array_equal(nonzero_rows([source], 600_001), np.flatnonzero(kept))


@pytest.mark.parametrize("small", [False, True])
def test_the_first_nonfinite_element_is_numpys(small):
    rng = np.random.default_rng(3)
    values = cache_aligned_zeros((1_000_003, 4), True, small)
    values[rng.choice(1_000_003, 500, replace=False)] = rng.standard_normal((500, 4))
    assert first_nonfinite(values) == -1
    for bad in (np.inf, -np.inf, np.nan):
        at = rng.choice(values.size, 3, replace=False)
        values.flat[at] = bad
        assert first_nonfinite(values) == np.flatnonzero(~np.isfinite(values))[0] == at.min()
        values.flat[at] = 0.0
    with pytest.raises(ValueError, match="float64"):
        first_nonfinite(np.zeros(3, dtype=np.float32))


@needs_pagemap
def test_a_pass_writes_each_new_page_of_a_small_page_block_once():
    """A step reads a coordinate's fields before it writes them: in a block in small
    pages, a page first read is the kernel's shared page of zeros, and the write after
    it faults a second time (and flushes the TLBs of the process's other processors).
    A pass writes each new page its rows reach first (_written.pxd): one fault a page,
    counted by the kernel, and the same state as without (a block in huge pages)."""
    n_pages, per_row = 3_000, 10
    width = n_pages * 128  # the adaptive geometry's 32-byte rows: 128 to a 4 KB page
    cols = np.arange(n_pages) * 128 + 127  # coordinate c + 1: one a page
    X = sp.csr_matrix((np.ones(n_pages), cols, np.arange(0, n_pages + 1, per_row)),
                      shape=(n_pages // per_row, width))
    y = np.where(np.arange(X.shape[0]) % 2 == 0, 1.0, -1.0)
    st = PGSState(geometry="adaptive", radius=None, sigma=1e-3, n_features=width,
                  small_pages=True)
    order = np.arange(X.shape[0], dtype=np.int64)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    st.run(X.data, X.indices, X.indptr, width, y, np.ones(X.shape[0]), order, True)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    assert faults < 1.2 * n_pages, faults  # two a page without the first writes
    huge = PGSState(geometry="adaptive", radius=None, sigma=1e-3, n_features=width)
    huge.run(X.data, X.indices, X.indptr, width, y, np.ones(X.shape[0]), order, True)
    assert st.weights().tobytes() == huge.weights().tobytes()
    assert np.asarray(st.block_a).tobytes() == np.asarray(huge.block_a).tobytes()
