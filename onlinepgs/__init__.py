"""onlinepgs: the Primal Gradient Solver for streaming l_p-regularized linear models.

The names of ``__all__`` are imported on first use (PEP 562), so ``import onlinepgs``
imports no scikit-learn: the scikit-learn estimators (``PGSClassifier``, ...) import it
when they are first asked for, while the command line, the model files, the certificates
and the sklearn-free learners (`onlinepgs.pgs`, `onlinepgs.sdca`) never do.

Examples
--------
>>> import numpy as np
>>> from onlinepgs import PGSClassifier
>>> X = np.array([[1.0, 0.0], [0.0, 1.0]] * 50); y = np.array([1, 0] * 50)
>>> PGSClassifier(sigma=1e-2, random_state=0).fit(X, y).predict([[1.0, 0.0]])
array([1])
"""
import importlib

__version__ = "0.1.0"

# public name -> the module that defines it (imported on first access)
_HOMES = {
    "PGSClassifier": "onlinepgs.estimators", "PGSRegressor": "onlinepgs.estimators",
    "SDCAClassifier": "onlinepgs.estimators", "SDCARegressor": "onlinepgs.estimators",
    "PGSDivergedError": "onlinepgs.pgs", "ModelTooLargeError": "onlinepgs.pgs",
    "LinearModel": "onlinepgs.model",
    "iter_svmlight": "onlinepgs.svmlight", "load_svmlight": "onlinepgs.svmlight",
    "SvmlightReader": "onlinepgs.svmlight", "SvmlightError": "onlinepgs.svmlight",
    "save_model": "onlinepgs.model_io", "load_model": "onlinepgs.model_io",
    "read_header": "onlinepgs.model_io", "ModelFileError": "onlinepgs.model_io",
    "duality_gap": "onlinepgs.duality", "DualityGap": "onlinepgs.duality",
}

__all__ = [
    "PGSClassifier", "PGSRegressor", "PGSDivergedError", "ModelTooLargeError",
    "SDCAClassifier", "SDCARegressor", "LinearModel",
    "iter_svmlight", "load_svmlight", "SvmlightReader", "SvmlightError",
    "save_model", "load_model", "read_header", "ModelFileError",
    "duality_gap", "DualityGap",
    "__version__",
]


def __getattr__(name):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'onlinepgs' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
