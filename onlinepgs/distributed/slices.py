"""How many rows a lane trains per round with ``slice_rows="auto"`` (`auto_slice_rows`).

A pass's first round gives each lane ``n_rows / (8 n_lanes)`` rows of a stream of known
length (the driver grows the later rounds, `Driver._grown`); no slice holds more than
``SLICE_BYTES_MAX`` bytes of rows as the core takes them (a lane holds about two: the one
it trains and the one read ahead).
"""
import math

__all__ = ["auto_slice_rows", "rows_within_bytes"]


# slice_rows="auto" (see onlinepgs.dask.fit): rounds a pass, the fewest rows a lane
# trains per round, and the most bytes of rows a slice may hold (a lane holds about two:
# the one it trains and the one read ahead)
ROUNDS_PER_PASS = 8
SLICE_ROWS = 65536
SLICE_BYTES_MAX = 256 * 2**20


def auto_slice_rows(n_rows, n_lanes, row_bytes=None):
    """The rows a lane trains in a pass's first round with ``slice_rows="auto"``; later
    rounds train as many as the lane trained in the pass before them (see
    `onlinepgs.dask.fit`).

    Parameters
    ----------
    n_rows : int or None
        Rows in a pass over the stream; None where unknown (bags, files).
    n_lanes : int
        Lanes of each round.
    row_bytes : float, optional
        Bytes of a row as the core takes it (its entries, indices, label, weight); `fit`
        measures it on the first block it reads.

    Returns
    -------
    int
        ``n_rows / (rounds n_lanes)`` rounded up, with 8 rounds a pass, or more where 8
        slices would hold over 256 MiB of rows each (the rounds then as few as keep
        them within it, all of a size); at least 65536 rows, unless 65536 of them hold
        over 256 MiB (then as many as it holds, at least one); 65536 for an unknown
        length. Long slices move the model away from sequential PGS; many small ones
        cost more than they train (see `fit`). The 256 MiB apply to what a lane holds
        of the slice's rows, which `fit` passes as `row_bytes` (see `fit`); the slices
        of the later rounds keep within them too.

    Examples
    --------
    >>> from onlinepgs.dask import auto_slice_rows
    >>> auto_slice_rows(2_000_000, 2), auto_slice_rows(None, 2)
    (125000, 65536)
    >>> auto_slice_rows(10_000_000, 2), auto_slice_rows(10_000_000, 2, row_bytes=500)
    (625000, 500000)
    """
    if n_rows is None:
        return SLICE_ROWS
    n_rows, n_lanes = int(n_rows), int(n_lanes)
    rounds, most = ROUNDS_PER_PASS, None
    if row_bytes is not None and row_bytes > 0:
        rounds = max(rounds, math.ceil(n_rows * row_bytes / (n_lanes * SLICE_BYTES_MAX)))
        most = rows_within_bytes(row_bytes)
    rows = max(-(-n_rows // (rounds * n_lanes)), SLICE_ROWS)
    return int(rows if most is None else min(rows, most))


def rows_within_bytes(row_bytes):
    """The most rows of `row_bytes` bytes a slice may hold (at least one)."""
    return max(1, int(SLICE_BYTES_MAX // row_bytes))
