"""What several commands share: checking inputs and outputs, reading data, loading a
model file, labels and classes, the closing summary, an estimator's advice in flags."""
import math
import os
import sys
import time

import numpy as np

from onlinepgs.cli.errors import PROG, UsageError, UserError
from onlinepgs.streaming.errors import label_text


def check_input(source):
    """A readable input: a file, a named pipe or /dev/fd/N (process substitution), or -."""
    from onlinepgs.streaming import StreamError
    from onlinepgs.streaming.sources import FileSource

    try:
        FileSource(source)
    except StreamError as exc:
        raise UserError(str(exc)) from None


def open_reader(source, chunk_rows, zero_based):
    """DATA (checked first) as svmlight chunks of `chunk_rows` rows."""
    from onlinepgs.svmlight import iter_svmlight

    check_input(source)
    return iter_svmlight(source, chunk_rows=chunk_rows, zero_based=zero_based)


def check_output(path, inputs):
    """Fail before any work if `path` cannot be written, or would overwrite an input."""
    from onlinepgs.model_io.atomic import write_target

    if path.endswith(os.sep) or os.path.isdir(path):
        raise UserError(f"{path}: is a directory; give a file name")
    target, atomic = write_target(path)
    # a FIFO or /dev/fd/N is written in place: its directory need not be writable
    directory = os.path.dirname(os.path.abspath(target))
    if atomic and not os.path.isdir(directory):
        raise UserError(f"{path}: cannot write it: directory {directory} does not exist")
    if atomic and not os.access(directory, os.W_OK | os.X_OK):
        raise UserError(f"{path}: cannot write it: directory {directory} is not writable")
    for source in inputs:
        if source != "-" and os.path.exists(path) and os.path.exists(source) \
                and os.path.samefile(path, source):
            raise UserError(f"{path}: is also an input ({source}); write the output elsewhere")


def check_model(path):
    """A model file that exists and can be read, else one line naming it and why (not
    Python's "[Errno 2] ..."). A FIFO or device is left to the loader: opening it here
    would block or consume it."""
    import stat

    try:
        mode = os.stat(path).st_mode
        if stat.S_ISDIR(mode):
            raise UserError(f"{path}: is a directory, not a model file")
        if stat.S_ISREG(mode):
            with open(path, "rb"):
                pass
    except FileNotFoundError:
        raise UserError(f"{path}: no such model file") from None
    except PermissionError:
        raise UserError(f"{path}: cannot read the model file: permission denied") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read the model file: "
                        f"{(exc.strerror or str(exc)).lower()}") from None


def load(path, command):
    """The model of a file as its sklearn-free learner (`onlinepgs.model_io.load_learner`:
    the command never imports scikit-learn), with a note on stderr when the file is an
    unfinished run's checkpoint."""
    from onlinepgs.model_io import load_learner

    check_model(path)
    est, header = load_learner(path, return_header=True)
    extra = header.get("extra") or {}
    if extra.get("finished") is False:
        print(f"{PROG}: note: {path} is a checkpoint of an unfinished training run "
              f"({est.online_stats_['n_examples']} rows); {command} uses it as it is",
              file=sys.stderr)
    return est, extra


def data_base(args, extra):
    """--zero-based, or with "auto" the base the model was trained on, if recorded."""
    if args.zero_based == "auto" and isinstance(extra.get("zero_based"), bool):
        return extra["zero_based"]
    return args.zero_based


def parse_classes(text):
    labels = []
    for item in text.split(","):
        try:
            labels.append(float(item))
        except ValueError:
            raise UsageError(f"argument --classes: {item!r} is not a number") from None
        if not math.isfinite(labels[-1]):
            raise UsageError(f"argument --classes: {item!r} is not a finite number")
    labels = np.unique(labels)
    if labels.shape[0] < 2:
        raise UsageError(f"argument --classes: needs at least 2 distinct labels, got {text!r}")
    return labels


def check_labels(y, classes, source, line_of, what="the classes", why=""):
    """Labels outside the classes, named by their line (partial_fit knows no lines)."""
    from onlinepgs.streaming.engine import first_unknown_label

    i = first_unknown_label(y, classes)
    if i is not None:
        raise UserError(f"{source}:{line_of(i)}: label {label_text(y[i])} is not one of "
                        f"{what} [{', '.join(label_text(c) for c in classes)}]{why}")


def print_summary(est, args, start, before=(), after=()):
    """VW's closing lines on stderr, with extra lines before and after the regret bound."""
    stats = est.online_stats_
    lines = ["", "finished run", f"number of examples = {stats['n_examples']}",
             f"weighted example sum = {stats['sum_weight']:.1f}",
             f"average loss = {stats['progressive_loss']:.6f}"]
    if "progressive_error_rate" in stats:
        lines.append(f"progressive error rate = {stats['progressive_error_rate']:.6f}")
    lines += [*before, f"regret bound = {np.sum(stats['regret_bound']):.6g}", *after,
              f"seconds = {time.perf_counter() - start:.2f}", f"model = {args.output}"]
    print("\n".join(lines), file=sys.stderr)


def in_flags(text):
    """An estimator's advice in the command's options."""
    for name, flag in (("radius='auto'", "--radius auto"), ("radius=None", "--radius none"),
                       ("sigma=", "--sigma "), (" The model is left as it was.", ""),
                       ("n_bits (2**n_bits columns)", "--bits BITS (2**BITS columns)"),
                       ("max_model_bytes=", "--max-model-bytes "),
                       ("max_model_bytes (None: no limit)", "--max-model-bytes (none: no limit)")):
        text = text.replace(name, flag)
    return text


