"""The header's JSON values: strict RFC 8259 JSON with tagged non-finite floats.

`to_json` turns a value into JSON data (refusing what the format cannot hold: non-string
keys, keys starting with ``$``, integers over 4096 bits, nesting deeper than
`MAX_JSON_DEPTH`, anything but None, bool, int, float, str, lists and dicts) and tags
infinities and NaN as ``{"$float": "inf"}``; `from_json` undoes the tags. `json_depth`
measures the nesting of JSON text without parsing it, so a reader refuses a too-deep
header before it recurses into it.
"""
import math
import numbers
import re

from onlinepgs.model_io.errors import ModelFileError, short

__all__ = ["MAX_JSON_DEPTH", "to_json", "from_json", "is_float_tag", "json_depth"]

_NONFINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}
# header.json nests at most this many levels of lists and objects (the header is level 1,
# so the caller's extra, at level 2, nests at most MAX_JSON_DEPTH - 1 levels): the
# writer refuses deeper data and the reader refuses deeper files before parsing them,
# so neither recurses without bound
MAX_JSON_DEPTH = 64
# integers in header.json: far below Python's int-to-str digit limit (4300 digits)
_MAX_INT_BITS = 4096
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
# below this many bytes json_depth counts in Python (no numpy: `onlinepgs info`)
_SMALL_JSON = 2**20
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")

# ---- JSON values -----------------------------------------------------------------------
def to_json(value, where, path, *, arrays_as_lists=False, depth=1):
    """value as strict JSON data (non-finite floats tagged); refuses anything else.

    `depth` is the nesting level of `value` in ``header.json`` (the header object is 1):
    lists and dicts nested deeper than `MAX_JSON_DEPTH` allow are refused, so that
    whatever is written is read back (and a cyclic structure is refused, not recursed).
    """
    import numpy as np  # here: `onlinepgs info` reads headers without numpy

    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, numbers.Integral):
        value = int(value)
        if value.bit_length() > _MAX_INT_BITS:
            raise ModelFileError(path, f"{where} is an integer of {value.bit_length()} bits: "
                                       f"at most {_MAX_INT_BITS} bits can be stored")
        return value
    if isinstance(value, numbers.Real):
        value = float(value)
        if math.isfinite(value):
            return value
        if depth > MAX_JSON_DEPTH:  # the tag is an object one level down
            raise _too_deep(where, path)
        return {"$float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if isinstance(value, (dict, list, tuple)) or (arrays_as_lists
                                                  and isinstance(value, np.ndarray)):
        if depth > MAX_JSON_DEPTH:
            raise _too_deep(where, path)
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ModelFileError(path, f"{where} has the key {key!r}: only string keys "
                                           "can be stored")
            if key.startswith("$"):
                raise ModelFileError(path, f"{where} has the key {key!r}: keys starting "
                                           "with '$' are reserved by the model file format")
            out[key] = to_json(item, f"{where}[{key!r}]", path, arrays_as_lists=arrays_as_lists,
                                depth=depth + 1)
        return out
    if isinstance(value, (list, tuple)) or (arrays_as_lists and isinstance(value, np.ndarray)):
        return [to_json(item, f"{where}[{i}]", path, arrays_as_lists=arrays_as_lists,
                         depth=depth + 1)
                for i, item in enumerate(value)]
    raise ModelFileError(path, f"{where} = {short(value)} ({type(value).__name__}) cannot be "
                               "stored: only None, bool, int, float, str, lists and dicts")


def _too_deep(where, path):
    shown = where if len(where) <= 80 else where[:40] + "..." + where[-37:]
    return ModelFileError(path, f"{shown} is nested too deeply: a model file's header nests "
                                f"at most {MAX_JSON_DEPTH} levels of lists and dicts, so extra "
                                f"at most {MAX_JSON_DEPTH - 1} (extra itself is one level; a "
                                "non-finite float, stored as an object, is one too)")


def json_depth(data):
    """The deepest nesting of lists and objects in JSON text `data` (bytes), found
    without recursion: brackets outside strings, counted by running sums in blocks."""
    skeleton = _JSON_STRING.sub(b'""', data)
    if len(skeleton) < _SMALL_JSON:
        level = deepest = 0
        for code in skeleton.translate(None, _NOT_BRACKETS):  # the brackets, in order
            level += 1 if code in b"[{" else -1
            deepest = max(deepest, level)
        return deepest
    import numpy as np

    steps = np.zeros(256, dtype=np.int8)
    steps[[ord("["), ord("{")]] = 1
    steps[[ord("]"), ord("}")]] = -1
    codes = np.frombuffer(skeleton, dtype=np.uint8)
    level = deepest = 0
    block = 2**20
    for start in range(0, codes.shape[0], block):
        levels = np.cumsum(steps[codes[start:start + block]], dtype=np.int64) + level
        deepest = max(deepest, int(levels.max()))
        level = int(levels[-1])
    return deepest


def is_float_tag(value):
    return (isinstance(value, dict) and len(value) == 1 and "$float" in value
            and value["$float"] in _NONFINITE)


def from_json(value):
    """Undo the non-finite float tags of `to_json`."""
    if isinstance(value, dict):
        if is_float_tag(value):
            return _NONFINITE[value["$float"]]
        return {key: from_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [from_json(item) for item in value]
    return value


def class_weight_to_json(value, path):
    """A class_weight dict as the list of its ``[label, weight]`` pairs (JSON's keys are
    strings only, labels are numbers too)."""
    return [[to_json(label, "a label of parameter class_weight", path, depth=4),
             to_json(weight, f"parameter class_weight[{short(label)}]", path, depth=4)]
            for label, weight in value.items()]


def class_weight_from_json(value, path):
    """`class_weight_to_json`'s list back as the dict."""
    pairs = {}
    for pair in value:
        if not (isinstance(pair, list) and len(pair) == 2
                and all(isinstance(v, (bool, int, float, str)) for v in pair)):
            raise ModelFileError(path, f"malformed header: parameter class_weight holds "
                                       f"{short(pair)}, not a [label, weight] pair")
        pairs[pair[0]] = pair[1]
    return pairs
