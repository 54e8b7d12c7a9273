"""Compiled core: losses, the PGS state and its pass over rows (its files: docs/design/core.md)."""
from onlinepgs._core._losses import (  # noqa: F401
    CLASSIFICATION_LOSSES,
    LOSS_CODES,
    REGRESSION_LOSSES,
    loss_derivative_py as loss_derivative,
    loss_value_py as loss_value,
)
from onlinepgs._core._pgs import ITERATES, PGSState  # noqa: F401
