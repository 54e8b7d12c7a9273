"""Probes of a PGS state's inner sums, for the tests: read through the state's documented
accessors (``to_dict``, ``l1_ball``, its layout) and, for l1's folded averages, the
closed form of the core's (``onlinepgs._core._pgs._l1_fallen``). The state itself keeps
no test hooks."""
import math

import numpy as np

from onlinepgs._core._pgs import _l1_fallen
from onlinepgs._layout import StateLayout


def _ball(st, c):
    ball = st.l1_ball()
    return None if ball is None else ball[c]


def l1_lazy(st, c=0):
    """Whether problem c's ball runs without its heap now (False off a ball)."""
    ball = _ball(st, c)
    return ball is not None and ball["lazy"]


def l1_bound_base(st, c=0):
    """Problem c's lazy bound's base (0: the bound is ||lambda||^2); NaN without one."""
    ball = _ball(st, c)
    return float("nan") if ball is None else ball["bound_base"]


def l1_heap_entries(st, c=0):
    """The entries of problem c's heap, live and dead (0 off a ball)."""
    ball = _ball(st, c)
    return 0 if ball is None else ball["heap_entries"]


def l1_folded_sum(st, j, c=0):
    """The weighted sum of coordinate j's iterates in problem c of an l1 average (the
    folded sums, docs/design/core.md): acc + lambda C - sgn(lambda) C2 while active, acc
    once left inactive, C and C2 as they stood at its fall where it fell between touches.
    Between passes the running sums hold every step's terms."""
    d = st.to_dict()
    layout = StateLayout.of(d["config"])
    if layout.offset("on") is None:
        raise ValueError("only an l1 average keeps its sums folded")
    f = d["block_a"][j, c]
    lam, acc, on = f[0], f[layout.offset("acc")], f[layout.offset("on")]
    cum, cum2, thr = float(d["cum_a"][c]), float(d["cum2_a"][c]), st.l1_thr
    if abs(lam) > thr:
        return acc + lam * cum - math.copysign(cum2, lam)
    if on == 0.0:
        return acc
    dc, dc2 = _l1_fallen(abs(lam), st.t, st.sigma, st.l1, d["config"]["iterate"])
    return acc + lam * (cum - dc) - math.copysign(cum2 - dc2, lam)


def l1q_norm_sum(st, c=0, exact=False):
    """l1, p < 2: N(thr) = sum_j (|lambda_j| - thr)_+^q of problem c, from the sums the
    state keeps (``to_dict()["l1q_a"]``: the reference threshold thr0, the scale m, and
    S_k = sum x^(q-k) of x = (|lambda_j| - thr0) / m) by their second-order expansion
    about thr0 (_l1q.pxd), or counted exactly from lambda."""
    d = st.to_dict()
    if "l1q_a" not in d:
        raise ValueError("only a state with l1 > 0 and p < 2 keeps N(thr) this way")
    thr0, m, s0, s1, s2 = (float(v) for v in d["l1q_a"][c])
    q, thr = st.q, st.l1_thr
    if exact:
        x = np.abs(np.asarray(st.lam_a)[:, c]) - thr
        return float(np.sum((x[x > 0] / m) ** q)) * m ** q
    delta = (thr - thr0) * (1.0 / m)
    if delta <= 0.0:
        return max(s0, 0.0) * m ** q
    low = s0 - q * delta * s1
    if low <= 0.0:
        return 0.0
    return (low + 0.5 * q * (q - 1.0) * delta * delta * s2) * m ** q
