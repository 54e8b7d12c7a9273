"""Plain-NumPy reference of PGS (Zhu et al., 2009, Figure 1): O(n) per step, no lazy tricks.

Written from the paper and its formulas only (docs/design/method.md), as an independent yardstick for the core.
Below it, adaptive, normalized dual averaging (ALGORITHM.md's section of that name): an eager
transcription (`reference_adaptive`) and a lazy O(nnz) one (`lazy_adaptive`) with the closed forms
of the averages between touches (`gap_sum`).
"""
import math
from fractions import Fraction
from functools import lru_cache

import numpy as np


def loss_value(name, z, y, epsilon=0.1):
    z = np.asarray(z, dtype=float)
    y = np.asarray(y, dtype=float)
    if name == "hinge":
        return np.maximum(0.0, 1.0 - y * z)
    if name == "logistic":
        return np.logaddexp(0.0, -y * z)
    if name == "squared_hinge":
        return np.maximum(0.0, 1.0 - y * z) ** 2
    if name == "smooth_hinge":
        m = y * z
        return np.where(m >= 1, 0.0, np.where(m <= 0, 0.5 - m, 0.5 * (1 - m) ** 2))
    if name == "squared":
        return (z - y) ** 2
    if name == "absolute":
        return np.abs(z - y)
    if name == "huber":
        a = np.abs(z - y)
        return np.where(a <= epsilon, 0.5 * a**2, epsilon * a - 0.5 * epsilon**2)
    if name == "epsilon_insensitive":
        return np.maximum(0.0, np.abs(z - y) - epsilon)
    raise ValueError(name)


def loss_derivative(name, z, y, epsilon=0.1):
    z = np.asarray(z, dtype=float)
    y = np.asarray(y, dtype=float)
    if name == "hinge":
        return np.where(y * z < 1, -y, 0.0)
    if name == "logistic":
        return -y * 0.5 * (1.0 - np.tanh(0.5 * y * z))  # -y * sigmoid(-yz)
    if name == "squared_hinge":
        return np.where(y * z < 1, -2 * y * (1 - y * z), 0.0)
    if name == "smooth_hinge":
        m = y * z
        return np.where(m >= 1, 0.0, np.where(m <= 0, -y, -y * (1 - m)))
    if name == "squared":
        return 2 * (z - y)
    if name == "absolute":
        return np.sign(z - y)
    if name == "huber":
        return np.clip(z - y, -epsilon, epsilon)
    if name == "epsilon_insensitive":
        r = z - y
        return np.where(r > epsilon, 1.0, np.where(r < -epsilon, -1.0, 0.0))
    raise ValueError(name)


def loss_conjugate(name, u, y, epsilon=0.1):
    """l*(u; y) = sup_z u z - l(z; y) in closed form (derived by hand), inf outside."""
    u = np.asarray(u, dtype=float)
    y = np.asarray(y, dtype=float)
    v = u * y
    inf = np.inf
    if name == "hinge":
        return np.where((v >= -1) & (v <= 0), v, inf)
    if name == "logistic":
        a = np.clip(-v, 0.0, 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            ent = np.where(a > 0, a * np.log(a), 0.0) + np.where(a < 1, (1 - a) * np.log1p(-a), 0.0)
        return np.where((v >= -1) & (v <= 0), ent, inf)
    if name == "squared_hinge":
        return np.where(v <= 0, v + u**2 / 4, inf)
    if name == "smooth_hinge":
        return np.where((v >= -1) & (v <= 0), v + u**2 / 2, inf)
    if name == "squared":
        return u**2 / 4 + u * y
    if name == "absolute":
        return np.where(np.abs(u) <= 1, u * y, inf)
    if name == "huber":
        return np.where(np.abs(u) <= epsilon, u * y + u**2 / 2, inf)
    if name == "epsilon_insensitive":
        return np.where(np.abs(u) <= 1, u * y + epsilon * np.abs(u), inf)
    raise ValueError(name)


def r_value(w, p):
    return np.sum(np.abs(w) ** p) ** (2.0 / p) / (2 * (p - 1))


def r_conjugate(theta, p, radius=None):
    """r*(theta) = <theta, w> - r(w) at the maximizer w = grad r*(theta) (on S)."""
    w = grad_rstar(theta, p, radius)
    return float(theta @ w - r_value(w, p))


def grad_rstar(theta, p, radius=None):
    """grad of r*(theta) = ||theta||_q^2 / (2(q-1)) over R^n, or over the l_p ball."""
    q = p / (p - 1.0)
    # grad r* is homogeneous of degree 1: take the powers of theta / max |theta_j| <= 1,
    # which stay in range however large q is (p near 1)
    top = np.max(np.abs(theta)) if theta.size else 0.0
    if top == 0.0:
        return np.zeros_like(theta)
    unit = theta / top
    nq = np.sum(np.abs(unit) ** q) ** (1.0 / q)
    w = top * nq ** (2.0 - q) * np.abs(unit) ** (q - 1.0) * np.sign(unit) / (q - 1.0)
    if radius is not None:
        norm_p = np.sum(np.abs(w) ** p) ** (1.0 / p)
        if norm_p > radius:
            w = w * (radius / norm_p)
    return w


def reference_pgs(X, Y, *, p, sigma, loss, batch_size=1, radius=None, sample_weight=None,
                  epsilon=0.1, labels=None):
    """Figure 1 over the rows of dense X in order, for the columns of Y (one problem each).

    Returns the list of iterates w_1..w_T (each (n, K)) and the online statistics.
    `labels` (class indices) turns on multiclass mistakes by argmax.
    """
    X = np.asarray(X, dtype=float)
    Y = np.asarray(Y, dtype=float).reshape(X.shape[0], -1)
    m, n = X.shape
    K = Y.shape[1]
    sw = np.ones(m) if sample_weight is None else np.asarray(sample_weight, float)
    q = p / (p - 1.0)
    lam = np.zeros((n, K))
    w = np.zeros((n, K))
    iterates = []
    sum_loss = sum_wloss = sum_w = 0.0
    mistakes = 0
    regret = np.zeros(K)
    t = 0
    loss0_max = 0.0
    # the online primal-dual pair (Fenchel duality; docs/design/guarantees.md): per problem
    sum_reg = np.zeros(K)
    sum_step_loss = np.zeros(K)
    sum_conj = np.zeros(K)
    step_radius = radius if radius != "auto" else None
    for start in range(0, m, batch_size):
        rows = np.arange(start, min(start + batch_size, m))
        Z = X[rows] @ w
        g = np.zeros((n, K))
        for i, r in enumerate(rows):
            ex_loss = loss_value(loss, Z[i], Y[r], epsilon).sum()
            sum_loss += ex_loss
            sum_wloss += sw[r] * ex_loss
            sum_w += sw[r]
            if labels is not None:
                mistakes += int(np.argmax(Z[i]) != labels[r])
            elif loss in ("hinge", "logistic", "squared_hinge", "smooth_hinge"):
                mistakes += int((Z[i, 0] > 0) != (Y[r, 0] > 0))
            g += np.outer(X[r], loss_derivative(loss, Z[i], Y[r], epsilon) * sw[r])
        g /= len(rows)
        for c in range(K):
            sum_reg[c] += r_value(w[:, c], p)
            sum_step_loss[c] += np.mean(sw[rows] * loss_value(loss, Z[:, c], Y[rows, c], epsilon))
            sum_conj[c] += np.mean(sw[rows] * loss_conjugate(
                loss, loss_derivative(loss, Z[:, c], Y[rows, c], epsilon), Y[rows, c], epsilon))
        t += 1
        if radius == "auto":  # the smallest ball sure to hold the optimum, rows so far
            for r in rows:
                loss0_max = max(loss0_max, np.max(sw[r] * loss_value(loss, 0.0, Y[r], epsilon)))
        step_radius = np.sqrt(2 * (p - 1) * loss0_max / sigma) if radius == "auto" else radius
        lam -= g
        for c in range(K):
            w[:, c] = grad_rstar(lam[:, c] / ((t + 1) * sigma), p, step_radius)
            regret[c] += 0.5 * np.sum(np.abs(g[:, c]) ** q) ** (2.0 / q) / (t * sigma)
        iterates.append(w.copy())
    dual = np.array([-sum_conj[c] / t - sigma * r_conjugate(lam[:, c] / (sigma * t), p,
                                                            step_radius) for c in range(K)])
    stats = dict(n_examples=m, n_steps=t, progressive_loss=sum_wloss / sum_w,
                 sum_loss=sum_loss, progressive_mistakes=mistakes, regret_bound=regret,
                 online_objective=(sigma * sum_reg + sum_step_loss) / t, dual_objective=dual)
    return iterates, stats


def combine(iterates, which, rnd_t=None):
    W = np.array(iterates)
    T = len(iterates)
    if which == "last":
        return W[-1]
    if which == "average":
        return W.mean(axis=0)
    if which in ("weighted", "weighted2"):
        tw = np.arange(1, T + 1, dtype=float) ** (1 if which == "weighted" else 2)
        return np.tensordot(tw, W, axes=1) / tw.sum()
    if which == "random":
        return W[rnd_t - 1]
    raise ValueError(which)


# ---------------------------------------------------------------------------------------
# Adaptive, normalized dual averaging (ALGORITHM.md, "Adaptive, normalized dual averaging")
#
# Per-feature scales s_j = max |x_ij| over the rows seen so far (a step's rows included:
# its margins already see them, so a scaled value x_ij / s_j is at most 1 in magnitude),
# dual averaging in the scaled weights v = S w of
#     F(w) = (1/m) sum_i c_i l(<w, x_i>; y_i) + sigma r(S w) + l1 ||S w||_1,
# with the scaled gradient gt_j = g_j / s_j and per-coordinate stabilizers (p = 2) or one
# scale-free scalar one (p < 2). A step of a batch of b rows with importance weights c_i
# adds gt = (1/b) sum_i c_i l'_i x_i / s to the sum U (the gradient of the weighted mean
# loss, as PGS takes it) and, reading each row as b rows of weight c_i / b ("a row of
# weight k adds k gt^2"), (1/b) sum_i c_i (l'_i x_ij / s_j)^2 to the accumulator n_j
# (p < 2: (1/b) sum_i c_i ||l'_i x_i / s||_q^2 to the scalar one). t counts steps.
#
#   p = 2:  v_j(t) = -sgn(U_j) (|U_j| - l1 t)_+ / (sigma t + (delta + sqrt(n_j)) / eta)
#   centered (FTRL-Proximal): U_j is replaced by z_j, z_j += gt_j - sig_j v_j(t-1),
#           sig_j = (sqrt(n_j + dn_j) - sqrt(n_j)) / eta
#   p < 2:  v(t) = grad r_S*( soft(-U, l1 t) / (sigma t + (delta + sqrt(L_t)) / eta) ),
#           L_t the scalar accumulator; on the ball ||v||_p <= B the same vector times
#           min(1, B / ||v||_p) (PGS's factor: the stabilizer is a multiple of r)
#   p = 2 on the ball: the minimizer of <U, v> + l1 t ||v||_1 + sum_j D_j v_j^2 / 2 over
#           ||v||_2 <= B, D_j the denominator above: v_j = -soft(U_j) / (D_j + mu), mu >= 0
#           the root of ||v||_2 = B (a scalar shared by every coordinate: no O(nnz) form)
#
# The reported iterates are combinations of v_1..v_T divided by the final scales
# (w = v / s; 0 in a column that never held a non-zero): the objective's w at the final
# scales, the scale-free quantity averaged.
# ---------------------------------------------------------------------------------------
AVERAGES = {"average": 0, "weighted": 1, "weighted2": 2}  # the weight t^k of an average


def _check_adaptive(p, centered, l1, iterate, radius, lazy):
    if centered and p != 2.0:
        raise ValueError("the centered (FTRL-Proximal) form is per-coordinate: p = 2 only")
    if p != 2.0 and l1 > 0 and iterate not in ("last", None):
        raise ValueError("l1 with p < 2 keeps only the last iterate")
    if lazy and p == 2.0 and radius is not None:
        raise ValueError("the p = 2 ball's multiplier mu moves every coordinate: no lazy form")


def _soft(U, thr):
    """-sgn(U) (|U| - thr)_+ : the numerator of v."""
    return -np.sign(U) * np.maximum(np.abs(U) - thr, 0.0)


def _ball_multiplier(num, den, radius):
    """mu >= 0 with ||num / (den + mu)||_2 = radius (0 when the free point is inside)."""
    from scipy.optimize import brentq

    def excess(mu):
        with np.errstate(divide="ignore", invalid="ignore"):
            v = np.where(num != 0, num / (den + mu), 0.0)
        return np.sqrt(np.sum(v * v)) - radius

    if excess(0.0) <= 0:
        return 0.0
    top = np.sqrt(np.sum(num * num)) / radius  # every |v_j| <= |num_j| / mu there
    return brentq(excess, 0.0, top, xtol=1e-300, rtol=1e-15, maxiter=500)


def adaptive_map(U, acc, lam2, t, *, p, sigma, eta, l1, delta, radius=None):
    """The scaled iterate v(t) (n, K) from the sums U (or z), the accumulators (n, K)
    and the scalar accumulators lam2 (K,) (p < 2)."""
    num = _soft(U, l1 * t)
    v = np.zeros_like(U)
    if p == 2.0:
        den = sigma * t + (delta + np.sqrt(acc)) / eta
        for k in range(U.shape[1]):
            nz = num[:, k] != 0
            mu = 0.0 if radius is None else _ball_multiplier(num[nz, k], den[nz, k], radius)
            v[nz, k] = num[nz, k] / (den[nz, k] + mu)
        return v
    for k in range(U.shape[1]):
        den = sigma * t + (delta + np.sqrt(lam2[k])) / eta
        if np.any(num[:, k] != 0):
            v[:, k] = grad_rstar(num[:, k] / den, p, radius)
    return v


def _rescaled(U, acc, s_old, s_new, t, *, p, sigma, eta, l1, delta):
    """A feature's scale grown from s_old to s_new (both (n,), s_old 0 where unseen): its
    accumulated squares, in the units of the old scale, shrink by (s_old / s_new)^2 (the
    squares of the same gradients in the new scale: Ross, Mineiro and Langford's
    normalized update) and U moves so that the weight v(t) stays as it was. In place, for
    the coordinates whose scale grew; p = 2 (p < 2 has one scalar accumulator)."""
    grown = (s_old > 0) & (s_new > s_old)
    if p != 2.0 or not grown.any():
        return
    ratio = (s_old[grown] / s_new[grown])[:, None]
    den_old = sigma * t + (delta + np.sqrt(acc[grown])) / eta
    acc[grown] = acc[grown] * ratio ** 2
    den_new = sigma * t + (delta + np.sqrt(acc[grown])) / eta
    thr = l1 * t
    a = np.abs(U[grown]) - thr
    keep = (a > 0) & (den_old > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        moved = np.copysign(thr + a * den_new / den_old, U[grown])
    U[grown] = np.where(keep, moved, U[grown])


def _scaled_rows(X, s):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(s > 0, X / np.where(s > 0, s, 1.0), 0.0)


def _batch_sums(Xs, D, c, q):
    """A step's sums over its rows: gt (n, K), the accumulators' increments (n, K) and
    the scalar ones (K,), from the scaled rows Xs (b, n), the loss derivatives D (b, K)
    and the importance weights c (b,)."""
    b = Xs.shape[0]
    gt = Xs.T @ (c[:, None] * D) / b
    dn = (Xs ** 2).T @ (c[:, None] * D ** 2) / b
    norms_q = np.sum(np.abs(Xs) ** q, axis=1) ** (2.0 / q)  # ||x_i / s||_q^2
    dlam2 = (c * norms_q) @ D ** 2 / b
    return gt, dn, dlam2


# --- importance weights, one row a step at p = 2: the invariant update ------------------
#
# A row of weight c <= 1 steps as above (c gt, c gt^2). A row of weight c > 1 is its
# first copy, that same step at weight 1, then the remaining importance R = c - 1 as the
# limit of many small copies (Karampatziakis and Langford, "Online importance weight
# aware updates", 2011), in dual averaging's terms:
#
# * rates frozen: with the row's n_j fixed, v_j is linear in U_j (soft-thresholded: a
#   coordinate inside its threshold does not move), so moving U_j by A x_j / s_j moves
#   the margin by -A Q at most, Q = sum_j (x_j / s_j)^2 / D_j, D_j = sigma t + (delta +
#   sqrt(n_j)) / eta (exactly, with l1 = 0);
# * the copies' slopes in the limit: dz/ds = -Q l'(z; y) over the importance s in
#   [0, R], a scalar ODE with a closed form per loss (`invariant_move`); its margin walks
#   to the loss's minimizer and never passes it (l' keeps its sign along the way), so
#   A = -(z(R) - z(0)) / Q moves the row's margin toward the label and no further;
# * before it, the accumulators take what the copies' squared slopes may add:
#   n_j += G (x_j / s_j)^2, G = min(R l'(z1)^2, l(z1) / Q1) at the margin z1 after the
#   first copy: |l'| only falls along the path (R l'(z1)^2 bounds it), and along the
#   frozen-rate path the integral of l'^2 is (l(z(0)) - l(z(R))) / Q <= l(z1) / Q1, so a
#   row of weight 1e6 does not freeze its coordinates the way R l'^2 alone would. The
#   centered form centers that growth at the weights v1 (U_j -= (sqrt(n_j + dn_j) -
#   sqrt(n_j)) / eta v1_j, which leaves v_j as it is); the uncentered one shrinks them.
#
# At c = 1 this is the plain step; a row of weight c equals c copies exactly where the
# slope cannot change along the way (the hinge inside its margin) in the uncentered form
# with sigma = l1 = 0 (t does not enter). Batches and p < 2 keep the linear rule.

def invariant_move(loss, z, y, tau, epsilon=0.1):
    """z(tau) - z for dz/dtau = -l'(z; y) from z (tau = Q R >= 0): the margin's move
    under the limit of many small steps of total importance R at the frozen rate Q.

    squared (l' = 2 (z - y)): z - y shrinks by exp(-2 tau); absolute: |z - y| falls at
    rate 1 to 0; huber: at rate epsilon to epsilon, then by exp(-tau); epsilon_insensitive:
    at rate 1 to epsilon. In the margin m = y z (y = +-1, dm/dtau = -y l'): hinge, m rises
    at rate 1 to 1; squared_hinge, 1 - m shrinks by exp(-2 tau); smooth_hinge, m rises at
    rate 1 to 0, then 1 - m shrinks by exp(-tau); logistic, dm/dtau = 1 / (1 + e^m), so
    m + e^m rises by tau: m(tau) = c - omega(c) = log omega(c), c = m + e^m + tau, omega
    Wright's omega (the root u of u + log u = c)."""
    from scipy.special import wrightomega

    z, y, tau = float(z), float(y), float(tau)
    if loss in ("squared", "absolute", "huber", "epsilon_insensitive"):
        r = z - y
        a = abs(r)
        if loss == "squared":
            return r * math.expm1(-2.0 * tau)
        if loss == "absolute":
            return -math.copysign(min(tau, a), r)
        if loss == "epsilon_insensitive":
            return -math.copysign(min(tau, a - epsilon), r) if a > epsilon else 0.0
        if a <= epsilon:  # huber's quadratic part
            return r * math.expm1(-tau)
        linear = (a - epsilon) / epsilon  # the time to reach |r| = epsilon
        if tau <= linear:
            return -math.copysign(epsilon * tau, r)
        return -math.copysign(a - epsilon - epsilon * math.expm1(-(tau - linear)), r)
    m = y * z
    if loss == "hinge":
        dm = min(tau, 1.0 - m) if m < 1.0 else 0.0
    elif loss == "squared_hinge":
        dm = -(1.0 - m) * math.expm1(-2.0 * tau) if m < 1.0 else 0.0
    elif loss == "smooth_hinge":
        if m >= 1.0:
            dm = 0.0
        elif m < 0.0 and tau <= -m:
            dm = tau
        else:
            left = tau + min(m, 0.0)  # the time left at m = max(m, 0)
            start = max(m, 0.0)
            dm = start - m - (1.0 - start) * math.expm1(-left)
    elif loss == "logistic":
        # m(tau) = c - omega(c) = log omega(c) (omega + log omega = c): no cancellation
        dm = math.log(float(np.real(wrightomega(m + math.exp(m) + tau)))) - m
    else:
        raise ValueError(loss)
    return y * dm


def _invariant_rest(loss, xs, U, acc, t, y, R, *, sigma, eta, l1, delta, centered,
                    epsilon):
    """The remaining importance R > 0 of a row (one problem) after its first copy, on the
    row's coordinates: xs their scaled values (non-zero), U and acc theirs (updated in
    place). See the comment above."""

    def weights():
        num = _soft(U, l1 * t)
        den = sigma * t + (delta + np.sqrt(acc)) / eta
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(num != 0, num / den, 0.0), den

    v1, den1 = weights()
    z1 = xs @ v1
    Q1 = np.sum(xs * xs / den1)
    g1 = float(loss_derivative(loss, z1, y, epsilon))
    if g1 == 0.0 or not 0.0 < Q1 < np.inf:
        return
    grow = min(R * g1 * g1, float(loss_value(loss, z1, y, epsilon)) / Q1) * xs * xs
    if centered:
        U -= (np.sqrt(acc + grow) - np.sqrt(acc)) / eta * v1
    acc += grow
    v2, den2 = weights()
    Q2 = np.sum(xs * xs / den2)
    U -= invariant_move(loss, xs @ v2, y, Q2 * R, epsilon) / Q2 * xs


def _online_stats(stats, loss, Z, Yr, c, labels_r, epsilon):
    for i in range(Z.shape[0]):
        ex_loss = loss_value(loss, Z[i], Yr[i], epsilon).sum()
        stats["sum_loss"] += ex_loss
        stats["sum_wloss"] += c[i] * ex_loss
        stats["sum_w"] += c[i]
        if labels_r is not None:
            stats["mistakes"] += int(np.argmax(Z[i]) != labels_r[i])
        elif loss in ("hinge", "logistic", "squared_hinge", "smooth_hinge"):
            stats["mistakes"] += int((Z[i, 0] > 0) != (Yr[i, 0] > 0))


def _finish_stats(stats, m, t, s, margins):
    return dict(n_examples=m, n_steps=t, progressive_loss=stats["sum_wloss"] / stats["sum_w"],
                sum_loss=stats["sum_loss"], progressive_mistakes=stats["mistakes"],
                scales=s, margins=np.array(margins))


def _forget_sums(U, acc, gt, dn, V, reached, *, eta, centered, forget):
    """Forgetting's step of the sums (p = 2), eagerly: U (or z), the accumulators n_j
    decay by gamma = forget before the step's additions gt and dn (in place). The
    centered form's correction is the growth of the decayed stabilizer,
    sig_t = (sqrt(n_t) - gamma sqrt(n_{t-1})) / eta, centered at the weights V the step
    had, on the coordinates the step's rows reach (`reached`, (n, 1): x_j != 0 in a row
    of non-zero weight, whatever its gradient): a coordinate every step reaches has
    sum_u gamma^(t-u) sig_u = sqrt(n_t) / eta; one the steps do not reach fades (U by
    gamma, sqrt(n_j) by sqrt(gamma) a step), which keeps a step O(nnz)."""
    root_old = np.sqrt(acc)
    acc *= forget
    acc += dn
    U *= forget
    U += gt
    if centered:
        U -= np.where(reached, (np.sqrt(acc) - forget * root_old) / eta * V, 0.0)


def reference_adaptive(X, Y, *, p, sigma, loss, eta=0.5, l1=0.0, delta=0.0, centered=False,
                       batch_size=1, radius=None, sample_weight=None, epsilon=0.1,
                       labels=None, forget=1.0):
    """Adaptive, normalized dual averaging over the rows of dense X in order, for the
    columns of Y (one problem each), eagerly: every coordinate every step.

    ``forget`` = gamma < 1: every step decays U (z), the accumulators n_j (p < 2: the
    scalar L of each problem) and the count t by gamma before its additions
    (`_forget_sums`); t becomes tau = gamma tau + 1 wherever it enters (sigma t, l1 t,
    the weights read while the scales grow and the invariant update's).

    Returns the list of iterates w_1..w_T (each (n, K), in the final scales: w_t = v_t /
    s, so that `combine` gives the reported model) and the online statistics, with
    ``scales`` (s, (n,)) and ``margins`` (each row's margins before its step, (m, K)).
    """
    X = np.asarray(X, dtype=float)
    Y = np.asarray(Y, dtype=float).reshape(X.shape[0], -1)
    m, n = X.shape
    K = Y.shape[1]
    _check_adaptive(p, centered, l1, None, radius, lazy=False)
    if forget < 1.0 and p == 2.0 and radius is not None:
        raise ValueError("forgetting in the adaptive geometry: no ball at p = 2")
    c = np.ones(m) if sample_weight is None else np.asarray(sample_weight, float)
    q = p / (p - 1.0)
    s = np.zeros(n)
    U = np.zeros((n, K))  # U, or z for the centered form
    acc = np.zeros((n, K))
    lam2 = np.zeros(K)
    V = np.zeros((n, K))
    iterates, margins = [], []
    stats = dict(sum_loss=0.0, sum_wloss=0.0, sum_w=0.0, mistakes=0)
    invariant = batch_size == 1 and p == 2.0 and radius is None  # importance weights
    t = 0
    count = 0.0  # t, or forgetting's tau
    for start in range(0, m, batch_size):
        rows = np.arange(start, min(start + batch_size, m))
        raised = np.maximum(s, np.max(np.abs(X[rows]), axis=0))
        _rescaled(U, acc, s, raised, count if forget < 1.0 else t, p=p, sigma=sigma, eta=eta,
                  l1=l1, delta=delta)
        s = raised
        Xs = _scaled_rows(X[rows], s)
        Z = Xs @ V
        margins.extend(Z)
        _online_stats(stats, loss, Z, Y[rows], c[rows],
                      None if labels is None else labels[rows], epsilon)
        weights = np.minimum(c[rows], 1.0) if invariant else c[rows]  # the first copy
        gt, dn, dlam2 = _batch_sums(Xs, loss_derivative(loss, Z, Y[rows], epsilon), weights, q)
        t += 1
        if forget < 1.0:
            count = forget * count + 1.0
            reached = ((Xs != 0) & (weights[:, None] != 0)).any(axis=0)[:, None]
            _forget_sums(U, acc, gt, dn, V, reached, eta=eta, centered=centered,
                         forget=forget)
        elif centered:
            U += gt - (np.sqrt(acc + dn) - np.sqrt(acc)) / eta * V
        else:
            U += gt
        if forget == 1.0:
            acc += dn
        if forget < 1.0:  # p < 2's L decays as p = 2's n_j do
            lam2 *= forget
        lam2 += dlam2
        now = count if forget < 1.0 else t
        if invariant and c[start] > 1.0:  # the rest of the row's importance
            nz = Xs[0] != 0
            for k in range(K):
                if loss_derivative(loss, Z[0, k], Y[start, k], epsilon) != 0:
                    Uk, acck = U[nz, k], acc[nz, k]
                    _invariant_rest(loss, Xs[0, nz], Uk, acck, now, Y[start, k],
                                    c[start] - 1.0, sigma=sigma, eta=eta, l1=l1,
                                    delta=delta, centered=centered, epsilon=epsilon)
                    U[nz, k], acc[nz, k] = Uk, acck
        V = adaptive_map(U, acc, lam2, now, p=p, sigma=sigma, eta=eta, l1=l1, delta=delta,
                         radius=radius)
        iterates.append(V.copy())
    inv = np.where(s > 0, 1.0 / np.where(s > 0, s, 1.0), 0.0)[:, None]
    return [v * inv for v in iterates], _finish_stats(stats, m, t, s, margins)


# --- the lazy sums of an averaged iterate between two touches (p = 2) -------------------

def _bernoulli_plus(count):
    """B_0..B_{count-1} with B_1 = +1/2 (Faulhaber's convention), exact."""
    B = [Fraction(1)]
    for k in range(1, count):
        B.append(-sum(math.comb(k + 1, j) * B[j] for j in range(k)) / (k + 1))
    B[1] = Fraction(1, 2)
    return B


_B = _bernoulli_plus(40)


@lru_cache(maxsize=None)
def _faulhaber(d, n):
    """sum_{u=1}^{n} u^d exactly (n >= 0)."""
    if n <= 0:
        return Fraction(0) if d else Fraction(n if n > 0 else 0)
    return sum(math.comb(d + 1, j) * _B[j] * Fraction(n) ** (d + 1 - j)
               for j in range(d + 1)) / (d + 1)


def _power_sum(d, a, b):
    """sum_{t=a}^{b} t^d exactly, 1 <= a <= b."""
    return _faulhaber(d, b) - _faulhaber(d, a - 1)


@lru_cache(maxsize=None)
def _centered_moment(d, length):
    """sum of u^d over u = -length/2, -length/2 + 1, ..., length/2 (length + 1 points)."""
    if d % 2:
        return 0.0
    if length % 2 == 0:  # integers
        return float(2 * _faulhaber(d, length // 2)) if d else float(length + 1)
    # half-integers v/2, v odd in [-length, length]
    odd = _faulhaber(d, length) - 2 ** d * _faulhaber(d, (length - 1) // 2)
    return float(2 * odd / Fraction(2) ** d)


# psi(y) ~ ln y - 1/(2y) - sum_k B_2k / (2k y^2k), k = 1..7 (error below 1e-18 at y >= 16)
_PSI_TAIL = [float(_B[2 * k]) / (2 * k) for k in range(1, 8)]


def harmonic_gap(y1, count):
    """sum_{j=0}^{count-1} 1 / (y1 + j) for y1 > 0, accurate to a few ulps (the digamma
    difference psi(y1 + count) - psi(y1) without its cancellation)."""
    total = 0.0
    while y1 < 16.0 and count > 0:
        total += 1.0 / y1
        y1 += 1.0
        count -= 1
    if count == 0:
        return total
    y2 = y1 + count
    diff = math.log1p(count / y1) + count / (2.0 * y1 * y2)
    diff += _PSI_TAIL[0] * count * (y1 + y2) / (y1 * y1 * y2 * y2)
    for k, coef in enumerate(_PSI_TAIL[1:], start=2):
        diff += coef * (y1 ** (-2 * k) - y2 ** (-2 * k))
    return total + diff


def gap_sum(A, l1, c, sigma, a, b, k):
    """sum_{t=a}^{b} t^k (A - l1 t)_+ / (sigma t + c), for A >= 0, c >= 0.

    Exact polynomial sums (sigma = 0); otherwise, with x = c / sigma, either the
    closed form sum q(t) + f(-x) (psi(b + 1 + x) - psi(a + x)) of f(t) / (t + x)
    (f(t) = t^k (A - l1 t), q its quotient by t + x), which cancels like (x / t)^deg f
    and so serves while x <= 8 (a + b) / 2, or, beyond, the expansion about the range's
    middle c0: 1 / (x + c0 + u) = sum_m (-u)^m / (x + c0)^(m+1), |u| / (x + c0) < 1/9.
    """
    A, l1, c, sigma, a, b = float(A), float(l1), float(c), float(sigma), int(a), int(b)
    if A <= 0 or b < a:
        return 0.0
    if l1 > 0:
        last = math.floor(A / l1)
        while last >= a and A - l1 * last <= 0:
            last -= 1
        b = min(b, last)
        if b < a:
            return 0.0
    f = [Fraction(0)] * (k + 2)  # f(t) = A t^k - l1 t^(k+1), exact in the float inputs
    f[k] += Fraction(A)
    f[k + 1] -= Fraction(l1)
    if sigma == 0:
        return float(sum(fd * _power_sum(d, a, b) for d, fd in enumerate(f) if fd)) / c
    x = c / sigma
    mid = Fraction(a + b, 2)
    if x <= 8 * mid:
        xf = Fraction(x)
        quotient = [Fraction(0)] * (len(f) - 1)  # synthetic division by (t + x)
        carry = Fraction(0)
        for d in range(len(f) - 1, 0, -1):
            carry = f[d] - xf * carry if d < len(f) - 1 else f[d]
            quotient[d - 1] = carry
        remainder = f[0] - xf * quotient[0]  # f(-x)
        poly = sum(qd * _power_sum(d, a, b) for d, qd in enumerate(quotient) if qd)
        return (float(poly) + float(remainder) * harmonic_gap(a + x, b - a + 1)) / sigma
    # the expansion: F_e, the Taylor coefficients of f at mid
    F = [float(sum(fd * math.comb(d, e) * mid ** (d - e) for d, fd in enumerate(f) if d >= e))
         for e in range(len(f))]
    inv = 1.0 / (x + float(mid))
    total = 0.0
    for e, Fe in enumerate(F):
        for mm in range(26 if b > a else 1):  # |u| <= (b - a) / 2 < (x + mid) / 9
            if Fe and (e + mm) % 2 == 0:
                total += Fe * (-1) ** mm * _centered_moment(e + mm, b - a) * inv ** (mm + 1)
    return total / sigma


def _weight_total(T, k):
    return float(_power_sum(k, 1, T))


def lazy_adaptive(X, Y, *, p, sigma, loss, eta=0.5, l1=0.0, delta=0.0, centered=False,
                  batch_size=1, radius=None, sample_weight=None, epsilon=0.1, labels=None,
                  iterate="last", rnd_t=None):
    """The same run as `reference_adaptive`, lazily: a step touches only its rows'
    coordinates (O(nnz) for p = 2, and for p < 2 without l1), and the averaged and random
    iterates are settled between touches in closed form (`gap_sum`; p < 2: running sums
    of the global scale, as in PGS). X may be dense or scipy.sparse.

    Returns the reported w (n, K) for `iterate` (``random``: the iterate of step `rnd_t`)
    and the online statistics (as `reference_adaptive`'s). p < 2 with l1 counts its
    norm again every step over the coordinates reached (no exact O(nnz) form is known:
    docs/design/l1.md); the p = 2 ball has no lazy form (its multiplier moves every
    coordinate) and is refused.
    """
    import scipy.sparse as sp

    X = sp.csr_matrix(X, dtype=float)
    X.sort_indices()
    Y = np.asarray(Y, dtype=float).reshape(X.shape[0], -1)
    m, n = X.shape
    K = Y.shape[1]
    _check_adaptive(p, centered, l1, iterate, radius, lazy=True)
    if iterate not in ("last", "random") and iterate not in AVERAGES:
        raise ValueError(iterate)
    c_w = np.ones(m) if sample_weight is None else np.asarray(sample_weight, float)
    q = p / (p - 1.0)
    s = np.zeros(n)
    U = np.zeros((n, K))
    acc = np.zeros((n, K))
    lam2 = np.zeros(K)
    reached = np.zeros(n, bool)
    avg_k = AVERAGES.get(iterate)
    avg = np.zeros((n, K))  # settled sums of t^k v_j(t)
    settled = np.zeros(n, np.int64)  # the averages hold t = 1..settled[j]
    snap = np.zeros((n, K))
    snapped = np.zeros(n, bool)
    # p < 2: v_j(t) = phi_j * scale_t; N = sum |U_j|^q (l1 = 0); running sums of scale
    phi = np.zeros((n, K))
    N = np.zeros(K)
    scale = np.zeros(K)  # scale_{t}
    run = np.zeros(K)  # sum_{u <= t} u^k scale_u
    mark = np.zeros((n, K))  # run at the last change of phi_j
    scale_rnd = np.zeros(K)
    stats = dict(sum_loss=0.0, sum_wloss=0.0, sum_w=0.0, mistakes=0)
    margins = []
    invariant = batch_size == 1 and p == 2.0 and radius is None  # importance weights

    def den2(j, t):  # p = 2 denominators (len(j), K)
        return sigma * t + (delta + np.sqrt(acc[j])) / eta

    def value(j, t):  # v_j(t) of the coordinates j from their present state
        if p == 2.0:
            num = _soft(U[j], l1 * t)
            with np.errstate(divide="ignore", invalid="ignore"):
                return np.where(num != 0, num / den2(j, t), 0.0)
        if l1 > 0:  # the last iterate only: phi at t, scale at t (counted exactly)
            return -np.sign(U[j]) * np.maximum(np.abs(U[j]) - l1 * t, 0.0) ** (q - 1) * scale
        return phi[j] * scale

    def scale_of(t):  # p < 2: the global factor of v(t), from N (or a recount) and L_t
        thr = l1 * t
        norm_q = (np.sum(np.maximum(np.abs(U[reached]) - thr, 0.0) ** q, axis=0)
                  if l1 > 0 else np.maximum(N, 0.0)) ** (1.0 / q)
        den = sigma * t + (delta + np.sqrt(lam2)) / eta
        out = np.zeros(K)
        ok = norm_q > 0
        out[ok] = norm_q[ok] ** (2.0 - q) / ((q - 1.0) * den[ok])
        if radius is not None:
            norm_p = (p - 1.0) * norm_q[ok] / den[ok]
            out[ok] *= np.minimum(1.0, radius / norm_p)
        return out

    def settle(j, upto):  # add sum_{t = settled+1}^{upto} t^k v_j(t) (state unchanged there)
        if p != 2.0:
            avg[j] += phi[j] * (run - mark[j])
            mark[j] = run
        else:
            for jj in j:
                a = settled[jj] + 1
                for kk in range(K):
                    A = abs(U[jj, kk])
                    cc = (delta + math.sqrt(acc[jj, kk])) / eta
                    avg[jj, kk] -= math.copysign(
                        gap_sum(A, l1, cc, sigma, a, upto, avg_k), U[jj, kk])
        settled[j] = upto

    t = 0
    for start in range(0, m, batch_size):
        stop = min(start + batch_size, m)
        block = X[start:stop]
        j = np.unique(block.indices)  # the step's coordinates
        pos = {col: i for i, col in enumerate(j)}
        dense = np.zeros((stop - start, len(j)))
        for r in range(stop - start):
            lo, hi = block.indptr[r], block.indptr[r + 1]
            dense[r, [pos[col] for col in block.indices[lo:hi]]] = block.data[lo:hi]
        # the touched coordinates' state changes now (their scales, then step t + 1):
        # settle it through t first
        if avg_k is not None:
            settle(j, t)
        if iterate == "random" and t >= rnd_t:
            fresh = j[~snapped[j]]
            if len(fresh):
                snap[fresh] = (value(fresh, rnd_t) if p == 2.0 else phi[fresh] * scale_rnd)
                snapped[fresh] = True
        raised = np.maximum(s[j], np.max(np.abs(dense), axis=0))
        sub_U, sub_acc = U[j], acc[j]
        _rescaled(sub_U, sub_acc, s[j], raised, t, p=p, sigma=sigma, eta=eta, l1=l1,
                  delta=delta)
        U[j], acc[j], s[j] = sub_U, sub_acc, raised
        Xs = dense / s[j]
        v_prev = value(j, t)
        Z = Xs @ v_prev
        margins.extend(Z)
        rows = np.arange(start, stop)
        _online_stats(stats, loss, Z, Y[rows], c_w[rows],
                      None if labels is None else labels[rows], epsilon)
        weights = np.minimum(c_w[rows], 1.0) if invariant else c_w[rows]  # the first copy
        gt, dn, dlam2 = _batch_sums(Xs, loss_derivative(loss, Z, Y[rows], epsilon),
                                    weights, q)
        t += 1
        reached[j] = True
        old = U[j].copy()
        if centered:
            U[j] += gt - (np.sqrt(acc[j] + dn) - np.sqrt(acc[j])) / eta * v_prev
        else:
            U[j] += gt
        acc[j] += dn
        lam2 += dlam2
        if invariant and c_w[start] > 1.0:  # the rest of the row's importance
            nz = j[Xs[0] != 0]
            for k in range(K):
                if loss_derivative(loss, Z[0, k], Y[start, k], epsilon) != 0:
                    Uk, acck = U[nz, k], acc[nz, k]
                    _invariant_rest(loss, Xs[0, Xs[0] != 0], Uk, acck, t, Y[start, k],
                                    c_w[start] - 1.0, sigma=sigma, eta=eta, l1=l1,
                                    delta=delta, centered=centered, epsilon=epsilon)
                    U[nz, k], acc[nz, k] = Uk, acck
        if p != 2.0:
            if l1 == 0:
                N += np.sum(np.abs(U[j]) ** q - np.abs(old) ** q, axis=0)
                phi[j] = -np.sign(U[j]) * np.abs(U[j]) ** (q - 1)
            scale = scale_of(t)
            if avg_k is not None:
                run = run + t ** avg_k * scale
            if t == rnd_t:
                scale_rnd = scale.copy()
    # read-out
    if iterate == "last":
        v = value(np.arange(n), t)
    elif iterate == "random":
        v = np.where(snapped[:, None], snap,
                     value(np.arange(n), rnd_t) if p == 2.0 else phi * scale_rnd)
    else:
        settle(np.arange(n), t)
        v = avg / _weight_total(t, avg_k)
    inv = np.where(s > 0, 1.0 / np.where(s > 0, s, 1.0), 0.0)[:, None]
    return v * inv, _finish_stats(stats, m, t, s, margins)
