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
from onlinepgs.streaming.errors import label_text as _label_text

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
    from onlinepgs.streaming import StreamError
    from onlinepgs.streaming.sources import FileSource

    try:
        FileSource(source)
    except StreamError as exc:
        raise UserError(str(exc)) from None


def _reader(source, chunk_rows, zero_based):
    from onlinepgs.svmlight import iter_svmlight

    _check_input(source)
    return iter_svmlight(source, chunk_rows=chunk_rows, zero_based=zero_based)


def _check_output(path, inputs):
    """Fail before any work if `path` cannot be written, or would overwrite an input."""
    from onlinepgs.model_io.atomic import write_target as _write_target

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
    """`train`: the options into the streaming engine (onlinepgs.streaming), its
    progress onto stderr and its errors into one line."""
    from onlinepgs import streaming

    if args.resume and not args.initial:
        raise UsageError("argument --resume: needs -i MODEL (the checkpoint to resume)")
    given_classes = _parse_classes(args.classes) if args.classes else None
    sources = _train_sources(args)  # every input checked before any work
    _check_output(args.output, args.data)
    if args.initial:
        est, checkpoint, base = _continued(args)
    else:
        est, checkpoint, base = _estimator_from_args(args), None, args.zero_based
    # a run option (-i included): the budget guards this run's data, not the model
    est.set_params(max_model_bytes=args.max_model_bytes)
    if given_classes is not None and not est._classifier:
        # partial_fit of a regressor takes no classes
        why = (f"the model {args.initial} has the {est.loss!r} loss" if args.initial
               else f"--loss {args.loss} is a regression loss")
        raise UsageError(f"argument --classes: applies to classification losses only ({why})")
    if args.scheduler is not None:
        return _train_on_dask(args, est, base)
    table = ProgressTable(sys.stderr, not args.quiet)
    table.bar = bar = ByteProgress(args.data, args.passes, sys.stderr.isatty() and not args.quiet)
    trainer = streaming.StreamTrainer(
        est, classes=given_classes, passes=args.passes, chunk_rows=args.chunk_rows,
        zero_based=base, holdout_every=args.holdout_every, checkpoint_path=args.output,
        checkpoint_every=args.checkpoint_every, resume=checkpoint,
        progress=_show_progress(table, bar) if table.enabled else None)
    start = time.perf_counter()
    try:
        run = trainer.run(sources)
    except (ValueError, MemoryError, OSError) as exc:
        raise _train_error(exc, trainer, args) from None
    finally:
        bar.close()
    if not args.quiet:
        held = []
        if run.holdout_rows:
            which = f", pass {args.passes}" if args.passes > 1 else ""
            held = [f"holdout average loss = {run.holdout_loss:.6f} "
                    f"({run.holdout_rows} rows{which})"]
        _print_summary(est, args, start, before=held)
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
    from onlinepgs.streaming import checkpoint_extra
    from onlinepgs.streaming.engine import widen
    from onlinepgs.streaming.sources import lines_of

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
            line_of = lines_of(lines, reader.n_lines, X.shape[0])
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
    X = sp.vstack([widen(X, width) for X in blocks], format="csr")
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
    save_model(est, args.output, extra=checkpoint_extra(base, True))
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


def _train_sources(args):
    """The engine's sources for DATA: each checked (exists, no directory), and refused
    for several passes where it can be read only once (a usage error)."""
    from onlinepgs import streaming
    from onlinepgs.streaming.sources import check_passes, make_sources

    try:
        sources = make_sources(list(args.data))
    except streaming.StreamError as exc:
        raise UserError(str(exc)) from None
    try:
        check_passes(sources, args.passes)
    except streaming.ReadOnceError as exc:
        # a pipe gives its rows once: a second pass would find it empty, or block
        name = "stdin" if exc.source == "-" else exc.source
        raise UsageError(f"argument --passes: {name} is not a regular file and can be read "
                         f"only once; --passes {args.passes} needs files") from None
    return sources


def _continued(args):
    """-i MODEL: the model, its checkpoint when --resume (refused unless this run can
    resume it), and the feature base to read the data with."""
    from onlinepgs import streaming
    from onlinepgs.model_io import load_learner

    # model and stream position from one read: a checkpoint may be replaced meanwhile
    est, header = load_learner(args.initial, return_header=True)
    extra = header.get("extra") or {}
    base = _data_base(args, extra)
    ignored = _ignored_options(args, est)
    if ignored:
        print(f"{PROG}: note: {', '.join(ignored)} ignored: with -i the model keeps "
              "its own options", file=sys.stderr)
    if not args.resume:
        return est, None, base
    if "stream" not in extra:
        raise UserError(f"{args.initial}: not a checkpoint (no stream position); "
                        "drop --resume to continue training on new data")
    checkpoint = streaming.Checkpoint(
        args.initial, est, streaming.checkpoint_position(args.initial, extra),
        extra["zero_based"] if isinstance(extra.get("zero_based"), bool) else None)
    try:
        streaming.check_resume(checkpoint, args.data, args.passes, args.holdout_every)
    except streaming.ResumeError as exc:
        raise UsageError(_in_options(exc, args)) from None
    if checkpoint.position.get("data") != args.data:
        print(f"{PROG}: note: resuming a run over {checkpoint.position.get('data')} on "
              f"{args.data}", file=sys.stderr)
    return est, checkpoint, base


def _in_options(exc, args):
    """A checkpoint that this run cannot resume (streaming.ResumeError), in the flags."""
    if exc.option == "pass":
        return (f"argument --passes: the checkpoint {args.initial} resumes in pass "
                f"{exc.saved + 1} (extra.stream.pass = {exc.saved}), this run has "
                f"--passes {exc.given}")
    if exc.option in ("passes", "holdout_every"):
        flag = _flag(exc.option)
        saved, given = (("none" if v is None else v) for v in (exc.saved, exc.given))
        return (f"argument {flag}: the checkpoint {args.initial} was written by a run with "
                f"{flag} {saved}, this one has {given}; resume with the same {flag} (it "
                "decides which rows are trained)")
    return str(exc)


def _show_progress(table, bar):
    """The engine's progress events onto the table (a row at doubling counts) and the
    byte bar (after each chunk)."""
    def show(event):
        if event.kind == "row":
            table.row(event.stats, float(event.label), event.prediction, event.n_features)
        elif event.kind == "chunk":
            bar.update(event.bytes_read)
        elif event.n_skipped:
            print(f"{PROG}: {event.source}: skipped {event.n_skipped} bad lines",
                  file=sys.stderr)
    return show


_WHY_CLASSES = (" (set by --classes, the model, or the first chunk's labels; pass "
                "--classes to give them all)")


def _train_error(exc, trainer, args):
    """An error of the engine as the command's one line, in its options' words, saying
    what the output file holds when a checkpoint was written."""
    from onlinepgs import streaming

    base = trainer.zero_based
    if isinstance(exc, streaming.OutOfMemory):
        index = exc.column + (0 if base is True else 1)
        exc = UserError(f"{exc.where}: out of memory for a model over {exc.n_features} "
                        f"features (feature index {index}); --bits BITS hashes the "
                        "features into 2**BITS columns")
    elif isinstance(exc, MemoryError):
        exc = UserError("out of memory")
    elif isinstance(exc, streaming.LabelError):
        exc = UserError(f"{exc.where}: {exc.reason}{_WHY_CLASSES}")
    elif isinstance(exc, streaming.ClassesError):
        exc = UserError(f"{exc.source}: the first chunk has one label ({exc.labels}); "
                        "pass --classes")
    elif isinstance(exc, streaming.LearnerError):
        error = exc.error
        if hasattr(error, "budget"):  # ModelTooLargeError: the file's terms
            exc = _too_wide(error, exc, base)
        elif isinstance(error, FloatingPointError):  # PGSDivergedError: in the flags
            # (the state kept is not saved: the message's word on it does not apply)
            exc = UserError(f"{exc.where}: training diverged: "
                            f"{_in_flags(getattr(error, 'reason', None) or str(error))}")
    if trainer.last_checkpoint is not None:  # say what the output file now holds
        return UserError(f"{str(exc).splitlines()[0]} [{args.output} holds the last "
                         f"checkpoint; resume with -i {args.output} --resume]")
    return exc


def _too_wide(exc, at, base):
    """The budget's refusal (ModelTooLargeError `exc`, at the place of the engine's
    LearnerError `at`) in the file's terms: its line and feature index, and the
    options to change."""
    needed = f"{exc.needed / 2**30:.1f}G" if exc.needed else "more"
    budget = exc.budget
    for suffix, scale in reversed(_SIZE_SUFFIXES.items()):
        if budget % scale == 0:
            budget = f"{budget // scale}{suffix}"
            break
    if at.line is None:
        where = f"{at.source}: the data has {exc.n_features} columns"
    else:
        index = exc.column + (0 if base is True else 1)
        where = f"{at.source}:{at.line}: feature index {index}"
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
    from onlinepgs.streaming.engine import first_unknown_label

    i = first_unknown_label(y, classes)
    if i is not None:
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
    from onlinepgs.streaming import checkpoint_extra
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
    save_model(est, args.output, extra=checkpoint_extra(base, True))
    if not args.quiet:
        _print_summary(est, args, start, after=[f"rounds = {len(rounds)} on {args.scheduler}"])
    return 0


def _in_flags(text):
    """An estimator's advice in the command's options."""
    for name, flag in (("radius='auto'", "--radius auto"), ("radius=None", "--radius none"),
                       ("sigma=", "--sigma "), (" The model is left as it was.", ""),
                       ("n_bits (2**n_bits columns)", "--bits BITS (2**BITS columns)"),
                       ("max_model_bytes=", "--max-model-bytes "),
                       ("max_model_bytes (None: no limit)", "--max-model-bytes (none: no limit)")):
        text = text.replace(name, flag)
    return text


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


def cmd_eval(args):
    from onlinepgs._metrics import StreamMetrics
    from onlinepgs.streaming import read_ahead

    est, extra = _load(args.model, "eval")
    # one pass, each chunk folded into sums (and the AUC's sorted runs) as it comes:
    # memory does not grow with the rows (onlinepgs._metrics)
    metrics = StreamMetrics(est.classes_ if est._classifier else None)
    reader = _reader(args.data, args.chunk_rows, _data_base(args, extra))
    for X, y, line_of in read_ahead(reader):
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
    from onlinepgs.streaming import checkpoint_position

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
    position = checkpoint_position(args.model, extra) if "stream" in extra else None
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
