# The sparse kernels both solvers run on a row: a dot product and an axpy over the row's
# (index, value) entries against a dense vector, and the software prefetch. Inline, so
# each caller gets them specialised for its index type and stride; `cimport`ed by
# _pgs.pyx (the PGS pass) and _sdca.pyx (the SDCA epochs).
#
# `stride` is the distance in doubles between consecutive coordinates of the dense
# vector: 1 for a plain array (SDCA's v and w), the number of fields per coordinate in
# PGS's interleaved block (lambda, phi and the averages of a coordinate share a cache
# line). The caller offsets the base pointer (e.g. by one coordinate for an intercept
# stored first).
from libc.stdint cimport int32_t, int64_t

ctypedef fused index_t:
    int32_t
    int64_t


cdef extern from *:
    """
    /* GCC 12's mod-ref analysis counts __builtin_prefetch as no effect and deletes the
       calls of a function made only of prefetches; a volatile asm stays. setup.py
       defines OPGS_NO_PREFETCH for a build without them (to measure what they bring). */
    #if defined(OPGS_NO_PREFETCH)
    #define OPGS_PREFETCH(p) ((void)0)
    #elif defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    #define OPGS_PREFETCH(p) __asm__ __volatile__("prefetcht0 %0" : : "m"(*(const char*)(p)))
    #elif defined(__GNUC__) || defined(__clang__)
    #define OPGS_PREFETCH(p) __builtin_prefetch((const void*)(p))
    #else
    #define OPGS_PREFETCH(p) ((void)0)
    #endif
    """
    void OPGS_PREFETCH(const void* p) noexcept nogil


cdef extern from *:
    """
    /* p, through an empty asm the compiler cannot see into: a call through the returned
       pointer is not inlined (see `not_inlined`). Elsewhere than GCC and clang: p. */
    static inline void* opgs_opaque(void* p) {
    #if defined(__GNUC__) || defined(__clang__)
        __asm__("" : "+r"(p));
    #endif
        return p;
    }
    """
    # A function whose address goes through this is called, not inlined: a hot loop gets
    # a function of its own and with it the registers (inlined into a caller as large as
    # the PGS pass, gcc keeps its invariants on the stack and rebuilds its constants on
    # every entry). One call a row costs nothing beside a loop over the row's entries.
    void* not_inlined "opgs_opaque"(void* p) noexcept nogil


cdef inline double sparse_dot(const double* w, Py_ssize_t stride, const double* vals,
                              const index_t* idx, Py_ssize_t nnz) noexcept nogil:
    """sum_e w[idx[e] * stride] * vals[e], in two independent sums (even and odd
    entries), added at the end: the loop is bound by add latency, not by loads."""
    cdef double t0 = 0.0, t1 = 0.0
    cdef Py_ssize_t e, half = nnz - (nnz & 1)
    for e in range(0, half, 2):
        t0 += w[idx[e] * stride] * vals[e]
        t1 += w[idx[e + 1] * stride] * vals[e + 1]
    if half < nnz:
        t0 += w[idx[half] * stride] * vals[half]
    return t0 + t1


cdef inline double sparse_dot_sq(const double* w, Py_ssize_t stride, const double* vals,
                                 const index_t* idx, Py_ssize_t nnz,
                                 double* xx) noexcept nogil:
    """`sparse_dot`, and ||vals||^2 into xx from the same loads (the same two-sum order:
    the dot is bit for bit `sparse_dot`'s)."""
    cdef double t0 = 0.0, t1 = 0.0, s0 = 0.0, s1 = 0.0, v0, v1
    cdef Py_ssize_t e, half = nnz - (nnz & 1)
    for e in range(0, half, 2):
        v0 = vals[e]
        v1 = vals[e + 1]
        t0 += w[idx[e] * stride] * v0
        t1 += w[idx[e + 1] * stride] * v1
        s0 += v0 * v0
        s1 += v1 * v1
    if half < nnz:
        v0 = vals[half]
        t0 += w[idx[half] * stride] * v0
        s0 += v0 * v0
    xx[0] = s0 + s1
    return t0 + t1


cdef inline double sparse_dot_sq_avg2(const double* w, Py_ssize_t acc, Py_ssize_t stride,
                                      const double* vals, const index_t* idx, Py_ssize_t nnz,
                                      double* xx, double* dot_acc) noexcept nogil:
    """`sparse_dot_sq` (bit for bit), and into dot_acc sum_e vals[e] w_j[acc] over the
    same cache lines: with w holding lambda and acc the offset of a p = 2 lazy average's
    running sum, C <lambda, x> - dot_acc is the margin of its sum of iterates (see
    PGSState.weights). One load and one multiply-add per entry: that difference of two
    dot products rounds no worse than the sum of the coordinates' differences, whose
    every term C lambda_j is already as large."""
    cdef double t0 = 0.0, t1 = 0.0, s0 = 0.0, s1 = 0.0, r0 = 0.0, r1 = 0.0, v0, v1
    cdef const double* a
    cdef const double* b
    cdef Py_ssize_t e, half = nnz - (nnz & 1)
    for e in range(0, half, 2):
        v0 = vals[e]
        v1 = vals[e + 1]
        a = w + idx[e] * stride
        b = w + idx[e + 1] * stride
        t0 += a[0] * v0
        t1 += b[0] * v1
        s0 += v0 * v0
        s1 += v1 * v1
        r0 += a[acc] * v0
        r1 += b[acc] * v1
    if half < nnz:
        v0 = vals[half]
        a = w + idx[half] * stride
        t0 += a[0] * v0
        s0 += v0 * v0
        r0 += a[acc] * v0
    xx[0] = s0 + s1
    dot_acc[0] = r0 + r1
    return t0 + t1


cdef inline double sparse_dot_sq_avgq(const double* w, Py_ssize_t acc, Py_ssize_t mark,
                                      Py_ssize_t stride, double cum, const double* vals,
                                      const index_t* idx, Py_ssize_t nnz, double* xx,
                                      double* rep) noexcept nogil:
    """`sparse_dot_sq` (bit for bit), and into rep sum_e vals[e] (w_j[acc] + w_j (cum -
    w_j[mark])): the margin of a p < 2 lazy average's sum of iterates (w holds phi, acc
    and mark the offsets of its sum and mark from phi; see PGSState.weights)."""
    cdef double t0 = 0.0, t1 = 0.0, s0 = 0.0, s1 = 0.0, r0 = 0.0, r1 = 0.0, v0, v1
    cdef const double* a
    cdef const double* b
    cdef Py_ssize_t e, half = nnz - (nnz & 1)
    for e in range(0, half, 2):
        v0 = vals[e]
        v1 = vals[e + 1]
        a = w + idx[e] * stride
        b = w + idx[e + 1] * stride
        t0 += a[0] * v0
        t1 += b[0] * v1
        s0 += v0 * v0
        s1 += v1 * v1
        r0 += v0 * (a[acc] + a[0] * (cum - a[mark]))
        r1 += v1 * (b[acc] + b[0] * (cum - b[mark]))
    if half < nnz:
        v0 = vals[half]
        a = w + idx[half] * stride
        t0 += a[0] * v0
        s0 += v0 * v0
        r0 += v0 * (a[acc] + a[0] * (cum - a[mark]))
    xx[0] = s0 + s1
    rep[0] = r0 + r1
    return t0 + t1


cdef inline void sparse_axpy(double* w, Py_ssize_t stride, double a, const double* vals,
                             const index_t* idx, Py_ssize_t nnz) noexcept nogil:
    """w[idx[e] * stride] += a * vals[e] for every entry (canonical rows: no index twice)."""
    cdef Py_ssize_t e
    for e in range(nnz):
        w[idx[e] * stride] += a * vals[e]


cdef inline void prefetch_gather(const double* w, Py_ssize_t stride, const index_t* idx,
                                 Py_ssize_t nnz) noexcept nogil:
    """Hint the cache about the lines of w a row's entries will read (the coordinates of a
    shuffled row are scattered over the state, which the hardware cannot foresee): each
    entry's block of `stride` doubles from w[idx[e] * stride], every line of it (one for
    a problem's few fields; a block of K problems spans several: 5 for 20 classes)."""
    cdef Py_ssize_t e, ahead, nbytes = stride * 8
    cdef const char* at
    for e in range(nnz):
        at = <const char*>(w + idx[e] * stride)
        OPGS_PREFETCH(at)
        ahead = 64 - <Py_ssize_t>(<size_t>at & 63)  # from the block's start to the next line
        while ahead < nbytes:
            OPGS_PREFETCH(at + ahead)
            ahead += 64
