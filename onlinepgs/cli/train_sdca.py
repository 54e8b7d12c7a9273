"""``train --solver sdca``: the batch solver on every row of DATA, read into memory."""
import sys
import time

import numpy as np

from onlinepgs.cli.common import (check_input, check_labels, check_output, open_reader,
                                  class_note, estimator_from_args, nonzero_line,
                                  parse_classes, reader_skipped, save, saved, unsaved)
from onlinepgs._checks import row_of_entry
from onlinepgs.cli.errors import PROG, UserError
from onlinepgs.cli.parser import size_text
from onlinepgs.streaming.errors import label_text


def train_sdca(args):
    """`train --solver sdca`: SDCA on every row of DATA at once (read into memory), to the
    relative duality gap 1e-6; one model file at the end."""
    import warnings

    import scipy.sparse as sp

    from onlinepgs.streaming import checkpoint_extra
    from onlinepgs.streaming.engine import widen
    from onlinepgs.streaming.sources import lines_of

    for source in args.data:
        check_input(source)
    check_output(args.output, args.data)
    est = estimator_from_args(args)  # its options' rules: main's check_command
    classes = parse_classes(args.classes) if args.classes else None
    base = args.zero_based
    blocks, labels = [], []
    for source in args.data:
        reader = open_reader(source, args.chunk_rows, base, skip=args.skip_bad_lines)
        lines = 0
        for X, y in reader:
            if base == "auto" and isinstance(reader.zero_based, bool):
                base = reader.zero_based  # the first chunk decided, for every file
            line_of = lines_of(lines, reader.n_lines, X.shape[0])
            if classes is not None:
                check_labels(y, classes, source, line_of, why=" (set by --classes)")
            lines = reader.n_lines
            _check_sdca_width(args, X, source, line_of, base)
            blocks.append(X)
            labels.append(y)
        reader_skipped(source, reader)
    if not blocks:
        raise UserError(f"{', '.join(args.data)}: no training rows were read")
    width = max(X.shape[1] for X in blocks)
    X = sp.vstack([widen(X, width) for X in blocks], format="csr")
    y = np.concatenate(labels)
    if est._classifier and np.unique(y).shape[0] < 2 and classes is None:
        raise UserError(f"{', '.join(args.data)}: every row has the label "
                        f"{label_text(y[0])}; a classifier needs two classes")
    absent = [] if classes is None else [c for c in classes if not np.any(y == c)]
    if est._classifier and absent:
        # SDCA's fit learns the classes of its rows: a class given without rows would be
        # left out of the model without a word
        raise UserError(f"{', '.join(args.data)}: no row has the label "
                        f"{label_text(absent[0])} of --classes; --solver sdca solves for "
                        "the classes of the rows (drop it from --classes, or train PGS, "
                        "which keeps a class before its rows come)")
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            est.fit(X, y)
        except ValueError as exc:
            raise UserError(f"{', '.join(args.data)}: {str(exc).splitlines()[0]}") from None
    for warning in caught:  # e.g. the tolerance not reached: one line, not a traceback
        print(f"{PROG}: note: {str(warning.message).splitlines()[0]}", file=sys.stderr)
    save(est, args.output, checkpoint_extra(base, True))
    # after a successful fit (no table here): an error stays the only line printed
    notes = [unsaved(args)] if args.output is None else []
    if est._classifier and not args.quiet:  # fit took all rows' labels (--classes checks)
        notes.append(class_note(est.classes_, "the labels of all rows"))
    if notes:
        print("\n".join(notes), file=sys.stderr)
    if not args.quiet:
        gap = np.sum(est.duality_gap_)
        primal = np.sum(est.primal_objective_)
        print("\n".join(["", "finished run (sdca)", f"number of examples = {X.shape[0]}",
                         f"epochs = {est.n_iter_}", f"primal objective = {primal:.9g}",
                         f"duality gap = {gap:.6g} (relative {gap / abs(primal):.3g})",
                         nonzero_line(est),
                         *_geometry_line(est),
                         f"seconds = {time.perf_counter() - start:.2f}",
                         f"model = {saved(args.output)}"]), file=sys.stderr)
    return 0


def _geometry_line(est):
    """Pure l_1: which smoothing ran (Prox-SDCA section 3.1 or 3.2), and who chose it."""
    geometry = getattr(est, "l1_geometry_", None)
    if geometry is None:
        return []
    how = "auto" if est.l1_geometry == "auto" else "--l1-geometry"
    return [f"l1 geometry = {geometry} (Prox-SDCA section {'3.2' if geometry == 'lq' else '3.1'}"
            f", by {how})"]


def _check_sdca_width(args, X, source, line_of, base):
    """Refuse, at its line, a row whose feature index would make SDCA's dense weights (two
    arrays of doubles per problem and feature, and X^T alpha) exceed --max-model-bytes."""
    budget = args.max_model_bytes
    if budget is None or args.bits is not None or not X.nnz:
        return
    limit = budget // 24  # 24 bytes a feature for one problem (more for K > 2 classes)
    if X.shape[1] <= limit:
        return
    at = int(np.flatnonzero(X.indices >= limit)[0])  # the first entry beyond the budget
    row, width = row_of_entry(X, at), int(X.indices[at]) + 1
    index = width - 1 + (0 if base is True else 1)
    raise UserError(f"{source}:{line_of(row)}: feature index {index} would make an SDCA model "
                    f"over {width} features ({size_text(24 * width)} a problem), beyond "
                    f"--max-model-bytes {size_text(budget, exact=True)} (a stray index?); "
                    "--bits BITS hashes the features into 2**BITS columns, or raise "
                    "--max-model-bytes (none: no limit)")


