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
from onlinepgs._learned_classes import _zero_problem
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
    # steps of zero gradients: a learner trained on t rows of weight 0 holds them
    records = _records(300, seed=6)
    ref = PGSClassifier(n_bits=9, random_state=0, radius=None, classes=[0, 1], **params)
    ref.partial_fit(records, np.arange(300) % 2, sample_weight=np.zeros(300))
    d, zero = ref._state.to_dict(), _zero_problem(ref._state)
    for name in ("norm_a", "scale_a", "s_a", "cum_a", "rnd_s_a", "rnd_ver_a",
                 "regret_a", "sum_conj_a", "sum_step_loss_a", "sum_reg_a", "cum2_a"):
        if name in d:
            np.testing.assert_array_equal(zero[name], d[name])


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
