"""No certificate for a model whose weights are not finite (issue 32, item 3)."""
import numpy as np
import pytest

import onlinepgs.cli as cli
import onlinepgs.cli.inspect
from onlinepgs import PGSClassifier, PGSRegressor
from onlinepgs.estimators import PGSDivergedError
from onlinepgs.duality import duality_gap, duality_gap_stream, gap_of_weights


def _data(seed=0, n=60):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, 3)
    return X, np.where(X[:, 0] + 0.3 * rng.randn(n) > 0, 1, -1)


def _poisoned(est, coordinate, value):
    """est with the solver's weight of `coordinate` (0: the intercept's feature, j + 1:
    feature j) set to `value`, as a diverged or damaged state has it."""
    est._state.block_a[coordinate] = value
    est._cache.clear()
    return est


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_duality_gap_refuses_non_finite_weights(value):
    X, y = _data()
    est = _poisoned(PGSClassifier(loss="hinge", sigma=1.0, random_state=0).fit(X, y),
                    2, value)
    # the test's own view of what is wrong (coef_ itself refuses to hand out such weights)
    bad = np.argwhere(~np.isfinite(np.asarray(est._state.weights())[1:].T))
    assert bad.tolist() == [[0, 1]]
    with pytest.raises(PGSDivergedError, match="not usable"):
        est.coef_
    for certify in (lambda: duality_gap(est, X, y),
                    lambda: duality_gap(est, X, y, refine_epochs=2),
                    lambda: duality_gap_stream(est, [(X[:30], y[:30]), (X[30:], y[30:])])):
        with pytest.raises(ValueError, match=r"not finite \(coef_\[0, 1\] = (nan|inf)\)"):
            certify()


def test_duality_gap_refuses_a_non_finite_intercept():
    X, y = _data(1)
    est = _poisoned(PGSRegressor(sigma=0.1, random_state=0).fit(X, y * 2.0), 0, np.nan)
    W = np.asarray(est._state.weights())
    assert np.isnan(W[0]).all() and np.isfinite(W[1:]).all()
    with pytest.raises(ValueError, match=r"intercept is not finite \(intercept_\[0\]"):
        duality_gap(est, X, y * 2.0)


def test_gap_of_weights_refuses_non_finite_weights():
    X, y = _data(2)
    with pytest.raises(ValueError, match="coef has a non-finite value at index 2"):
        gap_of_weights([0.1, 0.2, np.nan], 0.0, X, y, loss="logistic", sigma=0.1)
    with pytest.raises(ValueError, match="intercept must be one finite number"):
        gap_of_weights([0.1, 0.2, 0.3], np.inf, X, y, loss="logistic", sigma=0.1)


def test_command_line_gap_refuses_a_non_finite_model(tmp_path, monkeypatch, capsys):
    X, y = _data(3)
    est = _poisoned(PGSClassifier(loss="hinge", sigma=1.0, random_state=0).fit(X, y),
                    1, np.nan)
    path = tmp_path / "d.svm"
    path.write_text("".join(f"{label} " + " ".join(f"{j + 1}:{v!r}" for j, v in enumerate(row))
                            + "\n" for row, label in zip(X, y)))
    # the model as a model file would give it (whether files can hold NaN weights is
    # model_io's business; gap must refuse such a model however it gets one)
    monkeypatch.setattr(onlinepgs.cli.inspect, "load", lambda path, command: (est, {}))
    for extra in ([], ["--json"]):
        assert cli.main(["gap", "model.pgs", str(path), *extra]) == 1
        out, err = capsys.readouterr()
        assert out == ""  # no certificate printed
        assert err.count("\n") == 1
        assert err.startswith("onlinepgs: error: the model's weights are not finite "
                              "(coef_[0, 0] = nan)")
