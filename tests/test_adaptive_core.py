"""The compiled adaptive geometry (onlinepgs/_core/_adaptive.pxd, `PGSState(geometry=
"adaptive")`) against its NumPy transcription (tests/reference.py: `reference_adaptive`,
every coordinate every step): the weights after every row, the progressive loss, for
both forms (AdaGrad-RDA and the centered FTRL-Proximal), l1, several losses, one-vs-rest
problems, sample weights, sparse and dense rows; then what the lazy state must keep:
chunking, a copy and a file continue bit for bit, a column multiplied by c changes no
prediction, the scores read at a row's coordinates are the model's."""
import numpy as np
import pytest
import scipy.sparse as sp

from onlinepgs._core import PGSState
from onlinepgs._options import OptionError
from reference import reference_adaptive


def stream(m=160, n=12, seed=0):
    """Rows whose columns live on scales from 1e-3 to 1e3 (a column's largest value
    arriving late, so scales grow between touches), labels from a few columns, a class
    label of three classes, importance weights in [0.5, 2]."""
    rng = np.random.RandomState(seed)
    X = rng.randn(m, n) * (rng.rand(m, n) < 0.4)
    X *= 10.0 ** rng.uniform(-3, 3, n)
    X[m // 2:, 3] *= 50.0
    Xs = X / np.maximum(np.max(np.abs(X), axis=0), 1e-300)
    score = Xs[:, :4] @ np.array([3.0, -2.0, 1.5, 2.0]) + 0.3 * rng.randn(m)
    y = np.where(score > 0, 1.0, -1.0)
    labels = np.digitize(score, np.quantile(score, [1 / 3, 2 / 3])).astype(float)
    return X, y, labels, score, rng.uniform(0.5, 2.0, m)


LOSSES = ["logistic", "hinge", "squared_hinge", "smooth_hinge", "squared", "absolute",
          "huber", "epsilon_insensitive"]
REGRESSION = ("squared", "absolute", "huber", "epsilon_insensitive")


def heavy_weights(m, seed=0):
    """Importance weights of 1, 0.5, 3, 1e3 and 1e6, mixed."""
    return np.random.RandomState(seed).choice([1.0, 0.5, 3.0, 1e3, 1e6], m)


def fresh(n, **kw):
    config = dict(p=2.0, sigma=1e-3, loss="logistic", geometry="adaptive", eta=0.5,
                  n_features=n)
    config.update(kw)
    return PGSState(**config)


def run(state, X, y, sw, rows, classifier=True, dense=False):
    order = np.asarray(rows, dtype=np.int64)
    if dense:
        Xd = np.ascontiguousarray(X, dtype=float)
        state.run(Xd.ravel(), None, None, X.shape[1], y, sw, order, classifier)
    else:
        Xc = sp.csr_matrix(X)
        state.run(Xc.data, Xc.indices, Xc.indptr.astype(np.int64), X.shape[1], y, sw,
                  order, classifier)


def with_intercept(X, scaling=1.0):
    return np.hstack([np.full((X.shape[0], 1), scaling), X])


@pytest.mark.parametrize("centered", [False, True])
@pytest.mark.parametrize("l1", [0.0, 2e-3])
@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("weights", ["ones", "mild", "heavy"])
@pytest.mark.parametrize("dense", [False, True])
def test_binary_and_regression_rows_follow_the_transcription(centered, l1, loss, weights,
                                                             dense):
    """Row by row: after each of the first rows and at the end, the weights equal the
    transcription's iterate to 1e-12 (relative to the largest), and so does the
    progressive loss; the intercept is the transcription's constant column. Importance
    weights of 1, in [0.5, 2], or up to 1e6 (`heavy_weights`: the invariant update of
    rows above 1, every scalar loss)."""
    X, y, _, score, sw = stream()
    classifier = loss not in REGRESSION
    target = y if classifier else score
    sw = dict(ones=np.ones(len(y)), mild=sw, heavy=heavy_weights(len(y)))[weights]
    m, n = X.shape
    its, stats = reference_adaptive(with_intercept(X), target, p=2.0, sigma=1e-3, loss=loss,
                                    eta=0.5, l1=l1, centered=centered, sample_weight=sw)
    state = fresh(n, loss=loss, l1=l1, centered=centered)
    Xi = with_intercept(X)
    final = stats["scales"][:, None]  # the transcription's iterates are in the final scales
    for i in range(m):
        run(state, X, target, sw, [i], classifier, dense)
        if i < 20 or i == m - 1:
            # the scaled weights v = w s, each at its own scales
            now = np.max(np.abs(Xi[:i + 1]), axis=0)[:, None]
            want = (its[i] * final).ravel()
            got = (state.weights() * now).ravel()
            np.testing.assert_allclose(got, want, rtol=0,
                                       atol=1e-12 * max(np.max(np.abs(want)), 1e-300))
    got_loss = state.stats_dict()["progressive_loss"]
    assert abs(got_loss - stats["progressive_loss"]) <= 1e-12 * stats["progressive_loss"]


@pytest.mark.parametrize("centered", [False, True])
@pytest.mark.parametrize("l1", [0.0, 2e-3])
@pytest.mark.parametrize("loss", ["logistic", "squared"])
@pytest.mark.parametrize("batch_size", [2, 7])
@pytest.mark.parametrize("dense", [False, True])
def test_steps_of_several_rows_follow_the_transcription(centered, l1, loss, batch_size,
                                                        dense):
    """batch_size rows a step (160 rows: a last short step of 6 rows at 7): every row of a
    step raises its scales before the step's margins, which are all at its start, and the
    step adds the rows' weighted mean gradient and squares (importance weights in
    [0.5, 2] and up to 1e6, linear in a batch). After each of the first steps and at
    the end the weights equal the transcription's to 1e-12, and so does the progressive
    loss; the same rows in one call give the same bits as a call a step."""
    X, y, _, score, _ = stream()
    classifier = loss != "squared"
    target = y if classifier else score
    sw = heavy_weights(len(y), seed=2)
    m, n = X.shape
    its, stats = reference_adaptive(with_intercept(X), target, p=2.0, sigma=1e-3, loss=loss,
                                    eta=0.5, l1=l1, centered=centered, sample_weight=sw,
                                    batch_size=batch_size)
    state = fresh(n, loss=loss, l1=l1, centered=centered, batch_size=batch_size)
    Xi = with_intercept(X)
    final = stats["scales"][:, None]
    for step, start in enumerate(range(0, m, batch_size)):
        stop = min(start + batch_size, m)
        run(state, X, target, sw, range(start, stop), classifier, dense)
        if step < 12 or stop == m:
            now = np.max(np.abs(Xi[:stop]), axis=0)[:, None]
            want = (its[step] * final).ravel()
            got = (state.weights() * now).ravel()
            np.testing.assert_allclose(got, want, rtol=0,
                                       atol=1e-12 * max(np.max(np.abs(want)), 1e-300))
    got_loss = state.stats_dict()["progressive_loss"]
    assert abs(got_loss - stats["progressive_loss"]) <= 1e-12 * stats["progressive_loss"]
    whole = fresh(n, loss=loss, l1=l1, centered=centered, batch_size=batch_size)
    run(whole, X, target, sw, range(m), classifier, dense)
    np.testing.assert_array_equal(whole.weights(), state.weights())


@pytest.mark.parametrize("centered", [False, True])
@pytest.mark.parametrize("heavy", [False, True])
def test_one_vs_rest_problems_follow_the_transcription(centered, heavy):
    """Three classes, one problem each (+1 for its class, -1 else): each column of the
    weights is the transcription's, and every problem shares the feature's scale. With
    weights up to 1e6, each problem moves its own margin toward its own label."""
    X, _, labels, _, sw = stream(seed=1)
    if heavy:
        sw = heavy_weights(len(labels), seed=1)
    ovr_follows(X, labels, sw, centered=centered)
    ovr_follows(X, labels, sw, centered=centered, batch_size=4)  # and in steps of 4 rows


def ovr_follows(X, labels, sw, p=2.0, **kw):
    """Three classes, one problem each, at sigma 1e-4 and eta 0.8 (and kw: the form, a
    step's rows, forgetting): the state's weights after one call over the rows equal
    the transcription's last iterate to 1e-12, and its mistakes the transcription's."""
    Y = np.where(labels[:, None] == np.arange(3)[None, :], 1.0, -1.0)
    its, stats = reference_adaptive(with_intercept(X), Y, p=p, sigma=1e-4, loss="logistic",
                                    eta=0.8, sample_weight=sw, labels=labels, **kw)
    state = fresh(X.shape[1], p=p, sigma=1e-4, eta=0.8, n_problems=3, multiclass=True, **kw)
    run(state, X, labels, sw, range(len(labels)))
    np.testing.assert_allclose(state.weights(), its[-1], rtol=0,
                               atol=1e-12 * np.max(np.abs(its[-1])))
    assert state.n_mistakes == stats["progressive_mistakes"]


def test_a_copy_a_dict_and_chunks_continue_bit_for_bit():
    """One pass in one call, in three calls, and through a copy and the state's dict at
    the middle: the same bits (the scales and the accumulators are the state)."""
    X, y, _, _, sw = stream(seed=2)
    m, n = X.shape
    whole = fresh(n, l1=1e-3)
    run(whole, X, y, sw, range(m))
    parts = fresh(n, l1=1e-3)
    run(parts, X, y, sw, range(50))
    run(parts, X, y, sw, range(50, 90))
    moved = PGSState.from_dict(parts.to_dict()).copy()
    run(moved, X, y, sw, range(90, m))
    assert np.array_equal(moved.weights(), whole.weights())
    assert moved.config() == whole.config()
    assert moved.config()["geometry"] == "adaptive"


def assert_scale_free(X, y, sw, c, **config):
    """One pass over X and over X with column j times c[j], in states of `config`: the
    final predictions equal within 1e-9 (relative to the largest) and the progressive
    losses within 1e-9 (relative)."""
    m, n = X.shape
    base, scaled = fresh(n, **config), fresh(n, **config)
    run(base, X, y, sw, range(m))
    run(scaled, X * c, y, sw, range(m))
    Xt = sp.csr_matrix(X)
    z = base.scores(Xt.data, Xt.indices, Xt.indptr.astype(np.int64))
    Xt = sp.csr_matrix(X * c)
    z_c = scaled.scores(Xt.data, Xt.indices, Xt.indptr.astype(np.int64))
    np.testing.assert_allclose(z_c, z, rtol=1e-9, atol=1e-9 * np.max(np.abs(z)))
    np.testing.assert_allclose(scaled.stats_dict()["progressive_loss"],
                               base.stats_dict()["progressive_loss"], rtol=1e-9)


@pytest.mark.parametrize("centered", [False, True])
def test_a_column_multiplied_by_any_c_changes_no_prediction(centered):
    """Multiplying columns by c in [1e-3, 1e3] leaves every progressive margin and the
    final predictions equal within 1e-9 (relative): the scales absorb c exactly (one
    rounding of x / s), where the global geometry's predictions move."""
    X, y, _, _, sw = stream(seed=3)
    m, n = X.shape
    c = 10.0 ** np.linspace(-3, 3, n)
    assert_scale_free(X, y, sw, c, centered=centered)
    # the global geometry is not invariant: the same check fails there
    g, g_c = PGSState(p=2.0, sigma=1e-3, n_features=n), PGSState(p=2.0, sigma=1e-3, n_features=n)
    run(g, X, y, sw, range(m))
    run(g_c, X * c, y, sw, range(m))
    assert abs(g.stats_dict()["progressive_loss"] - g_c.stats_dict()["progressive_loss"]) > 1e-3


def test_a_growing_scale_keeps_the_weight_and_rescales_the_squares():
    """A row that raises a feature's scale by 4 but takes no step (importance weight 0):
    the scaled weight v_j = s_j w_j is the one it was (sigma t, which the row's count
    moves, is ~0 here), and the sum of squares n_j is a sixteenth of it (the same
    gradients in the new units), so the next steps of that feature are as large as if its
    values had always been in the new scale."""
    X, y, _, _, sw = stream(seed=5)
    m, n = X.shape
    state = fresh(n, sigma=1e-14)
    run(state, X, y, sw, range(m))
    j = int(np.argmax(np.abs(state.weights()[1:, 0]) > 0))  # a feature with a weight
    s_old = np.max(np.abs(X[:, j]))
    row = np.zeros((1, n))
    row[0, j] = 4.0 * s_old
    before, sq = state.weights()[1 + j, 0], state.to_dict()
    run(state, np.vstack([X, row]), np.append(y, 1.0), np.append(sw, 0.0), [m])
    after = state.weights()[1 + j, 0]
    assert after != 0 and after * (4.0 * s_old) == pytest.approx(before * s_old, rel=1e-10)
    fields = np.asarray(state.to_dict()["block_a"]).reshape(-1, 4)
    old = np.asarray(sq["block_a"]).reshape(-1, 4)
    assert fields[1 + j, 1] == pytest.approx(old[1 + j, 1] / 16.0, rel=1e-14)


def test_scores_at_a_rows_coordinates_are_the_models():
    """`scores` reads the lazy state at a row's coordinates: the bits of the model read
    out whole (`weights`) times the rows, as scipy's CSR product sums them."""
    X, y, _, _, sw = stream(seed=4)
    state = fresh(X.shape[1], l1=1e-3)
    run(state, X, y, sw, range(len(y)))
    W = state.weights()
    Xc = sp.csr_matrix(X)
    got = state.scores(Xc.data, Xc.indices, Xc.indptr.astype(np.int64))
    assert np.array_equal(got[:, 0], Xc @ W[1:, 0] + W[0, 0])


def test_features_never_seen_weigh_zero_and_cost_nothing():
    """A wide state (2^20 features) trained on a few columns: the columns never seen weigh
    exactly 0 (their scale is 0), and l1 keeps exact zeros among the seen ones."""
    rng = np.random.RandomState(5)
    cols = rng.choice(2**20, 30, replace=False)
    X = sp.random(300, 30, density=0.3, random_state=rng, format="csr")
    wide = sp.csr_matrix((X.data, cols[X.indices], X.indptr), shape=(300, 2**20))
    y = np.where(X[:, :3].sum(axis=1).A1 + 0.1 * rng.randn(300) > 0.2, 1.0, -1.0)
    state = fresh(2**20, l1=0.02)
    run(state, wide, y, np.ones(300), range(300))
    W = state.weights()[1:, 0]
    unseen = np.setdiff1d(np.arange(2**20), cols)
    assert not np.any(W[unseen])
    assert 0 < np.count_nonzero(W[cols]) < 30


@pytest.mark.parametrize("p", [2.0, 1.5])
def test_what_the_adaptive_geometry_does_not_run_is_refused_by_name(p):
    with pytest.raises(OptionError, match=r"forgets \(forget=0\.99\) with the last "
                       r"iterate only, got iterate='weighted2'"):
        fresh(3, forget=0.99, iterate="weighted2", p=p)


@pytest.mark.parametrize("option, value", [("geometry", "per-coordinate"), ("eta", 0.0),
                                           ("eta", float("inf")), ("delta", -1.0)])
def test_bad_values_of_the_adaptive_options_are_refused(option, value):
    with pytest.raises(ValueError, match=option):
        fresh(3, **{option: value})


# ---- importance weights: a row of weight c > 1 is its first copy, then the invariant
# update of the rest (docs/design/adaptive.md, "Importance weights") ----------------------

def test_rows_of_weight_at_most_1_keep_their_bits():
    """Weights 1 (and weights in [0.5, 1]) take the step they took before the invariant
    update existed, bit for bit: the digest of the weights and progressive losses of 8
    losses x both forms x l1 x dense and sparse rows, and one-vs-rest problems, as
    recorded on that build (main at 7ccd4f4)."""
    import hashlib
    X, y, labels, score, sw = stream()
    digests = {}
    for name, w in (("ones", np.ones(len(y))), ("at_most_1", np.minimum(sw, 1.0))):
        h = hashlib.sha256()
        for centered in (False, True):
            for l1 in (0.0, 2e-3):
                for loss in LOSSES:
                    for dense in (False, True):
                        classifier = loss not in REGRESSION
                        state = fresh(X.shape[1], loss=loss, l1=l1, centered=centered)
                        run(state, X, y if classifier else score, w, range(len(y)),
                            classifier, dense)
                        h.update(state.weights().tobytes())
                        h.update(np.float64(state.stats_dict()["progressive_loss"]).tobytes())
                state = fresh(X.shape[1], l1=l1, centered=centered, n_problems=3,
                              multiclass=True)
                run(state, X, labels, w, range(len(y)))
                h.update(state.weights().tobytes())
        digests[name] = h.hexdigest()[:16]
    assert digests == {"ones": "a7d1c2d5d12f8230", "at_most_1": "f90777707a47006b"}


@pytest.mark.parametrize("centered", [False, True])
def test_a_row_of_weight_1e6_takes_the_margin_to_its_label_and_no_further(centered):
    """After 60 rows, one row of weight k: for the squared loss its margin after the step
    moves monotonically toward the label as k grows and never passes it, and at k = 1e6 it
    is the label (1e-9); for the logistic loss the margin grows like log k (the copies'
    limit: m + e^m grows by Q k), finite at k = 1e18. The linear rule (k times the slope)
    took the squared loss's margin past the label by 10^3 at k = 1e6."""
    X, y, _, score, _ = stream(m=61, seed=6)
    Xc = sp.csr_matrix(X[-1:])
    for loss, target in (("squared", score), ("logistic", y)):
        margins = []
        for k in (1.0, 2.0, 10.0, 1e3, 1e6, 1e18):
            state = fresh(X.shape[1], loss=loss, centered=centered)
            sw = np.ones(len(y))
            sw[-1] = k
            run(state, X, target, sw, range(len(y)), loss != "squared")
            margins.append(state.scores(Xc.data, Xc.indices, Xc.indptr.astype(np.int64))[0, 0])
        margins = np.array(margins)
        label = target[-1]
        if loss == "squared":
            gaps = (margins - label) * np.sign(margins[0] - label)
            tie = 1e-12 * abs(label)  # rounding at the label
            assert np.all(gaps >= -tie) and np.all(np.diff(gaps) <= tie), margins
            assert abs(margins[4] - label) <= 1e-9 * abs(label)
        else:
            m = margins * label
            assert np.all(np.diff(m) > 0) and np.all(np.isfinite(m)), m
            assert m[5] < 50
