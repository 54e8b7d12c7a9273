"""One event at a time: ``learn_one``, ``predict_one``, ``predict_proba_one``.

The yardstick: `partial_fit` over the same records in one call, and `predict` /
`predict_proba` of the same record: a sequence of ``learn_one`` calls ends with that
model bit for bit (coef_, intercept_, the sigma race's record, predictions), in every
configuration a stream takes (binary, one-vs-rest and the coupled multiclass losses,
regression, sample weights, interactions, the sigma race, p < 2, l1, forgetting); bad
input is refused with the key and the value named, the model untouched.
"""
import copy
import pickle

import numpy as np
import pytest

from onlinepgs import PGSClassifier, PGSRegressor, load_model, save_model
from onlinepgs._checks import NotFittedError
from onlinepgs._core._hashing import records_to_rows
from onlinepgs.pgs import PGSClassifierLearner, PGSDivergedError, PGSRegressorLearner


def _events(n, n_classes=2, seed=0, namespaces=False, regression=False):
    """n records of about 12 features (categories, numbers, column indices; namespaces
    "user" and "ad" when asked) and their labels (or targets), learnable from them."""
    rng = np.random.RandomState(seed)
    records, labels = [], []
    for _ in range(n):
        u, a = int(rng.randint(30)), int(rng.randint(20))
        x = {"hour": float(rng.rand()), "site": f"s{rng.randint(15)}", 7: float(rng.randn())}
        for k in range(8):
            x[f"w{rng.randint(200)}"] = 1.0
        if namespaces:
            x["user"] = {"id": f"u{u}", "age": float(rng.rand())}
            x["ad"] = {"id": f"a{a}"}
        else:
            x["user"], x["ad"] = f"u{u}", f"a{a}"
        score = (u % 7) - 3 + (a % 5) - 2 + 2.0 * x[7]
        records.append(x)
        if regression:
            labels.append(score + 0.1 * rng.randn())
        else:
            labels.append(int(np.clip(np.floor((score + 6) / 12 * n_classes), 0, n_classes - 1)))
    return records, np.array(labels)


def _same_model(a, b):
    assert np.array_equal(a.coef_, b.coef_)
    assert np.array_equal(a.intercept_, b.intercept_)
    assert a.t_ == b.t_
    assert a.sigma_ == b.sigma_
    assert a.sigma_path_ == b.sigma_path_
    assert a.online_stats_["n_examples"] == b.online_stats_["n_examples"]


_ADAPTIVE = {"radius": None, "iterate": "last"}  # what the adaptive geometry runs with
CLASSIFIERS = {
    "binary, sigma auto": ({}, 2),
    "binary, fixed sigma, last iterate": ({"sigma": 1e-3, "iterate": "last"}, 2),
    "binary, p 1.5": ({"sigma": 1e-3, "p": 1.5}, 2),
    "binary, p 1.7 (NumPy's powers)": ({"sigma": 1e-3, "p": 1.7}, 2),
    "binary, l1": ({"sigma": 1e-3, "l1": 1e-4}, 2),
    "binary, forget": ({"sigma": 1e-3, "forget": 0.99, "iterate": "last"}, 2),
    "binary, radius None, hinge": ({"sigma": 1e-2, "radius": None, "loss": "hinge"}, 2),
    "binary, adaptive geometry": ({"geometry": "adaptive", **_ADAPTIVE}, 2),
    "binary, adaptive geometry, fixed sigma, l1": ({"geometry": "adaptive", "sigma": 1e-3,
                                                   "l1": 1e-4, **_ADAPTIVE}, 2),
    "4 classes, adaptive geometry": ({"geometry": "adaptive", "sigma": 1e-3, **_ADAPTIVE}, 4),
    "4 classes, one-vs-rest, sigma auto": ({}, 4),
    "4 classes, multinomial": ({"sigma": 1e-3, "multi_class": "multinomial"}, 4),
    "3 classes, Crammer-Singer": ({"sigma": 1e-3, "loss": "hinge",
                                  "multi_class": "crammer_singer"}, 3),
}


@pytest.mark.parametrize("name", list(CLASSIFIERS))
def test_learn_one_is_partial_fit_bit_for_bit(name):
    params, n_classes = CLASSIFIERS[name]
    records, y = _events(1300, n_classes, seed=1)
    w = np.random.RandomState(2).choice([0.5, 1.0, 2.0], len(y))
    classes = list(range(n_classes))
    one = PGSClassifier(n_bits=16, random_state=0, classes=classes, **params)
    for x, label, weight in zip(records, y, w):
        one.learn_one(x, label, weight)
    batch = PGSClassifier(n_bits=16, random_state=0, **params).partial_fit(
        records, y, classes=classes, sample_weight=w)
    _same_model(one, batch)
    test, _ = _events(50, n_classes, seed=3)
    assert [one.predict_one(x) for x in test] == batch.predict(test).tolist()
    if one.loss == "logistic":
        proba = np.array([list(one.predict_proba_one(x).values()) for x in test])
        np.testing.assert_allclose(proba, batch.predict_proba(test), rtol=1e-13, atol=1e-16)
        assert list(one.predict_proba_one(test[0])) == classes


def test_a_dict_changed_between_predict_one_and_learn_one_is_read_again():
    # learn_one takes the row predict_one read only from a dict of the very same objects
    records, y = _events(200, seed=12, namespaces=True)
    changed = []
    clf = PGSClassifier(n_bits=12, sigma=1e-3, classes=[0, 1])
    for k, (x, label) in enumerate(zip(records, y)):
        clf.predict_proba_one(x)
        if k % 4 == 0:
            x["hour"] = x["hour"] + 1.0           # a value replaced
        elif k % 4 == 1:
            x["user"]["age"] = 5.0                # inside a namespace (never kept)
        elif k % 4 == 2:
            del x[7]
            x[7] = 1.0                            # a key again, in another place
        changed.append(dict(x))
        clf.learn_one(x, label)
    _same_model(clf, PGSClassifier(n_bits=12, sigma=1e-3).partial_fit(changed, y,
                                                                      classes=[0, 1]))


def test_the_race_crosses_its_checks_and_forks_as_partial_fit_does():
    # 1300 events: the first check at 250, forks and duels after it (sigma_path_ equal)
    records, y = _events(1300, seed=4)
    one = PGSClassifier(n_bits=16, classes=[0, 1])
    for x, label in zip(records, y):
        one.learn_one(x, label)
    batch = PGSClassifier(n_bits=16).partial_fit(records, y, classes=[0, 1])
    assert any(r["event"] == "check" and r["forked"] for r in one.sigma_path_)
    _same_model(one, batch)


def _duel_rows(est):
    """Whether `est`'s race is in the second half of a duel (two runs, the window's
    losses read)."""
    race = getattr(est, "_race", None)
    return race is not None and len(race.states) == 2 and getattr(race.schedule, "since", 0) > 0


@pytest.mark.parametrize("params, n, fit_at, copy_at, set_at, min_duels", [
    ({}, 2600, (700, 1900), 1400, 2200, 300),
    # the adaptive geometry's race of eta chooses at row 4,000, then its family's duel
    ({"geometry": "adaptive", **_ADAPTIVE}, 5600, (3000, 5300), 4700, 5450, 300),
    # ... and before its choice, where the event path holds each rate's family of runs
    # and the window of the choice (a partial_fit before and after the window's start
    # at row 2,000, a pickled copy, a parameter set back)
    ({"geometry": "adaptive", **_ADAPTIVE}, 4100, (600, 2600), 1500, 3300, 0)])
def test_the_race_held_by_the_event_path_follows_calls_that_train_it_otherwise(
        params, n, fit_at, copy_at, set_at, min_duels):
    # the event path holds the race between its checks: a partial_fit of a record, a
    # pickled copy, a changed parameter set back, in duels and out, are followed (the
    # race read again) and the model ends as one partial_fit over all the records
    records, y = _events(n, seed=15)
    one = PGSClassifier(n_bits=14, classes=[0, 1], random_state=0, **params)
    duels = compiled = 0
    for k, (x, label) in enumerate(zip(records, y)):
        if k in fit_at:
            one.partial_fit(records[k:k + 1], y[k:k + 1])
            continue
        if k == copy_at:
            one = pickle.loads(pickle.dumps(one))
        if k == set_at:
            one.set_params(sigma=1e-3)
            with pytest.raises(ValueError, match=r"\['sigma'\] changed since training"):
                one.learn_one(x, label)
            one.set_params(sigma="auto")
        duels += _duel_rows(one)
        one.predict_proba_one(x)
        ev = one.__dict__.get("_events")
        if ev is not None and ev.learn(one, x, label, 1.0) is one:
            compiled += 1
        else:  # a first event, a check of the race (the learner's Python takes them)
            one.learn_one(x, label)
    assert duels >= min_duels and compiled > 0.95 * n
    batch = PGSClassifier(n_bits=14, random_state=0, **params).partial_fit(
        records, y, classes=[0, 1])
    _same_model(one, batch)


def test_the_race_s_rows_counted_elsewhere_are_read_again():
    # a race whose rows were stepped outside the event path (as `onlinepgs serve` steps
    # them, counting race.n_rows itself): the next event reads the race again, and its
    # checks fall where partial_fit's do
    from onlinepgs._core._event import test_then_train

    records, y = _events(1200, seed=16)
    X = PGSClassifier(n_bits=14).partial_fit(records[:1], y[:1], classes=[0, 1])._as_matrix(
        records, fitted=True)
    one = PGSClassifier(n_bits=14, classes=[0, 1], random_state=0)
    for k, (x, label) in enumerate(zip(records, y)):
        if 640 <= k < 660:  # in a duel: each run steps on the row, the row counted
            race = one._race
            for rid in sorted(race.states):
                test_then_train(race.states[rid], X.data, X.indices, X.indptr.astype(np.int64),
                                np.array([k], dtype=np.int64), np.ones(1, dtype=np.uint8),
                                X.shape[1], np.array([2.0 * label - 1.0]), np.ones(1),
                                True, np.zeros((1, 1)))
            race.n_rows += 1
            one._state = race.leader
            continue
        one.learn_one(x, label)
    batch = PGSClassifier(n_bits=14, random_state=0).partial_fit(records, y, classes=[0, 1])
    _same_model(one, batch)


@pytest.mark.parametrize("params", [{}, {"sigma": 1e-3, "loss": "huber", "p": 1.8}])
def test_a_regressor_learns_one_event_at_a_time_as_partial_fit(params):
    records, y = _events(900, regression=True, seed=5)
    one = PGSRegressor(n_bits=16, **params)
    for x, target in zip(records, y):
        one.learn_one(x, float(target))
    batch = PGSRegressor(n_bits=16, **params).partial_fit(records, y)
    _same_model(one, batch)
    test, _ = _events(30, regression=True, seed=6)
    assert [one.predict_one(x) for x in test] == batch.predict(test).tolist()


def test_interactions_of_namespaces_and_mixed_calls():
    records, y = _events(700, seed=7, namespaces=True)
    params = dict(n_bits=16, sigma=1e-3, interactions=["ua", "uu"], classes=["no", "yes"])
    labels = np.where(y > 0, "yes", "no")
    one = PGSClassifier(**params)
    one.partial_fit(records[:100], labels[:100])  # then event by event
    for x, label in zip(records[100:], labels[100:]):
        one.learn_one(x, label)
    batch = PGSClassifier(**params).partial_fit(records, labels)
    _same_model(one, batch)
    assert one.predict_one(records[0]) == batch.predict([records[0]])[0]


@pytest.mark.parametrize("interactions", [["ua"], ["uad", "u:"], [":::"]])
def test_learn_one_with_interactions_is_partial_fit_on_records_and_on_crossed_rows(
        interactions):
    # one row builder: the event's row (EventRow), the records' matrix (to_matrix) and
    # the rows the pass crosses itself (CrossedRows, as the command's readers give them)
    from onlinepgs.features import CrossedRows, FeatureSpec, NamespacedRows, \
        parse_interactions

    records, y = _events(600, seed=13, namespaces=True)
    for k, x in enumerate(records):
        x["device"] = {"m": f"m{k % 5}", "c": float(k % 3)}
    params = dict(n_bits=14, sigma=1e-3, interactions=interactions)
    one = PGSClassifierLearner(classes=[0, 1], **params)
    for x, label in zip(records, y):
        one.learn_one(x, label)
    batch = PGSClassifierLearner(**params).partial_fit(records, y, classes=[0, 1])
    rows = NamespacedRows(*records_to_rows(records, 0)[:4])
    crossed = CrossedRows(rows, FeatureSpec(14, 0, parse_interactions(interactions)))
    pass_ = PGSClassifierLearner(**params).partial_fit(crossed, y, classes=[0, 1])
    assert crossed._crossing is not None  # crossed in the pass, not made a matrix
    for other in (batch, pass_):
        assert np.array_equal(one.coef_, other.coef_)
        assert np.array_equal(one.intercept_, other.intercept_)
        assert one._state.t == other._state.t


@pytest.mark.parametrize("learner", [PGSClassifierLearner, PGSClassifier])
@pytest.mark.parametrize("params", [{"n_bits": None}, {"n_bits": 16, "class_weight": "balanced"},
                                    {"n_bits": 16, "class_weight": {0: 3.0}}])
def test_the_configurations_without_the_compiled_path_are_partial_fit_too(learner, params):
    # without n_bits the model's width follows the column indices; class weights are
    # estimated on the stream: learn_one is partial_fit on the one record
    rng = np.random.RandomState(8)
    records = [{int(j): float(rng.rand()) for j in rng.randint(0, 50, 6)} for _ in range(300)]
    y = np.array([int(sum(r.values()) > 3) for r in records])
    one = learner(sigma=1e-3, classes=[0, 1], **params)
    for x, label in zip(records, y):
        one.learn_one(x, label)
    batch = learner(sigma=1e-3, **params).partial_fit(records, y, classes=[0, 1])
    _same_model(one, batch)
    assert one.predict_one(records[0]) == batch.predict([records[0]])[0]


def test_a_learner_without_scikit_learn_learns_one_event_too():
    records, y = _events(400, seed=9, regression=True)
    one = PGSRegressorLearner(n_bits=14, sigma=1e-2)
    for x, target in zip(records, y):
        one.learn_one(x, target)
    _same_model(one, PGSRegressorLearner(n_bits=14, sigma=1e-2).partial_fit(records, y))


def test_a_fresh_classifier_predicts_the_zero_model_or_nothing():
    clf = PGSClassifier(n_bits=10, classes=["b", "a", "c"])
    assert clf.predict_proba_one({"w": "x"}) == {"a": 1 / 3, "b": 1 / 3, "c": 1 / 3}
    assert clf.predict_one({"w": "x"}) == "a"
    assert PGSClassifier(n_bits=10).predict_proba_one({"w": "x"}) == {}
    assert PGSClassifier(n_bits=10).predict_one({"w": "x"}) is None
    assert PGSRegressor(n_bits=10).predict_one({"w": "x"}) == 0.0


def _state_of(clf):
    return (clf.coef_.copy(), clf.intercept_.copy(), clf.t_, clf.n_iter_,
            clf.online_stats_["sum_weight"], clf.sigma_path_)


@pytest.mark.parametrize("sigma", [1e-3, "auto"])
@pytest.mark.parametrize("x, y, w, match", [
    ({"w": "x", "n": [1.0]}, 1, 1.0, r"learn_one: x, feature 'n': value \[1.0\] is not a number"),
    ({"w": "x", "n": float("nan")}, 1, 1.0, r"feature 'n': value nan is not finite"),
    ({"user": {"age": "inf", "n": float("inf")}}, 1, 1.0, r"feature 'n': value inf is not finite"),
    ({"w": "x"}, 2, 1.0, r"label 2 is not one of the classes \[0, 1\]"),
    ({"w": "x"}, float("nan"), 1.0, r"label nan is not one of the classes"),
    ({}, 1, 1.0, r"x has no feature \(an empty dict"),
    ({"w": None}, 1, 1.0, r"x has no feature"),
    ({"w": "x"}, 1, -1.0, r"w must be finite and >= 0, got -1.0"),
    ({"w": "x"}, 1, float("nan"), r"w must be finite and >= 0, got nan"),
    ({"w": "x"}, 1, 10**400, r"w must be finite and >= 0, got an integer of 401 digits"),
    ({"w": "x", 5.5: 1.0}, 1, 1.0, r"feature 5.5 is neither a str nor an int"),
])
def test_bad_events_are_refused_by_name_and_leave_the_model(sigma, x, y, w, match):
    records, labels = _events(300, seed=10)
    clf = PGSClassifier(n_bits=12, sigma=sigma, classes=[0, 1])
    for r, label in zip(records, labels):
        clf.learn_one(r, label)
    before = _state_of(clf)
    with pytest.raises(ValueError, match=match):
        clf.learn_one(x, y, w)
    after = _state_of(clf)
    for a, b in zip(before, after):
        assert np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b
    clf.learn_one(records[0], labels[0])  # and it goes on


def test_bad_events_in_predictions_and_regression_targets():
    reg = PGSRegressor(n_bits=12, sigma=1e-2)
    reg.learn_one({"a": 1.0}, 2.0)
    with pytest.raises(ValueError, match=r"learn_one: y must be finite, got nan"):
        reg.learn_one({"a": 1.0}, float("nan"))
    # an int beyond the double range: a ValueError naming it (an OverflowError before)
    with pytest.raises(ValueError, match=r"learn_one: y must be finite, got an integer of "
                                         r"401 digits, beyond the double range"):
        reg.learn_one({"a": 1.0}, 10**400)
    with pytest.raises(ValueError, match=r"y must be finite; row 1 has an integer of 401 "):
        reg.partial_fit([{"a": 1.0}, {"a": 2.0}], [1.0, 10**400])
    with pytest.raises(ValueError, match=r"sample_weight must be finite and >= 0; row 0 "):
        reg.partial_fit([{"a": 1.0}], [1.0], sample_weight=[10**400])
    with pytest.raises(ValueError, match=r"predict_one: x, feature 'a': value \[\] is not a "):
        reg.predict_one({"a": []})
    with pytest.raises(TypeError, match=r"predict_one: x must be a dict"):
        reg.predict_one([("a", 1.0)])
    assert reg.t_ == 1


def test_a_changed_parameter_is_refused_as_partial_fit_refuses_it():
    clf = PGSClassifier(n_bits=12, sigma=1e-3, classes=[0, 1])
    clf.learn_one({"a": 1.0}, 1)
    clf.set_params(sigma=1e-2)
    with pytest.raises(ValueError, match=r"\['sigma'\] changed since training started"):
        clf.learn_one({"a": 1.0}, 1)


@pytest.mark.parametrize("change", [dict(hash_seed=5), dict(n_bits=16),
                                    dict(interactions=None)])
def test_a_fitted_model_hashes_records_as_it_learned_whatever_is_set_since(change):
    """After set_params of a hashing parameter, predict and predict_proba hash records
    as the model learned them (its columns), as predict_one does: the same answers (the
    matrix path hashed them by the new parameters into other columns); fit starts over
    with the new ones."""
    records = [{"a": f"x{i % 7}", "v": i / 100, "ns": {"k": f"k{i % 3}"}} for i in range(300)]
    labels = [int(i % 7 < 3) for i in range(300)]
    clf = PGSClassifier(n_bits=18, sigma=1e-2, classes=[0, 1], interactions=["nn", "n "])
    for x, label in zip(records, labels):
        clf.learn_one(x, label)
    want = clf.predict_proba(records[:20])
    clf.set_params(**change)
    np.testing.assert_array_equal(clf.predict_proba(records[:20]), want)
    # (the one-row path sums a row's terms in its own order: equal to rounding)
    np.testing.assert_allclose([clf.predict_proba_one(x)[1] for x in records[:20]],
                               want[:, 1], rtol=1e-12)
    assert [clf.predict_one(x) for x in records[:20]] == clf.predict(records[:20]).tolist()
    clf.fit(records, labels)  # a new model, by the parameters as they are
    assert clf.n_features_in_ == 2 ** change.get("n_bits", 18)


def test_str_subclasses_hash_as_their_text_and_huge_indices_are_named():
    """NumPy's str_ (a str subclass) as a key, a value or a namespace's key hashes as the
    plain str (it failed with a TypeError naming no feature); an int key beyond 2**63 - 1
    is named as such (it said "neither a str nor an int")."""
    plain = [{"city": "paris", "u": 1.0}, {"ns": {"city": "lyon"}}, {"k": "x", "v": 2.0}]
    numpy = [{np.str_("city"): np.str_("paris"), "u": 1.0},
             {np.str_("ns"): {np.str_("city"): np.str_("lyon")}},
             {"k": np.str_("x"), np.str_("v"): 2.0}]
    learners = []
    for records in (plain, numpy):
        clf = PGSClassifier(n_bits=12, sigma=1e-3, classes=[0, 1])
        for x, label in zip(records * 20, [0, 1, 1] * 20):
            clf.learn_one(x, label)
        learners.append((clf, records))
    (a, ra), (b, rb) = learners
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.predict_proba(ra), b.predict_proba(rb))
    with pytest.raises(ValueError, match=r"learn_one: x: feature index 9223372036854775808 "
                                         r"is beyond 2\*\*63 - 1"):
        a.learn_one({2**63: 1.0}, 1)


def test_mini_batches_are_partial_fit_s():
    with pytest.raises(ValueError, match=r"batch_size=1 \(got 4\)"):
        PGSClassifier(n_bits=10, batch_size=4, classes=[0, 1]).learn_one({"a": 1.0}, 1)


def test_copies_pickles_and_model_files_keep_learning_as_the_original():
    records, y = _events(400, seed=11)
    clf = PGSClassifier(n_bits=12, sigma=1e-3, classes=[0, 1])
    for x, label in zip(records[:200], y[:200]):
        clf.learn_one(x, label)
    copies = [copy.deepcopy(clf), pickle.loads(pickle.dumps(clf))]
    for x, label in zip(records[200:], y[200:]):
        for est in [clf] + copies:
            est.learn_one(x, label)
    for other in copies:
        _same_model(clf, other)


def test_a_model_file_keeps_the_fitted_classes_and_learns_on(tmp_path):
    # the classes parameter sets up a fresh model; a file keeps its classes_ (the
    # parameter reads back as None) and the loaded model learns on as the original
    clf = PGSClassifier(n_bits=12, sigma=1e-3, classes=np.array([3, 1]))
    clf.learn_one({"a": 1.0}, 3)
    save_model(clf, tmp_path / "m.pgs")
    loaded = load_model(tmp_path / "m.pgs")
    assert loaded.classes is None and loaded.classes_.tolist() == [1, 3]
    loaded.learn_one({"a": 1.0}, 1)
    clf.learn_one({"a": 1.0}, 1)
    _same_model(clf, loaded)


@pytest.mark.parametrize("record", [
    {"k" * 300: "v" * 10},                       # longer than the joining buffer
    {"city": "Zürich", "ns": {"名": "値"}},       # UTF-8 beyond ASCII
])
def test_categories_hash_as_the_joined_name(record):
    # a category is the feature "key=value": hashed without making that str
    joined = {}
    for key, value in record.items():
        if isinstance(value, dict):
            joined[key] = {f"{k}={v}": 1.0 for k, v in value.items()}
        else:
            joined[f"{key}={value}"] = 1.0
    got, want = records_to_rows([record], 7), records_to_rows([joined], 7)
    for a, b in zip(got[:4], want[:4]):
        assert np.array_equal(a, b)


def test_a_category_that_is_no_unicode_is_named():
    with pytest.raises(ValueError, match=r"feature 'w=\\ud800' is not valid Unicode"):
        records_to_rows([{"w": "\ud800"}], 0)


def _column_records(X):
    return [{f"x{j}": float(v) for j, v in enumerate(row)} for row in X]


def _each_record(est, records, y):
    """partial_fit on each record in turn: what learn_one is, guard included (partial_fit
    looks at the state's finiteness once a call)."""
    for x, target in zip(records, y):
        est.partial_fit([x], [target])
    return est


def test_a_race_run_that_diverges_on_an_event_is_dropped_as_partial_fit_drops_it():
    # squared loss on R^n: the small sigmas' steps overflow on large targets; those runs
    # leave the race at the same rows as partial_fit's of each record, recorded alike
    rng = np.random.RandomState(0)
    X = rng.randn(1500, 5) * 3.0
    y = X @ rng.randn(5) * 10.0
    records = _column_records(X)
    one = PGSRegressor(n_bits=12, radius=None, random_state=0)
    for x, target in zip(records, y):
        one.learn_one(x, float(target))
    each = _each_record(PGSRegressor(n_bits=12, radius=None, random_state=0), records, y)
    drops = [r for r in one.sigma_path_ if r["event"] == "drop"]
    assert drops and all(r["reason"] == "diverged" for r in drops)
    _same_model(one, each)
    # one call over all records looks at the states' finiteness at its end only: its runs
    # whose progressive loss overflowed are dropped there, later (a row where a step's
    # derivative overflows stops a run at once, either way)
    batch = PGSRegressor(n_bits=12, radius=None, random_state=0).partial_fit(records, y)
    assert [r["rows"] for r in batch.sigma_path_ if r["event"] == "drop"] != [
        r["rows"] for r in drops]


@pytest.mark.parametrize("sigma", [1e-12, "auto"])
def test_a_diverging_event_raises_partial_fit_s_error_and_keeps_its_model(sigma):
    rng = np.random.RandomState(1)
    X = rng.randn(40, 3)
    records = _column_records(X) + [{"x0": 1e200, "x1": 2e200}]
    y = list(X.sum(axis=1) * 1e3) + [1e3]
    errors, models = [], []
    for learn in ("one", "each"):
        reg = PGSRegressor(n_bits=12, loss="squared", sigma=sigma, radius=None,
                           random_state=0)
        with pytest.raises(PGSDivergedError) as info:
            if learn == "one":
                for x, target in zip(records, y):
                    reg.learn_one(x, target)
            else:
                _each_record(reg, records, y)
        errors.append(str(info.value))
        models.append(reg)
    one, each = models
    assert errors[0] == errors[1] and "overflowed" in errors[0]
    assert one.t_ == each.t_ and one.sigma_path_ == each.sigma_path_

    def outcome(predict):  # the prediction, or the error that says the model is unusable
        try:
            return predict()
        except PGSDivergedError as exc:
            return str(exc)
    assert outcome(lambda: one.predict_one(records[0])) == outcome(
        lambda: each.predict([records[0]])[0].item())


@pytest.mark.parametrize("params", [{"sigma": 1e-3}, {"sigma": 1e-3, "p": 1.5, "l1": 1e-5,
                                                     "iterate": "last"}])
def test_an_event_allocates_nothing_that_grows_with_the_width(params):
    # the model is 2**22 columns (32 MB of state and more): an event's row, step and
    # prediction take a few hundred bytes, and take the compiled path
    import tracemalloc

    records, y = _events(300, seed=13)
    clf = PGSClassifier(n_bits=22, classes=[0, 1], **params)
    for x, label in zip(records[:100], y[:100]):
        clf.learn_one(x, label)
    tracemalloc.start()
    try:
        for x, label in zip(records[100:], y[100:]):
            clf.predict_proba_one(x)
            assert clf._events.learn(clf, x, label, 1.0) is clf  # not the general path
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16_000


def test_threads_learning_and_predicting_at_once_lose_no_event():
    import threading

    records, y = _events(2000, seed=14)
    clf = PGSClassifier(n_bits=14, classes=[0, 1])
    clf.learn_one(records[0], y[0])
    errors = []

    def learn(part):
        try:
            for x, label in zip(records[1:][part], y[1:][part]):
                clf.learn_one(x, label)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def predict():
        try:
            for x in records[:1000]:
                assert 0.0 <= clf.predict_proba_one(x)[1] <= 1.0
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
    threads = [threading.Thread(target=learn, args=(slice(k, None, 2),)) for k in (0, 1)]
    threads.append(threading.Thread(target=predict))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert clf.t_ == clf.online_stats_["n_examples"] == 2000
    assert np.isfinite(clf.coef_).all()


@pytest.mark.parametrize("params", [{}, {"geometry": "adaptive", **_ADAPTIVE}])
def test_an_event_reports_the_leader_the_race_s_rule_chooses(params):
    # the event path reads SigmaSchedule.leader's choice from the runs' states in place
    # (`EventPath._leader`): at every event, through the start, duels and forks (and the race
    # of eta, then its kept family), the reported state is the rule's
    records, labels = _events(9000, seed=21)
    clf = PGSClassifier(n_bits=12, classes=[0, 1], random_state=0, **params)
    chosen = set()
    for x, label in zip(records, labels):
        clf.learn_one(x, label)
        race = clf._race
        if race is not None and len(race.states) > 1:
            assert clf._state is race.leader
            chosen.add(id(clf._state))
    assert len(chosen) > 2  # the lead changed hands


def test_the_race_of_eta_before_its_choice_is_ruled_in_compiled_code(monkeypatch):
    # between its checks, an event of the adaptive geometry's race of eta reads the
    # leader of the families' runs from their states in place (`EventPath._leader`): the
    # schedule's Python rule (`EtaSchedule.leader`) is not asked, and gives the same run
    from onlinepgs._eta_race import EtaSchedule

    records, y = _events(2600, seed=23)
    clf = PGSClassifier(n_bits=12, classes=[0, 1], random_state=0, geometry="adaptive",
                        **_ADAPTIVE)
    asked = []
    rule = EtaSchedule.leader
    monkeypatch.setattr(EtaSchedule, "leader",
                        lambda self, *args, **kw: asked.append(1) or rule(self, *args, **kw))
    compiled = 0
    for x, label in zip(records, y):
        ev = clf.__dict__.get("_events")
        before = len(asked)
        if ev is not None and ev.learn(clf, x, label, 1.0) is clf:
            compiled += 1
            assert len(asked) == before  # no Python rule at this event
            race = clf._race
            assert race.schedule.eta is None  # (before the choice at row 4,000)
            assert clf._state is race.leader
        else:  # a first event, a check of the race (the learner's Python takes them)
            clf.learn_one(x, label)
    assert compiled > 0.95 * len(y)
    _same_model(clf, PGSClassifier(n_bits=12, random_state=0, geometry="adaptive",
                                   **_ADAPTIVE).partial_fit(records, y, classes=[0, 1]))


def test_each_state_has_a_serial_no_later_state_takes():
    # an event keeps each state's pass from event to event (`_pgs.RowPasses`), knowing the
    # state again by its address and its serial: a state made where a freed one was (a
    # run the race let go, then a fork) is another
    from onlinepgs._core import PGSState

    first = PGSState(n_features=4)
    serial = first.serial
    del first
    later = [PGSState(n_features=4) for _ in range(3)]
    serials = [st.serial for st in later] + [later[0].with_sigma(1e-3).serial,
                                             pickle.loads(pickle.dumps(later[1])).serial]
    assert len(set(serials)) == len(serials) and min(serials) > serial


def test_a_parameter_set_between_events_is_honoured_as_partial_fit_honours_it():
    # setting a parameter drops the event path (`EventLearner.__setattr__`): class weights
    # set mid-stream weigh the next events as partial_fit of each record weighs them
    records, y = _events(160, seed=17)
    one = PGSClassifier(n_bits=12, sigma=1e-3, classes=[0, 1])
    each = PGSClassifier(n_bits=12, sigma=1e-3, classes=[0, 1])
    for k, (x, label) in enumerate(zip(records, y)):
        if k == 80:
            one.set_params(class_weight={0: 3.0})
            each.set_params(class_weight={0: 3.0})
        one.predict_proba_one(x)
        one.learn_one(x, label)
        each.partial_fit([x], [label])
    _same_model(one, each)
