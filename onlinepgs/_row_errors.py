"""Errors that name rows of the call and carry them as data (`AtRows`, `RowError`).

Their own module, importing nothing of the package: the compiled core (the hashing of
records, `onlinepgs._core._hashing`), the input checks (`onlinepgs._checks`, which
re-exports them), the learners and the readers raise them, and the streaming engine
rewords them in a stream's terms (record 17, line 42 of a file).
"""


class AtRows:
    """What an error that concerns rows of the call has: its rows as data.

    ``pieces`` is the message as text (str) and rows of the call (ints, from 0) in turn;
    ``rows`` the rows it names and ``row`` the one to blame (by default the first).
    ``str(error)`` names each row in the call's words (``_in_call``: "row 3");
    `worded` names them in a caller's (`fit_stream`: "record 17 of the stream"), so a
    caller that counts rows its own way rewords the same sentence without parsing it.
    """

    pieces = ()
    rows = ()
    row = None

    @staticmethod
    def _in_call(row):
        return f"row {row}"

    def _message(self, pieces, row=None):
        """Record `pieces` (or a plain message) and return the message in the call's words."""
        self.pieces = (pieces,) if isinstance(pieces, str) else tuple(pieces)
        self.rows = tuple(int(p) for p in self.pieces if not isinstance(p, str))
        self.row = row if row is not None else (self.rows[0] if self.rows else None)
        return self.worded(self._in_call)

    def worded(self, name):
        """The message with row i of the call named ``name(i)``."""
        return "".join(p if isinstance(p, str) else name(int(p)) for p in self.pieces)


class RowError(AtRows, ValueError):
    """Bad input at a row of the call: ``RowError(3, ": string feature 'w' needs
    hashing")`` says "row 3: string feature 'w' needs hashing" and has ``row == 3``
    (see `AtRows`; ``row=`` blames another row than the first named)."""

    def __init__(self, *pieces, row=None):
        super().__init__(self._message(pieces, row))
