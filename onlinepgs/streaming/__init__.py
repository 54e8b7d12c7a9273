"""Training over streams: passes, hold-out, checkpoints, exact resume, progress.

One engine trains a learner over sources read once or several times: svmlight files
(plain, .gz, .bz2, .xz), ``"-"`` for stdin, iterables of ``(x, y)`` records and
iterables of ``(X, y)`` chunks. The command line (``onlinepgs train``) and
``fit_stream`` are thin layers on it.

========================  ==================================================================
`train_stream`            train a learner over sources (the engine with checkpoints,
                          `StreamTrainer`)
`read_checkpoint`         a checkpoint's learner and stream position, to resume from
`whole_batches`           THE rounding of rows to whole mini-batches
`StreamError` & co.       errors that carry their place: file and line, or record number
========================  ==================================================================

The learner is duck-typed (see docs/design/streaming.md): this package imports no
scikit-learn.
"""
import importlib

# public name -> the module that defines it, imported on first use (PEP 562): the
# errors (`onlinepgs.streaming.errors`) and `whole_batches` then come without the engine,
# whose input checks import scipy
_HOMES = {
    "whole_batches": "_batches",
    **dict.fromkeys(["Progress", "StreamResult"], "engine"),
    **dict.fromkeys(["StreamTrainer", "train_stream", "read_checkpoint"], "trainer"),
    **dict.fromkeys(["ClassesError", "EmptyStreamError", "LabelError", "LearnerError",
                     "MissingLabelError", "OutOfMemory", "ReadOnceError", "ResumeError",
                     "StrayLabelError", "StreamError"], "errors"),
    **dict.fromkeys(["Checkpoint", "check_resume", "checkpoint_extra", "checkpoint_position"],
                    "checkpoints"),
    "read_ahead": "sources",
}

__all__ = ["whole_batches", "train_stream", "StreamTrainer", "StreamResult", "Progress",
           "Checkpoint", "read_checkpoint", "check_resume", "checkpoint_position",
           "checkpoint_extra",
           "read_ahead", "StreamError", "LabelError", "MissingLabelError", "ClassesError",
           "LearnerError", "StrayLabelError",
           "OutOfMemory", "ReadOnceError", "ResumeError", "EmptyStreamError"]


def __getattr__(name):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'onlinepgs.streaming' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"onlinepgs.streaming.{home}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
