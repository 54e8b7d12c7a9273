# cython: language_level=3
"""SDCA / Prox-SDCA, the batch solver of the core (Shalev-Shwartz and Zhang, "Stochastic
dual coordinate ascent methods for regularized loss minimization", 2013, section 4;
"Proximal stochastic dual coordinate ascent", 2012, Figure 1).

One `SDCAProblem` is one binary (labels +-1) or regression problem over CSR rows x_i
(the intercept is coordinate 0, a constant feature of value `intercept_scaling` inside
the regularized vector, so the dual has no equality constraint). It maximizes

    D(alpha) = -(1/m) sum_i sw_i l*(-alpha_i / sw_i; y_i) - sigma g*(v),
    v = X^T alpha / (sigma m),  w = grad g*(v),

the dual of P(w) = sigma g(w) + (1/m) sum_i sw_i l(<w, x_i>; y_i), one alpha_i at a time,
where g is r(w) = ||w||_p^2 / (2(p-1)) (p in (1, 2]) or, for the elastic net,
||w||_2^2 / 2 + (l1 / sigma) ||w||_1 (p = 2; Shalev-Shwartz and Zhang 2012, section 3.1).

A step maximizes 004's Option I model of D in alpha_i,

    -sw l*(-(alpha_i + d)/sw) - d <w, x_i> - d^2 ||x_i||_D'^2 / (2 sigma m),

with ||.||_D' the norm g* is 1-smooth in: l_2 for p = 2 (then the model IS D along
alpha_i: an exact coordinate maximization, as in 001's algorithm) and for the elastic net
(a lower bound there), ||.||_q for p < 2 (r* is 1-smooth w.r.t. ||.||_q, so the step uses
||x_i||_q^2 in place of ||x_i||^2 and is an ascent step on D). In units b_i = alpha_i / (s_i sw_i)
(s_i = y_i for classification, 1 for regression) every loss's model depends only on
b0, the margin z, the label and kappa_i = sw_i ||x_i||_D'^2 / (sigma m):

    hinge          b = clip(b0 + (1 - yz) / kappa, 0, 1)              (closed form)
    smooth_hinge   b = clip((1 - yz + kappa b0) / (1 + kappa), 0, 1)  (closed form)
    squared_hinge  b = max((1 - yz + kappa b0) / (1/2 + kappa), 0)    (closed form)
    logistic       log((1-b)/b) = yz + kappa (b - b0), b in (0, 1)    (bracketed Newton)
    squared        a = (y - z + kappa a0) / (1/2 + kappa)              (closed form)
    absolute       a = clip(a0 + (y - z) / kappa, -1, 1)                (closed form)
    huber          a = clip((y - z + kappa a0) / (1 + kappa), -eps, eps) (closed form)
    epsilon_insens a = clip(soft(a0 + (y - z)/kappa, eps/kappa), -1, 1)  (closed form)

The logistic root is found in x = b when it lies in (0, 1/2] and in x = 1 - b otherwise,
so x never loses digits to 1 - b; h(x) = log((1-x)/x) - kappa x - A is convex and decreasing
there, so Newton converges monotonically once left of the root, and a step that would
leave the bracket falls back to bisection. Each row caches its log-odds log((1-b)/b), so a
converged row's step costs no log at all. The steps, and the dual boxes and slopes that
shrinking reads, are inline functions of their own unit (_sdca_steps.pxd).

Primal-dual bookkeeping: p = 2 keeps w = v in one dense array (dot product and axpy, no
scale, no powers). The elastic net keeps v and w = soft(v, l1/sigma) side by side. p < 2
keeps v, phi_j = sgn(v_j) (|v_j|/M)^(q-1) and the running N = sum_j (|v_j|/M)^q through
the l_q mirror map PGS uses too (_mirror.pxd: the same window and headroom of the scale M,
the same recount rule of N, the same packed roots), so w = (p-1) M N^((2-q)/q) phi and each
step costs O(nnz(x_i)) for every p; M, phi and N are recomputed exactly before every
duality-gap check, so the gap is that of w = grad g*(v) exactly.

The duality gap P(w) - D(alpha) is computed in one O(nnz) pass over every row (margins at
the current w) as the sum of the Fenchel-Young terms
sw_i [l(z_i) + l*(-alpha_i/sw_i) + (alpha_i/sw_i) z_i] / m (each >= 0) plus
sigma [g(w) + g*(v) - <w, v>] (0 when w = grad g*(v)): no cancellation between P and D.
The stopping rule is relative: gap <= tol * P(w). Checks run every `check_every` epochs or
on the deterministic "auto" schedule of `next_check`.

Shrinking (order="permutation", p = 2 without l1, every loss but logistic and squared, whose
dual boxes are never or not reached): a gap check computes every row's Fenchel-Young term
at the current w; a row sitting at a bound of its dual box whose term is 0 is optimal for
that w and leaves the active set, every other row (re)joins it. Between checks, a row at a
bound whose slope points out of the box by more than the previous epoch's largest violation
leaves too (LIBLINEAR's rule). Stopping is decided by the exact gap over all rows, so it
never depends on the heuristic.

Pure l_1 (sigma = 0, l1 > 0; Shalev-Shwartz and Zhang 2012, section 3.1): SDCA runs on the elastic net with a
small l_2 weight lam, which starts at l1^2 / P(0) (004's lam = eps / B^2 with eps = P(0) and
its bound B = P(0) / l1 >= ||w*||_1 >= ||w*||_2) and is divided by 10, keeping alpha, each
time the lam-problem's own gap falls below tol P / 2 without the l_1 certificate being met.
The certificate for P1(w) = l1 ||w||_1 + (1/m) sum_i sw_i l(<w, x_i>; y_i) is the smaller of
  (a) P1(w) - D_lam(alpha) + lam B^2 / 2 with B = P1(w) / l1 >= ||w*||_2 (004's argument:
      P1* >= P_lam* - lam ||w*||^2 / 2 >= D_lam(alpha) - lam B^2 / 2), and
  (b) P1(w) - D1(s alpha), D1(beta) = -(1/m) sum_i sw_i l*(-beta_i / sw_i), the l_1 dual,
      feasible for s = min(1, l1 / ||X^T alpha / m||_inf) (the conjugates' domains are
      intervals containing 0, so s alpha stays in them);
both bound P1(w) - min P1 from above.

Pure l_1 by section 3.2 (l1_geometry "lq", or "auto" when its bound is the smaller; see
`_choose_geometry`): g = r + (l1 / lam) ||w||_1 with r = ||w||_p^2 / (2 (p - 1)),
p = ln d / (ln d - 1): 004's (3 ln d / 2) ||w||_q^2 at lam' = lam / (3 ln d (p - 1)), the
same problem. grad g*(v) = grad r*(u), u = soft(v, l1 / lam) (004 eqs. 10-11), kept by the
l_q map on u (each touched coordinate's u_j moves only while |v_j| > l1 / lam: O(nnz) per
step), and the step uses ||x_i||_q^2 (q = ln d): g* is 1-smooth w.r.t. ||.||_q, since r*
is and soft() is 1-Lipschitz per coordinate (the paper's ||x_i||_inf^2 would need g
1-strongly convex w.r.t. ||.||_1, which (3 ln d / 2) ||.||_q^2 is only up to e^2 / 3,
docs/design/sdca.md). lam starts at (p - 1) l1^2 / P(0) (004's eps / (3 ln d B^2) in its
scaling), lowered as in 3.1, and (a) bounds lam r(w*) by lam B^2 / (2 (p - 1)).
"""
cimport cython
import numpy as np
cimport numpy as cnp
from libc.math cimport (fabs, sqrt, log, exp, exp2, log2, copysign, isfinite, INFINITY,
                        fmax, fmin, floor)
from libc.stdint cimport uint64_t, int64_t, int32_t

from onlinepgs._core._losses cimport (loss_value, loss_derivative, loss_conjugate, HINGE,
                                      LOGISTIC, SQUARED_HINGE, SMOOTH_HINGE, SQUARED, ABSOLUTE,
                                      HUBER, EPSILON_INSENSITIVE)
from onlinepgs._core._regularizer cimport lp_norm, reg_value, reg_conjugate
from onlinepgs._core._mirror cimport (Mirror, mirror_init, mirror_scale, mirror_refresh_due,
                                      mirror_cancelled, mirror_drift_due, mirror_link,
                                      mirror_touch, mirror_row, mirror_max, mirror_count)
from onlinepgs._core._random cimport below
from onlinepgs._core._sdca_steps cimport (_clip, _step, _box_lo, _box_hi, _gradient,
                                          _soft)
from onlinepgs._core._sparse cimport index_t, sparse_dot, sparse_axpy
from onlinepgs._core._losses import LOSS_CODES, CLASSIFICATION_LOSSES
from onlinepgs._options import check_sdca_problem

cnp.import_array()

cdef enum:
    REG_L2 = 0      # g = ||w||^2 / 2, w = v
    REG_LP = 1      # g = ||w||_p^2 / (2 (p - 1)), p < 2
    REG_ENET = 2    # g = ||w||^2 / 2 + c ||w||_1, w = soft(v, c)
    REG_LQ = 3      # g = ||w||_p^2 / (2 (p - 1)) + c ||w||_1, p = ln d / (ln d - 1):
                    # w = grad r*(u), u = soft(v, c) (004 section 3.2)

GEOMETRIES = ("auto", "l2", "lq")

cdef enum:
    ORDER_CYCLIC = 0
    ORDER_PERMUTATION = 1
    ORDER_RANDOM = 2

ORDERS = {"cyclic": ORDER_CYCLIC, "permutation": ORDER_PERMUTATION, "random": ORDER_RANDOM}


# Raw pointers of one problem for the hot loops, passed by value so that the compiler keeps
# them in registers (the extension builds with -fno-strict-aliasing).
cdef struct Core:
    const double* data
    const int64_t* indptr
    const double* y
    const double* kappa   # sw_i ||x_i||_D'^2 / (sigma m)
    const double* coef    # s_i sw_i / (sigma m): v moves by coef_i (b - b0) x_i
    double* b
    double* lodds         # logistic: log((1 - b_i) / b_i) per row (NaN: unknown)
    double* v             # coordinate 0 is the intercept; feature j is j + 1
    double* w             # ENET: soft(v, c); LP, LQ: phi
    double* u             # LQ: soft(v, c), the l_q map's argument
    int64_t* active
    double icpt
    double eps
    double c              # ENET threshold l1 / sigma
    double q
    double pm1
    int loss


# ---- epochs --------------------------------------------------------------------------------
cdef inline void _epoch_l2(Core k, const index_t* indices, const int64_t* rows, Py_ssize_t n,
                           int loss) noexcept nogil:
    """p = 2: w = v; a step is one dot product, the 1-D solve and one axpy."""
    cdef Py_ssize_t t, start, nnz
    cdef int64_t i
    cdef double z, b0, bn, d, icpt = k.icpt
    cdef double* v1 = k.v + 1
    for t in range(n):
        i = rows[t]
        start = k.indptr[i]
        nnz = k.indptr[i + 1] - start
        z = sparse_dot(v1, 1, k.data + start, indices + start, nnz) + k.v[0] * icpt
        b0 = k.b[i]
        bn = _step(loss, b0, z, k.y[i], k.kappa[i], k.eps, k.lodds + i)
        if bn != b0:
            k.b[i] = bn
            d = (bn - b0) * k.coef[i]
            sparse_axpy(v1, 1, d, k.data + start, indices + start, nnz)
            k.v[0] += d * icpt


cdef void _epoch_l2_any(Core k, const index_t* indices, const int64_t* rows,
                        Py_ssize_t n) noexcept nogil:
    # one specialised copy of the loop per loss: no branch on the configuration inside it
    if k.loss == HINGE:
        _epoch_l2(k, indices, rows, n, HINGE)
    elif k.loss == LOGISTIC:
        _epoch_l2(k, indices, rows, n, LOGISTIC)
    elif k.loss == SQUARED_HINGE:
        _epoch_l2(k, indices, rows, n, SQUARED_HINGE)
    elif k.loss == SMOOTH_HINGE:
        _epoch_l2(k, indices, rows, n, SMOOTH_HINGE)
    elif k.loss == SQUARED:
        _epoch_l2(k, indices, rows, n, SQUARED)
    elif k.loss == ABSOLUTE:
        _epoch_l2(k, indices, rows, n, ABSOLUTE)
    elif k.loss == HUBER:
        _epoch_l2(k, indices, rows, n, HUBER)
    else:
        _epoch_l2(k, indices, rows, n, EPSILON_INSENSITIVE)


cdef inline Py_ssize_t _epoch_l2_shrink(Core k, const index_t* indices, int64_t* rows,
                                        Py_ssize_t n, int loss, double* viol_hi,
                                        double* viol_lo) noexcept nogil:
    """p = 2 with shrinking over rows[:n]; returns the new number of active rows.

    viol_hi/viol_lo: in, the previous epoch's largest violations (the shrink thresholds);
    out, this epoch's. A row at its lower bound whose slope is below -viol_hi (or at its
    upper bound with slope above viol_lo) is swapped to the end and dropped.
    """
    cdef Py_ssize_t t = 0, start, nnz
    cdef int64_t i
    cdef double z, b0, bn, d, g, icpt = k.icpt, eps = k.eps
    cdef double lo = _box_lo(loss, eps), hi = _box_hi(loss, eps)
    cdef double th_hi = viol_hi[0], th_lo = viol_lo[0], new_hi = 0.0, new_lo = 0.0
    cdef double* v1 = k.v + 1
    while t < n:
        i = rows[t]
        start = k.indptr[i]
        nnz = k.indptr[i + 1] - start
        z = sparse_dot(v1, 1, k.data + start, indices + start, nnz) + k.v[0] * icpt
        b0 = k.b[i]
        g = _gradient(loss, b0, z, k.y[i], eps)
        if b0 <= lo:
            if g < -th_hi:
                n -= 1
                rows[t] = rows[n]
                rows[n] = i
                continue
            if g > new_hi:
                new_hi = g
        elif b0 >= hi:
            if g > th_lo:
                n -= 1
                rows[t] = rows[n]
                rows[n] = i
                continue
            if -g > new_lo:
                new_lo = -g
        else:
            if fabs(g) > new_hi:
                new_hi = fabs(g)
            if fabs(g) > new_lo:
                new_lo = fabs(g)
        bn = _step(loss, b0, z, k.y[i], k.kappa[i], eps, k.lodds + i)
        if bn != b0:
            k.b[i] = bn
            d = (bn - b0) * k.coef[i]
            sparse_axpy(v1, 1, d, k.data + start, indices + start, nnz)
            k.v[0] += d * icpt
        t += 1
    viol_hi[0] = new_hi if new_hi > 0.0 else INFINITY
    viol_lo[0] = new_lo if new_lo > 0.0 else INFINITY
    return n


cdef Py_ssize_t _epoch_l2_shrink_any(Core k, const index_t* indices, int64_t* rows,
                                     Py_ssize_t n, double* viol_hi,
                                     double* viol_lo) noexcept nogil:
    if k.loss == HINGE:
        return _epoch_l2_shrink(k, indices, rows, n, HINGE, viol_hi, viol_lo)
    elif k.loss == SQUARED_HINGE:
        return _epoch_l2_shrink(k, indices, rows, n, SQUARED_HINGE, viol_hi, viol_lo)
    elif k.loss == SMOOTH_HINGE:
        return _epoch_l2_shrink(k, indices, rows, n, SMOOTH_HINGE, viol_hi, viol_lo)
    elif k.loss == ABSOLUTE:
        return _epoch_l2_shrink(k, indices, rows, n, ABSOLUTE, viol_hi, viol_lo)
    elif k.loss == HUBER:
        return _epoch_l2_shrink(k, indices, rows, n, HUBER, viol_hi, viol_lo)
    else:
        return _epoch_l2_shrink(k, indices, rows, n, EPSILON_INSENSITIVE, viol_hi, viol_lo)


cdef void _epoch_enet(Core k, const index_t* indices, const int64_t* rows,
                      Py_ssize_t n) noexcept nogil:
    """Elastic net: margins read w = soft(v, c), kept beside v coordinate by coordinate."""
    cdef Py_ssize_t t, e, start, nnz, j
    cdef int64_t i
    cdef double z, b0, bn, d, icpt = k.icpt, c = k.c
    cdef double* v1 = k.v + 1
    cdef double* w1 = k.w + 1
    cdef const double* vals
    cdef const index_t* idx
    for t in range(n):
        i = rows[t]
        start = k.indptr[i]
        nnz = k.indptr[i + 1] - start
        vals = k.data + start
        idx = indices + start
        z = sparse_dot(w1, 1, vals, idx, nnz) + k.w[0] * icpt
        b0 = k.b[i]
        bn = _step(k.loss, b0, z, k.y[i], k.kappa[i], k.eps, k.lodds + i)
        if bn != b0:
            k.b[i] = bn
            d = (bn - b0) * k.coef[i]
            for e in range(nnz):
                j = idx[e]
                v1[j] += d * vals[e]
                w1[j] = _soft(v1[j], c)
            k.v[0] += d * icpt
            k.w[0] = _soft(k.v[0], c)


def next_check(checks, double tol, int cap_divisor=4):
    """Epochs until the next gap check for check_every="auto", from this run's checks
    [(epoch, relative gap), ...] (deterministic: no clocks).

    While the gap falls, its rate per epoch between the last two checks predicts the epochs
    N left to tol; the next check comes after N epochs, at most 1/cap_divisor of the epochs
    run so far (so a sudden speed-up overshoots by at most that share). Without a usable
    rate (first checks, a gap that rose) the next check comes after a tenth of the epochs
    run. Either way the checks, each one O(nnz) pass, cost a small fraction of the epochs.
    `run` passes cap_divisor=4 with shrinking (each check also refreshes the active set,
    which pays for itself) and 1 without: on logistic runs the gap falls at a steady linear
    rate, and a check costs 0.5-0.8 of an epoch (IMDB, a9a), so fewer checks win (a9a,
    sigma 1e-4: 12 epochs and 5 checks instead of 10; 1e-5: 75 epochs and 8 checks
    instead of 76 and 21).
    """
    cdef double g0, g1, rate, n_left
    cdef int e0, e1, cap
    cdef Py_ssize_t k = len(checks)
    if k == 0:
        return 1
    e1, g1 = checks[k - 1]  # (the module compiles with wraparound off: no [-1])
    cap = max(1, e1 // cap_divisor)
    if k < 2 or not (g1 > 0.0):
        return max(1, e1 // 10)
    e0, g0 = checks[k - 2]
    if not (g1 < g0) or e1 <= e0:
        return max(1, e1 // 10)
    if g1 <= tol:
        return 1
    rate = (log(g1) - log(g0)) / (e1 - e0)  # log-gap per epoch, < 0
    n_left = (log(tol) - log(g1)) / rate if tol > 0.0 else INFINITY
    if not (n_left < cap):
        return cap
    return max(1, <int>(n_left + 0.999))


@cython.final
cdef class SDCAProblem:
    """Dual variables and the primal-dual link of one binary or regression problem.

    Built by `onlinepgs.sdca` (and by tests). CSR float64 rows (int32 or int64 indices,
    canonical: sorted, no duplicates), labels y (+-1 for classification losses, targets
    otherwise), sample weights sw >= 0.

    Parameters
    ----------
    data, indices, indptr : arrays of a CSR matrix with n_cols columns
    n_cols : int
    y, sample_weight : float64 arrays of one entry per row
    loss : str
    p : float in (1, 2]
    sigma : float >= 0
        Weight of g; 0 with l1 > 0 asks for pure l_1 (module docstring).
    l1 : float >= 0
        Elastic net: g = ||w||^2/2 + (l1/sigma)||w||_1 (p = 2 only).
    fit_intercept, intercept_scaling, epsilon : as the estimators
    order : {"permutation", "random", "cyclic"}
    seed : int
    alpha0 : float64 array or None
        Starting dual variables (clipped into each conjugate's domain).
    shrinking : bool

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from onlinepgs._core._sdca import SDCAProblem
    >>> X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
    >>> prob = SDCAProblem(X.data, X.indices, X.indptr, 2, np.array([1.0, -1.0, 1.0]),
    ...                    np.ones(3), loss="hinge", sigma=0.1)
    >>> prob.run(max_epochs=100, tol=1e-9)
    True
    >>> info = prob.gap_info()
    >>> bool(0 <= info["gap"] <= 1e-9 * info["primal"])
    True
    """
    # configuration
    cdef readonly str loss
    cdef readonly int loss_code, reg, order
    cdef readonly double p, q, sigma, l1, epsilon, intercept_scaling
    cdef readonly bint fit_intercept, classification, shrinking, pure_l1
    # data
    cdef readonly object data_a, indices_a, indptr_a
    cdef readonly Py_ssize_t n_rows, n_cols, dim
    cdef const double[::1] data
    cdef const int32_t[::1] ind32
    cdef const int64_t[::1] ind64
    cdef bint idx64
    cdef int64_t[::1] indptr
    cdef readonly object y_a, sw_a, qnorm_a
    cdef const double[::1] y, sw
    cdef double[::1] qnorm    # ||x_i||_D'^2 including the intercept's constant
    cdef double[::1] kappa, coef
    # state
    cdef public object b_a, v_a, w_a, u_a
    cdef double[::1] b, v, w, wbuf, lodds, u
    cdef int64_t[::1] rows    # the rows SDCA visits (sw > 0, x_i != 0); active ones first
    cdef unsigned char[::1] keep
    cdef readonly Py_ssize_t n_visit, n_active
    cdef double viol_hi, viol_lo
    cdef readonly double scale_m, norm_n, s_eff  # p < 2: M, N and w = s_eff * phi
    cdef Mirror mm            # p < 2: the l_q map's constants (_mirror.pxd)
    cdef double norm_peak     # the largest N since its last exact count
    # coordinate updates since N's last drift recount, and 1 + the largest coordinate the
    # rows reach (the intercept's 0 counts): the recount comes every 8 span updates
    cdef int64_t touches, span
    cdef public uint64_t rng
    cdef int64_t[::1] order_buf
    # results of the last check (pure l_1: of the l_1 objective and its certificate)
    cdef readonly double primal, dual, gap, loss_mean, reg_w, inner_gap, inner_primal
    cdef readonly double loss_at_zero
    # pure l_1: the section used ("l2": 3.1, "lq": 3.2) and both bounds' row factors
    cdef readonly object l1_geometry
    cdef readonly double bound_l2, bound_lq
    cdef readonly int64_t n_epochs, n_steps, n_checks
    cdef readonly list gap_history, check_epochs

    def __init__(self, data, indices, indptr, Py_ssize_t n_cols, y, sample_weight, *,
                 str loss="logistic", double p=2.0, double sigma=1e-4, double l1=0.0,
                 bint fit_intercept=True, double intercept_scaling=1.0, double epsilon=0.1,
                 str order="permutation", uint64_t seed=0, alpha0=None, bint shrinking=True,
                 str l1_geometry="l2"):
        # the learners' rules (onlinepgs._options): no problem of options they refuse
        check_sdca_problem(loss=loss, p=p, sigma=sigma, l1=l1,
                           fit_intercept=bool(fit_intercept),
                           intercept_scaling=intercept_scaling, epsilon=epsilon, order=order,
                           l1_geometry=l1_geometry)
        self.loss = loss
        self.loss_code = LOSS_CODES[loss]
        self.classification = loss in CLASSIFICATION_LOSSES
        self.p = p
        self.q = p / (p - 1.0) if p < 2.0 else 2.0
        self.mm = mirror_init(p)
        self.l1 = l1
        self.pure_l1 = sigma == 0.0
        self.reg = REG_ENET if l1 > 0.0 else (REG_L2 if p == 2.0 else REG_LP)
        self.epsilon = epsilon
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.order = ORDERS[order]
        # shrinking needs a box that optimal rows sit on: logistic never reaches its
        # bounds, squared has none
        self.shrinking = (shrinking and self.reg == REG_L2 and self.order == ORDER_PERMUTATION
                          and self.loss_code != LOGISTIC and self.loss_code != SQUARED)
        self.rng = seed
        self._set_data(data, indices, indptr, n_cols, y, sample_weight)
        self.l1_geometry = None
        self.bound_l2 = self.bound_lq = 0.0
        if self.pure_l1:
            self._choose_geometry(l1_geometry)
        self.dim = n_cols + 1
        self.v_a = np.zeros(self.dim)
        self.w_a = np.zeros(self.dim if self.reg != REG_L2 else 1)
        self.u_a = np.zeros(self.dim if self.reg == REG_LQ else 1)
        self.v = self.v_a
        self.w = self.w_a
        self.u = self.u_a
        self.wbuf = np.zeros(self.dim if self.reg == REG_LP or self.reg == REG_LQ else 1)
        self.scale_m = 1.0
        self.gap_history = []
        self.check_epochs = []
        self.primal = self.dual = self.gap = self.inner_gap = self.inner_primal = INFINITY
        self._init_dual(alpha0)
        self.loss_at_zero = float(np.dot(self.sw_a, [loss_value(self.loss_code, 0.0, yy, self.epsilon)
                                                      for yy in self.y_a])) / max(self.n_rows, 1)
        if self.pure_l1:
            # 004's lam = eps / B^2 with eps = P(0) and B = P(0) / l1 (section 3.1); 3.2's
            # lam = eps / (3 ln d B^2) on (3 ln d / 2) ||w||_q^2 is (p - 1) eps / B^2 on
            # r(w) = ||w||_p^2 / (2 (p - 1)), the same smoothing error eps / 2 (sdca.md)
            sigma = (self.p - 1.0) * (l1 * l1 / self.loss_at_zero if self.loss_at_zero > 0.0
                                      else l1)
        self._set_sigma(sigma)

    # ---- set-up ----------------------------------------------------------------------------
    def _choose_geometry(self, str choice):
        """Pure l_1: section 3.1 (l2) or 3.2 (lq), by `choice` or, for "auto", by the bounds.

        d counts the coordinates that can be non-zero (the columns the rows reach, and the
        intercept), p = ln d / (ln d - 1) (q = ln d); d < e^2 would give p > 2, so 3.2 is 3.1
        there. The iterations of either grow as max_i kappa_i, i.e. as
        max ||x_i||_2^2 B^2 / eps (3.1) and (ln d - 1) max ||x_i||_q^2 B^2 / eps (3.2, our
        step's constant; the paper's 3 ln d max ||x_i||_inf^2 up to e^2 (ln d - 1) / (3 ln d)),
        with one B = P(0) / l1 >= ||w*||_1 >= ||w*||_2 for both (the smoothing's bound): "auto"
        takes lq when its product is smaller. O(nnz); bound_l2 and bound_lq keep both."""
        cdef double d, logd, gw
        visit = np.asarray(self.rows)
        d = float(np.unique(self.indices_a).shape[0] + (1 if self.fit_intercept else 0))
        logd = log(d) if d > 1.0 else 0.0
        self.bound_l2 = float(np.max(self.qnorm_a[visit])) if visit.shape[0] else 0.0
        if logd <= 2.0:  # p would exceed 2: 3.2 is 3.1
            self.bound_lq = INFINITY
            self.l1_geometry = "l2"
            return
        reg, p, q = self.reg, self.p, self.q
        self.reg, self.p, self.q = REG_LQ, logd / (logd - 1.0), logd
        qnorm = self._row_norms()
        self.bound_lq = (logd - 1.0) * (float(np.max(qnorm[visit])) if visit.shape[0] else 0.0)
        if choice == "lq" or (choice == "auto" and self.bound_lq < self.bound_l2):
            self.l1_geometry = "lq"
            self.mm = mirror_init(self.p)
            # a wide window: u = v - c is a small difference of large numbers once lam is
            # small, its largest entry swings by more than the map's 2-fold window, and
            # every swing cost an O(d) rescale (IMDB: one per few steps). q = ln d is
            # moderate, so M / 2^g .. 2^g M with g = 240 / q keeps every phi and N within
            # 2^-250 .. 2^+250 (with at most 2^24 columns): far inside the double range
            gw = floor(240.0 / self.q)
            self.mm.r_hi = exp2(gw)
            self.mm.norm_low = exp2(-gw * self.q)
            self.qnorm_a = qnorm
            self.qnorm = qnorm
        else:
            self.l1_geometry = "l2"
            self.reg, self.p, self.q = reg, p, q

    def _set_data(self, data, indices, indptr, Py_ssize_t n_cols, y, sample_weight):
        cdef Py_ssize_t m
        self.data_a = np.ascontiguousarray(data, dtype=np.float64)
        self.data = self.data_a
        self.indptr_a = np.ascontiguousarray(indptr, dtype=np.int64)
        self.indptr = self.indptr_a
        m = self.indptr.shape[0] - 1
        if m < 0:
            raise ValueError("indptr must have n_rows + 1 entries")
        self.n_rows = m
        self.n_cols = n_cols
        indices = np.asarray(indices)
        if indices.dtype == np.int64:
            self.indices_a = np.ascontiguousarray(indices)
            self.ind64 = self.indices_a
            self.idx64 = True
        else:
            self.indices_a = np.ascontiguousarray(indices, dtype=np.int32)
            self.ind32 = self.indices_a
            self.idx64 = False
        nnz = self.indices_a.shape[0]
        if (self.data_a.shape[0] != nnz or self.indptr_a[0] != 0 or self.indptr_a[m] != nnz
                or np.any(np.diff(self.indptr_a) < 0)):
            raise ValueError("data, indices and indptr do not describe one CSR matrix")
        if nnz and (self.indices_a.min() < 0 or self.indices_a.max() >= n_cols):
            raise ValueError(f"a column index lies outside [0, {n_cols})")
        if not np.all(np.isfinite(self.data_a)):
            raise ValueError("X contains NaN or infinity")
        self.span = int(self.indices_a.max()) + 2 if nnz else 1
        self.y_a = np.ascontiguousarray(y, dtype=np.float64)
        self.sw_a = np.ascontiguousarray(sample_weight, dtype=np.float64)
        if self.y_a.shape != (m,) or self.sw_a.shape != (m,):
            raise ValueError(f"y and sample_weight need {m} entries each")
        if not np.all(np.isfinite(self.y_a)):
            raise ValueError("y contains NaN or infinity")
        if self.classification and not np.all(np.abs(self.y_a) == 1.0):
            raise ValueError(f"the {self.loss!r} loss needs labels +-1")
        if not np.all(np.isfinite(self.sw_a) & (self.sw_a >= 0)):
            raise ValueError("sample_weight must be finite and >= 0")
        self.y = self.y_a
        self.sw = self.sw_a
        self.qnorm_a = self._row_norms()
        if not np.all(np.isfinite(self.qnorm_a)):
            raise ValueError("a row's norm overflows: rescale X")
        self.qnorm = self.qnorm_a
        visit = np.flatnonzero((self.sw_a > 0) & (self.qnorm_a > 0)).astype(np.int64)
        self.rows = visit
        self.n_visit = visit.shape[0]
        self.n_active = self.n_visit
        self.keep = np.ones(m, dtype=np.uint8)
        self.order_buf = np.zeros(self.n_visit if self.order == ORDER_RANDOM else 1, dtype=np.int64)
        self.viol_hi = INFINITY
        self.viol_lo = INFINITY

    def _row_norms(self):
        """||x_i||_D'^2 per row with the intercept's constant: l_2 (p = 2, elastic net) or
        l_q (p < 2), the latter scaled by the row's largest entry so no power overflows."""
        m = self.n_rows
        icpt = self.intercept_scaling if self.fit_intercept else 0.0
        counts = np.diff(self.indptr_a)
        filled = counts > 0
        starts = self.indptr_a[:-1][filled]
        if self.reg != REG_LP and self.reg != REG_LQ:
            sq = np.zeros(m)
            if filled.any():
                sq[filled] = np.add.reduceat(self.data_a ** 2, starts)
            return sq + icpt * icpt
        amax = np.full(m, icpt)
        if filled.any():
            amax[filled] = np.maximum(np.maximum.reduceat(np.abs(self.data_a), starts), icpt)
        safe = np.where(amax > 0, amax, 1.0)
        sums = (icpt / safe) ** self.q
        if filled.any():
            rel = np.abs(self.data_a) / np.repeat(safe, counts)
            sums[filled] += np.add.reduceat(rel ** self.q, starts)
        return np.where(amax > 0, (amax * sums ** (1.0 / self.q)) ** 2, 0.0)

    def _init_dual(self, alpha0):
        """b from alpha0 (or 0), clipped into the conjugates' domains. Rows SDCA never
        visits get their optimal value (0 for sw = 0)."""
        cdef Py_ssize_t m = self.n_rows, i
        sgn = self.y_a if self.classification else np.ones(m)
        lo = _box_lo(self.loss_code, self.epsilon)
        hi = _box_hi(self.loss_code, self.epsilon)
        if alpha0 is None:
            b = np.zeros(m)
        else:
            alpha0 = np.asarray(alpha0, dtype=np.float64)
            if alpha0.shape != (m,):
                raise ValueError(f"alpha0 has shape {alpha0.shape}, expected ({m},)")
            if not np.all(np.isfinite(alpha0)):
                raise ValueError("alpha0 contains NaN or infinity")
            with np.errstate(divide="ignore", invalid="ignore"):
                b = np.where(self.sw_a > 0, alpha0 / (sgn * self.sw_a), 0.0)
            b = np.clip(b, lo, hi)
        # x_i = 0 (no intercept): alpha_i only meets l at z = 0, where
        # alpha_i = -sw_i l'(0; y_i) attains the conjugate's sup (a zero Fenchel-Young term)
        for i in np.flatnonzero((self.sw_a > 0) & (self.qnorm_a == 0)):
            b[i] = _clip(-loss_derivative(self.loss_code, 0.0, self.y_a[i], self.epsilon)
                         / sgn[i], lo, hi)
        b[self.sw_a == 0] = 0.0
        self.b_a = np.ascontiguousarray(b)
        self.b = self.b_a
        if self.loss_code == LOGISTIC:
            inside = (b > 0) & (b < 1)
            with np.errstate(divide="ignore", invalid="ignore"):
                self.lodds = np.where(inside, np.log1p(-b) - np.log(b), np.nan)
        else:
            self.lodds = np.zeros(1)  # never read
    def _set_sigma(self, double sigma):
        """(Re)set sigma: kappa and coef per row, and v = X^T alpha / (sigma m) afresh."""
        cdef Py_ssize_t m = self.n_rows
        self.sigma = sigma
        inv = 1.0 / (sigma * m) if m else 0.0
        sgn = self.y_a if self.classification else np.ones(m)
        self.kappa = np.ascontiguousarray(self.sw_a * self.qnorm_a * inv)
        self.coef = np.ascontiguousarray(sgn * self.sw_a * inv)
        alpha = np.asarray(self.b_a) * np.asarray(self.coef)  # alpha_i / (sigma m)
        v = np.zeros(self.dim)
        v[1:] = self._csr().T @ alpha
        if self.fit_intercept:
            v[0] = self.intercept_scaling * alpha.sum()
        self.v_a[...] = v
        self._refresh()

    def _csr(self):
        import scipy.sparse as sp
        return sp.csr_matrix((self.data_a, self.indices_a, self.indptr_a),
                             shape=(self.n_rows, self.n_cols))

    cdef void _refresh(self) noexcept nogil:
        """w = grad g*(v) recomputed from v exactly (p < 2: M, phi, N and s_eff afresh)."""
        cdef Py_ssize_t j, dim = self.dim
        cdef double m, c
        cdef double* lam
        if self.reg == REG_ENET:
            c = self.l1 / self.sigma
            for j in range(dim):
                self.w[j] = _soft(self.v[j], c)
        elif self.reg == REG_LP or self.reg == REG_LQ:
            lam = &self.v[0]
            if self.reg == REG_LQ:
                c = self.l1 / self.sigma
                lam = &self.u[0]
                for j in range(dim):
                    lam[j] = _soft(self.v[j], c)
            m = mirror_scale(self.mm, mirror_max(lam, 1, NULL, dim))
            self.scale_m = m
            self.norm_n = mirror_count(self.mm, lam, &self.w[0], 1, NULL, dim, m, True)
            self.norm_peak = self.norm_n
            self._update_scale()

    cdef void _recount(self) noexcept nogil:
        """p < 2: N exactly from v at the current M (phi is exact already)."""
        self.norm_n = mirror_count(self.mm, &self.u[0] if self.reg == REG_LQ else &self.v[0],
                                   &self.w[0], 1, NULL, self.dim, self.scale_m, False)
        self.norm_peak = self.norm_n

    cdef inline void _update_scale(self) noexcept nogil:
        # w = (p - 1) ||v||_q^(2-q) |v|^(q-1) sgn v = (p - 1) M N^((2-q)/q) phi
        self.s_eff = (self.p - 1.0) * mirror_link(self.mm, self.scale_m, self.norm_n)

    cdef Core _core(self) noexcept nogil:
        cdef Core k
        k.data = &self.data[0] if self.data.shape[0] else NULL
        k.indptr = &self.indptr[0]
        k.y = &self.y[0] if self.n_rows else NULL
        k.kappa = &self.kappa[0] if self.n_rows else NULL
        k.coef = &self.coef[0] if self.n_rows else NULL
        k.b = &self.b[0] if self.n_rows else NULL
        k.lodds = &self.lodds[0]
        k.v = &self.v[0]
        k.w = &self.w[0]
        k.u = &self.u[0]
        k.icpt = self.intercept_scaling if self.fit_intercept else 0.0
        k.eps = self.epsilon
        k.c = self.l1 / self.sigma
        k.q = self.q
        k.pm1 = self.p - 1.0
        k.loss = self.loss_code
        return k

    cdef inline const int32_t* _i32(self) noexcept nogil:
        return &self.ind32[0] if (not self.idx64 and self.ind32.shape[0]) else NULL

    cdef inline const int64_t* _i64(self) noexcept nogil:
        return &self.ind64[0] if (self.idx64 and self.ind64.shape[0]) else NULL

    # ---- the epoch -------------------------------------------------------------------------
    cdef Py_ssize_t _order(self) noexcept nogil:
        """Arrange this epoch's rows (active ones, rows[:n_active]); returns their number."""
        cdef Py_ssize_t t, j, n = self.n_active
        cdef int64_t tmp
        if self.order == ORDER_PERMUTATION:
            for t in range(n - 1, 0, -1):
                j = below(&self.rng, t + 1)
                tmp = self.rows[t]
                self.rows[t] = self.rows[j]
                self.rows[j] = tmp
        elif self.order == ORDER_RANDOM:
            for t in range(n):
                self.order_buf[t] = self.rows[below(&self.rng, n)]
        return n

    cdef void _epoch(self) noexcept nogil:
        cdef Core k = self._core()
        cdef Py_ssize_t n = self._order()
        cdef const int64_t* rows
        if n == 0:
            return
        rows = &self.order_buf[0] if self.order == ORDER_RANDOM else &self.rows[0]
        if self.shrinking:
            if self.idx64:
                self.n_active = _epoch_l2_shrink_any(k, self._i64(), &self.rows[0], n,
                                                     &self.viol_hi, &self.viol_lo)
            else:
                self.n_active = _epoch_l2_shrink_any(k, self._i32(), &self.rows[0], n,
                                                     &self.viol_hi, &self.viol_lo)
        elif self.idx64:
            self._steps(k, self._i64(), rows, n)
        else:
            self._steps(k, self._i32(), rows, n)
        self.n_steps += n

    cdef void _steps(self, Core k, const index_t* indices, const int64_t* rows,
                     Py_ssize_t n) noexcept nogil:
        if self.reg == REG_L2:
            _epoch_l2_any(k, indices, rows, n)
        elif self.reg == REG_ENET:
            _epoch_enet(k, indices, rows, n)
        elif self.reg == REG_LQ:
            self._epoch_lq(k, indices, rows, n)
        else:
            self._epoch_lp(k, indices, rows, n)

    cdef void _epoch_lp(self, Core k, const index_t* indices, const int64_t* rows,
                        Py_ssize_t n) noexcept nogil:
        """p < 2: margins s_eff <phi, x>; each touched coordinate updates v_j, phi_j and N
        through the l_q map (_mirror.pxd), whose upkeep follows every row that moved."""
        cdef Py_ssize_t t, start, nnz
        cdef int64_t i
        cdef double z, b0, bn, d, vo, dn, inv_m
        cdef double icpt = k.icpt
        cdef Mirror mm = self.mm
        cdef double* v = k.v
        cdef double* phi = k.w
        cdef const double* vals
        cdef const index_t* idx
        cdef int outgrown
        for t in range(n):
            i = rows[t]
            start = k.indptr[i]
            nnz = k.indptr[i + 1] - start
            vals = k.data + start
            idx = indices + start
            z = self.s_eff * (sparse_dot(phi + 1, 1, vals, idx, nnz) + phi[0] * icpt)
            b0 = k.b[i]
            bn = _step(k.loss, b0, z, k.y[i], k.kappa[i], k.eps, k.lodds + i)
            if bn == b0:
                continue
            k.b[i] = bn
            d = (bn - b0) * k.coef[i]
            inv_m = 1.0 / self.scale_m
            outgrown = 0
            dn = 0.0
            if icpt != 0.0:
                vo = v[0]
                v[0] = vo + d * icpt
                dn = mirror_touch(mm, vo, v[0], phi[0], inv_m, &phi[0], &outgrown)
            # v += d x_i is lambda -= (-d) x_i
            dn += mirror_row(mm, v + 1, phi + 1, 1, vals, idx, nnz, -d, inv_m,
                             NULL, NULL, 0.0, False, &outgrown)
            self.norm_n += dn
            self.touches += nnz + 1
            # the upkeep of the map, in PGS's order (its _upkeep_norms)
            if not outgrown and mirror_cancelled(self.norm_n, self.norm_peak):
                self._recount()
            if mirror_refresh_due(mm, self.norm_n, outgrown):
                self._refresh()  # M, phi and N afresh (O(dim), rare)
            elif self.norm_n < 0.0:
                self.norm_n = 0.0
            if self.norm_n > self.norm_peak:
                self.norm_peak = self.norm_n
            if mirror_drift_due(self.touches, self.span):
                self.touches = 0
                self._recount()
            self._update_scale()

    cdef void _epoch_lq(self, Core k, const index_t* indices, const int64_t* rows,
                        Py_ssize_t n) noexcept nogil:
        """Section 3.2: as `_epoch_lp`, but the l_q map acts on u = soft(v, c): a touched
        coordinate moves v_j, then u_j (a no-op while |v_j| stays below c, so phi and N
        only follow the coordinates that are or become active), O(nnz) per step."""
        cdef Py_ssize_t t, e, j, start, nnz
        cdef int64_t i
        cdef double z, b0, bn, d, uo, un, dn, inv_m, c = k.c
        cdef double icpt = k.icpt
        cdef Mirror mm = self.mm
        cdef double* v = k.v
        cdef double* u = k.u
        cdef double* phi = k.w
        cdef const double* vals
        cdef const index_t* idx
        cdef int outgrown
        for t in range(n):
            i = rows[t]
            start = k.indptr[i]
            nnz = k.indptr[i + 1] - start
            vals = k.data + start
            idx = indices + start
            z = self.s_eff * (sparse_dot(phi + 1, 1, vals, idx, nnz) + phi[0] * icpt)
            b0 = k.b[i]
            bn = _step(k.loss, b0, z, k.y[i], k.kappa[i], k.eps, k.lodds + i)
            if bn == b0:
                continue
            k.b[i] = bn
            d = (bn - b0) * k.coef[i]
            inv_m = 1.0 / self.scale_m
            outgrown = 0
            dn = 0.0
            if icpt != 0.0:
                v[0] += d * icpt
                uo = u[0]
                un = _soft(v[0], c)
                if un != uo:
                    u[0] = un
                    dn += mirror_touch(mm, uo, un, phi[0], inv_m, &phi[0], &outgrown)
            for e in range(nnz):
                j = idx[e] + 1
                v[j] += d * vals[e]
                uo = u[j]
                un = _soft(v[j], c)
                if un != uo:
                    u[j] = un
                    dn += mirror_touch(mm, uo, un, phi[j], inv_m, &phi[j], &outgrown)
            self.norm_n += dn
            self.touches += nnz + 1
            if not outgrown and mirror_cancelled(self.norm_n, self.norm_peak):
                self._recount()
            # u = 0 (every |v_j| <= c, the usual start) has N = 0 with nothing to scale:
            # no refresh until a coordinate turns on (else one O(dim) refresh per step)
            if outgrown or (self.norm_n > 0.0 and mirror_refresh_due(mm, self.norm_n, 0)):
                self._refresh()
            elif self.norm_n < 0.0:
                self.norm_n = 0.0
            if self.norm_n > self.norm_peak:
                self.norm_peak = self.norm_n
            if mirror_drift_due(self.touches, self.span):
                self.touches = 0
                self._recount()
            self._update_scale()

    # ---- the duality gap -------------------------------------------------------------------
    cdef void _check(self) noexcept nogil:
        """P(w), D(alpha) and their gap at w = grad g*(v), in one pass over every row; with
        shrinking, also the next active set (rows not provably optimal for this w)."""
        cdef Py_ssize_t i, j, t, n, dim = self.dim, m = self.n_rows, start, nnz
        cdef double icpt = self.intercept_scaling if self.fit_intercept else 0.0
        cdef double z, yi, swi, a, lv, cv, fy, loss_sum = 0.0, conj_sum = 0.0, fy_sum = 0.0
        cdef double g_w, g_star, wv = 0.0, wj, n2 = 0.0, n1 = 0.0, sg, bi, vmax = 0.0
        cdef double* lam = &self.u[0] if self.reg == REG_LQ else &self.v[0]
        cdef double lo = _box_lo(self.loss_code, self.epsilon)
        cdef double hi = _box_hi(self.loss_code, self.epsilon)
        cdef double* w
        cdef const double* data = &self.data[0] if self.data.shape[0] else NULL
        cdef const int32_t* i32 = self._i32()
        cdef const int64_t* i64 = self._i64()
        cdef int loss = self.loss_code
        cdef int64_t tmp
        self._refresh()
        if self.reg == REG_L2:
            w = &self.v[0]
        elif self.reg == REG_ENET:
            w = &self.w[0]
        else:
            w = &self.wbuf[0]
            for j in range(dim):
                self.wbuf[j] = self.s_eff * self.w[j]
        for i in range(m):
            swi = self.sw[i]
            if swi == 0.0:
                continue
            start = self.indptr[i]
            nnz = self.indptr[i + 1] - start
            if i64 != NULL:
                z = sparse_dot(w + 1, 1, data + start, i64 + start, nnz)
            elif i32 != NULL:
                z = sparse_dot(w + 1, 1, data + start, i32 + start, nnz)
            else:
                z = 0.0
            z += w[0] * icpt
            yi = self.y[i]
            sg = yi if self.classification else 1.0
            bi = self.b[i]
            a = sg * bi  # alpha_i / sw_i
            lv = loss_value(loss, z, yi, self.epsilon)
            cv = loss_conjugate(loss, -a, yi, self.epsilon)
            fy = lv + cv + a * z
            loss_sum += swi * lv
            conj_sum += swi * cv
            fy_sum += swi * fy
            # at a bound with a zero Fenchel-Young term: optimal for this w
            self.keep[i] = not ((bi <= lo or bi >= hi) and fy <= 0.0)
        for j in range(dim):
            wj = w[j]
            wv += wj * self.v[j]
            n2 += wj * wj
            n1 += fabs(wj)
            if fabs(self.v[j]) > vmax:
                vmax = fabs(self.v[j])
        if self.reg == REG_L2:
            g_w = 0.5 * n2
            g_star = 0.5 * n2
        elif self.reg == REG_ENET:
            g_w = 0.5 * n2 + (self.l1 / self.sigma) * n1
            g_star = 0.5 * n2
        else:
            # LQ: g = r + c ||.||_1 has g*(v) = r*(soft(v, c)) (ALGORITHM.md, 004 eq. 10)
            g_w = reg_value(lp_norm(w, dim, 1, self.p), self.p, INFINITY)
            g_star = reg_conjugate(lp_norm(lam, dim, 1, self.q), self.p, INFINITY)
            if self.reg == REG_LQ:
                g_w += (self.l1 / self.sigma) * n1
        self.loss_mean = loss_sum / m if m else 0.0
        self.reg_w = g_w
        self.primal = self.sigma * g_w + self.loss_mean
        self.dual = -(conj_sum / m if m else 0.0) - self.sigma * g_star
        self.gap = (fy_sum / m if m else 0.0) + self.sigma * (g_w + g_star - wv)
        self.inner_gap = self.gap
        self.inner_primal = self.primal
        if self.pure_l1:
            self._l1_certificate(n1, vmax)
        if self.shrinking:
            # active rows first, in their current order
            n = 0
            for t in range(self.n_visit):
                i = self.rows[t]
                if self.keep[i]:
                    tmp = self.rows[n]
                    self.rows[n] = i
                    self.rows[t] = tmp
                    n += 1
            self.n_active = n
        self.n_checks += 1

    cdef void _l1_certificate(self, double w_l1, double v_inf) noexcept nogil:
        """Primal, certificate and dual bound of the l_1 objective (module docstring)."""
        cdef double p1 = self.l1 * w_l1 + self.loss_mean, bound, cert_a, cert_b, s
        bound = p1 / self.l1
        # the smoothing's share sigma r(w*) <= sigma B^2 / (2 (p - 1)), B >= ||w*||_1 >= ||w*||_p
        cert_a = p1 - self.dual + 0.5 * self.sigma * bound * bound / (self.p - 1.0)
        s = 1.0
        if self.sigma * v_inf > self.l1:
            s = self.l1 / (self.sigma * v_inf)
        cert_b = p1 + self._conjugate_mean(s)
        self.primal = p1
        self.gap = cert_a if cert_a < cert_b else cert_b
        self.dual = p1 - self.gap

    cdef double _conjugate_mean(self, double scale) noexcept nogil:
        cdef Py_ssize_t i, m = self.n_rows
        cdef double total = 0.0, sg
        for i in range(m):
            if self.sw[i] > 0.0:
                sg = self.y[i] if self.classification else 1.0
                total += self.sw[i] * loss_conjugate(self.loss_code, -scale * sg * self.b[i],
                                                     self.y[i], self.epsilon)
        return total / m if m else 0.0

    def check(self):
        """Compute the duality gap now (one pass over the rows); returns `gap_info()`."""
        with nogil:
            self._check()
        return self.gap_info()

    def gap_info(self):
        """The last check: primal P(w), dual bound, gap (a certified upper bound on
        P(w) - min P, summed from Fenchel-Young terms), mean loss, g(w); for pure l_1 also
        the smoothed problem's own primal and gap and its l_2 weight."""
        info = dict(primal=self.primal, dual=self.dual, gap=self.gap, loss=self.loss_mean,
                    reg=self.reg_w)
        if self.pure_l1:
            info.update(smoothing=self.sigma, smoothed_primal=self.inner_primal,
                        smoothed_gap=self.inner_gap)
        return info

    # ---- driving ---------------------------------------------------------------------------
    def run(self, int max_epochs, double tol, check_every=1, verbose=False, label=""):
        """Epochs until gap <= tol * |P(w)| or max_epochs; returns whether the gap criterion
        was met. The gap is checked after the last epoch and every check_every epochs, or
        with check_every="auto" on `next_check`'s schedule."""
        cdef int e, since = 0, interval = 1
        cdef bint auto = isinstance(check_every, str)
        if auto and check_every != "auto":
            raise ValueError(f"check_every must be an int >= 1 or 'auto', got {check_every!r}")
        if not auto:
            interval = int(check_every)
        if max_epochs < 0 or interval < 1:
            raise ValueError("max_epochs must be >= 0 and check_every >= 1")
        if not (tol >= 0.0):
            raise ValueError(f"tol must be >= 0, got {tol!r}")
        checks = []  # (epoch, relative gap) of this call's checks, for the schedule
        for e in range(max_epochs):
            with nogil:
                self._epoch()
            self.n_epochs += 1
            since += 1
            if since >= interval or e == max_epochs - 1:
                since = 0
                with nogil:
                    self._check()
                self.gap_history.append(self.gap)
                self.check_epochs.append(self.n_epochs)
                if verbose:
                    extra = (f" (lam {self.sigma:.3g}, its gap {self.inner_gap:.3e})"
                             if self.pure_l1 else "")
                    print(f"SDCA{label} epoch {self.n_epochs}: primal {self.primal:.12g} "
                          f"gap {self.gap:.3e} relative {self.relative_gap():.3e} "
                          f"active {self.n_active}/{self.n_visit}{extra}", flush=True)
                if self.gap <= tol * fabs(self.primal):
                    return True
                if (self.pure_l1 and self.inner_gap <= 0.5 * tol * fabs(self.primal)
                        and e < max_epochs - 1):
                    # the smoothed problem is solved as far as it can help: smaller lam
                    # (not after the last epoch: w would move off the certified point)
                    self.set_sigma(self.sigma / 10.0)
                    checks = []
                else:
                    checks.append((e + 1, self.relative_gap()))
                if auto:
                    interval = next_check(checks, tol, 4 if self.shrinking else 1)
        return False

    def relative_gap(self):
        """gap / |P(w)| of the last check (0 when both are 0)."""
        if self.primal != 0.0:
            return self.gap / fabs(self.primal)
        return 0.0 if self.gap == 0.0 else INFINITY

    def steps(self, rows):
        """One step per entry of `rows`, in that order, without shrinking (tests, custom
        orders); rows with sw = 0 or x = 0 are skipped, as in the epochs."""
        r_arr = np.ascontiguousarray(rows, dtype=np.int64)
        if r_arr.shape[0] and (r_arr.min() < 0 or r_arr.max() >= self.n_rows):
            raise ValueError("row index out of range")
        r_arr = np.ascontiguousarray(r_arr[(self.sw_a[r_arr] > 0) & (self.qnorm_a[r_arr] > 0)])
        cdef int64_t[::1] r = r_arr
        cdef Core k = self._core()
        cdef Py_ssize_t n = r.shape[0]
        if n == 0:
            return
        with nogil:
            if self.idx64:
                self._steps(k, self._i64(), &r[0], n)
            else:
                self._steps(k, self._i32(), &r[0], n)
        self.n_steps += n

    # ---- read-out --------------------------------------------------------------------------
    def weights(self):
        """w = grad g*(v) as a (dim,) array, the intercept's coordinate first."""
        self._refresh()
        if self.reg == REG_L2:
            return np.array(self.v_a)
        if self.reg == REG_ENET:
            return np.array(self.w_a)
        return self.s_eff * np.asarray(self.w_a)  # LP, LQ: s phi

    @property
    def alpha(self):
        """The dual variables alpha_i (alpha_i / (s_i sw_i) lies in the loss's box)."""
        sgn = self.y_a if self.classification else 1.0
        return np.asarray(self.b_a) * sgn * self.sw_a

    @property
    def v_vector(self):
        """v = X^T alpha / (sigma m), the intercept's coordinate first."""
        return np.array(self.v_a)

    def set_sigma(self, double sigma):
        """Change sigma keeping alpha (the dual point stays feasible); v and w follow."""
        if not (sigma > 0.0 and isfinite(sigma)):
            raise ValueError(f"sigma must be a positive finite number, got {sigma!r}")
        self._set_sigma(sigma)
        self.n_active = self.n_visit
        self.viol_hi = INFINITY
        self.viol_lo = INFINITY
