"""Writing a model file: `storable_array` turns an array into one the format holds
(object arrays only as strings), `write` adds the checksum to the header and writes the
archive (`onlinepgs.model_io.container` defines it and reads it) atomically, through
`onlinepgs.model_io.atomic.replace_atomically`. A large file's arrays are hashed on a
second thread while they are written (`_Hasher`), the same bytes as hashing them first.
"""
import hashlib
import json
import struct
import zipfile
import zlib

from onlinepgs.model_io.atomic import replace_atomically
from onlinepgs.model_io import container  # its header size limit, read at each save
from onlinepgs.model_io.container import (_ARRAY_KINDS, _HEADER_ENTRY, _ZIP_TIME, _bytes_of,
                                          _canonical, _digest)
from onlinepgs.model_io.errors import ModelFileError

__all__ = ["storable_array", "write"]


def storable_array(name, arr, path):
    """(array to write, table entry) for one array (or one given in pieces: `_bytes_of`);
    object arrays only as strings."""
    import numpy as np

    if hasattr(arr, "pieces"):  # a state's numbers: stored as they are
        return arr, {"name": name, "dtype": arr.dtype.str, "shape": list(arr.shape)}
    arr = np.asarray(arr)
    as_object = False
    if arr.dtype == object:
        if not all(isinstance(item, str) for item in arr.flat):
            kinds = sorted({type(item).__name__ for item in arr.flat})
            raise ModelFileError(path, f"array {name} has dtype object with {kinds} elements: "
                                       "object arrays cannot be stored (no pickle); only "
                                       "object arrays of str are converted")
        arr = arr.astype(str) if arr.size else arr.astype("<U1")
        as_object = True
    if arr.dtype.kind not in _ARRAY_KINDS or arr.dtype.fields is not None:
        raise ModelFileError(path, f"array {name} has dtype {arr.dtype}, which a model file "
                                   "cannot store (bool, int, float, complex or str only)")
    arr = np.ascontiguousarray(arr)
    entry = {"name": name, "dtype": arr.dtype.str, "shape": list(arr.shape)}
    if as_object:
        entry["as_object"] = True
    return arr, entry


def _zip_info(name, compress):
    info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
    info.compress_type = compress
    info.external_attr = 0o644 << 16
    return info


def _write_array(fileobj, arr, hasher=None):
    """One .npy entry: numpy's header (as `write_array` writes it), then the array's
    bytes as they lie in memory, or a piece at a time (`_bytes_of`): never a copy of
    the whole (`write_array` copies 16 MiB at a time into a stream that is no file).
    Each piece of the array's bytes goes to `hasher` too, if given."""
    from numpy.lib import format as _npy

    if not hasattr(arr, "pieces") and arr.dtype.kind not in "biufc":
        _npy.write_array(fileobj, arr, allow_pickle=False)
        if hasher is not None:
            for piece in _bytes_of(arr):
                hasher.add(piece)
        return
    _npy.write_array_header_1_0(fileobj, {"descr": _npy.dtype_to_descr(arr.dtype),
                                          "fortran_order": False, "shape": tuple(arr.shape)})
    for piece in _bytes_of(arr):
        fileobj.write(piece)
        if hasher is not None:
            hasher.add(piece)


def _header_bytes(header, digest, path):
    """header.json's bytes: the header with its checksum (`digest`, 64 hex digits) added,
    refused if the reader would refuse it for its size."""
    header = dict(header)
    header["checksum"] = {"algorithm": "sha256", "digest": digest}
    data = json.dumps(header, indent=1, ensure_ascii=True, allow_nan=False).encode("ascii")
    data += b"\n"
    limit = container._MAX_HEADER_BYTES
    if len(data) > limit:
        raise ModelFileError(path, f"the header would have {len(data)} bytes, more than the "
                                   f"{limit} a model file's header may have (a large extra?)")
    return data


# arrays of fewer bytes are hashed before they are written, not while (`_write_zip`)
_OVERLAP_BYTES = 1 << 20
# a digest's place in the header until the arrays are hashed: every SHA-256 digest has
# this length, so the header's bytes keep theirs when it is filled in
_PENDING_DIGEST = "0" * 64
_PENDING_FIELD = f'"digest": "{_PENDING_DIGEST}"'.encode("ascii")


def _filled(header_bytes, header, digest, path):
    """`_header_bytes` of `digest`, made from those of `_PENDING_DIGEST` (its indented
    JSON is encoded by Python's pure encoder: once per save, not once per digest)."""
    if header_bytes.count(_PENDING_FIELD) != 1:  # pragma: no cover - an extra holding it
        return _header_bytes(header, digest, path)
    return header_bytes.replace(_PENDING_FIELD, f'"digest": "{digest}"'.encode("ascii"))


class _Hasher:
    """SHA-256 of the pieces handed to `add`, taken on a thread of its own while the
    caller writes them (hashlib releases the GIL on large pieces: a model's save hashes
    and writes its arrays at once, on two cores; the digest is `_digest`'s). At most
    `DEPTH` pieces wait (a state's rows are copied a MiB at a time). Reading a file
    gained nothing from it (zipfile's reads hold the GIL between pieces): the reader
    hashes on its own thread."""

    DEPTH = 8

    def __init__(self):
        import queue
        import threading

        self._sha = hashlib.sha256()
        self._error = None
        self._pieces = queue.Queue(maxsize=self.DEPTH)
        self._thread = threading.Thread(target=self._run, name="onlinepgs-sha256",
                                        daemon=True)
        self._thread.start()

    def _run(self):
        while True:
            piece = self._pieces.get()
            if piece is None:
                return
            if self._error is None:  # after a failure, drained: `add` never blocks
                try:
                    self._sha.update(piece)
                except BaseException as exc:  # pragma: no cover - e.g. MemoryError
                    self._error = exc

    def add(self, piece):
        self._pieces.put(piece)

    def close(self):
        """Wait for the pieces given (the thread ends); also after a failed write."""
        self._pieces.put(None)
        self._thread.join()

    def digest(self, header):
        """The digest of the pieces and then the canonical header (after `close`)."""
        if self._error is not None:  # pragma: no cover
            raise self._error
        self._sha.update(_canonical(header))
        return self._sha.hexdigest()


def _write_zip(fileobj, header, arrays, path, header_bytes):
    """Write the archive: header.json (`header_bytes`: with `_PENDING_DIGEST`) and one
    .npy per array of the header's table, in its order. The checksum covers the arrays,
    so on a file that can seek the header is written as it is, the arrays are hashed on
    a second thread while they are written, and the header's digest and CRC-32 are then
    filled in where they lie: the same bytes as hashing first, which a pipe or device
    (no seek) and a small file (`_OVERLAP_BYTES`) do."""
    # stored, not deflated: saving stays a few ms on a hot path (checkpoints), and the
    # arrays of a trained model compress little anyway; readers refuse compressed entries
    compress = zipfile.ZIP_STORED
    table = header["arrays"]
    # a small file is hashed first: a thread's start would cost more than it saves
    overlap = (fileobj.seekable()
               and sum(arrays[entry["name"]].nbytes for entry in table) >= _OVERLAP_BYTES)
    if not overlap:
        header_bytes = _filled(header_bytes, header, _digest(header, arrays), path)
    with zipfile.ZipFile(fileobj, "w", compression=compress, allowZip64=True) as zf:
        info = _zip_info(_HEADER_ENTRY, compress)
        at_entry = fileobj.tell() if overlap else None
        zf.writestr(info, header_bytes)
        at_data = fileobj.tell() - len(header_bytes) if overlap else None
        hasher = _Hasher() if overlap else None
        try:
            for entry in table:
                arr = arrays[entry["name"]]
                with zf.open(_zip_info(entry["name"] + ".npy", compress), "w",
                             force_zip64=arr.nbytes > 2**30) as out:
                    _write_array(out, arr, hasher)
        finally:
            if hasher is not None:
                hasher.close()
        if hasher is not None:
            filled = _filled(header_bytes, header, hasher.digest(header), path)
            if len(filled) != len(header_bytes):  # pragma: no cover - digests are 64 digits
                raise AssertionError("the header's length changed with its digest")
            end = fileobj.tell()
            fileobj.seek(at_data)
            fileobj.write(filled)
            info.CRC = zlib.crc32(filled)  # the central directory's, written at close
            fileobj.seek(at_entry + _LOCAL_CRC_AT)
            fileobj.write(struct.pack("<I", info.CRC))
            fileobj.seek(end)


# where a zip entry's local header holds its CRC-32 (after the signature, the version
# needed, the flags, the method and the time and date)
_LOCAL_CRC_AT = 14


def write(path, header, arrays):
    """Write the archive of `header` (without checksum) and its `arrays` to `path`,
    atomically; a header the reader would refuse for its size is refused first."""
    header_bytes = _header_bytes(header, _PENDING_DIGEST, path)
    replace_atomically(path, lambda f: _write_zip(f, header, arrays, path, header_bytes))
