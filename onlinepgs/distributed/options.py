"""The options of a distributed run, validated once (`RunOptions`).

`onlinepgs.dask.fit` and `partial_fit` turn their keyword arguments into one
`RunOptions`, which checks each of them when it is made (by the rules of
`onlinepgs._options`, `check_dask_run`) and fills in the defaults that depend on others
(``block_rows``); the layers below (`run.train`, the sources, the driver) take that
object and trust it. So a bad argument is one clear error that names it, raised before
anything is read or scheduled.
"""
import dataclasses

from onlinepgs._options import check_dask_run
from onlinepgs.distributed.slices import auto_slice_rows

__all__ = ["RunOptions"]

_MIN_BLOCK_ROWS = 8192  # the fewest lines a file block reads at a time by default


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
    onlinepgs._options.OptionError
        A ValueError: an option out of its range or of the wrong kind (an
        `InvalidParameterError`, also a TypeError: ``callback`` not callable, ``client``
        not a ``distributed.Client``), or one that needs another (``locality=True``
        without a client); the message names the option.

    Examples
    --------
    >>> from onlinepgs.distributed.options import RunOptions
    >>> RunOptions(passes=2, slice_rows=1000).block_rows
    8192
    >>> RunOptions(passes=0)
    Traceback (most recent call last):
    ...
    onlinepgs._options.InvalidParameterError: passes must be an int in the range [1, inf)...
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

        # every rule is onlinepgs._options'; here only the values' normal forms
        check_dask_run({f.name: getattr(self, f.name) for f in dataclasses.fields(self)})
        for name in ("passes", "n_lanes", "n_features", "blocksize", "block_rows"):
            if getattr(self, name) is not None:
                set_(name, int(getattr(self, name)))
        if self.slice_rows != "auto":
            set_("slice_rows", int(self.slice_rows))
        for name in ("shuffle", "locality", "fresh"):
            set_(name, bool(getattr(self, name)))
        if self.zero_based != "auto":
            set_("zero_based", bool(self.zero_based))
        if self.block_rows is None:
            set_("block_rows", max(auto_slice_rows(None, 1) if self.slice_rows == "auto"
                                   else self.slice_rows, _MIN_BLOCK_ROWS))
