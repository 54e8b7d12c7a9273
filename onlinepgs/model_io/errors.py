"""The error of the model file format, and the helpers its messages share.

`ModelFileError` is what every module of `onlinepgs.model_io` raises for a file it cannot
read or a model it cannot write: the file and a one-line reason. `short` and `describe`
keep the values and exceptions quoted in those reasons to one short line.
"""
import os

__all__ = ["ModelFileError", "short", "describe"]


class ModelFileError(ValueError):
    """A model file cannot be read or written: names the file and the reason.

    Attributes
    ----------
    path : str
        The model file.
    reason : str
        What is wrong with it (one line).
    """

    def __init__(self, path, reason):
        path = os.fspath(path) if path is not None else None
        reason = " ".join(str(reason).splitlines())
        super().__init__(path, reason)
        self.path = path
        self.reason = reason

    def __str__(self):
        printable = isinstance(self.path, str) and self.path.isprintable()
        shown = self.path if printable else repr(self.path)
        return f"{shown}: {self.reason}"


def describe(exc):
    """`exc` as ``"Type: message"`` (just the type when it has no message)."""
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def short(value):
    """The repr of `value`, cut to at most 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."

