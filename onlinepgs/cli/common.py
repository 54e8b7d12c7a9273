"""What several commands share: checking inputs and outputs, reading data, loading a
model file, the learner the options describe, labels and classes, the closing summary,
an estimator's advice in flags."""
import math
import os
import sys
import time

from onlinepgs._options import CSV_OPTIONS  # train's CSV options (the reader's parameters)
from onlinepgs.cli.errors import PROG, UsageError, UserError
from onlinepgs.streaming.errors import label_text


def check_input(source, fmt="svmlight"):
    """A readable input: a file, a named pipe or /dev/fd/N (process substitution), or -."""
    from onlinepgs.streaming import StreamError
    from onlinepgs.streaming.sources import FileSource

    try:
        FileSource(source, fmt)
    except StreamError as exc:
        raise UserError(str(exc)) from None


def open_reader(source, chunk_rows, zero_based, reading=None, skip=False):
    """DATA (checked first) as chunks of `chunk_rows` rows: svmlight, or as `reading`
    says (`reading_of`: the format, its hashing and CSV columns); `skip`
    (--skip-bad-lines): bad lines are skipped and counted (`print_skipped`)."""
    from onlinepgs.formats import open_reader as open_format

    fmt, spec, columns = reading or ("svmlight", None, None)
    check_input(source, fmt)
    return open_format(source, fmt, chunk_rows=chunk_rows, zero_based=zero_based,
                       spec=spec, columns=columns, on_error="skip" if skip else "raise")


def print_skipped(source, n_skipped, first):
    """--skip-bad-lines: how many lines of `source` were skipped, and the first's
    error (its place and reason), on stderr; nothing when none were."""
    if n_skipped:
        where = f"; the first: {first}" if first else ""
        print(f"{PROG}: {source}: skipped {n_skipped} bad line"
              f"{'s' if n_skipped != 1 else ''}{where}", file=sys.stderr)


def reader_skipped(source, reader):
    """`print_skipped` for a reader read to its end."""
    print_skipped(source, getattr(reader, "n_skipped", 0),
                  getattr(reader, "first_skipped", None))


# VW text hashed as VW hashes it (numeric names index as their number plus the
# namespace's hash); a model of VW text without it was trained reading them as text
VW_HASHING = 2


def train_input(args):
    """train's input as the model file keeps it (``extra["input"]``): the format (the
    first DATA's) and the CSV columns; sets ``args.bits`` (-b, default 18 for a hashed
    format) and ``args.interactions`` (-q and --interactions together: the learner's
    parameter, saved with it). What the input cannot use was refused before
    (`onlinepgs._options.check_command`)."""
    from onlinepgs.formats import DEFAULT_BITS, HASHED, format_of

    formats = [format_of(source, args.format) for source in args.data]
    hashed = any(fmt in HASHED for fmt in formats)
    args.interactions = list(args.quadratic or []) + list(args.interactions or [])
    columns = {name: getattr(args, name) for name in CSV_OPTIONS
               if getattr(args, name) is not None}
    if hashed and args.bits is None:
        args.bits = DEFAULT_BITS  # VW's -b default: names need hashing
    out = {"format": formats[0]}
    if formats[0] == "vw":
        out["vw_hashing"] = VW_HASHING
    if columns:
        out["columns"] = columns
    return out


def reading_of(source, est, extra, given=None, scoring=True):
    """How to read `source` for a model (predict, eval, gap, train -i): the format
    (`given` --format, else the one the model was trained on, else by the extension;
    an extension naming a hashed format wins over the model's hashed format: a .vw file
    is VW text for a model trained on CSV, hashed alike; stdin is read as the model's),
    the model's hashing and interactions, the CSV columns it was trained with (`scoring`:
    and, for CSV/TSV, the model's header, which the file must match; training on with
    -i may bring new columns)."""
    from onlinepgs.features import FeatureSpec
    from onlinepgs.formats import DEFAULT_BITS, format_of

    from onlinepgs.formats import HASHED

    kept = extra.get("input") if isinstance(extra.get("input"), dict) else {}
    fmt = given or (kept.get("format") if kept.get("format") in _formats() else None)
    named = format_of(source)  # by the extension (svmlight: none of the others)
    if not given and fmt in HASHED and named in HASHED:
        fmt = named  # test.vw for a model of CSV logs: VW text (hashed as the model)
    fmt = format_of(source, fmt)
    if fmt == "svmlight":
        return fmt, None, None
    n_bits = getattr(est, "n_bits", None) or DEFAULT_BITS
    # the interactions are the learner's parameter (saved with it): one home
    spec = FeatureSpec(n_bits, getattr(est, "hash_seed", 0) or 0,
                       tuple(getattr(est, "interactions", None) or ()))
    columns = kept.get("columns")
    if fmt == "vw":
        # a model of VW text trained before VW's hashing of numeric names reads them so
        old = kept.get("format") == "vw" and kept.get("vw_hashing") != VW_HASHING
        return fmt, spec, ({"vw_numbers": False} if old else None)
    header = kept.get("header")
    if scoring and fmt in ("csv", "tsv") and kept.get("format") in ("csv", "tsv") and \
            isinstance(header, list) and all(isinstance(name, str) for name in header):
        # the model's columns: a file with others is refused (the first mismatch named)
        columns = {**(columns or {}), "expected_columns": header}
    return fmt, spec, columns


def _formats():
    from onlinepgs.formats import FORMATS

    return FORMATS


def check_output(path, inputs):
    """Fail before any work if `path` cannot be written, or would overwrite an input
    (`path` None: nothing is written)."""
    if path is None:
        return
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
    the command never imports scikit-learn), its reported model only (state=False: not
    the solver states, whose memory may be many times the weights'), with a note on
    stderr when the file is an unfinished run's checkpoint."""
    from onlinepgs.model_io import load_learner

    check_model(path)
    est, header = load_learner(path, return_header=True, state=False)
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


# the most labels a range of --classes may give: a slip such as 1..1e9 is refused, not
# allocated (a model has a weight vector per class)
MAX_RANGE = 100_000


def parse_classes(text):
    """--classes: comma-separated labels and integer ranges A..B (both ends included),
    e.g. "-1,1", "1..20" or "0,2..5"; sorted and distinct, at least two."""
    labels = []
    for item in text.split(","):
        if ".." in item:
            labels.extend(_class_range(item))
            continue
        try:
            labels.append(float(item))
        except ValueError:
            raise UsageError(f"argument --classes: {item!r} is not a number or a range "
                             "such as 1..20") from None
        if not math.isfinite(labels[-1]):
            raise UsageError(f"argument --classes: {item!r} is not a finite number")
    # here: `onlinepgs info` imports this module, numpy-free
    from onlinepgs._checks import unique  # np.unique would import numpy.ma

    labels = unique(labels)
    if labels.shape[0] < 2:
        raise UsageError(f"argument --classes: needs at least 2 distinct labels, got {text!r}")
    return labels


def _class_range(item):
    """The labels of one range A..B of --classes (integers, A <= B)."""
    first, _, last = item.partition("..")
    try:
        first, last = int(first), int(last)
    except ValueError:
        raise UsageError(f"argument --classes: range {item!r} needs integer ends, "
                         "e.g. 1..20") from None
    if first > last:
        raise UsageError(f"argument --classes: range {item!r} is empty (its start is "
                         "after its end)")
    if last - first + 1 > MAX_RANGE:
        raise UsageError(f"argument --classes: range {item!r} gives {last - first + 1} "
                         f"labels, more than {MAX_RANGE}")
    return range(first, last + 1)


def class_note(classes, origin):
    """The note that says which classes a run uses and where they came from (a long
    list shortened to its ends and its count)."""
    names = [label_text(c) for c in classes]
    if len(names) > 12:
        names = names[:5] + ["...", *names[-2:]]
        origin = f"{len(classes)} classes, {origin}"
    return f"{PROG}: classes {', '.join(names)} ({origin})"


def check_labels(y, classes, source, line_of, what="the classes", why=""):
    """Labels outside the classes, named by their line (partial_fit knows no lines)."""
    from onlinepgs.streaming.engine import first_unknown_label

    i = first_unknown_label(y, classes)
    if i is not None:
        raise UserError(f"{source}:{line_of(i)}: label {label_text(y[i])} is not one of "
                        f"{what} [{', '.join(label_text(c) for c in classes)}]{why}")


def estimator_from_args(args):
    """The learner the options describe (`onlinepgs.pgs`, or `onlinepgs.sdca` with
    ``--solver sdca``; `onlinepgs._options.learner_params`, whose rules `main` checked):
    sklearn-free, so that the command never imports scikit-learn."""
    from onlinepgs._options import learner_params

    solver, task, params = learner_params(args)
    args.sigma = params["sigma"]  # its default decided: "auto" (PGS) or 1e-4 (SDCA)
    if solver == "sdca":
        from onlinepgs.sdca import SDCAClassifierLearner as classifier
        from onlinepgs.sdca import SDCARegressorLearner as regressor
    else:
        from onlinepgs.pgs import PGSClassifierLearner as classifier
        from onlinepgs.pgs import PGSRegressorLearner as regressor
    return (classifier if task == "classifier" else regressor)(**params)


def _sigma_note(est):
    """The summary's lines on the races' choices: ``sigma = 1e-03 (auto: ...)`` when the
    model races sigma (sigma="auto"), ``eta = 0.5 (auto: ...)`` when it races the
    adaptive geometry's base rate (eta="auto"); else none."""
    params, lines = est.get_params(), []
    path = est.sigma_path_
    live = getattr(est, "_race", None)
    if params.get("sigma") == "auto":
        tried = sorted({run["sigma"] for record in path for run in record.get("runs", ())}
                       | {est.sigma_}, reverse=True)
        state = ("settled" if live is None or live.schedule.settled else
                 f"racing on: {len(live.states)} run{'s' if len(live.states) > 1 else ''} "
                 "live")
        # the sigma in full (the grid's steps are half decades: 3.16e-06, not 3e-06, which
        # a user giving --sigma would train another model with)
        lines.append(f"sigma = {est.sigma_!r} (auto: the best progressive loss of "
                     f"{len(tried)} sigmas tried, {tried[0]:.3g}..{tried[-1]:.3g}; {state})")
    if params.get("geometry") == "adaptive" and params.get("eta") == "auto":
        chosen = [r for r in path if r["event"] == "eta"]
        how = (f"chosen at row {chosen[-1]['rows']:,}" if chosen else
               "racing on: the run of least progressive loss so far")
        from onlinepgs._eta_race import etas_for  # the rates, from their one home

        etas = etas_for(float(params.get("p", 2.0)))[0]
        rates = ", ".join(f"{e:g}" for e in etas[:-1]) + f" and {etas[-1]:g}"
        lines.append(f"eta = {est.eta_:g} (auto: {rates} raced; {how})")
    return lines


def print_summary(est, args, start, before=(), after=()):
    """VW's closing lines on stderr, with extra lines before and after the regret bound
    (and sigma's choice after them, when the model races it)."""
    import numpy as np  # here: `onlinepgs info` imports this module, numpy-free

    stats = est.online_stats_
    lines = ["", "finished run", f"number of examples = {stats['n_examples']}",
             f"weighted example sum = {stats['sum_weight']:.1f}",
             f"average loss = {stats['progressive_loss']:.6f}"]
    if "progressive_error_rate" in stats:
        lines.append(f"progressive error rate = {stats['progressive_error_rate']:.6f}")
    if "progressive_loss_last" in stats and est._settled()["iterate"] != "last":
        # the averaged model's figures above; the last iterate's, which PGS steps from
        rate = stats.get("progressive_error_rate_last")
        lines.append(f"last iterate: average loss = {stats['progressive_loss_last']:.6f}"
                     + ("" if rate is None else f", progressive error rate = {rate:.6f}"))
    if getattr(est, "geometry", "global") == "adaptive":
        regret = "none with --geometry adaptive (the bound is the global geometry's)"
    elif getattr(est, "forget", 1.0) == 1.0:
        regret = f"{np.sum(stats['regret_bound']):.6g}"
    else:
        regret = "none with --forget (the bound is the unweighted objective's)"
    lines += [*before, f"regret bound = {regret}", *after, *_sigma_note(est),
              nonzero_line(est),
              f"seconds = {time.perf_counter() - start:.2f}", f"model = {saved(args.output)}"]
    print("\n".join(lines), file=sys.stderr)


def nonzero_text(nonzero, total):
    """``1,234 non-zero of 262,144 (0.471%)``: a model's non-zero weights (intercepts
    excluded) among its weights, as the summary and ``info`` say it."""
    share = f" ({100 * nonzero / total:.3g}%)" if total else ""
    return f"{nonzero:,} non-zero of {total:,}{share}"


def nonzero_line(est):
    """The summary's line on the model's non-zero weights (l1 makes zeros)."""
    model = est.model_
    return f"weights = {nonzero_text(model.n_nonzero, model.n_problems * model.n_features)}"


def unsaved(args):
    """The note of a run without -o (VW's habit: watch the table, keep nothing), or None.
    It goes above the progress table (`ProgressTable.notes`), or with --quiet after a
    successful run: an error before any trained row stays the only line printed."""
    if args.output is None:
        return f"{PROG}: note: no -o MODEL: the model is trained and summarised but not saved"
    return None


def saved(output):
    """The summary's ``model =`` value: the file written, or that none was."""
    return "not saved (no -o)" if output is None else output


def save(est, output, extra, state=True):
    """`save_model` to the file of -o, if one was given (without the solver state if not
    `state`: --no-state)."""
    from onlinepgs.model_io import save_model

    if output is not None:
        save_model(est, output, extra=extra, state=state)


def in_flags(text):
    """An estimator's advice in the command's options."""
    for name, flag in (("radius='auto'", "--radius auto"), ("radius=None", "--radius none"),
                       ("geometry='adaptive'", "--geometry adaptive"),
                       ("sigma=", "--sigma "), (" The model is left as it was.", ""),
                       ("n_bits (2**n_bits columns)", "--bits BITS (2**BITS columns)"),
                       ("max_model_bytes=", "--max-model-bytes "),
                       ("max_model_bytes (None: no limit)", "--max-model-bytes (none: no limit)")):
        text = text.replace(name, flag)
    return text


