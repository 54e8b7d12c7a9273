"""Classes learned as labels arrive: ``learn_one`` on a classifier without its ``classes``
parameter (onlinepgs._learned_classes, docs/design/estimators.md).

The yardsticks: the binary model of two labels learned as they arrive is the model of
``classes=[a, b]`` declared from the start, bit for bit, whichever label sorts first and
however late the second arrives (the sigma race, the race of eta, p < 2, l1, forgetting);
a class first seen at row k of a one-vs-rest model has the problem of a binary learner of
"that class against the rest" over every row with the rows before k weighing 0 (the
problem's scalars bit for bit, its weights to rounding: the one-vs-rest pass adds in
another order than the binary one); a model saved, copied or loaded mid-stream learns on
as the original; a bad label changes nothing.
"""
import copy
import pickle

import numpy as np
import pytest

from onlinepgs import PGSClassifier, load_model, save_model
from onlinepgs._core._pgs import PGSState
from onlinepgs._learned_classes import _PER_PROBLEM, _zero_problem
from onlinepgs.pgs import PGSClassifierLearner


def _records(n, seed=0):
    rng = np.random.RandomState(seed)
    return [{"site": f"s{rng.randint(15)}", "hour": float(rng.rand()),
             **{f"w{rng.randint(60)}": 1.0 for _ in range(5)}} for _ in range(n)]


def _same_model(a, b):
    assert a.classes_.tolist() == b.classes_.tolist()
    assert np.array_equal(a.coef_, b.coef_)
    assert np.array_equal(a.intercept_, b.intercept_)
    assert (a.t_, a.sigma_, a.eta_) == (b.t_, b.sigma_, b.eta_)
    assert a.sigma_path_ == b.sigma_path_


_ADAPTIVE = {"geometry": "adaptive", "radius": None, "iterate": "last"}
BINARY = {
    "sigma auto": {},
    "fixed sigma": {"sigma": 1e-3},
    "p 1.5": {"sigma": 1e-3, "p": 1.5},
    "l1": {"sigma": 1e-3, "l1": 1e-4},
    "forget": {"sigma": 1e-3, "forget": 0.99, "iterate": "last"},
    "random iterate": {"sigma": 1e-3, "iterate": "random"},
    "hinge": {"sigma": 1e-2, "radius": None, "loss": "hinge"},
    "adaptive, eta auto": _ADAPTIVE,
    "adaptive, fixed eta, l1": {**_ADAPTIVE, "eta": 0.5, "sigma": 1e-3, "l1": 1e-4},
}


@pytest.mark.parametrize("second", ["a", "c"])  # sorts before the first label, after it
@pytest.mark.parametrize("name", list(BINARY))
def test_two_labels_learned_as_they_arrive_are_the_declared_binary_model(name, second):
    params = BINARY[name]
    n, k = 600 if "adaptive" not in name else 4300, 40
    records = _records(n, seed=1)
    rng = np.random.RandomState(2)
    labels = np.where(np.arange(n) < k, "b", np.where(rng.rand(n) < 0.4, second, "b"))
    learned = PGSClassifier(n_bits=10, random_state=0, **params)
    for i, (x, label) in enumerate(zip(records, labels)):
        learned.learn_one(x, label)
        if i == k - 1:  # one class so far: it is every prediction
            assert learned.classes_.tolist() == ["b"]
            assert learned.predict_one(x) == "b"
            assert learned.predict([x]).tolist() == ["b"]
            if learned.loss == "logistic":
                assert learned.predict_proba_one(x) == {"b": 1.0}
                assert learned.predict_proba([x]).tolist() == [[1.0]]
    declared = PGSClassifier(n_bits=10, random_state=0, classes=["b", second], **params)
    declared.partial_fit(records, labels)
    _same_model(learned, declared)
    assert learned.classes_.tolist() == sorted(["b", second])
    assert np.array_equal(learned.predict(records[:50]), declared.predict(records[:50]))


def test_the_path_without_hashing_learns_its_classes_too():
    rng = np.random.RandomState(3)
    records = [{int(j): float(rng.rand()) for j in rng.choice(30, 5, replace=False)}
               for _ in range(300)]
    labels = np.where(np.arange(300) < 20, 7, rng.choice([3, 7], 300))
    learned = PGSClassifier(sigma=1e-3, random_state=0)  # n_bits None: partial_fit's path
    for x, label in zip(records, labels):
        learned.learn_one(x, label)
    declared = PGSClassifier(sigma=1e-3, random_state=0, classes=[3, 7])
    for x, label in zip(records, labels):
        declared.learn_one(x, label)
    _same_model(learned, declared)


@pytest.mark.parametrize("params", [
    {"sigma": 1e-3},
    {"sigma": 1e-3, "p": 1.5},
    {"sigma": 1e-3, "l1": 1e-3},
    {"sigma": 1e-3, "iterate": "random"},
    {"sigma": 1e-2, "loss": "hinge", "iterate": "last"},
    {"sigma": 1e-3, "geometry": "adaptive", "eta": 0.5, "iterate": "last"},
])
def test_a_class_first_seen_mid_stream_starts_its_problem_at_zero(params):
    # one-vs-rest: the new class's problem is a binary learner's of that class against
    # the rest over every row, the rows before its first weighing 0 (radius=None: the
    # ball "auto" grows with the model's rows, the reference's with its weighted ones);
    # the first two classes' problems are the binary learners' of every row
    params = {"radius": None, **params}
    n = 500
    records = _records(n, seed=4)
    rng = np.random.RandomState(5)
    labels = np.where(np.arange(n) < 150, rng.choice(["a", "b"], n),
                      rng.choice(["a", "b", "c", "d"], n))
    learned = PGSClassifier(n_bits=9, random_state=0, **params)
    for i, (x, label) in enumerate(zip(records, labels)):
        learned.learn_one(x, label)
    assert learned.classes_.tolist() == ["a", "b", "c", "d"]
    firsts = sorted(int(np.flatnonzero(labels == label)[0]) for label in "abcd")
    for k, label in enumerate(learned.classes_):
        first = int(np.flatnonzero(labels == label)[0])
        first = 0 if first <= firsts[1] else first  # the binary model's two classes
        alone = PGSClassifier(n_bits=9, random_state=0, classes=[False, True], **params)
        alone.partial_fit(records, labels == label,
                          sample_weight=(np.arange(n) >= first) * 1.0)
        np.testing.assert_allclose(learned.coef_[k], alone.coef_[0], rtol=0, atol=1e-12)
        np.testing.assert_allclose(learned.intercept_[k], alone.intercept_[0], rtol=0,
                                   atol=1e-12)
        if params.get("loss") == "hinge" or "geometry" in params:
            # where the passes add alike, the same bits
            assert np.array_equal(learned.coef_[k], alone.coef_[0])


@pytest.mark.parametrize("params", [{"sigma": 1e-3}, {"sigma": 1e-3, "p": 1.5},
                                    {"sigma": 1e-3, "l1": 1e-3},
                                    {"sigma": 1e-3, "forget": 0.99, "iterate": "last"}])
def test_a_new_problem_s_scalars_are_those_of_zero_weight_rows(params):
    # the scale, the averages' running sums and the reservoir's of a problem that took t
    # steps of zero gradients: a learner trained on t rows of weight 0 holds them (the
    # running sums to their rounding: `_same_scalars`)
    records = _records(300, seed=6)
    ref = PGSClassifier(n_bits=9, random_state=0, radius=None, classes=[0, 1], **params)
    ref.partial_fit(records, np.arange(300) % 2, sample_weight=np.zeros(300))
    _same_scalars(_zero_problem(ref._state), ref._state.to_dict(), int(ref._state.t))


# The yardstick of the zero problem's closed forms: the replay of t zero-weight empty rows
# on a one-coordinate state of the same configuration, through the core's own pass (what
# `_zero_problem` did before its closed forms)
def _replayed_zero_problem(state):
    cfg = dict(state.config())
    cfg.update(n_problems=1, multiclass=False)
    cfg.pop("multi_class", None)
    replay = PGSState(**cfg, n_features=0)
    random = cfg["iterate"] == "random"
    rnd_s = None
    for stop in ((int(state.rnd_t),) if random else ()) + (int(state.t),):
        _zero_rows(replay, stop - int(replay.t))
        if random and rnd_s is None:
            rnd_s = replay.s_a.copy()
    d = replay.to_dict()
    if random:
        d["rnd_s_a"], d["rnd_ver_a"] = rnd_s, np.asarray(state.rnd_ver_a)[:1].copy()
    return d


def _zero_rows(state, steps):
    """`steps` steps of empty rows of weight 0 (batch_size rows a step)."""
    rows = steps * state.batch_size
    if rows > 0:
        state.run(np.zeros(0), np.zeros(0, dtype=np.int32), np.zeros(rows + 1, dtype=np.int64),
                  0, np.full(rows, -1.0), np.zeros(rows), np.arange(rows, dtype=np.int64),
                  True)


_SUMS = ("cum_a", "cum2_a")  # the running sums: sums of t rounded terms


def _same_scalars(got, want, t, sums_exact=False):
    """The per-problem arrays of `got` (the closed forms) are `want`'s (a replay's) bit
    for bit, but the running sums C and C2 without `sums_exact`: those the replay adds
    one rounded term a step, so that its sum carries up to t rounding errors of its own
    (1.9e-12 relative at t = 10^5 for l1's C2, whose terms are all alike); they are held
    to that bound here and to the exact sum of the replay's own terms by
    `test_the_running_sums_are_the_exact_sums_of_the_replay_s_terms`."""
    for name in _PER_PROBLEM:
        if name not in want:
            continue
        a, b = np.asarray(got[name]), np.asarray(want[name])
        assert a.dtype == b.dtype and a.shape == b.shape, name
        if name in _SUMS and not sums_exact:
            np.testing.assert_allclose(a, b, rtol=max(1e-13, t * 2.0 ** -53), atol=0,
                                       err_msg=name)
        else:
            assert np.array_equal(a, b, equal_nan=True), (name, a, b)


def _zero_state(params, t):
    """A one-problem state of `params` after t steps of zero-weight rows."""
    state = PGSState(**params, n_features=3)
    _zero_rows(state, t)
    return state


_ZERO_CONFIGS = {
    "p 2": {},
    "ball": {"radius": 1.0},
    "ball auto": {"radius": "auto"},
    "p 1.5": {"p": 1.5},
    "p 1.5 ball auto": {"p": 1.5, "radius": "auto"},
    "p 1.01 ball": {"p": 1.01, "radius": 2.0},
    "l1": {"l1": 1e-4},
    "l1 ball": {"l1": 1e-4, "radius": 1.0},
    "l1 p 1.5": {"l1": 1e-4, "p": 1.5},
    "batch 4": {"batch_size": 4},
    "forget": {"forget": 0.9},
    "forget ball": {"forget": 0.9, "radius": 1.0},
    "forget l1": {"forget": 0.9, "l1": 1e-4},
    "forget p 1.5": {"forget": 0.9, "p": 1.5},
    "adaptive": {"geometry": "adaptive"},
    "adaptive l1": {"geometry": "adaptive", "l1": 1e-4},
    "adaptive p 1.5 ball": {"geometry": "adaptive", "p": 1.5, "radius": 1.0},
    "adaptive p 1.5 l1": {"geometry": "adaptive", "p": 1.5, "l1": 1e-4},
    "adaptive p 1.5 forget": {"geometry": "adaptive", "p": 1.5, "forget": 0.9},
    "adaptive forget": {"geometry": "adaptive", "forget": 0.9},
}
_ITERATES = ("last", "average", "weighted", "weighted2", "random")


def _zero_cases():
    for name, params in _ZERO_CONFIGS.items():
        for iterate in _ITERATES:
            try:
                PGSState(sigma=1e-3, iterate=iterate, **params)
            except ValueError:
                continue  # a configuration the package refuses
            yield pytest.param({"sigma": 1e-3, "iterate": iterate, **params},
                               id=f"{name}, {iterate}")


# forget 0.9 renormalizes every 1,316 steps: t = 1316, 1317 and 5000 follow one, and three
@pytest.mark.parametrize("t", [0, 1, 2, 7, 1000, 1316, 1317, 5000, 10**5])
@pytest.mark.parametrize("params", list(_zero_cases()))
def test_the_zero_problem_s_closed_forms_are_the_replay_s_scalars(params, t):
    state = _zero_state(params, t)
    got, want = _zero_problem(state), _replayed_zero_problem(state)
    forgetting_average = (state.forgetting and not state.adaptive
                          and params["iterate"] in ("average", "weighted", "weighted2"))
    if state.forgetting and not state.adaptive and state.need_norm and t >= 6 * 1316:
        # six renormalizations and more: M, times 2^-200 each, has been refreshed from
        # lambda = 0 (below 2^-600, `end_steps`), in the replay as in the closed form
        # (without N, at p = 2 off a ball, M is read by nothing and left to shrink)
        assert 0.0 < got["scale_a"][0] and np.isfinite(1.0 / got["scale_a"][0])
        assert got["norm_a"][0] == 0.0 and np.isfinite(got["s_a"][0])
        for name in want:  # N, s_t (p < 2), the sums that add them: finite
            if name in _PER_PROBLEM and np.isnan(want[name]).any() and name != "sum_reg_a":
                assert np.isfinite(got[name]).all(), name
                want[name] = got[name]
        if np.isnan(want["sum_reg_a"][0]) and state.need_norm:
            assert got["sum_reg_a"][0] == 0.0
            want["sum_reg_a"] = got["sum_reg_a"]
    _same_scalars(got, want, t, sums_exact=forgetting_average)
@pytest.mark.parametrize("params", [{}, _ADAPTIVE, {"sigma": 1e-3}])
def test_copies_pickles_and_model_files_learn_on_as_the_original(params, tmp_path):
    n = 900 if "geometry" not in params else 4300
    records = _records(n, seed=7)
    rng = np.random.RandomState(8)
    labels = np.where(np.arange(n) < 60, "x", np.where(
        np.arange(n) < 300, rng.choice(["x", "y"], n), rng.choice(["w", "x", "y"], n)))
    clf = PGSClassifier(n_bits=10, random_state=0, **params)
    others = []
    for i, (x, label) in enumerate(zip(records, labels)):
        if i in (30, 200, 500):  # one class, two, three
            save_model(clf, tmp_path / f"m{i}.pgs")
            others += [copy.deepcopy(clf), pickle.loads(pickle.dumps(clf)),
                       load_model(tmp_path / f"m{i}.pgs")]
        for est in [clf] + others:
            est.learn_one(x, label)
    assert clf.classes_.tolist() == ["w", "x", "y"]
    for other in others:
        _same_model(clf, other)
        assert other.predict_proba_one(records[0]) == clf.predict_proba_one(records[0])


def _snapshot(clf):
    return (clf.classes_.tolist(), clf.coef_.copy(), clf.intercept_.copy(), clf.t_,
            clf.n_iter_, clf.sigma_path_)


@pytest.mark.parametrize("label, match", [
    ([1], r"learn_one: label \[1\] is not hashable"),
    (None, r"learn_one: label None is no class"),
    (float("nan"), r"learn_one: label nan is no class"),
    ("z", r"learn_one: label 'z' cannot be ordered with the classes \[0, 1\]"),
])
def test_a_bad_label_is_refused_by_name_and_leaves_the_model(label, match):
    clf = PGSClassifier(n_bits=10, random_state=0)
    for i, x in enumerate(_records(200, seed=9)):
        clf.learn_one(x, i % 2)
    before = _snapshot(clf)
    with pytest.raises(ValueError, match=match):
        clf.learn_one({"w": 1.0}, label)
    after = _snapshot(clf)
    for a, b in zip(before, after):
        assert np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b
    # a new label with a bad event: the event's error, the classes as they were
    with pytest.raises(ValueError, match=r"learn_one: x has no feature"):
        clf.learn_one({}, 2)
    assert clf.classes_.tolist() == [0, 1]
    clf.learn_one({"w": 1.0}, 2)  # and a good one is learned
    assert clf.classes_.tolist() == [0, 1, 2]


@pytest.mark.parametrize("params", [{"multi_class": "multinomial"},
                                    {"multi_class": "crammer_singer", "loss": "hinge"}])
def test_a_coupled_loss_learns_two_classes_and_refuses_a_third(params):
    clf = PGSClassifier(n_bits=10, sigma=1e-3, random_state=0, **params)
    records = _records(100, seed=10)
    for i, x in enumerate(records):
        clf.learn_one(x, i % 2)
    declared = PGSClassifier(n_bits=10, sigma=1e-3, random_state=0, classes=[0, 1],
                             **params).partial_fit(records, np.arange(100) % 2)
    _same_model(clf, declared)
    before = _snapshot(clf)
    with pytest.raises(ValueError, match=r"label 2 would be a third class of multi_class="
                                         r".*set the classes parameter"):
        clf.learn_one(records[0], 2)
    assert np.array_equal(before[1], clf.coef_) and clf.classes_.tolist() == [0, 1]


def test_the_classes_parameter_still_bounds_the_labels():
    clf = PGSClassifier(n_bits=10, sigma=1e-3, classes=[0, 1])
    clf.learn_one({"w": 1.0}, 1)
    with pytest.raises(ValueError, match=r"label 2 is not one of the classes \[0, 1\]"):
        clf.learn_one({"w": 1.0}, 2)
    with pytest.raises(ValueError, match=r"class_weight needs every class up front"):
        PGSClassifier(n_bits=10, class_weight="balanced").learn_one({"w": 1.0}, 1)


def test_a_race_regroups_every_run():
    n = 1500
    records = _records(n, seed=11)
    rng = np.random.RandomState(12)
    labels = np.where(np.arange(n) < 700, rng.choice([0, 1], n), rng.choice([0, 1, 2], n))
    clf = PGSClassifierLearner(n_bits=10, random_state=0)  # the learner without sklearn
    for x, label in zip(records, labels):
        clf.learn_one(x, label)
    assert clf.classes_.tolist() == [0, 1, 2] and clf._race is not None
    assert all(state.n_problems == 3 for state in clf._race.states.values())
    assert clf.coef_.shape == (3, 2**10)
    probabilities = clf.predict_proba([records[0]])[0]
    got = clf.predict_proba_one(records[0])
    np.testing.assert_allclose([got[c] for c in (0, 1, 2)], probabilities, rtol=1e-13)


def test_threads_adding_labels_at_once_add_each_class_once():
    import threading

    clf = PGSClassifier(n_bits=10, sigma=1e-3, random_state=0)
    records = _records(400, seed=13)
    errors = []

    def learn(offset):
        try:
            for i, x in enumerate(records):
                clf.learn_one(x, ["p", "q", "r", "s"][(i + offset) % 4])
        except Exception as exc:  # pragma: no cover - the test's failure
            errors.append(exc)
    threads = [threading.Thread(target=learn, args=(k,)) for k in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors
    assert clf.classes_.tolist() == ["p", "q", "r", "s"]
    assert clf._state.n_problems == 4 and clf.t_ == 3 * 400


def _exact_sums(t, sigma, l1, iterate, cum_range):
    """(C, C2) of a zero problem after t steps at p = 2 without forgetting, from the
    replay's own terms in NumPy (a_u / ((u + 1) sigma), times thr_u = (u + 1) sigma l1 /
    sigma for C2, rounded as the core rounds them), C restarting where a term falls below
    C / cum_range, each sum added exactly (math.fsum)."""
    import math

    u = np.arange(1, t + 1, dtype=np.float64)
    weight = {"weighted": u, "weighted2": u * u}.get(iterate, np.ones(t))
    terms = weight * (1.0 / ((u + 1.0) * sigma))
    terms2 = terms * ((u + 1.0) * sigma * l1 / sigma)
    start = 0  # index of the segment's first step
    if iterate in ("average", "weighted", "weighted2"):
        while True:
            before = np.cumsum(terms[start:])  # C before each later step (to rounding)
            later = np.flatnonzero(terms[start + 1:] * cum_range < before[:-1])
            if not len(later):
                break
            start += 1 + int(later[0])
    return math.fsum(terms[start:]), math.fsum(terms2[start:])


@pytest.mark.parametrize("cum_range", [None, 64.0])  # the core's 2^20; restarts often
@pytest.mark.parametrize("iterate, l1", [("last", 0.0), ("random", 0.0), ("average", 0.0),
                                         ("average", 1e-4), ("weighted", 1e-4),
                                         ("weighted2", 0.0)])
def test_the_running_sums_are_the_exact_sums_of_the_replay_s_terms(iterate, l1, cum_range):
    from onlinepgs._core._pgs import _set_cum_range

    old = _set_cum_range(cum_range) if cum_range else None
    try:
        for t in (1, 2, 7, 1000, 10**5, 3 * 10**6 if cum_range is None else 2 * 10**4):
            state = PGSState(sigma=1e-3, iterate=iterate, l1=l1)
            state.t = t  # the closed forms read t only (without forgetting)
            got = _zero_problem(state)
            want = _exact_sums(t, 1e-3, l1, iterate, cum_range or 2.0**20)
            np.testing.assert_allclose(got["cum_a"][0], want[0], rtol=1e-14, atol=0)
            if l1:
                np.testing.assert_allclose(got["cum2_a"][0], want[1], rtol=1e-14, atol=0)
            if cum_range and t <= 2 * 10**4:  # and the core's restarts are those
                zero = _zero_state({"sigma": 1e-3, "iterate": iterate, "l1": l1}, t)
                _same_scalars(_zero_problem(zero), _replayed_zero_problem(zero), t)
    finally:
        if old is not None:
            _set_cum_range(old)


def _counting(monkeypatch, name):
    """Count the calls of the core's `name` (and the steps `_zero_forget_steps` takes)."""
    import onlinepgs._core._pgs as core

    counts = {"calls": 0, "steps": 0}
    inner = getattr(core, name)

    def counted(*args):
        counts["calls"] += 1
        out = inner(*args)
        if name == "_zero_forget_steps":
            counts["steps"] += out[0]  # the steps taken
        return out
    monkeypatch.setattr(core, name, counted)
    return counts


@pytest.mark.parametrize("params", [
    {"iterate": "last"}, {"iterate": "random"}, {"iterate": "average"},
    {"iterate": "weighted"}, {"iterate": "weighted2", "l1": 1e-4},
    {"iterate": "weighted2", "radius": "auto"}, {"iterate": "last", "p": 1.5},
    {"iterate": "last", "geometry": "adaptive"},
])
def test_a_class_after_a_billion_events_costs_no_replay(params, monkeypatch):
    # the closed forms' work: one evaluation for the last and random iterates, and for an
    # average a few per restart of C (one each CUM_RANGE = 2^20 steps or so), against
    # the 10^9 steps of a replay
    counts = _counting(monkeypatch, "_weighted_scale_sums")
    state = PGSState(sigma=1e-3, **params)
    t = 10**9
    state.t, state.rnd_t = t, t // 3
    got = _zero_problem(state)
    averaged = params["iterate"] not in ("last", "random")
    bound = 16 * (t >> 20) if averaged else 1
    assert counts["calls"] <= bound
    if state.p_is_two and not state.adaptive:
        assert got["s_a"][0] == 1.0 / ((t + 1.0) * 1e-3)
        assert got["cum_a"][0] > 0.0


@pytest.mark.parametrize("iterate", ["last", "weighted2", "random"])
def test_forgetting_s_zero_problem_steps_through_one_period_whatever_t(iterate, monkeypatch):
    # G and tau round once a step (no closed form bit for bit) but repeat every
    # renormalization: the work is a few periods' steps, not t
    forget = 0.99
    period = 13_794  # G = 0.99^13794 < 2^-200: the renormalization's (0.99^13793 is not)
    state = _zero_state({"sigma": 1e-3, "forget": forget, "iterate": iterate}, 3 * period + 5)
    state.rnd_t = 2 * period + 77  # a step past the first period (tau at its fixed point)
    counts = _counting(monkeypatch, "_zero_forget_steps")
    want = _zero_problem(state)
    assert counts["steps"] <= 4 * period
    # the same problem at t = 10^9 + 5, 10^9 a multiple of the period away: the same
    # scalars (the sums of the last and random iterates, which never restart, grow)
    far = 10**9 - 10**9 % period
    state.t += far
    state.rnd_t += far
    counts["steps"] = 0
    got = _zero_problem(state)
    assert counts["steps"] <= 4 * period
    for name in ("s_a", "rnd_s_a", "norm_a"):  # (M: times 2^-200 a renormalization)
        assert np.array_equal(got[name], want[name]), name
    if iterate == "weighted2":
        assert np.array_equal(got["cum_a"], want["cum_a"])
    else:
        assert got["cum_a"][0] > want["cum_a"][0]


def _late_class_stream(n, late, seed):
    """Records and labels a or b, then a, b or c from event `late` on (c at `late`)."""
    records = _records(n, seed=seed)
    rng = np.random.RandomState(seed + 1)
    labels = np.where(np.arange(n) < late, rng.choice(["a", "b"], n),
                      rng.choice(["a", "b", "c"], n))
    labels[late] = "c"
    return records, labels


@pytest.mark.parametrize("params", [
    {},  # the sigma race, weighted2, the automatic ball
    {"sigma": 1e-3, "iterate": "last"},
    {"sigma": 1e-3, "p": 1.5, "iterate": "last", "radius": "auto"},
    {"sigma": 1e-3, "l1": 1e-4, "iterate": "average"},
    {"sigma": 1e-3, "iterate": "random"},
    {"sigma": 1e-3, "forget": 0.99, "iterate": "last", "radius": 5.0},
    {"sigma": 1e-3, "iterate": "weighted"},
    _ADAPTIVE,
])
def test_a_late_class_makes_the_model_the_replay_made(params, monkeypatch):
    # a stream whose third class first comes after thousands of events ends with the model
    # of the replay's zero problem: bit for bit but for the averages, whose running sums
    # (to their rounding) enter every weight of the new class as C_T - C_u
    records, labels = _late_class_stream(6000, 5000, seed=14)
    models = []
    for zero in (_zero_problem, _replayed_zero_problem):
        monkeypatch.setattr("onlinepgs._learned_classes._zero_problem", zero)
        clf = PGSClassifier(n_bits=10, random_state=0, **params)
        for x, label in zip(records, labels):
            clf.learn_one(x, label)
        models.append(clf)
    got, want = models
    assert got.classes_.tolist() == ["a", "b", "c"]
    assert np.isfinite(got.coef_).all()
    if got._state.config()["iterate"] in ("last", "random") or got._state.adaptive:
        _same_model(got, want)
    else:
        np.testing.assert_allclose(got.coef_, want.coef_, rtol=1e-9,
                                   atol=1e-12 * np.abs(want.coef_).max())
        np.testing.assert_allclose(got.intercept_, want.intercept_, rtol=1e-9, atol=1e-12)
        assert (got.t_, got.sigma_, got.eta_) == (want.t_, want.sigma_, want.eta_)


@pytest.mark.parametrize("params", [{"p": 1.5}, {"radius": 5.0}])
def test_a_class_after_six_renormalizations_of_forgetting_starts_finite(params):
    # forget 0.9 renormalizes every 1,316 steps, M times 2^-200 each: left so, at 0 from
    # the sixth, a zero problem's N was NaN (p < 2, or the ball's N), and so its steps: a
    # replay of the zero-weight steps diverged there and never ended
    records, labels = _late_class_stream(9000, 8500, seed=16)
    clf = PGSClassifier(n_bits=10, random_state=0, sigma=1e-3, forget=0.9,
                        iterate="last", **params)
    for x, label in zip(records, labels):
        clf.learn_one(x, label)
    assert clf.classes_.tolist() == ["a", "b", "c"]
    assert np.isfinite(clf.coef_).all() and np.isfinite(clf.intercept_).all()
    assert np.abs(clf.coef_[2]).max() > 0.0
    proba = clf.predict_proba(records[-50:])
    assert np.isfinite(proba).all()
    # the new class's rows are learned: it scores its own rows above the others' on
    # average
    own = labels[-50:] == "c"
    assert proba[own, 2].mean() > proba[~own, 2].mean()
