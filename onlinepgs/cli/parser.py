"""The command's options: `build_parser` and the argument types, which parse text into
values and check nothing else: every rule about the values (ranges, combinations) is
`onlinepgs._options`' (`check_command`, run by `main` right after parsing).

Imports neither numpy nor the compiled core: ``onlinepgs --help`` and a usage error
only parse. The loss and iterate names are `onlinepgs._options`' (a test checks them
against the core's: tests/test_cli_imports.py::test_parser_names_are_the_cores).
"""
import argparse
import math

from onlinepgs import __version__
from onlinepgs._options import (CLASSIFICATION_LOSSES, ITERATES, MODEL_OPTIONS,  # noqa: F401
                                REGRESSION_LOSSES)
from onlinepgs.cli.errors import PROG


def _radius(text):
    """--radius: auto, none, or a number."""
    if text in ("auto", "none", "None"):
        return None if text.lower() == "none" else "auto"
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'auto', 'none' or a number, got {text!r}")


def _number(text):
    """A number (its range is onlinepgs._options')."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}")


def _sigma(text):
    if text == "auto":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'auto' or a number, got {text!r}")


def _int(text):
    """An integer (its range is onlinepgs._options')."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}")


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
    if number[-1:].upper() in SIZE_SUFFIXES:
        number, scale = number[:-1], SIZE_SUFFIXES[number[-1].upper()]
    try:
        value = float(number) * scale
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(
            f"expected a size in bytes such as 4G, 512M or 1000000000, or none; got {text!r}")
    return int(value)


SIZE_SUFFIXES = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def size_text(n_bytes, exact=False):
    """A byte count in --max-model-bytes' units: 2.6G, 512.0K, 80 bytes (`exact`: a
    whole number of the largest unit that divides it, as the flag would take it: 1K)."""
    for suffix, scale in reversed(SIZE_SUFFIXES.items()):
        if exact and n_bytes and n_bytes % scale == 0:
            return f"{n_bytes // scale}{suffix}"
        if not exact and n_bytes >= scale:
            return f"{n_bytes / scale:.1f}{suffix}"
    return str(n_bytes) if exact else f"{n_bytes} bytes"


def _class_weight(text):
    """--class-weight: "balanced", or LABEL:WEIGHT pairs separated by commas (e.g.
    "1:5,-1:1") as the dict {1: 5.0, -1: 1.0}; an error names the bad item."""
    if text.strip() == "balanced":
        return "balanced"
    weights = {}
    for item in text.split(","):
        label, colon, weight = item.strip().rpartition(":")
        if not item.strip():
            raise argparse.ArgumentTypeError(f"{text!r} has an empty item; expected "
                                             "'balanced' or pairs such as 1:5,-1:1")
        if not colon or not label or not weight:
            raise argparse.ArgumentTypeError(
                f"{item!r} is not LABEL:WEIGHT; expected 'balanced' or pairs such as "
                "1:5,-1:1")
        try:  # an integer label as an int (the dict reads as written), else a float
            key = int(label)
        except ValueError:
            try:
                key = float(label)
            except ValueError:
                key = math.nan
        if not math.isfinite(key):
            raise argparse.ArgumentTypeError(f"{item!r}: the label {label!r} is not a number")
        try:
            value = float(weight)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{item!r}: the weight {weight!r} is not a number") from None
        if key in weights:
            raise argparse.ArgumentTypeError(f"{item!r}: the label {label!r} is given twice")
        weights[key] = value
    return weights


# the input formats (onlinepgs.formats.FORMATS, not imported: `--help` stays quick)
FORMATS = ("svmlight", "vw", "csv", "tsv", "json")
FORMAT_HELP = ("input format (default: by DATA's extension: .vw, .csv, .tsv, .json/.jsonl/"
               ".ndjson, also under .gz/.bz2/.xz; else svmlight, and for stdin)")


def _columns(text):
    """CSV column names, comma-separated."""
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"expected comma-separated column names, got {text!r}")
    return names


def _label_map(text):
    """--label-map: TEXT:NUMBER pairs separated by commas (e.g. "Y:1,N:0") as a dict."""
    labels = {}
    for item in text.split(","):
        label, colon, number = item.strip().rpartition(":")
        try:
            value = float(number)
        except ValueError:
            value = math.nan
        if not colon or not label or not math.isfinite(value):
            raise argparse.ArgumentTypeError(
                f"{item!r} is not TEXT:NUMBER; expected pairs such as Y:1,N:0")
        if label in labels:
            raise argparse.ArgumentTypeError(f"{item!r}: the label {label!r} is given twice")
        labels[label] = value
    return labels


def _input_options(command):
    """How train reads DATA: the format, hashing, interactions, CSV columns."""
    group = command.add_argument_group("input")
    group.add_argument("--format", choices=FORMATS, default=None, help=FORMAT_HELP)
    group.add_argument("-q", "--quadratic", action="append",
                       default=None, metavar="AB",
                       help="cross the features of namespaces starting with letter A with "
                       "those starting with B (VW's -q; ':' matches any letter, -q :: all "
                       "pairs); repeatable; vw, csv, tsv and json input. train with PGS "
                       "(one row a step) hashes each row's pairs from its features' "
                       "hashes as it learns the row, as VW does, with no crossed chunk "
                       "made (other solvers, predict, eval and gap: each chunk's crossed "
                       "columns); a row costs its pairs' count more, nnz_A x nnz_B "
                       "(docs/design/features.md)")
    group.add_argument("--interactions", action="append",
                       default=None, metavar="ABC",
                       help="like -q, for pairs or triples (--interactions abc; a row's "
                       "triples cost nnz_A x nnz_B x nnz_C); repeatable")
    group.add_argument("--label", metavar="COL", default=None,
                       help="CSV/TSV: the label column")
    group.add_argument("--label-map", type=_label_map, default=None, metavar="MAP",
                       help="CSV/TSV: labels given as text, as numbers: TEXT:NUMBER,... "
                       "(e.g. Y:1,N:0; a label not in MAP is an error naming its line)")
    group.add_argument("--weight", metavar="COL", default=None,
                       help="CSV/TSV: the importance weight column")
    group.add_argument("--categorical", type=_columns, default=None, metavar="COLS",
                       help="CSV/TSV: columns whose values are categories (hashed as "
                       "column=value; a column named in no role is categorical)")
    group.add_argument("--numeric", type=_columns, default=None, metavar="COLS",
                       help="CSV/TSV: columns whose values are numbers, used as they are: "
                       "train with --geometry adaptive, which divides each by its largest "
                       "|value| seen, or scale them to about [-1, 1] first (the global "
                       "geometry's steps are not invariant to a feature's scale; a distance "
                       "in miles makes it diverge), or leave them categorical")
    group.add_argument("--ignore", type=_columns, default=None, metavar="COLS",
                       help="CSV/TSV: columns not read")
    group.add_argument("--delimiter", default=None,
                       help="CSV/TSV: the field separator (default: ',' for csv, tab for tsv)")
    group.add_argument("--no-header", dest="header", action="store_false", default=None,
                       help="CSV/TSV: the first line is a row, not column names; columns are "
                       "named by position, 1, 2, ... (--label 1, --numeric 3,4); predict, "
                       "eval and gap read the model's files alike")

def build_parser():
    parser = argparse.ArgumentParser(
        prog=PROG, description="Primal Gradient Solver: streaming l_p-regularized linear "
        "learning on svmlight/libsvm, VW text, CSV/TSV or JSON lines data (plain, .gz, "
        ".bz2, .xz, or - for stdin).")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    train = sub.add_parser("train", help="train (or continue training) a model",
                           description="Train on DATA files in order; '-' reads stdin.")
    train.add_argument("data", nargs="+", metavar="DATA")
    train.add_argument("-o", "--output", metavar="MODEL",
                       help="model file to write (atomically); without it the model is "
                       "trained and summarised but not saved")
    train.add_argument("-i", "--initial", metavar="MODEL",
                       help="continue training this model (its options are kept)")
    train.add_argument("--resume", action="store_true",
                       help="with -i: skip the rows the model's checkpoint already consumed")
    train.add_argument("--no-state", action="store_true",
                       help="write the weights only, without the PGS solver state: a smaller "
                       "file that predict, eval, gap and info use alike, but that -i and "
                       "--resume cannot continue (--solver sdca files hold the weights only "
                       "anyway)")
    opts = train.add_argument_group("model (ignored with -i)")
    opts.add_argument("--solver", choices=["pgs", "sdca"], default="pgs",
                      help="pgs (default): streaming, one chunk in memory; sdca: the batch "
                      "solver to the duality-gap tolerance 1e-6 (at most 1000 epochs), which "
                      "LOADS ALL DATA into memory (files that fit in memory; no -i, --passes, "
                      "hold-out, checkpoints or --scheduler)")
    opts.add_argument("--loss", default="logistic",
                      choices=sorted(CLASSIFICATION_LOSSES + REGRESSION_LOSSES))
    opts.add_argument("--multi-class", dest="multi_class", default="ovr",
                      choices=["ovr", "multinomial", "crammer_singer"],
                      help="K > 2 classes: ovr (default), K one-vs-rest problems; "
                      "multinomial (--loss logistic), the softmax loss of the K scores, "
                      "calibrated probabilities; crammer_singer (--loss hinge), the "
                      "multiclass hinge. Two classes keep the binary model")
    opts.add_argument("--p", type=float, default=2.0, help="norm of the regularizer, in (1, 2] and at least 1 + 1.2e-7 "
                      "(below 1.002 training is slower: see PGSClassifier's p)")
    opts.add_argument("--sigma", type=_sigma, default=None,
                      help="regularization weight, or auto: a race of runs over a grid of "
                      "sigma, judged by their progressive loss (the choice is printed and "
                      "saved) (default: auto (PGS), 1e-4 (--solver sdca))")
    opts.add_argument("--l1", type=_number, default=0.0,
                      help="weight of an l_1 term (sigma r(w) + L1 ||w||_1 + mean loss): "
                      "sparse models, every weight below its threshold exactly 0 (PGS: "
                      "soft-thresholded dual averaging, averages on the last iterate's "
                      "zeros; with --p below 2 only --iterate last; sdca: "
                      "Prox-SDCA, --p 2); 0: none")
    opts.add_argument("--l1-geometry", default="auto", choices=["auto", "l2", "lq"],
                      help="--solver sdca with --sigma 0 --l1 L1 (pure l_1): smooth it by "
                      "||w||_2^2 (l2, Prox-SDCA section 3.1) or ||w||_q^2, q = ln d / "
                      "(ln d - 1) (lq, section 3.2: rows with small max |x_ij| but large "
                      "||x||_2); auto (default): the one whose run-time bound is smaller on "
                      "the data")
    opts.add_argument("--radius", type=_radius, default="auto",
                      help="domain: none (R^n), a number (l_p ball), or auto (default): the "
                      "ball that holds the optimum, but R^n with --geometry adaptive at "
                      "--p 2")
    opts.add_argument("--batch-size", type=_int, default=1, help="rows per step (k)")
    opts.add_argument("--iterate", default="auto", choices=sorted(ITERATES + ("auto",)),
                      help="the iterate the model reports: weighted2, weighted, average "
                      "(averages of the steps' iterates with weights t^2, t, 1), last, "
                      "random (the global geometry only), or auto (default): weighted2, "
                      "but last with --geometry adaptive and with --l1 at --p below 2 or "
                      "with --forget")
    opts.add_argument("--no-intercept", action="store_true")
    opts.add_argument("--intercept-scaling", type=float, default=1.0)
    opts.add_argument("--epsilon", type=float, default=0.1,
                      help="width of the huber and epsilon_insensitive losses")
    opts.add_argument("-b", "--bits", type=int, default=None,
                      help="hash features into 2**BITS columns (svmlight: indices modulo "
                      "2**BITS, none by default; vw, csv, tsv, json: names hashed, "
                      "default 18)")
    opts.add_argument("--hash-seed", type=int, default=0, help="seed of the --bits hash")
    opts.add_argument("--random-seed", type=int, default=0, help="seed of the random iterate")
    opts.add_argument("--forget", type=_number, default=1.0, metavar="GAMMA",
                      help="forgetting for drifting data: each step weighs the past by "
                      "GAMMA, a memory of about 1/(1-GAMMA) steps (e.g. 0.999); 1: none. "
                      "With --geometry adaptive the per-coordinate sums of squares decay "
                      "too, not the feature scales")
    opts.add_argument("--geometry", default="global", choices=["global", "adaptive"],
                      help="global: one step size for every coordinate (PGS); adaptive: a "
                      "step per coordinate from its own squared gradients, on features "
                      "divided by their largest |value| seen, so raw numeric columns need no "
                      "scaling (the last iterate, no ball at --p 2: --iterate and --radius "
                      "auto settle to last and none with it; --iterate average, weighted or weighted2 "
                      "report an average; with --p below 2 one scalar step size "
                      "from the gradients' dual norms, and --radius a ball on the scaled "
                      "weights; --l1 below 2 with the last iterate, no ball at --p 2; --forget "
                      "with the last iterate)")
    opts.add_argument("--eta", type=_sigma, default="auto",
                      help="the adaptive geometry's base rate, or auto (the default): 0.1, "
                      "0.5 and 2 (8, 32 and 128 with --p below 2) raced over the first "
                      "4,000 rows, the best kept; --scheduler needs a number (e.g. 0.5)")
    opts.add_argument("--classes", default=None,
                      help="comma-separated labels and integer ranges A..B, e.g. "
                      "--classes -1,1, 1..20 or 0,2..5 (default: those of the model with -i, "
                      "else of the first chunk; train names them at the start)")
    opts.add_argument("--class-weight", type=_class_weight, default=None,
                      metavar="{balanced,LABEL:WEIGHT,...}",
                      help="weigh each row of a class by its class's weight (times its "
                      "importance weight): LABEL:WEIGHT pairs, e.g. 1:5,-1:1 (classes not "
                      "named weigh 1), or balanced: n / (K * n_c) estimated on the stream "
                      "as it goes (n rows so far, n_c of the row's class, K classes) "
                      "(default: none)")
    run = train.add_argument_group("run")
    run.add_argument("--passes", type=_int, default=1,
                     help="passes over the data (regular files only: not stdin or pipes)")
    run.add_argument("--chunk-rows", type=_int, default=2_000,
                     help="rows per chunk read and trained at once (memory: one chunk)")
    run.add_argument("--zero-based", type=_zero_based, default="auto", metavar="{auto,0,1}")
    run.add_argument("--holdout-every", type=_int, default=None, metavar="N",
                     help="hold out every N-th row from training and report its loss")
    run.add_argument("--checkpoint-every", type=_int, default=None, metavar="N",
                     help="save the model to -o every N rows (resumable with -i --resume)")
    run.add_argument("--quiet", action="store_true", help="no progress table")
    _skip_option(run)
    run.add_argument("--audit", action="store_true",
                     help="collect the names of the features that land in each column "
                     "and save them with the model, for `info MODEL --weights` (bounded: "
                     "at most 1,000,000 features and 3 names a column are kept)")
    # the estimators' MAX_MODEL_BYTES (not imported: `onlinepgs --help` stays quick)
    run.add_argument("--max-model-bytes", type=_model_bytes, default="1G",
                     metavar="SIZE",
                     help="memory budget of the model's state when the data decides its "
                     "width (no --bits): a feature index that would need more stops "
                     "training with its line (a stray index of 4e8 needs 6.4G). Bytes, or "
                     "with a suffix K, M, G, T (powers of 1024); 'none': no limit "
                     "(default 1G: 2**26 features of a binary model)")
    run.add_argument("--jobs", type=_int, default=None, metavar="N",
                     help="threads the runs of the sigma (and eta) race learn on, each "
                     "thread a group of runs over the same rows (default: one a run, up "
                     "to the cores this process may use but the one the reader parses "
                     "on while it parses; 1: one thread). The model does not depend on it: the same bit for "
                     "bit, whatever N")
    _input_options(train)
    dist = train.add_argument_group(
        "Dask (onlinepgs.dask: distributed PGS in rounds; needs onlinepgs[dask])")
    dist.add_argument("--scheduler", metavar="ADDRESS", default=None,
                      help="train on the dask.distributed cluster whose scheduler is at "
                      "ADDRESS (e.g. tcp://127.0.0.1:8786), or 'threads' for Dask's local "
                      "threads; DATA must be files the workers can read")
    dist.add_argument("--lanes", type=_int, default=None,
                      help="slices trained at once per round (default: the worker threads)")
    dist.add_argument("--slice-rows", type=_int, default=65536,
                      help="rows each lane trains per round (default 65536)")
    dist.add_argument("--connect-timeout", type=_number, default=10.0, metavar="SECONDS",
                      help="give up reaching the scheduler after this long (default 10)")

    predict = sub.add_parser("predict", help="write one prediction per row")
    _model_and_data(predict)
    predict.add_argument("-o", "--output", default="-", metavar="PRED",
                         help="output file, replaced atomically (default: stdout); a name "
                         "ending .gz, .bz2 or .xz is written compressed")
    predict.add_argument("--kind", default="labels",
                         choices=["labels", "scores", "probabilities"],
                         help="a line a row: its predicted label; its score (a classifier "
                         "of K > 2 classes: K scores, in the order of `info`'s classes); or "
                         "(logistic loss) the probability of each class, space-separated, "
                         "after a first line '# classes: C1 C2 ...' naming the columns; "
                         "numbers (a regressor's too) with 9 significant digits")
    _reading(predict)

    evaluate = sub.add_parser(
        "eval", help="accuracy, log loss, AUC / RMSE, MAE on DATA",
        description="Print the rows, then for a classifier the AUC (two classes, both in "
        "DATA), accuracy and log loss (logistic loss), for a regressor RMSE and MAE. One "
        "pass in memory that does not grow with the rows: the AUC is exact, its scores "
        "sorted in runs of 2^20 spilled to temporary files (TMPDIR, at most 24 bytes a "
        "row) and merged, which adds at most about 60 MB to predict's memory. Every row "
        "counts once: importance weights (VW's, CSV's --weight) are not applied, and a "
        "note says so where DATA gives rows other weights.")
    _model_and_data(evaluate)
    _reading(evaluate)

    gap = sub.add_parser(
        "gap", help="duality-gap certificate of MODEL's objective on DATA",
        description="Print P(w) (the model's objective on DATA), a dual value D <= P(w*) "
        "and gap = P(w) - D, an upper bound on P(w) - P(w*); one pass, bounded memory. "
        "The objective weighs each row's loss by its sample weight (a VW importance "
        "weight) times the class weight of its label when the model was trained with "
        "--class-weight (the weights are printed: a dict's as given, balanced from the "
        "class counts the model holds); weights of any size, 1e308 too, give the same "
        "objective as the same weights divided by one factor. A model whose weights are "
        "not finite, or whose objective cannot be computed in double precision, has no "
        "certificate: an error (exit 1).")
    _model_and_data(gap)
    gap.add_argument("--json", action="store_true",
                     help="print the certificate as JSON (per-problem values and the "
                     "class weights included)")
    gap.add_argument("--refine", type=_int, default=0, metavar="EPOCHS",
                     help="improve the dual point by EPOCHS epochs of SDCA from the "
                     "model's own before certifying (LOADS DATA into memory; about two "
                     "passes an epoch). The hinge, absolute and epsilon-insensitive losses "
                     "need it for a tight bound: rows on a kink of the loss want dual "
                     "values the one-pass dual point cannot give (a hinge model of a9a, "
                     "--sigma 1e-3, 60 passes: relative gap 0.023 in one pass, 2.1e-4 "
                     "with --refine 20, its true suboptimality 1.9e-4); at a small sigma "
                     "it tightens every loss's bound. One-vs-rest models without l1 (0: "
                     "one pass, bounded memory)")
    gap.add_argument("--objective", choices=["trained", "raw"], default="trained",
                     help="trained (the default): the objective the model was trained on; "
                     "for --geometry adaptive, the one on the scaled weights s_j w_j over "
                     "the features divided by their scales s_j (the largest |x_j| its "
                     "training saw), which is the global geometry's objective of the "
                     "columns divided by s_j. raw: sigma r(w) + l1 ||w||_1 on the weights "
                     "as they are (the same for a model of the global geometry)")
    _reading(gap)

    info = sub.add_parser("info", help="describe a model file")
    info.add_argument("model", metavar="MODEL")
    info.add_argument("--json", action="store_true",
                      help="print the whole header as JSON (with --weights: the weights)")
    info.add_argument("--weights", action="store_true",
                      help="print the non-zero weights, largest |weight| first, with the "
                      "names of the features in each column (hashed models: names "
                      "collected by train --audit; one block a class for one-vs-rest)")
    # (absent unless given: without --weights it is refused, `inspect.cmd_info`)
    info.add_argument("--top", type=_int, default=argparse.SUPPRESS, metavar="N",
                      help="with --weights: the N largest weights of each class (0: all; "
                      "default 20)")
    _serve_parser(sub)
    for command in sub.choices.values():
        _show_defaults(command)
    return parser


def _serve_parser(sub):
    serve = sub.add_parser(
        "serve", help="answer examples sent over TCP, one line each (a daemon)",
        description="Listen on HOST:PORT for clients that send examples, one a line, in "
        "MODEL's format (svmlight, VW text, CSV/TSV rows in the model's columns without "
        "the header, JSON lines; its hashing and interactions). Each line is answered "
        "with one line, in order: the prediction as `predict --kind` writes it for the "
        "row (no '# classes' line), or 'error: WHY' for a line that cannot be read (the "
        "connection stays open). Many clients at once; a client is read no faster than "
        "it takes its answers. With --learn a line with a label is scored, then learned "
        "(test-then-train: the answer is the prediction before learning), one row at a "
        "time in the order the lines arrive, the model as `train -i MODEL` of the same "
        "lines; a line whose step would make the model diverge (an overflow, "
        "predictions that run away) is answered 'error: not learned: WHY' and leaves "
        "the model as it was. SIGTERM or SIGINT: stop accepting, finish the update in progress, save "
        "to -o, exit 0. Example: onlinepgs serve model.pgs --port 0 --port-file "
        "port.txt, then `nc 127.0.0.1 $(cat port.txt) < test.svm`.")
    serve.add_argument("model", metavar="MODEL")
    serve.add_argument("--host", default="127.0.0.1", metavar="ADDRESS",
                       help="the address to listen on (another than this machine's "
                       "loopback only when named)")
    serve.add_argument("--port", type=_int, default=26542,
                       help="the TCP port; 0: a free one, printed and written to "
                       "--port-file")
    serve.add_argument("--port-file", metavar="FILE", default=None,
                       help="write the port listened on to FILE (atomically) once the "
                       "server accepts clients")
    serve.add_argument("--kind", default="labels",
                       choices=["labels", "scores", "probabilities"],
                       help="the answer to a row, as predict's --kind")
    serve.add_argument("--learn", action="store_true",
                       help="train on each line that has a label, after answering it "
                       "(PGS models saved with their state, --batch-size 1)")
    serve.add_argument("-o", "--output", metavar="OUT", default=None,
                       help="with --learn: save the model to OUT (atomically) every "
                       "--save-every rows learned and when stopped (SIGTERM, SIGINT)")
    serve.add_argument("--save-every", type=_int, default=None, metavar="N",
                       help="with -o: save after every N rows learned")
    serve.add_argument("--max-line-bytes", type=_int, default=1 << 20, metavar="N",
                       help="a longer line is answered 'error: line longer than N bytes' "
                       "and skipped to its newline")
    serve.add_argument("--max-clients", type=_int, default=64, metavar="N",
                       help="clients connected at once; one more is answered an error "
                       "line and closed")
    # (absent unless given: without --learn it is refused, `_options._check_serve`)
    serve.add_argument("--max-model-bytes", type=_model_bytes, default=argparse.SUPPRESS,
                       metavar="SIZE", help="with --learn: as train's (default 1G)")
    serve.add_argument("--zero-based", type=_zero_based, default="auto",
                       metavar="{auto,0,1}",
                       help="svmlight: auto, the model's record (else one-based)")
    serve.add_argument("--format", choices=FORMATS, default=None,
                       help="the lines' format (default: the one the model was trained on)")


def _show_defaults(command):
    """Append "(default: VALUE)" to the help of each option of `command` that has a
    default (not None, not a flag's False) and whose help does not already say it."""
    for action in command._actions:
        default = action.default
        # identity, not ==: a default of 0 (--hash-seed) is shown, a flag's False is not
        if (not action.option_strings
                or any(default is v for v in (None, False, argparse.SUPPRESS))
                or "default" in (action.help or "")):
            continue
        # %(default)s: argparse fills it in, and a '%' in the value stays literal
        action.help = f"{action.help} (default: %(default)s)" if action.help \
            else "default: %(default)s"


def _model_and_data(command):
    """The positional MODEL and DATA of predict, eval and gap."""
    command.add_argument("model", metavar="MODEL")
    command.add_argument("data", metavar="DATA")


def _reading(command):
    """How predict, eval and gap read DATA."""
    command.add_argument("--chunk-rows", type=_int, default=10_000)
    command.add_argument("--zero-based", type=_zero_based, default="auto", metavar="{auto,0,1}")
    command.add_argument("--format", choices=FORMATS, default=None,
                         help="input format (default: the one the model was trained on, "
                         "with its hashing, interactions and CSV columns; else by DATA's "
                         "extension)")
    _skip_option(command)


def _skip_option(command):
    """--skip-bad-lines, of every command that reads DATA."""
    command.add_argument("--skip-bad-lines", action="store_true",
                         help="skip a line that cannot be read (a bad number, label or "
                         "field count, bad JSON, ...) instead of stopping at it; the count "
                         "and the first one's place and reason are printed at the end (also "
                         "with --quiet). predict writes no line for a skipped one (as for a "
                         "blank line); gap certifies the rows read")



def flag_of(option):
    return "--" + option.replace("_", "-")


def given_options(argv):
    """The model options that `train`'s argv gives (not left at their defaults)."""
    parser = build_parser()
    train = parser._subparsers._group_actions[0].choices["train"]
    for action in train._actions:
        if action.dest in MODEL_OPTIONS:
            action.default = argparse.SUPPRESS
    return {name for name in MODEL_OPTIONS if name in vars(parser.parse_args(argv))}


