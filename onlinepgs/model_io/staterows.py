"""A PGS solver state's per-coordinate arrays stored by their non-zero rows.

A PGS model file holds the whole solver state so that training resumes from it. Its
per-coordinate arrays (``block_a``: dim x problems x slots) are zero, bit for bit, on
every coordinate no example has reached: a 2**20-feature hashed model trained on a few
thousand rows, or an l1 model, is mostly zero rows. When it is smaller, the file keeps
only the rows that hold a non-zero byte in some per-coordinate array: those arrays
(first axis dim) are stored with their kept rows only, the row numbers as
``state/stored_rows`` (int32, or int64 past 2**31 - 1 coordinates, strictly
increasing), and the state's header entry says ``"stored_rows": {"arrays": [names],
"n_rows": N}``. Loading puts the kept rows back into zero arrays of dim rows: the state
is restored bit for bit (a zero row is all-zero bytes, so nothing else can be lost).
Older readers refuse such a file (an unexpected array), never misread it.

Expanding allocates what the file does not hold, so it is bounded: the expanded arrays
may take at most 4 GiB or 4096 times their stored bytes, whichever is larger (a
model beyond that is stored dense).
"""
import numpy as np

from onlinepgs import _columns_seen
from onlinepgs._core._pages import nonzero_rows
from onlinepgs._core._pgs import PGSState
from onlinepgs._core._state_dict import as_dict
from onlinepgs._layout import StateLayout
from onlinepgs.model_io.errors import ModelFileError, short

__all__ = ["add_slots", "compact", "expand", "over_slots", "state_template", "TakenRows",
           "ROWS", "SLOTS"]

ROWS = "stored_rows"
_ENTRY_BYTES = 250  # zip and .npy headers of one more entry (see weights.py)
_MAX_EXPANDED = 2**32
_MAX_RATIO = 4096


def _limit(stored_bytes):
    return max(_MAX_EXPANDED, _MAX_RATIO * stored_bytes)


class TakenRows:
    """The rows ``rows`` of ``array`` (along its first axis), to store as one array
    without copying them all at once: the checksum and the writer take them a piece of
    at most `PIECE_BYTES` at a time (a solver state's block is most of a process's
    memory; a whole copy would double it for the time of a save)."""

    PIECE_BYTES = 2**20

    def __init__(self, array, rows):
        self.array, self.rows = array, rows
        self.dtype = array.dtype
        self.shape = (len(rows),) + tuple(array.shape[1:])
        self.row_bytes = array.itemsize
        for n in array.shape[1:]:
            self.row_bytes *= n
        self.nbytes = self.row_bytes * len(rows)

    def pieces(self):
        """Contiguous copies of consecutive runs of the rows, in order."""
        step = max(1, self.PIECE_BYTES // max(1, self.row_bytes))
        for start in range(0, len(self.rows), step):
            yield np.ascontiguousarray(self.array[self.rows[start:start + step]])


def compact(state_dict, columns=None, width=None):
    """(the state's arrays to store by key, the header entry or None): the per-coordinate
    arrays cut to their non-zero rows when that makes the file smaller (as `TakenRows`
    of the state's arrays: the rows are copied a piece at a time as they are written).

    A state over the slots of a column map (`columns`, `onlinepgs._columns_seen`) is
    stored by its rows at their columns' coordinates, as a state over `width` features
    (`state_dict`'s dim is made ``width + 1``): the file a state over the width of the
    same steps gives."""
    dim = int(state_dict["dim"])
    arrays = {k: v for k, v in state_dict.items() if isinstance(v, np.ndarray)}
    per_row = StateLayout.of(state_dict["config"]).row_arrays(dim)
    if dim < 2 or not per_row:
        return arrays, None
    # by their bytes (-0.0 and NaN payloads are kept as they are), in the pages the
    # arrays have: a wide block is not read over its width
    rows = nonzero_rows([np.ascontiguousarray(arrays[key]) for key in per_row], dim)
    taken = rows
    if columns is not None:
        at = _columns_seen.coordinates(columns, rows)
        order = np.argsort(at, kind="stable")
        rows, taken = at[order], rows[order]
        state_dict["dim"] = dim = int(width) + 1
        state_dict["span"] = _columns_seen.span_at_width(columns)
    rows = rows.astype(np.int32 if dim <= 2**31 - 1 else np.int64)
    dense = sum(arrays[k].nbytes // arrays[k].shape[0] * dim for k in per_row)
    cut = sum(arrays[k].nbytes // arrays[k].shape[0] * rows.size for k in per_row)
    if columns is None and (cut + rows.nbytes + _ENTRY_BYTES >= dense
                            or dense > _limit(cut + rows.nbytes)):
        return arrays, None
    for key in per_row:
        arrays[key] = TakenRows(arrays[key], taken)
    arrays[ROWS] = rows
    return arrays, {"arrays": per_row, "n_rows": int(rows.size)}


def _increasing_in(rows, dim):
    """Whether integer `rows` are strictly increasing row numbers in [0, dim)."""
    return not rows.size or (rows[0] >= 0 and rows[-1] < dim
                             and (rows.size < 2 or bool((np.diff(rows) > 0).all())))


def expand(state_json, arrays, prefix, path):
    """The arrays of a state (names ``prefix + key``) with its stored rows put back in
    zero arrays of dim rows, checked; unchanged when the state is stored whole."""
    entry = state_json.get(ROWS)
    name = prefix + ROWS
    if entry is None:
        if name in arrays:
            raise ModelFileError(path, f"unexpected array {name}: the state's header has no "
                                       f"{ROWS!r} entry")
        return arrays
    dim = state_json.get("dim")
    if not (isinstance(entry, dict) and isinstance(entry.get("arrays"), list)
            and all(isinstance(k, str) for k in entry["arrays"])
            and type(entry.get("n_rows")) is int and type(dim) is int and dim >= 1):
        raise ModelFileError(path, f"malformed header: the state's {ROWS} entry "
                                   f"{short(entry)} is not {{\"arrays\": [names], "
                                   "\"n_rows\": N}")
    rows = arrays.get(name)
    if rows is None:
        raise ModelFileError(path, f"missing array {name}")
    n = entry["n_rows"]
    if rows.ndim != 1 or rows.dtype.kind not in "iu" or rows.shape[0] != n:
        raise ModelFileError(path, f"array {name} has dtype {rows.dtype.str} and shape "
                                   f"{rows.shape}, expected {n} integer row numbers")
    if not _increasing_in(rows, dim):
        raise ModelFileError(path, f"damaged state: array {name} is not strictly increasing "
                                   f"row numbers in [0, {dim})")
    out = {k: v for k, v in arrays.items() if k != name}
    stored = rows.nbytes + sum(arrays[prefix + k].nbytes for k in entry["arrays"]
                               if prefix + k in arrays)
    expanded = 0
    for key in entry["arrays"]:
        part = arrays.get(prefix + key)
        if part is None:
            raise ModelFileError(path, f"missing array {prefix + key}")
        if part.ndim < 1 or part.shape[0] != n:
            raise ModelFileError(path, f"array {prefix + key} has shape {part.shape}, "
                                       f"expected {n} stored rows")
        expanded += dim * (part.nbytes // n if n else part.itemsize)
        if expanded > _limit(stored):
            raise ModelFileError(path, f"damaged state: its {n} stored rows would expand to "
                                       f"{dim} ({expanded} bytes, over the limit of "
                                       f"{_limit(stored)})")
        full = np.zeros((dim,) + part.shape[1:], dtype=part.dtype)
        full[rows] = part
        out[prefix + key] = full
    return out


# the array of a file whose states are over the columns seen and keep a sum over their
# coordinates: each slot's column, in the order of the slots
SLOTS = "slots/columns"


def add_slots(estimator, add_array):
    """Write the columns of a learner's map in the order of their slots (`SLOTS`) where
    its file needs them: states over the slots that keep the l_p norm (p < 2, a ball, l1
    on a ball), whose recounts sum the coordinates in slot order, so that a load over the
    same slots continues bit for bit. Without such a sum the order changes no bit, and
    the file is the one a learner over the width writes, byte for byte."""
    columns = estimator.__dict__.get("_columns")
    if columns is None:
        return
    race = getattr(estimator, "_race", None)
    states = list(race.states.values()) if race is not None else [estimator._state]
    if any(st.layout.keeps_norm for st in states):
        add_array(SLOTS, np.asarray(columns.columns(), dtype=np.int64))


def _slots_in_file(arrays, reached, width):
    """The file's map in its slots' order (`SLOTS`) if it is one of these states' columns:
    distinct columns in [0, width) holding every column a state stores; else None (a file
    without it, or a malformed one: its states are then read over the columns in
    increasing order, as a file of states that keep no sum over them)."""
    order = arrays.get(SLOTS)
    if (order is None or order.ndim != 1 or order.dtype.kind not in "iu"
            or order.size < reached.size or (order.size and (
                int(order.min()) < 0 or int(order.max()) >= width))):
        return None
    order = order.astype(np.int64)
    try:
        columns = _columns_seen.ColumnMap(order)  # (refuses repeated columns)
    except ValueError:
        return None
    return columns if (columns.find(reached - 1) >= 0).all() else None  # (reached > 0)


def over_slots(header, arrays):
    """``(header, arrays, columns, dim)``: a wide model's states read over the columns
    their rows reach (`onlinepgs._columns_seen`), not expanded to the width, and their
    dim in the file; or the file's own header and arrays and None, None.

    A file whose states (its state and each run of its race) are over `MIN_WIDTH`
    features or more, each stored by its rows, is read through a `ColumnMap` of the
    columns any of them stores, in increasing order: each stored row number r becomes
    the slot of column r - 1 plus 1 (0, the intercept's, stays 0), and each state's dim
    the capacity of those slots. Anything else, and anything malformed (which `expand`
    then names), is left as it is."""
    state = header.get("state")
    race = header.get("race")
    runs = race.get("runs") if isinstance(race, dict) else {}
    if not isinstance(state, dict) or not isinstance(runs, dict):
        return header, arrays, None, None
    entries = [("state/", state)] + [(f"race/run{rid}_", scalars)
                                     for rid, scalars in runs.items()]
    stored = []
    for prefix, scalars in entries:
        dim = scalars.get("dim") if isinstance(scalars, dict) else None
        rows = arrays.get(prefix + ROWS)
        if (type(dim) is not int or dim - 1 < _columns_seen.MIN_WIDTH
                or not isinstance(scalars.get(ROWS), dict) or rows is None
                or rows.ndim != 1 or rows.dtype.kind not in "iu"
                or not _increasing_in(rows, dim) or dim != entries[0][1].get("dim")):
            return header, arrays, None, None
        stored.append(rows)
    file_dim = state["dim"]
    reached = np.unique(np.concatenate(stored).astype(np.int64))
    reached = reached[reached > 0]
    columns = _slots_in_file(arrays, reached, file_dim - 1)
    if columns is None:
        columns = _columns_seen.ColumnMap(reached - 1)
    dim = _columns_seen.capacity(columns.n_slots) + 1
    header, arrays = dict(header), dict(arrays)
    arrays.pop(SLOTS, None)
    new_scalars = {}
    for (prefix, scalars), rows in zip(entries, stored):
        at = np.zeros(rows.size, dtype=np.int64)  # row 0, the intercept's, stays 0
        data = rows > 0
        at[data] = columns.find(rows[data].astype(np.int64) - 1) + 1
        # by slot (the file's rows are by column): the stored rows in that order
        order = np.argsort(at, kind="stable")
        if (np.diff(order) < 0).any():
            for key in scalars[ROWS].get("arrays", ()):
                if isinstance(arrays.get(prefix + key), np.ndarray):
                    arrays[prefix + key] = arrays[prefix + key][order]
        arrays[prefix + ROWS] = at[order].astype(rows.dtype)
        new_scalars[prefix] = dict(scalars, dim=dim, span=min(
            int(scalars.get("span", dim)) if type(scalars.get("span")) is int else dim,
            1 + columns.n_slots))
    header["state"] = new_scalars["state/"]
    if runs:
        header["race"] = dict(race, runs={rid: new_scalars[f"race/run{rid}_"]
                                          for rid in runs})
    return header, arrays, columns, file_dim


def add_state(state, add_array, prefix, scalar, columns=None, width=None):
    """Write a `PGSState`'s arrays with ``add_array(prefix + key, array)`` (compact when
    smaller; a state over the slots of `columns` at its columns, over `width` features:
    `compact`) and return its header scalars, ``scalar(key, value)`` each, with the rows
    entry. The arrays are the state's own, not `PGSState.to_dict`'s copies: written as
    they are (a save comes between updates), without a second state in memory."""
    state_dict = as_dict(state, False)
    stored, rows = compact(state_dict, columns, width)
    for key, value in stored.items():
        add_array(prefix + key, value)
    scalars = {key: scalar(key, value) for key, value in state_dict.items()
               if not isinstance(value, np.ndarray)}
    if rows is not None:
        scalars[ROWS] = rows
    return scalars


def state_template(config, dim):
    """What a state of `config` over `dim` coordinates holds, as `PGSState.to_dict`
    gives it, for checking a file's state against: the scalars and the arrays of K
    entries of a state of no features, and the saved arrays of a row per coordinate as
    `onlinepgs._layout` has them at `dim` (read-only views of one element: nothing of
    the width is allocated). The constructor's errors for a bad configuration."""
    template = PGSState(**config, n_features=0).to_dict()
    for key, (shape, dtype) in StateLayout.of(config).saved(dim).items():
        template[key] = np.broadcast_to(np.empty((), dtype=dtype), shape)
    return template
