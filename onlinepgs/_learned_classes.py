"""Classes learned as labels arrive: `learn_one` on a classifier without its ``classes``
parameter (docs/design/estimators.md, "Classes learned as labels arrive").

A model's classes are ``classes_``, sorted as `partial_fit`'s are; each class has a
one-vs-rest problem, a signed problem of the solver state: with one or two classes the
state has one problem, whose +1 is ``classes_[1]`` (the binary encoding), and the first
class's problem is its negation; with K > 2 classes (one-vs-rest) problem k is class k's.
A new label regroups the state's problems for the new classes (`regrouped`):

* one class ``a``: the state learns every row as a row of ``a`` (target -1, ``a`` being
  ``classes_[0]`` of its one class);
* the second class ``b``: the binary model of the two, which is the model of
  ``classes=[a, b]`` declared from the start, bit for bit (the state negated where ``b``
  sorts first: the margin losses depend on ``y z`` only, and a negation is exact);
* a third class and on (one-vs-rest): the old classes keep their problems (the first
  two's: the binary problem and its negation), and the new class's problem starts at
  zero, on the model's clock: it is the problem of a binary learner of "that class
  against the rest" trained on every row, the rows before its first one weighing 0.

The zero problem's per-problem scalars (its scale s_t, the averages' running sums C and
C2, the random iterate's scale, forgetting's M, l1's and the adaptive geometry's sums)
are those of a problem that took ``t`` steps with zero gradients, in closed form
(`_zero_problem`): a class first seen after 10^9 events costs milliseconds, where
stepping through the t steps of a one-coordinate state would take minutes (0.2-0.6 us a
step).

* N, the online gap's and regret's sums, l1's N(thr) and the adaptive geometry's stay
  at their start (lambda = 0): a fresh state's, as does every scalar of the adaptive
  geometry and of p < 2 (s_t = 0 while N is);
* p = 2: s_t = 1 / ((t + 1) sigma) (the ball's and l1's factors are 1 at lambda = 0),
  and the random iterate's scale that of its step ``rnd_t``, bit for bit;
* the running sums add a_u s_u (and times thr_u = (u + 1) l1 for C2) with the weights
  a_u = 1, u or u^2: a polynomial plus a harmonic difference (`weighted_scale_sums`,
  _l1avg.pxd, to a few ulps). An average restarts C where a term falls below
  C / CUM_RANGE, about every 2^20 steps: each restart is found on the closed form by a
  gallop and a bisection (a few evaluations each, 17 ms for t = 10^9). A replay adds
  one rounded term a step, so that its sums differ from these by its own rounding
  (up to t eps relative; 1.9e-12 at t = 10^5 for C2, 1e-13 and below for C); a restart
  found at another step than a replay's would need a sum within that rounding of the
  threshold;
* forgetting: G = gamma G and tau = gamma tau + 1 round once a step, so that no closed
  form gives them bit for bit, but they repeat every renormalization (138.6 /
  ln(1 / gamma) steps; tau is at its fixed point by the first): the first period and
  one later one are stepped through with the core's arithmetic (`_zero_forget_steps`),
  O(min(t, period)) steps of a few ns whatever t. The averages are then bit for bit
  (their sums restart at each renormalization); the last and random iterates' sums,
  which never restart and which those iterates do not read, are the periods' sums
  added up (to rounding). M, times G (about 2^-200) at each renormalization, is
  refreshed as the core refreshes it below 2^-600 (`_renormalized_scale`).
"""
import math

import numpy as np

__all__ = ["CoupledClassesError", "regrouped", "new_classes", "set_problems"]

# the block's fields odd in lambda (negated with the problem); the others (the squares of
# the adaptive geometry, the averages' marks, l1's keys and flags) are even
_ODD_FIELDS = ("lam", "phi", "acc")
# the block's fields of the feature, the same in every problem (the adaptive geometry's
# scale): a new problem takes them as they are
_FEATURE_FIELDS = ("inv_scale",)
# the per-problem arrays of a state's dict (`PGSState.to_dict`)
_PER_PROBLEM = ("norm_a", "scale_a", "s_a", "cum_a", "rnd_s_a", "regret_a", "rnd_ver_a",
                "sum_conj_a", "sum_step_loss_a", "sum_reg_a", "cum2_a", "l1q_a", "ad_sq_a")


class CoupledClassesError(ValueError):
    """A coupled multi_class learning its classes (see `new_classes`)."""


def new_classes(classes, label, multi_class, method="learn_one"):
    """The sorted classes with `label` added (None where it is one of them); errors name
    the label: one that is not hashable, None, not orderable with the others, a third
    class of a coupled multi_class."""
    try:
        hash(label)
    except TypeError:
        raise ValueError(f"{method}: label {label!r} is not hashable: a label is a "
                         "number, a str or a bool") from None
    if label is None or (isinstance(label, float) and label != label):
        raise ValueError(f"{method}: label {label!r} is no class")
    known = [] if classes is None else list(classes)
    if label in known:
        return None
    try:
        grown = np.asarray(sorted(known + [label]))
    except TypeError:
        raise ValueError(f"{method}: label {label!r} cannot be ordered with the classes "
                         f"{known} (classes_ is sorted)") from None
    if grown.dtype == object or grown.ndim != 1 or grown.shape[0] != len(known) + 1:
        raise ValueError(f"{method}: label {label!r} does not make one array with the "
                         f"classes {known}")
    if grown.tolist().index(label) < 0:
        raise ValueError(f"{method}: label {label!r} is not kept by the classes' array")
    if len(grown) > 2 and multi_class != "ovr":
        raise CoupledClassesError(
            f"{method}: label {label!r} would be a third class of multi_class="
            f"{multi_class!r}, whose loss couples every class in each row's loss: set the "
            "classes parameter with every label the stream may hold (classes are learned "
            "as labels arrive by the binary model and multi_class='ovr')")
    return grown


def _signed_problems(classes):
    """{class: (problem, sign)}: each class's one-vs-rest problem in the state."""
    labels = list(classes)
    if len(labels) == 1:
        return {labels[0]: (0, -1.0)}
    if len(labels) == 2:
        return {labels[0]: (0, -1.0), labels[1]: (0, 1.0)}
    return {label: (k, 1.0) for k, label in enumerate(labels)}


def regrouped(state, old_classes, classes):
    """`state` (a PGSState of `old_classes`) as the state of `classes` (the old ones and
    one more, sorted): see the module docstring. O(width K) once."""
    from onlinepgs._core._pgs import PGSState
    from onlinepgs._layout import StateLayout

    old = _signed_problems(old_classes)
    labels = list(classes)
    if len(labels) == 2:
        # the binary problem: +1 is classes[1], the problem of the old class negated when
        # that class is classes[0]
        kept = labels[1] if labels[1] in old else labels[0]
        problem, sign = old[kept]
        sources = [(problem, sign if kept == labels[1] else -sign)]
    else:
        sources = [old.get(label) for label in labels]
    d = state.to_dict()
    cfg = dict(d["config"])
    fields = StateLayout.of(cfg).fields
    odd = np.array([name in _ODD_FIELDS for name in fields])
    of_feature = np.array([name in _FEATURE_FIELDS for name in fields])
    n = len(sources)
    zero = None
    if any(src is None for src in sources):
        zero = _zero_problem(state)
    block = d["block_a"]
    grown = np.zeros((block.shape[0], n, block.shape[2]))
    per_problem = {name: d[name] for name in _PER_PROBLEM if name in d}
    grown_pp = {name: np.empty((n,) + np.shape(a)[1:], dtype=np.asarray(a).dtype)
                for name, a in per_problem.items()}
    snap, snapv = d["snap_a"], d["snapv_a"]
    grown_snap = np.zeros((snap.shape[0], n), dtype=snap.dtype)
    grown_snapv = np.zeros((snapv.shape[0], n), dtype=snapv.dtype)
    for k, src in enumerate(sources):
        if src is None:
            for name in grown_pp:
                grown_pp[name][k] = zero[name][0]
            grown[:, k, of_feature] = block[:, 0, of_feature]
            continue
        problem, sign = src
        grown[:, k, :] = block[:, problem, :]
        if sign < 0:
            grown[:, k, odd] = -grown[:, k, odd]
        for name in grown_pp:
            grown_pp[name][k] = per_problem[name][problem]
        if snap.shape[0]:
            grown_snap[:, k] = snap[:, problem] if sign > 0 else -snap[:, problem]
            grown_snapv[:, k] = snapv[:, problem]
    d.update(grown_pp, block_a=grown, snap_a=grown_snap, snapv_a=grown_snapv)
    cfg.update(n_problems=n, multiclass=len(labels) > 2)
    d["config"] = cfg
    return PGSState.from_dict(d)


def set_problems(schedule, n_problems):
    """A race's schedule (and the eta race's families) told the problems' count."""
    schedule.n_problems = int(n_problems)
    for family in getattr(schedule, "families", {}).values():
        family.n_problems = int(n_problems)


def _zero_problem(state):
    """The per-problem arrays of a problem of `state`'s configuration that took the
    state's ``t`` steps with zero gradients, in closed form (the module docstring): those
    of a fresh one-problem state of the same configuration, and where ``t`` moves them,
    the scale s_t, the running sums C and C2, the random iterate's scale at its step
    ``rnd_t`` (its version count the state's) and forgetting's M. O(1) but for the
    averages' restarts (`_restarted_sums`) and forgetting (`_forgetting_scalars`)."""
    from onlinepgs._core._pgs import PGSState

    cfg = dict(state.config())
    cfg.update(n_problems=1, multiclass=False)
    cfg.pop("multi_class", None)
    d = PGSState(**cfg, n_features=0).to_dict()  # the arrays at t = 0
    t, rnd_t = int(state.t), int(state.rnd_t)
    if cfg["iterate"] == "random":
        d["rnd_ver_a"] = np.asarray(state.rnd_ver_a)[:1].copy()
    if t == 0 or (state.adaptive and not (state.forgetting and not state.p_is_two)):
        # the adaptive geometry's steps move no per-problem scalar of a zero problem: its
        # scale is 0 while N is (p < 2) or unused (p = 2); forgetting at p < 2 moves M as
        # the global geometry's does (its renormalizations, `end_steps`), below
        return d
    if state.forgetting:
        scalars = _forgetting_scalars(state, cfg, t, rnd_t)
        d["scale_a"][0] = scalars["scale"]
        if not state.p_is_two:  # s_t = 0 while N is: C, C2 and the reservoir's too
            return d
        cum, cum2, rnd_s = scalars["cum"], scalars["cum2"], scalars["rnd_s"]
        denom = (state.tau + 1.0) * state.sigma / state.decay
    else:
        if not state.p_is_two:
            return d
        cum, cum2 = _restarted_sums(t, state.sigma, state.l1, cfg["iterate"])
        rnd_s = 1.0 / ((rnd_t + 1.0) * state.sigma) if rnd_t > 0 else 0.0
        denom = (t + 1.0) * state.sigma
    # p = 2: s_t = 1 / ((t + 1) sigma) (tau and G for t with forgetting), the ball's and
    # l1's factors being 1 at lambda = 0
    d["s_a"][0] = 1.0 / denom
    d["cum_a"][0] = cum
    if "cum2_a" in d:
        d["cum2_a"][0] = cum2
    if cfg["iterate"] == "random":
        d["rnd_s_a"][0] = rnd_s
    return d


def _step_term(u, sigma, iterate):
    """The running sum's term a_u s_u of step u at p = 2 on R^n, as the core computes it
    (`end_steps`): the weight 1, u or u^2 times 1 / ((u + 1) sigma)."""
    weight = (float(u) if iterate == "weighted" else
              float(u) * float(u) if iterate == "weighted2" else 1.0)
    return weight * (1.0 / ((u + 1.0) * sigma))


def _restarted_sums(t, sigma, l1, iterate):
    """(C, C2) of a zero problem after t >= 1 steps at p = 2 without forgetting: the sums
    of a_u s_u and a_u s_u thr_u (thr_u = (u + 1) l1) over the steps since C last
    restarted, in closed form (`_weighted_scale_sums`). The last and random iterates
    never restart (weights 1); an average restarts at the first step u whose term is
    below C / CUM_RANGE (`_restart_sum_if_needed`), about every CUM_RANGE steps whatever
    the weights: each restart is found by bisection on the closed form, O(log t)
    evaluations, galloping out from the last segment's length first (a few)."""
    from onlinepgs._core._pgs import _cum_range, _weighted_scale_sums

    averaged = iterate in ("average", "weighted", "weighted2")
    weights = iterate if averaged else "average"  # the weight 1

    def sums(lo, hi):
        sum_wv, sum_w = _weighted_scale_sums(lo, hi, weights)
        return sum_wv / sigma, sum_w * l1 / sigma

    start = 1
    if averaged:
        cum_range = _cum_range()

        def restarts(u):  # the step u > start whose term restarts C, summed from start
            return _step_term(u, sigma, iterate) * cum_range < sums(start, u - 1)[0]

        length = None
        while restarts(t) if t > start else False:
            # the first restart in (start, t]: the predicate is False then True (C grows
            # faster than the term past its first steps)
            lo, hi = start, t  # restarts(lo) is False (lo = start: none), restarts(hi)
            if length is not None and lo < start + length < hi:
                # the segments' lengths change slowly: gallop out from the last one's
                guess = start + length
                toward, step = (-1, 1) if restarts(guess) else (1, 1)
                if toward < 0:
                    hi = guess
                else:
                    lo = guess
                while lo < guess + toward * step < hi:
                    probe = guess + toward * step
                    if restarts(probe):
                        hi = probe
                        if toward > 0:
                            break
                    else:
                        lo = probe
                        if toward < 0:
                            break
                    step *= 2
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if restarts(mid):
                    hi = mid
                else:
                    lo = mid
            length, start = hi - start, hi
    return sums(start, t)


def _forgetting_scalars(state, cfg, t, rnd_t):
    """Forgetting's zero problem after t >= 1 steps: M (times G at each renormalization),
    and at p = 2 C, C2 and the scale at step rnd_t. G = gamma G and tau = gamma tau + 1
    round once a step, so that no closed form gives them bit for bit, but G restarts at 1
    at each renormalization, every P = 138.6 / ln(1 / gamma) steps, and tau has reached
    its fixed point by the first (in about a quarter of P): the periods after the first
    are alike. So the first period and one later period are stepped through with the
    core's arithmetic (`_zero_forget_steps`, a few ns a step): O(min(t, P)) whatever t.
    An average's C restarts at each renormalization (its value: the steps of the last
    period); the last and random iterates' C and C2 never restart: the first period's
    sums, plus the later full periods' as many times, plus the last partial one."""
    from onlinepgs._core._pgs import _zero_forget_steps

    def steps(n, tau=0.0, decay=1.0, cum=0.0, cum2=0.0, until_renorm=False):
        done, tau, decay, cum, cum2, s, renorms, g = _zero_forget_steps(
            state.forget, state.sigma, state.l1, cfg["iterate"], n, tau, decay, cum, cum2,
            until_renorm)
        return dict(steps=done, tau=tau, decay=decay, cum=cum, cum2=cum2, s=s, g=g)

    def scale_at(u):  # s_u (0 at u = 0)
        if u == 0:
            return 0.0
        if u <= period:
            return steps(u)["s"]
        return steps(u % period or period, tau=tau_p)["s"]

    first = steps(t, until_renorm=True)
    if first["steps"] == t and first["g"] == 0.0:  # no renormalization yet
        return dict(scale=1.0, cum=first["cum"], cum2=first["cum2"],
                    rnd_s=steps(rnd_t)["s"] if rnd_t else 0.0)
    period, tau_p, g = first["steps"], first["tau"], first["g"]
    if state.forget * tau_p + 1.0 != tau_p:
        # tau is not at its fixed point by the first renormalization (not seen for any
        # gamma in (0, 1)): step through every step, O(t)
        whole = steps(t)
        return dict(scale=_renormalized_scale(g, t // period, state), cum=whole["cum"],
                    cum2=whole["cum2"], rnd_s=steps(rnd_t)["s"] if rnd_t else 0.0)
    renorms = t // period
    scale = _renormalized_scale(g, renorms, state)
    rest = t - renorms * period
    if cfg["iterate"] in ("average", "weighted", "weighted2"):
        # C restarted at the last renormalization, whose step adds its term at G = 1
        # (tau at its fixed point); then the steps since, G from 1 (no l1: C2 is 0)
        weight = {"weighted": tau_p, "weighted2": tau_p * tau_p}.get(cfg["iterate"], 1.0)
        renormed = weight * (1.0 / ((tau_p + 1.0) * state.sigma / 1.0)) / 1.0
        last = steps(rest, tau=tau_p, cum=renormed)
        cum, cum2 = last["cum"], last["cum2"]
    else:
        full = steps(period, tau=tau_p)  # a later period's sums
        cum = first["cum"] + (renorms - 1) * full["cum"]
        cum2 = first["cum2"] + (renorms - 1) * full["cum2"]
        if rest:
            tail = steps(rest, tau=tau_p, cum=cum, cum2=cum2)
            cum, cum2 = tail["cum"], tail["cum2"]
    return dict(scale=scale, cum=cum, cum2=cum2, rnd_s=scale_at(rnd_t))


def _renormalized_scale(g, renorms, state):
    """A zero problem's M after `renorms` renormalizations of factor g, as `end_steps`
    leaves it in `state`'s configuration: M = 1 at t = 0, times g at each, and where the
    state keeps N (p < 2, a ball) and M falls below the core's floor (`RENORM_M_FLOOR`,
    2^-600), refreshed from max |lambda_j| = 0 to the map's headroom (`exact_norm`):
    M = 0, or 1 / M infinite, would make N's recount 0 * inf = NaN and the problem's
    first step diverge. O(1): the refreshes repeat with a period of a few
    renormalizations."""
    from onlinepgs._core._pgs import RENORM_M_FLOOR
    floor = RENORM_M_FLOOR if state.need_norm else 0.0  # M unread without N: no refresh
    headroom = state.headroom

    def shrink(scale, n):  # n renormalizations from `scale`; (M, the first refresh's)
        first = None
        for i in range(n):
            scale *= g
            if scale < floor:
                scale = headroom
                first = i + 1 if first is None else first
        return scale, first

    scale, first = shrink(1.0, min(renorms, 8))
    if first is None or renorms <= 8:
        return scale
    # after the first refresh the scales cycle from headroom: the cycle's length is the
    # renormalizations from one refresh to the next (headroom g^k below the floor)
    cycle = shrink(headroom, 8)[1]
    return shrink(headroom, (renorms - first) % cycle)[0]


