"""``train --scheduler``: distributed PGS in rounds (onlinepgs.dask) on a Dask cluster or
Dask's local threads, one model file at the end."""
import signal
import sys
import threading
import time

import numpy as np

from onlinepgs.cli.common import (class_note, in_flags, parse_classes, print_summary,
                                  save, unsaved)
from onlinepgs.cli.errors import UserError
from onlinepgs.cli.parser import size_text
from onlinepgs.cli.progress import ProgressTable


def train_on_dask(args, est, base):
    """`train --scheduler`: onlinepgs.dask over the files, one model file at the end."""
    from onlinepgs.streaming import checkpoint_extra
    from onlinepgs.svmlight import iter_svmlight

    # what --scheduler refuses (of the flags, of -i's model): onlinepgs._options' rules
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
        client = _connected(Client, args.scheduler, args.connect_timeout)
    classes = parse_classes(args.classes) if args.classes else getattr(est, "classes_", None)
    origin = ("given by --classes" if args.classes else
              f"those of the model {args.initial}")
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
        origin = f"the labels of the first chunk of {args.data[0]}; --classes gives them all"
    table = ProgressTable(sys.stderr, not args.quiet, est._settled()["iterate"])
    table.notes = [unsaved(args)] if args.output is None else []
    if est._classifier:
        table.notes.append(class_note(classes, origin))
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

    # SIGTERM (a batch system's stop, `timeout`) unwinds as SIGINT does: the fit's
    # copies on the workers are dropped in its `finally` (left there for good, before)
    previous = _terminate_as_interrupt()
    try:
        opd.partial_fit(est, list(args.data), classes=classes if est._classifier else None,
                        passes=args.passes, client=client, n_lanes=args.lanes,
                        slice_rows=args.slice_rows, zero_based=base,
                        callback=progress)
    except PGSDivergedError as exc:
        # the error names the round and the file's line; the model is not written
        raise UserError(f"{', '.join(args.data)}: {in_flags(str(exc).splitlines()[0])}"
                        ) from None
    except ModelTooLargeError as exc:  # names the file's line; says it in the flags
        raise UserError(_in_flag_units(in_flags(str(exc)), exc)) from None
    except (RuntimeError, OSError) as exc:
        # the cluster lost a worker (its state with it) or the scheduler mid-fit: one
        # line, and no model written (a traceback before)
        if not (client is not None or isinstance(exc, RuntimeError)):
            raise
        raise UserError(f"training on {args.scheduler} stopped: "
                        f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                        "; no model was written") from None
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if client is not None:
            client.close()
    save(est, args.output, checkpoint_extra(base, True), state=not args.no_state)
    if not args.quiet:
        print_summary(est, args, start, after=[f"rounds = {len(rounds)} on {args.scheduler}"])
    elif args.output is None:
        print(unsaved(args), file=sys.stderr)
    return 0


def _terminate_as_interrupt():
    """SIGTERM raised as KeyboardInterrupt in the main thread (the command then exits 130,
    "interrupted", after every `finally`); the handler it replaces, or None where none
    can be set (not the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, interrupt)


def _connected(Client, address, timeout):
    """A distributed Client of the scheduler at `address` within `timeout` seconds, else a
    UserError saying why. Client's own timeout bounds the TCP connection, not the
    handshake after it: a port that accepts and never answers as a scheduler (another
    service) hung the command; the handshake waits on a thread of its own here."""
    made = {}

    def connect():
        try:
            made["client"] = Client(address, timeout=timeout)
        except Exception as exc:  # (handed to the caller)
            made["error"] = exc

    thread = threading.Thread(target=connect, daemon=True, name="onlinepgs-dask-connect")
    thread.start()
    thread.join(timeout + 1.0)  # (Client's own timeout first, where it applies)
    if thread.is_alive():
        raise UserError(f"cannot reach the Dask scheduler at {address}: it accepted the "
                        f"connection but did not answer as a scheduler within "
                        f"{timeout:g} s (--connect-timeout)")
    exc = made.get("error")
    if isinstance(exc, (OSError, ValueError, TimeoutError)):
        raise UserError(f"cannot reach the Dask scheduler at {address}: "
                        f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
    if exc is not None:
        raise exc
    return made["client"]


def _in_flag_units(message, exc):
    """The budget's refusal with its sizes in --max-model-bytes' units (1.1K, 7.2G), as
    the command without --scheduler says them (the learner's message has 7.2 GB and the
    budget's count of bytes)."""
    from onlinepgs.pgs import _size

    if exc.needed:
        message = message.replace(_size(exc.needed), size_text(exc.needed), 1)
    return message.replace(f"--max-model-bytes {exc.budget}",
                           f"--max-model-bytes {size_text(exc.budget, exact=True)}", 1)
