"""Plain-NumPy reference of PGS (Zhu et al., 2009, Figure 1): O(n) per step, no lazy tricks.

Written from the paper and its formulas only (docs/design/method.md), as an independent yardstick for the core.
"""
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
