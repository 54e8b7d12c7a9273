# cython: language_level=3
"""A PGS state as plain numbers and arrays, and back (`PGSState.to_dict`, `from_dict`,
`copy`): what a model file and a pickle hold, and the versions of it that are read.

Apart from the state's module as the merge of Dask's lanes is (_merge.pyx), through the
declarations of _pgs.pxd; the state's methods call these functions."""
import numpy as np
cimport numpy as cnp

from onlinepgs._core._pgs cimport PGSState, STATE_DICT_VERSION
from onlinepgs._core._upkeep cimport l1_rebuild
from onlinepgs._core._pages import copy_mapped
from onlinepgs._layout import L1_MARKS_FIELDS, StateLayout

cnp.import_array()

def as_dict(PGSState st, bint copy):
    """The state as plain numbers and arrays (`PGSState.to_dict`; copies of the arrays,
    or the arrays themselves for a copy of the state to take)."""
    d = dict(version=STATE_DICT_VERSION, config=st.config(), dim=st.dim,
             t=st.t, n_examples=st.n_examples, n_mistakes=st.n_mistakes,
             rnd_t=st.rnd_t, touches_since_exact=st.touches_since_exact,
             span=st.span,
             sum_weight=st.sum_weight, sum_loss=st.sum_loss,
             sum_weighted_loss=st.sum_weighted_loss, loss0_max=st.loss0_max,
             sum_weighted_loss_reported=st.sum_weighted_loss_reported,
             n_mistakes_reported=st.n_mistakes_reported,
             radius_now=st.radius, rng=int(st.rng))
    if st.forgetting:
        d.update(tau=st.tau, decay=st.decay, weight_sum=st.weight_sum)
    if st.l1 > 0.0:
        d["cum2_a"] = np.array(st.cum2_a, copy=True) if copy else st.cum2_a
    if st.l1q != NULL:
        d["l1q_a"] = l1q_sums(st)
    if st.adaptive and not st.p_is_two:
        # p < 2: each problem's scalar accumulator (_adaptive.pxd)
        d["ad_sq_a"] = np.array(st.ad_sq_a, copy=True) if copy else st.ad_sq_a
    if st.off_on > 0:
        # the sums folded with a flag (before: marks and a heap's version count)
        d["l1_folded"] = 1
    for name in ("block_a", "snap_a", "snapv_a", "norm_a", "scale_a",
                 "s_a", "cum_a", "rnd_s_a", "regret_a", "rnd_ver_a",
                 "sum_conj_a", "sum_step_loss_a", "sum_reg_a"):
        d[name] = np.array(getattr(st, name), copy=True) if copy else getattr(st, name)
    return d


def restore(cls, d, coords, bint coords_known, bint small_pages=False):
    """`from_dict`, with the list of coordinates reached given (`coords_known`: a
    copy's; None when every coordinate counts) instead of found by a scan;
    `small_pages`: the block mapped in small pages (a copy of such a state's), its
    pages copied where the source's are mapped (`_pages.copy_mapped`)."""
    if d.get("version") not in (2, 3, STATE_DICT_VERSION):
        raise ValueError(f"unsupported solver state version {d.get('version')!r}")
    cfg = d["config"]
    cdef PGSState st = cls(**cfg, n_features=0, small_pages=small_pages)
    if st.off_on > 0 and not d.get("l1_folded"):
        d = unfold_marks_layout(d)
    K = st.n_problems
    # a copy's list of coordinates reached: every other coordinate holds zeros in every
    # field, as the fresh arrays do, so only the list's are copied: O(reached), not
    # O(width), for a race's forks (docs/design/auto-sigma.md)
    sparse_copy = coords_known and coords is not None and st.keep_seen
    # the block at its width, zeros only where not every element is copied below (the
    # zeros of 89,528 coordinates took a quarter of a fork's time)
    st._allocate(int(d["dim"]), sparse_copy or small_pages)
    for name in ("block_a", "snap_a", "snapv_a"):
        arr = np.ascontiguousarray(d[name])
        target = getattr(st, name)
        if arr.shape != target.shape:
            raise ValueError(f"solver state array {name} has shape {arr.shape}, "
                             f"expected {target.shape}")
        if sparse_copy and arr.shape[0] == st.dim:
            target[coords] = arr[coords]
        elif small_pages and name == "block_a":
            copy_mapped(target, arr)  # the width's untouched pages left unmapped
        else:
            target[...] = arr
    for name in ("norm_a", "scale_a", "s_a", "cum_a", "rnd_s_a", "regret_a", "rnd_ver_a"):
        getattr(st, name)[...] = d[name]
    for name in ("sum_conj_a", "sum_step_loss_a", "sum_reg_a"):
        getattr(st, name)[...] = d[name] if d["version"] >= 3 else np.nan
    for name in ("t", "n_examples", "n_mistakes", "rnd_t", "touches_since_exact"):
        setattr(st, name, int(d[name]))
    st.l1_sum_t = st.t  # a state is saved between steps
    # states written before `span` existed recount N on the old schedule
    st.span = max(1, min(int(d.get("span", st.dim)), st.dim))
    for name in ("sum_weight", "sum_loss", "sum_weighted_loss", "loss0_max"):
        setattr(st, name, float(d[name]))
    if d["version"] >= 4:
        st.sum_weighted_loss_reported = float(d["sum_weighted_loss_reported"])
        st.n_mistakes_reported = int(d["n_mistakes_reported"])
    else:
        # which rows the reported iterate would have mispredicted is not known: NaN,
        # never the last iterate's figures under the reported model's name
        st.sum_weighted_loss_reported = float("nan")
        st.n_mistakes_reported = 0
    if st.forgetting:
        for name in ("tau", "decay", "weight_sum"):
            setattr(st, name, float(d[name]))
    st.radius = float(d["radius_now"])
    st.rng = int(d["rng"])
    if st.l1 > 0.0:
        st.cum2_a[...] = d["cum2_a"]
    if st.adaptive and not st.p_is_two:
        st.ad_sq_a[...] = d["ad_sq_a"]
    if st.keep_seen:
        st._set_seen(None, coords if coords_known else st._reached(st.dim))
    st._bind()
    # l1: the threshold, heaps and norm (s_a was saved); p < 2: N's sums as they ran
    # (files written before they were saved count them again)
    l1q_sums = d.get("l1q_a")
    if l1q_sums is not None:
        l1q_sums = np.asarray(l1q_sums, dtype=np.float64)
        if l1q_sums.shape != (K, 5) or not (np.isfinite(l1q_sums).all()
                                            and (l1q_sums[:, 1] > 0).all()):
            raise ValueError(f"solver state array l1q_a is not {K} rows of a reference "
                             "threshold, a positive scale and three finite sums")
    l1_rebuild(st, l1q_sums)
    return st


def l1q_sums(PGSState st):
    """l1, p < 2: each problem's (thr0, m, S_0, S_1, S_2) (_l1q.pxd), as saved."""
    return np.array([[st.l1q[c].thr0, st.l1q[c].m, st.l1q[c].s0, st.l1q[c].s1,
                      st.l1q[c].s2] for c in range(st.n_problems)])


def unfold_marks_layout(d):
    """A state dict of an l1 average written when it kept marks (block fields
    `onlinepgs._layout.L1_MARKS_FIELDS`; no ``l1_folded``) in today's layout (its
    `StateLayout.fields`): the sums of the active coordinates folded (`_touch_l1`), the
    others' settled already (the heap popped them); on the ball the heap's key is the old
    version field, set afresh when the heap is built at the load. Other dicts are
    returned as they are."""
    block = np.asarray(d.get("block_a"))
    if d.get("l1_folded") or block.ndim != 3 or block.shape[2] != len(L1_MARKS_FIELDS):
        return d
    old = {name: block[:, :, k] for k, name in enumerate(L1_MARKS_FIELDS)}
    lam, acc, mark, markp = old["lam"], old["acc"], old["mark"], old["markp"]
    cum, cum2 = np.asarray(d["cum_a"]), np.asarray(d["cum2_a"])
    thr = (int(d["t"]) + 1.0) * float(d["config"]["l1"])
    a = np.abs(lam)
    active = a > thr
    total = acc + np.where(active, np.sign(lam) * np.maximum(
        a * (cum - mark) - (cum2 - markp), 0.0), 0.0)
    folded = np.where(active, total - lam * cum + np.sign(lam) * cum2, total)
    new = {"lam": lam, "acc": folded, "key": old["ver"], "on": active * 1.0}
    d = dict(d, l1_folded=1)
    d["block_a"] = np.ascontiguousarray(np.stack(
        [new[name] for name in StateLayout.of(d["config"]).fields], axis=2))
    return d
