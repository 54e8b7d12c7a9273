"""``info`` (a model file's header, described or as JSON) and ``gap`` (the duality-gap
certificate of a model's objective on data)."""
import json
import math

from onlinepgs.cli.common import check_model, data_base, load, open_reader, reading_of
from onlinepgs.streaming.errors import label_text


def cmd_gap(args):
    from onlinepgs.duality import duality_gap_stream
    est, extra = load(args.model, "gap")
    cert = duality_gap_stream(est, open_reader(args.data, args.chunk_rows,
                                               data_base(args, extra),
                                               reading_of(args.data, est, extra,
                                                          args.format)))
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
            print(f"gap[{label_text(label)}] = {value:.12g}")
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


def cmd_info(args):
    from onlinepgs.model_io import load_learner, read_header
    from onlinepgs.streaming import checkpoint_position

    check_model(args.model)
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
        print("classes: " + ", ".join(label_text(c) for c in classes))
    for line in _online_lines(header.get("online_stats") or {}):
        print(line)
    if position is not None:
        print(f"checkpoint: pass {position['pass'] + 1}, file {position['file'] + 1}, "
              f"row {position['rows']}")
    return 0


