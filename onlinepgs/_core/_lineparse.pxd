# cython: language_level=3
"""What the compiled line parsers share (svmlight, VW text, CSV): the statuses of the
parser protocol of `onlinepgs._lines.LineReader`, a line's outcome, and where a bad line
went wrong (kept as offsets into the block being parsed, turned into the reader's error
by `error_info`)."""
from libc.stdint cimport int64_t

cdef enum:
    # parse() statuses
    ST_DONE = 0        # every line up to `end` consumed
    ST_FULL = 1        # the chunk is full (parse again from the returned position)
    ST_ERROR = 2       # a bad line with on_error="raise" (see error_info)
    ST_NOMEM = 3
    ST_SKIPPED = 4     # with on_error="skip", the first bad line, skipped (see error_info,
                       # valid until the next call; parse again from the returned position)

cdef enum:
    # line outcomes
    LINE_EMPTY = 0
    LINE_ROW = 1
    LINE_ERROR = 2
    LINE_NOMEM = 3


cdef struct BadLine:
    int kind               # the parser's error kind (an index into its ERROR_KINDS)
    int64_t line           # 1-based line number
    Py_ssize_t line_start, bad_start, bad_end, tok_start, tok_end  # offsets in the block


cdef inline int mark_bad(BadLine* bad_line, int kind, int64_t line_number,
                         const char* base, const char* line, const char* bad,
                         const char* bad_end, const char* tok,
                         const char* tok_end) noexcept nogil:
    """Record a bad line (the bad text [bad, bad_end) within the token [tok, tok_end));
    returns LINE_ERROR."""
    bad_line.kind = kind
    bad_line.line = line_number
    bad_line.line_start = line - base
    bad_line.bad_start = bad - base
    bad_line.bad_end = bad_end - base
    bad_line.tok_start = tok - base
    bad_line.tok_end = tok_end - base
    return LINE_ERROR


cdef inline tuple bad_line_info(BadLine bad_line, kinds):
    """(kind, line, column, bad slice, token slice): the slices are (start, stop) offsets
    into the block passed to `parse`, the column 1-based in bytes."""
    return (kinds[bad_line.kind], bad_line.line,
            bad_line.bad_start - bad_line.line_start + 1,
            (bad_line.bad_start, bad_line.bad_end), (bad_line.tok_start, bad_line.tok_end))
