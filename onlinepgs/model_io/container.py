"""The model file's container: a zip of ``header.json`` and one ``.npy`` per array, with
a SHA-256 checksum of the arrays and the header (`_digest`).

Writing is `onlinepgs.model_io.writing`'s. Reading: `read` opens an archive, checks its
header's format, version and table of arrays, reads the arrays with bounded memory
(`_Room`: whatever the archive's directory claims, the entries read add up to at most
the file's size) and verifies the SHA-256 checksum. What the
header's fields mean for a model is `onlinepgs.model_io.schema`'s business; the format
itself is described in `onlinepgs.model_io`'s docstring.

`read_plain` checks and verifies a file as `read` does without numpy, for
``onlinepgs info`` (numpy's import is most of a cold ``info``), and leaves anything
but numpy's plain .npy entries to `read`. Hence numpy is imported where arrays are made.
"""
import ast
import hashlib
import json
import math
import os
import re
import struct
import tokenize
import zipfile
import zlib

from onlinepgs.model_io.errors import ModelFileError, describe, short
from onlinepgs.model_io.jsonvalues import MAX_JSON_DEPTH, from_json, is_float_tag, json_depth

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "read"]

FORMAT_NAME = "onlinepgs-model"
FORMAT_VERSION = 1

_HEADER_ENTRY = "header.json"
_MAX_HEADER_BYTES = 64 * 2**20
# race/: the solver states of a sigma race's other live runs (sigma="auto")
# slots/: the columns of a wide model's slots, in their order (model_io/staterows.py)
_ARRAY_NAME = re.compile(r"(state|attributes|race|slots)/[A-Za-z_][A-Za-z0-9_]*\Z")
_ARRAY_KINDS = "biufcUS"  # bool, ints, floats, complex, unicode, bytes
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def _canonical(header):
    body = {key: value for key, value in header.items() if key != "checksum"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False).encode("ascii")


def _bytes_of(arr):
    """The raw bytes of an array to store, or of one given in pieces (an object with
    ``dtype``, ``shape``, ``nbytes`` and ``pieces()``: `staterows.TakenRows`), as uint8."""
    import numpy as np

    for piece in (arr.pieces() if hasattr(arr, "pieces") else (arr,)):
        yield np.ascontiguousarray(piece).reshape(-1).view(np.uint8)


def _digest(header, arrays):
    """SHA-256 of the arrays' raw bytes (header order) and the canonical header."""
    h = hashlib.sha256()
    for entry in header["arrays"]:
        for piece in _bytes_of(arrays[entry["name"]]):
            h.update(piece)
    h.update(_canonical(header))
    return h.hexdigest()


# ---- reading ---------------------------------------------------------------------------
# What `zipfile` may raise on a damaged archive: its parsing of untrusted bytes is not
# limited to BadZipFile (e.g. NotImplementedError for a garbled version field).
_COMPRESSIONS = {zipfile.ZIP_DEFLATED: "deflate", zipfile.ZIP_BZIP2: "bzip2",
                 zipfile.ZIP_LZMA: "lzma"}
# NumPy's parse of a .npy header adds tokenize.TokenError (a garbled dict: an unclosed
# bracket), which is no SyntaxError.
_DAMAGED = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, ValueError,
            NotImplementedError, RuntimeError, OverflowError, IndexError, KeyError,
            struct.error, UnicodeDecodeError, tokenize.TokenError)


def _open_archive(path):
    try:
        return zipfile.ZipFile(path, "r")
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except (OSError,) + _DAMAGED as exc:
        hint = ""
        try:
            with open(path, "rb") as f:
                start = f.read(512)
            if start.startswith(b"PK\x03\x04"):
                raise ModelFileError(path, "corrupted file: damaged zip archive "
                                           f"({describe(exc)})") from None
            if not start:
                hint = " (the file is empty)"
            elif b"\0" not in start:
                hint = " (it looks like a text file: a data file given in place of a model?)"
        except OSError:
            pass
        raise ModelFileError(path, "not an onlinepgs model file: not a zip "
                                   f"archive{hint}") from None


class _Room:
    """The bytes of the archive not yet claimed by the entries read: each entry read is
    checked to be stored (not compressed) and to fit, so whatever an archive's directory
    claims, the entries read, and the arrays allocated for them, add up to at most the
    file's size (no zip bomb: a few KiB declaring gigabytes are refused at once)."""

    def __init__(self, zf):
        self.size = self.left = os.fstat(zf.fp.fileno()).st_size

    def claim(self, info, path):
        if info.compress_type != zipfile.ZIP_STORED:
            method = _COMPRESSIONS.get(info.compress_type, f"method {info.compress_type}")
            raise ModelFileError(path, f"entry {info.filename} is compressed ({method}): a "
                                       "model file holds stored (uncompressed) entries only, "
                                       "as save_model writes them")
        if info.compress_size != info.file_size:
            raise ModelFileError(path, f"corrupted file: the stored entry {info.filename} "
                                       f"has {info.compress_size} bytes for "
                                       f"{info.file_size} bytes of content")
        if info.file_size > self.left or info.header_offset + info.file_size > self.size:
            raise ModelFileError(path, f"corrupted file: entry {info.filename} claims "
                                       f"{info.file_size} bytes, more than the "
                                       f"{self.size}-byte file holds beside the other entries")
        self.left -= info.file_size


def _read_entry(zf, info, path, what):
    try:
        with zf.open(info) as f:
            return f.read()
    except (OSError,) + _DAMAGED as exc:
        raise ModelFileError(path, f"corrupted file: {what} is damaged "
                                   f"({describe(exc)})") from None


def _reject_constant(name):
    raise ValueError(f"{name} is not valid JSON")


def _read_raw_header(zf, path, room):
    """The header as parsed JSON (non-finite floats still tagged), format checked."""
    try:
        info = zf.getinfo(_HEADER_ENTRY)
    except KeyError:
        raise ModelFileError(path, "not an onlinepgs model file: the zip archive has no "
                                   "header.json") from None
    room.claim(info, path)
    if info.file_size > _MAX_HEADER_BYTES:
        raise ModelFileError(path, f"malformed header: header.json has {info.file_size} bytes "
                                   f"(at most {_MAX_HEADER_BYTES})")
    data = _read_entry(zf, info, path, "header.json")
    depth = json_depth(data)
    if depth > MAX_JSON_DEPTH:
        raise ModelFileError(path, f"malformed header: header.json nests {depth} levels of "
                                   f"lists and objects (at most {MAX_JSON_DEPTH})")
    try:
        header = json.loads(data.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ModelFileError(path, "malformed header: header.json is not valid JSON "
                                   f"({exc})") from None
    if not isinstance(header, dict):
        raise ModelFileError(path, "malformed header: header.json is not a JSON object")
    if header.get("format") != FORMAT_NAME:
        raise ModelFileError(path, f"not an onlinepgs model file: header format is "
                                   f"{short(header.get('format'))}, expected {FORMAT_NAME!r}")
    version = header.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ModelFileError(path, f"malformed header: format_version {short(version)} is not a "
                                   "positive integer")
    if version > FORMAT_VERSION:
        raise ModelFileError(path, f"format_version {version} was written by a newer onlinepgs "
                                   f"(this one reads format_version <= {FORMAT_VERSION}); "
                                   "upgrade onlinepgs to read it")
    for key, kind in (("estimator", str), ("params", dict), ("attributes", dict),
                      ("state", dict), ("arrays", list), ("checksum", dict)):
        if key not in header:
            raise ModelFileError(path, f"malformed header: no {key!r} field")
        if not isinstance(header[key], kind) or is_float_tag(header[key]):
            raise ModelFileError(path, f"malformed header: {key!r} is a "
                                       f"{type(from_json(header[key])).__name__}, expected "
                                       f"a {kind.__name__}")
    if not isinstance(header.get("extra", {}), dict) or is_float_tag(header.get("extra")):
        raise ModelFileError(path, "malformed header: 'extra' is not a JSON object")
    checksum = header["checksum"]
    digest = checksum.get("digest")
    if (checksum.get("algorithm") != "sha256" or not isinstance(digest, str)
            or not re.fullmatch(r"[0-9a-f]{64}", digest)):
        raise ModelFileError(path, f"malformed header: unsupported checksum {short(checksum)} "
                                   "(expected sha256 with a 64-digit hex digest)")
    _check_table(header["arrays"], path)
    return header


def _check_table(table, path):
    seen = set()
    for i, entry in enumerate(table):
        if not isinstance(entry, dict):
            raise ModelFileError(path, f"malformed header: arrays[{i}] is not a JSON object")
        name, dtype, shape = entry.get("name"), entry.get("dtype"), entry.get("shape")
        if not isinstance(name, str) or not _ARRAY_NAME.match(name):
            raise ModelFileError(path, f"malformed header: arrays[{i}] has the invalid name "
                                       f"{short(name)}")
        if name in seen:
            raise ModelFileError(path, f"malformed header: array {name} is listed twice")
        seen.add(name)
        if (_plain_dtype(dtype) is None  # numpy judges any other string
                and not _numpy_dtype_ok(dtype)):
            raise ModelFileError(path, f"malformed header: array {name} has the unsupported "
                                       f"dtype {short(dtype)}")
        if (not isinstance(shape, list)
                or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                           for n in shape)):
            raise ModelFileError(path, f"malformed header: array {name} has the invalid shape "
                                       f"{short(shape)}")
        if not isinstance(entry.get("as_object", False), bool):
            raise ModelFileError(path, f"malformed header: array {name} has a non-boolean "
                                       "as_object")


# the dtype strings numpy writes for the kinds a model file holds (`_ARRAY_KINDS`), with
# their item sizes: '<f8', '|b1', '<U12', ...
_PLAIN_DTYPE = re.compile(r"([<>|])(b1|[iu][1248]|f[248]|c8|c16|[US][1-9][0-9]{0,8})\Z")


def _plain_dtype(dtype):
    """(byte order, kind, item size) of one of numpy's plain dtype strings, else None."""
    match = _PLAIN_DTYPE.match(dtype) if isinstance(dtype, str) else None
    if match is None:
        return None
    order, code = match.groups()
    size = int(code[1:])
    return order, code[0], 4 * size if code[0] == "U" else size


def _numpy_dtype_ok(dtype):
    import numpy as np

    try:
        dt = np.dtype(dtype) if isinstance(dtype, str) else None
    except (TypeError, ValueError, SyntaxError):
        dt = None
    return not (dt is None or dt.kind not in _ARRAY_KINDS or dt.fields is not None
                or dt.itemsize == 0 or dt.subdtype is not None)


# a streamed entry is read (hashed, or cut in rows) this many bytes at a time
_SLICE_BYTES = 4 * 2**20
# a kept array's data is read (and hashed) this many bytes at a time (`_read_npy`)
_READ_BYTES = 2**20


def _read_arrays(zf, header, path, room, keep=None):
    """(every listed array that ``keep(name)`` wants, the SHA-256 object over every
    array's bytes): each entry checked against its listed dtype and shape, sizes
    against the file's before anything is allocated; an array not kept is hashed in
    slices of _SLICE_BYTES, never held (keep None: all are kept)."""
    import numpy as np

    arrays, h = {}, hashlib.sha256()
    for entry in header["arrays"]:
        name = entry["name"]
        member = name + ".npy"
        dtype, shape = np.dtype(entry["dtype"]), tuple(entry["shape"])
        try:
            info = zf.getinfo(member)
        except KeyError:
            raise ModelFileError(path, f"missing array {name}: the archive has no entry "
                                       f"{member}") from None
        room.claim(info, path)
        nbytes = dtype.itemsize * math.prod(shape)  # itemsize >= 1 (`_check_table`)
        if info.file_size < nbytes:
            raise ModelFileError(path, f"array {name} is truncated: {info.file_size} bytes for "
                                       f"{nbytes} bytes of data")
        try:
            with zf.open(info) as f:
                fortran = _npy_header(f, dtype, shape, name, path)
                if keep is None or keep(name) or (fortran and len(shape) > 1):
                    arr = _read_npy(f, dtype, shape, fortran, h)
                    if fortran:  # the checksum takes the bytes in C order
                        h.update(arr.reshape(-1).view(np.uint8))
                    arrays[name] = arr
                else:  # C order: the bytes the checksum takes, as they come
                    for data in _data_slices(f, nbytes, _SLICE_BYTES):
                        h.update(data)
        except ModelFileError:
            raise
        except (zipfile.BadZipFile, zlib.error) as exc:
            raise ModelFileError(path, f"corrupted file: {member} is damaged "
                                       f"({describe(exc)})") from None
        except (OSError, TypeError, SyntaxError, MemoryError) + _DAMAGED as exc:
            raise ModelFileError(path, f"array {name} is not a valid .npy entry "
                                       f"({describe(exc)})") from None
    return arrays, h


def _npy_header(f, dtype, shape, name, path):
    """Whether a .npy entry is in Fortran order, its header read and checked against
    the table's dtype and shape before any data is allocated."""
    from numpy.lib import format as _npy

    version = _npy.read_magic(f)
    if version == (1, 0):
        found_shape, fortran, found_dtype = _npy.read_array_header_1_0(f)
    elif version == (2, 0):
        found_shape, fortran, found_dtype = _npy.read_array_header_2_0(f)
    else:
        raise ValueError(f"unsupported .npy format version {version}")
    if found_dtype != dtype or found_shape != shape:
        raise ModelFileError(path, f"array {name} has dtype {found_dtype.str} and shape "
                                   f"{found_shape}, but the header lists dtype {dtype.str} "
                                   f"and shape {shape}")
    return fortran


def _read_npy(f, dtype, shape, fortran, h):
    """The data of one .npy entry after its header, as a C-contiguous array; an entry in
    C order added to the checksum `h` as it comes (a Fortran one is the caller's to add).

    Read _READ_BYTES at a time: zipfile reads a request whole into a new bytes object,
    and the checksum then takes each piece while it is in the cache (a 36 MB model's
    arrays loaded in 0.04 s, where one request each took 0.08 s)."""
    import numpy as np

    arr = np.empty(shape, dtype=dtype, order="F" if fortran else "C")
    buffer = memoryview(arr.reshape(-1, order="A").view(np.uint8)) if arr.size else b""
    filled = 0
    while filled < len(buffer):
        n = f.readinto(buffer[filled:filled + _READ_BYTES])
        if not n:
            raise ValueError(f"the data ends after {filled} of {len(buffer)} bytes")
        if not fortran:
            h.update(buffer[filled:filled + n])
        filled += n
    if f.read(1):  # also makes zipfile check the entry's CRC-32
        raise ValueError("data after the array's end")
    return np.ascontiguousarray(arr)


def _data_slices(f, nbytes, step):
    """The `nbytes` bytes of data left in `f`, `step` bytes at a time (the last slice
    shorter), then nothing more: the entry's CRC-32 is checked at its end."""
    left = nbytes
    while left:
        data = f.read(min(step, left))
        if not data:
            raise ValueError(f"the data ends after {nbytes - left} of {nbytes} bytes")
        left -= len(data)
        yield data
    if f.read(1):
        raise ValueError("data after the array's end")


class Archive:
    """An open model file, read in two passes without holding what is not needed:
    `read` checks the header and every array and verifies the checksum, keeping the
    arrays asked for; `rows` then reads one of the others a slice of rows at a time
    (the reported model's weights from a solver state, `onlinepgs.model_io.reported`),
    from the same open file (a model replaced meanwhile is not mixed in)."""

    def __init__(self, path):
        self.path = path
        self.zf = _open_archive(path)
        self.raw = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.zf.close()

    def read(self, verify=True, keep=None):
        """(raw header, the arrays `keep` wants, or None unless `verify`)."""
        self.header()
        return self.raw, self.arrays(keep) if verify else None

    def header(self):
        """The raw header (non-finite floats still tagged), its format checked."""
        self.room = _Room(self.zf)
        self.raw = _read_raw_header(self.zf, self.path, self.room)
        self.left = self.room.left  # what the arrays may claim, pass after pass
        return self.raw

    def arrays(self, keep=None):
        """The arrays ``keep(name)`` wants (None: all), after `header`: every array read,
        checked and hashed, and the checksum verified."""
        self.room.left = self.left
        arrays, h = _read_arrays(self.zf, self.raw, self.path, self.room, keep)
        h.update(_canonical(self.raw))
        if h.hexdigest() != self.raw["checksum"]["digest"]:
            raise ModelFileError(self.path, "corrupted file: checksum mismatch (the header "
                                            "or the arrays changed after the file was "
                                            "written)")
        return arrays

    def rows(self, name, n_rows):
        """Array `name` (C order, checked by `arrays`, not held) in slices of `n_rows`
        rows (the last one shorter), in order; the same errors as `arrays`."""
        import numpy as np

        entry = next(e for e in self.raw["arrays"] if e["name"] == name)
        dtype, shape = np.dtype(entry["dtype"]), tuple(entry["shape"])
        row_bytes = dtype.itemsize * math.prod(shape[1:])
        step = max(1, n_rows * row_bytes)
        try:
            with self.zf.open(name + ".npy") as f:
                if _npy_header(f, dtype, shape, name, self.path) and len(shape) > 1:
                    raise ValueError("an array in Fortran order is not read by rows")
                for data in _data_slices(f, row_bytes * shape[0], step):
                    yield np.frombuffer(data, dtype).reshape((-1,) + shape[1:])
        except ModelFileError:
            raise
        except (OSError, MemoryError) + _DAMAGED as exc:
            raise ModelFileError(self.path, f"corrupted file: {name}.npy is damaged "
                                            f"({describe(exc)})") from None


class _NeedsNumpy(Exception):
    """What `read_plain` leaves to `read`: it decides it, or words its error."""


def read_plain(path, keep=()):
    """(raw header, {name: (dtype, shape, bytes)} of the arrays named in `keep`) of a
    model file checked and verified as ``read(path)`` does, without numpy; None where
    `read` must decide: an entry other than numpy's plain .npy of a plain dtype (C
    order), and whatever `read` refuses in the arrays (it words the error)."""
    try:
        with _open_archive(path) as zf:
            room = _Room(zf)
            raw = _read_raw_header(zf, path, room)
            h, kept = hashlib.sha256(), {}
            for entry in raw["arrays"]:
                data = _plain_npy(zf, entry, room, path, h, entry["name"] in keep)
                if entry["name"] in keep:
                    kept[entry["name"]] = (entry["dtype"], tuple(entry["shape"]), data)
    except _NeedsNumpy:
        return None
    h.update(_canonical(raw))
    if h.hexdigest() != raw["checksum"]["digest"]:
        return None  # `read` words the mismatch
    return raw, kept


def _plain_npy(zf, entry, room, path, h, keep):
    """The data bytes of one .npy entry (added to the checksum `h`; None unless `keep`:
    then read in slices, never held whole), checked as `_read_arrays` checks it;
    _NeedsNumpy where they may not agree."""
    plain = _plain_dtype(entry["dtype"])
    if plain is None:
        raise _NeedsNumpy
    try:
        info = zf.getinfo(entry["name"] + ".npy")
    except KeyError:
        raise _NeedsNumpy from None
    room.claim(info, path)
    nbytes = plain[2] * math.prod(entry["shape"])
    if info.file_size < nbytes:
        raise _NeedsNumpy
    try:
        with zf.open(info) as f:
            start = f.read(8)
            if start[:6] != b"\x93NUMPY" or start[6:] not in (b"\x01\x00", b"\x02\x00"):
                raise _NeedsNumpy
            size = int.from_bytes(f.read(2 if start[6] == 1 else 4), "little")
            if size > 2**16:  # numpy writes a few dozen bytes
                raise _NeedsNumpy
            text = f.read(size)
            fields = ast.literal_eval(text.decode("latin1"))
            if (not isinstance(fields, dict) or fields.get("descr") != entry["dtype"]
                    or fields.get("fortran_order") is not False
                    or fields.get("shape") != tuple(entry["shape"]) or len(fields) != 3):
                raise _NeedsNumpy
            # the whole entry, or slices hashed as they come; the end checks the CRC-32
            for data in _data_slices(f, nbytes, nbytes if keep else _SLICE_BYTES):
                h.update(data)
    except (OSError, SyntaxError, MemoryError, RecursionError) + _DAMAGED:
        raise _NeedsNumpy from None
    return data if keep and nbytes else (b"" if keep else None)


def plain_values(dtype, shape, data):
    """The values of a 1-d array `read_plain` kept, as Python numbers or strings."""
    order, kind, size = _plain_dtype(dtype)
    if len(shape) != 1:
        raise ValueError(f"plain_values reads 1-d arrays, not shape {shape}")
    if kind in "US":
        text = [data[i:i + size] for i in range(0, len(data), size)]
        if kind == "S":
            return [t.rstrip(b"\0") for t in text]
        codec = "utf-32-be" if order == ">" else "utf-32-le"
        return [t.decode(codec).rstrip("\0") for t in text]
    code = _STRUCT_CODES.get((kind, size))
    if code is None:
        raise ValueError(f"plain_values reads no {dtype} arrays")
    return list(struct.unpack(f"{'>' if order == '>' else '<'}{shape[0]}{code}", data))


_STRUCT_CODES = {("b", 1): "?", ("i", 1): "b", ("i", 2): "h", ("i", 4): "i", ("i", 8): "q",
                 ("u", 1): "B", ("u", 2): "H", ("u", 4): "I", ("u", 8): "Q",
                 ("f", 2): "e", ("f", 4): "f", ("f", 8): "d"}


def read(path, *, verify=True, keep=None):
    """(raw header, arrays or None) of a model file, checked as far as `verify` asks;
    every array is read, checked and hashed, those ``keep(name)`` rejects never held
    (keep None: all are returned)."""
    with Archive(path) as archive:
        return archive.read(verify, keep)

