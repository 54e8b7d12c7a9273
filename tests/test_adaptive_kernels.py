"""The adaptive geometry's compiled kernels (onlinepgs/_core/_adaptive.pxd) against the
core's own arithmetic one entry at a time, bit for bit.

The kernels take two entries of a row (one problem), or two problems of an entry, in
one SSE2 register (onlinepgs/_core/_pair.pxd). Each lane does the IEEE operations of the
one-lane code in its order and a row's terms are summed in the row's order, so the state
after every row must be, to the last bit, the one this transcription in Python floats
(IEEE doubles: the same roundings) computes entry after entry: odd and even rows, a
feature's first value and later larger ones (its scale raised), explicit zeros, the first
step (sigma t = 0), l1's threshold, both forms, sample weights, several problems (an odd
count) and dense rows. tests/test_adaptive_core.py holds the same kernels to the
mathematical update (NumPy, 1e-12); this file holds them to their own roundings."""
import math

import numpy as np
import pytest
import scipy.sparse as sp

from onlinepgs._core import PGSState


def weight(f, sigma_t, thr):
    """The scaled weight of one (coordinate, problem)'s fields [lam, sq, stab, inv]."""
    lam, _, stab, _ = f
    a = abs(lam) - thr
    if not a > 0.0:
        return 0.0
    den = sigma_t + stab
    if not den > 0.0:
        return 0.0
    return math.copysign(a, lam) / den


def transcribe(entries, y, sw, *, K, sigma, eta, delta, l1, centered, loss):
    """The state's block after one pass over the rows, one entry at a time. entries: per
    row, its (coordinate, value) list, the intercept's (0, 1.0) last; block[j][c] =
    [lam, sq, stab, inv_scale]."""
    dim = 1 + max(j for row in entries for j, _ in row)
    block = [[[0.0, 0.0, 0.0, 0.0] for _ in range(K)] for _ in range(dim)]
    t = 0
    for row, label, w in zip(entries, y, sw):
        st, thr = sigma * t, l1 * t
        margins, xs, kept = [0.0] * K, [], []
        for j, x in row:
            ax, inv = abs(x), block[j][0][3]
            if ax > 0.0 and (inv == 0.0 or ax * inv > 1.0):  # the scale grows
                ratio = 0.0 if inv == 0.0 else 1.0 / (ax * inv)
                inv = 1.0 / ax
                for f in block[j]:
                    f[3] = inv
                    if ratio > 0.0 and f[1] > 0.0:  # the same gradients in the new scale
                        den = st + f[2]
                        f[1] = f[1] * (ratio * ratio)
                        f[2] = (delta + math.sqrt(f[1])) * (1.0 / eta)
                        a = abs(f[0]) - thr
                        if a > 0.0 and den > 0.0:  # the weight it had
                            f[0] = math.copysign(thr + a * ((st + f[2]) / den), f[0])
            xs.append(x * inv)
            kept.append([weight(block[j][c], st, thr) for c in range(K)])
            for c in range(K):
                margins[c] += kept[-1][c] * xs[-1]
        for c in range(K):
            yc = (1.0 if c == label else -1.0) if K > 1 else label
            if loss == "squared":
                dl = 2.0 * (margins[c] - yc)
            else:  # squared_hinge
                yz = yc * margins[c]
                dl = -2.0 * yc * (1.0 - yz) if yz < 1.0 else 0.0
            cf = dl * w * 1.0
            if cf == 0.0:
                continue
            wk = w * 1.0
            dlk = cf / wk
            for (j, _), x_s, v in zip(row, xs, kept):
                f = block[j][c]
                d = dlk * x_s
                sq = f[1] + wk * (d * d)
                stab = (delta + math.sqrt(sq)) * (1.0 / eta)
                if centered:
                    f[0] = f[0] - (cf * x_s - (stab - f[2]) * v[c])
                else:
                    f[0] = f[0] - cf * x_s
                f[1], f[2] = sq, stab
        t += 1
    return np.array(block)


def stream(m=70, n=9, seed=0):
    """Rows of 0..n non-zeros (odd and even counts) on scales from 1e-3 to 1e3, larger
    values arriving late, an explicit zero now and then; importance weights in [0.25, 1]
    (a row weighing more takes the invariant rest after its first copy, `_ad_rest`,
    which tests/test_adaptive_core.py holds to the reference)."""
    rng = np.random.RandomState(seed)
    X = rng.randn(m, n) * (rng.rand(m, n) < 0.5) * 10.0 ** rng.uniform(-3, 3, n)
    X[m // 2:] *= rng.uniform(1.0, 3.0, (m - m // 2, n))
    X[3] = 0.0  # a row without an entry
    score = X[:, :3] @ np.array([1.0, -1.0, 0.5]) / np.abs(X[:, :3]).max(axis=0).sum()
    labels = np.digitize(score, np.quantile(score, [1 / 3, 2 / 3])).astype(float)
    return X, np.where(score > 0, 1.0, -1.0), labels, rng.uniform(0.25, 1.0, m)


def csr_with_zeros(X, seed=0):
    """X as CSR, with some of its zeros stored as explicit entries."""
    rng = np.random.RandomState(seed)
    mask = (X != 0) | (rng.rand(*X.shape) < 0.1)
    rows, cols = np.nonzero(mask)
    return sp.csr_matrix((X[rows, cols], (rows, cols)), shape=X.shape)


@pytest.mark.parametrize("centered", [True, False])
@pytest.mark.parametrize("l1", [0.0, 3e-3])
@pytest.mark.parametrize("K, dense", [(1, False), (3, False), (1, True)])
def test_the_kernels_are_one_entry_at_a_time_bit_for_bit(centered, l1, K, dense):
    X, y, labels, sw = stream(seed=K + 2 * dense)
    m, n = X.shape
    loss = "squared" if K == 1 and not l1 else "squared_hinge"
    target = labels if K > 1 else (y if loss == "squared_hinge" else y * 2.0 + 0.5)
    config = dict(sigma=1e-3, eta=0.7, delta=0.05, l1=l1, centered=centered, loss=loss)
    state = PGSState(p=2.0, geometry="adaptive", n_features=n, n_problems=K,
                     multiclass=K > 1, **config)
    order = np.arange(m, dtype=np.int64)
    classifier = loss != "squared"
    if dense:
        state.run(np.ascontiguousarray(X).ravel(), None, None, n, target, sw, order,
                  classifier)
        entries = [[(j + 1, float(x)) for j, x in enumerate(r)] + [(0, 1.0)] for r in X]
    else:
        Xc = csr_with_zeros(X)
        assert Xc.nnz > np.count_nonzero(X)  # explicit zeros are entries
        state.run(Xc.data, Xc.indices, Xc.indptr.astype(np.int64), n, target, sw, order,
                  classifier)
        entries = [[(int(j) + 1, float(x)) for j, x in zip(Xc.indices[a:b], Xc.data[a:b])]
                   + [(0, 1.0)] for a, b in zip(Xc.indptr[:-1], Xc.indptr[1:])]
    want = transcribe(entries, target, sw, K=K, **config)
    got = np.asarray(state.to_dict()["block_a"]).reshape(want.shape)
    assert np.array_equal(got.view(np.uint64), want.view(np.uint64))
    assert state.t == m
