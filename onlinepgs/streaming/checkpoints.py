"""Checkpoints: a model file whose ``extra`` holds the stream position to resume from.

The position (``extra["stream"]``) is a JSON object::

    {"data": [names of the sources], "pass": p, "file": f, "rows": r,
     "pass_rows": rows of pass p before source f, "holdout": [loss sum, rows],
     "holdout_every": N or null, "passes": P, "start_examples": n0}

meaning: passes 0..p-1 and sources 0..f-1 of pass p are in the model, and the first
``r`` rows of source f (its rows, held-out ones included, counted from 0). ``holdout``
sums the held-out losses of pass p up to there. The run options that decide which rows
are trained (``holdout_every``, ``passes``) are recorded so that a resume with other
values is refused rather than silently training other rows. ``start_examples`` is the
rows the model had trained on when the run began (a run of ``-i MODEL`` continues one).

Every field is checked against the others and against the model it is saved with: the
held-out rows of the pass are every N-th of its ``pass_rows + rows`` rows, and the model
has trained on ``start_examples + p T + (pass_rows + rows - held)`` rows for some whole
pass of T >= that last term (T = that term when p = 0). A hand-edited position fails
these checks rather than resuming into another model.

This module reads and writes no file: `onlinepgs.streaming.trainer` does
(`StreamTrainer` writes checkpoints, `read_checkpoint` reads one).
"""
from typing import Any, NamedTuple

from onlinepgs.model_io.errors import ModelFileError
from onlinepgs.streaming.errors import ResumeError

# the run options that decide which rows are trained, recorded in a position
RUN_OPTIONS = ("holdout_every", "passes")


def checkpoint_extra(zero_based, finished, position=None):
    """The engine's record in a model file: whether the run finished, a checkpoint's
    stream position, and the feature base its files were read with (so that predict,
    eval and a continued run read them alike)."""
    out = {"finished": finished}
    if position is not None:
        out["stream"] = position
    if isinstance(zero_based, bool):
        out["zero_based"] = zero_based
    return out


# the largest count a position may hold (rows of a stream, examples): far beyond any
# stream, and within int64 so that no arithmetic on it overflows
MAX_COUNT = 2**53


def checkpoint_position(path, extra, n_examples=None):
    """The stream position of a checkpoint's ``extra``, every field checked for its type
    and range and against the others, and against ``n_examples``, the rows the model
    saved with it has trained on, where given (a hand-edited file must not skip
    training, train other rows or crash).

    Raises
    ------
    onlinepgs.model_io.ModelFileError
        Naming the file, the field and its value.
    """
    position = extra["stream"]

    def bad(field, why):
        value = position if field is None else position[field]
        name = "extra.stream" + ("" if field is None else f".{field}")
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        return ModelFileError(path, f"checkpoint position {name} is {shown}: {why}")

    def count(value, low):
        return type(value) is int and low <= value <= MAX_COUNT

    if not isinstance(position, dict):
        raise bad(None, "not an object")
    for field in ("pass", "file", "rows"):
        if field not in position:
            raise ModelFileError(path, f"checkpoint position extra.stream has no {field!r}")
    for field in ("pass", "file", "rows", "pass_rows", "start_examples"):
        if field in position and not count(position[field], 0):
            raise bad(field, "not a non-negative integer (at most 2**53)")
    if "passes" in position and not count(position["passes"], 1):
        raise bad("passes", "not a positive integer (at most 2**53)")
    if position.get("holdout_every") is not None and not count(position["holdout_every"], 1):
        raise bad("holdout_every", "neither null nor a positive integer (at most 2**53)")
    if "data" in position and not (isinstance(position["data"], list) and position["data"]
                                   and all(isinstance(name, str) for name in position["data"])):
        raise bad("data", "not a list of file names")
    if "holdout" in position:
        held = position["holdout"]
        if not (isinstance(held, list) and len(held) == 2
                and all(type(v) in (int, float) and v >= 0 for v in held)  # NaN: False
                and float(held[1]).is_integer()
                and held[1] <= position.get("pass_rows", 0) + position["rows"]):
            raise bad("holdout", "not [loss sum >= 0, held-out rows <= the rows read in "
                                 "the pass]")
    if "passes" in position and position["pass"] >= position["passes"]:
        raise bad("pass", f"beyond the run's {position['passes']} pass(es) "
                          "(extra.stream.passes; counted from 0)")
    if "data" in position and position["file"] >= len(position["data"]):
        raise bad("file", f"beyond the run's {len(position['data'])} file(s) "
                          "(extra.stream.data; counted from 0)")
    _check_counts(path, position, bad, n_examples)
    return position


def _check_counts(path, position, bad, n_examples):
    """The position's counts against each other and the model's (module docstring)."""
    read = position.get("pass_rows", 0) + position["rows"]  # rows of this pass so far
    every = position.get("holdout_every")
    if "holdout" in position and "holdout_every" in position:
        held = read // every if every else 0
        if position["holdout"][1] != held:
            raise bad("holdout", f"not {held} held-out rows: every "
                      f"{every}-th of the pass's {read} rows (extra.stream.pass_rows + "
                      "rows)" if every else "held-out rows in a run without a hold-out")
    if n_examples is None or "start_examples" not in position:
        return  # written before the start was recorded: the fields' own checks only
    held = int(position["holdout"][1]) if "holdout" in position else 0
    this_pass = read - held
    earlier = n_examples - position["start_examples"] - this_pass
    p = position["pass"]
    if earlier < 0 or (p == 0 and earlier) or (p and (earlier % p or earlier // p < this_pass)):
        fields = ", ".join(f"{name} {position[name]}" for name in
                           ("start_examples", "pass", "pass_rows", "rows") if name in position)
        raise ModelFileError(path, f"checkpoint position extra.stream ({fields}; {held} "
                             f"held out) is not this model's: it has trained on "
                             f"{n_examples} rows, which {p} whole pass(es) and the "
                             f"{this_pass} rows trained of pass {p} after start_examples "
                             "do not make")


class Checkpoint(NamedTuple):
    """What a run resumes from: the checkpoint's `path` (named in messages), its
    `learner`, its validated stream `position` and the feature base it read its files
    with (`zero_based`: True, False or None when not recorded)."""

    path: str
    learner: Any
    position: dict
    zero_based: Any = None


def check_resume(checkpoint, names, passes, holdout_every):
    """Refuse to resume `checkpoint` with run options other than its run's, or over
    sources or passes that do not reach its position (`ResumeError`, before any work).

    A position written before the run options were recorded is checked against what it
    has. `names` are this run's sources' names.
    """
    position, given = checkpoint.position, {"passes": passes, "holdout_every": holdout_every}
    for name in RUN_OPTIONS:
        if name in position and position[name] != given[name]:
            raise ResumeError(
                name, position[name], given[name],
                f"the checkpoint {checkpoint.path} was written by a run with {name}="
                f"{position[name]}, this one has {name}={given[name]}; resume with the "
                "same value (it decides which rows are trained)")
    files = position.get("data")
    if isinstance(files, list) and len(files) != len(names):
        # a pass is the files in turn: other files than the run's make other passes
        # (another file's name is only noted: a file moved or renamed reads the same)
        raise ResumeError("files", len(files), len(names),
                          f"the checkpoint {checkpoint.path} was written by a run over "
                          f"{len(files)} file(s) ({', '.join(map(str, files))}), this one "
                          f"reads {len(names)}; resume over as many files, in the same "
                          "order (each pass reads them in turn)")
    if position["pass"] >= passes:
        raise ResumeError("pass", position["pass"], passes,
                          f"the checkpoint {checkpoint.path} resumes in pass "
                          f"{position['pass'] + 1} (extra.stream.pass = {position['pass']}), "
                          f"this run has passes={passes}")
    if position["file"] >= len(names):
        raise ResumeError("file", position["file"], len(names),
                          f"the checkpoint {checkpoint.path} resumes in file "
                          f"{position['file'] + 1} (extra.stream.file = {position['file']}), "
                          f"this run reads {len(names)} file(s)")
