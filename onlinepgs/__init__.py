"""onlinepgs: the Primal Gradient Solver for streaming l_p-regularized linear models.

Examples
--------
>>> import numpy as np
>>> from onlinepgs import PGSClassifier
>>> X = np.array([[1.0, 0.0], [0.0, 1.0]] * 50); y = np.array([1, 0] * 50)
>>> PGSClassifier(sigma=1e-2, random_state=0).fit(X, y).predict([[1.0, 0.0]])
array([1])
"""
from onlinepgs.estimators import PGSClassifier, PGSDivergedError, PGSRegressor

__version__ = "0.1.0"
__all__ = ["PGSClassifier", "PGSRegressor", "PGSDivergedError", "__version__"]
