# The true multiclass losses of K linear scores z_k = <w_k, x> and a label y in 0..K-1,
# their (sub)gradients in z and their conjugates, inline here so that PGS's pass, SDCA's
# multiclass epochs and the certificates compile them in place (the binary losses of one
# margin are in _losses.pxd). With a_i = -u_i the conjugates give the dual of the
# multiclass problem; both have the same domain: u + e_y in the probability simplex.
#
#   multinomial     l(z; y) = log sum_k exp(z_k) - z_y      grad = softmax(z) - e_y
#                   l*(u; y) = sum_k pi_k log pi_k, pi = u + e_y in the simplex
#   crammer_singer  l(z; y) = max_j ([j != y] + z_j) - z_y  subgrad = e_j* - e_y, j* the
#                   first argmax (zero when j* = y: the margin is met)
#                   l*(u; y) = u_y = pi_y - 1, pi = u + e_y in the simplex
# (Crammer and Singer 2001; Shalev-Shwartz and Zhang, "Proximal stochastic dual
# coordinate ascent", 2012, section 3.3.)
from libc.math cimport exp, log, INFINITY

cdef enum:
    MC_NONE = 0  # one-vs-rest: K independent binary problems (_losses.pxd)
    MC_MULTINOMIAL = 1
    MC_CRAMMER_SINGER = 2


cdef inline double mc_simplex_tol() noexcept nogil:
    """How far u + e_y may leave the simplex by rounding and still count as inside it."""
    return 1e-9


cdef inline double mc_loss_grad(int code, const double* z, Py_ssize_t K, Py_ssize_t y,
                                double* grad) noexcept nogil:
    """The loss at the scores z[0..K-1] for label y; its gradient (a subgradient for
    Crammer-Singer) in grad[0..K-1] unless grad is NULL."""
    cdef Py_ssize_t k, top = 0
    cdef double best, total, v
    if code == MC_MULTINOMIAL:
        # log-sum-exp shifted by the largest score: no overflow, and softmax = exp(z - lse)
        best = z[0]
        for k in range(1, K):
            if z[k] > best:
                best = z[k]
        total = 0.0
        for k in range(K):
            total += exp(z[k] - best)
        v = best + log(total)
        if grad != NULL:
            for k in range(K):
                grad[k] = exp(z[k] - v)
            grad[y] -= 1.0
        return v - z[y]
    # Crammer-Singer: the first argmax of [j != y] + z_j
    best = z[0] + (0.0 if y == 0 else 1.0)
    for k in range(1, K):
        v = z[k] + (0.0 if k == y else 1.0)
        if v > best:
            best = v
            top = k
    if grad != NULL:
        for k in range(K):
            grad[k] = 0.0
        if top != y:
            grad[top] = 1.0
            grad[y] = -1.0
    return best - z[y]


cdef inline double mc_conjugate(int code, const double* u, Py_ssize_t K,
                                Py_ssize_t y) noexcept nogil:
    """l*(u; y): finite where pi = u + e_y is in the probability simplex (to within
    mc_simplex_tol() per coordinate and in the sum), +inf elsewhere. Entries of pi below
    zero by rounding count as zero."""
    cdef Py_ssize_t k
    cdef double pi, total = 0.0, value = 0.0, tol = mc_simplex_tol()
    for k in range(K):
        pi = u[k] + (1.0 if k == y else 0.0)
        if pi < -tol:
            return INFINITY
        if pi > 0.0:
            total += pi
            if code == MC_MULTINOMIAL:
                value += pi * log(pi)
    if total > 1.0 + tol * K or total < 1.0 - tol * K:
        return INFINITY
    if code == MC_MULTINOMIAL:
        return value
    return u[y]
