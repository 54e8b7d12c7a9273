"""The compiled losses: values, derivatives, stability at any margin."""
import numpy as np
import pytest

from onlinepgs._core import LOSS_CODES, loss_derivative, loss_value

import reference

CLS = ["hinge", "logistic", "squared_hinge", "smooth_hinge"]


@pytest.mark.parametrize("loss", sorted(LOSS_CODES))
def test_values_and_derivatives_match_reference(loss):
    z = np.linspace(-4, 4, 161) + 0.0123  # avoid the kinks exactly
    for y in ([-1.0, 1.0] if loss in CLS else [-1.7, 0.0, 2.3]):
        np.testing.assert_allclose(loss_value(loss, z, y, 0.3),
                                   reference.loss_value(loss, z, y, 0.3), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(loss_derivative(loss, z, y, 0.3),
                                   reference.loss_derivative(loss, z, y, 0.3), rtol=1e-12, atol=1e-15)
        # the derivative is the slope of the value (central differences away from kinks)
        h = 1e-6
        fd = (loss_value(loss, z + h, y, 0.3) - loss_value(loss, z - h, y, 0.3)) / (2 * h)
        np.testing.assert_allclose(loss_derivative(loss, z, y, 0.3), fd, atol=1e-5)


@pytest.mark.parametrize("loss", sorted(LOSS_CODES))
def test_finite_at_extreme_margins(loss):
    z = np.array([-1e300, -1e30, -800.0, 800.0, 1e30, 1e300])
    d = loss_derivative(loss, z, 1.0)
    if loss in ("squared", "squared_hinge"):
        assert np.all(np.isfinite(d[1:-1]))  # 2 * 1e300 overflows, as it should
    else:
        assert np.all(np.isfinite(d))
        assert np.all(np.abs(d) <= 1.0)
    assert not np.any(np.isnan(loss_value(loss, z, 1.0)))


def test_logistic_tails():
    assert loss_value("logistic", 800.0, 1.0) == pytest.approx(np.exp(-800.0), abs=0)
    assert loss_value("logistic", -800.0, 1.0) == 800.0
    assert loss_derivative("logistic", -800.0, 1.0) == -1.0
    assert loss_derivative("logistic", 800.0, -1.0) == 1.0


def test_unknown_loss_is_named():
    with pytest.raises(ValueError, match="unknown loss 'hingee'"):
        loss_value("hingee", 0.0, 1.0)
