"""onlinepgs.dask's options: each checked once, up front, into one RunOptions."""
import dataclasses

import numpy as np
import pytest

dask = pytest.importorskip("dask", reason="onlinepgs.dask needs Dask (pip install "
                           "'onlinepgs[dask]')")
da = pytest.importorskip("dask.array")

import onlinepgs.dask as opd  # noqa: E402
from onlinepgs import PGSClassifier, PGSRegressor  # noqa: E402
from onlinepgs.distributed.options import RunOptions  # noqa: E402

# (argument, bad value, exception, what the message says after the argument's name)
BAD = [
    ("passes", 0, ValueError, "must be an int in the range [1, inf). Got 0 instead."),
    ("passes", 1.5, ValueError, "must be an int in the range [1, inf). Got 1.5 instead."),
    ("passes", True, ValueError, "must be an int in the range [1, inf). Got True instead."),
    ("n_lanes", 0, ValueError, "must be None or an int in the range [1, inf). Got 0"),
    ("n_lanes", "2", ValueError, "must be None or an int in the range [1, inf). Got '2'"),
    ("slice_rows", "big", ValueError, "must be a str among {'auto'} or an int in the range "
                                      "[1, inf). Got 'big' instead."),
    ("slice_rows", 0, ValueError, "must be a str among {'auto'} or an int in the range "
                                  "[1, inf). Got 0 instead."),
    ("shuffle", "no", ValueError, "must be an instance of 'bool'. Got 'no' instead."),
    ("shuffle", None, ValueError, "must be an instance of 'bool'. Got None instead."),
    ("random_state", -1, ValueError, "must be an int in the range [0, 4294967295], an "
                                     "instance of 'RandomState' or None. Got -1 instead."),
    ("random_state", 2**32, ValueError, "must be an int in the range [0, 4294967295]"),
    ("random_state", "seed", ValueError, "must be an int in the range [0, 4294967295]"),
    ("n_features", -1, ValueError, "must be None or an int in the range [0, inf). Got -1"),
    ("zero_based", "yes", ValueError, "must be an instance of 'bool' or a str among "
                                      "{'auto'}. Got 'yes' instead."),
    ("zero_based", 1, ValueError, "must be an instance of 'bool' or a str among {'auto'}. "
                                  "Got 1 instead."),
    ("blocksize", 0, ValueError, "must be None or an int in the range [1, inf). Got 0"),
    ("block_rows", 0, ValueError, "must be None or an int in the range [1, inf). Got 0"),
    ("callback", 3, TypeError, "must be None or a callable. Got 3 instead."),
    ("locality", "yes", ValueError, "must be an instance of 'bool'. Got 'yes' instead."),
    ("locality", True, ValueError, "=True places lanes on the workers of a cluster: pass "
                                   "client="),
    ("client", "tcp://127.0.0.1:8786", TypeError, "must be a distributed.Client, got str"),
]


@pytest.fixture
def watched():
    """A dask array whose blocks record that they were made: work started."""
    made = []

    def block(i):
        made.append(i)
        return np.eye(4)[:, :3] * (i + 1)

    X = da.concatenate([da.from_delayed(dask.delayed(block)(i), shape=(4, 3), dtype=float)
                        for i in range(3)])
    return X, np.array([1, -1, 1, -1] * 3), made


@pytest.mark.parametrize("fit", [opd.fit, opd.partial_fit])
@pytest.mark.parametrize("name, value, error, says", BAD)
def test_each_bad_option_is_one_error_naming_it_before_any_work(fit, name, value, error,
                                                                says, watched):
    X, y, made = watched
    est = PGSClassifier(random_state=0)
    with pytest.raises(error) as info:
        fit(est, X, y, **{name: value})
    message = str(info.value)
    assert message.startswith(name) and says in message, message
    assert "\n" not in message
    assert made == []  # no block was read
    assert not hasattr(est, "coef_")  # the estimator is untouched


def test_estimator_and_classes_are_checked_before_any_work(watched):
    X, y, made = watched
    with pytest.raises(TypeError, match="trains a PGSClassifier or PGSRegressor, got "
                                        "object"):
        opd.fit(object(), X, y)
    with pytest.raises(ValueError, match=r"^classes applies to classification losses only "
                                         r"\(loss='squared' is a regression loss\)$"):
        opd.fit(PGSRegressor(), X, y, classes=[-1, 1])
    assert made == []
    # the same data, with good options, trains (and so reads every block)
    clf = opd.fit(PGSClassifier(random_state=0), X, y, n_lanes=1, classes=[-1, 1])
    assert sorted(made) == [0, 1, 2] and clf.online_stats_["n_examples"] == 12


def test_run_options_normalise_once_and_are_frozen():
    options = RunOptions(passes=np.int64(3), n_lanes=np.int32(2), slice_rows=np.int64(500),
                         shuffle=np.bool_(True), random_state=np.int64(7))
    assert (options.passes, options.n_lanes, options.slice_rows) == (3, 2, 500)
    assert all(type(v) is int for v in (options.passes, options.n_lanes,
                                        options.slice_rows))
    assert options.shuffle is True and options.fresh is True
    # block_rows: max(slice_rows, 8192); "auto" slices of text are 65,536 rows
    assert RunOptions(slice_rows=500).block_rows == 8192
    assert RunOptions(slice_rows=20_000).block_rows == 20_000
    assert RunOptions().block_rows == 65_536
    assert RunOptions(block_rows=7).block_rows == 7
    rng = np.random.RandomState(0)
    assert RunOptions(random_state=rng).random_state is rng
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.passes = 4


def test_fit_and_partial_fit_take_exactly_the_run_options():
    """fit and partial_fit pass their keyword arguments on by name: every option of
    theirs is a field of RunOptions and back (fresh: which of the two)."""
    import inspect

    fields = {f.name for f in dataclasses.fields(RunOptions)} - {"fresh"}
    for fit in (opd.fit, opd.partial_fit):
        keywords = {name for name, p in inspect.signature(fit).parameters.items()
                    if p.kind is p.KEYWORD_ONLY} - {"sample_weight", "classes"}
        assert keywords == fields, fit.__name__
