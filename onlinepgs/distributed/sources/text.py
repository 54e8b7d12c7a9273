"""What the text sources (bags of lines, files) share: svmlight parsing's decisions
and error positions."""
from onlinepgs.distributed import _estimator as estimator_api
from onlinepgs.svmlight import SvmlightError, iter_svmlight

__all__ = ["decide_zero_based", "relocated", "row_line", "text_width"]


_PEEK_ROWS = 10_000  # rows that decide zero_based="auto" (iter_svmlight's first chunk)


def text_width(est, n_features):
    """The width text input declares: 2**n_bits when hashing, else ``n_features``
    (0 if not given: the rows tell it as they are read)."""
    n_bits = estimator_api.hashing_bits(est)
    return 2**n_bits if n_bits is not None else (n_features or 0)


def decide_zero_based(source, undecided=False):
    """zero_based="auto" as `iter_svmlight` decides it: from the first chunk (`undecided`
    where it has no feature index)."""
    reader = iter_svmlight(source, chunk_rows=_PEEK_ROWS)
    with reader:
        for _ in reader:
            break
        decided = reader.zero_based
    return bool(decided) if decided is not None else undecided


def relocated(exc, name, line):
    """An SvmlightError re-addressed to a file (or bag partition) and its line."""
    message = str(exc)
    prefix = f"{exc.source}:{exc.line}:"
    if message.startswith(prefix):
        message = f"{name}:{line}:" + message[len(prefix):]
    return SvmlightError(message, name, line, exc.column, exc.text)


def row_line(text, row):
    """The 1-based line of svmlight `text` that holds its row `row` (0-based): rows are
    the lines that are not blank or only a comment."""
    rows = -1
    for i, line in enumerate(text.split(b"\n")):
        if line.split(b"#", 1)[0].strip():
            rows += 1
            if rows == row:
                return i + 1
    raise AssertionError(f"the text holds {rows + 1} rows, not {row + 1}")
