"""onlinepgs: the Primal Gradient Solver for streaming l_p-regularized linear models.

Examples
--------
>>> import numpy as np
>>> from onlinepgs import PGSClassifier
>>> X = np.array([[1.0, 0.0], [0.0, 1.0]] * 50); y = np.array([1, 0] * 50)
>>> PGSClassifier(sigma=1e-2, random_state=0).fit(X, y).predict([[1.0, 0.0]])
array([1])
"""
from onlinepgs.duality import DualityGap, duality_gap
from onlinepgs.estimators import (ModelTooLargeError, PGSClassifier, PGSDivergedError,
                                  PGSRegressor)
from onlinepgs.sdca import SDCAClassifier, SDCARegressor
from onlinepgs.model_io import ModelFileError, load_model, read_header, save_model
from onlinepgs.svmlight import SvmlightError, SvmlightReader, iter_svmlight, load_svmlight

__version__ = "0.1.0"
__all__ = [
    "PGSClassifier", "PGSRegressor", "PGSDivergedError", "ModelTooLargeError",
    "SDCAClassifier", "SDCARegressor",
    "iter_svmlight", "load_svmlight", "SvmlightReader", "SvmlightError",
    "save_model", "load_model", "read_header", "ModelFileError",
    "duality_gap", "DualityGap",
    "__version__",
]
