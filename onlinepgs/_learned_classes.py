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

The zero problem's per-problem scalars (its scale, the averages' running sums) are those
of a problem that took ``t`` steps with zero gradients, from a replay of ``t`` zero-weight
rows on a one-coordinate state of the same configuration (`_zero_problem`).
"""
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
# zero-weight rows replayed a call (`_zero_problem`)
_REPLAY_ROWS = 1 << 16


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
    state's ``t`` steps with zero gradients: a one-coordinate, one-problem state of the
    same configuration (and seed: the random iterate's draws) through ``t`` zero-weight
    empty rows. Nothing depends on the rows but the step count (tested against a learner
    trained on zero weights)."""
    from onlinepgs._core._pgs import PGSState

    cfg = dict(state.config())
    cfg.update(n_problems=1, multiclass=False)
    cfg.pop("multi_class", None)
    replay = PGSState(**cfg, n_features=0)
    random = cfg["iterate"] == "random"
    # the random iterate: the state's reservoir holds step rnd_t (its draws follow the
    # model's rows): the zero problem's scale then, and the state's version count
    rnd_s = None
    for stop in ((int(state.rnd_t),) if random else ()) + (int(state.t),):
        while replay.t < stop:
            rows = min(stop - replay.t, _REPLAY_ROWS)
            replay.run(np.zeros(0), np.zeros(0, dtype=np.int32),
                       np.zeros(rows + 1, dtype=np.int64), 0, np.full(rows, -1.0),
                       np.zeros(rows), np.arange(rows, dtype=np.int64), True)
        if random and rnd_s is None:
            rnd_s = replay.s_a.copy()
    d = replay.to_dict()
    if random:
        d["rnd_s_a"], d["rnd_ver_a"] = rnd_s, np.asarray(state.rnd_ver_a)[:1].copy()
    return d
