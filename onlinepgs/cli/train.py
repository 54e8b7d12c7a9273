"""``train`` on the streaming engine (onlinepgs.streaming): the options into a learner
and a `StreamTrainer`, ``-i``/``--resume``, and the engine's errors in the options' words.

``--solver sdca`` and ``--scheduler`` are dispatched to `onlinepgs.cli.train_sdca` and
`onlinepgs.cli.train_dask`.
"""
import sys
import time

from onlinepgs.cli.common import (check_model, check_output, class_note, data_base,
                                  estimator_from_args, in_flags, parse_classes,
                                  print_summary, reading_of, train_input, unsaved)
from onlinepgs.cli.errors import PROG, UsageError, UserError
from onlinepgs.cli.parser import MODEL_OPTIONS, flag_of, size_text
from onlinepgs.cli.progress import ByteProgress, ProgressTable, report_skipped, show_progress
from onlinepgs.streaming.errors import label_text


def cmd_train(args):
    """`train`: the options into the streaming engine (onlinepgs.streaming), its
    progress onto stderr and its errors into one line."""
    # the options' rules were checked by main (onlinepgs._options.check_command)
    kept = train_input(args)  # sets args.bits (hashed formats) and args.interactions
    if args.solver == "sdca":
        from onlinepgs.cli.train_sdca import train_sdca

        return train_sdca(args)
    from onlinepgs import streaming

    given_classes = parse_classes(args.classes) if args.classes else None
    sources = _train_sources(args)  # every input checked before any work
    check_output(args.output, args.data)
    if args.initial:
        est, checkpoint, base, extra = _continued(args)
        given = kept.get("columns")
        kept = extra.get("input") if isinstance(extra.get("input"), dict) else kept
        if given:  # CSV options given now override the model's (a new file's label
            # column may be named otherwise); the model file keeps the roles it reads by
            kept = {**kept, "columns": {**(kept.get("columns") or {}), **given}}
    else:
        est, checkpoint, base = estimator_from_args(args), None, args.zero_based
        extra = {"input": kept}
    sources = _read_as(sources, args, est, kept)
    # a run option (-i included): the budget guards this run's data, not the model
    est.set_params(max_model_bytes=args.max_model_bytes, n_jobs=args.jobs)  # -i too
    # predictions that ran away stop the command (the estimators warn): no model is written
    est._runaway_fatal = True
    if args.scheduler is not None:
        from onlinepgs.cli.train_dask import train_on_dask

        return train_on_dask(args, est, base)
    table = ProgressTable(sys.stderr, not args.quiet, est._settled()["iterate"])
    table.notes = [unsaved(args)] if args.output is None else []
    if est._classifier:  # given or the model's now; the first chunk's from the engine
        if given_classes is not None:
            table.notes.append(class_note(given_classes, "given by --classes"))
        elif args.initial:
            table.notes.append(class_note(est.classes_, f"those of the model {args.initial}"))
    table.bar = bar = ByteProgress(args.data, args.passes, sys.stderr.isatty() and not args.quiet)
    trainer = streaming.StreamTrainer(
        est, classes=given_classes, passes=args.passes, chunk_rows=args.chunk_rows,
        zero_based=base, holdout_every=args.holdout_every, checkpoint_path=args.output,
        checkpoint_every=args.checkpoint_every, resume=checkpoint,
        # quiet: no table rows to report, only the skipped lines
        progress=show_progress(table, bar) if table.enabled else report_skipped,
        next_report=None if table.enabled else (lambda done: None),
        extra={"input": _input_record(kept, sources)})
    trainer.final_state = not args.no_state
    _keep_names(args, est, trainer, sources)
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
        print_summary(est, args, start, before=held)
    elif args.output is None:
        print(unsaved(args), file=sys.stderr)
    return 0


def _keep_names(args, est, trainer, sources):
    """--audit: collect the names of the features in each column as the sources are
    read, and save them with the model (extra "feature_names", for `info --weights`).
    With -i the model's names are kept, and extended with --audit. An unhashed svmlight
    model needs none: its columns are the file's feature indices."""
    from onlinepgs.feature_names import FeatureNames

    names = None
    if args.initial:
        from onlinepgs.model_io import read_header

        kept = (read_header(args.initial).get("extra") or {}).get("feature_names")
        if kept is not None:
            try:
                names = FeatureNames.from_dict(kept)
            except ValueError as exc:
                raise UserError(f"{args.initial}: malformed extra.{exc}") from None
    if args.audit and est.n_bits is not None:
        if names is None:
            names = FeatureNames(est.n_bits, est.hash_seed,
                                 getattr(est, "interactions", None) or ())
        for source in sources:  # svmlight files: their column indices name the columns
            if source.fmt == "svmlight":
                source.chunks = _column_names(source, source.chunks, names)
            else:  # the namespaced formats' readers collect the names they hash
                source.options["audit"] = names
    if names is not None:
        # the engine writes the model file (checkpoints and the end): the names with it
        trainer.extra["feature_names"] = names.to_dict  # as collected at each save


def _input_record(kept, sources):
    """The model file's ``extra["input"]`` at each save: `kept` (the format, the CSV
    roles) and, for CSV/TSV, the columns read so far (the model's, then each source's
    header in turn), which predict, eval and gap then require of their files."""
    if kept.get("format") not in ("csv", "tsv"):
        return kept

    def record():
        header = list(kept.get("header") or [])
        for source in sources:
            for name in getattr(source.reader, "columns", None) or ():
                if name not in header:
                    header.append(name)
        return {**kept, "header": header} if header else kept
    return record


def _column_names(source, chunks, names):
    """`source.chunks` that records each chunk's column indices in `names`."""
    def named(chunk_rows, zero_based):
        for chunk in chunks(chunk_rows, zero_based):
            names.add_columns(chunk[0].indices, source.zero_based)
            yield chunk
    return named


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
    from onlinepgs._options import check_train_model
    from onlinepgs.model_io import load_learner
    from onlinepgs.pgs import PGSLearner

    check_model(args.initial)
    # model and stream position from one read: a checkpoint may be replaced meanwhile
    est, header = load_learner(args.initial, return_header=True)
    if hasattr(est, "_saved_stats"):  # weights only (--no-state)
        raise UserError(f"{args.initial}: saved without its solver state (--no-state): it "
                        "predicts but cannot be trained further with -i or --resume; "
                        "train again from the data (without --no-state to continue later)")
    if not isinstance(est, PGSLearner):
        # SDCA solves once on all its rows: there is no stream to continue
        raise UserError(f"{args.initial}: an {header.get('estimator', type(est).__name__)} "
                        "model (SDCA); -i continues PGS models only: train it again with "
                        "--solver sdca on all the data")
    # the rules on the model's options with this run's flags (--classes, --scheduler)
    check_train_model(args, est.get_params(), args.initial, regressor=not est._classifier,
                      balanced=hasattr(est, "class_counts_"))
    extra = header.get("extra") or {}
    recorded = extra.get("zero_based")
    if isinstance(recorded, bool) and args.zero_based not in ("auto", recorded):
        # the run's base would be the file's record too: predict's and eval's "auto"
        # would then read the files of the model's first runs shifted by one column
        raise UsageError(
            f"argument --zero-based: {0 if args.zero_based else 1} contradicts "
            f"{args.initial}, trained on {'zero' if recorded else 'one'}-based svmlight "
            f"indices (--zero-based {0 if recorded else 1}); give that, with the new "
            "files written in its base")
    base = data_base(args, extra)
    ignored = _ignored_options(args, est)
    if ignored:
        print(f"{PROG}: note: {', '.join(ignored)} ignored: with -i the model keeps "
              "its own options", file=sys.stderr)
    if not args.resume:
        return est, None, base, extra
    if "stream" not in extra:
        raise UserError(f"{args.initial}: not a checkpoint (no stream position); "
                        "drop --resume to continue training on new data")
    checkpoint = streaming.Checkpoint(
        args.initial, est, streaming.checkpoint_position(
            args.initial, extra, est.online_stats_["n_examples"]),
        extra["zero_based"] if isinstance(extra.get("zero_based"), bool) else None)
    try:
        streaming.check_resume(checkpoint, args.data, args.passes, args.holdout_every)
    except streaming.ResumeError as exc:
        raise UsageError(_in_options(exc, args)) from None
    if checkpoint.position.get("data") != args.data:
        print(f"{PROG}: note: resuming a run over {checkpoint.position.get('data')} on "
              f"{args.data}", file=sys.stderr)
    return est, checkpoint, base, extra


def _read_as(sources, args, est, kept):
    """The sources, each read in its format (--format; else its extension's, or with -i
    the model's: `reading_of`), hashed as the model is (its bits, seed and
    interactions); crossed by the learner's pass where it can (`crosses_rows`)."""
    from onlinepgs.formats import format_of
    from onlinepgs.streaming.sources import FileSource

    out = []
    for source in sources:
        given = args.format or (None if args.initial else format_of(source.name))
        fmt, spec, columns = reading_of(source.name, est, {"input": kept}, given,
                                        scoring=False)
        options = {} if spec is None else {"spec": spec, "columns": columns}
        if spec is not None and spec.interactions and getattr(est, "crosses_rows", None):
            options["crossed"] = est.crosses_rows()
        if args.skip_bad_lines:
            options["on_error"] = "skip"
        out.append(FileSource(source.name, fmt, **options))
    return out


def _in_options(exc, args):
    """A checkpoint that this run cannot resume (streaming.ResumeError), in the flags."""
    if exc.option == "pass":
        return (f"argument --passes: the checkpoint {args.initial} resumes in pass "
                f"{exc.saved + 1} (extra.stream.pass = {exc.saved}), this run has "
                f"--passes {exc.given}")
    if exc.option in ("passes", "holdout_every"):
        flag = flag_of(exc.option)
        saved, given = (("none" if v is None else v) for v in (exc.saved, exc.given))
        return (f"argument {flag}: the checkpoint {args.initial} was written by a run with "
                f"{flag} {saved}, this one has {given}; resume with the same {flag} (it "
                "decides which rows are trained)")
    return str(exc)


_WHY_CLASSES = (" (set by --classes, the model, or the first chunk's labels; pass "
                "--classes to give them all)")


def _train_error(exc, trainer, args):
    """An error of the engine as the command's one line, in its options' words, saying
    what the output file holds when a checkpoint was written."""
    from onlinepgs import streaming
    from onlinepgs._class_weight import ClassWeightError

    base = trainer.zero_based
    est = trainer.learner
    if isinstance(exc, (streaming.OutOfMemory, MemoryError)) and est.n_bits is not None:
        exc = _no_memory_for_bits(est, trainer, args)
    elif isinstance(exc, streaming.OutOfMemory):
        index = exc.column + (0 if base is True else 1)
        exc = UserError(f"{exc.where}: out of memory for a model over {exc.n_features} "
                        f"features (feature index {index}); --bits BITS hashes the "
                        "features into 2**BITS columns")
    elif isinstance(exc, MemoryError):
        exc = UserError(f"{', '.join(args.data)}: out of memory while training: "
                        "free memory or train on smaller chunks (--chunk-rows)")
    elif isinstance(exc, streaming.MissingLabelError):
        exc = UserError(f"{exc.where}: {exc.reason}")
    elif isinstance(exc, streaming.StrayLabelError):
        exc = UserError(f"{exc.where}: {exc.reason}")
    elif isinstance(exc, streaming.LabelError):
        exc = UserError(f"{exc.where}: {exc.reason}{_WHY_CLASSES}")
    elif isinstance(exc, streaming.ClassesError):
        exc = UserError(f"{exc.source}: the first chunk has one label ({exc.labels}); "
                        "pass --classes")
    elif isinstance(exc, streaming.LearnerError):
        error = exc.error
        if isinstance(error, ClassWeightError):  # a label no class: in the flag's terms
            exc = UserError(f"argument --class-weight: the label {label_text(error.label)} is "
                            f"not one of the classes "
                            f"[{', '.join(label_text(c) for c in error.classes)}]"
                            f"{_WHY_CLASSES}")
        elif hasattr(error, "budget"):  # ModelTooLargeError: the file's terms
            exc = _too_wide(error, exc, base)
        elif isinstance(error, FloatingPointError):  # PGSDivergedError: in the flags
            # (the state kept is not saved: the message's word on it does not apply)
            exc = UserError(f"{exc.where}: training diverged: "
                            f"{in_flags(getattr(error, 'reason', None) or str(error))}")
        elif getattr(error, "rows", ()) and exc.line is not None:
            # an error that names its rows (`AtRows`): in the file's words, lines
            exc = UserError(str(exc.in_source_words()))
    if trainer.last_checkpoint is not None:  # say what the output file now holds
        return UserError(f"{str(exc).splitlines()[0]} [{args.output} holds the last "
                         f"checkpoint; resume with -i {args.output} --resume]")
    return exc


def _no_memory_for_bits(est, trainer, args):
    """Out of memory with a width set by hashing (-b): what the state of 2**BITS
    columns takes, and the options that shrink it."""
    classes = trainer._classes
    n_problems = 1 if classes is None or len(classes) <= 2 else len(classes)
    runs = est._states_held()
    layout = est._layout(n_problems)  # onlinepgs._layout: what the state allocates
    from onlinepgs._columns_seen import capacity

    columns = est.__dict__.get("_columns")  # states over the columns seen (_columns_seen)
    width = 2**est.n_bits if columns is None else capacity(columns.n_slots)
    needed = layout.nbytes(width + 1) * runs
    race = f", for each of the {runs} runs of --sigma auto" if runs > 1 else ""
    advice = "; a fixed --sigma trains one" if runs > 1 else ""
    model = (f"the model of 2**{est.n_bits} columns" if columns is None else
             f"the model of the {columns.n_slots} columns the rows reached of 2**{est.n_bits}")
    return UserError(f"out of memory for {model} (-b {est.n_bits}): its solver state takes "
                     f"about {needed / 2**30:.1f} GiB ({layout.per_feature} bytes a "
                     f"column{race}); a smaller -b halves it at each step{advice}")


def _too_wide(exc, at, base):
    """The budget's refusal (ModelTooLargeError `exc`, at the place of the engine's
    LearnerError `at`) in the file's terms: its line and feature index, and the
    options to change."""
    needed = size_text(exc.needed) if exc.needed else "more"
    budget = size_text(exc.budget, exact=True)
    if at.line is None:
        where = f"{at.source}: the data has {exc.n_features} columns"
    else:
        index = exc.column + (0 if base is True else 1)
        where = f"{at.source}:{at.line}: feature index {index}"
    return UserError(f"{where} would make a model over {exc.n_features} features, "
                     f"{needed} of state, beyond --max-model-bytes {budget} (a stray "
                     "index?); --bits BITS hashes the features into 2**BITS columns, or "
                     "raise --max-model-bytes (none: no limit)")


def _ignored_options(args, est):
    """The model options given with -i whose values differ from the model's (which it
    keeps), as "--flag VALUE (the model's: VALUE)"."""
    params = est.get_params()
    notes = []
    for option, param in MODEL_OPTIONS.items():
        if option not in getattr(args, "given", ()):
            continue
        given, model = getattr(args, option), params.get(param)  # a regressor: no class_weight
        if option == "no_intercept":  # a flag: the parameter's negation
            model = not model
        if given != model:
            notes.append(flag_of(option) if isinstance(given, bool) else
                         f"{flag_of(option)} {given} (the model's: {model})")
    return notes


