# A step's move of lambda through the one-coordinate update (_touch.pxd), for the
# configurations without a row kernel of their own: a row's coordinates for every problem
# (several problems, dense rows, l1 at p < 2), a mini-batch's summed gradient, and for
# every step the intercept and ||g_t||_q^q, the regret statistic's. `kind` is a constant
# at each call (the table's step and batch kernels, _select.pxd): each kind compiles to
# its own loop, its touch inlined.
from libc.math cimport fabs, pow
from libc.stdint cimport int64_t

from onlinepgs._core._pgs cimport Pass, Row
from onlinepgs._core._touch cimport touch_as
from onlinepgs._core._mirror cimport MIRROR_CHUNK
from onlinepgs._core._regularizer cimport phi_power_many
from onlinepgs._core._sparse cimport index_t


cdef inline double row_power_sum(const double* vals, Py_ssize_t nnz, double q,
                                 int quarters) noexcept nogil:
    """sum_e |x_e|^q = sum_e |x_e| phi_power(|x_e|) over a row's values."""
    cdef double a_buf[MIRROR_CHUNK]
    cdef double ph_buf[MIRROR_CHUNK]
    cdef double total = 0.0
    cdef Py_ssize_t base = 0, n, e
    while base < nnz:
        n = nnz - base if nnz - base < MIRROR_CHUNK else MIRROR_CHUNK
        for e in range(n):
            a_buf[e] = fabs(vals[base + e])
        phi_power_many(a_buf, ph_buf, n, q, quarters)
        for e in range(n):
            total += a_buf[e] * ph_buf[e]
        base += n
    return total


cdef inline void step_tail(Pass* ps, double xq, Py_ssize_t nnz, int kind) noexcept nogil:
    """After a row's entries moved lambda (xq: sum_j |x_j|^q over them): the intercept's
    coordinate, ||g_t||_q^q = |coef|^q ||x||_q^q of each problem, and the touches counted
    for N's recount."""
    cdef Py_ssize_t c
    cdef double* coefs = ps.coefs
    if ps.fit_icpt:
        xq += ps.icpt * ps.icpt if ps.p2 else pow(fabs(ps.icpt), ps.q)
        for c in range(ps.K):
            if coefs[c] != 0.0:
                touch_as(kind, ps.core, 0, c, coefs[c] * ps.icpt, &ps.resc[c])
                ps.mov[c] = 1
    for c in range(ps.K):
        if coefs[c] != 0.0:
            ps.gqs[c] = (coefs[c] * coefs[c] if ps.p2 else pow(fabs(coefs[c]), ps.q)) * xq
    ps.touches[0] += nnz + 1


cdef inline void step_rows(Pass* ps, const Row* rw, const index_t* idx,
                           int kind) noexcept nogil:
    """A step of one row: lambda -= coef_c x for each problem c, entry by entry through
    the touch of `kind`, then `step_tail`."""
    cdef Py_ssize_t e, j, c, K = ps.K, nnz = rw.nnz
    cdef const double* vals = rw.vals
    cdef double* coefs = ps.coefs
    cdef double xq = 0.0, xv
    if ps.row_xq != NULL:
        xq = ps.row_xq[rw.row]
    elif not ps.p2:
        xq = row_power_sum(vals, nnz, ps.q, ps.quarters)
    for e in range(nnz):
        xv = vals[e]
        if xv == 0.0:
            continue
        j = (e if ps.dense else <Py_ssize_t>idx[e]) + 1
        if ps.p2 and ps.row_xq == NULL:
            xq += xv * xv
        for c in range(K):
            if coefs[c] != 0.0:
                touch_as(kind, ps.core, j, c, coefs[c] * xv, &ps.resc[c])
                ps.mov[c] = 1
    step_tail(ps, xq, nnz, kind)


cdef inline int64_t batch_row(const Pass* ps, const int64_t* indptr, Py_ssize_t at,
                              Py_ssize_t* start, Py_ssize_t* nnz) noexcept nogil:
    """The row at position `at` of the order: its number, and where its entries start in
    the data and how many there are (a dense row: all its columns)."""
    cdef int64_t row = ps.order[at]
    if ps.dense:
        start[0] = row * ps.n_cols
        nnz[0] = ps.n_cols
    else:
        start[0] = indptr[row]
        nnz[0] = indptr[row + 1] - start[0]
    return row


cdef inline Py_ssize_t batch_entry(const Pass* ps, const double* data, const index_t* indices,
                                   Py_ssize_t start, Py_ssize_t e, double* xv) noexcept nogil:
    """Entry e of a row whose entries start at `start`: its coordinate (column + 1) and
    its value into xv; e = -1 is the intercept's constant feature (coordinate 0). A step
    of several rows walks them from -1 (with an intercept) to nnz - 1, skipping values 0."""
    if e < 0:
        xv[0] = ps.icpt
        return 0
    xv[0] = data[start + e]
    return (e if ps.dense else <Py_ssize_t>indices[start + e]) + 1


cdef inline Py_ssize_t mark_touched(Pass* ps, Py_ssize_t j, Py_ssize_t n_touched) noexcept nogil:
    """Coordinate j added once to the step's list of the coordinates it reached; the
    list's length."""
    if not ps.is_touched[j]:
        ps.is_touched[j] = 1
        ps.touched[n_touched] = j
        n_touched += 1
    return n_touched


cdef inline void move_touched(Pass* ps, Py_ssize_t n_touched, int kind,
                              bint regret) noexcept nogil:
    """The end of a step of several rows: each coordinate on the step's list moved once by
    its summed gradient (G[j K + c], cleared) through the touch of `kind`; with `regret`,
    ||g_t||_q^q summed over them (the regret statistic's)."""
    cdef Py_ssize_t ti, j, c, K = ps.K
    cdef double g
    cdef double* G = ps.G
    cdef unsigned char* is_touched = ps.is_touched
    cdef int64_t* touched = ps.touched
    for ti in range(n_touched):
        j = touched[ti]
        is_touched[j] = 0
        for c in range(K):
            g = G[j * K + c]
            if g != 0.0:
                G[j * K + c] = 0.0
                if regret:
                    ps.gqs[c] += g * g if ps.p2 else pow(fabs(g), ps.q)
                touch_as(kind, ps.core, j, c, g, &ps.resc[c])
                ps.mov[c] = 1
    ps.touches[0] += n_touched


cdef inline void batch_rows(Pass* ps, const double* data, const index_t* indices,
                            const int64_t* indptr, Py_ssize_t pos, Py_ssize_t bsize,
                            int kind) noexcept nogil:
    """A step of the bsize rows at order[pos:]: their gradient summed per coordinate (the
    intercept's included), then each coordinate it reached moved once through the touch of
    `kind`, and ||g_t||_q^q summed over them."""
    cdef Py_ssize_t b, e, j, c, K = ps.K, nnz, start, n_touched = 0
    cdef double xv
    cdef double* G = ps.G
    for b in range(bsize):
        batch_row(ps, indptr, pos + b, &start, &nnz)
        for e in range(-1 if ps.fit_icpt else 0, nnz):
            j = batch_entry(ps, data, indices, start, e, &xv)
            if xv == 0.0:
                continue
            n_touched = mark_touched(ps, j, n_touched)
            for c in range(K):
                G[j * K + c] += ps.coefs[b * K + c] * xv
    move_touched(ps, n_touched, kind, True)
