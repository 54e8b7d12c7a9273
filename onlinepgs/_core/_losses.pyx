"""Python access to the compiled losses (for tests and the duality tools)."""
import numpy as np

LOSS_CODES = {
    "hinge": HINGE,
    "logistic": LOGISTIC,
    "squared_hinge": SQUARED_HINGE,
    "smooth_hinge": SMOOTH_HINGE,
    "squared": SQUARED,
    "absolute": ABSOLUTE,
    "huber": HUBER,
    "epsilon_insensitive": EPSILON_INSENSITIVE,
}
CLASSIFICATION_LOSSES = ("hinge", "logistic", "squared_hinge", "smooth_hinge")
REGRESSION_LOSSES = ("squared", "absolute", "huber", "epsilon_insensitive")


def _code(name):
    try:
        return LOSS_CODES[name]
    except KeyError:
        raise ValueError(
            f"unknown loss {name!r}; expected one of {sorted(LOSS_CODES)}"
        ) from None


def _evaluate(name, z, y, double epsilon, int what):
    cdef int code = _code(name)
    z_arr, y_arr = np.broadcast_arrays(np.asarray(z, dtype=np.float64),
                                       np.asarray(y, dtype=np.float64))
    cdef double[::1] zf = np.ascontiguousarray(z_arr).ravel()
    cdef double[::1] yf = np.ascontiguousarray(y_arr).ravel()
    out = np.empty(zf.shape[0], dtype=np.float64)
    cdef double[::1] o = out
    cdef Py_ssize_t i
    with nogil:
        for i in range(zf.shape[0]):
            if what == 1:
                o[i] = loss_derivative(code, zf[i], yf[i], epsilon)
            elif what == 2:
                o[i] = loss_conjugate(code, zf[i], yf[i], epsilon)
            else:
                o[i] = loss_value(code, zf[i], yf[i], epsilon)
    out = out.reshape(z_arr.shape)
    return out if out.ndim else float(out)


def loss_value_py(name, z, y, epsilon=0.1):
    """Value of loss ``name`` at margins ``z`` with labels ``y`` (broadcast).

    Examples
    --------
    >>> from onlinepgs._core._losses import loss_value_py
    >>> round(loss_value_py("logistic", 0.0, 1.0), 6)
    0.693147
    """
    return _evaluate(name, z, y, epsilon, 0)


def loss_derivative_py(name, z, y, epsilon=0.1):
    """(Sub)derivative in z of loss ``name`` at margins ``z`` with labels ``y``.

    Examples
    --------
    >>> from onlinepgs._core._losses import loss_derivative_py
    >>> loss_derivative_py("hinge", 0.5, 1.0)
    -1.0
    """
    return _evaluate(name, z, y, epsilon, 1)


def loss_conjugate_py(name, u, y, epsilon=0.1):
    """Fenchel conjugate ``l*(u; y) = sup_z (u z - l(z; y))`` of loss ``name`` (+inf outside
    its domain), at dual values ``u`` with labels ``y`` (broadcast).

    Examples
    --------
    >>> from onlinepgs._core._losses import loss_conjugate_py
    >>> loss_conjugate_py("hinge", -0.5, 1.0), loss_conjugate_py("hinge", 0.5, 1.0)
    (-0.5, inf)
    """
    return _evaluate(name, u, y, epsilon, 2)
