# cython: language_level=3
"""SDCA on the true multiclass dual (Shalev-Shwartz and Zhang, "Proximal stochastic dual
coordinate ascent", 2012, section 3.3): Crammer-Singer and multinomial logistic, p = 2.

The primal over K weight vectors W = (w_1..w_K) (the intercept is coordinate 0, a constant
feature of value `intercept_scaling` inside each w_k, as in `_sdca`) is

    P(W) = (sigma / 2) ||W||_F^2 + (1/m) sum_i sw_i l(W^T x_i; y_i),

l the loss of K scores (`_multiclass.pxd`). Its dual, in one K-vector beta_i per row
(the dual variable a_i = sw_i beta_i, so -a_i / sw_i = -beta_i is the conjugate's argument,
feasible iff pi_i = e_y - beta_i lies in the probability simplex), is

    D(beta) = -(1/m) sum_i sw_i l*(-beta_i; y_i) - (sigma / 2) ||V||_F^2,
    V = X^T A / (sigma m),  W = V,

kept incrementally: a step on row i moves V by x_i (sw_i d)^T / (sigma m), O(K nnz(x_i)).
The exact maximization of D over beta_i, with z = W^T x_i the current scores and
kappa = sw_i ||x_i||^2 / (sigma m) (both in the row's units), is

    max_beta  -l*(-beta; y) - (beta - beta0) . z - (kappa / 2) ||beta - beta0||^2.

Crammer-Singer (l*(-beta; y) = -beta_y): the constraints are beta_k <= [k = y],
sum_k beta_k = 0, and the step is the Euclidean projection of t = beta0 - (z - e_y) / kappa
onto that set: beta_k = min(C_k, t_k - theta), C_k = [k = y], with theta the root of
sum_k max(0, theta - (t_k - C_k)) = 1, found exactly by sorting the K values t_k - C_k
(Crammer and Singer 2001; Keerthi, Sundararajan, Chang, Hsieh and Lin 2008, "A sequential
dual method for large scale multi-class linear SVMs", whose sub-problem this is with
C = sw_i / (sigma m)). O(K log K) a row.

Multinomial (l*(-beta; y) = sum_k pi_k log pi_k, pi = e_y - beta): in pi the row's problem
is max over the simplex of H(pi) + (pi - pi0) . z - (kappa / 2) ||pi - pi0||^2. Its
optimality conditions are log pi_k + kappa pi_k = a_k - mu, a_k = z_k + kappa pi0_k - 1,
with the multiplier mu of sum pi = 1. For a given mu each pi_k is the root of the increasing
convex s + kappa e^s = a_k - mu (s = log pi_k; Newton from the right of the root, which
converges monotonically); sum_k pi_k(mu) is decreasing in mu and mu lies in
[max a - kappa, max a + log K - kappa / K] (some pi_k >= 1/K, none > 1): a safeguarded
Newton iteration on mu (bisection when a step leaves the bracket) until
|sum pi - 1| <= 1e-13 (a nested Newton in the spirit of Yu, Huang and Lin 2011, "Dual
coordinate descent methods for logistic regression and maximum entropy models", which
solve the same row problem pairwise). pi is then normalized onto the simplex and the step
is kept only if the row's objective does not decrease (computed in closed form, O(K)): so
every step is feasible and the dual never descends, whatever the inner solve's rounding.

The duality gap P(W) - D(beta) is, after W is recomputed exactly from beta (no drift from
the incremental updates), the sum of the Fenchel-Young terms
(1/m) sum_i sw_i [l(z_i; y_i) + l*(-beta_i; y_i) + beta_i . z_i] >= 0 (since
sigma ||W||^2 = (1/m) sum_i sw_i beta_i . z_i when W = V): no cancellation between P and D.
Stop once gap <= tol * P(W). Rows are visited in a fresh random permutation each epoch.
Crammer-Singer shrinks per-row active sets of classes (`_cs_row`; checks and stopping always
run over every row and class); "auto" checks run when the gap predicted from the epoch's
exact dual increase reaches tol (`run`; docs/design/multiclass.md, SDCA section).
"""
cimport cython
import time

import numpy as np
cimport numpy as cnp
from libc.math cimport fabs, sqrt, log, exp, isfinite, INFINITY, fmin, fmax
from libc.stdint cimport uint64_t, int64_t, int32_t
from libc.stdlib cimport malloc, free

from onlinepgs._core._multiclass cimport (mc_loss_grad, mc_conjugate, MC_MULTINOMIAL,
                                          MC_CRAMMER_SINGER)
from onlinepgs._core._random cimport below
from onlinepgs._core._sdca import next_check
from onlinepgs._options import check_sdca_problem

cnp.import_array()

MULTI_CLASS_CODES = {"multinomial": MC_MULTINOMIAL, "crammer_singer": MC_CRAMMER_SINGER}


# ---- the row steps -------------------------------------------------------------------------
cdef void cs_step(const double* beta0, const double* z, Py_ssize_t K, Py_ssize_t y,
                  double kappa, double* beta, double* work) noexcept nogil:
    """Crammer-Singer's exact row step (module docstring) into beta; work holds K doubles."""
    cdef Py_ssize_t k, r, j
    cdef double t, v, total, theta = 0.0
    # work = t - C, sorted ascending (insertion sort: K is small)
    for k in range(K):
        t = beta0[k] - (z[k] - (1.0 if k == y else 0.0)) / kappa
        beta[k] = t
        v = t - (1.0 if k == y else 0.0)
        j = k
        while j > 0 and work[j - 1] > v:
            work[j] = work[j - 1]
            j -= 1
        work[j] = v
    total = 0.0
    for r in range(K):
        total += work[r]
        theta = (1.0 + total) / (r + 1)
        if r == K - 1 or theta <= work[r + 1]:
            break
    for k in range(K):
        beta[k] = fmin(1.0 if k == y else 0.0, beta[k] - theta)


cdef inline double _log_root(double c, double kappa, double start) noexcept nogil:
    """The root s of s + kappa e^s = c (kappa > 0), Newton from `start` if it lies right
    of the root, else from an upper bound of it (monotone convergence either way)."""
    cdef double s, e, h, step, ub
    cdef int it
    ub = c
    if c > 0.0:
        ub = fmin(c, fmax(0.0, log(c / kappa)))
    s = start if (start <= ub and start + kappa * exp(start) >= c) else ub
    for it in range(60):
        e = kappa * exp(s)
        h = s + e - c
        step = h / (1.0 + e)
        s -= step
        if fabs(step) <= 1e-15 * (1.0 + fabs(s)):
            break
    return s


cdef double _mn_row_objective(const double* pi, const double* pi0, const double* z,
                              Py_ssize_t K, double kappa) noexcept nogil:
    cdef Py_ssize_t k
    cdef double value = 0.0, d
    for k in range(K):
        d = pi[k] - pi0[k]
        value += d * z[k] - 0.5 * kappa * d * d
        if pi[k] > 0.0:
            value -= pi[k] * log(pi[k])
    return value


cdef void mn_step(const double* beta0, const double* z, Py_ssize_t K, Py_ssize_t y,
                  double kappa, double* beta, double* work) noexcept nogil:
    """The multinomial row step (module docstring) into beta; work holds 4 K doubles."""
    cdef double* pi0 = work
    cdef double* a = work + K
    cdef double* s = work + 2 * K
    cdef double* pi = work + 3 * K
    cdef Py_ssize_t k
    cdef int it
    cdef double amax = -INFINITY, lo, hi, mu, F, dF, total, e, mun, lse
    for k in range(K):
        pi0[k] = (1.0 if k == y else 0.0) - beta0[k]
        a[k] = z[k] + kappa * pi0[k] - 1.0
        if a[k] > amax:
            amax = a[k]
    if kappa <= 0.0:  # an empty row: the plain softmax maximizes H(pi) + pi . z
        total = 0.0
        for k in range(K):
            total += exp(z[k] - amax)
        for k in range(K):
            beta[k] = (1.0 if k == y else 0.0) - exp(z[k] - amax) / total
        return
    lo = amax - kappa
    hi = amax + log(<double>K) - kappa / K
    total = 0.0
    for k in range(K):
        total += exp(a[k] - amax)
    lse = amax + log(total)
    mu = fmin(fmax(lse - kappa / K, lo), hi)
    for k in range(K):
        s[k] = INFINITY
    for it in range(100):
        total = 0.0
        dF = 0.0
        for k in range(K):
            s[k] = _log_root(a[k] - mu, kappa, s[k])
            e = exp(s[k])
            pi[k] = e
            total += e
            dF -= e / (1.0 + kappa * e)
        F = total - 1.0
        if fabs(F) <= 1e-13:
            break
        if F > 0.0:
            lo = mu
        else:
            hi = mu
        mun = mu - F / dF
        if not (mun > lo and mun < hi):
            mun = 0.5 * (lo + hi)
        if mun == mu:
            break
        mu = mun
        for k in range(K):
            s[k] = INFINITY  # mu moved left: the previous roots are left of the new ones
        if F < 0.0:
            pass
    # normalize onto the simplex; keep the step only if it ascends
    for k in range(K):
        pi[k] /= total
    if _mn_row_objective(pi, pi0, z, K, kappa) >= _mn_row_objective(pi0, pi0, z, K, kappa):
        for k in range(K):
            beta[k] = (1.0 if k == y else 0.0) - pi[k]
    else:
        for k in range(K):
            beta[k] = beta0[k]


def cs_step_py(beta0, z, Py_ssize_t y, double kappa):
    """Crammer-Singer's row step on NumPy input (for tests): the maximizer beta."""
    cdef double[::1] b0 = np.ascontiguousarray(beta0, dtype=np.float64)
    cdef double[::1] zz = np.ascontiguousarray(z, dtype=np.float64)
    cdef Py_ssize_t K = b0.shape[0]
    out = np.empty(K)
    cdef double[::1] o = out
    cdef double[::1] work = np.empty(K)
    cs_step(&b0[0], &zz[0], K, y, kappa, &o[0], &work[0])
    return out


def mn_step_py(beta0, z, Py_ssize_t y, double kappa):
    """The multinomial row step on NumPy input (for tests): the maximizer beta."""
    cdef double[::1] b0 = np.ascontiguousarray(beta0, dtype=np.float64)
    cdef double[::1] zz = np.ascontiguousarray(z, dtype=np.float64)
    cdef Py_ssize_t K = b0.shape[0]
    out = np.empty(K)
    cdef double[::1] o = out
    cdef double[::1] work = np.empty(4 * K)
    mn_step(&b0[0], &zz[0], K, y, kappa, &o[0], &work[0])
    return out


# ---- the losses on NumPy arrays (the certificates of `onlinepgs.duality`) ------------------
def mc_losses(str multi_class, scores, labels):
    """Each row's loss and (sub)gradient: (loss (m,), grad (m, K)) for scores (m, K) and
    class indices (m,)."""
    cdef int code = MULTI_CLASS_CODES[multi_class]
    cdef double[:, ::1] Z = np.ascontiguousarray(scores, dtype=np.float64)
    cdef int64_t[::1] y = np.ascontiguousarray(labels, dtype=np.int64)
    cdef Py_ssize_t m = Z.shape[0], K = Z.shape[1], i
    loss = np.empty(m)
    grad = np.empty((m, K))
    cdef double[::1] L = loss
    cdef double[:, ::1] G = grad
    with nogil:
        for i in range(m):
            L[i] = mc_loss_grad(code, &Z[i, 0], K, y[i], &G[i, 0])
    return loss, grad


def mc_conjugates(str multi_class, u, labels):
    """Each row's l*(u_i; y_i) (+inf outside the domain) for u (m, K)."""
    cdef int code = MULTI_CLASS_CODES[multi_class]
    cdef double[:, ::1] U = np.ascontiguousarray(u, dtype=np.float64)
    cdef int64_t[::1] y = np.ascontiguousarray(labels, dtype=np.int64)
    cdef Py_ssize_t m = U.shape[0], K = U.shape[1], i
    out = np.empty(m)
    cdef double[::1] o = out
    with nogil:
        for i in range(m):
            o[i] = mc_conjugate(code, &U[i, 0], K, y[i])
    return out


# ---- the solver ------------------------------------------------------------------------------
cdef class MulticlassSDCA:
    """One multiclass SDCA problem over CSR rows (see the module docstring).

    Parameters
    ----------
    data, indices, indptr, n_features : the CSR rows (float64, int32 indices)
    y : int64 array of class indices in 0..K-1
    sw : float64 array, the sample weights (rows of weight 0 keep beta_i = 0)
    K : int >= 2
    multi_class : {"multinomial", "crammer_singer"}
    sigma : float > 0
    fit_intercept, intercept_scaling : the constant feature (coordinate 0)
    seed : int, the permutations' seed
    """
    cdef const double[::1] data
    cdef const int32_t[::1] indices
    cdef const int64_t[::1] indptr
    cdef const int64_t[::1] y
    cdef const double[::1] sw
    cdef double[:, ::1] W          # (1 + n_features, K): the K weights of a feature together
    cdef double[:, ::1] B          # (m, K): beta
    cdef double[::1] sqnorm
    cdef double[::1] fy            # each row's share of the gap at the last check
    cdef int32_t[:, ::1] act       # (m, K): a permutation of the classes, the active first
    cdef int32_t[::1] nact         # active classes of each row (<= 1: the row is skipped)
    cdef bint shrink
    cdef double gain               # the dual's increase over the last epoch (exact sums)
    cdef Py_ssize_t m, d1, K
    cdef int code
    cdef double sigma, xs
    cdef uint64_t rng
    cdef public int n_epochs, reset_epochs
    cdef public bint estimate_checks
    cdef public int focus_sweeps
    cdef public double focus_share
    cdef public double primal, dual, gap, epoch_seconds, check_seconds
    cdef public list gap_history, check_epochs, gains, epoch_times

    def __init__(self, data, indices, indptr, Py_ssize_t n_features, y, sw, Py_ssize_t K,
                 str multi_class, double sigma, bint fit_intercept=True,
                 double intercept_scaling=1.0, uint64_t seed=0):
        if multi_class not in MULTI_CLASS_CODES:
            raise ValueError(f"multi_class must be one of {sorted(MULTI_CLASS_CODES)}, "
                             f"got {multi_class!r}")
        # the learners' rules (onlinepgs._options): a coupled loss needs sigma > 0
        check_sdca_problem(multi_class=multi_class, sigma=sigma,
                           intercept_scaling=intercept_scaling,
                           fit_intercept=bool(fit_intercept))
        self.data = np.ascontiguousarray(data, dtype=np.float64)
        self.indices = np.ascontiguousarray(indices, dtype=np.int32)
        self.indptr = np.ascontiguousarray(indptr, dtype=np.int64)
        self.y = np.ascontiguousarray(y, dtype=np.int64)
        self.sw = np.ascontiguousarray(sw, dtype=np.float64)
        self.m = self.indptr.shape[0] - 1
        self.d1 = n_features + 1
        self.K = K
        self.code = MULTI_CLASS_CODES[multi_class]
        self.sigma = sigma
        self.xs = intercept_scaling if fit_intercept else 0.0
        self.rng = seed
        self.W = np.zeros((self.d1, K))
        self.B = np.zeros((self.m, K))
        norms = np.zeros(self.m)
        cdef double[::1] nv = norms
        cdef Py_ssize_t i, p
        for i in range(self.m):
            nv[i] = self.xs * self.xs
            for p in range(self.indptr[i], self.indptr[i + 1]):
                nv[i] += self.data[p] * self.data[p]
        self.sqnorm = norms
        self.fy = np.zeros(self.m)
        self.act = np.tile(np.arange(K, dtype=np.int32), (self.m, 1))
        self.nact = np.full(self.m, K, dtype=np.int32)
        self.shrink = False
        self.gain = 0.0
        self.n_epochs = 0
        self.reset_epochs = 10
        self.estimate_checks = True
        self.focus_sweeps = 50
        self.focus_share = 1e-3
        self.primal = INFINITY
        self.dual = -INFINITY
        self.gap = INFINITY
        self.gap_history = []
        self.check_epochs = []
        self.gains = []
        self.epoch_times = []
        self.epoch_seconds = 0.0
        self.check_seconds = 0.0

    @property
    def beta(self):
        return np.asarray(self.B).copy()

    def active_counts(self):
        """Each row's number of active classes after the last epoch (shrinking; K without
        it, 0 or 1 for a skipped row)."""
        return np.asarray(self.nact).copy()

    def weights(self):
        """(K, 1 + n_features): row k is w_k with the intercept's weight first."""
        return np.asarray(self.W).T.copy()

    cdef void _scores(self, Py_ssize_t i, double* z) noexcept nogil:
        cdef Py_ssize_t k, p, j
        cdef double x
        cdef double* row
        for k in range(self.K):
            z[k] = self.xs * self.W[0, k]
        for p in range(self.indptr[i], self.indptr[i + 1]):
            x = self.data[p]
            row = &self.W[self.indices[p] + 1, 0]
            for k in range(self.K):
                z[k] += x * row[k]

    cdef void _move(self, Py_ssize_t i, const double* delta) noexcept nogil:
        cdef Py_ssize_t k, p
        cdef double x
        cdef double* row
        if self.xs != 0.0:
            for k in range(self.K):
                self.W[0, k] += self.xs * delta[k]
        for p in range(self.indptr[i], self.indptr[i + 1]):
            x = self.data[p]
            row = &self.W[self.indices[p] + 1, 0]
            for k in range(self.K):
                row[k] += x * delta[k]

    cdef void _scores_active(self, Py_ssize_t i, const int32_t* A, Py_ssize_t na,
                             double* z) noexcept nogil:
        """z[a] = the score of class A[a] for a < na (the shrunk classes' are not needed)."""
        cdef Py_ssize_t a, p
        cdef double x
        cdef double* row
        for a in range(na):
            z[a] = self.xs * self.W[0, A[a]]
        for p in range(self.indptr[i], self.indptr[i + 1]):
            x = self.data[p]
            row = &self.W[self.indices[p] + 1, 0]
            for a in range(na):
                z[a] += x * row[A[a]]

    cdef void _move_some(self, Py_ssize_t i, const int32_t* cls, const double* dv,
                         Py_ssize_t nn) noexcept nogil:
        """W[:, cls[q]] += x_i dv[q] for q < nn: a Crammer-Singer step moves few classes
        (those whose beta left its bound), so the update skips the others."""
        cdef Py_ssize_t q, p
        cdef double x
        cdef double* row
        if self.xs != 0.0:
            for q in range(nn):
                self.W[0, cls[q]] += self.xs * dv[q]
        for p in range(self.indptr[i], self.indptr[i + 1]):
            x = self.data[p]
            row = &self.W[self.indices[p] + 1, 0]
            for q in range(nn):
                row[cls[q]] += x * dv[q]

    cdef double _cs_row(self, Py_ssize_t i, double* buf) noexcept nogil:
        """One Crammer-Singer step on row i over its active classes; returns the dual's
        increase. Shrinking (Keerthi et al. 2008, section 3.2): with g_k = z_k - [k = y] the
        gradient of the row's (minimized) dual, a class at its bound beta_k = [k = y] whose
        g_k is below every free class's stays at the bound in the linearized sub-problem:
        it leaves the row's active set (until the next reset), and a row with one active
        class left (its step can change nothing: sum beta = 0) is skipped. The step over
        the active set A is the same projection with the others fixed at their bounds, so
        the right-hand side of theta's equation stays sum_k C_k = 1 (cs_step on the
        gathered K_A values, the label's position or -1)."""
        cdef Py_ssize_t K = self.K, na = self.nact[i], a, nn, ypos = -1, k
        cdef int32_t* A = &self.act[i, 0]
        cdef double* z = buf
        cdef double* beta = buf + K
        cdef double* b0 = buf + 2 * K
        cdef double* dv = buf + 3 * K
        cdef double* work = buf + 4 * K
        cdef int32_t* cls = <int32_t*> (buf + 5 * K)
        cdef Py_ssize_t yi = self.y[i]
        cdef double c = 1.0 / (self.sigma * self.m), kappa, g, ming, bound, f, d
        cdef int32_t ti
        self._scores_active(i, A, na, z)
        if self.shrink:
            ming = INFINITY
            for a in range(na):
                k = A[a]
                if self.B[i, k] < (1.0 if k == yi else 0.0):
                    g = z[a] - (1.0 if k == yi else 0.0)
                    if g < ming:
                        ming = g
            a = 0
            while a < na:
                k = A[a]
                bound = 1.0 if k == yi else 0.0
                if self.B[i, k] >= bound and z[a] - bound < ming:
                    na -= 1
                    ti = A[a]
                    A[a] = A[na]
                    A[na] = ti
                    g = z[a]
                    z[a] = z[na]
                    z[na] = g
                else:
                    a += 1
            self.nact[i] = na
            if na <= 1:
                return 0.0
        for a in range(na):
            b0[a] = self.B[i, A[a]]
            if A[a] == yi:
                ypos = a
        kappa = self.sw[i] * self.sqnorm[i] * c
        cs_step(b0, z, na, ypos, kappa, beta, work)
        nn = 0
        f = 0.0
        for a in range(na):
            d = beta[a] - b0[a]
            if d != 0.0:
                # the row's objective (module docstring) at beta minus at beta0
                f += d * ((1.0 if a == ypos else 0.0) - z[a]) - 0.5 * kappa * d * d
                self.B[i, A[a]] = beta[a]
                cls[nn] = A[a]
                dv[nn] = d * self.sw[i] * c
                nn += 1
        if nn > 0:
            self._move_some(i, cls, dv, nn)
        elif self.shrink:
            self.nact[i] = 0  # a fixed point: skipped until the next reset
        return f * self.sw[i] / self.m

    cdef void _epoch(self, int64_t* order, double* buf) noexcept nogil:
        cdef Py_ssize_t t, i, j, k, K = self.K
        cdef int64_t tmp
        cdef double* z = buf
        cdef double* beta = buf + K
        cdef double* delta = buf + 2 * K
        cdef double* work = buf + 3 * K
        cdef double kappa, c = 1.0 / (self.sigma * self.m), gain = 0.0
        for t in range(self.m - 1, 0, -1):  # Fisher-Yates
            j = below(&self.rng, t + 1)
            tmp = order[t]
            order[t] = order[j]
            order[j] = tmp
        for t in range(self.m):
            i = order[t]
            if self.sw[i] <= 0.0 or self.sqnorm[i] <= 0.0 or self.nact[i] <= 1:
                continue
            if self.code == MC_CRAMMER_SINGER:
                gain += self._cs_row(i, buf)
                continue
            self._scores(i, z)
            kappa = self.sw[i] * self.sqnorm[i] * c
            mn_step(&self.B[i, 0], z, K, self.y[i], kappa, beta, work)
            for k in range(K):
                delta[k] = (beta[k] - self.B[i, k]) * self.sw[i] * c
                self.B[i, k] = beta[k]
            self._move(i, delta)
        self.gain = gain

    cdef void _focus(self, int64_t* rows, Py_ssize_t n, int sweeps, double* buf) noexcept nogil:
        """`sweeps` passes in fresh random orders over the given rows (no shrinking)."""
        cdef Py_ssize_t t, j, s
        cdef int64_t tmp
        cdef bint shrink = self.shrink
        self.shrink = False
        for s in range(sweeps):
            for t in range(n - 1, 0, -1):
                j = below(&self.rng, t + 1)
                tmp = rows[t]
                rows[t] = rows[j]
                rows[j] = tmp
            for t in range(n):
                if self.sw[rows[t]] > 0.0 and self.sqnorm[rows[t]] > 0.0:
                    self._cs_row(rows[t], buf)
        self.shrink = shrink

    cdef void _check(self, double* buf) noexcept nogil:
        """W recomputed from beta, then P(W), D(beta) and the gap (module docstring)."""
        cdef Py_ssize_t i, k, j, K = self.K
        cdef double* z = buf
        cdef double* u = buf + K
        cdef double c = 1.0 / (self.sigma * self.m), term, lossv, conj, dot
        cdef double total_gap = 0.0, total_loss = 0.0, norm2 = 0.0
        for j in range(self.d1):
            for k in range(K):
                self.W[j, k] = 0.0
        for i in range(self.m):
            if self.sw[i] > 0.0:
                for k in range(K):
                    u[k] = self.B[i, k] * self.sw[i] * c
                self._move(i, u)
        for j in range(self.d1):
            for k in range(K):
                norm2 += self.W[j, k] * self.W[j, k]
        for i in range(self.m):
            if self.sw[i] <= 0.0:
                continue
            self._scores(i, z)
            lossv = mc_loss_grad(self.code, z, K, self.y[i], NULL)
            dot = 0.0
            for k in range(K):
                u[k] = -self.B[i, k]
                dot += self.B[i, k] * z[k]
            conj = mc_conjugate(self.code, u, K, self.y[i])
            term = lossv + conj + dot
            total_loss += self.sw[i] * lossv
            total_gap += self.sw[i] * fmax(term, 0.0)
            self.fy[i] = self.sw[i] * fmax(term, 0.0) * c * self.sigma
        self.primal = 0.5 * self.sigma * norm2 + total_loss / self.m
        self.gap = total_gap / self.m
        self.dual = self.primal - self.gap

    def run(self, int max_epochs, double tol, check_every="auto", bint verbose=False,
            bint shrinking=False):
        """Epochs until gap <= tol * P or max_epochs; True when the gap was reached.

        shrinking (Crammer-Singer): each row keeps an active set of classes (`_cs_row`);
        a row whose active set is down to one class, or whose step left beta_i exactly
        unchanged, is skipped. Every row and class rejoins after each check that fails and
        every `reset_epochs` epochs (10); checks always run over all rows and classes, so the
        certificate never depends on it (a run stops only on a full check).

        After each failed check of a Crammer-Singer run, `focus_sweeps` (50; 0: off) passes
        run over the rows whose share of the gap exceeds `focus_share` (1e-3) of it.

        check_every: epochs between gap checks (an int), or "auto": a check once the gap
        predicted from the last epoch's dual increase reaches tol (the ratio gap / increase
        of the last check's epoch times this epoch's increase: both fall at the same linear
        rate), and at the latest on `_sdca.next_check`'s schedule (the gap's rate between
        the last two checks, at most a quarter of the epochs run so far).
        """
        cdef Py_ssize_t K = self.K
        order = np.arange(self.m, dtype=np.int64)
        cdef int64_t[::1] o = order
        buf = np.zeros(8 * K)
        cdef double[::1] b = buf
        cdef int next_at = self.n_epochs + 1, step
        cdef bint auto = isinstance(check_every, str)
        cdef double ratio = INFINITY, target
        step = 1 if auto else int(check_every)
        checks = []
        if self.m == 0:
            self.primal = self.dual = self.gap = 0.0
            return True
        self.shrink = shrinking and self.code == MC_CRAMMER_SINGER
        self.nact[:] = K
        for e in range(max_epochs):
            if self.shrink and self.n_epochs % self.reset_epochs == 0:
                self.nact[:] = K
            clock = time.perf_counter()
            with nogil:
                self._epoch(&o[0], &b[0])
            clock = time.perf_counter() - clock
            self.epoch_times.append(clock)
            self.epoch_seconds += clock
            self.n_epochs += 1
            self.gains.append(self.gain)
            target = tol * self.primal if isfinite(self.primal) else INFINITY
            if not (self.n_epochs >= next_at or e == max_epochs - 1
                    or (auto and self.estimate_checks and ratio * self.gain <= target)):
                continue
            clock = time.perf_counter()
            with nogil:
                self._check(&b[0])
            self.check_seconds += time.perf_counter() - clock
            self.gap_history.append(self.gap)
            self.check_epochs.append(self.n_epochs)
            if verbose:
                print(f"epoch {self.n_epochs}: primal {self.primal:.10g} dual "
                      f"{self.dual:.10g} gap {self.gap:.3g}", flush=True)
            if self.gap <= tol * self.primal:
                return True
            self.nact[:] = K
            # (not after the last epoch: W and beta must stay the certified ones)
            if (self.focus_sweeps > 0 and self.code == MC_CRAMMER_SINGER
                    and e < max_epochs - 1):
                focus = np.flatnonzero(np.asarray(self.fy) > self.focus_share * self.gap)
                if focus.shape[0] > 1:
                    self._focus_rows(focus)
            ratio = self.gap / self.gain if self.gain > 0.0 else INFINITY
            checks.append((self.n_epochs, self.relative_gap()))
            next_at = self.n_epochs + (next_check(checks, tol, 4) if auto else step)
        return False

    def gap_shares(self):
        """Each row's Fenchel-Young term c_i [l + l* + beta.z] / m at the last check (they
        sum to the gap)."""
        return np.asarray(self.fy).copy()

    def _focus_rows(self, rows):
        """Crammer-Singer, after a failed check: `focus_sweeps` passes over `rows` (those
        whose share of the gap exceeds `focus_share` of it). Why: on news20 a few hundred
        rows (near-duplicates of the same label among the largest) carry much of the gap
        for tens of epochs, their coupled dual variables crossing an almost flat direction
        by small coordinate steps; passes over them alone cost a fraction of an epoch and
        cut the epochs to 1e-6 (one seed: 187 to 76). Any row order is coordinate ascent,
        so the certificate is unchanged."""
        cdef int64_t[::1] r = np.ascontiguousarray(rows, dtype=np.int64)
        buf = np.zeros(8 * self.K)
        cdef double[::1] b = buf
        clock = time.perf_counter()
        with nogil:
            self._focus(&r[0], r.shape[0], self.focus_sweeps, &b[0])
        self.epoch_seconds += time.perf_counter() - clock

    def relative_gap(self):
        return self.gap / max(abs(self.primal), 2.2250738585072014e-308)
