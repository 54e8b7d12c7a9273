# The adaptive geometry (docs/design/adaptive.md): dual averaging with a stabilizer per
# coordinate that grows with that coordinate's own squared gradients (AdaGrad-RDA, Duchi,
# Hazan and Singer 2011; FTRL-Proximal, McMahan et al. 2013), on features divided by the
# largest |x_j| seen so far (Ross, Mineiro and Langford 2013), p = 2.
#
# Per (coordinate j, problem c) the block holds lam (minus the sum U_j of the scaled
# gradients; FTRL-Proximal's -z_j in the centered form), sq (n_j, the sum of their
# squares), stab (the stabilizer (delta + sqrt(n_j)) / eta, kept so that a margin takes
# no square root) and inv_scale (1 / s_j, 0 for a feature never seen; every problem keeps
# a copy, so that a coordinate's update reads one cache line). The scaled weight after t
# steps is
#
#     v_j = soft(lam_j, l1 t) / (sigma t + stab_j)
#
# and the model's weight w_j = v_j / s_j. A weight depends on the coordinate's own fields
# and t alone, so the last iterate is read lazily at a row's coordinates in O(nnz).
# Kernels of the table (_select.pxd): `margins_ad_one`, `margins_ad_one_l1` and
# `step_ad_one` (one problem of sparse rows), `margins_ad` and `step_ad` (several problems
# or dense rows). They go two lanes at a time (_pair.pxd): two entries of a row (one
# problem), or two problems of an entry, so that one instruction takes the two divisions
# of the weights and one the two square roots of the stabilizers; each lane does the
# one-lane operations in their order, and a row's terms are summed in its order, so the
# results are those of one entry at a time, bit for bit. A row of importance weight
# c > 1 steps as its first copy, then the rest of its importance as the invariant update
# (`_ad_rest`). A step of several rows (`batch_size` > 1): every row raises its features'
# scales before any margin (`raise_batch`), the margins are all at the step's start, and
# each coordinate reached moves once by the rows' sums (`batch_ad`).
#
# Forgetting (forget = gamma < 1; docs/design/adaptive.md, "Forgetting"): every step
# decays U, n_j and the count t (which becomes tau = gamma tau + 1) by gamma before its
# additions. The fields hold them undecayed, over the state's G = gamma^t (`decay`):
# lam = -U / G, sq = n_j / G, and stab = sqrt(n_j / G) / eta without delta, so that
#
#     v_j = soft(lam_j, l1 tau / G) / ((sigma tau + delta / eta) / G + stab_j / sqrt(G))
#
# (`ad_now`'s scalars: the weight is ad_values' formula with stab_j times 1 / sqrt(G)),
# and a step adds its gradients over G_t (the pass's inv_k carries 1 / G_t). A step is
# O(nnz); when G falls below 2^-200 every field is brought back to G = 1
# (`ad_renormalize`).
from libc.math cimport fabs, copysign, sqrt, fmin, pow, INFINITY

from onlinepgs._core._pgs cimport Core, Pass, Row, PGSState
from onlinepgs._core._mirror cimport mirror_link, mirror_row
from onlinepgs._core._regularizer cimport phi_power
from onlinepgs._core._touch cimport touch_as, TOUCH_PLAIN, TOUCH_L1Q, _averaged
from onlinepgs._core._l1q cimport l1q_link, l1q_estimate
from libc.stdint cimport int64_t

from onlinepgs._core._sparse cimport index_t
from onlinepgs._core._steps cimport batch_row, batch_entry, mark_touched, move_touched
from onlinepgs._core._losses cimport loss_value, loss_derivative, invariant_move
from onlinepgs._core._multiclass cimport MC_NONE
from onlinepgs._core._pair cimport (opgs_pair, opgs_pair_of, opgs_pair_all, opgs_lo,
                                    opgs_hi, opgs_add, opgs_sub, opgs_mul, opgs_div,
                                    opgs_sqrt, opgs_abs, opgs_gt, opgs_abs_gt, opgs_and,
                                    opgs_sign_of, opgs_le, opgs_sign_bits, opgs_load,
                                    opgs_store, opgs_rarely)


cdef enum:
    # the fields' offsets in a (coordinate, problem)'s doubles and their count, the
    # block's stride for one problem (onlinepgs._layout; checked equal when _pgs is
    # imported)
    AD_SQ = 1
    AD_STAB = 2
    AD_INV = 3
    AD_S = 4
    AD_PHI = 1  # p < 2: phi_j in place of the p = 2 form's n_j


cdef inline void ad_scalars(bint forgetting, double sigma, double l1, int64_t t,
                            double tau, double decay, double delta_eta, double* sigma_t,
                            double* thr, double* bs) noexcept nogil:
    """The scalars a weight reads (`ad_values`): sigma t, the threshold l1 t and the
    stabilizer's factor 1; forgetting, in the fields' units (over G = decay):
    (sigma tau + delta / eta) / G, l1 tau / G and 1 / sqrt(G) (the stabilizers' fields
    hold sqrt(n_j / G) / eta, delta apart)."""
    if forgetting:
        sigma_t[0] = (sigma * tau + delta_eta) / decay
        thr[0] = l1 * tau / decay
        bs[0] = 1.0 / sqrt(decay)
    else:
        sigma_t[0] = sigma * <double>t
        thr[0] = l1 * <double>t
        bs[0] = 1.0


cdef inline void ad_now(const Core* core, double* sigma_t, double* thr, double* bs,
                        double* delta) noexcept nogil:
    """`ad_scalars` of the state's weights before the step, and the delta a stabilizer's
    field adds (0 with forgetting: the scalar sigma_t holds it)."""
    ad_scalars(core.forgetting, core.sigma, core.l1, core.t[0],
               core.tau[0] if core.forgetting else 0.0,
               core.decay[0] if core.forgetting else 1.0,
               core.delta / core.eta, sigma_t, thr, bs)
    delta[0] = 0.0 if core.forgetting else core.delta


cdef inline opgs_pair ad_values(const double* a0, const double* a1, double sigma_t,
                                double thr, bint plain, bint fg, double bs) noexcept nogil:
    """The scaled weights v_j of two (coordinate, problem)s whose fields start at a0 and
    a1 (lanes lo and hi; a0 == a1 for one), with sigma t and the threshold l1 t of the
    step count t: exactly 0 while |lam_j| <= l1 t (and before any gradient reached it).
    `plain` (a constant of the caller: no l1 and sigma t > 0, so no threshold and a
    positive denominator) takes lam_j / (sigma t + stab_j) without the tests. `fg` (a
    constant of the caller: forgetting) multiplies stab_j by bs (`ad_scalars`)."""
    cdef opgs_pair lam = opgs_pair_of(a0[0], a1[0])
    cdef opgs_pair stab = opgs_pair_of(a0[AD_STAB], a1[AD_STAB])
    cdef opgs_pair den
    cdef opgs_pair thrp, mag
    if fg:
        stab = opgs_mul(stab, opgs_pair_all(bs))
    den = opgs_add(opgs_pair_all(sigma_t), stab)
    if plain:
        return opgs_div(lam, den)
    thrp = opgs_pair_all(thr)
    mag = opgs_sub(opgs_abs(lam), thrp)  # |lam_j| - l1 t, with lam_j's sign where > 0
    # +0.0 where |lam_j| <= l1 t, or where a gradient so small that its square
    # underflowed left the denominator 0 (at sigma t = 0)
    return opgs_and(opgs_and(opgs_div(opgs_sign_of(lam, mag), den),
                             opgs_abs_gt(lam, thrp)),
                    opgs_gt(den, opgs_pair_all(0.0)))


cdef inline double ad_value(const double* at, double sigma_t, double thr,
                            double bs) noexcept nogil:
    """The scaled weight v_j of the (coordinate, problem) whose fields start at `at`
    (`ad_values`, one lane; bs 1 without forgetting, a product exact by 1)."""
    return opgs_lo(ad_values(at, at, sigma_t, thr, False, True, bs))


cdef inline double _raised(double* at, Py_ssize_t K, Py_ssize_t S, double x, double st,
                          double thr, double bs, double delta, double inv_eta) noexcept nogil:
    """1 / s_j after s_j = max(s_j, |x|), in every problem's copy of the coordinate at
    `at` (0 while the feature has shown only zeros). A scale that grows shrinks the
    coordinate's sum of squares by (s_old / s_new)^2 (those of the same gradients in the
    new scale, as VW's normalized update has it) and moves lam so that the weight at
    sigma t = st, threshold thr, is the one it was (bs and delta: `ad_now`'s)."""
    cdef Py_ssize_t c
    cdef double ax = fabs(x), inv = at[AD_INV], ratio, den, a
    cdef double* f
    if ax > 0.0 and (inv == 0.0 or ax * inv > 1.0):
        ratio = 0.0 if inv == 0.0 else 1.0 / (ax * inv)  # s_old / s_new (0: unseen)
        inv = 1.0 / ax
        for c in range(K):
            f = at + c * S
            f[AD_INV] = inv
            if ratio > 0.0 and f[AD_SQ] > 0.0:
                den = st + bs * f[AD_STAB]
                f[AD_SQ] = f[AD_SQ] * (ratio * ratio)
                f[AD_STAB] = (delta + sqrt(f[AD_SQ])) * inv_eta
                a = fabs(f[0]) - thr
                if a > 0.0 and den > 0.0:
                    f[0] = copysign(thr + a * ((st + bs * f[AD_STAB]) / den), f[0])
    return inv


cdef inline double _raised_scale(double* at, Py_ssize_t K, Py_ssize_t S,
                                 double x) noexcept nogil:
    """p < 2: 1 / s_j after s_j = max(s_j, |x|), in every problem's copy of the coordinate
    at `at` (0 while the feature has shown only zeros); nothing else moves."""
    cdef Py_ssize_t c
    cdef double ax = fabs(x), inv = at[AD_INV]
    if ax > 0.0 and (inv == 0.0 or ax * inv > 1.0):
        inv = 1.0 / ax
        for c in range(K):
            at[c * S + AD_INV] = inv
    return inv


cdef inline opgs_pair _ad_terms(double* a0, double* a1, opgs_pair x, double sigma_t,
                                double thr, double bs, double delta, double inv_eta,
                                bint plain, bint fg, opgs_pair* v) noexcept nogil:
    """Two entries of a row of one problem (lanes lo and hi: coordinates at a0 and a1,
    values x; a0 == a1 with equal lanes for one entry): each coordinate's scale raised by
    its value (`_raised`), its weight into v, and the terms v_j x_j / s_j."""
    cdef opgs_pair inv = opgs_pair_of(a0[AD_INV], a1[AD_INV])
    # a scale is raised only by a value beyond it, or at a feature's first non-zero
    # (inv_scale 0): one product and two comparisons on the way that entries take almost
    # always; `_raised` decides otherwise
    if opgs_rarely(opgs_sign_bits(opgs_and(
            opgs_le(opgs_mul(opgs_abs(x), inv), opgs_pair_all(1.0)),
            opgs_gt(inv, opgs_pair_all(0.0)))) != 3):
        if a0 == a1:  # one entry: raised once (a second raise would rescale by rounding)
            inv = opgs_pair_all(_raised(a0, 1, AD_S, opgs_lo(x), sigma_t, thr, bs, delta,
                                        inv_eta))
        else:
            inv = opgs_pair_of(_raised(a0, 1, AD_S, opgs_lo(x), sigma_t, thr, bs, delta,
                                       inv_eta),
                               _raised(a1, 1, AD_S, opgs_hi(x), sigma_t, thr, bs, delta,
                                       inv_eta))
    v[0] = ad_values(a0, a1, sigma_t, thr, plain, fg, bs)
    return opgs_mul(v[0], opgs_mul(x, inv))


cdef inline void _margins_ad_one(Pass* ps, const Row* rw, const index_t* idx,
                                 bint plain, bint fg) noexcept nogil:
    """One problem of sparse rows: each entry's coordinate takes its scale, then its term
    v_j x_j / s_j, in one loop over the row, two entries at a time (their terms summed
    in the row's order); the intercept's constant feature (its scale the constant
    itself) last. Each entry's weight is kept for the step (`step_ad_one`)."""
    cdef Core core = ps.core
    cdef Py_ssize_t e, half = rw.nnz - (rw.nnz & 1)
    cdef double st, thr, bs, delta
    cdef double z = 0.0, inv_eta = 1.0 / core.eta
    cdef double* lam = core.lam + AD_S  # data feature j is coordinate j + 1
    cdef double* at
    cdef const double* vals = rw.vals
    cdef double* kept = ps.G
    cdef opgs_pair v, terms
    ad_now(&ps.core, &st, &thr, &bs, &delta)
    for e in range(0, half, 2):
        terms = _ad_terms(lam + <Py_ssize_t>idx[e] * AD_S, lam + <Py_ssize_t>idx[e + 1] * AD_S,
                          opgs_load(vals + e), st, thr, bs, delta, inv_eta, plain, fg, &v)
        opgs_store(kept + e, v)
        z += opgs_lo(terms)
        z += opgs_hi(terms)
    if half < rw.nnz:
        at = lam + <Py_ssize_t>idx[half] * AD_S
        terms = _ad_terms(at, at, opgs_pair_all(vals[half]), st, thr, bs, delta, inv_eta,
                          plain, fg, &v)
        kept[half] = opgs_lo(v)
        z += opgs_lo(terms)
    if ps.fit_icpt:
        z += opgs_lo(_ad_terms(core.lam, core.lam, opgs_pair_all(ps.icpt), st, thr, bs,
                               delta, inv_eta, False, fg, &v))
    ps.margins[0] = z


cdef inline void margins_ad_one(Pass* ps, const Row* rw, const index_t* idx) noexcept nogil:
    """`_margins_ad_one` without l1: plain weights from the second step on (sigma t > 0)."""
    if ps.core.sigma * <double>ps.core.t[0] > 0.0:
        _margins_ad_one(ps, rw, idx, True, False)
    else:
        _margins_ad_one(ps, rw, idx, False, False)


cdef inline void margins_ad_one_l1(Pass* ps, const Row* rw,
                                   const index_t* idx) noexcept nogil:
    """`_margins_ad_one` with l1."""
    _margins_ad_one(ps, rw, idx, False, False)


cdef inline void margins_ad_one_fg(Pass* ps, const Row* rw,
                                   const index_t* idx) noexcept nogil:
    """`_margins_ad_one` with forgetting, l1 or not: a kernel of its own, so that the
    kernels without forgetting keep their code."""
    _margins_ad_one(ps, rw, idx, False, True)


cdef inline void _add_margins(Pass* ps, const double* at, double sigma_t, double thr,
                              double bs, double xs, bint fg) noexcept nogil:
    """The K margins += v_c xs over the problems c of the coordinate at `at`, two
    problems at a time."""
    cdef Py_ssize_t c, K = ps.K, half = K - (K & 1)
    for c in range(0, half, 2):
        opgs_store(ps.margins + c, opgs_add(
            opgs_load(ps.margins + c),
            opgs_mul(ad_values(at + c * AD_S, at + (c + 1) * AD_S, sigma_t, thr, False, fg,
                               bs),
                     opgs_pair_all(xs))))
    if half < K:
        ps.margins[half] += ad_value(at + half * AD_S, sigma_t, thr, bs) * xs


cdef inline void _margins_ad(Pass* ps, const Row* rw, const index_t* idx,
                             bint fg) noexcept nogil:
    """The K margins of a row (several problems, or a dense row): as `margins_ad_one`,
    each entry's scale raised once for every problem (`fg`: forgetting, a constant)."""
    cdef Core core = ps.core
    cdef Py_ssize_t e, j, c, K = core.K, KS = K * AD_S
    cdef double st, thr, bs, delta
    cdef double inv_eta = 1.0 / core.eta
    cdef double* at
    ad_now(&ps.core, &st, &thr, &bs, &delta)
    for c in range(K):
        ps.margins[c] = 0.0
    for e in range(rw.nnz):
        j = (e if ps.dense else <Py_ssize_t>idx[e]) + 1
        at = core.lam + j * KS
        _add_margins(ps, at, st, thr, bs, rw.vals[e] * _raised(at, K, AD_S, rw.vals[e], st,
                                                                thr, bs, delta, inv_eta), fg)
    if ps.fit_icpt:
        _add_margins(ps, core.lam, st, thr, bs,
                     ps.icpt * _raised(core.lam, K, AD_S, ps.icpt, st, thr, bs, delta,
                                       inv_eta), fg)


cdef inline void margins_ad(Pass* ps, const Row* rw, const index_t* idx) noexcept nogil:
    _margins_ad(ps, rw, idx, False)


cdef inline void margins_ad_fg(Pass* ps, const Row* rw, const index_t* idx) noexcept nogil:
    """`_margins_ad` with forgetting: a kernel of its own."""
    _margins_ad(ps, rw, idx, True)


cdef inline void ad_decays(const Core* core, double* rg, double* bsn) noexcept nogil:
    """The centered form's scalars of a step with forgetting: sqrt(gamma) and
    1 / sqrt(G_t) (G_t = gamma G, the step's own); 1 and 1 without."""
    if core.forgetting:
        rg[0] = sqrt(core.forget)
        bsn[0] = 1.0 / sqrt(core.decay[0] * core.forget)
    else:
        rg[0] = 1.0
        bsn[0] = 1.0


cdef inline void _ad_touch(double* a0, double* a1, opgs_pair xs, opgs_pair v, double cf,
                           double wk, double dl, double delta, double inv_eta,
                           bint centered, bint fg, double rg, double bsn) noexcept nogil:
    """Two coordinates' update (lanes lo and hi: a0 and a1, distinct; a0 == a1 with equal
    lanes for one) by a row's scaled values xs (v: their weights before the step): the
    gradient g = cf xs moves lam, its weighted square wk (dl xs)^2 grows n_j (a row of
    weight c in a step of b rows counts c / b times: wk), and the centered form moves lam
    back by the stabilizer's growth times the weight it had (FTRL-Proximal's
    z_j -= (sqrt(n'_j) - sqrt(n_j)) / eta v_j). With forgetting (`fg`; cf and wk
    carry 1 / G_t) the growth is of the decayed stabilizer, sqrt(n'_j) - gamma sqrt(n_j),
    which in the fields' units is (stab' - sqrt(gamma) stab) / sqrt(G_t) (rg, bsn:
    `ad_decays`), taken on the coordinates the step's rows reach (x_j != 0 in a row of
    non-zero weight, its gradient 0 or not; the others are not touched:
    docs/design/adaptive.md, "Forgetting")."""
    cdef opgs_pair d = opgs_mul(opgs_pair_all(dl), xs)
    cdef opgs_pair sq = opgs_add(opgs_pair_of(a0[AD_SQ], a1[AD_SQ]),
                                 opgs_mul(opgs_pair_all(wk), opgs_mul(d, d)))
    cdef opgs_pair stab = opgs_mul(opgs_add(opgs_pair_all(delta), opgs_sqrt(sq)),
                                   opgs_pair_all(inv_eta))
    cdef opgs_pair step = opgs_mul(opgs_pair_all(cf), xs)
    cdef opgs_pair lam
    if centered and fg:  # on the coordinates the step reaches only (x_j != 0)
        step = opgs_sub(step, opgs_and(opgs_mul(
            opgs_sub(stab, opgs_mul(opgs_pair_all(rg), opgs_pair_of(a0[AD_STAB], a1[AD_STAB]))),
            opgs_mul(opgs_pair_all(bsn), v)), opgs_abs_gt(xs, opgs_pair_all(0.0))))
    elif centered:
        step = opgs_sub(step, opgs_mul(opgs_sub(stab, opgs_pair_of(a0[AD_STAB], a1[AD_STAB])),
                                       v))
    lam = opgs_sub(opgs_pair_of(a0[0], a1[0]), step)
    a0[0] = opgs_lo(lam)
    a1[0] = opgs_hi(lam)
    a0[AD_SQ] = opgs_lo(sq)
    a1[AD_SQ] = opgs_hi(sq)
    a0[AD_STAB] = opgs_lo(stab)
    a1[AD_STAB] = opgs_hi(stab)


cdef inline void _step_entries(Pass* ps, const Row* rw, const index_t* idx, double* base,
                               Py_ssize_t stride, double cf, double wk, bint dense, bint kept,
                               bint centered, bint fg) noexcept nogil:
    """One problem's step over a row's entries, two at a time (`_ad_touch`), with the
    coefficient cf = wk l'(z) of the row's weight wk (its first copy's, 1, where the row
    weighs more: `_ad_rest` takes the rest): the coordinate of entry e at base + j stride
    (j its column, or e in a `dense` row), its weight before the step the one the margin
    kept (`kept`: nothing moved it since, the row's coordinates being distinct) or read
    afresh (centered only: the plain form does not use it). The flags are constants of
    the callers."""
    cdef Core core = ps.core
    cdef Py_ssize_t e, half = rw.nnz - (rw.nnz & 1)
    cdef double st, thr, bs, delta, rg, bsn
    cdef double dl = cf / wk  # the loss's derivative, l'(z)
    cdef double inv_eta = 1.0 / core.eta
    cdef const double* vals = rw.vals
    cdef double* a0
    cdef double* a1
    cdef opgs_pair v = opgs_pair_all(0.0)
    ad_now(&ps.core, &st, &thr, &bs, &delta)
    ad_decays(&ps.core, &rg, &bsn)
    for e in range(0, half, 2):
        a0 = base + (e if dense else <Py_ssize_t>idx[e]) * stride
        a1 = base + (e + 1 if dense else <Py_ssize_t>idx[e + 1]) * stride
        if kept:
            v = opgs_load(ps.G + e)
        elif centered:
            v = ad_values(a0, a1, st, thr, False, fg, bs)
        _ad_touch(a0, a1, opgs_mul(opgs_load(vals + e), opgs_pair_of(a0[AD_INV], a1[AD_INV])),
                  v, cf, wk, dl, delta, inv_eta, centered, fg, rg, bsn)
    if half < rw.nnz:
        a0 = base + (half if dense else <Py_ssize_t>idx[half]) * stride
        if kept:
            v = opgs_pair_all(ps.G[half])
        elif centered:
            v = ad_values(a0, a0, st, thr, False, fg, bs)
        _ad_touch(a0, a0, opgs_pair_all(vals[half] * a0[AD_INV]), v, cf, wk, dl, delta,
                  inv_eta, centered, fg, rg, bsn)


cdef inline void _step_intercept(Pass* ps, const Row* rw, double* at, double cf,
                                 double wk) noexcept nogil:
    """The `_ad_touch` of the intercept's constant feature, one problem's (at `at`), its
    weight read afresh (cf and wk as `_step_entries` takes them)."""
    cdef Core core = ps.core
    cdef opgs_pair v = opgs_pair_all(0.0)
    cdef double st, thr, bs, delta, rg, bsn
    ad_now(&ps.core, &st, &thr, &bs, &delta)
    ad_decays(&ps.core, &rg, &bsn)
    if core.centered:
        v = ad_values(at, at, st, thr, False, True, bs)
    _ad_touch(at, at, opgs_pair_all(ps.icpt * at[AD_INV]), v, cf, wk, cf / wk, delta,
              1.0 / core.eta, core.centered, core.forgetting, rg, bsn)


cdef inline double _ad_rest_sums(double* at, double xs, double st, double thr, double bs,
                                 double* q) noexcept nogil:
    """A coordinate's term of the margin v_j x_j / s_j, and (into q) of Q, x_j^2 / s_j^2
    over its rate's denominator sigma t + stab_j (in the fields' units: G Q with
    forgetting)."""
    q[0] += xs * xs / (st + bs * at[AD_STAB])
    return ad_value(at, st, thr, bs) * xs


cdef inline void _ad_rest(Pass* ps, const Row* rw, const index_t* idx, Py_ssize_t c,
                          double y, double rest) noexcept nogil:
    """The importance `rest` > 0 of a row beyond its first copy (its weight less 1), for
    problem c (label y): the limit of many small copies at rates frozen for the step,
    in closed form (docs/design/adaptive.md, "Importance weights"). With the margin z1
    and Q1 = sum_j (x_j / s_j)^2 / D_j after the first copy, n_j grows by
    G (x_j / s_j)^2, G = min(rest l'(z1)^2, l(z1) / Q1), what the copies' squared slopes
    may add (centered at the weights: they stay); then, with z2 and Q2 at the grown
    rates, lam_j moves by the invariant move of the margin over tau = Q2 rest, divided
    by Q2, times x_j / s_j: the margin moves toward the loss's minimizer and never past
    it (by at most that move where l1 holds a coordinate at 0). Three more loops over the
    row, one entry at a time, for the rows whose weight is above 1 only. With forgetting
    the weights read the step's own tau and G_t (gt), q is G_t Q, and the fields take
    the growth and the move over G_t (the step's own: nothing decays within it)."""
    cdef Core core = ps.core
    cdef Py_ssize_t e, KS = core.K * AD_S, off = c * AD_S
    cdef double t = <double>core.t[0] + 1.0  # the step's own t, as its weights read it
    cdef double gt = core.decay[0] * core.forget if core.forgetting else 1.0
    cdef double st, thr, bs
    cdef double inv_eta = 1.0 / core.eta, delta = 0.0 if core.forgetting else core.delta
    cdef double z = 0.0, q = 0.0, g, grow, xs, sq_new, stab_new, shift
    cdef bint centered = core.centered
    cdef double* at
    cdef double* icpt = core.lam + off
    ad_scalars(core.forgetting, core.sigma, core.l1, <int64_t>t,
               core.forget * core.tau[0] + 1.0 if core.forgetting else 0.0, gt,
               core.delta / core.eta, &st, &thr, &bs)
    for e in range(rw.nnz):
        at = core.lam + ((e if ps.dense else <Py_ssize_t>idx[e]) + 1) * KS + off
        xs = rw.vals[e] * at[AD_INV]
        if xs != 0.0:
            z += _ad_rest_sums(at, xs, st, thr, bs, &q)
    if ps.fit_icpt:
        z += _ad_rest_sums(icpt, ps.icpt * icpt[AD_INV], st, thr, bs, &q)
    g = loss_derivative(ps.loss_code, z, y, ps.epsilon)
    q = q / gt  # Q (exact at gt = 1)
    if g == 0.0 or not (q > 0.0 and q < INFINITY):
        return
    grow = fmin(rest * g * g, loss_value(ps.loss_code, z, y, ps.epsilon) / q) / gt
    z = 0.0
    q = 0.0
    for e in range(rw.nnz + (1 if ps.fit_icpt else 0)):
        if e < rw.nnz:
            at = core.lam + ((e if ps.dense else <Py_ssize_t>idx[e]) + 1) * KS + off
            xs = rw.vals[e] * at[AD_INV]
        else:  # the intercept's constant feature
            at = icpt
            xs = ps.icpt * at[AD_INV]
        if xs == 0.0:
            continue
        sq_new = at[AD_SQ] + grow * (xs * xs)
        stab_new = (delta + sqrt(sq_new)) * inv_eta
        if centered:  # lam_j = -U_j: U_j -= (growth of the stabilizer) v_j
            at[0] += ((stab_new - at[AD_STAB]) * bs) * ad_value(at, st, thr, bs)
        at[AD_SQ] = sq_new
        at[AD_STAB] = stab_new
        z += _ad_rest_sums(at, xs, st, thr, bs, &q)
    q = q / gt
    # lam += shift x / s
    shift = invariant_move(ps.loss_code, z, y, q * rest, ps.epsilon) / q / gt
    for e in range(rw.nnz):
        at = core.lam + ((e if ps.dense else <Py_ssize_t>idx[e]) + 1) * KS + off
        at[0] += shift * (rw.vals[e] * at[AD_INV])
    if ps.fit_icpt:
        icpt[0] += shift * (ps.icpt * icpt[AD_INV])


cdef inline void _step_ad_one(Pass* ps, const Row* rw, const index_t* idx,
                              bint fg) noexcept nogil:
    """A step of one row, one problem of sparse rows (`_step_entries` with the weights
    `margins_ad_one` kept), and the intercept; a row of weight above 1 then takes the
    rest of its importance (`_ad_rest`). `fg`: forgetting (a constant)."""
    cdef double cf = ps.coefs[0], wk = ps.sw[rw.row] * ps.inv_k, rest = 0.0
    # the row's importance (wk carries forgetting's 1 / G_t)
    cdef double imp = ps.sw[rw.row] * ps.step_w if fg else wk
    if cf == 0.0 and (wk == 0.0 or not (ps.core.centered and fg)):
        # nothing moves (a zero weight, or a loss flat at the margin; forgetting's
        # centered form moves the coordinates a row of weight reaches, `_ad_touch`)
        return
    if imp > 1.0:  # the first copy here, the rest of the importance after
        rest = imp - 1.0
        cf = cf / imp
        wk = wk / imp
    if ps.core.centered:
        _step_entries(ps, rw, idx, ps.core.lam + AD_S, AD_S, cf, wk, False, True, True, fg)
    else:
        _step_entries(ps, rw, idx, ps.core.lam + AD_S, AD_S, cf, wk, False, True, False, fg)
    if ps.fit_icpt:
        _step_intercept(ps, rw, ps.core.lam, cf, wk)
    if rest > 0.0:
        _ad_rest(ps, rw, idx, 0, ps.y[rw.row], rest)
    ps.mov[0] = 1


cdef inline void step_ad_one(Pass* ps, const Row* rw, const index_t* idx) noexcept nogil:
    _step_ad_one(ps, rw, idx, False)


cdef inline void step_ad_one_fg(Pass* ps, const Row* rw, const index_t* idx) noexcept nogil:
    """`_step_ad_one` with forgetting: a kernel of its own."""
    _step_ad_one(ps, rw, idx, True)


cdef inline void _step_ad(Pass* ps, const Row* rw, const index_t* idx, bint fg) noexcept nogil:
    """A step of one row, several problems or a dense row: for each problem with a
    non-zero coefficient cf = c l'(z) / b, every entry's coordinate (`_step_entries`,
    each weight read afresh) and the intercept's; a row of weight above 1 then takes the
    rest of its importance (`_ad_rest`), each problem toward its own label. `fg`:
    forgetting (a constant)."""
    cdef Core core = ps.core
    cdef Py_ssize_t c, KS = core.K * AD_S
    cdef double cf, wk = ps.sw[rw.row] * ps.inv_k, w1 = wk, rest = 0.0, yc
    # the row's importance (wk carries forgetting's 1 / G_t)
    cdef double imp = ps.sw[rw.row] * ps.step_w if fg else wk
    cdef bint ovr = ps.classifier and ps.multiclass
    cdef Py_ssize_t label = <Py_ssize_t>ps.y[rw.row] if ovr else 0
    if imp > 1.0 and ps.mc == MC_NONE:
        # the first copy here, the rest of the importance after; a coupled multiclass
        # loss has no scalar margin to move: it keeps the linear rule
        rest = imp - 1.0
        w1 = wk / imp
    for c in range(core.K):
        cf = ps.coefs[c]
        if cf == 0.0 and (wk == 0.0 or not (core.centered and fg)):
            continue  # as in `step_ad_one`
        if rest > 0.0:
            cf = cf / imp
        if ps.dense:
            _step_entries(ps, rw, idx, core.lam + KS + c * AD_S, KS, cf, w1, True, False,
                          core.centered, fg)
        else:
            _step_entries(ps, rw, idx, core.lam + KS + c * AD_S, KS, cf, w1, False, False,
                          core.centered, fg)
        if ps.fit_icpt:
            _step_intercept(ps, rw, core.lam + c * AD_S, cf, w1)
        if rest > 0.0:
            yc = (1.0 if c == label else -1.0) if ovr else ps.y[rw.row]
            _ad_rest(ps, rw, idx, c, yc, rest)
        ps.mov[c] = 1


cdef inline void step_ad(Pass* ps, const Row* rw, const index_t* idx) noexcept nogil:
    _step_ad(ps, rw, idx, False)


cdef inline void step_ad_fg(Pass* ps, const Row* rw, const index_t* idx) noexcept nogil:
    """`_step_ad` with forgetting: a kernel of its own."""
    _step_ad(ps, rw, idx, True)


cdef inline void raise_batch(Pass* ps, const double* data, const index_t* indices,
                             const int64_t* indptr, Py_ssize_t pos,
                             Py_ssize_t bsize) noexcept nogil:
    """Before the margins of a step of the bsize rows at order[pos:]: each feature's scale
    raised by every value of theirs (`_raised`, the weights at the step's start kept), and
    the intercept's by its constant, so that every row of the step is read in the same
    scales (a row's margin would otherwise see a scale that a later row raises, and its
    gradient another)."""
    cdef Core core = ps.core
    cdef Py_ssize_t b, e, j, nnz, start, K = core.K, KS = core.K * core.S
    cdef double st, thr, bs, delta
    cdef double inv_eta = 1.0 / core.eta, xv
    ad_now(&ps.core, &st, &thr, &bs, &delta)
    for b in range(bsize):
        batch_row(ps, indptr, pos + b, &start, &nnz)
        for e in range(nnz):
            j = batch_entry(ps, data, indices, start, e, &xv)
            if xv != 0.0 and not core.p_is_two:  # p < 2: the scale alone
                _raised_scale(core.lam + j * KS, K, core.S, xv)
            elif xv != 0.0:
                _raised(core.lam + j * KS, K, AD_S, xv, st, thr, bs, delta, inv_eta)
    if ps.fit_icpt and not core.p_is_two:
        _raised_scale(core.lam, K, core.S, ps.icpt)
    elif ps.fit_icpt:
        _raised(core.lam, K, AD_S, ps.icpt, st, thr, bs, delta, inv_eta)


cdef inline void batch_ad(Pass* ps, const double* data, const index_t* indices,
                          const int64_t* indptr, Py_ssize_t pos,
                          Py_ssize_t bsize) noexcept nogil:
    """A step of the bsize rows at order[pos:] (their scales raised and their margins
    taken at the step's start: `raise_batch`): per (coordinate, problem) the sum of the
    rows' scaled gradients, sum_b c_b / k l'_b x_bj / s_j (the step's coefficients c_b /
    k l'_b times x_bj / s_j), and of their weighted squares, sum_b c_b / k (l'_b x_bj /
    s_j)^2, two doubles of the scratch each; then each coordinate reached moves once: n_j
    by the squares, lam by the gradient, and in the centered form back by the
    stabilizer's growth times the weight at the step's start (its fields are as they
    were until then). A row of any weight steps linearly (the invariant update of
    heavier rows is one row a step's)."""
    cdef Core core = ps.core
    cdef Py_ssize_t b, e, j, c, K = core.K, KS = core.K * AD_S, nnz, start
    cdef Py_ssize_t n_touched = 0, ti
    cdef double st, thr, bs, delta, rg, bsn
    cdef double inv_eta = 1.0 / core.eta
    cdef double xv, xs, cf, wk, g, dn, sq, stab, step
    cdef double* G = ps.G
    cdef double* at
    cdef unsigned char* is_touched = ps.is_touched
    cdef int64_t* touched = ps.touched
    ad_now(&ps.core, &st, &thr, &bs, &delta)
    ad_decays(&ps.core, &rg, &bsn)
    for b in range(bsize):
        wk = ps.sw[batch_row(ps, indptr, pos + b, &start, &nnz)] * ps.inv_k
        if wk == 0.0:  # no gradient, no square
            continue
        for e in range(-1 if ps.fit_icpt else 0, nnz):
            j = batch_entry(ps, data, indices, start, e, &xv)
            if xv == 0.0:
                continue
            n_touched = mark_touched(ps, j, n_touched)
            xs = xv * core.lam[j * KS + AD_INV]
            for c in range(K):
                cf = ps.coefs[b * K + c]
                G[2 * (j * K + c)] += cf * xs
                G[2 * (j * K + c) + 1] += (cf * xs) * (cf * xs) / wk
    for ti in range(n_touched):
        j = touched[ti]
        is_touched[j] = 0
        for c in range(K):
            g = G[2 * (j * K + c)]
            dn = G[2 * (j * K + c) + 1]
            G[2 * (j * K + c)] = 0.0
            G[2 * (j * K + c) + 1] = 0.0
            if g == 0.0 and dn == 0.0 and not (core.centered and core.forgetting):
                continue  # forgetting's centered form moves every coordinate reached
            at = core.lam + j * KS + c * AD_S
            sq = at[AD_SQ] + dn
            stab = (delta + sqrt(sq)) * inv_eta
            step = g
            if core.centered and core.forgetting:  # `_ad_touch`'s decayed growth
                step = step - (stab - rg * at[AD_STAB]) * (bsn * ad_value(at, st, thr, bs))
            elif core.centered:
                step = step - (stab - at[AD_STAB]) * ad_value(at, st, thr, bs)
            at[0] = at[0] - step
            at[AD_SQ] = sq
            at[AD_STAB] = stab
            ps.mov[c] = 1


# ---- p < 2: one scale-free scalar stabilizer a problem ------------------------------
#
# The per-coordinate stabilizer has no l_p form (a sum of per-coordinate quadratics inside
# a non-Euclidean norm changes the objective), so for p < 2 the stabilizer is one scalar a
# problem, grown by the scaled gradients' dual norms (Orabona and Pal 2016, "Scale-free
# online learning"; docs/design/adaptive.md, "p < 2"):
#
#     v(t) = grad r*( lam / D_t ),   D_t = sigma t + (delta + sqrt(L_t)) / eta,
#     L_t  = sum over steps of (1/b) sum_i c_i ||l'_i x_i / s||_q^2,
#
# with lam = -U (minus the sum of the scaled gradients, each with the scales of its step)
# and r = ||.||_p^2 / (2 (p - 1)). grad r* is homogeneous of degree 1, so
#
#     v_j = f_c phi_j,   phi_j = sgn(lam_j) (|lam_j| / M)^(q-1),
#     f_c = M N^((2-q)/q) / ((q - 1) D_t)  (times min(1, B / ||v||_p) on the ball),
#
# where M and N = sum_j (|lam_j| / M)^q are the global geometry's l_q map (_mirror.pxd):
# the block's second field holds phi_j (the p = 2 form's `sq`), and a step keeps phi and
# N exact through the global geometry's code: its row kernel (`mirror_row`) for one
# problem of sparse rows, its one-coordinate update (`touch_as(TOUCH_PLAIN)`) otherwise,
# its refreshes of M and recounts of N after the step (`upkeep_norms`, _upkeep.pxd). The
# factor f_c is the state's scale s_c, set after every step (`adq_scales`). A scale that
# grows changes only the coordinate's 1 / s_j: lam sums each gradient in the scale of its
# step, so N, phi and L do not move (there is no per-coordinate sum of squares to rescale),
# and only the model's w_j = v_j / s_j follows. A row costs O(nnz): one power a touched
# coordinate (phi's), one a row's entry (|x_j / s_j|^q, for L).
cdef inline double _power_q(double xs, double q, int quarters) noexcept nogil:
    """|xs|^q = |xs| phi_power(|xs|) (the map's packed roots where q - 1 is a multiple of
    1/4; q and quarters the map's, `Mirror`)."""
    cdef double a = fabs(xs)
    return a * phi_power(a, q, quarters) if a > 0.0 else 0.0


cdef inline void _margins_adq_one(Pass* ps, const Row* rw, const index_t* idx,
                                  bint l1) noexcept nogil:
    """`_margins_adq` of one problem and the last iterate (binary problems, regression):
    the same sums in the same order, so the same bits, with the margin, ||x / s||_q^q and
    the constants of the row's loop in locals. The general loop reads them through `ps`
    again at every entry (the compiler cannot tell them apart from the scales the loop
    raises) and runs a loop over the problems around each term."""
    cdef Core core = ps.core
    cdef Py_ssize_t e, S = core.S
    cdef bint dense = ps.dense
    cdef int quarters = core.mm.quarters
    cdef double q = core.mm.q, x, xs, m = 0.0, xq = 0.0, thr = core.thr[0], inv_m = 0.0
    cdef double* lam1 = core.lam + S  # data feature j is coordinate j + 1
    cdef double* at
    if l1:
        inv_m = core.l1q[0].inv_m
    for e in range(-1 if ps.fit_icpt else 0, rw.nnz):
        if e < 0:  # the intercept's constant feature, coordinate 0
            at = core.lam
            x = ps.icpt
        else:
            at = lam1 + (e if dense else <Py_ssize_t>idx[e]) * S
            x = rw.vals[e]
        xs = x * _raised_scale(at, 1, S, x)
        if xs == 0.0:
            continue
        xq += _power_q(xs, q, quarters)
        m += (l1q_link(at[0], thr, inv_m, ps.q, ps.quarters) if l1 else at[AD_PHI]) * xs
    ps.margins[0] = m * ps.s[0]
    ps.row_xx = xq


cdef inline void _margins_adq(Pass* ps, const Row* rw, const index_t* idx,
                              bint l1) noexcept nogil:
    """p < 2: the K margins of a row, each entry's scale raised first (`_raised_scale`),
    f_c sum_j phi_j x_j / s_j; ||x / s||_q^q of the row into ps.row_xx, for its step's L.
    With `l1` (a constant of the caller) phi_j is that of the soft threshold,
    sgn(lam_j) ((|lam_j| - l1 t)_+ / m_c)^(q-1) (`l1q_link`, m_c the scale of N(thr)'s
    sums), read on the fly: a power only where the coordinate is active."""
    cdef Core core = ps.core
    cdef Py_ssize_t e, j, c, K = core.K, S = core.S, KS = K * S
    cdef double xs, xq = 0.0, thr = core.thr[0]
    cdef double* at
    # an average: its margin in the row's scales too, from each coordinate's settled sum
    # and pending one, acc_j + phi_j (C - mark_j) (the read-out's PART_AVGQ)
    cdef bint rep = not ps.rep_last
    cdef Py_ssize_t oa = core.acc - core.lam, om = core.mark - core.lam
    if K == 1 and not rep:
        _margins_adq_one(ps, rw, idx, l1)
        return
    for c in range(K):
        ps.margins[c] = 0.0
        if rep:
            ps.rep_scores[c] = 0.0
    for e in range(-1 if ps.fit_icpt else 0, rw.nnz):
        if e < 0:  # the intercept's constant feature, coordinate 0
            at = core.lam
            xs = ps.icpt * _raised_scale(at, K, S, ps.icpt)
        else:
            j = (e if ps.dense else <Py_ssize_t>idx[e]) + 1
            at = core.lam + j * KS
            xs = rw.vals[e] * _raised_scale(at, K, S, rw.vals[e])
        if xs == 0.0:
            continue
        xq += _power_q(xs, ps.core.mm.q, ps.core.mm.quarters)
        for c in range(K):
            if l1:
                ps.margins[c] += l1q_link(at[c * S], thr, core.l1q[c].inv_m, ps.q,
                                          ps.quarters) * xs
            else:
                ps.margins[c] += at[c * S + AD_PHI] * xs
            if rep:
                ps.rep_scores[c] += (at[c * S + oa] + at[c * S + AD_PHI]
                                     * (core.cum[c] - at[c * S + om])) * xs
    for c in range(K):
        ps.margins[c] *= ps.s[c]
        if rep:
            ps.rep_scores[c] *= ps.inv_w
    ps.row_xx = xq


cdef inline void margins_adq(Pass* ps, const Row* rw, const index_t* idx) noexcept nogil:
    _margins_adq(ps, rw, idx, False)


cdef inline void margins_adq_l1(Pass* ps, const Row* rw, const index_t* idx) noexcept nogil:
    """`_margins_adq` with l1: the l_q map of the soft threshold."""
    _margins_adq(ps, rw, idx, True)


cdef inline double _dual_sq(Pass* ps, double xq) noexcept nogil:
    """||x / s||_q^2 from ||x / s||_q^q."""
    return pow(xq, 2.0 / ps.core.mm.q) if xq > 0.0 else 0.0


cdef inline void _step_adq(Pass* ps, const Row* rw, const index_t* idx,
                           int kind) noexcept nogil:
    """p < 2, a step of one row: for each problem with a non-zero coefficient cf = c l'(z)
    / b, lam_j -= cf x_j / s_j at every entry and the intercept (phi and N following,
    `touch_as` of `kind`, a constant of the caller: TOUCH_PLAIN, or TOUCH_L1Q, which
    keeps N(thr)'s sums instead), and L_c += (c / b) l'(z)^2 ||x / s||_q^2 = cf^2 / (c /
    b) ||x / s||_q^2. A row of any weight steps linearly (the invariant update is p = 2's)."""
    cdef Core core = ps.core
    cdef Py_ssize_t e, j, c, K = core.K, S = core.S, KS = K * S
    cdef double cf, xs, wk = ps.sw[rw.row] * ps.inv_k
    cdef double n2 = _dual_sq(ps, ps.row_xx)
    cdef double* lam1 = core.lam + S  # data feature j is coordinate j + 1
    cdef double* xs_row = ps.G  # a row's scaled values (one problem of sparse rows)
    cdef bint averaged = _averaged(core.iterate)
    if kind == TOUCH_PLAIN and K == 1 and not ps.dense:
        # the global geometry's row kernel on the row's scaled values: the moves (an
        # average's sums caught up first), then the powers of phi taken together (packed
        # roots), then phi and N (`mirror_row`)
        cf = ps.coefs[0]
        if cf != 0.0:
            for e in range(rw.nnz):
                xs_row[e] = rw.vals[e] * lam1[<Py_ssize_t>idx[e] * S + AD_INV]
            core.norm_sum[0] += mirror_row(core.mm, lam1, lam1 + AD_PHI, S, xs_row, idx,
                                           rw.nnz, cf, core.inv_scale[0], core.acc + S,
                                           core.mark + S, core.cum[0], averaged,
                                           &ps.resc[0])
            xs = ps.icpt * core.lam[AD_INV] if ps.fit_icpt else 0.0
            if xs != 0.0:
                touch_as(TOUCH_PLAIN, core, 0, 0, cf * xs, &ps.resc[0])
            core.ad_sq[0] += (cf * cf / wk) * n2
            ps.mov[0] = 1
        ps.touches[0] += rw.nnz + 1
        return
    for c in range(K):
        cf = ps.coefs[c]
        if cf == 0.0:
            continue
        for e in range(-1 if ps.fit_icpt else 0, rw.nnz):
            if e < 0:
                j = 0
                xs = ps.icpt * core.lam[AD_INV]
            else:
                j = (e if ps.dense else <Py_ssize_t>idx[e]) + 1
                xs = rw.vals[e] * core.lam[j * KS + AD_INV]
            if xs != 0.0:
                touch_as(kind, core, j, c, cf * xs, &ps.resc[c])
        core.ad_sq[c] += (cf * cf / wk) * n2
        ps.mov[c] = 1
    ps.touches[0] += rw.nnz + 1


cdef inline void step_adq(Pass* ps, const Row* rw, const index_t* idx) noexcept nogil:
    _step_adq(ps, rw, idx, TOUCH_PLAIN)


cdef inline void step_adq_l1(Pass* ps, const Row* rw, const index_t* idx) noexcept nogil:
    """`_step_adq` with l1: each coordinate's terms in N(thr)'s sums (`_touch_l1q`)."""
    _step_adq(ps, rw, idx, TOUCH_L1Q)


cdef inline void _batch_adq(Pass* ps, const double* data, const index_t* indices,
                            const int64_t* indptr, Py_ssize_t pos, Py_ssize_t bsize,
                            int kind) noexcept nogil:
    """p < 2, a step of the bsize rows at order[pos:] (their scales raised at the step's
    start: `raise_batch`): per (coordinate, problem) the sum of the rows' scaled gradients
    (the scratch's first dim K doubles), L_c += sum_b (c_b / k) l'_b^2 ||x_b / s||_q^2;
    then each coordinate reached moves once (`touch_as` of `kind`, a constant)."""
    cdef Core core = ps.core
    cdef Py_ssize_t b, e, j, c, K = core.K, KS = K * core.S, nnz, start
    cdef Py_ssize_t n_touched = 0
    cdef double xv, xs, xq, n2, cf, wk
    cdef double* G = ps.G
    for b in range(bsize):
        wk = ps.sw[batch_row(ps, indptr, pos + b, &start, &nnz)] * ps.inv_k
        if wk == 0.0:  # no gradient, no square
            continue
        xq = 0.0
        for e in range(-1 if ps.fit_icpt else 0, nnz):
            j = batch_entry(ps, data, indices, start, e, &xv)
            if xv == 0.0:
                continue
            n_touched = mark_touched(ps, j, n_touched)
            xs = xv * core.lam[j * KS + AD_INV]
            xq += _power_q(xs, ps.core.mm.q, ps.core.mm.quarters)
            for c in range(K):
                G[j * K + c] += ps.coefs[b * K + c] * xs
        n2 = _dual_sq(ps, xq)
        for c in range(K):
            cf = ps.coefs[b * K + c]
            core.ad_sq[c] += (cf * cf / wk) * n2
    move_touched(ps, n_touched, kind, False)


cdef inline void batch_adq(Pass* ps, const double* data, const index_t* indices,
                           const int64_t* indptr, Py_ssize_t pos,
                           Py_ssize_t bsize) noexcept nogil:
    _batch_adq(ps, data, indices, indptr, pos, bsize, TOUCH_PLAIN)


cdef inline void batch_adq_l1(Pass* ps, const double* data, const index_t* indices,
                              const int64_t* indptr, Py_ssize_t pos,
                              Py_ssize_t bsize) noexcept nogil:
    """`_batch_adq` with l1 (N(thr)'s sums, `_touch_l1q`)."""
    _batch_adq(ps, data, indices, indptr, pos, bsize, TOUCH_L1Q)


cdef inline void adq_scales(PGSState st) noexcept nogil:
    """p < 2, after a step (N and M kept: `upkeep_norms`; with l1, N(thr)'s sums checked:
    `l1q_check`), a change of sigma or a load: each problem's factor f_c of v = f_c phi
    into st.s, at the state's t (forgetting: tau and G). With ||v||_p = m N^(1/q) /
    ((q - 1) D_t) (grad r* maps
    ||theta||_q to ||theta||_q / (q - 1) in l_p), the ball ||v||_p <= B multiplies it by
    min(1, B / ||v||_p): the step's minimizer, the stabilizer being a multiple of r (B:
    the radius, or the "auto" one of the rows so far). Without l1, m and N are the l_q
    map's M and N; with l1, those of the soft threshold u = soft(lam, l1 t): m_c and the
    estimate of N(thr) = ||u / m_c||_q^q (_l1q.pxd; an upper bound, so that the
    projected iterate stays on the ball). 0 before any gradient (N = 0) or while D_t is
    0."""
    cdef Py_ssize_t c
    cdef double den, f, norm_v, m, n, bound
    for c in range(st.n_problems):
        if st.forgetting:
            # lam~ = lam / G and L~ = L / G: v = grad r*(G lam~ / D_tau), D_tau = sigma tau
            # + (delta + sqrt(G L~)) / eta, the map's M and N those of lam~; D_tau / G
            den = (st.sigma * st.tau + (st.delta + sqrt(st.ad_sq[c] * st.decay)) / st.eta
                   ) / st.decay
        else:
            den = st.sigma * <double>st.t + (st.delta + sqrt(st.ad_sq[c])) / st.eta
        if st.l1q != NULL:
            m = st.l1q[c].m
            n = l1q_estimate(st.l1q + c, st.l1_thr, st.q, &bound)
        else:
            m = st.mscale[c]
            n = st.norm_sum[c]
        if not (den > 0.0) or n <= 0.0:
            st.s[c] = 0.0
            continue
        f = mirror_link(st.mm, m, n) / ((st.q - 1.0) * den)
        if st.bounded:
            norm_v = m * pow(n, 1.0 / st.q) / ((st.q - 1.0) * den)
            if norm_v > st.radius:
                f = f * (st.radius / norm_v)
        st.s[c] = f


cdef inline void ad_renormalize(double* lam, Py_ssize_t n_coords, Py_ssize_t K,
                                double g) noexcept nogil:
    """Forgetting: the fields of n_coords coordinates of K problems from units over G = g
    to units over 1 (lam and sq times g, the stabilizers times sqrt(g)), which leaves
    every weight as it is; the caller sets G = 1. One sweep of the block, every
    200 ln 2 / ln(1 / gamma) steps (138,629 at 0.999)."""
    cdef Py_ssize_t i
    cdef double rt = sqrt(g)
    for i in range(n_coords * K):
        lam[i * AD_S] *= g
        lam[i * AD_S + AD_SQ] *= g
        lam[i * AD_S + AD_STAB] *= rt
