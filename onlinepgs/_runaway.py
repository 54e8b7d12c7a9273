"""Predictions that ran away while they stay finite: the divergence no overflow shows.

The global geometry takes one step size for every coordinate. A feature far larger than
the others (a value of 1e9 beside values near 1) makes every step on it overshoot, and
the predictions swing at 1e9 times the labels' size. Under the ball of ``radius="auto"``
the weights stay bounded and finite, and so do the losses: the progressive squared loss
of such a run is near 1e18, and the guards of non-finite values (`pgs.py`'s
`_check_finite`) never fire. (On R^n, `radius=None`, the same run overflows within a few
hundred rows, and those guards stop it.)

The yardstick is the model that predicts 0: its loss on a row is l(0; y), the label's
own size for a regression, a constant for a classifier. A training call whose mean
progressive loss (of the reported model, weighted) exceeds `RATIO` times the largest
l(0; y) of the rows trained since the state began has predictions off by far more than
any label. For the squared loss that is 1,000 times the largest label; for the linear
losses, 1e6 times. The reason says so and names the call's largest value. The runs of
a sigma race are checked one by one, and a run that ran away is dropped (`pgs.py`'s
`_run`); at a fixed sigma the estimators warn and the command (`onlinepgs train`)
stops. A finite model that is only bad (thousands of times the zero model's mean loss,
on raw counts) is not refused.
"""
import math
import weakref

import numpy as np

from onlinepgs._core._losses import loss_value_py

RATIO = 1e6
_MULTINOMIAL, _CRAMMER_SINGER = 1, 2  # _multiclass.pxd's MC_* codes
# each learner's largest loss of predicting 0 over the rows its state trained: beside the
# learner, not in it (a model file holds the model, not this guard's memory; a learner
# loaded or copied counts again from its next call)
_SEEN = weakref.WeakKeyDictionary()


def zero_model_loss(state, y, rows, classifier):
    """The largest loss of predicting 0 on the rows `rows` of the core labels `y`, as the
    core sums a row's loss over its problems: K l(0; 1) one-vs-rest (1 problem when
    binary), log K multinomial, 1 Crammer-Singer, max l(0; y_i) for a regression (0
    without rows; the labels gathered only there)."""
    if classifier:
        return _classifier_zero_loss(state)
    if len(rows) == 0:
        return 0.0
    return float(np.max(zero_model_losses(state, np.asarray(y)[rows], False)))


def zero_model_losses(state, y, classifier):
    """Each row's loss of predicting 0 (`zero_model_loss` of the row alone), for the
    core labels `y`: an array (``serve --learn`` checks a call a row in compiled code,
    `onlinepgs._core._event.test_then_train`)."""
    if classifier:
        return np.full(len(y), _classifier_zero_loss(state))
    y = np.asarray(y, dtype=float)
    return np.asarray(loss_value_py(state.loss, np.zeros(len(y)), y, state.epsilon),
                      dtype=float).reshape(len(y))


def _classifier_zero_loss(state):
    if state.multiclass and state.mc_code == _MULTINOMIAL:
        return math.log(state.n_problems)
    if state.multiclass and state.mc_code == _CRAMMER_SINGER:
        return 1.0
    return state.n_problems * float(loss_value_py(state.loss, 0.0, 1.0, state.epsilon))


def checked(state):
    """Whether `check` judges the calls of `state` (the global geometry on a ball)."""
    return not state.adaptive and (state.radius_auto or math.isfinite(state.radius))


def largest_value(X, rows):
    """(row, column, value, size of the median column) of the largest |x_ij| among the
    rows `rows` of X (dense, or CSR: scipy's or the readers' light one); the median
    column's size is the median over the columns with a non-zero there of their largest
    |x_ij|. None without a non-zero. Error path only."""
    if hasattr(X, "indptr"):
        indptr = np.asarray(X.indptr)
        chosen = np.zeros(X.shape[0], dtype=bool)
        chosen[rows] = True
        entry_row = np.repeat(np.arange(X.shape[0]), np.diff(indptr))
        keep = chosen[entry_row] & (np.asarray(X.data[:len(entry_row)]) != 0)
        if not keep.any():
            return None
        data, columns = np.abs(np.asarray(X.data)[:len(entry_row)][keep]), \
            np.asarray(X.indices)[:len(entry_row)][keep]
        at = int(np.argmax(data))
        row, column = int(entry_row[keep][at]), int(columns[at])
        value = float(np.asarray(X.data)[:len(entry_row)][keep][at])
        sizes = np.zeros(X.shape[1])
        np.maximum.at(sizes, columns, data)
    else:
        part = np.abs(np.asarray(X, dtype=float)[rows])
        if not part.any():
            return None
        at, column = np.unravel_index(int(np.argmax(part)), part.shape)
        row, column = int(np.asarray(rows)[at]), int(column)
        value = float(np.asarray(X, dtype=float)[row, column])
        sizes = np.max(part, axis=0)
    return row, column, value, float(np.median(sizes[sizes > 0]))


def runaway_reason(loss, mean, zero, X, rows, columns=None):
    """Why the call's predictions ran away and what helps, in one sentence (and the row
    of the call's largest value, or None). `columns`: the learner's column map where X's
    columns are its slots (`onlinepgs._columns_seen`), so that the column named is the
    user's."""
    if hasattr(X, "crossing"):  # rows crossed in the pass: their matrix, made here
        X = X.to_csr()
    found = largest_value(X, rows) if X is not None else None
    where, row = "", None
    if found is not None:
        row, column, value, median = found
        if columns is not None:
            column = int(columns.columns()[column])
        where = (f"; the largest value of this call, {value:.3g} in column {column}, is "
                 f"{abs(value) / median:.2g} times the median column's largest")
    # only the global geometry's calls are checked (`check`)
    advice = ("use geometry='adaptive' (a step per coordinate on features divided by "
              "their scales) or scale the features")
    return (f"the predictions ran away: the mean progressive {loss!r} loss of this call, "
            f"{mean:.3g} a row, is over a million times the largest loss of predicting 0 "
            f"({zero:.3g}), although the model stays finite (one step size for every "
            f"coordinate overshoots where the features differ greatly in size{where}); "
            f"{advice}.", row)


def check(learner, state, X, y, order, classifier, before, columns=None):
    """After `learner`'s call over the rows `order` of `state` (`before`: the state's
    sum_weighted_loss_reported and sum_weight before it): the reason and row if the
    call's predictions ran away, else None. Only on a ball (the global geometry's
    radius "auto" or a number): on R^n such predictions overflow soon after, and
    PGSDivergedError says so with the advice of that case; the adaptive geometry's steps
    are scaled per feature. `columns`: the learner's column map where X's columns are
    its slots."""
    if not checked(state):
        return None
    rows = np.asarray(order)
    zero = zero_model_loss(state, y, rows, classifier)
    if before[1] > 0:  # the state goes on (a new one counts from its first rows)
        zero = max(zero, _SEEN.get(learner, 0.0))
    _SEEN[learner] = zero
    weight = state.sum_weight - before[1]
    if not (weight > 0 and zero > 0):
        return None
    mean = (state.sum_weighted_loss_reported - before[0]) / weight
    if not (math.isfinite(mean) and mean > RATIO * zero):  # NaN, inf: `_check_finite`'s
        return None
    return runaway_reason(state.loss, mean, zero, X, rows, columns)


def seen(learner):
    """The largest loss of predicting 0 over the rows `learner`'s state trained, as
    `check` remembers it (None: nothing remembered)."""
    return _SEEN.get(learner)


def remember(learner, value):
    """Make `value` (`seen`'s, None: nothing) what `check` remembers of `learner` (a
    learner restored to an earlier state, or trained by `serve --learn`'s pass)."""
    if value is None:
        _SEEN.pop(learner, None)
    else:
        _SEEN[learner] = value
