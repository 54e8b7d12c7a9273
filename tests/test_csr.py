"""The command's CSR chunk (onlinepgs._csr.CSR) against scipy.sparse, the yardstick: every
operation the command's path uses gives scipy's values, bit for bit where scipy sums
in stored order; and `csr` gives scipy's matrices outside `light_chunks()`."""
import numpy as np
import pytest
import scipy.sparse as sp

from onlinepgs import _csr
from onlinepgs._csr import CSR, csr, issparse, light_chunks, vstack, widen


def _random(rows, cols, density, seed):
    S = sp.random(rows, cols, density=density, format="csr", random_state=seed)
    S.data = np.random.default_rng(seed).standard_normal(S.nnz)
    return S


def _light(S):
    return CSR(S.data, S.indices, S.indptr, S.shape, S.has_canonical_format)


def _same(C, S):
    assert isinstance(C, CSR) and C.shape == S.shape and C.nnz == S.nnz
    np.testing.assert_array_equal(C.indptr, S.indptr)
    np.testing.assert_array_equal(C.indices, S.indices)
    np.testing.assert_array_equal(C.data, S.data)


def test_csr_is_scipy_outside_light_chunks_and_light_inside():
    data, indices, indptr = np.array([1.0, 2.0]), np.array([0, 3], np.int32), np.array(
        [0, 1, 2], np.int32)
    S = csr(data, indices, indptr, (2, 5), canonical=True)
    assert sp.issparse(S) and S.has_canonical_format and S.shape == (2, 5)
    with light_chunks():
        C = csr(data, indices, indptr, (2, 5), canonical=True)
        with light_chunks(False):  # nested: SDCA's and Dask's paths inside the command
            assert sp.issparse(csr(data, indices, indptr, (2, 5)))
        assert isinstance(csr(data, indices, indptr, (2, 5)), CSR)
    assert sp.issparse(csr(data, indices, indptr, (2, 5)))  # restored
    assert isinstance(C, CSR) and C.has_canonical_format and C.data is data
    np.testing.assert_array_equal(C.to_scipy().toarray(), S.toarray())
    assert issparse(C) and issparse(S) and not issparse(S.toarray())


@pytest.mark.parametrize("key", [3, -1, slice(2, 9), slice(None), slice(5, 2), slice(1, 20, 3),
                                 [4, 0, 4, 19], np.array([], int), "mask"])
def test_row_selection_is_scipys(key):
    S = _random(20, 30, 0.2, 0)
    keep = np.ones(S.nnz, bool)
    keep[S.indptr[3]:S.indptr[4]] = False  # row 3 empty
    S = sp.csr_matrix((S.data[keep], S.indices[keep],
                       S.indptr - np.minimum(S.indptr, S.indptr[4]) + np.minimum(
                           S.indptr, S.indptr[3])), shape=S.shape)
    assert S.indptr[3] == S.indptr[4]
    if isinstance(key, str):
        key = np.arange(20) % 3 == 1
    want = S[key]
    got = _light(S)[key]
    if isinstance(key, (int, np.integer)):
        want = sp.csr_matrix(want)
    _same(got, want.tocsr())


def test_selection_of_a_selection_and_a_bad_key():
    S = _random(12, 8, 0.4, 1)
    _same(_light(S)[2:10][[0, 7, 3]], S[2:10][[0, 7, 3]])
    with pytest.raises(IndexError):
        _light(S)[12]
    with pytest.raises(IndexError):
        _light(S)[[0, 12]]
    with pytest.raises(IndexError):
        _light(S)[1:3, 2:]  # columns only as X[:, :n]


@pytest.mark.parametrize("n", [0, 5, 8, 50])
def test_first_columns_are_scipys(n):
    S = _random(15, 8, 0.5, 2)
    _same(_light(S)[:, :n], S[:, :n])


@pytest.mark.parametrize("k", [None, 1, 4])
def test_products_are_scipys_bit_for_bit(k):
    S = _random(300, 200, 0.05, 3)
    rng = np.random.default_rng(4)
    W = rng.standard_normal((200,) if k is None else (200, k))
    U = rng.standard_normal((300,) if k is None else (300, k))
    C = _light(S)
    assert np.array_equal(C @ W, np.asarray(S @ W))
    assert np.array_equal(C.T @ U, np.asarray(S.T @ U))
    # a selection's products: its arrays are views with offsets of their own
    assert np.array_equal(C[100:250] @ W, np.asarray(S[100:250] @ W))
    assert np.array_equal(C[100:250].T @ U[100:250], np.asarray(S[100:250].T @ U[100:250]))
    with pytest.raises(ValueError, match="dimension mismatch"):
        C @ U


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("k", [None, 1, 20])
def test_compiled_products_sum_as_the_numpy_ones(index_dtype, k, monkeypatch):
    """The compiled products (`onlinepgs._core._products`) against `_sums` (NumPy's
    bincount, in stored order) and scipy, bit for bit: 32- and 64-bit indices, empty
    rows, a selection's offsets; W in Fortran order (a model's coef_.T) too; W that the
    compiled path does not take (float32) goes to `_sums`, with scipy's values too."""
    S = _random(400, 300, 0.03, 6)
    S[::7] = 0.0  # empty rows
    S.eliminate_zeros()
    C = CSR(S.data, S.indices.astype(index_dtype), S.indptr.astype(index_dtype), S.shape,
            True)
    rng = np.random.default_rng(7)
    W = rng.standard_normal((300,) if k is None else (300, k))
    U = rng.standard_normal((400,) if k is None else (400, k))
    compiled = [C @ W, C.T @ U, C[50:333] @ W, C[50:333].T @ U[50:333]]
    if k is not None:  # Fortran order: the same sums
        assert np.array_equal(C @ np.asfortranarray(W), compiled[0])
        assert np.array_equal(C.T @ np.asfortranarray(U), compiled[1])
    assert _csr._compiled(C, W) and _csr._compiled(C, U)
    monkeypatch.setattr(_csr, "_compiled", lambda X, W: False)
    plain = [C @ W, C.T @ U, C[50:333] @ W, C[50:333].T @ U[50:333]]
    scipys = [S @ W, S.T @ U, S[50:333] @ W, S[50:333].T @ U[50:333]]
    for a, b, c in zip(compiled, plain, scipys):
        assert a.shape == b.shape == np.asarray(c).shape
        assert np.array_equal(a, b) and np.array_equal(a, np.asarray(c))
    monkeypatch.undo()
    other = W.astype(np.float32)
    assert not _csr._compiled(C, other)
    assert np.allclose(C @ other, np.asarray(S @ other))


def test_sum_duplicates_adds_in_stored_order():
    """Against a plain accumulation row by row, column by column in stored order (scipy
    agrees but for the order of a long row's duplicates: its sort is not stable)."""
    rng = np.random.default_rng(5)
    rows, cols = 50, 9
    counts = rng.integers(0, 30, rows)
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    indices = rng.integers(0, cols, indptr[-1]).astype(np.int32)
    data = rng.standard_normal(indptr[-1])  # the order of the sums shows in the bits
    want_indptr, want_indices, want_data = [0], [], []
    for i in range(rows):
        sums = {}
        for k in range(indptr[i], indptr[i + 1]):
            sums[indices[k]] = sums.get(indices[k], 0.0) + data[k]
        want_indices += sorted(sums)
        want_data += [sums[j] for j in sorted(sums)]
        want_indptr.append(len(want_indices))
    C = CSR(data, indices, indptr, (rows, cols))
    C.sum_duplicates()
    assert C.has_canonical_format
    np.testing.assert_array_equal(C.indptr, want_indptr)
    np.testing.assert_array_equal(C.indices, want_indices)
    np.testing.assert_array_equal(C.data, want_data)
    S = sp.csr_matrix((data, indices, indptr), shape=(rows, cols))
    S.sum_duplicates()
    np.testing.assert_allclose(C.data, S.data, rtol=1e-14, atol=1e-15)


def test_vstack_and_widen_keep_the_kind():
    A, B = _random(7, 5, 0.5, 6), _random(4, 9, 0.5, 7)
    want = sp.vstack([widen(A, 9), B], format="csr")
    got = vstack([_light(A)[2:7], _light(B)])
    _same(got, sp.vstack([widen(A[2:7], 9), B], format="csr"))
    assert got.has_canonical_format
    assert sp.issparse(vstack([A, B])) and (vstack([A, B]) != want).nnz == 0
    assert isinstance(widen(_light(A), 12), CSR) and widen(_light(A), 12).shape == (7, 12)
    assert sp.issparse(widen(A, 12)) and widen(A, 12).shape == (7, 12)


@pytest.mark.parametrize("n_bits", [None, 4])
def test_a_stream_trains_bit_for_bit_as_on_scipy_chunks(tmp_path, n_bits):
    """The command's chunks and scipy's give the same model: the holdout's row
    selection, the race, a mini-batch joined across chunks (batch_size 3), columns
    folded into 2**n_bits (duplicates summed)."""
    from onlinepgs.pgs import PGSClassifierLearner
    from onlinepgs.streaming import train_stream

    rng = np.random.default_rng(8)
    X = sp.random(600, 40, density=0.2, format="csr", random_state=9)
    y = np.where(X @ rng.standard_normal(40) > 0, 1, -1)
    lines = []
    for i in range(X.shape[0]):
        a, b = X.indptr[i], X.indptr[i + 1]
        lines.append(" ".join([str(y[i])] + [f"{j + 1}:{v:.6g}" for j, v in
                                             zip(X.indices[a:b], X.data[a:b])]))
    path = tmp_path / "d.svm"
    path.write_text("\n".join(lines) + "\n")
    models = []
    for light in (False, True):
        est = PGSClassifierLearner(batch_size=3, n_bits=n_bits, random_state=0)
        with light_chunks(light):
            result = train_stream(est, str(path), chunk_rows=70, holdout_every=5)
        models.append((est.model_.coef, est.model_.intercept, result.holdout_loss))
    if n_bits is None:
        assert np.array_equal(models[0][0], models[1][0])
        assert np.array_equal(models[0][1], models[1][1]) and models[0][2] == models[1][2]
    else:  # folded columns' duplicates: scipy may add them in another order (last bit)
        np.testing.assert_allclose(models[0][0], models[1][0], rtol=1e-10)
        np.testing.assert_allclose(models[0][1], models[1][1], rtol=1e-10)
    assert _csr._light is False
