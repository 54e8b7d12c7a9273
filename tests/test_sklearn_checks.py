"""scikit-learn's own estimator checks."""
from sklearn.utils.estimator_checks import parametrize_with_checks

from onlinepgs import PGSClassifier, PGSRegressor

# Checks that cannot hold for a stochastic first-order solver, with the reason.
_WEIGHTS = (
    "PGS is a stochastic first-order method: a weight scales a row's gradient within "
    "one step, while a repeated row takes several steps, so the two runs follow "
    "different paths and agree only at convergence, not to the check's tolerance")
EXPECTED_FAILURES = {
    "check_sample_weight_equivalence_on_dense_data": _WEIGHTS,
    "check_sample_weight_equivalence_on_sparse_data": _WEIGHTS,
}


def _expected(estimator):
    return EXPECTED_FAILURES


@parametrize_with_checks(
    [PGSClassifier(random_state=0), PGSRegressor(sigma=0.1, random_state=0)],
    expected_failed_checks=_expected,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)
