"""A PGS model file's reported model alone: its weights computed from the solver state a
slice of rows at a time, never the state whole nor a sigma race's other runs.

`load_learner(path, state=False)` (what ``predict``, ``eval``, ``gap`` and ``info`` use)
needs the model, not what training continues from. A full file holds the reported
model's solver state (``block_a``: dim x problems x fields, stored whole or by its
non-zero rows, `onlinepgs.model_io.staterows`) and, with sigma="auto", the states of the
race's other live runs (``race/``). Loading all of that took each run's dense state,
and more while checking it: ``predict`` with a ``-b 24`` race trained on a 40 KB file
read its 140 KB model in 0.89 GB (now 43 MB, as its ``--no-state`` file). Here the file is verified in one streaming pass (every array hashed, only the
arrays of K entries and the fitted attributes held), the state's scalars are restored
in a state of one coordinate (`onlinepgs._core.PGSState.weights_of` takes them to any
rows), and its per-coordinate arrays are read again in slices of rows whose weights are
computed and kept: dense, or sparse when that is smaller (the rule of a file saved
without its state, `onlinepgs.model_io.weights`). Reading costs the weights (at most one
dense weight vector, its non-zeros when fewer) and a slice. The model is the one a full
load reports, bit for bit, and loads as a file saved with ``state=False`` does: it
predicts, evaluates, certifies and is described alike, but cannot be trained further.

The checks are those of a full load: the state's scalars and arrays of K entries by
`onlinepgs.model_io.schema`'s own, the rows' arrays against `onlinepgs._layout` at the
state's width (stored rows strictly increasing, the weights' arrays finite), and the
model's consistency by the rules a full load applies (`schema._inconsistency`). A file
this path cannot read in slices (an array in Fortran order, an l1 model with p < 2
written before N's sums were saved, whose scale needs them counted again over every
coordinate) is loaded whole.
"""
import copy

import numpy as np

from onlinepgs._core._state_dict import unfold_marks_layout
from onlinepgs._layout import L1_MARKS_FIELDS, StateLayout
from onlinepgs._sparse_readout import SLICE_BYTES, csr_of, dense_of, scale_pairs_of
from onlinepgs.model_io import schema
from onlinepgs.model_io.errors import ModelFileError
from onlinepgs.model_io.jsonvalues import from_json
from onlinepgs.model_io.stateless import add_scales, stateless_header
from onlinepgs.model_io.staterows import ROWS
from onlinepgs.model_io.weights import SPARSE_ARRAYS, sparse_is_smaller

__all__ = ["load_reported"]

_SLICE_BYTES = SLICE_BYTES  # of the state's rows read at a time (the read-out's size)



class _Whole(Exception):
    """The file is read whole instead (see the module docstring)."""


def load_reported(archive, sklearn):
    """The (learner or estimator, header) of an open `container.Archive` whose header was
    read, with a PGS file's solver state reduced to its reported model's weights."""
    path, raw = archive.path, archive.raw
    try:
        rows_of = _row_arrays(raw)
    except _Whole:
        rows_of = ()
    header = None
    if rows_of:
        arrays = archive.arrays(keep=lambda name: name not in rows_of
                                and not name.startswith("race/"))
        header = from_json(raw)
        try:
            return _build(archive, header, arrays, path, sklearn), header
        except _Whole:
            pass
    arrays = archive.arrays()
    header = header or from_json(raw)
    return schema.build(header, arrays, path, sklearn=sklearn), header


def _row_arrays(raw):
    """The names of a full PGS file's arrays with a row per coordinate, as its table
    lists them; _Whole for any other file (SDCA, weights only, a malformed header)."""
    state = raw.get("state")
    if not isinstance(state, dict) or "solver" in state or raw.get("estimator") not in (
            "PGSClassifier", "PGSRegressor"):
        raise _Whole
    dim, config = state.get("dim"), state.get("config")
    if type(dim) is not int or dim < 2 or not isinstance(config, dict):
        raise _Whole
    try:
        names = StateLayout.of(config).row_arrays(dim)
    except (TypeError, ValueError):
        raise _Whole from None
    listed = {entry.get("name") for entry in raw["arrays"] if isinstance(entry, dict)}
    rows = {"state/" + key for key in names} & listed
    if "state/" + ROWS in listed:
        rows.add("state/" + ROWS)
    return rows


def _build(archive, header, arrays, path, sklearn):
    state_json = header["state"]
    config, dim = state_json["config"], state_json["dim"]
    layout = StateLayout.of(config)
    keys = layout.row_arrays(dim)
    marks = "on" in layout.fields and "l1_folded" not in state_json  # older l1 averages
    fields = len(L1_MARKS_FIELDS if marks else layout.fields)
    if config.get("l1", 0.0) > 0.0 and config.get("p") != 2.0 and "state/l1q_a" not in arrays:
        raise _Whole  # N's sums are counted again over every coordinate
    stored = state_json.get(ROWS)
    n_rows = _check_rows_entry(stored, keys, dim, header, path)
    K = config.get("n_problems")
    shapes = {key: ((n_rows, K, fields) if key == "block_a" else (n_rows, K))
              for key in keys}
    if any("state/" + key in arrays for key in keys):
        raise _Whole  # held whole to be checked (Fortran order): not read in slices
    for entry in header["arrays"]:
        key = entry["name"][len("state/"):]
        if key in shapes and (tuple(entry["shape"]) != shapes[key]
                              or entry["dtype"] != ("<i8" if key == "snapv_a" else "<f8")):
            raise _Whole  # the full load words what is wrong
    slices = _Slices(archive, keys, stored is not None, n_rows, K, fields, path)
    first = slices.first_row(marks, state_json)
    sub_header = {"state": {k: v for k, v in state_json.items() if k != ROWS},
                  "arrays": [e for e in header["arrays"] if e["name"].startswith("state/")
                             and e["name"] != "state/" + ROWS]}
    sub_header["state"]["dim"] = 1
    scalars = schema._build_state(sub_header, {**{k: v for k, v in arrays.items()
                                                  if k.startswith("state/")},
                                               **{"state/" + k: v for k, v in first.items()}},
                                  path)
    weights = _Weights(scalars, marks, state_json, path)
    if weights.empty_row_weight().any():
        raise _Whole  # a coordinate no row reached has a weight: not a sparse state
    nnz = np.zeros(K, dtype=np.int64)
    for coords, W in weights.of(slices):
        nnz += np.count_nonzero(W[coords > 0], axis=0)
    intercept = weights.intercept(slices)
    scales = _scales(slices, layout.offset("inv_scale"))
    d = dim - 1
    if sparse_is_smaller(K, d, int(nnz.sum())):
        coef = csr_of(weights.of(slices), nnz, K, d)
    else:
        coef = dense_of(weights.of(slices), K, d)
    return _reported(header, arrays, coef, intercept, scalars, dim, path, sklearn, scales)


def _scales(slices, inv_at):
    """The adaptive geometry's scales that are not 1 (`stateless.add_scales`'s
    coordinates and values) from its field 1 / s_j at `inv_at` (the first problem's copy),
    or None for the global geometry."""
    if inv_at is None:
        return None
    return scale_pairs_of((at, parts["block_a"][:, 0, inv_at]) for at, parts in slices)


def _check_rows_entry(stored, keys, dim, header, path):
    """The rows a file stores of each row array: dim, or its stored rows' count."""
    if stored is None:
        return dim
    if not (isinstance(stored, dict) and type(stored.get("n_rows")) is int
            and 0 <= stored["n_rows"] <= dim and sorted(stored.get("arrays") or ()) == keys):
        raise _Whole  # the full load words what is wrong
    entry = next((e for e in header["arrays"] if e["name"] == "state/" + ROWS), None)
    if entry is None or entry["dtype"] not in ("<i4", "<i8") or entry["shape"] != [
            stored["n_rows"]]:
        raise _Whole
    return stored["n_rows"]


class _Slices:
    """The state's row arrays read in slices of the same rows, with their coordinates."""

    def __init__(self, archive, keys, compact, n_rows, K, fields, path):
        self.archive, self.keys, self.compact, self.path = archive, keys, compact, path
        self.n_rows = n_rows
        self.step = max(1, _SLICE_BYTES // (8 * K * fields))
        self.K, self.fields = K, fields

    def __iter__(self):
        readers = [self.archive.rows("state/" + key, self.step) for key in self.keys]
        coords = (self.archive.rows("state/" + ROWS, self.step) if self.compact
                  else (np.arange(start, min(start + self.step, self.n_rows))
                        for start in range(0, self.n_rows, self.step)))
        last = -1
        for at, parts in zip(coords, zip(*readers)):
            at = at.astype(np.int64)
            if at.size and (at[0] <= last or (at.size > 1 and not (np.diff(at) > 0).all())
                            or at[-1] >= self.archive.raw["state"]["dim"]):
                raise ModelFileError(self.path, f"damaged state: array state/{ROWS} is not "
                                                "strictly increasing row numbers in [0, "
                                                f"{self.archive.raw['state']['dim']})")
            last = at[-1] if at.size else last
            yield at, dict(zip(self.keys, parts))

    def first_row(self, marks, state_json):
        """Coordinate 0's fields (the intercept's): its stored row, or zeros."""
        for at, parts in self:
            if at.size and at[0] == 0:
                return {key: part[:1] for key, part in parts.items()}
            break
        return {key: np.zeros((1, self.K, self.fields) if key == "block_a" else (1, self.K),
                              dtype=np.int64 if key == "snapv_a" else np.float64)
                for key in self.keys}


class _Weights:
    """The reported iterate's weights of rows, from the scalars of a state of one
    coordinate (`PGSState.weights_of`), the rows' arrays checked finite."""

    def __init__(self, scalars, marks, state_json, path):
        self.scalars, self.marks, self.state_json, self.path = scalars, marks, state_json, path

    def _of_parts(self, parts, intercept):
        block = parts["block_a"]
        if self.marks:  # an l1 average written with marks: today's layout, row by row
            block = unfold_marks_layout({
                "block_a": block, "cum_a": np.asarray(self.scalars.cum_a),
                "cum2_a": np.asarray(self.scalars.cum2_a), "t": self.scalars.t,
                "config": self.state_json["config"]})["block_a"]
        for key in ("block_a", "snap_a"):
            if key in parts and not np.isfinite(parts[key]).all():
                bad = parts[key][~np.isfinite(parts[key])][0]
                raise ModelFileError(self.path, f"inconsistent model: the solver state's {key} "
                                           f"holds {float(bad)} (the weights' arrays must be "
                                           "finite)")
        with np.errstate(all="ignore"):
            return self.scalars.weights_of(block, parts.get("snap_a"), parts.get("snapv_a"),
                                           intercept=intercept)

    def empty_row_weight(self):
        """The weights of a coordinate no row reached (all its fields 0): 0 here."""
        K = self.scalars.n_problems
        S = len(L1_MARKS_FIELDS) if self.marks else self.scalars.n_fields
        parts = {"block_a": np.zeros((1, K, S)), "snap_a": np.zeros((1, K)),
                 "snapv_a": np.zeros((1, K), dtype=np.int64)}
        return self._of_parts(parts, False)[0] != 0.0

    def of(self, slices):
        """(coordinates, their weights) a slice at a time."""
        for at, parts in slices:
            yield at, self._of_parts(parts, bool(at.size) and at[0] == 0)

    def intercept(self, slices):
        """Coordinate 0's weights (its stored row, or an empty row's)."""
        parts = slices.first_row(self.marks, self.state_json)
        return self._of_parts(parts, True)[0]


def _reported(header, arrays, coef, intercept, scalars, dim, path, sklearn, scales):
    """The learner of a file saved without its state holding these weights (`schema.build`
    of that file), checked as a full load checks its state, its statistics the state's."""
    config = header["state"]["config"]
    K, d = scalars.n_problems, dim - 1
    model = {"sigma": scalars.sigma, "l1": config.get("l1", 0.0),
             "radius": None if config["radius"] is None else scalars.radius}
    state = {"solver": "pgs-weights", **stateless_header(_Fields(model))}
    kept = {k: v for k, v in arrays.items() if k.startswith("attributes/")}
    if isinstance(coef, tuple):
        state["coef"] = {"storage": "sparse", "shape": [K, d]}
        kept.update(zip(SPARSE_ARRAYS, coef))
    else:
        kept["state/coef"] = coef
    kept["state/intercept_weight"] = (intercept if config["fit_intercept"]
                                      else np.zeros(K))
    add_scales(scales, kept.__setitem__)
    table = [e for e in header["arrays"] if e["name"].startswith("attributes/")]
    table += [{"name": name, "dtype": kept[name].dtype.str, "shape": list(kept[name].shape)}
              for name in kept if name.startswith("state/")]
    reduced = {**{k: v for k, v in header.items() if k != "race"}, "state": state,
               "arrays": table}
    est = schema.build(reduced, kept, path, sklearn=sklearn)
    view = copy.copy(est)  # the state's rules, at the file's width
    view._state = _StateAt(scalars, dim)
    del view._saved_stats
    reason = schema._inconsistency(view)
    if reason is not None:
        raise ModelFileError(path, f"inconsistent model: {reason}")
    est._saved_stats = view.online_stats_  # as the state computes them
    return est


class _Fields:
    def __init__(self, values):
        self.__dict__.update(values)


class _StateAt:
    """A state's scalars (a state of one coordinate) standing for the file's state of
    `dim` coordinates in the rules that look at its width."""

    def __init__(self, scalars, dim):
        self._scalars, self.dim = scalars, dim

    def __getattr__(self, name):
        return getattr(self._scalars, name)
