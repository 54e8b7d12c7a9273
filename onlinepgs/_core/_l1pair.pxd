# The l1 averages' selections without branches, two lanes at a time.
#
# With l1 the hot loops of an averaged state ask of every entry of a row which side of
# the threshold its coordinate is (active: |lambda_j| > thr), and active and inactive
# coordinates mix in a row at random: a branch there mispredicts often, and gcc turns a
# conditional expression, or a product with a 0/1 double, into a branch. So the choices
# are masks on the bits. On x86-64 (SSE2) a comparison gives the mask in a register
# directly, and two values go through one instruction: the touch's old and new lambda_j
# (`l1_acc_move`), the margin's even and odd entries (`L1AvgSums`). Elsewhere (or built
# with OPGS_NO_SIMD defined) the same operations run one lane at a time on integer masks;
# both give the same bits, since each lane does the same IEEE operations in the same
# order (the sums of a row stay two, the even and the odd entries, added at the end).
from libc.stdint cimport uint64_t


cdef extern from *:
    """
    #include <math.h>
    #include <stdint.h>
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
    #endif
    """
    ctypedef struct opgs_pair:
        pass
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


cdef union Bits:
    double d
    uint64_t u


cdef inline double keep_if(double x, bint cond) noexcept nogil:
    """x where cond, else +0.0, by a mask on its bits: no branch (one lane, the
    condition already a truth value)."""
    cdef Bits b
    b.d = x
    b.u &= -(<uint64_t>cond)
    return b.d


cdef inline double l1_acc_move(double lam_old, double lam_new, double thr, double cum,
                               double cum2, double on, double* on_new,
                               bint* flag_right) noexcept nogil:
    """The change of an average's folded acc_j at a touch (`_touch_l1`): minus the change
    of its active part, (act lambda_old - act' lambda_new) C - (act sgn_old - act'
    sgn_new) C2 with act = |lambda_old| > thr, act' = |lambda_new| > thr: delta C when it
    stays active with its sign, exactly 0 when it stays inactive. Valid when the flag
    `on` says act (flag_right; else it fell since its last touch: `l1_acc_refold`);
    on_new is the flag to store (act' as 1.0 or 0.0). The old and new lambda_j are the
    two lanes, C and -C2 the factors of one product."""
    cdef opgs_pair lam = opgs_pair_of(lam_old, lam_new)
    cdef opgs_pair act = opgs_abs_gt(lam, opgs_pair_all(thr))
    cdef opgs_pair act1 = opgs_and(opgs_pair_all(1.0), act)
    cdef opgs_pair kept = opgs_and(lam, act)
    cdef opgs_pair sgn = opgs_and(opgs_sign_of(lam, opgs_pair_all(1.0)), act)
    # (act lam_old - act' lam_new, act sgn_old - act' sgn_new) * (C, -C2)
    cdef opgs_pair d = opgs_mul(opgs_sub(opgs_los(kept, sgn), opgs_his(kept, sgn)),
                                opgs_pair_of(cum, -cum2))
    on_new[0] = opgs_hi(act1)
    flag_right[0] = opgs_lo(act1) == on
    return opgs_lo(d) + opgs_hi(d)


cdef struct L1AvgSums:
    # a row's sums in `_sparse_dot_sq_l1avg`, the even entries in lane lo, the odd in hi
    opgs_pair margin  # soft(lambda_j, thr) x_j
    opgs_pair sq      # x_j^2
    opgs_pair rep     # the reported average's entry times x_j


cdef inline void l1avg_add(L1AvgSums* s, opgs_pair lam, opgs_pair acc, opgs_pair x,
                           opgs_pair thr, opgs_pair neg_thr, opgs_pair cum,
                           opgs_pair cum2) noexcept nogil:
    """Two entries of a row into the sums: the margin's soft threshold as lambda -
    clamp(lambda, -thr, thr) (`_soft_clamp`), and the reported average's folded sum
    acc + lambda C - sgn(lambda) C2 where |lambda| > thr, else 0."""
    s.margin = opgs_add(s.margin, opgs_mul(opgs_sub(lam, opgs_max(opgs_min(lam, thr),
                                                                   neg_thr)), x))
    s.sq = opgs_add(s.sq, opgs_mul(x, x))
    s.rep = opgs_add(s.rep, opgs_mul(x, opgs_and(
        opgs_sub(opgs_add(acc, opgs_mul(lam, cum)), opgs_sign_of(lam, cum2)),
        opgs_abs_gt(lam, thr))))
