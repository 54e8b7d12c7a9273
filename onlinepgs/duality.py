"""Duality-gap certificates: how far a linear model is from the optimum of its objective.

For the objective of the onlinepgs estimators (Zhu et al., 2009, eq. 7)

    P(w) = sigma r(w) + (1/W) sum_i c_i l(<w, x_i>; y_i),   w in S,

with r(w) = ||w||_p^2 / (2 (p - 1)), c_i the sample weights and W = sum_i c_i (m, the rows,
without weights: scikit-learn's convention, an integer weight is that many copies of the
row), S = R^n or the l_p ball of
radius B and, with an intercept, a constant feature of value ``intercept_scaling`` inside
the regularized w, Fenchel duality (Rockafellar, "Convex Analysis", 1970; Mairal, "Sparse coding
for machine learning, image processing and computer vision", 2010) gives, for every a in R^m,

    D(a) = -(1/W) sum_i (c_i l)*(-a_i; y_i) - sigma r_S*( X^T a / (sigma W) )
         <= P(w*) <= P(w),

where ``(c l)*(v) = c l*(v / c)`` and r_S* is the conjugate of r restricted to S (finite
everywhere; on the ball it turns linear beyond ``(p - 1) ||theta||_q = B``). Hence
``gap = P(w) - D(a) >= P(w) - P(w*) >= 0``: a certificate, computable from w alone, of
how much the objective can still improve.

The dual point. Following Mairal (2010), a = a(w) is built from the primal point:
``a_i = -s c_i l'(<w, x_i>; y_i)``. The derivative is clipped into the domain of l*
(a no-op for the compiled losses, whose subgradients lie there, but a guarantee that no
rounding makes a term infinite), so every term of D is finite; r_S* is finite for every
theta, so unlike Mairal's norm regularizers no rescaling is needed for the regularizer
term. Mairal does rescale its dual point along its ray, by the largest factor <= 1
that keeps it feasible; here the factor s >= 0 is the *best* one: D(s a) is concave in s
and, for every loss whose conjugate is quadratic on its domain (all but the logistic),
``sum_i c_i l*(s u_i)`` is ``s A + s^2 B`` with two sums over the rows, and
``r_S*(s theta)`` depends on theta only through ``||theta||_q``. So the maximizer over
the domain ``[0, s_max]`` is found in closed form after the single pass. s = 1 is always
a candidate, so the certificate is never worse than the plain a(w); at the optimum of a
smooth loss s = 1 is optimal and the gap is 0. For the logistic loss (an entropy
conjugate, not a polynomial in s) s = 1. For non-smooth losses (hinge, absolute,
epsilon-insensitive) a(w) jumps at the kinks, so the gap need not vanish at w*; the
scaling tightens it but the certificate stays an upper bound, not an estimate.

Mairal's intercept correction (projecting a onto ``sum_i a_i = 0``) is not needed: the
intercept here is a regularized feature, so its coordinate of X^T a enters r_S* like any
other. A w outside the ball (only possible through `gap_of_weights`) has P(w) = +inf;
the dual value is still a valid lower bound on P(w*).

An l_1 term ``l1 ||w||_1`` (the ``l1`` of PGS, at every p and on the ball, and of SDCA)
changes the regularizer's conjugate to that of ``h = sigma r + l1 ||.||_1`` over S,
``h*(z) = sigma r_S*(soft(z, l1) / sigma)`` with soft the soft threshold
(docs/design/l1.md): no longer a function of ||z||_q alone, so the best scale s is found
by bisection on the slope of the concave D(s a), over the coordinates above the threshold.

Costs: one pass over the rows, O(nnz(X) K) time and O(n_features K + chunk) memory, for
K problems (K one-vs-rest problems for a multiclass classifier, which share no
variables: their objectives and certificates add up). P needs the sum of the losses,
D the sums of the conjugates and the vector X^T a; all of them accumulate over chunks,
which is what `duality_gap_stream` does over files and streams.
"""
import math
import os
from dataclasses import dataclass, replace

import numpy as np

from onlinepgs._class_weight import objective_weights
from onlinepgs._checks import (AtRows, RowError, check_csr, check_dense, check_labels,
                               check_weights, in_units)
from onlinepgs._core._losses import (
    CLASSIFICATION_LOSSES,
    LOSS_CODES,
    loss_conjugate_py,
    loss_derivative_py,
    loss_value_py,
)
from onlinepgs._core._regularizer import norm, regularizer_conjugate, regularizer_value
from onlinepgs._csr import sparse as sp  # scipy.sparse, imported when first needed
from onlinepgs._weights import SparseWeights

__all__ = ["DualityGap", "duality_gap", "duality_gap_stream", "gap_of_weights"]

_BLOCK_ROWS = 8192  # rows per block of in-memory data: bounds the (rows, K) temporaries

# For each loss: the half-width of the domain of l* in |u| ("epsilon": the loss's width)
# and the curvature k with l*(u) = u y (+ epsilon |u| for epsilon_insensitive) + k u^2 on
# that domain, so that l*(s u) = s (u y [+ epsilon |u|]) + s^2 k u^2 for s >= 0. None:
# l* is not quadratic along rays (the logistic entropy) and the dual point is not rescaled.
_CONJUGATE_SHAPE = {
    "hinge": (1.0, 0.0),                 # u y,                 u y in [-1, 0]
    "logistic": (1.0, None),             # (-uy) log(-uy) + (1+uy) log(1+uy), u y in [-1, 0]
    "squared_hinge": (math.inf, 0.25),   # u y + u^2 / 4,       u y <= 0
    "smooth_hinge": (1.0, 0.5),          # u y + u^2 / 2,       u y in [-1, 0]
    "squared": (math.inf, 0.25),         # u y + u^2 / 4
    "absolute": (1.0, 0.0),              # u y,                 |u| <= 1
    "huber": ("epsilon", 0.5),           # u y + u^2 / 2,       |u| <= epsilon
    "epsilon_insensitive": (1.0, 0.0),   # u y + epsilon |u|,   |u| <= 1
}


@dataclass(frozen=True, eq=False)
class DualityGap:
    """A duality-gap certificate: ``gap = primal - dual >= P(w) - P(w*)``.

    For K > 1 problems (a multiclass classifier's one-vs-rest problems) `primal`,
    `dual` and `gap` are the **sums** over the problems (the objective of the K
    problems together, which share no variables), and the ``*_per_problem`` arrays
    hold each problem's values, in the order of ``classes_``. For one problem the
    arrays have length 1.

    Attributes
    ----------
    primal : float
        P(w), the objective at the model's weights (+inf if w lies outside the ball).
    dual : float
        D(a) <= P(w*) for the dual point a built from w (see `onlinepgs.duality`).
    gap : float
        ``primal - dual``: an upper bound on ``P(w) - P(w*)`` (>= 0 up to rounding).
    relative_gap : float
        ``gap / max(|primal|, tiny)``, tiny the smallest normal double (+inf when the
        gap is).
    n_rows : int
        Rows the sums ran over (m).
    primal_per_problem, dual_per_problem, gap_per_problem : ndarray of shape (K,)
    dual_scale : ndarray of shape (K,)
        The factor s of each problem's dual point ``a_i = -s c_i l'(<w, x_i>; y_i)``.

    Examples
    --------
    >>> from onlinepgs.duality import gap_of_weights
    >>> cert = gap_of_weights([0.0], 0.0, [[1.0], [-1.0]], [1.0, -1.0], loss="hinge",
    ...                       sigma=1.0)
    >>> cert.primal, cert.dual, cert.gap
    (1.0, 0.5, 0.5)
    """

    primal: float
    dual: float
    gap: float
    relative_gap: float
    n_rows: int
    primal_per_problem: np.ndarray
    dual_per_problem: np.ndarray
    gap_per_problem: np.ndarray
    dual_scale: np.ndarray

    def as_dict(self):
        """Plain Python numbers and lists (e.g. for JSON)."""
        return {
            "rows": self.n_rows, "primal": self.primal, "dual": self.dual, "gap": self.gap,
            "relative_gap": self.relative_gap,
            "primal_per_problem": self.primal_per_problem.tolist(),
            "dual_per_problem": self.dual_per_problem.tolist(),
            "gap_per_problem": self.gap_per_problem.tolist(),
            "dual_scale": self.dual_scale.tolist(),
        }


def _check_finite_model(coef, w0, radius):
    """Refuse weights (n_features, K), intercept weights (K,) or a radius that are not
    finite: every sum below would be NaN or, worse, a NaN compared away into a finite
    "certificate" (max/min and clipping drop NaN), so no bound would hold."""
    with np.errstate(invalid="ignore"):
        bad_coef = ~np.isfinite(coef)
    if bad_coef.any():
        j, c = (int(i) for i in np.argwhere(bad_coef)[0])
        raise ValueError(f"the model's weights are not finite (coef_[{c}, {j}] = "
                         f"{coef[j, c].item()!r}): a non-finite model has no duality gap; "
                         "it diverged or was damaged, so train it again")
    bad_w0 = np.flatnonzero(~np.isfinite(w0))
    if bad_w0.size:
        c = int(bad_w0[0])
        raise ValueError(f"the model's intercept is not finite (intercept_[{c}] from "
                         f"weight {w0[c].item()!r}): a non-finite model has no duality "
                         "gap; it diverged or was damaged, so train it again")
    if radius is not None and not (math.isfinite(radius) and radius >= 0):
        raise ValueError(f"the model's radius is {radius!r}: a certificate needs a finite "
                         "radius >= 0 (or none)")


def _root_of_slope(slope, low, high):
    """argmax over [low, high] of a concave function given its (decreasing) slope: an end
    where the slope keeps its sign, else the slope's root by bisection to the last bit."""
    if slope(high) >= 0:
        return high
    if slope(low) <= 0:
        return low
    for _ in range(200):
        mid = 0.5 * (low + high)
        if mid in (low, high):
            break
        low, high = (mid, high) if slope(mid) > 0 else (low, mid)
    return low


class _RegularizerConjugate:
    """sigma r over S, its conjugate and, with l1 > 0, that of h = sigma r + l1 ||.||_1
    over S, for one weight vector: shared by the one-vs-rest certificate and the coupled
    multiclass one (whose regularizer is a sum of such terms, one a class). Needs the
    attributes p, sigma, radius (None: R^n) and l1."""

    def _r(self, w):
        if self.radius == 0.0:  # the "auto" ball of radius 0: S = {0}
            return 0.0 if not np.any(w) else math.inf
        return regularizer_value(w, self.p, self.radius)

    def _outside(self, w):
        """Whether r(w) is +inf because w lies outside the domain (reg_value's rule), not
        because ||w||_p^2 overflowed."""
        if self.radius == 0.0:
            return bool(np.any(w))
        radius = self.radius if self.radius is not None else math.inf
        return bool(math.isfinite(radius) and norm(w, self.p) > radius * (1.0 + 1e-12))

    def _rstar(self, norm_q):
        # r_S* depends on theta only through ||theta||_q: a 1-vector of that norm will do
        if self.radius == 0.0:
            return 0.0
        return regularizer_conjugate(np.array([norm_q]), self.p, self.radius)

    # h(w) = sigma r(w) + l1 ||w||_1 over S has h*(z) = sigma r_S*(soft(z, l1) / sigma),
    # soft(z, l1)_j = sgn(z_j) (|z_j| - l1)_+: coordinate by coordinate <z, w> - l1 |w_j|
    # <= soft(z, l1)_j w_j, with equality at the w that grad r_S* gives (zero off the
    # active set, z's signs), and S depends on ||w||_p only. For p = 2 on R^n that is
    # sum_j (|z_j| - l1)_+^2 / (2 sigma); for sigma = 0 (SDCA's pure l_1, p = 2 on R^n)
    # the indicator of ||z||_inf <= l1. D(s a) = -(1/W) sum_i c_i l*(s u_i) - h*(s z),
    # z = X1^T a / W at s = 1 (Shalev-Shwartz and Zhang, "Proximal stochastic dual
    # coordinate ascent", 2012, sections 3.1-3.2; Xiao, "Dual averaging methods for
    # regularized stochastic learning and online optimization", 2010).
    def _plain_l1(self):
        """p = 2 on R^n: h* in the closed form above (SDCA's path, kept to the bit)."""
        return self.p == 2.0 and self.radius is None

    def _hstar(self, z, s):
        if self.sigma == 0:
            return 0.0 if s * np.max(np.abs(z), initial=0.0) <= self.l1 else math.inf
        excess = np.maximum(s * np.abs(z) - self.l1, 0.0)
        if self._plain_l1():
            return float(excess @ excess) / (2.0 * self.sigma)
        q = self.p / (self.p - 1.0)
        return self.sigma * self._rstar(norm(excess / self.sigma, q))

    def _hstar_slope(self, absz, s):
        """d h*(s z) / ds (sigma > 0): f'(t) sum_j (u_j / t)^(q-1) |z_j|, u = |soft(s z,
        l1)| / sigma, t = ||u||_q and f(t) = r_S*(theta) at ||theta||_q = t."""
        excess = np.maximum(s * absz - self.l1, 0.0)
        if self._plain_l1():
            return float(absz @ excess) / self.sigma
        if self.radius == 0.0:
            return 0.0  # S = {0}: h* = 0
        q = self.p / (self.p - 1.0)
        u = excess / self.sigma
        t = norm(u, q)
        if t == 0.0:
            return 0.0
        inner = (self.p - 1.0) * t            # f'(t) inside the ball (and on R^n) ...
        if self.radius is not None and inner > self.radius:
            inner = self.radius               # ... and where r_S* is linear
        return inner * float((u / t) ** (q - 1.0) @ absz)


class _WeightUnit:
    """Sample weights in units of a power of two, for sums that would otherwise leave
    the double range: P and D average by the sum of the weights, so they are the same
    in any unit (weights of 1e308 certify as weights of 1 do). The unit is set by the
    first chunk's largest weight (`_checks.in_units`) and raised, with every sum so far
    scaled down by the same power of two (exact), when a chunk's largest weight lies
    2**256 beyond it: a handful of times at most. Subclasses list their sums in
    ``_weighted`` (attribute names; arrays scaled in place)."""

    _unit = None  # the exponent e: weights are held as sw * 2**-e

    def _in_unit(self, sw):
        top = float(np.max(sw, initial=0.0))
        if top == 0.0:
            return sw
        if self._unit is None:
            sw, self._unit = in_units(sw)
            return sw
        e = math.frexp(top)[1]
        if e > self._unit + 256:  # far beyond the unit: raise it
            shift = self._unit - e
            for name in self._weighted:
                value = getattr(self, name)
                if isinstance(value, np.ndarray):
                    np.ldexp(value, shift, out=value)
                elif isinstance(value, list):  # pending (columns, values) pairs
                    for _, v in value:
                        np.ldexp(v, shift, out=v)
                else:
                    setattr(self, name, math.ldexp(value, shift))
            self._unit = e
        return np.ldexp(sw, -self._unit) if self._unit else sw

    def add(self, X, Y, sw):
        """Rows X (CSR or dense, float64), labels Y (rows, K) in the loss's encoding,
        weights sw (rows,) >= 0."""
        # a sum that overflows anyway is no bound: `_check_representable` refuses it
        with np.errstate(over="ignore", invalid="ignore"):
            self._add_rows(X, Y, self._in_unit(sw))


class _Certificate(_WeightUnit, _RegularizerConjugate):
    """The sums behind P and D for K problems, fed one chunk of rows at a time.

    ``coef`` is (n_features, K), ``w0`` the K intercept weights (the constant feature's
    weight, not ``intercept_``). Memory: O(n_features K) whatever the number of rows.
    """

    def __init__(self, coef, w0, *, loss, p, sigma, radius, fit_intercept,
                 intercept_scaling, epsilon, scale_dual, l1=0.0):
        self.coef = np.array(coef, dtype=np.float64, order="C", copy=True)
        self.K = self.coef.shape[1]
        self.w0 = np.asarray(w0, dtype=np.float64).reshape(self.K)
        _check_finite_model(self.coef, self.w0, radius)
        self.loss, self.p, self.sigma, self.radius = loss, p, sigma, radius
        self.l1 = l1  # > 0: the l_1 term, any p and S (pure l_1, sigma = 0: p = 2 on R^n)
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.epsilon = epsilon
        bound, self.kappa = _CONJUGATE_SHAPE[loss]
        self.bound = epsilon if bound == "epsilon" else bound
        self.scale_dual = scale_dual and self.kappa is not None
        self.classification = loss in CLASSIFICATION_LOSSES
        K = self.K
        self.v = np.zeros_like(self.coef)     # sum_i c_i u_i x_i  (X^T a = -s v)
        # v's entries in sparse columns past the weights (weight 0 there, but they enter
        # X^T a): kept sparse, so that one huge feature index costs no dense memory
        self.far_cols = np.zeros(0, dtype=np.int64)
        self.far_v = np.zeros((0, K))
        self.far_pending = []  # (cols, values) not yet summed in: merged when they outgrow it
        self.n_pending = 0
        self.v0 = np.zeros(K)                 # sum_i c_i u_i      (the constant feature)
        self.loss_sum = np.zeros(K)           # sum_i c_i l(z_i)
        self.conj_sum = np.zeros(K)           # sum_i c_i l*(u_i)
        self.lin_sum = np.zeros(K)            # its part linear in s along the ray ...
        self.curv_sum = np.zeros(K)           # ... and its quadratic part, sum_i c_i kappa u_i^2
        self.s_max = np.full(K, math.inf)     # s u_i stays in dom l* for s <= s_max
        self.m = 0                            # rows
        self.w_sum = 0.0                      # sum_i c_i: the objective's normaliser

    def _grow(self, width):
        # columns the weights never saw carry weight 0 but still enter X^T a
        extra = width - self.coef.shape[0]
        if extra > 0:
            pad = np.zeros((extra, self.K))
            self.coef = np.vstack([self.coef, pad])
            self.v = np.vstack([self.v, pad])

    def _into_domain(self, u, Y):
        if self.classification:
            low = -math.inf if self.loss == "squared_hinge" else -1.0
            return np.clip(u * Y, low, 0.0) * Y   # Y = +-1: exact
        if math.isinf(self.bound):
            return u
        return np.clip(u, -self.bound, self.bound)

    def _add_far(self, X, cu):
        """v's part from the entries of CSR X in columns past the weights."""
        far = X.indices >= self.coef.shape[0]
        rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))[far]
        self.far_pending.append((X.indices[far].astype(np.int64),
                                 X.data[far][:, None] * cu[rows]))
        self.n_pending += int(far.sum())
        if self.n_pending > max(self.far_cols.shape[0], 1 << 16):
            self._merge_far()  # amortized: the pending entries outnumber the merged ones

    def _merge_far(self):
        if not self.far_pending:
            return
        cols = np.concatenate([self.far_cols] + [c for c, _ in self.far_pending])
        vals = np.concatenate([self.far_v] + [v for _, v in self.far_pending])
        self.far_cols, where = np.unique(cols, return_inverse=True)
        self.far_v = np.zeros((self.far_cols.shape[0], self.K))
        np.add.at(self.far_v, where, vals)
        self.far_pending, self.n_pending = [], 0

    _weighted = ("v", "far_v", "far_pending", "v0", "loss_sum", "conj_sum", "lin_sum",
                 "curv_sum", "w_sum")

    def _add_rows(self, X, Y, sw):
        rows = X.shape[0]
        if rows == 0:
            return
        far = None
        if sp.issparse(X) and X.shape[1] > self.coef.shape[0]:
            far, X = X, X[:, :self.coef.shape[0]]
        width = X.shape[1]
        self._grow(width)  # dense rows only: their width is already in memory
        Z = np.asarray(X @ self.coef[:width])
        if self.fit_intercept:
            Z = Z + self.w0 * self.intercept_scaling
        active = (sw > 0)[:, None]
        c = sw[:, None]
        values = loss_value_py(self.loss, Z, Y, self.epsilon)
        u = loss_derivative_py(self.loss, Z, Y, self.epsilon)
        # a row of weight 0 has a_i = 0; an overflowed derivative (P is then +inf
        # anyway) is replaced by 0, which keeps D a finite lower bound
        u = np.where(active & np.isfinite(u), u, 0.0)
        u = self._into_domain(u, Y)
        self.loss_sum += np.sum(np.where(active, c * values, 0.0), axis=0)
        self.conj_sum += np.sum(c * loss_conjugate_py(self.loss, u, Y, self.epsilon), axis=0)
        if self.scale_dual:
            # the linear part summed on its own, not as l*(u) - kappa u^2: that difference
            # would cancel catastrophically when |u| is large (a diverged model)
            linear = u * Y
            if self.loss == "epsilon_insensitive":
                linear += self.epsilon * np.abs(u)
            self.lin_sum += np.sum(c * linear, axis=0)
            self.curv_sum += self.kappa * np.sum(c * u * u, axis=0)
        if math.isfinite(self.bound):
            largest = np.max(np.abs(u), axis=0)
            with np.errstate(divide="ignore"):
                self.s_max = np.minimum(self.s_max, np.where(largest > 0, self.bound / largest,
                                                             math.inf))
        cu = c * u
        self.v[:width] += np.asarray(X.T @ cu)
        if far is not None:
            self._add_far(far, cu)
        self.v0 += cu.sum(axis=0)
        self.m += rows
        self.w_sum += float(sw.sum())

    # ---- the certificate ---------------------------------------------------------------
    def _dual(self, c, s, t):
        """D(s a) of problem c, t = ||theta||_q for s = 1."""
        if s == 1.0:
            conj = self.conj_sum[c]  # the compiled conjugates themselves
        else:
            conj = s * self.lin_sum[c] + s * s * self.curv_sum[c]
        return -conj / self.w_sum - self.sigma * self._rstar(s * t)

    def _best_scale(self, c, t):
        """argmax of the concave D(s a) over [0, s_max], from its pieces' stationary points."""
        s_max = self.s_max[c]
        alpha = self.lin_sum[c] / self.w_sum                      # D = -alpha s - beta s^2 - ...
        beta = self.curv_sum[c] / self.w_sum
        sigma, p, B = self.sigma, self.p, self.radius
        gamma = 0.5 * sigma * (p - 1.0) * t * t                   # sigma r*(s theta), inner piece
        candidates = [0.0]
        if math.isfinite(s_max):
            candidates.append(s_max)
        if beta + gamma > 0:
            candidates.append(-alpha / (2.0 * (beta + gamma)))
        if B is not None and B > 0 and t > 0:
            candidates.append(B / ((p - 1.0) * t))                # where r* turns linear
            if beta > 0:
                candidates.append(-(alpha + sigma * B * t) / (2.0 * beta))
        best, best_value = 1.0, self._dual(c, 1.0, t)             # 1 is always feasible
        for s in candidates:
            s = min(max(s, 0.0), s_max)
            value = self._dual(c, s, t)
            if value > best_value:
                best, best_value = s, value
        return best

    def result(self):
        if self.m == 0:
            raise ValueError("no rows: the duality gap needs at least one row")
        if self.w_sum <= 0:
            raise ValueError(f"sample_weight is zero for every one of the {self.m} rows: "
                             "the objective averages by the sum of the weights, which is 0")
        q = self.p / (self.p - 1.0)
        K = self.K
        self._merge_far()
        primal, dual, scale = np.empty(K), np.empty(K), np.empty(K)
        if self.l1 > 0:
            for c in range(K):
                primal[c], dual[c], scale[c] = self._with_l1(c)
            return self._finish(primal, dual, scale)
        denom = self.sigma * self.w_sum
        for c in range(K):
            w = self.coef[:, c]
            theta = np.concatenate([self.v[:, c], self.far_v[:, c]]) / -denom
            if self.fit_intercept:
                w = np.concatenate([[self.w0[c]], w])
                theta = np.concatenate([[self.intercept_scaling * self.v0[c] / -denom], theta])
            primal[c] = self.sigma * self._r(w) + self.loss_sum[c] / self.w_sum
            t = norm(theta, q)
            scale[c] = self._best_scale(c, t) if self.scale_dual else 1.0
            dual[c] = self._dual(c, scale[c], t)
        return self._finish(primal, dual, scale)

    def _full_w(self, c):
        """Problem c's weights with the intercept's, as the regularizer sees them."""
        w = self.coef[:, c]
        return np.concatenate([[self.w0[c]], w]) if self.fit_intercept else w

    def _finish(self, primal, dual, scale):
        outside = [self._outside(self._full_w(c)) for c in range(self.K)]
        _check_representable(primal, dual, self.w_sum, outside)
        gap = primal - dual
        total_primal, total_dual = float(primal.sum()), float(dual.sum())
        total_gap = total_primal - total_dual
        relative = (total_gap / max(abs(total_primal), float(np.finfo(np.float64).tiny))
                    if math.isfinite(total_gap) else math.inf)
        for a in (primal, dual, gap, scale):
            a.setflags(write=False)
        return DualityGap(primal=total_primal, dual=total_dual, gap=total_gap,
                          relative_gap=relative, n_rows=int(self.m),
                          primal_per_problem=primal, dual_per_problem=dual,
                          gap_per_problem=gap, dual_scale=scale)


    # ---- with an l_1 term: h* is _RegularizerConjugate's ------------------------------
    def _dual_l1(self, c, z, s):
        if s == 1.0:
            conj = self.conj_sum[c]
        else:
            conj = s * self.lin_sum[c] + s * s * self.curv_sum[c]
        return -conj / self.w_sum - self._hstar(z, s)

    def _with_l1(self, c):
        """(P, D, s) of problem c with the l_1 term: s the best scale of a(w) (the losses
        whose conjugate is quadratic along rays), else 1 or, for pure l_1, the largest
        feasible scale <= 1."""
        w = self.coef[:, c]
        z = np.concatenate([self.v[:, c], self.far_v[:, c]]) / -self.w_sum
        if self.fit_intercept:
            w = np.concatenate([[self.w0[c]], w])
            z = np.concatenate([[self.intercept_scaling * self.v0[c] / -self.w_sum], z])
        regularizer = (0.5 * float(w @ w) if self._plain_l1() or self.sigma == 0
                       else self._r(w))
        primal = (self.sigma * regularizer + self.l1 * float(np.abs(w).sum())
                  + self.loss_sum[c] / self.w_sum)
        z_inf = float(np.max(np.abs(z), initial=0.0))
        top = self.s_max[c]
        if self.sigma == 0 and z_inf > 0:
            top = min(top, self.l1 / z_inf)  # the feasible scales of the pure l_1 dual
        if not self.scale_dual:
            s = 1.0 if top >= 1.0 else (top if self.kappa is not None else None)
            if s is None:
                raise ValueError(
                    f"the {self.loss} loss with pure l_1 (sigma = 0): its dual point must be "
                    "scaled into the feasible set, which needs every row's conjugate again; "
                    "the estimator's duality_gap_ is its certificate")
            return primal, self._dual_l1(c, z, s), s
        # D(s a) is concave in s: its slope, decreasing, is found 0 by bisection
        A, B = self.lin_sum[c] / self.w_sum, self.curv_sum[c] / self.w_sum
        absz = np.abs(z)

        def slope(s):
            reg = self._hstar_slope(absz, s) if self.sigma > 0 else 0.0
            return -A - 2.0 * B * s - reg

        low, high = 0.0, top
        if not math.isfinite(high):
            high = 1.0
            while slope(high) > 0 and high < 1e300:
                high *= 2.0
        # only the coordinates above the threshold at some s <= high move h*: the rest
        # (most of a sparse model's) are dropped from the bisection's sums
        absz = absz[absz * high > self.l1]
        s = _root_of_slope(slope, low, high)
        best, value = s, self._dual_l1(c, z, s)
        if top >= 1.0 and self._dual_l1(c, z, 1.0) >= value:  # the compiled conjugates
            best, value = 1.0, self._dual_l1(c, z, 1.0)
        return primal, value, best


def _check_representable(primal, dual, w_sum, outside):
    """Refuse a certificate whose sums left the double range: an infinite or NaN primal
    or dual is no bound (an overflowing weight sum made the mean 0 or NaN, a huge model
    made r(w) infinite); the message says which and what to rescale. A primal of +inf
    for a model outside its domain (``outside``, a bool a problem) is the truth."""
    primal = np.where(np.asarray(outside) & np.isposinf(primal), 0.0, primal)
    if not math.isfinite(w_sum):
        raise ValueError("the sample weights add up beyond the double range (1.8e308): the "
                         "objective's mean is not representable; divide every weight by "
                         "one factor (the same objective up to that factor)")
    bad = [(name, float(v)) for name, a in (("P(w)", primal), ("the dual value", dual))
           for v in np.ravel(a) if not math.isfinite(v)]
    if bad:
        name, value = bad[0]
        raise ValueError(f"{name} comes out {value} at this model: a term of its "
                         "objective (sigma r(w) from the weights' norm, or a weighted "
                         "loss) leaves the double range, so no certificate can be "
                         "computed; a model trained on rescaled data (smaller sample "
                         "weights or feature values) can be certified")


# ---- fitted onlinepgs models --------------------------------------------------------------
def _value_of(model):
    """The `LinearModel` a certificate is about: the value itself, or a fitted estimator's
    (PGS or SDCA, scikit-learn's or the learner), weights taken as they are (a non-finite
    model is refused by `_Certificate`, naming the entry)."""
    from onlinepgs._base import LinearLearner
    from onlinepgs.model import LinearModel

    if isinstance(model, LinearModel):
        value = model
    elif isinstance(model, LinearLearner):
        model._check_fitted()
        value = model._make_model(check_finite=False)
    else:
        raise TypeError("duality_gap needs a fitted onlinepgs estimator (PGS or SDCA) or an "
                        f"onlinepgs.model.LinearModel, got {type(model).__name__}; certify "
                        "other linear models with onlinepgs.duality.gap_of_weights")
    if value.l1 != 0 and value.sigma == 0 and (value.p != 2.0 or value.radius is not None):
        raise ValueError(f"a model of pure l_1 (sigma = 0, l1={value.l1:g}) is certified for "
                         f"p = 2 on R^n only (SDCA's), got p={value.p:g}, "
                         f"radius={value.radius!r}")
    if value.l1 != 0 and value.sigma == 0 and _CONJUGATE_SHAPE[value.loss][1] is None:
        raise ValueError(f"the {value.loss} loss with pure l_1 (sigma = 0, l1={value.l1:g}) "
                         "has no one-pass certificate here (its dual point must be scaled "
                         "into the feasible set, which needs every row's conjugate again); "
                         "the estimator's duality_gap_ is its certificate")
    return value


class _MulticlassCertificate(_WeightUnit, _RegularizerConjugate):
    """The certificate of a coupled multiclass model (multinomial, Crammer-Singer):
    ``P(W) = sum_k h(w_k) + (1/W) sum_i c_i l(W^T x_i; y_i)`` with ``h = sigma r + l1
    ||.||_1`` over S for each class's vector (the intercept's weight inside it; S = R^n or
    the l_p ball of radius B, one ball a class as in PGS's core), at every p in (1, 2].

    Dual point ``a_i = -s c_i g_i``, ``g_i = grad_z l(z_i; y_i)``: for both losses ``s g_i +
    e_y`` stays in the simplex for s in [0, 1], so every conjugate is finite. The
    regularizer is a sum over the classes, so its conjugate is too:

        D(s) = -(1/W) sum_i c_i l*(s g_i; y_i) - sum_k h*(s z_k),  z_k = X1^T (c g_k) / W,

    h* the one-vector conjugate `_RegularizerConjugate._hstar` (binary's, reused).
    Crammer-Singer's conjugate is linear along the ray (``l*(s g; y) = s g_y``); the
    multinomial's, ``sum pi log pi`` at ``pi = e_y + s g``, is convex in s and 0 at s = 0,
    so it is at most its chord ``s l*(g; y)``: with the chord D(s) turns into a lower bound
    of itself, exact at s = 1 and still concave. Both are then ``-s A - sum_k h*(s z_k)``,
    maximized over [0, 1] by bisection on the (decreasing) slope: one pass, O(nnz K)
    time, O(n_features K) memory."""

    def __init__(self, value, scale_dual):
        from onlinepgs._core._sdca_multiclass import mc_conjugates, mc_losses

        self._losses, self._conjugates = mc_losses, mc_conjugates
        self.value, self.scale_dual = value, scale_dual
        self.p, self.sigma, self.radius, self.l1 = value.p, value.sigma, value.radius, value.l1
        # dense once (a sparse model's coef is built on each access): T is (n, K) anyway
        self.coef = np.asarray(value.coef, dtype=np.float64)
        w0 = value.intercept_weight if value.fit_intercept else np.zeros(value.n_problems)
        self.w0 = np.asarray(w0, dtype=np.float64)
        _check_finite_model(self.coef.T, self.w0, value.radius)
        K = value.n_problems
        self.m, self.weight, self.loss_sum, self.gy_sum, self.conj_sum = 0, 0.0, 0.0, 0.0, 0.0
        self.T = np.zeros((value.coef.shape[1] + 1, K))  # X1^T (c g), the constant first

    _weighted = ("weight", "loss_sum", "gy_sum", "conj_sum", "T")

    def _add_rows(self, X, Y, sw):
        value = self.value
        if X.shape[0] == 0:
            return
        labels = np.argmax(Y, axis=1)  # the one-vs-rest encoding: +1 in the row's class
        Z = value.scores(X)
        L, G = self._losses(value.multi_class, Z, labels)
        rows = np.arange(X.shape[0])
        self.m += X.shape[0]
        self.weight += float(sw.sum())
        self.loss_sum += float(sw @ L)
        self.gy_sum += float(sw @ G[rows, labels])
        self.conj_sum += float(sw @ self._conjugates(value.multi_class, G, labels))
        CG = G * sw[:, None]
        if X.shape[1] + 1 > self.T.shape[0]:  # columns the model never saw: w = 0 there
            self.T = np.vstack([self.T, np.zeros((X.shape[1] + 1 - self.T.shape[0],
                                                  self.T.shape[1]))])
        if value.fit_intercept:
            self.T[0] += value.intercept_scaling * CG.sum(axis=0)
        self.T[1:X.shape[1] + 1] += np.asarray(X.T @ CG)

    def _regularizers(self):
        """sum_k h(w_k): the primal's regularizer (+inf for a w_k outside its ball)."""
        total = 0.0
        for k in range(self.coef.shape[0]):
            w = self.coef[k]
            if self.value.fit_intercept:
                w = np.concatenate([[self.w0[k]], w])
            # p = 2 on R^n as the p = 2 certificate always summed it (kept to the bit)
            r = 0.5 * float(w @ w) if self._plain_l1() else self._r(w)
            total += self.sigma * r + self.l1 * float(np.abs(w).sum())
        return total

    def _dual_at(self, A, Z, s):
        return -s * A - sum(self._hstar(Z[:, k], s) for k in range(Z.shape[1]))

    def result(self):
        value, Wsum = self.value, max(self.weight, np.finfo(float).tiny)
        primal = self._regularizers() + self.loss_sum / Wsum
        Z = self.T / Wsum  # z_k = X1^T (c g_k) / W: h* is even, the sign of a drops out
        # the loss term along the ray: exact for Crammer-Singer, the chord for multinomial
        A = (self.gy_sum if value.multi_class == "crammer_singer" else self.conj_sum) / Wsum
        s = 1.0
        if self.scale_dual:
            absZ = np.abs(Z)

            def slope(s):
                return -A - sum(self._hstar_slope(absZ[:, k], s) for k in range(Z.shape[1]))

            s = _root_of_slope(slope, 0.0, 1.0)
        dual = self._dual_at(A, Z, s)
        if s != 1.0:
            at_one = self._dual_at(A, Z, 1.0)  # s = 1 is always a candidate
            if at_one >= dual:
                s, dual = 1.0, at_one
        outside = any(self._outside(np.concatenate([[self.w0[k]], self.coef[k]])
                                    if value.fit_intercept else self.coef[k])
                      for k in range(self.coef.shape[0]))
        _check_representable(np.array([primal]), np.array([dual]), self.weight, [outside])
        gap = primal - dual
        one = np.ones(1)
        return DualityGap(primal=primal, dual=dual, gap=gap,
                          relative_gap=(gap / max(abs(primal), np.finfo(float).tiny)
                                        if math.isfinite(gap) else math.inf),
                          n_rows=self.m, primal_per_problem=primal * one,
                          dual_per_problem=dual * one, gap_per_problem=gap * one,
                          dual_scale=s * one)


def _certificate_of_model(value, scale_dual):
    if getattr(value, "multi_class", "ovr") != "ovr":
        if not value.sigma > 0:
            # h* = sum_k sigma r_S*(soft(z_k, l1) / sigma) needs sigma > 0; pure l_1 would
            # need the dual point scaled into ||z_k||_inf <= l1, every row's conjugate again
            raise ValueError(f"a multi_class={value.multi_class!r} model is certified for "
                             f"sigma > 0 only, got sigma={value.sigma:g} (l1={value.l1:g})")
        return _MulticlassCertificate(value, scale_dual)
    return _Certificate(
        value.coef.T, value.intercept_weight if value.fit_intercept else np.zeros(
            value.n_problems), loss=value.loss, p=value.p, sigma=value.sigma,
        radius=value.radius, fit_intercept=value.fit_intercept,
        intercept_scaling=value.intercept_scaling, epsilon=value.epsilon,
        scale_dual=scale_dual, l1=value.l1)


def _model_rows(value, X, y, sample_weight, class_weights=None):
    """Validated rows of a model: (X as CSR or dense float64, Y (rows, K) in the loss's
    encoding, sample weights times the class weights of the rows' labels, when the
    model was trained with them: `_class_weight.objective_weights`)."""
    X = value.matrix(X)
    Y = value.targets(y, X.shape[0])
    sw = check_weights(sample_weight, X.shape[0])
    if class_weights is not None:
        factors = class_weights[_label_codes(value.classes, y)]
        with np.errstate(over="ignore"):
            weighed = sw * factors
        wide = np.flatnonzero(np.isinf(weighed))
        if wide.size:
            i = int(wide[0])
            raise RowError(i, f": its sample weight {sw[i].item()!r} times its class weight "
                           f"{factors[i].item()!r} is beyond the double range (1.8e308); "
                           "divide every sample weight by one factor (the same objective)")
        sw = weighed
    return X, Y, sw


def _label_codes(classes, y):
    """Each label's index in the model's (sorted) classes; the labels are classes."""
    y = np.asarray(y)
    try:
        return np.searchsorted(classes, y)
    except TypeError:  # labels of mixed types: one at a time
        index = {label: i for i, label in enumerate(classes.tolist())}
        return np.array([index[label] for label in y.tolist()], dtype=np.intp)


def duality_gap(model, X, y, sample_weight=None, *, scale_dual=True, refine_epochs=0,
                objective="trained"):
    """Duality-gap certificate of a fitted onlinepgs model on (X, y).

    The objective is the model's own (``sigma * r(w) + sum_i sample_weight_i *
    loss(<w, x_i>; y_i) / sum_i sample_weight_i`` over its domain: R^n, the ball of
    radius ``radius``, or for ``radius="auto"`` the ball of the radius reached in
    training), with the intercept a constant feature of value ``intercept_scaling``
    inside w. See `onlinepgs.duality` for the dual point and the choice of its scale.
    PGS's iterates target this objective when the mean weight is 1
    (docs/design/estimators.md, "Sample weights").

    Parameters
    ----------
    model : fitted PGS or SDCA estimator or learner, or onlinepgs.model.LinearModel
        Its reported weights (``coef_``, ``intercept_``; the value ``model_``) are
        certified. With an l_1 term (``l1 > 0``: PGS at any p, on R^n or the ball; SDCA)
        the objective has it too, ``h(w) = sigma r(w) + l1 ||w||_1`` over S, with
        ``h*(z) = sigma r_S*(soft(z, l1) / sigma)`` (soft the soft threshold; for p = 2 on
        R^n ``sum_j (|z_j| - l1)_+^2 / (2 sigma)``), the dual point's scale chosen by
        bisection (D is concave along it); pure l_1 (SDCA's ``sigma = 0``, p = 2) scales
        the dual point into the set ``||X^T a / W||_inf <= l1`` (not for the logistic
        loss, refused with the reason). A coupled multiclass model (``multi_class=
        "multinomial"`` or ``"crammer_singer"``) is certified for its one coupled
        objective, ``sum_k h(w_k)`` plus the mean loss, at any p, on R^n or the ball
        (``radius="auto"`` included) and with l1 (sigma > 0; `_MulticlassCertificate`).
    X : {array-like, sparse matrix} of shape (n_samples, n_features), or records
        Anything the model's `predict` accepts (hashed when the model hashes).
    y : array-like of shape (n_samples,)
        Labels among ``classes_`` (classifier) or targets (regressor).
    sample_weight : array-like of shape (n_samples,), default=None
        The c_i of the objective (1 for every row by default), times the class weight
        of the row's label when `model` is a classifier trained with ``class_weight``
        (a dict's as given; "balanced" as ``W / (K W_c)`` from the class counts the
        model holds, a stream's estimate at its end; a `LinearModel` value carries no
        class weights: pass them here). The objective averages by their sum, so it is
        the same in any unit: weights of 1e308 are summed in a power-of-two unit and
        certified exactly; a row whose weight times its class weight overflows is
        refused, naming it.
    scale_dual : bool, default=True
        Choose the best factor s of the dual point (False: s = 1, the plain a(w)).
    refine_epochs : int >= 0, default=0
        Improve the dual point by that many epochs of SDCA (`onlinepgs.sdca`) started
        from a(w), and keep the better of the two dual values. For the hinge, absolute
        and epsilon-insensitive losses a(w) alone cannot certify a near-optimal w (the
        rows whose margins sit on a kink need dual values between the derivative's
        one-sided limits, which SDCA finds); a few epochs then bring the certificate
        down towards the true suboptimality. SDCA's dual is that of R^n, a lower bound
        on the ball's optimum too (``r_ball* <= r*``). Costs about two passes an epoch.
        At a small sigma the epochs tighten every loss's bound (the one-pass dual point's
        errors are amplified by ``1 / (sigma W)``).
    objective : {"trained", "raw"}, default="trained"
        Which objective to certify. "trained": the one the model was trained on; for
        the adaptive geometry (``geometry="adaptive"``) that is the objective on the
        scaled weights, ``sigma r(S w) + l1 ||S w||_1`` plus the mean loss, with
        ``S = diag(s)`` the largest ``|x_j|`` the training saw (the intercept's constant
        feature: the constant itself; 1 for a column never seen, whose weight is 0),
        the same as the objective of the global geometry on columns divided by ``s_j``.
        "raw": ``sigma r(w) + l1 ||w||_1`` on the weights as they are (the global
        geometry's objective; the same as "trained" for its models).

    Returns
    -------
    DualityGap
        ``gap >= P(w) - P(w*)``; for a multiclass classifier, sums over its
        one-vs-rest problems plus per-problem arrays (one entry for a coupled model).

    Raises
    ------
    ValueError
        The model's weights or intercept are not finite (a diverged or damaged
        model: no bound holds for it), naming the first such entry; a term of the
        objective beyond the double range (no bound can be computed); or bad rows.

    Examples
    --------
    >>> import numpy as np
    >>> from onlinepgs import PGSClassifier, duality_gap
    >>> rng = np.random.RandomState(0)
    >>> X = rng.randn(200, 3); y = (X[:, 0] + 0.5 * rng.randn(200) > 0).astype(int)
    >>> short = PGSClassifier(sigma=0.1, max_epochs=1, random_state=0).fit(X, y)
    >>> long = PGSClassifier(sigma=0.1, max_epochs=50, random_state=0).fit(X, y)
    >>> duality_gap(long, X, y).gap < duality_gap(short, X, y).gap
    True
    >>> duality_gap(long, X, y).relative_gap < 1e-4
    True
    """
    if (isinstance(refine_epochs, bool) or not isinstance(refine_epochs, (int, np.integer))
            or refine_epochs < 0):
        raise ValueError(f"refine_epochs must be an int >= 0, got {refine_epochs!r}")
    value = _value_of(model)
    scaled, inv = _objective_coordinates(model, value, objective)
    X, Y, sw = _model_rows(value, X, y, sample_weight, objective_weights(model))
    value, X = scaled, _scaled_columns(X, inv)
    cert = _certificate_of_model(value, scale_dual)
    for start in range(0, X.shape[0], _BLOCK_ROWS):
        stop = start + _BLOCK_ROWS
        cert.add(X[start:stop], Y[start:stop], sw[start:stop])
    result = cert.result()
    if refine_epochs == 0 or X.shape[0] == 0:
        return result
    if getattr(value, "multi_class", "ovr") != "ovr":
        raise ValueError(f"refine_epochs is for one-vs-rest models; a multi_class="
                         f"{value.multi_class!r} model's SDCA duality_gap_ is its own "
                         "certificate")
    if value.l1 != 0:
        raise ValueError(f"refine_epochs needs a model without an l_1 term (l1={value.l1:g}): "
                         "certify it with refine_epochs=0 (an SDCA model's duality_gap_ is "
                         "SDCA's own certificate)")
    return _refined(value, result, X, Y, sw, int(refine_epochs))


_OBJECTIVES = ("trained", "raw")


def _objective_coordinates(model, value, objective):
    """(value, inv): the model in the coordinates of the objective certified, and the
    factors 1 / s_j of the data's columns there, ``inv(columns)`` (None: the columns as
    they are).

    A model of the adaptive geometry minimizes its objective on the scaled weights
    ``v_j = s_j w_j`` over the scaled features ``x_j / s_j`` (docs/design/adaptive.md),
    s_j the largest |x_j| its training saw (the intercept's constant feature: the
    constant); ``objective="trained"`` certifies that one, which is the global
    geometry's objective of the scaled problem: the weights times the scales, the
    columns divided by them, the constant feature ``intercept_scaling / s_0`` (1). A
    column the model never saw (its weight 0) and a column beyond its width keep the
    scale 1. ``objective="raw"``, and every model of the global geometry, certify
    ``sigma r(w) + l1 ||w||_1`` plus the loss on the raw weights."""
    if objective not in _OBJECTIVES:
        raise ValueError(f"objective must be one of {list(_OBJECTIVES)}, got {objective!r}")
    if objective == "raw" or not getattr(value, "has_scales", False):
        return value, None
    if value.is_sparse:  # the non-zeros scaled, never densified (nor the scales)
        held = value.coef_sparse
        scaled = value._with(None, SparseWeights(
            held.indptr, held.indices,
            held.data * value.scales_at(1 + np.asarray(held.indices)), held.shape))
    else:
        coef = np.asarray(value.coef) * value.scales_at(np.arange(1, value.n_features + 1))
        coef.setflags(write=False)
        scaled = value._with(coef, None)
    s0 = float(value.scales_at([0])[0])
    scaled.intercept_weight = value.intercept_weight * s0
    scaled.intercept_scaling = value.intercept_scaling / s0
    scaled._set_scales(None)  # its own coordinates
    return scaled, lambda columns: 1.0 / value.scales_at(1 + columns)


def _scaled_columns(X, inv):
    """X (CSR or dense, float64) with column j times ``inv(j)`` (the factors 1 / s_j of
    `_objective_coordinates`: 1 past the model's width, O(entries) on sparse X), or X
    itself without factors; a new matrix, the caller's left as it is."""
    if inv is None:
        return X
    if sp.issparse(X):
        columns = np.asarray(X.indices, dtype=np.int64)
        data = np.asarray(X.data, dtype=np.float64) * inv(columns)
        return sp.csr_matrix((data, X.indices, X.indptr), shape=X.shape)
    X = np.array(X, dtype=np.float64)
    X *= inv(np.arange(X.shape[1]))
    return X


def _refined(value, result, X, Y, sw, epochs):
    """`result` with each problem's dual raised to SDCA's after `epochs` epochs from a(w)."""
    from onlinepgs._core._sdca import SDCAProblem  # the batch solver, only when asked

    Xc = sp.csr_matrix(X, dtype=np.float64) if not sp.issparse(X) else X.tocsr()
    Xc = sp.csr_matrix((np.asarray(Xc.data, np.float64), Xc.indices, Xc.indptr), Xc.shape)
    margins = np.asarray(value.scores(X), dtype=np.float64).reshape(X.shape[0], -1)
    sw, _ = in_units(sw)  # the same objective in any unit: no overflow from 1e308s
    # the core averages by the rows m, the objective by the weights' sum W: its problem
    # with sigma * W / m has our optimum and objectives W / m times ours
    scale = float(sw.sum()) / X.shape[0]
    dual = np.array(result.dual_per_problem, dtype=np.float64)
    for c in range(dual.shape[0]):
        yc = np.ascontiguousarray(Y[:, c])
        zc = margins[:, c] if margins.shape[1] > 1 else margins[:, 0]
        alpha0 = -sw * loss_derivative_py(value.loss, zc, yc, value.epsilon)
        prob = SDCAProblem(Xc.data, Xc.indices, Xc.indptr, Xc.shape[1], yc, sw,
                           loss=value.loss, p=value.p, sigma=value.sigma * scale,
                           fit_intercept=value.fit_intercept,
                           intercept_scaling=value.intercept_scaling,
                           epsilon=value.epsilon, order="permutation", seed=c,
                           alpha0=alpha0, shrinking=False)
        prob.run(epochs, 0.0, epochs)
        if prob.dual / scale > dual[c]:
            dual[c] = prob.dual / scale
    primal = np.asarray(result.primal_per_problem, dtype=np.float64)
    gap = primal - dual
    total_primal, total_gap = float(primal.sum()), float(gap.sum())
    rel = total_gap / max(abs(total_primal), np.finfo(float).tiny)
    return replace(result, dual=float(dual.sum()), gap=total_gap, relative_gap=rel,
                   dual_per_problem=dual, gap_per_problem=gap)


def duality_gap_stream(model, source, *, chunk_rows=10_000, zero_based="auto",
                       scale_dual=True, objective="trained"):
    """`duality_gap` in one pass over a file or stream, in O(n_features + chunk) memory.

    Parameters
    ----------
    model : fitted PGS or SDCA estimator or learner, or onlinepgs.model.LinearModel
    source : str, os.PathLike, "-", binary file object, or iterable of chunks
        An svmlight / libsvm source as `onlinepgs.iter_svmlight` reads it (plain, gzip,
        bz2 or xz; ``"-"`` is stdin), or an iterable of ``(X, y)`` or
        ``(X, y, sample_weight)`` chunks of anything `duality_gap` accepts. The sample
        weights are `duality_gap`'s, times the model's class weights alike; the sums
        move to a larger power-of-two unit when a chunk's weights lie 2**256 beyond the
        first chunk's (so a stream of weights near 1e308 is certified exactly).
    chunk_rows : int, default=10_000
        Rows per chunk read from an svmlight source.
    zero_based : bool or "auto", default="auto"
        Index base of an svmlight source (see `onlinepgs.iter_svmlight`).
    scale_dual : bool, default=True
        See `duality_gap`.
    objective : {"trained", "raw"}, default="trained"
        See `duality_gap` (the scales are the model's, the same for every chunk).

    Returns
    -------
    DualityGap
        The same certificate as `duality_gap` on the concatenated rows (up to the
        rounding of sums taken in another order).

    Raises
    ------
    SvmlightError
        A malformed line (naming source, line and column).
    ValueError
        A chunk the model rejects (named by its rows), no rows at all, or weights that
        are not finite (refused before any row is read).

    Examples
    --------
    >>> import io
    >>> from onlinepgs import PGSClassifier, load_svmlight
    >>> from onlinepgs.duality import duality_gap_stream
    >>> data = b"1 1:1\\n-1 2:1\\n1 1:0.5 3:1\\n-1 2:2\\n" * 25
    >>> X, y = load_svmlight(io.BytesIO(data))
    >>> clf = PGSClassifier(sigma=0.1, max_epochs=20, random_state=0).fit(X, y)
    >>> cert = duality_gap_stream(clf, io.BytesIO(data), chunk_rows=7)
    >>> cert.n_rows, cert.gap >= 0, cert.relative_gap < 1e-3
    (100, True, True)
    """
    from onlinepgs.svmlight import iter_svmlight

    value = _value_of(model)
    scaled, inv = _objective_coordinates(model, value, objective)
    cert = _certificate_of_model(scaled, scale_dual)
    class_weights = objective_weights(model)
    if isinstance(source, (str, bytes, os.PathLike)) or hasattr(source, "read"):
        chunks = iter_svmlight(source, chunk_rows=chunk_rows, zero_based=zero_based)
        name = chunks.source_name
    else:
        try:
            chunks = iter(source)
        except TypeError:
            raise TypeError("source must be a path, '-', a binary file object or an "
                            f"iterable of (X, y) chunks; got {type(source).__name__}") from None
        name = getattr(source, "source_name", "<chunks>")  # a reader names its file
    first = 0
    for index, item in enumerate(chunks):
        if not isinstance(item, tuple) or len(item) not in (2, 3):
            raise ValueError(f"{name}: chunk {index} is not an (X, y) or "
                             f"(X, y, sample_weight) tuple: {type(item).__name__}")
        X, y = item[0], item[1]
        sample_weight = item[2] if len(item) == 3 else None
        if value.is_classifier:
            # named by its row in the whole stream (the model's own message would give
            # the row within the chunk)
            unknown = check_labels(y, value.classes)
            if unknown is not None:
                k, label = unknown
                raise ValueError(f"{name}, row {first + k + 1} (counted from 1): label "
                                 f"{label!r} is not one of the model's classes "
                                 f"{value.classes.tolist()}")
        try:
            X, Y, sw = _model_rows(value, X, y, sample_weight, class_weights)
        except ValueError as exc:
            if isinstance(exc, AtRows) and exc.rows:  # its row, counted in the stream
                worded = exc.worded(lambda row: f"row {first + row + 1} (counted from 1)")
                raise ValueError(f"{name}{', ' if worded.startswith('row ') else ': '}"
                                 f"{worded}") from None
            raise ValueError(f"{name}, chunk {index} (rows from {first + 1}, counted from "
                             f"1): {exc}") from None
        cert.add(_scaled_columns(X, inv), Y, sw)
        first += X.shape[0]
    if cert.m == 0:
        raise ValueError(f"{name}: no rows: the duality gap needs at least one row")
    return cert.result()


# ---- any linear model ------------------------------------------------------------------------
def _positive(name, value, allow_zero=False):
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be finite and {'>=' if allow_zero else '>'} 0, "
                         f"got {value!r}")
    return value


def gap_of_weights(coef, intercept, X, y, *, loss, p=2.0, sigma, radius=None,
                   fit_intercept=True, intercept_scaling=1.0, epsilon=0.1,
                   sample_weight=None, scale_dual=True, l1=0.0):
    """Duality-gap certificate of any linear model given by its weights (one problem).

    The objective is ``P(w) = sigma r(w) + l1 ||w||_1 + (1/W) sum_i c_i l(<w, x_i> ; y_i)``,
    W the sum of the weights c_i (m without weights), with
    ``r(w) = ||w||_p^2 / (2 (p - 1))`` over R^n or the l_p ball of radius ``radius``.
    With ``fit_intercept`` the intercept is a **regularized** constant feature of value
    ``intercept_scaling``, whose weight is ``intercept / intercept_scaling`` (LIBLINEAR's
    convention). A LIBLINEAR or scikit-learn solution of ``(1/2) ||w||^2 + C sum_i l_i``
    is certified with ``p=2, sigma=1 / (C W)``; a model whose intercept is not
    regularized solves another problem (use ``fit_intercept=False`` with a constant
    column only if that column is meant to be regularized).

    Parameters
    ----------
    coef : array-like of shape (n_features,) or (1, n_features)
    intercept : float or array-like of shape (1,)
        Must be 0 when ``fit_intercept=False``.
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
        Already in the loss's encoding: -1 or +1 for the classification losses
        (hinge, logistic, squared_hinge, smooth_hinge), real targets otherwise.
    loss : str
        One of the eight onlinepgs losses (``squared`` is ``(z - y)^2``, no 1/2).
    p : float in (1, 2], default=2.0
    sigma : float > 0
    radius : float > 0 or None, default=None
        The ball's radius B; None for R^n. A w outside the ball has ``primal = gap =
        +inf`` (the dual stays a valid lower bound on the optimum).
    fit_intercept : bool, default=True
    intercept_scaling : float > 0, default=1.0
    epsilon : float >= 0, default=0.1
        Width of the huber and epsilon_insensitive losses.
    sample_weight : array-like of shape (n_samples,), default=None
    scale_dual : bool, default=True
        Choose the best factor of the dual point (see `onlinepgs.duality`).
    l1 : float >= 0, default=0.0
        Weight of the l_1 term (the intercept's weight included, as in the estimators).
        Its dual term is ``sigma r_S*(soft(X^T a / W, l1) / sigma)``, soft the soft
        threshold (docs/design/l1.md).

    Returns
    -------
    DualityGap

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.svm import LinearSVC
    >>> from onlinepgs.duality import gap_of_weights
    >>> rng = np.random.RandomState(0)
    >>> X = rng.randn(100, 4); y = np.where(X[:, 0] + 0.3 * rng.randn(100) > 0, 1, -1)
    >>> svc = LinearSVC(C=1.0, loss="squared_hinge", tol=1e-10, max_iter=100_000).fit(X, y)
    >>> cert = gap_of_weights(svc.coef_, svc.intercept_, X, y, loss="squared_hinge",
    ...                       sigma=1 / (1.0 * 100), intercept_scaling=1.0)
    >>> cert.relative_gap < 1e-6
    True
    """
    if loss not in LOSS_CODES:
        raise ValueError(f"unknown loss {loss!r}; expected one of {sorted(LOSS_CODES)}")
    p = _positive("p", p)
    if not 1.0 < p <= 2.0:
        raise ValueError(f"p must be in (1, 2], got {p!r}")
    sigma = _positive("sigma", sigma)
    radius = None if radius is None else _positive("radius", radius)
    intercept_scaling = _positive("intercept_scaling", intercept_scaling)
    epsilon = _positive("epsilon", epsilon, allow_zero=True)
    l1 = _positive("l1", l1, allow_zero=True)

    coef = np.asarray(coef, dtype=np.float64)
    if coef.ndim == 2 and coef.shape[0] == 1:
        coef = coef[0]
    if coef.ndim != 1:
        raise ValueError(f"coef must have shape (n_features,) or (1, n_features) (one "
                         f"problem), got shape {coef.shape}")
    if not np.all(np.isfinite(coef)):
        raise ValueError(f"coef has a non-finite value at index "
                         f"{int(np.flatnonzero(~np.isfinite(coef))[0])}")
    b = np.asarray(0.0 if intercept is None else intercept, dtype=np.float64).ravel()
    if b.shape != (1,) or not np.isfinite(b[0]):
        raise ValueError(f"intercept must be one finite number, got {intercept!r}")
    if not fit_intercept and b[0] != 0.0:
        raise ValueError(f"intercept is {b[0]!r} but fit_intercept=False: the objective "
                         "has no intercept")

    X = check_csr(X) if sp.issparse(X) else check_dense(X)
    if X.shape[1] != coef.shape[0]:
        raise ValueError(f"X has {X.shape[1]} columns but coef has {coef.shape[0]}")
    y = np.asarray(y, dtype=np.float64)
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(f"y must have shape ({X.shape[0]},), got {y.shape}")
    if loss in CLASSIFICATION_LOSSES:
        bad = np.flatnonzero((y != 1.0) & (y != -1.0))
        if bad.size:
            raise ValueError(f"y must be -1 or +1 for the {loss} loss; row {int(bad[0])} "
                             f"has {y[bad[0]].item()!r}")
    elif not np.all(np.isfinite(y)):
        bad = int(np.flatnonzero(~np.isfinite(y))[0])
        raise ValueError(f"y contains NaN or infinity (row {bad}: {y[bad].item()!r})")
    sw = check_weights(sample_weight, X.shape[0])

    cert = _Certificate(coef[:, None], [b[0] / intercept_scaling], loss=loss, p=p,
                        sigma=sigma, radius=radius, fit_intercept=bool(fit_intercept),
                        intercept_scaling=intercept_scaling, epsilon=epsilon,
                        scale_dual=scale_dual, l1=l1)
    if sp.issparse(X):
        X = X.tocsr()
    for start in range(0, X.shape[0], _BLOCK_ROWS):
        stop = start + _BLOCK_ROWS
        cert.add(X[start:stop], y[start:stop, None], sw[start:stop])
    return cert.result()
