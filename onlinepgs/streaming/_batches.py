"""THE rounding of rows to whole mini-batches (every chunked or sliced path uses it)."""


def whole_batches(rows, batch_size):
    """The smallest multiple of `batch_size` that holds `rows` rows.

    Every chunked or sliced path rounds its chunks with this, so that a model trained with
    mini-batches does not depend on where a stream was cut.

    Examples
    --------
    >>> whole_batches(10, 4)
    12
    >>> whole_batches(8, 4)
    8
    """
    batch_size = int(batch_size)
    return -(-int(rows) // batch_size) * batch_size
