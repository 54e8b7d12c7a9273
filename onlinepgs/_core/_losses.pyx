"""Python access to the compiled losses (for tests and the duality tools), and the codes
of the multiclass losses (one-vs-rest, or one loss of the K scores, _multiclass.pxd)."""
import numpy as np
from libc.stdint cimport int64_t

from onlinepgs._core._multiclass cimport (mc_loss_grad, MC_NONE, MC_MULTINOMIAL,
                                          MC_CRAMMER_SINGER)
from onlinepgs._options import PYTHON, learner_rules

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


# the multiclass losses: one-vs-rest (K binary problems), or one loss of the K scores
# coupling them (_multiclass.pxd; the binary loss each needs: onlinepgs._options)
MULTI_CLASS = {"ovr": MC_NONE, "multinomial": MC_MULTINOMIAL,
               "crammer_singer": MC_CRAMMER_SINGER}


def multi_class_code(multi_class, str loss="logistic", bint multiclass=True):
    """The code (_multiclass.pxd's MC_*) of `multi_class`, a name of MULTI_CLASS or
    its code; ValueError for another value, or a coupled loss with a loss it is not
    (multinomial: "logistic", crammer_singer: "hinge") or without K > 2 classes."""
    names = {v: k for k, v in MULTI_CLASS.items()}
    if isinstance(multi_class, str):
        name = multi_class
    elif isinstance(multi_class, int) and not isinstance(multi_class, bool):
        name = names.get(multi_class)
    else:
        name = None
    if name not in MULTI_CLASS:
        raise ValueError(f"multi_class must be one of {sorted(MULTI_CLASS)}, "
                         f"got {multi_class!r}")
    if name != "ovr":
        learner_rules({"multi_class": name, "loss": loss}, "pgs", PYTHON)
        if not multiclass:
            raise ValueError(f"multi_class={name!r} couples the K > 2 problems of a "
                             "multiclass state (multiclass=True)")
    return MULTI_CLASS[name]


def multiclass_loss(multi_class, const double[:, ::1] scores, const int64_t[::1] labels):
    """Each row's coupled multiclass loss (`multi_class` "multinomial" or
    "crammer_singer", _multiclass.pxd) at its K scores, for label indices 0..K-1 (the
    streaming engine's held-out rows). ValueError for a label outside 0..K-1."""
    cdef int code = MULTI_CLASS.get(multi_class, MC_NONE)
    cdef Py_ssize_t i, n = scores.shape[0], K = scores.shape[1]
    if code == MC_NONE:
        raise ValueError(f"multiclass_loss is the loss of a coupled multi_class "
                         f"('multinomial' or 'crammer_singer'), got {multi_class!r}")
    if labels.shape[0] != n:
        raise ValueError(f"{n} rows of scores but {labels.shape[0]} labels")
    out_a = np.zeros(n)
    cdef double[::1] out = out_a
    for i in range(n):
        if not (0 <= labels[i] < K):
            raise ValueError(f"label index {labels[i]} of row {i} is not in 0..{K - 1}")
        out[i] = mc_loss_grad(code, &scores[i, 0], K, labels[i], NULL)
    return out_a
