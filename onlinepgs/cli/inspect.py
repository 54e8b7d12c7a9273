"""``info`` (a model file's header, described or as JSON) and ``gap`` (the duality-gap
certificate of a model's objective on data)."""
import json
import math
import sys

from onlinepgs.cli.common import (check_model, data_base, load, nonzero_text, open_reader,
                                  reader_skipped, reading_of)
from onlinepgs.cli.errors import PROG, UsageError
from onlinepgs.streaming.errors import label_text


def cmd_gap(args):
    from onlinepgs.duality import duality_gap_stream
    est, extra = load(args.model, "gap")
    if args.refine and not _refinable(est):
        raise UsageError("argument --refine: SDCA's epochs refine one-vs-rest models "
                         f"without l1; {args.model} has " + (
                             f"l1={est.l1:g}" if getattr(est, "l1", 0) else
                             f"multi_class={est.multi_class!r}") + " (gap without --refine "
                         "certifies it in one pass)")
    reader = open_reader(args.data, args.chunk_rows, data_base(args, extra),
                         reading_of(args.data, est, extra, args.format),
                         skip=args.skip_bad_lines)
    chunks = _LabelsChecked(est, reader, args.data)
    cert = (duality_gap_stream(est, chunks, objective=args.objective) if not args.refine
            else _refined(est, chunks, args))
    reader_skipped(args.data, reader)
    if (not args.refine and _refinable(est) and est.loss in _KINKED
            and cert.relative_gap > _LOOSE):
        print(f"{PROG}: note: relative gap {cert.relative_gap:.2g} in one pass, which for "
              f"the {est.loss} loss can be far above the model's true suboptimality (rows "
              "on its kink); --refine 20 tightens it by SDCA epochs, rows in memory",
              file=sys.stderr)
    weighing = _class_weights(est)
    if args.json:
        result = cert.as_dict()
        if getattr(est, "geometry", "global") == "adaptive":
            result["objective"] = "scaled" if args.objective == "trained" else "raw"
        if est._classifier and cert.dual_scale.shape[0] > 1:
            result["classes"] = est.classes_.tolist()
        if weighing is not None:
            result["class_weight"], result["class_weight_from"] = weighing
        print(json.dumps(_json_safe(result), indent=2))
        return 0
    print(f"rows = {cert.n_rows}")
    if getattr(est, "geometry", "global") == "adaptive":  # which of its two objectives
        print("objective = " + ("scaled (sigma r(S w) + l1 ||S w||_1, S the features' "
                                "scales)" if args.objective == "trained" else
                                "raw (sigma r(w) + l1 ||w||_1)"))
    for key in ("primal", "dual", "gap", "relative_gap"):
        print(f"{key} = {getattr(cert, key):.12g}")
    if cert.gap_per_problem.shape[0] > 1:  # one-vs-rest problems, one per class
        for label, value in zip(est.classes_, cert.gap_per_problem):
            print(f"gap[{label_text(label)}] = {value:.12g}")
    if weighing is not None:
        weights, source = weighing
        print("class_weight = " + ",".join(f"{label}:{value:.9g}" for label, value in
                                           weights.items()) + f" ({source})")
    return 0


def _class_weights(est):
    """``({label: weight}, where they come from)`` of the class weights the certificate
    applies (the model's: `_class_weight.objective_weights`), or None."""
    from onlinepgs._class_weight import BALANCED, objective_weights

    weights = objective_weights(est)
    if weights is None:
        return None
    source = ("balanced: W / (K W_c) from the class counts the model holds, those of "
              "its training rows (a stream's estimate at its end)"
              if est.class_weight == BALANCED else "the model's class_weight")
    return {label_text(c): float(w) for c, w in zip(est.classes_, weights)}, source


# a relative gap above this in one pass, for a loss with a kink, draws the note on --refine
_LOOSE = 1e-2
_KINKED = ("hinge", "absolute", "epsilon_insensitive")


def _refinable(est):
    """Whether --refine applies: SDCA's epochs are one-vs-rest's, without l1."""
    return not getattr(est, "l1", 0) and getattr(est, "multi_class", "ovr") == "ovr"


class _LabelsChecked:
    """The reader's chunks, each label checked against the model's classes at its line
    before the chunk is certified (as eval checks them: the certificate would name the
    row counted in the stream, blank and comment lines left out)."""

    def __init__(self, est, reader, data):
        self.est, self.reader, self.data = est, reader, data
        self.source_name = getattr(reader, "source_name", data)

    def __iter__(self):
        from onlinepgs.cli.common import check_labels
        from onlinepgs.streaming import read_ahead

        for X, y, w, line_of in read_ahead(self.reader):
            if self.est._classifier:
                check_labels(y, self.est.classes_, self.data, line_of,
                             what="the model's classes")
            yield (X, y) if w is None else (X, y, w)


def _refined(est, reader, args):
    """--refine N: the rows held in memory, the dual point improved by N epochs of SDCA
    (`duality_gap(..., refine_epochs=N)`)."""
    import numpy as np

    from onlinepgs._csr import vstack, widen
    from onlinepgs.cli.errors import UserError
    from onlinepgs.duality import duality_gap

    blocks, labels, weights = [], [], []
    for chunk in reader:  # (X, y), or (X, y, w) from a format with weights
        X, w = chunk[0], chunk[2] if len(chunk) == 3 else None
        blocks.append(X)
        labels.append(chunk[1])
        weights.append(np.ones(X.shape[0]) if w is None else w)
    if not blocks:
        raise UserError(f"{args.data}: no rows: the duality gap needs at least one row")
    width = max(X.shape[1] for X in blocks)
    try:
        return duality_gap(est, vstack([widen(X, width) for X in blocks]),
                           np.concatenate(labels), np.concatenate(weights),
                           refine_epochs=args.refine, objective=args.objective)
    except ValueError as exc:
        raise UserError(f"{args.data}: {exc}") from None


def _json_safe(value):
    """Standard JSON: non-finite floats as the strings "inf", "-inf", "nan" (float() reads them)."""
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def _online_lines(stats):
    """The online statistics a reader wants, in two lines (`info --json` has them all):
    the run (rows, steps, weight, progressive loss and error rate), then the regret
    bound once: summed over the one-vs-rest problems of K > 2 classes, as the end of
    `train` prints it, with the optimization error bound it gives."""
    run = [f"{key}={_number(stats[key])}" for key in
           ("n_examples", "n_steps", "sum_weight", "progressive_loss", "progressive_error_rate",
            "progressive_loss_last", "progressive_error_rate_last")
           if key in stats]
    lines = ["online: " + ", ".join(run)] if run else []
    if "regret_bound" in stats:
        regret = stats["regret_bound"]
        problems = len(regret) if isinstance(regret, list) else 1
        line = f"regret_bound: {_number(_sum(regret))}"
        if "optimization_error_bound" in stats:
            line += (f" (optimization_error_bound "
                     f"{_number(_sum(stats['optimization_error_bound']))})")
        if problems > 1:
            line += f", summed over {problems} one-vs-rest problems"
        lines.append(line)
    return lines


def _sum(value):
    """A statistic of the header: a number, or a list of one a problem (summed)."""
    return math.fsum(float(v) for v in value) if isinstance(value, list) else float(value)


def _number(value):
    """An integer as it is, a float to 6 significant digits (strings such as "inf" as
    they are)."""
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()
                                  and abs(value) < 1e15):
        return str(int(value))
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _header_and_classes(path):
    """The header of a model file, its classes (None for a regressor) and its weights'
    (non-zeros, count), checked and verified; without numpy where the file holds
    numpy's plain arrays (as save_model writes them): numpy's import would be most of
    a cold ``info``."""
    from onlinepgs.model_io import ModelFileError, container, load_learner, read_header
    from onlinepgs.model_io.jsonvalues import from_json
    from onlinepgs.model_io.weights import count_plain, plain_keep

    plain = container.read_plain(path, keep=("attributes/classes_",) + plain_keep)
    if plain is not None:
        raw, kept = plain
        counts = count_plain(raw, kept)
        if counts is not None:
            classes = kept.get("attributes/classes_")
            return (from_json(raw), None if classes is None
                    else container.plain_values(*classes), counts)
    header = read_header(path)  # numpy's path: it decides, or words the error
    classifier = any(entry.get("name") == "attributes/classes_"
                     for entry in header.get("arrays", ()))
    try:  # the model, for its classes and the count of an older PGS file's weights
        est = load_learner(path, state=False)
    except ModelFileError:
        if classifier:
            raise
        return header, None, None  # a regressor's header alone, as before
    model = est.model_
    counts = (model.n_nonzero, model.n_problems * model.n_features)
    return header, est.classes_ if classifier else None, counts


def cmd_info(args):
    if args.weights:
        return _info_weights(args)
    if hasattr(args, "top"):  # (absent unless given)
        raise UsageError("argument --top: needs --weights (the weights it counts)")
    from onlinepgs.streaming import checkpoint_position

    check_model(args.model)
    header, classes, counts = _header_and_classes(args.model)
    if args.json:
        if counts is not None:
            header["weights"] = {"n_nonzero": counts[0], "n_weights": counts[1]}
        print(json.dumps(_json_safe(header), indent=2, sort_keys=True))
        return 0
    # everything checked before anything is printed: an error, not half a report
    extra = header.get("extra") or {}
    seen = (header.get("online_stats") or {}).get("n_examples")
    position = checkpoint_position(args.model, extra, seen if type(seen) is int else None) \
        if "stream" in extra else None
    params = header.get("params", {})
    print(f"model: {args.model}")
    for key in ("estimator", "format_version", "onlinepgs_version"):
        if key in header:
            print(f"{key}: {header[key]}")
    print("params: " + ", ".join(f"{k}={v}" for k, v in sorted(params.items())))
    if "n_features" in header:
        print(f"n_features: {header['n_features']}")
    if counts is not None:
        print(f"weights: {nonzero_text(*counts)}")
    if (header.get("state") or {}).get("solver") == "pgs-weights":
        print("solver state: none (saved with --no-state: -i and --resume cannot continue it)")
    if classes is not None:
        print("classes: " + ", ".join(label_text(c) for c in classes))
    for line in _online_lines(header.get("online_stats") or {}):
        print(line)
    if position is not None:
        print(f"checkpoint: pass {position['pass'] + 1}, file {position['file'] + 1}, "
              f"row {position['rows']}")
    return 0




def _info_weights(args):
    """`info --weights`: the model's non-zero weights, largest |weight| first, with the
    names of the features in each column (text, or JSON with --json)."""
    # numpy and the model only here: plain `info` reads the header alone
    from onlinepgs.feature_names import weights_report

    est, extra = load(args.model, "info --weights")
    report = weights_report(est, _model_names(args.model, est, extra),
                            getattr(args, "top", 20))
    if args.json:
        print(json.dumps(_json_safe({"model": args.model, **report}), indent=2))
        return 0
    what = {"regression": "regressor", "one-vs-rest": "one-vs-rest classifier: one "
            "weight vector a class, scoring it against the others",
            "multinomial": "multinomial classifier: one weight vector a class, the "
            "softmax of the scores its probabilities",
            "crammer_singer": "Crammer-Singer classifier: one weight vector a class, "
            "the largest score wins"}.get(report["kind"])
    if report["kind"] == "binary":
        what = (f"binary classifier: positive weights favour class "
                f"{label_text(report['classes'][-1])}")
    print(f"model: {args.model} ({what})")
    print(report["names_note"])
    for problem in report["problems"]:
        shown = len(problem["weights"])
        head = (f"{problem['n_nonzero']} non-zero weights of {report['n_features']} "
                f"columns" + (f"; the {shown} largest |weight|" if shown < problem[
                    "n_nonzero"] else ""))
        if report["kind"] not in ("binary", "regression"):
            head = f"class {label_text(problem['class'])}: {head}"
        print(head)
        width = max([len("column")] + [len(str(r["column"])) for r in problem["weights"]])
        print(f"  {'column':>{width}} {'weight':>14}  names")
        for row in problem["weights"]:
            # the weight of the column's first named feature: hashing may have negated
            # it in the column (its sign); a colliding name of the other sign says so
            sign = row["signs"][0] if row.get("signs") else 1
            print(f"  {row['column']:>{width}} {sign * row['weight']:>14.8g}  "
                  f"{_names_text(row, report)}")
        print(f"  intercept {problem['intercept']:.8g}")
    return 0


def _names_text(row, report):
    """A column's names as "a^x | b^y (+3 more)", or why it has none."""
    if report["names"] == "none":
        return "(no name: train with --audit)"
    first = row["signs"][0] if row.get("signs") else 1
    text = " | ".join(name + (" (negated)" if sign != first else "")
                      for name, sign in zip(row["names"], row.get("signs") or ()))
    if row["more"]:
        text += f"{' ' if text else ''}(+{row['more']} more)"
    if not text:
        text = "(no name collected" + (": the cap was reached)" if report["names_capped"]
                                       else ")")
    return text


def _model_names(path, est, extra):
    """The names of a model's columns: collected in training (extra "feature_names"),
    else an unhashed model's column indices, else None."""
    from onlinepgs.cli.errors import UserError
    from onlinepgs.feature_names import FeatureNames

    if "feature_names" in extra:
        try:
            names = FeatureNames.from_dict(extra["feature_names"])
        except ValueError as exc:
            raise UserError(f"{path}: malformed extra.{exc}") from None
        if names.offset is None and names.n_bits != est.n_bits:
            raise UserError(f"{path}: extra.feature_names hashes into 2**{names.n_bits} "
                            f"columns, the model into 2**{est.n_bits}")
        return names
    if est.n_bits is None:
        base = extra.get("zero_based")
        return FeatureNames.for_columns(base if isinstance(base, bool) else None)
    return None
