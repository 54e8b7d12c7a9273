# Two doubles in one register: the core's operations two lanes at a time.
#
# On x86-64 (SSE2, the baseline of every x86-64 CPU) an `opgs_pair` is one register: one
# instruction adds, multiplies, divides or takes the square roots of both lanes, and a
# comparison gives a mask on the bits (all set where true) without a branch. Elsewhere (or
# built with OPGS_NO_SIMD defined) the same operations run one lane at a time, masks as
# integers. Both give the same bits: each lane does the IEEE operation of the one-lane
# code (no fused multiply-add, no reordering). Users: l1's selections (_l1pair.pxd: the
# touch's old and new lambda_j, the margin's even and odd entries) and the adaptive
# geometry's kernels (_adaptive.pxd: two entries of a row, or two problems of an entry).
cdef extern from *:
    """
    #include <math.h>
    #include <stdint.h>
    /* a test whose true side is rare: the compiler lays that side out of the loop */
    #if defined(__GNUC__) || defined(__clang__)
    #define opgs_rarely(c) __builtin_expect(!!(c), 0)
    #else
    #define opgs_rarely(c) (c)
    #endif
    #if defined(__SSE2__) && !defined(OPGS_NO_SIMD)
    #include <emmintrin.h>
    #define OPGS_PAIR_SSE2 1
    typedef __m128d opgs_pair;  /* lane 0: lo, lane 1: hi */
    static inline opgs_pair opgs_pair_of(double lo, double hi) { return _mm_set_pd(hi, lo); }
    static inline opgs_pair opgs_pair_all(double x) { return _mm_set1_pd(x); }
    static inline double opgs_lo(opgs_pair a) { return _mm_cvtsd_f64(a); }
    static inline double opgs_hi(opgs_pair a) { return _mm_cvtsd_f64(_mm_unpackhi_pd(a, a)); }
    static inline opgs_pair opgs_add(opgs_pair a, opgs_pair b) { return _mm_add_pd(a, b); }
    static inline opgs_pair opgs_sub(opgs_pair a, opgs_pair b) { return _mm_sub_pd(a, b); }
    static inline opgs_pair opgs_mul(opgs_pair a, opgs_pair b) { return _mm_mul_pd(a, b); }
    /* a < b ? a : b and a > b ? a : b (the second operand where unordered) */
    static inline opgs_pair opgs_min(opgs_pair a, opgs_pair b) { return _mm_min_pd(a, b); }
    static inline opgs_pair opgs_max(opgs_pair a, opgs_pair b) { return _mm_max_pd(a, b); }
    /* all bits set where |a| > b, else none */
    static inline opgs_pair opgs_abs_gt(opgs_pair a, opgs_pair b) {
        return _mm_cmpgt_pd(_mm_andnot_pd(_mm_set1_pd(-0.0), a), b);
    }
    static inline opgs_pair opgs_and(opgs_pair a, opgs_pair mask) { return _mm_and_pd(a, mask); }
    /* copysign(b, a) for b >= 0 */
    static inline opgs_pair opgs_sign_of(opgs_pair a, opgs_pair b) {
        return _mm_or_pd(_mm_and_pd(a, _mm_set1_pd(-0.0)), b);
    }
    /* (lo of a, lo of b) and (hi of a, hi of b) */
    static inline opgs_pair opgs_los(opgs_pair a, opgs_pair b) { return _mm_unpacklo_pd(a, b); }
    static inline opgs_pair opgs_his(opgs_pair a, opgs_pair b) { return _mm_unpackhi_pd(a, b); }
    /* bit 0: lo > 0, bit 1: hi > 0 */
    static inline int opgs_pos_bits(opgs_pair a) {
        return _mm_movemask_pd(_mm_cmpgt_pd(a, _mm_setzero_pd()));
    }
    /* bit 0: the sign bit of lo, bit 1: of hi (set in a comparison's true lanes) */
    static inline int opgs_sign_bits(opgs_pair a) { return _mm_movemask_pd(a); }
    static inline opgs_pair opgs_div(opgs_pair a, opgs_pair b) { return _mm_div_pd(a, b); }
    static inline opgs_pair opgs_sqrt(opgs_pair a) { return _mm_sqrt_pd(a); }
    static inline opgs_pair opgs_abs(opgs_pair a) { return _mm_andnot_pd(_mm_set1_pd(-0.0), a); }
    /* all bits set where a > b, else none */
    static inline opgs_pair opgs_gt(opgs_pair a, opgs_pair b) { return _mm_cmpgt_pd(a, b); }
    /* all bits set where a <= b, else none */
    static inline opgs_pair opgs_le(opgs_pair a, opgs_pair b) { return _mm_cmple_pd(a, b); }
    /* p[0] as lo and p[1] as hi, at any alignment; and back */
    static inline opgs_pair opgs_load(const double* p) { return _mm_loadu_pd(p); }
    static inline void opgs_store(double* p, opgs_pair a) { _mm_storeu_pd(p, a); }
    #else
    typedef struct { double lo, hi; } opgs_pair;
    typedef union { double d; uint64_t u; } opgs_bits;
    static inline opgs_pair opgs_pair_of(double lo, double hi) { opgs_pair r = {lo, hi}; return r; }
    static inline opgs_pair opgs_pair_all(double x) { return opgs_pair_of(x, x); }
    static inline double opgs_lo(opgs_pair a) { return a.lo; }
    static inline double opgs_hi(opgs_pair a) { return a.hi; }
    static inline opgs_pair opgs_add(opgs_pair a, opgs_pair b) { return opgs_pair_of(a.lo + b.lo, a.hi + b.hi); }
    static inline opgs_pair opgs_sub(opgs_pair a, opgs_pair b) { return opgs_pair_of(a.lo - b.lo, a.hi - b.hi); }
    static inline opgs_pair opgs_mul(opgs_pair a, opgs_pair b) { return opgs_pair_of(a.lo * b.lo, a.hi * b.hi); }
    static inline opgs_pair opgs_min(opgs_pair a, opgs_pair b) {
        return opgs_pair_of(a.lo < b.lo ? a.lo : b.lo, a.hi < b.hi ? a.hi : b.hi);
    }
    static inline opgs_pair opgs_max(opgs_pair a, opgs_pair b) {
        return opgs_pair_of(a.lo > b.lo ? a.lo : b.lo, a.hi > b.hi ? a.hi : b.hi);
    }
    static inline double opgs_mask_of(int cond) { opgs_bits m; m.u = -(uint64_t)(cond != 0); return m.d; }
    static inline opgs_pair opgs_abs_gt(opgs_pair a, opgs_pair b) {
        return opgs_pair_of(opgs_mask_of(fabs(a.lo) > b.lo), opgs_mask_of(fabs(a.hi) > b.hi));
    }
    static inline double opgs_and1(double a, double mask) {
        opgs_bits x, m; x.d = a; m.d = mask; x.u &= m.u; return x.d;
    }
    static inline opgs_pair opgs_and(opgs_pair a, opgs_pair mask) {
        return opgs_pair_of(opgs_and1(a.lo, mask.lo), opgs_and1(a.hi, mask.hi));
    }
    static inline opgs_pair opgs_sign_of(opgs_pair a, opgs_pair b) {
        return opgs_pair_of(copysign(b.lo, a.lo), copysign(b.hi, a.hi));
    }
    static inline opgs_pair opgs_los(opgs_pair a, opgs_pair b) { return opgs_pair_of(a.lo, b.lo); }
    static inline opgs_pair opgs_his(opgs_pair a, opgs_pair b) { return opgs_pair_of(a.hi, b.hi); }
    static inline int opgs_pos_bits(opgs_pair a) { return (a.lo > 0.0) | ((a.hi > 0.0) << 1); }
    static inline int opgs_sign_bits(opgs_pair a) {
        return (signbit(a.lo) != 0) | ((signbit(a.hi) != 0) << 1);
    }
    static inline opgs_pair opgs_div(opgs_pair a, opgs_pair b) { return opgs_pair_of(a.lo / b.lo, a.hi / b.hi); }
    static inline opgs_pair opgs_sqrt(opgs_pair a) { return opgs_pair_of(sqrt(a.lo), sqrt(a.hi)); }
    static inline opgs_pair opgs_abs(opgs_pair a) { return opgs_pair_of(fabs(a.lo), fabs(a.hi)); }
    static inline opgs_pair opgs_gt(opgs_pair a, opgs_pair b) {
        return opgs_pair_of(opgs_mask_of(a.lo > b.lo), opgs_mask_of(a.hi > b.hi));
    }
    static inline opgs_pair opgs_le(opgs_pair a, opgs_pair b) {
        return opgs_pair_of(opgs_mask_of(a.lo <= b.lo), opgs_mask_of(a.hi <= b.hi));
    }
    static inline opgs_pair opgs_load(const double* p) { return opgs_pair_of(p[0], p[1]); }
    static inline void opgs_store(double* p, opgs_pair a) { p[0] = a.lo; p[1] = a.hi; }
    #endif
    """
    ctypedef struct opgs_pair:
        pass
    bint opgs_rarely(bint c) noexcept nogil
    opgs_pair opgs_pair_of(double lo, double hi) noexcept nogil
    opgs_pair opgs_pair_all(double x) noexcept nogil
    double opgs_lo(opgs_pair a) noexcept nogil
    double opgs_hi(opgs_pair a) noexcept nogil
    opgs_pair opgs_add(opgs_pair a, opgs_pair b) noexcept nogil
    opgs_pair opgs_sub(opgs_pair a, opgs_pair b) noexcept nogil
    opgs_pair opgs_mul(opgs_pair a, opgs_pair b) noexcept nogil
    opgs_pair opgs_min(opgs_pair a, opgs_pair b) noexcept nogil
    opgs_pair opgs_max(opgs_pair a, opgs_pair b) noexcept nogil
    opgs_pair opgs_abs_gt(opgs_pair a, opgs_pair b) noexcept nogil
    opgs_pair opgs_and(opgs_pair a, opgs_pair mask) noexcept nogil
    opgs_pair opgs_sign_of(opgs_pair a, opgs_pair b) noexcept nogil
    opgs_pair opgs_los(opgs_pair a, opgs_pair b) noexcept nogil
    opgs_pair opgs_his(opgs_pair a, opgs_pair b) noexcept nogil
    int opgs_pos_bits(opgs_pair a) noexcept nogil
    int opgs_sign_bits(opgs_pair a) noexcept nogil
    opgs_pair opgs_div(opgs_pair a, opgs_pair b) noexcept nogil
    opgs_pair opgs_sqrt(opgs_pair a) noexcept nogil
    opgs_pair opgs_abs(opgs_pair a) noexcept nogil
    opgs_pair opgs_gt(opgs_pair a, opgs_pair b) noexcept nogil
    opgs_pair opgs_le(opgs_pair a, opgs_pair b) noexcept nogil
    opgs_pair opgs_load(const double* p) noexcept nogil
    void opgs_store(double* p, opgs_pair a) noexcept nogil
