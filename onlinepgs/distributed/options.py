"""The options of a distributed run, validated once (`RunOptions`).

`onlinepgs.dask.fit` and `partial_fit` turn their keyword arguments into one
`RunOptions`, which checks each of them when it is made and fills in the defaults
that depend on others (``block_rows``); the layers below (`run.train`, the sources,
the driver) take that object and trust it. So a bad argument is one clear error that
names it, raised before anything is read or scheduled.
"""
import dataclasses
import numbers

import numpy as np

from onlinepgs.distributed.slices import auto_slice_rows

__all__ = ["RunOptions"]

_MIN_BLOCK_ROWS = 8192  # the fewest lines a file block reads at a time by default


def _check_int(name, value, low):
    if (not isinstance(value, (int, np.integer)) or isinstance(value, bool)
            or value < low):
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    return int(value)


def _check_bool(name, value):
    # a truthy string ("no") would silently mean True
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """How `onlinepgs.dask` trains: every option of `fit` but the data and the estimator.

    Made from the user's arguments, each checked here (the parameters are those of
    `onlinepgs.dask.fit`; ``fresh`` says whether the run starts from scratch, `fit`,
    or continues the estimator's state, `partial_fit`). ``block_rows=None`` becomes
    its default, ``max(slice_rows, 8192)`` (65,536 for "auto": text sources do not
    know their length, so "auto" slices are the fallback's).

    Raises
    ------
    ValueError
        An option out of its range or of the wrong kind, or one that needs another
        (``locality=True`` without a client); the message names the option.
    TypeError
        ``callback`` not callable, ``client`` not a ``distributed.Client``.

    Examples
    --------
    >>> from onlinepgs.distributed.options import RunOptions
    >>> RunOptions(passes=2, slice_rows=1000).block_rows
    8192
    >>> RunOptions(passes=0)
    Traceback (most recent call last):
    ...
    ValueError: passes must be an int >= 1, got 0
    """

    passes: int = 1
    client: object = None
    n_lanes: object = None
    slice_rows: object = "auto"
    shuffle: bool = False
    random_state: object = None
    n_features: object = None
    zero_based: object = "auto"
    blocksize: object = None
    block_rows: object = None
    callback: object = None
    locality: bool = False
    fresh: bool = True

    def __post_init__(self):
        def set_(name, value):  # frozen: normalised values are set once, here
            object.__setattr__(self, name, value)

        set_("passes", _check_int("passes", self.passes, 1))
        slice_rows = self.slice_rows
        if not (isinstance(slice_rows, str) and slice_rows == "auto"):
            try:
                set_("slice_rows", _check_int("slice_rows", slice_rows, 1))
            except ValueError:
                raise ValueError(f'slice_rows must be "auto" or an int >= 1, got '
                                 f'{slice_rows!r}') from None
        if self.n_lanes is not None:
            set_("n_lanes", _check_int("n_lanes", self.n_lanes, 1))
        if self.n_features is not None:
            set_("n_features", _check_int("n_features", self.n_features, 0))
        if self.blocksize is not None:
            set_("blocksize", _check_int("blocksize", self.blocksize, 1))
        zero_based = self.zero_based
        if not (zero_based is True or zero_based is False
                or (isinstance(zero_based, str) and zero_based == "auto")):
            raise ValueError(f'zero_based must be True, False or "auto", got {zero_based!r}')
        if self.locality is not True and self.locality is not False:
            raise ValueError(f"locality must be True or False, got {self.locality!r}")
        if self.locality and self.client is None:
            raise ValueError("locality=True places lanes on the workers of a cluster: pass "
                             "client= (Dask's threads share one memory)")
        if self.callback is not None and not callable(self.callback):
            raise TypeError(f"callback must be callable, got {self.callback!r}")
        if self.block_rows is None:
            set_("block_rows", max(auto_slice_rows(None, 1) if self.slice_rows == "auto"
                                   else self.slice_rows, _MIN_BLOCK_ROWS))
        else:
            set_("block_rows", _check_int("block_rows", self.block_rows, 1))
        set_("shuffle", _check_bool("shuffle", self.shuffle))
        _check_random_state(self.random_state)
        set_("fresh", _check_bool("fresh", self.fresh))
        if self.client is not None:
            _check_client(self.client)


def _check_random_state(value):
    """None (the estimator's), a seed, or a RandomState, as the estimators take it."""
    if value is None or isinstance(value, np.random.RandomState):
        return
    if (isinstance(value, numbers.Integral) and not isinstance(value, bool)
            and 0 <= value < 2**32):
        return
    raise ValueError("random_state must be None, an int in [0, 2**32 - 1] or a "
                     f"numpy.random.RandomState, got {value!r}")


def _check_client(client):
    try:
        from distributed import Client
    except ImportError as exc:  # pragma: no cover
        raise ImportError("a client needs dask.distributed: pip install distributed") from exc
    if not isinstance(client, Client):
        raise TypeError(f"client must be a distributed.Client, got {type(client).__name__}")
