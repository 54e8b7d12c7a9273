"""scikit-learn's own estimator checks."""
from sklearn.utils.estimator_checks import parametrize_with_checks

from onlinepgs import PGSClassifier, PGSRegressor, SDCAClassifier, SDCARegressor

# Checks that cannot hold for a stochastic first-order solver, with the reason.
_WEIGHTS = (
    "PGS is a stochastic first-order method: a weight scales a row's gradient within "
    "one step, while a repeated row takes several steps, so the two runs follow "
    "different paths and agree only at convergence, not to the check's tolerance")
EXPECTED_FAILURES = {
    "check_sample_weight_equivalence_on_dense_data": _WEIGHTS,
    "check_sample_weight_equivalence_on_sparse_data": _WEIGHTS,
}
# SDCA solves to the optimum, but of the package's objective, which averages
# sample_weight_i * loss_i over the m rows: weights k_i equal k_i copies of each row only
# with sigma scaled by m / sum(k_i) (tests/test_sdca.py checks exactly that).
_SDCA_WEIGHTS = (
    "the objective is sigma r(w) + (1/m) sum_i sw_i loss_i with m the number of rows, so "
    "integer weights equal repeated rows only with sigma rescaled by m / sum(sw)")
SDCA_EXPECTED_FAILURES = {
    "check_sample_weight_equivalence_on_dense_data": _SDCA_WEIGHTS,
    "check_sample_weight_equivalence_on_sparse_data": _SDCA_WEIGHTS,
}


def _expected(estimator):
    if isinstance(estimator, (SDCAClassifier, SDCARegressor)):
        return SDCA_EXPECTED_FAILURES
    return EXPECTED_FAILURES


@parametrize_with_checks(
    [PGSClassifier(random_state=0), PGSRegressor(sigma=0.1, random_state=0),
     SDCAClassifier(random_state=0), SDCARegressor(random_state=0)],
    expected_failed_checks=_expected,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)
