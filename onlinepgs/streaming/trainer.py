"""The streaming engine with model files: `StreamTrainer` is the engine's passes
(`onlinepgs.streaming.engine.StreamPasses`) writing checkpoints as it goes and the final
model at the end, `train_stream` runs one, `read_checkpoint` reads a checkpoint back to
resume from. What a checkpoint holds, and its checks: `onlinepgs.streaming.checkpoints`.

Model files go through `onlinepgs.model_io` (`save_model`, `load_model`), which knows
the learners' classes; the learners' own ``fit_stream`` runs the passes without files.
"""
from onlinepgs.model_io.errors import ModelFileError
from onlinepgs.streaming.checkpoints import Checkpoint, checkpoint_position
from onlinepgs.streaming.engine import StreamPasses


class StreamTrainer(StreamPasses):
    """The streaming engine with checkpoints (see `train_stream` for an example).

    Parameters
    ----------
    learner, classes, passes, chunk_rows, zero_based, holdout_every, resume
        As for `onlinepgs.streaming.engine.StreamPasses` (``resume``: a checkpoint
        read by `read_checkpoint`).
    progress, next_report
        As for `onlinepgs.streaming.engine.StreamPasses`.
    checkpoint_path : str or None
        Model file written (atomically) every `checkpoint_every` rows with the stream
        position, and at the end with the final model (``extra["finished"]`` True).
    checkpoint_every : int or None
        Rows between checkpoints (needs `checkpoint_path`).
    extra : dict or None
        Kept in the ``extra`` of every model file the run writes (the command keeps
        its input's format there, so that predict reads data alike); a callable value
        is called at each save (e.g. the feature names collected so far).

    Attributes
    ----------
    last_checkpoint : int or None
        Rows of this run at the last checkpoint written (None: none yet), also after an
        error: the checkpoint file then holds that state.
    final_state : bool
        False: the run's last file holds the weights only (``train --no-state``); the
        checkpoints before it keep the solver state, which resuming needs.
    zero_based : bool or "auto"
        The feature base in use (decided by the first chunk when "auto").
    """

    def __init__(self, learner, *, classes=None, passes=1, chunk_rows=2000,
                 zero_based="auto", holdout_every=None, checkpoint_path=None,
                 checkpoint_every=None, resume=None, progress=None, next_report=None,
                 extra=None):
        self.checkpoint_path, self.checkpoint_every = checkpoint_path, checkpoint_every
        self.extra = dict(extra or {})
        self.final_state = True
        super().__init__(learner, classes=classes, passes=passes, chunk_rows=chunk_rows,
                         zero_based=zero_based, holdout_every=holdout_every, resume=resume,
                         progress=progress, next_report=next_report)

    def _save(self, extra):
        from onlinepgs.model_io import save_model

        # a callable value is the value at this save (e.g. the names collected so far)
        kept = {key: value() if callable(value) else value
                for key, value in self.extra.items()}
        save_model(self.learner, self.checkpoint_path, extra={**kept, **extra},
                   state=self.final_state or not extra["finished"])
        self.checkpoints += not extra["finished"]


def train_stream(learner, sources, **options):
    """Train `learner` over `sources`: passes, hold-out, checkpoints, resume, progress.

    Parameters
    ----------
    learner : PGSClassifier, PGSRegressor or any object of the same protocol
        Trained in place by ``partial_fit``; a trained one continues.
    sources : str, os.PathLike, list of them, or an iterable
        svmlight files (plain, .gz, .bz2, .xz; ``"-"`` is stdin; pipes too), read in
        order; or one iterable of ``(x, y)`` records (x a dict ``{feature: value}`` or a
        sequence of ``(feature, value)`` pairs) or of ``(X, y)`` chunks (X 2-D).
    **options
        Those of `StreamTrainer`: ``classes``, ``passes``, ``chunk_rows``,
        ``zero_based``, ``holdout_every``, ``checkpoint_path``, ``checkpoint_every``,
        ``resume``, ``progress``, ``next_report``, ``extra``.

    Returns
    -------
    StreamResult
        With the learner, the rows read and the held-out loss (``holdout_loss``).

    Raises
    ------
    StreamError
        With its place (``source``, ``line``, ``record``): a label outside the classes
        (`LabelError`), a refused ``partial_fit`` (`LearnerError`, its ``error``),
        several passes over a pipe or iterator (`ReadOnceError`), a checkpoint this
        run cannot resume (`ResumeError`), no rows (`EmptyStreamError`).
    onlinepgs.svmlight.SvmlightError
        A malformed line (file, line, column).

    Examples
    --------
    Two passes over a file, every 5th row held out:

    >>> import os, tempfile
    >>> import numpy as np
    >>> from onlinepgs import PGSClassifier
    >>> from onlinepgs.streaming import read_checkpoint, train_stream
    >>> folder = tempfile.mkdtemp()
    >>> data, model = os.path.join(folder, "d.svm"), os.path.join(folder, "m.pgs")
    >>> rng = np.random.RandomState(0)
    >>> lines = [f"{1 if a > b else -1} 1:{a:.4f} 2:{b:.4f}\\n" for a, b in rng.rand(200, 2)]
    >>> with open(data, "w") as f:
    ...     f.writelines(lines)
    >>> options = dict(passes=2, holdout_every=5, chunk_rows=30)
    >>> run = train_stream(PGSClassifier(sigma=1e-3), data, **options)
    >>> run.rows, run.holdout_rows, run.learner.online_stats_["n_examples"]
    (400, 40, 320)

    A run with a checkpoint every 40 rows stops at a bad line 151; resumed from its
    checkpoint on the repaired file, it ends with the model of the uninterrupted run:

    >>> broken = os.path.join(folder, "broken.svm")
    >>> with open(broken, "w") as f:
    ...     f.writelines(lines[:150] + ["1 1:oops\\n"] + lines[150:])
    >>> try:
    ...     train_stream(PGSClassifier(sigma=1e-3), broken, checkpoint_path=model,
    ...                  checkpoint_every=40, **options)
    ... except ValueError as error:
    ...     print(error.line)
    151
    >>> checkpoint = read_checkpoint(model)
    >>> checkpoint.position["rows"], checkpoint.learner.online_stats_["n_examples"]
    (120, 96)
    >>> resumed = train_stream(checkpoint.learner, data, resume=checkpoint,
    ...                        checkpoint_path=model, **options)
    >>> np.array_equal(resumed.learner.coef_, run.learner.coef_)
    True
    """
    return StreamTrainer(learner, **options).run(sources)


def read_checkpoint(path):
    """The learner and stream position of a checkpoint file, from one read (a running
    job may replace the file meanwhile).

    Raises
    ------
    onlinepgs.model_io.ModelFileError
        When the file is no model, or a model without a stream position (a finished
        run's: continue training it on new data instead), or a damaged position.

    Examples
    --------
    See `train_stream`.
    """
    from onlinepgs.model_io import load_model

    learner, header = load_model(path, return_header=True)
    extra = header.get("extra") or {}
    if "stream" not in extra:
        raise ModelFileError(path, "not a checkpoint (no stream position); train it on "
                                   "new data without resuming")
    base = extra.get("zero_based")
    n_examples = learner.online_stats_["n_examples"] if hasattr(learner, "online_stats_") \
        else None
    return Checkpoint(str(path), learner, checkpoint_position(path, extra, n_examples),
                      base if isinstance(base, bool) else None)
