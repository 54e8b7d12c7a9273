"""THE rules about options: every range, every combination that cannot work, and what a
solver, a loss, Dask, the streaming engine or the command refuses, in one place.

Every entry point asks this module before it reads a byte of data:

* the learners and scikit-learn estimators (`onlinepgs._base`): ``fit`` and the first
  ``partial_fit`` / ``fit_stream`` call check their parameters here (`check_learner`:
  the ranges, `check_ranges`, then the rules, `learner_rules`) before touching X;
  the scikit-learn layer checks the same ranges through ``_parameter_constraints``
  (`onlinepgs.estimators.sklearn_constraints` translates the tables below);
* the compiled core's states (``PGSState``, ``SDCAProblem``, the merge of Dask lanes)
  call the same rules on their configuration (`check_pgs_state`, `check_sdca_problem`,
  `dask_rules`): a state is never built from options these rules refuse;
* `onlinepgs.dask` (`check_dask_run`: its run options, then `dask_rules` on the
  estimator's) and the streaming engine (`check_stream_run`);
* the command (`check_command`, right after parsing; `check_train_model` once ``-i``'s
  model is loaded): its flags are parsed into values by `onlinepgs.cli.parser`, which
  checks nothing else.

A refusal is an `OptionError` (a ValueError; a value outside its range is an
`InvalidParameterError`, also a TypeError, as scikit-learn's). It is worded once, as a
template, and said in the words of the caller (`Words`): Python parameters for the
estimators, Dask and the core (``l1=0.1 with p=1.5 < 2 ...``), the command's flags for the
command (``argument --iterate: --l1 0.1 with --p 1.5 < 2 ...``): the same sentence.

Imports nothing but the standard library (numpy's types are recognised when numpy is
already loaded): the command imports it at start-up, before numpy.

Examples
--------
>>> from onlinepgs._options import FLAGS, OptionError, Words, check_learner
>>> params = {"loss": "logistic", "l1": 0.1, "p": 1.5, "iterate": "average"}
>>> try:
...     check_learner(params, "pgs", "classifier", Words("PGSClassifier"))
... except OptionError as exc:
...     print(exc)
...     print(exc.worded(FLAGS))
PGSClassifier: l1=0.1 with p=1.5 < 2 keeps only the last iterate, not iterate='average'; use iterate='last' (or p=2)
argument --iterate: --l1 0.1 with --p 1.5 < 2 keeps only the last iterate, not --iterate average; use --iterate last (or --p 2)
"""
import math
import numbers
import re
import sys

__all__ = ["OptionError", "InvalidParameterError", "Words", "PYTHON", "FLAGS",
           "CLASSIFICATION_LOSSES", "REGRESSION_LOSSES", "ITERATES", "MULTI_CLASS_LOSS",
           "SDCA_ORDERS", "L1_GEOMETRIES", "MODEL_OPTIONS", "CSV_OPTIONS", "MAX_Q_MINUS_1",
           "check_params", "describe", "learner_constraints", "check_ranges",
           "check_finite", "learner_rules", "check_learner", "check_pgs_state", "check_sdca_problem",
           "dask_rules", "settle_auto", "check_dask_run", "check_stream_run", "parse_interactions",
           "bad_class_weight", "check_command", "check_train_model", "learner_params"]

# ---- names --------------------------------------------------------------------------------
# The compiled core's (onlinepgs._core; tests/test_cli_imports.py checks they are the same),
# written out: the core imports numpy.
CLASSIFICATION_LOSSES = ("hinge", "logistic", "squared_hinge", "smooth_hinge")
REGRESSION_LOSSES = ("squared", "absolute", "huber", "epsilon_insensitive")
ITERATES = ("last", "average", "weighted", "weighted2", "random")
# multi_class and the loss each coupled model needs ("ovr": any)
MULTI_CLASS_LOSS = {"ovr": None, "multinomial": "logistic", "crammer_singer": "hinge"}
SDCA_ORDERS = ("cyclic", "permutation", "random")
L1_GEOMETRIES = ("auto", "l2", "lq")
# Past this q - 1 = 1 / (p - 1) PGS's weights are not worth computing: phi =
# (|lambda_j| / M)^(q-1) turns each rounding of lambda (a relative 1.1e-16) into (q - 1)
# times that in the weights, over 1e-9 (the core's window of M narrows alike).
MAX_Q_MINUS_1 = 8388608.0  # 2^23, p - 1 = 1.19e-7


# ---- errors -------------------------------------------------------------------------------
class OptionError(ValueError):
    """An option refused by a rule, before any data: ``option`` (the parameter blamed, by
    its Python name) and the message, said in the caller's words (`worded`); ``str()``
    is the message in the words it was raised with."""

    def __init__(self, option, pieces, values, words, range_error=False):
        self.option, self.pieces, self.values = option, tuple(pieces), dict(values)
        self.range_error = range_error
        super().__init__(self.worded(words))

    def worded(self, words):
        """The message in `words` (`PYTHON`, `FLAGS`, or a `Words` of an owner)."""
        return words.say(self)


class InvalidParameterError(OptionError, TypeError):
    """A parameter outside its range or of the wrong kind (scikit-learn's exception, by
    its bases and message: ``The 'sigma' parameter of PGSClassifier must be ...``)."""


# ---- words: Python parameters or the command's flags ---------------------------------------
# the model options of `train` (argparse names) and the learner parameter each sets
MODEL_OPTIONS = {"loss": "loss", "p": "p", "sigma": "sigma", "l1": "l1",
                 "l1_geometry": "l1_geometry", "radius": "radius",
                 "batch_size": "batch_size", "iterate": "iterate",
                 "no_intercept": "fit_intercept", "intercept_scaling": "intercept_scaling",
                 "epsilon": "epsilon", "bits": "n_bits", "hash_seed": "hash_seed",
                 "random_seed": "random_state", "forget": "forget",
                 "class_weight": "class_weight", "multi_class": "multi_class",
                 "geometry": "geometry", "eta": "eta"}

# a parameter's (or a run option's) flag on the command line
_FLAG = {**{param: "--" + option.replace("_", "-") for option, param in MODEL_OPTIONS.items()},
         "n_bits": "--bits", "interactions": "-q/--interactions", "solver": "--solver",
         "max_model_bytes": "--max-model-bytes", "n_lanes": "--lanes", "n_jobs": "--jobs",
         "header": "--no-header",
         "checkpoint_path": "-o", "initial": "-i", "quadratic": "-q/--quadratic"}

# what the words of a message name, in each vocabulary
_TERMS = {
    "dask": ("onlinepgs.dask", "--scheduler"),
    "one_process": ("with fit / partial_fit in one process", "without --scheduler"),
    "sdca": ("SDCA", "--solver sdca"),
    "weights_instead": ("give the weights as sample_weight", "train without --scheduler"),
    "output": ("checkpoint_path", "-o MODEL"),
}


def _number(value):
    """A float as short as it reads back: 2 (not 2.0), 0.1, 1.00000001."""
    short = format(value, "g")
    return short if float(short) == value else repr(float(value))


class Words:
    """How a message names options (see the module docstring).

    ``Words(owner)``: Python parameters, ``p=1.5``, the range errors in scikit-learn's
    words about `owner` (``The 'p' parameter of PGSClassifier ...``; no owner: ``p must
    be ...``), rule errors prefixed ``owner: ``. ``Words(flags=True)``: the command's
    flags, ``--p 1.5``, each error ``argument --p: ...`` (argparse's way); ``model``: the
    ``-i`` model file whose options are used where `given` (the flags given) lacks them
    (``the model's --l1 0.1``).
    """

    def __init__(self, owner=None, *, flags=False, given=None, model=None):
        self.owner, self.flags = owner, flags
        self.given, self.model = given, model

    def name(self, option):
        return _FLAG.get(option, "--" + option.replace("_", "-")) if self.flags else option

    def value(self, option, value):
        """`value` of `option` as the vocabulary writes it."""
        if not self.flags:
            if isinstance(value, float) and math.isfinite(value):
                return _number(value)
            return repr(value)
        if value is None:
            return "none"
        if option == "zero_based" and isinstance(value, bool):
            return "0" if value else "1"
        if isinstance(value, dict):
            return ",".join(f"{k}:{_number(float(v))}" for k, v in value.items())
        if isinstance(value, (list, tuple)):
            return ",".join(map(str, value))
        if isinstance(value, float) and math.isfinite(value):
            return _number(value)
        return str(value)

    def setting(self, option, value, suggested=False):
        """``option=value`` or ``--option value`` (the model's, with -i, unless a value
        `suggested` instead)."""
        if not self.flags:
            return f"{option}={self.value(option, value)}"
        if option == "fit_intercept":
            return "--no-intercept" if not value else "an intercept (no --no-intercept)"
        text = f"{self.name(option).split('/')[-1]} {self.value(option, value)}"
        if suggested or option in (self.given or ()):
            return text
        if self.model is not None:
            return f"the model's {text}"
        # a model option the user did not type is the default: say so
        return text if self.given is None or option in _RUN else f"the default {text}"

    def subject(self, option):
        """The subject of a range error."""
        if self.flags:
            return f"argument {self.name(option)}"
        if self.owner is None:
            return option
        return f"The {option!r} parameter of {self.owner}"

    def term(self, term):
        return _TERMS[term][1 if self.flags else 0]

    def say(self, error):
        """The message of `error` in these words."""
        pieces = list(error.pieces)
        blamed = error.option
        if error.range_error:
            prefix = ""
        elif self.flags:
            given = self.model is None or blamed in (self.given or ()) or blamed in _RUN
            flag = self.name(blamed) if given else f"-i {self.model}"
            prefix = f"argument {flag}: "
            # "argument --audit: needs -o MODEL", not "argument --audit: --audit needs ..."
            if (given and len(pieces) > 1 and pieces[0] == ("name", blamed)
                    and isinstance(pieces[1], str)):
                rest = pieces[1].lstrip(" ")
                pieces = [rest[3:] if rest.startswith("is ") else rest, *pieces[2:]]
        else:
            prefix = f"{self.owner}: " if self.owner else ""
        out = []
        for piece in pieces:
            if isinstance(piece, str):
                out.append(piece)
                continue
            kind, option, *value = piece
            if kind == "setting":
                out.append(self.setting(option, value[0], suggested=True) if value else
                           self.setting(option, error.values.get(option)))
            elif kind == "name":
                out.append(self.name(option))
            elif kind == "subject":
                out.append(self.subject(option))
            elif kind == "term":
                out.append(self.term(option))
            elif kind == "raw":
                out.append(repr(error.values.get(option)))
        return prefix + "".join(out)


PYTHON = Words()  # Python parameters, no owner (Dask's run options, the engine, the core)
FLAGS = Words(flags=True)  # the command's flags

# the command's run options (not model options): an error names them even with -i
_RUN = {"passes", "chunk_rows", "zero_based", "holdout_every", "checkpoint_every",
        "checkpoint_path", "n_lanes", "slice_rows", "max_model_bytes", "classes",
        "initial", "resume", "scheduler", "solver", "audit", "skip_bad_lines", "format",
        "no_state", "refine", "top", "connect_timeout", "kind", "quadratic",
        "interactions", "port", "port_file", "save_every", "learn", "max_line_bytes",
        "max_clients", "host", "jobs", "n_jobs"}

_FIELD = re.compile(r"\{([@%]?)([a-z_0-9]+)(?:=([^}]*))?\}")


def _pieces(template):
    """A rule's message: ``{l1}`` the setting of l1 (``l1=0.1`` / ``--l1 0.1``),
    ``{iterate=last}`` a setting to suggest, ``{@l1}`` the option's name, ``{%dask}`` a
    term of the vocabulary (`_TERMS`); the rest is text."""
    out, at = [], 0
    for match in _FIELD.finditer(template):
        if match.start() > at:
            out.append(template[at:match.start()])
        mark, name, suggested = match.groups()
        if mark == "@":
            out.append(("name", name))
        elif mark == "%":
            out.append(("term", name))
        elif suggested is not None:
            out.append(("setting", name, _literal(suggested)))
        else:
            out.append(("setting", name))
        at = match.end()
    out.append(template[at:])
    return [p for p in out if p != ""]


def _literal(text):
    """A suggested value of a template: a number, None, True, False, or a string."""
    if text in ("None", "True", "False"):
        return {"None": None, "True": True, "False": False}[text]
    try:
        number = float(text)
    except ValueError:
        return text
    return int(number) if number.is_integer() and "." not in text else number


def _refuse(option, template, values, words):
    return OptionError(option, _pieces(template), values, words)


# ---- the constraint language --------------------------------------------------------------
# A constraint is None, "boolean", "random_state", "verbose", "callable", a class (an
# instance of it), ("str", options) or (kind, low, high, closed) with kind "real" or "int",
# low/high None for unbounded and closed one of "left", "right", "both", "neither"
# (scikit-learn's Interval; `onlinepgs.estimators.sklearn_constraints` translates them).
def _numpy():
    """numpy if it is loaded (a numpy value means it is): this module never imports it."""
    return sys.modules.get("numpy")


def _is_bool(value):
    np = _numpy()
    return isinstance(value, bool) or (np is not None and isinstance(value, np.bool_))


def _in_interval(value, constraint):
    kind, low, high, closed = constraint
    wanted = numbers.Integral if kind == "int" else numbers.Real
    if not isinstance(value, wanted) or _is_bool(value):
        return False
    if kind == "real" and math.isnan(value):
        return False
    if low is not None and (value < low or (value == low and closed in ("right", "neither"))):
        return False
    if high is not None and (value > high or (value == high and closed in ("left", "neither"))):
        return False
    return True


def _satisfies(value, constraint):
    if constraint is None:
        return value is None
    if constraint == "boolean":
        return _is_bool(value)
    if constraint == "random_state":
        np = _numpy()
        return (value is None or (np is not None and isinstance(value, np.random.RandomState))
                or _in_interval(value, ("int", 0, 2**32 - 1, "both")))
    if constraint == "verbose":
        return _is_bool(value) or _in_interval(value, ("int", 0, None, "left"))
    if constraint == "callable":
        return callable(value)
    if isinstance(constraint, type):
        return isinstance(value, constraint)
    if constraint[0] == "str":
        return isinstance(value, str) and value in constraint[1]
    return _in_interval(value, constraint)


def _describe_one(constraint):
    if constraint is None:
        return "None"
    if constraint == "boolean":
        return "an instance of 'bool'"
    if constraint == "random_state":
        return "an int in the range [0, 4294967295], an instance of 'RandomState' or None"
    if constraint == "verbose":
        return "an int in the range [0, inf) or an instance of 'bool'"
    if constraint == "callable":
        return "a callable"
    if isinstance(constraint, type):
        return f"an instance of {constraint.__name__!r}"
    if constraint[0] == "str":
        return "a str among {" + ", ".join(repr(o) for o in sorted(constraint[1])) + "}"
    kind, low, high, closed = constraint
    left = "[" if closed in ("left", "both") and low is not None else "("
    right = "]" if closed in ("right", "both") and high is not None else ")"
    return (f"{'an int' if kind == 'int' else 'a float'} in the range {left}"
            f"{'-inf' if low is None else low}, {'inf' if high is None else high}{right}")


def describe(allowed):
    """What a value satisfying one of the constraints `allowed` is, in scikit-learn's
    words ("a float in the range (0, inf)")."""
    described = [_describe_one(c) for c in allowed]
    return (described[0] if len(described) == 1
            else ", ".join(described[:-1]) + " or " + described[-1])


def check_params(params, constraints, words):
    """Refuse the first parameter of `params` (a dict) outside its `constraints`: an
    `InvalidParameterError` in `words` (a `Words`, or an owner's name: scikit-learn's
    message, ``The 'sigma' parameter of PGSClassifier must be ...``). Parameters that
    `params` lacks are not checked."""
    if not isinstance(words, Words):
        words = Words(words)
    for name, allowed in constraints.items():
        if name not in params:
            continue
        value = params[name]
        if any(_satisfies(value, c) for c in allowed):
            continue
        described = describe(allowed)
        if words.flags:  # the command writes None as none
            described = described.replace("None", "none")
        raise InvalidParameterError(
            name, [("subject", name), f" must be {described}. Got ", ("raw", name),
                   " instead."], {name: value}, words, range_error=True)


# ---- the tables: each option's range ------------------------------------------------------
_POSITIVE = ("real", 0, None, "neither")
_AT_LEAST_0 = ("real", 0, None, "left")
_COUNT = ("int", 1, None, "left")
_BYTES = [None, _COUNT]  # max_model_bytes: a learner's parameter and a run option
_INTERACTIONS = [None, list, tuple]

_COMMON = {
    "p": [("real", 1, 2, "right")],
    "l1": [_AT_LEAST_0],
    "fit_intercept": ["boolean"],
    "intercept_scaling": [_POSITIVE],
    "max_epochs": [_COUNT],
    "random_state": ["random_state"],
    "epsilon": [_AT_LEAST_0],
    "n_bits": [None, ("int", 1, 30, "both")],
    "hash_seed": [("int", 0, 2**32 - 1, "both")],
    "interactions": _INTERACTIONS,
}
_PGS = {
    "p": _COMMON["p"],
    "sigma": [("str", {"auto"}), _POSITIVE],
    "l1": _COMMON["l1"],
    "radius": [None, ("str", {"auto"}), _POSITIVE],
    "batch_size": [_COUNT],
    "iterate": [("str", set(ITERATES) | {"auto"})],
    "fit_intercept": _COMMON["fit_intercept"],
    "intercept_scaling": _COMMON["intercept_scaling"],
    "max_epochs": _COMMON["max_epochs"],
    "tol": [None, _AT_LEAST_0],
    "n_iter_no_change": [_COUNT],
    "shuffle": ["boolean"],
    "random_state": _COMMON["random_state"],
    "epsilon": _COMMON["epsilon"],
    "n_bits": _COMMON["n_bits"],
    "hash_seed": _COMMON["hash_seed"],
    "max_model_bytes": _BYTES,
    "forget": [("real", 0, 1, "right")],
    "interactions": _INTERACTIONS,
    "geometry": [("str", {"global", "adaptive"})],
    "eta": [("str", {"auto"}), _POSITIVE],
    # -1: every core, -2: all but one, ... (joblib's and scikit-learn's convention)
    "n_jobs": [None, _COUNT, ("int", None, -1, "right")],
}
_SDCA = {
    "p": _COMMON["p"],
    "sigma": [_AT_LEAST_0],
    "l1": _COMMON["l1"],
    "fit_intercept": _COMMON["fit_intercept"],
    "intercept_scaling": _COMMON["intercept_scaling"],
    "tol": [_AT_LEAST_0],
    "max_epochs": _COMMON["max_epochs"],
    "order": [("str", set(SDCA_ORDERS))],
    "check_every": [_COUNT, ("str", {"auto"})],
    "shrinking": ["boolean"],
    "init": [("str", {"zero", "pgs"})],  # and a fitted PGS learner: onlinepgs.sdca adds it
    "random_state": _COMMON["random_state"],
    "epsilon": _COMMON["epsilon"],
    "verbose": ["verbose"],
    "n_bits": _COMMON["n_bits"],
    "hash_seed": _COMMON["hash_seed"],
    "interactions": _INTERACTIONS,
    "l1_geometry": [("str", set(L1_GEOMETRIES))],
}
CLASS_WEIGHT = [None, dict, ("str", {"balanced"})]
_TASKS = {
    "classifier": {"loss": [("str", set(CLASSIFICATION_LOSSES))],
                   "class_weight": CLASS_WEIGHT,
                   "multi_class": [("str", set(MULTI_CLASS_LOSS))]},
    "regressor": {"loss": [("str", set(REGRESSION_LOSSES))]},
    None: {"loss": [("str", set(CLASSIFICATION_LOSSES + REGRESSION_LOSSES))],
           "multi_class": [("str", set(MULTI_CLASS_LOSS))]},  # a core state: any loss
}
# the numeric parameters that must be finite (None and strings are other choices)
_FINITE = {"pgs": ("p", "sigma", "l1", "radius", "intercept_scaling", "epsilon", "tol",
                   "forget", "eta", "delta"),
           "sdca": ("p", "sigma", "l1", "intercept_scaling", "epsilon", "tol")}


def learner_constraints(solver, task):
    """The ranges of a learner's parameters: `solver` "pgs" or "sdca", `task`
    "classifier" or "regressor" (None: any loss, as the core's states take)."""
    return {**(_PGS if solver == "pgs" else _SDCA), **_TASKS[task]}


def check_ranges(params, solver, task, words, constraints=None):
    """Each parameter in its range (`learner_constraints`, or `constraints`), then
    finite (`check_finite`)."""
    check_params(params, constraints or learner_constraints(solver, task), words)
    check_finite(params, solver, words)


def check_finite(params, solver, words):
    """The numeric parameters finite (the ranges let inf through, as scikit-learn's)."""
    for name in _FINITE[solver]:
        value = params.get(name)
        if value is not None and not isinstance(value, str) and not math.isfinite(value):
            raise InvalidParameterError(name, [("subject", name), " must be finite, got ",
                                               ("raw", name), "."], params, words,
                                        range_error=True)


# ---- the rules: options that cannot work together -----------------------------------------
def parse_interactions(interactions):
    """The normalized interactions: a tuple of distinct strings of 2 or 3 letters.

    Parameters
    ----------
    interactions : None or iterable of str
        Each a string of namespace letters (``"ab"`` pairs, ``"abc"`` triples; ``":"``
        any letter, ``"::"`` all pairs). A letter is one ASCII character: the first byte
        of a namespace's name (``" "`` the default namespace).

    Returns
    -------
    tuple of str
        In the given order, a repeated interaction once (twice would count its
        features twice).

    Raises
    ------
    ValueError
        A bare string (a list of them is expected), an empty interaction, one of 1 or
        more than 3 letters, a non-ASCII or NUL letter.

    Examples
    --------
    >>> parse_interactions(["ab", "::", "ab", "abc"])
    ('ab', '::', 'abc')
    >>> parse_interactions(None)
    ()
    """
    if interactions is None:
        return ()
    if isinstance(interactions, (str, bytes)):
        raise ValueError(f"interactions must be a list of strings such as ['ab'], got the "
                         f"string {interactions!r}")
    out = []
    for item in interactions:
        if not isinstance(item, str):
            raise ValueError(f"interaction {item!r} is not a string of namespace letters")
        if not item:
            raise ValueError("an interaction is empty: give 2 or 3 namespace letters "
                             "such as 'ab'")
        bad = [c for c in item if ord(c) > 127 or c == "\0"]
        if bad:
            raise ValueError(f"interaction {item!r} has the letter {bad[0]!r}: a namespace "
                             "letter is one ASCII character (the first byte of its name)")
        if len(item) not in (2, 3):
            raise ValueError(f"interaction {item!r} has {len(item)} letter(s): pairs "
                             "('ab') and triples ('abc') are supported")
        if item not in out:
            out.append(item)
    return tuple(out)


def bad_class_weight(class_weight):
    """The first ``(label, weight)`` of a class_weight dict whose weight is not a finite
    number >= 0, else None (a dict's labels are checked against the classes later:
    they come with the data)."""
    if not isinstance(class_weight, dict):
        return None
    for label, weight in class_weight.items():
        if (_is_bool(weight) or not isinstance(weight, numbers.Real)
                or not (math.isfinite(weight) and weight >= 0)):
            return label, weight
    return None


def check_p(p, words=PYTHON):
    """Refuse a p at which PGS does not compute the weights accurately: q - 1 = 1 / (p - 1)
    beyond 2^23 (`MAX_Q_MINUS_1`), with the reason (p's range is its constraint's).

    Examples
    --------
    >>> from onlinepgs._options import check_p
    >>> check_p(1.0001)
    >>> check_p(1.00000001)
    Traceback (most recent call last):
    ...
    onlinepgs._options.OptionError: p=1.00000001 is too close to 1: ...
    """
    if 1.0 < p <= 2.0 and 1.0 / (p - 1.0) > MAX_Q_MINUS_1:
        raise _refuse("p", f"{{p}} is too close to 1: the weights take |lambda_j|^(q-1), "
                      f"q - 1 = 1/(p - 1) = {1.0 / (p - 1.0):.3g}, which turns each rounding "
                      "of lambda into a relative error over 1e-9 of the weights; use "
                      f"{{p={1.0 + 1.0 / MAX_Q_MINUS_1:.9g}}} or more", {"p": p}, words)


def settle_auto(params):
    """`params` with PGS's ``iterate="auto"`` and ``radius="auto"`` settled for the rest
    of them (a new dict; checked ranges assumed).

    iterate "auto": the t^2-weighted average ("weighted2") where the configuration runs
    one, else the last iterate: the adaptive geometry (at p = 2 its averages settle a
    sum at every touch, several times the last iterate's cost; one rule at every p),
    and l1 at p < 2 or with forgetting (exact with the last iterate only). radius "auto": the ball that holds
    the optimum, but R^n in the adaptive geometry at p = 2, whose per-coordinate steps
    have no O(nnz) form on a ball and need none (each is bounded by its stabilizer).

    >>> settle_auto({"geometry": "adaptive", "iterate": "auto", "radius": "auto"})
    {'geometry': 'adaptive', 'iterate': 'last', 'radius': None}
    >>> settle_auto({"iterate": "auto", "radius": "auto"})
    {'iterate': 'weighted2', 'radius': 'auto'}
    """
    out = dict(params)
    get = params.get
    adaptive, p = get("geometry", "global") == "adaptive", get("p", 2.0)
    if get("iterate") == "auto":
        only_last = adaptive or (get("l1", 0.0) and (p != 2 or get("forget", 1.0) < 1))
        out["iterate"] = "last" if only_last else "weighted2"
    if adaptive and p == 2 and get("radius") == "auto":
        out["radius"] = None
    return out


def learner_rules(params, solver, words, core=False):
    """The rules on a learner's parameters beyond their ranges (checked first, by
    `check_ranges`): what the solver, the loss, the iterate, l1 and multi_class refuse
    together, a learner's "auto" settled first (`settle_auto`; ``core``: a core state's
    configuration, which has no "auto" iterate and keeps its radius as given). `params`
    may lack some (a core state's configuration)."""
    if solver == "pgs" and not core:
        params = settle_auto(params)
    get = params.get
    if "interactions" in params:
        try:
            interactions = parse_interactions(get("interactions"))
        except ValueError as exc:
            raise OptionError("interactions", [("subject", "interactions"), f": {exc}"],
                              params, words, range_error=True) from None
        if interactions and "n_bits" in params and get("n_bits") is None:
            raise _refuse("interactions", "{@interactions} needs {@n_bits}: interactions "
                          "are hashed into 2**n_bits columns", params, words)
    bad = bad_class_weight(get("class_weight"))
    if bad is not None:
        raise _refuse("class_weight", f"the class {bad[0]!r} has the weight {bad[1]!r} in "
                      "{@class_weight}; a class weight is a finite number >= 0",
                      params, words)
    multi_class = get("multi_class", "ovr")
    wanted = MULTI_CLASS_LOSS.get(multi_class)
    if wanted is not None and get("loss", wanted) != wanted:
        raise _refuse("multi_class", f"{{multi_class}} needs {{loss={wanted}}}, got {{loss}}",
                      params, words)
    l1, p = get("l1", 0.0), get("p", 2.0)
    if solver == "pgs":
        check_p(p, words)
        _pgs_l1_rules(params, words)
        _adaptive_rules(params, words)
        return
    sigma, init = get("sigma", 1.0), get("init", "zero")
    if sigma == 0 and l1 == 0:
        raise _refuse("sigma", "{sigma} needs {@l1} > 0 (pure l_1); with neither term the "
                      "problem has no regularizer", params, words)
    if l1 > 0 and p != 2:
        raise _refuse("l1", "{%sdca} with an l_1 term ({l1}) needs {p=2} (Prox-SDCA), got "
                      "{p}", params, words)
    if isinstance(init, str):
        if init == "pgs" and sigma == 0:
            raise _refuse("init", "{init=pgs} needs {@sigma} > 0 (PGS has no pure l_1 "
                          "objective)", params, words)
    elif hasattr(init, "_check_fitted"):
        init._check_fitted()  # a PGS learner to start from: fitted
    if multi_class != "ovr":
        if p != 2:
            raise _refuse("multi_class", "{multi_class} needs {p=2}, got {p}", params, words)
        if l1 != 0:
            raise _refuse("multi_class", "{multi_class} has no l1 term yet ({l1}); use "
                          "{multi_class=ovr} for l_1", params, words)
        if sigma == 0:
            raise _refuse("multi_class", "{multi_class} needs {@sigma} > 0", params, words)
        if not (isinstance(init, str) and init == "zero"):
            raise _refuse("multi_class", "{multi_class} starts from {init=zero} only",
                          params, words)


def _pgs_l1_rules(params, words):
    """What PGS's l1 runs exactly with (docs/design/l1.md)."""
    get = params.get
    l1, p = get("l1", 0.0), get("p", 2.0)
    iterate, forget = get("iterate", "last"), get("forget", 1.0)
    if not l1:
        return
    if p != 2 and iterate != "last":
        # p < 2 keeps N(thr) by an expansion about a reference threshold (_l1q.pxd); the
        # averages would need it at every past step of every coordinate
        raise _refuse("iterate", "{l1} with {p} < 2 keeps only the last iterate, not "
                      "{iterate}; use {iterate=last} (or {p=2})", params, words)
    if p != 2 and forget < 1:
        raise _refuse("forget", "{l1} with {p} < 2 does not support {forget}; use "
                      "{forget=1} (or {p=2})", params, words)
    if iterate == "random":
        raise _refuse("iterate", "{l1} with {iterate} is not supported; use another "
                      "iterate ({iterate=last}, or an average)", params, words)
    if forget < 1 and iterate != "last":
        raise _refuse("iterate", "{l1} with {forget} keeps only the last iterate exactly, "
                      "not {iterate}; use {iterate=last}", params, words)


def check_learner(params, solver, task, words):
    """A learner's parameters: `check_ranges`, then `learner_rules` (see the module
    docstring's example)."""
    check_ranges(params, solver, task, words)
    learner_rules(params, solver, words)


_CORE = Words("PGSState")


def check_pgs_state(**config):
    """A PGS state's configuration (``PGSState(...)``): a learner's ranges with a
    numeric sigma and eta, and its rules; `config` may lack parameters (their
    defaults)."""
    params = {k: v for k, v in config.items() if k in _PGS or k == "loss"}
    if isinstance(config.get("multi_class"), str):  # else a code, the core's to check
        params["multi_class"] = config["multi_class"]
    check_ranges(params, "pgs", None, _CORE,
                 {**learner_constraints("pgs", None), "sigma": [_POSITIVE],
                  "eta": [_POSITIVE], "iterate": [("str", set(ITERATES))]})
    learner_rules(params, "pgs", PYTHON, core=True)
    # the adaptive geometry's stabilizer start: the core's own parameter
    check_ranges({"delta": config["delta"]} if "delta" in config else {}, "pgs", None,
                 _CORE, {"delta": [_AT_LEAST_0]})


def _adaptive_rules(params, words):
    """What the adaptive geometry does not run yet: the random iterate, a ball at p = 2,
    forgetting with an average (docs/design/adaptive.md;
    l1 at p < 2 keeps the last iterate, without forgetting, as in the global geometry:
    `_pgs_l1_rules`)."""
    if params.get("geometry", "global") != "adaptive":
        return
    get = params.get
    p, radius = get("p", 2.0), get("radius", None)
    if p == 2 and radius is not None:
        # the per-coordinate stabilizers put one multiplier, shared by every coordinate,
        # into the ball's minimizer: no O(nnz) step and no lazy weights
        raise _refuse("radius", "the adaptive geometry's ball ({radius}) needs a p below 2, "
                      "got {p}: at p = 2 each coordinate's own stabilizer makes the step on "
                      "the ball move every coordinate (no O(nnz) step); use {radius=None}, "
                      "a p below 2 (one scalar stabilizer: the ball is a factor), or the "
                      "global geometry", params, words)
    iterate = get("iterate", "last")
    if iterate == "random":
        raise _refuse("iterate", "the adaptive geometry reports the last iterate or an "
                      "average of its iterates (last, average, weighted, weighted2), got "
                      "{iterate}", params, words)
    if get("forget", 1.0) < 1 and iterate != "last":
        # forgetting decays the sums over one global factor (_adaptive.pxd); the
        # averages' settled sums have no decayed form yet
        raise _refuse("forget", "the adaptive geometry forgets ({forget}) with the last "
                      "iterate only, got {iterate}; use {forget=1}, or {iterate=last}",
                      params, words)


def check_sdca_problem(**config):
    """An SDCA problem's configuration (``SDCAProblem(...)``): ranges and rules."""
    words = Words("SDCAProblem")
    check_ranges(config, "sdca", None, words)
    learner_rules(config, "sdca", PYTHON)


# ---- Dask and the streaming engine --------------------------------------------------------
def dask_rules(params, words, balanced=False):
    """What `onlinepgs.dask` (``train --scheduler``) refuses of a learner's parameters:
    l1, forgetting, class weights (``balanced``: a model trained with them), coupled
    multiclass losses and the adaptive geometry's race of eta; its lanes' merge is
    exact only without them."""
    params = settle_auto(params)
    get = params.get
    if get("l1", 0):
        # a round's lanes soft-threshold their own lambda; the merged rounds are not
        # exactly one process's sparse model, and onlinepgs.dask only does what is exact
        raise _refuse("l1", "{%dask} does not train an l_1 term ({l1}): the lanes' soft "
                      "thresholds do not merge into one process's sparse model; train with "
                      "{l1=0}, or {%one_process}", params, words)
    if get("forget", 1.0) < 1:
        raise _refuse("forget", "{%dask} does not forget ({forget}): the lanes of a round "
                      "would each decay the shared past; train with {forget=1}, or "
                      "{%one_process}", params, words)
    if get("class_weight") is not None or balanced:
        # its rounds would not keep a 'balanced' model's class counts
        which = "{class_weight}" if get("class_weight") is not None else \
            "a model trained with class weights"
        raise _refuse("class_weight", f"{{%dask}} does not weigh classes ({which}); "
                      "{%weights_instead}", params, words)
    if get("geometry", "global") == "adaptive" and get("p", 2.0) != 2:
        # the lanes' merge adds the per-coordinate squares; p < 2's scalar stabilizer and
        # its norm's sums are not merged
        raise _refuse("p", "{%dask} trains the adaptive geometry at {p=2} only ({p}): "
                      "its scalar stabilizer below 2 does not merge across lanes; train "
                      "{%one_process}", params, words)
    if get("geometry", "global") == "adaptive" and get("iterate", "last") != "last":
        # the averages' settled sums and their steps (snap_a, snapv_a) are a lane's own:
        # the lanes' merge adds U and the squares only
        raise _refuse("iterate", "{%dask} trains the adaptive geometry with {iterate=last} "
                      "only ({iterate}): its averages' sums do not merge across lanes; "
                      "train {%one_process}", params, words)
    if get("geometry", "global") == "adaptive" and get("eta", "auto") == "auto":
        # the race of the base rate is the local race's (onlinepgs._eta_race): the lanes'
        # rounds do not carry its families; a fixed rate merges (docs/design/dask.md)
        raise _refuse("eta", "{%dask} does not race the adaptive geometry's base rate "
                      "({eta}): train with a fixed one, e.g. {eta=0.5} (the rate the race "
                      "keeps on ties), or train {%one_process}", params, words)
    if get("multi_class", "ovr") != "ovr":
        # the lanes' merge and statistics are written for one-vs-rest problems
        raise _refuse("multi_class", "{%dask} trains one-vs-rest models only "
                      "({multi_class}); train it {%one_process}", params, words)


_DASK_RUN = {
    "passes": [_COUNT],
    "n_lanes": [None, _COUNT],
    "slice_rows": [("str", {"auto"}), _COUNT],
    "shuffle": ["boolean"],
    "random_state": ["random_state"],
    "n_features": [None, ("int", 0, None, "left")],
    "zero_based": ["boolean", ("str", {"auto"})],
    "blocksize": [None, _COUNT],
    "block_rows": [None, _COUNT],
    "callback": [None, "callable"],
    "locality": ["boolean"],
    "fresh": ["boolean"],
}


def check_dask_run(options, words=PYTHON):
    """`onlinepgs.dask`'s run options (`onlinepgs.distributed.options.RunOptions`'s
    fields, a dict): each in its range; ``locality`` needs a client, ``client`` is a
    ``distributed.Client``."""
    check_params(options, _DASK_RUN, words)
    if options.get("locality") and options.get("client") is None:
        raise _refuse("locality", "{locality=True} places lanes on the workers of a "
                      "cluster: pass client= (Dask's threads share one memory)",
                      options, words)
    client = options.get("client")
    if client is not None:
        try:
            from distributed import Client
        except ImportError as exc:  # pragma: no cover
            raise ImportError("a client needs dask.distributed: pip install distributed"
                              ) from exc
        if not isinstance(client, Client):
            raise InvalidParameterError(
                "client", [("subject", "client"), " must be a distributed.Client, got "
                           f"{type(client).__name__}"], options, words, range_error=True)


_STREAM_RUN = {
    "passes": [_COUNT],
    "chunk_rows": [_COUNT],
    "zero_based": ["boolean", ("str", {"auto"})],
    "holdout_every": [None, _COUNT],
    "checkpoint_every": [None, _COUNT],
}


def check_stream_run(options, words=PYTHON):
    """The streaming engine's run options (`onlinepgs.streaming.StreamTrainer`, the
    command's train): ranges, ``checkpoint_every`` needs a file, ``classes`` a
    classifier (``options["loss"]``: the learner's)."""
    check_params(options, _STREAM_RUN, words)
    if options.get("checkpoint_every") is not None and options.get("checkpoint_path") is None:
        raise _refuse("checkpoint_every", "{@checkpoint_every} needs {%output} (the file "
                      "the checkpoints are written to)", options, words)
    _classes_rule(options, words)


def _classes_rule(options, words):
    """Classes (``classes``, ``class_weight``, ``multi_class``) are a classifier's."""
    loss = options.get("loss")
    if loss is None or loss in CLASSIFICATION_LOSSES:
        return
    for option, unset in (("classes", None), ("class_weight", None),
                          ("multi_class", "ovr")):
        if options.get(option, unset) != unset:
            raise _refuse(option, f"{{@{option}}} applies to classification losses only "
                          "({loss} is a regression loss)", options, words)


# ---- the command --------------------------------------------------------------------------
_RUN_FLAGS = {  # the command's run options (argparse names) and their ranges
    "passes": [_COUNT], "chunk_rows": [_COUNT], "holdout_every": [None, _COUNT],
    "checkpoint_every": [None, _COUNT], "lanes": [None, _COUNT], "slice_rows": [_COUNT],
    "max_model_bytes": _BYTES, "connect_timeout": [_POSITIVE],
    "refine": [("int", 0, None, "left")], "top": [("int", 0, None, "left")],
    # serve's (0: a free port, written to --port-file)
    "port": [("int", 0, 65535, "both")], "save_every": [None, _COUNT],
    "max_line_bytes": [_COUNT], "max_clients": [_COUNT], "jobs": [None, _COUNT],
}
# the CSV/TSV options of train (each the reader's parameter of its name)
CSV_OPTIONS = ("label", "weight", "categorical", "numeric", "ignore", "delimiter",
               "label_map", "header")
# options of the streaming PGS run that --solver sdca (all rows at once) does not take
_NOT_SDCA = ("initial", "resume", "holdout_every", "checkpoint_every", "scheduler")
_PGS_ONLY = ("radius", "batch_size", "iterate", "forget", "jobs", "geometry", "eta")
# options of the streaming run that --scheduler (onlinepgs.dask's rounds) does not take
_NOT_DASK = {"resume": "rounds read the files on the workers",
             "checkpoint_every": "rounds read the files on the workers",
             "holdout_every": "rounds read the files on the workers",
             "skip_bad_lines": "onlinepgs.dask's file source stops at a bad line, naming it",
             "audit": "names are collected on the streaming PGS run only",
             "jobs": "each lane's task trains its runs on one thread; --lanes sets "
                     "how many train at once"}


def _flag_words(args, model=None):
    """The flags' words; the model options given, by their parameters' names."""
    given = {MODEL_OPTIONS.get(name, name) for name in getattr(args, "given", ())}
    return Words(flags=True, given=given, model=model)


def learner_params(args):
    """``(solver, task, params)``: the learner `train`'s flags describe (its sigma's
    default: "auto" for PGS, 1e-4 for SDCA)."""
    solver = getattr(args, "solver", "pgs")
    sigma = args.sigma
    if sigma is None:  # PGS races sigma; SDCA solves for one
        sigma = 1e-4 if solver == "sdca" else "auto"
    params = dict(loss=args.loss, p=args.p, sigma=sigma, l1=getattr(args, "l1", 0.0),
                  fit_intercept=not args.no_intercept,
                  intercept_scaling=args.intercept_scaling, epsilon=args.epsilon,
                  n_bits=args.bits, hash_seed=args.hash_seed, random_state=args.random_seed,
                  interactions=list(getattr(args, "interactions", None) or []) or None)
    task = "classifier" if args.loss in CLASSIFICATION_LOSSES else "regressor"
    if task == "classifier":
        params["class_weight"] = getattr(args, "class_weight", None)
        params["multi_class"] = getattr(args, "multi_class", "ovr")
    if solver == "sdca":
        params["l1_geometry"] = getattr(args, "l1_geometry", "auto")
    else:
        params.update(radius=args.radius, batch_size=args.batch_size, iterate=args.iterate,
                      forget=args.forget, max_model_bytes=args.max_model_bytes)
        if getattr(args, "geometry", "global") == "adaptive":
            params.update(geometry="adaptive", eta=args.eta)
    return solver, task, params


def check_command(args):
    """Every rule about the command's options that needs no model file, in the flags'
    words, right after parsing (before any input is opened): the run options' ranges,
    then the command's (`train`: its flags together, its input's format, the learner's
    parameters unless -i gives the model)."""
    words = _flag_words(args)
    run = {name: getattr(args, name) for name in _RUN_FLAGS if hasattr(args, name)}
    check_params(run, _RUN_FLAGS, words)
    if args.command == "train":
        _check_train(args, words)
    elif args.command == "serve":
        _check_serve(args, words)


def _check_serve(args, words):
    """serve's flags together: saves are of a model that learns."""
    flags = {"output": args.output, "learn": args.learn}
    if args.save_every is not None and args.output is None:
        raise _refuse("save_every", "{@save_every} needs {%output} (the file the model is "
                      "saved to)", flags, words)
    if args.output is not None and not args.learn:
        raise _refuse("output", "{@output} needs {@learn} (without it the model does not change, "
                      "and there is nothing to save)", flags, words)
    if hasattr(args, "max_model_bytes") and not args.learn:  # (absent unless given)
        raise _refuse("max_model_bytes", "{@max_model_bytes} needs {@learn} (it bounds what "
                      "learning may grow the model to; a model only answering never grows)",
                      flags, words)


def _given(args, name):
    """Whether the flag of `name` was given (a model option) or set (a run option)."""
    if name in MODEL_OPTIONS:
        return name in getattr(args, "given", ())
    value = getattr(args, name, None)
    return value not in (None, False)


def _check_train(args, words):
    from onlinepgs.formats.registry import DEFAULT_BITS, HASHED, format_of

    flags = {"initial": args.initial, "resume": args.resume, "scheduler": args.scheduler,
             "output": args.output}
    if args.output is None and args.checkpoint_every is not None:
        raise _refuse("checkpoint_every", "{@checkpoint_every} needs {%output} (the file "
                      "the checkpoints are written to)", flags, words)
    if args.audit and args.output is None:
        raise _refuse("audit", "{@audit} needs {%output} (the names are saved with the "
                      "model)", flags, words)
    if args.resume and not args.initial:
        raise _refuse("resume", "{@resume} needs {@initial} MODEL (the checkpoint to "
                      "resume)", flags, words)
    sdca = args.solver == "sdca"
    if sdca:
        for name in (*_NOT_SDCA, "audit"):
            if _given(args, name):
                raise _refuse(name, f"{{@{name}}} is not available with {{%sdca}} (it "
                              "trains once on all of DATA, loaded into memory)", flags, words)
        for name in _PGS_ONLY:
            if _given(args, name):
                raise _refuse(name, f"{{@{name}}} is a PGS option; {{%sdca}} solves over R^n "
                              "on all rows", flags, words)
        if args.passes > 1:
            raise _refuse("passes", "{%sdca} runs its own epochs (until the duality gap "
                          "reaches its tolerance)", flags, words)
        if args.sigma == "auto":
            raise _refuse("sigma", "{sigma=auto} races PGS runs over a stream; {%sdca} "
                          "needs a number", flags, words)
    elif _given(args, "l1_geometry"):
        raise _refuse("l1_geometry", "{@l1_geometry} is an SDCA option (with {%sdca} "
                      "{sigma=0} {l1=L1})", flags, words)
    if args.scheduler is not None:
        for name, why in _NOT_DASK.items():
            if _given(args, name):
                raise _refuse(name, f"{{@{name}}} is not available with {{%dask}} ({why})",
                              flags, words)
        if "-" in args.data:
            raise OptionError("scheduler", ["DATA - (stdin) is not available with ",
                                            ("term", "dask"), " (rounds read the files on "
                                            "the workers)"], flags, words)
    # the input: its format (by --format or the names), the options it can use
    formats = [format_of(source, args.format) for source in args.data]
    interactions = list(args.quadratic or []) + list(args.interactions or [])
    for text in interactions:
        pair = text in (args.quadratic or [])
        if " " in text or (pair and len(text) != 2):
            raise OptionError("quadratic" if pair else "interactions", [
                f"expected {'2' if pair else '2 or 3'} namespace letters (the first letters "
                f"of namespace names, ':' for any), e.g. {'ab' if pair else 'abc'}; got "
                f"{text!r}"], {}, words)
    if interactions and not any(fmt in HASHED for fmt in formats):
        raise _refuse("interactions", "{@interactions} cross namespaces, which svmlight "
                      "input has none of; give vw, csv, tsv or json input (--format)",
                      flags, words)
    columns = [name for name in CSV_OPTIONS if getattr(args, name, None) is not None]
    if columns and not any(fmt in ("csv", "tsv") for fmt in formats):
        raise _refuse(columns[0], f"{{@{columns[0]}}} applies to csv or tsv input "
                      "(--format)", flags, words)
    if formats[0] != "svmlight" and (sdca or args.scheduler is not None):
        term = "sdca" if sdca else "dask"
        raise OptionError("solver" if sdca else "scheduler", [
            ("term", term), f" reads svmlight input only; {args.data[0]} is {formats[0]} "
            "input"], flags, words)
    if args.initial:
        return  # the model's options: check_train_model, once it is read
    # a model option that the geometry given would ignore (the estimators take it: their
    # parameters stay settable together, as a grid search sets them)
    if getattr(args, "geometry", "global") != "adaptive" and _given(args, "eta"):
        raise _refuse("eta", "{@eta} is the adaptive geometry's base rate: give {@geometry} "
                      "adaptive with it (the global geometry's step is 1/(sigma t))",
                      flags, words)
    if getattr(args, "geometry", "global") == "adaptive" and _given(args,
                                                                    "intercept_scaling"):
        raise _refuse("intercept_scaling", "{@intercept_scaling} has no effect with "
                      "{@geometry} adaptive: the intercept's constant feature is divided by "
                      "its own largest value, as every feature is", flags, words)
    if _given(args, "intercept_scaling") and _given(args, "no_intercept"):
        raise _refuse("intercept_scaling", "{@intercept_scaling} is the value of the "
                      "intercept's feature, which {@no_intercept} leaves out", flags, words)
    if _given(args, "epsilon") and args.loss not in ("huber", "epsilon_insensitive"):
        raise _refuse("epsilon", "{@epsilon} is the width of the huber and "
                      "epsilon_insensitive losses; the loss here is {loss}",
                      dict(flags, loss=args.loss), words)
    if (_given(args, "hash_seed") and getattr(args, "bits", None) is None
            and all(fmt == "svmlight" for fmt in formats)):
        raise _refuse("hash_seed", "{@hash_seed} seeds the hashing of features, which "
                      "svmlight input without {@bits} does not do (its indices are its "
                      "columns)", flags, words)
    solver, task, params = learner_params(args)
    params["interactions"] = interactions or None
    if params["n_bits"] is None and any(fmt in HASHED for fmt in formats):
        params["n_bits"] = DEFAULT_BITS  # names are hashed
    _classes_rule({**params, "loss": args.loss, "classes": args.classes,
                   "class_weight": getattr(args, "class_weight", None),
                   "multi_class": getattr(args, "multi_class", "ovr")}, words)
    check_learner(params, solver, task, words)
    if args.scheduler is not None:
        dask_rules(params, words)


def check_train_model(args, params, path, regressor=False, balanced=False):
    """The rules on `train -i`'s model (its parameters `params`, read from `path`)
    with this run's flags: --classes needs a classifier, --scheduler what Dask trains."""
    words = _flag_words(args, model=path)
    if regressor:
        _classes_rule({**params, "classes": args.classes}, words)
    if args.scheduler is not None:
        dask_rules(params, words, balanced=balanced)
