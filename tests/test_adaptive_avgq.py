"""The adaptive geometry's averaged iterates at p < 2 (docs/design/adaptive.md, "Averaged
iterates", "At p < 2"): v_t = f_c(t) phi(t), phi moving only where a row reaches it, so a
coordinate's sum of a_t v_t between two touches is phi_j times the running sum C of
a_t f_c(t): the global geometry's lazy sums (acc, mark, C) on the adaptive factor.

Yardsticks: the NumPy transcription's iterates every step (`reference_adaptive`) combined
by `combine`, row by row for the progressive loss of the reported average; the
last-iterate state; the same learner in other chunkings, through a model file and in the
race; columns multiplied by c. A fork at another sigma: tests/test_adaptive_average.py."""
import numpy as np
import pytest

from onlinepgs import PGSClassifier, load_model, save_model
from reference import combine, reference_adaptive
from test_adaptive_average import AVERAGES, raw_columns, reported_progressive_loss_follows
from test_adaptive_core import assert_scale_free, fresh, run, stream, with_intercept


def _in_final_scales(state, X, stop):
    """The state's weights after rows [0, stop) taken to the scales of all of X (the
    transcription's iterates are in the final scales)."""
    final = np.max(np.abs(with_intercept(X)), axis=0)[:, None]
    now = np.max(np.abs(with_intercept(X[:stop])), axis=0)[:, None]
    return state.weights() * np.where(final > 0, now / np.where(final > 0, final, 1), 0)


@pytest.mark.parametrize("p", [1.2, 1.5, 1.8])
@pytest.mark.parametrize("iterate", AVERAGES)
@pytest.mark.parametrize("radius", [None, 1.0])
@pytest.mark.parametrize("dense", [False, True])
@pytest.mark.parametrize("batch_size", [1, 4])
def test_averages_at_p_below_2_follow_the_transcription(p, iterate, radius, dense,
                                                        batch_size):
    """300 rows, importance weights in [0.5, 2], scales growing between touches: after
    some steps and at the end the reported weights are the transcription's iterates
    combined to 1e-12, on R^n and the ball; the averaged state's last iterate is the
    last-iterate state's, bit for bit (an average changes no step)."""
    X, y, _, _, sw = stream(m=300, seed=4)
    m, n = X.shape
    kw = dict(p=p, sigma=1e-3, loss="logistic", eta=16.0, centered=False, radius=radius)
    its, _ = reference_adaptive(with_intercept(X), y, sample_weight=sw,
                                batch_size=batch_size, **kw)
    state = fresh(n, iterate=iterate, batch_size=batch_size, **kw)
    steps = list(range(0, m, batch_size))
    for s, start in enumerate(steps):
        stop = min(start + batch_size, m)
        run(state, X, y, sw, range(start, stop), dense=dense)
        if s in (0, 5, 17, 40) or stop == m:
            want = combine(its[:s + 1], iterate)
            np.testing.assert_allclose(_in_final_scales(state, X, stop), want, rtol=0,
                                       atol=1e-12 * np.max(np.abs(want)))
    last = fresh(n, batch_size=batch_size, **kw)
    run(last, X, y, sw, range(m), dense=dense)
    np.testing.assert_array_equal(state.weights("last"), last.weights())
    assert not np.array_equal(state.weights(), last.weights())


@pytest.mark.parametrize("iterate", AVERAGES)
def test_one_vs_rest_averages_at_p_below_2_follow_the_transcription(iterate):
    """Three classes, one problem each (its own factor and running sum C), on the ball."""
    X, _, labels, _, sw = stream(m=240, seed=5)
    Y = np.where(labels[:, None] == np.arange(3)[None, :], 1.0, -1.0)
    kw = dict(p=1.5, sigma=1e-4, loss="logistic", eta=8.0, delta=0.5, centered=False,
              radius=5.0)
    its, _ = reference_adaptive(with_intercept(X), Y, sample_weight=sw, labels=labels, **kw)
    state = fresh(X.shape[1], n_problems=3, multiclass=True, iterate=iterate, **kw)
    run(state, X, labels, sw, range(len(labels)))
    want = combine(its, iterate)
    np.testing.assert_allclose(state.weights(), want, rtol=0,
                               atol=1e-12 * np.max(np.abs(want)))


@pytest.mark.parametrize("iterate", AVERAGES)
def test_the_progressive_loss_at_p_below_2_is_the_reported_averages(iterate):
    """Each row's reported loss is that of the average of the iterates before it, read in
    the row's scales: the transcription's iterates combined row by row give the same
    progressive loss to 1e-12."""
    X, y, _, _, sw = stream(m=200, seed=4)
    reported_progressive_loss_follows(X, y, sw, iterate, p=1.5, sigma=1e-3, loss="logistic",
                                      eta=16.0, centered=False)


@pytest.mark.parametrize("iterate", ["average", "weighted2"])
def test_at_p_below_2_chunks_a_model_file_and_the_race_continue_bit_for_bit(tmp_path,
                                                                           iterate):
    """eta and sigma raced at p = 1.5 with an average reported: partial_fit in chunks
    with the model saved and loaded mid-stream ends with the bits of one call, and the
    kept family equals its eta's learner alone."""
    X, y = raw_columns(m=5000)
    kw = dict(geometry="adaptive", radius=None, p=1.5, iterate=iterate, random_state=0)
    one = PGSClassifier(**kw).partial_fit(X, y, classes=[0, 1])
    parts = PGSClassifier(**kw)
    for a, b in [(0, 1), (1, 777), (777, 2500)]:
        parts.partial_fit(X[a:b], y[a:b], classes=[0, 1])
    save_model(parts, tmp_path / "m.pgs")
    parts = load_model(tmp_path / "m.pgs")
    for a, b in [(2500, 4321), (4321, 5000)]:
        parts.partial_fit(X[a:b], y[a:b])
    assert (parts.eta_, parts.sigma_) == (one.eta_, one.sigma_)
    np.testing.assert_array_equal(parts.coef_, one.coef_)
    np.testing.assert_array_equal(parts.intercept_, one.intercept_)
    alone = PGSClassifier(**{**kw, "eta": one.eta_}).partial_fit(X, y, classes=[0, 1])
    assert alone.sigma_ == one.sigma_
    np.testing.assert_array_equal(alone.coef_, one.coef_)


@pytest.mark.parametrize("radius", [None, 2.0])
def test_at_p_below_2_a_column_multiplied_by_any_c_changes_no_averaged_prediction(radius):
    X, y, _, _, sw = stream(seed=8)
    c = 10.0 ** np.linspace(-3, 3, X.shape[1])
    assert_scale_free(X, y, sw, c, p=1.5, eta=32.0, radius=radius, iterate="weighted2")
