"""Training over streams: passes, hold-out, checkpoints, exact resume, progress.

One engine trains a learner over sources read once or several times: svmlight files
(plain, .gz, .bz2, .xz), ``"-"`` for stdin, iterables of ``(x, y)`` records and
iterables of ``(X, y)`` chunks. The command line (``onlinepgs train``) and
``fit_stream`` are thin layers on it.

========================  ==================================================================
`train_stream`            train a learner over sources (the engine, `StreamTrainer`)
`read_checkpoint`         a checkpoint's learner and stream position, to resume from
`whole_batches`           THE rounding of rows to whole mini-batches
`StreamError` & co.       errors that carry their place: file and line, or record number
========================  ==================================================================

The learner is duck-typed (see docs/design/streaming.md): this package imports no
scikit-learn.
"""
from onlinepgs.streaming._batches import whole_batches
from onlinepgs.streaming.engine import (Progress, StreamResult, StreamTrainer,
                                        train_stream)
from onlinepgs.streaming.errors import (ClassesError, EmptyStreamError, LabelError,
                                        LearnerError, OutOfMemory, ReadOnceError,
                                        ResumeError, StreamError)
from onlinepgs.streaming.checkpoints import (Checkpoint, check_resume, checkpoint_extra,
                                             checkpoint_position, read_checkpoint)
from onlinepgs.streaming.sources import read_ahead

__all__ = ["whole_batches", "train_stream", "StreamTrainer", "StreamResult", "Progress",
           "Checkpoint", "read_checkpoint", "check_resume", "checkpoint_position",
           "checkpoint_extra",
           "read_ahead", "StreamError", "LabelError", "ClassesError", "LearnerError",
           "OutOfMemory", "ReadOnceError", "ResumeError", "EmptyStreamError"]
