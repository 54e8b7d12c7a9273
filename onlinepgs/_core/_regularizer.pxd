# The regularizer r(w) = ||w||_p^2 / (2 (p - 1)) (1-strongly convex w.r.t. ||.||_p), on
# S = R^n or the l_p ball of radius B, and its conjugate r*. Scalar forms of the norms, so
# the solvers (which keep the norms running) and the duality tools share one definition.
# radius <= 0 or +inf means S = R^n.
from libc.math cimport fabs, pow, sqrt, exp2, log2, floor, INFINITY


cdef inline double lp_norm(const double* x, Py_ssize_t n, Py_ssize_t stride, double p) noexcept nogil:
    """||x||_p, scaled by max |x_j| so that no power overflows or underflows."""
    cdef Py_ssize_t j
    cdef double m = 0.0, total = 0.0, a
    for j in range(n):
        a = fabs(x[j * stride])
        if a > m:
            m = a
    if m == 0.0 or m != m or m == INFINITY:
        return m
    if p == 2.0:
        for j in range(n):
            a = x[j * stride] / m
            total += a * a
        return m * sqrt(total)
    for j in range(n):
        a = fabs(x[j * stride]) / m
        if a > 0.0:
            total += pow(a, p)
    return m * pow(total, 1.0 / p)


cdef inline double reg_value(double norm_p, double p, double radius) noexcept nogil:
    """r(w) from ||w||_p; +inf outside the ball (a tiny relative slack absorbs rounding)."""
    if radius > 0.0 and radius != INFINITY and norm_p > radius * (1.0 + 1e-12):
        return INFINITY
    return norm_p * norm_p / (2.0 * (p - 1.0))


cdef inline double reg_conjugate(double norm_q, double p, double radius) noexcept nogil:
    """r*(theta) from ||theta||_q, q = p / (p - 1).

    R^n: ||theta||_q^2 / (2 (q - 1)) = (p - 1) ||theta||_q^2 / 2. Ball of radius B: the
    same while (p - 1) ||theta||_q <= B, else B ||theta||_q - B^2 / (2 (p - 1)).
    """
    if radius > 0.0 and radius != INFINITY and (p - 1.0) * norm_q > radius:
        return radius * norm_q - radius * radius / (2.0 * (p - 1.0))
    return 0.5 * (p - 1.0) * norm_q * norm_q


cdef inline double link_scale(double norm_q, double p, double radius) noexcept nogil:
    """s with grad r*(theta)_j = s |theta_j|^(q-1) sgn(theta_j) (p = 2: s theta_j).

    R^n: s = ||theta||_q^(2-q) / (q - 1); on the ball, times min(1, B / ((p-1) ||theta||_q)).
    """
    cdef double q = p / (p - 1.0), s
    if norm_q == 0.0:
        return 0.0
    s = 1.0 if p == 2.0 else (p - 1.0) * pow(norm_q, 2.0 - q)
    if radius > 0.0 and radius != INFINITY and (p - 1.0) * norm_q > radius:
        s *= radius / ((p - 1.0) * norm_q)
    return s


cdef inline int phi_quarters(double q) noexcept nogil:
    """4 (q - 1) if it is an integer in [1, 32] (p = 1.8: 5, p = 1.5: 8), else 0."""
    cdef double k = 4.0 * (q - 1.0)
    cdef double r = floor(k + 0.5)
    if 1.0 <= r <= 32.0 and fabs(k - r) <= 1e-12 * k:
        return <int>r
    return 0


cdef inline double phi_power(double r, double q, int quarters) noexcept nogil:
    """r^(q-1) for r > 0, the map phi of every touched coordinate.

    Where q - 1 is a multiple of 1/4 (p = 1.8, the paper's choice: r * sqrt(sqrt(r));
    p = 1.5: r * r) it is a few multiplies and square roots, each correctly rounded,
    instead of a log and an exp (~10x the instructions); the branches below take the
    same way for every coordinate of a run, so they predict perfectly.
    """
    cdef double out, root
    cdef int whole, frac, i
    if quarters == 0:
        return exp2((q - 1.0) * log2(r))
    whole = quarters >> 2
    frac = quarters & 3
    out = r
    for i in range(1, whole):
        out *= r
    if frac == 0:
        return out if whole > 0 else 1.0
    root = sqrt(r)
    if frac == 2:
        return out * root if whole > 0 else root
    root = sqrt(root)  # r^(1/4)
    if frac == 3:
        root *= sqrt(r)
    return out * root if whole > 0 else root


cdef extern from *:
    """
    #include <math.h>
    #include <stddef.h>
    /* Packed square roots: 2 lanes in the x86-64 baseline, 4 with AVX2, 8 with AVX-512;
       GCC picks the widest the running CPU has (ifunc). Only square roots and products:
       every lane rounds exactly as the scalar code does. */
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
    #define OPGS_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
    #else
    #define OPGS_CLONES
    #endif
    OPGS_CLONES static void opgs_phi_quarters_many(const double* r, double* out,
                                                   ptrdiff_t n, int quarters)
    {
        ptrdiff_t e;
        int i, whole = quarters >> 2, frac = quarters & 3;
        if (frac == 0) {
            for (e = 0; e < n; e++) out[e] = r[e];
        } else {
            for (e = 0; e < n; e++) out[e] = sqrt(r[e]);
            if (frac != 2) {
                for (e = 0; e < n; e++) out[e] = sqrt(out[e]);  /* r^(1/4) */
                if (frac == 3)
                    for (e = 0; e < n; e++) out[e] = out[e] * sqrt(r[e]);
            }
        }
        /* r^whole times the root, in phi_power's order: ((r * r) ... * r) * root */
        if (whole >= 1 && frac != 0) {
            if (whole == 1) {
                for (e = 0; e < n; e++) out[e] = r[e] * out[e];
            } else {
                for (e = 0; e < n; e++) {
                    double x = r[e];
                    for (i = 1; i < whole; i++) x = x * r[e];
                    out[e] = x * out[e];
                }
            }
        } else if (whole > 1) {
            for (e = 0; e < n; e++) {
                double x = r[e];
                for (i = 1; i < whole; i++) x = x * r[e];
                out[e] = x;
            }
        }
    }
    """
    void opgs_phi_quarters_many(const double* r, double* out, Py_ssize_t n,
                                int quarters) noexcept nogil


cdef inline void phi_power_many(const double* r, double* out, Py_ssize_t n, double q,
                                int quarters) noexcept nogil:
    """out[e] = phi_power(r[e], q, quarters) for r[e] >= 0 (0 at 0), bit for bit.

    One pass per multiply or root over contiguous buffers (`opgs_phi_quarters_many`), so
    the square roots are packed, where `phi_power` in a loop of scattered updates takes
    them one by one.
    """
    cdef Py_ssize_t e
    cdef double x
    if quarters == 0:
        for e in range(n):
            x = r[e]
            out[e] = exp2((q - 1.0) * log2(x)) if x > 0.0 else 0.0
        return
    opgs_phi_quarters_many(r, out, n, quarters)
