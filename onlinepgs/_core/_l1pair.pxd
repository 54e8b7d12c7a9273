# The l1 averages' selections without branches, two lanes at a time.
#
# With l1 the hot loops of an averaged state ask of every entry of a row which side of
# the threshold its coordinate is (active: |lambda_j| > thr), and active and inactive
# coordinates mix in a row at random: a branch there mispredicts often, and gcc turns a
# conditional expression, or a product with a 0/1 double, into a branch. So the choices
# are masks on the bits. On x86-64 (SSE2) a comparison gives the mask in a register
# directly, and two values go through one instruction (_pair.pxd): the touch's old and
# new lambda_j (`l1_acc_move`), the margin's even and odd entries (`L1AvgSums`). The
# portable fallback gives the same bits, since each lane does the same IEEE operations in
# the same order (the sums of a row stay two, the even and the odd entries, added at the
# end).
from libc.stdint cimport uint64_t

from onlinepgs._core._pair cimport (opgs_pair, opgs_pair_of, opgs_pair_all, opgs_lo, opgs_hi,
                                    opgs_add, opgs_sub, opgs_mul, opgs_min, opgs_max,
                                    opgs_abs_gt, opgs_and, opgs_sign_of, opgs_los, opgs_his)


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
