"""One event at a time: ``learn_one``, ``predict_one``, ``predict_proba_one`` (River's names).

A service that scores each event, then learns from its outcome, calls the model once an
event with a small dict of features. These methods are `partial_fit` and `predict` on
that one record, the same algorithm bit for bit, without their per-call work: the dict is
hashed into the model's columns in compiled code (`onlinepgs._core._event.EventRow`, the
records' own rules and row builder), the core steps on the one row, and the scores are
read from the solver state at the row's coordinates, so an event costs O(nnz) whatever
the model's width (docs/design/estimators.md, "One event at a time").

The compiled path needs hashing (``n_bits``) and ``batch_size=1``; a model whose width the
data decides (``n_bits=None``), ``class_weight``, a model loaded without its solver state
and a model whose last step diverged take `partial_fit` / `predict` on the one record (the
same results, at their cost). The first event of a fresh estimator starts the model
through `partial_fit`, with the classes of the ``classes`` parameter; without it, a
classifier learns its classes as labels arrive (`onlinepgs._learned_classes`).
"""
import math
import operator

import numpy as np

from onlinepgs import _race
from onlinepgs._checks import beyond_doubles, check_weight_sum, unique
from onlinepgs._row_errors import RowError

__all__ = ["EventLearner", "EventClassifier"]

# Each learner's event path (`onlinepgs._core._event.EventPath`) is its attribute
# "_events", made at its first event: not a fitted attribute (model files do not keep
# it), and a copy or an unpickled learner gets None in its place (`EventPath.__reduce__`),
# then makes its own.

_MULTINOMIAL = 1  # onlinepgs._core._event.EventRow.proba's code of the softmax


def _make_path(est, params, classes):
    """The compiled event path (`onlinepgs._core._event.EventPath`) of `est`'s installed
    model: its row buffers, label codes, fitted parameters to compare with and locks.
    Valid while the estimator's fitted parameters and classes are the objects it was made
    for (a `partial_fit` or `fit` installs new ones: the next event makes it again)."""
    from onlinepgs._core._event import EventPath, EventRow
    from onlinepgs.features import _letters, parse_interactions

    ev = EventPath()
    ev.params, ev.classes = params, classes
    names = tuple(params)
    # the parameters the state depends on, as partial_fit compares them each call: here
    # once, as the path is made (a learner drops its path when a parameter is set,
    # `EventLearner.__setattr__`)
    ev.names, ev.read_params = names, operator.itemgetter(*names)
    ev.fitted = tuple(params[n] for n in names)
    ev.params_ok = ev.read_params(est.__dict__) == ev.fitted
    ev.hold_locks(est._lock("_train_lock"), est._lock("_state_lock"))
    # the row by the fitted hashing (the model's columns), whatever was set since
    letters, orders = _letters(parse_interactions(params.get("interactions")))
    ev.row = EventRow(int(params["n_bits"]), int(params["hash_seed"]), letters, orders)
    # a learner over the columns its rows reach (onlinepgs._columns_seen): the row
    # given as slots of its map
    ev.row.columns = est.__dict__.get("_columns")
    ev.n_cols = int(est.n_features_in_)
    ev.classifier = est._classifier
    # partial_fit's row power sums (`_row_power_sums`): NumPy's where it passes them
    probe = _one_row_matrix(np.ones(1), np.zeros(1, dtype=np.int32), 2)
    ev.numpy_powers = est._row_power_sums(probe) is not None
    ev.codes = ev.labels = None
    ev.mc = 0
    if classes is not None:
        labels = classes.tolist()
        ev.labels = labels
        if len(labels) <= 2:  # the binary encoding: +-1 (onlinepgs._checks.binary_targets)
            ev.codes = {labels[0]: -1.0, labels[-1]: 1.0} if len(labels) == 2 else {
                labels[0]: -1.0}  # one class: onlinepgs._learned_classes
        else:
            ev.codes = {label: float(k) for k, label in enumerate(labels)}
        ev.mc = _MULTINOMIAL if est._fitted_multi_class() == "multinomial" else 0
    return ev


def _one_row_matrix(data, indices, width):
    """The one-row CSR matrix of an event (error paths and NumPy's row power sums)."""
    from onlinepgs._csr import csr

    return csr(np.asarray(data, dtype=np.float64), np.asarray(indices),
               np.array([0, len(data)], dtype=np.int64), (1, width), canonical=True)


def _label_of(row, state, ev):
    """predict_one's read of the row: the label (a classifier), the score (a regressor)."""
    if ev.labels is not None:
        return row.label(state, ev.labels)
    score = row.scores(state)
    return score if math.isfinite(score) else None


def _proba_of(row, state, ev):
    return row.proba(state, ev.labels, ev.mc)


def _reworded(exc, method):
    """A records' error about row 0 of a call, in the words of one event."""
    if isinstance(exc, RowError):
        return ValueError(f"{method}: {exc.worded(lambda row: 'x')}")
    return ValueError(f"{method}: {exc}")


class EventLearner:
    """The per-event API, mixed into the PGS learners (see the module docstring), whose
    ``_diverged_error`` is the error a diverging step raises (PGSDivergedError)."""

    _diverged_error = FloatingPointError
    # the event path (`_make_path`) once made, in the instance's dict: an attribute read
    # (this default where there is none) is an event's cheapest way to it
    _events = None

    def __setattr__(self, name, value):
        # a parameter set (set_params, or assigned) drops the event path, which compared
        # the parameters the state depends on when it was made (`_make_path`): the next
        # event makes it again. Fitted (name_) and private (_name) attributes keep it.
        if name[:1] != "_" and name[-1:] != "_":
            self.__dict__.pop("_events", None)
        super().__setattr__(name, value)

    # ---- the path ---------------------------------------------------------------------
    def _event_path(self):
        """The estimator's `EventPath` for its installed model, or None where an event takes
        `partial_fit` / `predict` on its one record (see the module docstring)."""
        d = self.__dict__
        ev = d.get("_events")
        if ev is not None and ev.current(self):
            return ev
        if ("_state_params" not in d or self.n_bits is None
                or d["_state_params"].get("n_bits") is None or "_saved_stats" in d
                or int(self.batch_size) != 1
                or getattr(self, "class_weight", None) is not None):
            return None
        ev = _make_path(self, d["_state_params"], d.get("classes_"))
        d["_events"] = ev
        return ev

    def _read_event(self, ev, x, method):
        """Make the dict x the row of `ev` (under the state lock); errors name x's key
        and value."""
        if not isinstance(x, dict):
            raise TypeError(f"{method}: x must be a dict {{feature: value}}, got "
                            f"{type(x).__name__}")
        try:
            ev.row.read(x)
        except (RowError, ValueError) as exc:
            raise _reworded(exc, method) from None
        if not ev.row.n_entries:
            raise ValueError(f"{method}: x has no feature (an empty dict, or every value "
                             "None)")
        if not ev.row.finite():
            raise ValueError(f"{method}: x's interactions (interactions="
                             f"{list(self._interactions())}) make a value beyond the double "
                             "range: a product of its features' values overflows")

    def _check_event_x(self, x, method):
        """x checked as the generic path reads it (the errors of one event)."""
        if not isinstance(x, dict):
            raise TypeError(f"{method}: x must be a dict {{feature: value}}, got "
                            f"{type(x).__name__}")
        try:
            X = self._as_matrix([x], fitted="_state" in self.__dict__)
        except (RowError, ValueError) as exc:
            raise _reworded(exc, method) from None
        if X.nnz == 0 and not any(v is not None for v in x.values()):
            raise ValueError(f"{method}: x has no feature (an empty dict, or every value "
                             "None)")
        return X

    def _event_target(self, ev_codes, y, method):
        """The core's target of label (or value) y."""
        if ev_codes is not None:
            try:
                code = ev_codes.get(y)
            except TypeError:  # unhashable
                code = None
            if code is None:
                raise ValueError(f"{method}: label {y!r} is not one of the classes "
                                 f"{self.classes_.tolist()}")
            return code
        try:
            value = float(y)
        except OverflowError:  # an int beyond the double range
            raise ValueError(f"{method}: y must be finite, got "
                             f"{beyond_doubles(y)}") from None
        except (TypeError, ValueError):
            raise ValueError(f"{method}: y must be a number, got {y!r}") from None
        if not math.isfinite(value):
            raise ValueError(f"{method}: y must be finite, got {y!r}")
        return value

    @staticmethod
    def _event_weight(w, method):
        try:
            weight = float(w)
        except OverflowError:  # an int beyond the double range
            raise ValueError(f"{method}: w must be finite and >= 0, got "
                             f"{beyond_doubles(w)}") from None
        except (TypeError, ValueError):
            raise ValueError(f"{method}: w must be a number, got {w!r}") from None
        if not (math.isfinite(weight) and weight >= 0.0):
            raise ValueError(f"{method}: w must be finite and >= 0, got {w!r}")
        return weight

    # ---- learning -----------------------------------------------------------------------
    def learn_one(self, x, y, w=1.0):
        """Learn from one event: `partial_fit` on the record ``x`` with label (or target)
        ``y`` and sample weight ``w``, the same step bit for bit.

        A sequence of ``learn_one`` calls ends with the model (``coef_``,
        ``intercept_``, predictions) of one `partial_fit` over the same records, the
        sigma race of ``sigma="auto"`` included (each event is a row of the race: its
        runs all train on it, and its checks fall on the same rows). Where a state
        overflows, partial_fit's guard looks once a call: learn_one is then partial_fit
        of each record (it finds the overflow at the event). With ``n_bits``
        the event is hashed and trained in compiled code, at a cost that does not grow
        with the model's width (docs/design/estimators.md, "One event at a time").
        ``n_iter_`` counts each call as a `partial_fit` call.

        Parameters
        ----------
        x : dict
            ``{feature: value}``: a str feature is hashed by its name (a str value is a
            category, ``"user": "ann"`` the feature ``user=ann``; a nested dict a
            namespace, crossed by ``interactions``), an int feature is a column index,
            as the records of `partial_fit` and the JSON-lines reader take them. A None
            value is a missing field.
        y : label or float
            A classifier's label: one of its ``classes`` parameter when given;
            without it, any label (a number, a str or a bool, orderable with the
            others): one not seen before is a new class (see Notes). A regressor's
            target.
        w : float >= 0, default=1.0
            The event's sample weight.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            x has no feature, a value that is not a number (or a str), not finite, a
            label outside the classes, a weight < 0: the message names the key and the
            value, and the model is as it was. PGSDivergedError as `partial_fit`.
            A third class of a coupled ``multi_class`` without the ``classes``
            parameter (its loss couples every class in each row's loss).

        Notes
        -----
        Classes learned as labels arrive (no ``classes`` parameter; ``classes_`` is
        sorted, as `partial_fit`'s): the first label alone is the model's one class
        (``predict_one`` gives it, ``predict_proba_one`` gives it 1.0), and every event
        until the second label is learned as a row of it; with the second label the
        model is the binary model of the two, bit for bit the model of
        ``classes=[a, b]`` declared from the start. A third class and on
        (one-vs-rest): each old class keeps its problem, and the new class's problem
        starts at zero at its first event, as River's ``OneVsRestClassifier`` starts a
        fresh binary model, on the model's clock: it is the problem of a binary learner
        of that class against the rest trained on every event, the events before its
        first weighing 0 (its step size and averages count them; the ball of
        ``radius="auto"`` is the model's). The earlier events are not replayed: they are
        not negatives of the new class. Adding a class costs O(width K) once (the
        state's problems regrouped) and a replay of the ``t`` steps' scalars in the
        core (about 1 s per million events seen, each run of a race), and the statistics of ``online_stats_`` add up
        each event's loss under the classes of its time. ``multi_class="multinomial"``
        and ``"crammer_singer"`` learn two classes this way and refuse a third.
        docs/design/estimators.md, "Classes learned as labels arrive".

        Examples
        --------
        >>> from onlinepgs import PGSClassifier
        >>> clf = PGSClassifier(n_bits=18, sigma=1e-2, classes=["ham", "spam"])
        >>> for _ in range(20):
        ...     _ = clf.learn_one({"word": "cheap", "len": 0.2}, "spam")
        ...     _ = clf.learn_one({"word": "hello", "len": 0.9}, "ham")
        >>> clf.predict_one({"word": "cheap", "len": 0.3})
        'spam'

        Without ``classes``, the labels seen are the classes:

        >>> clf = PGSClassifier(n_bits=18, sigma=1e-2)
        >>> _ = clf.learn_one({"word": "hello"}, "ham")
        >>> clf.classes_.tolist(), clf.predict_one({"word": "cheap"})
        (['ham'], 'ham')
        >>> for _ in range(20):
        ...     _ = clf.learn_one({"word": "cheap"}, "spam")
        ...     _ = clf.learn_one({"word": "hello"}, "ham")
        >>> _ = clf.learn_one({"word": "meeting"}, "work")
        >>> clf.classes_.tolist(), clf.predict_one({"word": "cheap"})
        (['ham', 'spam', 'work'], 'spam')
        """
        ev = self._events
        if ev is not None:
            done = ev.learn(self, x, y, w)
            if done is not NotImplemented:
                return done
        if self._classifier and getattr(self, "classes", None) is None:
            if self._learn_new_label(x, y, w):
                return self
        ev = self._event_path()
        if ev is None:
            return self._learn_one_generic(x, y, w)
        done = ev.learn(self, x, y, w)
        if done is not NotImplemented:
            return done
        # the learner's Python: a race of sigma, NumPy's powers, an error to word
        with ev.train_lock:
            if ev.read_params(self.__dict__) != ev.fitted:
                self._check_state_params()  # names the changed parameters
            target = self._event_target(ev.codes, y, "learn_one")
            weight = w if type(w) is float and 0.0 <= w < math.inf else self._event_weight(
                w, "learn_one")
            with ev.state_lock:
                if not ev.current(self):  # a call in another thread installed a model
                    return self.learn_one(x, y, w)
                self._read_event(ev, x, "learn_one")
                state = self._state
                if not math.isfinite(state.sum_weight + weight):
                    check_weight_sum(np.array([weight]), state.sum_weight)
                self._event_step(ev, self.__dict__.get("_race"), target, weight)
        return self

    def _learn_new_label(self, x, y, w):
        """Classes learned as labels arrive (no ``classes`` parameter,
        onlinepgs._learned_classes): a label not yet seen regroups the model's problems
        for the classes with it (the first starts a model of one class, which learns the
        event: True); then the event is learned as any (False). The event and the label
        are checked before anything changes; one thread at a time adds a class."""
        from onlinepgs import _learned_classes

        d = self.__dict__
        multi_class = getattr(self, "multi_class", "ovr")
        if "_state" in d and _learned_classes.new_classes(
                self.classes_.tolist(), y, multi_class) is None:
            return False  # (a label seen: no lock taken)
        with self._lock("_train_lock"):
            first = "_state" not in d
            grown = _learned_classes.new_classes(
                None if first else self.classes_.tolist(), y, multi_class)
            if grown is None or "_saved_stats" in d:
                # another thread added it meanwhile; a weights-only file's model:
                # partial_fit says why it cannot learn
                return False
            if getattr(self, "class_weight", None) is not None:
                raise ValueError(f"learn_one: label {y!r} is not one of the classes "
                                 f"{[] if first else self.classes_.tolist()}, and "
                                 "class_weight needs every class up front: set the classes "
                                 "parameter")
            self._check_event_x(x, "learn_one")
            weight = self._event_weight(w, "learn_one")
            if first:
                if int(self.batch_size) != 1:
                    raise ValueError(f"learn_one takes one event a step: batch_size=1 "
                                     f"(got {self.batch_size!r}); mini-batches are "
                                     "partial_fit's")
                self._partial_fit([x], [y], [weight], classes=grown, one_class=True)
                return True
            with self._lock("_state_lock"):
                old, race = self.classes_, d.get("_race")
                if race is None:
                    state = _learned_classes.regrouped(self._state, old, grown)
                else:
                    race.states = {rid: _learned_classes.regrouped(st, old, grown)
                                   for rid, st in race.states.items()}
                    _learned_classes.set_problems(race.schedule, len(grown))
                    state = race.leader
                self._install(state, self.n_iter_, race=race, classes_=grown)
        return False

    def _learn_one_generic(self, x, y, w):
        """`partial_fit` on the one record (see the module docstring)."""
        if int(self.batch_size) != 1:
            raise ValueError(f"learn_one takes one event a step: batch_size=1 (got "
                             f"{self.batch_size!r}); mini-batches are partial_fit's")
        first = "_state" not in self.__dict__
        classes = None
        if self._classifier and first:
            classes = self.classes  # (without it, `_learn_new_label` started the model)
        self._check_event_x(x, "learn_one")
        weight = self._event_weight(w, "learn_one")
        if self._classifier and not first:
            self._event_target({label: 0 for label in self.classes_.tolist()}, y,
                               "learn_one")
        elif not self._classifier:
            self._event_target(None, y, "learn_one")
        elif unique(np.asarray(classes)).tolist().count(y) == 0:
            raise ValueError(f"learn_one: label {y!r} is not one of the classes "
                             f"{list(classes)}")
        fit = {"classes": classes} if classes is not None else {}
        self._partial_fit([x], [y], [weight], **fit)
        return self

    def _event_step(self, ev, race, target, weight):
        """The row of `ev` as one step of the installed model or of its race, then the
        model installed as partial_fit installs it (under both locks)."""
        state = self._state
        diverged = False
        try:
            if race is None:
                self._step_one(ev, state, target, weight)
            else:
                self._race_one(ev, race, target, weight)
        except self._diverged_error:
            diverged = True
            raise
        finally:
            self._install_after(state, race, False, diverged)

    def _event_unsound(self, ev, state, weight):
        """After a step that diverged or left `state` not finite: the learners' own
        error (`PGSLearner._after_run`), the model installed as partial_fit leaves it."""
        try:
            self._after_run(state, _one_row_matrix(ev.row.data, ev.row.indices, ev.n_cols),
                            np.array([weight]))
        except self._diverged_error:
            self._install_after(state, None, False, True)
            raise

    def _event_race_unsound(self, ev, race, weight):
        """After the race's runs stepped on the event (`EventPath`), some diverged or are
        not finite: each such run dropped as `SigmaRace.advance` and `check` drop them
        (the learners' own errors, `_after_run`, `_check_finite`); if none is left, the
        last error raised with the model installed as partial_fit leaves it."""
        X = _one_row_matrix(ev.row.data, ev.row.indices, ev.n_cols)
        sw = np.array([weight])

        def stepped(state):  # the step was taken: its divergence, as `_run` reports it
            if state.diverged:
                self._after_run(state, X, sw, guard=False)

        def check(state):
            if not ev.row.state_finite(state):
                self._check_finite(state, X, sw)
        try:
            race._each(stepped, (self._diverged_error,), race.n_rows, [])
            race._each(check, (self._diverged_error,), race.n_rows, [])
        except _race.RaceDivergedError as exc:
            self._install_after(None, race, False, True)  # the last leader goes on alone
            raise exc.errors[-1] from None

    def _step_one(self, ev, state, target, weight, guard=True):
        """One step of `state` on the event's row; PGSDivergedError as `_run` raises it."""
        row = ev.row
        power_sum = None
        if ev.numpy_powers:
            X = _one_row_matrix(row.data, row.indices, ev.n_cols)
            power_sum = float(self._row_power_sums(X)[0])
        row.learn(state, ev.n_cols, target, weight, ev.classifier, power_sum)
        if state.diverged or (guard and not row.state_finite(state)):
            # the learners' own errors (rare: no need for speed)
            self._after_run(state, _one_row_matrix(row.data, row.indices, ev.n_cols),
                            np.array([weight]), guard)

    def _race_one(self, ev, race, target, weight):
        """The event as one row of the sigma race (`PGSLearner._race_pass` on one row)."""
        def train(state, start, stop):
            self._step_one(ev, state, target, weight, guard=False)

        def check(state):
            if not ev.row.state_finite(state):
                self._check_finite(state, _one_row_matrix(ev.row.data, ev.row.indices,
                                                          ev.n_cols), np.array([weight]))
        try:
            race.advance(1, train, diverged=(self._diverged_error,))
            race.check(check, diverged=(self._diverged_error,))
        except _race.RaceDivergedError as exc:
            raise exc.errors[-1] from None

    # ---- prediction ---------------------------------------------------------------------
    def _event_read(self, x, method, read):
        """``read(row, state, ev)`` of the event under the state lock, or None where the
        generic path predicts (no compiled path, a model whose last step diverged, a
        score that is not finite: the model then says whether its weights are usable)."""
        ev = self._event_path()
        if ev is None:
            return None
        with ev.state_lock:
            if not ev.current(self) or "diverged" in self._cache:
                return None
            self._read_event(ev, x, method)
            return read(ev.row, self._state, ev)

    def predict_one(self, x):
        """The prediction for one event: ``predict`` of the record ``x``, bit for bit.

        A classifier gives the label (a Python value: ``classes_``'s item), a regressor
        the target (a float). Read from the solver state at the event's coordinates,
        O(nnz) whatever the model's width. Before any training: a classifier's first
        class of its ``classes`` parameter (the zero model; None without it, as River's
        untrained models give), a regressor's 0.0.

        Parameters
        ----------
        x : dict
            As `learn_one` takes it.

        Returns
        -------
        label or float

        Examples
        --------
        >>> from onlinepgs import PGSRegressor
        >>> reg = PGSRegressor(n_bits=18, sigma=1e-2)
        >>> for k in range(200):
        ...     _ = reg.learn_one({"size": 1.0, "city": "paris"}, 3.0)
        >>> round(reg.predict_one({"size": 1.0, "city": "paris"}), 1)  # sigma shrinks it
        2.6
        """
        ev = self._events
        if ev is not None:  # (a path is current, or says NotImplemented)
            out = ev.label(self, x)
            if out is not NotImplemented:
                return out
        if "_state" not in self.__dict__:
            self._check_event_x(x, "predict_one")
            if not self._classifier:
                return 0.0
            classes = getattr(self, "classes", None)
            return None if classes is None else unique(np.asarray(classes)).tolist()[0]
        ev = self.__dict__.get("_events") or self._event_path()
        out = NotImplemented if ev is None else ev.label(self, x)
        if out is NotImplemented:
            out = self._event_read(x, "predict_one", _label_of)
        if out is None:
            self._check_event_x(x, "predict_one")
            return self.predict([x])[0].item()
        return out



class EventClassifier:
    """``predict_proba_one``, a classifier's (mixed in before `EventLearner`)."""

    def predict_proba_one(self, x):
        """Class probabilities for one event (logistic loss): ``predict_proba`` of the
        record ``x`` as a dict ``{class: probability}``.

        The probabilities of `predict_proba` (the sigmoid for two classes, the
        normalised one-vs-rest sigmoids or the softmax for more), computed from the
        scores of the solver state at the event's coordinates, O(nnz) whatever the
        model's width; equal to `predict_proba`'s to rounding (C's exp, not NumPy's:
        the last bit may differ). Before any training: each class of the ``classes``
        parameter 1 / K (the zero model), {} without it (River's untrained models).

        Parameters
        ----------
        x : dict
            As `learn_one` takes it.

        Returns
        -------
        dict

        Examples
        --------
        >>> from onlinepgs import PGSClassifier
        >>> clf = PGSClassifier(n_bits=18, sigma=1e-2, classes=[0, 1])
        >>> clf.predict_proba_one({"word": "cheap"})
        {0: 0.5, 1: 0.5}
        >>> for _ in range(50):
        ...     _ = clf.learn_one({"word": "cheap"}, 1)
        ...     _ = clf.learn_one({"word": "hello"}, 0)
        >>> clf.predict_proba_one({"word": "cheap"})[1] > 0.9
        True
        """
        if self.loss != "logistic":
            raise AttributeError(f"predict_proba_one gives the probabilities of the "
                                 f"logistic loss, not of loss={self.loss!r}")
        ev = self._events
        if ev is not None:  # (a path is current, or says NotImplemented)
            out = ev.proba(self, x)
            if out is not NotImplemented:
                return out
        if "_state" not in self.__dict__:
            self._check_event_x(x, "predict_proba_one")
            classes = getattr(self, "classes", None)
            if classes is None:
                return {}
            labels = unique(np.asarray(classes)).tolist()
            return {label: 1.0 / len(labels) for label in labels}
        ev = self.__dict__.get("_events") or self._event_path()
        out = NotImplemented if ev is None else ev.proba(self, x)
        if out is NotImplemented:
            out = self._event_read(x, "predict_proba_one", _proba_of)
        if out is None:
            self._check_event_x(x, "predict_proba_one")
            return dict(zip(self.classes_.tolist(), self.predict_proba([x])[0].tolist()))
        return out
