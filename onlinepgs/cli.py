"""The ``onlinepgs`` command: train, predict, eval, gap and info on svmlight files and streams.

Examples
--------
Train on a gzipped file with two passes, keep a checkpoint every 100,000 rows, then
evaluate on a test file::

    onlinepgs train train.svm.gz -o model.pgs --loss logistic --sigma 1e-5 --passes 2 \\
        --checkpoint-every 100000
    onlinepgs eval model.pgs test.svm.gz
    onlinepgs gap model.pgs train.svm.gz    # how far from the optimum of its objective
    zcat more.svm.gz | onlinepgs train - -i model.pgs -o model2.pgs

Train on a Dask cluster (see onlinepgs.dask), or on Dask's threads on this machine::

    onlinepgs train part-*.svm -o model.pgs --scheduler tcp://10.0.0.5:8786 --passes 2
    onlinepgs train train.svm -o model.pgs --scheduler threads --lanes 2

Exit codes: 0 success, 2 usage errors, 1 data or model errors (one line on stderr).
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np

from onlinepgs._core import CLASSIFICATION_LOSSES, ITERATES, REGRESSION_LOSSES

PROG = "onlinepgs"


class UserError(Exception):
    """A data, model or argument problem: reported in one line, exit code 1."""


class UsageError(Exception):
    """An option's value the estimator refuses: reported as argparse does, exit code 2."""


# ---- argument parsing --------------------------------------------------------------------
def _radius(text):
    if text in ("auto", "none", "None"):
        return None if text.lower() == "none" else "auto"
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'auto', 'none' or a number, got {text!r}")
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"radius must be positive and finite, got {text!r}")
    return value


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _zero_based(text):
    choices = {"auto": "auto", "0": True, "1": False}
    if text not in choices:
        raise argparse.ArgumentTypeError("expected auto, 0 (zero-based) or 1 (one-based)")
    return choices[text]


def _model_bytes(text):
    """--max-model-bytes: bytes, with an optional K/M/G/T suffix (powers of 1024), or none."""
    if text.strip().lower() == "none":
        return None
    number, scale = text.strip(), 1
    if number[-1:].upper() in _SIZE_SUFFIXES:
        number, scale = number[:-1], _SIZE_SUFFIXES[number[-1].upper()]
    try:
        value = float(number) * scale
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 1):
        raise argparse.ArgumentTypeError(
            f"expected a size in bytes such as 4G, 512M or 1000000000, or none; got {text!r}")
    return int(value)


_SIZE_SUFFIXES = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def build_parser():
    parser = argparse.ArgumentParser(
        prog=PROG, description="Primal Gradient Solver: streaming l_p-regularized linear "
        "learning on svmlight/libsvm data (plain, .gz, .bz2, .xz, or - for stdin).")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    train = sub.add_parser("train", help="train (or continue training) a model",
                           description="Train on DATA files in order; '-' reads stdin.")
    train.add_argument("data", nargs="+", metavar="DATA")
    train.add_argument("-o", "--output", required=True, metavar="MODEL",
                       help="model file to write (atomically)")
    train.add_argument("-i", "--initial", metavar="MODEL",
                       help="continue training this model (its options are kept)")
    train.add_argument("--resume", action="store_true",
                       help="with -i: skip the rows the model's checkpoint already consumed")
    opts = train.add_argument_group("model (ignored with -i)")
    opts.add_argument("--solver", choices=["pgs", "sdca"], default="pgs",
                      help="pgs (default): streaming, one chunk in memory; sdca: the batch "
                      "solver to the duality-gap tolerance 1e-6 (at most 1000 epochs), which "
                      "LOADS ALL DATA into memory (files that fit in memory; no -i, --passes, "
                      "hold-out, checkpoints or --scheduler)")
    opts.add_argument("--loss", default="logistic",
                      choices=sorted(CLASSIFICATION_LOSSES + REGRESSION_LOSSES))
    opts.add_argument("--p", type=float, default=2.0, help="norm of the regularizer, in (1, 2] and at least 1 + 1.2e-7 "
                      "(below 1.002 training is slower: see PGSClassifier's p)")
    opts.add_argument("--sigma", type=float, default=1e-4, help="regularization weight")
    opts.add_argument("--radius", type=_radius, default="auto",
                      help="domain: auto (default), none (R^n) or a number (l_p ball)")
    opts.add_argument("--batch-size", type=_positive_int, default=1, help="rows per step (k)")
    opts.add_argument("--iterate", default="weighted2", choices=sorted(ITERATES))
    opts.add_argument("--no-intercept", action="store_true")
    opts.add_argument("--intercept-scaling", type=float, default=1.0)
    opts.add_argument("--epsilon", type=float, default=0.1,
                      help="width of the huber and epsilon_insensitive losses")
    opts.add_argument("--bits", type=int, default=None,
                      help="hash features into 2**BITS columns (indices modulo 2**BITS)")
    opts.add_argument("--hash-seed", type=int, default=0)
    opts.add_argument("--random-seed", type=int, default=0, help="seed of the random iterate")
    opts.add_argument("--classes", default=None,
                      help="comma-separated labels, e.g. --classes -1,1 (default: those "
                      "of the first chunk)")
    run = train.add_argument_group("run")
    run.add_argument("--passes", type=_positive_int, default=1,
                     help="passes over the data (regular files only: not stdin or pipes)")
    run.add_argument("--chunk-rows", type=_positive_int, default=2_000,
                     help="rows per chunk read and trained at once (memory: one chunk)")
    run.add_argument("--zero-based", type=_zero_based, default="auto", metavar="{auto,0,1}")
    run.add_argument("--holdout-every", type=_positive_int, default=None, metavar="N",
                     help="hold out every N-th row from training and report its loss")
    run.add_argument("--checkpoint-every", type=_positive_int, default=None, metavar="N",
                     help="save the model to -o every N rows (resumable with -i --resume)")
    run.add_argument("--quiet", action="store_true", help="no progress table")
    # the estimators' MAX_MODEL_BYTES (not imported: `onlinepgs --help` stays quick)
    run.add_argument("--max-model-bytes", type=_model_bytes, default="1G",
                     metavar="SIZE",
                     help="memory budget of the model's state when the data decides its "
                     "width (no --bits): a feature index that would need more stops "
                     "training with its line (a stray index of 4e8 needs 6.4G). Bytes, or "
                     "with a suffix K, M, G, T (powers of 1024); 'none': no limit "
                     "(default 1G: 2**26 features of a binary model)")
    dist = train.add_argument_group(
        "Dask (onlinepgs.dask: distributed PGS in rounds; needs onlinepgs[dask])")
    dist.add_argument("--scheduler", metavar="ADDRESS", default=None,
                      help="train on the dask.distributed cluster whose scheduler is at "
                      "ADDRESS (e.g. tcp://127.0.0.1:8786), or 'threads' for Dask's local "
                      "threads; DATA must be files the workers can read")
    dist.add_argument("--lanes", type=_positive_int, default=None,
                      help="slices trained at once per round (default: the worker threads)")
    dist.add_argument("--slice-rows", type=_positive_int, default=65536,
                      help="rows each lane trains per round (default 65536)")
    dist.add_argument("--connect-timeout", type=float, default=10.0, metavar="SECONDS",
                      help="give up reaching the scheduler after this long (default 10)")

    predict = sub.add_parser("predict", help="write one prediction per row")
    predict.add_argument("model", metavar="MODEL")
    predict.add_argument("data", metavar="DATA")
    predict.add_argument("-o", "--output", default="-", metavar="PRED",
                         help="output file (default: stdout)")
    predict.add_argument("--kind", default="labels", choices=["labels", "scores", "probabilities"])
    predict.add_argument("--chunk-rows", type=_positive_int, default=10_000)
    predict.add_argument("--zero-based", type=_zero_based, default="auto", metavar="{auto,0,1}")

    evaluate = sub.add_parser(
        "eval", help="accuracy, log loss, AUC / RMSE, MAE on DATA",
        description="Print the rows, then for a classifier the AUC (two classes, both in "
        "DATA), accuracy and log loss (logistic loss), for a regressor RMSE and MAE. One "
        "pass in memory that does not grow with the rows: the AUC is exact, its scores "
        "sorted in runs of 2^20 spilled to temporary files (TMPDIR, at most 24 bytes a "
        "row) and merged, which adds at most about 60 MB to predict's memory.")
    evaluate.add_argument("model", metavar="MODEL")
    evaluate.add_argument("data", metavar="DATA")
    evaluate.add_argument("--chunk-rows", type=_positive_int, default=10_000)
    evaluate.add_argument("--zero-based", type=_zero_based, default="auto", metavar="{auto,0,1}")

    gap = sub.add_parser(
        "gap", help="duality-gap certificate of MODEL's objective on DATA",
        description="Print P(w) (the model's objective on DATA), a dual value D <= P(w*) "
        "and gap = P(w) - D, an upper bound on P(w) - P(w*); one pass, bounded memory. "
        "A model whose weights are not finite has no certificate: an error (exit 1).")
    gap.add_argument("model", metavar="MODEL")
    gap.add_argument("data", metavar="DATA")
    gap.add_argument("--json", action="store_true",
                     help="print the certificate as JSON (per-problem values included)")
    gap.add_argument("--chunk-rows", type=_positive_int, default=10_000)
    gap.add_argument("--zero-based", type=_zero_based, default="auto", metavar="{auto,0,1}")

    info = sub.add_parser("info", help="describe a model file")
    info.add_argument("model", metavar="MODEL")
    info.add_argument("--json", action="store_true", help="print the whole header as JSON")
    return parser


# ---- helpers -----------------------------------------------------------------------------
def _check_input(source):
    """A readable input: a file, a named pipe or /dev/fd/N (process substitution), or -."""
    if source == "-":
        return
    if os.path.isdir(source):
        raise UserError(f"{source}: is a directory, not a data file")
    if not os.path.exists(source):
        raise UserError(f"{source}: no such file")


def _reader(source, chunk_rows, zero_based):
    from onlinepgs.svmlight import iter_svmlight

    _check_input(source)
    return iter_svmlight(source, chunk_rows=chunk_rows, zero_based=zero_based)


def _check_output(path, inputs):
    """Fail before any work if `path` cannot be written, or would overwrite an input."""
    from onlinepgs.model_io import _write_target

    if path.endswith(os.sep) or os.path.isdir(path):
        raise UserError(f"{path}: is a directory; give a file name")
    target, atomic = _write_target(path)
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


def _load(path, command):
    """The model of a file as its sklearn-free learner (`onlinepgs.model_io.load_learner`:
    the command never imports scikit-learn), with a note on stderr when the file is an
    unfinished run's checkpoint."""
    from onlinepgs.model_io import load_learner

    est, header = load_learner(path, return_header=True)
    extra = header.get("extra") or {}
    if extra.get("finished") is False:
        print(f"{PROG}: note: {path} is a checkpoint of an unfinished training run "
              f"({est.online_stats_['n_examples']} rows); {command} uses it as it is",
              file=sys.stderr)
    return est, extra


def _data_base(args, extra):
    """--zero-based, or with "auto" the base the model was trained on, if recorded."""
    if args.zero_based == "auto" and isinstance(extra.get("zero_based"), bool):
        return extra["zero_based"]
    return args.zero_based


def _estimator_from_args(args):
    """The learner the options describe (`onlinepgs.pgs`, or `onlinepgs.sdca` with
    ``--solver sdca``): sklearn-free, so that the command never imports scikit-learn."""
    from onlinepgs._checks import InvalidParameterError
    from onlinepgs._core._pgs import check_p

    common = dict(loss=args.loss, p=args.p, sigma=args.sigma,
                  fit_intercept=not args.no_intercept, intercept_scaling=args.intercept_scaling,
                  epsilon=args.epsilon, n_bits=args.bits, hash_seed=args.hash_seed,
                  random_state=args.random_seed)
    classifier = args.loss in CLASSIFICATION_LOSSES
    if getattr(args, "solver", "pgs") == "sdca":
        from onlinepgs.sdca import SDCAClassifierLearner, SDCARegressorLearner

        cls = SDCAClassifierLearner if classifier else SDCARegressorLearner
        est = cls(**common)
    else:
        from onlinepgs.pgs import PGSClassifierLearner, PGSRegressorLearner

        cls = PGSClassifierLearner if classifier else PGSRegressorLearner
        est = cls(radius=args.radius, batch_size=args.batch_size, iterate=args.iterate,
                  **common)
    try:  # before any data is read, and in the options' own names
        est._validate_params()
    except InvalidParameterError as exc:
        message = str(exc)
        for option, param in _MODEL_OPTIONS.items():
            prefix = f"The '{param}' parameter of {est._owner}"
            if message.startswith(prefix):
                message = f"argument {_flag(option)}" + message[len(prefix):]
        raise UsageError(message) from None
    try:
        check_p(args.p)
    except ValueError as exc:
        raise UsageError(f"argument {_flag('p')}: {exc}") from None
    return est


# the model options of `train` (argparse names; ignored with -i, where the model keeps
# its own) and the estimator's parameter each sets
_MODEL_OPTIONS = {"loss": "loss", "p": "p", "sigma": "sigma", "radius": "radius",
                  "batch_size": "batch_size", "iterate": "iterate",
                  "no_intercept": "fit_intercept", "intercept_scaling": "intercept_scaling",
                  "epsilon": "epsilon", "bits": "n_bits", "hash_seed": "hash_seed",
                  "random_seed": "random_state"}


def _flag(option):
    return "--" + option.replace("_", "-")


def _parse_classes(text):
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


class ProgressTable:
    """Vowpal Wabbit's progressive-validation table on stderr, at doubling row counts."""

    HEADER = ("average  since         example        example  current  current  current\n"
              "loss     last          counter         weight    label  predict features")

    def __init__(self, stream, enabled):
        self.stream = stream
        self.enabled = enabled
        self.next_report = 1
        self.last_loss = 0.0
        self.last_weight = 0.0
        self.started = False
        self.bar = None  # a ByteProgress sharing the terminal, if any

    def row(self, stats, label, prediction, n_features):
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.clear()  # a table row must not land on the bar's line
        if not self.started:  # lazily: an early error must be the only line printed
            print(self.HEADER, file=self.stream, flush=True)
            self.started = True
        total, weight = stats["progressive_loss"] * stats["sum_weight"], stats["sum_weight"]
        since = ((total - self.last_loss) / (weight - self.last_weight)
                 if weight > self.last_weight else float("nan"))
        average = total / weight if weight else float("nan")
        if label is None:  # Dask rounds: no single current row
            current = f"{'-':>8} {'-':>8} {'-':>8}"
        else:
            current = f"{label:>8.4f} {prediction:>8.4f} {n_features:>8d}"
        print(f"{average:<8.6f} {since:<8.6f} {stats['n_examples']:>12d} {weight:>14.1f} "
              f"{current}", file=self.stream, flush=True)
        self.last_loss, self.last_weight = total, weight
        if self.bar is not None:
            self.bar.redraw()


class ByteProgress:
    """A one-line progress bar for terminals when the input's size is known."""

    def __init__(self, paths, passes, enabled):
        sizes = [os.path.getsize(p) for p in paths if p != "-" and os.path.isfile(p)]
        self.total = sum(sizes) * passes if len(sizes) == len(paths) else None
        self.enabled = enabled and self.total
        self.done = 0

    def update(self, done):
        self.done = done
        self.redraw()

    def redraw(self):
        if self.enabled:
            frac = min(1.0, self.done / self.total)
            bar = "#" * int(30 * frac)
            print(f"\r[{bar:<30}] {100 * frac:5.1f}%", end="", file=sys.stderr, flush=True)

    def clear(self):
        if self.enabled:
            print("\r" + " " * 40 + "\r", end="", file=sys.stderr, flush=True)

    close = clear


# ---- train -------------------------------------------------------------------------------
def cmd_train(args):
    if args.solver == "sdca":
        return _train_sdca(args)
    from onlinepgs.pgs import ModelTooLargeError
    from onlinepgs.model_io import load_learner, save_model

    if args.resume and not args.initial:
        raise UsageError("argument --resume: needs -i MODEL (the checkpoint to resume)")
    given_classes = _parse_classes(args.classes) if args.classes else None
    for source in args.data:  # every input checked before any work
        _check_input(source)
    if args.passes > 1:
        for source in args.data:
            # a pipe gives its rows once: a second pass would find it empty, or block
            if source == "-" or not os.path.isfile(source):
                raise UsageError(f"argument --passes: {'stdin' if source == '-' else source} "
                                 f"is not a regular file and can be read only once; "
                                 f"--passes {args.passes} needs files")
    _check_output(args.output, args.data)
    resume_at = {"pass": 0, "file": 0, "rows": 0}
    base = args.zero_based
    if args.initial:
        # model and stream position from one read: a checkpoint may be replaced meanwhile
        est, header = load_learner(args.initial, return_header=True)
        extra = header.get("extra") or {}
        base = _data_base(args, extra)
        ignored = _ignored_options(args, est)
        if ignored:
            print(f"{PROG}: note: {', '.join(ignored)} ignored: with -i the model keeps "
                  "its own options", file=sys.stderr)
        if args.resume:
            if "stream" not in extra:
                raise UserError(f"{args.initial}: not a checkpoint (no stream position); "
                                "drop --resume to continue training on new data")
            resume_at = _checkpoint_position(args.initial, extra)
            _check_run_options(args, resume_at)
            _check_position_fits(args, resume_at)
            if resume_at.get("data") != args.data:
                print(f"{PROG}: note: resuming a run over {resume_at.get('data')} on "
                      f"{args.data}", file=sys.stderr)
    else:
        est = _estimator_from_args(args)
    # a run option (-i included): the budget guards this run's data, not the model
    est.set_params(max_model_bytes=args.max_model_bytes)
    if given_classes is not None and not est._classifier:
        # partial_fit of a regressor takes no classes
        why = (f"the model {args.initial} has the {est.loss!r} loss" if args.initial
               else f"--loss {args.loss} is a regression loss")
        raise UsageError(f"argument --classes: applies to classification losses only ({why})")
    if args.scheduler is not None:
        return _train_on_dask(args, est, base)
    k = int(est.batch_size)
    chunk_rows = -(-args.chunk_rows // k) * k  # whole mini-batches: chunking never matters
    is_classifier = est._classifier
    classes = given_classes if given_classes is not None else getattr(est, "classes_", None)

    table = ProgressTable(sys.stderr, not args.quiet)
    if hasattr(est, "_state"):  # a continued model: the next report follows its count
        while table.next_report <= est.online_stats_["n_examples"]:
            table.next_report *= 2
    bar = ByteProgress(args.data, args.passes, sys.stderr.isatty() and not args.quiet)
    table.bar = bar
    # the held-out rows are every N-th row of a pass (its files in order), the same rows in
    # every pass and after a resume; the loss reported is the last pass's
    holdout = list(resume_at.get("holdout", (0.0, 0.0)))
    rows_seen = 0
    bytes_before = 0  # size of the files (and passes) already read, for the progress bar
    last_checkpoint = None
    chunk = None
    start = time.perf_counter()

    try:
        for pass_index in range(resume_at["pass"], args.passes):
            if pass_index > resume_at["pass"]:
                holdout = [0.0, 0.0]
            pass_rows = resume_at.get("pass_rows", 0) if pass_index == resume_at["pass"] else 0
            for file_index, source in enumerate(args.data):
                if (pass_index, file_index) < (resume_at["pass"], resume_at["file"]):
                    continue
                resuming_here = (pass_index, file_index) == (resume_at["pass"],
                                                             resume_at["file"])
                skip = resume_at["rows"] if resuming_here else 0
                file_row0 = pass_rows
                reader = _reader(source, chunk_rows, base)
                trainer = _Trainer(est, table, source)
                # held rows scored after the first row still waiting in `trainer`: a
                # checkpoint resumes at that row, which scores them again
                held_rows, held_losses = np.empty(0, np.int64), np.empty(0)
                rows_in_file = 0
                for X, y, line_of in _read_ahead(reader):
                    if base == "auto" and isinstance(reader.zero_based, bool):
                        base = reader.zero_based  # the first chunk decided, for every file
                    n = X.shape[0]
                    chunk = (source, X, line_of)  # for an out-of-memory message
                    if rows_in_file + n <= skip:  # resuming: rows already consumed
                        rows_in_file += n
                        continue
                    first = 0
                    if rows_in_file < skip:  # the checkpoint fell inside this chunk
                        first = skip - rows_in_file
                        X, y = X[first:], y[first:]
                        rows_in_file, n = skip, X.shape[0]

                    def where(i, first=first, line_of=line_of):  # the line of X's row i
                        return line_of(first + i)

                    if is_classifier and classes is None:
                        classes = np.unique(y)
                        if classes.shape[0] < 2:
                            raise UserError(f"{source}: the first chunk has one label "
                                            f"({classes.tolist()}); pass --classes")
                    if is_classifier:
                        _check_labels(y, classes, source, where, why=(
                            " (set by --classes, the model, or the first chunk's labels; "
                            "pass --classes to give them all)"))
                    if args.holdout_every:
                        rows, losses = _train_with_holdout(
                            trainer, X, y, file_row0 + rows_in_file, args.holdout_every,
                            classes, where, rows_in_file)
                        holdout[0] += float(np.sum(losses))
                        holdout[1] += rows.shape[0]
                        waiting = trainer.first_waiting()
                        held_rows = np.concatenate([held_rows, rows])
                        later = held_rows > (np.inf if waiting is None else waiting)
                        held_rows = held_rows[later]
                        held_losses = np.concatenate([held_losses, losses])[later]
                    else:
                        trainer.add(X, y, where, rows_in_file + np.arange(n), classes)
                    rows_in_file += n
                    rows_seen += n
                    bar.update(bytes_before + reader.bytes_read)
                    if args.checkpoint_every and (rows_seen - (last_checkpoint or 0)
                                                  >= args.checkpoint_every):
                        # the rows still waiting for a whole batch are not in the model yet
                        waiting = trainer.first_waiting()
                        position = {
                            "data": args.data, "pass": pass_index, "file": file_index,
                            "rows": rows_in_file if waiting is None else waiting,
                            "pass_rows": file_row0,
                            "holdout": [holdout[0] - float(np.sum(held_losses)),
                                        holdout[1] - held_rows.shape[0]],
                            **{name: getattr(args, name) for name, _ in _RUN_OPTIONS}}
                        save_model(est, args.output, extra=_extra(base, False, position))
                        last_checkpoint = rows_seen
                if rows_in_file < skip:
                    raise UserError(
                        f"{source}: has {rows_in_file} rows, but the checkpoint "
                        f"{args.initial} resumes after row {skip} of it "
                        f"(extra.stream.rows = {skip}): not the data that run read")
                trainer.finish(classes)
                pass_rows = file_row0 + rows_in_file
                if source != "-" and os.path.isfile(source):
                    bytes_before += os.path.getsize(source)
                if getattr(reader, "n_skipped", 0):
                    print(f"{PROG}: {source}: skipped {reader.n_skipped} bad lines",
                          file=sys.stderr)
        bar.close()
        if not hasattr(est, "_state"):
            raise UserError(f"{', '.join(args.data)}: no training rows were read")
        save_model(est, args.output, extra=_extra(base, True))
    except (UserError, ValueError, MemoryError, OSError) as exc:
        if isinstance(exc, MemoryError):
            exc = _out_of_memory(chunk, base)
        elif isinstance(exc, ModelTooLargeError):
            exc = _too_wide(exc, chunk, base)
        if last_checkpoint is not None:  # say what the output file now holds
            raise UserError(f"{str(exc).splitlines()[0]} [{args.output} holds the last "
                            f"checkpoint; resume with -i {args.output} --resume]") from None
        raise exc from None
    if not args.quiet:
        held = None
        if holdout[1]:
            which = f", pass {args.passes}" if args.passes > 1 else ""
            held = (f"holdout average loss = {holdout[0] / holdout[1]:.6f} "
                    f"({int(holdout[1])} rows{which})")
        _print_summary(est, args, start, before=[held] if held else [])
    return 0


# options of the streaming PGS run that `train --solver sdca` does not take
_NOT_SDCA = (("initial", "-i"), ("resume", "--resume"), ("holdout_every", "--holdout-every"),
             ("checkpoint_every", "--checkpoint-every"), ("scheduler", "--scheduler"))


def _train_sdca(args):
    """`train --solver sdca`: SDCA on every row of DATA at once (read into memory), to the
    relative duality gap 1e-6; one model file at the end."""
    import warnings

    import scipy.sparse as sp

    from onlinepgs.model_io import save_model

    for name, flag in _NOT_SDCA:
        if getattr(args, name):
            raise UsageError(f"argument {flag}: not available with --solver sdca (it trains "
                             "once on all of DATA, loaded into memory)")
    for option in ("radius", "batch_size", "iterate"):
        if option in getattr(args, "given", ()):
            raise UsageError(f"argument {_flag(option)}: a PGS option; --solver sdca solves "
                             "over R^n on all rows")
    if args.passes > 1:
        raise UsageError("argument --passes: --solver sdca runs its own epochs (until the "
                         "duality gap reaches its tolerance)")
    for source in args.data:
        _check_input(source)
    _check_output(args.output, args.data)
    est = _estimator_from_args(args)
    classes = _parse_classes(args.classes) if args.classes else None
    if classes is not None and not est._classifier:
        raise UsageError(f"argument --classes: applies to classification losses only "
                         f"(--loss {args.loss} is a regression loss)")
    base = args.zero_based
    blocks, labels = [], []
    for source in args.data:
        reader = _reader(source, args.chunk_rows, base)
        lines = 0
        for X, y in reader:
            if base == "auto" and isinstance(reader.zero_based, bool):
                base = reader.zero_based  # the first chunk decided, for every file
            line_of = _lines_of(lines, reader.n_lines, X.shape[0])
            if classes is not None:
                _check_labels(y, classes, source, line_of, why=" (set by --classes)")
            lines = reader.n_lines
            _check_sdca_width(args, X, source, line_of, base)
            blocks.append(X)
            labels.append(y)
        if getattr(reader, "n_skipped", 0):
            print(f"{PROG}: {source}: skipped {reader.n_skipped} bad lines", file=sys.stderr)
    if not blocks:
        raise UserError(f"{', '.join(args.data)}: no training rows were read")
    width = max(X.shape[1] for X in blocks)
    X = sp.vstack([_widen(X, width) for X in blocks], format="csr")
    y = np.concatenate(labels)
    if est._classifier and np.unique(y).shape[0] < 2 and classes is None:
        raise UserError(f"{', '.join(args.data)}: every row has the label "
                        f"{_label_text(y[0])}; a classifier needs two classes")
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            est.fit(X, y)
        except ValueError as exc:
            raise UserError(f"{', '.join(args.data)}: {str(exc).splitlines()[0]}") from None
    for warning in caught:  # e.g. the tolerance not reached: one line, not a traceback
        print(f"{PROG}: note: {str(warning.message).splitlines()[0]}", file=sys.stderr)
    save_model(est, args.output, extra=_extra(base, True))
    if not args.quiet:
        gap = np.sum(est.duality_gap_)
        primal = np.sum(est.primal_objective_)
        print("\n".join(["", "finished run (sdca)", f"number of examples = {X.shape[0]}",
                         f"epochs = {est.n_iter_}", f"primal objective = {primal:.9g}",
                         f"duality gap = {gap:.6g} (relative {gap / abs(primal):.3g})",
                         f"seconds = {time.perf_counter() - start:.2f}",
                         f"model = {args.output}"]), file=sys.stderr)
    return 0


def _check_sdca_width(args, X, source, line_of, base):
    """Refuse, at its line, a row whose feature index would make SDCA's dense weights (two
    arrays of doubles per problem and feature, and X^T alpha) exceed --max-model-bytes."""
    budget = args.max_model_bytes
    if budget is None or args.bits is not None or not X.nnz:
        return
    limit = budget // 24  # 24 bytes a feature for one problem (more for K > 2 classes)
    if X.shape[1] <= limit:
        return
    at = int(np.argmax(X.indices))
    row = int(np.searchsorted(X.indptr, at, side="right")) - 1
    index = int(X.indices[at]) + (0 if base is True else 1)
    raise UserError(f"{source}:{line_of(row)}: feature index {index} would make an SDCA model "
                    f"over {X.shape[1]} features ({24 * X.shape[1] / 2**30:.1f}G a problem), "
                    f"beyond --max-model-bytes (a stray index?); --bits BITS hashes the "
                    "features into 2**BITS columns, or raise --max-model-bytes (none: no limit)")


def _extra(base, finished, position=None):
    """The command's record in a model file: whether the run finished, a checkpoint's
    stream position, and the base its files were read with (for predict, eval, -i)."""
    out = {"finished": finished}
    if position is not None:
        out["stream"] = position
    if isinstance(base, bool):
        out["zero_based"] = base
    return out


# the run options that decide which rows are trained, recorded in a checkpoint's position
_RUN_OPTIONS = (("holdout_every", "--holdout-every"), ("passes", "--passes"))


def _check_run_options(args, position):
    """Refuse a --resume whose run options differ from the checkpoint's run."""
    for name, flag in _RUN_OPTIONS:
        if name not in position:  # a checkpoint written before they were recorded
            continue
        saved, given = position[name], getattr(args, name)
        if saved != given:
            raise UsageError(
                f"argument {flag}: the checkpoint {args.initial} was written by a run with "
                f"{flag} {'none' if saved is None else saved}, this one has "
                f"{'none' if given is None else given}; resume with the same {flag} (it "
                "decides which rows are trained)")


def _checkpoint_position(path, extra):
    """The stream position of a checkpoint's ``extra``, every field checked for its type
    and range and against the others (a hand-edited file must not skip training or
    crash); a ModelFileError names the field and its value."""
    from onlinepgs.model_io import ModelFileError

    position = extra["stream"]

    def bad(field, why):
        value = position if field is None else position[field]
        name = "extra.stream" + ("" if field is None else f".{field}")
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        return ModelFileError(path, f"checkpoint position {name} is {shown}: {why}")

    def count(value, low):
        return type(value) is int and value >= low

    if not isinstance(position, dict):
        raise bad(None, "not an object")
    for field in ("pass", "file", "rows"):
        if field not in position:
            raise ModelFileError(path, f"checkpoint position extra.stream has no {field!r}")
    for field in ("pass", "file", "rows", "pass_rows"):
        if field in position and not count(position[field], 0):
            raise bad(field, "not a non-negative integer")
    if "passes" in position and not count(position["passes"], 1):
        raise bad("passes", "not a positive integer")
    if position.get("holdout_every") is not None and not count(position["holdout_every"], 1):
        raise bad("holdout_every", "neither null nor a positive integer")
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
    return position


def _check_position_fits(args, position):
    """Refuse a --resume whose files or passes do not reach the checkpoint's position."""
    if position["pass"] >= args.passes:
        raise UsageError(f"argument --passes: the checkpoint {args.initial} resumes in pass "
                         f"{position['pass'] + 1} (extra.stream.pass = {position['pass']}), "
                         f"this run has --passes {args.passes}")
    if position["file"] >= len(args.data):
        raise UsageError(f"the checkpoint {args.initial} resumes in file "
                         f"{position['file'] + 1} (extra.stream.file = {position['file']}), "
                         f"this run reads {len(args.data)} file(s)")


def _out_of_memory(chunk, base):
    """Name the row whose largest feature index made the model too large to allocate."""
    if chunk is None or chunk[1].nnz == 0:
        return UserError("out of memory")
    source, X, line_of = chunk
    at = int(np.argmax(X.indices))
    row = int(np.searchsorted(X.indptr, at, side="right")) - 1
    index = int(X.indices[at]) + (0 if base is True else 1)
    return UserError(f"{source}:{line_of(row)}: out of memory for a model over {X.shape[1]} "
                     f"features (feature index {index}); --bits BITS hashes the features "
                     "into 2**BITS columns")


def _too_wide(exc, chunk, base):
    """The budget's refusal (ModelTooLargeError, its row's line set by `_fit_rows`) in
    the file's terms: its line and feature index, and the options to change."""
    source = chunk[0] if chunk is not None else "the data"
    needed = f"{exc.needed / 2**30:.1f}G" if exc.needed else "more"
    budget = exc.budget
    for suffix, scale in reversed(_SIZE_SUFFIXES.items()):
        if budget % scale == 0:
            budget = f"{budget // scale}{suffix}"
            break
    if getattr(exc, "line", None) is None:
        where = f"{source}: the data has {exc.n_features} columns"
    else:
        index = exc.column + (0 if base is True else 1)
        where = f"{source}:{exc.line}: feature index {index}"
    return UserError(f"{where} would make a model over {exc.n_features} features, "
                     f"{needed} of state, beyond --max-model-bytes {budget} (a stray "
                     "index?); --bits BITS hashes the features into 2**BITS columns, or "
                     "raise --max-model-bytes (none: no limit)")


def _given_options(argv):
    """The model options that `train`'s argv gives (not left at their defaults)."""
    parser = build_parser()
    train = parser._subparsers._group_actions[0].choices["train"]
    for action in train._actions:
        if action.dest in _MODEL_OPTIONS:
            action.default = argparse.SUPPRESS
    return {name for name in _MODEL_OPTIONS if name in vars(parser.parse_args(argv))}


def _ignored_options(args, est):
    """The model options given with -i whose values differ from the model's (which it
    keeps), as "--flag VALUE (the model's: VALUE)"."""
    params = est.get_params()
    notes = []
    for option, param in _MODEL_OPTIONS.items():
        if option not in getattr(args, "given", ()):
            continue
        given, model = getattr(args, option), params[param]
        if option == "no_intercept":  # a flag: the parameter's negation
            model = not model
        if given != model:
            notes.append(_flag(option) if isinstance(given, bool) else
                         f"{_flag(option)} {given} (the model's: {model})")
    return notes


def _check_labels(y, classes, source, line_of, what="the classes", why=""):
    """Labels outside the classes, named by their line (partial_fit knows no lines)."""
    bad = ~np.isin(y, classes)
    if bad.any():
        i = int(np.argmax(bad))
        raise UserError(f"{source}:{line_of(i)}: label {_label_text(y[i])} is not one of "
                        f"{what} [{', '.join(_label_text(c) for c in classes)}]{why}")


def _print_summary(est, args, start, before=(), after=()):
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


def _train_on_dask(args, est, base):
    """`train --scheduler`: onlinepgs.dask over the files, one model file at the end."""
    from onlinepgs.model_io import save_model
    from onlinepgs.svmlight import iter_svmlight

    for flag, used in (("-", "-" in args.data), ("--resume", args.resume),
                       ("--checkpoint-every", args.checkpoint_every),
                       ("--holdout-every", args.holdout_every)):
        if used:
            raise UserError(f"{flag} is not available with --scheduler (rounds read the "
                            "files on the workers)")
    try:
        import onlinepgs.dask as opd
    except ImportError as exc:
        raise UserError(str(exc)) from None
    client = None
    if args.scheduler != "threads":
        try:
            from distributed import Client
        except ImportError:
            raise UserError("--scheduler ADDRESS needs dask.distributed: pip install "
                            "'onlinepgs[dask]'") from None
        try:
            client = Client(args.scheduler, timeout=args.connect_timeout)
        except (OSError, ValueError) as exc:
            raise UserError(f"cannot reach the Dask scheduler at {args.scheduler}: "
                            f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                            ) from None
    classes = _parse_classes(args.classes) if args.classes else getattr(est, "classes_", None)
    if est._classifier and classes is None:
        # as without --scheduler: the labels of the first chunk
        with iter_svmlight(args.data[0], chunk_rows=args.chunk_rows,
                           zero_based=base) as reader:
            first = next(iter(reader), None)
        if first is None:
            raise UserError("no training rows were read")
        classes = np.unique(first[1])
        if classes.shape[0] < 2:
            raise UserError(f"{args.data[0]}: the first chunk has one label "
                            f"({classes.tolist()}); pass --classes")
    table = ProgressTable(sys.stderr, not args.quiet)
    if hasattr(est, "_state"):
        while table.next_report <= est.online_stats_["n_examples"]:
            table.next_report *= 2
    rounds = []

    def progress(info):
        rounds.append(info["round"])
        # the state only for a row of the table: on a cluster reading it fetches it
        if table.enabled and info["n_examples"] >= table.next_report:
            stats = info["state"].stats_dict()
            table.row(stats, None, None, None)
            while table.next_report <= stats["n_examples"]:
                table.next_report *= 2

    start = time.perf_counter()
    from onlinepgs.pgs import ModelTooLargeError, PGSDivergedError

    try:
        opd.partial_fit(est, list(args.data), classes=classes if est._classifier else None,
                        passes=args.passes, client=client, n_lanes=args.lanes,
                        slice_rows=args.slice_rows, zero_based=base,
                        callback=progress)
    except PGSDivergedError as exc:
        # the error names the round and the file's line; the model is not written
        raise UserError(f"{', '.join(args.data)}: {_in_flags(str(exc).splitlines()[0])}"
                        ) from None
    except ModelTooLargeError as exc:  # names the file's line; says it in the flags
        raise UserError(_in_flags(str(exc))) from None
    finally:
        if client is not None:
            client.close()
    save_model(est, args.output, extra=_extra(base, True))
    if not args.quiet:
        _print_summary(est, args, start, after=[f"rounds = {len(rounds)} on {args.scheduler}"])
    return 0


def _lines_of(lines_before, lines_after, n_rows):
    """Row i of a chunk -> its line in the file, as text: exact where the chunk's lines are
    all rows (no blank or comment line among them), else the lines it lies between."""
    if lines_after - lines_before == n_rows:
        return lambda i: str(lines_before + 1 + i)
    return lambda i: (f"{lines_before + 1}-{lines_after} (row {i + 1} of the {n_rows} rows "
                      "there)")


def _read_ahead(reader, depth=2):
    """Iterate the reader's chunks as (X, y, line_of), parsing the next ones in a
    background thread; ``line_of(i)`` names the line of the chunk's row i.

    The parser and the solver both release the GIL, so on two cores parsing chunk i+1
    overlaps training on chunk i (Vowpal Wabbit's driver overlaps them too). Errors are
    re-raised in the caller, in order; memory holds at most ``depth`` extra chunks.
    """
    import queue
    import threading

    chunks = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def produce():
        try:
            lines = 0
            for X, y in reader:
                # the parser stops right after the row that fills a chunk
                chunk = (X, y, _lines_of(lines, reader.n_lines, X.shape[0]))
                lines = reader.n_lines
                while not stop.is_set():
                    try:
                        chunks.put(chunk, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            chunks.put(done)
        except BaseException as exc:  # handed to the consumer
            chunks.put(exc)

    worker = threading.Thread(target=produce, name="onlinepgs-reader", daemon=True)
    worker.start()
    try:
        while True:
            item = chunks.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        worker.join(timeout=5)


def _loss_rows(est, X, y):
    """The model's loss on each row (the reported iterate), for the held-out estimate."""
    from onlinepgs._core import loss_value

    scores = est.decision_function(X) if est._classifier else est.predict(X)
    if est._classifier:
        classes = est.classes_
        if scores.ndim == 1:
            signs = np.where(y == classes[1], 1.0, -1.0)
            return np.asarray(loss_value(est.loss, scores, signs), dtype=float)
        signs = np.where(y[:, None] == classes[None, :], 1.0, -1.0)
        return np.asarray(loss_value(est.loss, scores, signs), dtype=float).sum(axis=1)
    return np.asarray(loss_value(est.loss, scores, y, est.epsilon), dtype=float)


def _train_with_holdout(trainer, X, y, rows_before, every, classes, line_of, first_row):
    """Score every `every`-th row with the model before its segment, train on the others.

    Segments of max(1000, 8 * every) rows keep the estimate progressive without a Python
    call per row. Before any training the model is PGS's w_0 = 0, whose loss is the loss at
    margin 0. Returns the held rows (their rows in the file, from 0) and their losses.
    """
    from onlinepgs._core import loss_value

    est = trainer.est
    n = X.shape[0]
    seg = max(1000, 8 * every)
    rows, losses = [np.empty(0, np.int64)], [np.empty(0)]
    for start in range(0, n, seg):
        stop = min(n, start + seg)
        held = (rows_before + np.arange(start, stop) + 1) % every == 0
        if held.any():
            Xh, yh = X[start:stop][held], y[start:stop][held]
            if hasattr(est, "_state"):
                losses.append(_loss_rows(est, Xh, yh))
            elif est._classifier:
                # every classification loss is symmetric at margin 0: l(0; +1) = l(0; -1)
                n_problems = 1 if len(classes) == 2 else len(classes)
                losses.append(np.full(yh.shape[0],
                                      n_problems * float(loss_value(est.loss, 0.0, 1.0))))
            else:
                losses.append(np.asarray(loss_value(est.loss, np.zeros(yh.shape[0]), yh,
                                                    est.epsilon), dtype=float))
            rows.append(first_row + start + np.flatnonzero(held))
        kept = start + np.flatnonzero(~held)
        trainer.add(X[kept], y[kept], lambda i, kept=kept: line_of(kept[i]),
                    first_row + kept, classes)
    return np.concatenate(rows), np.concatenate(losses)


class _Trainer:
    """partial_fit on one file's training rows in whole mini-batches across calls.

    Rows short of a whole batch wait for the file's next rows (and are trained at its
    end), so neither the chunks nor the held-out rows between them change the model: it
    is partial_fit on the file's training rows in one call.
    """

    def __init__(self, est, table, source):
        self.est = est
        self.table = table
        self.source = source
        self.k = int(est.batch_size)
        self.waiting = None  # (X, y, lines, file_rows) of fewer than k rows

    def first_waiting(self):
        """The file row (from 0) of the first row not yet trained, or None."""
        return None if self.waiting is None else int(self.waiting[3][0])

    def add(self, X, y, line_of, file_rows, classes, final=False):
        """Train on the waiting rows, then these, but for the rows short of a whole batch
        unless `final`. ``line_of(i)`` names row i's line; `file_rows` are its rows in the
        file, from 0."""
        if self.waiting is not None:
            import scipy.sparse as sp

            Xw, yw, lines, rows_w = self.waiting
            width = max(Xw.shape[1], X.shape[1])  # a later chunk may have more columns
            X = sp.vstack([_widen(Xw, width), _widen(X, width)], format="csr")
            y = np.concatenate([yw, y])
            file_rows = np.concatenate([rows_w, file_rows])
            line_of = (lambda i, inner=line_of, m=len(lines):
                       lines[i] if i < m else inner(i - m))
            self.waiting = None
        n = X.shape[0]
        n_train = n if final else n - n % self.k
        if n_train < n:
            self.waiting = (X[n_train:], y[n_train:],
                            [line_of(i) for i in range(n_train, n)], file_rows[n_train:])
        if n_train:
            _train_rows(self.est, X[:n_train], y[:n_train], classes, self.table, self.k,
                        self.source, line_of, file_rows)

    def finish(self, classes):
        """Train on the rows still waiting: the file's last, short batch."""
        if self.waiting is not None:
            Xw, yw, lines, rows_w = self.waiting
            self.waiting = None
            _train_rows(self.est, Xw, yw, classes, self.table, self.k, self.source,
                        lines.__getitem__, rows_w)


def _widen(X, width):
    if X.shape[1] == width:
        return X
    import scipy.sparse as sp

    return sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], width))


def _train_rows(est, X, y, classes, table, k, source, line_of, file_rows):
    """partial_fit on rows, splitting them (at whole batches) where the table reports."""
    n = X.shape[0]
    if n == 0:
        return
    fitted = hasattr(est, "_state")
    done = est.online_stats_["n_examples"] if fitted else 0
    kwargs = {"classes": classes} if classes is not None else {}

    def fit(a, b):
        _fit_rows(est, X[a:b], y[a:b], kwargs, source, lambda i: line_of(a + i),
                  int(file_rows[a]))

    start = 0
    while start < n:
        report = table.next_report if table.enabled else None
        if report is not None and done + n - start >= report:
            # the batch holding example number `report` ends the segment
            end = start + (-(-(report - done) // k)) * k
            end = min(end, n)
            stop_before = max(start, end - k)
            if stop_before > start:
                fit(start, stop_before)
            last = end - 1
            prediction = _online_prediction(est, X[last])
            fit(stop_before, end)
            done += end - start
            table.row(est.online_stats_, float(y[last]), prediction, int(X[last].nnz))
            while table.next_report <= done:
                table.next_report *= 2
            start = end
        else:
            fit(start, n)
            done += n - start
            start = n


def _fit_rows(est, X, y, kwargs, source, line_of, first_row):
    from onlinepgs.pgs import ModelTooLargeError, PGSDivergedError

    try:
        est.partial_fit(X, y, **kwargs)
    except ModelTooLargeError as exc:
        exc.line = None if exc.row is None else line_of(exc.row)  # for _too_wide
        raise
    except PGSDivergedError as exc:
        # the row and the advice, at the file's line and in the command's flags (the
        # state kept is not saved: the message's word on it does not apply)
        raise UserError(f"{source}:{line_of(exc.row)}: training diverged: "
                        f"{_in_flags(exc.reason)}") from None
    except ValueError as exc:
        raise UserError(f"{source} (rows from {first_row + 1}): {exc}") from None


def _in_flags(text):
    """An estimator's advice in the command's options."""
    for name, flag in (("radius='auto'", "--radius auto"), ("radius=None", "--radius none"),
                       ("sigma=", "--sigma "), (" The model is left as it was.", ""),
                       ("n_bits (2**n_bits columns)", "--bits BITS (2**BITS columns)"),
                       ("max_model_bytes=", "--max-model-bytes "),
                       ("max_model_bytes (None: no limit)", "--max-model-bytes (none: no limit)")):
        text = text.replace(name, flag)
    return text


def _online_prediction(est, x):
    """The solver's own prediction for a row before its update (last iterate).

    A regressor's or binary classifier's raw score; a multiclass model's predicted class.
    """
    if not hasattr(est, "_state"):
        return 0.0
    W = est._state.weights("last")  # (1 + n_features, n_problems), intercept in row 0
    x = est._as_matrix(x, fitted=True).tocsr()  # hashed as training sees it
    seen = x.indices < W.shape[0] - 1
    scores = x.data[seen] @ W[1 + x.indices[seen]]
    if est.fit_intercept:
        scores = scores + W[0] * est.intercept_scaling
    if scores.shape[0] == 1:
        return float(scores[0])
    return float(est.classes_[int(np.argmax(scores))])


# ---- predict / eval / info ---------------------------------------------------------------
def cmd_predict(args):
    est, extra = _load(args.model, "predict")
    if args.kind == "probabilities" and not hasattr(est, "predict_proba"):
        raise UserError(f"{args.model}: probabilities need the logistic loss "
                        f"(this model's loss is {est.loss!r})")
    reader = _reader(args.data, args.chunk_rows, _data_base(args, extra))
    if args.output == "-":
        _write_predictions(est, reader, args.kind, sys.stdout)
        return 0
    # a new file replaces the old only once complete, as model files do
    from onlinepgs.model_io import replace_atomically

    _check_output(args.output, [args.data, args.model])
    replace_atomically(args.output, lambda out: _write_predictions(est, reader, args.kind, out),
                       binary=False)
    return 0


def _write_predictions(est, reader, kind, out):
    for X, _ in reader:
        if kind == "labels":
            values = est.predict(X)
            lines = "\n".join(_label_text(v) for v in values)
        elif kind == "scores":
            values = (est.decision_function(X) if hasattr(est, "decision_function")
                      else est.predict(X))
            lines = "\n".join(" ".join(f"{v:.9g}" for v in np.atleast_1d(row))
                              for row in values)
        else:
            values = est.predict_proba(X)
            lines = "\n".join(" ".join(f"{v:.9g}" for v in row) for row in values)
        if lines:
            out.write(lines + "\n")


def _label_text(value):
    """A label as text: integral numbers without a decimal point, strings as they are."""
    try:
        value = float(value)
    except (TypeError, ValueError):  # a model trained in Python on string labels
        return str(value)
    return str(int(value)) if value.is_integer() else f"{value:.9g}"


def cmd_eval(args):
    from onlinepgs._metrics import StreamMetrics

    est, extra = _load(args.model, "eval")
    # one pass, each chunk folded into sums (and the AUC's sorted runs) as it comes:
    # memory does not grow with the rows (onlinepgs._metrics)
    metrics = StreamMetrics(est.classes_ if est._classifier else None)
    reader = _reader(args.data, args.chunk_rows, _data_base(args, extra))
    for X, y, line_of in _read_ahead(reader):
        if est._classifier:  # at its line, before the rest of the file is scored
            _check_labels(y, est.classes_, args.data, line_of, what="the model's classes")
            scores = est.decision_function(X)
            _check_scores(scores, args.data, line_of)
            proba = est.predict_proba(X) if hasattr(est, "predict_proba") else None
            metrics.add_classified(y, scores, proba)
        else:
            predicted = est.predict(X)
            _check_scores(predicted, args.data, line_of)
            metrics.add_regressed(y, predicted)
    if not metrics.rows:
        raise UserError(f"{args.data}: no rows")
    for key, value in metrics.result().items():
        print(f"{key} = {value:.6f}" if isinstance(value, float) else f"{key} = {value}")
    return 0


def _check_scores(scores, source, line_of):
    """A NaN score (a model with non-finite weights) has no rank, class or error."""
    nan = np.isnan(scores)
    if nan.any():
        i = int(np.argmax(nan.reshape(nan.shape[0], -1).any(axis=1)))
        raise UserError(f"{source}:{line_of(i)}: the model's score is NaN (its weights are "
                        "not finite): it cannot be evaluated")


def cmd_gap(args):
    from onlinepgs.duality import duality_gap_stream
    est, extra = _load(args.model, "gap")
    cert = duality_gap_stream(est, _reader(args.data, args.chunk_rows,
                                           _data_base(args, extra)))
    if args.json:
        result = cert.as_dict()
        if est._classifier and cert.dual_scale.shape[0] > 1:
            result["classes"] = est.classes_.tolist()
        print(json.dumps(_json_safe(result), indent=2))
        return 0
    print(f"rows = {cert.n_rows}")
    for key in ("primal", "dual", "gap", "relative_gap"):
        print(f"{key} = {getattr(cert, key):.12g}")
    if cert.gap_per_problem.shape[0] > 1:  # one-vs-rest problems, one per class
        for label, value in zip(est.classes_, cert.gap_per_problem):
            print(f"gap[{_label_text(label)}] = {value:.12g}")
    return 0


def _json_safe(value):
    """Standard JSON: non-finite floats as the strings "inf", "-inf", "nan" (float() reads them)."""
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def cmd_info(args):
    from onlinepgs.model_io import load_learner, read_header

    header = read_header(args.model)
    if args.json:
        print(json.dumps(_json_safe(header), indent=2, sort_keys=True))
        return 0
    # everything checked before anything is printed: an error, not half a report
    classes = None
    if any(entry.get("name") == "attributes/classes_" for entry in header.get("arrays", ())):
        # classes_ is an array of the file: the model, and its header, from one read
        est, header = load_learner(args.model, return_header=True)
        classes = est.classes_
    extra = header.get("extra") or {}
    position = _checkpoint_position(args.model, extra) if "stream" in extra else None
    params = header.get("params", {})
    print(f"model: {args.model}")
    for key in ("estimator", "format_version", "onlinepgs_version"):
        if key in header:
            print(f"{key}: {header[key]}")
    print("params: " + ", ".join(f"{k}={v}" for k, v in sorted(params.items())))
    if "n_features" in header:
        print(f"n_features: {header['n_features']}")
    if classes is not None:
        print("classes: " + ", ".join(_label_text(c) for c in classes))
    stats = header.get("online_stats") or {}
    for key in ("n_examples", "n_steps", "progressive_loss", "progressive_error_rate",
                "regret_bound"):
        if key in stats:
            print(f"{key}: {stats[key]}")
    if position is not None:
        print(f"checkpoint: pass {position['pass'] + 1}, file {position['file'] + 1}, "
              f"row {position['rows']}")
    return 0


COMMANDS = {"train": cmd_train, "predict": cmd_predict, "eval": cmd_eval, "gap": cmd_gap,
            "info": cmd_info}


def main(argv=None):
    """Entry point of the ``onlinepgs`` console script; returns the exit code."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # argparse takes "-1,1" for an option: --classes -1,1 means --classes=-1,1
    for i in range(len(argv) - 1):
        if argv[i] == "--classes" and argv[i + 1][:2].lstrip("-")[:1] in set("0123456789."):
            argv[i:i + 2] = [f"--classes={argv[i + 1]}", None]
    argv = [a for a in argv if a is not None]
    args = parser.parse_args(argv)  # exits with 2 on usage errors
    if args.command == "train":
        args.given = _given_options(argv)
    from onlinepgs.model_io import ModelFileError
    from onlinepgs.svmlight import SvmlightError

    try:
        return COMMANDS[args.command](args)
    except UsageError as exc:
        print(f"{PROG} {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # the reader went away (`onlinepgs predict ... | head`): stop quietly, as Unix tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    # FloatingPointError: PGSDivergedError, also raised when an unusable model is read
    except (UserError, SvmlightError, ModelFileError, ValueError, OSError,
            FloatingPointError) as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
