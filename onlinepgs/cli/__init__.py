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


The package (parsing and printing on top of the library; each command's module is
imported only when that command runs, so ``onlinepgs --help`` imports no numpy):

================  ===================================================================
`errors`          `UserError` (exit 1), `UsageError` (exit 2), the program's name
`parser`          `build_parser`, the argument types (parsing only: the rules about
                  options are `onlinepgs._options`', checked by `main` after parsing)
`common`          what commands share: inputs, outputs, loading a model, classes
`progress`        ``train``'s progress table and byte bar
`train`           ``train`` on the streaming engine, ``-i`` / ``--resume``
`train_sdca`      ``train --solver sdca`` (all rows in memory)
`train_dask`      ``train --scheduler`` (onlinepgs.dask)
`predict`         ``predict`` and ``eval``
`inspect`         ``info`` and ``gap``
`serve`           ``serve``: a model answering examples sent over TCP (a daemon)
================  ===================================================================
"""
import contextlib
import importlib
import os
import sys

from onlinepgs._options import OptionError, check_command
from onlinepgs.cli.errors import PROG, UsageError, UserError
from onlinepgs.cli.parser import build_parser, given_options

__all__ = ["main", "build_parser", "UserError", "UsageError", "PROG"]

# command -> (module, function), imported when the command runs
COMMANDS = {"train": ("onlinepgs.cli.train", "cmd_train"),
            "predict": ("onlinepgs.cli.predict", "cmd_predict"),
            "eval": ("onlinepgs.cli.predict", "cmd_eval"),
            "gap": ("onlinepgs.cli.inspect", "cmd_gap"),
            "info": ("onlinepgs.cli.inspect", "cmd_info"),
            "serve": ("onlinepgs.cli.serve", "cmd_serve")}


def _chunks(args):
    """How the command's readers hand chunks to the learner: their matrices carry the
    interactions already (`onlinepgs.features.expanded_input`: a model with
    interactions takes them), and they are `onlinepgs._csr.CSR` where the command's
    path needs nothing else (it spares the import of scipy, about 0.25 s and 20 MB);
    scipy's for SDCA's whole-data solve and Dask."""
    if args.command == "info":
        return contextlib.nullcontext()
    from onlinepgs.features import expanded_input

    stack = contextlib.ExitStack()
    stack.enter_context(expanded_input())
    if not (args.command == "train" and (args.solver == "sdca"
                                         or args.scheduler is not None)):
        from onlinepgs._csr import light_chunks

        stack.enter_context(light_chunks())
    return stack


def main(argv=None):
    """Entry point of the ``onlinepgs`` console script; returns the exit code."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # argparse takes "-1,1" for an option: --classes -1,1 means --classes=-1,1 (and
    # --class-weight -1:5,1:1 alike)
    for i in range(len(argv) - 1):
        if argv[i] in ("--classes", "--class-weight") \
                and argv[i + 1][:2].lstrip("-")[:1] in set("0123456789."):
            argv[i:i + 2] = [f"{argv[i]}={argv[i + 1]}", None]
    argv = [a for a in argv if a is not None]
    args = parser.parse_args(argv)  # exits with 2 on usage errors
    if args.command == "train":
        args.given = given_options(argv)
    try:  # every rule about the options, before any input is opened
        check_command(args)
    except OptionError as exc:
        print(f"{PROG} {args.command}: error: {exc}", file=sys.stderr)
        return 2
    # The command multiplies no dense matrices (its chunks are sparse, the core is its
    # own): OpenBLAS's worker threads would only cost numpy's import their start-up,
    # about 30 ms of CPU. A value the user set is kept; numpy already imported (main
    # called from Python) is not affected.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    module, name = COMMANDS[args.command]
    command = getattr(importlib.import_module(module), name)
    try:
        with _chunks(args):
            return command(args)
    except (UsageError, OptionError) as exc:  # OptionError: -i's model with the flags
        print(f"{PROG} {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # the reader went away (`onlinepgs predict ... | head`): stop quietly, as Unix tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    # FloatingPointError: PGSDivergedError, also raised when an unusable model is read;
    # ValueError: also SvmlightError, ModelFileError and the other readers' errors (not
    # imported here: `info` needs neither numpy nor the svmlight reader)
    except (UserError, ValueError, OSError, FloatingPointError) as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if isinstance(exc, OSError) and exc.strerror:  # "file: reason", not "[Errno 2] ..."
            message = f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
