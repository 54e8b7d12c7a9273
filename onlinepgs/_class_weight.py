"""Class weights of the classifiers (the ``class_weight`` parameter); imports no scikit-learn.

A row of class c weighs ``class_weight[c]`` times its sample weight, scikit-learn's
meaning. The weight is folded into the row's sample weight before the solver sees it,
so for K > 2 classes (one-vs-rest) it multiplies the row's weight in every binary
problem, as scikit-learn's SGDClassifier does.

``"balanced"`` is scikit-learn's ``n / (K * n_c)``, rows counted by their sample weights
as its ``compute_class_weight(..., sample_weight=...)`` counts them (a row of weight k
counts as k rows, as k copies of it would: so SDCA's integer weights stay repeated
rows; unit weights count rows, SGDClassifier's rule). `fit` sees every row and uses
the formula as it is (`batch_weights`). A stream (`partial_fit`) estimates it as it
goes (`stream_weights`): row i weighs ``n_i / (K * n_c,i)``, with ``n_i`` the
(weighted) rows seen up to row i and ``n_c,i`` those of its class, both counting row i
itself. Inclusive counts make the weight depend only on the row's place in the stream,
not on how the stream is cut into calls, and never divide by zero (the first row of a
class counts itself). The counts are the learner's fitted attributes
``class_counts_`` and ``class_counts_total_``, stored in model files, so that a
resumed run weighs its rows exactly as an uninterrupted one
(docs/design/estimators.md, "Class weights").
"""

import numpy as np

from onlinepgs import _options
from onlinepgs._checks import check_params, py

__all__ = ["BALANCED", "ClassWeightError", "CONSTRAINT", "per_class", "batch_weights",
           "stream_weights", "codes_of", "fit_weights", "partial_fit_weights"]

BALANCED = "balanced"
CONSTRAINT = _options.CLASS_WEIGHT  # the parameter's range (onlinepgs._options)


class ClassWeightError(ValueError):
    """A class_weight dict that does not fit the classes: ``label`` (a key that is no
    class, or whose weight is bad), ``classes`` (the labels) and ``reason``."""

    def __init__(self, message, label, classes, reason):
        super().__init__(message)
        self.label, self.classes, self.reason = label, classes, reason


def codes_of(y_core, multiclass):
    """Each row's class index (into ``classes_``) from the core's targets: +-1 for two
    classes (-1 is classes_[0]), the class index for K > 2."""
    if multiclass:
        return y_core.astype(np.intp)
    return (y_core > 0).astype(np.intp)


def per_class(class_weight, classes, owner):
    """The weights (K,) a dict gives the classes (in ``classes`` order): 1 for a class it
    does not name. A key that is no class, or a weight that is not a finite number
    >= 0, is a ValueError naming it."""
    labels = [py(c) for c in classes]
    index = {label: i for i, label in enumerate(labels)}
    weights = np.ones(len(labels))
    for key, value in class_weight.items():
        label = py(key)
        try:
            i = index.get(label)
        except TypeError:  # an unhashable key is no label
            i = None
        if i is None:
            raise ClassWeightError(f"class_weight of {owner} names the class {label!r}, "
                                   f"which is not one of the classes {labels}", label,
                                   labels, "unknown")
        value = py(value)
        if _options.bad_class_weight({label: value}) is not None:
            raise ClassWeightError(f"class_weight of {owner} gives the class {label!r} the "
                                   f"weight {value!r}; a class weight is a finite number "
                                   ">= 0", label, labels, "weight")
        weights[i] = float(value)
    return weights


def batch_weights(class_weight, codes, sw, n_classes, owner, classes):
    """``(row weights, class counts)`` of all rows at once (`fit`): a dict's weights, or
    "balanced" as scikit-learn's ``compute_class_weight(..., sample_weight=sw)`` gives it:
    ``W / (K * W_c)``, W_c the sample weights of class c's rows, W their sum, K the
    classes (a fit's classes all have rows). A class whose rows all weigh 0 keeps 1
    (its rows weigh 0 whatever it is)."""
    counts = np.bincount(codes, weights=sw, minlength=n_classes)
    if class_weight == BALANCED:
        weights = balanced_of_counts(counts)
    else:
        weights = per_class(class_weight, classes, owner)
    return weights[codes], counts


def stream_weights(codes, sw, counts, total, n_classes):
    """``(row weights, counts after, total after)`` of "balanced" estimated on a stream.

    Row i of this call weighs ``W_i / (n_classes * W_c,i)``: ``W_i`` the sample weights
    of the stream's rows up to and including it (``total`` before the call), ``W_c,i``
    those of its class's rows (``counts[c]`` before). Unit sample weights make them the
    counts of rows. Each sum is added row by row in the stream's order, so a row's
    weight is the same bit for bit however the stream is cut into calls. A row whose
    class has weighed nothing so far (its own sample weight 0) keeps 1. O(rows): the
    rows are grouped by class by a stable sort of small integers (NumPy's radix sort).
    """
    m = codes.shape[0]
    counts = counts.copy()
    if m == 0:
        return np.ones(0), counts, total
    small = np.uint8 if n_classes <= 2**8 else np.uint16 if n_classes <= 2**16 else np.int64
    order = np.argsort(codes.astype(small), kind="stable")
    ordered = codes[order]
    bounds = [0, *(np.flatnonzero(ordered[1:] != ordered[:-1]) + 1).tolist(), m]
    # running sums in the sorted order: one run of rows per class present, each started
    # from its class's count before the call (a run's slot `stop` is the next one's start)
    running, by_class, sw_ordered = np.empty(m + 1), np.empty(m), sw[order]
    for start, stop in zip(bounds[:-1], bounds[1:]):
        c = ordered[start]
        part = running[start:stop + 1]
        part[0] = counts[c]
        part[1:] = sw_ordered[start:stop]
        np.cumsum(part, out=part)  # in place: sequential, as row-by-row calls add
        by_class[start:stop] = part[1:]
        counts[c] = part[-1]
    of_class = np.empty(m)
    of_class[order] = by_class
    running[0] = total
    running[1:] = sw
    seen = np.cumsum(running)[1:]
    nothing = of_class <= 0
    weights = _ratio(seen, np.where(nothing, 1.0, of_class), n_classes)
    if nothing.any():
        weights[nothing] = 1.0
    return weights, counts, float(seen[-1])


def objective_weights(est):
    """The class weights (in ``classes_`` order) of the objective a fitted classifier
    minimizes, for its certificate: a dict's, or "balanced" from the class counts it
    holds (`fit`'s exact ``W / (K W_c)``; a stream's estimate at its end); None for no
    class weights or an estimator without them."""
    class_weight = getattr(est, "class_weight", None)
    classes = getattr(est, "classes_", None)
    if class_weight is None or classes is None:
        return None
    if class_weight != BALANCED:
        return per_class(class_weight, classes, type(est).__name__)
    return balanced_of_counts(np.asarray(getattr(est, "class_counts_",
                                                 np.zeros(len(classes))), np.float64))


def balanced_of_counts(counts):
    """"balanced" of the (weighted) class counts: ``W / (K W_c)``, 1 for a class that
    weighs nothing."""
    weights = np.ones(counts.shape[0])
    some = counts > 0
    weights[some] = _ratio(counts.sum(), counts[some], counts.shape[0])
    return weights


def _ratio(total, count, n_classes):
    """``total / (n_classes * count)``, scikit-learn's expression and rounding, or
    ``total / count / n_classes`` where ``n_classes * count`` alone leaves the double
    range (a class count near 1e308 whose weight, about 1 / n_classes, does not)."""
    with np.errstate(over="ignore"):  # a weight that does overflow is refused later
        denominator = n_classes * count
        ratio = total / denominator
        wide = np.isinf(denominator)
        if np.any(wide):
            ratio = np.where(wide, total / np.where(wide, count, 1.0) / n_classes, ratio)
    return ratio


def _check_value(est):
    """The parameter's type (a later partial_fit call checks no other parameter)."""
    check_params({"class_weight": est.class_weight}, {"class_weight": CONSTRAINT},
                 est._owner)


def fit_weights(est, sw, y_core, multiclass, extra):
    """`fit`'s sample weights times the class weights; with "balanced" the class counts
    go into the fitted attributes `extra` (``class_counts_``, ``class_counts_total_``)."""
    # a fit starts afresh: counts of a former training describe other rows (and are
    # restored if this fit fails: _base._unchanged_on_error)
    for name in ("class_counts_", "class_counts_total_"):
        est.__dict__.pop(name, None)
    class_weight = est.class_weight
    if class_weight is None:
        return sw
    _check_value(est)
    classes = extra["classes_"]
    weights, counts = batch_weights(class_weight, codes_of(y_core, multiclass), sw,
                                    classes.shape[0], est._owner, classes)
    if class_weight == BALANCED:
        extra["class_counts_"], extra["class_counts_total_"] = counts, float(counts.sum())
    with np.errstate(over="ignore"):  # an overflowing product is refused with its row
        return sw * weights


def partial_fit_weights(est, sw, y_core, multiclass, extra, first):
    """A `partial_fit` call's sample weights times the class weights, and the stream's
    class counts brought up to date in `extra`: kept from the first call made with
    "balanced" on (whatever class_weight later calls have, so that a return to
    "balanced" finds them exact)."""
    class_weight = est.class_weight
    if not first:
        _check_value(est)
    counts = None if first else getattr(est, "class_counts_", None)
    if class_weight is None and counts is None:
        return sw
    classes = extra["classes_"] if first else est.classes_
    n_classes = classes.shape[0]
    codes = codes_of(y_core, multiclass)
    if class_weight == BALANCED and counts is None:
        if not first:
            raise ValueError(
                f"class_weight='balanced' continues the class counts of the stream "
                f"since its first call, which this {est._owner} did not keep (its first "
                "calls had another class_weight); fit it again, or give class_weight a "
                "dict")
        counts, total = np.zeros(n_classes), 0.0
    elif counts is not None:
        total = est.class_counts_total_
    if counts is not None:
        balanced, extra["class_counts_"], extra["class_counts_total_"] = stream_weights(
            codes, sw, counts, total, n_classes)
    if class_weight is None:
        return sw
    with np.errstate(over="ignore"):  # an overflowing product is refused with its row
        if class_weight == BALANCED:
            return sw * balanced
        return sw * per_class(class_weight, classes, est._owner)[codes]
